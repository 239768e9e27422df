/* test_net_ranks.c - the graph executor over several ranks (saga_net_opts.comm): run by ctest
 * alone and under mpiexec with 2 and 4 ranks, every rank trains the same models once over the
 * ranks and once by itself, and checks that the losses of every step and the outputs after
 * training agree within the bounds of net_run_bounds (GCN with fused programs, a GAT-like batched
 * program with edge softmax and dropout on rows and edges, in memory and streamed on each rank
 * under a small budget, METIS, random and contiguous parts; with loss rows, which alone the loss
 * sees), and PageRank within
 * saga_test_pagerank_bound. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"

#include "net_models.h"
#include "saga_comm.h"
#include "saga_shards.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static saga_comm *comm;
static bool on_cuda; /* SAGA_TEST_DEVICE=cuda: the CUDA backend (cuda:LOCAL_RANK), in memory */

/* A fresh backend of the device under test with the given budget. */
static saga_backend *backend(size_t budget) {
    saga_backend_params bp = saga_backend_params_defaults();
    bp.budget_bytes = budget;
    saga_backend *be = NULL;
    saga_status st = on_cuda ? saga_backend_cuda_new(&be, saga_comm_local_rank(comm), &bp)
                             : saga_backend_cpu_new(&be, &bp);
    if (st != SAGA_OK)
        fail_msg("backend: %s", saga_last_error());
    return be;
}

static net_data D;
static saga_program GAT;

static void data_load(void) {
    net_data_load(&D, 2000, 5, 32, 8, 5);
    GAT = gat_program(3000);
}

enum { STEPS = 3, H = 8 }; /* training steps, hidden width */

typedef struct run_out {
    double loss[STEPS];
    float *out;
    saga_net_stats st;
} run_out;

/* When >= 0, run_model's layers drop with this probability instead of the model's 0.3. */
static float DROPOUT = -1;

/* The two-layer model of width H (net_model_params) on a fresh backend of the device under test
 * (budget: 0 none), trained by SGD at lr 0.5; dropout < 0 keeps the model's, else replaces it. */
typedef struct trainer {
    saga_backend *be;
    saga_ctx *c;
    saga_model *m;
    saga_optim *opt;
    layer l1, l2;
} trainer;

static void trainer_open(trainer *t, size_t budget, float dropout) {
    memset(t, 0, sizeof *t);
    t->be = backend(budget);
    assert_int_equal(saga_ctx_new(&t->c, t->be, 3), SAGA_OK);
    assert_int_equal(saga_model_new(&t->m, t->be), SAGA_OK);
    net_model_params(t->m, &D, H, &t->l1, &t->l2);
    if (dropout >= 0)
        t->l1.dropout = t->l2.dropout = dropout;
    saga_optim_opts oo = saga_optim_opts_defaults(SAGA_OPTIM_SGD);
    oo.lr = 0.5f;
    assert_int_equal(saga_optim_new(&t->opt, t->m, &oo), SAGA_OK);
}

static void trainer_close(trainer *t) {
    saga_optim_free(&t->opt);
    saga_model_free(&t->m);
    saga_ctx_free(&t->c);
    saga_backend_free_all(&t->be);
}

/* When set, run_model gives the net every LOSS_EVERY-th vertex as its loss rows
 * (saga_net_set_loss_rows) and the loss counts in unlisted the rows it sees outside them. */
static int32_t LOSS_EVERY;
static int64_t unlisted;

static saga_tensor *nll_listed(saga_ctx *c, const saga_vertex_in *v, const int32_t *ids, void *u) {
    for (int32_t i = 0; i < v->count; i++)
        unlisted += ids[i] % LOSS_EVERY != 0;
    return nll_rows(c, v, ids, u);
}

/* Three SGD steps of a two-layer model, over the ranks of cm (NULL: this process alone). */
static void run_model(run_out *r, const saga_program *prog, saga_comm *cm, size_t budget,
                      saga_exec exec, saga_partition_method pm) {
    data_load();
    trainer t;
    trainer_open(&t, budget, DROPOUT);
    saga_ctx *c = t.c;
    saga_model *m = t.m;
    saga_optim *opt = t.opt;
    saga_net_opts no = saga_net_opts_defaults();
    no.exec = exec;
    no.partition = pm;
    no.self_loops = SAGA_DGRAPH_SELF_LOOPS_ADD;
    no.comm = cm;
    saga_net *net = NULL;
    assert_int_equal(saga_net_new(&net, c, D.g, &no), SAGA_OK);
    net_model_stages(net, prog, &D, H, &t.l1, &t.l2);
    loss_ctx lc = {D.labels, D.n};
    assert_int_equal(saga_net_set_loss(net, LOSS_EVERY ? nll_listed : nll_rows, &lc), SAGA_OK);
    if (LOSS_EVERY) {
        int32_t *list = test_malloc(((size_t)D.n / (size_t)LOSS_EVERY + 1) * sizeof *list), k = 0;
        for (int32_t v = 0; v < D.n; v += LOSS_EVERY)
            list[k++] = v;
        assert_int_equal(saga_net_set_loss_rows(net, list, k), SAGA_OK);
        test_free(list);
    }
    assert_int_equal(saga_net_set_model(net, m), SAGA_OK);
    assert_int_equal(saga_net_set_input(net, D.x, D.F), SAGA_OK);
    for (int i = 0; i < STEPS; i++) {
        if (saga_net_train_step(net, &r->loss[i]) != SAGA_OK)
            fail_msg("train step %d: %s", i, saga_last_error());
        assert_int_equal(saga_optim_step(opt), SAGA_OK);
    }
    saga_net_get_stats(net, &r->st);
    r->out = test_malloc((size_t)D.n * (size_t)D.C * sizeof(float));
    assert_int_equal(saga_net_forward(net, r->out), SAGA_OK);
    if (saga_comm_rank(comm) == 0 && cm)
        print_message("  %s: halo rows %lld, received %lld, comm %llu/%llu bytes, %.4f s, %.0f%% "
                      "hidden\n",
                      saga_net_describe(net), (long long)r->st.halo_rows,
                      (long long)r->st.remote_rows, (unsigned long long)r->st.comm_sent_bytes,
                      (unsigned long long)r->st.comm_recv_bytes, r->st.comm_seconds,
                      100 * r->st.comm_hidden);
    assert_true(r->st.comm_hidden >= 0 && r->st.comm_hidden <= 1);
    saga_net_free(&net);
    trainer_close(&t);
}

