"""2-D pooling goes to the CPU pool kernel (cgen_pool.c) and agrees with the
reference interpreter and with numpy: max and average, padding 0/1 (-inf for
a max, 0 for an average: count_include_pad), asymmetric padding, strides 1
and 2, kernels 1 to 3, odd sizes, a window that leaves the last column
unread, batches, fp16 in and out, relu and casts after the pool, and inputs
holding NaN (the window's max is NaN, as the reference's) and -inf.  The
generated C must call the pool kernel and decline nothing, so a silent
fallback to the loop nest fails here; a stride of 3, a global pool and an
average over disjoint unpadded windows must be declined to the loop nest (faster there) and still agree."""
import os
import re
import tempfile

import numpy as np

from harp_test import Suite, close, compiled_only, run
compiled_only()  # the pool template's numbers, not tier 0's (harp_test.py)

s = Suite("pool")
rng = np.random.default_rng(23)
DT = {np.float32: "f32", np.float16: "f16"}


def pool_ref(x, kind, k, stride, pads, fill):
    """NCHW pooling in float64: pads (top, bottom, left, right) of value fill,
    floor mode; max propagates NaN."""
    x = x.astype(np.float64)
    t, b, l, r = pads
    xp = np.pad(x, ((0, 0), (0, 0), (t, b), (l, r)), constant_values=fill)
    n, c, h, w = xp.shape
    oh, ow = (h - k) // stride + 1, (w - k) // stride + 1
    taps = [xp[:, :, i:i + stride * (oh - 1) + 1:stride, j:j + stride * (ow - 1) + 1:stride]
            for i in range(k) for j in range(k)]
    st = np.stack(taps)
    if kind == "max":
        out = st.max(axis=0)  # numpy's max propagates NaN
    else:
        out = st.sum(axis=0) / (k * k)
    return out


def case(name, x, kind, k, stride, pads=(0, 0, 0, 0), relu=False, out_dt=None, want_kernel=True):
    """Pool x (NCHW) on the cpu backend; check the pool kernel is used, then
    the output against the interpreter and numpy."""
    fill = "-inf" if kind == "max" else "0"
    src = "x"
    if any(pads):
        t, b, l, r = pads
        src = f"pad(x, [[0, 0], [0, 0], [{t}, {b}], [{l}, {r}]], value={fill})"
    expr = f"{kind}_pool2d({src}, kernel={k}, stride={stride})"
    if relu:
        expr = f"relu({expr})"
    ref = pool_ref(x, kind, k, stride, pads, -np.inf if kind == "max" else 0.0)
    if relu:
        ref = np.where(np.isnan(ref), ref, np.maximum(ref, 0))
    odt = out_dt or x.dtype.type
    if odt != x.dtype.type:
        expr = f"cast({expr}, {DT[odt]})"
    shape = ", ".join(str(d) for d in ref.shape)
    xs = ", ".join(str(d) for d in x.shape)
    text = (f"graph main(x: {DT[x.dtype.type]}[{xs}]) -> (y: {DT[odt]}[{shape}]) {{\n"
            f"    y = {expr}\n    return y\n}}\n")
    path = os.path.join(tempfile.mkdtemp(), "pool.harp")
    with open(path, "w") as f:
        f.write(text)
    dump = tempfile.mkdtemp()
    p, d = run(path, {"x": x}, extra=["--dump", "c", "--dump-dir", dump], backend="cpu")
    s.check(f"{name}: compiles and runs on cpu", p.returncode == 0, p.stderr.strip()[-400:])
    if p.returncode:
        return
    c = open(os.path.join(dump, "model.c")).read()
    pools = re.findall(r"/\* ---- model_k\d+_pool: (max|sum) pool ", c)
    declined = re.findall(r"the template declined \(([^)]*)\)", c)
    if want_kernel:
        s.check(f"{name}: on the pool kernel", pools == ["max" if kind == "max" else "sum"], str(pools))
        s.check(f"{name}: nothing declined", not declined, str(declined))
    else:
        s.check(f"{name}: declined to the loop nest", not pools and any(d.startswith("pool:") for d in declined),
                f"{pools} {declined}")
    got = np.load(os.path.join(d, "y.npy"))
    q, e = run(path, {"x": x}, backend="interp")
    s.check(f"{name}: interpreter runs", q.returncode == 0, q.stderr.strip()[-400:])
    if q.returncode == 0:
        want = np.load(os.path.join(e, "y.npy"))
        s.check(f"{name}: vs interpreter", *close(got, want.astype(np.float64)))
        s.check(f"{name}: NaN where the interpreter has NaN", np.array_equal(np.isnan(got), np.isnan(want)),
                f"{int(np.isnan(got).sum())} vs {int(np.isnan(want).sum())}")
    tol = 1e-3 if odt == np.float32 else 2e-3
    s.check(f"{name}: vs numpy", *close(got, ref, rtol=tol, atol=tol))


