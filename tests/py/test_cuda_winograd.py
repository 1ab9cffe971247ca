"""Winograd convolution on the GPU (issue 27, src/backend/cuda/cuda_wino.c).

For 3x3 stride-1 convs of several shapes, paddings, channel counts and batch
sizes, in fp16 and bf16 (and fp32 as TF32), a --plan naming
winograd_2x2_3x3 / winograd_4x4_3x3 / winograd_3x3:

  * runs the four Winograd kernels (filter, input transform, the batched
    GEMM on the MMA template, output transform) in that order, the GEMM's
    metadata naming the plan's tile, and plan.json says applied;
  * on the SIMT simulator matches an independent float64 direct
    convolution (numpy, on the very fp16 / bf16 inputs), the epilogue
    (bias, ReLU, a residual) fused into the output transform; the error
    relative to max |ref| is printed beside the implicit-GEMM kernel's on
    the same inputs, and must stay within the spec's 1e-3 for F(2x2) above
    the output's own rounding (the bound per dtype below);
  * compiles with NVRTC for sm_80 and sm_90a (when NVRTC is here).
Then: a weight's filter transform is a `once` launch into the packed area;
what Winograd cannot run is a located error (a grouped conv, strict fp32);
the default plan never names Winograd.  Skips (77) without g++."""
import json
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np

import cuda_sim
from harp_test import HARP, Suite

TAIL = "predicate_tail m.i.i n.i.i k.i.i;"
BASE = f"split m 64; split n 64; split k 32; warp_tile 32x32; pipeline k.i stages=2; {TAIL}"
# error bound (max |y - ref| / max |ref|): the output's rounding (fp16 2^-11,
# bf16 2^-8) plus the transformed operands' (F(2x2): B and A entries +-1, G 1/2)
BOUND = {("f16", 2): 2e-3, ("bf16", 2): 1.2e-2, ("f32", 2): 2e-3, ("f16", 4): 8e-3, ("bf16", 4): 1e-1}

# name, dtype, N, C, H, W, OC, pad [top, bottom, left, right], epilogue, tile
CASES = [
    ("same_f16", "f16", 2, 8, 10, 10, 16, [1, 1, 1, 1], "bias_relu", 2),
    ("odd_valid_f16", "f16", 1, 5, 9, 7, 12, [0, 0, 0, 0], "none", 2),
    ("asym_pad_f16", "f16", 2, 16, 7, 11, 8, [2, 0, 1, 2], "bias", 2),
    ("pad3_f16", "f16", 1, 4, 5, 5, 8, [3, 1, 0, 3], "bias", 2),
    ("residual_f16", "f16", 2, 8, 6, 6, 8, [1, 1, 1, 1], "residual", 2),
    ("same_bf16", "bf16", 2, 8, 10, 10, 16, [1, 1, 1, 1], "bias_relu", 2),
    ("odd_bf16", "bf16", 1, 12, 13, 5, 24, [1, 1, 0, 0], "bias", 2),
    ("f4x4_f16", "f16", 1, 8, 12, 10, 16, [1, 1, 1, 1], "bias_relu", 4),
    ("f4x4_bf16_b2", "bf16", 2, 8, 9, 9, 8, [1, 1, 1, 1], "none", 4),
    ("f4x4_residual_f16", "f16", 1, 16, 10, 10, 16, [1, 1, 1, 1], "residual", 4),
    ("choose_f16", "f16", 1, 8, 8, 8, 8, [1, 1, 1, 1], "bias", 0),
    ("tf32", "f32", 1, 8, 8, 9, 8, [1, 1, 1, 1], "bias_relu", 2),
]
# cases also run as implicit GEMM for the error table of docs/cuda.md
# (HARP_WINO_COMPARE=all: every case; each costs a simulator build)
COMPARE = ("same_f16", "same_bf16", "f4x4_f16", "tf32")
if os.environ.get("HARP_WINO_COMPARE") == "all":
    COMPARE = tuple(c[0] for c in CASES)
