"""CUDA sessions over models whose channels are symbols (issue 25, sspin).

A session's ShapeSet box spans every symbol of a binding unless the session
holds some fixed (rt_gpu_opts.fixed, `harp bench --bind ... --fix C,K`), or
learns them: a box that cannot be one build is decided again at the
cluster's next binding with the symbols that stayed the same held fixed
(docs/cuda.md "Fixed symbols").  Models: tests/models/cnn_hw.harp and
dsym_cnn.harp AS WRITTEN (graph<N=1, C=3, K=16, H, W>: the conv template
prints its channels, so a box over C and K falls back) over H, W.

  sessions   on the fake libcuda (sm80 and sm90): with --fix N,C,K one
             build, no fallback; without it two builds (the first
             binding's own, then the learned box over H, W); a binding at
             another K under --fix is another ShapeSet; a binding that moves
             a learned-fixed symbol builds its own unit (never a view of the
             box); bad --fix is refused with a located error.
  simulator  the box unit with the channels held (`harp dump --shapeset
             H=9..16 --shapeset W=9..16`, C, K at their values): the same
             CUDA C at three bindings and as the literal-channel model's; the
             corner hi's build on the SIMT simulator at each against the
             interpreter (W one short must differ); the --fix session and a
             session of the literal-channel model compile the same unit (one
             PTX in an empty NVRTC cache).
  stride2    a stride-2 conv over H in a session (last session's note: a
             BroadcastMismatch on an EXPAND at the second binding, fixed by
             sscnn's derived lowering): every binding runs, one build.

HARP_FIX_ROWS=sessions,stride2,simulator runs some only.  Skips (77)
without g++."""
import os
import subprocess
import sys
import tempfile

import numpy as np

import cuda_sim
import cuda_ss_common as ss
import test_cuda_shapeset_nets as nets
from harp_test import MODELS, Suite

# bindings inside one box of H, W (9..16), the corner hi first
AT = {"cnn_hw.harp": [{"H": 16, "W": 16}, {"H": 12, "W": 14}, {"H": 10, "W": 10}],
      "dsym_cnn.harp": [{"H": 16, "W": 16}, {"H": 11, "W": 14}, {"H": 9, "W": 9}]}
BOX = ("--shapeset", "H=9..16", "--shapeset", "W=9..16")


def binds(at, **more):
    return [",".join(f"{k}={v}" for k, v in {**b, **more}.items()) for b in at]


def counts_are(s, what, st, err, want):
    """The session's counters st include want (name -> value)."""
    if st:
        s.check(f"{what}: {want}", all(st.get(k) == v for k, v in want.items()), f"{st} {err[-600:]}")


def sessions(s):
    """The counters of the sessions over each model, with and without --fix."""
    for name, at in AT.items():
        model = os.path.join(MODELS, name)
        for target in ("sm80", "sm90"):
            what = f"{name} ({target}) over H, W"
            st, err = ss.session_counts(s, f"{what} --fix N,C,K", model, target, binds(at), extra=("--fix", "N,C,K"))
            counts_are(s, f"{what} --fix N,C,K: one build, no fallback", st, err,
                       {"clusters": 1, "builds": 1, "box_builds": 1, "box_fallbacks": 0, "box_learned": 0})
            if st:
                s.check(f"{what} --fix: no per-binding note", "builds per binding" not in err, err[-600:])
            st, err = ss.session_counts(s, f"{what} (default)", model, target, binds(at))
            counts_are(s, f"{what} (default): the first binding's build, then the learned box", st, err,
                       {"clusters": 1, "builds": 2, "box_builds": 1, "box_fallbacks": 1, "box_learned": 1})
    model, at = os.path.join(MODELS, "cnn_hw.harp"), AT["cnn_hw.harp"]
    # K = 12 is in K = 16's class (9..16): under --fix it is another ShapeSet with its own box
    st, err = ss.session_counts(s, "cnn_hw --fix C,K, K = 16 then 12", model, "sm80",
                                binds(at[:2], K=16) + binds(at[1:], K=12), extra=("--fix", "C", "--fix", "K"))
    counts_are(s, "cnn_hw --fix C,K, K = 16 then 12: two ShapeSets, a box build each", st, err,
               {"clusters": 2, "builds": 2, "box_builds": 2, "box_fallbacks": 0})
    # learned: C, K held at the box; a later binding at K = 12 (same cluster) is not the box's: its own build
    st, err = ss.session_counts(s, "cnn_hw learned, then K = 12", model, "sm80", binds(at) + binds(at[1:2], K=12))
    counts_are(s, "cnn_hw learned, then K = 12: its own build", st, err,
               {"clusters": 1, "builds": 3, "box_builds": 1, "box_fallbacks": 1, "box_learned": 1})
    for extra, msg in ((("--fix", "Z"), "holds Z fixed"), (("--fix", "C,,K"), "empty symbol name")):
        _, err = ss.session_counts(s, f"cnn_hw {' '.join(extra)}", model, "sm80", binds(at[:1]), extra=extra, fails=True)
        s.check(f"cnn_hw {' '.join(extra)}: says {msg!r}", msg in err, err[-600:])
    p = subprocess.run([cuda_sim.HARP, "bench", model, "--fix", "C"], capture_output=True, text=True, timeout=300)
    s.check("--fix without --bind: a usage error", p.returncode != 0 and "--fix needs --bind" in p.stderr, p.stderr)


