"""The int8 kernels' AVX2 variant (cgen_qgemm_avx2.c: vpmaddubsw on the
u8 operand split into its low 7 bits and its top bit, exact) against
onnxruntime's int8 run, forced with HARP_INT8_ISA=avx2 on this CPU, and
against the variant that runs by CPUID (VNNI / AMX here).  Skips (77)
without AVX2.

One QDQ model per zero point of the u8 activations (0 and 255: |q - z|
reaches 255; the outputs' zero point 128, or 0 as the folded Relu's clamp)
with per-channel int8 weights at -128 / 127 among others and int32 biases:
a 3x3 conv read in place (stride 1, K = 37 * 9 = 333, 45 channels: rows
past a tile of 6), a strided 3x3 conv (the im2col), a 1x1 conv (K = 96), a
MatMul of u8 activations as A read in place (weight B; 75 x 99 x 300: a last
block of 35 columns), a Gemm with transB (130 columns: a last block of 2),
a small MatMul (9 x 40 x 64); plus a QLinearConv of uint8 data by uint8
weights (zero point 0, all below 128: packed as int8) and of int8 data
(s8 activations through + 128).  Checked: each output equal to
onnxruntime's int8 run (>= 99.9% of the elements exactly, none more than
one step off, as test_onnx_quant.py's QDQ checks; the QLinearConvs equal
on every element) with outputs not all saturated; AVX2 and the CPUID
variant equal on every element; the generated C with AVX2 forced has the
AVX2 variant, unguarded, in every int8 kernel and selects it; by default
it is there only for objects built without AVX512_VNNI."""
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
import quant_models as qm  # noqa: E402
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402
from quant_models import Q8_FORCE, init  # noqa: E402

if " avx2 " not in open("/proc/cpuinfo").read().replace("\n", " "):
    print("skip: this CPU has no AVX2")
    sys.exit(77)

S = ht.Suite("q8avx2")
ht.compiled_only()  # the compiled C's numbers, not tier 0's (harp run answers its first run from tier 0)
# the kernels at -O1 (the knob cc_opt), as quant_models.suite sets it: what they compute, not their speed;
# the ISA flags and the C are the same (CI compiles them with a cold cache)
os.environ.setdefault("HARP_CC_OPT", "1")
RNG = np.random.default_rng(2828)
NQ8 = 8  # int8 kernels in the model: six contractions, two QLinearConvs


def weight(shape, lo=-128, hi=128, dtype=np.int8):
    return qm.weight(RNG, shape, lo, hi, dtype)


def act(shape, scale):
    return qm.act(RNG, shape, scale)


def qlinear_convs(nodes, inits, outs, feeds, steps):
    """QLinearConv u8 x u8-weight (stride 2 x 1, pads) and s8 x s8 (3x3, in place)."""
    feeds["xu"] = RNG.integers(0, 256, (1, 16, 10, 9), dtype=np.uint8)
    feeds["xs"] = RNG.integers(-128, 128, (1, 13, 11, 7), dtype=np.int8)
    nodes.append(h.make_node("QLinearConv", ["xu", "su", "zu", "wu", "swu", "zwu", "syu", "zyu"], ["yu"], pads=[1, 1, 1, 1],
                             strides=[2, 1]))
    nodes.append(h.make_node("QLinearConv", ["xs", "ss", "zs", "ws8", "sws", "zws", "sys", "zys"], ["ys"], pads=[1, 1, 1, 1]))
    inits += [init("su", np.float32(0.05)), init("zu", np.uint8(100)), init("wu", weight((24, 16, 3, 3), 0, 128, np.uint8)),
              init("swu", np.float32(0.01)), init("zwu", np.uint8(0)), init("syu", np.float32(40.0)), init("zyu", np.uint8(7)),
              init("ss", np.float32(0.05)), init("zs", np.int8(-3)), init("ws8", weight((19, 13, 3, 3))),
              init("sws", np.float32(0.01)), init("zws", np.int8(0)), init("sys", np.float32(30.0)), init("zys", np.int8(5))]
    outs += [h.make_tensor_value_info("yu", T.UINT8, None), h.make_tensor_value_info("ys", T.INT8, None)]
    steps["yu"] = steps["ys"] = None  # bytes: equal on every element


