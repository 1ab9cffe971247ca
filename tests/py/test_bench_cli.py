"""`harp bench` on the CPU: the JSON summary, --profile's per-kernel table
(every kernel timed alone and in its place in whole runs, slowest first, shares summing to 1, kinds named),
its text form, --dump (c, gpu, plan), and the usage errors (--profile on the
interpreter, --dump c off the cpu backend, --repeat 0).  The CUDA form: test_cuda_session (on the fake libcuda)."""
import json
import os
import subprocess
import tempfile

from harp_test import HARP, SRC, Suite

s = Suite("bench_cli")
MLP = os.path.join(SRC, "examples", "mlp.harp")


def harp(*args):
    return subprocess.run([HARP, *args], capture_output=True, text=True, timeout=300)


p = harp("bench", MLP, "--repeat", "3", "--warmup", "1", "--json", "--profile")
s.check("bench --json --profile runs", p.returncode == 0, p.stderr)
if p.returncode == 0:
    j = json.loads(p.stdout)
    s.check("summary keys", all(k in j for k in ("model", "median_ms", "gflops", "compile_ms")), j.keys())
    ks = j.get("kernels", [])
    s.check("one entry per kernel (mlp: 2 GEMM regions at least)", len(ks) >= 2, ks)
    s.check("slowest first", all(ks[i]["median_ms"] >= ks[i + 1]["median_ms"] for i in range(len(ks) - 1)), ks)
    s.check("shares sum to 1", abs(sum(k["share"] for k in ks) - 1) < 1e-3, ks)
    s.check("the GEMMs are named matmul", sum(k["kind"] == "matmul" for k in ks) >= 2, ks)
    s.check("kernels_sum_ms is their sum", abs(j["kernels_sum_ms"] - sum(k["median_ms"] for k in ks)) < 1e-5, j)
    s.check("every kernel timed in its place in the runs too", all(k.get("in_run_ms", 0) > 0 for k in ks), ks)
    s.check("kernels_in_run_sum_ms is their sum",
            abs(j.get("kernels_in_run_sum_ms", -1) - sum(k.get("in_run_ms", 0) for k in ks)) < 1e-5, j)
p = harp("bench", MLP, "--repeat", "2", "--warmup", "0", "--profile")
s.check("bench --profile text table", p.returncode == 0 and "kernel (region)" in p.stdout and "sum" in p.stdout,
        p.stdout + p.stderr)
s.check("... with both columns", "alone ms" in p.stdout and "in run ms" in p.stdout, p.stdout)
p = harp("bench", MLP, "--backend", "interp", "--profile")
s.check("--profile on the interpreter: a usage error", p.returncode == 1 and "error[UsageError]" in p.stderr, p.stderr)
# --dump: what the command builds is written (the C on cpu; gpu.json for the GPU's view), or a usage error
d = tempfile.mkdtemp(prefix="bench_dump_")
p = harp("bench", MLP, "--repeat", "1", "--warmup", "0", "--dump", "c,gpu,plan", "--dump-dir", d)
s.check("bench --dump c,gpu,plan runs", p.returncode == 0, p.stderr)
for f in ("model.c", "gpu.json", "plan.json"):
    s.check(f"... writes {f}", os.path.exists(os.path.join(d, f)) and os.path.getsize(os.path.join(d, f)) > 0, os.listdir(d))
for cmd in (("bench", MLP, "--backend", "interp"), ("run", MLP, "--random-inputs", "--backend", "regions", "--out", d)):
    p = harp(*cmd, "--dump", "c", "--dump-dir", d)
    s.check(f"{cmd[0]} --dump c off the cpu backend: a usage error",
            p.returncode == 1 and "--dump c needs --backend cpu" in p.stderr, p.stderr)
p = harp("bench", MLP, "--repeat", "0")
s.check("--repeat 0: a usage error", p.returncode == 1 and "error[UsageError]" in p.stderr, p.stderr)
s.close()
