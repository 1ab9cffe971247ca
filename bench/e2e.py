#!/usr/bin/env python3
"""e2e.py — whole models through `harp bench` against peers measured in the same run.

    python3 bench/e2e.py [--harp build/harp] [--rounds 3] [--repeat 20] [--only NAME,...] [--json FILE]

Each case times harp's compiled model (`harp bench --json`: the median of
--repeat runs of model_run, inputs resident, weights as constants) and its
peers on the same shapes, in --rounds interleaved rounds, each contender's
block of calls on idle cores (settle.py); each contender's best median over
the rounds is kept.  Peers:
  numpy   numpy on OpenBLAS (OPENBLAS_CORETYPE=SkylakeX, 2 threads)
  ort     onnxruntime 1.x CPU, the same graph as ONNX, intra_op_num_threads=2
  unfused harp with HARP_NO_FUSION=1 (every op its own kernel)
  gemm    harp with HARP_CONV=gemm (the conv as implicit GEMM, not the direct kernel)
  packrun harp with HARP_NO_PREPACK=1 (the weight packed on every run, not once at
          model_init)
The ratio column is peer time / harp time (> 1: harp is faster).  Outputs are
checked against the peer once (max relative error).  Needs
scripts/install-deps.sh --bench (onnxruntime, onnx, libopenblas).
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("OPENBLAS_CORETYPE", "SkylakeX")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "2")
import numpy as np  # noqa: E402

try:
    import onnx
    from onnx import TensorProto, helper
    import onnxruntime as ort
except ImportError:  # the ORT columns are left out
    ort = None

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "py"))
if ort:
    import onnx_models as om  # noqa: E402  (the whole models' ONNX graphs, shared with the tests)
from model_weights import bert_weights, resnet18_weights  # noqa: E402  (numpy only)
from settle import median_ms, settle  # noqa: E402,F401  (median_ms: also sweep's, realmodels', int8's, bf16's)

THREADS = 2
rng = np.random.default_rng(0)


def rand(*shape, dtype=np.float32, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


# ---- harp -----------------------------------------------------------------
class Harp:
    def __init__(self, exe, repeat):
        self.exe, self.repeat, self.dir = exe, repeat, tempfile.mkdtemp(prefix="harp-e2e-")

    def files(self, tensors):
        args = []
        for name, (kind, arr) in tensors.items():
            path = os.path.join(self.dir, f"{name}.npy")
            np.save(path, arr)
            args += [f"--{kind}", f"{name}={path}"]
        return args

    def bench(self, model, syms, tensors, env=None):
        settle()  # a peer's pool may still spin in this process
        cmd = [self.exe, "bench", model, "--json", "--repeat", str(self.repeat), "--warmup", "3"]
        cmd += [f"--sym={k}={v}" for k, v in syms.items()] + self.files(tensors)
        p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})})
        if p.returncode:
            raise RuntimeError(f"{' '.join(cmd)}: {p.stderr.strip()}")
        return json.loads(p.stdout)

    def run(self, model, syms, tensors, out):
        d = tempfile.mkdtemp(dir=self.dir)
        cmd = [self.exe, "run", model, "--out", d] + [f"--sym={k}={v}" for k, v in syms.items()] + self.files(tensors)
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode:
            raise RuntimeError(p.stderr)
        return np.load(os.path.join(d, f"{out}.npy"))


def bench_args(description=None, repeat=20, only="", json_out=True):
    """The options the model benchmarks here share (--harp, --rounds, --repeat, --only and, with
    json_out, --json), with these defaults; the caller adds its own and parses."""
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--harp", default=os.path.join(ROOT, "build", "harp"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=repeat)
    ap.add_argument("--only", default=only)
    if json_out:
        ap.add_argument("--json", default="")
    return ap


# ---- peers ----------------------------------------------------------------
def ort_session(nodes, inputs, outputs, inits, opset=20):
    g = helper.make_graph(nodes, "g", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
    so = ort.SessionOptions()
    so.intra_op_num_threads = THREADS
    so.inter_op_num_threads = 1
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])


def ort_model_session(m):
    so = ort.SessionOptions()
    so.intra_op_num_threads = THREADS
    so.inter_op_num_threads = 1
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])


def vi(name, arr):
    t = {np.float32: TensorProto.FLOAT, np.float16: TensorProto.FLOAT16}[arr.dtype.type]
    return helper.make_tensor_value_info(name, t, list(arr.shape))


def init(name, arr):
    return onnx.numpy_helper.from_array(arr, name)


# ---- cases ----------------------------------------------------------------
def case_gemm(n):
    A, B = rand(n, n), rand(n, n)
    peers = {"numpy": lambda: A @ B}
    if ort:
        s = ort_session([helper.make_node("MatMul", ["A", "B"], ["C"])], [vi("A", A)], [vi("C", A)], [init("B", B)])
        peers["ort"] = lambda: s.run(None, {"A": A})[0]
    return dict(model="bench/models/gemm.json", syms=dict(M=n, N=n, K=n),
                tensors={"A": ("input", A), "B": ("param", B)}, out="C", peers=peers, ref=lambda: A @ B)


def case_gemv(m, n, k):
    """Decode-time matmul: a few rows against a weight read once (x @ W)."""
    A, B = rand(m, k), rand(k, n)
    peers = {"numpy": lambda: A @ B}
    if ort:
        s = ort_session([helper.make_node("MatMul", ["A", "B"], ["C"])], [vi("A", A)], [vi("C", A[:, :1].repeat(n, 1))],
                        [init("B", B)])
        peers["ort"] = lambda: s.run(None, {"A": A})[0]
    return dict(model="bench/models/gemm.json", syms=dict(M=m, N=n, K=k),
                tensors={"A": ("input", A), "B": ("param", B)}, out="C", peers=peers, ref=lambda: A @ B)


def case_linear_t(m, n, k):
    """x W^T with W stored [N, K] (PyTorch's Linear)."""
    x, w = rand(m, k), rand(n, k)
    peers = {"numpy": lambda: x @ w.T}
    if ort:
        s = ort_session([helper.make_node("Gemm", ["x", "w"], ["y"], transB=1)], [vi("x", x)],
                        [vi("y", x[:, :1].repeat(n, 1))], [init("w", w)])
        peers["ort"] = lambda: s.run(None, {"x": x})[0]
    return dict(model="bench/models/linear_t.harp", syms=dict(M=m, N=n, K=k), tensors={"x": ("input", x), "w": ("param", w)}, out="y",
                peers=peers, ref=lambda: x @ w.T)


def case_gemm_bias_relu(n):
    A, B, bias = rand(n, n), rand(n, n), rand(n)
    ref = lambda: np.maximum(A @ B + bias, 0)
    peers = {"numpy": ref, "unfused": None}
    if ort:
        s = ort_session([helper.make_node("MatMul", ["A", "B"], ["m"]), helper.make_node("Add", ["m", "bias"], ["a"]),
                         helper.make_node("Relu", ["a"], ["C"])], [vi("A", A)], [vi("C", A)], [init("B", B), init("bias", bias)])
        peers["ort"] = lambda: s.run(None, {"A": A})[0]
    return dict(model="bench/models/gemm_bias_relu.json", syms=dict(M=n, N=n, K=n),
                tensors={"A": ("input", A), "B": ("param", B), "bias": ("param", bias)}, out="C", peers=peers, ref=ref)


def case_gemm16(n):
    A, B = rand(n, n, dtype=np.float16), rand(n, n, dtype=np.float16)
    A32, B32 = A.astype(np.float32), B.astype(np.float32)
    ref = lambda: (A32 @ B32).astype(np.float16)
    peers = {"numpy fp32": lambda: A32 @ B32}
    if ort:
        s = ort_session([helper.make_node("MatMul", ["A", "B"], ["C"])], [vi("A", A)], [vi("C", A)], [init("B", B)])
        peers["ort fp16"] = lambda: s.run(None, {"A": A})[0]
    return dict(model="bench/models/gemm16.json", syms=dict(M=n, N=n, K=n),
                tensors={"A": ("input", A), "B": ("param", B)}, out="C", peers=peers, ref=ref)


def case_conv(c=64, hw=56):
    x, w, b = rand(1, c, hw, hw), rand(c, c, 3, 3, scale=0.1), rand(c)
    peers = {"unfused": None, "gemm": {"HARP_CONV": "gemm"}, "packrun": {"HARP_NO_PREPACK": "1"}}
    ref = None
    if ort:
        s = ort_session([helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1])], [vi("x", x)],
                        [vi("y", x)], [init("w", w), init("b", b)])
        peers["ort"] = lambda: s.run(None, {"x": x})[0]
        ref = peers["ort"]
    return dict(model="bench/models/conv3x3.harp", syms=dict(C=c, K=c, H=hw, W=hw),
                tensors={"x": ("input", x), "w": ("param", w), "b": ("param", b)},
                out="y", peers=peers, ref=ref)


