#!/usr/bin/env python3
"""q1x1_ab.py — ResNet-50's 1x1 int8 convs on the VNNI kernel (cgen_qgemm.c) from two builds (a before /
after), in one process, interleaved: the stride-1 ones as the GEMMs they run as (weight A, x plain or held
VNNI-4 as the model holds it) and the three stride-2 downsamples as convs.

    python3 bench/q1x1_ab.py BASE/qgemm_gen BRANCH/qgemm_gen [--rounds 5] [--repeat 50] [--only r11,r12]
                             [--threads 2] [--cold] [--cpu]
                             [--base-order -ws|-tiles] [--branch-order -ws|-tiles]

Needs: two qgemm_gen binaries (`make -C bench BUILD=... $BUILD/qgemm_gen`; a copy of one built before the
       change serves as the base), a C compiler, numpy.
Gives: per shape the min over rounds of each round's median ms (base, branch, branch / base) and the
       sum; every output first checked equal to numpy's.  --cold: before each timed call the packed
       weight is flushed from the caches (clflush: read from DRAM, as in a whole run of a model whose
       weights outgrow the caches), only the call timed.  --cpu: one thread, each call timed on the thread's CPU clock (time
       descheduled not counted: per-kernel figures on a loaded machine).
"""
import argparse
import ctypes
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qgemm import P, THREADS, ZA, ZY, checked, conv_data, data, load_lib, numpy_ref, ptr  # noqa: E402
from settle import settle  # noqa: E402

# (name, M, N, K, x held VNNI-4): ResNet-50's stride-1 1x1 convs, one per shape and x layout
GEMMS = [("r1", 64, 3136, 64, 0), ("r2", 256, 3136, 64, 1), ("r2d", 256, 3136, 64, 0), ("r3", 64, 3136, 256, 0),
         ("r4", 128, 3136, 256, 0), ("r5", 512, 784, 128, 1), ("r6", 128, 784, 512, 0), ("r7", 256, 784, 512, 0),
         ("r8", 1024, 196, 256, 1), ("r9", 256, 196, 1024, 0), ("r10", 512, 196, 1024, 0), ("r11", 2048, 49, 512, 1),
         ("r12", 512, 49, 2048, 0)]
# (name, C, H, W, COUT): the stride-2 1x1 downsamples
CONVS = [("s56", 256, 56, 56, 512), ("s28", 512, 28, 28, 1024), ("s14", 1024, 14, 14, 2048)]


def build(gen, tmp, tag, gemms, convs, order=""):
    src, so = os.path.join(tmp, f"{tag}.c"), os.path.join(tmp, f"{tag}.so")
    args = ["--vnni" + order, src]
    for name, m, n, k, xv in gemms:
        args += [name, str(m), str(n), str(k), "1", "0", "u8v" if xv else "u8", "u8", str(ZA), str(ZY), "0", "255"]
    for name, c, h, w, co in convs:
        args += ["conv", name, str(c), str(h), str(w), str(co), "1", "2", "0"]
    return load_lib(gen, args, src, so)


