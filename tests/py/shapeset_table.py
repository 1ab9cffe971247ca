"""shapeset_table.py — what issue 25's model audits share
(test_shapeset_models.py over tests/models, test_shapeset_corpus.py over
examples/, tests/models/gpu/ and onnx_models.py's whole networks): a table
row per model (its box, the symbols kept fixed, two or more bindings, what
the compile gives), the model file as the row rewrites it, and the check:
one compile as a ShapeSet session (harp.InferenceSession(...,
shapesets=BOX), harp.h's shapesets), then each binding's outputs against
the reference interpreter (providers=["interp"]) on the same feeds.

Needs: harp_py.py.  Gives: ONE, PER_BINDING, row, check_model,
run_table (a table over a list of model files, a row each or a failure)."""
import os
import time

from harp_py import check_bindings, harp, np

ONE = "one object"
PER_BINDING = "depends on the binding"
DTYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16}


def row(box, at, fixed=None, expect=ONE, tol=1e-4, rewrite=None, slow=False, onnx_dims=None, feed=2.0):
    """box {SYM: (lo, hi)}, bindings at [{SYM: v}] (two or more), fixed {SYM: v}; expect ONE or a
    piece of the fallback reason; tol: |a - b| <= tol (1 + max |b|); rewrite [(old, new)]: text
    substitutions of a .json / .harp model; onnx_dims {axis: dim_param} set on every input and
    output of an ONNX model (default {0: "batch"}); slow: its C compiled at -O1 (the knob cc_opt), at
    -O3 with HARP_TEST_SLOW=1; feed: the
    feeds uniform in [-feed, feed] (a smaller one where fp16 sums would overflow)."""
    return dict(box=box, at=at, fixed=fixed or {}, expect=expect, tol=tol, rewrite=rewrite, slow=slow,
                onnx_dims=onnx_dims or {0: "batch"}, feed=feed)


def model_path(src, r, work):
    """The model file src, rewritten into directory work where its row says (text
    substitutions; an ONNX model's dims named by onnx_dims)."""
    name = os.path.basename(src)
    if name.endswith(".onnx"):
        import onnx
        m = onnx.load(src)
        for v in list(m.graph.input) + list(m.graph.output):
            for axis, param in r["onnx_dims"].items():
                v.type.tensor_type.shape.dim[axis].dim_param = param
        path = os.path.join(work, name)
        onnx.save(m, path)
        return path
    if not r["rewrite"]:
        return src
    text = open(src).read()
    for old, new in r["rewrite"]:
        if old not in text:
            raise ValueError(f"{name}: the rewrite's {old!r} is not in the model")
        text = text.replace(old, new)
    path = os.path.join(work, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def onnx_shapes(path, b):
    """An ONNX model's input shapes at binding b of its dim_params: {name: [dims]}."""
    import onnx
    m = onnx.load(path)
    return {i.name: [b[d.dim_param] if d.dim_param in b else d.dim_value for d in i.type.tensor_type.shape.dim]
            for i in m.graph.input}


def feeds_for(ref, rng, shapes, lim=2.0):
    """Uniform feeds in [-lim, lim] for the reference session's inputs (shapes {name: dims} where it has
    them; an int32 input in 0..2, valid gather indices; a bf16 input as the session takes it: the top half
    of each float32's bits, uint16)."""
    def feed(i):
        shape = shapes.get(i.name, i.shape)
        if i.type == "tensor(int32)":
            return rng.integers(0, 3, shape).astype(np.int32)
        x = rng.uniform(-lim, lim, shape).astype(DTYPES.get(i.type, np.float32))
        return (x.view(np.uint32) >> 16).astype(np.uint16) if i.type == "tensor(bfloat16)" else x
    return {i.name: feed(i) for i in ref.get_inputs()}


def as_f32(a):
    """An output as float32 (a bf16 output, uint16 bits, widened)."""
    a = np.asarray(a)
    return (a.astype(np.uint32) << 16).view(np.float32) if a.dtype == np.uint16 else a.astype(np.float32)


def check_model(s, src, r, work, cache, knobs=None):
    """Model file src compiled once over its row r's box (Suite s; rewrites into work; the
    compile cache cache; knobs {name: value} for the ShapeSet session), run at the row's bindings
    against the interpreter; then one object or the recorded reason to compile per binding."""
    name = os.path.basename(src)
    path = model_path(src, r, work)
    onnx_model = name.endswith(".onnx")
    opts = {"cache_dir": cache, "progress": False, "syms": {} if onnx_model else dict(r["fixed"]), "knobs": knobs or {}}
    want_error = r["expect"].startswith("error:")
    try:
        sess = harp.InferenceSession(path, opts, shapesets=r["box"])
    except harp.HarpError as ex:
        s.check(f"{name}: compiles over {r['box']}" if not want_error else f"{name}: refused on the CPU, as recorded",
                want_error and r["expect"][len("error:"):].strip() in str(ex), str(ex)[:400])
        return
    s.check(f"{name}: compiles (the table says it does not: {r['expect']})", not want_error)
    rng = np.random.default_rng(25)

    def ref_opts(b):
        shapes = onnx_shapes(path, b) if onnx_model else {}
        syms = dict(r["fixed"])
        syms.update(b)
        return {"syms": {} if onnx_model else syms, "progress": False, "shapes": {k: tuple(v) for k, v in shapes.items()}}

    def agree(g, w):
        g32, w32 = as_f32(g), as_f32(w)
        scale = 1 + (float(np.max(np.abs(w32))) if w32.size else 0)
        ok = g32.shape == w32.shape and bool(np.all(np.abs(g32 - w32) <= r["tol"] * scale))
        err = float(np.max(np.abs(g32 - w32))) if g32.shape == w32.shape and g32.size else -1
        return ok, f"shapes {g32.shape} {w32.shape}, max abs err {err}"

    check_bindings(s, name, sess, path, r["at"], ref_opts,
                   lambda ref, b: feeds_for(ref, rng, onnx_shapes(path, b) if onnx_model else {}, r["feed"]), agree)
    objs, built, why = sess.shapeset_objects()
    if r["expect"] == ONE:  # a binding at 1 where a size 1 broadcasts differently compiles apart (the object serves 2..hi)
        apart = any(v == 1 for b in r["at"] for v in b.values())
        s.check(f"{name}: one object for the box", why is None and (objs == 1 or (apart and objs == 2)), f"{objs} object(s): {why}")
    else:
        s.check(f"{name}: a compile per binding, as recorded ({r['expect']})", why is not None and r["expect"] in why,
                f"{objs} object(s): {why}")
    print(f"  {name}: {objs} object(s), {built} built; {why or ONE}")


def run_table(s, table, paths, work, cache, only_env):
    """Every model file of paths checked by its row of table ({file name: row}; a file without a
    row fails, and so does a row naming no file); only_env: the environment variable naming some
    models only (name,...); slow rows compile at -O1 unless HARP_TEST_SLOW=1."""
    names = {os.path.basename(p): p for p in paths}
    only = [n for n in os.environ.get(only_env, "").split(",") if n]
    for name in sorted(names):
        if only and name not in only:
            continue
        if name not in table:
            s.check(f"{name}: has a row in the table (box, bindings, what it gives)", False)
            continue
        r = table[name]
        t = time.time()
        check_model(s, names[name], r, work, cache, {"cc_opt": 1} if r["slow"] and os.environ.get("HARP_TEST_SLOW") != "1" else None)
        print(f"  {name}: {time.time() - t:.1f} s")
    s.check("every row names a model that exists", all(n in names for n in table), str([n for n in table if n not in names]))