def case_dwconv():
    x, w, b = rand(1, 128, 56, 56), rand(128, 1, 3, 3, scale=0.3), rand(128)
    peers = {"unfused": None}
    ref = None
    if ort:
        s = ort_session([helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], group=128),
                         helper.make_node("Relu", ["c"], ["y"])], [vi("x", x)], [vi("y", x)], [init("w", w), init("b", b)])
        peers["ort"] = lambda: s.run(None, {"x": x})[0]
        ref = peers["ort"]
    return dict(model="bench/models/dwconv.harp", syms={}, tensors={"x": ("input", x), "w": ("param", w), "b": ("param", b)},
                out="y", peers=peers, ref=ref)


def case_resblock():
    x, w1, b1, w2, b2 = rand(1, 64, 56, 56), rand(64, 64, 3, 3, scale=0.05), rand(64), rand(64, 64, 3, 3, scale=0.05), rand(64)
    peers = {"unfused": None}
    ref = None
    if ort:
        nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c1"], ["h"]),
                 helper.make_node("Conv", ["h", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]), helper.make_node("Add", ["x", "c2"], ["a"]),
                 helper.make_node("Relu", ["a"], ["y"])]
        s = ort_session(nodes, [vi("x", x)], [vi("y", x)], [init("w1", w1), init("b1", b1), init("w2", w2), init("b2", b2)])
        peers["ort"] = lambda: s.run(None, {"x": x})[0]
        ref = peers["ort"]
    return dict(model="bench/models/resblock.harp", syms={},
                tensors={"x": ("input", x), "w1": ("param", w1), "b1": ("param", b1), "w2": ("param", w2), "b2": ("param", b2)},
                out="y", peers=peers, ref=ref)


