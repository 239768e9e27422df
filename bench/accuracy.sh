#!/usr/bin/env bash
# accuracy.sh - the test accuracy `saga gcn --model M` reaches on a data set's split with each
# model's defaults, over SEEDS, under two protocols: the final model after EPOCHS epochs (as the
# GCN paper reports), and early stopping (`--early-stop PATIENCE`: the model of the best
# validation accuracy, training ended PATIENCE epochs after it, as the GAT paper reports). Prints
# each seed's figure, the means, the epochs early stopping ran and the machine.
#
#   bench/accuracy.sh [BUILD_DIR]   (DATA=$SAGA_DATA_DIR/cora MODELS="gcn gat sage gin"
#                                    SEEDS="1 2 3 4 5" EPOCHS=200 PATIENCE=100 DEVICE=cpu)
set -euo pipefail
build=${1:-build}
saga=$build/bin/saga
data=${DATA:-${SAGA_DATA_DIR:-../shared/datasets}/cora}
models=${MODELS:-"gcn gat sage gin"}
seeds=${SEEDS:-"1 2 3 4 5"}
epochs=${EPOCHS:-200} patience=${PATIENCE:-100} device=${DEVICE:-cpu}
[ -x "$saga" ] || { echo "accuracy.sh: $saga not built" >&2; exit 1; }
[ -d "$data" ] || { echo "accuracy.sh: no data set at $data" >&2; exit 1; }
echo "machine: $(nproc --all) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "data:    $data, $epochs epochs, seeds $seeds, early stopping's patience $patience, $device"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for m in $models; do
    for s in $seeds; do
        "$saga" gcn --data "$data" --model "$m" --epochs "$epochs" --seed "$s" --device "$device" \
            --json --quiet | tail -n 1 >>"$tmp/$m.final"
        "$saga" gcn --data "$data" --model "$m" --epochs "$epochs" --seed "$s" --device "$device" \
            --early-stop "$patience" --json --quiet | tail -n 1 >>"$tmp/$m.early"
    done
done
python3 - "$tmp" $models <<'PY'
import json, os, sys
d = sys.argv[1]
print("%-6s %-34s %7s   %-34s %7s   %s" % ("model", "final model", "mean", "early stopping",
                                           "mean", "epochs run"))
for m in sys.argv[2:]:
    f = [json.loads(l) for l in open(os.path.join(d, m + ".final"))]
    e = [json.loads(l) for l in open(os.path.join(d, m + ".early"))]
    fa = [x["test_accuracy"] for x in f]
    ea = [x["test_accuracy"] for x in e]
    print("%-6s %-34s %7.4f   %-34s %7.4f   %s" % (
        m, " ".join("%.3f" % a for a in fa), sum(fa) / len(fa),
        " ".join("%.3f" % a for a in ea), sum(ea) / len(ea),
        " ".join("%d/%d" % (x["model_epoch"], x["epochs"]) for x in e)))
PY
