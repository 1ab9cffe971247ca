#!/usr/bin/env python3
"""test_shapeset_kinds.py — issue 25's remaining per-binding kernel kinds as
one ShapeSet object each (`harp run --shapeset`, a cache of its own: the
first binding builds the object, every later one, in a new process, builds
nothing and says "one object for the box"), each output against numpy at
bindings that include odd sizes (the vector tails):
  - a row softmax over its row length L (softmax_rows.json; cgen_softmax's
    cols_expr: the row loops, their tails and the scratch read at run time),
    and over its rows and row length at once; a QDQ softmax (ONNX, its
    steps in the row passes) over L against onnxruntime;
  - a GEMM over its columns N (cgen_gemm_spec.n_expr: C's and B's row
    stride and the column tails per run), with a bias along N, a ReLU and a
    residual laid out as C; B transposed (read along K); in fp16 (a row
    repeated: A's row stride 0); multiplying in bf16 (--precision bf16) a
    compile per binding (the bf16 template takes N as a constant);
  - a GEMM over its depth K (k_expr: A's row stride and the KC blocks per
    run; the box crosses the template's KC of 256), and over N and K at once.
A binding outside the box is refused before any kernel runs."""
import os
import re
import subprocess
import tempfile

import numpy as np

from harp_test import HARP, MODELS, Suite

s = Suite("shapeset_kinds")
rng = np.random.default_rng(25)
D = tempfile.mkdtemp()

GEMM_N = """graph<N=48> main(a: f32[12, 40], b: f32[40, N], bias: f32[N], r: f32[12, N]) -> (c: f32[12, N]) {
    c = relu(a @ b + bias) + r
    return c
}
"""
GEMM_N16 = """graph<N=48> main(a: f16[1, 64], b: f16[64, N]) -> (c: f16[32, N]) {
    c = expand(a, [32, 64]) @ b
    return c
}
"""
GEMM_NT = """graph<N=48> main(a: f32[12, 40], w: f32[N, 40]) -> (c: f32[12, N]) {
    c = a @ permute(w, [1, 0])
    return c
}
"""
GEMM_K = """graph<K=40> main(a: f32[13, K], b: f32[K, 24]) -> (c: f32[13, 24]) {
    c = a @ b
    return c
}
"""
GEMM_NK = """graph<N=48, K=40> main(a: f32[20, K], b: f32[K, N]) -> (c: f32[20, N]) {
    c = a @ b
    return c
}
"""


