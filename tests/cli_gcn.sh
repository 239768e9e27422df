#!/usr/bin/env bash
# cli_gcn.sh - `saga gcn`: a small synthetic run, errors that name the file at fault, a generated
# data set read back with --data, and on Cora (from $SAGA_DATA_DIR): Kipf's accuracy with one
# fixed seed, one --log line per epoch, and --resume from epoch 100 ending exactly as the
# uninterrupted 200-epoch run.
set -euo pipefail
source "$(dirname "$0")/cli_common.bash"

# json_file FILE EXPR: a python expression on the JSON object on FILE's last line.
json_file() {
    tail -n 1 "$1" | python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); print('"$2"')'
}

# ---- without datasets ---------------------------------------------------------------------
expect 0 "$SAGA_BIN" gcn --synthetic 600,6,64,4 --epochs 40 --json --quiet
for key in test_accuracy val_accuracy train_accuracy epochs epoch_ms_median epoch_ms_mean \
    total_seconds load_seconds train_seconds vertices edges device threads outputs; do
    [ "$(json_get "'$key' in j")" = True ] || fail "--json lacks $key: $(json_last)"
done
[ "$(json_get 'j["vertices"], j["edges"], j["epochs"], j["classes"]')" = "600 1800 40 4" ] ||
    fail "--synthetic 600,6,64,4: $(json_last)"
# Four classes: chance is about 0.25; the graph and the topics make it learnable.
[ "$(json_get 'j["test_accuracy"] > 0.5')" = True ] || fail "synthetic run did not learn: $(json_last)"
expect_out '"device":"cpu"'

# --explain: the plan on stderr, a line per stage; the loss's rows (the training vertices) are
# fewer than every row at the last stage, and the evaluation's too
expect 0 "$SAGA_BIN" gcn --synthetic 600,6,64,4 --epochs 1 --json --quiet --explain --device cpu
expect_err "net: in memory; 600 vertices"
expect_err "training: the loss reads"
grep -Eq '^  3 +program, one SpMM +4 -> 4 +[0-9]+ ' "$ERR" && grep -q 'inference of chosen rows' "$ERR" ||
    fail "--explain: no plan of the last stage: $(cat "$ERR")"

# Usage errors.
expect 2 "$SAGA_BIN" gcn --epochs 5
expect_err "exactly one of --data DIR and --synthetic"
expect 2 "$SAGA_BIN" gcn --synthetic 600,6,64
expect_err "expected N,DEG,F,C"
expect 2 "$SAGA_BIN" gcn --synthetic 600,6,64,4 --checkpoint-every 5
expect_err "--checkpoint-every needs --checkpoint"
expect 2 "$SAGA_BIN" gcn --synthetic 600,6,64,4 --dropout 1
# The default device is auto: a GPU when one works, else the CPU. Nobody asked for a GPU, so
# its absence is an info line (SAGA_LOG=info), not a warning; --device auto asks for one and gets
# one warning line saying why not. SAGA_DEVICE, which this suite sets to cpu, changes the default.
expect 0 env -u SAGA_DEVICE "$SAGA_BIN" gcn --synthetic 500,6,16,3 --epochs 1
if grep -q '^device    cuda' "$OUT"; then
    [ ! -s "$ERR" ] || fail "a run on the GPU printed on stderr"
else
    grep -q '^device    cpu' "$OUT" || fail "no device line"
    [ ! -s "$ERR" ] || fail "the default auto on the CPU printed on stderr: $(head -2 "$ERR")"
    expect 0 env -u SAGA_DEVICE SAGA_LOG=info "$SAGA_BIN" gcn --synthetic 500,6,16,3 --epochs 1
    grep -q '^saga: info: no usable GPU (.*); running on the CPU' "$ERR" ||
        fail "SAGA_LOG=info did not note the missing GPU"
    expect 0 env -u SAGA_DEVICE "$SAGA_BIN" gcn --synthetic 500,6,16,3 --epochs 1 --device auto
    [ "$(wc -l <"$ERR")" -eq 1 ] && grep -q 'warning: no usable GPU (.*); running on the CPU' "$ERR" ||
        fail "--device auto on the CPU did not say why in one line"
