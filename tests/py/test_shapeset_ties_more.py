#!/usr/bin/env python3
"""test_shapeset_ties_more.py — the ties test_shapeset_ties.py's box learns
from an elementwise broadcast, and the ones beyond it (issue 25, src/tiny/ties.c):

- through a RESHAPE's element count: [R, 4] -> [H, 8] added to z [H, 8]
  (4 R = 8 H: R := 2*H), [N, H, W] -> [N, P] (N H W = N P: P := H*W);
- a tie no coefficient divides: x [3 H] + z [2 G] (2 G = 3 H): G :=
  (3*H) floordiv 2, exact: a binding with H odd is InputMismatch naming the
  divisibility, and a box's corners are narrowed to even H;
- a dim that may be 1 (slice(z, [2], [G]) + x [H] over H 1..8): x may
  broadcast, so G = H + 2 is no tie there (learned from H 2 on), and a
  binding broadcasting x runs;
- a tie no power-of-two multiple (pad(up2(x)) + z: G = 2 H + 1): a GPU
  session's bindings H 5..8 (G 11..17, two ShapeSet classes of G) are one
  cluster, one build.

Checked: the ties a box learns (`harp dump --shapeset --time-stages`); CPU
(a Python session over a box whose lower corner breaks the tie): one object,
three bindings against the interpreter, a binding breaking the tie refused
naming it before any kernel, nothing compiled for it; CUDA (no GPU): a
`harp bench --bind` session on the fake libcuda as sm80 and sm90 over three
bindings, one cluster, one build, no fallback, the breaking binding refused;
the box's unit the same CUDA C at the three bindings, NVRTC compiles it, and
the corner hi's sm80 build runs on the SIMT simulator at each binding against
the interpreter.  Skips (77) without g++; the CPU part without the Python
package, the sessions without the fake libcuda or NVRTC (said on stdout)."""
import os
import sys
import tempfile
import warnings

import numpy as np

import cuda_sim
from cuda_ss_common import at_bindings, box_corner, one_build, session_counts
from harp_test import MODELS as MODELS_DIR, Suite
from test_shapeset_ties import cpu_rows, learn_rows

MODELS = {
    "reshape_rows": "graph<R=8, H=4> main(x: f32[R, 4], z: f32[H, 8]) -> (y: f32[H, 8]) {\n"
                    "    y = reshape(x, [H, 8]) + z\n    return y\n}\n",
    "reshape_np": "graph<N=2, H=3, W=4, P=12> main(x: f32[N, H, W], z: f32[N, P]) -> (y: f32[N, P]) {\n"
                  "    y = reshape(x, [N, P]) + z\n    return y\n}\n",
    "uneven": "graph<H=4, G=6> main(x: f32[H], z: f32[G]) -> (y: f32[3 * H]) {\n"
              "    a = reshape(expand(reshape(x, [H, 1]), [H, 3]), [3 * H])\n"
              "    b = reshape(expand(reshape(z, [G, 1]), [G, 2]), [2 * G])\n    y = a + b\n    return y\n}\n",
    # Tiny JSON: the DSL refuses [H] + [G] (two names)
    "plain": '{"uops": [{"id": "x", "uop": "INPUT", "arg": {"tensor_id": "x", "dtype": "fp32", "shape": ["H"]}},\n'
             ' {"id": "z", "uop": "INPUT", "arg": {"tensor_id": "z", "dtype": "fp32", "shape": ["G"]}},\n'
             ' {"id": "y", "uop": "ADD", "src": ["x", "z"]}], "outputs": ["y"]}\n',
    "up3": "graph<H=8, G=24> main(x: f32[4, H], z: f32[4, G]) -> (y: f32[4, G]) {\n"
           "    a = reshape(expand(reshape(x, [4, H, 1]), [4, H, 3]), [4, 3 * H])\n    y = a + z\n    return y\n}\n",
    "up2_cat": "graph<N=1, H=8, W=8, G=17, V=16> main(x: f32[N, 4, H, W], c: f32[N, 4, 1, V], z: f32[N, 4, G, V])"
               " -> (y: f32[N, 4, G, V]) {\n"
               "    u = reshape(expand(reshape(x, [N, 4, H, 1, W, 1]), [N, 4, H, 2, W, 2]), [N, 4, 2 * H, 2 * W])\n"
               "    y = concat([u, c], axis=2) + z\n    return y\n}\n",
}

