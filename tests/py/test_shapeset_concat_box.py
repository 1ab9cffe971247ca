"""A Concat whose size is 2 H + 1 in one ShapeSet build (issue 25): the
concat is lowered to PADs summed; in a box's preparation each padded axis is
named after its input's axis plus the pads (src/tiny/infer_move.c
pad_axis_name: 2*H + 1, the frontend's derived symbol ds_2_xH_p1), so the
loop nest's extents and grid read it at run time, and a later piece's pad
before the axis (2 H) shifts its guard and read by lo_now - hp_sv
(src/poly/astgen_sym.c pad_shift).  Before, the CPU ShapeSet made an object
per binding and a CUDA session built per binding (the concat's kernel
printed 17 and 16).

CPU: not yet one object (the elementwise map's later piece reads y's
neighbour z at the piece's start, a constant at the binding:
gmap_c.c gm_row_start prints it); the CPU row is not checked here.  CUDA (test_shapeset_ties_more.gpu_row): a
session on the fake libcuda as an 8.0 and a 9.0 device over three bindings
is one cluster, one build, no fallback; the box's unit is the same CUDA C at
each binding and compiles with NVRTC; sm80's runs on the SIMT simulator at
each binding against the interpreter, and H one short gives another result.
The units compile with nvcc for sm_80 and sm_90a where nvcc is here.
Skips (77) without g++."""
import os
import sys
import tempfile
import warnings

import numpy as np

import cuda_sim
from cuda_ss_common import nvcc_compiles
from harp_test import Suite
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


def main():
    warnings.simplefilter("ignore", RuntimeWarning)
    s = Suite("shapeset_concat_box")
    if not cuda_sim.have_gxx():
        print("g++ not found: skipped")
        sys.exit(77)
    gpu_row(s, np.random.default_rng(25), "up2_cat", B3, BOX, dict(N=1, H=6, W=6, G=12, V=12), "H")
    nvcc_units(s)
    s.close()


if __name__ == "__main__":
    main()
