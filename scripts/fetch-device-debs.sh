#!/usr/bin/env bash
# fetch-device-debs.sh — download the Debian packages harp builds against
# (isl, jansson, cmocka, pkg-config) into .debs/, for a machine that cannot
# install them itself: the GPU machine of the device tool has CUDA, CMake and
# Python but no apt access.  .debs/ is git-ignored; send it along (the device
# tool's `carry`) and scripts/gpu_acceptance.sh unpacks it there.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .debs
cd .debs
pkgs="libisl23 libisl-dev libgmp10 libjansson4 libjansson-dev libcmocka0 libcmocka-dev pkgconf pkgconf-bin libpkgconf3
  libprotobuf-c1 libprotobuf-c-dev protobuf-c-compiler libprotoc32 libprotobuf32 libonnx-dev libgmp-dev"
# apt-get download writes as _apt where it can; a root-owned folder just warns
apt-get download $pkgs 2>&1 | grep -v "^W: Download is performed unsandboxed" || true
for p in $pkgs; do
  ls "${p}"_*.deb >/dev/null 2>&1 || { echo "fetch-device-debs: $p was not downloaded" >&2; exit 1; }
done
echo "fetch-device-debs: $(ls | wc -l) packages in .debs ($(du -sh . | cut -f1))"
