#!/usr/bin/env bash
# ranks.sh - saga partition-parallel over MPI ranks: bytes exchanged per epoch (per iteration for
# PageRank) against ranks and partition, epoch time with 1 and 2 ranks on the same cores, and the
# alpha-beta model of an epoch (bench/ranks_model.py) checked against both and projected to GPUs.
#
#   bench/ranks.sh [BUILD_DIR]   (RANKS="2 4 8" PARTITIONS="metis contiguous random" N=1000000
#                                 DEG=10 F=16 C=8 BYTE_EPOCHS=3 PR_ITERS=10 ROUNDS=5
#                                 TIME_EPOCHS=5 CORA_EPOCHS=50 MODEL_ARGS="")
#
# Bytes: `saga gcn` on Cora and on a generated citation graph (N vertices, mean degree DEG, F
# features, C classes: `--synthetic N,DEG,F,C`), `saga pagerank --device cpu` on ca-GrQc and on
# the same generated graph (its edge list made undirected, as an .sgr under bench/out/), with
# every rank count in RANKS and every partition in PARTITIONS. Every rank holds the whole graph:
# 8 ranks on the 1M-vertex graph take about 9 GiB. The ranks share the cores (oversubscribed);
# byte counts do not depend on timing. GCN: the last of BYTE_EPOCHS training epochs (forward,
# backward, the loss and gradient all-reduces; evaluation excluded), summed over the ranks, split
# into halo rows (activations forward, their gradients back) and all-reduces (each rank counts
# the buffer once each way). PageRank: PR_ITERS iterations; per iteration the halo contributions
# and two 8-byte all-reduces (the final gather of the scores is left out). The script checks
# that METIS sends the fewest bytes for every graph and rank count, and that saga's byte counters
# agree with its row counts.
#
# Time: ROUNDS rounds, the configurations taking turns in each: `saga gcn` on the generated graph
# (TIME_EPOCHS epochs) with one rank of 2 threads, two ranks of 1 thread each (the same two
# cores), one rank of 1 thread (the per-core compute the model divides) and one rank of 1 thread
# with the graph in 2 parts (--stream --parts 2: the plan each of 2 ranks runs, without the
# exchanges); Cora (CORA_EPOCHS epochs) with two ranks, one rank, and one rank in 2 parts, 1
# thread each; then bench_comm between 2 ranks. Ranks are not bound to cores (--bind-to none);
# one rank runs without the launcher. Figures are medians over the rounds of each run's median
# epoch.
#
# Everything measured goes to bench/out/ranks/ (runs.jsonl: one object per run; comm.tsv:
# bench_comm's tables, by round; machine.txt); bench/ranks_model.py reads them (run it alone
# afterwards for other assumptions: python3 bench/ranks_model.py bench/out/ranks --help).
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
saga=$build/bin/saga
bcomm=$build/bin/bench_comm
ranks=${RANKS:-"2 4 8"}
partitions=${PARTITIONS:-"metis contiguous random"}
n=${N:-1000000} deg=${DEG:-10} f=${F:-16} c=${C:-8}
byte_epochs=${BYTE_EPOCHS:-3} pr_iters=${PR_ITERS:-10}
rounds=${ROUNDS:-5} time_epochs=${TIME_EPOCHS:-5} cora_epochs=${CORA_EPOCHS:-50}
datasets=${SAGA_DATA_DIR:-$here/../../shared/datasets}
cora=${CORA:-$datasets/cora}
grqc=${GRQC:-$datasets/ca-GrQc/ca-GrQc.txt.gz}
out=$here/out/ranks
[ -x "$saga" ] || { echo "ranks.sh: $saga not built" >&2; exit 1; }
[ -x "$bcomm" ] || { echo "ranks.sh: $bcomm not built" >&2; exit 1; }
command -v mpiexec >/dev/null || { echo "ranks.sh: no mpiexec (Debian: openmpi-bin); skipped" >&2; exit 0; }
if [ "$(id -u)" = 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
mpi() { mpiexec -n "$1" --oversubscribe --bind-to none "${@:2}"; }
if ! mpi 2 "$bcomm" 8 >/dev/null 2>&1; then
    echo "ranks.sh: bench_comm does not run 2 ranks under mpiexec (saga built without MPI?); skipped" >&2
    exit 0
fi
mkdir -p "$out"
: >"$out/runs.jsonl"
machine="$(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "$machine" >"$out/machine.txt"
echo "machine: $machine, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "mpi:     $(mpiexec --version 2>&1 | head -1)"

# One run: KIND (bytes or time) LABEL RANKS THREADS PARTITION saga-args...; appends its JSON,
# with the run's description, to runs.jsonl. One rank runs without the launcher.
run() {
    local kind=$1 label=$2 r=$3 t=$4 p=$5 j load
    shift 5
    load=$(cut -d' ' -f1 /proc/loadavg)
    if [ "$r" = 1 ]; then
        j=$(OMP_NUM_THREADS=$t "$saga" "$@" --json --quiet 2>"$out/last.err" | tail -1) || true
    else
        j=$(OMP_NUM_THREADS=$t mpi "$r" "$saga" "$@" --json --quiet 2>"$out/last.err" | tail -1) || true
    fi
    if [ "${j:0:1}" != "{" ]; then
        echo "ranks.sh: failed: $label, $r ranks, $t threads, $p: saga $*" >&2
        cat "$out/last.err" >&2
        exit 1
    fi
    python3 -c "import json, sys
j = json.loads(sys.argv[1])
j.update(kind=sys.argv[2], label=sys.argv[3], run_ranks=int(sys.argv[4]),
         run_threads=int(sys.argv[5]), partition=sys.argv[6], round=int(sys.argv[7]),
         load_before=float(sys.argv[8]))
print(json.dumps(j))" "$j" "$kind" "$label" "$r" "$t" "$p" "${round:-0}" "$load" >>"$out/runs.jsonl"
}

# ---- the generated graph's edge list for PageRank: the graph `--synthetic` builds
cdir=$out/citation-$n-$deg-$f-$c
sgr=$out/citation-$n-$deg.sgr
if [ ! -s "$sgr" ]; then
    [ -d "$cdir" ] || "$saga" generate citation --vertices "$n" --degree "$deg" --features "$f" \
        --classes "$c" --seed 1 -o "$cdir" --quiet
    "$saga" convert --undirected "$cdir/edges.txt.gz" "$sgr.tmp.sgr" --quiet
    mv "$sgr.tmp.sgr" "$sgr"
fi
gen=gen$((n / 1000))k
[ "$n" -ge 1000000 ] && [ $((n % 1000000)) = 0 ] && gen=gen$((n / 1000000))M

# ---- bytes against ranks and partition
echo
echo "bytes: GCN ($byte_epochs epochs, the last counted) and PageRank ($pr_iters iterations), ranks $ranks, partitions $partitions"
gcn_bytes() { # LABEL ARGS...
    local label=$1
    shift
    for r in $ranks; do
        for p in $partitions; do
            run bytes "$label" "$r" 1 "$p" gcn "$@" --epochs "$byte_epochs" --device cpu --threads 1 --partition "$p"
        done
    done
}
pr_bytes() { # LABEL FILE ARGS...
    local label=$1 file=$2
    shift 2
    for r in $ranks; do
        for p in $partitions; do
            run bytes "$label" "$r" 1 "$p" pagerank "$file" "$@" --device cpu --tol 1e-300 \
                --max-iters "$pr_iters" --allow-unconverged --top 0 --partition "$p"
        done
    done
}
gcn_bytes "gcn cora" --data "$cora"
gcn_bytes "gcn $gen" --synthetic "$n,$deg,$f,$c"
pr_bytes "pagerank ca-GrQc" "$grqc" --undirected
pr_bytes "pagerank $gen" "$sgr"
# the communicator at the oversubscribed rank counts, for the model's check there
: >"$out/comm.tsv"
for r in $ranks; do
    [ "$r" = 2 ] && continue
    mpi "$r" "$bcomm" | grep -v '^#' | grep -v '^op' | sed "s/^/0\t/" >>"$out/comm.tsv"
done

# ---- epoch time: 1 rank x 2 threads against 2 ranks x 1 thread, same two cores
echo
echo "time: $rounds rounds of: GCN --synthetic $n,$deg,$f,$c ($time_epochs epochs) with 1 rank x 2 threads,"
echo "      2 ranks x 1 thread, 1 rank x 1 thread, 1 rank x 1 thread in 2 parts; GCN on Cora"
echo "      ($cora_epochs epochs) with 2 ranks, 1 rank, 1 rank in 2 parts, 1 thread each; bench_comm, 2 ranks"
for round in $(seq 1 "$rounds"); do
    run time "gcn $gen" 1 2 none gcn --synthetic "$n,$deg,$f,$c" --epochs "$time_epochs" --device cpu --threads 2
    run time "gcn $gen" 2 1 metis gcn --synthetic "$n,$deg,$f,$c" --epochs "$time_epochs" --device cpu --threads 1
    run time "gcn $gen" 1 1 none gcn --synthetic "$n,$deg,$f,$c" --epochs "$time_epochs" --device cpu --threads 1
    run time "gcn $gen" 1 1 metis gcn --synthetic "$n,$deg,$f,$c" --epochs "$time_epochs" --device cpu --threads 1 --stream --parts 2
    run time "gcn cora" 2 1 metis gcn --data "$cora" --epochs "$cora_epochs" --device cpu --threads 1
    run time "gcn cora" 1 1 none gcn --data "$cora" --epochs "$cora_epochs" --device cpu --threads 1
    run time "gcn cora" 1 1 metis gcn --data "$cora" --epochs "$cora_epochs" --device cpu --threads 1 --stream --parts 2
    mpi 2 "$bcomm" | grep -v '^#' | grep -v '^op' | sed "s/^/$round\t/" >>"$out/comm.tsv"
done
unset round
rm -f "$out/last.err"

# ---- tables
python3 - "$out" <<'EOF'
import json, statistics, sys
out = sys.argv[1]
runs = [json.loads(l) for l in open(f"{out}/runs.jsonl")]

def split(j):
    """Per epoch (GCN) or iteration (PageRank): halo bytes, all-reduce bytes, total, and a
    consistency check of saga's counters (the total sent as the parts predict it)."""
    R = j["ranks"]
    sent = j["comm_bytes"]["sent"]
    if "iterations" in j:  # PageRank: remote_rows over all iterations, f64 rows; gather at the end
        it = j["iterations"]
        halo = j["remote_rows"] * 8 / it
        ar = 16 * R
        ok = sent == round((halo + ar) * it) + (R - 1) * j["vertices"] * 8
        return halo, ar, halo + ar, ok
    H, F, C = j["hidden"], j["features"], j["classes"]
    w1 = H if H < F else F  # the first layer multiplies by W before aggregating when it narrows
    w2 = C if C < H else H
    ar = R * (4 * j["parameters"] + 8)
    halo = sent - ar
    ok = halo == j["remote_rows"] * (w1 + w2) * 4  # rows forward at both widths, gradients back
    return halo, ar, sent, ok

print()
print("bytes per epoch (GCN) or per iteration (PageRank), summed over the ranks:")
print(f"{'run':<20} {'ranks':>5} {'partition':<10} {'edge cut':>10} {'rows/xchg':>10} "
      f"{'halo bytes':>13} {'allreduce':>10} {'total':>13} {'vs metis':>8}")
groups = {}
for j in runs:
    if j["kind"] != "bytes":
        continue
    groups.setdefault((j["label"], j["ranks"]), []).append(j)
bad_counts, verdicts = [], []
for (label, R), js in groups.items():
    tot = {j["partition"]: split(j)[2] for j in js}
    for j in js:
        halo, ar, total, ok = split(j)
        if not ok:
            bad_counts.append(f"{label}, {R} ranks, {j['partition']}")
        ratio = total / tot["metis"] if "metis" in tot and tot["metis"] else float("nan")
        print(f"{label:<20} {R:>5} {j['partition']:<10} {j.get('edge_cut', '-'):>10} "
              f"{j['remote_rows'] // (1 if 'iterations' in j else 2) // (j.get('iterations') or 1):>10} "
              f"{halo:>13.0f} {ar:>10} {total:>13.0f} {ratio:>7.2f}x")
    if "metis" in tot:
        worse = [p for p, b in tot.items() if p != "metis" and b <= tot["metis"]]
        verdicts.append((label, R, worse))
print("(rows/xchg: rows received from other ranks in one exchange, summed over the ranks; "
      "allreduce: the loss and the gradients, or PageRank's two sums; vs metis: total / METIS's)")
print()
fails = [v for v in verdicts if v[2]]
if not fails:
    print(f"METIS sends the fewest bytes in all {len(verdicts)} cases (graph x ranks).")
else:
    for label, R, worse in fails:
        print(f"!!! METIS DOES NOT SEND THE FEWEST BYTES: {label}, {R} ranks: "
              f"{', '.join(worse)} sends as few or fewer !!!")
if bad_counts:
    print("!!! saga's byte counters disagree with its row counts for: " + "; ".join(bad_counts))
else:
    print("saga's comm_bytes agree with remote_rows x row widths + the all-reduces in every run.")

print()
print("epoch time, GCN on the generated graph (median epoch of each run; median over the rounds):")
t = {}
for j in runs:
    if j["kind"] == "time" and j["label"].startswith("gcn gen"):
        t.setdefault((j["ranks"], j["run_threads"], j["parts"]), []).append(j)
print(f"{'run':<30} {'rounds':>6} {'ms/epoch':>9}  {'each round':<22} {'comm s':>7} {'comm share':>10}")
med = {}
for key, desc in (((1, 2, 1), "1 rank x 2 threads"), ((2, 1, 2), "2 ranks x 1 thread"),
                  ((1, 1, 1), "1 rank x 1 thread"), ((1, 1, 2), "1 rank x 1 thread, 2 parts")):
    js = t.get(key, [])
    if not js:
        continue
    ms = [j["epoch_ms_median"] for j in js]
    cs = [j["comm_seconds"] for j in js]
    share = [c * 1e3 / m for c, m in zip(cs, ms)]
    med[key] = statistics.median(ms)
    each = " ".join(f"{m:.0f}" for m in ms)
    print(f"{desc:<30} {len(js):>6} {med[key]:>9.1f}  {each:<22} "
          f"{statistics.median(cs):>7.3f} {100 * statistics.median(share):>9.1f}%")
loads = {}
for js in t.values():
    for j in js:
        loads.setdefault(j["round"], []).append(j["load_before"])
print("load average (1 min) before the runs of each round: " + "; ".join(
    f"round {r}: {min(v):.1f}-{max(v):.1f}" for r, v in sorted(loads.items())))
if (1, 2, 1) in med and (2, 1, 2) in med:
    print(f"2 ranks x 1 thread against 1 rank x 2 threads (the same two cores): "
          f"{med[(2, 1, 2)] / med[(1, 2, 1)]:.2f}x the epoch time")
if (1, 1, 1) in med and (1, 2, 1) in med:
    print(f"1 rank: 1 thread takes {med[(1, 1, 1)] / med[(1, 2, 1)]:.2f}x the epoch time of 2 threads")
if (1, 1, 2) in med and (1, 1, 1) in med:
    print(f"1 rank x 1 thread: the graph in 2 parts (the plan each of 2 ranks runs, with its "
          f"copies) takes {med[(1, 1, 2)] / med[(1, 1, 1)]:.2f}x the epoch in memory")
if (1, 1, 2) in med and (2, 1, 2) in med:
    print(f"2 parts, 1 thread each: 2 ranks take {med[(2, 1, 2)] / med[(1, 1, 2)]:.2f}x the "
          f"epoch time of 1 rank running both")
print("(comm s: the last epoch's exchange time of the slowest rank, with the waits in it; "
      "comm share: of that run's median epoch; 2 parts: --stream --parts 2)")
EOF

echo
python3 "$here/ranks_model.py" "$out" ${MODEL_ARGS:-}
