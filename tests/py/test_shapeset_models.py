#!/usr/bin/env python3
"""test_shapeset_models.py — issue 25's acceptance, generated: every model
of tests/models (.json, .harp, .onnx; the list globbed, not kept by hand)
compiled ONCE as a ShapeSet session (harp.InferenceSession(...,
shapesets=BOX), harp.h's shapesets) over a box of one or two of its
symbols, then run at two or more bindings inside, each output against the
reference interpreter (providers=["interp"]) on the same feeds.

The table below holds, per model, the box, the symbols kept fixed, the
bindings and what the compile gives today: ONE (one object serves the box,
one C compile), or a piece of the reason it compiles per binding instead
(rt_sgen_fallback, `--time-stages`' "a compile per binding: ..."), or a
piece of the error the model gets on the CPU at all (it then runs nowhere:
recorded, not skipped).  Either way the numbers must agree.  A model with
fixed shapes gets a symbol by a rewrite of its text (REWRITE: the batch or
a spatial dim), a file's ONNX input its dim_param.  A model in
tests/models without a row fails the test: add one.  The row and the check
are shapeset_table.py's (test_shapeset_corpus.py: examples/, tests/models/gpu/
and the ONNX networks).  The slow rows compile their C at -O1 (at -O3 with
HARP_TEST_SLOW=1).  About 55 s of CPU; HARP_SS_MODELS=name,... runs some
only."""
import glob
import os
import re
import tempfile

from harp_py import SRC, Suite
from shapeset_table import PER_BINDING, row, run_table

s = Suite("shapeset_models")
D = tempfile.mkdtemp()
CACHE = tempfile.mkdtemp()


