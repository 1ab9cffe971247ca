#!/usr/bin/env python3
"""Whole models on the GPU: harp's CUDA backend against PyTorch (cuDNN /
cuBLAS, and torch.compile) on the same network, in the same run.

    python3 bench/cuda_e2e.py [--harp build/harp] [--repeat 50] [--only NAME,...] [--dtypes fp32,fp16]
                              [--compile default,max-autotune] [--budget-s 400] [--precision tf32]

Each model is a PyTorch module in eval mode, exported to ONNX (opset 17) and
given to `harp bench --backend cuda --json` (median of --repeat runs, device
events; again with --graphs):
  resnet18 / resnet50   torchvision's, batch 1 and 8
  bert_layer            one BERT-base encoder layer (nn.Linear + scaled_dot_product_attention)
  bert_base             the 12-layer BERT-base encoder, sequence 128, batch 1 and 8
  llama_prefill         a LLaMA-style decoder layer (RMS norm, causal attention, SwiGLU;
                        d 2048, 16 heads, ff 5632; no rotary embedding), 512 tokens
  llama_decode          the same layer, one new token against a KV cache of 512
                        (torch.cat of the cache and the new key / value)
  gated_mlp             a SwiGLU block with RMS norm
PyTorch's times are medians of as many forward passes under
torch.inference_mode, CUDA events: eager (fp32 with TF32 matmuls and
convolutions allowed, torch.backends.cuda.matmul.allow_tf32 — the setting
harp's default --precision tf32 matches), and torch.compile in each --compile
mode (its compile time printed; a mode is skipped, and said so, once the
run's --budget-s is spent).  harp's fp32 models run at --precision (default
tf32).  The error of each is against PyTorch in strict fp32 (TF32 off) on
one fixed input, max |x - ref| / max |ref|.  Needs a GPU, PyTorch,
torchvision and onnx (all on the device machine)."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

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

    class RMSNorm(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.g = nn.Parameter(torch.ones(d))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.g

    class Llama(nn.Module):  # one LLaMA-style decoder layer, no rotary embedding
        def __init__(self, d=2048, h=16, ff=5632):
            super().__init__()
            self.h, self.dh = h, d // h
            self.wq, self.wk, self.wv, self.wo = (nn.Linear(d, d, bias=False) for _ in range(4))
            self.n1, self.n2 = RMSNorm(d), RMSNorm(d)
            self.w1, self.w3, self.w2 = nn.Linear(d, ff, bias=False), nn.Linear(d, ff, bias=False), nn.Linear(ff, d, bias=False)

        def heads(self, t):
            b, s, _ = t.shape
            return t.view(b, s, self.h, self.dh).transpose(1, 2)

        def tail(self, x, a):
            b, _, s, _ = a.shape
            x = x + self.wo(a.transpose(1, 2).reshape(b, s, self.h * self.dh))
            n = self.n2(x)
            return x + self.w2(F.silu(self.w1(n)) * self.w3(n))

        def forward(self, x):  # prefill: causal over the prompt
            n = self.n1(x)
            q, k, v = self.heads(self.wq(n)), self.heads(self.wk(n)), self.heads(self.wv(n))
            return self.tail(x, F.scaled_dot_product_attention(q, k, v, is_causal=True))

    class LlamaDecode(Llama):
        def forward(self, x, kc, vc):  # one token; the cache holds the keys / values before it
            n = self.n1(x)
            q = self.heads(self.wq(n))
            k = torch.cat([kc, self.heads(self.wk(n))], 2)
            v = torch.cat([vc, self.heads(self.wv(n))], 2)
            return self.tail(x, F.scaled_dot_product_attention(q, k, v))

    class BertBase(nn.Module):
        def __init__(self, layers=12):
            super().__init__()
            self.layers = nn.ModuleList(Encoder() for _ in range(layers))

        def forward(self, x):
            for m in self.layers:
                x = m(x)
            return x

    def resnet(depth):
        import torchvision
        return (lambda: torchvision.models.resnet18()) if depth == 18 else (lambda: torchvision.models.resnet50())

    cache = [(1, 16, 512, 128), (1, 16, 512, 128)]
    cache8 = [(8, 16, 512, 128), (8, 16, 512, 128)]
    return {
        "resnet18_b1": (resnet(18), [(1, 3, 224, 224)]),
        "resnet18_b8": (resnet(18), [(8, 3, 224, 224)]),
        "resnet50_b1": (resnet(50), [(1, 3, 224, 224)]),
        "resnet50_b8": (resnet(50), [(8, 3, 224, 224)]),
        "bert_layer_s128": (Encoder, [(1, 128, 768)]),
        "bert_layer_b8_s128": (Encoder, [(8, 128, 768)]),
        "bert_base_s128": (BertBase, [(1, 128, 768)]),
        "bert_base_b8_s128": (BertBase, [(8, 128, 768)]),
        "llama_prefill_s512": (Llama, [(1, 512, 2048)]),
        "llama_prefill_b8_s512": (Llama, [(8, 512, 2048)]),
        "llama_decode_kv512": (LlamaDecode, [(1, 1, 2048)] + cache),
        "llama_decode_b8_kv512": (LlamaDecode, [(8, 1, 2048)] + cache8),
        "gated_mlp_t64": (GatedMLP, [(1, 64, 1024)]),
    }


def torch_ms(torch, m, xs, repeat):
    with torch.inference_mode():
        for _ in range(5):
            m(*xs)
        ts = []
        for _ in range(repeat):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            m(*xs)
            e.record()
            e.synchronize()
            ts.append(s.elapsed_time(e))
    return float(np.median(ts))


def harp_bench(harp, onnx_path, repeat, graphs, extra):
    args = [harp, "bench", onnx_path, "--backend", "cuda", "--repeat", str(repeat), "--json", *extra] + (["--graphs"] if graphs else [])
    p = subprocess.run(args, capture_output=True, text=True, timeout=900)
    if p.returncode:
        return None, (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
    return json.loads(p.stdout), None


def rel(a, ref):
    return float(np.max(np.abs(a - ref)) / max(np.max(np.abs(ref)), 1e-30))


def compiled_ms(torch, m, xs, mode, repeat, note):
    """torch.compile(m, mode) timed as eager is (after its compile); (ms, output, compile s) or Nones."""
    t0 = time.time()
    try:
        cm = torch.compile(m, mode=None if mode == "default" else mode)
        with torch.inference_mode():
            out = cm(*xs).float().cpu().numpy()
        cs = time.time() - t0
        return torch_ms(torch, cm, xs, repeat), out, cs
    except Exception as ex:  # noqa: BLE001 (Inductor's failures are many)
        note.append(f"compile {mode}: {type(ex).__name__}")
        return None, None, time.time() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--harp", default=os.path.join(HERE, "..", "build", "harp"))
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--only", default="")
    ap.add_argument("--dtypes", default="fp32,fp16")
    ap.add_argument("--compile", default="default", help="torch.compile modes (comma-separated; '' for none)")
    ap.add_argument("--budget-s", type=float, default=1e9, help="skip torch.compile once this many seconds have gone")
    ap.add_argument("--precision", default="tf32", help="harp --precision for the fp32 models")
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
    t_start = time.time()
    torch.manual_seed(0)
    d = tempfile.mkdtemp(prefix="harp-cuda-e2e-")
    modes = [x for x in a.compile.split(",") if x]
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}; harp fp32 models at --precision {a.precision}")
    rows = []
    for name, (make, shapes) in models(torch).items():
        if a.only and name not in a.only.split(","):
            continue
        for dt in a.dtypes.split(","):
            what = f"{name} {dt}"
            note = []
            try:
                tdt = torch.float16 if dt == "fp16" else torch.float32
                m = make().eval().to("cuda", tdt)
                xs = [(torch.randn(*sh, device="cuda") * 0.5).to(tdt) for sh in shapes]
                names = ["x"] + [f"c{i}" for i in range(1, len(xs))]
                path = os.path.join(d, f"{name}_{dt}.onnx")
                torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
                with torch.inference_mode():
                    torch.onnx.export(m, tuple(xs), path, input_names=names, output_names=["y"], opset_version=17,
                                      dynamo=False)
                    ref = m(*xs).float().cpu().numpy()  # strict fp32 (fp16 models: their own precision)
                torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
                with torch.inference_mode():
                    e_eager = rel(m(*xs).float().cpu().numpy(), ref)
                t_ms = torch_ms(torch, m, xs, a.repeat)
                tc = {}
                for mode in modes:
                    if time.time() - t_start > a.budget_s:
                        tc[mode] = None
                        note.append(f"compile {mode}: skipped (budget)")
                        continue
                    ms, out, cs = compiled_ms(torch, m, xs, mode, a.repeat, note)
                    tc[mode] = ms
                    if out is not None:
                        note.append(f"compile {mode} {cs:.0f}s err {rel(out, ref):.1e}")
                feeds = []
                for nm, x in zip(names, xs):
                    xp = os.path.join(d, f"{name}_{dt}_{nm}.npy")
                    np.save(xp, x.cpu().numpy())
                    feeds += ["--input", f"{nm}={xp}"]
                prec = ["--precision", a.precision] if dt == "fp32" else []
                out = os.path.join(d, f"{name}_{dt}_out")
                p = subprocess.run([a.harp, "run", path, "--backend", "cuda", *feeds, *prec, "--out", out],
                                   capture_output=True, text=True, timeout=900)
                if p.returncode:
                    rows.append((what, t_ms, tc, None, None, None, e_eager, "harp run failed: " +
                                 (p.stderr.strip().splitlines() or ["?"])[-1]))
                    print(f"{what}: {rows[-1][-1]}", flush=True)
                    continue
                err = rel(np.load(os.path.join(out, "y.npy")).astype(np.float32), ref)
                if a.profile:
                    q = subprocess.run([a.harp, "bench", path, "--backend", "cuda", "--repeat", "20", "--profile", *prec],
                                       capture_output=True, text=True, timeout=900)
                    print(f"--- {what}: harp bench --profile\n" + "\n".join((q.stdout + q.stderr).splitlines()[:40]), flush=True)
                plain, e1 = harp_bench(a.harp, path, a.repeat, False, prec)
                graph, e2 = harp_bench(a.harp, path, a.repeat, True, prec)
                hp = plain["median_ms"] if plain else None
                hg = graph["median_ms"] if graph else None
                if e1 or e2:
                    note.append(e1 or e2)
                rows.append((what, t_ms, tc, hp, hg, err, e_eager, "; ".join(note)))
                print(f"{what}: torch eager {t_ms:.3f} ms, " + ", ".join(f"compile {k} {v:.3f} ms" for k, v in tc.items() if v) +
                      f", harp {hp} ms, harp+graphs {hg} ms, err harp {err:.1e} eager {e_eager:.1e}; {'; '.join(note)}",
                      flush=True)
                del m, xs
                torch.cuda.empty_cache()
            except Exception as ex:  # one model's failure does not stop the others
                rows.append((what, None, {}, None, None, None, None, f"{type(ex).__name__}: {str(ex)[:200]}"))
                print(f"{what}: {rows[-1][-1]}", flush=True)
    f = lambda v: f"{v:9.3f}" if v else f"{'-':>9s}"  # noqa: E731
    print(f"\n{'model':28s} {'eager ms':>9s} " + " ".join(f"{'c.' + k[:7]:>9s}" for k in modes) +
          f" {'harp ms':>9s} {'+graphs':>9s} {'eager/harp':>10s} {'comp/harp':>9s} {'harp err':>9s} {'eager err':>9s}")
    for what, t, tc, hp, hg, err, ee, note in rows:
        best = min(x for x in (hp, hg) if x) if (hp or hg) else None
        cbest = min((v for v in tc.values() if v), default=None)
        r1 = f"{t / best:10.2f}" if t and best else f"{'-':>10s}"
        r2 = f"{cbest / best:9.2f}" if cbest and best else f"{'-':>9s}"
        fe = lambda v: f"{v:9.1e}" if v is not None else f"{'-':>9s}"  # noqa: E731
        print(f"{what:28s} {f(t)} " + " ".join(f(tc.get(k)) for k in modes) + f" {f(hp)} {f(hg)} {r1} {r2} {fe(err)} {fe(ee)} {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