# model, box, a binding inside, the ties said (None: none)
LEARN_ROWS = [
    ("reshape_rows", {"R": (5, 16), "H": (3, 8)}, dict(R=8, H=4), "R = 2*H"),
    ("reshape_np", {"H": (2, 4), "W": (2, 4), "P": (5, 16)}, dict(N=2, H=3, W=4, P=12), "P = H*W"),
    ("uneven", {"H": (3, 9), "G": (4, 14)}, dict(H=4, G=6), "G = 3*H floordiv 2 (exact)"),
    ("uneven", {"H": (2, 8), "G": (3, 12)}, dict(H=4, G=6), "G = 3*H floordiv 2 (exact)"),
    # G may be 1: a named dim at 1 does not broadcast against 2 H (BroadcastMismatch, checked below): tied all the same
    ("up2_add.harp", {"H": (1, 12), "G": (1, 24)}, dict(N=1, H=4, W=8, G=8, V=16), "G = 2*H"),
    ("plain", {"H": (1, 8), "G": (1, 8)}, dict(H=4, G=4), "G = H"),
    ("up2_cat", {"H": (3, 8), "W": (3, 8), "G": (5, 17), "V": (5, 16)}, dict(N=1, H=8, W=8, G=17, V=16),
     "V = 2*W, G = 2*H + 1"),
    ("up3", {"H": (3, 8), "G": (5, 24)}, dict(H=8, G=24), "G = 3*H"),
]

# model, the CPU box (its lower corner breaking the tie), fixed symbols, bindings, a binding breaking it (its
# inputs' shapes, what the error says)
CPU_ROWS = [
    ("reshape_rows", {"R": (5, 16), "H": (3, 8)}, {}, [dict(R=6, H=3), dict(R=16, H=8), dict(R=10, H=5)],
     ({"x": [11, 4], "z": [5, 8]}, "shape symbol R is 11")),
    ("reshape_np", {"H": (2, 4), "W": (2, 4), "P": (5, 16)}, {"N": 2}, [dict(H=2, W=3, P=6), dict(H=4, W=4, P=16),
                                                                         dict(H=3, W=2, P=6)],
     ({"x": [2, 3, 3], "z": [2, 10]}, "shape symbol P is 10")),
    ("uneven", {"H": (3, 9), "G": (4, 14)}, {}, [dict(H=4, G=6), dict(H=8, G=12), dict(H=6, G=9)],
     ({"x": [5], "z": [7]}, "holds only where 2 divides")),
    ("up3", {"H": (3, 8), "G": (5, 24)}, {}, [dict(H=3, G=9), dict(H=8, G=24), dict(H=5, G=15)],
     ({"x": [4, 6], "z": [4, 19]}, "shape symbol G is 19")),
    ("up2_add.harp", {"H": (1, 12), "G": (1, 24)}, {"N": 1, "W": 8, "V": 16}, [dict(H=1, G=2), dict(H=12, G=24),
                                                                                dict(H=5, G=10)],
     ({"x": [1, 8, 4, 8], "z": [1, 8, 1, 16]}, "shape symbol G is 1")),
    ("plain", {"H": (1, 8), "G": (2, 8)}, {}, [dict(H=2, G=2), dict(H=8, G=8), dict(H=5, G=5)], ({"x": [1], "z": [6]}, "shape symbol G is 6")),
]

