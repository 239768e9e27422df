#!/usr/bin/env bash
# pipeline.sh - `saga mlp` as a pipeline: the layers cut into S stages, each on a device of its
# own (a CPU backend with 1/S of the threads, or cuda:0 .. cuda:S-1 with DEVICE=cuda), the
# micro-batches in the 1F1B order, synchronous (a flush each step) and PipeDream-2BW (no flush).
# For each S in STAGES and each mode: ms per step, rows per second, bytes each way per step, the
# largest stage's peak device bytes, and each stage's share of time spent waiting on its
# neighbours (the pipeline bubble), in memory and with the parameters and Adam moments OVER
# times the devices' memory (each stage's budget an S-th of the total).
#
#   bench/pipeline.sh [BUILD_DIR]   (LAYERS=8 WIDTH=1024 OUTPUTS=16 BATCH=256 MICRO=8 STEPS=17
#                                    OVER=8 RUNS=3 STAGES="1 2 4" DEVICE=cpu MPIEXEC=)
#
# With MPIEXEC (an MPI launcher such as mpiexec), every pipeline also runs with one stage per
# rank (MPIEXEC -n S), the activations and gradients sent between the ranks; as root Open MPI
# needs OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 in the environment.
#
# On a machine with fewer cores than stages, CPU stages take turns on the cores and a pipeline
# cannot be faster than one stage; the figures then show its overheads (the copies through host
# memory between stages, the threads' hand-offs), not its speed-up. Each configuration runs RUNS
# times, taking turns; the table shows each one's fastest run (seconds per step over the steps
# after the first).
set -euo pipefail
build=${1:-build}
saga=$build/bin/saga
layers=${LAYERS:-8} width=${WIDTH:-1024} outputs=${OUTPUTS:-16} batch=${BATCH:-256}
micro=${MICRO:-8} steps=${STEPS:-17} over=${OVER:-8} runs=${RUNS:-3} device=${DEVICE:-cpu}
stages=${STAGES:-1 2 4} mpiexec=${MPIEXEC:-}
[ -x "$saga" ] || { echo "pipeline.sh: $saga not built" >&2; exit 1; }
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
state=$(python3 -c "
w = [$width] * $layers + [$outputs]
print(3 * 4 * sum(w[i] * w[i + 1] + w[i + 1] for i in range($layers)))")
echo "network: $layers layers of width $width -> $outputs, batch $batch in $micro micro-batches, $steps steps, device $device"
echo "state:   $state bytes of parameters and moments; streamed: 1/$over of it over all stages"
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
names=() args=() launch=()
for s in $stages; do
    for mode in sync 2bw; do
        [ "$s" = 1 ] && [ "$mode" = 2bw ] && continue
        for ranks in 1 "$s"; do
            if [ "$ranks" = 1 ]; then
                where="" pre=""
            else
                [ -n "$mpiexec" ] || continue
                where=" ranks" pre="$mpiexec -n $s --oversubscribe"
            fi
            names+=("S=$s $mode$where, in memory") launch+=("$pre")
            args+=("--stages $s --pipeline $mode --device-mem 64G")
            names+=("S=$s $mode$where, 1/$over") launch+=("$pre")
            args+=("--stages $s --pipeline $mode --device-mem $((state / over / s))")
            [ "$s" = 1 ] && break
        done
    done
done
declare -a bestj=() bests=()
for _ in $(seq "$runs"); do
    for i in "${!names[@]}"; do
        # shellcheck disable=SC2086
        j=$(${launch[$i]} "$saga" mlp --layers "$layers" --width "$width" --outputs "$outputs" --batch "$batch" \
            --micro-batches "$micro" --steps "$steps" --device "$device" --stats --json --quiet \
            ${args[$i]} | tail -1)
        t=$(echo "$j" | python3 -c "import json,sys; print(json.loads(sys.stdin.read())['seconds_per_step'])")
        if [ -z "${bests[$i]:-}" ] || python3 -c "import sys; sys.exit(0 if $t < ${bests[$i]} else 1)"; then
            bests[$i]=$t
            bestj[$i]=$j
        fi
    done
done
printf "%-28s %9s %8s %11s %11s %11s %s\n" run "ms/step" "rows/s" "h2d/step" "d2h/step" \
    "peak/stage" "waiting per stage"
for i in "${!names[@]}"; do
    echo "${bestj[$i]}" | python3 -c "
import json, sys
j = json.loads(sys.stdin.read())
print('%-28s %9.1f %8.0f %11.0f %11.0f %11d %s' % ('${names[$i]}', 1e3 * j['seconds_per_step'],
      j['rows_per_second'], j['h2d_bytes_per_step'], j['d2h_bytes_per_step'],
      max(j['stage_peak_bytes']), ' '.join('%.0f%%' % (100 * w) for w in j['stage_idle_share'])))"
done
