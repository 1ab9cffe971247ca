"""ONNX Resize and Upsample (src/frontend/onnx_resize.c) against
onnxruntime: every mode (nearest, linear, cubic, antialias), coordinate
transformation, nearest_mode, cubic_coeff_a / exclude_outside,
tf_crop_and_resize with its roi and extrapolation value, scales and sizes,
axes and keep_aspect_ratio_policy, fractional and whole factors up and down,
opset 10's and Upsample's rounding, float16 and int32 data; on the
interpreter and the cpu backend.  A configuration onnxruntime itself refuses
(cubic on a 3-D tensor, ...) is left out.  Then the graph each map takes
(no gather for whole factors, a gather for fractional ones) and the
refusals, each a clear error naming the node."""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import harp_test as ht  # noqa: E402

ht.onnx_or_skip()
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto  # noqa: E402
from onnx_models import init, mk, model, vi  # noqa: E402

rng = np.random.default_rng(11)
ort.set_default_logger_severity(3)
S = ht.Suite("onnx_resize")
BACKENDS = [b for b in ("interp", "cpu") if b in ht.BACKENDS]
CTMS = ["half_pixel", "asymmetric", "pytorch_half_pixel", "tf_half_pixel_for_nn", "align_corners", "half_pixel_symmetric"]
NMS = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]


def save(m):
    path = os.path.join(ht.tempfile.mkdtemp(), "m.onnx")
    onnx.save(m, path)
    return path


def ort_run(path, feeds):
    so = ort.SessionOptions()
    so.log_severity_level = 4  # the configurations it refuses are expected
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, feeds)


class Batch:
    """Resize nodes on one input, each checked alone against onnxruntime
    (a configuration it refuses is dropped), then run by harp in one model."""

    def __init__(self, name, x, opset=19, op="Resize"):
        self.name, self.x, self.opset, self.op = name, x, opset, op
        self.nodes, self.inits, self.outs, self.want, self.masks = [], [], [], [], []
        self.dtype = onnx.helper.np_dtype_to_tensor_dtype(x.dtype)

    def add(self, label, scales=None, sizes=None, roi=None, mask=None, **attrs):
        k = len(self.outs)
        ins, inits = ["x"], []
        if self.op == "Resize" and self.opset >= 11:
            ins += [f"roi{k}" if roi is not None else "", f"sc{k}" if scales is not None else "", f"sz{k}" if sizes is not None else ""]
            if roi is not None:
                inits.append(init(f"roi{k}", np.array(roi, np.float32)))
        elif scales is not None and self.op == "Upsample" and self.opset < 9:
            attrs["scales"], scales = [float(v) for v in scales], None
        elif scales is not None:
            ins.append(f"sc{k}")
        if scales is not None:
            inits.append(init(f"sc{k}", np.array(scales, np.float32)))
        if sizes is not None:
            inits.append(init(f"sz{k}", np.array(sizes, np.int64)))
        while ins and ins[-1] == "":
            ins.pop()
        node = mk(self.op, ins, [f"y{k}"], **attrs)
        one = model([node], [vi("x", self.x.shape, self.dtype)], [vi(f"y{k}", None, self.dtype)], inits, self.opset)
        try:
            w = ort_run(save(one), {"x": self.x})[0]
        except Exception:  # onnxruntime does not run this configuration
            return
        self.nodes.append(node)
        self.inits += inits
        self.outs.append((f"y{k}", label))
        self.want.append(w)
        self.masks.append(mask(w.shape) if mask else None)

    def check(self, rtol=1e-4, atol=1e-5):
        kept = [k.mean() for k in self.masks if k is not None and k.size]
        if kept:
            S.check(f"{self.name}: the ties left out are few", np.mean(kept) > 0.75, f"{np.mean(kept):.3f} kept")
        m = model(self.nodes, [vi("x", self.x.shape, self.dtype)], [vi(o, None, self.dtype) for o, _ in self.outs], self.inits,
                  self.opset)
        path = save(m)
        for be in BACKENDS:
            res, err = ht.run_model(path, {"x": self.x}, backend=be)
            S.check(f"{self.name} ({len(self.outs)} resizes) {be}: runs", err is None, (err or "")[-600:])
            if err:
                continue
            for (o, label), w, keep in zip(self.outs, self.want, self.masks):
                got = res[o]
                if keep is not None and got.shape == w.shape:
                    got, w = got[keep], w[keep]
                ok, why = ht.close(got, w, rtol=rtol, atol=atol)
                if got.dtype != w.dtype:
                    ok, why = False, f"dtype {got.dtype} != {w.dtype}"
                S.check(f"{self.name} {be} {label}: matches onnxruntime", ok, why)
        return len(self.outs)


def rand(*shape):
    return rng.standard_normal(shape).astype(np.float32)


