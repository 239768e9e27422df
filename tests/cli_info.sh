#!/usr/bin/env bash
# cli_info.sh - `saga info --json` counts on the real datasets, the same counts from their .sgr
# conversions, and a clear error for a truncated .sgr.
set -euo pipefail
source "$(dirname "$0")/cli_common.bash"

dataset karate karate/edges.txt
dataset email email-Eu-core/email-Eu-core.txt.gz
dataset grqc ca-GrQc/ca-GrQc.txt.gz
dataset slashdot soc-Slashdot0902/soc-Slashdot0902.txt.gz

counts='j["vertices"], j["edges"], j["self_loops"], j["duplicates"], j["dangling"], j["isolated"]'
all_counts='{k: j[k] for k in ("vertices", "edges", "weighted", "self_loops", "duplicates",
    "isolated", "dangling", "in_degree", "out_degree")}'

# check NAME "EXPECTED COUNTS" [info options] FILE
check() {
    local name=$1 want=$2
    shift 2
    expect 0 "$SAGA_BIN" info --json "$@"
    local got
    got=$(json_get "$counts")
    [ "$got" = "$want" ] || fail "$name: vertices, edges, self-loops, duplicates, dangling, isolated = $got, expected $want"
    json_get "$all_counts" >"$TMP/$name.counts"

    # The .sgr conversion holds the graph as built: info on it gives the same counts.
    expect 0 "$SAGA_BIN" convert --quiet "$@" "$TMP/$name.sgr"
    expect 0 "$SAGA_BIN" info --json "$TMP/$name.sgr"
    [ "$(json_get 'j["format"]')" = sgr ] || fail "$name.sgr: format $(json_get 'j["format"]')"
    json_get "$all_counts" >"$TMP/$name.sgr.counts"
    cmp -s "$TMP/$name.counts" "$TMP/$name.sgr.counts" ||
        fail "$name: .sgr counts $(cat "$TMP/$name.sgr.counts") differ from $(cat "$TMP/$name.counts")"
}

# Counts from each dataset's README.
check karate "34 156 0 0 0 0" --undirected "$karate"
check email "1005 25571 642 0 137 0" "$email"
check grqc "5242 28980 12 0 0 0" "$grqc"
check slashdot "82168 948464 78303 0 3727 0" "$slashdot"

# Degrees: karate's hubs are 33 (17 neighbours) and 0 (16); every member has at least one.
expect 0 "$SAGA_BIN" info --json --undirected "$karate"
[ "$(json_get 'j["in_degree"]["min"], j["in_degree"]["max"], j["out_degree"]["max"], j["weighted"]')" = \
    "1 17 17 False" ] || fail "karate degrees: $(json_last)"
# Dropping email-Eu-core's self-loops removes exactly the 642.
expect 0 "$SAGA_BIN" info --json --self-loops drop "$email"
[ "$(json_get 'j["edges"], j["self_loops"]')" = "24929 0" ] || fail "email --self-loops drop: $(json_last)"
# Human output names the format and the counts.
expect 0 "$SAGA_BIN" info "$grqc"
expect_out "edgelist"
expect_out "5,242"
expect_out "28,980"

# A truncated .sgr is an error naming the file, not a crash.
size=$(stat -c %s "$TMP/email.sgr")
head -c $((size / 2)) "$TMP/email.sgr" >"$TMP/truncated.sgr"
expect 1 "$SAGA_BIN" info "$TMP/truncated.sgr"
expect_err "saga: "
expect_err "truncated.sgr"
head -c 100 "$TMP/email.sgr" >"$TMP/stub.sgr"
expect 1 "$SAGA_BIN" info "$TMP/stub.sgr"
expect_err "stub.sgr"
# A flipped byte in the arrays fails its checksum.
cp "$TMP/email.sgr" "$TMP/flipped.sgr"
python3 - "$TMP/flipped.sgr" "$((size - 100))" <<'PY'
import sys
path, at = sys.argv[1], int(sys.argv[2])
with open(path, "r+b") as f:
    f.seek(at)
    b = f.read(1)[0]
    f.seek(at)
    f.write(bytes([b ^ 0x55]))
PY
expect 1 "$SAGA_BIN" info "$TMP/flipped.sgr"
expect_err "flipped.sgr"

finish
