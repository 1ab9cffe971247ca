"""The trigonometric and hyperbolic ONNX ops (onnx_ops_math.c), measured in
ulps against numpy in float64 over the whole float range on the
interpreter and the cpu backend: random magnitudes from 2^-30 to 2^128
(Sin / Cos / Tan reduce those exactly), dense ranges where each function
bends, and the edge values (±0, ±inf, NaN, the largest floats, subnormals,
a binary32 near a multiple of pi/2).  Every op is one output of one model,
so the cpu backend compiles one C file.  Also: fp16 in and out, a clear
error for an integer input, BitShift / Bitwise* on int32 (exact, the
extremes and out-of-width shifts included) against numpy, RotaryEmbedding
on symbolic dims against onnx's reference, and SwiGLU's shape check."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import harp_test as ht  # noqa: E402

ht.onnx_or_skip(runtime=False)
import onnx  # noqa: E402
from onnx import TensorProto  # noqa: E402
from onnx_models import mk, model, vi  # noqa: E402

ht.compiled_only()  # the cpu rows check the compiled C, not tier 0's (harp_test.compiled_only)
S = ht.Suite("onnx_math")
rng = np.random.default_rng(3)
BACKENDS = [b for b in ("interp", "cpu") if b in ht.BACKENDS]
# op: (numpy reference, the most ulps allowed; measured 1.3 to 3.6)
OPS = {"Sin": (np.sin, 3), "Cos": (np.cos, 3), "Tan": (np.tan, 4), "Asin": (np.arcsin, 3), "Acos": (np.arccos, 3),
       "Atan": (np.arctan, 3), "Sinh": (np.sinh, 3), "Cosh": (np.cosh, 3), "Asinh": (np.arcsinh, 4),
       "Acosh": (np.arccosh, 4), "Atanh": (np.arctanh, 4)}
ODD = {"Sin", "Tan", "Asin", "Atan", "Sinh", "Asinh", "Atanh"}


def save(m):
    path = os.path.join(ht.tempfile.mkdtemp(), "m.onnx")
    onnx.save(m, path)
    return path


n = 20000
edge = [0.0, -0.0, np.inf, -np.inf, np.nan, 1, -1, 0.5, -0.5, 2, 3.4028235e38, -3.4028235e38, 1e-45, -1e-45, 1.2e-38,
        16367173 * 2.0 ** 72, 2.0 ** 24, 2.0 ** 23 + 1, 88, 88.5, 89.4, 90, -89.4, 8192, 8193, np.pi / 4, 0.41421357, 2.4142137]
x = np.concatenate([np.exp2(rng.uniform(-30, 128, n)) * rng.choice([-1, 1], n), rng.uniform(-10, 10, n),
                    rng.uniform(-1.2, 1.2, n), rng.uniform(-100, 100, n), rng.uniform(0.9, 3, n), edge]).astype(np.float32)
x = np.concatenate([x, np.zeros(-len(x) % 16, np.float32)]).reshape(-1, 16)
m = model([mk(op, ["x"], ["y_" + op]) for op in OPS], [vi("x", list(x.shape))], [vi("y_" + op, None) for op in OPS], [], 22)
path = save(m)
x64 = x.astype(np.float64)
for be in BACKENDS:
    res, err = ht.run_model(path, {"x": x}, backend=be)
    S.check(f"trig model {be}: runs", err is None, (err or "")[-600:])
    if err:
        continue
    for op, (f, lim) in OPS.items():
        got = res[f"y_{op}"]
        with np.errstate(all="ignore"):
            want = f(x64)
            w32 = want.astype(np.float32)
            fin = np.isfinite(w32)
            err = np.where(fin, np.abs(got - want) / np.spacing(np.abs(w32)).astype(np.float64), 0)
        worst = int(np.argmax(err))
        S.check(f"{op} {be}: within {lim} ulp", err.max() <= lim,
                f"{err.max():.2f} ulp at x={x.flat[worst]!r}: got {got.flat[worst]!r}, want {want.flat[worst]!r}")
        S.check(f"{op} {be}: NaN exactly where numpy's", np.array_equal(np.isnan(got), np.isnan(w32)),
                f"x={x[np.isnan(got) != np.isnan(w32)][:5]}")
        S.check(f"{op} {be}: infinities where numpy's", np.array_equal(got[~fin & ~np.isnan(w32)], w32[~fin & ~np.isnan(w32)]))
        if op in ODD:
            z = x == 0
            S.check(f"{op} {be}: the sign of ±0 kept", np.array_equal(np.signbit(got[z]), np.signbit(x[z])))

# fp16 in and out (computed in fp32): within an fp16 ulp or so
xh = rng.uniform(-20, 20, 64).astype(np.float16)
mh = model([mk("Sin", ["x"], ["ys"]), mk("Atanh", ["t"], ["ya"])], [vi("x", [64], TensorProto.FLOAT16), vi("t", [64], TensorProto.FLOAT16)],
           [vi("ys", None, TensorProto.FLOAT16), vi("ya", None, TensorProto.FLOAT16)], [], 22)
th = rng.uniform(-0.99, 0.99, 64).astype(np.float16)
ph = save(mh)
for be in BACKENDS:
    p, d = ht.run(ph, {"x": xh, "t": th}, backend=be)
    S.check(f"fp16 Sin / Atanh {be}: runs", p.returncode == 0, p.stderr.strip()[-600:])
    if p.returncode == 0:
        for o, want in (("ys", np.sin(xh.astype(np.float64))), ("ya", np.arctanh(th.astype(np.float64)))):
            got = np.load(os.path.join(d, f"{o}.npy"))
            S.check(f"fp16 {o} {be}: fp16 out", got.dtype == np.float16, str(got.dtype))
            err = np.abs(got.astype(np.float64) - want) / np.spacing(np.abs(want.astype(np.float16))).astype(np.float64)
            S.check(f"fp16 {o} {be}: within 1 fp16 ulp", err.max() <= 1, f"{err.max():.2f}")

# BitShift and Bitwise* on int32: exact, against numpy, the extremes included
I32 = TensorProto.INT32
ext = np.array([0, 1, -1, 2**31 - 1, -2**31, 65535, 65536, -65536, -65537, 2**24 + 1, -(2**24) - 1, 12345678], np.int32)
ba = np.concatenate([ext, rng.integers(-2**31, 2**31, 500, dtype=np.int64).astype(np.int32)])
bb = np.concatenate([ext[::-1], rng.integers(-2**31, 2**31, 500, dtype=np.int64).astype(np.int32)])
sh = np.concatenate([np.array([0, 1, 15, 16, 17, 31, 32, 33, -1, -32, 100, 2**31 - 1], np.int32), rng.integers(-4, 40, 500).astype(np.int32)])
mb = model([mk("BitShift", ["a", "s"], ["l"], direction="LEFT"), mk("BitShift", ["a", "s"], ["r"], direction="RIGHT"),
            mk("BitwiseAnd", ["a", "b"], ["and"]), mk("BitwiseOr", ["a", "b"], ["or"]), mk("BitwiseXor", ["a", "b"], ["xor"]),
            mk("BitwiseNot", ["a"], ["not"])], [vi("a", [len(ba)], I32), vi("b", [len(ba)], I32), vi("s", [len(ba)], I32)],
           [vi(o, None, I32) for o in ("l", "r", "and", "or", "xor", "not")], [], 28)
pb = save(mb)
a64, s64 = ba.astype(np.int64), sh.astype(np.int64)
inrange = (s64 >= 0) & (s64 < 32)
want = {"l": np.where(inrange, (a64 << np.clip(s64, 0, 31)) & 0xFFFFFFFF, 0).astype(np.uint32).view(np.int32),
        "r": np.where(inrange, a64 >> np.clip(s64, 0, 31), np.where(a64 < 0, -1, 0)).astype(np.int32),
        "and": ba & bb, "or": ba | bb, "xor": ba ^ bb, "not": ~ba}
for be in BACKENDS:
    p, d = ht.run(pb, {"a": ba, "b": bb, "s": sh}, backend=be)
    S.check(f"BitShift / Bitwise {be}: runs", p.returncode == 0, p.stderr.strip()[-600:])
    if p.returncode == 0:
        for o, w in want.items():
            got = np.load(os.path.join(d, f"{o}.npy"))
            bad = np.nonzero(got != w)[0]
            S.check(f"{o} {be}: exact", got.dtype == np.int32 and not len(bad),
                    f"{got.dtype}; at {bad[:3]}: a={ba[bad[:3]]} b={bb[bad[:3]]} s={sh[bad[:3]]} got {got[bad[:3]]} want {w[bad[:3]]}")
ml = model([mk("BitShift", ["a", "s"], ["y"], direction="LEFT", name="bs")], [vi("a", [2], TensorProto.INT64), vi("s", [2], TensorProto.INT64)],
           [vi("y", None, TensorProto.INT64)], [], 28)
p, _ = ht.run(save(ml), {"a": np.array([1, 2], np.int32), "s": np.array([1, 40], np.int32)})
S.check("BitShift LEFT of int64: a clear refusal", p.returncode == 1 and "Unsupported" in p.stderr and "LEFT shift of int64" in p.stderr,
        p.stderr[-300:])

# RotaryEmbedding with symbolic batch and sequence (position_ids, partial rotary dim, interleaved)
# against onnx's reference; SwiGLU of two shapes is a clear error
from onnx.reference import ReferenceEvaluator  # noqa: E402

xr = rng.standard_normal((2, 4, 6, 8)).astype(np.float32)
cc, sc = rng.standard_normal((20, 2)).astype(np.float32), rng.standard_normal((20, 2)).astype(np.float32)
pos = rng.integers(0, 20, (2, 6)).astype(np.int64)
for inter in (0, 1):
    mr = model([mk("RotaryEmbedding", ["x", "cc", "sc", "pos"], ["y"], rotary_embedding_dim=4, interleaved=inter)],
               [vi("x", ["b", 4, "s", 8]), vi("cc", [20, 2]), vi("sc", [20, 2]), vi("pos", ["b", "s"], TensorProto.INT64)],
               [vi("y", None)], [], 23)
    want = ReferenceEvaluator(mr).run(None, {"x": xr, "cc": cc, "sc": sc, "pos": pos})[0]
    pr = save(mr)
    for be in BACKENDS:
        p, d = ht.run(pr, {"x": xr, "cc": cc, "sc": sc, "pos": pos.astype(np.int32)}, syms=["b=2", "s=6"], backend=be)
        S.check(f"RotaryEmbedding interleaved={inter} symbolic {be}: runs", p.returncode == 0, p.stderr.strip()[-600:])
        if p.returncode == 0:
            ok, why = ht.close(np.load(os.path.join(d, "y.npy")), want, rtol=1e-5, atol=1e-5)
            S.check(f"RotaryEmbedding interleaved={inter} symbolic {be}: matches onnx's reference", ok, why)
msw = model([mk("SwiGLU", ["a", "b"], ["y"], name="sw")], [vi("a", [2, 4]), vi("b", [1, 4])], [vi("y", None)], [], 28)
p, _ = ht.run(save(msw), {"a": np.ones((2, 4), np.float32), "b": np.ones((1, 4), np.float32)})
S.check("SwiGLU of two shapes: a clear error", p.returncode == 1 and "AxisSizeMismatch" in p.stderr and "one shape" in p.stderr, p.stderr[-300:])

# an integer input is a clear error, not a crash
mi = model([mk("Cos", ["x"], ["y"], name="c0")], [vi("x", [4], TensorProto.INT32)], [vi("y", None, TensorProto.INT32)], [], 22)
p, _ = ht.run(save(mi), {"x": np.arange(4, dtype=np.int32)})
S.check("Cos of int32: exit 1", p.returncode == 1, f"rc={p.returncode} {p.stderr[-300:]}")
S.check("Cos of int32: names the node and says why", 'node 0 "c0" (Cos)' in p.stderr and "floating-point" in p.stderr, p.stderr[-300:])
S.close()
