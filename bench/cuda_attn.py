#!/usr/bin/env python3
"""Attention on the GPU: harp's attention kernel against PyTorch's
scaled_dot_product_attention backends, same process order, same GPU.

    python3 bench/cuda_attn.py [--harp build/harp] [--seqs 1024,4096,16384] [--hds 64,128]
                               [--dtypes fp16,fp32] [--batch 1] [--heads 16] [--repeat 20]
                               [--algos plan,online_softmax]

Each point is a DSL model `o = attention(q, k, v[, causal=true])` over
[B, H, S, D] tensors, timed with `harp bench --backend cuda --json` (median
of --repeat runs, device events; every launch of the model counts, the
causal mask's construction too), against SDPA on the same tensors with each
backend forced
(flash, cuDNN, efficient; math only below 8k keys: it materialises S x S),
timed with CUDA events (median of --repeat after 3 warm-ups; 'n/a' when a
backend refuses the point).  fp32 runs harp's TF32 kernel against SDPA with
TF32 matmuls allowed (flash and cuDNN take fp16/bf16 only).  The outputs of
harp and of SDPA are compared on one input (max |harp - sdpa| / max |sdpa|).
--algos: harp with its own plan ("plan") and with each named
algo_choice.attention forced (`harp dump --dump plan`, the algorithm
changed, `--plan LIST`); the table's harp figure is the best of them.
Needs a GPU and PyTorch."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def harp_model(d, b, s, h, hd, dt, causal):
    t = "f16" if dt == "fp16" else "bf16" if dt == "bf16" else "f32"
    path = os.path.join(d, f"attn_{b}_{s}_{h}_{hd}_{dt}_{int(causal)}.harp")
    shp = f"{t}[{b}, {h}, {s}, {hd}]"
    with open(path, "w") as f:
        f.write(f"graph main(q: {shp}, k: {shp}, v: {shp}) -> (o: {shp}) {{\n"
                f"    o = attention(q, k, v{', causal=true' if causal else ''})\n    return o\n}}\n")
    return path


def plan_with(harp, model, target, algo, d):
    """A plan list for model with every attention region's algorithm set to algo, or None."""
    pd = os.path.join(d, "plan")
    p = subprocess.run([harp, "dump", model, "--dump", "plan", "--target", target, "--dump-dir", pd],
                       capture_output=True, text=True, timeout=600)
    if p.returncode:
        return None
    pl = json.load(open(os.path.join(pd, "plan.json")))
    for e in pl["plans"]:
        if e.get("plan") and "attention" in e["plan"].get("algo_choice", {}):
            e["plan"]["algo_choice"]["attention"] = algo
    path = os.path.join(d, f"plan_{algo}.json")
    json.dump(pl, open(path, "w"))
    return path


