/* test_nn_kernels.c - the CPU f32 neural-network kernels of the kernel table, each against a plain
 * double-precision loop on random inputs, with the aliasing, error cases and thread-count
 * independence their contracts in backend_impl.h promise. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"
#include "test_xf.h"

#include "backend_impl.h"
#include "cpu/nn_kernels.h"
#include "cpu_isa_impl.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- fixture: CPU backends with 1, 2 and 3 threads ------------------------------------------ */

enum { N_BE = 3, MAX_BUFS = 64 };

static saga_backend *BE[N_BE];
static int64_t saved_min_work;

/* Buffers of the current test, from BE[0]; the CPU backend's memory is host memory, so every
 * backend's streams can run kernels on it. Freed by the per-test teardown. */
static void *bufs[MAX_BUFS];
static size_t buf_bytes[MAX_BUFS];
static int n_bufs;

static int group_setup(void **state) {
    (void)state;
    for (int t = 0; t < N_BE; t++) {
        saga_backend_params p = saga_backend_params_defaults();
        p.n_threads = t + 1;
        if (saga_backend_cpu_new(&BE[t], &p) != SAGA_OK)
            return -1;
    }
    /* every input takes the parallel path, however small */
    saved_min_work = saga_cpu_nn_min_parallel_work;
    saga_cpu_nn_min_parallel_work = 0;
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    saga_cpu_nn_min_parallel_work = saved_min_work;
    for (int t = 0; t < N_BE; t++)
        saga_backend_free_all(&BE[t]);
    return 0;
}

static int free_bufs(void **state) {
    (void)state;
    for (int i = 0; i < n_bufs; i++)
        saga_backend_free(BE[0], bufs[i], buf_bytes[i]);
    n_bufs = 0;
    return saga_test_teardown(state);
}

static void *dalloc(size_t bytes) {
    assert_true(n_bufs < MAX_BUFS);
    void *p = NULL;
    /* at least one element, so that an empty array is still a distinct pointer */
    size_t b = bytes ? bytes : 64;
    assert_int_equal(saga_backend_alloc(BE[0], &p, b), SAGA_OK);
    bufs[n_bufs] = p;
    buf_bytes[n_bufs++] = b;
    return p;
}

static float *falloc(int64_t n) {
    return dalloc((size_t)n * sizeof(float));
}
static int32_t *ialloc(int64_t n) {
    return dalloc((size_t)n * sizeof(int32_t));
}
static int64_t *lalloc(int64_t n) {
    return dalloc((size_t)n * sizeof(int64_t));
}

static saga_stream *S(int t) {
    return saga_backend_default_stream(BE[t]);
}
static const saga_kernels *K(void) {
    return BE[0]->kernels;
}

/* ---- helpers ------------------------------------------------------------------------------- */

static uint64_t rng_state;
static void seed(uint64_t s) {
    rng_state = s * 0x9E3779B97F4A7C15ull + 1;
}
static int64_t irand(int64_t n) {
    return (int64_t)(saga_test_u64(&rng_state) % (uint64_t)n);
}

static void fill_rand(float *x, int64_t n, float lo, float hi) {
    for (int64_t i = 0; i < n; i++)
        x[i] = saga_test_uniform(&rng_state, lo, hi);
}

static void fill_nan(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        x[i] = NAN;
}

/* ---- bounds -------------------------------------------------------------------------------
 *
 * Every comparison with a double reference is held to a bound derived from the kernel's arithmetic
 * (test_util.h, "bounds for results computed in different orders"), not to a tolerance picked by
 * hand. Sums: a sum of K terms in f32, in whatever order, blocking or fused multiply-adds the
 * kernel uses, is within gamma_K sum |terms| of the exact sum (gam below); a double sum is within
 * gamma_K of f64 of it, and the reference's double sum as well, hence 2 gamma_K there.
 * Element-wise formulas: each value of the kernel's formula (ops/cpu/nn_dense.c, nn_sparse.c,
 * operation for operation) is carried as its exact value in double and a bound on how far the f32
 * computation of it can be (xf; running error analysis, Higham, Accuracy and Stability of
 * Numerical Algorithms, 2nd ed., sec. 3.3): an operation on operands within e_a and e_b of their
 * values is within the propagated error of its exact result, and its rounding adds u times that
 * result (LIBM_REL for a libm call). The second-order terms are kept, so the bound holds outright,
 * and a multiply-add fused into one rounding stays within it. The reference's own double roundings,
 * 2^-29 times smaller, are left out. */
#define U SAGA_TEST_U32

/* |got[i] - want[i]| <= err[i] for each of the n elements */
static void assert_within(const char *what, const float *got, const double *want, const double *err,
                          int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - want[i]) <= err[i]))
            fail_msg("%s: element %lld: got %.9g, want %.9g: differ by %.3g, past the bound %.3g",
                     what, (long long)i, (double)got[i], want[i], fabs((double)got[i] - want[i]),
                     err[i]);
}

static void assert_scalar_within(const char *what, double got, double want, double err) {
    if (!(fabs(got - want) <= err))
        fail_msg("%s: got %.17g, want %.17g: differ by %.3g, past the bound %.3g", what, got, want,
                 fabs(got - want), err);
}

static void assert_same_bits(const void *a, const void *b, size_t bytes, const char *what) {
    if (bytes && memcmp(a, b, bytes) != 0)
        fail_msg("%s: results differ between thread counts", what);
}

static double *dvec(int64_t n) {
    double *d = calloc((size_t)(n ? n : 1), sizeof *d);
    assert_non_null(d);
    return d;
}

static void test_nn_kernels_table_complete(void **state) {
    (void)state;
    const saga_kernels *k = K();
    assert_int_equal(k->size, sizeof(saga_kernels));
    const void *slots[] = {
        (void *)k->gemm_f32,
        (void *)k->bias_add_f32,
        (void *)k->colsum_f32,
        (void *)k->act_f32,
        (void *)k->act_bwd_f32,
        (void *)k->dropout_f32,
        (void *)k->binary_f32,
        (void *)k->scale_f32,
        (void *)k->scale_heads_f32,
        (void *)k->fill_f32,
        (void *)k->copy2d_f32,
        (void *)k->softmax_rows_f32,
        (void *)k->softmax_rows_bwd_f32,
        (void *)k->nll_f32,
        (void *)k->bce_logits_f32,
        (void *)k->sum_f32,
        (void *)k->sumsq_f32,
        (void *)k->gather_rows_f32,
        (void *)k->scatter_add_rows_f32,
        (void *)k->spmm_f32,
        (void *)k->segment_reduce_f32,
        (void *)k->segment_reduce_bwd_f32,
        (void *)k->edge_softmax_f32,
        (void *)k->edge_softmax_bwd_f32,
        (void *)k->adam_f32,
        (void *)k->sgd_f32,
        (void *)k->dropout_rows_f32,
    };
    for (size_t i = 0; i < sizeof slots / sizeof *slots; i++)
        assert_non_null(slots[i]);
}

/* ---- GEMM ---------------------------------------------------------------------------------- */

static void test_nn_kernels_gemm(void **state) {
    (void)state;
    /* M, N, K. N = 16 and 8 with an untransposed A take the narrow kernel where the processor has
     * AVX2 and FMA: row blocks of 4 and 8 with remainders, K * N past its packed-B limit. */
    static const int64_t shapes[][3] = {{0, 3, 4},    {3, 0, 2},  {1, 1, 1},   {7, 5, 3},
                                        {33, 17, 65}, {5, 4, 0},  {2, 9, 1},   {37, 16, 128},
                                        {13, 8, 16},  {3, 16, 5}, {1, 8, 1},   {8, 8, 3},
                                        {4, 16, 300}, {6, 16, 1}, {17, 8, 513}};
    seed(1);
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        const int64_t M = shapes[si][0], N = shapes[si][1], Kd = shapes[si][2];
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int bi = 0; bi < 2; bi++) {
                    /* op(A) is M x K: A is K x M when transposed; pad leading dimensions */
                    const int64_t ar = ta ? Kd : M, ac = ta ? M : Kd, lda = ac + 2;
                    const int64_t br = tb ? N : Kd, bc = tb ? Kd : N, ldb = bc + 1;
                    const int64_t ldc = N + 3;
                    float *A = falloc(ar * lda), *B = falloc(br * ldb), *C = falloc(M * ldc);
                    fill_rand(A, ar * lda, -1, 1);
                    fill_rand(B, br * ldb, -1, 1);
                    const float alpha = 0.75f, beta = bi ? -0.5f : 0.0f;
                    float *C0 = falloc(M * ldc);
                    if (bi)
                        fill_rand(C, M * ldc, -1, 1);
                    else
                        fill_nan(C, M * ldc); /* beta == 0 must not read C */
                    memcpy(C0, C, (size_t)(M * ldc) * 4);
                    double *want = dvec(M * N), *err = dvec(M * N);
                    for (int64_t i = 0; i < M; i++)
                        for (int64_t j = 0; j < N; j++) {
                            double acc = 0, abs_acc = 0;
                            for (int64_t k = 0; k < Kd; k++) {
                                double a = ta ? A[k * lda + i] : A[i * lda + k];
                                double b = tb ? B[j * ldb + k] : B[k * ldb + j];
                                acc += a * b;
                                abs_acc += fabs(a * b);
                            }
                            const double bcij = bi ? beta * (double)C[i * ldc + j] : 0.0;
                            want[i * N + j] = alpha * acc + bcij;
                            /* a product passes through its own rounding, at most K - 1 additions
                             * (in SGEMM's blocked order or the narrow kernel's chain of fused
                             * multiply-adds), alpha's product and the addition of beta C, whose
                             * product rounds too: at most K + 2 roundings per term */
                            err[i * N + j] = gam(Kd + 2) * (fabs(alpha) * abs_acc + fabs(bcij));
                        }
                    assert_int_equal(
                        K()->gemm_f32(S(1), ta, tb, M, N, Kd, alpha, A, lda, B, ldb, beta, C, ldc),
                        SAGA_OK);
                    for (int64_t i = 0; i < M; i++)
                        assert_within("gemm", C + i * ldc, want + i * N, err + i * N, N);
                    /* the narrow kernel gives these bits for every thread count (rows are
                     * split, K is not); SGEMM promises them for a given count only, and runs
                     * where the instruction-set level is below AVX2 (SAGA_CPU_ISA=sse2) */
                    const bool narrow = !ta && (N == 8 || N == 16) && Kd * N <= 4096 &&
                                        saga_cpu_isa() >= SAGA_CPU_ISA_AVX2;
                    float *C2 = falloc(M * ldc);
                    for (int t = 0; narrow && t < N_BE; t++) {
                        if (bi)
                            memcpy(C2, C0, (size_t)(M * ldc) * 4);
                        else
                            fill_nan(C2, M * ldc);
                        assert_int_equal(K()->gemm_f32(S(t), ta, tb, M, N, Kd, alpha, A, lda, B,
                                                       ldb, beta, C2, ldc),
                                         SAGA_OK);
                        for (int64_t i = 0; i < M; i++)
                            assert_same_bits(C + i * ldc, C2 + i * ldc, (size_t)N * 4, "gemm");
                    }
                    free(want);
                    free(err);
                    free_bufs(NULL);
                }
    }
}

