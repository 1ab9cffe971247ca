#!/usr/bin/env python3
"""shapeset_e2e.py — bench/e2e.py's whole models as ShapeSets: one compiled
object for a box of a natural symbol (harp run/bench --shapeset,
docs/architecture.md "One object per ShapeSet") against harp's
exactly-specialised object at the same binding (issue 25's goal: within
1.1x in the steady state).

    python3 bench/shapeset_e2e.py [--harp build/harp] [--rounds 2] [--repeat 20] [--only CASE,...] [--no-check] [--threads 2]

Cases: every case of bench/e2e.py (its CASES, its weights and models: e2e.case_*; the
weights written once as .npy and given as --param, so that both objects pack them
once as a real model's constants), over its natural symbol (CASES below):
  GEMMs fp32 (1024, 2048, +bias+relu) and fp16, mlp block: the rows M (T) in
  256..2048 at 256, 1000, 2048; gemv and linear W^T 4x4096x4096: M in 1..8;
  linear W^T 256x4096x4096: M in 64..512; linear+gelu: M in 32..512;
  conv3x3 64ch, depthwise, resnet block, conv+bn+relu: H, W in 16..64 at 28x28,
  33x47, 56x56, 64x64; conv3x3 256ch: H, W in 7..28; attention, BERT 2 layers: S
  in 64..512 (BERT 12 layers: 64..256); layernorm, softmax: rows R in 256..4096;
  transformer block (B = 4): S in 16..256; resnet18, mobilenetv2: the batch N in
  1..8 (the image side 224 is a constant of their .harp files); llama layer: S in
  16..128; mobilenetv2_hw (bench/mnv2_hw.py's ONNX, e2e.py's weights): the image
  H, W in 160..320 at 160, 224, 320 (the rotary tables cos, sin [S, 1, 64]: random inputs in the latency
  runs, --param weights at the binding's shape in the check, which the ShapeSet
  object reads from its table at the upper corner: docs/architecture.md, "One
  object per ShapeSet").
  latency  `harp bench --shapeset SYM=LO..HI --bind SYM=V ...`: in one process,
           per binding an instance of the ShapeSet object and of the specialised
           object, run in turn each round (2 threads, HARP_NUM_THREADS=2, or --threads); the
           medians, their ratio, on the wall clock and on the process's CPU
           clock (all threads; steadier on a shared machine); and the new-shape
           cost: the first run at each binding on one ShapeSet instance (its
           checks included) minus the warm median, wall / CPU (issue 25: at
           most 10 ms).  The bindings run in the order listed, so at the first
           the instance is new (its first run ever: pages touched, weights
           packed where the object packs at the first run), at the others it
           has run the smaller ones.  --rounds processes, the median of each
           figure.
  check    `harp run --shapeset` and `harp run --sym` (specialised) on the same
           inputs at every binding: the max error of the ShapeSet output
           against the specialised one, relative to the largest |output|.
A model that gets no one object for its box prints the reason (harp's
fallback message) and moves on.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import numpy as np  # noqa: E402

import e2e  # noqa: E402  (the models' weights, shared with bench/e2e.py)


e2e.ort = None  # e2e.py's cases then build their tensors only (no onnxruntime sessions)
M256 = [256, 1000, 2048]  # a GEMM's rows M in 256..2048
HW = [dict(H=28, W=28), dict(H=33, W=47), dict(H=56, W=56), dict(H=64, W=64)]  # a conv's image in 16..64


def rows(sym, lo, hi, binds, make, inp):
    """A case over one symbol: inp(v) -> the inputs at sym = v."""
    return (make, [(sym, lo, hi)], [{sym: v} for v in binds], lambda b: inp(b[sym]))


def image(lo, hi, binds, make, n, c):
    """A conv case over H, W in lo..hi: the input x [n, c, H, W]."""
    return (make, [("H", lo, hi), ("W", lo, hi)], binds, lambda b: {"x": e2e.rand(n, c, b["H"], b["W"])})


def mnv2_hw():
    """bench/mnv2_hw.py's MobileNetV2 ONNX (input [1, 3, H, W], e2e.py's weights as initializers) as a case."""
    import mnv2_hw as m  # noqa: E402
    return dict(model=m.write(os.path.join(tempfile.mkdtemp(prefix="harp-mnv2hw-"), "mnv2_hw.onnx")),
                syms={}, tensors={}, out="y")


def llama_inputs(S, D=2048, H=32):
    cos, sin = e2e.rope_tables(S, D // H)
    return {"x": e2e.rand(1, S, D), "cos": cos, "sin": sin}


# name: (e2e.py's case maker (the model, its other symbols, its weights: the tensors given as "param"), the box
# [(symbol, lo, hi)], the bindings (in this order), the inputs of a binding: name -> array)
R = e2e.rand
CASES = {
    "gemm1024": rows("M", 256, 2048, M256, lambda: e2e.case_gemm(1024), lambda m: {"A": R(m, 1024)}),
    "gemm2048": rows("M", 256, 2048, M256, lambda: e2e.case_gemm(2048), lambda m: {"A": R(m, 2048)}),
    "gemm_bias_relu": rows("M", 256, 2048, M256, lambda: e2e.case_gemm_bias_relu(1024), lambda m: {"A": R(m, 1024)}),
    "gemm16": rows("M", 256, 2048, M256, lambda: e2e.case_gemm16(1024), lambda m: {"A": R(m, 1024, dtype=np.float16)}),
    "gemv": rows("M", 1, 8, [1, 3, 8], lambda: e2e.case_gemv(1, 4096, 4096), lambda m: {"A": R(m, 4096)}),
    "linear_t4": rows("M", 1, 8, [1, 4, 8], lambda: e2e.case_linear_t(4, 4096, 4096), lambda m: {"x": R(m, 4096)}),
    "linear_t256": rows("M", 64, 512, [64, 256, 512], lambda: e2e.case_linear_t(256, 4096, 4096),
                        lambda m: {"x": R(m, 4096)}),
    "conv64": image(16, 64, HW, e2e.case_conv, 1, 64),
    "dwconv": image(16, 64, HW, e2e.case_dwconv, 1, 128),
    "conv256": image(7, 28, [dict(H=7, W=7), dict(H=11, W=13), dict(H=14, W=14), dict(H=28, W=28)],
                     lambda: e2e.case_conv(256, 14), 1, 256),
    "resblock": image(16, 64, HW, e2e.case_resblock, 1, 64),
    "conv_bn": image(16, 64, HW, e2e.case_conv_bn, 1, 64),
    "linear_gelu": rows("M", 32, 512, [32, 128, 512], e2e.case_linear_gelu, lambda m: {"x": R(m, 768)}),
    "attention": rows("S", 64, 512, [64, 200, 512], e2e.case_attention,
                      lambda s: {n: R(1, 8, s, 64) for n in "qkv"}),
    "layernorm": rows("R", 256, 4096, [256, 1000, 4096], e2e.case_layernorm, lambda r: {"x": R(r, 1024)}),
    "softmax": rows("R", 256, 4096, [256, 1000, 4096], e2e.case_softmax, lambda r: {"x": R(r, 1024)}),
    "mlp": rows("T", 256, 2048, M256, e2e.case_mlp, lambda t: {"x": R(t, 512)}),
    "transformer": rows("S", 16, 256, [37, 100, 256], e2e.case_transformer, lambda s: {"x": R(4, s, 64)}),
    "resnet18": rows("N", 1, 8, [1, 3, 8], e2e.case_resnet18, lambda n: {"x": R(n, 3, 224, 224)}),
    "bert2": rows("S", 64, 512, [64, 128, 512], e2e.case_bert, lambda s: {"x": R(1, s, 768)}),
    "bert12": rows("S", 64, 256, [64, 128, 256], lambda: e2e.case_bert(12), lambda s: {"x": R(1, s, 768)}),
    "mobilenetv2": rows("N", 1, 8, [1, 3, 8], e2e.case_mobilenetv2, lambda n: {"x": R(n, 3, 224, 224)}),
    "llama": rows("S", 16, 128, [37, 77, 128], e2e.case_llama, llama_inputs),
    "mobilenetv2_hw": image(160, 320, [dict(H=v, W=v) for v in (160, 224, 320)], mnv2_hw, 1, 3),
}
TABLES = {"cos", "sin"}  # llama's inputs that are parameters of the model


def save(d, tensors, kind_of):
    """--input/--param NAME=FILE for each tensor, written under d."""
    args = []
    for k, v in tensors.items():
        p = os.path.join(d, f"{k}.npy")
        np.save(p, v)
        args += [f"--{kind_of(k)}", f"{k}={p}"]
    return args


def prepare(name, d):
    """CASES[name] ready to run: the model, its other symbols as --sym args (extra), its weights written under d
    as --param args (wargs), the box [(symbol, lo, hi)], the bindings (dicts), inputs(binding), the output."""
    make, box, binds, inputs = CASES[name]
    c = make()
    extra = [a for k, v in c["syms"].items() if k not in {s for s, _, _ in box} for a in ("--sym", f"{k}={v}")]
    wargs = save(d, {k: v for k, (kind, v) in c["tensors"].items() if kind == "param" and k not in TABLES},
                 lambda k: "param")
    return dict(model=c["model"], extra=extra, wargs=wargs, box=box, binds=binds, inputs=inputs, out=c["out"], dir=d)


THREADS = [2]  # HARP_NUM_THREADS of harp's processes (--threads)


def harp(cmd, env_extra=None):
    env = dict(os.environ, HARP_NUM_THREADS=str(THREADS[0]), **(env_extra or {}))
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    return p.returncode, p.stdout, p.stderr


def bind_text(b):
    return ",".join(f"{k}={v}" for k, v in b.items())


def latency(exe, model, extra, wargs, box, binds, repeat):
    """{binding text: (ShapeSet ms, specialised ms, ratio, CPU ratio, first run over warm ms, the same on the CPU
    clock)} of one `harp bench --shapeset` process, or the error."""
    cmd = [exe, "bench", model, *extra, *wargs, "--repeat", str(repeat), "--json"]
    for sym, lo, hi in box:
        cmd += ["--shapeset", f"{sym}={lo}..{hi}"]
    for b in binds:
        cmd += ["--bind", bind_text(b)]
    rc, out, err = harp(cmd)
    if rc:
        return err.strip().splitlines()[-1] if err.strip() else f"exit {rc}"
    rows = {}
    for line in out.splitlines():
        if '"shapeset_ms"' in line:
            r = json.loads(line)
            rows[r["bind"]] = (r["shapeset_ms"], r["specialised_ms"], r["ratio"],
                               r["shapeset_cpu_ms"] / r["specialised_cpu_ms"], r["first_run_ms"] - r["shapeset_ms"],
                               r["first_run_cpu_ms"] - r["shapeset_cpu_ms"])
    return rows


def check(exe, model, extra, wargs, box, b, inputs, out, d):
    """Max |ShapeSet - specialised| / max |specialised| at binding b (same inputs)."""
    iargs = save(d, inputs, lambda k: "param" if k in TABLES else "input")
    got = []
    for gen in (True, False):
        od = tempfile.mkdtemp(dir=d)
        cmd = [exe, "run", model, *extra, *wargs, *iargs, "--out", od]
        cmd += [a for k, v in b.items() for a in ("--sym", f"{k}={v}")]
        if gen:
            cmd += [a for sym, lo, hi in box for a in ("--shapeset", f"{sym}={lo}..{hi}")]
        rc, _, err = harp(cmd)
        if rc:
            raise SystemExit(f"harp run failed ({'ShapeSet' if gen else 'specialised'}, {bind_text(b)}): {err[-600:]}")
        got.append(np.load(os.path.join(od, f"{out}.npy")).astype(np.float64))
    return float(np.max(np.abs(got[0] - got[1])) / max(1e-30, np.max(np.abs(got[1]))))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--harp", default=os.path.join(ROOT, "build", "harp"))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--only", default="")
    ap.add_argument("--no-check", action="store_true", help="skip the output check")
    ap.add_argument("--threads", type=int, default=2, help="HARP_NUM_THREADS (1: steadier on a loaded machine)")
    a = ap.parse_args()
    THREADS[0] = a.threads
    os.chdir(ROOT)
    exe = os.path.abspath(a.harp)
    only = [s.strip() for s in a.only.split(",") if s.strip()]
    print(f"load: {' '.join(f'{x:.1f}' for x in os.getloadavg())}; {a.threads} thread(s)")
    print("| case | box | binding | ShapeSet ms | specialised ms | ratio | CPU-clock ratio | first run over warm, ms "
          "(wall / CPU) | max rel err |\n|---|---|---|---|---|---|---|---|---|")
    for name in CASES:
        if only and name not in only:
            continue
        c = prepare(name, tempfile.mkdtemp(prefix=f"harp-sse2e-{name}-"))
        model, extra, wargs, box, binds, d = c["model"], c["extra"], c["wargs"], c["box"], c["binds"], c["dir"]
        boxt = ",".join(f"{s}={lo}..{hi}" for s, lo, hi in box)
        runs = [latency(exe, model, extra, wargs, box, binds, a.repeat) for _ in range(a.rounds)]
        bad = next((r for r in runs if isinstance(r, str)), None)
        if bad is not None:
            print(f"| {name} | {boxt} | - | no one object: {bad[:300]} | | | | | |")
            sys.stdout.flush()
            continue
        for b in binds:
            bt = bind_text(b)
            g, s, ratio, cratio, first, first_cpu = (statistics.median(r[bt][k] for r in runs) for k in range(6))
            err = float("nan") if a.no_check else check(exe, model, extra, wargs, box, b, c["inputs"](b), c["out"], d)
            new = " (new instance)" if b == binds[0] else ""
            print(f"| {name} | {boxt} | {bt} | {g:.3f} | {s:.3f} | {ratio:.3f} | {cratio:.3f} | "
                  f"{first:+.2f} / {first_cpu:+.2f}{new} | {err:.1e} |")
            sys.stdout.flush()
    print(f"load: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
