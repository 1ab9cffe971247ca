"""The ONNX ops composed from the builder (onnx_ops_act.c, onnx_ops_more.c)
and Floor / Ceil / Round, checked against onnxruntime on the interpreter
and the cpu backend, edge values included (NaN, infinities, halves,
negative indices, ties); and the variants harp refuses, each a clear error
naming the node.  Several ops share a model (one output each) so that the
cpu backend compiles a few models, not one per op."""
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import harp_test as ht  # noqa: E402

ht.onnx_or_skip()
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto  # noqa: E402
from onnx_models import init, mk, model, vi  # noqa: E402

rng = np.random.default_rng(7)
ht.compiled_only()  # the cpu rows check the compiled C, not tier 0's (harp_test.compiled_only)
S = ht.Suite("onnx_ops_more")
warnings.simplefilter("ignore", RuntimeWarning)  # NaN in the error measure of NaN-carrying outputs
BACKENDS = [b for b in ("interp", "cpu") if b in ht.BACKENDS]


def rand(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def ints(*v):
    return np.array(v, np.int64)


def save(m):
    path = os.path.join(ht.tempfile.mkdtemp(), "m.onnx")
    onnx.save(m, path)
    return path


def check(name, nodes, inputs, outs, inits=(), opset=17, out_types=None, rtol=1e-4, atol=1e-5, dump_c=False):
    """outs: the output names; inputs: {name: array} (int64 ones go to harp as int32)."""
    types = out_types or {}
    m = model(nodes, [vi(k, v.shape, onnx.helper.np_dtype_to_tensor_dtype(v.dtype)) for k, v in inputs.items()],
              [vi(o, None, types.get(o, TensorProto.FLOAT)) for o in outs], [init(k, v) for k, v in dict(inits).items()], opset)
    path = save(m)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, inputs)
    hin = {k: v.astype(np.int32) if v.dtype == np.int64 else v for k, v in inputs.items()}
    code = None
    for be in BACKENDS:
        extra = []
        if dump_c and be == "cpu":
            dump = ht.tempfile.mkdtemp()
            extra = ["--dump", "c", "--dump-dir", dump]
        if extra:  # the generated C: `harp run --dump c`
            p, d = ht.run(path, hin, backend=be, extra=extra)
            res, err = (None, p.stderr.strip()) if p.returncode else ({o: np.load(os.path.join(d, f"{o}.npy")) for o in outs}, None)
        else:
            res, err = ht.run_model(path, hin, backend=be)
        S.check(f"{name} {be}: runs", err is None, (err or "")[-600:])
        if err:
            continue
        for o, w in zip(outs, want):
            got = res[o]
            ok, why = ht.close(got, w, rtol=rtol, atol=atol)
            S.check(f"{name} {be} {o}: matches onnxruntime", ok, why)
        if dump_c and be == "cpu":
            with open(os.path.join(dump, "model.c")) as f:
                code = f.read()
    return code


# ---- activations and rounding: one model, edge values ------------------------------------
edge = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3.0, -3.0, 1e-7, -30.0, 30.0,
                 100.0, -100.0, 0.6999, 0.7001], np.float32)
xa = np.concatenate([edge, rand(44, scale=3)]).reshape(4, 16)
acts = [("Celu", dict(alpha=1.5)), ("ThresholdedRelu", dict(alpha=0.7)), ("HardSigmoid", dict(alpha=0.3, beta=0.4)),
        ("HardSwish", {}), ("Mish", {}), ("Floor", {}), ("Ceil", {}), ("Round", {}), ("Sign", {})]
check("activations and rounding", [mk(op, ["x"], [f"y_{op}"], **kw) for op, kw in acts], {"x": xa}, [f"y_{op}" for op, _ in acts],
      opset=18)
# Softsign: inf / inf is NaN in onnxruntime too, so finite values only
check("Softsign", [mk("Softsign", ["x"], ["y"])], {"x": np.nan_to_num(xa, posinf=1e30, neginf=-1e30)}, ["y"])

