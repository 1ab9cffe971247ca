"""Held int8 activations in the VNNI-4 layout (q8_hold.c's cc_q8_plan.v4,
cgen_qgemm.h's x_vnni4 / y_vnni4): a buffer that an int8 conv writes through
its own requantizing epilogue and that only 1x1 convs of stride 1 read, as
their input, holds [C / 4][H W][4] bytes, where the AMX variant reads its B
tiles in place (K a multiple of 64), the other variants copy B's blocks.

One QDQ model (uint8 activations of zero point zx, per-channel int8 weights
with -128 / 127 among them, int32 biases, outputs at zero point zy), a batch
of 2 images of 23 x 21 (483 pixels: a last block of 35 columns):
  A  3x3 conv (stride 1, read in place) 64 -> 128, into
  B  1x1 128 -> 96 (K = 128: B in place on AMX), read by two 1x1 convs:
  C  1x1 96 -> 64 (K = 96: not a multiple of 64, B copied), whose output
     (NCHW: other readers) goes to a 3x3 conv E, a max pool P and as the
     residual of F;
  D  1x1 96 -> 128, into F 1x1 128 -> 64 plus C's output (a QDQ Add: F's
     output pass stores the bytes, no VNNI-4 writer), into S 1x1 64 -> 64;
  G  3x3 conv of stride 2 (the im2col) 64 -> 64, into H 1x1 64 -> 256
     (K = 64: one tile step in place);
  I  3x3 conv 64 -> 70 (70 channels: no VNNI-4 writer), into J 1x1 70 -> 64;
  L  1x1 64 -> 64 into M, a 3x3 conv (no VNNI-4 reader).
So A, B, D, G write VNNI-4 and B, C, D, F, H read it; the rest stays NCHW.
Checked: every output equal to onnxruntime's int8 run (>= 99.9% of the
elements exactly, none more than one step off, as test_qamx.py) with AMX
on (auto), off, and the AVX2 and scalar variants forced (int8_isa), each
run equal to AMX's on every element: in CI AMX at both zero-point cases,
the other three once each (CASES); HARP_TEST_SLOW=1 all four at both.
The generated C has exactly the VNNI-4
kernels above (their header comments) and, AMX on, B's tiles read in place
in the three whose K is a multiple of 64.  On a CPU without AMX-INT8 the
same, the auto run the VNNI variant's and the in-place check left out.
Skips (77) without onnxruntime."""
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import harp_test as ht  # noqa: E402

ht.onnx_or_skip()
import onnx  # noqa: F401
import quant_models as qm  # noqa: E402
from onnx import helper as h  # noqa: E402

HAS_AMX = "amx_int8" in open("/proc/cpuinfo").read()
if not HAS_AMX:  # the layouts are the plan's on any CPU: the VNNI, AVX2 and scalar variants read and write them
    print("this CPU has no AMX-INT8: the auto run is the VNNI (or AVX2) variant's, B's tiles in place not checked")

S = ht.Suite("qvnni4")
ht.compiled_only()
os.environ.setdefault("HARP_CC_OPT", "1")  # what the kernels compute, not their speed (test_qamx.py)
V4_OUT = {"A", "B", "D", "G"}  # the kernels writing VNNI-4
V4_IN = {"B", "C", "D", "F", "H"}  # reading it
IN_PLACE = {"B", "F", "H"}  # K a multiple of 64: AMX's B tiles in place


