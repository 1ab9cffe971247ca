"""CUDA kernels with run-time sizes (issue 25): one GPU build per ShapeSet box.

Each model is dumped for the GPU with `--shapeset SYM=LO..HI` (its kernels
take SYM's size as the parameter hp_sv<i>: the loop nests' bounds and the
launch's grid_x, the row kernels' row count, the SM80 GEMM template's M, N, K,
a residual epilogue's strides) at
the box's corner HI and at every binding below, twice: loop nests only
(--knob no_templates=1) and with the templates (the default).  The unit
must be the same text at every binding (ONE build serves the box, as
gpu_box.c decides for a session); the HI build then runs on the CPU SIMT
simulator (tests/cuda_sim) at each binding (its sizes passed by value, its
buffers still HI's, the rest poisoned with NaN; an output written past the
binding's elements is an error) against the reference interpreter there;
one row short must give another result.  A model whose template prints
its size would have corners that differ (the session then builds per
binding).  Each HI unit compiles with nvcc for its architecture (an sm80
unit for sm_80, also for sm_90a with HARP_TEST_SLOW=1) when nvcc is
there.  Further rows in their own functions: the row kernels' run-time
row length (rowlen_rows), the attention's store guard (attn_store_guard),
split-K (splitk_rows, splitk_batch_rows, splitk_conv_rows and
splitk_conv_hw_rows: a conv over run-time images, height and width) and Winograd (wino_rows) over run-time sizes, and the
transformer block over S (transformer_rows: the regions and plans decided
at the box's corner hi, one unit and one session build on sm90 and sm80),
pools whose output sizes are floor divisions / affine forms of the box's
symbols (floordiv_rows: derived sizes read at run time), a heads merge
whose domain is a box by isl's ranges only (heads_rows), CNNs over H, W
whose convs after a stride-2 one read derived sizes (cnn_hw_rows).
HARP_CUDA_SS_MODELS=name[:SYM],... runs some only (attn_guard, splitk_m,
splitk_b, splitk_conv, splitk_conv_hw, wino4, wino_grid, transformer, floordiv, heads, attn_box, cnn_hw name those functions' rows).  Skips (77) without g++."""
import json
import re
import os
import shutil
import subprocess
import sys
import tempfile
import warnings

import numpy as np

import cuda_sim
from cuda_sim import session_counts
from harp_test import MODELS, SRC, Suite, close, run

NO_TEMPLATES = ("--knob", "no_templates=1")
BOTH = ("loop nests", "templates")
# model, box symbol (lo, hi), bindings inside, fixed symbols, the variants
# built (the loop nests only, and the templates on: the SM80 GEMM template
# and the row kernels read M, N, K / the rows at run time, an elementwise
# chain goes to the loop nest), template launches at least
CASES = [
    ("seed000_gemm_bias_relu.json", "M", (3, 61), (61, 29, 3), {"K": 19, "N": 70}, BOTH, 1),
    ("seed001_gemm.json", "M", (2, 40), (40, 9), {"K": 16, "N": 24}, BOTH, 1),
    ("layernorm.json", "R", (2, 48), (48, 20, 2), {}, BOTH, 0),
    ("softmax_rows.json", "R", (1, 48), (48, 19, 1), {"L": 33}, BOTH, 0),
    ("gelu_bias_rows.json", "R", (2, 300), (300, 77), {}, BOTH, 0),
    # the GEMM template's N (C's row stride, the bias, B's K stride) and K
    # (A's row stride, the k tiles, the zero-filled tail) at run time
    ("seed000_gemm_bias_relu.json", "N", (36, 70), (70, 41, 36), {"M": 61, "K": 19}, ("templates",), 1),
    ("seed000_gemm_bias_relu.json", "K", (9, 40), (40, 17, 9), {"M": 33, "N": 24}, ("templates",), 1),
    ("seed001_gemm.json", "N", (2, 40), (40, 9), {"M": 24, "K": 16}, ("templates",), 1),
    # the implicit-GEMM conv's image height / width at run time (the output's
    # size, the pixel decode, the padded window's bounds): 3x3, 5x5, 3x1 pads
    ("conv_pad_hw.harp", "H", (5, 8), (8, 6, 5), {"W": 6}, ("templates",), 3),
    ("conv_pad_hw.harp", "W", (5, 8), (8, 7, 5), {"H": 5}, ("templates",), 3),
    ("conv_pad_hw.harp", "N", (2, 3), (3, 2), {"H": 5, "W": 5}, ("templates",), 3),  # the images (grid.z)
    # 1x1 convs as GEMMs batched over the images (grid.z at run time), C's rows contiguous
    ("pw_batch.harp", "N", (3, 4), (4, 3), {}, ("templates",), 3),
    # residual epilogues whose strides vary (INLINE models): a GEMM's
    # residual row stride N; a batched GEMM's residual batch stride M x 16;
    # a conv's residual (laid out like y) over a varying height / width
    ("gemm_res_n.harp", "N", (9, 40), (40, 23, 9), {}, ("templates",), 1),
    ("bmm_res_m.harp", "M", (3, 20), (20, 11, 3), {}, ("templates",), 1),
    ("conv_res_hw.harp", "H", (5, 8), (8, 6, 5), {"W": 8}, ("templates",), 1),
    ("conv_res_hw.harp", "W", (5, 8), (8, 7, 5), {"H": 6}, ("templates",), 1),
    # self-attention whose queries and keys are one run-time length S (the
    # key mask, the row limits, kend, the batch bases, the store's guard)
    ("self_attn_s.harp", "S", (17, 40), (40, 23, 17), {}, ("templates",), 1),
    # the heads H at run time (sscuda10): grid.y the box's 2 x H, (batch,
    # head) decoded by the binding's H, a CTA past 2 x H returns
    ("attn_heads.harp", "H", (5, 8), (8, 6, 5), {}, ("templates",), 1),
]
# models of CASES written here rather than kept in tests/models
INLINE = {
    "gemm_res_n.harp": "graph<N=4> main(x: f32[24, 16], w: f32[16, N], r: f32[24, N]) -> (y: f32[24, N]) {\n"
                       "    y = x @ w + r\n    return y\n}\n",
    "bmm_res_m.harp": "graph<M=4> main(x: f32[2, M, 16], w: f32[2, 16, 16], r: f32[2, M, 16]) -> (y: f32[2, M, 16]) {\n"
                      "    y = x @ w + r\n    return y\n}\n",
    "conv_res_hw.harp": "graph<H=4, W=8> main(x: f32[1, 8, H, W], w: f32[8, 8, 3, 3]) -> (y: f32[1, 8, H, W]) {\n"
                        "    y = x + conv2d(x, w, pad=1)\n    return y\n}\n",
    "self_attn_s.harp": "graph<S=16> main(q: f16[2, 2, S, 64], k: f16[2, 2, S, 64], v: f16[2, 2, S, 64]) -> (y: f16[2, 2, S, 64]) {\n"
                        "    y = attention(q, k, v)\n    return y\n}\n",
    "attn_heads.harp": "graph<H=8> main(q: f16[2, H, 24, 64], k: f16[2, H, 24, 64], v: f16[2, H, 24, 64]) -> (y: f16[2, H, 24, 64]) {\n"
                       "    y = attention(q, k, v)\n    return y\n}\n",
}
# options of a model's dumps: fp32 contractions exact (the interpreter's
# fp32, not TF32's rounding), on the SIMT form of the template
EXTRA = {"conv_pad_hw.harp": ("--precision", "fp32"), "pw_batch.harp": ("--precision", "fp32"),
         "conv_res_hw.harp": ("--precision", "fp32")}
# rows run with HARP_TEST_SLOW=1 only (a simulator build and run each)
SLOW = {("conv_pad_hw.harp", "W"), ("conv_pad_hw.harp", "N"), ("conv_res_hw.harp", "W")}
NVCC_UNITS = []  # (what, model.cu): compiled together at the end, one nvcc call
NVCC_UNITS_90 = []  # the sm90 units (wgmma, TMA): for sm_90a only


def syms_of(sym, v, fixed):
    return [f"{sym}={v}"] + [f"{k}={x}" for k, x in fixed.items()]


def nvcc_compiles(s, units, archs):
    """Every unit (what, path) compiled for each of archs ("80", "90a": sm_80,
    sm_90a) in one nvcc call (a fatbin each); when that fails, one call per
    unit names the culprit."""
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    if not nvcc or not units:
        print("nvcc not found, compiles not checked" if units else "no unit to compile")
        return
    work = tempfile.mkdtemp(prefix="harp_nvcc_")
    names = []
    for i, (what, path) in enumerate(units):
        names.append(f"u{i}.cu")
        shutil.copy(path, os.path.join(work, names[-1]))
    tag = "nvcc " + " + ".join(f"sm_{a}" for a in archs)
    archs = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs]
    p = subprocess.run([nvcc, "-fatbin", *archs, *names], cwd=work, capture_output=True, text=True, timeout=1200)
    if p.returncode == 0:
        for what, _ in units:
            s.check(f"{what}: {tag}", True)
        return
    for (what, _), n in zip(units, names):
        q = subprocess.run([nvcc, "-fatbin", *archs, n], cwd=work, capture_output=True, text=True, timeout=600)
        s.check(f"{what}: {tag}", q.returncode == 0, q.stderr[-2000:])


