#!/usr/bin/env bash
# minibatch.sh - GraphSAGE (mean) on sampled mini-batches: saga (`saga gcn --model sage --fanout`)
# against PyTorch Geometric (NeighborLoader + SAGEConv, bench/sage_pyg.py) with the same fan-outs,
# batch size, width, learning rate, dropout and weight decay on the same threads, alternating in
# each round; and saga's own full-graph training of the same model. Per run: the median epoch
# time (sampling and training; the exact full-graph evaluation after each epoch is not counted)
# and the time to a validation accuracy (the epochs' times added up to the first epoch whose
# model reaches TARGET). Then each sampler alone: sampled edges per second over the training
# vertices (bench_sample, and the RESULT line of sage_pyg.py).
#
#   bench/minibatch.sh                      Cora (Planetoid split), fan-outs 15,10, batches of 64
#   DATA=DIR TARGET=0.95 BATCH=1024 EPOCHS=5 bench/minibatch.sh
#   RUNS=3 FANOUT=15,10 HIDDEN=64 LR=0.01 DROPOUT=0.5 THREADS=2 PYTHON=~/venv-pyg/bin/python
#   FULL_EPOCHS=200   the full-graph runs' epochs (default EPOCHS): one step an epoch needs more
#
# A generated graph with a larger training set (the Planetoid split has 20 vertices a class):
#   saga generate citation --vertices 1000000 --degree 20 --features 128 --classes 8 -o DIR
#   TRAIN=100000 DATA=DIR bench/minibatch.sh    (rewrites DIR/train_idx.txt: TRAIN vertices
#                                                outside the validation and test sets, seed 1)
# PyG's sampler needs pyg-lib or torch-sparse: see bench/README.md. Without them (or torch) the
# PyG runs are skipped with a message.
set -euo pipefail
cd "$(dirname "$0")/.."
SAGA=${SAGA:-build/bin/saga}
SAMPLE=${SAMPLE:-build/bin/bench_sample}
DATA=${DATA:-${SAGA_DATA_DIR:-../shared/datasets}/cora}
FANOUT=${FANOUT:-15,10}
BATCH=${BATCH:-64}
HIDDEN=${HIDDEN:-64}
LR=${LR:-0.01}
DROPOUT=${DROPOUT:-0.5}
DECAY=${DECAY:-5e-4}
EPOCHS=${EPOCHS:-30}
FULL_EPOCHS=${FULL_EPOCHS:-$EPOCHS}
TARGET=${TARGET:-0.76}
RUNS=${RUNS:-3}
THREADS=${THREADS:-$(nproc)}
PYTHON=${PYTHON:-python3}
[ -x "$SAGA" ] && [ -x "$SAMPLE" ] || { echo "minibatch.sh: build first (make build)" >&2; exit 1; }
[ -d "$DATA" ] || { echo "minibatch.sh: no data set at $DATA" >&2; exit 1; }
if [ -n "${TRAIN:-}" ]; then
    python3 - "$DATA" "$TRAIN" <<'PY'
import random, sys
d, k = sys.argv[1], int(sys.argv[2])
n = sum(1 for _ in open(f"{d}/labels.txt"))
held = {int(l) for f in ("val_idx.txt", "test_idx.txt") for l in open(f"{d}/{f}")}
pool = [v for v in range(n) if v not in held]
train = sorted(random.Random(1).sample(pool, k))
open(f"{d}/train_idx.txt", "w").write("".join(f"{v}\n" for v in train))
print(f"minibatch.sh: {d}/train_idx.txt now lists {k} vertices")
PY
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pyg=yes
if ! "$PYTHON" -c 'import torch, torch_geometric' 2>/dev/null; then
    echo "minibatch.sh: $PYTHON lacks torch or torch_geometric: the PyG runs are skipped (bench/README.md)"
    pyg=no
