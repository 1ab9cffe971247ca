"""`harp run --backend regions` and `--dump region,function` end to end:
region-by-region playback on the arena gives the interpreter's outputs (bit
for bit in fp32) and numpy's; the dumps have the seed 000 §12.4 shapes, the
attention regions of §7.3, and the Function's arena; --target switches the
machine; bad options and unbound sizes fail cleanly."""
import json
import os
import subprocess
import tempfile

import numpy as np

from harp_test import HARP, MODELS, SRC, Suite, close, run

s = Suite("regions")


def both(model, inputs, syms=(), target=None):
    """Run with the interpreter and with region playback; return their outputs and the region dump."""
    pi, di = run(os.path.join(MODELS, model), inputs, syms)
    extra = ["--backend", "regions", "--dump", "region,function"]
    if target:
        extra += ["--target", target]
    pr, dr = run(os.path.join(MODELS, model), inputs, syms, extra)
    s.check(f"{model} interp runs", pi.returncode == 0, pi.stderr)
    s.check(f"{model} regions run ({target or 'cpu'})", pr.returncode == 0, pr.stderr)
    if pi.returncode or pr.returncode:
        return None, None, None, None
    with open(os.path.join(dr, "region.json")) as f:
        reg = json.load(f)
    with open(os.path.join(dr, "function.json")) as f:
        fn = json.load(f)
    return np.load(os.path.join(di, "out.npy")), np.load(os.path.join(dr, "out.npy")), reg, fn


rng = np.random.default_rng(3)

# seed 000 §7.1 through the CLI: one region, deferred internals, sum_k -> relu in registers
A = rng.standard_normal((8, 16)).astype(np.float16)
B = rng.standard_normal((16, 12)).astype(np.float16)
bias = rng.standard_normal(12).astype(np.float16)
d = tempfile.mkdtemp(prefix="harp_rg_")
p = subprocess.run([HARP, "run", os.path.join(MODELS, "seed000_gemm_bias_relu.json"), "--backend", "regions",
                    "--out", d, "--dump", "region", "--random-inputs", "--sym", "M=8", "--sym", "K=16", "--sym", "N=12"],
                   capture_output=True, text=True, timeout=120)
s.check("seed000 regions run", p.returncode == 0, p.stderr)
if p.returncode == 0:
    with open(os.path.join(d, "region.json")) as f:
        reg = json.load(f)["regions"]
    s.check("seed000: one region", len(reg) == 1, [r["name"] for r in reg])
    r = reg[0]
    s.check("seed000: matmul", r["kind"] == "contraction" and r["pattern"] == "matmul", r["kind"])
    for key in ("name", "inputs", "outputs", "body"):
        s.check(f"seed000: §12.4 key {key}", key in r)
    lets = {b["let"]: b for b in r["body"] if "let" in b}
    s.check("seed000: C0.acc deferred", lets.get("C0.acc", {}).get("materialize") == "deferred", lets.get("C0.acc"))
    s.check("seed000: C2 gmem", lets.get("C2", {}).get("materialize") == "gmem")
    s.check("seed000: yield", "yield" in r["body"][-1])
    s.check("seed000: local edge", {"from": "sum_k", "to": "relu", "buffer": "reg"}.items() <=
            r["local_edges"][0].items(), r["local_edges"])
    mr = r["outputs"][0]["memref"]
    s.check("seed000: memref", mr["shape"] == [8, 12] and mr["strides"] == [12, 1] and mr["noalias"], mr)
    s.check("seed000: plan epilogue", r["plan"]["epilogue"] == ["bias", "relu"], r["plan"].get("epilogue"))

