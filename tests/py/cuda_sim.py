"""Run a model's GPU translation unit on the CPU SIMT simulator (tests only).

`harp dump MODEL --dump gpu,cu --target T` gives model.cu (the CUDA C NVRTC
compiles) and gpu.json (the launch list and every buffer of the Function).
This compiles model.cu with g++ against tests/cuda_sim (the very kernel text,
the PTX helpers emulated), lays out one simulator buffer per Function buffer
(temporaries start poisoned with 0xFF, so a read of something no kernel wrote
shows as NaN; every access is bounds-checked against its own buffer), runs
the launches in order, and returns the outputs.  Simulator programs are
cached by a hash of the source (the ASan run of the suite reuses them)."""
import ctypes
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import tempfile

import numpy as np

from harp_test import HARP, MODELS, SRC

NP = {"fp16": np.float16, "fp32": np.float32, "i32": np.int32, "bool": np.bool_}


def bf16_bits(a):
    """float32 values -> bf16 storage (round to nearest even; no NaN inputs here)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    return ((u + 0x7fff + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_values(bits):
    """bf16 storage -> float32 values (bf16 tensors travel as float32 in .npy)."""
    return (bits.astype(np.uint32) << 16).view(np.float32)
CACHE = os.path.join(os.environ.get("HARP_CACHE_DIR", tempfile.gettempdir()), "cusim")
TMAP_MAGIC = 0x484B544D41500001


GPU_MODELS = os.path.join(MODELS, "gpu")
# The GPU test models (issue 8, plus the transformer block): name, model,
# --sym bindings, {launch kind: at least n}.  Small shapes: the simulator
# runs every CUDA thread as a fiber.
CASES = [
    ("gemm_tail", os.path.join(GPU_MODELS, "gemm_tail.harp"), (), {"template": 1}),
    ("gemm_bcast", os.path.join(GPU_MODELS, "gemm_bcast.harp"), (), {"template": 1}),
    ("gemm_rows_bcast", os.path.join(GPU_MODELS, "gemm_rows_bcast.harp"), (), {"template": 1}),
    ("gemm_bias_relu", os.path.join(MODELS, "seed000_gemm_bias_relu.json"), ("M=80", "N=72", "K=48"), {"template": 1}),
    ("conv3x3_s1", os.path.join(GPU_MODELS, "conv3x3_s1.harp"), (), {"template": 1}),
    ("conv3x3_s2", os.path.join(GPU_MODELS, "conv3x3_s2.harp"), (), {"template": 1}),
    ("conv_grouped", os.path.join(GPU_MODELS, "conv_grouped.harp"), (), {"template": 2}),
    ("epi_mul_shift", os.path.join(GPU_MODELS, "epi_mul_shift.harp"), (), {"template": 5}),
    ("conv_skip_tail", os.path.join(GPU_MODELS, "conv_skip_tail.harp"), (), {"template": 2}),
    ("conv_chain", os.path.join(GPU_MODELS, "conv_chain.harp"), (), {"template": 3}),
    ("attention", os.path.join(MODELS, "attention_full_fp16.json"), ("B=1", "H=2", "M=40", "N=40", "D=16", "Dv=16"),
     {"template": 1}),
    ("attention_causal", os.path.join(MODELS, "attention_full_causal_fp16.json"),
     ("B=1", "H=2", "M=40", "N=40", "D=16", "Dv=16"), {"template": 1}),
    ("layernorm", os.path.join(MODELS, "layernorm_fp16.json"), ("R=24",), {"simple": 1}),
    ("softmax", os.path.join(MODELS, "softmax_rows.json"), ("R=24", "L=100"), {"simple": 1}),
    ("softmax_half", os.path.join(GPU_MODELS, "softmax_half.harp"), (), {"simple": 3}),
    ("rows_mixed", os.path.join(GPU_MODELS, "rows_mixed.harp"), (), {"simple": 3, "generic": 1}),
    ("transformer_fp16", os.path.join(GPU_MODELS, "transformer_block_fp16.harp"), (), {"template": 6}),
    ("transformer", os.path.join(SRC, "examples", "transformer_block.harp"), ("B=1", "S=8"), {}),
    ("fp32_block", os.path.join(GPU_MODELS, "fp32_block.harp"), (), {"template": 3}),
    # fp32 B stored [K][N] at 2^20+ MACs: on sm90 packed K-major (TF32) into scratch for wgmma
    # (weights packed once: test_cuda_precision.py's matmul_weight, test_cuda_fake.c)
    ("matmul_nmajor", os.path.join(GPU_MODELS, "fp32_matmul_nmajor.harp"), (), {"template": 1}),
]


def feeds_of(g, rng):
    """Random inputs for the model of gpu.json `g` (small: fp16 chains stay
    O(1), so a one-ulp flip of an intermediate rounding stays in tolerance;
    i32 tensors are indices 0..2)."""
    feeds = {}
    for b in g["buffers"]:
        if b["space"] in ("input", "weights") and b["name"] not in feeds:
            if b["dtype"] == "i32":
                feeds[b["name"]] = rng.integers(0, 3, size=b["shape"]).astype(np.int32)
            else:
                x = rng.uniform(-0.3, 0.3, size=b["shape"])
                feeds[b["name"]] = bf16_values(bf16_bits(x)) if b["dtype"] == "bf16" else x.astype(NP[b["dtype"]])
    return feeds


def have_gxx():
    return shutil.which("g++") is not None


def dump(model, target, syms=(), outdir=None, extra=()):
    """harp dump --dump gpu,cu (+ extra options); returns (process, dir)."""
    d = outdir or tempfile.mkdtemp(prefix="harp_gpu_")
    args = [HARP, "dump", model, "--dump", "gpu,cu", "--target", target, "--dump-dir", d, *extra]
    for s in syms:
        args += ["--sym", s]
    return subprocess.run(args, capture_output=True, text=True, timeout=300), d


def dump_regions(model, target, syms=()):
    """harp dump --dump region (the regions formed for target); returns (process, dir)."""
    d = tempfile.mkdtemp(prefix="harp_rg_")
    args = [HARP, "dump", model, "--dump", "region", "--target", target, "--dump-dir", d]
    for s in syms:
        args += ["--sym", s]
    return subprocess.run(args, capture_output=True, text=True, timeout=300), d


def _sim_main(sim_dir, common):
    """The simulator's launcher, compiled once (cached by the simulator's sources)."""
    obj = os.path.join(CACHE, f"main-{common[:16]}.o")
    if os.path.exists(obj):
        return obj, None
    tmp = f"{obj}.tmp{os.getpid()}"
    p = subprocess.run(["g++", "-std=c++17", "-O1", "-w", "-DHK_SIM", "-include", os.path.join(sim_dir, "hk_sim.h"),
                        "-x", "c++", os.path.join(sim_dir, "hk_sim_main.cc"), "-c", "-o", tmp],
                       capture_output=True, text=True, timeout=600)
    if p.returncode:
        return None, p.stderr[-3000:]
    os.replace(tmp, obj)
    return obj, None


def build(src_path):
    """The simulator program for one model.cu (cached by content)."""
    src = open(src_path, "rb").read()
    sim_dir = os.path.join(SRC, "tests", "cuda_sim")
    common = hashlib.sha256(open(os.path.join(sim_dir, "hk_sim.h"), "rb").read()
                            + open(os.path.join(sim_dir, "hk_sim_main.cc"), "rb").read()).hexdigest()
    h = hashlib.sha256(src + common.encode()).hexdigest()[:24]
    os.makedirs(CACHE, exist_ok=True)
    exe = os.path.join(CACHE, h)
    if os.path.exists(exe):
        return exe, None
    main_o, err = _sim_main(sim_dir, common)
    if not main_o:
        return None, err
    tmp = f"{exe}.tmp{os.getpid()}"
    p = subprocess.run(["g++", "-std=c++17", "-O1", "-w", "-DHK_SIM", "-include", os.path.join(sim_dir, "hk_sim.h"),
                        "-x", "c++", src_path, "-x", "none", main_o, "-o", tmp, "-rdynamic", "-ldl"],
                       capture_output=True, text=True, timeout=600)
    if p.returncode:
        return None, p.stderr[-3000:]
    os.replace(tmp, exe)
    return exe, None


def tmap_at(tm, sv):
    """The dims and strides of map tm at the symbols' values sv: a ShapeSet
    build's run-time ones (dims_at_run_time, strides_bytes_at_run_time:
    lit x sv[i] x ..) evaluated, as the runtime does (cuda_tmap_at)."""
    def at(vals, rt):
        out = list(vals)
        for i, z in enumerate(rt or []):
            if z is not None:
                out[i] = z["lit"] * int(np.prod([sv[j] for j in z["syms"]]))
        return out
    return at(tm["dims"], tm.get("dims_at_run_time")), at(tm["strides_bytes"], tm.get("strides_bytes_at_run_time"))


def tmap_blob(tm, buf_id, offset, sv=None):
    """The simulator's encoding of a CUtensorMap (tests/cuda_sim/hk_sim.h),
    at the symbols' values sv (a ShapeSet build; None: the map as dumped)."""
    v = [0] * 32
    v[0], v[1] = TMAP_MAGIC, buf_id
    v[2] = 2 if tm["dtype"] in ("fp16", "bf16") else 4
    dims, strides = tmap_at(tm, sv) if sv is not None else (tm["dims"], tm["strides_bytes"])
    box = tm["box"]
    # cuTensorMapEncodeTiled documents strides as multiples of 16 laid out
    # from the extents; a zero stride (a broadcast) is not promised to work
    bad = [x for x in strides if x <= 0 or x % 16]
    if bad:
        raise ValueError(f"tensor map {tm['tensor']}: stride(s) {bad} not a positive multiple of 16")
    v[3] = len(dims)
    for i, x in enumerate(dims):
        v[4 + i] = x
    for i, x in enumerate(strides):
        v[9 + i] = x
    for i, x in enumerate(box[:4]):
        v[13] |= x << (16 * i)
    v[14] = 3 if tm["swizzle"] == "128B" else 0
    v[15] = offset
    return struct.pack("<32Q", *v)


