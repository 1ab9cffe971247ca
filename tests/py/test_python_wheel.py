#!/usr/bin/env python3
"""test_python_wheel.py — the package as a user gets it: a wheel built from
this tree (pip wheel; scikit-build-core + nanobind, over this build's
libharp.so so only the extension compiles: HARP_PREBUILT_DIR), installed
into a fresh virtual environment, runs a model there against onnxruntime's
numbers, and `python -m harp` is the CLI.  Skipped without
scikit-build-core and nanobind (scripts/install-deps.sh installs them).
A full `pip install .` (the library too) is the same wheel with no
HARP_PREBUILT_DIR; docs/python.md says how long it takes."""
import glob
import os
import subprocess
import sys
import tempfile

from harp_test import HARP, MODELS, SRC, Suite

s = Suite("python_wheel")
if os.environ.get("HARP_SANITIZE", "0") not in ("0", "", "FALSE", "false"):
    print("a sanitizer build: its libharp.so needs the sanitizer's runtime first: skipped")
    sys.exit(77)
try:
    import nanobind  # noqa: F401
    import scikit_build_core  # noqa: F401
except ImportError:
    print("scikit-build-core or nanobind not installed: skipped")
    sys.exit(77)
BUILD = os.path.dirname(os.path.abspath(HARP))
if not glob.glob(os.path.join(BUILD, "libharp.so.*.*")):
    print("no libharp.so in the build: skipped")
    sys.exit(77)
tmp = tempfile.mkdtemp(prefix="harp_wheel_")


def sh(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=600, **kw)


r = sh([sys.executable, "-m", "pip", "wheel", SRC, "--no-build-isolation", "--no-deps", "-w", os.path.join(tmp, "dist"),
        f"-Ccmake.define.HARP_PREBUILT_DIR={BUILD}", f"-Cbuild-dir={os.path.join(tmp, 'build')}"])
wheels = glob.glob(os.path.join(tmp, "dist", "harp-*.whl"))
s.check("pip wheel", r.returncode == 0 and len(wheels) == 1, r.stdout[-1500:] + r.stderr[-1500:])
if not wheels:
    s.close()
venv = os.path.join(tmp, "venv")
# numpy and onnxruntime come from this Python's site-packages; harp only from the wheel
r = sh([sys.executable, "-m", "venv", "--system-site-packages", venv])
py = os.path.join(venv, "bin", "python")
s.check("a fresh venv", r.returncode == 0, r.stderr[-500:])
r = sh([py, "-m", "pip", "install", "-q", "--no-index", "--no-deps", wheels[0]])
s.check("pip install the wheel", r.returncode == 0, r.stdout[-800:] + r.stderr[-800:])
check = f"""
import os, sys, numpy as np, harp
assert os.path.dirname(harp.__file__).startswith({venv!r}), harp.__file__
x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
p = os.path.join({MODELS!r}, "small_cnn.onnx")
y = harp.InferenceSession(p).run(None, {{"x": x}})[0]
try:
    import onnxruntime as ort
    want = ort.InferenceSession(p, providers=["CPUExecutionProvider"]).run(None, {{"x": x}})[0]
    assert np.allclose(y, want, rtol=1e-4, atol=1e-4), abs(y - want).max()
except ImportError:
    pass
print("ok", harp.__version__)
"""
env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HARP_BIN")}
r = sh([py, "-c", check], cwd=tmp, env=env)
s.check("the installed package runs a model (= onnxruntime)", r.returncode == 0 and r.stdout.startswith("ok "),
        r.stdout[-500:] + r.stderr[-1500:])
r = sh([py, "-m", "harp", "--help"], cwd=tmp, env=env)
s.check("python -m harp is the CLI", r.returncode == 0 and "harp" in r.stdout + r.stderr, r.stdout[-300:] + r.stderr[-300:])
r = sh([py, "-m", "harp", "run", os.path.join(MODELS, "small_cnn.onnx"), "--random-inputs", "--out", os.path.join(tmp, "o")],
       cwd=tmp, env=env)
s.check("python -m harp run", r.returncode == 0 and os.path.exists(os.path.join(tmp, "o", "y.npy")), r.stderr[-500:])
r = sh([py, "-m", "harp", "run", os.path.join(tmp, "missing.onnx")], cwd=tmp, env=env)
s.check("python -m harp: the CLI's exit code and message", r.returncode == 1 and "IoError" in r.stderr, r.stderr[-300:])
s.close()
