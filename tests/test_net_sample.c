/* test_net_sample.c - a net's stages over samples (saga_net_train_sample, saga_net_forward_sample):
 * with whole neighbourhoods a mini-batch of seeds trains what the full graph trains with the same
 * loss rows (a GCN, a GraphSAGE-like mean and a GAT-like batched program; dense and sparse input;
 * dropout drawn by the rows' graph ids), program stages over cut neighbourhoods aggregate exactly
 * the sampled edges with the sampler's degrees, the library's cross-entropy is the mean over the
 * batch, and what cannot run is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"

#include "net_models.h"
#include "saga_layers.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static net_data D;
static saga_program GAT;
static bool on_cuda; /* SAGA_TEST_DEVICE=cuda: the queued passes' test on the CUDA backend */

static void data_load(void) {
    net_data_load(&D, 1500, 5, 40, 8, 3);
    GAT = gat_program(3000);
}

/* 0 .. n - 1 in an order drawn from seed (test_malloc'd). */
static int32_t *shuffled(int32_t n, uint64_t seed) {
    int32_t *perm = test_malloc((size_t)n * sizeof *perm);
    for (int32_t v = 0; v < n; v++)
        perm[v] = v;
    for (int32_t v = n - 1; v > 0; v--) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        int32_t j = (int32_t)((seed >> 33) % (uint64_t)(v + 1)), t = perm[v];
        perm[v] = perm[j];
        perm[j] = t;
    }
    return perm;
}

/* Every seventh vertex of a fixed shuffle: seeds in no particular order. */
static int32_t *seed_list(int32_t *count) {
    int32_t *perm = shuffled(D.n, 99);
    int32_t k = 0;
    for (int32_t i = 0; i < D.n; i += 7)
        perm[k++] = perm[i];
    *count = k;
    return perm;
}

static void set_input(saga_net *net, bool sparse) {
    if (!sparse) {
        assert_int_equal(saga_net_set_input(net, D.x, D.F), SAGA_OK);
        return;
    }
    int64_t *off = test_malloc(((size_t)D.n + 1) * sizeof *off), nnz = 0;
    int32_t *idx = test_malloc((size_t)D.n * (size_t)D.F * sizeof *idx);
    float *val = test_malloc((size_t)D.n * (size_t)D.F * sizeof *val);
    off[0] = 0;
    for (int32_t v = 0; v < D.n; v++) {
        for (int32_t j = 0; j < D.F; j++)
            if (D.x[(int64_t)v * D.F + j] != 0.0f) {
                idx[nnz] = j;
                val[nnz++] = D.x[(int64_t)v * D.F + j];
            }
        off[v + 1] = nnz;
    }
    assert_int_equal(saga_net_set_input_csr(net, off, idx, val, D.F), SAGA_OK);
    test_free(off);
    test_free(idx);
    test_free(val);
}

/* A CPU backend, a context and the two-layer model of width 16 (net_models.h) with prog and
 * dropout p before each layer, on d's graph with self-loops added, in memory; the loss nll_rows
 * over every vertex; no input yet. */
typedef struct gcn_net {
    saga_backend *be;
    saga_ctx *c;
    saga_model *m;
    saga_net *net;
    layer l1, l2;
    loss_ctx lc;
} gcn_net;

static void gcn_net_open(gcn_net *t, const net_data *d, const saga_program *prog, float p) {
    memset(t, 0, sizeof *t);
    open_cpu_model(&t->be, &t->c, &t->m);
    net_model_params(t->m, d, 16, &t->l1, &t->l2);
    t->l1.dropout = t->l2.dropout = p;
    saga_net_opts no = saga_net_opts_defaults();
    no.exec = SAGA_EXEC_MEMORY;
    no.self_loops = SAGA_DGRAPH_SELF_LOOPS_ADD;
    assert_int_equal(saga_net_new(&t->net, t->c, d->g, &no), SAGA_OK);
    net_model_stages(t->net, prog, d, 16, &t->l1, &t->l2);
    t->lc = (loss_ctx){d->labels, d->n};
    assert_int_equal(saga_net_set_loss(t->net, nll_rows, &t->lc), SAGA_OK);
}

