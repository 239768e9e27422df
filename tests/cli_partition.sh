#!/usr/bin/env bash
# cli_partition.sh - `saga partition`: the parts written by --out checked against the edge list
# (every vertex once, parts in range, the edge cut recounted here), METIS against random,
# --json, and bad input.
set -euo pipefail
source "$(dirname "$0")/cli_common.bash"

dataset karate karate/edges.txt
dataset grqc ca-GrQc/ca-GrQc.txt.gz

# verify EDGES PARTS K: prints the cut counted over the edge list's lines (directed edges as
# listed) after checking that PARTS names every vertex of EDGES once with a part in 0..K-1.
verify() {
    python3 - "$1" "$2" "$3" <<'PY'
import gzip, sys
path, parts, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
f = gzip.open(path, "rt") if path.endswith(".gz") else open(path)
edges, ids = [], set()
for line in f:
    t = line.split()
    if not t or t[0][0] in "#%":
        continue
    u, v = int(t[0]), int(t[1])
    edges.append((u, v))
    ids.update((u, v))
part = {}
for line in open(parts):
    i, p = map(int, line.split())
    if i in part:
        sys.exit(f"vertex {i} listed twice")
    if not 0 <= p < k:
        sys.exit(f"vertex {i} in part {p}, outside 0..{k - 1}")
    part[i] = p
if set(part) != ids:
    sys.exit(f"{len(part)} vertices written, {len(ids)} in the file")
print(sum(part[u] != part[v] for u, v in edges))
PY
}

json_field() { json_last | python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }

check() { # check NAME FILE K METHOD
    expect 0 "$SAGA_BIN" partition "$2" -k "$3" --method "$4" --out "$TMP/$1.parts" --json --quiet
    local want got
    want=$(verify "$2" "$TMP/$1.parts" "$3") || { fail "$1 $4: $want"; return; }
    got=$(json_field edge_cut)
    [ "$got" = "$want" ] || fail "$1 $4 k=$3: edge cut $got, counted $want"
    [ "$(json_field parts)" = "$3" ] || fail "$1 $4: --json does not report $3 parts"
    echo "$got"
}

for m in metis contiguous random; do
    check karate "$karate" 2 "$m" >/dev/null
done
metis=$(check grqc "$grqc" 8 metis)
random=$(check grqc "$grqc" 8 random)
check grqc "$grqc" 8 contiguous >/dev/null
[ "$metis" -lt $((random / 3)) ] || fail "ca-GrQc: METIS cut $metis not well below random's $random"

# The human output, and the same seed giving the same parts.
expect 0 "$SAGA_BIN" partition "$grqc" -k 4 --seed 9 --out "$TMP/a.parts"
expect_out "edge cut:"
expect_out "balance:"
expect_out "partition: metis, 4 parts"
expect 0 "$SAGA_BIN" partition "$grqc" --parts 4 --seed 9 --out "$TMP/b.parts" --quiet
cmp -s "$TMP/a.parts" "$TMP/b.parts" || fail "the same seed gave different parts"

# Errors: k missing, out of range or larger than the graph; a bad method; a missing file.
expect 2 "$SAGA_BIN" partition "$karate"
expect_err "--parts K (or -k K) is required"
expect 2 "$SAGA_BIN" partition "$karate" -k 0
expect 2 "$SAGA_BIN" partition "$karate" -k 3 --method spectral
expect_err "spectral"
expect 1 "$SAGA_BIN" partition "$karate" -k 35
expect_err "35 parts asked of a graph with 34 vertices"
expect 1 "$SAGA_BIN" partition "$TMP/missing.txt" -k 2
expect_err "missing.txt"
expect 0 "$SAGA_BIN" partition --help
expect_out "METIS"
finish
