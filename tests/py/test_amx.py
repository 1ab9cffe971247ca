"""--precision bf16 on a CPU with Intel AMX: GEMMs and implicit-GEMM convs
get an AMX variant (cgen_amx.c, tdpbf16ps on 32x32 tiles of C), chosen at
load; HARP_AMX=off leaves it out (the AVX-512 BF16 variant runs).  Skips
(77) on a CPU without AMX-BF16.

One model of contractions runs twice, AMX on (auto) and off, each output
checked against numpy in float64 as tests/py/test_bf16.py does: against the
product of the operands rounded to bf16 within fp32 accumulation's bound
K * 2^-24 * sum |a b| (catches a wrong pair, a lost tail, a wrong tile), and
against the fp32 product within bf16's.  Shapes: M and N not multiples of
the 32x32 tile, K odd, a tail of one pair past two 16-pair steps, K over one
256-pair block (C summed over blocks), batched matmuls of two activations
(both packed per run), Gemm with transB, bias and Relu, a residual Add, convs
on the implicit GEMM (HARP_CONV=gemm: 1x1, 3x3 with odd channels and stride
2, groups, a weight given as an input).  The generated C with AMX on has the
AMX variant (tile loads, tdpbf16ps, the selector's AMX branch), without has
none, every case on it but three below the line where AMX pays (13x3x17,
16x32x64, a conv to 9 channels: the AVX-512 kernels); and the two runs' outputs differ in most cases (tdpbf16ps sums a
16-pair step in another order than vdpbf16ps), the sign that the AMX kernel
ran.  A third run, AMX on with the conv algorithm harp picks, puts every
conv (1x1 and 3x3, stems of 3 or 5 input channels) on the implicit GEMM's
AMX variant, checked the same.  The tile configuration is loaded once a
compute task, not per micro-kernel call (checked in the C).  Then: a bf16
activation as A ($P_amxpk), bf16 rows paired as they are (a 1x1 conv's B,
a 3x3 conv's interleaved input; exact against numpy, AMX on and off),
stride-1 convs whose B tiles are read in place from padded channel-pair
planes (cgen_amx_conv.c: against onnxruntime fp32, and with exact integer
sums bit for bit against HARP_AMX=im2col's path), and a standalone
package."""
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

from bf16_ref import bf16, check_products
from harp_test import HARP, Suite, onnx_or_skip, run

onnx_or_skip(runtime=False)
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

if "amx_bf16" not in open("/proc/cpuinfo").read():
    print("skip: this CPU has no AMX-BF16 (the AMX variant is not chosen here)")
    sys.exit(77)

s = Suite("amx")
rng = np.random.default_rng(2811)


def arr(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def im2col_conv(x, w, stride, pad, groups):
    """conv(x, w) (NCHW, OIHW) in float64 by im2col, and sum |x w| per output."""
    n, c, h, wd = x.shape
    oc, icg, kh, kw = w.shape
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    cols = np.stack([xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride] for i in range(kh) for j in range(kw)], 2)
    ocg, y, ya = oc // groups, [], []
    for g in range(groups):
        cg = cols[:, g * icg:(g + 1) * icg].reshape(n, icg * kh * kw, oh * ow)
        wg = w[g * ocg:(g + 1) * ocg].reshape(ocg, icg * kh * kw)
        y.append(np.einsum("ok,nkp->nop", wg, cg))
        ya.append(np.einsum("ok,nkp->nop", np.abs(wg), np.abs(cg)))
    return np.concatenate(y, 1).reshape(n, oc, oh, ow), np.concatenate(ya, 1).reshape(n, oc, oh, ow)


nodes, inputs, inits, outs, cases = [], {}, {}, [], []


def case(name, f32, bfr, absum, k):
    outs.append(name)
    cases.append((name, f32, bfr, absum, k))


def matmul(name, a_shape, b_shape, b_init=True, residual=False):
    a, b = arr(*a_shape), arr(*b_shape)
    inputs[name + "_a"] = a
    (inits if b_init else inputs)[name + "_b"] = b
    f64 = lambda v: v.astype(np.float64)
    f32, bfr = np.matmul(f64(a), f64(b)), np.matmul(bf16(a), bf16(b))
    absum = np.matmul(np.abs(f64(a)), np.abs(f64(b)))
    if residual:  # MatMul + Add: the residual epilogue
        r = arr(*f32.shape)
        inputs[name + "_r"] = r
        nodes.append(helper.make_node("MatMul", [name + "_a", name + "_b"], [name + "_mm"]))
        nodes.append(helper.make_node("Add", [name + "_mm", name + "_r"], [name]))
        f32, bfr = f32 + r, bfr + r
    else:
        nodes.append(helper.make_node("MatMul", [name + "_a", name + "_b"], [name]))
    case(name, f32, bfr, absum, a_shape[-1])


