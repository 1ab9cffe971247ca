"""ONNX control flow (docs/onnx.md, "Control flow"): If, Loop and Scan
models built here with onnx.helper, run through `harp run` on the
interpreter and the cpu backend and compared with onnxruntime.

- folded at import: an If whose condition is a constant (an initializer, a
  --param input), a Loop of a small constant trip count (its iteration
  number a constant: a Slice by it), a Scan of a known length; `--dump
  flow` says there is no host program;
- on the host: an If on a graph input (branches reading outer values,
  branches of different output shapes, an If nested in a branch), a Loop on
  a run-time trip count and on a condition the body computes (a while
  loop), a loop-carried value that grows, a Scan too long to unroll or of a
  symbolic length, with input / output axes and directions, a Loop inside
  an If and an If inside a Loop body;
- bad input, each a clear error naming the node and nothing written: If
  branches that disagree (output count, element type, rank), a Loop that
  never ends (--loop-limit), a body reading a value nobody defines, a
  command that needs one static graph;
- `harp bench` on a host program.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import harp_test as ht  # noqa: E402

ht.onnx_or_skip()
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402
import flow_models as fm  # noqa: E402
from flow_models import B, I64, graph, model, vr  # noqa: E402
from onnx_models import init, mk, vi  # noqa: E402

ht.compiled_only()  # the cpu rows (the folded If / Loop) check the compiled C, not tier 0 (harp_test.compiled_only)
S = ht.Suite("onnx_flow")
D = ht.tempfile.mkdtemp()
def save(m, name):
    p = os.path.join(D, name + ".onnx")
    with open(p, "wb") as f:
        f.write(m.SerializeToString())
    return p


def reference(m, feeds):
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def harp(path, feeds, backend, params=(), extra=()):
    out = os.path.join(D, f"out_{os.path.basename(path)}_{backend}_{len(os.listdir(D))}")
    os.makedirs(out)
    args = [ht.HARP, "run", path, "--backend", backend, "--out", out, *extra]
    for k, a in feeds.items():
        p = os.path.join(out, f"in_{k}.npy")
        np.save(p, a)
        args += ["--param" if k in params else "--input", f"{k}={p}"]
    return ht.subprocess.run(args, capture_output=True, text=True, timeout=600), out


def check(name, m, feeds, params=(), host=True, backends=tuple(ht.BACKENDS), extra=()):
    """harp's outputs on each backend against onnxruntime's; `host`: whether
    the model must run as a host program (--dump flow says which; None:
    either)."""
    path = save(m, name)
    want = reference(m, feeds)
    for b in backends:
        p, out = harp(path, feeds, b, params, ["--dump", "flow", *extra])
        if not S.check(f"{name} ({b}): runs", p.returncode == 0, p.stderr.strip()[-800:]) and p.returncode:
            continue
        flow = open(os.path.join(out, "flow.txt")).read()
        if host is not None:
            S.check(f"{name} ({b}): {'a host program' if host else 'folded at import'}", ("no host program" not in flow) == host,
                    flow[:300])
        for o, w in zip(m.graph.output, want):
            got = np.load(os.path.join(out, o.name + ".npy"))
            w = np.asarray(w)
            ok = got.shape == w.shape and np.allclose(got.astype(np.float64), w.astype(np.float64), rtol=1e-5, atol=1e-5)
            S.check(f"{name} ({b}): output {o.name} matches onnxruntime", ok, f"got {got.shape} {got.ravel()[:8]}, want {w.shape} "
                    f"{w.ravel()[:8]}")


def refused(name, m, feeds, code, needles, extra=(), command="run"):
    """A clear error (exit 1, error[code], each needle in the message), nothing written."""
    path = save(m, name)
    out = os.path.join(D, f"out_{name}")
    if command == "run":
        p, out = harp(path, feeds, "interp", (), extra)
    else:
        p = ht.subprocess.run([ht.HARP, command, path, "-o", out, *extra], capture_output=True, text=True, timeout=300)
    err = p.stderr.strip()
    made = [f for f in os.listdir(out) if not f.startswith("in_")] if os.path.isdir(out) else []
    S.check(f"{name}: refused with error[{code}]", p.returncode == 1 and f"error[{code}]" in err and not made,
            f"rc={p.returncode} made={made} {err[-600:]}")
    for n in needles:
        S.check(f"{name}: the message names {n!r}", n in err, err[-600:])


rng = np.random.default_rng(7)
x3 = rng.standard_normal(3).astype(np.float32)
x23 = rng.standard_normal((2, 3)).astype(np.float32)
xs40 = rng.standard_normal((40, 3)).astype(np.float32)

# ---- If ------------------------------------------------------------------------------------------
for cv in (True, False):
    check(f"if_outer_{cv}", fm.if_outer, {"c": np.array(cv), "x": x23})
# the condition fixed at import: the branch is imported in place
check("if_param", fm.if_outer, {"c": np.array(False), "x": x23}, params={"c"}, host=False)
# the condition an initializer behind a comparison: folded
check("if_const_cond", fm.if_const, {"x": x23}, host=False)
# branches of different shapes: the following segment is compiled for the shape the host meets
for cv in (True, False):
    check(f"if_shapes_{cv}", fm.if_shapes, {"c": np.array(cv), "x": x3})
# a shape folded before the If, read after it by a segment that has no input of that dim
for cv in (True, False):
    check(f"if_symbolic_{cv}", fm.if_symbolic, {"c": np.array(cv), "x": xs40[:7]})
# a branch that does not import for the shapes given (a Reshape of 3 elements to 2x2 in the else branch):
# deferred, the then branch runs; taking the else branch is the import's error, at run time, nothing written
for cv in (True, False):
    m = fm.if_bad_branch
    if cv:
        check("if_bad_branch_true", m, {"c": np.array(True), "x": x3})
    else:
        refused("if_bad_branch_false", m, {"c": np.array(False), "x": x3}, "AxisSizeMismatch",
                ['"bad_if" (If) else_branch', "taken at run time", '"bad_reshape"'])
# an If in a branch, both on graph inputs
for cv, dv in ((True, True), (True, False), (False, True)):
    check(f"if_nested_{cv}_{dv}", fm.if_nested, {"c": np.array(cv), "d": np.array(dv), "x": x3})

# ---- Loop ------------------------------------------------------------------------------------------
for mv in (0, 1, 7, 40):
    check(f"loop_trip_{mv}", fm.loop_trip, {"M": np.array(mv, np.int64), "xs": xs40, "a0": x3})
# unrolled: a constant trip count; the iteration number slices (it is a constant then)
check("loop_unrolled", fm.loop_unrolled, {"xs": xs40[:6], "a0": x3[None]}, host=False)
# a constant trip count, the condition at run time and passed on by the body: all trips or none (an If
# between the Loop unrolled and no loop; with none, the scan output is empty)
for cv in (True, False):
    check(f"loop_cond_{cv}", fm.loop_cond, {"c": np.array(cv), "xs": xs40[:6], "a0": x3[None]})
# a while loop: M absent, the body computes the condition
check("loop_while", fm.loop_while, {"c0": np.array(True), "v0": np.abs(x3) + 0.1, "k": np.array(1.5, np.float32),
                                    "lim": np.array(40, np.float32)})
# a loop-carried value that grows each iteration; M at run time
check("loop_grow", fm.loop_grow, {"M": np.array(3, np.int64), "x": x3})
# an If inside a Loop body (on the iteration number), and the Loop inside an If
for cv in (True, False):
    check(f"loop_in_if_{cv}", fm.loop_in_if, {"c": np.array(cv), "M": np.array(5, np.int64), "x": x3})

# ---- Scan -----------------------------------------------------------------------------------------------
for L, host in ((5, False), (40, True)):
    for ia, idr, oa, od in ((0, 0, 0, 0), (1, 1, -1, 1), (0, 1, 1, 0)):
        xin = rng.standard_normal((3, L) if ia == 1 else (L, 3)).astype(np.float32) * 0.5
        check(f"scan_{L}_{ia}{idr}{oa}{od}", fm.scan(L, ia, idr, oa, od), {"s0": x3, "x": xin}, host=host)
# a symbolic length: the input's shape is given at import (its data file), so
# 9 steps unroll and 40 (past OXF_UNROLL_MAX) run as a host loop
check("scan_symbolic", fm.scan(0, 0, 0, 0, 0, dim="T"), {"s0": x3, "x": xs40[:9]}, host=False)
check("scan_symbolic_long", fm.scan(0, 0, 0, 0, 0, dim="T"), {"s0": x3, "x": xs40}, host=True)
# every seed of the fuzz test runs as given
for name, (m, f) in fm.feeds().items():
    check(f"seed {name}", m, f, host=None)

# ---- bad input ------------------------------------------------------------------------------------------
two_out = graph([mk("Neg", ["x"], ["a"]), mk("Abs", ["x"], ["b"])], [], [vi("a", [3]), vi("b", [3])])
one_out = graph([mk("Neg", ["x"], ["a"])], [], [vi("a", [3])])
int_out = graph([mk("Cast", ["x"], ["a"], to=I64)], [], [vi("a", [3], I64)])
rank2 = graph([mk("Unsqueeze", ["x", "ax"], ["a"])], [], [vi("a", [1, 3])], [init("ax", np.array([0], np.int64))])


def raw_model(g):
    """A model the checker would refuse."""
    return model(g, check=False)


def if_model(t, e, nout=1):
    outs = [f"y{k}" for k in range(nout)]
    return raw_model(graph([mk("If", ["c"], outs, then_branch=t, else_branch=e, name="the_if")], [vi("c", [], B), vi("x", [3])],
                           [vr(o, 1) for o in outs]))


feeds = {"c": np.array(True), "x": x3}
refused("if_count", if_model(two_out, one_out, 2), feeds, "ArityMismatch", ['"the_if" (If)', "outputs"])
refused("if_dtype", if_model(one_out, int_out), feeds, "DtypeMismatch", ['"the_if" (If)', "then_branch", "else_branch"])
refused("if_rank", if_model(one_out, rank2), feeds, "AxisSizeMismatch", ['"the_if" (If)', "rank"])
dangling = graph([mk("Add", ["x", "nowhere"], ["a"], name="reader")], [], [vi("a", [3])])
refused("if_dangling", if_model(dangling, one_out), feeds, "DanglingRef", ['"the_if" (If) then_branch', '"reader"', "nowhere"])
forever = graph([mk("Loop", ["", "", "v0"], ["v"], body=graph([mk("Identity", ["cin"], ["cout"]), mk("Neg", ["v"], ["v2"])],
                                                              [vi("i", [], I64), vi("cin", [], B), vi("v", [3])],
                                                              [vi("cout", [], B), vi("v2", [3])]), name="spin")],
                [vi("v0", [3])], [vi("v", [3])])
refused("loop_forever", model(forever), {"v0": x3}, "LimitExceeded", ['"spin" (Loop)', "100 iterations", "--loop-limit"],
        extra=["--loop-limit", "100"])
# the limit exactly: 40 iterations run under --loop-limit 40, not under 39
trip40 = {"M": np.array(40, np.int64), "xs": xs40, "a0": x3}
check("loop_limit_40", fm.loop_trip, trip40, extra=["--loop-limit", "40"])
refused("loop_limit_39", fm.loop_trip, trip40, "LimitExceeded", ["(Loop)", "39 iterations"], extra=["--loop-limit", "39"])
ghost_body = graph([mk("Identity", ["cin"], ["cout"]), mk("Add", ["v", "ghost"], ["v2"], name="body_add")],
                   [vi("i", [], I64), vi("cin", [], B), vi("v", [3])], [vi("cout", [], B), vi("v2", [3])])
refused("loop_dangling", raw_model(graph([mk("Loop", ["M", "", "v0"], ["v"], name="lp", body=ghost_body)],
                                         [vi("M", [], I64), vi("v0", [3])], [vi("v", [3])])),
        {"M": np.array(2, np.int64), "v0": x3}, "DanglingRef", ['"lp" (Loop) body', '"body_add"', "ghost"])
refused("if_compile", fm.if_outer, {}, "Unsupported", ['(If)', "known only at run time", "harp run"], command="compile",
        extra=["--target", "cpu"])
# a condition or trip count of two elements at run time (flow_exec.c's scalar_of): a clear error
if_vec = raw_model(graph([mk("If", ["c"], ["y"], then_branch=one_out, else_branch=one_out, name="vec_if")],
                         [vi("c", ["n"], B), vi("x", [3])], [vr("y", 1)]))
refused("if_cond_2", if_vec, {"c": np.array([True, False]), "x": x3}, "InvalidArgument", ["the condition has 2 elements"])
loop_vec = raw_model(graph([mk("Loop", ["M", "T", "a0"], ["acc", "scan", "prevs"], body=fm.gbody)],
                           [vi("M", ["n"], I64), vi("xs", [40, 3]), vi("a0", [3])], [vi("acc", [3]), vr("scan", 2), vr("prevs", 2)],
                           [init("T", np.array(True))]))
refused("loop_trip_2", loop_vec, {"M": np.array([3, 4], np.int64), "xs": xs40, "a0": x3}, "InvalidArgument",
        ["the trip count has 2 elements"])

# ---- bench -------------------------------------------------------------------------------------------------
p = ht.subprocess.run([ht.HARP, "bench", save(fm.loop_trip, "bench_loop"), "--backend", "interp", "--repeat", "3", "--warmup", "1",
                       "--json"], capture_output=True, text=True, timeout=300)
S.check("bench on a host program", p.returncode == 0 and '"host_program": true' in p.stdout, p.stdout + p.stderr[-400:])
S.close()
