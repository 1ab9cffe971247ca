"""--precision bf16 on the CPU backend: matmuls and convolutions multiply
bf16 operands (vdpbf16ps) with fp32 accumulation.  Skips (77) on a CPU
without AVX512_BF16.

Every contraction is checked twice against numpy in float64:
  * against the product of the operands rounded to bf16 (round to nearest
    even), within fp32 accumulation's bound K * 2^-24 * sum_k |a_k b_k|:
    this is what catches a wrong rounding, a wrong pair order or a lost tail;
  * against the fp32 product, within bf16's bound: each operand is off by at
    most 2^-8 of itself (8 significant bits), a product by 2^-7 + 2^-16, so
    (2^-7 + 2^-16 + K * 2^-24) * sum_k |a_k b_k|.
Shapes with odd sizes and tails: M, N not multiples of the 6x64 micro-tile,
K odd and over one 256-deep block, batched matmuls of two activations,
Gemm with transB, matmuls of at most 8 rows with a weight (a bf16 copy
of it streamed, both of its layouts, odd K, a batch), convs with odd channel counts (the last channel pair is
half empty), stride, dilation, groups, 1x1, a weight given as an input
(packed per run, not at init), 3x3 convs on the direct kernel over channel
pairs (cgen_dconv.c) with their input channels in blocks; convs with fewer
than 16 input channels per group (stems) on the direct kernel over column
pairs: 7x7 stride 2, 3x3 without padding (words not shifted), an even 4x4
window, groups, odd sizes and output channels; a dilated such conv, one
with little work a pixel (3 -> 8 channels 3x3), a depthwise conv and a
matmul of at most 8 rows whose B is not a weight stay fp32 (documented),
checked against fp32 tightly.  1x1 convs where the direct kernel over
channel pairs pays (7x7 pixels, 512 input channels and more, stride 2, 128
and more at 196 pixels and fewer) run on it, fewer channels and more pixels
stay on the GEMM; strided 1x1 convs reading a bf16 temp interleave only the
pixels they read (stride 2 and 3, GEMM and direct).  A chain of stems (the second reads the
first's bf16 output) runs against onnxruntime.  A concat of upsampled maps
(generic loops) stores the conv's operand in bf16 through a float row.
A small CNN and an attention block run against onnxruntime fp32 within the
documented whole-model tolerance (docs/options.md, "precision"): max abs
error <= 2e-2 * max |reference|.  And the errors: --precision fp16 on the
CPU is a usage error; `harp bench --precision bf16` prints its error
against the fp32 build."""
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

from bf16_ref import U, bf16, check_products
from harp_test import HARP, Suite, run, onnx_or_skip

onnx_or_skip(runtime=False)
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

if "avx512_bf16" not in open("/proc/cpuinfo").read():
    print("skip: this CPU has no AVX512_BF16")
    sys.exit(77)

# the AVX-512 BF16 kernels (and their choice of direct convs); on a CPU with
# AMX the AMX variant would run instead: test_amx.py checks that one
os.environ["HARP_AMX"] = "off"
s = Suite("bf16")
rng = np.random.default_rng(28)


def arr(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def mk(nodes, inputs, outputs, inits, opset=17):
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(a.shape)) for n, a in inputs.items()]
    vo = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs]
    ini = [numpy_helper.from_array(a, n) for n, a in inits.items()]
    g = helper.make_graph(nodes, "g", vi, vo, ini)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    path = os.path.join(tempfile.mkdtemp(), "m.onnx")
    onnx.save(m, path)
    return path


def conv_ref(x, w, stride, pad, dil, groups):
    """y = conv(x, w) in float64 (NCHW, OIHW), and sum |x w| per output."""
    n, c, h, wd = x.shape
    oc, icg, kh, kw = w.shape
    oh = (h + 2 * pad - dil * (kh - 1) - 1) // stride + 1
    ow = (wd + 2 * pad - dil * (kw - 1) - 1) // stride + 1
    xp = np.zeros((n, c, h + 2 * pad, wd + 2 * pad))
    xp[:, :, pad:pad + h, pad:pad + wd] = x
    y, ya = np.zeros((n, oc, oh, ow)), np.zeros((n, oc, oh, ow))
    ocg = oc // groups
    for g in range(groups):
        for i in range(kh):
            for j in range(kw):
                win = xp[:, g * icg:(g + 1) * icg, i * dil:i * dil + stride * (oh - 1) + 1:stride,
                         j * dil:j * dil + stride * (ow - 1) + 1:stride]
                wt = w[g * ocg:(g + 1) * ocg, :, i, j]
                y[:, g * ocg:(g + 1) * ocg] += np.einsum("nchw,oc->nohw", win, wt)
                ya[:, g * ocg:(g + 1) * ocg] += np.einsum("nchw,oc->nohw", np.abs(win), np.abs(wt))
    return y, ya


def check(name, got, f32, bfr, absum, k, exact_fp32=False):
    """got against the bf16-operand product bfr and the fp32 product f32
    (absum: sum |a b| per element, k: the depth)."""
    got = got.astype(np.float64)
    acc = (k * U) * absum + 1e-30
    if exact_fp32:  # stays fp32: the fp32 product within accumulation's bound
        e = np.abs(got - f32)
        s.check(f"{name}: fp32 (not bf16)", bool(np.all(e <= acc)), f"max err {e.max():.3g} > {acc.max():.3g}")
        return
    check_products(s, name, got, f32, bfr, absum, k)
    # the test must be able to tell bf16 from fp32: this case's fp32 result is outside the accumulation bound
    s.check(f"{name}: the case tells bf16 from fp32", bool(np.any(np.abs(f32 - bfr) > acc)), "")


# ---- the contractions, one model --------------------------------------------------------------
nodes, inputs, inits, outs, cases = [], {}, {}, [], []


def matmul(name, a_shape, b_shape, b_init=True):
    a, b = arr(*a_shape), arr(*b_shape)
    inputs[name + "_a"] = a
    (inits if b_init else inputs)[name + "_b"] = b
    nodes.append(helper.make_node("MatMul", [name + "_a", name + "_b"], [name]))
    outs.append(name)
    f32 = np.matmul(a.astype(np.float64), b.astype(np.float64))
    bfr = np.matmul(bf16(a), bf16(b))
    absum = np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
    cases.append((name, f32, bfr, absum, a_shape[-1]))


