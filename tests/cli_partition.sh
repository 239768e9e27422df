#!/usr/bin/env bash
# cli_partition.sh - `saga partition`: the parts written by --out checked against the edge list
# (every vertex once, parts in range, the edge cut recounted here), METIS against random,
# --json, and bad input; --shards of a graph file and of a data directory, --check on them and
# on damaged ones, the streaming partitioner under --metis-limit, and --shards' usage errors.
set -euo pipefail
source "$(dirname "$0")/cli_common.bash"

dataset karate karate/edges.txt
dataset grqc ca-GrQc/ca-GrQc.txt.gz
dataset cora_labels cora/labels.txt
cora=$(dirname "$cora_labels")

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
expect_out "--shards"

# Shards of a graph file: every vertex owned once, the check passing, --json.
expect 0 "$SAGA_BIN" partition "$grqc" --shards 3 -o "$TMP/grqc.shards" --json
[ "$(json_get 'j["shards"]')" = 3 ] || fail "--shards --json: shards"
[ "$(json_get 'j["method"]')" = metis ] || fail "--shards --json: method"
grep -q '^source .*ca-GrQc.txt.gz$' "$TMP/grqc.shards/manifest.txt" || fail "manifest: no source"
python3 - "$TMP/grqc.shards/manifest.txt" <<'PY' || fail "manifest: shard rows do not cover the graph"
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.startswith("shard ")]
n = int([l.split()[1] for l in open(sys.argv[1]) if l.startswith("vertices ")][0])
at = 0
for r in rows:
    assert int(r[3]) == at and int(r[4]) > at, r
    at = int(r[4])
assert at == n and len(rows) == 3
PY
expect 0 "$SAGA_BIN" partition --check "$TMP/grqc.shards"
expect_out "3 shards"
expect_out "verified"

# Of a data directory; damaged, then refused.
expect 0 "$SAGA_BIN" partition --data "$cora" --shards 4 -o "$TMP/cora.shards"
expect_out "wrote 4 shards"
grep -q '^features 1433 ' "$TMP/cora.shards/manifest.txt" || fail "manifest: features"
grep -q '^split 140 500 1000$' "$TMP/cora.shards/manifest.txt" || fail "manifest: split"
expect 0 "$SAGA_BIN" partition --check "$TMP/cora.shards" --json
[ "$(json_get 'j["ok"]')" = True ] || fail "--check --json"
printf '\xff' | dd of="$TMP/cora.shards/shard-2.bin" bs=1 seek=8200 conv=notrunc status=none
expect 1 "$SAGA_BIN" partition --check "$TMP/cora.shards"
expect_err "shard-2.bin"
expect_err "checksum mismatch"
rm "$TMP/cora.shards/manifest.txt"
expect 1 "$SAGA_BIN" partition --check "$TMP/cora.shards"
expect_err "did not finish"

# METIS over its limit: fennel, with a warning, recorded in the manifest.
expect 0 "$SAGA_BIN" partition "$karate" --shards 2 -o "$TMP/k.shards" --metis-limit 10
expect_err "fennel"
grep -q '^method fennel$' "$TMP/k.shards/manifest.txt" || fail "manifest: not fennel"
expect 0 "$SAGA_BIN" partition "$karate" -k 2 --partition fennel
expect_out "partition: fennel, 2 parts"

# Usage errors.
expect 2 "$SAGA_BIN" partition "$karate" --shards 2
expect_err "-o DIR"
expect 2 "$SAGA_BIN" partition "$karate" --data "$cora" --shards 2 -o "$TMP/x"
expect_err "one of them"
expect 2 "$SAGA_BIN" partition --shards 2 -o "$TMP/x"
expect 2 "$SAGA_BIN" partition "$karate" --shards 2 -k 4 -o "$TMP/x"
expect_err "drop --parts"
expect 2 "$SAGA_BIN" partition "$karate" --check "$TMP/k.shards"
expect_err "--check DIR takes nothing else"
expect 2 "$SAGA_BIN" partition "$karate" -k 2 --data "$cora"
expect_err "go with --shards"
expect 1 "$SAGA_BIN" partition "$karate" --shards 35 -o "$TMP/x"
expect_err "35 shards"
finish