def case_conv_bn():
    x, w, sc, sh = rand(1, 64, 56, 56), rand(64, 64, 3, 3, scale=0.1), rand(64, 1, 1), rand(64, 1, 1)
    peers = {"unfused": None}
    ref = None
    if ort:
        nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Mul", ["c", "s"], ["m"]),
                 helper.make_node("Add", ["m", "t"], ["a"]), helper.make_node("Relu", ["a"], ["y"])]
        s = ort_session(nodes, [vi("x", x)], [vi("y", x)], [init("w", w), init("s", sc), init("t", sh)])
        peers["ort"] = lambda: s.run(None, {"x": x})[0]
        ref = peers["ort"]
    return dict(model="bench/models/conv_bn.harp", syms={},
                tensors={"x": ("input", x), "w": ("param", w), "s": ("param", sc), "t": ("param", sh)},
                out="y", peers=peers, ref=ref)


def case_linear_gelu():
    x, w, b = rand(128, 768), rand(768, 3072, scale=768 ** -0.5), rand(3072)
    peers = {"packrun": {"HARP_NO_PREPACK": "1"}}
    ref = None
    if ort:
        nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]),
                 helper.make_node("Gelu", ["a"], ["y"])]
        s = ort_session(nodes, [vi("x", x)], [vi("y", rand(128, 3072))], [init("w", w), init("b", b)])
        peers["ort"] = lambda: s.run(None, {"x": x})[0]
        ref = peers["ort"]
    return dict(model="bench/models/linear_gelu.harp", syms={},
                tensors={"x": ("input", x), "w": ("param", w), "b": ("param", b)}, out="y", peers=peers, ref=ref)


def attention_nodes(B, H, S, D, scale, causal, q="q", k="k", v="v", o="o", pre=""):
    return om.attention_nodes(H, S, D, scale, causal, q=q, k=k, v=v, o=o, pre=pre)


def case_attention():
    B, H, S, D = 1, 8, 512, 64
    q, k, v = rand(B, H, S, D), rand(B, H, S, D), rand(B, H, S, D)

    def ref():
        s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(D)
        p = np.exp(s - s.max(-1, keepdims=True))
        return (p / p.sum(-1, keepdims=True)) @ v
    peers = {"numpy": ref, "unfused": None}
    if ort:
        nodes, inits = attention_nodes(B, H, S, D, 1 / np.sqrt(D), False)
        s = ort_session(nodes, [vi(n, q) for n in "qkv"], [vi("o", q)], inits)
        peers["ort"] = lambda: s.run(None, {"q": q, "k": k, "v": v})[0]
    return dict(model="bench/models/attention.harp", syms={}, tensors={n: ("input", a) for n, a in zip("qkv", (q, k, v))},
                out="o", peers=peers, ref=ref)


