"""Helpers for harp's Python cross-check tests.

Each test is a script run by ctest with HARP_BIN (the CLI) and
HARP_SOURCE_DIR in the environment.  A test prints one line per check and a
closing 'N passed, M failed' line; it exits 1 on failure, 77 to skip.

Two ways to run a model: run() drives `harp run` (a process, .npy files:
for the tests of the CLI itself, --dump, --param on ONNX); run_model()
compiles and runs it in this process through the Python package the build
staged beside HARP_BIN (<build>/python/harp), and falls back to run() where
the build has no extension (a sanitizer build, nanobind missing) or
HARP_TEST_CLI=1 asks for the CLI.

Tier 0: with tier0=auto (the default) a `harp run` on the cpu backend, and
a Python session, answer their first (and, in a test, only) run on
libharp's shape-generic kernels while the compiled C builds
(docs/architecture.md, "Tier 0"), so a test that runs a model once checks
tier 0, not the C.  A test whose purpose is the compiled C's numbers calls
compiled_only() first; run_cpu_and_interp and run_model's CLI fallback run
the object always, and so does every session of the package as package()
or harp_py.py imports it (they call compiled_only(): a test of tier 0's
sessions asks for it with the knob, test_python_tier0.py).

Needs: numpy; the harp CLI (HARP_BIN); the package where built.  Gives:
Suite, run, run_model, package, run_cpu_and_interp, compiled_only, close,
onnx_or_skip, write_model, shapeset_run, shapeset_built, cpu_c, ISAS, host_has, cc_forced_isa, HARP, SRC,
MODELS, BACKENDS.
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


def compiled_only():
    """Opt in, for a test whose purpose is the compiled C's numbers: every
    `harp run` this process starts from here on (run, shapeset_run, its own
    subprocesses) runs the compiled object from its first run, not tier 0
    (HARP_TIER0=off; the module's docstring says why)."""
    os.environ["HARP_TIER0"] = "off"


def onnx_or_skip(runtime=True):
    """The preamble of a test that builds ONNX models: exit 77 (ctest's skip)
    with a line saying what is missing unless onnx and, with runtime,
    onnxruntime import (scripts/install-deps.sh installs both)."""
    try:
        import onnx  # noqa: F401
        if runtime:
            import onnxruntime  # noqa: F401
    except ImportError as ex:
        print(f"{ex.name or 'onnx'} not installed (scripts/install-deps.sh): skipped")
        sys.exit(77)


def run(model, inputs=None, syms=(), extra=(), outdir=None, backend="interp", params=(), indir=None):
    """Run `harp run`; returns (completed process, outdir).  Inputs named in
    params go as --param (weights: constants the backend may pack once); their
    files go to indir (default: outdir)."""
    outdir = outdir or tempfile.mkdtemp(prefix="harp_py_")
    args = [HARP, "run", model, "--out", outdir, "--backend", backend, *extra]
    for name, arr in (inputs or {}).items():
        path = os.path.join(indir or outdir, f"in_{name}.npy")
        np.save(path, arr)
        args += ["--param" if name in params else "--input", f"{name}={path}"]
    for s in syms:
        args += ["--sym", s]
    p = subprocess.run(args, capture_output=True, text=True, timeout=300)
    return p, outdir


_PKG = []  # [the package or None], once looked up


def package():
    """The harp package staged beside HARP_BIN, imported; None where the build
    has none (sanitizer builds, no nanobind) or HARP_TEST_CLI=1."""
    if not _PKG:
        stage = os.path.join(os.path.dirname(os.path.abspath(HARP)), "python")
        pkg = None
        if os.environ.get("HARP_TEST_CLI") != "1" and os.path.exists(os.path.join(stage, "harp", "__init__.py")):
            sys.path.insert(0, stage)
            compiled_only()  # the sessions' first runs on the object, not tier 0 (the module's docstring)
            import harp as pkg
        _PKG.append(pkg)
    return _PKG[0]


def out_key(name):
    """The key of output `name` in run_model's result: the identifier harp
    gives it, which is also the stem of the CLI's output file (harp/onnx.h)."""
    s = "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_" for c in name[:100])
    return "_" + s if not s or s[0].isdigit() else s


def run_model(model, inputs=None, backend="interp", syms=(), params=()):
    """Compile the model file `model` for `backend` and run it on `inputs`
    ({name: array}; those named in params are the weights of a .harp / .json
    model).  Returns (outputs, None), outputs {out_key(name): array}, or
    (None, the error's text: "error[Kind]: ..." as the CLI prints it).  In
    this process through the package where the build has it, else `harp run`."""
    harp = package()
    if harp is None:
        return _run_model_cli(model, inputs, backend, syms, params)
    inputs = dict(inputs or {})
    weights = {k: inputs.pop(k) for k in params}
    opts = harp.SessionOptions(syms=list(syms), params=weights or None, progress=False,
                               cache_dir=os.environ["HARP_CACHE_DIR"])
    try:
        with harp.InferenceSession(model, opts, providers=[backend]) as sess:
            names = [o.name for o in sess.get_outputs()]
            got = sess.run(None, inputs)
    except harp.HarpError as ex:
        return None, str(ex)
    return {out_key(n): a for n, a in zip(names, got)}, None


