/* test_cpu_isa.c - saga's own instruction-set paths of the CPU kernels (cpu_isa_impl.h): every
 * level up to the processor's gives the baseline's bits where the kernels promise them (sparse
 * products, dropout masks, tanh, 16-bit conversions, the elementwise kernels and scatter-adds),
 * and the narrow GEMM of AVX2 and AVX-512 stays within the bound of two orders of its sums from
 * SGEMM; SAGA_CPU_ISA, when set, is the level the kernels run at. tests/kernels.sh runs the
 * numeric tests once per level as well. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"

#include "backend_impl.h"
#include "cpu/nn_kernels.h"
#include "cpu_isa_impl.h"
#include "half_impl.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 700, DEG = 9, OUTS = 25 };

static uint64_t rng = 0x243F6A8885A308D3ull;

/* What every kernel gives at one level, each output an array of floats (the 16-bit conversions'
 * bits stored as floats' bits). */
typedef struct outputs {
    float *out[OUTS];
    int64_t len[OUTS];
} outputs;

typedef struct inputs {
    saga_csr_dev A;
    int64_t *off;
    int32_t *idx;
    float *val, *X16, *X8, *Xz, *x, *specials;
    int64_t n_specials;
} inputs;

static void inputs_new(inputs *in) {
    in->off = test_malloc((N + 1) * sizeof *in->off);
    in->idx = test_malloc((size_t)N * DEG * sizeof *in->idx);
    in->val = test_malloc((size_t)N * DEG * sizeof *in->val);
    int64_t nnz = 0;
    in->off[0] = 0;
    for (int64_t r = 0; r < N; r++) {
        const int64_t d = (int64_t)(saga_test_u64(&rng) % (2 * DEG - 1)); /* some rows empty */
        for (int64_t k = 0; k < d && nnz < (int64_t)N * DEG; k++) {
            in->idx[nnz] = (int32_t)(saga_test_u64(&rng) % N);
            in->val[nnz++] = saga_test_uniform(&rng, -1, 1);
        }
        in->off[r + 1] = nnz;
    }
    in->A = (saga_csr_dev){N, N, nnz, in->off, in->idx, in->val};
    in->X16 = test_malloc((size_t)N * 16 * sizeof(float));
    in->X8 = test_malloc((size_t)N * 8 * sizeof(float));
    in->Xz = test_malloc((size_t)N * 16 * sizeof(float));
    in->x = test_malloc((size_t)N * 16 * sizeof(float));
    for (int64_t i = 0; i < N * 16; i++) {
        in->X16[i] = saga_test_uniform(&rng, -2, 2);
        in->Xz[i] = (i / 16) % 3 ? 0.0f : in->X16[i]; /* two rows in three zero: the live path */
        in->x[i] = saga_test_uniform(&rng, -12, 12);
    }
    for (int64_t i = 0; i < N * 8; i++)
        in->X8[i] = saga_test_uniform(&rng, -2, 2);
    static const float sp[] = {0.0f,     -0.0f,    1e-40f,   -1e-40f,   65504.0f, 65520.0f, 1e30f,
                               -1e30f,   3e38f,    INFINITY, -INFINITY, NAN,      0.55f,    -0.55f,
                               5.96e-8f, 2.98e-8f, 1.0f,     -1.0f,     9.99f,    10.01f};
    in->n_specials = (int64_t)(sizeof sp / sizeof sp[0]);
    in->specials = test_malloc(sizeof sp);
    memcpy(in->specials, sp, sizeof sp);
}

static void inputs_free(inputs *in) {
    test_free(in->off);
    test_free(in->idx);
    test_free(in->val);
    test_free(in->X16);
    test_free(in->X8);
    test_free(in->Xz);
    test_free(in->x);
    test_free(in->specials);
}

static float *out_new(outputs *o, int k, int64_t len) {
    o->len[k] = len;
    o->out[k] = test_malloc((size_t)len * sizeof(float));
    return o->out[k];
}

