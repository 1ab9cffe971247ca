#!/usr/bin/env python3
"""knob_ab.py — one model under several knob settings (harp's A/B switches, docs/options.md), in one process,
interleaved: e.g. the int8 kernels' loop orders.

    python3 bench/knob_ab.py MODEL.onnx --var tiles:int8_order=tiles --var auto: [--rounds 5] [--repeat 20]
                             [--threads 1] [--lib build/python]

Needs: harp's Python package as built (build/python), numpy.
Gives: per variant (NAME:knob=v,knob=v) the outputs' largest difference from the first variant's, then
       the min and median over rounds of each round's median ms and the ratio to the first.  One thread
       (the default): each run timed on the thread's CPU clock (time descheduled not counted: per-model
       figures on a loaded machine); more: wall clock.
"""
import argparse, sys, time, os, json
import numpy as np
ap = argparse.ArgumentParser()
ap.add_argument("model"); ap.add_argument("--rounds", type=int, default=5); ap.add_argument("--repeat", type=int, default=20)
ap.add_argument("--threads", type=int, default=1); ap.add_argument("--var", action="append", default=[], help="name:knob=v,knob=v")
ap.add_argument("--lib", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "python"))
a = ap.parse_args()
sys.path.insert(0, a.lib)
import harp
vars_ = {}
for v in a.var or ["auto:"]:
    name, _, ks = v.partition(":")
    knobs = dict(kv.split("=") for kv in ks.split(",") if kv)
    vars_[name] = harp.InferenceSession(a.model, sess_options={"intra_op_num_threads": a.threads, "knobs": knobs})
s0 = next(iter(vars_.values()))
inp = s0.get_inputs()[0]
x = np.random.default_rng(0).standard_normal([d if isinstance(d, int) else 1 for d in inp.shape]).astype(np.float32)
feeds = {inp.name: x}
outs = {k: s.run(None, feeds)[0] for k, s in vars_.items()}
ref = next(iter(outs.values()))
for k, o in outs.items():
    print(k, "max |diff| vs first:", float(np.max(np.abs(o.astype(np.float64) - ref))))
clock = time.thread_time if a.threads == 1 else time.perf_counter
med = {k: [] for k in vars_}
for r in range(a.rounds):
    order = list(vars_) if r % 2 == 0 else list(reversed(list(vars_)))
    for k in order:
        s = vars_[k]
        for _ in range(2): s.run(None, feeds)
        ts = []
        for _ in range(a.repeat):
            t0 = clock(); s.run(None, feeds); ts.append(clock() - t0)
        med[k].append(float(np.median(ts)) * 1e3)
print("load", os.getloadavg(), "threads", a.threads, "clock", "thread cpu" if a.threads == 1 else "wall")
first = next(iter(vars_))
for k in vars_:
    print(f"{k:10s} min {min(med[k]):.3f} ms  median {np.median(med[k]):.3f}  rounds {' '.join(f'{v:.2f}' for v in med[k])}  ratio(min) {min(med[k]) / min(med[first]):.3f}")
