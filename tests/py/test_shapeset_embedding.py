"""An ONNX embedding lookup at run-time sizes (issue 25; docs/cuda.md
"Run-time sizes", docs/architecture.md "One object per ShapeSet"): the
token embedding as torch / transformers export it, ids [B, S] flattened,
Gather of a table E [V, D], the exporter's Reshape [B*S, D] -> [B, S, D]
(from Shape -> Concat), with B and S symbolic; and the variant with a
position embedding added after it (a table PE [P, D] sliced by S).  The
read of the gather's output at [S*b + s, d] put S into a coefficient, so
each binding compiled its own object (CPU) and built its own unit (CUDA);
now the read indexes the Reshape's own [B, S, D] (src/poly/reshape_view.c).

CPU: `harp run --shapeset B=..,S=..` on a cache of its own at three
bindings (B and S both moving): one object for the box, one C compile
(the later bindings from the cache), each output against onnxruntime
(exact: a copy, one fp32 add).
CUDA (no GPU needed): each model dumped for sm80 and sm90 over the box at
its corner hi and at bindings below, the same CUDA C at each; the corner
hi's build on the SIMT simulator (tests/cuda_sim) at each binding against
onnxruntime (exact; cuda_ss_common.at_bindings), S one short at one binding gives another result;
a session over the bindings on the fake libcuda as an 8.0 and a 9.0
device is one build, no fallback (`harp bench --bind` imports the model
once, unbound, its Slice of the position table by S bounded by the
bindings' largest S, as `--shapeset`'s upper corner bounds it); the units compile with nvcc for sm_80 /
sm_90a (NVRTC compiles them in the session).
Skips (77) without onnx and onnxruntime; the CUDA rows without g++."""
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from harp_test import Suite, close, onnx_or_skip, shapeset_built, shapeset_run  # noqa: E402

onnx_or_skip()
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import cuda_sim  # noqa: E402
from cuda_ss_common import NVCC_UNITS, NVCC_UNITS_90, at_bindings, box_corner, derived_defs, nvcc_compiles, one_build  # noqa: E402

V, D, P = 50, 8, 64
# the corner hi first; S one short at the second; one size class of a GPU session (B 3..4, S 9..16: one cluster)
BOX = {"B": (3, 4), "S": (9, 16)}
BINDINGS = [{"B": 4, "S": 16}, {"B": 3, "S": 11}, {"B": 4, "S": 9}]
s = Suite("shapeset_embedding")
rng = np.random.default_rng(25)
WORK = tempfile.mkdtemp(prefix="harp_emb_")
E = rng.standard_normal((V, D)).astype(np.float32)
PE = rng.standard_normal((P, D)).astype(np.float32)


def const(name, v):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(v, np.int64)))


