#!/usr/bin/env bash
# mutants.sh TEST MODULE LIBDIR NAME:FILTER... - the simulator must be able to fail. For each
# mutant, a copy of the CUDA module with one kernel broken on purpose (LIBDIR/
# libsaga_cudasim_mutant_NAME.so, see rewrite.pl), runs the tests of TEST (the CUDA backend's test
# program) that FILTER names, first on the intact MODULE, where they must pass, then on the mutant
# in forward and random thread orders, where at least one order must fail (a test failure or a
# simulator diagnostic; a skip does not count).
set -u
test_bin=$1 good=$2 libdir=$3
shift 3
export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export SAGA_CUDASIM_DEVICES=${SAGA_CUDASIM_DEVICES:-2}
status=0
for spec in "$@"; do
    name=${spec%%:*} filter=${spec#*:}
    module=$libdir/libsaga_cudasim_mutant_$name.so
    if [[ ! -f $module ]]; then
        echo "FAIL $name: no module $module"
        status=1
        continue
    fi
    if ! out=$(SAGA_CUDA_MODULE=$good SAGA_TEST_FILTER=$filter "$test_bin" 2>&1) ||
        ! grep -q 'PASSED.*[1-9]' <<<"$out"; then
        echo "FAIL $name: the tests $filter do not pass on the intact module:"
        echo "$out" | tail -20
        status=1
        continue
    fi
    caught=""
    for order in forward random:7; do
        out=$(SAGA_CUDA_MODULE=$module SAGA_CUDASIM_ORDER=$order SAGA_TEST_FILTER=$filter \
            "$test_bin" 2>&1)
        rc=$?
        if [[ $rc -eq 77 ]] || grep -q '^skipping' <<<"$out"; then
            echo "FAIL $name ($order): the test skipped instead of running"
            status=1
            continue
        fi
        if [[ $rc -ne 0 ]]; then
            why=$(grep -m1 -E '^cudasim:|^ERROR' <<<"$out")
            caught+=$'\n'"    $order: exit $rc: ${why:-no message}"
        fi
    done
    if [[ -n $caught ]]; then
        echo "ok   $name caught in$caught"
    else
        echo "FAIL $name: the broken kernel passed every order"
        status=1
    fi
done
exit $status