def operands(shape, rng):
    """(x as the kernel reads it, w, bias, mult, numpy's y, y's shape) of one shape."""
    if shape[0][0] == "s":
        name, c, h, w, co = shape
        x, wt, bias, mult, want, oh, ow = conv_data(c, h, w, co, 1, 2, 0, rng)
        return x, wt, bias, mult, want
    name, m, n, k, xv = shape
    x, w, bias, mult = data(m, n, k, 1, rng)
    want = numpy_ref(x, w, bias, mult, 1)
    if xv:  # [K/4][N][4]: the 4 bytes of k = 4 k4 .. + 3 of column n, adjacent
        x = np.ascontiguousarray(x.reshape(k // 4, 4, n).transpose(0, 2, 1))
    return x, w, bias, mult, want


def callables(libs, pools, shape, rng, keep, wps):
    """{tag: call} of one shape in each build, each output checked equal to numpy's first; wps[tag]:
    its packed weight."""
    x, w, bias, mult, want = operands(shape, rng)
    calls = {}
    for t, lib in libs.items():
        calls[t], wps[t] = checked(lib, shape[0], pools[t], x, w, bias, mult, want, keep, f"{t} {shape[0]}")
    return calls


FLUSH_C = r"""
#include <immintrin.h>
void flush(const char *p, long n) { for (long i = 0; i < n; i += 64) _mm_clflush(p + i); _mm_mfence(); }
"""


def flusher(tmp):
    """flush(p, bytes): clflush of a buffer's lines."""
    src, so = os.path.join(tmp, "flush.c"), os.path.join(tmp, "flush.so")
    with open(src, "w") as f:
        f.write(FLUSH_C)
    subprocess.check_call(["cc", "-O2", "-msse2", "-fPIC", "-shared", "-o", so, src])
    fl = ctypes.CDLL(so).flush
    fl.argtypes = [P, ctypes.c_long]
    return fl


def timed(fn, repeat, cold, clock):
    """Median ms of repeat calls of fn on clock (cold: called before each, not timed)."""
    settle()
    for _ in range(2):
        fn()
    ts = []
    for _ in range(repeat):
        if cold is not None:
            cold()
        t0 = clock()
        fn()
        ts.append(clock() - t0)
    return float(np.median(ts)) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("base")
    ap.add_argument("branch")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--threads", type=int, default=THREADS)
    ap.add_argument("--only", default="", help="comma-separated names (r1..r12, r2d, s56, s28, s14); default all")
    ap.add_argument("--cold", action="store_true", help="the packed weight flushed from the caches before each timed call")
    ap.add_argument("--base-order", default="", choices=["", "-ws", "-tiles"], help="spec.ws of the base's kernels forced")
    ap.add_argument("--branch-order", default="", choices=["", "-ws", "-tiles"], help="the same for the branch's")
    ap.add_argument("--cpu", action="store_true", help="one thread, timed on the thread's CPU clock (a loaded machine)")
    a = ap.parse_args()
    if a.cpu:
        a.threads = 1
    clock = time.thread_time if a.cpu else time.perf_counter
    only = [n for n in a.only.split(",") if n]
    names = [g[0] for g in GEMMS] + [c[0] for c in CONVS]
    if any(n not in names for n in only):
        ap.error(f"--only: the names are {' '.join(names)}")
    gemms = [g for g in GEMMS if not only or g[0] in only]
    convs = [c for c in CONVS if not only or c[0] in only]
    tmp = tempfile.mkdtemp(prefix="harp-q1x1-ab-")
    libs = {"base": build(a.base, tmp, "base", gemms, convs, a.base_order),
            "branch": build(a.branch, tmp, "branch", gemms, convs, a.branch_order)}
    pools = {t: P(lib.hprt_pool_create(a.threads)) for t, lib in libs.items()}
    rng, keep = np.random.default_rng(0), []
    fl = flusher(tmp) if a.cold else None
    print("load average at the start:", " ".join(f"{v:.1f}" for v in os.getloadavg()), "(cold)" if a.cold else "(warm)",
          f"threads {a.threads}", "thread CPU clock" if a.cpu else "wall clock")
    tot = {"base": 0.0, "branch": 0.0}
    for shape in gemms + convs:
        wps = {}
        calls = callables(libs, pools, shape, rng, keep, wps)
        med = {k: [] for k in calls}
        for r in range(a.rounds):
            for k in (calls if r % 2 == 0 else reversed(list(calls))):
                cold = (lambda wp=wps[k]: fl(ptr(wp), wp.nbytes)) if fl else None
                med[k].append(timed(calls[k], a.repeat, cold, clock))
        mn = {k: min(v) for k, v in med.items()}
        for k in tot:
            tot[k] += mn[k]
        desc = f"{shape[1]}x{shape[2]}x{shape[3]}" + (" x4" if shape[4] == 1 and shape[0][0] == "r" else "")
        if shape[0][0] == "s":
            desc = f"{shape[4]}@{shape[2]}x{shape[3]}/2 K={shape[1]}"
        print(f"{shape[0]:4s} {desc:24s} base {mn['base']:.4f}  branch {mn['branch']:.4f}  branch/base {mn['branch'] / mn['base']:.3f}",
              flush=True)
    print(f"sum  base {tot['base']:.4f}  branch {tot['branch']:.4f}  branch/base {tot['branch'] / tot['base']:.3f}")
    print("load average at the end:", " ".join(f"{v:.1f}" for v in os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
