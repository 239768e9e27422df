#!/usr/bin/env bash
# cli_cudasim.sh - the apps on `--device cuda` under the CUDA simulator against `--device cpu`:
# GCN in memory (the same losses within tests/bounds.py's bound) and streamed under a quarter of its peak (the
# scheduler's asynchronous copies on CUDA streams; the simulator's own peak within the budget),
# PageRank streamed (the same scores within tests/bounds.py's bound), a two-stage dense pipeline on cuda:0 and cuda:1,
# and a short HEP training. Run by ctest with the simulator in the environment (label cudasim).
set -euo pipefail
source "$(dirname "$0")/../cli_common.bash"
: "${SAGA_CUDA_MODULE:?SAGA_CUDA_MODULE must name the simulator module}"
export SAGA_CUDASIM_DEVICES=${SAGA_CUDASIM_DEVICES:-2}

# same_losses A B VERTICES FEATURES CLASSES [HIDDEN [STEPS]]: the "loss" fields of two --log files
# of a GCN (HIDDEN units, default 16) on data of that shape agree within tests/bounds.py's bound
# for each epoch (the GPU and the CPU, or streamed parts, add in other orders); STEPS optimizer
# steps an epoch (mini-batches; default 1): an epoch's bound is that after its last step.
same_losses() {
    python3 - "$@" <<'PY'
import json, os, sys
sys.path.insert(0, os.path.join(os.environ["SAGA_SRC_DIR"], "tests"))
import bounds
a = [json.loads(l)["loss"] for l in open(sys.argv[1])]
b = [json.loads(l)["loss"] for l in open(sys.argv[2])]
n, f, c = (int(x) for x in sys.argv[3:6])
h = int(sys.argv[6]) if len(sys.argv) > 6 else 16
k = int(sys.argv[7]) if len(sys.argv) > 7 else 1
tol = bounds.gcn_losses(n, f, h, c, len(b) * k)[k - 1::k]
assert len(a) == len(b) > 0, (len(a), len(b))
for i, (x, y, t) in enumerate(zip(a, b, tol)):
    assert abs(x - y) <= t * abs(y), ("epoch", i + 1, x, y, t)
PY
}

# sim_peak FILE: the largest peak the simulator wrote for device 0 (SAGA_CUDASIM_STATS).
sim_peak() {
    awk '$1 == "device" && $2 == 0 { if ($4 > p) p = $4 } END { print p + 0 }' "$1"
}

# counted NAME WAITS[/DRAINS] FNS CMD...: CMD runs with the simulator counting one profiler window
# (its --profile-* option) into one JSON line; in it kernels ran, no device or pinned memory was
# allocated or freed, at most FNS host functions ran, and the host waited at most WAITS times
# (the window's close included), of which at most DRAINS (default WAITS) left the stream waited
# for with nothing queued (the simulator's drain_waits). Prints the line.
counted() {
    local name=$1 waits=$2 fns=$3
    shift 3
    rm -f "$TMP/counts"
    expect 0 env SAGA_CUDASIM_STATS="$TMP/counts" "$@"
    local windows line
    windows=$(grep -c '^{"window"' "$TMP/counts" || true)
    if [ "$windows" != 1 ]; then
        fail "$name: $windows windows counted, expected 1"
        return
    fi
    line=$(grep '^{"window"' "$TMP/counts")
    echo "$name: $line"
    python3 - "$line" "$waits" "$fns" <<'PY' || fail "$name: counts $line"
import json, sys
w, fns = json.loads(sys.argv[1]), int(sys.argv[3])
waits, _, drains = sys.argv[2].partition("/")
waits, drains = int(waits), int(drains or waits)
assert w["kernels"] > 0, w
assert w["device_allocs"] == 0 and w["device_frees"] == 0, w
assert w["pinned_allocs"] == 0 and w["pinned_frees"] == 0, w
assert w["host_waits"] <= waits and w["host_fns"] <= fns, w
assert w["drain_waits"] <= drains, w
PY
}

# ---- GCN ------------------------------------------------------------------------------------
expect 0 "$SAGA_BIN" generate citation --quiet --vertices 800 --classes 4 --degree 5 --features 80 \
    --seed 2 -o "$TMP/cit"
expect 0 "$SAGA_BIN" gcn --data "$TMP/cit" --epochs 15 --json --quiet --device cpu --log "$TMP/cpu.jsonl"
expect 0 "$SAGA_BIN" gcn --data "$TMP/cit" --epochs 15 --json --quiet --stats --device cuda \
    --log "$TMP/cuda.jsonl"
