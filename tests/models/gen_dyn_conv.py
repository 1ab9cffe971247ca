"""gen_dyn_conv.py — writes dyn_conv.onnx: y = relu(conv3x3(x, w, b, pad 1)) * 0.5 + x[:, :1]
over x: float[N, 4, H, W] with dim_params N, H, W (the tests of the box harp chooses by itself:
tests/unit/test_c_api_autobox.c, tests/py/test_cli_autobox.py).  w[i] = ((7 i) % 13 - 6) / 20 over
w's 8*4*3*3 elements in order, b[j] = (j % 5 - 2) / 10: the C test recomputes them.
Needs: onnx, numpy.  Run: python3 tests/models/gen_dyn_conv.py"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper

w = ((np.arange(8 * 4 * 3 * 3) * 7) % 13 - 6).astype(np.float32).reshape(8, 4, 3, 3) / 20
b = (np.arange(8) % 5 - 2).astype(np.float32) / 10
nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
         helper.make_node("Relu", ["c"], ["r"]),
         helper.make_node("Mul", ["r", "half"], ["m"]),
         helper.make_node("Slice", ["x", "s0", "s1", "ax"], ["x0"]),
         helper.make_node("Add", ["m", "x0"], ["y"])]
inits = [helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.flatten()),
         helper.make_tensor("b", TensorProto.FLOAT, b.shape, b),
         helper.make_tensor("half", TensorProto.FLOAT, [], [0.5]),
         helper.make_tensor("s0", TensorProto.INT64, [1], [0]),
         helper.make_tensor("s1", TensorProto.INT64, [1], [1]),
         helper.make_tensor("ax", TensorProto.INT64, [1], [1])]
g = helper.make_graph(nodes, "dyn_conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, "H", "W"])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8, "H", "W"])], inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
m.ir_version = 8
onnx.checker.check_model(m)
onnx.save(m, os.path.join(os.path.dirname(os.path.abspath(__file__)), "dyn_conv.onnx"))
