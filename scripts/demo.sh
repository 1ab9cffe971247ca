#!/usr/bin/env bash
# make demo: the main job on the CPU: a transformer block (examples/transformer_block.harp)
# compiled to C, checked against numpy and timed; then seed 000's GEMM + bias + ReLU.
set -euo pipefail
HARP=${1:-build/harp}
cd "$(dirname "$0")/.."
python3 scripts/demo_transformer.py "$HARP"
python3 scripts/demo.py "$HARP"