static void run_elementwise(saga_stream *s, const inputs *in, outputs *o);

/* Runs every dispatched kernel at the current level into o. */
static void run_all(saga_stream *s, const inputs *in, outputs *o) {
    float *y;
    y = out_new(o, 0, N * 16);
    assert_int_equal(saga_cpu_spmm_f32(s, &in->A, 16, 0.75f, in->X16, 0.0f, y), SAGA_OK);
    y = out_new(o, 1, N * 8);
    assert_int_equal(saga_cpu_spmm_f32(s, &in->A, 8, 1.0f, in->X8, 0.0f, y), SAGA_OK);
    y = out_new(o, 2, N * 16);
    assert_int_equal(saga_cpu_spmm_f32(s, &in->A, 16, 1.0f, in->Xz, 0.0f, y), SAGA_OK);
    y = out_new(o, 3, N * 16);
    assert_int_equal(saga_cpu_spmm_t_f32(s, &in->A, 16, 1.0f, in->X16, 0.0f, y), SAGA_OK);
    y = out_new(o, 4, N * 8);
    assert_int_equal(saga_cpu_spmm_t_f32(s, &in->A, 8, 0.5f, in->X8, 0.0f, y), SAGA_OK);
    y = out_new(o, 5, N * 16);
    assert_int_equal(saga_cpu_dropout_f32(s, N * 16, 0.3f, 11, 5, in->x, y), SAGA_OK);
    y = out_new(o, 6, in->A.nnz);
    memcpy(y, in->val, (size_t)in->A.nnz * sizeof *y);
    assert_int_equal(saga_cpu_dropout_csr_f32(s, &in->A, 0.4f, 12, 3, NULL, y), SAGA_OK);
    y = out_new(o, 7, N * 16);
    assert_int_equal(saga_cpu_act_f32(s, SAGA_ACT_TANH, N * 16, 0, in->x, y), SAGA_OK);
    y = out_new(o, 8, in->n_specials);
    assert_int_equal(saga_cpu_act_f32(s, SAGA_ACT_TANH, in->n_specials, 0, in->specials, y),
                     SAGA_OK);
    for (int bf16 = 0; bf16 < 2; bf16++) {
        /* the specials and the random values, narrowed, then widened */
        const int64_t n = in->n_specials + N * 16;
        float *src = test_malloc((size_t)n * sizeof *src);
        memcpy(src, in->specials, (size_t)in->n_specials * sizeof *src);
        memcpy(src + in->n_specials, in->x, (size_t)N * 16 * sizeof *src);
        uint16_t *h = test_malloc((size_t)n * sizeof *h);
        saga_f32_to_half_n(src, n, bf16, h);
        y = out_new(o, 9 + bf16, n);
        for (int64_t i = 0; i < n; i++) { /* the bits of h, as floats */
            uint32_t b = h[i];
            memcpy(&y[i], &b, sizeof b);
        }
        if (bf16) {
            float *w = out_new(o, 11, n);
            saga_half_to_f32_n(h, n, true, w);
        }
        test_free(src);
        test_free(h);
    }
    run_elementwise(s, in, o);
}

/* The elementwise kernels of every width (SAGA_CPU_ISA_CLONES_V4) into o->out[12 ..]: scatter-adds
 * over both of their splits, bias, column sums, the activations and their derivatives, scaling,
 * over values with special ones (zeros of both signs, subnormals, infinities, NaN) mixed in. */
