#!/usr/bin/env python3
"""qamx.py — harp's int8 GEMM (cgen_qgemm.c) with its AMX-INT8 variant
(cgen_qamx.c, tdpbusd / tdpbsud) against the same kernel without it (VNNI
vpdpbusd), per GEMM and per conv, interleaved in one process, 2 threads;
where the line between them lies (cg_qamx_pays).

    make -C bench qamx          (= python3 bench/qamx.py BUILD/qgemm_gen [--rounds 3] [--repeat 100])

Both outputs are first checked equal to numpy's (int64 products, fp32
requantization, round half to even) on every element.  Printed: medians
over rounds (each a median of --repeat calls) in ms, and vnni / amx (> 1:
AMX is faster).  Skips without AMX-INT8 (the AMX variant would not run).
"""
import argparse
import ctypes
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qgemm import P, THREADS, ZA, ZY, conv_data, data, numpy_ref, ptr  # noqa: E402
from settle import interleaved_ms  # noqa: E402

# name, M, N, K, weight is A: the int8 models' contractions, and small ones for the line
SHAPES = [
    ("r50_1x1_56", 64, 3136, 256, 1),
    ("r50_1x1_14", 1024, 196, 256, 1),
    ("r50_1x1_7", 2048, 49, 512, 1),
    ("mnv2_1x1_28", 192, 784, 32, 1),
    ("mnv2_1x1_7", 960, 49, 160, 1),
    ("bert_qkv", 128, 768, 768, 0),
    ("bert_ffn1", 128, 3072, 768, 0),
    ("bert_ffn2", 128, 768, 3072, 0),
    ("s16x256x256", 16, 256, 256, 0),
    ("s32x64x64", 32, 64, 64, 0),
    ("s64x64x32", 64, 64, 32, 1),
    ("s16x64x16", 16, 64, 16, 1),
    ("s9x64x64", 9, 64, 64, 0),
    ("s64x16x128", 64, 16, 128, 1),
    ("s32x256x256", 32, 256, 256, 0),
    ("s64x256x256", 64, 256, 256, 1),
    ("s128x128x128", 128, 128, 128, 0),
    ("s64x512x128", 64, 512, 128, 1),
    ("s96x784x48", 96, 784, 48, 1),
    ("s96x784x96", 96, 784, 96, 1),
    ("s144x3136x24", 144, 3136, 24, 1),
    ("s32x3136x64", 32, 3136, 64, 1),
]
CONVS = [  # name, C, H, W, COUT, window, stride, pad
    ("r50_3x3_56c", 64, 56, 56, 64, 3, 1, 1),
    ("r50_3x3_14c", 256, 14, 14, 256, 3, 1, 1),
    ("r50_3x3_7c", 512, 7, 7, 512, 3, 1, 1),
    ("r50_stem", 3, 224, 224, 64, 7, 2, 3),
    ("mnv2_stem", 3, 224, 224, 32, 3, 2, 1),
]


def build(gen, tmp, only):
    args = ["--amx"]
    src, so = os.path.join(tmp, "qamx.c"), os.path.join(tmp, "qamx.so")
    args.append(src)
    for name, m, n, k, wa in SHAPES:
        if only not in name:
            continue
        args += [name, str(m), str(n), str(k), str(wa), "0", "u8", "u8", str(ZA), str(ZY), "0", "255"]
    for name, c, h, w, co, ks, st, pd in CONVS:
        if only not in name:
            continue
        args += ["conv", name] + [str(v) for v in (c, h, w, co, ks, st, pd)]
    subprocess.check_call([gen] + args)
    subprocess.check_call(["cc", "-O3", "-fPIC", "-shared", "-o", so, src, "-lm", "-lpthread"])
    lib = ctypes.CDLL(so)
    lib.hprt_pool_create.restype = P
    lib.hprt_pool_create.argtypes = [ctypes.c_int]
    return lib


def callables(lib, pool, name, x, w, bias, mult, yshape, want):
    """name and name_amx as callables on x, after the exactness check."""
    calls, keep, equal = {}, [], []
    for tag, fn in (("vnni", name), ("amx", name + "_amx")):
        q, qsize, qpack = getattr(lib, fn), getattr(lib, fn + "_wsize"), getattr(lib, fn + "_pack")
        q.argtypes, qsize.restype, qpack.argtypes = [P] * 4, ctypes.c_long, [P] * 4
        if tag == "amx":
            on = getattr(lib, fn + "_amx_on")
            assert on() == 1, f"{fn}: the AMX variant does not run"
        wp = np.zeros(qsize() // 4 + 16, dtype=np.int32)
        assert qpack(ptr(w), ptr(bias), ptr(mult), ptr(wp)) == 0
        y = np.zeros(yshape, dtype=np.uint8)
        assert q(pool, ptr(wp), ptr(x), ptr(y)) == 0
        equal.append(float(np.mean(y == want)))
        keep += [wp, y]
        calls[tag] = (lambda q=q, wp=wp, y=y: q(pool, ptr(wp), ptr(x), ptr(y)))
    return calls, min(equal), keep


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("gen", help="BUILD/qgemm_gen")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=100)
    ap.add_argument("--only", default="", help="the shapes whose name contains this")
    a = ap.parse_args()
    if "amx_int8" not in open("/proc/cpuinfo").read():
        print("skip: no AMX-INT8 on this CPU")
        return 0
    print("load average at the start:", " ".join(f"{v:.1f}" for v in os.getloadavg()))
    lib = build(a.gen, tempfile.mkdtemp(prefix="harp-qamx-"), a.only)
    pool = P(lib.hprt_pool_create(THREADS))
    rng = np.random.default_rng(0)
    print(f"{'shape':12} {'M':>5} {'N':>5} {'K':>5} {'MNK':>9} {'equal':>6} {'vnni ms':>8} {'amx ms':>8} {'vnni/amx':>8}")
    bad = 0
    jobs = []
    for name, m, n, k, wa in [s for s in SHAPES if a.only in s[0]]:
        x, w, bias, mult = data(m, n, k, wa, rng)
        jobs.append((name, m, n, k, x, w, bias, mult, numpy_ref(x, w, bias, mult, wa)))
    for name, c, h, w_, co, ks, st, pd in [c for c in CONVS if a.only in c[0]]:
        x, wt, bias, mult, want, oh, ow = conv_data(c, h, w_, co, ks, st, pd, rng)
        jobs.append((name, co, oh * ow, c * ks * ks, x, wt, bias, mult, want))
    for name, m, n, k, x, w, bias, mult, want in jobs:
        calls, equal, keep = callables(lib, pool, name, x, w, bias, mult, want.shape, want)
        bad += equal != 1.0
        t = interleaved_ms(calls, a.rounds, a.repeat)
        print(f"{name:12} {m:5} {n:5} {k:5} {m * n * k:9} {equal:6.4f} {t['vnni']:8.4f} {t['amx']:8.4f} {t['vnni'] / t['amx']:8.2f}")
        del keep
    print("load average at the end:", " ".join(f"{v:.1f}" for v in os.getloadavg()))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