def embedding(pos):
    """The model (written here): ids [B, S] -> Reshape [-1] -> Gather(E) ->
    Reshape to Concat(Shape(ids), [D]); pos: + PE[0:S] (Slice by Shape(ids)[1:2])."""
    nodes = [helper.make_node("Shape", ["ids"], ["sh"]), const("m1", [-1]),
             helper.make_node("Reshape", ["ids", "m1"], ["flat"]),
             helper.make_node("Gather", ["E", "flat"], ["g"], axis=0), const("d", [D]),
             helper.make_node("Concat", ["sh", "d"], ["shape3"], axis=0),
             helper.make_node("Reshape", ["g", "shape3"], ["tok" if pos else "y"])]
    inits = [numpy_helper.from_array(E, "E")]
    if pos:
        nodes += [const("i0", [0]), const("i1", [1]), const("i2", [2]),
                  helper.make_node("Slice", ["sh", "i1", "i2"], ["slen"]),
                  helper.make_node("Slice", ["PE", "i0", "slen"], ["pe"]),
                  helper.make_node("Add", ["tok", "pe"], ["y"])]
        inits.append(numpy_helper.from_array(PE, "PE"))
    g = helper.make_graph(nodes, "embedding", [helper.make_tensor_value_info("ids", TensorProto.INT64, ["B", "S"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "S", D])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    path = os.path.join(WORK, f"embedding{'_pos' if pos else ''}.onnx")
    onnx.save(m, path)
    return path


def ids_at(b):
    """Token ids at binding b, every row of E in range."""
    return rng.integers(0, V, size=(b["B"], b["S"])).astype(np.int64)


def at(b):
    return [f"{k}={v}" for k, v in b.items()]


def cpu_rows(path):
    """One object over the box at three bindings, each against onnxruntime."""
    name = os.path.basename(path)
    env = dict(os.environ, HARP_CACHE_DIR=tempfile.mkdtemp(dir=WORK), HARP_TIER0="off")
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    box = [x for k, (lo, hi) in BOX.items() for x in ("--shapeset", f"{k}={lo}..{hi}")]
    for i, b in enumerate(BINDINGS):
        what = f"{name} (cpu) {at(b)}"
        ids = ids_at(b)
        p, out = shapeset_run(path, {"ids": ids}, ["--backend", "cpu", *box], env, WORK)
        s.check(f"{what}: runs", p.returncode == 0, p.stderr[-800:])
        s.check(f"{what}: one object for the box", "one object for the box" in p.stderr, p.stderr[-800:])
        s.check(f"{what}: C compiles", shapeset_built(p) == (1, 1 if i == 0 else 0), str(shapeset_built(p)))
        if p.returncode == 0:
            s.check(f"{what}: vs onnxruntime (exact)", *close(np.load(os.path.join(out, "y.npy")),
                                                              ref.run(None, {"ids": ids})[0], 0, 0))


def feeds_of(g, rng):
    """The simulator's inputs of gpu.json `g`: token ids in range of E's
    rows (ids_at's), the tables E and PE."""
    tables = {"E": E, "PE": PE}
    return {b["name"]: rng.integers(0, V, size=b["shape"]).astype(np.int64) if b["name"] == "ids" else tables[b["name"]]
            for b in g["buffers"] if b["space"] in ("input", "weights")}


def box_rows(path, target):
    """The box unit for target at the corner hi, the same text at each
    binding; the corner's build on the simulator at each binding against
    onnxruntime (cuda_ss_common.at_bindings); S one short at the second
    binding differs."""
    name = os.path.basename(path)
    opts = tuple(x for k, (lo, hi) in BOX.items() for x in ("--shapeset", f"{k}={lo}..{hi}"))
    what = f"{name} ({target})"
    dhi, g, src = box_corner(s, what, path, target, BINDINGS[0], opts)
    if not dhi:
        return
    names = [x["name"] for x in g["syms"]]
    defs = derived_defs(path, BINDINGS[0], opts)
    s.check(f"{what}: the box's symbols and B*S's derived one are the unit's", names[:2] == ["B", "S"] and
            all(n in defs for n in names[2:]), f"{names} {defs}")
    s.check(f"{what}: every launch reads the sizes at run time",
            all(any(a["space"] == "sym" for a in l["args"]) for l in g["launches"]), str(g["launches"])[:1500])
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    at_bindings(s, rng, what, path, target, opts, dhi, src, names, BINDINGS, (BINDINGS[1], "S"), 0,
                ref=lambda f: {"y": ref.run(None, {"ids": f["ids"].astype(np.int64)})[0].astype(np.float64)}, feeds_of=feeds_of)
    (NVCC_UNITS_90 if target == "sm90" else NVCC_UNITS).append((what, os.path.join(dhi, "model.cu")))


def session_row(path, target):
    """A session over the bindings on the fake libcuda as a device of
    target: one build, no fallback."""
    what = f"{os.path.basename(path)} ({target}) session over {[','.join(at(b)) for b in BINDINGS]}"
    st, err = cuda_sim.session_counts(s, what, path, target, [",".join(at(b)) for b in BINDINGS])
    one_build(s, what, st, err)


def main():
    models = [embedding(False), embedding(True)]
    for path in models:
        cpu_rows(path)
    if not cuda_sim.have_gxx():
        print("g++ not found: the CUDA rows skipped")
    else:
        for target in ("sm80", "sm90"):
            for path in models:
                box_rows(path, target)
                session_row(path, target)
        nvcc_compiles(s, NVCC_UNITS, ("80",))
        nvcc_compiles(s, NVCC_UNITS_90, ("90a",))
    s.close()


if __name__ == "__main__":
    main()