def gemm_bt(name, m, n, k):
    a, w, c = arr(m, k), arr(n, k), arr(n)
    inputs[name + "_a"] = a
    inits[name + "_w"], inits[name + "_c"] = w, c
    nodes.append(helper.make_node("Gemm", [name + "_a", name + "_w", name + "_c"], [name], transB=1))
    outs.append(name)
    f32 = a.astype(np.float64) @ w.T.astype(np.float64) + c
    bfr = bf16(a) @ bf16(w).T + c
    absum = np.abs(a.astype(np.float64)) @ np.abs(w.T.astype(np.float64))
    cases.append((name, f32, bfr, absum, k))


def conv(name, xs, oc, kk, stride=1, pad=0, dil=1, groups=1, w_init=True, exact=False):
    x = arr(*xs)
    w = arr(oc, xs[1] // groups, kk, kk, scale=0.5)
    inputs[name + "_x"] = x
    (inits if w_init else inputs)[name + "_w"] = w
    nodes.append(helper.make_node("Conv", [name + "_x", name + "_w"], [name], strides=[stride] * 2, pads=[pad] * 4,
                                  dilations=[dil] * 2, group=groups))
    outs.append(name)
    f32, absum = conv_ref(x.astype(np.float64), w.astype(np.float64), stride, pad, dil, groups)
    bfr, _ = conv_ref(bf16(x), bf16(w), stride, pad, dil, groups)
    cases.append((name, f32, bfr, absum, xs[1] // groups * kk * kk, exact))


matmul("mm_tails", (37, 529), (529, 75))
matmul("mm_tile", (12, 64), (64, 128))
matmul("mm_k3", (13, 3), (3, 17))
matmul("mm_batched_acts", (2, 3, 33, 40), (2, 3, 40, 19), b_init=False)
# <= 8 rows with a weight B: the streaming kernel over a bf16 copy of B made at init
# (cgen_skinny_bf16.c): B along N (pair rows), an odd K's last pair, N tails; B along K (x W^T:
# dot products, 16 words a step, a masked last step), a bias; a batch sharing the weight
SKINNY_BF16 = ("mm_skinny", "mm_skinny_oddk", "mm_skinny_batched", "gemm_bt_skinny", "gemm_bt_skinny_1row")
matmul("mm_skinny", (5, 130), (130, 70))
matmul("mm_skinny_oddk", (3, 131), (131, 37))
matmul("mm_skinny_batched", (2, 4, 40), (40, 19))
matmul("mm_skinny_b_input", (5, 130), (130, 70), b_init=False)  # B not a weight: streamed as it is, fp32
# deeper than two of the plan's k blocks (a bf16 block is twice the fp32 depth): C summed over blocks
matmul("mm_deep_blocks", (21, 1701), (1701, 50))
matmul("mm_deep_batched_acts", (2, 17, 1103), (2, 1103, 35), b_init=False)  # B packed per run, in blocks
gemm_bt("gemm_transb_bias", 50, 70, 100)
gemm_bt("gemm_bt_skinny", 2, 45, 101)
gemm_bt("gemm_bt_skinny_1row", 1, 70, 600)
conv("conv3x3_odd_channels", (1, 19, 17, 13), 23, 3, pad=1)
conv("conv3x3_s2_batch2", (2, 16, 15, 15), 32, 3, stride=2, pad=1)
conv("conv3x3_dil2_groups2", (1, 38, 11, 9), 10, 3, pad=2, dil=2, groups=2)
conv("conv1x1", (1, 33, 9, 11), 40, 1)
conv("conv1x1_s2", (1, 32, 10, 10), 24, 1, stride=2)
conv("conv5x5_weight_input", (1, 17, 12, 12), 9, 5, pad=2, w_init=False)
conv("conv3x3_blocked_channels", (1, 401, 9, 7), 40, 3, pad=1)  # direct kernel: channel pairs in blocks
# < 16 input channels per group: the direct kernel over column pairs (cgen_dconv.c's dconv_cols)
conv("conv3x3_3_channels", (1, 3, 20, 20), 8, 3, stride=2, pad=1, exact=True)  # too little work a pixel: fp32
conv("stem7x7_s2_odd", (1, 3, 37, 41), 20, 7, stride=2, pad=3)
conv("cols3x3_pad0_batch2", (2, 5, 13, 19), 40, 3)
conv("cols4x4_even_window", (1, 3, 15, 17), 33, 4, pad=1)
conv("cols3x3_groups2", (1, 16, 11, 11), 48, 3, pad=1, groups=2)
conv("cols3x3_dil2", (1, 3, 12, 12), 8, 3, pad=2, dil=2, exact=True)  # dilated: stays fp32
# few output channels, not a multiple of 16: the direct kernel with pixels in lanes (cgen_dconv_px.c)
conv("px3x3_96_to_24", (1, 96, 13, 37), 24, 3, pad=1)
conv("px5x5_odd_channels_batch2", (2, 33, 9, 20), 9, 5, pad=2)
conv("px3x3_weight_input", (1, 17, 6, 31), 12, 3, pad=1, w_init=False)
conv("depthwise", (1, 16, 10, 10), 16, 3, pad=1, groups=16, exact=True)
# 1x1 windows on the direct kernel over channel pairs (the fp32 rule on the pair view, cg_dconv_plan):
# pixels the GEMM would pad (7x7), 256 pairs and more (an odd 515: the last pair half empty), stride 2,
# 64 pairs and more over 196 pixels and fewer (an odd 129: 65 pairs); 60 pairs over 128 pixels and
# 65 over 224 stay on the GEMM
DIRECT_1X1 = ("c1x1_7x7_direct", "c1x1_515ch_direct", "c1x1_s2_512ch_direct", "c1x1_129ch_196px_direct")
GEMM_1X1 = ("c1x1_120ch_gemm", "c1x1_129ch_224px_gemm")
conv("c1x1_7x7_direct", (1, 64, 7, 7), 48, 1)
conv("c1x1_515ch_direct", (1, 515, 4, 16), 32, 1)
conv("c1x1_s2_512ch_direct", (1, 512, 8, 9), 32, 1, stride=2)
conv("c1x1_129ch_196px_direct", (1, 129, 14, 14), 32, 1)
conv("c1x1_120ch_gemm", (1, 120, 8, 16), 32, 1)
conv("c1x1_129ch_224px_gemm", (1, 129, 14, 16), 32, 1)


def kernel_chunks(src):
    """{region name: its part of the generated C} (split at the `/* kernel N: region NAME */` headers)."""
    parts = re.split(r"/\* kernel \d+: region (\S+) \*/", src)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}

path = mk(nodes, inputs, outs, inits)
dump = tempfile.mkdtemp()
p, d = run(path, inputs, backend="cpu", extra=["--precision", "bf16", "--dump", "c", "--dump-dir", dump])
s.check("contractions: run with --precision bf16", p.returncode == 0, p.stderr.strip()[-600:])
if p.returncode == 0:
    src = open(os.path.join(dump, "model.c")).read()
    s.check("contractions: the generated C uses vdpbf16ps", "_mm512_dpbf16_ps" in src)
    # 3x3 convs run on the direct kernel over channel pairs (cgen_dconv.c), blocked channels included
    s.check("contractions: 3x3 convs on the direct bf16 kernel", "direct conv (bf16, channel pairs" in src)
    s.check("contractions: a direct bf16 conv with blocked channels",
            any(int(m) < 201 for m in re.findall(r"direct conv \(bf16, channel pairs[^\n]*; (\d+) input channels per block", src)))
    s.check("contractions: 24, 9 and 12 output channels on the kernel with pixels in lanes",
            len(re.findall(r"direct conv \(bf16, output channels not a multiple of 16", src)) == 3)
    s.check("contractions: stems on the direct bf16 kernel over column pairs",
            len(re.findall(r"direct conv \(bf16, column pairs", src)) >= 4)
    ks = kernel_chunks(src)
    for n in DIRECT_1X1 + GEMM_1X1:
        on = "direct conv (bf16, channel pairs" in ks.get(n, "")
        s.check(f"contractions: {n} {'on' if n in DIRECT_1X1 else 'not on'} the direct bf16 kernel",
                on == (n in DIRECT_1X1), f"kernels: {sorted(ks)[:40]}")
    for n in SKINNY_BF16 + ("mm_skinny_b_input",):
        kb = ks.get(n, "")
        on = "_pack_b_run" in kb and "_mm512_dpbf16_ps" in kb
        s.check(f"contractions: {n} {'streams a bf16 copy of its weight' if n in SKINNY_BF16 else 'streams fp32 B'}",
                on == (n in SKINNY_BF16), f"kernels: {sorted(ks)[:40]}")
    for c in cases:
        name, f32, bfr, absum, k = c[:5]
        exact = (len(c) > 5 and c[5]) or name == "mm_skinny_b_input"
        check(name, np.load(os.path.join(d, name + ".npy")), f32, bfr, absum, k, exact_fp32=exact)
# the object's numbers (tier0=off): an fp32 model's first run is tier 0's otherwise (harp_test.py)
q, d32 = run(path, inputs, backend="cpu", extra=["--precision", "fp32", "--dump", "c", "--dump-dir", dump, "--knob", "tier0=off"])
s.check("contractions: --precision fp32 runs", q.returncode == 0, q.stderr.strip()[-600:])
if q.returncode == 0:
    s.check("contractions: fp32 has no vdpbf16ps", "dpbf16" not in open(os.path.join(dump, "model.c")).read())
    for c in cases:
        name, f32, bfr, absum, k = c[:5]
        check(name + " (fp32 build)", np.load(os.path.join(d32, name + ".npy")), f32, bfr, absum, k, exact_fp32=True)

# ---- whole models against onnxruntime fp32 ------------------------------------------------------
try:
    import onnxruntime as ort
except ImportError:
    ort = None


def vs_ort(name, path, feeds, tol=2e-2):
    p, d = run(path, feeds, backend="cpu", extra=["--precision", "bf16"])
    s.check(f"{name}: runs in bf16", p.returncode == 0, p.stderr.strip()[-600:])
    if p.returncode or ort is None:
        return
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    for o, want in zip(sess.get_outputs(), sess.run(None, feeds)):
        got = np.load(os.path.join(d, o.name + ".npy"))
        err, scale = float(np.max(np.abs(got - want))), float(np.max(np.abs(want)))
        s.check(f"{name}: {o.name} vs onnxruntime fp32, max abs err {err:.3g} <= {tol} x max |ref| {scale:.3g}",
                err <= tol * scale, f"ratio {err / scale:.3g}")
        s.check(f"{name}: {o.name} differs from fp32 (bf16 ran)", err > 1e-6 * scale, f"err {err:.3g}")


def he(*shape):
    return arr(*shape, scale=float(np.sqrt(2.0 / np.prod(shape[1:]))))


cnn = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1] * 4), helper.make_node("Relu", ["c1"], ["r1"]),
       helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1] * 4, strides=[2, 2]),
       helper.make_node("Relu", ["c2"], ["r2"]), helper.make_node("Conv", ["r2", "w3"], ["c3"]),
       helper.make_node("Add", ["c3", "c2"], ["s3"]), helper.make_node("Relu", ["s3"], ["r3"]),
       helper.make_node("GlobalAveragePool", ["r3"], ["g"]), helper.make_node("Flatten", ["g"], ["f"]),
       helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1)]