ALGO = {2: "winograd_2x2_3x3", 4: "winograd_4x4_3x3", 0: "winograd_3x3"}


def model_text(dt, n, c, h, w, oc, pad, epi):
    oh, ow = h + pad[0] + pad[1] - 2, w + pad[2] + pad[3] - 2
    args = [f"x: {dt}[{n}, {c}, {h}, {w}]", f"w: {dt}[{oc}, {c}, 3, 3]"]
    if epi.startswith("bias") or epi == "residual":
        args.append(f"b: {dt}[{oc}]")
    p = f"[{pad[0]}, {pad[1]}, {pad[2]}, {pad[3]}]"
    conv = f"conv2d(x, w{', bias=b' if epi != 'none' else ''}, pad={p})"
    # residual: the input itself (OC = C, same padding), which GPU region
    # formation fuses into the conv's epilogue
    body = {"bias_relu": f"relu({conv})", "residual": f"relu({conv} + x)"}.get(epi, conv)
    head = f"graph main({', '.join(args)}) -> (y: {dt}[{n}, {oc}, {oh}, {ow}])"
    return f"{head} {{\n    y = {body}\n    return y\n}}\n"


def write(text):
    f = tempfile.NamedTemporaryFile("w", suffix=".harp", delete=False)
    f.write(text)
    f.close()
    return f.name


def dump(model, target, plan=None, extra=()):
    d = tempfile.mkdtemp(prefix="harp_wino_")
    args = [HARP, "dump", model, "--dump", "plan,gpu,cu", "--target", target, "--dump-dir", d, *extra]
    if plan:
        pf = write(plan + "\n")
        args += ["--plan", f"y={pf}"]
    return subprocess.run(args, capture_output=True, text=True, timeout=300), d


def ref_conv(x, w, pad):
    """float64 direct convolution, NCHW / OIHW, stride 1, pad [t, b, l, r]."""
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad[0], pad[1]), (pad[2], pad[3])))
    n, c, h, ww = x.shape
    oh, ow = h - 2, ww - 2
    y = np.zeros((n, w.shape[0], oh, ow))
    for i in range(3):
        for j in range(3):
            y += np.einsum("nchw,oc->nohw", x[:, :, i:i + oh, j:j + ow], w[:, :, i, j].astype(np.float64))
    return y


def reference(feeds, pad, epi):
    y = ref_conv(feeds["x"], feeds["w"], pad)
    if epi != "none":
        y += feeds["b"].astype(np.float64)[None, :, None, None]
    if epi == "residual":
        y += feeds["x"].astype(np.float64)
    if epi in ("bias_relu", "residual"):
        y = np.maximum(y, 0)
    return y


def sim_error(s, what, d, feeds, pad, epi):
    g = json.load(open(os.path.join(d, "gpu.json")))["gpu"]
    got, err = cuda_sim.run(d, dict(feeds))
    s.check(f"{what}: runs on the simulator", err is None, err)
    if err:
        return None, g
    ref = reference(feeds, pad, epi)
    y = got["y"].astype(np.float64)
    return float(np.abs(y - ref).max() / max(np.abs(ref).max(), 1e-30)), g


