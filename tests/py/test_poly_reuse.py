"""Access relations reused across same-shaped blocks (src/poly/acc_cache.c):
the Poly-View and the regions a model gets are the same, byte for byte, as
with every relation built afresh (knob no_poly_reuse=1), on a model that
repeats its layers (padded convolutions, a constant pad of another value,
residual adds) and on one with an unbound size (not reused: parameters);
and the reuse has something to reuse (repeated relations in the dump)."""
import json
import os
import re
import subprocess
import tempfile

import numpy as np

from harp_test import HARP, Suite
from onnx_models import init, mk, model, vi

s = Suite("poly_reuse")
rng = np.random.default_rng(5)


def repeated(C=8, HW=12, blocks=3, batch=1):
    """blocks x (conv 3x3 pad 1 -> relu -> conv 3x3 pad 1 -> + residual),
    then constant pads of 0.5 and 0 multiplied, a max pool and a relu (y), and a relu and
    global average pool (g)."""
    nodes, inits, x = [], [], "x"
    for b in range(blocks):
        for k in range(2):
            w, bias = f"w{b}_{k}", f"b{b}_{k}"
            inits += [init(w, rng.standard_normal((C, C, 3, 3)).astype(np.float32) * 0.2),
                      init(bias, rng.standard_normal(C).astype(np.float32))]
            nodes.append(mk("Conv", [x if k == 0 else f"r{b}", w, bias], [f"c{b}_{k}"], pads=[1, 1, 1, 1]))
            if k == 0:
                nodes.append(mk("Relu", [f"c{b}_0"], [f"r{b}"]))
        nodes.append(mk("Add", [f"c{b}_1", x], [f"s{b}"]))
        x = f"s{b}"
    inits.append(init("pads", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)))
    inits.append(init("half", np.array(0.5, np.float32)))
    inits.append(init("zero", np.array(0.0, np.float32)))
    nodes.append(mk("Pad", [x, "pads", "half"], ["p"], mode="constant"))
    nodes.append(mk("Pad", [x, "pads", "zero"], ["p0"], mode="constant"))  # the same pieces, another fill
    nodes.append(mk("Mul", ["p", "p0"], ["pp"]))
    nodes.append(mk("MaxPool", ["pp"], ["m"], kernel_shape=[2, 2], strides=[2, 2]))
    nodes.append(mk("Relu", ["m"], ["y"]))  # elementwise as the adds, at another size
    nodes.append(mk("Relu", [x], ["t"]))
    nodes.append(mk("GlobalAveragePool", ["t"], ["g"]))  # a reduction over the adds' domain
    return model(nodes, [vi("x", [batch, C, HW, HW])], [vi("y", None), vi("g", None)], inits)


def dump(path, reuse, names="poly_view,region"):
    d = tempfile.mkdtemp(prefix="harp_reuse_")
    args = [HARP, "dump", path, "--dump", names, "--dump-dir", d, "--knob", f"no_poly_reuse={0 if reuse else 1}"]
    p = subprocess.run(args, capture_output=True, text=True, timeout=120)
    return p, d


def read(d, name):
    with open(os.path.join(d, name)) as f:
        return f.read()


def shapes_repeated(pv_text):
    """How many access relations equal an earlier one once block and
    tensor names are taken out."""
    pv = json.loads(pv_text)["poly_view"]
    seen, n = set(), 0
    for b in pv["blocks"]:
        for a in b.get("accesses", []):
            m = a.get("map")
            if not m:
                continue
            key = re.sub(r"[A-Za-z_][A-Za-z0-9_]*\[", "T[", m)
            n += key in seen
            seen.add(key)
    return n


d0 = tempfile.mkdtemp()
path = os.path.join(d0, "rep.onnx")
import onnx  # noqa: E402

onnx.save(repeated(), path)
on, d_on = dump(path, True)
off, d_off = dump(path, False)
s.check("dump with reuse runs", on.returncode == 0, on.stderr)
s.check("dump without reuse runs", off.returncode == 0, off.stderr)
if on.returncode == 0 and off.returncode == 0:
    for name in ("poly_view.json", "region.json"):
        s.check(f"{name}: the same with and without reuse", read(d_on, name) == read(d_off, name), name)
    n = shapes_repeated(read(d_on, "poly_view.json"))
    s.check("the model repeats access relations (something reused)", n >= 10, n)

# an unbound batch: blocks have parameters, nothing is reused, same dump
path2 = os.path.join(d0, "sym.onnx")
onnx.save(repeated(blocks=2, batch="N"), path2)
on, d_on = dump(path2, True, "poly_view")
off, d_off = dump(path2, False, "poly_view")
s.check("symbolic dump runs", on.returncode == 0 and off.returncode == 0, on.stderr + off.stderr)
if on.returncode == 0 and off.returncode == 0:
    s.check("symbolic poly_view: the same", read(d_on, "poly_view.json") == read(d_off, "poly_view.json"))
s.close()
