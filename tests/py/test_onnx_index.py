"""The ONNX ops of onnx_ops_index.c — GatherND, ScatterElements, ScatterND,
CumSum, OneHot, TopK, ReverseSequence, TensorScatter, CenterCropPad — and LpPool against onnxruntime on the interpreter and the cpu
backend: negative indices, duplicate indices under each reduction,
indices smaller than the data off the scatter axis, batch_dims, every
axis, exclusive / reverse sums, ties in TopK (the lower index first), and
out-of-range one-hot indices.  Several ops share a model so that the cpu
backend compiles a few C files.  Then the refusals: out-of-range constant
indices, wrong ranks, k past the axis, a mask past the size limit — each a
clear error naming the node.  Last, onnx's own node cases of these ops
with the inputs harp needs at import (K, axis, depth, shape...) turned
into initializers, against their expected outputs."""
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

import warnings  # noqa: E402

warnings.simplefilter("ignore", RuntimeWarning)  # NaN in the error measure of NaN-carrying outputs
rng = np.random.default_rng(11)
ht.compiled_only()  # the cpu rows check the compiled C, not tier 0's (harp_test.compiled_only)
S = ht.Suite("onnx_index")
BACKENDS = [b for b in ("interp", "cpu") if b in ht.BACKENDS]
I64, F = TensorProto.INT64, TensorProto.FLOAT


def ints(*v):
    return np.array(v, np.int64)


def save(m):
    path = os.path.join(ht.tempfile.mkdtemp(), "m.onnx")
    onnx.save(m, path)
    return path


def check(name, nodes, inputs, outs, inits=(), opset=18, out_types=None):
    """inputs: {name: array} (int64 ones go to harp as int32); outs: output names."""
    types = out_types or {}
    m = model(nodes, [vi(k, v.shape, onnx.helper.np_dtype_to_tensor_dtype(v.dtype)) for k, v in inputs.items()],
              [vi(o, None, types.get(o, F)) for o in outs], [init(k, v) for k, v in dict(inits).items()], opset)
    path = save(m)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, inputs)
    hin = {k: v.astype(np.int32) if v.dtype == np.int64 else v for k, v in inputs.items()}
    for be in BACKENDS:
        res, err = ht.run_model(path, hin, backend=be)
        S.check(f"{name} {be}: runs", err is None, (err or "")[-600:])
        if err:
            continue
        for o, w in zip(outs, want):
            got = res[o]
            if w.dtype.kind in "iu":
                ok = got.shape == w.shape and np.array_equal(got, w)
                S.check(f"{name} {be} {o}: equals onnxruntime", ok, f"got {got.ravel()[:12]} want {w.ravel()[:12]}")
            else:
                ok, why = ht.close(got, w, rtol=1e-5, atol=1e-6)
                S.check(f"{name} {be} {o}: matches onnxruntime", ok, why)


# ---- TopK, CumSum, OneHot -------------------------------------------------------------------
xt = np.round(rng.standard_normal((4, 7)) * 2).astype(np.float32)  # many ties
xt[1, :] = 1.0
xt[2, 3] = np.inf
xt[3, 0] = -np.inf
xc = rng.standard_normal((3, 5)).astype(np.float32)
xi = rng.integers(-50, 50, (2, 6)).astype(np.int32)
oh = ints(0, 3, -1, -4, 4, -5, 2).reshape(7)
nodes = [mk("TopK", ["xt", "k3"], ["tv", "ti"], axis=-1), mk("TopK", ["xt", "k2"], ["sv", "si"], axis=0, largest=0),
         mk("TopK", ["xi", "k2"], ["iv", "ii"], axis=1, largest=1),
         mk("CumSum", ["xc", "a0"], ["c0"]), mk("CumSum", ["xc", "a1"], ["c1"], exclusive=1),
         mk("CumSum", ["xc", "am1"], ["c2"], reverse=1), mk("CumSum", ["xc", "a0"], ["c3"], reverse=1, exclusive=1),
         mk("CumSum", ["xi", "a1"], ["c4"]),
         mk("OneHot", ["oh", "depth", "ohv"], ["o0"]), mk("OneHot", ["oh", "depth", "ohv"], ["o1"], axis=0),
         mk("OneHot", ["ohf", "depthf", "ohv"], ["o2"], axis=-2)]
