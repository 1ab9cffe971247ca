"""On a GPU: every test model through `harp run --backend cuda` (and again
with --graphs) matches the reference interpreter at rtol = atol = 1e-3, for
sm80 and, on Hopper, sm90.  Skips (77) when there is no GPU or driver: the
no-GPU checks are test_cuda_models.py (the simulator) and test_cuda_compile.py."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

import cuda_sim
from harp_test import HARP, Suite, close, run

probe = subprocess.run([HARP, "run", cuda_sim.CASES[0][1], "--random-inputs", "--backend", "cuda", "--out",
                        tempfile.mkdtemp()], capture_output=True, text=True, timeout=600)
if probe.returncode == 1 and "no GPU" in probe.stderr:
    print(f"skipped: {probe.stderr.strip()}")
    sys.exit(77)
s = Suite("cuda_gpu_models")
s.check("probe run", probe.returncode == 0, probe.stderr)
# sm90 units run on Hopper only (sm_90a)
p90 = subprocess.run([HARP, "run", cuda_sim.CASES[0][1], "--random-inputs", "--backend", "cuda", "--target", "sm90", "--out",
                      tempfile.mkdtemp()], capture_output=True, text=True, timeout=600)
targets = ["sm80"] + (["sm90"] if p90.returncode == 0 else [])
print(f"targets: {targets}")
rng = np.random.default_rng(3)
for name, model, syms, want in cuda_sim.CASES:
    p, d = cuda_sim.dump(model, "sm80", syms)
    if p.returncode:
        s.check(f"{name}: dump", False, p.stderr)
        continue
    feeds = cuda_sim.feeds_of(json.load(open(os.path.join(d, "gpu.json")))["gpu"], rng)
    q, e = run(model, feeds, syms, backend="interp")
    for target in targets:
        for graphs in ([], ["--graphs"]):
            what = f"{name} [{target}{' graphs' if graphs else ''}]"
            r, o = run(model, feeds, syms, backend="cuda", extra=["--target", target, *graphs])
            s.check(f"{what}: runs", r.returncode == 0, r.stderr)
            if r.returncode:
                continue
            for f in os.listdir(e):
                if f.endswith(".npy") and not f.startswith("in_"):
                    s.check(f"{what}: {f}", *close(np.load(os.path.join(o, f)), np.load(os.path.join(e, f)).astype(np.float64)))
s.close()
