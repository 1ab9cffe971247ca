"""settle.py — the bench rule "each contender starts on idle cores", said once.

A peer's thread pool keeps its cores busy for a while after a call has
returned.  Measured as the process's CPU time in 25 ms windows of a sleep
right after one call (2026-11-29, 2 threads): onnxruntime's intra-op
workers spin some 50 ms (16, 11, 1 ms, then 0.1), OpenBLAS's pthreads
about 100 ms (numpy's 512^2 matmul: 13, 11, 12, 7 ms, then 0.1; its
default OPENBLAS_THREAD_TIMEOUT), oneDNN's OpenMP some 5 ms, OpenVINO's
TBB about 1 ms, harp's pool 0.04 ms.  A contender timed
while they spin runs on fewer cores (harp's int8 GEMM at r50_1x1_56: 0.128
ms right after onnxruntime, 0.070 ms with its spinning off).  So a benchmark
that times two contenders in one process, or one right after the other,
times each in a block of calls that starts with settle(): never call by
call, alternating.

Needs: numpy.  Gives: SETTLE_S, settle(), median_ms(fn, repeat, warmup, clock),
interleaved_ms(calls, rounds, repeat, warmup, clock, repeats).
"""
import time

import numpy as np

# Idle time before each contender's block: over the longest spin measured
# (OpenBLAS, ~100 ms) with room to spare.
SETTLE_S = 0.15


def settle():
    """Leave the cores idle SETTLE_S seconds, so other pools stop spinning."""
    time.sleep(SETTLE_S)


def median_ms(fn, repeat, warmup=3, clock=time.perf_counter):
    """Median milliseconds of `repeat` calls of fn, after settle() and
    `warmup` untimed calls; clock: wall (default) or e.g. time.process_time
    (a single thread's CPU time, on a loaded machine)."""
    settle()
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(repeat):
        t = clock()
        fn()
        ts.append(clock() - t)
    return float(np.median(ts)) * 1e3


def interleaved_ms(calls, rounds, repeat, warmup=1, clock=time.perf_counter, repeats=None):
    """{name: median ms over `rounds` rounds} for the contenders in `calls`
    ({name: fn}): each round times every contender in turn, a median_ms
    block of `repeat` calls each (repeats: {name: calls} for some), so load
    drifts hit them all alike."""
    med = {c: [] for c in calls}
    for _ in range(rounds):
        for c, fn in calls.items():
            med[c].append(median_ms(fn, (repeats or {}).get(c, repeat), warmup=warmup, clock=clock))
    return {c: float(np.median(v)) for c, v in med.items()}