# Pow by constant roots (multiples of 1/4) on the edge values: -0 and -inf
# as C's pow and onnxruntime take them (+0 / +inf, not sqrt's -0 and NaN)
pows = [0.5, -0.5, 2.5, -0.75, 1.25]
check("Pow by roots, edge values", [mk("Pow", ["x", f"e{i}"], [f"p{i}"]) for i in range(len(pows))], {"x": xa}, [f"p{i}" for i in range(len(pows))],
      inits={f"e{i}": np.array(k, np.float32) for i, k in enumerate(pows)}, opset=15)

# ---- softmax family, ArgMax / ArgMin: ties pick the first (or last) ----------------------
xt = np.round(rand(2, 3, 5) * 1.5)
xt[0, 0, :] = 2.0  # all tied
check("Hardmax before 13 (flattened), Hardmax 13, LogSoftmax before 13",
      [mk("Hardmax", ["x"], ["h11"], axis=1), mk("LogSoftmax", ["x"], ["l11"], axis=1)], {"x": xt}, ["h11", "l11"], opset=11)
I64 = TensorProto.INT64
check("Hardmax 13, ArgMax / ArgMin (keepdims, select_last_index)",
      [mk("Hardmax", ["x"], ["h13"], axis=1), mk("ArgMax", ["x"], ["amax"], axis=-1, keepdims=0),
       mk("ArgMin", ["x"], ["amin"], axis=1, select_last_index=1), mk("ArgMax", ["x"], ["alast"], axis=2, select_last_index=1)],
      {"x": xt}, ["h13", "amax", "amin", "alast"], opset=13, out_types={"amax": I64, "amin": I64, "alast": I64})

# NaN: onnxruntime's loop keeps the first element when it is NaN and skips a
# later NaN; harp takes the first NaN, as numpy's argmax, so the index stays in range
xn = np.array([[1, np.nan, 3, 2], [np.nan, 5, np.nan, -1], [0, 4, 4, 1]], np.float32)
mn = model([mk("ArgMax", ["x"], ["am"], axis=1, keepdims=0), mk("ArgMin", ["x"], ["an"], axis=1, keepdims=0),
            mk("Hardmax", ["x"], ["hm"], axis=1)], [vi("x", [3, 4])],
           [vi("am", None, I64), vi("an", None, I64), vi("hm", None)], [], 13)
pn = save(mn)
for be in BACKENDS:
    p, d = ht.run(pn, {"x": xn}, backend=be)
    S.check(f"ArgMax / ArgMin / Hardmax with NaN {be}: runs", p.returncode == 0, p.stderr[-400:])
    if p.returncode == 0:
        first = np.array([1, 0, 1])
        S.check(f"ArgMax with NaN {be}: the first NaN", np.array_equal(np.load(os.path.join(d, "am.npy")), first))
        S.check(f"ArgMin with NaN {be}: the first NaN", np.array_equal(np.load(os.path.join(d, "an.npy")), [1, 0, 0]))
        S.check(f"Hardmax with NaN {be}: one-hot at the first NaN",
                np.array_equal(np.load(os.path.join(d, "hm.npy")), np.eye(4, dtype=np.float32)[first]))

# ---- Gather with negative indices: constant and at run time ------------------------------
xg = rand(3, 5, 4)
check("Gather negative indices", [mk("Gather", ["x", "ci"], ["yc"], axis=1), mk("Gather", ["x", "ri"], ["yr"], axis=-1),
                                  mk("Gather", ["x", "si"], ["ys"], axis=0)],
      {"x": xg, "ri": ints(-1, 0, -4, 3, 2, -2).reshape(2, 3)}, ["yc", "yr", "ys"],
      inits={"ci": ints(-1, 0, -5, 2), "si": np.array(-2, np.int64)})

# ---- Slice with negative steps ------------------------------------------------------------
xs = rand(4, 6, 5)
big = np.iinfo(np.int64)
check("Slice negative steps",
      [mk("Slice", ["x", "s1", "e1", "a1", "p1"], ["rev"]), mk("Slice", ["x", "s2", "e2", "a2", "p2"], ["mixed"]),
       mk("Slice", ["x", "s3", "e3", "a3", "p3"], ["clamp"])],
      {"x": xs}, ["rev", "mixed", "clamp"],
      inits={"s1": ints(-1), "e1": ints(big.min), "a1": ints(1), "p1": ints(-1),
             "s2": ints(0, 4, -2), "e2": ints(3, 0, -100), "a2": ints(0, 1, 2), "p2": ints(2, -2, -3),
             "s3": ints(100, 2), "e3": ints(-100, big.max), "a3": ints(2, 0), "p3": ints(-2, 1)})

