/* test_nn_ops.c - every op of saga_nn.h on the CPU backend: gradients against central finite
 * differences, forward values against double loops, the sticky error, inference mode; the
 * cross-entropy and accuracy helpers against hand computations. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"
#include "test_xf.h"

#include "nn_impl.h"
#include "saga_nn.h"
#include "tensor_impl.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static saga_backend *be;

static int group_setup(void **state) {
    (void)state;
    return saga_backend_cpu_new(&be, NULL) == SAGA_OK ? 0 : -1;
}

static int group_teardown(void **state) {
    (void)state;
    saga_backend_free_all(&be);
    return 0;
}

/* Uniform in [lo, hi) from a small LCG: test data independent of the code under test. */
static double urand(uint64_t *s, double lo, double hi) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (double)(*s >> 11) * 0x1.0p-53;
}

/* Values in [lo, hi) with |v| >= gap, so that kinks (relu at 0) stay out of reach of the
 * finite-difference step. */
static void fill(float *x, int64_t n, double lo, double hi, double gap, uint64_t seed) {
    uint64_t s = seed;
    for (int64_t i = 0; i < n; i++) {
        double v;
        do
            v = urand(&s, lo, hi);
        while (fabs(v) < gap);
        x[i] = (float)v;
    }
}

static saga_tensor *param(saga_model *m, const char *name, int64_t r, int64_t c, double lo,
                          double hi, double gap, uint64_t seed) {
    saga_tensor *p = saga_model_param(m, name, r, c, SAGA_INIT_ZEROS, 0);
    assert_non_null(p);
    fill(saga_tensor_data(p), r * c, lo, hi, gap, seed);
    return p;
}

static saga_tensor *host_i32(const int32_t *v, int64_t n) {
    saga_tensor *t = NULL;
    assert_int_equal(saga_tensor_from_host(&t, be, SAGA_I32, n, 1, v), SAGA_OK);
    return t;
}

static saga_tensor *host_f32(const float *v, int64_t r, int64_t c) {
    saga_tensor *t = NULL;
    assert_int_equal(saga_tensor_from_host(&t, be, SAGA_F32, r, c, v), SAGA_OK);
    return t;
}

/* ---- the gradient check ------------------------------------------------------------------- */

typedef saga_tensor *(*build_fn)(saga_ctx *c, saga_tensor *const *p, void *ud);

typedef struct gc {
    saga_ctx *c;
    saga_tensor *R; /* fixed random weights of the output's entries */
    build_fn f;
    saga_tensor *const *p;
    void *ud;
} gc;

/* sum(out .* R), with the same dropout masks every time. */
static saga_tensor *loss_of(gc *g) {
    saga_ctx_clear(g->c);
    saga_ctx_train(g->c, true);
    saga_ctx_set_rng_counter(g->c, 5);
    saga_tensor *out = g->f(g->c, g->p, g->ud);
    if (!out)
        fail_msg("forward failed: %s", saga_last_error());
    if (!g->R) {
        int64_t n = out->rows * out->cols;
        float *r = calloc((size_t)n, sizeof *r);
        fill(r, n, -1.0, 1.0, 0.0, 99);
        g->R = host_f32(r, out->rows, out->cols);
        free(r);
    }
    saga_tensor *loss = saga_sum(g->c, saga_mul(g->c, out, g->R));
    assert_non_null(loss);
    return loss;
}

/* Gradients of every parameter in p against central differences with step h. */
static void gradcheck(const char *what, saga_model *m, int np, saga_tensor *const *p, build_fn f,
                      void *ud, double h, double rtol, double atol) {
    gc g = {NULL, NULL, f, p, ud};
    assert_int_equal(saga_ctx_new(&g.c, be, 1234), SAGA_OK);
    assert_int_equal(saga_model_zero_grad(m), SAGA_OK);
    saga_tensor *loss = loss_of(&g);
    if (saga_backward(g.c, loss) != SAGA_OK)
        fail_msg("%s: backward failed: %s", what, saga_last_error());
    for (int i = 0; i < np; i++) {
        int64_t n = p[i]->rows * p[i]->cols;
        float *x = saga_tensor_data(p[i]);
        const float *an = saga_tensor_cdata(saga_grad(p[i]));
        float *saved = calloc((size_t)n, sizeof *saved);
        memcpy(saved, an, (size_t)n * sizeof *saved);
        for (int64_t j = 0; j < n; j++) {
            float x0 = x[j];
            x[j] = (float)(x0 + h);
            double lp = saga_item(loss_of(&g));
            x[j] = (float)(x0 - h);
            double lm = saga_item(loss_of(&g));
            x[j] = x0;
            double fd = (lp - lm) / (2.0 * h);
            if (fabs(fd - saved[j]) > atol + rtol * fabs(fd))
                fail_msg("%s: d/d(input %d)[%lld]: backward %.6g, finite difference %.6g", what, i,
                         (long long)j, (double)saved[j], fd);
        }
        free(saved);
    }
    saga_ctx_free(&g.c);
    saga_tensor_free(&g.R);
}

#define CHECK(name, f, ud, ...)                                                                    \
    do {                                                                                           \
        saga_tensor *ps_[] = {__VA_ARGS__};                                                        \
        gradcheck(name, m, (int)(sizeof ps_ / sizeof ps_[0]), ps_, f, ud, 1e-2, 2e-2, 2e-3);       \
    } while (0)

static saga_tensor *b_matmul(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return saga_matmul(c, p[0], p[1]);
}
static saga_tensor *b_add_bias(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return saga_add_bias(c, p[0], p[1]);
}
static saga_tensor *b_relu(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return saga_relu(c, p[0]);
}
static saga_tensor *b_leaky(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return saga_leaky_relu(c, p[0], 0.2f);
}
static saga_tensor *b_elu(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return saga_elu(c, p[0], 1.3f);
}
static saga_tensor *b_sigmoid(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return saga_sigmoid(c, p[0]);
}
static saga_tensor *b_tanh(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return saga_tanh(c, p[0]);
}
static saga_tensor *b_dropout(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return saga_dropout(c, p[0], 0.4f);
}
static saga_tensor *b_add(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return saga_add(c, p[0], p[1]);
}
static saga_tensor *b_sub(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return saga_sub(c, p[0], p[1]);
}
static saga_tensor *b_mul(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return saga_mul(c, p[0], p[1]);
}
static saga_tensor *b_div(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return saga_div(c, p[0], p[1]);
}
static saga_tensor *b_affine(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return saga_affine(c, p[0], -1.7f, 0.3f);
}
static saga_tensor *b_concat(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return saga_concat(c, p[0], p[1]);
}
static saga_tensor *b_matmul_cat(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return saga_matmul_cat(c, p, 3, p[3]);
}
/* the same part twice: its gradient gathers both blocks of rows */
static saga_tensor *b_matmul_cat_twice(saga_ctx *c, saga_tensor *const *p, void *ud) {
    saga_tensor *xs[2] = {p[0], p[0]};
    return saga_matmul_cat(c, xs, 2, p[1]);
}
static saga_tensor *b_matmul_cat_bias(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return saga_matmul_cat_bias(c, p, 3, p[3], p[4]);
}
static saga_tensor *b_matmul_cat_then_bias(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return saga_add_bias(c, saga_matmul_cat(c, p, 3, p[3]), p[4]);
}
static saga_tensor *b_matmul_bias(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return saga_matmul_cat_bias(c, p, 1, p[1], p[2]);
}
static saga_tensor *b_matmul_then_bias(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return saga_add_bias(c, saga_matmul(c, p[0], p[1]), p[2]);
}