fi
expect 0 env -u SAGA_DEVICE "$SAGA_BIN" gcn --synthetic 500,6,16,3 --epochs 1 --quiet
[ ! -s "$ERR" ] || fail "--quiet printed the device fallback"
expect 0 env SAGA_DEVICE=cpu "$SAGA_BIN" gcn --synthetic 500,6,16,3 --epochs 1
grep -q '^device    cpu' "$OUT" && [ ! -s "$ERR" ] || fail "SAGA_DEVICE=cpu did not make the CPU the default"
expect 2 "$SAGA_BIN" gcn --synthetic 600,6,64,4 --device tpu
expect_err "--device must be"

# A generated data set read with --data, then broken one file at a time.
expect 0 "$SAGA_BIN" generate citation --quiet --vertices 800 --classes 4 --degree 5 --features 80 \
    --seed 2 -o "$TMP/cit"
expect 0 "$SAGA_BIN" gcn --data "$TMP/cit" --epochs 60 --json --quiet
[ "$(json_get 'j["vertices"], j["edges"], j["features"], j["classes"]')" = "800 2000 80 4" ] ||
    fail "--data generated: $(json_last)"
[ "$(json_get 'j["test_accuracy"] > 0.5')" = True ] || fail "generated data: $(json_last)"

# Streamed through a budget a quarter of the in-memory peak (and with offloaded aggregations): the
# same losses and accuracies, the peak within the budget, bytes moved reported per epoch.
expect 0 "$SAGA_BIN" gcn --data "$TMP/cit" --epochs 15 --json --quiet --stats --log "$TMP/mem.jsonl"
mem=$(json_get 'j["loss"], j["train_accuracy"], j["val_accuracy"], j["test_accuracy"]')
budget=$(($(json_get 'j["peak_device_bytes"]') / 4))
for saved in recompute offload; do
    expect 0 "$SAGA_BIN" gcn --data "$TMP/cit" --epochs 15 --json --quiet --stats --device-mem "$budget" \
        --saved "$saved" --log "$TMP/str.jsonl"
    json_get "j['streamed'] and j['parts'] > 1 and j['peak_device_bytes'] <= $budget and j['h2d_bytes'] > 0" |
        grep -qx True || fail "gcn --device-mem $budget ($saved): not streamed within the budget"
    python3 - "$TMP/mem.jsonl" "$TMP/str.jsonl" <<'PY' || fail "gcn streamed ($saved): losses differ"
import json, os, sys
sys.path.insert(0, os.path.join(os.environ["SAGA_SRC_DIR"], "tests"))
import bounds  # tests/bounds.py: bounds from the arithmetic
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == len(b) == 15
# 800 vertices, 80 features, 16 hidden, 4 classes: the streamed parts add in other orders
tol = bounds.gcn_losses(800, 80, 16, 4, 15)
for x, y, t in zip(a, b, tol):
    assert abs(x["loss"] - y["loss"]) <= t * abs(x["loss"]), (x["epoch"], x["loss"], y["loss"], t)
    assert abs(x["test_accuracy"] - y["test_accuracy"]) <= 0.003, (x["epoch"], x["test_accuracy"], y["test_accuracy"])
    assert "h2d_bytes" in y and "overlap" in y
PY
done
# Mini-batches of whole neighbourhoods, one batch of every training vertex: the full-graph
# training's losses (the same rows and edges, summed in other orders); cut neighbourhoods in
# batches of 100: it learns, reports its batches and draws the same batches again.
expect 0 "$SAGA_BIN" gcn --data "$TMP/cit" --epochs 15 --json --quiet --fanout -1,-1 \
    --batch-size 100000 --log "$TMP/mb.jsonl"
[ "$(json_get 'j["fanout"], j["batches"], j["batch_size"], j["sample_degrees"], j["batch_balance"]')" = \
    "[-1, -1] 1 100000 full memory" ] || fail "gcn --fanout -1,-1: $(json_last)"
python3 - "$TMP/mem.jsonl" "$TMP/mb.jsonl" <<'PY' || fail "gcn --fanout -1,-1: losses differ"
import json, os, sys
sys.path.insert(0, os.path.join(os.environ["SAGA_SRC_DIR"], "tests"))
import bounds
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
tol = bounds.gcn_losses(800, 80, 16, 4, 15)
for x, y, t in zip(a, b, tol):
    assert abs(x["loss"] - y["loss"]) <= t * abs(x["loss"]), (x["epoch"], x["loss"], y["loss"], t)