# ---- Tile, Pad edge / reflect / wrap (pads past the axis too) ------------------------------
xp = rand(2, 3, 4)
check("Tile and Pad modes",
      [mk("Tile", ["x", "rep"], ["tile"]), mk("Pad", ["x", "pe"], ["edge"], mode="edge"),
       mk("Pad", ["x", "pr"], ["reflect"], mode="reflect"), mk("Pad", ["x", "pw"], ["wrap"], mode="wrap"),
       mk("Pad", ["x", "pw2"], ["wrap2"], mode="wrap")],
      {"x": xp}, ["tile", "edge", "reflect", "wrap", "wrap2"], opset=19,
      inits={"rep": ints(2, 1, 3), "pe": ints(1, 0, 2, 0, 2, 1), "pr": ints(0, 2, 3, 1, 0, 2), "pw": ints(1, 2, 0, 0, 3, 4),
             "pw2": ints(3, 0, 9, 2, 5, 1)})

# ---- reductions ----------------------------------------------------------------------------
xr = rand(3, 4, 5)
xr[0, 1, :] = [100, 200, -50, 150, 120]  # LogSumExp: exp alone would overflow
xl = np.abs(xr) + 0.1
rd = [("ReduceL1", [1], 1), ("ReduceL2", [2], 0), ("ReduceSumSquare", [0, 2], 1), ("ReduceLogSumExp", [2], 0),
      ("ReduceLogSumExp", [1], 1)]
check("reductions (axes attribute)", [mk(op, ["x"], [f"r{i}"], axes=ax, keepdims=k) for i, (op, ax, k) in enumerate(rd)] +
      [mk("ReduceLogSum", ["p"], ["rls"], keepdims=0)], {"x": xr, "p": xl}, [f"r{i}" for i in range(len(rd))] + ["rls"], opset=13)
check("reductions (axes input, opset 18)", [mk("ReduceL2", ["x", "ax"], ["l2"], keepdims=0), mk("ReduceLogSumExp", ["x"], ["all"])],
      {"x": xr}, ["l2", "all"], opset=18, inits={"ax": ints(-1, 0)})

# ---- InstanceNormalization, DepthToSpace / SpaceToDepth -------------------------------------
check("InstanceNormalization", [mk("InstanceNormalization", ["x", "s", "b"], ["y4"], epsilon=1e-3),
                                mk("InstanceNormalization", ["z", "s", "b"], ["y3"])],
      {"x": rand(2, 3, 4, 5) * 3 + 1, "z": rand(2, 3, 7)}, ["y4", "y3"], inits={"s": rand(3), "b": rand(3)})
xd = rand(2, 8, 3, 2)
check("DepthToSpace / SpaceToDepth", [mk("DepthToSpace", ["x"], ["dcr"], blocksize=2), mk("DepthToSpace", ["x"], ["crd"], blocksize=2, mode="CRD"),
                                      mk("SpaceToDepth", ["dcr"], ["back"], blocksize=2)], {"x": xd}, ["dcr", "crd", "back"], opset=13)

