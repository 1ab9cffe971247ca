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

try:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper
except ImportError:
    print("onnx / onnxruntime not installed (scripts/install-deps.sh)")
    sys.exit(77)
from onnx_models import init, mk, vi  # noqa: E402

S = ht.Suite("onnx_flow")
D = ht.tempfile.mkdtemp()
F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def vr(name, rank, dtype=TensorProto.FLOAT):
    """A value of known rank and unknown dims."""
    return helper.make_tensor_value_info(name, dtype, [None] * rank)


def graph(nodes, inputs, outputs, inits=(), name="g"):
    return helper.make_graph(nodes, name, inputs, outputs, list(inits))


def model(g, opset=17):
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    onnx.checker.check_model(m)
    return m


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
    the model must run as a host program (--dump flow says which)."""
    path = save(m, name)
    want = reference(m, feeds)
    for b in backends:
        p, out = harp(path, feeds, b, params, ["--dump", "flow", *extra])
        if not S.check(f"{name} ({b}): runs", p.returncode == 0, p.stderr.strip()[-800:]) and p.returncode:
            continue
        flow = open(os.path.join(out, "flow.txt")).read()
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
w3 = np.array([0.5, -1.0, 2.0], np.float32)

# ---- If ------------------------------------------------------------------------------------------
then_g = graph([mk("Mul", ["x", "w"], ["t0"]), mk("Add", ["t0", "one"], ["t"])], [], [vi("t", [2, 3])], [init("one", np.float32(1))])
else_g = graph([mk("Relu", ["x"], ["e0"]), mk("Sub", ["e0", "w"], ["e"])], [], [vi("e", [2, 3])])
if_outer = graph([mk("If", ["c"], ["y0"], then_branch=then_g, else_branch=else_g), mk("Tanh", ["y0"], ["y"])],
                 [vi("c", [], B), vi("x", [2, 3])], [vi("y", [2, 3])], [init("w", w3)])
for cv in (True, False):
    check(f"if_outer_{cv}", model(if_outer), {"c": np.array(cv), "x": x23})

# the condition fixed at import: the branch is imported in place
check("if_param", model(if_outer), {"c": np.array(False), "x": x23}, params={"c"}, host=False)
# the condition an initializer behind a comparison: folded
cmp_g = graph([mk("Equal", ["sr", "k"], ["c"]), mk("If", ["c"], ["y0"], then_branch=then_g, else_branch=else_g),
               mk("Tanh", ["y0"], ["y"])], [vi("x", [2, 3])], [vi("y", [2, 3])],
              [init("w", w3), init("sr", np.array(16000, np.int64)), init("k", np.array(8000, np.int64))])
check("if_const_cond", model(cmp_g), {"x": x23}, host=False)

# branches of different shapes: the following segment is compiled for the shape the host meets
sh_then = graph([mk("Concat", ["x", "x"], ["t"], axis=0)], [], [vr("t", 1)])
sh_else = graph([mk("Neg", ["x"], ["e"])], [], [vr("e", 1)])
if_shapes = graph([mk("If", ["c"], ["y0"], then_branch=sh_then, else_branch=sh_else), mk("ReduceSum", ["y0"], ["s"], keepdims=0),
                   mk("Mul", ["y0", "two"], ["y"])], [vi("c", [], B), vi("x", [3])], [vr("y", 1), vi("s", [])],
                  [init("two", np.float32(2))])
for cv in (True, False):
    check(f"if_shapes_{cv}", model(if_shapes), {"c": np.array(cv), "x": x3})

# an If in a branch, both on graph inputs
inner = graph([mk("If", ["d"], ["i"], then_branch=graph([mk("Exp", ["x"], ["a"])], [], [vi("a", [3])]),
                   else_branch=graph([mk("Sigmoid", ["x"], ["b"])], [], [vi("b", [3])]))], [], [vi("i", [3])])
nested = graph([mk("If", ["c"], ["y"], then_branch=inner, else_branch=graph([mk("Abs", ["x"], ["z"])], [], [vi("z", [3])]))],
               [vi("c", [], B), vi("d", [], B), vi("x", [3])], [vi("y", [3])])
for cv, dv in ((True, True), (True, False), (False, True)):
    check(f"if_nested_{cv}_{dv}", model(nested), {"c": np.array(cv), "d": np.array(dv), "x": x3})

# ---- Loop ------------------------------------------------------------------------------------------
# for i < M: acc = acc * 0.5 + x[i] (a Gather by the iteration number); scan output acc
body = graph([mk("Identity", ["cin"], ["cout"]), mk("Gather", ["xs", "i"], ["xi"], axis=0), mk("Mul", ["acc", "half"], ["m0"]),
              mk("Add", ["m0", "xi"], ["acc2"]), mk("Identity", ["acc2"], ["sc"])],
             [vi("i", [], I64), vi("cin", [], B), vi("acc", [3])], [vi("cout", [], B), vi("acc2", [3]), vi("sc", [3])],
             [init("half", np.float32(0.5))])
loop_m = graph([mk("Loop", ["M", "T", "a0"], ["acc", "scan"], body=body)], [vi("M", [], I64), vi("xs", [40, 3]), vi("a0", [3])],
               [vi("acc", [3]), vr("scan", 2)], [init("T", np.array(True))])
xs40 = rng.standard_normal((40, 3)).astype(np.float32)
for mv in (0, 1, 7, 40):
    check(f"loop_trip_{mv}", model(loop_m), {"M": np.array(mv, np.int64), "xs": xs40, "a0": x3})

# unrolled: a constant trip count; the iteration number slices (it is a constant then)
ubody = graph([mk("Identity", ["cin"], ["cout"]), mk("Unsqueeze", ["i", "ax0"], ["st"]), mk("Add", ["st", "one"], ["en"]),
               mk("Slice", ["xs", "st", "en"], ["row"]), mk("Add", ["acc", "row"], ["acc2"]), mk("Mul", ["acc2", "acc2"], ["sq"])],
              [vi("i", [], I64), vi("cin", [], B), vi("acc", [1, 3])], [vi("cout", [], B), vi("acc2", [1, 3]), vi("sq", [1, 3])],
              [init("ax0", np.array([0], np.int64)), init("one", np.array([1], np.int64))])
loop_u = graph([mk("Loop", ["M", "", "a0"], ["acc", "scan"], body=ubody)], [vi("xs", [6, 3]), vi("a0", [1, 3])],
               [vi("acc", [1, 3]), vr("scan", 3)], [init("M", np.array(5, np.int64))])
check("loop_unrolled", model(loop_u), {"xs": xs40[:6], "a0": x3[None]}, host=False)

# a constant trip count, the condition at run time and passed on by the body: all trips or none (an If
# between the Loop unrolled and no loop; with none, the scan output is empty)
loop_c = graph([mk("Loop", ["M", "c", "a0"], ["acc", "scan"], body=ubody)], [vi("c", [], B), vi("xs", [6, 3]), vi("a0", [1, 3])],
               [vi("acc", [1, 3]), vr("scan", 3)], [init("M", np.array(4, np.int64))])
for cv in (True, False):
    check(f"loop_cond_{cv}", model(loop_c), {"c": np.array(cv), "xs": xs40[:6], "a0": x3[None]})

# a while loop: M absent, the body computes the condition (x < limit)
wbody = graph([mk("Mul", ["v", "k"], ["v2"]), mk("ReduceSum", ["v2"], ["s"], keepdims=0), mk("Less", ["s", "lim"], ["cout"])],
              [vi("i", [], I64), vi("cin", [], B), vi("v", [3])], [vi("cout", [], B), vi("v2", [3])])
loop_w = graph([mk("Loop", ["", "c0", "v0"], ["v"], body=wbody)], [vi("c0", [], B), vi("v0", [3]), vi("k", []), vi("lim", [])],
               [vi("v", [3])])
v0 = np.abs(x3) + 0.1
check("loop_while", model(loop_w), {"c0": np.array(True), "v0": v0, "k": np.array(1.5, np.float32), "lim": np.array(40, np.float32)})

# a loop-carried value that grows each iteration; M at run time
gbody = graph([mk("Identity", ["cin"], ["cout"]), mk("Concat", ["v", "x"], ["v2"], axis=0)],
              [vi("i", [], I64), vi("cin", [], B), vr("v", 1)], [vi("cout", [], B), vr("v2", 1)])
loop_g = graph([mk("Loop", ["M", "", "x"], ["v"], body=gbody), mk("ReduceSum", ["v"], ["s"], keepdims=0)],
               [vi("M", [], I64), vi("x", [3])], [vr("v", 1), vi("s", [])])
check("loop_grow", model(loop_g), {"M": np.array(3, np.int64), "x": x3})

# an If inside a Loop body (on the iteration number), and the Loop inside an If
ibody = graph([mk("Identity", ["cin"], ["cout"]), mk("Less", ["i", "three"], ["ev"]),
               mk("If", ["ev"], ["v2"], then_branch=graph([mk("Add", ["v", "x"], ["p"])], [], [vi("p", [3])]),
                  else_branch=graph([mk("Mul", ["v", "x"], ["q"])], [], [vi("q", [3])]))],
              [vi("i", [], I64), vi("cin", [], B), vi("v", [3])], [vi("cout", [], B), vi("v2", [3])],
              [init("three", np.array(3, np.int64))])
loop_if = graph([mk("If", ["c"], ["y"], then_branch=graph([mk("Loop", ["M", "", "x"], ["l"], body=ibody)], [], [vi("l", [3])]),
                    else_branch=graph([mk("Neg", ["x"], ["n"])], [], [vi("n", [3])]))],
                [vi("c", [], B), vi("M", [], I64), vi("x", [3])], [vi("y", [3])])
for cv in (True, False):
    check(f"loop_in_if_{cv}", model(loop_if), {"c": np.array(cv), "M": np.array(5, np.int64), "x": x3})

# ---- Scan -----------------------------------------------------------------------------------------------
sbody = graph([mk("Add", ["s", "e"], ["s2"]), mk("Mul", ["s2", "e"], ["o"])], [vi("s", [3]), vi("e", [3])],
              [vi("s2", [3]), vi("o", [3])])


def scan(L, in_axis, in_dir, out_axis, out_dir, dim=None):
    xshape = [3, dim or L] if in_axis == 1 else [dim or L, 3]
    return graph([mk("Scan", ["s0", "x"], ["s", "y"], body=sbody, num_scan_inputs=1, scan_input_axes=[in_axis],
                     scan_input_directions=[in_dir], scan_output_axes=[out_axis], scan_output_directions=[out_dir])],
                 [vi("s0", [3]), vi("x", xshape)], [vi("s", [3]), vr("y", 2)])


for L, host in ((5, False), (40, True)):
    for ia, idr, oa, od in ((0, 0, 0, 0), (1, 1, -1, 1), (0, 1, 1, 0)):
        xin = rng.standard_normal((3, L) if ia == 1 else (L, 3)).astype(np.float32) * 0.5
        check(f"scan_{L}_{ia}{idr}{oa}{od}", model(scan(L, ia, idr, oa, od)), {"s0": x3, "x": xin}, host=host)
# a symbolic length: a host loop whatever the input's length
check("scan_symbolic", model(scan(0, 0, 0, 0, 0, dim="T")), {"s0": x3, "x": xs40[:9]}, host=True)

# ---- bad input ------------------------------------------------------------------------------------------
two_out = graph([mk("Neg", ["x"], ["a"]), mk("Abs", ["x"], ["b"])], [], [vi("a", [3]), vi("b", [3])])
one_out = graph([mk("Neg", ["x"], ["a"])], [], [vi("a", [3])])
int_out = graph([mk("Cast", ["x"], ["a"], to=I64)], [], [vi("a", [3], I64)])
rank2 = graph([mk("Unsqueeze", ["x", "ax"], ["a"])], [], [vi("a", [1, 3])], [init("ax", np.array([0], np.int64))])


def raw_model(g):
    """A model the checker would refuse."""
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


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
ghost_body = graph([mk("Identity", ["cin"], ["cout"]), mk("Add", ["v", "ghost"], ["v2"], name="body_add")],
                   [vi("i", [], I64), vi("cin", [], B), vi("v", [3])], [vi("cout", [], B), vi("v2", [3])])
refused("loop_dangling", raw_model(graph([mk("Loop", ["M", "", "v0"], ["v"], name="lp", body=ghost_body)],
                                         [vi("M", [], I64), vi("v0", [3])], [vi("v", [3])])),
        {"M": np.array(2, np.int64), "v0": x3}, "DanglingRef", ['"lp" (Loop) body', '"body_add"', "ghost"])
refused("if_compile", model(if_outer), {}, "Unsupported", ['(If)', "known only at run time", "harp run"], command="compile",
        extra=["--target", "cpu"])

# ---- bench -------------------------------------------------------------------------------------------------
p = ht.subprocess.run([ht.HARP, "bench", save(model(loop_m), "bench_loop"), "--backend", "interp", "--repeat", "3", "--warmup", "1",
                       "--json"], capture_output=True, text=True, timeout=300)
S.check("bench on a host program", p.returncode == 0 and '"host_program": true' in p.stdout, p.stdout + p.stderr[-400:])
S.close()
