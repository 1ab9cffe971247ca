"""The CPU backend puts contraction regions on its kernel templates (and says
so in the generated C), and the templated kernels agree with the reference
interpreter on odd sizes, batches, transposes, fp16 and epilogues."""
import json
import os
import re
import subprocess
import tempfile

import numpy as np

from harp_test import HARP, MODELS, SRC, Suite, close, compiled_only, run, write_model
compiled_only()  # the templates' compiled numbers, not tier 0's (harp_test.py)

s = Suite("templates")
rng = np.random.default_rng(11)


def kernels(d):
    src = open(os.path.join(d, "model.c")).read()
    # a kernel that shares another's code (kdedup.c) #defines its symbols to that one's
    count = lambda kind: len(re.findall(rf"int model_k\d+_{kind}\(hprt_pool", src)) + \
        len(re.findall(rf"(?m)^#define model_k\d+_{kind} model_k\d+_{kind}$", src))
    return {"gemm": count("gemm"), "conv": count("conv"), "attn": count("attn"), "softmax": count("softmax"),
            "declined": re.findall(r"the template declined \(([^)]*)\)", src)}


def check(name, model, inputs, syms=(), want=None, no_decline=False, params=()):
    extra = ["--dump", "c", "--dump-dir", tempfile.mkdtemp()] + ([] if inputs else ["--random-inputs"])
    p, d = run(model, inputs, syms, extra=extra, backend="cpu", params=params)
    dump = p.args[p.args.index("--dump-dir") + 1]
    s.check(f"{name} runs", p.returncode == 0, p.stderr)
    if p.returncode:
        return
    k = kernels(dump)
    for kind, n in (want or {}).items():
        s.check(f"{name}: {n} {kind} template(s)", k[kind] >= n, str(k))
    if no_decline:
        s.check(f"{name}: no template declined to the loops", not k["declined"], str(k["declined"]))
    feeds = inputs or {f[3:-4]: np.load(os.path.join(d, f)) for f in os.listdir(d) if f.startswith("in_")}
    q, e = run(model, feeds, syms, extra=[] if feeds else ["--random-inputs"], backend="interp")
    for f in os.listdir(d):
        if f.endswith(".npy") and not f.startswith("in_"):
            s.check(f"{name}: {f} vs interpreter", *close(np.load(os.path.join(d, f)), np.load(os.path.join(e, f)).astype(np.float64)))


def inp(name, dt, shape):
    return {"id": name, "uop": "INPUT", "arg": {"tensor_id": name, "dtype": dt, "shape": shape}}


def gemm(m, k, n, dt="fp32", transpose_b=False, batch=None, epi=()):
    """C[b?, m, n] = A[b?, m, k] @ B (B is [n, k] when transposed), then epilogue ops."""
    bs = [batch] if batch else []
    u = [inp("A", dt, bs + [m, k]), inp("B", dt, [n, k] if transpose_b else [k, n])]
    a = {"id": "a", "uop": "RESHAPE", "src": ["A"], "arg": {"result_shape": bs + [m, k, 1]}}
    if transpose_b:
        u.append({"id": "bt", "uop": "PERMUTE", "src": ["B"], "arg": {"perm": [1, 0]}})
        b = {"id": "b", "uop": "RESHAPE", "src": ["bt"], "arg": {"result_shape": [1] * len(bs) + [1, k, n]}}
    else:
        b = {"id": "b", "uop": "RESHAPE", "src": ["B"], "arg": {"result_shape": [1] * len(bs) + [1, k, n]}}
    u += [a, b, {"id": "p", "uop": "MUL", "src": ["a", "b"]},
          {"id": "c", "uop": "REDUCE", "src": ["p"], "arg": {"op": "SUM", "axes": [len(bs) + 1], "dtype": "fp32"}}]
    last = "c"
    if dt != "fp32":
        u.append({"id": "c16", "uop": "CAST", "src": ["c"], "arg": {"to": dt}})
        last = "c16"
    for i, op in enumerate(epi):
        if op == "bias":
            u.append(inp("bias", dt, [n]))
            u.append({"id": f"e{i}", "uop": "ADD", "src": [last, "bias"]})
        elif op == "residual":
            u.append(inp("R", dt, bs + [m, n]))
            u.append({"id": f"e{i}", "uop": "ADD", "src": [last, "R"]})
        else:
            u.append({"id": f"e{i}", "uop": op, "src": [last]})
        last = f"e{i}"
    npdt = {"fp32": np.float32, "fp16": np.float16}[dt]
    t = {"A": rng.standard_normal(bs + [m, k]).astype(npdt), "B": rng.standard_normal([n, k] if transpose_b else [k, n]).astype(npdt)}
    if "bias" in epi:
        t["bias"] = rng.standard_normal(n).astype(npdt)
    if "residual" in epi:
        t["R"] = rng.standard_normal(bs + [m, n]).astype(npdt)
    return write_model(u, [last]), t


