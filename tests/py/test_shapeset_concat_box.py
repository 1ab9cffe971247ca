"""A Concat whose size is 2 H + 1 in one ShapeSet build (issue 25): the
concat is lowered to PADs summed; in a box's preparation each padded axis is
named after its input's axis plus the pads (src/tiny/infer_move.c
pad_axis_name: 2*H + 1, the frontend's derived symbol ds_2_xH_p1), so the
loop nest's extents and grid read it at run time, and a later piece's pad
before the axis (2 H) shifts its guard and read by lo_now - hp_sv
(src/poly/astgen_sym.c pad_shift).  Before, the CPU ShapeSet made an object
per binding and a CUDA session built per binding (the concat's kernel
printed 17 and 16).

CPU (cpu_row; before: an object per binding, the elementwise map's
one-row piece after the cut reading z at row 16, a number of the binding):
the piece's inputs are read from where the walk along the cut axis puts
their index 0 (src/kernel/contract_cut.c ct_cut_origins: z, an addend of
y, at 0; c at its PAD's 2 H), so a Python session over the box is one
object at three bindings, each output against the interpreter and numpy;
a package of the box (`harp compile --shapeset`) prints the piece's start
as a run-time symbol and, run by a driver at a binding, matches numpy,
while the same buffers run with H one short, or with the symbol the
piece's start reads one short, give another result.  Two concats cut
at different sizes (two_cats: the map kernel, an input's offset from the
piece's start, before `cx.ioff = 48L`; two_cats_up: the gather map, an
input whose index 0 is at a run-time position other than the piece's
start, cx->o) are one object each, against the interpreter and numpy.  CUDA (test_shapeset_ties_more.gpu_row): a
session on the fake libcuda as an 8.0 and a 9.0 device over three bindings
is one cluster, one build, no fallback; the box's unit is the same CUDA C at
each binding and compiles with NVRTC; sm80's runs on the SIMT simulator at
each binding against the interpreter, and H one short gives another result.
The units compile with nvcc for sm_80 and sm_90a where nvcc is here.
Skips (77) without g++; the CPU row without the Python package (said on stdout)."""
import os
import re
import subprocess
import sys
import tempfile
import warnings

import numpy as np

import cuda_sim
from cuda_ss_common import nvcc_compiles
from harp_test import HARP, Suite, close
from test_shapeset_ties_more import box_corner, box_opts, gpu_row, model_path

B3 = [dict(N=1, H=8, W=8, G=17, V=16), dict(N=1, H=5, W=6, G=11, V=12), dict(N=1, H=7, W=7, G=15, V=14)]
BOX = {"H": (5, 8), "W": (5, 8), "G": (9, 32), "V": (9, 16)}


def nvcc_units(s):
    """The box's units (its corner hi) compile with nvcc for sm_80 and sm_90a (cuda_ss_common.nvcc_compiles)."""
    model, _ = model_path("up2_cat")
    for target, arch in (("sm80", "80"), ("sm90", "90a")):
        _, _, src = box_corner(s, f"up2_cat ({target})", model, target, B3[0], box_opts(BOX))
        if src is None:
            continue
        path = os.path.join(tempfile.mkdtemp(prefix="harp_cat_nvcc_"), "model.cu")
        open(path, "w").write(src)
        nvcc_compiles(s, [(f"up2_cat ({target})", path)], (arch,))


def up2(x, axis):
    """x repeated twice along axis (a nearest x2 upsample), in float64."""
    return np.asarray(x, np.float64).repeat(2, axis=axis)


def numpy_ref(x, c, z):
    """up2_cat: y = concat([x upsampled x2 (nearest), c], axis 2) + z, in float64."""
    return np.concatenate([up2(up2(x, 2), 3), np.asarray(c, np.float64)], axis=2) + z