def gemm_bt_relu(name, m, n, k):
    a, w, c = arr(m, k), arr(n, k), arr(n)
    inputs[name + "_a"] = a
    inits[name + "_w"], inits[name + "_c"] = w, c
    nodes.append(helper.make_node("Gemm", [name + "_a", name + "_w", name + "_c"], [name + "_g"], transB=1))
    nodes.append(helper.make_node("Relu", [name + "_g"], [name]))
    f32 = np.maximum(a.astype(np.float64) @ w.T.astype(np.float64) + c, 0)
    bfr = np.maximum(bf16(a) @ bf16(w).T + c, 0)
    case(name, f32, bfr, np.abs(a.astype(np.float64)) @ np.abs(w.T.astype(np.float64)), k)


def conv(name, xs, oc, kk, stride=1, pad=0, groups=1, w_init=True):
    x, w = arr(*xs), arr(oc, xs[1] // groups, kk, kk, scale=0.5)
    inputs[name + "_x"] = x
    (inits if w_init else inputs)[name + "_w"] = w
    nodes.append(helper.make_node("Conv", [name + "_x", name + "_w"], [name], strides=[stride] * 2, pads=[pad] * 4,
                                  group=groups))
    f32, absum = im2col_conv(x.astype(np.float64), w.astype(np.float64), stride, pad, groups)
    bfr, _ = im2col_conv(bf16(x), bf16(w), stride, pad, groups)
    case(name, f32, bfr, absum, xs[1] // groups * kk * kk)


matmul("mm_tails", (37, 529), (529, 75))           # M 32 + 5, N 64 + 11, K 512 + 17: two blocks, a tail
matmul("mm_whole_tiles", (64, 64), (64, 128))       # no tail anywhere
matmul("mm_k65", (40, 65), (65, 110))               # 32 pairs + 1: two tile steps and a tail pair
matmul("mm_deep", (45, 1701), (1701, 70))           # four blocks summed in C
matmul("mm_batched_acts", (2, 3, 40, 96), (2, 3, 96, 80), b_init=False)
matmul("mm_residual", (40, 96), (96, 80), residual=True)
gemm_bt_relu("gemm_transb_bias_relu", 50, 70, 100)
# A^T (transA): A's stride along K is not 1, so the fp32 packer, $P_bfcv and $P_amxtr (not $P_amxpk)
ta_a, ta_w = arr(99, 60), arr(99, 72)
inputs["gemm_transa_a"], inits["gemm_transa_w"] = ta_a, ta_w
nodes.append(helper.make_node("Gemm", ["gemm_transa_a", "gemm_transa_w"], ["gemm_transa"], transA=1))
case("gemm_transa", ta_a.T.astype(np.float64) @ ta_w.astype(np.float64), bf16(ta_a).T @ bf16(ta_w),
     np.abs(ta_a.T.astype(np.float64)) @ np.abs(ta_w.astype(np.float64)), 99)
conv("conv1x1", (1, 70, 9, 11), 40, 1)
conv("conv1x1_120ch", (1, 120, 8, 16), 32, 1)
conv("conv3x3_odd_s2_batch2", (2, 19, 15, 15), 35, 3, stride=2, pad=1)
conv("conv3x3_groups2", (1, 38, 11, 9), 40, 3, pad=1, groups=2)
conv("conv3x3_weight_input", (1, 17, 12, 12), 20, 3, pad=1, w_init=False)
# stems (fewer than 16 input channels per group, 32 outputs or more, 2048 multiply-adds a pixel): on the
# implicit GEMM's AMX variant over channel pairs (the last pair half empty) where AMX is on, harp's pick included (not the direct kernel over
# column pairs); with AMX off and HARP_CONV=gemm they multiply in fp32 (checked against fp32 alone)
STEMS = ("stem7x7_s2_3ch", "stem3x3_5ch_batch2", "stem3x3_groups2_3ch")
conv("stem7x7_s2_3ch", (1, 3, 45, 38), 64, 7, stride=2, pad=3)
conv("stem3x3_5ch_batch2", (2, 5, 20, 22), 40, 3, pad=1)
conv("stem3x3_groups2_3ch", (1, 6, 17, 17), 128, 3, pad=1, groups=2)
# below the line where AMX pays (cg_amx_pays: 16 rows, 16 columns, 32 deep, 2^18 products): the AVX-512 kernels
BELOW = ("below_mm_13x3x17", "below_mm_16x32x64", "below_conv3x3_9_out")
matmul("below_mm_13x3x17", (13, 3), (3, 17))
matmul("below_mm_16x32x64", (16, 32), (32, 64))  # every side at the line, 2^15 products
conv("below_conv3x3_9_out", (1, 17, 12, 12), 9, 3, pad=1)


def mk():
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(a.shape)) for n, a in inputs.items()]
    vo = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outs]
    ini = [numpy_helper.from_array(a, n) for n, a in inits.items()]
    m = helper.make_model(helper.make_graph(nodes, "g", vi, vo, ini), opset_imports=[helper.make_opsetid("", 17)],
                          ir_version=8)
    path = os.path.join(tempfile.mkdtemp(), "m.onnx")
    onnx.save(m, path)
    return path


