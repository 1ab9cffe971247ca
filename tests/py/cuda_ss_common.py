"""What the test_cuda_shapeset*.py files share (issue 25: one GPU build per
ShapeSet box): a box unit dumped at its corner hi and at every binding
below, the same text at each, the hi build run on the CPU SIMT simulator
(tests/cuda_sim) at each binding against the reference interpreter
(one_box, at_bindings, box_corner); a `harp bench --bind` session on the
fake libcuda and its counters (session_counts, one_build); a model's derived symbols
(derived_defs); the units gathered for nvcc, compiled in one call at the
end (nvcc_compiles, finish).  start() skips (77) without g++.
HARP_CUDA_SS_MODELS=name[:SYM],... runs some rows only (only()).
Needs: cuda_sim, harp_test.  Gives: the names below."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import warnings

import numpy as np

import cuda_sim
from cuda_sim import session_counts  # noqa: F401 (the rows' files take it from here)
from harp_test import Suite, close, run

NO_TEMPLATES = ("--knob", "no_templates=1")
BOTH = ("loop nests", "templates")
NVCC_UNITS = []  # (what, model.cu): compiled together at the end, one nvcc call
NVCC_UNITS_90 = []  # the sm90 units (wgmma, TMA): for sm_90a only


def only(name=None):
    """HARP_CUDA_SS_MODELS as a list (None: every row); with name, whether
    that row family is to run."""
    o = os.environ.get("HARP_CUDA_SS_MODELS")
    sel = o.split(",") if o else None
    return sel if name is None else (sel is None or name in sel)


def start(name):
    """The suite called name and the seeded generator; exits 77 without g++."""
    warnings.simplefilter("ignore", RuntimeWarning)
    if not cuda_sim.have_gxx():
        print("g++ not found: skipped")
        sys.exit(77)
    return Suite(name), np.random.default_rng(25)


def finish(s):
    """The gathered units through nvcc (the sm80 units for sm_80, also for
    sm_90a with HARP_TEST_SLOW=1: that nvcc takes sm80 code for sm_90a is
    test_cuda_dedup.py's package check; nvcc was most of this test's time),
    then the suite's verdict."""
    nvcc_compiles(s, NVCC_UNITS, ("80", "90a") if os.environ.get("HARP_TEST_SLOW") == "1" else ("80",))
    nvcc_compiles(s, NVCC_UNITS_90, ("90a",))
    s.close()


def syms_of(sym, v, fixed):
    return [f"{sym}={v}"] + [f"{k}={x}" for k, x in fixed.items()]


def nvcc_compiles(s, units, archs):
    """Every unit (what, path) compiled for each of archs ("80", "90a": sm_80,
    sm_90a) in one nvcc call (a fatbin each); when that fails, one call per
    unit names the culprit."""
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    if not nvcc or not units:
        print("nvcc not found, compiles not checked" if units else "no unit to compile")
        return
    work = tempfile.mkdtemp(prefix="harp_nvcc_")
    names = []
    for i, (what, path) in enumerate(units):
        names.append(f"u{i}.cu")
        shutil.copy(path, os.path.join(work, names[-1]))
    tag = "nvcc " + " + ".join(f"sm_{a}" for a in archs)
    archs = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs]
    p = subprocess.run([nvcc, "-fatbin", *archs, *names], cwd=work, capture_output=True, text=True, timeout=1200)
    if p.returncode == 0:
        for what, _ in units:
            s.check(f"{what}: {tag}", True)
        return
    for (what, _), n in zip(units, names):
        q = subprocess.run([nvcc, "-fatbin", *archs, n], cwd=work, capture_output=True, text=True, timeout=600)
        s.check(f"{what}: {tag}", q.returncode == 0, q.stderr[-2000:])


