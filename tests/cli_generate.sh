#!/usr/bin/env bash
# cli_generate.sh - `saga generate rmat` is deterministic: the same seed gives byte-identical
# files (text, gzip, .sgr) for any thread count, a different seed a different file. `saga generate
# citation` writes a Cora-layout directory that the other commands read, the same bytes each time.
set -euo pipefail
source "$(dirname "$0")/cli_common.bash"

gen() { expect 0 "$SAGA_BIN" generate rmat --quiet --scale 12 --edge-factor 8 "$@"; }

for ext in txt txt.gz sgr; do
    gen --seed 5 -o "$TMP/a.$ext"
    OMP_NUM_THREADS=1 gen --seed 5 -o "$TMP/b.$ext"
    cmp -s "$TMP/a.$ext" "$TMP/b.$ext" || fail "same seed, different .$ext files"
    gen --seed 6 -o "$TMP/c.$ext"
    ! cmp -s "$TMP/a.$ext" "$TMP/c.$ext" || fail "different seeds, same .$ext file"
done
# The gzip file holds the text file's bytes.
gzip -dc "$TMP/a.txt.gz" | cmp -s - "$TMP/a.txt" || fail "a.txt.gz does not decompress to a.txt"
head -n 1 "$TMP/a.txt" | grep -q '^# R-MAT scale 12 edge_factor 8 ' || fail "header: $(head -n 1 "$TMP/a.txt")"
[ "$(grep -vc '^#' "$TMP/a.txt")" -eq 32768 ] || fail "a.txt should hold 32768 edges"

# The .sgr keeps all 2^12 vertices; the text names only those with edges. Both hold every edge.
expect 0 "$SAGA_BIN" info --json "$TMP/a.sgr"
[ "$(json_get 'j["vertices"], j["edges"]')" = "4096 32768" ] || fail "a.sgr: $(json_last)"
isolated=$(json_get 'j["isolated"]')
expect 0 "$SAGA_BIN" info --json "$TMP/a.txt"
[ "$(json_get 'j["vertices"] + '"$isolated"', j["edges"]')" = "4096 32768" ] ||
    fail "a.txt: $(json_last) with $isolated isolated vertices in a.sgr"
# Skewed: the top in-degree is far above the mean of 8.
[ "$(json_get 'j["in_degree"]["max"] > 80')" = True ] || fail "R-MAT degrees are not skewed: $(json_last)"

# Options change the graph: no scrambling puts the hub at vertex 0.
expect 0 "$SAGA_BIN" generate rmat --quiet --scale 12 --edge-factor 8 --no-scramble -o "$TMP/u.txt"
! cmp -s "$TMP/a.txt" "$TMP/u.txt" || fail "--no-scramble changed nothing"
expect 0 "$SAGA_BIN" pagerank --json --top 1 "$TMP/u.txt"
[ "$(json_get 'j["top"][0]["id"]')" = 0 ] || fail "unscrambled R-MAT: top vertex should be 0: $(json_last)"

# ---- citation ----------------------------------------------------------------------------------
cite() { expect 0 "$SAGA_BIN" generate citation --quiet --vertices 3000 --classes 5 --degree 6 \
    --features 200 "$@"; }
cite --seed 3 -o "$TMP/cit-a"
OMP_NUM_THREADS=1 cite --seed 3 -o "$TMP/cit-b"
cite --seed 4 -o "$TMP/cit-c"
for f in edges.txt.gz features.txt.gz labels.txt classes.txt train_idx.txt val_idx.txt \
    test_idx.txt README.md; do
    [ -s "$TMP/cit-a/$f" ] || fail "citation: $f missing or empty"
    cmp -s "$TMP/cit-a/$f" "$TMP/cit-b/$f" || fail "citation: same seed, different $f"
done
! cmp -s "$TMP/cit-a/edges.txt.gz" "$TMP/cit-c/edges.txt.gz" || fail "citation: seeds 3 and 4 give the same edges"
[ -z "$(ls "$TMP/cit-a" | grep '\.tmp$' || true)" ] || fail "citation: .tmp files left behind"

# The layout: u < v once each, sorted; 9000 edges; every vertex labelled; split 20 per class.
gzip -dc "$TMP/cit-a/edges.txt.gz" | python3 -c '
import sys
pairs = [tuple(map(int, l.split())) for l in sys.stdin]
assert len(pairs) == 9000, len(pairs)
assert all(u < v for u, v in pairs), "u < v"
assert pairs == sorted(set(pairs)), "sorted, no duplicates"
' || fail "citation: edges.txt.gz is not u<v, sorted, 9000 edges"
[ "$(wc -l <"$TMP/cit-a/labels.txt")" -eq 3000 ] || fail "citation: labels.txt should have 3000 lines"
[ "$(wc -l <"$TMP/cit-a/train_idx.txt")" -eq 100 ] || fail "citation: train should be 5 x 20"
[ "$(wc -l <"$TMP/cit-a/val_idx.txt")" -eq 500 ] || fail "citation: val should be 500"
[ "$(wc -l <"$TMP/cit-a/test_idx.txt")" -eq 1000 ] || fail "citation: test should be 1000"
expect 0 "$SAGA_BIN" info --json --undirected "$TMP/cit-a/edges.txt.gz"
[ "$(json_get 'j["vertices"], j["edges"], j["isolated"]')" = "3000 18000 0" ] ||
    fail "citation graph: $(json_last)"

# --json reports the measured homophily near the asked one.
expect 0 "$SAGA_BIN" generate citation --json --vertices 5000 --classes 4 --degree 8 --features 100 \
    --homophily 0.6 -o "$TMP/cit-h"
[ "$(json_get 'abs(j["homophily"] - 0.6) < 0.03 and j["edges"] == 20000')" = True ] ||
    fail "citation --json: $(json_last)"

# Usage errors: options of the other generator, impossible sizes, a file in the way.
expect 2 "$SAGA_BIN" generate citation --scale 10 -o "$TMP/x"
expect_err "--scale does not apply to the citation generator"
expect 2 "$SAGA_BIN" generate rmat --vertices 10 -o "$TMP/x.txt"
expect_err "--vertices does not apply to the rmat generator"
expect 2 "$SAGA_BIN" generate citation --vertices 10 --classes 7 -o "$TMP/x"
expect_err "at least twice --classes"
expect 2 "$SAGA_BIN" generate citation
expect_err "missing -o DIR"
expect 1 "$SAGA_BIN" generate citation --vertices 20 --classes 2 --degree 15 -o "$TMP/x"
expect_err "half of the"
expect 1 "$SAGA_BIN" generate citation --vertices 100 -o "$TMP/cit-a/labels.txt"
expect_err "cit-a/labels.txt"

finish
