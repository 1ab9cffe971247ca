"""The int8 kernels' fusions of QDQ graphs against onnxruntime's int8 run,
on the cpu backend with the int8 kernels forced (these models are too
small for them to pay): the depthwise kernel (contract_q8dw.c; odd sizes,
zero points at the ends, strides, pads, dilation), its input and output
held as bytes in an inverted residual and a chain; a narrow (bf16)
operand kept between convs; which convs go int8 by the templates' cost;
the QDQ residual Add as the conv's epilogue step (exact and fused), held
as bytes between blocks; downsampling blocks with a projection.  Split
from test_onnx_quant.py (its ops; the quantize_static models are
test_onnx_quant_qdq.py's).
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import harp_test as ht  # noqa: E402

ht.onnx_or_skip()
import onnx  # noqa: E402
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402
from quant_models import Q8_FORCE, Q8_FUSED, compiled_c, held_maps, init, model, ort_run, out_step, quantize_random, suite, vi  # noqa: E402

S = suite("onnx_quant_q8")  # compiled_only, HARP_CC_OPT=1 (quant_models.suite)
RNG = np.random.default_rng(7)


def test_q8_depthwise():
    """DQ -> depthwise Conv -> Q on the int8 depthwise kernel
    (contract_q8dw.c): 13 channels of odd sizes, per-channel int8 weights
    with -128 / 127 among them, int32 biases, the input's zero point at 0,
    255 and inside, strides 1 and 2, asymmetric pads, a 5x5 dilated window;
    equal to onnxruntime's int8 run (its QLinearConv)."""
    cases = [(0, 1, [1, 1, 1, 1], 3, 1), (255, 2, [0, 1, 2, 1], 3, 1), (77, 2, [4, 3, 4, 3], 5, 2), (128, 2, [1, 0, 1, 2], 3, 1)]
    for zx, st, pads, k, dil in cases:
        C = 13
        x = (RNG.standard_normal((2, C, 15, 11)) * 3).astype(np.float32)
        x[:, ::3] = RNG.choice(np.array([-1e3, 1e3], np.float32), x[:, ::3].shape)
        w = RNG.integers(-128, 128, (C, 1, k, k), dtype=np.int8)
        w[::2, :, 0] = RNG.choice(np.array([-128, 127], np.int8), w[::2, :, 0].shape)
        ws = (RNG.random(C) * 0.01 + 0.001).astype(np.float32)
        sx, sy = np.float32(0.02), np.float32(1.5)
        nodes = [h.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]), h.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
                 h.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0),
                 h.make_node("DequantizeLinear", ["b", "bs", "bz"], ["bd"], axis=0),
                 h.make_node("Conv", ["xd", "wd", "bd"], ["c"], group=C, strides=[st, st], pads=pads, dilations=[dil, dil]),
                 h.make_node("QuantizeLinear", ["c", "sy", "zy"], ["cq"]), h.make_node("DequantizeLinear", ["cq", "sy", "zy"], ["y"])]
        inits = [init("sx", sx), init("zx", np.uint8(zx)), init("w", w), init("ws", ws), init("wz", np.zeros(C, np.int8)),
                 init("b", RNG.integers(-30000, 30000, C).astype(np.int32)), init("bs", (sx * ws).astype(np.float32)),
                 init("bz", np.zeros(C, np.int32)), init("sy", sy), init("zy", np.uint8(120))]
        path = model(nodes, [vi("x", T.FLOAT, x.shape)], [vi("y", T.FLOAT, None)], inits, opset=13)
        name = f"int8 depthwise zx={zx} stride {st} {k}x{k} dil {dil}"
        want = ort_run(path, {"x": x})["y"]
        p, d = ht.run(path, {"x": x}, backend="cpu")
        S.check(f"{name}: runs", p.returncode == 0, p.stderr[-600:])
        if p.returncode == 0:
            got = np.load(os.path.join(d, "y.npy"))
            err = np.abs(got.astype(np.float64) - want) / sy
            inside = float(np.mean((want / sy > -119) & (want / sy < 134)))
            print(f"{name}: {np.mean(err <= 1e-3):.4%} equal, max {err.max():.2f} steps, {inside:.1%} unsaturated")
            S.check(f"{name}: equal to onnxruntime's int8 run", got.shape == want.shape and float(np.mean(err <= 1e-3)) >= 0.999 and
                    err.max() <= 1 and inside > 0.5, f"{np.mean(err <= 1e-3):.4%} equal, max {err.max():.2f}, {inside:.1%} unsaturated")
    # the last case's x: its Q map writes held bytes that the depthwise kernel reads (its only reader)
    src, err = compiled_c(path)
    S.check("int8 depthwise: on the int8 depthwise kernel, x's Q bytes held", held_maps(src) == 1 and
            src.count("the int8 depthwise kernel (the input held as bytes") == 1, err[-300:])


