"""An SM90 GEMM whose TMA strides are 16-byte aligned at some bindings only
(issue 25; docs/cuda.md "Run-time sizes"): one build per ShapeSet box holds a
pair, the wgmma kernel (its maps encoded at the bindings whose strides are
aligned) and the SM80 template's kernel (any stride), each returning at once
at a binding not its own.

Each model (written here) is dumped for sm90 with `--shapeset SYM=LO..HI` at
the corner HI and at bindings below it, aligned and not: the unit must be
the same CUDA C and the same tensor maps at each (one build).  The HI build
runs on the CPU SIMT simulator (tests/cuda_sim: its TMA, mbarrier and
wgmma models) at each binding against numpy; at one aligned and one
unaligned binding each kernel alone must give the result at its own
bindings and leave the output unwritten (NaN poison) at the other's.  The
HI unit compiles with NVRTC (and nvcc when there) for sm_90a.  The runtime's
side (the maps encoded per binding, one graph): test_cuda_session.c
test_wgmma_pair.  Skips (77) without g++."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import warnings

import numpy as np

import cuda_sim
from harp_test import Suite, close

# name, model text, box symbol (lo, hi), bindings (the aligned ones first),
# an aligned and an unaligned binding for the one-kernel runs.  fp16: a row
# of SYM elements is 2 x SYM bytes, 16-byte aligned where SYM % 8 == 0
PAIRS = [
    # B's and C's row strides N (and C's columns)
    ("pair_n.harp", "graph<N=4> main(x: f16[64, 64], w: f16[64, N]) -> (y: f16[64, N]) {\n"
                    "    y = x @ w\n    return y\n}\n", "N", (33, 64), (64, 48, 40, 37, 33), (40, 37)),
    # A's row stride K (and the k loop's tail, zero-filled by TMA / cp.async)
    ("pair_k.harp", "graph<K=4> main(x: f16[96, K], w: f16[K, 64]) -> (y: f16[96, 64]) {\n"
                    "    y = x @ w\n    return y\n}\n", "K", (33, 64), (64, 40, 35, 33), (40, 35)),
]


def gpu_json(d):
    return json.load(open(os.path.join(d, "gpu.json")))["gpu"]


def tmaps_of(g):
    """The tensor maps of the wgmma kernels of gpu.json g, as dumped."""
    return [p["tensor_map"] for k in g["kernels"] if k["kind"] == "wgmma_gemm" for p in k["params"]
            if p["kind"] == "tensor_map"]


def numpy_ref(feeds, model_text):
    x, w = feeds["x"].astype(np.float64), feeds["w"].astype(np.float64)
    return x @ w


def drop(kind):
    """An edit of gpu.json: the launches of kernels of kind removed."""
    def edit(g):
        kinds = {k["name"]: k["kind"] for k in g["kernels"]}
        g["launches"] = [l for l in g["launches"] if kinds[l["kernel"]] != kind]
    return edit


def pair_row(s, rng, work, name, text, sym, lo, hi, at, one):
    model = os.path.join(work, name)
    open(model, "w").write(text)
    box = ("--shapeset", f"{sym}={lo}..{hi}")
    p, dhi = cuda_sim.dump(model, "sm90", [f"{sym}={hi}"], extra=box)
    s.check(f"{name}: dump at {sym}={hi}", p.returncode == 0, p.stderr)
    if p.returncode:
        return None
    g = gpu_json(dhi)
    src = open(os.path.join(dhi, "model.cu")).read()
    kinds = {k["name"]: k for k in g["kernels"]}
    launched = [kinds[l["kernel"]] for l in g["launches"]]
    serves = [(k["kind"], (k.get("serves") or {}).get("aligned")) for k in launched]
    s.check(f"{name}: a pair, the wgmma kernel (aligned bindings) then the SM80 one (the others)",
            serves == [("wgmma_gemm", True), ("mma_gemm", False)], str(serves))
    s.check(f"{name}: every launch reads {sym}", all(any(a["space"] == "sym" for a in l["args"]) for l in g["launches"]),
            str(g["launches"])[:1500])
    strides = (launched[0].get("serves") or {}).get("strides_bytes", [])
    s.check(f"{name}: the pair's strides: {sym} elements of 2 bytes, alike in both kernels",
            strides == [{"lit": 2, "syms": [0]}] and all(k.get("serves", {}).get("strides_bytes") == strides for k in launched),
            str([k.get("serves") for k in launched]))
    aligned = " && ".join("(" + "".join(f"hp_sv{j} * " for j in z["syms"]) + f"{z['lit']}L) % 16 == 0" for z in strides)
    s.check(f"{name}: the wgmma kernel returns at once where a stride is not aligned, the SM80 one where all are",
            src.count(f"if (!({aligned})) return;") == 1 and src.count(f"if (({aligned})) return;") == 1, aligned)
    for v in at:
        what = f"{name} [{sym}={v}]"
        q, dv = cuda_sim.dump(model, "sm90", [f"{sym}={v}"], extra=box)
        s.check(f"{what}: dump", q.returncode == 0, q.stderr)
        if q.returncode:
            continue
        gv = gpu_json(dv)
        s.check(f"{what}: the same CUDA C as at {sym}={hi}", open(os.path.join(dv, "model.cu")).read() == src)
        s.check(f"{what}: the same tensor maps (formulas) as at {sym}={hi}", tmaps_of(gv) == tmaps_of(g))
        feeds = cuda_sim.feeds_of(gv, rng)
        outs = {b["name"]: b["shape"] for b in gv["buffers"] if b["space"] == "output"}
        want = numpy_ref(feeds, text)
        got, err = cuda_sim.run(dhi, feeds, sv=[v], out_shapes=outs)
        s.check(f"{what}: the {sym}={hi} build runs on the simulator", err is None, err)
        if err:
            continue
        ok, detail = close(got["y"], want)
        s.check(f"{what}: y vs numpy", ok, detail)
        if v not in one:
            continue
        own, other = ("wgmma_gemm", "mma_gemm") if v % 8 == 0 else ("mma_gemm", "wgmma_gemm")
        got, err = cuda_sim.run(dhi, feeds, sv=[v], out_shapes=outs, edit=drop(other))
        s.check(f"{what}: {own} alone gives y", err is None and close(got["y"], want)[0], err)
        got, err = cuda_sim.run(dhi, feeds, sv=[v], out_shapes=outs, edit=drop(own))
        s.check(f"{what}: {other} alone leaves y unwritten", err is None and bool(np.isnan(got["y"].astype(np.float64)).all()),
                err or f"{np.isnan(got['y'].astype(np.float64)).sum()} of {got['y'].size} NaN")
    ok, log = cuda_sim.nvrtc_ok(src, "sm_90a")
    if ok is None:
        print(f"{name}: NVRTC not found, not compiled")
    else:
        s.check(f"{name}: NVRTC sm_90a", ok, log[-2000:])
    return os.path.join(dhi, "model.cu")


def nvcc_sm90(s, units):
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    if not nvcc or not units:
        print("nvcc not found, compiles not checked")
        return
    for name, path in units:
        work = tempfile.mkdtemp(prefix="harp_nvcc_")
        shutil.copy(path, os.path.join(work, "u.cu"))
        q = subprocess.run([nvcc, "-fatbin", "-gencode=arch=compute_90a,code=sm_90a", "u.cu"], cwd=work, capture_output=True,
                           text=True, timeout=900)
        s.check(f"{name}: nvcc sm_90a", q.returncode == 0, q.stderr[-2000:])


def main():
    warnings.simplefilter("ignore", RuntimeWarning)
    s = Suite("cuda_sm90_pair")
    if not cuda_sim.have_gxx():
        print("g++ not found: skipped")
        sys.exit(77)
    rng = np.random.default_rng(25)
    work = tempfile.mkdtemp(prefix="harp_pair_")
    units = []
    for name, text, sym, (lo, hi), at, one in PAIRS:
        u = pair_row(s, rng, work, name, text, sym, lo, hi, at, one)
        if u:
            units.append((name, u))
    nvcc_sm90(s, units)
    s.close()


main()
