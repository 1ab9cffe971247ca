"""ONNX LSTM, GRU and RNN (src/frontend/onnx_rnn.c) against onnxruntime over
the attribute space: a seeded sample of directions x layouts x
sequence_lens (absent, fed at run time, an initializer) x activations (the
defaults, or any of the eleven with random alpha / beta) x clip x optional
outputs (each of Y, Y_h, Y_c present or not) x initial states x peepholes x
input_forget x linear_before_reset.  The cases are nodes of one model (one C
file for the cpu backend), run on the interpreter and the cpu backend.
onnxruntime has no layout 1: those cases are checked against it on the
transposed tensors.  Then the bad attributes, each a clear error naming the
node, and a sequence length harp cannot unroll (symbolic, or past the limit).

HARP_RNN_CASES=N changes the sample size (default 40)."""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import harp_test as ht  # noqa: E402

ht.onnx_or_skip()
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402
ht.compiled_only()  # the cells' and copies' compiled numbers on the cpu backend, not tier 0's (harp_test.py)

S = ht.Suite("onnx_rnn")
BACKENDS = [b for b in ("interp", "cpu") if b in ht.BACKENDS]
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
NACT = {"LSTM": 3, "GRU": 2, "RNN": 1}
ACTS = ["Sigmoid", "Tanh", "Relu", "Affine", "LeakyRelu", "ThresholdedRelu", "ScaledTanh", "HardSigmoid", "Elu", "Softsign", "Softplus"]
IN_NAMES = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]


def save(m):
    path = os.path.join(ht.tempfile.mkdtemp(), "m.onnx")
    onnx.save(m, path)
    return path


def draw_case(rng, k):
    """Case k: the op, its attributes and its input arrays (None: absent)."""
    op = ["LSTM", "GRU", "RNN"][k % 3]
    G, H, I, T, B = GATES[op], int(rng.integers(1, 7)), int(rng.integers(1, 5)), int(rng.integers(1, 5)), int(rng.integers(1, 4))
    direction = ["forward", "reverse", "bidirectional"][int(rng.integers(3))]
    D = 2 if direction == "bidirectional" else 1
    layout = int(rng.integers(2))
    attrs = {"hidden_size": H, "direction": direction}
    if layout:
        attrs["layout"] = 1
    if rng.random() < 0.4:
        names = [ACTS[int(i)] for i in rng.integers(0, len(ACTS), NACT[op] * D)]
        attrs["activations"] = names
        attrs["activation_alpha"] = [float(v) for v in rng.uniform(0.1, 0.9, int(rng.integers(0, 4)))]
        attrs["activation_beta"] = [float(v) for v in rng.uniform(-0.5, 0.5, int(rng.integers(0, 4)))]
        if not attrs["activation_alpha"]:
            del attrs["activation_alpha"]
        if not attrs["activation_beta"]:
            del attrs["activation_beta"]
    if rng.random() < 0.3:
        attrs["clip"] = float(rng.uniform(0.2, 2.0))
    if op == "GRU" and rng.random() < 0.5:
        attrs["linear_before_reset"] = 1
    if op == "LSTM" and rng.random() < 0.25:
        attrs["input_forget"] = 1
    f = np.float32
    ins = {"X": rng.standard_normal((B, T, I) if layout else (T, B, I)).astype(f),
           "W": (rng.standard_normal((D, G * H, I)) * 0.7).astype(f),
           "R": (rng.standard_normal((D, G * H, H)) * 0.5).astype(f)}
    if rng.random() < 0.7:
        ins["B"] = (rng.standard_normal((D, 2 * G * H)) * 0.5).astype(f)
    lens_kind = ["none", "input", "const"][int(rng.integers(3))]
    if lens_kind != "none":
        ins["sequence_lens"] = rng.integers(0, T + 1, B).astype(np.int32)
    st = (B, D, H) if layout else (D, B, H)
    if rng.random() < 0.6:
        ins["initial_h"] = rng.standard_normal(st).astype(f)
    if op == "LSTM" and rng.random() < 0.6:
        ins["initial_c"] = rng.standard_normal(st).astype(f)
    if op == "LSTM" and rng.random() < 0.5:
        ins["P"] = (rng.standard_normal((D, 3 * H)) * 0.5).astype(f)
    nout = 3 if op == "LSTM" else 2
    outs = [rng.random() < 0.7 for _ in range(nout)]
    if not any(outs):
        outs[int(rng.integers(nout))] = True
    return dict(op=op, attrs=attrs, ins=ins, outs=outs, lens_const=lens_kind == "const", layout=layout)


