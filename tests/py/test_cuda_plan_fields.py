"""Every GPU Plan field shapes the CUDA kernel, or is a located error
(issue 27).  For each field, two --plan overrides that differ only in it:

  * give different CUDA source for the region's kernel (the field is
    visible in the kernel text and in its --dump gpu metadata);
  * are both marked applied in plan.json;
  * both match the reference interpreter on the SIMT simulator (the same
    numbers, whatever the tiling);
  * both compile with NVRTC for sm_80 / sm_90a (when NVRTC is here).

Fields: conv tile, stages, warp tile, raster (bind), split-K; GEMM tile (the
GEMM's other fields: test_cuda_plan.c, test_cuda_splitk.py); attention algorithm (streaming_softmax_2pass / online_softmax) and
key tile.  Then what the GPU lacks: winograd_3x3 is never the default (a
plan naming it runs Winograd, test_cuda_winograd.py, but not on a grouped
conv: a located error); fft_conv is a located error on every target, it is
no algorithm of harp; a plan a template cannot follow (a 128-row attention tile,
a conv split as splitk_reduce) is a located Unsupported error,
never a kernel that quietly runs something else.  Skips (77) without g++."""
import json
import os
import re
import subprocess
import sys
import tempfile
import warnings

import numpy as np

import cuda_sim
from harp_test import HARP, MODELS, Suite, close, run

GPU = cuda_sim.GPU_MODELS
CONV = (os.path.join(GPU, "conv3x3_s1.harp"), (), "y")
LONGK = (os.path.join(GPU, "conv_long_k.harp"), (), "y")
GROUPED = (os.path.join(GPU, "conv_grouped.harp"), (), "z")
GEMM = (os.path.join(GPU, "gemm_tail.harp"), (), "c")
ATT = (os.path.join(MODELS, "attention_full_fp16.json"), ("B=1", "H=2", "M=40", "N=40", "D=16", "Dv=16"), "out_cast")
TAIL = "predicate_tail m.i.i n.i.i k.i.i;"
CONV_BASE = f"split m 64; split n 64; split k 32; warp_tile 32x32; pipeline k.i stages=2; {TAIL}"
ATT_BASE = "split m 64; split n 64; split k 16; predicate_tail m.i.i n.i.i; algo_choice attention streaming_softmax_2pass;"

# what, model, target, plan A, plan B, kernel metadata key that must differ
PAIRS = [
    ("conv tile", CONV, "sm80", CONV_BASE, CONV_BASE.replace("split m 64", "split m 128"), "BN"),
    ("conv stages", CONV, "sm80", CONV_BASE, CONV_BASE.replace("stages=2", "stages=3"), "stages"),
    ("conv warp tile", CONV, "sm80", CONV_BASE, CONV_BASE.replace("warp_tile 32x32", "warp_tile 64x32"), "warp_tile"),
    ("conv raster", CONV, "sm80", CONV_BASE + " bind n.o block.x; bind m.o block.y;",
     CONV_BASE + " bind m.o block.x; bind n.o block.y;", "bind"),
    ("conv split-K", LONGK, "sm80", CONV_BASE, CONV_BASE + " algo_choice matmul splitk_serial; splitk 4;", "splitk"),
    ("conv split-K form", LONGK, "sm80", CONV_BASE + " algo_choice matmul splitk_serial; splitk 4;",
     CONV_BASE + " algo_choice matmul splitk_parallel; splitk 4;", "algo_choice.matmul"),
    ("conv split-K [sm90]", LONGK, "sm90", f"split m 64; split n 64; split k 64; {TAIL}",
     f"split m 64; split n 64; split k 64; {TAIL} algo_choice matmul splitk_parallel; splitk 8;", "splitk"),
    ("conv tile [sm90]", CONV, "sm90", f"split m 64; split n 64; split k 64; {TAIL}",
     f"split m 128; split n 64; split k 64; {TAIL}", "BN"),
    ("gemm tile", GEMM, "sm80", f"split m 64; split n 64; split k 32; warp_tile 32x32; {TAIL}",
     f"split m 128; split n 64; split k 32; warp_tile 32x32; {TAIL}", "BM"),
    ("attention algorithm", ATT, "sm80", ATT_BASE, ATT_BASE.replace("streaming_softmax_2pass", "online_softmax"),
     "algo_choice.attention"),
    ("attention key tile", ATT, "sm80", ATT_BASE, ATT_BASE.replace("split n 64", "split n 32"), "BN"),
    ("attention algorithm [sm90]", ATT, "sm90", ATT_BASE, ATT_BASE.replace("streaming_softmax_2pass", "online_softmax"),
     "algo_choice.attention"),
]
TEMPLATE_KINDS = ("mma_conv", "mma_gemm", "wgmma_gemm", "attention")


