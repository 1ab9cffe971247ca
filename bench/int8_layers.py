#!/usr/bin/env python3
"""int8_layers.py — where an int8 QDQ model's time goes, harp against OpenVINO, by layer kind.

    python3 bench/int8_layers.py [--harp build/harp] [--only resnet50] [--rounds 3] [--repeat 10]

The QDQ models are bench/int8.py's (made there on first use, kept under
--dir).  Per round, in turn at 2 threads:
  harp  `harp bench QDQ.onnx --profile --dump c`: each kernel alone (median
        of --repeat runs) and in its place in whole runs; its kind (conv,
        matmul: the 1x1 convs and GEMMs, ewise, reduce) and whether its C
        has the int8 VNNI kernel (contract_q8.c, contract_q8dw.c) or only
        the bf16 / fp32 template;
  ov    OpenVINO at its default precision with PERF_COUNT: each executed
        node's time, by node type and kernel (exec type), the median over
        --repeat inferences.
Printed: per kind, the kernels, harp's ms alone and in run, OpenVINO's ms,
medians of the rounds (sums of per-kernel medians).  A profile, not a
speed ratio: the whole-model figures are bench/int8.py's.
"""
import collections
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import int8  # noqa: E402  (the models, their QDQ files and inputs)
import onnx  # noqa: E402


def harp_round(exe, qdq, repeat, cdir):
    """{(kind, int8?): [kernels, ms alone, ms in run]} and the median ms of one profiled harp bench."""
    p = subprocess.run([exe, "bench", qdq, "--profile", "--repeat", str(repeat), "--dump", "c", "--dump-dir", cdir],
                       capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError(p.stderr[-800:])
    src = open(os.path.join(cdir, "model.c")).read()
    names = dict(re.findall(r"/\* kernel (\d+): region ([A-Za-z0-9_.]+) \*/", src))
    # a kernel whose code is another's (the same C, emitted once) is int8 when that one is
    same = dict(re.findall(r"/\* kernel (\d+): region [A-Za-z0-9_.]+ \*/\n/\* the code of kernel (\d+) \*/", src))
    q8k = set(re.findall(r"static int \w+?_k(\d+)_q8\(hprt_pool", src))
    q8 = {n for k, n in names.items() if same.get(k, k) in q8k}
    agg = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for line in p.stdout.splitlines():
        f = line.split()
        if len(f) != 5 or not f[-1].endswith("%"):
            continue
        try:
            alone, run = float(f[2]), float(f[3])
        except ValueError:
            continue
        a = agg[(f[1], "int8" if f[0] in q8 else "template")]
        a[0] += 1
        a[1] += alone
        a[2] += run
    med = re.search(r"median ([0-9.]+) ms", p.stdout)
    return agg, float(med.group(1)) if med else float("nan")


def ov_profiler(qdq, xname, x):
    import openvino as ov
    cm = ov.Core().compile_model(qdq, "CPU", {"INFERENCE_NUM_THREADS": "2", "NUM_STREAMS": "1", "PERF_COUNT": "YES"})
    req = cm.create_infer_request()
    prec = cm.get_property("INFERENCE_PRECISION_HINT")

    def run(repeat):
        for _ in range(3):
            req.infer({xname: x})
        per = collections.defaultdict(list)
        count = collections.Counter()
        for _ in range(repeat):
            req.infer({xname: x})
            sums = collections.defaultdict(float)
            for q in req.get_profiling_info():
                if q.status == q.Status.EXECUTED:
                    sums[(q.node_type, q.exec_type)] += q.real_time.total_seconds() * 1e3
                    count[(q.node_type, q.exec_type)] += 1
            for k, v in sums.items():
                per[k].append(v)
        return {k: [count[k] // repeat, float(np.median(v))] for k, v in per.items()}
    return run, prec


def main():
    ap = int8.e2e.bench_args(__doc__.split("\n")[0], repeat=10, only="resnet50", json_out=False)
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "harp-int8-models"))
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    for name in a.only.split(","):
        _, qdq = int8.quantize(name, a.dir)
        xname, shape = int8.input_of(onnx.load(qdq))
        x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
        ov, prec = ov_profiler(qdq, xname, x)
        hr, orr, hmed = [], [], []
        cdir = tempfile.mkdtemp(prefix="harp_i8l_")
        for _ in range(a.rounds):
            agg, m = harp_round(a.harp, qdq, a.repeat, cdir)
            hr.append(agg)
            hmed.append(m)
            orr.append(ov(a.repeat))
        print(f"\n{name}: harp whole runs (profiled build) median {np.median(hmed):.2f} ms; OpenVINO at {prec}")
        print(f"{'harp kind':28} {'kernels':>7} {'alone ms':>9} {'in run ms':>9}")
        keys = sorted({k for r in hr for k in r}, key=lambda k: -np.median([r.get(k, [0, 0, 0])[1] for r in hr]))
        for k in keys:
            v = [r.get(k, [0, 0.0, 0.0]) for r in hr]
            print(f"{k[0] + ' / ' + k[1]:28} {v[0][0]:7d} {np.median([t[1] for t in v]):9.3f} {np.median([t[2] for t in v]):9.3f}")
        print(f"{'harp sum':28} {'':7} {np.median([sum(t[1] for t in r.values()) for r in hr]):9.3f} "
              f"{np.median([sum(t[2] for t in r.values()) for r in hr]):9.3f}")
        print(f"{'OpenVINO node / kernel':52} {'nodes':>5} {'ms':>8}")
        keys = sorted({k for r in orr for k in r}, key=lambda k: -np.median([r.get(k, [0, 0])[1] for r in orr]))
        for k in keys:
            v = [r.get(k, [0, 0.0]) for r in orr]
            print(f"{k[0] + ' / ' + k[1]:52} {v[0][0]:5d} {np.median([t[1] for t in v]):8.3f}")
        print(f"{'OpenVINO sum':52} {'':5} {np.median([sum(t[1] for t in r.values()) for r in orr]):8.3f}")


if __name__ == "__main__":
    main()
