"""Every uop through `harp run` against numpy, on random data with odd sizes,
in fp32 and fp16 (computed in fp32 and rounded, as the interpreter does)."""
import math

import numpy as np

from harp_test import BACKENDS, Suite, close, run, write_model

s = Suite("uops")
rng = np.random.default_rng(7)
erf = np.vectorize(math.erf)


def inp(name, dtype, shape):
    return {"id": name, "uop": "INPUT", "arg": {"tensor_id": name, "dtype": dtype, "shape": list(shape)}}


def check(name, uops, inputs, want, dtype="fp32", out="r", atol=1e-3):
    ins = [inp(k, {np.float16: "fp16", np.float32: "fp32", np.int32: "i32", np.bool_: "bool"}[v.dtype.type], v.shape)
           for k, v in inputs.items()]
    model = write_model(ins + uops, [out])
    for backend in BACKENDS:
        p, d = run(model, inputs, backend=backend)
        label = f"{name} [{backend}]"
        if p.returncode != 0:
            s.check(label, False, p.stderr)
            continue
        got = np.load(f"{d}/{out}.npy")
        if got.dtype.kind in "ib":
            s.check(label, np.array_equal(got, want), f"{got} != {want}")
        else:
            s.check(label, *close(got, want, atol=atol))


for dt, npdt in (("fp32", np.float32), ("fp16", np.float16)):
    x = (rng.standard_normal((5, 7)) * 2).astype(npdt)
    y = (rng.standard_normal((5, 7)) * 2).astype(npdt)
    pos = (np.abs(rng.standard_normal((5, 7))) + 0.1).astype(npdt)
    X, Y, P = x.astype(np.float32), y.astype(np.float32), pos.astype(np.float32)
    un = {"NEG": -X, "EXP2": np.exp2(X), "EXP": np.exp(X), "RELU": np.maximum(X, 0),
          "GELU": 0.5 * X * (1 + erf(X / np.sqrt(2)))}
    for op, want in un.items():
        check(f"{op}/{dt}", [{"id": "r", "uop": op, "src": ["x"]}], {"x": x}, want)
    # rounding: halves (to even for ROUND), signed zeros, infinities, NaN
    h = np.concatenate([np.array([0.5, -0.5, 1.5, -1.5, 2.5, -2.5, -0.0, np.inf, -np.inf, np.nan]), X.reshape(-1)[:25]]).astype(npdt)
    H = h.astype(np.float32)
    for op, want in {"FLOOR": np.floor(H), "CEIL": np.ceil(H), "ROUND": np.round(H)}.items():
        check(f"{op}/{dt}", [{"id": "r", "uop": op, "src": ["h"]}], {"h": h.reshape(5, 7)}, want.reshape(5, 7), atol=0)
    for op, want in {"LOG2": np.log2(P), "SQRT": np.sqrt(P), "RSQRT": 1 / np.sqrt(P), "RECIP": 1 / P}.items():
        check(f"{op}/{dt}", [{"id": "r", "uop": op, "src": ["p"]}], {"p": pos}, want)
    bi = {"ADD": X + Y, "SUB": X - Y, "MUL": X * Y, "FDIV": X / P, "MAX": np.maximum(X, Y), "MIN": np.minimum(X, Y)}
    for op, want in bi.items():
        other = "p" if op == "FDIV" else "y"
        check(f"{op}/{dt}", [{"id": "r", "uop": op, "src": ["x", other]}], {"x": x, other: {"p": pos, "y": y}[other]}, want)
    for op, f in {"CMPLT": np.less, "CMPEQ": np.equal, "CMPNE": np.not_equal}.items():
        yy = y.copy()
        yy[0] = x[0]  # some equal elements
        check(f"{op}/{dt}", [{"id": "r", "uop": op, "src": ["x", "y"]}], {"x": x, "y": yy}, f(X, yy.astype(np.float32)))
    check(f"WHERE/{dt}", [{"id": "c", "uop": "CMPLT", "src": ["x", "y"]}, {"id": "r", "uop": "WHERE", "src": ["c", "x", "y"]}],
          {"x": x, "y": y}, np.where(X < Y, X, Y))
    for op, f in {"SUM": np.sum, "MAX": np.max, "MIN": np.min}.items():
        for axes in ([0], [1], [0, 1]):
            check(f"REDUCE {op} {axes}/{dt}",
                  [{"id": "r", "uop": "REDUCE", "src": ["x"], "arg": {"op": op, "axes": axes, "dtype": "fp32"}}],
                  {"x": x}, f(X, axis=tuple(axes)))
    check(f"CAST/{dt}->fp16", [{"id": "r", "uop": "CAST", "src": ["x"], "arg": {"to": "fp16"}}], {"x": x},
          X.astype(np.float16))
    check(f"CAST/{dt}->i32", [{"id": "r", "uop": "CAST", "src": ["x"], "arg": {"to": "i32"}}], {"x": x},
          np.trunc(X).astype(np.int32))

