"""Minimal programs for the bugs the differential fuzzer found
(test_fuzz_backends.py, scripts/fuzz.py), each checked against numpy on the
interpreter and the compiled backends."""
import os
import tempfile

import numpy as np

import cuda_sim
from harp_test import BACKENDS, Suite, close, run

s = Suite("fuzz_regressions")
rng = np.random.default_rng(5)
d = tempfile.mkdtemp(prefix="harp_fr_")


def case(name, text, feeds, want, tol=1e-4, cuda=False):
    """On every backend; with cuda, also the sm80 translation unit on the
    CPU SIMT simulator (needs g++), at --precision fp32 (strict: the fp32
    tolerances hold; the default TF32 is about 5e-4 off)."""
    path = os.path.join(d, f"{name}.harp")
    with open(path, "w") as f:
        f.write(text)
    if cuda and cuda_sim.have_gxx():
        p, gd = cuda_sim.dump(path, "sm80", extra=("--precision", "fp32"))
        s.check(f"{name} [sm80] dumps", p.returncode == 0, p.stderr)
        got, err = cuda_sim.run(gd, feeds) if p.returncode == 0 else ({}, "no dump")
        s.check(f"{name} [sm80] runs", err is None, err)
        for k, w in want.items():
            if k in (got or {}):
                ok, detail = close(got[k], w, rtol=tol, atol=tol)
                s.check(f"{name} [sm80] {k} vs numpy", ok, detail)
    for be in dict.fromkeys(BACKENDS + ["regions"]):
        p, out = run(path, feeds, backend=be)
        s.check(f"{name} [{be}] runs", p.returncode == 0, p.stderr)
        if p.returncode == 0:
            for k, w in want.items():
                ok, detail = close(np.load(os.path.join(out, f"{k}.npy")), w, rtol=tol, atol=tol)
                s.check(f"{name} [{be}] {k} vs numpy", ok, detail)