# conv 3x3 + bias + SiLU (fp32): bit for bit, one region, halo +-1
x = rng.standard_normal((2, 3, 6, 5)).astype(np.float32)
w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
b = rng.standard_normal(4).astype(np.float32)
gi, gr, reg, fn = both("conv3x3_bias_silu.json", {"X": x, "Wc": w, "bias": b})
if gi is not None:
    s.check("conv: playback bitwise", gi.tobytes() == gr.tobytes())
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    y = np.zeros((2, 4, 6, 5))
    for kh in range(3):
        for kw in range(3):
            y += np.einsum("nchw,oc->nohw", xp[:, :, kh:kh + 6, kw:kw + 5], w[:, :, kh, kw])
    y += b[None, :, None, None]
    y = y / (1 + np.exp(-y))
    ok, det = close(gr, y)
    s.check("conv: numpy", ok, det)
    r = reg["regions"]
    s.check("conv: one region", len(r) == 1 and r[0]["pattern"] == "conv", [q["name"] for q in r])
    h = r[0]["halo"][0]["per_axis"]
    s.check("conv: halo +-1", (h[2]["lo"], h[2]["hi"], h[3]["lo"], h[3]["hi"]) == (1, 1, 1, 1), h)
    s.check("conv: function has no temporaries", fn["function"]["required_memory"] == 0, fn["function"])

# attention (fp32, causal): one attention region with both matmuls; bitwise; numpy
Q = rng.standard_normal((1, 2, 5, 4)).astype(np.float32)
K = rng.standard_normal((1, 2, 6, 4)).astype(np.float32)
V = rng.standard_normal((1, 2, 6, 3)).astype(np.float32)
for target in (None, "sm80", "sm90"):
    gi, gr, reg, fn = both("attention_full_causal.json", {"Q": Q, "K": K, "V": V}, target=target)
    if gi is None:
        continue
    s.check(f"attention {target}: playback bitwise", gi.tobytes() == gr.tobytes())
    S = Q @ K.transpose(0, 1, 3, 2) * 0.125
    M, N = S.shape[-2:]
    S = np.where(np.arange(N)[None, :] > np.arange(M)[:, None] + N - M, -np.inf, S)
    P = np.exp(S - S.max(-1, keepdims=True))
    P /= P.sum(-1, keepdims=True)
    ok, det = close(gr, P @ V)
    s.check(f"attention {target}: numpy", ok, det)
    att = [r for r in reg["regions"] if r.get("pattern") == "attention"]
    if target:
        # The CUDA backend's TF32 template declines this fp32 attention (its
        # shapes), so its compile forms it again as two matmuls and a softmax;
        # the regions played back are that partition (issue 32: what the
        # backend compiles).  The fp16 attention stays one region on the GPU.
        s.check(f"attention {target}: the fp32 attention as the CUDA compile forms it", not att and
                [r.get("pattern") for r in reg["regions"]] == ["matmul", None, None, "matmul"],
                [(r["name"], r.get("pattern")) for r in reg["regions"]])
        d16 = tempfile.mkdtemp(prefix="harp_rg_")
        p16 = subprocess.run([HARP, "dump", os.path.join(MODELS, "attention_full_causal_fp16.json"), "--target", target,
                              "--dump", "region", "--dump-dir", d16, "--sym", "B=1", "--sym", "H=2", "--sym", "M=5",
                              "--sym", "N=6", "--sym", "D=4", "--sym", "Dv=3"], capture_output=True, text=True, timeout=120)
        s.check(f"attention {target}: fp16 dump", p16.returncode == 0, p16.stderr)
        if p16.returncode == 0:
            with open(os.path.join(d16, "region.json")) as f:
                reg = json.load(f)
            att = [r for r in reg["regions"] if r.get("pattern") == "attention"]
    s.check(f"attention {target}: one attention region", len(att) == 1, [r["name"] for r in reg["regions"]])
    if att:
        a = att[0]["attention"]
        s.check(f"attention {target}: q/k/v", (a["q"]["tensor"], a["k"]["tensor"], a["v"]["tensor"]) == ("Q", "K", "V"), a)
        s.check(f"attention {target}: causal, scale", a["causal"] and a["scale"] == 0.125 and a["causal_offset"] == 1, a)
        s.check(f"attention {target}: algo", att[0]["plan"]["algo_choice"] == {"attention": "streaming_softmax_2pass"},
                att[0]["plan"]["algo_choice"])
        names = [b["name"] for b in att[0]["blocks"]]
        s.check(f"attention {target}: both matmuls inside", "qk" in names and "pv" in names, names)
    s.check(f"attention {target}: machine", reg["formation"]["arch"] == (target or "cpu"), reg["formation"])

