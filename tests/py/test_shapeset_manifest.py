"""A ShapeSet box's decision kept in the compile cache (src/runtime/
sgen_manifest.c): the first process compiles the box's corners and writes
the manifest; a second process with the same model and box loads the one
object with no corner compiled (--time-stages: "from the cache's
manifest"), at a new size, numpy's numbers; it keeps whether the quick
check of a new binding serves the box (one saying no is a hit, every
binding prepared).  A truncated, damaged or inconsistent manifest (its
checksum right, a buffer's node out of range), a removed object, another
model, box, knob or harp build: a miss, the
corners compiled again, the right numbers, never a crash.  A box that falls
back says so again from the manifest.  A box from R = 1 serves 1 from its
one object (no compile of its own).  Four processes at once on a fresh
cache leave one whole manifest.  Every output against numpy."""
import glob
import os
import re
import shutil
import subprocess
import tempfile

import numpy as np

from harp_test import HARP, MODELS, Suite, close

s = Suite("shapeset_manifest")
rng = np.random.default_rng(11)
SOFTMAX = os.path.join(MODELS, "softmax_rows.json")
HIT = "from the cache's manifest, no corner compiled"


def softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def start(cache, r, box="R=2..64", model=SOFTMAX, exe=HARP, env_extra=None, cols=33):
    """One `harp run --shapeset` process at R = r (not waited for): (Popen, input, output dir)."""
    out = tempfile.mkdtemp()
    x = rng.standard_normal((r, cols)).astype(np.float32) * 3
    np.save(os.path.join(out, "x.npy"), x)
    env = dict(os.environ, HARP_CACHE_DIR=cache, **(env_extra or {}))
    args = [exe, "run", model, "--out", out, "--time-stages", "--shapeset", box, "--input", f"X={out}/x.npy"]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env), x, out


def run(what, cache, r, hit, **kw):
    """A process at R = r: it runs, finds (hit) or does not find the manifest, numpy's numbers."""
    p, x, out = start(cache, r, **kw)
    _, err = p.communicate()
    s.check(f"{what}: runs", p.returncode == 0, err[-600:])
    s.check(f"{what}: manifest {'hit' if hit else 'miss'}", (HIT in err) == hit, err[-600:])
    if p.returncode == 0:
        s.check(f"{what}: vs numpy", *close(np.load(os.path.join(out, "out.npy")), softmax(x), 1e-5, 1e-6))
    return err


def manifests(cache):
    return sorted(glob.glob(os.path.join(cache, "ssm-*.txt")))


def fnv(data):
    h = 1469598103934665603 ^ 0x73756D
    for b in data:
        h = ((h ^ b) * 1099511628211) & (2**64 - 1)
    return h


def resum(body):
    """A manifest whose checksum fits body (the text before its "sum" line)."""
    return body + b"sum %016x\n" % fnv(body)


cache = tempfile.mkdtemp()
run("first process", cache, 7, False)
m = manifests(cache)
s.check("one manifest written", len(m) == 1, str(m))
err = run("second process, a new size", cache, 41, True)
s.check("second process: no C compile", "1 object(s), 0 built by the C compiler" in err, err[-400:])
run("third process, the corner lo", cache, 2, True)

# damaged manifests: a miss, the corners again, and the manifest written again
text = open(m[0], "rb").read()
body = text[: text.rindex(b"sum ")]
lines = body.split(b"\n")
s.check("the manifest names the box's lower corner", b"\nglo 2 2 33\n" in text, text[:80])
# the quick check of a new binding (sgen.c quick_setup) agreed with the full one at the box's probes: kept
s.check("the manifest says the quick check serves the box", b"\nquick 1\n" in text, text[:80])
with open(m[0], "wb") as f:  # one that says it does not: a hit, each new binding prepared in full
    f.write(resum(body.replace(b"\nquick 1\n", b"\nquick 0\n", 1)))
run("manifest saying quick 0", cache, 13, True)
with open(m[0], "wb") as f:
    f.write(text)
