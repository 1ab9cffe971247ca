"""The ONNX frontend's error paths through the CLI: each bad file or bad
node is a clear error (naming the node where there is one), exit code 1,
and no output file."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import harp_test as ht  # noqa: E402

ht.onnx_or_skip(runtime=False)
import onnx  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402
from onnx_models import init, mk, model, vi  # noqa: E402

S = ht.Suite("onnx_errors")
D = ht.tempfile.mkdtemp()
x = np.ones((2, 3), np.float32)
np.save(os.path.join(D, "x.npy"), x)


def expect(name, path, *needles, inputs=True, cmd="run", args=()):
    out = os.path.join(D, "out_" + "".join(ch if ch.isalnum() else "_" for ch in name))
    more, args = args, [ht.HARP, cmd, path, "--out", out] + (["--input", f"x={os.path.join(D, 'x.npy')}"] if inputs and cmd == "run" else [])
    args += list(more)
    if cmd == "bench":
        args = [ht.HARP, "bench", path, "--random-inputs", "--repeat", "1"]
    p = ht.subprocess.run(args, capture_output=True, text=True, timeout=120)
    S.check(f"{name}: exit code 1", p.returncode == 1, f"rc={p.returncode} {p.stderr[-300:]}")
    S.check(f"{name}: no crash", "Sanitizer" not in p.stderr and "Traceback" not in p.stderr, p.stderr[-300:])
    for nd in needles:
        S.check(f"{name}: says {nd!r}", nd in p.stderr, p.stderr.strip()[-400:])
    S.check(f"{name}: no output", not os.path.exists(out) or not os.listdir(out), os.listdir(out) if os.path.exists(out) else "")


def save(m, name):
    path = os.path.join(D, name + ".onnx")
    with open(path, "wb") as f:
        f.write(m if isinstance(m, bytes) else m.SerializeToString())
    return path


def one(nodes, inits=(), opset=17, inputs=None, outputs=None):
    return model(nodes, inputs or [vi("x", [2, 3])], outputs or [vi("y", None)], [init(k, v) for k, v in dict(inits).items()], opset)


good = one([mk("Relu", ["x"], ["y"])])
raw = good.SerializeToString()
expect("missing file", os.path.join(D, "nope.onnx"), "IoError")
expect("empty file", save(b"", "empty"), "ParseError")
expect("not protobuf", save(b"\xff\xff\xff\xff garbage " * 10, "garbage"), "ParseError", "not an ONNX model")
expect("truncated", save(raw[: len(raw) // 2], "trunc"), "ParseError")
expect("json renamed", save(b'{"uops": []}', "json"), "ParseError")
expect("unknown op", save(one([mk("Relu", ["x"], ["r"], name="first"), mk("FancyOp", ["r"], ["y"], name="my/node")]), "unk"),
       "UnknownOp", 'node 1 "my/node" (FancyOp)')
expect("unknown domain", save(one([mk("Relu", ["x"], ["y"], domain="com.microsoft")]), "dom"), "Unsupported", "com.microsoft")
expect("opset too new", save(one([mk("Relu", ["x"], ["y"])], opset=99), "opset"), "Unsupported", "opset 99")
expect("no default opset", save(helper.make_model(helper.make_graph([mk("Relu", ["x"], ["y"])], "g", [vi("x", [2, 3])], [vi("y", None)]),
                                                  opset_imports=[helper.make_opsetid("com.x", 1)], ir_version=8), "noopset"),
       "Unsupported", "default ONNX domain")
expect("bad attribute type", save(one([mk("Softmax", ["x"], ["y"], axis=1.5)]), "attr"), "InvalidArgument", "attribute axis",
       "(Softmax)")
expect("axis out of range", save(one([mk("Softmax", ["x"], ["y"], axis=5)]), "axis"), "InvalidArgument", "axis 5")
expect("rank mismatch", save(one([mk("Conv", ["x", "w"], ["y"])], {"w": np.ones((1, 1, 1, 1), np.float32)}), "rank"),
       "rank 4", "(Conv)")
expect("shape mismatch", save(one([mk("MatMul", ["x", "w"], ["y"])], {"w": np.ones((4, 2), np.float32)}), "mm"), "(MatMul)",
       "inner dimensions")
expect("dangling input", save(one([mk("Add", ["x", "nowhere"], ["y"])]), "dangle"), "DanglingRef", "nowhere")
expect("undefined output", save(one([mk("Relu", ["x"], ["r"])]), "noout"), "DanglingRef", '"y"')
expect("runtime reshape shape", save(one([mk("Reshape", ["x", "x"], ["y"])]), "rshape"), "(Reshape)", "constant")
expect("Erf of integers", save(one([mk("Erf", ["x"], ["y"])], inputs=[vi("x", [2, 3], TensorProto.INT32)]), "erfi"), "(Erf)",
       "floating-point")
expect("absurd input dim", save(one([mk("Relu", ["x"], ["y"])], inputs=[vi("x", [1 << 40, 3])]), "dim"), "LimitExceeded", "2^31")
expect("unsupported dtype input", save(one([mk("Relu", ["x"], ["y"])], inputs=[vi("x", [2, 3], TensorProto.STRING)]), "str"),
       "Unsupported", "string")
# the layer ops of the backend test models, misused
x4 = [vi("x", [1, 2, 3, 3])]
expect("LRN size 0", save(one([mk("LRN", ["x"], ["y"], size=0)], inputs=x4), "lrn0"), "InvalidArgument", "(LRN)", "size")
expect("LRN rank 2", save(one([mk("LRN", ["x"], ["y"], size=3)]), "lrn2"), "AxisSizeMismatch", "(LRN)", "rank")
expect("4-D pooling", save(one([mk("MaxPool", ["x"], ["y"], kernel_shape=[1, 1, 1, 1])], inputs=[vi("x", [1, 1, 2, 2, 2, 2])]), "p4"),
       "Unsupported", "(MaxPool)", "4-D pooling")
expect("pool pads count", save(one([mk("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], pads=[1, 1])], inputs=x4), "pp"),
       "InvalidArgument", "(AveragePool)", "pads must have 4 values")
expect("pool window too large", save(one([mk("AveragePool", ["x"], ["y"], kernel_shape=[5, 5], count_include_pad=0)], inputs=x4),
                                      "pw"), "AxisSizeMismatch", "(AveragePool)", "larger than")
expect("reflect too wide", save(one([mk("Pad", ["x", "p"], ["y"], mode="reflect")], {"p": np.array([0, 3, 0, 0], np.int64)}), "refl"),
       "Unsupported", "(Pad)", "reflect")
expect("Dropout training", save(one([mk("Dropout", ["x", "r", "t"], ["y"])], {"r": np.array(0.5, np.float32),
                                                                              "t": np.array(True)}), "drop"),
       "Unsupported", "(Dropout)", "training_mode")
expect("ConstantOfShape 2^29", save(one([mk("ConstantOfShape", ["s"], ["c"]), mk("Add", ["x", "c"], ["y"])],
                                        {"s": np.array([1 << 29], np.int64)}), "cos"), "LimitExceeded", "(ConstantOfShape)")
expect("opset 6 broadcast misfit", save(one([mk("Add", ["x", "b"], ["y"], broadcast=1, axis=1)], {"b": np.ones((3, 2), np.float32)},
                                            opset=6), "bc6"), "AxisSizeMismatch", "(Add)", "axis 1")
# an initializer whose raw data disagrees with its dims
t = helper.make_tensor("w", TensorProto.FLOAT, [3, 4], np.ones(12, np.float32).tobytes(), raw=True)
t.raw_data = t.raw_data[:20]
expect("raw_data too short", save(helper.make_model(helper.make_graph([mk("MatMul", ["x", "w"], ["y"])], "g", [vi("x", [2, 3])], [vi("y", None)], [t]),
                              opset_imports=[helper.make_opsetid("", 17)], ir_version=8), "short"),
       "InvalidArgument", '"w"', "20 bytes")
t2 = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[1 << 40, 4])
expect("absurd initializer dims", save(helper.make_model(helper.make_graph([mk("Add", ["x", "w"], ["y"])], "g", [vi("x", [2, 3])],
                                                                          [vi("y", None)], [t2]),
                                                         opset_imports=[helper.make_opsetid("", 17)], ir_version=8), "bigw"),
       "LimitExceeded")
# external data
t3 = helper.make_tensor("w", TensorProto.FLOAT, [3], [1, 2, 3])
t3.ClearField("float_data")
t3.data_location = TensorProto.EXTERNAL
e = t3.external_data.add()
e.key, e.value = "location", "../../etc/passwd"
expect("external data outside the model's directory", save(helper.make_model(helper.make_graph([mk("Add", ["x", "w"], ["y"])], "g", [vi("x", [2, 3])],
                                                                [vi("y", None)], [t3]),
                                               opset_imports=[helper.make_opsetid("", 17)], ir_version=8), "ext"),
       "InvalidArgument", "outside the model's directory")
# bench and compile refuse the same file the same way
expect("bench: unknown op", os.path.join(D, "unk.onnx"), "UnknownOp", cmd="bench")
# what harp would compute differently is refused, not approximated
# (int8 / uint8 are harp dtypes since issue 28: test_onnx_quant.py checks their Cast)
expect("cast to uint16", save(one([mk("Cast", ["x"], ["y"], to=TensorProto.UINT16, name="c16")]), "cast16"), "Unsupported",
       'node 0 "c16" (Cast)', "does not wrap")
xi = vi("x", [2, 3], TensorProto.INT32)
expect("integer Div", save(one([mk("Div", ["x", "x"], ["y"], name="d")], inputs=[xi]), "idiv"), "Unsupported", "integer Div", inputs=False)
expect("Mod at run time", save(one([mk("Mod", ["x", "x"], ["y"], name="m")], opset=13), "mod"), "Unsupported", "(Mod)")
expect("Attention window", save(one([mk("Attention", ["x", "x", "x"], ["y"], left_window_size=2, name="a")], opset=24,
                                    inputs=[vi("x", [1, 1, 2, 3])]), "attw"), "Unsupported", "sliding windows", inputs=False)
expect("folded shapes that do not broadcast", save(one(
    [mk("Shape", ["x"], ["s"]), mk("Slice", ["s", "z", "o"], ["a"]), mk("Concat", ["s", "a"], ["b"], axis=0), mk("Add", ["s", "b"], ["y"], name="add")],
    inits={"z": np.array([0], np.int64), "o": np.array([1], np.int64)}), "fold"), "BroadcastMismatch", 'node 3 "add" (Add)')
# found by mutating onnx's node tests (each failed before: a crash, or an InternalError with exit 2)
expect("Concat of an absent input", save(one([mk("Concat", [""], ["y"], axis=0, name="cat")]), "cat0"), "ArityMismatch",
       'node 0 "cat" (Concat)', "input 0 is empty")
np.save(os.path.join(D, "x21.npy"), np.ones((2, 1), np.float32))
# A dynamic dim that the input's data makes 1 against a fixed size: the
# import specialises on the data's shape (docs/onnx.md), and [2, 1] + [4]
# broadcasts to [2, 4] as numpy and onnxruntime have it.  (Before shapes
# reached the import, the symbol was bound after it and this was refused.)
symb = save(one([mk("Add", ["x", "w"], ["y"], name="add")], inits={"w": np.arange(4, dtype=np.float32)}, inputs=[vi("x", [2, "n"])]), "symb")
sout = os.path.join(D, "out_symb")
p = ht.subprocess.run([ht.HARP, "run", symb, "--out", sout, "--input", f"x={os.path.join(D, 'x21.npy')}"], capture_output=True, text=True)
S.check("dynamic dim given 1 by the data, against a fixed size: runs", p.returncode == 0, p.stderr[-300:])
if p.returncode == 0:
    S.check("... and broadcasts as numpy", np.array_equal(np.load(os.path.join(sout, "y.npy")), np.ones((2, 1), np.float32) + np.arange(4)))
pkv = [vi("q", [1, 2, 16]), vi("k", [1, 3, 8]), vi("v", [1, 3, 8]), vi("pk", [1, 2, 3, 4]), vi("pv", [1, "h", 3, 4])]
attpv = save(one([mk("Attention", ["q", "k", "v", "", "pk", "pv"], ["y"], q_num_heads=4, kv_num_heads=2, name="a")], opset=23, inputs=pkv),
             "attpv")
# a dynamic dim no option gives: no silent default of 1, the option to give
expect("Attention past_value heads dynamic, no shape given", attpv, "UnboundSymbol", 'graph input "pv"', "--shape pv=1x<h>x3x4",
       inputs=False, args=["--random-inputs"])
for how in (["--shape", "pv=1x1x3x4"], ["--sym", "h=1"]):
    expect(f"Attention past_value heads given as 1 ({how[0]})", attpv, "AxisSizeMismatch", 'node 0 "a" (Attention)', inputs=False,
           args=["--random-inputs"] + how)
for op, at in (("Split", dict(axis=0, num_outputs=1)), ("Hardmax", {}), ("ArgMax", {}), ("ArgMin", dict(axis=-1))):
    expect(f"{op} of a scalar", save(one([mk(op, ["s"], ["y"], name="n0", **at)], opset=18, inputs=[vi("s", [])]), "scal" + op),
           "InvalidArgument", f'node 0 "n0" ({op})', "scalar", inputs=False, args=["--random-inputs"])
expect("Reshape of a folded shape to a wrong count", save(one(
    [mk("Shape", ["x"], ["s"]), mk("Reshape", ["s", "to"], ["r"], name="rs"), mk("Equal", ["r", "r"], ["y"])],
    inits={"to": np.array([3], np.int64)}), "foldrs"), "AxisSizeMismatch", 'node 1 "rs" (Reshape)', "2 elements to 3")
pk2 = [vi("q", [1, 2, 16]), vi("k", [1, 3, 8]), vi("v", [1, 3, 8]), vi("pk", [4, 5]), vi("pv", [1, 2, 3, 4])]
expect("Attention past_key of rank 2", save(one([mk("Attention", ["q", "k", "v", "", "pk", "pv"], ["y"], q_num_heads=4, kv_num_heads=2, name="a")],
                                                opset=23, inputs=pk2), "attpk2"), "AxisSizeMismatch", "rank 4", inputs=False,
       args=["--random-inputs"])
for op in ("LpPool", "MaxPool", "AveragePool"):
    expect(f"{op} of bool", save(one([mk(op, ["b"], ["y"], kernel_shape=[2], name="pl")], opset=18, inputs=[vi("b", [1, 3, 8], TensorProto.BOOL)]),
                                 "boolpool" + op), "DtypeMismatch", 'node 0 "pl"', "not bool", inputs=False, args=["--random-inputs"])
S.close()