# the causal mask is proved from its row and column vectors (region/attention.c
# causal_by_vectors), never assumed: the same model with the compare's operands
# swapped (the keys before each query hidden), or with the query iota scaled
# by 0.5 (fewer keys hidden) or by 2 (more), must not be taken as causal
def mask_variant(name, edit):
    g = json.load(open(os.path.join(MODELS, "attention_full_causal.json")))
    edit({u["id"]: u for u in g["uops"]})
    path = os.path.join(tempfile.mkdtemp(prefix="harp_rg_"), f"attention_{name}.json")
    json.dump(g, open(path, "w"))
    return path


def swap(u):
    u["t25"]["src"] = u["t25"]["src"][::-1]


def scale(k):
    return lambda u: u["t7"]["arg"].__setitem__("value", k)


for name, edit in (("swapped", swap), ("rows x0.5", scale(0.5)), ("rows x2", scale(2.0))):
    base = {u["id"]: u for u in json.load(open(os.path.join(MODELS, "attention_full_causal.json")))["uops"]}
    s.check(f"not causal ({name}): the model's mask is CMPLT(t24, t22), t7 the query iota's step",
            base["t25"]["uop"] == "CMPLT" and base["t25"]["src"] == ["t24", "t22"] and base["t7"]["uop"] == "CONST")
    model = mask_variant(name.replace(" ", "_").replace(".", ""), edit)
    for target in (None, "sm90"):
        gi, gr, reg, fn = both(model, {"Q": Q, "K": K, "V": V}, target=target)
        if gi is None:
            continue
        s.check(f"not causal ({name}) {target}: playback bitwise", gi.tobytes() == gr.tobytes())
        att = [r["attention"] for r in reg["regions"] if r.get("pattern") == "attention"]
        s.check(f"not causal ({name}) {target}: not a causal attention", not any(a["causal"] for a in att), att)

# long sequences: a causal mask of 2^24 elements (4k tokens) and a 16k-token
# attention ([1, 16, 16384, 16384] scores: 2^32 elements) are attention regions
for seq, causal in ((4096, True), (16384, False)):
    shp = f"f16[1, 16, {seq}, 64]"
    m = os.path.join(tempfile.mkdtemp(prefix="harp_rg_"), "attn.harp")
    open(m, "w").write(f"graph main(q: {shp}, k: {shp}, v: {shp}) -> (o: {shp}) {{\n"
                       f"    o = attention(q, k, v{', causal=true' if causal else ''})\n    return o\n}}\n")
    d = tempfile.mkdtemp(prefix="harp_rg_")
    p = subprocess.run([HARP, "dump", m, "--dump", "region", "--target", "sm90", "--dump-dir", d],
                       capture_output=True, text=True, timeout=120)
    s.check(f"attention s{seq}: dump", p.returncode == 0, p.stderr)
    if p.returncode == 0:
        att = [r["attention"] for r in json.load(open(os.path.join(d, "region.json")))["regions"] if r.get("pattern") == "attention"]
        s.check(f"attention s{seq}{' causal' if causal else ''}: one attention region",
                len(att) == 1 and att[0]["causal"] == causal, att)

# LayerNorm: one region; the GEMM chain: four regions, two live temporaries at most
xl = rng.standard_normal((4, 64)).astype(np.float32)
gi, gr, reg, fn = both("layernorm.json", {"X": xl, "gamma": np.ones(64, np.float32), "beta": np.zeros(64, np.float32)})
if gi is not None:
    s.check("layernorm: bitwise", gi.tobytes() == gr.tobytes())
    s.check("layernorm: one region", len(reg["regions"]) == 1 and reg["regions"][0]["prefix"] == 1,
            [r["name"] for r in reg["regions"]])
chain = {"X": rng.standard_normal((8, 16)).astype(np.float32)}
for l in range(4):
    chain[f"W{l}"] = rng.standard_normal((16, 16)).astype(np.float32)
    chain[f"b{l}"] = rng.standard_normal(16).astype(np.float32)
