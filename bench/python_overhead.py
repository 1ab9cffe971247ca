#!/usr/bin/env python3
"""python_overhead.py — what harp's Python layer costs per call: the
median time of InferenceSession.run against the C API's own time for the
same run (harp_model_run_typed on the same buffers, timed in C), and
against onnxruntime's Python session on the same model, interleaved in one
process at the same thread count, each block of calls on idle cores
(settle.py).  Two models: a tiny one (one Add of 16
floats: the run is almost all overhead) and a larger one
(tests/models/small_cnn.onnx, or --model PATH).

    PYTHONPATH=build/python python3 bench/python_overhead.py [--threads 2] [--reps 2000] [--model m.onnx]

Goal (issue 26): under 20 us per call over the C API, and no slower than
onnxruntime's Python overhead.  Needs: the staged package (make), numpy,
onnx, onnxruntime.  Gives: a table on stdout.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "build", "python"))
import harp  # noqa: E402
import onnxruntime as ort  # noqa: E402
from settle import settle  # noqa: E402


def tiny_model():
    import onnx
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])], "tiny",
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, [16]) for n in "ab"],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16])])
    path = os.path.join(tempfile.mkdtemp(), "tiny_add.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def feeds_for(sess):
    rng = np.random.default_rng(0)
    out = {}
    for a in sess.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in a.shape]
        out[a.name] = rng.standard_normal(shape).astype(np.float32)
    return out


def per_call_us(fn, n):
    settle()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6


def measure(path, threads, reps, rounds):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    rs = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    hs = harp.InferenceSession(path, {"intra_op_num_threads": threads, "progress": False})
    feeds = feeds_for(rs)
    outs = [np.empty(s, d) for s, d in zip(hs._default.out_shape, hs._default.out_np)]
    b = hs._default
    inst = b.acquire()
    ins = [feeds[x[1]] for x in b.inputs]
    dtypes = [x[2] for x in b.inputs]
    got, want = hs.run(None, feeds), rs.run(None, feeds)
    assert all(np.allclose(g, w, rtol=1e-3, atol=1e-3) for g, w in zip(got, want)), "harp and onnxruntime disagree"
    rows = {"c": [], "py": [], "py_out": [], "ort": []}
    for _ in range(rounds):  # interleaved
        settle()
        rows["c"].append(inst.time_runs(ins, dtypes, b.in_bytes, outs, b.out_bytes, reps) / reps * 1e6)
        rows["py"].append(per_call_us(lambda: hs.run(None, feeds), reps))
        rows["py_out"].append(per_call_us(lambda: hs.run(None, feeds, out=outs), reps))
        rows["ort"].append(per_call_us(lambda: rs.run(None, feeds), reps))
    b.release(inst)
    return {k: statistics.median(v) for k, v in rows.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--model", default=os.path.join(HERE, "..", "tests", "models", "small_cnn.onnx"))
    a = ap.parse_args()
    print(f"harp {harp.__version__}, onnxruntime {ort.__version__}, {a.threads} threads, median of {a.rounds} rounds "
          f"x {a.reps} calls, us per call")
    print(f"{'model':<16} {'C API':>9} {'harp py':>9} {'py, out=':>9} {'overhead':>9} {'ort py':>9}")
    for name, path, reps in (("tiny Add[16]", tiny_model(), a.reps), (os.path.basename(a.model), a.model, max(50, a.reps // 10))):
        r = measure(path, a.threads, reps, a.rounds)
        print(f"{name:<16} {r['c']:9.2f} {r['py']:9.2f} {r['py_out']:9.2f} {r['py'] - r['c']:9.2f} {r['ort']:9.2f}")


if __name__ == "__main__":
    main()
