"""One compile pipeline (issue 32): what the dumps, `harp viz --stage
region` and `harp run --backend regions` describe is the partition the
backend compiles.  For fp16 models (where the CPU backend keeps CASTs of
outside tensors as regions of their own, rg_options.no_operand_casts) the
region dump of `harp dump`, of `harp run --backend cpu`, the Function and
plan dumps, the viz clusters and the regions backend's count all name the
kernels the generated C runs, in order; on sm80 the region dump names the
regions of gpu.json's launches.  Before the pipeline the dump path formed
regions with other options: transformer_block_fp16's region.json had 11
regions where the C ran 15 kernels."""
import json
import os
import re
import subprocess
import tempfile

from harp_test import HARP, MODELS, Suite

s = Suite("pipeline_dumps")

CASES = [
    (os.path.join(MODELS, "gpu", "transformer_block_fp16.harp"), []),
    (os.path.join(MODELS, "conv3x3_bias_silu_fp16.json"), ["N=1", "C=8", "H=10", "W=10", "O=16", "X=1"]),
    (os.path.join(MODELS, "layernorm_fp16.json"), ["R=24"]),
    (os.path.join(MODELS, "attention_full_fp16.json"), ["B=2", "H=2", "M=16", "N=16", "D=16", "Dv=16"]),
]


def harp(*args):
    return subprocess.run([HARP, *args], capture_output=True, text=True, timeout=600)


def symargs(syms):
    out = []
    for x in syms:
        out += ["--sym", x]
    return out


def load(path):
    with open(path) as f:
        return json.load(f)


def regions_of(d):
    return [r["name"] for r in load(os.path.join(d, "region.json"))["regions"]]


for model, syms in CASES:
    name = os.path.basename(model)
    d = tempfile.mkdtemp(prefix="harp_pd_")
    p = harp("run", model, "--random-inputs", "--backend", "cpu", *symargs(syms), "--dump", "region,function,plan,c",
             "--dump-dir", d, "--out", os.path.join(d, "o"))
    s.check(f"{name}: runs on cpu", p.returncode == 0, p.stderr[-800:])
    if p.returncode:
        continue
    regions = regions_of(d)
    with open(os.path.join(d, "model.c")) as f:
        kernels = re.findall(r"case \d+: \{ /\* (\S+) \*/", f.read())
    s.check(f"{name}: region.json names the kernels the C runs, in order", regions == kernels,
            f"{len(regions)} regions {regions} vs {len(kernels)} kernels {kernels}")
    fn = load(os.path.join(d, "function.json"))["function"]
    s.check(f"{name}: function.json's kernels are those regions", [k["name"] for k in fn["kernels"]] == kernels,
            [k["name"] for k in fn["kernels"]])
    plans = load(os.path.join(d, "plan.json"))["plans"]
    s.check(f"{name}: plan.json has a plan entry per region", [x["region"] for x in plans] == regions,
            [x["region"] for x in plans])
    # harp dump describes the same partition without running
    d2 = tempfile.mkdtemp(prefix="harp_pd_")
    q = harp("dump", model, *symargs(syms), "--dump", "region,function", "--dump-dir", d2)
    s.check(f"{name}: harp dump runs", q.returncode == 0, q.stderr[-800:])
    if q.returncode == 0:
        s.check(f"{name}: harp dump's region.json is the run's", load(os.path.join(d2, "region.json")) ==
                load(os.path.join(d, "region.json")), regions_of(d2))
        s.check(f"{name}: harp dump's function.json is the run's", load(os.path.join(d2, "function.json")) == {"function": fn})
    # viz draws one cluster per compiled region
    dot = os.path.join(d, "r.dot")
    v = harp("viz", model, *symargs(syms), "--stage", "region", "-o", dot)
    s.check(f"{name}: viz runs", v.returncode == 0, v.stderr[-800:])
    if v.returncode == 0:
        with open(dot) as f:
            text = f.read()
        s.check(f"{name}: viz draws one cluster per region", text.count("subgraph cluster_") == len(kernels),
                f"{text.count('subgraph cluster_')} clusters, {len(kernels)} kernels")
    # the regions backend plays back that partition
    r = harp("run", model, "--random-inputs", "--backend", "regions", *symargs(syms), "--out", os.path.join(d, "r"))
    s.check(f"{name}: --backend regions runs", r.returncode == 0, r.stderr[-800:])
    m = re.search(r"harp: (\d+) regions", r.stderr)
    s.check(f"{name}: --backend regions plays back the {len(kernels)} regions compiled", m and int(m.group(1)) == len(kernels),
            r.stderr[-300:])
    # sm80: region.json names the regions the launches run
    d3 = tempfile.mkdtemp(prefix="harp_pd_")
    g = harp("dump", model, *symargs(syms), "--target", "sm80", "--dump", "region,gpu", "--dump-dir", d3)
    s.check(f"{name}: sm80 dump runs", g.returncode == 0, g.stderr[-800:])
    if g.returncode == 0:
        gregions = regions_of(d3)
        gj = load(os.path.join(d3, "gpu.json"))["gpu"]
        ran = {la["region"] for la in gj["launches"]}
        s.check(f"{name}: sm80 region.json names the regions launched (and the dead ones)",
                ran <= set(gregions) and len(ran) + gj["dead_regions"] == len(gregions),
                f"{gregions} vs {sorted(ran)} + {gj['dead_regions']} dead")

s.close()
