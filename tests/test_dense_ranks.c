/* test_dense_ranks.c - pipelines of the tiled MLP with one stage per rank (saga_mlp_params.comm):
 * run by ctest alone and under mpiexec with 2 and 4 ranks. Every rank trains the network once
 * over the ranks and once by itself and checks that losses and final weights agree within the
 * bounds of two orders of the same training (mlp_bounds_of): the synchronous pipeline against
 * sequential training, PipeDream-2BW against 2BW in one process, in memory and with every stage
 * streamed under a small cap, with column and row tiles, Adam and AdamA, fewer micro-batches than
 * stages, and 2BW calls long enough to reuse the ring buffers. The statistics reach every rank; a
 * stage that fails in the middle of a step fails the call on every rank with its message, and the
 * next call trains again; a stage count other than the ranks' is refused. Alone, the one-rank
 * communicator must leave the pipeline in one process as it is. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"

#include "dense_bounds.h"

#include "saga_comm.h"
#include "saga_dense.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static saga_comm *comm;

static int rk(void) {
    return saga_comm_rank(comm);
}
static int np(void) {
    return saga_comm_size(comm);
}

enum { L = 4, MAX_S = 4, N_STEPS = 8 };

/* Four layers, so that pipelines of 2 to 4 stages can be cut. */
static const int32_t widths[L + 1] = {48, 64, 80, 72, 10};

static saga_mlp_params params(saga_dense_pipe pipe) {
    saga_mlp_params p = saga_mlp_params_defaults();
    p.n_layers = L;
    p.widths = widths;
    p.batch = 32;
    p.n_micro = 4;
    p.lr = 3e-3f;
    p.seed = 23;
    p.pipe = pipe;
    return p;
}

/* A deterministic batch per step: x uniform in [-1, 1), targets a smooth function of x. */
static void make_batch(int step, int64_t rows, float *x, float *y) {
    int64_t in = widths[0], out = widths[L];
    uint64_t st = 0x9e37u + (uint64_t)step * 104729u;
    for (int64_t i = 0; i < rows * in; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(st >> 40) * 0x1p-23 - 1.0);
    }
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < out; c++) {
            double s = 0;
            for (int64_t i = 0; i < in; i++)
                s += x[r * in + i] * cos((double)(c + 2) * (double)(i + 1));
            y[r * out + c] = (float)tanh(s / sqrt((double)in));
        }
}

/* ---- bounds on trainings that add in different orders: dense_bounds.h ---------------------- */

/* The bound on step s's losses (step s runs on the weights after s updates), relative to the
 * loss. An output z carries s steps and a forward pass of relative error, rel: a loss term
 * e^2 = (z - y)^2 moves by 2 |e| rel |z| <= 2 rel |e| (|e| + |y|), which sums to at most
 * 2 rel (loss + sqrt(loss mean(y^2))) (Cauchy-Schwarz); the mean of the e^2 >= 0 adds its own. */
static double loss_bound(const saga_mlp_params *p, const mlp_bounds *b, int s, double loss) {
    int64_t n = p->batch * widths[L];
    float *x = malloc((size_t)(p->batch * widths[0]) * sizeof *x),
          *y = malloc((size_t)n * sizeof *y);
    assert_non_null(x);
    assert_non_null(y);
    make_batch(s, p->batch, x, y);
    double sq = 0;
    for (int64_t i = 0; i < n; i++)
        sq += (double)y[i] * y[i] / (double)n;
    free(x);
    free(y);
    return 2 * (s * b->step + b->fwd) * (1 + sqrt(sq / fabs(loss))) + b->loss;
}

typedef struct run {
    double loss[N_STEPS];
    float *W[L], *b[L]; /* after the last step */
    saga_mlp_stats st;
    size_t stage_peak[MAX_S];
    char desc[512];
} run;

static saga_backend *open_cpu(size_t budget) {
    saga_backend_params bp = saga_backend_params_defaults();
    bp.budget_bytes = budget;
    bp.n_threads = 1; /* the ranks share two cores in CI */
    saga_backend *be = NULL;
    assert_int_equal(saga_backend_cpu_new(&be, &bp), SAGA_OK);
    return be;
}

/* Trains p for n steps, `chunk` steps per call: over the ranks of p->comm (each rank's stage on
 * a CPU backend of its own), or in this process on p->n_stages CPU backends, each capped at
 * budget (0: none). */