# movement ops on a tagged input: each output element shows which input it read
t = np.arange(2 * 3 * 5, dtype=np.float32).reshape(2, 3, 5)
mv = [
    ("RESHAPE", {"result_shape": [6, 5]}, t.reshape(6, 5)),
    ("PERMUTE", {"perm": [2, 0, 1]}, t.transpose(2, 0, 1)),
    ("PAD", {"pad": [[0, 1], [2, 0], [1, 1]], "value": -1}, np.pad(t, ((0, 1), (2, 0), (1, 1)), constant_values=-1)),
    ("SHRINK", {"lo": [1, 0, 1], "hi": [2, 3, 5], "step": [1, 2, 3]}, t[1:2, 0:3:2, 1:5:3]),
    ("FLIP", {"axes": [0, 2]}, t[::-1, :, ::-1]),
    ("POOL", {"kernel": [2, 3], "stride": [1, 2]}, np.lib.stride_tricks.sliding_window_view(t, (2, 3), axis=(1, 2))[:, :, ::2]),
    ("VIEW", {"result_shape": [2, 15], "index_map": ["i0", "i1 floordiv 5", "i1 % 5"]}, t.reshape(2, 15)),
]
for op, arg, want in mv:
    check(f"{op} (movement)", [{"id": "r", "uop": op, "src": ["t"], "arg": arg}], {"t": t}, want)
e = np.arange(3, dtype=np.float32).reshape(3, 1)
check("EXPAND", [{"id": "r", "uop": "EXPAND", "src": ["e"], "arg": {"result_shape": [2, 3, 4]}}], {"e": e},
      np.broadcast_to(e, (2, 3, 4)))

# i32 and bool
a = rng.integers(-50, 50, (4, 6)).astype(np.int32)
b = rng.integers(1, 9, (4, 6)).astype(np.int32)
for op, want in {"ADD": a + b, "SUB": a - b, "MUL": a * b, "MAX": np.maximum(a, b), "MIN": np.minimum(a, b), "NEG": -a}.items():
    src = ["a"] if op == "NEG" else ["a", "b"]
    check(f"{op}/i32", [{"id": "r", "uop": op, "src": src}], {"a": a, "b": b} if op != "NEG" else {"a": a}, want)
check("REDUCE SUM/i32", [{"id": "r", "uop": "REDUCE", "src": ["a"], "arg": {"op": "SUM", "axes": [1], "dtype": "i32"}}],
      {"a": a}, a.sum(1).astype(np.int32))
mask = rng.integers(0, 2, (4, 6)).astype(np.bool_)
check("WHERE bool input", [{"id": "r", "uop": "WHERE", "src": ["m", "a", "b"]}], {"m": mask, "a": a, "b": b}, np.where(mask, a, b))
idx = rng.integers(0, 6, (4, 3)).astype(np.int32)
xf = rng.standard_normal((4, 6)).astype(np.float32)
check("GATHER", [{"id": "r", "uop": "GATHER", "src": ["xf", "idx"], "arg": {"axis": 1}}], {"xf": xf, "idx": idx},
      np.take_along_axis(xf, idx, 1))

# implicit broadcasting and immediates are normalized
u = rng.standard_normal((3, 1, 5)).astype(np.float32)
v = rng.standard_normal((4, 1)).astype(np.float32)
check("broadcast 3-way", [{"id": "r", "uop": "MUL", "src": ["u", "v"]}], {"u": u, "v": v}, u * v)
check("immediate", [{"id": "r", "uop": "SUB", "src": [2.0, "u"]}], {"u": u}, 2.0 - u)
h = rng.standard_normal((3, 5)).astype(np.float16)
w = rng.standard_normal((3, 5)).astype(np.float32)
check("fp16 widened to fp32", [{"id": "r", "uop": "ADD", "src": ["h", "w"]}], {"h": h, "w": w}, h.astype(np.float32) + w)

