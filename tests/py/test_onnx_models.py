"""Whole models imported from ONNX (tests/py/onnx_models.py, the graphs of
bench/e2e.py) at reduced sizes, compiled (weights from the initializers)
and run on the cpu backend and the interpreter (ht.run_model: in process,
or `harp run` where the build has no Python extension), compared with
onnxruntime."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import harp_test as ht  # noqa: E402

ht.onnx_or_skip()
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import onnx_models as om  # noqa: E402
from model_weights import bert_weights, mobilenetv2_weights, resnet18_weights  # noqa: E402

rng = np.random.default_rng(0)
S = ht.Suite("onnx_models")


def rand(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def check(name, m, inputs, rtol=2e-3, atol=2e-3):
    path = os.path.join(ht.tempfile.mkdtemp(), name + ".onnx")
    onnx.save(m, path)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, inputs)[0]
    for be in ht.BACKENDS:
        outs, err = ht.run_model(path, inputs, backend=be)
        S.check(f"{name} {be}: runs", err is None, (err or "")[-800:])
        if err:
            continue
        ok, why = ht.close(outs["y"], want, rtol, atol)
        S.check(f"{name} {be}: matches onnxruntime", ok, why)


def resnet():
    t = resnet18_weights(rand, widths=(8, 16, 32, 64), classes=10)
    t["wf"] = t["wf"].T.copy()
    m = om.resnet18(t, hw=32)
    # Gemm with transB: the classifier stored [classes, features] as torch's Linear
    for n in m.graph.node:
        if n.op_type == "Gemm":
            n.attribute.append(om.helper.make_attribute("transB", 1))
    check("resnet18_small", m, {"x": rand(1, 3, 32, 32)})


def bert(gelu_op):
    L, Sq, E, H, F = 1, 16, 64, 4, 128
    t = bert_weights(rand, E, F)
    check("bert_layer_gelu_op" if gelu_op else "bert_layer_erf", om.bert(t, L, Sq, E, H, F, gelu_op=gelu_op),
          {"x": rand(1, Sq, E)})


def mobilenet():
    cfg = [(1, 8, 1, 1), (6, 12, 2, 2), (6, 16, 2, 2)]
    blocks = om.mobilenetv2_blocks(cfg, c=8)
    t = mobilenetv2_weights(rand, blocks, 8, 32, 10)
    check("mobilenetv2_small", om.mobilenetv2(t, blocks, hw=32), {"x": rand(1, 3, 32, 32)})


def llama():
    Sq, D, H, F = 16, 64, 4, 96
    E = D // H
    ang = np.arange(Sq)[:, None] * 10000.0 ** (-np.arange(0, E, 2) / E)[None, :]
    ang = np.concatenate([ang, ang], axis=1)[:, None, :]
    t = dict(g1=1 + rand(D, scale=0.1), wq=rand(D, D, scale=D ** -0.5), wk=rand(D, D, scale=D ** -0.5),
             wv=rand(D, D, scale=D ** -0.5), wo=rand(D, D, scale=D ** -0.5), g2=1 + rand(D, scale=0.1),
             w1=rand(D, F, scale=D ** -0.5), w3=rand(D, F, scale=D ** -0.5), w2=rand(F, D, scale=F ** -0.5),
             cos=np.cos(ang).astype(np.float32), sin=np.sin(ang).astype(np.float32))
    check("llama_layer_small", om.llama(t, Sq, D, H), {"x": rand(1, Sq, D)})


resnet()
bert(False)
bert(True)
mobilenet()
llama()
S.close()