def one_box(s, rng, name, model, sym, hi, at, fixed, extra, variant, ntemplate, target="sm80", fixed_kinds=(), tol=(1e-3, 1e-3)):
    """The box unit of `model` at its corner hi for target, the same text at
    every binding of `at`, run on the simulator there against the
    interpreter within tol (rtol, atol) (launches of kernels of fixed_kinds
    may take no size: split-K's zeroing of its workspace laid out at hi);
    returns the corner's dump directory (None: no dump)."""
    p, dhi = cuda_sim.dump(model, target, syms_of(sym, hi, fixed), extra=extra)
    s.check(f"{name} ({variant}): dump at {sym}={hi}", p.returncode == 0, p.stderr)
    if p.returncode:
        return None
    ghi = json.load(open(os.path.join(dhi, "gpu.json")))["gpu"]
    src_hi = open(os.path.join(dhi, "model.cu")).read()
    s.check(f"{name} ({variant}): the box's symbol is the unit's", [x["name"] for x in ghi["syms"]] == [sym], str(ghi["syms"]))
    s.check(f"{name} ({variant}): every launch reads the size at run time",
            all(any(a["space"] == "sym" for a in l["args"]) for l in ghi["launches"]
                if {k["name"]: k["kind"] for k in ghi["kernels"]}[l["kernel"]] not in fixed_kinds), str(ghi["launches"])[:2000])
    s.check(f"{name} ({variant}): a size passed by value", "const long hp_sv0" in src_hi)
    if variant == "templates":
        s.check(f"{name} ({variant}): {ntemplate}+ template launches", ghi["launch_kinds"]["template"] >= ntemplate,
                str(ghi["launch_kinds"]))
    for v in at:
        what = f"{name} ({variant}) [{sym}={v}]"
        p, dv = cuda_sim.dump(model, target, syms_of(sym, v, fixed), extra=extra)
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
            ok, detail = close(a, np.load(os.path.join(e, f"{out}.npy")).astype(np.float64), *tol)
            s.check(f"{what}: {out} vs interpreter", ok, detail)
        if v != hi and v == at[1]:
            # must fail: one row short of the binding leaves poison (NaN) in the output
            bad, err = cuda_sim.run(dhi, feeds, sv=[v - 1], out_shapes=outs)
            s.check(f"{what}: a size one short gives another result", err is not None or not all(
                close(a, np.load(os.path.join(e, f"{o}.npy")).astype(np.float64), *tol)[0] for o, a in bad.items()))
    (NVCC_UNITS_90 if target == "sm90" else NVCC_UNITS).append((f"{name} ({variant})", os.path.join(dhi, "model.cu")))
    print(f"{name} ({variant}): {ghi['launch_kinds']}", flush=True)
    return dhi


# the SM90 wgmma GEMM with run-time sizes (sm90 modules): M, the batches
# and a residual epilogue read at run time, the TMA maps' dims and strides
# formulas the runtime encodes per binding (the simulator's harness too,
# cuda_sim.tmap_at); model, box symbol (lo, hi), bindings, wgmma launches.
# 257..512: 4 M tiles of 128 at 512, 3 at 300 (the tile loop's bound at
# run time), K = 40 (the k tile's tail zero-filled by TMA); the batch
# rows: 4 and 3 tiles
SM90_CASES = [
    ("wg_mm_m.harp", "M", (65, 128), (128, 77, 65), 1),
    ("wg_res_m.harp", "M", (257, 512), (512, 300), 1),
    ("wg_bmm_b.harp", "B", (3, 4), (4, 3), 1),
    # two batches of M rows: A's and C's batch strides M x 64 at run time
    ("wg_bmm_m.harp", "M", (33, 64), (64, 40, 33), 1),
    # fp32 at TF32 (the transformer block's QKV GEMM, 4 x S rows): B packed
    # K-major for wgmma from 2^20 multiply-adds, M = 256 at the corner hi;
    # decided there, so the rows below it take the same template and the
    # Plan's tiles, one unit down to the corner lo (129: below 2^20
    # multiply-adds, B packed all the same)
    ("wg_tf32_m.harp", "M", (129, 256), (256, 200, 129), 1),
]
# launches of an SM90 case that take no size (B's pack: [64][64] at every M)
SM90_FIXED = {"wg_tf32_m.harp": ("pack",)}
SM90_INLINE = {
    "wg_mm_m.harp": "graph<M=4> main(x: f16[M, 64], w: f16[64, 128]) -> (y: f16[M, 128]) {\n"
                    "    y = x @ w\n    return y\n}\n",
    "wg_res_m.harp": "graph<M=4> main(x: f16[M, 40], w: f16[40, 64], r: f16[M, 64]) -> (y: f16[M, 64]) {\n"
                     "    y = relu(x @ w + r)\n    return y\n}\n",
    "wg_bmm_b.harp": "graph<B=4> main(x: f16[B, 40, 64], w: f16[B, 64, 64]) -> (y: f16[B, 40, 64]) {\n"
                     "    y = x @ w\n    return y\n}\n",
    "wg_bmm_m.harp": "graph<M=4> main(x: f16[2, M, 64], w: f16[2, 64, 64]) -> (y: f16[2, M, 64]) {\n"
                     "    y = x @ w\n    return y\n}\n",
    "wg_tf32_m.harp": "graph<M=4> main(x: f32[M, 64], w: f32[64, 64]) -> (y: f32[M, 64]) {\n"
                      "    y = x @ w\n    return y\n}\n",
}


def tmaps_of(d):
    """The tensor maps of the wgmma kernels of the unit dumped in d, a value
    read at run time masked by its formula (as gpu_box.c compares them)."""
    g = json.load(open(os.path.join(d, "gpu.json")))["gpu"]
    maps = [dict(p["tensor_map"]) for k in g["kernels"] if k["kind"] == "wgmma_gemm" for p in k["params"]
            if p["kind"] == "tensor_map"]
    for m in maps:
        for key, rt in (("dims", "dims_at_run_time"), ("strides_bytes", "strides_bytes_at_run_time")):
            m[key] = [z if z is not None else v for v, z in zip(m[key], m.get(rt) or [None] * len(m[key]))]
    return maps


def persistent_row(s, rng, what, model, dhi, sym, v):
    """The box unit in dhi run at sym=v with the wgmma kernel's grid cut to
    2 CTAs: its tile loop strides by gridDim.x over the binding's tiles."""
    p, dv = cuda_sim.dump(model, "sm90", [f"{sym}={v}"], extra=())
    if p.returncode:
        return s.check(f"{what}: dump at {sym}={v}", False, p.stderr)
    gv = json.load(open(os.path.join(dv, "gpu.json")))["gpu"]
    feeds = cuda_sim.feeds_of(gv, rng)
    outs = {b["name"]: b["shape"] for b in gv["buffers"] if b["space"] == "output"}

    def two_ctas(g):
        for k in g["kernels"]:
            if k["kind"] == "wgmma_gemm":
                k["grid"][0] = 2
    got, err = cuda_sim.run(dhi, feeds, sv=[v], out_shapes=outs, edit=two_ctas)
    s.check(f"{what} [{sym}={v}]: 2 CTAs walk the tiles on the simulator", err is None, err)
    q, e = run(model, feeds, [f"{sym}={v}"], backend="interp")
    for out, a in (got or {}).items():
        ok, detail = close(a, np.load(os.path.join(e, f"{out}.npy")).astype(np.float64))
        s.check(f"{what} [{sym}={v}]: 2 CTAs: {out} vs interpreter", ok, detail)


def sm90_boxes(s, rng):
    """SM90_CASES: each box unit for sm90 on the wgmma template, one text at
    every binding, run on the simulator against the interpreter (one_box);
    its tensor maps' run-time dims name the box's symbol."""
    work = tempfile.mkdtemp(prefix="harp_ss90_")
    for name, text in SM90_INLINE.items():
        open(os.path.join(work, name), "w").write(text)
    for name, sym, (lo, hi), at, nwg in SM90_CASES:
        what = f"{name}:{sym} (sm90)"
        dhi = one_box(s, rng, what, os.path.join(work, name), sym, hi, at, {}, ("--shapeset", f"{sym}={lo}..{hi}"),
                    "templates", nwg, target="sm90", fixed_kinds=SM90_FIXED.get(name, ()))
        if not dhi:
            continue
        g = json.load(open(os.path.join(dhi, "gpu.json")))["gpu"]
        wg = [k for k in g["kernels"] if k["kind"] == "wgmma_gemm"]
        s.check(f"{what}: {nwg} wgmma GEMM kernel(s)", len(wg) == nwg, str([k["kind"] for k in g["kernels"]]))
        maps = tmaps_of(dhi)
        rt = [m["tensor"] for m in maps if any(z for z in m.get("dims_at_run_time", []))]
        s.check(f"{what}: A's and C's maps have run-time dims", "A" in rt and "C" in rt, str(maps)[:1500])
        if name == "wg_res_m.harp":  # fewer CTAs than tiles (as a persistent grid): each walks the binding's tiles
            persistent_row(s, rng, what, os.path.join(work, name), dhi, sym, at[-1])
        # the maps are launch parameters, not text: one build needs them alike at the corners (gpu_box.c same_maps)
        p, dlo = cuda_sim.dump(os.path.join(work, name), "sm90", [f"{sym}={at[-1]}"], extra=("--shapeset", f"{sym}={lo}..{hi}"))
        s.check(f"{what}: the same tensor maps at {sym}={at[-1]}", p.returncode == 0 and tmaps_of(dlo) == maps, p.stderr)
    # a TMA stride aligned at some bindings only (B's row stride N): a pair
    # of kernels in one build, test_cuda_sm90_pair.py


