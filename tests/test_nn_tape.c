/* test_nn_tape.c - the internal tape: regions give the plain tape's gradients and free what they
 * made; custom nodes from saga_tape_record; a region recomputed inside a backward function;
 * deferred products. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"

#include "nn_impl.h"

#include <math.h>
#include <string.h>

enum { N = 6, F = 4, H = 3 };

static saga_backend *be;
static saga_model *m;
static saga_tensor *W, *X, *R;

static int setup(void **state) {
    (void)state;
    if (saga_backend_cpu_new(&be, NULL) < 0 || saga_model_new(&m, be) < 0)
        return -1;
    W = saga_model_param(m, "W", F, H, SAGA_INIT_GLOROT, 3);
    float x[N * F], r[N * H];
    for (int i = 0; i < N * F; i++)
        x[i] = (float)sin(0.7 * i + 0.1);
    for (int i = 0; i < N * H; i++)
        r[i] = (float)cos(1.3 * i);
    if (!W || saga_tensor_from_host(&X, be, SAGA_F32, N, F, x) < 0 ||
        saga_tensor_from_host(&R, be, SAGA_F32, N, H, r) < 0)
        return -1;
    return 0;
}

static int teardown(void **state) {
    (void)state;
    saga_tensor_free(&X);
    saga_tensor_free(&R);
    saga_model_free(&m);
    saga_backend_free_all(&be);
    return 0;
}

static void copy_grad(float *dst, const saga_tensor *t) {
    memcpy(dst, saga_tensor_cdata(t->grad), t->nbytes);
}

/* A context on the test's backend (seed 1), in training mode. */
static saga_ctx *train_ctx(void) {
    saga_ctx *c = NULL;
    assert_int_equal(saga_ctx_new(&c, be, 1), SAGA_OK);
    saga_ctx_train(c, true);
    return c;
}

static void test_nn_tape_region_matches_plain_tape(void **state) {
    (void)state;
    saga_ctx *c = train_ctx();
    float gw_plain[F * H], gx_plain[N * F], gw_region[F * H], gx_region[N * F];

    /* plain tape */
    assert_int_equal(saga_model_zero_grad(m), SAGA_OK);
    saga_tensor *xl = saga_ctx_leaf(c, X);
    saga_tensor *loss = saga_sum(c, saga_mul(c, saga_tanh(c, saga_matmul(c, xl, W)), R));
    assert_int_equal(saga_backward(c, loss), SAGA_OK);
    copy_grad(gw_plain, W);
    copy_grad(gx_plain, xl);
    saga_ctx_clear(c);

    /* the same in a region after some unrelated work */
    assert_int_equal(saga_model_zero_grad(m), SAGA_OK);
    saga_tensor *before = saga_relu(c, saga_matmul(c, X, W));
    assert_non_null(before);
    saga_tape_pos p0 = saga_tape_mark(c);
    saga_tensor *xb = saga_ctx_leaf(c, X);
    saga_tensor *y = saga_tanh(c, saga_matmul(c, xb, W));
    assert_int_equal(saga_tape_backward_range(c, p0, y, R), SAGA_OK); /* dy = R */
    copy_grad(gw_region, W);
    copy_grad(gx_region, xb);
    assert_memory_equal(gw_plain, gw_region, sizeof gw_plain);
    assert_memory_equal(gx_plain, gx_region, sizeof gx_plain);
    assert_null(y->grad); /* intermediate gradients are gone once used */
    saga_backend_stats s0, s1;
    saga_backend_get_stats(be, &s0);
    saga_tape_release(c, p0);
    saga_backend_get_stats(be, &s1);
    saga_tape_pos p1 = saga_tape_mark(c);
    assert_int_equal(p1.n_nodes, p0.n_nodes);
    assert_int_equal(p1.n_tensors, p0.n_tensors);
    /* the outer tape is intact and still runs */
    assert_non_null(before->node);
    saga_ctx_free(&c);
}

/* ---- a custom node: y = x .* x, backward 2 x dy ------------------------------------------ */

static int n_freed;

static void count_free(void *p) {
    n_freed++;
    saga_free(p);
}

static saga_status square_bwd(saga_ctx *c, saga_node *n, saga_tensor *dy) {
    int *calls = saga_node_state(n);
    (*calls)++;
    saga_tensor *x = saga_node_input(n, 0);
    assert_true(saga_node_needs_grad(n, 0));
    assert_false(saga_node_needs_grad(n, 1));
    const saga_kernels *k = saga_ctx_kernels(c);
    saga_tensor *g = saga_ctx_tensor(c, SAGA_F32, x->rows, x->cols);
    if (!g)
        return saga_ctx_status(c);
    int64_t len = x->rows * x->cols;
    saga_status st =
        k->binary_f32(saga_ctx_stream(c), SAGA_BINOP_MUL, len, x->data, dy->data, g->data);
    if (st == SAGA_OK)
        st = k->scale_f32(saga_ctx_stream(c), len, 2.0f, g->data, 0.0f, g->data);
    return st < 0 ? st : saga_node_accumulate(c, n, 0, g);
}

