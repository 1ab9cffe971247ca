"""QDQ models against onnxruntime's int8 run: a small CNN, MobileNetV2
and a BERT layer quantized by onnxruntime's own quantize_static (QDQ,
per-channel, random calibration): harp's outputs within one step of the
output scale of onnxruntime's int8 run on >= 99.9% of elements (harp fuses
DQ -> Conv / Gemm / Add -> Q as onnxruntime does and computes what its
int8 kernels compute: onnx_qdq.c); the activations' zero point at the ends
of the range; the int8 kernel's fallback to the bf16 template; a conv
chain whose epilogues requantize in the int8 kernel (a NaN input too).
Split from test_onnx_quant.py (its ops); the int8 kernels' fusions are
test_onnx_quant_q8.py's.
"""
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import harp_test as ht  # noqa: E402

ht.onnx_or_skip()
import onnx  # noqa: E402
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402
from quant_models import Q8_FORCE, compile_sources, compiled_c, held_maps, init, model, ort_run, out_step, quantize_random, suite, vi  # noqa: E402

S = suite("onnx_quant_qdq")  # compiled_only, HARP_CC_OPT=1 (quant_models.suite)
RNG = np.random.default_rng(7)


def small_cnn():
    """A float CNN (conv 3x3 + relu, depthwise 3x3, conv 1x1, a residual Add,
    max pool, global average pool, Gemm) with random weights."""
    def w(*shape, k=0.3):
        return (RNG.standard_normal(shape) * k).astype(np.float32)
    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), h.make_node("Relu", ["c1"], ["r1"]),
             h.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], group=8, strides=[2, 2]),
             h.make_node("Relu", ["c2"], ["r2"]), h.make_node("Conv", ["r2", "w3", "b3"], ["c3"]),
             h.make_node("Add", ["c3", "r2"], ["c4"]),
             h.make_node("MaxPool", ["c4"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             h.make_node("GlobalAveragePool", ["p"], ["g"]), h.make_node("Flatten", ["g"], ["f"]),
             h.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1)]
    inits = [init("w1", w(8, 3, 3, 3)), init("b1", w(8)), init("w2", w(8, 1, 3, 3)), init("b2", w(8)), init("w3", w(8, 8, 1, 1)),
             init("b3", w(8)), init("wf", w(10, 8)), init("bf", w(10))]
    return model(nodes, [vi("x", T.FLOAT, [1, 3, 33, 33])], [vi("y", T.FLOAT, [1, 10]), vi("c4", T.FLOAT, [1, 8, 17, 17])], inits, opset=13)


def test_qdq_model():
    """small_cnn through quantize_static (8 random inputs to calibrate) on
    each backend, 4 inputs: within one output step of onnxruntime's int8
    run, and equal, on >= 99.9%."""
    qdq = quantize_random(small_cnn(), (1, 3, 33, 33), RNG, n=8)
    m = onnx.load(qdq)
    steps = {out: out_step(m, out) for out in ("y", "c4")}
    for out, step in steps.items():
        S.check(f"QDQ model: {out} comes from a DequantizeLinear", step is not None)
    xs = [RNG.standard_normal((1, 3, 33, 33)).astype(np.float32) for _ in range(4)]
    want = [ort_run(qdq, {"x": x}) for x in xs]
    for be in ht.BACKENDS:
        got = []
        for x in xs:
            p, d = ht.run(qdq, {"x": x}, backend=be)
            S.check(f"QDQ model ({be}): runs", p.returncode == 0, p.stderr[-600:])
            if p.returncode:
                break
            got.append({k: np.load(os.path.join(d, k + ".npy")) for k in steps})
        if len(got) < len(xs) or None in steps.values():
            continue
        for k, step in steps.items():
            err = np.abs(np.concatenate([g[k] for g in got]) - np.concatenate([w[k] for w in want])) / step
            frac, exact = float(np.mean(err <= 1.0 + 1e-3)), float(np.mean(err <= 1e-3))
            print(f"QDQ model ({be}) {k}: {frac:.4%} of {err.size} within one step, {exact:.4%} equal, max {err.max():.2f} steps")
            S.check(f"QDQ model ({be}) {k}: within one output step of onnxruntime's int8 run on >= 99.9%", frac >= 0.999, f"{frac:.4%}")
            # computed as onnxruntime's int8 kernels compute it, not as the fp32 graph: equal
            S.check(f"QDQ model ({be}) {k}: equal to onnxruntime's int8 run on >= 99.9%", exact >= 0.999, f"{exact:.4%}")


