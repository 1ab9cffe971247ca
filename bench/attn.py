#!/usr/bin/env python3
"""attn.py — harp's fused streaming-softmax attention vs onnxruntime, same run.

    python3 bench/attn.py BUILD/attn_gen [B H S D]       (default 1 8 512 64)

Contenders in rounds (env BENCH_ROUNDS, 3): each contender a block of REPS
calls (env BENCH_REPS, 31) after idle cores (settle.py), its median; the
median over the rounds is reported:
  harp        generated kernel (bench/attn_gen), compiled -O3, 2-thread hprt pool
  ort_graph   onnxruntime, MatMul -> Mul -> (Add causal mask) -> Softmax -> MatMul
  ort_mha     onnxruntime com.microsoft MultiHeadAttention (its fused CPU kernel)
ORT runs with intra_op_num_threads = 2 (HARP_THREADS) and its default
spinning.  Outputs are compared.
"""
import ctypes, os, subprocess, sys, tempfile
import numpy as np
import onnx
from onnx import TensorProto, helper
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from settle import median_ms  # noqa: E402

gen = sys.argv[1]
B, H, S, D = (int(x) for x in (sys.argv[2:6] if len(sys.argv) >= 6 else (1, 8, 512, 64)))
REPS = int(os.environ.get("BENCH_REPS", "31"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
THREADS = int(os.environ.get("HARP_THREADS", "2"))

tmp = tempfile.mkdtemp(prefix="harp-attn-")
src, so = os.path.join(tmp, "attn.c"), os.path.join(tmp, "attn.so")
subprocess.check_call([gen, src, str(B), str(H), str(S), str(D)])
subprocess.check_call(["cc", "-O3", "-fPIC", "-shared", "-o", so, src, "-lm", "-lpthread"])
lib = ctypes.CDLL(so)
lib.hprt_pool_create.restype = ctypes.c_void_p
lib.hprt_pool_create.argtypes = [ctypes.c_int]
pool = ctypes.c_void_p(lib.hprt_pool_create(THREADS))
for fn in (lib.attn, lib.attn_causal):
    fn.argtypes = [ctypes.c_void_p] * 6
    fn.restype = ctypes.c_int

rng = np.random.default_rng(0)
q, k, v = (rng.standard_normal((B, H, S, D), dtype=np.float32) for _ in range(3))
out = np.empty_like(q)
ptr = lambda a: a.ctypes.data_as(ctypes.c_void_p)
scale = 1.0 / np.sqrt(D)


def graph_model(causal):
    inp = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [B, H, S, D]) for n in "qkv"]
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["s0"]),
             helper.make_node("Mul", ["s0", "scale"], ["s1"])]
    inits = [helper.make_tensor("scale", TensorProto.FLOAT, [], [scale])]
    last = "s1"
    if causal:
        m = np.triu(np.full((S, S), -np.inf, dtype=np.float32), 1)
        inits.append(helper.make_tensor("mask", TensorProto.FLOAT, [S, S], m.flatten()))
        nodes.append(helper.make_node("Add", ["s1", "mask"], ["s2"]))
        last = "s2"
    nodes += [helper.make_node("Softmax", [last], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["o"])]
    g = helper.make_graph(nodes, "attn", inp, [helper.make_tensor_value_info("o", TensorProto.FLOAT, [B, H, S, D])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def mha_model(causal):
    # com.microsoft.MultiHeadAttention: q/k/v as [B, S, H*D]; causal via unidirectional (if supported)
    inp = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [B, S, H * D]) for n in "qkv"]
    attrs = dict(num_heads=H, scale=float(scale))
    if causal:
        attrs["unidirectional"] = 1
    node = helper.make_node("MultiHeadAttention", ["q", "k", "v"], ["o"], domain="com.microsoft", **attrs)
    g = helper.make_graph([node], "mha", inp, [helper.make_tensor_value_info("o", TensorProto.FLOAT, [B, S, H * D])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)], ir_version=8)


def session(model):
    so_ = ort.SessionOptions()
    so_.intra_op_num_threads = THREADS
    so_.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), so_, providers=["CPUExecutionProvider"])


def reference(causal):
    s = np.einsum("bhmd,bhnd->bhmn", q.astype(np.float64), k.astype(np.float64)) * scale
    if causal:
        s = s + np.triu(np.full((S, S), -np.inf), 1)
    s = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bhmn,bhnd->bhmd", s / s.sum(-1, keepdims=True), v.astype(np.float64))


flops = 4.0 * B * H * S * S * D
print(f"attention b{B} h{H} s{S} d{D} fp32, {THREADS} threads, median of {ROUNDS} rounds x {REPS} calls")
print(f"{'variant':10s} {'harp ms':>9s} {'ort_graph':>10s} {'ort_mha':>9s} {'h/graph':>8s} {'h/mha':>7s}  max|err| harp/graph/mha")
for causal in (False, True):
    fn = lib.attn_causal if causal else lib.attn
    ref = reference(causal)
    sg = session(graph_model(causal))
    try:
        sm = session(mha_model(causal))
        to_bsd = lambda a: np.ascontiguousarray(a.transpose(0, 2, 1, 3).reshape(B, S, H * D))
        mfeed = {"q": to_bsd(q), "k": to_bsd(k), "v": to_bsd(v)}
        mo = sm.run(None, mfeed)[0].reshape(B, S, H, D).transpose(0, 2, 1, 3)
        merr = float(np.abs(mo - ref).max())
    except Exception as ex:  # op or attribute not available in this build
        sm, merr = None, float("nan")
        print(f"  (ort MultiHeadAttention unavailable: {str(ex).splitlines()[0][:100]})")
    gfeed = {"q": q, "k": k, "v": v}
    assert fn(pool, ptr(q), ptr(k), ptr(v), None, ptr(out)) == 0
    herr = float(np.abs(out - ref).max())
    gerr = float(np.abs(sg.run(None, gfeed)[0] - ref).max())
    calls = {"h": lambda: fn(pool, ptr(q), ptr(k), ptr(v), None, ptr(out)), "g": lambda: sg.run(None, gfeed)}
    if sm is not None:
        calls["m"] = lambda: sm.run(None, mfeed)
    t = {x: [] for x in calls}
    for _ in range(ROUNDS):  # a block per contender, each on idle cores
        for x, call in calls.items():
            t[x].append(median_ms(call, REPS) * 1e-3)
    med = {x: float(np.median(y)) for x, y in t.items()}
    mm = med.get("m", float("nan"))
    print(f"{'causal' if causal else 'full':10s} {med['h']*1e3:9.3f} {med['g']*1e3:10.3f} {mm*1e3:9.3f} "
          f"{med['g']/med['h']:8.2f} {mm/med['h']:7.2f}  {herr:.1e}/{gerr:.1e}/{merr:.1e}")
    print(f"{'':10s} GFLOP/s (dense count 4*B*H*S*S*D): harp {flops/med['h']/1e9:.1f}, graph {flops/med['g']/1e9:.1f}"
          + (f", mha {flops/mm/1e9:.1f}" if sm is not None else ""))