static saga_tensor *b_mcb_relu(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return nn_matmul_cat_bias_act(c, p, 3, p[3], p[4], SAGA_ACT_RELU);
}
static saga_tensor *b_mcb_then_relu(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return saga_relu(c, saga_matmul_cat_bias(c, p, 3, p[3], p[4]));
}
static saga_tensor *b_mcb_tanh(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return nn_matmul_cat_bias_act(c, p, 1, p[1], p[2], SAGA_ACT_TANH);
}
static saga_tensor *b_mcb_then_tanh(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return saga_tanh(c, saga_matmul_cat_bias(c, p, 1, p[1], p[2]));
}
static saga_tensor *b_mcb_sigmoid(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return nn_matmul_cat_bias_act(c, p, 3, p[3], p[4], SAGA_ACT_SIGMOID);
}
static saga_tensor *b_mcb_then_sigmoid(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return saga_sigmoid(c, saga_matmul_cat_bias(c, p, 3, p[3], p[4]));
}

/* f and g give the same output and the same gradient of every parameter in p, to the bit (the
 * loss of loss_of, from the same R). */
static void same_bits(const char *what, saga_model *m, int np, saga_tensor *const *p, build_fn f,
                      build_fn g) {
    float *out[2] = {NULL, NULL}, *grads[2] = {NULL, NULL};
    int64_t n_out = 0, n_grads = 0;
    for (int i = 0; i < np; i++)
        n_grads += p[i]->rows * p[i]->cols;
    saga_tensor *R = NULL;
    for (int k = 0; k < 2; k++) {
        gc run = {NULL, R, k ? g : f, p, NULL};
        assert_int_equal(saga_ctx_new(&run.c, be, 1234), SAGA_OK);
        assert_int_equal(saga_model_zero_grad(m), SAGA_OK);
        saga_tensor *loss = loss_of(&run);
        R = run.R;
        if (saga_backward(run.c, loss) != SAGA_OK)
            fail_msg("%s: backward failed: %s", what, saga_last_error());
        saga_tensor *o = run.f(run.c, p, NULL);
        assert_non_null(o);
        n_out = o->rows * o->cols;
        out[k] = malloc((size_t)n_out * sizeof(float));
        grads[k] = malloc((size_t)(n_grads ? n_grads : 1) * sizeof(float));
        assert_non_null(out[k]);
        assert_non_null(grads[k]);
        memcpy(out[k], saga_tensor_cdata(o), (size_t)n_out * sizeof(float));
        for (int i = 0, at = 0; i < np; i++) {
            int64_t n = p[i]->rows * p[i]->cols;
            memcpy(grads[k] + at, saga_tensor_cdata(saga_grad(p[i])), (size_t)n * sizeof(float));
            at += (int)n;
        }
        saga_ctx_free(&run.c);
    }
    if (memcmp(out[0], out[1], (size_t)n_out * sizeof(float)) != 0)
        fail_msg("%s: the outputs differ", what);
    if (memcmp(grads[0], grads[1], (size_t)n_grads * sizeof(float)) != 0)
        fail_msg("%s: the gradients differ", what);
    for (int k = 0; k < 2; k++) {
        free(out[k]);
        free(grads[k]);
    }
    saga_tensor_free(&R);
}

static saga_tensor *b_slice(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return saga_slice_cols(c, p[0], 1, 2);
}
static saga_tensor *b_softmax(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return saga_softmax(c, p[0]);
}
static saga_tensor *b_log_softmax(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return saga_log_softmax(c, p[0]);
}
static saga_tensor *b_nll(saga_ctx *c, saga_tensor *const *p, void *ud) {
    saga_tensor **t = ud;
    return saga_nll_loss(c, saga_log_softmax(c, p[0]), t[0], t[1]);
}
static saga_tensor *b_bce(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return saga_bce_logits(c, p[0], ud, 2.5f);
}
static saga_tensor *b_sum(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return saga_sum(c, p[0]);
}
static saga_tensor *b_mean(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return saga_mean(c, p[0]);
}
static saga_tensor *b_sumsq(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return saga_sumsq(c, p[0]);
}
static saga_tensor *b_row_sum(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return saga_row_sum(c, p[0]);
}
static saga_tensor *b_scale_rows(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return saga_scale_rows(c, p[0], p[1]);
}
static saga_tensor *b_scale(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return saga_scale(c, p[0], p[1]);
}
/* GIN's combination, the scalar used twice: ((1 + eps) x + eps y) W. */
static saga_tensor *b_gin(saga_ctx *c, saga_tensor *const *p, void *ud) {
    saga_tensor *h =
        saga_add(c, saga_add(c, p[0], saga_scale(c, p[0], p[1])), saga_scale(c, p[2], p[1]));
    return saga_matmul(c, h, p[3]);
}
static saga_tensor *b_gather(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return saga_gather_rows(c, p[0], ud);
}
static saga_tensor *b_scatter(saga_ctx *c, saga_tensor *const *p, void *ud) {
    return saga_scatter_add_rows(c, p[0], ud, 5);
}
/* A GCN-like layer: log_softmax(relu(x W + b) V) into the NLL over some rows. */
static saga_tensor *b_composed(saga_ctx *c, saga_tensor *const *p, void *ud) {
    saga_tensor **t = ud;
    saga_tensor *h = saga_relu(c, saga_add_bias(c, saga_matmul(c, p[0], p[1]), p[2]));
    h = saga_dropout(c, h, 0.3f);
    return saga_nll_loss(c, saga_log_softmax(c, saga_matmul(c, h, p[3])), t[0], t[1]);
}
/* x used twice, directly and through two paths: x * x + tanh(x) - x. */
static saga_tensor *b_twice(saga_ctx *c, saga_tensor *const *p, void *ud) {
    saga_tensor *x = p[0];
    return saga_sub(c, saga_add(c, saga_mul(c, x, x), saga_tanh(c, x)), x);
}
/* The same intermediate feeding two consumers: y = x W; concat(y, sigmoid(y)). */
static saga_tensor *b_shared(saga_ctx *c, saga_tensor *const *p, void *ud) {
    saga_tensor *y = saga_matmul(c, p[0], p[1]);
    return saga_concat(c, y, saga_sigmoid(c, saga_scale_rows(c, y, p[2])));
}