def check_case(s, case, rng):
    name, dt, n, c, h, w, oc, pad, epi, tile = case
    model = write(model_text(dt, n, c, h, w, oc, pad, epi))
    extra = ("--precision", "tf32") if dt == "f32" else ()
    p, d = dump(model, "sm80", f"{BASE} algo_choice conv {ALGO[tile]};", extra)
    s.check(f"{name}: dump --plan", p.returncode == 0, p.stderr[-800:])
    if p.returncode:
        return
    g = json.load(open(os.path.join(d, "gpu.json")))["gpu"]
    kinds = {k["name"]: k for k in g["kernels"]}
    seq = [kinds[l["kernel"]]["kind"] for l in g["launches"] if l["region"] == "y"]
    s.check(f"{name}: launches filter, input, GEMM, output", seq == ["wino_filter", "wino_input", "mma_gemm", "wino_output"],
            str(seq))
    gemm = [k for k in g["kernels"] if k["kind"] == "mma_gemm" and k["plan"].get("region") == "y"]
    want_tile = tile or 2  # winograd_3x3: F(2x2) (cuda_wino_tile)
    s.check(f"{name}: the GEMM says F({want_tile}x{want_tile})", len(gemm) == 1 and
            gemm[0]["plan"].get("winograd_tile") == want_tile and gemm[0]["plan"].get("algo_choice.conv") == ALGO[want_tile],
            str(gemm and gemm[0]["plan"]))
    s.check(f"{name}: batch = transformed points", len(gemm) == 1 and gemm[0]["grid"][2] == (want_tile + 2) ** 2,
            str(gemm and gemm[0]["grid"]))
    e = [x for x in json.load(open(os.path.join(d, "plan.json")))["plans"] if x["region"] == "y"]
    s.check(f"{name}: plan.json applied, says Winograd", len(e) == 1 and e[0].get("applied") is True and
            f"winograd F({want_tile}x{want_tile}" in e[0].get("note", ""), str(e))
    outl = [l for l in g["launches"] if kinds[l["kernel"]]["kind"] == "wino_output"]
    neps = {"none": 0, "bias": 1, "bias_relu": 1, "residual": 2}[epi]  # tensors the epilogue reads (bias, residual)
    s.check(f"{name}: the epilogue fused into the output transform", len(outl) == 1 and
            sum(1 for a in outl[0]["args"] if a["param"].startswith("ep") and a["space"] != "null") == neps,
            str(outl and outl[0]["args"]))
    feeds = cuda_sim.feeds_of(g, rng)
    werr, _ = sim_error(s, name, d, feeds, pad, epi)
    derr = None
    if name in COMPARE:  # the implicit-GEMM kernel on the same inputs (the default plan), for the docs' table
        p2, d2 = dump(model, "sm80", None, extra)
        derr = sim_error(s, f"{name} [implicit GEMM]", d2, feeds, pad, epi)[0] if p2.returncode == 0 else None
    if werr is not None:
        bound = BOUND[(dt, want_tile)]
        s.check(f"{name}: error {werr:.2e} within {bound:.0e}", werr <= bound, f"{werr}")
        print(f"{name}: F({want_tile}x{want_tile}) {dt} error / max|ref| {werr:.2e}"
              + (f" (implicit GEMM {derr:.2e})" if derr is not None else ""), flush=True)
    src = open(os.path.join(d, "model.cu")).read()
    for arch in ("sm_80", "sm_90a"):
        ok, log = cuda_sim.nvrtc_ok(src, arch)
        if ok is not None:
            s.check(f"{name}: NVRTC {arch}", ok, log[-800:])


