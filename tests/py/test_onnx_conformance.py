"""ONNX backend conformance: the model tests that ship with the onnx package
(onnx/backend/test/data: light/, pytorch-converted/, pytorch-operator/,
simple/) run through `harp run`, each compared with its expected outputs
(rtol 1e-3 and the case's atol, as onnx's backend runner does).

Every case must either match or be refused with a clear error: exit code 1
and "error[UnknownOp]" or "error[Unsupported]" naming the node.  A crash, a
hang, another error or a wrong answer fails the test.  The summary counts
the passes and the refusals by reason.

ctest runs the small cases on the interpreter, light_squeezenet and
light_resnet50 on the cpu backend and light_squeezenet on the interpreter
too (about a minute on 2 cores);
`python3 tests/py/test_onnx_conformance.py --all` also runs the other seven
light models on the cpu backend (several minutes: each is a large C file to
compile).  --backend cpu runs the small cases on the cpu backend too;
--jobs N runs N cases at a time (default 2); names on the command line
(substrings) pick cases.

The light models' weights are ConstantOfShape fills, so their expected
outputs are the onnx runner's: inputs arange(n)/n in the input's shape.
"""
import argparse
import collections
import glob
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import harp_test as ht  # noqa: E402

ht.onnx_or_skip(runtime=False)
import onnx  # noqa: E402
from onnx import numpy_helper  # noqa: E402

DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
SUITES = ("light", "pytorch-converted", "pytorch-operator", "simple")
# Light models run in ctest, on these backends; --all runs every one on the cpu backend.
CI_LIGHT = {"light_squeezenet": ("cpu", "interp"), "light_resnet50": ("cpu",)}
REFUSED = ("UnknownOp", "Unsupported")
# The passes of the ctest run (raise it when harp learns an op): fewer is a
# regression even when the lost cases are refused cleanly.
MIN_PASS_CI = 97


def harp_id(name):
    """The identifier harp gives an ONNX name (harp/onnx.h)."""
    s = re.sub(r"[^A-Za-z0-9_]", "_", name)[:100]
    return "_" + s if not s or s[0].isdigit() else s


class Case:
    def __init__(self, suite, name, model, inputs, outputs, rtol=1e-3, atol=1e-7, backend="interp"):
        self.suite, self.name, self.model = suite, name, model
        self.inputs, self.outputs = inputs, outputs  # lists of numpy arrays, in graph order
        self.rtol, self.atol, self.backend = rtol, atol, backend


def graph_inputs(m):
    inits = {i.name for i in m.graph.initializer}
    return [i for i in m.graph.input if i.name not in inits]


def load_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def cases(args):
    found = []
    for suite in SUITES:
        d = os.path.join(DATA, suite)
        if not os.path.isdir(d):
            raise SystemExit(f"FAIL: the onnx package {onnx.__version__} has no backend test data {d}")
        if suite == "light":
            for path in sorted(glob.glob(os.path.join(d, "light_*.onnx"))):
                name = os.path.basename(path)[:-5]
                if not args.all and name not in CI_LIGHT:
                    continue
                m = onnx.load(path, load_external_data=False)
                ins = []
                for x in graph_inputs(m):  # what onnx's runner feeds them
                    shape = [dm.dim_value if dm.HasField("dim_value") else 1 for dm in x.type.tensor_type.shape.dim]
                    n = int(np.prod(shape))
                    ins.append((np.arange(n).reshape(shape) / n).astype(np.float32))
                outs = [load_pb(p) for p in sorted(glob.glob(path[:-5] + "_output_*.pb"))]
                for be in CI_LIGHT.get(name, ("cpu",)):
                    found.append(Case(suite, name, path, ins, outs, backend=be))
            continue
        for cdir in sorted(glob.glob(os.path.join(d, "*"))):
            model = os.path.join(cdir, "model.onnx")
            if not os.path.exists(model):
                continue
            for ds in sorted(glob.glob(os.path.join(cdir, "test_data_set_*"))):
                ins = [load_pb(p) for p in sorted(glob.glob(os.path.join(ds, "input_*.pb")), key=_num)]
                outs = [load_pb(p) for p in sorted(glob.glob(os.path.join(ds, "output_*.pb")), key=_num)]
                tag = os.path.basename(cdir) + ("" if ds.endswith("_0") else "/" + os.path.basename(ds))
                found.append(Case(suite, tag, model, ins, outs, backend=args.backend))
    if args.names:
        found = [c for c in found if any(n in f"{c.suite}/{c.name}" for n in args.names)]
    return found


