#!/usr/bin/env python3
"""qconv_ab.py — ResNet-50's int8 3x3 convs (bench/qgemm_ab.py's list) on the VNNI kernel under several
generators and loop orders, in one process, interleaved; the packed weight warm or flushed before each call.

    python3 bench/qconv_ab.py TAG:QGEMM_GEN:FLAG[:EDIT] [TAG:QGEMM_GEN:FLAG[:EDIT] ...] [--only c14,s28]
                              [--rounds 5] [--repeat 50] [--threads 2] [--cold] [--cpu]

    e.g. the two loop orders of one build, and what the B pack costs the tiles' order:
    python3 bench/qconv_ab.py tiles:build/qgemm_gen:--vnni-tiles ws:build/qgemm_gen:--vnni-ws --cold
    python3 bench/qconv_ab.py all:build/qgemm_gen:--vnni-tiles nopk:build/qgemm_gen:--vnni-tiles:nopack --only c56,c28

Needs: qgemm_gen binaries (`make -C bench BUILD=... $BUILD/qgemm_gen`), a C compiler, numpy.
Gives: per conv the min over rounds of each round's median ms per variant and its ratio to the first;
       every output first checked equal to numpy's.  FLAG is qgemm_gen's: --vnni (the order by size),
       --vnni-ws, --vnni-tiles.  --cold: the packed weight flushed from the caches before each timed
       call (as in a whole run, whose weights outgrow the caches); --cpu: one thread's CPU clock (time
       descheduled not counted: per-kernel figures on a loaded machine; use with --threads 1).
       EDIT (timing only, the output then not checked; the tiles' order): nopack, the AVX-512 variant's
       B blocks never packed (the tiles read whatever the scratch holds: the pack's cost); noil4, the
       pack's 4-row interleave ($P_il4r's unpacks and lane shuffles) replaced by plain stores.
"""
import argparse
import ctypes
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from q1x1_ab import flusher, timed  # noqa: E402
from qgemm import P, conv_data, load_lib, ptr  # noqa: E402
from qgemm_ab import CONVS  # noqa: E402


def edit(src, what):
    """The generated C at src edited for timing (EDIT in the usage)."""
    with open(src) as f:
        c = f.read()
    if what == "nopack":
        c, n = re.subn(r"if \(cx->pjb\[tid\] != jb\) \w+_avx512_pkb\(cx, jb, B\), cx->pjb\[tid\] = jb;", "cx->pjb[tid] = jb;", c)
    elif what == "noil4":
        c, n = re.subn(r"(void \w+_avx512_il4r\([^)]*\) \{\n  \{\n)(.*?)(    _mm512_storeu_si512\(\(void \*\)\(t \+ 0\), u0\);)",
                       lambda m: m.group(1) + "    __m512i u0 = a0, u1 = a1, u2 = a2, u3 = a3;\n    (void)x;\n" + m.group(3), c, flags=re.S)
    else:
        sys.exit(f"qconv_ab.py: unknown edit {what}")
    if not n:
        sys.exit(f"qconv_ab.py: edit {what} found nothing to change")
    with open(src, "w") as f:
        f.write(c)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("var", nargs="+", help="TAG:QGEMM_GEN:FLAG")
    ap.add_argument("--only", default="c14,s28", help="comma-separated conv names (c56 c28 c14 c7 s56 s28 s14)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cold", action="store_true", help="the packed weight flushed before each timed call")
    ap.add_argument("--cpu", action="store_true", help="time on the calling thread's CPU clock")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="harp-qconv-ab-")
    convs = [c for c in CONVS if c[0] in a.only.split(",")]
    if not convs:
        ap.error(f"--only: the names are {' '.join(c[0] for c in CONVS)}")
    libs, edited = {}, set()
    for v in a.var:
        tag, gen, flag, *ed = v.split(":")
        src = os.path.join(tmp, tag + ".c")
        args = [flag, src]
        for name, c, h, w, co, ks, st, pd in convs:
            args += ["conv", name] + [str(x) for x in (c, h, w, co, ks, st, pd)]
        if ed:  # generated, edited, then built
            subprocess.check_call([gen] + args)
            edit(src, ed[0])
            edited.add(tag)
            gen, args = "true", []
        libs[tag] = load_lib(gen, args, src, os.path.join(tmp, tag + ".so"))
    pools = {t: P(lib.hprt_pool_create(a.threads)) for t, lib in libs.items()}
    fl = flusher(tmp) if a.cold else None
    clock = time.thread_time if a.cpu else time.perf_counter
    rng, keep = np.random.default_rng(0), []
    print("load average at the start:", " ".join(f"{v:.1f}" for v in os.getloadavg()), "(cold)" if a.cold else "(warm)",
          f"{a.threads} thread(s)", "CPU clock" if a.cpu else "wall clock")
    for name, c, h, w, co, ks, st, pd in convs:
        x, wt, bias, mult, want, oh, ow = conv_data(c, h, w, co, ks, st, pd, rng)
        calls, wps = {}, {}
        for t, lib in libs.items():
            q, qs, qp = getattr(lib, name), getattr(lib, name + "_wsize"), getattr(lib, name + "_pack")
            q.argtypes, qs.restype, qp.argtypes = [P] * 4, ctypes.c_long, [P] * 4
            wp = np.zeros(qs() // 4 + 16, dtype=np.int32)
            assert qp(ptr(wt), ptr(bias), ptr(mult), ptr(wp)) == 0
            y = np.zeros((co, oh * ow), dtype=np.uint8)
            assert q(pools[t], ptr(wp), ptr(x), ptr(y)) == 0, f"{t} {name}: failed"
            assert t in edited or np.array_equal(y, want), f"{t} {name}: wrong output"
            keep += [wp, y, x]
            wps[t] = wp
            calls[t] = (lambda q=q, wp=wp, y=y, pool=pools[t], x=x: q(pool, ptr(wp), ptr(x), ptr(y)))
        med = {k: [] for k in calls}
        for r in range(a.rounds):
            for k in (list(calls) if r % 2 == 0 else list(reversed(list(calls)))):
                cold = (lambda wp=wps[k]: fl(ptr(wp), wp.nbytes)) if fl else None
                med[k].append(timed(calls[k], a.repeat, cold, clock))
        mn = {k: min(v) for k, v in med.items()}
        k0 = next(iter(mn))
        n = ((h + 2 * pd - ks) // st + 1) * ((w + 2 * pd - ks) // st + 1)
        print(f"{name} {co}x{n}x{c * ks * ks}: " + "  ".join(f"{k} {mn[k]:.4f} ({mn[k] / mn[k0]:.3f})" for k in mn), flush=True)
    print("load average at the end:", " ".join(f"{v:.1f}" for v in os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