/* The run over the ranks adds in other orders than the one alone (its parts' sums, the weight
 * gradients' all-reduce): within net_run_bounds. */
static void assert_same(const run_out *a, const run_out *b) {
    net_assert_close_runs(&D, H, 0, a->loss, a->out, b->loss, b->out, "alone and over the ranks");
}

static void check(const saga_program *prog, size_t budget, saga_exec exec,
                  saga_partition_method pm) {
    run_out one, all;
    run_model(&one, prog, NULL, 0, SAGA_EXEC_MEMORY, SAGA_PARTITION_METIS);
    run_model(&all, prog, comm, budget, exec, pm);
    int p = saga_comm_size(comm);
    assert_int_equal(all.st.ranks, p);
    if (p > 1) {
        assert_true(all.st.comm_sent_bytes > 0 && all.st.comm_recv_bytes > 0);
        assert_true(all.st.remote_rows > 0);
        assert_true(all.st.parts >= p);
    }
    if (budget)
        assert_true(all.st.streamed && all.st.peak_device_bytes <= budget);
    assert_same(&one, &all);
    test_free(one.out);
    test_free(all.out);
}

static void test_net_ranks_gcn(void **state) {
    (void)state;
    check(&GCN, 0, SAGA_EXEC_AUTO, SAGA_PARTITION_METIS);
}

static void test_net_ranks_gat(void **state) {
    (void)state;
    data_load();
    check(&GAT, 0, SAGA_EXEC_AUTO, SAGA_PARTITION_METIS);
}

/* Each rank streams its share under a budget far below its in-memory footprint. */
static void test_net_ranks_gcn_streamed(void **state) {
    (void)state;
    if (on_cuda)
        skip(); /* budgets sized for the CPU backend; the CPU runs cover streaming */
    check(&GCN, 160u << 10, SAGA_EXEC_AUTO, SAGA_PARTITION_METIS);
}

static void test_net_ranks_gat_streamed(void **state) {
    (void)state;
    if (on_cuda)
        skip();
    data_load();
    check(&GAT, 400u << 10, SAGA_EXEC_AUTO, SAGA_PARTITION_METIS);
}

static void test_net_ranks_random_and_contiguous(void **state) {
    (void)state;
    check(&GCN, 0, SAGA_EXEC_AUTO, SAGA_PARTITION_RANDOM);
    check(&GCN, 0, SAGA_EXEC_AUTO, SAGA_PARTITION_CONTIGUOUS);
}

/* With loss rows, the loss over the ranks sees those rows alone, as it does in one process (in
 * memory and streamed), with the same losses and outputs. */
static void test_net_ranks_loss_rows(void **state) {
    (void)state;
    data_load();
    LOSS_EVERY = 5;
    unlisted = 0;
    check(&GCN, 0, SAGA_EXEC_AUTO, SAGA_PARTITION_METIS);
    check(&GAT, 0, SAGA_EXEC_AUTO, SAGA_PARTITION_METIS);
    if (!on_cuda)
        check(&GAT, 400u << 10, SAGA_EXEC_AUTO, SAGA_PARTITION_METIS);
    LOSS_EVERY = 0;
    assert_int_equal(unlisted, 0);
}

/* A rank's shard of D.g as a net over shards takes it: written by every rank to a directory of
 * its own (the partition is deterministic), mapped, its local graph, input rows for its own rows
 * alone (the halo's zero: the exchanges must bring them) and local labels. Plain allocations:
 * the failure sweep below makes it too. SAGA_OK or the first error. */
typedef struct shard_net {
    saga_shard *sh;
    saga_graph *lg;
    float *x;
    int32_t *labels;
    saga_net_halo hx;
} shard_net;

static void shard_net_free(shard_net *s) {
    saga_shard_close(&s->sh);
    saga_graph_free(&s->lg);
    free(s->x);
    free(s->labels);
    memset(s, 0, sizeof *s);
}

static saga_status shard_net_make(shard_net *s, const char *dir) {
    saga_status st = SAGA_OK;
    memset(s, 0, sizeof *s);
    data_load();
    saga_features f = {.n_rows = D.n, .n_cols = D.F, .dense = D.x};
    saga_shards_input in = {.graph = D.g, .features = &f}; /* the sampler reads them */
    saga_shards_opts so = saga_shards_opts_defaults();
    so.shards = saga_comm_size(comm);
    if ((st = saga_shards_write(dir, &in, &so, NULL)) < 0 ||
        (st = saga_shard_open(&s->sh, dir, saga_comm_rank(comm), NULL)) < 0)
        return st;
    const saga_shard *sh = s->sh;
    const int32_t nl = (int32_t)sh->n_local, own = (int32_t)sh->n_own;
    int32_t *src = malloc((size_t)sh->nnz * sizeof *src + 4);
    int32_t *dst = malloc((size_t)sh->nnz * sizeof *dst + 4);
    s->x = calloc((size_t)nl * (size_t)D.F + 1, sizeof *s->x);
    s->labels = malloc((size_t)nl * sizeof *s->labels + 4);
    if (!src || !dst || !s->x || !s->labels) {
        free(src);
        free(dst);
        return SAGA_ERR_OUT_OF_MEMORY;
    }
    for (int32_t i = 0; i < own; i++)
        for (int64_t e = sh->in_offsets[i]; e < sh->in_offsets[i + 1]; e++)
            src[e] = sh->in_indices[e], dst[e] = i;
    saga_graph_opts go = saga_graph_opts_defaults();
    go.duplicates = SAGA_DUPLICATES_KEEP;
    st = saga_graph_from_edges(&s->lg, nl, sh->nnz, src, dst, NULL, NULL, &go);
    free(src);
    free(dst);
    for (int32_t l = 0; l < nl; l++) {
        int32_t v = (int32_t)sh->orig_id[l];
        s->labels[l] = D.labels[v];
        if (l < own)
            memcpy(s->x + (int64_t)l * D.F, D.x + (int64_t)v * D.F, (size_t)D.F * sizeof *s->x);
    }
    s->hx = saga_net_halo_of_shard(sh, comm);
    return st;
}

