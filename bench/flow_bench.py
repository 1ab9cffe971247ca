#!/usr/bin/env python3
"""flow_bench.py — models with run-time control flow (host programs) through harp and onnxruntime.

    python3 bench/flow_bench.py [--harp build/harp] [--rounds 3] [--repeat 50] [--silero DIR]

Each model is timed in interleaved rounds:
  harp   harp bench MODEL.onnx --backend cpu (a host program: segments + If / Loop / Scan on the host)
  fold   the same with the control input fixed at import (--param), where that folds it (one static graph)
  ort    onnxruntime on MODEL.onnx, intra_op_num_threads=2
and each contender's best median is printed with the ratio ort/harp.  The
models: an If on a graph input, a Loop of 40 trips (tests/py/flow_models.py),
a recurrence h = tanh(x_t W + h U) over 64 steps as a Loop (Gather by the
iteration number) and as a Scan (both longer than harp unrolls), and with
--silero DIR silero_vad_op18_ifless.onnx (its If on the sample rate; the
input dims fixed to [1, 512], as --shape will do).  Outputs are compared
with onnxruntime's first.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "py"))
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import flow_models as fm  # noqa: E402
from onnx_models import init, mk, vi  # noqa: E402
from settle import median_ms, settle  # noqa: E402  (each contender's block on idle cores)

rng = np.random.default_rng(0)


def recurrence(as_scan, T=64, D=256):
    """h_t = tanh(x_t W + h_{t-1} U), every h_t stacked."""
    W, U = (rng.standard_normal((D, D)).astype(np.float32) * D ** -0.5 for _ in range(2))
    step = [mk("MatMul", ["xt", "W"], ["a"]), mk("MatMul", ["h", "U"], ["b"]), mk("Add", ["a", "b"], ["s"]), mk("Tanh", ["s"], ["h2"]),
            mk("Identity", ["h2"], ["o"])]
    if as_scan:
        body = fm.graph(step, [vi("h", [1, D]), vi("xt", [1, D])], [vi("h2", [1, D]), vi("o", [1, D])])
        g = fm.graph([mk("Scan", ["h0", "x"], ["hT", "hs"], body=body, num_scan_inputs=1)], [vi("h0", [1, D]), vi("x", [T, 1, D])],
                     [vi("hT", [1, D]), fm.vr("hs", 3)], [init("W", W), init("U", U)])
        feeds = {"h0": np.zeros((1, D), np.float32), "x": rng.standard_normal((T, 1, D)).astype(np.float32)}
    else:
        body = fm.graph([mk("Identity", ["cin"], ["cout"]), mk("Gather", ["x", "i"], ["xt"], axis=0)] + step,
                        [vi("i", [], fm.I64), vi("cin", [], fm.B), vi("h", [1, D])], [vi("cout", [], fm.B), vi("h2", [1, D]), vi("o", [1, D])])
        g = fm.graph([mk("Loop", ["M", "", "h0"], ["hT", "hs"], body=body)], [vi("M", [], fm.I64), vi("h0", [1, D]), vi("x", [T, 1, D])],
                     [vi("hT", [1, D]), fm.vr("hs", 3)], [init("W", W), init("U", U)])
        feeds = {"M": np.array(T, np.int64), "h0": np.zeros((1, D), np.float32),
                 "x": rng.standard_normal((T, 1, D)).astype(np.float32)}
    return fm.model(g), feeds


def silero(d):
    m = onnx.load(os.path.join(d, "silero_vad_op18_ifless.onnx"))
    for i in m.graph.input:
        dims = {"input": [1, 512], "state": [2, 1, 128]}.get(i.name)
        for dd, v in zip(i.type.tensor_type.shape.dim, dims or []):
            dd.Clear()
            dd.dim_value = v
    return m, {"input": rng.standard_normal((1, 512)).astype(np.float32) * 0.3, "state": np.zeros((2, 1, 128), np.float32),
               "sr": np.array(16000, np.int64)}


def harp_bench(harp, path, files, fold, repeat):
    settle()  # onnxruntime's pool may still spin in this process
    args = [harp, "bench", path, "--backend", "cpu", "--repeat", str(repeat), "--warmup", "5", "--json"]
    for k, f in files.items():
        args += ["--param" if k in fold else "--input", f"{k}={f}"]
    p = subprocess.run(args, capture_output=True, text=True, timeout=1200)
    if p.returncode:
        raise SystemExit(f"harp bench failed: {p.stderr[-600:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])["median_ms"]


def ort_bench(sess, feeds, repeat):
    return median_ms(lambda: sess.run(None, feeds), repeat, warmup=5)


def check(harp, path, files, m, want, d):
    out = os.path.join(d, "out")
    args = [harp, "run", path, "--backend", "cpu", "--out", out]
    for k, f in files.items():
        args += ["--input", f"{k}={f}"]
    p = subprocess.run(args, capture_output=True, text=True, timeout=1200)
    if p.returncode:
        raise SystemExit(f"harp run failed: {p.stderr[-600:]}")
    return max(float(np.abs(np.load(os.path.join(out, o.name + ".npy")) - w).max()) for o, w in zip(m.graph.output, want))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--harp", default=os.path.join(HERE, "..", "build", "harp"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--silero", default=None, help="directory holding silero_vad_op18_ifless.onnx")
    a = ap.parse_args()
    models = {"if_graph_input": (fm.if_outer, {"c": np.array(True), "x": rng.standard_normal((2, 3)).astype(np.float32)}, {"c"}),
              "loop_40_trips": (fm.loop_trip, fm.feeds()["loop_trip"][1] | {"M": np.array(40, np.int64)}, set()),
              "rnn_loop_64x256": (*recurrence(False), set()), "rnn_scan_64x256": (*recurrence(True), set())}
    if a.silero:
        models["silero_vad_op18_ifless"] = (*silero(a.silero), {"sr"})
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 2
    print(f"{'model':26s} {'harp ms':>9s} {'fold ms':>9s} {'ort ms':>9s} {'ort/harp':>9s}  max |harp - ort|")
    for name, (m, feeds, fold) in models.items():
        d = tempfile.mkdtemp(prefix="flow_bench_")
        path = os.path.join(d, name + ".onnx")
        onnx.save(m, path)
        files = {}
        for k, v in feeds.items():
            files[k] = os.path.join(d, k + ".npy")
            np.save(files[k], v)
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        err = check(a.harp, path, files, m, sess.run(None, feeds), d)
        best = {"harp": 1e9, "fold": 1e9, "ort": 1e9}
        for _ in range(a.rounds):
            best["harp"] = min(best["harp"], harp_bench(a.harp, path, files, set(), a.repeat))
            if fold:
                best["fold"] = min(best["fold"], harp_bench(a.harp, path, files, fold, a.repeat))
            best["ort"] = min(best["ort"], ort_bench(sess, feeds, a.repeat))
        fold_s = f"{best['fold']:9.4f}" if fold else f"{'-':>9s}"
        print(f"{name:26s} {best['harp']:9.4f} {fold_s} {best['ort']:9.4f} {best['ort'] / best['harp']:9.2f}  {err:.2e}", flush=True)


if __name__ == "__main__":
    main()
