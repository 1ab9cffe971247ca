"""Host ops (harp/flow.h OP steps, src/runtime/flow_ops.c,
src/frontend/onnx_flow_ops.c): the ops whose output shape depends on the
values, and the samplers, run by the host between compiled segments,
against onnxruntime on the interpreter and the cpu backend.
NonMaxSuppression (both box formats, batches and classes, thresholds,
equal scores), NonZero, TopK with a run-time K (torchvision's
K = min(n, 300) of a run-time n) and on an axis too long for the graph's
mask, Unique, Compress, Range and Slice by run-time bounds,
ScatterElements / ScatterND of run-time sizes, RoiAlign (avg / max, both
coordinate modes, sampling ratios) and GridSample (every mode, padding and
align_corners, 2-D and 3-D); the segments after them use the run-time
sizes (Gather, Expand, arithmetic).  Then what stays refused: harp compile
of such a model names the node."""
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

rng = np.random.default_rng(5)
ort.set_default_logger_severity(3)
S = ht.Suite("onnx_hostops")
BACKENDS = [b for b in ("interp", "cpu") if b in ht.BACKENDS]
I64, F32, BOOL = TensorProto.INT64, TensorProto.FLOAT, TensorProto.BOOL


def save(m):
    path = os.path.join(ht.tempfile.mkdtemp(), "m.onnx")
    onnx.save(m, path)
    return path


def check(name, nodes, inputs, outs, inits=(), opset=17, rtol=1e-5, atol=1e-6, backends=None):
    """outs: [(name, onnx type)]; int64 inputs go to harp as int32."""
    m = model(nodes, [vi(k, v.shape, onnx.helper.np_dtype_to_tensor_dtype(v.dtype)) for k, v in inputs.items()],
              [vi(o, None, t) for o, t in outs], [init(k, v) for k, v in dict(inits).items()], opset)
    path = save(m)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, inputs)
    hin = {k: v.astype(np.int32) if v.dtype == np.int64 else v for k, v in inputs.items()}
    for be in backends or BACKENDS:
        res, err = ht.run_model(path, hin, backend=be)
        S.check(f"{name} {be}: runs", err is None, (err or "")[-600:])
        if err:
            continue
        for (o, _), w in zip(outs, want):
            got = res[o]
            if w.dtype.kind in "iub":
                ok = got.shape == w.shape and np.array_equal(got.astype(np.int64), w.astype(np.int64))
                why = f"shape {got.shape} vs {w.shape}" if got.shape != w.shape else f"{np.sum(got != w)} differ"
            else:
                ok, why = ht.close(got, w, rtol=rtol, atol=atol)
            S.check(f"{name} {be} {o}: matches onnxruntime", ok, why)
    return path


def boxes(n, b=1, centre=False):
    xy = rng.uniform(0, 50, (b, n, 2)).astype(np.float32)
    wh = rng.uniform(2, 20, (b, n, 2)).astype(np.float32)
    if centre:
        return np.concatenate([xy, wh], -1)
    c = np.concatenate([xy, xy + wh], -1)[..., [1, 0, 3, 2]]  # [y1, x1, y2, x2]
    flip = rng.random((b, n)) < 0.3  # corners in either order
    c[flip] = c[flip][:, [2, 3, 0, 1]]
    return np.ascontiguousarray(c)


# ---- NonMaxSuppression, then a gather by its run-time count of selections --------------------------------
for cpb in (0, 1):
    bx, sc = boxes(60, 2, cpb == 1), rng.random((2, 3, 60)).astype(np.float32)
    sc[0, 1, :20] = 0.5  # equal scores: the lower index first
    nodes = [mk("NonMaxSuppression", ["b", "s", "m", "i", "t"], ["sel"], center_point_box=cpb),
             mk("Gather", ["sel", "two"], ["bi"], axis=1), mk("Squeeze", ["bi", "one"], ["bidx"]),
             mk("Reshape", ["b", "flat"], ["b2"]), mk("Gather", ["b2", "bidx"], ["picked"], axis=0),
             mk("Shape", ["sel"], ["shp"]), mk("Gather", ["shp", "zero"], ["n"]), mk("Cast", ["n"], ["nf"], to=F32),
             mk("Mul", ["picked", "nf"], ["scaled"])]
    inits = {"m": np.array([7], np.int64), "i": np.array([0.4], np.float32), "t": np.array([0.2], np.float32),
             "two": np.array([2], np.int64), "one": np.array([1], np.int64), "flat": np.array([-1, 4], np.int64),
             "zero": np.array(0, np.int64)}
    check(f"NonMaxSuppression center_point_box={cpb}", nodes, {"b": bx, "s": sc},
          [("sel", I64), ("scaled", F32)], inits)