def layernorm_np(x, g, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def case_layernorm():
    x, g, b = rand(4096, 1024), rand(1024), rand(1024)
    peers = {"numpy": lambda: layernorm_np(x, g, b), "unfused": None}
    if ort:
        s = ort_session([helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1, epsilon=1e-5)],
                        [vi("x", x)], [vi("y", x)], [init("g", g), init("b", b)])
        peers["ort"] = lambda: s.run(None, {"x": x})[0]
    return dict(model="bench/models/layernorm.harp", syms={}, tensors={"x": ("input", x), "g": ("param", g), "b": ("param", b)},
                out="y", peers=peers, ref=peers["numpy"])


def case_softmax():
    x = rand(4096, 1024)

    def ref():
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)
    peers = {"numpy": ref, "unfused": None}
    if ort:
        s = ort_session([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], [vi("x", x)], [vi("y", x)], [])
        peers["ort"] = lambda: s.run(None, {"x": x})[0]
    return dict(model="bench/models/softmax.harp", syms={}, tensors={"x": ("input", x)}, out="y", peers=peers, ref=ref)


def gelu_np(x):
    from math import erf
    return 0.5 * x * (1 + np.vectorize(erf)(x / np.sqrt(2)).astype(np.float32))


def case_mlp():
    T, E, F = 2048, 512, 2048
    t = dict(x=rand(T, E), g=rand(E), b=rand(E), w1=rand(E, F, scale=E ** -0.5), b1=rand(F), w2=rand(F, E, scale=F ** -0.5),
             b2=rand(E))
    peers = {"unfused": None}
    ref = None
    if ort:
        nodes = [helper.make_node("LayerNormalization", ["x", "g", "b"], ["h"], axis=-1, epsilon=1e-5),
                 helper.make_node("MatMul", ["h", "w1"], ["m1"]), helper.make_node("Add", ["m1", "b1"], ["a1"]),
                 helper.make_node("Gelu", ["a1"], ["u"]), helper.make_node("MatMul", ["u", "w2"], ["m2"]),
                 helper.make_node("Add", ["m2", "b2"], ["a2"]), helper.make_node("Add", ["x", "a2"], ["y"])]
        s = ort_session(nodes, [vi("x", t["x"])], [vi("y", t["x"])], [init(k, v) for k, v in t.items() if k != "x"])
        peers["ort"] = lambda: s.run(None, {"x": t["x"]})[0]
        ref = peers["ort"]
    return dict(model="bench/models/mlp_block.harp", syms={},
                tensors={k: ("input" if k == "x" else "param", v) for k, v in t.items()}, out="y", peers=peers, ref=ref)