# softmax row kernels whose row length (the last dim) is read at run time:
# over L (19 rows fixed: 3 CTAs of 8 warps), over keys S whose rows vary too
# ([2, S, S]: rows and row length one symbol); the row kernel, not the loop
# nest (a layernorm's row length: test_cuda_sim_simple, the DSL's layernorm
# over a symbol divides by a count that the row kernel's reader declines)
ROWLEN_CASES = [
    ("softmax_rows.json", "L", (5, 48), (48, 33, 5), {"R": 19}, "softmax"),
    ("softmax_keys_s.harp", "S", (3, 40), (40, 29, 3), {}, "softmax"),
]
ROWLEN_INLINE = {
    "softmax_keys_s.harp": "graph<S=16> main(x: f32[2, S, S]) -> (y: f32[2, S, S]) {\n"
                           "    y = softmax(x)\n    return y\n}\n",
}


def rowlen_rows(s, rng):
    """ROWLEN_CASES: each box one unit at every binding, on the simulator
    against the interpreter (one_box), its row kernel taking the size."""
    only = os.environ.get("HARP_CUDA_SS_MODELS")
    for name, sym, (lo, hi), at, fixed, kind in ROWLEN_CASES:
        if only and name not in only.split(",") and f"{name}:{sym}" not in only.split(","):
            continue
        model = os.path.join(MODELS, name)
        if name in ROWLEN_INLINE:
            model = os.path.join(tempfile.mkdtemp(prefix="harp_ss_"), name)
            open(model, "w").write(ROWLEN_INLINE[name])
        box = ("--shapeset", f"{sym}={lo}..{hi}")
        d = None
        for variant in BOTH:
            knobs = NO_TEMPLATES if variant == "loop nests" else ()
            d = one_box(s, rng, f"{name}:{sym}", model, sym, hi, at, fixed, (*box, *knobs), variant, 0)  # templates last
        g = json.load(open(os.path.join(d, "gpu.json")))["gpu"] if d else {"kernels": []}
        s.check(f"{name}:{sym}: the {kind} row kernel reads its row length at run time",
                any(k.get("kind") == kind for k in g["kernels"]), str([k.get("kind") for k in g["kernels"]]))


# self-attention over a run-time S whose heads follow each other in out:
# rows past the binding's S of one head are the next head's first rows
ATTN_GUARD = "graph<S=16> main(q: f16[1, 3, S, 64], k: f16[1, 3, S, 64], v: f16[1, 3, S, 64]) -> (y: f16[1, 3, S, 64]) {\n" \
             "    y = attention(q, k, v)\n    return y\n}\n"


def feeds_outs(d, rng):
    """Random inputs at the shapes of the dump in d, and its outputs' shapes."""
    g = json.load(open(os.path.join(d, "gpu.json")))["gpu"]
    return cuda_sim.feeds_of(g, rng), {b["name"]: b["shape"] for b in g["buffers"] if b["space"] == "output"}


def attn_store_guard(s, rng):
    """The attention's store guard at run time: the S=40 build at S=23 and
    17, its CTAs first to last and last to first (a CTA storing rows past
    its head's S would overwrite the next head's, already written, or write
    past the binding's elements, poisoned: an error), against the
    interpreter; the poison check itself sees one row too many (S+1).
    (A value computed from the poison is a NaN with its bits, which the
    check cannot tell from poison: rows past the binding that only read
    poison would pass unseen; the Q tile's rows past S read zeros.)"""
    only = os.environ.get("HARP_CUDA_SS_MODELS")
    if only and "attn_guard" not in only.split(","):
        return
    model = os.path.join(tempfile.mkdtemp(prefix="harp_ss_"), "attn_guard_s.harp")
    open(model, "w").write(ATTN_GUARD)
    box = ("--shapeset", "S=17..40")
    p, dhi = cuda_sim.dump(model, "sm80", ["S=40"], extra=box)
    s.check("attn_guard: dump at S=40", p.returncode == 0, p.stderr)
    if p.returncode:
        return
    ghi = json.load(open(os.path.join(dhi, "gpu.json")))["gpu"]
    s.check("attn_guard: one attention template launch reading S", ghi["launch_kinds"]["template"] == 1 and
            all(any(a["space"] == "sym" for a in l["args"]) for l in ghi["launches"]), str(ghi["launches"])[:2000])
    NVCC_UNITS.append(("attn_guard_s.harp (templates)", os.path.join(dhi, "model.cu")))
    for v in (23, 17):
        p, dv = cuda_sim.dump(model, "sm80", [f"S={v}"], extra=box)
        s.check(f"attn_guard [S={v}]: dump", p.returncode == 0, p.stderr)
        if p.returncode:
            continue
        feeds, outs = feeds_outs(dv, rng)
        q, e = run(model, feeds, [f"S={v}"], backend="interp")
        s.check(f"attn_guard [S={v}]: interpreter", q.returncode == 0, q.stderr)
        if q.returncode:
            continue
        for rev in (False, True):
            got, err = cuda_sim.run(dhi, feeds, sv=[v], out_shapes=outs, reverse=rev)
            what = f"attn_guard [S={v}] (CTAs {'last to first' if rev else 'first to last'})"
            s.check(f"{what}: nothing stored past the binding's rows", err is None, err)
            for out, a in (got or {}).items():
                ok, detail = close(a, np.load(os.path.join(e, f"{out}.npy")).astype(np.float64))
                s.check(f"{what}: {out} vs interpreter", ok, detail)
        # inputs of S+1 (finite: values from the poison are NaN of its bits, unseen), out checked at S
        p, d1 = cuda_sim.dump(model, "sm80", [f"S={v + 1}"], extra=box)
        feeds1, _ = feeds_outs(d1, rng)
        _, err = cuda_sim.run(dhi, feeds1, sv=[v + 1], out_shapes=outs)
        s.check(f"attn_guard [S={v}]: a row too many is seen past the binding", err is not None and "written past" in err, err)


# split-K over a run-time M (a skinny GEMM: K = 1024 in slices, a bias and
# GELU epilogue): each form from a Plan, and the default plan's choice; and
# over a run-time N (C's row stride) through the workspace forms.  The
# workspace and the flags are laid out at the box's corner hi
SPLITK_MODEL = "graph<M=64, N=64> main(a: f16[M, 1024], b: f16[1024, N], bias: f16[N]) -> (c: f16[M, N]) {\n" \
               "    c = gelu(a @ b + bias)\n    return c\n}\n"
SPLITK_FORMS = [("M", "splitk_serial", 4), ("M", "splitk_parallel", 4), ("M", "splitk_reduce", 8), ("M", None, 0),
                ("N", "splitk_parallel", 4), ("N", "splitk_reduce", 4),
                ("K", "splitk_serial", 4), ("K", "splitk_reduce", 4)]  # (over K the forms differ only past the GEMM)
# over a run-time K (built at 512: 8 k tiles of 64 in 4 slices of 2; 300:
# 5 tiles, its last 44 wide; 260: 5, 4 wide; 4 slices of 5 tiles in chunks
# of 2 leave the last slice empty).  Bindings below the corner
# only (the corner's own size tests no run-time size)
SPLITK_BOX = {"M": ((5, 64), (37, 5), {"N": 64}), "N": ((24, 72), (40, 24), {"M": 24}),
              "K": ((257, 512), (300, 260), {"M": 24, "N": 64})}
SPLITK_K_MODEL = "graph<K=64> main(a: f16[24, K], b: f16[K, 64], bias: f16[64]) -> (c: f16[24, 64]) {\n" \
                 "    c = gelu(a @ b + bias)\n    return c\n}\n"


def splitk_rows(s, rng):
    """SPLITK_FORMS: the build at the box's corner hi at the bindings of
    SPLITK_BOX (one_box), its launches the form's (zero, GEMM, finishing
    pass); the zero kernel reads the binding's M or N (a constant count
    over a run-time K); over a run-time K the GEMM cuts the binding's k
    tiles into the slices at run time."""
    only = os.environ.get("HARP_CUDA_SS_MODELS")
    if only and "splitk_m" not in only.split(","):
        return
    d = tempfile.mkdtemp(prefix="harp_ss_")
    models = {"M": os.path.join(d, "splitk_m.harp"), "N": os.path.join(d, "splitk_m.harp"), "K": os.path.join(d, "splitk_k.harp")}
    open(models["M"], "w").write(SPLITK_MODEL)
    open(models["K"], "w").write(SPLITK_K_MODEL)
    for sym, algo, slices in SPLITK_FORMS:
        (lo, hi), at, fixed = SPLITK_BOX[sym]
        model = models[sym]
        extra = ("--shapeset", f"{sym}={lo}..{hi}")
        if algo:
            plan = os.path.join(d, f"{algo}{sym}.plan")
            tails = "m.i.i n.i.i k.i.i" if sym == "K" else "m.i.i n.i.i"
            open(plan, "w").write(f"split m 64; split n 64; split k 64; warp_tile 32x32; predicate_tail {tails};\n"
                                  f"algo_choice matmul {algo};\nsplitk {slices};\n")
            extra += ("--plan", f"c={plan}")
        name = f"{os.path.basename(model)}:{sym} ({algo or 'the default plan'})"
        dd = one_box(s, rng, name, model, sym, hi, at, fixed, extra, "templates", 1, fixed_kinds=("zero",) if sym == "K" else ())
        g = json.load(open(os.path.join(dd, "gpu.json")))["gpu"] if dd else {"kernels": []}
        kinds = [k["kind"] for k in g["kernels"]]
        s.check(f"{name}: split K (the GEMM, its finishing pass or flags)", "mma_gemm" in kinds and
                ("splitk_finish" in kinds) != (algo == "splitk_serial") and ("zero" in kinds) != (algo == "splitk_reduce"), str(kinds))
        if algo and sym == "K":
            gemm = next((k for k in g["kernels"] if k["kind"] == "mma_gemm"), {})
            s.check(f"{name}: the GEMM splits the binding's k tiles ({slices} slices)", gemm.get("plan", {}).get("splitk") == slices and
                    "hk_ktp" in open(os.path.join(dd, "model.cu")).read(), str(gemm.get("plan"))[:600])