/* The seeds of batch b: the vertices v with (7 v + b) % 5 == 0, ascending. */
static bool in_batch(int64_t v, int b) {
    return (7 * v + b) % 5 == 0;
}

static const int32_t FAN[2] = {3, 2};

static saga_sampler_opts sample_opts(void) {
    saga_sampler_opts so = saga_sampler_opts_defaults();
    so.seed = 9;
    so.self_loops = SAGA_DGRAPH_SELF_LOOPS_ADD;
    so.weight = SAGA_WEIGHT_SYMNORM;
    return so;
}

/* SAGA_TEST_FAIL_ALLOC_AT=N (net_ranks_fail.sh): rank 1 alone fails its N-th allocation from the
 * first training step on (with SAGA_TEST_FAIL_FORWARD, from the forward pass after it), in memory
 * (SAGA_TEST_FAIL_STREAMED unset) or streamed under 400 KiB.
 * Every rank must come back with the failure (agreed), or the job must stop with rank 1's
 * message; never wait in a collective rank 1 will not join (the script's timeout). */
static long fail_count, fail_at;
static void *failing_malloc(void *ud, size_t size) {
    (void)ud;
    return fail_at > 0 && ++fail_count >= fail_at ? NULL : malloc(size);
}
static void *failing_realloc(void *ud, void *ptr, size_t size) {
    (void)ud;
    return fail_at > 0 && ++fail_count >= fail_at ? NULL : realloc(ptr, size);
}
static void failing_free(void *ud, void *ptr) {
    (void)ud;
    free(ptr);
}

static int step_failing_at(long at, bool streamed, bool shards) {
    data_load();
    saga_backend *be = backend(streamed ? 400u << 10 : 0);
    saga_ctx *c = NULL;
    saga_model *m = NULL;
    saga_net *net = NULL;
    layer l1, l2;
    shard_net sn = {0};
    saga_net_opts no = saga_net_opts_defaults();
    no.exec = streamed ? SAGA_EXEC_AUTO : SAGA_EXEC_MEMORY;
    no.self_loops = SAGA_DGRAPH_SELF_LOOPS_ADD;
    no.comm = comm;
    loss_ctx lc = {D.labels, D.n};
    if (shards) { /* each rank's shard, its local graph and the exchanges (SAGA_TEST_FAIL_SHARDS) */
        char dir[4096];
        const char *under = getenv("SAGA_TEST_FAIL_DIR");
        snprintf(dir, sizeof dir, "%s/saga-fail-shards.%d", under && *under ? under : "/tmp",
                 (int)getpid());
        if (shard_net_make(&sn, dir) < 0)
            return 2;
        no.comm = NULL;
        no.halo = &sn.hx;
        lc.labels = sn.labels;
    }
    if (saga_ctx_new(&c, be, 3) < 0 || saga_model_new(&m, be) < 0)
        return 2;
    net_model_params(m, &D, H, &l1, &l2);
    if (saga_net_new(&net, c, shards ? sn.lg : D.g, &no) < 0)
        return 2;
    net_model_stages(net, &GCN, &D, H, &l1, &l2);
    if (saga_net_set_loss(net, nll_rows, &lc) < 0 || saga_net_set_model(net, m) < 0 ||
        saga_net_set_input(net, shards ? sn.x : D.x, D.F) < 0)
        return 2;
    if (saga_comm_rank(comm) == 1) {
        fail_at = at;
        saga_allocator a = {failing_malloc, failing_realloc, failing_free, NULL};
        saga_set_allocator(&a);
    }
    double loss = 0;
    saga_status st = SAGA_OK;
    if (shards && getenv("SAGA_TEST_FAIL_SAMPLED")) { /* a mini-batch over shards */
        saga_set_allocator(NULL);
        int32_t *seeds = malloc((size_t)sn.sh->n_own * sizeof *seeds + 4), k = 0;
        for (int64_t l = 0; seeds && l < sn.sh->n_own; l++)
            if (in_batch(sn.sh->vertex[l], 0))
                seeds[k++] = (int32_t)l;
        if (saga_comm_rank(comm) == 1) {
            saga_allocator a = {failing_malloc, failing_realloc, failing_free, NULL};
            saga_set_allocator(&a);
        }
        saga_sampler *s = NULL;
        saga_sample *smp = NULL;
        saga_sampler_opts so = sample_opts();
        int64_t first[3];
        st = seeds ? saga_sampler_new_shard(&s, sn.sh, comm, FAN, 2, &so) : SAGA_ERR_OUT_OF_MEMORY;
        if (st == SAGA_OK) /* the seeds' expected costs, each hop's halo from its owners */
            st = saga_sampler_pack(s, seeds, k, 2, 0, 28, 100, first);
        if (st == SAGA_OK)
            st = saga_sampler_sample(s, seeds, k, 0, &smp);
        if (st == SAGA_OK)
            st = saga_net_train_sample(net, smp, &loss);
        saga_sample_free(&smp);
        saga_sampler_free(&s);
        free(seeds);
    } else if (getenv("SAGA_TEST_FAIL_FORWARD")) {
        saga_set_allocator(NULL);
        st = saga_net_train_step(net, &loss);
        float *y = malloc((size_t)D.n * (size_t)D.C * sizeof *y);
        if (saga_comm_rank(comm) == 1) {
            saga_allocator a = {failing_malloc, failing_realloc, failing_free, NULL};
            saga_set_allocator(&a);
        }
        if (st == SAGA_OK)
            st = saga_net_forward(net, y);
        saga_set_allocator(NULL);
        free(y);
    } else
        st = saga_net_train_step(net, &loss);
    saga_set_allocator(NULL);
    fail_at = 0;
    fprintf(stderr, "rank %d: allocation %ld on rank 1: %s\n", saga_comm_rank(comm), at,
            st < 0 ? saga_last_error() : "the step ran");
    saga_net_free(&net);
    saga_model_free(&m);
    saga_ctx_free(&c);
    saga_backend_free_all(&be);
    if (shards) { /* the rank's directory goes (a stopped job's: with the script's) */
        const char *under = getenv("SAGA_TEST_FAIL_DIR");
        char f[4200];
        for (int r = 0; r <= saga_comm_size(comm); r++) {
            snprintf(f, sizeof f,
                     r < saga_comm_size(comm) ? "%s/saga-fail-shards.%d/shard-%d.bin"
                                              : "%s/saga-fail-shards.%d/manifest.txt",
                     under && *under ? under : "/tmp", (int)getpid(), r);
            remove(f);
        }
        snprintf(f, sizeof f, "%s/saga-fail-shards.%d", under && *under ? under : "/tmp",
                 (int)getpid());
        remove(f);
        shard_net_free(&sn);
    }
    /* 0: every rank failed (the failure was agreed); 3: none did (N is past the step's
     * allocations); 1: some did and some did not */
    int32_t bad[2] = {st < 0, -(st < 0)};
    if (saga_comm_allreduce(comm, bad, 2, SAGA_I32, SAGA_COMM_MAX, NULL) < 0)
        return 2;
    return bad[0] != -bad[1] ? 1 : bad[0] ? 0 : 3;
}

