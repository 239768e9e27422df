#!/usr/bin/env bash
# stream.sh - GCN training streamed through a device budget 4x smaller than what the in-memory
# run peaks at: epoch time streamed vs in memory, and bytes moved with METIS, contiguous and
# random parts.
#
#   bench/stream.sh [BUILD_DIR]      (EPOCHS=20 N=200000 DEG=20 F=128 C=8 OVER=4 DEVICE=cpu)
#
# The in-memory run measures its own peak device bytes (graph, features, activations, the
# compute's tensors); the streamed runs get --device-mem peak/OVER, so what they stream is OVER
# times what they may hold. Figures are medians over the epochs; bytes are per epoch. The PageRank
# part (an R-MAT graph under bench/out/, or PR_GRAPH) runs on the same DEVICE.
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
saga=$build/bin/saga
epochs=${EPOCHS:-20}
n=${N:-200000} deg=${DEG:-20} f=${F:-128} c=${C:-8} over=${OVER:-4} device=${DEVICE:-cpu}
[ -x "$saga" ] || { echo "stream.sh: $saga not built" >&2; exit 1; }
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "graph:   generated citation graph, $n vertices, mean degree $deg, $f features, $c classes; $epochs epochs, device $device"
run() {
    "$saga" gcn --synthetic "$n,$deg,$f,$c" --epochs "$epochs" --device "$device" --stats --json \
        --quiet "$@" | tail -1
}
field() { python3 -c "import json,sys; print(json.loads(sys.stdin.read())['$1'])"; }
mem=$(run)
peak=$(echo "$mem" | field peak_device_bytes)
budget=$((peak / over))
ms_mem=$(echo "$mem" | field epoch_ms_median)
echo "device:  $(echo "$mem" | field device)"
printf "%-28s %10s %7s %14s %14s %14s %8s\n" run "ms/epoch" parts "h2d bytes" "d2h bytes" "peak bytes" overlap
line() {
    printf "%-28s %10.1f %7s %14s %14s %14s %7.0f%%\n" "$1" "$(echo "$2" | field epoch_ms_median)" \
        "$(echo "$2" | field parts)" "$(echo "$2" | field h2d_bytes)" "$(echo "$2" | field d2h_bytes)" \
        "$(echo "$2" | field peak_device_bytes)" \
        "$(python3 -c "print(100*$(echo "$2" | field overlap))")"
}
line "in memory" "$mem"
for p in metis contiguous random; do
    out=$(run --device-mem "$budget" --partition "$p")
    line "streamed 1/$over, $p" "$out"
    [ "$p" = metis ] && ms_metis=$(echo "$out" | field epoch_ms_median)
done
out=$(run --device-mem "$budget" --partition metis --saved offload)
line "streamed 1/$over, metis, offload" "$out"
python3 -c "print('streamed (metis) runs at %.0f%% of the in-memory throughput' % (100 * $ms_mem / $ms_metis))"

# PageRank (f64) through the executor: in memory, then streamed through a quarter of its peak.
g=${PR_GRAPH:-}
if [ -z "$g" ]; then
    g=$here/out/rmat18.sgr
    [ -f "$g" ] || { mkdir -p "$here/out" && "$saga" generate rmat --scale 18 --edge-factor 16 --seed 1 -o "$g" --quiet; }
fi
echo
echo "pagerank: $g, 30 iterations, device $device"
prun() { "$saga" pagerank "$g" --device "$device" --tol 1e-300 --max-iters 30 --allow-unconverged --top 0 --json --quiet --stats "$@" | tail -1; }
pmem=$(prun)
ppeak=$(echo "$pmem" | field peak_device_bytes)
printf "%-28s %10s %7s %14s %14s %14s %8s\n" run "ms/iter" parts "h2d bytes" "d2h bytes" "peak bytes" overlap
pline() {
    printf "%-28s %10.2f %7s %14s %14s %14s %7.0f%%\n" "$1" "$(python3 -c "print(1e3*$(echo "$2" | field seconds_per_iteration))")" \
        "$(echo "$2" | field parts)" "$(echo "$2" | field h2d_bytes)" "$(echo "$2" | field d2h_bytes)" \
        "$(echo "$2" | field peak_device_bytes)" "$(python3 -c "print(100*$(echo "$2" | field overlap))")"
}
pline "in memory" "$pmem"
for p in metis contiguous random; do
    pline "streamed 1/$over, $p" "$(prun --device-mem $((ppeak / over)) --partition "$p")"
done
