#!/usr/bin/env python3
"""rnn_stream.py — streaming recurrent layers: one time step per call, the
state fed back, harp against onnxruntime in one process, interleaved.

    python3 bench/rnn_stream.py [--harp build/harp] [--rounds 5] [--calls 2000] [--only lstm,gru,silero]
                                [--threads 2] [--silero /tmp/rm/m/silero_vad_v6.onnx]

Models: an ONNX LSTM and a GRU (linear_before_reset = 1, as PyTorch
exports it) with sequence length 1, batch 1, input size = hidden size, at
hidden sizes 64, 128, 256, 512 (weights as initializers; h, c inputs and
Y_h, Y_c outputs); and silero VAD v6 (its whole graph, one 576-sample
frame per call: the conv front end and its LSTM step, h and c of [1, 1, 128]),
its sequence length fixed to 1 in a copy of the file.

Each call copies the state outputs into the state inputs, for both.  harp
runs its `harp compile` package (model.c built as a shared object with
-O3 -march=native, called through ctypes: model_run); onnxruntime runs
run_with_iobinding on bound numpy buffers (its lowest-overhead Python path),
intra_op_num_threads = threads, harp with HARP_NUM_THREADS = threads.
Every round times `calls` calls of each, alternating (each on idle cores,
settle.py, and after 20 calls, so neither finds the other's threads
spinning); the table gives the
median of the rounds' per-call means, in microseconds, and the ratio
ort / harp (> 1: harp faster).  `ort floor` is an Identity model through the
same onnxruntime path: the overhead of a call.  The outputs of the two are
compared after the first call.
"""
import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from settle import settle  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def rnn_model(op, H, path):
    G = {"LSTM": 4, "GRU": 3}[op]
    rng = np.random.default_rng(0)
    W = (rng.standard_normal((1, G * H, H)) / np.sqrt(H)).astype(np.float32)
    R = (rng.standard_normal((1, G * H, H)) / np.sqrt(H)).astype(np.float32)
    B = (rng.standard_normal((1, 2 * G * H)) * 0.1).astype(np.float32)
    ins = ["x", "W", "R", "B", "", "h"] + (["c"] if op == "LSTM" else [])
    outs = ["y", "hn"] + (["cn"] if op == "LSTM" else [])
    attrs = {"hidden_size": H}
    if op == "GRU":
        attrs["linear_before_reset"] = 1
    state = [("h", [1, 1, H])] + ([("c", [1, 1, H])] if op == "LSTM" else [])
    g = helper.make_graph([helper.make_node(op, ins, outs, **attrs)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, H])] +
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in state],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs],
                          [numpy_helper.from_array(W, "W"), numpy_helper.from_array(R, "R"), numpy_helper.from_array(B, "B")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), path)
    feeds = {"x": rng.standard_normal((1, 1, H)).astype(np.float32)}
    for n, s in state:
        feeds[n] = np.zeros(s, np.float32)
    loop = {"hn": "h", "cn": "c"} if op == "LSTM" else {"hn": "h"}  # output -> the input it feeds back
    return feeds, loop


def silero_model(src, path):
    m = onnx.load(src)
    for i in m.graph.input:
        if i.name == "input":
            for d, v in zip(i.type.tensor_type.shape.dim, [1, 576]):
                d.ClearField("dim_param")
                d.dim_value = v
    onnx.save(m, path)
    rng = np.random.default_rng(1)
    feeds = {"input": (rng.standard_normal((1, 576)) * 0.1).astype(np.float32),
             "h": np.zeros((1, 1, 128), np.float32), "c": np.zeros((1, 1, 128), np.float32)}
    return feeds, {"hn": "h", "cn": "c"}


class Harp:
    """A `harp compile` package as a shared object, called through ctypes."""

    def __init__(self, harp, path, work):
        pkg = os.path.join(work, "pkg")
        subprocess.run([harp, "compile", path, "--target", "cpu", "-o", pkg], check=True, capture_output=True)
        so = os.path.join(pkg, "libmodel.so")
        subprocess.run(["cc", "-O3", "-march=native", "-fopenmp-simd", "-fno-math-errno", "-fPIC", "-shared", "-o", so,
                        os.path.join(pkg, "model.c"), "-lm", "-lpthread"], check=True)
        self.lib = ctypes.CDLL(so)
        L = self.lib
        L.model_init.restype = ctypes.c_void_p
        L.model_init.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        L.model_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        L.model_free.argtypes = [ctypes.c_void_p]
        self.w = np.fromfile(os.path.join(pkg, "weights.bin"), np.uint8)
        self.m = L.model_init(self.w.ctypes.data, self.w.size)
        if not self.m:
            raise RuntimeError("model_init failed")
        self.inputs = self._names("model_input_names", L.model_num_inputs())
        self.outputs = self._names("model_output_names", L.model_num_outputs())

    def _names(self, sym, n):
        arr = (ctypes.c_char_p * (n + 1)).in_dll(self.lib, sym)
        return [arr[i].decode() for i in range(n)]

    def bind(self, feeds, out_shapes):
        self.ins = [np.ascontiguousarray(feeds[n]) for n in self.inputs]
        self.outs = {n: np.zeros(out_shapes[n], np.float32) for n in self.outputs}
        self.pin = (ctypes.c_void_p * len(self.ins))(*[a.ctypes.data for a in self.ins])
        self.pout = (ctypes.c_void_p * len(self.outputs))(*[self.outs[n].ctypes.data for n in self.outputs])
        self.byname = dict(zip(self.inputs, self.ins))

    def call(self, loop):
        rc = self.lib.model_run(self.m, self.pin, self.pout)
        for o, i in loop.items():
            np.copyto(self.byname[i], self.outs[o].reshape(self.byname[i].shape))
        return rc


