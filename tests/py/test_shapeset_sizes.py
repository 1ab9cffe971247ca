"""Sizes that flow as data under `harp run MODEL.onnx --shapeset` (issue 25,
PP-OCRv4 rec): a size read with Shape, cast (to int32, or to float and
divided, floored and cast back), multiplied and fed to Reshape, Slice,
Concat, ConstantOfShape or Range stays an expression of the box's symbol
(a derived symbol), so the model imports once for the box.  Each model
runs at three bindings on a cache of its own, each output against
onnxruntime; where every kernel reads its sizes at run time it is one
object (the first run builds it, the next two build nothing).  A size
harp cannot keep symbolic (a quotient by a size) says so and compiles the
binding alone, still right.  Fills of a Shape-derived size concatenated
and added to x: one object, right at four bindings.  A Range over a size
(also with a start and a step; its iota a sliding-window sum, affine in
the size), fills of sizes w, w + 1, 2w, w - 1 concatenated (pieces cut
where the sizes meet, their bounds read at run time) and a fill beside x
along x's symbolic axis (either axis): one object each, also at w = 1.
Ceil and Round of a size over a box too large to check binding by binding
(their growth proven from the form), a gather map reading x after a fill
of w + 1 rows (its pieces' starts and x's rows from them at run time) and
gathers from a table [3, w, 2] along either axis: one object each."""
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from harp_test import Suite, close, onnx_or_skip, shapeset_built as built, shapeset_run  # noqa: E402

onnx_or_skip()
import onnx  # noqa: F401
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto  # noqa: E402
from onnx_models import init, mk, model, range_constantofshape, vi  # noqa: E402

s = Suite("shapeset_sizes")
rng = np.random.default_rng(2511)
D = tempfile.mkdtemp()
env = dict(os.environ, HARP_CACHE_DIR=tempfile.mkdtemp())


def ints(name, v):
    return init(name, np.array(v, np.int64))


def save(m, name):
    path = os.path.join(D, name + ".onnx")
    onnx.save(m, path)
    return path


def check(name, m, box, shapes, one_object=True):
    """m run under --shapeset box at each input shape in shapes (one input, x) against onnxruntime; the last run."""
    path = save(m, name)
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for i, shape in enumerate(shapes):
        x = rng.standard_normal(shape).astype(np.float32)
        p, out = shapeset_run(path, {"x": x}, ["--shapeset", box], env, D)
        tag = f"{name} x{list(shape)}"
        s.check(f"{tag}: runs", p.returncode == 0, p.stderr[-600:])
        s.check(f"{tag}: imported once for the box", "a compile per binding: error" not in p.stderr, p.stderr[-600:])
        if one_object:
            s.check(f"{tag}: one object, {'built' if i == 0 else 'no C compile'}", built(p) == (1, 1 if i == 0 else 0)
                    and "one object for the box" in p.stderr, f"{built(p)} {p.stderr[-600:]}")
        for o, want in zip(ref.get_outputs(), ref.run(None, {"x": x}) if p.returncode == 0 else []):
            s.check(f"{tag}: {o.name} vs onnxruntime", *close(np.load(os.path.join(out, o.name + ".npy")), want, 1e-5, 1e-6))
    return p


# Shape -> Gather -> Cast(float) -> Mul(0.5) -> Mul(8.0) -> Cast(int64), less twice Cast(int32) of the same size -> Concat ->
# Reshape: x[w, 2, 4] as [2w, 4] (2w a derived symbol); one object (softmax rows read at run time)
m1 = model([mk("Shape", ["x"], ["s"]), mk("Gather", ["s", "zero"], ["w"]), mk("Cast", ["w"], ["wf"], to=TensorProto.FLOAT),
            mk("Mul", ["wf", "half"], ["wh"]), mk("Mul", ["wh", "eight"], ["w4"]), mk("Cast", ["w4"], ["w4i"], to=TensorProto.INT64),
            mk("Cast", ["w"], ["w32"], to=TensorProto.INT32), mk("Cast", ["w32"], ["w64"], to=TensorProto.INT64),
            mk("Sub", ["w4i", "w64"], ["w3"]), mk("Sub", ["w3", "w64"], ["rows"]),
            mk("Unsqueeze", ["rows", "ax0"], ["r1"]), mk("Concat", ["r1", "four1"], ["shape"], axis=0),
            mk("Reshape", ["x", "shape"], ["r"]), mk("Softmax", ["r"], ["p"], axis=-1), mk("Mul", ["p", "three"], ["y"])],
           [vi("x", ["w", 2, 4])], [vi("y", None)],
           [ints("zero", 0), init("half", np.array(0.5, np.float32)), init("eight", np.array(8.0, np.float32)), ints("ax0", [0]),
            ints("four1", [4]),
            init("three", np.array(3.0, np.float32))])