def node_of(case, k, inputs, inits, initializers):
    """The case's node (names suffixed _k), adding its graph inputs and initializers."""
    names = []
    for n in IN_NAMES[:8 if case["op"] == "LSTM" else 6]:
        a = case["ins"].get(n)
        if a is None:
            names.append("")
            continue
        nm = f"{n}_{k}"
        names.append(nm)
        if n in ("W", "R") or (n == "sequence_lens" and case["lens_const"]):
            initializers.append(onnx.numpy_helper.from_array(a, nm))
        else:
            inputs.append(helper.make_tensor_value_info(nm, TensorProto.INT32 if n == "sequence_lens" else TensorProto.FLOAT, list(a.shape)))
            inits[nm] = a
    while names and not names[-1]:
        names.pop()
    outs = [f"{o}_{k}" if want else "" for o, want in zip(["Y", "Y_h", "Y_c"], case["outs"])]
    while outs and not outs[-1]:
        outs.pop()
    return helper.make_node(case["op"], names, outs, name=f"rnn_{k}", **case["attrs"]), outs


def ort_reference(case):
    """onnxruntime's outputs of the case (layout 1 through the transposed layout 0)."""
    attrs, ins, layout = dict(case["attrs"]), dict(case["ins"]), case["layout"]
    if layout:
        attrs.pop("layout")
        ins["X"] = ins["X"].swapaxes(0, 1).copy()
        for n in ("initial_h", "initial_c"):
            if n in ins:
                ins[n] = ins[n].swapaxes(0, 1).copy()
    names = [n if n in ins else "" for n in IN_NAMES[:8 if case["op"] == "LSTM" else 6]]
    while names and not names[-1]:
        names.pop()
    nout = 3 if case["op"] == "LSTM" else 2
    onames = ["Y", "Y_h", "Y_c"][:nout]
    vis = [helper.make_tensor_value_info(n, TensorProto.INT32 if n == "sequence_lens" else TensorProto.FLOAT, list(ins[n].shape))
           for n in names if n]
    g = helper.make_graph([helper.make_node(case["op"], names, onames, **attrs)], "g", vis,
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in onames])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    so = ort.SessionOptions()
    so.log_severity_level = 3
    res = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {n: ins[n] for n in names if n})
    if layout:
        res = [res[0].transpose(2, 0, 1, 3)] + [r.swapaxes(0, 1) for r in res[1:]]
    return res


def sample():
    rng = np.random.default_rng(24)
    ncases = int(os.environ.get("HARP_RNN_CASES", "40"))
    cases = [draw_case(rng, k) for k in range(ncases)]
    nodes, inputs, feeds, inits, outs = [], [], {}, [], []
    for k, case in enumerate(cases):
        n, o = node_of(case, k, inputs, feeds, inits)
        nodes.append(n)
        outs.append(o)
    outputs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for os_ in outs for o in os_ if o]
    m = helper.make_model(helper.make_graph(nodes, "rnns", inputs, outputs, inits), opset_imports=[helper.make_opsetid("", 14)])
    path = save(m)
    want = [ort_reference(c) for c in cases]
    for be in BACKENDS:
        res, err = ht.run_model(path, feeds, backend=be)
        S.check(f"{len(cases)} cases on {be}: run", err is None, (err or "")[-800:])
        if err:
            continue
        bad = 0
        for k, case in enumerate(cases):
            for j, name in enumerate(outs[k]):
                if not name:
                    continue
                got = res[name]
                ok = got.shape == want[k][j].shape and np.allclose(got, want[k][j], rtol=1e-4, atol=1e-5)
                if not ok:
                    bad += 1
                    err = np.abs(got - want[k][j]).max() if got.shape == want[k][j].shape else f"shape {got.shape} vs {want[k][j].shape}"
                    S.check(f"{be} case {k} {name}", False, f"{case['op']} {case['attrs']} lens={case['ins'].get('sequence_lens')}: {err}")
        S.check(f"{be}: every output of the {len(cases)} cases matches onnxruntime", bad == 0, f"{bad} outputs differ")


def one_node(op, attrs, shapes, inputs=None, x_dims=None):
    """A model of one node; shapes: the inputs' shapes (W and R initializers)."""
    rng = np.random.default_rng(0)
    vis, inits, names = [], [], []
    for n, shp in shapes.items():
        names.append(n)
        if n in ("W", "R", "B", "P"):
            inits.append(onnx.numpy_helper.from_array(rng.standard_normal(shp).astype(np.float32), n))
        else:
            vis.append(helper.make_tensor_value_info(n, TensorProto.FLOAT, x_dims if n == "X" and x_dims else list(shp)))
    node = helper.make_node(op, inputs or names, ["Y", "Y_h"], name="the_rnn", **attrs)
    g = helper.make_graph([node], "g", vis, [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], inits)
    return save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]))


