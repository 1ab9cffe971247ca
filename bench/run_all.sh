#!/usr/bin/env bash
# Run every CPU kernel benchmark once, in sequence (bench/RESULTS.md records
# the output).  Needs: scripts/install-deps.sh --bench.
set -euo pipefail
cd "$(dirname "$0")"
echo "== $(date -u +%F\ %T) $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cpus"
./wait_idle.sh; make -s peak
./wait_idle.sh; make -s gemm
./wait_idle.sh; make -s gemm16 SIZES="512 1024 2048"
./wait_idle.sh; make -s gemmbf16 SIZES="512 1024 2048"
./wait_idle.sh; make -s epi SIZES="512 1024 2048"
./wait_idle.sh; make -s conv
./wait_idle.sh; make -s attn