# Winograd F(2x2, 3x3) (from a Plan) over a run-time height, width or
# images: the transforms read them, and so does the transformed GEMM (its N
# the binding's tiles P, a CTA past them returns); the workspace stays laid
# out at the box's corner hi.  F(4x4)'s fp16
# error leaves one_box's 1e-3 at any size (docs/cuda.md, "Winograd"): its
# box build is compared with the binding's own build, bit for bit
# (WINO4_AT)
WINO_MODELS = {
    "wino_bias.harp": "graph<N=2, H=8, W=8> main(x: f16[N, 8, H, W], w: f16[16, 8, 3, 3], b: f16[16]) -> (y: f16[N, 16, H, W]) {\n"
                      "    y = conv2d(x, w, bias=b, pad=[1, 1])\n    return y\n}\n",
    "wino_res.harp": "graph<H=8, W=8> main(x: f16[1, 8, H, W], w: f16[8, 8, 3, 3]) -> (y: f16[1, 8, H, W]) {\n"
                     "    y = x + conv2d(x, w, pad=1)\n    return y\n}\n",
}
WINO_CASES = [
    ("wino_bias.harp", "H", (5, 12), (9, 5), {"N": 2, "W": 9}, 2),
    ("wino_bias.harp", "W", (5, 12), (7, 5), {"N": 2, "H": 6}, 2),
    ("wino_bias.harp", "N", (1, 3), (3, 2), {"H": 7, "W": 6}, 2),
    ("wino_res.harp", "H", (5, 12), (10, 5), {"W": 7}, 2),
]


WINO4_AT = ("wino_bias.harp", "H", (5, 12), (12, 9, 6), {"N": 2, "W": 7})


def wino4_rows(s, rng, d):
    """F(4x4): the box build (hi) at each binding of WINO4_AT on the
    simulator equals the binding's own build (no ShapeSet) bit for bit."""
    name, sym, (lo, hi), at, fixed = WINO4_AT
    model, plan = os.path.join(d, "wino4_" + name), os.path.join(d, "wino4.plan")
    open(model, "w").write(WINO_MODELS[name])
    open(plan, "w").write("split m 64; split n 64; split k 64; predicate_tail m.i.i n.i.i k.i.i; algo_choice conv winograd_4x4_3x3;\n")
    box = ("--shapeset", f"{sym}={lo}..{hi}", "--plan", f"y={plan}")
    p, dhi = cuda_sim.dump(model, "sm80", syms_of(sym, hi, fixed), extra=box)
    s.check(f"{name}:{sym} F(4x4): dump at {sym}={hi}", p.returncode == 0, p.stderr)
    if p.returncode:
        return
    NVCC_UNITS.append((f"{name}:{sym} F(4x4)", os.path.join(dhi, "model.cu")))
    for v in at:
        p, dv = cuda_sim.dump(model, "sm80", syms_of(sym, v, fixed), extra=("--plan", f"y={plan}"))
        s.check(f"{name}:{sym} F(4x4) [{sym}={v}]: its own build", p.returncode == 0, p.stderr)
        if p.returncode:
            continue
        feeds, outs = feeds_outs(dv, rng)
        got, err = cuda_sim.run(dhi, feeds, sv=[v], out_shapes=outs)
        own, err2 = cuda_sim.run(dv, feeds)
        s.check(f"{name}:{sym} F(4x4) [{sym}={v}]: the box build runs", err is None and err2 is None, f"{err} {err2}")
        for o, a in (got or {}).items():
            s.check(f"{name}:{sym} F(4x4) [{sym}={v}]: {o} as the binding's own build, bit for bit",
                    own is not None and np.array_equal(a, own[o]), "")


def wino_rows(s, rng):
    """WINO_CASES: one build at the box's corner hi, at its bindings
    (one_box), on the Winograd kernels the Plan names."""
    only = os.environ.get("HARP_CUDA_SS_MODELS")
    d = tempfile.mkdtemp(prefix="harp_ss_")
    for name, sym, (lo, hi), at, fixed, tile in WINO_CASES:
        if only and name not in only.split(",") and f"{name}:{sym}" not in only.split(","):
            continue
        model, plan = os.path.join(d, name), os.path.join(d, f"wino{tile}.plan")
        open(model, "w").write(WINO_MODELS[name])
        open(plan, "w").write(f"split m 64; split n 64; split k 64; predicate_tail m.i.i n.i.i k.i.i; "
                              f"algo_choice conv winograd_{tile}x{tile}_3x3;\n")
        extra = ("--shapeset", f"{sym}={lo}..{hi}", "--plan", f"y={plan}")
        what = f"{name}:{sym} F({tile}x{tile})"
        dd = one_box(s, rng, what, model, sym, hi, at, fixed, extra, "templates", 1, fixed_kinds=("wino_filter", "ewise"))
        g = json.load(open(os.path.join(dd, "gpu.json")))["gpu"] if dd else {"kernels": []}
        kinds = [k["kind"] for k in g["kernels"]]
        s.check(f"{what}: the Winograd transforms", "wino_input" in kinds and "wino_output" in kinds, str(kinds))
    if not only or "wino4" in only.split(","):
        wino4_rows(s, rng, d)


# the transformer block (examples/transformer_block.harp) over the box a
# session gives B = 4, S = 33..64 (B: 3..4): the box's corner hi decides the
# regions (the output projection's residual add stays out of its GEMM, as
# at S = 64) and the plans (the QKV GEMM's tiles), the corner lo replays
# them, the output projection's A (heads merged back) is copied at the
# binding's sizes and the attention returns past the binding's batches: one
# unit at (S, B) = (64, 4), (33, 4), (33, 3) on sm90 and sm80 (on sm90 the
# cost model alone would fuse that residual at (33, 4)), the corner
# hi's build run on the simulator there (TF32: within 5e-3 of the
# interpreter's fp32), one session build on the fake libcuda (its NVRTC
# compile the unit's compile check)
TRANSFORMER_BOX = {"S": (33, 64), "B": (3, 4)}
TRANSFORMER_AT = [{"S": 64, "B": 4}, {"S": 33, "B": 4}, {"S": 33, "B": 3}]


def box_corner(s, what, model, target, binding, opts):
    """The box unit of model (the box's options opts) dumped for target at
    binding (name -> value): its directory, gpu.json and CUDA C (None, None,
    None when the dump fails)."""
    p, d = cuda_sim.dump(model, target, [f"{k}={v}" for k, v in binding.items()], extra=opts)
    s.check(f"{what}: dump at the corner hi", p.returncode == 0, p.stderr)
    if p.returncode:
        return None, None, None
    return d, json.load(open(os.path.join(d, "gpu.json")))["gpu"], open(os.path.join(d, "model.cu")).read()


def at_bindings(s, rng, what, model, target, box, dhi, src_hi, names, bindings, short, tol):
    """Each binding b (a dict) of bindings inside box (the dump options):
    the unit dumped at b is src_hi's text, and the corner hi's build (dhi;
    its symbols names, derived ones computed at b) runs on the simulator at b against the interpreter
    within tol (rtol and atol); short (b, sym): that binding with sym one
    short must give another result (None: not checked)."""
    at = lambda b: [f"{k}={v}" for k, v in b.items()]
    defs = derived_defs(model, bindings[0], box) if any(n not in bindings[0] for n in names) else {}
    values = lambda b: {**b, **{k: eval(v, {}, dict(b)) for k, v in defs.items()}}  # with the derived symbols' (sspool)
    for b in bindings:
        w = f"{what} {at(b)}"
        p, dv = cuda_sim.dump(model, target, at(b), extra=box)
        s.check(f"{w}: dump", p.returncode == 0, p.stderr)
        if p.returncode:
            continue
        s.check(f"{w}: the same CUDA C as at the corner hi", open(os.path.join(dv, "model.cu")).read() == src_hi)
        feeds, outs = feeds_outs(dv, rng)
        got, err = cuda_sim.run(dhi, feeds, sv=[values(b)[n] for n in names], out_shapes=outs)
        s.check(f"{w}: the corner hi's build runs on the simulator", err is None, err)
        q, e = run(model, feeds, at(b), backend="interp")
        s.check(f"{w}: interpreter", q.returncode == 0, q.stderr)
        for out, a in (got if q.returncode == 0 and got else {}).items():
            ok, detail = close(a, np.load(os.path.join(e, f"{out}.npy")).astype(np.float64), tol, tol)
            s.check(f"{w}: {out} vs interpreter", ok, detail)
        if short and b is short[0]:  # must fail: one row of short[1] short
            bad, err = cuda_sim.run(dhi, feeds, sv=[values(b)[n] - (n == short[1]) for n in names], out_shapes=outs)
            s.check(f"{w}: {short[1]} one short gives another result", err is not None or not all(
                close(a, np.load(os.path.join(e, f"{o}.npy")).astype(np.float64), tol, tol)[0] for o, a in bad.items()))


