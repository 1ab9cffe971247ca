"""harp run --max-memory (docs/cli.md): a model whose instance needs more
is refused with LimitExceeded naming the option, before compiling and with
no output written; one that fits runs; a malformed size is a usage error."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
import harp_test as ht  # noqa: E402

S = ht.Suite("max_memory")
D = ht.tempfile.mkdtemp()
MLP = os.path.join(ht.SRC, "examples", "mlp.harp")


def run(*extra):
    out = os.path.join(D, "out%d" % len(os.listdir(D)))
    p = subprocess.run([ht.HARP, "run", MLP, "--random-inputs", "--out", out, *extra], capture_output=True, text=True)
    return p, out


p, out = run("--max-memory", "1K")
S.check("1K: LimitExceeded", p.returncode == 1 and "error[LimitExceeded]" in p.stderr, p.stderr)
S.check("1K: names --max-memory and the sizes", "--max-memory" in p.stderr and "1.0 KiB" in p.stderr, p.stderr)
S.check("1K: no output", not os.path.exists(out))
p, out = run("--max-memory", "64M")
S.check("64M: runs", p.returncode == 0 and os.path.exists(os.path.join(out, "y.npy")), p.stderr)
for bad in ("abc", "-5", "0", "12Q", "99999999999G"):
    p, out = run("--max-memory", bad)
    S.check(f"{bad}: a usage error", p.returncode != 0 and "--max-memory" in p.stderr and not os.path.exists(out), p.stderr)
S.close()