def check(tag, name, got, f32, bfr, absum, k):
    check_products(s, f"{tag} {name}", got, f32, bfr, absum, k)


def kernel_chunks(src):
    """{region name: its part of the generated C} (split at the `/* kernel N: region NAME */` headers)."""
    parts = re.split(r"/\* kernel \d+: region (\S+) \*/", src)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


AMX_C = ("_tile_dpbf16ps", "_tile_loadd", "hprt_amx_ok()", "_amx_run(")
path = mk()
got = {}
# convs on the implicit GEMM on both sides (HARP_CONV=gemm); then AMX with the conv algorithm harp picks
RUNS = (("amx", {"HARP_AMX": "auto", "HARP_CONV": "gemm"}), ("no-amx", {"HARP_AMX": "off", "HARP_CONV": "gemm"}),
        ("amx-conv-auto", {"HARP_AMX": "auto"}))
for tag, env in RUNS:
    dump = tempfile.mkdtemp()
    os.environ.update(env)
    p, d = run(path, inputs, backend="cpu", extra=["--precision", "bf16", "--dump", "c", "--dump-dir", dump])
    for k in env:
        os.environ.pop(k)
    s.check(f"{tag}: runs", p.returncode == 0, p.stderr.strip()[-600:])
    if p.returncode != 0:
        continue
    src = open(os.path.join(dump, "model.c")).read()
    on = env["HARP_AMX"] == "auto"
    s.check(f"{tag}: the generated C {'has' if on else 'has no'} AMX variant", all(t in src for t in AMX_C) == on, "")
    if on:  # the tile configuration: loaded once a compute task (its start), released at its end, not per call
        ks = kernel_chunks(src)
        mk_bodies = re.findall(r"void \w+_amx_k\d+_\d+\(.*?\n}\n", src, re.S)
        tasks = re.findall(r"void (\w+_amx_task)\(void \*vc, int task, int tid\) \{\n(.*?)\n}\n", src, re.S)
        s.check(f"{tag}: AMX micro-kernels and tasks found", len(mk_bodies) >= 2 and len(tasks) >= 2,
                f"{len(mk_bodies)} kernels, {len(tasks)} tasks")
        s.check(f"{tag}: no micro-kernel loads or releases the tile configuration",
                not any("_tile_loadconfig" in b or "_tile_release" in b or "_tcfg()" in b for b in mk_bodies), "")
        bad = [n for n, b in tasks if b.count("_tcfg();") != 1 or b.count("_tile_release();") != 1
               or not b.rstrip().endswith("_tile_release();") or b.index("_tcfg();") > b.index("for (long jc")]
        s.check(f"{tag}: each AMX task loads the configuration once before its loops and releases it at its end",
                not bad, f"{bad[:5]}")
        # every case on the AMX variant but those below the line; with conv auto, convs go to the GEMM's AMX
        for c in cases:
            # the AMX micro-kernel, defined or shared with an earlier kernel's (#define, kernels deduplicated)
            # (or, a stride-1 conv, the kernel whose B tiles are read in place, $P_kip: below)
            amx_k = re.search(r"_amx_k(32_\d|ip\()", ks.get(c[0], "")) is not None
            s.check(f"{tag}: {c[0]} {'not ' if c[0] in BELOW else ''}on the AMX variant", amx_k == (c[0] not in BELOW),
                    f"{sorted(ks)[:20]}")
    for c in cases:
        got[(tag, c[0])] = np.load(os.path.join(d, c[0] + ".npy"))
        if not on and c[0] in STEMS:  # fp32: the fp32 product within fp32 accumulation's bound
            e, acc = np.abs(got[(tag, c[0])] - c[1]), c[4] * 2.0 ** -24 * c[3] + 1e-30
            s.check(f"{tag} {c[0]}: = fp32 product", bool(np.all(e <= acc)), f"max err {e.max():.3g}")
        else:
            check(tag, c[0], got[(tag, c[0])], *c[1:])
if len(got) == len(RUNS) * len(cases):
    differ = [c[0] for c in cases if c[0] not in BELOW and not np.array_equal(got[("amx", c[0])], got[("no-amx", c[0])])]
    s.check("AMX on and off differ in rounding (the AMX kernel ran)", len(differ) >= (len(cases) - len(BELOW)) // 2,
            f"differ only in {differ}")


# ---- A packed straight into the tile layout ($P_amxpk): a bf16 activation, K odd ---------------------
# r = relu(x @ w1) is stored in bf16 between the two MatMuls (its consumer multiplies in bf16), so the
# second MatMul's A is bf16 with unit stride along K, K = 67 (33 pairs: two 16-pair steps and a pair
# whose second half is 0).  Small integers keep every sum exact in fp32 and r's integers need more than
# bf16's 8 bits: y = numpy's bf16(r) @ w2 exactly (a lost tail, a pair's halves swapped, a row off by
# one all show), and the C packs A with $P_amxpk.
def ints(lo, hi, *shape):
    return rng.integers(lo, hi + 1, size=shape).astype(np.float32)


