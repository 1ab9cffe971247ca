#!/usr/bin/env python3
"""test_shapeset_ties.py — boxes whose symbols are tied (issue 25): a model
whose shapes name two symbols that its ops force equal at every binding
(up2_add.harp's ADD of an x2 upsample [.., 2*H, ..] and a lateral map
[.., G, ..]: G = 2 H; upcat_hw.harp's concat of maps upsampled x4 and x2
with one at full size: 2 G = 4 H = P) gets a box whose corners take each
symbol's range on its own, so its lower corner (H lo, G lo) is no binding
the model accepts.  The tied symbol is made a derived symbol of the box's
model (src/tiny/ties.c: G := 2*H), so the corners are real bindings and one
compile serves the box; d2s_hw.harp (its output 2 H, no second symbol) is
the control.  Checked here:

- the ties a box learns (`harp dump --shapeset --time-stages`): G = 2*H;
  upcat_hw's four; G = 2*H where G may be 1 too (a named dim does not
  broadcast); where 3 H = 2 G an exact division (test_shapeset_ties_more.py).

- CPU (a Python session over a box whose lower corner breaks the tie, e.g.
  H 3..12 with G 5..24): one object, each of three bindings against the
  interpreter; a binding breaking the tie (G = 2 H + 1) is InputMismatch
  naming the tie, before any kernel runs.
- CUDA (no GPU needed): `harp bench --bind` over three bindings of one
  ShapeSet class on the fake libcuda as sm80 and sm90: one cluster, one
  build, no fallback; a binding breaking the tie fails before any kernel,
  located (the binding's model does not load, or the session names the tie).
  The box's unit (harp dump --shapeset at the class box) is the same CUDA C
  at the three bindings (sm80 and sm90), NVRTC compiles the corner hi's,
  and the sm80 corner hi's build runs on the SIMT simulator at each binding
  against the interpreter, the tied symbol one short giving another result.

Skips (77) without g++; the CPU part skips without the Python package, the
sessions without the fake libcuda or NVRTC (said on stdout)."""
import json
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np

import cuda_sim
from harp_test import HARP, MODELS, Suite, close, run

# model, the CPU box (one whose lower corner breaks the tie), fixed symbols, bindings, a binding breaking
# a tie (its inputs' shapes, what its error says)
CPU_ROWS = [
    ("up2_add.harp", {"H": (3, 12), "G": (5, 24)}, {"N": 1, "W": 8, "V": 16},
     [{"H": 3, "G": 6}, {"H": 12, "G": 24}, {"H": 7, "G": 14}],
     ({"x": [1, 8, 7, 8], "z": [1, 8, 13, 16]}, "shape symbol G is 13 (an input's shape), but its definition")),
    ("upcat_hw.harp", {"H": (3, 8), "G": (5, 16), "P": (9, 32)}, {"N": 1, "W": 4, "V": 8, "Q": 16},
     [{"H": 3, "G": 6, "P": 12}, {"H": 8, "G": 16, "P": 32}, {"H": 5, "G": 10, "P": 20}],
     ({"a": [1, 4, 5, 4], "b": [1, 4, 10, 8], "c": [1, 4, 21, 16]}, "shape symbol P is 21 (an input's shape), but its definition")),
    ("d2s_hw.harp", {"H": (3, 12), "W": (5, 9)}, {"N": 1}, [{"H": 3, "W": 5}, {"H": 12, "W": 9}, {"H": 7, "W": 6}], None),
]
# model, three bindings of one ShapeSet class (the first the class's corner hi), a binding breaking a tie, its tied symbol
GPU_ROWS = [
    ("up2_add.harp", [dict(N=1, H=8, W=8, G=16, V=16), dict(N=1, H=5, W=8, G=10, V=16), dict(N=1, H=6, W=7, G=12, V=14)],
     dict(N=1, H=6, W=7, G=13, V=14), "G"),
    ("upcat_hw.harp", [dict(N=1, H=8, W=4, G=16, V=8, P=32, Q=16), dict(N=1, H=5, W=4, G=10, V=8, P=20, Q=16),
                      dict(N=1, H=7, W=3, G=14, V=6, P=28, Q=12)], dict(N=1, H=7, W=3, G=14, V=6, P=28, Q=13), "Q"),
    ("d2s_hw.harp", [dict(N=1, H=8, W=8), dict(N=1, H=5, W=6), dict(N=1, H=7, W=5)], None, None),
]