check("NonMaxSuppression without thresholds", [mk("NonMaxSuppression", ["b", "s", "m"], ["sel"])],
      {"b": boxes(30, 1), "s": rng.random((1, 2, 30)).astype(np.float32)}, [("sel", I64)], {"m": np.array([100], np.int64)})
check("NonMaxSuppression identical boxes, one score", [mk("NonMaxSuppression", ["b", "s", "m", "i"], ["sel"])],
      {"b": np.tile(np.array([[[0, 0, 1, 1]]], np.float32), (1, 12, 1)), "s": np.full((1, 1, 12), 0.9, np.float32)},
      [("sel", I64)], {"m": np.array([5], np.int64), "i": np.array([0.5], np.float32)})

check("NonMaxSuppression at an IoU equal to the threshold (kept)", [mk("NonMaxSuppression", ["b", "s", "m", "i"], ["sel"])],
      {"b": np.array([[[0, 0, 2, 2], [0, 0, 2, 1], [5, 5, 6, 6]]], np.float32), "s": np.array([[[0.9, 0.8, 0.7]]], np.float32)},
      [("sel", I64)], {"m": np.array([3], np.int64), "i": np.array([0.5], np.float32)})

# ---- NonZero, then TopK with K = min(n, 5) of its run-time n (torchvision's pattern) -------------------------
x = rng.standard_normal((3, 40)).astype(np.float32)
nodes = [mk("Greater", ["x", "th"], ["g"]), mk("NonZero", ["g"], ["nz"]), mk("Transpose", ["nz"], ["nzt"], perm=[1, 0]),
         mk("GatherND", ["x", "nzt"], ["v"]), mk("Shape", ["v"], ["sv"]), mk("Concat", ["five", "sv"], ["cand"], axis=0),
         mk("ReduceMin", ["cand"], ["k0"], keepdims=1), mk("TopK", ["v", "k0"], ["tv", "ti"]),
         mk("Shape", ["tv"], ["st"]), mk("ConstantOfShape", ["st"], ["ones"], value=onnx.helper.make_tensor("v", I64, [1], [3])),
         mk("Add", ["ti", "ones"], ["ti3"])]
check("NonZero -> GatherND -> TopK(min(n, 5))", nodes, {"x": x}, [("nz", I64), ("v", F32), ("tv", F32), ("ti3", I64)],
      {"th": np.array(0.8, np.float32), "five": np.array([5], np.int64)})
check("NonZero of a run-time bool, rank 3", [mk("NonZero", ["x"], ["y"])], {"x": rng.random((2, 3, 4)) < 0.4}, [("y", I64)])

# TopK: K at run time (an input), and an axis too long for the comparison mask
check("TopK, K an input", [mk("TopK", ["x", "k"], ["v", "i"], axis=1, largest=0)],
      {"x": rng.standard_normal((4, 50)).astype(np.float32), "k": np.array([7], np.int64)}, [("v", F32), ("i", I64)])
big = rng.standard_normal((8, 9000)).astype(np.float32)
big[0, 100:110] = 2.0  # ties: the lower index first
check("TopK of 9000 (past the mask)", [mk("TopK", ["x", "k"], ["v", "i"], axis=-1)], {"x": big}, [("v", F32), ("i", I64)],
      {"k": np.array([300], np.int64)})

# ---- Unique, Compress, Range, Slice by run-time values ---------------------------------------------------------
u = rng.integers(0, 6, (5, 4)).astype(np.float32)
for kw in ({}, {"sorted": 0}, {"axis": 0}, {"axis": 1, "sorted": 0}):
    check(f"Unique {kw}", [mk("Unique", ["x"], ["y", "i", "inv", "c"], **kw)], {"x": u},
          [("y", F32), ("i", I64), ("inv", I64), ("c", I64)], opset=11)
