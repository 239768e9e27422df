#!/usr/bin/env bash
# hep_stream.sh - `saga hep train` on one event bigger than its device budget: an event of
# PARTICLES generated particles (22,000 make about 80,000 hits and 2.5 million edges in its graph)
# trained in memory, then streamed through the device budget (--device-mem --stream: the step by
# chunks of edges and hits, hep.h's hep_stream_step) at a quarter of the in-memory peak and at
# each size of BUDGETS, alternating RUNS times.
#
#   bench/hep_stream.sh [BUILD_DIR]   (PARTICLES=22000 EPOCHS=2 RUNS=2 BUDGETS="1G 256M"
#                                      THREADS=<all cores> HIDDEN=32 ITERATIONS=4)
#
# The table gives per setting the median over the runs of the median epoch (the training step
# alone; the event's graph is built once), the peak device bytes (the CPU backend's accounting
# of what it holds), the chunk's rows, the loss of the last epoch and the process's peak
# resident set (the host rows of a streamed step live there).
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
saga=$build/bin/saga
particles=${PARTICLES:-22000}
epochs=${EPOCHS:-2}
runs=${RUNS:-2}
budgets=${BUDGETS:-"1G 256M"}
threads=${THREADS:-$(nproc)}
hidden=${HIDDEN:-32}
iters=${ITERATIONS:-4}
[ -x "$saga" ] || { echo "hep_stream.sh: $saga not built" >&2; exit 1; }
ev=$here/out/hep-stream-$particles
mkdir -p "$here/out"
rm -rf "$ev"
"$saga" hep generate -o "$ev" --events 1 --seed 3 --min-particles "$particles" \
    --max-particles "$particles" --quiet
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$saga" hep build --data "$ev" --json --quiet | python3 -c 'import json, sys
j = json.loads(sys.stdin.read())
print("event:   %d particles, %d hits in the graph, %d edges (%d true)" % (
    '"$particles"', j["hits"], j["edges"], j["true_edges"]))'

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# run NAME ARGS...: one training run, its JSON and the peak resident set appended to NAME's file
run() {
    local name=$1
    shift
    /usr/bin/time -f '%M' -o "$out/rss" "$saga" hep train --data "$ev" --epochs "$epochs" \
        --hidden "$hidden" --iterations "$iters" --threads "$threads" --json --quiet "$@" \
        >"$out/j"
    python3 -c 'import json, sys
j = json.load(open(sys.argv[1])); s = j["samplers"][0]
print(json.dumps({"epoch": s["epoch_seconds"], "peak": s["peak_device_bytes"],
                  "chunk": s["chunk_rows"], "loss": j["loss"],
                  "rss": int(open(sys.argv[2]).read().split()[-1]) * 1024}))' \
        "$out/j" "$out/rss" >>"$out/$name"
}

# the in-memory peak first, for the quarter
run memory
quarter=$(python3 -c 'import json, sys; print(json.loads(open(sys.argv[1]).readline())["peak"] // 4)' \
    "$out/memory")
settings="memory quarter $budgets"
for r in $(seq 1 "$runs"); do
    for s in $settings; do
        [ "$s" = memory ] && [ "$r" = 1 ] && continue # measured above
        case $s in
        memory) run memory ;;
        quarter) run quarter --device-mem "$quarter" --stream ;;
        *) run "$s" --device-mem "$s" --stream ;;
        esac
    done
done
printf '\n%-22s %12s %10s %14s %10s %14s %12s\n' setting "s/epoch" ratio "peak device" chunk loss "host RSS"
mem_med=""
for s in $settings; do
    python3 - "$out/$s" "$s" "$quarter" "${mem_med:-0}" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
name = sys.argv[2] if sys.argv[2] != "quarter" else "1/4 (%d B)" % int(sys.argv[3])
ep = statistics.median(r["epoch"] for r in rows)
mem = float(sys.argv[4]) or ep
print("%-22s %12.2f %10.2f %14d %10d %14.8f %12d   (%d runs: %s)" % (
    name, ep, ep / mem, max(r["peak"] for r in rows), rows[-1]["chunk"], rows[-1]["loss"],
    max(r["rss"] for r in rows), len(rows), " ".join("%.2f" % r["epoch"] for r in rows)))
PY
    [ -z "$mem_med" ] && mem_med=$(python3 -c 'import json, statistics, sys
print(statistics.median(json.loads(l)["epoch"] for l in open(sys.argv[1])))' "$out/memory")
done
