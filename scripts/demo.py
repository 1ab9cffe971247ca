"""The demo: seed 000's GEMM + bias + ReLU on random fp16 data, checked
against numpy and timed."""
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

harp = sys.argv[1]
rng = np.random.default_rng(0)
d = tempfile.mkdtemp(prefix="harp_demo_")
M, K, N = 256, 256, 256
A = rng.standard_normal((M, K)).astype(np.float16)
B = rng.standard_normal((K, N)).astype(np.float16)
bias = rng.standard_normal(N).astype(np.float16)
for name, arr in (("A", A), ("B", B), ("bias", bias)):
    np.save(f"{d}/{name}.npy", arr)
cmd = [harp, "run", "tests/models/seed000_gemm_bias_relu.json", "--backend", "cpu", "--out", d,
       "--input", f"A={d}/A.npy", "--input", f"B={d}/B.npy", "--input", f"bias={d}/bias.npy"]
print("$ " + " ".join(cmd))
t0 = time.perf_counter()
p = subprocess.run(cmd, capture_output=True, text=True)
dt = time.perf_counter() - t0
sys.stdout.write(p.stdout)
if p.returncode:
    sys.stderr.write(p.stderr)
    sys.exit(p.returncode)
C = np.load(f"{d}/C2.npy")
ref = np.maximum((A.astype(np.float32) @ B.astype(np.float32)).astype(np.float16).astype(np.float32)
                 + bias.astype(np.float32), 0)
err = np.abs(C.astype(np.float32) - ref.astype(np.float16).astype(np.float32)).max()
print(f"GEMM {M}x{K}x{N} + bias + ReLU (fp16): {dt * 1000:.1f} ms end to end (cpu, incl. compile or cache), "
      f"max |harp - numpy| = {err:.3g}")
print("C2[0, :8] =", np.array2string(C[0, :8].astype(np.float32), precision=3))
