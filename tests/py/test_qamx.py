"""The int8 kernels' AMX-INT8 variant (cgen_qamx.c: tdpbusd / tdpbsud on
32x32 tiles of C) against onnxruntime's int8 run, with AMX on (HARP_AMX
auto) and off.  Skips (77) on a CPU without AMX-INT8.

One QDQ model (DQ -> Conv / MatMul / Gemm -> Q, per-channel int8 weights
with -128 / 127 among them, int32 biases, uint8 activations) per zero point
of the activations (0 and 255: |q - z| reaches 255), the outputs' zero
point 128 or 0 (the form of a Relu that quantize_static folds into the Q:
the epilogue's clamp at the zero point): a 3x3 conv read in place
(stride 1; K = 37 * 9 = 333, not a multiple of 4 or of the tile's 64 bytes;
45 output channels: a second panel of 13 rows), a strided 3x3 conv (the
im2col), a 1x1 conv (the GEMM form, K = 96), a MatMul (the weight as B: 75
rows, 3 panels; 99 columns: a last block of 35; K = 300), a Gemm with
transB (130 columns: a last block of 2) and ResNet's 1x1 pair at 13x11
(143 pixels: a last block of 15): 64 -> 256 (K = 64, one tile step), then
256 -> 64 (K = 256) plus the block's input (a residual), all above the line
where AMX pays (cg_qamx_pays), and a 9 x 40 x 64 MatMul below it (no AMX
variant).
Checked: each output equal to onnxruntime's int8 run (>= 99.9% of the
elements exactly, none more than one step off, as test_onnx_quant.py's
QDQ checks) with outputs not all saturated; AMX on and off equal on every
element (the sums are exact integers either way); the generated C with
AMX on has the AMX variant in exactly the seven kernels above the line (its
tile loads, tdpbusd and tdpbsud, the selector's hprt_amx8_ok), off has none;
the 1x1 convs read as GEMMs of their images and the stride-1 3x3 conv
(pad 1: its output rows as wide as the image's) from its image in place
through masked loads (cgen_qgemm.c: no padded copy, $F_pad, in any)."""
import os
import re
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import harp_test as ht  # noqa: E402

ht.onnx_or_skip()
import onnx  # noqa: F401
import quant_models as qm  # noqa: E402
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402
from quant_models import init  # noqa: E402

if "amx_int8" not in open("/proc/cpuinfo").read():
    print("skip: this CPU has no AMX-INT8 (the AMX variant is not chosen here)")
    sys.exit(77)

S = ht.Suite("qamx")
ht.compiled_only()  # the compiled C's numbers, not tier 0's (harp run answers its first run from tier 0)
# The kernels at -O1 (the knob cc_opt): this test checks what they compute, not
# their speed, and CI compiles them with a cold cache (-O3: 1.7x the compiler's
# time, bench/RESULTS.md "health3"); the ISA flags and the C are the same.
os.environ.setdefault("HARP_CC_OPT", "1")
RNG = np.random.default_rng(28)
ABOVE = 7  # the contractions above the AMX line


def weight(shape):
    return qm.weight(RNG, shape)


def act(shape, scale):
    return qm.act(RNG, shape, scale)


