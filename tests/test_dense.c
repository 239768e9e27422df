/* test_dense.c - the tiled MLP: its training equals a plain double-precision reference (forward,
 * backward, Adam or AdamA written as loops), streamed training under a budget 8x smaller than
 * its footprint gives the in-memory losses for row and column tiles, the device never holds more
 * than the budget, a network that fits moves only its batch after the first step, and a budget
 * too small for one tile names the smallest that works. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"

#include "saga_dense.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_L = 4, N_STEPS = 20 };

/* A deterministic batch: x uniform in [-1, 1), targets a fixed smooth function of x. */
static void make_batch(int step, int64_t rows, int64_t in, int64_t out, float *x, float *y) {
    uint64_t st = 0x1234u + (uint64_t)step * 7919u;
    for (int64_t i = 0; i < rows * in; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(st >> 40) * 0x1p-23 - 1.0);
    }
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < out; c++) {
            double s = 0;
            for (int64_t i = 0; i < in; i++)
                s += x[r * in + i] * sin((double)(c + 1) * (double)(i + 1));
            y[r * out + c] = (float)tanh(s / sqrt((double)in));
        }
}

static saga_backend *open_cpu(size_t budget) {
    saga_backend *be = NULL;
    saga_backend_params bp = saga_backend_params_defaults();
    bp.budget_bytes = budget;
    assert_int_equal(saga_backend_cpu_new(&be, &bp), SAGA_OK);
    return be;
}

/* The stats of a run, with the tiles per layer copied out of the network. */
typedef struct run {
    saga_mlp_stats st;
    int32_t tiles[MAX_L];
} run;

/* Trains a network of these parameters for n steps on the CPU backend with a budget (0: none),
 * writing each step's loss; returns the stats of the last step. */
static bool fixed_batch; /* every step trains on batch 0 */

static run train(const saga_mlp_params *p, size_t budget, int n, double *losses) {
    saga_backend *be = open_cpu(budget);
    saga_mlp *m = NULL;
    assert_int_equal(saga_mlp_new(&m, be, p), SAGA_OK);
    int64_t in = p->widths[0], out = p->widths[p->n_layers];
    float *x = malloc((size_t)(p->batch * in) * sizeof *x);
    float *y = malloc((size_t)(p->batch * out) * sizeof *y);
    assert_non_null(x);
    assert_non_null(y);
    for (int s = 0; s < n; s++) {
        make_batch(fixed_batch ? 0 : s, p->batch, in, out, x, y);
        assert_int_equal(saga_mlp_train_step(m, x, y, &losses[s]), SAGA_OK);
    }
    run st = {0};
    saga_mlp_get_stats(m, &st.st);
    for (int l = 0; l < p->n_layers && l < MAX_L; l++)
        st.tiles[l] = st.st.tiles[l];
    st.st.tiles = st.st.tile_units = NULL; /* they die with the network */
    st.st.tile_bytes = NULL;
    saga_backend_stats bs;
    saga_backend_get_stats(be, &bs);
    if (budget)
        assert_true(bs.peak_bytes <= budget);
    free(x);
    free(y);
    saga_mlp_free(&m);
    assert_null(m);
    saga_backend_free_all(&be);
    return st;
}

/* ---- an independent reference in double ---------------------------------------------------- */

typedef struct ref {
    int L;
    int64_t w[MAX_L + 1];
    double *W[MAX_L], *b[MAX_L], *gW[MAX_L], *gb[MAX_L];
    double *mW[MAX_L], *mb[MAX_L], *vW[MAX_L], *vb[MAX_L];
} ref;

static double *zeros(int64_t n) {
    double *p = calloc((size_t)n, sizeof *p);
    assert_non_null(p);
    return p;
}

/* Adam on n values given the moments' increments: m = b1 m + (1 - b1) gm, v = b2 v + (1 - b2)
 * gv (Adam: gm = g, gv = g^2), then torch's bias-corrected update. */
