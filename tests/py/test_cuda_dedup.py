"""Kernels that are the same code are compiled once on the GPU too
(src/backend/cuda/cuda_dedup.c): a model that repeats its layers
(tests/models/gpu/repeat_layers.harp) gets each distinct kernel once in
model.cu, the launches of the repeats use it with their own buffers in its
parameter order, and HARP_NO_DEDUP=1 gives every region its own kernels.
The translation unit runs on the CPU SIMT simulator against the reference
interpreter and bit for bit against the unshared one; the same unit with
each launch's arguments in its own kernel's order (the order ignored) must
fail.  `harp compile --target sm80|sm90` packages compile with nvcc for
sm_80 and sm_90a (-gencode=arch=compute_90a,code=sm_90a), and their launch
tables name only kernels model.cu defines.  Skips (77) without g++."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import warnings

import numpy as np

import cuda_sim
from harp_test import HARP, Suite, close, run

MODEL = os.path.join(cuda_sim.GPU_MODELS, "repeat_layers.harp")


def dump(target, share):
    env = dict(os.environ)
    env.pop("HARP_NO_DEDUP", None)
    if not share:
        env["HARP_NO_DEDUP"] = "1"
    d = tempfile.mkdtemp(prefix="harp_cudedup_")
    p = subprocess.run([HARP, "dump", MODEL, "--dump", "gpu,cu", "--target", target, "--dump-dir", d],
                       capture_output=True, text=True, timeout=300, env=env)
    g = json.load(open(os.path.join(d, "gpu.json")))["gpu"] if p.returncode == 0 else None
    return p, d, g


def kernel_texts(src):
    """name -> the kernel's text with its name, comments and local names
    neutralised (a crude normal form: equal code, equal text, when the
    parameters are used in one order)."""
    out = {}
    for part in re.split(r"\n/\* kernel ", src)[1:]:
        name = part.split()[0]
        body = part[part.index("\n"):]
        body = body.split("#ifdef HK_SIM")[0]
        body = re.sub(r"/\*.*?\*/", "", body, flags=re.S).replace(name, "K")
        out[name] = re.sub(r"\b[LAN]\d+_\w+", "V", body)
    return out


def args_of(launch):
    return [a.get("value", a["space"]) for a in launch["args"]]


def main():
    warnings.simplefilter("ignore", RuntimeWarning)
    s = Suite("cuda_dedup")
    if not cuda_sim.have_gxx():
        print("g++ not found: skipped")
        sys.exit(77)
    rng = np.random.default_rng(11)
    want = None
    for target in ("sm80", "sm90"):
        p1, d1, g1 = dump(target, True)
        p0, d0, g0 = dump(target, False)
        s.check(f"[{target}] harp dump", p1.returncode == 0 and p0.returncode == 0, p1.stderr + p0.stderr)
        if not g1 or not g0:
            continue
        src1, src0 = open(os.path.join(d1, "model.cu")).read(), open(os.path.join(d0, "model.cu")).read()
        n1, n0 = src1.count("__global__"), src0.count("__global__")
        nl = len(g1["launches"])
        sh = g1["kernel_sharing"]
        # each distinct kernel once; without sharing, one per launch
        s.check(f"[{target}] fewer kernels than launches", n1 == sh["compiled"] == len(g1["kernels"]) < nl,
                f"{n1} kernels, {sh}, {nl} launches")
        s.check(f"[{target}] HARP_NO_DEDUP=1: a kernel per launch", n0 == nl == len(g0["launches"]) == sh["emitted"]
                and g0["kernel_sharing"]["compiled"] == n0, f"{n0} kernels, {nl} launches, {g0['kernel_sharing']}")
        t1 = kernel_texts(src1)
        s.check(f"[{target}] no two kernels left are the same text", len(set(t1.values())) == len(t1), str(len(t1)))
        s.check(f"[{target}] every launched kernel is defined",
                all(l["kernel"] in t1 for l in g1["launches"]) and set(t1) == {k["name"] for k in g1["kernels"]})
        uses = {}
        for l in g1["launches"]:
            uses.setdefault(l["kernel"], []).append(l)
        kinds = {k["name"]: k["kind"] for k in g1["kernels"]}
        # q, k and v projections of both layers: one GEMM kernel; both
        # layers' attention: one
        s.check(f"[{target}] six projections share one GEMM kernel",
                any(kinds[k] in ("mma_gemm", "wgmma_gemm") and len(v) >= 6 for k, v in uses.items()),
                str({k: len(v) for k, v in uses.items()}))
        s.check(f"[{target}] both attentions share a kernel",
                any(kinds[k] == "attention" and len(v) == 2 for k, v in uses.items()))
        # the dense layers: the second reads (weights, bias, input), the
        # first (input, weights, bias); the shared kernel takes the first's
        # order, so the second's arguments are reordered
        by_region0 = {l["region"]: l for l in g0["launches"]}
        moved = [l for l in g1["launches"] if args_of(l) != args_of(by_region0[l["region"]])]
        s.check(f"[{target}] a shared launch's buffers are reordered",
                any(l["region"] == "v" and args_of(l)[0] == "u/y" for l in moved),
                str([(l["region"], args_of(l), args_of(by_region0[l["region"]])) for l in moved]))
        # the simulator: against the interpreter, and the unshared unit
        feeds = cuda_sim.feeds_of(g1, rng) if want is None else feeds
        if want is None:
            q, want = run(MODEL, feeds, backend="interp")
            s.check("interpreter runs", q.returncode == 0, q.stderr)
        got1, err1 = cuda_sim.run(d1, feeds)
        got0, err0 = cuda_sim.run(d0, feeds)
        s.check(f"[{target}] simulator runs", err1 is None and err0 is None, f"{err1} {err0}")
        if err1 or err0:
            continue
        for o, a in got1.items():
            ref = np.load(os.path.join(want, f"{o}.npy")).astype(np.float64)
            s.check(f"[{target}] {o} vs interpreter", *close(a, ref))
            s.check(f"[{target}] {o} bit for bit as without sharing", np.array_equal(a, got0[o]),
                    f"max diff {np.max(np.abs(a.astype(np.float64) - got0[o]))}")

        # the order ignored: each launch keeps its own kernel's argument order
        def own_order(g):
            for l in g["launches"]:
                l["args"] = by_region0[l["region"]]["args"]

        bad, err = cuda_sim.run(d1, feeds, edit=own_order)
        ref = np.load(os.path.join(want, "v.npy")).astype(np.float64)
        s.check(f"[{target}] the buffers in the wrong order are caught",
                err is not None or not close(bad["v"], ref)[0], str(err))

    # packages: model.cu compiles with nvcc for the package's architecture
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    for target, gencode in (("sm80", "arch=compute_80,code=sm_80"), ("sm90", "arch=compute_90a,code=sm_90a")):
        d = tempfile.mkdtemp(prefix="harp_cudedup_pkg_")
        p = subprocess.run([HARP, "compile", MODEL, "--target", target, "-o", d], capture_output=True, text=True,
                           timeout=600)
        s.check(f"package [{target}]: harp compile", p.returncode == 0, p.stderr)
        if p.returncode:
            continue
        src = open(os.path.join(d, "model.cu")).read()
        g = json.load(open(os.path.join(d, "gpu.json")))["gpu"]
        defined = set(re.findall(r"__global__ void __launch_bounds__\([^)]*\) (\w+)\(", src))
        host = open(os.path.join(d, "model_host.c")).read()
        named = set(re.findall(r'\{"(k\d+_\w+)", \{', host))
        s.check(f"package [{target}]: shared kernels, each once", len(defined) == g["kernel_sharing"]["compiled"]
                < len(g["launches"]), f"{len(defined)} of {len(g['launches'])}")
        s.check(f"package [{target}]: the launch table names defined kernels", named and named <= defined,
                str(named - defined))
        readme = open(os.path.join(d, "README.md")).read()
        s.check(f"package [{target}]: README counts the distinct kernels", f"of {len(defined)} distinct kernels" in readme)
        if not nvcc:
            print(f"nvcc not found: package [{target}] not compiled")
            continue
        c = subprocess.run([nvcc, "-cubin", f"-gencode={gencode}", "-o", os.path.join(d, "model.cubin"),
                            os.path.join(d, "model.cu")], capture_output=True, text=True, timeout=600)
        s.check(f"package [{target}]: nvcc -gencode={gencode}", c.returncode == 0, c.stderr[-2000:])
        shutil.rmtree(d, ignore_errors=True)
    s.close()


main()