/* Three SGD steps over shards written of D.g: each rank maps its own shard, makes its local graph
 * (own rows with their in-edges, the halo without), input rows for its own rows alone (the
 * halo's are zero: the exchanges must bring them), and trains the two-layer model (with the
 * model's dropout on rows, drawn by the rows' vertices as one process draws them, or none);
 * r->out gets the own rows' outputs at their vertices' places (the rest zero), summed
 * over the ranks so that every rank holds every row. */
/* run_shards without saga_net_set_model: over several ranks the first step must be refused */
static bool NO_MODEL;

static void run_shards(run_out *r, const saga_program *prog, bool dropout) {
    shard_net sn;
    assert_int_equal(shard_net_make(&sn, saga_test_tmp("net.shards")), SAGA_OK);
    const saga_shard *sh = sn.sh;
    const int rank = saga_comm_rank(comm);
    const int32_t nl = (int32_t)sh->n_local, own = (int32_t)sh->n_own;
    saga_graph *lg = sn.lg;
    float *x = sn.x;
    int32_t *labels = sn.labels;
    saga_net_halo hx = sn.hx;

    trainer t;
    trainer_open(&t, 0, dropout ? -1 : 0);
    saga_ctx *c = t.c;
    saga_model *m = t.m;
    saga_optim *opt = t.opt;
    saga_net_opts no = saga_net_opts_defaults();
    no.self_loops = SAGA_DGRAPH_SELF_LOOPS_ADD;
    no.halo = &hx;
    saga_net *net = NULL;
    assert_int_equal(saga_net_new(&net, c, lg, &no), SAGA_OK);
    net_model_stages(net, prog, &D, H, &t.l1, &t.l2);
    loss_ctx lc = {labels, D.n}; /* the local rows' labels; the mean over the whole graph's */
    assert_int_equal(saga_net_set_loss(net, nll_rows, &lc), SAGA_OK);
    if (LOSS_EVERY) { /* the own rows of the vertices one process's loss sees */
        int32_t *list = test_malloc((size_t)own * sizeof *list + 4), k = 0;
        for (int32_t l = 0; l < own; l++)
            if (sh->orig_id[l] % LOSS_EVERY == 0)
                list[k++] = l;
        assert_int_equal(saga_net_set_loss_rows(net, list, k), SAGA_OK);
        test_free(list);
    }
    if (!NO_MODEL)
        assert_int_equal(saga_net_set_model(net, m), SAGA_OK);
    assert_int_equal(saga_net_set_input(net, x, D.F), SAGA_OK);
    float *y = NULL;
    if (NO_MODEL && saga_comm_size(comm) > 1) {
        /* without the model the ranks' gradients would not be summed: refused on every rank */
        assert_int_equal(saga_net_train_step(net, &r->loss[0]), SAGA_ERR_INVALID_ARG);
        assert_non_null(strstr(saga_last_error(), "saga_net_set_model"));
        goto done;
    }
    for (int i = 0; i < STEPS; i++) {
        if (saga_net_train_step(net, &r->loss[i]) != SAGA_OK)
            fail_msg("train step %d over shards: %s", i, saga_last_error());
        assert_int_equal(saga_optim_step(opt), SAGA_OK);
    }
    saga_net_get_stats(net, &r->st);
    if (LOSS_EVERY) /* the last stage computes the loss rows alone, the second fewer than all */
        assert_true(r->st.stage_rows[3] <= own / 2 && r->st.stage_rows[1] < nl);
    y = test_malloc((size_t)nl * (size_t)D.C * sizeof *y + 4);
    assert_int_equal(saga_net_forward(net, y), SAGA_OK);
    for (int64_t k = (int64_t)own * D.C; k < (int64_t)nl * D.C; k++)
        assert_true(y[k] == 0.0f); /* the halo's rows are their owners' */
    /* forward_rows of some own rows gives the same rows, within the forward pass's bound (the
     * products over fewer rows may block their sums otherwise) */
    int32_t pick[3] = {own - 1, 0, own / 2};
    float yr[3 * 64], ya[3 * 64];
    assert_true(D.C <= 64);
    assert_int_equal(saga_net_forward_rows(net, pick, 3, yr), SAGA_OK);
    for (int k = 0; k < 3; k++)
        memcpy(ya + k * D.C, y + (int64_t)pick[k] * D.C, (size_t)D.C * sizeof(float));
    saga_test_assert_close_f32("forward_rows against forward over shards", ya, yr, 3 * D.C,
                               net_run_bounds(&D, H, 0, 0).out,
                               saga_test_mean_abs_f32(ya, 3 * D.C));
    r->out = test_calloc((size_t)D.n * (size_t)D.C, sizeof(float));
    for (int32_t l = 0; l < own; l++)
        memcpy(r->out + sh->orig_id[l] * D.C, y + (int64_t)l * D.C, (size_t)D.C * sizeof(float));
    assert_int_equal(
        saga_comm_allreduce(comm, r->out, (size_t)D.n * (size_t)D.C, SAGA_F32, SAGA_COMM_SUM, NULL),
        SAGA_OK);
    if (rank == 0)
        print_message("  shards: %d own rows, %lld halo rows received, comm %llu/%llu bytes, "
                      "%.4f s\n",
                      own, (long long)r->st.remote_rows, (unsigned long long)r->st.comm_sent_bytes,
                      (unsigned long long)r->st.comm_recv_bytes, r->st.comm_seconds);
done:
    if (y)
        test_free(y);
    saga_net_free(&net);
    trainer_close(&t);
    shard_net_free(&sn);
}