static void ref_adam(int64_t n, double *p, const double *gm, const double *gv, double *m, double *v,
                     const saga_mlp_params *pp, int t) {
    double b1 = pp->beta1, b2 = pp->beta2;
    for (int64_t i = 0; i < n; i++) {
        m[i] = b1 * m[i] + (1 - b1) * gm[i];
        v[i] = b2 * v[i] + (1 - b2) * gv[i];
        double mh = m[i] / (1 - pow(b1, t)), vh = v[i] / (1 - pow(b2, t));
        p[i] -= pp->lr * mh / (sqrt(vh) + pp->eps);
    }
}

/* One training step of the reference: per micro-batch, forward, MSE over the whole batch,
 * backward; gradient shares summed (Adam) or their squares summed too (AdamA). */
static double ref_step(ref *r, const saga_mlp_params *p, const float *x, const float *y, int t) {
    int L = r->L, n_micro = p->n_micro;
    int64_t mb = p->batch / n_micro, out = r->w[L];
    double loss = 0, denom = (double)p->batch * (double)out;
    double *h[MAX_L + 1], *dh[MAX_L + 1];
    for (int l = 0; l <= L; l++) {
        h[l] = zeros(mb * r->w[l]);
        dh[l] = zeros(mb * r->w[l]);
    }
    double *sqW[MAX_L], *sqb[MAX_L], *cW[MAX_L], *cb[MAX_L];
    for (int l = 0; l < L; l++) {
        int64_t nw = r->w[l] * r->w[l + 1];
        memset(r->gW[l], 0, (size_t)nw * sizeof(double));
        memset(r->gb[l], 0, (size_t)r->w[l + 1] * sizeof(double));
        sqW[l] = zeros(nw);
        sqb[l] = zeros(r->w[l + 1]);
        cW[l] = zeros(nw);
        cb[l] = zeros(r->w[l + 1]);
    }
    for (int k = 0; k < n_micro; k++) {
        for (int64_t i = 0; i < mb * r->w[0]; i++)
            h[0][i] = x[k * mb * r->w[0] + i];
        for (int l = 0; l < L; l++) {
            int64_t in = r->w[l], o = r->w[l + 1];
            for (int64_t i = 0; i < mb; i++)
                for (int64_t c = 0; c < o; c++) {
                    double s = r->b[l][c];
                    for (int64_t q = 0; q < in; q++)
                        s += h[l][i * in + q] * r->W[l][q * o + c];
                    h[l + 1][i * o + c] = l < L - 1 && s < 0 ? 0 : s;
                }
        }
        for (int64_t i = 0; i < mb * out; i++) {
            double e = h[L][i] - y[k * mb * out + i];
            loss += e * e / denom;
            dh[L][i] = 2 * e / denom;
        }
        for (int l = L - 1; l >= 0; l--) {
            int64_t in = r->w[l], o = r->w[l + 1];
            memset(cW[l], 0, (size_t)(in * o) * sizeof(double));
            memset(cb[l], 0, (size_t)o * sizeof(double));
            for (int64_t i = 0; i < mb; i++)
                for (int64_t c = 0; c < o; c++) {
                    double g = dh[l + 1][i * o + c];
                    if (l < L - 1 && h[l + 1][i * o + c] <= 0)
                        g = 0;
                    dh[l + 1][i * o + c] = g;
                    cb[l][c] += g;
                    for (int64_t q = 0; q < in; q++)
                        cW[l][q * o + c] += h[l][i * in + q] * g;
                }
            for (int64_t i = 0; i < mb; i++)
                for (int64_t q = 0; q < in; q++) {
                    double s = 0;
                    for (int64_t c = 0; c < o; c++)
                        s += dh[l + 1][i * o + c] * r->W[l][q * o + c];
                    dh[l][i * in + q] = s;
                }
            for (int64_t i = 0; i < in * o; i++) {
                r->gW[l][i] += cW[l][i];
                sqW[l][i] += cW[l][i] * cW[l][i];
            }
            for (int64_t c = 0; c < o; c++) {
                r->gb[l][c] += cb[l][c];
                sqb[l][c] += cb[l][c] * cb[l][c];
            }
        }
    }
    for (int l = 0; l < L; l++) {
        int64_t nw = r->w[l] * r->w[l + 1], o = r->w[l + 1];
        if (p->optim == SAGA_DENSE_ADAM) {
            for (int64_t i = 0; i < nw; i++)
                sqW[l][i] = r->gW[l][i] * r->gW[l][i];
            for (int64_t c = 0; c < o; c++)
                sqb[l][c] = r->gb[l][c] * r->gb[l][c];
        }
        ref_adam(nw, r->W[l], r->gW[l], sqW[l], r->mW[l], r->vW[l], p, t);
        ref_adam(o, r->b[l], r->gb[l], sqb[l], r->mb[l], r->vb[l], p, t);
        free(sqW[l]);
        free(sqb[l]);
        free(cW[l]);
        free(cb[l]);
    }
    for (int l = 0; l <= L; l++) {
        free(h[l]);
        free(dh[l]);
    }
    return loss;
}

