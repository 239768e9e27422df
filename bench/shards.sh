#!/usr/bin/env bash
# shards.sh - saga gcn over ranks that each read their own shard (saga partition --shards) against
# one process and against ranks that each read the whole graph: epoch time on the same two cores,
# bytes between the ranks, and peak host memory per rank.
#
#   bench/shards.sh [BUILD_DIR]   (N=1000000 DEG=10 F=16 C=8 ROUNDS=5 EPOCHS=8 MEM_RANKS=4
#                                  TRAIN="0 100000")
#
# Data: a generated citation graph (`saga generate citation`, N vertices, mean degree DEG, F
# features, C classes, seed 1) under bench/out/shards/, written once, and its shards for 2 and
# MEM_RANKS ranks (METIS), also once; the partitioning's time is printed. Each TRAIN value is a
# run of everything below: 0 keeps the generator's split (20 training vertices per class, so an
# epoch computes little beyond the exchanges' and the launch's costs), T > 0 trains on T vertices
# (a seeded sample of those outside the validation and test rows, in a copy of the directory that
# links the other files).
#
# Time: ROUNDS rounds, the configurations taking turns in each, EPOCHS epochs each, the median
# epoch of every run (training alone; the loss rows' savings apply in all three):
#   one    1 process of 2 threads on the data directory
#   shards 2 ranks of 1 thread, each on its shard (mpiexec --bind-to none)
#   whole  2 ranks of 1 thread, each reading the whole data directory (the parts dealt to ranks)
# Then the medians over the rounds and the ratios shards / one and shards / whole, and per run
# the bytes the ranks sent each other in an epoch and the halo rows they received.
#
# Memory: the peak resident set (GNU time's %M) of 1 process of 1 thread, and of each of MEM_RANKS
# ranks over shards and over the whole graph (3 epochs each), and the ratio of the largest rank's
# to the one process's.
#
# Then bench_comm between 2 ranks (comm.tsv) and bench/shards_model.py: the alpha-beta model of the
# epoch over shards checked against the run and projected to 8 GPUs over NVLink and 4 nodes over
# 100 Gb/s (for which the script also writes 8 shards: their halos).
#
# Needs mpiexec (Debian: openmpi-bin) and GNU time (/usr/bin/time, Debian: time); skips
# otherwise. Everything measured goes to bench/out/shards/ (runs.jsonl, memory.txt, comm.tsv,
# machine.txt).
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
saga=$build/bin/saga
n=${N:-1000000} deg=${DEG:-10} f=${F:-16} c=${C:-8}
rounds=${ROUNDS:-5} epochs=${EPOCHS:-8} mem_ranks=${MEM_RANKS:-4} trains=${TRAIN:-"0 100000"}
out=$here/out/shards
[ -x "$saga" ] || { echo "shards.sh: $saga not built" >&2; exit 1; }
command -v mpiexec >/dev/null || { echo "shards.sh: no mpiexec (Debian: openmpi-bin); skipped" >&2; exit 0; }
[ -x /usr/bin/time ] || { echo "shards.sh: no /usr/bin/time (Debian: time); skipped" >&2; exit 0; }
if [ "$(id -u)" = 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
mpi() { mpiexec -n "$1" --oversubscribe --bind-to none "${@:2}"; }
mkdir -p "$out"
: >"$out/runs.jsonl"
machine="$(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "$machine" >"$out/machine.txt"
echo "machine: $machine, load average $(cut -d' ' -f1-3 /proc/loadavg)"

base=$out/citation-$n-$deg-$f-$c
[ -d "$base" ] || "$saga" generate citation --vertices "$n" --degree "$deg" --features "$f" \
    --classes "$c" --seed 1 -o "$base" --quiet

# One run: NAME ROUND RANKS THREADS saga-args...; its JSON line, tagged, into runs.jsonl.
run() {
    local name=$1 round=$2 r=$3 t=$4 j load
    shift 4
    load=$(cut -d' ' -f1 /proc/loadavg)
    if [ "$r" = 1 ]; then
        j=$(OMP_NUM_THREADS=$t "$saga" "$@" --json --quiet 2>"$out/last.err" | tail -1) || true
    else
        j=$(OMP_NUM_THREADS=$t mpi "$r" "$saga" "$@" --json --quiet 2>"$out/last.err" | tail -1) || true
    fi
    if [ "${j:0:1}" != "{" ]; then
        echo "shards.sh: failed: $name: saga $*" >&2
        cat "$out/last.err" >&2
        exit 1
    fi
    python3 -c "import json, sys
j = json.loads(sys.argv[1])
j.update(name=sys.argv[2], round=int(sys.argv[3]), load_before=float(sys.argv[4]),
         train_rows=int(sys.argv[5]))
print(json.dumps(j))" "$j" "$name" "$round" "$load" "$train" >>"$out/runs.jsonl"
}

variant() { # TRAIN: the data directory of that training set, with its shards
    local t=$1 d=$base
    if [ "$t" != 0 ]; then
        d=$base-train$t
        if [ ! -s "$d/train_idx.txt" ]; then
            mkdir -p "$d"
            for f in edges.txt.gz features.txt.gz labels.txt classes.txt val_idx.txt test_idx.txt; do
                ln -sf "$base/$f" "$d/$f"
            done
            python3 - "$base" "$d" "$t" <<'PY'
import random, sys
base, d, t = sys.argv[1], sys.argv[2], int(sys.argv[3])
n = sum(1 for _ in open(f"{base}/labels.txt"))
held = {int(x) for f in ("val_idx.txt", "test_idx.txt") for x in open(f"{base}/{f}")}
rows = sorted(v for v in random.Random(1).sample(range(n), min(n, t + len(held))) if v not in held)[:t]
open(f"{d}/train_idx.txt", "w").write("".join(f"{v}\n" for v in rows))
PY
        fi
    fi
    for r in 2 "$mem_ranks" 8; do # 8: its manifest's halos, for bench/shards_model.py
        if ! "$saga" partition --check "$d.s$r" --quiet 2>/dev/null; then
            echo "partitioning $(basename "$d") into $r shards:" >&2
            "$saga" partition --data "$d" --shards "$r" -o "$d.s$r" | sed 's/^/  /' >&2
        fi
    done
    echo "$d"
}

: >"$out/memory.txt"
for train in $trains; do
data=$(variant "$train")
echo
echo "time: $rounds rounds of GCN on $n vertices ($epochs epochs): one (1 x 2 threads), shards"
echo "      (2 ranks x 1 thread, own shards), whole (2 ranks x 1 thread, whole graph each)"
for round in $(seq 1 "$rounds"); do
    run one "$round" 1 2 gcn --data "$data" --epochs "$epochs" --device cpu --threads 2
    run shards "$round" 2 1 gcn --data "$data.s2" --epochs "$epochs" --device cpu --threads 1
    run whole "$round" 2 1 gcn --data "$data" --epochs "$epochs" --device cpu --threads 1
done

echo
echo "memory: peak resident set, 1 process against each of $mem_ranks ranks (3 epochs)"
mem() { # NAME RANKS saga-args...: each rank's peak into its own file, then one line each
    local name=$1 r=$2
    shift 2
    rm -f "$out"/rss.*
    if [ "$r" = 1 ]; then
        OMP_NUM_THREADS=1 /usr/bin/time -f "%M" -o "$out/rss.0" "$saga" "$@" --quiet >/dev/null
    else
        OMP_NUM_THREADS=1 mpi "$r" bash -c '/usr/bin/time -f "%M" -o "$0/rss.$OMPI_COMM_WORLD_RANK$PMIX_RANK" "$@" --quiet' \
            "$out" "$saga" "$@" >/dev/null
    fi
    for f in "$out"/rss.*; do echo "$name rss $(tail -1 "$f")"; done
}
{
    mem one 1 gcn --data "$data" --epochs 3 --device cpu --threads 1
    mem shards "$mem_ranks" gcn --data "$data.s$mem_ranks" --epochs 3 --device cpu --threads 1
    mem whole "$mem_ranks" gcn --data "$data" --epochs 3 --device cpu --threads 1
} | sed "s/^/$train /" >>"$out/memory.txt"

python3 - "$out" "$train" <<'PY'
import json, statistics, sys
out, train = sys.argv[1], int(sys.argv[2])
runs = [json.loads(l) for l in open(f"{out}/runs.jsonl") if json.loads(l)["train_rows"] == train]
by = {}
for j in runs:
    by.setdefault(j["name"], []).append(j)
med = {k: statistics.median(j["epoch_ms_median"] for j in v) for k, v in by.items()}
print()
print(f"training rows: {'the generator split' if train == 0 else train}, stage rows of one process {by['one'][-1]['stage_rows']}")
print(f"{'run':8} {'median ms/epoch':>16}   per round                      {'accuracy':>9} {'bytes/epoch':>12} {'halo rows':>10}")
for k in ("one", "shards", "whole"):
    v = by[k]
    rounds = ", ".join(f"{j['epoch_ms_median']:.2f}" for j in v)
    cb = v[-1].get("comm_bytes", {}).get("sent", 0)
    print(f"{k:8} {med[k]:16.2f}   {rounds:30} {v[-1]['test_accuracy']:9.4f} {cb:12d} {v[-1].get('remote_rows', 0):10d}")
loads = [j["load_before"] for j in runs]
print(f"load average before the runs: {min(loads):.2f} to {max(loads):.2f}")
print(f"shards / one:   {med['shards'] / med['one']:.2f}x the epoch (2 ranks x 1 thread against 1 x 2 threads)")
print(f"shards / whole: {med['shards'] / med['whole']:.3f}x the epoch (2 ranks each on its shard against each on the whole graph)")
rss = {}
for line in open(f"{out}/memory.txt"):
    t, name, _, kb = line.split()
    if int(t) == train:
        rss.setdefault(name, []).append(int(kb))
print()
for k in ("one", "shards", "whole"):
    if k in rss:
        print(f"peak RSS {k:7} {', '.join(f'{x / 1024:.0f}' for x in rss[k])} MiB")
if "one" in rss and "shards" in rss:
    print(f"largest rank over shards / one process: {max(rss['shards']) / rss['one'][0]:.2f}x")
if "one" in rss and "whole" in rss:
    print(f"largest rank over the whole graph / one process: {max(rss['whole']) / rss['one'][0]:.2f}x")
PY
done

# the communicator between 2 ranks, and the model of the epoch (bench/shards_model.py)
bcomm=$build/bin/bench_comm
if [ -x "$bcomm" ]; then
    mpi 2 "$bcomm" | grep -v '^#' | grep -v '^op' >"$out/comm.tsv"
    for train in $trains; do
        echo
        python3 "$here/shards_model.py" "$out" --train "$train"
    done
fi