/* ---- bias, column sums --------------------------------------------------------------------- */

static const int64_t SHAPES[][2] = {{0, 3}, {1, 1}, {7, 5}, {3, 1}, {129, 33}, {2, 1000}};
#define N_SHAPES (sizeof SHAPES / sizeof *SHAPES)

static void test_nn_kernels_bias_add(void **state) {
    (void)state;
    seed(2);
    for (size_t si = 0; si < N_SHAPES; si++) {
        const int64_t r = SHAPES[si][0], c = SHAPES[si][1], n = r * c;
        float *x = falloc(n), *b = falloc(c), *y[N_BE];
        fill_rand(x, n, -2, 2);
        fill_rand(b, c, -2, 2);
        for (int t = 0; t < N_BE; t++) {
            y[t] = falloc(n);
            assert_int_equal(K()->bias_add_f32(S(t), r, c, x, b, y[t]), SAGA_OK);
        }
        for (int64_t i = 0; i < r; i++)
            for (int64_t j = 0; j < c; j++) /* one f32 addition: exact after rounding */
                assert_true(y[0][i * c + j] == (float)((double)x[i * c + j] + b[j]));
        for (int t = 1; t < N_BE; t++)
            assert_same_bits(y[0], y[t], (size_t)n * 4, "bias_add");
        assert_int_equal(K()->bias_add_f32(S(2), r, c, x, b, x), SAGA_OK); /* in place */
        assert_same_bits(x, y[0], (size_t)n * 4, "bias_add in place");
        free_bufs(NULL);
    }
}

static void test_nn_kernels_colsum(void **state) {
    (void)state;
    seed(3);
    for (size_t si = 0; si < N_SHAPES; si++) {
        const int64_t r = SHAPES[si][0], c = SHAPES[si][1];
        float *x = falloc(r * c), *out = falloc(c), *out0 = falloc(c);
        fill_rand(x, r * c, -1, 1);
        fill_rand(out0, c, -1, 1);
        for (int bi = 0; bi < 2; bi++) {
            const float beta = bi ? 0.5f : 0.0f;
            double *want = dvec(c), *err = dvec(c);
            for (int64_t j = 0; j < c; j++) {
                double mag = 0;
                for (int64_t i = 0; i < r; i++) {
                    want[j] += x[i * c + j];
                    mag += fabs(x[i * c + j]);
                }
                want[j] += bi ? beta * (double)out0[j] : 0.0;
                mag += bi ? fabs(beta * (double)out0[j]) : 0.0;
                /* the kernel's double sum of the r + 1 terms in its order (threads' partials),
                 * then one rounding to f32 */
                const double d = sum64_err(r + 1, mag);
                err[j] = d + U * (fabs(want[j]) + d);
            }
            for (int t = 0; t < N_BE; t++) {
                if (bi)
                    memcpy(out, out0, (size_t)c * 4);
                else
                    fill_nan(out, c);
                assert_int_equal(K()->colsum_f32(S(t), r, c, x, beta, out), SAGA_OK);
                assert_within("colsum", out, want, err, c);
            }
            free(want);
            free(err);
        }
        free_bufs(NULL);
    }
}

/* Partial sums too wide for the stack are allocated; a failed allocation is reported and leaves
 * the output alone. */
static void test_nn_kernels_colsum_out_of_memory(void **state) {
    (void)state;
    const int64_t r = 8, c = 1024;
    float *x = falloc(r * c), *out = falloc(c);
    fill_rand(x, r * c, -1, 1);
    fill_rand(out, c, -1, 1);
    float before = out[17];
    saga_test_fail_alloc_after(1);
    saga_status st = K()->colsum_f32(S(2), r, c, x, 0.0f, out);
    saga_test_fail_alloc_after(0);
    assert_int_equal(st, SAGA_ERR_OUT_OF_MEMORY);
    assert_true(out[17] == before);
    assert_int_equal(K()->colsum_f32(S(2), r, c, x, 0.0f, out), SAGA_OK);
}

/* ---- activations --------------------------------------------------------------------------- */

static double act_ref(saga_act kind, double x, double alpha) {
    switch (kind) {
    case SAGA_ACT_RELU:
        return x > 0 ? x : 0;
    case SAGA_ACT_LEAKY_RELU:
        return x > 0 ? x : alpha * x;
    case SAGA_ACT_ELU:
        return x > 0 ? x : alpha * (exp(x) - 1);
    case SAGA_ACT_SIGMOID:
        return 1 / (1 + exp(-x));
    default:
        return tanh(x);
    }
}

static double act_deriv_ref(saga_act kind, double x, double alpha) {
    switch (kind) {
    case SAGA_ACT_RELU:
        return x > 0 ? 1 : 0;
    case SAGA_ACT_LEAKY_RELU:
        return x > 0 ? 1 : alpha;
    case SAGA_ACT_ELU:
        return x > 0 ? 1 : alpha * exp(x);
    case SAGA_ACT_SIGMOID: {
        double s = 1 / (1 + exp(-x));
        return s * (1 - s);
    }
    default:
        return 1 - tanh(x) * tanh(x);
    }
}

/* The bounds on act_f32's y and act_bwd_f32's dx (from that y) for input x and gradient dy: the
 * kernel's formulas (nn_dense.c) followed in xf. */
static void act_err(saga_act kind, float x, float alpha, float dy, double *ey, double *edx) {
    xf y, dx;
    const xf g = xf_in(dy), a = xf_in(alpha), one = xf_in(1);
    switch (kind) {
    case SAGA_ACT_RELU: /* a select: exact */
        y = xf_in(x > 0 ? x : 0);
        dx = xf_in(x > 0 ? dy : 0);
        break;
    case SAGA_ACT_LEAKY_RELU:
        y = x > 0 ? xf_in(x) : xf_mul(a, xf_in(x));
        dx = x > 0 ? g : xf_mul(a, g);
        break;
    case SAGA_ACT_ELU: /* alpha expm1f(x); dy (y + alpha) */
        y = x > 0 ? xf_in(x) : xf_mul(a, xf_expm1(xf_in(x)));
        dx = x > 0 ? g : xf_mul(g, xf_add(y, a));
        break;
    case SAGA_ACT_SIGMOID: { /* 1 / (1 + expf(-x)), or e / (1 + e) with e = expf(x); dy y (1 - y) */
        const xf e = xf_exp(xf_in(x >= 0 ? -x : x));
        y = x >= 0 ? xf_div(one, xf_add(one, e)) : xf_div(e, xf_add(one, e));
        dx = xf_mul(g, xf_mul(y, xf_sub(one, y)));
        break;
    }
    default: /* tanh_f32; dy (1 - y y) */
        y = xf_op(tanh((double)x), 0, TANH_REL);
        dx = xf_mul(g, xf_sub(one, xf_mul(y, y)));
        break;
    }
    *ey = y.e;
    *edx = dx.e;
}

/* tanh over a sweep of 2^22 + 1 points of [-12, 12] and every power of two from 2^-149 to
 * 2^127 with both signs, against the double tanh: within TANH_REL relative, the accuracy
 * tanh_f32 documents; tanh(-0) is -0, NaN stays NaN, the infinities give +-1. Every thread count
 * gives the same bits. */
static void test_nn_kernels_tanh_sweep(void **state) {
    (void)state;
    const int64_t sweep = ((int64_t)1 << 22) + 1, pow2 = 2 * 277, n = sweep + pow2 + 4;
    float *x = falloc(n), *y[N_BE];
    for (int64_t i = 0; i < sweep; i++)
        x[i] = (float)(-12.0 + 24.0 * (double)i / (double)(sweep - 1));
    for (int64_t e = 0; e < 277; e++) {
        x[sweep + 2 * e] = ldexpf(1.0f, (int)e - 149);
        x[sweep + 2 * e + 1] = -ldexpf(1.0f, (int)e - 149);
    }
    x[n - 4] = NAN, x[n - 3] = INFINITY, x[n - 2] = -INFINITY, x[n - 1] = -0.0f;
    for (int t = 0; t < N_BE; t++) {
        y[t] = falloc(n);
        assert_int_equal(K()->act_f32(S(t), SAGA_ACT_TANH, n, 0.0f, x, y[t]), SAGA_OK);
    }
    double worst = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < n - 4; i++) {
        double w = tanh((double)x[i]), err = fabs((double)y[0][i] - w) / fabs(w);
        if (err > worst)
            worst = err, at = i;
    }
    print_message("tanh: worst relative error %.3g at x = %.9g\n", worst, (double)x[at]);
    assert_true(worst <= TANH_REL);
    assert_true(isnan(y[0][n - 4]));
    assert_true(y[0][n - 3] == 1.0f && y[0][n - 2] == -1.0f);
    assert_true(y[0][n - 1] == 0.0f && signbit(y[0][n - 1]));
    for (int t = 1; t < N_BE; t++)
        assert_same_bits(y[0], y[t], (size_t)n * 4, "tanh");
    /* one value at a time (the kernel's scalar code) gives the bits of the whole array's (its
     * vector code where the processor has one) */
    for (int64_t i = 0; i < n; i += i < sweep ? 1021 : 1) {
        float one;
        assert_int_equal(K()->act_f32(S(0), SAGA_ACT_TANH, 1, 0.0f, x + i, &one), SAGA_OK);
        assert_same_bits(&one, &y[0][i], 4, "tanh of one value");
    }
}