static void gcn_net_close(gcn_net *t) {
    saga_net_free(&t->net);
    saga_model_free(&t->m);
    saga_ctx_free(&t->c);
    saga_backend_free_all(&t->be);
}

typedef struct run_out {
    double loss[3];
    float *out; /* n x C after three SGD steps (saga_net_forward) */
} run_out;

/* Three SGD steps of the two-layer model with prog whose loss reads the seeds: on the full graph
 * with the seeds as loss rows, or (sampled) on a sample of the seeds with every in-neighbour. */
static void run(run_out *r, const saga_program *prog, float dropout, bool sparse, bool sampled) {
    data_load();
    gcn_net t;
    gcn_net_open(&t, &D, prog, dropout);
    saga_net *net = t.net;
    saga_optim *opt = NULL;
    saga_optim_opts oo = saga_optim_opts_defaults(SAGA_OPTIM_SGD);
    oo.lr = 0.5f;
    assert_int_equal(saga_optim_new(&opt, t.m, &oo), SAGA_OK);
    set_input(net, sparse);
    int32_t ns = 0;
    int32_t *seeds = seed_list(&ns);
    saga_sampler *s = NULL;
    if (sampled) {
        const int32_t fan[2] = {-1, -1};
        saga_sampler_opts so = saga_sampler_opts_defaults();
        so.self_loops = SAGA_DGRAPH_SELF_LOOPS_ADD;
        assert_int_equal(saga_sampler_new(&s, D.g, fan, 2, &so), SAGA_OK);
    } else {
        assert_int_equal(saga_net_set_loss_rows(net, seeds, ns), SAGA_OK);
    }
    for (int i = 0; i < 3; i++) {
        saga_status st = SAGA_OK;
        if (sampled) {
            saga_sample *smp = NULL;
            assert_int_equal(saga_sampler_sample(s, seeds, ns, (uint64_t)i, &smp), SAGA_OK);
            st = saga_net_train_sample(net, smp, &r->loss[i]);
            saga_sample_free(&smp);
        } else {
            st = saga_net_train_step(net, &r->loss[i]);
        }
        if (st != SAGA_OK)
            fail_msg("step %d: %s", i, saga_last_error());
        assert_int_equal(saga_optim_step(opt), SAGA_OK);
    }
    r->out = test_malloc((size_t)D.n * (size_t)D.C * sizeof(float));
    assert_int_equal(saga_net_forward(net, r->out), SAGA_OK);
    saga_sampler_free(&s);
    test_free(seeds);
    saga_optim_free(&opt);
    gcn_net_close(&t);
}

static void check_same_training(const saga_program *prog, float dropout, bool sparse,
                                const char *what) {
    run_out full, smp;
    run(&full, prog, dropout, sparse, false);
    run(&smp, prog, dropout, sparse, true);
    net_assert_close_runs(&D, 16, 0, full.loss, full.out, smp.loss, smp.out, what);
    print_message("  %s: losses %.9g %.9g %.9g\n", what, smp.loss[0], smp.loss[1], smp.loss[2]);
    test_free(full.out);
    test_free(smp.out);
}

/* Whole neighbourhoods: the sampled training is the full graph's with the seeds as loss rows. */
static void test_net_sample_whole_neighbourhoods_train_as_the_graph(void **state) {
    (void)state;
    data_load();
    check_same_training(&GCN, 0.3f, false, "GCN, dense rows");
    check_same_training(&GCN, 0.3f, true, "GCN, a CSR");
    check_same_training(&SAGE, 0.3f, false, "GraphSAGE-like mean");
    /* the attention's dropout draws by edge, and a block's edges are not the graph's */
    check_same_training(&GAT, 0.0f, false, "GAT-like, batched");
}

/* One program stage without ApplyVertex over fan-outs that cut: each seed's output is the mean of
 * its sampled in-neighbours' rows (MEAN), or their sum weighted by 1 / sqrt(deg_in deg_out) with
 * the sampler's degrees (SYMNORM, the full graph's and the block's), within the bound of a sum of
 * that many terms. */
