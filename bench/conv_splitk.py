#!/usr/bin/env python3
"""conv_splitk.py — CPU split-K for long-K convolutions (issue 27): few output
tiles over a long reduction, conv + bias + relu, fp32, batch 1, at 1 and 2
threads, interleaved.

    python3 bench/conv_splitk.py [--harp build/harp] [--base /tmp/base6/build/harp]
                                 [--rounds 3] [--repeat 20] [--threads 1,2] [--only SUBSTR]

Per layer, one ONNX graph (weight and bias as initializers: packed once) and,
per thread count, each contender once a round (`harp bench`, the fastest of
--repeat runs: on a shared machine under load the least disturbed one; the
medians of --repeat runs ranged 2-10x); the table gives the medians over
the rounds of those:
  base      --base (main's build) with its default plan
  dflt      --harp with its default plan (what the cost model now picks)
  gemm      --harp, the default plan as implicit_gemm, --knob conv=gemm: the
            implicit GEMM unsplit (split-K's own baseline)
  sk2, sk4  --harp, that plan with `algo_choice matmul splitk_reduce; splitk N`
Ratios: gemm / skN (> 1: split-K faster than its unsplit template) and
base / best split (> 1: split-K beats what main runs).  harp's output (sk2)
is checked against numpy float64.  Not a test: figures go to bench/RESULTS.md.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "py"))
from fe_ref import conv2d  # noqa: E402

# (input channels, output channels, window, size): long K, few pixels
LAYERS = [(512, 512, 3, 7), (256, 256, 3, 7), (512, 512, 3, 14), (1024, 256, 1, 7), (2048, 512, 1, 7),
          (1024, 1024, 1, 7)]


def layer_onnx(d, c, k, win, hw, rng):
    """Conv win x win (pad win // 2) + bias + relu as an ONNX file; (path, x, reference)."""
    w = (rng.standard_normal((k, c, win, win)) * (2.0 / (win * win * c)) ** 0.5).astype(np.float32)
    b = (rng.standard_normal(k) * 0.1).astype(np.float32)
    p = win // 2
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["t"], pads=[p] * 4, kernel_shape=[win, win]),
             helper.make_node("Relu", ["t"], ["y"])]
    g = helper.make_graph(nodes, "convsk", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, k, hw, hw])],
                          [onnx.numpy_helper.from_array(w, "w"), onnx.numpy_helper.from_array(b, "b")])
    path = os.path.join(d, f"conv_{c}_{k}_{win}_{hw}.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    x = rng.standard_normal((1, c, hw, hw)).astype(np.float32)
    ref = np.maximum(conv2d(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), pad=p), 0)
    return path, x, ref


def default_plan(harp, path, xfile, d):
    """The region and its default plan's DSL (from the C's plan comment)."""
    out = os.path.join(d, "dflt")
    p = subprocess.run([harp, "run", path, "--input", f"x={xfile}", "--out", out, "--dump", "plan,c", "--dump-dir", out],
                       capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError(p.stderr[-300:])
    plans = json.load(open(os.path.join(out, "plan.json")))["plans"]
    region = plans[0]["region"]
    m = re.search(r"/\* plan: ([^\n]*)\n", open(os.path.join(out, "model.c")).read())
    text = re.sub(r"algo_choice (conv|matmul) \w+;", "", m.group(1)) if m else ""
    return region, text, plans[0]["plan"].get("algo_choice", {}).get("conv", "?")


def bench(harp, path, xfile, threads, repeat, extra):
    cmd = [harp, "bench", path, "--json", "--repeat", str(repeat), "--warmup", "3", "--input", f"x={xfile}", *extra]
    p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "HARP_NUM_THREADS": str(threads)})
    if p.returncode:
        raise RuntimeError(f"harp bench: {p.stderr.strip()[-300:]}")
    return float(json.loads(p.stdout)["min_ms"])


def check(harp, path, xfile, plan, ref, d):
    out = os.path.join(d, "chk")
    p = subprocess.run([harp, "run", path, "--input", f"x={xfile}", "--out", out, "--plan", plan], capture_output=True,
                       text=True)
    if p.returncode:
        raise RuntimeError(p.stderr[-300:])
    y = np.load(os.path.join(out, "y.npy")).astype(np.float64)
    return float(np.abs(y - ref).max() / (np.abs(ref).max() + 1e-30))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--harp", default=os.path.join(os.path.dirname(HERE), "build", "harp"))
    ap.add_argument("--base", default="/tmp/base6/build/harp")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"conv + bias + relu, fp32, batch 1, {a.rounds} interleaved rounds, load {os.getloadavg()[0]:.1f}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"{'layer':18s} {'thr':>3s} {'base':>8s} {'dflt':>8s} {'gemm':>8s} {'sk2':>8s} {'sk4':>8s} "
          f"{'gemm/sk2':>8s} {'gemm/sk4':>8s} {'base/sk':>8s}  base alg / err")
    for c, k, win, hw in LAYERS:
        name = f"{c}->{k} {win}x{win}@{hw}"
        if a.only and a.only not in name:
            continue
        d = tempfile.mkdtemp(prefix="csk_")
        path, x, ref = layer_onnx(d, c, k, win, hw, rng)
        xfile = os.path.join(d, "x.npy")
        np.save(xfile, x)
        try:
            region, text, _ = default_plan(a.harp, path, xfile, d)
            _, _, base_alg = default_plan(a.base, path, xfile, d)
            plans = {}
            for key, sk in (("gemm", ""), ("sk2", " algo_choice matmul splitk_reduce; splitk 2;"),
                            ("sk4", " algo_choice matmul splitk_reduce; splitk 4;")):
                plans[key] = os.path.join(d, f"{key}.plan")
                with open(plans[key], "w") as f:
                    f.write(text + sk + "\n")
            err = check(a.harp, path, xfile, f"{region}={plans['sk2']}", ref, d)
        except RuntimeError as e:
            print(f"{name:18s} failed: {e}")
            continue
        runs = {"base": (a.base, []), "dflt": (a.harp, []),
                "gemm": (a.harp, ["--plan", f"{region}={plans['gemm']}", "--knob", "conv=gemm"]),
                "sk2": (a.harp, ["--plan", f"{region}={plans['sk2']}"]), "sk4": (a.harp, ["--plan", f"{region}={plans['sk4']}"])}
        for th in [int(t) for t in a.threads.split(",")]:
            t = {key: [] for key in runs}
            for _ in range(a.rounds):
                for key, (harp, extra) in runs.items():
                    t[key].append(bench(harp, path, xfile, th, a.repeat, extra))
            ms = {key: float(np.median(v)) for key, v in t.items()}
            best = min(ms["sk2"], ms["sk4"])
            print(f"{name:18s} {th:3d} " + " ".join(f"{ms[key]:8.3f}" for key in runs) +
                  f" {ms['gemm'] / ms['sk2']:8.2f} {ms['gemm'] / ms['sk4']:8.2f} {ms['base'] / best:8.2f}  "
                  f"{base_alg} / {err:.1e}", flush=True)


if __name__ == "__main__":
    main()