def simulator(s, rng):
    """dsym_cnn.harp and cnn_hw.harp with their channels held: the box unit
    on the simulator at three bindings against the interpreter, the same
    text as the literal-channel model's, one NVRTC unit for both sessions."""
    d = tempfile.mkdtemp(prefix="harp_fix_")
    for name, at in AT.items():
        model = os.path.join(MODELS, name)
        what = f"{name} (sm80, channels held) over H, W"
        dhi, ghi, src_hi = ss.box_corner(s, what, model, "sm80", at[0], BOX)
        if not dhi:
            continue
        names = [x["name"] for x in ghi["syms"]]
        s.check(f"{what}: the box's symbols are H, W (and derived ones), no channel", names[:2] == ["H", "W"] and
                not any(n in ("C", "K", "N") for n in names), str(names))
        ss.at_bindings(s, rng, what, model, "sm80", BOX, dhi, src_hi, names, at, (at[1], "W"), 1e-3)
        literal = nets.literal_channels(name, d)
        _, _, src_lit = ss.box_corner(s, f"{name} (literal channels)", literal, "sm80", at[0], BOX)
        s.check(f"{what}: the literal-channel model's CUDA C", src_lit == src_hi)
        cache = tempfile.mkdtemp(prefix="harp_fixcache_")
        ran = [ss.session_counts(s, f"{what} session {os.path.basename(m)}", m, "sm80", binds(at), extra=extra,
                                 env={"HARP_CACHE_DIR": cache})[0] for m, extra in ((model, ("--fix", "C,K")), (literal, ()))]
        ptx = [f for _, _, fs in os.walk(cache) for f in fs if f.endswith(".ptx")]
        if all(ran):
            s.check(f"{what}: both sessions compiled one unit (one PTX in the cache)", len(ptx) == 1, str(ptx))

STRIDE2 = """graph<H=16> main(x: f32[1, 4, H, 12], w: f32[8, 4, 3, 3], b: f32[8], w1: f32[8, 8, 3, 3], b1: f32[8])
    -> (y: f32[1, 8, (H + 1) / 2, 6]) {
    h = relu(conv2d(x, w, bias=b, stride=2, pad=1))
    y = relu(conv2d(h, w1, bias=b1, pad=1) + h)
    return y
}
"""


def stride2(s):
    """A stride-2 conv over H alone, then a 3x3 conv whose input is added
    back, in a session at an even and two odd H of one box (lowered at the
    defaults, the second conv's window EXPAND kept (H + 1) / 2 at H = 16:
    BroadcastMismatch at the second binding)."""
    d = tempfile.mkdtemp(prefix="harp_fix_")
    model = os.path.join(d, "conv_s2_h.harp")
    open(model, "w").write(STRIDE2)
    for target in ("sm80", "sm90"):
        st, err = ss.session_counts(s, f"stride-2 conv over H ({target})", model, target, ["H=16", "H=11", "H=9"])
        counts_are(s, f"stride-2 conv over H ({target}): every binding runs, one build", st, err,
                   {"clusters": 1, "builds": 1, "box_builds": 1, "box_fallbacks": 0})
        if st:
            s.check(f"stride-2 conv over H ({target}): no BroadcastMismatch", "BroadcastMismatch" not in err, err[-600:])


def main():
    s = Suite("cuda_session_fixed")
    if not cuda_sim.have_gxx():
        print("g++ not found: skipped")
        sys.exit(77)
    only = os.environ.get("HARP_FIX_ROWS", "sessions,stride2,simulator").split(",")  # some rows only
    if "sessions" in only:
        sessions(s)
    if "stride2" in only:
        stride2(s)
    if "simulator" in only:
        simulator(s, np.random.default_rng(7))
    s.close()


main()