/* Over shards the ranks train the model one process trains on the whole graph: every step's
 * loss and the outputs within net_run_bounds (the weight gradients add over the ranks in
 * another order); the bytes between ranks are the halo rows the exchanges bring. */
static void check_shards(const saga_program *prog, bool dropout) {
    run_out one, all;
    DROPOUT = dropout ? -1 : 0;
    run_model(&one, prog, NULL, 0, SAGA_EXEC_MEMORY, SAGA_PARTITION_METIS);
    DROPOUT = -1;
    run_shards(&all, prog, dropout);
    const int p = saga_comm_size(comm);
    assert_int_equal(all.st.ranks, p);
    if (p > 1)
        assert_true(all.st.remote_rows > 0 && all.st.comm_sent_bytes > 0);
    assert_false(all.st.streamed);
    net_assert_close_runs(&D, H, 0, one.loss, one.out, all.loss, all.out, "alone and over shards");
    test_free(one.out);
    test_free(all.out);
}

/* GCN's layers with plain sums (implicit ones, no normalisation), as GIN aggregates */
static const saga_program SUMS = {
    .scatter = SAGA_SCATTER_SRC,
    .edge_weight = SAGA_WEIGHT_NONE,
    .gather = SAGA_GATHER_SUM,
    .apply_vertex = bias_act,
};

static void test_net_ranks_shards(void **state) {
    (void)state;
    data_load();
    check_shards(&GCN, false);
    check_shards(&SUMS, false);
    check_shards(&GAT, false);
    if (saga_comm_size(comm) > 1) { /* refused, every rank alike (no rank waits) */
        run_out r;
        NO_MODEL = true;
        run_shards(&r, &GCN, false);
        NO_MODEL = false;
    }
    /* the masks of dropout on rows are drawn by vertex (GAT's on its attention, by edge, are
     * drawn by the shard's edges: not one process's) */
    check_shards(&GCN, true);
}

/* With loss rows each rank computes the rows they need alone, and the exchanges move the halo
 * rows those read: fewer than every halo row, with the same losses and outputs. */
static void test_net_ranks_shards_loss_rows(void **state) {
    (void)state;
    data_load();
    LOSS_EVERY = 5;
    unlisted = 0;
    check_shards(&GCN, true);
    check_shards(&GAT, false);
    LOSS_EVERY = 0;
    assert_int_equal(unlisted, 0);
}

static void pagerank(double *rank, saga_comm *cm, size_t budget, int *iters) {
    data_load();
    saga_backend *be = backend(budget);
    saga_ctx *c = NULL;
    assert_int_equal(saga_ctx_new(&c, be, 1), SAGA_OK);
    saga_net_opts no = saga_net_opts_defaults();
    no.comm = cm;
    saga_net *net = NULL;
    assert_int_equal(saga_net_new(&net, c, D.g, &no), SAGA_OK);
    double l1 = 0;
    if (saga_net_pagerank(net, 0.85, 1e-10, 100, rank, iters, &l1) != SAGA_OK)
        fail_msg("pagerank: %s", saga_last_error());
    saga_net_free(&net);
    saga_ctx_free(&c);
    saga_backend_free_all(&be);
}

static void test_net_ranks_pagerank(void **state) {
    (void)state;
    data_load();
    double *one = test_malloc((size_t)D.n * sizeof(double));
    double *all = test_malloc((size_t)D.n * sizeof(double));
    for (int k = 0; k < 2; k++) {
        int i1 = 0, i2 = 0;
        pagerank(one, NULL, 0, &i1);
        pagerank(all, comm, k && !on_cuda ? 64u << 10 : 0, &i2);
        assert_int_equal(i1, i2);
        const double bound = saga_test_pagerank_bound(D.g, 0.85);
        saga_test_assert_close_f64("PageRank alone and over the ranks", one, all, D.n, bound, 0);
        /* the ranks sum to one exactly in exact arithmetic; each is within bound of it relative
         * to itself, and their sum adds n terms */
        double sum = 0;
        for (int32_t v = 0; v < D.n; v++)
            sum += all[v];
        assert_true(fabs(sum - 1.0) <= bound + saga_test_gamma(D.n, SAGA_TEST_U64));
    }
    test_free(one);
    test_free(all);
}

