"""The compile cache under races and crashes (docs/reliability.md).

Races: each round, 8 `harp run` processes start at once on an empty cache,
odd rounds all on one model, even rounds two on each of four models; every
process must succeed, the outputs of one model must be identical across its
processes and match the interpreter's, and every entry the round leaves must
be sound (its checksum trailer matches; no temporary file or build directory
left).  A further run then hits the cache and gives the same outputs.

Crashes: a compile on an empty cache is killed with SIGKILL at a random
point; a later run must succeed with the right outputs, and every entry the
cache then holds is sound.

Rounds: HARP_RACE_ROUNDS (default 3) and HARP_KILL_ROUNDS (default 4); the
documented long run is HARP_RACE_ROUNDS=100 HARP_KILL_ROUNDS=40.
"""
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from harp_test import HARP, SRC, Suite  # noqa: E402

MODELS = [os.path.join(SRC, p) for p in ("examples/mlp.harp", "examples/conv_block.harp", "tests/models/small_cnn.onnx",
                                           "tests/models/attention_fused_qkv.harp")]
MASK = (1 << 64) - 1


def fnv_chunks(data, seed):
    """ut_hash64 chained over 64 KiB chunks, as cache.c's hash_fd does."""
    h = seed
    for at in range(0, len(data), 1 << 16):
        h ^= 1469598103934665603
        for b in data[at:at + (1 << 16)]:
            h = ((h ^ b) * 1099511628211) & MASK
    return h


def entry_sound(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) <= 24 or data[-24:-16] != b"HARPSUM1":
        return False
    size, h = int.from_bytes(data[-16:-8], "little"), int.from_bytes(data[-8:], "little")
    return size == len(data) - 24 and fnv_chunks(data[:size], 0x6861727063616368) == h


def cache_problems(cache):
    """What in the cache is not a sound entry."""
    bad = []
    for name in os.listdir(cache) if os.path.isdir(cache) else []:
        p = os.path.join(cache, name)
        if name.endswith(".so"):
            if os.path.islink(p) or not entry_sound(p):
                bad.append(f"unsound entry {name}")
        elif name.startswith("build.") or ".tmp" in name:
            bad.append(f"left behind: {name}")
    return bad


def cmd(model, cache, out, backend="cpu"):
    env = dict(os.environ, HARP_CACHE_DIR=cache)
    # tier0=off: with a cold cache a process may otherwise return tier 0's
    # first result (other summation orders), and the processes' outputs are
    # compared bit for bit; this test's subject is the cache, not tier 0
    knob = ("--knob", "tier0=off") if backend == "cpu" else ()
    return (HARP, "run", model, "--random-inputs", "--seed", "5", "--out", out, "--backend", backend) + knob, env


def outputs(out):
    return {f: np.load(os.path.join(out, f)) for f in sorted(os.listdir(out)) if f.endswith(".npy")}


def reference(tmp):
    refs = {}
    for m in MODELS:
        out = os.path.join(tmp, "ref-" + os.path.basename(m))
        args, env = cmd(m, os.path.join(tmp, "unused"), out, "interp")
        subprocess.run(args, env=env, check=True, capture_output=True)
        refs[m] = outputs(out)
    return refs


def race_round(s, tmp, r, refs):
    cache = os.path.join(tmp, f"race{r}", "cache")
    models = [MODELS[0]] * 8 if r % 2 else [MODELS[i % 4] for i in range(8)]
    procs = []
    for i, m in enumerate(models):
        out = os.path.join(tmp, f"race{r}", f"out{i}")
        args, env = cmd(m, cache, out)
        procs.append((m, out, subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)))
    got = {}
    for m, out, p in procs:
        _, err = p.communicate()
        s.check(f"round {r}: {os.path.basename(m)} succeeds", p.returncode == 0, err.decode()[-400:])
        if p.returncode == 0:
            got.setdefault(m, []).append(outputs(out))
    for m, outs in got.items():
        same = all(o.keys() == outs[0].keys() and all(np.array_equal(o[k], outs[0][k]) for k in o) for o in outs)
        s.check(f"round {r}: {os.path.basename(m)} identical across {len(outs)} processes", same)
        ok = all(np.allclose(outs[0][k], refs[m][k], rtol=1e-3, atol=1e-4) for k in refs[m])
        s.check(f"round {r}: {os.path.basename(m)} matches the interpreter", ok)
    s.check(f"round {r}: entries sound", not cache_problems(cache), cache_problems(cache))
    again = os.path.join(tmp, f"race{r}", "again")
    args, env = cmd(models[0], cache, again)
    p = subprocess.run(args, env=env, capture_output=True)
    s.check(f"round {r}: a later run hits and agrees", p.returncode == 0 and all(
        np.array_equal(outputs(again)[k], got[models[0]][0][k]) for k in refs[models[0]]), p.stderr.decode()[-300:])
    shutil.rmtree(os.path.join(tmp, f"race{r}"), ignore_errors=True)


def kill_round(s, tmp, r, refs, rng):
    cache = os.path.join(tmp, f"kill{r}", "cache")
    m = MODELS[r % 4]
    args, env = cmd(m, cache, os.path.join(tmp, f"kill{r}", "o1"))
    p = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(rng.uniform(0.0, 2.5))
    p.send_signal(signal.SIGKILL)
    p.wait()
    out = os.path.join(tmp, f"kill{r}", "o2")
    args, env = cmd(m, cache, out)
    q = subprocess.run(args, env=env, capture_output=True)
    ok = q.returncode == 0 and all(np.allclose(outputs(out)[k], refs[m][k], rtol=1e-3, atol=1e-4) for k in refs[m])
    s.check(f"kill {r}: {os.path.basename(m)} after SIGKILL runs right", ok, q.stderr.decode()[-400:])
    s.check(f"kill {r}: entries sound", not cache_problems(cache), cache_problems(cache))
    shutil.rmtree(os.path.join(tmp, f"kill{r}"), ignore_errors=True)


def main():
    s = Suite("cache_race")
    rounds, kills = int(os.environ.get("HARP_RACE_ROUNDS", "3")), int(os.environ.get("HARP_KILL_ROUNDS", "4"))
    rng = random.Random(30)
    tmp = tempfile.mkdtemp(prefix="harp-race-")
    try:
        refs = reference(tmp)
        t0 = time.time()
        for r in range(rounds):
            race_round(s, tmp, r, refs)
        t1 = time.time()
        for r in range(kills):
            kill_round(s, tmp, r, refs, rng)
        print(f"{rounds} race rounds in {t1 - t0:.0f} s, {kills} kills in {time.time() - t1:.0f} s")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    s.close()


if __name__ == "__main__":
    main()