check("TopK / CumSum / OneHot", nodes, {"xt": xt, "xc": xc, "xi": xi, "oh": oh, "ohf": np.array([[1.7, -1.2], [0.0, 3.9]], np.float32)},
      ["tv", "ti", "sv", "si", "iv", "ii", "c0", "c1", "c2", "c3", "c4", "o0", "o1", "o2"],
      inits={"k3": ints(3), "k2": ints(2), "a0": np.array(0, np.int64), "a1": np.array(1, np.int32), "am1": ints(-1),
             "depth": np.array(4, np.int64), "depthf": np.array(4, np.float32), "ohv": np.array([-1.5, 2.5], np.float32)},
      out_types={"ti": I64, "si": I64, "iv": TensorProto.INT32, "ii": I64, "c4": TensorProto.INT32})

# NaN in TopK: harp takes NaN as the largest (numpy's sort order); checked without onnxruntime
xn = np.array([[1, np.nan, 3, 2], [np.nan, 5, np.nan, -1]], np.float32)
mn = model([mk("TopK", ["x", "k"], ["v", "i"], axis=1), mk("TopK", ["x", "k"], ["v2", "i2"], axis=1, largest=0)],
           [vi("x", [2, 4])], [vi("v", None), vi("i", None, I64), vi("v2", None), vi("i2", None, I64)], [init("k", ints(2))], 18)
pn = save(mn)
for be in BACKENDS:
    p, d = ht.run(pn, {"x": xn}, backend=be)
    S.check(f"TopK with NaN {be}: runs", p.returncode == 0, p.stderr[-400:])
    if p.returncode == 0:
        ld = lambda o: np.load(os.path.join(d, f"{o}.npy"))  # noqa: E731
        S.check(f"TopK with NaN {be}: NaN first when largest", np.array_equal(ld("i"), [[1, 2], [0, 2]]), str(ld("i")))
        S.check(f"TopK with NaN {be}: NaN last when smallest", np.array_equal(ld("i2"), [[0, 3], [3, 1]]), str(ld("i2")))
        S.check(f"TopK with NaN {be}: the values", np.array_equal(ld("v"), [[np.nan, 3], [np.nan, np.nan]], equal_nan=True), str(ld("v")))

# ---- scatter and gather -----------------------------------------------------------------------
data = rng.standard_normal((4, 5)).astype(np.float32)
upd = rng.standard_normal((2, 3)).astype(np.float32)
idx_dup = ints(1, -1, 1, 0, 0, 3).reshape(2, 3)  # duplicates in column 0... and negative
idx_uni = ints(1, -1, 0, 3, 0, -2).reshape(2, 3)
d3 = rng.standard_normal((4, 3, 2)).astype(np.float32)
nd_idx = ints(0, -1, 0, 2).reshape(4, 1)  # row 0 twice
nd_upd = rng.standard_normal((4, 3, 2)).astype(np.float32)
nd_idx2 = ints(1, 2, -1, 0, 1, 2).reshape(3, 2)  # (1, 2) twice
nd_upd2 = rng.standard_normal((3, 2)).astype(np.float32)
nodes = [mk("ScatterElements", ["data", "iu", "upd"], ["s0"], axis=0),
         mk("ScatterElements", ["data", "iu", "upd"], ["s1"], axis=1),
         mk("ScatterElements", ["data", "idup", "upd"], ["s2"], axis=0, reduction="add"),
         mk("ScatterElements", ["data", "idup", "upd"], ["s3"], axis=-2, reduction="mul"),
         mk("ScatterElements", ["data", "idup", "upd"], ["s4"], axis=0, reduction="max"),
         mk("ScatterElements", ["data", "idup", "upd"], ["s5"], axis=0, reduction="min"),
         mk("ScatterND", ["d3", "ndi", "ndu"], ["n0"], reduction="add"),
         mk("ScatterND", ["d3", "ndi", "ndu"], ["n1"], reduction="max"),
         mk("ScatterND", ["d3", "ndi", "ndu"], ["n2"], reduction="mul"),
         mk("ScatterND", ["d3", "ndi2", "ndu2"], ["n3"], reduction="min"),
         mk("ScatterND", ["d3", "ndu_i", "ndu2"], ["n4"]),
         mk("GatherND", ["d3", "ndi2"], ["g0"]), mk("GatherND", ["d3", "gb"], ["g1"], batch_dims=1),
         mk("GatherND", ["d3", "g3"], ["g2"])]
