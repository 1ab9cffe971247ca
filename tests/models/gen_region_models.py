#!/usr/bin/env python3
"""Generates the Tiny IR test models of region formation (tests/models/*.json).

    python3 tests/models/gen_region_models.py      # rewrites the files below

Each model is written as the harp frontend would lower it (seed 000 §2):
contractions as RESHAPE/EXPAND -> MUL -> REDUCE(SUM) in fp32, SiLU as
x * 1/(1 + 2^(-x log2 e)), softmax max-shifted with EXP2, LayerNorm in two
passes, the causal mask from a POOL-made iota (j > i)."""
import json, os

LOG2E = 1.4426950408889634
HERE = os.path.dirname(os.path.abspath(__file__))


class G:
    def __init__(self):
        self.uops, self.n = [], 0

    def add(self, uop, src=None, arg=None, id=None, tag=None):
        if id is None:
            id = "t%d" % self.n
            self.n += 1
        u = {"id": id, "uop": uop}
        if src is not None:
            u["src"] = src
        if arg is not None:
            u["arg"] = arg
        if tag is not None:
            u["tag"] = tag
        self.uops.append(u)
        return id

    def inp(self, name, dt, shape, param=False):
        arg = {"tensor_id": name, "dtype": dt, "shape": shape}
        if param:
            arg["storage"] = "param"
        return self.add("INPUT", arg=arg, id=name.lower() + "_in")

    def write(self, file, outputs, comment):
        for u in self.uops:  # the model output is called "out"
            if u["id"] == outputs[0]:
                u["id"] = "out"
        outputs = ["out"]
        with open(os.path.join(HERE, file), "w") as f:
            json.dump({"comment": comment, "uops": self.uops, "outputs": outputs}, f, indent=1)
            f.write("\n")


def matmul(g, a, b, M, K, N, tag):
    """a [M, K] x b [K, N] -> [M, N] fp32 (a, b node ids)."""
    ar = g.add("RESHAPE", [a], {"result_shape": [M, K, 1]})
    br = g.add("RESHAPE", [b], {"result_shape": [1, K, N]})
    ae = g.add("EXPAND", [ar], {"result_shape": [M, K, N]})
    be = g.add("EXPAND", [br], {"result_shape": [M, K, N]})
    p = g.add("MUL", [ae, be])
    return g.add("REDUCE", [p], {"op": "SUM", "axes": [1], "dtype": "fp32"}, tag=tag)


def silu(g, x, tag):
    t = g.add("MUL", [x, -LOG2E])
    t = g.add("EXP2", [t])
    t = g.add("ADD", [t, 1.0])
    t = g.add("RECIP", [t])
    return g.add("MUL", [x, t], tag=tag)


def gemm_chain():
    g = G()
    x = g.inp("X", "fp32", ["M", "D"])
    h = x
    for l in range(4):
        w = g.inp("W%d" % l, "fp32", ["D", "D"], param=True)
        b = g.inp("b%d" % l, "fp32", ["D"], param=True)
        y = matmul(g, h, w, "M", "D", "D", "gemm%d" % l)
        y = g.add("ADD", [y, b], tag="bias%d" % l)
        h = g.add("RELU", [y], tag="relu%d" % l)
    g.write("gemm_chain4.json", [h], "4 x (GEMM + bias + ReLU), fp32 (region tests: 4 regions, arena reuse)")