for args, name in [((37, 29, 53), "gemm odd"), ((64, 64, 64, "fp16"), "gemm fp16"),
                   ((33, 17, 45, "fp32", True), "gemm B transposed"), ((19, 23, 31, "fp32", False, 3), "gemm batched"),
                   ((1, 300, 77), "gemv (skinny: B streamed)"), ((2, 129, 45, "fp32", True), "skinny, B transposed"),
                   ((3, 70, 33, "fp16", False, 2), "skinny fp16 batched")]:
    model, t = gemm(*args)
    check(name, model, t, want={"gemm": 1})
for epi in (("bias", "RELU"), ("bias", "GELU"), ("residual",), ("bias", "residual", "RELU")):
    model, t = gemm(48, 40, 56, "fp32", epi=epi)
    check("gemm + " + "+".join(epi), model, t, want={"gemm": 1})
# relu keeps NaN (the reference is x < 0 ? 0 : x): NaN rows of A, and a skinny GEMM
for m, name in ((48, "gemm"), (3, "skinny gemm")):
    model, t = gemm(m, 40, 56, "fp32", epi=("bias", "RELU"))
    t["A"][1, 5] = np.nan
    t["bias"][7] = np.nan
    check(f"{name} + bias + relu keeps NaN", model, t, want={"gemm": 1})
model, t = gemm(32, 24, 40, "fp16", epi=("bias", "RELU"))
check("gemm fp16 + bias + relu", model, t, want={"gemm": 1})
A, B, bias = (rng.standard_normal(sh).astype(np.float16) for sh in ((20, 12), (12, 9), (9,)))
check("seed 000 gemm+bias+relu (roundings to fp16 mid-epilogue, in registers)",
      os.path.join(MODELS, "seed000_gemm_bias_relu.json"), {"A": A, "B": B, "bias": bias}, want={"gemm": 1})
for ex, want in (("mlp.harp", {"gemm": 2}), ("conv_block.harp", {"conv": 1}), ("cnn.harp", {"conv": 1}),
                 ("transformer_block.harp", {"gemm": 6, "attn": 1})):
    check(ex, os.path.join(SRC, "examples", ex), None, (), want)
# the direct conv kernel (AVX-512 hosts; elsewhere the implicit GEMM, same
# values): batch 2, odd H, 13 input and 20 output channels (a block of 32 with
# a tail), rows of 23 = tiles of 12 + 11, bias + relu; stride 2 with padding
conv_dsl = os.path.join(tempfile.mkdtemp(), "conv_direct.harp")
with open(conv_dsl, "w") as f:
    f.write("graph<N=2, H=11, W=23> main(x: f32[N, 13, H, W], w: f32[20, 13, 3, 3], b: f32[20], w2: f32[7, 20, 3, 3])\n"
            "    -> (y: f32[N, 20, H, W], z: f32[N, 7, 6, 12]) {\n"
            "    y = relu(conv2d(x, w, bias=b, pad=[1, 1]))\n"
            "    z = conv2d(y, w2, stride=2, pad=1)\n"
            "    return y, z\n}\n")