def qdq_check(name, fp32, shape):
    """fp32 model `fp32` through quant_pre_process and quantize_static (QDQ,
    per-channel, int8 activations and weights) on the cpu backend against
    onnxruntime's int8 run: within one step of the output scale on >= 99.9%,
    equal on >= 99%."""
    from onnxruntime.quantization import QuantType
    from onnxruntime.quantization.shape_inference import quant_pre_process
    d = tempfile.mkdtemp()
    raw, pre, qdq = (os.path.join(d, f"{k}.onnx") for k in ("raw", "pre", "qdq"))
    onnx.save(fp32, raw)
    quant_pre_process(raw, pre, skip_symbolic_shape=True)
    rng = np.random.default_rng(0)
    quantize_random(pre, shape, rng, n=2, qdq=qdq, activation_type=QuantType.QInt8)
    step = out_step(onnx.load(qdq), "y")
    x = rng.standard_normal(shape).astype(np.float32)
    want = ort_run(qdq, {"x": x})["y"]
    p, d = ht.run(qdq, {"x": x}, backend="cpu")
    S.check(f"QDQ {name} (cpu): runs", p.returncode == 0, p.stderr[-600:])
    if p.returncode == 0:
        err = np.abs(np.load(os.path.join(d, "y.npy")) - want) / step
        frac, exact = float(np.mean(err <= 1.0 + 1e-3)), float(np.mean(err <= 1e-3))
        print(f"QDQ {name} (cpu): {frac:.2%} within one step, {exact:.2%} equal, max {err.max():.2f} steps")
        S.check(f"QDQ {name} (cpu): within one step of onnxruntime's int8 run on >= 99.9%", frac >= 0.999, f"{frac:.2%}")
        S.check(f"QDQ {name} (cpu): equal to onnxruntime's int8 run on >= 99%", exact >= 0.99, f"{exact:.2%}")


def test_qdq_mobilenetv2():
    """MobileNetV2 1.0 at 64x64 (bench/e2e.py's weights): 53 layers deep, so
    that computing the QDQ graph in fp32 instead of as onnxruntime's int8
    kernels do shows (80% of the logits within one step, 35% equal, without
    the fusion).  On the cpu backend only (the interpreter takes long)."""
    if "cpu" not in ht.BACKENDS:
        return
    sys.path.insert(0, os.path.join(ht.SRC, "bench"))
    import e2e
    import onnx_models as om
    qdq_check("MobileNetV2", om.mobilenetv2(e2e.mobilenetv2_weights(), e2e.mobilenetv2_blocks(), hw=64), (1, 3, 64, 64))


def test_qdq_bert():
    """A BERT encoder layer (s64, E128, 4 heads; bench/e2e.py's weights) with
    int8 activations: QGemm with an fp32 bias, QLinearMatMul of two
    activations, QLinearMul, QLinearSoftmax, QLinearAdd (67% of the outputs
    equal and 97.4% within a step before the Softmax was emulated)."""
    if "cpu" not in ht.BACKENDS:
        return
    sys.path.insert(0, os.path.join(ht.SRC, "bench"))
    import e2e
    import onnx_models as om
    c = e2e.case_bert(1, 64, 128, 4, 256)
    fp32 = om.bert({k: v for k, (kind, v) in c["tensors"].items() if kind == "param"}, 1, 64, 128, 4, 256, gelu_op=True)
    qdq_check("BERT layer", fp32, (1, 64, 128))