def _num(p):
    return int(re.findall(r"(\d+)\.pb$", p)[0])


# What run_model answers: a match, a clear refusal, or one of the failures.
VERDICTS = ("pass", "refused", "WRONG", "crash", "hang", "error")
SANITIZER = ("AddressSanitizer", "LeakSanitizer", "runtime error:")


def feed(arr):
    """An input as harp reads it: int64 as int32 (harp/onnx.h), bfloat16 as
    float32 files; None when harp has no file type for it."""
    if arr.dtype == np.int64:
        if arr.size and (arr.min() < -2**31 or arr.max() >= 2**31):
            return None
        return arr.astype(np.int32)
    if arr.dtype.name == "bfloat16":
        return arr.astype(np.float32)
    return arr


def same_dtype(got, want):
    """harp's dtype for an output of ONNX type want.dtype (int64 is int32, bf16 is a float32 file)."""
    if want.dtype == np.int64:
        return got.dtype in (np.int64, np.int32)
    if want.dtype.name == "bfloat16":
        return got.dtype == np.float32
    return got.dtype == want.dtype


def run_model(model, m, inputs, outputs, rtol, atol, backend, timeout, outdir=None, fixed=()):
    """Run `harp run` on the file model (m: its ModelProto) with the graph
    inputs' arrays `inputs` (None for one harp cannot be given: it is left
    out, and harp must refuse the model) and compare with `outputs` as
    onnx's runner does; the inputs named in `fixed` go as --param (fixed at
    import).  Returns (verdict, detail, seconds), the verdict one of VERDICTS."""
    outdir = outdir or tempfile.mkdtemp(prefix="conf_")
    args = [ht.HARP, "run", model, "--out", outdir, "--backend", backend]
    gin = graph_inputs(m)
    if len(gin) != len(inputs):
        return "error", f"{len(inputs)} input files for {len(gin)} graph inputs", 0.0
    for vi, arr in zip(gin, inputs):
        arr = feed(arr) if isinstance(arr, np.ndarray) and arr.dtype != object else None
        if arr is None:
            continue
        path = os.path.join(outdir, f"in_{harp_id(vi.name)}.npy")
        np.save(path, arr)
        args += ["--param" if vi.name in fixed else "--input", f"{vi.name}={path}"]
    t0 = time.time()
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "hang", f"no answer in {timeout} s", float(timeout)
    dt = time.time() - t0
    if any(s in p.stderr for s in SANITIZER):
        return "crash", "sanitizer: " + p.stderr.strip()[-800:], dt
    if p.returncode != 0:
        msg = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ""
        kind = re.search(r"error\[(\w+)\]", msg)
        if p.returncode != 1 or not kind:
            return "crash", f"rc={p.returncode}: {p.stderr.strip()[-500:]}", dt
        made = [f for f in os.listdir(outdir) if not f.startswith("in_")]
        if made:
            return "error", f"failed but wrote {made}: {msg}", dt
        if kind.group(1) in REFUSED:
            return "refused", msg, dt
        return "error", msg, dt
    for o, want in zip(m.graph.output, outputs):
        path = os.path.join(outdir, harp_id(o.name) + ".npy")
        if not os.path.exists(path):
            return "error", f"no output {path}", dt
        got = np.load(path)
        want = np.asarray(want)
        if got.shape != want.shape:
            return "WRONG", f"output {o.name}: shape {got.shape}, expected {want.shape}", dt
        if not same_dtype(got, want):
            return "WRONG", f"output {o.name}: dtype {got.dtype}, expected {want.dtype}", dt
        if want.dtype == np.bool_ or got.dtype == np.bool_:
            ok = np.array_equal(got.astype(np.bool_), want.astype(np.bool_))
        else:
            # two ulps of a half type, as onnx's runner allows bfloat16 (the
            # reference rounds every step to the half type, harp's kernels do not)
            r = max(rtol, 2**-6) if want.dtype.name == "bfloat16" else max(rtol, 2**-9) if want.dtype == np.float16 else rtol
            g64, w64 = got.astype(np.float64), want.astype(np.float64)
            ok = np.allclose(g64, w64, rtol=r, atol=atol, equal_nan=True)
        if not ok:
            diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
            err = np.nanmax(diff) if got.size and not np.isnan(diff).all() else float("nan")
            return "WRONG", f"output {o.name}: max abs err {err:.3g} (rtol {rtol}, atol {atol})", dt
    return "pass", "", dt