feeds = {"x": rng.standard_normal((2, 13, 11, 23)).astype(np.float32),
         "w": rng.standard_normal((20, 13, 3, 3)).astype(np.float32) * 0.3,
         "b": rng.standard_normal(20).astype(np.float32),
         "w2": rng.standard_normal((7, 20, 3, 3)).astype(np.float32) * 0.3}
check("conv, odd sizes (direct kernel on AVX-512)", conv_dsl, feeds, want={"conv": 2})
if "avx512f" in open("/proc/cpuinfo").read():
    d = tempfile.mkdtemp()
    p, _ = run(conv_dsl, feeds, extra=["--dump", "c", "--dump-dir", d], backend="cpu")
    src = open(os.path.join(d, "model.c")).read() if p.returncode == 0 else ""
    s.check("conv: the AVX-512 variant is the direct kernel", src.count("/* direct conv (") == 2, p.stderr)
# row softmax on the CPU row kernel (cgen_softmax): rows with a vector tail,
# 3-D, fp16 and bf16 in and out (the widening casts read on load), NaN / inf
# rows; along axis 0 it is not a row softmax and stays on the loops
sm_dsl = os.path.join(tempfile.mkdtemp(), "softmax_rows.harp")
with open(sm_dsl, "w") as f:
    f.write("graph<R=37, D=77> main(x: f32[R, D], h: f16[3, 5, 40], b: bf16[6, 16], z: f32[9, 7])\n"
            "    -> (y: f32[R, D], yh: f16[3, 5, 40], yb: bf16[6, 16], yz: f32[9, 7]) {\n"
            "    y = softmax(x)\n    yh = softmax(h)\n    yb = softmax(b)\n    yz = softmax(z, axis=0)\n"
            "    return y, yh, yb, yz\n}\n")
x = (rng.standard_normal((37, 77)) * 4).astype(np.float32)
x[3, 5], x[4, 76], x[5, :] = np.nan, np.inf, -np.inf
feeds = {"x": x, "h": rng.standard_normal((3, 5, 40)).astype(np.float16),
         "b": rng.standard_normal((6, 16)).astype(np.float32), "z": rng.standard_normal((9, 7)).astype(np.float32)}
check("softmax rows (row kernel)", sm_dsl, feeds, want={"softmax": 3})
d = tempfile.mkdtemp()
p, out = run(sm_dsl, feeds, extra=["--dump", "c", "--dump-dir", d], backend="cpu")
if p.returncode == 0:
    s.check("softmax: exactly the three last-axis softmaxes on the row kernel", kernels(d)["softmax"] == 3, str(kernels(d)))
    y = np.load(os.path.join(out, "y.npy"))
    s.check("softmax: rows with NaN, +inf, only -inf are NaN, the others are not",
            np.isnan(y[3:6]).all() and not np.isnan(np.delete(y, [3, 4, 5], 0)).any(), str(np.isnan(y).sum(1)))
    ref = np.exp(x[6:].astype(np.float64) - x[6:].max(1, keepdims=True))
    ref /= ref.sum(1, keepdims=True)
    s.check("softmax: fp32 rows within 4e-6 of float64", np.abs(y[6:] - ref).max() <= 4e-6 * ref.max(), str(np.abs(y[6:] - ref).max()))
# a positive constant scale before the softmax folds into the kernel's scale
# (x / T, x * s, s * x); a negative one does not (the max would be the min)
sc_dsl = os.path.join(tempfile.mkdtemp(), "softmax_scaled.harp")
with open(sc_dsl, "w") as f:
    f.write("graph<R=37, D=77> main(x: f32[R, D]) -> (y: f32[R, D], z: f32[R, D], u: f32[R, D], v: f32[R, D]) {\n"
            "    y = softmax(x / 0.7)\n    z = softmax(x * 2.5)\n    u = softmax(0.5 * x)\n    v = softmax(x * -1.5)\n"
            "    return y, z, u, v\n}\n")
