"""The examples/*.harp networks run through `harp run` and match independent
numpy implementations, in fp32 and in fp16 (the same file with f32 -> f16).

fp32: rtol = atol = 1e-3 against numpy in float32 (float64 accumulation).
fp16: numpy computes in float32 from the same fp16 inputs and weights.  The
network stores each layer's output in fp16, as any fp16 framework does: harp's
lowering casts back to fp16 after every contraction / normalization (matmul,
conv2d, attention, layernorm), and the reference rounds at those same points.
Elementwise ops between them are computed in fp32 by harp's reference
interpreter and by numpy alike.  The comparison then is rtol = atol = 1e-3
after rounding the reference to fp16, except where noted per example.

Every example also round-trips through `harp decompile`: the decompiled text
runs and gives bit-identical outputs.
"""
import math
import os
import subprocess
import tempfile

import numpy as np

from harp_test import HARP, SRC, Suite, close, run

EX = os.path.join(SRC, "examples")
s = Suite("examples")
rng = np.random.default_rng(7)
erf = np.vectorize(math.erf, otypes=[np.float64])


def rnd(x, half):
    """A layer output as the network stores it."""
    return x.astype(np.float16).astype(np.float64) if half else x


# ---- numpy building blocks (float64) ------------------------------------------
def conv2d(x, w, b, stride=1, pad=0):
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    kh, kw = w.shape[2:]
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::stride, ::stride]
    return np.einsum("ncyxij,ocij->noyx", win, w) + b[None, :, None, None]


