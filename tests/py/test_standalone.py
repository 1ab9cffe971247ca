"""`harp compile --target cpu` writes a package that builds with a plain C
compiler (make, no harp) and reproduces `harp run`'s outputs."""
import glob
import os
import shutil
import subprocess
import tempfile

import numpy as np

from harp_test import HARP, MODELS, SRC, Suite, close, run

s = Suite("standalone")
if not shutil.which("make") or not shutil.which(os.environ.get("CC", "cc")):
    print("no make or C compiler: skip")
    raise SystemExit(77)
rng = np.random.default_rng(5)
tmp = tempfile.mkdtemp(prefix="harp_standalone_")


def package(name, model, params, inputs, syms=()):
    d = os.path.join(tmp, name)
    args = [HARP, "compile", model, "--target", "cpu", "-o", d]
    for k, v in {**params, **inputs}.items():
        path = os.path.join(tmp, f"{name}_{k}.npy")
        np.save(path, v)
        args += ["--param" if k in params else "--input", f"{k}={path}"]
    for x in syms:
        args += ["--sym", x]
    p = subprocess.run(args, capture_output=True, text=True)
    s.check(f"{name}: harp compile", p.returncode == 0, p.stderr)
    if p.returncode:
        return
    s.check(f"{name}: no temporary left", not glob.glob(os.path.join(d, ".harp-tmp-*")))
    p = subprocess.run(["make", "-s", "-C", d], capture_output=True, text=True)
    s.check(f"{name}: make builds and runs", p.returncode == 0, p.stdout + p.stderr)
    if p.returncode:
        return
    # the generated C is warning-free (GCC's loop analysis included, -O2)
    w = subprocess.run(["make", "-s", "-B", "-C", d, "model_main",
                        "CFLAGS=-O2 -fopenmp-simd -fno-math-errno -Wall -Wextra -Werror"], capture_output=True, text=True)
    s.check(f"{name}: builds with -Wall -Wextra -Werror", w.returncode == 0, (w.stdout + w.stderr)[-3000:])
    for exp in sorted(glob.glob(os.path.join(d, "expected", "*.npy"))):
        out = os.path.join(d, "outputs", os.path.basename(exp))
        got, want = np.load(out), np.load(exp)
        s.check(f"{name}: {os.path.basename(exp)} == harp run", got.dtype == want.dtype and np.array_equal(got, want))
    # and against the interpreter, through the CLI, on the same inputs
    feeds = {k: np.load(os.path.join(d, "inputs", f"{k}.npy")) for k in inputs} if inputs else {}
    for f in glob.glob(os.path.join(d, "inputs", "*.npy")):
        feeds[os.path.basename(f)[:-4]] = np.load(f)
    p, od = run(model, {**feeds, **params}, syms, backend="interp")
    s.check(f"{name}: interp runs", p.returncode == 0, p.stderr)
    if p.returncode == 0:
        for exp in sorted(glob.glob(os.path.join(d, "outputs", "*.npy"))):
            s.check(f"{name}: {os.path.basename(exp)} vs interpreter",
                    *close(np.load(exp), np.load(os.path.join(od, os.path.basename(exp))).astype(np.float64)))


A = rng.standard_normal((20, 12)).astype(np.float16)
B = rng.standard_normal((12, 9)).astype(np.float16)
bias = rng.standard_normal(9).astype(np.float16)
package("gemm_bias_relu", os.path.join(MODELS, "seed000_gemm_bias_relu.json"), {"B": B, "bias": bias}, {"A": A})
X = rng.standard_normal((2, 4, 9, 9)).astype(np.float32).astype(np.float16)
W = rng.standard_normal((6, 4, 3, 3)).astype(np.float16)
cb = rng.standard_normal(6).astype(np.float16)
package("conv", os.path.join(MODELS, "seed001_conv.json"), {"W": W, "bias": cb}, {"X": X},
        ["pt=1", "pb=1", "pl=1", "pr=1", "Sh=2", "Sw=2", "Dh=1", "Dw=1", "G=1", "Rcout=6", "Oy=5", "Ox=5"])
package("mlp", os.path.join(SRC, "examples", "mlp.harp"), {}, {})
package("cnn", os.path.join(SRC, "examples", "cnn.harp"), {}, {})
package("softmax", os.path.join(SRC, "bench", "models", "softmax.harp"), {}, {}, ["R=64", "D=100"])
package("gemv", os.path.join(SRC, "bench", "models", "linear_t.harp"), {}, {}, ["M=3", "K=100", "N=70"])
package("gemm_k2304", os.path.join(SRC, "bench", "models", "gemm.json"),
        {"B": rng.standard_normal((2304, 48)).astype(np.float32)}, {"A": rng.standard_normal((40, 2304)).astype(np.float32)})
# weights as params: the package's model_init packs the conv's weight and the
# GEMM's A once (every ISA variant in the file, the packed layout the one
# CPUID picks), and its outputs are harp run's
dsl = os.path.join(tmp, "params_packed.harp")
with open(dsl, "w") as f:
    f.write("graph main(x: f32[1, 12, 9, 10], w: f32[16, 12, 3, 3], b: f32[16], a: f32[21, 13], v: f32[13, 19])\n"
            "    -> (y: f32[1, 16, 9, 10], c: f32[21, 19]) {\n"
            "    y = relu(conv2d(x, w, bias=b, pad=[1, 1]))\n    c = a @ v\n    return y, c\n}\n")
pw = {"w": rng.standard_normal((16, 12, 3, 3)).astype(np.float32) * 0.3, "b": rng.standard_normal(16).astype(np.float32),
      "a": rng.standard_normal((21, 13)).astype(np.float32)}
package("params_packed", dsl, pw, {"x": rng.standard_normal((1, 12, 9, 10)).astype(np.float32),
                                   "v": rng.standard_normal((13, 19)).astype(np.float32)})
mc = os.path.join(tmp, "params_packed", "model.c")
src = open(mc).read() if os.path.exists(mc) else ""
init = src[src.find("model_t *model_init("):]
init = init[:init.find("\n}\n")]
s.check("params_packed: model_init packs the two weights", init.count("_wpack(m->pool, ") == 2, init[-600:])
s.close()
