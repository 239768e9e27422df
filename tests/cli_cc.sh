#!/usr/bin/env bash
# cli_cc.sh - `saga cc` against a union-find written here, on the real datasets and on small
# graphs with known answers; --out, --json, and bad input.
set -euo pipefail
source "$(dirname "$0")/cli_common.bash"

dataset karate karate/edges.txt
dataset email email-Eu-core/email-Eu-core.txt.gz
dataset grqc ca-GrQc/ca-GrQc.txt.gz

# reference FILE: "id component" for every vertex (component = smallest id in it), by union-find
# over the edge list with the direction ignored, sorted by id.
reference() {
    python3 - "$1" <<'PY'
import gzip, sys
path = sys.argv[1]
f = gzip.open(path, "rt") if path.endswith(".gz") else open(path)
parent = {}
def find(x):
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x
for line in f:
    t = line.split()
    if not t or t[0][0] in "#%":
        continue
    u, v = int(t[0]), int(t[1])
    for x in (u, v):
        parent.setdefault(x, x)
    a, b = find(u), find(v)
    if a != b:
        parent[max(a, b)] = min(a, b)
for x in sorted(parent):
    print(x, find(x))
PY
}

check() { # check NAME FILE
    expect 0 "$SAGA_BIN" cc "$2" --out "$TMP/$1.out" --json --quiet
    reference "$2" >"$TMP/$1.ref"
    sort -n -k1,1 "$TMP/$1.out" >"$TMP/$1.sorted"
    cmp -s "$TMP/$1.sorted" "$TMP/$1.ref" || fail "$1: components differ from union-find"
    local want
    want=$(cut -d' ' -f2 "$TMP/$1.ref" | sort -u | wc -l)
    json_last | grep -q "\"components\":$want," || fail "$1: --json does not report $want components"
}

check karate "$karate"
check email "$email"
check grqc "$grqc"

# Streamed through a device budget far below the graph's (ca-GrQc in memory peaks near 500 KB):
# the same components, the peak within the budget.
for part in metis random; do
    expect 0 "$SAGA_BIN" cc "$grqc" --out "$TMP/grqc.$part.out" --json --quiet --device-mem 120K \
        --partition "$part"
    sort -n -k1,1 "$TMP/grqc.$part.out" | cmp -s - "$TMP/grqc.ref" ||
        fail "ca-GrQc streamed ($part): components differ from union-find"
    json_get 'j["streamed"] and j["parts"] > 1 and 0 < j["peak_device_bytes"] <= 120 * 1024' |
        grep -qx True || fail "ca-GrQc streamed ($part): not streamed within the budget"
done

# Known answers: two triangles and an isolated pair, with direction that must not matter.
printf '1 2\n3 2\n3 1\n10 11\n12 11\n10 12\n# comment\n100 200\n' >"$TMP/small.txt"
expect 0 "$SAGA_BIN" cc "$TMP/small.txt" --top 3
expect_out "3 components"
expect_out "1      1            3"
json_check() { json_last | grep -q "$1" || fail "json lacks $1"; }
expect 0 "$SAGA_BIN" cc "$TMP/small.txt" --json --quiet
json_check '"components":3,'
json_check '"largest":3,'

# Errors: a missing file, a malformed line, a bad option value.
expect 1 "$SAGA_BIN" cc "$TMP/missing.txt"
expect_err "missing.txt"
printf '1 2\n3\n' >"$TMP/bad.txt"
expect 1 "$SAGA_BIN" cc "$TMP/bad.txt"
expect_err "bad.txt:2"
expect 2 "$SAGA_BIN" cc "$TMP/small.txt" --top -1
expect 0 "$SAGA_BIN" cc --help
expect_out "weakly connected"
finish
