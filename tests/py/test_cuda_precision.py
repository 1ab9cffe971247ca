"""--precision on the CUDA backend, without a GPU: fp32 models (convolutions,
linear layers, a transformer block with attention, an ONNX Gemm that reads
its weight K-major) dumped for sm80 and sm90 at each precision and run on
the CPU SIMT simulator against the fp32 interpreter.

Each mode must put every contraction on a template computing the way it
says (gpu.json: "precision", each kernel's "math": TF32 mma / wgmma, SIMT
FFMA, fp16 / bf16 MMA), attention fused only as TF32, and stay within its
error bound, max |got - ref| / max |ref| (what docs/cuda.md "Precision"
reports): tf32 2e-3, fp32 1e-5, fp16 2e-3, bf16 1.5e-2 — and strict fp32 must
be well below tf32 (it is not the tensor cores under another name).  The
errors are printed.  Skips (77) without g++."""
import json
import os
import sys
import tempfile
import warnings

import numpy as np

import cuda_sim
from harp_test import MODELS, SRC, Suite, run

BOUND = {"tf32": 2e-3, "fp32": 1e-5, "fp16": 2e-3, "bf16": 1.5e-2}
MATH = {"tf32": "tf32", "fp32": "SIMT", "fp16": "fp16", "bf16": "bf16"}


