#!/usr/bin/env bash
# kernels.sh blas:CORE|isa:LEVEL PROGRAM [ARGS...] - runs a test program under the kernels another
# processor would pick: OpenBLAS's for CORE (OPENBLAS_CORETYPE=Haswell, SkylakeX, ...), or saga's
# own instruction-set path LEVEL (SAGA_CPU_ISA=sse2, avx2, avx512). A variant the processor cannot
# run is skipped (exit 77) with a line saying why; the numbers a test compares must hold under
# every variant (tests/test_util.h: bounds from the arithmetic, not from one machine's kernels).
set -u
variant=$1
shift
flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
need() { # need FLAG...: skip unless the processor has every FLAG
    for f in "$@"; do
        if [[ $flags != *" $f "* ]]; then
            echo "skipping: $variant needs $f, which this processor lacks"
            exit 77
        fi
    done
}
case $variant in
blas:Haswell | blas:Zen) need avx2 fma ;;
blas:SkylakeX | blas:Cooperlake) need avx512f avx512bw avx512cd avx512dq avx512vl ;;
blas:Sandybridge) need avx ;;
blas:*) ;;
isa:sse2) need sse2 ;;
isa:avx2) need avx2 fma f16c ;;
isa:avx512) need avx2 fma f16c avx512f avx512bw avx512cd avx512dq avx512vl ;;
*)
    echo "kernels.sh: unknown variant $variant (blas:CORE or isa:sse2|avx2|avx512)" >&2
    exit 2
    ;;
esac
case $variant in
blas:*) export OPENBLAS_CORETYPE=${variant#blas:} ;;
isa:*) export SAGA_CPU_ISA=${variant#isa:} ;;
esac
echo "kernels: ${OPENBLAS_CORETYPE:+OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE}${SAGA_CPU_ISA:+SAGA_CPU_ISA=$SAGA_CPU_ISA}"
exec "$@"