def qdq_edges_model(zx):
    """DQ -> Conv (3x3, pads, per-channel int8 weights at -128 / 127 among
    others, int32 bias) -> Q, DQ -> MatMul (odd sizes, per-column weights) ->
    Q and DQ -> Gemm (transB, bias) -> Q, each output DQ'd; uint8 activations
    with zero point zx, half of them saturated at 0 or 255: |q - zx| reaches
    255.  Returns the path and the feeds."""
    x = (RNG.standard_normal((1, 32, 9, 11)) * 3).astype(np.float32)
    x[:, ::2] = RNG.choice(np.array([-1e3, 1e3], np.float32), x[:, ::2].shape)
    a = (RNG.standard_normal((23, 40)) * 3).astype(np.float32)
    a[::3] = RNG.choice(np.array([-1e3, 1e3], np.float32), a[::3].shape)
    w = RNG.integers(-128, 128, (16, 32, 3, 3), dtype=np.int8)
    w[:, :4] = RNG.choice(np.array([-128, 127], np.int8), w[:, :4].shape)
    wm = RNG.integers(-128, 128, (40, 19), dtype=np.int8)
    wg = RNG.integers(-128, 128, (13, 40), dtype=np.int8)
    sx, ws, wms, wgs = np.float32(0.02), (RNG.random(16) * 0.01 + 0.001).astype(np.float32), \
        (RNG.random(19) * 0.01 + 0.001).astype(np.float32), (RNG.random(13) * 0.01 + 0.001).astype(np.float32)
    b = RNG.integers(-300000, 300000, 16).astype(np.int32)
    bg = RNG.integers(-300000, 300000, 13).astype(np.int32)
    # output scales that spread the results over the 8 bits (~40 steps per sigma)
    sy, sm, sg = np.float32(3.0), np.float32(1.0), np.float32(1.0)

    def q(v, s, z):
        return h.make_node("QuantizeLinear", [v, s, z], [v + "_q"])

    def dq(v, s, z, ax=None):
        return h.make_node("DequantizeLinear", [v, s, z], [v + "_d"], **({"axis": ax} if ax is not None else {}))
    nodes = [q("x", "sx", "zx"), dq("x_q", "sx", "zx"), dq("w", "ws", "wz", 0), dq("b", "bs", "bz", 0),
             h.make_node("Conv", ["x_q_d", "w_d", "b_d"], ["c"], pads=[1, 1, 1, 1]), q("c", "sy", "zy"), dq("c_q", "sy", "zy"),
             q("a", "sx", "zx"), dq("a_q", "sx", "zx"), dq("wm", "wms", "wmz", 1),
             h.make_node("MatMul", ["a_q_d", "wm_d"], ["m"]), q("m", "sm", "zy"), dq("m_q", "sm", "zy"),
             dq("wg", "wgs", "wgz", 0), dq("bg", "bgs", "bgz", 0),
             h.make_node("Gemm", ["a_q_d", "wg_d", "bg_d"], ["g"], transB=1), q("g", "sg", "zy"), dq("g_q", "sg", "zy")]
    inits = [init("sx", sx), init("zx", np.uint8(zx)), init("w", w), init("ws", ws), init("wz", np.zeros(16, np.int8)),
             init("b", b), init("bs", (sx * ws).astype(np.float32)), init("bz", np.zeros(16, np.int32)),
             init("sy", sy), init("zy", np.uint8(128)), init("wm", wm), init("wms", wms), init("wmz", np.zeros(19, np.int8)),
             init("sm", sm), init("wg", wg), init("wgs", wgs), init("wgz", np.zeros(13, np.int8)), init("bg", bg),
             init("bgs", (sx * wgs).astype(np.float32)), init("bgz", np.zeros(13, np.int32)), init("sg", sg)]
    path = model(nodes, [vi("x", T.FLOAT, x.shape), vi("a", T.FLOAT, a.shape)],
                 [vi("c_q_d", T.FLOAT, None), vi("m_q_d", T.FLOAT, None), vi("g_q_d", T.FLOAT, None)], inits, opset=13)
    return path, {"x": x, "a": a}, {"c_q_d": sy, "m_q_d": sm, "g_q_d": sg}


def test_qdq_range_ends():
    """Fused QDQ Conv / MatMul / Gemm with the activations' zero point at
    either end (|q - z| up to 255), weights at -128 and 127, int32 biases
    past bf16's range: the contractions read their integers in bf16 (exact
    to 256) and equal onnxruntime's int8 run; the generated C multiplies
    them with vdpbf16ps, on the templates (the conv reads the bf16 buffer its
    input's producer wrote); all three run on the int8 VNNI kernel."""
    for zx in (0, 255):
        path, feeds, steps = qdq_edges_model(zx)
        want = ort_run(path, feeds)
        p, d = ht.run(path, feeds, backend="cpu", extra=Q8_FORCE)
        S.check(f"QDQ range ends zx={zx} (cpu): runs", p.returncode == 0, p.stderr[-600:])
        if p.returncode:
            continue
        for k, step in steps.items():
            got = np.load(os.path.join(d, k + ".npy"))
            err = np.abs(got.astype(np.float64) - want[k]) / step
            inside = float(np.mean((want[k] / step > -127) & (want[k] / step < 126)))
            print(f"QDQ range ends zx={zx} {k}: {np.mean(err <= 1e-3):.4%} equal, max {err.max():.2f} steps, {inside:.1%} unsaturated")
            S.check(f"QDQ range ends zx={zx} {k}: outputs not all saturated", inside > 0.5, f"{inside:.1%}")
            S.check(f"QDQ range ends zx={zx} {k}: equal to onnxruntime's int8 run", float(np.mean(err <= 1e-3)) >= 0.999 and err.max() <= 1,
                    f"{np.mean(err <= 1e-3):.4%} equal, max {err.max():.2f} steps")
    src, p = compile_sources(path, Q8_FORCE)
    S.check("QDQ range ends: harp compile runs", p.returncode == 0, p.stderr[-600:])
    S.check("QDQ range ends: the generated C multiplies with vdpbf16ps", "_mm512_dpbf16_ps" in src, f"{len(src)} bytes of C")
    # the conv, the MatMul and the Gemm (their inputs proven u8 - zx) also on the int8 VNNI kernel
    # (contract_q8.c), which runs unless model_init finds a weight not int8: the equalities above are its results
    q8 = src.count("_q8(pool, bufs);")
    S.check("QDQ range ends: conv, MatMul and Gemm on the int8 kernel (vpdpbusd)", q8 == 3 and "vpdpbusd" in src,
            f"{q8} int8 kernel calls")
    # the conv reads its input from the bf16 buffer its producer wrote: a template, not the generic loops
    generic = [ln for ln in src.splitlines() if ln.startswith("/* generic loops")]
    S.check("QDQ range ends: every contraction on a template", not generic, "; ".join(generic[:3]))