static void train(const saga_mlp_params *p, size_t budget, int n, int chunk, run *out) {
    memset(out, 0, sizeof *out);
    bool ranks = saga_comm_size(p->comm) > 1;
    int n_be = ranks ? 1 : p->n_stages;
    saga_backend *bes[MAX_S] = {0};
    for (int q = 0; q < n_be; q++)
        bes[q] = open_cpu(budget);
    saga_mlp_params q = *p;
    q.stage_backends = !ranks && p->n_stages > 1 ? bes : NULL;
    saga_mlp *m = NULL;
    if (saga_mlp_new(&m, bes[0], &q) != SAGA_OK)
        fail_msg("saga_mlp_new: %s", saga_last_error());
    snprintf(out->desc, sizeof out->desc, "%s", saga_mlp_describe(m));
    int64_t in = widths[0], o = widths[L];
    float *x = malloc((size_t)(n * p->batch * in) * sizeof *x);
    float *y = malloc((size_t)(n * p->batch * o) * sizeof *y);
    assert_non_null(x);
    assert_non_null(y);
    const float *xs[N_STEPS], *ys[N_STEPS];
    assert_true(n <= N_STEPS);
    for (int s = 0; s < n; s++) {
        xs[s] = x + (size_t)s * (size_t)(p->batch * in);
        ys[s] = y + (size_t)s * (size_t)(p->batch * o);
        make_batch(s, p->batch, (float *)xs[s], (float *)ys[s]);
    }
    for (int s = 0; s < n; s += chunk) {
        int k = n - s < chunk ? n - s : chunk;
        if (saga_mlp_train_steps(m, k, xs + s, ys + s, out->loss + s) != SAGA_OK)
            fail_msg("steps %d-%d: %s", s, s + k - 1, saga_last_error());
        saga_mlp_stats st;
        saga_mlp_get_stats(m, &st);
        assert_int_equal(st.n_stages, p->n_stages);
        for (int r = 0; r < p->n_stages; r++)
            if (st.stage_peak_bytes[r] > out->stage_peak[r])
                out->stage_peak[r] = st.stage_peak_bytes[r];
    }
    saga_mlp_get_stats(m, &out->st);
    out->st.tiles = out->st.tile_units = NULL;
    out->st.tile_bytes = NULL;
    out->st.stage_layers = NULL;
    out->st.stage_peak_bytes = NULL;
    out->st.stage_idle_seconds = NULL;
    out->st.stage_h2d_bytes = NULL;
    for (int l = 0; l < L; l++) {
        out->W[l] = malloc((size_t)widths[l] * (size_t)widths[l + 1] * sizeof(float));
        out->b[l] = malloc((size_t)widths[l + 1] * sizeof(float));
        assert_non_null(out->W[l]);
        assert_non_null(out->b[l]);
        /* collective across ranks: each layer comes from its stage's rank */
        assert_int_equal(saga_mlp_get_layer(m, l, out->W[l], out->b[l]), SAGA_OK);
    }
    free(x);
    free(y);
    saga_mlp_free(&m);
    assert_null(m);
    for (int r = 0; r < n_be; r++)
        saga_backend_free_all(&bes[r]);
}

static void run_free(run *r) {
    for (int l = 0; l < L; l++) {
        free(r->W[l]);
        free(r->b[l]);
    }
}

/* Two trainings of p for n steps: losses within loss_bound step by step, final weights and
 * biases within n steps' bound relative to their mean magnitude; exact: the same bits. */
static void assert_same(const run *a, const run *want, const saga_mlp_params *p, int n,
                        bool exact) {
    const mlp_bounds b = mlp_bounds_of(p, false);
    char what[64];
    for (int s = 0; s < n; s++) {
        snprintf(what, sizeof what, "rank %d, step %d's loss", rk(), s);
        const double bound = exact ? 0 : loss_bound(p, &b, s, want->loss[s]);
        saga_test_assert_close_f64(what, &a->loss[s], &want->loss[s], 1, bound,
                                   fabs(want->loss[s]));
    }
    const double bound = exact ? 0 : n * b.step;
    for (int l = 0; l < L; l++) {
        int64_t nw = (int64_t)widths[l] * widths[l + 1], o = widths[l + 1];
        snprintf(what, sizeof what, "rank %d, layer %d's weights", rk(), l);
        saga_test_assert_close_f32(what, a->W[l], want->W[l], nw, bound,
                                   saga_test_mean_abs_f32(want->W[l], nw));
        snprintf(what, sizeof what, "rank %d, layer %d's biases", rk(), l);
        saga_test_assert_close_f32(what, a->b[l], want->b[l], o, bound,
                                   saga_test_mean_abs_f32(want->b[l], o));
    }
}