/* Over shards each rank iterates its own rows, the halo's contributions from their owners, with
 * its own rows in degree order (the default) and in the shard's order: the scores of one process
 * on the whole graph within the bound (every rank's own rows put together by a sum over the
 * ranks), in as many iterations; a rank's halo rows are left 0. */
static void test_net_ranks_pagerank_shards(void **state) {
    (void)state;
    data_load();
    shard_net sn;
    assert_int_equal(shard_net_make(&sn, saga_test_tmp("pr.shards")), SAGA_OK);
    const saga_shard *sh = sn.sh;
    double *one = test_malloc((size_t)D.n * sizeof(double));
    double *all = test_malloc((size_t)D.n * sizeof(double));
    double *local = test_malloc((size_t)sh->n_local * sizeof(double) + 8);
    int i1 = 0, i2 = 0;
    pagerank(one, NULL, 0, &i1);
    for (int order = 0; order < 2; order++) {
        memset(all, 0, (size_t)D.n * sizeof(double));
        saga_backend *be = backend(0);
        saga_ctx *c = NULL;
        assert_int_equal(saga_ctx_new(&c, be, 1), SAGA_OK);
        saga_net_opts no = saga_net_opts_defaults();
        no.halo = &sn.hx;
        no.order = order ? SAGA_ORDER_GRAPH : SAGA_ORDER_AUTO;
        saga_net *net = NULL;
        assert_int_equal(saga_net_new(&net, c, sn.lg, &no), SAGA_OK);
        double l1 = 0;
        if (saga_net_pagerank(net, 0.85, 1e-10, 100, local, &i2, &l1) != SAGA_OK)
            fail_msg("pagerank over shards: %s", saga_last_error());
        saga_net_stats st;
        saga_net_get_stats(net, &st);
        for (int64_t l = 0; l < sh->n_local; l++) {
            if (l < sh->n_own)
                all[sh->orig_id[l]] = local[l];
            else
                assert_true(local[l] == 0.0);
        }
        assert_int_equal(saga_comm_allreduce(comm, all, (size_t)D.n, SAGA_F64, SAGA_COMM_SUM, NULL),
                         SAGA_OK);
        assert_int_equal(i1, i2);
        const double bound = saga_test_pagerank_bound(D.g, 0.85);
        saga_test_assert_close_f64("PageRank alone and over shards", one, all, D.n, bound, 0);
        if (saga_comm_size(comm) > 1)
            assert_true(st.comm_sent_bytes > 0 && st.remote_rows > 0);
        saga_net_free(&net);
        saga_ctx_free(&c);
        saga_backend_free_all(&be);
    }
    shard_net_free(&sn);
    test_free(one);
    test_free(all);
    test_free(local);
}

/* ---- mini-batches over shards ---------------------------------------------------------------- */

/* A rank's sample over shards of batch b against one process's sample of the union of every
 * rank's seeds of b: each destination the rank's sample holds draws the same sources (by vertex,
 * in the same order) in the same block, with the same values and degrees to the bit, and its
 * input rows are the vertices' features. */
static void check_sample(const saga_sample *part, const saga_sample *whole) {
    int32_t *row = test_malloc((size_t)D.n * sizeof *row);
    for (int32_t v = 0; v < D.n; v++)
        row[v] = -1;
    for (int32_t j = 0; j < whole->n_ids; j++)
        row[whole->ids[j]] = j;
    assert_int_equal(part->n_layers, whole->n_layers);
    for (int32_t i = 0; i < part->n_ids; i++) {
        assert_true(row[part->ids[i]] >= 0);
        assert_memory_equal(part->x + (int64_t)i * D.F, D.x + (int64_t)part->ids[i] * D.F,
                            (size_t)D.F * sizeof(float));
    }
    for (int32_t l = 0; l < part->n_layers; l++) {
        const saga_sample_block *a = &part->blocks[l], *b = &whole->blocks[l];
        for (int32_t i = 0; i < a->n_dst; i++) {
            const int32_t j = row[part->ids[i]];
            assert_true(j < b->n_dst);
            const int64_t k = a->offsets[i + 1] - a->offsets[i];
            assert_int_equal(k, b->offsets[j + 1] - b->offsets[j]);
            assert_true(a->deg_in[i] == b->deg_in[j]);
            for (int64_t e = 0; e < k; e++) {
                const int64_t ea = a->offsets[i] + e, eb = b->offsets[j] + e;
                assert_int_equal(part->ids[a->src[ea]], whole->ids[b->src[eb]]);
                assert_true(a->values[ea] == b->values[eb]);
                assert_true(a->deg_out[a->src[ea]] == b->deg_out[b->src[eb]]);
            }
        }
    }
    test_free(row);
}

/* The rank owning each vertex, as the last run over shards found (for the one process's run
 * that leaves out rank 1's seeds of a batch). */
static int32_t *OWNER;
/* The dropout draws a context made in the last run alone [0] and over shards [1]. */
static uint64_t DRAWS[2];

/* Three SGD steps on batches 0, 1, 2 (in_batch) with fan-outs FAN: over shards (each rank its own
 * seeds of each batch, sampled over the ranks) or by this process alone on the whole graph (the
 * union of the seeds); r->out: the outputs after training on every vertex (over shards each
 * rank's own rows, summed over the ranks). Over shards batch 0's samples are checked against one
 * process's (check_sample). Batch `empty` has no seeds of rank 1 (-1: none). */
