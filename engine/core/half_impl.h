/* half_impl.h - 16-bit floats for transfers: bfloat16 (the top half of an f32) and IEEE binary16,
 * converted from f32 with round-to-nearest-even and back exactly. Internal to saga; the CUDA
 * kernels (ops/cuda/half_to_f32.cu) call the same functions on the device. */
#pragma once
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define SAGA_HALF_FN static inline __host__ __device__
#else
#define SAGA_HALF_FN static inline
#endif

SAGA_HALF_FN uint32_t saga_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

SAGA_HALF_FN float saga_bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* NaN stays a (quiet) NaN; values beyond the largest bf16 round to infinity. */
SAGA_HALF_FN uint16_t saga_f32_to_bf16(float f) {
    uint32_t u = saga_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

SAGA_HALF_FN float saga_bf16_to_f32(uint16_t h) {
    return saga_bits_f32((uint32_t)h << 16);
}

/* Round to nearest even; overflow to infinity, underflow through subnormals to zero. */
SAGA_HALF_FN uint16_t saga_f32_to_fp16(float f) {
    uint32_t u = saga_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u); /* NaN */
    if (a >= 0x477ff000u)                  /* >= 65520: rounds past the largest finite */
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) {   /* below 2^-14: a subnormal (or zero) */
        if (a < 0x33000000u) /* below half the smallest subnormal, 2^-25 */
            return sign;
        uint32_t m = (a & 0x7fffffu) | 0x800000u;
        int shift = 126 - (int)(a >> 23); /* 14 .. 24 */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u)))
            q++;
        return (uint16_t)(sign | q);
    }
    uint32_t r = a - 0x38000000u; /* rebias the exponent: 127 - 15 = 112 */
    r += 0xfffu + ((r >> 13) & 1u);
    return (uint16_t)(sign | (r >> 13));
}

SAGA_HALF_FN float saga_fp16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f)
        return saga_bits_f32(sign | 0x7f800000u | (m << 13));
    if (e == 0) {
        /* subnormal: m x 2^-24 */
        float v = (float)m * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return saga_bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

#ifndef __CUDACC__
#include <stdbool.h>
/* Whole arrays (half.c): y[i] = saga_f32_to_bf16 / saga_f32_to_fp16 (x[i]) for i < n, the same
 * bits, vectorised where the CPU allows. */
void saga_f32_to_half_n(const float *x, int64_t n, bool bf16, uint16_t *y);
/* y[i] = saga_bf16_to_f32 / saga_fp16_to_f32 (x[i]) for i < n, the same bits. */
void saga_half_to_f32_n(const uint16_t *x, int64_t n, bool bf16, float *y);
#endif