cnn_w = {"w1": he(16, 3, 3, 3), "b1": arr(16, scale=0.1), "w2": he(32, 16, 3, 3), "b2": arr(32, scale=0.1),
         "w3": he(32, 32, 1, 1), "wf": he(10, 32), "bf": arr(10, scale=0.1)}
vs_ort("small CNN", mk(cnn, {"x": arr(1, 3, 32, 32)}, ["y"], cnn_w), {"x": arr(1, 3, 32, 32)})

# stems: 3 -> 8 channels 7x7/2, then 8 -> 32 3x3 reading the first's bf16 output, both on column pairs
stem = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[3] * 4, strides=[2, 2]),
        helper.make_node("Relu", ["c1"], ["r1"]), helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1] * 4),
        helper.make_node("Relu", ["c2"], ["r2"]), helper.make_node("Conv", ["r2", "w3"], ["y"], pads=[1] * 4)]
stem_w = {"w1": he(8, 3, 7, 7), "b1": arr(8, scale=0.1), "w2": he(32, 8, 3, 3), "w3": he(16, 32, 3, 3)}
vs_ort("stem chain", mk(stem, {"x": arr(1, 3, 45, 38)}, ["y"], stem_w), {"x": arr(1, 3, 45, 38)})

# 24 output channels (pixels in lanes) reading a bf16 temp, with a bias, a residual and a relu after
head = [helper.make_node("Conv", ["x", "w1"], ["c1"]), helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1] * 4), helper.make_node("Conv", ["x", "w0"], ["c0"]),
        helper.make_node("Add", ["c2", "c0"], ["s2"]), helper.make_node("Relu", ["s2"], ["y"])]