def serves(kernel, sv):
    """Whether kernel (one of a pair: its "serves") serves the binding sv,
    as the runtime decides (cuda_kernel_own_at): every stride a multiple of
    16 bytes there (an aligned kernel), or one not (the other)."""
    own = kernel.get("serves")
    if not own or sv is None:
        return True
    aligned = all(z["lit"] * int(np.prod([sv[j] for j in z["syms"]])) % 16 == 0 for z in own["strides_bytes"])
    return aligned == own["aligned"]


def grid_x(launch, kernel, sv, axis=0):
    """grid.x (axis 1: grid.y) of a launch: the kernel's, or at the symbols'
    values sv (a ShapeSet build's run-time grid, region_cuda.h
    cuda_launch_grid: "grid_x" or "grid_y")."""
    gx = launch.get("grid_y" if axis else "grid_x")
    if not gx or sv is None:
        return kernel["grid"][axis]
    n = gx["lit"]
    for j in gx["syms"]:
        n *= sv[j]
    for t in gx.get("tiles", []):  # tile counts (Winograd's P): (lit x syms + add) // per
        n *= (t["lit"] * int(np.prod([sv[j] for j in t["syms"]])) + t["add"]) // t["per"]
    return max(1, min(kernel["grid"][axis], -(-n // gx["div"])))


def run(gpu_dir, inputs, seed=1, timeout=600, edit=None, reverse=False, sv=None, out_shapes=None):
    """Run the translation unit in gpu_dir on `inputs` (tensor name -> array).
    edit(g) may change the loaded gpu.json first (tests that must fail);
    reverse runs every launch's CTAs last to first.  A ShapeSet build
    (harp dump --shapeset) runs at the binding sv (its symbols' values, in
    gpu.json's "syms" order): inputs at the binding's shapes, each buffer
    still the corner hi's size (the rest poisoned), the outputs' first
    elements shaped by out_shapes (name -> shape); an output written past
    them (its poison gone) is an error.
    Returns (outputs: name -> array, error text or None)."""
    g = json.load(open(os.path.join(gpu_dir, "gpu.json")))["gpu"]
    if edit:
        edit(g)
    exe, err = build(os.path.join(gpu_dir, "model.cu"))
    if not exe:
        return None, "g++ failed:\n" + err
    work = tempfile.mkdtemp(prefix="harp_cusim_")
    bufs = g["buffers"]
    nb = len(bufs)
    scratch, status, packed = nb, nb + 1, nb + 2
    lines, outs = ["reverse"] if reverse else [], {}
    for b in bufs:
        path = "-"
        if b["space"] in ("input", "weights") and b["bytes"]:  # an empty tensor: nothing to read
            a = inputs[b["name"]]
            a = bf16_bits(a) if b["dtype"] == "bf16" else np.ascontiguousarray(a).astype(NP[b["dtype"]])
            path = os.path.join(work, f"b{b['id']}.bin")
            raw = a.tobytes()
            open(path, "wb").write(raw + b"\xff" * (b["bytes"] - len(raw)))  # a binding below hi: poisoned rest
        lines.append(f"buf {b['id']} {max(b['bytes'], 1)} {path}")
        if b["space"] == "output":
            outs[b["id"]] = b
    zeros = os.path.join(work, "zeros.bin")
    open(zeros, "wb").write(bytes(256))
    lines.append(f"buf {scratch} {max(g['memory']['scratch_bytes'], 16)} -")
    lines.append(f"buf {status} 256 {zeros}")
    lines.append(f"buf {packed} {max(g['memory'].get('packed_bytes', 0), 16)} -")
    kernels = {k["name"]: k for k in g["kernels"]}
    nextid = nb + 3
    for l in g["launches"]:
        k = kernels[l["kernel"]]
        ps = []
        for prm, a in zip(k["params"], l["args"]):
            sp = a["space"]
            if sp == "null":
                ps.append("0")
                continue
            if sp == "sym":
                ps.append(f"v{(sv if sv is not None else [s['hi'] for s in g['syms']])[a['sym']]}")
                continue
            bid = {"scratch": scratch, "status": status, "packed": packed}.get(sp, a.get("buffer"))
            off = a.get("byte_offset", 0)
            if prm["kind"] == "tensor_map":
                path = os.path.join(work, f"m{nextid}.bin")
                try:
                    # a pair's kernel at a binding it does not serve: the map as generated (it returns at once)
                    blob = tmap_blob(prm["tensor_map"], bid, off, sv if serves(k, sv) else None)
                except ValueError as ex:
                    return None, str(ex)
                open(path, "wb").write(blob)
                lines.append(f"buf {nextid} 256 {path}")
                ps.append(f"m{nextid}")
                nextid += 1
            else:
                ps.append(f"b{bid}+{off}")
        gr, bl = k["grid"], k["block"]
        lines.append(f"launch {k['name']} {grid_x(l, k, sv)} {grid_x(l, k, sv, 1)} {gr[2]} {bl[0]} {bl[1]} {bl[2]} {k['smem_bytes']} {len(ps)} {' '.join(ps)}")
    for bid in outs:
        lines.append(f"out {bid} {os.path.join(work, f'o{bid}.bin')}")
    lines.append(f"out {status} {os.path.join(work, 'status.bin')}")
    job = os.path.join(work, "job.txt")
    open(job, "w").write("\n".join(lines) + "\n")
    p = subprocess.run([exe, job, str(seed)], capture_output=True, text=True, timeout=timeout)
    if p.returncode:
        return None, f"simulator exit {p.returncode}: {p.stderr[-2000:]}"
    st = struct.unpack("<i", open(os.path.join(work, "status.bin"), "rb").read()[:4])[0]
    if st:
        return None, f"status word {st}: a kernel stopped on a bad index"
    res = {}
    for bid, b in outs.items():
        bf = b["dtype"] == "bf16"
        a = np.fromfile(os.path.join(work, f"o{bid}.bin"), dtype=np.uint16 if bf else NP[b["dtype"]])
        a = bf16_values(a) if bf else a
        shape = (out_shapes or {}).get(b["name"], b["shape"])
        n = int(np.prod(shape))
        raw = open(os.path.join(work, f"o{bid}.bin"), "rb").read()
        if out_shapes and raw[n * a.itemsize:b["bytes"]].strip(b"\xff"):
            return None, f"output {b['name']} written past the binding's {n} elements"
        res[b["name"]] = a[:int(np.prod(shape))].reshape(shape)
    shutil.rmtree(work, ignore_errors=True)
    return res, None


def nvrtc_ok(src, arch, want_ptx=False):
    """Compile src with NVRTC (ctypes) for arch; cached by content.  Returns
    (ok, log) — ok None without NVRTC — or, with want_ptx, (ok, log, ptx)."""
    key = hashlib.sha256(src.encode() + arch.encode()).hexdigest()[:24]
    cache = os.path.join(os.path.dirname(CACHE), "nvrtc-py")
    os.makedirs(cache, exist_ok=True)
    hit = os.path.join(cache, key)
    if os.path.exists(hit) and (not want_ptx or os.path.getsize(hit) > 2):
        ptx = open(hit).read()
        return (True, "", ptx) if want_ptx else (True, "")
    lib = None
    for name in ("libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so"):
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            pass
    if lib is None:
        return (None, "no NVRTC", "") if want_ptx else (None, "no NVRTC")
    prog = ctypes.c_void_p()
    if lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"model.cu", 0, None, None):
        return (False, "nvrtcCreateProgram failed", "") if want_ptx else (False, "nvrtcCreateProgram failed")
    opts = (ctypes.c_char_p * 1)(f"--gpu-architecture={arch}".encode())
    rc = lib.nvrtcCompileProgram(prog, 1, opts)
    n = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    log = ctypes.create_string_buffer(n.value + 1)
    lib.nvrtcGetProgramLog(prog, log)
    ptx = ""
    if rc == 0:
        lib.nvrtcGetPTXSize(prog, ctypes.byref(n))
        buf = ctypes.create_string_buffer(n.value + 1)
        lib.nvrtcGetPTX(prog, buf)
        ptx = buf.value.decode(errors="replace")
        open(hit, "w").write(ptx)
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    log = log.value.decode(errors="replace")[-2000:]
    return (rc == 0, log, ptx) if want_ptx else (rc == 0, log)


def ptx_entry(ptx, name):
    """The PTX text of kernel `name` (up to the next .entry), or None."""
    m = re.search(r"\.entry %s\(" % re.escape(name), ptx)
    if not m:
        return None
    nxt = ptx.find(".entry ", m.end())
    return ptx[m.start():nxt if nxt > 0 else len(ptx)]


def session_counts(s, what, model, target, binds, fixed=(), extra=(), env=None, fails=False):
    """`harp bench --bind` over binds (one session, graphs; extra options,
    env added to the environment) on the fake libcuda as a device of target:
    its counters and stderr (None when the fake or NVRTC is not there).
    fails: the run must fail (None and its stderr)."""
    fake = os.path.join(os.path.dirname(os.path.abspath(HARP)), "tests", "libharp_fake_cuda.so")
    if not os.path.exists(fake):
        print(f"{what}: no fake libcuda ({fake}), the session not checked")
        return None, ""
    args = [HARP, "bench", model, "--backend", "cuda", "--target", target, "--graphs", "--repeat", "1",
            "--warmup", "0", "--json", *[x for f in fixed for x in ("--sym", f)], *[x for b in binds for x in ("--bind", b)],
            *extra]
    env = {**os.environ, "HARP_LIBCUDA": fake, "HARP_FAKE_CUDA_CC": "9.0" if target == "sm90" else "8.0", **(env or {})}
    p = subprocess.run(args, capture_output=True, text=True, timeout=600, env=env)
    if p.returncode and "NVRTC" in p.stderr:
        print(f"{what}: no NVRTC, the session not checked: {p.stderr.strip()[-300:]}")
        return None, p.stderr
    if fails:
        s.check(f"{what}: refused", p.returncode != 0 and "error" in p.stderr, p.stderr[-2000:])
        return None, p.stderr
    s.check(f"{what}: the session runs on the fake libcuda", p.returncode == 0, p.stderr[-2000:])
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])["session"], p.stderr
    except (ValueError, IndexError, KeyError):
        s.check(f"{what}: the session's JSON", False, p.stdout[-1000:])
        return None, p.stderr