def test_int8_kernel_fallback():
    """QLinearConv of uint8 data by uint8 weights (zero point 0): the
    compiled C also has the int8 kernel (its input proven 8-bit, its weight
    a bf16 param); model_init packs the weight as int8 only when every value
    is an integer of [-128, 127] (weights up to 127), else (up to 255) the
    bf16 template runs.  Both equal to onnxruntime's."""
    x = RNG.integers(0, 256, (2, 16, 10, 9), dtype=np.uint8)
    for name, hi in (("int8 weight", 128), ("weight past int8", 256)):
        w = RNG.integers(0, hi, (24, 16, 3, 3), dtype=np.uint8)
        nodes = [h.make_node("QLinearConv", ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy"], ["y"], pads=[1, 1, 1, 1],
                             strides=[2, 1])]
        path = model(nodes, [vi("x", T.UINT8, x.shape)], [vi("y", T.UINT8, None)],
                     [init("sx", np.float32(0.05)), init("zx", np.uint8(100)), init("w", w), init("sw", np.float32(0.01)),
                      init("zw", np.uint8(0)), init("sy", np.float32(40.0)), init("zy", np.uint8(7))], opset=13)
        want = ort_run(path, {"x": x})["y"]
        p, d = ht.run(path, {"x": x}, backend="cpu", extra=Q8_FORCE)
        S.check(f"int8 kernel fallback, {name}: runs", p.returncode == 0, p.stderr[-600:])
        if p.returncode == 0:
            got = np.load(os.path.join(d, "y.npy"))
            inside = float(np.mean((want > 0) & (want < 255)))
            S.check(f"int8 kernel fallback, {name}: equal to onnxruntime", np.array_equal(got, want) and inside > 0.5,
                    f"{np.mean(got == want):.4%} equal, {inside:.1%} unsaturated")
        src, err = compiled_c(path, Q8_FORCE)
        S.check(f"int8 kernel fallback, {name}: the C has the int8 kernel", "_q8(pool, bufs);" in src, err[-300:])


def conv_chain():
    """fp32: y = relu(conv3(conv2(relu(conv1(x)))) + relu(conv1(x))), 3x3 convs
    of 16 channels on 12x12 (conv2's output has no relu: a zero point inside
    the range), as the QDQ file under a temporary directory."""
    rng = np.random.default_rng(11)
    C = 16
    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), h.make_node("Relu", ["c1"], ["r1"]),
             h.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
             h.make_node("Conv", ["c2", "w3", "b3"], ["c3"], pads=[1, 1, 1, 1]),
             h.make_node("Add", ["c3", "r1"], ["a"]), h.make_node("Relu", ["a"], ["y"])]
    inits = [init(f"{k}{i}", (rng.standard_normal((C, C, 3, 3) if k == "w" else C) * 0.15).astype(np.float32))
             for i in (1, 2, 3) for k in ("w", "b")]
    fp32 = model(nodes, [vi("x", T.FLOAT, [1, C, 12, 12])], [vi("y", T.FLOAT, [1, C, 12, 12])], inits, opset=13)
    return quantize_random(fp32, (1, C, 12, 12), rng)