head_w = {"w1": he(32, 32, 1, 1), "w2": he(24, 32, 3, 3), "b2": arr(24, scale=0.1), "w0": he(24, 32, 1, 1)}
vs_ort("24-channel head", mk(head, {"x": arr(1, 32, 19, 35)}, ["y"], head_w), {"x": arr(1, 32, 19, 35)})

# a bf16 temporary read by the next contractions, against numpy: its rows paired 32 words a
# vpermt2w pair (cgen_bf16.c's emit_bf16_pairs32) by the GEMM's B packer on whole 64-column
# panels (1x1 33 -> 40 over 20 x 40 pixels) and by the direct conv's interleave on rows of 40
# (3x3 33 -> 32); 33 channels: the last pair takes the 16-word path.  Reference: the temp as
# harp stores it, relu(conv(bf16 x, bf16 w1)) rounded to bf16, times bf16 w2 / w3; bound: one
# bf16 step of every temp element (the temp's own fp32 sum may round the other way) plus fp32
# accumulation: (2^-8 + K 2^-24) sum |w r|.  A pair swapped or shifted is off by O(sum |w r|).
def chain_case():
    x, w1 = arr(1, 17, 20, 40), arr(33, 17, 3, 3, scale=0.3)
    w2, w3 = arr(40, 33, 1, 1, scale=0.3), arr(32, 33, 3, 3, scale=0.3)
    nodes_ = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1] * 4), helper.make_node("Relu", ["c1"], ["r1"]),
              helper.make_node("Conv", ["r1", "w2"], ["y2"]), helper.make_node("Conv", ["r1", "w3"], ["y3"], pads=[1] * 4)]
    path_ = mk(nodes_, {"x": x}, ["y2", "y3"], {"w1": w1, "w2": w2, "w3": w3})
    dd = tempfile.mkdtemp()
    p_, d_ = run(path_, {"x": x}, backend="cpu", extra=["--precision", "bf16", "--dump", "c", "--dump-dir", dd])
    s.check("bf16 temp chain: runs", p_.returncode == 0, p_.stderr.strip()[-600:])
    if p_.returncode:
        return
    src_ = open(os.path.join(dd, "model.c")).read()
    ks_ = kernel_chunks(src_)
    for n in ("y2", "y3"):
        s.check(f"bf16 temp chain: {n} pairs the temp 32 words a vpermt2w pair",
                "_mm512_permutex2var_epi16(x0, ilo, x1)" in ks_.get(n, ""), f"kernels: {sorted(ks_)}")
    r, _ = conv_ref(bf16(x), bf16(w1), 1, 1, 1, 1)
    r = bf16(np.maximum(r, 0.0))
    for name, w, pad in (("y2", w2, 0), ("y3", w3, 1)):
        ref, absum = conv_ref(r, bf16(w), 1, pad, 1, 1)
        k = w.shape[1] * w.shape[2] * w.shape[3]
        got = np.load(os.path.join(d_, name + ".npy")).astype(np.float64)
        e, bound = np.abs(got - ref), (2.0 ** -8 + k * U) * absum + 1e-30
        s.check(f"bf16 temp chain: {name} = the bf16 temp's product within one bf16 step a term",
                bool(np.all(e <= bound)), f"max err {e.max():.3g}, worst ratio to the bound {np.max(e / bound):.3g}")


chain_case()


