#!/usr/bin/env python3
"""test_python_torch.py — torch.compile(model, backend="harp"): the
results against eager PyTorch for a small MLP, with dynamic=True over two
batch sizes, and an eager fallback for a graph harp refuses.  Skipped
cleanly when torch is not installed (it is not in install-deps)."""
import sys

from harp_py import Suite, np

try:
    import torch
except ImportError:
    print("torch not installed: skipped")
    sys.exit(77)
from harp.torch_backend import harp_backend, stats  # noqa: E402

s = Suite("python_torch")
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).eval()
try:
    compiled = torch.compile(model, backend="harp", dynamic=True)
except Exception:  # noqa: BLE001 (the entry point not installed: the function itself)
    compiled = torch.compile(model, backend=harp_backend, dynamic=True)
for batch in (3, 5):
    x = torch.randn(batch, 16)
    with torch.no_grad():
        got, want = compiled(x), model(x)
    s.check(f"MLP batch {batch} = eager (dynamic=True)", np.allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-4))
# a graph the export (so harp) refuses runs eagerly, with the same result
class Inv(torch.nn.Module):
    def forward(self, x):
        return torch.linalg.inv(x) + 1


gm = torch.fx.symbolic_trace(Inv())
a = torch.randn(3, 3) + 3 * torch.eye(3)
before = stats["eager_graphs"]
fn = harp_backend(gm, [a])
s.check("a refused graph falls back to eager", stats["eager_graphs"] == before + 1 and torch.allclose(fn(a), Inv()(a)))
print("backend stats:", stats)
s.check("harp ran the graphs (not the eager fallback)", stats["graphs"] >= 1 and stats["runs"] >= 2, str(stats))
s.close()