def test_requant_epilogue():
    """A QDQ chain of convs with a residual add on the int8 kernel: the convs
    whose epilogue is a requantization (bias, per-channel multiplier, rint,
    zero point, clamp) have the int8 kernel write the bytes itself
    (contract_q8.c, cgen_qgemm's F_requant), equal to onnxruntime's int8 run;
    a NaN in the input runs the template (as HARP_INT8=off does), not a 0."""
    qdq = conv_chain()
    step = out_step(onnx.load(qdq), "y")
    xs = [RNG.standard_normal((1, 16, 12, 12)).astype(np.float32) for _ in range(2)]
    for i, x in enumerate(xs):
        want = ort_run(qdq, {"x": x})["y"]
        p, d = ht.run(qdq, {"x": x}, backend="cpu", extra=Q8_FORCE)
        S.check(f"requant epilogue, input {i}: runs", p.returncode == 0, p.stderr[-600:])
        if p.returncode == 0:
            err = np.abs(np.load(os.path.join(d, "y.npy")) - want) / step
            exact, inside = float(np.mean(err <= 1e-3)), float(np.mean(want > 0))
            print(f"requant epilogue, input {i}: {exact:.4%} equal, max {err.max():.2f} steps, {inside:.1%} above 0")
            S.check(f"requant epilogue, input {i}: equal to onnxruntime's int8 run", exact >= 0.999 and err.max() <= 1 and inside > 0.3,
                    f"{exact:.4%} equal, max {err.max():.2f} steps, {inside:.1%} above 0")
    src, err = compiled_c(qdq, Q8_FORCE)
    rq = src.count("its epilogue requantizing to bytes")
    # conv1 (relu: clamp [z, 255]), conv2 (zero point inside) and conv3, whose output the add (with conv1's) and
    # the relu requantize again in the same kernel's output pass
    S.check("requant epilogue: conv1, conv2 and conv3 + the add requantize in the int8 kernel",
            rq == 3 and src.count("a tensor added, requantized again") == 1 and "_requant((char *)wp + 64" in src,
            f"{rq} kernels; {err[-300:]}")
    # conv2's output, read by conv3 alone, stays bytes between them: conv2's kernel writes them, conv3's reads them;
    # conv1's, read by conv2 and added by conv3's output pass, too (q8_hold.c); and x's, which the input's Q map
    # writes as held bytes (contract_rows_c.c's map_q8_out) for conv1: three held inputs, no input pass, one
    # output pass (conv3's: the add)
    S.check("requant epilogue: x -> conv1, conv1 -> conv2, conv3's add and conv2 -> conv3 held as bytes",
            src.count("held as the output") == 2 and src.count("the input held as u8") == 3 and
            src.count("the tensor added held as bytes") == 1 and held_maps(src) == 1 and
            src.count("_q8in, &cx);") == 0 and src.count("_q8out, &cx);") == 1,
            f"{src.count('held as the output')} held outputs, {src.count('the input held as u8')} held inputs, "
            f"{src.count('the tensor added held as bytes')} held added, {held_maps(src)} held Q maps, "
            f"{src.count('_q8in, &cx);')} input passes, {src.count('_q8out, &cx);')} output passes")
    # a NaN in the input: conv1 runs its template (which propagates it); conv1's output is held as bytes, where
    # a NaN becomes byte 0 (onnxruntime's QuantizeLinear makes q = 0 of it): y has no NaN, as onnxruntime's int8
    # run has none; beyond the NaN's reach (int8=off's NaN), the same as with the int8 kernels off
    x = xs[0].copy()
    x[0, 3, 5, 5] = np.nan
    outs = []
    # the held bytes (int8=off adds in an elementwise kernel, where the NaN stays a NaN)
    for knob in (Q8_FORCE, ["--knob", "int8=off"]):
        p, d = ht.run(qdq, {"x": x}, backend="cpu", extra=knob)
        S.check(f"requant epilogue, NaN input {knob[1]}: runs", p.returncode == 0, p.stderr[-600:])
        outs.append(np.load(os.path.join(d, "y.npy")) if p.returncode == 0 else None)
    if outs[0] is not None and outs[1] is not None:
        got, off = outs
        far = ~np.isnan(off)
        ref = ort_run(qdq, {"x": x})["y"]
        ok = np.isnan(off).any() and not np.isnan(got).any() and not np.isnan(ref).any() and np.array_equal(got[far], off[far])
        S.check("requant epilogue: a NaN input held as byte 0, no NaN in y (as onnxruntime), equal to int8=off beyond its reach", ok,
                f"{int(np.isnan(got).sum())} vs {int(np.isnan(off).sum())} NaN (onnxruntime {int(np.isnan(ref).sum())}), "
                f"{float(np.mean(got[far] == off[far])):.4%} equal beyond")


test_qdq_model()
test_qdq_mobilenetv2()
test_qdq_bert()
test_qdq_range_ends()
test_int8_kernel_fallback()
test_requant_epilogue()
S.close()
