#!/usr/bin/env python3
"""qgemm_ab.py — one int8 conv kernel of cgen_qgemm.c from two builds (a before / after), in one
process, interleaved: ResNet-50's stride-1 3x3 convs (56x56x64, 28x28x128, 14x14x256, 7x7x512) and its
strided 3x3/2 ones (128 @ 56 -> 28, 256 @ 28 -> 14, 512 @ 14 -> 7), each as its AMX-INT8 variant and its
VNNI one.

    python3 bench/qgemm_ab.py BASE/qgemm_gen BRANCH/qgemm_gen [--rounds 5] [--repeat 100] [--only c56,s56] [--threads 2]

Needs: two qgemm_gen binaries (`make -C bench BUILD=... $BUILD/qgemm_gen`, or cc bench/qgemm_gen.c
       against each build's libharp.a), a C compiler, numpy; AMX-INT8 for the amx columns.
Gives: per conv and variant the min over rounds of each round's median ms (base, branch, branch /
       base), every output first checked equal to numpy's (qgemm.py's conv_data).
"""
import argparse
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qgemm import P, THREADS, checked, conv_data, load_lib  # noqa: E402
from settle import median_ms  # noqa: E402

CONVS = [("c56", 64, 56, 56, 64, 3, 1, 1), ("c28", 128, 28, 28, 128, 3, 1, 1), ("c14", 256, 14, 14, 256, 3, 1, 1),
         ("c7", 512, 7, 7, 512, 3, 1, 1), ("s56", 128, 56, 56, 128, 3, 2, 1), ("s28", 256, 28, 28, 256, 3, 2, 1),
         ("s14", 512, 14, 14, 512, 3, 2, 1)]


def build(gen, tmp, tag, convs):
    """The shared object of convs from generator gen (each conv NAME and NAME_amx), loaded."""
    src, so = os.path.join(tmp, f"{tag}.c"), os.path.join(tmp, f"{tag}.so")
    args = ["--amx", src]
    for name, c, h, w, co, ks, st, pd in convs:
        args += ["conv", name] + [str(v) for v in (c, h, w, co, ks, st, pd)]
    return load_lib(gen, args, src, so)


def callables(libs, pools, conv, rng, keep):
    """{build_variant: call} for one conv, each output checked equal to numpy's first."""
    name, c, h, w, co, ks, st, pd = conv
    x, wt, bias, mult, want, oh, ow = conv_data(c, h, w, co, ks, st, pd, rng)
    calls = {}
    for t, lib in libs.items():
        for var, fn in (("amx", name + "_amx"), ("vnni", name)):
            calls[f"{t}_{var}"] = checked(lib, fn, pools[t], x, wt, bias, mult, want, keep, f"{t} {fn}")[0]
    return calls


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("base")
    ap.add_argument("branch")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=100)
    ap.add_argument("--threads", type=int, default=THREADS, help=f"the pools' threads (default {THREADS})")
    ap.add_argument("--only", default="", help="comma-separated conv names (c56 c28 c14 c7 s56 s28 s14); default all")
    a = ap.parse_args()
    only = [n for n in a.only.split(",") if n]
    if any(n not in [c[0] for c in CONVS] for n in only):
        ap.error(f"--only: the names are {' '.join(c[0] for c in CONVS)}")
    tmp = tempfile.mkdtemp(prefix="harp-qgemm-ab-")
    convs = [c for c in CONVS if not only or c[0] in only]
    libs = {"base": build(a.base, tmp, "base", convs), "branch": build(a.branch, tmp, "branch", convs)}
    pools = {t: P(lib.hprt_pool_create(a.threads)) for t, lib in libs.items()}
    rng, keep = np.random.default_rng(0), []
    print("load average at the start:", " ".join(f"{v:.1f}" for v in os.getloadavg()))
    for conv in convs:
        calls = callables(libs, pools, conv, rng, keep)
        med = {k: [] for k in calls}
        for _ in range(a.rounds):
            for k, fn in calls.items():
                med[k].append(median_ms(fn, a.repeat, warmup=2))
        mn = {k: min(v) for k, v in med.items()}
        name, c, h, w, co, ks, st, pd = conv
        n = ((h + 2 * pd - ks) // st + 1) * ((w + 2 * pd - ks) // st + 1)
        print(f"{name} {co}x{n}x{c * ks * ks}: " + "  ".join(f"{k} {mn[k]:.4f}" for k in calls) +
              f"  amx branch/base {mn['branch_amx'] / mn['base_amx']:.3f}  vnni branch/base {mn['branch_vnni'] / mn['base_vnni']:.3f}",
              flush=True)
    print("load average at the end:", " ".join(f"{v:.1f}" for v in os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
