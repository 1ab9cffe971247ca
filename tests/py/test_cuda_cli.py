"""The CUDA backend's command line: --backend cuda without a GPU or driver
fails with one clear located error and exit 1 (never a crash, never partial
outputs); bad --target values and regions no GPU kernel can take are usage /
located errors; --dump gpu,cu work without a GPU; the help texts name it all."""
import json
import os
import subprocess
import tempfile

import numpy as np

import cuda_sim
from harp_test import HARP, MODELS, SRC, Suite, close, run, write_model

s = Suite("cuda_cli")
GEMM = os.path.join(MODELS, "gpu", "gemm_tail.harp")
NO_DRIVER = {**os.environ, "HARP_LIBCUDA": "/nonexistent/libcuda.so.1"}


def harp(*args, env=None):
    return subprocess.run([HARP, *args], capture_output=True, text=True, timeout=300, env=env)


# --backend cuda without a driver: one error line, exit 1, no outputs; dumps are written first
d = tempfile.mkdtemp(prefix="harp_cucli_")
p = harp("run", GEMM, "--random-inputs", "--backend", "cuda", "--target", "sm80", "--out", d, "--dump", "gpu,cu", env=NO_DRIVER)
s.check("run --backend cuda without a driver: exit 1", p.returncode == 1, f"{p.returncode} {p.stderr}")
s.check("... says there is no driver", "error[Unsupported]: no GPU: no NVIDIA driver" in p.stderr, p.stderr)
s.check("... one line", len(p.stderr.strip().splitlines()) == 1, p.stderr)
s.check("... writes no output", not [f for f in os.listdir(d) if f.endswith(".npy")], str(os.listdir(d)))
s.check("... but the dumps", os.path.exists(os.path.join(d, "gpu.json")) and os.path.exists(os.path.join(d, "model.cu")))
p = harp("bench", GEMM, "--backend", "cuda", "--repeat", "2", env=NO_DRIVER)
s.check("bench --backend cuda without a driver: exit 1, clear", p.returncode == 1 and "no GPU" in p.stderr, p.stderr)
stub = "/usr/local/cuda/lib64/stubs/libcuda.so"
if os.path.exists(stub):
    p = harp("run", GEMM, "--random-inputs", "--backend", "cuda", "--out", d, env={**os.environ, "HARP_LIBCUDA": stub})
    s.check("run --backend cuda with the toolkit's stub driver: exit 1, cuInit",
            p.returncode == 1 and "no GPU: cuInit failed" in p.stderr, p.stderr)
# whatever this machine has, --backend cuda never crashes
p = harp("run", GEMM, "--random-inputs", "--backend", "cuda", "--out", d)
s.check("run --backend cuda here: 0, or 1 with a reason", p.returncode == 0 or (p.returncode == 1 and "error[" in p.stderr),
        f"{p.returncode} {p.stderr}")

# targets
p = harp("run", GEMM, "--random-inputs", "--backend", "cuda", "--target", "sm75", "--out", d)
s.check("run --backend cuda --target sm75: usage error", p.returncode == 1 and "sm80 or sm90" in p.stderr, p.stderr)
p = harp("compile", GEMM, "--target", "sm70", "-o", tempfile.mkdtemp())
s.check("compile --target sm70: usage error", p.returncode == 1 and "unknown target 'sm70'" in p.stderr, p.stderr)
p = harp("dump", GEMM, "--dump", "gpu", "--target", "cpu", "--dump-dir", d)
s.check("dump gpu --target cpu: usage error", p.returncode == 1 and "sm80 or sm90" in p.stderr, p.stderr)
p = harp("dump", os.path.join(MODELS, "softmax_rows.json"), "--dump", "cu", "--dump-dir", d)
s.check("dump cu with unbound sizes: located error", p.returncode == 1 and "UnboundSymbol" in p.stderr, p.stderr)

# a region no GPU kernel can take: a gather of a view
gv = write_model([
    {"id": "x", "uop": "INPUT", "arg": {"tensor_id": "x", "dtype": "fp32", "shape": [4, 5]}},
    {"id": "idx", "uop": "INPUT", "arg": {"tensor_id": "idx", "dtype": "i32", "shape": [3, 4]}},
    {"id": "xt", "uop": "PERMUTE", "src": ["x"], "arg": {"perm": [1, 0]}},
    {"id": "g", "uop": "GATHER", "src": ["xt", "idx"], "arg": {"axis": 0}}], ["g"])