feeds = {"x": (rng.standard_normal((37, 77)) * 3).astype(np.float32)}
check("scaled softmaxes", sc_dsl, feeds, want={"softmax": 3})
d = tempfile.mkdtemp()
p, _ = run(sc_dsl, feeds, extra=["--dump", "c", "--dump-dir", d], backend="cpu")
s.check("scaled softmax: the negative scale stays on the loops", p.returncode == 0 and kernels(d)["softmax"] == 3, str(p.stderr))
# small kernels run on the calling thread (no pool wake-up), large ones on the
# pool, and so does a GEMV with little arithmetic but megabytes of B to stream
for (m, k, n), small in (((16, 32, 24), True), ((256, 256, 256), False), ((1, 2048, 600), False)):
    model, t = gemm(m, k, n)
    d = tempfile.mkdtemp()
    p, _ = run(model, t, extra=["--dump", "c", "--dump-dir", d], backend="cpu")
    src = open(os.path.join(d, "model.c")).read() if p.returncode == 0 else ""
    s.check(f"gemm {m}x{k}x{n}: {'on the calling thread' if small else 'on the pool'}",
            p.returncode == 0 and ("pool = NULL; /* small" in src) == small, p.stderr)
# depthwise convs (groups == channels) on the depthwise kernel: bias + relu,
# stride 2 with a residual-free chain, and a residual added after
dw_dsl = os.path.join(tempfile.mkdtemp(), "depthwise.harp")
with open(dw_dsl, "w") as f:
    f.write("graph<N=2> main(x: f32[N, 12, 15, 37], w: f32[12, 1, 3, 3], b: f32[12], w2: f32[12, 1, 5, 5])\n"
            "    -> (y: f32[N, 12, 15, 37], z: f32[N, 12, 7, 19]) {\n"
            "    y = relu(conv2d(x, w, bias=b, pad=1, groups=12)) + x\n"
            "    z = conv2d(y, w2, stride=2, pad=[1, 2], groups=12)\n"
            "    return y, z\n}\n")
feeds = {"x": rng.standard_normal((2, 12, 15, 37)).astype(np.float32),
         "w": rng.standard_normal((12, 1, 3, 3)).astype(np.float32), "b": rng.standard_normal(12).astype(np.float32),
         "w2": rng.standard_normal((12, 1, 5, 5)).astype(np.float32)}
check("depthwise convs (depthwise kernel)", dw_dsl, feeds, want={"conv": 2})
d = tempfile.mkdtemp()
p, _ = run(dw_dsl, feeds, extra=["--dump", "c", "--dump-dir", d], backend="cpu")
src = open(os.path.join(d, "model.c")).read() if p.returncode == 0 else ""
s.check("depthwise: both convs on the depthwise kernel", src.count(": depthwise conv n2 c12") == 2, p.stderr)
# MobileNetV2's depthwise layers: run on the pool where a core takes tens of
# microseconds (384 channels of 14x14; 576 of 14x14 at stride 2, whose copy
# per output is 4x), on the calling thread when tiny; the rows of the padded
# plane are copied by vectors (no column-by-column loop at stride 1 or 2 on
# AVX-512), and the padding is written once per task, not per channel
for (c, hw, st, small) in ((384, 14, 1, False), (576, 14, 2, False), (16, 7, 1, True)):
    dsl = os.path.join(tempfile.mkdtemp(), "dw.harp")
    with open(dsl, "w") as f:
        f.write(f"graph<N=1> main(x: f32[N, {c}, {hw}, {hw}], w: f32[{c}, 1, 3, 3], b: f32[{c}]) -> (y: f32[N, {c}, {hw // st}, {hw // st}]) {{\n"
                f"    return min(max(conv2d(x, w, bias=b, stride={st}, pad=1, groups={c}), 0.0), 6.0)\n}}\n")
    feeds = {"x": rng.standard_normal((1, c, hw, hw)).astype(np.float32),
             "w": rng.standard_normal((c, 1, 3, 3)).astype(np.float32), "b": rng.standard_normal(c).astype(np.float32)}
    check(f"depthwise {c}x{hw}x{hw} stride {st}", dsl, feeds, want={"conv": 1})
    d = tempfile.mkdtemp()
    p, _ = run(dsl, feeds, extra=["--dump", "c", "--dump-dir", d], backend="cpu")
    src = open(os.path.join(d, "model.c")).read() if p.returncode == 0 else ""
    s.check(f"depthwise {c}x{hw}x{hw} stride {st}: {'on the calling thread' if small else 'on the pool'}",
            p.returncode == 0 and ("pool = NULL; /* small" in src) == small, p.stderr)
    # the plane's copy ($P_cp) and its taps ($P_chan), before the task that runs them
    avx512 = src[src.find("void model_k0_conv_avx512_cp("):src.find("void model_k0_conv_avx512_task(")]
    # column-by-column copies: at most the one column a stride-2 phase starts with before its vector pairs
    cols = [int(b) - int(a) for a, b in re.findall(r"for \(long i = (\d+)L; i < (\d+)L; i\+\+\) \{ float v_ = ", avx512)]
    s.check(f"depthwise {c}x{hw}x{hw} stride {st}: the input rows copied by vectors, the padding once per task",
            avx512.count("_ldn(xr + ") >= 1 and all(n <= 1 for n in cols) and "= 0.0f" not in avx512 and "memset" not in avx512,
            avx512[:3000])
