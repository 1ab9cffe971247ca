"""Weights whose sizes vary over a CUDA ShapeSet box (issue 25; docs/cuda.md
"Run-time sizes"): tests/models/gemm_chain4.json (4 x GEMM + bias + ReLU,
its weights W0..W3 [D][D] and biases [D] params, "storage": "param") over
D with M fixed.  On sm90 each fp32 weight stored [K][N] is packed K-major
for wgmma once after the weights go up (`k0_pack_b`, a `once` launch).  In
a ShapeSet build that pack reads the binding's K, N and strides at run time
into the packed area laid out at the box's corner hi (before: it printed
them, the corners differed, the box pinned D and each D built its own), and
a session uploads the weights at each binding that moves D (dense at the
binding's shape, no larger than the corner's buffer) and packs them again
(before: the first binding's weights were kept, and a session whose first
binding was below the corner failed, "weight 0 does not match the model").

  box        the unit for sm90 and sm80 (`--shapeset D=33..64`) at D = 64, 48,
             40: the same CUDA C; on sm90 the packs are `once` launches
             reading the sizes; the corner hi's build on the CPU SIMT
             simulator at each binding, its weights at the binding's shape,
             against the interpreter (TF32: 5e-3); D one short must differ.
  sessions   `harp bench --bind` on the fake libcuda as an 8.0 and a 9.0
             device, D = 64, 48, 40 and D = 40, 64, 64 (below the corner
             first; a binding again), and (M, D) = (256, 64), (200, 64),
             (256, 48) (M moves alone): one build, no fallback; the fake's
             counters: on sm90 the four packs run directly at each binding
             that moves D (12, 8 and 8 launches), the weights uploaded there.
The units compile with nvcc for sm_80 and sm_90a.  Skips (77) without g++."""
import json
import os
import tempfile

import cuda_sim
from cuda_ss_common import NVCC_UNITS, NVCC_UNITS_90, at_bindings, box_corner, finish, one_build, start
from harp_test import MODELS

MODEL = os.path.join(MODELS, "gemm_chain4.json")
BOX = ("--shapeset", "D=33..64")
AT = [64, 48, 40]
M = 256  # 256 x 64 x 64 = 2^20 multiply-adds at the corner: B packed for wgmma on sm90
TOL = 5e-3


def box_row(s, rng, target):
    """The box unit for target at D = AT[0] (its corner hi), the same text at
    every D of AT; on sm90 the weights' packs are `once` launches reading the
    sizes; the corner's build on the simulator at each D against the
    interpreter; D one short at AT[1] must differ."""
    what = f"gemm_chain4.json ({target}) over D=33..64"
    dhi, g, src = box_corner(s, what, MODEL, target, {"M": M, "D": AT[0]}, BOX)
    if not dhi:
        return
    names = [x["name"] for x in g["syms"]]
    s.check(f"{what}: D is the unit's one size", names == ["D"], str(names))
    kinds = {k["name"]: k["kind"] for k in g["kernels"]}
    packs = [l for l in g["launches"] if kinds[l["kernel"]] == "pack"]
    if target == "sm90":
        s.check(f"{what}: four weight packs, once each, reading the sizes at run time",
                len(packs) == 4 and all(l.get("once") and [a["space"] for a in l["args"]] == ["weights", "packed", "sym"]
                                        for l in packs), str([(l["kernel"], l.get("once"), l["args"]) for l in packs]))
    s.check(f"{what}: every launch reads D at run time",
            all(any(a["space"] == "sym" for a in l["args"]) for l in g["launches"]), str(g["launches"])[:1500])
    at = [{"M": M, "D": d} for d in AT]  # the weights too at each binding's shapes (cuda_sim.feeds_of)
    at_bindings(s, rng, what, MODEL, target, BOX, dhi, src, names, at, (at[1], "D"), TOL)
    (NVCC_UNITS_90 if target == "sm90" else NVCC_UNITS).append((what, os.path.join(dhi, "model.cu")))


def session_row(s, target, binds, fixed):
    """A session over binds (dicts: M and D, or D alone with fixed's M) on the
    fake libcuda as a device of target: one build, no fallback; the fake's
    counters: the four weight packs (sm90) run directly once at each binding
    that moves D (a binding again, or one that moves M only: none), none on
    sm80, and the weights go up there."""
    what = f"gemm_chain4.json ({target}) session over {binds}"
    log = os.path.join(tempfile.mkdtemp(prefix="harp_fake_log_"), "fake.json")
    st, err = cuda_sim.session_counts(s, what, MODEL, target, [",".join(f"{k}={v}" for k, v in b.items()) for b in binds],
                                      [f"{k}={v}" for k, v in fixed.items()], env={"HARP_FAKE_CUDA_LOG": log})
    if not st:
        return
    one_build(s, what, st, err)
    fake = json.load(open(log)) if os.path.exists(log) else {}
    at = [{**fixed, **b} for b in binds]
    moved = [b["D"] for i, b in enumerate(at) if i == 0 or b["D"] != at[i - 1]["D"]]
    packs = 4 * len(moved) if target == "sm90" else 0
    s.check(f"{what}: the weights packed where D moves ({packs} direct launches)", fake.get("direct_launches") == packs,
            str(fake))
    weights = sum(4 * (d * d + d) * 4 for d in moved)  # W0..W3 and b0..b3 at each D
    inputs = sum(4 * b["M"] * b["D"] for b in at)  # X at each binding, uploaded by its run
    s.check(f"{what}: the weights uploaded where D moves", fake.get("htod_bytes", 0) >= weights + inputs, str(fake))


def main():
    s, rng = start("cuda_weight_box")
    for target in ("sm90", "sm80"):
        box_row(s, rng, target)
        for ds in ([64, 48, 40], [40, 64, 64]):
            session_row(s, target, [{"D": d} for d in ds], {"M": M})
        # M moves, D stays: the weights stay up (the box over M and D)
        session_row(s, target, [{"M": 256, "D": 64}, {"M": 200, "D": 64}, {"M": 256, "D": 48}], {})
    finish(s)


if __name__ == "__main__":
    main()