static void test_nn_kernels_act(void **state) {
    (void)state;
    static const int64_t sizes[] = {0, 1, 1001};
    seed(4);
    for (int kind = 0; kind < SAGA_ACT_COUNT; kind++)
        for (size_t si = 0; si < 3; si++) {
            const int64_t n = sizes[si];
            const float alpha = kind == SAGA_ACT_ELU ? 1.0f : 0.1f;
            float *x = falloc(n), *dy = falloc(n), *y[N_BE], *dx[N_BE];
            fill_rand(x, n, -30, 30);
            for (int64_t i = 0; i < n / 2; i++) /* most inputs where the curves bend */
                x[i] *= 0.1f;
            fill_rand(dy, n, -1, 1);
            double *want = dvec(n), *dwant = dvec(n), *err = dvec(n), *derr = dvec(n);
            for (int64_t i = 0; i < n; i++) {
                want[i] = act_ref((saga_act)kind, x[i], alpha);
                dwant[i] = act_deriv_ref((saga_act)kind, x[i], alpha) * dy[i];
                act_err((saga_act)kind, x[i], alpha, dy[i], &err[i], &derr[i]);
            }
            /* the input not read by the backward pass is passed as NULL */
            const bool needs_x = kind == SAGA_ACT_LEAKY_RELU || kind == SAGA_ACT_ELU;
            const bool needs_y = kind != SAGA_ACT_LEAKY_RELU;
            for (int t = 0; t < N_BE; t++) {
                y[t] = falloc(n);
                dx[t] = falloc(n);
                assert_int_equal(K()->act_f32(S(t), (saga_act)kind, n, alpha, x, y[t]), SAGA_OK);
                assert_int_equal(K()->act_bwd_f32(S(t), (saga_act)kind, n, alpha,
                                                  needs_x ? x : NULL, needs_y ? y[t] : NULL, dy,
                                                  dx[t]),
                                 SAGA_OK);
            }
            assert_within("act", y[0], want, err, n);
            /* the derivative from the f32 output carries its error (act_err) */
            assert_within("act_bwd", dx[0], dwant, derr, n);
            for (int t = 1; t < N_BE; t++) {
                assert_same_bits(y[0], y[t], (size_t)n * 4, "act");
                assert_same_bits(dx[0], dx[t], (size_t)n * 4, "act_bwd");
            }
            /* in place: y = x, dx = dy */
            float *xx = falloc(n), *yy = falloc(n), *g = falloc(n);
            memcpy(xx, x, (size_t)n * 4);
            memcpy(g, dy, (size_t)n * 4);
            memcpy(yy, y[0], (size_t)n * 4);
            assert_int_equal(K()->act_bwd_f32(S(2), (saga_act)kind, n, alpha, x, yy, g, g),
                             SAGA_OK);
            assert_same_bits(g, dx[0], (size_t)n * 4, "act_bwd in place");
            assert_int_equal(K()->act_f32(S(2), (saga_act)kind, n, alpha, xx, xx), SAGA_OK);
            assert_same_bits(xx, y[0], (size_t)n * 4, "act in place");
            free(want);
            free(dwant);
            free(err);
            free(derr);
            free_bufs(NULL);
        }
    float *x = falloc(4);
    assert_int_equal(K()->act_f32(S(0), SAGA_ACT_COUNT, 4, 0, x, x), SAGA_ERR_INVALID_ARG);
    assert_int_equal(K()->act_bwd_f32(S(0), SAGA_ACT_COUNT, 4, 0, x, x, x, x),
                     SAGA_ERR_INVALID_ARG);
}

/* ---- dropout ------------------------------------------------------------------------------- */

/* The mask formula of the contract, written out independently. */
static uint64_t splitmix(uint64_t z) {
    z ^= z >> 30;
    z *= 0xBF58476D1CE4E5B9ull;
    z ^= z >> 27;
    z *= 0x94D049BB133111EBull;
    z ^= z >> 31;
    return z;
}

static bool keep_ref(uint64_t seed_, uint64_t i, float p) {
    uint64_t k = splitmix(seed_);
    uint64_t z = splitmix(k + 0x9E3779B97F4A7C15ull * (i + 1));
    return ldexp((double)(z >> 40), -24) >= (double)p;
}

static void test_nn_kernels_dropout(void **state) {
    (void)state;
    static const float ps[] = {0.0f, 0.1f, 0.5f, 0.9f};
    static const uint64_t seeds[] = {0, 42, 0xFFFFFFFFFFFFFFFFull};
    const int64_t n = 100003;
    seed(5);
    float *x = falloc(n), *y[N_BE];
    fill_rand(x, n, -1, 1);
    for (int t = 0; t < N_BE; t++)
        y[t] = falloc(n);
    for (size_t pi = 0; pi < 4; pi++)
        for (size_t si = 0; si < 3; si++) {
            const float p = ps[pi];
            for (int t = 0; t < N_BE; t++)
                assert_int_equal(K()->dropout_f32(S(t), n, p, seeds[si], 0, x, y[t]), SAGA_OK);
            const float scale = 1.0f / (1.0f - p);
            int64_t kept = 0;
            for (int64_t i = 0; i < n; i++) {
                bool keep = keep_ref(seeds[si], (uint64_t)i, p);
                kept += keep;
                float want = keep ? x[i] * scale : 0.0f;
                if (!(y[0][i] == want))
                    fail_msg("p %g seed %llu element %lld: got %g, want %g", (double)p,
                             (unsigned long long)seeds[si], (long long)i, (double)y[0][i],
                             (double)want);
            }
            /* binomial: standard deviation below 0.0016 at this n */
            assert_true(fabs((double)kept / (double)n - (1.0 - p)) < 0.01);
            for (int t = 1; t < N_BE; t++)
                assert_same_bits(y[0], y[t], (size_t)n * 4, "dropout");
        }
    /* different seeds give different masks; in place; the backward call is the same call */
    assert_int_equal(K()->dropout_f32(S(1), n, 0.5f, 1, 0, x, y[0]), SAGA_OK);
    assert_int_equal(K()->dropout_f32(S(1), n, 0.5f, 2, 0, x, y[1]), SAGA_OK);
    assert_true(memcmp(y[0], y[1], (size_t)n * 4) != 0);
    memcpy(y[2], x, (size_t)n * 4);
    assert_int_equal(K()->dropout_f32(S(2), n, 0.5f, 1, 0, y[2], y[2]), SAGA_OK);
    assert_same_bits(y[0], y[2], (size_t)n * 4, "dropout in place");
    /* n == 0 and errors */
    assert_int_equal(K()->dropout_f32(S(1), 0, 0.5f, 1, 0, x, y[0]), SAGA_OK);
    static const float bad[] = {-0.1f, 1.0f, 1.5f, NAN};
    memcpy(y[1], y[0], (size_t)n * 4);
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(K()->dropout_f32(S(1), n, bad[i], 1, 0, x, y[0]), SAGA_ERR_INVALID_ARG);
        saga_test_assert_error_contains("dropout_f32", NULL);
        assert_same_bits(y[0], y[1], (size_t)n * 4, "dropout error leaves y");
    }
    assert_int_equal(K()->dropout_f32(S(1), n, 0.5f, 1, -1, x, y[0]), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("first element", NULL);
    /* a block of the tensor, given its first element's index, draws that block of the mask */
    assert_int_equal(K()->dropout_f32(S(1), n, 0.3f, 9, 0, x, y[0]), SAGA_OK);
    const int64_t cuts[] = {0, 1, 4097, 50000, n};
    for (int b = 0; b + 1 < 5; b++)
        for (int t = 0; t < N_BE; t++) {
            int64_t f = cuts[b], len = cuts[b + 1] - cuts[b];
            assert_int_equal(K()->dropout_f32(S(t), len, 0.3f, 9, f, x + f, y[1] + f), SAGA_OK);
        }
    assert_same_bits(y[0], y[1], (size_t)n * 4, "dropout by blocks");
    /* element indices across 2^32: the contract's formula, and rows by id past 2^32 / cols agree
     * with it */
    const int64_t far = ((int64_t)1 << 32) - 50000;
    for (int t = 0; t < N_BE; t++) {
        assert_int_equal(K()->dropout_f32(S(t), n, 0.5f, 3, far, x, y[1]), SAGA_OK);
        for (int64_t i = 0; i < n; i++) {
            float want = keep_ref(3, (uint64_t)(far + i), 0.5f) ? x[i] * 2.0f : 0.0f;
            if (!(y[1][i] == want))
                fail_msg("dropout at element %lld: got %g, want %g", (long long)(far + i),
                         (double)y[1][i], (double)want);
        }
    }
    {
        int32_t far_ids[2] = {INT32_MAX, (int32_t)(((int64_t)1 << 32) / 7)};
        float fy[14];
        assert_int_equal(K()->dropout_rows_f32(S(1), 2, 7, 0.5f, 3, far_ids, x, fy), SAGA_OK);
        for (int r = 0; r < 2; r++)
            for (int j = 0; j < 7; j++) {
                uint64_t e = (uint64_t)far_ids[r] * 7u + (uint64_t)j;
                float want = keep_ref(3, e, 0.5f) ? x[r * 7 + j] * 2.0f : 0.0f;
                assert_true(fy[r * 7 + j] == want);
            }
    }
    /* rows given by id, in any order, draw those rows of the whole mask (here: 100003 = 7 x
     * 14286 + 1, so take the first 7 x 14286 elements as a 14286 x 7 tensor) */
    const int64_t cols = 7, rows = 14286, pick = 999;
    int32_t *ids = test_malloc((size_t)pick * sizeof *ids);
    float *xs = falloc(pick * cols), *ys = falloc(pick * cols);
    for (int64_t r = 0; r < pick; r++) {
        ids[r] = (int32_t)((r * 7919) % rows);
        memcpy(xs + r * cols, x + (int64_t)ids[r] * cols, (size_t)cols * 4);
    }
    for (int t = 0; t < N_BE; t++) {
        assert_int_equal(K()->dropout_rows_f32(S(t), pick, cols, 0.3f, 9, ids, xs, ys), SAGA_OK);
        for (int64_t r = 0; r < pick; r++)
            assert_same_bits(ys + r * cols, y[0] + (int64_t)ids[r] * cols, (size_t)cols * 4,
                             "dropout of rows by id");
    }
    assert_int_equal(K()->dropout_rows_f32(S(1), pick, cols, 1.0f, 9, ids, xs, ys),
                     SAGA_ERR_INVALID_ARG);
    test_free(ids);
}

