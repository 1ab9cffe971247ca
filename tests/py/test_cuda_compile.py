"""The CUDA backend's compile checks (no GPU needed): for every test model,
`harp compile --target sm80|sm90` compiles the whole translation unit with
NVRTC (sm_80 / sm_90a; the sm80 unit for sm_90a too: it is what runs on
Hopper for --target sm80), and the PTX of every kernel holds what its kind
promises: the SM80 MMA template mma.sync m16n8k16 + ldmatrix + cp.async with
commit/wait; the SM90 template wgmma.mma_async + cp.async.bulk.tensor +
mbarrier (at least one GEMM of the sm90 units must be on it); row kernels
warp shuffles.  The package's host loader and main.c build with cc; without
a GPU the program says why and exits non-zero, with one it must reproduce
expected/.  PTX checks skip without NVRTC (the packages are still checked)."""
import json
import os
import shutil
import subprocess
import tempfile

import numpy as np

import cuda_sim
from harp_test import HARP, MODELS, Suite, close

s = Suite("cuda_compile")

TEMPLATE_PTX = {
    "mma_gemm": ["mma.sync.aligned.m16n8k16.row.col.f32.", "ldmatrix.sync.aligned.m8n8.x4", "cp.async.",
                 "cp.async.commit_group", "cp.async.wait_group"],
    "mma_conv": ["mma.sync.aligned.m16n8k16.row.col.f32.", "ldmatrix.sync.aligned.m8n8.x4", "cp.async.",
                 "cp.async.commit_group", "cp.async.wait_group"],
    "attention": ["mma.sync.aligned.m16n8k16.row.col.f32.", "ldmatrix.sync.aligned.m8n8.x4", "cp.async.cg.shared.global",
                  "cp.async.commit_group", "cp.async.wait_group"],
    "wgmma_gemm": ["wgmma.mma_async.sync.aligned.m64n", "cp.async.bulk.tensor", "mbarrier.try_wait.parity",
                   "mbarrier.arrive.expect_tx", "wgmma.wait_group.sync.aligned"],
    "softmax": ["shfl.sync.bfly"], "layernorm": ["shfl.sync.bfly"],
}


MMA_TF32 = "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"


def ptx_needs(k):
    """What the PTX of kernel k must hold: its kind's instructions, for the
    way it computes (its plan's "math": TF32, SIMT FFMA, or 16-bit MMA)."""
    math = k.get("plan", {}).get("math", "")
    need = list(TEMPLATE_PTX.get(k["kind"], []))
    if "tf32" in math and k["kind"] != "wgmma_gemm":  # m16n8k8; ldmatrix only for K-major fp32 tiles
        need = [MMA_TF32 if n.startswith("mma.sync") else n for n in need if not n.startswith("ldmatrix")]
    elif "tf32" in math:
        need.append("k8.f32.tf32.tf32")
    elif "SIMT" in math:  # FFMA and 128-bit shared loads, no tensor cores
        need = ["fma.rn.f32", "ld.shared.v4", "cp.async.", "cp.async.wait_group"]
    return need


nvrtc_ok = cuda_sim.nvrtc_ok
entry = cuda_sim.ptx_entry


def compile_pkg(model, target, syms, d):
    args = [HARP, "compile", model, "--target", target, "-o", d]
    for x in syms:
        args += ["--sym", x]
    if model.endswith("rows_mixed.harp"):  # the example gather indices must be in range
        f = os.path.join(tempfile.mkdtemp(prefix="harp_cupkg_in_"), "i.npy")
        np.save(f, np.random.default_rng(1).integers(0, 5, size=(3, 7)).astype(np.int32))
        args += ["--input", f"i={f}"]
    return subprocess.run(args, capture_output=True, text=True, timeout=600)


