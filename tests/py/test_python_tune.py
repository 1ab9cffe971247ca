#!/usr/bin/env python3
"""test_python_tune.py — harp.tune() (harp_tune): the report of every
point, the plan cache and the CSV log written (or not, store=False), the
progress events in order, a stop from the callback (harp.Cancelled, no
plan stored), the callback's own exception passed through, bad settings,
and a model compiled after tuning (its tuned plan) against numpy."""
import csv
import os
import tempfile

from harp_py import Suite, harp, np
from onnx import TensorProto, helper, numpy_helper
import onnx

s = Suite("python_tune")
rng = np.random.default_rng(7)
D = tempfile.mkdtemp()
W = rng.standard_normal((96, 80)).astype(np.float32)


def save_matmul():
    """y = relu(x[48, 96] . W): one GEMM region with a plan to tune."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [48, 96])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [48, 80])
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["t"]), helper.make_node("Relu", ["t"], ["y"])], "mm",
                          [x], [y], [numpy_helper.from_array(W, "w")])
    path = os.path.join(D, "mm.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def plans_in(cache):
    d = os.path.join(cache, "plans")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


MODEL = save_matmul()
FAST = dict(budget=3, repeat=2, warmup=0, progress=False)

# 1. a stored tuning: the report, the plan cache, the log
cache = tempfile.mkdtemp()
events = []
rep = harp.tune(MODEL, options={"cache_dir": cache}, callback=lambda *a: events.append(a) and False, **FAST)
regs = rep.get("regions", [])
s.check("one region tuned", len(regs) == 1, repr(rep)[:300])
pts = regs[0]["points"] if regs else []
s.check("budget points measured", len(pts) == 3, f"{len(pts)} points")
s.check("every point timed", all(p["median_ms"] > 0 and p["min_ms"] > 0 for p in pts), repr(pts)[:300])
s.check("every point's plan is a plan.json object", all(isinstance(p["plan"], dict) and "tile" in p["plan"] for p in pts))
# distinct points: the CPU space varies the tile and the micro-tile (search.c), so two of the
# best may share a tile at different warp tiles
s.check("the points' tiles differ", len({(tuple(p["plan"]["tile"]), str(p["plan"].get("warp_tile"))) for p in pts}) == len(pts),
        repr([(p["plan"]["tile"], p["plan"].get("warp_tile")) for p in pts]))
if regs:
    r = regs[0]
    best = min(range(len(pts)), key=lambda i: pts[i]["median_ms"])
    s.check("best is the smallest median", r["best"] == best and abs(r["best_ms"] - pts[best]["median_ms"]) < 1e-12,
            f"{r['best']} vs {best}")
    s.check("speedup is default / best", abs(r["speedup"] - pts[0]["median_ms"] / pts[best]["median_ms"]) < 1e-9)
    s.check("the plan is cached", r["cached"] is not None and os.path.isfile(r["cached"]), str(r["cached"]))
with open(rep["log"]) as f:
    rows = list(csv.DictReader(f))
s.check("the log has one row per point", len(rows) == 3 and rep["rows"] == 3, f"{len(rows)} rows")
s.check("the log names the region", all(row["region"] == regs[0]["region"] for row in rows) if regs else False)

# progress: compile events 0..3, then rounds 1..2, then done, one region
phases = [e[3] for e in events]
s.check("progress: compile, measure, done in order",
        phases == ["compile"] * 4 + ["measure"] * 2 + ["done"], repr(phases))
s.check("progress: counts", [e[4] for e in events] == [0, 1, 2, 3, 1, 2, 3] and all(e[1:3] == (0, 1) for e in events),
        repr(events))

# 2. the tuned plan in a later compile: the numbers are numpy's
x = rng.standard_normal((48, 96)).astype(np.float32)
with harp.InferenceSession(MODEL, {"cache_dir": cache}) as sess:
    y, = sess.run(None, {"x": x})
want = np.maximum(x @ W, 0)
s.check("after tuning: matches numpy", np.allclose(y, want, rtol=1e-4, atol=1e-4), f"max diff {np.abs(y - want).max()}")

# 3. store=False: measured and logged, nothing cached
c2 = tempfile.mkdtemp()
rep2 = harp.tune(MODEL, options={"cache_dir": c2}, store=False, **FAST)
s.check("store=False: nothing cached", plans_in(c2) == [] and rep2["regions"][0]["cached"] is None, repr(plans_in(c2)))
s.check("store=False: still logged", rep2["rows"] == 3 and os.path.isfile(rep2["log"]))

# 4. a stop from the callback, and the callback's own exception
c3 = tempfile.mkdtemp()
try:
    harp.tune(MODEL, options={"cache_dir": c3}, callback=lambda *a: a[3] == "measure", **FAST)
    s.check("a stop raises Cancelled", False, "no exception")
except harp.HarpError as ex:
    s.check("a stop raises Cancelled", type(ex).__name__ == "Cancelled", f"{type(ex).__name__}: {ex}")
s.check("a stop stores no plan", plans_in(c3) == [], repr(plans_in(c3)))


def boom(*a):
    raise ValueError("from the callback")


try:
    harp.tune(MODEL, options={"cache_dir": c3}, callback=boom, **FAST)
    s.check("the callback's exception comes through", False, "no exception")
except ValueError as ex:
    s.check("the callback's exception comes through", "from the callback" in str(ex), str(ex))

# 5. bad settings
for what, kw, cls in [("budget 0", dict(budget=0), "UsageError"), ("budget 21", dict(budget=21), "UsageError"),
                      ("an unknown region", dict(regions=["no_such_region"]), "UsageError")]:
    args = dict(FAST, **kw)
    try:
        harp.tune(MODEL, options={"cache_dir": c3}, **args)
        s.check(f"bad setting: {what}", False, "no exception")
    except harp.HarpError as ex:
        s.check(f"bad setting: {what}", type(ex).__name__ == cls, f"{type(ex).__name__}: {ex}")

# 6. one thread pool alive at a time (issue 27): each sample has a fresh
# instance, freed after it, so while the points are measured the process has
# no more threads than before the first point's compile (with every point's
# instance kept, each added a worker: bimodal per-point figures)
def threads():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Threads:"))


if os.path.exists("/proc/self/status"):
    seen = {}

    def count(region, index, nregions, phase, done, total, best):
        if phase == "compile" and done == 0:
            seen.setdefault("before", threads())
        if phase == "measure":
            seen["measure"] = max(seen.get("measure", 0), threads())
        return False

    old = os.environ.get("HARP_NUM_THREADS")
    os.environ["HARP_NUM_THREADS"] = "2"  # a worker per pool
    try:
        harp.tune(MODEL, options={"cache_dir": c3}, store=False, callback=count, **FAST)
    finally:
        if old is None:
            del os.environ["HARP_NUM_THREADS"]
        else:
            os.environ["HARP_NUM_THREADS"] = old
    s.check("no thread pool alive between samples", "measure" in seen and seen["measure"] <= seen["before"],
            repr(seen))

s.close()