# which ties a box learns (harp dump --time-stages): the model (a file of tests/models, or DSL text), the box,
# a binding inside, the ties said (None: none learned)
UNEVEN = ("graph<H=4, G=6> main(x: f32[H], z: f32[G]) -> (y: f32[3 * H]) {\n"
          "    a = reshape(expand(reshape(x, [H, 1]), [H, 3]), [3 * H])\n"
          "    b = reshape(expand(reshape(z, [G, 1]), [G, 2]), [2 * G])\n    y = a + b\n    return y\n}\n")
LEARN_ROWS = [
    ("up2_add.harp", {"H": (3, 12), "G": (5, 24)}, dict(N=1, H=4, W=8, G=8, V=16), "G = 2*H"),
    ("upcat_hw.harp", {"H": (3, 8), "W": (2, 4), "G": (5, 16), "V": (3, 8), "P": (9, 32), "Q": (5, 16)},
     dict(N=1, H=4, W=3, G=8, V=6, P=16, Q=12), "G = 2*H, V = 2*W, P = 4*H, Q = 4*W"),
    # G may be 1 in this box, but a named dim at 1 does not broadcast against 2 H (test_shapeset_ties_more): tied
    ("up2_add.harp", {"H": (1, 12), "G": (1, 24)}, dict(N=1, H=4, W=8, G=8, V=16), "G = 2*H"),
    # 3 H = 2 G: neither symbol an integer form of the other; an exact division (test_shapeset_ties_more)
    (UNEVEN, {"H": (2, 8), "G": (3, 12)}, dict(H=4, G=6), "G = 3*H floordiv 2 (exact)"),
]


def model_path(name):
    """A model of tests/models, or DSL text written to a file (named "3 H = 2 G" in the checks)."""
    if not name.startswith("graph"):
        return os.path.join(MODELS, name), name
    model = os.path.join(tempfile.mkdtemp(prefix="harp_ties_"), "uneven.harp")
    open(model, "w").write(name)
    return model, "3 H = 2 G"


def learn_rows(s, rows=LEARN_ROWS, path_of=model_path):
    """rows (LEARN_ROWS'): the ties `harp dump --shapeset --time-stages` says it learned; path_of(name): (the
    model's path, its name in the checks)."""
    for name, box, b, want in rows:
        model, name = path_of(name)
        d = tempfile.mkdtemp(prefix="harp_ties_")
        p = subprocess.run([HARP, "dump", model, "--dump", "tiny", "--dump-dir", d, "--time-stages",
                            *[x for k, (lo, hi) in box.items() for x in ("--shapeset", f"{k}={lo}..{hi}")],
                            *[x for k, v in b.items() for x in ("--sym", f"{k}={v}")]], capture_output=True, text=True, timeout=300)
        said = [l.split("follow the others: ", 1)[-1] for l in p.stderr.splitlines() if "tied symbols follow the others" in l]
        s.check(f"{name} over {box}: ties learned {want}", p.returncode == 0 and said == ([want] if want else []),
                f"{said} {p.stderr[-400:]}")


def cpu_rows(s, rows=CPU_ROWS, path_of=model_path):
    """rows (CPU_ROWS') through Python sessions (harp.h's shapesets); path_of as learn_rows'."""
    try:
        sys.argv, argv = sys.argv[:1], sys.argv
        from harp_py import check_bindings, harp
    except SystemExit:
        print("no Python package: the CPU rows not checked")
        return
    finally:
        sys.argv = argv
    cache = tempfile.mkdtemp(prefix="harp_ties_")
    rng = np.random.default_rng(25)
    for name, box, fixed, at, bad in rows:
        path, name = path_of(name)
        try:
            sess = harp.InferenceSession(path, {"cache_dir": cache, "progress": False, "syms": fixed}, shapesets=box)
        except harp.HarpError as ex:
            s.check(f"{name}: compiles over {box}", False, str(ex)[:400])
            continue
        check_bindings(s, name, sess, path, at, lambda b: {"syms": {**fixed, **b}, "progress": False},
                       lambda ref, b: {i.name: rng.uniform(-2, 2, i.shape).astype(np.float32) for i in ref.get_inputs()},
                       lambda g, w: close(np.asarray(g), np.asarray(w, np.float64), 1e-6, 1e-6))
        objs, built, why = sess.shapeset_objects()
        s.check(f"{name}: one object serves the box {box}", objs == 1 and why is None, f"{objs} object(s): {why}")
        if bad:
            shapes, said = bad
            try:
                sess.run(None, {k: np.zeros(d, np.float32) for k, d in shapes.items()})
                s.check(f"{name} at {shapes}: a binding breaking the tie is refused", False, "it ran")
            except harp.HarpError as ex:
                s.check(f"{name} at {shapes}: a binding breaking the tie is refused ({said!r})", said in str(ex), str(ex)[:400])
            objs2, _, _ = sess.shapeset_objects()
            s.check(f"{name}: the refused binding compiled nothing", objs2 == objs, f"{objs2} object(s)")
            # the tie refuses no binding the model accepts: the interpreter, at the binding alone, refuses it too
            q, _ = run(path, {k: np.zeros(d, np.float32) for k, d in shapes.items()}, backend="interp")
            s.check(f"{name} at {shapes}: the interpreter refuses the binding too", q.returncode != 0 and "error[" in q.stderr,
                    q.stderr[-300:])


