"""Every CPU Plan field / DSL statement shapes the generated C, or is a
located error (issue 27, docs/plan.md §18).  For each field, two --plan
overrides that differ only in it:

  * give different C code (comments stripped: not just the plan's echo), and
    the tuning line of the plan comment shows the field's two values;
  * are both marked applied in plan.json;
  * both match numpy (float64) on the same inputs.

Fields: tile, warp_tile, vectorize, stages (pipeline), bind, unroll (the
micro-kernel's K loop), reorder; split-K (algo_choice matmul splitk_reduce,
splitk N) on skinny GEMMs in both of the skinny kernel's forms (B along N,
and x W^T), with batches, tails and an epilogue, and on a conv (the implicit
GEMM's; test_conv_splitk.py has more); the default plan's split-K; on a
3x3 conv the direct kernel runs, its warp tile (pixels x output channels),
tile K (input channels a block), the pixels' tile (rows a task) and the
output channels' tile (the task order).
Then what the CPU cannot follow is refused with a located Unsupported error
and no output: unroll of another loop, further splits, a fuse of non-batch
axes, warp binds, binds of inner axes, a pipeline axis other than K.i,
caching a tensor besides A and B, swizzle, a moved local edge,
splitk_serial / splitk_parallel, a warp tile the direct conv kernel cannot
hold."""
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from fe_ref import conv2d  # noqa: E402
from harp_test import HARP, Suite, close  # noqa: E402

RNG = np.random.default_rng(27)

GEMM = ("graph main(a: f32[30, 200], b: f32[200, 136], bias: f32[136]) -> (c: f32[30, 136]) {\n"
        "    c = relu(matmul(a, b) + bias)\n    return c\n}\n")
SKINNY = ("graph main(a: f32[4, 2056], b: f32[2056, 72]) -> (c: f32[4, 72]) {\n"
          "    c = matmul(a, b)\n    return c\n}\n")
# x W^T with a batch, a K tail (1000 = 62 x 16 + 8) and bias + relu
SKINNY_T = ("graph main(a: f32[3, 2, 1000], w: f32[40, 1000], bias: f32[40]) -> (c: f32[3, 2, 40]) {\n"
            "    c = relu(matmul(a, permute(w, [1, 0])) + bias)\n    return c\n}\n")
# the default plan splits this one (B streams 8.1 MiB, K >= 4096), not SKINNY (B 0.6 MiB)
BIG = ("graph main(a: f32[4, 4100], b: f32[4100, 520]) -> (c: f32[4, 520]) {\n"
       "    c = matmul(a, b)\n    return c\n}\n")
# a 1x1 conv under 256 input channels: the template runs it transposed (the plan's M the
# pixels), reading the plan's warp tile as its micro-tile
CONV1 = ("graph main(x: f32[1, 64, 10, 10], w: f32[72, 64, 1, 1], b: f32[72]) -> (y: f32[1, 72, 10, 10]) {\n"
         "    y = relu(conv2d(x, w, bias=b))\n    return y\n}\n")
CONV = ("graph main(x: f32[1, 64, 6, 6], w: f32[32, 64, 3, 3]) -> (y: f32[1, 32, 6, 6]) {\n"
        "    y = conv2d(x, w, pad=1)\n    return y\n}\n")

# a 3x3 conv the direct kernel runs (fp32, AVX-512): the plan's M is the pixels
DCONV = ("graph main(x: f32[1, 32, 12, 12], w: f32[64, 32, 3, 3]) -> (y: f32[1, 64, 12, 12]) {\n"
         "    y = conv2d(x, w, pad=1)\n    return y\n}\n")

TAIL = "predicate_tail m.i.i n.i.i k.i.i;"
CONV_PLAN = f"split m 32; split n 64; split k 64; {TAIL}"
BASE = f"split m 48; split n 64; split k 64; warp_tile 6x32; bind m.o block.y; bind n.o block.x; vectorize n.i.i 16; {TAIL}"
SK = f"split m 96; split n 512; split k 256; warp_tile 6x64; bind m.o block.y; bind n.o block.x; vectorize n.i.i 16; {TAIL}"
# the direct conv kernel: warp tile 12 pixels x 32 output channels, 2 rows a task (m 24 / 12 columns),
# 16 input channels a block (k 144 / 9 taps), the output channels' tile all 64 (a row block's channel
# blocks run on: order 1)
DBASE = ("split m 24; split n 64; split k 144; warp_tile 12x32; bind m.o block.y; bind n.o block.x; "
         f"vectorize n.i.i 16; {TAIL}")