def transformer_box(s, rng, model, target):
    """TRANSFORMER_BOX on target: the corner hi's unit is the text at every
    binding of TRANSFORMER_AT and runs there on the simulator against the
    interpreter; a size one short (S - 1 at the middle binding) fails."""
    what = f"transformer_block ({target})"
    box = tuple(x for k, (lo, hi) in TRANSFORMER_BOX.items() for x in ("--shapeset", f"{k}={lo}..{hi}"))
    at = lambda b: [f"{k}={v}" for k, v in b.items()]
    dhi, ghi, src_hi = box_corner(s, what, model, target, TRANSFORMER_AT[0], box)
    if not dhi:
        return
    names = [x["name"] for x in ghi["syms"]]
    kinds = {k["name"]: k["kind"] for k in ghi["kernels"]}
    s.check(f"{what}: the box's symbols are the unit's", sorted(names) == ["B", "S"], str(names))
    s.check(f"{what}: every launch but B's packs reads the sizes at run time", all(
        any(a["space"] == "sym" for a in l["args"]) for l in ghi["launches"] if kinds[l["kernel"]] != "pack"),
        str(ghi["launches"])[:2000])
    s.check(f"{what}: 3+ template launches", ghi["launch_kinds"]["template"] >= 3, str(ghi["launch_kinds"]))
    s.check(f"{what}: the output projection's A copied at the binding's sizes",
            "a strided copy at the binding's sizes" in src_hi, "")
    at_bindings(s, rng, what, model, target, box, dhi, src_hi, names, TRANSFORMER_AT,
                (TRANSFORMER_AT[1], "S") if target == "sm90" else None, 5e-3)


# a box that still prints a size (transformer_rows): a GATHER over R
GATHER_MODEL = "graph<R=8> main(x: f32[R, 16], i: i32[R, 4]) -> (y: f32[R, 4]) {\n    y = gather(x, i, 1)\n    return y\n}\n"


def transformer_rows(s, rng):
    """The transformer block's box on sm90 and sm80 (transformer_box), the
    session over its corners and between one build; a box that still prints
    a size (a GATHER's element count) builds per binding and says which
    kernel, once."""
    only = os.environ.get("HARP_CUDA_SS_MODELS")
    if only and "transformer" not in only.split(","):
        return
    model = os.path.join(SRC, "examples", "transformer_block.harp")
    for target in ("sm90", "sm80"):
        transformer_box(s, rng, model, target)
        st, err = session_counts(s, f"transformer_block ({target}) session", model, target, ["S=33", "S=48", "S=64"], ["B=4"])
        if st:
            s.check(f"transformer_block ({target}) session: one build, no fallback", st["clusters"] == 1 and st["builds"] == 1 and
                    st["box_builds"] == 1 and st["box_fallbacks"] == 0 and "builds per binding" not in err, f"{st} {err[-800:]}")
    # a GATHER over R prints its element count (its kernel reads no size at
    # run time), so the box still builds per binding, saying which kernel
    model = os.path.join(tempfile.mkdtemp(prefix="harp_ss_"), "gather_r.harp")
    open(model, "w").write(GATHER_MODEL)
    st, err = session_counts(s, "gather_r.harp (sm90)", model, "sm90", ["R=7", "R=5"])
    if st:
        s.check("gather_r.harp (sm90): per binding, the reason said once, naming the kernel",
                st["box_fallbacks"] == 1 and st["builds"] == 2 and err.count("builds per binding") == 1 and
                "--bind R=7 builds per binding: the code of k0_generic (gather" in err, err[-1500:])


# Winograd's grids at the binding (sscuda9): the input and output
# transforms' grid.x (256 and 128 tiles a block) and the transformed GEMM's
# N tiles (64 columns, grid.y: its M tiles are along x) come from the
# binding's tile count P = N x ceil(oh / 2) x ceil(ow / 2) at launch
# (cuda_wino_grids): H = 32 (P = 512), 20 (320), 17 (288)
WINO_GRID_AT = ("wino_bias.harp", "H", (17, 32), (32, 20, 17), {"N": 2, "W": 32})


