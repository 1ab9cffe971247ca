"""Grouped convolutions (ResNeXt, ShuffleNet's grouped 1x1s, depthwise with a
channel multiplier) go to the CPU conv template, one GEMM per (image, group),
with their epilogues (bias per output channel, relu, a residual), and agree
with the reference interpreter and with numpy.  The ResNeXt layer
(128 channels, 32 groups, 56x56) once failed to compile: it fell to the generic
loops, whose accumulators exceeded the local-memory budget."""
import os
import re
import tempfile

import numpy as np

from harp_test import Suite, close, compiled_only, run
compiled_only()  # the grouped convs' compiled numbers, not tier 0's (harp_test.py)

s = Suite("grouped_conv")
rng = np.random.default_rng(5)


def conv_ref(x, w, b=None, stride=1, pad=1, groups=1):
    """NCHW x, OIHW w, symmetric padding: the grouped conv in float64."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    n, c, h, wd = x.shape
    oc, icg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    y = np.zeros((n, oc, oh, ow))
    ocg = oc // groups
    for g in range(groups):
        xg = xp[:, g * icg:(g + 1) * icg]
        wg = w[g * ocg:(g + 1) * ocg]
        for i in range(kh):
            for j in range(kw):
                patch = xg[:, :, i:i + stride * (oh - 1) + 1:stride, j:j + stride * (ow - 1) + 1:stride]
                y[:, g * ocg:(g + 1) * ocg] += np.einsum("nchw,oc->nohw", patch, wg[:, :, i, j])
    if b is not None:
        y += b.astype(np.float64)[None, :, None, None]
    return y


def case(name, text, feeds, want, groups, batch, tol=1e-3):
    """want: the outputs from numpy.  Checks the cpu backend's generated C (the
    conv template, batched over (image, group), nothing declined), then the
    outputs against the interpreter and numpy."""
    path = os.path.join(tempfile.mkdtemp(), name.replace(" ", "_") + ".harp")
    with open(path, "w") as f:
        f.write(text)
    dump = tempfile.mkdtemp()
    p, d = run(path, feeds, extra=["--dump", "c", "--dump-dir", dump], backend="cpu")
    s.check(f"{name}: compiles and runs on cpu", p.returncode == 0, p.stderr.strip()[-400:])
    if p.returncode:
        return
    src = open(os.path.join(dump, "model.c")).read()
    declined = re.findall(r"the template declined \(([^)]*)\)", src)
    s.check(f"{name}: no template declined", not declined, str(declined))
    convs = re.findall(r"/\* ---- model_k\d+_conv: conv \S+ x batch (\d+)x(\d+),", src)
    s.check(f"{name}: on the conv template, batched over (image, group)",
            (str(batch), str(groups)) in convs or (groups == 1 and convs), str(convs))
    q, e = run(path, feeds, backend="interp")
    s.check(f"{name}: interpreter runs", q.returncode == 0, q.stderr.strip()[-400:])
    for out, ref in want.items():
        got = np.load(os.path.join(d, out + ".npy"))
        if q.returncode == 0:
            s.check(f"{name}: {out} vs interpreter",
                    *close(got, np.load(os.path.join(e, out + ".npy")).astype(np.float64), rtol=tol, atol=tol))
        s.check(f"{name}: {out} vs numpy", *close(got, ref, rtol=tol, atol=tol))


def arr(*shape, scale=1.0, dt=np.float32):
    return (rng.standard_normal(shape) * scale).astype(dt)


# groups 2, bias + relu
x, w, b = arr(1, 8, 10, 12), arr(8, 4, 3, 3, scale=0.3), arr(8)
case("groups 2 bias relu",
     "graph main(x: f32[1, 8, 10, 12], w: f32[8, 4, 3, 3], b: f32[8]) -> (y: f32[1, 8, 10, 12]) {\n"
     "    y = relu(conv2d(x, w, bias=b, pad=1, groups=2))\n    return y\n}\n",
     {"x": x, "w": w, "b": b}, {"y": np.maximum(conv_ref(x, w, b, groups=2), 0)}, groups=2, batch=1)

# groups 4, batch 2, a residual then relu (the ResNeXt block's tail)
x, w, b = arr(2, 16, 9, 11), arr(16, 4, 3, 3, scale=0.3), arr(16)
case("groups 4 batch 2 residual",
     "graph main(x: f32[2, 16, 9, 11], w: f32[16, 4, 3, 3], b: f32[16]) -> (y: f32[2, 16, 9, 11]) {\n"
     "    y = relu(x + conv2d(x, w, bias=b, pad=1, groups=4))\n    return y\n}\n",
     {"x": x, "w": w, "b": b}, {"y": np.maximum(x + conv_ref(x, w, b, groups=4), 0)}, groups=4, batch=2)

# groups 4, stride 2, more output channels than input ones (8 per group), batch 2
x, w, b = arr(2, 16, 15, 17), arr(32, 4, 3, 3, scale=0.3), arr(32)
case("groups 4 stride 2 batch 2",
     "graph main(x: f32[2, 16, 15, 17], w: f32[32, 4, 3, 3], b: f32[32]) -> (y: f32[2, 32, 8, 9]) {\n"
     "    y = relu(conv2d(x, w, bias=b, stride=2, pad=1, groups=4))\n    return y\n}\n",
     {"x": x, "w": w, "b": b}, {"y": np.maximum(conv_ref(x, w, b, stride=2, groups=4), 0)}, groups=4, batch=2)

# the ResNeXt-50 conv2 layer: 32 groups of 4 channels at 56x56 (no bias), and
# the same with bias + relu
x, w, b = arr(1, 128, 56, 56), arr(128, 4, 3, 3, scale=0.3), arr(128)
case("resnext 128 channels groups 32",
     "graph main(x: f32[1, 128, 56, 56], w: f32[128, 4, 3, 3], b: f32[128]) -> (y: f32[1, 128, 56, 56]) {\n"
     "    y = conv2d(x, w, pad=1, groups=32)\n    return y\n}\n",
     {"x": x, "w": w, "b": b}, {"y": conv_ref(x, w, groups=32)}, groups=32, batch=1)
case("resnext 128 channels groups 32 bias relu",
     "graph main(x: f32[1, 128, 56, 56], w: f32[128, 4, 3, 3], b: f32[128]) -> (y: f32[1, 128, 56, 56]) {\n"
     "    y = relu(conv2d(x, w, bias=b, pad=1, groups=32))\n    return y\n}\n",
     {"x": x, "w": w, "b": b}, {"y": np.maximum(conv_ref(x, w, b, groups=32), 0)}, groups=32, batch=1)

# a grouped 1x1 (ShuffleNet) and a stride-2 grouped 3x3 at batch 2 in one model
x, w1, w2 = arr(2, 32, 14, 14), arr(64, 8, 1, 1, scale=0.3), arr(64, 2, 3, 3, scale=0.3)
h = np.maximum(conv_ref(x, w1, pad=0, groups=4), 0)
case("grouped 1x1 then groups 32 stride 2",
     "graph main(x: f32[2, 32, 14, 14], w1: f32[64, 8, 1, 1], w2: f32[64, 2, 3, 3]) -> (y: f32[2, 64, 7, 7]) {\n"
     "    h = relu(conv2d(x, w1, groups=4))\n"
     "    y = conv2d(h, w2, stride=2, pad=1, groups=32)\n    return y\n}\n",
     {"x": x, "w1": w1, "w2": w2}, {"y": conv_ref(h, w2, stride=2, groups=32)}, groups=32, batch=2)

# one output channel per group, and depthwise with a channel multiplier (2)
x, w = arr(1, 8, 9, 9), arr(4, 2, 3, 3, scale=0.3)
case("one output channel per group",
     "graph main(x: f32[1, 8, 9, 9], w: f32[4, 2, 3, 3]) -> (y: f32[1, 4, 9, 9]) {\n"
     "    y = conv2d(x, w, pad=1, groups=4)\n    return y\n}\n",
     {"x": x, "w": w}, {"y": conv_ref(x, w, groups=4)}, groups=4, batch=1)
x, w, b = arr(1, 4, 9, 9), arr(8, 1, 3, 3, scale=0.3), arr(8)
case("depthwise multiplier 2",
     "graph main(x: f32[1, 4, 9, 9], w: f32[8, 1, 3, 3], b: f32[8]) -> (y: f32[1, 8, 9, 9]) {\n"
     "    y = conv2d(x, w, bias=b, pad=1, groups=4)\n    return y\n}\n",
     {"x": x, "w": w, "b": b}, {"y": conv_ref(x, w, b, groups=4)}, groups=4, batch=1)

# fp16 storage (fp32 accumulation), bias + relu, batch 2
x, w, b = arr(2, 16, 9, 10, dt=np.float16), arr(16, 2, 3, 3, scale=0.3, dt=np.float16), arr(16, dt=np.float16)
case("fp16 groups 8 bias relu batch 2",
     "graph main(x: f16[2, 16, 9, 10], w: f16[16, 2, 3, 3], b: f16[16]) -> (y: f16[2, 16, 9, 10]) {\n"
     "    y = relu(conv2d(x, w, bias=b, pad=1, groups=8))\n    return y\n}\n",
     {"x": x, "w": w, "b": b}, {"y": np.maximum(conv_ref(x, w, b, groups=8), 0)}, groups=8, batch=2, tol=1e-2)

# the generic loops (no templates) must compile the ResNeXt layer too
os.environ["HARP_NO_TEMPLATES"] = "1"
x, w = arr(1, 128, 56, 56), arr(128, 4, 3, 3, scale=0.3)
path = os.path.join(tempfile.mkdtemp(), "resnext_loops.harp")
with open(path, "w") as f:
    f.write("graph main(x: f32[1, 128, 56, 56], w: f32[128, 4, 3, 3]) -> (y: f32[1, 128, 56, 56]) {\n"
            "    y = conv2d(x, w, pad=1, groups=32)\n    return y\n}\n")
p, d = run(path, {"x": x, "w": w}, backend="cpu")
del os.environ["HARP_NO_TEMPLATES"]
s.check("resnext layer on the generic loops: compiles and runs", p.returncode == 0, p.stderr.strip()[-400:])
if p.returncode == 0:
    s.check("resnext layer on the generic loops vs numpy", *close(np.load(os.path.join(d, "y.npy")), conv_ref(x, w, groups=32)))
s.close()
