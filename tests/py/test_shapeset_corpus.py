#!/usr/bin/env python3
"""test_shapeset_corpus.py — issue 25's acceptance for the models of tests/
that test_shapeset_models.py (tests/models) does not glob: every model of
examples/ and of tests/models/gpu/ (both globbed: a file without a row fails
the test), and the whole networks of onnx_models.py (a small ResNet-18 and
MobileNetV2 over their batch, a BERT layer over its sequence length),
each compiled ONCE as a ShapeSet session (harp.InferenceSession(...,
shapesets=BOX)) on the CPU and run at two or more bindings inside, every
output against the reference interpreter on the same feeds, and one object
for the box or the reason recorded in its row (shapeset_table.py).

The GPU models declare fixed shapes: a rewrite of their text names the
batch, the rows of a GEMM or of a softmax as a symbol.  Not here:
onnx_models.llama (its rotary tables are initializers of S rows: the DSL
twin is tests/models/llama_layer_tiny.harp, an ONNX rotary table from
Range(0, S) is test_shapeset_weights.py's); onnx_models.cnn_s2, fpn_s2 and
range_constantofshape are test_shapeset_dsym.py's, test_shapeset_fdiv.py's
and test_shapeset_sizes.py's.  About 45 s of CPU (the C compiles at -O1);
HARP_SS_CORPUS=name,... runs some only."""
import glob
import os
import tempfile

import numpy as np

os.environ.setdefault("HARP_CC_OPT", "1")  # what the kernels compute, at a shorter cold compile (docs/options.md)
from harp_py import SRC, Suite  # (skips, 77, where the build has no Python package)
from shapeset_table import row, run_table

s = Suite("shapeset_corpus")
D = tempfile.mkdtemp()
CACHE = tempfile.mkdtemp()


def named(old_new, main="graph main(", syms="N=2"):
    """A rewrite naming a fixed model's sizes: its main declares syms, each (old, new) substituted."""
    return [(main, main.replace("graph ", f"graph<{syms}> "))] + list(old_new)