expect_out '"device":"cuda:0 (saga cudasim)"'
same_losses "$TMP/cuda.jsonl" "$TMP/cpu.jsonl" 800 80 4 || fail "gcn: cuda losses differ from the cpu's"
budget=$(($(json_get 'j["peak_device_bytes"]') / 4))

# gcn_streamed NAME BUDGET COND ARGS...: GCN on the simulated device under BUDGET streams in
# several parts (COND: a further test of the JSON object j), with the CPU's losses, and the
# simulator's own peak of allocations stays within BUDGET
gcn_streamed() {
    local name=$1 budget=$2 cond=$3
    shift 3
    rm -f "$TMP/stats"
    expect 0 env SAGA_CUDASIM_STATS="$TMP/stats" "$SAGA_BIN" gcn --data "$TMP/cit" --epochs 15 \
        --json --quiet --stats --device cuda --device-mem "$budget" --log "$TMP/str.jsonl" "$@"
    json_get "j['streamed'] and j['parts'] > 1 and j['peak_device_bytes'] <= $budget and $cond" |
        grep -qx True || fail "gcn cuda --device-mem $budget ($name): not streamed as expected"
    same_losses "$TMP/str.jsonl" "$TMP/cpu.jsonl" 800 80 4 || fail "gcn cuda streamed ($name): losses differ"
    local peak
    peak=$(sim_peak "$TMP/stats")
    [ "$peak" -gt 0 ] && [ "$peak" -le "$budget" ] ||
        fail "gcn cuda streamed ($name): the device allocated $peak bytes at its peak, over the budget $budget"
}
# the copies and the compute's waits timed by events on the streams: an overlap measured, not 0
timed="0 < j['h2d_seconds'] <= j['copy_seconds'] and 0 <= j['wait_seconds'] and 0 <= j['overlap'] <= 1 and (j['overlap'] > 0 or j['wait_seconds'] >= j['copy_seconds'])"
for saved in recompute offload; do
    gcn_streamed "$saved" "$budget" "j['h2d_bytes'] > 0 and $timed" --saved "$saved"
done
# a budget that leaves room for the second aggregation's input to stay whole on the device: its
# halos are gathered and its halo gradients added there (gather_rows, scatter_add_rows)
gcn_streamed resident $((budget * 2)) "j['resident_bytes'] > 0"
# three quarters of the peak: the first aggregation's input stays whole too, and training runs
# the stages from it on in one step over the rows the loss reads (the tail), adding into that
# input's whole gradient on the device
gcn_streamed tail $((budget * 3)) "all(r < j['vertices'] for r in j['stage_rows'][1:])" --stream
# what epochs 3 and 4 ask of the device (--profile-epochs: cudaProfilerStart/Stop), counted by
# the simulator in one window: kernels ran, and neither in memory (the caching allocator) nor
# streamed under a budget (its arena) did a device allocation or free, nor a pinned one. In
# memory the host waits twice an epoch and never drains the device: after queueing epoch e's
# training pass and optimizer step it reads epoch e - 1's evaluation (its rows, queued by
# saga_net_forward_rows_queue before them), then queues e's evaluation and reads e's loss (an
# event after its training pass, before the step and the evaluation), and drains it once, to close
# the window. Streamed, it waits once an epoch, at the end of the evaluation, which covers the
# training pass queued before it (its loss, and the events that time the epoch, are read then),
# and once to close the window. No host function ran: streamed, the backend gathers and adds the
# host rows of halos with kernels, and memory wanted while loads are in flight is taken from them
# without waiting. Also at seven eighths of the quarter, where the budget's pressure takes blocks
# back
for mode in memory streamed tight; do
    flags=()
    waits=3
    [ "$mode" = memory ] && waits=5/1
    [ "$mode" = streamed ] && flags=(--device-mem "$budget" --stream)
    [ "$mode" = tight ] && flags=(--device-mem $((budget * 7 / 8)) --stream)
    counted "gcn on cuda, $mode, epochs 3-4" $waits 0 "$SAGA_BIN" gcn --data "$TMP/cit" --epochs 5 \
        --quiet --device cuda --profile-epochs 3:4 "${flags[@]}"
    if [ "$mode" != memory ]; then
        python3 -c 'import json, sys; assert json.loads(sys.argv[1])["h2d_bytes"] > 0' \
            "$(grep '^{"window"' "$TMP/counts")" || fail "gcn $mode: nothing crossed host -> device"
    fi