def fake_cuda():
    """The fake libcuda's path, or None."""
    fake = os.path.join(os.path.dirname(os.path.abspath(HARP)), "tests", "libharp_fake_cuda.so")
    return fake if os.path.exists(fake) else None


def session(model, target, binds):
    """`harp bench --bind` over binds on the fake libcuda as target: (process, its session counters or None)."""
    args = [HARP, "bench", model, "--backend", "cuda", "--target", target, "--graphs", "--repeat", "1", "--warmup", "0",
            "--json", *[x for b in binds for x in ("--bind", ",".join(f"{k}={v}" for k, v in b.items()))]]
    env = {**os.environ, "HARP_LIBCUDA": fake_cuda(), "HARP_FAKE_CUDA_CC": "9.0" if target == "sm90" else "8.0"}
    p = subprocess.run(args, capture_output=True, text=True, timeout=600, env=env)
    try:
        return p, json.loads(p.stdout.strip().splitlines()[-1])["session"]
    except (ValueError, IndexError, KeyError):
        return p, None


def class_box(b):
    """The --shapeset options of binding b's ShapeSet class (a session's box: (2^(k-1), 2^k] from 3; 1, 2 alone)."""
    opts = []
    for k, v in b.items():
        hi = 1 << max(0, (v - 1).bit_length())
        lo = hi // 2 + 1 if hi > 2 else hi
        opts += ["--shapeset", f"{k}={lo}..{hi}"] if lo < hi else []
    return opts


def derived_values(model, b, box):
    """The derived symbols (ties too) of model lowered for box, at binding b: name -> value."""
    d = tempfile.mkdtemp(prefix="harp_ties_")
    p = subprocess.run([HARP, "dump", model, "--dump", "tiny", "--target", "sm80", "--dump-dir", d, *box,
                        *[x for k, v in b.items() for x in ("--sym", f"{k}={v}")]], capture_output=True, text=True, timeout=300)
    if p.returncode:
        return {}
    defs = json.load(open(os.path.join(d, "tiny.json"))).get("derived", {})
    vals = dict(b)
    for k, v in defs.items():  # in definition order: a later one may read an earlier one (an exact tie: an object)
        vals[k] = eval((v["def"] if isinstance(v, dict) else v).replace("floordiv", "//"), {}, dict(vals))
    return vals


