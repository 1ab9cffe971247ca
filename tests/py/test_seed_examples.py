"""The four seed examples run as written and match numpy (rtol=atol=1e-3)."""
import os

import numpy as np

from harp_test import BACKENDS, MODELS, Suite, close, run

s = Suite("seed_examples")
rng = np.random.default_rng(1)
f16 = lambda *shape: rng.standard_normal(shape).astype(np.float16)
f32 = lambda a: a.astype(np.float32)

for backend in BACKENDS:
    # seed 001 §5.1 GEMM: M, K, N bound from the inputs
    A, B = f16(33, 17), f16(17, 29)
    p, d = run(os.path.join(MODELS, "seed001_gemm.json"), {"A": A, "B": B}, backend=backend)
    s.check(f"[{backend}] gemm runs", p.returncode == 0, p.stderr)
    if p.returncode == 0:
        s.check(f"[{backend}] gemm", *close(np.load(f"{d}/n9.npy"), f32(A) @ f32(B)))

    # seed 000 §1.2 GEMM + bias + ReLU (the ops/values dialect)
    bias = f16(29)
    p, d = run(os.path.join(MODELS, "seed000_gemm_bias_relu.json"), {"A": A, "B": B, "bias": bias}, backend=backend)
    s.check(f"[{backend}] gemm+bias+relu runs", p.returncode == 0, p.stderr)
    if p.returncode == 0:
        c0 = (f32(A) @ f32(B)).astype(np.float16)  # the Reduce result is cast back to fp16 (docs/tiny-ir.md)
        s.check(f"[{backend}] gemm+bias+relu", *close(np.load(f"{d}/C2.npy"), np.maximum(f32(c0) + f32(bias), 0)))

    # seed 001 §5.2 conv 3x3, stride 2, pad 1, with --sym for the symbols no input fixes
    X, W, b = f16(2, 4, 9, 9), f16(6, 4, 3, 3), f16(6)
    syms = ["pt=1", "pb=1", "pl=1", "pr=1", "Sh=2", "Sw=2", "Dh=1", "Dw=1", "G=1", "Rcout=6", "Oy=5", "Ox=5"]
    p, d = run(os.path.join(MODELS, "seed001_conv.json"), {"X": X, "W": W, "bias": b}, syms, backend=backend)
    s.check(f"[{backend}] conv runs", p.returncode == 0, p.stderr)
    if p.returncode == 0:
        Xp = np.pad(f32(X), ((0, 0), (0, 0), (1, 1), (1, 1)))
        ref = np.zeros((2, 6, 5, 5), np.float32)
        for oy in range(5):
            for ox in range(5):
                ref[:, :, oy, ox] = np.einsum("nchw,ochw->no", Xp[:, :, 2 * oy:2 * oy + 3, 2 * ox:2 * ox + 3], f32(W))
        s.check(f"[{backend}] conv", *close(np.load(f"{d}/y.npy"), ref + f32(b)[None, :, None, None]))
    # a wrong --sym is caught by the shape checks after binding
    p, _ = run(os.path.join(MODELS, "seed001_conv.json"), {"X": X, "W": W, "bias": b}, syms[:-1] + ["Ox=4"], backend=backend)
    s.check(f"[{backend}] conv with a wrong Ox fails", p.returncode == 1 and "error[" in p.stderr, p.stderr)

    # seed 001 §5.3 attention, as written: its SUB and FDIV of a reduced tensor
    # broadcast by symbol name.  Note the example reshapes Kᵀ [B,H,D,N] to
    # [B,H,1,N,D]: a row-major RESHAPE, not a transpose, so numpy must do the same.
    Q, K = f16(2, 3, 16, 8), f16(2, 3, 20, 8)
    p, d = run(os.path.join(MODELS, "seed001_attention.json"), {"Q": Q, "K": K}, backend=backend)
    s.check(f"[{backend}] attention runs", p.returncode == 0, p.stderr)
    if p.returncode == 0:
        Bq, H, M, D = Q.shape
        N = K.shape[2]
        k_view = f32(K).transpose(0, 1, 3, 2).reshape(Bq, H, 1, N, D)
        S = (f32(Q).reshape(Bq, H, M, 1, D) * k_view).sum(-1)
        P = np.exp2((S - S.max(-1, keepdims=True)) * np.float32(1.442695))
        s.check(f"[{backend}] attention (as written)", *close(np.load(f"{d}/n15.npy"), P / P.sum(-1, keepdims=True)))

    # the corrected attention (Q·Kᵀ without the stray permute) is softmax(QKᵀ)
    p, d = run(os.path.join(MODELS, "attention_qkt.json"), {"Q": Q, "K": K}, backend=backend)
    s.check(f"[{backend}] attention_qkt runs", p.returncode == 0, p.stderr)
    if p.returncode == 0:
        S = np.einsum("bhmd,bhnd->bhmn", f32(Q), f32(K))
        P = np.exp(S - S.max(-1, keepdims=True))
        s.check(f"[{backend}] attention_qkt = softmax(QK^T)", *close(np.load(f"{d}/n15.npy"), P / P.sum(-1, keepdims=True)))
s.close()
