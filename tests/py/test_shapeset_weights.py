#!/usr/bin/env python3
"""test_shapeset_weights.py — a ShapeSet object's weights and constant
tables whose shape moves with a symbol of its box (issue 25; llama's
rotary tables cos, sin [S, 1, 64]; docs/architecture.md "One object per
ShapeSet").  One compile serves every binding: such a weight is one table
at the box's upper corner whose leading slice the kernels read.

  - a DSL model whose weights are declared [S, 1, E] and [H, S] (a symbol on
    an inner axis: the slice is strided), compiled once through a Python
    session (harp.h's shapesets) with the tables at S = 128, run at four
    bindings against numpy; one object;
  - the same through `harp run --shapeset` with each weight at the binding's
    own shape (as the model declares it): the table is placed in the
    leading corner of the one at the upper corner for that run;
  - an ONNX model whose table is an initializer of 128 rows sliced by the
    sequence length (Shape -> Gather -> Slice): the import proves the slice
    inside the table by the box's top (S <= 128), one object, against
    onnxruntime at three bindings;
  - an ONNX model whose table is computed from Range(0, S) (cos / sin of
    positions times frequencies, what the importer folds into a weight at
    a fixed binding): one object (its iota reads S at run time, and so does
    the gather of its Cos and Sin, its point count S * E), against
    onnxruntime at three bindings, the box's ends among them.
A binding past the box is refused."""
import os
import subprocess
import tempfile

from harp_py import HARP, Suite, harp, np, ort

s = Suite("shapeset_weights")
D = tempfile.mkdtemp()
CACHE = tempfile.mkdtemp()
rng = np.random.default_rng(25)
H, E, TOP = 4, 16, 128

DSL = f"""graph<S={TOP}> main(x: f32[1, S, {H}, {E}], cos: f32[S, 1, {E}], sin: f32[S, 1, {E}], b: f32[{H}, S])
    -> (y: f32[1, S, {H}, {E}]) {{
    r = concat([-slice(x, [{E // 2}], [{E}], [3]), slice(x, [0], [{E // 2}], [3])], axis=3)
    return x * cos + r * sin + reshape(permute(b, [1, 0]), [1, S, {H}, 1])
}}
"""