def one_box(s, rng, name, model, sym, hi, at, fixed, extra, variant, ntemplate, target="sm80", fixed_kinds=(), tol=(1e-3, 1e-3)):
    """The box unit of `model` at its corner hi for target, the same text at
    every binding of `at`, run on the simulator there against the
    interpreter within tol (rtol, atol) (launches of kernels of fixed_kinds
    may take no size: split-K's zeroing of its workspace laid out at hi);
    returns the corner's dump directory (None: no dump)."""
    p, dhi = cuda_sim.dump(model, target, syms_of(sym, hi, fixed), extra=extra)
    s.check(f"{name} ({variant}): dump at {sym}={hi}", p.returncode == 0, p.stderr)
    if p.returncode:
        return None
    ghi = json.load(open(os.path.join(dhi, "gpu.json")))["gpu"]
    src_hi = open(os.path.join(dhi, "model.cu")).read()
    s.check(f"{name} ({variant}): the box's symbol is the unit's", [x["name"] for x in ghi["syms"]] == [sym], str(ghi["syms"]))
    s.check(f"{name} ({variant}): every launch reads the size at run time",
            all(any(a["space"] == "sym" for a in l["args"]) for l in ghi["launches"]
                if {k["name"]: k["kind"] for k in ghi["kernels"]}[l["kernel"]] not in fixed_kinds), str(ghi["launches"])[:2000])
    s.check(f"{name} ({variant}): a size passed by value", "const long hp_sv0" in src_hi)
    if variant == "templates":
        s.check(f"{name} ({variant}): {ntemplate}+ template launches", ghi["launch_kinds"]["template"] >= ntemplate,
                str(ghi["launch_kinds"]))
    for v in at:
        what = f"{name} ({variant}) [{sym}={v}]"
        p, dv = cuda_sim.dump(model, target, syms_of(sym, v, fixed), extra=extra)
        s.check(f"{what}: dump", p.returncode == 0, p.stderr)
        if p.returncode:
            continue
        gv = json.load(open(os.path.join(dv, "gpu.json")))["gpu"]
        # one build: the unit at this binding is the corner's, text for text
        s.check(f"{what}: the same CUDA C as at {sym}={hi}", open(os.path.join(dv, "model.cu")).read() == src_hi)
        feeds = cuda_sim.feeds_of(gv, rng)  # at this binding's shapes
        outs = {b["name"]: b["shape"] for b in gv["buffers"] if b["space"] == "output"}
        got, err = cuda_sim.run(dhi, feeds, sv=[v], out_shapes=outs)
        s.check(f"{what}: the {sym}={hi} build runs on the simulator", err is None, err)
        if err:
            continue
        q, e = run(model, feeds, syms_of(sym, v, fixed), backend="interp")
        s.check(f"{what}: interpreter", q.returncode == 0, q.stderr)
        for out, a in got.items():
            ok, detail = close(a, np.load(os.path.join(e, f"{out}.npy")).astype(np.float64), *tol)
            s.check(f"{what}: {out} vs interpreter", ok, detail)
        if v != hi and v == at[1]:
            # must fail: one row short of the binding leaves poison (NaN) in the output
            bad, err = cuda_sim.run(dhi, feeds, sv=[v - 1], out_shapes=outs)
            s.check(f"{what}: a size one short gives another result", err is not None or not all(
                close(a, np.load(os.path.join(e, f"{o}.npy")).astype(np.float64), *tol)[0] for o, a in bad.items()))
    (NVCC_UNITS_90 if target == "sm90" else NVCC_UNITS).append((f"{name} ({variant})", os.path.join(dhi, "model.cu")))
    print(f"{name} ({variant}): {ghi['launch_kinds']}", flush=True)
    return dhi


def feeds_outs(d, rng, of=cuda_sim.feeds_of):
    """Random inputs at the shapes of the dump in d (of(gpu.json's "gpu",
    rng)), and its outputs' shapes."""
    g = json.load(open(os.path.join(d, "gpu.json")))["gpu"]
    return of(g, rng), {b["name"]: b["shape"] for b in g["buffers"] if b["space"] == "output"}


def one_build(s, what, st, err):
    """A session's counters st and stderr err (session_counts; st None: not
    checked): one ShapeSet, one build, by the box, no fallback, no binding
    said to build its own."""
    if st:
        s.check(f"{what}: one build, no fallback", st["clusters"] == 1 and st["builds"] == 1 and st["box_builds"] == 1 and
                st["box_fallbacks"] == 0 and "builds per binding" not in err, f"{st} {err[-800:]}")


