"""`harp plan`: convert Schedule Plans between JSON and DSL, reject bad ones.

Drives the CLI on the seed 000 examples (tests/plans/) and the malformed
corpus (tests/plan_bad/EXPECTED)."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from harp_test import HARP, SRC, Suite  # noqa: E402

PLANS = os.path.join(SRC, "tests", "plans")
BAD = os.path.join(SRC, "tests", "plan_bad")


def harp_plan(*args):
    return subprocess.run([HARP, "plan", *args], capture_output=True, text=True, timeout=60)


s = Suite("plan_cli")

# DSL -> JSON: the §12.5 example minus what only a region supplies
p = harp_plan(os.path.join(PLANS, "seed000.plan"))
s.check("dsl->json exit", p.returncode == 0, p.stderr)
with open(os.path.join(PLANS, "seed000.json")) as f:
    want = json.load(f)
want["algo_choice"], want["local_edges"] = {}, []
try:
    got = json.loads(p.stdout)
except ValueError as e:
    got = str(e)
s.check("dsl->json equals §12.5", got == want, p.stdout)

# JSON -> DSL -> JSON is the identity on the canonical text
p1 = harp_plan(os.path.join(PLANS, "seed000.json"))
s.check("json->dsl exit", p1.returncode == 0 and "split m 128;" in p1.stdout, p1.stderr)
with tempfile.TemporaryDirectory() as d:
    dsl = os.path.join(d, "x.plan")
    with open(dsl, "w") as f:
        f.write(p1.stdout)
    p2 = harp_plan(dsl, "--to", "json")
    with open(os.path.join(PLANS, "seed000.json")) as f:
        s.check("json->dsl->json byte-equal", p2.stdout == f.read(), p2.stdout)
    out = os.path.join(d, "o.json")
    p3 = harp_plan(dsl, "--to=json", "-o", out)
    s.check("-o writes the file", p3.returncode == 0 and p3.stdout == "" and open(out).read() == p2.stdout, p3.stderr)

# every parse-phase file of the corpus: exit 1 and a located error
with open(os.path.join(BAD, "EXPECTED")) as f:
    for line in f:
        if line.startswith("#") or not line.strip():
            continue
        name, err, pos, phase = line.split()
        if phase != "parse":
            continue
        p = harp_plan(os.path.join(BAD, name))
        ok = p.returncode == 1 and f"error[{err}]" in p.stderr and f"{name}:{pos}:" in p.stderr and "^" in p.stderr
        s.check(f"bad {name}", ok, p.stderr)

p = harp_plan(os.path.join(PLANS, "seed000.plan"), "--to", "yaml")
s.check("--to yaml is a usage error", p.returncode == 1 and "UsageError" in p.stderr, p.stderr)
p = harp_plan("/nonexistent.plan")
s.check("missing file", p.returncode == 1 and "IoError" in p.stderr, p.stderr)
s.close()