cx, cw1, cw2 = ints(-15, 15, 48, 100), ints(-15, 15, 100, 67), ints(-3, 3, 67, 96)
cr = np.maximum(cx.astype(np.float64) @ cw1, 0)
chain = helper.make_graph([helper.make_node("MatMul", ["x", "w1"], ["t"]), helper.make_node("Relu", ["t"], ["r"]),
                           helper.make_node("MatMul", ["r", "w2"], ["y"])], "chain",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [48, 100])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [48, 96])],
                          [numpy_helper.from_array(cw1, "w1"), numpy_helper.from_array(cw2, "w2")])
cpath = os.path.join(tempfile.mkdtemp(), "chain.onnx")
onnx.save(helper.make_model(chain, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), cpath)
s.check("bf16 A: the case rounds r (more than 8 significant bits)", bool(np.mean(bf16(cr) != cr) > 0.1))
dump = tempfile.mkdtemp()
p, d = run(cpath, {"x": cx}, backend="cpu", extra=["--precision", "bf16", "--dump", "c", "--dump-dir", dump])
s.check("bf16 A: runs", p.returncode == 0, p.stderr[-400:])
if p.returncode == 0:
    src = open(os.path.join(dump, "model.c")).read()
    s.check("bf16 A: r stored in bf16, packed by $P_amxpk on the AMX variant",
            re.search(r"gemm 48x96x67 [^\n]*bf16\*fp32->fp32", src) is not None and "_amxpk(" in src
            and "_amxtr(" not in src, "")
    e = np.abs(np.load(os.path.join(d, "y.npy")).astype(np.float64) - bf16(cr) @ cw2)
    s.check("bf16 A: y = numpy's bf16(r) @ w2 exactly", float(e.max()) == 0.0, f"max err {e.max():.3g}")

# ---- bf16 rows paired as they are: a 1x1 conv's B and a 3x3 conv's interleaved input, both bf16 ------
# r = relu(conv3x3(x)) is stored in bf16 between the convs (its consumers multiply in bf16), so y1 (1x1,
# a GEMM over r's rows: $P_packB pairs rows 2p, 2p + 1 of r) and y3 (3x3 on the implicit GEMM over channel
# pairs: $P_ilv pairs r's planes) take bf16 rows; 37 channels (the last pair's second half 0), 15x17 =
# 255 pixels (column tails: 255 = 7 x 32 + 31 = 3 x 64 + 63).  Integers: r's values need more than bf16's
# 8 bits, and every sum of bf16(r) times small integer weights is exact in fp32, so y1 and y3 are numpy's
# products of bf16(r) exactly (a pair's halves swapped, a lost odd channel, a column off by one all show),
# with AMX on and off (the AVX-512 BF16 variant packs with the same code).
def conv_ref(x, w, pad):
    """Cross-correlation of x (C, H, W) with w (O, C, kh, kw), stride 1, zero padding pad, float64."""
    c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.zeros((c, h + 2 * pad, wd + 2 * pad))
    xp[:, pad:pad + h, pad:pad + wd] = x
    y = np.zeros((o, h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1))
    for i in range(kh):
        for j in range(kw):
            y += np.einsum("oc,chw->ohw", w[:, :, i, j], xp[:, i:i + y.shape[1], j:j + y.shape[2]])
    return y


px, pw1, pw2, pw3 = ints(-15, 15, 1, 20, 15, 17), ints(-15, 15, 37, 20, 3, 3), ints(-2, 2, 64, 37, 1, 1), ints(-2, 2, 40, 37, 3, 3)
pr = np.maximum(conv_ref(px[0].astype(np.float64), pw1, 1), 0)
pg = helper.make_graph([helper.make_node("Conv", ["x", "w1"], ["t"], pads=[1] * 4), helper.make_node("Relu", ["t"], ["r"]),
                        helper.make_node("Conv", ["r", "w2"], ["y1"]),
                        helper.make_node("Conv", ["r", "w3"], ["y3"], pads=[1] * 4)], "pairs",
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 20, 15, 17])],
                       [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y1", "y3")],
                       [numpy_helper.from_array(a, n) for n, a in (("w1", pw1), ("w2", pw2), ("w3", pw3))])
