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

#include "dense_bounds.h"

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

/* ---- bounds on trainings that add in different orders: dense_bounds.h ---------------------- */

/* The mean of the squared targets of step s's batch (batch 0 with fixed_batch). */
static bool fixed_batch; /* every step trains on batch 0 */

static double mean_sq_targets(const saga_mlp_params *p, int s) {
    int64_t in = p->widths[0], out = p->widths[p->n_layers], n = p->batch * out;
    float *x = malloc((size_t)(p->batch * in) * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    assert_non_null(x);
    assert_non_null(y);
    make_batch(fixed_batch ? 0 : s, p->batch, in, out, x, y);
    double sq = 0;
    for (int64_t i = 0; i < n; i++)
        sq += (double)y[i] * y[i];
    free(x);
    free(y);
    return sq / (double)n;
}

/* The bound on step s's losses (step s runs on the weights after s updates), relative to the
 * loss. An output z carries s steps and a forward pass of relative error, rel: a loss term
 * e^2 = (z - y)^2 moves by 2 |e| rel |z| <= 2 rel |e| (|e| + |y|), which sums to at most
 * 2 rel (loss + sqrt(loss mean(y^2))) (Cauchy-Schwarz); the mean of the e^2 >= 0 adds its own.
 * A loss near its minimum, small against the targets, thus has their rounding, not its own. */
static double loss_bound(const saga_mlp_params *p, const mlp_bounds *b, int s, double loss) {
    const double rel = s * b->step + b->fwd;
    return 2 * rel * (1 + sqrt(mean_sq_targets(p, s) / fabs(loss))) + b->loss;
}

/* Step s's losses of two trainings of p agree within b. */
static void assert_loss_close(const saga_mlp_params *p, const mlp_bounds *b, int s, double got,
                              double want) {
    char what[48];
    snprintf(what, sizeof what, "step %d's loss", s);
    const double bound = loss_bound(p, b, s, want);
    saga_test_assert_close_f64(what, &got, &want, 1, bound, fabs(want));
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
    /* PipeDream-2BW: the gradients are taken at uW, ub (the weights before the last update; the
     * initial ones for the first two steps) and applied to W, b */
    bool stale;
    double *uW[MAX_L], *ub[MAX_L];
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
            const double *Wl = r->stale ? r->uW[l] : r->W[l], *bl = r->stale ? r->ub[l] : r->b[l];
            for (int64_t i = 0; i < mb; i++)
                for (int64_t c = 0; c < o; c++) {
                    double s = bl[c];
                    for (int64_t q = 0; q < in; q++)
                        s += h[l][i * in + q] * Wl[q * o + c];
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
            const double *Wl = r->stale ? r->uW[l] : r->W[l];
            for (int64_t i = 0; i < mb; i++)
                for (int64_t q = 0; q < in; q++) {
                    double s = 0;
                    for (int64_t c = 0; c < o; c++)
                        s += dh[l + 1][i * o + c] * Wl[q * o + c];
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
        if (r->stale) { /* the next step runs on the weights before this update */
            memcpy(r->uW[l], r->W[l], (size_t)nw * sizeof(double));
            memcpy(r->ub[l], r->b[l], (size_t)o * sizeof(double));
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

enum { MAX_S = 4 };

/* A network of p on p->n_stages CPU backends (each with the budget, 0: none), one OpenMP thread
 * each when there are several. */
static saga_mlp *open_net(const saga_mlp_params *p, size_t budget, saga_backend **bes) {
    saga_mlp_params q = *p;
    for (int s = 0; s < p->n_stages; s++) {
        saga_backend_params bp = saga_backend_params_defaults();
        bp.budget_bytes = budget;
        bp.n_threads = p->n_stages > 1 ? 1 : 0;
        assert_int_equal(saga_backend_cpu_new(&bes[s], &bp), SAGA_OK);
    }
    q.stage_backends = p->n_stages > 1 ? bes : NULL;
    saga_mlp *m = NULL;
    saga_status st = saga_mlp_new(&m, bes[0], &q);
    if (st != SAGA_OK)
        print_error("%s\n", saga_last_error());
    assert_int_equal(st, SAGA_OK);
    return m;
}

static void close_net(saga_mlp **m, const saga_mlp_params *p, saga_backend **bes) {
    saga_mlp_free(m);
    assert_null(*m);
    for (int s = 0; s < p->n_stages; s++)
        saga_backend_free_all(&bes[s]);
}

/* The network against the reference for n steps, from the network's initial parameters, given
 * to saga_mlp_train_steps `chunk` steps at a time. */
static void check_against_reference_in(const saga_mlp_params *p, size_t budget, int n, int chunk) {
    saga_backend *bes[MAX_S] = {0};
    saga_mlp *m = open_net(p, budget, bes);
    ref r = {.L = p->n_layers, .stale = p->pipe == SAGA_DENSE_PIPE_2BW};
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
        r.uW[l] = zeros(nw), r.ub[l] = zeros(o);
        memcpy(r.uW[l], r.W[l], (size_t)nw * sizeof(double));
        memcpy(r.ub[l], r.b[l], (size_t)o * sizeof(double));
        free(W);
        free(b);
    }
    int64_t in = p->widths[0], out = p->widths[p->n_layers];
    float *x = malloc((size_t)(n * p->batch * in) * sizeof *x);
    float *y = malloc((size_t)(n * p->batch * out) * sizeof *y);
    const float *xs[N_STEPS], *ys[N_STEPS];
    double got[N_STEPS], want[N_STEPS];
    assert_true(n <= N_STEPS);
    for (int s = 0; s < n; s++) {
        xs[s] = x + (size_t)s * (size_t)(p->batch * in);
        ys[s] = y + (size_t)s * (size_t)(p->batch * out);
        make_batch(s, p->batch, in, out, (float *)xs[s], (float *)ys[s]);
        want[s] = ref_step(&r, p, xs[s], ys[s], s + 1);
    }
    for (int s = 0; s < n; s += chunk) {
        int k = n - s < chunk ? n - s : chunk;
        assert_int_equal(saga_mlp_train_steps(m, k, xs + s, ys + s, got + s), SAGA_OK);
    }
    const mlp_bounds b = mlp_bounds_of(p, true);
    for (int s = 0; s < n; s++)
        assert_loss_close(p, &b, s, got[s], want[s]);
    /* the weights too, after the last update: n steps' error, relative to their mean magnitude */
    for (int l = 0; l < r.L; l++) {
        int64_t nw = r.w[l] * r.w[l + 1];
        float *W = malloc((size_t)nw * sizeof *W);
        double *Wd = malloc((size_t)nw * sizeof *Wd), mean = 0;
        assert_int_equal(saga_mlp_get_layer(m, l, W, NULL), SAGA_OK);
        for (int64_t i = 0; i < nw; i++) {
            Wd[i] = W[i];
            mean += fabs(r.W[l][i]) / (double)nw;
        }
        char what[32];
        snprintf(what, sizeof what, "layer %d's weights", l);
        saga_test_assert_close_f64(what, Wd, r.W[l], nw, n * b.step, mean);
        free(W);
        free(Wd);
        free(r.W[l]), free(r.b[l]), free(r.gW[l]), free(r.mW[l]), free(r.vW[l]);
        free(r.gb[l]), free(r.mb[l]), free(r.vb[l]), free(r.uW[l]), free(r.ub[l]);
    }
    free(x);
    free(y);
    close_net(&m, p, bes);
}

static void check_against_reference(const saga_mlp_params *p, size_t budget, int n) {
    check_against_reference_in(p, budget, n, 1);
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
    const mlp_bounds b = mlp_bounds_of(&p, false);
    for (int s = 0; s < N_STEPS; s++)
        assert_loss_close(&p, &b, s, str[s], mem[s]);
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
 * Adam equals Adam on the whole batch to f32 rounding (mlp_bounds_of), and after 250 steps at
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
    const mlp_bounds b = mlp_bounds_of(&p, false);
    for (int s = 0; s < N; s++) /* (the bounds read batch 0's targets: fixed_batch still set) */
        assert_loss_close(&p, &b, s, a4[s], a1[s]);
    float x[64 * 16], y[64 * 4];
    make_batch(0, 64, 16, 4, x, y);
    double best = least_squares_min(64, 16, 4, x, y);
    /* not below the minimum by more than the f32 evaluation of a loss (one forward pass and the
     * mean, against exact arithmetic) may err */
    const mlp_bounds e = mlp_bounds_of(&p, true);
    const double below = best * (1 - loss_bound(&p, &e, 0, best));
    fixed_batch = false;
    assert_true(a4[N - 1] >= below && b4[N - 1] >= below);
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
    const mlp_bounds b = mlp_bounds_of(&p, false);
    for (int s = 0; s < 2; s++)
        assert_loss_close(&p, &b, s, loss[s], want[s]);
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

    /* a pipeline of three stages: its boundaries, threads' state and stages fail alike */
    saga_backend *bes[3];
    for (int s = 0; s < 3; s++)
        bes[s] = open_cpu(0);
    saga_mlp_params q = p;
    q.n_stages = 3;
    q.stage_backends = bes;
    for (long k = 1;; k++) {
        saga_test_fail_alloc_after(k);
        saga_status st = saga_mlp_new(&m, NULL, &q);
        saga_test_fail_alloc_after(0);
        if (st == SAGA_OK)
            break;
        assert_int_equal(st, SAGA_ERR_OUT_OF_MEMORY);
        assert_null(m);
    }
    saga_mlp_free(&m);
    for (int s = 0; s < 3; s++)
        saga_backend_free_all(&bes[s]);

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

/* ---- pipelines ---------------------------------------------------------------------------- */

/* Four layers, so that pipelines of 2, 3 and 4 stages can be cut. */
static const int32_t pipe_widths[] = {48, 64, 80, 72, 10};

static saga_mlp_params pipe_params(int n_stages, saga_dense_pipe pipe) {
    saga_mlp_params p = saga_mlp_params_defaults();
    p.n_layers = 4;
    p.widths = pipe_widths;
    p.batch = 32;
    p.n_micro = 4;
    p.lr = 3e-3f;
    p.seed = 17;
    p.n_stages = n_stages;
    p.pipe = pipe;
    return p;
}

typedef struct pipe_run {
    double loss[N_STEPS];
    float *W[MAX_L]; /* the final weights */
    saga_mlp_stats st;
    size_t stage_peak[MAX_S];
    char desc[512];
} pipe_run;

/* Trains p for n steps (given `chunk` at a time) with each stage's backend capped at budget. */
static void pipe_train(const saga_mlp_params *p, size_t budget, int n, int chunk, pipe_run *out) {
    saga_backend *bes[MAX_S] = {0};
    saga_mlp *m = open_net(p, budget, bes);
    snprintf(out->desc, sizeof out->desc, "%s", saga_mlp_describe(m));
    int64_t in = p->widths[0], o = p->widths[p->n_layers];
    float *x = malloc((size_t)(n * p->batch * in) * sizeof *x);
    float *y = malloc((size_t)(n * p->batch * o) * sizeof *y);
    assert_non_null(x);
    assert_non_null(y);
    const float *xs[N_STEPS], *ys[N_STEPS];
    for (int s = 0; s < n; s++) {
        xs[s] = x + (size_t)s * (size_t)(p->batch * in);
        ys[s] = y + (size_t)s * (size_t)(p->batch * o);
        make_batch(s, p->batch, in, o, (float *)xs[s], (float *)ys[s]);
    }
    for (int s = 0; s < n; s += chunk) {
        int k = n - s < chunk ? n - s : chunk;
        assert_int_equal(saga_mlp_train_steps(m, k, xs + s, ys + s, out->loss + s), SAGA_OK);
        saga_mlp_stats st;
        saga_mlp_get_stats(m, &st);
        assert_int_equal(st.n_stages, p->n_stages);
        for (int q = 0; q < p->n_stages; q++) {
            out->stage_peak[q] = st.stage_peak_bytes[q] > out->stage_peak[q]
                                     ? st.stage_peak_bytes[q]
                                     : out->stage_peak[q];
            if (budget)
                assert_true(st.stage_peak_bytes[q] <= budget);
        }
    }
    saga_mlp_get_stats(m, &out->st);
    out->st.tiles = out->st.tile_units = NULL;
    out->st.tile_bytes = NULL;
    out->st.stage_layers = NULL;
    out->st.stage_peak_bytes = NULL;
    out->st.stage_idle_seconds = NULL;
    out->st.stage_h2d_bytes = NULL;
    for (int l = 0; l < p->n_layers; l++) {
        size_t nw = (size_t)p->widths[l] * (size_t)p->widths[l + 1];
        out->W[l] = malloc(nw * sizeof(float));
        assert_non_null(out->W[l]);
        assert_int_equal(saga_mlp_get_layer(m, l, out->W[l], NULL), SAGA_OK);
    }
    free(x);
    free(y);
    close_net(&m, p, bes);
}

static void pipe_run_free(pipe_run *r, int n_layers) {
    for (int l = 0; l < n_layers; l++)
        free(r->W[l]);
}

/* Two trainings of p, for n steps, that add in different orders: losses within mlp_bounds_of
 * step by step, final weights within n steps' bound relative to their mean magnitude. */
static void assert_same_training(const pipe_run *a, const pipe_run *b, const saga_mlp_params *p,
                                 int n) {
    const mlp_bounds mb = mlp_bounds_of(p, false);
    for (int s = 0; s < n; s++)
        assert_loss_close(p, &mb, s, a->loss[s], b->loss[s]);
    for (int l = 0; l < p->n_layers; l++) {
        int64_t nw = (int64_t)p->widths[l] * p->widths[l + 1];
        char what[32];
        snprintf(what, sizeof what, "layer %d's weights", l);
        saga_test_assert_close_f32(what, a->W[l], b->W[l], nw, n * mb.step,
                                   saga_test_mean_abs_f32(b->W[l], nw));
    }
}

/* A synchronous pipeline equals one stage running the same micro-batches in order: over 2, 3
 * and 4 stages, in memory and with every stage streamed under a cap of a quarter of an even
 * share of the footprint (peak per device within the cap), column and row tiles, Adam and AdamA,
 * balanced and explicit stage boundaries; 20 steps, losses and final weights within the bounds
 * of two orders (mlp_bounds_of). */
static void check_sync_pipeline(saga_dense_split split, saga_dense_optim optim) {
    saga_mlp_params p = pipe_params(1, SAGA_DENSE_PIPE_SYNC);
    p.split = split;
    p.optim = optim;
    static pipe_run seq, pipe;
    memset(&seq, 0, sizeof seq);
    pipe_train(&p, 0, N_STEPS, 1, &seq);
    assert_false(seq.st.streamed);
    assert_true(seq.loss[N_STEPS - 1] < seq.loss[0]);
    for (int S = 2; S <= 4; S++) {
        for (int streamed = 0; streamed <= 1; streamed++) {
            saga_mlp_params q = pipe_params(S, SAGA_DENSE_PIPE_SYNC);
            q.split = split;
            q.optim = optim;
            static const int32_t uneven[] = {0, 1, 4};
            if (S == 2 && streamed)
                q.stage_layers = uneven;
            size_t budget = streamed ? seq.st.footprint_bytes / (4 * (size_t)S) : 0;
            memset(&pipe, 0, sizeof pipe);
            pipe_train(&q, budget, N_STEPS, 5, &pipe);
            assert_int_equal(pipe.st.streamed, streamed);
            assert_non_null(strstr(pipe.desc, "stages ("));
            assert_same_training(&pipe, &seq, &p, N_STEPS);
            if (streamed)
                for (int s = 0; s < S; s++)
                    assert_true(pipe.stage_peak[s] > 0 && pipe.stage_peak[s] <= budget);
            pipe_run_free(&pipe, 4);
        }
    }
    pipe_run_free(&seq, 4);
}

static void test_dense_sync_pipeline_equals_sequential(void **state) {
    (void)state;
    check_sync_pipeline(SAGA_DENSE_SPLIT_COLS, SAGA_DENSE_ADAM);
    check_sync_pipeline(SAGA_DENSE_SPLIT_ROWS, SAGA_DENSE_ADAMA);
    /* fewer micro-batches than stages: each stage waits for the one micro-batch in turn */
    static pipe_run one, three;
    memset(&one, 0, sizeof one);
    memset(&three, 0, sizeof three);
    saga_mlp_params p = pipe_params(1, SAGA_DENSE_PIPE_SYNC);
    p.n_micro = 1;
    pipe_train(&p, 0, 5, 1, &one);
    p.n_stages = 3;
    pipe_train(&p, 0, 5, 5, &three);
    assert_same_training(&three, &one, &p, 5);
    pipe_run_free(&one, 4);
    pipe_run_free(&three, 4);
}

/* PipeDream-2BW trains on weights one step stale: step b's gradients are taken at the weights
 * before the previous update and applied to the newest. A double-precision reference with that
 * rule agrees (mlp_bounds_of) with one stage and with three, given all steps in one call and in
 * chunks (flushing in between changes the timing, not the result). The rule matters: from the
 * second step on (which still runs on the initial weights) the losses differ from synchronous
 * training. */
static void test_dense_2bw_matches_stale_reference(void **state) {
    (void)state;
    saga_mlp_params p = small_params(SAGA_DENSE_ADAM, 2);
    p.pipe = SAGA_DENSE_PIPE_2BW;
    check_against_reference_in(&p, 0, 8, 8);
    p.n_stages = 3;
    check_against_reference_in(&p, 0, 8, 8);
    check_against_reference_in(&p, 0, 8, 3);
    p.optim = SAGA_DENSE_ADAMA;
    p.split = SAGA_DENSE_SPLIT_ROWS;
    p.max_tile_units = 5;
    check_against_reference_in(&p, 0, 8, 8);

    static pipe_run sync, bw;
    memset(&sync, 0, sizeof sync);
    memset(&bw, 0, sizeof bw);
    saga_mlp_params q = pipe_params(2, SAGA_DENSE_PIPE_SYNC);
    pipe_train(&q, 0, 6, 6, &sync);
    q.pipe = SAGA_DENSE_PIPE_2BW;
    pipe_train(&q, 0, 6, 6, &bw);
    assert_non_null(strstr(bw.desc, "2BW"));
    assert_true(bw.loss[0] == sync.loss[0]);
    /* by more than two orders of one training may differ */
    const mlp_bounds b = mlp_bounds_of(&q, false);
    for (int s = 1; s < 6; s++)
        assert_true(fabs(bw.loss[s] - sync.loss[s]) >
                    loss_bound(&q, &b, s, sync.loss[s]) * sync.loss[s]);
    pipe_run_free(&sync, 4);
    pipe_run_free(&bw, 4);
}

/* 2BW with both weight versions streamed under a cap gives the in-memory 2BW training. */
static void test_dense_2bw_streamed_equals_memory(void **state) {
    (void)state;
    static pipe_run mem, str;
    memset(&mem, 0, sizeof mem);
    memset(&str, 0, sizeof str);
    saga_mlp_params p = pipe_params(3, SAGA_DENSE_PIPE_2BW);
    pipe_train(&p, 0, N_STEPS, 10, &mem);
    assert_false(mem.st.streamed);
    size_t budget = mem.st.footprint_bytes / 24;
    pipe_train(&p, budget, N_STEPS, 10, &str);
    assert_true(str.st.streamed);
    assert_same_training(&str, &mem, &p, N_STEPS);
    assert_true(mem.loss[N_STEPS - 1] < mem.loss[0]);
    pipe_run_free(&mem, 4);
    pipe_run_free(&str, 4);
}

static void test_dense_pipeline_bad_params(void **state) {
    (void)state;
    saga_backend *bes[MAX_S] = {0};
    for (int s = 0; s < 3; s++)
        bes[s] = open_cpu(0);
    saga_mlp *m = NULL;
    saga_mlp_params p = pipe_params(3, SAGA_DENSE_PIPE_SYNC);
    assert_int_equal(saga_mlp_new(&m, bes[0], &p), SAGA_ERR_INVALID_ARG); /* no stage backends */
    saga_test_assert_error_contains("stage_backends", NULL);
    saga_backend *shared[3] = {bes[0], bes[1], bes[0]};
    p.stage_backends = shared;
    assert_int_equal(saga_mlp_new(&m, bes[0], &p), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("share a backend", NULL);
    p.stage_backends = bes;
    p.n_stages = 5; /* more stages than layers */
    assert_int_equal(saga_mlp_new(&m, bes[0], &p), SAGA_ERR_INVALID_ARG);
    p.n_stages = 3;
    static const int32_t empty[] = {0, 2, 2, 4};
    p.stage_layers = empty;
    assert_int_equal(saga_mlp_new(&m, bes[0], &p), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("no layer", NULL);
    p.stage_layers = NULL;
    p.pipe = SAGA_DENSE_PIPE_2BW;
    p.n_micro = 1; /* 2BW over 3 stages needs 2 */
    assert_int_equal(saga_mlp_new(&m, bes[0], &p), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("at least 2 micro-batches", NULL);
    assert_null(m);
    /* the balanced split of 48-64-80-72-10 in 3 stages (3136, 5200, 5832 and 730 parameters):
     * the last two layers together */
    p.pipe = SAGA_DENSE_PIPE_SYNC;
    p.n_micro = 4;
    assert_int_equal(saga_mlp_new(&m, NULL, &p), SAGA_OK);
    saga_mlp_stats st;
    saga_mlp_get_stats(m, &st);
    assert_int_equal(st.stage_layers[0], 0);
    assert_int_equal(st.stage_layers[1], 1);
    assert_int_equal(st.stage_layers[2], 2);
    assert_int_equal(st.stage_layers[3], 4);
    saga_mlp_free(&m);
    for (int s = 0; s < 3; s++)
        saga_backend_free_all(&bes[s]);
}

/* A stage that fails while the others wait on it: every thread ends, the error names the stage
 * and its cause, and the network can still be freed. */
static void test_dense_pipeline_stage_failure(void **state) {
    (void)state;
    saga_mlp_params p = pipe_params(3, SAGA_DENSE_PIPE_SYNC);
    saga_backend *bes[MAX_S] = {0};
    saga_mlp *m = open_net(&p, 1u << 20, bes);
    /* another user takes nearly all of stage 1's device */
    void *hog = NULL;
    assert_int_equal(saga_backend_alloc(bes[1], &hog, (1u << 20) - 4096), SAGA_OK);
    float *x = calloc((size_t)(p.batch * pipe_widths[0]), sizeof *x);
    float *y = calloc((size_t)(p.batch * pipe_widths[4]), sizeof *y);
    assert_int_equal(saga_mlp_train_step(m, x, y, NULL), SAGA_ERR_BUDGET);
    saga_test_assert_error_contains("stage 1 (cpu)", NULL);
    saga_backend_free(bes[1], hog, (1u << 20) - 4096);
    free(x);
    free(y);
    close_net(&m, &p, bes);
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
        cmocka_unit_test(test_dense_sync_pipeline_equals_sequential),
        cmocka_unit_test(test_dense_2bw_matches_stale_reference),
        cmocka_unit_test(test_dense_2bw_streamed_equals_memory),
        cmocka_unit_test(test_dense_pipeline_bad_params),
        cmocka_unit_test(test_dense_pipeline_stage_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
