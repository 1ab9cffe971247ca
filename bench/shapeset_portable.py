#!/usr/bin/env python3
"""shapeset_portable.py — the portable ShapeSet package's ISA variants
(issue 25, `harp compile --shapeset`: every variant reads its sizes at run
time; the AVX2 and scalar ones in the implicit GEMM, cgen_gemm_rt.c, the
AVX-512 and AVX2 ones' 3x3 convs in Winograd where the binding's size pays,
cgen_wino_rt.c)
against a package specialised to the binding (`harp compile --sym`),
variant by variant.

    python3 bench/shapeset_portable.py [--harp build/harp] [--reps 20] [--rounds 5] [--isa scalar,avx2,avx512]

Model: x[1, 32, H, W] -> Conv 3x3 32->32 pad 1 + ReLU -> Conv 1x1 32->64 +
ReLU -> Conv 3x3/2 64->64 pad 1 (ONNX, weights as initializers), the box
H, W in 16..64, timed at 56x56 and 28x40.  Both packages are built by the
same C compiler with the dispatch's CPUID test replaced by the environment
(HP_TEST_ISA, as tests/py/test_shapeset_portable.py does), so each variant
can be forced; a harness runs model_run_shape (ShapeSet) or model_run
(specialised) --reps times after one warm run, and the two packages
alternate for --rounds rounds (min and median of the per-run ms, 2 threads:
the packages' pool).  Prints one line per binding and variant with the ratio
ShapeSet / specialised of the medians."""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "py"))
from onnx_models import init, mk, model, vi  # noqa: E402
import onnx  # noqa: E402

HARNESS = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "model.h"
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e3 + t.tv_nsec * 1e-6; }
int main(int argc, char **argv) { /* WEIGHTS H W REPS: the per-run ms, one a line */
  FILE *f = fopen(argv[1], "rb");
  size_t pb = model_params_bytes();
  void *w = malloc(pb ? pb : 1);
  if (!f || fread(w, 1, pb, f) != pb) return 3;
  model_t *m = model_init(w, pb);
  long H = atol(argv[2]), W = atol(argv[3]);
  int reps = atoi(argv[4]);
  if (!m) return 4;
  size_t nx = (size_t)32 * H * W, ny = (size_t)64 * ((H + 1) / 2) * ((W + 1) / 2);
  float *x = malloc(nx * 4), *y = malloc(ny * 4);
  for (size_t i = 0; i < nx; i++) x[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
  const void *in[1] = {x};
  void *out[1] = {y};
#ifdef SS
  long long syms[8];
  for (int i = 0; i < model_num_symbols(); i++) syms[i] = !strcmp(model_symbol_names[i], "H") ? H : W;
#define RUN() model_run_shape(m, syms, in, out)
#else
#define RUN() model_run(m, in, out)
#endif
  if (RUN()) return 5;
  for (int r = 0; r < reps; r++) {
    double t0 = now();
    if (RUN()) return 5;
    printf("%.4f\n", now() - t0);
  }
  model_free(m);
  return 0;
}
"""
CPU_H = "int hp_test_cpu(const char *feature);\n"
CPU_C = r"""
#include <stdlib.h>
#include <string.h>
int hp_test_cpu(const char *feature) { const char *v = getenv("HP_TEST_ISA"); return v && strstr(v, feature) != NULL; }
"""
ISAS = {"scalar": "", "avx2": "avx2,fma", "avx512": "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma"}


def net(rng):
    w = {"w0": rng.standard_normal((32, 32, 3, 3)) * 0.1, "b0": rng.standard_normal(32) * 0.1,
         "w1": rng.standard_normal((64, 32, 1, 1)) * 0.2, "b1": rng.standard_normal(64) * 0.1,
         "w2": rng.standard_normal((64, 64, 3, 3)) * 0.05}
    nodes = [mk("Conv", ["x", "w0", "b0"], ["c0"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]), mk("Relu", ["c0"], ["h"]),
             mk("Conv", ["h", "w1", "b1"], ["c1"], kernel_shape=[1, 1]), mk("Relu", ["c1"], ["g"]),
             mk("Conv", ["g", "w2"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])]
    return model(nodes, [vi("x", [1, 32, "H", "W"])], [vi("y", None)], [init(k, v.astype(np.float32)) for k, v in w.items()])


def build(d, pkg, ss, exe):
    """The package's model.c (and model_shapes.c) with the harness and the dispatch from the environment."""
    srcs = [os.path.join(pkg, "model.c")] + ([os.path.join(pkg, "model_shapes.c")] if ss else [])
    cmd = ["cc", "-O3", "-fopenmp-simd", "-fno-math-errno", "-D__builtin_cpu_supports(x)=hp_test_cpu(x)", "-include",
           os.path.join(d, "hp_cpu.h"), "-I", pkg, "-o", exe, os.path.join(d, "harness.c"), os.path.join(d, "hp_cpu.c")] + srcs
    if ss:
        cmd.insert(1, "-DSS")
    subprocess.run(cmd + ["-lm", "-lpthread"], check=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--harp", default=os.path.join(HERE, "..", "build", "harp"))
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--isa", default="scalar,avx2,avx512")
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="ssport_")
    for n, t in [("harness.c", HARNESS), ("hp_cpu.h", CPU_H), ("hp_cpu.c", CPU_C)]:
        open(os.path.join(d, n), "w").write(t)
    path = os.path.join(d, "net.onnx")
    onnx.save(net(np.random.default_rng(7)), path)
    env = dict(os.environ, HARP_CACHE_DIR=os.path.join(d, "cache"))
    ss = os.path.join(d, "ss")
    subprocess.run([a.harp, "compile", path, "--shapeset", "H=16..64", "--shapeset", "W=16..64", "-o", ss], check=True, env=env)
    build(d, ss, True, os.path.join(d, "ss_main"))
    for H, W in [(56, 56), (28, 40)]:
        fx = os.path.join(d, f"fix{H}x{W}")
        subprocess.run([a.harp, "compile", path, "--sym", f"H={H}", "--sym", f"W={W}", "-o", fx], check=True, env=env)
        build(d, fx, False, os.path.join(d, f"fix_main{H}x{W}"))
        for isa in a.isa.split(","):
            e = dict(os.environ, HP_TEST_ISA=ISAS[isa])
            t = {"ss": [], "fix": []}
            for _ in range(a.rounds):  # the two packages alternate, round by round
                for k, exe, wts in [("ss", "ss_main", os.path.join(ss, "weights.bin")),
                                    ("fix", f"fix_main{H}x{W}", os.path.join(fx, "weights.bin"))]:
                    r = subprocess.run([os.path.join(d, exe), wts, str(H), str(W), str(a.reps)], capture_output=True, text=True,
                                       env=e, check=True)
                    t[k] += [float(v) for v in r.stdout.split()]
            ms, mf = statistics.median(t["ss"]), statistics.median(t["fix"])
            print(f"{H}x{W} {isa:6s}: ShapeSet min {min(t['ss']):.3f} median {ms:.3f} ms, specialised min {min(t['fix']):.3f} "
                  f"median {mf:.3f} ms, ratio {ms / mf:.2f}", flush=True)


if __name__ == "__main__":
    main()