static void test_nn_ops_gradients(void **state) {
    (void)state;
    saga_model *m = NULL;
    assert_int_equal(saga_model_new(&m, be), SAGA_OK);
    saga_tensor *A = param(m, "A", 4, 3, -1, 1, 0.05, 1);
    saga_tensor *B = param(m, "B", 3, 5, -1, 1, 0.05, 2);
    saga_tensor *X = param(m, "X", 4, 3, -1, 1, 0.05, 3);
    saga_tensor *bias = param(m, "bias", 1, 3, -1, 1, 0.0, 4);
    saga_tensor *Y = param(m, "Y", 4, 3, 0.5, 1.5, 0.0, 5); /* away from 0: a divisor */
    saga_tensor *s = param(m, "s", 4, 1, -2, 2, 0.0, 6);
    saga_tensor *Z = param(m, "Z", 4, 2, -1, 1, 0.0, 7);

    CHECK("matmul", b_matmul, NULL, A, B);
    CHECK("add_bias", b_add_bias, NULL, X, bias);
    CHECK("relu", b_relu, NULL, X);
    CHECK("leaky_relu", b_leaky, NULL, X);
    CHECK("elu", b_elu, NULL, X);
    CHECK("sigmoid", b_sigmoid, NULL, X);
    CHECK("tanh", b_tanh, NULL, X);
    CHECK("dropout", b_dropout, NULL, X);
    CHECK("add", b_add, NULL, X, Y);
    CHECK("sub", b_sub, NULL, X, Y);
    CHECK("mul", b_mul, NULL, X, Y);
    CHECK("div", b_div, NULL, X, Y);
    CHECK("affine", b_affine, NULL, X);
    CHECK("concat", b_concat, NULL, X, Z);
    saga_tensor *W8 = param(m, "W8", 8, 5, -1, 1, 0.05, 33),
                *W6 = param(m, "W6", 6, 5, -1, 1, 0.05, 34);
    CHECK("matmul_cat", b_matmul_cat, NULL, X, Z, A, W8);
    CHECK("matmul_cat(twice)", b_matmul_cat_twice, NULL, X, W6);
    {
        saga_tensor *b5 = param(m, "b5", 1, 5, -1, 1, 0.05, 35);
        CHECK("matmul_cat_bias", b_matmul_cat_bias, NULL, X, Z, A, W8, b5);
        CHECK("matmul_cat_bias(one part)", b_matmul_bias, NULL, A, B, b5);
        saga_tensor *p3[] = {X, Z, A, W8, b5}, *p1[] = {A, B, b5};
        same_bits("matmul_cat_bias", m, 5, p3, b_matmul_cat_bias, b_matmul_cat_then_bias);
        same_bits("matmul_cat_bias(one part)", m, 3, p1, b_matmul_bias, b_matmul_then_bias);
        /* with the activation in place (the executor's and the layers' internal op) */
        CHECK("matmul_cat_bias relu", b_mcb_relu, NULL, X, Z, A, W8, b5);
        CHECK("matmul_cat_bias tanh", b_mcb_tanh, NULL, A, B, b5);
        same_bits("matmul_cat_bias relu", m, 5, p3, b_mcb_relu, b_mcb_then_relu);
        same_bits("matmul_cat_bias tanh", m, 3, p1, b_mcb_tanh, b_mcb_then_tanh);
        same_bits("matmul_cat_bias sigmoid", m, 5, p3, b_mcb_sigmoid, b_mcb_then_sigmoid);
        /* refusals: no bias, a bias of the wrong width */
        saga_ctx *vc = NULL;
        assert_int_equal(saga_ctx_new(&vc, be, 1), SAGA_OK);
        assert_null(saga_matmul_cat_bias(vc, p3, 3, W8, NULL));
        saga_test_assert_error_contains("b must be given", NULL);
        saga_ctx_free(&vc);
        assert_int_equal(saga_ctx_new(&vc, be, 1), SAGA_OK);
        assert_null(saga_matmul_cat_bias(vc, p3, 3, W8, bias));
        saga_test_assert_error_contains("b must be 1 x 5, got 1 x 3", NULL);
        saga_ctx_free(&vc);
        assert_int_equal(saga_ctx_new(&vc, be, 1), SAGA_OK);
        assert_null(nn_matmul_cat_bias_act(vc, p3, 3, W8, b5, SAGA_ACT_ELU));
        saga_test_assert_error_contains("relu, sigmoid or tanh", NULL);
        saga_ctx_free(&vc);
    }
    {
        /* its value: within gamma_8 sum |x||w| of the product in double, as one product of the
         * concatenation is */
        saga_ctx *vc = NULL;
        assert_int_equal(saga_ctx_new(&vc, be, 1), SAGA_OK);
        saga_tensor *xs[3] = {X, Z, A};
        saga_tensor *y = saga_matmul_cat(vc, xs, 3, W8);
        assert_non_null(y);
        const float *yv = saga_tensor_cdata(y), *wv = saga_tensor_cdata(W8);
        const double u = ldexp(1.0, -24), gamma = 8 * u / (1 - 8 * u);
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 5; j++) {
                double ref = 0, mag = 0;
                int k = 0;
                for (int part = 0; part < 3; part++) {
                    const float *xv = saga_tensor_cdata(xs[part]);
                    int64_t cols = saga_tensor_cols(xs[part]);
                    for (int64_t q = 0; q < cols; q++, k++) {
                        double t = (double)xv[i * cols + q] * wv[k * 5 + j];
                        ref += t, mag += fabs(t);
                    }
                }
                assert_true(fabs(yv[i * 5 + j] - ref) <= gamma * mag);
            }
        saga_ctx_free(&vc);
        /* refusals, each on a fresh context (the error is sticky): no part, four parts, widths
         * that do not add up to w's rows */
        saga_tensor *four[4] = {X, Z, A, X};
        const struct {
            saga_tensor *const *xs;
            int n;
            const char *says;
        } bad[] = {{xs, 0, "1 to 3 parts, got 0"},
                   {four, 4, "1 to 3 parts, got 4"},
                   {xs, 2, "the parts have 5 columns, w is 8 x 5"}};
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            assert_int_equal(saga_ctx_new(&vc, be, 1), SAGA_OK);
            assert_null(saga_matmul_cat(vc, bad[i].xs, bad[i].n, W8));
            saga_test_assert_error_contains(bad[i].says, NULL);
            saga_ctx_free(&vc);
        }
    }
    CHECK("slice_cols", b_slice, NULL, X);
    CHECK("softmax", b_softmax, NULL, X);
    CHECK("log_softmax", b_log_softmax, NULL, X);
    CHECK("sum", b_sum, NULL, X);
    CHECK("mean", b_mean, NULL, X);
    CHECK("sumsq", b_sumsq, NULL, X);
    CHECK("row_sum", b_row_sum, NULL, X);
    CHECK("scale_rows", b_scale_rows, NULL, X, s);
    /* two heads of three columns, each scaled by its column of s2 */
    saga_tensor *X6 = param(m, "X6", 4, 6, -1, 1, 0.05, 31);
    saga_tensor *s2 = param(m, "s2", 4, 2, -2, 2, 0.0, 32);
    CHECK("scale_rows(heads)", b_scale_rows, NULL, X6, s2);
    saga_tensor *eps = param(m, "eps", 1, 1, -1, 1, 0.1, 12);
    CHECK("scale", b_scale, NULL, X, eps);

    const int32_t labels[4] = {2, 0, 1, 2}, rows[3] = {3, 0, 3};
    saga_tensor *tl[2] = {host_i32(labels, 4), host_i32(rows, 3)};
    CHECK("nll_loss(rows)", b_nll, tl, X);
    saga_tensor *tl_all[2] = {tl[0], NULL};
    CHECK("nll_loss(all)", b_nll, tl_all, X);
    float tg[12];
    fill(tg, 12, 0, 1, 0, 8);
    saga_tensor *target = host_f32(tg, 4, 3);
    CHECK("bce_logits", b_bce, target, X);
    const int32_t gidx[6] = {3, 0, 3, 1, 1, 3}, sidx[4] = {4, 0, 4, 2};
    saga_tensor *gi = host_i32(gidx, 6), *si = host_i32(sidx, 4);
    CHECK("gather_rows", b_gather, gi, X);
    CHECK("scatter_add_rows", b_scatter, si, X);

    saga_tensor *W = param(m, "W", 3, 5, -1, 1, 0.0, 9);
    saga_tensor *bw = param(m, "bw", 1, 5, -0.5, 0.5, 0.0, 10);
    saga_tensor *V = param(m, "V", 5, 3, -1, 1, 0.0, 11);
    CHECK("composed", b_composed, tl, X, W, bw, V);
    CHECK("input used twice", b_twice, NULL, X);
    CHECK("shared intermediate", b_shared, NULL, A, B, s);
    CHECK("scalar used twice", b_gin, NULL, X, eps, Y, W);

    saga_tensor_free(&tl[0]);
    saga_tensor_free(&tl[1]);
    saga_tensor_free(&target);
    saga_tensor_free(&gi);
    saga_tensor_free(&si);
    saga_model_free(&m);
}