PY
expect 0 "$SAGA_BIN" gcn --data "$TMP/cit" --epochs 40 --json --quiet --fanout 5,3 --batch-size 100
first=$(json_get 'j["loss"], j["test_accuracy"]')
[ "$(json_get 'j["test_accuracy"] > 0.5, j["batches"], 0 < j["batch_rows"] < 800')" = \
    "True $(json_get '(j["train"] + 99) // 100') True" ] || fail "gcn --fanout 5,3: $(json_last)"
expect 0 "$SAGA_BIN" gcn --data "$TMP/cit" --epochs 40 --json --quiet --fanout 5,3 --batch-size 100
[ "$(json_get 'j["loss"], j["test_accuracy"]')" = "$first" ] || fail "gcn --fanout 5,3 again: $(json_last)"
# sampled on the training's path instead of a thread of its own: the same batches, the same model
expect 0 "$SAGA_BIN" gcn --data "$TMP/cit" --epochs 40 --json --quiet --fanout 5,3 --batch-size 100 \
    --prefetch 0
[ "$(json_get 'j["loss"], j["test_accuracy"]')" = "$first" ] || fail "gcn --prefetch 0: $(json_last)"
[ "$(json_get 'j["prefetch"], j["sample_wait_seconds"] == j["sample_seconds"] > 0')" = "0 True" ] ||
    fail "gcn --prefetch 0 sampling figures: $(json_last)"
expect 0 "$SAGA_BIN" gcn --data "$TMP/cit" --epochs 3 --json --quiet --fanout 5,3 --batch-size 20 \
    --batch-balance none
[ "$(json_get 'j["batch_balance"], 0 < j["batch_peak_min"] <= j["batch_peak_max"]')" = "none True" ] ||
    fail "gcn --batch-balance none: $(json_last)"
# evaluated on samples of whole neighbourhoods: what the exact evaluation gives (the same model,
# its outputs summed in other orders); on cut ones, an estimate that runs
expect 0 "$SAGA_BIN" gcn --data "$TMP/cit" --epochs 3 --json --quiet --fanout 5,3 --batch-size 20 \
    --batch-balance none --eval sampled
[ "$(json_get 'j["eval"], 0 <= j["test_accuracy"] <= 1')" = "sampled True" ] ||
    fail "gcn --eval sampled: $(json_last)"
expect 0 "$SAGA_BIN" gcn --data "$TMP/cit" --epochs 3 --json --quiet --fanout -1,-1 --batch-size 20 \
    --batch-balance none --eval sampled --log "$TMP/es.jsonl"
expect 0 "$SAGA_BIN" gcn --data "$TMP/cit" --epochs 3 --json --quiet --fanout -1,-1 --batch-size 20 \
    --batch-balance none --log "$TMP/ex.jsonl"
python3 - "$TMP/ex.jsonl" "$TMP/es.jsonl" <<'PY' || fail "gcn --eval sampled of whole neighbourhoods differs"
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == len(b) == 3
for x, y in zip(a, b):
    assert x["loss"] == y["loss"], (x, y)  # training does not depend on how it is evaluated
    for k in ("train_accuracy", "val_accuracy", "test_accuracy"):
        assert abs(x[k] - y[k]) <= 0.003, (k, x[k], y[k])
PY
# --predictions: every vertex's class from the final model, in vertex order, giving the reported
# test accuracy; written only when asked (the pass that makes them runs then alone); a file that
# cannot be written is an error naming it
expect 0 "$SAGA_BIN" gcn --data "$TMP/cit" --epochs 20 --json --quiet --predictions "$TMP/p.txt"
json_last >"$TMP/p.json"
python3 "$SAGA_SRC_DIR/tests/predictions.py" "$TMP/p.txt" "$TMP/cit" "$TMP/p.json" ||
    fail "gcn --predictions: $(json_last)"