def f32(*shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


# A '(' opening a line is the next statement (a tuple assignment), not a
# call of the name that ended the line before: `y = x` then `(a, b) = f(y)`
# parsed as `y = x(a, b) ...` and failed with a ParseError.
x = f32(4)
case("tuple_after_name", """graph two(x: f32[4]) -> (a: f32[4], b: f32[4]) {
    return x * 2.0, x + 1.0
}
graph main(x: f32[4]) -> (c: f32[4], e: f32[4]) {
    y = x
    (c, e) = two(y)
    return c, e
}
""", {"x": x}, {"c": x * 2, "e": x + 1})

# A read that meets two pad values: concat (a PAD with 0 of each piece) of a
# tensor padded with -1.  The loop-nest generator refused it (Unsupported:
# "an access reads two different pad values"); each further value now gets
# its own guard (in the CPU and the CUDA loop nests).
x, y = f32(3, 4), f32(2, 5)
case("concat_of_pad", """graph main(x: f32[3, 4], y: f32[2, 5]) -> (c: f32[5, 5]) {
    p = pad(x, [[0, 0], [1, 0]], value=-1.0)
    c = concat([p, y], axis=0)
    return c
}
""", {"x": x, "y": y}, {"c": np.concatenate([np.pad(x, [(0, 0), (1, 0)], constant_values=-1), y], 0)}, cuda=True)
x, y = f32(3, 4), f32(3, 2)
case("concat_of_two_pads", """graph main(x: f32[3, 4], y: f32[3, 2]) -> (c: f32[3, 10]) {
    c = concat([pad(x, [[0, 0], [1, 1]], value=0.5), pad(y, [[0, 0], [0, 2]], value=-2.0)], axis=1) * 2.0
    return c
}
""", {"x": x, "y": y}, {"c": 2 * np.concatenate([np.pad(x, [(0, 0), (1, 1)], constant_values=0.5),
                                                np.pad(y, [(0, 0), (0, 2)], constant_values=-2)], 1)})


def conv2d(x, w):
    """Valid cross-correlation, NCHW / OIHW, stride 1."""
    n, c, h, ww = x.shape
    o, _, kh, kw = w.shape
    y = np.zeros((n, o, h - kh + 1, ww - kw + 1))
    for i in range(kh):
        for j in range(kw):
            y += np.einsum("nchw,oc->nohw", x[:, :, i:i + h - kh + 1, j:j + ww - kw + 1], w[:, :, i, j])
    return y


# A conv whose input meets two pad values (zero inside, -1 outside): the
# contraction pattern kept the first pad value only, so the CPU conv
# template took all of it for zero padding (max error ~3.5); an operand with
# two pad values is no template operand now.
x, w = f32(1, 2, 6, 6), f32(3, 2, 3, 3)
xp = np.pad(np.pad(x, [(0, 0), (0, 0), (1, 1), (1, 1)]), [(0, 0), (0, 0), (1, 1), (1, 1)], constant_values=-1)
case("conv_of_two_pads", """graph main(x: f32[1, 2, 6, 6], w: f32[3, 2, 3, 3]) -> (y: f32[1, 3, 8, 8]) {
    p = pad(x, [[0, 0], [0, 0], [1, 1], [1, 1]], value=0.0)
    q = pad(p, [[0, 0], [0, 0], [1, 1], [1, 1]], value=-1.0)
    y = conv2d(q, w)
    return y
}
""", {"x": x, "w": w}, {"y": conv2d(xp, w)})

# A read of padding only: a slice of a pad's margin reads no element of x,
# and isl builds no index expression for an empty access (InternalError:
# "cannot handle void expression" on cpu).
x = f32(3, 8)
case("slice_of_pad_margin", """graph main(x: f32[3, 8]) -> (y: f32[2, 8]) {
    y = slice(pad(x, [[1, 2], [0, 0]], value=0.5), [-2], [9], [0]) + 1.0
    return y
}
""", {"x": x}, {"y": np.full((2, 8), 1.5)}, cuda=True)

# The same activation twice after a GEMM: the epilogue merged consecutive
# steps of one role (meant for the several ops of a spelled-out silu), so
# gelu(gelu(a @ b)) ran one gelu in the CPU GEMM template (max error ~0.17).
# Fuzz seed 50783.  Every pair of silu / gelu, with the GEMM output also read
# by a second GEMM as in the seed.
def gelu(x):
    from math import erf, sqrt
    return 0.5 * x * (1 + np.vectorize(erf)(x / sqrt(2)))


def silu(x):
    return x / (1 + np.exp(-x))


a, b, w = f32(5, 7), f32(7, 4), f32(4, 9)
A = a.astype(np.float64) @ b.astype(np.float64)
for f1, f2 in (("gelu", "gelu"), ("silu", "silu"), ("gelu", "silu"), ("silu", "gelu")):
    t = {"gelu": gelu, "silu": silu}[f1]({"gelu": gelu, "silu": silu}[f2](A))
    case(f"{f1}_{f2}_after_gemm", f"""graph main(a: f32[5, 7], b: f32[7, 4], w: f32[4, 9]) -> (t: f32[5, 4], u: f32[5, 9]) {{
    t = {f1}({f2}(a @ b))
    return t, t @ w
}}
""", {"a": a, "b": b, "w": w}, {"t": t, "u": t @ w.astype(np.float64)}, cuda=True)

# A contraction whose operand reaches its base through a CAST that another
# region materializes, with movement between that CAST and the base: the
# operand's read was composed through the CAST to the base, which this region
# cannot read (a model input it does not take, a conv's sum inside its own
# region), and the materialized CAST was only used when it is applied to the
# base itself (same index).  Unsupported on cpu and CUDA: "operand X is not
# readable in this region".  The read now stops at the CAST (a stage of the
# operand) in its own coordinates.
def h16(x):
    return x.astype(np.float16).astype(np.float64)


def dwconv(x, w):
    """Depthwise (groups = channels) valid cross-correlation, stride 1."""
    return np.concatenate([conv2d(x[:, c:c + 1], w[c:c + 1]) for c in range(x.shape[1])], axis=1)


# the CAST is also a model output
x, y = f32(4, 6), f32(4, 5).astype(np.float16)
c = x.T.astype(np.float16)
case("matmul_of_output_cast_of_permute", """graph main(x: f32[4, 6], y: f16[4, 5]) -> (c: f16[6, 4], z: f32[6, 5]) {
    c = cast(permute(x, [1, 0]), f16)
    z = cast(c @ y, f32)
    return c, z
}
""", {"x": x, "y": y}, {"c": c, "z": h16(c.astype(np.float64) @ y)}, tol=1e-2, cuda=True)
# the CAST read by an elementwise op too (not an output)
x, y = f32(3, 1, 4), f32(4, 5)
c = np.broadcast_to(x, (3, 6, 4)).astype(np.float16).astype(np.float64)
case("matmul_of_shared_cast_of_expand", """graph main(x: f32[3, 1, 4], y: f32[4, 5]) -> (z: f32[3, 6, 5], e: f32[3, 6, 4]) {
    c = cast(expand(x, [3, 6, 4]), f16)
    z = cast(c, f32) @ y
    e = cast(c, f32) * 2.0
    return z, e
}
""", {"x": x, "y": y}, {"z": c @ y, "e": 2 * c}, tol=1e-3, cuda=True)
# an f16 depthwise conv without bias: its CAST comes after the RESHAPE of the
# groups and is materialized by the conv's region (an epilogue); the next
# conv, or a matmul of it widened, reads it
x, w = f32(1, 4, 6, 6).astype(np.float16), f32(4, 1, 3, 3).astype(np.float16)
v, y = f32(3, 4, 3, 3).astype(np.float16), f32(4, 5)
dw = h16(dwconv(x.astype(np.float64), w.astype(np.float64)))
case("conv_of_f16_depthwise_conv", """graph main(x: f16[1, 4, 6, 6], w: f16[4, 1, 3, 3], v: f16[3, 4, 3, 3]) -> (z: f16[1, 3, 2, 2]) {
    c = conv2d(x, w, groups=4)
    z = conv2d(c, v)
    return z
}
""", {"x": x, "w": w, "v": v}, {"z": conv2d(dw, v.astype(np.float64))}, tol=1e-2, cuda=True)
case("matmul_of_f16_depthwise_conv", """graph main(x: f16[1, 4, 6, 6], w: f16[4, 1, 3, 3], y: f32[4, 5]) -> (z: f32[1, 4, 4, 5]) {
    c = conv2d(x, w, groups=4)
    z = cast(c, f32) @ y
    return z
}
""", {"x": x, "w": w, "y": y}, {"z": dw @ y}, tol=1e-3, cuda=True)
# a CAST read only by the matmul that region selection still left in a
# region of its own (fuzz seed 90451): the base, a concat that is an output,
# is no input of the matmul's region
x, a, w = f32(1, 1, 12, 8), f32(3, 1, 6, 8), f32(1, 1, 8, 5).astype(np.float16)
o = np.concatenate([np.pad(2 * x, [(1, 1), (0, 0), (0, 0), (0, 0)], constant_values=0.5), a], axis=2)
t = h16(o[1:2, 0:1])
case("matmul_of_unfused_cast_of_slice", """graph main(x: f32[1, 1, 12, 8], a: f32[3, 1, 6, 8], w: f16[1, 1, 8, 5]) -> (z: f16[1, 1, 18, 5], o: f32[3, 1, 18, 8]) {
    p = pad(x * 2.0, [[1, 1], [0, 0], [0, 0], [0, 0]], value=0.5)
    o = concat([p, a], axis=2)
    t = cast(slice(o, [1, 0], [-1, 1], [0, 1]), f16)
    z = t @ w
    return z, o
}
""", {"x": x, "a": a, "w": w}, {"z": t @ w.astype(np.float64), "o": o}, tol=1e-2, cuda=True)
# a row softmax / layernorm over a reshape that regroups the rows of its
# input (fuzz seed 132105): the row length is the reduction's extent (4, 8),
# not the last axis of the tensor read (6); the row kernels took 6
x = f32(4, 6)
r = x.reshape(6, 4).astype(np.float64)
e = np.exp(r - r.max(-1, keepdims=True))
q = x.reshape(3, 8).astype(np.float64)
mu = q.mean(-1, keepdims=True)
case("row_kernels_over_a_regrouping_reshape", """graph main(x: f32[4, 6]) -> (y: f32[6, 4], z: f32[3, 8]) {
    y = softmax(reshape(x, [6, 4]))
    z = layernorm(reshape(x, [3, 8]))
    return y, z
}
""", {"x": x}, {"y": e / e.sum(-1, keepdims=True), "z": (q - mu) / np.sqrt(((q - mu) ** 2).mean(-1, keepdims=True) + 1e-5)},
     cuda=True)
# a template's epilogue scale of exactly 1 (the mean over one row, fuzz seed
# 134247) was printed as the C literal `1f`, which does not compile
a, b = f32(1, 2), f32(1, 1)
case("epilogue_scale_of_one", """graph main(a: f32[1, 2], b: f32[1, 1]) -> (t: f32[2]) {
    t = mean(a * expand(b, [1, 2]), [0])
    return t
}
""", {"a": a, "b": b}, {"t": (a * b)[0]}, cuda=True)
# reductions over an axis of size 0: the identity on every output (the max of
# nothing -inf, a mean NaN, a product over K = 0 just its bias); the isl
# domain of such a block is empty, so its initialisation and store vanished
# with it and the cpu backend left the outputs as the arena held them
x0, w0, b0 = np.zeros((3, 0), np.float32), np.zeros((0, 4), np.float32), f32(4)
with np.errstate(invalid="ignore"):
    mean0 = x0.mean(axis=1)
case("empty_reductions", """graph main(x: f32[3, 0], w: f32[0, 4], b: f32[4]) -> (m: f32[3], r: f32[3], g: f32[3, 4], h: f32[3, 4], l: f32[3]) {
    m = mean(x, [1])
    r = relu(max(x, [1])) + 1.0
    g = x @ w
    h = relu(x @ w + b)
    l = min(x, [1])
    return m, r, g, h, l
}
""", {"x": x0, "w": w0, "b": b0}, {"m": mean0, "r": np.ones(3), "g": np.zeros((3, 4)), "h": np.tile(np.maximum(b0, 0), (3, 1)),
                                  "l": np.full(3, np.inf)}, cuda=True)
s.close()
