"""settle.py — the bench rule "each contender starts on idle cores", said once.

A peer's thread pool keeps its cores busy for a while after a call has
returned: onnxruntime's intra-op workers spin some 10-40 ms (measured as
the process's CPU time during a sleep right after one run), OpenBLAS's
pthreads busy-wait until OPENBLAS_THREAD_TIMEOUT (numpy's matmul: some 18 ms
of CPU), oneDNN's OpenMP under OMP_WAIT_POLICY=active.  A contender timed
while they spin runs on fewer cores (harp's int8 GEMM at r50_1x1_56: 0.128
ms right after onnxruntime, 0.070 ms with its spinning off).  So a benchmark
that times two contenders in one process, or one right after the other,
times each in a block of calls that starts with settle(): never call by
call, alternating.

Needs: numpy.  Gives: SETTLE_S, settle(), median_ms(fn, repeat, warmup).
"""
import time

import numpy as np

# Idle time before each contender's block: over the longest spin measured
# (onnxruntime, ~40 ms on a quiet machine) with room to spare.
SETTLE_S = 0.1


def settle():
    """Leave the cores idle SETTLE_S seconds, so other pools stop spinning."""
    time.sleep(SETTLE_S)


def median_ms(fn, repeat, warmup=3):
    """Median milliseconds of `repeat` calls of fn, after settle() and
    `warmup` untimed calls."""
    settle()
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts)) * 1e3
