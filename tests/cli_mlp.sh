#!/usr/bin/env bash
# cli_mlp.sh - `saga mlp`: a network 8x its device budget trains streamed to the losses of the
# in-memory run, within the budget; AdamA and row tiles run; a synchronous two-stage pipeline
# gives the same losses and PipeDream-2BW over three stages learns, each stage within its budget;
# bad options and a budget too small fail with a clear message.
set -euo pipefail
source "$(dirname "$0")/cli_common.bash"

small=(--layers 3 --width 96 --outputs 8 --batch 32 --micro-batches 2 --steps 6 --seed 4)

# The default budget is an eighth of the parameters and moments: streamed, within the budget.
expect 0 "$SAGA_BIN" mlp "${small[@]}" --stats --json --quiet
json_get 'j["streamed"] and j["state_bytes"] >= 8 * j["budget_bytes"] and 0 < j["peak_device_bytes"] <= j["budget_bytes"] and min(j["tiles"][:2]) > 1' |
    grep -qx True || fail "not streamed within an eighth of the state"
json_get 'j["h2d_bytes_per_step"] > j["state_bytes"] / 3 and 0 <= j["overlap"] <= 1' |
    grep -qx True || fail "streamed run reports implausible bytes or overlap"
json_last >"$TMP/streamed.json"

# In memory: one tile per layer, the same losses to f32 rounding.
expect 0 "$SAGA_BIN" mlp "${small[@]}" --device-mem 1G --json --quiet
json_get 'not j["streamed"] and j["tiles"] == [1, 1, 1]' | grep -qx True ||
    fail "in-memory run is not one tile per layer"
json_last >"$TMP/memory.json"
python3 - "$TMP/streamed.json" "$TMP/memory.json" <<'PY' || fail "streamed losses differ from in memory"
import json, os, sys
sys.path.insert(0, os.path.join(os.environ["SAGA_SRC_DIR"], "tests"))
import bounds  # tests/bounds.py: bounds from the arithmetic
a = json.load(open(sys.argv[1]))["losses"]
b = json.load(open(sys.argv[2]))["losses"]
assert len(a) == len(b) == 6
# 3 layers of width 96 to 8 outputs, 32 rows a step, in tiles or stages that add in other orders
tol = bounds.mlp_losses([96, 96, 96, 8], 32, 6)
for x, y, t in zip(a, b, tol):
    assert abs(x - y) <= t * abs(y), (x, y, t)
PY

# AdamA and row tiles run and learn; the terminal text names the plan.
expect 0 "$SAGA_BIN" mlp "${small[@]}" --optimizer adama --split rows --steps 12 --lr 0.003
expect_out "plan: streamed: row tiles"
expect_out "loss:"

# Pipelines: two synchronous stages, each streamed under its own budget, train as one stage does;
# PipeDream-2BW over three stages learns, every stage within its budget.
expect 0 "$SAGA_BIN" mlp "${small[@]}" --stages 2 --device-mem 32K --stats --json --quiet
json_get 'j["stages"] == 2 and j["pipeline"] == "sync" and j["streamed"] and len(j["stage_peak_bytes"]) == 2 and max(j["stage_peak_bytes"]) <= j["budget_bytes"] and j["stage_layers"][0] == 0 and j["stage_layers"][-1] == 3' |
    grep -qx True || fail "two-stage pipeline not streamed within each stage's budget"
json_last >"$TMP/pipe.json"
python3 - "$TMP/pipe.json" "$TMP/memory.json" <<'PY' || fail "pipelined losses differ from one stage"
import json, os, sys
sys.path.insert(0, os.path.join(os.environ["SAGA_SRC_DIR"], "tests"))
import bounds  # tests/bounds.py: bounds from the arithmetic
a = json.load(open(sys.argv[1]))["losses"]
b = json.load(open(sys.argv[2]))["losses"]
assert len(a) == len(b) == 6
# 3 layers of width 96 to 8 outputs, 32 rows a step, in tiles or stages that add in other orders
tol = bounds.mlp_losses([96, 96, 96, 8], 32, 6)
for x, y, t in zip(a, b, tol):
    assert abs(x - y) <= t * abs(y), (x, y, t)
PY
expect 0 "$SAGA_BIN" mlp "${small[@]}" --stages 3 --pipeline 2bw --device-mem 32K --steps 12 --lr 0.003 --stats --json --quiet
json_get 'j["pipeline"] == "2bw" and j["final_loss"] < j["first_loss"] and max(j["stage_peak_bytes"]) <= j["budget_bytes"] and len(j["stage_idle_share"]) == 3' |
    grep -qx True || fail "2BW pipeline does not learn within its budgets"
expect 0 "$SAGA_BIN" mlp "${small[@]}" --stages 3 --pipeline 2bw --device-mem 32K --stats
expect_out "PipeDream-2BW"
expect_out "stage 2 (cpu): layer"

# Errors.
expect 2 "$SAGA_BIN" mlp --batch 32 --micro-batches 3
expect_err "does not divide"
expect 2 "$SAGA_BIN" mlp --optimizer sgd
expect_err "adam or adama"
expect 2 "$SAGA_BIN" mlp --layers 3 --stages 4
expect_err "more stages than the 3 layers"
expect 2 "$SAGA_BIN" mlp --pipeline gpipe
expect_err "sync or 2bw"
expect 2 "$SAGA_BIN" mlp --stages 3 --pipeline 2bw --micro-batches 1
expect_err "needs --micro-batches >= 2"
expect 1 "$SAGA_BIN" mlp "${small[@]}" --device-mem 4K
expect_err "smallest cap that works is"
expect 0 "$SAGA_BIN" mlp --help
expect_out "teacher"
finish