# Two concats cut at different places (the map kernel, contract_rows_c.c: a piece's input offset from the
# piece's start, before a number of the binding), and the same with upsampled maps (the gather map, gmap_c.c:
# an input whose index 0 is at a run-time position other than the piece's start, cx->o)
CPU_MODELS = {
    "two_cats": ("graph<H=12, W=6> main(a: f32[4, H, 8], b: f32[4, W, 8], c: f32[4, W, 8], d: f32[4, H, 8])"
                 " -> (y: f32[4, H + W, 8]) {\n    y = concat([a, b], axis=1) + concat([c, d], axis=1)\n    return y\n}\n",
                 {"H": (9, 12), "W": (3, 6)}, [dict(H=12, W=6), dict(H=9, W=3), dict(H=11, W=5)],
                 lambda b: {"a": (4, b["H"], 8), "b": (4, b["W"], 8), "c": (4, b["W"], 8), "d": (4, b["H"], 8)},
                 lambda a, b, c, d: np.concatenate([a, b], 1).astype(np.float64) + np.concatenate([c, d], 1)),
    "two_cats_up": ("graph<H=10, W=6, V=8, U=16> main(a: f32[4, H, V], b: f32[4, W, U], c: f32[4, W, U], d: f32[4, H, V])"
                    " -> (y: f32[4, H + W, U]) {\n"
                    "    ua = reshape(expand(reshape(a, [4, H, V, 1]), [4, H, V, 2]), [4, H, 2 * V])\n"
                    "    ud = reshape(expand(reshape(d, [4, H, V, 1]), [4, H, V, 2]), [4, H, 2 * V])\n"
                    "    y = concat([ua, b], axis=1) + concat([c, ud], axis=1)\n    return y\n}\n",
                    {"H": (7, 10), "W": (3, 6)}, [dict(H=10, W=6), dict(H=7, W=3), dict(H=9, W=4)],
                    lambda b: {"a": (4, b["H"], 8), "b": (4, b["W"], 16), "c": (4, b["W"], 16), "d": (4, b["H"], 8)},
                    lambda a, b, c, d: np.concatenate([up2(a, 2), b], 1) + np.concatenate([c, up2(d, 2)], 1)),
}


def up2_cat_row():
    """up2_cat as a CPU_MODELS row (its model from test_shapeset_ties_more)."""
    shapes = lambda b: {"x": (b["N"], 4, b["H"], b["W"]), "c": (b["N"], 4, 1, b["V"]), "z": (b["N"], 4, b["G"], b["V"])}
    return model_path("up2_cat")[0], BOX, B3, shapes, numpy_ref


def feeds_at(rng, shapes):
    """Random fp32 inputs of the shapes given (name -> shape)."""
    return {k: rng.uniform(-2, 2, d).astype(np.float32) for k, d in shapes.items()}


def cpu_session(s, rng, name, model, box, at, shapes, ref):
    """A Python session over box (harp.h's shapesets): one object for the bindings at, each output against the
    interpreter and numpy (ref of the feeds)."""
    try:
        sys.argv, argv = sys.argv[:1], sys.argv
        from harp_py import harp
    except SystemExit:
        print(f"no Python package: {name}'s CPU session not checked")
        return
    finally:
        sys.argv = argv
    cache = tempfile.mkdtemp(prefix="harp_cat_cpu_")
    try:
        sess = harp.InferenceSession(model, {"cache_dir": cache, "progress": False}, shapesets=box)
    except harp.HarpError as ex:
        s.check(f"{name} (cpu): compiles over {box}", False, str(ex)[:400])
        return
    for b in at:
        feeds = feeds_at(rng, shapes(b))
        want = ref(**feeds)
        interp = harp.InferenceSession(model, {"cache_dir": cache, "progress": False, "syms": b}, providers=["interp"])
        got = np.asarray(sess.run(None, feeds)[0])
        s.check(f"{name} (cpu) at {b}: vs numpy", *close(got, want, 1e-6, 1e-6))
        s.check(f"{name} (cpu) at {b}: vs the interpreter", *close(got, np.asarray(interp.run(None, feeds)[0]), 1e-6, 1e-6))
    objs, built, why = sess.shapeset_objects()
    s.check(f"{name} (cpu): one object serves the box over {len(at)} bindings", objs == 1 and why is None,
            f"{objs} object(s): {why}")