check("ScatterElements / ScatterND / GatherND", nodes,
      {"data": data, "upd": upd, "d3": d3, "ndu": nd_upd, "ndu2": nd_upd2, "ndi2": nd_idx2},
      ["s0", "s1", "s2", "s3", "s4", "s5", "n0", "n1", "n2", "n3", "n4", "g0", "g1", "g2"],
      inits={"iu": idx_uni, "idup": idx_dup, "ndi": nd_idx, "ndu_i": ints(3, 1, 0, 0, -2, 1).reshape(3, 2),
             "gb": ints(1, -1, 0, 2, 1, 0, 2, 0).reshape(4, 2, 1), "g3": ints(3, 2, 1, -4, 0, -1).reshape(2, 3)})

# GatherND with a symbolic batch (only the indexed dims must be known)
dg = rng.standard_normal((4, 5, 3)).astype(np.float32)
ig = rng.integers(-5, 5, (4, 2, 1)).astype(np.int64)
mg = model([mk("GatherND", ["d", "i"], ["y"], batch_dims=1)], [vi("d", ["batch", 5, 3]), vi("i", ["batch", 2, 1], I64)],
           [vi("y", None)], [], 13)
pg = save(mg)
wg = ort.InferenceSession(pg, providers=["CPUExecutionProvider"]).run(None, {"d": dg, "i": ig})[0]
for be in BACKENDS:
    p, d = ht.run(pg, {"d": dg, "i": ig.astype(np.int32)}, syms=["batch=4"], backend=be)
    S.check(f"GatherND symbolic batch {be}: runs", p.returncode == 0, p.stderr.strip()[-600:])
    if p.returncode == 0:
        S.check(f"GatherND symbolic batch {be}: equals onnxruntime", np.array_equal(np.load(os.path.join(d, "y.npy")), wg))

# TensorScatter (KV cache update): write indices at run time, linear and circular (wrapping), against onnx's reference
from onnx.reference import ReferenceEvaluator  # noqa: E402

past = rng.standard_normal((3, 2, 6, 4)).astype(np.float32)
upd_ts = rng.standard_normal((3, 2, 3, 4)).astype(np.float32)
for mode, wi in (("linear", ints(0, 3, 2)), ("circular", ints(4, 5, 13))):
    mt = model([mk("TensorScatter", ["p", "u", "w"], ["y"], mode=mode, axis=2)],
               [vi("p", [3, 2, 6, 4]), vi("u", [3, 2, 3, 4]), vi("w", [3], I64)], [vi("y", None)], [], 24)
    want = ReferenceEvaluator(mt).run(None, {"p": past, "u": upd_ts, "w": wi})[0]
    pt = save(mt)
    for be in BACKENDS:
        p, d = ht.run(pt, {"p": past, "u": upd_ts, "w": wi.astype(np.int32)}, backend=be)
        S.check(f"TensorScatter {mode} {be}: runs", p.returncode == 0, p.stderr.strip()[-600:])
        if p.returncode == 0:
            S.check(f"TensorScatter {mode} {be}: equals onnx's reference", np.array_equal(np.load(os.path.join(d, "y.npy")), want))

# reduction none writes the update itself: -0 keeps its sign, NaN stays NaN
mz = model([mk("ScatterElements", ["d", "i", "u"], ["y"], axis=1)], [vi("d", [2, 3]), vi("u", [2, 2])], [vi("y", None)],
           [init("i", ints(0, 2, 1, 0).reshape(2, 2))], 18)
pz = save(mz)
for be in BACKENDS:
    p, d = ht.run(pz, {"d": np.ones((2, 3), np.float32), "u": np.array([[-0.0, np.nan], [-0.0, 2.0]], np.float32)}, backend=be)
    S.check(f"ScatterElements -0 / NaN {be}: runs", p.returncode == 0, p.stderr.strip()[-600:])
    if p.returncode == 0:
        y = np.load(os.path.join(d, "y.npy"))
        S.check(f"ScatterElements -0 / NaN {be}: the updates as they are",
                np.signbit(y[0, 0]) and np.isnan(y[0, 2]) and np.signbit(y[1, 1]) and y[1, 0] == 2 and y[0, 1] == 1, str(y))

