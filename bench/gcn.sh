#!/usr/bin/env bash
# gcn.sh - saga's GCN against PyTorch Geometric's (bench/gcn_pyg.py: GCNConv, cached
# normalisation) and plain PyTorch's (bench/gcn_torch.py: torch.sparse.mm) on the CPU, on the same
# data: a generated graph (100,000 vertices, mean degree 20, 128 features, 8 classes) and Cora.
#
#   bench/gcn.sh [BUILD_DIR]    (EPOCHS=50 RUNS=3 THREADS="1 <all cores>" N=100000 DEG=20 F=128 C=8
#                                PYTHON=python3 SAGA_DATA_DIR=../shared/datasets)
#
# saga keeps sparse feature files sparse (its default); "saga dense" is the same run with
# --dense-features, handed the dense rows PyG and torch use (the net keeps rows with at most 25%
# non-zeros as a CSR it makes once: --sparse-below); "dense GEMM" adds --sparse-below 0, so the
# first layer multiplies the dense rows as PyG and torch do.
# All train Kipf & Welling's two-layer GCN (hidden 16, dropout 0.5, Adam) full-batch and report
# the median time of a training epoch (forward, backward, optimizer step; evaluation excluded).
# For each data set and thread count the programs run one after the other RUNS times (saga,
# PyG, torch, saga, ...), so that the machine's noise falls on all of them; the table gives the
# median over the runs of each program's median epoch, the ratios to saga, and test accuracy.
# PYTHON must import torch (and torch_geometric for the PyG column); a missing one is skipped
# with a message (bench/README.md: installing them with pip).
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
saga=$build/bin/saga
epochs=${EPOCHS:-50}
runs=${RUNS:-3}
threads=${THREADS:-"1 $(nproc)"}
n=${N:-100000} deg=${DEG:-20} f=${F:-128} c=${C:-8}
py=${PYTHON:-python3}
gen=$here/out/citation-$n-$deg-$f-$c
cora=${SAGA_DATA_DIR:-$here/../../shared/datasets}/cora
[ -x "$saga" ] || { echo "gcn.sh: $saga not built" >&2; exit 1; }
have_torch=0 have_pyg=0
"$py" -c 'import torch' 2>/dev/null && have_torch=1
"$py" -c 'import torch_geometric' 2>/dev/null && have_pyg=1
mkdir -p "$here/out"
if [ ! -d "$gen" ]; then
    "$saga" generate citation --vertices "$n" --degree "$deg" --features "$f" --classes "$c" \
        --seed 1 -o "$gen" --quiet
fi
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
if [ $have_torch = 1 ]; then
    echo "torch:   $("$py" -c 'import torch; print(torch.__version__)') ($py)"
else
    echo "torch:   $py cannot import torch: the torch and PyG columns are skipped"
fi
if [ $have_pyg = 1 ]; then
    echo "PyG:     $("$py" -c 'import torch_geometric; print(torch_geometric.__version__)')"
else
    echo "PyG:     $py cannot import torch_geometric: the PyG column is skipped (bench/README.md)"
fi
echo "run:     $epochs epochs per run, $runs alternating runs, medians"

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { if [ "$1" = - ] || [ "$2" = - ]; then echo -; else echo "$1 / $2" | bc -l | xargs printf '%.3f'; fi; }

sets="$gen"
if [ -d "$cora" ]; then sets="$sets $cora"; else echo "cora:    $cora not found; skipped"; fi
printf '\n%-28s %-7s %10s %10s %10s %10s %10s %9s %9s %9s %10s %8s %8s %8s\n' data threads \
    "saga ms" "saga dense" "dense GEMM" "PyG ms" "torch ms" "saga/PyG" "dense/PyG" "GEMM/PyG" \
    "saga/torch" "acc saga" "acc PyG" "acc torch"
for d in $sets; do
    for t in $threads; do
        s_all= sd_all= sg_all= p_all= q_all= s_acc=- p_acc=- q_acc=-
        for ((r = 1; r <= runs; r++)); do
            j=$(OMP_NUM_THREADS=$t "$saga" gcn --data "$d" --epochs "$epochs" --threads "$t" \
                --seed "$r" --json --quiet | tail -1)
            s_all="$s_all $(echo "$j" | sed -n 's/.*"epoch_ms_median":\([0-9.e+-]*\).*/\1/p')"
            s_acc=$(echo "$j" | sed -n 's/.*"test_accuracy":\([0-9.e+-]*\).*/\1/p')
            j=$(OMP_NUM_THREADS=$t "$saga" gcn --data "$d" --epochs "$epochs" --threads "$t" \
                --seed "$r" --dense-features --json --quiet | tail -1)
            sd_all="$sd_all $(echo "$j" | sed -n 's/.*"epoch_ms_median":\([0-9.e+-]*\).*/\1/p')"
            j=$(OMP_NUM_THREADS=$t "$saga" gcn --data "$d" --epochs "$epochs" --threads "$t" \
                --seed "$r" --dense-features --sparse-below 0 --json --quiet | tail -1)
            sg_all="$sg_all $(echo "$j" | sed -n 's/.*"epoch_ms_median":\([0-9.e+-]*\).*/\1/p')"
            if [ $have_pyg = 1 ]; then
                o=$(OMP_NUM_THREADS=$t "$py" "$here/gcn_pyg.py" --data "$d" --device cpu \
                    --epochs "$epochs" --threads "$t" --seed "$r" 2>/dev/null | grep RESULT || true)
                p_all="$p_all $(echo "$o" | sed -n 's/.*median_epoch_ms=\([0-9.]*\).*/\1/p')"
                p_acc=$(echo "$o" | sed -n 's/.*test_acc=\([0-9.]*\).*/\1/p')
            fi
            if [ $have_torch = 1 ]; then
                o=$(OMP_NUM_THREADS=$t "$py" "$here/gcn_torch.py" --data "$d" --epochs "$epochs" \
                    --threads "$t" --seeds 1 2>/dev/null || true)
                q_all="$q_all $(echo "$o" | sed -n 's/.*RESULT.*median_epoch_ms=\([0-9.]*\).*/\1/p')"
                q_acc=$(echo "$o" | sed -n 's/.*RESULT.*test_acc_mean=\([0-9.]*\).*/\1/p')
            fi
        done
        s=$(median $s_all) sd=$(median $sd_all) sg=$(median $sg_all)
        p=$(median $p_all) q=$(median $q_all)
        printf '%-28s %-7s %10.2f %10.2f %10.2f %10s %10s %9s %9s %9s %10s %8s %8s %8s\n' \
            "$(basename "$d")" "$t" "$s" "$sd" "$sg" "$p" "$q" "$(ratio "$s" "$p")" \
            "$(ratio "$sd" "$p")" "$(ratio "$sg" "$p")" "$(ratio "$s" "$q")" "$s_acc" \
            "${p_acc:--}" "${q_acc:--}"
        echo "  runs: saga$s_all | saga dense$sd_all | dense GEMM$sg_all | PyG${p_all:- -} |" \
            "torch${q_all:- -}"
    done
done
