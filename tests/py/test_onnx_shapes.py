"""ONNX import with the shapes you know (docs/onnx.md, "Dynamic shapes"):
graph inputs with dynamic dims, their shapes given at import (--input
files, --shape, --sym), every shape computation folded to constants by the
importer's constant evaluator, each rule checked against onnxruntime at two
shapes; the errors when a shape is missing or wrong; harp check."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import harp_test as ht  # noqa: E402

ht.onnx_or_skip()
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402
from onnx_models import init, mk, model, vi  # noqa: E402

S = ht.Suite("onnx_shapes")
D = ht.tempfile.mkdtemp()
rng = np.random.default_rng(11)
F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
NP = {F: np.float32, I64: np.int64, B: np.bool_}


def save(m, name):
    path = os.path.join(D, name + ".onnx")
    onnx.save(m, path)
    return path


def ints(*v):
    return np.array(v, np.int64)


def shape_of(x="x", out="s"):
    return mk("Shape", [x], [out])


def dim(i, out, s="s"):
    """Scalar dim i of shape vector s (Gather with a constant index)."""
    return [mk("Constant", [], [out + "_i"], value=helper.make_tensor(out + "_i", I64, [], [i])), mk("Gather", [s, out + "_i"], [out])]


def case(name, nodes, outputs, shapes, inputs=(("x", ["N", 4, "H", "W"], F),), inits=(), opset=17, backend="interp", rtol=1e-5):
    """Run the model at each of `shapes` ({input: shape}) with the inputs'
    data (their shapes reach the import) and compare every output with
    onnxruntime.  outputs: [(name, type)]; backend: one, or a list to run on each."""
    m = model(nodes, [vi(n, d, t) for n, d, t in inputs], [vi(o, None, t) for o, t in outputs], [init(k, v) for k, v in dict(inits).items()],
              opset)
    path = save(m, "".join(ch if ch.isalnum() else "_" for ch in name))
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for be, sh in [(b, sh) for b in ((backend,) if isinstance(backend, str) else backend) for sh in shapes]:
        feed = {n: (rng.standard_normal(sh[n]) * 2).astype(np.float32) if t == F else rng.integers(0, 5, sh[n]).astype(NP[t])
                for n, _, t in inputs}
        want = sess.run(None, feed)
        res, err = ht.run_model(path, feed, backend=be)
        tag = f"{name} ({be}) at {', '.join(f'{k}={v}' for k, v in sh.items())}"
        S.check(f"{tag}: runs", err is None, (err or "")[-500:])
        if err is not None:
            continue
        for (o, t), w in zip(outputs, want):
            got = res[ht.out_key(o)]
            if t == F:
                ok, why = ht.close(got, w, rtol=rtol, atol=rtol)
            else:
                ok, why = got.shape == w.shape and np.array_equal(got.astype(np.int64), w.astype(np.int64)), f"{got} != {w}"
            S.check(f"{tag}: {o} matches onnxruntime", ok, why)
    return path


def harp(*args, timeout=300):
    return ht.subprocess.run([ht.HARP, *args], capture_output=True, text=True, timeout=timeout)


def refused(name, p, *needles, code=1, out=None):
    S.check(f"{name}: exit code {code}", p.returncode == code, f"rc={p.returncode} {p.stderr[-300:]}")
    S.check(f"{name}: no crash", "Sanitizer" not in p.stderr and "Traceback" not in p.stderr, p.stderr[-300:])
    for nd in needles:
        S.check(f"{name}: says {nd!r}", nd in p.stderr, p.stderr.strip()[-500:])
    if out:
        S.check(f"{name}: no output", not os.path.exists(out) or not os.listdir(out))


TWO = [{"x": (1, 4, 6, 10)}, {"x": (2, 4, 12, 7)}]

# ---- folding rules, each against onnxruntime at two shapes ------------------------------
case("Shape, Gather, Mul, Unsqueeze, Slice, Concat into Reshape",
     [shape_of(), *dim(2, "h"), *dim(3, "w"), mk("Mul", ["h", "w"], ["hw"]), mk("Unsqueeze", ["hw", "ax0"], ["hw1"]),
      mk("Slice", ["s", "z", "two"], ["nc"]), mk("Concat", ["nc", "hw1"], ["shp"], axis=0), mk("Reshape", ["x", "shp"], ["y"])],
     [("y", F), ("shp", I64)], TWO, inits={"ax0": ints(0), "z": ints(0), "two": ints(2)})
case("Cast of sizes to float, Div, Floor, Ceil, Sqrt, Cast back",
     [shape_of(), *dim(2, "h"), *dim(3, "w"), mk("Cast", ["h"], ["hf"], to=F), mk("Cast", ["w"], ["wf"], to=F),
      mk("Div", ["hf", "k2"], ["half"]), mk("Floor", ["half"], ["fl"]), mk("Ceil", ["half"], ["ce"]), mk("Sqrt", ["hf"], ["sq"]),
      mk("Div", ["wf", "hf"], ["ratio"]), mk("Add", ["fl", "ce"], ["sum"]), mk("Cast", ["sum"], ["n"], to=I64),
      mk("Unsqueeze", ["n", "ax0"], ["n1"]), mk("Slice", ["x", "z", "n1", "two"], ["y"])],
     [("fl", F), ("ce", F), ("sq", F), ("ratio", F), ("n", I64), ("y", F)], TWO, inits={"k2": np.array(2, np.float32), "ax0": ints(0),
                                                                                      "z": ints(0), "two": ints(2)})
case("an anchor grid: Range, Expand, Concat of floats from sizes",
     [shape_of(), *dim(2, "h"), *dim(3, "w"), mk("Cast", ["h"], ["hf"], to=F), mk("Cast", ["w"], ["wf"], to=F),
      mk("Range", ["f0", "wf", "f1"], ["rx0"]), mk("Range", ["f0", "hf", "f1"], ["ry0"]), mk("Add", ["rx0", "half"], ["rx"]),
      mk("Add", ["ry0", "half"], ["ry"]), mk("Unsqueeze", ["h", "ax0"], ["h1"]), mk("Unsqueeze", ["w", "ax0"], ["w1"]),
      mk("Concat", ["h1", "w1"], ["hw"], axis=0), mk("Unsqueeze", ["rx", "ax0"], ["rx2"]), mk("Unsqueeze", ["ry", "ax1"], ["ry2"]),
      mk("Expand", ["rx2", "hw"], ["gx"]), mk("Expand", ["ry2", "hw"], ["gy"]), mk("Unsqueeze", ["gx", "ax2"], ["gx3"]),
      mk("Unsqueeze", ["gy", "ax2"], ["gy3"]), mk("Concat", ["gx3", "gy3"], ["grid"], axis=2), mk("Mul", ["x", "gx"], ["y"])],
     [("grid", F), ("y", F)], TWO,
     inits={"f0": np.array(0, np.float32), "f1": np.array(1, np.float32), "half": np.array(0.5, np.float32), "ax0": ints(0),
            "ax1": ints(1), "ax2": ints(2)})
case("ConstantOfShape of a computed shape, float and int",
     [shape_of(), mk("Slice", ["s", "two", "four"], ["hw"]), mk("ConstantOfShape", ["hw"], ["ones"], value=helper.make_tensor("v", F, [1], [1.5])),
      mk("ConstantOfShape", ["hw"], ["sevens"], value=helper.make_tensor("v", I64, [1], [7])), mk("Mul", ["x", "ones"], ["y"])],
     [("y", F), ("sevens", I64)], TWO, inits={"two": ints(2), "four": ints(4)})
case("negative Slice steps, Tile, Split, Transpose, reductions of a shape",
     [shape_of(), mk("Slice", ["s", "m1", "big", "z", "m1"], ["rev"]), mk("Slice", ["s", "m1", "big", "z", "m2"], ["rev2"]),
      mk("Tile", ["s", "two1"], ["tiled"]), mk("Split", ["s", "twotwo"], ["lo", "hi"], axis=0),
      mk("Reshape", ["s", "twobytwo"], ["sq"]), mk("Transpose", ["sq"], ["tr"], perm=[1, 0]), mk("Gather", ["sq", "one0"], ["row"], axis=0),
      mk("Gather", ["sq", "one0"], ["col"], axis=1),
      mk("ReduceProd", ["s"], ["prod"], keepdims=0), mk("ReduceSum", ["s", "z"], ["sum"], keepdims=1), mk("ReduceMax", ["s"], ["mx"], keepdims=0),
      mk("ReduceMin", ["s"], ["mn"], keepdims=0), mk("Unsqueeze", ["prod", "z"], ["prod1"]), mk("Reshape", ["x", "prod1"], ["y"])],
     [("rev", I64), ("rev2", I64), ("tiled", I64), ("lo", I64), ("hi", I64), ("tr", I64), ("row", I64), ("col", I64), ("prod", I64), ("sum", I64), ("mx", I64),
      ("mn", I64), ("y", F)], TWO,
     inits={"m1": ints(-1), "m2": ints(-2), "big": ints(-(1 << 62)), "z": ints(0), "two1": ints(2), "twotwo": ints(2, 2),
            "twobytwo": ints(2, 2), "one0": np.array(1, np.int64)}, opset=18)
case("Pad whose pads come from shapes (Add, Div, Mul, Sub, Mod)",
     [shape_of(), *dim(2, "h"), *dim(3, "w"), mk("Add", ["w", "k7"], ["w7"]), mk("Div", ["w7", "k8"], ["wq"]), mk("Mul", ["wq", "k8"], ["wr"]),
      mk("Sub", ["wr", "w"], ["pw"]), mk("Mod", ["h", "k8"], ["hm"]), mk("Sub", ["k8", "hm"], ["h8"]), mk("Mod", ["h8", "k8"], ["ph"]),
      mk("Unsqueeze", ["pw", "z"], ["pw1"]), mk("Unsqueeze", ["ph", "z"], ["ph1"]),
      mk("Concat", ["zeros3", "ph1", "zeros3", "pw1"], ["pads"], axis=0), mk("Pad", ["x", "pads"], ["y"])],
     [("y", F), ("pads", I64)], TWO, inits={"k7": np.array(7, np.int64), "k8": np.array(8, np.int64), "z": ints(0), "zeros3": ints(0, 0, 0)})
case("comparisons, Not, And, Or and Where of sizes",
     [shape_of(), *dim(0, "n"), *dim(2, "h"), *dim(3, "w"), mk("Equal", ["n", "one"], ["e"]), mk("Not", ["e"], ["ne"]),
      mk("Less", ["h", "w"], ["l"]), mk("Greater", ["h", "four"], ["g"]), mk("LessOrEqual", ["w", "h"], ["le"]),
      mk("GreaterOrEqual", ["h", "w"], ["ge"]), mk("And", ["l", "g"], ["a"]), mk("Or", ["e", "a"], ["o"]), mk("Xor", ["l", "ge"], ["xo"]),
      mk("Where", ["o", "h", "w"], ["pick"]), mk("Max", ["h", "w"], ["mx"]), mk("Min", ["h", "w"], ["mn"]), mk("Neg", ["h"], ["ng"]),
      mk("Abs", ["ng"], ["ab"]), mk("Neg", ["x"], ["nx"]), mk("Where", ["ne", "x", "nx"], ["y"]), mk("Less", ["h", "h"], ["lhh"]),
      mk("Greater", ["h", "six"], ["g6"]), mk("GreaterOrEqual", ["h", "twelve"], ["ge12"]), mk("Mod", ["ng", "eight"], ["negmod"]),
      mk("Mod", ["ng", "eight"], ["negfmod"], fmod=1), mk("Div", ["ng", "eight"], ["negdiv"])],
     [("e", B), ("ne", B), ("l", B), ("le", B), ("o", B), ("xo", B), ("pick", I64), ("mx", I64), ("mn", I64), ("ab", I64), ("y", F),
      ("lhh", B), ("g6", B), ("ge12", B), ("negmod", I64), ("negfmod", I64), ("negdiv", I64)],
     TWO, inits={"one": np.array(1, np.int64), "four": np.array(4, np.int64), "six": np.array(6, np.int64), "twelve": np.array(12, np.int64),
                 "eight": np.array(8, np.int64)}, backend=ht.BACKENDS)  # cpu: outputs that fold to constants at the binding
case("Resize by sizes and by scales computed from the shape",
     [shape_of(), mk("Slice", ["s", "z", "two"], ["nc"]), mk("Slice", ["s", "two", "four"], ["hw"]), mk("Mul", ["hw", "two"], ["hw2"]),
      mk("Concat", ["nc", "hw2"], ["sizes"], axis=0), mk("Resize", ["x", "", "", "sizes"], ["y"], mode="nearest"),
      mk("Cast", ["hw2"], ["hw2f"], to=F), mk("Cast", ["hw"], ["hwf"], to=F), mk("Div", ["hw2f", "hwf"], ["sc"]),
      mk("Concat", ["ones", "sc"], ["scales"], axis=0), mk("Resize", ["x", "", "scales"], ["y2"], mode="linear")],
     [("y", F), ("y2", F)], TWO, inits={"z": ints(0), "two": ints(2), "four": ints(4), "ones": np.ones(2, np.float32)}, opset=13)
case("Size, Cast and a flatten to the element count",
     [mk("Size", ["x"], ["n"]), mk("Cast", ["n"], ["nf"], to=F), mk("Reciprocal", ["nf"], ["inv"]), mk("Unsqueeze", ["n", "z"], ["n1"]),
      mk("Reshape", ["x", "n1"], ["flat"]), mk("Mul", ["flat", "inv"], ["y"])],
     [("y", F), ("n", I64)], TWO, inits={"z": ints(0)})
case("a positional table: Range, Mul, Sin, Cos, Concat",
     [shape_of(), *dim(1, "sl"), mk("Cast", ["sl"], ["slf"], to=F), mk("Range", ["f0", "slf", "f1"], ["pos"]),
      mk("Unsqueeze", ["pos", "ax1"], ["pos2"]), mk("Mul", ["pos2", "freq"], ["ang"]), mk("Sin", ["ang"], ["sn"]), mk("Cos", ["ang"], ["cs"]),
      mk("Concat", ["sn", "cs"], ["pe"], axis=1), mk("Add", ["x", "pe"], ["y"])],
     [("pe", F), ("y", F)], [{"x": (1, 5, 8)}, {"x": (2, 9, 8)}], inputs=(("x", ["N", "S", 8], F),),
     inits={"f0": np.array(0, np.float32), "f1": np.array(1, np.float32), "ax1": ints(1),
            "freq": np.array([1.0, 0.1, 0.01, 0.001], np.float32)})
case("NonZero of a folded mask, Squeeze, Gather of the data",
     [shape_of(), *dim(3, "w"), mk("Range", ["z", "w", "one"], ["r"]), mk("Greater", ["r", "two"], ["m"]), mk("NonZero", ["m"], ["nz"]),
      mk("Squeeze", ["nz", "z1"], ["idx"]), mk("Gather", ["x", "idx"], ["y"], axis=3)],
     [("y", F), ("idx", I64)], TWO, inits={"z": np.array(0, np.int64), "one": np.array(1, np.int64), "two": np.array(2, np.int64), "z1": ints(0)})
for ap in ("SAME_UPPER", "SAME_LOWER", "VALID"):
    case(f"Conv auto_pad={ap}, stride 2, on dynamic sizes", [mk("Conv", ["x", "cw"], ["y"], auto_pad=ap, strides=[2, 2], kernel_shape=[3, 3])],
         [("y", F)], TWO, inits={"cw": rng.standard_normal((3, 4, 3, 3)).astype(np.float32)}, rtol=1e-4)
    case(f"MaxPool auto_pad={ap}, stride 2, on dynamic sizes", [mk("MaxPool", ["x"], ["y"], auto_pad=ap, strides=[2, 2], kernel_shape=[3, 2])],
         [("y", F)], TWO)
for name, at in (("auto_pad=SAME_UPPER", dict(auto_pad="SAME_UPPER")), ("auto_pad=SAME_LOWER", dict(auto_pad="SAME_LOWER")),
                 ("auto_pad=VALID", dict(auto_pad="VALID")), ("output_shape", dict(output_shape=[13, 17]))):
    case(f"ConvTranspose {name}, stride 2, on dynamic sizes", [mk("ConvTranspose", ["x", "tw"], ["y"], strides=[2, 2], **at)], [("y", F)],
         [{"x": (1, 4, 6, 8)}, {"x": (2, 4, 7, 9)}] if name != "output_shape" else [{"x": (1, 4, 6, 8)}, {"x": (2, 4, 6, 8)}],
         inits={"tw": rng.standard_normal((4, 3, 3, 3)).astype(np.float32)}, rtol=1e-4)
squeeze = case("Squeeze of an axis that is 1 at the size given",
               [mk("MaxPool", ["x"], ["p"], kernel_shape=[2, 2], strides=[2, 2]), mk("AveragePool", ["p"], ["q"], kernel_shape=[3, 1], strides=[3, 1]),
                mk("Squeeze", ["q", "two"], ["y"])], [("y", F)], [{"x": (1, 4, 6, 10)}, {"x": (2, 4, 6, 16)}], inits={"two": ints(2)})
# one model on the cpu backend: the folded constants are weights of generated C
case("folded shapes on the cpu backend", [shape_of(), mk("Slice", ["s", "two", "four"], ["hw"]),
                                          mk("ConstantOfShape", ["hw"], ["ones"], value=helper.make_tensor("v", F, [1], [2.0])),
                                          mk("Mul", ["x", "ones"], ["y"]), mk("Cast", ["hw"], ["hwf"], to=F), mk("Sum", ["hwf", "hwf"], ["hw2"])],
     [("y", F), ("hw2", F)], TWO[:1], inits={"two": ints(2), "four": ints(4)}, backend="cpu" if "cpu" in ht.BACKENDS else "interp")

# ---- without the shape: symbols as far as they are affine, then a clear refusal ---------------
p = harp("dump", squeeze, "--dump", "tiny", "--dump-dir", os.path.join(D, "dump_sq"))
refused("Squeeze of a dynamic axis, no shape", p, "UnboundSymbol", 'node 2', "(Squeeze)", 'graph input "x"', "--shape x=<N>x4x<H>x<W>",
        out=os.path.join(D, "dump_sq"))
affine = save(model([mk("Shape", ["x"], ["s"]), mk("Relu", ["x"], ["r"]), mk("Slice", ["s", "z", "two"], ["nc"]), mk("Slice", ["s", "two", "four"], ["hw"]),
                     mk("Concat", ["nc", "hw"], ["shp"], axis=0), mk("Reshape", ["r", "shp"], ["y"])], [vi("x", ["N", 4, "H", "W"])], [vi("y", None)],
                    [init("z", ints(0)), init("two", ints(2)), init("four", ints(4))]), "affine")
p = harp("dump", affine, "--dump", "tiny", "--dump-dir", os.path.join(D, "dump_aff"))
S.check("affine shape arithmetic stays symbolic without shapes (harp dump)", p.returncode == 0, p.stderr[-300:])
p = harp("run", affine, "--random-inputs", "--out", os.path.join(D, "o_aff"))
refused("run with dynamic dims and no shape", p, "UnboundSymbol", 'graph input "x"', "--shape x=<N>x4x<H>x<W>", out=os.path.join(D, "o_aff"))
for cmd, extra in (("bench", ["--repeat", "1"]), ("compile", ["--target", "cpu", "-o", os.path.join(D, "pkg_aff")])):
    p = harp(cmd, affine, *extra)
    refused(f"{cmd} with dynamic dims and no shape", p, "UnboundSymbol", "--shape x=<N>x4x<H>x<W>")
S.check("compile with dynamic dims and no shape: no package", not os.path.exists(os.path.join(D, "pkg_aff")))
p = harp("run", affine, "--random-inputs", "--shape", "x=2x4x3x5", "--out", os.path.join(D, "o_aff2"))
S.check("run with --shape: runs", p.returncode == 0, p.stderr[-300:])
if p.returncode == 0:
    S.check("run with --shape: the output has the shape's size", np.load(os.path.join(D, "o_aff2", "y.npy")).shape == (2, 4, 3, 5))
p = harp("run", affine, "--random-inputs", "--sym", "N=3", "--sym", "H=2", "--sym", "W=2", "--out", os.path.join(D, "o_aff3"))
S.check("run with --sym for every dim_param: runs", p.returncode == 0 and np.load(os.path.join(D, "o_aff3", "y.npy")).shape == (3, 4, 2, 2),
        p.stderr[-300:])

# ---- each way of writing a dynamic dim ---------------------------------------------------------
kinds = helper.make_tensor_value_info("a", F, [1, 3])
for how, set_dim in (("-1", lambda d: d.__setattr__("dim_value", -1)), ("'?'", lambda d: d.__setattr__("dim_param", "?")),
                     ("''", lambda d: d.__setattr__("dim_param", "")), ("no value", lambda d: d.ClearField("dim_value"))):
    a = helper.make_tensor_value_info("a", F, [1, 3])
    set_dim(a.type.tensor_type.shape.dim[0])
    path = save(model([mk("Relu", ["a"], ["y"])], [a], [vi("y", None)], []), "kind" + str(len(os.listdir(D))))
    out = os.path.join(D, "o_kind" + str(len(os.listdir(D))))
    p = harp("run", path, "--random-inputs", "--out", out)
    refused(f"a dim written {how}, no shape", p, "UnboundSymbol", 'graph input "a"', "--shape a=<?>x3", out=out)
    p = harp("run", path, "--random-inputs", "--shape", "a=5x3", "--out", out)
    S.check(f"a dim written {how}, --shape a=5x3: runs", p.returncode == 0 and np.load(os.path.join(out, "y.npy")).shape == (5, 3), p.stderr[-300:])
noshape = save(model([mk("Relu", ["a"], ["y"])], [helper.make_tensor_value_info("a", F, None)], [vi("y", None)], []), "noshape")
p = harp("run", noshape, "--random-inputs", "--out", os.path.join(D, "o_ns"))
refused("an input with no shape at all", p, "Unsupported", 'graph input "a" declares no shape', "--shape a=")
p = harp("run", noshape, "--random-inputs", "--shape", "a=2x2x2", "--out", os.path.join(D, "o_ns2"))
S.check("an input with no shape, --shape gives its rank too", p.returncode == 0 and np.load(os.path.join(D, "o_ns2", "y.npy")).shape == (2, 2, 2),
        p.stderr[-300:])

# ---- wrong shapes: clear errors -----------------------------------------------------------------
two = save(model([mk("Add", ["a", "b"], ["y"])], [vi("a", ["batch", 3]), vi("b", ["batch", 3])], [vi("y", None)], []), "two")
for name, args, needles in (
        ("--shape against a static dim", ["--shape", "a=2x4"], ("InputMismatch", 'graph input "a": dim 1 is 3 in the model', "has 4")),
        ("--shape of another rank", ["--shape", "a=2x3x1"], ("InputMismatch", "has rank 2", "rank 3")),
        ("--shape of no input", ["--shape", "nope=1x3"], ("UsageError", "--shape nope", "no graph input")),
        ("--shape malformed", ["--shape", "a=2xx3"], ("UsageError", "--shape a=2xx3")),
        ("--shape without a name", ["--shape", "=2x3"], ("UsageError", "NAME=DIMS")),
        ("two shapes disagreeing on a dim_param", ["--shape", "a=2x3", "--shape", "b=4x3"], ("InputMismatch", 'dim "batch"', "2")),
        ("--sym against --shape", ["--shape", "a=2x3", "--sym", "batch=5"], ("InputMismatch", 'dim "batch"')),
        ("dim above 2^31", ["--shape", "a=4294967296x3"], ("UsageError", "2^31"))):
    out = os.path.join(D, "o_bad" + str(len(os.listdir(D))))
    refused(name, harp("run", two, "--random-inputs", "--out", out, *args), *needles, out=out)
big = save(model([mk("Relu", ["a"], ["y"])], [vi("a", ["n", "m"])], [vi("y", None)], []), "big")
refused("absurd --shape", harp("run", big, "--random-inputs", "--shape", "a=200000x200000", "--out", os.path.join(D, "o_big")), "LimitExceeded",
        "2^34", out=os.path.join(D, "o_big"))
p = harp("run", two, "--random-inputs", "--shape", "a=4x3", "--out", os.path.join(D, "o_two"))
S.check("a dim_param given through one input binds the other", p.returncode == 0 and np.load(os.path.join(D, "o_two", "y.npy")).shape == (4, 3),
        p.stderr[-300:])
np.save(os.path.join(D, "a53.npy"), np.ones((5, 3), np.float32))
p = harp("run", two, "--random-inputs", "--input", f"a={os.path.join(D, 'a53.npy')}", "--out", os.path.join(D, "o_two2"))
S.check("an --input file's shape binds the other input's dim too", p.returncode == 0 and np.load(os.path.join(D, "o_two2", "y.npy")).shape == (5, 3),
        p.stderr[-300:])
np.save(os.path.join(D, "a54.npy"), np.ones((5, 4), np.float32))
p = harp("run", two, "--random-inputs", "--input", f"a={os.path.join(D, 'a54.npy')}", "--out", os.path.join(D, "o_two3"))
refused("an --input file of the wrong shape", p, "InputMismatch", 'graph input "a": dim 1 is 3', out=os.path.join(D, "o_two3"))

# ---- harp check ----------------------------------------------------------------------------------
then_g = helper.make_graph([mk("FancyOp", ["x"], ["t"])], "then", [], [vi("t", None)])
else_g = helper.make_graph([mk("Identity", ["x"], ["e"])], "else", [], [vi("e", None)])
chk = save(model([mk("Shape", ["x"], ["s"]), *dim(2, "h"), mk("Cast", ["h"], ["hf"], to=F), mk("Mul", ["x", "hf"], ["y"]),
                  mk("Mod", ["x", "x"], ["m1"], name="mod1"), mk("Relu", ["m1"], ["m2"], name="after"), mk("Neg", ["x"], ["nx"]), mk("Mod", ["nx", "x"], ["m3"], name="mod2"),
                  mk("Greater", ["h", "two"], ["c"]), mk("If", ["c"], ["z"], then_branch=then_g, else_branch=else_g),
                  mk("Sum", ["m2", "m3"], ["out"])],
                 [vi("x", ["N", 4, "H", 8])], [vi("out", None), vi("z", None)], [init("two", ints(2))], opset=13), "check")
p = harp("check", chk)
o = p.stdout
S.check("check: exit 1 for a model harp does not import", p.returncode == 1, p.stderr[-300:])
for needle in ("opset 13", "in 3 graphs", "x: float [N, 4, H, 8]: dynamic dims 0, 2; not given: --shape x=<N>x4x<H>x8",
               "FancyOp: 1 node, first node", "then_branch: node 0",
               '(Mul): value "hf" (used as a tensor) is H', "which harp needs as a number at import", '"mod1" (Mod)', '"mod2" (Mod)',
               "nodes skipped (an input comes from a node above):", "verdict: harp does not import this model"):
    S.check(f"check lists {needle!r}", needle in o, o[-1500:])
S.check("check: If is not among the ops harp does not have", "If: 1 node" not in o, o[-1500:])
p = harp("check", chk, "--shape", "x=1x4x6x8")
S.check("check with --shape: no node needs a value any more", "nodes that need a dynamic dim's value (0)" in p.stdout, p.stdout[-800:])
S.check("check with --shape: the input's dims are given", "given by a shape" in p.stdout, p.stdout[-800:])
good = save(model([mk("Shape", ["x"], ["s"]), *dim(2, "h"), mk("Cast", ["h"], ["hf"], to=F), mk("Mul", ["x", "hf"], ["y"])],
                  [vi("x", ["N", 4, "H", 8])], [vi("y", None)], []), "good")
p = harp("check", good, "--shape", "x=1x4x6x8")
S.check("check: exit 0 for a model harp imports", p.returncode == 0 and "verdict: harp imports this model" in p.stdout, p.stdout[-600:] + p.stderr)
p = harp("check", affine)
S.check("check: imports with dynamic dims left, says they must be given", p.returncode == 0 and "must be given to run it" in p.stdout,
        p.stdout[-600:])
with open(os.path.join(D, "junk.onnx"), "wb") as f:
    f.write(b"\xff\xfe garbage" * 20)
refused("check of a file that is not ONNX", harp("check", os.path.join(D, "junk.onnx")), "ParseError")
refused("check of a model of another kind", harp("check", os.path.join(ht.MODELS, "seed001_gemm.json")), "UsageError", ".onnx")
S.check("harp --help lists check", "check" in harp("--help").stdout)
refused("--shape on a Tiny IR model", harp("dump", os.path.join(ht.MODELS, "seed001_gemm.json"), "--dump", "tiny", "--shape", "A=4x3"),
        "UsageError", "--sym")
S.close()
