#!/usr/bin/env python3
"""int8_modes.py — harp's whole-model time on each placement of the two vCPUs, A/B.

    python3 bench/int8_modes.py [--model M.onnx] [--precision bf16] [--rounds 12] [--repeat 300] [--rt] [--ov] HARP [HARP...]

On the shared 2-vCPU VM the host puts the two vCPUs on one CCD or on two
(bench/vcpu_pair.c: a line's round trip ~80-110 ns, or ~400), and every
2-thread figure moves with it: int8 MobileNetV2 0.65 ms or 1.1-1.2 (harp
before z9mb), OpenVINO 0.84 or 1.18.  Each round runs, for every binary in
turn, bench/vcpu_pair then one `harp bench --json` process (its median of
--repeat runs, 2 threads), and files the process under the placement the
probe just saw (near: round trip < 200 ns); --ov adds OpenVINO at its
default precision (INFERENCE_NUM_THREADS=2, one stream) on the same model.
Printed per contender and placement: the median of the processes' medians
and their count.  The host may move the vCPUs between probe and run: a
process then lands under the wrong placement (the counts show how many).
--rt runs each process under `chrt -f 1` (root): on a loaded machine the
cores go to it for its second or two.  Default model: bench/int8.py's
MobileNetV2 QDQ (make it with `python3 bench/int8.py --only mobilenetv2`);
--precision bf16 with an fp32 model times `harp bench --precision bf16`
against OpenVINO's default (bf16 on this CPU).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OV = r"""
import sys, time, numpy as np, onnx, openvino as ov
m = onnx.load(sys.argv[1]); inits = {i.name for i in m.graph.initializer}
x = [i for i in m.graph.input if i.name not in inits][0]
xx = np.random.default_rng(2).standard_normal([d.dim_value or 1 for d in x.type.tensor_type.shape.dim]).astype(np.float32)
req = ov.Core().compile_model(sys.argv[1], "CPU", {"INFERENCE_NUM_THREADS": "2", "NUM_STREAMS": "1"}).create_infer_request()
for _ in range(3): req.infer({x.name: xx})
ts = []
for _ in range(int(sys.argv[2])):
    t = time.perf_counter(); req.infer({x.name: xx}); ts.append(time.perf_counter() - t)
print(float(np.median(ts)) * 1e3)
"""


def probe(pair, rt):
    """The vCPUs' round trip in ns (bench/vcpu_pair), or nan."""
    p = subprocess.run((["chrt", "-f", "1"] if rt else []) + [pair], capture_output=True, text=True, timeout=60)
    m = re.search(r"round trip (\d+) ns", p.stdout)
    return float(m.group(1)) if m else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("harp", nargs="+")
    ap.add_argument("--model", default=os.path.join(tempfile.gettempdir(), "harp-int8-models", "mobilenetv2_qdq.onnx"))
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--repeat", type=int, default=300)
    ap.add_argument("--precision", default="", help="harp bench --precision (bf16: an fp32 model)")
    ap.add_argument("--rt", action="store_true", help="each process under chrt -f 1 (root)")
    ap.add_argument("--ov", action="store_true", help="OpenVINO on the same model, at its default precision")
    a = ap.parse_args()
    pair = os.path.join(ROOT, "build", "vcpu_pair")
    if not os.path.exists(pair):
        subprocess.run(["cc", "-O2", os.path.join(HERE, "vcpu_pair.c"), "-o", pair, "-lpthread"], check=True)
    rt = ["chrt", "-f", "1"] if a.rt else []
    runs = {h: [] for h in a.harp + (["openvino"] if a.ov else [])}
    for _ in range(a.rounds):
        for h in runs:
            ns = probe(pair, a.rt)
            if h == "openvino":
                p = subprocess.run(rt + [sys.executable, "-c", OV, a.model, str(a.repeat)], capture_output=True, text=True, check=True)
                ms = float(p.stdout.split()[-1])
            else:
                p = subprocess.run(rt + [h, "bench", a.model, "--json", "--repeat", str(a.repeat)] + (["--precision", a.precision] if a.precision else []), capture_output=True, text=True, check=True)
                ms = json.loads(p.stdout)["median_ms"]
            runs[h].append((ns, ms))
            print(f"  {h}: {ms:.3f} ms (vCPU round trip {ns:.0f} ns)", flush=True)
    print(f"{os.path.basename(a.model)}{' --precision ' + a.precision if a.precision else ''}, {a.rounds} rounds of {a.repeat} runs, 2 threads{', chrt -f 1' if a.rt else ''}")
    for h, v in runs.items():
        near = [ms for ns, ms in v if ns < 200]
        far = [ms for ns, ms in v if not ns < 200]
        med = lambda x: f"{np.median(x):.3f} ms (n={len(x)})" if x else "- (n=0)"
        print(f"{h:40} one CCD {med(near):22} two CCDs {med(far)}")


if __name__ == "__main__":
    main()