def gpu_row(s, rng, name, at, bad, sym):
    """One GPU_ROWS row: sessions on sm80 and sm90, the box's unit at every binding, the simulator."""
    model = os.path.join(MODELS, name)
    box = class_box(at[0])
    if fake_cuda():
        for target in ("sm80", "sm90"):
            p, st = session(model, target, at)
            if st is None and "NVRTC" in p.stderr:
                print(f"{name} ({target}): no NVRTC, the session not checked")
                break
            s.check(f"{name} ({target}): the session over {len(at)} bindings: one build, no fallback",
                    p.returncode == 0 and st and st["clusters"] == 1 and st["builds"] == 1 and st["box_builds"] == 1 and
                    st["box_fallbacks"] == 0 and "builds per binding" not in p.stderr, f"{st} {p.stderr[-800:]}")
            if bad:
                p, st = session(model, target, [at[0], bad])
                # refused where the binding's model is loaded (the frontend's broadcast, located) or by the session
                s.check(f"{name} ({target}): a binding breaking the tie ({sym} = {bad[sym]}) fails before any kernel, located",
                        p.returncode != 0 and (f"{sym}={bad[sym]}" in p.stderr and "cannot broadcast" in p.stderr and "(node " in p.stderr
                                               or f"shape symbol {sym} is {bad[sym]}" in p.stderr) and '"session"' not in p.stdout,
                        p.stderr[-600:])
    else:
        print(f"{name}: no fake libcuda, the sessions not checked")
    src_hi = {}
    for target in ("sm80", "sm90"):
        dirs = []
        for b in at:
            p, d = cuda_sim.dump(model, target, [f"{k}={v}" for k, v in b.items()], extra=box)
            s.check(f"{name} ({target}) at {b}: dump over the class box {box[1::2]}", p.returncode == 0, p.stderr[-600:])
            if p.returncode:
                return
            src = open(os.path.join(d, "model.cu")).read()
            src_hi.setdefault(target, src)
            s.check(f"{name} ({target}) at {b}: the corner hi's CUDA C", src == src_hi[target])
            dirs.append(d)
        g = json.load(open(os.path.join(dirs[0], "gpu.json")))["gpu"]
        names = [x["name"] for x in g["syms"]]
        s.check(f"{name} ({target}): every launch reads a size", all(any(a["space"] == "sym" for a in l["args"]) for l in g["launches"]),
                str(g["launches"])[:1000])
        if sym:
            s.check(f"{name} ({target}): the tied symbol {sym} is a size of the unit", sym in names, str(names))
            # a box whose range for the tied symbol stops short of its definition's (G 9..15 at H 5..8): the unit's
            # G still holds the corner hi's 2 * 8 (its value follows H, not that range)
            short = [f"{x[:-len(str(at[0][sym]))]}{at[0][sym] - 1}" if x.startswith(f"{sym}=") else x for x in box]
            p, d = cuda_sim.dump(model, target, [f"{k}={v}" for k, v in at[2].items()], extra=short)
            his = {x["name"]: x["hi"] for x in json.load(open(os.path.join(d, "gpu.json")))["gpu"]["syms"]} if p.returncode == 0 else {}
            s.check(f"{name} ({target}) over {short[1::2]}: {sym}'s largest is the corner hi's {at[0][sym]}",
                    his.get(sym) == at[0][sym], f"{his} {p.stderr[-300:]}")
        ok, log = cuda_sim.nvrtc_ok(src_hi[target], "sm_90a" if target == "sm90" else "sm_80")
        if ok is not None:
            s.check(f"{name} ({target}): NVRTC compiles the box's unit", ok, log[-600:])
        if target != "sm80":
            continue  # sm90's loop nests are sm80's text: the simulator runs sm80's
        for i, b in enumerate(at):
            vals = derived_values(model, b, box)
            s.check(f"{name} at {b}: the unit's sizes have values", all(n in vals for n in names), f"{names} {vals}")
            if not all(n in vals for n in names):
                continue
            feeds = cuda_sim.feeds_of(json.load(open(os.path.join(dirs[i], "gpu.json")))["gpu"], rng)
            outs = {x["name"]: x["shape"] for x in json.load(open(os.path.join(dirs[i], "gpu.json")))["gpu"]["buffers"]
                    if x["space"] == "output"}
            sv = [vals[n] for n in names]
            got, err = cuda_sim.run(dirs[0], feeds, sv=sv, out_shapes=outs)
            s.check(f"{name} at {b}: the corner hi's build runs on the simulator", err is None, err)
            q, e = run(model, feeds, [f"{k}={v}" for k, v in b.items()], backend="interp")
            s.check(f"{name} at {b}: interpreter", q.returncode == 0, q.stderr[-400:])
            if q.returncode or not got:
                continue
            want = {o: np.load(os.path.join(e, f"{o}.npy")).astype(np.float64) for o in got}
            for o, a in got.items():
                ok, detail = close(a, want[o], 1e-6, 1e-6)
                s.check(f"{name} at {b}: {o} vs the interpreter", ok, detail)
            if i == 1:  # must fail: the tied (else the last) size one short
                k = names.index(sym) if sym in names else len(names) - 1
                bad_sv = [v - (j == k) for j, v in enumerate(sv)]
                got2, err2 = cuda_sim.run(dirs[0], feeds, sv=bad_sv, out_shapes=outs)
                s.check(f"{name} at {b}: {names[k]} one short gives another result", err2 is not None or not all(
                    close(a, want[o], 1e-6, 1e-6)[0] for o, a in got2.items()))


def main():
    warnings.simplefilter("ignore", RuntimeWarning)
    s = Suite("shapeset_ties")
    if not cuda_sim.have_gxx():
        print("g++ not found: skipped")
        sys.exit(77)
    learn_rows(s)
    cpu_rows(s)
    rng = np.random.default_rng(25)
    for name, at, bad, sym in GPU_ROWS:
        gpu_row(s, rng, name, at, bad, sym)
    s.close()


if __name__ == "__main__":  # test_shapeset_ties_more.py takes learn_rows and cpu_rows
    main()
