#!/usr/bin/env python3
"""int8_avx2.py — the int8 kernels' AVX2 variant (cgen_qgemm_avx2.c), forced on
this AVX-512 machine as a CPU without VNNI would run it, per kernel and per model.

    python3 bench/int8_avx2.py BUILD/qgemm_gen [--harp build/harp] [--rounds 3] [--repeat 20]
                               [--only kernels,resnet50,bert_layer]

kernels: on ResNet-50 / BERT-base shapes (bench/qgemm.py's), interleaved in
one process, one thread (no pool), timed in CPU time (the process's: a
shared, loaded machine inflates wall clock, far less a single thread's CPU
time), the weight packed once in all:
  a2     harp int8, its AVX2 variant forced (u8 x s8 -> u8, requantized)
  f32    harp's fp32 GEMM / conv template, its AVX2 variant forced (what an
         AVX2 machine runs for the fp32 model)
  sc     harp int8, the scalar variant (what an AVX2 machine ran before)
  vn     harp int8, the VNNI variant (this machine's own, for scale)
each int8 output first checked equal to numpy's on every element.
models (bench/int8.py's QDQ models from quantize_static): harp bench with
HARP_INT8_ISA=avx2, =scalar and auto (VNNI / AMX here), and onnxruntime's
int8 run at its native ISA (onnxruntime has no switch that keeps MLAS off
AVX-512 / VNNI: its figure is this CPU's, not an AVX2 one's).
Printed: medians over rounds (each a median of --repeat calls) in ms, and ratios
(models: harp bench's wall clock at its 2 threads, onnxruntime's at 2 threads).
"""
import argparse
import ctypes
import os
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from qgemm import CONVS, SHAPES, ZA, ZY, P, conv_data, data, load_lib, numpy_ref, ptr  # noqa: E402
from settle import interleaved_ms  # noqa: E402

KSHAPES = [s for s in SHAPES if s[0] in ("r50_1x1_56", "r50_1x1_14", "bert_qkv", "bert_ffn1", "bert_ffn2")]
KCONVS = [c for c in CONVS if c[0] in ("r50_3x3_28c", "r50_3x3_14c")]


def build(gen, tmp):
    args = []
    for name, m, n, k, wa in KSHAPES:
        args += [name, str(m), str(n), str(k), str(wa), "0", "u8", "u8", str(ZA), str(ZY), "0", "255"]
    for name, c, h, w, co, ks, st, pd in KCONVS:
        args += ["conv", name] + [str(v) for v in (c, h, w, co, ks, st, pd)]
    src, so = os.path.join(tmp, "q.c"), os.path.join(tmp, "q.so")
    return load_lib(gen, ["--avx2", src] + args, src, so)


