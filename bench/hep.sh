#!/usr/bin/env bash
# hep.sh - saga's Interaction Network for track finding (`saga hep train`) against the same model
# in PyTorch Geometric (bench/hep_pyg.py) on the same graphs: generated collision events, built by
# `saga hep build --export` into NumPy archives that the PyG side reads.
#
#   bench/hep.sh [BUILD_DIR]    (EVENTS=20 EPOCHS=5 RUNS=2 THREADS=<all cores> BATCH_EVENTS=1
#                                HIDDEN=32 ITERATIONS=4 LR=0.003 LR_SCHEDULE=cosine POS_WEIGHT=1
#                                EVAL_FRACTION=0.2 MAX_PARTICLES=3000 PYTHON=python3)
#
# The model's settings default to saga hep train's own defaults.
#
# Both train with the same hyper-parameters, the same train/eval split (the last EVAL_FRACTION of
# the events held out) and the same micro-batches (saga's random sampler, which hep_pyg.py draws
# from the same seed), on the CPU with the same threads (--threads, OMP_NUM_THREADS,
# torch.set_num_threads). For each thread count the two run one after the other RUNS times (saga,
# PyG, saga, ...) with seeds 1..RUNS, so the machine's noise falls on both; the table gives the
# median over the runs of each side's median epoch (collating or building the micro-batches,
# forward, backward, optimizer step; not the evaluation), their ratio, and the edge efficiency,
# purity, AUC and track efficiency on the held-out events of the last run. PYTHON must import
# torch and torch_geometric; otherwise saga runs alone and the PyG column says it was skipped
# (bench/README.md: installing PyG with pip).
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
saga=$build/bin/saga
events=${EVENTS:-20}
epochs=${EPOCHS:-5}
runs=${RUNS:-2}
threads=${THREADS:-$(nproc)}
batch=${BATCH_EVENTS:-1}
hidden=${HIDDEN:-32}
iters=${ITERATIONS:-4}
sched=${LR_SCHEDULE:-cosine}
lr=${LR:-0.003}
pw=${POS_WEIGHT:-1}
evf=${EVAL_FRACTION:-0.2}
maxp=${MAX_PARTICLES:-3000}
py=${PYTHON:-python3}
[ -x "$saga" ] || { echo "hep.sh: $saga not built" >&2; exit 1; }
have_pyg=0
"$py" -c 'import torch, torch_geometric' 2>/dev/null && have_pyg=1
ev=$here/out/hep-$events-$maxp
npz=$ev-npz
mkdir -p "$here/out"
# written each time (seconds): events of another release's generator must not linger
rm -rf "$ev" "$npz"
"$saga" hep generate -o "$ev" --events "$events" --max-particles "$maxp" --seed 1 --quiet
build_line=$("$saga" hep build --data "$ev" --export "$npz" --json --quiet | tail -1)

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$build_line" | python3 -c 'import json, sys
j = json.loads(sys.stdin.read())
print("data:    %d events, %d hits, %d edges (%d to %d per event), construction purity %.4f" % (
    j["events"], j["hits"], j["edges"], j["min_event_edges"], j["max_event_edges"],
    j["construction_purity"]))'
if [ $have_pyg = 1 ]; then
    echo "PyG:     torch $("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null), torch_geometric $("$py" -c 'import torch_geometric; print(torch_geometric.__version__)' 2>/dev/null) ($py)"
else
    echo "PyG:     $py cannot import torch and torch_geometric: the PyG column is skipped (bench/README.md)"
fi
echo "run:     $epochs epochs, hidden $hidden, $iters rounds, Adam lr $lr ($sched), pos_weight $pw, $batch events per micro-batch (random sampler), eval fraction $evf; $runs alternating runs, medians"

# field JSON KEY: a number from a JSON line
field() { echo "$1" | python3 -c 'import json, sys; v = json.loads(sys.stdin.read()).get(sys.argv[1]); print("-" if v is None else v)' "$2"; }
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { if [ "$1" = - ] || [ "$2" = - ]; then echo -; else echo "$1 / $2" | bc -l | xargs printf '%.2f'; fi; }
f4() { if [ "$1" = - ]; then echo -; else printf '%.4f' "$1"; fi; }