# transcendentals over their whole range and at the special values (the CPU
# backend computes them inline, vectorized); within a few ulp of numpy
with np.errstate(all="ignore"):
    wide = np.concatenate([np.linspace(-200, 200, 4001), np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 88.7, 89.0,
                                                                   -87.4, -103.5, 127.9, 128.0, -149.5])]).astype(np.float32)
    W = wide.astype(np.float64)
    pos = np.concatenate([np.geomspace(1e-44, 3e38, 3001), np.array([0.0, -0.0, -1.0, np.inf, -np.inf, np.nan, 1.0])])
    pos = pos.astype(np.float32)
    Pw = pos.astype(np.float64)
    # GELU as fp32 evaluates 0.5 x (1 + erf(x / sqrt 2)): NaN at -inf, 1 + erf cancels for x << 0
    g32 = np.float32(0.5) * wide * (np.float32(1) + erf(W / np.sqrt(2)).astype(np.float32))
    for op, want, x in (("EXP", np.exp(W), wide), ("EXP2", np.exp2(W), wide), ("LOG2", np.log2(Pw), pos),
                        ("GELU", g32, wide)):
        want = np.asarray(want).astype(np.float32).astype(np.float64)  # as fp32 represents it
        ins = [inp("x", "fp32", x.shape)]
        model = write_model(ins + [{"id": "r", "uop": op, "src": ["x"]}], ["r"])
        for backend in BACKENDS:
            p, d = run(model, {"x": x}, backend=backend)
            label = f"{op} special values [{backend}]"
            if p.returncode != 0:
                s.check(label, False, p.stderr)
                continue
            got = np.load(f"{d}/r.npy").astype(np.float64)
            same_class = np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(got[np.isinf(want)], want[np.isinf(want)])
            fin = np.isfinite(want) & (np.abs(want) > 1e-37)
            rel = np.abs(got[fin] - want[fin]) / np.abs(want[fin])
            tiny = np.isfinite(want) & ~fin
            ok = same_class and rel.max() < 4e-7 and np.all(np.abs(got[tiny] - want[tiny]) < 1e-37)
            if op == "GELU":  # erf to 1.2e-7 absolute, scaled by x
                xf = np.isfinite(want)
                ok = same_class and np.all(np.abs(got[xf] - want[xf]) <= 1e-6 * np.maximum(1, np.abs(W[xf])))
            s.check(label, ok, f"nan/inf classes equal: {same_class}, max rel err {rel.max():.3g}")

# long rows: sums, maxima and minima split across vector lanes; NaN propagates
rows = rng.standard_normal((6, 1531)).astype(np.float32)
rows[2, 700] = np.nan
rows[4, 3] = np.inf
R64 = rows.astype(np.float64)
for op, f in {"SUM": np.sum, "MAX": np.max, "MIN": np.min}.items():
    check(f"REDUCE {op} long rows with NaN", [{"id": "r", "uop": "REDUCE", "src": ["x"], "arg": {"op": op, "axes": [1], "dtype": "fp32"}}],
          {"x": rows}, f(R64, axis=1))
softmax = [{"id": "m0", "uop": "REDUCE", "src": ["x"], "arg": {"op": "MAX", "axes": [1], "dtype": "fp32"}},
           {"id": "m", "uop": "RESHAPE", "src": ["m0"], "arg": {"result_shape": [6, 1]}},
           {"id": "d", "uop": "SUB", "src": ["x", "m"]}, {"id": "e", "uop": "EXP", "src": ["d"]},
           {"id": "z0", "uop": "REDUCE", "src": ["e"], "arg": {"op": "SUM", "axes": [1], "dtype": "fp32"}},
           {"id": "z", "uop": "RESHAPE", "src": ["z0"], "arg": {"result_shape": [6, 1]}},
           {"id": "r", "uop": "FDIV", "src": ["e", "z"]}]
clean = rng.standard_normal((6, 1531)).astype(np.float32) * 4
C64 = clean.astype(np.float64)
E = np.exp(C64 - C64.max(1, keepdims=True))
check("softmax long rows", softmax, {"x": clean}, E / E.sum(1, keepdims=True), atol=1e-6)
s.close()