def sdpa_ms(torch, fn, repeat):
    for _ in range(3):
        fn()
    ts = []
    for _ in range(repeat):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e))
    return float(np.median(ts))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--harp", default=os.path.join(HERE, "..", "build", "harp"))
    ap.add_argument("--seqs", default="1024,4096,16384")
    ap.add_argument("--hds", default="64,128")
    ap.add_argument("--dtypes", default="fp16")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--algos", default="plan,online_softmax")
    ap.add_argument("--target", default="sm90")
    a = ap.parse_args()
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        print("cuda_attn: PyTorch is not installed", file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        print("cuda_attn: no GPU", file=sys.stderr)
        return 1
    torch.backends.cuda.matmul.allow_tf32 = True
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}")
    d = tempfile.mkdtemp(prefix="harp-cuda-attn-")
    backends = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                ("efficient", SDPBackend.EFFICIENT_ATTENTION), ("math", SDPBackend.MATH)]
    rows = []
    b, h = a.batch, a.heads
    for dt in a.dtypes.split(","):
        tdt = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[dt]
        for hd in map(int, a.hds.split(",")):
            for s in map(int, a.seqs.split(",")):
                for causal in (c == "1" for c in a.causal.split(",")):
                    what = f"{dt} b{b} h{h} s{s} d{hd}{' causal' if causal else ''}"
                    flops = 4.0 * b * h * s * s * hd * (0.5 if causal else 1.0)
                    x = [(torch.randn(b, h, s, hd, device="cuda") * 0.5).to(tdt) for _ in range(3)]
                    q, k, v = x
                    t_ms, ref = {}, None
                    for nm, be in backends:
                        if nm == "math" and s > 8192:
                            t_ms[nm] = None
                            continue
                        try:
                            with sdpa_kernel([be]):
                                fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
                                o = fn()
                                t_ms[nm] = sdpa_ms(torch, fn, a.repeat)
                                if ref is None:
                                    ref = o.float().cpu().numpy()
                        except Exception:  # the backend refuses this dtype / shape
                            t_ms[nm] = None
                    model = harp_model(d, b, s, h, hd, dt, causal)
                    feeds = []
                    for nm, t in zip("qkv", x):
                        p = os.path.join(d, f"{nm}.npy")
                        np.save(p, t.float().cpu().numpy().astype(np.float16 if dt == "fp16" else np.float32))
                        feeds += ["--input", f"{nm}={p}"]
                    err, hms, note, per = None, None, "", {}
                    for algo in a.algos.split(","):
                        plan = [] if algo == "plan" else ["--plan", plan_with(a.harp, model, a.target, algo, d) or "?"]
                        out = os.path.join(d, "out")
                        tgt = ["--target", a.target]
                        pr = subprocess.run([a.harp, "run", model, "--backend", "cuda", *tgt, *plan, "--out", out, *feeds],
                                            capture_output=True, text=True, timeout=600)
                        if pr.returncode:
                            note += f" [{algo}: " + (pr.stderr.strip().splitlines() or ["?"])[-1] + "]"
                            continue
                        got = np.load(os.path.join(out, "o.npy")).astype(np.float32)
                        e1 = float(np.max(np.abs(got - ref)) / max(np.max(np.abs(ref)), 1e-30)) if ref is not None else None
                        pb = subprocess.run([a.harp, "bench", model, "--backend", "cuda", *tgt, *plan, "--repeat", str(a.repeat),
                                             "--json", *feeds], capture_output=True, text=True, timeout=600)
                        if pb.returncode:
                            note += f" [{algo}: " + (pb.stderr.strip().splitlines() or ["?"])[-1] + "]"
                            continue
                        per[algo] = json.loads(pb.stdout)["median_ms"]
                        if hms is None or per[algo] < hms:
                            hms, err = per[algo], e1
                    note = (" ".join(f"{k} {v:.3f}" for k, v in per.items()) + note).strip()
                    best = min((v for v in t_ms.values() if v), default=None)
                    rows.append((what, hms, t_ms, best, err, flops, note))
                    f = lambda v: f"{v:.3f}" if v else "n/a"  # noqa: E731
                    print(f"{what}: harp {f(hms)} ms; " + ", ".join(f"{n} {f(v)}" for n, v in t_ms.items()) +
                          (f"; harp/best {best / hms:.2f}" if hms and best else "") +
                          (f"; rel err {err:.1e}" if err is not None else "") + (f" ({note})" if note else ""), flush=True)
                    del x, q, k, v
                    torch.cuda.empty_cache()
    print(f"\n{'point':34s} {'harp ms':>8s} {'TFLOP/s':>8s} {'best SDPA':>10s} {'which':>9s} {'best/harp':>9s}")
    for what, hms, t_ms, best, err, flops, note in rows:
        which = min((k for k, v in t_ms.items() if v), key=lambda k: t_ms[k], default="-")
        print(f"{what:34s} {hms if hms else float('nan'):8.3f} {flops / hms / 1e9 if hms else float('nan'):8.1f} "
              f"{best if best else float('nan'):10.3f} {which:>9s} {best / hms if hms and best else float('nan'):9.2f} {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
