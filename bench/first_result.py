#!/usr/bin/env python3
"""first_result.py — cold time to first result: harp against onnxruntime and
OpenVINO, each from nothing to the first output of a model.

    python3 bench/first_result.py [--harp build/harp] [--rounds 3] [--off] [--no-wait] [--only resnet50,mobilenetv2,bert_layer,ppocr_det]
                                  [--ab KNOB=V[,KNOB=V...]] [--base OTHER_HARP] [--python]

For each model, in interleaved rounds at 2 threads:
  harp t0   `harp run MODEL --knob tier0=auto` (the default) on an empty cache directory: the
            first result from tier 0 (libharp's shape-generic kernels plus the
            interpreter, docs/architecture.md "Tier 0") while the specialised
            object builds in the background; timed from the process's start to
            the line `harp run` prints once the outputs are written (its stdout
            is flushed there, before it waits for the build)
  harp warm the same command again on the cache the t0 run filled: the
            first result from tier 0 again while the background thread
            prints the C and finds the object in the cache
  harp B    (--ab) the harp t0 run again with these knobs (e.g. no_poly_reuse=1:
            a compile-time cut switched off), in the same rounds: a before /
            after of one binary on one loaded machine
  harp base (--base) the harp t0 run of another binary (e.g. main's build)
            in the same rounds, before the t0 run in every other round: a
            before / after of two builds
  harp off  (--off) the same with tier0=off: the whole C compile before the
            first run (what every cold run did before tier 0)
  py t0     (--python) the Python package staged beside --harp (<build>/python): a new
            interpreter imports numpy and harp, then harp.InferenceSession(...) + the first
            run on an empty cache directory, timed inside that process as onnxruntime's
            figure is (the imports not counted; tier 0 as the session's default); the
            process exits at once after (its background build is not waited for)
  py off    (--python --off) the same with knobs={"tier0": "off"}: the C compile first
  ort       onnxruntime: InferenceSession(...) + the first run, in this process
  ov        OpenVINO: Core().compile_model(..., "CPU") + the first inference,
            at its default precision (printed)
Each harp process also reports when its background build finished ("build").
The outputs of tier 0 are compared with onnxruntime's (max abs error over the
output's largest magnitude).

Models: ResNet-50 (the onnx package's light model with random weights,
bench/onnx_bench.py), MobileNetV2 and one BERT-base layer (S=128) built by
tests/py/onnx_models.py with bench/e2e.py's weights, and the PP-OCRv4 text
detector at 640x640 (tests/realmodels, fetched into its cache).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "py"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "realmodels"))
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402

import e2e  # noqa: E402
import onnx_bench  # noqa: E402
import onnx_models as om  # noqa: E402

THREADS = 2


def resnet50():
    m, xname, x = onnx_bench.light("light_resnet50")
    return m, {xname: x}


def mobilenetv2():
    return om.mobilenetv2(e2e.mobilenetv2_weights(), om.mobilenetv2_blocks()), {"x": e2e.rand(1, 3, 224, 224)}


def bert_layer(S=128, E=768, H=12, F=3072):
    c = e2e.case_bert(1, S, E, H, F)
    t = {k: v for k, (kind, v) in c["tensors"].items() if kind == "param"}
    return om.bert(t, 1, S, E, H, F, gelu_op=True), {"x": c["tensors"]["x"][1]}


def ppocr_det():
    import fetch
    entry = next(e for e in fetch.load_manifest() if e["name"] == "ppocr_v4_det")
    m = onnx.load(fetch.fetch(entry))
    return m, {"x": np.random.default_rng(3).random((1, 3, 640, 640), dtype=np.float32)}


MODELS = {"resnet50": resnet50, "mobilenetv2": mobilenetv2, "bert_layer": bert_layer, "ppocr_det": ppocr_det}


def harp_cold(exe, path, inputs, tier0, workdir, cache=None, wait=True, knobs=()):
    """One `harp run` on an empty cache (or on `cache`): (ms to the first
    output line, ms to exit, build ms reported or None, the first output,
    the cache directory).  wait=False: the process is killed once its first
    output line is out (its background build is not waited for)."""
    out = tempfile.mkdtemp(dir=workdir)
    cache = cache or tempfile.mkdtemp(dir=workdir)
    args = [exe, "run", path, "--out", out, "--knob", f"tier0={tier0}", "--time-stages"]
    for k in knobs:
        args += ["--knob", k]
    for k, v in inputs.items():
        f = os.path.join(workdir, f"in_{k}.npy")
        np.save(f, v)
        args += ["--input", f"{k}={f}"]
    env = dict(os.environ, HARP_CACHE_DIR=cache)
    t0 = time.perf_counter()
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    first = None
    for line in p.stdout:
        if first is None and " -> " in line:
            first = (time.perf_counter() - t0) * 1e3
            if not wait:
                p.kill()
                break
    err = p.stderr.read()
    p.wait()
    if not wait:
        got = np.load(os.path.join(out, sorted(f for f in os.listdir(out) if f.endswith(".npy"))[0]))
        return first, float("nan"), None, got, cache
    total = (time.perf_counter() - t0) * 1e3
    if p.returncode:
        raise RuntimeError(f"harp run failed: {err.strip()[-400:]}")
    build = None
    for line in err.splitlines():
        if "built in" in line:
            build = float(line.split("built in")[1].split("ms")[0])
    got = np.load(os.path.join(out, sorted(f for f in os.listdir(out) if f.endswith(".npy"))[0]))
    return first, total, build, got, cache


PY_FIRST = r'''
import os, sys, time
import numpy as np
import harp
feeds = {k: np.load(f) for k, f in zip(sys.argv[3::2], sys.argv[4::2])}
opts = {"intra_op_num_threads": %d, "cache_dir": sys.argv[2], "progress": False}
if os.environ.get("BENCH_TIER0"):
    opts["knobs"] = {"tier0": os.environ["BENCH_TIER0"]}
t0 = time.perf_counter()
s = harp.InferenceSession(sys.argv[1], opts)
y = s.run(None, feeds)[0]
ms = (time.perf_counter() - t0) * 1e3
np.save(os.path.join(sys.argv[2], "y.npy"), y)
print("first %%.3f tier0 %%d" %% (ms, s.last_run_tier0), flush=True)
os._exit(0)  # not waiting for the background build
''' % THREADS


def py_first(exe, path, inputs, workdir, tier0=""):
    """Session + first run of the Python package beside exe in a new interpreter, on an empty cache
    directory: (ms, whether the run was on tier 0, the output)."""
    cache = tempfile.mkdtemp(dir=workdir)
    args = [sys.executable, "-c", PY_FIRST, path, cache]
    for k, v in inputs.items():
        f = os.path.join(workdir, f"in_{k}.npy")
        np.save(f, v)
        args += [k, f]
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(os.path.abspath(exe)), "python"))
    env.pop("HARP_TIER0", None)
    if tier0:
        env["BENCH_TIER0"] = tier0
    p = subprocess.run(args, capture_output=True, text=True, env=env)
    if p.returncode:
        raise RuntimeError(f"the Python session failed: {p.stderr.strip()[-400:]}")
    words = p.stdout.split()
    return float(words[1]), words[3] == "1", np.load(os.path.join(cache, "y.npy"))


def ort_first(path, inputs):
    t0 = time.perf_counter()
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = THREADS, 1
    so.log_severity_level = 3
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    y = s.run(None, inputs)[0]
    return (time.perf_counter() - t0) * 1e3, y


def ov_first(path, inputs):
    import openvino as ov
    t0 = time.perf_counter()
    core = ov.Core()
    cm = core.compile_model(path, "CPU", {"INFERENCE_NUM_THREADS": THREADS})
    cm(inputs)
    ms = (time.perf_counter() - t0) * 1e3
    return ms, str(cm.get_property("INFERENCE_PRECISION_HINT"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--harp", default=os.path.join(HERE, "..", "build", "harp"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default=",".join(MODELS))
    ap.add_argument("--off", action="store_true", help="also time tier0=off (the whole compile first: slow)")
    ap.add_argument("--no-off", action="store_true", help="(the default) skip the tier0=off runs")
    ap.add_argument("--ab", default="", help="KNOB=V[,KNOB=V...]: also time the t0 run with these knobs (harp B)")
    ap.add_argument("--base", default="", help="another harp binary: also time its t0 run (harp base) in the same rounds")
    ap.add_argument("--python", action="store_true", help="also time the Python package's session + first run (py t0)")
    ap.add_argument("--no-wait", action="store_true",
                    help="stop each harp process at its first result (no exit / build / warm figures: a loaded machine)")
    a = ap.parse_args()
    try:
        import openvino  # noqa: F401
        have_ov = True
    except ImportError:
        have_ov = False
    print(f"load average at the start: {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} {os.getloadavg()[2]:.1f}")
    print(f"{'model':12} {'harp t0':>8} {'exit':>8} {'build':>8} {'warm':>7} {'harp off':>9} {'ort':>8} {'ov':>8} "
          f"{'t0/ort':>7} {'t0/ov':>7}  err  (ms, medians of {a.rounds} interleaved rounds, cold caches, {THREADS} threads)")
    for name in a.only.split(","):
        m, inputs = MODELS[name]()
        work = tempfile.mkdtemp(prefix="harp-first-")
        path = os.path.join(work, name + ".onnx")
        onnx.save(m, path)
        t = {"t0": [], "base": [], "B": [], "exit": [], "build": [], "warm": [], "off": [], "py": [], "pyoff": [],
             "ort": [], "ov": []}
        py_err, py_t0 = float("nan"), []
        ab = [k for k in a.ab.split(",") if k]
        prec, err = "", float("nan")
        for r in range(a.rounds):
            # the base first in every other round: the run right after the previous round's
            # onnxruntime / OpenVINO was 15-25% slower (MobileNetV2, load 6), whichever binary
            if a.base and r % 2:
                t["base"].append(harp_cold(a.base, path, inputs, "auto", work, wait=False)[0])
            first, total, build, got, cache = harp_cold(a.harp, path, inputs, "auto", work, wait=not a.no_wait)
            t["t0"].append(first), t["exit"].append(total), t["build"].append(build or float("nan"))
            if not a.no_wait:
                t["warm"].append(harp_cold(a.harp, path, inputs, "auto", work, cache)[0])
            if a.base and not r % 2:
                t["base"].append(harp_cold(a.base, path, inputs, "auto", work, wait=False)[0])
            if ab:
                t["B"].append(harp_cold(a.harp, path, inputs, "auto", work, wait=not a.no_wait, knobs=ab)[0])
            if a.off and not a.no_off:
                t["off"].append(harp_cold(a.harp, path, inputs, "off", work)[0])
            if a.python:
                ms, on_t0, py_got = py_first(a.harp, path, inputs, work)
                t["py"].append(ms), py_t0.append(on_t0)
                if a.off and not a.no_off:
                    t["pyoff"].append(py_first(a.harp, path, inputs, work, "off")[0])
            ms, want = ort_first(path, inputs)
            t["ort"].append(ms)
            err = float(np.max(np.abs(got.astype(np.float64) - want)) / (np.max(np.abs(want)) + 1e-30))
            if a.python:
                py_err = float(np.max(np.abs(py_got.astype(np.float64) - want)) / (np.max(np.abs(want)) + 1e-30))
            if have_ov:
                ms, prec = ov_first(path, inputs)
                t["ov"].append(ms)
        med = {k: float(np.median(v)) if v else float("nan") for k, v in t.items()}
        print(f"{name:12} {med['t0']:8.0f} {med['exit']:8.0f} {med['build']:8.0f} {med['warm']:7.0f} {med['off']:9.0f} {med['ort']:8.0f} "
              f"{med['ov']:8.0f} {med['t0'] / med['ort']:7.2f} {med['t0'] / med['ov']:7.2f}  {err:.1g}", flush=True)
        if a.python:
            print(f"  py t0 (Python session + first run, tier 0 in {sum(py_t0)} of {len(py_t0)}): {med['py']:.0f} ms, "
                  f"py/ort {med['py'] / med['ort']:.2f}, py/ov {med['py'] / med['ov']:.2f}, err {py_err:.1g}"
                  + (f"; py off {med['pyoff']:.0f} ms, pyoff/ort {med['pyoff'] / med['ort']:.2f}" if t["pyoff"] else ""))
        if a.base:
            print(f"  harp base ({a.base}): {med['base']:.0f} ms, base/ort {med['base'] / med['ort']:.2f}, "
                  f"t0/base {med['t0'] / med['base']:.2f}")
        if ab:
            print(f"  harp B ({a.ab}): {med['B']:.0f} ms, B/ort {med['B'] / med['ort']:.2f}, t0/B {med['t0'] / med['B']:.2f}")
        for k, v in t.items():
            if v:
                print(f"  {k}: " + " ".join(f"{x:.0f}" for x in v))
    if have_ov:
        print(f"OpenVINO's inference precision: {prec}")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} {os.getloadavg()[2]:.1f}")


if __name__ == "__main__":
    main()
