#!/usr/bin/env bash
# Install what harp needs to build and test on a fresh Debian machine.
#   scripts/install-deps.sh              install everything listed below
#   scripts/install-deps.sh --if-missing only act when something is missing
#   scripts/install-deps.sh --bench      also the optional benchmark peers (below)
set -euo pipefail

# libprotobuf-c-dev, protobuf-c-compiler: the ONNX frontend's parser, generated
# at build time from the schema in libonnx-dev (/usr/include/onnx/onnx.proto).
# python3-dev, python3-venv: the Python package's extension (Python.h) and its
# wheel test's fresh virtual environment.
# clang: `make fuzz` (libFuzzer ships in clang's runtime, libclang-common-*-dev).
DEB_PACKAGES="build-essential clang cmake pkg-config libisl-dev libjansson-dev libcmocka-dev libprotobuf-c-dev protobuf-c-compiler libonnx-dev python3 python3-pip python3-dev python3-venv"
# onnx, onnxruntime: the ONNX frontend's tests build models with onnx.helper
# and compare harp with onnxruntime.
# nanobind, scikit-build-core: the Python package (python/, pyproject.toml;
# the build makes its extension when nanobind is there, tests/py/test_python_*).
PY_PACKAGES="numpy onnx onnxruntime nanobind scikit-build-core"

# Optional "bench" list: only bench/ needs these (OpenBLAS, oneDNN as peers of
# the generated CPU kernels; OpenVINO as a peer of whole models, bench/realmodels.py;
# onnxruntime is in the main list).  Tests and CI never do.
BENCH_DEB_PACKAGES="libopenblas-dev libdnnl-dev"
BENCH_PY_PACKAGES="onnxruntime onnx openvino"

if [ "${1:-}" = "--bench" ]; then
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  # shellcheck disable=SC2086
  $SUDO apt-get install -y -qq $BENCH_DEB_PACKAGES >/dev/null
  # shellcheck disable=SC2086
  python3 -m pip install -q $BENCH_PY_PACKAGES 2>/dev/null || python3 -m pip install -q --break-system-packages $BENCH_PY_PACKAGES
  exec "$0"
fi

missing() {
  for pc in isl jansson cmocka libprotobuf-c; do
    pkg-config --exists "$pc" 2>/dev/null || return 0
  done
  command -v cmake >/dev/null 2>&1 || return 0
  command -v cc >/dev/null 2>&1 || return 0
  command -v clang >/dev/null 2>&1 || return 0
  command -v protoc-c >/dev/null 2>&1 || return 0
  [ -f /usr/include/onnx/onnx.proto ] || return 0
  python3 -c 'import numpy, onnx, onnxruntime, nanobind, scikit_build_core, ensurepip' >/dev/null 2>&1 || return 0
  # the Python package's extension needs Python.h (python3-dev)
  [ -f "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" ] || return 0
  return 1
}

if [ "${1:-}" = "--if-missing" ] && ! missing; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "install-deps: not root and no sudo; install: $DEB_PACKAGES, and pip: $PY_PACKAGES" >&2
    exit 1
  fi
fi

echo "install-deps: installing Debian packages: $DEB_PACKAGES" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq $DEB_PACKAGES >/dev/null

if ! python3 -c 'import numpy, onnx, onnxruntime, nanobind, scikit_build_core' >/dev/null 2>&1; then
  echo "install-deps: installing Python packages: $PY_PACKAGES" >&2
  # shellcheck disable=SC2086
  python3 -m pip install -q $PY_PACKAGES 2>/dev/null || python3 -m pip install -q --break-system-packages $PY_PACKAGES
fi