ppath2 = os.path.join(tempfile.mkdtemp(), "pairs.onnx")
onnx.save(helper.make_model(pg, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), ppath2)
s.check("bf16 rows: the case rounds r (more than 8 significant bits)", bool(np.mean(bf16(pr) != pr) > 0.1))
want = {"y1": conv_ref(bf16(pr), pw2, 0), "y3": conv_ref(bf16(pr), pw3, 1)}
for tag, amx in (("amx", "auto"), ("no-amx", "off")):
    dump = tempfile.mkdtemp()
    os.environ["HARP_AMX"] = amx
    p, d = run(ppath2, {"x": px}, backend="cpu", extra=["--precision", "bf16", "--dump", "c", "--dump-dir", dump])
    os.environ.pop("HARP_AMX")
    s.check(f"bf16 rows {tag}: runs", p.returncode == 0, p.stderr[-400:])
    if p.returncode != 0:
        continue
    ks = kernel_chunks(open(os.path.join(dump, "model.c")).read())
    # both consumers pair r's bf16 halves as they are (zero-extend, shift, or), not through fp32
    for n in ("y1", "y3"):
        s.check(f"bf16 rows {tag}: {n} pairs bf16 rows as they are", "_mm512_slli_epi32(w1, 16)" in ks.get(n, ""),
                f"{sorted(ks)}")
    s.check(f"bf16 rows {tag}: y1 on the AMX variant" if amx == "auto" else f"bf16 rows {tag}: no AMX variant",
            (re.search(r"_amx_k32_\d", ks.get("y1", "")) is not None) == (amx == "auto"), "")
    for n in ("y1", "y3"):
        e = np.abs(np.load(os.path.join(d, n + ".npy"))[0].astype(np.float64) - want[n])
        s.check(f"bf16 rows {tag}: {n} = numpy's product of bf16(r) exactly", float(e.max()) == 0.0, f"max err {e.max():.3g}")

# ---- stride-1 and -2 convs reading their B tiles in place (cgen_amx_conv.c) -------------------------------
# The AMX variant of a bf16 stride-1 conv loads its B tiles straight from the padded channel-pair planes
# (no im2col): odd H and W, channels not a multiple of 32 (77: an odd channel paired with 0 and pairs
# rounded up to 16 with zero planes), padding 1, 0 and 2 (dilation 2), two groups, batch 2, bias + Relu and a residual Add + Relu epilogue, a weight given as an input
# (packed per run), a 2x3 window with padding 0 1 1 1; 48 channels (24 pairs in 32); a 5-channel stem (3
# pairs in 16) reads rows expanded: 16-pair blocks of virtual pairs (pair, window row), each plane a copy
# of the input rows that window row reads (cgen_bf16.c's emit_ilv_rows), as a 3-channel 7x7/2 stem (14
# virtual pairs in 16), 4 channels 5x3 with dilation 2, asymmetric padding and strides 2 x 1, and 5
# channels 5x3 with batch 2 and the weight an input; 2 channels 5x5/2 (5 virtual pairs in 16) stays on
# the im2col path; 512 channels at 17x18 with 80 outputs and a residual (340 grid columns: two column
# blocks of 256 and a tail, three row panels the last one of 16 rows): the kernel stores a tile's rows while
# the next tile's products run, across panels and blocks.  Stride 2 (the input as
# even / odd row / column phase planes): odd H and W with batch 2 and padding 1, padding 0 with a residual,
# two groups with asymmetric padding and the weight an input, dilation 2, and strides 2 x 1; a 24x24
# output (600 grid columns: more than 512) stays on the im2col path.  Where every tap reads phase (0, 0)
# (a strided 1x1: the downsampling projection; a dilation the stride divides) only that phase plane is
# written and read, at any grid size: 1x1/2 with 80 channels at 25x24 (600 columns) and a residual, odd
# sizes with 35 channels (18 pairs in 32) and batch 2, padding (asymmetric) with two groups and the weight
# an input; a dilation-2 3x3 at strides 2 x 1, and at 2 x 2 on 28x27 (756 columns).  (A 1x1 whose strides
# differ per axis is declined by the template: generic loops.)
# Integer weights in [-3, 3] (and bias): with normal x (bf16-rounded, sums not exact) the outputs are
# checked against onnxruntime's fp32 within bf16's bound and against numpy's product of bf16(x) within
# fp32 accumulation's; with integer x in [-15, 15] every sum is exact in fp32, so the in-place path
# equals numpy exactly and the im2col path (HARP_AMX=im2col) bit for bit.  (Their sums' order differs:
# the in-place K runs pair block x tap x pair, the im2col one (pair, tap) pair-major, so only exact sums
# are bit-identical.)  The generated C shows which path each conv took.
def conv_gen(x, w, pads, dil, groups, st=(1, 1)):
    """conv(x, w) (NCHW, OIHW, ONNX pads [top, left, bottom, right], dilation, groups, strides) in
    float64, and sum |x w| per output."""
    n, c, h, wd = x.shape
    oc, icg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh, ow = ip_out(x.shape, (kh, kw), pads, dil, st)
    ocg, y, ya = oc // groups, np.zeros((n, oc, oh, ow)), np.zeros((n, oc, oh, ow))
    for g in range(groups):
        xs, ws, o = xp[:, g * icg:(g + 1) * icg], w[g * ocg:(g + 1) * ocg], slice(g * ocg, (g + 1) * ocg)
        for i in range(kh):
            for j in range(kw):
                sl = xs[:, :, i * dil:i * dil + st[0] * (oh - 1) + 1:st[0], j * dil:j * dil + st[1] * (ow - 1) + 1:st[1]]
                y[:, o] += np.einsum("oc,nchw->nohw", ws[:, :, i, j], sl)
                ya[:, o] += np.einsum("oc,nchw->nohw", np.abs(ws[:, :, i, j]), np.abs(sl))
    return y, ya


