"""Bad input never crashes and never leaves output behind: every file of the
malformed corpus, and every misuse of the CLI, exits 1 with a located
'harp: error[Name]' message (under ASan in the sanitizer build)."""
import glob
import os
import subprocess
import tempfile

import numpy as np

from harp_test import HARP, MODELS, SRC, Suite, run, write_model

s = Suite("cli_errors")


def harp(*args):
    return subprocess.run([HARP, *args], capture_output=True, text=True, errors="replace", timeout=120)


def expect_error(what, p, name=None, where=None):
    ok = p.returncode == 1 and p.stderr.startswith("harp: error[")
    if ok and name:
        ok = f"error[{name}]" in p.stderr
    if ok and where:
        ok = where in p.stderr
    s.check(what, ok, f"rc={p.returncode} stderr={p.stderr[:400]!r}")


corpus = sorted(glob.glob(os.path.join(SRC, "tests", "bad", "*.json")))
s.check("corpus has at least 30 files", len(corpus) >= 30, str(len(corpus)))
for path in corpus:
    out = tempfile.mkdtemp(prefix="harp_bad_")
    p = harp("run", path, "--out", out, "--random-inputs", "--sym", "M=2")
    expect_error(os.path.basename(path), p)
    s.check(os.path.basename(path) + " leaves no output", os.listdir(out) == [], str(os.listdir(out)))

# JSON syntax errors carry line:column and a caret
bad = tempfile.mktemp(suffix=".json")
with open(bad, "w") as f:
    f.write('{"uops": [\n  {"id": "x", "uop": "INPUT",,}\n]}\n')
p = harp("run", bad)
expect_error("syntax error located", p, "ParseError", f"{bad}:2:")
s.check("caret shown", "^" in p.stderr, p.stderr)

# node errors carry the node id
p = harp("run", os.path.join(SRC, "tests", "bad", "pad_not_pairs.json"), "--random-inputs")
expect_error("node id in message", p, "InvalidArgument", '(node "r")')

gemm = os.path.join(MODELS, "seed001_gemm.json")
A = np.ones((4, 3), np.float16)
B = np.ones((3, 5), np.float16)
d = tempfile.mkdtemp()
np.save(f"{d}/A.npy", A)
np.save(f"{d}/B.npy", B)
np.save(f"{d}/A32.npy", A.astype(np.float32))
np.save(f"{d}/Bbad.npy", np.ones((4, 5), np.float16))
np.save(f"{d}/A64.npy", A.astype(np.float64))
with open(f"{d}/junk.npy", "w") as f:
    f.write("not numpy")

expect_error("missing model file", harp("run", "/nonexistent/model.json"), "IoError")
expect_error("unknown extension", harp("run", f"{d}/A.npy"), "UsageError")
expect_error("unknown option", harp("run", gemm, "--frobnicate"), "UsageError")
expect_error("unknown command", harp("frobnicate"), "UsageError")
expect_error("missing input", harp("run", gemm, "--input", f"A={d}/A.npy"), "UsageError", "--input B")
expect_error("unknown input name", harp("run", gemm, "--input", f"Z={d}/A.npy"), "UsageError")
expect_error("input file missing", harp("run", gemm, "--input", f"A={d}/nope.npy", "--input", f"B={d}/B.npy"), "IoError")
expect_error("input not npy", harp("run", gemm, "--input", f"A={d}/junk.npy", "--input", f"B={d}/B.npy"), "InputMismatch")
expect_error("input wrong dtype", harp("run", gemm, "--input", f"A={d}/A32.npy", "--input", f"B={d}/B.npy"), "InputMismatch")
expect_error("input float64", harp("run", gemm, "--input", f"A={d}/A64.npy", "--input", f"B={d}/B.npy"), "InputMismatch")
expect_error("input shapes disagree", harp("run", gemm, "--input", f"A={d}/A.npy", "--input", f"B={d}/Bbad.npy"), "InputMismatch")
expect_error("--sym contradicts input", harp("run", gemm, "--sym", "M=7", "--input", f"A={d}/A.npy", "--input", f"B={d}/B.npy"),
             "InputMismatch")