# strided 1x1 convs reading a bf16 temp: the interleave keeps only the pixels the window reads
# (cgen_bf16.c's cg_emit_bf16_ilv_sub) and the conv runs as one of stride 1 over them.  Stride 2
# from one 32-element load a row (the even halves): on the GEMM (11 x 19 outputs: a masked tail
# of 3 whose last read is the row's last column) and on the direct kernel (7 x 7 outputs over one
# row of 49); stride 3 through the stack rows (13 and 34 a row: the 16-word pairing, and the
# 32-word one with a tail).  33 channels: the last pair half empty.  Reference and bound as chain_case.
def strided_1x1_case():
    xa, xb, xc = arr(1, 17, 13, 13), arr(1, 17, 21, 37), arr(1, 17, 7, 100)
    w1, wa, wb = arr(33, 17, 3, 3, scale=0.3), arr(48, 33, 1, 1, scale=0.3), arr(40, 33, 1, 1, scale=0.3)
    nodes_ = [helper.make_node("Conv", ["xa", "w1"], ["ca"], pads=[1] * 4), helper.make_node("Relu", ["ca"], ["ra"]),
              helper.make_node("Conv", ["xb", "w1"], ["cb"], pads=[1] * 4), helper.make_node("Relu", ["cb"], ["rb"]),
              helper.make_node("Conv", ["xc", "w1"], ["cc"], pads=[1] * 4), helper.make_node("Relu", ["cc"], ["rc"]),
              helper.make_node("Conv", ["ra", "wa"], ["s2_direct"], strides=[2, 2]),
              helper.make_node("Conv", ["rb", "wb"], ["s2_gemm"], strides=[2, 2]),
              helper.make_node("Conv", ["rb", "wb"], ["s3_gemm"], strides=[3, 3]),
              helper.make_node("Conv", ["rc", "wb"], ["s3_gemm_wide"], strides=[3, 3])]
    outs_ = {"s2_direct": ("ra", wa, 2, 2), "s2_gemm": ("rb", wb, 2, 2), "s3_gemm": ("rb", wb, 3, 3),
             "s3_gemm_wide": ("rc", wb, 3, 3)}
    feeds = {"xa": xa, "xb": xb, "xc": xc}
    path_ = mk(nodes_, feeds, list(outs_), {"w1": w1, "wa": wa, "wb": wb})
    dd = tempfile.mkdtemp()
    p_, d_ = run(path_, feeds, backend="cpu", extra=["--precision", "bf16", "--dump", "c", "--dump-dir", dd])
    s.check("strided 1x1: runs", p_.returncode == 0, p_.stderr.strip()[-600:])
    if p_.returncode:
        return
    ks_ = kernel_chunks(open(os.path.join(dd, "model.c")).read())
    fast = "_mm512_maskz_loadu_epi16(m, r0 + 2 * j)"
    for n in outs_:
        k_ = ks_.get(n, "")
        s.check(f"strided 1x1: {n} interleaves only the pixels it reads",
                (fast in k_) if n.startswith("s2_") else ("t0[j] = r0[j * " in k_), f"kernels: {sorted(ks_)}")
        s.check(f"strided 1x1: {n} {'on' if 'direct' in n else 'not on'} the direct kernel",
                ("direct conv (bf16, channel pairs" in k_) == ("direct" in n), "")
    rs = {}
    for r_, x_ in (("ra", xa), ("rb", xb), ("rc", xc)):
        c_, _ = conv_ref(bf16(x_), bf16(w1), 1, 1, 1, 1)
        rs[r_] = bf16(np.maximum(c_, 0.0))
    for n, (r_, w, sh, sw) in outs_.items():
        sub = rs[r_][:, :, ::sh, ::sw]
        wm = bf16(w)[:, :, 0, 0]
        ref = np.einsum("oc,nchw->nohw", wm, sub)
        absum = np.einsum("oc,nchw->nohw", np.abs(wm), np.abs(sub))
        got = np.load(os.path.join(d_, n + ".npy")).astype(np.float64)
        e, bound = np.abs(got - ref), (2.0 ** -8 + w.shape[1] * U) * absum + 1e-30
        s.check(f"strided 1x1: {n} {got.shape} = the bf16 temp's product within one bf16 step a term",
                got.shape == ref.shape and bool(np.all(e <= bound)),
                f"shape {got.shape} vs {ref.shape}" if got.shape != ref.shape else
                f"max err {e.max():.3g}, worst ratio to the bound {np.max(e / bound):.3g}")


strided_1x1_case()

S, E, H = 24, 64, 4
att = [helper.make_node("MatMul", ["x", "wq"], ["q0"]), helper.make_node("MatMul", ["x", "wk"], ["k0"]),
       helper.make_node("MatMul", ["x", "wv"], ["v0"])]
for t in "qkv":
    att += [helper.make_node("Reshape", [t + "0", "shp"], [t + "1"]),
            helper.make_node("Transpose", [t + "1"], [t + "h"], perm=[0, 2, 1, 3] if t != "k" else [0, 2, 3, 1])]