/* ---- forward values ----------------------------------------------------------------------- */

/* Bounds on the ops' f32 results against double references, derived from the kernels' arithmetic
 * (test_util.h, "bounds for results computed in different orders"): a sum of K terms in f32, in
 * whatever order, is within gamma_K sum |terms| of the exact sum (gam below); a GEMM over K terms
 * within gamma_{K+2} (the K products and additions, alpha's product and beta C's addition); a
 * double sum of K terms within gamma_K of f64, the reference's as well (sum64_err). Element-wise
 * formulas are followed operation for operation in xf: the exact value in double and a bound on
 * how far the f32 computation of it can be (running error analysis, Higham, Accuracy and
 * Stability of Numerical Algorithms, 2nd ed., sec. 3.3): an operation on operands within e_a and
 * e_b of their values is within the propagated error of its exact result, and its rounding adds u
 * times that result (LIBM_REL for a libm call). The second-order terms are kept, so the bound holds
 * outright; the reference's own double roundings, 2^-29 times smaller, are left out. */
#define U SAGA_TEST_U32

/* t's n values each within err[i] of ref[i]; err NULL: equal to them */
static void expect_within(const saga_tensor *t, const double *ref, const double *err, int64_t n) {
    assert_non_null(t);
    assert_int_equal(t->rows * t->cols, n);
    const float *v = saga_tensor_cdata(t);
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(v[i] - ref[i]) <= (err ? err[i] : 0)))
            fail_msg("entry %lld: got %.9g, expected %.9g: differ by %.3g, past the bound %.3g",
                     (long long)i, (double)v[i], ref[i], fabs(v[i] - ref[i]), err ? err[i] : 0);
}