def inverted_residual(relu6=True):
    """fp32 MobileNetV2 block at odd sizes, y = x + project(relu6(dw3x3(relu6(expand(x))))),
    16 -> 48 -> 16 channels on 13x11 (relu6=False: no activations, the zero
    points of the depthwise conv's input and output inside the range), as the
    QDQ file under a temporary directory."""
    rng = np.random.default_rng(5)
    C, E = 16, 48

    r1, r2 = ("r1", "r2") if relu6 else ("c1", "c2")
    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c1"]), h.make_node("Conv", [r1, "w2", "b2"], ["c2"], group=E, pads=[1, 1, 1, 1]),
             h.make_node("Conv", [r2, "w3", "b3"], ["c3"]), h.make_node("Add", ["c3", "x"], ["y"])]
    if relu6:
        nodes[1:1] = [h.make_node("Clip", ["c1", "lo", "hi"], ["r1"])]
        nodes[3:3] = [h.make_node("Clip", ["c2", "lo", "hi"], ["r2"])]
    shapes = {"w1": (E, C, 1, 1), "b1": (E,), "w2": (E, 1, 3, 3), "b2": (E,), "w3": (C, E, 1, 1), "b3": (C,)}
    inits = [init(k, (rng.standard_normal(v) * 0.3).astype(np.float32)) for k, v in shapes.items()]
    inits += [init("lo", np.float32(0)), init("hi", np.float32(6))]
    fp32 = model(nodes, [vi("x", T.FLOAT, [1, C, 13, 11])], [vi("y", T.FLOAT, [1, C, 13, 11])], inits, opset=13)
    return quantize_random(fp32, (1, C, 13, 11), rng)


def test_q8_depthwise_held():
    """An inverted-residual block: the 1x1 expand writes bytes, the int8
    depthwise kernel reads them and writes bytes, the 1x1 project reads them
    (q8_hold.c): no conversion pass between the three; equal to onnxruntime's
    int8 run.  With relu6 (zero points 0) and without (zero points inside)."""
    for relu6 in (True, False):
        name = f"int8 depthwise held, relu6={relu6}"
        qdq = inverted_residual(relu6)
        m = onnx.load(qdq)
        inits = {i.name: nh.to_array(i) for i in m.graph.initializer}
        step = out_step(m, "y")
        zps = [int(inits[n.input[2]]) for n in m.graph.node if n.op_type == "QuantizeLinear" and n.input[0] in ("r1", "r2", "c1", "c2")]
        x = RNG.standard_normal((1, 16, 13, 11)).astype(np.float32)
        want = ort_run(qdq, {"x": x})["y"]
        p, d = ht.run(qdq, {"x": x}, backend="cpu", extra=Q8_FORCE)
        S.check(f"{name}: runs", p.returncode == 0, p.stderr[-600:])
        if p.returncode == 0:
            err = np.abs(np.load(os.path.join(d, "y.npy")) - want) / step
            exact = float(np.mean(err <= 1e-3))
            print(f"{name}: {exact:.4%} equal, max {err.max():.2f} steps, zero points {zps}")
            S.check(f"{name}: equal to onnxruntime's int8 run", exact >= 0.999 and err.max() <= 1 and
                    all((z == 0) == relu6 for z in zps), f"{exact:.4%} equal, max {err.max():.2f} steps, zero points {zps}")
        # expand -> depthwise -> project held; and x's Q map writes held bytes for the expand: two 1x1 convs
        # reading bytes (the expand x's, the project the depthwise's), one writing them (the expand)
        src, err = compiled_c(qdq, Q8_FORCE)
        S.check(f"{name}: input and output held as bytes",
                src.count("the int8 depthwise kernel (the input held as bytes, the output held as bytes)") == 1 and
                src.count("held as the output") == 1 and src.count("the input held as u8") == 2 and held_maps(src) == 1,
                f"{src.count('held as the output')} held outputs, {src.count('the input held as u8')} held inputs, "
                f"{held_maps(src)} held Q maps {err[-300:]}")