# ---- nearest: every coordinate mode and rounding, fractional and whole factors ---------------------
# Where an output's coordinate is a rounding boundary up to float error (x.5
# for the round modes, a whole number for floor and ceil: 1 / (2/7) is 3.5 or
# 3.4999998), onnxruntime's arithmetic and harp's fp32 one (the ONNX
# reference's too) may fall either side; those outputs are left out, the
# rest must be equal.
def coords(ctm, o, sc, n_out, n_in):
    sc = float(np.float32(sc))
    if ctm == "asymmetric":
        return o / sc
    if ctm in ("half_pixel", "pytorch_half_pixel"):
        return (o + 0.5) / sc - 0.5 if n_out > 1 or ctm == "half_pixel" else 0 * o
    if ctm == "tf_half_pixel_for_nn":
        return (o + 0.5) / sc
    if ctm == "align_corners":
        return o * (n_in - 1) / (n_out - 1) if n_out > 1 else 0 * o
    adj = n_out / (sc * n_in)  # half_pixel_symmetric
    return n_in / 2 * (1 - adj) + (o + 0.5) / sc - 0.5


# What exporters write (PyTorch's nearest and nearest-exact, TensorFlow's and
# Paddle's): compared at every element.
EXPORTED = {("asymmetric", "floor"), ("half_pixel", "round_prefer_floor"), ("asymmetric", "round_prefer_floor"),
            ("tf_half_pixel_for_nn", "floor"), ("align_corners", "round_prefer_floor")}


def off_ties(ctm, nm, x_shape, scales=None, sizes=None):
    def mask(shape):
        keep = np.ones(shape, bool)
        for ax in range(len(shape)):
            n_in, n_out = x_shape[ax], shape[ax]
            sc = scales[ax] if scales is not None else n_out / n_in
            if n_in == n_out and sc == 1:
                continue
            x = coords(ctm, np.arange(n_out, dtype=np.float64), sc, n_out, n_in)
            frac = x - np.floor(x)
            tie = np.abs(frac - 0.5) < 1e-4 if nm.startswith("round") else np.minimum(frac, 1 - frac) < 1e-4
            sl = [None] * len(shape)
            sl[ax] = slice(None)
            keep &= ~tie[tuple(sl)]
        return keep
    return mask


SIZES = [(9, 4), (8, 14), (3, 2), (31, 13)]
b = Batch("nearest", rand(1, 2, 5, 7))
for ctm in CTMS:
    for nm in NMS:
        for hw in SIZES:
            b.add(f"{ctm} {nm} -> {hw}", sizes=[1, 2, *hw], mode="nearest", coordinate_transformation_mode=ctm, nearest_mode=nm,
                  mask=None if (ctm, nm) in EXPORTED else off_ties(ctm, nm, b.x.shape))
    if ctm not in ("align_corners", "pytorch_half_pixel"):  # a length not whole: refused (below)
        b.add(f"{ctm} scales 1.5x0.6", scales=[1, 1, 1.5, 0.6], mode="nearest", coordinate_transformation_mode=ctm,
              mask=off_ties(ctm, "round", b.x.shape, scales=[1, 1, 1.5, 0.6]))
n_nearest = b.check(rtol=0, atol=0)
S.check("nearest: onnxruntime ran most configurations", n_nearest >= 90, f"{n_nearest}")

# the corpus's table_slanet: 16 -> 31 with asymmetric floor; whole factors both ways
b = Batch("nearest feature maps", rand(1, 3, 16, 16))
b.add("16 -> 31 asymmetric floor", sizes=[1, 3, 31, 31], mode="nearest", coordinate_transformation_mode="asymmetric",
      nearest_mode="floor")
