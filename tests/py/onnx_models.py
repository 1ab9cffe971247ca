"""Whole models as ONNX graphs (onnx.helper), shared by the ONNX frontend's
tests (tests/py/test_onnx_models.py, test_shapeset_sizes.py) and the
benchmarks (bench/e2e.py's onnxruntime peers, bench/onnx.py,
bench/shapeset_range.py).

Each builder takes the weights as a dict named like the parameters of the
harp DSL twin in bench/models/ and returns an onnx.ModelProto whose
initializers are those weights, so harp can run the same file
(`harp run model.onnx`) or the .harp model with --param.
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

mk = helper.make_node


def init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def vi(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, list(shape) if shape is not None else None)


def model(nodes, inputs, outputs, inits, opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, inits)
    # IR 8 (9 from opset 19): what onnxruntime reads
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8 if opset < 19 else 9)


def attention_nodes(H, S, D, scale, causal, q="q", k="k", v="v", o="o", pre=""):
    """softmax(q k^T * scale [+ causal mask]) v on [B, H, S, D]."""
    nodes = [mk("Transpose", [k], [pre + "kt"], perm=[0, 1, 3, 2]), mk("MatMul", [q, pre + "kt"], [pre + "s0"]),
             mk("Mul", [pre + "s0", pre + "scale"], [pre + "s1"])]
    inits = [init(pre + "scale", np.array(scale, dtype=np.float32))]
    last = pre + "s1"
    if causal:
        inits.append(init(pre + "mask", np.triu(np.full((S, S), -np.inf, dtype=np.float32), 1)))
        nodes.append(mk("Add", [last, pre + "mask"], [pre + "s2"]))
        last = pre + "s2"
    nodes += [mk("Softmax", [last], [pre + "p"], axis=-1), mk("MatMul", [pre + "p", v], [o])]
    return nodes, inits


def resnet18(t, hw=224, classes=1000):
    """bench/models/resnet18.harp (batch norm folded into the conv biases)."""
    conv = lambda i, w, b, o, k, s: mk("Conv", [i, w, b], [o], strides=[s, s], pads=[k // 2] * 4)
    relu = lambda i, o: mk("Relu", [i], [o])
    nodes = [conv("x", "w0", "b0", "s0", 7, 2), relu("s0", "s"),
             mk("MaxPool", ["s"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])]
    last = "p"
    for st in range(1, 5):
        for blk in "ab":
            pre, s = f"{st}{blk}", 2 if st > 1 and blk == "a" else 1
            nodes += [conv(last, f"l{pre}1", f"c{pre}1", pre + "h0", 3, s), relu(pre + "h0", pre + "h"),
                      conv(pre + "h", f"l{pre}2", f"c{pre}2", pre + "c", 3, 1)]
            short = last
            if s == 2:
                nodes.append(conv(last, f"l{st}ad", f"c{st}ad", pre + "sc", 1, 2))
                short = pre + "sc"
            nodes += [mk("Add", [short, pre + "c"], [pre + "r"]), relu(pre + "r", pre + "y")]
            last = pre + "y"
    nodes += [mk("GlobalAveragePool", [last], ["g"]), mk("Flatten", ["g"], ["f"]), mk("Gemm", ["f", "wf", "bf"], ["y"])]
    return model(nodes, [vi("x", [1, 3, hw, hw])], [vi("y", [1, t["bf"].shape[0]])], [init(k, v) for k, v in t.items()])


def bert(t, layers, S, E, H, F, gelu_op=False):
    """`layers` BERT encoder layers (bench/models/bert_layers.harp's layer), weights named <w><layer>.
    GELU as the Gelu op (opset 20) with gelu_op, else as torch.onnx writes it before (Erf)."""
    D = E // H
    inits = [init(k, v) for k, v in t.items()] + [init("heads", np.array([1, S, H, D], np.int64)),
                                                   init("merged", np.array([1, S, E], np.int64))]
    lin = lambda i, w, b, o: [mk("MatMul", [i, w], [o + "m"]), mk("Add", [o + "m", b], [o])]
    ln = lambda i, g, b, o: mk("LayerNormalization", [i, g, b], [o], axis=-1, epsilon=1e-12)
    nodes, last = [], "x"
    for l in range(layers):
        p = f"L{l}_"
        for n in "qkv":
            nodes += lin(last, f"w{n}{l}", f"b{n}{l}", p + n + "0")
            nodes += [mk("Reshape", [p + n + "0", "heads"], [p + n + "1"]),
                      mk("Transpose", [p + n + "1"], [p + n], perm=[0, 2, 1, 3])]
        an, ai = attention_nodes(H, S, D, 1 / np.sqrt(D), False, q=p + "q", k=p + "k", v=p + "v", o=p + "att", pre=p)
        nodes += an
        inits += ai
        nodes += [mk("Transpose", [p + "att"], [p + "att1"], perm=[0, 2, 1, 3]), mk("Reshape", [p + "att1", "merged"], [p + "att2"])]
        nodes += lin(p + "att2", f"wo{l}", f"bo{l}", p + "proj")
        nodes += [mk("Add", [last, p + "proj"], [p + "r1"]), ln(p + "r1", f"g1{l}", f"lb1{l}", p + "h")]
        nodes += lin(p + "h", f"w1{l}", f"b1{l}", p + "a1")
        nodes += [mk("Gelu", [p + "a1"], [p + "u"])] if gelu_op else erf_gelu(p + "a1", p + "u", p)
        nodes += lin(p + "u", f"w2{l}", f"b2{l}", p + "a2")
        nodes += [mk("Add", [p + "h", p + "a2"], [p + "r2"]), ln(p + "r2", f"g2{l}", f"lb2{l}", p + "y")]
        last = p + "y"
    nodes.append(mk("Identity", [last], ["y"]))
    if not gelu_op:
        inits += [init("sqrt2", np.array(np.sqrt(2), np.float32)), init("one", np.array(1, np.float32)),
                  init("half", np.array(0.5, np.float32))]
    return model(nodes, [vi("x", [1, S, E])], [vi("y", [1, S, E])], inits, opset=20 if gelu_op else 17)


def erf_gelu(x, y, pre):
    """GELU as torch.onnx writes it before opset 20: x * (1 + erf(x / √2)) * 0.5."""
    return [mk("Div", [x, "sqrt2"], [pre + "gd"]), mk("Erf", [pre + "gd"], [pre + "ge"]),
            mk("Add", [pre + "ge", "one"], [pre + "ga"]), mk("Mul", [x, pre + "ga"], [pre + "gm"]),
            mk("Mul", [pre + "gm", "half"], [y])]


MNV2_CFG = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]


def mobilenetv2_blocks(cfg=MNV2_CFG, c=32):
    """(in channels, expanded, out channels, stride) of each block, in bench/models/mobilenetv2.harp's order."""
    out = []
    for t, d, n, s in cfg:
        for i in range(n):
            out.append((c, c * t, d, s if i == 0 else 1))
            c = d
    return out


def mobilenetv2(t, blocks, hw=224):
    """bench/models/mobilenetv2.harp (batch norm folded), ReLU6 as Clip with min/max inputs."""
    conv = lambda i, w, b, o, k, s, g=1: mk("Conv", [i, w, b], [o], strides=[s, s], pads=[k // 2] * 4, group=g)
    relu6 = lambda i, o: mk("Clip", [i, "zero", "six"], [o])
    nodes = [conv("x", "w0", "b0", "s0", 3, 2), relu6("s0", "a0")]
    last = "a0"
    for i, (c, e, d, s) in enumerate(blocks, 1):
        src = last
        if e != c:
            nodes += [conv(last, f"e{i}", f"eb{i}", f"x{i}_", 1, 1), relu6(f"x{i}_", f"x{i}")]
            src = f"x{i}"
        nodes += [conv(src, f"d{i}", f"db{i}", f"h{i}_", 3, s, e), relu6(f"h{i}_", f"h{i}"),
                  conv(f"h{i}", f"p{i}", f"pb{i}", f"c{i}", 1, 1)]
        if s == 1 and c == d:
            nodes.append(mk("Add", [last, f"c{i}"], [f"a{i}"]))
            last = f"a{i}"
        else:
            last = f"c{i}"
    nodes += [conv(last, "wl", "bl", "z0", 1, 1), relu6("z0", "z"), mk("GlobalAveragePool", ["z"], ["g"]),
              mk("Flatten", ["g"], ["f"]), mk("Gemm", ["f", "wf", "bf"], ["y"])]
    inits = [init(k, v) for k, v in t.items()] + [init("zero", np.array(0, np.float32)), init("six", np.array(6, np.float32))]
    return model(nodes, [vi("x", [1, 3, hw, hw])], [vi("y", [1, t["bf"].shape[0]])], inits)


def llama(t, S, D, H):
    """bench/models/llama_layer.harp: RMSNorm, rotary embedding (Slice/Neg/Concat), causal attention, SwiGLU."""
    E = D // H
    shp = lambda name, dims: init(name, np.array(dims, dtype=np.int64))
    inits = [init(k, v) for k, v in t.items() if k not in ("cos", "sin")]
    inits += [init("cos", t["cos"][:, 0]), init("sin", t["sin"][:, 0])]  # [S, E]: after the transpose to [1, H, S, E]
    inits += [shp("heads", [1, S, H, E]), shp("merged", [1, S, D]), shp("lo", [0]), shp("mid", [E // 2]), shp("hi", [E]),
              shp("ax", [3]), shp("red", [-1]), init("eps", np.array(1e-5, np.float32))]

    def rms(i, g, o):
        return [mk("Mul", [i, i], [o + "sq"]), mk("ReduceMean", [o + "sq", "red"], [o + "ms"], keepdims=1),
                mk("Add", [o + "ms", "eps"], [o + "me"]), mk("Sqrt", [o + "me"], [o + "rt"]),
                mk("Div", [i, o + "rt"], [o + "nr"]), mk("Mul", [o + "nr", g], [o])]

    nodes = rms("x", "g1", "n")
    for n in "qkv":
        nodes += [mk("MatMul", ["n", "w" + n], [n + "0"]), mk("Reshape", [n + "0", "heads"], [n + "1"]),
                  mk("Transpose", [n + "1"], [n + ("2" if n != "v" else "")], perm=[0, 2, 1, 3])]
    for n in "qk":  # rotate_half: concat(-u[..., E/2:], u[..., :E/2])
        nodes += [mk("Slice", [n + "2", "mid", "hi", "ax"], [n + "hi"]), mk("Neg", [n + "hi"], [n + "ng"]),
                  mk("Slice", [n + "2", "lo", "mid", "ax"], [n + "lo"]), mk("Concat", [n + "ng", n + "lo"], [n + "rh"], axis=3),
                  mk("Mul", [n + "2", "cos"], [n + "c"]), mk("Mul", [n + "rh", "sin"], [n + "s"]), mk("Add", [n + "c", n + "s"], [n])]
    an, ai = attention_nodes(H, S, E, 1 / np.sqrt(E), True, o="att", pre="a_")
    nodes += an
    inits += ai
    nodes += [mk("Transpose", ["att"], ["att1"], perm=[0, 2, 1, 3]), mk("Reshape", ["att1", "merged"], ["att2"]),
              mk("MatMul", ["att2", "wo"], ["proj"]), mk("Add", ["x", "proj"], ["h"])]
    nodes += rms("h", "g2", "m")
    nodes += [mk("MatMul", ["m", "w1"], ["u1"]), mk("Sigmoid", ["u1"], ["sg"]), mk("Mul", ["u1", "sg"], ["sl"]),
              mk("MatMul", ["m", "w3"], ["u3"]), mk("Mul", ["sl", "u3"], ["gu"]), mk("MatMul", ["gu", "w2"], ["dn"]),
              mk("Add", ["h", "dn"], ["y"])]
    return model(nodes, [vi("x", [1, S, D])], [vi("y", [1, S, D])], inits, opset=18)  # ReduceMean's axes input


def cnn_s2(rng):
    """x[1, 3, H, W] (dim_params H, W) -> Conv 3x3/2 (pad 1) + Relu -> Conv 3x3 (pad 1) + the residual + Relu ->
    MaxPool 2x2: sizes (H + 1)/2 after the strided conv (the ShapeSet tests of derived symbols)."""
    w = {"w0": rng.standard_normal((8, 3, 3, 3)) * 0.4, "b0": rng.standard_normal(8) * 0.1,
         "w1": rng.standard_normal((8, 8, 3, 3)) * 0.2, "b1": rng.standard_normal(8) * 0.1}
    nodes = [mk("Conv", ["x", "w0", "b0"], ["c0"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             mk("Relu", ["c0"], ["h"]),
             mk("Conv", ["h", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             mk("Add", ["c1", "h"], ["a"]), mk("Relu", ["a"], ["g"]),
             mk("MaxPool", ["g"], ["y"], kernel_shape=[2, 2], strides=[2, 2])]
    return model(nodes, [vi("x", [1, 3, "H", "W"])], [vi("y", None)], [init(k, v.astype(np.float32)) for k, v in w.items()])


def fpn_s2(rng):
    """x[1, 3, H, W] (dim_params H, W): Conv 3x3/2 (pad 1) + Relu, Resize x2 (nearest) back to 2*((H + 1)/2) rows,
    added to a 1x1 Conv + Sigmoid of x (H rows), then concatenated with the upsampled branch: two names of one size
    where H, W are even (odd ones break the model)."""
    w = {"w0": rng.standard_normal((4, 3, 3, 3)) * 0.4, "w1": rng.standard_normal((4, 3, 1, 1)) * 0.4}
    nodes = [mk("Conv", ["x", "w0"], ["c0"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             mk("Relu", ["c0"], ["h"]), mk("Resize", ["h", "", "sc"], ["u"], mode="nearest"),
             mk("Conv", ["x", "w1"], ["c1"], kernel_shape=[1, 1]), mk("Sigmoid", ["c1"], ["l"]), mk("Add", ["u", "l"], ["a"]),
             mk("Concat", ["u", "a"], ["y"], axis=1)]
    inits = [init(k, v.astype(np.float32)) for k, v in w.items()] + [init("sc", np.array([1, 1, 2, 2], np.float32))]
    return model(nodes, [vi("x", [1, 3, "H", "W"])], [vi("y", None)], inits)


def range_constantofshape():
    """x[w, 4] (dim_param w): y = x * ConstantOfShape(Shape(x)) of 1.5 plus Range(0, w) / 10 as a column, and fills of
    w (1.5) and w + 1 (0) concatenated (cat): the sizes as data of test_shapeset_sizes.py and bench/shapeset_range.py."""
    def ints(name, v):
        return init(name, np.array(v, np.int64))
    fill = helper.make_tensor("v", TensorProto.FLOAT, [1], [1.5])
    return model([mk("Shape", ["x"], ["s"]), mk("Gather", ["s", "zero"], ["w"]), mk("Range", ["zero", "w", "one"], ["pos"]),
                  mk("Cast", ["pos"], ["posf"], to=TensorProto.FLOAT), mk("Unsqueeze", ["posf", "ax1"], ["pcol"]),
                  mk("Mul", ["pcol", "tenth"], ["ps"]), mk("ConstantOfShape", ["s"], ["ones"], value=fill),
                  mk("Mul", ["x", "ones"], ["x2"]), mk("Add", ["x2", "ps"], ["y"]),
                  mk("Unsqueeze", ["w", "ax0"], ["w1"]), mk("Add", ["w1", "one"], ["wp1"]),
                  mk("ConstantOfShape", ["w1"], ["f1"], value=fill), mk("ConstantOfShape", ["wp1"], ["f0"]),
                  mk("Concat", ["f1", "f0"], ["cat"], axis=0)],
                 [vi("x", ["w", 4])], [vi("y", None), vi("cat", None)],
                 [ints("zero", 0), ints("one", 1), ints("ax0", [0]), ints("ax1", [1]), init("tenth", np.array(0.1, np.float32))])
