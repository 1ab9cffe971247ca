"""The CLI's .harp pieces: defaults and their overrides, harp decompile,
harp viz (DOT for every stage; SVG through Graphviz when it is installed),
--dump frontend."""
import json
import os
import shutil
import subprocess
import tempfile

import numpy as np

from harp_test import HARP, SRC, Suite, compiled_only, run

compiled_only()  # the cpu rows (a gather of views) check the compiled C, not tier 0 (harp_test.compiled_only)
s = Suite("fe_cli")
ex = lambda name: os.path.join(SRC, "examples", name)
tmp = tempfile.mkdtemp(prefix="harp_fe_cli_")


def harp(*args):
    return subprocess.run([HARP, *args], capture_output=True, text=True, timeout=120)


# graph<B=4> defaults apply when nothing binds B; --sym and inputs override them
p, d = run(ex("mlp.harp"), extra=["--random-inputs"])
s.check("defaults", p.returncode == 0 and np.load(f"{d}/y.npy").shape == (4, 10), p.stderr)
p, d = run(ex("mlp.harp"), syms=["B=7"], extra=["--random-inputs"])
s.check("--sym overrides a default", p.returncode == 0 and np.load(f"{d}/y.npy").shape == (7, 10), p.stderr)
p, d = run(ex("mlp.harp"), {"x": np.zeros((2, 64), np.float32)}, extra=["--random-inputs"])
s.check("an input overrides a default", p.returncode == 0 and np.load(f"{d}/y.npy").shape == (2, 10), p.stderr)
p, _ = run(ex("mlp.harp"), {"x": np.zeros((2, 63), np.float32)}, extra=["--random-inputs"])
s.check("a wrong input shape is an InputMismatch", p.returncode == 1 and "InputMismatch" in p.stderr, p.stderr)

# a dimension that is an expression (stride-2 conv, then a flatten to it): lowered with the bindings
prog = os.path.join(tmp, "strided.harp")
with open(prog, "w") as f:
    f.write("graph<H=8> main(x: f32[1, 1, H, H], w: f32[2, 1, 3, 3]) -> (y: f32[2, (H + 1)/2, (H + 1)/2]) {\n"
            "  return reshape(conv2d(x, w, stride=2, pad=1), [2, (H + 1)/2, (H + 1)/2])\n}\n")
p, d = run(prog, {"x": np.ones((1, 1, 7, 7), np.float32), "w": np.ones((2, 1, 3, 3), np.float32)})
s.check("expression dims with input bindings", p.returncode == 0 and np.load(f"{d}/y.npy").shape == (2, 4, 4), p.stderr)
if p.returncode == 0:
    s.check("strided conv values", np.load(f"{d}/y.npy")[0, 1, 1] == 9.0)

# decompile: to stdout and to a file
q = harp("decompile", ex("transformer_block.harp"))
s.check("decompile", q.returncode == 0 and q.stdout.count("graph") == 3 and "attention(" in q.stdout, q.stderr)
out = os.path.join(tmp, "d.harp")
q = harp("decompile", ex("cnn.harp"), "-o", out)
s.check("decompile -o", q.returncode == 0 and open(out).read().startswith("graph"), q.stderr)

# viz
for stage in ("frontend", "tiny", "region"):
    out = os.path.join(tmp, f"{stage}.dot")
    q = harp("viz", ex("transformer_block.harp"), "--stage", stage, "-o", out)
    ok = q.returncode == 0 and os.path.exists(out) and open(out).read().startswith("digraph")
    s.check(f"viz {stage}", ok, q.stderr)
    if stage == "region" and ok:  # the formed regions, as many as the generated C has kernels
        dot = open(out).read()
        s.check("viz region draws the formed regions", dot.count("subgraph cluster_") == 11 and "attention" in dot,
                f"{dot.count('subgraph cluster_')} clusters")
