"""Structure-aware fuzzing of the ONNX importer: onnx's node-test models
(the cases of tests/py/onnx_node_pass.txt, which harp runs) and the If /
Loop / Scan models of tests/py/flow_models.py are mutated, in the main
graph or in any subgraph —
an attribute set to an absurd value, a dimension changed or made symbolic,
an input rewired or emptied, the op swapped for another, an element type
or the opset changed, an initializer's dims broken — and run through
`harp run --random-inputs`.  Every answer must be a result (exit 0) or a
clear error (exit 1 with error[...] and no output file); a signal, another
exit code (InternalError is 2), a sanitizer report or a hang is a bug, and
the mutated model is kept for the report.

    python3 tests/py/test_onnx_fuzz.py [--count N] [--seed S] [--backend cpu] [--keep DIR]

ctest runs a fixed seed (the same mutations every time) on the
interpreter; under the sanitizers (HARP_SANITIZE=1) a quarter of them.
Then the recurrent layers: small LSTM, GRU and RNN models with their
weights as initializers, every option once (directions, sequence_lens,
peepholes, initial states, activations, clip, linear_before_reset), are
mutated the same way (--rnn-count more; a tenth of them on the cpu
backend, where a step is a cell kernel).
Bugs it found are regression cases in test_onnx_errors.py."""
import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import harp_test as ht  # noqa: E402
import test_onnx_node as tn  # noqa: E402  (exits 77 without onnx)
import flow_models  # noqa: E402

import onnx  # noqa: E402
from onnx import helper  # noqa: E402

OPS = ["Add", "Relu", "Conv", "MatMul", "Reshape", "Gather", "Transpose", "Concat", "Slice", "ReduceSum", "Softmax", "MaxPool", "Resize",
       "Pad", "Expand", "Where", "Cast", "Split", "Squeeze", "Unsqueeze", "Gemm", "BatchNormalization", "LRN", "Tile", "ArgMax", "Flatten",
       "LSTM", "GRU", "RNN"]
WEIRD = [0, -1, -2, 1, 2, 3, 7, 1 << 20, 1 << 31, -(1 << 40), 1 << 62]


def graphs(g):
    """g and every subgraph in it, depth first."""
    out = [g]
    for n in g.node:
        for a in n.attribute:
            for sub in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                out += graphs(sub)
    return out


def mutate(m, rnd):
    """One random change to model m (its main graph or a subgraph); returns what it did."""
    g = rnd.choice(graphs(m.graph))
    nodes = list(g.node)
    n = rnd.choice(nodes) if nodes else None
    k = rnd.randrange(9)
    if k == 0 and n is not None and n.attribute:
        a = rnd.choice(list(n.attribute))
        if a.type == onnx.AttributeProto.INT:
            a.i = rnd.choice(WEIRD)
        elif a.type == onnx.AttributeProto.INTS and len(a.ints):
            a.ints[rnd.randrange(len(a.ints))] = rnd.choice(WEIRD)
        elif a.type == onnx.AttributeProto.FLOAT:
            a.f = rnd.choice([float("nan"), float("inf"), -1.0, 0.0, 1e30])
        elif a.type == onnx.AttributeProto.STRING:
            a.s = rnd.choice([b"", b"bogus", b"\x00\xff", b"constant"])
        return f"attribute {n.op_type}.{a.name}"
    if k == 1:
        v = rnd.choice(list(g.input) + list(g.output))
        dims = v.type.tensor_type.shape.dim
        if len(dims):
            d = dims[rnd.randrange(len(dims))]
            c = rnd.randrange(3)
            if c == 0:
                d.dim_value = rnd.choice([0, 1, 2, 5, 4096, 1 << 40])  # not 2^20: a valid 13 GB input is slow, not wrong
            elif c == 1:
                d.dim_param = rnd.choice(["N", "a b", "x;rm -rf", ""])
            else:
                d.Clear()
        return f"a dim of {v.name}"
    if k == 2 and n is not None and n.input:
        names = [x.name for x in g.input] + [o for nn in nodes for o in nn.output] + ["", "missing"]
        n.input[rnd.randrange(len(n.input))] = rnd.choice(names)
        return f"an input of {n.op_type}"
    if k == 3 and n is not None:
        old, n.op_type = n.op_type, rnd.choice(OPS)
        return f"op {old} -> {n.op_type}"
    if k == 4:
        v = rnd.choice(list(g.input) + list(g.output))
        v.type.tensor_type.elem_type = rnd.choice([0, 1, 6, 7, 9, 10, 11, 16, 99])
        return f"element type of {v.name}"
    if k == 5 and g.initializer:
        t = rnd.choice(list(g.initializer))
        if len(t.dims):
            t.dims[rnd.randrange(len(t.dims))] = rnd.choice(WEIRD[:8])
        return f"dims of initializer {t.name}"
    if k == 6 and n is not None:
        name = rnd.choice(["axis", "axes", "perm", "pads", "kernel_shape", "strides", "to", "mode"])
        n.attribute.append(helper.make_attribute(name, rnd.choice([0, -5, [1, 2], [0, 0, 0], 99, "x"])))
        return f"extra attribute {n.op_type}.{name}"
    if k == 7 and n is not None and n.output:
        n.output[0] = rnd.choice([x.name for x in g.input] + ["y", n.output[0]])
        return f"output of {n.op_type} renamed"
    if k == 8 and m.opset_import:
        m.opset_import[0].version = rnd.choice([1, 5, 7, 11, 13, 99, 0, -1])
        return "opset"
    return "nothing"