nvrtc_seen = False
for name, model, syms, want in cuda_sim.CASES:
    wgmma = 0
    for target in ("sm80", "sm90"):
        what = f"{name} [{target}]"
        d = tempfile.mkdtemp(prefix="harp_cupkg_")
        p = compile_pkg(model, target, syms, d)
        s.check(f"{what}: harp compile", p.returncode == 0, p.stderr)
        if p.returncode:
            continue
        for f in ("model.cu", "model_host.c", "model.h", "main.c", "Makefile", "README.md", "gpu.json"):
            s.check(f"{what}: {f} written", os.path.exists(os.path.join(d, f)))
        g = json.load(open(os.path.join(d, "gpu.json")))["gpu"]
        if not os.path.exists(os.path.join(d, "model.ptx")):
            s.check(f"{what}: says why there is no PTX", "no PTX" in p.stdout, p.stdout)
            continue
        nvrtc_seen = True
        ptx = open(os.path.join(d, "model.ptx")).read()
        if target == "sm80":
            ok, log = nvrtc_ok(open(os.path.join(d, "model.cu")).read(), "sm_90a")
            if ok is not None:
                s.check(f"{what}: the sm80 unit compiles for sm_90a too", ok, log)
        s.check(f"{what}: PTX for {'sm_90a' if target == 'sm90' else 'sm_80'}",
                (".target sm_90a" if target == "sm90" else ".target sm_80") in ptx)
        for k in g["kernels"]:
            t = entry(ptx, k["name"])
            s.check(f"{what}: {k['name']} is in the PTX", t is not None)
            if t is None:
                continue
            for need in ptx_needs(k):
                s.check(f"{what}: {k['name']} ({k['kind']}) has {need}", need in t)
            if "SIMT" in k.get("plan", {}).get("math", ""):
                s.check(f"{what}: {k['name']} (SIMT) has no mma", "mma.sync" not in t)
            wgmma += k["kind"] == "wgmma_gemm"
        shutil.rmtree(d, ignore_errors=True)
    if name == "gemm_bias_relu" and nvrtc_seen:
        s.check("gemm_bias_relu [sm90] is on the TMA/wgmma template", wgmma >= 1, str(wgmma))

# The package builds with a plain C compiler and runs (or says why not).
if shutil.which("cc") and shutil.which("make"):
    d = tempfile.mkdtemp(prefix="harp_cupkg_")
    model = os.path.join(cuda_sim.GPU_MODELS, "conv3x3_s1.harp")
    p = compile_pkg(model, "sm80", (), d)
    s.check("conv package: harp compile", p.returncode == 0, p.stderr)
    if p.returncode == 0 and os.path.exists(os.path.join(d, "model_ptx.c")):
        b = subprocess.run(["make", "-C", d, "model_main", "CFLAGS=-O1 -Wall -Wextra -Werror"], capture_output=True,
                           text=True, timeout=300)
        s.check("conv package: model_host.c and main.c build warning-free", b.returncode == 0, b.stderr[-2000:])
        if b.returncode == 0:
            r = subprocess.run([os.path.join(d, "model_main"), d], capture_output=True, text=True, timeout=300)
            if r.returncode:  # no GPU here: a clear reason, no crash
                s.check("conv package without a GPU: one clear line, exit 1",
                        r.returncode == 1 and "model:" in r.stderr and "model_init failed" in r.stderr, r.stderr)
            else:
                for f in os.listdir(os.path.join(d, "expected")):
                    s.check(f"conv package on the GPU: {f}",
                            *close(np.load(os.path.join(d, "outputs", f)), np.load(os.path.join(d, "expected", f))))
            stub = "/usr/local/cuda/lib64/stubs/libcuda.so"
            if os.path.exists(stub):
                r = subprocess.run([os.path.join(d, "model_main"), d], capture_output=True, text=True, timeout=300,
                                   env={**os.environ, "HARP_LIBCUDA": stub})
                s.check("conv package with the toolkit's stub driver: cuInit fails cleanly",
                        r.returncode == 1 and "cuInit failed" in r.stderr, r.stderr)
    shutil.rmtree(d, ignore_errors=True)