b.add("x2 half_pixel", scales=[1, 1, 2, 2], mode="nearest")
b.add("x0.5 asymmetric", scales=[1, 1, 0.5, 0.5], mode="nearest", coordinate_transformation_mode="asymmetric")
b.add("x0.25 half_pixel", scales=[1, 1, 0.25, 0.25], mode="nearest")
b.add("x3 channels too", scales=[1, 2, 3, 1], mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
b.check(rtol=0, atol=0)

# ---- linear and cubic: every coordinate mode, up and down, fractional and whole -------------------
b = Batch("linear", rand(2, 3, 6, 5))
for ctm in CTMS:
    for hw in [(9, 4), (12, 15), (3, 2), (1, 7), (13, 10)]:
        b.add(f"linear {ctm} -> {hw}", sizes=[2, 3, *hw], mode="linear", coordinate_transformation_mode=ctm)
    b.add(f"linear {ctm} scales 2x3", scales=[1, 1, 2, 3], mode="linear", coordinate_transformation_mode=ctm)
b.check()

b = Batch("cubic", rand(1, 2, 7, 6))
for ctm in CTMS:
    for hw in [(11, 4), (14, 12), (3, 2), (21, 18)]:
        b.add(f"cubic {ctm} -> {hw}", sizes=[1, 2, *hw], mode="cubic", coordinate_transformation_mode=ctm)
for a in (-0.5, -0.75):
    for ex in (0, 1):
        for hw in [(10, 9), (14, 12), (4, 3)]:
            b.add(f"cubic a={a} exclude={ex} -> {hw}", sizes=[1, 2, *hw], mode="cubic", cubic_coeff_a=a, exclude_outside=ex)
b.check()

b = Batch("antialias", rand(1, 2, 12, 10))
for mode in ("linear", "cubic"):
    for hw in [(5, 4), (3, 7), (24, 15), (6, 5)]:
        for ex in (0, 1):
            b.add(f"{mode} antialias exclude={ex} -> {hw}", sizes=[1, 2, *hw], mode=mode, antialias=1, exclude_outside=ex)
    b.add(f"{mode} antialias align_corners", sizes=[1, 2, 5, 3], mode=mode, antialias=1,
          coordinate_transformation_mode="align_corners")
b.check()

# ---- tf_crop_and_resize: roi, extrapolation_value ----------------------------------------------------
b = Batch("tf_crop_and_resize", rand(1, 1, 6, 8))
for mode in ("nearest", "linear", "cubic"):
    for roi in ([0, 0, 0.2, 0.1, 1, 1, 0.8, 0.7], [0, 0, -0.3, 0.4, 1, 1, 1.2, 1.5], [0, 0, 0.5, 0.5, 1, 1, 0.5, 0.5]):
        b.add(f"{mode} roi {roi[2:4]}-{roi[6:]}", sizes=[1, 1, 5, 9], roi=roi, mode=mode,
              coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=7.5)
b.check()

# ---- axes, keep_aspect_ratio_policy, opset 10 and Upsample, dtypes ------------------------------------
b = Batch("axes and policy", rand(1, 2, 6, 9))
b.add("axes [3, 2] sizes", sizes=[4, 13], axes=[3, 2], mode="linear")
b.add("axes [2] scales", scales=[1.7], axes=[2], mode="nearest")
for pol in ("not_larger", "not_smaller"):
    b.add(f"{pol}", sizes=[1, 2, 10, 10], mode="linear", keep_aspect_ratio_policy=pol)
    b.add(f"{pol} axes", sizes=[8, 20], axes=[2, 3], mode="nearest", keep_aspect_ratio_policy=pol)
b.check()

b = Batch("opset 10", rand(1, 2, 6, 9), opset=10)
for sc in ([1, 1, 2, 3], [1, 1, 0.5, 0.34], [1, 1, 1.5, 0.7]):
    b.add(f"nearest {sc}", scales=sc, mode="nearest")
    b.add(f"linear {sc}", scales=sc, mode="linear")
b.check()

for opset in (7, 9):
    b = Batch(f"Upsample opset {opset}", rand(1, 2, 3, 4), opset=opset, op="Upsample")
    for sc in ([1, 1, 2, 3], [1, 1, 1.5, 2.5]):
        for mode in ("nearest", "linear"):
            b.add(f"{mode} {sc}", scales=sc, mode=mode)
    b.check()

b = Batch("float16", rand(1, 2, 5, 6).astype(np.float16), opset=19)
b.add("linear 5x6 -> 8x9", sizes=[1, 2, 8, 9], mode="linear")
b.add("nearest x2", scales=[1, 1, 2, 2], mode="nearest")
b.add("cubic 5x6 -> 7x3", sizes=[1, 2, 7, 3], mode="cubic")
b.check(rtol=2e-3, atol=2e-3)

b = Batch("int32", rng.integers(-100, 100, (1, 2, 5, 6)).astype(np.int32), opset=19)
b.add("nearest -> 8x4", sizes=[1, 2, 8, 4], mode="nearest")
b.add("nearest x3", scales=[1, 1, 3, 3], mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
b.check(rtol=0, atol=0)

b = Batch("rank 3 and 5", rand(2, 5, 7), opset=19)
b.add("linear 3-D", sizes=[2, 9, 4], mode="linear")
b.add("nearest 3-D", scales=[1, 1.4, 0.5], mode="nearest")
b.check()
b = Batch("trilinear", rand(1, 2, 3, 4, 5), opset=19)
b.add("linear 5-D", sizes=[1, 2, 5, 6, 3], mode="linear")
b.add("linear 5-D x2", scales=[1, 1, 2, 2, 2], mode="linear", coordinate_transformation_mode="align_corners")
b.check()


# ---- the graph each map takes ----------------------------------------------------------------------------
def frontend_ops(m):
    path, dump = save(m), ht.tempfile.mkdtemp()
    p = ht.subprocess.run([ht.HARP, "dump", path, "--dump", "frontend", "--dump-dir", dump], capture_output=True, text=True)
    if p.returncode:
        return None, p.stderr
    with open(os.path.join(dump, "frontend.json")) as f:
        return [n["op"] for g in json.load(f)["graphs"] for n in g["nodes"]], ""


def one_resize(shape, **kw):
    sizes = kw.pop("sizes")
    return model([mk("Resize", ["x", "", "", "sz"], ["y"], **kw)], [vi("x", shape)], [vi("y", None)],
                 [init("sz", np.array(sizes, np.int64))], 19)


for label, m, want in [
        ("linear x2 half_pixel", one_resize([1, 3, 8, 8], sizes=[1, 3, 16, 16], mode="linear"), "elementwise"),
        ("cubic x2 half_pixel", one_resize([1, 3, 8, 8], sizes=[1, 3, 16, 16], mode="cubic"), "elementwise"),
        ("linear x4 asymmetric", one_resize([1, 3, 8, 8], sizes=[1, 3, 32, 32], mode="linear",
                                            coordinate_transformation_mode="asymmetric"), "elementwise"),
        ("nearest x2", one_resize([1, 3, 8, 8], sizes=[1, 3, 16, 16], mode="nearest"), "elementwise"),
        ("nearest x0.5", one_resize([1, 3, 8, 8], sizes=[1, 3, 4, 4], mode="nearest"), "elementwise"),
        ("nearest 16 -> 31", one_resize([1, 3, 16, 16], sizes=[1, 3, 31, 31], mode="nearest"), "gather"),
        ("linear align_corners x2", one_resize([1, 3, 8, 8], sizes=[1, 3, 16, 16], mode="linear",
                                               coordinate_transformation_mode="align_corners"), "matmul"),
        ("linear align_corners 600 -> 1200", one_resize([1, 1, 4, 600], sizes=[1, 1, 4, 1200], mode="linear",
                                                        coordinate_transformation_mode="align_corners"), "gather")]:
    ops, err = frontend_ops(m)
    S.check(f"graph of {label}: imports", ops is not None, err)
    if ops is not None:  # elementwise: views and arithmetic alone; matmul: by the dense map; gather: its taps
        got = "gather" if "gather" in ops else "matmul" if "matmul" in ops else "elementwise"
        S.check(f"graph of {label}: {want}", got == want, ",".join(sorted(set(ops))))


# ---- refusals and bad attributes: a clear error naming the node ---------------------------------------------
def refused(label, m, kind, text):
    path = save(m)
    p, d = ht.run(path, {"x": rand(*[dd.dim_value for dd in m.graph.input[0].type.tensor_type.shape.dim])})
    err = p.stderr
    S.check(f"{label}: refused", p.returncode == 1 and f"error[{kind}]" in err and "(Resize)" in err and text in err, err[-400:])
    S.check(f"{label}: no output", not os.listdir(d) or all(f.startswith("in_") for f in os.listdir(d)), str(os.listdir(d)))


def with_scales(shape, scales, **kw):
    return model([mk("Resize", ["x", "", "sc"], ["y"], **kw)], [vi("x", shape)], [vi("y", None)],
                 [init("sc", np.array(scales, np.float32))], 19)


refused("align_corners by a scale whose length is not whole", with_scales([1, 1, 4, 4], [1, 1, 0.8, 0.8], mode="linear",
        coordinate_transformation_mode="align_corners"), "Unsupported", "not whole")
refused("mode area", with_scales([1, 1, 4, 4], [1, 1, 2, 2], mode="area"), "InvalidArgument", "mode \"area\"")
refused("antialias nearest", with_scales([1, 1, 4, 4], [1, 1, 0.5, 0.5], mode="nearest", antialias=1), "InvalidArgument",
        "antialias")
refused("a negative scale", with_scales([1, 1, 4, 4], [1, 1, -2, 2], mode="nearest"), "InvalidArgument", "scale -2")
refused("scales of the wrong length", with_scales([1, 1, 4, 4], [2, 2], mode="nearest"), "InvalidArgument", "per resized axis")
mi = model([mk("Resize", ["x", "", "", "sz"], ["y"], mode="linear")], [vi("x", [1, 1, 4, 4], TensorProto.INT32)],
           [vi("y", None, TensorProto.INT32)], [init("sz", np.array([1, 1, 8, 8], np.int64))], 19)
p, _ = ht.run(save(mi), {"x": np.zeros((1, 1, 4, 4), np.int32)})
S.check("linear of int32: refused", p.returncode == 1 and "error[Unsupported]" in p.stderr and "linear resizing of i32" in p.stderr,
        p.stderr[-300:])

S.close()
