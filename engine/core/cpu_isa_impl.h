/* cpu_isa_impl.h - which of saga's own x86-64 kernel paths the CPU code takes. Internal to saga.
 *
 *   if (saga_cpu_isa() >= SAGA_CPU_ISA_AVX2)
 *       tanh_span_avx2(n, x, y);
 *
 * The level is the processor's, lowered by the SAGA_CPU_ISA environment variable (read once):
 * "sse2", "avx2" or "avx512" ("native" or unset: what the processor has). A level above the
 * processor's is lowered to it with a warning, so a forced path never runs an instruction the
 * processor lacks. Every path gives results within the bounds the tests derive; several give the
 * same bits (each kernel's comment says which). OpenBLAS's own choice is OPENBLAS_CORETYPE's. */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

typedef enum saga_cpu_isa_level {
    SAGA_CPU_ISA_SSE2 = 0,   /* x86-64's baseline, and every other processor */
    SAGA_CPU_ISA_AVX2 = 1,   /* AVX2 with FMA and F16C (x86-64-v3) */
    SAGA_CPU_ISA_AVX512 = 2, /* AVX-512 F, BW, CD, DQ and VL (x86-64-v4) */
    SAGA_CPU_ISA_COUNT
} saga_cpu_isa_level;

/* The level the kernels dispatch on (see above); thread-safe, constant for the process. A load
 * of one variable once known, so that a kernel may ask per row. */
extern int saga_cpu_isa_known;
saga_cpu_isa_level saga_cpu_isa_init(void);
static inline saga_cpu_isa_level saga_cpu_isa(void) {
    int l = __atomic_load_n(&saga_cpu_isa_known, __ATOMIC_RELAXED);
    return l >= 0 ? (saga_cpu_isa_level)l : saga_cpu_isa_init();
}

/* For tests: the kernels run at level, lowered to the processor's, from now on (not while any
 * runs); returns the level set. */
saga_cpu_isa_level saga_cpu_isa_force(saga_cpu_isa_level level);

/* The level the processor has, whatever SAGA_CPU_ISA says. */
saga_cpu_isa_level saga_cpu_isa_detected(void);

/* "sse2", "avx2" or "avx512". */
const char *saga_cpu_isa_name(saga_cpu_isa_level level);

/* SAGA_CPU_ISA_CLONES(name, (params), (args)) defines `static void name(params)`, which runs
 * name##_body (a static inline, always_inline function of those parameters) compiled for the
 * baseline or for AVX2, as saga_cpu_isa() says; SAGA_CPU_ISA_CLONES_V4 adds an AVX-512 build.
 * Every clone of a body gives the same bits only if none contracts a * b + c where another does
 * not: the AVX2 target leaves FMA out, but GCC's AVX-512 targets bring it with them, so a file
 * that uses these macros is compiled with -ffp-contract=off (CMakeLists.txt; test_cpu_isa fails
 * when it is not). */
/* One build of name##_body under a target attribute (empty: the baseline), as name##suffix. */
#define SAGA_CPU_ISA_CLONE_(attr, name, suffix, params, args)                                      \
    attr static void name##suffix params {                                                         \
        name##_body args;                                                                          \
    }
#if defined(__x86_64__) && defined(__GNUC__)
#define SAGA_CPU_ISA_AVX2_TARGET __attribute__((target("avx2")))
#define SAGA_CPU_ISA_AVX512_TARGET                                                                 \
    __attribute__((target("avx2,avx512f,avx512bw,avx512cd,avx512dq,avx512vl")))
#define SAGA_CPU_ISA_CLONES(name, params, args)                                                    \
    SAGA_CPU_ISA_CLONE_(SAGA_CPU_ISA_AVX2_TARGET, name, _avx2, params, args)                       \
    SAGA_CPU_ISA_CLONE_(, name, _sse2, params, args)                                               \
    static void name params {                                                                      \
        if (saga_cpu_isa() >= SAGA_CPU_ISA_AVX2)                                                   \
            name##_avx2 args;                                                                      \
        else                                                                                       \
            name##_sse2 args;                                                                      \
    }
#define SAGA_CPU_ISA_CLONES_V4(name, params, args)                                                 \
    SAGA_CPU_ISA_CLONE_(SAGA_CPU_ISA_AVX512_TARGET, name, _avx512, params, args)                   \
    SAGA_CPU_ISA_CLONE_(SAGA_CPU_ISA_AVX2_TARGET, name, _avx2, params, args)                       \
    SAGA_CPU_ISA_CLONE_(, name, _sse2, params, args)                                               \
    static void name params {                                                                      \
        const saga_cpu_isa_level l = saga_cpu_isa();                                               \
        if (l >= SAGA_CPU_ISA_AVX512)                                                              \
            name##_avx512 args;                                                                    \
        else if (l >= SAGA_CPU_ISA_AVX2)                                                           \
            name##_avx2 args;                                                                      \
        else                                                                                       \
            name##_sse2 args;                                                                      \
    }
#else
#define SAGA_CPU_ISA_CLONES(name, params, args) SAGA_CPU_ISA_CLONE_(, name, , params, args)
#define SAGA_CPU_ISA_CLONES_V4 SAGA_CPU_ISA_CLONES
#endif

#ifdef __cplusplus
}
#endif