/* What a run over the ranks reports: the plan and every stage's figures on every rank. */
static void check_rank_stats(const run *r, size_t budget) {
    int p = np();
    assert_int_equal(r->st.ranks, p);
    assert_int_equal(r->st.n_stages, p);
    assert_true(r->st.sent_bytes > 0);
    assert_non_null(strstr(r->desc, "ranks ("));
    for (int q = 0; q < p; q++) {
        assert_true(r->stage_peak[q] > 0); /* gathered from stage q's rank */
        if (budget)
            assert_true(r->stage_peak[q] <= budget);
    }
    assert_int_equal(r->st.streamed, budget != 0);
    /* every rank holds the same figures */
    int64_t v[3] = {(int64_t)r->st.sent_bytes, (int64_t)r->st.footprint_bytes,
                    (int64_t)r->st.steps_per_batch};
    int64_t lo[3], hi[3];
    memcpy(lo, v, sizeof v);
    memcpy(hi, v, sizeof v);
    assert_int_equal(saga_comm_allreduce(comm, lo, 3, SAGA_I64, SAGA_COMM_MIN, NULL), SAGA_OK);
    assert_int_equal(saga_comm_allreduce(comm, hi, 3, SAGA_I64, SAGA_COMM_MAX, NULL), SAGA_OK);
    assert_memory_equal(lo, hi, sizeof lo);
}

/* Over the ranks (with more than one) against the reference in one process, in memory and
 * streamed. */
static void check(const saga_mlp_params *p, const run *want, int n, int chunk) {
    int P = np();
    static run all;
    for (int streamed = 0; streamed <= 1; streamed++) {
        saga_mlp_params q = *p;
        q.n_stages = P;
        q.comm = comm;
        size_t budget = streamed ? want->st.footprint_bytes / (4 * (size_t)P) : 0;
        train(&q, budget, n, chunk, &all);
        check_rank_stats(&all, budget);
        assert_same(&all, want, p, n, false);
        run_free(&all);
    }
}

/* The synchronous pipeline over the ranks equals sequential training in one process. */
static void check_sync(saga_dense_split split, saga_dense_optim optim, int32_t n_micro) {
    saga_mlp_params p = params(SAGA_DENSE_PIPE_SYNC);
    p.split = split;
    p.optim = optim;
    p.n_micro = n_micro;
    p.batch = 8 * n_micro;
    static run seq;
    train(&p, 0, N_STEPS, 1, &seq);
    assert_true(seq.loss[N_STEPS - 1] < seq.loss[0]);
    if (np() > 1)
        check(&p, &seq, N_STEPS, 3);
    run_free(&seq);
}

static void test_dense_ranks_sync_cols_adam(void **state) {
    (void)state;
    check_sync(SAGA_DENSE_SPLIT_COLS, SAGA_DENSE_ADAM, 4);
}

static void test_dense_ranks_sync_rows_adama(void **state) {
    (void)state;
    check_sync(SAGA_DENSE_SPLIT_ROWS, SAGA_DENSE_ADAMA, 4);
}

/* One micro-batch per step: each stage waits for it in turn. */
static void test_dense_ranks_sync_one_micro_batch(void **state) {
    (void)state;
    check_sync(SAGA_DENSE_SPLIT_COLS, SAGA_DENSE_ADAM, 1);
}

/* PipeDream-2BW over the ranks equals 2BW in one process (whose result does not depend on the
 * number of stages): all steps in one call, which goes around the ring of micro-batch slots
 * several times, and in chunks; with the fewest micro-batches 2BW allows. */
static void test_dense_ranks_2bw(void **state) {
    (void)state;
    int P = np();
    saga_mlp_params p = params(SAGA_DENSE_PIPE_2BW);
    static run one;
    train(&p, 0, N_STEPS, N_STEPS, &one);
    assert_non_null(strstr(one.desc, "2BW"));
    if (P > 1) {
        check(&p, &one, N_STEPS, N_STEPS);
        check(&p, &one, N_STEPS, 3);
    }
    run_free(&one);
    p.n_micro = P > 1 ? P - 1 : 1;
    p.batch = 8 * p.n_micro;
    p.split = SAGA_DENSE_SPLIT_ROWS;
    p.optim = SAGA_DENSE_ADAMA;
    train(&p, 0, N_STEPS, N_STEPS, &one);
    if (P > 1)
        check(&p, &one, N_STEPS, N_STEPS);
    run_free(&one);
}

/* Alone (a one-rank communicator) nothing changes: the pipeline in one process gives the same
 * bits with the communicator and without. Over several ranks, a stage count other than the
 * ranks' is refused on every rank. */
