"""`harp compile --sources-only`: the package's sources without the C
compiler.  Against the full `harp compile` of the same model: every file
it writes is the full package's, byte for byte, and the full package has
nothing more than expected/; with a C compiler that always fails (CC=false)
and a cold cache it still writes them (no compiler ran); the package then
builds with its own Makefile and computes the full package's expected/;
the combinations that make no sense are usage errors that write nothing.

Needs: HARP_BIN, HARP_SOURCE_DIR, numpy, onnx (its case skipped without);
make and a C compiler (the build check).  Gives: exit 1 on a failed check."""
import os
import shutil
import subprocess
import tempfile

import numpy as np

from harp_test import HARP, MODELS, Suite

S = Suite("compile_sources")
TMP = tempfile.mkdtemp(prefix="harp_srconly_")


def files(d):
    """Every file under d, by its path relative to d, with its bytes."""
    out = {}
    for r, _, fs in os.walk(d):
        for f in fs:
            p = os.path.join(r, f)
            out[os.path.relpath(p, d)] = open(p, "rb").read()
    return out


def compile_pkg(model, out, extra=(), env=None):
    """`harp compile model --target cpu -o out extra...`: the process."""
    return subprocess.run([HARP, "compile", model, "--target", "cpu", "-o", out, *extra], capture_output=True, text=True,
                          timeout=600, env=env)


def onnx_model():
    """A small ONNX Gemm + Relu with its weights as initializers (they go to
    weights.bin), or None without the onnx package."""
    try:
        import onnx
        from onnx import helper as h
    except ImportError:
        return None
    rng = np.random.default_rng(3)
    w = rng.standard_normal((8, 5)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    g = h.make_graph([h.make_node("Gemm", ["x", "w", "b"], ["g"]), h.make_node("Relu", ["g"], ["y"])], "g",
                     [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3, 8])],
                     [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [3, 5])],
                     [onnx.numpy_helper.from_array(w, "w"), onnx.numpy_helper.from_array(b, "b")])
    path = os.path.join(TMP, "gemm_relu.onnx")
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), path)
    return path


LN = ["--sym", "R=5"]
CASES = [("layernorm", os.path.join(MODELS, "layernorm.json"), LN),
         ("cnn_hw", os.path.join(MODELS, "cnn_hw.harp"), []),
         ("conv3x3_bias_silu_fp16", os.path.join(MODELS, "conv3x3_bias_silu_fp16.json"),
          ["--sym", "N=1", "--sym", "C=8", "--sym", "H=10", "--sym", "W=9", "--sym", "O=16"])]
om = onnx_model()
if om:
    CASES.append(("gemm_relu_onnx", om, []))
else:
    print("no onnx: its case skipped")

for name, model, extra in CASES:
    full, src = os.path.join(TMP, name + "_full"), os.path.join(TMP, name + "_src")
    p = compile_pkg(model, full, extra)
    S.check(f"{name}: full compile", p.returncode == 0, p.stderr[-600:])
    q = compile_pkg(model, src, [*extra, "--sources-only"])
    S.check(f"{name}: --sources-only compile", q.returncode == 0, q.stderr[-600:])
    if p.returncode or q.returncode:
        continue
    a, b = files(full), files(src)
    same = [k for k in b if a.get(k) == b[k]]
    S.check(f"{name}: every file --sources-only writes is the full package's, byte for byte", len(same) == len(b),
            f"differ: {sorted(set(b) - set(same))}")
    rest = sorted(set(a) - set(b))
    S.check(f"{name}: the full package has only expected/ more", rest and all(k.startswith("expected/") for k in rest),
            f"full only: {rest}; sources only: {sorted(set(b) - set(a))}")
    S.check(f"{name}: model.c, model.h, main.c, Makefile, weights.bin and inputs/ written",
            {"model.c", "model.h", "main.c", "Makefile", "weights.bin"} <= set(b) and any(k.startswith("inputs/") for k in b),
            sorted(b))
    S.check(f"{name}: says it wrote sources only", "sources only" in q.stdout, q.stdout)

# No C compiler runs: with CC=false and a cold cache the full compile fails, --sources-only does not.
env = dict(os.environ, CC="false", HARP_CACHE_DIR=os.path.join(TMP, "cold"))
model = os.path.join(MODELS, "layernorm.json")
p = compile_pkg(model, os.path.join(TMP, "nocc_full"), LN, env=env)
S.check("CC=false: the full compile fails (it needs the compiler)", p.returncode != 0, p.stdout + p.stderr[-300:])
nocc = os.path.join(TMP, "nocc_src")
q = compile_pkg(model, nocc, [*LN, "--sources-only"], env=env)
S.check("CC=false: --sources-only writes the package (no compiler ran)", q.returncode == 0 and "model.c" in files(nocc),
        q.stderr[-600:])

# The sources-only package builds and runs by itself, computing the full package's expected/.
if shutil.which("make") and shutil.which(os.environ.get("CC", "cc")):
    for name in ("cnn_hw", "gemm_relu_onnx"):
        src, full = os.path.join(TMP, name + "_src"), os.path.join(TMP, name + "_full")
        if not os.path.isdir(src):
            continue
        m = subprocess.run(["make", "-s", "-C", src], capture_output=True, text=True, timeout=600)
        S.check(f"{name}: the --sources-only package builds and runs (make)", m.returncode == 0, (m.stdout + m.stderr)[-1500:])
        exp = sorted(os.listdir(os.path.join(full, "expected")))
        S.check(f"{name}: full package has expected/ outputs", bool(exp))
        for f in exp:
            got = os.path.join(src, "outputs", f)
            ok = os.path.exists(got) and np.array_equal(np.load(got), np.load(os.path.join(full, "expected", f)))
            S.check(f"{name}: outputs/{f} == the full package's expected/{f}", ok)
else:
    print("no make or C compiler: the build check skipped")

# Combinations that make no sense: a usage error (2), naming the option, nothing written.
for what, extra in [("--target sm80", ["--target", "sm80"]), ("--shapeset", ["--shapeset", "R=1..8"])]:
    out = os.path.join(TMP, "bad_" + extra[0].strip("-"))
    r = subprocess.run([HARP, "compile", model, "-o", out, *LN, "--sources-only", *extra], capture_output=True, text=True, timeout=300)
    S.check(f"--sources-only with {what}: usage error naming it, nothing written",
            r.returncode == 1 and "UsageError" in r.stderr and "--sources-only" in r.stderr and not os.path.exists(out), f"rc {r.returncode}: {r.stderr[-300:]}")
# A failure after parsing (a missing --param file) leaves no partial package.
out = os.path.join(TMP, "bad_param")
r = compile_pkg(model, out, [*LN, "--sources-only", "--param", "nope=" + os.path.join(TMP, "missing.npy")])
S.check("--sources-only, a bad --param: an error, no package", r.returncode != 0 and not (os.path.isdir(out) and files(out)),
        f"rc {r.returncode}: {r.stderr[-300:]}")
S.close()
