"""CUDA kernels with run-time sizes (issue 25): one GPU build per ShapeSet box.

Each model is dumped for the GPU with `--shapeset SYM=LO..HI` (its kernels
take SYM's size as the parameter hp_sv<i>: the loop nests' bounds and the
launch's grid_x, the row kernels' row count, the SM80 GEMM template's M) at
the box's corner HI and at every binding below, twice: loop nests only
(--knob no_templates=1) and with the templates (the default).  The unit
must be the same text at every binding (ONE build serves the box, as
gpu_box.c decides for a session); the HI build then runs on the CPU SIMT
simulator (tests/cuda_sim) at each binding (its sizes passed by value, its
buffers still HI's, the rest poisoned with NaN; an output written past the
binding's elements is an error) against the reference interpreter there;
one row short must give another result.  A model whose template prints
its size would have corners that differ (the session then builds per
binding).  Each HI unit compiles with nvcc for sm_80 and sm_90a when nvcc
is there.  HARP_CUDA_SS_MODELS=name,... runs some only.  Skips (77)
without g++."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import warnings

import numpy as np

import cuda_sim
from harp_test import MODELS, Suite, close, run

NO_TEMPLATES = ("--knob", "no_templates=1")
# model, box symbol (lo, hi), bindings inside, fixed symbols, one build with
# the templates on too (the SM80 GEMM template and the row kernels read M /
# the rows at run time, an elementwise chain goes to the loop nest)
CASES = [
    ("seed000_gemm_bias_relu.json", "M", (3, 61), (61, 29, 3), {"K": 19, "N": 70}, True),
    ("seed001_gemm.json", "M", (2, 40), (40, 9), {"K": 16, "N": 24}, True),
    ("layernorm.json", "R", (2, 48), (48, 20, 2), {}, True),
    ("softmax_rows.json", "R", (1, 48), (48, 19, 1), {"L": 33}, True),
    ("gelu_bias_rows.json", "R", (2, 300), (300, 77), {}, True),
]


def syms_of(sym, v, fixed):
    return [f"{sym}={v}"] + [f"{k}={x}" for k, x in fixed.items()]


def nvcc_compiles(src_path, s, what):
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    if not nvcc:
        print(f"{what}: nvcc not found, compile not checked")
        return
    for arch in ("-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90a,code=sm_90a"):
        out = tempfile.mktemp(suffix=".cubin")
        p = subprocess.run([nvcc, "-cubin", arch, "-o", out, src_path], capture_output=True, text=True, timeout=600)
        s.check(f"{what}: nvcc {arch.split('=')[-1]}", p.returncode == 0, p.stderr[-2000:])


def one_box(s, rng, name, model, sym, hi, at, fixed, extra, variant):
    """The box unit of `model` at its corner hi, the same text at every
    binding of `at`, run on the simulator there against the interpreter."""
    p, dhi = cuda_sim.dump(model, "sm80", syms_of(sym, hi, fixed), extra=extra)
    s.check(f"{name} ({variant}): dump at {sym}={hi}", p.returncode == 0, p.stderr)
    if p.returncode:
        return
    ghi = json.load(open(os.path.join(dhi, "gpu.json")))["gpu"]
    src_hi = open(os.path.join(dhi, "model.cu")).read()
    s.check(f"{name} ({variant}): the box's symbol is the unit's", [x["name"] for x in ghi["syms"]] == [sym], str(ghi["syms"]))
    s.check(f"{name} ({variant}): every launch reads the size at run time",
            all(any(a["space"] == "sym" for a in l["args"]) for l in ghi["launches"]), str(ghi["launches"])[:2000])
    s.check(f"{name} ({variant}): a size passed by value", "const long hp_sv0" in src_hi)
    for v in at:
        what = f"{name} ({variant}) [{sym}={v}]"
        p, dv = cuda_sim.dump(model, "sm80", syms_of(sym, v, fixed), extra=extra)
        s.check(f"{what}: dump", p.returncode == 0, p.stderr)
        if p.returncode:
            continue
        gv = json.load(open(os.path.join(dv, "gpu.json")))["gpu"]
        # one build: the unit at this binding is the corner's, text for text
        s.check(f"{what}: the same CUDA C as at {sym}={hi}", open(os.path.join(dv, "model.cu")).read() == src_hi)
        feeds = cuda_sim.feeds_of(gv, rng)  # at this binding's shapes
        outs = {b["name"]: b["shape"] for b in gv["buffers"] if b["space"] == "output"}
        got, err = cuda_sim.run(dhi, feeds, sv=[v], out_shapes=outs)
        s.check(f"{what}: the {sym}={hi} build runs on the simulator", err is None, err)
        if err:
            continue
        q, e = run(model, feeds, syms_of(sym, v, fixed), backend="interp")
        s.check(f"{what}: interpreter", q.returncode == 0, q.stderr)
        for out, a in got.items():
            ok, detail = close(a, np.load(os.path.join(e, f"{out}.npy")).astype(np.float64))
            s.check(f"{what}: {out} vs interpreter", ok, detail)
        if v != hi and v == at[1]:
            # must fail: one row short of the binding leaves poison (NaN) in the output
            bad, err = cuda_sim.run(dhi, feeds, sv=[v - 1], out_shapes=outs)
            s.check(f"{what}: a size one short gives another result", err is not None or not all(
                close(a, np.load(os.path.join(e, f"{o}.npy")).astype(np.float64))[0] for o, a in bad.items()))
    nvcc_compiles(os.path.join(dhi, "model.cu"), s, f"{name} ({variant})")
    print(f"{name} ({variant}): {ghi['launch_kinds']}", flush=True)


def main():
    warnings.simplefilter("ignore", RuntimeWarning)
    s = Suite("cuda_shapeset")
    if not cuda_sim.have_gxx():
        print("g++ not found: skipped")
        sys.exit(77)
    rng = np.random.default_rng(25)
    # a binding outside the box (or none): a located usage error, no dump
    for syms in (["R=60"], []):
        p, d = cuda_sim.dump(os.path.join(MODELS, "layernorm.json"), "sm80", syms, extra=("--shapeset", "R=2..48"))
        s.check(f"--shapeset R=2..48 at {syms}: refused", p.returncode != 0 and "bind R inside the box" in p.stderr and
                not os.path.exists(os.path.join(d, "model.cu")), p.stderr)
    only = os.environ.get("HARP_CUDA_SS_MODELS")  # name,...: some only
    for name, sym, (lo, hi), at, fixed, default_one in CASES:
        if only and name not in only.split(","):
            continue
        model = os.path.join(MODELS, name)
        box = ("--shapeset", f"{sym}={lo}..{hi}")
        for variant, knobs in (("loop nests", NO_TEMPLATES), ("templates", ())):
            if variant == "templates" and not default_one:
                # a template that prints M (a plan of another tile, a repack): the corners' units differ
                p1, d1 = cuda_sim.dump(model, "sm80", syms_of(sym, hi, fixed), extra=box)
                p2, d2 = cuda_sim.dump(model, "sm80", syms_of(sym, at[1], fixed), extra=box)
                s.check(f"{name}: with templates, dumps", p1.returncode == 0 and p2.returncode == 0, p1.stderr + p2.stderr)
                if not p1.returncode and not p2.returncode:
                    s.check(f"{name}: with templates, the corners' code differs",
                            open(os.path.join(d1, "model.cu")).read() != open(os.path.join(d2, "model.cu")).read())
                continue
            one_box(s, rng, name, model, sym, hi, at, fixed, (*box, *knobs), variant)
    s.close()


main()