[ "$(json_get "'$TMP/p.txt' in j['outputs']")" = True ] || fail "gcn --predictions: not in outputs"
expect 1 "$SAGA_BIN" gcn --data "$TMP/cit" --epochs 2 --quiet --predictions "$TMP/no/such/dir/p.txt"
expect_err "cannot create '$TMP/no/such/dir/p.txt'"
# Early stopping: training ends at the first epoch P after the best validation accuracy (the first
# epoch of it), the final model is that epoch's (its accuracies as the log gave them, and the
# checkpoint holds it): full-batch in memory, streamed, and on mini-batches evaluated exactly and
# on samples.
check_early_stop() { # LOG PATIENCE EPOCHS: on the last JSON line of $OUT
    tail -n 1 "$OUT" >"$TMP/es.json"
    python3 "$SAGA_SRC_DIR/tests/early_stop.py" "$1" "$TMP/es.json" "$2" "$3"
}
expect 0 "$SAGA_BIN" gcn --data "$TMP/cit" --epochs 80 --early-stop 5 --json --quiet \
    --log "$TMP/es.jsonl" --checkpoint "$TMP/es.ckpt" --predictions "$TMP/es.pred"
check_early_stop "$TMP/es.jsonl" 5 80 || fail "gcn --early-stop 5: $(json_last)"
python3 "$SAGA_SRC_DIR/tests/predictions.py" "$TMP/es.pred" "$TMP/cit" "$TMP/es.json" ||
    fail "gcn --early-stop 5 --predictions: not the selected model's"
es=$(json_get 'j["epochs"]')
sel=$(json_get 'j["train_accuracy"], j["val_accuracy"], j["test_accuracy"]')
expect 0 "$SAGA_BIN" gcn --data "$TMP/cit" --epochs "$es" --resume "$TMP/es.ckpt" --json --quiet
[ "$(json_get 'j["train_accuracy"], j["val_accuracy"], j["test_accuracy"]')" = "$sel" ] ||
    fail "the early-stopped checkpoint is not the selected model: $(json_last) against $sel"
expect 0 "$SAGA_BIN" gcn --data "$TMP/cit" --epochs 80 --early-stop 5 --json --quiet \
    --log "$TMP/es.jsonl" --device-mem "$budget"
check_early_stop "$TMP/es.jsonl" 5 80 || fail "gcn --early-stop 5 streamed: $(json_last)"
[ "$(json_get 'j["streamed"]')" = True ] || fail "gcn --early-stop streamed: not streamed"
for ev in exact sampled; do
    expect 0 "$SAGA_BIN" gcn --data "$TMP/cit" --epochs 80 --early-stop 5 --json --quiet \
        --log "$TMP/es.jsonl" --fanout 5,3 --batch-size 100 --eval "$ev"
    check_early_stop "$TMP/es.jsonl" 5 80 || fail "gcn --early-stop 5 --fanout 5,3 --eval $ev: $(json_last)"