def wino_grid_rows(s, rng):
    """WINO_GRID_AT: one build (one_box: the simulator with the grids at
    the binding against the interpreter), each grid the binding's tiles."""
    name, sym, (lo, hi), at, fixed = WINO_GRID_AT
    d = tempfile.mkdtemp(prefix="harp_ss_")
    model, plan = os.path.join(d, name), os.path.join(d, "wino2.plan")
    open(model, "w").write(WINO_MODELS[name])
    open(plan, "w").write("split m 64; split n 64; split k 64; predicate_tail m.i.i n.i.i k.i.i; "
                          "algo_choice conv winograd_2x2_3x3;\n")
    what = f"{name}:{sym} F(2x2) grids"
    dd = one_box(s, rng, what, model, sym, hi, at, fixed, ("--shapeset", f"{sym}={lo}..{hi}", "--plan", f"y={plan}"),
                 "templates", 1, fixed_kinds=("wino_filter", "ewise"))
    if not dd:
        return
    g = json.load(open(os.path.join(dd, "gpu.json")))["gpu"]
    kinds = {k["name"]: k for k in g["kernels"]}
    per = {"wino_input": (256, 0), "mma_gemm": (64, 1), "wino_output": (128, 0)}  # tiles a block, grid axis
    for v in at:
        tiles = fixed["N"] * -(-v // 2) * -(-fixed["W"] // 2)  # pad 1: oh = H, ow = W
        got = {k["kind"]: cuda_sim.grid_x(l, k, [v], per[k["kind"]][1]) for l in g["launches"]
               for k in [kinds[l["kernel"]]] if k["kind"] in per}
        want = {kind: -(-tiles // n) for kind, (n, _) in per.items()}
        s.check(f"{what} [{sym}={v}]: the grids cover the binding's {tiles} tiles", got == want, f"{got} != {want}")


# split-K over run-time batches (sscuda9): a batched skinny GEMM over B x 2
# batches (one batch formula, 2B; K = 256 in 4 slices) through each form;
# the GEMM's grid.z is batches x slices, a CTA past the binding's batches
# returns; the workspace and the flags laid out at the box's corner hi
SPLITK_B_MODEL = "graph<B=4> main(a: f16[B, 2, 24, 256], b: f16[B, 2, 256, 64], bias: f16[64]) -> (c: f16[B, 2, 24, 64]) {\n" \
                 "    c = gelu(a @ b + bias)\n    return c\n}\n"
SPLITK_B_FORMS = ("splitk_serial", "splitk_parallel", "splitk_reduce")


def split_check(s, name, dd, kind, slices, z, guard):
    """That dump dd's kernel of `kind` splits K in `slices` (its grid.z z)
    and that the unit holds the batch guard line `guard`."""
    g = json.load(open(os.path.join(dd, "gpu.json")))["gpu"] if dd else {"kernels": []}
    k = next((k for k in g["kernels"] if k["kind"] == kind), {})
    src = open(os.path.join(dd, "model.cu")).read() if dd else ""
    s.check(name, k.get("plan", {}).get("splitk") == slices and k.get("grid", [0, 0, 0])[2] == z and guard in src, str(k.get("grid")))


def splitk_batch_rows(s, rng):
    """SPLITK_B_FORMS over B = 6, 5 of the box 5..8: one build (one_box:
    the simulator against the interpreter, B one short must differ), the
    GEMM split into 4 slices over the run-time batches."""
    d = tempfile.mkdtemp(prefix="harp_ss_")
    model = os.path.join(d, "splitk_b.harp")
    open(model, "w").write(SPLITK_B_MODEL)
    for algo in SPLITK_B_FORMS:
        plan = os.path.join(d, f"{algo}.plan")
        open(plan, "w").write(f"split m 64; split n 64; split k 64; warp_tile 32x32; predicate_tail m.i.i n.i.i;\n"
                              f"algo_choice matmul {algo};\nsplitk 4;\n")
        name = f"splitk_b.harp:B ({algo})"
        dd = one_box(s, rng, name, model, "B", 8, (6, 5), {}, ("--shapeset", "B=5..8", "--plan", f"c={plan}"), "templates", 1,
                     fixed_kinds=("zero",))
        split_check(s, f"{name}: 4 slices over the run-time batches (grid.z 16 x 4, the batch guard)", dd, "mma_gemm", 4, 64,
                    "if (blockIdx.z >= ((hp_sv0 * 2L) * 1L) * 4) return;")



# split-K convs over run-time images (sscuda10; ResNet-18 over N's deep
# convs): the split conv's grid.z is the box's images x slices, a CTA past
# the binding's returns, the finishing pass alike; the workspace and the
# flags laid out at the box's corner hi (K = 32 x 9 = 288 in 3 slices)
SPLITK_CONV_MODEL = "graph<N=8> main(x: f16[N, 32, 8, 8], w: f16[32, 32, 3, 3], b: f16[32]) -> (y: f16[N, 32, 8, 8]) {\n" \
                    "    y = relu(conv2d(x, w, bias=b, pad=[1, 1]))\n    return y\n}\n"


def splitk_conv_rows(s, rng):
    """Split-K convs (serial, parallel) over N = 8, 6, 5 of the box 5..8:
    one build (one_box: the simulator against the interpreter at both
    corners, N one short must differ), the conv cut in 3 slices over the
    run-time images."""
    d = tempfile.mkdtemp(prefix="harp_ss_")
    model = os.path.join(d, "splitk_conv.harp")
    open(model, "w").write(SPLITK_CONV_MODEL)
    for algo in ("splitk_serial", "splitk_parallel"):
        plan = os.path.join(d, f"{algo}.plan")
        open(plan, "w").write(f"split m 64; split n 64; split k 64; predicate_tail m.i.i n.i.i k.i.i;\n"
                              f"algo_choice matmul {algo};\nsplitk 3;\n")
        name = f"splitk_conv.harp:N ({algo})"
        dd = one_box(s, rng, name, model, "N", 8, (8, 6, 5), {}, ("--shapeset", "N=5..8", "--plan", f"y={plan}"), "templates", 1,
                     fixed_kinds=("zero", "ewise"))  # ewise: the bias's cast
        split_check(s, f"{name}: 3 slices over the run-time images (grid.z 8 x 3, the image guard)", dd, "mma_conv", 3, 24,
                    "if (blockIdx.z >= ((hp_sv0 * 1L) * 1) * 3) return;")


# Loop nests whose extents are floor divisions / affine forms of the box's
# symbols (sspool): a pool's output rows (H - 1) / 2 + 1, H / 2 or H - 2 are
# derived symbols of the graph (tiny_dsym), which join the box's symbols
# (cuda_syms_derived): kernel parameters hp_sv<i> of their own, their
# values the host's at each binding, their largest the corner hi's.  Model,
# box, bindings (both corners and one between), the numpy reference
FLOORDIV_AT = [{"H": 16, "W": 16}, {"H": 13, "W": 10}, {"H": 9, "W": 9}]
FLOORDIV_CASES = [
    ("pool_pad_hw.harp", {"H": (9, 16), "W": (9, 16)}, FLOORDIV_AT,
     lambda x: {"y": np_pool(x, 3, 2, 1, "max"), "z": np_pool(x, 5, 2, 2, "max"), "u": np_pool(x, 3, 1, 1, "max")}),
    # held out: H / 2 (a 2x2 max pool) and H - 2 (a 3x3 average of the ReLU at stride 1); H, W even
    ("pool_hw.harp", {"H": (10, 16), "W": (10, 16)}, [{"H": 16, "W": 16}, {"H": 12, "W": 14}, {"H": 10, "W": 10}],
     lambda x: {"y": np_pool(x, 2, 2, 0, "max"), "z": np_pool(np.maximum(x, 0), 3, 1, 0, "avg")}),
]


def np_pool(x, k, st, pad, how):
    """A k x k pool of NCHW x at stride st, padded by pad (-inf) on each side (numpy)."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=-np.inf)
    oh, ow = (xp.shape[2] - k) // st + 1, (xp.shape[3] - k) // st + 1
    win = [xp[:, :, i:i + st * (oh - 1) + 1:st, j:j + st * (ow - 1) + 1:st] for i in range(k) for j in range(k)]
    return np.max(win, axis=0) if how == "max" else np.mean(win, axis=0)


def derived_defs(model, at, opts):
    """The derived symbols of model lowered for a box (harp dump --dump tiny,
    the box's options opts, bound at at): name -> its definition as a Python
    expression."""
    d = tempfile.mkdtemp(prefix="harp_ss_")
    args = [cuda_sim.HARP, "dump", model, "--dump", "tiny", "--target", "sm80", "--dump-dir", d, *opts]
    for k, v in at.items():
        args += ["--sym", f"{k}={v}"]
    p = subprocess.run(args, capture_output=True, text=True, timeout=300)
    if p.returncode:
        return {}
    return {k: v.replace("floordiv", "//") for k, v in json.load(open(os.path.join(d, "tiny.json"))).get("derived", {}).items()}


def floordiv_rows(s, rng):
    """FLOORDIV_CASES on sm80 and sm90: the box's unit reads every derived
    size at run time (one more kernel parameter each, the loop nests' grids
    from them) and is the same text at every binding; sm80's runs on the
    simulator there against numpy (a derived size one short must fail); a
    session over the box is one build, no fallback."""
    only = os.environ.get("HARP_CUDA_SS_MODELS")
    if only and "floordiv" not in only.split(","):
        return
    for name, box, at, ref in FLOORDIV_CASES:
        model = os.path.join(MODELS, name)
        opts = tuple(x for k, (lo, hi) in box.items() for x in ("--shapeset", f"{k}={lo}..{hi}"))
        defs = derived_defs(model, at[0], opts)
        s.check(f"{name}: derived sizes of a box", len(defs) >= 2, str(defs))
        values = lambda b: {**b, **{k: eval(v, {}, dict(b)) for k, v in defs.items()}}
        for target in ("sm80", "sm90"):
            what = f"{name} ({target}) over {opts[1::2]}"
            dhi, ghi, src_hi = box_corner(s, what, model, target, at[0], opts)
            if not dhi:
                continue
            names = [x["name"] for x in ghi["syms"]]
            s.check(f"{what}: the box's symbols and the derived ones, each at its largest", sorted(names) == sorted([*box, *defs]) and
                    all(x["hi"] == values(at[0])[x["name"]] for x in ghi["syms"]), str(ghi["syms"]))
            derived = [i for i, n in enumerate(names) if n in defs]
            s.check(f"{what}: every launch reads the sizes, its grid from a derived one where its rows are",
                    all(any(a["space"] == "sym" for a in l["args"]) for l in ghi["launches"]) and
                    sum(any(j in derived for j in (l.get("grid_x") or {}).get("syms", [])) for l in ghi["launches"]) >= 1,
                    str(ghi["launches"])[:2000])
            for i, b in enumerate(at):
                w = f"{what} {b}"
                p, dv = cuda_sim.dump(model, target, [f"{k}={v}" for k, v in b.items()], extra=opts)
                s.check(f"{w}: dump", p.returncode == 0, p.stderr)
                if p.returncode:
                    continue
                s.check(f"{w}: the same CUDA C as at the corner hi", open(os.path.join(dv, "model.cu")).read() == src_hi)
                if target == "sm90":
                    continue  # sm90's generic kernels are sm80's text (the simulator's run: sm80's)
                feeds, outs = feeds_outs(dv, rng)
                sv = [values(b)[n] for n in names]
                got, err = cuda_sim.run(dhi, feeds, sv=sv, out_shapes=outs)
                s.check(f"{w}: the corner hi's build runs on the simulator", err is None, err)
                want = ref(feeds["x"])
                for out, a in (got or {}).items():
                    ok, detail = close(a, want[out], 1e-6, 1e-6)
                    s.check(f"{w}: {out} vs numpy", ok, detail)
                if i == 1 and derived:  # must fail: the first derived size one short leaves rows unwritten (poison)
                    bad, err = cuda_sim.run(dhi, feeds, sv=[v - (j == derived[0]) for j, v in enumerate(sv)], out_shapes=outs)
                    s.check(f"{w}: a derived size one short gives another result", err is not None or not all(
                        close(a, want[o], 1e-6, 1e-6)[0] for o, a in bad.items()))
            if name == FLOORDIV_CASES[0][0]:  # one model's units through nvcc (its time is this test's most)
                (NVCC_UNITS_90 if target == "sm90" else NVCC_UNITS).append((what, os.path.join(dhi, "model.cu")))
            binds = [",".join(f"{k}={v}" for k, v in b.items()) for b in at]
            st, err = session_counts(s, f"{what} session", model, target, binds)
            if st:
                s.check(f"{what} session: one build, no fallback", st["clusters"] == 1 and st["builds"] == 1 and
                        st["box_builds"] == 1 and st["box_fallbacks"] == 0 and "builds per binding" not in err, f"{st} {err[-800:]}")


# a loop nest whose statement's domain is a box only by isl's ranges (a
# RESHAPE merging the heads back, [B, 4, S, 16] -> [B, S, 64]: its IndexBook
# domain has more constraints than bounds) loops to the run-time S too
# (sspool; before: a guard at the binding's S, the corners' texts apart):
# q, k, v sliced from one fused projection, 4 heads, causal
HEADS_AT = ("attention_fused_qkv.harp", "S", (33, 64), (64, 40, 33), {"B": 2})


def heads_rows(s, rng):
    """HEADS_AT on sm80: one unit over the box (one_box: the simulator at
    each binding against the interpreter, TF32 within 5e-3; S one short
    must differ); a session over it on sm90 is one build."""
    only = os.environ.get("HARP_CUDA_SS_MODELS")
    if only and "heads" not in only.split(","):
        return
    name, sym, (lo, hi), at, fixed = HEADS_AT
    model = os.path.join(MODELS, name)
    one_box(s, rng, f"{name}:{sym}", model, sym, hi, at, fixed, ("--shapeset", f"{sym}={lo}..{hi}"), "templates", 2,
            tol=(5e-3, 5e-3))
    st, err = session_counts(s, f"{name} (sm90) session", model, "sm90", [f"{sym}={v}" for v in at], [f"{k}={v}" for k, v in fixed.items()])
    if st:
        s.check(f"{name} (sm90) session: one build, no fallback", st["builds"] == 1 and st["box_fallbacks"] == 0 and
                "builds per binding" not in err, f"{st} {err[-800:]}")

# split-K convs over a run-time height and width (sssk): the split conv's
# pixel decode, padded window and guards read H and W, its grid the box's
# pixel tiles (a CTA past the binding's pixels returns), y and the residual
# at the binding, the fp32 workspace and the serial flags laid out at the
# box's corner hi (H = W = 16: 4 pixel tiles of 64; 9 x 9: 2); K = 32 x 9
# = 288 in 3 slices, H and W two symbols of one box
SPLITK_CONV_HW_MODEL = "graph<H=16, W=16> main(x: f16[2, 32, H, W], w: f16[32, 32, 3, 3], b: f16[32], r: f16[2, 32, H, W])\n" \
                       "    -> (y: f16[2, 32, H, W]) {\n    y = relu(conv2d(x, w, bias=b, pad=[1, 1]) + r)\n    return y\n}\n"
SPLITK_CONV_HW_AT = [{"H": 16, "W": 16}, {"H": 12, "W": 10}, {"H": 9, "W": 9}]
# the same at stride 2, pad 1 (the box's corners even and odd: the model's
# own bottom / right pad row, which an even size never reads)
SPLITK_CONV_S2_MODEL = "graph<H=16, W=16> main(x: f16[2, 32, H, W], w: f16[32, 32, 3, 3], b: f16[32])\n" \
                       "    -> (y: f16[2, 32, (H + 1) / 2, (W + 1) / 2]) {\n" \
                       "    y = relu(conv2d(x, w, bias=b, stride=2, pad=[1, 1]))\n    return y\n}\n"
SPLITK_CONV_S2_AT = [{"H": 16, "W": 16}, {"H": 12, "W": 11}, {"H": 9, "W": 9}]
# a deep conv (512 -> 512 3x3, 2 x 4 output tiles, K = 4608: the Plan splits K) over H, W as a session's box
DEEP_CONV_HW_MODEL = "graph<H=14, W=14> main(x: f16[1, 512, H, W], w: f16[512, 512, 3, 3], b: f16[512]) -> (y: f16[1, 512, H, W]) {\n" \
                     "    y = relu(conv2d(x, w, bias=b, pad=[1, 1]))\n    return y\n}\n"


def splitk_conv_hw_box(s, rng, model, plan, target, name, bindings, grid, guard):
    """The conv of model split by plan, dumped on target over the box H, W =
    9..16: one unit at every binding of bindings (the corner hi first), the
    corner hi's run on the simulator there against the interpreter (W one
    short at the second must differ), the split conv's grid (x, y sorted:
    the raster's) and its pixel guard line at run time."""
    at = lambda b: [f"{k}={v}" for k, v in b.items()]
    p, dr = cuda_sim.dump_regions(model, target, at(bindings[0]))  # the conv's region (sm90: the residual apart)
    regions = json.load(open(os.path.join(dr, "region.json")))["regions"] if p.returncode == 0 else []
    conv_region = next((r["name"] for r in regions if r["kind"] == "contraction"), "y")
    box = ("--shapeset", "H=9..16", "--shapeset", "W=9..16", "--plan", f"{conv_region}={plan}")
    dhi, ghi, src_hi = box_corner(s, name, model, target, bindings[0], box)
    if not dhi:
        return
    names = [x["name"] for x in ghi["syms"]]
    kinds = {k["name"]: k["kind"] for k in ghi["kernels"]}
    # the stride-2 conv's output size (H + 1) / 2 joins them as a derived symbol (sspool's ds_*)
    s.check(f"{name}: the box's symbols are the unit's", sorted(n for n in names if not n.startswith("ds_")) == ["H", "W"] and
            all(n.startswith("ds_") for n in names[2:]), str(names))
    s.check(f"{name}: every launch but the zeroing and the bias's cast reads the sizes at run time", all(
        any(a["space"] == "sym" for a in l["args"]) for l in ghi["launches"] if kinds[l["kernel"]] not in ("zero", "ewise")),
        str(ghi["launches"])[:2000])
    conv = next((k for k in ghi["kernels"] if k["kind"] == "mma_conv"), {})
    s.check(f"{name}: 3 slices, the box's pixel tiles {grid}, the pixel guard at run time",
            conv.get("plan", {}).get("splitk") == 3 and sorted(conv.get("grid", [0, 0, 0])[:2]) + conv["grid"][2:] == grid and
            guard in src_hi, str(conv.get("grid")))
    at_bindings(s, rng, name, model, target, box, dhi, src_hi, names, bindings, (bindings[1], "W"), 1e-3)
    (NVCC_UNITS_90 if target == "sm90" else NVCC_UNITS).append((name, os.path.join(dhi, "model.cu")))


def splitk_conv_hw_rows(s, rng):
    """Split-K convs over a run-time height and width: parallel on sm80,
    serial on sm90, and at stride 2 parallel on sm90 (splitk_conv_hw_box);
    with HARP_TEST_SLOW=1 also serial on sm80 and the deep conv's session
    over H, W on the fake libcuda, sm80 and sm90: one build."""
    d = tempfile.mkdtemp(prefix="harp_ss_")
    model = os.path.join(d, "splitk_conv_hw.harp")
    open(model, "w").write(SPLITK_CONV_HW_MODEL)
    s2 = os.path.join(d, "splitk_conv_s2.harp")
    open(s2, "w").write(SPLITK_CONV_S2_MODEL)
    guard = "if (bn0 >= ((((hp_sv0 * 1L) + -1) / %d + 1) * (((hp_sv1 * 1L) + -1) / %d + 1))) return;"
    slow = os.environ.get("HARP_TEST_SLOW") == "1"
    for m, algo, target in ((model, "splitk_serial", "sm80"), (model, "splitk_parallel", "sm80"), (model, "splitk_serial", "sm90"),
                            (s2, "splitk_parallel", "sm90")):
        if target == "sm80" and algo == "splitk_serial" and not slow:  # sm90 runs the same SM80 template's serial form
            print("splitk_conv_hw.harp (splitk_serial, sm80): a slow row (HARP_TEST_SLOW=1 runs it)")
            continue
        plan = os.path.join(d, f"{algo}.plan")
        open(plan, "w").write(f"split m 64; split n 64; split k 64; predicate_tail m.i.i n.i.i k.i.i;\n"
                              f"algo_choice matmul {algo};\nsplitk 3;\n")
        if m == model:  # H, W = 16: 4 pixel tiles of 64
            splitk_conv_hw_box(s, rng, m, plan, target, f"splitk_conv_hw.harp:H,W ({algo}, {target})", SPLITK_CONV_HW_AT,
                               [1, 4, 6], guard % (1, 1))
        else:  # 8 x 8 pixels at the corner hi: 1 tile; the model's pad row in the output size
            splitk_conv_hw_box(s, rng, m, plan, target, f"splitk_conv_s2.harp:H,W ({algo}, {target})", SPLITK_CONV_S2_AT,
                               [1, 1, 6], guard % (2, 2))
    deep = os.path.join(d, "deep_conv_hw.harp")
    open(deep, "w").write(DEEP_CONV_HW_MODEL)
    for target in ("sm80", "sm90") if slow else ():  # NVRTC at 512 channels: slow rows (the units above: one text)
        st, err = session_counts(s, f"deep_conv_hw.harp ({target}) session", deep, target, ["H=14,W=14", "H=12,W=10"])
        if st:
            s.check(f"deep_conv_hw.harp ({target}) session: one build, no fallback", st["clusters"] == 1 and st["builds"] == 1 and
                    st["box_builds"] == 1 and st["box_fallbacks"] == 0 and "builds per binding" not in err, f"{st} {err[-800:]}")



# the attention template over a session's box (ssattn): every symbol of a
# binding varies with its class, the head widths D and Dv too, and a corner
# lo = hi / 2 + 1 of those (33 of 33..64) is no width the template takes
# (the lower corner a generic kernel); gpu_box pins a symbol that is an
# input's or output's innermost dimension (retry_pinned), the box then
# serves that width only.  Model, box symbol (lo, hi), bindings, the rest
ATTN_BOX = [("attention_full.json", "M", (33, 64), (64, 40, 33), {"B": 2, "H": 2, "N": 64, "D": 64, "Dv": 64}),
            ("attention_full.json", "B", (5, 8), (8, 6, 5), {"H": 2, "M": 64, "N": 64, "D": 64, "Dv": 64}),
            ("attention_full_causal.json", "H", (5, 8), (8, 6, 5), {"B": 2, "M": 64, "N": 64, "D": 64, "Dv": 64})]


def attn_box_rows(s, rng):
    """ATTN_BOX: the box unit over one symbol (one_box: the simulator on
    sm80 against the interpreter at both corners and one between, TF32
    within 5e-3; one short must differ), the sm90 unit for nvcc sm_90a;
    a session over every symbol's class is one build, no fallback, on sm80
    and sm90; a binding at another head width builds its own."""
    only = os.environ.get("HARP_CUDA_SS_MODELS")
    if only and "attn_box" not in only.split(","):
        return
    for name, sym, (lo, hi), at, fixed in ATTN_BOX:
        model = os.path.join(MODELS, name)
        box = ("--shapeset", f"{sym}={lo}..{hi}")
        one_box(s, rng, f"{name}:{sym}", model, sym, hi, at, fixed, box, "templates", 1, tol=(5e-3, 5e-3))
        d90, g90, _ = box_corner(s, f"{name}:{sym} (sm90)", model, "sm90", {sym: hi, **fixed}, box)
        if d90:
            NVCC_UNITS_90.append((f"{name}:{sym} (sm90)", os.path.join(d90, "model.cu")))
        for target in ("sm80", "sm90"):
            what = f"{name}:{sym} ({target}) session"
            st, err = session_counts(s, what, model, target, [f"{sym}={v}" for v in at], [f"{k}={v}" for k, v in fixed.items()])
            if st:
                s.check(f"{what}: one build, no fallback", st["clusters"] == 1 and st["builds"] == 1 and st["box_builds"] == 1 and
                        st["box_fallbacks"] == 0 and "builds per binding" not in err, f"{st} {err[-800:]}")
    # D pinned: D = 48 (the class of 64) is not the box's, so it builds its own
    name, sym, _, at, fixed = ATTN_BOX[0]
    rest = [f"{k}={v}" for k, v in fixed.items() if k != "D"]
    st, err = session_counts(s, f"{name}: D pinned", os.path.join(MODELS, name), "sm80", [f"{sym}={at[0]},D=64", f"{sym}={at[1]},D=48"], rest)
    if st:
        s.check(f"{name}: a binding at another D builds its own", st["builds"] == 2 and st["box_builds"] == 1 and
                st["box_fallbacks"] == 0, f"{st} {err[-800:]}")


# CNNs over the image's height and width (sscnn): every size after a
# stride-2 conv is a floor division of H or W, a derived symbol of the box
# (cuda_syms_derived) that a conv template reading it takes as a run-time
# size like H (cuda_conv_at_run_time: its rt_h a formula of the derived
# symbol's slot).  A session's box spans every symbol of a binding, so the
# channels are the models' literals here (their graph<..> symbols would
# vary too).  Model, bindings (the corner hi first; cnn_hw.harp's H, W even),
# the tolerance against the interpreter's fp32 (TF32 convs; 5e-3: three deep,
# a 7x7 window, as transformer_rows')
CNN_HW_AT = [("cnn_hw.harp", [{"H": 16, "W": 16}, {"H": 12, "W": 14}, {"H": 10, "W": 10}], 1e-3),
             ("dsym_cnn.harp", [{"H": 16, "W": 16}, {"H": 11, "W": 14}, {"H": 9, "W": 9}], 1e-3),
             ("resnet_stem_hw.harp", [{"H": 32, "W": 32}, {"H": 23, "W": 29}, {"H": 17, "W": 17}], 5e-3)]
# held out: a ResNet's stem (7x7/2 conv, padded 3x3/2 max pool), a basic
# block at H / 4 and a stride-2 block with its 1x1/2 shortcut: three
# floor divisions deep, H, W of either parity
RESNET_STEM_HW_MODEL = """graph<H=32, W=32> main(x: f32[1, 3, H, W], w0: f32[8, 3, 7, 7], b0: f32[8], w1: f32[8, 8, 3, 3],
                       b1: f32[8], w2: f32[8, 8, 3, 3], b2: f32[8], w3: f32[16, 8, 3, 3], b3: f32[16],
                       wd: f32[16, 8, 1, 1], bd: f32[16])
    -> (y: f32[1, 16, (((H - 1) / 2 + 1 - 1) / 2 + 1 - 1) / 2 + 1, (((W - 1) / 2 + 1 - 1) / 2 + 1 - 1) / 2 + 1]) {
    s = relu(conv2d(x, w0, bias=b0, stride=2, pad=3))
    p = max_pool2d(pad(s, [[0, 0], [0, 0], [1, 1], [1, 1]], value=-inf), kernel=3, stride=2)
    a = relu(conv2d(p, w1, bias=b1, pad=1))
    g = relu(p + conv2d(a, w2, bias=b2, pad=1))
    y = relu(conv2d(g, wd, bias=bd, stride=2) + conv2d(g, w3, bias=b3, stride=2, pad=1))
    return y
}
"""


def literal_channels(name, d):
    """tests/models/name (resnet_stem_hw.harp: RESNET_STEM_HW_MODEL) with
    its symbols but H and W replaced by their defaults in the shapes
    (graph<H=16, W=16>), written into d; its path."""
    text = RESNET_STEM_HW_MODEL if name == "resnet_stem_hw.harp" else open(os.path.join(MODELS, name)).read()
    head = re.search(r"graph<([^>]*)>", text)
    defs = dict(x.strip().split("=") for x in head.group(1).split(","))
    hw = ", ".join(f"{k}={defs[k]}" for k in ("H", "W"))
    body = text[head.start():].replace(head.group(0), f"graph<{hw}>")
    fixed = {k: v for k, v in defs.items() if k not in ("H", "W")}
    body = re.sub(r"\[([^\]]*)\]", lambda m: "[" + re.sub(r"\b([A-Z])\b", lambda x: fixed.get(x.group(1), x.group(1)),
                                                          m.group(1)) + "]", body)
    path = os.path.join(d, name)
    open(path, "w").write(body)
    return path


def cnn_hw_rows(s, rng):
    """CNN_HW_AT on sm80 and sm90 over H, W (the class of the first
    binding: 9..16, 17..32): one unit at every
    binding, each conv reading its sizes at run time (those after a stride-2
    conv the derived symbols' slots); sm80's corner hi runs on the simulator
    at each binding against the interpreter (W one short must differ); a
    session over the bindings is one build on the fake libcuda."""
    only = os.environ.get("HARP_CUDA_SS_MODELS")
    if only and "cnn_hw" not in only.split(","):
        return
    d = tempfile.mkdtemp(prefix="harp_ss_")
    for name, at, tol in CNN_HW_AT:
        model = literal_channels(name, d)
        hi = at[0]["H"]  # the box: H, W = hi / 2 + 1 .. hi
        box = ("--shapeset", f"H={hi // 2 + 1}..{hi}", "--shapeset", f"W={hi // 2 + 1}..{hi}")
        for target in ("sm80", "sm90"):
            what = f"{name} ({target}) over H, W"
            dhi, ghi, src_hi = box_corner(s, what, model, target, at[0], box)
            if not dhi:
                continue
            names = [x["name"] for x in ghi["syms"]]
            derived = [i for i, n in enumerate(names) if n.startswith("ds_")]
            kinds = {k["name"]: k["kind"] for k in ghi["kernels"]}
            convs = [l for l in ghi["launches"] if kinds[l["kernel"]] in ("mma_conv", "mma_gemm")]
            s.check(f"{what}: H, W and derived symbols; every conv reads the sizes at run time", names[:2] == ["H", "W"] and
                    derived and len(convs) >= 2 and all(any(a["space"] == "sym" for a in l["args"]) for l in convs),
                    f"{names} {str(ghi['launches'])[:1500]}")
            if name != "cnn_hw.harp":  # a conv reads its input at (H + 1) / 2 (or deeper): the derived slots
                s.check(f"{what}: a conv at the derived sizes reads their slots",
                        all(f"hp_sv{i}" in src_hi for i in derived), str(names))
            if target == "sm80":
                at_bindings(s, rng, what, model, target, box, dhi, src_hi, names, at, (at[1], "W"), tol)
            else:  # sm90's convs are the SM80 template's text on sm90 plans (the simulator's run: sm80's)
                for b in at[1:]:
                    p, dv = cuda_sim.dump(model, target, [f"{k}={v}" for k, v in b.items()], extra=box)
                    s.check(f"{what} {b}: the same CUDA C as at the corner hi", p.returncode == 0 and
                            open(os.path.join(dv, "model.cu")).read() == src_hi, p.stderr)
            binds = [",".join(f"{k}={v}" for k, v in b.items()) for b in at]
            st, err = session_counts(s, f"{what} session", model, target, binds)
            if st:
                s.check(f"{what} session: one build, no fallback", st["clusters"] == 1 and st["builds"] == 1 and
                        st["box_builds"] == 1 and st["box_fallbacks"] == 0 and "builds per binding" not in err, f"{st} {err[-800:]}")


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
    for name, sym, (lo, hi), at, fixed, variants, ntemplate in CASES:
        if only and name not in only.split(",") and f"{name}:{sym}" not in only.split(","):
            continue
        if (name, sym) in SLOW and os.environ.get("HARP_TEST_SLOW") != "1":
            print(f"{name}:{sym}: a slow row (HARP_TEST_SLOW=1 runs it)")
            continue
        model = os.path.join(MODELS, name)
        if name in INLINE:
            model = os.path.join(tempfile.mkdtemp(prefix="harp_ss_"), name)
            open(model, "w").write(INLINE[name])
        box = ("--shapeset", f"{sym}={lo}..{hi}", *EXTRA.get(name, ()))
        for variant in variants:
            knobs = NO_TEMPLATES if variant == "loop nests" else ()
            one_box(s, rng, f"{name}:{sym}", model, sym, hi, at, fixed, (*box, *knobs), variant, ntemplate)
    if not only or any(x.startswith("wg_") for x in only.split(",")):
        sm90_boxes(s, rng)
    rowlen_rows(s, rng)
    attn_store_guard(s, rng)
    splitk_rows(s, rng)
    wino_rows(s, rng)
    transformer_rows(s, rng)
    if not only or "wino_grid" in only.split(","):
        wino_grid_rows(s, rng)
    if not only or "splitk_b" in only.split(","):
        splitk_batch_rows(s, rng)
    if not only or "splitk_conv" in only.split(","):
        splitk_conv_rows(s, rng)
    floordiv_rows(s, rng)
    heads_rows(s, rng)
    if not only or "splitk_conv_hw" in only.split(","):
        splitk_conv_hw_rows(s, rng)
    attn_box_rows(s, rng)
    cnn_hw_rows(s, rng)
    # the sm80 units for sm_80 (their ISA); also for sm_90a with HARP_TEST_SLOW=1 (that nvcc
    # takes sm80 code for sm_90a is test_cuda_dedup.py's package check): nvcc was most of this test's time
    nvcc_compiles(s, NVCC_UNITS, ("80", "90a") if os.environ.get("HARP_TEST_SLOW") == "1" else ("80",))
    nvcc_compiles(s, NVCC_UNITS_90, ("90a",))
    s.close()


if __name__ == "__main__":  # test_cuda_session_fixed.py imports its helpers
    main()
