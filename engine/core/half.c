/* half.c - 16-bit float conversion of whole arrays (half_impl.h): the bits of the scalar
 * functions, eight values at a time where the CPU has F16C and AVX2. Streamed rows cross in 16
 * bits through these (net_rows_pack narrows on the host, the CPU kernel widens), a few tens of
 * millions of values per epoch: the scalar fp16 conversion's branches cost more than the copy. */
#include "half_impl.h"

#include "cpu_isa_impl.h"

#include <stdbool.h>
#include <stdint.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HALF_X86 1
#else
#define HALF_X86 0
#endif

static void narrow_scalar(const float *x, int64_t n, bool bf16, uint16_t *y) {
    if (bf16)
        for (int64_t i = 0; i < n; i++)
            y[i] = saga_f32_to_bf16(x[i]);
    else
        for (int64_t i = 0; i < n; i++)
            y[i] = saga_f32_to_fp16(x[i]);
}

static void widen_scalar(const uint16_t *x, int64_t n, bool bf16, float *y) {
    if (bf16)
        for (int64_t i = 0; i < n; i++)
            y[i] = saga_bf16_to_f32(x[i]);
    else
        for (int64_t i = 0; i < n; i++)
            y[i] = saga_fp16_to_f32(x[i]);
}

#if HALF_X86
/* Eight values: round to nearest even in both formats (the hardware's fp16 rounding and the
 * integer one of saga_f32_to_bf16); a group holding a NaN goes to the scalar code, whose NaN has
 * its own payload. */
__attribute__((target("avx2,f16c"))) static void narrow_avx2(const float *x, int64_t n, bool bf16,
                                                             uint16_t *y) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q))) {
            narrow_scalar(x + i, 8, bf16, y + i);
            continue;
        }
        __m128i h;
        if (bf16) {
            __m256i u = _mm256_castps_si256(v);
            __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
            __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb));
            r = _mm256_srli_epi32(r, 16); /* below 65536: packs without saturating */
            r = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xd8);
            h = _mm256_castsi256_si128(r);
        } else {
            h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        }
        _mm_storeu_si128((__m128i *)(y + i), h);
    }
    narrow_scalar(x + i, n - i, bf16, y + i);
}

/* Eight values; an fp16 group holding an infinity or NaN goes to the scalar code (the hardware
 * quiets a signalling NaN, saga_fp16_to_f32 keeps its bits). bf16 is a shift. */
__attribute__((target("avx2,f16c"))) static void widen_avx2(const uint16_t *x, int64_t n, bool bf16,
                                                            float *y) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(x + i));
        __m256 f;
        if (bf16) {
            f = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
        } else {
            __m128i e = _mm_and_si128(h, _mm_set1_epi16(0x7c00));
            if (_mm_movemask_epi8(_mm_cmpeq_epi16(e, _mm_set1_epi16(0x7c00)))) {
                widen_scalar(x + i, 8, bf16, y + i);
                continue;
            }
            f = _mm256_cvtph_ps(h);
        }
        _mm256_storeu_ps(y + i, f);
    }
    widen_scalar(x + i, n - i, bf16, y + i);
}

static bool have_avx2_f16c(void) {
    return saga_cpu_isa() >= SAGA_CPU_ISA_AVX2;
}
#endif

void saga_f32_to_half_n(const float *x, int64_t n, bool bf16, uint16_t *y) {
#if HALF_X86
    if (have_avx2_f16c()) {
        narrow_avx2(x, n, bf16, y);
        return;
    }
#endif
    narrow_scalar(x, n, bf16, y);
}

void saga_half_to_f32_n(const uint16_t *x, int64_t n, bool bf16, float *y) {
#if HALF_X86
    if (have_avx2_f16c()) {
        widen_avx2(x, n, bf16, y);
        return;
    }
#endif
    widen_scalar(x, n, bf16, y);
}