att += [helper.make_node("MatMul", ["qh", "kh"], ["sc"]), helper.make_node("Mul", ["sc", "scale"], ["ss"]),
        helper.make_node("Softmax", ["ss"], ["pr"], axis=-1), helper.make_node("MatMul", ["pr", "vh"], ["oh"]),
        helper.make_node("Transpose", ["oh"], ["ot"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["ot", "shp2"], ["o2"]), helper.make_node("MatMul", ["o2", "wo"], ["y"])]
att_w = {"wq": he(E, E).T.copy(), "wk": he(E, E).T.copy(), "wv": he(E, E).T.copy(), "wo": he(E, E).T.copy(),
         "shp": np.array([1, S, H, E // H], np.int64), "shp2": np.array([1, S, E], np.int64),
         "scale": np.array(1.0 / np.sqrt(E // H), np.float32)}
vs_ort("attention block", mk(att, {"x": arr(1, S, E)}, ["y"], att_w), {"x": arr(1, S, E)})

# ---- the fused attention kernel in bf16 -------------------------------------------------------
# q, k, v [1, H, S, d] straight in: MatMul, scale, Softmax, MatMul becomes the attention template
# (checked in the C).  Odd d (pairs padded with 0), keys over two 64-key blocks with a tail,
# query rows not a multiple of the micro-tile.  Reference: the kernel's own rounding in numpy
# (q scaled by scale*log2(e) then bf16, k and v bf16, base-2 softmax, P rounded to bf16 for P V,
# the sum l of the unrounded P); a P that lands within an fp32 ulp of a bf16 tie may round the
# other way, one bf16 step of one term: the tolerance allows a step of the largest term.
AH, AM, AN, AD, ADV = 2, 70, 133, 17, 24
aq, ak, av = arr(1, AH, AM, AD), arr(1, AH, AN, AD), arr(1, AH, AN, ADV)
ascale = np.float32(1.0 / np.sqrt(AD))
anodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]), helper.make_node("MatMul", ["q", "kt"], ["sc"]),
          helper.make_node("Mul", ["sc", "scale"], ["ss"]), helper.make_node("Softmax", ["ss"], ["pr"], axis=-1),
          helper.make_node("MatMul", ["pr", "v"], ["o"])]
apath = mk(anodes, {"q": aq, "k": ak, "v": av}, ["o"], {"scale": np.array(ascale)})
p, d = run(apath, {"q": aq, "k": ak, "v": av}, backend="cpu", extra=["--precision", "bf16", "--dump", "c", "--dump-dir", dump])
s.check("attention: runs in bf16", p.returncode == 0, p.stderr[-400:])
if p.returncode == 0:
    src = open(os.path.join(dump, "model.c")).read()
    s.check("attention: the fused kernel, with vdpbf16ps", re.search(r"_attn: attention", src) is not None and
            re.search(r"_attn_avx512_s\d[^\n]*\n(.*\n){0,40}.*_mm512_dpbf16_ps", src) is not None)
    log2e = np.float32(1.4426950408889634)
    qs = bf16((aq * np.float32(ascale * log2e)).astype(np.float32))
    sc = np.einsum("bhmd,bhnd->bhmn", qs, bf16(ak))
    # the online softmax over blocks of 64 keys: P of a block is rounded relative to the running max
    m_, l_, acc, big, tot = np.full(sc.shape[:3] + (1,), -np.inf), 0.0, 0.0, 0.0, 0.0
    for j0 in range(0, AN, 64):
        blk = sc[..., j0:j0 + 64]
        mn = np.maximum(m_, blk.max(-1, keepdims=True))
        al = np.exp2(m_ - mn)
        pr = np.exp2(blk - mn)
        terms = np.einsum("bhmn,bhnv->bhmnv", bf16(pr.astype(np.float32)), bf16(av[:, :, j0:j0 + 64]))
        acc = acc * al + terms.sum(3)
        big, tot = np.maximum(big * al, np.abs(terms).max(3)), tot * al + np.abs(terms).sum(3)
        l_, m_ = l_ * al + pr.sum(-1, keepdims=True), mn
    want = acc / l_
    got = np.load(os.path.join(d, "o.npy")).astype(np.float64)
    tol = (2.0 ** -7 * big + 1e-5 * tot) / l_
    e = np.abs(got - want)
    s.check("attention: = the bf16 kernel's rounding (numpy)", bool(np.all(e <= tol)), f"max err {e.max():.3g}, "
            f"worst ratio {np.max(e / tol):.3g}")
    f32 = np.einsum("bhmn,bhnv->bhmv", np.exp(sc32 := np.einsum("bhmd,bhnd->bhmn", aq.astype(np.float64), ak) * ascale)
                    / np.exp(sc32).sum(-1, keepdims=True), av)
    s.check("attention: within bf16's error of fp32 (2e-2 x max)", float(np.abs(got - f32).max()) <= 2e-2 * np.abs(f32).max(),
            f"{np.abs(got - f32).max():.3g}")
    s.check("attention: tells bf16 from fp32", bool(np.any(np.abs(f32 - want) > tol)), "")

# ---- activations between contractions stored in bf16 ---------------------------------------------
# r1 = relu(conv1x1(x) + b) is read by a 1x1 conv (plus r1 as its residual) and by a depthwise conv
# (fp32 math).  Its buffer is bf16: the residual and the depthwise conv see bf16(r1).  Small integers
# keep every sum exact in fp32 (|sum| < 2^24) and r1's integers need more than bf16's 8 bits, so the
# outputs equal numpy's with r1 rounded, exactly, and differ from the fp32 build's (exact too).
def ints(lo, hi, *shape):
    return rng.integers(lo, hi + 1, size=shape).astype(np.float32)


cx, cw1, cb1, cw2, cwd = ints(-15, 15, 1, 32, 10, 9), ints(-15, 15, 32, 32, 1, 1), ints(-50, 50, 32), \
    ints(-15, 15, 32, 32, 1, 1), ints(-3, 3, 32, 1, 3, 3)
chain = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"]), helper.make_node("Relu", ["c1"], ["r1"]),
         helper.make_node("Conv", ["r1", "w2"], ["c2"]), helper.make_node("Add", ["c2", "r1"], ["y1"]),
         helper.make_node("Conv", ["r1", "wd"], ["y2"], group=32, pads=[1] * 4)]
cpath = mk(chain, {"x": cx}, ["y1", "y2"], {"w1": cw1, "b1": cb1, "w2": cw2, "wd": cwd})
r1 = np.maximum(np.einsum("nchw,oc->nohw", cx.astype(np.float64), cw1[:, :, 0, 0]) + cb1[None, :, None, None], 0)


def chain_ref(r, rm):
    """y1 = conv1x1(rm, w2) + r, y2 = depthwise(r): rm the operand the bf16 GEMM multiplies (bf16(r1) in both
    builds of a bf16 run), r what the residual and the fp32 depthwise conv read."""
    y1 = np.einsum("nchw,oc->nohw", rm, cw2[:, :, 0, 0]) + r
    rp, y2 = np.pad(r, ((0, 0), (0, 0), (1, 1), (1, 1))), np.zeros_like(r)
    for i in range(3):
        for j in range(3):
            y2 += rp[:, :, i:i + 10, j:j + 9] * cwd[None, :, 0, i, j, None, None]
    return {"y1": y1, "y2": y2}


s.check("bf16 activations: the case rounds r1 (more than 8 significant bits)", bool(np.mean(bf16(r1) != r1) > 0.1))
# the knob bf16_fp32_temps (an A/B switch) keeps r1 in fp32: bf16 products, the fp32 r1 elsewhere
for prec, knob, want in (("bf16", [], chain_ref(bf16(r1), bf16(r1))), ("fp32", [], chain_ref(r1, r1)),
                         ("bf16", ["--knob", "bf16_fp32_temps=1"], chain_ref(r1, bf16(r1)))):
    p, d = run(cpath, {"x": cx}, backend="cpu", extra=["--precision", prec, "--dump", "c", "--dump-dir", dump] + knob)
    prec += " " + " ".join(knob)
    s.check(f"bf16 activations: --precision {prec} runs", p.returncode == 0, p.stderr[-400:])
    if p.returncode:
        continue
    src = open(os.path.join(dump, "model.c")).read()
    narrowed = re.search(r"gemm 32x90x32 [^\n]*fp32\*fp32->bf16", src) is not None and \
        re.search(r"depthwise conv [^\n]*bf16\*fp32->fp32", src) is not None
    s.check(f"bf16 activations, {prec}: r1 stored in {'bf16' if prec == 'bf16 ' else 'fp32'} (the kernels' headers)",
            narrowed == (prec == "bf16 "), "")
    if prec == "bf16 ":  # the conv's epilogue rounds with vcvtneps2bf16 (y1 below: numpy's nearest even exactly)
        s.check("bf16 activations: r1 rounded by vcvtneps2bf16", "_mm512_cvtneps_pbh(x)" in src, "")
    for o in ("y1", "y2"):
        e = np.abs(np.load(os.path.join(d, o + ".npy")).astype(np.float64) - want[o])
        s.check(f"bf16 activations, {prec}: {o} = numpy's exactly", float(e.max()) == 0.0, f"max err {e.max():.3g}")

# a bare 1x1 conv (nothing fused after it) reads r1 as a contraction operand too: r1 stored in bf16
bpath = mk(chain[:3], {"x": cx}, ["c2"], {"w1": cw1, "b1": cb1, "w2": cw2})
p, d = run(bpath, {"x": cx}, backend="cpu", extra=["--precision", "bf16", "--dump", "c", "--dump-dir", dump])
s.check("bf16 activations, a bare conv: runs", p.returncode == 0, p.stderr[-400:])
if p.returncode == 0:
    src = open(os.path.join(dump, "model.c")).read()
    s.check("bf16 activations, a bare conv: r1 stored in bf16 (written and read so)",
            re.search(r"gemm 32x90x32 [^\n]*fp32\*fp32->bf16", src) is not None and
            re.search(r"gemm 32x90x32 [^\n]*fp32\*bf16->fp32", src) is not None, "")
    e = np.abs(np.load(os.path.join(d, "c2.npy")).astype(np.float64) -
               np.einsum("nchw,oc->nohw", bf16(r1), cw2[:, :, 0, 0]))
    s.check("bf16 activations, a bare conv: c2 = numpy's conv of bf16(r1) exactly", float(e.max()) == 0.0,
            f"max err {e.max():.3g}")

# ---- a matmul whose A is a bf16 activation (its pairs packed as words, cgen_bf16.c) ----------------
# h = relu(x @ wa + ba) is stored in bf16 and is the A of y = h @ wb (+ bb, or a bare MatMul: a region
# of one contraction block, nothing fused after it, reads its operands as a contraction's too).  Small
# integers keep every sum exact in fp32 and h's integers need more than bf16's 8 bits, so y = bf16(h) @ wb
# exactly (numpy), which the fp32 h would miss.  29 rows (a part panel), K = 777 (odd: the last pair half
# empty; over one block).
mx, mwa, mba, mwb = ints(-15, 15, 29, 40), ints(-15, 15, 40, 777), ints(-60, 60, 777), ints(-3, 3, 777, 45)
mbb = ints(-9, 9, 45)
mh = np.maximum(mx.astype(np.float64) @ mwa + mba, 0)
s.check("bf16 A of a matmul: the case rounds h (more than 8 significant bits)", bool(np.mean(bf16(mh) != mh) > 0.1))
for bias in (True, False):
    tail = [helper.make_node("MatMul", ["h", "wb"], ["y0"]), helper.make_node("Add", ["y0", "bb"], ["y"])] if bias \
        else [helper.make_node("MatMul", ["h", "wb"], ["y"])]
    minits = {"wa": mwa, "ba": mba, "wb": mwb, **({"bb": mbb} if bias else {})}
    mpath = mk([helper.make_node("MatMul", ["x", "wa"], ["g"]), helper.make_node("Add", ["g", "ba"], ["gb"]),
                helper.make_node("Relu", ["gb"], ["h"])] + tail, {"x": mx}, ["y"], minits)
    tag = "bf16 A of a matmul" + ("" if bias else " (bare)")
    mdump = tempfile.mkdtemp()
    p, d = run(mpath, {"x": mx}, backend="cpu", extra=["--precision", "bf16", "--dump", "c", "--dump-dir", mdump])
    s.check(f"{tag}: runs", p.returncode == 0, p.stderr[-400:])
    if p.returncode == 0:
        src = open(os.path.join(mdump, "model.c")).read()
        s.check(f"{tag}: h stored in bf16, packed as pair words",
                re.search(r"gemm 29x45x777 [^\n]*bf16\*fp32->fp32", src) is not None and "memcpy(q, s + k, 4)" in src, "")
        e = np.abs(np.load(os.path.join(d, "y.npy")).astype(np.float64) - (bf16(mh) @ mwb + (mbb if bias else 0)))
        s.check(f"{tag}: y = numpy's bf16(h) @ wb{' + bb' if bias else ''} exactly", float(e.max()) == 0.0,
                f"max err {e.max():.3g}")

# ---- a standalone package (harp compile --target cpu --precision bf16) ------------------------------
a_, w_ = arr(29, 70), arr(70, 45)
pkg_model = mk([helper.make_node("MatMul", ["x", "w"], ["y"])], {"x": a_}, ["y"], {"w": w_})
pkg = os.path.join(tempfile.mkdtemp(), "pkg")
xin = os.path.join(tempfile.mkdtemp(), "x.npy")
np.save(xin, a_)
c = subprocess.run([HARP, "compile", pkg_model, "--target", "cpu", "--precision", "bf16", "--sources-only", "-o", pkg, "--input",
                    f"x={xin}"], capture_output=True, text=True, timeout=300)
s.check("package: harp compile --precision bf16", c.returncode == 0, c.stderr[-400:])
if c.returncode == 0:
    src = open(os.path.join(pkg, "model.c")).read()
    s.check("package: its dispatch asks for AVX512_BF16 before the bf16 variant",
            '__builtin_cpu_supports("avx512bf16")' in src and "_mm512_dpbf16_ps" in src)
    mk_ = subprocess.run(["make", "-s", "-C", pkg], capture_output=True, text=True, timeout=300)
    s.check("package: builds and runs", mk_.returncode == 0, mk_.stderr[-400:])
    if mk_.returncode == 0:
        got = np.load(os.path.join(pkg, "outputs", "y.npy")).astype(np.float64)
        absum = np.abs(a_.astype(np.float64)) @ np.abs(w_.astype(np.float64))
        e = np.abs(got - bf16(a_) @ bf16(w_))
        s.check("package: its output is the bf16 operands' product", bool(np.all(e <= 70 * U * absum)), f"{e.max():.3g}")

# ---- bf16 storage: vdpbf16ps without --precision (the products are exact) ---------------------------
half = """graph<M=37, K=300, N=70, C=20, H=9> main(x: bf16[M, K], w: bf16[K, N], xc: bf16[1, C, H, H], wc: bf16[24, C, 3, 3])
    -> (y: f32[M, N], yc: f32[1, 24, H, H]) {
    y = cast(matmul(x, w), f32)
    yc = cast(conv2d(xc, wc, pad=[1, 1]), f32)
    return y, yc
}
"""
hpath = os.path.join(tempfile.mkdtemp(), "half.harp")
with open(hpath, "w") as f:
    f.write(half)
hin = {"x": arr(37, 300), "w": arr(300, 70), "xc": arr(1, 20, 9, 9), "wc": arr(24, 20, 3, 3)}
p, d = run(hpath, hin, params={"w", "wc"}, backend="cpu", extra=["--dump", "c", "--dump-dir", dump])
q, di = run(hpath, hin, params={"w", "wc"}, backend="interp")
s.check("bf16 storage: runs on cpu and the interpreter", p.returncode == 0 and q.returncode == 0,
        (p.stderr + q.stderr)[-400:])
if p.returncode == 0 and q.returncode == 0:
    s.check("bf16 storage: the C multiplies with vdpbf16ps", "_mm512_dpbf16_ps" in open(os.path.join(dump, "model.c")).read())
    for o in ("y", "yc"):
        got, want = np.load(os.path.join(d, o + ".npy")), np.load(os.path.join(di, o + ".npy"))
        e = np.abs(got.astype(np.float64) - want)
        # both round the fp32 sum to bf16: at most one bf16 step apart where the sums' orders differ
        s.check(f"bf16 storage: {o} = the interpreter's within one bf16 step", bool(np.all(e <= 2.0 ** -7 * np.abs(want))),
                f"max err {e.max():.3g}")

# ---- fp16 storage under --precision bf16: operands widened, then rounded to bf16 --------------------
f16 = half.replace("bf16[", "f16[")
fpath = os.path.join(tempfile.mkdtemp(), "f16.harp")
with open(fpath, "w") as f:
    f.write(f16)
fin = {k: v.astype(np.float16) for k, v in hin.items()}
p, d = run(fpath, fin, params={"w", "wc"}, backend="cpu",
           extra=["--precision", "bf16"])
s.check("fp16 storage, --precision bf16: runs", p.returncode == 0, p.stderr[-400:])
if p.returncode == 0:
    x16, w16, xc16, wc16 = (fin[k].astype(np.float64) for k in ("x", "w", "xc", "wc"))
    refs = {"y": (bf16(x16) @ bf16(w16), np.abs(x16) @ np.abs(w16), 300),
            "yc": (conv_ref(bf16(xc16), bf16(wc16), 1, 1, 1, 1)[0], conv_ref(xc16, wc16, 1, 1, 1, 1)[1], 180)}
    for o, (want, absum, k) in refs.items():
        got = np.load(os.path.join(d, o + ".npy")).astype(np.float64)
        # the result is stored in fp16 (then cast): within half an fp16 step of the bf16 operands' product
        e = np.abs(got - want)
        s.check(f"fp16 storage, --precision bf16: {o} = the bf16-rounded operands' product",
                bool(np.all(e <= 2.0 ** -11 * np.abs(want) + k * U * absum + 1e-7)), f"max err {e.max():.3g}")

# ---- a concat of upsampled maps stored in bf16 (generic loops, region_loops.c's half rows) --------
# The concat (nearest Resize fused in: reads at c/2, no template) writes the conv's operand in bf16
# through a float row and a converting loop; the conv then multiplies bf16(concat) by bf16(w).
# Rows of 20 floats (the loop's trip count), channels over two inputs, a tail past 16 lanes.
up = [helper.make_node("Resize", ["u1", "", "sc"], ["uu"], mode="nearest", coordinate_transformation_mode="asymmetric",
                       nearest_mode="floor"),
      helper.make_node("Concat", ["uu", "u2"], ["cat"], axis=1), helper.make_node("Conv", ["cat", "wu"], ["cu"], pads=[1] * 4),
      helper.make_node("Relu", ["cu"], ["y"])]  # an epilogue: a contraction region, whose operands are stored in bf16
uin = {"u1": arr(1, 8, 10, 10), "u2": arr(1, 12, 20, 20)}
uw = {"wu": he(24, 20, 3, 3), "sc": np.array([1, 1, 2, 2], np.float32)}
udump = tempfile.mkdtemp()
p, d = run(mk(up, uin, ["y"], uw), uin, backend="cpu", extra=["--precision", "bf16", "--dump", "c", "--dump-dir", udump])
s.check("upsampled concat: runs in bf16", p.returncode == 0, p.stderr[-400:])
if p.returncode == 0:
    src = open(os.path.join(udump, "model.c")).read()
    s.check("upsampled concat: stored through a float row (generic loops)", "hp_f2b(hp_row[" in src, "")
    cat = np.concatenate([uin["u1"].repeat(2, axis=2).repeat(2, axis=3), uin["u2"]], axis=1).astype(np.float64)
    want, absum = conv_ref(bf16(cat), bf16(uw["wu"]), 1, 1, 1, 1)
    f32, _ = conv_ref(cat, uw["wu"].astype(np.float64), 1, 1, 1, 1)
    # Relu moves no value further from another: the bounds hold after it
    check("upsampled concat -> conv", np.load(os.path.join(d, "y.npy")), np.maximum(f32, 0), np.maximum(want, 0), absum, 180)

# ---- errors and the bench's report --------------------------------------------------------------
p, _ = run(path, inputs, backend="cpu", extra=["--precision", "fp16"])
s.check("--precision fp16 on the cpu: a usage error naming the choices",
        p.returncode != 0 and "fp32" in p.stderr and "bf16" in p.stderr, p.stderr.strip()[-300:])
b = subprocess.run([HARP, "bench", path, "--precision", "bf16", "--repeat", "2", "--warmup", "1"], capture_output=True,
                   text=True, timeout=300)
m = re.search(r"bf16 vs fp32: max abs err ([0-9.e+-]+).*max rel err ([0-9.e+-]+)", b.stdout + b.stderr)
s.check("bench --precision bf16 prints its error against fp32", b.returncode == 0 and m is not None,
        (b.stdout + b.stderr)[-400:])
if m:
    s.check("bench: the reported relative error is a bf16 one (0 < err < 2e-2)", 0 < float(m.group(2)) < 2e-2, m.group(0))
s.close()