/* The network against the reference for n steps, from the network's initial parameters. */
static void check_against_reference(const saga_mlp_params *p, size_t budget, int n) {
    saga_backend *be = open_cpu(budget);
    saga_mlp *m = NULL;
    assert_int_equal(saga_mlp_new(&m, be, p), SAGA_OK);
    ref r = {.L = p->n_layers};
    for (int l = 0; l <= r.L; l++)
        r.w[l] = p->widths[l];
    for (int l = 0; l < r.L; l++) {
        int64_t nw = r.w[l] * r.w[l + 1], o = r.w[l + 1];
        float *W = malloc((size_t)nw * sizeof *W), *b = malloc((size_t)o * sizeof *b);
        assert_int_equal(saga_mlp_get_layer(m, l, W, b), SAGA_OK);
        r.W[l] = zeros(nw);
        r.b[l] = zeros(o);
        for (int64_t i = 0; i < nw; i++)
            r.W[l][i] = W[i];
        for (int64_t c = 0; c < o; c++)
            r.b[l][c] = b[c];
        r.gW[l] = zeros(nw), r.mW[l] = zeros(nw), r.vW[l] = zeros(nw);
        r.gb[l] = zeros(o), r.mb[l] = zeros(o), r.vb[l] = zeros(o);
        free(W);
        free(b);
    }
    int64_t in = p->widths[0], out = p->widths[p->n_layers];
    float *x = malloc((size_t)(p->batch * in) * sizeof *x);
    float *y = malloc((size_t)(p->batch * out) * sizeof *y);
    for (int s = 0; s < n; s++) {
        make_batch(s, p->batch, in, out, x, y);
        double got = 0, want = ref_step(&r, p, x, y, s + 1);
        assert_int_equal(saga_mlp_train_step(m, x, y, &got), SAGA_OK);
        if (fabs(got - want) > 1e-4 * fabs(want)) {
            print_error("step %d: loss %.9g, reference %.9g\n", s, got, want);
            fail();
        }
    }
    /* the parameters too, after the last update */
    for (int l = 0; l < r.L; l++) {
        int64_t nw = r.w[l] * r.w[l + 1];
        float *W = malloc((size_t)nw * sizeof *W);
        assert_int_equal(saga_mlp_get_layer(m, l, W, NULL), SAGA_OK);
        double err = 0, norm = 0;
        for (int64_t i = 0; i < nw; i++) {
            err += (W[i] - r.W[l][i]) * (W[i] - r.W[l][i]);
            norm += r.W[l][i] * r.W[l][i];
        }
        assert_true(sqrt(err) <= 1e-4 * sqrt(norm));
        free(W);
        free(r.W[l]), free(r.b[l]), free(r.gW[l]), free(r.mW[l]), free(r.vW[l]);
        free(r.gb[l]), free(r.mb[l]), free(r.vb[l]);
    }
    free(x);
    free(y);
    saga_mlp_free(&m);
    saga_backend_free_all(&be);
}

static const int32_t small_widths[] = {12, 20, 16, 3};