# int32 data, scatter with indices at run time
di = rng.integers(-9, 9, (3, 4)).astype(np.int32)
check("ScatterElements int32, indices at run time", [mk("ScatterElements", ["di", "ri", "ru"], ["y"], axis=1, reduction="add")],
      {"di": di, "ri": ints(3, -1, 0, 2, 2, 2).reshape(3, 2), "ru": rng.integers(-5, 5, (3, 2)).astype(np.int32)}, ["y"],
      out_types={"y": TensorProto.INT32})

# ---- ReverseSequence (lengths at run time), CenterCropPad, and LpPool (onnx_nn.c) -------------------
xr = rng.standard_normal((5, 3, 2)).astype(np.float32)
xcc = rng.standard_normal((7, 6, 3)).astype(np.float32)
check("ReverseSequence / CenterCropPad", [mk("ReverseSequence", ["xr", "lens"], ["r0"], batch_axis=1, time_axis=0),
                                          mk("ReverseSequence", ["xr", "lens2"], ["r1"], batch_axis=0, time_axis=1),
                                          mk("CenterCropPad", ["xcc", "cs"], ["cc0"]),
                                          mk("CenterCropPad", ["xcc", "cs2"], ["cc1"], axes=[-1, 0])],
      {"xr": xr, "lens": ints(5, 1, 3), "xcc": xcc}, ["r0", "r1", "cc0", "cc1"],
      inits={"lens2": ints(2, 0, 3, 1, 3), "cs": ints(4, 9, 3), "cs2": ints(6, 2)})
xp = rng.standard_normal((2, 3, 9, 8)).astype(np.float32)
check("LpPool", [mk("LpPool", ["xp"], ["p0"], kernel_shape=[3, 2], p=3, pads=[1, 0, 1, 1], strides=[2, 2]),
                 mk("LpPool", ["xp"], ["p1"], kernel_shape=[2, 3], p=1, ceil_mode=1, strides=[2, 2]),
                 mk("LpPool", ["xp"], ["p2"], kernel_shape=[2, 2], dilations=[2, 3], pads=[1, 1, 0, 1])],
      {"xp": xp}, ["p0", "p1", "p2"], opset=22)

# ---- refusals -----------------------------------------------------------------------------------
E = ht.tempfile.mkdtemp()


def refused(name, nodes, inits, needles, x_shape=(4, 5), opset=18):
    m = model(nodes, [vi("x", list(x_shape))], [vi("y", None)], [init(k, v) for k, v in inits.items()], opset)
    xp = os.path.join(E, "x.npy")
    np.save(xp, np.zeros(x_shape, np.float32))
    out = os.path.join(E, "out_" + "".join(ch if ch.isalnum() else "_" for ch in name))
    p = ht.subprocess.run([ht.HARP, "run", save(m), "--out", out, "--input", f"x={xp}"], capture_output=True, text=True, timeout=120)
    S.check(f"{name}: exit code 1", p.returncode == 1, f"rc={p.returncode} {p.stderr[-300:]}")
    for nd in needles:
        S.check(f"{name}: says {nd!r}", nd in p.stderr, p.stderr.strip()[-400:])
    S.check(f"{name}: no output", not os.path.exists(out) or not os.listdir(out))


refused("ScatterElements index out of range", [mk("ScatterElements", ["x", "i", "u"], ["y"], axis=1, name="se")],
        {"i": ints(0, 5).reshape(1, 2), "u": np.ones((1, 2), np.float32)}, ['node 0 "se" (ScatterElements)', "index 5 is out of range"])
refused("ScatterND index out of range", [mk("ScatterND", ["x", "i", "u"], ["y"], name="sn")],
        {"i": ints(-5).reshape(1, 1), "u": np.ones((1, 5), np.float32)}, ['(ScatterND)', "index -5 is out of range"])
refused("GatherND index out of range", [mk("GatherND", ["x", "i"], ["y"], name="gn")],
        {"i": ints(1, 7).reshape(1, 2)}, ['(GatherND)', "index 7 is out of range"])
refused("ScatterElements ranks", [mk("ScatterElements", ["x", "i", "u"], ["y"], name="se")],
        {"i": ints(0, 1), "u": np.ones(2, np.float32)}, ["AxisSizeMismatch", "one rank"])
refused("ScatterND updates shape", [mk("ScatterND", ["x", "i", "u"], ["y"], name="sn")],
        {"i": ints(0, 1).reshape(2, 1), "u": np.ones((2, 4), np.float32)}, ["AxisSizeMismatch", "updates must have the shape"])