done
# Early stopping: each epoch's parameters, copied to pinned host memory after its step, add no
# wait (the copy has ended when the epoch's evaluation is read); training ends P epochs after the
# best validation accuracy, and the final model, its checkpoint too, is that epoch's, in memory
# and streamed
counted "gcn on cuda, memory, early stopping, epochs 3-4" 5/1 0 "$SAGA_BIN" gcn --data "$TMP/cit" \
    --epochs 5 --quiet --device cuda --profile-epochs 3:4 --early-stop 100
for mode in memory streamed; do
    flags=()
    [ "$mode" = streamed ] && flags=(--device-mem "$budget" --stream)
    expect 0 "$SAGA_BIN" gcn --data "$TMP/cit" --epochs 40 --early-stop 5 --json --quiet --device cuda \
        --log "$TMP/es.jsonl" --checkpoint "$TMP/es.ckpt" "${flags[@]}"
    tail -n 1 "$OUT" >"$TMP/es.json"
    python3 "$SAGA_SRC_DIR/tests/early_stop.py" "$TMP/es.jsonl" "$TMP/es.json" 5 40 ||
        fail "gcn cuda --early-stop 5 ($mode): $(json_last)"
    sel=$(json_get 'j["epochs"], j["train_accuracy"], j["val_accuracy"], j["test_accuracy"]')
    expect 0 "$SAGA_BIN" gcn --data "$TMP/cit" --epochs "${sel%% *}" --resume "$TMP/es.ckpt" --json \
        --quiet --device cuda "${flags[@]}"
    [ "$(json_get 'j["epochs"], j["train_accuracy"], j["val_accuracy"], j["test_accuracy"]')" = "$sel" ] ||
        fail "gcn cuda --early-stop ($mode): the checkpoint is not the selected model: $(json_last)"
done
# --graphs: in memory, each epoch's training pass and evaluation are recorded as graphs and
# launched, one launch each in epochs 3 and 4 (every kernel of the window run by them), with the
# waits as before; the model they train is the one without, to the bit (its checkpoint), as are
# the loss and accuracies
for g in "" --graphs; do
    counted "gcn on cuda, memory${g:+, graphs}, epochs 3-4" 5/1 0 "$SAGA_BIN" gcn --data "$TMP/cit" \
        --epochs 5 --quiet --device cuda --profile-epochs 3:4 --json \
        --checkpoint "$TMP/gcn${g}.ckpt" $g >"$TMP/graphs.window"
    python3 - "$(grep '^{"window"' "$TMP/counts")" "${g:-none}" <<'PY' || fail "gcn --graphs: counts"
import json, sys
w, g = json.loads(sys.argv[1]), sys.argv[2]
if g == "none":
    assert w["graph_launches"] == 0, w
else:
    assert w["graph_launches"] == 4 and w["graph_nodes"] >= w["kernels"], w
PY
    json_last | python3 -c 'import json, sys; j = json.loads(sys.stdin.read())
print(j["loss"], j["train_accuracy"], j["val_accuracy"], j["test_accuracy"], j["graph"])' \
        >"$TMP/gcn${g}.result"
done
cmp -s "$TMP/gcn.ckpt" "$TMP/gcn--graphs.ckpt" || fail "gcn --graphs: another model than without"
[ "$(cut -d' ' -f1-4 "$TMP/gcn.result")" = "$(cut -d' ' -f1-4 "$TMP/gcn--graphs.result")" ] ||
    fail "gcn --graphs: $(cat "$TMP/gcn--graphs.result") against $(cat "$TMP/gcn.result")"
[ "$(cut -d' ' -f5 "$TMP/gcn--graphs.result")" = True ] || fail "gcn --graphs: no graph launched"
# the GAT and GraphSAGE example (examples/gnn), in memory and streamed by parts: the same, one
# wait an epoch (its training pass queued, its loss read after the evaluation's wait); in memory
# with --graphs, each pass one launch, and the same last loss and accuracies to the bit
if [ -n "${SAGA_EXAMPLE_GNN:-}" ]; then
    for model in gat sage; do
        for flags in "" --stream --graphs; do
            counted "example $model on cuda${flags:+, ${flags#--}}, epochs 3-4" 3 0 \
                "$SAGA_EXAMPLE_GNN" --model "$model" --data "$TMP/cit" --epochs 5 --quiet \
                --device cuda --profile-epochs 3:4 $flags >"$TMP/example${flags}.window"
            python3 -c 'import json, sys