static saga_mlp_params small_params(saga_dense_optim optim, int n_micro) {
    saga_mlp_params p = saga_mlp_params_defaults();
    p.n_layers = 3;
    p.widths = small_widths;
    p.batch = 8;
    p.n_micro = n_micro;
    p.optim = optim;
    p.lr = 0.01f;
    p.seed = 5;
    return p;
}

static void test_dense_adam_matches_reference(void **state) {
    (void)state;
    saga_mlp_params p = small_params(SAGA_DENSE_ADAM, 2);
    check_against_reference(&p, 0, 8);
    p.split = SAGA_DENSE_SPLIT_ROWS;
    p.max_tile_units = 3; /* several tiles per layer, no budget */
    check_against_reference(&p, 0, 8);
}

static void test_dense_adama_matches_reference(void **state) {
    (void)state;
    saga_mlp_params p = small_params(SAGA_DENSE_ADAMA, 4);
    check_against_reference(&p, 0, 8);
    p.max_tile_units = 5;
    check_against_reference(&p, 0, 8);
}

/* The widths of the streamed tests: parameters and moments about 0.2 MB. */
static const int32_t mid_widths[] = {64, 96, 128, 10};

static saga_mlp_params mid_params(saga_dense_split split, saga_dense_optim optim) {
    saga_mlp_params p = saga_mlp_params_defaults();
    p.n_layers = 3;
    p.widths = mid_widths;
    p.batch = 32;
    p.n_micro = 2;
    p.split = split;
    p.optim = optim;
    p.lr = 3e-3f;
    p.seed = 11;
    return p;
}

static void check_streamed(saga_dense_split split, saga_dense_optim optim) {
    saga_mlp_params p = mid_params(split, optim);
    double mem[N_STEPS], str[N_STEPS];
    run sm = train(&p, 0, N_STEPS, mem);
    assert_false(sm.st.streamed);
    for (int l = 0; l < 3; l++)
        assert_int_equal(sm.tiles[l], 1);
    size_t budget = sm.st.footprint_bytes / 8;
    run ss = train(&p, budget, N_STEPS, str);
    assert_true(ss.st.streamed);
    assert_true(ss.st.step_bytes <= budget);
    assert_true(ss.st.peak_device_bytes <= budget);
    int tiles = 0;
    for (int l = 0; l < 3; l++)
        tiles += ss.tiles[l];
    assert_true(tiles > 3);
    assert_true(ss.st.h2d_bytes > 0 && ss.st.d2h_bytes > 0);
    for (int s = 0; s < N_STEPS; s++) {
        if (fabs(str[s] - mem[s]) > 1e-5 * fabs(mem[s])) {
            print_error("step %d: streamed loss %.9g, in memory %.9g\n", s, str[s], mem[s]);
            fail();
        }
    }
    assert_true(mem[N_STEPS - 1] < mem[0]); /* it learns */
}

static void test_dense_streamed_cols_equals_memory(void **state) {
    (void)state;
    check_streamed(SAGA_DENSE_SPLIT_COLS, SAGA_DENSE_ADAM);
    check_streamed(SAGA_DENSE_SPLIT_COLS, SAGA_DENSE_ADAMA);
}

static void test_dense_streamed_rows_equals_memory(void **state) {
    (void)state;
    check_streamed(SAGA_DENSE_SPLIT_ROWS, SAGA_DENSE_ADAM);
    check_streamed(SAGA_DENSE_SPLIT_ROWS, SAGA_DENSE_ADAMA);
}

/* When everything fits, the second step loads only its batch and writes nothing back. */
static void test_dense_in_memory_moves_only_the_batch(void **state) {
    (void)state;
    saga_mlp_params p = mid_params(SAGA_DENSE_SPLIT_COLS, SAGA_DENSE_ADAM);
    double loss[2];
    saga_mlp_stats st = train(&p, 64u << 20, 2, loss).st;
    assert_false(st.streamed);
    size_t batch_bytes = (size_t)p.batch * (size_t)(mid_widths[0] + mid_widths[3]) * sizeof(float);
    assert_int_equal(st.h2d_bytes, batch_bytes);
    assert_int_equal(st.d2h_bytes, 0);
    assert_true(st.kept_bytes >= 3 * st.param_bytes); /* weights and moments stay */
}