def conv(dt):
    g = G()
    x = g.inp("X", dt, ["N", "C", "H", "W"])
    w = g.inp("Wc", dt, ["O", "C", 3, 3], param=True)
    b = g.inp("bias", dt, ["O"], param=True)
    xp = g.add("PAD", [x], {"pad": [[0, 0], [0, 0], [1, 1], [1, 1]], "value": 0})
    xw = g.add("POOL", [xp], {"kernel": [3, 3]})                                   # [N, C, H, W, 3, 3]
    x1 = g.add("RESHAPE", [xw], {"result_shape": ["N", 1, "C", "H", "W", 3, 3]})
    x2 = g.add("PERMUTE", [x1], {"perm": [0, 1, 3, 4, 2, 5, 6]})                 # [N, 1, H, W, C, 3, 3]
    x3 = g.add("EXPAND", [x2], {"result_shape": ["N", "O", "H", "W", "C", 3, 3]})
    w1 = g.add("RESHAPE", [w], {"result_shape": [1, "O", 1, 1, "C", 3, 3]})
    w2 = g.add("EXPAND", [w1], {"result_shape": ["N", "O", "H", "W", "C", 3, 3]})
    p = g.add("MUL", [x3, w2])
    y = g.add("REDUCE", [p], {"op": "SUM", "axes": [4, 5, 6], "dtype": "fp32"}, tag="conv")
    b1 = g.add("RESHAPE", [b], {"result_shape": [1, "O", 1, 1]})
    y = g.add("ADD", [y, b1], tag="bias_add")
    y = silu(g, y, "silu")
    if dt != "fp32":
        y = g.add("CAST", [y], {"to": dt}, tag="out_cast")
    g.write("conv3x3_bias_silu%s.json" % ("" if dt == "fp32" else "_" + dt), [y],
            "conv 3x3 stride 1 pad 1 + bias + SiLU, %s storage, fp32 accumulation (seed 000 §7.2)" % dt)


def layernorm(dt, D=64):
    g = G()
    x = g.inp("X", dt, ["R", D])
    gamma = g.inp("gamma", dt, [D], param=True)
    beta = g.inp("beta", dt, [D], param=True)
    if dt != "fp32":
        x = g.add("CAST", [x], {"to": "fp32"})
    s = g.add("REDUCE", [x], {"op": "SUM", "axes": [1], "dtype": "fp32"}, tag="sum_x")
    mean = g.add("MUL", [s, 1.0 / D], tag="mean")
    xc = g.add("SUB", [x, g.add("RESHAPE", [mean], {"result_shape": ["R", 1]})], tag="xc")
    sq = g.add("MUL", [xc, xc], tag="sq")
    v = g.add("REDUCE", [sq], {"op": "SUM", "axes": [1], "dtype": "fp32"}, tag="sum_sq")
    var = g.add("MUL", [v, 1.0 / D], tag="var")
    rs = g.add("RSQRT", [g.add("ADD", [var, 1e-5], tag="var_eps")], tag="rstd")
    y = g.add("MUL", [xc, g.add("RESHAPE", [rs], {"result_shape": ["R", 1]})], tag="norm")
    gm, bt = gamma, beta
    if dt != "fp32":
        gm = g.add("CAST", [gamma], {"to": "fp32"})
        bt = g.add("CAST", [beta], {"to": "fp32"})
    y = g.add("MUL", [y, gm], tag="scale")
    y = g.add("ADD", [y, bt], tag="shift")
    if dt != "fp32":
        y = g.add("CAST", [y], {"to": dt}, tag="out_cast")
    g.write("layernorm%s.json" % ("" if dt == "fp32" else "_" + dt), [y],
            "LayerNorm over the last axis (D = %d, two passes, eps 1e-5), %s storage" % (D, dt))


def iota_rev(g, X):
    """[X] holding X - i, as the frontend makes it (CONST-only: no input)."""
    c = g.add("CONST", arg={"value": 1.0, "dtype": "fp32"})
    c1 = g.add("RESHAPE", [c], {"result_shape": [1]})
    e = g.add("EXPAND", [c1], {"result_shape": [X]})
    p = g.add("PAD", [e], {"pad": [[0, X]]})
    w = g.add("POOL", [p], {"kernel": [X]})
    s = g.add("REDUCE", [w], {"op": "SUM", "axes": [1], "dtype": "fp32"})
    return g.add("SHRINK", [s], {"lo": [0], "hi": [X]})