def bad_attributes():
    """Each bad attribute is an error naming the node, with a message saying what is wrong."""
    sh = {"X": [3, 1, 2], "W": [1, 12, 2], "R": [1, 12, 3]}
    cases = [
        ("hidden_size mismatch", "LSTM", {"hidden_size": 4}, sh, "hidden_size 4 does not match"),
        ("W rows", "LSTM", {}, {"X": [3, 1, 2], "W": [1, 10, 2], "R": [1, 12, 3]}, "gate rows"),
        ("unknown activation", "LSTM", {"activations": ["Sigmoid", "Tanhh", "Tanh"]}, sh, "unknown activation \"Tanhh\""),
        ("activation count", "GRU", {"activations": ["Sigmoid"]}, {"X": [3, 1, 2], "W": [1, 9, 2], "R": [1, 9, 3]}, "takes 2"),
        ("direction typo", "RNN", {"direction": "backward"}, {"X": [3, 1, 2], "W": [1, 3, 2], "R": [1, 3, 3]}, "direction \"backward\""),
        ("direction count", "RNN", {"direction": "bidirectional"}, {"X": [3, 1, 2], "W": [1, 3, 2], "R": [1, 3, 3]}, "directions"),
        ("layout", "RNN", {"layout": 2}, {"X": [3, 1, 2], "W": [1, 3, 2], "R": [1, 3, 3]}, "layout 2"),
        ("clip", "RNN", {"clip": -1.0}, {"X": [3, 1, 2], "W": [1, 3, 2], "R": [1, 3, 3]}, "clip"),
        ("X features", "RNN", {}, {"X": [3, 1, 5], "W": [1, 3, 2], "R": [1, 3, 3]}, "input features"),
    ]
    for what, op, attrs, shapes, needle in cases:
        p, _ = ht.run(one_node(op, attrs, shapes))
        err = p.stderr
        S.check(f"bad attribute ({what}): a clear error naming the node", p.returncode == 1 and "the_rnn" in err and needle in err
                and "error[" in err, err.strip()[-400:])
    # the time axis symbolic: refused with the option to give
    p, _ = ht.run(one_node("RNN", {}, {"X": [3, 1, 2], "W": [1, 3, 2], "R": [1, 3, 3]}, x_dims=["T", 1, 2]))
    S.check("a symbolic sequence length: refused naming the node, the size, the input and the option", p.returncode == 1
            and "the_rnn" in p.stderr and "unrolls" in p.stderr and "Unsupported" in p.stderr and 'graph input "X"' in p.stderr
            and "--shape" in p.stderr, p.stderr.strip()[-400:])
    p, _ = ht.run(one_node("RNN", {"direction": "bidirectional"}, {"X": [513, 1, 2], "W": [2, 3, 2], "R": [2, 3, 3]}))
    S.check("a sequence past the limit: LimitExceeded naming the node", p.returncode == 1 and "the_rnn" in p.stderr
            and "LimitExceeded" in p.stderr and "1024" in p.stderr, p.stderr.strip()[-400:])


def threshold_edge():
    """ThresholdedRelu passes x > alpha only (onnxruntime): inputs exactly at alpha give 0."""
    W = np.array([[[0.5, 0], [0.25, 0], [1.0, 0]]], np.float32)
    g = helper.make_graph([helper.make_node("RNN", ["X", "W", "R"], ["Y"], hidden_size=3, activations=["ThresholdedRelu"],
                                            activation_alpha=[0.5])], "g",
                          [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 1, 2])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
                          [onnx.numpy_helper.from_array(W, "W"), onnx.numpy_helper.from_array(np.zeros((1, 3, 3), np.float32), "R")])
    path = save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]))
    for be in BACKENDS:
        p, d = ht.run(path, {"X": np.array([[[1.0, 0.0]]], np.float32)}, backend=be)
        got = np.load(os.path.join(d, "Y.npy")).ravel() if p.returncode == 0 else None
        S.check(f"ThresholdedRelu at alpha on {be}", got is not None and list(got) == [0.0, 0.0, 1.0], p.stderr[-300:] + str(got))


