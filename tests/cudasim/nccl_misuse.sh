#!/usr/bin/env bash
# nccl_misuse.sh PROGRAM MPIEXEC NP_FLAG - the NCCL stand-in's checks through saga's device
# communicator (nccl_misuse.c): each scenario must end as it would have to, with a status and a
# message (the error saga returns, or the simulator's diagnostic where a GPU would fault or hang).
set -u
prog=$1 mpiexec=$2 np=$3
status=0

# scenario NAME RANKS EXPECTED_STATUS(0|fail) PATTERN [VAR=VALUE...]: runs the scenario (RANKS 0:
# without the launcher) and checks its status and that a line of its output matches PATTERN (an
# extended regular expression; empty: the status alone, where the program checks the rest).
scenario() {
    local name=$1 ranks=$2 want=$3 pattern=$4
    shift 4
    local out rc
    if [[ $ranks -eq 0 ]]; then
        out=$(env "$@" "$prog" "$name" 2>&1)
    else
        out=$(env "$@" "$mpiexec" "$np" "$ranks" --oversubscribe "$prog" "$name" 2>&1)
    fi
    rc=$?
    if [[ $want == 0 && $rc -ne 0 ]] || [[ $want == fail && $rc -eq 0 ]]; then
        echo "FAIL $name: status $rc, expected ${want/fail/a failure}"
        echo "$out" | tail -20
        status=1
    elif [[ -n $pattern ]] && ! grep -q -E -- "$pattern" <<<"$out"; then
        echo "FAIL $name: no line of the output matches '$pattern'"
        echo "$out" | tail -20
        status=1
    else
        echo "ok $name${pattern:+: $(grep -m1 -E -- "$pattern" <<<"$out")}"
    fi
}

scenario no_mpi 0 0 "ncclCommInitRank: MPI is not initialised"
scenario recv_size 2 0 \
    "rank 1 .*ncclRecv of 8 x int8 \(8 bytes\) from peer 0 meets an ncclSend of 12 bytes"
scenario count 2 0 "ncclAllReduce: the ranks disagree on the count: from 4 to 5"
scenario kind 2 0 "some ranks called ncclAllReduce while others called ncclBroadcast"
scenario other_stream 2 0 ""
scenario host_ptr 2 fail \
    "^cudasim: ncclAllReduce on rank [01]: sendbuff 0x[0-9a-f]+ is not device memory \(a host pointer"
scenario other_device 2 fail \
    "^cudasim: ncclAllReduce on rank [01] on device [01]: sendbuff 0x[0-9a-f]+ is memory of device [01]"
scenario missing_peer 2 fail \
    "^cudasim: ncclAllReduce on rank 0 .*no progress for 2 s; still waiting for: the other ranks' ncclAllReduce" \
    SAGA_CUDASIM_NCCL_TIMEOUT=2
scenario halo 2 0 ""
scenario halo 4 0 "" SAGA_CUDASIM_DEVICES=4
exit $status
