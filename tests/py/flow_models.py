"""ONNX models with If, Loop and Scan (onnx.helper), shared by
tests/py/test_onnx_flow.py (each against onnxruntime) and the fuzz test's
seeds (tests/py/test_onnx_fuzz.py).  Every model is a ModelProto that
passes onnx's checker; FEEDS gives inputs for each."""
import numpy as np
import onnx
from onnx import TensorProto, helper

from onnx_models import init, mk, vi

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def vr(name, rank, dtype=F):
    """A value of known rank and unknown dims."""
    return helper.make_tensor_value_info(name, dtype, [None] * rank)


def graph(nodes, inputs, outputs, inits=(), name="g"):
    return helper.make_graph(nodes, name, inputs, outputs, list(inits))


def model(g, opset=17, check=True):
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    if check:
        onnx.checker.check_model(m)
    return m


w3 = np.array([0.5, -1.0, 2.0], np.float32)

# ---- If ------------------------------------------------------------------------------------------
# branches reading outer values (x, the initializer w), one with an initializer of its own
then_g = graph([mk("Mul", ["x", "w"], ["t0"]), mk("Add", ["t0", "one"], ["t"])], [], [vi("t", [2, 3])], [init("one", np.float32(1))])
else_g = graph([mk("Relu", ["x"], ["e0"]), mk("Sub", ["e0", "w"], ["e"])], [], [vi("e", [2, 3])])
if_outer = model(graph([mk("If", ["c"], ["y0"], then_branch=then_g, else_branch=else_g), mk("Tanh", ["y0"], ["y"])],
                       [vi("c", [], B), vi("x", [2, 3])], [vi("y", [2, 3])], [init("w", w3)]))
# the condition an initializer behind a comparison
if_const = model(graph([mk("Equal", ["sr", "k"], ["c"]), mk("If", ["c"], ["y0"], then_branch=then_g, else_branch=else_g),
                        mk("Tanh", ["y0"], ["y"])], [vi("x", [2, 3])], [vi("y", [2, 3])],
                       [init("w", w3), init("sr", np.array(16000, np.int64)), init("k", np.array(8000, np.int64))]))
# branches of different shapes, the result read after the If
if_shapes = model(graph([mk("If", ["c"], ["y0"], then_branch=graph([mk("Concat", ["x", "x"], ["t"], axis=0)], [], [vr("t", 1)]),
                            else_branch=graph([mk("Neg", ["x"], ["e"])], [], [vr("e", 1)])),
                         mk("ReduceSum", ["y0"], ["s"], keepdims=0), mk("Mul", ["y0", "two"], ["y"])],
                        [vi("c", [], B), vi("x", [3])], [vr("y", 1), vi("s", [])], [init("two", np.float32(2))]))
# an If in a branch
inner = graph([mk("If", ["d"], ["i"], then_branch=graph([mk("Exp", ["x"], ["a"])], [], [vi("a", [3])]),
                   else_branch=graph([mk("Sigmoid", ["x"], ["b"])], [], [vi("b", [3])]))], [], [vi("i", [3])])
if_nested = model(graph([mk("If", ["c"], ["y"], then_branch=inner, else_branch=graph([mk("Abs", ["x"], ["z"])], [], [vi("z", [3])]))],
                        [vi("c", [], B), vi("d", [], B), vi("x", [3])], [vi("y", [3])]))

# an else branch that cannot take x [3] (a Reshape to 2x2): only an error if the host takes it
bad_else = graph([mk("Reshape", ["x", "s22"], ["r"], name="bad_reshape"), mk("ReduceSum", ["r", "ax0"], ["e"], keepdims=0)], [],
                 [vr("e", 1)], [init("s22", np.array([2, 2], np.int64)), init("ax0", np.array([0], np.int64))])
if_bad_branch = model(graph([mk("If", ["c"], ["y"], name="bad_if", then_branch=graph([mk("Neg", ["x"], ["t"])], [], [vr("t", 1)]),
                                 else_branch=bad_else)], [vi("c", [], B), vi("x", [3])], [vr("y", 1)]))