def plan_file(text):
    f = tempfile.NamedTemporaryFile("w", suffix=".plan", delete=False)
    f.write(text + "\n")
    f.close()
    return f.name


def dump(model, target, plan=None, region=None, syms=()):
    d = tempfile.mkdtemp(prefix="harp_planf_")
    args = [HARP, "dump", model, "--dump", "plan,gpu,cu", "--target", target, "--dump-dir", d]
    if plan:
        args += ["--plan", f"{region}={plan_file(plan)}"]
    for x in syms:
        args += ["--sym", x]
    return subprocess.run(args, capture_output=True, text=True, timeout=300), d


def kernel_text(cu, name):
    """The source of kernel `name` in model.cu (up to the next kernel)."""
    m = re.search(r'extern "C" __global__ void[^\n]*\b%s\(' % re.escape(name), cu)
    if not m:
        return ""
    nxt = cu.find('extern "C" __global__', m.end())
    return cu[m.start():nxt if nxt > 0 else len(cu)]


def region_entry(d, region):
    for e in json.load(open(os.path.join(d, "plan.json")))["plans"]:
        if e["region"] == region:
            return e
    return None


def one_side(s, what, model, target, plan):
    """Dump with the plan, check it is applied; returns (gpu.json, the
    region's template kernel, its source, dir) or None."""
    path, syms, region = model
    p, d = dump(path, target, plan, region, syms)
    s.check(f"{what}: dump --plan", p.returncode == 0, p.stderr)
    if p.returncode:
        return None
    e = region_entry(d, region)
    s.check(f"{what}: plan.json says applied", e is not None and e.get("applied") is True, str(e and e.get("note")))
    g = json.load(open(os.path.join(d, "gpu.json")))["gpu"]
    ks = [k for k in g["kernels"] if k["kind"] in TEMPLATE_KINDS and k["plan"].get("region") == region]
    s.check(f"{what}: one template kernel for region {region}", len(ks) == 1, str([k["kind"] for k in g["kernels"]]))
    if len(ks) != 1:
        return None
    return g, ks[0], kernel_text(open(os.path.join(d, "model.cu")).read(), ks[0]["name"]), d


def simulate(s, what, model, g, d, rng):
    path, syms, _ = model
    feeds = cuda_sim.feeds_of(g, rng)
    got, err = cuda_sim.run(d, feeds)
    s.check(f"{what}: runs on the simulator", err is None, err)
    if err:
        return
    q, e = run(path, feeds, syms=syms, backend="interp")
    s.check(f"{what}: interpreter", q.returncode == 0, q.stderr)
    if q.returncode == 0:
        outs = [name for name in got if os.path.exists(os.path.join(e, f"{name}.npy"))]
        s.check(f"{what}: outputs compared", len(outs) >= 1, f"{list(got)} vs {os.listdir(e)}")
        for name in outs:
            s.check(f"{what}: {name} vs interpreter", *close(got[name], np.load(os.path.join(e, f"{name}.npy"))))


def check_pair(s, what, model, target, a, b, key, rng):
    sides = [one_side(s, f"{what} [{x}]", model, target, plan) for x, plan in (("A", a), ("B", b))]
    if None in sides:
        return
    (ga, ka, ta, da), (gb, kb, tb, db) = sides
    s.check(f"{what}: metadata {key} differs", ka["plan"].get(key) != kb["plan"].get(key),
            f"{ka['plan'].get(key)} vs {kb['plan'].get(key)}")
    s.check(f"{what}: the kernels' CUDA source differs", ta and tb and ta != tb)
    if model is LONGK:  # the flags / workspace are zeroed before every run (a single simulator run cannot show it)
        for g, k in ((ga, ka), (gb, kb)):
            kinds = {x["name"]: x["kind"] for x in g["kernels"]}
            seq = [kinds[x["kernel"]] for x in g["launches"] if x["region"] == model[2]]
            form = k["plan"].get("algo_choice.matmul")
            want = {"splitk_serial": ["zero", "mma_conv"], "splitk_parallel": ["zero", "mma_conv", "splitk_finish"],
                    None: ["mma_conv"]}.get(form)
            s.check(f"{what}: {form or 'unsplit'} launches {want}", seq == want, str(seq))
    for side, g, d in (("A", ga, da), ("B", gb, db)):
        simulate(s, f"{what} [{side}]", model, g, d, rng)
        ok, log = cuda_sim.nvrtc_ok(open(os.path.join(d, "model.cu")).read(), "sm_90a" if target == "sm90" else "sm_80")
        if ok is not None:
            s.check(f"{what} [{side}]: NVRTC {target}", ok, log[-800:])
    print(f"{what}: {key} {ka['plan'].get(key)} / {kb['plan'].get(key)}", flush=True)


