#!/usr/bin/env bash
# net_ranks_fail.sh MPIEXEC TEST_NET_RANKS - a rank that fails alone never leaves the others
# waiting. Under 2 ranks, rank 1 fails its N-th allocation from the first training step of a GCN
# on (test_net_ranks with SAGA_TEST_FAIL_ALLOC_AT=N), or from the forward pass after it
# (SAGA_TEST_FAIL_FORWARD: the outputs gathered from every rank), in memory, streamed and over
# shards (SAGA_TEST_FAIL_SHARDS: each rank on its shard, exchanging halo rows), or from the making
# of a sampler over shards on, through the packing of its seeds, a mini-batch's sample and its
# training pass (SAGA_TEST_FAIL_SAMPLED: costs, draws, degrees and features asked of other
# ranks), for
# N = 1 to FIRST and then every STRIDE-th (default 12 and 13; ctest: 17, under the sanitizers
# 61), for the forward pass's fewer allocations every FWD_STRIDE-th (default 3), until N is past
# the call's allocations. Each run must end within 60 s: with every rank reporting the failure
# (an agreed one), or with the job stopped and rank 1's message ("stopping every rank"); never a
# hang, a crash or a rank going on.
set -uo pipefail
mpiexec=$1 prog=$2
first=${FIRST:-12} stride=${STRIDE:-13} fwd_stride=${FWD_STRIDE:-3}
# MODES: a colon-separated choice of the modes below (all by default)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mktemp)
export SAGA_TEST_FAIL_DIR
SAGA_TEST_FAIL_DIR=$(mktemp -d) # the shards' runs write theirs here
trap 'rm -rf "$out" "$SAGA_TEST_FAIL_DIR"' EXIT
failed=0
IFS=: read -r -a modes <<<"${MODES:-in memory:streamed:in memory, forward:streamed, forward:shards:shards, forward:shards, sampled}"
for mode in "${modes[@]}"; do
    runs=0 stopped=0 agreed=0 n=1
    while :; do
        case $mode in streamed*) export SAGA_TEST_FAIL_STREAMED=1 ;; *) unset SAGA_TEST_FAIL_STREAMED ;; esac
        case $mode in shards*) export SAGA_TEST_FAIL_SHARDS=1 ;; *) unset SAGA_TEST_FAIL_SHARDS ;; esac
        case $mode in *forward) export SAGA_TEST_FAIL_FORWARD=1 ;; *) unset SAGA_TEST_FAIL_FORWARD ;; esac
        case $mode in *sampled) export SAGA_TEST_FAIL_SAMPLED=1 ;; *) unset SAGA_TEST_FAIL_SAMPLED ;; esac
        SAGA_TEST_FAIL_ALLOC_AT=$n timeout 60 "$mpiexec" -n 2 --oversubscribe "$prog" >"$out" 2>&1
        rc=$?
        [ $rc = 3 ] && break # the step ran: N is past its allocations
        runs=$((runs + 1))
        if [ $rc = 0 ]; then
            agreed=$((agreed + 1))
        elif [ $rc = 124 ] || [ $rc = 137 ]; then
            echo "FAIL $mode, allocation $n failing on rank 1: the ranks still waited after 60 s"
            failed=1
        elif grep -q 'stopping every rank' "$out"; then
            stopped=$((stopped + 1))
        else
            echo "FAIL $mode, allocation $n failing on rank 1: exit $rc without the message:"
            tail -n 20 "$out"
            failed=1
        fi
        case $mode in
        *forward) n=$((n + fwd_stride)) ;;
        *) n=$((n < first ? n + 1 : n + stride)) ;;
        esac
        [ $n -le 100000 ] || { echo "FAIL $mode: the step never ran"; failed=1; break; }
    done
    echo "$mode: $runs runs (allocations 1 to $n): $agreed agreed failures, $stopped stopped every rank"
    [ $runs -ge 3 ] || { echo "FAIL $mode: only $runs allocations failed before the call ran"; failed=1; }
done
exit $failed