/* ---- element-wise -------------------------------------------------------------------------- */

static void test_nn_kernels_binary(void **state) {
    (void)state;
    static const int64_t sizes[] = {0, 1, 1001};
    seed(6);
    for (int op = 0; op < SAGA_BINOP_COUNT; op++)
        for (size_t si = 0; si < 3; si++) {
            const int64_t n = sizes[si];
            float *x = falloc(n), *y = falloc(n), *z[N_BE];
            fill_rand(x, n, -2, 2);
            fill_rand(y, n, 0.5f, 2);
            for (int t = 0; t < N_BE; t++) {
                z[t] = falloc(n);
                assert_int_equal(K()->binary_f32(S(t), (saga_binop)op, n, x, y, z[t]), SAGA_OK);
            }
            for (int64_t i = 0; i < n; i++) {
                double a = x[i], b = y[i];
                double w = op == SAGA_BINOP_ADD   ? a + b
                           : op == SAGA_BINOP_SUB ? a - b
                           : op == SAGA_BINOP_MUL ? a * b
                                                  : a / b;
                assert_true(z[0][i] == (float)w); /* correctly rounded */
            }
            for (int t = 1; t < N_BE; t++)
                assert_same_bits(z[0], z[t], (size_t)n * 4, "binary");
            float *xa = falloc(n), *ya = falloc(n);
            memcpy(xa, x, (size_t)n * 4);
            memcpy(ya, y, (size_t)n * 4);
            assert_int_equal(K()->binary_f32(S(2), (saga_binop)op, n, xa, y, xa), SAGA_OK);
            assert_int_equal(K()->binary_f32(S(2), (saga_binop)op, n, x, ya, ya), SAGA_OK);
            assert_same_bits(xa, z[0], (size_t)n * 4, "binary z = x");
            assert_same_bits(ya, z[0], (size_t)n * 4, "binary z = y");
            free_bufs(NULL);
        }
    float *x = falloc(4);
    assert_int_equal(K()->binary_f32(S(0), SAGA_BINOP_COUNT, 4, x, x, x), SAGA_ERR_INVALID_ARG);
}

static void test_nn_kernels_scale_fill_copy2d(void **state) {
    (void)state;
    seed(7);
    const int64_t n = 1001;
    float *x = falloc(n), *y = falloc(n), *y0 = falloc(n), *r[N_BE];
    fill_rand(x, n, -1, 1);
    fill_rand(y0, n, -1, 1);
    for (int bi = 0; bi < 2; bi++) {
        const float a = 1.5f, b = bi ? -0.25f : 0.0f;
        double *want = dvec(n), *err = dvec(n);
        for (int64_t i = 0; i < n; i++) {
            want[i] = (double)a * x[i] + (bi ? (double)b * y0[i] : 0.0);
            /* a x, b y and their sum: one rounding each */
            const xf ax = xf_mul(xf_in(a), xf_in(x[i]));
            err[i] = (bi ? xf_add(ax, xf_mul(xf_in(b), xf_in(y0[i]))) : ax).e;
        }
        for (int t = 0; t < N_BE; t++) {
            r[t] = falloc(n);
            if (bi)
                memcpy(r[t], y0, (size_t)n * 4);
            else
                fill_nan(r[t], n); /* b == 0 does not read y */
            assert_int_equal(K()->scale_f32(S(t), n, a, x, b, r[t]), SAGA_OK);
        }
        assert_within("scale", r[0], want, err, n);
        for (int t = 1; t < N_BE; t++)
            assert_same_bits(r[0], r[t], (size_t)n * 4, "scale");
        free(want);
        free(err);
    }
    memcpy(y, x, (size_t)n * 4); /* x may be y */
    assert_int_equal(K()->scale_f32(S(2), n, 2.0f, y, 1.0f, y), SAGA_OK);
    for (int64_t i = 0; i < n; i++)
        assert_true(y[i] == (float)(3.0 * x[i]));

    for (int t = 0; t < N_BE; t++) {
        assert_int_equal(K()->fill_f32(S(t), y, n, -7.25f), SAGA_OK);
        for (int64_t i = 0; i < n; i++)
            assert_true(y[i] == -7.25f);
        assert_int_equal(K()->fill_f32(S(t), y, 0, 1.0f), SAGA_OK);
        assert_true(y[0] == -7.25f);
    }

    /* copy2d: a 13 x 5 block from a 13 x 9 matrix into columns 2..7 of a 13 x 11 one */
    static const int64_t shapes[][2] = {{13, 5}, {0, 5}, {1, 1}, {13, 0}};
    for (size_t si = 0; si < 4; si++) {
        const int64_t rows = shapes[si][0], cols = shapes[si][1], lds = 9, ldd = 11;
        float *src = falloc(13 * lds), *dst = falloc(13 * ldd), *dst0 = falloc(13 * ldd);
        fill_rand(src, 13 * lds, -1, 1);
        fill_rand(dst0, 13 * ldd, -1, 1);
        for (int acc = 0; acc < 2; acc++)
            for (int t = 0; t < N_BE; t++) {
                memcpy(dst, dst0, 13 * ldd * 4);
                assert_int_equal(K()->copy2d_f32(S(t), rows, cols, src + 1, lds, dst + 2, ldd, acc),
                                 SAGA_OK);
                for (int64_t i = 0; i < 13; i++)
                    for (int64_t j = 0; j < ldd; j++) {
                        float w = dst0[i * ldd + j];
                        if (i < rows && j >= 2 && j < 2 + cols) {
                            float sv = src[i * lds + 1 + (j - 2)];
                            w = acc ? (float)((double)w + sv) : sv;
                        }
                        assert_true(dst[i * ldd + j] == w);
                    }
            }
    }
}

/* ---- softmax ------------------------------------------------------------------------------- */

static void test_nn_kernels_softmax_rows(void **state) {
    (void)state;
    seed(8);
    for (size_t si = 0; si < N_SHAPES; si++)
        for (int lg = 0; lg < 2; lg++) {
            const int64_t r = SHAPES[si][0], c = SHAPES[si][1], n = r * c;
            float *x = falloc(n), *dy = falloc(n), *y[N_BE], *dx[N_BE];
            fill_rand(x, n, -20, 20);
            fill_rand(dy, n, -1, 1);
            for (int t = 0; t < N_BE; t++) {
                y[t] = falloc(n);
                dx[t] = falloc(n);
                assert_int_equal(K()->softmax_rows_f32(S(t), r, c, lg, x, y[t]), SAGA_OK);
                assert_int_equal(K()->softmax_rows_bwd_f32(S(t), r, c, lg, y[t], dy, dx[t]),
                                 SAGA_OK);
            }
            double *want = dvec(n), *dwant = dvec(n), *err = dvec(n), *derr = dvec(n);
            for (int64_t i = 0; i < r; i++) {
                const float *xi = x + i * c;
                xf_softmax_err(c, 1, lg, xi, err + i * c);
                xf_softmax_bwd_err(c, 1, lg, y[0] + i * c, dy + i * c, derr + i * c);
                double mx = -INFINITY, sum = 0;
                for (int64_t j = 0; j < c; j++)
                    mx = fmax(mx, xi[j]);
                for (int64_t j = 0; j < c; j++)
                    sum += exp(xi[j] - mx);
                for (int64_t j = 0; j < c; j++)
                    want[i * c + j] = lg ? xi[j] - mx - log(sum) : exp(xi[j] - mx) / sum;
                /* backward from the kernel's own y, the input the contract names */
                const float *yi = y[0] + i * c, *gi = dy + i * c;
                double acc = 0;
                for (int64_t j = 0; j < c; j++)
                    acc += lg ? gi[j] : (double)gi[j] * yi[j];
                for (int64_t j = 0; j < c; j++)
                    dwant[i * c + j] = lg ? gi[j] - exp(yi[j]) * acc : yi[j] * (gi[j] - acc);
            }
            assert_within("softmax_rows", y[0], want, err, n);
            assert_within("softmax_rows_bwd", dx[0], dwant, derr, n);
            for (int t = 1; t < N_BE; t++) {
                assert_same_bits(y[0], y[t], (size_t)n * 4, "softmax_rows");
                assert_same_bits(dx[0], dx[t], (size_t)n * 4, "softmax_rows_bwd");
            }
            /* y = x, dx = dy */
            float *a = falloc(n), *g = falloc(n);
            memcpy(a, x, (size_t)n * 4);
            memcpy(g, dy, (size_t)n * 4);
            assert_int_equal(K()->softmax_rows_f32(S(1), r, c, lg, a, a), SAGA_OK);
            assert_same_bits(a, y[0], (size_t)n * 4, "softmax in place");
            assert_int_equal(K()->softmax_rows_bwd_f32(S(1), r, c, lg, a, g, g), SAGA_OK);
            assert_same_bits(g, dx[0], (size_t)n * 4, "softmax_bwd in place");
            free(want);
            free(dwant);
            free(err);
            free(derr);
            free_bufs(NULL);
        }
}

/* ---- losses -------------------------------------------------------------------------------- */