static void test_net_sample_cut_neighbourhoods(void **state) {
    (void)state;
    data_load();
    saga_backend *be = NULL;
    saga_ctx *c = NULL;
    assert_int_equal(saga_backend_cpu_new(&be, NULL), SAGA_OK);
    assert_int_equal(saga_ctx_new(&c, be, 3), SAGA_OK);
    const saga_program mean = {
        .scatter = SAGA_SCATTER_SRC, .edge_weight = SAGA_WEIGHT_NONE, .gather = SAGA_GATHER_MEAN};
    const saga_program sym = {
        .scatter = SAGA_SCATTER_SRC, .edge_weight = SAGA_WEIGHT_SYMNORM, .gather = SAGA_GATHER_SUM};
    const saga_program *progs[3] = {&mean, &sym, &sym};
    int32_t ns = 0;
    int32_t *seeds = seed_list(&ns);
    float *out = test_malloc((size_t)ns * (size_t)D.F * sizeof *out);
    for (int k = 0; k < 3; k++) {
        saga_net *net = NULL;
        saga_net_opts no = saga_net_opts_defaults();
        no.self_loops = SAGA_DGRAPH_SELF_LOOPS_ADD;
        assert_int_equal(saga_net_new(&net, c, D.g, &no), SAGA_OK);
        assert_int_equal(saga_net_add_program(net, progs[k], NULL, D.F), SAGA_OK);
        assert_int_equal(saga_net_set_input(net, D.x, D.F), SAGA_OK);
        const int32_t fan = 3;
        saga_sampler_opts so = saga_sampler_opts_defaults();
        so.self_loops = SAGA_DGRAPH_SELF_LOOPS_ADD;
        so.weight = SAGA_WEIGHT_SYMNORM;
        so.degrees = k == 2 ? SAGA_SAMPLE_DEGREES_SAMPLED : SAGA_SAMPLE_DEGREES_FULL;
        saga_sampler *s = NULL;
        saga_sample *smp = NULL;
        assert_int_equal(saga_sampler_new(&s, D.g, &fan, 1, &so), SAGA_OK);
        assert_int_equal(saga_sampler_sample(s, seeds, ns, 4, &smp), SAGA_OK);
        assert_int_equal(saga_net_forward_sample(net, smp, out), SAGA_OK);
        const saga_sample_block *b = &smp->blocks[0];
        int64_t cut = 0;
        for (int32_t i = 0; i < ns; i++) {
            const int64_t len = b->offsets[i + 1] - b->offsets[i];
            assert_true(len >= 1 && len <= 4);
            cut += len == 4;
            for (int32_t j = 0; j < D.F; j++) {
                double want = 0, mag = 0;
                for (int64_t e = b->offsets[i]; e < b->offsets[i + 1]; e++) {
                    double w = k == 0 ? 1.0 / (double)len : (double)b->values[e];
                    double t = w * D.x[(int64_t)smp->ids[b->src[e]] * D.F + j];
                    want += t;
                    mag += fabs(t);
                }
                /* the values in f32 (1 unit each), a sum of len terms */
                double bound = (len + 2) * SAGA_TEST_U32 * mag * 1.01;
                double got = out[(int64_t)i * D.F + j];
                if (!(fabs(got - want) <= bound))
                    fail_msg("program %d, seed %d, column %d: %.9g, the sampled edges give %.9g "
                             "(bound %.3g)",
                             k, (int)i, (int)j, got, want, bound);
            }
        }
        assert_true(cut > ns / 4); /* the fan-out did cut */
        saga_sample_free(&smp);
        saga_sampler_free(&s);
        saga_net_free(&net);
    }
    test_free(out);
    test_free(seeds);
    saga_ctx_free(&c);
    saga_backend_free_all(&be);
}

/* The library's cross-entropy on a sample: the mean over the batch's seeds, whatever the number
 * of vertices it lists in all, from the outputs saga_net_forward_sample gives. */