def qdq_model(zx, zy):
    """The model (the module's comment), its feeds and each output's step."""
    sx = np.float32(0.02)
    nodes, inits, outs, steps = [], [init("sx", sx), init("zx", np.uint8(zx)), init("zy", np.uint8(zy))], [], {}

    def q(v, s):
        nodes.append(h.make_node("QuantizeLinear", [v, s, "zy"], [v + "_q"]))
        nodes.append(h.make_node("DequantizeLinear", [v + "_q", s, "zy"], [v + "_o"]))
        outs.append(h.make_tensor_value_info(v + "_o", T.FLOAT, None))

    def contraction(name, op, xin, w, ch_axis, sy, bias=True, sin=sx, **attrs):
        ws = (RNG.random(w.shape[ch_axis]) * 0.01 + 0.001).astype(np.float32)
        inits.extend([init(name + "_w", w), init(name + "_ws", ws), init(name + "_wz", np.zeros(w.shape[ch_axis], np.int8))])
        nodes.append(h.make_node("DequantizeLinear", [name + "_w", name + "_ws", name + "_wz"], [name + "_wd"], axis=ch_axis))
        ins = [xin, name + "_wd"]
        if bias:
            ch = w.shape[ch_axis]
            inits.extend([init(name + "_b", RNG.integers(-300000, 300000, ch).astype(np.int32)),
                          init(name + "_bs", (sin * ws).astype(np.float32)), init(name + "_bz", np.zeros(ch, np.int32))])
            nodes.append(h.make_node("DequantizeLinear", [name + "_b", name + "_bs", name + "_bz"], [name + "_bd"], axis=0))
            ins.append(name + "_bd")
        nodes.append(h.make_node(op, ins, [name], **attrs))
        inits.append(init(name + "_sy", np.float32(sy)))
        steps[name + "_o"] = sy
        q(name, name + "_sy")

    feeds = {"x": act((1, 37, 13, 12), 3), "x2": act((1, 32, 33, 31), 3), "x3": act((1, 96, 18, 18), 3),
             "a": act((75, 300), 3), "a2": act((9, 64), 3), "x4": act((1, 64, 13, 11), 3)}
    for v in feeds:
        nodes.append(h.make_node("QuantizeLinear", [v, "sx", "zx"], [v + "_q"]))
        nodes.append(h.make_node("DequantizeLinear", [v + "_q", "sx", "zx"], [v + "_d"]))
    contraction("c1", "Conv", "x_d", weight((45, 37, 3, 3)), 0, 3.0, pads=[1, 1, 1, 1])
    contraction("c2", "Conv", "x2_d", weight((70, 32, 3, 3)), 0, 3.0, pads=[1, 1, 1, 1], strides=[2, 2])
    contraction("c3", "Conv", "x3_d", weight((80, 96, 1, 1)), 0, 2.0)
    contraction("m1", "MatMul", "a_d", weight((300, 99)), 1, 2.0, bias=False)
    contraction("g1", "Gemm", "a_d", weight((130, 300)), 0, 2.0, transB=1)
    contraction("m2", "MatMul", "a2_d", weight((64, 40)), 1, 1.0, bias=False)
    contraction("c4", "Conv", "x4_d", weight((256, 64, 1, 1)), 0, 2.0)
    contraction("c5", "Conv", "c4_o", weight((64, 256, 1, 1)), 0, 16.0, sin=np.float32(2.0))
    nodes.append(h.make_node("Add", ["c5_o", "x4_d"], ["r5"]))
    inits.append(init("r5_sy", np.float32(16.0)))
    steps["r5_o"] = 16.0
    q("r5", "r5_sy")
    g = h.make_graph(nodes, "qamx", [h.make_tensor_value_info(k, T.FLOAT, v.shape) for k, v in feeds.items()], outs, inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 8
    path = os.path.join(tempfile.mkdtemp(prefix="harp_py_qamx_"), "qdq.onnx")
    onnx.save(m, path)
    return path, feeds, steps


def compiled_c(path, env):
    return qm.q8_sources(S, path, env)


def run_case(zx, zy):
    path, feeds, steps = qdq_model(zx, zy)
    qm.isa_runs(S, f"zx={zx} zy={zy}", path, feeds, steps, zy, (("amx", {"HARP_AMX": "auto"}), ("no-amx", {"HARP_AMX": "off"})))
    return path


def check_c(path):
    on, off = compiled_c(path, {"HARP_AMX": "auto"}), compiled_c(path, {"HARP_AMX": "off"})
    q8 = on.count("_q8(pool, bufs);")
    amx = len(re.findall(r"int \w+_amx_on\(void\)", on))
    S.check("AMX on: the int8 kernels", q8 == ABOVE + 1, f"{q8} int8 kernels")
    S.check("AMX on: the AMX variant in the five kernels above the line", amx == ABOVE and all(
        t in on for t in ("_tile_dpbusd(", "_tile_dpbsud(", "_tile_loadd(", "hprt_amx8_ok()", "_amx_run(")), f"{amx} AMX variants")
    S.check("AMX off: no AMX variant", "_tile_dp" not in off and "_amx_on(void)" not in off and off.count("_q8(pool, bufs);") == q8,
            "")
    pads = len(re.findall(r"static void \w+_pad\(const uint8_t \*x", on))
    S.check("the 1x1 convs as GEMMs of their images, the 3x3 read in place: no padded copy", pads == 0, f"{pads} padded copies")
    S.check("the stride-1 3x3 conv's B rows through masked loads", "_mm512_mask_loadu_epi8(vz, (__mmask64)" in on, "")


for zx, zy in ((0, 128), (255, 0)):
    p = run_case(zx, zy)
check_c(p)
S.close()
