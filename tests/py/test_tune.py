"""Plans in use (issue 5) through the CLI: `--plan` changes the generated
kernel and keeps the numbers, a bad plan gives a located error, `--dump plan`
round-trips through `--plan`, `harp tune` on a small GEMM writes the CSV log
and the plan cache, and `harp run` / `harp bench` then use the cached plan
(a corrupt cache entry is ignored with a note)."""
import csv
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from harp_test import HARP, SRC, Suite, close  # noqa: E402

GEMM = os.path.join(SRC, "bench", "models", "gemm.json")
GEMM_BR = os.path.join(SRC, "bench", "models", "gemm_bias_relu.json")
SYMS = ["--sym", "M=128", "--sym", "K=128", "--sym", "N=128"]

s = Suite("tune")
work = tempfile.mkdtemp(prefix="harp_tune_")
# a private cache: the plan cache must start empty (compiled objects too)
env = dict(os.environ, HARP_CACHE_DIR=os.path.join(work, "cache"))


def harp(*args, timeout=300):
    return subprocess.run([HARP, *args], capture_output=True, text=True, timeout=timeout, env=env)


def write(name, text):
    path = os.path.join(work, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def inputs(m, k, n, bias=False, seed=0):
    rng = np.random.default_rng(seed)
    arrs = {"A": rng.standard_normal((m, k), dtype=np.float32), "B": rng.standard_normal((k, n), dtype=np.float32)}
    if bias:
        arrs["bias"] = rng.standard_normal((n,), dtype=np.float32)
    args = []
    for name, a in arrs.items():
        p = os.path.join(work, f"in_{name}_{m}_{k}_{n}.npy")
        np.save(p, a)
        args += ["--input", f"{name}={p}"]
    return arrs, args


def plan_json(d):
    with open(os.path.join(d, "plan.json")) as f:
        return json.load(f)


# ---- --plan changes the kernel, not the numbers -----------------------------------------
PLAN = ("split m 96; split n 480; split k 128;\nwarp_tile 8x48;\nbind m.o block.y; bind n.o block.x;\n"
        "pipeline k.i stages=2;\nvectorize n.i.i 16;\npredicate_tail m.i.i n.i.i k.i.i;\n")
plan_file = write("c.plan", PLAN)
arrs, in_args = inputs(200, 160, 112, bias=True)
want = np.maximum(arrs["A"].astype(np.float64) @ arrs["B"] + arrs["bias"], 0)
outs = {}
for label, extra in (("default", []), ("override", ["--plan", f"C={plan_file}"])):
    d = os.path.join(work, f"run_{label}")
    p = harp("run", GEMM_BR, "--backend", "cpu", *in_args, "--out", d, "--dump", "c,plan", *extra)
    s.check(f"run with the {label} plan", p.returncode == 0, p.stderr)
    if p.returncode:
        continue
    outs[label] = np.load(os.path.join(d, "C.npy"))
    ok, det = close(outs[label], want)
    s.check(f"{label} plan: C = relu(A B + bias)", ok, det)
    src = open(os.path.join(d, "model.c")).read()
    pj = plan_json(d)["plans"]
    s.check(f"{label}: one region C, applied", len(pj) == 1 and pj[0]["region"] == "C" and pj[0]["applied"], pj)
    s.check(f"{label}: source", pj and pj[0]["source"] == label, pj)
    if label == "override":
        s.check("the override reaches the kernel", "-> mr 8 nr 48 mc 96 nc 480 kc 128 simd 16 prefetch 8" in src,
                [ln for ln in src.splitlines() if ln.startswith("   -> ")])
        s.check("the override in plan.json", pj[0]["plan"]["tile"] == [96, 480, 128] and pj[0]["plan"]["warp_tile"] == "8x48",
                pj[0]["plan"])
        s.check("epilogue filled from the region", pj[0]["plan"]["epilogue"] == ["bias", "relu"], pj[0]["plan"])
    else:
        s.check("the default reaches the kernel", "/* plan: split m " in src and "   -> mr " in src, "")
if len(outs) == 2:
    s.check("override and default agree", np.allclose(outs["default"], outs["override"], rtol=1e-4, atol=1e-4), "")

# the interpreter agrees with the overridden cpu kernel (the test suite's oracle)
d = os.path.join(work, "run_interp")
p = harp("run", GEMM_BR, "--backend", "interp", *in_args, "--out", d, "--plan", f"C={plan_file}", "--dump", "plan")
s.check("interp run with --plan and --dump plan", p.returncode == 0, p.stderr)
if p.returncode == 0 and "override" in outs:
    ok, det = close(outs["override"], np.load(os.path.join(d, "C.npy")))
    s.check("cpu (override) = interpreter", ok, det)
    pj = plan_json(d)["plans"]
    s.check("interp --dump plan: the override, no 'applied'", pj[0]["source"] == "override" and "applied" not in pj[0], pj)

# --dump plan feeds --plan FILE (a plan list)
if os.path.exists(os.path.join(work, "run_override", "plan.json")):
    lst = os.path.join(work, "run_override", "plan.json")
    d = os.path.join(work, "run_list")
    p = harp("run", GEMM_BR, "--backend", "cpu", *in_args, "--out", d, "--plan", lst, "--dump", "plan")
    s.check("--plan with a plan list", p.returncode == 0, p.stderr)
    if p.returncode == 0:
        pj = plan_json(d)["plans"]
        s.check("the list's plan is used", pj[0]["source"] == "override" and pj[0]["plan"]["tile"] == [96, 480, 128], pj)
    # harp dump --dump plan, same list
    d2 = os.path.join(work, "dump_list")
    p = harp("dump", GEMM_BR, "--sym", "M=200", "--sym", "K=160", "--sym", "N=112", "--plan", lst, "--dump", "plan",
             "--dump-dir", d2)
    s.check("harp dump --plan LIST --dump plan", p.returncode == 0 and plan_json(d2)["plans"][0]["source"] == "override",
            p.stderr)

# ---- bad plans: located errors ---------------------------------------------------------------
bad_cases = [
    ("b1.plan", "split m 64; split n 64; split k 64;\nfrobnicate m;\n", "C=", "ParseError", ":2:1:"),
    ("b2.plan", "split m 64; split n 64; split k 64;\nwarp_tile 4x16;\nvectorize n.i.i 16;\n", "C=", "InvalidArgument",
     ":1:7:"),  # 200 % 64: needs predicate_tail m.i.i
    ("b3.plan", "split m 40; split n 16; split k 32;\nwarp_tile 4x16; vectorize n.i.i 16;\nalgo_choice matmul splitk_serial;\n",
     "C=", "Unsupported", ":3:20:"),
    ("b4.json", '{"plans": [{"region": "C",\n  "plan": {"tile": [40, 16, 32],\n           "stages": 5}}]}', "",
     "InvalidArgument", ":3:22:"),
    ("b5.plan", "split m 40; split n 16; split k 32;\n", "nosuch=", "InvalidArgument", "region 'nosuch'"),
    ("b6.plan", "split m 40; split n 16; split k 32;\nwarp_tile 40x16;\nvectorize n.i.i 16;\n", "C=", "RegOverflow", ":2:11:"),
]
for name, text, prefix, err, where in bad_cases:
    path = write(name, text)
    p = harp("run", GEMM_BR, "--backend", "cpu", *in_args, "--out", os.path.join(work, "bad"), "--plan", prefix + path)
    ok = p.returncode == 1 and f"error[{err}]" in p.stderr and where in p.stderr
    if where.startswith(":"):
        ok = ok and f"{path}{where}" in p.stderr and "^" in p.stderr
    s.check(f"bad plan {name}", ok, p.stderr)

# ---- harp tune -----------------------------------------------------------------------------
log = os.path.join(work, "tune.csv")
p = harp("tune", GEMM, *SYMS, "--budget", "4", "--repeat", "3", "--warmup", "1", "--log", log, timeout=600)
s.check("harp tune runs", p.returncode == 0, p.stderr + p.stdout)
s.check("no progress line when stderr is not a terminal", "\r" not in p.stderr, repr(p.stderr[:200]))
s.check("summary: default, best, Spearman", "default" in p.stdout and "best" in p.stdout and "Spearman" in p.stdout,
        p.stdout)
rows = []
if os.path.exists(log):
    with open(log) as f:
        rd = csv.reader(f)
        header = next(rd)
        rows = list(rd)
    want_header = ["timestamp", "machine", "model", "shapeset", "binding", "region", "point", "default", "best", "FLOPs",
                   "Bytes", "occ", "estimate", "actual", "repeat", "plan"]
    s.check("CSV header", header == want_header, header)
s.check("one row per point", len(rows) == 4, rows)
best_plan = None
if len(rows) == 4:
    s.check("rows are whole", all(len(r) == 16 for r in rows), rows)
    s.check("one default (point 0), one best", [r[7] for r in rows].count("1") == 1 and rows[0][7] == "1"
            and [r[8] for r in rows].count("1") == 1, rows)
    s.check("FLOPs = 2 M N K", all(float(r[9]) == 2 * 128 ** 3 for r in rows), [r[9] for r in rows])
    s.check("estimates and medians positive", all(float(r[12]) > 0 and float(r[13]) > 0 for r in rows), rows)
    s.check("ShapeSet and binding", rows[0][3] == "K:128;M:128;N:128" and rows[0][4] == "K=128;M=128;N=128", rows[0])
    best = next(r for r in rows if r[8] == "1")
    dflt = rows[0]
    s.check("best median <= default median", float(best[13]) <= float(dflt[13]), (best[13], dflt[13]))
    s.check("plans in the log", all(r[15].startswith("split m ") for r in rows), [r[15] for r in rows])
    best_plan = best[15]
entries = glob.glob(os.path.join(env["HARP_CACHE_DIR"], "plans", "*.json"))
s.check("one plan cache entry", len(entries) == 1, entries)
entry = json.load(open(entries[0])) if len(entries) == 1 else {}
s.check("cache entry key", entry.get("region") == "C" and entry.get("shapeset") == "K:128;M:128;N:128", entry)

# a later run (and bench) uses the cached plan: --dump plan says so
garr, g_args = inputs(128, 128, 128, seed=3)
d = os.path.join(work, "run_cached")
p = harp("run", GEMM, "--backend", "cpu", *g_args, "--out", d, "--dump", "plan,c")
s.check("run after tune", p.returncode == 0, p.stderr)
if p.returncode == 0:
    pj = plan_json(d)["plans"]
    s.check("run --dump plan: the cached plan in use", pj[0]["source"] == "cache" and pj[0]["applied"], pj)
    s.check("... the tuned one", entry and pj[0]["plan"] == entry.get("plan"), (pj[0]["plan"], entry.get("plan")))
    ok, det = close(np.load(os.path.join(d, "C.npy")), garr["A"].astype(np.float64) @ garr["B"])
    s.check("cached plan: C = A B", ok, det)
# the same ShapeSet, another binding (100 rounds up to 128): the cache entry, re-targeted
d = os.path.join(work, "run_class")
arr2, a2 = inputs(100, 128, 120, seed=4)
p = harp("run", GEMM, "--backend", "cpu", *a2, "--out", d, "--dump", "plan")
if p.returncode == 0:
    pj = plan_json(d)["plans"]
    s.check("same ShapeSet, other sizes: cache", pj[0]["source"] == "cache" and plan_json(d)["shapeset"] == "K:128;M:128;N:128",
            pj)
    ok, det = close(np.load(os.path.join(d, "C.npy")), arr2["A"].astype(np.float64) @ arr2["B"])
    s.check("re-targeted plan: C = A B", ok, det)
else:
    s.check("run in the same ShapeSet", False, p.stderr)
# another ShapeSet: the default
p = harp("dump", GEMM, "--sym", "M=512", "--sym", "K=128", "--sym", "N=128", "--dump", "plan", "--dump-dir",
         os.path.join(work, "dump_other"))
s.check("another ShapeSet: default", p.returncode == 0 and plan_json(os.path.join(work, "dump_other"))["plans"][0]["source"]
        == "default", p.stderr)
d = os.path.join(work, "bench_cached")
p = harp("bench", GEMM, *SYMS, "--repeat", "2", "--warmup", "0", "--dump", "plan", "--dump-dir", d)
s.check("bench --dump plan: cache", p.returncode == 0 and plan_json(d)["plans"][0]["source"] == "cache", p.stderr)
# --plan wins over the cache
d = os.path.join(work, "run_over_cache")
p = harp("run", GEMM, *SYMS, "--random-inputs", "--out", d, "--dump", "plan",
         "--plan", f"C={write('o.plan', 'split m 64; split n 64; split k 64; vectorize n.i.i 16')}")
s.check("--plan over the cache", p.returncode == 0 and plan_json(d)["plans"][0]["source"] == "override", p.stderr)

# a corrupt entry: ignored with a note, the default used
if entries:
    with open(entries[0], "w") as f:
        f.write('{"harp_plan_cache": 1, "model": ')
    d = os.path.join(work, "run_corrupt")
    p = harp("run", GEMM, "--backend", "cpu", *g_args, "--out", d, "--dump", "plan")
    s.check("corrupt cache entry: the run works", p.returncode == 0, p.stderr)
    s.check("... with a note", "note" in p.stderr and "ignored" in p.stderr, p.stderr)
    if p.returncode == 0:
        pj = plan_json(d)["plans"]
        s.check("... and the default plan", pj[0]["source"] == "default" and "ignored" in pj[0].get("note", ""), pj)

# usage errors
p = harp("tune", GEMM, *SYMS, "--budget", "0")
s.check("--budget 0 is a usage error", p.returncode == 1 and "UsageError" in p.stderr, p.stderr)
p = harp("tune", GEMM, *SYMS, "--backend", "interp")
s.check("tune --backend interp", p.returncode == 1 and "cannot be tuned" in p.stderr, p.stderr)
p = harp("tune", GEMM, *SYMS, "--region", "nope", "--budget", "2", "--repeat", "1", "--no-store", "--log", log)
s.check("tune --region of no region", p.returncode == 1 and "nope" in p.stderr, p.stderr)

shutil.rmtree(work, ignore_errors=True)
s.close()
