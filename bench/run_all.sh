#!/usr/bin/env bash
# Run every CPU kernel benchmark once, in sequence (bench/RESULTS.md records
# the output).  Needs: scripts/install-deps.sh --bench.
set -euo pipefail
cd "$(dirname "$0")"
echo "== $(date -u +%F\ %T) $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cpus"
make -s peak
make -s gemm
make -s gemm16 SIZES="512 1024 2048"
make -s gemmbf16 SIZES="512 1024 2048"
make -s epi SIZES="512 1024 2048"
make -s conv
make -s attn