check("cast_mul_reshape", m1, "w=2..40", [(7, 2, 4), (40, 2, 4), (19, 2, 4)])

# the float path of a size: Cast(float) -> Div(2.0) -> Floor (-> Mul(2.0) -> Cast(int64): Slice's end 2*(w/2)) -> Cast(int64):
# Reshape to (w/2, 2, 3)
m2 = model([mk("Shape", ["x"], ["s"]), mk("Gather", ["s", "zero"], ["w"]), mk("Cast", ["w"], ["wf"], to=TensorProto.FLOAT),
            mk("Div", ["wf", "two"], ["wh"]), mk("Floor", ["wh"], ["wfl"]), mk("Cast", ["wfl"], ["wi"], to=TensorProto.INT64),
            mk("Unsqueeze", ["wi", "ax0"], ["wu"]), mk("Mul", ["wfl", "two"], ["endf"]),
            mk("Cast", ["endf"], ["endi"], to=TensorProto.INT64), mk("Unsqueeze", ["endi", "ax0"], ["end"]),
            mk("Slice", ["x", "zero1", "end", "ax0"], ["xs"]), mk("Concat", ["wu", "two1", "three1"], ["shape"], axis=0),
            mk("Reshape", ["xs", "shape"], ["r"]), mk("Softmax", ["r"], ["y"], axis=-1)],
           [vi("x", ["w", 3])], [vi("y", None)],
           [ints("zero", 0), init("two", np.array(2.0, np.float32)), ints("ax0", [0]), ints("zero1", [0]), ints("two1", [2]),
            ints("three1", [3])])
check("float_floor_slice", m2, "w=2..64", [(9, 3), (64, 3), (30, 3)])

# SVTR's flatten: Shape -> Cast(int32) -> Slice [0:2] -> Concat [-1] -> Reshape [1, C, H*W] -> Transpose -> MatMul
# -> Softmax over the W*H/... tokens' features
W8 = rng.standard_normal((8, 6)).astype(np.float32) * 0.5
m3 = model([mk("Shape", ["x"], ["s"]), mk("Cast", ["s"], ["s32"], to=TensorProto.INT32),
            mk("Slice", ["s32", "zero1", "two1", "zero1"], ["nc"]), mk("Cast", ["nc"], ["nc64"], to=TensorProto.INT64),
            mk("Concat", ["nc64", "m1"], ["shape"], axis=0), mk("Reshape", ["x", "shape"], ["f"]),
            mk("Transpose", ["f"], ["t"], perm=[0, 2, 1]), mk("MatMul", ["t", "W"], ["h"]), mk("Softmax", ["h"], ["y"], axis=-1)],
           [vi("x", [1, 8, 2, "w"])], [vi("y", None)],
           [ints("zero1", [0]), ints("two1", [2]), ints("m1", [-1]), init("W", W8)])
check("shape_slice_concat_reshape", m3, "w=4..48", [(1, 8, 2, 5), (1, 8, 2, 48), (1, 8, 2, 23)])

# Range over a size (positions 0..w-1, scaled, added to x's rows), ConstantOfShape of a shape read from x, and
# fills of sizes w and w + 1 concatenated (a padded fill: the CPU's map kernels once dropped the pad)
fill = onnx.helper.make_tensor("v", TensorProto.FLOAT, [1], [1.5])
neg2 = onnx.helper.make_tensor("v", TensorProto.FLOAT, [1], [-2.0])
m4 = range_constantofshape()  # also bench/shapeset_range.py
check("range_constantofshape", m4, "w=1..50", [(6, 4), (50, 4), (1, 4)])

# Range with a start and a step (-5, -2, .. below w: ceil((w + 5) / 3) values, a derived size) scaled, beside x doubled
m9 = model([mk("Shape", ["x"], ["s"]), mk("Gather", ["s", "zero"], ["w"]), mk("Range", ["minus5", "w", "three"], ["pos"]),
            mk("Cast", ["pos"], ["posf"], to=TensorProto.FLOAT), mk("Mul", ["posf", "half"], ["r"]), mk("Add", ["x", "x"], ["y"])],
           [vi("x", ["w", 3])], [vi("y", None), vi("r", None)],
           [ints("zero", 0), ints("minus5", -5), ints("three", 3), init("half", np.array(0.5, np.float32))])
check("range_start_step", m9, "w=1..45", [(6, 3), (45, 3), (1, 3), (20, 3)])