# what, model, plan A, plan B, (tuning words of A, of B)
PAIRS = [
    ("tile", GEMM, BASE, BASE.replace("split m 48", "split m 24"), ("mc 48", "mc 24")),
    ("warp_tile", GEMM, BASE, BASE.replace("warp_tile 6x32", "warp_tile 4x64"), ("mr 6 nr 32", "mr 4 nr 64")),
    # the search's CPU space (search.c): 6x64, 8x48, 6x32, 4x48 at tile K 256 (here all 200) and 64
    ("warp_tile 8x48 / 4x48", GEMM, BASE.replace("6x32", "8x48").replace("split n 64", "split n 96"),
     BASE.replace("6x32", "4x48").replace("split n 64", "split n 96"), ("mr 8 nr 48", "mr 4 nr 48")),
    ("1x1 conv warp_tile", CONV1, BASE.replace("6x32", "6x64").replace("split m 48", "split m 96"),
     BASE.replace("6x32", "8x48").replace("split m 48", "split m 96").replace("split n 64", "split n 96"),
     ("mr 6 nr 64", "mr 8 nr 48")),
    ("tile k", GEMM, BASE.replace("split k 64", "split k 256"), BASE, ("kc 256", "kc 64")),
    ("vectorize", GEMM, BASE.replace("6x32", "4x16"), BASE.replace("6x32", "4x16").replace("n.i.i 16", "n.i.i 8"),
     ("simd 16", "simd 8")),
    ("stages", GEMM, BASE + " pipeline k.i stages=2;", BASE + " pipeline k.i stages=3;", ("prefetch 8", "prefetch 12")),
    ("bind", GEMM, BASE, BASE.replace(" bind n.o block.x;", ""), ("par_m par_n", "par_m order")),
    ("bind none", GEMM, BASE, BASE.replace(" bind m.o block.y; bind n.o block.x;", ""), ("threads 2", "threads 1")),
    ("unroll", GEMM, BASE, BASE + " unroll k.i 8;", ("order 0 */", "unroll_k 8")),
    ("reorder", GEMM, BASE, BASE + " reorder m.o n.o k.o n.i.o m.i.o k.i.o m.i.i n.i.i k.i.i;", ("order 0", "order 1")),
    ("split-K", SKINNY, SK, SK + " algo_choice matmul splitk_reduce; splitk 4;", ("order 0 */", "splitk 4")),
    ("split-K slices", SKINNY, SK + " algo_choice matmul splitk_reduce; splitk 2;",
     SK + " algo_choice matmul splitk_reduce; splitk 8;", ("splitk 2", "splitk 8")),
    ("split-K x W^T", SKINNY_T, SK, SK + " algo_choice matmul splitk_reduce; splitk 3;", ("order 0 */", "splitk 3")),
    # a conv: the implicit GEMM with K (576) in 2 slices of whole KC blocks (test_conv_splitk.py has more)
    # (unsplit, the direct kernel runs it at the plan's tile)
    ("conv split-K", CONV, CONV_PLAN, CONV_PLAN + " algo_choice matmul splitk_reduce; splitk 2;", ("; direct: px", "splitk 2")),
    ("direct conv warp_tile", DCONV, DBASE, DBASE.replace("warp_tile 12x32", "warp_tile 12x16"),
     ("px 12 oc 32", "px 12 oc 16")),
    ("direct conv tile k", DCONV, DBASE, DBASE.replace("split k 144", "split k 288"), ("cb 16", "cb 32")),
    ("direct conv tile m", DCONV, DBASE, DBASE.replace("split m 24", "split m 48"), ("rows 2", "rows 4")),
    ("direct conv tile n", DCONV, DBASE, DBASE.replace("split n 64", "split n 32"), ("rows 2 order 1", "rows 2 order 2")),
]

