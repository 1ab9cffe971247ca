"""Every uop through `harp run` against numpy, on random data with odd sizes,
in fp32 and fp16 (computed in fp32 and rounded, as the interpreter does).
The elementwise ops are the op table's (`harp ops --json`): each needs a
numpy reference in REF, and runs in fp32, fp16 and (when its dtype rule takes
integers) i32 on every backend, on cpu as tier 0 (HARP_TIER0=force) and as
the compiled C, both the vector map and the generic loops (the cases of a
section in one model: check, flush), and on CUDA (the elementwise and the generic kernels) on the SIMT
simulator, the translation units compiled by NVRTC where there is one."""
import json
import math
import os
import subprocess

import numpy as np

from harp_test import BACKENDS, HARP, Suite, close, run, write_model

s = Suite("uops")
rng = np.random.default_rng(7)
erf = np.vectorize(math.erf)


def inp(name, dtype, shape):
    return {"id": name, "uop": "INPUT", "arg": {"tensor_id": name, "dtype": dtype, "shape": list(shape)}}


def same_bits(got, want):
    """Exactly equal, NaN to NaN and -0 to -0 (want rounded to got's dtype first)."""
    want = np.asarray(want).astype(got.dtype)
    nan = np.isnan(want)
    ok = np.array_equal(np.isnan(got), nan) and np.array_equal(got[~nan], want[~nan]) and \
        np.array_equal(np.signbit(got[~nan]), np.signbit(want[~nan]))
    return ok, "" if ok else f"{got.reshape(-1)[:12]} != {want.reshape(-1)[:12]}"


def judge_of(want, atol=1e-3, exact=False):
    """The verdict on an output against want: integers and booleans equal,
    exact: bit for bit, else within atol."""
    def judge(got):
        if got.dtype.kind in "ib":
            return np.array_equal(got, want), f"{got} != {want}"
        return same_bits(got, want) if exact else close(got, want, atol=atol)
    return judge


def run_env(model, inputs, backend, env):
    """run() with env added to the environment for that one process."""
    os.environ.update(env)
    try:
        return run(model, inputs, backend=backend)
    finally:
        for k in env:
            os.environ.pop(k, None)


def verdict(label, p, d, out, judge):
    """A check of `harp run`'s output out (in d) by judge."""
    if p.returncode != 0:
        s.check(label, False, p.stderr[-1500:])
    else:
        s.check(label, *judge(np.load(f"{d}/{out}.npy")))


# The compiled C's cases (flush() runs them, all in one model): a `harp run`
# on cpu answers its first run on tier 0 and builds the object after, unused
# (harp_test.py), so a model per case would check tier 0 and compile its C
# for nothing.
BATCH = []


def check(name, uops, inputs, want, dtype="fp32", out="r", atol=1e-3, exact=False, loops=False, judge=None):
    """Run the model against want (judge: the verdict, else judge_of's) on
    every backend, cpu as tier 0 (HARP_TIER0=force: libharp's kernels, no C
    compiler); its compiled C joins BATCH, with loops also with the
    templates off (HARP_NO_TEMPLATES), so that an elementwise op runs as the
    generic loops' C as well as the vector map's."""
    judge = judge or judge_of(want, atol, exact)
    ins = [inp(k, {np.float16: "fp16", np.float32: "fp32", np.int32: "i32", np.bool_: "bool"}[v.dtype.type], v.shape)
           for k, v in inputs.items()]
    model = write_model(ins + uops, [out])
    for backend in BACKENDS:
        p, d = run_env(model, inputs, backend, {"HARP_TIER0": "force"} if backend == "cpu" else {})
        verdict(f"{name} [{backend}{', tier 0' if backend == 'cpu' else ''}]", p, d, out, judge)
    if "cpu" in BACKENDS:
        BATCH.append((name, ins + uops, inputs, out, judge, loops))


def renamed(u, tag):
    """Uop u (a copy) with its id, sources and input tensor prefixed by tag."""
    ren = lambda v: f"{tag}{v}" if isinstance(v, str) else v  # an immediate stays
    u = json.loads(json.dumps(u))
    u["id"] = ren(u["id"])
    if "src" in u:
        u["src"] = [ren(v) for v in u["src"]]
    if u["uop"] == "INPUT":
        u["arg"]["tensor_id"] = ren(u["arg"]["tensor_id"])
    return u