def qdq_model(zx, zy):
    """The model (the module's comment), its feeds and each output's step."""
    sx = np.float32(0.02)
    nodes, inits, outs, steps = [], [init("sx", sx), init("zx", np.uint8(zx)), init("zy", np.uint8(zy))], [], {}

    def contraction(name, op, xin, w, ch_axis, sy, bias=True, **attrs):
        ws = (RNG.random(w.shape[ch_axis]) * 0.01 + 0.001).astype(np.float32)
        inits.extend([init(name + "_w", w), init(name + "_ws", ws), init(name + "_wz", np.zeros(w.shape[ch_axis], np.int8))])
        nodes.append(h.make_node("DequantizeLinear", [name + "_w", name + "_ws", name + "_wz"], [name + "_wd"], axis=ch_axis))
        ins = [xin, name + "_wd"]
        if bias:
            ch = w.shape[ch_axis]
            inits.extend([init(name + "_b", RNG.integers(-300000, 300000, ch).astype(np.int32)),
                          init(name + "_bs", (sx * ws).astype(np.float32)), init(name + "_bz", np.zeros(ch, np.int32))])
            nodes.append(h.make_node("DequantizeLinear", [name + "_b", name + "_bs", name + "_bz"], [name + "_bd"], axis=0))
            ins.append(name + "_bd")
        nodes.append(h.make_node(op, ins, [name], **attrs))
        inits.append(init(name + "_sy", np.float32(sy)))
        nodes.append(h.make_node("QuantizeLinear", [name, name + "_sy", "zy"], [name + "_q"]))
        nodes.append(h.make_node("DequantizeLinear", [name + "_q", name + "_sy", "zy"], [name + "_o"]))
        outs.append(h.make_tensor_value_info(name + "_o", T.FLOAT, None))
        steps[name + "_o"] = sy

    feeds = {"x": act((1, 37, 13, 12), 3), "x2": act((1, 32, 33, 31), 3), "x3": act((1, 96, 18, 18), 3),
             "a": act((75, 300), 3), "a2": act((9, 64), 3)}
    for v in list(feeds):
        nodes.append(h.make_node("QuantizeLinear", [v, "sx", "zx"], [v + "_q"]))
        nodes.append(h.make_node("DequantizeLinear", [v + "_q", "sx", "zx"], [v + "_d"]))
    contraction("c1", "Conv", "x_d", weight((45, 37, 3, 3)), 0, 3.0, pads=[1, 1, 1, 1])
    contraction("c2", "Conv", "x2_d", weight((70, 32, 3, 3)), 0, 3.0, pads=[1, 1, 1, 1], strides=[2, 2])
    contraction("c3", "Conv", "x3_d", weight((80, 96, 1, 1)), 0, 2.0)
    contraction("m1", "MatMul", "a_d", weight((300, 99)), 1, 2.0, bias=False)
    contraction("g1", "Gemm", "a_d", weight((130, 300)), 0, 2.0, transB=1)
    contraction("m2", "MatMul", "a2_d", weight((64, 40)), 1, 1.0, bias=False)
    qlinear_convs(nodes, inits, outs, feeds, steps)
    ins = [h.make_tensor_value_info(k, T.UINT8 if v.dtype == np.uint8 else T.INT8 if v.dtype == np.int8 else T.FLOAT, v.shape)
           for k, v in feeds.items()]
    m = h.make_model(h.make_graph(nodes, "q8avx2", ins, outs, inits), opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 8
    path = os.path.join(tempfile.mkdtemp(prefix="harp_py_q8avx2_"), "qdq.onnx")
    onnx.save(m, path)
    return path, feeds, steps


def compiled_c(path, isa, build):
    """The C `harp compile` makes of path for the cpu (int8 kernels forced), HARP_INT8_ISA=isa;
    the package built and run too with build, else its sources only (the C is the same)."""
    out = tempfile.mkdtemp(prefix="harp_py_q8avx2_c_")
    p = subprocess.run([ht.HARP, "compile", path, "--target", "cpu", "-o", out, *Q8_FORCE, *([] if build else ["--sources-only"])],
                       capture_output=True, text=True, timeout=300, env={**os.environ, "HARP_INT8_ISA": isa})
    S.check(f"harp compile HARP_INT8_ISA={isa}: runs", p.returncode == 0, p.stderr[-600:])
    return "".join(open(os.path.join(r, f)).read() for r, _, fs in os.walk(out) for f in fs if f.endswith(".c"))


def run_case(zx, zy):
    path, feeds, steps = qdq_model(zx, zy)
    qm.isa_runs(S, f"zx={zx} zy={zy}", path, feeds, steps, zy, (("avx2", {"HARP_INT8_ISA": "avx2"}), ("auto", {"HARP_INT8_ISA": "auto"})))
    return path


def check_c(path):
    # auto's package built (portable flags, no AVX512_VNNI: its AVX2 variants compiled); the forced C only read
    forced, auto = compiled_c(path, "avx2", False), compiled_c(path, "auto", True)
    q8 = forced.count("_q8(pool, bufs);")
    S.check("AVX2 forced: every contraction on the int8 kernel", q8 == NQ8, f"{q8} int8 kernels")
    call = r"\n  if \(\w+_q_sel\(\) == 2\) return \w+_q_avx2_run\(pool, wp, x, y\);"
    n = len(re.findall(r"#if defined\(HPRT_X86\)" + call, forced))
    S.check("AVX2 forced: the AVX2 variant, unguarded and selected, in each int8 kernel",
            n == NQ8 and "_mm256_maddubs_epi16(" in forced and "__AVX512VNNI__" not in forced, f"{n} kernels")
    n = len(re.findall(r"#if defined\(HPRT_X86\) && !defined\(__AVX512VNNI__\)" + call, auto))
    S.check("auto: the AVX2 variant in each, for objects built without AVX512_VNNI", n == NQ8, f"{n} kernels")

for zx, zy in ((0, 128), (255, 0)):
    p = run_case(zx, zy)
check_c(p)
S.close()