static void run_sampled(run_out *r, const saga_program *prog, bool shards, bool dropout,
                        int empty) {
    data_load();
    shard_net sn = {0};
    if (shards)
        assert_int_equal(shard_net_make(&sn, saga_test_tmp("sampled.shards")), SAGA_OK);
    const saga_shard *sh = sn.sh;
    if (shards) { /* who owns each vertex */
        if (!OWNER)
            OWNER = malloc((size_t)D.n * sizeof *OWNER); /* kept from test to test */
        assert_non_null(OWNER);
        for (int32_t v = 0; v < D.n; v++)
            OWNER[v] = -1;
        for (int64_t l = 0; l < sh->n_own; l++)
            OWNER[sh->vertex[l]] = saga_comm_rank(comm);
        assert_int_equal(
            saga_comm_allreduce(comm, OWNER, (size_t)D.n, SAGA_I32, SAGA_COMM_MAX, NULL), SAGA_OK);
    }
    trainer t;
    trainer_open(&t, 0, dropout ? -1 : 0);
    saga_ctx *c = t.c;
    saga_model *m = t.m;
    saga_optim *opt = t.opt;
    saga_net_opts no = saga_net_opts_defaults();
    no.self_loops = SAGA_DGRAPH_SELF_LOOPS_ADD;
    no.halo = shards ? &sn.hx : NULL;
    saga_net *net = NULL;
    assert_int_equal(saga_net_new(&net, c, shards ? sn.lg : D.g, &no), SAGA_OK);
    net_model_stages(net, prog, &D, H, &t.l1, &t.l2);
    loss_ctx lc = {shards ? sn.labels : D.labels, D.n}; /* a seed's share of the mean over n */
    assert_int_equal(saga_net_set_loss(net, nll_rows, &lc), SAGA_OK);
    assert_int_equal(saga_net_set_model(net, m), SAGA_OK);
    assert_int_equal(saga_net_set_input(net, shards ? sn.x : D.x, D.F), SAGA_OK);

    saga_sampler_opts so = sample_opts();
    saga_sampler *s = NULL, *whole = NULL;
    if (shards) {
        assert_int_equal(saga_sampler_new_shard(&s, sh, comm, FAN, 2, &so), SAGA_OK);
        assert_int_equal(saga_sampler_new(&whole, D.g, FAN, 2, &so), SAGA_OK);
    } else {
        assert_int_equal(saga_sampler_new(&s, D.g, FAN, 2, &so), SAGA_OK);
    }
    int32_t *seeds = test_malloc((size_t)D.n * sizeof *seeds), *all = NULL;
    for (int b = 0; b < STEPS; b++) {
        int32_t k = 0;
        if (!shards) {
            for (int32_t v = 0; v < D.n; v++)
                if (in_batch(v, b) && !(b == empty && OWNER[v] == 1))
                    seeds[k++] = v;
        } else if (!(b == empty && saga_comm_rank(comm) == 1)) {
            for (int32_t l = 0; l < (int32_t)sh->n_own; l++)
                if (in_batch(sh->vertex[l], b))
                    seeds[k++] = l;
        }
        saga_sample *smp = NULL;
        if (saga_sampler_sample(s, seeds, k, (uint64_t)b, &smp) != SAGA_OK)
            fail_msg("sample of batch %d: %s", b, saga_last_error());
        assert_int_equal(smp->blocks[1].n_dst, k);
        if (shards && b == 0) { /* one process's sample of the union of the ranks' seeds */
            int32_t n_all = 0;
            all = test_malloc((size_t)D.n * sizeof *all);
            for (int32_t v = 0; v < D.n; v++)
                if (in_batch(v, b))
                    all[n_all++] = v;
            saga_sample *one = NULL;
            assert_int_equal(saga_sampler_sample(whole, all, n_all, (uint64_t)b, &one), SAGA_OK);
            assert_int_equal(smp->all_seeds, n_all);
            check_sample(smp, one);
            saga_sample_free(&one);
            test_free(all);
        }
        if (saga_net_train_sample(net, smp, &r->loss[b]) != SAGA_OK)
            fail_msg("train on batch %d%s: %s", b, shards ? " over shards" : "", saga_last_error());
        saga_sample_free(&smp);
        assert_int_equal(saga_optim_step(opt), SAGA_OK);
    }
    DRAWS[shards] = saga_ctx_rng_counter(c);
    r->out = test_calloc((size_t)D.n * (size_t)D.C, sizeof(float));
    if (shards) {
        float *y = test_malloc((size_t)sh->n_local * (size_t)D.C * sizeof *y + 4);
        assert_int_equal(saga_net_forward(net, y), SAGA_OK);
        for (int64_t l = 0; l < sh->n_own; l++)
            memcpy(r->out + sh->orig_id[l] * D.C, y + l * D.C, (size_t)D.C * sizeof(float));
        assert_int_equal(saga_comm_allreduce(comm, r->out, (size_t)D.n * (size_t)D.C, SAGA_F32,
                                             SAGA_COMM_SUM, NULL),
                         SAGA_OK);
        test_free(y);
    } else {
        assert_int_equal(saga_net_forward(net, r->out), SAGA_OK);
    }
    test_free(seeds);
    saga_sampler_free(&s);
    saga_sampler_free(&whole);
    saga_net_free(&net);
    trainer_close(&t);
    if (shards)
        shard_net_free(&sn);
}

/* Mini-batches over shards train what one process trains on the union of each batch's seeds:
 * the same draws (check_sample), every step's loss and the outputs after three steps within
 * net_run_bounds; with dropout on rows (its masks drawn by vertex, and a rank without seeds in
 * a batch keeping its draws in step with the others). */
