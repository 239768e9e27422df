#!/usr/bin/env bash
# METIS under a small device budget: stdout holds the command's output and nothing of METIS's
# (it prints with printf), and a budget that asks for many parts says so on stderr.
set -euo pipefail
source "$(dirname "$0")/cli_common.bash"

# stdout must be the JSON object alone: one line that parses, no METIS text
json_only() {
    [ "$(wc -l <"$OUT")" -eq 1 ] || fail "$1: stdout has $(wc -l <"$OUT") lines, expected the JSON line alone"
    json_last | python3 -c 'import json, sys; json.loads(sys.stdin.read())' ||
        fail "$1: the last stdout line is not JSON"
    if grep -qiE 'bisect|too many parts|\*\*\*' "$OUT"; then
        fail "$1: METIS text on stdout:"
        head -3 "$OUT" >&2
    fi
}

# R-MAT graphs have hubs: a vertex's weight (1 + its in-degree, so that parts balance their
# edges) can pass a part's share, and METIS's recursive bisection then has parts to fill and no
# vertices ("Cannot bisect a graph with 0 vertices!", printed on stdout).
expect 0 "$SAGA_BIN" generate rmat --scale 12 --edge-factor 8 --seed 1 --quiet -o "$TMP/r12.sgr"
expect 0 "$SAGA_BIN" generate rmat --scale 13 --edge-factor 4 --seed 1 --quiet -o "$TMP/r13.sgr"

expect 0 "$SAGA_BIN" pagerank --json --stream --parts 512 "$TMP/r12.sgr"
json_only "512 parts of 4096 vertices"
json_get 'j["parts"]' | grep -qx 512 || fail "512 parts asked, $(json_get 'j["parts"]') made"
if grep -qiE 'bisect|too many parts' "$ERR"; then
    fail "METIS could not bisect (parts left empty):"
    grep -iE 'bisect|too many parts' "$ERR" | head -2 >&2
fi

# a budget that needs more than 256 parts: a warning before the partitioning, the time METIS
# took, and once the count is known, a budget that needs fewer (measured on a pass that did not fit)
expect 0 "$SAGA_BIN" pagerank --json --device-mem 20K --max-iters 3 --allow-unconverged "$TMP/r13.sgr"
json_only "a 20K budget"
json_get 'j["parts"]' | grep -qx 512 || fail "20K should need 512 parts, got $(json_get 'j["parts"]')"
expect_err "warning: the device budget of 20480 bytes (20480 after the backend's own) needs more than 256 parts (trying 512)"
expect_err "partitioned 8192 vertices into 512 parts (metis) in"
expect_err "warning: the device budget of 20480 bytes needs 512 parts; a budget of"
read -r fewer k_fewer < <(sed -n 's/.*a budget of \([0-9]*\) bytes or more would need \([0-9]*\) .*/\1 \2/p' "$ERR") || true
if [ -z "${fewer:-}" ] || [ "$k_fewer" -gt 256 ]; then
    fail "the warning names no budget that needs 256 parts or fewer"
else
    # the budget it names is enough for that many parts, and then there is no warning
    expect 0 "$SAGA_BIN" pagerank --json --device-mem "$fewer" --max-iters 3 --allow-unconverged \
        "$TMP/r13.sgr"
    json_only "the budget the warning names"
    json_get "j['parts'] <= $k_fewer" | grep -qx True ||
        fail "a budget of $fewer bytes needs $(json_get 'j["parts"]') parts, not $k_fewer"
    if grep -q 'needs more than' "$ERR"; then fail "a budget of $fewer bytes still warns"; fi
fi

# the other commands share the library's partitioning: gcn's --json too
expect 0 "$SAGA_BIN" gcn --json --synthetic 4096,8,16,4 --epochs 2 --stream --parts 512 --quiet
json_only "gcn, 512 parts"

finish