# a ResNet basic block at batch 1: the residual x reaches the conv template
# (its batch stride is 0 where y's is C*H*W; an extent-1 axis must not count)
rb_dsl = os.path.join(tempfile.mkdtemp(), "resblock.harp")
with open(rb_dsl, "w") as f:
    f.write("graph<N=1> main(x: f32[N, 16, 9, 11], w1: f32[16, 16, 3, 3], b1: f32[16], w2: f32[16, 16, 3, 3])\n"
            "    -> (y: f32[N, 16, 9, 11]) {\n"
            "    h = relu(conv2d(x, w1, bias=b1, pad=1))\n"
            "    y = relu(x + conv2d(h, w2, pad=1))\n"
            "    return y\n}\n")
feeds = {"x": rng.standard_normal((1, 16, 9, 11)).astype(np.float32),
         "w1": (rng.standard_normal((16, 16, 3, 3)) * 0.2).astype(np.float32),
         "b1": rng.standard_normal(16).astype(np.float32), "w2": (rng.standard_normal((16, 16, 3, 3)) * 0.2).astype(np.float32)}
check("resnet block at batch 1", rb_dsl, feeds, want={"conv": 2}, no_decline=True)
# the same block on the generic loops: threads split the channel loop (the
# batch loop has extent 1), and the result still matches the interpreter
os.environ["HARP_NO_TEMPLATES"] = "1"
check("resnet block on the loops", rb_dsl, feeds)
d = tempfile.mkdtemp()
p, _ = run(rb_dsl, feeds, extra=["--dump", "c", "--dump-dir", d], backend="cpu")
del os.environ["HARP_NO_TEMPLATES"]
src = open(os.path.join(d, "model.c")).read() if p.returncode == 0 else ""
s.check("resnet block on the loops: both kernels split the channels over the pool",
        len(re.findall(r"long len = 16L;\n  int nt = 2 \* hprt_pool_size", src)) == 2, p.stderr)
# batch norm left as a per-channel scale and shift (x * s + t): the product
# with a tensor is a template step (cgen_epi.mul) on the conv, the depthwise
# conv and the GEMM, per row and per column, fp32 and fp16
bn_dsl = os.path.join(tempfile.mkdtemp(), "batchnorm.harp")
with open(bn_dsl, "w") as f:
    f.write("graph<N=2> main(x: f32[N, 16, 9, 11], w: f32[24, 16, 3, 3], s: f32[24, 1, 1], t: f32[24, 1, 1],\n"
            "                dw: f32[24, 1, 3, 3], s2: f32[24, 1, 1], a: f32[37, 29], wl: f32[29, 45], sc: f32[45],\n"
            "                sr: f32[37, 1], h: f16[19, 33], wh: f16[33, 40], sh: f16[40])\n"
            "    -> (y: f32[N, 24, 9, 11], z: f32[N, 24, 9, 11], g: f32[37, 45], gh: f16[19, 40]) {\n"
            "    y = relu(conv2d(x, w, pad=1) * s + t)\n"
            "    z = conv2d(y, dw, pad=1, groups=24) * s2 + y\n"
            "    g = sr * (a @ wl) * sc\n"
            "    gh = relu(h @ wh * sh)\n"
            "    return y, z, g, gh\n}\n")