def check_errors(s):
    """Plans the GPU cannot follow: located errors, no output."""
    cases = [
        # Winograd runs on the GPU (test_cuda_winograd.py), but not grouped
        ("winograd_3x3 grouped", GROUPED, f"split m 64; split n 64; split k 32; {TAIL} algo_choice conv winograd_3x3;",
         ["Unsupported", "region 'z'", "Winograd", "grouped"]),
        ("fft_conv", CONV, f"split m 64; split n 64; split k 32; {TAIL} algo_choice conv fft_conv;",
         ["fft_conv is not an algorithm of harp", "no target has"]),
        ("attention query tile 128", ATT, "split m 128; split n 64; split k 16; predicate_tail m.i.i n.i.i;",
         ["Unsupported", "region 'out_cast'", "query tile is 64 rows"]),
        ("attention 3 stages", ATT, "split m 64; split n 64; split k 16; pipeline k.i stages=3; predicate_tail m.i.i n.i.i;",
         ["Unsupported", "2-stage ring"]),
        ("conv splitk_reduce", LONGK, CONV_BASE + " algo_choice matmul splitk_reduce; splitk 4;",
         ["Unsupported", "region 'y'", "splitk_serial or splitk_parallel"]),
    ]
    for what, (path, syms, region), plan, want in cases:
        for target in ("sm80", "sm90"):
            p, d = dump(path, target, plan.replace("warp_tile 32x32; ", "") if target == "sm90" else plan, region, syms)
            s.check(f"{what} [{target}]: refused with a located error", p.returncode != 0 and
                    all(w in p.stderr for w in want), p.stderr[-600:])
            s.check(f"{what} [{target}]: no model.cu written", not os.path.exists(os.path.join(d, "model.cu")))


def check_defaults(s):
    """The default plans name kernels the GPU has, and the kernels follow them."""
    for target in ("sm80", "sm90"):
        for what, (path, syms, region), algo in (("conv 3x3 fp16", CONV, ("conv", "implicit_gemm")),
                                                  ("attention", ATT, ("attention", None))):
            p, d = dump(path, target, syms=syms)
            s.check(f"default {what} [{target}]: dump", p.returncode == 0, p.stderr)
            if p.returncode:
                continue
            e = region_entry(d, region)
            ac = e["plan"]["algo_choice"] if e else {}
            s.check(f"default {what} [{target}]: no winograd / fft, an algorithm the GPU has",
                    e is not None and "winograd" not in json.dumps(ac) and "fft" not in json.dumps(ac) and
                    (algo[1] is None or ac.get(algo[0]) == algo[1]), str(ac))
            s.check(f"default {what} [{target}]: applied by the kernel", e is not None and e.get("applied") is True,
                    str(e and e.get("note")))


def check_formation(s):
    """Region formation on the GPU costs fusions with the GPU's algorithms: an
    fp16 3x3 conv whose unrestricted default plan is Winograd (8 x 512 x 14 x
    14) is formed, planned and run as implicit GEMM, in region.json too."""
    f = os.path.join(tempfile.mkdtemp(), "wconv.harp")
    with open(f, "w") as fh:
        fh.write("graph main(x: f16[8, 512, 14, 14], w: f16[512, 512, 3, 3], b: f16[512]) -> (y: f16[8, 512, 14, 14]) {\n"
                 "    y = relu(conv2d(x, w, bias=b, pad=1))\n    return y\n}\n")
    for target in ("sm80", "sm90"):
        d = tempfile.mkdtemp()
        p = subprocess.run([HARP, "dump", f, "--dump", "region,plan", "--target", target, "--dump-dir", d],
                           capture_output=True, text=True, timeout=300)
        s.check(f"formation [{target}]: dump", p.returncode == 0, p.stderr)
        if p.returncode == 0:
            text = open(os.path.join(d, "region.json")).read() + open(os.path.join(d, "plan.json")).read()
            s.check(f"formation [{target}]: no Winograd in region.json / plan.json", "winograd" not in text and
                    "implicit_gemm" in text)


def main():
    warnings.simplefilter("ignore", RuntimeWarning)
    s = Suite("cuda_plan_fields")
    if not cuda_sim.have_gxx():
        print("g++ not found: skipped")
        sys.exit(77)
    rng = np.random.default_rng(27)
    only = os.environ.get("HARP_PLAN_FIELDS")  # a substring of the pair names (debugging)
    for what, model, target, a, b, key in PAIRS:
        if not only or only in what:
            check_pair(s, what, model, target, a, b, key, rng)
    check_errors(s)
    check_defaults(s)
    check_formation(s)
    s.close()


if __name__ == "__main__":
    main()
