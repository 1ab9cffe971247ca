#!/usr/bin/env python3
"""Long differential-fuzzing runs outside CI.

    scripts/fuzz.py --seeds 2000 --start 1000 --jobs 2 --out fuzz-failures/ [--cuda]
                    [--minutes 30] [--features unary,binary,...]

Generates programs with tests/py/fuzz_models.py, runs each on the reference
interpreter and on the cpu and regions backends (with --cuda also the CUDA
translation unit for sm80 and sm90 on the CPU SIMT simulator, which needs
g++ and is slow), and writes every program that disagrees to OUT as
seed_N.harp with the problems as a comment block at the top.  HARP_BIN
names the CLI (default build/harp)."""
import argparse
import concurrent.futures as cf
import os
import sys
import tempfile
import time
import shutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "py"))
os.environ.setdefault("HARP_BIN", os.path.join(ROOT, "build", "harp"))
os.environ.setdefault("HARP_SOURCE_DIR", ROOT)

from fuzz_models import FEATURES, generate  # noqa: E402
from test_fuzz_backends import check, check_cuda  # noqa: E402


def program_of(path):
    """A Program for a saved .harp (its inputs from main's signature, the
    values from the .npz beside it when there is one)."""
    import re

    import numpy as np

    from fuzz_models import Program
    text = open(path).read()
    sig = re.search(r"graph main\((.*?)\)\s*->\s*\((.*?)\)\s*\{", text, re.S)
    ins = [(n, tuple(int(x) for x in dims.split(",") if x.strip()), dt, False)
           for n, dt, dims in re.findall(r"(\w+): (\w+)\[([^\]]*)\]", sig.group(1))]
    outs = [(n, dt, tuple(int(x) for x in dims.split(",") if x.strip()), 1.0)
            for n, dt, dims in re.findall(r"(\w+): (\w+)\[([^\]]*)\]", sig.group(2))]
    m = re.search(r"fuzz seed (\d+)", text)
    prog = Program(int(m.group(1)) if m else 0, text, ins, outs)
    npz = os.path.splitext(path)[0] + ".npz"
    if os.path.exists(npz):
        saved = dict(np.load(npz))
        prog.feeds = lambda: saved
    return prog


def one(seed, features, cuda):
    prog = generate(seed, features)
    d = tempfile.mkdtemp(prefix="harp_fuzz_")
    t = time.time()
    try:
        problems = check(prog, workdir=d)
        if cuda and not problems:
            problems = check_cuda(prog, d)
    except Exception as ex:  # a crash of the harness is a finding too
        problems = [("harness", repr(ex))]
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return seed, prog, problems, time.time() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=1000)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--out", default="fuzz-failures")
    ap.add_argument("--minutes", type=float, default=None, help="stop after this long")
    ap.add_argument("--cuda", action="store_true", help="also the CUDA code on the simulator (sm80, sm90)")
    ap.add_argument("--features", default=",".join(FEATURES))
    ap.add_argument("--repro", nargs="+", metavar="FILE.harp", help="rerun saved programs and print the problems")
    a = ap.parse_args()
    if a.repro:
        for path in a.repro:
            prog = program_of(path)
            d = tempfile.mkdtemp(prefix="harp_fuzz_")
            problems = check(prog, workdir=d)
            if a.cuda and not problems:
                problems = check_cuda(prog, d)
            print(f"{path}: {'ok' if not problems else ''} (outputs in {d})")
            for be, det in problems:
                print(f"  [{be}] {det}")
        return 0
    features = tuple(a.features.split(","))
    # Run a copy of the CLI, so a rebuild during a long run cannot break it.
    snap = os.path.join(tempfile.mkdtemp(prefix="harp_fuzz_bin_"), "harp")
    shutil.copy2(os.environ["HARP_BIN"], snap)
    os.environ["HARP_BIN"] = snap
    import harp_test
    harp_test.HARP = snap
    os.makedirs(a.out, exist_ok=True)
    t0, done, bad = time.time(), 0, 0
    with cf.ProcessPoolExecutor(a.jobs) as ex:
        seeds = iter(range(a.start, a.start + a.seeds))
        live = set()
        while True:
            while len(live) < 2 * a.jobs and (a.minutes is None or time.time() - t0 < 60 * a.minutes):
                s = next(seeds, None)
                if s is None:
                    break
                live.add(ex.submit(one, s, features, a.cuda))
            if not live:
                break
            fin, live = cf.wait(live, return_when=cf.FIRST_COMPLETED)
            for f in fin:
                seed, prog, problems, dt = f.result()
                text = prog.text
                done += 1
                if problems:
                    bad += 1
                    head = "".join(f"// [{be}] " + det.replace("\n", "\n//   ") + "\n" for be, det in problems)
                    with open(os.path.join(a.out, f"seed_{seed}.harp"), "w") as fo:
                        fo.write(head + text)
                    import numpy as np
                    np.savez(os.path.join(a.out, f"seed_{seed}.npz"), **prog.feeds())
                    print(f"seed {seed}: FAIL {', '.join(sorted({be for be, _ in problems}))}", flush=True)
                if done % 100 == 0:
                    print(f"{done} programs, {bad} failing, {time.time() - t0:.0f} s", flush=True)
    print(f"done: {done} programs, {bad} failing, {time.time() - t0:.0f} s; failures in {a.out}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
