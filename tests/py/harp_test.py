"""Helpers for harp's Python cross-check tests.

Each test is a script run by ctest with HARP_BIN (the CLI) and
HARP_SOURCE_DIR in the environment.  A test prints one line per check and a
closing 'N passed, M failed' line; it exits 1 on failure, 77 to skip.
"""
import atexit
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HARP = os.environ.get("HARP_BIN", "build/harp")
SRC = os.environ.get("HARP_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
MODELS = os.path.join(SRC, "tests", "models")


class Suite:
    def __init__(self, name):
        self.name, self.passed, self.failed = name, 0, 0

    def check(self, what, ok, detail=""):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            print(f"FAIL {what}: {detail}", flush=True)

    def close(self):
        print(f"{self.name}: {self.passed} passed, {self.failed} failed")
        sys.exit(1 if self.failed else 0)


# Every backend the cross-checks run on; HARP_TEST_BACKENDS narrows it.
BACKENDS = os.environ.get("HARP_TEST_BACKENDS", "interp,cpu").split(",")
# Compiled models go to a private cache, so tests never touch ~/.cache.
os.environ.setdefault("HARP_CACHE_DIR", os.path.join(tempfile.gettempdir(), f"harp-test-cache-{os.getuid()}"))
# Every temporary file and directory a test makes from here on lands in one
# directory of its own, removed when the test exits; HARP_KEEP_TMP=1 keeps it
# (to look at a failure's files) and prints where it is.
_TMP = tempfile.mkdtemp(prefix="harp_test_")
tempfile.tempdir = _TMP
if os.environ.get("HARP_KEEP_TMP"):
    print(f"temporary files kept in {_TMP}", flush=True)
else:
    atexit.register(shutil.rmtree, _TMP, True)


def run(model, inputs=None, syms=(), extra=(), outdir=None, backend="interp", params=()):
    """Run `harp run`; returns (completed process, outdir).  Inputs named in
    params go as --param (weights: constants the backend may pack once)."""
    outdir = outdir or tempfile.mkdtemp(prefix="harp_py_")
    args = [HARP, "run", model, "--out", outdir, "--backend", backend, *extra]
    for name, arr in (inputs or {}).items():
        path = os.path.join(outdir, f"in_{name}.npy")
        np.save(path, arr)
        args += ["--param" if name in params else "--input", f"{name}={path}"]
    for s in syms:
        args += ["--sym", s]
    p = subprocess.run(args, capture_output=True, text=True, timeout=300)
    return p, outdir


def run_cpu_and_interp(suite, name, text, tensors, params=(), tail=600):
    """Write the DSL `text` to a file, run it on the cpu backend (keeping the
    generated C) and on the interpreter, and check both ran.  Returns (the
    generated C, cpu out dir, interpreter out dir), or None when a run failed."""
    path = os.path.join(tempfile.mkdtemp(), "".join(c if c.isalnum() else "_" for c in name) + ".harp")
    with open(path, "w") as f:
        f.write(text)
    dump = tempfile.mkdtemp()
    p, d = run(path, tensors, params=set(params), backend="cpu", extra=["--dump", "c", "--dump-dir", dump])
    suite.check(f"{name}: compiles and runs on cpu", p.returncode == 0, p.stderr.strip()[-tail:])
    q, e = run(path, tensors, params=set(params), backend="interp")
    suite.check(f"{name}: the interpreter runs", q.returncode == 0, q.stderr.strip()[-tail:])
    if p.returncode or q.returncode:
        return None
    with open(os.path.join(dump, "model.c")) as f:
        return f.read(), d, e


def close(got, want, rtol=1e-3, atol=1e-3):
    """Compare after rounding `want` to got's dtype (design.md §2.9)."""
    want = np.asarray(want, dtype=np.float64)
    if got.dtype in (np.float16,):
        want = want.astype(np.float16).astype(np.float64)
    got = got.astype(np.float64)
    if got.shape != want.shape:
        return False, f"shape {got.shape} != {want.shape}"
    ok = np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    err = np.nanmax(np.abs(got - want)) if got.size else 0.0
    return ok, f"max abs err {err:.3g}"


def write_model(uops, outputs=None, path=None):
    import json
    doc = {"uops": uops}
    if outputs:
        doc["outputs"] = outputs
    fd, p = tempfile.mkstemp(suffix=".json", prefix="harp_model_") if path is None else (None, path)
    with open(p, "w") as f:
        json.dump(doc, f)
    if fd is not None:
        os.close(fd)
    return p
