#!/usr/bin/env bash
# comm_cudasim.sh WANT COMMAND... - runs test_comm (COMMAND, under the MPI launcher) and passes
# when it passes and its first line, "test_comm: <host>, device <device communicator> over
# <backend>", contains WANT: a run that fell back to another communicator than the one meant (host
# staging instead of NCCL, say) fails.
set -u
want=$1
shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
if [[ $rc -ne 0 ]]; then
    echo "FAIL: test_comm exited with status $rc"
    exit 1
fi
line=$(grep -m1 '^test_comm: ' <<<"$out")
if [[ $line != *"$want"* ]]; then
    echo "FAIL: test_comm ran '${line#test_comm: }', expected '$want'"
    exit 1
fi
echo "ok: $line"