static void test_net_ranks_sampled_shards(void **state) {
    (void)state;
    data_load();
    const struct {
        const saga_program *prog;
        bool dropout;
        int empty;
        const char *what;
    } runs[] = {{&GCN, false, -1, "GCN"},
                {&GCN, true, 1, "GCN with dropout, rank 1 without seeds in batch 1"},
                {&SAGE, true, -1, "GraphSAGE-like mean with dropout"}};
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        run_out one, all;
        const int empty = saga_comm_size(comm) > 1 ? runs[k].empty : -1;
        run_sampled(&all, runs[k].prog, true, runs[k].dropout, empty);
        /* one process: the union, without rank 1's seeds in the batch it left empty */
        run_sampled(&one, runs[k].prog, false, runs[k].dropout, empty);
        net_assert_close_runs(&D, H, 0, one.loss, one.out, all.loss, all.out, runs[k].what);
        assert_int_equal(DRAWS[0], DRAWS[1]); /* every rank's masks stay one process's */
        if (saga_comm_rank(comm) == 0)
            print_message("  sampled over shards, %s: losses %.9g %.9g %.9g\n", runs[k].what,
                          all.loss[0], all.loss[1], all.loss[2]);
        test_free(one.out);
        test_free(all.out);
    }
}

/* Over shards the expected costs of seeds (saga_sampler_cost, each hop reading the halo's from
 * their owners) are one process's for the same vertices, to the bit (the same sums in the same
 * order); the packer cuts a rank's own seeds into runs whose expected costs stay within one seed's
 * cost of their share of what is left, with empty runs where a rank has fewer seeds than runs. */
static void test_net_ranks_sampled_costs(void **state) {
    (void)state;
    data_load();
    shard_net sn;
    assert_int_equal(shard_net_make(&sn, saga_test_tmp("costs.shards")), SAGA_OK);
    const saga_shard *sh = sn.sh;
    const int32_t own = (int32_t)sh->n_own;
    saga_sampler_opts so = sample_opts();
    double *all = test_malloc((size_t)D.n * sizeof *all);
    double *mine = test_malloc(((size_t)own + 1) * sizeof *mine);
    int32_t *seeds = test_malloc(((size_t)own + 1) * sizeof *seeds);
    for (int32_t l = 0; l < own; l++)
        seeds[l] = l;
    const int32_t fans[2][2] = {{3, 2}, {-1, -1}};
    for (int k = 0; k < 2; k++) {
        saga_sampler *whole = NULL, *s = NULL;
        assert_int_equal(saga_sampler_new(&whole, D.g, fans[k], 2, &so), SAGA_OK);
        assert_int_equal(saga_sampler_new_shard(&s, sh, comm, fans[k], 2, &so), SAGA_OK);
        assert_int_equal(saga_sampler_cost(whole, 28, 100, all), SAGA_OK);
        assert_int_equal(saga_sampler_cost(s, 28, 100, mine), SAGA_OK);
        double most = 0;
        for (int32_t l = 0; l < own; l++) {
            assert_true(mine[l] == all[sh->vertex[l]]);
            most = mine[l] > most ? mine[l] : most;
        }
        /* 7 runs, and more runs than the rank has seeds */
        const int64_t runs[2] = {7, own + 5};
        for (int j = 0; j < 2; j++) {
            const int64_t nb = runs[j];
            int64_t *first = test_malloc(((size_t)nb + 1) * sizeof *first);
            assert_int_equal(saga_sampler_pack(s, seeds, own, nb, 0, 28, 100, first), SAGA_OK);
            assert_true(first[0] == 0 && first[nb] == own);
            double left = 0;
            for (int32_t l = 0; l < own; l++)
                left += mine[l];
            for (int64_t b = 0; b < nb; b++) {
                assert_true(first[b + 1] >= first[b]);
                const double target = left / (double)(nb - b);
                double run = 0;
                for (int64_t i = first[b]; i < first[b + 1]; i++)
                    run += mine[seeds[i]];
                assert_true(fabs(run - target) <= most * (1 + 1e-12));
                left -= run;
            }
            test_free(first);
        }
        saga_sampler_free(&whole);
        saga_sampler_free(&s);
    }
    test_free(all);
    test_free(mine);
    test_free(seeds);
    shard_net_free(&sn);
}

static int teardown(void **state) {
    (void)state;
    net_data_free(&D);
    free(OWNER);
    OWNER = NULL;
    return 0;
}

int main(void) {
    if (saga_comm_open(&comm, "auto") < 0) {
        fprintf(stderr, "test_net_ranks: %s\n", saga_last_error());
        return 1;
    }
    const char *dev = getenv("SAGA_TEST_DEVICE");
    on_cuda = dev && strcmp(dev, "cuda") == 0;
    const char *at = getenv("SAGA_TEST_FAIL_ALLOC_AT");
    if (at && *at) {
        int rc = step_failing_at(atol(at), getenv("SAGA_TEST_FAIL_STREAMED") != NULL,
                                 getenv("SAGA_TEST_FAIL_SHARDS") != NULL);
        net_data_free(&D);
        saga_comm_free(&comm);
        return rc;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_net_ranks_gcn),
        cmocka_unit_test(test_net_ranks_gat),
        cmocka_unit_test(test_net_ranks_gcn_streamed),
        cmocka_unit_test(test_net_ranks_gat_streamed),
        cmocka_unit_test(test_net_ranks_random_and_contiguous),
        cmocka_unit_test(test_net_ranks_loss_rows),
        cmocka_unit_test(test_net_ranks_shards),
        cmocka_unit_test(test_net_ranks_shards_loss_rows),
        cmocka_unit_test(test_net_ranks_pagerank),
        cmocka_unit_test(test_net_ranks_pagerank_shards),
        cmocka_unit_test(test_net_ranks_sampled_shards),
        cmocka_unit_test(test_net_ranks_sampled_costs),
    };
    int failed = cmocka_run_group_tests(tests, NULL, teardown);
    int32_t any = failed;
    if (saga_comm_allreduce(comm, &any, 1, SAGA_I32, SAGA_COMM_MAX, NULL) < 0)
        any = 1;
    saga_comm_free(&comm);
    return any ? 1 : 0;
}
