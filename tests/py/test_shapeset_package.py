"""`harp compile MODEL --shapeset NAME=LO..HI -o DIR` (issue 25): one
standalone package for every binding of the box.  A small ONNX CNN with
dynamic H, W (conv 3x3/2 + relu, conv + residual + relu, maxpool 2x2: sizes
(H + 1)/2 and their halves) is compiled once, built with make (a plain C
compiler, no harp), and its main run on inputs of three shapes in the box,
each against onnxruntime; a binding outside the box exits 2 with the reason
before anything runs and writes no output file.  One instance run at three
bindings, smaller, larger, smaller, keeps one arena of the upper corner's
bytes from its first run (every page touched then: a larger binding faults
none in, never a fresh arena: rc_layout.c).  A Tiny IR model that
reshapes x[n] to [n/4, 4] (a derived symbol) runs at three n that divide,
against numpy, and refuses n = 10 (the Reshape's element count) the same
way.  --target sm90 with --shapeset is a usage error."""
import json
import re
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from harp_test import HARP, Suite, close  # noqa: E402

try:
    import onnx
    import onnxruntime as ort
except ImportError:
    print("onnx / onnxruntime not installed (scripts/install-deps.sh)")
    sys.exit(0)
from onnx_models import cnn_s2  # noqa: E402

s = Suite("shapeset_package")
# one instance run at three bindings in turn (model.c included: model_t's fields); its arena, the upper
# corner's bytes taken at the first run, is the same block at every binding after
THREE = r"""
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "model.h"
#include "model.c"
int main(int argc, char **argv) {
  FILE *f = fopen(argv[1], "rb");
  size_t pb = model_params_bytes();
  void *w = malloc(pb);
  if (!f || fread(w, 1, pb, f) != pb) return 3;
  model_t *m = model_init(w, pb);
  long long b[3][2] = {{17, 30}, {41, 37}, {9, 12}};
  for (int i = 0; i < 3 && m; i++) {
    long xs[13] = {4, 1, 3, (long)b[i][0], (long)b[i][1]}, ys[13];
    const long *in[1] = {xs};
    long long syms[2];
    char why[256];
    if (model_bind_inputs(in, syms, why, sizeof why) || model_output_shape_at(syms, 0, ys)) return 4;
    size_t n = 3 * xs[3] * xs[4], ny = (size_t)ys[1] * ys[2] * ys[3] * ys[4];
    float *x = malloc(n * 4), *y = malloc(ny * 4);
    for (size_t k = 0; k < n; k++) x[k] = (float)sin((double)k);
    const void *ins[1] = {x};
    void *outs[1] = {y};
    if (model_run_shape(m, syms, ins, outs)) return 5;
    printf("run %d: arena %p, %zu bytes, needs %zu, upper corner %zu\n", i, (void *)m->arena, m->arena_cap,
           model_required_memory_at(syms), model_required_memory());
    char path[4096];
    snprintf(path, sizeof path, "%s/three%d.bin", argv[2], i);
    FILE *o = fopen(path, "wb");
    fwrite(y, 4, ny, o);
    fclose(o);
    free(x), free(y);
  }
  if (!m) return 6;
  model_free(m);
  return 0;
}
"""
rng = np.random.default_rng(25)
D = tempfile.mkdtemp()
env = dict(os.environ, HARP_CACHE_DIR=os.path.join(D, "cache"))
path = os.path.join(D, "cnn_s2.onnx")
onnx.save(cnn_s2(rng), path)
ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
pkg = os.path.join(D, "pkg")

p = subprocess.run([HARP, "compile", path, "--shapeset", "H=9..41", "--shapeset", "W=9..37", "-o", pkg],
                   capture_output=True, text=True, env=env, timeout=300)
s.check("compile --shapeset", p.returncode == 0, p.stdout[-300:] + p.stderr[-600:])
for f in ["model.c", "model_shapes.c", "model.h", "main.c", "Makefile", "README.md", "weights.bin", "inputs/x.npy",
          "expected/y.npy"]:
    s.check(f"package has {f}", os.path.exists(os.path.join(pkg, f)), f)


def text(f):
    return open(f).read() if os.path.exists(f) else ""


s.check("model.h declares model_run_shape", "model_run_shape" in text(os.path.join(pkg, "model.h")))
s.check("README names the box", "| H | 9 | 41 |" in text(os.path.join(pkg, "README.md")))

