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
# and checks, on the medians:
#   CPU time plain / single < 1.75  (idle threads that spin burn CPU time; asleep, about 1 to 1.4)
#   wall time plain / tuned < 2     (the user gets what the command got)
set -euo pipefail
# Under AddressSanitizer every run is several times slower and its times say nothing about
# OpenMP's idle threads; the sanitizers check the example's memory in install_consumer.
if [ "${SAGA_SANITIZED:-0}" = 1 ]; then
    echo "skipping: a timing check means nothing under the sanitizers"
    exit 77
fi
: "${SAGA_EXAMPLE_GNN:?SAGA_EXAMPLE_GNN must name the example binary}"
data=${SAGA_DATA_DIR:-${SAGA_DEFAULT_DATA_DIR:-}}/cora
if [ ! -f "$data/labels.txt" ]; then
    if [ "${CI:-}" = true ]; then
        echo "FAIL: dataset $data is missing (set SAGA_DATA_DIR)" >&2
        exit 1
    fi
    echo "skipping: $data is missing (set SAGA_DATA_DIR)"
    exit 77
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
fails=0
if ! awk -v a="${cpu[plain]}" -v b="${cpu[single]}" 'BEGIN { exit !(a < 1.75 * b) }'; then
    echo "FAIL: the example's CPU time ${cpu[plain]} s is 1.75x or more that of one thread" \
        "(${cpu[single]} s): its idle OpenMP threads spin" >&2
    fails=1
fi
if ! awk -v a="${wall[plain]}" -v b="${wall[tuned]}" 'BEGIN { exit !(a < 2 * b) }'; then
    echo "FAIL: the example took ${wall[plain]} s, 2x or more than with GOMP_SPINCOUNT=10000" \
        "(${wall[tuned]} s)" >&2
    fails=1
fi
exit $fails
