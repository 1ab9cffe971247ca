"""Every malformed program of tests/dsl_bad/ makes `harp run` exit 1 with a
located message: error[<Name>] and file:line:col from expected.txt, the
source line and a caret, and no output file."""
import os
import subprocess
import tempfile

from harp_test import HARP, SRC, Suite

s = Suite("dsl_bad")
bad = os.path.join(SRC, "tests", "dsl_bad")
rows = []
with open(os.path.join(bad, "expected.txt")) as f:
    for line in f:
        if line.strip() and not line.startswith("#"):
            name, err, ln, col, _count = line.split()
            rows.append((name, err, int(ln), int(col)))
s.check("at least 20 malformed programs", len(rows) >= 20, str(len(rows)))
for name, err, ln, col in rows:
    out = tempfile.mkdtemp(prefix="harp_bad_")
    p = subprocess.run([HARP, "run", os.path.join(bad, name), "--random-inputs", "--out", out],
                       capture_output=True, text=True, errors="replace", timeout=60)
    s.check(f"{name} exits 1", p.returncode == 1, f"rc={p.returncode} {p.stderr}")
    s.check(f"{name} names the error", f"error[{err}]" in p.stderr, p.stderr)
    s.check(f"{name} is located", f"{name}:{ln}:{col}" in p.stderr, p.stderr)
    s.check(f"{name} shows a caret", "^" in p.stderr, p.stderr)
    s.check(f"{name} writes nothing", os.listdir(out) == [], str(os.listdir(out)))
    # decompile and viz refuse it the same way
    q = subprocess.run([HARP, "decompile", os.path.join(bad, name)], capture_output=True, text=True, errors="replace", timeout=60)
    s.check(f"{name} decompile exits 1", q.returncode == 1 and f"error[{err}]" in q.stderr, q.stderr)
s.close()