done
# patience longer than the run: every epoch runs, the final model is still the best one's
expect 0 "$SAGA_BIN" gcn --data "$TMP/cit" --epochs 12 --early-stop 100 --json --quiet --log "$TMP/es.jsonl"
check_early_stop "$TMP/es.jsonl" 100 12 || fail "gcn --early-stop 100 --epochs 12: $(json_last)"
expect 2 "$SAGA_BIN" gcn --data "$TMP/cit" --early-stop -1
expect_err "--early-stop must be an integer in 0.."
mkdir -p "$TMP/citnv"
cp "$TMP/cit"/* "$TMP/citnv/"
: >"$TMP/citnv/val_idx.txt"
expect 1 "$SAGA_BIN" gcn --data "$TMP/citnv" --epochs 3 --early-stop 2
expect_err "early stopping selects on the validation vertices, and the data set has none"
expect 2 "$SAGA_BIN" gcn --data "$TMP/cit" --fanout 5,5 --eval approximate
expect_err "--eval must be exact or sampled"
expect 2 "$SAGA_BIN" gcn --data "$TMP/cit" --fanout 5,5 --batch-balance hubs
expect_err "--batch-balance must be memory, edges, rows or none"
expect 2 "$SAGA_BIN" gcn --data "$TMP/cit" --fanout 5
expect_err "2 fan-outs"
expect 2 "$SAGA_BIN" gcn --data "$TMP/cit" --fanout 0,5
expect_err "each -1 (all) or 1.."
expect 2 "$SAGA_BIN" gcn --data "$TMP/cit" --batch-size 64
expect_err "--batch-size, --batch-balance, --prefetch, --eval and --sample-degrees apply to --fanout"
expect 2 "$SAGA_BIN" gcn --data "$TMP/cit" --device-mem lots
expect_err "--device-mem must be a size"
expect 2 "$SAGA_BIN" gcn --data "$TMP/cit" --partition spectral
expect_err "--partition must be metis, contiguous, random or fennel"
expect 1 "$SAGA_BIN" gcn --data "$TMP/cit" --device-mem 24K --epochs 1
expect_err "budget at least"
# The library's other layers (--model): each learns, names itself in the JSON, and streams through
# a quarter of its in-memory peak with the same first loss (the same parameters, sums in other
# orders) within the bound of its forward pass.
for m in "gat --heads 2" "sage" "sage --aggr max" "gin"; do
    set -- $m
    expect 0 "$SAGA_BIN" gcn --data "$TMP/cit" --epochs 30 --json --quiet --stats --model "$@" \
        --log "$TMP/mem.jsonl"
    [ "$(json_get 'j["model"], j["test_accuracy"] > 0.5, j["best_epoch"] >= 1')" = "$1 True True" ] ||
        fail "gcn --model $m: $(json_last)"
    budget=$(($(json_get 'j["peak_device_bytes"]') / 4))
    expect 0 "$SAGA_BIN" gcn --data "$TMP/cit" --epochs 3 --json --quiet --stats --model "$@" \
        --device-mem "$budget" --log "$TMP/str.jsonl"
    json_get "j['streamed'] and j['parts'] > 1 and j['peak_device_bytes'] <= $budget" |
        grep -qx True || fail "gcn --model $m --device-mem $budget: not streamed within the budget"
    heads=$([ "$1" = gat ] && echo 2 || echo 1)
    hidden=$([ "$1" = gin ] && echo 64 || ([ "$1" = gat ] && echo 8 || echo 16))
    python3 - "$TMP/mem.jsonl" "$TMP/str.jsonl" "$1" "$heads" "$hidden" <<'PY' ||
import json, os, sys
sys.path.insert(0, os.path.join(os.environ["SAGA_SRC_DIR"], "tests"))
import bounds
a = json.loads(open(sys.argv[1]).readline())
b = json.loads(open(sys.argv[2]).readline())
tol = bounds.gnn_forward_loss(sys.argv[3], 800, 80, int(sys.argv[5]), 4, heads=int(sys.argv[4]))
assert a["epoch"] == b["epoch"] == 1
assert abs(a["loss"] - b["loss"]) <= tol * abs(a["loss"]), (a["loss"], b["loss"], tol)
PY
        fail "gcn --model $m streamed: the first loss differs"
done
# GIN's apply_vertex (its MLP) holds more than the plan's estimate of a stage's work: below a
# quarter of its peak a step may take more than its plan gave it, and the pass then runs again on
# a plan for more (saying so); every budget down to a twelfth trains within it
for div in 8 10 12; do
    expect 0 "$SAGA_BIN" gcn --data "$TMP/cit" --epochs 2 --json --stats --model gin \
        --device-mem $((budget * 4 / div))
    json_get "j['streamed'] and j['peak_device_bytes'] <= $((budget * 4 / div))" | grep -qx True ||
        fail "gcn --model gin at 1/$div of its peak: not within the budget"
    grep -q "planning again" "$ERR" && echo "gin at 1/$div of its peak: planned again"
done
# `saga gnn` is the same command
expect 0 "$SAGA_BIN" gcn --data "$TMP/cit" --epochs 3 --json --quiet --model gin
gcn_loss=$(json_get 'j["loss"]')
expect 0 "$SAGA_BIN" gnn --data "$TMP/cit" --epochs 3 --json --quiet --model gin
[ "$(json_get 'j["loss"], j["model"]')" = "$gcn_loss gin" ] || fail "saga gnn: $(json_last)"
expect 2 "$SAGA_BIN" gcn --data "$TMP/cit" --model gnn
expect_err "--model must be gcn, gat, sage or gin"
expect 2 "$SAGA_BIN" gcn --data "$TMP/cit" --model sage --aggr median
expect_err "--aggr must be mean, max or sum"
expect 2 "$SAGA_BIN" gcn --data "$TMP/cit" --heads 4
expect_err "--heads applies to --model gat"
expect 2 "$SAGA_BIN" gcn --data "$TMP/cit" --model gin --aggr max
expect_err "--aggr applies to --model sage"

# a budget far too small stops at parts of about 8 vertices, one error line and no partitioner
# chatter
expect 1 "$SAGA_BIN" gcn --synthetic 2000,10,64,4 --device cpu --device-mem 20K --epochs 1
expect_err "budget at least"
! grep -q '\*\*\*' "$OUT" "$ERR" || fail "the partitioner printed warnings for a budget far too small"
[ "$(wc -l <"$ERR")" -eq 1 ] || fail "more than one line on stderr for a budget far too small"

expect 1 "$SAGA_BIN" gcn --data "$TMP/no-such-dir"
expect_err "$TMP/no-such-dir"
cp -r "$TMP/cit" "$TMP/bad"
sed -i '3s/.*/abc/' "$TMP/bad/labels.txt"
expect 1 "$SAGA_BIN" gcn --data "$TMP/bad" --epochs 2
expect_err "labels.txt:3"
cp "$TMP/cit/labels.txt" "$TMP/bad/labels.txt"
rm "$TMP/bad/features.txt.gz"
expect 1 "$SAGA_BIN" gcn --data "$TMP/bad" --epochs 2
expect_err "$TMP/bad/features.txt.gz"
cp "$TMP/cit/features.txt.gz" "$TMP/bad/"
echo 5000 >>"$TMP/bad/test_idx.txt"
expect 1 "$SAGA_BIN" gcn --data "$TMP/bad" --epochs 2
expect_err "test_idx.txt"
cp "$TMP/cit/test_idx.txt" "$TMP/bad/"
echo "0 9999" | gzip >"$TMP/bad/edges.txt.gz"
expect 1 "$SAGA_BIN" gcn --data "$TMP/bad" --epochs 2
expect_err "edges.txt.gz: vertex 9999 is out of range"