refused("TopK k past the axis", [mk("TopK", ["x", "k"], ["y", "yi"], name="tk")], {"k": ints(6)}, ['(TopK)', "k = 6 along an axis of 5"])
refused("CumSum past the mask limit", [mk("CumSum", ["x", "a"], ["y"], name="cs")], {"a": ints(1)},
        ["LimitExceeded", "(CumSum)", "comparison mask"], x_shape=(4, 8192))
refused("OneHot depth at run time", [mk("OneHot", ["x", "x", "v"], ["y"], name="oh")], {"v": np.array([0, 1], np.float32)},
        ["Unsupported", "depth (input 1) must be a one-element constant"])
refused("ReverseSequence length past the time axis", [mk("ReverseSequence", ["x", "l"], ["y"], batch_axis=0, time_axis=1, name="rs")],
        {"l": ints(1, 2, 6, 0)}, ["InvalidArgument", "sequence length 6 is out of range"])
refused("Col2Im input not [N, C * K, L]", [mk("Unsqueeze", ["x", "z"], ["x3"]), mk("Col2Im", ["x3", "im", "bl"], ["y"], name="ci")],
        {"im": ints(3, 3), "bl": ints(2, 2), "z": ints(0)}, ["AxisSizeMismatch", "(Col2Im)", "is not [N, C * 4, 4]"])
refused("TensorScatter write index past the cache", [mk("TensorScatter", ["x", "u", "w"], ["y"], axis=1, name="ts")],
        {"u": np.ones((4, 2), np.float32), "w": ints(0, 1, 4, 2)}, ["InvalidArgument", "write index 4 does not fit 2 updates in a cache of 5"],
        opset=24)
refused("reduction name", [mk("ScatterND", ["x", "i", "u"], ["y"], reduction="avg", name="sn")],
        {"i": ints(0).reshape(1, 1), "u": np.ones((1, 5), np.float32)}, ["InvalidArgument", 'reduction "avg"'])
refused("ScatterElements reduction name", [mk("ScatterElements", ["x", "i", "u"], ["y"], axis=1, reduction="avg", name="se")],
        {"i": ints(0, 1).reshape(1, 2), "u": np.ones((1, 2), np.float32)},
        ["InvalidArgument", 'node 0 "se" (ScatterElements)', 'reduction "avg"'])

# ---- onnx's own node cases with the inputs harp needs at import made initializers --------------
# (the node tests feed K, axis, depth, shape, image_shape and block_shape as
# graph inputs, which harp refuses; as constants, the expected outputs must
# match; double inputs and outputs are run as float32)
import argparse  # noqa: E402

import test_onnx_conformance as conf  # noqa: E402
import test_onnx_node as tn  # noqa: E402
from onnx import numpy_helper  # noqa: E402

CONST = {"k", "axis", "depth", "shape", "image_shape", "block_shape"}
_, found = tn.cases(argparse.Namespace(names=["test_col2im", "test_onehot", "test_top_k", "test_cumsum", "test_center_crop_pad"], sample=1))
found = [cs for cs in found if not cs.name.endswith("_expanded") and "uint64" not in cs.name]
S.check("node cases with constants found", len(found) == 32, str([cs.name for cs in found]))
for cs in found:
    m = onnx.load(cs.model)
    ins, outs = cs.data()
    keep, vals = [], []
    for vinfo, arr in zip(list(m.graph.input), ins):
        if vinfo.name in CONST:
            m.graph.initializer.append(numpy_helper.from_array(np.asarray(arr), vinfo.name))
            m.graph.input.remove(vinfo)
        else:
            if arr.dtype == np.float64:
                arr = arr.astype(np.float32)
                vinfo.type.tensor_type.elem_type = F
            keep.append(arr)
    for o in m.graph.output:
        if o.type.tensor_type.elem_type == TensorProto.DOUBLE:
            o.type.tensor_type.elem_type = F
    outs = [o.astype(np.float32) if o.dtype == np.float64 else o for o in outs]
    path = save(m)
    for be in (["interp", "cpu"] if cs.name in ("test_col2im_5d", "test_top_k_same_values_2d") else ["interp"]):
        if be in BACKENDS:
            v, detail, _ = conf.run_model(path, m, keep, outs, 1e-5, 1e-6, be, 120)
            S.check(f"{cs.name} with constants {be}: passes", v == "pass", f"{v}: {detail}")
S.close()
