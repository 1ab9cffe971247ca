#!/usr/bin/env python3
"""NVRTC compile time of a model's CUDA translation unit with and without
kernel sharing (src/backend/cuda/cuda_dedup.c), no GPU needed.

For each model and architecture: `harp dump --dump cu,gpu --target T` once
with sharing and once with HARP_NO_DEDUP=1, then NVRTC compiles each
model.cu to a cubin with the options of the JIT (cuda_rt.c:
--gpu-architecture=sm_80|sm_90a --std=c++17 -default-device), the two
interleaved, `--reps` times each; prints the kernels before/after and the
median seconds.  Models: bench/models/bert_layers.harp (2 layers) and the
same layer repeated 12 times (bench/e2e.py's bert_model); --dtype f16
makes every tensor fp16 (the GEMMs and the attention on the MMA templates).

    python3 bench/cuda_dedup_time.py [--reps 2] [--layers 2,12] [--targets sm80,sm90] [--dtype f16]
"""
import argparse
import ctypes
import importlib.util
import json
import os
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HARP = os.environ.get("HARP_BIN", os.path.join(ROOT, "build", "harp"))
ARCH = {"sm80": "sm_80", "sm90": "sm_90a"}


def nvrtc():
    for name in ("libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            pass
    raise SystemExit("no NVRTC")


def compile_s(lib, src, arch):
    """Seconds NVRTC takes for src (create + compile + get the cubin)."""
    t0 = time.perf_counter()
    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"model.cu", 0, None, None) == 0
    opts = [f"--gpu-architecture={arch}".encode(), b"--std=c++17", b"-default-device"]
    rc = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    if rc:
        n = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
        log = ctypes.create_string_buffer(n.value + 1)
        lib.nvrtcGetProgramLog(prog, log)
        raise SystemExit(f"NVRTC failed ({arch}): {log.value.decode(errors='replace')[-2000:]}")
    n = ctypes.c_size_t()
    lib.nvrtcGetCUBINSize(prog, ctypes.byref(n))
    buf = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetCUBIN(prog, buf)
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return time.perf_counter() - t0


def model_of(layers, dtype):
    if layers == 2:
        path = os.path.join(ROOT, "bench", "models", "bert_layers.harp")
    else:
        spec = importlib.util.spec_from_file_location("e2e", os.path.join(ROOT, "bench", "e2e.py"))
        e2e = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(e2e)
        path = e2e.bert_model(layers, 768, 12, 3072)
    text = open(path).read().replace("f32[", f"{dtype}[")
    fd, out = tempfile.mkstemp(prefix=f"harp_dedup_bert{layers}_{dtype}_", suffix=".harp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return out


def dump(model, target, share):
    d = tempfile.mkdtemp(prefix="harp_dedup_time_")
    env = dict(os.environ)
    env.pop("HARP_NO_DEDUP", None)
    if not share:
        env["HARP_NO_DEDUP"] = "1"
    subprocess.run([HARP, "dump", model, "--dump", "cu,gpu", "--target", target, "--dump-dir", d], check=True,
                   env=env, capture_output=True)
    g = json.load(open(os.path.join(d, "gpu.json")))["gpu"]
    return open(os.path.join(d, "model.cu")).read(), g


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--layers", default="2,12")
    ap.add_argument("--targets", default="sm80,sm90")
    ap.add_argument("--dtype", default="f32", choices=("f32", "f16"))
    a = ap.parse_args()
    lib = nvrtc()
    print(f"load: {os.getloadavg()}")
    for layers in (int(x) for x in a.layers.split(",")):
        model = model_of(layers, a.dtype)
        for target in a.targets.split(","):
            (src1, g1), (src0, g0) = dump(model, target, True), dump(model, target, False)
            times = {True: [], False: []}
            for r in range(a.reps):  # interleaved, the order alternating
                for share in ((True, False) if r % 2 == 0 else (False, True)):
                    times[share].append(compile_s(lib, src1 if share else src0, ARCH[target]))
            t1, t0 = statistics.median(times[True]), statistics.median(times[False])
            print(f"bert {a.dtype} {layers:2d} layers {target} ({ARCH[target]}): kernels {len(g0['kernels'])} -> "
                  f"{len(g1['kernels'])} ({len(g1['launches'])} launches), source {len(src0) // 1024} -> "
                  f"{len(src1) // 1024} KiB, NVRTC {t0:.1f} s -> {t1:.1f} s ({t0 / t1:.1f}x)  "
                  f"[{', '.join(f'{x:.1f}' for x in times[False])} | {', '.join(f'{x:.1f}' for x in times[True])}]",
                  flush=True)
    print(f"load: {os.getloadavg()}")


main()