class Ort:
    def __init__(self, path, threads):
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.log_severity_level = 3
        self.s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])

    def bind(self, feeds):
        self.ins = {k: np.ascontiguousarray(v).copy() for k, v in feeds.items()}
        first = self.s.run(None, self.ins)
        self.outs = {o.name: np.zeros_like(v) for o, v in zip(self.s.get_outputs(), first)}
        self.b = self.s.io_binding()
        for k, v in self.ins.items():
            self.b.bind_cpu_input(k, v)
        for k, v in self.outs.items():
            self.b.bind_output(k, "cpu", 0, np.float32, list(v.shape), v.ctypes.data)
        return {k: v.shape for k, v in self.outs.items()}

    def call(self, loop):
        self.s.run_with_iobinding(self.b)
        for o, i in loop.items():
            np.copyto(self.ins[i], self.outs[o].reshape(self.ins[i].shape))


def identity_model(path):
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 128])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 128])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), path)
    return {"x": np.zeros((1, 128), np.float32)}


def timed(fn, loop, calls):
    """Per-call microseconds of `calls` calls, on idle cores (settle.py): the
    other contender's pool threads stop spinning first (onnxruntime's spin for
    a while after each run and took a core from harp's round)."""
    settle()
    for _ in range(20):
        fn(loop)
    t = time.perf_counter()
    for _ in range(calls):
        fn(loop)
    return (time.perf_counter() - t) / calls * 1e6


def bench(name, path, feeds, loop, args, work):
    o = Ort(path, args.threads)
    shapes = o.bind(feeds)
    h = Harp(args.harp, path, work)
    h.bind(feeds, shapes)
    o.call(loop), h.call(loop)  # one step each, same state in: compare
    err = max(float(np.abs(h.outs[k] - o.outs[k]).max()) for k in shapes)
    for _ in range(200):
        o.call(loop), h.call(loop)
    th, to = [], []
    for _ in range(args.rounds):
        th.append(timed(h.call, loop, args.calls))
        to.append(timed(o.call, loop, args.calls))
    mh, mo = statistics.median(th), statistics.median(to)
    print(f"| {name} | {mh:8.2f} | {mo:8.2f} | {mo / mh:5.2f} | {err:.1e} |", flush=True)
    h.lib.model_free(h.m)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--harp", default=os.path.join(HERE, "..", "build", "harp"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", default="lstm,gru,silero")
    ap.add_argument("--sizes", default="64,128,256,512")
    ap.add_argument("--silero", default="/tmp/rm/m/silero_vad_v6.onnx")
    args = ap.parse_args()
    os.environ["HARP_NUM_THREADS"] = str(args.threads)
    only = args.only.split(",")
    work = tempfile.mkdtemp(prefix="rnn_stream_")
    print(f"onnxruntime {ort.__version__}, {args.threads} threads, {args.rounds} rounds of {args.calls} calls; us per call\n")
    print("| model | harp us | ort us | ort/harp | max abs diff |\n|---|---|---|---|---|")
    f = identity_model(os.path.join(work, "id.onnx"))
    o = Ort(os.path.join(work, "id.onnx"), args.threads)
    o.bind(f)
    floor = statistics.median(timed(o.call, {}, args.calls) for _ in range(args.rounds))
    for op in ("LSTM", "GRU"):
        if op.lower() not in only:
            continue
        for H in [int(x) for x in args.sizes.split(",")]:
            path = os.path.join(work, f"{op}{H}.onnx")
            feeds, loop = rnn_model(op, H, path)
            bench(f"{op} H={H}", path, feeds, loop, args, os.path.join(work, f"{op}{H}"))
    if "silero" in only and os.path.exists(args.silero):
        path = os.path.join(work, "silero.onnx")
        feeds, loop = silero_model(args.silero, path)
        bench("silero VAD v6 (1 frame)", path, feeds, loop, args, os.path.join(work, "silero"))
    print(f"\nort floor (Identity through run_with_iobinding): {floor:.2f} us per call")


if __name__ == "__main__":
    sys.exit(main())
