#!/usr/bin/env python3
"""bf16.py — harp --precision bf16 on fp32 models against OpenVINO at its default precision.

    python3 bench/bf16.py [--harp build/harp] [--base OTHER_HARP] [--lean] [--rounds 3] [--repeat 20]
                          [--only NAME,...] [--json FILE]

Models (fp32 ONNX, batch 1): ResNet-50 (the onnx package's light_resnet50
with seeded random weights, tests/realmodels), MobileNetV2 and one BERT-base
layer at S=128 (bench/e2e.py's ONNX graphs and weights), the PP-OCRv4 text
detector at 640x640 (rapidocr's, tests/realmodels; left out when it cannot
be fetched).  Contenders, all at 2 threads, in --rounds interleaved rounds
(each one's best median of --repeat runs is kept):
  harp-bf16  `harp bench --precision bf16` (contractions in bf16, vdpbf16ps)
  harp-fp32  `harp bench` (the default)
  harp-bf16-t32  harp-bf16 with `--knob bf16_fp32_temps=1`: the tensors
             between kernels in fp32, as before they were stored in bf16
             (its column: its time over harp-bf16's, > 1 is the gain)
  harp-bf16-noamx  harp-bf16 with `--knob amx=off`: no AMX variant (the
             AVX-512 BF16 kernels) on a CPU with AMX (the last column: its
             time over harp-bf16's, > 1 is AMX's gain)
  ov         OpenVINO with its defaults (PERFORMANCE_HINT=LATENCY,
             INFERENCE_NUM_THREADS=2): its INFERENCE_PRECISION_HINT is read
             back and printed, bf16 on a CPU with AVX512_BF16
  ort        onnxruntime fp32 (intra_op_num_threads=2)
  base-bf16  with --base BIN: another harp binary's --precision bf16 (a
             baseline build), timed in the same rounds; printed after the
             table with base / harp-bf16 (> 1: harp faster) and its error
--lean keeps harp-bf16, OpenVINO and base-bf16 (no fp32, fp32-temps, AMX-off
or onnxruntime timing: shorter rounds on a busy machine).
The error columns are max |out - onnxruntime fp32| / max |onnxruntime fp32|
on one random input.  The ratio ov / harp-bf16 > 1 means harp is faster:
of the best times, and (in parentheses) the median of the rounds' own
ratios, which a machine whose load changes between rounds moves less.
Needs onnx, onnxruntime, openvino (scripts/install-deps.sh --bench).
"""
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "realmodels"))
sys.path.insert(0, os.path.join(ROOT, "tests", "py"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from settle import settle  # noqa: E402  (each contender's block on idle cores)

THREADS = 2


def model_resnet50(d):
    import fetch
    entry = next(e for e in fetch.load_manifest() if e["name"] == "light_resnet50")
    return fetch.fetch(entry), {}


def model_ppocr(d):
    import fetch
    entry = next(e for e in fetch.load_manifest() if e["name"] == "ppocr_v4_det")
    return fetch.fetch(entry), {"x": [1, 3, 640, 640]}


def model_mobilenetv2(d):
    import e2e
    import onnx_models as om
    path = os.path.join(d, "mobilenetv2.onnx")
    onnx.save(om.mobilenetv2(e2e.mobilenetv2_weights(), e2e.mobilenetv2_blocks()), path)
    return path, {}


def model_bert_layer(d, S=128, E=768, H=12, F=3072):
    import e2e
    import onnx_models as om
    t = {}
    for n, shape in (("wq", (E, E)), ("wk", (E, E)), ("wv", (E, E)), ("wo", (E, E)), ("w1", (E, F)), ("w2", (F, E))):
        t[f"{n}0"] = e2e.rand(*shape, scale=shape[0] ** -0.5)
    for n, k in (("bq", E), ("bk", E), ("bv", E), ("bo", E), ("b1", F), ("b2", E), ("lb1", E), ("lb2", E)):
        t[f"{n}0"] = e2e.rand(k, scale=0.1)
    t["g10"], t["g20"] = 1 + e2e.rand(E, scale=0.1), 1 + e2e.rand(E, scale=0.1)
    path = os.path.join(d, "bert_layer.onnx")
    onnx.save(om.bert(t, 1, S, E, H, F, gelu_op=True), path)
    return path, {"x": [1, S, E]}


MODELS = {"resnet50": model_resnet50, "mobilenetv2": model_mobilenetv2, "bert-base layer s128": model_bert_layer,
          "ppocr_v4_det 640x640": model_ppocr}


def input_shapes(path, shapes):
    """{name: shape} of the model's graph inputs (not initializers), dynamic dims from `shapes`."""
    m = onnx.load(path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    out = {}
    for i in m.graph.input:
        if i.name in inits:
            continue
        dims = [d.dim_value if d.HasField("dim_value") else 0 for d in i.type.tensor_type.shape.dim]
        out[i.name] = shapes.get(i.name) or [v if v > 0 else 1 for v in dims]
    return out


class Harp:
    def __init__(self, exe, repeat, d):
        self.exe, self.repeat, self.dir = exe, repeat, d

    def args(self, feeds):
        out = []
        for i, (k, v) in enumerate(feeds.items()):
            p = os.path.join(self.dir, f"in_{i}.npy")
            np.save(p, v)
            out += ["--input", f"{k}={p}"]
        return out

    def bench(self, path, feeds, precision, knobs=()):
        settle()  # a peer's pool may still spin in this process
        cmd = [self.exe, "bench", path, "--json", "--repeat", str(self.repeat), "--warmup", "3", "--precision", precision]
        cmd += [x for k in knobs for x in ("--knob", k)]
        p = subprocess.run(cmd + self.args(feeds), capture_output=True, text=True)
        if p.returncode:
            raise RuntimeError(f"{' '.join(cmd)}: {p.stderr.strip()[-800:]}")
        return json.loads(p.stdout.strip().splitlines()[-1])

    def run(self, path, feeds, precision):
        d = tempfile.mkdtemp(dir=self.dir)
        cmd = [self.exe, "run", path, "--out", d, "--precision", precision] + self.args(feeds)
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode:
            raise RuntimeError(p.stderr.strip()[-800:])
        m = onnx.load(path, load_external_data=False)
        return [np.load(os.path.join(d, safe_name(o.name) + ".npy")) for o in m.graph.output]


def safe_name(n):
    """The file name `harp run` gives output n (ut_sanitize_name)."""
    pre = "_" if not n or n[0] in ".-0123456789" else ""
    return pre + "".join(c if (c.isascii() and c.isalnum()) or c == "_" else "_" for c in n)


def rel_err(got, want):
    e = max(float(np.max(np.abs(np.asarray(g, np.float64) - np.asarray(w, np.float64)))) for g, w in zip(got, want))
    s = max(float(np.max(np.abs(np.asarray(w, np.float64)))) for w in want)
    return e / max(s, 1e-30)


def main():
    from e2e import bench_args, median_ms  # median_ms: 3 warm-up calls, then the median of `repeat`
    ap = bench_args()
    ap.add_argument("--base", default="", help="a baseline harp binary, timed at bf16 in the same rounds")
    ap.add_argument("--lean", action="store_true", help="time harp-bf16, OpenVINO and --base only")
    a = ap.parse_args()
    import onnxruntime as ort
    import openvino as ov
    core = ov.Core()
    d = tempfile.mkdtemp(prefix="harp-bf16-")
    harp = Harp(a.harp, a.repeat, d)
    base = Harp(a.base, a.repeat, d) if a.base else None
    who_all = ("harp-bf16", "ov") + (("base-bf16",) if base else ()) + \
        (() if a.lean else ("harp-fp32", "ort", "harp-bf16-t32", "harp-bf16-noamx"))
    base_rows = []
    only = [s for s in a.only.split(",") if s]
    rng = np.random.default_rng(0)
    print(f"# bf16.py, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.processor() or platform.machine()}, "
          f"{THREADS} threads; openvino {ov.__version__}, onnxruntime {ort.__version__}")
    print("| model | harp bf16 ms | OpenVINO default ms | ratio OV/harp-bf16 (median of rounds) | harp fp32 ms | bf16 speedup | "
          "ORT fp32 ms | err harp-bf16 | err OV | err harp-fp32 | harp bf16, fp32 temps ms (/ harp bf16) | "
          "harp bf16, AMX off ms (/ harp bf16) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    results = []
    for name, make in MODELS.items():
        if only and not any(o in name for o in only):
            continue
        try:
            path, shapes = make(d)
        except Exception as ex:  # noqa: BLE001 (a model that cannot be fetched is left out, said)
            print(f"| {name} | left out: {ex} |")
            continue
        ins = input_shapes(path, shapes)
        feeds = {k: rng.random(v, dtype=np.float32) if len(v) == 4 else rng.standard_normal(v).astype(np.float32)
                 for k, v in ins.items()}
        so = ort.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads = THREADS, 1
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        om_ = core.read_model(path)
        if shapes:
            om_.reshape({k: ov.PartialShape(v) for k, v in ins.items()})
        cm = core.compile_model(om_, "CPU", {"INFERENCE_NUM_THREADS": THREADS, "PERFORMANCE_HINT": "LATENCY"})
        ov_prec = cm.get_property("INFERENCE_PRECISION_HINT").to_string()
        req = cm.create_infer_request()
        ov_in = [feeds[i.get_any_name()] for i in cm.inputs]
        best, ratios = {}, []
        for _ in range(a.rounds):
            this = {}
            for who in who_all:
                if who == "base-bf16":
                    ms = base.bench(path, feeds, "bf16")["median_ms"]
                elif who == "harp-bf16-t32":
                    ms = harp.bench(path, feeds, "bf16", ["bf16_fp32_temps=1"])["median_ms"]
                elif who == "harp-bf16-noamx":
                    ms = harp.bench(path, feeds, "bf16", ["amx=off"])["median_ms"]
                elif who.startswith("harp"):
                    ms = harp.bench(path, feeds, who[5:])["median_ms"]
                elif who == "ov":
                    ms = median_ms(lambda: req.infer(ov_in), a.repeat)
                else:
                    ms = median_ms(lambda: sess.run(None, feeds), a.repeat)
                best[who] = min(best.get(who, float("inf")), ms)
                this[who] = ms
            ratios.append(this["ov"] / this["harp-bf16"])
        want = sess.run(None, feeds)
        req.infer(ov_in)
        got_ov = [req.get_output_tensor(i).data.copy() for i in range(len(cm.outputs))]
        err = {"harp-bf16": rel_err(harp.run(path, feeds, "bf16"), want), "ov": rel_err(got_ov, want),
               "harp-fp32": rel_err(harp.run(path, feeds, "fp32"), want)}
        if base:
            err["base-bf16"] = rel_err(base.run(path, feeds, "bf16"), want)
            base_rows.append(f"| {name} | {best['base-bf16']:.2f} | {best['harp-bf16']:.2f} | "
                             f"{best['base-bf16'] / best['harp-bf16']:.2f} | {err['base-bf16']:.1e} | {err['harp-bf16']:.1e} |")
        for who in ("harp-fp32", "ort", "harp-bf16-t32", "harp-bf16-noamx"):
            best.setdefault(who, float("nan"))
        print(f"| {name} | {best['harp-bf16']:.2f} | {best['ov']:.2f} ({ov_prec}) | {best['ov'] / best['harp-bf16']:.2f} "
              f"({float(np.median(ratios)):.2f}) | "
              f"{best['harp-fp32']:.2f} | {best['harp-fp32'] / best['harp-bf16']:.2f} | {best['ort']:.2f} | "
              f"{err['harp-bf16']:.1e} | {err['ov']:.1e} | {err['harp-fp32']:.1e} | "
              f"{best['harp-bf16-t32']:.2f} ({best['harp-bf16-t32'] / best['harp-bf16']:.2f}) | "
              f"{best['harp-bf16-noamx']:.2f} ({best['harp-bf16-noamx'] / best['harp-bf16']:.2f}) |", flush=True)
        results.append({"model": name, "ms": best, "ov_precision": ov_prec, "ov_over_harp_bf16_per_round": ratios,
                        "max_rel_err_vs_ort": err})
    if base_rows:
        print(f"\n| model | base ({a.base}) bf16 ms | harp bf16 ms | base / harp | err base | err harp |")
        print("|---|---|---|---|---|---|")
        print("\n".join(base_rows))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
