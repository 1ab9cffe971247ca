#!/usr/bin/env python3
"""realmodels.py — the corpus of real ONNX models (tests/realmodels) timed on
harp against onnxruntime and OpenVINO, 2 threads each, interleaved rounds.

    python3 bench/realmodels.py [--harp build/harp] [--rounds 5] [--repeat 20] [--size large] [--markdown] [--json F] [NAME ...]

Needs: a harp build, onnxruntime, openvino (pip install openvino), and the
corpus in its cache (tests/realmodels/fetch.py; the converter recipes need
torch, see the manifest).  Gives: a table per model (its first shape set,
inputs drawn as tests/py/test_realmodels.py draws them) of median
latencies in ms and the ratios peer / harp (> 1: harp is faster):
  harp     `harp bench MODEL --input ...` (cpu backend, HARP_NUM_THREADS=2):
           the median of --repeat runs of the compiled model, inputs resident
  ort      onnxruntime, CPUExecutionProvider, intra_op_num_threads=2,
           inter_op_num_threads=1, its default graph optimisations
  ov       OpenVINO CPU at its DEFAULT precision (INFERENCE_PRECISION_HINT
           unset: bf16 on a CPU with AVX-512 BF16 or AMX, as this one, so its
           outputs differ from fp32 by ~1e-2), INFERENCE_NUM_THREADS=2,
           PERFORMANCE_HINT=LATENCY, the model reshaped to the inputs' shapes
  ov_f32   the same with INFERENCE_PRECISION_HINT=f32
Each round times every contender once (each a median of --repeat runs);
the table gives the median over --rounds rounds, and the markdown table
also the ratio of the fastest rounds (a busy machine slows harp's spinning
thread pool more than the peers').  Only models that harp
runs and that match onnxruntime (the test's verdict "pass") are timed; the
others are listed with their verdict.  Not a test: the figures go to
bench/RESULTS.md and docs/models.md.
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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "py"))
from settle import median_ms, settle  # noqa: E402  (each contender's block on idle cores)
import test_realmodels as trm  # noqa: E402  (also fetch, harp_test, onnxruntime)

import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402

THREADS = 2
PEERS = ("ort", "ov", "ov_f32")


def ort_session(path):
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = THREADS, 1
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def ov_model(path, feeds, f32):
    """A compiled OpenVINO model for these feeds' shapes (None without openvino).
    Raises what OpenVINO raises for a model it cannot read or compile."""
    try:
        import openvino as ov
    except ImportError:
        return None
    core = ov.Core()
    m = core.read_model(path)
    try:
        m.reshape({name: list(a.shape) for name, a in feeds.items()})
    except Exception:  # noqa: BLE001 (a model OpenVINO cannot make static: keep it dynamic)
        m = core.read_model(path)
    cfg = {"INFERENCE_NUM_THREADS": THREADS, "PERFORMANCE_HINT": "LATENCY"}
    if f32:
        cfg["INFERENCE_PRECISION_HINT"] = "f32"
    return core.compile_model(m, "CPU", cfg)


def harp_bench(harp, path, files, repeat):
    settle()  # a peer's pool may still spin in this process
    cmd = [harp, "bench", path, "--json", "--repeat", str(repeat), "--warmup", "3"]
    for name, f in files.items():
        cmd += ["--input", f"{name}={f}"]
    p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "HARP_NUM_THREADS": str(THREADS)})
    if p.returncode:
        raise RuntimeError(f"harp bench: {p.stderr.strip()[-300:]}")
    return float(json.loads(p.stdout)["median_ms"])


def rel_err(got, want):
    return max(float(np.max(np.abs(np.asarray(g, np.float64) - w)) / (np.max(np.abs(w)) + 1e-30))
               for g, w in zip(got, want) if np.asarray(w).dtype.kind == "f")


def bench_model(entry, a):
    """{"verdict", "detail", and for a model harp runs: medians per contender, ov errors}."""
    try:
        path = trm.fetch.fetch(entry, a.python, trm.CORPUS_CACHE)
    except trm.fetch.FetchError as e:
        return {"verdict": "skipped", "detail": str(e)}
    m = onnx.load(path, load_external_data=False)
    feeds = trm.make_inputs(entry, m, 0)
    names, want = trm.reference(path, feeds)
    tol = (entry.get("rtol", 1e-3), entry.get("atol_rel", 1e-3))
    v, detail, _ = trm.run_harp(a.harp, path, feeds, names, want, tol, a.timeout)
    res = {"verdict": v, "detail": detail, "inputs": trm.shapes_text(entry, 0, feeds)}
    if v != "pass":
        return res
    d = tempfile.mkdtemp(prefix="rmb_")
    files = {}
    for k, (name, arr) in enumerate(feeds.items()):
        files[name] = os.path.join(d, f"in{k}.npy")
        np.save(files[name], trm.conf.feed(arr))
    s = ort_session(path)
    run = {"ort": lambda: s.run(None, feeds)}
    for key, f32 in (("ov", False), ("ov_f32", True)):
        try:
            c = ov_model(path, feeds, f32)
        except Exception as e:  # noqa: BLE001 (OpenVINO refuses the model: its column stays empty)
            res["ov_refused"] = str(e).strip().splitlines()[-1][:200] if str(e).strip() else type(e).__name__
            c = None
        if c is not None:
            req = c.create_infer_request()
            out = req.infer(feeds)
            res[key + "_err"] = rel_err([out[o] for o in c.outputs], want)
            run[key] = (lambda r: lambda: r.infer(feeds))(req)
    t = {k: [] for k in ["harp", *run]}
    for _ in range(a.rounds):
        t["harp"].append(harp_bench(a.harp, path, files, a.repeat))
        for k, fn in run.items():
            t[k].append(median_ms(fn, a.repeat))
    res["ms"] = {k: float(np.median(v)) for k, v in t.items()}
    res["rounds"] = t
    return res


def best_ratio(r, k):
    """peer / harp of the fastest round of each: less hurt by a busy machine than the medians."""
    return f"{min(r['rounds'][k]) / min(r['rounds']['harp']):.2f}" if k in r["rounds"] else "-"


def ratio(r, k):
    return f"{r['ms'][k] / r['ms']['harp']:.2f}" if k in r["ms"] else "-"


def markdown(results, prec):
    """The figures as a markdown table: a row per model that harp runs."""
    print(f"\n| model | inputs | harp ms | onnxruntime ms | OpenVINO {prec} ms | OpenVINO f32 ms | ort / harp | "
          f"OV {prec} / harp | OV f32 / harp | ort / harp, best rounds | OV {prec} error |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in results.items():
        if "ms" not in r:
            continue
        ms, nan = r["ms"], float("nan")
        print(f"| {name} | `{r['inputs']}` | {ms['harp']:.2f} | {ms['ort']:.2f} | {ms.get('ov', nan):.2f} | {ms.get('ov_f32', nan):.2f} | "
              f"{ratio(r, 'ort')} | {ratio(r, 'ov')} | {ratio(r, 'ov_f32')} | {best_ratio(r, 'ort')} | {r.get('ov_err', nan):.1g} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--harp", default=os.path.join(HERE, "..", "build", "harp"))
    ap.add_argument("--python", help="the Python that runs converter recipes (default $HARP_REALMODELS_PYTHON or this one)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--size", choices=("small", "medium", "large"), default="large", help="the largest size class (default large: all)")
    ap.add_argument("--markdown", action="store_true", help="print the table as markdown")
    ap.add_argument("--json", help="write the results to this file")
    ap.add_argument("--from-json", help="print the markdown table of an earlier --json and exit")
    ap.add_argument("names", nargs="*", help="only these models")
    a = ap.parse_args()
    if a.from_json:
        with open(a.from_json) as f:
            doc = json.load(f)
        return markdown(doc["models"], doc["openvino_precision"])
    a.all, a.sanitize = a.size == "large", False
    models = trm.pick(trm.fetch.load_manifest(), a)
    try:
        import openvino as ov
        ovv = ov.__version__.split("-")[0]
        prec = str(ov.Core().get_property("CPU", "INFERENCE_PRECISION_HINT")).split("'")[-2]
    except ImportError:
        ovv, prec = "absent", "-"
    print(f"# {time.strftime('%Y-%m-%d')} {platform.processor() or platform.machine()}, {THREADS} threads; onnxruntime "
          f"{ort.__version__}, openvino {ovv} (default precision here: {prec}); medians of {a.rounds} interleaved rounds, "
          f"each a median of {a.repeat} runs; ratio = peer ms / harp ms", flush=True)
    hdr = f"{'model':22} {'harp ms':>9} {'ort ms':>9} {'ov ms':>9} {'ov f32':>9} {'ort/h':>6} {'ov/h':>6} {'ovf32/h':>7}  ov err  inputs"
    print(hdr, flush=True)
    results = {}
    for e in models:
        r = results[e["name"]] = bench_model(e, a)
        if "ms" not in r:
            print(f"{e['name']:22} {r['verdict']}: {r['detail'][:100]}", flush=True)
            continue
        ms = r["ms"]
        print(f"{e['name']:22} {ms['harp']:9.3f} {ms['ort']:9.3f} {ms.get('ov', float('nan')):9.3f} {ms.get('ov_f32', float('nan')):9.3f} "
              f"{ratio(r, 'ort'):>6} {ratio(r, 'ov'):>6} {ratio(r, 'ov_f32'):>7}  {r.get('ov_err', float('nan')):.1g}  {r['inputs']}", flush=True)
    if a.markdown:
        markdown(results, prec)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"date": time.strftime("%Y-%m-%d"), "openvino_precision": prec, "models": results}, f, indent=1)


if __name__ == "__main__":
    main()
