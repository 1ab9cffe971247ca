"""Differential fuzzing: random DSL programs (fuzz_models.py) run on the
reference interpreter and on the compiled backends (cpu, regions); every
output of a compiled backend must match the interpreter's.  A failure
prints the program, so it can be rerun by hand (`python3 fuzz_models.py
SEED` prints it again).

In ctest this runs a fixed list of seeds (HARP_FUZZ_SEEDS=N runs N from
HARP_FUZZ_START instead); `python3 test_fuzz_backends.py --seeds N --start S`
runs any range, and scripts/fuzz.py runs long campaigns in parallel and
keeps the failing programs.

Tolerances: the interpreter stores (and so rounds) every node and sums in
index order; the compiled code fuses, reorders sums and keeps fp32 between
fused fp16 ops.
So fp32 outputs are compared at rtol = 1e-3 with atol = 1e-3 relative to the
output's largest magnitude (a sum or a softmax of cancelling terms), fp16
outputs at 1e-2 (a few fp16 ulps after a chain of roundings), bool and i32
exactly.
The bugs this hunts (a wrong index, an axis dropped, a tail not written)
are far outside either.  Comparisons are generated on f32 and i32 only: the
compiled backends keep fp32 inside a fused region and round fp16 where they
store it (docs/tiny-ir.md), so an f16 tie can legitimately compare the other
way.

Once known (about 1 program in 300): a contraction whose operand reaches
its base through a CAST that another region materializes, with movement
between that CAST and the base (`cast(permute(x), f16) @ y` with the cast
also an output, `cast(expand(x), f16)` read elsewhere too, an f16 depthwise
conv without bias read by a conv or a matmul: its CAST sits after the
RESHAPE of the groups), was `Unsupported` on cpu and CUDA, "operand X is
not readable in this region".  Such a read now stops at the materialized
CAST, in its own coordinates (a stage of the operand, docs/poly-view.md);
test_fuzz_regressions.py has the cases."""
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fuzz_models import generate  # noqa: E402
from harp_test import Suite, close, compiled_only, run  # noqa: E402
compiled_only()  # the compiled backends' numbers, not tier 0's (harp_test.py)

COMPILED = ["cpu", "regions"]
# The CI seeds: about 1 s each (one C compile per program for cpu).
CI_SEEDS = list(range(20))
# One also as CUDA on the CPU SIMT simulator (sm80 and sm90; needs g++,
# about 5 s: two simulator compiles).  scripts/fuzz.py --cuda does more.
CUDA_SEEDS = [13]


def compare(got, want):
    if want.dtype.kind in "bi":  # bool, i32: exact
        bad = int(np.sum(got != want)) if got.shape == want.shape else -1
        return bad == 0, f"{bad} elements differ" if bad >= 0 else f"shape {got.shape} != {want.shape}"
    mag = float(np.nanmax(np.abs(want[np.isfinite(want)]))) if np.isfinite(want).any() else 1.0
    tol = 1e-2 if want.dtype == np.float16 else 1e-3
    return close(got, want, rtol=tol, atol=tol * max(1.0, mag))


def check(prog, backends=COMPILED, workdir=None):
    """Run prog on the interpreter and `backends`; returns a list of
    (what, detail) problems (empty: all agree)."""
    d = workdir or tempfile.mkdtemp(prefix="harp_fuzz_")
    path = os.path.join(d, f"fuzz_{prog.seed}.harp")
    with open(path, "w") as f:
        f.write(prog.text)
    feeds = prog.feeds()
    for be in ["interp", *backends]:
        os.makedirs(os.path.join(d, be), exist_ok=True)
    p, ref_dir = run(path, feeds, backend="interp", outdir=os.path.join(d, "interp"))
    if p.returncode != 0:
        return [("interp", f"the interpreter rejects the program (a generator bug?):\n{p.stderr[-2000:]}")]
    want = {name: np.load(os.path.join(ref_dir, f"{name}.npy")) for name, *_ in prog.outputs}
    problems = []
    for be in backends:
        # on the cpu backend every input but the first is a weight (packed
        # once at model_init where a template takes it packed)
        params = list(feeds)[1:] if be == "cpu" else ()
        p, out = run(path, feeds, backend=be, outdir=os.path.join(d, be), params=params)
        if p.returncode != 0:
            problems.append((be, f"fails where the interpreter runs:\n{p.stderr[-2000:]}"))
            continue
        for name, *_ in prog.outputs:
            got = np.load(os.path.join(out, f"{name}.npy"))
            ok, detail = compare(got, want[name])
            if not ok:
                problems.append((be, f"output {name}: {detail}"))
    return problems


def check_cuda(prog, d, targets=("sm80", "sm90")):
    """The CUDA translation unit of prog on the CPU SIMT simulator, against
    the interpreter's outputs that check() left in d/interp."""
    import cuda_sim
    want = {name: np.load(os.path.join(d, "interp", f"{name}.npy")) for name, *_ in prog.outputs}
    problems = []
    for target in targets:
        p, gd = cuda_sim.dump(os.path.join(d, f"fuzz_{prog.seed}.harp"), target, outdir=os.path.join(d, target))
        if p.returncode:
            problems.append((target, f"harp dump fails:\n{p.stderr[-1500:]}"))
            continue
        got, err = cuda_sim.run(gd, prog.feeds())
        if err:
            problems.append((target, err[-1500:]))
            continue
        for name in want:
            ok, detail = compare(got[name], want[name])
            if not ok:
                problems.append((target, f"output {name}: {detail}"))
    return problems


def main(argv):
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=None)
    ap.add_argument("--start", type=int, default=0)
    a = ap.parse_args(argv)
    n = a.seeds if a.seeds is not None else (int(os.environ["HARP_FUZZ_SEEDS"]) if "HARP_FUZZ_SEEDS" in os.environ else None)
    start = a.start if a.seeds is not None else int(os.environ.get("HARP_FUZZ_START", "0"))
    seeds = list(range(start, start + n)) if n is not None else CI_SEEDS
    s = Suite("fuzz_backends")
    import cuda_sim
    cuda = cuda_sim.have_gxx() and os.environ.get("HARP_FUZZ_CUDA", "1") != "0"
    for seed in seeds:
        prog = generate(seed)
        d = tempfile.mkdtemp(prefix="harp_fuzz_")
        problems = check(prog, workdir=d)
        if cuda and seed in CUDA_SEEDS and not problems:
            problems = check_cuda(prog, d)
        for be, detail in problems:
            s.check(f"seed {seed} [{be}]", False, detail)
        if problems:
            print(f"--- program (seed {seed}):\n{prog.text}---", flush=True)
        else:
            s.check(f"seed {seed}", True)
    s.close()


if __name__ == "__main__":
    main(sys.argv[1:])