static void test_net_sample_cross_entropy_is_the_batch_mean(void **state) {
    (void)state;
    data_load();
    saga_backend *be = NULL;
    saga_ctx *c = NULL;
    saga_model *m = NULL;
    saga_net *net = NULL;
    open_cpu_model(&be, &c, &m);
    saga_net_opts no = saga_net_opts_defaults();
    no.self_loops = SAGA_DGRAPH_SELF_LOOPS_ADD;
    assert_int_equal(saga_net_new(&net, c, D.g, &no), SAGA_OK);
    saga_layer_opts lo = saga_layer_opts_defaults();
    lo.dropout = 0;
    assert_int_equal(saga_gcn_add(net, m, "gcn1", D.F, 8, &lo), SAGA_OK);
    lo.act = SAGA_LAYER_NONE;
    assert_int_equal(saga_gcn_add(net, m, "gcn2", 8, D.C, &lo), SAGA_OK);
    int32_t ns = 0;
    int32_t *train = seed_list(&ns); /* the listed vertices; the batch, its first 20 */
    assert_int_equal(saga_net_set_loss_cross_entropy(net, D.labels, train, ns), SAGA_OK);
    assert_int_equal(saga_net_set_input(net, D.x, D.F), SAGA_OK);
    const int32_t fan[2] = {5, 5};
    saga_sampler_opts so = saga_sampler_opts_defaults();
    so.self_loops = SAGA_DGRAPH_SELF_LOOPS_ADD;
    saga_sampler *s = NULL;
    saga_sample *smp = NULL;
    assert_int_equal(saga_sampler_new(&s, D.g, fan, 2, &so), SAGA_OK);
    assert_int_equal(saga_sampler_sample(s, train, 20, 0, &smp), SAGA_OK);
    float logits[20 * 8];
    assert_true(D.C <= 8);
    assert_int_equal(saga_net_forward_sample(net, smp, logits), SAGA_OK);
    double loss = 0, want = 0, mag = 0;
    assert_int_equal(saga_net_train_sample(net, smp, &loss), SAGA_OK);
    for (int i = 0; i < 20; i++) {
        const float *z = logits + i * D.C;
        double mx = z[0], sum = 0;
        for (int k = 1; k < D.C; k++)
            mx = z[k] > mx ? z[k] : mx;
        for (int k = 0; k < D.C; k++)
            sum += exp(z[k] - mx);
        want += (-(z[D.labels[train[i]]] - mx) + log(sum)) / 20;
        mag += (fabs(z[D.labels[train[i]]] - mx) + fabs(log(sum))) / 20;
    }
    /* the log-softmax over C classes and the mean over 20 rows, in f32 */
    assert_true(fabs(loss - want) <= 2 * (D.C + 20 + 8) * SAGA_TEST_U32 * mag);
    /* gradients reached the first layer's weights */
    saga_tensor *g = saga_grad(saga_model_find(m, "gcn1.weight"));
    assert_non_null(g);
    float *gh = test_malloc(saga_tensor_nbytes(g));
    assert_int_equal(saga_tensor_to_host(g, gh), SAGA_OK);
    double gsum = 0;
    for (int64_t i = 0; i < saga_tensor_rows(g) * saga_tensor_cols(g); i++)
        gsum += fabs(gh[i]);
    assert_true(gsum > 0);
    test_free(gh);
    saga_sample_free(&smp);
    saga_sampler_free(&s);
    test_free(train);
    saga_net_free(&net);
    saga_model_free(&m);
    saga_ctx_free(&c);
    saga_backend_free_all(&be);
}

/* The device bytes each batch of an epoch peaks at (its pass's own: saga_net_stats),
 * the training vertices (all of them, shuffled) cut into n_batches by cost; their largest over
 * their smallest. */
