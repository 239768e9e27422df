/* test_xf.h - error-carrying values for the tests that check an element-wise f32 formula (a
 * kernel's activation, softmax, loss or optimizer update) against its exact value. Include after
 * <cmocka.h> and test_util.h.
 *
 * Each value of the kernel's formula, operation for operation, is carried as its exact value in
 * double and a bound on how far the f32 computation of it can be (running error analysis, Higham,
 * Accuracy and Stability of Numerical Algorithms, 2nd ed., sec. 3.3): an operation on operands
 * within e_a and e_b of their values is within the propagated error of its exact result, and its
 * rounding adds u times that result, or LIBM_REL for a libm function (at least the smallest
 * normal's worth: ulps do not shrink among subnormals). The second-order terms are kept, so the
 * bound holds outright, and a multiply-add fused into one rounding (a GPU's) stays within it. The
 * reference's own double roundings, 2^-29 times smaller, are left out.
 *
 *   xf y = xf_add(xf_mul(xf_in(a), xf_in(x)), xf_in(b));   // a x + b in f32
 *   assert_true(fabs(got - y.v) <= y.e);
 */
#pragma once

#include <float.h>
#include <math.h>
#include <stdint.h>

/* gamma_k of f32 and of f64 (test_util.h) */
static inline double gam(int64_t k) {
    return saga_test_gamma(k, SAGA_TEST_U32);
}
static inline double gam64(int64_t k) {
    return saga_test_gamma(k, SAGA_TEST_U64);
}

/* Two double sums of the same k terms, of magnitudes adding up to mag, in different orders. */
static inline double sum64_err(int64_t k, double mag) {
    return 2 * gam64(k) * mag;
}

/* expf, expm1f, logf and log1pf within 2 ulp: the larger of glibc's documented maxima (the glibc
 * manual's table of known maximum errors) and CUDA's (the CUDA C Programming Guide's table of
 * single-precision functions: expf 2, expm1f 1, log1pf 1). One ulp of a normal y is at most
 * 2 u |y|. */
#define LIBM_REL (4 * SAGA_TEST_U32)

/* tanh: CUDA's tanhf within 2 ulp (the Programming Guide); the CPU's own tanh_f32 (nn_dense.c,
 * documented within about 2e-7 of tanh relative) within 4 u, which test_nn_kernels_tanh_sweep
 * holds it to over the whole float range (its worst is 3.0 u). */
#define TANH_REL (4 * SAGA_TEST_U32)

typedef struct xf {
    double v, e;
} xf;

/* a result of exact value v, its operands' errors propagating to e, from an operation within rel
 * of its exact result */
static inline xf xf_op(double v, double e, double rel) {
    return (xf){v, e + rel * fmax(fabs(v) + e, FLT_MIN)};
}
/* the same, rounded to f32 */
static inline xf xf_round(double v, double e) {
    return xf_op(v, e, SAGA_TEST_U32);
}
/* an f32 input, exact */
static inline xf xf_in(double v) {
    return (xf){v, 0};
}
static inline xf xf_neg(xf a) {
    return (xf){-a.v, a.e};
}
static inline xf xf_add(xf a, xf b) {
    return xf_round(a.v + b.v, a.e + b.e);
}
static inline xf xf_sub(xf a, xf b) {
    return xf_round(a.v - b.v, a.e + b.e);
}
static inline xf xf_mul(xf a, xf b) {
    return xf_round(a.v * b.v, fabs(a.v) * b.e + fabs(b.v) * a.e + a.e * b.e);
}
static inline xf xf_div(xf a, xf b) {
    const double q = a.v / b.v;
    assert_true(fabs(b.v) > b.e); /* the divisor cannot be zero */
    return xf_round(q, (a.e + fabs(q) * b.e) / (fabs(b.v) - b.e));
}
/* |sqrt(a') - sqrt(a)| = |a' - a| / (sqrt(a') + sqrt(a)), and at most sqrt(|a' - a|) */
static inline xf xf_sqrt(xf a) {
    const double r = sqrt(a.v);
    return xf_round(r, r > 0 ? fmin(a.e / r, sqrt(a.e)) : sqrt(a.e));
}
/* e^a' is within e^a (e^|a' - a| - 1) of e^a; so is expm1 */
static inline xf xf_exp(xf a) {
    return xf_op(exp(a.v), exp(a.v) * expm1(a.e), LIBM_REL);
}
static inline xf xf_expm1(xf a) {
    return xf_op(expm1(a.v), exp(a.v) * expm1(a.e), LIBM_REL);
}
/* log1p's slope is at most 1 / (1 + a - e_a) within e_a of a */
static inline xf xf_log1p(xf a) {
    assert_true(1 + a.v > a.e);
    return xf_op(log1p(a.v), a.e / (1 + a.v - a.e), LIBM_REL);
}
/* log of a double sum, rounded to f32 */
static inline xf xf_log(xf a) {
    assert_true(a.v > a.e);
    return xf_round(log(a.v), a.e / (a.v - a.e));
}
