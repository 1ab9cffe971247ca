#!/usr/bin/env python3
"""conv3x3.py — the 3x3 stride-1 convolutions of VGG-19 and ResNet-50 (conv + bias + relu,
fp32, batch 1) on harp against onnxruntime and OpenVINO, 2 threads each, interleaved.

    python3 bench/conv3x3.py [--harp build/harp] [--rounds 3] [--repeat 10] [--only SUBSTR] [--models] [--json F]

Per layer, one ONNX graph (weights as initializers: constants, packed once):
  harp      `harp bench` with the default plan: Winograd (cgen_wino.c) where the
            CPU cost model picks it (plan/cost.c), else the direct kernel; the
            column `alg` says which the plan chose (from plan.json)
  direct    the same with HARP_NO_PLANS=1: the template's built-in choice, the
            direct kernel (what ran before Winograd)
  ort       onnxruntime, CPUExecutionProvider, intra_op_num_threads=2
  ov        OpenVINO CPU at its DEFAULT precision (bf16 on a CPU with AVX-512
            BF16, as the development machine: not an fp32 result)
  ov_f32    OpenVINO with INFERENCE_PRECISION_HINT=f32
Each round times every contender once (a median of --repeat runs); the
table gives medians over --rounds rounds and the ratios peer / harp (> 1:
harp is faster); `best` is the faster of ort and ov_f32 (fp32 peers).
harp's output is checked against onnxruntime (max |d| / max |ort|).
--models adds the whole VGG-19 and ResNet-50 of the real-model corpus
(bench/realmodels.py, same contenders; the models must be in the corpus
cache, tests/realmodels/fetch.py).  Not a test: figures go to bench/RESULTS.md.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from realmodels import THREADS, ort_session, ov_model  # noqa: E402
from settle import median_ms, settle  # noqa: E402

# (net, input channels, output channels, size): every distinct 3x3 stride-1 layer
LAYERS = [("vgg19", 3, 64, 224), ("vgg19", 64, 64, 224), ("vgg19", 64, 128, 112), ("vgg19", 128, 128, 112),
          ("vgg19", 128, 256, 56), ("vgg19", 256, 256, 56), ("vgg19", 256, 512, 28), ("vgg19", 512, 512, 28),
          ("vgg19", 512, 512, 14), ("resnet50", 64, 64, 56), ("resnet50", 128, 128, 28), ("resnet50", 256, 256, 14),
          ("resnet50", 512, 512, 7)]


def layer_onnx(d, c, k, hw, rng):
    """Conv 3x3 pad 1 + bias + relu as an ONNX file; (path, feeds)."""
    w = (rng.standard_normal((k, c, 3, 3)) * (2.0 / (9 * c)) ** 0.5).astype(np.float32)
    b = (rng.standard_normal(k) * 0.1).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["t"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
             helper.make_node("Relu", ["t"], ["y"])]
    g = helper.make_graph(nodes, "conv3x3", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, k, hw, hw])],
                          [onnx.numpy_helper.from_array(w, "w"), onnx.numpy_helper.from_array(b, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    path = os.path.join(d, f"conv_{c}_{k}_{hw}.onnx")
    onnx.save(m, path)
    x = rng.standard_normal((1, c, hw, hw)).astype(np.float32)
    return path, {"x": x}


def harp_bench(harp, path, xfile, repeat, env):
    settle()  # a peer's pool may still spin in this process
    cmd = [harp, "bench", path, "--json", "--repeat", str(repeat), "--warmup", "2", "--input", f"x={xfile}"]
    p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "HARP_NUM_THREADS": str(THREADS), **env})
    if p.returncode:
        raise RuntimeError(f"harp bench: {p.stderr.strip()[-300:]}")
    return float(json.loads(p.stdout)["median_ms"])


def harp_check(harp, path, xfile, want, d):
    """harp's output against onnxruntime's, and the conv algorithm its plan chose."""
    out = os.path.join(d, "out")
    p = subprocess.run([harp, "run", path, "--input", f"x={xfile}", "--out", out, "--dump", "plan", "--dump-dir", out],
                       capture_output=True, text=True, env={**os.environ, "HARP_NUM_THREADS": str(THREADS)})
    if p.returncode:
        raise RuntimeError(f"harp run: {p.stderr.strip()[-300:]}")
    y = np.load(os.path.join(out, "y.npy")).astype(np.float64)
    with open(os.path.join(out, "plan.json")) as f:
        plans = json.load(f)["plans"]
    algo = [q["plan"]["algo_choice"]["conv"] for q in plans if "conv" in q.get("plan", {}).get("algo_choice", {})]
    return float(np.abs(y - want).max() / (np.abs(want).max() + 1e-30)), (algo[0] if algo else "?")


def bench_layer(a, net, c, k, hw, rng):
    d = tempfile.mkdtemp(prefix="c3_")
    path, feeds = layer_onnx(d, c, k, hw, rng)
    xfile = os.path.join(d, "x.npy")
    np.save(xfile, feeds["x"])
    s = ort_session(path)
    want = s.run(None, feeds)[0].astype(np.float64)
    err, algo = harp_check(a.harp, path, xfile, want, d)
    run = {"ort": lambda: s.run(None, feeds)}
    for key, f32 in (("ov", False), ("ov_f32", True)):
        cm = ov_model(path, feeds, f32)
        if cm is not None:
            run[key] = (lambda r: lambda: r.infer(feeds))(cm.create_infer_request())
    t = {k2: [] for k2 in ["harp", "direct", *run]}
    rep = max(3, a.repeat // 3) if hw >= 112 else a.repeat
    for _ in range(a.rounds):
        t["harp"].append(harp_bench(a.harp, path, xfile, rep, {}))
        t["direct"].append(harp_bench(a.harp, path, xfile, rep, {"HARP_NO_PLANS": "1"}))
        for key, fn in run.items():
            t[key].append(median_ms(fn, rep, warmup=1))
    ms = {key: float(np.median(v)) for key, v in t.items()}
    return {"net": net, "c": c, "k": k, "hw": hw, "algo": algo, "err": err, "ms": ms, "rounds": t}


def fmt_layer(r):
    ms = r["ms"]
    best = min(ms.get("ort", 1e30), ms.get("ov_f32", 1e30))
    cols = " ".join(f"{ms.get(k, float('nan')):8.3f}" for k in ("harp", "direct", "ort", "ov", "ov_f32"))
    return (f"{r['net']:9s} {r['c']:4d}->{r['k']:<4d}@{r['hw']:<4d} {r['algo'][:12]:12s} {cols} "
            f"{ms['direct'] / ms['harp']:7.2f} {best / ms['harp']:7.2f}  {r['err']:.1e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--harp", default=os.path.join(os.path.dirname(HERE), "build", "harp"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--only", default="")
    ap.add_argument("--models", action="store_true", help="also the whole VGG-19 and ResNet-50 (bench/realmodels.py)")
    ap.add_argument("--json")
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    load = os.getloadavg()
    print(f"conv 3x3 s1 + bias + relu, fp32, batch 1, {THREADS} threads, {a.rounds} interleaved rounds, "
          f"{platform.processor() or platform.machine()}, load {load[0]:.1f}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"{'net':9s} {'layer':14s} {'harp alg':12s} {'harp':>8s} {'direct':>8s} {'ort':>8s} {'ov':>8s} {'ov_f32':>8s} "
          f"{'dir/h':>7s} {'best/h':>7s}  err")
    res = []
    for net, c, k, hw in LAYERS:
        if a.only and a.only not in f"{net} {c}->{k}@{hw}":
            continue
        try:
            r = bench_layer(a, net, c, k, hw, rng)
        except Exception as e:  # noqa: BLE001 (a contender failed: say so, go on)
            print(f"{net:9s} {c:4d}->{k:<4d}@{hw:<4d} failed: {e}")
            continue
        res.append(r)
        print(fmt_layer(r), flush=True)
    for net in ("vgg19", "resnet50"):
        rs = [r for r in res if r["net"] == net]
        if rs:
            tot = {key: sum(r["ms"].get(key, 0) for r in rs) for key in ("harp", "direct", "ort", "ov_f32")}
            print(f"{net}: sum of its layers harp {tot['harp']:.2f} ms, direct {tot['direct']:.2f}, ort {tot['ort']:.2f}, "
                  f"ov_f32 {tot['ov_f32']:.2f}: direct/harp {tot['direct'] / tot['harp']:.2f}, "
                  f"best fp32 peer/harp {min(tot['ort'], tot['ov_f32']) / tot['harp']:.2f}")
    out = {"layers": res, "load": load}
    if a.models:
        jf = os.path.join(tempfile.mkdtemp(prefix="c3m_"), "models.json")
        subprocess.run([sys.executable, os.path.join(HERE, "realmodels.py"), "--harp", a.harp, "--rounds", str(a.rounds),
                        "--repeat", str(max(3, a.repeat // 2)), "--json", jf, "light_vgg19", "light_resnet50"], check=False)
        if os.path.exists(jf):
            with open(jf) as f:
                out["models"] = json.load(f)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
