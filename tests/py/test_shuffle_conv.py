"""A channel shuffle (reshape -> permute -> reshape, ShuffleNet's) in front
of a conv: the lowering copies the shuffled tensor into a buffer of its own
(x + 0, one region), so the conv reads a dense input and the conv template
takes it.  Read through the shuffle, the conv's input index has divisions
and the conv ran on generic loops (a depthwise 136x28x28 layer 0.64 ms
instead of ~0.07).  So does an NHWC -> NCHW permute in front of a depthwise
conv, or a reshape of [N, C, H*W] (the templates do not see through a
reshape either); a pad or a slice in front needs no copy.  Values against
the interpreter."""
import re

import numpy as np

from harp_test import Suite, close, run_cpu_and_interp

s = Suite("shuffle_conv")
rng = np.random.default_rng(3)


def case(name, body, tensors, out, want_copy):
    sig = ", ".join(f"{k}: f32[{', '.join(map(str, v.shape))}]" for k, v in tensors.items())
    text = f"graph main({sig}) -> (y: f32[{out}]) {{\n{body}\n    return y\n}}\n"
    got = run_cpu_and_interp(s, name, text, tensors, params=[k for k in tensors if k != "x"])
    if not got:
        return
    c, d, e = got
    kernels = re.findall(r"/\* kernel (\d+): region ([^ ]+) \*/", c)
    conv = [k for k, r in kernels if r == "y"]
    s.check(f"{name}: the conv region is on the conv template",
            len(conv) == 1 and re.search(rf"/\* ---- \w+_k{conv[0]}_conv: ", c), str(kernels))
    copies = [k for k, r in kernels if r != "y"]
    s.check(f"{name}: {'one copy' if want_copy else 'no copy'} in front", len(copies) == (1 if want_copy else 0), str(kernels))
    ok, msg = close(np.load(f"{d}/y.npy"), np.load(f"{e}/y.npy"), rtol=1e-5, atol=1e-5)
    s.check(f"{name}: cpu matches the interpreter", ok, msg)


C = 64
x = rng.standard_normal((1, C, 14, 14)).astype(np.float32)
wd = rng.standard_normal((C, 1, 3, 3)).astype(np.float32)
wf = rng.standard_normal((32, C, 3, 3)).astype(np.float32) * 0.1
b = rng.standard_normal((C,)).astype(np.float32)
shuffle = f"    a = reshape(x, [1, 4, {C // 4}, 14, 14])\n    t = permute(a, [0, 2, 1, 3, 4])\n    u = reshape(t, [1, {C}, 14, 14])\n"
case("depthwise after a shuffle", shuffle + f"    y = conv2d(u, w, bias=b, pad=1, groups={C})", {"x": x, "w": wd, "b": b}, f"1, {C}, 14, 14", True)
case("dense conv after a shuffle", shuffle + "    y = conv2d(u, w, pad=1)", {"x": x, "w": wf}, "1, 32, 14, 14", True)
xn = rng.standard_normal((1, 14, 14, C)).astype(np.float32)
case("conv after NHWC -> NCHW", f"    u = permute(x, [0, 3, 1, 2])\n    y = conv2d(u, w, bias=b, pad=1, groups={C})",
     {"x": xn, "w": wd, "b": b}, f"1, {C}, 14, 14", True)
case("conv after a reshape", f"    u = reshape(x, [1, {C}, 14, 14])\n    y = conv2d(u, w, bias=b, pad=1, groups={C})",
     {"x": x.reshape(1, C, 196), "w": wd, "b": b}, f"1, {C}, 14, 14", True)
case("conv after a pad", f"    u = pad(x, [0, 0, 0, 0, 1, 1, 1, 1])\n    y = conv2d(u, w, bias=b, groups={C})",
     {"x": x, "w": wd, "b": b}, f"1, {C}, 14, 14", False)


# A pad of a slice pads inside the tensor: conv2d(x[1:13], pad=1) reads zeros
# where x holds rows 0 and 13.  The conv and pool templates pad only where an
# index leaves the tensor, and took this read as an unpadded window over x
# (wrong values); it now stays off the templates (src/poly/contract.c).
def values(name, body, tensors, out):
    sig = ", ".join(f"{k}: f32[{', '.join(map(str, v.shape))}]" for k, v in tensors.items())
    text = f"graph main({sig}) -> (y: f32[{out}]) {{\n{body}\n    return y\n}}\n"
    got = run_cpu_and_interp(s, name, text, tensors, params=[k for k in tensors if k != "x"])
    if got:
        ok, msg = close(np.load(f"{got[1]}/y.npy"), np.load(f"{got[2]}/y.npy"), rtol=1e-5, atol=1e-5)
        s.check(f"{name}: cpu matches the interpreter", ok, msg)


sl = "    u = slice(x, [1, 1], [13, 13], [2, 3])\n"
values("depthwise conv over a padded slice", sl + f"    y = conv2d(u, w, bias=b, pad=1, groups={C})", {"x": x, "w": wd, "b": b},
       f"1, {C}, 12, 12")
values("dense conv over a padded slice", sl + "    y = conv2d(u, w, pad=1)", {"x": x, "w": wf}, "1, 32, 12, 12")
values("sum pool over a padded slice", sl + "    p = pad(u, [0, 0, 0, 0, 1, 1, 1, 1])\n    y = avg_pool2d(p, 3, stride=1)",
       {"x": np.abs(x) + 1}, f"1, {C}, 12, 12")
s.close()