# fp32 weights stored [K][N] on sm90: the package packs them K-major once, in
# model_init (launches marked once), and model_run leaves those launches out:
# on the fake libcuda two runs launch the 4 packs once and the 4 GEMMs twice
fake = os.path.join(os.path.dirname(os.path.abspath(HARP)), "tests", "libharp_fake_cuda.so")
if shutil.which("cc") and shutil.which("make") and os.path.exists(fake):
    d = tempfile.mkdtemp(prefix="harp_cupkg_pack_")
    p = compile_pkg(os.path.join(MODELS, "gemm_chain4.json"), "sm90", ("M=128", "D=128"), d)
    s.check("packed weights package: harp compile", p.returncode == 0, p.stderr)
    if p.returncode == 0 and os.path.exists(os.path.join(d, "model_ptx.c")):
        once = [l for l in json.load(open(os.path.join(d, "gpu.json")))["gpu"]["launches"] if l.get("once")]
        s.check("packed weights package: 4 launches marked once", len(once) == 4, str(once))
        with open(os.path.join(d, "two_runs.c"), "w") as f:
            f.write("#include <stdio.h>\n#include <stdlib.h>\n#include \"model.h\"\n"
                    "int main(void) {\n  size_t n = model_params_bytes();\n  void *w = calloc(1, n + 1);\n"
                    "  model_t *m = model_init(w, n);\n  if (!m) return 2;\n"
                    "  static float x[128 * 128], y[128 * 128];\n  const void *in[1] = {x};\n  void *out[1] = {y};\n"
                    "  int rc = model_run(m, in, out) || model_run(m, in, out);\n  model_free(m);\n  free(w);\n  return rc;\n}\n")
        # under the sanitizers the fake libcuda is instrumented: the driver must be too
        san = ["-fsanitize=address,undefined"] if os.environ.get("HARP_SANITIZE") == "1" else []
        b = subprocess.run(["cc", "-O1", "-Wall", "-Wextra", "-Werror", *san, "-o", "two_runs", "two_runs.c", "model_host.c",
                            "model_ptx.c", "-ldl"], cwd=d, capture_output=True, text=True, timeout=300)
        s.check("packed weights package: a two-run driver builds", b.returncode == 0, b.stderr[-2000:])
        if b.returncode == 0:
            log = os.path.join(d, "log.json")
            r = subprocess.run([os.path.join(d, "two_runs")], capture_output=True, text=True, timeout=300,
                               env={**os.environ, "HARP_LIBCUDA": fake, "HARP_FAKE_CUDA_CC": "9.0", "HARP_FAKE_CUDA_LOG": log})
            s.check("packed weights package: runs on the fake driver", r.returncode == 0, r.stderr)
            if r.returncode == 0:
                n = json.load(open(log))["direct_launches"]
                s.check("packed weights package: packs once, GEMMs every run (4 + 2 x 4 launches)", n == 12, str(n))
    shutil.rmtree(d, ignore_errors=True)

# A model the interpreter cannot hold (a 4096^3 GEMM's broadcast product is
# 2^36 elements): expected/ comes from the CPU backend, with a note; the
# persistent SM90 GEMM's launch carries its tile count for the loader.
if shutil.which("cc"):
    big = {"uops": [
        {"id": "A", "uop": "INPUT", "arg": {"tensor_id": "A", "dtype": "fp16", "shape": [4096, 4096]}},
        {"id": "B", "uop": "INPUT", "arg": {"tensor_id": "B", "dtype": "fp16", "shape": [4096, 4096]}},
        {"id": "a", "uop": "RESHAPE", "src": ["A"], "arg": {"result_shape": [4096, 4096, 1]}},
        {"id": "b", "uop": "RESHAPE", "src": ["B"], "arg": {"result_shape": [1, 4096, 4096]}},
        {"id": "p", "uop": "MUL", "src": ["a", "b"]},
        {"id": "acc", "uop": "REDUCE", "src": ["p"], "arg": {"op": "SUM", "axes": [1], "dtype": "fp32"}},
        {"id": "C", "uop": "CAST", "src": ["acc"], "arg": {"to": "fp16"}}]}
    d = tempfile.mkdtemp(prefix="harp_cupkg_big_")
    model = os.path.join(d, "gemm4096.json")
    with open(model, "w") as f:
        json.dump(big, f)
    out = os.path.join(d, "pkg")
    p = compile_pkg(model, "sm90", (), out)
    s.check("4096^3 GEMM package: harp compile", p.returncode == 0, p.stderr)
    if p.returncode == 0:
        s.check("4096^3 GEMM package: says expected/ comes from the CPU backend",
                "expected/ comes from the CPU backend" in p.stderr, p.stderr)
        A = np.load(os.path.join(out, "inputs", "A.npy")).astype(np.float32)
        B = np.load(os.path.join(out, "inputs", "B.npy")).astype(np.float32)
        C = np.load(os.path.join(out, "expected", "C.npy"))
        rows = [0, 1, 2047, 4095]
        s.check("4096^3 GEMM package: expected/ rows match numpy", *close(C[rows], A[rows] @ B))
        host = open(os.path.join(out, "model_host.c")).read()
        # 128x256 tiles (the SM90 plan for a square GEMM this size)
        s.check("4096^3 GEMM package: the persistent launch carries 512 tiles",
                '{"k0_gemm", {132, 1, 1}, {384, 1, 1}, ' in host and ", 512, 1, " in host and "m->sms" in host,
                [ln for ln in host.splitlines() if "k0_gemm" in ln][:2])
    shutil.rmtree(d, ignore_errors=True)

if not nvrtc_seen:
    print("NVRTC not available: PTX checks skipped")
s.close()
