#!/usr/bin/env python3
"""test_python_threads.py — one session, 8 Python threads: every result
equals the single-threaded one (numpy's reference for the model), the
runs overlap (the GIL is released: a pure-Python thread keeps running
while a long run is in C), the pool grows to the concurrency and a
pool_size caps it; the progress callback sees every stage in order and a
plain progress line appears for compiles over a second when stderr is not
a TTY."""
import os
import subprocess
import sys
import tempfile
import threading
import time

from harp_py import MODELS, STAGE, Suite, harp, np

s = Suite("python_threads")
rng = np.random.default_rng(3)
N = 256
DSL = f"""graph main(a: f32[{N}, {N}], b: f32[{N}, {N}]) -> (c: f32[{N}, {N}]) {{
    c = relu(matmul(a, b))
    return c
}}
"""
path = os.path.join(tempfile.mkdtemp(), "mm.harp")
with open(path, "w") as f:
    f.write(DSL)
# threads per instance: an instance on n threads starts n - 1 workers (the
# caller is the n-th); tier0=off, so that the instance is the object's at
# once (under tier 0 it comes with the object, a background build later)
def os_threads():
    return len(os.listdir("/proc/self/task"))


for n in (1, 3):
    before = os_threads()
    t = harp.InferenceSession(path, {"intra_op_num_threads": n, "knobs": {"tier0": "off"}})
    s.check(f"intra_op_num_threads={n}: {n - 1} worker threads", os_threads() - before == n - 1, f"{os_threads() - before}")
    t.close()

sess = harp.InferenceSession(path, {"intra_op_num_threads": 1})
feeds = [{"a": rng.standard_normal((N, N)).astype(np.float32), "b": rng.standard_normal((N, N)).astype(np.float32)}
         for _ in range(8)]
want = [np.maximum(f["a"].astype(np.float64) @ f["b"].astype(np.float64), 0) for f in feeds]
errors, results = [], [None] * 8
start = threading.Barrier(8)


def worker(t):
    try:
        start.wait()
        for rep in range(12):
            k = (t + rep) % 8
            y = sess.run(None, feeds[k])[0]
            if not np.allclose(y, want[k], rtol=1e-4, atol=1e-3):
                errors.append(f"thread {t} rep {rep}: max |diff| {np.abs(y - want[k]).max()}")
        results[t] = True
    except Exception as ex:  # noqa: BLE001
        errors.append(f"thread {t}: {type(ex).__name__}: {ex}")


threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
s.check("8 threads on one session: every result right", not errors and all(results), "; ".join(errors[:3]))
s.check("the pool grew with the concurrency", 1 < len(sess._default.all) <= 8, str(len(sess._default.all)))

# the GIL is released during a run: a Python counter advances while one long run is in C
big = f"""graph main(a: f32[1024, 1024], b: f32[1024, 1024]) -> (c: f32[1024, 1024]) {{
    c = matmul(a, b)
    return c
}}
"""
bp = os.path.join(os.path.dirname(path), "big.harp")
with open(bp, "w") as f:
    f.write(big)
bs = harp.InferenceSession(bp, {"intra_op_num_threads": 1})
A = np.ones((1024, 1024), np.float32)
bs.run(None, {"a": A, "b": A})
ticks, stop = [0], threading.Event()


def spin():
    while not stop.is_set():
        ticks[0] += 1


sp = threading.Thread(target=spin)
sp.start()
time.sleep(0.05)
t0, before = time.perf_counter(), ticks[0]
for _ in range(3):
    bs.run(None, {"a": A, "b": A})
during, elapsed = ticks[0] - before, time.perf_counter() - t0
stop.set()
sp.join()
s.check("the GIL is released during run", during > 1000, f"{during} ticks in {elapsed:.3f} s")

# pool_size caps the instances; callers wait for one
capped = harp.InferenceSession(path, {"pool_size": 2, "intra_op_num_threads": 1})
threads = [threading.Thread(target=lambda k=k: capped.run(None, feeds[k])) for k in range(6)]
for t in threads:
    t.start()
for t in threads:
    t.join()
s.check("pool_size=2 caps the instances", len(capped._default.all) <= 2, str(len(capped._default.all)))

# the progress callback: every stage once, in order, fractions rising to 1
seen = []
harp.InferenceSession(os.path.join(MODELS, "small_cnn.onnx"),
                      {"progress": lambda st, fr: seen.append((st, fr)), "cache_dir": tempfile.mkdtemp()})
names = [x[0] for x in seen]
s.check("progress: load first, build last", names[:1] == ["load"] and names[-1:] == ["build"], str(names))
s.check("progress: fractions rise to 1", all(a[1] <= b[1] for a, b in zip(seen, seen[1:])) and seen[-1][1] == 1.0, str(seen))
s.check("progress: each stage once", len(names) == len(set(names)), str(names))

# a plain line on stderr (not a TTY) for a compile over a second; none for a quick one
code = ("import harp, tempfile, time, sys\n"
        "slow = lambda st, fr: time.sleep(0.25) if st != 'build' else None\n"
        "p = harp.session._Progress('m', True); p.t0 -= 2; p('regions', 0.5); p.close()\n"
        "q = harp.session._Progress('m', True); q('regions', 0.5); q.close()\n")
r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=STAGE))
s.check("a progress line for a compile over a second", r.stderr.count("harp: compiling m: regions done (50%") == 1, r.stderr)
s.close()