def qdq_model(zx, zy, sc):
    """The model (the module's comment) with output scales sc (name -> scale;
    2.0 where missing), the same weights and input on every call; its path,
    feeds, each output's step and the names of the convs' fp32 outputs."""
    rng = np.random.default_rng(4)
    sx = np.float32(0.02)
    cc = qm.ConvChain(rng, sx, zx, zy, sc)
    nodes, inits, outs, steps, q, conv = cc.nodes, cc.inits, cc.outs, cc.steps, cc.q, cc.conv

    def weight(shape):
        return qm.weight(rng, shape)

    x = qm.act(rng, (2, 64, 23, 21), 3)
    nodes.append(h.make_node("QuantizeLinear", ["x", "sx", "zx"], ["x_q"]))
    nodes.append(h.make_node("DequantizeLinear", ["x_q", "sx", "zx"], ["x_d"]))
    xd, p3 = ("x_d", sx), dict(pads=[1, 1, 1, 1])
    a = conv("A", xd, weight((128, 64, 3, 3)), **p3)
    b = conv("B", a, weight((96, 128, 1, 1)))
    c = conv("C", b, weight((64, 96, 1, 1)))
    conv("E", c, weight((32, 64, 3, 3)), out=True, **p3)
    nodes.append(h.make_node("MaxPool", [c[0]], ["P"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
    sc["P"] = float(c[1])  # a pool keeps its input's scale
    q("P", True)
    d = conv("D", b, weight((128, 96, 1, 1)))
    f = conv("F", d, weight((64, 128, 1, 1)))
    nodes.append(h.make_node("Add", [f[0], c[0]], ["R"]))
    conv("S", q("R", False), weight((64, 64, 1, 1)), out=True)
    g = conv("G", xd, weight((64, 64, 3, 3)), strides=[2, 2], **p3)
    conv("H", g, weight((256, 64, 1, 1)), out=True)
    i = conv("I", xd, weight((70, 64, 3, 3)), **p3)
    conv("J", i, weight((64, 70, 1, 1)), out=True)
    lo = conv("L", xd, weight((64, 64, 1, 1)))
    conv("M", lo, weight((32, 64, 3, 3)), out=True, **p3)
    return cc.save("qvnni4", x)


def calibrated(zx, zy):
    """qdq_model, its scales calibrated (quant_models.calibrated)."""
    return qm.calibrated(qdq_model, zx, zy, 5, skip=("x", "P"))


# (zx, zy): the runs, (tag, env).  Each ISA runs once in CI (the int8 kernels'
# AMX variant and the others' numbers at both zero points are test_qamx.py's
# and test_q8avx2.py's; here the VNNI-4 layouts under each); HARP_TEST_SLOW=1
# runs all four at both (four times the C compiles: ~200 s cold at load).
AMX, NO_AMX = ("amx" if HAS_AMX else "auto", {"HARP_AMX": "auto"}), ("no-amx", {"HARP_AMX": "off"})
AVX2, SCALAR = ("avx2", {"HARP_INT8_ISA": "avx2"}), ("scalar", {"HARP_INT8_ISA": "scalar"})
ALL = (AMX, NO_AMX, AVX2, SCALAR) if HAS_AMX else (AMX, AVX2, SCALAR)  # no AMX: auto is no-amx's run
CASES = {(0, 128): ALL, (255, 0): ALL} if os.environ.get("HARP_TEST_SLOW") == "1" else {(0, 128): (AMX, SCALAR),
                                                                                       (255, 0): ALL[:-1]}


def run_case(zx, zy):
    path, feeds, steps = calibrated(zx, zy)
    qm.isa_runs(S, f"zx={zx} zy={zy}", path, feeds, steps, zy, CASES[(zx, zy)])
    return path


def compiled_c(path, env):
    return qm.q8_sources(S, path, env)


def shapes(src, mark):
    """The (M, N, K) of the int8 GEMMs whose header comment carries mark."""
    return sorted((int(a), int(b), int(c)) for a, b, c, hdr in
                  re.findall(r"int8 GEMM (\d+) x (\d+) x (\d+), ([^\n]*) ---- \*/", src) if mark in hdr)


def check_c(path):
    # the convs by their GEMM sizes (M = out channels, N = pixels, K = c kh kw); 483 pixels, 132 after G's stride 2
    size = {"A": (128, 483, 576), "B": (96, 483, 128), "C": (64, 483, 96), "D": (128, 483, 96), "F": (64, 483, 128),
            "G": (64, 132, 576), "H": (256, 132, 64)}
    on = compiled_c(path, {"HARP_AMX": "auto"})
    yv, xv = shapes(on, "y VNNI-4"), shapes(on, "x VNNI-4")
    S.check("the VNNI-4 writers: A, B, D, G", yv == sorted(size[k] for k in V4_OUT), f"{yv}")
    S.check("the VNNI-4 readers: B, C, D, F, H", xv == sorted(size[k] for k in V4_IN), f"{xv}")
    inplace = len(re.findall(r"B = \(int32_t \*\)\(\(uint8_t \*\)cx->x \+ jb \*", on))
    if HAS_AMX:
        S.check("AMX: B's tiles in place in the three readers of K % 64 == 0", inplace == len(IN_PLACE), f"{inplace}")
    scalar = compiled_c(path, {"HARP_INT8_ISA": "scalar"})
    S.check("scalar: the same layouts", shapes(scalar, "y VNNI-4") == yv and shapes(scalar, "x VNNI-4") == xv, "")


for zx, zy in CASES:
    p = run_case(zx, zy)
check_c(p)
S.close()
