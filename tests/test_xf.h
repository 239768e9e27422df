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
#include <stdbool.h>
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

/* The bounds on a softmax (or log-softmax) of the n values x[0], x[stride], ... as the kernels
 * compute it (softmax_row and edge_softmax_column on the CPU, softmax_rows.cu and
 * edge_softmax.cu): e = expf(x - max) (the subtraction rounds, which moves e by up to u |x - max|
 * relative), summed in double (in another order than the reference's: twice gamma_n of f64), the
 * sum's reciprocal or log rounded to f32 and applied. One side's bound against the exact value. */
static inline void xf_softmax_err(int64_t n, int64_t stride, bool lg, const float *x, double *err) {
    if (n <= 0)
        return;
    float mx = x[0];
    for (int64_t j = 1; j < n; j++)
        mx = x[j * stride] > mx ? x[j * stride] : mx;
    xf sum = xf_in(0);
    for (int64_t j = 0; j < n; j++) {
        const xf e = xf_exp(xf_sub(xf_in(x[j * stride]), xf_in(mx)));
        sum = (xf){sum.v + e.v, sum.e + e.e};
    }
    sum.e += sum64_err(n, sum.v);
    const xf lse = xf_add(xf_in(mx), xf_log(sum)), inv = xf_div(xf_in(1), sum);
    for (int64_t j = 0; j < n; j++) {
        const xf xj = xf_in(x[j * stride]);
        err[j * stride] = lg ? xf_sub(xj, lse).e : xf_mul(xf_exp(xf_sub(xj, xf_in(mx))), inv).e;
    }
}

/* The bounds on the softmax's backward pass from y: dx = y (dy - dot), dot = sum y dy in double
 * rounded to f32; log: dx = dy - expf(y) sum, sum = sum dy likewise. One side's. */
static inline void xf_softmax_bwd_err(int64_t n, int64_t stride, bool lg, const float *y,
                                      const float *dy, double *err) {
    double acc = 0, mag = 0;
    for (int64_t j = 0; j < n; j++) {
        const double t = lg ? dy[j * stride] : (double)dy[j * stride] * y[j * stride];
        acc += t;
        mag += fabs(t);
    }
    const xf s = xf_round(acc, sum64_err(n, mag));
    for (int64_t j = 0; j < n; j++) {
        const xf yj = xf_in(y[j * stride]), gj = xf_in(dy[j * stride]);
        err[j * stride] = lg ? xf_sub(gj, xf_mul(xf_exp(yj), s)).e : xf_mul(yj, xf_sub(gj, s)).e;
    }
}

/* One step t of torch.optim.Adam / AdamW (amsgrad off) on one element, as the kernels
 * (saga_cpu_adam_f32, adam.cu) evaluate it: the scalars lr / (1 - b1^t), sqrt(1 - b2^t), 1 - b1,
 * 1 - b2 and 1 - lr wd computed in double and rounded once to f32; m moved by torch's lerp,
 * m + (1 - b1) (g - m) (its formula for 1 - b1 < 0.5), which is b1 m + (1 - b1) g. */
static inline void xf_adam_step(xf *p, xf *m, xf *v, double grad, int64_t t, double lr, double b1,
                                double b2, double eps, double wd, bool decoupled) {
    assert_true(1 - b1 < 0.5);
    xf g = xf_in(grad);
    if (wd != 0 && !decoupled)
        g = xf_add(g, xf_mul(xf_in(wd), *p));
    if (wd != 0 && decoupled)
        *p = xf_mul(*p, xf_round(1 - lr * wd, 0));
    *m = xf_add(*m, xf_mul(xf_round(1 - b1, 0), xf_sub(g, *m)));
    *v = xf_add(xf_mul(*v, xf_in(b2)), xf_mul(xf_mul(xf_round(1 - b2, 0), g), g));
    const xf step_size = xf_round(lr / (1 - pow(b1, (double)t)), 0);
    const xf bc2_sqrt = xf_round(sqrt(1 - pow(b2, (double)t)), 0);
    const xf denom = xf_add(xf_div(xf_sqrt(*v), bc2_sqrt), xf_in(eps));
    *p = xf_add(*p, xf_div(xf_mul(xf_neg(step_size), *m), denom));
}

/* One step of torch.optim.SGD (dampening 0) on one element, as the kernels (saga_cpu_sgd_f32,
 * sgd.cu) evaluate it: g = grad + wd p; buf = buf mom + g (torch's buf = g on the first step is
 * the same value from a zero buf); g = nesterov ? g + mom buf : buf; p = p + (-lr) g. */
static inline void xf_sgd_step(xf *p, xf *buf, double grad, double lr, double mom, double wd,
                               bool nesterov) {
    xf g = xf_in(grad);
    if (wd != 0)
        g = xf_add(g, xf_mul(xf_in(wd), *p));
    if (mom != 0) {
        *buf = xf_add(xf_mul(*buf, xf_in(mom)), g);
        g = nesterov ? xf_add(g, xf_mul(xf_in(mom), *buf)) : *buf;
    }
    *p = xf_add(*p, xf_mul(xf_in(-lr), g));
}
