"""Networks' CUDA boxes with run-time sizes (issue 25): one GPU build per
ShapeSet box, as test_cuda_shapeset.py checks it (the unit at the box's
corner hi is the text at every binding and runs there on the CPU SIMT
simulator against the interpreter or numpy; one short must differ), and
a `harp bench --bind` session over the box on the fake libcuda is one
build.  The transformer block over S (transformer_rows: the regions and
plans decided at the box's corner hi, on sm90 and sm80), pools whose output
sizes are floor divisions / affine forms of the box's symbols
(floordiv_rows: derived sizes read at run time), a heads merge whose domain
is a box by isl's ranges only (heads_rows), the attention template over a
session's box (attn_box_rows) and CNNs over H, W whose convs after a
stride-2 one read derived sizes (cnn_hw_rows).
HARP_CUDA_SS_MODELS=name,... runs some only (transformer, floordiv, heads,
attn_box, cnn_hw).  Skips (77) without g++."""
import os
import re
import tempfile

import numpy as np

from cuda_ss_common import (NVCC_UNITS, NVCC_UNITS_90, at_bindings, box_corner, derived_defs, finish, one_box, one_build, only,
                            session_counts, start)
from harp_test import MODELS, SRC


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


def transformer_box(s, rng, model, target):
    """TRANSFORMER_BOX on target: the corner hi's unit is the text at every
    binding of TRANSFORMER_AT and runs there on the simulator against the
    interpreter; a size one short (S - 1 at the middle binding) fails."""
    what = f"transformer_block ({target})"
    box = tuple(x for k, (lo, hi) in TRANSFORMER_BOX.items() for x in ("--shapeset", f"{k}={lo}..{hi}"))
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


# a box that still prints a size (transformer_rows): a conv over C channels
# (the implicit-GEMM template prints its channels; a GATHER reads its sizes
# at run time since ssgather: test_cuda_gather_box.py)
CONV_C_MODEL = ("graph<C=8> main(x: f32[1, C, 8, 8], w: f32[16, C, 3, 3]) -> (y: f32[1, 16, 8, 8]) {\n"
                "    y = conv2d(x, w, pad=[1, 1])\n    return y\n}\n")


def transformer_rows(s, rng):
    """The transformer block's box on sm90 and sm80 (transformer_box), the
    session over its corners and between one build; a box that still prints
    a size (a conv's channels) builds per binding and says which kernel,
    once."""
    if not only("transformer"):
        return
    model = os.path.join(SRC, "examples", "transformer_block.harp")
    for target in ("sm90", "sm80"):
        transformer_box(s, rng, model, target)
        st, err = session_counts(s, f"transformer_block ({target}) session", model, target, ["S=33", "S=48", "S=64"], ["B=4"])
        one_build(s, f"transformer_block ({target}) session", st, err)
    # a conv over C prints its channels (the template reads no channel count
    # at run time), so the box still builds per binding, saying which kernel
    model = os.path.join(tempfile.mkdtemp(prefix="harp_ss_"), "conv_c.harp")
    open(model, "w").write(CONV_C_MODEL)
    st, err = session_counts(s, "conv_c.harp (sm90)", model, "sm90", ["C=7", "C=5"])
    if st:
        s.check("conv_c.harp (sm90): per binding, the reason said once, naming the kernel",
                st["box_fallbacks"] == 1 and st["builds"] == 2 and err.count("builds per binding") == 1 and
                "--bind C=7 builds per binding: the code of k0_" in err, err[-1500:])


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


def floordiv_rows(s, rng):
    """FLOORDIV_CASES on sm80 and sm90: the box's unit reads every derived
    size at run time (one more kernel parameter each, the loop nests' grids
    from them) and is the same text at every binding; sm80's runs on the
    simulator there against numpy (a derived size one short must fail); a
    session over the box is one build, no fallback."""
    if not only("floordiv"):
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
            short = (at[1], names[derived[0]]) if derived else None  # the first derived size one short leaves rows unwritten
            at_bindings(s, rng, what, model, target, opts, dhi, src_hi, names, at, short, 1e-6, ref=lambda f: ref(f["x"]),
                        sim=target == "sm80")  # sm90's generic kernels are sm80's text (the simulator's run: sm80's)
            if name == FLOORDIV_CASES[0][0]:  # one model's units through nvcc (its time is this test's most)
                (NVCC_UNITS_90 if target == "sm90" else NVCC_UNITS).append((what, os.path.join(dhi, "model.cu")))
            binds = [",".join(f"{k}={v}" for k, v in b.items()) for b in at]
            st, err = session_counts(s, f"{what} session", model, target, binds)
            one_build(s, f"{what} session", st, err)


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
    if not only("heads"):
        return
    name, sym, (lo, hi), at, fixed = HEADS_AT
    model = os.path.join(MODELS, name)
    one_box(s, rng, f"{name}:{sym}", model, sym, hi, at, fixed, ("--shapeset", f"{sym}={lo}..{hi}"), "templates", 2,
            tol=(5e-3, 5e-3))
    st, err = session_counts(s, f"{name} (sm90) session", model, "sm90", [f"{sym}={v}" for v in at], [f"{k}={v}" for k, v in fixed.items()])
    if st:
        s.check(f"{name} (sm90) session: one build, no fallback", st["builds"] == 1 and st["box_fallbacks"] == 0 and
                "builds per binding" not in err, f"{st} {err[-800:]}")


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
    if not only("attn_box"):
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
            one_build(s, what, st, err)
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
    if not only("cnn_hw"):
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
                at_bindings(s, rng, what, model, target, box, dhi, src_hi, names, at[1:], None, tol, sim=False)
            binds = [",".join(f"{k}={v}" for k, v in b.items()) for b in at]
            st, err = session_counts(s, f"{what} session", model, target, binds)
            one_build(s, f"{what} session", st, err)


def main():
    s, rng = start("cuda_shapeset_nets")
    transformer_rows(s, rng)
    floordiv_rows(s, rng)
    heads_rows(s, rng)
    attn_box_rows(s, rng)
    cnn_hw_rows(s, rng)
    finish(s)


if __name__ == "__main__":  # test_cuda_session_fixed.py imports literal_channels
    main()