static saga_tensor *square(saga_ctx *c, saga_tensor *x, saga_tensor *unused) {
    saga_tensor *y = saga_ctx_tensor(c, SAGA_F32, x->rows, x->cols);
    if (!y)
        return NULL;
    const saga_kernels *k = saga_ctx_kernels(c);
    assert_int_equal(k->binary_f32(saga_ctx_stream(c), SAGA_BINOP_MUL, x->rows * x->cols, x->data,
                                   x->data, y->data),
                     SAGA_OK);
    int *calls = NULL;
    assert_int_equal(saga_alloc_zeroed((void **)&calls, 1, sizeof *calls, "calls"), SAGA_OK);
    saga_tensor *in[2] = {x, unused};
    if (saga_tape_record(c, y, in, 2, square_bwd, calls, count_free) < 0)
        return NULL;
    return y;
}

static void test_nn_tape_custom_node(void **state) {
    (void)state;
    saga_ctx *c = NULL;
    assert_int_equal(saga_ctx_new(&c, be, 1), SAGA_OK);
    n_freed = 0;
    /* not training: nothing recorded and the state is freed at once */
    saga_tensor *y = square(c, W, X);
    assert_non_null(y);
    assert_int_equal(n_freed, 1);
    assert_false(saga_tensor_needs_grad(y));
    saga_ctx_train(c, true);
    assert_int_equal(saga_model_zero_grad(m), SAGA_OK);
    saga_tape_pos p = saga_tape_mark(c);
    y = square(c, W, X);
    assert_true(saga_tensor_needs_grad(y));
    assert_false(saga_tensor_needs_grad(X));
    assert_int_equal(n_freed, 1);
    saga_tensor *sel = saga_slice_cols(c, y, 0, H);
    assert_int_equal(saga_tape_backward_range(c, p, saga_sum(c, sel), NULL), SAGA_OK);
    const float *w = saga_tensor_cdata(W), *g = saga_tensor_cdata(saga_grad(W));
    for (int i = 0; i < F * H; i++) /* 2 (x dy) with dy = 1: exact */
        assert_true(g[i] == 2.0f * w[i]);
    saga_tape_release(c, p);
    assert_int_equal(n_freed, 2);
    /* saga_grad_accumulate on a user tensor gives it a gradient that outlives the clear */
    saga_tensor *t = NULL;
    assert_int_equal(saga_tensor_new(&t, be, SAGA_F32, N, H), SAGA_OK);
    assert_int_equal(saga_grad_accumulate(c, t, R), SAGA_OK);
    assert_int_equal(saga_grad_accumulate(c, t, R), SAGA_OK);
    saga_ctx_clear(c);
    const float *tg = saga_tensor_cdata(t->grad), *r = saga_tensor_cdata(R);
    for (int i = 0; i < N * H; i++)
        assert_true(tg[i] == 2.0f * r[i]);
    assert_int_equal(saga_grad_accumulate(c, t, X), SAGA_ERR_INVALID_ARG); /* shape */
    saga_tensor_free(&t);
    saga_ctx_free(&c);
}

/* ---- recomputation: a node whose backward reruns its function in a region ------------------ */

static saga_status recompute_bwd(saga_ctx *c, saga_node *n, saga_tensor *dy) {
    saga_status st = SAGA_OK;
    saga_tensor *x = saga_node_input(n, 0);
    saga_tape_pos p = saga_tape_mark(c);
    saga_tensor *xb = saga_ctx_leaf(c, x);
    saga_tensor *y = saga_tanh(c, saga_matmul(c, xb, W));
    st = saga_tape_backward_range(c, p, y, dy);
    if (st == SAGA_OK && saga_node_needs_grad(n, 0))
        st = saga_node_accumulate(c, n, 0, xb->grad);
    saga_tape_release(c, p);
    return st;
}