# what, model, plan, words the error must contain (besides .plan:LINE:COL)
REFUSED = [
    ("unroll m.i", GEMM, BASE + " unroll m.i 4;", ["unroll m.i 4", "the GEMM / conv micro-kernel's K loop (k.i)"]),
    ("further split", GEMM, BASE + " split m.i.i 2;", ["split m.i.i", "no further split"]),
    ("fuse", GEMM, BASE + " fuse m.o n.o -> mn;", ["fuse m.o n.o", "only batch axes fuse"]),
    ("bind warp", GEMM, BASE + " bind m.i.o warp.y;", ["bind m.i.o warp.y", "no warps"]),
    ("bind inner", GEMM, BASE.replace("bind n.o block.x", "bind n.i block.x"), ["bind n.i block.x", "outer tiles"]),
    ("pipeline axis", GEMM, BASE + " pipeline m.i stages=2;", ["pipeline m.i", "along k.i only"]),
    ("cache_read other", GEMM, BASE + " cache_read bias smem at=k.i;", ["cache_read bias", "pack A and B only"]),
    ("swizzle", GEMM, BASE + " layout_hint A_swizzle=true;", ["A_swizzle=true", "unswizzled"]),
    ("local edge", GEMM, BASE + " local_edge matmul_0 -> c smem_ring depth=2;", ["local_edges", "cannot move them"]),
    ("splitk_serial", SKINNY, SK + " algo_choice matmul splitk_serial; splitk 2;", ["splitk_serial", "cpu"]),
    ("splitk_parallel", SKINNY, SK + " algo_choice matmul splitk_parallel; splitk 2;", ["splitk_parallel", "cpu"]),
    ("direct conv warp_tile", DCONV, DBASE.replace("warp_tile 12x32", "warp_tile 6x64"),
     ["warp_tile 6x64", "direct conv kernel", "pixels x output channels"]),
    ("direct conv too many pixels", DCONV, DBASE.replace("warp_tile 12x32", "warp_tile 14x32").replace("split m 24", "split m 28"),
     ["warp_tile 14x32", "at most 28 pixels with 16 and 12 with 32"]),
]


def write(text, suffix):
    f = tempfile.NamedTemporaryFile("w", suffix=suffix, delete=False)
    f.write(text)
    f.close()
    return f.name


def inputs_of(model_text):
    """Random inputs for the graph's parameters (name: f32[dims])."""
    head = model_text.split("->")[0]
    return {n: RNG.standard_normal([int(x) for x in dims.split(",")]).astype(np.float32)
            for n, dims in re.findall(r"(\w+): f32\[([^\]]*)\]", head)}


def reference(model_text, x):
    f64 = {k: v.astype(np.float64) for k, v in x.items()}
    if "conv2d" in model_text and "bias=b" in model_text:  # CONV1: 1x1, bias + relu
        return np.maximum(conv2d(f64["x"], f64["w"], f64["b"], pad=0), 0)
    if "conv2d" in model_text:
        return conv2d(f64["x"], f64["w"], np.zeros(f64["w"].shape[0]), pad=1)
    if "permute" in model_text:
        return np.maximum(f64["a"] @ f64["w"].T + f64["bias"], 0)
    if "bias" in f64:
        return np.maximum(f64["a"] @ f64["b"] + f64["bias"], 0)
    return f64["a"] @ f64["b"]


def harp_run(model, x, plan=None):
    d = tempfile.mkdtemp(prefix="harp_cpuplan_")
    # tier0=off: the subject is the compiled kernel; on a busy machine the
    # first result could otherwise come from tier 0 (another summation order)
    args = [HARP, "run", model, "--out", d, "--dump", "plan,c", "--dump-dir", d, "--backend", "cpu", "--knob", "tier0=off"]
    for name, arr in x.items():
        np.save(os.path.join(d, f"in_{name}.npy"), arr)
        args += ["--input", f"{name}={os.path.join(d, f'in_{name}.npy')}"]
    if plan:
        args += ["--plan", f"{region_of(model, x)}={write(plan + chr(10), '.plan')}"]
    return subprocess.run(args, capture_output=True, text=True, timeout=300), d


_REGION = {}


def region_of(model, x):
    """The model's one contraction region (from a run with the default plan)."""
    if model not in _REGION:
        p, d = harp_run(model, x)
        plans = json.load(open(os.path.join(d, "plan.json")))["plans"] if p.returncode == 0 else []
        _REGION[model] = plans[0]["region"] if len(plans) == 1 else "?"
    return _REGION[model]


def code_of(c_text):
    """The C without comments (a plan's echo in a comment is not a difference)."""
    return re.sub(r"/\*.*?\*/", "", c_text, flags=re.S)


def tuning_line(c_text):
    m = re.search(r"/\* plan: [^\n]*\n\s*-> ([^\n]*)\*/", c_text)
    return m.group(1) if m else ""


def one_side(s, what, model, text, x, plan, want=None, atol=1e-4):
    """Run model under plan: applied, the output (y of a conv, else c) against
    want (default: reference(text, x)) in numpy float64; the C, or None."""
    p, d = harp_run(model, x, plan)
    s.check(f"{what}: harp run --plan", p.returncode == 0, p.stderr[-800:])
    if p.returncode:
        return None
    e = json.load(open(os.path.join(d, "plan.json")))["plans"][0]
    s.check(f"{what}: plan.json says applied", e.get("applied") is True, str(e.get("note")))
    out = os.path.join(d, "y.npy" if "conv2d" in text else "c.npy")
    want = reference(text, x) if want is None else want
    s.check(f"{what}: vs numpy", *close(np.load(out), want, rtol=1e-4, atol=atol))
    return open(os.path.join(d, "model.c")).read()


