#!/usr/bin/env python3
"""cuda_session_hw.py — issue 25's build counts of CNN sessions over the
image size H, W (no GPU needed: the fake libcuda counts, NVRTC compiles):

    python3 bench/cuda_session_hw.py [--harp build/harp] [--fake build/tests/libharp_fake_cuda.so]
                                     [--only resnet18,mobilenetv2] [--targets sm80,sm90] [--fix C,K]

Models: ResNet-18 and MobileNetV2 as ONNX graphs (tests/py/onnx_models.py,
random weights) whose input is [1, 3, H, W] (dim_params H, W).  Each runs
`harp bench --backend cuda --graphs --bind ...` at three bindings of one
ShapeSet box (H, W in 129..256) through one session and prints its
counters (ShapeSets, builds, box builds, fallbacks) and what stderr says
of a box built per binding, as a Markdown table for bench/RESULTS.md.
Counts, not timings: the fake executes no kernel."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "py"))
import onnx_models as om  # noqa: E402
from model_weights import resnet18_weights  # noqa: E402

BINDS = ["H=224,W=224", "H=200,W=176", "H=160,W=192"]


def rand(*shape, scale=1.0):
    return (np.random.default_rng(len(shape) + sum(shape)).standard_normal(shape) * scale).astype(np.float32)


def mnv2_weights():
    """bench/e2e.py's mobilenetv2_weights' names and shapes (random)."""
    t = {"w0": rand(32, 3, 3, 3, scale=0.27), "b0": rand(32, scale=0.1)}
    for i, (c, e, d, _) in enumerate(om.mobilenetv2_blocks(), 1):
        if e != c:
            t[f"e{i}"], t[f"eb{i}"] = rand(e, c, 1, 1, scale=(2 / c) ** 0.5), rand(e, scale=0.1)
        t[f"d{i}"], t[f"db{i}"] = rand(e, 1, 3, 3, scale=0.47), rand(e, scale=0.1)
        t[f"p{i}"], t[f"pb{i}"] = rand(d, e, 1, 1, scale=(1 / e) ** 0.5), rand(d, scale=0.1)
    t["wl"], t["bl"] = rand(1280, 320, 1, 1, scale=0.08), rand(1280, scale=0.1)
    t["wf"], t["bf"] = rand(1280, 1000, scale=0.03), rand(1000, scale=0.1)
    return t


def model_hw(name, d):
    """The ONNX model name with its input's height and width the dim_params H, W, written into d."""
    m = om.resnet18(resnet18_weights(rand)) if name == "resnet18" else om.mobilenetv2(mnv2_weights(), om.mobilenetv2_blocks())
    dims = m.graph.input[0].type.tensor_type.shape.dim
    dims[2].dim_param, dims[3].dim_param = "H", "W"
    path = os.path.join(d, f"{name}_hw.onnx")
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    return path


def session(harp, fake, path, target, fix):
    """(counters or None, the per-binding notes / the error) of one session."""
    args = [harp, "bench", path, "--backend", "cuda", "--target", target, "--graphs", "--repeat", "1", "--warmup", "0",
            "--json", *[x for b in BINDS for x in ("--bind", b)], *(("--fix", fix) if fix else ())]
    env = dict(os.environ, HARP_LIBCUDA=fake, HARP_FAKE_CUDA_CC="9.0" if target == "sm90" else "8.0")
    p = subprocess.run(args, capture_output=True, text=True, env=env, timeout=3600)
    notes = "; ".join(line.split("builds per binding: ", 1)[1][:160] for line in p.stderr.splitlines()
                      if "builds per binding" in line)
    if p.returncode:
        return None, p.stderr.strip()[-300:]
    return json.loads(p.stdout.strip().splitlines()[-1])["session"], notes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--harp", default=os.path.join(ROOT, "build", "harp"))
    ap.add_argument("--fake", default=os.path.join(ROOT, "build", "tests", "libharp_fake_cuda.so"))
    ap.add_argument("--only", default="resnet18,mobilenetv2")
    ap.add_argument("--targets", default="sm80,sm90")
    ap.add_argument("--fix", default="", help="--fix for the sessions (empty: none)")
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="harp_shw_")
    print(f"bindings: {', '.join(BINDS)}; --fix {a.fix or '(none)'}\n")
    print("| model | target | ShapeSets | builds | box builds | fallbacks | learned | per-binding note |")
    print("|---|---|---|---|---|---|---|---|")
    for name in a.only.split(","):
        path = model_hw(name, d)
        for target in a.targets.split(","):
            st, notes = session(a.harp, a.fake, path, target, a.fix)
            if st is None:
                print(f"| {name} | {target} | error: {notes} | | | | | |", flush=True)
                continue
            print(f"| {name} | {target} | {st['clusters']} | {st['builds']} | {st['box_builds']} | {st['box_fallbacks']} | "
                  f"{st.get('box_learned', '-')} | {notes or '-'} |", flush=True)


if __name__ == "__main__":
    main()
