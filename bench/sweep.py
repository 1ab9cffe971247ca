#!/usr/bin/env python3
"""sweep.py — single layers of a CNN or a transformer, harp against onnxruntime: where are the cliffs?

    python3 bench/sweep.py [--only SUBSTR[,SUBSTR...]] [--rounds N] [--repeat N] [--harp EXE]
                           [--dir DIR] [--json FILE]

Each case is one small graph, written twice: as a .harp model (into --dir, a
temporary directory by default) and as an ONNX graph.  harp is timed with
`harp bench --json` (weights passed with --param, i.e. constants), onnxruntime
with 2 intra-op threads (weights as initializers), interleaved over --rounds
rounds, best median kept.  The output of `harp run` is checked against
onnxruntime's (max |harp - ort| / max |ort|).  The table's ratio is
ort ms / harp ms (> 1: harp is faster); cases below 0.7x are listed at the end.
A case that fails to compile or run shows the error instead of a time.
On a noisy 2-core machine only ratios below ~0.7 or above ~1.5 mean much:
rerun a suspicious case with --only.  Helpers come from bench/e2e.py.
"""
import argparse
import json
import os
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
from e2e import Harp, ort_session, vi, init, rand, median_ms, attention_nodes, ort  # noqa: E402
import numpy as np  # noqa: E402
from onnx import helper  # noqa: E402

ROOT = os.path.dirname(BENCH)
CLIFF = 0.7
DT = {np.float32: "f32", np.float16: "f16"}


def i64(name, vals):
    return init(name, np.array(vals, dtype=np.int64))


def harp_type(a):
    return f"{DT[a.dtype.type]}[{', '.join(str(d) for d in a.shape)}]"


class Case:
    """body: DSL statements computing y; inputs/params: name -> array (params are
    constants on both sides); nodes/inits: the ONNX graph computing y."""

    def __init__(self, name, body, inputs, params, nodes, inits=()):
        self.name, self.body, self.inputs, self.params = name, body, inputs, params
        self.nodes, self.inits = nodes, list(inits)
        self.sess = self.feed = None
        self.note = ""

    def build_ort(self):
        # Output type: run once with a loose output declaration, then use the real shape.
        from onnx import TensorProto
        out = helper.make_tensor_value_info("y", TensorProto.FLOAT16 if self.fp16() else TensorProto.FLOAT, None)
        self.feed = dict(self.inputs)
        self.sess = ort_session(self.nodes, [vi(k, v) for k, v in self.inputs.items()], [out],
                                self.inits + [init(k, v) for k, v in self.params.items()])
        return self.sess.run(None, self.feed)[0]

    def fp16(self):
        return any(a.dtype == np.float16 for a in list(self.inputs.values()) + list(self.params.values()))

    def harp_text(self, y):
        args = ", ".join(f"{k}: {harp_type(v)}" for k, v in list(self.inputs.items()) + list(self.params.items()))
        body = "\n".join("    " + l.strip() for l in self.body.strip().splitlines())
        return f"// sweep.py: {self.name}\ngraph main({args}) -> (y: {harp_type(y)}) {{\n{body}\n    return y\n}}\n"

    def tensors(self):
        t = {k: ("input", v) for k, v in self.inputs.items()}
        t.update({k: ("param", v) for k, v in self.params.items()})
        return t