gi, gr, reg, fn = both("gemm_chain4.json", chain)
if gi is not None:
    s.check("chain: bitwise", gi.tobytes() == gr.tobytes())
    s.check("chain: 4 regions", len(reg["regions"]) == 4, [r["name"] for r in reg["regions"]])
    f = fn["function"]
    temps = [b for b in f["buffers"] if b["kind"] == "temp"]
    s.check("chain: arena below the sum", f["required_memory"] < sum(b["size"] for b in temps), f["required_memory"])
    live = max(sum(1 for b in temps if b["live"][0] <= k <= b["live"][1]) for k in range(len(f["kernels"])))
    s.check("chain: at most 2 live", live <= 2, live)

# the frontend's examples (.harp): playback bit for bit; the transformer's attention is one region
for ex in ("mlp", "conv_block", "transformer_block", "cnn"):
    model = os.path.join(SRC, "examples", ex + ".harp")
    if not os.path.exists(model):
        continue
    for target in ("cpu", "sm80", "sm90"):
        pi, di = run(model, extra=["--random-inputs"])
        pr, dr = run(model, extra=["--random-inputs", "--backend", "regions", "--target", target, "--dump", "region"])
        ok = pi.returncode == 0 and pr.returncode == 0
        s.check(f"{ex} {target} runs", ok, pi.stderr + pr.stderr)
        if not ok:
            continue
        outs = [f for f in os.listdir(di) if f.endswith(".npy")]
        same = all(np.load(os.path.join(di, f)).tobytes() == np.load(os.path.join(dr, f)).tobytes() for f in outs)
        s.check(f"{ex} {target} playback bitwise", outs and same, outs)
        with open(os.path.join(dr, "region.json")) as f:
            reg = json.load(f)["regions"]
        if ex == "transformer_block":
            att = [r for r in reg if r.get("pattern") == "attention"]
            s.check(f"{ex} {target}: one attention region", len(att) == 1 and att[0]["attention"]["causal"],
                    [r["name"] for r in reg])

# two BERT-base layers (region dump only): the exact search's windows end
# between the second layer's output projection and its bias + residual; the
# window across that boundary must give both layers the same regions (each
# projection after attention takes its bias and residual)
d = tempfile.mkdtemp()
p = subprocess.run([HARP, "dump", os.path.join(MODELS, "bert_base_2layers.harp"), "--dump", "region", "--dump-dir", d],
                   capture_output=True, text=True)
s.check("bert 2 layers: region dump", p.returncode == 0, p.stderr)
if p.returncode == 0:
    regs = json.load(open(os.path.join(d, "region.json")))["regions"]
    shape = [(r["shape"], tuple(r.get("plan_info", {}).get("epilogue") or ())) for r in regs]
    half = len(shape) // 2
    s.check("bert 2 layers: both layers have the same regions", len(shape) % 2 == 0 and shape[:half] == shape[half:],
            str(shape))
    s.check("bert 2 layers: the projections after attention take bias and residual",
            sum(1 for i, r in enumerate(regs) if i and regs[i - 1]["shape"] == "attention" and
                shape[i][1] == ("bias", "residual")) == 2, str(shape))
# errors: unknown target, unbound sizes for a region dump, unknown backend
p = subprocess.run([HARP, "run", os.path.join(MODELS, "softmax_rows.json"), "--random-inputs", "--sym", "R=2",
                    "--sym", "L=3", "--target", "sm70", "--backend", "regions"], capture_output=True, text=True)
s.check("bad target", p.returncode == 1 and "--target" in p.stderr, p.stderr)
d = tempfile.mkdtemp(prefix="harp_rg_")
p = subprocess.run([HARP, "dump", os.path.join(MODELS, "softmax_rows.json"), "--dump", "region", "--dump-dir", d],
                   capture_output=True, text=True)
s.check("unbound sizes", p.returncode == 1 and "UnboundSymbol" in p.stderr, p.stderr)
s.check("no partial dump", not os.path.exists(os.path.join(d, "region.json")))
p = subprocess.run([HARP, "dump", os.path.join(MODELS, "softmax_rows.json"), "--dump", "region,function", "--dump-dir", d,
                    "--sym", "R=2", "--sym", "L=3", "--target", "sm90"], capture_output=True, text=True)
s.check("dump region,function", p.returncode == 0 and os.path.exists(os.path.join(d, "function.json")), p.stderr)

s.close()