static void test_nn_tape_recompute_in_backward(void **state) {
    (void)state;
    saga_ctx *c = train_ctx();
    saga_tensor *V = NULL;
    assert_int_equal(saga_tensor_from_host(&V, be, SAGA_F32, F, F, saga_tensor_cdata(X)), SAGA_OK);
    float gw_plain[F * H], gw_re[F * H];
    /* plain: loss = sum(tanh((X W0) W) .* R) with W0 = first rows of X as a constant, W param */
    assert_int_equal(saga_model_zero_grad(m), SAGA_OK);
    saga_tensor *h = saga_relu(c, saga_add(c, saga_ctx_leaf(c, X), saga_ctx_leaf(c, X)));
    saga_tensor *loss = saga_sum(c, saga_mul(c, saga_tanh(c, saga_matmul(c, h, W)), R));
    assert_int_equal(saga_backward(c, loss), SAGA_OK);
    copy_grad(gw_plain, W);
    saga_ctx_clear(c);
    /* recomputed: the middle runs without a tape and is redone during backward */
    assert_int_equal(saga_model_zero_grad(m), SAGA_OK);
    h = saga_relu(c, saga_add(c, saga_ctx_leaf(c, X), saga_ctx_leaf(c, X)));
    saga_ctx_train(c, false);
    saga_tensor *mid = saga_tanh(c, saga_matmul(c, h, W));
    saga_ctx_train(c, true);
    saga_tensor *in[1] = {h};
    assert_int_equal(saga_tape_record(c, mid, in, 1, recompute_bwd, NULL, NULL), SAGA_OK);
    loss = saga_sum(c, saga_mul(c, mid, R));
    assert_int_equal(saga_backward(c, loss), SAGA_OK);
    copy_grad(gw_re, W);
    /* the same kernels on the same values in the same order: the same bits */
    assert_memory_equal(gw_plain, gw_re, sizeof gw_plain);
    saga_tensor_free(&V);
    saga_ctx_free(&c);
}

/* ---- deferred products: an output nothing reads is never computed ------------------------- */

static void fill_nan(saga_tensor *t) {
    memset(t->data, 0xff, t->nbytes); /* the raw buffer: saga_tensor_data would run the product */
}