static void test_nn_ops_forward_values(void **state) {
    (void)state;
    enum { N = 5, KD = 4, M = 3 };
    float a[N * KD], b[KD * M], bias[M], x[N * M], y[N * M], s[N];
    fill(a, N * KD, -2, 2, 0, 21);
    fill(b, KD * M, -2, 2, 0, 22);
    fill(bias, M, -1, 1, 0, 23);
    fill(x, N * M, -3, 3, 0, 24);
    fill(y, N * M, 0.5, 2, 0, 25);
    fill(s, N, -2, 2, 0, 26);
    saga_tensor *ta = host_f32(a, N, KD), *tb = host_f32(b, KD, M), *tbias = host_f32(bias, 1, M);
    saga_tensor *tx = host_f32(x, N, M), *ty = host_f32(y, N, M), *ts = host_f32(s, N, 1);
    const int32_t labels[N] = {0, 2, 1, 1, 0}, rows[2] = {4, 1}, idx[N] = {2, 2, 0, 6, 2};
    saga_tensor *tl = host_i32(labels, N), *tr = host_i32(rows, 2), *ti = host_i32(idx, N);
    saga_ctx *c = NULL;
    assert_int_equal(saga_ctx_new(&c, be, 7), SAGA_OK);
    double ref[64], err[64];

    /* relu(a b + bias): the GEMM's KD products within gamma_{KD+2} of their sum, one more rounding
     * for the bias; relu moves nothing apart */
    for (int i = 0; i < N; i++)
        for (int j = 0; j < M; j++) {
            double acc = bias[j], mag = 0;
            for (int k = 0; k < KD; k++) {
                acc += (double)a[i * KD + k] * b[k * M + j];
                mag += fabs((double)a[i * KD + k] * b[k * M + j]);
            }
            ref[i * M + j] = acc > 0 ? acc : 0;
            err[i * M + j] = gam(KD + 3) * (mag + fabs(bias[j]));
        }
    expect_within(saga_relu(c, saga_add_bias(c, saga_matmul(c, ta, tb), tbias)), ref, err, N * M);

    /* log_softmax and the NLL over rows {4, 1} */
    double lsm[N * M];
    for (int i = 0; i < N; i++) {
        double mx = -INFINITY, z = 0;
        for (int j = 0; j < M; j++)
            mx = fmax(mx, x[i * M + j]);
        for (int j = 0; j < M; j++)
            z += exp(x[i * M + j] - mx);
        for (int j = 0; j < M; j++)
            lsm[i * M + j] = x[i * M + j] - mx - log(z);
    }
    saga_tensor *lp = saga_log_softmax(c, tx);
    double lsm_err[N * M];
    for (int i = 0; i < N; i++)
        xf_softmax_err(M, 1, true, x + i * M, lsm_err + i * M);
    expect_within(lp, lsm, lsm_err, N * M);
    for (int i = 0; i < N; i++)
        xf_softmax_err(M, 1, false, x + i * M, err + i * M);
    for (int i = 0; i < N * M; i++)
        ref[i] = exp(lsm[i]);
    expect_within(saga_softmax(c, tx), ref, err, N * M);
    /* the mean of two of lp's values, in double, rounded to the f32 loss */
    ref[0] = -(lsm[4 * M + labels[4]] + lsm[1 * M + labels[1]]) / 2.0;
    err[0] = xf_round(ref[0], (lsm_err[4 * M + labels[4]] + lsm_err[1 * M + labels[1]]) / 2).e;
    expect_within(saga_nll_loss(c, lp, tl, tr), ref, err, 1);

    /* BCE with logits, pos_weight 2 (targets y/2 in [0.25, 1]) */
    float tg[N * M];
    double bce = 0, bce_err = 0, bce_mag = 0;
    for (int i = 0; i < N * M; i++) {
        tg[i] = y[i] / 2;
        double sg = 1 / (1 + exp(-(double)x[i]));
        bce += -(2.0 * tg[i] * log(sg) + (1 - tg[i]) * log(1 - sg));
        /* the kernel's term (1 - t) x + (1 + (pw - 1) t) sp, sp = log1pf(expf(-|x|)) +
         * max(-x, 0), in xf; the terms summed in double */
        const xf X = xf_in(x[i]), T = xf_in(tg[i]), one = xf_in(1);
        const xf sp = xf_add(xf_log1p(xf_exp(xf_in(-fabsf(x[i])))), xf_in(x[i] < 0 ? -x[i] : 0));
        const xf lw = xf_add(one, xf_mul(xf_sub(xf_in(2), one), T));
        const xf term = xf_add(xf_mul(xf_sub(one, T), X), xf_mul(lw, sp));
        bce_err += term.e;
        bce_mag += fabs(term.v);
    }
    saga_tensor *ttg = host_f32(tg, N, M);
    ref[0] = bce / (N * M);
    err[0] = xf_round(ref[0], (bce_err + sum64_err(N * M + 1, bce_mag)) / (N * M)).e;
    expect_within(saga_bce_logits(c, tx, ttg, 2.0f), ref, err, 1);

    /* element-wise, affine, elu, sigmoid, reductions */
    for (int i = 0; i < N * M; i++) {
        ref[i] = (double)x[i] / y[i];
        err[i] = U * fabs(ref[i]); /* one division */
    }
    expect_within(saga_div(c, tx, ty), ref, err, N * M);
    for (int i = 0; i < N * M; i++) {
        ref[i] = 0.5 * x[i] - 2.0;
        err[i] = gam(2) * (fabs(0.5 * x[i]) + 2.0); /* fill with b, then a x + 1 b */
    }
    expect_within(saga_affine(c, tx, 0.5f, -2.0f), ref, err, N * M);
    for (int i = 0; i < N * M; i++) {
        ref[i] = x[i] > 0 ? x[i] : (double)0.7f * (exp(x[i]) - 1); /* the op's alpha, 0.7f */
        err[i] = x[i] > 0 ? 0 : xf_mul(xf_in(0.7f), xf_expm1(xf_in(x[i]))).e;
    }
    expect_within(saga_elu(c, tx, 0.7f), ref, err, N * M);
    for (int i = 0; i < N * M; i++) {
        ref[i] = x[i] > 0 ? x[i] : (double)0.1f * x[i];
        err[i] = x[i] > 0 ? 0 : xf_mul(xf_in(0.1f), xf_in(x[i])).e;
    }
    expect_within(saga_leaky_relu(c, tx, 0.1f), ref, err, N * M);
    /* sum, mean and sumsq: the kernel's double sum in its order, then (mean) / n, rounded to the
     * f32 result */
    double sum = 0, sq = 0, mag = 0;
    for (int i = 0; i < N * M; i++) {
        sum += x[i];
        sq += (double)x[i] * x[i];
        mag += fabs(x[i]);
    }
    ref[0] = sum;
    err[0] = xf_round(ref[0], sum64_err(N * M, mag)).e;
    expect_within(saga_sum(c, tx), ref, err, 1);
    ref[0] = sum / (N * M);
    err[0] = xf_round(ref[0], sum64_err(N * M + 1, mag) / (N * M)).e;
    expect_within(saga_mean(c, tx), ref, err, 1);
    ref[0] = sq;
    err[0] = xf_round(ref[0], sum64_err(N * M, sq)).e;
    expect_within(saga_sumsq(c, tx), ref, err, 1);
    for (int i = 0; i < N; i++) { /* a GEMM against ones, over M terms */
        ref[i] = (double)x[i * M] + x[i * M + 1] + x[i * M + 2];
        err[i] = gam(M + 2) * (fabs(x[i * M]) + fabs(x[i * M + 1]) + fabs(x[i * M + 2]));
    }
    expect_within(saga_row_sum(c, tx), ref, err, N);
    for (int i = 0; i < N * M; i++) { /* one product (within gamma_3, as before) */
        ref[i] = (double)x[i] * s[i / M];
        err[i] = gam(3) * fabs(ref[i]);
    }
    expect_within(saga_scale_rows(c, tx, ts), ref, err, N * M);
    for (int i = 0; i < N * M; i++) { /* M heads of one column each: y scales x, one product */
        ref[i] = (double)x[i] * y[i];
        err[i] = U * fabs(ref[i]);
    }
    expect_within(saga_scale_rows(c, tx, ty), ref, err, N * M);
    saga_tensor *ts1 = host_f32(s + 2, 1, 1);
    for (int i = 0; i < N * M; i++) { /* a GEMM over K = 1 term */
        ref[i] = (double)x[i] * s[2];
        err[i] = gam(3) * fabs(ref[i]);
    }
    expect_within(saga_scale(c, tx, ts1), ref, err, N * M);

    /* columns */
    saga_tensor *cat = saga_concat(c, tx, ta);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < M + KD; j++)
            ref[i * (M + KD) + j] = j < M ? x[i * M + j] : a[i * KD + j - M];
    expect_within(cat, ref, NULL, N * (M + KD)); /* data movement: exact */
    for (int i = 0; i < N; i++)
        for (int j = 0; j < 2; j++)
            ref[i * 2 + j] = a[i * KD + 1 + j];
    expect_within(saga_slice_cols(c, cat, M + 1, 2), ref, NULL, N * 2);

    /* rows: scatter into 7 rows (4 never hit), gather back. A row's listings add in f32 onto
     * zeros: within gamma_count of their sum; the gather copies. */
    memset(ref, 0, sizeof ref);
    memset(err, 0, sizeof err);
    int count[7] = {0};
    for (int k = 0; k < N; k++)
        count[idx[k]]++;
    for (int k = 0; k < N; k++)
        for (int j = 0; j < M; j++) {
            ref[idx[k] * M + j] += x[k * M + j];
            err[idx[k] * M + j] += gam(count[idx[k]]) * fabs(x[k * M + j]);
        }
    saga_tensor *sc = saga_scatter_add_rows(c, tx, ti, 7);
    expect_within(sc, ref, err, 7 * M);
    double g[N * M], gerr[N * M];
    for (int k = 0; k < N; k++)
        for (int j = 0; j < M; j++) {
            g[k * M + j] = ref[idx[k] * M + j];
            gerr[k * M + j] = err[idx[k] * M + j];
        }
    expect_within(saga_gather_rows(c, sc, ti), g, gerr, N * M);
    assert_int_equal(saga_ctx_status(c), SAGA_OK);

    /* dropout while training: each entry 0 or x / (1 - p), about p of them dropped */
    saga_ctx_train(c, true);
    float big[4000];
    fill(big, 4000, 0.5, 1.5, 0, 27);
    saga_tensor *tbig = host_f32(big, 1000, 4);
    const float *d = saga_tensor_cdata(saga_dropout(c, tbig, 0.25f));
    int dropped = 0;
    for (int i = 0; i < 4000; i++) {
        if (d[i] == 0.0f)
            dropped++;
        else
            assert_true(fabs(d[i] - big[i] / 0.75) <= gam(2) * big[i] / 0.75); /* x (1/(1-p)) */
    }
    assert_in_range(dropped, 850, 1150);
    /* a second call draws a different mask */
    const float *d2 = saga_tensor_cdata(saga_dropout(c, tbig, 0.25f));
    int differ = 0;
    for (int i = 0; i < 4000; i++)
        differ += (d[i] == 0.0f) != (d2[i] == 0.0f);
    assert_true(differ > 100);

    saga_tensor *all[] = {ta, tb, tbias, tx, ty, ts, tl, tr, ti, ttg, tbig, ts1};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        saga_tensor_free(&all[i]);
    saga_ctx_free(&c);
}