w = json.loads(sys.argv[1])
assert w["graph_launches"] == (4 if sys.argv[2] == "--graphs" else 0), w' \
                "$(grep '^{"window"' "$TMP/counts")" "$flags" ||
                fail "example $model${flags:+ $flags}: graph launches"
            sed -e 's/ graph=[01]$//' "$OUT" >"$TMP/example-$model${flags}.result"
        done
        cmp -s "$TMP/example-$model.result" "$TMP/example-$model--graphs.result" ||
            fail "example $model --graphs: $(cat "$TMP/example-$model--graphs.result") against" \
                "$(cat "$TMP/example-$model.result")"
        grep -q ' graph=1$' "$OUT" || fail "example $model --graphs: no graph launched"
    done
fi
expect 2 "$SAGA_BIN" gcn --data "$TMP/cit" --epochs 5 --device cuda --profile-epochs 4:3
expect 2 "$SAGA_BIN" gcn --data "$TMP/cit" --epochs 5 --device cuda --profile-epochs 3:x

# a sparser graph, whose tail reads about a quarter of the rows: stage 0 trains on those alone
# (the head), in memory and streamed with the tail, with the cpu's losses
expect 0 "$SAGA_BIN" generate citation --quiet --vertices 4000 --classes 4 --degree 3 --features 80 \
    --seed 2 -o "$TMP/cit3"
expect 0 "$SAGA_BIN" gcn --data "$TMP/cit3" --epochs 15 --json --quiet --device cpu --log "$TMP/cpu3.jsonl"
expect 0 "$SAGA_BIN" gcn --data "$TMP/cit3" --epochs 15 --json --quiet --stats --device cuda \
    --log "$TMP/cuda3.jsonl"
json_get "0 < j['stage_rows'][0] < j['vertices'] / 2" | grep -qx True || fail "gcn cuda (head): no head"
same_losses "$TMP/cuda3.jsonl" "$TMP/cpu3.jsonl" 4000 80 4 || fail "gcn cuda (head): losses differ"
head_budget=$(($(json_get 'j["peak_device_bytes"]') / 4 * 3))
expect 0 "$SAGA_BIN" gcn --data "$TMP/cit3" --epochs 15 --json --quiet --stats --device cuda \
    --device-mem "$head_budget" --stream --log "$TMP/str3.jsonl"
json_get "j['streamed'] and all(r < j['vertices'] for r in j['stage_rows'])" | grep -qx True ||
    fail "gcn cuda --device-mem $head_budget (head): not streamed with the head"
same_losses "$TMP/str3.jsonl" "$TMP/cpu3.jsonl" 4000 80 4 || fail "gcn cuda streamed (head): losses differ"
# 64 hidden units under half the peak or less: the loss rows' chain fits from the last
# stage alone and no head applies below it, so training runs every stage by slices on the rows
# it needs, with the cpu's losses
expect 0 "$SAGA_BIN" gcn --data "$TMP/cit3" --hidden 64 --epochs 4 --json --quiet --device cpu \
    --log "$TMP/cpu64.jsonl"
expect 0 "$SAGA_BIN" gcn --data "$TMP/cit3" --hidden 64 --epochs 1 --json --quiet --stats --device cuda
peak64=$(json_get 'j["peak_device_bytes"]')
sliced=""
for div in 2 3 4; do
    expect 0 "$SAGA_BIN" gcn --data "$TMP/cit3" --hidden 64 --epochs 4 --json --quiet --stats \
        --device cuda --device-mem $((peak64 / div)) --stream --explain --log "$TMP/sl64.jsonl"
    if grep -qE '^  0 .* \([0-9]+ slices\) ' "$ERR"; then
        sliced=$div
        break
    fi
done
if [ -z "$sliced" ]; then
    fail "gcn cuda, 64 hidden: no budget from 1/2 to 1/4 of the peak trained by slices"
else
    json_get "j['streamed'] and all(r < j['vertices'] for r in j['stage_rows'])" | grep -qx True ||
        fail "gcn cuda at 1/$sliced (slices): not streamed on fewer rows in every stage"
    same_losses "$TMP/sl64.jsonl" "$TMP/cpu64.jsonl" 4000 80 4 64 ||
        fail "gcn cuda at 1/$sliced (slices): losses differ"
fi

# ---- GCN on sampled mini-batches ----------------------------------------------------------------
# five batches an epoch, each an optimizer step: the CPU's losses within the bound after as many
# steps, with the batches sampled ahead on a thread or on the training's path. Each batch's pass is
# queued and its loss read after the next one is queued, so that in epochs 3 and 4 the host waits
# once a batch, and the device runs dry only where an epoch ends (its time by the wall clock),
# where its evaluation is read, and at the window's close: 5 of the waits, however many batches
# (one batch's pass waiting for its loss, and for each of its blocks' uploads, drained it 17 times)
expect 0 "$SAGA_BIN" gcn --data "$TMP/cit" --epochs 5 --fanout 5,5 --batch-size 16 --json --quiet \
    --device cpu --log "$TMP/mb-cpu.jsonl"
for ahead in 0 2; do
    rm -f "$TMP/counts"
    expect 0 env SAGA_CUDASIM_STATS="$TMP/counts" "$SAGA_BIN" gcn --data "$TMP/cit" --epochs 5 \
        --fanout 5,5 --batch-size 16 --json --quiet --device cuda --prefetch $ahead \
        --profile-epochs 3:4 --log "$TMP/mb-cuda.jsonl"
    [ "$(json_get 'j["batches"]')" = 5 ] || fail "gcn --fanout on cuda: $(json_last)"
    same_losses "$TMP/mb-cuda.jsonl" "$TMP/mb-cpu.jsonl" 800 80 4 16 5 ||
        fail "gcn --fanout on cuda, --prefetch $ahead: losses differ from the cpu's"
    python3 - "$(grep '^{"window"' "$TMP/counts")" <<'PY' || fail "gcn --fanout on cuda, --prefetch $ahead: counts"
import json, sys
w = json.loads(sys.argv[1])
print("gcn --fanout on cuda, epochs 3-4:", {k: w[k] for k in ("host_waits", "drain_waits", "kernels")})
assert w["kernels"] > 0 and w["drain_waits"] <= 5 and w["host_waits"] <= 2 * (5 + 1) + 3, w
PY
done

# ---- PageRank, streamed -----------------------------------------------------------------------
expect 0 "$SAGA_BIN" generate rmat --quiet --scale 11 --edge-factor 8 --seed 3 -o "$TMP/rmat.txt"
expect 0 "$SAGA_BIN" pagerank --json --tol 1e-12 --device cpu --out "$TMP/pr.cpu" "$TMP/rmat.txt"
peak=$(json_get 'j["peak_device_bytes"]')
budget=$((peak / 4))
expect 0 "$SAGA_BIN" pagerank --json --tol 1e-12 --device cuda --device-mem "$budget" \
    --out "$TMP/pr.cuda" "$TMP/rmat.txt"
json_get "j['streamed'] and j['parts'] > 1 and j['peak_device_bytes'] <= $budget" | grep -qx True ||
    fail "pagerank cuda: not streamed within $budget bytes"
python3 - "$TMP/pr.cpu" "$TMP/pr.cuda" <<'PY' || fail "pagerank cuda streamed: scores differ from the cpu's"
import os, sys
sys.path.insert(0, os.path.join(os.environ["SAGA_SRC_DIR"], "tests"))
import bounds  # tests/bounds.py: bounds from the arithmetic
a = [float(l.split()[1]) for l in open(sys.argv[1])]
b = [float(l.split()[1]) for l in open(sys.argv[2])]
tol = bounds.pagerank(len(a))
conv = bounds.pagerank_converged(1e-12)  # both ran with --tol 1e-12
assert len(a) == len(b) > 0 and all(abs(x - y) <= tol * x + conv for x, y in zip(a, b)), tol
PY
# iterations 3 and 4 (counted as above): the host waits once an iteration, for its L1 change
# (streamed, the parts add their sums on the device), and once to close the window. In memory
# the host is an iteration ahead: the device has the next iteration to run while the host waits,
# and only the close leaves it with nothing; the window opens as iteration 3 is queued, before
# the host reads iteration 2's L1 change, so it holds three reads
counted "pagerank on cuda, in memory, iterations 3-4" 4/1 0 "$SAGA_BIN" pagerank --quiet --tol 1e-12 \
    --device cuda --profile-iterations 3:4 "$TMP/rmat.txt"
counted "pagerank on cuda, streamed, iterations 3-4" 3 0 "$SAGA_BIN" pagerank --quiet --tol 1e-12 \
    --device cuda --device-mem "$budget" --profile-iterations 3:4 "$TMP/rmat.txt"
expect 2 "$SAGA_BIN" pagerank --device cuda --profile-iterations 0 "$TMP/rmat.txt"

# ---- a dense pipeline over two simulated GPUs ---------------------------------------------------
small=(--layers 3 --width 96 --outputs 8 --batch 32 --micro-batches 2 --steps 6 --seed 4)
expect 0 "$SAGA_BIN" mlp "${small[@]}" --device cpu --json --quiet
json_last >"$TMP/mlp.cpu"
rm -f "$TMP/stats"
# (64K per stage where the CPU runs in 32K: a CUDA backend keeps part of its budget for its
# scratch, a reduction's partials and cuBLAS's workspace)
expect 0 env SAGA_CUDASIM_STATS="$TMP/stats" "$SAGA_BIN" mlp "${small[@]}" --stages 2 --device cuda \
    --device-mem 64K --stats --json --quiet
json_get 'j["stages"] == 2 and j["streamed"] and max(j["stage_peak_bytes"]) <= j["budget_bytes"]' |
    grep -qx True || fail "mlp cuda: two stages not streamed within each stage's budget"
awk '$1 == "device" && $2 == 1 && $4 > 0 { ok = 1 } END { exit !ok }' "$TMP/stats" ||
    fail "mlp cuda --stages 2: nothing ran on cuda:1 ($(cat "$TMP/stats"))"
awk '$1 == "device" && $4 > 65536 { bad = 1 } END { exit bad }' "$TMP/stats" ||
    fail "mlp cuda --stages 2: a device allocated more than its 64K budget ($(cat "$TMP/stats"))"
json_last >"$TMP/mlp.cuda"
# steps 3 and 4 (counted as above): one stage waits once a step for its losses (the sums of
# squares copied back as they are made), in memory and streamed at 64K; the pipeline's two stages
# wait once a step each (the last for its losses, the first until it has read the caller's batch)
# and at their close, and hand activations and gradients over through the host with no host
# function: a stage's load waits on the device for its neighbour's copy to the host
counted "mlp on cuda, in memory, steps 3-4" 3 0 "$SAGA_BIN" mlp "${small[@]}" --device cuda \
    --device-mem 64M --quiet --profile-steps 3:4
counted "mlp on cuda, streamed, steps 3-4" 3 0 "$SAGA_BIN" mlp "${small[@]}" --device cuda \
    --device-mem 64K --quiet --profile-steps 3:4
counted "mlp on cuda, two stages, steps 3-4" 6 0 "$SAGA_BIN" mlp "${small[@]}" --stages 2 \
    --device cuda --device-mem 64K --quiet --profile-steps 3:4
expect 2 "$SAGA_BIN" mlp --profile-steps 2:1
python3 - "$TMP/mlp.cuda" "$TMP/mlp.cpu" <<'PY' || fail "mlp cuda pipeline: losses differ from the cpu's"
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

# ---- HEP: a short training ------------------------------------------------------------------
expect 0 "$SAGA_BIN" hep generate -o "$TMP/ev" --events 4 --seed 4 --min-particles 60 \
    --max-particles 120 --quiet
for dev in cpu cuda; do
    expect 0 "$SAGA_BIN" hep train --data "$TMP/ev" --epochs 1 --hidden 8 --iterations 1 \
        --batch-events 2 --device "$dev" --json --quiet
    json_last >"$TMP/hep.$dev"
done
# and streamed by chunks through the simulated device (hep_stream_step)
expect 0 "$SAGA_BIN" hep train --data "$TMP/ev" --epochs 1 --hidden 8 --iterations 1 \
    --batch-events 2 --device cuda --stream --device-mem 4M --json --quiet
json_last >"$TMP/hep.stream"
[ "$(json_get 'j["samplers"][0]["streamed_batches"] >= 1')" = True ] ||
    fail "hep --stream on cuda: nothing streamed"
for run in cuda stream; do
    python3 - "$TMP/hep.$run" "$TMP/hep.cpu" <<'PY' || fail "hep $run: results differ from the cpu's"
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert a["device"].startswith("cuda") and b["device"] == "cpu", (a["device"], b["device"])
for k in ("loss", "auc", "edge_efficiency", "edge_purity"):
    if k in b:
        assert abs(a[k] - b[k]) <= 1e-4 * max(1.0, abs(b[k])), (k, a[k], b[k])
PY
done

finish
