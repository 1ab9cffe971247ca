#!/usr/bin/env python3
"""test_install.py — `make install` (cmake --install) into a temporary
prefix, and with DESTDIR: libharp.so.0 (exporting only harp_*), harp.h and
harp/, harp.pc, the CMake package and the CLI land there; a C program
(tests/install/use_harp.c) builds with nothing but
`pkg-config --cflags --libs harp` and runs; the same program builds with
find_package(harp) (tests/install/CMakeLists.txt) and runs."""
import os
import shutil
import subprocess
import sys
import tempfile

from harp_test import HARP, SRC, Suite

s = Suite("install")
if os.environ.get("HARP_SANITIZE", "0") not in ("0", "", "FALSE", "false"):
    print("a sanitizer build: its libharp.so needs the sanitizer's runtime first: skipped")
    sys.exit(77)
BUILD = os.path.dirname(os.path.abspath(HARP))
if not os.path.exists(os.path.join(BUILD, "libharp.so")) or not shutil.which("pkg-config"):
    print("no libharp.so in the build (or no pkg-config): skipped")
    sys.exit(77)
tmp = tempfile.mkdtemp(prefix="harp_install_")
prefix = os.path.join(tmp, "prefix")


def sh(args, env=None, cwd=None):
    return subprocess.run(args, capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


r = sh(["cmake", "--install", BUILD, "--prefix", prefix])
s.check("cmake --install", r.returncode == 0, r.stderr[-800:])
lib = os.path.join(prefix, "lib")
for f in ("lib/libharp.so", "lib/libharp.so.0", "include/harp.h", "include/harp/status.h", "bin/harp",
          "lib/pkgconfig/harp.pc", "lib/cmake/harp/harpConfig.cmake", "lib/cmake/harp/harpTargets.cmake"):
    s.check(f"installed {f}", os.path.exists(os.path.join(prefix, f)), "missing")

# only the public API is exported
r = sh(["nm", "-D", "--defined-only", os.path.join(lib, "libharp.so.0")])
syms = [ln.split()[-1].split("@")[0] for ln in r.stdout.splitlines() if ln.split() and ln.split()[-2] in "TDBR"]
s.check("exports harp_version", "harp_version" in syms, str(syms[:5]))
others = [x for x in syms if not x.startswith("harp_")]
s.check("exports nothing but harp_*", not others, str(others[:10]))
s.check("keeps internals local", "harp_compile_bound" not in syms and not any(x.startswith("ut_") for x in syms))
r = sh(["objdump", "-p", os.path.join(lib, "libharp.so.0")])
s.check("SONAME libharp.so.0", "SONAME               libharp.so.0" in r.stdout, r.stdout[:300])

# DESTDIR: the same tree under it, nothing outside
dest = os.path.join(tmp, "dest")
r = sh(["cmake", "--install", BUILD, "--prefix", "/opt/harp"], env=dict(os.environ, DESTDIR=dest))
s.check("DESTDIR install", r.returncode == 0 and os.path.exists(os.path.join(dest, "opt/harp/lib/libharp.so.0"))
        and os.path.exists(os.path.join(dest, "opt/harp/include/harp.h")), r.stderr[-500:])
pc = open(os.path.join(dest, "opt/harp/lib/pkgconfig/harp.pc")).read()
s.check("harp.pc is relocatable (no absolute prefix)", "prefix=${pcfiledir}/../.." in pc and dest not in pc, pc)
r = sh(["pkg-config", "--cflags", "harp"], env=dict(os.environ, PKG_CONFIG_PATH=os.path.join(dest, "opt/harp/lib/pkgconfig")))
s.check("pkg-config finds the staged headers", os.path.join(dest, "opt/harp/lib/pkgconfig/../../include") in r.stdout,
        r.stdout + r.stderr)

# a program built with pkg-config alone, run against the installed library
env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(lib, "pkgconfig"), LD_LIBRARY_PATH=lib)
r = sh(["pkg-config", "--cflags", "--libs", "harp"], env=env)
s.check("pkg-config --cflags --libs harp", r.returncode == 0 and "-lharp" in r.stdout, r.stderr)
flags = r.stdout.split()
exe = os.path.join(tmp, "use_harp")
r = sh(["cc", "-std=c11", "-o", exe, os.path.join(SRC, "tests", "install", "use_harp.c")] + flags, env=env)
s.check("cc with pkg-config's flags", r.returncode == 0, r.stderr[-800:])
if r.returncode == 0:
    r = sh([exe], env=env)
    s.check("the program runs on the installed libharp.so", r.returncode == 0 and " ok" in r.stdout,
            r.stdout + r.stderr[-800:])
    r = sh(["ldd", exe], env=env)
    s.check("it links the installed libharp.so.0", os.path.join(lib, "libharp.so.0") in r.stdout, r.stdout)

# find_package(harp) -> harp::harp
bdir = os.path.join(tmp, "fp")
r = sh(["cmake", "-S", os.path.join(SRC, "tests", "install"), "-B", bdir, f"-DCMAKE_PREFIX_PATH={prefix}"])
s.check("find_package(harp)", r.returncode == 0, r.stdout[-500:] + r.stderr[-800:])
if r.returncode == 0:
    r = sh(["cmake", "--build", bdir])
    s.check("builds against harp::harp", r.returncode == 0, r.stdout[-800:])
    r = sh([os.path.join(bdir, "use_harp")], env=env)
    s.check("the find_package program runs", r.returncode == 0 and " ok" in r.stdout, r.stdout + r.stderr[-500:])
shutil.rmtree(tmp, True)
s.close()
