"""Hostile names in an ONNX model (docs/reliability.md, "What harp writes
and runs"): graph inputs, initializers, nodes, intermediate values and
outputs named with quotes, comment closers, preprocessor lines, newlines,
path climbs, shell syntax, printf conversions and very long strings.  Each
model compiles and runs on the interpreter and the CPU backend with the
numpy answer, or is refused with a clear error of harp's own (never the C
compiler choking on a name); the generated C
(--dump c) holds no name unsanitised (every marker the names carry sits
inside an identifier), no file appears outside the output directory, and
the shell syntax in the names ran nothing."""
import os
import re
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import harp_test as ht  # noqa: E402

ht.onnx_or_skip(runtime=False)
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

ht.compiled_only()  # the cpu rows check the C that carries the names, not tier 0 (harp_test.compiled_only)
S = ht.Suite("hostile_names")
D = ht.tempfile.mkdtemp()
CANARY = os.path.join(D, "canary")  # the shell syntax would create it

HOSTILE = {
    "quote": 'x"PWNQ\'',
    "comment": "a*/PWNC/*",
    "include": '#include "PWNI.h"',
    "newline": "n\n#define PWNN 1\n",
    "climb": "../../PWND",
    "shell": f"$(touch {CANARY})`touch {CANARY}`;PWNS",
    "printf": "%s%n%PWNP",
    "backslash": "b\\PWNB\\",
    "long": "z" * 5000 + "PWNL\"*/",
    "unicode": "\u00e9\u202ePWNU",
}
MARK = re.compile(r"PWN[A-Z]")


def build(names):
    """x -> MatMul w -> Add b -> Relu -> y, every name from `names`."""
    x, w, b, m, a, y = names
    r = np.random.default_rng(3)
    wv = r.standard_normal((8, 4)).astype(np.float32)
    bv = r.standard_normal(4).astype(np.float32)
    nodes = [helper.make_node("MatMul", [x, w], [m], name=m + "#node"),
             helper.make_node("Add", [m, b], [a], name="*/" + a),
             helper.make_node("Relu", [a], [y], name=y + "\n")]
    g = helper.make_graph(nodes, "g\"*/", [helper.make_tensor_value_info(x, TensorProto.FLOAT, [2, 8])],
                          [helper.make_tensor_value_info(y, TensorProto.FLOAT, [2, 4])],
                          [numpy_helper.from_array(wv, w), numpy_helper.from_array(bv, b)])
    mo = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    xv = r.standard_normal((2, 8)).astype(np.float32)
    return mo, xv, np.maximum(xv @ wv + bv, 0)


def markers_outside_identifiers(text):
    """Markers not inside a C identifier: a name that reached the C raw."""
    bad = []
    for mt in MARK.finditer(text):
        before = text[mt.start() - 1] if mt.start() else " "
        if not (before.isalnum() or before == "_"):
            bad.append(text[max(0, mt.start() - 30):mt.end() + 10])
    return bad


def files_under(top):
    return {os.path.join(d, f) for d, _, fs in os.walk(top) for f in fs}


def case(kind, name):
    names = [name + s for s in ("_x", "_w", "_b", "_m", "_a", "_y")]
    mo, xv, want = build(names)
    sub = os.path.join(D, kind, "deep", "deeper")
    os.makedirs(sub)
    path = os.path.join(sub, "model.onnx")
    onnx.save(mo, path)
    np.save(os.path.join(sub, "x.npy"), xv)
    before = files_under(D)
    for backend in ("interp", "cpu"):
        out = os.path.join(sub, "out-" + backend)
        args = [ht.HARP, "run", path, "--backend", backend, "--input", f"{names[0]}=" + os.path.join(sub, "x.npy"),
                "--out", out]
        if backend == "cpu":
            args += ["--dump", "c", "--dump-dir", out]
        p = subprocess.run(args, capture_output=True, text=True, errors="replace")
        err = p.stderr
        if p.returncode != 0:  # a refusal must be clean: harp's own error (not the C compiler's), no output
            S.check(f"{kind} {backend}: a clean refusal", p.returncode == 1 and "error[" in err and
                    "C compiler" not in err and not os.path.exists(out), err[-300:])
            continue
        npys = [f for f in os.listdir(out) if f.endswith(".npy")]
        S.check(f"{kind} {backend}: one output file with a safe name", len(npys) == 1 and
                re.fullmatch(r"[A-Za-z0-9_]+\.npy", npys[0]) is not None, npys)
        if len(npys) == 1:
            S.check(f"{kind} {backend}: numpy's answer", ht.close(np.load(os.path.join(out, npys[0])), want),
                    kind)
        if backend == "cpu":
            with open(os.path.join(out, "model.c"), errors="replace") as f:
                c = f.read()
            bad = markers_outside_identifiers(c)
            S.check(f"{kind}: no name reaches the C unsanitised", not bad, bad[:3])
    new = files_under(D) - before
    outside = [f for f in new if not f.startswith(os.path.join(sub, "out-"))]
    S.check(f"{kind}: nothing written outside the output directories", not outside, outside[:3])
    S.check(f"{kind}: no shell ran", not os.path.exists(CANARY))


for k, n in HOSTILE.items():
    case(k, n)
S.close()