/* ---- errors and modes --------------------------------------------------------------------- */

static void test_nn_ops_sticky_error(void **state) {
    (void)state;
    float v[12] = {0};
    saga_tensor *a = host_f32(v, 3, 4), *b = host_f32(v, 3, 4);
    const int32_t bad[2] = {0, 9};
    saga_tensor *ib = host_i32(bad, 2);
    saga_ctx *c = NULL;
    assert_int_equal(saga_ctx_new(&c, be, 1), SAGA_OK);
    assert_null(saga_matmul(c, a, b));
    assert_int_equal(saga_ctx_status(c), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("saga_matmul", "3 x 4", NULL);
    /* later ops return NULL, even with good inputs, and the first message stays */
    assert_null(saga_relu(c, saga_matmul(c, a, b)));
    assert_null(saga_add(c, a, b));
    saga_error_clear();
    assert_int_equal(saga_ctx_status(c), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("saga_matmul", "inner dimensions", NULL);
    assert_int_not_equal(saga_backward(c, NULL), SAGA_OK);
    saga_ctx_clear(c);
    assert_int_equal(saga_ctx_status(c), SAGA_OK);
    assert_non_null(saga_add(c, a, b));
    /* other checks name the op and the shapes */
    assert_null(saga_add_bias(c, a, b));
    saga_test_assert_error_contains("saga_add_bias", "1 x 4", NULL);
    saga_ctx_clear(c);
    assert_null(saga_gather_rows(c, a, ib)); /* index 9 of 3 rows: the kernel refuses */
    assert_int_equal(saga_ctx_status(c), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("saga_gather_rows", NULL);
    saga_ctx_clear(c);
    assert_null(saga_relu(c, ib)); /* dtype */
    saga_test_assert_error_contains("saga_relu", "f32", "i32", NULL);
    saga_ctx_clear(c);
    assert_null(saga_slice_cols(c, a, 3, 2));
    saga_test_assert_error_contains("saga_slice_cols", NULL);
    saga_ctx_clear(c);
    assert_null(saga_scale(c, a, b)); /* the scale must be 1 x 1 */
    saga_test_assert_error_contains("saga_scale", "1 x 1", "3 x 4", NULL);
    saga_ctx_clear(c);
    assert_null(saga_dropout(c, a, 1.0f));
    assert_true(isnan(saga_item(NULL)));
    /* backward needs training and a 1 x 1 loss */
    saga_ctx_clear(c);
    assert_int_equal(saga_backward(c, saga_sum(c, a)), SAGA_ERR_INVALID_ARG);
    saga_ctx_train(c, true);
    assert_int_equal(saga_backward(c, a), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("1 x 1", NULL);
    saga_ctx_free(&c);
    saga_ctx_free(&c); /* NULL is fine */
    saga_tensor_free(&a);
    saga_tensor_free(&b);
    saga_tensor_free(&ib);
}

static void test_nn_ops_inference_mode(void **state) {
    (void)state;
    saga_model *m = NULL;
    assert_int_equal(saga_model_new(&m, be), SAGA_OK);
    saga_tensor *W = param(m, "W", 4, 4, -1, 1, 0, 31);
    saga_ctx *c = NULL;
    assert_int_equal(saga_ctx_new(&c, be, 3), SAGA_OK);
    assert_false(saga_ctx_training(c));
    saga_tensor *d = saga_dropout(c, W, 0.5f);
    assert_non_null(d);
    assert_memory_equal(saga_tensor_cdata(d), saga_tensor_cdata(W), 16 * sizeof(float));
    assert_int_equal(saga_ctx_rng_counter(c), 0);
    saga_tensor *y = saga_sum(c, saga_relu(c, saga_matmul(c, d, W)));
    assert_non_null(y);
    assert_false(y->requires_grad);
    assert_null(y->node); /* nothing recorded */
    assert_int_equal(saga_backward(c, y), SAGA_ERR_INVALID_ARG);
    /* gradients: only parameters have one through saga_grad */
    assert_null(saga_grad(y));
    assert_null(saga_grad(NULL));
    const float *g = saga_tensor_cdata(saga_grad(W));
    for (int i = 0; i < 16; i++)
        assert_true(g[i] == 0.0f);
    /* training records, and the counter advances per dropout call */
    saga_ctx_train(c, true);
    y = saga_sum(c, saga_dropout(c, W, 0.5f));
    assert_true(y->requires_grad);
    assert_int_equal(saga_ctx_rng_counter(c), 1);
    saga_ctx_clear(c);
    assert_int_equal(saga_ctx_rng_counter(c), 1);
    saga_ctx_free(&c);
    saga_model_free(&m);
}

/* Steady state takes its buffers from the cache: a second identical step allocates nothing. */
/* One pass of a first layer, dropout(x) W, with the loss sum(y .* r): y and W's gradient. The
 * dense path takes x dense, the sparse one the same matrix as a CSR. */
static void sparse_layer(saga_ctx *c, saga_model *m, saga_tensor *W, saga_tensor *r,
                         saga_tensor *xd, const saga_sparse *xs, float p, uint64_t counter,
                         float *y_out, float *dw_out) {
    assert_int_equal(saga_model_zero_grad(m), SAGA_OK);
    saga_ctx_set_rng_counter(c, counter);
    saga_tensor *y = NULL;
    if (xs) {
        saga_sparse x = saga_sparse_dropout(c, xs, p);
        y = saga_spmm(c, &x, W);
    } else {
        y = saga_matmul(c, saga_dropout(c, xd, p), W);
    }
    saga_tensor *loss = saga_sum(c, saga_mul(c, y, r));
    assert_non_null(loss);
    assert_int_equal(saga_backward(c, loss), SAGA_OK);
    assert_int_equal(saga_tensor_to_host(y, y_out), SAGA_OK);
    assert_int_equal(saga_tensor_to_host(saga_grad(W), dw_out), SAGA_OK);
    saga_ctx_clear(c);
}

/* saga_spmm with saga_sparse_dropout against saga_matmul with saga_dropout on the dense matrix:
 * the same product and W gradient (X^T dY through spmm_t_f32) to float rounding, with dropout
 * off and on (the entries draw the dense mask's bits, by row base and by row ids). */
static void test_nn_ops_sparse_matches_dense(void **state) {
    (void)state;
    enum { R = 57, F = 41, H = 6 };
    int64_t off[R + 1];
    int32_t idx[R * F];
    float val[R * F], dense[R * F], wv[F * H], rv[R * H];
    int32_t ids[R];
    uint64_t seed = 5;
    off[0] = 0;
    memset(dense, 0, sizeof dense);
    for (int i = 0; i < R; i++) {
        off[i + 1] = off[i];
        for (int j = 0; j < F; j++)
            if (urand(&seed, 0, 1) < (i % 5 == 0 ? 0.0 : 0.2)) { /* some rows empty */
                idx[off[i + 1]] = j;
                val[off[i + 1]] = dense[i * F + j] = (float)urand(&seed, -1, 1);
                off[i + 1]++;
            }
        ids[i] = (i * 31 + 7) % 101; /* rows standing for rows of a larger matrix */
    }
    int64_t nnz = off[R];
    fill(wv, F * H, -1, 1, 0, 9);
    fill(rv, R * H, -1, 1, 0, 10);
    saga_model *m = NULL;
    saga_ctx *c = NULL;
    assert_int_equal(saga_model_new(&m, be), SAGA_OK);
    assert_int_equal(saga_ctx_new(&c, be, 3), SAGA_OK);
    saga_tensor *W = saga_model_param(m, "W", F, H, SAGA_INIT_ZEROS, 0);
    memcpy(saga_tensor_data(W), wv, sizeof wv);
    saga_tensor *r = NULL, *xd = NULL, *to = NULL, *ti = NULL, *tv = NULL;
    assert_int_equal(saga_tensor_from_host(&r, be, SAGA_F32, R, H, rv), SAGA_OK);
    assert_int_equal(saga_tensor_from_host(&xd, be, SAGA_F32, R, F, dense), SAGA_OK);
    assert_int_equal(saga_tensor_from_host(&to, be, SAGA_I64, R + 1, 1, off), SAGA_OK);
    assert_int_equal(saga_tensor_from_host(&ti, be, SAGA_I32, nnz, 1, idx), SAGA_OK);
    assert_int_equal(saga_tensor_from_host(&tv, be, SAGA_F32, nnz, 1, val), SAGA_OK);
    saga_sparse xs = {.rows = R, .cols = F, .nnz = nnz, .offsets = to, .indices = ti, .values = tv};
    saga_ctx_train(c, true);
    float yd[R * H], ys[R * H], gd[F * H], gs[F * H];
    /* The same products (a dropped entry is zero on both paths, a kept one x 2, exactly) summed in
     * two orders: by the GEMM over K = F terms (y) or R (W's gradient, X^T dY with dY = r), within
     * gamma_{K+2} of the terms' magnitudes; by the SpMM over a row's entries or the transposed one
     * over a column's, within as much. The magnitudes are taken with every entry kept. */
    double ymag[R * H] = {0}, gmag[F * H] = {0};
    for (int i = 0; i < R; i++)
        for (int k = 0; k < F; k++)
            for (int j = 0; j < H; j++) {
                ymag[i * H + j] += fabs((double)dense[i * F + k] * wv[k * H + j]);
                gmag[k * H + j] += fabs((double)dense[i * F + k] * rv[i * H + j]);
            }
    for (int pi = 0; pi < 3; pi++) {
        const float p = pi == 0 ? 0.0f : 0.5f;
        saga_ctx_set_row_ids(c, pi == 2 ? ids : NULL, R);
        sparse_layer(c, m, W, r, xd, NULL, p, 11, yd, gd);
        sparse_layer(c, m, W, r, NULL, &xs, p, 11, ys, gs);
        const double keep = 1 / (1 - (double)p);
        for (int k = 0; k < R * H; k++)
            if (!(fabs((double)yd[k] - ys[k]) <= 2 * gam(F + 2) * keep * ymag[k]))
                fail_msg("p %g: y[%d]: dense %.9g, sparse %.9g", (double)p, k, (double)yd[k],
                         (double)ys[k]);
        for (int k = 0; k < F * H; k++)
            if (!(fabs((double)gd[k] - gs[k]) <= 2 * gam(R + 2) * keep * gmag[k]))
                fail_msg("p %g: dW[%d]: dense %.9g, sparse %.9g", (double)p, k, (double)gd[k],
                         (double)gs[k]);
        if (p > 0) { /* the mask did drop something, and the two draws agree on it */
            int zeros = 0;
            for (int k = 0; k < R * H; k++)
                zeros += yd[k] == 0.0f && (off[k / H + 1] > off[k / H]);
            assert_true(zeros < R * H);
        }
    }
    saga_ctx_set_row_ids(c, NULL, 0);
    /* the dropped entries stay stored; every kept one is scaled by 2 */
    saga_sparse d = saga_sparse_dropout(c, &xs, 0.5f);
    assert_non_null(d.values);
    assert_int_equal(d.nnz, nnz);
    float dv[R * F];
    assert_int_equal(saga_tensor_to_host(d.values, dv), SAGA_OK);
    int kept = 0;
    for (int64_t k = 0; k < nnz; k++) {
        assert_true(dv[k] == 0.0f || dv[k] == 2.0f * val[k]);
        kept += dv[k] != 0.0f;
    }
    assert_true(kept > nnz / 4 && kept < 3 * nnz / 4);
    /* inference: the identity */
    saga_ctx_train(c, false);
    d = saga_sparse_dropout(c, &xs, 0.5f);
    assert_ptr_equal(d.values, tv);
    /* shapes are checked */
    saga_sparse bad = xs;
    bad.cols = F + 1;
    assert_null(saga_spmm(c, &bad, W));
    assert_int_equal(saga_ctx_status(c), SAGA_ERR_INVALID_ARG);
    saga_ctx_clear(c);
    saga_tensor *tens[] = {r, xd, to, ti, tv};
    for (int i = 0; i < 5; i++)
        saga_tensor_free(&tens[i]);
    saga_ctx_free(&c);
    saga_model_free(&m);
}

static void test_nn_ops_buffer_reuse(void **state) {
    (void)state;
    saga_model *m = NULL;
    assert_int_equal(saga_model_new(&m, be), SAGA_OK);
    saga_tensor *W = param(m, "W", 64, 32, -1, 1, 0, 41);
    saga_tensor *X = NULL;
    assert_int_equal(saga_tensor_new(&X, be, SAGA_F32, 100, 64), SAGA_OK);
    saga_ctx *c = NULL;
    assert_int_equal(saga_ctx_new(&c, be, 3), SAGA_OK);
    saga_ctx_train(c, true);
    saga_backend_stats s0, s1;
    for (int step = 0; step < 3; step++) {
        if (step == 2)
            saga_backend_get_stats(be, &s0);
        saga_tensor *l = saga_mean(c, saga_tanh(c, saga_dropout(c, saga_matmul(c, X, W), 0.5f)));
        assert_int_equal(saga_backward(c, l), SAGA_OK);
        saga_ctx_clear(c);
    }
    saga_backend_get_stats(be, &s1);
    assert_int_equal(s1.n_allocs, s0.n_allocs);
    saga_ctx_free(&c);
    saga_tensor_free(&X);
    saga_model_free(&m);
}

/* saga_cross_entropy against a hand computation: the mean of logsumexp(row) - row[label] over
 * the listed rows, and its gradient (softmax(row) - onehot(label)) / r on those rows, 0 on the
 * others; a row labelled -1 may be left out of the list but not listed. */
static void test_nn_ops_cross_entropy(void **state) {
    (void)state;
    enum { N = 3, C = 3 };
    const float z[N * C] = {1, 2, 3, 0, 0, 0, 2, 0, -1};
    const int32_t labels[N] = {2, -1, 0};
    const int32_t rows[2] = {2, 0};
    saga_model *m = NULL;
    assert_int_equal(saga_model_new(&m, be), SAGA_OK);
    saga_tensor *P = saga_model_param(m, "logits", N, C, SAGA_INIT_ZEROS, 0);
    assert_non_null(P);
    memcpy(saga_tensor_data(P), z, sizeof z);
    saga_tensor *tl = host_i32(labels, N), *tr = host_i32(rows, 2);
    saga_ctx *c = NULL;
    assert_int_equal(saga_ctx_new(&c, be, 1), SAGA_OK);
    saga_ctx_train(c, true);

    /* by hand: lse(1,2,3) = 3 + log(1 + e^-1 + e^-2), lse(2,0,-1) = 2 + log(1 + e^-2 + e^-3) */
    double lse0 = 3 + log(1 + exp(-1.0) + exp(-2.0));
    double lse2 = 2 + log(1 + exp(-2.0) + exp(-3.0));
    double want = ((lse0 - 3) + (lse2 - 2)) / 2;
    /* the bounds: log_softmax's (softmax_err) on each row; the loss the mean of the listed rows'
     * values in double, rounded to f32; the gradient log_softmax's backward pass from its f32
     * output y, dy - expf(y) sum(dy), with dy = -1/2 (exact) at the label */
    double lerr[N * C];
    for (int i = 0; i < N; i++)
        xf_softmax_err(C, 1, true, z + i * C, lerr + i * C);
    saga_tensor *loss = saga_cross_entropy(c, P, tl, tr);
    assert_non_null(loss);
    assert_true(fabs(saga_item(loss) - want) <=
                xf_round(want, (lerr[2] + lerr[2 * C] + sum64_err(3, 2 * want)) / 2).e);
    assert_int_equal(saga_backward(c, loss), SAGA_OK);
    const float *g = saga_tensor_cdata(saga_grad(P));
    double want_g[N * C] = {0}, gerr[N * C] = {0};
    for (int k = 0; k < C; k++) {
        want_g[0 * C + k] = (exp(z[0 * C + k] - lse0) - (k == 2)) / 2;
        want_g[2 * C + k] = (exp(z[2 * C + k] - lse2) - (k == 0)) / 2;
        for (int i = 0; i < N; i += 2) {
            const xf y = {z[i * C + k] - (i ? lse2 : lse0), lerr[i * C + k]};
            const xf dy = xf_in(k == labels[i] ? -0.5 : 0);
            gerr[i * C + k] = xf_sub(dy, xf_mul(xf_exp(y), xf_in(-0.5))).e;
        }
    }
    for (int i = 0; i < N * C; i++)
        if (!(fabs(g[i] - want_g[i]) <= gerr[i]))
            fail_msg("d loss / d logits[%d]: %.8g, by hand %.8g: differ by %.3g, past the bound "
                     "%.3g",
                     i, (double)g[i], want_g[i], fabs(g[i] - want_g[i]), gerr[i]);
    saga_ctx_clear(c);

    /* every row: vertex 1's -1 is listed and refused, naming it */
    assert_null(saga_cross_entropy(c, P, tl, NULL));
    assert_int_equal(saga_ctx_status(c), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("row 1", "label -1", NULL);
    saga_ctx_clear(c);
    /* every row, all labelled: the mean over the three */
    const int32_t all[N] = {2, 1, 0};
    saga_tensor *ta = host_i32(all, N);
    loss = saga_cross_entropy(c, P, ta, NULL);
    assert_non_null(loss);
    want = ((lse0 - 3) + log(3.0) + (lse2 - 2)) / 3;
    assert_true(
        fabs(saga_item(loss) - want) <=
        xf_round(want, (lerr[2] + lerr[C + 1] + lerr[2 * C] + sum64_err(4, 3 * want)) / 3).e);
    saga_ctx_clear(c);
    /* a NULL input after nothing failed is an error naming the op */
    assert_null(saga_cross_entropy(c, NULL, tl, tr));
    saga_test_assert_error_contains("saga_cross_entropy", "logits", NULL);
    saga_ctx_clear(c);

    saga_tensor_free(&tl);
    saga_tensor_free(&tr);
    saga_tensor_free(&ta);
    saga_ctx_free(&c);
    saga_model_free(&m);
}

/* saga_accuracy on scores chosen by hand: ties go to the first class, -1 never matches. */
static void test_nn_ops_accuracy(void **state) {
    (void)state;
    const float scores[4 * 3] = {0.1f, 0.7f, 0.2f, /* arg-max 1 */
                                 0.5f, 0.5f, 0.0f, /* tie: 0 */
                                 -3,   -1,   -2,   /* 1 */
                                 0,    0,    1};   /* 2 */
    const int32_t labels[4] = {1, 1, 1, -1};
    assert_true(saga_accuracy(scores, 3, labels, NULL, 4) == 0.5);
    const int32_t right[2] = {2, 0}, wrong[2] = {1, 3}, some[3] = {0, 1, 2};
    assert_true(saga_accuracy(scores, 3, labels, right, 2) == 1.0);
    assert_true(saga_accuracy(scores, 3, labels, wrong, 2) == 0.0);
    assert_true(saga_accuracy(scores, 3, labels, some, 3) == 2.0 / 3.0); /* the same division */
    assert_true(saga_accuracy(scores, 3, labels, right, 0) == 0.0);
    /* read as 2 classes, the row stride is 2: rows [0.1 0.7] and [0.2 0.5], both arg-max 1 */
    assert_true(saga_accuracy(scores, 2, labels, NULL, 2) == 1.0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nn_ops_gradients),
        cmocka_unit_test(test_nn_ops_forward_values),
        cmocka_unit_test(test_nn_ops_sticky_error),
        cmocka_unit_test(test_nn_ops_inference_mode),
        cmocka_unit_test(test_nn_ops_buffer_reuse),
        cmocka_unit_test(test_nn_ops_sparse_matches_dense),
        cmocka_unit_test(test_nn_ops_cross_entropy),
        cmocka_unit_test(test_nn_ops_accuracy),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
