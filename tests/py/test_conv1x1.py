"""1x1 convolutions (stride 1, no padding) in NCHW are a GEMM per image,
y[n] (OC x HW) = W (OC x C) @ x[n] (C x HW).  They reach the CPU GEMM
template read with the pixels as M and a column-major output, which
contract_c.c runs transposed (gemm_transpose): M = OC, N = H*W, so the
template stores whole vectors along the pixels.  Checks that path is taken
(the kernel header says gemm OCxHWxC; a silent fallback to the untransposed
GEMM or the generic loops fails) and the outputs against the interpreter and
numpy: batch 1 and > 1, channels that are not multiples of 16, odd H*W, bias +
relu, a residual, a per-channel scale (batch norm as x * s + t), weights as
params (packed once at model_init) and as inputs, fp16 storage."""
import os
import re
import tempfile

import numpy as np

from harp_test import Suite, close, compiled_only, run
compiled_only()  # the 1x1 convs' compiled numbers, not tier 0's (harp_test.py)

s = Suite("conv1x1")
rng = np.random.default_rng(11)


def arr(*shape, scale=1.0, dt=np.float32):
    return (rng.standard_normal(shape) * scale).astype(dt)


def conv1x1(x, w):
    """y[n, o, h, w] = sum_c w[o, c] x[n, c, h, w] in float64."""
    return np.einsum("nchw,oc->nohw", x.astype(np.float64), w[:, :, 0, 0].astype(np.float64))


def case(name, text, feeds, want, oc, hw, c, batch, params=("w",), tol=1e-3, kind="gemm", direct=None):
    path = os.path.join(tempfile.mkdtemp(), name.replace(" ", "_") + ".harp")
    with open(path, "w") as f:
        f.write(text)
    dump = tempfile.mkdtemp()
    p, d = run(path, feeds, extra=["--dump", "c", "--dump-dir", dump], backend="cpu", params=params)
    s.check(f"{name}: compiles and runs on cpu", p.returncode == 0, p.stderr.strip()[-400:])
    if p.returncode:
        return
    src = open(os.path.join(dump, "model.c")).read()
    declined = re.findall(r"the template declined \(([^)]*)\)", src)
    s.check(f"{name}: no template declined", not declined, str(declined))
    gemms = re.findall(r"/\* ---- model_k\d+_%s: %s (\d+)x(\d+)x(\d+) x batch (\d+)x(\d+)," % (kind, kind), src)
    want_g = (str(oc), str(hw), str(c))
    s.check(f"{name}: a {kind} with M = output channels, N = pixels, batched over the images",
            any(g[:3] == want_g and int(g[3]) * int(g[4]) == batch for g in gemms), f"{gemms} want {want_g} x {batch}")
    if direct is not None:
        got_d = re.findall(r"/\* direct conv \(([^)]*)", src)
        s.check(f"{name}: the AVX-512 variant is {'the direct kernel' if direct else 'no direct kernel'}",
                bool(got_d) == direct or "avx512" not in src, str(got_d))
    if "w" in params:
        s.check(f"{name}: the weight packed by model_init", "packed by model_init" in src)
    q, e = run(path, feeds, backend="interp", params=params)
    s.check(f"{name}: interpreter runs", q.returncode == 0, q.stderr.strip()[-400:])
    for out, ref in want.items():
        got = np.load(os.path.join(d, out + ".npy")).astype(np.float64)
        if q.returncode == 0:
            s.check(f"{name}: {out} vs interpreter",
                    *close(got, np.load(os.path.join(e, out + ".npy")).astype(np.float64), rtol=tol, atol=tol))
        s.check(f"{name}: {out} vs numpy", *close(got, ref, rtol=tol, atol=tol))


# batch 1, 20 -> 12 channels, 9x7 pixels, bias + relu; the weight a param
x, w, b = arr(1, 20, 9, 7), arr(12, 20, 1, 1, scale=0.3), arr(12)
case("bias relu", "graph main(x: f32[1, 20, 9, 7], w: f32[12, 20, 1, 1], b: f32[12]) -> (y: f32[1, 12, 9, 7]) {\n"
     "    y = relu(conv2d(x, w, bias=b))\n    return y\n}\n",
     {"x": x, "w": w, "b": b}, {"y": np.maximum(conv1x1(x, w) + b[None, :, None, None], 0)},
     oc=12, hw=63, c=20, batch=1)

# batch 3, 13 -> 70 channels (a row tail), 11x5, a residual then relu; the weight an input
x, w, r = arr(3, 13, 11, 5), arr(70, 13, 1, 1, scale=0.3), arr(3, 70, 11, 5)
case("batch 3 residual relu, weight as input",
     "graph main(x: f32[3, 13, 11, 5], w: f32[70, 13, 1, 1], r: f32[3, 70, 11, 5]) -> (y: f32[3, 70, 11, 5]) {\n"
     "    y = relu(conv2d(x, w) + r)\n    return y\n}\n",
     {"x": x, "w": w, "r": r}, {"y": np.maximum(conv1x1(x, w) + r, 0)}, oc=70, hw=55, c=13, batch=3, params=())

