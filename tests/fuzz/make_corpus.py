#!/usr/bin/env python3
"""Seed corpora for the libFuzzer targets (docs/reliability.md, "Fuzzing").

    python3 tests/fuzz/make_corpus.py OUT        # OUT/<target>/ for every target
    python3 tests/fuzz/make_corpus.py --seeds    # rewrite tests/fuzz/seeds/ (committed)

OUT/<target>/ gets the repository's test files of that format (tests/models,
tests/bad, tests/dsl_bad, tests/plans, tests/plan_bad, examples), the
committed seeds and findings (tests/fuzz/seeds/, tests/fuzz/regress/) and,
for ONNX, the onnx package's node-test models that harp runs
(tests/py/onnx_node_pass.txt) and the If / Loop / Scan models of
tests/py/flow_models.py.  --seeds writes the small generated files the
regression test replays without Python: ONNX models (external data naming
the files fz_common.c puts beside the model, dynamic dims, control flow) and
.npy files of every dtype and header version."""
import glob
import hashlib
import os
import shutil
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TARGETS = ["onnx", "tiny", "dsl", "plan_json", "plan_dsl", "npy", "calib"]
SOURCES = {
    "tiny": ["tests/models/**/*.json", "tests/bad/*.json"],
    "dsl": ["tests/models/**/*.harp", "tests/dsl_bad/*.harp", "examples/*.harp"],
    "plan_json": ["tests/plans/*.json", "tests/plan_bad/*.json"],
    "plan_dsl": ["tests/plans/*.plan", "tests/plan_bad/*.plan"],
    "onnx": [],
    "npy": [],
    "calib": ["tests/fuzz/regress/calib/*"],
}
MAX_SEED = 64 << 10


def put(out, data):
    """Write data under its hash (libFuzzer's naming), so duplicates merge."""
    if len(data) > MAX_SEED:
        return 0
    with open(os.path.join(out, hashlib.sha1(data).hexdigest()), "wb") as f:
        f.write(data)
    return 1


def onnx_models():
    """Serialized node-test and flow models (none without the onnx package)."""
    try:
        import numpy as np
        from onnx.backend.test.case.node import collect_testcases
    except ImportError:
        return []
    sys.path.insert(0, os.path.join(ROOT, "tests", "py"))
    with open(os.path.join(ROOT, "tests", "py", "onnx_node_pass.txt")) as f:
        passing = {ln.strip() for ln in f if ln.strip() and not ln.startswith("#")}
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        cases = [c.model.SerializeToString() for c in collect_testcases("") if c.name in passing]
    import onnx
    import flow_models
    cases += [v.SerializeToString() for v in vars(flow_models).values() if isinstance(v, onnx.ModelProto)]
    return cases


def corpus(out):
    for t in TARGETS:
        d = os.path.join(out, t)
        os.makedirs(d, exist_ok=True)
        n = 0
        pats = SOURCES[t] + [f"tests/fuzz/seeds/{t}/*", f"tests/fuzz/regress/{t}/*"]
        for pat in pats:
            for p in glob.glob(os.path.join(ROOT, pat), recursive=True):
                with open(p, "rb") as f:
                    n += put(d, f.read())
        if t == "onnx":
            n += sum(put(d, m) for m in onnx_models())
        print(f"{t}: {n} seeds in {d}")


