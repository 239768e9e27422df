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

# An .sgr gives the components of the file it was made from, whether it was converted directed
# (cc symmetrizes it, as it does an edge list) or undirected: email-Eu-core has 20 weak
# components, the largest of 986 vertices (SNAP's figures).
expect 0 "$SAGA_BIN" convert --quiet "$email" "$TMP/email.sgr"
expect 0 "$SAGA_BIN" convert --quiet --undirected "$email" "$TMP/email-undirected.sgr"
for sgr in email email-undirected; do
    expect 0 "$SAGA_BIN" cc "$TMP/$sgr.sgr" --out "$TMP/$sgr.sgr.out" --json --quiet
    [ "$(json_get 'j["components"], j["largest"], j["edges"]')" = "20 986 32770" ] ||
        fail "$sgr.sgr: $(json_last), expected 20 components, the largest 986, 32770 edges"
    sort -n -k1,1 "$TMP/$sgr.sgr.out" | cmp -s - "$TMP/email.ref" ||
        fail "$sgr.sgr: components differ from the text file's"
done
expect 0 "$SAGA_BIN" cc "$TMP/email.sgr" --top 1
expect_out "symmetrized"
expect_out "20 components"
# a version 1 .sgr (which does not record how it was built) too: cc needs no --undirected
python3 - "$TMP/email.sgr" "$TMP/email-v1.sgr" <<'PY'
import sys, zlib
img = bytearray(open(sys.argv[1], "rb").read())
img[8:12] = (1).to_bytes(4, "little")
img[172:176] = bytes(4)
img[252:256] = zlib.crc32(bytes(img[:252])).to_bytes(4, "little")
open(sys.argv[2], "wb").write(img)
PY
expect 0 "$SAGA_BIN" cc "$TMP/email-v1.sgr" --json --quiet
[ "$(json_get 'j["components"], j["largest"]')" = "20 986" ] || fail "email-v1.sgr: $(json_last)"
# so does an edge list given with options, and its .sgr loaded with the same ones
expect 0 "$SAGA_BIN" cc --self-loops drop "$email" --json --quiet
json_get 'j["components"], j["largest"]' >"$TMP/email.drop.txt"
expect 0 "$SAGA_BIN" cc --self-loops drop "$TMP/email.sgr" --json --quiet
[ "$(json_get 'j["components"], j["largest"]')" = "$(cat "$TMP/email.drop.txt")" ] ||
    fail "email.sgr --self-loops drop: $(json_last), the text file gives $(cat "$TMP/email.drop.txt")"
# the help says what happens to a directed input
expect 0 "$SAGA_BIN" cc --help
expect_out "symmetrized"

# Known answers: two triangles and an isolated pair, with direction that must not matter.
printf '1 2\n3 2\n3 1\n10 11\n12 11\n10 12\n# comment\n100 200\n' >"$TMP/small.txt"
expect 0 "$SAGA_BIN" cc "$TMP/small.txt" --top 3
expect_out "3 components"
expect_out "1      1            3"
json_check() { json_last | grep -q "$1" || fail "json lacks $1"; }
expect 0 "$SAGA_BIN" cc "$TMP/small.txt" --json --quiet
json_check '"components":3,'
json_check '"largest":3,'
# the same from its directed .sgr (before, the .sgr's one-way edges split the triangles)
expect 0 "$SAGA_BIN" convert --quiet "$TMP/small.txt" "$TMP/small.sgr"
expect 0 "$SAGA_BIN" cc "$TMP/small.sgr" --json --quiet
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
