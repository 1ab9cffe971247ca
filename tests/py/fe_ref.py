"""numpy implementations of the examples/*.harp networks (float64), shared
by tests/py/test_examples.py and scripts/demo_transformer.py.

rnd(x, half) stores a layer output the way the fp16 network does: harp
casts back to fp16 after every contraction / normalization (matmul, conv2d,
attention, layernorm), so the references round at those points; elementwise
ops in between are computed in fp32 by harp's interpreter and unrounded here.
"""
import math

import numpy as np

erf = np.vectorize(math.erf, otypes=[np.float64])
_rng = [np.random.default_rng(7)]


def seed(n):
    _rng[0] = np.random.default_rng(n)


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
    a = _rng[0].standard_normal(shape)
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


def transformer_inputs(B=2, S=10):
    E, F = 64, 256
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
