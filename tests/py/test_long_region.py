"""A region longer than the generic loop nest's old fixed statement list
(3 x 64): a chain of 230 adds over weights fuses into one region, which the
map template declines (too many ops), and its loop nest must still compute
every add and store y.  Before the list was sized by the region, statements
past the 192nd were dropped and y was never written."""
import numpy as np

from harp_test import Suite, close, run_cpu_and_interp

s = Suite("long_region")
K = 230
rng = np.random.default_rng(5)
x = rng.standard_normal((4, 8)).astype(np.float32)
ws = {f"w{i}": rng.standard_normal((4, 8)).astype(np.float32) for i in range(K)}
sig = ", ".join(["x: f32[4, 8]"] + [f"{k}: f32[4, 8]" for k in ws])
body = "\n".join(f"    a{i} = {'x' if i == 0 else f'a{i - 1}'} + w{i}" for i in range(K))
text = f"graph main({sig}) -> (y: f32[4, 8]) {{\n{body}\n    y = a{K - 1} * 0.5\n    return y\n}}\n"
want = (x.astype(np.float64) + sum(w.astype(np.float64) for w in ws.values())) * 0.5
got = run_cpu_and_interp(s, f"chain of {K} adds", text, {"x": x, **ws}, params=ws.keys())
if got:
    c, d, e = got
    s.check("one kernel on the generic loops", c.count("generic loops: the template declined") == 1, "")
    for where, out in (("cpu", d), ("interp", e)):
        ok, msg = close(np.load(f"{out}/y.npy"), want, rtol=1e-4, atol=1e-3)
        s.check(f"{where} matches numpy", ok, msg)
s.close()