cx = rng.standard_normal((4, 6)).astype(np.float32)
for kw in ({}, {"axis": 1}, {"axis": -2}):
    check(f"Compress {kw}", [mk("Greater", ["m", "z"], ["c"]), mk("Compress", ["x", "c"], ["y"], **kw)],
          {"x": cx, "m": rng.standard_normal(4 if kw.get("axis") == -2 else 6 if kw else 24).astype(np.float32)}, [("y", F32)],
          {"z": np.array(0, np.float32)})
check("Range of run-time bounds", [mk("ReduceMax", ["x"], ["hi"], keepdims=0), mk("Range", ["lo", "hi", "d"], ["r"])],
      {"x": np.array([3.0, 9.5, 2.0], np.float32)}, [("r", F32)], {"lo": np.array(1.5, np.float32), "d": np.array(0.75, np.float32)})
check("Range of run-time integers", [mk("Range", ["a", "b", "d"], ["r"])],
      {"a": np.array(2, np.int64), "b": np.array(17, np.int64)}, [("r", I64)], {"d": np.array(3, np.int64)})
check("Slice by run-time bounds", [mk("Slice", ["x", "s", "e", "ax", "st"], ["y"])],
      {"x": rng.standard_normal((6, 7, 3)).astype(np.float32), "s": np.array([1, 5], np.int64), "e": np.array([5, -100], np.int64)},
      [("y", F32)], {"ax": np.array([0, 1], np.int64), "st": np.array([2, -2], np.int64)})

# ---- scatters of run-time sizes ----------------------------------------------------------------------------------
nodes = [mk("Greater", ["m", "z"], ["g"]), mk("NonZero", ["g"], ["nz"]), mk("Squeeze", ["nz", "zero"], ["idx"]),
         mk("Gather", ["u", "idx"], ["upd"], axis=0), mk("ScatterElements", ["data", "idx", "upd"], ["y"], reduction="add")]
check("ScatterElements of a run-time count", nodes,
      {"m": rng.standard_normal(10).astype(np.float32), "u": rng.standard_normal(10).astype(np.float32),
       "data": rng.standard_normal(10).astype(np.float32)}, [("y", F32)],
      {"z": np.array(0, np.float32), "zero": np.array([0], np.int64)}, opset=18)
nodes = [mk("Greater", ["m", "z"], ["g"]), mk("NonZero", ["g"], ["nz"]), mk("Transpose", ["nz"], ["idx"], perm=[1, 0]),
         mk("GatherND", ["u", "idx"], ["upd"]), mk("ScatterND", ["data", "idx", "upd"], ["y"])]
check("ScatterND of a run-time count", nodes,
      {"m": rng.standard_normal((3, 4)).astype(np.float32), "u": rng.standard_normal((3, 4, 2)).astype(np.float32),
       "data": rng.standard_normal((3, 4, 2)).astype(np.float32)}, [("y", F32)], {"z": np.array(0, np.float32)}, opset=16)

# ---- RoiAlign and GridSample -------------------------------------------------------------------------------------
feat = rng.standard_normal((2, 3, 12, 16)).astype(np.float32)
rois = np.array([[1, 1, 9, 7], [0.5, 2.2, 15.5, 11], [3, 3, 3.4, 3.2], [-2, -1, 4, 20], [6, 1, 2, 5]], np.float32)
bidx = np.array([0, 1, 1, 0, 1], np.int64)
for mode in ("avg", "max"):
    for ctm in ("half_pixel", "output_half_pixel"):
        for sr in (0, 2):
            check(f"RoiAlign {mode} {ctm} sampling_ratio={sr}",
                  [mk("RoiAlign", ["x", "r", "b"], ["y"], mode=mode, coordinate_transformation_mode=ctm, output_height=3,
                      output_width=4, sampling_ratio=sr, spatial_scale=0.8)],
                  {"x": feat, "r": rois, "b": bidx}, [("y", F32)], opset=16, atol=1e-5)
grid = rng.uniform(-1.3, 1.3, (2, 5, 7, 2)).astype(np.float32)
for mode in ("bilinear", "nearest", "bicubic"):
    for pad in ("zeros", "border", "reflection"):
        for ac in (0, 1):
            check(f"GridSample {mode} {pad} align_corners={ac}",
                  [mk("GridSample", ["x", "g"], ["y"], mode=mode, padding_mode=pad, align_corners=ac)],
                  {"x": feat, "g": grid}, [("y", F32)], opset=16, atol=1e-5, backends=["interp"])
