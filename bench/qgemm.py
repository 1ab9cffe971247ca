#!/usr/bin/env python3
"""qgemm.py — harp's int8 GEMM kernel (cgen_qgemm.c, vpdpbusd) against harp's
fp32 and bf16 GEMMs and onnxruntime's QLinearMatMul on the shapes of the int8
models' contractions, in one process, interleaved, 2 threads.

    make -C bench qgemm          (= python3 bench/qgemm.py BUILD/qgemm_gen [--rounds 3] [--repeat 200])

Contenders (the weight packed once in all, as a compiled model runs them):
  i8     harp int8: u8 activations (zero point 7), s8 weights, per-channel
         multipliers, int32 bias, u8 output (requantized in the epilogue)
  f32    harp's fp32 GEMM template (cgen_gemm) on the same shape
  b16    the same with tune.bf16 (vdpbf16ps, fp32 accumulation)
  ort    onnxruntime QLinearMatMul, u8 x s8 -> u8, per-tensor (a [M,K] x [K,N]
         model; for the NCHW-conv shapes, whose weight is A, the transposed
         product [N,K] x [K,M]: the same multiply-adds in onnxruntime's layout);
         QLinearConv for the convolutions (harp's f32 / b16: cgen_conv)
Checked first: harp's int8 output equal to numpy's (int64 products, fp32
requantization, round half to even) on every element.  Printed: medians over
rounds (each a median of --repeat calls) in ms, GOP/s of int8, and ratios.
"""
import argparse
import ctypes
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from settle import interleaved_ms  # noqa: E402  (each contender's block on idle cores)

# name, M, N, K, weight is A (NCHW conv: [cout][cin*kh*kw] x [cin*kh*kw][hw])
SHAPES = [
    ("r50_1x1_56", 64, 3136, 256, 1),     # ResNet-50 stage 1, 1x1 256 -> 64
    ("r50_3x3_28", 128, 784, 1152, 1),    # stage 2's 3x3 as a GEMM (im2col)
    ("r50_1x1_14", 1024, 196, 256, 1),    # stage 3, 1x1 256 -> 1024
    ("mnv2_1x1_28", 192, 784, 32, 1),     # MobileNetV2 expansion, K = 32
    ("bert_qkv", 128, 768, 768, 0),       # BERT-base, sequence 128
    ("bert_ffn1", 128, 3072, 768, 0),
    ("bert_ffn2", 128, 768, 3072, 0),
]
# name, C, H, W, COUT, window, stride, pad: convolutions of one image (im2col per call)
CONVS = [
    ("r50_3x3_56c", 64, 56, 56, 64, 3, 1, 1),
    ("r50_3x3_28c", 128, 28, 28, 128, 3, 1, 1),
    ("r50_3x3_14c", 256, 14, 14, 256, 3, 1, 1),
    ("mnv2_stem", 3, 224, 224, 32, 3, 2, 1),
]
ZA, ZY = 7, 128
THREADS = 2
P = ctypes.c_void_p


def ptr(a):
    return a.ctypes.data_as(P)


def build(gen, tmp):
    args = []
    for name, m, n, k, wa in SHAPES:
        args += [name, str(m), str(n), str(k), str(wa), "0", "u8", "u8", str(ZA), str(ZY), "0", "255"]
    src, so = os.path.join(tmp, "qgemm.c"), os.path.join(tmp, "qgemm.so")
    for name, c, h, w, co, ks, st, pd in CONVS:
        args += ["conv", name] + [str(v) for v in (c, h, w, co, ks, st, pd)]
    return load_lib(gen, [src] + args, src, so)


def load_lib(gen, gen_args, src, so):
    """qgemm_gen run with gen_args (writing src), built into so and loaded."""
    subprocess.check_call([gen] + gen_args)
    subprocess.check_call(["cc", "-O3", "-fPIC", "-shared", "-o", so, src, "-lm", "-lpthread"])
    lib = ctypes.CDLL(so)
    lib.hprt_pool_create.restype = P
    lib.hprt_pool_create.argtypes = [ctypes.c_int]
    return lib