static double peak_spread(const net_data *d, double per_edge, double per_row, int n_batches,
                          const char *what) {
    gcn_net t; /* dropout 0.3 */
    gcn_net_open(&t, d, &GCN, 0.3f);
    saga_net *net = t.net;
    saga_backend *be = t.be;
    assert_int_equal(saga_net_set_input(net, d->x, d->F), SAGA_OK);
    const int32_t fan[2] = {10, 5};
    saga_sampler_opts so = saga_sampler_opts_defaults();
    so.self_loops = SAGA_DGRAPH_SELF_LOOPS_ADD;
    saga_sampler *s = NULL;
    assert_int_equal(saga_sampler_new(&s, d->g, fan, 2, &so), SAGA_OK);
    int32_t *seeds = shuffled(d->n, 5);
    int64_t first[257];
    assert_true(n_batches <= 256);
    if (per_edge + per_row > 0)
        assert_int_equal(saga_sampler_pack(s, seeds, d->n, n_batches, 0, per_edge, per_row, first),
                         SAGA_OK);
    else
        for (int b = 0; b <= n_batches; b++) /* equal seed counts */
            first[b] = (int64_t)d->n * b / n_batches;
    size_t lo = SIZE_MAX, hi = 0;
    for (int b = 0; b < n_batches; b++) {
        saga_sample *smp = NULL;
        assert_true(first[b + 1] > first[b]);
        assert_int_equal(
            saga_sampler_sample(s, seeds + first[b], first[b + 1] - first[b], (uint64_t)b, &smp),
            SAGA_OK);
        saga_backend_stats bs;
        saga_backend_get_stats(be, &bs);
        const size_t base = bs.in_use_bytes;
        saga_backend_reset_stats(be);
        double loss = 0;
        assert_int_equal(saga_net_train_sample(net, smp, &loss), SAGA_OK);
        saga_backend_get_stats(be, &bs);
        /* the pass's own memory (the net's figure), and the backend's peak above what was held
         * before: the same but for what the input rows' slots grew by and their size */
        saga_net_stats ns;
        saga_net_get_stats(net, &ns);
        const size_t peak = ns.peak_device_bytes;
        assert_true(ns.input_bytes > 0 && peak > ns.input_bytes);
        assert_true(peak <= bs.peak_bytes - base + ns.input_bytes);
        lo = peak < lo ? peak : lo;
        hi = peak > hi ? peak : hi;
        saga_sample_free(&smp);
    }
    print_message("  %s: %d batches, peaks %zu .. %zu bytes, spread %.3f\n", what, n_batches, lo,
                  hi, (double)hi / (double)lo);
    test_free(seeds);
    saga_sampler_free(&s);
    gcn_net_close(&t);
    return (double)hi / (double)lo;
}

/* An R-MAT graph (2^12 vertices, undirected, Graph500's skew: hubs beside many vertices of
 * degree 0 to 2) with random rows and classes. */
static void rmat_data(net_data *d) {
    saga_rmat_params p = saga_rmat_params_defaults();
    p.scale = 12;
    p.edge_factor = 8;
    saga_graph_opts go = saga_graph_opts_defaults();
    go.undirected = true;
    assert_int_equal(saga_rmat_graph(&d->g, &p, &go), SAGA_OK);
    d->n = saga_graph_n_vertices(d->g);
    d->F = 40;
    d->C = 5;
    d->x = saga_malloc((size_t)d->n * (size_t)d->F * sizeof *d->x);
    d->labels = saga_malloc((size_t)d->n * sizeof *d->labels);
    assert_true(d->x && d->labels);
    uint64_t r = 17;
    for (int64_t i = 0; i < (int64_t)d->n * d->F; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        d->x[i] = (float)((r >> 40) % 1000) / 1000.0f;
    }
    for (int32_t v = 0; v < d->n; v++)
        d->labels[v] = v % d->C;
}

/* On a power-law graph, batches of equal seed counts peak unevenly (a batch of hubs against one
 * of leaves); batches packed by their samples' memory (or rows) peak within 15% of each other,
 * by their edges alone within 20%. */
static void test_net_sample_balanced_batches_even_peaks(void **state) {
    (void)state;
    net_data R = {0};
    rmat_data(&R);
    /* 128 batches of 32 seeds; the memory's weights: an edge's indices and values on the device
     * (source, destination, transposed, values both ways), a row's input, dropout mask and
     * activations of the model's widths */
    const double mem_edge = 28, mem_row = 4 * (40 + 40 + 16 * 3 + 5 * 3);
    const double fixed = peak_spread(&R, 0, 0, 128, "equal seed counts");
    const double edges = peak_spread(&R, 1, 0, 128, "balanced by edges");
    const double rows = peak_spread(&R, 0, 1, 128, "balanced by rows");
    const double mem = peak_spread(&R, mem_edge, mem_row, 128, "balanced by memory");
    assert_true(fixed >= 1.5);
    assert_true(mem <= 1.15);
    assert_true(rows <= 1.15);
    assert_true(edges <= 1.2);
    net_data_free(&R);
}

