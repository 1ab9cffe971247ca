#!/bin/sh
# cuda_graphs.sh — host overhead of a many-kernel model on the GPU: the same
# compiled model timed with its launches issued one by one and replayed as one
# CUDA Graph (`harp bench --backend cuda [--graphs]`), in interleaved rounds.
#
#   bench/cuda_graphs.sh [HARP] [MODEL] [ROUNDS]
#
# Default model: examples/transformer_block.harp (14 launches on sm90, fp32).
# Prints each round's medians and the best ratio plain/graph (> 1: the graph
# saves host time).  Without a GPU harp says why and this exits 1.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
harp=${1:-$here/../build/harp}
model=${2:-$here/../examples/transformer_block.harp}
rounds=${3:-5}
best_plain=; best_graph=
i=0
while [ "$i" -lt "$rounds" ]; do
  plain=$("$harp" bench "$model" --backend cuda --repeat 50 --json) || exit 1
  graph=$("$harp" bench "$model" --backend cuda --graphs --repeat 50 --json) || exit 1
  p=$(printf '%s' "$plain" | python3 -c 'import json,sys; print(json.load(sys.stdin)["median_ms"])')
  g=$(printf '%s' "$graph" | python3 -c 'import json,sys; print(json.load(sys.stdin)["median_ms"])')
  echo "round $i: launches $p ms, graph $g ms"
  best_plain=$(python3 -c "print(min(x for x in [$p, ${best_plain:-$p}]))")
  best_graph=$(python3 -c "print(min(x for x in [$g, ${best_graph:-$g}]))")
  i=$((i + 1))
done
python3 -c "print('best: launches %.4f ms, graph %.4f ms, launches/graph %.2f' % ($best_plain, $best_graph, $best_plain / $best_graph))"