def data(m, n, k, wa, rng):
    """x (u8, as the kernel reads it), w (s8, channel-major), bias, mult."""
    ch = m if wa else n
    x = rng.integers(0, 256, size=(k, n) if wa else (m, k), dtype=np.uint8)
    w = rng.integers(-128, 128, size=(ch, k), dtype=np.int8)
    bias = rng.integers(-20000, 20000, size=ch, dtype=np.int32)
    mult = (rng.random(ch, dtype=np.float32) * 3e-3 + 5e-4) / np.float32(max(1, k // 64))
    return x, w, bias, mult.astype(np.float32)


def numpy_ref(x, w, bias, mult, wa):
    xc = x.astype(np.int64) - ZA
    acc = (w.astype(np.int64) @ xc) if wa else (xc @ w.astype(np.int64).T)
    chan = (slice(None), None) if wa else (None, slice(None))
    s = (acc + bias[chan]).astype(np.int32).astype(np.float32) * mult[chan]
    return np.clip(np.rint(s) + ZY, 0, 255).astype(np.uint8)


def ort_session(m, n, k, wa, w):
    a_shape, b = ([n, k], w.T.copy()) if wa else ([m, k], w.T.copy())  # B [K, channels]
    mo = m if wa else n
    inits = [helper.make_tensor("as", TensorProto.FLOAT, [], [0.02]), helper.make_tensor("az", TensorProto.UINT8, [], [ZA]),
             helper.make_tensor("b", TensorProto.INT8, list(b.shape), b.tobytes(), raw=True),
             helper.make_tensor("bs", TensorProto.FLOAT, [], [0.01]), helper.make_tensor("bz", TensorProto.INT8, [], [0]),
             helper.make_tensor("ys", TensorProto.FLOAT, [], [0.5]), helper.make_tensor("yz", TensorProto.UINT8, [], [ZY])]
    node = helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])
    g = helper.make_graph([node], "qmm", [helper.make_tensor_value_info("a", TensorProto.UINT8, a_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.UINT8, [a_shape[0], mo])], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = THREADS, 1
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]), a_shape