# The package's driver: binding H, W from argv, inputs from DIR/{x,c,z}.f32, y to DIR/y.f32; with "short H"
# the run is at H - 1 (every size derived from it too), with "short K" symbol K alone one short (model_run_syms'
# order), on the buffers of H (the output's first elements compared then)
DRIVER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "model_shapes.c"
static void *slurp(const char *dir, const char *name, size_t n) {
  char p[4096]; snprintf(p, sizeof p, "%s/%s.f32", dir, name);
  FILE *f = fopen(p, "rb"); void *b = calloc(n, 4);
  if (!f || !b || fread(b, 4, n, f) != n) exit(3);
  fclose(f); return b;
}
int main(int argc, char **argv) {
  long long h = atoll(argv[2]), w = atoll(argv[3]), g = 2 * h + 1, v = 2 * w;
  long long syms[2] = {h, w}, all[NGEN_ + 1];
  if (all_syms_(syms, all)) return 4;
  void *in[3] = {slurp(argv[1], "x", 4 * h * w), slurp(argv[1], "c", 4 * v), slurp(argv[1], "z", 4 * g * v)};
  float *y = calloc((size_t)(4 * g * v), 4);
  model_t *m = model_init(NULL, 0);
  if (!m || !y) return 5;
  int rc;
  if (argc > 5 && !strcmp(argv[5], "H")) { syms[0] = h - 1; rc = model_run_shape(m, syms, (const void *const *)in, (void *const *)&y); }
  else if (argc > 5) { all[atoi(argv[5])] -= 1; rc = model_run_syms(m, all, (const void *const *)in, (void *const *)&y); }
  else rc = model_run_shape(m, syms, (const void *const *)in, (void *const *)&y);
  if (rc) return 6;
  char p[4096]; snprintf(p, sizeof p, "%s/%s", argv[1], argv[4]);
  FILE *f = fopen(p, "wb");
  if (!f || fwrite(y, 4, (size_t)(4 * g * v), f) != (size_t)(4 * g * v)) return 7;
  fclose(f); model_free(m); return 0;
}
"""


def cpu_package(s, rng, model):
    """A package of the box H, W (the ties give G, V): the piece's start read at run time; a driver at each of
    B3 against numpy, and at B3[2] with H one short and with the piece's start symbol one short (other results)."""
    d = tempfile.mkdtemp(prefix="harp_cat_pkg_")
    pkg = os.path.join(d, "pkg")
    p = subprocess.run([HARP, "compile", model, "--target", "cpu", "-o", pkg, "--shapeset", "H=5..8", "--shapeset", "W=5..8"],
                       capture_output=True, text=True, timeout=600)
    s.check("up2_cat (cpu): one package for the box H 5..8, W 5..8", p.returncode == 0, p.stderr[-600:])
    if p.returncode:
        return
    src = open(os.path.join(pkg, "model.c")).read()
    lo = re.findall(r"cx\.lo = .*hp_sym_\[(\d+)\]", src)
    s.check("up2_cat (cpu): the piece after the cut starts at a run-time symbol", len(lo) == 1, str(lo))
    open(os.path.join(pkg, "driver.c"), "w").write(DRIVER)
    exe = os.path.join(pkg, "driver")
    b = subprocess.run(["cc", "-O1", "-o", exe, os.path.join(pkg, "driver.c"), os.path.join(pkg, "model.c"), f"-I{pkg}",
                        "-lm", "-lpthread"], capture_output=True, text=True, timeout=300)
    s.check("up2_cat (cpu): the driver builds", b.returncode == 0, b.stderr[-600:])
    if b.returncode:
        return
    _, _, _, shapes, _ = up2_cat_row()
    for b in B3:
        feeds = feeds_at(rng, shapes(b))
        for k, v in feeds.items():
            v.tofile(os.path.join(d, f"{k}.f32"))
        want = numpy_ref(**feeds)
        runs = [("", "y")] + ([("H", "y_h"), (lo[0] if lo else None, "y_lo")] if b is B3[2] else [])
        for short, out in runs:
            if short is None:
                continue
            r = subprocess.run([exe, d, str(b["H"]), str(b["W"]), out] + ([short] if short else []), capture_output=True,
                               text=True, timeout=120)
            what = f"up2_cat (cpu package) at {b}" + (f", {'H' if short == 'H' else f'hp_sym_[{short}]'} one short" if short else "")
            s.check(f"{what}: runs", r.returncode == 0, f"rc {r.returncode} {r.stderr[-300:]}")
            if r.returncode:
                continue
            got = np.fromfile(os.path.join(d, out), np.float32).reshape(want.shape)
            ok, detail = close(got, want, 1e-6, 1e-6)
            s.check(f"{what}: {'vs numpy' if not short else 'another result'}", ok != bool(short), detail)


def main():
    warnings.simplefilter("ignore", RuntimeWarning)
    s = Suite("shapeset_concat_box")
    if not cuda_sim.have_gxx():
        print("g++ not found: skipped")
        sys.exit(77)
    rng = np.random.default_rng(26)
    cpu_session(s, rng, "up2_cat", *up2_cat_row())
    for name, (text, box, at, shapes, ref) in CPU_MODELS.items():
        path = os.path.join(tempfile.mkdtemp(prefix="harp_cat_"), f"{name}.harp")
        open(path, "w").write(text)
        cpu_session(s, rng, name, path, box, at, shapes, ref)
    cpu_package(s, rng, up2_cat_row()[0])
    gpu_row(s, np.random.default_rng(25), "up2_cat", B3, BOX, dict(N=1, H=6, W=6, G=12, V=12), "H")
    nvcc_units(s)
    s.close()


if __name__ == "__main__":
    main()