# batch 2, bias, residual and relu, deep enough for two K blocks (300 channels in)
x, w, b, r = arr(2, 300, 7, 9), arr(33, 300, 1, 1, scale=0.1), arr(33), arr(2, 33, 7, 9)
case("batch 2 bias residual relu, two K blocks",
     "graph main(x: f32[2, 300, 7, 9], w: f32[33, 300, 1, 1], b: f32[33], r: f32[2, 33, 7, 9])"
     " -> (y: f32[2, 33, 7, 9]) {\n"
     "    y = relu(conv2d(x, w, bias=b) + r)\n    return y\n}\n",
     {"x": x, "w": w, "b": b, "r": r}, {"y": np.maximum(conv1x1(x, w) + b[None, :, None, None] + r, 0)},
     oc=33, hw=63, c=300, batch=2)

# batch norm left as a per-channel scale and shift after the conv
x, w, sc, sh = arr(2, 24, 5, 13), arr(40, 24, 1, 1, scale=0.3), arr(40, 1, 1), arr(40, 1, 1)
case("batch 2 per-channel scale and shift",
     "graph main(x: f32[2, 24, 5, 13], w: f32[40, 24, 1, 1], sc: f32[40, 1, 1], sh: f32[40, 1, 1])"
     " -> (y: f32[2, 40, 5, 13]) {\n"
     "    y = relu(conv2d(x, w) * sc + sh)\n    return y\n}\n",
     {"x": x, "w": w, "sc": sc, "sh": sh}, {"y": np.maximum(conv1x1(x, w) * sc[None] + sh[None], 0)},
     oc=40, hw=65, c=24, batch=2)

# fp16 storage, fp32 accumulation
x, w, b = arr(2, 24, 7, 7, dt=np.float16), arr(18, 24, 1, 1, scale=0.3, dt=np.float16), arr(18, dt=np.float16)
case("fp16 batch 2 bias relu",
     "graph main(x: f16[2, 24, 7, 7], w: f16[18, 24, 1, 1], b: f16[18]) -> (y: f16[2, 18, 7, 7]) {\n"
     "    y = relu(conv2d(x, w, bias=b))\n    return y\n}\n",
     {"x": x, "w": w, "b": b}, {"y": np.maximum(conv1x1(x, w) + b.astype(np.float64)[None, :, None, None], 0)},
     oc=18, hw=49, c=24, batch=2, tol=1e-2)
# stride 2 (ResNet's downsample) keeps its window: the conv template, whose
# 2 tasks split the 96 output channels (the 169 pixels make 3 panels of 64)
x, w, b = arr(1, 40, 26, 26), arr(96, 40, 1, 1, scale=0.3), arr(96)
case("stride 2 bias",
     "graph main(x: f32[1, 40, 26, 26], w: f32[96, 40, 1, 1], b: f32[96]) -> (y: f32[1, 96, 13, 13]) {\n"
     "    y = conv2d(x, w, bias=b, stride=2)\n    return y\n}\n",
     {"x": x, "w": w, "b": b}, {"y": conv1x1(x[:, :, ::2, ::2], w) + b[None, :, None, None]},
     oc=96, hw=169, c=40, batch=1, kind="conv")
# stride 2 with 256 input channels onto 14x14 (ResNet's downsamples, reduced
# in channels out): the implicit GEMM, which gathers every other column once
# into its dense panel, not the direct kernel, whose broadcasts would use half
# of every input line (cg_dconv_plan); a residual and relu as in ResNet
x, w, b, r = arr(1, 256, 28, 28, scale=0.5), arr(64, 256, 1, 1, scale=0.05), arr(64), arr(1, 64, 14, 14)
case("stride 2, 256 in onto 14x14: implicit GEMM, bias residual relu",
     "graph main(x: f32[1, 256, 28, 28], w: f32[64, 256, 1, 1], b: f32[64], r: f32[1, 64, 14, 14])"
     " -> (y: f32[1, 64, 14, 14]) {\n"
     "    y = relu(conv2d(x, w, bias=b, stride=2) + r)\n    return y\n}\n",
     {"x": x, "w": w, "b": b, "r": r}, {"y": np.maximum(conv1x1(x[:, :, ::2, ::2], w) + b[None, :, None, None] + r, 0)},
     oc=64, hw=196, c=256, batch=1, kind="conv", direct=False)
# a weight another kernel reads too (its sum): model_init packs it for the
# conv and keeps it as stored for the sum (only a weight read packed alone
# is left out of m->consts)
x, w = arr(1, 20, 9, 7), arr(12, 20, 1, 1, scale=0.3)
case("weight also summed",
     "graph main(x: f32[1, 20, 9, 7], w: f32[12, 20, 1, 1]) -> (y: f32[1, 12, 9, 7], t: f32[12]) {\n"
     "    y = conv2d(x, w)\n    t = sum(w, [1, 2, 3])\n    return y, t\n}\n",
     {"x": x, "w": w}, {"y": conv1x1(x, w), "t": w.astype(np.float64).sum(axis=(1, 2, 3))}, oc=12, hw=63, c=20, batch=1)