b = subprocess.run(["make", "-C", pkg, "model_main"], capture_output=True, text=True, timeout=300)
s.check("make builds model_main", b.returncode == 0, b.stderr[-600:])
main = os.path.join(pkg, "model_main")


def run_at(h, w):
    """main on a fresh folder with x of shape [1, 3, h, w]: (process, x, folder)."""
    d = tempfile.mkdtemp(dir=D)
    os.mkdir(os.path.join(d, "inputs"))
    shutil.copy(os.path.join(pkg, "weights.bin"), d)
    x = rng.standard_normal((1, 3, h, w)).astype(np.float32)
    np.save(os.path.join(d, "inputs", "x.npy"), x)
    return subprocess.run([main, d], capture_output=True, text=True, timeout=120), x, d


if b.returncode == 0:
    # the example inputs: main reproduces expected/
    r = subprocess.run([main, pkg], capture_output=True, text=True, timeout=120)
    s.check("main on the example inputs", r.returncode == 0, r.stderr[-300:])
    if r.returncode == 0:
        s.check("example vs expected/", *close(np.load(os.path.join(pkg, "outputs", "y.npy")),
                                                np.load(os.path.join(pkg, "expected", "y.npy")), 1e-5, 1e-5))
    # three bindings in the box, odd and even sizes, corners included
    for h, w in [(9, 9), (17, 30), (40, 37)]:
        r, x, d = run_at(h, w)
        s.check(f"{h}x{w}: runs", r.returncode == 0, r.stderr[-300:])
        s.check(f"{h}x{w}: prints its binding", f"binding: H={h} W={w}" in r.stdout, r.stdout[-200:])
        if r.returncode == 0:
            want = ref.run(None, {"x": x})[0]
            got = np.load(os.path.join(d, "outputs", "y.npy"))
            s.check(f"{h}x{w}: shape {want.shape}", got.shape == want.shape, str(got.shape))
            if got.shape == want.shape:
                s.check(f"{h}x{w} vs onnxruntime", *close(got, want, 1e-4, 1e-4))
    # the arena at a small binding: less than the upper corner's
    r, x, d = run_at(9, 9)
    m = re.search(r"arena: (\d+) bytes \(the upper corner's: (\d+)\)", r.stdout)
    s.check("9x9: arena below the upper corner's", m and 0 < int(m.group(1)) < int(m.group(2)), r.stdout[-200:])
    # one instance, three bindings, the arena growing and not: numbers as onnxruntime's
    harness = os.path.join(D, "three.c")
    open(harness, "w").write(THREE)
    b3 = subprocess.run(["cc", "-O2", "-o", os.path.join(D, "three"), harness, os.path.join(pkg, "model_shapes.c"), "-I", pkg,
                         "-lm", "-lpthread"], capture_output=True, text=True, timeout=300)
    s.check("three bindings on one instance: builds", b3.returncode == 0, b3.stderr[-400:])
    r = subprocess.run([os.path.join(D, "three"), os.path.join(pkg, "weights.bin"), D], capture_output=True, text=True,
                       timeout=120)
    s.check("three bindings on one instance: runs", r.returncode == 0, r.stdout[-200:] + r.stderr[-200:])
    runs = re.findall(r"run \d: arena (\S+), (\d+) bytes, needs (\d+), upper corner (\d+)", r.stdout)
    s.check("one instance: the first run (17x30) takes the upper corner's bytes, more than it needs",
            len(runs) == 3 and int(runs[0][1]) == int(runs[0][3]) > int(runs[0][2]), r.stdout)
    s.check("one instance: the upper corner (41x37) and 9x12 run in that same arena",
            len(runs) == 3 and len({x[0] for x in runs}) == 1, r.stdout)
    for i, (h, w) in enumerate([(17, 30), (41, 37), (9, 12)]):
        x = np.sin(np.arange(3 * h * w, dtype=np.float64)).astype(np.float32).reshape(1, 3, h, w)
        f = os.path.join(D, f"three{i}.bin")
        want = ref.run(None, {"x": x})[0]
        got = np.fromfile(f, np.float32) if os.path.exists(f) else np.zeros(0, np.float32)
        s.check(f"one instance, {h}x{w}: size", got.size == want.size, f"{got.size} vs {want.size}")
        if got.size == want.size:
            s.check(f"one instance, {h}x{w} vs onnxruntime", *close(got.reshape(want.shape), want, 1e-4, 1e-4))
    # outside the box: the reason, exit status 2, no output file
    for h, w, why in [(45, 20, "H = 45 is outside the compiled ShapeSet (H in 9..41)"),
                      (20, 8, "W = 8 is outside the compiled ShapeSet (W in 9..37)")]:
        r, x, d = run_at(h, w)
        s.check(f"{h}x{w} outside: exit 2", r.returncode == 2, f"rc {r.returncode} {r.stderr[-200:]}")
        s.check(f"{h}x{w} outside: says so", why in r.stderr, r.stderr[-200:])
        s.check(f"{h}x{w} outside: no output", not os.path.exists(os.path.join(d, "outputs")), os.listdir(d))
    # a wrong rank or a fixed dim that differs
    d = tempfile.mkdtemp(dir=D)
    os.mkdir(os.path.join(d, "inputs"))
    shutil.copy(os.path.join(pkg, "weights.bin"), d)
    np.save(os.path.join(d, "inputs", "x.npy"), np.zeros((1, 4, 12, 12), np.float32))
    r = subprocess.run([main, d], capture_output=True, text=True, timeout=120)
    s.check("4 channels: exit 2", r.returncode == 2 and "dim is 4" in r.stderr, f"rc {r.returncode} {r.stderr[-200:]}")
    s.check("4 channels: no output", not os.path.exists(os.path.join(d, "outputs")))

