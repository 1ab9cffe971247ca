"""Split-K and persistent CTAs on the GPU without a GPU (issue 9): a skinny fp16 GEMM (M = N = 64,
K = 4096) with a bias + GELU epilogue and an fp16 output, through every
split-K form the Plan can choose — splitk_serial (slices add up in order
behind per-tile flags), splitk_parallel (fp32 atomics into a zeroed
workspace, then the finishing pass) and splitk_reduce (per-slice partials,
summed in slice order by the finishing pass) — for sm80 and sm90:

  * the launch list (zero / GEMM / finish) and the GEMM's split-K metadata;
  * every launch on the SIMT simulator vs the reference interpreter at
    rtol = atol = 1e-3;
  * NVRTC for sm_80 / sm_90a, with red.global.add.f32 (parallel),
    ld.acquire.gpu / st.release.gpu (serial) in the GEMM's PTX;
  * the cost model's choice: split-K for the skinny GEMM, none for an
    ordinary one (--dump plan, --dump gpu); persistent CTAs for an SM90 GEMM
    of many tiles (grid 132 = CUDA_DEFAULT_SMS without a device), one CTA
    per tile for a small one, which also runs right with fewer CTAs than
    tiles (each walks several);
  * an invalid factor (0, more slices than K tiles, no split-K algorithm)
    is a located error, not a crash;
  * CTAs run last to first: splitk_reduce gives the same bits
    (deterministic), splitk_parallel the same up to rounding (atomics add in
    arrival order), and the serial form's waits show (the simulator reports
    the deadlock);
  * the checks can fail: without its zero launch the parallel form reads
    poison.
On a GPU every form also runs there (sm90 on Hopper) against the
interpreter.  Skips (77) without g++."""
import json
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np

import cuda_sim
from harp_test import HARP, MODELS, Suite, close, run

SKINNY = os.path.join(cuda_sim.GPU_MODELS, "gemm_skinny.harp")
TILES = {"sm80": "split m 64; split n 64; split k 64; warp_tile 32x32;",
         "sm90": "split m 128; split n 64; split k 64; warp_tile 64x64; predicate_tail m.i.i;"}
PTX_NEED = {"splitk_parallel": ["red.global.add.f32"], "splitk_serial": ["ld.acquire.gpu", "st.release.gpu"],
            "splitk_reduce": ["st.global.b32"]}


def plan_file(text):
    f = tempfile.NamedTemporaryFile("w", suffix=".plan", delete=False)
    f.write(text)
    f.close()
    return f.name


def dump(model, target, what, plan=None, syms=()):
    d = tempfile.mkdtemp(prefix="harp_splitk_")
    args = [HARP, "dump", model, "--dump", what, "--target", target, "--dump-dir", d]
    if plan:
        args += ["--plan", plan]
    for x in syms:
        args += ["--sym", x]
    return subprocess.run(args, capture_output=True, text=True, timeout=300), d


def gpu_check(s, what, model, plan, feeds, target):
    """The form on the GPU vs the interpreter.  K = 4096 sums of the
    simulator's feeds reach |c| ~ 4, where a one-ulp flip of the fp16 product
    (split-K adds in another order) grows to two ulps through GELU, over
    rtol = 1e-3: a is scaled down to keep the chain O(1), the policy of
    cuda_sim.feeds_of."""
    gf = dict(feeds)
    gf["a"] = (feeds["a"] * 0.25).astype(feeds["a"].dtype)
    q, e = run(model, gf, backend="interp")
    r, o = run(model, gf, backend="cuda", extra=["--target", target, "--plan", f"c={plan}"])
    s.check(f"{what}: runs on the GPU", r.returncode == 0 and q.returncode == 0, r.stderr + q.stderr)
    if r.returncode == 0 and q.returncode == 0:
        s.check(f"{what}: GPU c vs interpreter", *close(np.load(os.path.join(o, "c.npy")), np.load(os.path.join(e, "c.npy"))))