def flush():
    """BATCH's cases as one model (case i's names prefixed c<i>_, its output
    one of the model's), its compiled C run on cpu (HARP_TIER0=off: the
    object from the first run), and the cases with loops once more with the
    templates off (the generic loops' C); each output judged as its case's."""
    for plain in (False, True):
        cases = [(f"c{i}_", c) for i, c in enumerate(BATCH) if not plain or c[5]]
        if not cases:
            continue
        uops = [renamed(u, tag) for tag, c in cases for u in c[1]]
        feeds = {tag + k: v for tag, c in cases for k, v in c[2].items()}
        model = write_model(uops, [tag + c[3] for tag, c in cases])
        p, d = run_env(model, feeds, "cpu", {"HARP_TIER0": "off", **({"HARP_NO_TEMPLATES": "1"} if plain else {})})
        for tag, (name, _, _, out, judge, _) in cases:
            verdict(f"{name} [cpu, compiled{', generic loops' if plain else ''}]", p, d, tag + out, judge)
    BATCH.clear()


# The elementwise uops come from the op table (`harp ops --json`), each with
# its numpy reference here: an op the table gains without one fails below.
# REF[op] = (numpy function, operand domains, exact); domains: "x", "y"
# normal, "p" positive, "h" halves, signed zeros, infinities and NaN, "e" y
# with some elements equal to x.
TABLE = json.loads(subprocess.run([HARP, "ops", "--json"], capture_output=True, text=True, check=True).stdout)
EW = [o for o in TABLE if o["class"] in ("unary", "binary")]
REF = {
    "NEG": (np.negative, "x", False), "EXP2": (np.exp2, "x", False), "EXP": (np.exp, "x", False),
    "RELU": (lambda a: np.maximum(a, 0), "x", False), "GELU": (lambda a: 0.5 * a * (1 + erf(a / np.sqrt(2))), "x", False),
    "LOG2": (np.log2, "p", False), "SQRT": (np.sqrt, "p", False), "RSQRT": (lambda a: 1 / np.sqrt(a), "p", False),
    "RECIP": (lambda a: 1 / a, "p", False),
    "FLOOR": (np.floor, "h", True), "CEIL": (np.ceil, "h", True), "ROUND": (np.round, "h", True),  # halves to even
    "SIGN": (np.sign, "h", True),
    "ADD": (np.add, "xy", False), "SUB": (np.subtract, "xy", False), "MUL": (np.multiply, "xy", False),
    "FDIV": (np.divide, "xp", False), "MAX": (np.maximum, "xy", False), "MIN": (np.minimum, "xy", False),
    "CMPLT": (np.less, "xe", True), "CMPEQ": (np.equal, "xe", True), "CMPNE": (np.not_equal, "xe", True),
}
for o in EW:
    s.check(f"{o['name']}: a numpy reference in test_uops.py", o["name"] in REF, "the op table has it, REF does not")
EW = [o for o in EW if o["name"] in REF]