# three fills of different sizes (2w of 1.5, w - 1 of -2, 3 of 0.25) concatenated, then scaled and shifted: three
# pieces, two of derived sizes, their bounds read at run time
q25 = onnx.helper.make_tensor("v", TensorProto.FLOAT, [1], [0.25])
m10 = model([mk("Shape", ["x"], ["s"]), mk("Gather", ["s", "zero"], ["w"]), mk("Unsqueeze", ["w", "ax0"], ["w1"]),
             mk("Mul", ["w1", "two1"], ["w2"]), mk("Sub", ["w1", "one1"], ["wm"]),
             mk("ConstantOfShape", ["w2"], ["a"], value=fill), mk("ConstantOfShape", ["wm"], ["b"], value=neg2),
             mk("ConstantOfShape", ["three1"], ["c"], value=q25), mk("Concat", ["a", "b", "c"], ["cat"], axis=0),
             mk("Mul", ["cat", "tenth"], ["ct"]), mk("Add", ["ct", "one_f"], ["y"])],
            [vi("x", ["w", 2])], [vi("y", None)],
            [ints("zero", 0), ints("ax0", [0]), ints("two1", [2]), ints("one1", [1]), ints("three1", [3]),
             init("tenth", np.array(0.1, np.float32)), init("one_f", np.array(1.0, np.float32))])
check("fills_derived_sizes", m10, "w=2..40", [(9, 2), (40, 2), (2, 2), (25, 2)])

# a fill and the real x side by side along x's symbolic axis: x[3, w] then [3, w + 2] of 0.5 (axis 1: rows of the
# output, each cut), and x[w, 3] below [w + 1, 3] of -2 (axis 0: the pieces' outer sizes), each then tripled
m11 = model([mk("Shape", ["x"], ["s"]), mk("Gather", ["s", "one"], ["w"]), mk("Unsqueeze", ["w", "ax0"], ["w1"]),
             mk("Add", ["w1", "two1"], ["w2"]), mk("Add", ["w1", "one1"], ["wp"]),
             mk("Concat", ["three1", "w2"], ["s1"], axis=0), mk("Concat", ["wp", "three1"], ["s2"], axis=0),
             mk("ConstantOfShape", ["s1"], ["f1"], value=onnx.helper.make_tensor("v", TensorProto.FLOAT, [1], [0.5])),
             mk("ConstantOfShape", ["s2"], ["f2"], value=neg2), mk("Concat", ["x", "f1"], ["c1"], axis=1),
             mk("Transpose", ["x"], ["xt"], perm=[1, 0]), mk("Concat", ["xt", "f2"], ["c2"], axis=0),
             mk("Mul", ["c1", "three_f"], ["y1"]), mk("Mul", ["c2", "three_f"], ["y2"])],
            [vi("x", [3, "w"])], [vi("y1", None), vi("y2", None)],
            [ints("one", 1), ints("ax0", [0]), ints("two1", [2]), ints("one1", [1]), ints("three1", [3]),
             init("three_f", np.array(3.0, np.float32))])
check("fill_beside_x", m11, "w=2..48", [(3, 11), (3, 48), (3, 2), (3, 30)])

# fills of a Shape-derived size side by side (ConstantOfShape [r, 24] of 1.5 and [r, 16] of -2), times x plus
# themselves: literal fills read through the Concat's pads (the map kernels once wrote 1.5 + -2 everywhere);
# each fill a slab of the output, its rows read at run time: one object
m7 = model([mk("Shape", ["x"], ["s"]), mk("Slice", ["s", "zero1", "one1"], ["r"]), mk("Concat", ["r", "n24"], ["s1"], axis=0),
            mk("Concat", ["r", "n16"], ["s2"], axis=0), mk("ConstantOfShape", ["s1"], ["a"], value=fill),
            mk("ConstantOfShape", ["s2"], ["b"], value=neg2), mk("Concat", ["a", "b"], ["c"], axis=1),
            mk("Mul", ["x", "c"], ["xc"]), mk("Add", ["xc", "c"], ["y"])],
           [vi("x", ["r", 40])], [vi("y", None)],
           [ints("zero1", [0]), ints("one1", [1]), ints("n24", [24]), ints("n16", [16])])
check("fills_concat_x", m7, "r=2..30", [(5, 40), (30, 40), (2, 40), (17, 40)])

# Ceil and Round (no ties: an odd denominator) of a size cast to float, as a ConstantOfShape's shape
m6 = model([mk("Shape", ["x"], ["s"]), mk("Gather", ["s", "zero1"], ["w"]), mk("Cast", ["w"], ["wf"], to=TensorProto.FLOAT),
            mk("Div", ["wf", "three"], ["w3"]), mk("Ceil", ["w3"], ["c"]), mk("Round", ["w3"], ["r"]),
            mk("Concat", ["c", "r"], ["cr"], axis=0), mk("Cast", ["cr"], ["shape"], to=TensorProto.INT64),
            mk("ConstantOfShape", ["shape"], ["y"], value=fill)],
           [vi("x", ["w", 2])], [vi("y", None)], [ints("zero1", [0]), init("three", np.array(3.0, np.float32))])