# ---- the cases --------------------------------------------------------------
def conv(name, n, c, hw, k, kh, stride=1, pad=0, groups=1, bias=True, act="", residual=False, dtype=np.float32):
    x = rand(n, c, hw, hw, dtype=dtype)
    w = rand(k, c // groups, kh, kh, scale=(c // groups * kh * kh) ** -0.5, dtype=dtype)
    p = {"w": w}
    opts, onnx_in = "", ["x", "w"]
    if bias:
        p["b"] = rand(k, dtype=dtype)
        opts += ", bias=b"
        onnx_in.append("b")
    if stride != 1:
        opts += f", stride={stride}"
    if pad:
        opts += f", pad={pad}"
    if groups != 1:
        opts += f", groups={groups}"
    expr = f"conv2d(x, w{opts})"
    nodes = [helper.make_node("Conv", onnx_in, ["c"], strides=[stride, stride], pads=[pad] * 4, group=groups)]
    ins = {"x": x}
    last = "c"
    if residual:
        oh = (hw + 2 * pad - kh) // stride + 1
        ins["r"] = rand(n, k, oh, oh, dtype=dtype)
        expr = f"{expr} + r"
        nodes.append(helper.make_node("Add", [last, "r"], ["cr"]))
        last = "cr"
    if act == "relu":
        expr = f"relu({expr})"
        nodes.append(helper.make_node("Relu", [last], ["y"]))
    elif act == "relu6":
        expr = f"min(max({expr}, 0.0), 6.0)"
        nodes.append(helper.make_node("Clip", [last, "zero", "six"], ["y"]))
        return Case(name, f"y = {expr}", ins, p, nodes, [init("zero", np.array(0, dtype)), init("six", np.array(6, dtype))])
    else:
        nodes.append(helper.make_node("Identity", [last], ["y"]))
    return Case(name, f"y = {expr}", ins, p, nodes)


def pool(name, kind, n, c, hw, k, stride, pad=0):
    x = rand(n, c, hw, hw)
    src = "x" if not pad else f"pad(x, [[0, 0], [0, 0], [{pad}, {pad}], [{pad}, {pad}]], value=-inf)"
    op = {"max": ("max_pool2d", "MaxPool"), "avg": ("avg_pool2d", "AveragePool")}[kind]
    return Case(name, f"y = {op[0]}({src}, kernel={k}, stride={stride})", {"x": x}, {},
                [helper.make_node(op[1], ["x"], ["y"], kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4)])


def gap_linear(name, n, c=2048, hw=7, classes=1000):
    x, w, b = rand(n, c, hw, hw), rand(c, classes, scale=c ** -0.5), rand(classes)
    return Case(name, "y = mean(x, [2, 3]) @ w + b", {"x": x}, {"w": w, "b": b},
                [helper.make_node("GlobalAveragePool", ["x"], ["g"]), helper.make_node("Flatten", ["g"], ["f"]),
                 helper.make_node("Gemm", ["f", "w", "b"], ["y"])])


def bn_relu(name, n, c, hw):
    x, s, t = rand(n, c, hw, hw), rand(c, 1, 1), rand(c, 1, 1)
    return Case(name, "y = relu(x * s + t)", {"x": x}, {"s": s, "t": t},
                [helper.make_node("Mul", ["x", "s"], ["m"]), helper.make_node("Add", ["m", "t"], ["a"]),
                 helper.make_node("Relu", ["a"], ["y"])])


def unary(name, fn, shape, dtype=np.float32):
    x = rand(*shape, dtype=dtype)
    onnx = {"silu": [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"])],
            "sigmoid(x) * x": [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["s", "x"], ["y"])],
            "gelu": [helper.make_node("Gelu", ["x"], ["y"])],
            "tanh": [helper.make_node("Tanh", ["x"], ["y"])]}[fn]
    expr = fn if "(" in fn else f"{fn}(x)"
    return Case(name, f"y = {expr}", {"x": x}, {}, onnx)


def binary_add(name, shape):
    a, b = rand(*shape), rand(*shape)
    return Case(name, "y = a + b", {"a": a, "b": b}, {}, [helper.make_node("Add", ["a", "b"], ["y"])])


def reduce(name, op, shape, axis):
    x = rand(*shape)
    onnx_op = {"sum": "ReduceSum", "mean": "ReduceMean", "max": "ReduceMax"}[op]
    return Case(name, f"y = {op}(x, {axis})", {"x": x}, {},
                [helper.make_node(onnx_op, ["x", "axes"], ["y"], keepdims=0)], [i64("axes", [axis])])


def transpose_add(name, b, s, h, d):
    x, z = rand(b, s, h, d), rand(b, h, s, d)
    return Case(name, "y = permute(x, [0, 2, 1, 3]) + z", {"x": x, "z": z}, {},
                [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 1, 3]), helper.make_node("Add", ["t", "z"], ["y"])])