static void test_nn_kernels_nll(void **state) {
    (void)state;
    seed(9);
    const int64_t rows = 37, cols = 5;
    float *logp = falloc(rows * cols), *d = falloc(rows * cols), *d0 = falloc(rows * cols);
    int32_t *labels = ialloc(rows), *idx = ialloc(8);
    fill_rand(logp, rows * cols, -5, 0);
    for (int64_t i = 0; i < rows; i++)
        labels[i] = (int32_t)irand(cols);
    static const int32_t sel[8] = {3, 0, 36, 3, 17, 5, 5, 5}; /* rows listed twice count twice */
    memcpy(idx, sel, sizeof sel);
    struct {
        const int32_t *idx;
        int64_t n_idx;
    } cases[] = {{NULL, 0}, {idx, 8}, {idx, 1}, {idx, 0}};
    for (size_t ci = 0; ci < 4; ci++) {
        const int64_t n = cases[ci].idx ? cases[ci].n_idx : rows;
        double want = 0, mag = 0;
        double *dwant = dvec(rows * cols), *derr = dvec(rows * cols);
        /* the gradient: g = -1/n rounded to f32, added in f32 once per listing */
        xf *dg = calloc((size_t)(rows * cols), sizeof *dg);
        assert_non_null(dg);
        for (int64_t k = 0; k < n; k++) {
            int64_t r = cases[ci].idx ? cases[ci].idx[k] : k;
            want -= logp[r * cols + labels[r]];
            mag += fabs(logp[r * cols + labels[r]]);
            dwant[r * cols + labels[r]] -= 1.0 / (double)n;
            dg[r * cols + labels[r]] =
                xf_add(dg[r * cols + labels[r]], xf_round(-1.0 / (double)n, 0));
        }
        for (int64_t e = 0; e < rows * cols; e++)
            derr[e] = dg[e].e;
        free(dg);
        want = n ? want / (double)n : 0.0;
        /* the kernel's double sum of the n terms in its order (threads' partials), then / n (one
         * more rounding on each side) */
        const double err = n ? sum64_err(n + 1, mag) / (double)n : 0.0;
        double loss[N_BE];
        for (int t = 0; t < N_BE; t++) {
            fill_nan(d, rows * cols);
            assert_int_equal(K()->nll_f32(S(t), rows, cols, logp, labels, cases[ci].idx,
                                          cases[ci].n_idx, &loss[t], d),
                             SAGA_OK);
            assert_scalar_within("nll loss", loss[t], want, err);
            assert_within("nll dlogp", d, dwant, derr, rows * cols);
            assert_int_equal(K()->nll_f32(S(t), rows, cols, logp, labels, cases[ci].idx,
                                          cases[ci].n_idx, &loss[t], NULL),
                             SAGA_OK);
            assert_scalar_within("nll loss", loss[t], want, err);
        }
        free(dwant);
        free(derr);
    }
    /* errors: a listed row out of range; a selected row with a label out of range. An
     * unselected row with a bad label is not looked at. */
    fill_rand(d0, rows * cols, -1, 1);
    memcpy(d, d0, (size_t)(rows * cols) * 4);
    double loss = 12.5;
    idx[6] = (int32_t)rows;
    assert_int_equal(K()->nll_f32(S(2), rows, cols, logp, labels, idx, 8, &loss, d),
                     SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("nll_f32", "37", NULL);
    idx[6] = -1;
    assert_int_equal(K()->nll_f32(S(1), rows, cols, logp, labels, idx, 8, &loss, d),
                     SAGA_ERR_INVALID_ARG);
    idx[6] = 5;
    labels[1] = (int32_t)cols; /* row 1 is not selected */
    assert_int_equal(K()->nll_f32(S(2), rows, cols, logp, labels, idx, 8, &loss, NULL), SAGA_OK);
    loss = 12.5;
    labels[17] = -1;
    assert_int_equal(K()->nll_f32(S(2), rows, cols, logp, labels, idx, 8, &loss, d),
                     SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("label", NULL);
    assert_int_equal(K()->nll_f32(S(0), rows, cols, logp, labels, NULL, 0, &loss, d),
                     SAGA_ERR_INVALID_ARG);
    assert_true(loss == 12.5);
    assert_same_bits(d, d0, (size_t)(rows * cols) * 4, "nll error leaves dlogp");
}

static void test_nn_kernels_bce_logits(void **state) {
    (void)state;
    static const int64_t sizes[] = {0, 1, 1001};
    static const float pws[] = {1.0f, 3.0f, 0.25f};
    seed(10);
    for (size_t si = 0; si < 3; si++)
        for (size_t pi = 0; pi < 3; pi++) {
            const int64_t n = sizes[si];
            const float pw = pws[pi];
            float *x = falloc(n), *tg = falloc(n), *dx = falloc(n);
            fill_rand(x, n, -40, 40);
            for (int64_t i = 0; i < n / 2; i++)
                x[i] *= 0.05f;
            for (int64_t i = 0; i < n; i++) /* hard and soft targets */
                tg[i] = i % 3 == 0 ? saga_test_uniform(&rng_state, 0, 1) : (float)(i % 3 - 1);
            double want = 0, err = 0, mag = 0;
            double *dwant = dvec(n), *derr = dvec(n);
            for (int64_t i = 0; i < n; i++) {
                double xi = x[i], t = tg[i];
                /* the kernel's term (1 - t) x + (1 + (pw - 1) t) sp, sp = log1pf(expf(-|x|)) +
                 * max(-x, 0), summed in double; dx = (sigmoid(x) ((1 - t) + pw t) - pw t) / n */
                const xf X = xf_in(xi), T = xf_in(t), one = xf_in(1), PW = xf_in(pw);
                const xf sp = xf_add(xf_log1p(xf_exp(xf_in(-fabs(xi)))), xf_in(xi < 0 ? -xi : 0));
                const xf lw = xf_add(one, xf_mul(xf_sub(PW, one), T));
                const xf term = xf_add(xf_mul(xf_sub(one, T), X), xf_mul(lw, sp));
                err += term.e;
                mag += fabs(term.v);
                const xf e = xf_exp(xf_in(xi >= 0 ? -xi : xi));
                const xf sgm = xi >= 0 ? xf_div(one, xf_add(one, e)) : xf_div(e, xf_add(one, e));
                const xf pt = xf_mul(PW, T);
                const xf dxi = xf_sub(xf_mul(sgm, xf_add(xf_sub(one, T), pt)), pt);
                derr[i] = xf_mul(dxi, xf_round(1.0 / (double)n, 0)).e;
                /* log sigmoid(x) and log(1 - sigmoid(x)) = log sigmoid(-x), stable in double */
                double ls = xi >= 0 ? -log1p(exp(-xi)) : xi - log1p(exp(xi));
                double lns = ls - xi;
                want += -(pw * t * ls + (1 - t) * lns);
                double sg = 1 / (1 + exp(-xi));
                dwant[i] = (sg * ((1 - t) + pw * t) - pw * t) / (double)n;
            }
            want = n ? want / (double)n : 0.0;
            err = n ? (err + sum64_err(n + 1, mag)) / (double)n : 0.0;
            for (int t = 0; t < N_BE; t++) {
                double loss = NAN;
                assert_int_equal(K()->bce_logits_f32(S(t), n, x, tg, pw, &loss, dx), SAGA_OK);
                assert_scalar_within("bce loss", loss, want, err);
                assert_within("bce dx", dx, dwant, derr, n);
                assert_int_equal(K()->bce_logits_f32(S(t), n, x, tg, pw, &loss, NULL), SAGA_OK);
                assert_scalar_within("bce loss", loss, want, err);
            }
            free(dwant);
            free(derr);
            free_bufs(NULL);
        }
}

static void test_nn_kernels_sum_sumsq(void **state) {
    (void)state;
    static const int64_t sizes[] = {0, 1, 7, 100003};
    seed(11);
    for (size_t si = 0; si < 4; si++) {
        const int64_t n = sizes[si];
        float *x = falloc(n);
        fill_rand(x, n, -1, 1);
        double want = 0, want2 = 0, absum = 0;
        for (int64_t i = 0; i < n; i++) {
            want += x[i];
            want2 += (double)x[i] * x[i];
            absum += fabs(x[i]);
        }
        for (int t = 0; t < N_BE; t++) {
            double a = NAN, b = NAN, a2 = NAN;
            assert_int_equal(K()->sum_f32(S(t), n, x, &a), SAGA_OK);
            assert_int_equal(K()->sumsq_f32(S(t), n, x, &b), SAGA_OK);
            /* double sums of the same terms in another order (4 accumulators, threads) */
            assert_scalar_within("sum", a, want, sum64_err(n, absum));
            assert_scalar_within("sumsq", b, want2, sum64_err(n, want2));
            /* deterministic for a given thread count */
            assert_int_equal(K()->sum_f32(S(t), n, x, &a2), SAGA_OK);
            assert_true(memcmp(&a, &a2, sizeof a) == 0);
        }
        free_bufs(NULL);
    }
}

/* ---- gather / scatter ---------------------------------------------------------------------- */

static void test_nn_kernels_gather_scatter(void **state) {
    (void)state;
    static const int64_t shapes[][3] = {/* n_idx, cols, n_rows */
                                        {0, 4, 5},    {1, 1, 1},     {50, 1, 7}, {37, 5, 3},
                                        {200, 64, 9}, {33, 130, 40}, {10, 0, 4}};
    seed(12);
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        const int64_t ni = shapes[si][0], c = shapes[si][1], nr = shapes[si][2];
        int32_t *idx = ialloc(ni);
        for (int64_t k = 0; k < ni; k++) /* skewed: many repeats of row 0 */
            idx[k] = (int32_t)(k % 3 == 0 ? 0 : irand(nr));
        float *x = falloc(nr * c), *g[N_BE], *src = falloc(ni * c), *y0 = falloc(nr * c), *y[N_BE];
        fill_rand(x, nr * c, -1, 1);
        fill_rand(src, ni * c, -1, 1);
        fill_rand(y0, nr * c, -1, 1);
        /* zeros: every fourth row of src (of both signs), odd entries of every fifth; every
         * seventh entry of y is -0, which adding a zero would turn into +0 */
        for (int64_t k = 0; k < ni; k++)
            for (int64_t j = 0; j < c; j++)
                if (k % 4 == 1 || (k % 5 == 2 && j % 2))
                    src[k * c + j] = j % 3 ? 0.0f : -0.0f;
        for (int64_t i = 0; i < nr * c; i += 7)
            y0[i] = -0.0f;
        /* scatter reference: the contract fixes the order, so the f32 result is exact */
        float *want = malloc((size_t)(nr * c + 1) * 4);
        assert_non_null(want);
        memcpy(want, y0, (size_t)(nr * c) * 4);
        for (int64_t k = 0; k < ni; k++)
            for (int64_t j = 0; j < c; j++)
                if (src[k * c + j] != 0.0f)
                    want[idx[k] * c + j] += src[k * c + j];
        for (int t = 0; t < N_BE; t++) {
            g[t] = falloc(ni * c);
            assert_int_equal(K()->gather_rows_f32(S(t), ni, c, idx, nr, x, g[t]), SAGA_OK);
            for (int64_t k = 0; k < ni; k++)
                assert_same_bits(g[t] + k * c, x + idx[k] * c, (size_t)c * 4, "gather_rows");
            y[t] = falloc(nr * c);
            memcpy(y[t], y0, (size_t)(nr * c) * 4);
            assert_int_equal(K()->scatter_add_rows_f32(S(t), ni, c, idx, src, nr, y[t]), SAGA_OK);
            assert_same_bits(y[t], want, (size_t)(nr * c) * 4, "scatter_add_rows");
        }
        /* errors: nothing written */
        if (ni > 0) {
            float *keep = falloc(ni * c + nr * c);
            memcpy(keep, g[0], (size_t)(ni * c) * 4);
            memcpy(keep + ni * c, y[0], (size_t)(nr * c) * 4);
            static const int32_t bad[] = {-1, 0, INT32_MIN};
            for (int b = 0; b < 3; b++) {
                /* the first bad position is named, also with a second one after it */
                int64_t at = b == 2 ? ni / 2 : ni - 1;
                int32_t old = idx[at], old_last = idx[ni - 1];
                idx[at] = bad[b] == 0 ? (int32_t)nr : bad[b];
                if (b == 2)
                    idx[ni - 1] = (int32_t)nr;
                char pos[48];
                snprintf(pos, sizeof pos, "position %lld ", (long long)at);
                for (int t = 0; t < N_BE; t++) {
                    assert_int_equal(K()->gather_rows_f32(S(t), ni, c, idx, nr, x, g[0]),
                                     SAGA_ERR_INVALID_ARG);
                    saga_test_assert_error_contains("gather_rows_f32", pos, NULL);
                    assert_int_equal(K()->scatter_add_rows_f32(S(t), ni, c, idx, src, nr, y[0]),
                                     SAGA_ERR_INVALID_ARG);
                    saga_test_assert_error_contains("scatter_add_rows_f32", pos, NULL);
                }
                idx[ni - 1] = old_last;
                idx[at] = old;
            }
            assert_same_bits(keep, g[0], (size_t)(ni * c) * 4, "gather error leaves y");
            assert_same_bits(keep + ni * c, y[0], (size_t)(nr * c) * 4, "scatter error");
        }
        free(want);
        free_bufs(NULL);
    }
}

/* ---- SpMM ---------------------------------------------------------------------------------- */

/* A random CSR matrix: mostly short rows, some empty, one long one. */
static saga_csr_dev random_csr(int64_t n_rows, int64_t n_cols, bool weighted) {
    int64_t *off = lalloc(n_rows + 1);
    off[0] = 0;
    for (int64_t i = 0; i < n_rows; i++) {
        int64_t deg = n_cols == 0 ? 0 : i == n_rows / 2 ? 5 * n_cols : irand(4) == 0 ? 0 : irand(9);
        off[i + 1] = off[i] + deg;
    }
    const int64_t nnz = off[n_rows];
    int32_t *ind = ialloc(nnz);
    for (int64_t k = 0; k < nnz; k++)
        ind[k] = (int32_t)irand(n_cols);
    float *val = NULL;
    if (weighted) {
        val = falloc(nnz);
        fill_rand(val, nnz, -1, 1);
    }
    return (saga_csr_dev){.n_rows = n_rows,
                          .n_cols = n_cols,
                          .nnz = nnz,
                          .offsets = off,
                          .indices = ind,
                          .values = val};
}

static void test_nn_kernels_spmm(void **state) {
    (void)state;
    /* F = 16 and 8 take the register-blocked path, rows in pairs: odd and even row counts, a
     * single row, and rows of no entries (random_csr leaves some empty; cols 0 leaves all). */
    static const int64_t shapes[][3] = {/* rows, cols, F */
                                        {0, 4, 8},    {1, 1, 1},  {37, 20, 3},    {37, 20, 16},
                                        {38, 20, 16}, {1, 7, 16}, {2, 7, 8},      {37, 20, 8},
                                        {64, 300, 8}, {5, 0, 16}, {300, 50, 128}, {20, 30, 300},
                                        {9, 0, 4}};
    seed(13);
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
        for (int w = 0; w < 2; w++)
            for (int bi = 0; bi < 2; bi++) {
                const int64_t nr = shapes[si][0], nc = shapes[si][1], F = shapes[si][2];
                saga_csr_dev A = random_csr(nr, nc, w);
                float *X = falloc(nc * F), *Y0 = falloc(nr * F), *Y[N_BE];
                fill_rand(X, nc * F, -1, 1);
                fill_rand(Y0, nr * F, -1, 1);
                const float alpha = 0.5f, beta = bi ? 2.0f : 0.0f;
                double *want = dvec(nr * F), *err = dvec(nr * F);
                for (int64_t i = 0; i < nr; i++)
                    for (int64_t j = 0; j < F; j++) {
                        double acc = 0, ab = 0;
                        for (int64_t k = A.offsets[i]; k < A.offsets[i + 1]; k++) {
                            double v = A.values ? A.values[k] : 1.0;
                            acc += v * X[A.indices[k] * F + j];
                            ab += fabs(v * X[A.indices[k] * F + j]);
                        }
                        const double by = bi ? beta * (double)Y0[i * F + j] : 0;
                        want[i * F + j] = alpha * acc + by;
                        /* the row's deg products summed in f32, alpha's product, beta Y's and
                         * their sum: at most deg + 2 roundings per term */
                        const int64_t deg = A.offsets[i + 1] - A.offsets[i];
                        err[i * F + j] = gam(deg + 2) * (fabs(alpha) * ab + fabs(by));
                    }
                for (int t = 0; t < N_BE; t++) {
                    Y[t] = falloc(nr * F);
                    if (bi)
                        memcpy(Y[t], Y0, (size_t)(nr * F) * 4);
                    else
                        fill_nan(Y[t], nr * F);
                    assert_int_equal(K()->spmm_f32(S(t), &A, F, alpha, X, beta, Y[t]), SAGA_OK);
                }
                assert_within("spmm", Y[0], want, err, nr * F);
                for (int t = 1; t < N_BE; t++)
                    assert_same_bits(Y[0], Y[t], (size_t)(nr * F) * 4, "spmm");
                free(want);
                free(err);
                free_bufs(NULL);
            }
    /* offsets that do not run from 0 to nnz are refused, with nothing written */
    saga_csr_dev A = random_csr(12, 5, 1);
    float *X = falloc(5 * 4), *Y = falloc(12 * 4);
    fill_rand(X, 5 * 4, -1, 1);
    fill_rand(Y, 12 * 4, -1, 1);
    float *Y0 = falloc(12 * 4);
    memcpy(Y0, Y, sizeof(float) * 12 * 4);
    saga_csr_dev wrong_nnz = A;
    wrong_nnz.nnz = A.nnz + 1;
    assert_int_equal(K()->spmm_f32(S(0), &wrong_nnz, 4, 1.0f, X, 0.0f, Y), SAGA_ERR_INVALID_ARG);
    assert_non_null(strstr(saga_last_error(), "must run from 0 to nnz"));
    int64_t *shifted = lalloc(13);
    for (int i = 0; i <= 12; i++)
        shifted[i] = A.offsets[i] + 1;
    saga_csr_dev based = A;
    based.offsets = shifted;
    assert_int_equal(K()->spmm_f32(S(0), &based, 4, 1.0f, X, 0.0f, Y), SAGA_ERR_INVALID_ARG);
    assert_memory_equal(Y, Y0, sizeof(float) * 12 * 4);
    free_bufs(NULL);
}

/* An X whose rows are mostly all zeros (a gradient that few rows carry): the kernel skips them
 * and must give the bits of the plain in-order sums, a row of -0, NaN or infinity included, for
 * F = 16, 8 and others; and an X with a few more live rows than the skipping allows. */
static void test_nn_kernels_spmm_zero_rows(void **state) {
    (void)state;
    static const int64_t Fs[] = {16, 8, 5, 300};
    seed(19);
    for (size_t fi = 0; fi < sizeof Fs / sizeof *Fs; fi++)
        for (int dense = 0; dense < 2; dense++)
            for (int bi = 0; bi < 2; bi++) {
                const int64_t nr = 700, nc = 1100, F = Fs[fi];
                saga_csr_dev A = random_csr(nr, nc, true);
                float *X = falloc(nc * F), *Y0 = falloc(nr * F), *want = falloc(nr * F);
                memset(X, 0, (size_t)(nc * F) * 4);
                const int64_t live = dense ? nc / 4 : nc / 40;
                for (int64_t r = 0; r < live; r++)
                    fill_rand(X + irand(nc) * F, F, -1, 1);
                X[7 * F] = -0.0f;       /* a row of zeros, one negative */
                X[9 * F + F - 1] = NAN; /* a NaN and an infinity live */
                X[11 * F] = INFINITY;
                fill_rand(Y0, nr * F, -1, 1);
                const float alpha = 0.5f, beta = bi ? 2.0f : 0.0f;
                for (int64_t i = 0; i < nr; i++)
                    for (int64_t j = 0; j < F; j++) {
                        float acc = 0.0f;
                        for (int64_t k = A.offsets[i]; k < A.offsets[i + 1]; k++)
                            acc += A.values[k] * X[A.indices[k] * F + j];
                        want[i * F + j] = bi ? alpha * acc + beta * Y0[i * F + j] : alpha * acc;
                    }
                for (int t = 0; t < N_BE; t++) {
                    float *Y = falloc(nr * F);
                    if (bi)
                        memcpy(Y, Y0, (size_t)(nr * F) * 4);
                    else
                        fill_nan(Y, nr * F);
                    assert_int_equal(K()->spmm_f32(S(t), &A, F, alpha, X, beta, Y), SAGA_OK);
                    assert_same_bits(Y, want, (size_t)(nr * F) * 4, "spmm over zero rows");
                }
                free_bufs(NULL);
            }
}

/* Y = alpha A^T X + beta Y: every element adds its terms in increasing row order whatever the
 * thread count, so the same bits as a loop in that order, on 1, 2 and 3 threads (which sum their
 * columns apart: widths 16 and 8 on the vectorised paths, odd ones, and past SPMM_BLOCK). */
static void test_nn_kernels_spmm_t(void **state) {
    (void)state;
    static const int64_t shapes[][3] = {/* rows of A, cols of A (rows of Y), F */
                                        {0, 4, 8},     {1, 1, 1},    {37, 20, 3}, {37, 20, 16},
                                        {38, 20, 8},   {64, 300, 8}, {40, 7, 32}, {5, 0, 16},
                                        {20, 30, 300}, {50, 128, 16}};
    seed(17);
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
        for (int w = 0; w < 2; w++)
            for (int bi = 0; bi < 3; bi++) {
                const int64_t nr = shapes[si][0], nc = shapes[si][1], F = shapes[si][2];
                saga_csr_dev A = random_csr(nr, nc, w);
                float *X = falloc(nr * F), *Y0 = falloc(nc * F), *Y[N_BE];
                fill_rand(X, nr * F, -1, 1);
                for (int64_t i = 0; i < nr; i += 3) /* rows of zeros, which may be skipped */
                    memset(X + i * F, 0, (size_t)F * 4);
                fill_rand(Y0, nc * F, -1, 1);
                if (bi == 2) {
                    /* Y of -0 and X of zeros: -0 + 0 is +0, so no row may be skipped */
                    memset(X, 0, (size_t)(nr * F) * 4);
                    for (int64_t r = 0; r < nc * F; r++)
                        Y0[r] = -0.0f;
                }
                const float alpha = 0.5f, beta = bi == 0 ? 0.0f : bi == 1 ? 2.0f : 1.0f;
                float *want = falloc(nc * F);
                for (int64_t r = 0; r < nc * F; r++)
                    want[r] = bi ? beta * Y0[r] : 0.0f;
                for (int64_t i = 0; i < nr; i++)
                    for (int64_t k = A.offsets[i]; k < A.offsets[i + 1]; k++) {
                        const float a = alpha * (A.values ? A.values[k] : 1.0f);
                        for (int64_t j = 0; j < F; j++)
                            want[A.indices[k] * F + j] += a * X[i * F + j];
                    }
                for (int t = 0; t < N_BE; t++) {
                    Y[t] = falloc(nc * F);
                    if (bi)
                        memcpy(Y[t], Y0, (size_t)(nc * F) * 4);
                    else
                        fill_nan(Y[t], nc * F);
                    assert_int_equal(K()->spmm_t_f32(S(t), &A, F, alpha, X, beta, Y[t]), SAGA_OK);
                    assert_same_bits(Y[t], want, (size_t)(nc * F) * 4, "spmm_t");
                }
                free_bufs(NULL);
            }
}

/* ---- segment reductions -------------------------------------------------------------------- */

/* n_seg segments of random sizes, some empty; returns the offsets (n_seg + 1). */
static int64_t *random_segments(int64_t n_seg) {
    int64_t *off = lalloc(n_seg + 1);
    off[0] = 0;
    for (int64_t g = 0; g < n_seg; g++)
        off[g + 1] = off[g] + (g == n_seg / 3 ? 40 : irand(5) == 0 ? 0 : irand(7));
    return off;
}

static void test_nn_kernels_segment_reduce(void **state) {
    (void)state;
    static const int64_t shapes[][2] = {{0, 3}, {1, 1}, {25, 1}, {25, 5}, {60, 17}};
    seed(14);
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
        for (int op = 0; op < SAGA_REDUCE_COUNT; op++) {
            const int64_t ns = shapes[si][0], F = shapes[si][1];
            int64_t *off = random_segments(ns);
            const int64_t nnz = off[ns];
            float *x = falloc(nnz * F), *dy = falloc(ns * F), *y[N_BE], *dx[N_BE];
            int32_t *am[N_BE];
            for (int64_t i = 0; i < nnz * F; i++) /* few distinct values: ties for MAX */
                x[i] = (float)irand(4) - 1.5f +
                       (op == SAGA_REDUCE_MAX ? 0 : saga_test_uniform(&rng_state, 0, 1));
            fill_rand(dy, ns * F, -1, 1);
            double *want = dvec(ns * F), *dwant = dvec(nnz * F), *err = dvec(ns * F),
                   *derr = dvec(nnz * F);
            int32_t *amwant = calloc((size_t)(ns * F + 1), sizeof *amwant);
            assert_non_null(amwant);
            for (int64_t g = 0; g < ns; g++)
                for (int64_t j = 0; j < F; j++) {
                    const int64_t r0 = off[g], r1 = off[g + 1];
                    double acc = 0, mag = 0;
                    int32_t best = -1;
                    for (int64_t r = r0; r < r1; r++) {
                        acc += x[r * F + j];
                        mag += fabs(x[r * F + j]);
                        if (best < 0 || x[r * F + j] > x[best * F + j])
                            best = (int32_t)r;
                    }
                    if (op == SAGA_REDUCE_MAX)
                        want[g * F + j] = best < 0 ? 0 : x[best * F + j];
                    else
                        want[g * F + j] = op == SAGA_REDUCE_MEAN && r1 > r0 ? acc / (r1 - r0) : acc;
                    amwant[g * F + j] = best;
                    /* SUM: the segment's r1 - r0 terms summed in f32; MEAN: and divided by the
                     * count (one rounding more); MAX: the element itself */
                    if (op != SAGA_REDUCE_MAX && r1 > r0)
                        err[g * F + j] = op == SAGA_REDUCE_SUM ? gam(r1 - r0 - 1) * mag
                                                               : gam(r1 - r0) * mag / (r1 - r0);
                    for (int64_t r = r0; r < r1; r++)
                        dwant[r * F + j] = op == SAGA_REDUCE_SUM    ? dy[g * F + j]
                                           : op == SAGA_REDUCE_MEAN ? dy[g * F + j] / (r1 - r0)
                                           : r == best              ? dy[g * F + j]
                                                                    : 0.0;
                    /* MEAN: dy times 1/count rounded to f32, two roundings; the others copy */
                    if (op == SAGA_REDUCE_MEAN)
                        for (int64_t r = r0; r < r1; r++)
                            derr[r * F + j] = gam(2) * fabs(dwant[r * F + j]);
                }
            for (int t = 0; t < N_BE; t++) {
                y[t] = falloc(ns * F);
                dx[t] = falloc(nnz * F);
                am[t] = ialloc(ns * F);
                fill_nan(y[t], ns * F);
                fill_nan(dx[t], nnz * F);
                assert_int_equal(
                    K()->segment_reduce_f32(S(t), off, ns, F, (saga_reduce)op, x, y[t], am[t]),
                    SAGA_OK);
                assert_int_equal(K()->segment_reduce_bwd_f32(S(t), off, ns, F, (saga_reduce)op, dy,
                                                             am[t], dx[t]),
                                 SAGA_OK);
            }
            assert_within("segment_reduce", y[0], want, err, ns * F);
            assert_within("segment_reduce_bwd", dx[0], dwant, derr, nnz * F);
            if (op == SAGA_REDUCE_MAX)
                for (int64_t i = 0; i < ns * F; i++)
                    assert_int_equal(am[0][i], amwant[i]);
            for (int t = 1; t < N_BE; t++) {
                assert_same_bits(y[0], y[t], (size_t)(ns * F) * 4, "segment_reduce");
                assert_same_bits(dx[0], dx[t], (size_t)(nnz * F) * 4, "segment_reduce_bwd");
                if (op == SAGA_REDUCE_MAX)
                    assert_same_bits(am[0], am[t], (size_t)(ns * F) * 4, "argmax");
            }
            if (op == SAGA_REDUCE_MAX) { /* MAX without argmax: nothing written */
                for (int t = 0; t < N_BE; t++) {
                    memcpy(y[1], y[0], (size_t)(ns * F) * 4);
                    assert_int_equal(
                        K()->segment_reduce_f32(S(t), off, ns, F, SAGA_REDUCE_MAX, x, y[1], NULL),
                        SAGA_ERR_INVALID_ARG);
                    saga_test_assert_error_contains("argmax", NULL);
                    assert_same_bits(y[0], y[1], (size_t)(ns * F) * 4, "MAX error leaves y");
                    memcpy(dx[1], dx[0], (size_t)(nnz * F) * 4);
                    assert_int_equal(K()->segment_reduce_bwd_f32(S(t), off, ns, F, SAGA_REDUCE_MAX,
                                                                 dy, NULL, dx[1]),
                                     SAGA_ERR_INVALID_ARG);
                    assert_same_bits(dx[0], dx[1], (size_t)(nnz * F) * 4, "MAX error leaves dx");
                }
            } else { /* other ops ignore argmax */
                assert_int_equal(
                    K()->segment_reduce_f32(S(2), off, ns, F, (saga_reduce)op, x, y[1], NULL),
                    SAGA_OK);
                assert_same_bits(y[0], y[1], (size_t)(ns * F) * 4, "argmax ignored");
            }
            free(want);
            free(dwant);
            free(err);
            free(derr);
            free(amwant);
            free_bufs(NULL);
        }
    float *x = falloc(4);
    int64_t off[2] = {0, 1};
    assert_int_equal(K()->segment_reduce_f32(S(0), off, 1, 1, SAGA_REDUCE_COUNT, x, x, NULL),
                     SAGA_ERR_INVALID_ARG);
}

static void test_nn_kernels_edge_softmax(void **state) {
    (void)state;
    static const int64_t shapes[][2] = {{0, 2}, {1, 1}, {30, 1}, {30, 4}, {7, 3}};
    seed(15);
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        const int64_t ns = shapes[si][0], H = shapes[si][1];
        int64_t *off = random_segments(ns);
        const int64_t n = off[ns] * H;
        float *sc = falloc(n), *dout = falloc(n), *out[N_BE], *ds[N_BE];
        fill_rand(sc, n, -15, 15);
        fill_rand(dout, n, -1, 1);
        for (int t = 0; t < N_BE; t++) {
            out[t] = falloc(n);
            ds[t] = falloc(n);
            assert_int_equal(K()->edge_softmax_f32(S(t), off, ns, H, sc, out[t]), SAGA_OK);
            assert_int_equal(K()->edge_softmax_bwd_f32(S(t), off, ns, H, out[t], dout, ds[t]),
                             SAGA_OK);
        }
        double *want = dvec(n), *dwant = dvec(n), *err = dvec(n), *derr = dvec(n);
        for (int64_t g = 0; g < ns; g++)
            for (int64_t h = 0; h < H; h++) {
                double mx = -INFINITY, sum = 0, dot = 0;
                const int64_t o = off[g] * H + h, len = off[g + 1] - off[g];
                if (len > 0) {
                    xf_softmax_err(len, H, false, sc + o, err + o);
                    xf_softmax_bwd_err(len, H, false, out[0] + o, dout + o, derr + o);
                }
                for (int64_t r = off[g]; r < off[g + 1]; r++)
                    mx = fmax(mx, sc[r * H + h]);
                for (int64_t r = off[g]; r < off[g + 1]; r++)
                    sum += exp(sc[r * H + h] - mx);
                for (int64_t r = off[g]; r < off[g + 1]; r++) {
                    want[r * H + h] = exp(sc[r * H + h] - mx) / sum;
                    dot += (double)out[0][r * H + h] * dout[r * H + h];
                }
                for (int64_t r = off[g]; r < off[g + 1]; r++)
                    dwant[r * H + h] = out[0][r * H + h] * (dout[r * H + h] - dot);
            }
        assert_within("edge_softmax", out[0], want, err, n);
        assert_within("edge_softmax_bwd", ds[0], dwant, derr, n);
        for (int t = 1; t < N_BE; t++) {
            assert_same_bits(out[0], out[t], (size_t)n * 4, "edge_softmax");
            assert_same_bits(ds[0], ds[t], (size_t)n * 4, "edge_softmax_bwd");
        }
        /* out = scores, dscores = dout */
        assert_int_equal(K()->edge_softmax_bwd_f32(S(1), off, ns, H, out[0], dout, dout), SAGA_OK);
        assert_same_bits(dout, ds[0], (size_t)n * 4, "edge_softmax_bwd in place");
        assert_int_equal(K()->edge_softmax_f32(S(2), off, ns, H, sc, sc), SAGA_OK);
        assert_same_bits(sc, out[0], (size_t)n * 4, "edge_softmax in place");
        free(want);
        free(dwant);
        free(err);
        free(derr);
        free_bufs(NULL);
    }
}