for dt, npdt in (("fp32", np.float32), ("fp16", np.float16)):
    x = (rng.standard_normal((5, 7)) * 2).astype(npdt)
    y = (rng.standard_normal((5, 7)) * 2).astype(npdt)
    pos = (np.abs(rng.standard_normal((5, 7))) + 0.1).astype(npdt)
    e = y.copy()
    e[0] = x[0]  # some equal elements
    # halves (to even for ROUND), signed zeros, infinities, NaN, subnormals (fp32)
    h = np.concatenate([np.array([0.5, -0.5, 1.5, -1.5, 2.5, -2.5, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-45]),
                        x.reshape(-1)[:23]]).astype(npdt).reshape(5, 7)
    data = {"x": x, "y": y, "p": pos, "e": e, "h": h}
    X, Y = x.astype(np.float32), y.astype(np.float32)
    for o in EW:
        op = o["name"]
        fn, dom, exact = REF[op]
        names = [dom[0]] if o["arity"] == 1 else list(dom)
        args = [data[k].astype(np.float32) for k in names]
        check(f"{op}/{dt}", [{"id": "r", "uop": op, "src": names}], {k: data[k] for k in names}, fn(*args),
              exact=exact, loops=True)
    check(f"WHERE/{dt}", [{"id": "c", "uop": "CMPLT", "src": ["x", "y"]}, {"id": "r", "uop": "WHERE", "src": ["c", "x", "y"]}],
          {"x": x, "y": y}, np.where(X < Y, X, Y))
    # MULADD rounds once: c = -fl(a b) leaves fma's a b - fl(a b), where a
    # separate multiply and add give 0; the rest random (a b + c exact in
    # float64 for operands within [1/4, 8] in magnitude, so the reference
    # rounded once to fp32 is fma's)
    ma = np.where(np.abs(x) < 0.25, 0.25, np.clip(x, -8, 8)).astype(npdt).astype(np.float32)
    mb = np.where(np.abs(y) < 0.25, -0.5, np.clip(y, -8, 8)).astype(npdt).astype(np.float32)
    ma[0] = 1 + (np.arange(7, dtype=np.float32) + 1) * 2.0**-11 + 2.0**-22
    mb[0] = 1 + np.arange(7, dtype=np.float32)[::-1] * 2.0**-13 + 3 * 2.0**-23
    mc = (-(ma * mb)).astype(np.float32)  # fl32(a b): fma leaves the rounding error
    mc[1:] = np.where(np.abs(mc[1:]) < 0.25, 1.0, mc[1:] * 0.75)
    if npdt == np.float16:
        ma, mb, mc = (v.astype(np.float16) for v in (ma, mb, mc))
    want = (ma.astype(np.float64) * mb + mc).astype(np.float32)
    if npdt == np.float32:
        s.check("MULADD data: fma differs from mul+add", np.all(want[0] != ma[0] * mb[0] + mc[0]), "a row-0 case does not")
    check(f"MULADD/{dt}", [{"id": "r", "uop": "MULADD", "src": ["ma", "mb", "mc"]}],
          {"ma": ma.astype(npdt), "mb": mb.astype(npdt), "mc": mc.astype(npdt)}, want, exact=True, loops=True)
    for op, f in {"SUM": np.sum, "MAX": np.max, "MIN": np.min}.items():
        for axes in ([0], [1], [0, 1]):
            check(f"REDUCE {op} {axes}/{dt}",
                  [{"id": "r", "uop": "REDUCE", "src": ["x"], "arg": {"op": op, "axes": axes, "dtype": "fp32"}}],
                  {"x": x}, f(X, axis=tuple(axes)))
    check(f"CAST/{dt}->fp16", [{"id": "r", "uop": "CAST", "src": ["x"], "arg": {"to": "fp16"}}], {"x": x},
          X.astype(np.float16))
    check(f"CAST/{dt}->i32", [{"id": "r", "uop": "CAST", "src": ["x"], "arg": {"to": "i32"}}], {"x": x},
          np.trunc(X).astype(np.int32))
    flush()  # a dtype's cases in one model

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

