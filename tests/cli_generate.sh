#!/usr/bin/env bash
# cli_generate.sh - `saga generate rmat` is deterministic: the same seed gives byte-identical
# files (text, gzip, .sgr) for any thread count, a different seed a different file.
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

finish