def run_case(c, timeout):
    m = onnx.load(c.model, load_external_data=False)
    return run_model(c.model, m, c.inputs, c.outputs, c.rtol, c.atol, c.backend, timeout)


def reason(msg):
    """A short reason for a refusal: the kind, the op and the message's gist."""
    kind = re.search(r"error\[(\w+)\]", msg).group(1)
    op = re.search(r'node \d+ "[^"]*" \((\w+)\)', msg)
    if not op:  # a model-level refusal (an input's type, a domain)
        return f"{kind}: " + re.sub(r'"[^"]*"', '"..."', msg.split(".onnx: ", 1)[-1])[:70]
    op = op.group(1)
    if kind == "UnknownOp":
        return f"UnknownOp {op}"
    gist = msg.split(f"({op}): ", 1)[-1]
    gist = re.sub(r"(?<![\w.])-?\d+(\.\d+)?(?![\w-])", "N", gist)[:70]
    return f"Unsupported {op}: {gist}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--all", action="store_true", help="every light model (slow), not only " + ", ".join(CI_LIGHT))
    ap.add_argument("--backend", default="interp", help="backend of the small cases (default interp)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=300, help="seconds per case")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every case")
    ap.add_argument("names", nargs="*", help="only cases whose name contains one of these")
    args = ap.parse_args()
    S = ht.Suite("onnx_conformance")
    todo = cases(args)
    if not args.names:
        S.check("the test data has every suite", {c.suite for c in todo} == set(SUITES), sorted({c.suite for c in todo}))
    t0 = time.time()
    with ThreadPoolExecutor(max_workers=args.jobs) as ex:
        results = list(ex.map(lambda c: (c, *run_case(c, args.timeout)), todo))
    verdicts, refusals, slow = collections.Counter(), collections.Counter(), []
    for c, v, detail, dt in results:
        verdicts[(c.suite, v)] += 1
        if v == "refused":
            refusals[reason(detail)] += 1
        if args.verbose or v not in ("pass", "refused"):
            print(f"{v:7s} {c.suite}/{c.name} ({c.backend}, {dt:.1f} s) {detail}", flush=True)
        S.check(f"{c.suite}/{c.name} ({c.backend}) matches or is refused", v in ("pass", "refused"), detail)
        slow.append((dt, c.name))
    n = len(results)
    npass = sum(v for (s, k), v in verdicts.items() if k == "pass")
    nref = sum(v for (s, k), v in verdicts.items() if k == "refused")
    print(f"conformance: {npass} of {n} cases pass, {nref} refused, {n - npass - nref} fail ({time.time() - t0:.0f} s)")
    if not args.names and not args.all and args.backend == "interp":
        S.check(f"at least {MIN_PASS_CI} cases pass", npass >= MIN_PASS_CI, f"{npass} pass")
    for suite in SUITES:
        print(f"  {suite}: " + ", ".join(f"{k} {verdicts[(suite, k)]}" for k in VERDICTS if verdicts[(suite, k)]))
    print("refused:")
    for r, k in sorted(refusals.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {k:3d}  {r}")
    print("slowest: " + ", ".join(f"{nm} {dt:.1f} s" for dt, nm in sorted(slow, reverse=True)[:5]))
    S.close()


if __name__ == "__main__":
    main()