def attention(dt, causal=False, mask=False):
    g = G()
    q = g.inp("Q", dt, ["B", "H", "M", "D"])
    k = g.inp("K", dt, ["B", "H", "N", "D"])
    v = g.inp("V", dt, ["B", "H", "N", "Dv"])
    mk = g.inp("mask", "fp32", ["M", "N"]) if mask else None
    q1 = g.add("RESHAPE", [q], {"result_shape": ["B", "H", "M", 1, "D"]})
    k1 = g.add("RESHAPE", [k], {"result_shape": ["B", "H", 1, "N", "D"]})
    q2 = g.add("EXPAND", [q1], {"result_shape": ["B", "H", "M", "N", "D"]})
    k2 = g.add("EXPAND", [k1], {"result_shape": ["B", "H", "M", "N", "D"]})
    s = g.add("REDUCE", [g.add("MUL", [q2, k2])], {"op": "SUM", "axes": [4], "dtype": "fp32"}, tag="qk")
    s = g.add("MUL", [s, 0.125], tag="scale")
    if mask:
        s = g.add("ADD", [s, mk], tag="add_mask")
    if causal:
        rowv, colv = iota_rev(g, "M"), iota_rev(g, "N")
        ri = g.add("EXPAND", [g.add("RESHAPE", [rowv], {"result_shape": ["M", 1]})], {"result_shape": ["M", "N"]})
        ci = g.add("EXPAND", [g.add("RESHAPE", [colv], {"result_shape": [1, "N"]})], {"result_shape": ["M", "N"]})
        hidden = g.add("CMPLT", [ci, ri], tag="causal")
        ninf = g.add("CONST", arg={"value": "-inf", "dtype": "fp32"})
        s = g.add("WHERE", [hidden, ninf, s], tag="masked")
    mx = g.add("REDUCE", [s], {"op": "MAX", "axes": [3], "dtype": "fp32"}, tag="row_max")
    d = g.add("SUB", [s, g.add("RESHAPE", [mx], {"result_shape": ["B", "H", "M", 1]})], tag="shift")
    ex = g.add("EXP2", [g.add("MUL", [d, LOG2E], tag="to_log2")], tag="exp")
    z = g.add("REDUCE", [ex], {"op": "SUM", "axes": [3], "dtype": "fp32"}, tag="row_sum")
    P = g.add("FDIV", [ex, g.add("RESHAPE", [z], {"result_shape": ["B", "H", "M", 1]})], tag="probs")
    if dt != "fp32":
        P = g.add("CAST", [P], {"to": dt}, tag="probs_cast")
    p1 = g.add("RESHAPE", [P], {"result_shape": ["B", "H", "M", "N", 1]})
    v1 = g.add("RESHAPE", [v], {"result_shape": ["B", "H", 1, "N", "Dv"]})
    p2 = g.add("EXPAND", [p1], {"result_shape": ["B", "H", "M", "N", "Dv"]})
    v2 = g.add("EXPAND", [v1], {"result_shape": ["B", "H", "M", "N", "Dv"]})
    o = g.add("REDUCE", [g.add("MUL", [p2, v2])], {"op": "SUM", "axes": [3], "dtype": "fp32"}, tag="pv")
    if dt != "fp32":
        o = g.add("CAST", [o], {"to": dt}, tag="out_cast")
    name = "attention_full" + ("_causal" if causal else "") + ("_mask" if mask else "") + ("" if dt == "fp32" else "_" + dt)
    g.write(name + ".json", [o], "softmax(Q K^T * 0.125%s%s) V, %s storage (seed 000 §7.3)" %
            (" + mask" if mask else "", ", causal" if causal else "", dt))


def softmax():
    g = G()
    x = g.inp("X", "fp32", ["R", "L"])
    mx = g.add("REDUCE", [x], {"op": "MAX", "axes": [1], "dtype": "fp32"}, tag="row_max")
    d = g.add("SUB", [x, g.add("RESHAPE", [mx], {"result_shape": ["R", 1]})], tag="shift")
    ex = g.add("EXP2", [g.add("MUL", [d, LOG2E], tag="to_log2")], tag="exp")
    z = g.add("REDUCE", [ex], {"op": "SUM", "axes": [1], "dtype": "fp32"}, tag="row_sum")
    P = g.add("FDIV", [ex, g.add("RESHAPE", [z], {"result_shape": ["R", 1]})], tag="probs")
    g.write("softmax_rows.json", [P], "row softmax over the last axis, fp32")


if __name__ == "__main__":
    gemm_chain()
    for dt in ("fp32", "fp16"):
        conv(dt)
        layernorm(dt)
        attention(dt)
        attention(dt, causal=True)
    attention("fp32", mask=True)
    softmax()