static void run_elementwise(saga_stream *s, const inputs *in, outputs *o) {
    enum { W = 48 };
    float *mix = test_malloc((size_t)N * W * sizeof *mix);
    for (int64_t i = 0; i < N * W; i++) /* rows of zeros (of both signs) every fourth row */
        mix[i] = (i / W) % 4 == 1 ? ((i % 3) ? 0.0f : -0.0f)
                 : i % 7 == 3     ? in->specials[(i / 7) % in->n_specials]
                                  : in->x[i % (N * 16)];
    float *y;
    for (int k = 0; k < 2; k++) { /* 48 columns: by columns; 8: by destination rows */
        const int64_t cols = k ? 8 : W;
        y = out_new(o, 12 + k, N * cols);
        for (int64_t i = 0; i < N * cols; i++) /* -0 stays -0 where only zeros are added */
            y[i] = i % 5 ? in->X16[i % (N * 16)] : -0.0f;
        assert_int_equal(saga_cpu_scatter_add_rows_f32(s, N, cols, in->idx, mix, N, y), SAGA_OK);
    }
    y = out_new(o, 14, N * 16);
    assert_int_equal(saga_cpu_bias_add_f32(s, N, 16, mix, in->X16, y), SAGA_OK);
    y = out_new(o, 15, W);
    assert_int_equal(saga_cpu_colsum_f32(s, N, W, mix, 0.0f, y), SAGA_OK);
    static const saga_act KIND[] = {SAGA_ACT_RELU, SAGA_ACT_LEAKY_RELU, SAGA_ACT_ELU,
                                    SAGA_ACT_SIGMOID, SAGA_ACT_TANH};
    float *act = test_malloc((size_t)N * 16 * sizeof *act);
    for (int k = 0; k < 5; k++) {
        if (k < 2) {
            y = out_new(o, 16 + k, N * 16);
            assert_int_equal(saga_cpu_act_f32(s, KIND[k], N * 16, 0.1f, mix, y), SAGA_OK);
        }
        /* the derivative from the activation's output at this level (the same at every level) */
        assert_int_equal(saga_cpu_act_f32(s, KIND[k], N * 16, 1.0f, in->x, act), SAGA_OK);
        y = out_new(o, 18 + k, N * 16);
        assert_int_equal(
            saga_cpu_act_bwd_f32(s, KIND[k], N * 16, k == 2 ? 1.0f : 0.1f, in->x, act, mix, y),
            SAGA_OK);
    }
    for (int k = 0; k < 2; k++) {
        y = out_new(o, 23 + k, N * 16);
        memcpy(y, in->X16, (size_t)N * 16 * sizeof *y);
        assert_int_equal(saga_cpu_scale_f32(s, N * 16, 1.5f, mix, k ? 0.3f : 0.0f, y), SAGA_OK);
    }
    test_free(act);
    test_free(mix);
}

static void outputs_free(outputs *o) {
    for (int k = 0; k < OUTS; k++)
        test_free(o->out[k]);
}

static const char *const WHAT[OUTS] = {"spmm, 16 columns",
                                       "spmm, 8 columns",
                                       "spmm over live rows",
                                       "spmm_t, 16 columns",
                                       "spmm_t, 8 columns",
                                       "dropout",
                                       "dropout of a CSR",
                                       "tanh",
                                       "tanh of special values",
                                       "fp16 bits",
                                       "bf16 bits",
                                       "bf16 widened",
                                       "scatter-add by columns",
                                       "scatter-add by rows",
                                       "bias",
                                       "column sums",
                                       "relu",
                                       "leaky relu",
                                       "relu'",
                                       "leaky relu'",
                                       "elu'",
                                       "sigmoid'",
                                       "tanh'",
                                       "scale",
                                       "scale and add"};

static void test_cpu_isa_paths_same_bits(void **state) {
    (void)state;
    saga_backend *be = NULL;
    assert_int_equal(saga_backend_cpu_new(&be, NULL), SAGA_OK);
    saga_stream *s = saga_backend_default_stream(be);
    inputs in;
    inputs_new(&in);
    const saga_cpu_isa_level was = saga_cpu_isa(), have = saga_cpu_isa_detected();
    outputs base;
    assert_int_equal(saga_cpu_isa_force(SAGA_CPU_ISA_SSE2), SAGA_CPU_ISA_SSE2);
    run_all(s, &in, &base);
    for (int l = SAGA_CPU_ISA_SSE2 + 1; l <= (int)have; l++) {
        assert_int_equal(saga_cpu_isa_force((saga_cpu_isa_level)l), l);
        outputs o;
        run_all(s, &in, &o);
        for (int k = 0; k < OUTS; k++) {
            char what[96];
            snprintf(what, sizeof what, "%s at %s against sse2", WHAT[k],
                     saga_cpu_isa_name((saga_cpu_isa_level)l));
            saga_test_assert_close_f32(what, base.out[k], o.out[k], base.len[k], 0, 0);
        }
        outputs_free(&o);
    }
    print_message("  levels sse2 to %s: the same bits\n", saga_cpu_isa_name(have));
    saga_cpu_isa_force(was);
    outputs_free(&base);
    inputs_free(&in);
    saga_backend_free_all(&be);
}

