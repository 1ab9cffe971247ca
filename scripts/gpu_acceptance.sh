#!/usr/bin/env bash
# gpu_acceptance.sh — the GPU part of harp's acceptance in one command, on a
# machine with an NVIDIA GPU, CUDA (NVRTC, cuBLAS), CMake, gcc and Python
# with numpy:
#
#   scripts/gpu_acceptance.sh [STEP...]       STEP: build tests gemm graphs (default: all four)
#
# build   Release build in build-gpu/ (16 jobs)
# tests   every ctest test, the GPU ones included (they skip without a GPU);
#         the interpreter is the reference (seed 000 §9: rtol = atol = 1e-3)
# gemm    fp16 and bf16 GEMM 4096³ and 8192³, SM80 and SM90 templates vs cuBLAS
#         in the same run (bench/cuda_gemm.c)
# graphs  host overhead: launches one by one vs one CUDA Graph replay, and a
#         session over four batch sizes (bench/cuda_graphs.sh)
#
# Logs go to $OUT (the device tool's) or ./gpu-logs: env.txt, build.log,
# tests.log, gemm.log, graphs.log.  Where the Debian packages cannot be
# installed (the device tool's machine has no apt access), run
# scripts/fetch-device-debs.sh on a machine that can and bring .debs/ along:
# they are unpacked under /tmp/harp-deps and used from there (HARP_USE_DEBS=1:
# even where pkg-config finds the system's).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${OUT:-$root/gpu-logs}
mkdir -p "$out"
steps=${*:-build tests gemm graphs}
jobs=${JOBS:-16}

if [ -d .debs ] && { [ -n "${HARP_USE_DEBS:-}" ] || ! pkg-config --exists isl jansson cmocka 2>/dev/null; }; then
  deps=/tmp/harp-deps
  mkdir -p "$deps"
  for f in .debs/*.deb; do dpkg -x "$f" "$deps" || exit 1; done
  lib=$deps/usr/lib/x86_64-linux-gnu
  for pc in "$lib"/pkgconfig/*.pc; do # the .pc files say prefix=/usr
    sed -i "s|^prefix=/usr\$|prefix=$deps/usr|; s|^libdir=/usr|libdir=$deps/usr|; s|^includedir=/usr|includedir=$deps/usr|" "$pc"
  done
  export PKG_CONFIG_PATH=$lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
  command -v pkg-config >/dev/null || export PKG_CONFIG=$deps/usr/bin/pkgconf
  export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export LIBRARY_PATH=$lib${LIBRARY_PATH:+:$LIBRARY_PATH}
  export CPATH=$deps/usr/include${CPATH:+:$CPATH}
fi
# cuBLAS for the GEMM comparison: the toolkit's, else a pip wheel's
if ! ldconfig -p 2>/dev/null | grep -q 'libcublas\.so'; then
  d=$(find / -xdev -name 'libcublas.so.1[0-9]*' -printf '%h\n' 2>/dev/null | head -1)
  [ -n "$d" ] && export LD_LIBRARY_PATH=$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi

{
  date -u
  nvidia-smi 2>&1 | head -20
  nvcc --version 2>&1 | tail -2
  echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
  git log --oneline -1 2>/dev/null
} >"$out/env.txt"

rc=0
for s in $steps; do
  case $s in
  build)
    { cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release && cmake --build build-gpu -j"$jobs"; } >"$out/build.log" 2>&1 ||
      { echo "build failed: see build.log"; tail -30 "$out/build.log"; exit 1; }
    ;;
  tests)
    (cd build-gpu && ctest -j"$jobs" --output-on-failure --timeout 300) >"$out/tests.log" 2>&1 || rc=1
    grep -E "tests passed|Skipped|Failed|\*\*\*" "$out/tests.log" | tail -20
    ;;
  gemm)
    make -C bench BUILD="$root/build-gpu" cuda-gemm >"$out/gemm.log" 2>&1 || rc=1
    tail -20 "$out/gemm.log"
    ;;
  graphs)
    make -C bench BUILD="$root/build-gpu" cuda-graphs >"$out/graphs.log" 2>&1 || rc=1
    tail -20 "$out/graphs.log"
    ;;
  *) echo "gpu_acceptance: unknown step '$s' (build tests gemm graphs)" >&2; exit 2 ;;
  esac
done
exit $rc
