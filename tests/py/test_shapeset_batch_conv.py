"""A ShapeSet object's convs whose batch alone is read at run time
(contract_conv_img.c): a ResNet-style down block (3x3/2 conv + relu, 1x1/2
shortcut, 3x3 conv + residual + relu, 14x14 -> 7x7) over the box N = 1..5
is one object whose direct 3x3 convs run one image at a time on the
constant-size kernel (its model.c from `harp compile --shapeset` says so);
its outputs at N = 1, 2, 3, 5 against numpy, with the weights packed at
model_init (--param) and as plain inputs (read each run: the run-time
kernel, which packs them once a call, not once an image)."""
import os
import re
import subprocess
import tempfile

import numpy as np

from harp_test import HARP, Suite, close

s = Suite("shapeset_batch_conv")
rng = np.random.default_rng(11)
d = tempfile.mkdtemp()
MODEL = os.path.join(d, "down_block.harp")
with open(MODEL, "w") as f:
    f.write("""// 3x3/2 conv + relu, 1x1/2 shortcut, 3x3 conv + residual + relu
graph<N=1> main(x: f32[N, 16, 14, 14], w1: f32[32, 16, 3, 3], b1: f32[32], w2: f32[32, 32, 3, 3], b2: f32[32],
                wd: f32[32, 16, 1, 1]) -> (y: f32[N, 32, 7, 7]) {
    h = relu(conv2d(x, w1, bias=b1, stride=2, pad=1))
    s = conv2d(x, wd, stride=2)
    y = relu(s + conv2d(h, w2, bias=b2, pad=1))
    return y
}
""")
W = {"w1": rng.standard_normal((32, 16, 3, 3)).astype(np.float32) * 0.2, "b1": rng.standard_normal(32).astype(np.float32),
     "w2": rng.standard_normal((32, 32, 3, 3)).astype(np.float32) * 0.1, "b2": rng.standard_normal(32).astype(np.float32),
     "wd": rng.standard_normal((32, 16, 1, 1)).astype(np.float32) * 0.2}


def conv(x, w, stride=1, pad=0):
    """NCHW conv in float64 (numpy's reference)."""
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    y = np.zeros((n, o, oh, ow))
    for i in range(kh):
        for j in range(kw):
            xs = x[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
            y += np.einsum("nchw,oc->nohw", xs, w[:, :, i, j].astype(np.float64))
    return y


def reference(x):
    h = np.maximum(conv(x, W["w1"], 2, 1) + W["b1"][None, :, None, None], 0)
    return np.maximum(conv(x, W["wd"], 2) + conv(h, W["w2"], 1, 1) + W["b2"][None, :, None, None], 0)


wfiles = {}
for k, a in W.items():
    wfiles[k] = os.path.join(d, f"{k}.npy")
    np.save(wfiles[k], a)

# the code: one object for the box, the 3x3 convs a loop over this binding's images
pkg = os.path.join(d, "pkg")
p = subprocess.run([HARP, "compile", MODEL, "--target", "cpu", "--shapeset", "N=1..5", "-o", pkg,
                    *sum((["--param", f"{k}={v}"] for k, v in wfiles.items()), [])], capture_output=True, text=True)
s.check("compile --shapeset: one object", p.returncode == 0 and "one object" in p.stdout, (p.stdout + p.stderr)[-600:])
src = open(os.path.join(pkg, "model.c")).read() if p.returncode == 0 else ""
loops = re.findall(r"for \(long i_ = 0; i_ < n_; i_\+\+\)", src)
s.check("the two 3x3 convs run an image at a time", len(loops) >= 2, f"{len(loops)} per-image loops")
s.check("their kernels have constant sizes (batch 1)", len(re.findall(r"conv \d+x49x\d+ x batch 1x1", src)) >= 2,
        "no one-image conv kernel in model.c")

# weights as inputs: no per-image loop
p = subprocess.run([HARP, "compile", MODEL, "--target", "cpu", "--shapeset", "N=1..5", "-o", pkg + "_in",
                    *sum((["--input", f"{k}={v}"] for k, v in wfiles.items()), [])], capture_output=True, text=True)
src = open(os.path.join(pkg + "_in", "model.c")).read() if p.returncode == 0 else "for (long i_ = 0; i_ < n_; i_++)"
s.check("weights as inputs: the run-time kernel (no per-image weight packing)", p.returncode == 0 and "i_ < n_" not in src,
        (p.stdout + p.stderr)[-300:])

for kind in ("param", "input"):  # packed once at model_init, or read each run
    for n in (1, 3, 5, 2):
        x = rng.standard_normal((n, 16, 14, 14)).astype(np.float32)
        xf, out = os.path.join(d, "x.npy"), tempfile.mkdtemp(dir=d)
        np.save(xf, x)
        args = [HARP, "run", MODEL, "--shapeset", "N=1..5", "--input", f"x={xf}", "--out", out, "--time-stages"]
        for k, v in wfiles.items():
            args += [f"--{kind}", f"{k}={v}"]
        p = subprocess.run(args, capture_output=True, text=True)
        s.check(f"weights as {kind}, N={n}: one object", p.returncode == 0 and "one object for the box" in p.stderr,
                p.stderr[-600:])
        got = np.load(os.path.join(out, "y.npy")) if p.returncode == 0 else np.zeros(0)
        ok, msg = close(got, reference(x), rtol=1e-4, atol=1e-4)
        s.check(f"weights as {kind}, N={n}: numpy's numbers", ok, msg)
s.close()