ATT = {"B": 1, "H": 2, "N": 24, "D": 16, "Dv": 16}
TABLE = {
    # ---- Tiny IR (JSON)
    "attention_full.json": row({"M": (2, 40)}, [{"M": 2}, {"M": 40}, {"M": 17}], ATT),
    "attention_full_fp16.json": row({"M": (2, 40)}, [{"M": 2}, {"M": 40}, {"M": 17}], ATT, tol=2e-2),
    # the causal mask's iota nests: their loops and arrays read M + 1 (a named window count), the
    # pad's guard the PAD input's box (c1 + c2 < M, astgen_sym.c's pad_guard); the mask is bottom-right
    # aligned, so at M = N the template could take it and at M < N not: the nests at every binding
    "attention_full_causal.json": row({"M": (2, 24)}, [{"M": 2}, {"M": 24}, {"M": 13}, {"M": 7}], ATT),
    "attention_full_causal_fp16.json": row({"M": (2, 24)}, [{"M": 2}, {"M": 24}, {"M": 13}], ATT, tol=2e-2, slow=True),
    "attention_full_mask.json": row({"N": (3, 40)}, [{"N": 3}, {"N": 40}, {"N": 21}], {"B": 2, "H": 2, "M": 12, "D": 16, "Dv": 16}),
    # a batched fp16 GEMM: a batch at a time, its rows at run time (contract_batch_c.c)
    "attention_qkt.json": row({"M": (2, 24)}, [{"M": 2}, {"M": 24}, {"M": 9}], {"B": 1, "H": 2, "N": 16, "D": 16}, tol=2e-2),
    "conv3x3_bias_silu.json": row({"H": (4, 20)}, [{"H": 4}, {"H": 20}, {"H": 11}], {"N": 1, "C": 8, "W": 12, "O": 16}),
    "conv3x3_bias_silu_fp16.json": row({"H": (4, 20)}, [{"H": 4}, {"H": 20}, {"H": 11}], {"N": 1, "C": 8, "W": 12, "O": 16}, tol=2e-2),
    "dsym_names.json": row({"W": (2, 40)}, [{"W": 2}, {"W": 40}, {"W": 18}]),
    # a strided read of a derived size (H + 1) / 2: at H = 2 it is 1, the corners compared from H = 3
    "dsym_skip.json": row({"H": (2, 41)}, [{"H": 2}, {"H": 41}, {"H": 20}, {"H": 3}, {"H": 27}], {"N": 3}),
    "gelu_bias_rows.json": row({"R": (2, 300)}, [{"R": 2}, {"R": 300}, {"R": 77}]),
    "gemm_chain4.json": row({"M": (2, 40)}, [{"M": 2}, {"M": 40}, {"M": 13}], {"D": 16}, tol=1e-3),
    # rows of 5 points at the lower corner, 40 at the upper: one map kernel, its row length at run time
    "map_short_rows.json": row({"W": (5, 40)}, [{"W": 5}, {"W": 40}, {"W": 13}]),
    "layernorm.json": row({"R": (2, 48)}, [{"R": 2}, {"R": 48}, {"R": 20}]),
    "layernorm_fp16.json": row({"R": (2, 40)}, [{"R": 2}, {"R": 40}, {"R": 9}], tol=2e-2),
    # valid only where 4 R == 8 H: R made the derived symbol 2 H by a rewrite, H the box
    "reshape_rows.json": row({"H": (1, 20)}, [{"H": 1}, {"H": 20}, {"H": 7}],
                             rewrite=[('"R"', '"ds_r"'), ('"outputs"', '"derived": {"ds_r": "2*H"},\n "outputs"')]),
    "seed000_gemm_bias_relu.json": row({"M": (3, 61)}, [{"M": 3}, {"M": 61}, {"M": 29}], {"K": 19, "N": 70}, tol=1e-3),
    # the spec's attention as loops (no template): the nest reads M at run time
    "seed001_attention.json": row({"M": (2, 24)}, [{"M": 2}, {"M": 24}, {"M": 11}], {"B": 1, "H": 2, "N": 6, "D": 4}),
    # the spec's conv names its output size (Oy, Ox) as symbols of their own: the batch varies
    "seed001_conv.json": row({"N": (1, 3)}, [{"N": 1}, {"N": 3}],
                             {"Cin_total": 3, "H": 7, "W": 6, "Cout": 4, "Cin": 3, "Kh": 3, "Kw": 3, "pt": 1, "pb": 1, "pl": 1,
                              "pr": 1, "Sh": 2, "Sw": 1, "Dh": 1, "Dw": 2, "G": 1, "Rcout": 4, "Oy": 4, "Ox": 4}),
    "seed001_gemm.json": row({"M": (2, 40)}, [{"M": 2}, {"M": 40}, {"M": 9}], {"K": 16, "N": 24}, tol=2e-2),
    "softmax_rows.json": row({"R": (1, 48)}, [{"R": 1}, {"R": 48}, {"R": 19}], {"L": 33}),
    # ---- the DSL
    # the fused QKV's causal iota: as attention_full_causal's, the pad's guard the PAD input's box
    "attention_fused_qkv.harp": row({"S": (2, 40)}, [{"S": 2}, {"S": 40}, {"S": 17}], {"B": 2}, tol=1e-3, slow=True),
    "attention_heads_mask.harp": row({"N": (3, 40)}, [{"N": 3}, {"N": 40}, {"N": 19}], {"B": 2, "M": 24}, slow=True),
    # bench/models/llama_layer.harp at toy widths: RMSNorm, rotary tables [S, 1, 16], causal attention, SwiGLU
    "llama_layer_tiny.harp": row({"S": (2, 40)}, [{"S": 2}, {"S": 40}, {"S": 17}], tol=1e-3, slow=True),
    "bert_base_2layers.harp": row({"S": (8, 24)}, [{"S": 8}, {"S": 24}], tol=1e-3, slow=True),
    "cat_hw.harp": row({"H": (4, 20)}, [{"H": 4}, {"H": 20}, {"H": 9}], {"N": 1, "W": 12}),
    "const_pad_rows.harp": row({"R": (2, 30)}, [{"R": 2}, {"R": 30}, {"R": 17}]),
    "cnn_hw.harp": row({"H": (6, 20)}, [{"H": 6}, {"H": 20}, {"H": 12}], {"N": 1, "W": 10}, tol=1e-3, slow=True),
    # the 3x3 convs run Winograd at the upper corner: its error
    "conv_pad_hw.harp": row({"H": (6, 20)}, [{"H": 6}, {"H": 20}, {"H": 11}], {"N": 1, "W": 16}, tol=1e-2),
    "d2s_hw.harp": row({"H": (2, 12)}, [{"H": 2}, {"H": 12}, {"H": 5}], {"N": 1, "W": 8}),
    # a conv and a pool over derived sizes ((H + 1) / 2): the pool's window count named (tiny_infer_move);
    # at H = 5 the pool has one row of windows
    "dsym_cnn.harp": row({"H": (5, 21)}, [{"H": 5}, {"H": 21}, {"H": 7}, {"H": 13}, {"H": 12}], {"N": 1, "W": 9},
                         tol=1e-3, slow=True),
    # the GEMM template reads its rows or its columns at run time, not both at once
    "gemm_mn.harp": row({"M": (2, 40), "N": (3, 70)}, [{"M": 2, "N": 3}, {"M": 40, "N": 70}, {"M": 13, "N": 29}],
                        expect=PER_BINDING),
    "dsym_reshape.harp": row({"n": (4, 64)}, [{"n": 4}, {"n": 64}, {"n": 28}]),
    # the batch of 1x1 convs on the GEMM template, read at run time (at 1, 3 and 5 images: the tasks split per run)
    "pw_batch.harp": row({"N": (1, 5)}, [{"N": 1}, {"N": 5}, {"N": 3}], tol=1e-3),
    "dw_hw.harp": row({"N": (1, 3)}, [{"N": 1}, {"N": 3}, {"N": 2}], {"H": 16, "W": 16}, tol=1e-3),
    "mha_proj.harp": row({"S": (2, 40)}, [{"S": 2}, {"S": 40}, {"S": 23}], tol=1e-3, slow=True),
    "pool_hw.harp": row({"H": (4, 20)}, [{"H": 4}, {"H": 20}, {"H": 10}], {"N": 1, "W": 12}),
    "pool_pad_hw.harp": row({"H": (5, 21)}, [{"H": 5}, {"H": 21}, {"H": 12}], {"N": 1, "W": 11}, slow=True),
    "scale_hw.harp": row({"H": (4, 20)}, [{"H": 4}, {"H": 20}, {"H": 9}], {"N": 1, "W": 8}),
    "se_hw.harp": row({"H": (4, 20)}, [{"H": 4}, {"H": 20}, {"H": 9}], {"N": 1, "W": 8}, tol=1e-3),
    "seq_nest.harp": row({"W": (8, 64)}, [{"W": 8}, {"W": 64}, {"W": 22}], {"N": 1}),
    # main's input has a fixed size: made the symbol L by a rewrite
    "seed002_multi_output.harp": row({"L": (1, 100)}, [{"L": 1}, {"L": 100}, {"L": 37}],
                                     rewrite=[("graph main(", "graph<L=10> main("), ("f32[10]", "f32[L]")]),
    "seed002_subgraph.harp": row({"D": (1, 50)}, [{"D": 1}, {"D": 50}, {"D": 19}], {"B": 2}),
    # the upsampled sizes are symbols of their own (G = 2 H, P = 4 H): boxed with H, bound together
    "up2_add.harp": row({"H": (2, 12), "G": (4, 24)}, [{"H": 2, "G": 4}, {"H": 12, "G": 24}, {"H": 5, "G": 10}],
                        {"N": 1, "W": 8, "V": 16}),
    "up2_crop.harp": row({"H": (2, 12), "G": (4, 24)}, [{"H": 2, "G": 4}, {"H": 12, "G": 24}, {"H": 5, "G": 10}],
                         {"N": 1, "W": 8, "V": 15}),
    "upcat_hw.harp": row({"H": (2, 8), "G": (4, 16), "P": (8, 32)}, [{"H": 2, "G": 4, "P": 8}, {"H": 7, "G": 14, "P": 28}],
                         {"N": 1, "W": 4, "V": 8, "Q": 16}),
    # ---- ONNX: fixed shapes, the batch made a dim_param
    "small_cnn.onnx": row({"batch": (1, 6)}, [{"batch": 1}, {"batch": 4}, {"batch": 6}], tol=1e-3),
    # named dims N, H, W (the box harp chooses by itself: test_cli_autobox.py): a box over all three
    "dyn_conv.onnx": row({"N": (1, 3), "H": (4, 20), "W": (4, 20)},
                         [{"N": 1, "H": 4, "W": 4}, {"N": 3, "H": 20, "W": 20}, {"N": 2, "H": 9, "W": 13}],
                         tol=1e-3, onnx_dims={0: "N"}),
}
paths = [p for p in glob.glob(os.path.join(SRC, "tests", "models", "*")) if re.search(r"\.(json|harp|onnx)$", p)]
run_table(s, TABLE, paths, D, CACHE, "HARP_SS_MODELS")
s.close()