def int8_calls(lib, pool, name, w, bias, mult, x, y, want):
    """{tag: call} of the int8 variants of kernel `name`; False if one is not exact."""
    calls, keep, exact = {}, [], True
    for tag, suf in (("a2", ""), ("sc", "_sc"), ("vn", "_vn")):
        q, qsize, qpack = getattr(lib, name + suf), getattr(lib, name + suf + "_wsize"), getattr(lib, name + suf + "_pack")
        q.argtypes, qsize.restype, qpack.argtypes = [P] * 4, ctypes.c_long, [P] * 4
        wp = np.zeros(qsize() // 4 + 16, dtype=np.int32)
        assert qpack(ptr(w), ptr(bias), ptr(mult), ptr(wp)) == 0
        y[...] = 0
        assert q(pool, ptr(wp), ptr(x), ptr(y)) == 0
        exact = exact and np.array_equal(y.reshape(want.shape), want)
        keep.append(wp)
        calls[tag] = (lambda q=q, wp=wp: q(pool, ptr(wp), ptr(x), ptr(y)))
    return calls, keep, exact


def f32_call(lib, pool, name, side, packed_src, args_of):
    f = getattr(lib, f"{name}_f32")
    nb, pk = getattr(lib, f"{name}_f32_pack_{side}_bytes"), getattr(lib, f"{name}_f32_pack_{side}")
    nb.restype, pk.argtypes, f.argtypes = ctypes.c_long, [P] * 3, [P] * 5
    packed = np.zeros(nb() // 4 + 16, dtype=np.float32)
    assert pk(pool, ptr(packed_src), ptr(packed)) == 0
    a0, a1, c = args_of(packed)
    return (lambda: f(pool, ptr(a0), ptr(a1), ptr(c), None)), packed


def kernels(gen, rounds, repeat):
    lib = build(gen, tempfile.mkdtemp(prefix="harp-i8avx2-"))
    pool = None  # one thread: CPU time is the measure
    rng = np.random.default_rng(0)
    print(f"{'shape':12} {'M':>5} {'N':>5} {'K':>5} {'exact':>5} {'a2 ms':>8} {'f32 ms':>8} {'sc ms':>8} {'vn ms':>8}"
          f" {'a2 GOP/s':>9} {'f32/a2':>7} {'sc/a2':>7} {'vn/a2':>7}")
    bad = 0
    for shp in KSHAPES + [("conv",) + c for c in KCONVS]:
        if shp[0] == "conv":
            name, c, h, w, co, ks, st, pd = shp[1:]
            x, wt, bias, mult, want, oh, ow = conv_data(c, h, w, co, ks, st, pd, rng)
            m, n, k = co, oh * ow, c * ks * ks
            y = np.zeros((m, n), dtype=np.uint8)
            fx, fw, out = x.astype(np.float32) - ZA, wt.astype(np.float32), np.zeros((co, oh, ow), dtype=np.float32)
            calls, keep, exact = int8_calls(lib, pool, name, wt, bias, mult, x, y, want)
            calls["f32"], packed = f32_call(lib, pool, name, "a", fw, lambda p: (p, fx, out))
        else:
            name, m, n, k, wa = shp
            x, w, bias, mult = data(m, n, k, wa, rng)
            want = numpy_ref(x, w, bias, mult, wa)
            y = np.zeros((m, n), dtype=np.uint8)
            calls, keep, exact = int8_calls(lib, pool, name, w, bias, mult, x, y, want)
            fx, fw, out = x.astype(np.float32) - ZA, w.astype(np.float32), np.zeros((m, n), dtype=np.float32)
            fa, fb = (fw, fx) if wa else (fx, np.ascontiguousarray(fw.T))
            calls["f32"], packed = f32_call(lib, pool, name, "a" if wa else "b", fa if wa else fb,
                                            lambda p: (p, fb, out) if wa else (fa, p, out))
        bad += not exact
        # the scalar variant (10-100x slower) a fifth of the calls
        t = interleaved_ms({k2: calls[k2] for k2 in ("a2", "f32", "sc", "vn")}, rounds, repeat, clock=time.process_time,
                           repeats={"sc": max(3, repeat // 5)})
        gops = 2.0 * m * n * k / (t["a2"] * 1e-3) / 1e9
        print(f"{name:12} {m:5} {n:5} {k:5} {str(exact):>5} {t['a2']:8.3f} {t['f32']:8.3f} {t['sc']:8.3f} {t['vn']:8.3f}"
              f" {gops:9.1f} {t['f32'] / t['a2']:7.2f} {t['sc'] / t['a2']:7.2f} {t['vn'] / t['a2']:7.2f}", flush=True)
        del keep, packed
    return bad


def models(harp, names, rounds, repeat):
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "py"))
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "realmodels"))
    import e2e
    import int8
    import onnx
    h = e2e.Harp(harp, repeat)
    d = os.path.join(tempfile.gettempdir(), "harp-int8-models")
    os.makedirs(d, exist_ok=True)
    for name in names:
        _, qdq = int8.quantize(name, d)
        xname, shape = int8.input_of(onnx.load(qdq))
        x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
        ins = {xname: ("input", x)}
        outs = {}
        for isa in ("avx2", "auto"):
            os.environ["HARP_INT8_ISA"] = isa
            outs[isa] = h.run(qdq, {}, ins, onnx.load(qdq).graph.output[0].name)
            os.environ.pop("HARP_INT8_ISA")
        print(f"  {name}: AVX2 and auto outputs equal: {np.array_equal(outs['avx2'], outs['auto'])}", flush=True)
        s = int8.ort_session(qdq)
        t = {"avx2": [], "scalar": [], "auto": [], "ort": []}
        for _ in range(rounds):
            for isa in ("avx2", "scalar", "auto"):
                t[isa].append(h.bench(qdq, {}, ins, env={"HARP_INT8_ISA": isa})["median_ms"])
            t["ort"].append(e2e.median_ms(lambda: s.run(None, {xname: x}), repeat))
        med = {k: float(np.median(v)) for k, v in t.items()}
        print(f"{name:12} harp avx2 {med['avx2']:8.2f}  harp scalar {med['scalar']:8.2f}  harp auto {med['auto']:8.2f}  "
              f"ort (native) {med['ort']:8.2f} ms   scalar/avx2 {med['scalar'] / med['avx2']:.2f}x   "
              f"ort/avx2 {med['ort'] / med['avx2']:.2f}x   auto/avx2 {med['auto'] / med['avx2']:.2f}x", flush=True)
        for k, v in t.items():
            print(f"  {k}: " + " ".join(f"{y:.2f}" for y in v))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("gen", help="BUILD/qgemm_gen")
    ap.add_argument("--harp", default=os.path.join(HERE, "..", "build", "harp"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--only", default="kernels,resnet50,bert_layer")
    a = ap.parse_args()
    print("load average at the start:", " ".join(f"{v:.1f}" for v in os.getloadavg()))
    only = a.only.split(",")
    bad = kernels(a.gen, a.rounds, a.repeat) if "kernels" in only else 0
    names = [n for n in only if n != "kernels"]
    if names:
        models(a.harp, names, a.rounds, max(3, a.repeat // 4))
    print("load average at the end:", " ".join(f"{v:.1f}" for v in os.getloadavg()))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
