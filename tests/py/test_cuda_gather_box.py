"""A GATHER at run-time sizes (issue 25; docs/cuda.md "Run-time sizes"): in
a ShapeSet build the GATHER kernel (generic_cuda.c gen_gather) reads its
element count, its dims, the data's strides and the gathered axis's bound
from the box's symbols (hp_sv<i>), its grid from the binding's elements, so
one build serves the box (before: it printed them, and a session over any
model with a GATHER whose count varies built per binding).

Each model (written here) is dumped for sm80 and sm90 with its box
(`--shapeset`) at the corner hi and at bindings below: the same CUDA C at
each; the corner hi's build runs on the CPU SIMT simulator (tests/cuda_sim)
at each binding against the interpreter, every index in the binding's range
(exact: a gather copies); a size one short must give another result, and an
index equal to the binding's axis size (in range at hi) must stop the kernel
through the status word.  A session over each box on the fake libcuda
(tests/fake_cuda; NVRTC compiles the unit) as an 8.0 and a 9.0 device is one
build, no fallback; the units compile with nvcc for sm_80 and sm_90a.  A
genuinely per-binding box (a conv whose channels vary: the implicit-GEMM
template prints them) still falls back, once, naming the kernel.
Skips (77) without g++."""
import os
import tempfile

import numpy as np

import cuda_sim
from cuda_ss_common import NVCC_UNITS, NVCC_UNITS_90, at_bindings, box_corner, finish, one_build, start

# the count R varies, the gathered axis (16) does not
ROWS = "graph<R=8> main(x: f32[R, 16], i: i32[R, 4]) -> (y: f32[R, 4]) {\n    y = gather(x, i, 1)\n    return y\n}\n"
# two symbols: the gathered axis S varies (the bound, x's strides S x 8)
AXIS = ("graph<B=4, S=64> main(x: f32[B, S, 8], i: i32[B, S, 8]) -> (y: f32[B, S, 8]) {\n"
        "    y = gather(x, i, 1)\n    return y\n}\n")
# along the first axis, whose stride W varies, then an elementwise op (fused or not)
COLS = ("graph<W=32> main(x: f32[6, W], i: i32[6, W]) -> (y: f32[6, W]) {\n"
        "    y = relu(gather(x, i, 0))\n    return y\n}\n")
# name, text, box (symbol -> (lo, hi)), bindings (the corner hi first),
# the symbol one short at the second binding, the gathered axis (of x)
CASES = [
    ("gather_rows.harp", ROWS, {"R": (5, 8)}, [{"R": 8}, {"R": 6}, {"R": 5}], "R", 1),
    ("gather_axis.harp", AXIS, {"B": (3, 4), "S": (33, 64)}, [{"B": 4, "S": 64}, {"B": 3, "S": 40}, {"B": 4, "S": 33}], "S", 1),
    ("gather_cols.harp", COLS, {"W": (17, 32)}, [{"W": 32}, {"W": 20}, {"W": 17}], "W", 0),
]
# a box that is genuinely per binding: the conv template prints its channels
CONV_C = ("graph<C=8> main(x: f32[1, C, 8, 8], w: f32[16, C, 3, 3]) -> (y: f32[1, 16, 8, 8]) {\n"
          "    y = conv2d(x, w, pad=[1, 1])\n    return y\n}\n")


def at(b):
    return [f"{k}={v}" for k, v in b.items()]


def feeds_at(g, rng, axis):
    """Random inputs at the dump g's shapes, every index over the gathered
    axis's whole range at this binding (x's dim `axis`)."""
    feeds = cuda_sim.feeds_of(g, rng)
    n = feeds["x"].shape[axis]
    feeds["i"] = rng.integers(0, n, size=feeds["i"].shape).astype(np.int32)
    return feeds


def box_row(s, rng, work, name, text, box, bindings, short, axis, target):
    """The box unit of the model for target at bindings[0] (its corner hi):
    the GATHER's launch reads the sizes, the same text at every binding; the
    corner's build on the simulator at each binding against the interpreter;
    short one short at bindings[1] differs; an index at the binding's axis
    size sets the status word."""
    model = os.path.join(work, name)
    open(model, "w").write(text)
    opts = tuple(x for k, (lo, hi) in box.items() for x in ("--shapeset", f"{k}={lo}..{hi}"))
    what = f"{name} ({target}) over {opts[1::2]}"
    dhi, g, src = box_corner(s, what, model, target, bindings[0], opts)
    if not dhi:
        return
    names = [x["name"] for x in g["syms"]]
    kinds = {k["name"]: k["kind"] for k in g["kernels"]}
    gathers = [l for l in g["launches"] if kinds[l["kernel"]] == "gather"]
    s.check(f"{what}: a gather kernel reading the sizes at run time, its grid from them",
            len(gathers) == 1 and any(a["space"] == "sym" for a in gathers[0]["args"]) and "grid_x" in gathers[0],
            str([(l["kernel"], [a["space"] for a in l["args"]], l.get("grid_x")) for l in g["launches"]]))

    def oob(w, b, feeds, sv, outs):  # in range at the corner hi, not at this binding: the bound is the binding's
        if b is bindings[0]:
            return
        bad = dict(feeds, i=feeds["i"].copy())
        bad["i"].flat[-1] = feeds["x"].shape[axis]
        _, err = cuda_sim.run(dhi, bad, sv=sv, out_shapes=outs)
        s.check(f"{w}: an index at the binding's axis size stops the kernel", err is not None and "status word" in err, str(err))
    at_bindings(s, rng, what, model, target, opts, dhi, src, names, bindings, (bindings[1], short), 0,
                feeds_of=lambda g, r: feeds_at(g, r, axis), also=oob)
    (NVCC_UNITS_90 if target == "sm90" else NVCC_UNITS).append((what, os.path.join(dhi, "model.cu")))


def session_row(s, work, name, text, bindings, target):
    """A session over the bindings on the fake libcuda as a device of target
    (cuda_sim.session_counts): one build, no fallback."""
    model = os.path.join(work, name)
    open(model, "w").write(text)
    binds = [",".join(at(b)) for b in bindings]
    what = f"{name} ({target}) session over {binds}"
    st, err = cuda_sim.session_counts(s, what, model, target, binds)
    one_build(s, what, st, err)


def fallback_row(s, work, target):
    """A box whose corners differ for real (the conv prints its channels C):
    per binding, the reason said once, naming the kernel."""
    model = os.path.join(work, "conv_c.harp")
    open(model, "w").write(CONV_C)
    what = f"conv_c.harp ({target}) session over C"
    st, err = cuda_sim.session_counts(s, what, model, target, ["C=7", "C=5"])
    if st:
        s.check(f"{what}: per binding, the reason said once, naming the kernel",
                st["box_fallbacks"] == 1 and st["builds"] == 2 and st["box_builds"] == 0 and
                err.count("builds per binding") == 1 and "--bind C=7 builds per binding: the code of k0_" in err, err[-1500:])


def main():
    s, rng = start("cuda_gather_box")
    work = tempfile.mkdtemp(prefix="harp_gather_box_")
    for target in ("sm80", "sm90"):
        for name, text, box, bindings, short, axis in CASES:
            box_row(s, rng, work, name, text, box, bindings, short, axis, target)
            session_row(s, work, name, text, bindings, target)
        fallback_row(s, work, target)
    finish(s)


if __name__ == "__main__":
    main()