def rnn_seeds():
    """Small recurrent models, weights as initializers: one of each option."""
    import numpy as np
    from onnx import TensorProto, numpy_helper
    rng = np.random.default_rng(7)
    out = []
    for op, attrs, T, lens, peep in [("LSTM", {}, 3, False, True), ("LSTM", {"direction": "bidirectional", "clip": 2.0}, 4, True, False),
                                     ("GRU", {"linear_before_reset": 1}, 1, False, False), ("GRU", {"direction": "reverse"}, 5, True, False),
                                     ("RNN", {"activations": ["Relu"]}, 2, False, False), ("RNN", {"layout": 1}, 3, True, False)]:
        G = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
        D = 2 if attrs.get("direction") == "bidirectional" else 1
        B, I, H = 2, 3, 4
        inits = [numpy_helper.from_array(rng.standard_normal((D, G * H, I)).astype(np.float32), "W"),
                 numpy_helper.from_array(rng.standard_normal((D, G * H, H)).astype(np.float32), "R"),
                 numpy_helper.from_array(rng.standard_normal((D, 2 * G * H)).astype(np.float32), "B")]
        xs = [B, T, I] if attrs.get("layout") else [T, B, I]
        inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, xs),
                  helper.make_tensor_value_info("h0", TensorProto.FLOAT, [B, D, H] if attrs.get("layout") else [D, B, H])]
        names = ["X", "W", "R", "B", "", "h0"]
        if lens:
            inputs.append(helper.make_tensor_value_info("L", TensorProto.INT32, [B]))
            names[4] = "L"
        if op == "LSTM":
            names += ["", "P" if peep else ""]
            if peep:
                inits.append(numpy_helper.from_array(rng.standard_normal((D, 3 * H)).astype(np.float32), "P"))
        outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
        g = helper.make_graph([helper.make_node(op, names, outs, hidden_size=H, **attrs)], op.lower(), inputs,
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs], inits)
        out.append(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]))
    return out


def fuzz_one(S, m, rnd, name, it, work, keep, backend, timeout, seed):
    """Mutate m and run it; False when the answer was neither a result nor a clear error."""
    what = [mutate(m, rnd) for _ in range(rnd.randint(1, 3))]
    path, out = os.path.join(work, "m.onnx"), os.path.join(work, "out")
    shutil.rmtree(out, True)
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    try:
        p = subprocess.run([ht.HARP, "run", path, "--backend", backend, "--random-inputs", "--out", out, "--loop-limit", "1000"],
                           capture_output=True, text=True, timeout=timeout)
        rc, err = p.returncode, p.stderr
    except subprocess.TimeoutExpired:
        rc, err = "hang", ""
    ok = (rc == 0 or (rc == 1 and "error[" in err and not (os.path.isdir(out) and os.listdir(out)))) and "Sanitizer" not in err
    if not ok:
        kept = os.path.join(keep, f"fuzz_{seed}_{it}.onnx")
        shutil.copy(path, kept)
        S.check(f"#{it} {name} ({'; '.join(what)}): a result or a clear error", False, f"rc={rc} {err.strip()[-300:]} -> {kept}")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sanitize = os.environ.get("HARP_SANITIZE") == "1"
    ap.add_argument("--count", type=int, default=300 if sanitize else 1500)
    ap.add_argument("--seed", type=int, default=20261122)
    ap.add_argument("--rnn-count", type=int, default=40 if sanitize else 150)
    ap.add_argument("--backend", default="interp")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--keep", default=None, help="where the models that fail are kept (default: a temporary directory)")
    a = ap.parse_args()
    S = ht.Suite("onnx_fuzz")
    root = os.path.join(os.environ.get("HARP_CACHE_DIR", tempfile.gettempdir()), f"onnx-node-{onnx.__version__}")
    if not os.path.isdir(root):
        tn.generate(root)
    with open(tn.PASS_LIST) as f:
        names = [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]
    names = [nm for nm in names if os.path.exists(os.path.join(root, nm, "model.onnx"))]
    flows = flow_models.feeds()
    names += sorted(f"flow:{k}" for k in flows)
    rnd = random.Random(a.seed)
    work = tempfile.mkdtemp(prefix="harp-fuzz-")
    keep = a.keep or work
    os.makedirs(keep, exist_ok=True)
    bad = 0
    for it in range(a.count):
        name = rnd.choice(names)
        if name.startswith("flow:"):
            m = onnx.ModelProto()
            m.CopyFrom(flows[name[5:]][0])
        else:
            m = onnx.load(os.path.join(root, name, "model.onnx"))
        bad += not fuzz_one(S, m, rnd, name, it, work, keep, a.backend, a.timeout, a.seed)
    S.check(f"{a.count} mutated models (seed {a.seed}, {a.backend}): {bad} bad", bad == 0)
    seeds, rbad, rrnd = rnn_seeds(), 0, random.Random(a.seed + 1)
    for it in range(a.rnn_count):
        m = onnx.ModelProto()
        m.CopyFrom(rrnd.choice(seeds))
        be = "cpu" if it % 10 == 9 else a.backend
        rbad += not fuzz_one(S, m, rrnd, f"{m.graph.name} ({be})", a.count + it, work, keep, be, a.timeout, a.seed)
    S.check(f"{a.rnn_count} mutated recurrent models (seed {a.seed + 1}): {rbad} bad", rbad == 0)
    bad += rbad
    if not a.keep and not bad:
        shutil.rmtree(work, True)
    S.close()


if __name__ == "__main__":
    main()
