"""CUDA split-K and Winograd with run-time sizes (issue 25): one GPU build per
ShapeSet box, as test_cuda_shapeset.py checks it (cuda_ss_common.one_box:
the unit at the box's corner hi is the text at every binding and runs
there on the CPU SIMT simulator against the interpreter; one short must
differ).  Split-K over a run-time M, N or K (splitk_rows), over run-time
batches (splitk_batch_rows), a split conv over run-time images
(splitk_conv_rows) and over a run-time height and width
(splitk_conv_hw_rows); Winograd F(2x2) and F(4x4) over the height, width
or images (wino_rows) and its grids at the binding (wino_grid_rows).
HARP_CUDA_SS_MODELS=name[:SYM],... runs some only (splitk_m, splitk_b,
splitk_conv, splitk_conv_hw, wino4, wino_grid name those functions'
rows).  Skips (77) without g++."""
import json
import os
import tempfile

import numpy as np

import cuda_sim
from cuda_ss_common import (NVCC_UNITS, NVCC_UNITS_90, at_bindings, box_corner, feeds_outs, finish, one_box, one_build, only,
                            session_counts, start, syms_of)


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
    if not only("splitk_m"):
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
    sel = only()
    d = tempfile.mkdtemp(prefix="harp_ss_")
    for name, sym, (lo, hi), at, fixed, tile in WINO_CASES:
        if sel and name not in sel and f"{name}:{sym}" not in sel:
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
    if only("wino4"):
        wino4_rows(s, rng, d)


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
        one_build(s, f"deep_conv_hw.harp ({target}) session", st, err)


def main():
    s, rng = start("cuda_shapeset_splitk")
    splitk_rows(s, rng)
    wino_rows(s, rng)
    if only("wino_grid"):
        wino_grid_rows(s, rng)
    if only("splitk_b"):
        splitk_batch_rows(s, rng)
    if only("splitk_conv"):
        splitk_conv_rows(s, rng)
    if only("splitk_conv_hw"):
        splitk_conv_hw_rows(s, rng)
    finish(s)


main()