gemm=$build/bin/bench_gemm
# the mean edges of an event: the rows of the edge MLP's products in a step
mean_edges=$(echo "$build_line" | python3 -c 'import json, sys; j = json.loads(sys.stdin.read()); print(max(1, j["edges"] // j["events"]))')
# peak JSON-less: the best GFLOP/s bench_gemm reaches at the step's shapes on T threads
gemm_peak() {
    if [ -x "$gemm" ]; then
        "$gemm" "$hidden" "$mean_edges" "$1" 2>/dev/null | awk '/edge MLP/ { v = $(NF - 1); if (v > m) m = v } END { print m ? m : "-" }'
    else
        echo -
    fi
}
gf() { if [ "$1" = - ] || [ "$2" = - ]; then echo -; else echo "$1 / $2" | bc -l | xargs printf '%.1f'; fi; }
pct() { if [ "$1" = - ] || [ "$2" = - ]; then echo -; else echo "100 * $1 / $2" | bc -l | xargs printf '%.0f%%'; fi; }

printf '\n%-7s %-5s %10s %10s %9s %9s %9s %9s %9s\n' threads side "epoch s" "PyG/saga" \
    "edge eff" purity AUC "track eff" loss
for t in $threads; do
    s_all= p_all= sj= pj=
    for ((r = 1; r <= runs; r++)); do
        sj=$(OMP_NUM_THREADS=$t "$saga" hep train --data "$ev" --sampler random \
            --batch-events "$batch" --epochs "$epochs" --hidden "$hidden" --iterations "$iters" \
            --lr "$lr" --lr-schedule "$sched" --pos-weight "$pw" --eval-fraction "$evf" --seed "$r" \
            --threads "$t" --device cpu --json --quiet | tail -1)
        s_all="$s_all $(field "$sj" epoch_seconds)"
        if [ $have_pyg = 1 ]; then
            pj=$(OMP_NUM_THREADS=$t "$py" "$here/hep_pyg.py" --data "$npz" --batch-events "$batch" \
                --epochs "$epochs" --hidden "$hidden" --iterations "$iters" --lr "$lr" \
                --lr-schedule "$sched" --pos-weight "$pw" --eval-fraction "$evf" --seed "$r" --threads "$t" --json \
                2>/dev/null | tail -1)
            p_all="$p_all $(field "$pj" epoch_seconds)"
        fi
    done
    s=$(median $s_all) p=$(median $p_all)
    printf '%-7s %-5s %10.3f %10s %9s %9s %9s %9s %9s\n' "$t" saga "$s" "" \
        "$(f4 "$(field "$sj" edge_efficiency)")" "$(f4 "$(field "$sj" edge_purity)")" \
        "$(f4 "$(field "$sj" auc)")" "$(f4 "$(field "$sj" track_efficiency)")" \
        "$(f4 "$(field "$sj" loss)")"
    if [ $have_pyg = 1 ]; then
        printf '%-7s %-5s %10.3f %10s %9s %9s %9s %9s %9s\n' "$t" PyG "$p" "$(ratio "$p" "$s")" \
            "$(f4 "$(field "$pj" edge_efficiency)")" "$(f4 "$(field "$pj" edge_purity)")" \
            "$(f4 "$(field "$pj" auc)")" "$(f4 "$(field "$pj" track_efficiency)")" \
            "$(f4 "$(field "$pj" loss)")"
    else
        printf '%-7s %-5s %10s\n' "$t" PyG skipped
    fi
    echo "  runs (epoch s): saga$s_all | PyG${p_all:- -}; held-out tracks: saga $(field "$sj" tracks), PyG $(if [ -n "$pj" ]; then field "$pj" tracks; else echo -; fi)"
    # the epoch's matrix products (hep_step_flops: both sides multiply the same matrices) against
    # OpenBLAS's SGEMM at the edge MLP's shapes, measured now on the same threads
    flop=$(echo "$sj" | python3 -c 'import json, sys; print(json.loads(sys.stdin.read())["samplers"][0]["epoch_gflop"])')
    peak=$(gemm_peak "$t")
    s_gf=$(gf "$flop" "$s") p_gf=$(gf "$flop" "$p")
    echo "  products: $flop GFLOP an epoch; saga $s_gf GFLOP/s ($(pct "$s_gf" "$peak") of SGEMM's $peak GFLOP/s at the step's shapes, $mean_edges rows, $t threads), PyG $p_gf ($(pct "$p_gf" "$peak"))"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