def structure():
    """Each time step is one kernel (the cell template: the recurrent GEMV with
    the gate math in its epilogue), two for a GRU without linear_before_reset
    (its (r * h) Rh^T needs all of r) and one per direction; one kernel in
    all for a streaming step (T = 1: the GEMV x W^T joins the cell, and the
    output copies); Y of many steps is one copy kernel.  The values match
    onnxruntime (H = 20: a partial 16-column block)."""
    if "cpu" not in BACKENDS:
        return
    rng = np.random.default_rng(5)
    T, I, H = 6, 5, 20
    for op, extra, want_cells, want_kernels in [
            ("LSTM", {}, T, T + 2), ("GRU", {"linear_before_reset": 1}, T, T + 2), ("RNN", {}, T, T + 2),
            ("GRU", {}, 2 * T, None), ("LSTM", {"direction": "bidirectional"}, 2 * T, None),
            ("LSTM", {"T": 1}, 1, 1), ("GRU", {"T": 1, "linear_before_reset": 1}, 1, 1), ("LSTM", {"B": 6}, T, T + 2)]:
        extra = dict(extra)
        t, B = extra.pop("T", T), extra.pop("B", 3)  # B = 6: two tiles of rows, one partial
        D = 2 if extra.get("direction") == "bidirectional" else 1
        G = GATES[op]
        ins = {"X": rng.standard_normal((t, B, I)).astype(np.float32), "W": (rng.standard_normal((D, G * H, I)) * 0.5).astype(np.float32),
               "R": (rng.standard_normal((D, G * H, H)) * 0.5).astype(np.float32), "B": rng.standard_normal((D, 2 * G * H)).astype(np.float32),
               "initial_h": rng.standard_normal((D, B, H)).astype(np.float32)}
        if op == "LSTM":
            ins["initial_c"] = rng.standard_normal((D, B, H)).astype(np.float32)
        case = dict(op=op, attrs=dict(hidden_size=H, **extra), ins=ins, outs=[True] * (3 if op == "LSTM" else 2), lens_const=False, layout=0)
        inputs, feeds, inits = [], {}, []
        node, outs = node_of(case, 0, inputs, feeds, inits)
        inits.append(onnx.numpy_helper.from_array(ins["B"], "B_0"))  # W, R and B initializers: the cell packs W and R
        inputs = [vi for vi in inputs if vi.name != "B_0"]
        feeds.pop("B_0", None)
        g = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs], inits)
        path = save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]))
        dump = ht.tempfile.mkdtemp()
        p, d = ht.run(path, feeds, backend="cpu", extra=["--dump", "region,c", "--dump-dir", dump])
        name = f"{op} {extra} T={t} B={B}"
        S.check(f"{name}: runs", p.returncode == 0, p.stderr[-500:])
        if p.returncode:
            continue
        regions = json.load(open(os.path.join(dump, "region.json")))["regions"]
        cells = sum(r.get("shape") == "cell" for r in regions)
        ccode = open(os.path.join(dump, "model.c")).read()
        S.check(f"{name}: {want_cells} cell regions", cells == want_cells, f"{cells} of {len(regions)} regions")
        S.check(f"{name}: every cell on the cell template", ccode.count("/* recurrent cell:") == cells, ccode[:0])
        if want_kernels is not None:
            S.check(f"{name}: {want_kernels} kernels", len(regions) == want_kernels, [r.get("name") for r in regions])
        if t > 4:
            S.check(f"{name}: Y is one copy kernel", "/* concatenation of" in ccode, "")
        want = ort_reference(case)
        for j, o in enumerate(outs):
            got = np.load(os.path.join(d, o + ".npy"))
            S.check(f"{name}: {o} matches onnxruntime", got.shape == want[j].shape and np.allclose(got, want[j], rtol=1e-4, atol=1e-5),
                    f"{np.abs(got - want[j]).max() if got.shape == want[j].shape else got.shape}")


def long_sequence():
    """300 steps: Y's concatenation is split over regions (at most 256 blocks
    each), each a copy kernel reading the partial sum before it; the values
    match onnxruntime."""
    if "cpu" not in BACKENDS:
        return
    rng = np.random.default_rng(9)
    T, B, I, H = 300, 1, 3, 4
    ins = {"X": rng.standard_normal((T, B, I)).astype(np.float32), "W": (rng.standard_normal((1, H, I)) * 0.5).astype(np.float32),
           "R": (rng.standard_normal((1, H, H)) * 0.5).astype(np.float32)}
    case = dict(op="RNN", attrs={"hidden_size": H}, ins=ins, outs=[True, True], lens_const=False, layout=0)
    inputs, feeds, inits = [], {}, []
    node, outs = node_of(case, 0, inputs, feeds, inits)
    g = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs], inits)
    path = save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]))
    dump = ht.tempfile.mkdtemp()
    p, d = ht.run(path, feeds, backend="cpu", extra=["--dump", "c", "--dump-dir", dump])
    S.check("300 steps: run", p.returncode == 0, p.stderr[-400:])
    if p.returncode:
        return
    ccode = open(os.path.join(dump, "model.c")).read()
    S.check("300 steps: Y is copy kernels, no generic loops", ccode.count("/* concatenation of") >= 2 and "generic loops" not in ccode,
            ccode.count("/* concatenation of"))
    want = ort_reference(case)
    for j, o in enumerate(outs):
        got = np.load(os.path.join(d, o + ".npy"))
        S.check(f"300 steps: {o} matches onnxruntime", got.shape == want[j].shape and np.allclose(got, want[j], rtol=1e-4, atol=1e-5), "")


sample()
threshold_edge()
structure()
long_sequence()
bad_attributes()
S.close()