def model(name, text):
    path = os.path.join(D, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def run(path, inputs, box, cache, extra=()):
    out = tempfile.mkdtemp()
    args = [HARP, "run", path, "--out", out, "--time-stages", *extra]
    for b in box.split(","):
        args += ["--shapeset", b]
    for name, a in inputs.items():
        f = os.path.join(out, f"in_{name}.npy")
        np.save(f, a)
        args += ["--input", f"{name}={f}"]
    p = subprocess.run(args, capture_output=True, text=True, env=dict(os.environ, HARP_CACHE_DIR=cache))
    return p, out


def built(p):
    m = re.search(r"shapeset: (\d+) object\(s\), (\d+) built by the C compiler", p.stderr)
    return (int(m.group(1)), int(m.group(2))) if m else None


def check_box(tag, path, box, cases, out_name, rtol, atol):
    """Each (label, inputs, want) of cases run under box on one cache: one object, built by the
    first case only; the output against want."""
    cache = tempfile.mkdtemp()
    for i, (label, inputs, want) in enumerate(cases):
        p, out = run(path, inputs, box, cache)
        s.check(f"{tag} {label}: one object for the box", p.returncode == 0 and "one object for the box" in p.stderr
                and "compile per binding" not in p.stderr, p.stderr[-500:])
        s.check(f"{tag} {label}: C compiles {1 if i == 0 else 0}", built(p) == (1, 1 if i == 0 else 0), str(built(p)))
        got = np.load(os.path.join(out, f"{out_name}.npy")) if p.returncode == 0 else None
        s.check(f"{tag} {label}: numpy's numbers", got is not None and got.shape == want.shape
                and bool(np.allclose(got.astype(np.float64), want, rtol=rtol, atol=atol)),
                "" if got is None or got.shape != want.shape else f"max err {np.max(np.abs(got - want))}")
    return cache


def softmax(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


# (1) the softmax's row length: L in 3..70 (R 5), then R and L together
SM = os.path.join(MODELS, "softmax_rows.json")
cases = []
for L in (70, 3, 17, 33, 64, 5):
    x = (rng.standard_normal((5, L)) * 3).astype(np.float32)
    cases.append((f"L={L}", {"X": x}, softmax(x)))
cache = check_box("softmax over L", SM, "L=3..70", cases, "out", 1e-5, 1e-6)
x = rng.standard_normal((5, 71)).astype(np.float32)
p, out = run(SM, {"X": x}, "L=3..70", cache)
s.check("softmax over L: L=71 refused before any kernel", p.returncode != 0 and "outside the compiled ShapeSet" in p.stderr
        and not os.path.exists(os.path.join(out, "out.npy")), p.stderr[-400:])
cases = []
for R, L in ((40, 70), (2, 3), (7, 29), (33, 1000)):
    x = rng.standard_normal((R, L)).astype(np.float32)
    cases.append((f"R={R} L={L}", {"X": x}, softmax(x)))
check_box("softmax over R, L", SM, "R=2..40,L=3..1000", cases, "out", 1e-5, 1e-6)

# a QDQ softmax (an int8 BERT's probabilities: the dequantize / requantize steps in the row passes) over
# its row length, against onnxruntime: within one output step, nearly every code equal
try:
    import onnx
    import onnxruntime as ort
except ImportError:
    ort = None
    print("onnx / onnxruntime not installed: the QDQ softmax skipped")
if ort is not None:
    from test_onnx_qsoftmax import qdq_softmax
    path = qdq_softmax((3, 5, 77), 0.07, 119, 0.125, 0.0418, 119, 1 / 254, 0)
    m = onnx.load(path)
    m.graph.input[0].type.tensor_type.shape.dim[2].dim_param = "L"
    path = os.path.join(D, "qsoftmax_l.onnx")
    onnx.save(m, path)
    cache = tempfile.mkdtemp()
    for i, L in enumerate((130, 3, 77, 128)):
        x = rng.uniform(-10, 10, size=(3, 5, L)).astype(np.float32)
        want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        p, out = run(path, {"x": x}, "L=3..130", cache)
        s.check(f"qdq softmax L={L}: one object, C compiles {1 if i == 0 else 0}", p.returncode == 0
                and "one object for the box" in p.stderr and built(p) == (1, 1 if i == 0 else 0), p.stderr[-500:])
        got = np.load(os.path.join(out, "out.npy")) if p.returncode == 0 else None
        diff = np.abs(got.astype(np.float64) - want) if got is not None and got.shape == want.shape else np.array([np.inf])
        s.check(f"qdq softmax L={L}: onnxruntime's codes", diff.max() <= 1.0001 / 254 and float((diff == 0).mean()) >= 0.98,
                f"max {diff.max()}")

# (2) a GEMM's columns N: bias along N, ReLU, a residual like C
a = rng.standard_normal((12, 40)).astype(np.float32)
cases = []
for n in (100, 8, 37, 65, 2):
    b, bias, r = (rng.standard_normal(sh).astype(np.float32) for sh in ((40, n), (n,), (12, n)))
    want = np.maximum(a.astype(np.float64) @ b + bias, 0) + r
    cases.append((f"N={n}", {"a": a, "b": b, "bias": bias, "r": r}, want))
check_box("gemm over N", model("gemm_n.harp", GEMM_N), "N=2..100", cases, "c", 1e-4, 1e-4)
# multiplying in bf16 (--precision bf16) the template takes N and K as constants: a compile per binding (its
# bf16 kernel), not one object of loop nests; the numbers at bf16's rounding
cache = tempfile.mkdtemp()
for n in (100, 37):
    b, bias, r = (rng.standard_normal(sh).astype(np.float32) for sh in ((40, n), (n,), (12, n)))
    p, out = run(model("gemm_n.harp", GEMM_N), {"a": a, "b": b, "bias": bias, "r": r}, "N=2..100", cache, ["--precision", "bf16"])
    s.check(f"bf16 gemm over N={n}: a compile per binding", p.returncode == 0 and "a compile per binding" in p.stderr,
            p.stderr[-400:])
    got = np.load(os.path.join(out, "c.npy")) if p.returncode == 0 else None
    want = np.maximum(a.astype(np.float64) @ b + bias, 0) + r
    s.check(f"bf16 gemm over N={n}: numpy's numbers at bf16", got is not None and got.shape == want.shape
            and bool(np.allclose(got, want, rtol=3e-2, atol=3e-1)), "" if got is None else f"max err {np.max(np.abs(got - want))}")

cases = []
for n in (90, 8, 51):
    w = rng.standard_normal((n, 40)).astype(np.float32)
    cases.append((f"N={n}", {"a": a, "w": w}, a.astype(np.float64) @ w.T))
check_box("gemm over N, B transposed", model("gemm_nt.harp", GEMM_NT), "N=8..90", cases, "c", 1e-4, 1e-4)
a16 = rng.standard_normal((1, 64)).astype(np.float16)
cases = []
for n in (48, 8, 19, 33):
    b = rng.standard_normal((64, n)).astype(np.float16)
    want = np.repeat(a16.astype(np.float64) @ b.astype(np.float64), 32, axis=0)
    cases.append((f"N={n}", {"a": a16, "b": b}, want))
check_box("fp16 gemm over N, A's rows repeated", model("gemm_n16.harp", GEMM_N16), "N=8..48", cases, "c", 2e-2, 2e-2)

# (3) its depth K (the box crosses KC = 256), then N and K at once
cases = []
for k in (300, 3, 257, 129, 256):
    a, b = rng.standard_normal((13, k)).astype(np.float32), rng.standard_normal((k, 24)).astype(np.float32)
    cases.append((f"K={k}", {"a": a, "b": b}, a.astype(np.float64) @ b))
check_box("gemm over K", model("gemm_k.harp", GEMM_K), "K=3..300", cases, "c", 1e-4, 1e-4)
cases = []  # an upper corner of whole 16-deep steps: the A packer's k tail still there for the others
for k in (64, 5, 21):
    a, b = rng.standard_normal((13, k)).astype(np.float32), rng.standard_normal((k, 24)).astype(np.float32)
    cases.append((f"K={k}", {"a": a, "b": b}, a.astype(np.float64) @ b))
check_box("gemm over K to 64", model("gemm_k.harp", GEMM_K), "K=5..64", cases, "c", 1e-4, 1e-4)
cases = []
for n, k in ((70, 300), (5, 3), (33, 17), (64, 260)):
    a, b = rng.standard_normal((20, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    cases.append((f"N={n} K={k}", {"a": a, "b": b}, a.astype(np.float64) @ b))
check_box("gemm over N, K", model("gemm_nk.harp", GEMM_NK), "N=5..70,K=3..300", cases, "c", 1e-4, 1e-4)

s.close()
