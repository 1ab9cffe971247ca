"""The public C API is what docs/c-api.md promises: harp.h includes no IR
header and declares harp_-prefixed names only; it compiles alone as C11 and
as C++; libharp exports none of the specification's model_* names; and a
program links a `harp compile` package and libharp together and gets the
same numbers from both (tests/py/c_api_link.c)."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

from harp_test import HARP, SRC, Suite

sys.path.insert(0, os.path.join(SRC, "scripts"))
import rename_prefixes  # noqa: E402  (the prefix rules, for names it has still to rename)

s = Suite("public_api")
INC = os.path.join(SRC, "include")
CC = os.environ.get("CC", "cc")
if not shutil.which(CC) or not shutil.which("ctags"):
    print("no C compiler or ctags: skip")
    raise SystemExit(77)
tmp = tempfile.mkdtemp(prefix="harp_api_")
PUBLIC = ["include/harp.h", "include/harp/status.h"]

# 1. harp.h includes the standard headers and harp/status.h, nothing else of harp's
for h in PUBLIC:
    text = open(os.path.join(SRC, h)).read()
    for inc in re.findall(r'^\s*#\s*include\s+([<"][^>"]+[>"])', text, re.M):
        ok = inc.startswith("<") or inc == '"harp/status.h"'
        s.check(f"{h} includes {inc}", ok, "harp.h must not include the IR headers")


# 2. every file-scope name they declare is harp_ / HARP_ (an hp_ name only
# while scripts/rename_prefixes.py has still to turn it into one)
def public_name(name, home):
    if name.startswith(("harp_", "HARP_")):
        return True
    new = rename_prefixes.target(name, home) if re.match(r"(hp|HP)_", name) else None
    return bool(new and new.startswith(("harp_", "HARP_")))


out = subprocess.run(["ctags", "-x", "--languages=C", "--langmap=C:+.h", "--kinds-C=defgpstuvx", "--extras=-F"]
                     + PUBLIC, cwd=SRC, capture_output=True, text=True)
s.check("ctags reads the headers", out.returncode == 0, out.stderr)
names = [(ln.split()[0], ln.split()[3]) for ln in out.stdout.splitlines() if ln.strip()]
for h in PUBLIC:  # names made by pasting (X-macro rows): their prefix
    code = "".join(seg for kind, seg in rename_prefixes.c_segments(open(os.path.join(SRC, h)).read()) if kind == "code")
    names += [(p, h) for p in re.findall(r"\b(\w+)\s*##", code)]
s.check("the headers declare names", len(names) > 30, str(len(names)))
bad = sorted({n for n, home in names if not public_name(n, home)})
s.check("every name harp.h declares is harp_", not bad, ", ".join(bad))

# 3. harp.h alone compiles as strict C11, and as C++ (extern "C")
src = os.path.join(tmp, "only_harp.c")
with open(src, "w") as f:
    f.write('#include "harp.h"\nint main(void) { harp_options o = {HARP_BACKEND_CPU}; return (int)o.backend + (int)HARP_FP32 - 2; }\n')
p = subprocess.run([CC, "-std=c11", "-pedantic", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", "-I", INC, src],
                   capture_output=True, text=True)
s.check("harp.h compiles alone as C11 -pedantic", p.returncode == 0, p.stderr)
if shutil.which("c++"):
    p = subprocess.run(["c++", "-std=c++11", "-Wall", "-Werror", "-fsyntax-only", "-x", "c++", "-I", INC, src],
                       capture_output=True, text=True)
    s.check("harp.h compiles as C++", p.returncode == 0, p.stderr)

# 4. libharp exports no model_* (those are the generated packages' ABI)
lib = os.path.join(os.path.dirname(os.path.abspath(HARP)), "libharp.a")
if os.path.exists(lib) and shutil.which("nm"):
    p = subprocess.run(["nm", "-g", "--defined-only", lib], capture_output=True, text=True)
    clash = sorted({ln.split()[-1] for ln in p.stdout.splitlines() if re.search(r" [TDBR] model_\w+$", ln)})
    s.check("libharp exports no model_*", p.returncode == 0 and not clash, " ".join(clash) or p.stderr)

# 5. a package and libharp in one program: it links, and both agree
pkg = os.path.join(tmp, "pkg")
model = os.path.join(SRC, "examples", "mlp.harp")
p = subprocess.run([HARP, "compile", model, "--target", "cpu", "-o", pkg], capture_output=True, text=True)
s.check("harp compile", p.returncode == 0, p.stderr)
pc = shutil.which("pkg-config")
if p.returncode == 0 and os.path.exists(lib) and pc:
    deps = subprocess.run([pc, "--libs", "jansson", "isl", "libprotobuf-c"], capture_output=True, text=True).stdout.split()
    san = ["-fsanitize=address,undefined"] if os.environ.get("HARP_SANITIZE") in ("1", "ON", "TRUE") else []
    exe = os.path.join(tmp, "c_api_link")
    cmd = [CC, "-O2", "-fopenmp-simd", "-fno-math-errno", *san, "-I", INC, "-I", pkg,
           os.path.join(SRC, "tests", "py", "c_api_link.c"), os.path.join(pkg, "model.c"),
           "-o", exe, lib, *deps, "-lm", "-lpthread", "-ldl"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    s.check("a package and libharp link into one program", p.returncode == 0, p.stderr[-3000:])
    if p.returncode == 0:
        r = subprocess.run([exe, model], capture_output=True, text=True, timeout=600)
        s.check("the package and the library compute the same", r.returncode == 0 and "max |diff|" in r.stdout,
                r.stdout + r.stderr[-2000:])
s.close()