N13 = [{"N": 1}, {"N": 3}, {"N": 2}]
TABLE = {
    # ---- examples/
    "cnn.harp": row({"N": (1, 4)}, [{"N": 1}, {"N": 4}, {"N": 3}], tol=1e-3),
    "conv_block.harp": row({"H": (4, 20)}, [{"H": 4}, {"H": 20}, {"H": 13}], {"N": 1, "W": 16}, tol=1e-3),
    "mlp.harp": row({"B": (1, 40)}, [{"B": 1}, {"B": 40}, {"B": 17}], tol=1e-3),
    "transformer_block.harp": row({"S": (2, 40)}, [{"S": 2}, {"S": 40}, {"S": 21}], {"B": 1}, tol=1e-3),
    # ---- tests/models/gpu/ (fp16 and bf16 on the CPU's own kernels; shapes named by a rewrite)
    "conv3x3_s1.harp": row({"N": (1, 3)}, N13, tol=2e-2,
                           rewrite=named([("f16[2, 8, 10, 10]", "f16[N, 8, 10, 10]"), ("f16[2, 16, 10, 10]", "f16[N, 16, 10, 10]")])),
    "conv3x3_s2.harp": row({"N": (1, 3)}, N13, tol=2e-2,
                           rewrite=named([("f16[1, 8, 11, 11]", "f16[N, 8, 11, 11]"), ("f16[1, 16, 6, 6]", "f16[N, 16, 6, 6]")])),
    "conv_chain.harp": row({"N": (1, 3)}, N13, tol=3e-2,
                           rewrite=named([("f16[2, 16, 10, 10]", "f16[N, 16, 10, 10]"), ("f16[2, 8, 10, 10]", "f16[N, 8, 10, 10]")])),
    "conv_grouped.harp": row({"N": (1, 3)}, N13, tol=2e-2, rewrite=named([("f16[2, ", "f16[N, ")])),
    "conv_long_k.harp": row({"N": (1, 3)}, N13, tol=2e-2,
                            rewrite=named([("f16[1, 256, 6, 6]", "f16[N, 256, 6, 6]"), ("f16[1, 64, 6, 6]", "f16[N, 64, 6, 6]")])),
    "conv_skip_tail.harp": row({"N": (1, 3)}, N13, tol=2e-2, rewrite=named([("f16[2, ", "f16[N, ")])),
    # the conv over the batch, the three f16 GEMMs over their rows M
    "epi_mul_shift.harp": row({"N": (1, 3), "M": (8, 40)}, [{"N": 1, "M": 8}, {"N": 3, "M": 40}, {"N": 2, "M": 21}], tol=2e-2,
                              rewrite=named([("f16[2, ", "f16[N, "), ("f16[40, ", "f16[M, ")], syms="N=2, M=40")),
    "fp32_block.harp": row({"N": (1, 3)}, N13, tol=1e-3,
                           rewrite=named([("f32[2, 16, 8, 8]", "f32[N, 16, 8, 8]"), ("[32, 64]", "[N * 16, 64]"),
                                          ("f32[32, 40]", "f32[N * 16, 40]")])),
    "fp32_matmul_nmajor.harp": row({"M": (8, 128)}, [{"M": 8}, {"M": 128}, {"M": 77}], tol=1e-3,
                                   rewrite=named([("x: f32[128, 128]", "x: f32[M, 128]"), ("y: f32[128, 96]", "y: f32[M, 96]")],
                                                 syms="M=128")),
    "gemm_bcast.harp": row({"M": (8, 72)}, [{"M": 8}, {"M": 72}, {"M": 37}], tol=2e-2,
                           rewrite=named([("[2, 3, 72, ", "[2, 3, M, ")], syms="M=72")),
    # its rows are an expand's, no input's: the box is B's columns N, read at run time (cgen_gemm_spec.n_expr)
    "gemm_rows_bcast.harp": row({"N": (8, 48)}, [{"N": 8}, {"N": 48}, {"N": 19}], tol=2e-2,
                                rewrite=named([("f16[64, 48]", "f16[64, N]"), ("f16[32, 48]", "f16[32, N]")], syms="N=48")),
    "gemm_skinny.harp": row({"M": (8, 64)}, [{"M": 8}, {"M": 64}, {"M": 29}], tol=3e-2,
                            rewrite=named([("a: f16[64, 4096]", "a: f16[M, 4096]"), ("c: f16[64, 64]", "c: f16[M, 64]")], syms="M=64")),
    "gemm_skinny_scale.harp": row({"M": (8, 64)}, [{"M": 8}, {"M": 64}, {"M": 29}], tol=3e-2,
                                  rewrite=named([("a: f16[64, 4096]", "a: f16[M, 4096]"), ("c: f16[64, 64]", "c: f16[M, 64]")],
                                                syms="M=64")),
    "gemm_tail.harp": row({"M": (2, 70)}, [{"M": 2}, {"M": 70}, {"M": 33}], tol=2e-2,
                          rewrite=named([("a: f16[70, 38]", "a: f16[M, 38]"), ("c: f16[70, 50]", "c: f16[M, 50]")], syms="M=70")),
    # two subgraphs called twice each: the encoder over its sequence S, the int32 dense layers over their rows R
    # (feeds in [-0.5, 0.5]: from [-2, 2] the second encoder's fp16 sums overflow to inf, here and in the interpreter)
    "repeat_layers.harp": row({"S": (2, 16), "R": (2, 16)}, [{"S": 2, "R": 2}, {"S": 16, "R": 16}, {"S": 9, "R": 5}], tol=3e-2, feed=0.5,
                              rewrite=named([("f16[1, 16, 32]", "f16[1, S, 32]"), ("i32[16, 24]", "i32[R, 24]"),
                                             ("graph enc(", "graph<S=16> enc("), ("graph dense(", "graph<R=16> dense(")],
                                            syms="S=16, R=16")),
    "rows_mixed.harp": row({"B": (1, 6), "G": (1, 3)}, [{"B": 1, "G": 1}, {"B": 6, "G": 3}, {"B": 4, "G": 2}],
                           rewrite=named([("f32[6, ", "f32[B, "), ("[3, 7]", "[G, 7]")], syms="B=6, G=3")),
    # the rows vary (the row length is a constant of the softmax template: over L it compiles per binding)
    "softmax_half.harp": row({"B": (1, 3), "R": (1, 6)}, [{"B": 1, "R": 1}, {"B": 3, "R": 6}, {"B": 2, "R": 4}], tol=2e-2,
                             rewrite=named([("[3, 5, 40]", "[B, 5, 40]"), ("[6, 33]", "[R, 33]")], syms="B=3, R=6")),
    "transformer_block_fp16.harp": row({"S": (2, 40)}, [{"S": 2}, {"S": 40}, {"S": 21}], {"B": 1}, tol=3e-2),
    # ---- onnx_models.py's networks (written below): the batch, or the sequence, a dim_param
    "resnet18_small.onnx": row({"batch": (1, 3)}, [{"batch": 1}, {"batch": 3}, {"batch": 2}], tol=1e-3),
    "mobilenetv2_small.onnx": row({"batch": (1, 3)}, [{"batch": 1}, {"batch": 3}, {"batch": 2}], tol=1e-3),
    "bert_layer.onnx": row({"S": (4, 32)}, [{"S": 4}, {"S": 32}, {"S": 13}], tol=1e-3, onnx_dims={1: "S"}),
}


def onnx_networks():
    """onnx_models.py's ResNet-18, MobileNetV2 (small widths, 32x32 images) and a BERT layer (its
    Reshapes to [1, -1, heads, D] and [1, -1, E], so its sequence can vary), written into D/in: their paths."""
    import onnx_models as om
    from model_weights import bert_weights, mobilenetv2_weights, resnet18_weights
    rng = np.random.default_rng(7)

    def rand(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    t = resnet18_weights(rand, widths=(8, 16, 32, 64), classes=10)
    nets = {"resnet18_small.onnx": om.resnet18(t, hw=32)}
    blocks = om.mobilenetv2_blocks([(1, 8, 1, 1), (6, 12, 2, 2), (6, 16, 2, 2)], c=8)
    nets["mobilenetv2_small.onnx"] = om.mobilenetv2(mobilenetv2_weights(rand, blocks, 8, 32, 10), blocks, hw=32)
    E, H, F = 64, 4, 128
    bert = om.bert(bert_weights(rand, E, F), 1, 16, E, H, F)
    for init in bert.graph.initializer:
        if init.name in ("heads", "merged"):
            init.CopyFrom(om.init(init.name, np.array([1, -1, H, E // H] if init.name == "heads" else [1, -1, E], np.int64)))
    nets["bert_layer.onnx"] = bert
    import onnx
    os.makedirs(os.path.join(D, "in"), exist_ok=True)
    paths = [os.path.join(D, "in", name) for name in nets]
    for path, m in zip(paths, nets.values()):
        onnx.save(m, path)
    return paths


paths = glob.glob(os.path.join(SRC, "examples", "*.harp")) + glob.glob(os.path.join(SRC, "tests", "models", "gpu", "*.harp"))
paths += onnx_networks()
run_table(s, TABLE, paths, D, CACHE, "HARP_SS_CORPUS")
s.close()
