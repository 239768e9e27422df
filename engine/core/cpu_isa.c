/* cpu_isa.c - the instruction-set level saga's CPU kernels dispatch on (cpu_isa_impl.h): the
 * processor's, or a lower one named by SAGA_CPU_ISA so that every path can be tested on one
 * machine. */
#include "cpu_isa_impl.h"

#include "saga_log.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static const char *const NAMES[SAGA_CPU_ISA_COUNT] = {"sse2", "avx2", "avx512"};

const char *saga_cpu_isa_name(saga_cpu_isa_level level) {
    return level >= 0 && level < SAGA_CPU_ISA_COUNT ? NAMES[level] : "unknown";
}

saga_cpu_isa_level saga_cpu_isa_detected(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
          __builtin_cpu_supports("f16c")))
        return SAGA_CPU_ISA_SSE2;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl"))
        return SAGA_CPU_ISA_AVX512;
    return SAGA_CPU_ISA_AVX2;
#else
    return SAGA_CPU_ISA_SSE2;
#endif
}

int saga_cpu_isa_known = -1;
static saga_cpu_isa_level LEVEL;
static pthread_once_t ONCE = PTHREAD_ONCE_INIT;

static void isa_init(void) {
    const saga_cpu_isa_level have = saga_cpu_isa_detected();
    LEVEL = have;
    const char *want = getenv("SAGA_CPU_ISA");
    if (!want || !*want || strcmp(want, "native") == 0)
        return;
    int w = -1;
    for (int i = 0; i < SAGA_CPU_ISA_COUNT; i++)
        if (strcmp(want, NAMES[i]) == 0)
            w = i;
    if (w < 0) {
        saga_log(SAGA_LOG_WARN,
                 "SAGA_CPU_ISA=%s is not one of sse2, avx2, avx512, native: using %s", want,
                 NAMES[have]);
        return;
    }
    if ((saga_cpu_isa_level)w > have) {
        saga_log(SAGA_LOG_WARN, "SAGA_CPU_ISA=%s: this processor has %s only: using %s", want,
                 NAMES[have], NAMES[have]);
        return;
    }
    LEVEL = (saga_cpu_isa_level)w;
}

saga_cpu_isa_level saga_cpu_isa_init(void) {
    pthread_once(&ONCE, isa_init);
    __atomic_store_n(&saga_cpu_isa_known, (int)LEVEL, __ATOMIC_RELAXED);
    return LEVEL;
}

saga_cpu_isa_level saga_cpu_isa_force(saga_cpu_isa_level level) {
    saga_cpu_isa_init();
    const saga_cpu_isa_level have = saga_cpu_isa_detected();
    const saga_cpu_isa_level l = level < SAGA_CPU_ISA_SSE2 ? SAGA_CPU_ISA_SSE2
                                 : level > have            ? have
                                                           : level;
    __atomic_store_n(&saga_cpu_isa_known, (int)l, __ATOMIC_RELAXED);
    return l;
}