def seed_onnx(d):
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    def mdl(nodes, ins, outs, inits=(), opset=17):
        g = helper.make_graph(nodes, "g", ins, outs, list(inits))
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)

    F = TensorProto.FLOAT
    vi = helper.make_tensor_value_info
    mk = helper.make_node
    # an initializer read from w.bin beside the model: offset and length
    def ext(name, dims):
        t = TensorProto(name=name, data_type=F, dims=dims)
        t.data_location = TensorProto.EXTERNAL
        return t

    w = ext("w", [4, 4])
    w.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "w.bin"), ("offset", "64"), ("length", "64")):
        w.external_data.add(key=k, value=v)
    yield "extdata.onnx", mdl([mk("MatMul", ["x", "w"], ["y"])], [vi("x", F, [2, 4])], [vi("y", F, [2, 4])], [w])
    # one in a subfolder, the whole file
    s = ext("s", [64])
    s.external_data.add(key="location", value="sub/x.bin")
    yield "extdata_sub.onnx", mdl([mk("Add", ["x", "s"], ["y"])], [vi("x", F, [64])], [vi("y", F, [64])], [s])
    # a conv block with dynamic batch and height
    wc = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "wc")
    b = numpy_helper.from_array(np.zeros(4, np.float32), "b")
    yield "conv_dyn.onnx", mdl([mk("Conv", ["x", "wc", "b"], ["c"], pads=[1, 1, 1, 1]), mk("Relu", ["c"], ["r"]),
                                mk("MaxPool", ["r"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
                               [vi("x", F, ["N", 3, "H", 8])], [vi("y", F, None)], [wc, b])
    # attention-like: matmul, softmax, matmul; reshape by an initializer
    shp = numpy_helper.from_array(np.array([2, 8], np.int64), "shp")
    yield "attn.onnx", mdl([mk("MatMul", ["q", "k"], ["s"]), mk("Softmax", ["s"], ["p"], axis=-1),
                            mk("MatMul", ["p", "v"], ["o"]), mk("Reshape", ["o", "shp"], ["y"])],
                           [vi("q", F, [4, 4]), vi("k", F, [4, 4]), vi("v", F, [4, 4])], [vi("y", F, [2, 8])], [shp])
    # layernorm, gemm, concat, slice, transpose
    g = numpy_helper.from_array(np.ones(6, np.float32), "g")
    st = numpy_helper.from_array(np.array([1], np.int64), "st")
    en = numpy_helper.from_array(np.array([5], np.int64), "en")
    ax = numpy_helper.from_array(np.array([1], np.int64), "ax")
    yield "misc.onnx", mdl([mk("LayerNormalization", ["x", "g"], ["l"], axis=-1), mk("Gemm", ["l", "gw"], ["m"], transB=1),
                            mk("Concat", ["m", "m"], ["c"], axis=1), mk("Slice", ["c", "st", "en", "ax"], ["s"]),
                            mk("Transpose", ["s"], ["y"], perm=[1, 0])],
                           [vi("x", F, [3, 6])], [vi("y", F, None)],
                           [g, st, en, ax, numpy_helper.from_array(np.ones((6, 6), np.float32), "gw")], opset=18)


def seed_npy(d):
    import io
    import numpy as np
    arrays = {"f32": np.arange(6, dtype=np.float32).reshape(2, 3), "f16": np.array([1.5, -2, np.inf], np.float16),
              "i32": np.array([[1, -2], [3, 4]], np.int32), "i64": np.array([1, 2, 1 << 40], np.int64),
              "bool": np.array([True, False]), "scalar": np.float32(3.0), "empty": np.zeros((0, 3), np.float32),
              "fortran": np.asfortranarray(np.ones((2, 3), np.float32)), "f64": np.ones(3, np.float64),
              "big_endian": np.ones(2, ">f4")}
    for name, a in arrays.items():
        for ver in ((1, 0), (2, 0), (3, 0)):
            if ver != (1, 0) and name not in ("f32", "scalar"):
                continue
            b = io.BytesIO()
            np.lib.format.write_array(b, np.asarray(a), version=ver)
            yield f"{name}_v{ver[0]}.npy", b.getvalue()


def seeds():
    for t, gen in (("onnx", seed_onnx), ("npy", seed_npy)):
        d = os.path.join(HERE, "seeds", t)
        shutil.rmtree(d, True)
        os.makedirs(d)
        for name, m in gen(d):
            data = m if isinstance(m, bytes) else m.SerializeToString()
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
        print(f"{t}: {len(os.listdir(d))} seeds in {d}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--seeds"]:
        seeds()
    elif len(sys.argv) == 2:
        corpus(sys.argv[1])
    else:
        sys.exit(__doc__)