def case_transformer():
    B, S, E, H, F = 4, 256, 64, 4, 256
    D = E // H
    t = dict(x=rand(B, S, E), ln1_g=rand(E), ln1_b=rand(E), wq=rand(E, E, scale=E ** -0.5), wk=rand(E, E, scale=E ** -0.5),
             wv=rand(E, E, scale=E ** -0.5), wo=rand(E, E, scale=E ** -0.5), ln2_g=rand(E), ln2_b=rand(E),
             w1=rand(E, F, scale=E ** -0.5), b1=rand(F), w2=rand(F, E, scale=F ** -0.5), b2=rand(E))
    peers = {"unfused": None}
    ref = None
    if ort:
        shp = lambda name, dims: init(name, np.array(dims, dtype=np.int64))
        nodes = [helper.make_node("LayerNormalization", ["x", "ln1_g", "ln1_b"], ["h"], axis=-1, epsilon=1e-5)]
        inits = [init(k, v) for k, v in t.items() if k != "x"] + [shp("heads", [B, S, H, D]), shp("merged", [B, S, E])]
        for n, w in (("q", "wq"), ("k", "wk"), ("v", "wv")):
            nodes += [helper.make_node("MatMul", ["h", w], [n + "0"]), helper.make_node("Reshape", [n + "0", "heads"], [n + "1"]),
                      helper.make_node("Transpose", [n + "1"], [n], perm=[0, 2, 1, 3])]
        an, ai = attention_nodes(B, H, S, D, 1 / np.sqrt(D), True, o="att", pre="a_")
        nodes += an
        inits += ai
        nodes += [helper.make_node("Transpose", ["att"], ["att1"], perm=[0, 2, 1, 3]),
                  helper.make_node("Reshape", ["att1", "merged"], ["att2"]), helper.make_node("MatMul", ["att2", "wo"], ["proj"]),
                  helper.make_node("Add", ["x", "proj"], ["h1"]),
                  helper.make_node("LayerNormalization", ["h1", "ln2_g", "ln2_b"], ["h2"], axis=-1, epsilon=1e-5),
                  helper.make_node("MatMul", ["h2", "w1"], ["m1"]), helper.make_node("Add", ["m1", "b1"], ["a1"]),
                  helper.make_node("Gelu", ["a1"], ["u"]), helper.make_node("MatMul", ["u", "w2"], ["m2"]),
                  helper.make_node("Add", ["m2", "b2"], ["a2"]), helper.make_node("Add", ["h1", "a2"], ["y"])]
        s = ort_session(nodes, [vi("x", t["x"])], [vi("y", t["x"])], inits)
        peers["ort"] = lambda: s.run(None, {"x": t["x"]})[0]
        ref = peers["ort"]
    return dict(model="examples/transformer_block.harp", syms=dict(B=B, S=S),
                tensors={k: ("input" if k == "x" else "param", v) for k, v in t.items()}, out="y", peers=peers, ref=ref)


def case_resnet18():
    x, t = rand(1, 3, 224, 224), resnet18_weights(rand)
    peers = {}
    ref = None
    if ort:
        s = ort_model_session(om.resnet18(t))
        peers["ort"] = lambda: s.run(None, {"x": x})[0]
        ref = peers["ort"]
    return dict(model="bench/models/resnet18.harp", syms={}, tensors={"x": ("input", x), **{k: ("param", v) for k, v in t.items()}},
                out="y", peers=peers, ref=ref)


def bert_model(layers, E, H, F):
    """The harp DSL of `layers` BERT encoder layers (bench/models/bert_layers.harp's layer, repeated)."""
    src = open(os.path.join(ROOT, "bench", "models", "bert_layers.harp")).read()
    layer = src[src.index("graph<S=128> layer("):src.index("graph<S=128> main(")]
    names = ["wq", "bq", "wk", "bk", "wv", "bv", "wo", "bo", "g1", "lb1", "w1", "b1", "w2", "b2", "g2", "lb2"]
    dims = {"wq": f"{E}, {E}", "wk": f"{E}, {E}", "wv": f"{E}, {E}", "wo": f"{E}, {E}", "w1": f"{E}, {F}", "w2": f"{F}, {E}",
            "b1": f"{F}"}
    args = ", ".join(f"{n}{l}: f32[{dims.get(n, str(E))}]" for l in range(layers) for n in names)
    body, last = [], "x"
    for l in range(layers):
        out = "y" if l == layers - 1 else f"h{l}"
        body.append(f"    {out} = layer({last}, " + ", ".join(f"{n}{l}" for n in names) + ")")
        last = out
    text = layer.replace("768", str(E)).replace("3072", str(F)).replace("heads=12", f"heads={H}")
    text += f"graph<S=128> main(x: f32[1, S, {E}], {args}) -> (y: f32[1, S, {E}]) {{\n" + "\n".join(body) + "\n    return y\n}\n"
    path = os.path.join(tempfile.gettempdir(), f"harp-e2e-bert{layers}.harp")
    with open(path, "w") as f:
        f.write(text)
    return path


def case_bert(layers=2, S=128, E=768, H=12, F=3072):
    t = {"x": rand(1, S, E)}
    t.update(bert_weights(rand, E, F, layers))
    peers = {}
    ref = None
    if ort:
        s = ort_model_session(om.bert({k: v for k, v in t.items() if k != "x"}, layers, S, E, H, F, gelu_op=True))
        peers["ort"] = lambda: s.run(None, {"x": t["x"]})[0]
        ref = peers["ort"]
    return dict(model=bert_model(layers, E, H, F), syms=dict(S=S),
                tensors={k: ("input" if k == "x" else "param", v) for k, v in t.items()}, out="y", peers=peers, ref=ref)


