#!/usr/bin/env python3
"""Whole models on the GPU: harp's CUDA backend against PyTorch (cuDNN /
cuBLAS) on the same network, in the same run.

    python3 bench/cuda_e2e.py [--harp build/harp] [--repeat 50] [--only NAME,...]

Each model is a PyTorch module (torchvision's ResNet-18, a BERT-base encoder
layer written out with nn.Linear and scaled_dot_product_attention, a
LLaMA-style MLP block) in eval mode, exported to ONNX (opset 17) and given
to `harp bench --backend cuda --json` (median of --repeat runs, device
events; again with --graphs).  PyTorch's time is the median of as many eager
forward passes under torch.inference_mode, timed with CUDA events.  Both
outputs of one fixed input are compared (max |harp - torch| / max |torch|).
Needs a GPU, PyTorch, torchvision and onnx (all on the device machine)."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def models(torch):
    import torch.nn as nn
    import torch.nn.functional as F

    class Encoder(nn.Module):  # BERT-base layer, post-norm, GELU
        def __init__(self, d=768, h=12, ff=3072):
            super().__init__()
            self.h = h
            self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.f1, self.f2 = nn.Linear(d, ff), nn.Linear(ff, d)

        def forward(self, x):
            b, s, d = x.shape
            q, k, v = self.qkv(x).view(b, s, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, s, d)
            x = self.ln1(x + self.o(a))
            return self.ln2(x + self.f2(F.gelu(self.f1(x))))

    class GatedMLP(nn.Module):  # LLaMA-style SwiGLU block with RMS norm
        def __init__(self, d=1024, ff=2816):
            super().__init__()
            self.w1, self.w3, self.w2 = nn.Linear(d, ff, bias=False), nn.Linear(d, ff, bias=False), nn.Linear(ff, d, bias=False)
            self.g = nn.Parameter(torch.ones(d))

        def forward(self, x):
            n = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.g
            return x + self.w2(F.silu(self.w1(n)) * self.w3(n))

    def resnet18():
        import torchvision
        return torchvision.models.resnet18()

    return {
        "resnet18_b1": (resnet18, (1, 3, 224, 224)),
        "resnet18_b8": (resnet18, (8, 3, 224, 224)),
        "bert_layer_s128": (Encoder, (1, 128, 768)),
        "bert_layer_b8_s128": (Encoder, (8, 128, 768)),
        "gated_mlp_t64": (GatedMLP, (1, 64, 1024)),
    }


def torch_ms(torch, m, x, repeat):
    with torch.inference_mode():
        for _ in range(5):
            m(x)
        ts = []
        for _ in range(repeat):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            m(x)
            e.record()
            e.synchronize()
            ts.append(s.elapsed_time(e))
    return float(np.median(ts))


def harp_bench(harp, onnx_path, repeat, graphs):
    args = [harp, "bench", onnx_path, "--backend", "cuda", "--repeat", str(repeat), "--json"] + (["--graphs"] if graphs else [])
    p = subprocess.run(args, capture_output=True, text=True, timeout=600)
    if p.returncode:
        return None, (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
    return json.loads(p.stdout), None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--harp", default=os.path.join(HERE, "..", "build", "harp"))
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--only", default="")
    ap.add_argument("--dtypes", default="fp32,fp16")
    ap.add_argument("--profile", action="store_true", help="also print harp's per-kernel profile (harp bench --profile)")
    a = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("cuda_e2e: PyTorch is not installed (the peer, and the source of the models)", file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        print("cuda_e2e: no GPU (torch.cuda.is_available() is false)", file=sys.stderr)
        return 1
    torch.manual_seed(0)
    d = tempfile.mkdtemp(prefix="harp-cuda-e2e-")
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}")
    rows = []
    for name, (make, shape) in models(torch).items():
        if a.only and name not in a.only.split(","):
            continue
        for dt in a.dtypes.split(","):
            what = f"{name} {dt}"
            try:
                tdt = torch.float16 if dt == "fp16" else torch.float32
                m = make().eval().to("cuda", tdt)
                x = (torch.randn(*shape, device="cuda") * 0.5).to(tdt)
                path = os.path.join(d, f"{name}_{dt}.onnx")
                with torch.inference_mode():
                    torch.onnx.export(m, (x,), path, input_names=["x"], output_names=["y"], opset_version=17, dynamo=False)
                    want = m(x).float().cpu().numpy()
                t_ms = torch_ms(torch, m, x, a.repeat)
                xp = os.path.join(d, f"{name}_{dt}_x.npy")
                np.save(xp, x.cpu().numpy())
                out = os.path.join(d, f"{name}_{dt}_out")
                p = subprocess.run([a.harp, "run", path, "--backend", "cuda", "--input", f"x={xp}", "--out", out],
                                   capture_output=True, text=True, timeout=600)
                if p.returncode:
                    rows.append((what, t_ms, None, None, None, (p.stderr.strip().splitlines() or ["?"])[-1]))
                    print(f"{what}: harp run failed: {rows[-1][-1]}", flush=True)
                    continue
                got = np.load(os.path.join(out, "y.npy")).astype(np.float32)
                err = float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30))
                if a.profile:
                    q = subprocess.run([a.harp, "bench", path, "--backend", "cuda", "--repeat", "20", "--profile"],
                                       capture_output=True, text=True, timeout=600)
                    print(f"--- {what}: harp bench --profile\n" + "\n".join((q.stdout + q.stderr).splitlines()[:40]), flush=True)
                plain, e1 = harp_bench(a.harp, path, a.repeat, False)
                graph, e2 = harp_bench(a.harp, path, a.repeat, True)
                hp = plain["median_ms"] if plain else None
                hg = graph["median_ms"] if graph else None
                rows.append((what, t_ms, hp, hg, err, e1 or e2 or ""))
                print(f"{what}: torch {t_ms:.3f} ms, harp {hp} ms, harp+graphs {hg} ms, rel err {err:.2e} {e1 or e2 or ''}",
                      flush=True)
            except Exception as ex:  # one model's failure does not stop the others
                rows.append((what, None, None, None, None, f"{type(ex).__name__}: {str(ex)[:200]}"))
                print(f"{what}: {rows[-1][-1]}", flush=True)
    print(f"\n{'model':28s} {'torch ms':>9s} {'harp ms':>9s} {'+graphs':>9s} {'torch/harp':>10s} {'rel err':>9s}")
    for what, t, hp, hg, err, note in rows:
        best = min(x for x in (hp, hg) if x) if (hp or hg) else None
        f = lambda v: f"{v:9.3f}" if v else f"{'-':>9s}"  # noqa: E731
        ratio = f"{t / best:10.2f}" if t and best else f"{'-':>10s}"
        print(f"{what:28s} {f(t)} {f(hp)} {f(hg)} {ratio} {err if err is None else f'{err:9.1e}'} {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
