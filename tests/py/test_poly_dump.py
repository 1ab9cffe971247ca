"""`harp dump --dump indexbook,poly_view` and `harp run --dump ...` on the seed
examples: the files appear, have the seed 000 §12.2/§12.3 shapes, and carry
the contraction patterns the acceptance criteria name."""
import json
import os
import subprocess
import tempfile

import numpy as np

from harp_test import HARP, MODELS, Suite, run

s = Suite("poly_dump")


def dump(model, syms=(), names="indexbook,poly_view"):
    d = tempfile.mkdtemp(prefix="harp_pv_")
    args = [HARP, "dump", os.path.join(MODELS, model), "--dump", names, "--dump-dir", d]
    for x in syms:
        args += ["--sym", x]
    p = subprocess.run(args, capture_output=True, text=True, timeout=120)
    return p, d


def load(d, name):
    with open(os.path.join(d, name)) as f:
        return json.load(f)


def blocks(pv):
    return {b["node"]: b for b in pv["poly_view"]["blocks"]}


# seed 001 GEMM, symbolic: one contraction_pattern, matmul, K reduced
p, d = dump("seed001_gemm.json")
s.check("gemm dump runs", p.returncode == 0, p.stderr)
if p.returncode == 0:
    pv, ib = load(d, "poly_view.json"), load(d, "indexbook.json")
    cons = [b for b in pv["poly_view"]["blocks"] if b["kind"] == "contraction_pattern"]
    s.check("gemm: one contraction block", len(cons) == 1, [b["kind"] for b in pv["poly_view"]["blocks"]])
    if cons:
        a = cons[0]["attrs"]
        s.check("gemm: matmul", a["pattern"] == "matmul", a)
        s.check("gemm: K is the reduce axis", [a["axis_sizes"][r] for r in a["reduce_idx"]] == ["K"], a)
        s.check("gemm: lhs/rhs", a["lhs_idx"] == ["i0", "r0"] and a["rhs_idx"] == ["r0", "i1"], a)
        s.check("gemm: isl domain", cons[0]["domain_isl"].startswith("[K, M, N] -> { n8[i0, i1, r0] :"), cons[0]["domain_isl"])
    s.check("gemm: params", pv["poly_view"]["params"] == ["K", "M", "N"], pv["poly_view"]["params"])
    s.check("indexbook: values", set(ib["indexbook"]["values"]) == {f"n{k}" for k in range(10)}, list(ib["indexbook"]["values"]))
    s.check("indexbook: reduce_axes", len(ib["indexbook"]["values"]["n8"]["reduce_axes"]) == 1)

# seed 001 conv, stride 2: pattern conv with offsets on both spatial axes
conv = ["N=2", "Cin_total=4", "H=8", "W=8", "Cout=8", "Cin=4", "Kh=3", "Kw=3", "pt=1", "pb=1", "pl=1", "pr=1",
        "Sh=2", "Sw=2", "Dh=1", "Dw=1", "G=1", "Rcout=8", "Oy=4", "Ox=4"]
p, d = dump("seed001_conv.json", conv, "poly_view")
s.check("conv dump runs", p.returncode == 0, p.stderr)
if p.returncode == 0:
    b = blocks(load(d, "poly_view.json"))["yacc"]
    a = b["attrs"]
    s.check("conv: pattern", b["kind"] == "contraction_pattern" and a["pattern"] == "conv", a)
    off = a["affine_offsets"]
    s.check("conv: offsets on both spatial axes", sorted(off) == ["i3", "i4"], off)
    s.check("conv: stride 2", all(o["stride"] == 2 and o["dilation"] == 1 for o in off.values()), off)
    s.check("conv: padding read", all(o["pad"] == [1, 0] for o in off.values()), off)
    s.check("conv: fill pieces", any("fill" in x for x in b["accesses"]), b["accesses"])

# seed 001 attention (D == N, see docs/poly-view.md): QKᵀ matmul, softmax reduce/ewise
p, d = dump("seed001_attention.json", ["B=2", "H=4", "M=32", "N=64", "D=64"], "poly_view")
s.check("attention dump runs", p.returncode == 0, p.stderr)
if p.returncode == 0:
    bl = blocks(load(d, "poly_view.json"))
    s.check("attention: QKᵀ matmul", bl["n8"]["kind"] == "contraction_pattern" and bl["n8"]["attrs"]["pattern"] == "matmul")
    s.check("attention: batch axes", bl["n8"]["attrs"]["batch_idx"] == ["i0", "i1"], bl["n8"]["attrs"])
    s.check("attention: softmax", [bl[k]["kind"] for k in ("n9", "n10", "n11", "n12", "n13", "n14")]
            == ["reduce", "ewise", "ewise", "ewise", "reduce", "ewise"])

# the corrected attention is a matmul even with every symbol unbound
p, d = dump("attention_qkt.json", (), "poly_view")
s.check("attention_qkt dump runs", p.returncode == 0, p.stderr)
if p.returncode == 0:
    s.check("attention_qkt: matmul", blocks(load(d, "poly_view.json"))["n8"]["attrs"]["pattern"] == "matmul")

# the seed attention's RESHAPE needs D and N bound: an error, no file
p, d = dump("seed001_attention.json", (), "indexbook,poly_view")
s.check("unbound regrouping reshape is refused", p.returncode == 1 and "error[Unsupported]" in p.stderr, p.stderr)
s.check("no partial dump", not os.listdir(d), os.listdir(d))

# harp run --dump writes the same files beside the outputs
rng = np.random.default_rng(2)
A, B = rng.standard_normal((5, 3)).astype(np.float16), rng.standard_normal((3, 4)).astype(np.float16)
p, d = run(os.path.join(MODELS, "seed001_gemm.json"), {"A": A, "B": B}, extra=["--dump", "poly_view,indexbook"])
s.check("run --dump", p.returncode == 0 and os.path.exists(f"{d}/poly_view.json") and os.path.exists(f"{d}/indexbook.json"), p.stderr)
if p.returncode == 0:
    b = blocks(load(d, "poly_view.json"))["n8"]
    s.check("run --dump: bound sizes", b["domain_isl"] == "{ n8[i0, i1, r0] : 0 <= i0 <= 4 and 0 <= i1 <= 3 and 0 <= r0 <= 2 }",
            b["domain_isl"])

s.close()