def want_dsl(x, cos, sin, b):
    """numpy's rotary embedding plus the per-position bias (the tables at the binding's S)."""
    r = np.concatenate([-x[..., E // 2:], x[..., :E // 2]], axis=3)
    return x * cos[None] + r * sin[None] + b.T[None, :, :, None]


path = os.path.join(D, "rope.harp")
with open(path, "w") as f:
    f.write(DSL)
pos = np.arange(TOP, dtype=np.float64)[:, None] * 10000.0 ** (-np.arange(E) % (E // 2) * 2.0 / E)
cos, sin = np.cos(pos)[:, None, :].astype(np.float32), np.sin(pos)[:, None, :].astype(np.float32)
bias = rng.standard_normal((H, TOP)).astype(np.float32)

def run(sess, feeds):
    """sess's first output on feeds, or the error's text."""
    try:
        return sess.run(None, feeds)[0]
    except harp.HarpError as ex:
        return str(ex)[:400]


# one compile through harp.h, the tables at the upper corner
try:
    sess = harp.InferenceSession(path, {"progress": False, "cache_dir": CACHE, "params": {"cos": cos, "sin": sin, "b": bias}},
                                 shapesets={"S": (16, TOP)})
except harp.HarpError as ex:
    sess = None
    s.check("DSL weights at the upper corner: compiles", False, str(ex)[:400])
for S in (16, 37, TOP, 77) if sess else ():
    x = rng.standard_normal((1, S, H, E)).astype(np.float32)
    got = run(sess, {"x": x})
    want = want_dsl(x, cos[:S], sin[:S], bias[:, :S])
    ok = not isinstance(got, str) and got.shape == want.shape
    err = float(np.max(np.abs(got - want))) if ok else got
    s.check(f"DSL weights at the upper corner, S = {S}: vs numpy", ok and err <= 1e-5, str(err))
if sess:
    objs, built, why = sess.shapeset_objects()
    s.check("DSL weights: one object for the box", objs == 1 and why is None, f"{objs} object(s): {why}")
    got = run(sess, {"x": np.zeros((1, TOP + 1, H, E), np.float32)})
    s.check("DSL weights: a binding past the box is refused", isinstance(got, str) and "outside" in got, str(got)[:300])


def cli_run(S):
    """`harp run --shapeset` at S, each weight at the binding's shape: (stderr, output or None, want)."""
    x = rng.standard_normal((1, S, H, E)).astype(np.float32)
    b = rng.standard_normal((H, S)).astype(np.float32)
    out = tempfile.mkdtemp(dir=D)
    args = [HARP, "run", path, "--shapeset", f"S=16..{TOP}", "--sym", f"S={S}", "--out", out, "--time-stages"]
    for n, a, kind in (("x", x, "input"), ("cos", cos[:S], "param"), ("sin", sin[:S], "param"), ("b", b, "param")):
        np.save(os.path.join(out, f"in_{n}.npy"), a)
        args += [f"--{kind}", f"{n}={os.path.join(out, f'in_{n}.npy')}"]
    p = subprocess.run(args, capture_output=True, text=True, timeout=600, env=dict(os.environ, HARP_CACHE_DIR=CACHE))
    y = os.path.join(out, "y.npy")
    return p.stderr, np.load(y) if p.returncode == 0 and os.path.exists(y) else None, want_dsl(x, cos[:S], sin[:S], b)


for S in (16, 50, 100):
    err_text, got, want = cli_run(S)
    s.check(f"harp run --shapeset, weights at the binding's shape, S = {S}: runs on the one object",
            got is not None and "one object for the box" in err_text, err_text.strip()[-400:])
    if got is not None:
        s.check(f"harp run --shapeset, S = {S}: vs numpy", got.shape == want.shape and np.allclose(got, want, atol=1e-5),
                f"max err {float(np.max(np.abs(got - want))) if got.shape == want.shape else got.shape}")


def onnx_model(name, table_from):
    """y = x * T[S] (+ x) with T [S, E] either an initializer of TOP rows sliced by S ("slice") or
    cos + sin of Range(0, S) times frequencies ("range"); x [2, S, E], S a dim_param."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    ints = {"zero": np.array(0, np.int64), "one": np.array(1, np.int64), "zero1": np.array([0], np.int64),
            "ax0": np.array([0], np.int64), "ax1": np.array([1], np.int64)}
    inits = [numpy_helper.from_array(v, k) for k, v in ints.items()]
    nodes = [helper.make_node("Shape", ["x"], ["shp"]), helper.make_node("Gather", ["shp", "one"], ["S"], axis=0)]
    if table_from == "slice":
        inits.append(numpy_helper.from_array(rng.standard_normal((TOP, E)).astype(np.float32), "table"))
        nodes += [helper.make_node("Unsqueeze", ["S", "ax0"], ["S1"]), helper.make_node("Slice", ["table", "zero1", "S1", "ax0"], ["t"])]
    else:
        inits.append(numpy_helper.from_array((10000.0 ** (-np.arange(E) * 1.0 / E)).astype(np.float32), "inv"))
        nodes += [helper.make_node("Range", ["zero", "S", "one"], ["p"]), helper.make_node("Cast", ["p"], ["pf"], to=TensorProto.FLOAT),
                  helper.make_node("Unsqueeze", ["pf", "ax1"], ["p2"]), helper.make_node("Mul", ["p2", "inv"], ["ang"]),
                  helper.make_node("Cos", ["ang"], ["c"]), helper.make_node("Sin", ["ang"], ["sn"]),
                  helper.make_node("Add", ["c", "sn"], ["t"])]
    nodes += [helper.make_node("Mul", ["x", "t"], ["a"]), helper.make_node("Add", ["a", "x"], ["y"])]
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, "S", E])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, "S", E])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    p = os.path.join(D, f"{name}.onnx")
    onnx.save(m, p)
    return p


if ort is None:
    print("onnxruntime not installed: the ONNX rows skipped")
else:
    for kind, expect in (("slice", "one object"), ("range", "one object")):
        p = onnx_model(f"table_{kind}", kind)
        ref = ort.InferenceSession(p, providers=["CPUExecutionProvider"])
        sess = harp.InferenceSession(p, {"progress": False, "cache_dir": CACHE}, shapesets={"S": (16, TOP)})
        for S in (16, 45, TOP):
            x = rng.standard_normal((2, S, E)).astype(np.float32)
            got, want = run(sess, {"x": x}), ref.run(None, {"x": x})[0]
            ok = not isinstance(got, str) and got.shape == want.shape
            err = float(np.max(np.abs(got - want))) if ok else got
            s.check(f"ONNX table ({kind}), S = {S}: vs onnxruntime", ok and err <= 1e-4 * (1 + float(np.max(np.abs(want)))), str(err))
        objs, built, why = sess.shapeset_objects()
        s.check(f"ONNX table ({kind}): {expect}", (objs == 1 and why is None) if expect == "one object" else
                (why is not None and expect in why), f"{objs} object(s): {why}")
s.close()