def test_q8_depthwise_chain():
    """Two int8 depthwise convs in a row, then a 1x1 conv too small to pay
    for the int8 kernel (it stays on the bf16 template): the first, unpadded,
    leaves its plane in the per-thread scratch where the second, padded and
    strided, must find zeros at its padding (contract_q8dw.c's <fn>_dwpad);
    the second's output, stored as bf16 for the template, takes the exact
    store of 8-bit integers.  Equal to onnxruntime's int8 run."""
    rng = np.random.default_rng(11)
    C = 13
    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c1"], group=C), h.make_node("Relu", ["c1"], ["r1"]),
             h.make_node("Conv", ["r1", "w2", "b2"], ["c2"], group=C, pads=[1, 1, 1, 1], strides=[2, 2]),
             h.make_node("Conv", ["c2", "w3", "b3"], ["y"])]
    shapes = {"w1": (C, 1, 3, 3), "b1": (C,), "w2": (C, 1, 3, 3), "b2": (C,), "w3": (C, C, 1, 1), "b3": (C,)}
    inits = [init(k, (rng.standard_normal(v) * 0.5).astype(np.float32)) for k, v in shapes.items()]
    fp32 = model(nodes, [vi("x", T.FLOAT, [2, C, 15, 13])], [vi("y", T.FLOAT, None)], inits, opset=13)
    qdq = quantize_random(fp32, (2, C, 15, 13), rng)
    step = out_step(onnx.load(qdq), "y")
    x = (rng.standard_normal((2, C, 15, 13)) * 2).astype(np.float32)
    want = ort_run(qdq, {"x": x})["y"]
    p, d = ht.run(qdq, {"x": x}, backend="cpu")
    S.check("int8 depthwise chain: runs", p.returncode == 0, p.stderr[-600:])
    if p.returncode == 0:
        err = np.abs(np.load(os.path.join(d, "y.npy")) - want) / step
        exact = float(np.mean(err <= 1e-3))
        print(f"int8 depthwise chain: {exact:.4%} equal, max {err.max():.2f} steps")
        S.check("int8 depthwise chain: equal to onnxruntime's int8 run", exact >= 0.999 and err.max() <= 1,
                f"{exact:.4%} equal, max {err.max():.2f} steps")
    src, err = compiled_c(qdq)
    S.check("int8 depthwise chain: two int8 depthwise kernels, the second's bf16 output stored exactly",
            src.count("the int8 depthwise kernel (") == 2 and "_mm512_srli_epi32(_mm512_castps_si512(v), 16)" in src, err[-300:])


def bottleneck():
    """fp32 ResNet bottleneck, y = relu(x + conv1x1(relu(conv3x3(relu(conv1x1(x)))))),
    128 -> 32 -> 128 channels on 14x14, as the QDQ file under a temporary directory."""
    rng = np.random.default_rng(3)
    C, E = 128, 32
    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c1"]), h.make_node("Relu", ["c1"], ["r1"]),
             h.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]), h.make_node("Relu", ["c2"], ["r2"]),
             h.make_node("Conv", ["r2", "w3", "b3"], ["c3"]), h.make_node("Add", ["c3", "x"], ["a"]), h.make_node("Relu", ["a"], ["y"])]
    shapes = {"w1": (E, C, 1, 1), "b1": (E,), "w2": (E, E, 3, 3), "b2": (E,), "w3": (C, E, 1, 1), "b3": (C,)}
    inits = [init(k, (rng.standard_normal(v) * (1 / np.sqrt(np.prod(v[1:])) if len(v) > 1 else 0.1)).astype(np.float32))
             for k, v in shapes.items()]
    fp32 = model(nodes, [vi("x", T.FLOAT, [1, C, 14, 14])], [vi("y", T.FLOAT, [1, C, 14, 14])], inits, opset=13)
    return quantize_random(fp32, (1, C, 14, 14), rng)


def check_within_step(tag, qdq, feeds, outs, extra=()):
    """Runs QDQ model qdq on feeds on the cpu (harp run with extra): each
    output named in outs within one step of its DequantizeLinear's scale of
    onnxruntime's int8 run on >= 99.9% of its elements, at most 2 steps."""
    want = ort_run(qdq, feeds)
    m = onnx.load(qdq)
    p, d = ht.run(qdq, feeds, backend="cpu", extra=list(extra))
    S.check(f"{tag}: runs", p.returncode == 0, p.stderr[-600:])
    for y in outs if p.returncode == 0 else ():
        step = out_step(m, y)
        e = np.abs(np.load(os.path.join(d, y + ".npy")) - want[y]) / step
        within = float(np.mean(e <= 1 + 1e-3))
        print(f"{tag}: {y} {within:.4%} within one step, max {e.max():.2f} steps")
        S.check(f"{tag}: {y} within one step of onnxruntime's int8 run", within >= 0.999 and e.max() <= 2,
                f"{within:.4%} within one step, max {e.max():.2f} steps")