r32 = lambda *sh: rng.standard_normal(sh).astype(np.float32)
feeds = {"x": r32(2, 16, 9, 11), "w": r32(24, 16, 3, 3) * 0.2, "s": r32(24, 1, 1), "t": r32(24, 1, 1),
         "dw": r32(24, 1, 3, 3), "s2": r32(24, 1, 1), "a": r32(37, 29), "wl": r32(29, 45), "sc": r32(45),
         "sr": r32(37, 1), "h": r32(19, 33).astype(np.float16), "wh": (r32(33, 40) * 0.3).astype(np.float16),
         "sh": r32(40).astype(np.float16)}
check("batch norm as scale and shift", bn_dsl, feeds, want={"conv": 2, "gemm": 2}, no_decline=True)
# the CUDA templates take the same steps: on GPU targets too every product and
# sum stays in its conv's / GEMM's region (it split off when CUDA declined them)
for target in ("sm80", "sm90"):
    d = tempfile.mkdtemp()
    p = subprocess.run([HARP, "dump", bn_dsl, "--dump", "region", "--target", target, "--dump-dir", d],
                       capture_output=True, text=True, timeout=300)
    s.check(f"batch norm [{target}]: regions", p.returncode == 0, p.stderr)
    if p.returncode == 0:
        regions = json.load(open(os.path.join(d, "region.json")))["regions"]
        loose = [r["name"] for r in regions if not any(b["node"].startswith(("conv2d_", "matmul_")) for b in r["blocks"])]
        stops = [x for r in regions for x in r.get("stops", []) if x["reason"] == "epilogue_not_template"]
        s.check(f"batch norm [{target}]: x s + t fused into the contractions", not loose and not stops,
                f"regions without a contraction: {loose}; {stops}")
# epilogue ops no template applies (tanh, relu6, - tensor, / tensor) stay out
# of the contraction's region: the conv / GEMM keeps its template, the op
# runs as its own kernel; + constant is a template step (CPU and CUDA)
ep_dsl = os.path.join(tempfile.mkdtemp(), "epilogues.harp")
with open(ep_dsl, "w") as f:
    f.write("graph main(x: f32[1, 8, 10, 12], w: f32[8, 8, 3, 3], t: f32[8, 1, 1], a: f32[33, 20], b: f32[20, 17], v: f32[17])\n"
            "    -> (y1: f32[1, 8, 10, 12], y2: f32[1, 8, 10, 12], y3: f32[1, 8, 10, 12], g1: f32[33, 17], g2: f32[33, 17]) {\n"
            "    y1 = tanh(conv2d(x, w, pad=1))\n"
            "    y2 = min(max(conv2d(x, w, pad=1) - t, 0.0), 6.0)\n"
            "    y3 = conv2d(x, w, pad=1) + 1.5\n"
            "    g1 = (a @ b) / v\n"
            "    g2 = sigmoid(a @ b + v) + 0.25\n"
            "    return y1, y2, y3, g1, g2\n}\n")
feeds = {"x": r32(1, 8, 10, 12), "w": r32(8, 8, 3, 3) * 0.3, "t": r32(8, 1, 1), "a": r32(33, 20), "b": r32(20, 17),
         "v": np.abs(r32(17)) + 0.5}
check("unsupported epilogue ops split off", ep_dsl, feeds, want={"conv": 3, "gemm": 2}, no_decline=True)
# NaN and infinities through the GEMM epilogue's gelu / silu (and a sigmoid,
# which runs on the map template): as the interpreter gives them, gelu(+inf)
# is +inf, gelu(-inf) and silu(-inf) NaN, NaN stays NaN; columns of the bias
# are NaN, +-inf, and values where e^x over- or underflows
act_dsl = os.path.join(tempfile.mkdtemp(), "activations_special.harp")
with open(act_dsl, "w") as f:
    f.write("graph main(a: f32[33, 20], b: f32[20, 40], v: f32[40])\n"
            "    -> (g: f32[33, 40], u: f32[33, 40], z: f32[33, 40]) {\n"
            "    g = gelu(a @ b + v)\n    u = silu(a @ b + v)\n    z = sigmoid(a @ b + v)\n"
            "    return g, u, z\n}\n")