/* A sample of another depth, a row outside the graph, a net without a loss: refused, and the net
 * trains on a right sample afterwards. */
static void test_net_sample_refusals(void **state) {
    (void)state;
    data_load();
    saga_backend *be = NULL;
    saga_ctx *c = NULL;
    saga_model *m = NULL;
    open_cpu_model(&be, &c, &m);
    layer l1, l2;
    net_model_params(m, &D, 16, &l1, &l2);
    saga_net *net = NULL;
    assert_int_equal(saga_net_new(&net, c, D.g, NULL), SAGA_OK);
    net_model_stages(net, &GCN, &D, 16, &l1, &l2);
    assert_int_equal(saga_net_set_input(net, D.x, D.F), SAGA_OK);
    const int32_t fan[2] = {4, 4}, seeds[3] = {10, 20, 30};
    saga_sampler *s1 = NULL, *s2 = NULL;
    saga_sample *one = NULL, *two = NULL;
    assert_int_equal(saga_sampler_new(&s1, D.g, fan, 1, NULL), SAGA_OK);
    assert_int_equal(saga_sampler_new(&s2, D.g, fan, 2, NULL), SAGA_OK);
    assert_int_equal(saga_sampler_sample(s1, seeds, 3, 0, &one), SAGA_OK);
    assert_int_equal(saga_sampler_sample(s2, seeds, 3, 0, &two), SAGA_OK);
    double loss = 0;
    assert_int_equal(saga_net_train_sample(net, two, &loss), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("no loss function", NULL);
    loss_ctx lc = {D.labels, D.n};
    assert_int_equal(saga_net_set_loss(net, nll_rows, &lc), SAGA_OK);
    assert_int_equal(saga_net_train_sample(net, one, &loss), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("2 program stages, the sample 1 layers", NULL);
    const int32_t keep = two->ids[two->n_ids - 1];
    two->ids[two->n_ids - 1] = D.n;
    assert_int_equal(saga_net_train_sample(net, two, &loss), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("outside the net's graph", NULL);
    two->ids[two->n_ids - 1] = keep;
    assert_int_equal(saga_net_train_sample(net, two, &loss), SAGA_OK);
    assert_true(loss > 0);
    saga_sample_free(&one);
    saga_sample_free(&two);
    saga_sampler_free(&s1);
    saga_sampler_free(&s2);
    saga_net_free(&net);
    saga_model_free(&m);
    saga_ctx_free(&c);
    saga_backend_free_all(&be);
}

/* Six SGD steps of the two-layer GCN (dropout 0.3) on samples of cut fan-outs, on a CPU backend:
 * each pass waiting for its loss (queued false), or queued and its loss taken after the next pass
 * is queued. The losses into loss, the outputs after the steps into out (test_malloc'd). */
static void queued_run(int depth, double *loss, float **out) {
    gcn_net t;
    memset(&t, 0, sizeof t);
    if (on_cuda)
        assert_int_equal(saga_backend_open(&t.be, "cuda", NULL), SAGA_OK);
    else
        assert_int_equal(saga_backend_cpu_new(&t.be, NULL), SAGA_OK);
    assert_int_equal(saga_ctx_new(&t.c, t.be, 3), SAGA_OK);
    assert_int_equal(saga_model_new(&t.m, t.be), SAGA_OK);
    net_model_params(t.m, &D, 16, &t.l1, &t.l2);
    t.l1.dropout = t.l2.dropout = 0.3f;
    saga_net_opts no = saga_net_opts_defaults();
    no.self_loops = SAGA_DGRAPH_SELF_LOOPS_ADD;
    assert_int_equal(saga_net_new(&t.net, t.c, D.g, &no), SAGA_OK);
    net_model_stages(t.net, &GCN, &D, 16, &t.l1, &t.l2);
    t.lc = (loss_ctx){D.labels, D.n};
    assert_int_equal(saga_net_set_loss(t.net, nll_rows, &t.lc), SAGA_OK);
    assert_int_equal(saga_net_set_input(t.net, D.x, D.F), SAGA_OK);
    saga_optim *opt = NULL;
    saga_optim_opts oo = saga_optim_opts_defaults(SAGA_OPTIM_SGD);
    oo.lr = 0.5f;
    assert_int_equal(saga_optim_new(&opt, t.m, &oo), SAGA_OK);
    const int32_t fan[2] = {4, 3};
    saga_sampler *s = NULL;
    saga_sampler_opts so = saga_sampler_opts_defaults();
    so.self_loops = SAGA_DGRAPH_SELF_LOOPS_ADD;
    assert_int_equal(saga_sampler_new(&s, D.g, fan, 2, &so), SAGA_OK);
    int32_t *perm = shuffled(D.n, 5);
    int taken = 0;
    for (int b = 0; b < 6; b++) {
        saga_sample *smp = NULL;
        /* batches of 140 down to 40 seeds: the slots are made for the first two and used by
         * turns after them */
        const int32_t count = 140 - 20 * b;
        assert_int_equal(saga_sampler_sample(s, perm + 150 * b, count, (uint64_t)b, &smp), SAGA_OK);
        if (depth > 0) {
            assert_int_equal(saga_net_train_sample_queue(t.net, smp), SAGA_OK);
        } else {
            assert_int_equal(saga_net_train_sample(t.net, smp, &loss[b]), SAGA_OK);
            taken++;
        }
        saga_sample_free(&smp); /* a queued pass does not read its sample */
        assert_int_equal(saga_optim_step(opt), SAGA_OK);
        while (b + 1 - taken > depth) /* at most depth passes queued whose losses wait */
            assert_int_equal(saga_net_train_sample_take(t.net, &loss[taken++]), SAGA_OK);
    }
    while (taken < 6)
        assert_int_equal(saga_net_train_sample_take(t.net, &loss[taken++]), SAGA_OK);
    *out = test_malloc((size_t)D.n * (size_t)D.C * sizeof **out);
    assert_int_equal(saga_net_forward(t.net, *out), SAGA_OK);
    test_free(perm);
    saga_sampler_free(&s);
    saga_optim_free(&opt);
    gcn_net_close(&t);
}

/* Passes queued and their losses taken one pass late, or all six queued before the first is
 * taken, train what passes that wait train, to the bit: the same kernels in the same order. On
 * the CUDA simulator (SAGA_TEST_DEVICE=cuda, cudasim_net_sample) the host runs passes ahead of
 * the device, and a pass that did not wait for its input's copy changes the bits (a mutant
 * without that wait fails here). Then (on the CPU) the queue's refusals: a waiting pass or a
 * ninth queued one while losses wait, a take with none queued. */
static void test_net_sample_queued_passes(void **state) {
    (void)state;
    data_load();
    double want[6];
    float *a = NULL;
    queued_run(0, want, &a);
    for (int depth = 1; depth <= 6; depth += 5) {
        double got[6];
        float *b = NULL;
        queued_run(depth, got, &b);
        for (int i = 0; i < 6; i++)
            if (!(want[i] > 0) || got[i] != want[i])
                fail_msg("%d queued, batch %d: loss %.9g, waiting %.9g", depth, i, got[i], want[i]);
        assert_memory_equal(a, b, (size_t)D.n * (size_t)D.C * sizeof *a);
        test_free(b);
    }
    print_message("  losses %.9g .. %.9g, the same with 1 and 6 queued%s\n", want[0], want[5],
                  on_cuda ? " (cuda)" : "");
    test_free(a);
    if (on_cuda)
        return;
    gcn_net t;
    gcn_net_open(&t, &D, &GCN, 0);
    assert_int_equal(saga_net_set_input(t.net, D.x, D.F), SAGA_OK);
    const int32_t fan[2] = {4, 4}, seeds[3] = {10, 20, 30};
    saga_sampler *s = NULL;
    saga_sample *smp = NULL;
    assert_int_equal(saga_sampler_new(&s, D.g, fan, 2, NULL), SAGA_OK);
    assert_int_equal(saga_sampler_sample(s, seeds, 3, 0, &smp), SAGA_OK);
    double loss = 0, first = 0;
    assert_int_equal(saga_net_train_sample_take(t.net, &loss), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("no training pass over a sample is queued", NULL);
    for (int i = 0; i < SAGA_NET_SAMPLES_QUEUED; i++)
        assert_int_equal(saga_net_train_sample_queue(t.net, smp), SAGA_OK);
    assert_int_equal(saga_net_train_sample_queue(t.net, smp), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("8 passes' losses wait to be taken", NULL);
    assert_int_equal(saga_net_train_sample(t.net, smp, &loss), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("8 queued passes' losses are still to be taken", NULL);
    /* no step between them: the same sample, the same parameters, the same loss */
    assert_int_equal(saga_net_train_sample_take(t.net, &first), SAGA_OK);
    for (int i = 1; i < SAGA_NET_SAMPLES_QUEUED; i++) {
        assert_int_equal(saga_net_train_sample_take(t.net, &loss), SAGA_OK);
        assert_true(loss == first);
    }
    assert_int_equal(saga_net_train_sample(t.net, smp, &loss), SAGA_OK);
    assert_true(loss == first && first > 0);
    saga_sample_free(&smp);
    saga_sampler_free(&s);
    gcn_net_close(&t);
}

/* Every allocation of a training step on a sample failing in turn: the step fails with
 * SAGA_ERR_OUT_OF_MEMORY, nothing leaks, and the next step on the same net trains as a net that
 * never failed does. */
static void test_net_sample_failing_allocations(void **state) {
    (void)state;
    data_load();
    const int32_t fan[2] = {4, 4}, seeds[5] = {10, 20, 30, 40, 50};
    double want = 0;
    int failures = 0;
    bool ok = false;
    for (long k = 0; k < 400 && !ok; k++) {
        gcn_net t;
        gcn_net_open(&t, &D, &GCN, 0);
        saga_net *net = t.net;
        assert_int_equal(saga_net_set_input(net, D.x, D.F), SAGA_OK);
        saga_sampler *s = NULL;
        saga_sample *smp = NULL;
        assert_int_equal(saga_sampler_new(&s, D.g, fan, 2, NULL), SAGA_OK);
        assert_int_equal(saga_sampler_sample(s, seeds, 5, 0, &smp), SAGA_OK);
        double loss = 0;
        if (k == 0) { /* the reference: no failure */
            assert_int_equal(saga_net_train_sample(net, smp, &want), SAGA_OK);
        } else {
            saga_test_fail_alloc_after(k);
            saga_status st = saga_net_train_sample(net, smp, &loss);
            saga_test_fail_alloc_after(0);
            if (st == SAGA_OK) {
                ok = true;
                assert_true(loss == want);
            } else {
                assert_int_equal(st, SAGA_ERR_OUT_OF_MEMORY);
                failures++;
                /* the same net recovers: a step after the failure gives the reference's loss */
                assert_int_equal(saga_net_train_sample(net, smp, &loss), SAGA_OK);
                assert_true(loss == want);
            }
        }
        saga_sample_free(&smp);
        saga_sampler_free(&s);
        gcn_net_close(&t);
    }
    assert_true(ok);
    assert_true(failures >= 10);
}

static int teardown(void **state) {
    (void)state;
    net_data_free(&D);
    return 0;
}

int main(void) {
    const char *dev = getenv("SAGA_TEST_DEVICE");
    on_cuda = dev && strcmp(dev, "cuda") == 0;
    const struct CMUnitTest on_gpu[] = {
        cmocka_unit_test(test_net_sample_queued_passes),
    };
    if (on_cuda) /* the CUDA simulator: the queue's order of copies and passes */
        return cmocka_run_group_tests(on_gpu, NULL, teardown);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_net_sample_whole_neighbourhoods_train_as_the_graph),
        cmocka_unit_test(test_net_sample_cut_neighbourhoods),
        cmocka_unit_test(test_net_sample_cross_entropy_is_the_batch_mean),
        cmocka_unit_test(test_net_sample_balanced_batches_even_peaks),
        cmocka_unit_test(test_net_sample_refusals),
        cmocka_unit_test(test_net_sample_queued_passes),
        cmocka_unit_test(test_net_sample_failing_allocations),
    };
    return cmocka_run_group_tests(tests, NULL, teardown);
}
