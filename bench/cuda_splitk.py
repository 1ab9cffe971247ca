#!/usr/bin/env python3
"""Split-K on the GPU: skinny fp16 GEMMs (small M x N, large K) with the
cost model's plan, the same plan without split-K, and each split-K form
forced, against cuBLAS (torch.matmul) in the same run.

    python3 bench/cuda_splitk.py [--harp build/harp] [--target sm90] [--repeat 50]

Each harp figure is `harp bench --backend cuda --json` (median of --repeat
launches, device events); torch's is the median of as many launches timed
with CUDA events.  Needs a GPU; PyTorch for the cuBLAS column (without it
that column is left out)."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "models", "gemm16.json")
SHAPES = [(256, 256, 16384), (128, 128, 32768), (512, 512, 8192), (1024, 1024, 4096)]


def harp_bench(harp, shape, target, repeat, plan=None, dump=None):
    m, n, k = shape
    args = [harp, "bench", MODEL, "--backend", "cuda", "--target", target, "--repeat", str(repeat), "--json",
            "--sym", f"M={m}", "--sym", f"N={n}", "--sym", f"K={k}"]
    if plan:
        args += ["--plan", plan]
    if dump:
        args += ["--dump", "plan,gpu", "--dump-dir", dump]
    p = subprocess.run(args, capture_output=True, text=True, timeout=300)
    if p.returncode:
        return None, p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"
    return json.loads(p.stdout)["median_ms"], None


def torch_ms(shape, repeat):
    try:
        import torch
    except ImportError:
        return None
    m, n, k = shape
    a = torch.rand(m, k, device="cuda", dtype=torch.float16) - 0.5
    b = torch.rand(k, n, device="cuda", dtype=torch.float16) - 0.5
    for _ in range(5):
        torch.matmul(a, b)
    times = []
    for _ in range(repeat):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        torch.matmul(a, b)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    times.sort()
    return times[len(times) // 2]


def plan_file(entry, algo, splitk):
    p = json.loads(json.dumps(entry))
    p["plan"].setdefault("algo_choice", {})["matmul"] = algo
    p["plan"].pop("splitk", None)
    if splitk > 1:
        p["plan"]["splitk"] = splitk
    p.pop("time_est", None)
    p["source"] = "bench"
    f = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump({"plans": [p]}, f)
    f.close()
    return f.name


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--harp", default=os.path.join(HERE, "..", "build", "harp"))
    ap.add_argument("--target", default="sm90")
    ap.add_argument("--repeat", type=int, default=50)
    a = ap.parse_args()
    rc = 0
    probe = subprocess.run([a.harp, "bench", MODEL, "--backend", "cuda", "--repeat", "1", "--sym", "M=64", "--sym", "N=64",
                            "--sym", "K=64"], capture_output=True, text=True, timeout=300)
    if probe.returncode:
        print(f"cuda_splitk: {probe.stderr.strip() or 'harp bench failed'}", file=sys.stderr)
        return 1
    for shape in SHAPES:
        d = tempfile.mkdtemp()
        auto, err = harp_bench(a.harp, shape, a.target, a.repeat, dump=d)
        if auto is None:
            print(f"{shape}: harp bench failed: {err}")
            rc = 1
            continue
        entry = json.load(open(os.path.join(d, "plan.json")))["plans"][0]
        pl = entry["plan"]
        ks = [k for k in json.load(open(os.path.join(d, "gpu.json")))["gpu"]["kernels"] if k["kind"].endswith("_gemm")]
        sk = ks[0]["plan"].get("splitk", 1) if ks else "?"
        chosen = f"{pl.get('algo_choice', {}).get('matmul', '?')} x{sk} tile {pl.get('tile')}"
        rows = [("cost model: " + chosen, auto)]
        for algo, sk in (("implicit_gemm", 1), ("splitk_serial", 8), ("splitk_parallel", 8), ("splitk_reduce", 8),
                         ("splitk_parallel", 16), ("splitk_reduce", 16), ("splitk_parallel", 32), ("splitk_parallel", 64)):
            ms, err = harp_bench(a.harp, shape, a.target, a.repeat, plan=plan_file(entry, algo, sk))
            rows.append((f"{algo} x{sk}", ms if ms is not None else err))
        blas = torch_ms(shape, a.repeat)
        m, n, k = shape
        print(f"fp16 GEMM M={m} N={n} K={k} [{a.target}]" + (f"; cuBLAS (torch) {blas:.4f} ms" if blas else ""))
        for what, v in rows:
            if isinstance(v, float):
                tf = 2.0 * m * n * k / (v * 1e-3) / 1e12
                print(f"  {what:44s} {v:8.4f} ms {tf:7.1f} TFLOP/s" + (f"  harp/cuBLAS {blas / v:.2f}" if blas else ""))
            else:
                print(f"  {what:44s} failed: {v}")
        sys.stdout.flush()
    return rc


if __name__ == "__main__":
    sys.exit(main())
