#!/usr/bin/env bash
# minibatch_ranks.sh - mini-batch training over shards against one process: GraphSAGE (mean) on
# sampled mini-batches (`saga gcn --model sage --fanout`), once by one process on the whole data
# set with THREADS threads and once over RANKS ranks (`mpirun -np RANKS`) of THREADS / RANKS
# threads each, each rank on its own shard (`saga partition --shards`), alternating in each
# round. Both cut each epoch's batches by seed count and sample them on the training's path
# (where ranks always sample), so the two differ only in where the rows live. Per run: the median epoch time, the
# final test accuracy and, over ranks, the bytes rank 0's samples exchanged.
#
#   bench/minibatch_ranks.sh                 Cora (Planetoid split), fan-outs 15,10, batches of 64
#   DATA=DIR BATCH=1024 EPOCHS=5 RUNS=3 RANKS=2 THREADS=2 FANOUT=15,10 bench/minibatch_ranks.sh
#
# A generated graph with a larger training set: see bench/minibatch.sh (TRAIN=...).
set -euo pipefail
cd "$(dirname "$0")/.."
SAGA=${SAGA:-build/bin/saga}
DATA=${DATA:-${SAGA_DATA_DIR:-../shared/datasets}/cora}
FANOUT=${FANOUT:-15,10}
BATCH=${BATCH:-64}
EPOCHS=${EPOCHS:-30}
RUNS=${RUNS:-3}
RANKS=${RANKS:-2}
THREADS=${THREADS:-$(nproc)}
MPIRUN=${MPIRUN:-mpirun}
[ -x "$SAGA" ] || { echo "minibatch_ranks.sh: build first (make build)" >&2; exit 1; }
[ -d "$DATA" ] || { echo "minibatch_ranks.sh: no data set at $DATA" >&2; exit 1; }
command -v "$MPIRUN" >/dev/null || { echo "minibatch_ranks.sh: no $MPIRUN: skipped" >&2; exit 0; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
per_rank=$((THREADS / RANKS > 0 ? THREADS / RANKS : 1))
"$SAGA" partition --data "$DATA" --shards "$RANKS" -o "$TMP/shards" --quiet
echo "data $DATA over $RANKS shards; fan-outs $FANOUT, batches of $BATCH, $EPOCHS epochs;" \
    "one process of $THREADS threads against $RANKS ranks of $per_rank; load $(cut -d' ' -f1-3 /proc/loadavg)"
args=(gcn --model sage --fanout "$FANOUT" --batch-size "$BATCH" --epochs "$EPOCHS" --json --quiet
    --batch-balance none --prefetch 0)
for r in $(seq 1 "$RUNS"); do
    OMP_NUM_THREADS=$THREADS "$SAGA" "${args[@]}" --data "$DATA" >"$TMP/one.json"
    OMP_NUM_THREADS=$per_rank "$MPIRUN" -np "$RANKS" --oversubscribe -x OMP_NUM_THREADS \
        "$SAGA" "${args[@]}" --data "$TMP/shards" >"$TMP/ranks.json"
    python3 - "$TMP/one.json" "$TMP/ranks.json" "$r" <<'PY'
import json, sys
one = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
rk = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
c = rk["sample_comm_bytes"]
print(f"round {sys.argv[3]}: one process {one['epoch_ms_median']:.2f} ms/epoch, test "
      f"{one['test_accuracy']:.4f}; {rk['ranks']} ranks {rk['epoch_ms_median']:.2f} ms/epoch, test "
      f"{rk['test_accuracy']:.4f}, rank 0's samples sent {c['sent'] / 1e6:.2f} MB, received "
      f"{c['received'] / 1e6:.2f} MB; ranks / one {rk['epoch_ms_median'] / one['epoch_ms_median']:.2f}x")
PY
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