# a shape folded before the If (Shape of x [N, 3]) used after it, where nothing read has that dim
red = lambda op, o: graph([mk(op, ["x"], [o + "0"]), mk("ReduceSum", [o + "0"], [o], keepdims=0)], [], [vr(o, 0)])  # noqa: E731
if_symbolic = model(graph([mk("Shape", ["x"], ["s"]), mk("If", ["c"], ["y"], then_branch=red("Neg", "a"), else_branch=red("Abs", "b")),
                           mk("Expand", ["y", "s"], ["t"]), mk("Mul", ["t", "t"], ["z"])],
                          [vi("c", [], B), helper.make_tensor_value_info("x", F, ["N", 3])], [vr("z", 2)]))

# ---- Loop ------------------------------------------------------------------------------------------
# for i < M: acc = acc * 0.5 + xs[i] (a Gather by the iteration number); scan output acc
# scan outputs acc2 and acc as it came in (the body's own input: read before the next iteration's)
gbody = graph([mk("Identity", ["cin"], ["cout"]), mk("Gather", ["xs", "i"], ["xi"], axis=0), mk("Mul", ["acc", "half"], ["m0"]),
               mk("Add", ["m0", "xi"], ["acc2"]), mk("Identity", ["acc2"], ["sc"]), mk("Identity", ["acc"], ["prev"])],
              [vi("i", [], I64), vi("cin", [], B), vi("acc", [3])],
              [vi("cout", [], B), vi("acc2", [3]), vi("sc", [3]), vi("prev", [3])], [init("half", np.float32(0.5))])
loop_trip = model(graph([mk("Loop", ["M", "T", "a0"], ["acc", "scan", "prevs"], body=gbody)],
                        [vi("M", [], I64), vi("xs", [40, 3]), vi("a0", [3])], [vi("acc", [3]), vr("scan", 2), vr("prevs", 2)],
                        [init("T", np.array(True))]))
# the iteration number slices: a constant only when unrolled
ubody = graph([mk("Identity", ["cin"], ["cout"]), mk("Unsqueeze", ["i", "ax0"], ["st"]), mk("Add", ["st", "one"], ["en"]),
               mk("Slice", ["xs", "st", "en"], ["row"]), mk("Add", ["acc", "row"], ["acc2"]), mk("Mul", ["acc2", "acc2"], ["sq"])],
              [vi("i", [], I64), vi("cin", [], B), vi("acc", [1, 3])], [vi("cout", [], B), vi("acc2", [1, 3]), vi("sq", [1, 3])],
              [init("ax0", np.array([0], np.int64)), init("one", np.array([1], np.int64))])
loop_unrolled = model(graph([mk("Loop", ["M", "", "a0"], ["acc", "scan"], body=ubody)], [vi("xs", [6, 3]), vi("a0", [1, 3])],
                            [vi("acc", [1, 3]), vr("scan", 3)], [init("M", np.array(5, np.int64))]))
# a constant trip count, the condition at run time, passed on by the body
loop_cond = model(graph([mk("Loop", ["M", "c", "a0"], ["acc", "scan"], body=ubody)], [vi("c", [], B), vi("xs", [6, 3]), vi("a0", [1, 3])],
                        [vi("acc", [1, 3]), vr("scan", 3)], [init("M", np.array(4, np.int64))]))
# a while loop: M absent, the body computes the condition (sum < lim)
wbody = graph([mk("Mul", ["v", "k"], ["v2"]), mk("ReduceSum", ["v2"], ["s"], keepdims=0), mk("Less", ["s", "lim"], ["cout"])],
              [vi("i", [], I64), vi("cin", [], B), vi("v", [3])], [vi("cout", [], B), vi("v2", [3])])
loop_while = model(graph([mk("Loop", ["", "c0", "v0"], ["v"], body=wbody)], [vi("c0", [], B), vi("v0", [3]), vi("k", []), vi("lim", [])],
                         [vi("v", [3])]))
# a loop-carried value that grows each iteration
growb = graph([mk("Identity", ["cin"], ["cout"]), mk("Concat", ["v", "x"], ["v2"], axis=0)],
              [vi("i", [], I64), vi("cin", [], B), vr("v", 1)], [vi("cout", [], B), vr("v2", 1)])
