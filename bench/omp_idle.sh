#!/usr/bin/env bash
# The GNN example (examples/gnn, a user's program linked against libsaga, with no tuning of its
# own) must not pay for OpenMP's idle threads: libgomp spins ~300,000 rounds after every parallel
# region unless told otherwise. On a machine of its own that costs CPU time and little else; on a
# machine shared with other work the spinning threads take the time slices the work needs, and a
# GAT epoch on two cores ran 3-10x slower. So the runs here share the machine on purpose: one
# busy loop per core runs beside them.
#
# The example trains GAT on Cora, in alternating rounds, three ways:
#   plain   as a user runs it: OMP_WAIT_POLICY and GOMP_SPINCOUNT unset, all cores
#   tuned   with GOMP_SPINCOUNT=10000, the setting the `saga` command used to re-execute itself with
#   single  on one thread (OMP_NUM_THREADS=1): the same work with no idle thread at all
# and reports, on the medians, against these targets:
#   CPU time plain / single < 1.75  (idle threads that spin burn CPU time; asleep, about 1 to 1.4)
#   wall time plain / tuned < 2     (the user gets what the command got)
# A benchmark, not a test: its ratios move with the processor and the load. Usage:
#   bench/omp_idle.sh [BUILD]   (BUILD/bin/example_gnn, or $SAGA_EXAMPLE_GNN; Cora under
#                                $SAGA_DATA_DIR, default ../shared/datasets)
set -euo pipefail
build=${1:-build}
SAGA_EXAMPLE_GNN=${SAGA_EXAMPLE_GNN:-$build/bin/example_gnn}
if [ ! -x "$SAGA_EXAMPLE_GNN" ]; then
    echo "skipping: no example binary at $SAGA_EXAMPLE_GNN (build first: make build)"
    exit 0
fi
here=$(cd "$(dirname "$0")" && pwd)
data=${SAGA_DATA_DIR:-$here/../../shared/datasets}/cora
if [ ! -f "$data/labels.txt" ]; then
    echo "skipping: $data is missing (set SAGA_DATA_DIR)"
    exit 0
fi
unset OMP_WAIT_POLICY GOMP_SPINCOUNT SAGA_OMP_SPIN OMP_NUM_THREADS
export SAGA_DEVICE=cpu
rounds=${SAGA_IDLE_ROUNDS:-3}
epochs=${SAGA_IDLE_EPOCHS:-20}

# one run: prints "wall cpu" in seconds (bash's own timer: real, user + sys of the child)
timed() {
    local t
    t=$({
        TIMEFORMAT='%R %U %S'
        time env "$@" "$SAGA_EXAMPLE_GNN" --model gat --data "$data" --epochs "$epochs" --quiet \
            >/dev/null 2>&1
    } 2>&1)
    awk '{ printf "%.3f %.3f\n", $1, $2 + $3 }' <<<"$t"
}
median() { sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

# the other work on the machine: one busy loop per core, ended with the test
hogs=()
trap 'for p in "${hogs[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT
for ((i = 0; i < ${SAGA_IDLE_HOGS:-$(nproc)}; i++)); do
    (while :; do :; done) &
    hogs+=($!)
done

declare -A wall cpu
for ((r = 1; r <= rounds; r++)); do
    for mode in plain tuned single; do
        case $mode in
        plain) set -- X=1 ;;
        tuned) set -- GOMP_SPINCOUNT=10000 ;;
        single) set -- OMP_NUM_THREADS=1 ;;
        esac
        read -r w c < <(timed "$@")
        wall[$mode]+="$w "
        cpu[$mode]+="$c "
        echo "round $r $mode: wall $w s, cpu $c s"
    done
done
for mode in plain tuned single; do
    wall[$mode]=$(tr ' ' '\n' <<<"${wall[$mode]}" | grep . | median)
    cpu[$mode]=$(tr ' ' '\n' <<<"${cpu[$mode]}" | grep . | median)
done
echo "medians: plain ${wall[plain]} s (cpu ${cpu[plain]}), tuned ${wall[tuned]} s" \
    "(cpu ${cpu[tuned]}), single ${wall[single]} s (cpu ${cpu[single]}); load $(cut -d' ' -f1-3 /proc/loadavg)"
over=""
if ! awk -v a="${cpu[plain]}" -v b="${cpu[single]}" 'BEGIN { exit !(a < 1.75 * b) }'; then
    over+=" cpu"
fi
if ! awk -v a="${wall[plain]}" -v b="${wall[tuned]}" 'BEGIN { exit !(a < 2 * b) }'; then
    over+=" wall"
fi
awk -v a="${cpu[plain]}" -v b="${cpu[single]}" -v c="${wall[plain]}" -v d="${wall[tuned]}" \
    'BEGIN { printf "ratios: cpu plain / single %.2f (target < 1.75), wall plain / tuned %.2f (target < 2)\n", a / b, c / d }'
if [ -n "$over" ]; then
    echo "over the target:$over (idle OpenMP threads spinning, or a noisy machine: run again)"
fi
