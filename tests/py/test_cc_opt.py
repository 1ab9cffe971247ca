"""test_cc_opt.py — the knob cc_opt (HARP_CC_OPT): it replaces the -O level
of harp's own compiler flags and nothing else.  A wrapper compiler logs
every command line and a hash of the source it compiles; a small softmax
model is built by `harp run` (this CPU's flags) and `harp compile` (a
package's portable flags) at the default and at cc_opt=1.  Checked: the
default is -O3; cc_opt=1 gives -O1 with every other option the same and
the same generated C; a package never gets -march=native; cflags set by the
user wins over cc_opt; a level outside 0-3 is a UsageError; the outputs at
both levels equal numpy's softmax.

Needs: harp_test (HARP, run, Suite), numpy, a C compiler.  Gives: the test."""
import hashlib
import os
import subprocess
import tempfile

import numpy as np

from harp_test import HARP, SRC, Suite, close, compiled_only, run
compiled_only()  # the object built at each cc_opt, not tier 0's (harp_test.py)

s = Suite("cc_opt")
MODEL = os.path.join(SRC, "bench", "models", "softmax.harp")
D = tempfile.mkdtemp(prefix="harp_ccopt_")
LOG = os.path.join(D, "cc.log")
WRAP = os.path.join(D, "cc")
with open(WRAP, "w") as f:  # one line per compiler run: its arguments, then the .c it read
    f.write('#!/bin/sh\nprintf "%s\\n" "$*" >>"$CC_LOG"\nfor a in "$@"; do case "$a" in *.c) cat "$a" >>"$CC_LOG.src";; esac; done\n'
            'exec cc "$@"\n')
os.chmod(WRAP, 0o755)
X = np.random.default_rng(5).standard_normal((4, 8)).astype(np.float32)
WANT = np.exp(X - X.max(1, keepdims=True)) / np.exp(X - X.max(1, keepdims=True)).sum(1, keepdims=True)


def build(tag, cmd, knobs=(), env_extra=None):
    """Run `harp cmd` on MODEL in a fresh cache with the wrapper as CC: (the
    process, its outputs' folder, the options of each compiler run, the sha256
    of the sources it compiled)."""
    for f in (LOG, LOG + ".src"):
        if os.path.exists(f):
            os.remove(f)
    env = {k: v for k, v in os.environ.items() if k not in ("HARP_CFLAGS", "HARP_CC_OPT")}
    env.update(CC=WRAP, CC_LOG=LOG, HARP_CACHE_DIR=tempfile.mkdtemp(dir=D), **(env_extra or {}))
    out = tempfile.mkdtemp(dir=D)
    extra = [a for k in knobs for a in ("--knob", k)]
    if cmd == "run":
        np.save(os.path.join(D, "x.npy"), X)
        args = [HARP, "run", MODEL, "--sym", "R=4", "--sym", "D=8", "--input", f"x={D}/x.npy", "--out", out, "--backend", "cpu"]
    else:
        args = [HARP, "compile", MODEL, "--target", "cpu", "--sym", "R=4", "--sym", "D=8", "-o", out]
    p = subprocess.run(args + extra, capture_output=True, text=True, env=env, timeout=300)
    s.check(f"{tag}: runs", p.returncode == 0, p.stderr[-600:])
    lines = open(LOG).read().splitlines() if os.path.exists(LOG) else []
    opts = [sorted(a for a in line.split() if a.startswith("-") and a != "-o") for line in lines]
    src = hashlib.sha256(open(LOG + ".src", "rb").read()).hexdigest() if os.path.exists(LOG + ".src") else None
    return p, out, opts, src


def levels(opts):
    """The -O options of each run in opts."""
    return [[a for a in o if a.startswith("-O")] for o in opts]


def others(opts):
    """Every other option of each run in opts."""
    return [[a for a in o if not a.startswith("-O")] for o in opts]


# harp run: this CPU's flags
p3, out3, o3, c3 = build("run, default", "run")
p1, out1, o1, c1 = build("run, cc_opt=1", "run", ["cc_opt=1"])
s.check("run, default: -O3 with this CPU's ISA", o3 and all(l == ["-O3"] for l in levels(o3))
        and all("-march=native" in o for o in o3), str(o3))
s.check("run, cc_opt=1: -O1", o1 and all(l == ["-O1"] for l in levels(o1)), str(o1))
s.check("run, cc_opt=1: every other option as the default's", others(o1) == others(o3), f"{others(o1)} vs {others(o3)}")
s.check("run, cc_opt=1: the same generated C", c1 is not None and c1 == c3, f"{c1} vs {c3}")
for tag, p, out in (("default", p3, out3), ("cc_opt=1", p1, out1)):
    if not p.returncode:
        ok, why = close(np.load(os.path.join(out, "y.npy")), WANT, rtol=1e-5, atol=1e-6)
        s.check(f"run, {tag}: softmax as numpy's", ok, why)
_, _, oe, _ = build("run, HARP_CC_OPT=1", "run", env_extra={"HARP_CC_OPT": "1"})
s.check("run, HARP_CC_OPT=1 (the variable): -O1", oe and all(l == ["-O1"] for l in levels(oe)), str(oe))

# harp compile: a package's portable flags (its expected/ object)
_, _, q3, d3 = build("compile, default", "compile")
_, _, q1, d1 = build("compile, cc_opt=1", "compile", ["cc_opt=1"])
s.check("compile, default: -O3, any x86-64", q3 and all(l == ["-O3"] for l in levels(q3))
        and not any(a.startswith("-march") for o in q3 for a in o), str(q3))
s.check("compile, cc_opt=1: -O1, the rest as the default's", q1 and all(l == ["-O1"] for l in levels(q1))
        and others(q1) == others(q3), f"{q1} vs {q3}")
s.check("compile, cc_opt=1: the same generated C", d1 is not None and d1 == d3, f"{d1} vs {d3}")

# the user's cflags are taken as they are
_, _, of, _ = build("run, cflags and cc_opt=1", "run", ["cc_opt=1"], {"HARP_CFLAGS": "-O2 -fno-math-errno"})
s.check("run, cflags -O2 and cc_opt=1: cflags as given", of and all(
    l == ["-O2"] and "-fno-math-errno" in o and "-march=native" not in o for l, o in zip(levels(of), of)), str(of))

for bad in ("4", "-1", "O2"):
    p, _ = run(MODEL, {"x": X}, syms=("R=4", "D=8"), backend="cpu", extra=["--knob", f"cc_opt={bad}"])
    s.check(f"cc_opt={bad}: a UsageError naming the knob", p.returncode == 1 and "error[UsageError]" in p.stderr
            and "cc_opt" in p.stderr, p.stderr[-300:])
s.close()