# A dense features file with fewer rows than vertices is an error naming both counts (it was
# zero-padded and trained); a sparse file may still end before the last vertices.
cp -r "$TMP/cit" "$TMP/short"
rm "$TMP/short/features.txt.gz"
python3 -c 'for v in range(100): print(" ".join("%.1f" % ((v * 7 + j) % 5) for j in range(8)))' \
    >"$TMP/short/features.txt"
expect 1 "$SAGA_BIN" gcn --data "$TMP/short" --epochs 2
expect_err "$TMP/short/features.txt: 100 dense feature rows, labels.txt has 800 vertices"
printf '0 1\n0 5\n1 2\n' >"$TMP/short/features.txt"
expect 0 "$SAGA_BIN" gcn --data "$TMP/short" --epochs 2 --quiet

# A label beyond classes.txt's classes is an error naming the line, the label and the count (it
# made a 100-class model); classes without a vertex and vertices in two of the split's lists are
# warnings, on stderr even with --json.
cp -r "$TMP/cit" "$TMP/cls"
sed -i '5s/.*/99/' "$TMP/cls/labels.txt"
expect 1 "$SAGA_BIN" gcn --data "$TMP/cls" --epochs 2
expect_err "$TMP/cls/labels.txt:5: label 99 is outside the 4 classes of $TMP/cls/classes.txt (0..3)"
cp "$TMP/cit/labels.txt" "$TMP/cls/"
echo "4 topic_4" >>"$TMP/cls/classes.txt"
head -n 3 "$TMP/cls/train_idx.txt" >>"$TMP/cls/test_idx.txt"
expect 0 "$SAGA_BIN" gcn --data "$TMP/cls" --epochs 2 --json
expect_err "warning: $TMP/cls/labels.txt: 1 of the 5 classes have no vertex (class 4)"
expect_err "warning: $TMP/cls: 3 vertices are listed in more than one of train_idx.txt, val_idx.txt, test_idx.txt (train and val 0, train and test 3, val and test 0"
[ "$(json_get 'j["classes"]')" = 5 ] || fail "classes.txt's count is not the class count: $(json_last)"