static void test_nn_tape_deferred_products(void **state) {
    (void)state;
    saga_ctx *c = train_ctx();
    float gw_eager[F * H], gw_deferred[F * H], y_eager[N * H], t_eager[N * H];

    /* eager: y = X W, its gradient R, and tanh(X W) */
    assert_int_equal(saga_model_zero_grad(m), SAGA_OK);
    saga_tape_pos p = saga_tape_mark(c);
    saga_tensor *y = saga_matmul(c, saga_ctx_leaf(c, X), W);
    assert_null(y->lazy);
    memcpy(y_eager, saga_tensor_cdata(y), sizeof y_eager);
    assert_int_equal(saga_tape_backward_range(c, p, y, R), SAGA_OK);
    copy_grad(gw_eager, W);
    memcpy(t_eager, saga_tensor_cdata(saga_tanh(c, y)), sizeof t_eager);
    saga_tape_release(c, p);

    /* deferred: the product waits; its backward pass needs only its gradient, and the
     * release drops it without running it (the buffer keeps what was there) */
    assert_int_equal(saga_model_zero_grad(m), SAGA_OK);
    saga_ctx_set_defer(c, true);
    p = saga_tape_mark(c);
    y = saga_matmul(c, saga_ctx_leaf(c, X), W);
    assert_ptr_equal(y->lazy, c);
    fill_nan(y);
    assert_int_equal(saga_tape_backward_range(c, p, y, R), SAGA_OK);
    copy_grad(gw_deferred, W);
    assert_memory_equal(gw_eager, gw_deferred, sizeof gw_eager);
    assert_ptr_equal(y->lazy, c);
    assert_true(isnan(((const float *)y->data)[0]));
    saga_tape_release(c, p);

    /* the next op reads it: it runs first, with the same values */
    p = saga_tape_mark(c);
    /* written straight to another buffer: its own stays as it was */
    y = saga_matmul(c, saga_ctx_leaf(c, X), W);
    fill_nan(y);
    saga_tensor *dst = saga_ctx_tensor(c, SAGA_F32, N, H);
    assert_int_equal(saga_ctx_flush_to(c, y, dst->data), 1);
    assert_null(y->lazy);
    assert_memory_equal(saga_tensor_cdata(dst), y_eager, sizeof y_eager);
    assert_true(isnan(((const float *)y->data)[0]));
    assert_int_equal(saga_ctx_flush_to(c, y, dst->data), 0); /* no longer deferred */
    y = saga_matmul(c, saga_ctx_leaf(c, X), W);
    assert_ptr_equal(y->lazy, c);
    fill_nan(y);
    saga_tensor *t = saga_tanh(c, y);
    assert_null(y->lazy);
    assert_memory_equal(saga_tensor_cdata(t), t_eager, sizeof t_eager);
    /* and so do the accessors that read data */
    y = saga_matmul(c, saga_ctx_leaf(c, X), W);
    fill_nan(y);
    assert_memory_equal(saga_tensor_cdata(y), y_eager, sizeof y_eager);
    assert_null(y->lazy);
    y = saga_matmul(c, saga_ctx_leaf(c, X), W);
    fill_nan(y);
    float host[N * H];
    assert_int_equal(saga_tensor_to_host(y, host), SAGA_OK);
    assert_memory_equal(host, y_eager, sizeof host);
    /* a product made before a mark outlives a release to it, still deferred */
    y = saga_matmul(c, saga_ctx_leaf(c, X), W);
    fill_nan(y);
    saga_tape_pos q = saga_tape_mark(c);
    saga_tape_release(c, q);
    assert_ptr_equal(y->lazy, c);
    assert_true(saga_item(y) == y_eager[0]);
    saga_tape_release(c, p);

    /* sparse x dense: the same */
    int64_t off[N + 1];
    int32_t idx[N * F];
    float val[N * F];
    for (int i = 0; i <= N; i++)
        off[i] = (int64_t)i * F;
    for (int i = 0; i < N * F; i++) {
        idx[i] = i % F;
        val[i] = ((const float *)saga_tensor_cdata(X))[i];
    }
    saga_tensor *to = NULL, *ti = NULL, *tv = NULL;
    assert_int_equal(saga_tensor_from_host(&to, be, SAGA_I64, N + 1, 1, off), SAGA_OK);
    assert_int_equal(saga_tensor_from_host(&ti, be, SAGA_I32, N * F, 1, idx), SAGA_OK);
    assert_int_equal(saga_tensor_from_host(&tv, be, SAGA_F32, N * F, 1, val), SAGA_OK);
    saga_sparse xs = {
        .rows = N, .cols = F, .nnz = N * F, .offsets = to, .indices = ti, .values = tv};
    assert_int_equal(saga_model_zero_grad(m), SAGA_OK);
    p = saga_tape_mark(c);
    y = saga_spmm(c, &xs, W);
    assert_ptr_equal(y->lazy, c);
    fill_nan(y);
    assert_int_equal(saga_tape_backward_range(c, p, y, R), SAGA_OK);
    copy_grad(gw_deferred, W);
    /* The GEMM's sums and the SpMM's add the same products in other orders (test_util.h): W's
     * gradient X^T R over the N rows, y = X W over the F columns, each within gamma_{K+2} of the
     * terms' magnitudes (the K products and additions, alpha's product, beta C's addition). */
    const float *xv = saga_tensor_cdata(X), *wv = saga_tensor_cdata(W), *rv = saga_tensor_cdata(R);
    for (int k = 0; k < F; k++)
        for (int j = 0; j < H; j++) {
            double mag = 0;
            for (int i = 0; i < N; i++)
                mag += fabs((double)xv[i * F + k] * rv[i * H + j]);
            const float a = gw_eager[k * H + j], b = gw_deferred[k * H + j];
            if (!(fabs((double)a - b) <= 2 * saga_test_gamma(N + 2, SAGA_TEST_U32) * mag))
                fail_msg("dW[%d][%d]: GEMM %.9g, SpMM %.9g", k, j, (double)a, (double)b);
        }
    saga_tape_release(c, p);
    p = saga_tape_mark(c);
    y = saga_spmm(c, &xs, W);
    fill_nan(y);
    const float *ys = saga_tensor_cdata(y);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < H; j++) {
            double mag = 0;
            for (int k = 0; k < F; k++)
                mag += fabs((double)xv[i * F + k] * wv[k * H + j]);
            const float a = y_eager[i * H + j], b = ys[i * H + j];
            if (!(fabs((double)a - b) <= 2 * saga_test_gamma(F + 2, SAGA_TEST_U32) * mag))
                fail_msg("y[%d][%d]: GEMM %.9g, SpMM %.9g", i, j, (double)a, (double)b);
        }
    saga_tape_release(c, p);

    /* off again: computed at once */
    saga_ctx_set_defer(c, false);
    p = saga_tape_mark(c);
    y = saga_matmul(c, saga_ctx_leaf(c, X), W);
    assert_null(y->lazy);
    saga_tape_release(c, p);
    saga_tensor_free(&to);
    saga_tensor_free(&ti);
    saga_tensor_free(&tv);
    saga_ctx_free(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nn_tape_region_matches_plain_tape),
        cmocka_unit_test(test_nn_tape_custom_node),
        cmocka_unit_test(test_nn_tape_recompute_in_backward),
        cmocka_unit_test(test_nn_tape_deferred_products),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