/* ---- optimizers ---------------------------------------------------------------------------- */

/* |got[i] - want[i].v| <= want[i].e for each of the n elements */
static void assert_xf(const char *what, const float *got, const xf *want, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - want[i].v) <= want[i].e))
            fail_msg("%s: element %lld: got %.9g, want %.9g: differ by %.3g, past the bound %.3g",
                     what, (long long)i, (double)got[i], want[i].v,
                     fabs((double)got[i] - want[i].v), want[i].e);
}

/* torch.optim.Adam / AdamW (amsgrad off, maximize off) for 3 steps, written out in double:
 *   g = grad (+ wd p for Adam); p *= 1 - lr wd (AdamW)
 *   m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2
 *   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
 * in xf, as saga_cpu_adam_f32 evaluates it: the scalars lr / (1 - b1^t), sqrt(1 - b2^t), 1 - b1,
 * 1 - b2 and 1 - lr wd computed in double and rounded once to f32, m moved by torch's lerp,
 * m + (1 - b1) (g - m) (its formula for 1 - b1 < 0.5), which is b1 m + (1 - b1) g. */
static void test_nn_kernels_adam(void **state) {
    (void)state;
    const int64_t n = 1001;
    const float lr = 0.01f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    static const float wds[] = {0.0f, 0.05f};
    seed(16);
    for (int dec = 0; dec < 2; dec++)
        for (int wi = 0; wi < 2; wi++) {
            const float wd = wds[wi];
            float *p0 = falloc(n), *grads = falloc(3 * n), *p[N_BE], *m[N_BE], *v[N_BE];
            fill_rand(p0, n, -1, 1);
            fill_rand(grads, 3 * n, -1, 1);
            for (int64_t i = 0; i < n / 10; i++) /* some tiny gradients: eps matters */
                grads[i] *= 1e-7f;
            xf *pr = calloc((size_t)n, sizeof *pr), *mr = calloc((size_t)n, sizeof *mr),
               *vr = calloc((size_t)n, sizeof *vr);
            assert_true(pr && mr && vr);
            for (int64_t i = 0; i < n; i++)
                pr[i] = xf_in(p0[i]);
            for (int t = 0; t < N_BE; t++) {
                p[t] = falloc(n);
                m[t] = falloc(n);
                v[t] = falloc(n);
                memcpy(p[t], p0, (size_t)n * 4);
                memset(m[t], 0, (size_t)n * 4);
                memset(v[t], 0, (size_t)n * 4);
            }
            for (int64_t step = 1; step <= 3; step++) {
                const float *gs = grads + (step - 1) * n;
                for (int64_t i = 0; i < n; i++)
                    xf_adam_step(&pr[i], &mr[i], &vr[i], gs[i], step, lr, b1, b2, eps, wd, dec);
                for (int t = 0; t < N_BE; t++)
                    assert_int_equal(K()->adam_f32(S(t), n, lr, b1, b2, eps, wd, dec, step, p[t],
                                                   gs, m[t], v[t]),
                                     SAGA_OK);
            }
            assert_xf("adam param", p[0], pr, n);
            assert_xf("adam m", m[0], mr, n);
            assert_xf("adam v", v[0], vr, n);
            for (int t = 1; t < N_BE; t++) {
                assert_same_bits(p[0], p[t], (size_t)n * 4, "adam param");
                assert_same_bits(m[0], m[t], (size_t)n * 4, "adam m");
                assert_same_bits(v[0], v[t], (size_t)n * 4, "adam v");
            }
            /* grad is not modified; step < 1 is an error that writes nothing */
            float *gcopy = falloc(n);
            memcpy(gcopy, p[0], (size_t)n * 4);
            assert_int_equal(
                K()->adam_f32(S(1), n, lr, b1, b2, eps, wd, dec, 0, p[0], grads, m[0], v[0]),
                SAGA_ERR_INVALID_ARG);
            saga_test_assert_error_contains("step", NULL);
            assert_same_bits(gcopy, p[0], (size_t)n * 4, "adam error leaves param");
            free(pr);
            free(mr);
            free(vr);
            free_bufs(NULL);
        }
}

