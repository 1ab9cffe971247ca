#!/usr/bin/env python3
"""int8_convs.py — an int8 QDQ (or fp32) CNN's time per conv kind, harp against OpenVINO (and another harp).

    python3 bench/int8_convs.py [--model resnet50] [--fp32] [--harp build/harp] [--base OTHER_HARP]
                                [--rounds 3] [--repeat 20] [--ov-runs 200] [--no-ov]

Needs: bench/int8.py's QDQ models and the fp32 models they were made from (made there on first
       use, kept under --dir), harp binaries, OpenVINO (optional: --no-ov).
Gives: a table per layer kind — stem, 1x1 stride 1 per output pixels N, 1x1 stride 2, 3x3 stride 1
       per N, 3x3 stride 2, the rest of harp's kernels by region (pool, FC, quantize, ...) — with
       harp's ms (per kernel the min over the rounds of its "alone" median from
       `harp bench --profile --json`, summed per kind; "in run" the same of its in-run median),
       OpenVINO's ms (per layer the min over --ov-runs inferences of PERF_COUNT's real time,
       2 threads, one stream) and each one's share of its own total.  With --base, the other
       binary is profiled in alternation with --harp in every round and gets its own columns
       (a before / after of a change, sums per kind).
With --fp32 the model is the fp32 one (`<model>_fp32.onnx`) and OpenVINO runs with
INFERENCE_PRECISION_HINT=f32 (its default on an AVX-512 BF16 CPU is bf16, not an fp32 peer).
Each harp kernel is mapped to its conv by the `int8 GEMM M x N x K` header of its generated C
(fp32: `conv MxNxK` or `gemm MxNxK`; a kernel whose code is another's takes that one's):
M = output channels, N = output pixels, K = input channels x kh x kw; convs of one shape are
matched to the ONNX convs of that shape in graph order (a stage's stride-2 3x3 comes before its
stride-1 ones in both orders).
Under load read the shares and ratios of the same run, not the absolute ms.
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def onnx_convs(path):
    """[(name, (M, N, K), kind)] of the model's Conv nodes in graph order (QDQ weights), with a kind label."""
    import onnx
    from onnx import shape_inference
    m = shape_inference.infer_shapes(onnx.load(path))
    init = {i.name: list(i.dims) for i in m.graph.initializer}
    shp = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
           for v in list(m.graph.value_info) + list(m.graph.output)}
    prod = {o: n for n in m.graph.node for o in n.output}
    out = []
    for n in m.graph.node:
        if n.op_type != "Conv":
            continue
        w = n.input[1]
        ws = init.get(prod[w].input[0]) if w in prod else init.get(w)
        a = {x.name: onnx.helper.get_attribute_value(x) for x in n.attribute}
        y = shp.get(n.output[0])
        if not ws or not y or a.get("group", 1) != 1:
            continue
        npix = y[2] * y[3]
        s = max(a.get("strides", [1, 1]))
        kh = ws[2]
        if kh >= 5:
            kind = f"stem {kh}x{ws[3]}/{s}"
        elif s == 1:
            kind = f"{kh}x{ws[3]} N={npix}"
        else:
            kind = f"{kh}x{ws[3]}/{s} N={npix}"
        out.append((n.name, (ws[0], npix, ws[1] * kh * ws[3]), kind))
    return out


def harp_kinds(model_c, convs):
    """{region: kind} for harp's kernels: a conv kind by its GEMM header, else 'other: region' with a hint."""
    lines = open(model_c).read().split("\n")
    idx = [(i, re.match(r"/\* kernel (\d+): region (\S+) \*/", ln)) for i, ln in enumerate(lines)]
    idx = [(i, g.group(1), g.group(2)) for i, g in idx if g]
    shape, same, hint = {}, {}, {}
    for j, (i, k, r) in enumerate(idx):
        end = idx[j + 1][0] if j + 1 < len(idx) else len(lines)
        for ln in lines[i:end]:
            g = re.search(r"(?:int8 GEMM|: conv|: gemm) (\d+) ?x ?(\d+) ?x ?(\d+)", ln)
            if g:
                shape[k] = tuple(int(v) for v in g.groups())
                break
            g = re.search(r"/\* the code of kernel (\d+) \*/", ln)
            if g:
                same[k] = g.group(1)
                break
        h = " ".join(lines[i:i + 3])  # its region's name, its first comment (after its plan's where it has one)
        hint[k] = ("maxpool" if "max pool" in h or "max_pool" in h else "avgpool" if "pool" in h
                   else "quantize / map / reorder")
    free = collections.defaultdict(list)
    for name, s, kind in convs:
        free[s].append(kind)
    out = {}
    for i, k, r in idx:
        s = shape.get(same.get(k, k))
        if s and s[0] > 1 and free.get(s):
            out[r] = free[s].pop(0)
        elif s and s[0] == 1:
            out[r] = "FC (GEMV)"
        else:
            out[r] = hint[k]
    return out