v = r32(40)
v[[3, 9, 14, 20, 25, 31, 36, 39]] = [np.nan, np.inf, -np.inf, 95.0, -95.0, 12.0, -12.0, -88.5]
feeds = {"a": r32(33, 20), "b": r32(20, 40), "v": v}
check("gelu / silu / sigmoid of NaN and +-inf", act_dsl, feeds, want={"gemm": 2})
# strided convs that never read the input's last rows / columns (a 1x1 stride-2
# downsample on an even size, 3x3 stride 2 / 3 without padding): the floor in
# the output size skips them; they stay on the templates
tr_dsl = os.path.join(tempfile.mkdtemp(), "trailing.harp")
with open(tr_dsl, "w") as f:
    f.write("graph<N=2> main(x: f32[N, 16, 12, 10], w1: f32[32, 16, 3, 3], w2: f32[32, 32, 3, 3], wd: f32[32, 16, 1, 1],\n"
            "                bd: f32[32], w3: f32[8, 16, 3, 3], dw: f32[16, 1, 3, 3])\n"
            "    -> (y: f32[N, 32, 6, 5], z: f32[N, 8, 4, 3], u: f32[N, 16, 5, 4]) {\n"
            "    h = relu(conv2d(x, w1, stride=2, pad=1))\n"
            "    y = relu(conv2d(x, wd, bias=bd, stride=2) + conv2d(h, w2, pad=1))\n"
            "    z = conv2d(x, w3, stride=[3, 3])\n"
            "    u = conv2d(x, dw, stride=2, groups=16)\n"
            "    return y, z, u\n}\n")
feeds = {"x": rng.standard_normal((2, 16, 12, 10)).astype(np.float32),
         **{k: (rng.standard_normal(sh) * 0.2).astype(np.float32)
            for k, sh in (("w1", (32, 16, 3, 3)), ("w2", (32, 32, 3, 3)), ("wd", (32, 16, 1, 1)), ("bd", (32,)),
                          ("w3", (8, 16, 3, 3)), ("dw", (16, 1, 3, 3)))}}
check("strided convs that skip the last rows", tr_dsl, feeds, want={"conv": 4, "gemm": 1}, no_decline=True)
# strided convs on the direct kernel's 32-channel tiles (AVX-512; cgen_dconv.c
# counts instructions per tile): stride 2 with pad 1 (odd H 23, W 30 -> 15 =
# tiles of 8 + 7) + bias + relu, stride 2 without padding + residual + relu,
# a 5x5 stride 3 pad 2; an fp16 stride-2 conv + bias + fp16 residual + relu;
# an fp16 1x1 stride 2 (the implicit GEMM, its input widened to fp32 first);
# batch 2, weights as params (packed once)
st_dsl = os.path.join(tempfile.mkdtemp(), "strided.harp")
with open(st_dsl, "w") as f:
    f.write("graph<N=2> main(x: f32[N, 40, 23, 30], w1: f32[64, 40, 3, 3], b1: f32[64], w2: f32[64, 40, 3, 3],\n"
            "                r: f32[N, 64, 11, 14], w3: f32[80, 40, 5, 5], b3: f32[80],\n"
            "                xh: f16[N, 48, 17, 17], wh: f16[64, 48, 3, 3], bh: f16[64], rh: f16[N, 64, 9, 9],\n"
            "                wd: f16[24, 48, 1, 1])\n"
            "    -> (y1: f32[N, 64, 12, 15], y2: f32[N, 64, 11, 14], y3: f32[N, 80, 8, 10], yh: f16[N, 64, 9, 9],\n"
            "        yd: f16[N, 24, 9, 9]) {\n"
            "    y1 = relu(conv2d(x, w1, bias=b1, stride=2, pad=1))\n"
            "    y2 = relu(conv2d(x, w2, stride=2) + r)\n"
            "    y3 = conv2d(x, w3, bias=b3, stride=3, pad=2)\n"
            "    yh = relu(conv2d(xh, wh, bias=bh, stride=2, pad=1) + rh)\n"
            "    yd = conv2d(xh, wd, stride=2)\n"
            "    return y1, y2, y3, yh, yd\n}\n")