/* The narrow GEMM: a GCN layer's projection (N = 16, AVX2) and an MLP's hidden layer (N = 32,
 * 48, 64, AVX-512), B as given or transposed, C overwritten or added to (beta 0.5, an exact
 * scaling), M = 301 rows (blocks and a remainder). The narrow kernel sums each element in one
 * chain of fused multiply-adds, SGEMM in its own blocking: each is within gamma_(K+1) (sum_k
 * |a_ik b_kj| + |beta c_ij|) of the exact result, so they differ by at most twice that. */
static void test_cpu_isa_narrow_gemm_within_bound(void **state) {
    (void)state;
    saga_backend *be = NULL;
    assert_int_equal(saga_backend_cpu_new(&be, NULL), SAGA_OK);
    saga_stream *s = saga_backend_default_stream(be);
    const saga_cpu_isa_level was = saga_cpu_isa(), top = saga_cpu_isa_detected();
    static const struct {
        int64_t M, N, K;
        bool trans_a, trans_b;
        float beta;
    } cases[] = {{301, 16, 48, false, false, 0.0f},
                 {301, 16, 250, false, false, 0.0f},
                 {301, 32, 32, false, false, 0.0f},
                 {301, 32, 96, false, true, 0.5f},
                 {301, 48, 80, false, false, 0.5f},
                 {301, 64, 64, false, true, 0.0f},
                 /* weight gradients, A^T B over K = 3001 rows: M x N up to 4096 */
                 {32, 32, 3001, true, false, 0.0f},
                 {3, 32, 3001, true, false, 0.5f},
                 {13, 48, 3001, true, false, 0.0f},
                 {64, 64, 3001, true, false, 0.5f},
                 {7, 64, 3001, true, false, 0.0f}};
    for (size_t u = 0; u < 2 * sizeof cases / sizeof cases[0]; u++) {
        /* each case twice: small integers, whose sums are all exact, then values in [-1, 1] */
        const size_t t = u / 2;
        const bool ints = u % 2 == 0;
        const int64_t M = cases[t].M, Nc = cases[t].N, K = cases[t].K;
        const float beta = cases[t].beta;
        float *A = test_malloc((size_t)(M * K) * sizeof *A), *B = test_malloc((size_t)(K * Nc) * 4);
        float *c0 = test_malloc((size_t)(M * Nc) * 4);
        float *c[2] = {test_malloc((size_t)(M * Nc) * 4), test_malloc((size_t)(M * Nc) * 4)};
        for (int64_t i = 0; i < M * K; i++)
            A[i] = ints ? floorf(saga_test_uniform(&rng, -2, 3)) : saga_test_uniform(&rng, -1, 1);
        for (int64_t i = 0; i < K * Nc; i++)
            B[i] = ints ? floorf(saga_test_uniform(&rng, -2, 3)) : saga_test_uniform(&rng, -1, 1);
        for (int64_t i = 0; i < M * Nc; i++)
            c0[i] =
                ints ? 2 * floorf(saga_test_uniform(&rng, -2, 3)) : saga_test_uniform(&rng, -1, 1);
        /* element (k, j) of B: B[k][j] as given, B[j][k] transposed; (i, k) of A likewise */
        const int64_t ldb = cases[t].trans_b ? K : Nc, lda = cases[t].trans_a ? M : K;
#define B_AT(k, j) (cases[t].trans_b ? B[(j)*ldb + (k)] : B[(k)*ldb + (j)])
#define A_AT(i, k) (cases[t].trans_a ? A[(k)*lda + (i)] : A[(i)*lda + (k)])
        for (int l = 0; l < 2; l++) {
            saga_cpu_isa_force(l ? top : SAGA_CPU_ISA_SSE2);
            memcpy(c[l], c0, (size_t)(M * Nc) * 4);
            assert_int_equal(saga_cpu_gemm_f32(s, cases[t].trans_a, cases[t].trans_b, M, Nc, K,
                                               1.0f, A, lda, B, ldb, beta, c[l], Nc),
                             SAGA_OK);
        }
        const double bound = 2 * saga_test_gamma(K + 1, SAGA_TEST_U32);
        double worst = 0;
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < Nc; j++) {
                double m = fabs((double)beta * c0[i * Nc + j]), exact = beta * c0[i * Nc + j];
                for (int64_t k = 0; k < K; k++) {
                    m += fabs((double)A_AT(i, k) * (double)B_AT(k, j));
                    exact += (double)A_AT(i, k) * (double)B_AT(k, j);
                }
                /* integers: every partial sum is an integer under 2^24, so exact in any order */
                if (ints && (c[0][i * Nc + j] != exact || c[1][i * Nc + j] != exact))
                    fail_msg("M %lld N %lld K %lld, element (%lld, %lld) of integers: %.9g and "
                             "%.9g, exactly %.9g",
                             (long long)M, (long long)Nc, (long long)K, (long long)i, (long long)j,
                             c[0][i * Nc + j], c[1][i * Nc + j], exact);
                const double d = fabs((double)c[0][i * Nc + j] - (double)c[1][i * Nc + j]);
                if (!(d <= bound * m))
                    fail_msg("M %lld N %lld K %lld, element (%lld, %lld): %.9g vs %.9g, bound %.3g",
                             (long long)M, (long long)Nc, (long long)K, (long long)i, (long long)j,
                             c[0][i * Nc + j], c[1][i * Nc + j], bound * m);
                worst = fmax(worst, d / m);
            }
#undef B_AT
#undef A_AT
        if (!ints)
            print_message("  M %lld N %lld K %lld%s%s, beta %g, sse2 against %s: worst difference "
                          "%.3g of the bound's sum (bound %.3g); integers exact\n",
                          (long long)M, (long long)Nc, (long long)K,
                          cases[t].trans_a ? " (A^T)" : "",
                          cases[t].trans_b ? " (B transposed)" : "", (double)beta,
                          saga_cpu_isa_name(top), worst, bound);
        test_free(A);
        test_free(B);
        test_free(c0);
        test_free(c[0]);
        test_free(c[1]);
    }
    saga_cpu_isa_force(was);
    saga_backend_free_all(&be);
}

/* SAGA_CPU_ISA names the level the kernels run at, lowered to the processor's. */
static void test_cpu_isa_env(void **state) {
    (void)state;
    const char *want = getenv("SAGA_CPU_ISA");
    const saga_cpu_isa_level have = saga_cpu_isa_detected();
    int w = -1;
    for (int l = 0; l < SAGA_CPU_ISA_COUNT; l++)
        if (want && strcmp(want, saga_cpu_isa_name((saga_cpu_isa_level)l)) == 0)
            w = l;
    print_message("  processor: %s; SAGA_CPU_ISA %s; running at %s\n", saga_cpu_isa_name(have),
                  want ? want : "unset", saga_cpu_isa_name(saga_cpu_isa()));
    if (w < 0)
        assert_int_equal(saga_cpu_isa(), have);
    else
        assert_int_equal(saga_cpu_isa(), w < (int)have ? w : (int)have);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_isa_env),
        cmocka_unit_test(test_cpu_isa_paths_same_bits),
        cmocka_unit_test(test_cpu_isa_narrow_gemm_within_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
