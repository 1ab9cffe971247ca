"""B's TF32 pack at run-time sizes (issue 25; docs/cuda.md "Run-time sizes"):
in an sm90 module an fp32 GEMM whose B is N-major ([K][N]: P @ V in an
attention split into matmuls and a softmax, as a causal one with M != N is)
packs B K-major for wgmma first (`k<r>_pack_b`).  In a ShapeSet build where
B's batches, K or N vary, that pack reads them at run time and lays its copy
out at the box's corner hi, and the GEMM reads the copy through constant
strides, so one build serves the box (before: the pack printed its batches
and the session built per binding).

Each model (written here) is dumped for sm90 with its box (`--shapeset`) at
the corner hi and at bindings below: the same CUDA C at each, a pack kernel
taking the sizes; the hi build runs on the CPU SIMT simulator (tests/cuda_sim:
its TMA and wgmma models) at each binding against the interpreter (TF32:
5e-3), its buffers and scratch the corner's, the rest poisoned; a binding
one short must give another result.  A session over each box on the fake
libcuda (tests/fake_cuda, NVRTC compiles) as a 9.0 and an 8.0 device is one
build, no fallback.  Skips (77) without g++."""
import os
import tempfile

import cuda_sim
from cuda_ss_common import at_bindings, box_corner, one_build, start

# causal attention with fewer queries than keys (M != N): matmuls + softmax
CAUSAL_MN = ("graph<B=4, H=2, M=64, N=128> main(q: f32[B, H, M, 64], k: f32[B, H, N, 64], v: f32[B, H, N, 64])"
             " -> (y: f32[B, H, M, 64]) {\n    y = attention(q, k, v, causal=true)\n    return y\n}\n")
# batched fp32 GEMMs with B N-major: K varies (A's row stride K: a pair where
# K % 4 != 0), N varies (B's source row stride N, C's row stride N)
BMM_K = "graph<K=64> main(x: f32[2, 128, K], w: f32[2, K, 64]) -> (y: f32[2, 128, 64]) {\n    y = x @ w\n    return y\n}\n"
BMM_N = "graph<N=64> main(x: f32[2, 128, 64], w: f32[2, 64, N]) -> (y: f32[2, 128, N]) {\n    y = x @ w\n    return y\n}\n"
# two batch dims (B's heads strided: no fold), the inner one H varying: the
# pack decodes its batch index as the copy is laid out (at hi), its source
# strides H x 4096 and H x 64
BMM_PERM = ("graph<H=3> main(x: f32[2, H, 128, 64], w: f32[2, 64, H, 64]) -> (y: f32[2, H, 128, 64]) {\n"
            "    y = x @ permute(w, [0, 2, 1, 3])\n    return y\n}\n")
# name, text, box (symbol -> (lo, hi)), bindings (the corner hi first), the
# symbol one short at the second binding
CASES = [
    ("causal_mn.harp", CAUSAL_MN, {"B": (3, 4)}, [{"B": 4}, {"B": 3}], "B"),
    ("causal_mn.harp", CAUSAL_MN, {"B": (3, 4), "H": (2, 3)}, [{"B": 4, "H": 3}, {"B": 3, "H": 2}, {"B": 4, "H": 2}], "H"),
    ("bmm_k.harp", BMM_K, {"K": (33, 64)}, [{"K": 64}, {"K": 40}, {"K": 37}], "K"),
    ("bmm_n.harp", BMM_N, {"N": (33, 64)}, [{"N": 64}, {"N": 48}, {"N": 35}], "N"),
    ("bmm_perm.harp", BMM_PERM, {"H": (2, 3)}, [{"H": 3}, {"H": 2}], "H"),
]
# sessions (harp bench --bind on the fake libcuda): model, bindings, the rest;
# a session's box spans every symbol of a binding (B 3..4, M 33..64, N 65..128)
SESSIONS = [
    ("causal_mn.harp", ["B=4,M=64,N=128", "B=3,M=40,N=100", "B=3,M=33,N=65"], ["H=2"]),
    ("causal_mn.harp", ["H=4", "H=3"], ["B=4", "M=64", "N=128"]),
    ("bmm_k.harp", ["K=64", "K=40", "K=37"], []),
    ("bmm_n.harp", ["N=64", "N=48", "N=35"], []),
    ("bmm_perm.harp", ["H=4", "H=3"], []),
]
TOL = 5e-3


def box_row(s, rng, model, name, box, bindings, short):
    """The box unit of model for sm90 at bindings[0] (its corner hi), the same
    text at every binding, its B packed by a kernel that reads the sizes;
    the corner's build on the simulator at each binding against the
    interpreter; short one short at bindings[1] must differ."""
    opts = tuple(x for k, (lo, hi) in box.items() for x in ("--shapeset", f"{k}={lo}..{hi}"))
    what = f"{name} over {opts[1::2]}"
    dhi, g, src = box_corner(s, what, model, "sm90", bindings[0], opts)
    if not dhi:
        return
    names = [x["name"] for x in g["syms"]]
    kinds = {k["name"]: k["kind"] for k in g["kernels"]}
    packs = [l for l in g["launches"] if kinds[l["kernel"]] == "pack"]
    s.check(f"{what}: B packed before a wgmma GEMM, the pack reading the sizes at run time",
            len(packs) == 1 and any(a["space"] == "sym" for a in packs[0]["args"]) and "wgmma_gemm" in kinds.values(),
            str([(l["kernel"], [a["space"] for a in l["args"]]) for l in g["launches"]]))
    s.check(f"{what}: every GEMM's launch reads the sizes at run time",
            all(any(a["space"] == "sym" for a in l["args"]) for l in g["launches"] if kinds[l["kernel"]].endswith("gemm")),
            str(g["launches"])[:1500])
    at_bindings(s, rng, what, model, "sm90", opts, dhi, src, names, bindings, (bindings[1], short), TOL)


def session_row(s, model, name, target, binds, fixed):
    """A session over binds on the fake libcuda as a device of target
    (cuda_sim.session_counts): one build, no fallback."""
    what = f"{name} ({target}) session over {binds}"
    st, err = cuda_sim.session_counts(s, what, model, target, binds, fixed)
    one_build(s, what, st, err)


def main():
    s, rng = start("cuda_attn_box")
    work = tempfile.mkdtemp(prefix="harp_attn_box_")
    models = {}
    for name, text, *_ in CASES:
        models[name] = os.path.join(work, name)
        open(models[name], "w").write(text)
    for name, _, box, bindings, short in CASES:
        box_row(s, rng, models[name], name, box, bindings, short)
    for name, binds, fixed in SESSIONS:
        for target in ("sm90", "sm80"):
            session_row(s, models[name], name, target, binds, fixed)
    s.close()


main()
