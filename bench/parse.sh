#!/usr/bin/env bash
# parse.sh - edge-list loading: MB/s of text on one core for a ~1 GB SNAP-like file, gzip input
# against `zcat`, and peak memory against the final CSR size.
#
#   bench/parse.sh [BUILD_DIR]        (SAGA_BENCH_PARSE_MB=1024 sets the file size, RUNS=3)
#
# The files are generated once under bench/out/ and reused. Every figure is the best of RUNS runs
# on a warm page cache; all runs are printed.
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
bin=$build/bin/bench_parse
size_mb=${SAGA_BENCH_PARSE_MB:-1024}
runs=${RUNS:-3}
out=$here/out
txt=$out/edges-${size_mb}mb.txt
gz=$txt.gz
[ -x "$bin" ] || { echo "parse.sh: $bin not built (cmake --build $build --target bench_parse)" >&2; exit 1; }
mkdir -p "$out"

if [ ! -s "$txt" ]; then
    "$bin" --generate "$txt.tmp" "$size_mb"
    mv "$txt.tmp" "$txt"
fi
if [ ! -s "$gz" ]; then
    echo "compressing $txt (gzip -6) ..."
    gzip -6 -c "$txt" > "$gz.tmp"
    mv "$gz.tmp" "$gz"
fi
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "files:   $txt ($(du -m "$txt" | cut -f1) MiB), $gz ($(du -m "$gz" | cut -f1) MiB)"

pin=()
command -v taskset >/dev/null && pin=(taskset -c 0)

best() { # best (smallest) value of key $1 among RESULT lines on stdin
    sed -n "s/.*RESULT.* $1=\([0-9.]*\).*/\1/p" | sort -g | head -1
}
bestmax() {
    sed -n "s/.*RESULT.* $1=\([0-9.]*\).*/\1/p" | sort -gr | head -1
}

echo
echo "== plain text, one thread on one core (OMP_NUM_THREADS=1 ${pin[*]})"
log=$(mktemp)
for ((i = 1; i <= runs; i++)); do
    OMP_NUM_THREADS=1 "${pin[@]}" "$bin" --phases "$txt" 2>&1 | tee -a "$log" | grep -E "RESULT|debug"
done
plain_mbps=$(bestmax mbps < "$log")
plain_ratio=$(best ratio < "$log")
grep -m1 "^final CSR" "$log"

echo
echo "== plain text, default threads (both cores)"
for ((i = 1; i <= runs; i++)); do
    "$bin" "$txt" 2>&1 | grep RESULT
done

echo
echo "== gzip: zcat alone"
zbest=
for ((i = 1; i <= runs; i++)); do
    t0=$(date +%s.%N)
    zcat "$gz" > /dev/null
    t=$(echo "$(date +%s.%N) - $t0" | bc -l)
    printf "zcat %.3f s\n" "$t"
    if [ -z "$zbest" ] || [ "$(echo "$t < $zbest" | bc -l)" = 1 ]; then zbest=$t; fi
done

echo
echo "== gzip: load, parser on one thread, inflating on a second (OMP_NUM_THREADS=1)"
glog=$(mktemp)
for ((i = 1; i <= runs; i++)); do
    OMP_NUM_THREADS=1 "$bin" --phases "$gz" 2>&1 | tee -a "$glog" | grep -E "RESULT|debug"
done
gz_secs=$(best seconds < "$glog")

echo
echo "== summary (best of $runs)"
printf "plain load, one core:     %s MB/s of text (target >= 100)\n" "$plain_mbps"
printf "gzip load vs zcat:        %s s vs %.3f s = %.2fx (target <= 1.5)\n" "$gz_secs" "$zbest" \
    "$(echo "$gz_secs / $zbest" | bc -l)"
printf "peak RSS / final CSR:     %s (target <= 1.5 plus a constant)\n" "$plain_ratio"
rm -f "$log" "$glog"
