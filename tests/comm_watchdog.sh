#!/usr/bin/env bash
# comm_watchdog.sh MPIEXEC TEST_COMM - an exchange that makes no progress fails, never hangs: under
# SAGA_COMM_TIMEOUT=2, rank 1 of 2 and of 4 sleeps instead of taking part in a send/receive and in
# an all-reduce (test_comm with SAGA_TEST_STALL); the others must fail within seconds, the
# send/receive naming rank 1, and stop the job (exit code 3). Under `timeout` (a hang fails). Which
# waiting rank reports first is a race (its abort ends the others before they print), so any
# rank but the stalled one may be the one that reports.
set -uo pipefail
mpiexec=$1
prog=$2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fails=0
for ranks in 2 4; do
    for mode in sendrecv allreduce; do
        start=$(date +%s)
        SAGA_COMM_TIMEOUT=2 SAGA_TEST_STALL=$mode timeout 50 "$mpiexec" -n $ranks --oversubscribe \
            "$prog" >"$out" 2>&1
        rc=$?
        took=$(($(date +%s) - start))
        if [ "$rc" = 124 ]; then
            echo "FAIL: $mode, $ranks ranks: hung (killed after 50 s)" >&2
            fails=$((fails + 1))
        elif ! grep -qE "rank [023]: $mode after .*made no progress for [0-9]* s \(SAGA_COMM_TIMEOUT\)" "$out"; then
            echo "FAIL: $mode, $ranks ranks: no waiting rank reported the stall (rc $rc):" >&2
            sed 's/^/  /' "$out" | head -20 >&2
            fails=$((fails + 1))
        elif [ "$mode" = sendrecv ] && ! grep -qE "rank [023]: sendrecv after .*waiting for rank 1\b" "$out"; then
            echo "FAIL: sendrecv, $ranks ranks: the message does not name rank 1:" >&2
            grep -E 'rank [023]' "$out" >&2
            fails=$((fails + 1))
        elif [ "$took" -gt 30 ]; then
            echo "FAIL: $mode, $ranks ranks: took $took s" >&2
            fails=$((fails + 1))
        else
            echo "ok: $mode, $ranks ranks: stopped in $took s: $(grep -m1 -E 'rank [023]:' "$out")"
        fi
    done
done
# a bad value is refused
if SAGA_COMM_TIMEOUT=soon timeout 50 "$mpiexec" -n 2 --oversubscribe "$prog" >"$out" 2>&1; then
    echo "FAIL: SAGA_COMM_TIMEOUT=soon accepted" >&2
    fails=$((fails + 1))
elif ! grep -q "SAGA_COMM_TIMEOUT=soon" "$out"; then
    echo "FAIL: SAGA_COMM_TIMEOUT=soon: no message naming it" >&2
    fails=$((fails + 1))
fi
[ "$fails" = 0 ] && echo "all checks passed"
exit $((fails > 0))