def main():
    warnings.simplefilter("ignore", RuntimeWarning)
    s = Suite("cuda_splitk")
    if not cuda_sim.have_gxx():
        print("g++ not found: skipped")
        sys.exit(77)
    rng = np.random.default_rng(9)
    want = None
    # on a GPU each form also runs for real (sm90 on Hopper only)
    gpu_targets = []
    for target in ("sm80", "sm90"):
        p = subprocess.run([HARP, "run", SKINNY, "--random-inputs", "--backend", "cuda", "--target", target, "--out",
                            tempfile.mkdtemp()], capture_output=True, text=True, timeout=300)
        if p.returncode == 0:
            gpu_targets.append(target)
    print(f"GPU targets: {gpu_targets or 'none (no GPU)'}", flush=True)
    for target in ("sm80", "sm90"):
        for algo, slices in (("splitk_serial", 4), ("splitk_parallel", 4), ("splitk_reduce", 8)):
            what = f"{algo} x{slices} [{target}]"
            plan = plan_file(f"{TILES[target]}\nalgo_choice matmul {algo};\nsplitk {slices};\n")
            p, d = dump(SKINNY, target, "gpu,cu", f"c={plan}")
            s.check(f"{what}: harp dump --plan", p.returncode == 0, p.stderr)
            if p.returncode:
                continue
            g = json.load(open(os.path.join(d, "gpu.json")))["gpu"]
            kinds = {k["name"]: k for k in g["kernels"]}
            launched = [kinds[l["kernel"]]["kind"] for l in g["launches"]]
            expect = {"splitk_serial": ["zero", "mma_gemm"], "splitk_parallel": ["zero", None, "splitk_finish"],
                      "splitk_reduce": [None, "splitk_finish"]}[algo]
            s.check(f"{what}: launches {expect}", len(launched) == len(expect) and
                    all(w is None or w == k for w, k in zip(expect, launched)), str(launched))
            gemm = [k for k in g["kernels"] if k["kind"] in ("mma_gemm", "wgmma_gemm")]
            s.check(f"{what}: one GEMM kernel", len(gemm) == 1, str(list(kinds)))
            if not gemm:
                continue
            gp = gemm[0]["plan"]
            s.check(f"{what}: GEMM split {slices} ways as {algo}",
                    gp.get("splitk") == slices and gp.get("algo_choice.matmul") == algo, str(gp))
            if target == "sm90" and algo != "splitk_serial":
                s.check(f"{what}: on the TMA/wgmma template", gemm[0]["kind"] == "wgmma_gemm", gemm[0]["kind"])
            feeds = cuda_sim.feeds_of(g, rng)
            got, err = cuda_sim.run(d, feeds)
            s.check(f"{what}: runs on the simulator", err is None, err)
            if err:
                continue
            q, e = run(SKINNY, feeds, backend="interp")
            s.check(f"{what}: interpreter", q.returncode == 0, q.stderr)
            want = np.load(os.path.join(e, "c.npy"))
            s.check(f"{what}: c vs interpreter", *close(got["c"], want))
            if target in gpu_targets:
                gpu_check(s, what, SKINNY, plan, feeds, target)
            ok, log, ptx = cuda_sim.nvrtc_ok(open(os.path.join(d, "model.cu")).read(),
                                             "sm_90a" if target == "sm90" else "sm_80", want_ptx=True)
            if ok is not None:
                s.check(f"{what}: NVRTC", ok, log)
                t = cuda_sim.ptx_entry(ptx, gemm[0]["name"]) or ""
                for need in PTX_NEED[algo]:
                    s.check(f"{what}: GEMM PTX has {need}", need in t)
            if target == "sm80":
                # CTAs last to first: the parallel forms do not care; the
                # serial form's last slice waits for a flag no earlier slice
                # has set yet (on a GPU it would wait for it; the simulator
                # runs one CTA at a time, so the wait shows as a deadlock)
                rev, err = cuda_sim.run(d, feeds, reverse=True)
                if algo == "splitk_serial":
                    s.check("serial, CTAs in reverse: slices wait on their flags", err is not None and
                            "deadlock" in err, str(err))
                elif algo == "splitk_reduce":  # a fixed summation order: the same bits
                    s.check(f"{what}, CTAs in reverse: bit-identical", err is None and
                            np.array_equal(rev["c"], got["c"]), str(err))
                else:  # atomics add in arrival order: equal up to rounding
                    s.check(f"{what}, CTAs in reverse: vs interpreter", err is None and close(rev["c"], want)[0], str(err))
            if target == "sm80" and algo == "splitk_parallel":
                # can fail: without its zero launch the workspace holds poison
                bad, err = cuda_sim.run(d, feeds, edit=lambda g: g["launches"].pop(0))
                s.check("parallel without a zeroed workspace: wrong output",
                        err is None and not close(bad["c"], want)[0], str(err))
            print(f"{what}: {launched}", flush=True)

    # an epilogue that multiplies by a tensor and adds a constant, through every
    # split-K form: it runs once on the whole sum (the serial form's last slice,
    # the parallel forms' finishing pass), so the GEMM kernel of the parallel
    # forms has no epilogue parameters
    scaled = os.path.join(cuda_sim.GPU_MODELS, "gemm_skinny_scale.harp")
    for target in ("sm80", "sm90"):
        for algo in ("splitk_serial", "splitk_parallel", "splitk_reduce"):
            what = f"x s + 0.5, {algo} [{target}]"
            plan = plan_file(f"{TILES[target]}\nalgo_choice matmul {algo};\nsplitk 4;\n")
            p, d = dump(scaled, target, "gpu,cu", f"c={plan}")
            s.check(f"{what}: harp dump --plan", p.returncode == 0, p.stderr)
            if p.returncode:
                continue
            g = json.load(open(os.path.join(d, "gpu.json")))["gpu"]
            kinds = {k["name"]: k for k in g["kernels"]}
            gemm = [k for k in g["kernels"] if k["kind"] in ("mma_gemm", "wgmma_gemm")]
            others = [k["kind"] for k in g["kernels"] if k["kind"] not in ("mma_gemm", "wgmma_gemm", "zero", "splitk_finish")]
            s.check(f"{what}: one GEMM kernel, split 4 ways, the epilogue not split off",
                    len(gemm) == 1 and gemm[0]["plan"].get("splitk") == 4 and not others,
                    str([(k["kind"], k["plan"]) for k in g["kernels"]]))
            if algo != "splitk_serial":
                s.check(f"{what}: the finishing pass holds the epilogue",
                        [k["kind"] for k in g["kernels"]].count("splitk_finish") == 1 and gemm and
                        not [x for x in gemm[0]["params"] if x["name"].startswith("ep")], str(list(kinds)))
            feeds = cuda_sim.feeds_of(g, rng)
            got, err = cuda_sim.run(d, feeds)
            s.check(f"{what}: runs on the simulator", err is None, err)
            if err:
                continue
            q, e = run(scaled, feeds, backend="interp")
            s.check(f"{what}: c vs interpreter", q.returncode == 0 and close(got["c"], np.load(os.path.join(e, "c.npy")))[0],
                    q.stderr or close(got["c"], np.load(os.path.join(e, "c.npy")))[1])
            if target in gpu_targets:
                gpu_check(s, what, scaled, plan, feeds, target)
            print(f"{what}: {[k['kind'] for k in g['kernels']]}", flush=True)

    # the cost model's choice: split-K for the skinny GEMM, none for an ordinary one
    for target in ("sm80", "sm90"):
        p, d = dump(SKINNY, target, "plan,gpu")
        s.check(f"skinny default [{target}]: dump", p.returncode == 0, p.stderr)
        if p.returncode == 0:
            pl = json.load(open(os.path.join(d, "plan.json")))["plans"][0]["plan"]
            algo = pl.get("algo_choice", {}).get("matmul", "")
            s.check(f"skinny default [{target}]: the plan splits K", algo.startswith("splitk_"), str(pl))
            g = json.load(open(os.path.join(d, "gpu.json")))["gpu"]
            sk = [k["plan"].get("splitk", 1) for k in g["kernels"] if k["kind"] in ("mma_gemm", "wgmma_gemm")]
            s.check(f"skinny default [{target}]: the GEMM kernel splits K", sk and sk[0] > 1, str(sk))
        p, d = dump(os.path.join(MODELS, "seed000_gemm_bias_relu.json"), target, "plan,gpu", None,
                    ("M=2048", "N=2048", "K=1024"))
        s.check(f"square default [{target}]: dump", p.returncode == 0, p.stderr)
        if p.returncode == 0:
            pl = json.load(open(os.path.join(d, "plan.json")))["plans"]
            algos = [x["plan"].get("algo_choice", {}).get("matmul", "") for x in pl if x.get("plan")]
            s.check(f"square default [{target}]: no split-K", algos and not any(a.startswith("splitk") for a in algos),
                    str(algos))
            g = json.load(open(os.path.join(d, "gpu.json")))["gpu"]
            s.check(f"square default [{target}]: no split-K kernels",
                    not [k for k in g["kernels"] if k["kind"] in ("zero", "splitk_finish") or k["plan"].get("splitk", 1) > 1],
                    str([k["kind"] for k in g["kernels"]]))

    # persistent CTAs (SM90): many tiles -> one wave of CTAs walking the tile queue
    gemm = os.path.join(MODELS, "seed000_gemm_bias_relu.json")
    p, d = dump(gemm, "sm90", "gpu", None, ("M=4096", "N=4096", "K=64"))
    s.check("persistent: dump", p.returncode == 0, p.stderr)
    if p.returncode == 0:
        k = [k for k in json.load(open(os.path.join(d, "gpu.json")))["gpu"]["kernels"] if k["kind"] == "wgmma_gemm"]
        s.check("persistent: 1024 tiles on 132 CTAs (the default SM count)",
                k and k[0].get("persistent_tiles") == 1024 and k[0]["grid"][0] == 132, str(k and k[0]["grid"]))
    p, d = dump(gemm, "sm90", "gpu,cu", None, ("M=256", "N=384", "K=64"))
    s.check("few tiles: dump", p.returncode == 0, p.stderr)
    if p.returncode == 0:
        g = json.load(open(os.path.join(d, "gpu.json")))["gpu"]
        k = [k for k in g["kernels"] if k["kind"] == "wgmma_gemm"]
        s.check("few tiles: one CTA per tile", k and "persistent_tiles" not in k[0] and k[0]["grid"][0] == 6,
                str(k and k[0]["grid"]))
        if k:
            feeds = cuda_sim.feeds_of(g, rng)
            q, e = run(gemm, feeds, ("M=256", "N=384", "K=64"), backend="interp")
            want = np.load(os.path.join(e, "C2.npy"))
            for ctas in (1, 4):  # fewer CTAs than tiles: each walks several
                def shrink(g, n=ctas):
                    for x in g["kernels"]:
                        if x["kind"] == "wgmma_gemm":
                            x["grid"][0] = n
                got, err = cuda_sim.run(d, feeds, edit=shrink)
                s.check(f"{ctas} CTAs for 6 tiles: vs interpreter", err is None and close(got["C2"], want)[0], str(err))

    # invalid factors: located errors (file:line:col), exit 1, no crash
    bad = [("splitk 0", f"{TILES['sm80']}\nalgo_choice matmul splitk_parallel;\nsplitk 0;\n", "3:8"),
           ("splitk 8 > 4 K tiles", "split m 64; split n 64; split k 1024; warp_tile 32x32;\n"
            "algo_choice matmul splitk_reduce;\nsplitk 8;\n", "3:8"),
           ("splitk without splitk_*", f"{TILES['sm80']}\nsplitk 2;\n", "2:8")]
    for what, text, pos in bad:
        plan = plan_file(text)
        p, _ = dump(SKINNY, "sm80", "gpu", f"c={plan}")
        s.check(f"{what}: exit 1", p.returncode == 1, p.returncode)
        s.check(f"{what}: located error", f"{plan}:{pos}" in p.stderr and "error[" in p.stderr, p.stderr)
    jplan = plan_file('{"tile":[64,64,64],"warp_tile":"32x32","algo_choice":{"matmul":"splitk_serial"},"splitk":0}')
    p, _ = dump(SKINNY, "sm80", "gpu", f"c={jplan}")
    s.check("JSON splitk 0: located error", p.returncode == 1 and f"{jplan}:" in p.stderr, p.stderr)
    s.close()


main()
