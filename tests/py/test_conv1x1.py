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

from harp_test import Suite, close, run

s = Suite("conv1x1")
rng = np.random.default_rng(11)


def arr(*shape, scale=1.0, dt=np.float32):
    return (rng.standard_normal(shape) * scale).astype(dt)


def conv1x1(x, w):
    """y[n, o, h, w] = sum_c w[o, c] x[n, c, h, w] in float64."""
    return np.einsum("nchw,oc->nohw", x.astype(np.float64), w[:, :, 0, 0].astype(np.float64))


def case(name, text, feeds, want, oc, hw, c, batch, params=("w",), tol=1e-3, kind="gemm"):
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
# a weight another kernel reads too (its sum): model_init packs it for the
# conv and keeps it as stored for the sum (only a weight read packed alone
# is left out of m->consts)
x, w = arr(1, 20, 9, 7), arr(12, 20, 1, 1, scale=0.3)
case("weight also summed",
     "graph main(x: f32[1, 20, 9, 7], w: f32[12, 20, 1, 1]) -> (y: f32[1, 12, 9, 7], t: f32[12]) {\n"
     "    y = conv2d(x, w)\n    t = sum(w, [1, 2, 3])\n    return y, t\n}\n",
     {"x": x, "w": w}, {"y": conv1x1(x, w), "t": w.astype(np.float64).sum(axis=(1, 2, 3))}, oc=12, hw=63, c=20, batch=1)
s.close()