def harp_profile(exe, qdq, repeat, cdir):
    """(per-kernel (alone ms, in-run ms), median ms) of one `harp bench --profile --json` run; dumps C into cdir."""
    p = subprocess.run([exe, "bench", qdq, "--random-inputs", "--profile", "--json", "--repeat", str(repeat),
                        "--dump", "c", "--dump-dir", cdir], capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError(p.stderr[-800:])
    d = json.loads(p.stdout[p.stdout.index("{"):])
    return {k["kernel"]: (k["median_ms"], k.get("in_run_ms", 0.0)) for k in d["kernels"]}, d["median_ms"]


def ov_profile(path, runs, f32=False):
    """({(layer, type): [min µs, summed µs]}, min total ms) of OpenVINO at 2 threads, one stream, PERF_COUNT;
    f32: with INFERENCE_PRECISION_HINT=f32."""
    import numpy as np
    import openvino as ov
    cfg = {"INFERENCE_NUM_THREADS": "2", "NUM_STREAMS": "1", "PERF_COUNT": "YES"}
    if f32:
        cfg["INFERENCE_PRECISION_HINT"] = "f32"
    cm = ov.Core().compile_model(path, "CPU", cfg)
    req = cm.create_infer_request()
    x = np.random.default_rng(2).standard_normal(tuple(cm.inputs[0].shape)).astype(np.float32)
    best, ts = {}, []
    for _ in range(runs):
        t = time.perf_counter()
        req.infer({0: x})
        ts.append(time.perf_counter() - t)
        for q in req.get_profiling_info():
            us = q.real_time.total_seconds() * 1e6
            if q.status.name != "EXECUTED" and us == 0:
                continue
            k = (q.node_name, q.node_type)
            b = best.setdefault(k, [1e9, 0.0])
            b[0] = min(b[0], us)
            b[1] += us
    return best, min(ts) * 1e3


def ov_kinds(best, convs, col):
    """{kind: µs} of OpenVINO's layers (column col of best: 0 min, 1 sum): a conv by its node name's
    ONNX conv, else by node type."""
    kind_of = {name: kind for name, _, kind in convs}
    agg = collections.defaultdict(float)
    for (name, typ), v in best.items():
        us = v[col]
        base = name.split("/")[0]
        if typ == "Convolution" and base in kind_of:
            agg[kind_of[base]] += us
        elif typ.startswith("FullyConnected"):
            agg["FC (GEMV)"] += us
        else:
            agg[{"MaxPool": "maxpool", "AvgPool": "avgpool"}.get(typ, "quantize / map / reorder")] += us
    return agg


def print_table(cols, ovmin, ovsum, quiet):
    """The markdown table: per kind harp's (and base's) summed min ms "alone", its share, and the
    summed min ms "in run" (caches as the kernels before it left them), OpenVINO's summed per-layer
    min ms and its share of the summed times, and with quiet = "H,O" (the whole-model quiet ms of
    harp and OpenVINO) each share times that total, and their ratio."""
    tot = {n: sum(v[1] for v in c.values()) or 1.0 for n, c in cols.items()}
    totr = {n: sum(v[2] for v in c.values()) for n, c in cols.items()}
    osum = sum(ovsum.values()) or 1.0
    qh, qo = (float(v) for v in quiet.split(",")) if quiet else (0.0, 0.0)
    allk = sorted(set().union(*[set(c) for c in cols.values()], set(ovsum)),
                  key=lambda k: -cols["harp"].get(k, [0, 0.0, 0.0])[1])
    hdr = "| kind | kernels | harp ms | harp % | harp in run ms |" + \
        (" base ms | base in run ms |" if "base" in cols else "") + \
        (" OpenVINO ms | OpenVINO % |" if ovsum else "") + \
        (" harp quiet ms (est.) | OpenVINO quiet ms (est.) | harp / OpenVINO |" if qh and ovsum else "")
    print(hdr)
    print("|" + "---|" * (hdr.count("|") - 1))
    for k in allk + ["all"]:
        if k == "all":
            n, v, vr = sum(c[0] for c in cols["harp"].values()), tot["harp"], totr["harp"]
        else:
            n, v, vr = cols["harp"].get(k, [0, 0.0, 0.0])
        hs = v / tot["harp"]
        row = f"| {k} | {n} | {v:.3f} | {100 * hs:.1f} | {vr:.3f} |"
        if "base" in cols:
            b = (0, tot["base"], totr["base"]) if k == "all" else cols["base"].get(k, [0, 0.0, 0.0])
            row += f" {b[1]:.3f} | {b[2]:.3f} |"
        if ovsum:
            os_ = 1.0 if k == "all" else ovsum.get(k, 0.0) / osum
            om = sum(ovmin.values()) if k == "all" else ovmin.get(k, 0.0)
            row += f" {om / 1e3:.3f} | {100 * os_:.1f} |"
            if qh:
                row += f" {hs * qh:.3f} | {os_ * qo:.3f} | " + (f"{hs * qh / (os_ * qo):.2f} |" if os_ else "- |")
        print(row)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "harp-int8-models"))
    ap.add_argument("--harp", default=os.path.join(HERE, "..", "build", "harp"))
    ap.add_argument("--base", default="", help="another harp binary, profiled in alternation")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--ov-runs", type=int, default=200)
    ap.add_argument("--no-ov", action="store_true")
    ap.add_argument("--fp32", action="store_true", help="the fp32 model, OpenVINO at f32")
    ap.add_argument("--quiet", default="", help="H,O: quiet whole-model ms of harp and OpenVINO, to scale the shares by")
    a = ap.parse_args()
    qdq = os.path.join(a.dir, f"{a.model}_{'fp32' if a.fp32 else 'qdq'}.onnx")
    if not os.path.exists(os.path.join(a.dir, f"{a.model}_qdq.onnx")):
        import int8
        int8.quantize(a.model, a.dir)
    convs = onnx_convs(qdq)
    exes = {"harp": a.harp, **({"base": a.base} if a.base else {})}
    best = {n: {} for n in exes}
    meds = {n: [] for n in exes}
    kinds = {}
    with tempfile.TemporaryDirectory() as td:
        for r in range(a.rounds):
            for n, exe in (exes.items() if r % 2 == 0 else reversed(list(exes.items()))):
                cdir = os.path.join(td, n)
                ks, med = harp_profile(exe, qdq, a.repeat, cdir)
                meds[n].append(med)
                kinds.setdefault(n, harp_kinds(os.path.join(cdir, "model.c"), convs))
                for k, (v, vr) in ks.items():
                    b = best[n].setdefault(k, [1e9, 1e9])
                    b[0], b[1] = min(b[0], v), min(b[1], vr)
            print(f"round {r + 1}: " + ", ".join(f"{n} median {meds[n][-1]:.2f} ms" for n in exes),
                  f"(load {os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)
    cols = {}
    for n in exes:
        agg = collections.defaultdict(lambda: [0, 0.0, 0.0])
        for k, (v, vr) in best[n].items():
            kd = kinds[n].get(k, "other (?)")
            agg[kd][0] += 1
            agg[kd][1] += v
            agg[kd][2] += vr
        cols[n] = agg
    ovmin, ovsum = {}, {}
    if not a.no_ov:
        b, tot = ov_profile(qdq, a.ov_runs, a.fp32)
        ovmin, ovsum = ov_kinds(b, convs, 0), ov_kinds(b, convs, 1)
        print(f"OpenVINO: min total {tot:.3f} ms over {a.ov_runs} runs (load {os.getloadavg()[0]:.1f})",
              file=sys.stderr)
    print_table(cols, ovmin, ovsum, a.quiet)
    for n in exes:
        print(f"{n}: medians of the profiled runs {[round(m, 2) for m in meds[n]]}")


if __name__ == "__main__":
    main()