def ip_out(xs, kk, pads, dil, st):
    """(oh, ow) of a conv of x shape xs, window kk, ONNX pads, dilation, strides."""
    return tuple((xs[2 + a] + pads[a] + pads[2 + a] - dil * (kk[a] - 1) - 1) // st[a] + 1 for a in (0, 1))


# name, x shape, output channels, window, pads, dilation, groups, weight an input, residual, strides
# (stride 2: the input split into even / odd row / column phase planes, cgen_bf16.c's emit_ilv_phases)
IP = (("ip_c64_13x11_b2_relu", (2, 64, 13, 11), 48, (3, 3), (1, 1, 1, 1), 1, 1, False, False, (1, 1)),
      ("ip_c77_pad0_residual", (1, 77, 9, 15), 40, (3, 3), (0, 0, 0, 0), 1, 1, False, True, (1, 1)),
      ("ip_groups2_dil2", (1, 128, 12, 12), 64, (3, 3), (2, 2, 2, 2), 2, 2, False, False, (1, 1)),
      ("ip_2x3_weight_input", (1, 96, 10, 17), 32, (2, 3), (0, 1, 1, 1), 1, 1, True, False, (1, 1)),
      ("ip_c48_24_pairs", (1, 48, 10, 10), 32, (3, 3), (1, 1, 1, 1), 1, 1, False, False, (1, 1)),
      ("ip_stem5_rows", (1, 5, 20, 22), 40, (3, 3), (1, 1, 1, 1), 1, 1, False, False, (1, 1)),
      ("ip_stem3_7x7_s2_rows", (1, 3, 45, 38), 64, (7, 7), (3, 3, 3, 3), 1, 1, False, False, (2, 2)),
      ("ip_rows_c4_5x3_dil2_s21", (1, 4, 30, 27), 40, (5, 3), (3, 1, 2, 0), 2, 1, False, False, (2, 1)),
      ("ip_rows_c5_5x3_b2_w_input", (2, 5, 20, 22), 40, (5, 3), (1, 1, 1, 1), 1, 1, True, False, (1, 1)),
      ("ip_rows_c2_5x5_s2_stays_im2col", (1, 2, 40, 40), 64, (5, 5), (2, 2, 2, 2), 1, 1, False, False, (2, 2)),
      ("ip_c512_m80_two_blocks_residual", (1, 512, 17, 18), 80, (3, 3), (1, 1, 1, 1), 1, 1, False, True, (1, 1)),
      ("ip_s2_c64_13x11_b2_pad1", (2, 64, 13, 11), 48, (3, 3), (1, 1, 1, 1), 1, 1, False, False, (2, 2)),
      ("ip_s2_c77_pad0_residual", (1, 77, 15, 17), 40, (3, 3), (0, 0, 0, 0), 1, 1, False, True, (2, 2)),
      ("ip_s2_groups2_weight_input", (1, 128, 20, 26), 64, (3, 3), (0, 1, 1, 1), 1, 2, True, False, (2, 2)),
      ("ip_s2_dil2", (1, 64, 16, 15), 32, (3, 3), (2, 2, 2, 2), 2, 1, False, False, (2, 2)),
      ("ip_s21_c96", (1, 96, 11, 9), 48, (3, 3), (1, 1, 1, 1), 1, 1, False, False, (2, 1)),
      ("ip_s2_600_columns_stays_im2col", (1, 32, 48, 48), 32, (3, 3), (1, 1, 1, 1), 1, 1, False, False, (2, 2)),
      ("ip_1x1_s2_c80_residual", (1, 80, 49, 47), 64, (1, 1), (0, 0, 0, 0), 1, 1, False, True, (2, 2)),
      ("ip_1x1_s2_b2_odd", (2, 35, 41, 39), 40, (1, 1), (0, 0, 0, 0), 1, 1, False, False, (2, 2)),
      ("ip_1x1_s2_pad1_groups2_w_input", (1, 96, 30, 31), 48, (1, 1), (1, 0, 1, 1), 1, 2, True, False, (2, 2)),
      ("ip_dil2_s21_c64", (1, 64, 21, 40), 33, (3, 3), (2, 2, 2, 2), 2, 1, False, False, (2, 1)),
      ("ip_s2_dil2_800_columns", (1, 48, 60, 58), 32, (3, 3), (2, 2, 2, 2), 2, 1, False, False, (2, 2)))
ip_nodes, ip_vi, ip_inits, ip_w, ip_x = [], [], [], {}, {}
for name, xs, oc, (kh, kw), pads, dil, groups, w_in, res, st in IP:
    w = rng.integers(-3, 4, size=(oc, xs[1] // groups, kh, kw)).astype(np.float32)
    b = rng.integers(-3, 4, size=oc).astype(np.float32)
    ip_w[name] = (w, b)
    ins = [name + "_x", name + "_w", name + "_b"]
    ip_vi.append(helper.make_tensor_value_info(name + "_x", TensorProto.FLOAT, list(xs)))
    if w_in:
        ip_vi.append(helper.make_tensor_value_info(name + "_w", TensorProto.FLOAT, list(w.shape)))
    else:
        ip_inits.append(numpy_helper.from_array(w, name + "_w"))
    ip_inits.append(numpy_helper.from_array(b, name + "_b"))
    ip_nodes.append(helper.make_node("Conv", ins, [name + "_c"], kernel_shape=[kh, kw], pads=list(pads),
                                     dilations=[dil, dil], group=groups, strides=list(st)))
    if res:
        oh, ow = ip_out(xs, (kh, kw), pads, dil, st)
        ip_vi.append(helper.make_tensor_value_info(name + "_r", TensorProto.FLOAT, [xs[0], oc, oh, ow]))
        ip_nodes.append(helper.make_node("Add", [name + "_c", name + "_r"], [name + "_a"]))
    ip_nodes.append(helper.make_node("Relu", [name + ("_a" if res else "_c")], [name]))
ipg = helper.make_graph(ip_nodes, "inplace", ip_vi,
                        [helper.make_tensor_value_info(c[0], TensorProto.FLOAT, None) for c in IP], ip_inits)
ipm = helper.make_model(ipg, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
ippath = os.path.join(tempfile.mkdtemp(), "inplace.onnx")
onnx.save(ipm, ippath)


def ip_inputs(kind):
    """The model's inputs: normal x (and residual), or integers in [-15, 15]; the weights given as inputs."""
    feeds = {}
    for name, xs, oc, (kh, kw), pads, dil, groups, w_in, res, st in IP:
        feeds[name + "_x"] = arr(*xs) if kind == "normal" else ints(-15, 15, *xs)
        if w_in:
            feeds[name + "_w"] = ip_w[name][0]
        if res:
            oh, ow = ip_out(xs, (kh, kw), pads, dil, st)
            feeds[name + "_r"] = arr(1, oc, oh, ow) if kind == "normal" else ints(-15, 15, 1, oc, oh, ow)
    return feeds


def ip_want(feeds, xf):
    """{name: (y, sum |x w|, y with relu)} in float64, x through xf (identity or bf16)."""
    want = {}
    for name, xs, oc, kk, pads, dil, groups, w_in, res, st in IP:
        w, b = ip_w[name]
        y, ya = conv_gen(xf(feeds[name + "_x"]).astype(np.float64), w.astype(np.float64), pads, dil, groups, st)
        y = y + b[None, :, None, None]
        if res:
            y = y + feeds[name + "_r"]
        want[name] = (np.maximum(y, 0), ya)
    return want


ip_got, ip_feeds = {}, {k: ip_inputs(k) for k in ("normal", "ints")}
for tag, amx, kind in (("in place", "auto", "normal"), ("in place", "auto", "ints"), ("im2col", "im2col", "ints")):
    feeds = ip_feeds[kind]
    dump = tempfile.mkdtemp()
    os.environ["HARP_AMX"] = amx
    p, d = run(ippath, feeds, backend="cpu", extra=["--precision", "bf16", "--dump", "c", "--dump-dir", dump])
    os.environ.pop("HARP_AMX")
    s.check(f"{tag} {kind}: runs", p.returncode == 0, p.stderr[-600:])
    if p.returncode != 0:
        continue
    ks = kernel_chunks(open(os.path.join(dump, "model.c")).read())
    for c in IP:  # the path in the C: tiles loaded in place ($P_kip), or the im2col packer ($P_packB)
        inplace = amx == "auto" and not c[0].endswith("stays_im2col")
        body = ks.get(c[0], "")
        s.check(f"{tag} {kind}: {c[0]} {'reads B tiles in place' if inplace else 'packs B by im2col'}",
                ("_amx_kip(" in body and "_amx_packB(" not in body) == inplace and "_amx_task(" in body,
                f"{sorted(ks)}")
    for c in IP:
        ip_got[(amx, kind, c[0])] = np.load(os.path.join(d, c[0] + ".npy"))
    if kind == "normal":  # onnxruntime's fp32 within bf16's bound; numpy's bf16(x) product within fp32 accumulation's
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = 2
        ref = dict(zip([c[0] for c in IP], ort.InferenceSession(ippath, so, providers=["CPUExecutionProvider"]).run(
            [c[0] for c in IP], feeds)))
        wb = ip_want(feeds, bf16)
        for name, xs, oc, (kh, kw), *_ in IP:
            k, got = xs[1] // _[2] * kh * kw, ip_got[(amx, kind, name)].astype(np.float64)
            b16 = (2.0 ** -7 + 2.0 ** -16 + k * 2.0 ** -24) * wb[name][1] + 1e-30
            e = np.abs(got - ref[name])
            s.check(f"{tag}: {name} = onnxruntime fp32 within bf16's bound", bool(np.all(e <= b16)),
                    f"max err {e.max():.3g}, worst ratio {np.max(e / b16):.3g}")
            acc = k * 2.0 ** -24 * wb[name][1] + 1e-30
            e = np.abs(got - wb[name][0])
            s.check(f"{tag}: {name} = numpy's product of bf16(x) within fp32 accumulation's bound",
                    bool(np.all(e <= acc)), f"max err {e.max():.3g}, worst ratio {np.max(e / acc):.3g}")
    else:
        wi = ip_want(feeds, lambda v: v)
        for c in IP:
            e = np.abs(ip_got[(amx, kind, c[0])].astype(np.float64) - wi[c[0]][0])
            s.check(f"{tag} ints: {c[0]} = numpy's exactly", float(e.max()) == 0.0, f"max err {e.max():.3g}")
for c in IP:
    if ("auto", "ints", c[0]) in ip_got and ("im2col", "ints", c[0]) in ip_got:
        s.check(f"ints: {c[0]} in place = im2col bit for bit",
                ip_got[("auto", "ints", c[0])].tobytes() == ip_got[("im2col", "ints", c[0])].tobytes(), "")

# ---- a stem whose input is a bf16 temporary (after a Relu): the row-expanded interleave of bf16 halves ----
# (cgen_bf16.c's emit_ilv_rows with xdt bf16).  Integer x: exact, so numpy's conv exactly and the im2col
# path bit for bit.
sw_ = rng.integers(-3, 4, size=(64, 3, 7, 7)).astype(np.float32)
sg = helper.make_graph([helper.make_node("Relu", ["x"], ["r"]),
                        helper.make_node("Conv", ["r", "w"], ["c"], kernel_shape=[7, 7], pads=[3] * 4, strides=[2, 2]),
                        helper.make_node("Relu", ["c"], ["y"])], "stem_bf16_in",
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 57, 50])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [numpy_helper.from_array(sw_, "w")])
spath = os.path.join(tempfile.mkdtemp(), "stem_bf16_in.onnx")
onnx.save(helper.make_model(sg, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), spath)
sx = ints(-15, 15, 1, 3, 57, 50)
sgot = {}
for amx in ("auto", "im2col"):
    dump = tempfile.mkdtemp()
    os.environ["HARP_AMX"] = amx
    p, d = run(spath, {"x": sx}, backend="cpu", extra=["--precision", "bf16", "--dump", "c", "--dump-dir", dump])
    os.environ.pop("HARP_AMX")
    s.check(f"stem after relu {amx}: runs", p.returncode == 0, p.stderr[-600:])
    if p.returncode == 0:
        src = open(os.path.join(dump, "model.c")).read()
        if amx == "auto":
            s.check("stem after relu: rows expanded from bf16 halves, tiles in place",
                    "_amx_kip(" in src and "ky = v %" in src and "const uint16_t *r0" in src, "")
        sgot[amx] = np.load(os.path.join(d, "y.npy"))
if len(sgot) == 2:
    sref, _ = conv_gen(np.maximum(sx, 0).astype(np.float64), sw_.astype(np.float64), (3, 3, 3, 3), 1, 1, (2, 2))
    s.check("stem after relu: = numpy exactly", np.array_equal(sgot["auto"], np.maximum(sref, 0)),
            f"max err {np.abs(sgot['auto'] - np.maximum(sref, 0)).max():.3g}")
    s.check("stem after relu: in place = im2col bit for bit", sgot["auto"].tobytes() == sgot["im2col"].tobytes(), "")

# ---- a standalone package with the AMX variant (harp compile --precision bf16, built without -march) --
# its task loads and releases the tile configuration: it carries the AMX target itself
pa, pw = arr(40, 131), arr(131, 72)
pg = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "pkg",
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, [40, 131])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, [40, 72])], [numpy_helper.from_array(pw, "w")])
pdir = tempfile.mkdtemp()
ppath, pkg, xin = os.path.join(pdir, "p.onnx"), os.path.join(pdir, "pkg"), os.path.join(pdir, "x.npy")
onnx.save(helper.make_model(pg, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), ppath)
np.save(xin, pa)
c = subprocess.run([HARP, "compile", ppath, "--target", "cpu", "--precision", "bf16", "--sources-only", "-o", pkg,
                    "--input", f"x={xin}"],
                   capture_output=True, text=True, timeout=300)
s.check("package: harp compile --precision bf16 (AMX variant)", c.returncode == 0, c.stderr[-600:])
if c.returncode == 0:
    s.check("package: has the AMX variant", all(t in open(os.path.join(pkg, "model.c")).read() for t in AMX_C), "")
    mk_ = subprocess.run(["make", "-s", "-C", pkg], capture_output=True, text=True, timeout=300)
    s.check("package: builds and runs", mk_.returncode == 0, mk_.stderr[-600:])
    if mk_.returncode == 0:
        f64 = lambda v: v.astype(np.float64)
        check("package", "y", np.load(os.path.join(pkg, "outputs", "y.npy")), f64(pa) @ f64(pw), bf16(pa) @ bf16(pw),
              np.abs(f64(pa)) @ np.abs(f64(pw)), 131)
s.close()