def _run_model_cli(model, inputs, backend, syms, params):
    """run_model through `harp run`: the outputs read back from their .npy files."""
    outdir = tempfile.mkdtemp(prefix="harp_out_")
    indir = tempfile.mkdtemp(prefix="harp_in_")
    # tier0=off: the object's numbers, as the package's session gives them
    p, _ = run(model, inputs, syms=syms, outdir=outdir, backend=backend, params=set(params), indir=indir,
               extra=["--knob", "tier0=off"] if backend == "cpu" else [])
    if p.returncode:
        return None, p.stderr.strip()
    return {f[:-4]: np.load(os.path.join(outdir, f)) for f in sorted(os.listdir(outdir)) if f.endswith(".npy")}, None


def run_cpu_and_interp(suite, name, text, tensors, params=(), tail=600):
    """Write the DSL `text` to a file, run it on the cpu backend (keeping the
    generated C; the compiled object, not tier 0) and on the interpreter,
    and check both ran.  Returns (the generated C, cpu out dir, interpreter
    out dir), or None when a run failed."""
    path = os.path.join(tempfile.mkdtemp(), "".join(c if c.isalnum() else "_" for c in name) + ".harp")
    with open(path, "w") as f:
        f.write(text)
    dump = tempfile.mkdtemp()
    p, d = run(path, tensors, params=set(params), backend="cpu",
               extra=["--dump", "c", "--dump-dir", dump, "--knob", "tier0=off"])
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


def cpu_c(path, extra=()):
    """The C `harp compile` makes of path for the cpu (extra: more options),
    all its .c files in one string, and the process."""
    out = tempfile.mkdtemp(prefix="harp_cpu_c_")
    p = subprocess.run([HARP, "compile", path, "--target", "cpu", "-o", out, *extra], capture_output=True, text=True,
                       timeout=300)
    return "".join(open(os.path.join(r, f)).read() for r, _, fs in os.walk(out) for f in fs if f.endswith(".c")), p


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


def shapeset_run(path, feeds, extra, env, workdir):
    """`harp run path --time-stages` with feeds {name: array} as --input files
    and extra (--shapeset ...) in env: (the process, its output folder)."""
    out = tempfile.mkdtemp(dir=workdir)
    args = [HARP, "run", path, "--out", out, "--time-stages", *extra]
    for name, a in feeds.items():
        f = os.path.join(out, f"in_{name}.npy")
        np.save(f, a)
        args += ["--input", f"{name}={f}"]
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=300), out


def shapeset_built(p):
    """(objects, of them built by the C compiler) a `--shapeset --time-stages` run printed, or None."""
    import re
    m = re.search(r"shapeset: (\d+) object\(s\), (\d+) built by the C compiler", p.stderr)
    return (int(m.group(1)), int(m.group(2))) if m else None


# A package's variants forced one by one: cc_forced_isa builds it with its CPUID dispatch read from the
# environment (__builtin_cpu_supports(f) -> true where HP_TEST_ISA lists f; the generated code untouched).
# ISAS: each variant's name, its HP_TEST_ISA, the /proc/cpuinfo flag this CPU needs to run it.
ISAS = [("scalar", "", None), ("avx2", "avx2,fma", "avx2"), ("avx512", "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma", "avx512f")]
_CPU_C = r"""
#include <stdlib.h>
#include <string.h>
int hp_test_cpu(const char *feature) {
  const char *v = getenv("HP_TEST_ISA");
  return v && strstr(v, feature) != NULL;
}
"""


def host_has(feature):
    """Whether this CPU has /proc/cpuinfo flag `feature` (None: any CPU)."""
    flags = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
    return feature is None or f" {feature}" in flags


def cc_forced_isa(exe, sources, includes=()):
    """cc -O2 of sources into exe, the dispatch from HP_TEST_ISA; the process."""
    d = tempfile.mkdtemp()
    open(os.path.join(d, "hp_cpu.h"), "w").write("int hp_test_cpu(const char *feature);\n")
    open(os.path.join(d, "hp_cpu.c"), "w").write(_CPU_C)
    cmd = ["cc", "-O2", "-fno-math-errno", "-D__builtin_cpu_supports(x)=hp_test_cpu(x)", "-include", os.path.join(d, "hp_cpu.h")]
    cmd += [f"-I{i}" for i in includes] + ["-o", exe, *sources, os.path.join(d, "hp_cpu.c"), "-lm", "-lpthread"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)