# Row normalisation leaves signed rows alone: on dense Gaussian features (every row has a negative
# entry) the default run and --no-normalize-features train the same model, and the run says so.
cp -r "$TMP/cit" "$TMP/signed"
rm "$TMP/signed/features.txt.gz"
python3 - "$TMP/signed/labels.txt" "$TMP/signed/features.txt" <<'PY'
import random, sys
random.seed(5)
labels = [int(l) for l in open(sys.argv[1])]
with open(sys.argv[2], "w") as f:
    for y in labels:
        row = [random.gauss(1.0 if j % 4 == y else -1.0, 1.0) for j in range(16)]
        row[0] = -abs(row[0]) - 0.01  # one negative entry in every row
        f.write(" ".join("%.4f" % x for x in row) + "\n")
PY
expect 0 "$SAGA_BIN" gcn --data "$TMP/signed" --epochs 30 --json
expect_err "features  row-normalised: 0 rows divided by their sum, 800 with a negative entry left as read"
[ "$(json_get 'j["rows_normalized"], j["rows_signed"]')" = "0 800" ] || fail "signed rows: $(json_last)"
normalized=$(json_get 'j["loss"], j["test_accuracy"]')
expect 0 "$SAGA_BIN" gcn --data "$TMP/signed" --epochs 30 --json --no-normalize-features
expect_err "features  used as read (--no-normalize-features)"
[ "$(json_get 'j["loss"], j["test_accuracy"]')" = "$normalized" ] ||
    fail "signed rows were changed by the normalisation: $normalized, as read $(json_get 'j["loss"], j["test_accuracy"]')"
[ "$(json_get 'j["test_accuracy"] > 0.5')" = True ] || fail "signed features did not learn: $(json_last)"

# A checkpoint of another model shape is refused, naming the file.
expect 0 "$SAGA_BIN" gcn --data "$TMP/cit" --epochs 3 --hidden 8 --quiet --checkpoint "$TMP/h8.ckpt"
expect 1 "$SAGA_BIN" gcn --data "$TMP/cit" --epochs 6 --quiet --resume "$TMP/h8.ckpt"
expect_err "$TMP/h8.ckpt"

# ---- Cora ---------------------------------------------------------------------------------
dataset cora_labels cora/labels.txt
cora=$(dirname "$cora_labels")

expect 0 "$SAGA_BIN" gcn --data "$cora" --seed 1 --json --log "$TMP/cora.jsonl"
cp "$OUT" "$TMP/full.json"
python3 - "$TMP/full.json" "$TMP/cora.jsonl" <<'PY' || fail "Cora: $(json_last)"
import json, sys
j = json.loads(open(sys.argv[1]).read().splitlines()[-1])
print(f"Cora seed 1: test {j['test_accuracy']:.4f}, val {j['val_accuracy']:.4f}, "
      f"{j['epoch_ms_median']:.2f} ms per epoch (median)")
assert (j["vertices"], j["edges"], j["features"], j["classes"]) == (2708, 5278, 1433, 7), j
assert (j["train"], j["val"], j["test"], j["epochs"]) == (140, 500, 1000, 200), j
assert j["test_accuracy"] >= 0.79, j["test_accuracy"]
lines = [json.loads(l) for l in open(sys.argv[2])]
assert [l["epoch"] for l in lines] == list(range(1, 201)), "one log line per epoch"
# the per-epoch keys are the summary's
assert all(set(l) >= {"epoch", "loss", "train_accuracy", "val_accuracy", "test_accuracy",
                      "epoch_ms", "eval_ms"} for l in lines)
assert all(lines[-1][k] == j[k] for k in ("loss", "train_accuracy", "val_accuracy", "test_accuracy"))
assert lines[-1]["loss"] < lines[0]["loss"] / 2, "the loss fell"
PY

# Interrupted at epoch 100, resumed: the same final loss and accuracies, bit for bit.
expect 0 "$SAGA_BIN" gcn --data "$cora" --seed 1 --epochs 100 --quiet --checkpoint "$TMP/c100"
expect 0 "$SAGA_BIN" gcn --data "$cora" --seed 1 --json --resume "$TMP/c100"
[ "$(json_get 'j["start_epoch"], j["epochs"]')" = "100 200" ] || fail "resume: $(json_last)"
want=$(json_file "$TMP/full.json" 'j["loss"], j["train_accuracy"], j["val_accuracy"], j["test_accuracy"]')
got=$(json_get 'j["loss"], j["train_accuracy"], j["val_accuracy"], j["test_accuracy"]')
[ "$got" = "$want" ] || fail "resumed run ends at $got, the uninterrupted one at $want"