# a Reshape that a binding in the box can break: n = 10 is not 4 * (10 // 4)
RESHAPE = {"derived": {"q": "n floordiv 4"}, "outputs": ["e"], "uops": [
    {"id": "x_in", "uop": "INPUT", "arg": {"tensor_id": "X", "dtype": "fp32", "shape": ["n"]}},
    {"id": "r", "uop": "RESHAPE", "src": ["x_in"], "arg": {"result_shape": ["q", 4]}},
    {"id": "e", "uop": "EXP", "src": ["r"]}]}
jpath, jpkg = os.path.join(D, "rows4.json"), os.path.join(D, "pkg4")
json.dump(RESHAPE, open(jpath, "w"))
p = subprocess.run([HARP, "compile", jpath, "--shapeset", "n=4..64", "-o", jpkg], capture_output=True, text=True, env=env,
                   timeout=300)
s.check("reshape: compile --shapeset", p.returncode == 0, p.stderr[-600:])
b = subprocess.run(["make", "-C", jpkg, "model_main"], capture_output=True, text=True, timeout=300)
s.check("reshape: make", b.returncode == 0, b.stderr[-600:])
for n in [4, 20, 64, 10]:
    d = tempfile.mkdtemp(dir=D)
    os.mkdir(os.path.join(d, "inputs"))
    x = rng.standard_normal(n).astype(np.float32)
    np.save(os.path.join(d, "inputs", "X.npy"), x)
    r = subprocess.run([os.path.join(jpkg, "model_main"), d], capture_output=True, text=True, timeout=120)
    if n % 4:
        s.check(f"reshape n={n}: exit 2", r.returncode == 2, f"rc {r.returncode} {r.stderr[-200:]}")
        s.check(f"reshape n={n}: breaks the model", "breaks the model" in r.stderr, r.stderr[-200:])
        s.check(f"reshape n={n}: no output", not os.path.exists(os.path.join(d, "outputs")))
    else:
        s.check(f"reshape n={n}: runs", r.returncode == 0, r.stderr[-300:])
        if r.returncode == 0:
            s.check(f"reshape n={n} vs numpy", *close(np.load(os.path.join(d, "outputs", "e.npy")), np.exp(x.reshape(-1, 4)),
                                                      1e-5, 1e-6))

p = subprocess.run([HARP, "compile", path, "--target", "sm90", "--shapeset", "H=9..41", "-o", os.path.join(D, "g")],
                   capture_output=True, text=True, env=env, timeout=60)
s.check("sm90 --shapeset: usage error", p.returncode != 0 and "cpu only" in p.stderr, p.stderr[-300:])
s.check("sm90 --shapeset: nothing written", not os.path.exists(os.path.join(D, "g")))
shutil.rmtree(D, ignore_errors=True)
s.close()