vol = rng.standard_normal((1, 2, 4, 5, 6)).astype(np.float32)
for mode in ("linear", "nearest"):
    check(f"GridSample 3-D {mode}", [mk("GridSample", ["x", "g"], ["y"], mode=mode, padding_mode="border")],
          {"x": vol, "g": rng.uniform(-1.2, 1.2, (1, 3, 4, 2, 3)).astype(np.float32)}, [("y", F32)], opset=20, atol=1e-5,
          backends=["interp"])

# ---- what stays refused ------------------------------------------------------------------------------------------------
path = save(model([mk("NonZero", ["x"], ["y"], name="nz")], [vi("x", [4])], [vi("y", None, I64)], [], 17))
out = ht.tempfile.mkdtemp()
p = ht.subprocess.run([ht.HARP, "compile", path, "--target", "cpu", "-o", os.path.join(out, "pkg")], capture_output=True, text=True)
S.check("harp compile of a host op: refused naming the node",
        p.returncode == 1 and 'node 0 "nz" (NonZero)' in p.stderr and "one static graph" in p.stderr, p.stderr[-300:])
S.check("harp compile of a host op: no package", not os.path.exists(os.path.join(out, "pkg", "model.c")))
bad = save(model([mk("NonMaxSuppression", ["b", "s"], ["y"], center_point_box=2, name="nms")],
                 [vi("b", [1, 3, 4]), vi("s", [1, 1, 3])], [vi("y", None, I64)], [], 17))
p, d = ht.run(bad, {"b": boxes(3), "s": rng.random((1, 1, 3)).astype(np.float32)})
S.check("NonMaxSuppression center_point_box 2: refused", p.returncode == 1 and "error[InvalidArgument]" in p.stderr and
        'node 0 "nms"' in p.stderr, p.stderr[-300:])
neg = save(model([mk("NonMaxSuppression", ["b", "s", "m", "i"], ["y"], name="nms")],
                 [vi("b", [1, 3, 4]), vi("s", [1, 1, 3]), vi("i", [1])], [vi("y", None, I64)], [init("m", np.array([3], np.int64))], 17))
p, d = ht.run(neg, {"b": boxes(3), "s": rng.random((1, 1, 3)).astype(np.float32), "i": np.array([1.5], np.float32)})
S.check("NonMaxSuppression iou_threshold 1.5 at run time: a clear error", p.returncode == 1 and "error[InvalidArgument]" in p.stderr
        and "iou_threshold" in p.stderr and 'node 0 "nms"' in p.stderr, p.stderr[-300:])
S.check("... and no output", not [f for f in os.listdir(d) if not f.startswith("in_")], str(os.listdir(d)))
# a K or a Range bound of two elements at run time (flow_ops.c's scalar): a clear error, no output
kk = save(model([mk("TopK", ["x", "k"], ["v", "i"], axis=1, name="tk")], [vi("x", [4, 50]), vi("k", ["n"], I64)],
                [vi("v", None, F32), vi("i", None, I64)], [], 17))
p, d = ht.run(kk, {"x": rng.standard_normal((4, 50)).astype(np.float32), "k": np.array([3, 4], np.int32)})
S.check("TopK of a two-element K at run time: a clear error", p.returncode == 1 and "error[InvalidArgument]" in p.stderr and
        "K has 2 elements" in p.stderr, p.stderr[-300:])
S.check("... and no output", not [f for f in os.listdir(d) if not f.startswith("in_")], str(os.listdir(d)))
rr = save(model([mk("Range", ["a", "b", "dl"], ["r"], name="rg")], [vi("a", [], F32), vi("b", [], F32), vi("dl", ["n"], F32)],
                [vi("r", None, F32)], [], 17))
p, d = ht.run(rr, {"a": np.array(0, np.float32), "b": np.array(5, np.float32), "dl": np.array([1, 2], np.float32)})
S.check("Range of a two-element delta at run time: a clear error", p.returncode == 1 and "error[InvalidArgument]" in p.stderr and
        "delta has 2 elements" in p.stderr, p.stderr[-300:])
S.close()
