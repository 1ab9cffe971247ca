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
one row short must give another result (cuda_ss_common.one_box).  A model
whose template prints its size would have corners that differ (the
session then builds per binding).  Each HI unit compiles with nvcc for its
architecture (an sm80 unit for sm_80, also for sm_90a with
HARP_TEST_SLOW=1) when nvcc is there.  Here: the CASES, the SM90 wgmma
GEMM's boxes (sm90_boxes), the row kernels' run-time row length
(rowlen_rows) and the attention's store guard (attn_store_guard).
Split-K and Winograd over run-time sizes: test_cuda_shapeset_splitk.py;
the transformer block, pools with derived sizes, the heads merge, the
attention's session box and CNNs over H, W: test_cuda_shapeset_nets.py.
HARP_CUDA_SS_MODELS=name[:SYM],... runs some only (wg_ names the sm90
boxes, attn_guard the guard's rows).  Skips (77) without g++."""
import json
import os
import tempfile

import numpy as np

import cuda_sim
from cuda_ss_common import BOTH, NO_TEMPLATES, NVCC_UNITS, feeds_outs, finish, one_box, only, start
from harp_test import MODELS, close, run


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
    sel = only()
    for name, sym, (lo, hi), at, fixed, kind in ROWLEN_CASES:
        if sel and name not in sel and f"{name}:{sym}" not in sel:
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


def attn_store_guard(s, rng):
    """The attention's store guard at run time: the S=40 build at S=23 and
    17, its CTAs first to last and last to first (a CTA storing rows past
    its head's S would overwrite the next head's, already written, or write
    past the binding's elements, poisoned: an error), against the
    interpreter; the poison check itself sees one row too many (S+1).
    (A value computed from the poison is a NaN with its bits, which the
    check cannot tell from poison: rows past the binding that only read
    poison would pass unseen; the Q tile's rows past S read zeros.)"""
    if not only("attn_guard"):
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


def main():
    s, rng = start("cuda_shapeset")
    # a binding outside the box (or none): a located usage error, no dump
    for syms in (["R=60"], []):
        p, d = cuda_sim.dump(os.path.join(MODELS, "layernorm.json"), "sm80", syms, extra=("--shapeset", "R=2..48"))
        s.check(f"--shapeset R=2..48 at {syms}: refused", p.returncode != 0 and "bind R inside the box" in p.stderr and
                not os.path.exists(os.path.join(d, "model.cu")), p.stderr)
    sel = only()
    for name, sym, (lo, hi), at, fixed, variants, ntemplate in CASES:
        if sel and name not in sel and f"{name}:{sym}" not in sel:
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
    if not sel or any(x.startswith("wg_") for x in sel):
        sm90_boxes(s, rng)
    rowlen_rows(s, rng)
    attn_store_guard(s, rng)
    finish(s)


main()