# ---- Resize / Upsample nearest by whole factors ---------------------------------------------
xu = rand(1, 2, 3, 4)
check("Resize nearest (scales, sizes, asymmetric floor)",
      [mk("Resize", ["x", "", "sc"], ["hp"], mode="nearest"),
       mk("Resize", ["x", "", "", "sz"], ["sizes"], mode="nearest", nearest_mode="round_prefer_ceil"),
       mk("Resize", ["x", "", "sc3"], ["asym"], mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")],
      {"x": xu}, ["hp", "sizes", "asym"], opset=13,
      inits={"sc": np.array([1, 1, 2, 3], np.float32), "sz": ints(1, 4, 9, 4), "sc3": np.array([1, 1, 3, 2], np.float32)})
check("Resize linear (half_pixel, pytorch_half_pixel, asymmetric)",
      [mk("Resize", ["x", "", "sc"], ["hp"], mode="linear"),
       mk("Resize", ["x", "", "sc4"], ["pt"], mode="linear", coordinate_transformation_mode="pytorch_half_pixel"),
       mk("Resize", ["x", "", "", "sz"], ["asym"], mode="linear", coordinate_transformation_mode="asymmetric")],
      {"x": xu}, ["hp", "pt", "asym"], opset=13,
      inits={"sc": np.array([1, 1, 2, 3], np.float32), "sc4": np.array([1, 1, 4, 2], np.float32), "sz": ints(1, 2, 6, 8)})
check("Upsample opset 9 linear", [mk("Upsample", ["x", "sc"], ["y"], mode="linear")], {"x": xu}, ["y"], opset=9,
      inits={"sc": np.array([1, 1, 3, 2], np.float32)})
check("Resize opset 10", [mk("Resize", ["x", "sc"], ["y"], mode="nearest")], {"x": xu}, ["y"], opset=10,
      inits={"sc": np.array([1, 1, 2, 2], np.float32)})
check("Upsample opset 9", [mk("Upsample", ["x", "sc"], ["y"])], {"x": xu}, ["y"], opset=9,
      inits={"sc": np.array([1, 1, 2, 3], np.float32)})
check("Upsample opset 7", [mk("Upsample", ["x"], ["y"], scales=[1.0, 2.0, 1.0, 2.0])], {"x": xu}, ["y"], opset=7)

# ---- MaxPool with dilations -----------------------------------------------------------------
check("MaxPool dilated (pads, strides, ceil_mode, 1-D)",
      [mk("MaxPool", ["x"], ["d"], kernel_shape=[2, 3], dilations=[2, 2]),
       mk("MaxPool", ["x"], ["ps"], kernel_shape=[3, 3], dilations=[2, 1], strides=[2, 2], pads=[2, 1, 1, 2]),
       mk("MaxPool", ["x"], ["ceil"], kernel_shape=[2, 2], dilations=[3, 2], strides=[2, 3], ceil_mode=1),
       mk("MaxPool", ["l"], ["one"], kernel_shape=[3], dilations=[3], pads=[1, 2])],
      {"x": rand(2, 3, 11, 10), "l": rand(2, 3, 13)}, ["d", "ps", "ceil", "one"], opset=12)

# ---- Einsum: one or two operands ------------------------------------------------------------
q, k = rand(2, 3, 4, 5), rand(2, 3, 6, 5)
ein = [("qk", "bhqd,bhkd->bhqk", ["q", "k"]), ("kq", "bhqd,bhkd->bkhq", ["q", "k"]), ("rows", "bhqd->bqd", ["q"]),
       ("tr", "bhqd->dqhb", ["q"]), ("summed", "bhqd,bhkd->bk", ["q", "k"]), ("outer", "i,j->ij", ["u", "v"]),
       ("dot", "i,i->", ["u", "u"]), ("lin", "bhqd,ed->bhqe", ["q", "w"])]
check("Einsum", [mk("Einsum", ins, [o], equation=eq) for o, eq, ins in ein], {"q": q, "k": k, "u": rand(4), "v": rand(3)},
      [o for o, _, _ in ein], opset=12, inits={"w": rand(7, 5)})

# ---- ConvTranspose --------------------------------------------------------------------------
code = check("ConvTranspose strides pads output_padding bias",
             [mk("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2, 2], pads=[1, 0, 1, 2], output_padding=[1, 0])],
             {"x": rand(2, 4, 5, 6)}, ["y"], inits={"w": rand(4, 3, 3, 3), "b": rand(3)}, dump_c=True)
if code is not None:
    S.check("ConvTranspose: the conv template runs it", "_conv:" in code and "the template declined" not in code.split("_conv:")[0][-2000:],
            "no conv template in the generated C")
check("ConvTranspose groups dilations, stride 1", [mk("ConvTranspose", ["x", "w"], ["g"], strides=[2, 1], group=2, dilations=[1, 2]),
                                                   mk("ConvTranspose", ["x", "w"], ["s1"], pads=[1, 1, 1, 1])],
      {"x": rand(1, 4, 5, 5)}, ["g", "s1"], inits={"w": rand(4, 3, 3, 2)})
# strided: sub-pixel convs, one per phase as channels, and a depth-to-space (onnx_ops_more.c,
# transpose_subpixel).  kernel == stride (a 1x1 conv): groups, a non-square kernel, pads cut from both
# ends, bias, odd sizes; kernel > stride: phases with fewer taps than others (5 over 2: 3 and 2),
# output_padding, asymmetric pads, strides 3 x 2, groups
check("ConvTranspose kernel > stride (sub-pixel)",
      [mk("ConvTranspose", ["x", "w4", "b4"], ["k4"], strides=[2, 2], pads=[1, 1, 1, 1]),
       mk("ConvTranspose", ["x", "w5"], ["k5"], strides=[2, 2], pads=[2, 0, 1, 3], output_padding=[1, 1]),
       mk("ConvTranspose", ["x", "w43"], ["k43"], strides=[3, 2], group=2, output_padding=[2, 0], pads=[0, 1, 2, 0])],
      {"x": rand(2, 4, 5, 7)}, ["k4", "k5", "k43"],
      inits={"w4": rand(4, 3, 4, 4), "b4": rand(3), "w5": rand(4, 2, 5, 5), "w43": rand(4, 3, 4, 3)})
check("ConvTranspose kernel = stride (sub-pixel)",
             [mk("ConvTranspose", ["x", "w", "b"], ["sp"], strides=[2, 3], kernel_shape=[2, 3]),
              mk("ConvTranspose", ["x", "wg"], ["spg"], strides=[2, 2], group=2, pads=[1, 0, 0, 1]),
              mk("ConvTranspose", ["x", "w1"], ["sp1"], strides=[1, 3])],
             {"x": rand(2, 4, 5, 7)}, ["sp", "spg", "sp1"],
             inits={"w": rand(4, 3, 2, 3), "b": rand(3), "wg": rand(4, 3, 2, 2), "w1": rand(4, 5, 1, 3)})

# ---- FLOOR / CEIL / ROUND in the CUDA translation unit, on the CPU SIMT simulator -----------
try:
    import cuda_sim
except ImportError:
    cuda_sim = None
if cuda_sim and cuda_sim.have_gxx():
    harp = os.path.join(ht.tempfile.mkdtemp(), "round.harp")
    with open(harp, "w") as f:
        f.write("graph main(x: f32[4, 9]) -> (y: f32[4, 9]) {\n    y = floor(x) + ceil(x) * 10 + round(x) * 100\n    return y\n}\n")
    xc = np.concatenate([edge[:13], np.linspace(-5, 5, 23, dtype=np.float32)]).reshape(4, 9)
    p, d = cuda_sim.dump(harp, "sm90")
    S.check("rounding on CUDA: harp dump --dump gpu,cu", p.returncode == 0, p.stderr[-400:])
    if p.returncode == 0:
        got, err = cuda_sim.run(d, {"x": xc})
        S.check("rounding on CUDA: runs on the simulator", err is None, err)
        if err is None:
            S.check("rounding on CUDA: matches numpy", *ht.close(got["y"], np.floor(xc) + np.ceil(xc) * 10 + np.round(xc) * 100, atol=0))

# ---- refused variants: a clear error naming the node, no output ------------------------------
E = ht.tempfile.mkdtemp()
xe_path = os.path.join(E, "x.npy")
np.save(xe_path, np.ones((1, 4, 4, 4), np.float32))


def refused(name, nodes, *needles, inits=(), opset=17, x_shape=(1, 4, 4, 4)):
    m = model(nodes, [vi("x", list(x_shape))], [vi("y", None)], [init(k, v) for k, v in dict(inits).items()], opset)
    out = os.path.join(E, "out_" + "".join(ch if ch.isalnum() else "_" for ch in name))
    p = ht.subprocess.run([ht.HARP, "run", save(m), "--out", out, "--input", f"x={xe_path}"], capture_output=True, text=True, timeout=120)
    S.check(f"{name}: exit code 1", p.returncode == 1, f"rc={p.returncode} {p.stderr[-300:]}")
    S.check(f"{name}: no crash", "Sanitizer" not in p.stderr and "Traceback" not in p.stderr, p.stderr[-300:])
    for nd in needles:
        S.check(f"{name}: says {nd!r}", nd in p.stderr, p.stderr.strip()[-400:])
    S.check(f"{name}: no output", not os.path.exists(out) or not os.listdir(out))


refused("ReduceProd", [mk("ReduceProd", ["x"], ["y"], name="rp")], "Unsupported", 'node 0 "rp" (ReduceProd)', "no product")
# Resize's cubic mode, fractional scales, align_corners and every nearest_mode
# are supported now: tests/py/test_onnx_resize.py checks them.
# scales fed at run time (an input harp run is not given: were it, harp run would fix it at import)
rts = model([mk("Resize", ["x", "", "sc"], ["y"], name="rz")], [vi("x", [1, 4, 4, 4]), vi("sc", [4])], [vi("y", None)], [], 13)
p = ht.subprocess.run([ht.HARP, "run", save(rts), "--out", os.path.join(E, "out_rts"), "--input", f"x={xe_path}"], capture_output=True,
                      text=True, timeout=120)
S.check("Resize runtime scales: refused", p.returncode == 1 and 'node 0 "rz" (Resize)' in p.stderr and "must be a constant" in p.stderr,
        p.stderr[-300:])
refused("Upsample cubic", [mk("Upsample", ["x", "sc"], ["y"], mode="cubic", name="up")], 'node 0 "up" (Upsample)', "cubic",
        inits={"sc": np.array([1, 1, 2, 2], np.float32)}, opset=9)
refused("Pad reflect too wide", [mk("Pad", ["x", "p"], ["y"], mode="reflect", name="pd")], 'node 0 "pd" (Pad)', "reflect padding",
        inits={"p": ints(0, 0, 4, 0, 0, 0, 0, 0)})
refused("Tile repeats 0", [mk("Tile", ["x", "r"], ["y"], name="tl")], 'node 0 "tl" (Tile)', "repeats[1] = 0", inits={"r": ints(1, 0, 1, 1)})
refused("Slice step 0", [mk("Slice", ["x", "s", "e", "a", "p"], ["y"], name="sl")], 'node 0 "sl" (Slice)', "step 0",
        inits={"s": ints(0), "e": ints(2), "a": ints(1), "p": ints(0)})


def dynamic(name, nodes, *needles, inits=(), opset=17, x_shape=("N", 4, 4, 4), out_type=TensorProto.FLOAT):
    """An op that needs a dynamic dim's size: with the input's data the import
    specialises on its shape and the op runs (checked against onnxruntime);
    without a shape (harp dump) it is refused, naming the node, the graph
    input and the --shape to give."""
    m = model(nodes, [vi("x", list(x_shape))], [vi("y", None, out_type)], [init(k, v) for k, v in dict(inits).items()], opset)
    path = save(m)
    x = rand(3, 4, 4, 4) if x_shape[0] == "N" else rand(1, 4, 5, 4)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    p, d = ht.run(path, {"x": x}, backend="interp")
    S.check(f"{name}, shape from the data: runs", p.returncode == 0, p.stderr.strip()[-400:])
    if p.returncode == 0:
        ok, why = ht.close(np.load(os.path.join(d, "y.npy")), want, rtol=1e-5, atol=1e-6)
        S.check(f"{name}, shape from the data: matches onnxruntime", ok, why)
    out = os.path.join(E, "dump_" + "".join(ch if ch.isalnum() else "_" for ch in name))
    p = ht.subprocess.run([ht.HARP, "dump", path, "--dump", "tiny", "--dump-dir", out], capture_output=True, text=True, timeout=120)
    S.check(f"{name}, no shape: exit code 1", p.returncode == 1, f"rc={p.returncode} {p.stderr[-300:]}")
    for nd in ("UnboundSymbol", 'graph input "x"') + needles:
        S.check(f"{name}, no shape: says {nd!r}", nd in p.stderr, p.stderr.strip()[-400:])
    S.check(f"{name}, no shape: no output", not os.path.exists(out) or not os.listdir(out))


dynamic("Slice negative step on a dynamic axis", [mk("Slice", ["x", "s", "e", "a", "p"], ["y"], name="sl")], 'node 0 "sl" (Slice)',
        "--shape x=<N>x4x4x4", inits={"s": ints(-1), "e": ints(-100), "a": ints(0), "p": ints(-1)})
dynamic("Hardmax on a dynamic axis", [mk("Hardmax", ["x"], ["y"], axis=0, name="hm")], 'node 0 "hm" (Hardmax)', "--shape x=<N>x4x4x4",
        opset=13)
dynamic("ArgMax on a dynamic axis", [mk("ArgMax", ["x"], ["y"], axis=0, name="am")], 'node 0 "am" (ArgMax)', "--shape x=<N>x4x4x4",
        out_type=TensorProto.INT64)
refused("DepthToSpace channels", [mk("DepthToSpace", ["x"], ["y"], blocksize=3, name="d2s")], 'node 0 "d2s" (DepthToSpace)',
        "not a multiple")
# auto_pad SAME_* and output_shape work (test_onnx_shapes.py checks them against onnxruntime); a bad value does not
refused("ConvTranspose auto_pad", [mk("ConvTranspose", ["x", "w"], ["y"], auto_pad="SAME_MIDDLE", name="ct")],
        'node 0 "ct" (ConvTranspose)', "InvalidArgument", "SAME_MIDDLE", inits={"w": rand(4, 2, 3, 3)})
refused("ConvTranspose output_shape", [mk("ConvTranspose", ["x", "w"], ["y"], output_shape=[9, 9], name="ct")], "output_shape",
        inits={"w": rand(4, 2, 3, 3)})
# a weight fed at run time (an input harp run is not given: were it, harp run would fix it at import)
rtw = model([mk("ConvTranspose", ["x", "tw"], ["y"], name="ct")], [vi("x", [1, 4, 4, 4]), vi("tw", [4, 2, 3, 3])], [vi("y", None)], [], 17)
p = ht.subprocess.run([ht.HARP, "run", save(rtw), "--out", os.path.join(E, "out_rtw"), "--input", f"x={xe_path}"], capture_output=True,
                      text=True, timeout=120)
S.check("ConvTranspose runtime weight: refused", p.returncode == 1 and 'node 0 "ct" (ConvTranspose)' in p.stderr and "float32 constant" in p.stderr,
        p.stderr[-300:])
refused("ConvTranspose pads past the kernel", [mk("ConvTranspose", ["x", "w"], ["y"], pads=[3, 0, 0, 0], name="ct")],
        "beyond the kernel", inits={"w": rand(4, 2, 3, 3)})
refused("Einsum ellipsis", [mk("Einsum", ["x"], ["y"], equation="...ij->...ji", name="es")], 'node 0 "es" (Einsum)', "ellipsis")
refused("Einsum diagonal", [mk("Einsum", ["x"], ["y"], equation="abii->abi", name="es")], "repeated index 'i'")
refused("Einsum implicit output", [mk("Einsum", ["x"], ["y"], equation="abcd", name="es")], "implicit output")
refused("Einsum three operands", [mk("Einsum", ["x", "x", "x"], ["y"], equation="abcd,abcd,abcd->a", name="es")], "3 operands")
refused("Einsum sizes differ", [mk("Einsum", ["x", "w"], ["y"], equation="abcd,de->abce", name="es")], "index 'd' is 4",
        inits={"w": rand(3, 2)})
refused("Einsum rank", [mk("Einsum", ["x"], ["y"], equation="abc->a", name="es")], "ranks")
# a dilated 2-D AveragePool is supported now (as 3-D): tests/py/test_onnx_conv3d.py
dynamic("MaxPool dilated on a dynamic size", [mk("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], dilations=[2, 2], name="mp")],
        'node 0 "mp" (MaxPool)', "dilated pooling", "--shape x=1x4x<H>x4", x_shape=(1, 4, "H", 4))
refused("MaxPool dilated, too many taps", [mk("MaxPool", ["x"], ["y"], kernel_shape=[1, 65], dilations=[1, 2], pads=[0, 70, 0, 70],
                                             name="mp")], 'node 0 "mp" (MaxPool)', "at most 64 taps")
refused("Floor of an integer", [mk("Cast", ["x"], ["i"], to=TensorProto.INT32), mk("Floor", ["i"], ["y"], name="fl")],
        'node 1 "fl" (Floor)')
S.close()