# i32: every elementwise op whose dtype rule takes integers (the op table's)
a = rng.integers(-50, 50, (4, 6)).astype(np.int32)
b = rng.integers(1, 9, (4, 6)).astype(np.int32)
b[0] = a[0]
for o in EW:
    if o["float_only"]:
        continue
    op = o["name"]
    fn = REF[op][0]
    src = ["a"] if o["arity"] == 1 else ["a", "b"]
    ab = {"a": a, "b": b}
    check(f"{op}/i32", [{"id": "r", "uop": op, "src": src}], {k: ab[k] for k in src}, fn(*[ab[k] for k in src]), loops=True)
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

        def special(got, op=op, want=want):
            """Within a few ulp of want, NaN and infinities where want has them."""
            got = got.astype(np.float64)
            same_class = np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(got[np.isinf(want)], want[np.isinf(want)])
            fin = np.isfinite(want) & (np.abs(want) > 1e-37)
            rel = np.abs(got[fin] - want[fin]) / np.abs(want[fin])
            tiny = np.isfinite(want) & ~fin
            ok = same_class and rel.max() < 4e-7 and np.all(np.abs(got[tiny] - want[tiny]) < 1e-37)
            if op == "GELU":  # erf to 1.2e-7 absolute, scaled by x
                xf = np.isfinite(want)
                ok = same_class and np.all(np.abs(got[xf] - want[xf]) <= 1e-6 * np.maximum(1, np.abs(W[xf])))
            return ok, f"nan/inf classes equal: {same_class}, max rel err {rel.max():.3g}"
        check(f"{op} special values", [{"id": "r", "uop": op, "src": ["x"]}], {"x": x}, want, judge=special)

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
flush()  # the rest: movement, i32, broadcasting, special values, long rows
# ---- CUDA: every elementwise op of the table in one translation unit --------------------------
# fp32 (the elementwise kernel: the cuda text), fp32 of rank 9 and i32 (the
# generic kernels: the gpu and gpu_int text), each run on the CPU SIMT
# simulator against numpy and compiled with NVRTC for sm_80 and sm_90a (when
# there is one).
try:
    import cuda_sim
except ImportError:
    cuda_sim = None


def cuda_all(label, ops, data, env):
    names = sorted({k for o in ops for k in REF[o["name"]][1][:o["arity"]]})
    uops = [inp(k, {np.float32: "fp32", np.int32: "i32"}[data[k].dtype.type], data[k].shape) for k in names]
    uops += [{"id": f"r_{o['name']}", "uop": o["name"], "src": list(REF[o["name"]][1][:o["arity"]])} for o in ops]
    model = write_model(uops, [f"r_{o['name']}" for o in ops])
    os.environ.update(env)
    dumps = {t: cuda_sim.dump(model, t) for t in ("sm80", "sm90")}
    for k in env:
        os.environ.pop(k, None)
    for t, (p, d) in dumps.items():
        s.check(f"CUDA {label} {t}: harp dump --dump gpu,cu", p.returncode == 0, p.stderr[-400:])
        if p.returncode:
            return
        ok, log = cuda_sim.nvrtc_ok(open(os.path.join(d, "model.cu")).read(), {"sm80": "sm_80", "sm90": "sm_90a"}[t])
        if ok is not None:
            s.check(f"CUDA {label} {t}: NVRTC compiles model.cu", ok, log[-600:])
    if not cuda_sim.have_gxx():
        return
    got, err = cuda_sim.run(dumps["sm80"][1], {k: data[k] for k in names})
    s.check(f"CUDA {label}: runs on the simulator", err is None, err)
    for o in ops if err is None else ():
        fn, dom, exact = REF[o["name"]]
        want = fn(*[data[k] for k in dom[:o["arity"]]])
        g = got[f"r_{o['name']}"]
        what = f"CUDA {label}: {o['name']} matches numpy"
        if g.dtype.kind in "ib":
            s.check(what, np.array_equal(g, want), f"{g} != {want}")
        else:
            s.check(what, *(same_bits(g, want) if exact else close(g, want, atol=1e-5)))


if cuda_sim:
    x, y = rng.standard_normal((5, 7)).astype(np.float32) * 2, rng.standard_normal((5, 7)).astype(np.float32) * 2
    e = y.copy()
    e[0] = x[0]
    h = np.concatenate([np.array([0.5, -0.5, 1.5, -1.5, 2.5, -2.5, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-45], np.float32),
                        x.reshape(-1)[:23]]).reshape(5, 7)
    fdata = {"x": x, "y": y, "e": e, "h": h, "p": np.abs(x) + np.float32(0.1)}
    cuda_all("fp32", EW, fdata, {})
    # rank 9, past the elementwise kernel's 8: the generic kernels' gpu text
    cuda_all("fp32 rank 9", EW, {k: v.reshape((1,) * 7 + v.shape) for k, v in fdata.items()}, {})
    ints = [o for o in EW if not o["float_only"]]
    cuda_all("i32", ints, {"x": a[:, :5].copy(), "y": b[:, :5].copy(), "e": b[:, :5].copy(), "h": a[:, :5].copy()}, {})
s.close()