/* The least-squares minimum of the mean squared error of x W + b against y (rows x in, rows x
 * out), from the normal equations in double. */
static double least_squares_min(int64_t rows, int64_t in, int64_t out, const float *x,
                                const float *y) {
    int64_t n = in + 1;
    double *A = zeros(n * n), *B = zeros(n * out);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < n; i++) {
            double xi = i < in ? x[r * in + i] : 1.0;
            for (int64_t j = 0; j < n; j++)
                A[i * n + j] += xi * (j < in ? x[r * in + j] : 1.0);
            for (int64_t c = 0; c < out; c++)
                B[i * out + c] += xi * y[r * out + c];
        }
    for (int64_t i = 0; i < n; i++) /* Gauss-Jordan; A is symmetric positive definite */
        for (int64_t k = 0; k < n; k++) {
            if (k == i)
                continue;
            double f = A[k * n + i] / A[i * n + i];
            for (int64_t j = 0; j < n; j++)
                A[k * n + j] -= f * A[i * n + j];
            for (int64_t c = 0; c < out; c++)
                B[k * out + c] -= f * B[i * out + c];
        }
    double loss = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < out; c++) {
            double s = 0;
            for (int64_t i = 0; i < n; i++)
                s += (i < in ? x[r * in + i] : 1.0) * B[i * out + c] / A[i * n + i];
            loss += (s - y[r * out + c]) * (s - y[r * out + c]) / (double)(rows * out);
        }
    free(A);
    free(B);
    return loss;
}

/* On a convex problem (one Linear layer, mean squared error on one fixed batch of 64 rows:
 * least squares), with one micro-batch AdamA is Adam (the same bits); with four micro-batches
 * Adam equals Adam on the whole batch to f32 rounding (1e-5 relative), and after 250 steps at
 * lr 0.01 Adam and AdamA both end within 1e-4 (relative) above the least-squares minimum, and so
 * within 1e-4 of each other, although AdamA's second moment differs (it sums squared shares). */
static void test_dense_adama_close_to_adam_convex(void **state) {
    (void)state;
    static const int32_t w[] = {16, 4};
    saga_mlp_params p = saga_mlp_params_defaults();
    p.widths = w;
    p.batch = 64;
    p.lr = 0.01f;
    p.seed = 3;
    enum { N = 250 };
    static double a1[N], b1[N], a4[N], b4[N];
    fixed_batch = true;
    p.n_micro = 1;
    p.optim = SAGA_DENSE_ADAM;
    train(&p, 0, N, a1);
    p.optim = SAGA_DENSE_ADAMA;
    train(&p, 0, N, b1);
    for (int s = 0; s < N; s++)
        assert_true(a1[s] == b1[s]);
    p.n_micro = 4;
    p.optim = SAGA_DENSE_ADAM;
    train(&p, 0, N, a4);
    p.optim = SAGA_DENSE_ADAMA;
    train(&p, 0, N, b4);
    fixed_batch = false;
    for (int s = 0; s < N; s++)
        assert_true(fabs(a4[s] - a1[s]) <= 1e-5 * a1[s]);
    float x[64 * 16], y[64 * 4];
    make_batch(0, 64, 16, 4, x, y);
    double best = least_squares_min(64, 16, 4, x, y);
    assert_true(a4[N - 1] >= best * (1 - 1e-6) && b4[N - 1] >= best * (1 - 1e-6));
    assert_true(a4[N - 1] <= (1 + 1e-4) * best);
    assert_true(b4[N - 1] <= (1 + 1e-4) * best);
    assert_true(fabs(a4[N - 1] - b4[N - 1]) <= 1e-4 * best);
}

/* A cap below one step of single-column tiles is SAGA_ERR_BUDGET naming the smallest cap that
 * works; that cap works and is respected. */
