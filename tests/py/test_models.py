"""Reduced versions of the whole-model benchmarks bench/models/mobilenetv2.harp
and bench/models/llama_layer.harp, compiled for the CPU and checked against
the reference interpreter (and the LLaMA layer against numpy), so the models
bench/e2e.py times keep working.

MobileNetV2: the bench model's relu6 and expand subgraphs with a small main
(a 3x3/2 stem, a t=1 block, a t=6 stride-2 block, a t=6 residual block, the
1x1 head + ReLU6, global average pool, linear) at 32x32.  Every ReLU6 must
ride on its convolution's template epilogue (a clamp step): no separate map
or generic-loop kernel computes max / min.  LLaMA: the bench model's rmsnorm
and rope subgraphs with d=64, 2 heads of 32, SwiGLU hidden 128, s=8."""
import os
import re

import numpy as np

from harp_test import SRC, Suite, run_cpu_and_interp

s = Suite("models")
rng = np.random.default_rng(11)


def rand(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def subgraphs(path, first, until):
    """The text of bench model `path` from graph `first` up to graph `until`."""
    src = open(os.path.join(SRC, "bench", "models", path)).read()
    return src[src.index(first):src.index(until)]


def rel_err(got, want):
    got, want = got.astype(np.float64), np.asarray(want, dtype=np.float64)
    return float(np.max(np.abs(got - want)) / max(1e-30, np.max(np.abs(want))))


def check(name, text, feeds, weights, out, numpy_ref=None, tol=2e-5):
    """Run on the cpu backend (weights as --param) and the interpreter; compare."""
    r = run_cpu_and_interp(s, name, text, {**feeds, **weights}, params=weights)
    if r is None:
        return None
    src, d, e = r
    got, want = np.load(os.path.join(d, f"{out}.npy")), np.load(os.path.join(e, f"{out}.npy"))
    s.check(f"{name}: shape", got.shape == want.shape, f"{got.shape} vs {want.shape}")
    err = rel_err(got, want)
    s.check(f"{name}: cpu matches the interpreter (max rel err {err:.1e})", err < tol, f"{err:.3g}")
    if numpy_ref is not None:
        err = rel_err(want, numpy_ref)
        s.check(f"{name}: the interpreter matches numpy (max rel err {err:.1e})", err < tol, f"{err:.3g}")
    print(f"{name}: max rel err vs the interpreter {rel_err(got, want):.1e}")
    return src


# ---- MobileNetV2, two-and-a-bit blocks at 32x32 --------------------------------
MNV2 = subgraphs("mobilenetv2.harp", "// ReLU6 = clip", "graph<N=1> main(") + """
graph<N=1> main(x: f32[N, 3, 32, 32], w0: f32[8, 3, 3, 3], b0: f32[8],
                d1: f32[8, 1, 3, 3], db1: f32[8], p1: f32[8, 8, 1, 1], pb1: f32[8],
                e2: f32[48, 8, 1, 1], eb2: f32[48], d2: f32[48, 1, 3, 3], db2: f32[48], p2: f32[12, 48, 1, 1], pb2: f32[12],
                e3: f32[72, 12, 1, 1], eb3: f32[72], d3: f32[72, 1, 3, 3], db3: f32[72], p3: f32[12, 72, 1, 1], pb3: f32[12],
                wl: f32[32, 12, 1, 1], bl: f32[32], wf: f32[32, 10], bf: f32[10])
    -> (y: f32[N, 10]) {
    a0 = relu6(conv2d(x, w0, bias=b0, stride=2, pad=1))                  // [N, 8, 16, 16]
    h1 = relu6(conv2d(a0, d1, bias=db1, stride=1, pad=1, groups=8))
    a1 = conv2d(h1, p1, bias=pb1)
    x2 = expand(a1, e2, eb2)                                             // [N, 48, 16, 16]
    h2 = relu6(conv2d(x2, d2, bias=db2, stride=2, pad=1, groups=48))     // [N, 48, 8, 8]
    a2 = conv2d(h2, p2, bias=pb2)                                        // [N, 12, 8, 8]
    x3 = expand(a2, e3, eb3)
    h3 = relu6(conv2d(x3, d3, bias=db3, stride=1, pad=1, groups=72))
    a3 = a2 + conv2d(h3, p3, bias=pb3)
    z = expand(a3, wl, bl)                                               // [N, 32, 8, 8]
    y = mean(z, [2, 3]) @ wf + bf
    return y
}
"""


def mnv2_weights():
    t = {"w0": rand(8, 3, 3, 3, scale=1.0), "b0": rand(8, scale=0.5)}
    for i, (c, e, d) in ((1, (8, 8, 8)), (2, (8, 48, 12)), (3, (12, 72, 12))):
        if e != c:
            t[f"e{i}"], t[f"eb{i}"] = rand(e, c, 1, 1, scale=(2 / c) ** 0.5 * 2), rand(e, scale=0.5)
        t[f"d{i}"], t[f"db{i}"] = rand(e, 1, 3, 3, scale=0.8), rand(e, scale=0.5)
        t[f"p{i}"], t[f"pb{i}"] = rand(d, e, 1, 1, scale=(1 / e) ** 0.5), rand(d, scale=0.1)
    t["wl"], t["bl"] = rand(32, 12, 1, 1, scale=1.0), rand(32, scale=0.5)
    t["wf"], t["bf"] = rand(32, 10, scale=32 ** -0.5), rand(10, scale=0.1)
    return t


src = check("mobilenetv2 (reduced)", MNV2, {"x": rand(1, 3, 32, 32, scale=2.0)}, mnv2_weights(), "y")
if src is not None:
    # every relu6 on a template: no kernel of its own (a map or generic loops named after the max / min)
    maps = re.findall(r"/\* ---- model_k\d+_map: .*max.*---- \*/", src)
    s.check("mobilenetv2 (reduced): no ReLU6 in a map kernel of its own", not maps, str(maps))
    own = [r for r in re.findall(r"/\* kernel \d+: region (\S+) \*/\n(?:/\* generic loops[^\n]*\n)?HP_KERNEL", src)]
    s.check("mobilenetv2 (reduced): no generic-loop kernel but the pool", all(r.startswith("mean") for r in own), str(own))
    convs = len(re.findall(r"/\* ---- model_k\d+_(?:conv|gemm): ", src))
    s.check("mobilenetv2 (reduced): every conv on a template", convs >= 9, f"{convs} template kernels")

# ---- a LLaMA decoder layer, d=64 -------------------------------------------------
S, D, H, F = 8, 64, 2, 128
E = D // H
LLAMA = subgraphs("llama_layer.harp", "// x / rms(x)", "graph<S=128> main(") + f"""
graph<S={S}> main(x: f32[1, S, {D}], g1: f32[{D}], wq: f32[{D}, {D}], wk: f32[{D}, {D}], wv: f32[{D}, {D}],
                  wo: f32[{D}, {D}], g2: f32[{D}], w1: f32[{D}, {F}], w3: f32[{D}, {F}], w2: f32[{F}, {D}],
                  cos: f32[S, 1, {E}], sin: f32[S, 1, {E}])
    -> (y: f32[1, S, {D}]) {{
    n = rmsnorm(x, g1)
    q = reshape(rope(reshape(n @ wq, [1, S, {H}, {E}]), cos, sin), [1, S, {D}])
    k = reshape(rope(reshape(n @ wk, [1, S, {H}, {E}]), cos, sin), [1, S, {D}])
    a = attention(q, k, n @ wv, heads={H}, causal=true)
    h = x + a @ wo
    m = rmsnorm(h, g2)
    y = h + (silu(m @ w1) * (m @ w3)) @ w2
    return y
}}
"""


def llama_np(t):
    f = {k: v.astype(np.float64) for k, v in t.items()}
    rms = lambda v, g: v / np.sqrt((v * v).mean(-1, keepdims=True) + 1e-5) * g
    heads = lambda v: v.reshape(1, S, H, E).transpose(0, 2, 1, 3)

    def rope(v):
        return v * f["cos"][:, 0] + np.concatenate([-v[..., E // 2:], v[..., :E // 2]], axis=-1) * f["sin"][:, 0]
    n = rms(f["x"], f["g1"])
    q, k, v = rope(heads(n @ f["wq"])), rope(heads(n @ f["wk"])), heads(n @ f["wv"])
    sc = q @ k.transpose(0, 1, 3, 2) / np.sqrt(E) + np.triu(np.full((S, S), -np.inf), 1)
    p = np.exp(sc - sc.max(-1, keepdims=True))
    a = ((p / p.sum(-1, keepdims=True)) @ v).transpose(0, 2, 1, 3).reshape(1, S, D)
    h = f["x"] + a @ f["wo"]
    m = rms(h, f["g2"])
    u = m @ f["w1"]
    return h + (u / (1 + np.exp(-u)) * (m @ f["w3"])) @ f["w2"]


ang = np.arange(S)[:, None] * 10000.0 ** (-np.arange(0, E, 2) / E)[None, :]
ang = np.concatenate([ang, ang], axis=1)
w = dict(g1=1 + rand(D, scale=0.1), wq=rand(D, D, scale=D ** -0.5), wk=rand(D, D, scale=D ** -0.5),
         wv=rand(D, D, scale=D ** -0.5), wo=rand(D, D, scale=D ** -0.5), g2=1 + rand(D, scale=0.1),
         w1=rand(D, F, scale=D ** -0.5), w3=rand(D, F, scale=D ** -0.5), w2=rand(F, D, scale=F ** -0.5),
         cos=np.cos(ang).astype(np.float32)[:, None], sin=np.sin(ang).astype(np.float32)[:, None])
x = rand(1, S, D)
check("llama layer (d64 h2 s8)", LLAMA, {"x": x}, w, "y", numpy_ref=llama_np({"x": x, **w}))

s.close()
