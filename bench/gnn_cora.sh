#!/usr/bin/env bash
# gnn_cora.sh - test accuracy of the GNN example (examples/gnn: the library's GAT, GraphSAGE,
# GIN or GCN) on Cora over seeds.
#
#   bench/gnn_cora.sh [BUILD_DIR [DATA_DIR]]      (MODEL=gat SEEDS=10 EPOCHS=300)
#
# Installs the build into a temporary prefix, builds the example against it the way a user
# would, and prints each seed's line and the mean test accuracy (at the epoch with the best
# validation accuracy, as the example reports it).
set -euo pipefail
build=${1:-build}
data=${2:-${SAGA_DATA_DIR:-$(dirname "$0")/../../shared/datasets}/cora}
here=$(cd "$(dirname "$0")" && pwd)
model=${MODEL:-gat} seeds=${SEEDS:-10} epochs=${EPOCHS:-300}
work=$here/out/gnn-example
rm -rf "$work"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$here/../examples/gnn" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" \
    -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/build" >/dev/null
sum=0
for ((s = 1; s <= seeds; s++)); do
    line=$("$work/build/gnn" --model "$model" --data "$data" --epochs "$epochs" --seed "$s" --quiet)
    echo "seed $s: $line"
    acc=$(sed -n 's/.*test_accuracy=\([0-9.]*\).*/\1/p' <<<"$line")
    sum=$(echo "$sum + $acc" | bc -l)
done
printf 'model=%s seeds=%d mean_test_accuracy=%.4f\n' "$model" "$seeds" "$(echo "$sum / $seeds" | bc -l)"