# 7x7 pixels (ResNet's last stage, MobileNetV2's): the GEMM's vectors along
# the 49 pixels would be a quarter padding, so the AVX-512 variant is the
# direct conv (vectors along the output channels) over one row of H*W pixels
x, w, b, r = arr(2, 48, 7, 7), arr(64, 48, 1, 1, scale=0.2), arr(64), arr(2, 64, 7, 7)
case("7x7 direct, batch 2 bias residual relu",
     "graph main(x: f32[2, 48, 7, 7], w: f32[64, 48, 1, 1], b: f32[64], r: f32[2, 64, 7, 7]) -> (y: f32[2, 64, 7, 7]) {\n"
     "    y = relu(conv2d(x, w, bias=b) + r)\n    return y\n}\n",
     {"x": x, "w": w, "b": b, "r": r}, {"y": np.maximum(conv1x1(x, w) + b[None, :, None, None] + r, 0)},
     oc=64, hw=49, c=48, batch=2, kind="conv", direct=True)
# the weight an input (packed on every run), ReLU6 as a clamp, 5x5 pixels
x, w, b = arr(1, 40, 5, 5), arr(32, 40, 1, 1, scale=0.3), arr(32)
case("5x5 direct, weight as input, relu6",
     "graph main(x: f32[1, 40, 5, 5], w: f32[32, 40, 1, 1], b: f32[32]) -> (y: f32[1, 32, 5, 5]) {\n"
     "    y = min(max(conv2d(x, w, bias=b), 0.0), 6.0)\n    return y\n}\n",
     {"x": x, "w": w, "b": b}, {"y": np.clip(conv1x1(x, w) + b[None, :, None, None], 0, 6)},
     oc=32, hw=25, c=40, batch=1, params=("b",), kind="conv", direct=True)
# 1024 channels in: the weights in channel blocks (partial sums in scratch),
# 1.2 MB of them (the next block's prefetched while one computes)
x, w, b = arr(1, 1024, 7, 7, scale=0.5), arr(288, 1024, 1, 1, scale=0.05), arr(288)
case("7x7 direct, channel blocks",
     "graph main(x: f32[1, 1024, 7, 7], w: f32[288, 1024, 1, 1], b: f32[288]) -> (y: f32[1, 288, 7, 7]) {\n"
     "    y = relu(conv2d(x, w, bias=b))\n    return y\n}\n",
     {"x": x, "w": w, "b": b}, {"y": np.maximum(conv1x1(x, w) + b[None, :, None, None], 0)},
     oc=288, hw=49, c=1024, batch=1, kind="conv", direct=True)
# 512 channels in (one block of 64 KiB a tile), 1.3 MB of weights: the next
# output channel block's weights prefetched
x, w = arr(1, 512, 7, 7, scale=0.5), arr(640, 512, 1, 1, scale=0.05)
case("7x7 direct, next block prefetched",
     "graph main(x: f32[1, 512, 7, 7], w: f32[640, 512, 1, 1]) -> (y: f32[1, 640, 7, 7]) {\n"
     "    y = conv2d(x, w)\n    return y\n}\n",
     {"x": x, "w": w}, {"y": conv1x1(x, w)}, oc=640, hw=49, c=512, batch=1, kind="conv", direct=True)
# fp16 storage through the direct kernel (the input widened first)
x, w, b = arr(2, 24, 7, 7, dt=np.float16), arr(32, 24, 1, 1, scale=0.3, dt=np.float16), arr(32, dt=np.float16)
case("fp16 7x7 direct, batch 2 bias relu",
     "graph main(x: f16[2, 24, 7, 7], w: f16[32, 24, 1, 1], b: f16[32]) -> (y: f16[2, 32, 7, 7]) {\n"
     "    y = relu(conv2d(x, w, bias=b))\n    return y\n}\n",
     {"x": x, "w": w, "b": b}, {"y": np.maximum(conv1x1(x, w) + b.astype(np.float64)[None, :, None, None], 0)},
     oc=32, hw=49, c=24, batch=2, tol=1e-2, kind="conv", direct=True)
# stride 2 onto 7x7 (the downsample of ResNet's last stage): the conv
# template's direct kernel, its window kept
x, w, b, r = arr(1, 64, 14, 14), arr(96, 64, 1, 1, scale=0.2), arr(96), arr(1, 96, 7, 7)
case("stride 2 onto 7x7 direct, bias residual relu",
     "graph main(x: f32[1, 64, 14, 14], w: f32[96, 64, 1, 1], b: f32[96], r: f32[1, 96, 7, 7]) -> (y: f32[1, 96, 7, 7]) {\n"
     "    y = relu(conv2d(x, w, bias=b, stride=2) + r)\n    return y\n}\n",
     {"x": x, "w": w, "b": b, "r": r}, {"y": np.maximum(conv1x1(x[:, :, ::2, ::2], w) + b[None, :, None, None] + r, 0)},
     oc=96, hw=49, c=64, batch=1, kind="conv", direct=True)
s.close()
