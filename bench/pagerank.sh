#!/usr/bin/env bash
# pagerank.sh - `saga pagerank` against the strongest baselines on one R-MAT graph, side by side,
# with the floor the memory system sets beside each time.
#
#   bench/pagerank.sh [BUILD_DIR]   (SCALE=22 EDGE_FACTOR=16 ITERS=20 RUNS=5 DAMPING=0.85
#                                    THREADS="1 2" GAP_DIR= LLC_BYTES= GRAPH= ORDERS=degree)
#
# GRAPH names an edge list (a SNAP file, .gz or not) to run instead of the R-MAT graph. ORDERS
# lists saga's vertex orders to run (`saga pagerank --order`): the first is the "saga" column the
# peers are compared with, each other one gets a column of its own with the first's time over
# its time (ORDERS="degree out-degree graph" shows what each order buys).
#
# The peers:
#   graphblas  bench/pagerank_graphblas.c: SuiteSparse:GraphBLAS as LAGraph's LAGr_PageRank uses it
#              (iso-valued A^T, GxB_PLUS_SECOND_FP64, the dangling mass by a masked reduction), in
#              f64; built when libgraphblas-dev is installed; the same scores as saga's.
#   gap        the GAP benchmark suite's `pr` (Gauss-Seidel pull, float scores) and `pr_spmv`
#              (Jacobi pull), when GAP_DIR names a GAP build (bench/README.md says how to make one;
#              nothing of GAP is in this repository). GAP ignores the sinks' mass (its
#              specification's PageRank), so its scores are not compared, only its time.
# The graph (R-MAT, Graph500 parameters, seed 1) is generated once under bench/out/ and made
# simple (no parallel edges, no self loops: GAP's builder removes both, an iso-valued matrix
# counts a pair once), and every program loads that graph. All run a fixed ITERS iterations (no
# early stop) with each thread count in THREADS; only the iterations are timed (saga's
# `iterate_seconds`). The programs alternate within each of RUNS rounds; the table shows medians,
# ratios to saga, and the floor.
#
# The floor: a pull iteration must stream the in-edge offsets (8 bytes a vertex) and indices (4 an
# edge) and, per vertex, read the score and 1/out-degree, write the contribution, read it back in
# the next pass and write the new score (40 bytes); and it reads one contribution (8 bytes) per
# in-edge at random. While the contributions (8 n bytes) fit in the last-level cache (LLC_BYTES,
# default lscpu's L3) that costs 8 n bytes; past it, the share of reads that miss brings a whole
# 64-byte line each. The floor is those bytes at the STREAM-like triad bandwidth measured with the
# same threads (bench_spmm --stream): no pull implementation of this PageRank moves less.
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
scale=${SCALE:-22}
ef=${EDGE_FACTOR:-16}
iters=${ITERS:-20}
runs=${RUNS:-5}
damping=${DAMPING:-0.85}
threads_list=${THREADS:-1 2}
read -r -a orders <<<"${ORDERS:-degree}"
saga=$build/bin/saga
grb=$build/bin/pagerank_graphblas
spmm=$build/bin/bench_spmm
out=$here/out
raw=$out/rmat${scale}-ef${ef}.sgr
graph=$out/rmat${scale}-ef${ef}-simple.sgr
if [ -n "${GRAPH:-}" ]; then
    [ -s "$GRAPH" ] || { echo "pagerank.sh: GRAPH=$GRAPH is not a file" >&2; exit 1; }
    raw=$GRAPH
    name=$(basename "$GRAPH")
    graph=$out/${name%%.*}-simple.sgr
fi
[ -x "$saga" ] || { echo "pagerank.sh: $saga not built" >&2; exit 1; }
have_grb=1 have_gap=0
if [ ! -x "$grb" ]; then
    echo "pagerank.sh: $grb not built (install libgraphblas-dev and reconfigure): GraphBLAS skipped" >&2
    have_grb=0
fi
if [ -n "${GAP_DIR:-}" ]; then
    if [ -x "$GAP_DIR/pr" ] && [ -x "$GAP_DIR/pr_spmv" ] && [ -x "$GAP_DIR/converter" ]; then
        have_gap=1
    else
        echo "pagerank.sh: GAP_DIR=$GAP_DIR lacks pr, pr_spmv or converter (make pr pr_spmv converter there): GAP skipped" >&2
    fi
else
    echo "pagerank.sh: GAP_DIR not set: GAP skipped (bench/README.md: how to build it)" >&2
fi
mkdir -p "$out"
if [ ! -s "$graph" ]; then
    [ -s "$raw" ] || "$saga" generate rmat --scale "$scale" --edge-factor "$ef" --seed 1 -o "$raw" --quiet
    "$saga" convert --quiet --duplicates drop --self-loops drop "$raw" "$graph.tmp.sgr"
    mv "$graph.tmp.sgr" "$graph"
fi
if [ $have_gap = 1 ] && [ ! -s "$graph.gap.sg" ]; then
    # the same edges as a text edge list (R-MAT's edge k depends only on the seed and k), which
    # GAP's converter reads and makes simple as saga's convert did; GAP's reader takes no comments
    if [ -n "${GRAPH:-}" ]; then
        { case "$GRAPH" in *.gz) zcat "$GRAPH" ;; *) cat "$GRAPH" ;; esac; } |
            grep -v '^#' >"$out/gap-edges.el"
    else
        "$saga" generate rmat --scale "$scale" --edge-factor "$ef" --seed 1 -o "$out/gap-edges.txt" --quiet
        grep -v '^#' "$out/gap-edges.txt" >"$out/gap-edges.el"
        rm -f "$out/gap-edges.txt"
    fi
    "$GAP_DIR/converter" -f "$out/gap-edges.el" -b "$graph.gap.sg.tmp" >/dev/null
    mv "$graph.gap.sg.tmp" "$graph.gap.sg"
    rm -f "$out/gap-edges.el"