# MobileNetV2 1.0's inverted residual blocks: (expansion t, output channels c, repeats n, first stride s)
MNV2_CFG = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]


def mobilenetv2_blocks():
    """(in channels, expanded, out channels, stride) of each block, in bench/models/mobilenetv2.harp's order."""
    out, c = [], 32
    for t, d, n, s in MNV2_CFG:
        for i in range(n):
            out.append((c, c * t, d, s if i == 0 else 1))
            c = d
    return out


def mobilenetv2_weights():
    """Weights named as in bench/models/mobilenetv2.harp (batch norm already folded); He-scaled."""
    t = {"w0": rand(32, 3, 3, 3, scale=(2 / 27) ** 0.5), "b0": rand(32, scale=0.1)}
    for i, (c, e, d, _) in enumerate(mobilenetv2_blocks(), 1):
        if e != c:
            t[f"e{i}"], t[f"eb{i}"] = rand(e, c, 1, 1, scale=(2 / c) ** 0.5), rand(e, scale=0.1)
        t[f"d{i}"], t[f"db{i}"] = rand(e, 1, 3, 3, scale=(2 / 9) ** 0.5), rand(e, scale=0.1)
        t[f"p{i}"], t[f"pb{i}"] = rand(d, e, 1, 1, scale=(1 / e) ** 0.5), rand(d, scale=0.1)
    t["wl"], t["bl"] = rand(1280, 320, 1, 1, scale=(2 / 320) ** 0.5), rand(1280, scale=0.1)
    t["wf"], t["bf"] = rand(1280, 1000, scale=1280 ** -0.5), rand(1000, scale=0.1)
    return t


def case_mobilenetv2():
    x, t = rand(1, 3, 224, 224), mobilenetv2_weights()
    peers = {}
    ref = None
    if ort:
        s = ort_model_session(om.mobilenetv2(t, mobilenetv2_blocks()))
        peers["ort"] = lambda: s.run(None, {"x": x})[0]
        ref = peers["ort"]
    return dict(model="bench/models/mobilenetv2.harp", syms={},
                tensors={"x": ("input", x), **{k: ("param", v) for k, v in t.items()}}, out="y", peers=peers, ref=ref)


