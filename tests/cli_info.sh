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

# The loading options on an .sgr: applied to the graph it holds, with the counts of the text file
# loaded with them. email-Eu-core is directed, with self-loops; --undirected doubles its
# one-way edges to 32,770 arcs on either path.
for flags in "--undirected" "--self-loops drop" "--undirected --self-loops drop" \
    "--duplicates drop" "--undirected --duplicates keep" "--undirected --duplicates sum" \
    "--weights ignore"; do
    # shellcheck disable=SC2086 # the flags are words
    expect 0 "$SAGA_BIN" info --json $flags "$email"
    json_get "$all_counts" >"$TMP/flags.text"
    # shellcheck disable=SC2086
    expect 0 "$SAGA_BIN" info --json $flags "$TMP/email.sgr"
    json_get "$all_counts" >"$TMP/flags.sgr"
    cmp -s "$TMP/flags.text" "$TMP/flags.sgr" ||
        fail "email.sgr $flags: $(cat "$TMP/flags.sgr"), the text file gives $(cat "$TMP/flags.text")"
done
expect 0 "$SAGA_BIN" info --json --undirected "$TMP/email.sgr"
[ "$(json_get 'j["edges"], j["undirected"], j["dangling"]')" = "32770 True 0" ] ||
    fail "info --undirected email.sgr: $(json_last)"
expect 0 "$SAGA_BIN" info --undirected "$TMP/email.sgr"
expect_out "32,770 (both directions of each undirected edge)"
expect_out "built       undirected, self-loops kept, duplicates dropped"
# without options, the .sgr says how it was built: directed, as listed
expect 0 "$SAGA_BIN" info "$TMP/email.sgr"
expect_out "25,571 (directed)"
expect_out "built       directed, self-loops kept, duplicates kept"
# an option the graph already satisfies changes nothing
expect 0 "$SAGA_BIN" info --json --undirected "$TMP/karate.sgr"
[ "$(json_get 'j["edges"], j["undirected"]')" = "156 True" ] || fail "karate.sgr --undirected: $(json_last)"

# What the .sgr lost when it was made cannot be asked back: exit 1, naming the file, what it
# holds and what was asked.
expect 0 "$SAGA_BIN" convert --quiet --self-loops drop "$email" "$TMP/email-noloops.sgr"
expect 1 "$SAGA_BIN" info --self-loops keep "$TMP/email-noloops.sgr"
expect_err "saga: $TMP/email-noloops.sgr holds a directed graph (self-loops dropped"
expect_err "--self-loops keep cannot be applied"
expect 0 "$SAGA_BIN" info --json "$TMP/email-noloops.sgr" # the default: as it was built
[ "$(json_get 'j["edges"], j["self_loops"], j["self_loop_policy"]')" = "24929 0 drop" ] ||
    fail "email-noloops.sgr: $(json_last)"
expect 1 "$SAGA_BIN" info --duplicates keep "$TMP/karate.sgr"
expect_err "karate.sgr holds an undirected graph"
expect_err "--duplicates keep cannot be applied"
expect 1 "$SAGA_BIN" info --weights require "$TMP/email.sgr"
expect_err "email.sgr: weights are required"
printf '1 2 0.5\n1 2 1.5\n2 3 2\n' >"$TMP/w.txt"
expect 0 "$SAGA_BIN" convert --quiet --duplicates sum "$TMP/w.txt" "$TMP/w-sum.sgr"
expect 1 "$SAGA_BIN" info --duplicates drop "$TMP/w-sum.sgr"
expect_err "--duplicates drop cannot be applied: the weights of parallel edges were merged"
expect 0 "$SAGA_BIN" info --duplicates drop --weights ignore --json "$TMP/w-sum.sgr"
[ "$(json_get 'j["edges"], j["weighted"]')" = "2 False" ] || fail "w-sum.sgr: $(json_last)"

# A version 1 .sgr (no build record) still loads; options that depend on how it was built are
# refused with a message saying to convert it again, the others applied.
python3 - "$TMP/email.sgr" "$TMP/email-v1.sgr" <<'PY'
import sys, zlib
img = bytearray(open(sys.argv[1], "rb").read())
img[8:12] = (1).to_bytes(4, "little")
img[172:176] = bytes(4)
img[252:256] = zlib.crc32(bytes(img[:252])).to_bytes(4, "little")
open(sys.argv[2], "wb").write(img)
PY
expect 0 "$SAGA_BIN" info --json "$TMP/email-v1.sgr"
[ "$(json_get 'j["edges"], j["undirected"]')" = "25571 None" ] || fail "email-v1.sgr: $(json_last)"
expect 0 "$SAGA_BIN" info "$TMP/email-v1.sgr"
expect_out "not recorded"
expect 1 "$SAGA_BIN" info --undirected "$TMP/email-v1.sgr"
expect_err "email-v1.sgr: --undirected cannot be applied: the file does not record how its graph was built"
expect_err "format version 1"
expect_err "convert the source again"
expect 0 "$SAGA_BIN" info --json --self-loops drop "$TMP/email-v1.sgr"
[ "$(json_get 'j["edges"], j["self_loops"]')" = "24929 0" ] || fail "email-v1.sgr --self-loops drop: $(json_last)"

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