static void test_dense_budget_too_small(void **state) {
    (void)state;
    saga_mlp_params p = mid_params(SAGA_DENSE_SPLIT_COLS, SAGA_DENSE_ADAM);
    saga_backend *be = open_cpu(20000);
    saga_mlp *m = NULL;
    assert_int_equal(saga_mlp_new(&m, be, &p), SAGA_ERR_BUDGET);
    assert_null(m);
    const char *msg = saga_last_error();
    const char *at = strstr(msg, "smallest cap that works is ");
    assert_non_null(at);
    size_t need = (size_t)strtoull(at + strlen("smallest cap that works is "), NULL, 10);
    assert_true(need > 20000);
    saga_backend_free_all(&be);
    double loss[2], want[2];
    train(&p, 0, 2, want);
    saga_mlp_stats st = train(&p, need, 2, loss).st;
    assert_true(st.streamed);
    assert_true(st.peak_device_bytes <= need);
    for (int s = 0; s < 2; s++)
        assert_true(fabs(loss[s] - want[s]) <= 1e-5 * want[s]);
    /* one byte less is refused */
    be = open_cpu(need - 1);
    assert_int_equal(saga_mlp_new(&m, be, &p), SAGA_ERR_BUDGET);
    saga_backend_free_all(&be);
}

static void test_dense_bad_params(void **state) {
    (void)state;
    saga_backend *be = open_cpu(0);
    saga_mlp *m = NULL;
    saga_mlp_params p = small_params(SAGA_DENSE_ADAM, 3); /* 8 rows in 3 micro-batches */
    assert_int_equal(saga_mlp_new(&m, be, &p), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("micro-batches", NULL);
    p = small_params(SAGA_DENSE_ADAM, 2);
    p.widths = NULL;
    assert_int_equal(saga_mlp_new(&m, be, &p), SAGA_ERR_INVALID_ARG);
    assert_null(m);
    saga_mlp_free(&m);
    saga_backend_free_all(&be);
}

/* Allocation failures while building the network, and while training it streamed, return
 * SAGA_ERR_OUT_OF_MEMORY and leak nothing (AddressSanitizer's leak check runs on this test). */
static void test_dense_alloc_failures(void **state) {
    (void)state;
    saga_mlp_params p = small_params(SAGA_DENSE_ADAM, 2);
    p.max_tile_units = 7;
    saga_backend *be = open_cpu(0);
    saga_mlp *m = NULL;
    for (long k = 1;; k++) {
        saga_test_fail_alloc_after(k);
        saga_status st = saga_mlp_new(&m, be, &p);
        saga_test_fail_alloc_after(0);
        if (st == SAGA_OK)
            break;
        assert_int_equal(st, SAGA_ERR_OUT_OF_MEMORY);
        assert_null(m);
    }
    saga_mlp_free(&m);
    saga_backend_free_all(&be);

    float x[8 * 12], y[8 * 3];
    make_batch(0, 8, 12, 3, x, y);
    for (long k = 1;; k++) {
        be = open_cpu(6000); /* streamed: tiles allocated and freed on the device */
        assert_int_equal(saga_mlp_new(&m, be, &p), SAGA_OK);
        saga_mlp_stats ms;
        saga_mlp_get_stats(m, &ms);
        assert_true(ms.streamed);
        saga_test_fail_alloc_after(k);
        saga_status st = saga_mlp_train_step(m, x, y, NULL);
        saga_test_fail_alloc_after(0);
        saga_mlp_free(&m);
        saga_backend_free_all(&be);
        if (st == SAGA_OK)
            break;
        assert_int_equal(st, SAGA_ERR_OUT_OF_MEMORY);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dense_adam_matches_reference),
        cmocka_unit_test(test_dense_adama_matches_reference),
        cmocka_unit_test(test_dense_streamed_cols_equals_memory),
        cmocka_unit_test(test_dense_streamed_rows_equals_memory),
        cmocka_unit_test(test_dense_in_memory_moves_only_the_batch),
        cmocka_unit_test(test_dense_adama_close_to_adam_convex),
        cmocka_unit_test(test_dense_budget_too_small),
        cmocka_unit_test(test_dense_bad_params),
        cmocka_unit_test(test_dense_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
