#!/usr/bin/env bash
# cli_hep.sh - `saga hep`: generate a few small events, build their graphs, train briefly with
# every sampler (--json), resume from a checkpoint, evaluate it on other events, and the errors
# that name the file and line at fault.
set -euo pipefail
source "$(dirname "$0")/cli_common.bash"

# ---- generate: same seed, same bytes ------------------------------------------------------
expect 0 "$SAGA_BIN" hep generate -o "$TMP/ev" --events 6 --seed 4 --min-particles 100 \
    --max-particles 300 --json --quiet
[ "$(json_get 'j["events"]')" = 6 ] || fail "generate: $(json_last)"
[ -f "$TMP/ev/event000000006-truth.csv.gz" ] || fail "generate wrote no event000000006"
expect 0 "$SAGA_BIN" hep generate -o "$TMP/ev2" --events 2 --seed 4 --min-particles 100 \
    --max-particles 300 --quiet
cmp -s "$TMP/ev/event000000002-hits.csv.gz" "$TMP/ev2/event000000002-hits.csv.gz" ||
    fail "the same seed wrote different bytes"
# (sed reads to the end: head would make zcat die of SIGPIPE, which pipefail reports)
[ "$(zcat "$TMP/ev/event000000001-hits.csv.gz" | sed -n 1p)" = hit_id,x,y,z,volume_id,layer_id,module_id ] ||
    fail "hits header"

# ---- build --------------------------------------------------------------------------------
expect 0 "$SAGA_BIN" hep build --data "$TMP/ev" --json
for key in construction_efficiency construction_purity edges hits true_edges; do
    [ "$(json_get "'$key' in j")" = True ] || fail "build --json lacks $key: $(json_last)"
done
[ "$(json_get 'j["construction_efficiency"] > 0.95 and 0 < j["construction_purity"] < 1')" = True ] ||
    fail "construction: $(json_last)"
expect_err "construction efficiency"

# ---- train: every sampler, then resume ------------------------------------------------------
expect 0 "$SAGA_BIN" hep train --data "$TMP/ev" --epochs 2 --hidden 8 --iterations 2 \
    --batch-events 2 --sampler all --checkpoint "$TMP/hep.ckpt" --json --quiet
for key in edge_efficiency edge_purity auc track_efficiency peak_device_bytes epoch_seconds; do
    [ "$(json_get "'$key' in j")" = True ] || fail "train --json lacks $key: $(json_last)"
done
[ "$(json_get '[s["sampler"] for s in j["samplers"]]')" = "['random', 'sorted', 'balanced']" ] ||
    fail "samplers: $(json_last)"
[ "$(json_get 'all(s["peak_device_bytes"] > 0 and s["epoch_seconds"] > 0 for s in j["samplers"])')" = True ] ||
    fail "per-sampler figures: $(json_last)"
[ "$(json_get 'len(set(s["micro_batches"] for s in j["samplers"]))')" = 1 ] ||
    fail "the samplers make different numbers of micro-batches: $(json_last)"
[ "$(json_get 'j["train_events"], j["eval_events"], j["epochs"]')" = "5 1 2" ] ||
    fail "split: $(json_last)"
[ -f "$TMP/hep.ckpt" ] || fail "no checkpoint written"
expect 0 "$SAGA_BIN" hep train --data "$TMP/ev" --epochs 3 --hidden 8 --iterations 2 \
    --batch-events 2 --resume "$TMP/hep.ckpt" --checkpoint "$TMP/hep3.ckpt" --json --quiet
[ "$(json_get 'j["start_epoch"], j["epochs"]')" = "2 3" ] || fail "resume: $(json_last)"

# balanced bins by edges + 1.3 * hits: the budget is in those units
expect 0 "$SAGA_BIN" hep train --data "$TMP/ev" --epochs 1 --hidden 8 --iterations 1 \
    --batch-events 2 --hit-weight 1.3 --json --quiet
[ "$(json_get 'j["hit_weight"], j["samplers"][0]["sampler"], j["samplers"][0]["edge_budget"] > j["samplers"][0]["max_batch_edges"]')" = "1.3 balanced True" ] ||
    fail "--hit-weight: $(json_last)"

# ---- eval ---------------------------------------------------------------------------------
expect 0 "$SAGA_BIN" hep eval --data "$TMP/ev2" --checkpoint "$TMP/hep3.ckpt" --hidden 8 \
    --iterations 2 --json
[ "$(json_get 'j["checkpoint_epoch"], 0 <= j["auc"] <= 1, j["events"]')" = "3 True 2" ] ||
    fail "eval: $(json_last)"
expect 1 "$SAGA_BIN" hep eval --data "$TMP/ev2" --checkpoint "$TMP/hep3.ckpt" --hidden 9
expect_err "hep3.ckpt"

# ---- errors -------------------------------------------------------------------------------
expect 2 "$SAGA_BIN" hep
expect 2 "$SAGA_BIN" hep fly
expect_err "unknown subcommand 'fly'"
expect 2 "$SAGA_BIN" hep train --data "$TMP/ev" --sampler greedy
expect_err "--sampler must be"
expect 2 "$SAGA_BIN" hep build --data "$TMP/ev" --epochs 3
expect_err "--epochs does not apply to 'hep build'"
expect 2 "$SAGA_BIN" hep generate --events 2
expect_err "needs -o DIR"
expect 2 "$SAGA_BIN" hep eval --data "$TMP/ev2"
expect_err "needs --checkpoint"
expect 1 "$SAGA_BIN" hep build --data "$TMP/none"
expect_err "$TMP/none"
mkdir -p "$TMP/bad"
cp "$TMP/ev2/"event000000001-* "$TMP/bad/"
zcat "$TMP/ev2/event000000001-hits.csv.gz" | sed '4s/^\([0-9]*\),[^,]*,/\1,oops,/' \
    >"$TMP/bad/event000000001-hits.csv"
rm "$TMP/bad/event000000001-hits.csv.gz"
expect 1 "$SAGA_BIN" hep build --data "$TMP/bad"
expect_err "event000000001-hits.csv:4: expected a finite number in column 'x', found \"oops\""
zcat "$TMP/ev2/event000000001-truth.csv.gz" | cut -d, -f1,3- >"$TMP/bad/event000000001-truth.csv"
rm "$TMP/bad/event000000001-truth.csv.gz"
zcat "$TMP/ev2/event000000001-hits.csv.gz" >"$TMP/bad/event000000001-hits.csv"
expect 1 "$SAGA_BIN" hep build --data "$TMP/bad"
expect_err "event000000001-truth.csv:1: expected a column named 'particle_id'"

expect 0 "$SAGA_BIN" hep --help
expect_out "generate|build|train|eval"
finish
