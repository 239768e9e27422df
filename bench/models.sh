#!/usr/bin/env bash
# models.sh - bench_models (a 2- and a 3-layer GCN, GraphSAGE, a GAT-like network and GIN on a
# data set's split, in memory) of this build, and of another build's bench_models when BASE names
# one, alternating RUNS times: each model's median training step and evaluation in ms, medians
# over the runs, and the ratios. Build the other version's with the same source against its
# library (without BENCH_FORWARD_ROWS where it has no saga_net_forward_rows).
#
#   bench/models.sh [BUILD_DIR]      (DATA=$SAGA_DATA_DIR/cora EPOCHS=50 RUNS=3 BASE=)
set -euo pipefail
build=${1:-build}
bin=$build/bin/bench_models
base=${BASE:-}
data=${DATA:-${SAGA_DATA_DIR:-../shared/datasets}/cora}
epochs=${EPOCHS:-50} runs=${RUNS:-3}
[ -x "$bin" ] || { echo "models.sh: $bin not built" >&2; exit 1; }
[ -z "$base" ] || [ -x "$base" ] || { echo "models.sh: BASE=$base is not an executable" >&2; exit 1; }
echo "machine: $(nproc --all) cores (${OMP_NUM_THREADS:-all} threads), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "data:    $data, $epochs epochs per run, $runs alternating runs"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for ((r = 1; r <= runs; r++)); do
    [ -n "$base" ] && "$base" "$data" "$epochs" | sed "s/^/base $r /" | tee -a "$tmp/all"
    "$bin" "$data" "$epochs" | sed "s/^/this $r /" | tee -a "$tmp/all"
done
python3 - "$tmp/all" <<'PY'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    b, r, name, stages = line.split()[:4]
    t = float(re.search(r"train +([\d.]+)", line).group(1))
    e = float(re.search(r"eval +([\d.]+)", line).group(1))
    rows.setdefault((name + " " + stages, b), []).append((t, e))
print("%-10s %-5s %10s %10s %10s" % ("model", "build", "train ms", "eval ms", "epoch ms"))
for (m, b), v in sorted(rows.items()):
    t = statistics.median(x[0] for x in v); e = statistics.median(x[1] for x in v)
    print("%-10s %-5s %10.3f %10.3f %10.3f" % (m, b, t, e, t + e))
    if b == "this" and (m, "base") in rows:
        w = rows[(m, "base")]
        tb = statistics.median(x[0] for x in w); eb = statistics.median(x[1] for x in w)
        print("%-10s ratio %10.2f %10.2f %10.2f" % (m, t / tb, e / eb, (t + e) / (tb + eb)))
PY
