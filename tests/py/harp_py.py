"""harp_py.py — what the tests of the Python package share: the package
as the build staged it (<build>/python/harp, beside HARP_BIN), imported, or
the test skipped (exit 77) when the build has no Python extension
(nanobind missing, a sanitizer build); the real models in the cache.

Needs: harp_test.py.  Gives: harp (the package), np, ort (or None),
real_model(name) -> path or None, Suite, SRC, MODELS, check_bindings (a
ShapeSet session at bindings against the interpreter).
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "realmodels"))
import fetch  # noqa: E402  (before harp_test, which points HARP_CACHE_DIR at a temporary cache)

CORPUS = fetch.cache_dir()
from harp_test import HARP, MODELS, SRC, Suite, compiled_only  # noqa: E402,F401 (re-exported)

STAGE = os.path.join(os.path.dirname(os.path.abspath(HARP)), "python")
if not os.path.exists(os.path.join(STAGE, "harp", "__init__.py")):
    print(f"no Python package staged in {STAGE} (nanobind not installed, or a sanitizer build): skipped")
    sys.exit(77)
sys.path.insert(0, STAGE)
compiled_only()  # the sessions' first runs on the compiled object, not tier 0 (harp_test's docstring)
import numpy as np  # noqa: E402
import harp  # noqa: E402

try:
    import onnxruntime as ort
    ort.set_default_logger_severity(3)
except ImportError:
    ort = None


def real_model(name):
    """The corpus model `name` (tests/realmodels): from the cache, else fetched; None when it cannot be had."""
    path = os.path.join(CORPUS, "models", f"{name}.onnx")
    if os.path.exists(path):
        return path
    try:
        entry = next(m for m in fetch.load_manifest() if m["name"] == name)
        return fetch.fetch(entry, root=CORPUS)
    except Exception as ex:  # no network, no such entry
        print(f"real model {name} not available: {ex}")
        return None


def check_bindings(s, name, sess, path, at, ref_opts, feeds_of, agree):
    """A ShapeSet session sess over model path at each binding b of at, every
    output against the interpreter's (a session of ref_opts(b)) on the same
    feeds feeds_of(ref, b); agree(got, want) -> (ok, detail) compares one
    output.  Checks, per binding: that it runs, then each output."""
    for b in at:
        ref = harp.InferenceSession(path, ref_opts(b), providers=["interp"])
        feeds = feeds_of(ref, b)
        want = ref.run(None, feeds)
        try:
            got = sess.run(None, feeds)
        except harp.HarpError as ex:
            s.check(f"{name} at {b}: runs", False, str(ex)[:400])
            continue
        for k, (g, w) in enumerate(zip(got, want)):
            ok, detail = agree(g, w)
            s.check(f"{name} at {b}: output {k} vs the interpreter", ok, detail)