# Cora's features file is sparse: the run says so and keeps it a CSR; --dense-features makes it
# dense rows, which the net keeps as the same CSR (1.3% non-zero, under --sparse-below's 25%), and
# --sparse-below 0 keeps them dense. Without dropout the dense rows give the CSR's loss to float
# rounding, the CSR made from them its bits, and the CSR takes a small part of the dense
# matrix's bytes on the device (also streamed, where it moves per epoch).
expect 0 "$SAGA_BIN" gcn --data "$cora" --seed 2 --epochs 30 --dropout 0 --stats
grep -q '^features  sparse (CSR): 49,216 non-zeros' "$OUT" || fail "Cora not read as sparse"
grep -q '^input: sparse (CSR)' "$OUT" || fail "--stats does not say the input is sparse"
for mode in "" "--stream --device-mem 3000000"; do
    # shellcheck disable=SC2086
    expect 0 "$SAGA_BIN" gcn --data "$cora" --seed 2 --epochs 30 --dropout 0 --json --quiet $mode
    cp "$OUT" "$TMP/sparse.json"
    # shellcheck disable=SC2086
    expect 0 "$SAGA_BIN" gcn --data "$cora" --seed 2 --epochs 30 --dropout 0 --json --quiet \
        --dense-features $mode
    cp "$OUT" "$TMP/packed.json"
    # shellcheck disable=SC2086
    expect 0 "$SAGA_BIN" gcn --data "$cora" --seed 2 --epochs 30 --dropout 0 --json --quiet \
        --dense-features --sparse-below 0 $mode
    python3 - "$TMP/sparse.json" "$TMP/packed.json" "$OUT" <<'PY' ||
import json, os, sys
sys.path.insert(0, os.path.join(os.environ["SAGA_SRC_DIR"], "tests"))
import bounds  # tests/bounds.py: bounds from the arithmetic
s, p, d = (json.loads(open(f).read().strip().splitlines()[-1]) for f in sys.argv[1:4])
lay = [(j["input_layout"], j["input_packed"]) for j in (s, p, d)]
assert lay == [("sparse", False), ("sparse", True), ("dense", False)], lay
assert s["input_nnz"] == p["input_nnz"] == d["input_nnz"] == 49216  # counted in dense rows too
assert p["loss"] == s["loss"] and p["test_accuracy"] == s["test_accuracy"], (p["loss"], s["loss"])
assert p["input_bytes"] == s["input_bytes"]
# Cora (2,708 vertices of in-degree at most 168, 1,433 features, 7 classes), 30 epochs: the
# sparse product adds the first layer's terms in another order than the dense one
tol = bounds.gcn_losses(2708, 1433, 16, 7, 30, max_degree=168)[-1]
assert abs(s["loss"] - d["loss"]) <= tol * abs(d["loss"]), (s["loss"], d["loss"], tol)
assert abs(s["test_accuracy"] - d["test_accuracy"]) <= 0.002
assert s["input_bytes"] * 10 < d["input_bytes"], (s["input_bytes"], d["input_bytes"])
if s["streamed"]:
    assert p["h2d_bytes"] == s["h2d_bytes"], (p["h2d_bytes"], s["h2d_bytes"])
    assert s["h2d_bytes"] * 10 < d["h2d_bytes"], (s["h2d_bytes"], d["h2d_bytes"])
PY
        fail "sparse, dense kept as a CSR and dense ($mode): $(json_last)"
done
expect 0 "$SAGA_BIN" gcn --data "$cora" --seed 2 --epochs 1 --dense-features
grep -q '^features  dense (--dense-features): 15.5 MB on the host, 1.27% non-zero' "$OUT" ||
    fail "--dense-features not said"
grep -q '^input     the dense features were kept as a CSR: 1.27% non-zero, at most 25%' "$OUT" ||
    fail "the CSR made from the dense rows not said"
expect 2 "$SAGA_BIN" gcn --data "$cora" --sparse-below 1.5
finish
