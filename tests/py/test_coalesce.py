"""The generic loop nest merges nested loops that every access walks as one
contiguous run (src/backend/c/region_coalesce.c): a dense [C, H, W] nest
becomes the chunked C loop around one H*W loop.  A transposed operand, a
per-row or per-column broadcast or a padded read keeps its loops.  Values
match the interpreter with and without the merge (HARP_NO_COALESCE=1),
fp16 storage and NaN / inf inputs included.  HARP_NO_TEMPLATES keeps the
regions on the loop nest (the map kernel would take most of them)."""
import os
import re
import tempfile

import numpy as np

from harp_test import Suite, close, compiled_only, run
compiled_only()  # the coalesced loops' numbers, not tier 0's (harp_test.py)

s = Suite("coalesce")
os.environ["HARP_NO_TEMPLATES"] = "1"
rng = np.random.default_rng(11)
LOOP = re.compile(r"for \(long (c\d+) = 0L; \(?\1 <= (\d+)L\)?;")


def sig(name, a):
    dt = {np.float32: "f32", np.float16: "f16"}[a.dtype.type]
    return f"{name}: {dt}[{', '.join(map(str, a.shape))}]"


def case(name, ins, out, body, off, on, tol=1e-5):
    """off, on: the loops' trip counts below the chunked one without and
    with the merge (a loop of either set that the other lacks must be gone)."""
    text = (f"graph main({', '.join(sig(k, v) for k, v in ins.items())}) -> (y: {out}) {{\n"
            f"    y = {body}\n    return y\n}}\n")
    fd, m = tempfile.mkstemp(suffix=".harp", prefix="harp_coal_")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    q, e = run(m, ins, backend="interp")
    if q.returncode:
        s.check(f"{name}: interpreter", False, q.stderr)
        return
    ref = np.load(os.path.join(e, "y.npy"))
    for no in (False, True):
        if no:
            os.environ["HARP_NO_COALESCE"] = "1"
        d = tempfile.mkdtemp(prefix="harp_coal_")
        p, _ = run(m, ins, backend="cpu", outdir=d, extra=["--dump", "c", "--dump-dir", d])
        os.environ.pop("HARP_NO_COALESCE", None)
        tag = f"{name}{' (HARP_NO_COALESCE)' if no else ''}"
        if p.returncode:
            s.check(f"{tag}: runs", False, p.stderr)
            continue
        src = open(os.path.join(d, "model.c")).read()
        trips = {int(b) + 1 for _, b in LOOP.findall(src)}
        want, other = (off, on) if no else (on, off)
        s.check(f"{tag}: loops of {sorted(want)}", want <= trips and not (other - want) & trips, str(sorted(trips)))
        got = np.load(os.path.join(d, "y.npy"))
        s.check(f"{tag}: NaN where the interpreter has NaN", np.array_equal(np.isnan(got), np.isnan(ref)))
        s.check(f"{tag}: values vs the interpreter", *close(got, ref.astype(np.float64), rtol=tol, atol=tol))


x = rng.standard_normal((2, 8, 9, 37)).astype(np.float32)
x[0, 1, 2, 3] = np.nan
x[1, 2, 3, 4] = np.inf
x[1, 3, 4, 5] = -np.inf
# dense: the 8 channels of 9 x 37 are one loop (the batch loop is the chunked one)
case("silu, dense", {"x": x}, "f32[2, 8, 9, 37]", "silu(x)", {8, 9, 37}, {8 * 9 * 37})
xh = x.astype(np.float16)
case("silu, fp16", {"x": xh}, "f16[2, 8, 9, 37]", "silu(x)", {8, 9, 37}, {8 * 9 * 37}, tol=1e-3)
z = rng.standard_normal((2, 8, 9, 37)).astype(np.float32)
case("x * z + x, two dense inputs", {"x": x, "z": z}, "f32[2, 8, 9, 37]", "x * z + x", {8, 9, 37}, {8 * 9 * 37})
# a transposed operand: z[.., w, h] read along h; no merge
zt = rng.standard_normal((2, 8, 37, 9)).astype(np.float32)
case("x + transpose(z)", {"x": x, "z": zt}, "f32[2, 8, 9, 37]", "x + permute(z, [0, 1, 3, 2])", {8, 9, 37}, {8, 9, 37})
# broadcasts along a row and along a column: each breaks the run
r = rng.standard_normal((2, 8, 9, 1)).astype(np.float32)
case("x + per-row r", {"x": x, "r": r}, "f32[2, 8, 9, 37]", "x + r", {8, 9, 37}, {8, 9, 37})
w = rng.standard_normal((37,)).astype(np.float32)
case("x * per-column w", {"x": x, "w": w}, "f32[2, 8, 9, 37]", "x * w", {8, 9, 37}, {8, 9, 37})
# padding: the guard names the loops
case("pad then relu", {"x": x}, "f32[2, 8, 11, 39]", "relu(pad(x, [[0, 0], [0, 0], [1, 1], [1, 1]]))", {8, 11, 39}, {8, 11, 39})
# a reduction over the last two axes: the sum runs one loop of 9 * 37
xs = np.nan_to_num(x, posinf=3.0, neginf=-3.0)
case("sum over h, w", {"x": xs}, "f32[2, 8]", "sum(x, [2, 3])", {8, 9, 37}, {8, 9 * 37}, tol=1e-4)
case("max over h, w (NaN kept)", {"x": x}, "f32[2, 8]", "max(x, [2, 3])", {8, 9, 37}, {8, 9 * 37})
s.close()