# model, three bindings (the first its ShapeSet class's corner hi; the tied symbol in two classes: two clusters
# before), the dump's box (every binding inside it), a binding breaking the tie, the size one short of which must
# give another result on the simulator (None: one cluster checked only; up2_cat's concat is one build since ss2:
# test_shapeset_concat_box.py)
GPU_ROWS = [
    ("up3", [dict(H=8, G=24), dict(H=5, G=15), dict(H=7, G=21)], {"H": (5, 8), "G": (9, 32)}, dict(H=6, G=19), "H"),
    ("uneven", [dict(H=16, G=24), dict(H=10, G=15), dict(H=12, G=18)], {"H": (9, 16), "G": (9, 32)}, dict(H=11, G=16),
     "ds_3_xH"),
    ("reshape_rows", [dict(R=16, H=8), dict(R=10, H=5), dict(R=14, H=7)], {"R": (9, 16), "H": (5, 8)}, dict(R=13, H=6), "H"),
    ("up2_cat", [dict(N=1, H=8, W=8, G=17, V=16), dict(N=1, H=5, W=6, G=11, V=12), dict(N=1, H=7, W=7, G=15, V=14)],
     {"H": (5, 8), "W": (5, 8), "G": (9, 32), "V": (9, 16)}, dict(N=1, H=6, W=6, G=12, V=12), "H"),
]


def model_path(name, d=tempfile.mkdtemp(prefix="harp_ties_more_")):
    """MODELS[name] written into d (once), or a name with a dot tests/models': (its path, its name)."""
    if "." in name:
        return os.path.join(MODELS_DIR, name), name
    p = os.path.join(d, f"{name}.{'json' if MODELS[name][0] == '{' else 'harp'}")
    if not os.path.exists(p):
        open(p, "w").write(MODELS[name])
    return p, name


def box_opts(box):
    """--shapeset options of box."""
    return [x for k, (lo, hi) in box.items() for x in ("--shapeset", f"{k}={lo}..{hi}")]


def gpu_row(s, rng, name, at, box, bad, short):
    """One GPU_ROWS row: sessions on sm80 and sm90 (one cluster, one build; the breaking binding refused where
    its model loads, located, or by the session naming the tie), the box's unit at each binding (the same CUDA C,
    NVRTC), sm80's on the simulator against the interpreter."""
    model, _ = model_path(name)
    binds = [",".join(f"{k}={v}" for k, v in b.items()) for b in at]
    for target in ("sm80", "sm90"):
        st, err = session_counts(s, f"{name} ({target})", model, target, binds)
        if short:
            one_build(s, f"{name} ({target}) over {binds}", st, err)
        elif st:
            s.check(f"{name} ({target}) over {binds}: one cluster", st["clusters"] == 1, str(st))
        _, err = session_counts(s, f"{name} ({target}) with {bad}", model, target,
                                [binds[0], ",".join(f"{k}={v}" for k, v in bad.items())], fails=True)
        if err:
            s.check(f"{name} ({target}): the breaking binding {bad} is refused before any kernel, located",
                    "(node " in err or "shape symbol" in err or "holds only where" in err, err[-600:])
    for target in ("sm80", "sm90") if short else ():
        d, g, src = box_corner(s, f"{name} ({target})", model, target, at[0], box_opts(box))
        if src is None:
            continue
        ok, log = cuda_sim.nvrtc_ok(src, "sm_90a" if target == "sm90" else "sm_80")
        if ok is not None:
            s.check(f"{name} ({target}): NVRTC compiles the box's unit", ok, log[-600:])
        names = [x["name"] for x in g["syms"]]
        if target == "sm80":  # its last size one short must give another result
            at_bindings(s, rng, f"{name} ({target})", model, target, box_opts(box), d, src, names, at, (at[1], short), 1e-6)
            continue
        for b in at[1:]:  # sm90's loop nests are sm80's text: the simulator runs sm80's
            p, dv = cuda_sim.dump(model, target, [f"{k}={v}" for k, v in b.items()], extra=box_opts(box))
            s.check(f"{name} ({target}) at {b}: the corner hi's CUDA C", p.returncode == 0 and
                    open(os.path.join(dv, "model.cu")).read() == src, p.stderr[-400:])


def main():
    warnings.simplefilter("ignore", RuntimeWarning)
    s = Suite("shapeset_ties_more")
    if not cuda_sim.have_gxx():
        print("g++ not found: skipped")
        sys.exit(77)
    learn_rows(s, LEARN_ROWS, model_path)
    cpu_rows(s, CPU_ROWS, model_path)
    rng = np.random.default_rng(25)
    for row in GPU_ROWS:
        gpu_row(s, rng, *row)
    s.close()


if __name__ == "__main__":
    main()