fi
echo "data $DATA; fan-outs $FANOUT, batches of $BATCH, hidden $HIDDEN, lr $LR, dropout $DROPOUT," \
    "weight decay $DECAY, $EPOCHS epochs ($FULL_EPOCHS full-graph), target validation accuracy" \
    "$TARGET, $THREADS threads;" \
    "load $(cut -d' ' -f1-3 /proc/loadavg)"

# summary LOG: "median_epoch_ms ms_to_target epoch_of_target last_test last_val"
summary() {
    python3 - "$1" "$TARGET" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
target = float(sys.argv[2])
ms = [r["epoch_ms"] for r in rows]
t, at = 0.0, None
for r in rows:
    t += r["epoch_ms"]
    if r["val_accuracy"] >= target:
        at = r["epoch"]
        break
print(f"{statistics.median(ms):.1f} {t if at else float('nan'):.1f} {at or 0} "
      f"{rows[-1]['test_accuracy']:.4f} {rows[-1]['val_accuracy']:.4f}")
PY
}

common=(--data "$DATA" --model sage --hidden "$HIDDEN" --lr "$LR" --dropout "$DROPOUT"
        --weight-decay "$DECAY" --threads "$THREADS" --quiet)
for r in $(seq 1 "$RUNS"); do
    OMP_NUM_THREADS=$THREADS "$SAGA" gcn "${common[@]}" --epochs "$EPOCHS" --fanout "$FANOUT" \
        --batch-size "$BATCH" --seed "$r" --log "$TMP/saga.jsonl" > /dev/null
    echo "run $r saga-minibatch $(summary "$TMP/saga.jsonl")" | tee -a "$TMP/all"
    if [ $pyg = yes ]; then
        if OMP_NUM_THREADS=$THREADS "$PYTHON" bench/sage_pyg.py --data "$DATA" --fanout "$FANOUT" \
            --batch-size "$BATCH" --hidden "$HIDDEN" --lr "$LR" --dropout "$DROPOUT" \
            --weight-decay "$DECAY" --epochs "$EPOCHS" --threads "$THREADS" --seed "$r" \
            --log "$TMP/pyg.jsonl" > "$TMP/pyg.out"; then
            echo "run $r pyg-minibatch $(summary "$TMP/pyg.jsonl")" | tee -a "$TMP/all"
            grep RESULT "$TMP/pyg.out" | tee -a "$TMP/pyg_results"
        else
            cat "$TMP/pyg.out"
            pyg=no
        fi
    fi
    OMP_NUM_THREADS=$THREADS "$SAGA" gcn "${common[@]}" --epochs "$FULL_EPOCHS" --seed "$r" \
        --log "$TMP/full.jsonl" > /dev/null
    echo "run $r saga-fullgraph $(summary "$TMP/full.jsonl")" | tee -a "$TMP/all"
done
python3 - "$TMP/all" <<'PY'
import collections, math, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    p = line.split()
    runs[p[2]].append([float(x) for x in p[3:]])
print("\nmedians over the runs: epoch ms | ms to the target | its epoch | test | val")
med = {}
for k, v in runs.items():
    col = lambda i: statistics.median(r[i] for r in v)
    med[k] = [col(i) for i in range(5)]
    print(f"  {k:16} {med[k][0]:10.1f} {med[k][1]:12.1f} {med[k][2]:5.0f} {med[k][3]:.4f} {med[k][4]:.4f}")
if "pyg-minibatch" in med:
    s, p = med["saga-minibatch"], med["pyg-minibatch"]
    print(f"pyg / saga: epoch time {p[0] / s[0]:.2f}x, time to the target "
          f"{p[1] / s[1] if s[1] > 0 and not math.isnan(s[1]) else float('nan'):.2f}x")
PY
echo
echo "the samplers alone (saga: $THREADS threads and fewer; PyG: its loader's pass in sage_pyg.py)"
OMP_NUM_THREADS=$THREADS "$SAMPLE" "$DATA" "$FANOUT" "$BATCH" 0 5
[ -f "$TMP/pyg_results" ] && sed 's/^/  /' "$TMP/pyg_results" || true