def rope_tables(S, E, base=10000.0):
    """cos, sin [S, 1, E] of the rotate_half form (broadcast over the heads of [1, S, H, E]): angle
    p * base^(-2i/E) for i < E/2, repeated for the second half."""
    ang = np.arange(S)[:, None] * base ** (-np.arange(0, E, 2) / E)[None, :]
    ang = np.concatenate([ang, ang], axis=1)[:, None, :]
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def llama_np(t, H, eps=1e-5):
    """bench/models/llama_layer.harp in float64 numpy."""
    f = {k: v.astype(np.float64) for k, v in t.items()}
    x = f["x"]
    S, D = x.shape[1], x.shape[2]
    E = D // H
    rms = lambda v, g: v / np.sqrt((v * v).mean(-1, keepdims=True) + eps) * g
    heads = lambda v: v.reshape(1, S, H, E).transpose(0, 2, 1, 3)

    def rope(v):  # v [1, H, S, E]; the tables [S, 1, E] -> [S, E]
        r = np.concatenate([-v[..., E // 2:], v[..., :E // 2]], axis=-1)
        return v * f["cos"][:, 0] + r * f["sin"][:, 0]
    n = rms(x, f["g1"])
    q, k, v = rope(heads(n @ f["wq"])), rope(heads(n @ f["wk"])), heads(n @ f["wv"])
    sc = q @ k.transpose(0, 1, 3, 2) / np.sqrt(E) + np.triu(np.full((S, S), -np.inf), 1)
    p = np.exp(sc - sc.max(-1, keepdims=True))
    a = ((p / p.sum(-1, keepdims=True)) @ v).transpose(0, 2, 1, 3).reshape(1, S, D)
    h = x + a @ f["wo"]
    m = rms(h, f["g2"])
    u = m @ f["w1"]
    return h + (u / (1 + np.exp(-u)) * (m @ f["w3"])) @ f["w2"]


def case_llama(S=128, D=2048, H=32, F=5632):
    E = D // H
    cos, sin = rope_tables(S, E)
    t = dict(x=rand(1, S, D), g1=1 + rand(D, scale=0.1), wq=rand(D, D, scale=D ** -0.5), wk=rand(D, D, scale=D ** -0.5),
             wv=rand(D, D, scale=D ** -0.5), wo=rand(D, D, scale=D ** -0.5), g2=1 + rand(D, scale=0.1),
             w1=rand(D, F, scale=D ** -0.5), w3=rand(D, F, scale=D ** -0.5), w2=rand(F, D, scale=F ** -0.5), cos=cos, sin=sin)
    peers = {}
    if ort:
        s = ort_model_session(om.llama({k: v for k, v in t.items() if k != "x"}, S, D, H))
        peers["ort"] = lambda: s.run(None, {"x": t["x"]})[0]
    return dict(model="bench/models/llama_layer.harp", syms=dict(S=S),
                tensors={k: ("input" if k == "x" else "param", v) for k, v in t.items()}, out="y", peers=peers,
                ref=lambda: llama_np(t, H))


CASES = {
    "gemm 1024 fp32": lambda: case_gemm(1024),
    "gemm 2048 fp32": lambda: case_gemm(2048),
    "gemm+bias+relu 1024": lambda: case_gemm_bias_relu(1024),
    "gemm 1024 fp16": lambda: case_gemm16(1024),
    "gemv 1x4096x4096": lambda: case_gemv(1, 4096, 4096),
    "linear W^T 4x4096x4096": lambda: case_linear_t(4, 4096, 4096),
    "linear W^T 256x4096x4096": lambda: case_linear_t(256, 4096, 4096),
    "conv3x3 1x64x56x56": case_conv,
    "depthwise 3x3 1x128x56x56": case_dwconv,
    "conv3x3 1x256x14x14": lambda: case_conv(256, 14),
    "resnet block 1x64x56x56": case_resblock,
    "conv3x3+bn+relu 1x64x56x56": case_conv_bn,
    "linear+gelu 128x768x3072": case_linear_gelu,
    "attention b1 h8 s512 d64": case_attention,
    "layernorm 4096x1024": case_layernorm,
    "softmax 4096x1024": case_softmax,
    "mlp block 2048x512x2048": case_mlp,
    "transformer block b4 s256": case_transformer,
    "resnet18 1x3x224x224": case_resnet18,
    "bert-base 2 layers s128": case_bert,
    "bert-base 12 layers s128": lambda: case_bert(12),
    "mobilenetv2 1x3x224x224": case_mobilenetv2,
    "llama layer d2048 h32 s128": case_llama,
}


def main():
    a = bench_args(__doc__).parse_args()
    os.chdir(ROOT)
    harp = Harp(os.path.abspath(a.harp), a.repeat)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
    print(f"# harp e2e — {time.strftime('%Y-%m-%d %H:%M')} — {cpu}, {os.cpu_count()} cpus, "
          f"numpy {np.__version__}" + (f", onnxruntime {ort.__version__}" if ort else ", no onnxruntime"))
    print("| case | harp ms | peer | peer ms | peer/harp | max rel err |\n|---|---|---|---|---|---|")
    results = []
    only = [s.strip() for s in a.only.split(",") if s.strip()]
    for name, make in CASES.items():
        if only and not any(o in name for o in only):
            continue
        c = make()
        best = {"harp": float("inf")}
        for _ in range(a.rounds):
            best["harp"] = min(best["harp"], harp.bench(c["model"], c["syms"], c["tensors"])["median_ms"])
            for peer, fn in c["peers"].items():
                if fn is None or isinstance(fn, dict):  # harp itself, under other settings
                    env = fn if fn is not None else {"HARP_NO_FUSION": "1"}
                    ms = harp.bench(c["model"], c["syms"], c["tensors"], env=env)["median_ms"]
                else:
                    ms = median_ms(fn, a.repeat)
                best[peer] = min(best.get(peer, float("inf")), ms)
        err = float("nan")
        if c["ref"]:
            got = harp.run(c["model"], c["syms"], c["tensors"], c["out"]).astype(np.float64)
            want = np.asarray(c["ref"](), dtype=np.float64)
            err = float(np.max(np.abs(got - want)) / max(1e-30, np.max(np.abs(want))))
        for peer in c["peers"]:
            print(f"| {name} | {best['harp']:.2f} | {peer} | {best[peer]:.2f} | {best[peer] / best['harp']:.2f} | {err:.1e} |")
            sys.stdout.flush()
        results.append({"case": name, "harp_ms": best["harp"], "peers": {p: best[p] for p in c["peers"]}, "max_rel_err": err})
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
