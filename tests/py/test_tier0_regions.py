"""Tier 0 on the greedy regions (knob tier0=auto, src/runtime/cpu.c): the
first run waits for the greedy pass of region formation only; the exact
search on windows, the Function and plans of the object's regions run on
the builder thread.  On a MobileNetV2 (at 32x32) --time-stages must show
no plans stage before the first result, and tier 0 running no more
kernels than the object has (tier0=off: the code stage's count): the
greedy pass fuses each depthwise convolution's clip epilogue as the exact
search does (a contraction with no plan of its own still absorbs an
epilogue that had one; before, 68 kernels against the object's 54); with
the knob tier0_exact tier 0 runs the object's regions (as before).  The object the builder makes is the one
tier0=off makes (the same file in the cache: the same C).  Tier 0's result
either way and the object's (tier0=off, and a warm cache) agree with
onnxruntime."""
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

import onnx_models as om
from harp_test import HARP, SRC, Suite, close

try:
    import onnx
    import onnxruntime as ort
except ImportError:
    print("onnx / onnxruntime not installed (scripts/install-deps.sh)")
    raise SystemExit(77)
sys.path.insert(0, os.path.join(SRC, "bench"))
import e2e  # noqa: E402  (MobileNetV2's weights)

s = Suite("tier0_regions")
HW = 32
path = os.path.join(tempfile.mkdtemp(), "mnv2.onnx")
onnx.save(om.mobilenetv2(e2e.mobilenetv2_weights(), om.mobilenetv2_blocks(), hw=HW), path)
x = e2e.rand(1, 3, HW, HW)
want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
TOL = 1e-4


def harp(knobs, cache=None):
    """`harp run` of the model with these knobs on cache (else a fresh one): (process, its output)."""
    out = tempfile.mkdtemp()
    f = os.path.join(out, "in_x.npy")
    np.save(f, x)
    args = [HARP, "run", path, "--out", out, "--input", f"x={f}", "--time-stages"]
    for k in knobs:
        args += ["--knob", k]
    env = dict(os.environ, HARP_CACHE_DIR=cache or tempfile.mkdtemp())
    p = subprocess.run(args, capture_output=True, text=True, timeout=600, env=env)
    got = None
    outs = [n for n in os.listdir(out) if n.endswith(".npy") and not n.startswith("in_")]
    if p.returncode == 0 and outs:
        got = np.load(os.path.join(out, outs[0]))
    return p, got


def tier0_kernels(err):
    m = re.search(r"tier 0: (\d+) kernels on the shape-generic kernels \([0-9.]+ ms\), (\d+) on the interpreter", err)
    return int(m.group(1)) + int(m.group(2)) if m else -1


def stages(err):
    return next((ln for ln in err.splitlines() if "stages (cpu)" in ln), "")


def vs_ort(what, got):
    s.check(f"{what}: vs onnxruntime", got is not None and close(got, want, rtol=TOL, atol=TOL * max(1.0, float(np.abs(want).max())))[0],
            "no output" if got is None else f"max |diff| {np.abs(got.astype(np.float64) - want).max():.3g}")


# the object's kernels: tier0=off prints its C before the run
cache_off = tempfile.mkdtemp()
po, got_obj = harp(["tier0=off"], cache_off)
m = re.search(r"code [0-9.]+ ms \([0-9]+ KiB of C, (\d+) kernels\)", po.stderr)
n_obj = int(m.group(1)) if m else -1
s.check("off: runs, the object's kernels counted", po.returncode == 0 and n_obj > 0, po.stderr.strip()[-400:])
vs_ort("off (the object)", got_obj)

# auto: tier 0 on the greedy regions, before the exact search and the plans
cache = tempfile.mkdtemp()
pa, got_t0 = harp(["tier0=auto"], cache)
n_t0 = tier0_kernels(pa.stderr)
s.check("auto: the first run is tier 0", pa.returncode == 0 and "first result written" in pa.stderr, pa.stderr.strip()[-400:])
s.check("auto: the first result waits for no plans (the exact search is the builder's)",
        "regions" in stages(pa.stderr) and "plans" not in stages(pa.stderr), stages(pa.stderr))
s.check(f"auto: tier 0's greedy regions fuse the epilogues, no more kernels than the object's {n_obj}",
        0 < n_t0 <= n_obj, f"tier 0 {n_t0}, object {n_obj}")
sos = sorted(f for f in os.listdir(cache) if f.endswith(".so"))
s.check("auto: the builder's object is tier0=off's (the exact regions' C)",
        sos and sos == sorted(f for f in os.listdir(cache_off) if f.endswith(".so")), f"{sos} vs {os.listdir(cache_off)}")
vs_ort("auto (tier 0, greedy regions)", got_t0)
if got_t0 is not None and got_obj is not None:
    s.check("auto: tier 0 vs the object", *close(got_t0, got_obj, rtol=TOL, atol=TOL * max(1.0, float(np.abs(want).max()))))

# the knob tier0_exact: tier 0 waits for the exact search, runs the object's regions
pe, got_e = harp(["tier0=auto", "tier0_exact=1"])
s.check("tier0_exact: tier 0 runs the object's regions, after its plans",
        pe.returncode == 0 and tier0_kernels(pe.stderr) == n_obj and "plans" in stages(pe.stderr), pe.stderr.strip()[-400:])
vs_ort("tier0_exact (tier 0, exact regions)", got_e)

# warm cache: the object the builder made from the exact regions is found again
pw, got_w = harp(["tier0=auto"], cache)
s.check("auto, warm cache: runs, nothing built", pw.returncode == 0 and ("found in the cache" in pw.stderr or
        "object was ready before the first run" in pw.stderr), pw.stderr.strip()[-400:])
vs_ort("auto, warm cache", got_w)

s.close()