feeds = {k: (rng.standard_normal(sh) * sc).astype(dt) for k, sh, sc, dt in (
    ("x", (2, 40, 23, 30), 1, np.float32), ("w1", (64, 40, 3, 3), 0.1, np.float32), ("b1", (64,), 1, np.float32),
    ("w2", (64, 40, 3, 3), 0.1, np.float32), ("r", (2, 64, 11, 14), 1, np.float32),
    ("w3", (80, 40, 5, 5), 0.05, np.float32), ("b3", (80,), 1, np.float32),
    ("xh", (2, 48, 17, 17), 1, np.float16), ("wh", (64, 48, 3, 3), 0.1, np.float16), ("bh", (64,), 1, np.float16),
    ("rh", (2, 64, 9, 9), 1, np.float16), ("wd", (24, 48, 1, 1), 0.2, np.float16))}
check("strided convs (direct kernel, 32-channel tiles)", st_dsl, feeds, want={"conv": 5}, no_decline=True,
      params=("w1", "b1", "w2", "w3", "b3", "wh", "bh", "wd"))
if "avx512f" in open("/proc/cpuinfo").read():
    d = tempfile.mkdtemp()
    p, _ = run(st_dsl, feeds, extra=["--dump", "c", "--dump-dir", d], backend="cpu")
    src = open(os.path.join(d, "model.c")).read() if p.returncode == 0 else ""
    s.check("strided convs: four direct kernels of 32-channel tiles",
            len(re.findall(r"/\* direct conv \([^)]*\): \d+ x 32 tiles", src)) == 4, p.stderr)
# heads merged back before a projection: [B, H, S, D] read as [B, S, H*D] (K does
# not fold in A: A is copied to a dense scratch first)
heads = [inp("X", "fp32", [2, 3, 10, 8]), inp("W", "fp32", [24, 7]),
         {"id": "xp", "uop": "PERMUTE", "src": ["X"], "arg": {"perm": [0, 2, 1, 3]}},
         {"id": "xm", "uop": "RESHAPE", "src": ["xp"], "arg": {"result_shape": [2, 10, 3, 8, 1]}},
         {"id": "wm", "uop": "RESHAPE", "src": ["W"], "arg": {"result_shape": [1, 1, 3, 8, 7]}},
         {"id": "xe", "uop": "EXPAND", "src": ["xm"], "arg": {"result_shape": [2, 10, 3, 8, 7]}},
         {"id": "we", "uop": "EXPAND", "src": ["wm"], "arg": {"result_shape": [2, 10, 3, 8, 7]}},
         {"id": "p", "uop": "MUL", "src": ["xe", "we"]},
         {"id": "y", "uop": "REDUCE", "src": ["p"], "arg": {"op": "SUM", "axes": [2, 3], "dtype": "fp32"}}]
check("heads merged before a projection", write_model(heads, ["y"]),
      {"X": rng.standard_normal((2, 3, 10, 8)).astype(np.float32), "W": rng.standard_normal((24, 7)).astype(np.float32)},
      want={"gemm": 1})
# attention on strided heads: q/k/v split from [B, S, E] (and sliced out of one
# fused projection, at offsets), an additive mask broadcast over heads, M != N
for m in ("attention_fused_qkv.harp", "attention_heads_mask.harp"):
    check(m, os.path.join(MODELS, m), None, (), {"attn": 1})
for m, syms in (("attention_full.json", ("B=2", "H=3", "M=33", "N=47", "D=16", "Dv=24")),
                ("attention_full_causal.json", ("B=1", "H=2", "M=40", "N=40", "D=32", "Dv=32"))):
    check(m, os.path.join(MODELS, m), None, syms, {"attn": 1})
s.close()
