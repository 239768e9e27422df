#!/usr/bin/env bash
# gcn.sh - saga's GCN against PyTorch's (bench/gcn_torch.py, torch.sparse.mm) on the CPU, on the
# same generated graph: 100,000 vertices, mean degree 20, 128 features, 8 classes.
#
#   bench/gcn.sh [BUILD_DIR]      (EPOCHS=50 THREADS="1 2" N=100000 DEG=20 F=128 C=8)
#
# Both train Kipf & Welling's two-layer GCN (hidden 16, dropout 0.5, Adam) full-batch, and both
# report the median time of a training epoch (forward, backward, optimizer step; evaluation
# excluded). Both read the files `saga generate citation` writes under bench/out/.
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
saga=$build/bin/saga
epochs=${EPOCHS:-50}
threads=${THREADS:-"1 $(nproc)"}
n=${N:-100000} deg=${DEG:-20} f=${F:-128} c=${C:-8}
data=$here/out/citation-$n-$deg-$f-$c
[ -x "$saga" ] || { echo "gcn.sh: $saga not built" >&2; exit 1; }
py=
for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null && "$p" -c 'import torch' 2>/dev/null; then py=$p; break; fi
done
if [ ! -d "$data" ]; then
    "$saga" generate citation --vertices "$n" --degree "$deg" --features "$f" --classes "$c" \
        --seed 1 -o "$data" --quiet
fi
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "graph:   $data ($n vertices, mean degree $deg, $f features, $c classes), $epochs epochs"
[ -n "$py" ] && echo "torch:   $("$py" -c 'import torch; print(torch.__version__)')" ||
    echo "torch:   not found (Debian: python3-torch); only saga runs"
printf '\n%-8s %-16s %-16s %s\n' threads "saga ms/epoch" "torch ms/epoch" "torch / saga"
for t in $threads; do
    s=$(OMP_NUM_THREADS=$t "$saga" gcn --data "$data" --epochs "$epochs" --threads "$t" --json \
        --quiet | tail -1 | sed -n 's/.*"epoch_ms_median":\([0-9.e+-]*\).*/\1/p')
    p=-
    if [ -n "$py" ]; then
        p=$("$py" "$here/gcn_torch.py" --data "$data" --epochs "$epochs" --threads "$t" \
            --seeds 1 2>/dev/null | sed -n 's/.*RESULT.*median_epoch_ms=\([0-9.]*\).*/\1/p')
    fi
    r=-
    [ "$p" != - ] && [ -n "$p" ] && r=$(echo "$p / $s" | bc -l | xargs printf '%.2fx')
    printf '%-8s %-16.1f %-16s %s\n' "$t" "$s" "$p" "$r"
done
