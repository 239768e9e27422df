#!/usr/bin/env bash
# pagerank.sh - `saga pagerank` against the same PageRank in SuiteSparse:GraphBLAS
# (bench/pagerank_graphblas.c) on one R-MAT graph, side by side.
#
#   bench/pagerank.sh [BUILD_DIR]      (SCALE=22 EDGE_FACTOR=16 ITERS=20 RUNS=5 DAMPING=0.85)
#
# The graph (R-MAT, Graph500 parameters, seed 1) is generated once as an .sgr under bench/out/
# and both programs load that file. Both run a fixed ITERS iterations (no early stop), so the
# time per iteration compares like for like, on all cores (OMP_NUM_THREADS unset: every core).
# Only the iterations are timed (saga's `iterate_seconds`: the graph is loaded and its rows put
# in out-degree order before, as GraphBLAS builds its matrix before). The runs alternate between
# the two programs; every run is printed, the table shows the medians of RUNS, their ratio, and
# the L1 distance between the two programs' score vectors.
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
scale=${SCALE:-22}
ef=${EDGE_FACTOR:-16}
iters=${ITERS:-20}
runs=${RUNS:-5}
damping=${DAMPING:-0.85}
saga=$build/bin/saga
grb=$build/bin/pagerank_graphblas
out=$here/out
graph=$out/rmat${scale}-ef${ef}.sgr
[ -x "$saga" ] || { echo "pagerank.sh: $saga not built" >&2; exit 1; }
if [ ! -x "$grb" ]; then
    echo "pagerank.sh: $grb not built (install libgraphblas-dev and reconfigure); skipped" >&2
    exit 0
fi
mkdir -p "$out"
if [ ! -s "$graph" ]; then
    "$saga" generate rmat --scale "$scale" --edge-factor "$ef" --seed 1 -o "$graph.tmp.sgr"
    mv "$graph.tmp.sgr" "$graph"
fi
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "graph:   $graph ($(du -m "$graph" | cut -f1) MiB), R-MAT scale $scale, edge factor $ef"
echo "run:     $iters iterations, damping $damping, OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset}"

# A tolerance no L1 change reaches, so that both stop after exactly $iters iterations.
tiny=1e-300
saga_scores=$out/pagerank-saga.txt
grb_scores=$out/pagerank-graphblas.txt
saga_all= grb_all= saga_prep_all= saga_it= grb_it=
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

for ((i = 1; i <= runs; i++)); do
    echo
    echo "== run $i: saga"
    j=$("$saga" pagerank "$graph" --damping "$damping" --tol $tiny --max-iters "$iters" \
        --allow-unconverged --top 10 --out "$saga_scores" --json 2> >(grep -v "^saga: warning" >&2))
    spi=$(echo "$j" | sed 's/.*"seconds_per_iteration":\([0-9.e+-]*\).*/\1/')
    prep=$(echo "$j" | sed 's/.*"prepare_seconds":\([0-9.e+-]*\).*/\1/')
    saga_it=$(echo "$j" | sed 's/.*"iterations":\([0-9]*\).*/\1/')
    printf "saga: iterations=%s seconds_per_iteration=%s prepare_seconds=%s\n" "$saga_it" "$spi" "$prep"
    saga_all="$saga_all $spi" saga_prep_all="$saga_prep_all $prep"

    echo "== run $i: graphblas"
    r=$("$grb" "$graph" --damping "$damping" --tol 0 --max-iters "$iters" --top 10 \
        --out "$grb_scores")
    echo "$r"
    last=$(echo "$r" | tail -1)
    spi=$(echo "$last" | sed 's/.*seconds_per_iteration=\([0-9.e+-]*\).*/\1/')
    grb_it=$(echo "$last" | sed 's/.*iterations=\([0-9]*\).*/\1/')
    grb_all="$grb_all $spi"
done

# Both files list every vertex as "id score" in the same (original-id) order.
l1=$(paste -d' ' "$saga_scores" "$grb_scores" | awk '
    $1 != $3 { print "id mismatch at line " NR > "/dev/stderr"; exit 1 }
    { d = $2 - $4; s += d < 0 ? -d : d; if ((d < 0 ? -d : d) > m) m = d < 0 ? -d : d }
    END { printf "%.3g (max per vertex %.3g)", s, m }')

saga_med=$(median $saga_all) grb_med=$(median $grb_all)
echo
echo "== summary (medians of $runs alternating runs)"
printf "%-26s %14s %14s\n" "" "saga" "GraphBLAS"
printf "%-26s %14.4f %14.4f\n" "seconds per iteration" "$saga_med" "$grb_med"
printf "%-26s %14s %14s\n" "iterations" "$saga_it" "$grb_it"
printf "%-26s %14.3f\n" "saga setup (order, blocks)" "$(median $saga_prep_all)"
printf "%-26s %14.2f\n" "saga / GraphBLAS time" "$(echo "$saga_med / $grb_med" | bc -l)"
printf "L1 distance between the score vectors: %s\n" "$l1"
