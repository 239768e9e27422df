#!/usr/bin/env bash
# cli_messages.sh - messages that say what is wrong and what to do: commas in a text file, a UTF-8
# byte-order mark, a GPU that was asked for and is missing.
set -euo pipefail
source "$(dirname "$0")/cli_common.bash"

printf '0 1\n1 2\n2 0\n2 3\n' >"$TMP/small.txt"

# A comma-separated file: the error says that commas are not separators.
printf '0,1\n1,2\n' >"$TMP/commas.csv"
expect 1 "$SAGA_BIN" info "$TMP/commas.csv"
expect_err "commas.csv:1:"
expect_err "commas are not separators"
printf '0 1 0.5\n1 2 1,5\n' >"$TMP/comma-weight.txt"
expect 1 "$SAGA_BIN" info "$TMP/comma-weight.txt"
expect_err "comma-weight.txt:2:"
expect_err "commas are not separators"
printf '%%%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1,2\n2 3\n' >"$TMP/commas.mtx"
expect 1 "$SAGA_BIN" info "$TMP/commas.mtx"
expect_err "commas are not separators"
# A UTF-8 byte-order mark is named (saga does not skip it: the file is not what saga reads).
printf '\357\273\2770 1\n1 2\n' >"$TMP/bom.txt"
expect 1 "$SAGA_BIN" info "$TMP/bom.txt"
expect_err "bom.txt:1:"
expect_err "UTF-8 byte-order mark"
printf '\357\273\277# edges\n0 1\n' >"$TMP/bom-comment.txt"
expect 1 "$SAGA_BIN" pagerank "$TMP/bom-comment.txt"
expect_err "UTF-8 byte-order mark"
# ... in the files of a data set too
expect 0 "$SAGA_BIN" generate citation --vertices 100 --classes 2 --features 20 -o "$TMP/kc" -q
cp -r "$TMP/kc" "$TMP/kc-commas"
awk '{print NR - 1 "," $1}' "$TMP/kc/labels.txt" >"$TMP/kc-commas/labels.txt"
expect 1 "$SAGA_BIN" gcn --data "$TMP/kc-commas" --epochs 1 --device cpu
expect_err "labels.txt:1:"
expect_err "commas are not separators"
cp -r "$TMP/kc" "$TMP/kc-bom"
{ printf '\357\273\277'; cat "$TMP/kc/labels.txt"; } >"$TMP/kc-bom/labels.txt"
expect 1 "$SAGA_BIN" gcn --data "$TMP/kc-bom" --epochs 1 --device cpu
expect_err "labels.txt:1:"
expect_err "UTF-8 byte-order mark"
# a device budget smaller than the model: said as such, with the backend's words after it
expect 1 "$SAGA_BIN" gcn --data "$TMP/kc" --epochs 1 --device cpu --hidden 64 --device-mem 8K
expect_err "GCN: the model does not fit in the device budget of 8.0 KiB"
expect_err "stay on the device whole"
expect_err "device memory budget exceeded"

# The "no usable GPU" warning only when a GPU was asked for (--device auto, SAGA_DEVICE=auto);
# auto as a mere default says it at the info level. Without a GPU, --device cuda says how to run
# on the CPU.
run "$SAGA_BIN" pagerank "$TMP/small.txt" --top 0 --device cuda
if [ "$RC" -ne 0 ]; then # no GPU here
    expect 0 env -u SAGA_DEVICE "$SAGA_BIN" pagerank "$TMP/small.txt" --top 0
    ! grep -q "no usable GPU" "$ERR" || fail "the default device warned: $(cat "$ERR")"
    expect 0 env -u SAGA_DEVICE SAGA_LOG=info "$SAGA_BIN" pagerank "$TMP/small.txt" --top 0
    expect_err "saga: info: no usable GPU"
    expect 0 env -u SAGA_DEVICE "$SAGA_BIN" pagerank "$TMP/small.txt" --top 0 --device auto
    expect_err "saga: warning: no usable GPU"
    expect 0 env SAGA_DEVICE=auto "$SAGA_BIN" pagerank "$TMP/small.txt" --top 0
    expect_err "saga: warning: no usable GPU"
    expect 1 "$SAGA_BIN" pagerank "$TMP/small.txt" --device cuda
    expect_err "--device cpu"
    expect 1 "$SAGA_BIN" cc "$TMP/small.txt" --device cuda:0
    expect_err "--device cpu"
    expect 1 "$SAGA_BIN" mlp --layers 2 --width 8 --steps 1 --device cuda
    expect_err "--device cpu"
    expect 1 "$SAGA_BIN" pagerank "$TMP/small.txt" --device cuda --json
    [ "$(json_get '"--device cpu" in j["error"], j["exit_code"]')" = "True 1" ] ||
        fail "--device cuda --json: $(json_last)"
fi

finish