fi
info=$("$saga" info --json --quiet "$graph" | tail -n1)
n=$(echo "$info" | sed 's/.*"vertices":\([0-9]*\).*/\1/')
m=$(echo "$info" | sed 's/.*"edges":\([0-9]*\).*/\1/')
# lscpu's L3 line ("32 MiB (1 instance)"): one instance's share (some VMs report more in -B form)
llc=${LLC_BYTES:-$(lscpu 2>/dev/null | awk -F: '/L3 cache/ {
    split($2, f, " "); v = f[1]; u = f[2]; k = 1
    if (u ~ /^K/) k = 1024; else if (u ~ /^M/) k = 1048576; else if (u ~ /^G/) k = 1073741824
    i = $2; sub(/.*\(/, "", i); i = i + 0; if (i < 1) i = 1
    printf "%d", v * k / i; exit }')}
llc=${llc:-33554432}
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), L3 $((llc >> 20)) MiB, load average $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -n "${GRAPH:-}" ]; then
    echo "graph:   $graph: $GRAPH, simple: $n vertices, $m edges"
else
    echo "graph:   $graph: R-MAT scale $scale, edge factor $ef, simple: $n vertices, $m edges"
fi
echo "run:     $iters iterations, damping $damping, threads: $threads_list, $runs alternating rounds"

tiny=1e-300 # a tolerance no L1 change reaches: every program runs exactly $iters iterations
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ms() { awk -v s="$1" 'BEGIN { printf (1e3 * s < 1 ? "%.4f" : "%.2f"), 1e3 * s }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else printf "-" }'; }

declare -A table
for t in $threads_list; do
    export OMP_NUM_THREADS=$t
    bw=$("$spmm" --stream "$t" | awk '{ print $(NF - 1) }')
    floor=$(awk -v n="$n" -v m="$m" -v llc="$llc" -v bw="$bw" 'BEGIN {
        stream = 8 * (n + 1) + 4 * m + 40 * n; f = 8 * n
        rnd = f <= llc ? f : f + m * 64 * (1 - llc / f)
        printf "%.6f", (stream + rnd) / (bw * 1e9) }')
    s_all= g_all= p_all= v_all=
    declare -A o_all=()
    for ((i = 1; i <= runs; i++)); do
        for o in "${orders[@]}"; do
            j=$("$saga" pagerank "$graph" --damping "$damping" --tol $tiny --max-iters "$iters" \
                --allow-unconverged --top 10 --out "$out/pagerank-saga-$o.txt" --json --quiet \
                --threads "$t" --order "$o")
            spi=$(echo "$j" | sed 's/.*"seconds_per_iteration":\([0-9.e+-]*\).*/\1/')
            echo "$t threads, round $i: saga --order $o $(ms "$spi") ms"
            o_all[$o]="${o_all[$o]:-} $spi"
        done
        s_all=${o_all[${orders[0]}]}
        if [ $have_grb = 1 ]; then
            r=$("$grb" "$graph" --damping "$damping" --tol 0 --max-iters "$iters" --top 0 \
                --out "$out/pagerank-graphblas.txt" 2>/dev/null | tail -n1)
            spi=$(echo "$r" | sed 's/.*seconds_per_iteration=\([0-9.e+-]*\).*/\1/')
            echo "$t threads, round $i: graphblas $(ms "$spi") ms"
            g_all="$g_all $spi"
        fi
        if [ $have_gap = 1 ]; then
            for prog in pr pr_spmv; do
                tt=$("$GAP_DIR/$prog" -f "$graph.gap.sg" -n 1 -i "$iters" -t 0 |
                    awk '/Trial Time:/ { print $3 }' | head -n1)
                spi=$(awk -v s="$tt" -v k="$iters" 'BEGIN { printf "%.6f", s / k }')
                echo "$t threads, round $i: gap $prog $(ms "$spi") ms"
                [ $prog = pr ] && p_all="$p_all $spi" || v_all="$v_all $spi"
            done
        fi
    done
    s=$(median $s_all)
    table[$t]="$(ms "$s") | $(ms "$floor") ($(ratio "$s" "$floor")x) | $bw"
    for peer in g p v; do
        eval "all=\$${peer}_all"
        # shellcheck disable=SC2154
        if [ -n "$all" ]; then
            x=$(median $all)
            table[$t]+=" | $(ms "$x") ($(ratio "$s" "$x"))"
        else
            table[$t]+=" | -"
        fi
    done
    for o in "${orders[@]:1}"; do
        x=$(median ${o_all[$o]})
        table[$t]+=" | $(ms "$x") ($(ratio "$s" "$x"))"
    done
done

if [ $have_grb = 1 ]; then
    l1=$(paste -d' ' "$out/pagerank-saga-${orders[0]}.txt" "$out/pagerank-graphblas.txt" | awk '
        $1 != $3 { print "id mismatch at line " NR > "/dev/stderr"; exit 1 }
        { d = $2 - $4; d = d < 0 ? -d : d; s += d; r = $2 > 0 ? d / $2 : 0; if (r > mr) mr = r }
        END { printf "L1 %.3g, largest relative difference %.3g", s, mr }')
    echo "saga against GraphBLAS's scores: $l1"
fi
echo
echo "== ms per iteration, medians of $runs alternating rounds (saga / peer in brackets)"
head="threads | saga (--order ${orders[0]}) | floor (saga / floor) | triad GB/s | GraphBLAS (LAGraph) | GAP pr | GAP pr_spmv"
for o in "${orders[@]:1}"; do
    head+=" | saga --order $o"
done
echo "$head"
for t in $threads_list; do
    echo "$t | ${table[$t]}"
done