def box_corner(s, what, model, target, binding, opts):
    """The box unit of model (the box's options opts) dumped for target at
    binding (name -> value): its directory, gpu.json and CUDA C (None, None,
    None when the dump fails)."""
    p, d = cuda_sim.dump(model, target, [f"{k}={v}" for k, v in binding.items()], extra=opts)
    s.check(f"{what}: dump at the corner hi", p.returncode == 0, p.stderr)
    if p.returncode:
        return None, None, None
    return d, json.load(open(os.path.join(d, "gpu.json")))["gpu"], open(os.path.join(d, "model.cu")).read()


def at_bindings(s, rng, what, model, target, box, dhi, src_hi, names, bindings, short, tol, ref=None, sim=True,
                feeds_of=cuda_sim.feeds_of, also=None):
    """Each binding b (a dict) of bindings inside box (the dump options):
    the unit dumped at b is src_hi's text, and (sim) the corner hi's build
    (dhi; its symbols names, derived ones computed at b) runs on the
    simulator at b, on feeds_of(the dump's gpu.json "gpu", rng), against the
    interpreter, or against ref(feeds) -> {output: array} where given,
    within tol (rtol and atol); short (b, sym): that binding with sym one
    short must give another result (None: not checked); also(w, b, feeds,
    sv, outs), where given, checks more at each binding that ran (w: the
    binding's label, sv: the symbols' values)."""
    at = lambda b: [f"{k}={v}" for k, v in b.items()]
    defs = derived_defs(model, bindings[0], box) if sim and any(n not in bindings[0] for n in names) else {}
    values = lambda b: {**b, **{k: eval(v, {}, dict(b)) for k, v in defs.items()}}  # with the derived symbols' (sspool)
    for b in bindings:
        w = f"{what} {at(b)}"
        p, dv = cuda_sim.dump(model, target, at(b), extra=box)
        s.check(f"{w}: dump", p.returncode == 0, p.stderr)
        if p.returncode:
            continue
        s.check(f"{w}: the same CUDA C as at the corner hi", open(os.path.join(dv, "model.cu")).read() == src_hi)
        if not sim:
            continue
        feeds, outs = feeds_outs(dv, rng, feeds_of)
        sv = [values(b)[n] for n in names]
        got, err = cuda_sim.run(dhi, feeds, sv=sv, out_shapes=outs)
        s.check(f"{w}: the corner hi's build runs on the simulator", err is None, err)
        if ref:
            want, against = ref(feeds), "the reference"
        else:
            q, e = run(model, feeds, at(b), backend="interp")
            s.check(f"{w}: interpreter", q.returncode == 0, q.stderr)
            want = {o: np.load(os.path.join(e, f"{o}.npy")).astype(np.float64) for o in outs} if q.returncode == 0 else None
            against = "interpreter"
        ran = want is not None and err is None
        for out, a in (got if want is not None and got else {}).items():
            ok, detail = close(a, want[out], tol, tol)
            s.check(f"{w}: {out} vs {against}", ok, detail)
        if short and b is short[0] and want is not None:  # must fail: one row of short[1] short
            bad, err = cuda_sim.run(dhi, feeds, sv=[values(b)[n] - (n == short[1]) for n in names], out_shapes=outs)
            s.check(f"{w}: {short[1]} one short gives another result", err is not None or not all(
                close(a, want[o], tol, tol)[0] for o, a in bad.items()))
        if also and ran:
            also(w, b, feeds, sv, outs)


def derived_defs(model, at, opts):
    """The derived symbols of model lowered for a box (harp dump --dump tiny,
    the box's options opts, bound at at): name -> its definition as a Python
    expression."""
    d = tempfile.mkdtemp(prefix="harp_ss_")
    args = [cuda_sim.HARP, "dump", model, "--dump", "tiny", "--target", "sm80", "--dump-dir", d, *opts]
    for k, v in at.items():
        args += ["--sym", f"{k}={v}"]
    p = subprocess.run(args, capture_output=True, text=True, timeout=300)
    if p.returncode:
        return {}
    defs = json.load(open(os.path.join(d, "tiny.json"))).get("derived", {})  # an exact tie's {"def": .., "exact": true}
    return {k: (v["def"] if isinstance(v, dict) else v).replace("floordiv", "//") for k, v in defs.items()}