def concat(name, n, c, hw):
    a, b = rand(n, c, hw, hw), rand(n, c, hw, hw)
    return Case(name, "y = concat([a, b], axis=1)", {"a": a, "b": b}, {}, [helper.make_node("Concat", ["a", "b"], ["y"], axis=1)])


def slice_case(name, n, c, hw):
    x = rand(n, c, hw, hw)
    return Case(name, f"y = slice(x, [1, 1], [{hw - 1}, {hw - 1}], [2, 3])", {"x": x}, {},
                [helper.make_node("Slice", ["x", "st", "en", "ax"], ["y"])],
                [i64("st", [1, 1]), i64("en", [hw - 1, hw - 1]), i64("ax", [2, 3])])


def slice_ch(name, n, c, hw):
    x = rand(n, c, hw, hw)
    return Case(name, f"y = slice(x, [0], [{c // 2}], [1])", {"x": x}, {},
                [helper.make_node("Slice", ["x", "st", "en", "ax"], ["y"])],
                [i64("st", [0]), i64("en", [c // 2]), i64("ax", [1])])


def pad_case(name, n, c, hw):
    x = rand(n, c, hw, hw)
    return Case(name, "y = pad(x, [[0, 0], [0, 0], [1, 1], [1, 1]])", {"x": x}, {},
                [helper.make_node("Pad", ["x", "pads"], ["y"], mode="constant")], [i64("pads", [0, 0, 1, 1, 0, 0, 1, 1])])


def matmul(name, m, k, n, bias=False, dtype=np.float32):
    x, w = rand(m, k, dtype=dtype), rand(k, n, scale=k ** -0.5, dtype=dtype)
    p = {"w": w}
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y" if not bias else "m"])]
    body = "y = x @ w"
    if bias:
        p["b"] = rand(n, dtype=dtype)
        body += " + b"
        nodes.append(helper.make_node("Add", ["m", "b"], ["y"]))
    return Case(name, body, {"x": x}, p, nodes)


def bmm(name, b, m, k, n):
    x, z = rand(b, m, k), rand(b, k, n)
    return Case(name, "y = x @ z", {"x": x, "z": z}, {}, [helper.make_node("MatMul", ["x", "z"], ["y"])])


def linear_t(name, m, k, n):
    x, w = rand(m, k), rand(n, k, scale=k ** -0.5)
    return Case(name, "y = x @ permute(w, [1, 0])", {"x": x}, {"w": w},
                [helper.make_node("Gemm", ["x", "w"], ["y"], transB=1)])


def layernorm(name, r, d, dtype=np.float32):
    x, g, b = rand(r, d, dtype=dtype), rand(d, dtype=dtype), rand(d, dtype=dtype)
    return Case(name, "y = layernorm(x, gamma=g, beta=b, eps=1e-5)", {"x": x}, {"g": g, "b": b},
                [helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1, epsilon=1e-5)])


def softmax_mask(name, h, s):
    x, mask = rand(h, s, s), np.triu(np.full((s, s), -1e4, dtype=np.float32), 1)
    return Case(name, "y = softmax(x + mask)", {"x": x}, {"mask": mask},
                [helper.make_node("Add", ["x", "mask"], ["a"]), helper.make_node("Softmax", ["a"], ["y"], axis=-1)])


def softmax(name, shape, axis, dtype=np.float32):
    x = rand(*shape, dtype=dtype)
    return Case(name, f"y = softmax(x, axis={axis})", {"x": x}, {}, [helper.make_node("Softmax", ["x"], ["y"], axis=axis)])


def attention(name, b, h, s, d, causal=True):
    q, k, v = rand(b, h, s, d), rand(b, h, s, d), rand(b, h, s, d)
    nodes, inits = attention_nodes(b, h, s, d, 1 / np.sqrt(d), causal, o="y")
    return Case(name, f"y = attention(q, k, v, causal={'true' if causal else 'false'})", {"q": q, "k": k, "v": v}, {},
                nodes, inits)


F16 = np.float16
CASES = [
    # CNN
    lambda: conv("conv7x7 s2 p3 3->64 224 +relu", 1, 3, 224, 64, 7, stride=2, pad=3, act="relu"),
    lambda: conv("conv1x1 256->64 @56 +relu", 1, 256, 56, 64, 1, act="relu"),
    lambda: conv("conv1x1 64->256 @56", 1, 64, 56, 256, 1),
    lambda: conv("conv1x1 256->64 @56 b8", 8, 256, 56, 64, 1, act="relu"),
    lambda: conv("conv1x1 64->256 @56 +res+relu", 1, 64, 56, 256, 1, act="relu", residual=True),
    lambda: conv("conv1x1 s2 256->512 56->28", 1, 256, 56, 512, 1, stride=2),
    lambda: conv("conv1x1 1024->256 @14 +relu", 1, 1024, 14, 256, 1, act="relu"),
    lambda: conv("conv1x1 512->2048 @7 +res+relu", 1, 512, 7, 2048, 1, act="relu", residual=True),
    lambda: conv("conv1x1 2048->512 @7 +relu", 1, 2048, 7, 512, 1, act="relu"),
    lambda: conv("conv1x1 s2 512->1024 28->14 +res+relu", 1, 512, 28, 1024, 1, stride=2, act="relu", residual=True),
    lambda: conv("conv1x1 s2 1024->2048 14->7 +res+relu", 1, 1024, 14, 2048, 1, stride=2, act="relu", residual=True),
    lambda: conv("conv1x1 320->1280 @7 +relu", 1, 320, 7, 1280, 1, act="relu"),
    lambda: conv("conv3x3 512 @7 +relu", 1, 512, 7, 512, 3, pad=1, act="relu"),
    lambda: conv("conv3x3 s2 128->128 56->28", 1, 128, 56, 128, 3, stride=2, pad=1, act="relu"),
    lambda: conv("conv3x3 s2 128->256 28->14", 1, 128, 28, 256, 3, stride=2, pad=1, act="relu"),
    lambda: conv("conv3x3 s2 256->512 14->7", 1, 256, 14, 512, 3, stride=2, pad=1, act="relu"),
    lambda: conv("conv3x3 64 @56 +res+relu", 1, 64, 56, 64, 3, pad=1, act="relu", residual=True),
    lambda: conv("grouped conv3x3 g32 128 @56", 1, 128, 56, 128, 3, pad=1, groups=32, act="relu"),
    lambda: conv("grouped conv3x3 g32 256 @28", 1, 256, 28, 256, 3, pad=1, groups=32, act="relu"),
    lambda: conv("depthwise3x3 s2 96 112->56", 1, 96, 112, 96, 3, stride=2, pad=1, groups=96, act="relu"),
    lambda: conv("depthwise3x3 s1 144 @56", 1, 144, 56, 144, 3, pad=1, groups=144, act="relu"),
    lambda: conv("mbv2 conv1x1 16->96 @112 +relu6", 1, 16, 112, 96, 1, act="relu6"),
    lambda: conv("mbv2 conv1x1 96->24 @56", 1, 96, 56, 24, 1),
    lambda: conv("mbv2 conv1x1 24->144 @56 +relu6", 1, 24, 56, 144, 1, act="relu6"),
    lambda: conv("mbv2 conv1x1 144->24 @56 +res", 1, 144, 56, 24, 1, residual=True),
    lambda: conv("mbv2 conv1x1 32->192 @28 +relu6", 1, 32, 28, 192, 1, act="relu6"),
    lambda: conv("mbv2 conv1x1 192->32 @28 +res", 1, 192, 28, 32, 1, residual=True),
    lambda: conv("mbv2 conv1x1 64->384 @14 +relu6", 1, 64, 14, 384, 1, act="relu6"),
    lambda: conv("mbv2 conv1x1 384->64 @14 +res", 1, 384, 14, 64, 1, residual=True),
    lambda: conv("mbv2 conv1x1 96->576 @14 +relu6", 1, 96, 14, 576, 1, act="relu6"),
    lambda: conv("mbv2 conv1x1 160->960 @7 +relu6", 1, 160, 7, 960, 1, act="relu6"),
    lambda: conv("mbv2 conv1x1 960->160 @7 +res", 1, 960, 7, 160, 1, residual=True),
    lambda: conv("mbv2 depthwise3x3 960 @7 +relu6", 1, 960, 7, 960, 3, pad=1, groups=960, act="relu6"),
    lambda: conv("mbv2 depthwise3x3 s2 144 56->28 +relu6", 1, 144, 56, 144, 3, stride=2, pad=1, groups=144, act="relu6"),
    lambda: conv("mbv2 depthwise3x3 576 @14 +relu6", 1, 576, 14, 576, 3, pad=1, groups=576, act="relu6"),
    lambda: conv("mbv2 conv3x3 s2 3->32 224 +relu6", 1, 3, 224, 32, 3, stride=2, pad=1, act="relu6"),
    lambda: pool("max_pool 3x3 s2 pad1 64 @112", "max", 1, 64, 112, 3, 2, pad=1),
    lambda: pool("max_pool 3x3 s2 64 @112", "max", 1, 64, 112, 3, 2),
    lambda: pool("avg_pool 2x2 256 @56", "avg", 1, 256, 56, 2, 2),
    lambda: gap_linear("gap+linear 2048->1000", 1),
    lambda: gap_linear("gap+linear 2048->1000 b8", 8),
    lambda: bn_relu("bn affine+relu 64 @112", 1, 64, 112),
    lambda: bn_relu("bn affine+relu 256 @56 b8", 8, 256, 56),
    lambda: binary_add("residual add 256 @56", (1, 256, 56, 56)),
    # elementwise
    lambda: unary("silu 256 @56", "silu", (1, 256, 56, 56)),
    lambda: unary("sigmoid(x)*x 256 @56", "sigmoid(x) * x", (1, 256, 56, 56)),
    lambda: unary("gelu 128x3072", "gelu", (128, 3072)),
    lambda: unary("tanh 128x3072", "tanh", (128, 3072)),
    # reductions
    lambda: reduce("sum last 1024x1024", "sum", (1024, 1024), -1),
    lambda: reduce("mean last 1024x1024", "mean", (1024, 1024), -1),
    lambda: reduce("max last 1024x1024", "max", (1024, 1024), -1),
    lambda: reduce("sum axis0 1024x1024", "sum", (1024, 1024), 0),
    lambda: reduce("mean axis0 1024x1024", "mean", (1024, 1024), 0),
    lambda: reduce("max axis0 1024x1024", "max", (1024, 1024), 0),
    # movement
    lambda: transpose_add("transpose BSHD->BHSD +add s128", 1, 128, 12, 64),
    lambda: transpose_add("transpose BSHD->BHSD +add b8 s128", 8, 128, 12, 64),
    lambda: concat("concat ch 128+128 @28", 1, 128, 28),
    lambda: slice_case("slice HW [1:-1] 256 @56", 1, 256, 56),
    lambda: slice_ch("slice ch [0:128] 256 @56", 1, 256, 56),
    lambda: pad_case("pad HW 1 64 @112", 1, 64, 112),
    # matmul
    lambda: matmul("matmul 1x768x3072 +bias", 1, 768, 3072, bias=True),
    lambda: matmul("matmul 128x768x768", 128, 768, 768),
    lambda: matmul("matmul 8x128x768x3072 (b8)", 8 * 128, 768, 3072),
    lambda: bmm("bmm 12x128x64x128", 12, 128, 64, 128),
    lambda: linear_t("x@W^T 128x768->3072", 128, 768, 3072),
    lambda: linear_t("x@W^T 1x768->3072", 1, 768, 3072),
    # transformer rows
    lambda: layernorm("layernorm 128x768", 128, 768),
    lambda: layernorm("layernorm 1024x768 (b8)", 1024, 768),
    lambda: softmax_mask("softmax(x+mask) 12x128x128", 12, 128),
    lambda: softmax("softmax axis0 1024x256", (1024, 256), 0),
    lambda: softmax("softmax last 12x128x128", (12, 128, 128), -1),
    lambda: attention("attention causal h12 s128 d64", 1, 12, 128, 64),
    lambda: attention("attention causal b8 h12 s128 d64", 8, 12, 128, 64),
    # fp16
    lambda: matmul("fp16 matmul 128x768x768", 128, 768, 768, dtype=F16),
    lambda: conv("fp16 conv3x3 64 @56 +relu", 1, 64, 56, 64, 3, pad=1, act="relu", dtype=F16),
    lambda: layernorm("fp16 layernorm 128x768", 128, 768, dtype=F16),
    lambda: unary("fp16 gelu 128x3072", "gelu", (128, 3072), dtype=F16),
    lambda: softmax("fp16 softmax last 12x128x128", (12, 128, 128), -1, dtype=F16),
]


def slug(name):
    return "".join(c if c.isalnum() else "_" for c in name).strip("_")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--harp", default=os.path.join(ROOT, "build", "harp"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--only", default="", help="comma-separated substrings of case names")
    ap.add_argument("--dir", default="", help="where the .harp models go (default: a temporary directory)")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    if ort is None:
        sys.exit("sweep.py needs onnxruntime and onnx (scripts/install-deps.sh --bench)")
    mdir = a.dir or tempfile.mkdtemp(prefix="harp-sweep-")
    os.makedirs(mdir, exist_ok=True)
    harp = Harp(os.path.abspath(a.harp), a.repeat)
    only = [s.strip() for s in a.only.split(",") if s.strip()]
    print(f"# harp sweep — {time.strftime('%Y-%m-%d %H:%M')} — {os.cpu_count()} cpus, onnxruntime {ort.__version__}, "
          f"models in {mdir}")
    print("| case | harp ms | ort ms | ort/harp | max rel err |\n|---|---|---|---|---|")
    results = []
    for make in CASES:
        c = make()
        if only and not any(o in c.name for o in only):
            continue
        r = {"case": c.name}
        try:
            want = c.build_ort()
            model = os.path.join(mdir, slug(c.name) + ".harp")
            with open(model, "w") as f:
                f.write(c.harp_text(want))
            r["model"] = model
            th, to = float("inf"), float("inf")
            for _ in range(a.rounds):
                th = min(th, harp.bench(model, {}, c.tensors())["median_ms"])
                to = min(to, median_ms(lambda: c.sess.run(None, c.feed), a.repeat))
            got = harp.run(model, {}, c.tensors(), "y").astype(np.float64)
            w64 = want.astype(np.float64)
            err = float(np.max(np.abs(got - w64)) / max(1e-30, np.max(np.abs(w64)))) if got.shape == w64.shape else float("inf")
            r.update(harp_ms=th, ort_ms=to, ratio=to / th, max_rel_err=err)
            print(f"| {c.name} | {th:.3f} | {to:.3f} | {to / th:.2f} | {err:.1e} |")
        except Exception as ex:  # noqa: BLE001 — a failing case is a finding, keep going
            msg = " ".join(str(ex).split())
            r["error"] = msg
            print(f"| {c.name} | FAIL | | | {msg[-300:]} |")
        sys.stdout.flush()
        results.append(r)
    cliffs = [r for r in results if r.get("ratio", 1) < CLIFF]
    bad = [r for r in results if r.get("max_rel_err", 0) > (1e-2 if "fp16" in r["case"] else 1e-4)]
    print(f"\n## cliffs (ort/harp < {CLIFF})\n")
    for r in sorted(cliffs, key=lambda r: r["ratio"]):
        print(f"- {r['case']}: {r['ratio']:.2f}x (harp {r['harp_ms']:.3f} ms, ort {r['ort_ms']:.3f} ms)  {r['model']}")
    if not cliffs:
        print("- none")
    fails = [r for r in results if "error" in r]
    if fails or bad:
        print("\n## failures and wrong numbers\n")
        for r in fails:
            print(f"- {r['case']}: {r['error'][-500:]}")
        for r in bad:
            print(f"- {r['case']}: max rel err {r['max_rel_err']:.1e}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