/* torch.optim.SGD (dampening 0) for 3 steps, written out in double:
 *   g = grad + wd p; buf = g on the first step, else momentum buf + g
 *   g = nesterov ? g + momentum buf : buf; p -= lr g
 * in xf, as saga_cpu_sgd_f32 evaluates it (buf mom + g from a zeroed buf is g on the first step) */
static void test_nn_kernels_sgd(void **state) {
    (void)state;
    const int64_t n = 1001;
    const float lr = 0.1f;
    static const struct {
        float momentum, wd;
        bool nesterov;
    } cfg[] = {
        {0, 0, false}, {0, 0.01f, false}, {0.9f, 0, false}, {0.9f, 0.01f, true}, {0.5f, 0, true}};
    seed(17);
    for (size_t ci = 0; ci < sizeof cfg / sizeof *cfg; ci++) {
        const float mom = cfg[ci].momentum, wd = cfg[ci].wd;
        const bool nest = cfg[ci].nesterov;
        float *p0 = falloc(n), *grads = falloc(3 * n), *p[N_BE], *buf[N_BE];
        fill_rand(p0, n, -1, 1);
        fill_rand(grads, 3 * n, -1, 1);
        const float *grads_c = grads;
        xf *pr = calloc((size_t)n, sizeof *pr), *br = calloc((size_t)n, sizeof *br);
        assert_true(pr && br);
        for (int64_t i = 0; i < n; i++)
            pr[i] = xf_in(p0[i]);
        for (int t = 0; t < N_BE; t++) {
            p[t] = falloc(n);
            memcpy(p[t], p0, (size_t)n * 4);
            buf[t] = NULL;
            if (mom != 0) {
                buf[t] = falloc(n);
                memset(buf[t], 0, (size_t)n * 4);
            }
        }
        for (int step = 1; step <= 3; step++) {
            const float *gs = grads_c + (step - 1) * n;
            for (int64_t i = 0; i < n; i++)
                xf_sgd_step(&pr[i], &br[i], gs[i], lr, mom, wd, nest);
            for (int t = 0; t < N_BE; t++)
                assert_int_equal(K()->sgd_f32(S(t), n, lr, mom, wd, nest, p[t], gs, buf[t]),
                                 SAGA_OK);
        }
        assert_xf("sgd param", p[0], pr, n);
        if (mom != 0)
            assert_xf("sgd buf", buf[0], br, n);
        for (int t = 1; t < N_BE; t++) {
            assert_same_bits(p[0], p[t], (size_t)n * 4, "sgd param");
            if (mom != 0)
                assert_same_bits(buf[0], buf[t], (size_t)n * 4, "sgd buf");
        }
        free(pr);
        free(br);
        free_bufs(NULL);
    }
    float *p = falloc(3), *g = falloc(3);
    p[0] = 1.0f;
    g[0] = 1.0f;
    assert_int_equal(K()->sgd_f32(S(0), 1, 0.1f, 0.9f, 0, false, p, g, NULL), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("sgd_f32", NULL);
    assert_true(p[0] == 1.0f);
}

/* a test whose buffers its teardown frees */
#define bufs_test(f) cmocka_unit_test_setup_teardown(f, saga_test_setup, free_bufs)

int main(void) {
    const struct CMUnitTest tests[] = {
        bufs_test(test_nn_kernels_table_complete),
        bufs_test(test_nn_kernels_gemm),
        bufs_test(test_nn_kernels_bias_add),
        bufs_test(test_nn_kernels_colsum),
        bufs_test(test_nn_kernels_colsum_out_of_memory),
        bufs_test(test_nn_kernels_act),
        bufs_test(test_nn_kernels_tanh_sweep),
        bufs_test(test_nn_kernels_dropout),
        bufs_test(test_nn_kernels_binary),
        bufs_test(test_nn_kernels_scale_fill_copy2d),
        bufs_test(test_nn_kernels_softmax_rows),
        bufs_test(test_nn_kernels_nll),
        bufs_test(test_nn_kernels_bce_logits),
        bufs_test(test_nn_kernels_sum_sumsq),
        bufs_test(test_nn_kernels_gather_scatter),
        bufs_test(test_nn_kernels_spmm),
        bufs_test(test_nn_kernels_spmm_t),
        bufs_test(test_nn_kernels_spmm_zero_rows),
        bufs_test(test_nn_kernels_segment_reduce),
        bufs_test(test_nn_kernels_edge_softmax),
        bufs_test(test_nn_kernels_adam),
        bufs_test(test_nn_kernels_sgd),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
