#!/usr/bin/env python3
"""test_shapeset_layout.py — a ShapeSet object lays its arena out per
binding (src/backend/c/rc_layout.c; docs/architecture.md, "One object per
ShapeSet"): at a binding inside the box its arena is the one the
exactly-specialised object of that binding lays out (fn_place's best fit
at the binding's sizes), not the upper corner's offsets with a binding's
few bytes in each slot.  Per model: one `harp compile --shapeset` package,
its main run at bindings from the lower corner to the upper (each prints
"arena: N bytes"), against `harp compile --sym` of each binding (the first
line of its model.c names its arena), built with a plain C compiler; both
mains run on the specialised package's inputs and weights (weights.bin:
the same layout, the parameters do not move with the symbol) and their
outputs must agree, which they cannot where two live buffers of the
binding overlap."""
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from harp_test import HARP, MODELS, Suite, close  # noqa: E402

s = Suite("shapeset_layout")
os.environ.setdefault("HARP_CPU_CALIB", "off")
ATT = ["B=1", "H=2", "N=24", "D=16", "Dv=16"]
# model, fixed symbols, the box's symbol, lo, hi, bindings (lower corner, between, upper corner)
CASES = [
    ("gemm_chain4.json", ["D=16"], "M", 2, 40, [2, 13, 40]),
    ("conv3x3_bias_silu.json", ["N=1", "C=8", "W=12", "O=16"], "H", 4, 20, [11]),
    ("attention_full.json", ATT, "M", 2, 40, [17]),
]


def package(model, syms, box=None):
    """`harp compile` of model into a new folder, main built (-O1): (folder, error or None)."""
    d = tempfile.mkdtemp()
    args = [HARP, "compile", os.path.join(MODELS, model), "--target", "cpu", "-o", d, "--seed", "3"]
    for x in syms:
        args += ["--sym", x]
    if box:
        args += ["--shapeset", box]
    p = subprocess.run(args, capture_output=True, text=True, timeout=600)
    if p.returncode:
        return d, p.stderr[-400:]
    b = subprocess.run(["make", "-C", d, "CFLAGS=-O1", "model_main"], capture_output=True, text=True, timeout=600)
    return d, (b.stderr[-400:] if b.returncode else None)


def run_main(pkg, data):
    """pkg's main on the example inputs and the weights of package data: (process, its outputs {name: array})."""
    d = tempfile.mkdtemp()
    os.symlink(os.path.join(data, "inputs"), os.path.join(d, "inputs"))
    os.symlink(os.path.join(data, "weights.bin"), os.path.join(d, "weights.bin"))
    p = subprocess.run([os.path.join(pkg, "model_main"), d], capture_output=True, text=True, timeout=120)
    od = os.path.join(d, "outputs")
    outs = {f[:-4]: np.load(os.path.join(od, f)) for f in sorted(os.listdir(od))} if os.path.isdir(od) else {}
    return p, outs


def arena_of(pkg):
    """The arena bytes model.c's first line names (a specialised package's)."""
    with open(os.path.join(pkg, "model.c")) as f:
        m = re.search(r"arena (\d+) bytes", f.readline())
    return int(m.group(1)) if m else None


for model, fixed, sym, lo, hi, binds in CASES:
    gen, err = package(model, fixed, f"{sym}={lo}..{hi}")
    s.check(f"{model}: the ShapeSet package builds", err is None, err)
    if err:
        continue
    for v in binds:
        spec, err = package(model, fixed + [f"{sym}={v}"])
        s.check(f"{model} {sym}={v}: the specialised package builds", err is None, err)
        if err:
            continue
        s.check(f"{model} {sym}={v}: the same weights' layout",
                os.path.getsize(os.path.join(gen, "weights.bin")) == os.path.getsize(os.path.join(spec, "weights.bin")))
        pg, og = run_main(gen, spec)
        ps, os_ = run_main(spec, spec)
        s.check(f"{model} {sym}={v}: both run", pg.returncode == 0 and ps.returncode == 0, pg.stderr[-300:] + ps.stderr[-300:])
        m = re.search(r"arena: (\d+) bytes \(the upper corner's: (\d+)\)", pg.stdout)
        want = arena_of(spec)
        s.check(f"{model} {sym}={v}: the arena is the specialised object's ({want} bytes)",
                m is not None and want is not None and int(m.group(1)) == want, pg.stdout[-200:])
        if v == hi and m:
            s.check(f"{model} {sym}={v}: the upper corner's arena", int(m.group(1)) == int(m.group(2)), pg.stdout[-200:])
        s.check(f"{model} {sym}={v}: the same outputs", og.keys() == os_.keys() and og, f"{sorted(og)} {sorted(os_)}")
        for k in og.keys() & os_.keys():
            s.check(f"{model} {sym}={v}: {k} as the specialised object's", *close(og[k], os_[k], 1e-5, 1e-5))
s.close()
