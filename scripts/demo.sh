#!/usr/bin/env bash
# make demo: run the seed examples on the CPU and print their results.
set -euo pipefail
HARP=${1:-build/harp}
cd "$(dirname "$0")/.."
python3 scripts/demo.py "$HARP"
python3 scripts/demo_transformer.py "$HARP"