def test_narrow_operand_kept():
    """A QDQ bottleneck: each conv's u8 output is stored as bf16 (exact) and
    the next conv converts it as it reads it (its operand cast), so the next
    conv multiplies bf16 by bf16.  Region selection must not make the cast
    to fp32 its producer's epilogue instead (the next conv would then read
    fp32: the slower mixed template; ResNet-50 int8 ran 8% slower so):
    every contraction that reads another's output reads it as bf16.  The
    output within one step of onnxruntime's int8 run."""
    qdq = bottleneck()
    d = tempfile.mkdtemp(prefix="harp_py_nar_")
    # the uncalibrated cost model (as CI has it): its estimates leave main's rule a near tie
    p = subprocess.run([ht.HARP, "dump", qdq, "--dump", "region", "--dump-dir", d], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "HARP_CPU_CALIB": "off"})
    S.check("narrow operand: dump runs", p.returncode == 0, p.stderr[-600:])
    if p.returncode == 0:
        regions = json.load(open(os.path.join(d, "region.json")))["regions"]
        made = {o["name"]: r for r in regions for o in r["outputs"]}
        reads = [(r["name"], i["name"], i["memref"]["dtype"]) for r in regions if r["kind"] == "contraction" for i in r["inputs"]
                 if i["name"] in made and made[i["name"]]["kind"] == "contraction"]
        print("narrow operand: reads", reads)
        S.check("narrow operand: a conv reads the conv before it as bf16", len(reads) == 2 and all(t == "bf16" for _, _, t in reads),
                f"{reads}")
    check_within_step("narrow operand", qdq, {"x": RNG.standard_normal((1, 128, 14, 14)).astype(np.float32)}, ["y"])