loop_grow = model(graph([mk("Loop", ["M", "", "x"], ["v"], body=growb), mk("ReduceSum", ["v"], ["s"], keepdims=0)],
                        [vi("M", [], I64), vi("x", [3])], [vr("v", 1), vi("s", [])]))
# an If inside a Loop body (on the iteration number), the Loop inside an If
ibody = graph([mk("Identity", ["cin"], ["cout"]), mk("Less", ["i", "three"], ["ev"]),
               mk("If", ["ev"], ["v2"], then_branch=graph([mk("Add", ["v", "x"], ["p"])], [], [vi("p", [3])]),
                  else_branch=graph([mk("Mul", ["v", "x"], ["q"])], [], [vi("q", [3])]))],
              [vi("i", [], I64), vi("cin", [], B), vi("v", [3])], [vi("cout", [], B), vi("v2", [3])],
              [init("three", np.array(3, np.int64))])
loop_in_if = model(graph([mk("If", ["c"], ["y"], then_branch=graph([mk("Loop", ["M", "", "x"], ["l"], body=ibody)], [], [vi("l", [3])]),
                             else_branch=graph([mk("Neg", ["x"], ["n"])], [], [vi("n", [3])]))],
                         [vi("c", [], B), vi("M", [], I64), vi("x", [3])], [vi("y", [3])]))

# ---- Scan -----------------------------------------------------------------------------------------------
sbody = graph([mk("Add", ["s", "e"], ["s2"]), mk("Mul", ["s2", "e"], ["o"])], [vi("s", [3]), vi("e", [3])],
              [vi("s2", [3]), vi("o", [3])])


def scan(L, in_axis, in_dir, out_axis, out_dir, dim=None):
    """A Scan over x of length L (or the symbolic dim) along in_axis."""
    xshape = [3, dim or L] if in_axis == 1 else [dim or L, 3]
    return model(graph([mk("Scan", ["s0", "x"], ["s", "y"], body=sbody, num_scan_inputs=1, scan_input_axes=[in_axis],
                           scan_input_directions=[in_dir], scan_output_axes=[out_axis], scan_output_directions=[out_dir])],
                       [vi("s0", [3]), vi("x", xshape)], [vi("s", [3]), vr("y", 2)]))


def feeds():
    """Inputs for every model above, by name (the fuzz test's seeds)."""
    rng = np.random.default_rng(7)
    x3, x23 = rng.standard_normal(3).astype(np.float32), rng.standard_normal((2, 3)).astype(np.float32)
    xs40 = rng.standard_normal((40, 3)).astype(np.float32)
    t, M = np.array(True), np.array(5, np.int64)
    return {"if_outer": (if_outer, {"c": t, "x": x23}), "if_const": (if_const, {"x": x23}),
            "if_shapes": (if_shapes, {"c": t, "x": x3}), "if_symbolic": (if_symbolic, {"c": t, "x": x23}), "if_nested": (if_nested, {"c": t, "d": t, "x": x3}),
            "loop_trip": (loop_trip, {"M": M, "xs": xs40, "a0": x3}), "loop_unrolled": (loop_unrolled, {"xs": xs40[:6], "a0": x3[None]}),
            "loop_cond": (loop_cond, {"c": t, "xs": xs40[:6], "a0": x3[None]}),
            "loop_while": (loop_while, {"c0": t, "v0": np.abs(x3) + 0.1, "k": np.array(1.5, np.float32), "lim": np.array(40, np.float32)}),
            "loop_grow": (loop_grow, {"M": M, "x": x3}), "loop_in_if": (loop_in_if, {"c": t, "M": M, "x": x3}),
            "scan_short": (scan(5, 1, 1, -1, 1), {"s0": x3, "x": xs40[:5].T.copy()}),
            "scan_long": (scan(40, 0, 1, 1, 0), {"s0": x3, "x": xs40}),
            "scan_symbolic": (scan(0, 0, 0, 0, 0, dim="T"), {"s0": x3, "x": xs40[:9]})}
