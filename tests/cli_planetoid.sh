#!/usr/bin/env bash
# cli_planetoid.sh - scripts/planetoid-to-saga lays the public Planetoid pickles of Cora out as
# `saga gcn --data` reads them: byte for byte the text files of the data set's Cora folder.
set -euo pipefail
source "$(dirname "$0")/cli_common.bash"
script=$(dirname "$0")/../scripts/planetoid-to-saga

dataset raw cora/planetoid_raw/ind.cora.graph
raw=$(dirname "$raw")
dataset cora_labels cora/labels.txt
cora=$(dirname "$cora_labels")

expect 0 python3 "$script" "$raw" cora "$TMP/cora"
expect_out "2708 vertices, 5278 edges, 1433 features, 7 classes; split 140 / 500 / 1000"
for f in edges.txt.gz features.txt.gz; do
    cmp -s <(gzip -dc "$TMP/cora/$f") <(gzip -dc "$cora/$f") || fail "$f differs from $cora/$f"
done
for f in labels.txt train_idx.txt val_idx.txt test_idx.txt; do
    cmp -s "$TMP/cora/$f" "$cora/$f" || fail "$f differs from $cora/$f"
done
expect 0 "$SAGA_BIN" gcn --data "$TMP/cora" --epochs 5 --json --quiet
[ "$(json_get 'j["vertices"], j["edges"], j["features"], j["classes"], j["train"], j["test"]')" = \
    "2708 5278 1433 7 140 1000" ] || fail "gcn on the laid-out Cora: $(json_last)"

expect 2 python3 "$script"
expect_err "usage: planetoid-to-saga"
expect 1 python3 "$script" "$TMP" cora "$TMP/x"
expect_err "missing"
finish