def two_convs(grouped=False):
    """fp32: y1 = relu(conv1x1 stride 2 (x)) 256 -> 512 and y2 = relu(conv1x1 (x))
    256 -> 128 on x of 14x14, both at M N K / (input + output elements) 85.3
    (ResNet-50's conv2d_354 and cast_377), as the QDQ file under a temporary directory;
    grouped: a third output y3 = a 1x1 conv of x in 2 groups (256 -> 8, on no int8 kernel),
    so that x's bytes have a reader that is no int8 kernel and are not held."""
    rng = np.random.default_rng(13)
    C = 256
    nodes = [h.make_node("Conv", ["x", "ws", "bs"], ["cs"], strides=[2, 2]), h.make_node("Relu", ["cs"], ["y1"]),
             h.make_node("Conv", ["x", "wg", "bg"], ["cg"]), h.make_node("Relu", ["cg"], ["y2"])]
    shapes = {"ws": (512, C, 1, 1), "bs": (512,), "wg": (128, C, 1, 1), "bg": (128,)}
    outs = [vi("y1", T.FLOAT, [1, 512, 7, 7]), vi("y2", T.FLOAT, [1, 128, 14, 14])]
    if grouped:
        nodes.append(h.make_node("Conv", ["x", "wq", "bq"], ["y3"], group=2))
        shapes.update({"wq": (8, C // 2, 1, 1), "bq": (8,)})
        outs.append(vi("y3", T.FLOAT, [1, 8, 14, 14]))
    inits = [init(k, (rng.standard_normal(v) * (1 / np.sqrt(C) if len(v) > 1 else 0.1)).astype(np.float32)) for k, v in shapes.items()]
    fp32 = model(nodes, [vi("x", T.FLOAT, [1, C, 14, 14])], outs, inits, opset=13)
    return quantize_random(fp32, (1, C, 14, 14), rng)


def test_q8_pays_by_template():
    """Which convs take the int8 kernel by default (cc_q8_pays, contract_q8.c):
    at the same ratio of multiply-adds to converted elements (85.3), with
    HARP_AMX off the strided 1x1 conv (the direct conv template, ~1.5x the
    GEMM template's time a multiply-add) goes int8 and the stride-1 1x1 (the
    GEMM template) stays bf16; on a CPU with AMX-INT8 (the variant on,
    Q8_AMX) both go int8 — x's bytes not held (a grouped conv, no int8
    kernel, reads them too).  With x's bytes held (the two convs its only
    readers: its Q map writes them, q8_hold.c) the input costs no conversion
    pass and the ratio is K = 256, so both go int8 either way.  The outputs
    within one step of onnxruntime's int8 run, each way."""
    amx = "amx_int8" in open("/proc/cpuinfo").read()
    x = RNG.standard_normal((1, 256, 14, 14)).astype(np.float32)
    for grouped in (True, False):
        qdq = two_convs(grouped)
        outs = ["y1", "y2", "y3"] if grouped else ["y1", "y2"]
        for knobs, expect in ((["--knob", "amx=off"], ["y1"] if grouped else ["y1", "y2"]),
                              ([], ["y1", "y2"] if amx or not grouped else ["y1"])):
            tag = f"q8 pays by template ({' '.join(knobs) or 'default'}, x {'not held' if grouped else 'held'})"
            src, err = compiled_c(qdq, knobs)
            names = dict(re.findall(r"/\* kernel (\d+): region (\w+) \*/", src))  # the kernels by the regions' names (their outputs')
            q8 = sorted(names.get(k, "?") for k in re.findall(r"static int \w+?_k(\d+)_q8\(hprt_pool", src))
            print(f"{tag}: int8 kernels of", q8, "of", sorted(names.values()), f"{held_maps(src)} held Q maps")
            S.check(f"{tag}: int8 kernels {expect}", q8 == expect and "y2" in names.values() and held_maps(src) == (0 if grouped else 1),
                    f"{q8}, {held_maps(src)} held Q maps {err[-300:]}")
            check_within_step(tag, qdq, {"x": x}, outs, knobs)


def check_fused_residual(name, path, feeds, sy, zs, knobs=Q8_FORCE):
    """Runs QDQ model path (output y of scale sy, zero points zs) on feeds with
    the int8 kernels forced: equal to onnxruntime's int8 run, bit for bit in
    the default exact mode (qdq_add=exact), within one step on >= 99.9% with
    qdq_add=fused (and not mostly saturated), and the residual sum in one
    int8 conv's epilogue: no kernel writes the conv's sums for another to add
    the tensor to, none adds apart."""
    exact_mode = "qdq_add=fused" not in knobs
    want = ort_run(path, feeds)["y"]
    p, d = ht.run(path, feeds, backend="cpu", extra=knobs)
    S.check(f"{name}: runs", p.returncode == 0, p.stderr[-600:])
    if p.returncode == 0:
        got = np.load(os.path.join(d, "y.npy"))
        err = np.abs(got.astype(np.float64) - want) / sy
        exact = float(np.mean(err <= 1e-3))
        yq = np.rint(want / sy) + zs[3]
        inside = float(np.mean((yq > 0) & (yq < 255)))
        print(f"{name}: {exact:.4%} equal, max {err.max():.2f} steps, {inside:.1%} unsaturated")
        ok = got.shape == want.shape and (np.array_equal(got, want) if exact_mode else exact >= 0.999 and err.max() <= 1) and inside > 0.3
        S.check(f"{name}: equal to onnxruntime's int8 run{' bit for bit' if exact_mode else ''}", ok,
                f"{exact:.4%} equal, max {err.max():.2f} steps, {inside:.1%} unsaturated")
    src, err = compiled_c(path, knobs)
    kernels = re.findall(r"/\* kernel \d+: region ([\w.]+) \*/", src)
    # exact: onnxruntime's two fused multiply-adds in the output pass, in its order (contract_q8.c's q8_resfma)
    fma = all(len(re.findall(r"v = fmaf\(", f)) == 1 for f in re.findall(r"static void \w+_q8out\(.*?\n}\n", src, re.S)
              if "fmaf(" in f)
    S.check(f"{name}: the sum in the int8 conv's epilogue", not any(n.endswith(".reduce") for n in kernels) and
            src.count("its epilogue requantizing to bytes, a tensor added, requantized again") == 1 and
            # exact: the fmaf twice, the output pass's and its run-time fallback's (<fn>_q8slow's rows)
            (src.count("v = fmaf(") == 2 and src.count("_q8slow(pool, bufs)") == 1 and fma if exact_mode
             else "v = fmaf(" not in src),
            f"{kernels} {src.count('v = fmaf(')} fmaf steps {err[-300:]}")


def residual_model(k, zs, relu, sum_op, skip_first):
    """Handmade QDQ residual block: y = Q(relu?(DQ(Q(conv_k x k(DQ(Q(x))))) +
    DQ(Q(s)))) of 13 channels on 9x7, batch 2, per-channel int8 weights with
    -128 / 127 among them, int32 biases; zs the zero points of x, of the
    conv's output, of the skip s and of y (at the range's ends among them);
    the sum as an Add or a Sum, the skip its first or second operand; the
    skip also the input of a second conv of the same weight (output z), as
    a real model's skip is the next block's input too."""
    C, zx, zc, zk, zy = 13, *zs
    w = RNG.integers(-128, 128, (C, C, k, k), dtype=np.int8)
    w[::3, 0, 0, 0] = RNG.choice(np.array([-128, 127], np.int8), w[::3, 0, 0, 0].shape)
    ws = (RNG.random(C) * 0.004 + 0.001).astype(np.float32)
    sx, sc, sk, sy = np.float32(0.03), np.float32(0.11), np.float32(0.05), np.float32(0.13)
    conv, skip = "cd", "sd"
    ops = [skip, conv] if skip_first else [conv, skip]
    nodes = [h.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]), h.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             h.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0),
             h.make_node("DequantizeLinear", ["b", "bs", "bz"], ["bd"], axis=0),
             h.make_node("Conv", ["xd", "wd", "bd"], ["c"], pads=[k // 2] * 4),
             h.make_node("QuantizeLinear", ["c", "sc", "zc"], ["cq"]), h.make_node("DequantizeLinear", ["cq", "sc", "zc"], ["cd"]),
             h.make_node("QuantizeLinear", ["s", "sk", "zk"], ["sq"]), h.make_node("DequantizeLinear", ["sq", "sk", "zk"], ["sd"]),
             h.make_node("Sum" if sum_op else "Add", ops, ["a"])]
    nodes += [h.make_node("Conv", ["sd", "wd", "bd"], ["c2"], pads=[k // 2] * 4),
              h.make_node("QuantizeLinear", ["c2", "sc", "zc"], ["c2q"]), h.make_node("DequantizeLinear", ["c2q", "sc", "zc"], ["z"])]
    nodes += [h.make_node("Relu", ["a"], ["r"])] if relu else []
    nodes += [h.make_node("QuantizeLinear", ["r" if relu else "a", "sy", "zy"], ["yq"]),
              h.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["y"])]
    u8 = lambda v: np.uint8(v)  # noqa: E731
    inits = [init("sx", sx), init("zx", u8(zx)), init("w", w), init("ws", ws), init("wz", np.zeros(C, np.int8)),
             init("b", RNG.integers(-3000, 3000, C).astype(np.int32)), init("bs", (sx * ws).astype(np.float32)),
             init("bz", np.zeros(C, np.int32)), init("sc", sc), init("zc", u8(zc)), init("sk", sk), init("zk", u8(zk)),
             init("sy", sy), init("zy", u8(zy))]
    shape = [2, C, 9, 7]
    return model(nodes, [vi("x", T.FLOAT, shape), vi("s", T.FLOAT, shape)], [vi("y", T.FLOAT, None), vi("z", T.FLOAT, None)], inits,
                 opset=13), sy


def test_q8_residual():
    """The QDQ residual add fused into the int8 conv's epilogue (onnx_qdq.c's
    ox_qdq_binary, contract_q8.c's q8_requant post steps): the conv's output
    requantized, the skip added as stored, the sum requantized, in the int8
    kernel's output pass — as an Add (onnxruntime's QLinearAdd) or a Sum
    then a Relu (fp32 in onnxruntime, as in ResNet-50's QDQ file); 3x3
    (the direct conv template) and 1x1 (the GEMM template) convs, the skip
    either operand, zero points at the range's ends; batch 2.  Equal to
    onnxruntime's int8 run; one kernel for the conv and the sum (the
    quantizations of x and s besides), not a separate elementwise one."""
    cases = [(3, (0, 255, 0, 0), True, True, False), (1, (255, 0, 255, 128), False, False, True),
             (1, (77, 128, 0, 3), True, False, False), (3, (128, 3, 255, 250), False, True, True)]
    for k, zs, relu, sum_op, skip_first in cases:
        name = f"q8 residual {k}x{k} zero points {zs} {'Sum' if sum_op else 'Add'}{' Relu' if relu else ''}{' skip first' if skip_first else ''}"
        path, sy = residual_model(k, zs, relu, sum_op, skip_first)
        x = (RNG.standard_normal((2, 13, 9, 7)) * 3).astype(np.float32)
        s = (RNG.standard_normal((2, 13, 9, 7)) * 4).astype(np.float32)
        check_fused_residual(name, path, {"x": x, "s": s}, sy, zs)
        if k == 1 and relu:  # the fused form (qdq_add=fused) too: a residual step, within one step
            check_fused_residual(name + " (qdq_add=fused)", path, {"x": x, "s": s}, sy, zs, Q8_FUSED)


def two_blocks():
    """fp32: two residual blocks as ResNet's, h1 = conv1x1(relu(conv1x1(x))) + x (no
    Relu: h1's zero point inside the range), h2 = relu(the same of h1), y = conv1x1(h2),
    32 channels on 14x14, as the QDQ file
    (quantize_static) under a temporary directory: h1 is the input of block 2's
    first conv and the tensor its residual add reads."""
    rng = np.random.default_rng(29)
    C = 32
    nodes, inits = [], []
    for i, (src, dst) in enumerate((("x", "h1"), ("h1", "h2"))):
        for j, (a, b) in enumerate(((src, f"t{i}"), (f"t{i}", f"u{i}"))):
            inits += [init(f"w{i}{j}", (rng.standard_normal((C, C, 1, 1)) / np.sqrt(C)).astype(np.float32)),
                      init(f"b{i}{j}", (rng.standard_normal(C) * 0.1).astype(np.float32))]
            nodes.append(h.make_node("Conv", [a, f"w{i}{j}", f"b{i}{j}"], [b + "c" if j else b + "p"]))
            if not j:
                nodes.append(h.make_node("Relu", [b + "p"], [b]))
        nodes += [h.make_node("Add", [f"u{i}c", src], [f"s{i}" if i else dst])] + ([h.make_node("Relu", [f"s{i}"], [dst])] if i else [])
    inits += [init("wy", (rng.standard_normal((16, C, 1, 1)) / np.sqrt(C)).astype(np.float32)), init("by", np.zeros(16, np.float32))]
    nodes.append(h.make_node("Conv", ["h2", "wy", "by"], ["y"]))
    fp32 = model(nodes, [vi("x", T.FLOAT, [1, C, 14, 14])], [vi("y", T.FLOAT, [1, 16, 14, 14])], inits, opset=13)
    return quantize_random(fp32, (1, C, 14, 14), rng)


def test_q8_residual_held():
    """The residual stream held as bytes (q8_hold.c, contract_q8.c's
    q8_res_buf / q8_post_zo): block 1's output, which its residual kernel's
    output pass requantizes a second time, stays bytes, read by block 2's
    first conv as its input and by block 2's residual kernel as the tensor
    it adds; the int8 kernels forced; an input 3x the calibration's (h1
    saturated at 0 and 255).  Within one step of onnxruntime's int8
    run on >= 99.9%, at most 2 steps."""
    qdq = two_blocks()
    src, err = compiled_c(qdq, Q8_FORCE)
    held = src.count("the tensor added held as bytes")
    both = src.count("held as the output, a tensor added, requantized again")
    print(f"q8 residual held: {held} kernels add a held tensor, {both} residual kernels hold their output")
    S.check("q8 residual held: block 2 adds the held h1, block 1 holds its output", held >= 1 and both >= 1, err[-300:])
    # the held bytes (rint, clamp to [0, 255]) not rounded to bf16 on the way (contract_q8.c's q8_span_step)
    # (the output pass, or the kernel's post hook that applies it: contract_q8.c's q8_post)
    rb = [f for f in re.findall(r"static void \w+_q8(?:out|post)\(.*?\n}\n", src, re.S) if "y[col] = v == v ? (uint8_t)" in f]
    S.check("q8 residual held: no bf16 rounding of the held bytes", len(rb) == both and all("hp_rint(v)" in f and "hp_rb(" not in f
            for f in rb), "\n".join(f for f in rb if "hp_rb(" in f)[-400:])
    x = (RNG.standard_normal((1, 32, 14, 14)) * 3).astype(np.float32)  # past the calibration's range: h1 saturates at both ends
    check_within_step("q8 residual held", qdq, {"x": x}, ["y"], Q8_FORCE)


def downsample_model(zs, relu, sum_op, proj_second):
    """Handmade QDQ downsampling block, as ResNet's: y = Q(relu?(DQ(Q(conv
    3x3 stride 2(x))) + DQ(Q(conv 1x1 stride 2(x))))) of 13 -> 16 channels
    on 9x7, batch 2, per-channel int8 weights with -128 / 127 among them,
    int32 biases; the 1x1 projection conv (and its Q, DQ) before the 3x3
    one in the graph, as onnxruntime's quantizer writes ResNet-50; zs the
    zero points of x, of the two convs' outputs and of y; the projection
    the Add's / Sum's second operand, or with proj_second its first."""
    C, O, zx, za, zb, zy = 13, 16, *zs
    ws = []
    for k in (1, 3):
        w = RNG.integers(-128, 128, (O, C, k, k), dtype=np.int8)
        w[::3, 0, 0, 0] = RNG.choice(np.array([-128, 127], np.int8), w[::3, 0, 0, 0].shape)
        ws.append(w)
    sx, sa, sb, sy = np.float32(0.03), np.float32(0.11), np.float32(0.07), np.float32(0.13)
    u8 = lambda v: np.uint8(v)  # noqa: E731
    inits = [init("sx", sx), init("zx", u8(zx)), init("sa", sa), init("za", u8(za)), init("sb", sb), init("zb", u8(zb)),
             init("sy", sy), init("zy", u8(zy))]
    nodes = [h.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]), h.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"])]
    for i, (w, st, s, z) in enumerate(((ws[0], "sb", "sb", "zb"), (ws[1], "sa", "sa", "za"))):  # the projection first
        k = w.shape[2]
        wsc = (RNG.random(O) * 0.004 + 0.001).astype(np.float32)
        inits += [init(f"w{i}", w), init(f"ws{i}", wsc), init(f"wz{i}", np.zeros(O, np.int8)),
                  init(f"b{i}", RNG.integers(-3000, 3000, O).astype(np.int32)), init(f"bs{i}", (sx * wsc).astype(np.float32)),
                  init(f"bz{i}", np.zeros(O, np.int32))]
        nodes += [h.make_node("DequantizeLinear", [f"w{i}", f"ws{i}", f"wz{i}"], [f"wd{i}"], axis=0),
                  h.make_node("DequantizeLinear", [f"b{i}", f"bs{i}", f"bz{i}"], [f"bd{i}"], axis=0),
                  h.make_node("Conv", ["xd", f"wd{i}", f"bd{i}"], [f"c{i}"], pads=[k // 2] * 4, strides=[2, 2]),
                  h.make_node("QuantizeLinear", [f"c{i}", s, z], [f"c{i}q"]), h.make_node("DequantizeLinear", [f"c{i}q", s, z], [f"c{i}d"])]
    nodes += [h.make_node("Sum" if sum_op else "Add", ["c1d", "c0d"] if proj_second else ["c0d", "c1d"], ["a"])]
    nodes += [h.make_node("Relu", ["a"], ["r"])] if relu else []
    nodes += [h.make_node("QuantizeLinear", ["r" if relu else "a", "sy", "zy"], ["yq"]),
              h.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["y"])]
    return model(nodes, [vi("x", T.FLOAT, [2, C, 9, 7])], [vi("y", T.FLOAT, None)], inits, opset=13), sy


def test_q8_downsample():
    """The residual add of a downsampling block — both operands convs'
    requantized outputs — fused into the 3x3 conv's int8 epilogue, the 1x1
    projection's output (made first in the graph) the tensor it adds
    (onnx_qdq.c's ox_qdq_skip_first): equal to onnxruntime's int8 run; one
    int8 kernel adds a tensor and requantizes again, no kernel writes a
    conv's bare sums for another to add."""
    cases = [((0, 255, 0, 128), False, True, False), ((255, 0, 255, 64), True, False, True), ((77, 128, 3, 250), True, True, False)]
    for zs, relu, sum_op, proj_second in cases:
        name = f"q8 downsample zero points {zs} {'Sum' if sum_op else 'Add'}{' Relu' if relu else ''}{' proj second' if proj_second else ''}"
        path, sy = downsample_model(zs, relu, sum_op, proj_second)
        x = (RNG.standard_normal((2, 13, 9, 7)) * 3).astype(np.float32)
        check_fused_residual(name, path, {"x": x}, sy, zs)


test_q8_depthwise()
test_q8_depthwise_held()
test_q8_depthwise_chain()
test_narrow_operand_kept()
test_q8_pays_by_template()
test_q8_residual()
test_q8_residual_held()
test_q8_downsample()
S.close()