def gemm_transb_onnx():
    """An ONNX Gemm(transB=1) + bias (torch's Linear on 2-D input), or None without onnx."""
    try:
        import onnx
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        return None
    r = np.random.default_rng(3)
    w = numpy_helper.from_array(r.uniform(-0.3, 0.3, (72, 64)).astype(np.float32), "W")
    b = numpy_helper.from_array(r.uniform(-0.3, 0.3, (72,)).astype(np.float32), "Bias")
    g = helper.make_graph([helper.make_node("Gemm", ["x", "W", "Bias"], ["y"], transB=1)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [40, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [40, 72])], [w, b])
    path = os.path.join(tempfile.mkdtemp(), "gemm_transb.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def matmul_weight_onnx():
    """An ONNX MatMul of a 3-D input by a weight stored [K][N] (how PyTorch
    exports a Linear on 3-D input, and every ONNX MatMul weight) + Add bias;
    or None without onnx.  TF32 wgmma reads K-major operands only, so on sm90
    the weight is packed K-major once, after it goes up."""
    try:
        import onnx
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        return None
    r = np.random.default_rng(5)
    w = numpy_helper.from_array(r.uniform(-0.3, 0.3, (128, 72)).astype(np.float32), "W")
    b = numpy_helper.from_array(r.uniform(-0.3, 0.3, (72,)).astype(np.float32), "Bias")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["t"]), helper.make_node("Add", ["t", "Bias"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 60, 128])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 60, 72])], [w, b])
    path = os.path.join(tempfile.mkdtemp(), "matmul_weight.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def check_packed(s, what, g, once):
    """The sm90 TF32 GEMM reads B packed K-major by a pack launch before it:
    once (into the packed area) for a weight, else every run into scratch."""
    ls = g["launches"]
    gi = [i for i, l in enumerate(ls) if l["kernel"].endswith("_gemm")]
    ok = len(gi) >= 1 and gi[-1] >= 1 and "pack_b" in ls[gi[-1] - 1]["kernel"]
    s.check(f"{what}: a pack launch before the wgmma GEMM", ok, str([l["kernel"] for l in ls]))
    if not ok:
        return
    pk, gm = ls[gi[-1] - 1], ls[gi[-1]]
    space = "packed" if once else "scratch"
    s.check(f"{what}: pack runs {'once' if once else 'every run'}", bool(pk.get("once")) == once, str(pk))
    s.check(f"{what}: B read from the {space} copy", [a["space"] for a in pk["args"]][-1] == space and
            any(a["param"] == "tmB" and a["space"] == space and a.get("byte_offset") == pk["args"][-1].get("byte_offset")
                for a in gm["args"]), str(gm["args"]))
    if once:
        s.check(f"{what}: packed area sized", g["memory"]["packed_bytes"] >= 128 * 72 * 4, str(g["memory"]))


def main():
    warnings.simplefilter("ignore", RuntimeWarning)
    s = Suite("cuda_precision")
    if not cuda_sim.have_gxx():
        print("g++ not found: skipped")
        sys.exit(77)
    rng = np.random.default_rng(29)
    models = [("fp32_block", os.path.join(MODELS, "gpu", "fp32_block.harp"), (), 3),
              ("matmul_nmajor", os.path.join(MODELS, "gpu", "fp32_matmul_nmajor.harp"), (), 1),
              ("transformer", os.path.join(SRC, "examples", "transformer_block.harp"), ("B=1", "S=8"), 6)]
    onnx_model = gemm_transb_onnx()
    if onnx_model:
        models.append(("gemm_transb", onnx_model, (), 1))
    mw = matmul_weight_onnx()
    if mw:
        models.append(("matmul_weight", mw, (), 1))
    errs = {}
    for name, model, syms, ncontract in models:
        want, feeds = None, None
        for prec in ("tf32", "fp32", "fp16", "bf16"):
            for target in ("sm80", "sm90"):
                what = f"{name} --precision {prec} [{target}]"
                p, d = cuda_sim.dump(model, target, syms, extra=("--precision", prec))
                s.check(f"{what}: harp dump", p.returncode == 0, p.stderr)
                if p.returncode:
                    continue
                g = json.load(open(os.path.join(d, "gpu.json")))["gpu"]
                s.check(f"{what}: gpu.json precision", g.get("precision") == prec, str(g.get("precision")))
                contract = [k for k in g["kernels"] if k["kind"] in ("mma_gemm", "mma_conv", "wgmma_gemm", "attention")]
                s.check(f"{what}: contractions on templates", len(contract) >= (ncontract if prec != "tf32" or name != "transformer"
                                                                                  else ncontract - 1),
                        f"{[k['kind'] for k in g['kernels']]}")
                for k in contract:
                    s.check(f"{what}: {k['name']} computes as {prec}", MATH[prec] in k["plan"].get("math", ""),
                            k["plan"].get("math"))
                s.check(f"{what}: attention fused only as TF32",
                        any(k["kind"] == "attention" for k in contract) == (prec == "tf32" and name == "transformer"),
                        str([k["kind"] for k in contract]))
                if name == "gemm_transb" and target == "sm90" and prec == "tf32":
                    s.check(f"{what}: K-major B on wgmma .tf32", any(k["kind"] == "wgmma_gemm" for k in contract),
                            str([k["kind"] for k in contract]))
                if name in ("matmul_weight", "matmul_nmajor") and target == "sm90" and prec == "tf32":
                    s.check(f"{what}: N-major B on wgmma .tf32", any(k["kind"] == "wgmma_gemm" for k in contract),
                            str([k["kind"] for k in contract]))
                    check_packed(s, what, g, once=name == "matmul_weight")
                if feeds is None:
                    feeds = cuda_sim.feeds_of(g, rng)
                    q, want = run(model, feeds, syms, backend="interp")
                    s.check(f"{name}: interpreter", q.returncode == 0, q.stderr)
                got, err = cuda_sim.run(d, feeds)
                s.check(f"{what}: runs on the simulator", err is None, err)
                if err:
                    continue
                for out, a in got.items():
                    ref = np.load(os.path.join(want, f"{out}.npy")).astype(np.float64)
                    rel = float(np.max(np.abs(a.astype(np.float64) - ref)) / max(np.max(np.abs(ref)), 1e-30))
                    errs[(name, prec, target)] = rel
                    s.check(f"{what}: {out} within {BOUND[prec]:g} of the interpreter (got {rel:.2e})",
                            np.all(np.isfinite(a)) and rel <= BOUND[prec], f"{rel:.3g}")
    for name, _, _, _ in models:
        for target in ("sm80", "sm90"):
            e = {p: errs.get((name, p, target)) for p in BOUND}
            print(f"{name} [{target}]: max |err| / max |ref|: " + ", ".join(f"{p} {v:.1e}" for p, v in e.items() if v is not None))
            if e["tf32"] is not None and e["fp32"] is not None:
                s.check(f"{name} [{target}]: strict fp32 well below tf32", e["fp32"] * 20 < e["tf32"], str(e))
    s.close()


main()