b0 = next(i for i, ln in enumerate(lines) if ln.startswith(b"b "))
bad_node = lines[:b0] + [b"b 999999" + lines[b0][lines[b0].index(b" ", 2):]] + lines[b0 + 1 :]
bad_glo = [re.sub(rb"^glo 2 ", b"glo 3 ", ln) for ln in lines]
nbuf = int(next(ln for ln in lines if ln.startswith(b"fn ")).split()[1])
a_at = next(i for i, ln in enumerate(lines) if ln.startswith(b"a "))
bad_args = lines[:a_at] + [b"a" + b" %d" % (nbuf - 1) * (len(lines[a_at].split()) - 1)] + lines[a_at + 1 :]  # the last buffer
s.check("the manifest's arguments changed", bad_args != lines, str(lines[a_at]))
cases = {
    "truncated": text[: len(text) // 2],
    "empty": b"",
    "a byte flipped": text[:40] + bytes([text[40] ^ 1]) + text[41:],
    "a number changed, its checksum not": text.replace(b"\nglo 2 2 33\n", b"\nglo 2 3 33\n", 1),
    "its checksum right, a node out of range": resum(b"\n".join(bad_node)),
    "its checksum right, the box's symbols miscounted": resum(b"\n".join(bad_glo)),
    "its checksum right, no Function": resum(b"\n".join(lines[:3]) + b"\n"),
    "its checksum right, its arguments not the model's": resum(b"\n".join(bad_args)),
    "garbage": os.urandom(3000),
}
for what, data in cases.items():
    with open(m[0], "wb") as f:
        f.write(data)
    run(f"manifest {what}", cache, 13, False)
    s.check(f"manifest {what}: rewritten whole", open(m[0], "rb").read() == text)

# the object gone from the cache: a miss, the object built again
for so in glob.glob(os.path.join(cache, "*.so")):
    os.remove(so)
err = run("object removed", cache, 9, False)
s.check("object removed: built again", "1 object(s), 1 built by the C compiler" in err, err[-400:])
run("object back", cache, 10, True)

# what the corners' code depends on: each a miss
run("another box", cache, 9, False, box="R=2..63")
run("another knob", cache, 9, False, env_extra={"HARP_NO_DEDUP": "1"})
run("another row length (a symbol of the model bound otherwise)", cache, 9, False, cols=34)
model2 = os.path.join(tempfile.mkdtemp(), "softmax2.json")
with open(SOFTMAX) as f:
    with open(model2, "w") as g:
        g.write(f.read().replace('"t0"', '"t0_renamed"'))  # the same numbers, another graph
run("another model (a node renamed)", cache, 9, False, model=model2)
exe2 = os.path.join(tempfile.mkdtemp(), "harp")
shutil.copy2(HARP, exe2)
run("another harp build", cache, 9, False, exe=exe2)
run("another harp build, again", cache, 12, True, exe=exe2)
run("the first build, again", cache, 11, True)

# a box that falls back (a GEMM over its rows and columns at once): the reason again, from the manifest
for i, hit in enumerate([False, True]):
    out = tempfile.mkdtemp()
    a, b = rng.standard_normal((5, 16)).astype(np.float32), rng.standard_normal((16, 17 + i)).astype(np.float32)
    np.save(os.path.join(out, "a.npy"), a)
    np.save(os.path.join(out, "b.npy"), b)
    p = subprocess.run([HARP, "run", os.path.join(MODELS, "gemm_mn.harp"), "--out", out, "--time-stages", "--shapeset", "M=2..40",
                        "--shapeset", "N=3..70", "--input", f"a={out}/a.npy", "--input", f"b={out}/b.npy"],
                       capture_output=True, text=True, env=dict(os.environ, HARP_CACHE_DIR=cache))
    err = p.stderr
    s.check(f"fallback {i}: runs, says why", p.returncode == 0 and "a compile per binding:" in err, err[-400:])
    s.check(f"fallback {i}: manifest {'hit' if hit else 'miss'}", (HIT in err) == hit, err[-400:])
    if p.returncode == 0:
        s.check(f"fallback {i}: vs numpy", *close(np.load(os.path.join(out, "c.npy")), a.astype(np.float64) @ b, 1e-4, 1e-5))

# a box from 1 (layernorm over R: at 1 a loop nest is one point and a bias broadcasts): the object serves 1 as
# well, no compile of its own; numpy's numbers at 1, 2 and 48
LAYERNORM = os.path.join(MODELS, "layernorm.json")
cache3 = tempfile.mkdtemp()
gam, bet = rng.standard_normal(64).astype(np.float32), rng.standard_normal(64).astype(np.float32)
for r, want in [(1, (1, 1)), (2, (1, 0)), (1, (1, 0)), (48, (1, 0))]:
    out = tempfile.mkdtemp()
    x = rng.standard_normal((r, 64)).astype(np.float32)
    for name, a in (("x", x), ("g", gam), ("b", bet)):
        np.save(os.path.join(out, f"{name}.npy"), a)
    p = subprocess.run([HARP, "run", LAYERNORM, "--out", out, "--time-stages", "--shapeset", "R=1..48", "--input",
                        f"X={out}/x.npy", "--param", f"gamma={out}/g.npy", "--param", f"beta={out}/b.npy"],
                       capture_output=True, text=True, env=dict(os.environ, HARP_CACHE_DIR=cache3))
    m1 = re.search(r"shapeset: (\d+) object\(s\), (\d+) built by the C compiler", p.stderr)
    got = (int(m1.group(1)), int(m1.group(2))) if m1 else None
    s.check(f"box 1..48, R={r}: one object, compiles {want[1]}", p.returncode == 0 and got == want, p.stderr[-500:])
    if p.returncode == 0:
        mu, var = x.mean(axis=1, keepdims=True), x.var(axis=1, keepdims=True)
        s.check(f"box 1..48, R={r} vs numpy", *close(np.load(os.path.join(out, "out.npy")), (x - mu) / np.sqrt(var + 1e-5) * gam + bet,
                                                     1e-4, 1e-4))

# a manifest whose weights lie outside its ConstPool (its checksum right): a miss, the right numbers
m3 = manifests(cache3)
lines3 = open(m3[0], "rb").read().split(b"\n")
fn_at = next(i for i, ln in enumerate(lines3) if ln.startswith(b"fn "))
s.check("layernorm: weights in the ConstPool", int(lines3[fn_at].split()[-1]) > 0, str(lines3[fn_at]))
lines3[fn_at] = b" ".join(lines3[fn_at].split()[:-1] + [b"0"])
body3 = b"\n".join(lines3[: next(i for i, ln in enumerate(lines3) if ln.startswith(b"sum "))]) + b"\n"
with open(m3[0], "wb") as f:
    f.write(resum(body3))
out = tempfile.mkdtemp()
x = rng.standard_normal((5, 64)).astype(np.float32)
for name, a in (("x", x), ("g", gam), ("b", bet)):
    np.save(os.path.join(out, f"{name}.npy"), a)
p = subprocess.run([HARP, "run", LAYERNORM, "--out", out, "--time-stages", "--shapeset", "R=1..48", "--input", f"X={out}/x.npy",
                    "--param", f"gamma={out}/g.npy", "--param", f"beta={out}/b.npy"],
                   capture_output=True, text=True, env=dict(os.environ, HARP_CACHE_DIR=cache3))
s.check("weights outside the ConstPool: runs, a miss", p.returncode == 0 and HIT not in p.stderr, p.stderr[-500:])
if p.returncode == 0:
    mu, var = x.mean(axis=1, keepdims=True), x.var(axis=1, keepdims=True)
    s.check("weights outside the ConstPool vs numpy", *close(np.load(os.path.join(out, "out.npy")),
                                                        (x - mu) / np.sqrt(var + 1e-5) * gam + bet, 1e-4, 1e-4))

# four processes at once on a fresh cache: all right, one whole manifest that the next process reads
cache2 = tempfile.mkdtemp()
procs = [start(cache2, r) for r in (3, 17, 29, 64)]
for i, (p, x, out) in enumerate(procs):
    _, err = p.communicate()
    s.check(f"concurrent {i}: runs", p.returncode == 0, err[-400:])
    if p.returncode == 0:
        s.check(f"concurrent {i}: vs numpy", *close(np.load(os.path.join(out, "out.npy")), softmax(x), 1e-5, 1e-6))
s.check("concurrent: one manifest, no temporary left", len(os.listdir(cache2)) >= 1 and len(manifests(cache2)) == 1
        and not [f for f in os.listdir(cache2) if f.startswith("ssm-") and not f.endswith(".txt")], str(os.listdir(cache2)))
run("after the concurrent ones", cache2, 33, True)
s.close()
