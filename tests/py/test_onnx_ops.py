"""The ONNX frontend op by op: a tiny graph per op (onnx.helper), run (ht.run_model:
in process, else `harp run`) on the interpreter (and the cpu backend for a few),
compared with onnxruntime; names that are not identifiers; symbolic dims;
--param overriding an initializer."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import harp_test as ht  # noqa: E402

ht.onnx_or_skip()
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx_models import init, mk, model, vi  # noqa: E402
ht.compiled_only()  # the ops' compiled numbers on the cpu backend, not tier 0's (harp_test.py)

rng = np.random.default_rng(1)
S = ht.Suite("onnx_ops")
I64 = onnx.TensorProto.INT64


def rand(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def ints(*v):
    return np.array(v, np.int64)


def case(name, nodes, inputs, inits=(), opset=17, backends=("interp",), out_shape=None, harp_inputs=None, extra=(),
         out_type=onnx.TensorProto.FLOAT):
    """inputs: {name: array}; the single output is 'y'."""
    m = model(nodes, [vi(k, v.shape, onnx.helper.np_dtype_to_tensor_dtype(v.dtype)) for k, v in inputs.items()],
              [vi("y", out_shape, out_type)], [init(k, v) for k, v in dict(inits).items()], opset=opset)
    path = os.path.join(ht.tempfile.mkdtemp(), "m.onnx")
    onnx.save(m, path)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, inputs)[0]
    for be in backends:
        if extra:  # CLI flags: `harp run`
            p, d = ht.run(path, harp_inputs or inputs, backend=be, extra=list(extra))
            outs, err = (None, p.stderr.strip()) if p.returncode else ({"y": np.load(os.path.join(d, "y.npy"))}, None)
        else:
            outs, err = ht.run_model(path, harp_inputs or inputs, backend=be)
        S.check(f"{name} {be}: runs", err is None, (err or "")[-600:])
        if err is None:
            got = outs["y"]
            ok, why = ht.close(got, want.astype(np.float32) if want.dtype == np.float64 else want)
            S.check(f"{name} {be}: matches onnxruntime", ok, why)


x4 = rand(2, 3, 6, 6)
x2 = rand(4, 5)
x3 = rand(2, 4, 8)
# elementwise, broadcasting
for op in ("Relu", "Sigmoid", "Tanh", "Exp", "Neg", "Abs"):
    case(op, [mk(op, ["x"], ["y"])], {"x": x2})
case("Sqrt", [mk("Sqrt", ["x"], ["y"])], {"x": np.abs(x2) + 0.1})
case("Reciprocal", [mk("Reciprocal", ["x"], ["y"])], {"x": np.abs(x2) + 0.5})
case("Log", [mk("Log", ["x"], ["y"])], {"x": np.abs(x2) + 0.5})
for op in ("Add", "Sub", "Mul", "Div", "Max", "Min"):
    case(op + " broadcast", [mk(op, ["x", "b"], ["y"])], {"x": x3}, {"b": rand(4, 1) + 3})
case("Add scalar init", [mk("Add", ["x", "s"], ["y"])], {"x": x2}, {"s": np.array(2.5, np.float32)})
case("Mul [1] init", [mk("Mul", ["s", "x"], ["y"])], {"x": x2}, {"s": np.array([0.5], np.float32)})
case("Pow 2", [mk("Pow", ["x", "e"], ["y"])], {"x": x2}, {"e": np.array(2.0, np.float32)})
case("Pow 0.5", [mk("Pow", ["x", "e"], ["y"])], {"x": np.abs(x2)}, {"e": np.array(0.5, np.float32)})
case("Clip inputs", [mk("Clip", ["x", "lo", "hi"], ["y"])], {"x": x2}, {"lo": np.array(0, np.float32), "hi": np.array(0.5, np.float32)})
case("Clip max only", [mk("Clip", ["x", "", "hi"], ["y"])], {"x": x2}, {"hi": np.array(0.5, np.float32)})
case("Clip opset 6 attrs", [mk("Clip", ["x"], ["y"], min=-0.5, max=0.5)], {"x": x2}, opset=10)
case("Gelu", [mk("Gelu", ["x"], ["y"])], {"x": x2}, opset=20)
case("Erf GELU", [mk("Mul", ["x", "h"], ["xh"]), mk("Div", ["x", "r2"], ["d"]), mk("Erf", ["d"], ["e"]), mk("Add", ["e", "one"], ["a"]),
                  mk("Mul", ["xh", "a"], ["y"])], {"x": x2},
     {"h": np.array(0.5, np.float32), "r2": np.array(np.sqrt(2), np.float32), "one": np.array(1, np.float32)})
# Erf on its own (a composite: Taylor below 1/2, Abramowitz-Stegun 7.1.26 above),
# wide range with the edges; fp16 GELU with the constants stored in fp16 (PyTorch's
# half export: 1.4140625 for sqrt 2) still folds to one GELU; a GELU whose partial
# values are also outputs (the pattern breaks: what it holds is computed)
xe = np.concatenate([np.linspace(-7, 7, 57), [0, 1e-7, -3e-5, 0.4999, 0.5, 0.5001, 3.9, np.inf, -np.inf]]).astype(np.float32)
case("Erf", [mk("Erf", ["x"], ["y"])], {"x": xe.reshape(6, 11)}, backends=("interp", "cpu"))
case("Erf fp16", [mk("Erf", ["x"], ["y"])], {"x": xe.reshape(6, 11).astype(np.float16)}, backends=("interp", "cpu"),
     out_type=onnx.TensorProto.FLOAT16)
h16 = {"h": np.array(0.5, np.float16), "r2": np.array(np.sqrt(2), np.float16), "one": np.array(1, np.float16)}
gelu16 = [mk("Mul", ["x", "h"], ["xh"]), mk("Div", ["x", "r2"], ["d"]), mk("Erf", ["d"], ["e"]), mk("Add", ["e", "one"], ["a"]),
          mk("Mul", ["xh", "a"], ["y"])]
case("Erf GELU fp16 constants", gelu16, {"x": x2.astype(np.float16)}, h16, backends=("interp", "cpu"),
     out_type=onnx.TensorProto.FLOAT16)
gp = os.path.join(ht.tempfile.mkdtemp(), "g16.onnx")
onnx.save(model(gelu16, [vi("x", x2.shape, onnx.TensorProto.FLOAT16)], [vi("y", None, onnx.TensorProto.FLOAT16)],
                [init(k, v) for k, v in h16.items()]), gp)
td = ht.tempfile.mkdtemp()
p, d = ht.run(gp, {"x": x2.astype(np.float16)}, extra=["--dump", "tiny", "--dump-dir", td])
uops = [u["uop"] for u in __import__("json").load(open(os.path.join(td, "tiny.json")))["uops"]] if p.returncode == 0 else []
S.check("Erf GELU fp16 constants: one GELU uop", p.returncode == 0 and uops.count("GELU") == 1 and "EXP" not in uops,
        p.stderr[-300:] + str(uops))
broken = [mk("Div", ["x", "r2"], ["d"]), mk("Erf", ["d"], ["e"]), mk("Add", ["e", "one"], ["a"]), mk("Mul", ["x", "a"], ["m"]),
          mk("Mul", ["m", "h"], ["y"]), mk("Identity", ["e"], ["e_out"]), mk("Identity", ["a"], ["a_out"])]
bp = os.path.join(ht.tempfile.mkdtemp(), "broken.onnx")
onnx.save(model(broken, [vi("x", x2.shape)], [vi("y", None), vi("e_out", None), vi("a_out", None)],
                [init(k, v.astype(np.float32)) for k, v in h16.items()]), bp)
bw = ort.InferenceSession(bp, providers=["CPUExecutionProvider"]).run(None, {"x": x2})
for be in ("interp", "cpu"):
    p, d = ht.run(bp, {"x": x2}, backend=be)
    S.check(f"GELU pattern broken off {be}: runs", p.returncode == 0, p.stderr[-400:])
    for name, w in zip(("y", "e_out", "a_out"), bw):
        if p.returncode == 0:
            S.check(f"GELU pattern broken off {be}: {name} matches onnxruntime", *ht.close(np.load(os.path.join(d, f"{name}.npy")), w))
case("Where Greater", [mk("Greater", ["x", "z"], ["c"]), mk("Where", ["c", "x", "z"], ["y"])], {"x": x2}, {"z": np.array(0, np.float32)})
case("Identity Dropout", [mk("Identity", ["x"], ["i"]), mk("Dropout", ["i"], ["y"])], {"x": x2})
case("Cast", [mk("Cast", ["x"], ["h"], to=onnx.TensorProto.FLOAT16), mk("Cast", ["h"], ["y"], to=onnx.TensorProto.FLOAT)], {"x": x2})
# contractions
case("MatMul batched broadcast", [mk("MatMul", ["x", "w"], ["y"])], {"x": x3}, {"w": rand(8, 3)}, backends=("interp", "cpu"))
case("MatMul vector", [mk("MatMul", ["x", "w"], ["y"])], {"x": x3}, {"w": rand(8)})
case("Gemm transA transB alpha beta", [mk("Gemm", ["a", "b", "c"], ["y"], transA=1, transB=1, alpha=0.5, beta=2.0)],
     {"a": rand(5, 4)}, {"b": rand(3, 5), "c": rand(3)})
case("Conv strides pads dilations group bias", [mk("Conv", ["x", "w", "b"], ["y"], strides=[2, 1], pads=[1, 0, 2, 1],
                                                   dilations=[1, 2], group=3)], {"x": rand(1, 6, 9, 9)},
     {"w": rand(6, 2, 3, 3), "b": rand(6)}, backends=("interp", "cpu"))
case("Conv auto_pad SAME_UPPER", [mk("Conv", ["x", "w"], ["y"], auto_pad="SAME_UPPER", strides=[2, 2])], {"x": rand(1, 3, 7, 7)},
     {"w": rand(4, 3, 3, 3)})
case("Conv auto_pad SAME_LOWER", [mk("Conv", ["x", "w"], ["y"], auto_pad="SAME_LOWER", kernel_shape=[2, 2])], {"x": rand(1, 3, 6, 6)},
     {"w": rand(4, 3, 2, 2)})
bn = {"s": rand(3) + 2, "b": rand(3), "m": rand(3), "v": np.abs(rand(3)) + 0.5}
case("BatchNormalization", [mk("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3)], {"x": x4}, bn,
     backends=("interp", "cpu"))
case("MaxPool pads", [mk("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])], {"x": x4})
case("MaxPool ceil_mode", [mk("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)], {"x": rand(1, 2, 7, 7)})
case("AveragePool count_include_pad", [mk("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1)],
     {"x": x4})
case("AveragePool", [mk("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2])], {"x": x4})
case("GlobalAveragePool Flatten", [mk("GlobalAveragePool", ["x"], ["g"]), mk("Flatten", ["g"], ["y"])], {"x": x4})
case("GlobalMaxPool", [mk("GlobalMaxPool", ["x"], ["y"])], {"x": x4})
case("Softmax axis 1", [mk("Softmax", ["x"], ["y"], axis=1)], {"x": x3})
case("LayerNormalization", [mk("LayerNormalization", ["x", "g", "b"], ["y"], epsilon=1e-3)], {"x": x3}, {"g": rand(8), "b": rand(8)})
case("ReduceMean attr axes", [mk("ReduceMean", ["x"], ["y"], axes=[1], keepdims=0)], {"x": x3})
case("ReduceSum input axes", [mk("ReduceSum", ["x", "a"], ["y"], keepdims=1)], {"x": x3}, {"a": ints(-1, 0)}, opset=13)
case("ReduceMax", [mk("ReduceMax", ["x"], ["y"], axes=[2])], {"x": x3})
# movement
case("Reshape 0 -1", [mk("Reshape", ["x", "s"], ["y"])], {"x": x3}, {"s": ints(0, -1, 2)})
case("Transpose", [mk("Transpose", ["x"], ["y"], perm=[2, 0, 1])], {"x": x3})
case("Transpose default", [mk("Transpose", ["x"], ["y"])], {"x": x3})
case("Concat", [mk("Concat", ["x", "c"], ["y"], axis=1)], {"x": x3}, {"c": rand(2, 3, 8)})
case("Split input", [mk("Split", ["x", "s"], ["a", "y"], axis=2)], {"x": x3}, {"s": ints(3, 5)}, opset=13)
case("Split attr", [mk("Split", ["x"], ["y", "b"], axis=1, split=[1, 3])], {"x": x3}, opset=11)
case("Slice axes steps", [mk("Slice", ["x", "st", "en", "ax", "sp"], ["y"])], {"x": x3},
     {"st": ints(1, -6), "en": ints(9223372036854775807, 7), "ax": ints(1, 2), "sp": ints(1, 2)})
case("Gather constant scalar", [mk("Gather", ["x", "i"], ["y"], axis=1)], {"x": x3}, {"i": np.array(-1, np.int64)})
case("Gather constant indices", [mk("Gather", ["x", "i"], ["y"], axis=2)], {"x": x3}, {"i": ints(7, 0, 3)})
ids = np.array([[1, 3, 0], [2, 2, 4]], np.int64)
case("Gather embedding", [mk("Gather", ["w", "ids"], ["y"], axis=0)], {"ids": ids}, {"w": rand(5, 6)},
     harp_inputs={"ids": ids.astype(np.int32)}, backends=("interp", "cpu"))
case("Unsqueeze Squeeze opset 13", [mk("Unsqueeze", ["x", "a"], ["u"]), mk("Squeeze", ["u", "a"], ["y"])], {"x": x3}, {"a": ints(0, 3)})
case("Unsqueeze attr opset 11", [mk("Unsqueeze", ["x"], ["y"], axes=[1])], {"x": x3}, opset=11)
case("Squeeze all", [mk("Squeeze", ["x"], ["y"])], {"x": rand(1, 4, 1, 3)})
case("Expand", [mk("Expand", ["x", "s"], ["y"])], {"x": rand(3, 1)}, {"s": ints(2, 3, 4)})
case("Pad", [mk("Pad", ["x", "p", "v"], ["y"])], {"x": x3}, {"p": ints(0, 1, 0, 0, 2, 3), "v": np.array(1.5, np.float32)})
case("Constant", [mk("Constant", [], ["c"], value=onnx.numpy_helper.from_array(rand(8), "c")), mk("Add", ["x", "c"], ["y"])], {"x": x3})
case("Constant value_float", [mk("Constant", [], ["c"], value_float=3.0), mk("Mul", ["x", "c"], ["y"])], {"x": x3})
# what PyTorch writes for x.view(x.size(0), -1)
shape_chain = [mk("Shape", ["x"], ["s"]), mk("Gather", ["s", "zero"], ["n"], axis=0), mk("Unsqueeze", ["n", "ax"], ["nu"]),
               mk("Concat", ["nu", "m1"], ["shp"], axis=0), mk("Reshape", ["x", "shp"], ["y"])]
chain_inits = {"zero": np.array(0, np.int64), "ax": ints(0), "m1": ints(-1)}
case("Shape Gather Unsqueeze Concat Reshape", shape_chain, {"x": x4}, chain_inits)
case("ConstantOfShape Cast", [mk("Shape", ["x"], ["s"]), mk("ConstantOfShape", ["s"], ["c"],
                                                             value=onnx.helper.make_tensor("v", onnx.TensorProto.FLOAT, [1], [2.0])),
                              mk("Mul", ["x", "c"], ["y"])], {"x": x2})
case("Sum variadic", [mk("Sum", ["x", "x", "x"], ["y"])], {"x": x2})

# symbolic batch: the chain folds on the symbol; --input binds it
m = model(shape_chain, [vi("x", ["batch", 3, 6, 6])], [vi("y", None)], [init(k, v) for k, v in chain_inits.items()])
path = os.path.join(ht.tempfile.mkdtemp(), "sym.onnx")
onnx.save(m, path)
for n in (1, 3):
    xb = rand(n, 3, 6, 6)
    p, d = ht.run(path, {"x": xb})
    S.check(f"symbolic batch {n}: runs", p.returncode == 0, p.stderr[-400:])
    if not p.returncode:
        S.check(f"symbolic batch {n}: shape", np.load(os.path.join(d, "y.npy")).shape == (n, 108))

# names that are not identifiers: the input by its ONNX name, outputs sanitised, nothing outside --out
nodes = [mk("Conv", ["input.1", "onnx::Conv_1"], ["/layer1/0/conv1/Conv_output_0"], name="/layer1/0/conv1/Conv"),
         mk("Relu", ["/layer1/0/conv1/Conv_output_0"], ["../../evil"]), mk("Neg", ["../../evil"], ["a/b"]),
         mk("Abs", ["../../evil"], ["a_b"])]
w = rand(2, 3, 1, 1)
m = model(nodes, [vi("input.1", [1, 3, 4, 4])], [vi("../../evil", None), vi("a/b", None), vi("a_b", None)], [init("onnx::Conv_1", w)])
path = os.path.join(ht.tempfile.mkdtemp(), "names.onnx")
onnx.save(m, path)
xi = rand(1, 3, 4, 4)
want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"input.1": xi})
out = ht.tempfile.mkdtemp()
outdir = os.path.join(out, "o")
os.makedirs(outdir)
for be in ("interp", "cpu"):
    p, d = ht.run(path, {"input.1": xi}, backend=be, outdir=outdir)
    S.check(f"names {be}: runs with --input input.1=", p.returncode == 0, p.stderr[-400:])
    files = sorted(os.listdir(outdir))
    S.check(f"names {be}: outputs named by the rule", {"______evil.npy", "a_b.npy", "a_b_2.npy"} <= set(files), files)
    S.check(f"names {be}: nothing written outside --out", sorted(os.listdir(out)) == ["o"], os.listdir(out))
    S.check(f"names {be}: nothing above it", not os.path.exists(os.path.join(out, "..", "evil.npy")))
    if not p.returncode:
        for f, wv in zip(("______evil.npy", "a_b.npy", "a_b_2.npy"), want):
            ok, why = ht.close(np.load(os.path.join(outdir, f)), wv)
            S.check(f"names {be}: {f}", ok, why)
# --param overrides an initializer (by its ONNX name)
w2 = rand(2, 3, 1, 1)
p, d = ht.run(path, {"input.1": xi, "onnx::Conv_1": w2}, params={"onnx::Conv_1"}, backend="cpu")
S.check("--param overrides an initializer", p.returncode == 0, p.stderr[-400:])
if not p.returncode:
    ref = np.maximum(np.einsum("oc,nchw->nohw", w2[:, :, 0, 0], xi), 0)
    ok, why = ht.close(np.load(os.path.join(d, "______evil.npy")), ref)
    S.check("--param overrides an initializer: value", ok, why)

# more initializers than the command line's lists hold (CLI_MAX_LIST, 256): run, bench, compile
K = 300
ws = {f"w{i}": rand(3) for i in range(K)}
nodes = [mk("Add", ["x" if i == 0 else f"h{i - 1}", f"w{i}"], ["y" if i == K - 1 else f"h{i}"]) for i in range(K)]
m = model(nodes, [vi("x", [2, 3])], [vi("y", None)], [init(k, v) for k, v in ws.items()])
path = os.path.join(ht.tempfile.mkdtemp(), "many.onnx")
onnx.save(m, path)
xm = rand(2, 3)
want = xm + sum(ws.values())
for be in ("interp", "cpu"):  # cpu: regions of up to 256 fused weight adds on the generic loops
    p, d = ht.run(path, {"x": xm}, backend=be)
    S.check(f"300 initializers: run ({be})", p.returncode == 0, p.stderr[-300:])
    if not p.returncode:
        ok, why = ht.close(np.load(os.path.join(d, "y.npy")), want)
        S.check(f"300 initializers: value ({be})", ok, why)
p = ht.subprocess.run([ht.HARP, "bench", path, "--random-inputs", "--repeat", "2"], capture_output=True, text=True)
S.check("300 initializers: bench", p.returncode == 0, p.stderr[-300:])
pkg = os.path.join(ht.tempfile.mkdtemp(), "pkg")
p = ht.subprocess.run([ht.HARP, "compile", path, "--target", "cpu", "--sources-only", "-o", pkg], capture_output=True, text=True)
S.check("300 initializers: compile", p.returncode == 0, p.stderr[-300:])
if not p.returncode:
    S.check("300 initializers: weights.bin holds them all", os.path.getsize(os.path.join(pkg, "weights.bin")) >= K * 12,
            os.path.getsize(os.path.join(pkg, "weights.bin")))
S.close()