p = harp("dump", gv, "--dump", "cu", "--target", "sm90", "--dump-dir", tempfile.mkdtemp())
s.check("unsupported region: located error", p.returncode == 1 and 'GATHER of a view' in p.stderr and '(node "g")' in p.stderr,
        p.stderr)

# the dumps, on every backend and on dump, need no GPU
for args in (("run", GEMM, "--random-inputs", "--backend", "cpu"), ("dump", GEMM), ("run", GEMM, "--random-inputs", "--backend", "interp")):
    dd = tempfile.mkdtemp(prefix="harp_cucli_")
    p = harp(*args, "--dump", "gpu,cu", "--target", "sm90", "--dump-dir", dd, *(["--out", dd] if args[0] == "run" else []))
    s.check(f"{args[0]} {args[-1]} --dump gpu,cu", p.returncode == 0, p.stderr)
    if p.returncode:
        continue
    g = json.load(open(os.path.join(dd, "gpu.json")))["gpu"]
    s.check(f"{args[0]}: gpu.json has kernels, launches, buffers, memory",
            g["arch"] == "sm90" and g["kernels"] and g["launches"] and g["buffers"] and "arena_bytes" in g["memory"])
    cu = open(os.path.join(dd, "model.cu")).read()
    s.check(f"{args[0]}: model.cu defines every launched kernel",
            all(f'extern "C" __global__ void' in cu and f" {l['kernel']}(" in cu for l in g["launches"]))

# help texts
for cmd, words in (("run", ["cuda", "--graphs", "gpu", "cu"]), ("bench", ["cuda", "--graphs"]),
                   ("compile", ["sm80", "sm90", "model.cu", "model_host.c"]), ("dump", ["gpu", "cu"])):
    p = harp(cmd, "--help")
    s.check(f"harp {cmd} --help names {words}", p.returncode == 0 and all(w in p.stdout for w in words), p.stdout[-400:])
# a convolution of few output tiles over a long reduction (K = 128 * 9 >= 1024): the Plan
# splits K (splitk_serial or splitk_parallel, as the cost model says), no generic
# kernel (issue 27; it used to go there); the same conv over 32 images stays on the template
# too (split or not as the cost model says)
for n, want in ((1, "template"), (32, "template")):
    f = os.path.join(tempfile.mkdtemp(), "late_conv.harp")
    with open(f, "w") as fh:
        fh.write(f"graph main(x: f16[{n}, 128, 7, 7], w: f16[64, 128, 3, 3]) -> (y: f16[{n}, 64, 7, 7]) {{\n"
                 "    y = conv2d(x, w, pad=1)\n    return y\n}\n")
    dd = tempfile.mkdtemp()
    p = harp("dump", f, "--dump", "gpu", "--target", "sm90", "--dump-dir", dd)
    s.check(f"late conv n={n}: dump gpu", p.returncode == 0, p.stderr)
    if p.returncode == 0:
        g = json.load(open(os.path.join(dd, "gpu.json")))["gpu"]
        conv = [k for k in g["kernels"] if k["kind"] == "mma_conv"]
        split = conv[0]["plan"].get("splitk", 1) if conv else 0
        s.check(f"late conv n={n}: on the {want} kernel{', split along K' if n == 1 else ''}",
                g["launch_kinds"].get(want, 0) == 1 and not g["launch_kinds"].get("generic", 0) and
                len(conv) == 1 and (split > 1 or n > 1) and
                (n > 1 or conv[0]["plan"].get("algo_choice.matmul") in ("splitk_serial", "splitk_parallel")),
                f"{g['launch_kinds']} {[k['plan'] for k in conv]}")