def packed_kernel(lib, fn, w, bias, mult):
    """lib's int8 kernel fn (its argument types set) and the weight w packed
    for it with bias and mult by fn_pack (fn_wsize bytes): (fn, the packed weight)."""
    q, qsize, qpack = getattr(lib, fn), getattr(lib, fn + "_wsize"), getattr(lib, fn + "_pack")
    q.argtypes, qsize.restype, qpack.argtypes = [P] * 4, ctypes.c_long, [P] * 4
    wp = np.zeros(qsize() // 4 + 16, dtype=np.int32)
    assert qpack(ptr(w), ptr(bias), ptr(mult), ptr(wp)) == 0
    return q, wp


def checked(lib, fn, pool, x, w, bias, mult, want, keep, what):
    """lib's int8 kernel fn on pool over x (its weight packed), one call's
    output first checked equal to numpy's want (else an assertion naming
    what); the buffers appended to keep: (the call, the packed weight)."""
    q, wp = packed_kernel(lib, fn, w, bias, mult)
    y = np.zeros(want.shape, dtype=np.uint8)
    assert q(pool, ptr(wp), ptr(x), ptr(y)) == 0 and np.array_equal(y, want), f"{what}: wrong output"
    keep += [wp, y, x]
    return (lambda: q(pool, ptr(wp), ptr(x), ptr(y))), wp


def contenders(lib, pool, name, m, n, k, wa, rng):
    """The four callables of one shape, after the exactness check."""
    x, w, bias, mult = data(m, n, k, wa, rng)
    q, wp = packed_kernel(lib, name, w, bias, mult)
    y = np.zeros((m, n), dtype=np.uint8)
    assert q(pool, ptr(wp), ptr(x), ptr(y)) == 0
    want = numpy_ref(x, w, bias, mult, wa)
    equal = float(np.mean(y == want))
    fx = x.astype(np.float32) - ZA
    fw = w.astype(np.float32)
    fa, fb = (fw, fx) if wa else (fx, np.ascontiguousarray(fw.T))
    c = np.zeros((m, n), dtype=np.float32)
    calls = {"i8": lambda: q(pool, ptr(wp), ptr(x), ptr(y))}
    keep = [wp, x, y, fa, fb, c]
    for t in ("f32", "b16"):
        f = getattr(lib, f"{name}_{t}")
        side = "a" if wa else "b"
        nb, pk = getattr(lib, f"{name}_{t}_pack_{side}_bytes"), getattr(lib, f"{name}_{t}_pack_{side}")
        nb.restype, pk.argtypes, f.argtypes = ctypes.c_long, [P] * 3, [P] * 5
        packed = np.zeros(nb() // 4 + 16, dtype=np.float32)
        assert pk(pool, ptr(fa if wa else fb), ptr(packed)) == 0
        keep.append(packed)
        args = (ptr(packed), ptr(fb)) if wa else (ptr(fa), ptr(packed))
        calls[t] = (lambda f=f, args=args: f(pool, args[0], args[1], ptr(c), None))
    sess, a_shape = ort_session(m, n, k, wa, w)
    xo = np.ascontiguousarray(x.T) if wa else x
    calls["ort"] = lambda: sess.run(None, {"a": xo})
    return calls, equal, keep


def im2col(x, ks, st, pd):
    c, h, w = x.shape
    xp = np.pad(x.astype(np.int64) - ZA, ((0, 0), (pd, pd), (pd, pd)))
    oh, ow = (h + 2 * pd - ks) // st + 1, (w + 2 * pd - ks) // st + 1
    cols = [xp[:, ky:ky + st * oh:st, kx:kx + st * ow:st] for ky in range(ks) for kx in range(ks)]
    return np.stack(cols, 1).reshape(c * ks * ks, oh * ow), oh, ow


def conv_data(c, h, w, co, ks, st, pd, rng):
    """x (one u8 image), wt (s8), bias, mult of a convolution, numpy's output, oh, ow."""
    x = rng.integers(0, 256, size=(c, h, w), dtype=np.uint8)
    wt = rng.integers(-128, 128, size=(co, c, ks, ks), dtype=np.int8)
    bias = rng.integers(-20000, 20000, size=co, dtype=np.int32)
    mult = ((rng.random(co, dtype=np.float32) * 3e-3 + 5e-4) / np.float32(max(1, c * ks * ks // 64))).astype(np.float32)
    col, oh, ow = im2col(x, ks, st, pd)
    acc = wt.reshape(co, -1).astype(np.int64) @ col
    want = np.clip(np.rint((acc + bias[:, None]).astype(np.int32).astype(np.float32) * mult[:, None]) + ZY, 0, 255).astype(np.uint8)
    return x, wt, bias, mult, want, oh, ow


def conv_contenders(lib, pool, name, c, h, w, co, ks, st, pd, rng):
    """The four callables of one convolution, after the exactness check."""
    x, wt, bias, mult, want, oh, ow = conv_data(c, h, w, co, ks, st, pd, rng)
    q, wp = packed_kernel(lib, name, wt, bias, mult)
    y = np.zeros((co, oh * ow), dtype=np.uint8)
    assert q(pool, ptr(wp), ptr(x), ptr(y)) == 0
    equal = float(np.mean(y == want))
    fx, fw = x.astype(np.float32) - ZA, wt.astype(np.float32)
    out = np.zeros((co, oh, ow), dtype=np.float32)
    calls = {"i8": lambda: q(pool, ptr(wp), ptr(x), ptr(y))}
    keep = [wp, x, y, fx, fw, out]
    for t in ("f32", "b16"):
        f = getattr(lib, f"{name}_{t}")
        nb, pk = getattr(lib, f"{name}_{t}_pack_a_bytes"), getattr(lib, f"{name}_{t}_pack_a")
        nb.restype, pk.argtypes, f.argtypes = ctypes.c_long, [P] * 3, [P] * 5
        packed = np.zeros(nb() // 4 + 16, dtype=np.float32)
        assert pk(pool, ptr(fw), ptr(packed)) == 0
        keep.append(packed)
        calls[t] = (lambda f=f, packed=packed: f(pool, ptr(packed), ptr(fx), ptr(out), None))
    inits = [helper.make_tensor("xs", TensorProto.FLOAT, [], [0.02]), helper.make_tensor("xz", TensorProto.UINT8, [], [ZA]),
             helper.make_tensor("w", TensorProto.INT8, list(wt.shape), wt.tobytes(), raw=True),
             helper.make_tensor("ws", TensorProto.FLOAT, [], [0.01]), helper.make_tensor("wz", TensorProto.INT8, [], [0]),
             helper.make_tensor("ys", TensorProto.FLOAT, [], [0.5]), helper.make_tensor("yz", TensorProto.UINT8, [], [ZY]),
             helper.make_tensor("b", TensorProto.INT32, [co], bias.tolist())]
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"], pads=[pd] * 4,
                            strides=[st, st], kernel_shape=[ks, ks])
    g = helper.make_graph([node], "qconv", [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, c, h, w])],
                          [helper.make_tensor_value_info("y", TensorProto.UINT8, [1, co, oh, ow])], inits)
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = THREADS, 1
    sess = ort.InferenceSession(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8).SerializeToString(),
                                so, providers=["CPUExecutionProvider"])
    x4 = x[None]
    calls["ort"] = lambda: sess.run(None, {"x": x4})
    return calls, equal, keep, (co, oh * ow, c * ks * ks)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("gen", help="BUILD/qgemm_gen")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=200)
    a = ap.parse_args()
    print("load average at the start:", " ".join(f"{v:.1f}" for v in os.getloadavg()))
    lib = build(a.gen, tempfile.mkdtemp(prefix="harp-qgemm-"))
    pool = P(lib.hprt_pool_create(THREADS))
    rng = np.random.default_rng(0)
    print(f"{'shape':12} {'M':>5} {'N':>5} {'K':>5} {'equal':>6} {'i8 ms':>8} {'f32 ms':>8} {'b16 ms':>8} {'ort ms':>8}"
          f" {'i8 GOP/s':>9} {'f32/i8':>7} {'b16/i8':>7} {'ort/i8':>7}")
    bad = 0
    jobs = [(name, lambda a=(name, m, n, k, wa): contenders(lib, pool, *a, rng) + ((a[1], a[2], a[3]),)) for name, m, n, k, wa in SHAPES]
    jobs += [(cv[0], lambda cv=cv: conv_contenders(lib, pool, *cv, rng)) for cv in CONVS]
    for name, make in jobs:
        calls, equal, keep, (m, n, k) = make()
        bad += equal != 1.0
        t = interleaved_ms(calls, a.rounds, a.repeat)
        gops = 2.0 * m * n * k / (t["i8"] * 1e-3) / 1e9
        print(f"{name:12} {m:5} {n:5} {k:5} {equal:6.4f} {t['i8']:8.3f} {t['f32']:8.3f} {t['b16']:8.3f} {t['ort']:8.3f}"
              f" {gops:9.1f} {t['f32'] / t['i8']:7.2f} {t['b16'] / t['i8']:7.2f} {t['ort'] / t['i8']:7.2f}")
        del keep
    print("load average at the end:", " ".join(f"{v:.1f}" for v in os.getloadavg()))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
