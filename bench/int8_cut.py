#!/usr/bin/env python3
"""int8_cut.py — where harp's int8 run of a QDQ model first departs from onnxruntime's.

    python3 bench/int8_cut.py QDQ.onnx [--harp build/harp] [--cuts a0,c2,a3 | --cuts all] [--seed 2]

A diagnostic, not a benchmark or a test.  For each cut (the name before
"_QuantizeLinear_Output" of an activation's QuantizeLinear, as
onnxruntime's quantize_static names them), the model up to the
DequantizeLinear that reads that tensor is extracted (onnx.utils), so that
harp fuses and requantizes it as in the whole model (graph outputs added to
the whole model would change harp's fusion), and run by harp (cpu) and by
onnxruntime (its int8 fusions on) on one random N(0,1) input.  Printed per cut:
the fraction of the integers that differ, the largest difference in steps
and the first differing indices.  Needs: numpy, onnx, onnxruntime, a
built harp.  Gives: the table on stdout.
"""
import argparse
import os
import subprocess
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper as nh
from onnx import utils

SUFFIX = "_QuantizeLinear_Output"


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--harp", default=os.path.join(here, "..", "build", "harp"))
    ap.add_argument("--cuts", default="all")
    ap.add_argument("--seed", type=int, default=2)
    a = ap.parse_args()
    m = onnx.load(a.model)
    inits = {i.name: nh.to_array(i) for i in m.graph.initializer}
    xin = [i for i in m.graph.input if i.name not in inits][0]
    shape = [d.dim_value or 1 for d in xin.type.tensor_type.shape.dim]
    qs = [n.output[0][: -len(SUFFIX)] for n in m.graph.node if n.op_type == "QuantizeLinear" and n.output[0].endswith(SUFFIX)]
    cuts = qs if a.cuts == "all" else a.cuts.split(",")
    d = tempfile.mkdtemp()
    x = np.random.default_rng(a.seed).standard_normal(shape).astype(np.float32)
    np.save(os.path.join(d, "x.npy"), x)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    for c in cuts:
        dqs = [n for n in m.graph.node if n.op_type == "DequantizeLinear" and n.input[0] == c + SUFFIX]
        if not dqs:
            print(f"{c:6} no DequantizeLinear reads {c + SUFFIX}")
            continue
        dq, p = dqs[0], os.path.join(d, f"{c}.onnx")
        utils.extract_model(a.model, p, [xin.name], [dq.output[0]])
        want = ort.InferenceSession(p, so, providers=["CPUExecutionProvider"]).run(None, {xin.name: x})[0]
        r = subprocess.run([a.harp, "run", p, "--backend", "cpu", "--input", f"{xin.name}={d}/x.npy", "--out", d], capture_output=True, text=True)
        if r.returncode:
            print(f"{c:6} harp failed: {r.stderr[-300:]}")
            continue
        got = np.load(os.path.join(d, f"{dq.output[0]}.npy"))
        e = np.rint(np.abs(got.astype(np.float64) - want) / float(inits[dq.input[1]]))
        print(f"{c:6} n={e.size:8} differ {np.mean(e > 0):.5%} max {e.max():.0f} steps  first {np.argwhere(e > 0)[:3].tolist()}", flush=True)


if __name__ == "__main__":
    main()