def conv_weight_onnx():
    """An ONNX fp16 Conv 3x3 pad 1 whose weight and bias are initializers
    (Function params); or None without onnx."""
    try:
        import onnx
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        return None
    r = np.random.default_rng(6)
    w = numpy_helper.from_array(r.uniform(-0.3, 0.3, (8, 8, 3, 3)).astype(np.float16), "W")
    b = numpy_helper.from_array(r.uniform(-0.3, 0.3, (8,)).astype(np.float16), "B")
    g = helper.make_graph([helper.make_node("Conv", ["x", "W", "B"], ["y"], pads=[1, 1, 1, 1])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, 8, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [1, 8, 8, 8])], [w, b])
    path = os.path.join(tempfile.mkdtemp(), "conv_weight.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def check_weight_once(s, rng):
    """A weight (an initializer) gets its filter transform once, into the packed area."""
    model = conv_weight_onnx()
    if not model:
        print("weight: no onnx, skipped", flush=True)
        return
    p, d = dump(model, "sm90", f"split m 64; split n 64; split k 64; {TAIL} algo_choice conv winograd_2x2_3x3;")
    s.check("weight: dump", p.returncode == 0, p.stderr[-800:])
    if p.returncode:
        return
    g = json.load(open(os.path.join(d, "gpu.json")))["gpu"]
    kinds = {k["name"]: k["kind"] for k in g["kernels"]}
    filt = [l for l in g["launches"] if kinds[l["kernel"]] == "wino_filter"]
    s.check("weight: the filter transform writes the packed area", len(filt) == 1 and
            any(a["space"] == "packed" for a in filt[0]["args"]) and g["memory"]["packed_bytes"] > 0, str(filt))
    s.check("weight: launched once", len(filt) == 1 and filt[0].get("once") is True, str(filt))
    feeds = cuda_sim.feeds_of(g, rng)
    got, err = cuda_sim.run(d, dict(feeds))
    s.check("weight: runs on the simulator", err is None, err)
    if err:
        return
    ref = ref_conv(feeds["x"], feeds["W"], [1, 1, 1, 1]) + feeds["B"].astype(np.float64)[None, :, None, None]
    e = float(np.abs(got["y"].astype(np.float64) - ref).max() / np.abs(ref).max())
    s.check(f"weight [sm90 module]: error {e:.2e} within 2e-3", e <= 2e-3, str(e))


def check_refusals(s):
    """Located errors, no model.cu: a grouped conv, strict fp32, a stride-2 window."""
    grouped = write("graph main(x: f16[1, 8, 8, 8], w: f16[8, 4, 3, 3]) -> (y: f16[1, 8, 8, 8]) {\n"
                    "    y = conv2d(x, w, pad=1, groups=2)\n    return y\n}\n")
    strided = write("graph main(x: f16[1, 8, 8, 8], w: f16[8, 8, 3, 3]) -> (y: f16[1, 8, 4, 4]) {\n"
                    "    y = conv2d(x, w, stride=2, pad=1)\n    return y\n}\n")
    fp32 = write(model_text("f32", 1, 8, 8, 8, 8, [1, 1, 1, 1], "none"))
    plan = f"{BASE} algo_choice conv winograd_2x2_3x3;"
    for what, model, extra, want in (("grouped", grouped, (), ["Unsupported", "region 'y'", "grouped"]),
                                     ("strict fp32", fp32, ("--precision", "fp32"), ["Unsupported", "strict fp32"]),
                                     ("stride 2", strided, (), ["needs stride 1", ":1:128:"])):
        p, d = dump(model, "sm80", plan, extra)
        s.check(f"{what}: a located error", p.returncode != 0 and all(w in p.stderr for w in want), p.stderr[-600:])
        s.check(f"{what}: no model.cu", not os.path.exists(os.path.join(d, "model.cu")))


def check_default(s):
    """Without a --plan the GPU runs implicit GEMM (Winograd is unmeasured there)."""
    model = write(model_text("f16", 8, 64, 14, 14, 64, [1, 1, 1, 1], "bias_relu"))
    for target in ("sm80", "sm90"):
        p, d = dump(model, target)
        s.check(f"default [{target}]: dump", p.returncode == 0, p.stderr[-600:])
        if p.returncode == 0:
            text = open(os.path.join(d, "plan.json")).read() + open(os.path.join(d, "gpu.json")).read()
            s.check(f"default [{target}]: no Winograd", "winograd" not in text and "wino_" not in text)


def main():
    warnings.simplefilter("ignore", RuntimeWarning)
    s = Suite("cuda_winograd")
    if not cuda_sim.have_gxx():
        print("g++ not found: skipped")
        sys.exit(77)
    rng = np.random.default_rng(2027)
    only = os.environ.get("HARP_WINO_CASES")  # a substring of the case names (debugging)
    for case in CASES:
        if not only or only in case[0]:
            check_case(s, case, rng)
    if not only:
        check_weight_once(s, rng)
        check_refusals(s)
        check_default(s)
    s.close()


if __name__ == "__main__":
    main()