def check_pair(s, what, text, a, b, words):
    model = write(text, ".harp")
    x = inputs_of(text)
    ca, cb = one_side(s, f"{what} [A]", model, text, x, a), one_side(s, f"{what} [B]", model, text, x, b)
    if ca is None or cb is None:
        return
    ta, tb = tuning_line(ca), tuning_line(cb)
    s.check(f"{what}: the C code differs", code_of(ca) != code_of(cb))
    s.check(f"{what}: tuning says '{words[0]}' / '{words[1]}'", words[0] in ca and words[1] in tb and words[1] not in ta,
            f"{ta} / {tb}")
    if what in ("split-K", "split-K x W^T", "conv split-K"):
        s.check(f"{what}: the split kernel sums partials ($P_ksum) only in B", "_ksum" in cb and "_ksum" not in ca)
    print(f"{what}: {ta.strip()}  |  {tb.strip()}", flush=True)


def check_refused(s, what, text, plan, want):
    model = write(text, ".harp")
    x = inputs_of(text)
    p, d = harp_run(model, x, plan)
    s.check(f"{what}: refused with a located Unsupported error",
            p.returncode != 0 and "Unsupported" in p.stderr and re.search(r"\.plan:1:\d+:", p.stderr) and
            all(w in p.stderr for w in want), p.stderr[-600:])
    s.check(f"{what}: no output, no model.c", not os.path.exists(os.path.join(d, "c.npy")) and
            not os.path.exists(os.path.join(d, "y.npy")) and not os.path.exists(os.path.join(d, "model.c")))


def check_default_splitk(s):
    """The default plan splits K 4 ways where it was measured to pay (a GEMV
    of at most 8 rows, K >= 4096, B streaming 8 MiB or more), and the kernel
    follows it; a small one (SKINNY) stays unsplit."""
    for what, text, split in (("BIG", BIG, True), ("SKINNY", SKINNY, False)):
        model = write(text, ".harp")
        x = inputs_of(text)
        p, d = harp_run(model, x)
        s.check(f"default split-K {what}: run", p.returncode == 0, p.stderr[-600:])
        if p.returncode:
            continue
        e = json.load(open(os.path.join(d, "plan.json")))["plans"][0]
        c = open(os.path.join(d, "model.c")).read()
        got = (e["plan"]["algo_choice"].get("matmul") == "splitk_reduce", e["plan"].get("splitk"), "_ksum" in c)
        s.check(f"default split-K {what}: {'split 4 ways' if split else 'unsplit'}, applied",
                got == ((True, 4, True) if split else (False, None, False)) and e.get("applied") is True,
                f"{got} {e.get('note')} {tuning_line(c)}")
        s.check(f"default split-K {what}: vs numpy", *close(np.load(os.path.join(d, "c.npy")), reference(text, x),
                                                              rtol=1e-4, atol=1e-4))


def check_default_direct(s):
    """The default plan of a conv the direct kernel runs is a tile of that
    kernel (the search's cost_dconv.c space), applied: its tuning line shows
    the direct kernel's fields, and the numbers match numpy."""
    model = write(DCONV, ".harp")
    x = inputs_of(DCONV)
    p, d = harp_run(model, x)
    s.check("default direct conv: run", p.returncode == 0, p.stderr[-600:])
    if p.returncode:
        return
    e = json.load(open(os.path.join(d, "plan.json")))["plans"][0]
    c = open(os.path.join(d, "model.c")).read()
    s.check("default direct conv: applied, the kernel's fields in the tuning line",
            e.get("applied") is True and re.search(r"direct: px \d+ oc (16|32) cb \d+ rows \d+ order [12]", tuning_line(c)),
            f"{e.get('note')} {tuning_line(c)}")
    s.check("default direct conv: vs numpy", *close(np.load(os.path.join(d, "y.npy")), reference(DCONV, x),
                                                    rtol=1e-4, atol=1e-4))


def main():
    s = Suite("cpu_plan_fields")
    only = os.environ.get("HARP_PLAN_FIELDS")  # a substring of the case names (debugging)
    for what, text, a, b, words in PAIRS:
        if not only or only in what:
            check_pair(s, what, text, a, b, words)
    for what, text, plan, want in REFUSED:
        if not only or only in what:
            check_refused(s, what, text, plan, want)
    if not only:
        check_default_splitk(s)
        check_default_direct(s)
    s.close()


if __name__ == "__main__":
    main()