q = harp("viz", os.path.join(SRC, "tests", "models", "softmax_rows.json"), "--stage", "region", "-o", os.path.join(tmp, "u.dot"))
s.check("viz region needs every size bound", q.returncode == 1 and "UnboundSymbol" in q.stderr, q.stderr)
q = harp("viz", os.path.join(SRC, "tests", "models", "seed001_gemm.json"), "--stage", "frontend", "-o", os.path.join(tmp, "x.dot"))
s.check("viz frontend needs a .harp model", q.returncode == 1 and "UsageError" in q.stderr, q.stderr)
q = harp("viz", ex("mlp.harp"), "--stage", "frontend", "-o", os.path.join(tmp, "x.pdf"))
s.check("viz refuses an unknown format", q.returncode == 1, q.stderr)
svg = os.path.join(tmp, "f.svg")
q = harp("viz", ex("mlp.harp"), "--stage", "tiny", "-o", svg)
if shutil.which("dot"):
    s.check("viz svg", q.returncode == 0 and "<svg" in open(svg).read(), q.stderr)
else:
    s.check("viz svg without graphviz fails cleanly", q.returncode == 1 and "dot" in q.stderr and not os.path.exists(svg),
            q.stderr)
    s.check("no temporary files left", [f for f in os.listdir(tmp) if "tmp" in f] == [], str(os.listdir(tmp)))

# an output that is a bare literal: the cpu backend had no region writing it (InternalError, exit 2)
prog = os.path.join(tmp, "literal_out.harp")
with open(prog, "w") as f:
    f.write("graph main(x: f32[4]) -> (y: f32[4], z: f32, h: f16) {\n  z = 2.5\n  h = 1.5\n  return x + 1, z, h\n}\n")
for be in ("cpu", "interp"):
    p, d = run(prog, {"x": np.arange(4, dtype=np.float32)}, backend=be)
    ok = p.returncode == 0 and float(np.load(f"{d}/z.npy")) == 2.5 and np.load(f"{d}/h.npy").dtype == np.float16 and \
        float(np.load(f"{d}/h.npy")) == 1.5 and np.array_equal(np.load(f"{d}/y.npy"), np.arange(1, 5, dtype=np.float32))
    s.check(f"a literal output on {be}", ok, p.stderr)

# a gather of a view (a permute of x, an index read through a reshape): the backends gather from
# buffers, so the lowering copies a view operand (the cpu backend refused 'GATHER of a view')
prog = os.path.join(tmp, "gather_view.harp")
with open(prog, "w") as f:
    f.write("graph main(x: f32[4, 6], i: i32[24]) -> (y: f32[6, 4]) {\n"
            "  return gather(permute(x, [1, 0]), reshape(i, [6, 4]), 0)\n}\n")
gx, gi = np.arange(24, dtype=np.float32).reshape(4, 6), np.random.default_rng(3).integers(0, 6, 24).astype(np.int32)
for be in ("cpu", "interp"):
    p, d = run(prog, {"x": gx, "i": gi}, backend=be)
    ok = p.returncode == 0 and np.array_equal(np.load(f"{d}/y.npy"), np.take_along_axis(gx.T, gi.reshape(6, 4), 0))
    s.check(f"a gather of views on {be}", ok, p.stderr)

# --dump frontend
p, d = run(ex("conv_block.harp"), extra=["--random-inputs", "--dump", "frontend,tiny"])
s.check("--dump frontend", p.returncode == 0 and os.path.exists(f"{d}/frontend.json"), p.stderr)
if p.returncode == 0:
    j = json.load(open(f"{d}/frontend.json"))
    ops = [n["op"] for n in j["graphs"][0]["nodes"]]
    s.check("frontend.json holds the graph", "conv2d" in ops and "silu" in ops, str(ops))
    conv = [n for n in j["graphs"][0]["nodes"] if n["op"] == "conv2d"][0]
    s.check("frontend.json attrs", conv["attrs"]["pad"] == [1, 1, 1, 1] and conv["shape"] == ["N", 16, "H", "W"], str(conv))
p, _ = run(os.path.join(SRC, "tests", "models", "seed001_gemm.json"), extra=["--random-inputs", "--dump", "frontend"],
           syms=["M=2", "K=2", "N=2"])
s.check("--dump frontend of a JSON model is a usage error", p.returncode == 1 and "frontend" in p.stderr, p.stderr)
s.close()