# an fp32 attention is the fused template as TF32 (the default precision); with --precision
# fp32 (strict) or fp16 no fused template takes it: two matmuls and a softmax, not one generic
# kernel of the whole attention; an fp16 one stays the attention template at any precision
for model, syms, prec, fused in ((os.path.join(SRC, "examples", "transformer_block.harp"), ["B=1", "S=8"], None, True),
                                 (os.path.join(SRC, "examples", "transformer_block.harp"), ["B=1", "S=8"], "fp32", False),
                                 (os.path.join(SRC, "examples", "transformer_block.harp"), ["B=1", "S=8"], "fp16", False),
                                 (os.path.join(MODELS, "gpu", "transformer_block_fp16.harp"), [], "fp32", True)):
    what = f"{os.path.basename(model)} --precision {prec}"
    dd = tempfile.mkdtemp()
    p = harp("dump", model, "--dump", "gpu", "--target", "sm90", "--dump-dir", dd, *[a for x in syms for a in ("--sym", x)],
             *(["--precision", prec] if prec else []))
    s.check(f"{what}: dump gpu", p.returncode == 0, p.stderr)
    if p.returncode == 0:
        g = json.load(open(os.path.join(dd, "gpu.json")))["gpu"]
        s.check(f"{what}: gpu.json says the precision", g.get("precision") == (prec or "tf32"), str(g.get("precision")))
        kinds = [k["kind"] for k in g["kernels"]]
        declined = [l.get("declined", "") for l in g["launches"]]
        if fused:
            s.check(f"{what}: the attention template", "attention" in kinds, str(kinds))
        else:
            s.check(f"{what}: no attention region declined to a generic kernel",
                    "attention" not in kinds and not any("attention takes" in x for x in declined), str(declined))
        if prec is None:
            att = [k for k in g["kernels"] if k["kind"] == "attention"]
            s.check(f"{what}: the attention computes as TF32", att and "tf32" in att[0]["plan"].get("math", ""), str(att[:1]))

# a causal attention's mask, built by the program, is dead once the template reads the causal
# pattern: its regions (a one-thread index kernel and an S x S compare) are dropped
f = os.path.join(tempfile.mkdtemp(), "causal.harp")
with open(f, "w") as fh:
    fh.write("graph main(q: f16[1, 4, 256, 64], k: f16[1, 4, 256, 64], v: f16[1, 4, 256, 64]) -> (o: f16[1, 4, 256, 64]) {\n"
             "    o = attention(q, k, v, causal=true)\n    return o\n}\n")
dd = tempfile.mkdtemp()
p = harp("dump", f, "--dump", "gpu", "--target", "sm90", "--dump-dir", dd)
s.check("causal attention: dump gpu", p.returncode == 0, p.stderr)
if p.returncode == 0:
    g = json.load(open(os.path.join(dd, "gpu.json")))["gpu"]
    s.check("causal attention: one launch, the template; the mask's regions dropped",
            [l["kernel"] for l in g["launches"]] == ["k2_attn"] and g["dead_regions"] >= 2 and len(g["kernels"]) == 1,
            f"{[l['kernel'] for l in g['launches']]} dead {g.get('dead_regions')}")

# an fp32 attention the fused template cannot read (PyTorch's ONNX export of
# scaled_dot_product_attention scales K^T: K is read transposed) is not one generic kernel
# of the whole attention: the model is formed again with it split into matmuls and a softmax
try:
    import numpy as np
    import onnx
    from onnx import TensorProto as T, helper as oh, numpy_helper as nh
except ImportError:
    onnx = None