def arr(*shape, dt=np.float32):
    return rng.standard_normal(shape).astype(dt)


def specials(x):
    """NaN in a few places (one in the padded border's reach, one inside),
    -inf in a run, +inf once."""
    x = x.copy()
    n, c, h, w = x.shape
    x[0, 0, 0, 0] = np.nan
    x[0, c - 1, h // 2, w // 2] = np.nan
    x[-1, 0, h - 1, :] = -np.inf
    x[-1, c // 2, 1, 2] = np.inf
    return x


# the ResNet stem's max pool (smaller), and its unpadded variant
case("max 3x3 s2 pad1", arr(1, 8, 30, 30), "max", 3, 2, (1, 1, 1, 1))
case("max 3x3 s2 pad0, last column unread", arr(1, 5, 30, 30), "max", 3, 2)
case("max 3x3 s1 pad1 odd", arr(2, 3, 13, 17), "max", 3, 1, (1, 1, 1, 1))
case("max 2x2 s2 odd sizes", arr(1, 4, 11, 37), "max", 2, 2)
case("max 2x2 s1 asymmetric pad", arr(1, 3, 9, 20), "max", 2, 1, (0, 1, 1, 0))
# declined on purpose (contract_c.c): the loop nest is faster there
case("max 3x3 s3 (loop nest)", arr(1, 2, 17, 50), "max", 3, 3, (1, 1, 1, 1), want_kernel=False)
case("avg 7x7 -> 1x1 (loop nest)", arr(1, 8, 7, 7), "avg", 7, 7, want_kernel=False)
case("max 1x1 s2", arr(1, 3, 9, 9), "max", 1, 2)
case("max wide rows", arr(1, 2, 9, 150), "max", 3, 2, (1, 1, 1, 1))
case("max NaN and inf", specials(arr(2, 4, 12, 19)), "max", 3, 2, (1, 1, 1, 1))
case("max NaN stride 1", specials(arr(1, 3, 7, 33)), "max", 3, 1, (1, 1, 1, 1))
case("max relu", arr(1, 4, 14, 14), "max", 3, 2, (1, 1, 1, 1), relu=True)
case("max relu NaN (kept, as the reference)", specials(arr(1, 4, 14, 14)), "max", 3, 2, (1, 1, 1, 1), relu=True)
case("max fp16", arr(2, 3, 15, 21, dt=np.float16), "max", 3, 2, (1, 1, 1, 1))
case("max fp16 NaN", specials(arr(1, 3, 10, 40, dt=np.float16)), "max", 3, 1, (1, 1, 1, 1))
case("max fp32 -> fp16", arr(1, 3, 12, 12), "max", 2, 2, out_dt=np.float16)
case("avg 2x2 s2 (loop nest: disjoint windows)", arr(1, 16, 28, 28), "avg", 2, 2, want_kernel=False)
case("avg 2x2 s1", arr(1, 16, 28, 28), "avg", 2, 1)
case("avg 3x3 s1 pad1 (pad counted)", arr(2, 3, 10, 23), "avg", 3, 1, (1, 1, 1, 1))
case("avg 3x3 s2 pad1 odd", arr(1, 5, 15, 17), "avg", 3, 2, (1, 1, 1, 1))
case("avg NaN and inf", specials(arr(1, 4, 10, 10)), "avg", 3, 2, (1, 1, 1, 1))
case("avg fp16", arr(1, 4, 12, 30, dt=np.float16), "avg", 2, 1, (0, 1, 0, 1))
case("avg relu", arr(1, 4, 9, 9), "avg", 3, 2, (1, 1, 1, 1), relu=True)

s.close()