def max_pool2d(x, k):
    n, c, h, w = x.shape
    return x[:, :, : h // k * k, : w // k * k].reshape(n, c, h // k, k, w // k, k).max(axis=(3, 5))


def layernorm(x, g, b, eps=1e-5):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * g + b


def gelu(x):
    return 0.5 * x * (1 + erf(x / math.sqrt(2)))


def silu(x):
    return x / (1 + np.exp(-x))


def mha(q, k, v, heads, causal, half):
    B, M, E = q.shape
    N = k.shape[1]
    D = E // heads
    split = lambda t, n: t.reshape(B, n, heads, D).transpose(0, 2, 1, 3)
    S = split(q, M) @ split(k, N).transpose(0, 1, 3, 2) / math.sqrt(D)
    if causal:  # key j visible to query i iff j <= i + (N - M)
        S = np.where(np.arange(N)[None, :] > np.arange(M)[:, None] + (N - M), -np.inf, S)
    P = np.exp(S - S.max(-1, keepdims=True))
    P = rnd(P / P.sum(-1, keepdims=True), half)  # P is cast to the value dtype before P·V
    return (P @ split(v, N)).transpose(0, 2, 1, 3).reshape(B, M, E)


# ---- the examples --------------------------------------------------------------
def w(*shape, fan_in=None):
    a = rng.standard_normal(shape)
    return a / math.sqrt(fan_in) if fan_in else a


def mlp_inputs():
    B = 3
    return {"x": w(B, 64), "w1": w(64, 128, fan_in=64), "b1": w(128) * 0.1, "w2": w(128, 10, fan_in=128),
            "b2": w(10) * 0.1}


def mlp_ref(t, half):
    h = np.maximum(rnd(t["x"] @ t["w1"], half) + t["b1"], 0)
    return rnd(h @ t["w2"], half) + t["b2"]


def conv_block_inputs():
    return {"x": w(2, 8, 12, 10), "w": w(16, 8, 3, 3, fan_in=72), "b": w(16) * 0.1}


def conv_block_ref(t, half):
    return silu(rnd(conv2d(t["x"], t["w"], t["b"], pad=1), half))


def transformer_inputs():
    B, S, E, F = 2, 10, 64, 256
    t = {"x": w(B, S, E)}
    for p in ("ln1", "ln2"):
        t[p + "_g"] = 1 + 0.1 * w(E)
        t[p + "_b"] = 0.1 * w(E)
    for p in ("wq", "wk", "wv", "wo"):
        t[p] = w(E, E, fan_in=E)
    t["w1"], t["b1"] = w(E, F, fan_in=E), 0.1 * w(F)
    t["w2"], t["b2"] = w(F, E, fan_in=F), 0.1 * w(E)
    return t


def transformer_ref(t, half):
    x = t["x"]
    h = rnd(layernorm(x, t["ln1_g"], t["ln1_b"]), half)
    q, k, v = (rnd(h @ t[p], half) for p in ("wq", "wk", "wv"))
    a = rnd(mha(q, k, v, 4, True, half), half)
    h1 = x + rnd(a @ t["wo"], half)
    h2 = rnd(layernorm(h1, t["ln2_g"], t["ln2_b"]), half)
    u = gelu(rnd(h2 @ t["w1"], half) + t["b1"])
    return h1 + (rnd(u @ t["w2"], half) + t["b2"])


def cnn_inputs():
    return {"x": w(3, 1, 28, 28), "w1": w(8, 1, 3, 3, fan_in=9), "b1": 0.1 * w(8), "w2": w(16, 8, 3, 3, fan_in=72),
            "b2": 0.1 * w(16), "wf": w(784, 10, fan_in=784), "bf": 0.1 * w(10)}


def cnn_ref(t, half):
    h1 = np.maximum(rnd(conv2d(t["x"], t["w1"], t["b1"], pad=1), half), 0)
    p1 = rnd(max_pool2d(h1, 2), half)
    h2 = np.maximum(rnd(conv2d(p1, t["w2"], t["b2"], stride=2, pad=1), half), 0)
    f = h2.reshape(h2.shape[0], -1)
    return rnd(f @ t["wf"], half) + t["bf"]


EXAMPLES = [
    ("mlp.harp", mlp_inputs, mlp_ref),
    ("conv_block.harp", conv_block_inputs, conv_block_ref),
    ("transformer_block.harp", transformer_inputs, transformer_ref),
    ("cnn.harp", cnn_inputs, cnn_ref),
]

tmp = tempfile.mkdtemp(prefix="harp_examples_")
for name, make, ref in EXAMPLES:
    src = os.path.join(EX, name)
    text = open(src).read()
    for half in (False, True):
        dt = np.float16 if half else np.float32
        label = f"{name} {'fp16' if half else 'fp32'}"
        model = src
        if half:
            model = os.path.join(tmp, name.replace(".harp", "_f16.harp"))
            with open(model, "w") as f:
                f.write(text.replace("f32[", "f16["))
        t = {k: v.astype(dt) for k, v in make().items()}
        p, d = run(model, t)
        s.check(f"{label} runs", p.returncode == 0, p.stderr)
        if p.returncode:
            continue
        got = np.load(os.path.join(d, "y.npy"))
        s.check(f"{label} dtype", got.dtype == dt, str(got.dtype))
        want = ref({k: v.astype(np.float64) for k, v in t.items()}, half)
        ok, detail = close(got, want)
        s.check(label, ok, detail)
        print(f"{label}: {detail}")
        # decompile -> run the text -> the same bits
        q = subprocess.run([HARP, "decompile", model], capture_output=True, text=True, timeout=120)
        s.check(f"{label} decompiles", q.returncode == 0, q.stderr)
        if q.returncode == 0:
            again = os.path.join(tmp, "rt_" + os.path.basename(model))
            with open(again, "w") as f:
                f.write(q.stdout)
            p2, d2 = run(again, t)
            s.check(f"{label} decompiled text runs", p2.returncode == 0, p2.stderr)
            if p2.returncode == 0:
                got2 = np.load(os.path.join(d2, "y.npy"))
                s.check(f"{label} decompiled text gives the same outputs", np.array_equal(got, got2, equal_nan=True))
s.close()
