"""gen_fault_models.py — writes small_cnn.onnx, the ONNX model the fault
injection test (tests/unit/test_fault_compile.c) compiles: Conv 3x3 (4
channels) + Relu, MaxPool 2x2, Flatten, Gemm to 5 classes; weights as
initializers, a fixed seed.  Run: python3 tests/models/gen_fault_models.py"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

here = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(30)


def init(name, shape):
    return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.5, name)


nodes = [
    helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["c1"], ["r1"]),
    helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
    helper.make_node("Flatten", ["p1"], ["f"]),
    helper.make_node("Gemm", ["f", "wf", "bf"], ["y"]),
]
g = helper.make_graph(nodes, "small_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8, 8])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])],
                      [init("w1", (4, 3, 3, 3)), init("b1", (4,)), init("wf", (64, 5)), init("bf", (5,))])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
onnx.checker.check_model(m)
onnx.save(m, os.path.join(here, "small_cnn.onnx"))
