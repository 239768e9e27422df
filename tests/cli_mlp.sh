#!/usr/bin/env bash
# cli_mlp.sh - `saga mlp`: a network 8x its device budget trains streamed to the losses of the
# in-memory run, within the budget; AdamA and row tiles run; bad options and a budget too small
# fail with a clear message.
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
import json, sys
a = json.load(open(sys.argv[1]))["losses"]
b = json.load(open(sys.argv[2]))["losses"]
assert len(a) == len(b) == 6
for x, y in zip(a, b):
    assert abs(x - y) <= 1e-5 * abs(y), (x, y)
PY

# AdamA and row tiles run and learn; the terminal text names the plan.
expect 0 "$SAGA_BIN" mlp "${small[@]}" --optimizer adama --split rows --steps 12 --lr 0.003
expect_out "plan: streamed: row tiles"
expect_out "loss:"

# Errors.
expect 2 "$SAGA_BIN" mlp --batch 32 --micro-batches 3
expect_err "does not divide"
expect 2 "$SAGA_BIN" mlp --optimizer sgd
expect_err "adam or adama"
expect 1 "$SAGA_BIN" mlp "${small[@]}" --device-mem 4K
expect_err "smallest cap that works is"
expect 0 "$SAGA_BIN" mlp --help
expect_out "teacher"
finish