expect_error("bad --sym", harp("run", gemm, "--sym", "M"), "UsageError")
expect_error("bad --sym value", harp("run", gemm, "--sym", "M=-3"), "UsageError")
expect_error("unknown dump", harp("run", gemm, "--random-inputs", "--sym", "M=2", "--sym", "K=2", "--sym", "N=2",
                                  "--dump", "bogus"), "UsageError")
dd = tempfile.mkdtemp(prefix="harp_dumpc_")
p = harp("dump", gemm, "--dump", "tiny,c", "--dump-dir", dd)
expect_error("harp dump --dump c (the C comes from harp run)", p, "UsageError", "harp run MODEL --dump c")
s.check("harp dump --dump c writes nothing", os.listdir(dd) == [], os.listdir(dd))
expect_error("unbound symbol with random inputs", harp("run", gemm, "--random-inputs"), "UnboundSymbol")
expect_error("unknown backend", harp("run", gemm, "--backend", "tpu"), "UsageError")
expect_error("--outputs unknown node", harp("run", gemm, "--random-inputs", "--sym", "M=1", "--sym", "K=1", "--sym", "N=1",
                                           "--outputs", "zz"), "UsageError")

# a run that fails after the first output was computed leaves nothing: the
# out "directory" is a file, so nothing can be written
blocker = tempfile.mktemp()
with open(blocker, "w") as f:
    f.write("x")
p = harp("run", gemm, "--input", f"A={d}/A.npy", "--input", f"B={d}/B.npy", "--out", blocker)
expect_error("output dir is a file", p, "IoError")

# two outputs, the second fails at run time (GATHER index out of range):
# the first must not be written either
m = write_model([
    {"id": "x", "uop": "INPUT", "arg": {"tensor_id": "x", "dtype": "fp32", "shape": [3]}},
    {"id": "i", "uop": "INPUT", "arg": {"tensor_id": "i", "dtype": "i32", "shape": [2]}},
    {"id": "first", "uop": "NEG", "src": ["x"]},
    {"id": "second", "uop": "GATHER", "src": ["x", "i"], "arg": {"axis": 0}},
], ["first", "second"])
out = tempfile.mkdtemp()
p, _ = run(m, {"x": np.ones(3, np.float32), "i": np.array([0, 9], np.int32)}, outdir=out)
expect_error("runtime error", p, "InvalidArgument", "GATHER index 9")
left = [f for f in os.listdir(out) if not f.startswith("in_")]
s.check("no partial outputs", left == [], str(left))

# help works and documents the flags
p = harp("--help")
s.check("harp --help", p.returncode == 0 and "run" in p.stdout, p.stdout)
p = harp("run", "--help")
s.check("harp run --help", p.returncode == 0 and all(f in p.stdout for f in ("--input", "--sym", "--out", "--dump")), p.stdout)
# The JIT adds an assembler option against the JCC erratum on Skylake-class
# hosts; an assembler without it (binutils < 2.34) must not break compiling:
# harp retries without the option.
wrap = os.path.join(tempfile.mkdtemp(prefix="harp_cc_"), "cc")
with open(wrap, "w") as f:
    f.write("#!/bin/sh\nfor a in \"$@\"; do case \"$a\" in -Wa,-mbranches-within-32B-boundaries)\n"
            "  echo \"as: unrecognized option '-mbranches-within-32B-boundaries'\" >&2; exit 1;; esac; done\n"
            "exec \"${REAL_CC:-cc}\" \"$@\"\n")
os.chmod(wrap, 0o755)
env = dict(os.environ, CC=wrap, HARP_CACHE_DIR=tempfile.mkdtemp(prefix="harp_cache_"))
out = tempfile.mkdtemp(prefix="harp_oldas_")
p = subprocess.run([HARP, "run", os.path.join(SRC, "bench", "models", "softmax.harp"), "--random-inputs", "--sym", "R=4",
                    "--sym", "D=8", "--out", out], capture_output=True, text=True, env=env, timeout=300)
s.check("an assembler without the JCC option still compiles the model", p.returncode == 0 and os.path.exists(
    os.path.join(out, "y.npy")), p.stderr[-600:])
s.close()