# ceil(w / 3) and round(w / 3) reach the graph as w - 2 * w / 3 and the like: a negative term, yet they never shrink
# as w grows (each term's least change as w steps by one: 1 - ceil(2 / 3) = 0; tiny_dsym_steps_up), proven over a
# box too large to check binding by binding (4099 > 4096 points): one object, right at the box's corners and between
check("ceil_round_fill", m6, "w=2..4100", [(7, 2), (8, 2), (4100, 2), (2, 2), (23, 2)])

# a fill of w + 1 rows of -2 above x [w, 4], then x again, each row upsampled x2 (nearest: a gather map, its
# reads floor divisions), tripled: the pieces' starts w + 1 and 2w + 1 read at run time, and x's rows counted from
# the start of its piece (its index at the upper corner is i0 - 41, at the lower i0 - 3): one object
up = [mk("Unsqueeze", ["c", "ax2"], ["c3"]), mk("Expand", ["c3", "e112"], ["ce"]), mk("Reshape", ["ce", "r8"], ["cr"]),
      mk("Mul", ["cr", "three_f"], ["y"])]
m12 = model([mk("Shape", ["x"], ["s"]), mk("Gather", ["s", "zero"], ["w"]), mk("Unsqueeze", ["w", "ax0"], ["w1"]),
             mk("Add", ["w1", "one1"], ["wp"]), mk("Concat", ["wp", "four1"], ["s2"], axis=0),
             mk("ConstantOfShape", ["s2"], ["f"], value=neg2), mk("Concat", ["f", "x", "x"], ["c"], axis=0)] + up,
            [vi("x", ["w", 4])], [vi("y", None)],
            [ints("zero", 0), ints("ax0", [0]), ints("one1", [1]), ints("four1", [4]), ints("ax2", [2]),
             ints("e112", [1, 1, 2]), ints("r8", [-1, 8]), init("three_f", np.array(3.0, np.float32))])
check("gmap_after_cut", m12, "w=2..40", [(5, 4), (40, 4), (2, 4), (27, 4)])

# gathers from a table that moves with w: x [3, w, 2] at (0, 1, 1, 0) along its axis 1 (the index bound w and the
# row stride 2w read at run time) and at rows (2, 0) along axis 0 (a gathered row of 2w points), each then doubled
m13 = model([mk("Gather", ["x", "i4"], ["g"], axis=1), mk("Add", ["g", "g"], ["y1"]),
             mk("Gather", ["x", "i2"], ["h"], axis=0), mk("Add", ["h", "h"], ["y2"])],
            [vi("x", [3, "w", 2])], [vi("y1", None), vi("y2", None)], [ints("i4", [0, 1, 1, 0]), ints("i2", [2, 0])])
check("gather_table_moves", m13, "w=2..40", [(3, 5, 2), (3, 40, 2), (3, 2, 2), (3, 17, 2)])

# a size that does shrink as w grows (10 - w): no one object (its arena sized at the upper corner would be too
# small below it), said, each binding compiled alone and right
m8 = model([mk("Shape", ["x"], ["s"]), mk("Gather", ["s", "zero1"], ["w"]), mk("Sub", ["ten", "w"], ["d"]),
            mk("ConstantOfShape", ["d"], ["f"], value=fill), mk("ReduceSum", ["f"], ["t"], keepdims=1),
            mk("Mul", ["x", "t"], ["y"])],
           [vi("x", ["w", 2])], [vi("y", None)], [ints("zero1", [0]), ints("ten", [10])])
for w in (3, 8, 5):
    p8 = check("shrinking_fill", m8, "w=2..8", [(w, 2)], one_object=False)
    s.check(f"shrinking_fill w={w}: a compile per binding, said", "may shrink as the box's symbols grow" in p8.stderr,
            p8.stderr[-500:])

# a quotient by a size cannot stay symbolic: said, and the binding compiled alone, right
m5 = model([mk("Shape", ["x"], ["s"]), mk("Gather", ["s", "zero"], ["w"]), mk("Cast", ["w"], ["wf"], to=TensorProto.FLOAT),
            mk("Div", ["hundred", "wf"], ["q"]), mk("Mul", ["x", "q"], ["y"])], [vi("x", ["w", 3])], [vi("y", None)],
           [ints("zero", 0), init("hundred", np.array(100.0, np.float32))])
path = save(m5, "quotient")
x = rng.standard_normal((7, 3)).astype(np.float32)
p, out = shapeset_run(path, {"x": x}, ["--shapeset", "w=2..9"], env, D)
s.check("quotient by a size: a compile per binding, said", p.returncode == 0 and "a compile per binding: error[UnboundSymbol]" in p.stderr
        and "graph input \"x\"" in p.stderr, p.stderr[-500:])
if p.returncode == 0:
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    s.check("quotient by a size vs onnxruntime", *close(np.load(os.path.join(out, "y.npy")), want, 1e-5, 1e-6))

s.close()
