#!/bin/sh
# cuda_graphs.sh — host overhead of a many-kernel model on the GPU.
#
#   bench/cuda_graphs.sh [HARP] [MODEL] [ROUNDS]
#
# Part 1: the same compiled model timed with its launches issued one by one
# and replayed as one CUDA Graph (`harp bench --backend cuda [--graphs]`), in
# interleaved rounds.  Default model: examples/transformer_block.harp (14
# launches on sm90, fp32).  Prints each round's medians and the best ratio
# plain/graph (> 1: the graph saves host time).
#
# Part 2 (ShapeSets): one session over examples/mlp.harp with four batch
# bindings, B=48 and B=64 (ShapeSet B:64), B=100 and B=128 (B:128), run in
# turn (`harp bench --bind ...`): without graphs, and with one graph per
# ShapeSet (updated in place when the binding changes within the cluster).
# Prints the per-run medians and the session's graph counters.
#
# Without a GPU harp says why and this exits 1.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
harp=${1:-$here/../build/harp}
model=${2:-$here/../examples/transformer_block.harp}
rounds=${3:-5}
field() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1], {}, d))' "$1"; }
best_plain=; best_graph=
i=0
while [ "$i" -lt "$rounds" ]; do
  plain=$("$harp" bench "$model" --backend cuda --repeat 50 --json) || exit 1
  graph=$("$harp" bench "$model" --backend cuda --graphs --repeat 50 --json) || exit 1
  p=$(printf '%s' "$plain" | field median_ms)
  g=$(printf '%s' "$graph" | field median_ms)
  echo "round $i: launches $p ms, graph $g ms"
  best_plain=$(python3 -c "print(min(x for x in [$p, ${best_plain:-$p}]))")
  best_graph=$(python3 -c "print(min(x for x in [$g, ${best_graph:-$g}]))")
  i=$((i + 1))
done
python3 -c "print('best: launches %.4f ms, graph %.4f ms, launches/graph %.2f' % ($best_plain, $best_graph, $best_plain / $best_graph))"

binds="--bind B=48 --bind B=64 --bind B=100 --bind B=128"
mlp=$here/../examples/mlp.harp
# shellcheck disable=SC2086
plain=$("$harp" bench "$mlp" --backend cuda $binds --repeat 50 --json) || exit 1
# shellcheck disable=SC2086
graph=$("$harp" bench "$mlp" --backend cuda --graphs $binds --repeat 50 --json) || exit 1
echo "ShapeSets (mlp, 4 bindings in turn, 2 ShapeSets):"
printf '%s' "$plain" | field '"  launches: %.4f ms per run" % median_ms'
printf '%s' "$graph" | field '"  graphs:   %.4f ms per run; %d instantiated, %d updated in place, %d replays" % (median_ms, session["instantiations"], session["updates"], session["replays"])'