static void test_dense_ranks_params(void **state) {
    (void)state;
    int P = np();
    saga_mlp_params p = params(SAGA_DENSE_PIPE_SYNC);
    if (P == 1) {
        static run plain, with;
        p.n_stages = 2;
        train(&p, 0, 4, 2, &plain);
        p.comm = comm;
        train(&p, 0, 4, 2, &with);
        assert_int_equal(with.st.ranks, 1);
        assert_int_equal(with.st.sent_bytes, 0);
        assert_null(strstr(with.desc, "ranks"));
        assert_same(&with, &plain, &p, 4, true);
        run_free(&plain);
        run_free(&with);
        return;
    }
    saga_backend *be = open_cpu(0);
    saga_mlp *m = NULL;
    p.comm = comm;
    p.n_stages = P == 2 ? 3 : 2;
    assert_int_equal(saga_mlp_new(&m, be, &p), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("stages over", "ranks", NULL);
    assert_null(m);
    p.n_stages = P;
    assert_int_equal(saga_mlp_new(&m, NULL, &p), SAGA_ERR_INVALID_ARG); /* no backend */
    /* a failure on one rank only reaches the others, with its rank */
    static const int32_t bad[] = {48, 64, 80, 72, 10};
    int32_t mine[L + 1];
    memcpy(mine, bad, sizeof mine);
    if (rk() == 1)
        mine[2] = 0;
    p.widths = mine;
    saga_status st = saga_mlp_new(&m, be, &p);
    assert_int_equal(st, SAGA_ERR_INVALID_ARG);
    if (rk() != 1)
        saga_test_assert_error_contains("rank 1: ", "widths[2]", NULL);
    assert_null(m);
    p.widths = widths;
    assert_int_equal(saga_mlp_new(&m, be, &p), SAGA_OK);
    saga_mlp_free(&m);
    saga_backend_free_all(&be);
}

/* A stage that fails in the middle of a step (another user took its device) fails the call on
 * every rank, with the stage named; with the room back the next call trains on every rank. */
static void test_dense_ranks_stage_failure(void **state) {
    (void)state;
    int P = np();
    if (P == 1)
        return; /* the one-process case is test_dense's */
    saga_mlp_params p = params(P == 2 ? SAGA_DENSE_PIPE_SYNC : SAGA_DENSE_PIPE_2BW);
    p.n_stages = P;
    p.comm = comm;
    saga_backend *be = open_cpu(1u << 20);
    saga_mlp *m = NULL;
    assert_int_equal(saga_mlp_new(&m, be, &p), SAGA_OK);
    void *hog = NULL;
    if (rk() == 1)
        assert_int_equal(saga_backend_alloc(be, &hog, (1u << 20) - 4096), SAGA_OK);
    enum { STEPS = 3 };
    float *x = calloc((size_t)(STEPS * p.batch * widths[0]), sizeof *x);
    float *y = calloc((size_t)(STEPS * p.batch * widths[L]), sizeof *y);
    const float *xs[STEPS], *ys[STEPS];
    for (int s = 0; s < STEPS; s++) {
        xs[s] = x + s * p.batch * widths[0];
        ys[s] = y + s * p.batch * widths[L];
        make_batch(s, p.batch, (float *)xs[s], (float *)ys[s]);
    }
    double loss[STEPS];
    assert_int_equal(saga_mlp_train_steps(m, STEPS, xs, ys, loss), SAGA_ERR_BUDGET);
    saga_test_assert_error_contains("stage 1 (cpu)", NULL);
    if (rk() != 1)
        saga_test_assert_error_contains("rank 1: ", NULL);
    if (hog)
        saga_backend_free(be, hog, (1u << 20) - 4096);
    assert_int_equal(saga_mlp_train_steps(m, STEPS, xs, ys, loss), SAGA_OK);
    for (int s = 0; s < STEPS; s++)
        assert_true(isfinite(loss[s]));
    /* every rank returns the last stage's losses */
    double lo = loss[STEPS - 1], hi = lo;
    assert_int_equal(saga_comm_allreduce(comm, &lo, 1, SAGA_F64, SAGA_COMM_MIN, NULL), SAGA_OK);
    assert_int_equal(saga_comm_allreduce(comm, &hi, 1, SAGA_F64, SAGA_COMM_MAX, NULL), SAGA_OK);
    assert_true(lo == hi);
    free(x);
    free(y);
    saga_mlp_free(&m);
    saga_backend_free_all(&be);
}

int main(void) {
    if (saga_comm_open(&comm, "auto") < 0) {
        fprintf(stderr, "test_dense_ranks: %s\n", saga_last_error());
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dense_ranks_params),
        cmocka_unit_test(test_dense_ranks_sync_cols_adam),
        cmocka_unit_test(test_dense_ranks_sync_rows_adama),
        cmocka_unit_test(test_dense_ranks_sync_one_micro_batch),
        cmocka_unit_test(test_dense_ranks_2bw),
        cmocka_unit_test(test_dense_ranks_stage_failure),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    int32_t any = failed;
    if (saga_comm_allreduce(comm, &any, 1, SAGA_I32, SAGA_COMM_MAX, NULL) < 0)
        any = 1;
    saga_comm_free(&comm);
    return any ? 1 : 0;
}
