"""make demo, part 2: examples/transformer_block.harp (pre-norm block: layernorm,
causal 4-head attention, residual, layernorm, GELU MLP, residual) on random
weights, with the best backend this harp has, checked against numpy, timed."""
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "py"))
from fe_ref import seed, transformer_inputs, transformer_ref  # noqa: E402

harp = sys.argv[1]
model = os.path.join(here, "..", "examples", "transformer_block.harp")
B, S = 4, 128
seed(0)
t = {k: v.astype(np.float32) for k, v in transformer_inputs(B, S).items()}
d = tempfile.mkdtemp(prefix="harp_demo_tf_")
args = []
for name, arr in t.items():
    np.save(f"{d}/{name}.npy", arr)
    args += ["--input", f"{name}={d}/{name}.npy"]

# The best backend available: the first one that runs the model.
for backend in ("cuda", "cpu", "interp"):
    cmd = [harp, "run", model, "--out", d, "--backend", backend] + args
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if p.returncode == 0:
        break
    if "UsageError" not in p.stderr:  # present but failing: say so, use the next one
        why = p.stderr.strip().splitlines()[0] if p.stderr.strip() else f"exit status {p.returncode}"
        print(f"(backend {backend} failed on this model: {why}; falling back)")
print(f"$ harp run examples/transformer_block.harp --backend {backend} --input x=... (13 tensors)")
sys.stdout.write(p.stdout)
if p.returncode:
    sys.stderr.write(p.stderr)
    sys.exit(p.returncode)
y = np.load(f"{d}/y.npy")
ref = transformer_ref({k: v.astype(np.float64) for k, v in t.items()}, False)
err = np.abs(y.astype(np.float64) - ref).max()
print(f"transformer block B={B} S={S} E=64 heads=4 (fp32): max |harp - numpy| = {err:.3g}")
print("y[0, 0, :8] =", np.array2string(y[0, 0, :8], precision=4))
# timing: harp bench compiles once (a cache hit now) and times model runs alone
bench = [harp, "bench", model, "--backend", backend, "--repeat", "10", "--json"] + args
p = subprocess.run(bench, capture_output=True, text=True)
if p.returncode == 0:
    import json
    r = json.loads(p.stdout)
    print(f"$ harp bench examples/transformer_block.harp --backend {backend}: median {r['median_ms']:.2f} ms per run "
          f"({r['gflops']:.1f} GFLOP/s), compile {r['compile_ms']:.0f} ms{' (cache hit)' if r['cache_hit'] else ''}; "
          f"harp run end to end (process, load, compile or cache, run, write): {dt * 1000:.0f} ms")
else:
    sys.stderr.write(p.stderr)