if onnx is not None:
    r = np.random.default_rng(0)
    b_, s_, h_, dh = 1, 64, 4, 16
    inits = [nh.from_array(r.standard_normal((64, 192)).astype(np.float32) * 0.05, "W"),
             nh.from_array(np.array([b_, s_, 3, h_, dh], np.int64), "shp5"), nh.from_array(np.array([b_, s_, 64], np.int64), "shp3"),
             nh.from_array(np.array(0.5, np.float32), "sc")] + [nh.from_array(np.array(i, np.int64), f"i{i}") for i in range(3)]
    nodes = [oh.make_node("MatMul", ["x", "W"], ["t"]), oh.make_node("Reshape", ["t", "shp5"], ["t2"]),
             oh.make_node("Transpose", ["t2"], ["t3"], perm=[2, 0, 3, 1, 4])] + \
        [oh.make_node("Gather", ["t3", f"i{i}"], [n], axis=0) for i, n in enumerate("qkv")] + \
        [oh.make_node("Mul", ["q", "sc"], ["qs"]), oh.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
         oh.make_node("Mul", ["kt", "sc"], ["ks"]), oh.make_node("MatMul", ["qs", "ks"], ["qk"]),
         oh.make_node("Softmax", ["qk"], ["p"], axis=-1), oh.make_node("MatMul", ["p", "v"], ["o"]),
         oh.make_node("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]), oh.make_node("Reshape", ["ot", "shp3"], ["y"])]
    gr = oh.make_graph(nodes, "g", [oh.make_tensor_value_info("x", T.FLOAT, [b_, s_, 64])],
                       [oh.make_tensor_value_info("y", T.FLOAT, [b_, s_, 64])], inits)
    f = os.path.join(tempfile.mkdtemp(), "sdpa_kt.onnx")
    onnx.save(oh.make_model(gr, opset_imports=[oh.make_opsetid("", 17)]), f)
    dd = tempfile.mkdtemp()
    p = harp("dump", f, "--dump", "gpu", "--target", "sm90", "--dump-dir", dd)
    s.check("ONNX attention with K^T scaled: dump gpu", p.returncode == 0, p.stderr)
    if p.returncode == 0:
        g = json.load(open(os.path.join(dd, "gpu.json")))["gpu"]
        kinds = [k["kind"] for k in g["kernels"]]
        notes = [l.get("declined", "") for l in g["launches"]]
        s.check("ONNX attention with K^T scaled: split into matmuls and a softmax, no generic attention",
                "softmax" in kinds and kinds.count("mma_gemm") + kinds.count("wgmma_gemm") >= 3 and
                not any("unit stride along d" in x for x in notes), f"{kinds} {notes}")

# --plan reaches the attention kernel: a plan list from --dump plan with
# algo_choice.attention changed to online_softmax gives the one-pass kernel
# (the region's own plan says streaming_softmax_2pass), and it still matches
# the interpreter on the simulator
att = os.path.join(MODELS, "attention_full_causal_fp16.json")
syms = ["--sym", "B=1", "--sym", "H=2", "--sym", "M=40", "--sym", "N=40", "--sym", "D=16", "--sym", "Dv=16"]
for target in ("sm80", "sm90"):
    pd = tempfile.mkdtemp()
    p = harp("dump", att, "--dump", "plan", "--target", target, "--dump-dir", pd, *syms)
    s.check(f"attention --dump plan [{target}]", p.returncode == 0, p.stderr)
    if p.returncode:
        continue
    pl = json.load(open(os.path.join(pd, "plan.json")))
    algos = [e["plan"]["algo_choice"].get("attention") for e in pl["plans"] if e.get("plan")]
    s.check(f"attention [{target}]: the default plan is 2-pass", "streaming_softmax_2pass" in algos, str(algos))
    for e in pl["plans"]:
        if e.get("plan") and "attention" in e["plan"]["algo_choice"]:
            e["plan"]["algo_choice"]["attention"] = "online_softmax"
    pf = os.path.join(pd, "online.json")
    json.dump(pl, open(pf, "w"))
    for plan, want in ((None, "streaming_softmax_2pass"), (pf, "online_softmax")):
        dd = tempfile.mkdtemp()
        p = harp("dump", att, "--dump", "gpu,cu", "--target", target, "--dump-dir", dd, *syms, *(["--plan", plan] if plan else []))
        s.check(f"attention [{target}] {want}: dump", p.returncode == 0, p.stderr)
        if p.returncode:
            continue
        g = json.load(open(os.path.join(dd, "gpu.json")))["gpu"]
        ks = [k for k in g["kernels"] if k["kind"] == "attention"]
        s.check(f"attention [{target}]: the kernel is {want}", len(ks) == 1 and ks[0]["plan"].get("algo_choice.attention") == want,
                str([k["plan"].get("algo_choice.attention") for k in ks]))
        if cuda_sim.have_gxx() and plan:
            feeds = cuda_sim.feeds_of(g, np.random.default_rng(7))
            got, err = cuda_sim.run(dd, feeds)
            s.check(f"attention [{target}] online: runs on the simulator", err is None, err)
            q, e = run(att, feeds, tuple(x for x in syms if x != "--sym"), backend="interp")
            if err is None and q.returncode == 0:
                for out, a in got.items():
                    ok, det = close(a, np.load(os.path.join(e, f"{out}.npy")).astype(np.float64))
                    s.check(f"attention [{target}] online: {out} vs interpreter", ok, det)

# --precision: a bad value is a usage error naming the choices
p = harp("dump", os.path.join(SRC, "examples", "transformer_block.harp"), "--dump", "gpu", "--target", "sm80",
         "--precision", "fp8", "--dump-dir", tempfile.mkdtemp())
s.check("--precision fp8: a usage error naming the choices", p.returncode == 1 and "UsageError" in p.stderr and "tf32, fp32, fp16 or bf16" in p.stderr,
        p.stderr)
for cmd in ("run", "bench", "compile", "dump"):
    p = harp(cmd, "--help")
    s.check(f"harp {cmd} --help names --precision", "--precision" in p.stdout and "tf32" in p.stdout, p.stdout[-300:])

s.close()
