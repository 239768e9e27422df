/* test_net.c - the graph-network executor: streamed under budgets 4x and 16x smaller than the
 * in-memory peak, it gives the in-memory results (a GCN with fused programs, a GAT-like batched
 * program with edge softmax), the in-memory run agrees with the same model written with
 * saga_program_run, the allocator's peak never passes the budget, METIS moves fewer bytes than
 * a random partition, a budget too small names one that works (and every budget between it and
 * the in-memory peak runs), and the host arrays the scheduler copies asynchronously come from the
 * backend's (pinned) host allocator. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"

#include "half_impl.h"
#include "net_impl.h"
#include "net_models.h"
#include "nn_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static net_data D;
static saga_program GAT;       /* several batches per block */
static bool HOST_HALOS;        /* saga_net_opts.host_halos of the runs of run_model */
static saga_transfer TRANSFER; /* saga_net_opts.transfer of the runs of run_model */
static saga_copies COPIES;     /* saga_backend_params.copies of the runs of run_model */

static void data_load(void) {
    net_data_load(&D, 3000, 6, 48, 10, 7);
    GAT = gat_program(5000);
}

/* run_model gives the net its input as a CSR of D.x's non-zeros instead of dense rows */
static bool sparse_input;
/* when >= 0, run_model gives it dense rows through saga_net_set_input_auto at this density */
static double auto_density = -1;

/* A loss over the listed vertices only (in[v]): the mean NLL over them, as a node
 * classification's training vertices; max_count records the largest block it saw, and unlisted
 * the rows it saw outside the list when the net was given the list (none should reach it). */
typedef struct listed_ctx {
    const int32_t *labels;
    const uint8_t *in;
    int32_t n_listed, max_count;
    const int32_t *list; /* what run_model passes to saga_net_set_loss_rows, when given */
    int64_t n_list;
    int calls; /* of the loss */
    int64_t unlisted;
} listed_ctx;

static saga_tensor *nll_listed(saga_ctx *c, const saga_vertex_in *v, const int32_t *ids, void *u) {
    listed_ctx *lc = u;
    int32_t *lab = test_malloc((size_t)v->count * sizeof *lab + 4);
    int32_t *rows = test_malloc((size_t)v->count * sizeof *rows + 4);
    int32_t k = 0;
    for (int32_t i = 0; i < v->count; i++)
        if (lc->in[ids[i]]) {
            lab[k] = lc->labels[ids[i]];
            rows[k++] = i;
        } else if (lc->list) {
            lc->unlisted++;
        }
    lc->max_count = v->count > lc->max_count ? v->count : lc->max_count;
    lc->calls++;
    saga_tensor *lt = saga_ctx_from_host(c, SAGA_I32, k, 1, lab);
    saga_tensor *rt = saga_ctx_from_host(c, SAGA_I32, k, 1, rows);
    test_free(lab);
    test_free(rows);
    if (k == 0)
        return saga_affine(c, saga_sum(c, v->self), 0.0f, 0.0f);
    saga_tensor *l =
        saga_nll_loss(c, saga_log_softmax(c, saga_gather_rows(c, v->self, rt)), lt, NULL);
    return saga_affine(c, l, (float)k / (float)lc->n_listed, 0.0f);
}

/* run_model's loss is nll_listed over LISTED when set (with saga_net_set_loss_rows when
 * LISTED->list is), else nll_rows over every vertex */
static listed_ctx *LISTED;

/* every: the loss over the listed vertices (in, n_in of them) that picks them itself; sub: the
 * same loss given the list (n_list entries) through saga_net_set_loss_rows. */
static void listed_pair(const uint8_t *in, int32_t n_in, const int32_t *list, int64_t n_list,
                        listed_ctx *every, listed_ctx *sub) {
    *every = (listed_ctx){D.labels, in, n_in, 0, NULL, 0, 0, 0};
    *sub = *every;
    sub->list = list;
    sub->n_list = n_list;
}

/* run_model sets the input again, doubled, before its second step */
static bool change_input;

/* run_model's graph when set, else D.g */
static saga_graph *GRAPH;

/* The data's input rows times scale, as sparse_input and auto_density say. */
static void set_rows(saga_net *net, float scale) {
    float *x = test_malloc((size_t)D.n * (size_t)D.F * sizeof *x);
    for (int64_t i = 0; i < (int64_t)D.n * D.F; i++)
        x[i] = scale * D.x[i];
    if (sparse_input) {
        int64_t *off = test_malloc(((size_t)D.n + 1) * sizeof *off), nnz = 0;
        int32_t *idx = test_malloc((size_t)D.n * (size_t)D.F * sizeof *idx);
        float *val = test_malloc((size_t)D.n * (size_t)D.F * sizeof *val);
        off[0] = 0;
        for (int32_t v = 0; v < D.n; v++) {
            for (int32_t j = 0; j < D.F; j++)
                if (x[(int64_t)v * D.F + j] != 0.0f) {
                    idx[nnz] = j;
                    val[nnz++] = x[(int64_t)v * D.F + j];
                }
            off[v + 1] = nnz;
        }
        assert_int_equal(saga_net_set_input_csr(net, off, idx, val, D.F), SAGA_OK);
        test_free(off);
        test_free(idx);
        test_free(val);
    } else if (auto_density >= 0) {
        assert_int_equal(saga_net_set_input_auto(net, x, D.F, auto_density), SAGA_OK);
    } else {
        assert_int_equal(saga_net_set_input(net, x, D.F), SAGA_OK);
    }
    test_free(x);
}

typedef struct run_out {
    double loss[3];
    float *out; /* n x C after three SGD steps */
    saga_net_stats st[3];
    size_t peak;
    /* with FWD_ROWS: saga_net_forward_rows of them after the steps, and the rows the stages
     * computed in that call and in saga_net_forward's */
    float *rows_out;
    int64_t rows_computed, rows_computed_all;
    uint64_t floor_all;     /* saga_net_forward's h2d_floor_bytes */
    saga_net_stats rows_st; /* that call's */
    char explain[4096];     /* with EXPLAIN: saga_net_explain after the steps */
    float evals[3][80];     /* with EVAL_ROWS: the inference of the first 10 rows after step i */
} run_out;

/* Of a training step's stats: how many stages after the first computed fewer than every row, and
 * the rows the first computed when fewer than every row (0 when it ran every row). The per-stage
 * rows add up to rows_computed. */
static int fewer_rows_stages(const saga_net_stats *st) {
    int k = 0;
    int64_t sum = 0;
    assert_true(st->stages > 0 && st->stages <= SAGA_NET_STAGE_ROWS);
    for (int s = 0; s < st->stages; s++) {
        assert_true(st->stage_rows[s] > 0 && st->stage_rows[s] <= D.n);
        sum += st->stage_rows[s];
        k += s > 0 && st->stage_rows[s] < D.n;
    }
    assert_int_equal(sum, st->rows_computed);
    return k;
}

static int64_t first_stage_rows(const saga_net_stats *st) {
    (void)fewer_rows_stages(st);
    return st->stage_rows[0] < D.n ? st->stage_rows[0] : 0;
}

static bool EXPLAIN;
static const int32_t *FWD_ROWS;
static int64_t N_FWD_ROWS;
/* EVAL_ROWS: an inference of the first 10 rows after the second and third steps' optimizer
 * steps; QUEUED: the
 * steps by saga_net_train_queue, their losses and figures read by saga_net_train_result: the
 * first's after the input was set again (no inference after it), the second's at once (it
 * waits), the third's after its inference (whose wait covers it); LAGGED (with EVAL_ROWS): as an
 * epoch of `saga gcn`, each step queued with its optimizer step, then the inference after the
 * step before taken (saga_net_forward_rows_take), this step's queued, its loss read */
static bool EVAL_ROWS, QUEUED, LAGGED;

/* Builds the two-layer model on a fresh backend with the given budget and trains 3 SGD steps. */
static void run_model(run_out *r, const saga_program *prog, size_t budget, saga_exec exec,
                      int32_t parts, saga_partition_method pm, saga_saved saved) {
    data_load();
    saga_backend_params bp = saga_backend_params_defaults();
    bp.budget_bytes = budget;
    bp.copies = COPIES;
    saga_backend *be = NULL;
    assert_int_equal(saga_backend_cpu_new(&be, &bp), SAGA_OK);
    saga_ctx *c = NULL;
    assert_int_equal(saga_ctx_new(&c, be, 3), SAGA_OK);
    saga_model *m = NULL;
    assert_int_equal(saga_model_new(&m, be), SAGA_OK);
    const int H = 16;
    /* dropout on: streamed blocks must draw the masks of the whole graph's rows and edges */
    layer l1, l2;
    net_model_params(m, &D, H, &l1, &l2);
    saga_optim *opt = NULL;
    saga_optim_opts oo = saga_optim_opts_defaults(SAGA_OPTIM_SGD);
    oo.lr = 0.5f;
    assert_int_equal(saga_optim_new(&opt, m, &oo), SAGA_OK);

    saga_net_opts no = saga_net_opts_defaults();
    no.exec = exec;
    no.parts = parts;
    no.partition = pm;
    no.saved = saved;
    no.self_loops = SAGA_DGRAPH_SELF_LOOPS_ADD;
    no.host_halos = HOST_HALOS;
    no.transfer = TRANSFER;
    saga_net *net = NULL;
    assert_int_equal(saga_net_new(&net, c, GRAPH ? GRAPH : D.g, &no), SAGA_OK);
    net_model_stages(net, prog, &D, H, &l1, &l2);
    loss_ctx lc = {D.labels, D.n};
    if (LISTED) {
        assert_int_equal(saga_net_set_loss(net, nll_listed, LISTED), SAGA_OK);
        if (LISTED->list)
            assert_int_equal(saga_net_set_loss_rows(net, LISTED->list, LISTED->n_list), SAGA_OK);
    } else {
        assert_int_equal(saga_net_set_loss(net, nll_rows, &lc), SAGA_OK);
    }
    set_rows(net, 1.0f);
    r->peak = 0;
    const int32_t rows[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    assert_true(D.C <= 8);
    for (int i = 0; i < 3; i++) {
        if (i == 1 && change_input)
            set_rows(net, 2.0f);
        if (LAGGED) {
            assert_int_equal(saga_net_train_queue(net), SAGA_OK);
            assert_int_equal(saga_optim_step(opt), SAGA_OK);
            if (i > 1)
                assert_int_equal(saga_net_forward_rows_take(net, r->evals[i - 1]), SAGA_OK);
            if (i > 0)
                assert_int_equal(saga_net_forward_rows_queue(net, rows, 10), SAGA_OK);
            assert_int_equal(saga_net_train_result(net, &r->loss[i], &r->st[i]), SAGA_OK);
            continue;
        }
        if (QUEUED && i == 1) /* the first pass, queued through the input's change (which waits) */
            assert_int_equal(saga_net_train_result(net, &r->loss[0], &r->st[0]), SAGA_OK);
        saga_status st = QUEUED ? saga_net_train_queue(net) : saga_net_train_step(net, &r->loss[i]);
        if (st != SAGA_OK)
            fail_msg("train step %d: %s", i, saga_last_error());
        if (!QUEUED)
            saga_net_get_stats(net, &r->st[i]);
        assert_int_equal(saga_optim_step(opt), SAGA_OK);
        if (QUEUED && i == 1) /* waits */
            assert_int_equal(saga_net_train_result(net, &r->loss[i], &r->st[i]), SAGA_OK);
        if (EVAL_ROWS && i > 0)
            assert_int_equal(saga_net_forward_rows(net, rows, 10, r->evals[i]), SAGA_OK);
        if (QUEUED && i == 2) /* the inference's wait covered the pass */
            assert_int_equal(saga_net_train_result(net, &r->loss[i], &r->st[i]), SAGA_OK);
    }
    if (LAGGED) { /* the last step's inference */
        assert_int_equal(saga_net_forward_rows_take(net, r->evals[2]), SAGA_OK);
        assert_int_equal(saga_net_forward_rows_take(net, r->evals[2]), SAGA_ERR_INVALID_ARG);
    }
    for (int i = 0; i < 3; i++)
        r->peak = r->st[i].peak_device_bytes > r->peak ? r->st[i].peak_device_bytes : r->peak;
    r->explain[0] = '\0';
    if (EXPLAIN) {
        FILE *f = fmemopen(r->explain, sizeof r->explain, "w");
        assert_non_null(f);
        assert_int_equal(saga_net_explain(net, f), SAGA_OK);
        fclose(f);
    }
    r->out = test_malloc((size_t)D.n * (size_t)D.C * sizeof(float));
    assert_int_equal(saga_net_forward(net, r->out), SAGA_OK);
    r->rows_out = NULL;
    if (FWD_ROWS) {
        saga_net_stats fs;
        saga_net_get_stats(net, &fs);
        r->rows_computed_all = fs.rows_computed;
        r->floor_all = fs.h2d_floor_bytes;
        r->rows_out = test_malloc((size_t)N_FWD_ROWS * (size_t)D.C * sizeof(float) + 4);
        for (int k = 0; k < 2; k++) /* the second call reuses the first's plan */
            assert_int_equal(saga_net_forward_rows(net, FWD_ROWS, N_FWD_ROWS, r->rows_out),
                             SAGA_OK);
        saga_net_get_stats(net, &fs);
        r->rows_computed = fs.rows_computed;
        r->rows_st = fs;
    }
    saga_net_free(&net);
    saga_optim_free(&opt);
    saga_model_free(&m);
    saga_ctx_free(&c);
    saga_backend_free_all(&be);
}

/* a and b, two runs of run_model, agree within net_run_bounds (u16 as there). */
static void assert_same_run(const run_out *a, const run_out *b, double u16) {
    net_assert_close_runs(&D, 16, u16, a->loss, a->out, b->loss, b->out, "two runs of run_model");
}

/* a and b, two runs of run_model by the same kernels in the same order: the same bits. */
static void assert_same_bits(const run_out *a, const run_out *b) {
    for (int i = 0; i < 3; i++) {
        char what[32];
        snprintf(what, sizeof what, "step %d's loss", i);
        saga_test_assert_close_f64(what, &a->loss[i], &b->loss[i], 1, 0, 0);
    }
    saga_test_assert_close_f32("outputs", a->out, b->out, (int64_t)D.n * D.C, 0, 0);
}

/* Streamed under a budget that leaves room for the second stage's narrow input, that stage keeps
 * it whole on the device: the results are the in-memory ones, and fewer bytes cross each way
 * than when every halo goes through the host. */
static void check_resident(const saga_program *prog, saga_saved saved) {
    run_out mem, res, host;
    run_model(&mem, prog, 0, SAGA_EXEC_MEMORY, 0, SAGA_PARTITION_METIS, saved);
    size_t budget = 0;
    for (int div = 2; div <= 8 && !budget; div++) {
        run_model(&res, prog, mem.peak / (size_t)div, SAGA_EXEC_AUTO, 0, SAGA_PARTITION_METIS,
                  saved);
        if (res.st[2].streamed && res.st[2].resident_bytes)
            budget = mem.peak / (size_t)div;
        else
            test_free(res.out);
    }
    if (!budget)
        fail_msg("no budget from 1/2 to 1/8 of %zu kept a stage's input on the device", mem.peak);
    assert_true(res.peak <= budget);
    assert_same_run(&mem, &res, 0);
    HOST_HALOS = true;
    run_model(&host, prog, budget, SAGA_EXEC_AUTO, 0, SAGA_PARTITION_METIS, saved);
    HOST_HALOS = false;
    assert_true(host.st[2].streamed);
    assert_int_equal(host.st[2].resident_bytes, 0);
    assert_same_run(&host, &res, 0);
    print_message("  budget %zu: %d parts, resident %llu; h2d %llu, d2h %llu (through the host: "
                  "%llu, %llu); floor %llu\n",
                  budget, (int)res.st[2].parts, (unsigned long long)res.st[2].resident_bytes,
                  (unsigned long long)res.st[2].h2d_bytes, (unsigned long long)res.st[2].d2h_bytes,
                  (unsigned long long)host.st[2].h2d_bytes,
                  (unsigned long long)host.st[2].d2h_bytes,
                  (unsigned long long)res.st[2].h2d_floor_bytes);
    assert_true(res.st[2].h2d_bytes < host.st[2].h2d_bytes);
    assert_true(res.st[2].d2h_bytes < host.st[2].d2h_bytes);
    assert_true(res.st[2].h2d_floor_bytes > 0 && host.st[2].h2d_floor_bytes > 0);
    test_free(mem.out);
    test_free(res.out);
    test_free(host.out);
}

static void test_net_resident_halos(void **state) {
    (void)state;
    data_load();
    check_resident(&GCN, SAGA_SAVED_RECOMPUTE);
    check_resident(&GCN, SAGA_SAVED_OFFLOAD);
    check_resident(&GAT, SAGA_SAVED_RECOMPUTE);
    check_resident(&SAGE, SAGA_SAVED_RECOMPUTE);
}

/* Input rows and tile weights crossing in 16 bits. The generated features are word counts, exact
 * in bf16 and fp16; the GCN weights 1 / sqrt(d_u d_v) are not, so streamed training follows the
 * f32 run to their rounding (2^-9 of a weight in bf16, 2^-12 in fp16), far from what reading the
 * bits wrongly would give. The floor drops by exactly half the input and half the weights; in
 * memory the option changes nothing. */
/* Where the CPU's copies run (saga_backend_params.copies) moves time, never a bit: streamed at a
 * quarter of the peak, copies in order with the kernels and on a worker thread give the same
 * losses and outputs, the same bytes, and say which they were. */
static void test_net_copies_inline_or_worker(void **state) {
    (void)state;
    run_out mem, r[2];
    run_model(&mem, &GCN, 0, SAGA_EXEC_MEMORY, 0, SAGA_PARTITION_METIS, SAGA_SAVED_RECOMPUTE);
    for (int i = 0; i < 2; i++) {
        COPIES = i ? SAGA_COPIES_WORKER : SAGA_COPIES_INLINE;
        run_model(&r[i], &GCN, mem.peak / 4, SAGA_EXEC_AUTO, 0, SAGA_PARTITION_METIS,
                  SAGA_SAVED_RECOMPUTE);
        assert_true(r[i].st[2].streamed);
        assert_int_equal(r[i].st[2].copies_inline, i == 0);
        if (i == 0)
            assert_true(r[i].st[2].overlap == 0.0); /* nothing hidden */
    }
    COPIES = SAGA_COPIES_AUTO;
    assert_same_bits(&r[0], &r[1]);
    assert_memory_equal(r[0].out, r[1].out, (size_t)D.n * D.C * sizeof(float));
    for (int k = 0; k < 3; k++)
        assert_int_equal(r[0].st[k].h2d_bytes, r[1].st[k].h2d_bytes);
    assert_same_run(&mem, &r[0], 0);
    for (int i = 0; i < 2; i++)
        test_free(r[i].out);
    test_free(mem.out);
}

static void test_net_transfer_precision(void **state) {
    (void)state;
    data_load();
    for (int64_t i = 0; i < (int64_t)D.n * D.F; i++)
        assert_true(D.x[i] == saga_bf16_to_f32(saga_f32_to_bf16(D.x[i])) &&
                    D.x[i] == saga_fp16_to_f32(saga_f32_to_fp16(D.x[i])));
    run_out mem, m16, r32, r16[2];
    run_model(&mem, &GCN, 0, SAGA_EXEC_MEMORY, 0, SAGA_PARTITION_METIS, SAGA_SAVED_RECOMPUTE);
    size_t budget = mem.peak / 4;
    run_model(&r32, &GCN, budget, SAGA_EXEC_AUTO, 0, SAGA_PARTITION_METIS, SAGA_SAVED_RECOMPUTE);
    assert_true(r32.st[2].streamed);
    TRANSFER = SAGA_TRANSFER_BF16;
    run_model(&m16, &GCN, 0, SAGA_EXEC_MEMORY, 0, SAGA_PARTITION_METIS, SAGA_SAVED_RECOMPUTE);
    run_model(&r16[0], &GCN, budget, SAGA_EXEC_AUTO, 0, SAGA_PARTITION_METIS, SAGA_SAVED_RECOMPUTE);
    TRANSFER = SAGA_TRANSFER_FP16;
    run_model(&r16[1], &GCN, budget, SAGA_EXEC_AUTO, 0, SAGA_PARTITION_METIS, SAGA_SAVED_RECOMPUTE);
    TRANSFER = SAGA_TRANSFER_F32;
    assert_same_bits(&mem, &m16);
    assert_int_equal(m16.st[0].h2d_bytes, mem.st[0].h2d_bytes);
    const uint64_t input = (uint64_t)D.n * (uint64_t)D.F * 4;
    for (int i = 0; i < 2; i++) {
        assert_true(r16[i].st[2].streamed);
        assert_int_equal(r16[i].st[2].parts, r32.st[2].parts);
        assert_true(r16[i].peak <= r16[i].st[2].budget_bytes);
        assert_same_run(&r32, &r16[i], i ? SAGA_TEST_U_FP16 : SAGA_TEST_U_BF16);
        print_message("  %s: h2d %llu per step (f32 %llu, the input %llu), floor %llu (f32 %llu)\n",
                      i ? "fp16" : "bf16", (unsigned long long)r16[i].st[2].h2d_bytes,
                      (unsigned long long)r32.st[2].h2d_bytes, (unsigned long long)input,
                      (unsigned long long)r16[i].st[2].h2d_floor_bytes,
                      (unsigned long long)r32.st[2].h2d_floor_bytes);
        assert_true(r16[i].st[2].h2d_bytes < r32.st[2].h2d_bytes);
        /* the floor counts the input rows and each program stage's weights (one per entry of
         * A + I) once per pass (2), two bytes a value instead of four */
        const uint64_t weights = 2 * (uint64_t)(saga_graph_n_edges(D.g) + D.n) * 4;
        assert_int_equal(r32.st[2].h2d_floor_bytes - r16[i].st[2].h2d_floor_bytes, input + weights);
        test_free(r16[i].out);
    }
    test_free(mem.out);
    test_free(m16.out);
    test_free(r32.out);
}

static void check_streamed(const saga_program *prog, saga_saved saved) {
    run_out mem, s4, s16;
    run_model(&mem, prog, 0, SAGA_EXEC_MEMORY, 0, SAGA_PARTITION_METIS, saved);
    assert_false(mem.st[2].streamed);
    size_t peak = mem.peak;
    assert_true(peak > 0);
    run_model(&s4, prog, peak / 4, SAGA_EXEC_AUTO, 0, SAGA_PARTITION_METIS, saved);
    run_model(&s16, prog, peak / 16, SAGA_EXEC_AUTO, 0, SAGA_PARTITION_METIS, saved);
    const run_out *rs[2] = {&s4, &s16};
    for (int i = 0; i < 2; i++) {
        const run_out *r = rs[i];
        assert_true(r->st[2].streamed);
        assert_true(r->st[2].parts > 1);
        assert_true(r->peak <= r->st[2].budget_bytes);
        assert_true(r->st[2].h2d_bytes > 0);
        print_message("  budget %zu (1/%d of %zu): %d parts, peak %zu, h2d %llu, d2h %llu\n",
                      r->st[2].budget_bytes, i ? 16 : 4, peak, (int)r->st[2].parts, r->peak,
                      (unsigned long long)r->st[2].h2d_bytes,
                      (unsigned long long)r->st[2].d2h_bytes);
        assert_same_run(&mem, r, 0);
    }
    /* in memory nothing moves after the first load: the second step copies no input */
    assert_true(mem.st[1].h2d_bytes < mem.st[0].h2d_bytes);
    test_free(mem.out);
    test_free(s4.out);
    test_free(s16.out);
}

/* Sparse input rows: in memory and streamed (each part's rows moving as a CSR) they give the
 * losses and outputs of dense input (dropout 0.3 on: the same masks), with fewer bytes on the
 * device and moved. */
static void test_net_sparse_input_equals_dense(void **state) {
    (void)state;
    run_out dense, mem, s4, s16, d4;
    sparse_input = false;
    run_model(&dense, &GCN, 0, SAGA_EXEC_MEMORY, 0, SAGA_PARTITION_METIS, SAGA_SAVED_RECOMPUTE);
    run_model(&d4, &GCN, dense.peak / 4, SAGA_EXEC_AUTO, 0, SAGA_PARTITION_METIS,
              SAGA_SAVED_RECOMPUTE);
    sparse_input = true;
    run_model(&mem, &GCN, 0, SAGA_EXEC_MEMORY, 0, SAGA_PARTITION_METIS, SAGA_SAVED_RECOMPUTE);
    run_model(&s4, &GCN, dense.peak / 4, SAGA_EXEC_AUTO, 0, SAGA_PARTITION_METIS,
              SAGA_SAVED_RECOMPUTE);
    run_model(&s16, &GCN, dense.peak / 16, SAGA_EXEC_AUTO, 0, SAGA_PARTITION_RANDOM,
              SAGA_SAVED_OFFLOAD);
    sparse_input = false;
    assert_false(dense.st[2].sparse_input);
    assert_true(mem.st[2].sparse_input && !mem.st[2].streamed);
    assert_true(mem.st[2].input_bytes < dense.st[2].input_bytes);
    assert_same_run(&dense, &mem, 0);
    const run_out *rs[2] = {&s4, &s16};
    for (int i = 0; i < 2; i++) {
        assert_true(rs[i]->st[2].streamed && rs[i]->st[2].sparse_input);
        assert_true(rs[i]->peak <= rs[i]->st[2].budget_bytes);
        assert_same_run(&dense, rs[i], 0);
    }
    print_message("  input bytes: dense %zu, sparse %zu; streamed at 1/4: h2d dense %llu, sparse "
                  "%llu\n",
                  dense.st[2].input_bytes, mem.st[2].input_bytes,
                  (unsigned long long)d4.st[2].h2d_bytes, (unsigned long long)s4.st[2].h2d_bytes);
    assert_true(s4.st[2].h2d_bytes < d4.st[2].h2d_bytes);
    run_out *all[] = {&dense, &mem, &s4, &s16, &d4};
    for (int i = 0; i < 5; i++)
        test_free(all[i]->out);
}

/* Dense rows through saga_net_set_input_auto: under the density bound the net keeps them as the
 * CSR a caller would give (the same bits as saga_net_set_input_csr, in memory and streamed, and
 * the dense run's results), above it as dense rows (the same bits as saga_net_set_input). */
static void test_net_input_auto(void **state) {
    (void)state;
    data_load();
    int64_t nnz = 0;
    for (int64_t i = 0; i < (int64_t)D.n * D.F; i++)
        nnz += D.x[i] != 0.0f;
    const double density = (double)nnz / ((double)D.n * (double)D.F);
    assert_true(density > 0.01 && density < 0.9);
    run_out dense, csr, csr4, packed, packed4, kept;
    run_model(&dense, &GCN, 0, SAGA_EXEC_MEMORY, 0, SAGA_PARTITION_METIS, SAGA_SAVED_RECOMPUTE);
    sparse_input = true;
    run_model(&csr, &GCN, 0, SAGA_EXEC_MEMORY, 0, SAGA_PARTITION_METIS, SAGA_SAVED_RECOMPUTE);
    run_model(&csr4, &GCN, dense.peak / 4, SAGA_EXEC_AUTO, 0, SAGA_PARTITION_METIS,
              SAGA_SAVED_RECOMPUTE);
    sparse_input = false;
    auto_density = density; /* at the bound: kept as a CSR */
    run_model(&packed, &GCN, 0, SAGA_EXEC_MEMORY, 0, SAGA_PARTITION_METIS, SAGA_SAVED_RECOMPUTE);
    run_model(&packed4, &GCN, dense.peak / 4, SAGA_EXEC_AUTO, 0, SAGA_PARTITION_METIS,
              SAGA_SAVED_RECOMPUTE);
    auto_density = density * 0.99; /* just under: dense */
    run_model(&kept, &GCN, 0, SAGA_EXEC_MEMORY, 0, SAGA_PARTITION_METIS, SAGA_SAVED_RECOMPUTE);
    auto_density = -1;
    for (int i = 0; i < 3; i++) {
        assert_true(packed.st[i].sparse_input && packed.st[i].input_packed);
        assert_true(packed4.st[i].sparse_input && packed4.st[i].input_packed);
        assert_true(packed4.st[i].streamed);
        assert_false(csr.st[i].input_packed || dense.st[i].input_packed);
        assert_false(kept.st[i].sparse_input || kept.st[i].input_packed);
    }
    assert_int_equal(packed.st[2].input_bytes, csr.st[2].input_bytes);
    assert_int_equal(packed4.st[2].h2d_bytes, csr4.st[2].h2d_bytes);
    assert_true(packed.st[2].input_bytes < dense.st[2].input_bytes);
    assert_same_bits(&csr, &packed);
    assert_same_bits(&csr4, &packed4);
    assert_same_bits(&dense, &kept);
    assert_same_run(&dense, &packed, 0);
    print_message("  density %.3f: input bytes dense %zu, kept as a CSR %zu\n", density,
                  dense.st[2].input_bytes, packed.st[2].input_bytes);
    run_out *all[] = {&dense, &csr, &csr4, &packed, &packed4, &kept};
    for (int i = 0; i < 6; i++)
        test_free(all[i]->out);
}

/* saga_net_set_input_auto's refusals and later calls: a bound outside [0, 1], a net given a CSR;
 * a program first keeps the rows dense (and cannot be marked by saga_net_set_dense_rows); after a
 * run on the CSR new values with the same non-zero counts are taken (and change the output),
 * changed counts are refused. */
static void test_net_input_auto_calls(void **state) {
    (void)state;
    data_load();
    saga_backend *be = NULL;
    saga_ctx *c = NULL;
    saga_model *m = NULL;
    open_cpu_model(&be, &c, &m);
    layer l1, l2;
    net_model_params(m, &D, 16, &l1, &l2);
    saga_net_opts no = saga_net_opts_defaults();
    no.exec = SAGA_EXEC_MEMORY;
    no.self_loops = SAGA_DGRAPH_SELF_LOOPS_ADD;
    saga_net *net = NULL;
    loss_ctx lc = {D.labels, D.n};

    /* a program first: dense */
    assert_int_equal(saga_net_new(&net, c, D.g, &no), SAGA_OK);
    assert_int_equal(saga_net_add_program(net, &GCN, &l1, D.F), SAGA_OK);
    int64_t *off = test_calloc((size_t)D.n + 1, sizeof *off); /* an empty CSR */
    assert_int_equal(saga_net_set_input_auto(net, D.x, D.F, 1.0), SAGA_OK);
    assert_int_equal(saga_net_set_input_csr(net, off, NULL, NULL, D.F),
                     SAGA_ERR_INVALID_ARG); /* the net's input is dense */
    assert_int_equal(saga_net_set_dense_rows(net), SAGA_ERR_INVALID_ARG); /* not a vertex stage */
    saga_net_free(&net);
    assert_int_equal(saga_net_new(&net, c, D.g, &no), SAGA_OK);
    assert_int_equal(saga_net_set_dense_rows(net), SAGA_ERR_INVALID_ARG); /* no stage */
    saga_net_free(&net);

    assert_int_equal(saga_net_new(&net, c, D.g, &no), SAGA_OK);
    net_model_stages(net, &GCN, &D, 16, &l1, &l2);
    assert_int_equal(saga_net_set_loss(net, nll_rows, &lc), SAGA_OK);
    assert_int_equal(saga_net_set_input_auto(net, D.x, D.F, -0.1), SAGA_ERR_INVALID_ARG);
    assert_int_equal(saga_net_set_input_auto(net, D.x, D.F, 1.5), SAGA_ERR_INVALID_ARG);
    assert_int_equal(saga_net_set_input_auto(net, D.x, D.F, 1.0), SAGA_OK);
    double loss = 0;
    assert_int_equal(saga_net_train_step(net, &loss), SAGA_OK);
    saga_net_stats st;
    saga_net_get_stats(net, &st);
    assert_true(st.input_packed);
    float *a = test_malloc((size_t)D.n * (size_t)D.C * sizeof *a);
    float *b = test_malloc((size_t)D.n * (size_t)D.C * sizeof *b);
    float *x = test_malloc((size_t)D.n * (size_t)D.F * sizeof *x);
    assert_int_equal(saga_net_forward(net, a), SAGA_OK);
    for (int64_t i = 0; i < (int64_t)D.n * D.F; i++)
        x[i] = 2.0f * D.x[i];
    assert_int_equal(saga_net_set_input_auto(net, x, D.F, 0.0), SAGA_OK); /* stays a CSR */
    assert_int_equal(saga_net_forward(net, b), SAGA_OK);
    assert_memory_not_equal(a, b, (size_t)D.n * (size_t)D.C * sizeof *a);
    int64_t z = 0;
    while (x[z] != 0.0f)
        z++;
    x[z] = 1.0f; /* one more non-zero in its row */
    assert_int_equal(saga_net_set_input_auto(net, x, D.F, 1.0), SAGA_ERR_INVALID_ARG);
    assert_non_null(strstr(saga_last_error(), "non-zero counts"));
    saga_net_free(&net);

    /* a CSR net refuses dense rows */
    assert_int_equal(saga_net_new(&net, c, D.g, &no), SAGA_OK);
    net_model_stages(net, &GCN, &D, 16, &l1, &l2);
    assert_int_equal(saga_net_set_input_csr(net, off, NULL, NULL, D.F), SAGA_OK);
    assert_int_equal(saga_net_set_input_auto(net, D.x, D.F, 1.0), SAGA_ERR_INVALID_ARG);
    saga_net_free(&net);
    test_free(off);
    test_free(a);
    test_free(b);
    test_free(x);
    saga_model_free(&m);
    saga_ctx_free(&c);
    saga_backend_free_all(&be);
}

/* Runs of the model in memory and streamed (a quarter of the peak, the copies on a worker, the
 * input set again between two steps, which waits for a queued pass first), with an inference of
 * 10 rows after the later steps, plain and with *mode set: the same bits (losses, outputs, the
 * inferences), and the same bytes moved and rows computed. */
static void check_queued(bool *mode) {
    EVAL_ROWS = true;
    change_input = true;
    COPIES = SAGA_COPIES_WORKER;
    run_out a, b, m;
    run_model(&m, &GCN, 0, SAGA_EXEC_MEMORY, 0, SAGA_PARTITION_METIS, SAGA_SAVED_RECOMPUTE);
    for (int k = 0; k < 2; k++) {
        const size_t budget = k ? m.peak / 4 : 0;
        const saga_exec ex = k ? SAGA_EXEC_AUTO : SAGA_EXEC_MEMORY;
        run_model(&a, &GCN, budget, ex, 0, SAGA_PARTITION_METIS, SAGA_SAVED_RECOMPUTE);
        *mode = true;
        run_model(&b, &GCN, budget, ex, 0, SAGA_PARTITION_METIS, SAGA_SAVED_RECOMPUTE);
        *mode = false;
        assert_same_bits(&a, &b);
        for (int i = 1; i < 3; i++)
            saga_test_assert_close_f32("rows", a.evals[i], b.evals[i], 10 * D.C, 0, 0);
        for (int i = 0; i < 3; i++) {
            assert_int_equal(a.st[i].streamed, k == 1);
            assert_int_equal(b.st[i].streamed, k == 1);
            assert_int_equal(a.st[i].parts, b.st[i].parts);
            assert_int_equal(a.st[i].h2d_bytes, b.st[i].h2d_bytes);
            assert_int_equal(a.st[i].d2h_bytes, b.st[i].d2h_bytes);
            assert_int_equal(a.st[i].rows_computed, b.st[i].rows_computed);
            assert_true(b.st[i].copy_seconds >= 0 && b.st[i].wait_seconds >= 0);
        }
        assert_true(b.peak <= (budget ? budget : a.peak));
        test_free(a.out);
        test_free(b.out);
    }
    test_free(m.out);
    EVAL_ROWS = false;
    change_input = false;
    COPIES = SAGA_COPIES_AUTO;
}

/* Training passes queued (saga_net_train_queue) and read after an inference or alone
 * (saga_net_train_result) give saga_net_train_step's. */
static void test_net_train_queued(void **state) {
    (void)state;
    check_queued(&QUEUED);
}

/* Inferences of chosen rows queued behind the next step and taken after it
 * (saga_net_forward_rows_queue, _take), as `saga gcn` evaluates an epoch, give
 * saga_net_forward_rows's after each step (streamed, the queued inference waits at once). */
static void test_net_rows_queued(void **state) {
    (void)state;
    check_queued(&LAGGED);
}

static void test_net_gcn_streamed_equals_memory(void **state) {
    (void)state;
    check_streamed(&GCN, SAGA_SAVED_RECOMPUTE);
}

/* The bounds still catch what changes a result by more than rounding: D's graph with one edge
 * dropped, or one edge doubled (a wrong weight: the aggregation counts it twice), trained in
 * memory, is outside net_run_bounds of D's own run at the outputs. (Not at the losses: one edge
 * of 27,000 moves a mean over 3,000 vertices by less than the rounding of its 3,000 terms may.) */
static void test_net_bounds_catch_mutants(void **state) {
    (void)state;
    data_load();
    run_out ref;
    run_model(&ref, &GCN, 0, SAGA_EXEC_MEMORY, 0, SAGA_PARTITION_METIS, SAGA_SAVED_RECOMPUTE);
    const net_bounds nb = net_run_bounds(&D, 16, 3, 0);
    const int64_t n = (int64_t)D.n * D.C;
    saga_csr in = saga_graph_in(D.g);
    const int64_t m = in.nnz;
    int32_t *src = test_malloc((size_t)(m + 1) * sizeof *src);
    int32_t *dst = test_malloc((size_t)(m + 1) * sizeof *dst);
    for (int32_t v = 0; v < D.n; v++)
        for (int64_t k = in.offsets[v]; k < in.offsets[v + 1]; k++) {
            src[k] = in.indices[k];
            dst[k] = v;
        }
    const int64_t e = m / 2; /* the mutated edge */
    print_message("  bounds: losses %.3g, %.3g, %.3g; outputs %.3g of their mean magnitude\n",
                  nb.loss[0], nb.loss[1], nb.loss[2], nb.out);
    for (int mutant = 0; mutant < 2; mutant++) {
        saga_graph_opts go = saga_graph_opts_defaults();
        go.duplicates = SAGA_DUPLICATES_KEEP;
        src[m] = src[e];
        dst[m] = dst[e];
        int64_t n_edges = m + 1;
        if (mutant == 0) { /* dropped: the last edge takes its place */
            src[e] = src[m - 1];
            dst[e] = dst[m - 1];
            n_edges = m - 1;
        }
        assert_int_equal(saga_graph_from_edges(&GRAPH, D.n, n_edges, src, dst, NULL, NULL, &go),
                         SAGA_OK);
        run_out r;
        run_model(&r, &GCN, 0, SAGA_EXEC_MEMORY, 0, SAGA_PARTITION_METIS, SAGA_SAVED_RECOMPUTE);
        saga_graph_free(&GRAPH);
        int64_t at;
        const double out =
            saga_test_worst_f32(ref.out, r.out, n, saga_test_mean_abs_f32(ref.out, n), &at);
        print_message("  %s edge %d -> %d: outputs %.3g times the bound, losses",
                      mutant ? "doubled" : "dropped", (int)src[m], (int)dst[m], out / nb.out);
        for (int k = 0; k < 3; k++)
            print_message(" %.3g", fabs(r.loss[k] - ref.loss[k]) / fabs(ref.loss[k]) / nb.loss[k]);
        print_message("\n");
        assert_true(out > nb.out);
        test_free(r.out);
        if (mutant == 0) { /* put the edge back */
            src[m - 1] = src[e];
            dst[m - 1] = dst[e];
            src[e] = src[m];
            dst[e] = dst[m];
        }
    }
    test_free(src);
    test_free(dst);
    test_free(ref.out);
}

static void test_net_gcn_offload_equals_memory(void **state) {
    (void)state;
    check_streamed(&GCN, SAGA_SAVED_OFFLOAD);
}

static void test_net_gat_streamed_equals_memory(void **state) {
    (void)state;
    check_streamed(&GAT, SAGA_SAVED_RECOMPUTE);
}

static void test_net_sage_streamed_equals_memory(void **state) {
    (void)state;
    check_streamed(&SAGE, SAGA_SAVED_OFFLOAD);
}

/* The in-memory net against the same model written layer by layer with saga_program_run. */
static void test_net_memory_equals_program_run(void **state) {
    (void)state;
    run_out mem;
    run_model(&mem, &GCN, 0, SAGA_EXEC_MEMORY, 0, SAGA_PARTITION_METIS, SAGA_SAVED_RECOMPUTE);
    const net_bounds nb = net_run_bounds(&D, 16, 3, 0);
    saga_backend *be = NULL;
    saga_ctx *c = NULL;
    saga_model *m = NULL;
    open_cpu_model(&be, &c, &m);
    const int H = 16;
    layer l1 = {.relu = true}, l2 = {.relu = false};
    l1.W = saga_model_param(m, "W1", D.F, H, SAGA_INIT_GLOROT, 11);
    l1.b = saga_model_param(m, "b1", 1, H, SAGA_INIT_ZEROS, 0);
    l2.W = saga_model_param(m, "W2", H, D.C, SAGA_INIT_GLOROT, 12);
    l2.b = saga_model_param(m, "b2", 1, D.C, SAGA_INIT_ZEROS, 0);
    saga_optim *opt = NULL;
    saga_optim_opts oo = saga_optim_opts_defaults(SAGA_OPTIM_SGD);
    oo.lr = 0.5f;
    assert_int_equal(saga_optim_new(&opt, m, &oo), SAGA_OK);
    saga_dgraph *dg = NULL;
    saga_dgraph_opts go = saga_dgraph_opts_defaults();
    go.self_loops = SAGA_DGRAPH_SELF_LOOPS_ADD;
    assert_int_equal(saga_dgraph_new(&dg, be, D.g, &go), SAGA_OK);
    saga_tensor *x = NULL, *lab = NULL;
    assert_int_equal(saga_tensor_from_host(&x, be, SAGA_F32, D.n, D.F, D.x), SAGA_OK);
    assert_int_equal(saga_tensor_from_host(&lab, be, SAGA_I32, D.n, 1, D.labels), SAGA_OK);
    float *out = test_malloc((size_t)D.n * (size_t)D.C * sizeof(float));
    for (int step = 0; step <= 3; step++) {
        saga_ctx_train(c, step < 3);
        saga_tensor *h = saga_matmul(c, saga_dropout(c, x, 0.3f), l1.W);
        h = saga_program_run(c, &GCN, dg, h, NULL, &l1);
        h = saga_matmul(c, saga_dropout(c, h, 0.3f), l2.W);
        h = saga_program_run(c, &GCN, dg, h, NULL, &l2);
        if (step == 3) {
            assert_int_equal(saga_tensor_to_host(h, out), SAGA_OK);
            break;
        }
        saga_tensor *loss = saga_nll_loss(c, saga_log_softmax(c, h), lab, NULL);
        assert_int_equal(saga_ctx_status(c), SAGA_OK);
        double l = saga_item(loss);
        saga_test_assert_close_f64("saga_program_run's loss against the net's", &l, &mem.loss[step],
                                   1, nb.loss[step], 0);
        assert_int_equal(saga_backward(c, loss), SAGA_OK);
        assert_int_equal(saga_optim_step(opt), SAGA_OK);
        saga_ctx_clear(c);
    }
    const int64_t n_out = (int64_t)D.n * D.C;
    saga_test_assert_close_f32("saga_program_run's outputs against the net's", out, mem.out, n_out,
                               nb.out, saga_test_mean_abs_f32(mem.out, n_out));
    test_free(out);
    test_free(mem.out);
    saga_ctx_free(&c);
    saga_tensor_free(&x);
    saga_tensor_free(&lab);
    saga_dgraph_free(&dg);
    saga_optim_free(&opt);
    saga_model_free(&m);
    saga_backend_free_all(&be);
}

/* With the same number of parts, METIS's halos are smaller than a random partition's, so a
 * streamed epoch moves fewer bytes. */
/* A two-layer GCN net of width H over d on a fresh CPU backend with budget (0: none), its model
 * named, the mean NLL over every row as its loss and the input set, not yet run (small_net_free
 * frees it all). */
typedef struct small_net {
    saga_backend *be;
    saga_ctx *c;
    saga_model *m;
    layer l1, l2;
    loss_ctx lc;
    saga_net *net;
} small_net;

static void small_net_new(small_net *s, const net_data *d, int H, size_t budget,
                          const saga_net_opts *no) {
    memset(s, 0, sizeof *s);
    saga_backend_params bp = saga_backend_params_defaults();
    bp.budget_bytes = budget;
    assert_int_equal(saga_backend_cpu_new(&s->be, &bp), SAGA_OK);
    assert_int_equal(saga_ctx_new(&s->c, s->be, 3), SAGA_OK);
    assert_int_equal(saga_model_new(&s->m, s->be), SAGA_OK);
    net_model_params(s->m, d, H, &s->l1, &s->l2);
    assert_int_equal(saga_net_new(&s->net, s->c, d->g, no), SAGA_OK);
    net_model_stages(s->net, &GCN, d, H, &s->l1, &s->l2);
    assert_int_equal(saga_net_set_model(s->net, s->m), SAGA_OK);
    s->lc = (loss_ctx){d->labels, d->n};
    assert_int_equal(saga_net_set_loss(s->net, nll_rows, &s->lc), SAGA_OK);
    assert_int_equal(saga_net_set_input(s->net, d->x, d->F), SAGA_OK);
}

static void small_net_free(small_net *s) {
    saga_net_free(&s->net);
    saga_model_free(&s->m);
    saga_ctx_free(&s->c);
    saga_backend_free_all(&s->be);
}

/* saga_net_set_loss_rows: in memory, the last stage runs on the listed rows alone (the loss sees
 * a block of just those) and gives the run of the same loss over every row, step by step;
 * streamed, fused or not (GAT), the same results. The list may be unsorted and repeat ids; an id
 * out of range, or a call after the first run, is refused. */
/* The loss over every stride-th vertex, without and with saga_net_set_loss_rows, in memory and
 * streamed (with the parts saga chose, and with the caller's). With few loss rows (one_step) a
 * streamed fused net runs its last stage on them in one step: one call of the loss per training
 * step. */
static int loss_rows_calls;    /* check_loss_rows: the loss's calls in its first streamed run */
static int64_t loss_rows_head; /* and the head's rows in its in-memory run with the list */

static void check_loss_rows(const saga_program *prog, int32_t stride, bool one_step) {
    data_load();
    uint8_t *in = test_calloc((size_t)D.n, 1);
    int32_t *list = test_malloc(((size_t)D.n / (size_t)stride + 2) * sizeof *list);
    int64_t n_list = 0;
    int32_t n_in = 0;
    for (int32_t v = D.n - 1; v >= 0; v -= stride) {
        list[n_list++] = v;
        n_in += !in[v];
        in[v] = 1;
    }
    list[n_list++] = list[0]; /* a repeat */
    listed_ctx every, sub;
    listed_pair(in, n_in, list, n_list, &every, &sub);
    run_out a, b, c;
    LISTED = &every;
    run_model(&a, prog, 0, SAGA_EXEC_AUTO, 0, SAGA_PARTITION_METIS, SAGA_SAVED_RECOMPUTE);
    LISTED = &sub;
    run_model(&b, prog, 0, SAGA_EXEC_AUTO, 0, SAGA_PARTITION_METIS, SAGA_SAVED_RECOMPUTE);
    assert_int_equal(every.max_count, D.n);
    assert_int_equal(sub.max_count, n_in);
    assert_same_run(&a, &b, 0);
    /* in memory any net runs its last three stages on the rows the loss reads alone (the first
     * reads nearly every row here: it runs every row) */
    assert_int_equal(fewer_rows_stages(&a.st[2]), 0);
    assert_int_equal(fewer_rows_stages(&b.st[2]), 3);
    loss_rows_head = first_stage_rows(&b.st[2]);
    /* streamed: every part runs whole and the loss sees the listed rows among its rows (a part
     * without any, no call), or the stages after the first run on the loss rows' chain, or
     * (one_step) the last stage runs on the loss rows in one step */
    sub.max_count = 0;
    sub.calls = 0;
    run_model(&c, prog, a.peak / 4, SAGA_EXEC_AUTO, 0, SAGA_PARTITION_METIS, SAGA_SAVED_RECOMPUTE);
    LISTED = NULL;
    assert_true(c.st[0].streamed);
    assert_true(sub.max_count < D.n);
    assert_int_equal(sub.unlisted, 0);
    print_message("  every %d-th vertex: streamed in %d parts, %d calls of the loss in 3 steps\n",
                  (int)stride, (int)c.st[0].parts, sub.calls);
    loss_rows_calls = sub.calls;
    if (one_step) {
        assert_int_equal(sub.calls, 3);
        assert_int_equal(sub.max_count, n_in);
        assert_true(fewer_rows_stages(&c.st[2]) >= 1);
    } else if (fewer_rows_stages(&c.st[2]) == 0) {
        assert_true(sub.calls >= 3 * 2);
    } else {
        /* its parts came out large enough for the one step, or the loss rows' chain ran after
         * the first stage's parts (fused or not) */
        assert_int_equal(sub.calls, 3);
    }
    assert_same_run(&a, &c, 0);
    /* with the parts the caller chose (and no budget), every part runs whole and the loss sees the
     * listed rows among its rows (a part without any, no call) */
    run_out p;
    sub.max_count = 0;
    sub.calls = 0;
    LISTED = &sub;
    run_model(&p, prog, 0, SAGA_EXEC_STREAM, 8, SAGA_PARTITION_METIS, SAGA_SAVED_RECOMPUTE);
    LISTED = NULL;
    assert_true(p.st[2].streamed && p.st[2].parts == 8);
    assert_int_equal(fewer_rows_stages(&p.st[2]), 0);
    assert_true(sub.calls >= 3 * 2);
    assert_true(sub.max_count < n_in);
    assert_int_equal(sub.unlisted, 0);
    assert_same_run(&a, &p, 0);
    test_free(p.out);
    if (one_step) {
        /* with room for the first aggregation's input whole on the device, the stages from
         * that aggregation on run in the one step too, on the rows the loss reads */
        run_out t = {0};
        for (int div = 2; div <= 4 && !t.out; div++) {
            sub.calls = 0;
            LISTED = &sub;
            run_model(&t, prog, a.peak / (size_t)div, SAGA_EXEC_AUTO, 0, SAGA_PARTITION_METIS,
                      SAGA_SAVED_RECOMPUTE);
            LISTED = NULL;
            if (!(t.st[2].streamed && fewer_rows_stages(&t.st[2]) == 3)) {
                test_free(t.out);
                t.out = NULL;
            }
        }
        if (!t.out)
            fail_msg("no budget from 1/2 to 1/8 of the peak ran the last three stages on the "
                     "training chain streamed");
        print_message("  every %d-th vertex: the last 3 stages in one step over %d parts\n",
                      (int)stride, (int)t.st[2].parts);
        assert_int_equal(sub.calls, 3);
        assert_same_run(&a, &t, 0);
        assert_true(t.st[2].h2d_bytes < c.st[2].h2d_bytes);
        /* rows and weights crossing in 16 bits: the one step's backward pass multiplies by the
         * transpose's weights widened like the forward's, so the f32 run's results to their
         * rounding (without the widened transpose, a bf16 loss came out at 5.41) */
        const size_t budget = t.st[2].budget_bytes;
        for (int i = 0; i < 2; i++) {
            run_out h;
            TRANSFER = i ? SAGA_TRANSFER_FP16 : SAGA_TRANSFER_BF16;
            LISTED = &sub;
            run_model(&h, prog, budget, SAGA_EXEC_AUTO, 0, SAGA_PARTITION_METIS,
                      SAGA_SAVED_RECOMPUTE);
            LISTED = NULL;
            TRANSFER = SAGA_TRANSFER_F32;
            assert_true(h.st[2].streamed && fewer_rows_stages(&h.st[2]) == 3);
            assert_true(h.peak <= budget);
            assert_same_run(&t, &h, i ? SAGA_TEST_U_FP16 : SAGA_TEST_U_BF16);
            test_free(h.out);
        }
        test_free(t.out);
    }
    test_free(a.out);
    test_free(b.out);
    test_free(c.out);
    test_free(in);
    test_free(list);
}

/* saga_net_forward_rows: the outputs of the rows asked for (in any order, repeated) are those of
 * saga_net_forward, to one forward pass's rounding; the stages compute the rows those read alone,
 * for GCN, SAGE and GAT (batched), in memory and streamed within the budget: there each stage
 * computes the rows it computes in memory (the parts run the stages that need every row, slices
 * the others), for rows that every stage needs fewer than every row of and for rows whose first
 * stage needs every row (the slices of stage 1 then gather from its whole input on the device at
 * half the peak). An id out of range is refused. */
static void test_net_forward_rows(void **state) {
    (void)state;
    data_load();
    int32_t lists[2][160];
    int64_t n_lists[2] = {0, 0};
    /* few rows: every stage needs fewer than every row; more: the first stage needs every row */
    for (int32_t v = D.n - 1; v >= 0 && n_lists[0] < 70; v -= 97)
        lists[0][n_lists[0]++] = v;
    lists[0][n_lists[0]++] = lists[0][3]; /* a repeat */
    lists[0][n_lists[0]++] = 0;
    for (int32_t v = 1; v < D.n && n_lists[1] < 150; v += D.n / 150)
        lists[1][n_lists[1]++] = v;
    const saga_program gat = gat_program(0);
    const saga_program *progs[] = {&GCN, &SAGE, &gat};
    const size_t n_progs = sizeof progs / sizeof progs[0];
    const net_bounds nb = net_run_bounds(&D, 16, 0, 0);
    for (size_t q = 0; q < 2 * n_progs; q++) {
        const size_t p = q % n_progs;
        const int32_t *list = lists[q / n_progs];
        const int64_t n_list = n_lists[q / n_progs];
        size_t peak = 0;
        int64_t mem_rows[4] = {0, 0, 0, 0};
        /* in memory, then streamed through a quarter and a half of its peak */
        const size_t divs[] = {0, 4, 2};
        for (int t = 0; t < 3; t++) {
            const int streamed = t > 0;
            run_out r;
            FWD_ROWS = list;
            N_FWD_ROWS = n_list;
            run_model(&r, progs[p], streamed ? peak / divs[t] : 0,
                      streamed ? SAGA_EXEC_AUTO : SAGA_EXEC_MEMORY, 0, SAGA_PARTITION_METIS,
                      SAGA_SAVED_RECOMPUTE);
            FWD_ROWS = NULL;
            peak = streamed ? peak : r.peak;
            assert_int_equal(r.st[2].streamed, streamed);
            float *want = test_malloc((size_t)n_list * (size_t)D.C * sizeof(float));
            for (int64_t i = 0; i < n_list; i++)
                memcpy(want + i * D.C, r.out + (int64_t)list[i] * D.C, (size_t)D.C * sizeof(float));
            saga_test_assert_close_f32("the rows' outputs", r.rows_out, want, n_list * D.C, nb.out,
                                       saga_test_mean_abs_f32(want, n_list * D.C));
            assert_int_equal(r.rows_computed_all, 4 * (int64_t)D.n);
            assert_true(r.rows_computed < r.rows_computed_all);
            print_message("  program %d, %s: %lld rows computed for %lld outputs (every row: "
                          "%lld); by stage %lld %lld %lld %lld, %zu bytes resident\n",
                          (int)p, streamed ? "streamed" : "in memory", (long long)r.rows_computed,
                          (long long)n_list, (long long)r.rows_computed_all,
                          (long long)r.rows_st.stage_rows[0], (long long)r.rows_st.stage_rows[1],
                          (long long)r.rows_st.stage_rows[2], (long long)r.rows_st.stage_rows[3],
                          (size_t)r.rows_st.resident_bytes);
            for (int s = 0; s < 4; s++) {
                if (!streamed)
                    mem_rows[s] = r.rows_st.stage_rows[s];
                assert_int_equal(r.rows_st.stage_rows[s], mem_rows[s]);
            }
            if (q < n_progs)
                assert_true(mem_rows[0] < D.n); /* each stage needs fewer than every row */
            if (streamed) {
                assert_true(r.peak <= peak / divs[t]);
                /* the floor counts what the slices read, less than every row's */
                assert_true(r.rows_st.h2d_floor_bytes > 0 &&
                            r.rows_st.h2d_floor_bytes < r.floor_all);
            }
            test_free(want);
            test_free(r.rows_out);
            test_free(r.out);
        }
    }
    /* nine rows in ten, in memory: the chain's last stage runs every row (its demand is nearly
     * all of them), and the rows asked for are picked from its output by their place */
    int32_t *most = test_malloc((size_t)D.n * sizeof *most);
    int64_t n_most = 0;
    for (int32_t v = D.n - 1; v >= 0; v--)
        if (v % 10)
            most[n_most++] = v;
    for (size_t p = 0; p < n_progs; p++) {
        run_out r;
        FWD_ROWS = most;
        N_FWD_ROWS = n_most;
        run_model(&r, progs[p], 0, SAGA_EXEC_MEMORY, 0, SAGA_PARTITION_METIS, SAGA_SAVED_RECOMPUTE);
        FWD_ROWS = NULL;
        float *want = test_malloc((size_t)n_most * (size_t)D.C * sizeof(float));
        for (int64_t i = 0; i < n_most; i++)
            memcpy(want + i * D.C, r.out + (int64_t)most[i] * D.C, (size_t)D.C * sizeof(float));
        saga_test_assert_close_f32("nine rows in ten", r.rows_out, want, n_most * D.C, nb.out,
                                   saga_test_mean_abs_f32(want, n_most * D.C));
        test_free(want);
        test_free(r.rows_out);
        test_free(r.out);
    }
    test_free(most);
    small_net sn;
    data_load();
    small_net_new(&sn, &D, 16, 0, NULL);
    float out[64];
    const int32_t bad[] = {0, D.n};
    assert_int_equal(saga_net_forward_rows(sn.net, bad, 2, out), SAGA_ERR_INVALID_ARG);
    assert_non_null(strstr(saga_last_error(), "outside"));
    small_net_free(&sn);
}

/* saga_net_explain: a line per stage with the rows a training pass and the last
 * saga_net_forward_rows compute, the same counts the passes report in rows_computed. */
static void test_net_explain(void **state) {
    (void)state;
    small_net sn;
    data_load();
    small_net_new(&sn, &D, 16, 0, NULL);
    loss_ctx lc = {D.labels, D.n};
    assert_int_equal(saga_net_set_loss(sn.net, nll_rows, &lc), SAGA_OK);
    const int32_t rows[] = {5, 1, 2000, 17};
    assert_int_equal(saga_net_set_loss_rows(sn.net, rows, 4), SAGA_OK);
    double loss = 0;
    assert_int_equal(saga_net_train_step(sn.net, &loss), SAGA_OK);
    saga_net_stats ts, fs;
    saga_net_get_stats(sn.net, &ts);
    float out[4 * 16];
    assert_int_equal(saga_net_forward_rows(sn.net, rows, 2, out), SAGA_OK);
    saga_net_get_stats(sn.net, &fs);
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(saga_net_explain(sn.net, f), SAGA_OK);
    rewind(f);
    char line[256];
    int stages = 0;
    int64_t train = 0, chosen = 0;
    while (fgets(line, sizeof line, f)) {
        int s;
        char k1[32], k2[32];
        long long tr, ch;
        if (sscanf(line, " %d %31s", &s, k1) == 2 && s == stages) {
            /* "0 vertex 100 -> 16 train edges|- chosen input" */
            const char *p = strstr(line, "-> ");
            assert_non_null(p);
            assert_int_equal(sscanf(p + 3, "%*d %lld %31s %lld", &tr, k2, &ch), 3);
            assert_int_equal(tr, ts.stage_rows[s]); /* stage by stage */
            assert_int_equal(ch, fs.stage_rows[s]);
            train += tr;
            chosen += ch;
            stages++;
        }
    }
    fclose(f);
    assert_int_equal(stages, 4);
    assert_int_equal(ts.stages, 4);
    assert_int_equal(train, ts.rows_computed);
    assert_int_equal(chosen, fs.rows_computed);
    assert_true(train < 4 * (int64_t)D.n);
    assert_int_equal(saga_net_explain(NULL, stderr), SAGA_ERR_INVALID_ARG);
    small_net_free(&sn);
}

/* Every stride-th vertex from the last: *list (its n entries returned) and their flags *in. */
static int32_t listed_every(int32_t stride, uint8_t **in, int32_t **list) {
    *in = test_calloc((size_t)D.n, 1);
    *list = test_malloc(((size_t)D.n / (size_t)stride + 1) * sizeof **list);
    int32_t k = 0;
    for (int32_t v = D.n - 1; v >= 0; v -= stride) {
        (*list)[k++] = v;
        (*in)[v] = 1;
    }
    return k;
}

/* The end of a streamed chain's check: the in-memory run with the listed rows (a) and the
 * streamed one (t) give the results of the run over every row (all), and the loss saw listed rows
 * alone (sub); then the runs' outputs and the list are freed. */
static void chain_runs_end(run_out *all, run_out *a, run_out *t, const listed_ctx *sub, uint8_t *in,
                           int32_t *list) {
    assert_same_run(all, a, 0);
    assert_same_run(all, t, 0);
    assert_int_equal(sub->unlisted, 0);
    test_free(all->out);
    test_free(a->out);
    test_free(t->out);
    test_free(in);
    test_free(list);
}

/* Streamed with the parts saga chooses, a training pass whose loss rows' chain fits the budget
 * runs it as one step: on a graph of 3,000 vertices with 1,024 dense input columns, at half the
 * peak of the net whose loss reads every row, with every 1499th vertex as the loss rows, the
 * rows the stages compute are the in-memory chain's, the loss is called once per step with the
 * listed rows alone, saga_net_explain says so, the results (in memory too) are those of the run
 * over every row whose loss picks the listed rows, and the peak stays in the budget; for GCN, SAGE
 * and GAT (batched: where its chain does not fit, by parts it calls the loss once per part). */
static void check_streamed_chain(const char *name, const saga_program *prog) {
    uint8_t *in = NULL;
    int32_t *list = NULL, n_in = listed_every(1499, &in, &list);
    listed_ctx every, sub;
    listed_pair(in, n_in, list, n_in, &every, &sub);
    run_out a, t, all;
    /* the reference: every row computed, the loss picking the listed rows itself (no chain
     * reads input rows); the budget: half its peak */
    LISTED = &every;
    run_model(&all, prog, 0, SAGA_EXEC_MEMORY, 0, SAGA_PARTITION_METIS, SAGA_SAVED_RECOMPUTE);
    const size_t budget = all.peak / 2;
    LISTED = &sub;
    run_model(&a, prog, 0, SAGA_EXEC_MEMORY, 0, SAGA_PARTITION_METIS, SAGA_SAVED_RECOMPUTE);
    sub.calls = 0;
    EXPLAIN = true;
    run_model(&t, prog, budget, SAGA_EXEC_AUTO, 0, SAGA_PARTITION_METIS, SAGA_SAVED_RECOMPUTE);
    EXPLAIN = false;
    LISTED = NULL;
    print_message("  %s: streamed in %d parts at %zu bytes, %d calls of the loss in 3 steps, rows "
                  "%lld (in memory %lld)\n",
                  name, (int)t.st[2].parts, budget, sub.calls, (long long)t.st[2].rows_computed,
                  (long long)a.st[2].rows_computed);
    assert_true(t.st[2].streamed && t.st[2].parts > 1);
    assert_int_equal(sub.calls, 3);
    assert_int_equal(t.st[2].rows_computed, a.st[2].rows_computed);
    assert_int_equal(fewer_rows_stages(&t.st[2]), fewer_rows_stages(&a.st[2]));
    assert_non_null(strstr(t.explain, "(one chain step)")); /* saga_net_explain says so */
    assert_true(t.peak <= budget);
    chain_runs_end(&all, &a, &t, &sub, in, list);
}

/* Another graph (n vertices, 6 classes, cols input columns, words per vertex) in D's place for
 * a test, the usual one kept in *small; data_swap_back frees it and puts the usual one back. */
static void data_swap_in(net_data *small, int32_t n, int32_t cols, int32_t words) {
    data_load();
    *small = D;
    D = (net_data){0};
    net_data_load(&D, n, 6, cols, words, 9);
}

static void data_swap_back(net_data *small) {
    net_data_free(&D);
    D = *small;
}

static void test_net_streamed_chain(void **state) {
    (void)state;
    net_data small; /* the wide graph in its place meanwhile */
    data_swap_in(&small, 3000, 1024, 40);
    check_streamed_chain("GCN", &GCN);
    check_streamed_chain("SAGE", &SAGE);
    check_streamed_chain("GAT", &GAT);
    change_input = true; /* the input set again between steps: the chain reads the new rows */
    check_streamed_chain("GAT, input changed", &GAT);
    change_input = false;
    data_swap_back(&small);
}

/* The search of a streamed chain's checks: every stride-th vertex the loss rows (stride from
 * first to last by step), budgets from 1/2 to 1/max_div of the in-memory peak of the net whose loss
 * reads every row, until a streamed run trains the stages after the first on a chain, its first
 * stage over every row by parts (head false) or over the rows the chain reads (head true). Fills
 * the run over every row (all), the in-memory one with the listed rows (a), the streamed one (t),
 * the loss contexts and the list; the budget, or 0 (then all, a and the list still to free). */
typedef struct chain_search {
    run_out all, a, t;
    listed_ctx every, sub;
    uint8_t *in;
    int32_t *list, n_in;
} chain_search;

static size_t chain_budget(chain_search *r, const saga_program *prog, int first, int last, int step,
                           int max_div, bool head) {
    size_t budget = 0;
    r->in = NULL;
    r->list = NULL;
    for (int stride = first; stride <= last && !budget; stride += step) {
        if (r->list) {
            test_free(r->all.out);
            test_free(r->a.out);
            test_free(r->in);
            test_free(r->list);
        }
        r->n_in = listed_every(stride, &r->in, &r->list);
        listed_pair(r->in, r->n_in, r->list, r->n_in, &r->every, &r->sub);
        LISTED = &r->every;
        run_model(&r->all, prog, 0, SAGA_EXEC_MEMORY, 0, SAGA_PARTITION_METIS,
                  SAGA_SAVED_RECOMPUTE);
        LISTED = &r->sub;
        run_model(&r->a, prog, 0, SAGA_EXEC_MEMORY, 0, SAGA_PARTITION_METIS, SAGA_SAVED_RECOMPUTE);
        for (int div = 2; div <= max_div && !budget; div *= 2) {
            r->sub.calls = 0;
            EXPLAIN = true;
            run_model(&r->t, prog, r->all.peak / (size_t)div, SAGA_EXEC_AUTO, 0,
                      SAGA_PARTITION_METIS, SAGA_SAVED_RECOMPUTE);
            EXPLAIN = false;
            const saga_net_stats *st = &r->t.st[2];
            const bool first_rows =
                head ? st->stage_rows[0] < D.n && strstr(r->t.explain, "(head, parts)")
                     : st->stage_rows[0] == D.n;
            if (st->streamed && first_rows && strstr(r->t.explain, "(one chain step)"))
                budget = r->all.peak / (size_t)div;
            else
                test_free(r->t.out);
        }
    }
    LISTED = NULL;
    return budget;
}

/* Streamed with the parts saga chooses, at a budget where the loss rows' chain does not fit
 * from the first stage and stage 1's input does not stay whole, training runs the first stage by
 * parts and the others as one chain step over their demanded rows, which reads its input rows
 * from what the parts wrote and hands their gradient back to the parts' backward pass. Without a
 * head (head false: every 20th or 60th vertex of the 3,000, degree 6, 1,024 input columns, whose
 * two-hop neighbourhood's input rows are most of the input) the first stage runs over every row
 * and its output crosses through the host. With one (head true: GCN, whose first stage is a
 * vertex stage, on a graph of 20,000 vertices, degree 8, 128 input columns, whose stage inputs are
 * too large to stay whole on the device under the budget; every 100th or 300th vertex) the parts
 * run it on the rows the chain reads alone, writing them into the chain's input on the
 * device and reading their gradient there. Either way the stages the chain runs compute the
 * in-memory chain's rows (with a head, stage 0 too), the loss is called once per step,
 * saga_net_explain says how each stage runs, the results (in memory too) are those of the run
 * over every row, within the bounds of the arithmetic, and the peak stays in the budget. */
static void check_streamed_chain_after(const char *name, const saga_program *prog, bool head) {
    chain_search r;
    const size_t budget = head ? chain_budget(&r, prog, 100, 300, 200, 32, true)
                               : chain_budget(&r, prog, 20, 60, 40, 16, false);
    if (!budget)
        fail_msg("%s: no budget from 1/2 to 1/%d of the peak ran the later stages on a chain%s",
                 name, head ? 32 : 16, head ? " after a head" : "");
    print_message("  %s: streamed in %d parts at %zu bytes, every %d-th vertex, stage 0 on %lld "
                  "rows, rows %lld (in memory %lld)\n",
                  name, (int)r.t.st[2].parts, budget, D.n / r.n_in,
                  (long long)r.t.st[2].stage_rows[0], (long long)r.t.st[2].rows_computed,
                  (long long)r.a.st[2].rows_computed);
    assert_true(r.t.st[2].parts > 1);
    assert_int_equal(r.sub.calls, 3);
    for (int s = head ? 0 : 1; s < r.t.st[2].stages; s++)
        assert_int_equal(r.t.st[2].stage_rows[s], r.a.st[2].stage_rows[s]);
    if (!head) {
        assert_true(fewer_rows_stages(&r.t.st[2]) > 0);
        assert_non_null(strstr(r.t.explain, "(parts)"));
    }
    assert_true(r.t.peak <= budget);
    chain_runs_end(&r.all, &r.a, &r.t, &r.sub, r.in, r.list);
}

/* check_streamed_chain_after on data_swap_in's graph of n vertices, cols input columns and words
 * per row, with dense input set once and set again between steps (the parts, or the head, then
 * read the new rows), and with sparse input set again between steps (sparse true). */
static void check_streamed_chain_inputs(const char *name, const saga_program *prog, bool head,
                                        int32_t n, int32_t cols, int32_t words, bool sparse) {
    net_data small;
    char what[64];
    data_swap_in(&small, n, cols, words);
    check_streamed_chain_after(name, prog, head);
    change_input = true;
    for (int sp = 0; sp <= (int)sparse; sp++) {
        sparse_input = sp;
        snprintf(what, sizeof what, "%s, %sinput changed", name, sp ? "sparse " : "");
        check_streamed_chain_after(what, prog, head);
    }
    sparse_input = false;
    change_input = false;
    data_swap_back(&small);
}

static void test_net_streamed_chain_head(void **state) {
    (void)state;
    check_streamed_chain_inputs("GCN", &GCN, true, 20000, 128, 20, true);
}

static void test_net_streamed_chain_later(void **state) {
    (void)state;
    check_streamed_chain_inputs("GAT", &GAT, false, 3000, 1024, 40, false);
}

/* Streamed with the parts saga chooses, at a budget where the loss rows' chain fits from the
 * last program stage alone and no head applies below it, training runs every stage by slices on
 * the rows it needs (the parts would compute every row of the stages below the chain): forward
 * slice by slice, the last stage's slices each with the loss and its backward pass, then the
 * stages below backward from the top, each slice adding its input rows' gradient into the stage
 * before's on the host. On data_swap_in's graph of n vertices (degree words / 2, cols input
 * columns) with every stride-th vertex the loss rows, for budgets from 1/2 of the peak of the net
 * whose loss reads every row down to 1/64, the first that trains by slices: saga_net_explain
 * says so, every stage computes the in-memory chain's rows (fewer than every row), the loss is
 * called at least once per step, the results (in memory too) are those of the run over every row
 * within the bounds of the arithmetic, and the peak stays in the budget; with dense input, and
 * with sparse input set again between steps (sparse true). */
static void check_streamed_sliced(const char *name, const saga_program *prog, int32_t n,
                                  int32_t cols, int32_t words, bool sparse) {
    net_data small;
    data_swap_in(&small, n, cols, words);
    for (int sp = 0; sp <= (int)sparse; sp++) {
        sparse_input = sp;
        change_input = sp;
        chain_search r = {0};
        size_t budget = 0;
        for (int stride = 100; stride <= 300 && !budget; stride += 200) {
            if (r.list) {
                test_free(r.all.out);
                test_free(r.a.out);
                test_free(r.in);
                test_free(r.list);
            }
            r.n_in = listed_every(stride, &r.in, &r.list);
            listed_pair(r.in, r.n_in, r.list, r.n_in, &r.every, &r.sub);
            LISTED = &r.every;
            run_model(&r.all, prog, 0, SAGA_EXEC_MEMORY, 0, SAGA_PARTITION_METIS,
                      SAGA_SAVED_RECOMPUTE);
            LISTED = &r.sub;
            run_model(&r.a, prog, 0, SAGA_EXEC_MEMORY, 0, SAGA_PARTITION_METIS,
                      SAGA_SAVED_RECOMPUTE);
            for (int div = 2; div <= 64 && !budget; div *= 2) {
                r.sub.calls = 0;
                EXPLAIN = true;
                run_model(&r.t, prog, r.all.peak / (size_t)div, SAGA_EXEC_AUTO, 0,
                          SAGA_PARTITION_METIS, SAGA_SAVED_RECOMPUTE);
                EXPLAIN = false;
                if (r.t.st[2].streamed && strstr(r.t.explain, "slices)"))
                    budget = r.all.peak / (size_t)div;
                else
                    test_free(r.t.out);
            }
        }
        LISTED = NULL;
        if (!budget)
            fail_msg("%s: no budget from 1/2 to 1/64 of the peak trained by slices", name);
        print_message("  %s%s: streamed in %d parts at %zu bytes, every %d-th vertex, rows %lld "
                      "(in memory %lld), %d calls of the loss in 3 steps\n",
                      name, sp ? ", sparse input changed" : "", (int)r.t.st[2].parts, budget,
                      D.n / r.n_in, (long long)r.t.st[2].rows_computed,
                      (long long)r.a.st[2].rows_computed, r.sub.calls);
        assert_true(r.t.st[2].parts > 1);
        assert_true(r.sub.calls >= 3);
        for (int s = 0; s < r.t.st[2].stages; s++) {
            assert_int_equal(r.t.st[2].stage_rows[s], r.a.st[2].stage_rows[s]);
            assert_true(r.t.st[2].stage_rows[s] < D.n);
        }
        assert_null(strstr(r.t.explain, "(parts)"));
        assert_null(strstr(r.t.explain, "(one chain step)"));
        assert_true(r.t.peak <= budget);
        chain_runs_end(&r.all, &r.a, &r.t, &r.sub, r.in, r.list);
    }
    sparse_input = false;
    change_input = false;
    data_swap_back(&small);
}

static void test_net_streamed_sliced_training(void **state) {
    (void)state;
    check_streamed_sliced("GCN", &GCN, 20000, 128, 20, true);
    check_streamed_sliced("GAT", &GAT, 20000, 128, 20, false);
}

static void test_net_loss_rows(void **state) {
    (void)state;
    check_loss_rows(&GCN, 7, false);
    assert_int_equal(loss_rows_calls, 3); /* the stages after the first, a chain over parts */
    check_loss_rows(&SAGE, 7, false);
    check_loss_rows(&GAT, 7, false);
    check_loss_rows(&GCN, 61, true);
    check_loss_rows(&SAGE, 61, true);
    /* refused: an id out of range, and a change after the first run */
    small_net sn;
    data_load();
    small_net_new(&sn, &D, 16, 0, NULL);
    loss_ctx lc = {D.labels, D.n};
    assert_int_equal(saga_net_set_loss(sn.net, nll_rows, &lc), SAGA_OK);
    const int32_t bad[] = {0, D.n};
    assert_int_equal(saga_net_set_loss_rows(sn.net, bad, 2), SAGA_ERR_INVALID_ARG);
    assert_non_null(strstr(saga_last_error(), "outside"));
    assert_int_equal(saga_net_set_loss_rows(sn.net, bad, 1), SAGA_OK);
    assert_int_equal(saga_net_set_loss_rows(sn.net, NULL, 0), SAGA_OK);
    double loss = 0;
    assert_int_equal(saga_net_train_step(sn.net, &loss), SAGA_OK);
    assert_int_equal(saga_net_set_loss_rows(sn.net, bad, 1), SAGA_ERR_INVALID_ARG);
    assert_non_null(strstr(saga_last_error(), "before the first run"));
    small_net_free(&sn);
}

/* With the training chain from stage 1, stage 0 (a vertex stage) trains on the rows the chain
 * reads alone, saga_net_stats.stage_rows[0] of them: in memory and streamed, on dense rows (f32 and
 * bf16) and a CSR, with the input set again between steps, the losses and outputs of the run
 * over every row, and streamed fewer input bytes moved. */
/* How many rows the two-hop in-neighbourhood of every stride-th vertex from the last holds, each
 * vertex its own in-neighbour (the nets' self loops): the rows a head trains on. */
static int32_t two_hop_rows(int32_t stride) {
    saga_csr in = saga_graph_in(D.g);
    uint8_t *a = test_calloc((size_t)D.n, 1), *b = test_calloc((size_t)D.n, 1);
    for (int32_t v = D.n - 1; v >= 0; v -= stride)
        a[v] = 1;
    for (int hop = 0; hop < 2; hop++) {
        memcpy(b, a, (size_t)D.n);
        for (int32_t v = 0; v < D.n; v++)
            if (a[v])
                for (int64_t k = in.offsets[v]; k < in.offsets[v + 1]; k++)
                    b[in.indices[k]] = 1;
        memcpy(a, b, (size_t)D.n);
    }
    int32_t count = 0;
    for (int32_t v = 0; v < D.n; v++)
        count += a[v];
    test_free(a);
    test_free(b);
    return count;
}

static void test_net_head(void **state) {
    (void)state;
    data_load();
    /* a chain that reads nearly every row of stage 0 has no head: it would save little */
    int32_t wide = two_hop_rows(7);
    assert_true(wide > D.n - D.n / 8);
    check_loss_rows(&GCN, 7, false);
    assert_int_equal(loss_rows_head, 0);
    uint8_t *in = NULL;
    int32_t *list = NULL, n_in = listed_every(61, &in, &list);
    listed_ctx every, sub;
    listed_pair(in, n_in, list, n_in, &every, &sub);
    change_input = true;
    size_t peak = 0; /* in memory on dense rows: the budgets are fractions of it */
    for (int sparse = 0; sparse < 2; sparse++) {
        sparse_input = sparse;
        run_out a, b, c, t = {0};
        LISTED = &every;
        run_model(&a, &GCN, 0, SAGA_EXEC_MEMORY, 0, SAGA_PARTITION_METIS, SAGA_SAVED_RECOMPUTE);
        LISTED = &sub;
        run_model(&b, &GCN, 0, SAGA_EXEC_MEMORY, 0, SAGA_PARTITION_METIS, SAGA_SAVED_RECOMPUTE);
        assert_int_equal(first_stage_rows(&a.st[2]), 0);
        assert_int_equal(fewer_rows_stages(&b.st[2]), 3);
        assert_int_equal(first_stage_rows(&b.st[2]), two_hop_rows(61));
        assert_same_run(&a, &b, 0);
        peak = sparse ? peak : a.peak;
        /* streamed: the smallest budget at which the chain runs from stage 1 */
        for (int div = 8; div >= 2 && !t.out; div--) {
            run_model(&t, &GCN, peak / (size_t)div, SAGA_EXEC_AUTO, 0, SAGA_PARTITION_METIS,
                      SAGA_SAVED_RECOMPUTE);
            if (!(t.st[2].streamed && fewer_rows_stages(&t.st[2]) == 3)) {
                test_free(t.out);
                t.out = NULL;
            }
        }
        if (!t.out)
            fail_msg("no budget from 1/2 to 1/8 of the peak ran the last three stages on the "
                     "training chain streamed");
        assert_int_equal(first_stage_rows(&t.st[2]), first_stage_rows(&b.st[2]));
        assert_same_run(&a, &t, 0);
        assert_int_equal(sub.unlisted, 0);
        /* every row streamed at that budget moves more */
        LISTED = &every;
        run_model(&c, &GCN, t.st[2].budget_bytes, SAGA_EXEC_AUTO, 0, SAGA_PARTITION_METIS,
                  SAGA_SAVED_RECOMPUTE);
        assert_true(c.st[2].streamed && first_stage_rows(&c.st[2]) == 0);
        assert_true(t.st[2].h2d_bytes < c.st[2].h2d_bytes);
        assert_true(t.st[2].h2d_floor_bytes < c.st[2].h2d_floor_bytes);
        print_message("  %s input: stage 0 on %lld of %d rows; streamed in %d parts, h2d %llu "
                      "(every row: %llu)\n",
                      sparse ? "sparse" : "dense", (long long)first_stage_rows(&t.st[2]), (int)D.n,
                      (int)t.st[2].parts, (unsigned long long)t.st[2].h2d_bytes,
                      (unsigned long long)c.st[2].h2d_bytes);
        if (!sparse) {
            /* the head's rows cross in bf16: the f32 run's losses to their rounding */
            run_out h;
            TRANSFER = SAGA_TRANSFER_BF16;
            LISTED = &sub;
            run_model(&h, &GCN, t.st[2].budget_bytes, SAGA_EXEC_AUTO, 0, SAGA_PARTITION_METIS,
                      SAGA_SAVED_RECOMPUTE);
            TRANSFER = SAGA_TRANSFER_F32;
            assert_true(h.st[2].streamed &&
                        first_stage_rows(&h.st[2]) == first_stage_rows(&t.st[2]));
            assert_same_run(&t, &h, SAGA_TEST_U_BF16);
            /* the first step loads every block: its head rows cross in half the bytes */
            assert_true(h.st[0].h2d_bytes < t.st[0].h2d_bytes);
            test_free(h.out);
        }
        LISTED = NULL;
        run_out *all[] = {&a, &b, &c, &t};
        for (int i = 0; i < 4; i++)
            test_free(all[i]->out);
    }
    sparse_input = false;
    change_input = false;
    test_free(in);
    test_free(list);
}

static void test_net_metis_moves_fewer_bytes(void **state) {
    (void)state;
    run_out mem, met, rnd;
    run_model(&mem, &GCN, 0, SAGA_EXEC_MEMORY, 0, SAGA_PARTITION_METIS, SAGA_SAVED_RECOMPUTE);
    size_t budget = mem.peak / 2;
    run_model(&met, &GCN, budget, SAGA_EXEC_STREAM, 8, SAGA_PARTITION_METIS, SAGA_SAVED_RECOMPUTE);
    run_model(&rnd, &GCN, budget, SAGA_EXEC_STREAM, 8, SAGA_PARTITION_RANDOM, SAGA_SAVED_RECOMPUTE);
    print_message("  8 parts: metis halo %lld rows, h2d %llu; random halo %lld rows, h2d %llu\n",
                  (long long)met.st[2].halo_rows, (unsigned long long)met.st[2].h2d_bytes,
                  (long long)rnd.st[2].halo_rows, (unsigned long long)rnd.st[2].h2d_bytes);
    assert_true(met.st[2].halo_rows < rnd.st[2].halo_rows);
    assert_true(met.st[2].h2d_bytes < rnd.st[2].h2d_bytes);
    assert_true(met.st[2].edge_cut < rnd.st[2].edge_cut);
    assert_same_run(&met, &rnd, 0);
    test_free(mem.out);
    test_free(met.out);
    test_free(rnd.out);
}

/* Host bytes from saga_backend_host_alloc that be holds now. */
static size_t host_pinned(const saga_backend *be) {
    saga_backend_stats bs;
    saga_backend_get_stats(be, &bs);
    return bs.host_pinned_bytes;
}

/* A net's host arrays that the scheduler copies to and from on its copy stream (the
 * activations of every stage's input, their gradients when streamed, the saved values
 * offloaded for the program stages) come from the backend's host allocator, pinned on CUDA,
 * where a copy to pageable memory does not overlap and one from it reads the data before the
 * copy stream's host functions have written it; so do the graph's tiles the scheduler loads.
 * All go back to that allocator with the net. The first stage is a program, so that the net's
 * input has saved values too. Streamed under a quarter of the in-memory peak, or in memory
 * (where no block is packed, so the scheduler holds no staging buffers and the bound is tight).
 */
static void check_host_arrays_pinned(bool streamed) {
    run_out mem;
    run_model(&mem, &GCN, 0, SAGA_EXEC_MEMORY, 0, SAGA_PARTITION_METIS, SAGA_SAVED_OFFLOAD);
    test_free(mem.out);
    saga_backend_params bp = saga_backend_params_defaults();
    bp.budget_bytes = streamed ? mem.peak / 4 : 0;
    saga_backend *be = NULL;
    assert_int_equal(saga_backend_cpu_new(&be, &bp), SAGA_OK);
    saga_ctx *c = NULL;
    assert_int_equal(saga_ctx_new(&c, be, 3), SAGA_OK);
    saga_model *m = NULL;
    assert_int_equal(saga_model_new(&m, be), SAGA_OK);
    const int H = 16;
    layer l0 = {.relu = true}, l1 = {.relu = true}, l2 = {.relu = false};
    l0.b = saga_model_param(m, "b0", 1, D.F, SAGA_INIT_ZEROS, 0);
    l1.W = saga_model_param(m, "W1", D.F, H, SAGA_INIT_GLOROT, 11);
    l1.b = saga_model_param(m, "b1", 1, H, SAGA_INIT_ZEROS, 0);
    l2.W = saga_model_param(m, "W2", H, D.C, SAGA_INIT_GLOROT, 12);
    l2.b = saga_model_param(m, "b2", 1, D.C, SAGA_INIT_ZEROS, 0);
    assert_non_null(l2.b);
    saga_net_opts no = saga_net_opts_defaults();
    no.exec = streamed ? SAGA_EXEC_AUTO : SAGA_EXEC_MEMORY;
    no.saved = SAGA_SAVED_OFFLOAD;
    no.self_loops = SAGA_DGRAPH_SELF_LOOPS_ADD;
    saga_net *net = NULL;
    assert_int_equal(saga_net_new(&net, c, D.g, &no), SAGA_OK);
    assert_int_equal(saga_net_add_program(net, &GCN, &l0, D.F), SAGA_OK);
    assert_int_equal(saga_net_add_vertex(net, project, &l1, H), SAGA_OK);
    assert_int_equal(saga_net_add_program(net, &GCN, &l1, H), SAGA_OK);
    assert_int_equal(saga_net_add_vertex(net, project, &l2, D.C), SAGA_OK);
    assert_int_equal(saga_net_add_program(net, &GCN, &l2, D.C), SAGA_OK);
    loss_ctx lc = {D.labels, D.n};
    assert_int_equal(saga_net_set_loss(net, nll_rows, &lc), SAGA_OK);
    assert_int_equal(saga_net_set_input(net, D.x, D.F), SAGA_OK);
    size_t input = host_pinned(be); /* the input rows */
    assert_true(input >= (size_t)D.n * (size_t)D.F * sizeof(float));
    double loss = 0;
    if (saga_net_train_step(net, &loss) != SAGA_OK)
        fail_msg("train step: %s", saga_last_error());
    saga_net_stats ns;
    saga_net_get_stats(net, &ns);
    assert_true(ns.streamed == streamed);
    assert_true(streamed ? ns.parts > 1 : ns.parts == 1);
    /* stage inputs 1..5 are F, H, H, C, C wide, each with activations (and gradients when
     * streamed); the three program stages (inputs 0, 2 and 4) offload their saved inputs */
    size_t row = sizeof(float) * (size_t)D.n;
    size_t want =
        (streamed ? 2 : 1) * row * (size_t)(D.F + 2 * H + 2 * D.C) + row * (size_t)(D.F + H + D.C);
    /* and the tiles of the graph the scheduler loads: at least each edge's source */
    size_t edges = (size_t)saga_graph_n_edges(D.g) * sizeof(int32_t);
    size_t held = host_pinned(be) - input;
    if (held < want + edges)
        fail_msg("the %s net holds %zu bytes from the host allocator besides its input, its "
                 "activation, gradient and saved arrays are %zu, the edges' sources %zu",
                 streamed ? "streamed" : "in-memory", held, want, edges);
    saga_net_free(&net);
    saga_model_free(&m);
    saga_ctx_free(&c); /* the context's staging of the loss's rows */
    assert_int_equal(host_pinned(be), 0);
    saga_backend_free_all(&be);
}

static void test_net_streamed_host_arrays_pinned(void **state) {
    (void)state;
    check_host_arrays_pinned(true);
}

static void test_net_memory_host_arrays_pinned(void **state) {
    (void)state;
    check_host_arrays_pinned(false);
}

static void test_net_budget_too_small(void **state) {
    (void)state;
    data_load();
    saga_backend_params bp = saga_backend_params_defaults();
    bp.budget_bytes = 6 * 1024;
    saga_backend *be = NULL;
    assert_int_equal(saga_backend_cpu_new(&be, &bp), SAGA_OK);
    saga_ctx *c = NULL;
    assert_int_equal(saga_ctx_new(&c, be, 3), SAGA_OK);
    saga_model *m = NULL;
    assert_int_equal(saga_model_new(&m, be), SAGA_OK);
    layer l1 = {.relu = true};
    l1.W = saga_model_param(m, "W1", D.F, 16, SAGA_INIT_GLOROT, 11);
    l1.b = saga_model_param(m, "b1", 1, 16, SAGA_INIT_ZEROS, 0);
    saga_net_opts no = saga_net_opts_defaults();
    no.self_loops = SAGA_DGRAPH_SELF_LOOPS_ADD;
    saga_net *net = NULL;
    assert_int_equal(saga_net_new(&net, c, D.g, &no), SAGA_OK);
    assert_int_equal(saga_net_add_vertex(net, project, &l1, 16), SAGA_OK);
    assert_int_equal(saga_net_add_program(net, &GCN, &l1, 16), SAGA_OK);
    assert_int_equal(saga_net_set_input(net, D.x, D.F), SAGA_OK);
    /* the budget holds the parameters but not even one vertex's block */
    saga_status st = saga_net_forward(net, NULL);
    if (st == SAGA_OK) {
        saga_net_stats s;
        saga_net_get_stats(net, &s);
        fail_msg("a 64 KiB budget ran (%d parts, peak %zu)", (int)s.parts, s.peak_device_bytes);
    }
    assert_int_equal(st, SAGA_ERR_BUDGET);
    saga_test_assert_error_contains("budget at least", NULL);
    saga_net_free(&net);
    saga_model_free(&m);
    saga_ctx_free(&c);
    saga_backend_free_all(&be);
}

/* Wide input rows (a bag of 400 words) on a small graph: the first stage's blocks outweigh the
 * narrow input of the last program stage, which may then stay whole on the device. */
static net_data WIDE;

/* GIN-like: an MLP over the vertex's row plus the sum of its in-neighbours' (width out, then 4
 * out, then out): apply_vertex keeps four times the stage's width on the tape, which the
 * planner's estimate of a stage's work does not know */
static saga_tensor *gin_vertex(saga_ctx *c, const saga_vertex_in *v, void *l_) {
    layer *l = l_;
    saga_tensor *h = saga_relu(c, saga_matmul(c, saga_add(c, v->self, v->gathered), l->M1));
    h = saga_add_bias(c, saga_matmul(c, h, l->M2), l->b);
    return l->relu ? saga_relu(c, h) : h;
}

static const saga_program GIN = {
    .scatter = SAGA_SCATTER_SRC,
    .edge_weight = SAGA_WEIGHT_NONE,
    .gather = SAGA_GATHER_SUM,
    .apply_vertex = gin_vertex,
};

/* The losses of the last try_model_parts's training steps. */
static double try_losses[2];

/* Builds the two-layer model over d on a fresh backend with budget, trains two SGD steps and
 * runs inference: SAGA_OK or the first error (its message in saga_last_error()); *st gets the
 * last call's figures, try_losses the steps' losses. */
static saga_status try_model_parts(const net_data *d, const saga_program *prog, size_t budget,
                                   int32_t parts, saga_net_stats *st) {
    saga_backend_params bp = saga_backend_params_defaults();
    bp.budget_bytes = budget;
    saga_backend *be = NULL;
    assert_int_equal(saga_backend_cpu_new(&be, &bp), SAGA_OK);
    saga_ctx *c = NULL;
    assert_int_equal(saga_ctx_new(&c, be, 3), SAGA_OK);
    saga_model *m = NULL;
    assert_int_equal(saga_model_new(&m, be), SAGA_OK);
    layer l1, l2;
    net_model_params(m, d, 16, &l1, &l2);
    if (prog == &GIN) {
        l1.M1 = saga_model_param(m, "M1a", 16, 64, SAGA_INIT_GLOROT, 15);
        l1.M2 = saga_model_param(m, "M2a", 64, 16, SAGA_INIT_GLOROT, 16);
        l2.M1 = saga_model_param(m, "M1b", d->C, 4 * d->C, SAGA_INIT_GLOROT, 17);
        l2.M2 = saga_model_param(m, "M2b", 4 * d->C, d->C, SAGA_INIT_GLOROT, 18);
        assert_non_null(l2.M2);
    }
    saga_optim *opt = NULL;
    saga_optim_opts oo = saga_optim_opts_defaults(SAGA_OPTIM_SGD);
    assert_int_equal(saga_optim_new(&opt, m, &oo), SAGA_OK);
    saga_net_opts no = saga_net_opts_defaults();
    no.self_loops = SAGA_DGRAPH_SELF_LOOPS_ADD;
    no.parts = parts;
    saga_net *net = NULL;
    assert_int_equal(saga_net_new(&net, c, d->g, &no), SAGA_OK);
    net_model_stages(net, prog, d, 16, &l1, &l2);
    /* named, its gradients are put back when a pass runs again (net_replan) */
    assert_int_equal(saga_net_set_model(net, m), SAGA_OK);
    loss_ctx lc = {d->labels, d->n};
    assert_int_equal(saga_net_set_loss(net, nll_rows, &lc), SAGA_OK);
    assert_int_equal(saga_net_set_input(net, d->x, d->F), SAGA_OK);
    saga_status s = SAGA_OK;
    double loss = 0;
    for (int i = 0; i < 2 && s == SAGA_OK; i++) {
        s = saga_net_train_step(net, &loss);
        try_losses[i] = loss;
        if (s == SAGA_OK)
            s = saga_optim_step(opt);
    }
    if (s == SAGA_OK)
        s = saga_net_forward(net, NULL);
    saga_net_get_stats(net, st);
    saga_net_free(&net);
    saga_optim_free(&opt);
    saga_model_free(&m);
    saga_ctx_free(&c);
    saga_backend_free_all(&be);
    return s;
}

static saga_status try_model(const net_data *d, const saga_program *prog, size_t budget,
                             saga_net_stats *st) {
    return try_model_parts(d, prog, budget, 0, st);
}

/* With the count of parts left to saga, the search under a budget (contiguous ranges probing,
 * then METIS) ends at a count that fits, where half as many parts cut by METIS fit only by
 * keeping fewer narrow inputs resident, or not at all. */
static void test_net_parts_search_fewest(void **state) {
    (void)state;
    data_load();
    const saga_program *progs[] = {&GCN, &SAGE};
    for (int p = 0; p < 2; p++) {
        saga_net_stats st;
        assert_int_equal(try_model(&D, progs[p], 0, &st), SAGA_OK);
        size_t peak = st.peak_device_bytes;
        for (size_t div = 4; div <= 32; div *= 2) {
            size_t b = peak / div;
            saga_status s = try_model(&D, progs[p], b, &st);
            if (s != SAGA_OK)
                fail_msg("budget %zu (1/%zu): %s", b, div, saga_last_error());
            int32_t k = st.parts;
            uint64_t res = st.resident_bytes;
            assert_true(st.streamed);
            assert_true(st.peak_device_bytes <= b);
            saga_status half =
                k / 2 >= 2 ? try_model_parts(&D, progs[p], b, k / 2, &st) : SAGA_ERR_BUDGET;
            print_message("  %s, budget 1/%zu of %zu: %d parts, resident %llu; %d parts: %s, "
                          "resident %llu\n",
                          p ? "sage" : "gcn", div, peak, (int)k, (unsigned long long)res,
                          (int)(k / 2), half == SAGA_OK ? "fit" : "too big",
                          (unsigned long long)(half == SAGA_OK ? st.resident_bytes : 0));
            assert_true(half == SAGA_ERR_BUDGET || (half == SAGA_OK && st.resident_bytes < res));
        }
    }
}

/* A budget too small for a net with user stages names one that works: trained at exactly that
 * budget, the net runs (streamed), within it, and the budget is not far above what it used. */
static void check_named_budget(const net_data *d, const saga_program *prog, const char *name) {
    /* the parameters and their gradients fit, no block does */
    size_t params = 2 * 4 * ((size_t)d->F * 16 + 16 + 16 * (size_t)d->C + d->C + 32 + 2 * d->C);
    saga_net_stats st;
    saga_status s = try_model(d, prog, params + 16 * 1024, &st);
    assert_int_equal(s, SAGA_ERR_BUDGET);
    const char *at = strstr(saga_last_error(), "budget at least ");
    if (!at)
        fail_msg("%s: no budget named in \"%s\"", name, saga_last_error());
    size_t named = (size_t)strtoull(at + strlen("budget at least "), NULL, 10);
    s = try_model(d, prog, named, &st);
    if (s != SAGA_OK)
        fail_msg("%s: the named budget %zu fails: %s", name, named, saga_last_error());
    print_message("  %s: named %zu: %d parts, resident %llu, peak %zu\n", name, named,
                  (int)st.parts, (unsigned long long)st.resident_bytes, st.peak_device_bytes);
    assert_true(st.streamed);
    assert_true(st.peak_device_bytes <= named);
    assert_true(st.peak_device_bytes >= named / 4 * 3);
}

/* Every budget from the in-memory peak down to the smallest one that a too-small budget names
 * runs the GAT-like net (its edge batches scale rows through the context's index arrays, which
 * must make room under the budget like any tensor). */
static void test_net_budgets_down_to_named_run(void **state) {
    (void)state;
    data_load();
    saga_net_stats st;
    assert_int_equal(try_model(&D, &GAT, 0, &st), SAGA_OK);
    size_t peak = st.peak_device_bytes;
    assert_int_equal(try_model(&D, &GAT, 64 * 1024, &st), SAGA_ERR_BUDGET);
    const char *at = strstr(saga_last_error(), "budget at least ");
    assert_non_null(at);
    size_t named = (size_t)strtoull(at + strlen("budget at least "), NULL, 10);
    int runs = 0;
    for (size_t b = peak; b >= named; b = b / 8 * 7, runs++) {
        saga_status s = try_model(&D, &GAT, b, &st);
        if (s != SAGA_OK)
            fail_msg("budget %zu (in memory %zu, named %zu): %s", b, peak, named,
                     saga_last_error());
        assert_true(st.peak_device_bytes <= b);
    }
    print_message("  %d budgets from %zu down to %zu ran\n", runs, peak, named);
}

/* Every budget from the in-memory peak down to the smallest one a too-small budget names runs a
 * GIN-like net, whose apply_vertex holds more than the planner estimates: a pass that a step's
 * tensors take over the budget is planned again with more room for them and run again, from
 * where it began (its dropout masks, the model's gradients), so each budget trains the losses
 * of in memory within the bound on adding in another order (net_run_bounds, with the MLP's
 * products). */
static void test_net_gin_budgets_down_to_named_run(void **state) {
    (void)state;
    data_load();
    saga_net_stats st;
    assert_int_equal(try_model(&D, &GIN, 0, &st), SAGA_OK);
    const size_t peak = st.peak_device_bytes;
    const double want[2] = {try_losses[0], try_losses[1]};
    assert_int_equal(try_model(&D, &GIN, 64 * 1024, &st), SAGA_ERR_BUDGET);
    const char *at = strstr(saga_last_error(), "budget at least ");
    assert_non_null(at);
    const size_t named = (size_t)strtoull(at + strlen("budget at least "), NULL, 10);
    /* net_run_bounds' chain of sums, with the MLP's two products in each layer */
    net_bounds nb = net_run_bounds(&D, 16, 2, 0);
    saga_test_chain mlp = {0, 0};
    saga_test_chain_add(&mlp, 16, 2);
    saga_test_chain_add(&mlp, 64, 2);
    saga_test_chain_add(&mlp, D.C, 2);
    saga_test_chain_add(&mlp, 4 * D.C, 2);
    const double bound[2] = {nb.loss[0] + mlp.rel, nb.loss[1] + 2 * mlp.rel};
    int runs = 0;
    for (size_t b = peak; b >= named; b = b / 8 * 7, runs++) {
        saga_status s = try_model(&D, &GIN, b, &st);
        if (s != SAGA_OK)
            fail_msg("budget %zu (in memory %zu, named %zu): %s", b, peak, named,
                     saga_last_error());
        if (st.peak_device_bytes > b)
            fail_msg("budget %zu: peak %zu", b, st.peak_device_bytes);
        char what[64];
        snprintf(what, sizeof what, "losses at budget %zu (%d parts)", b, (int)st.parts);
        for (int i = 0; i < 2; i++)
            saga_test_assert_close_f64(what, &want[i], &try_losses[i], 1, bound[i], 0);
    }
    print_message("  %d budgets from %zu down to %zu ran\n", runs, peak, named);
}

/* A small graph for tests that build many nets. */
static net_data SMALL;

/* Every allocation of a training step failing in turn, in memory and streamed by 3 parts: the
 * step fails with SAGA_ERR_OUT_OF_MEMORY, and the next step on the same net gives the loss of a
 * net that never failed, to the bit (the failed pass left neither its tape, nor the context's
 * error, nor part of its plan behind). */
static void test_net_failing_allocations(void **state) {
    (void)state;
    net_data_load(&SMALL, 240, 4, 24, 6, 9);
    for (int streamed = 0; streamed < 2; streamed++) {
        double want = 0;
        int failures = 0;
        bool ok = false;
        for (long k = 0; k < 4000 && !ok; k++) {
            small_net t;
            saga_net_opts no = saga_net_opts_defaults();
            no.self_loops = SAGA_DGRAPH_SELF_LOOPS_ADD;
            no.exec = streamed ? SAGA_EXEC_STREAM : SAGA_EXEC_MEMORY;
            no.parts = streamed ? 3 : 0;
            small_net_new(&t, &SMALL, 8, 0, &no);

            saga_net *net = t.net;
            double loss = 0;
            if (k == 0) { /* the reference: no failure */
                assert_int_equal(saga_net_train_step(net, &want), SAGA_OK);
            } else {
                saga_test_fail_alloc_after(k);
                saga_status st = saga_net_train_step(net, &loss);
                saga_test_fail_alloc_after(0);
                if (st == SAGA_OK) {
                    ok = true;
                    assert_true(loss == want);
                } else {
                    if (st != SAGA_ERR_OUT_OF_MEMORY)
                        fail_msg("allocation %ld failing: %s", k, saga_last_error());
                    failures++;
                    assert_int_equal(saga_model_zero_grad(t.m), SAGA_OK);
                    st = saga_net_train_step(net, &loss);
                    if (st != SAGA_OK)
                        fail_msg("after allocation %ld failed: %s", k, saga_last_error());
                    if (loss != want)
                        fail_msg("after allocation %ld failed: loss %.9g, not %.9g", k, loss, want);
                }
            }
            small_net_free(&t);
        }
        print_message("  %s: %d allocations failed in turn\n", streamed ? "streamed" : "in memory",
                      failures);
        assert_true(ok);
        assert_true(failures >= 10);
    }
}

/* The model's gradients, all of them, into g (host). */
static void grads_of(saga_model *m, float *g) {
    assert_int_equal(saga_model_copy_grads(m, g, false), SAGA_OK);
    assert_int_equal(saga_backend_synchronize(saga_tensor_backend(saga_model_param_at(m, 0))),
                     SAGA_OK);
}

/* A failed pass puts back what it changed alone: an inference failing at each of its allocations
 * in turn after a training pass leaves that pass's gradients as they were (a net under a budget
 * keeps the gradients as its first training pass begins, to put them back should it fail). */
static void test_net_failed_inference_keeps_gradients(void **state) {
    (void)state;
    net_data_load(&SMALL, 240, 4, 24, 6, 9);
    small_net t;
    saga_net_opts no = saga_net_opts_defaults();
    no.self_loops = SAGA_DGRAPH_SELF_LOOPS_ADD;
    small_net_new(&t, &SMALL, 8, (size_t)1 << 30, &no);
    saga_net *net = t.net;
    saga_model *m = t.m;
    double loss = 0;
    assert_int_equal(saga_net_train_step(net, &loss), SAGA_OK);
    const int64_t ng = saga_model_n_scalars(m);
    float *want = test_malloc((size_t)ng * sizeof(float)),
          *got = test_malloc((size_t)ng * sizeof(float));
    float *out = test_malloc((size_t)SMALL.n * (size_t)SMALL.C * sizeof(float));
    grads_of(m, want);
    int failures = 0;
    for (long k = 1; k < 1000; k++) {
        saga_test_fail_alloc_after(k);
        saga_status st = saga_net_forward(net, out);
        saga_test_fail_alloc_after(0);
        grads_of(m, got);
        saga_test_assert_close_f32("gradients after a failed inference", want, got, ng, 0, 0);
        if (st == SAGA_OK)
            break;
        failures++;
    }
    print_message("  %d allocations of an inference failed in turn\n", failures);
    assert_true(failures >= 1);
    test_free(want);
    test_free(got);
    test_free(out);
    small_net_free(&t);
}

static void test_net_budget_named_works(void **state) {
    (void)state;
    data_load();
    net_data_load(&WIDE, 600, 4, 400, 20, 5);
    const saga_program *progs[] = {&GCN, &GAT, &SAGE};
    const char *names[] = {"gcn", "gat", "sage"};
    for (int i = 0; i < 3; i++) {
        check_named_budget(&WIDE, progs[i], names[i]);
        check_named_budget(&D, progs[i], names[i]);
    }
}

/* PageRank by plain power iteration in double, n iterations from 1/n. */
static void pagerank_ref(const saga_graph *g, double dmp, int iters, double *x) {
    int32_t n = saga_graph_n_vertices(g);
    saga_csr in = saga_graph_in(g), out = saga_graph_out(g);
    double *y = test_malloc((size_t)n * sizeof *y);
    for (int32_t v = 0; v < n; v++)
        x[v] = 1.0 / n;
    for (int it = 0; it < iters; it++) {
        double dang = 0;
        for (int32_t u = 0; u < n; u++)
            if (out.offsets[u + 1] == out.offsets[u])
                dang += x[u];
        for (int32_t v = 0; v < n; v++) {
            double s = 0;
            for (int64_t k = in.offsets[v]; k < in.offsets[v + 1]; k++) {
                int32_t u = in.indices[k];
                s += x[u] / (double)(out.offsets[u + 1] - out.offsets[u]);
            }
            y[v] = (1 - dmp) / n + dmp * dang / n + dmp * s;
        }
        memcpy(x, y, (size_t)n * sizeof *x);
    }
    test_free(y);
}

/* Runs PageRank through a net on a backend with budget (0: none); returns the peak. */
static size_t pagerank_net_with(size_t budget, saga_partition_method pm, saga_vertex_order order,
                                int threads, double *rank, saga_net_stats *st) {
    saga_backend_params bp = saga_backend_params_defaults();
    bp.budget_bytes = budget;
    bp.n_threads = threads;
    saga_backend *be = NULL;
    assert_int_equal(saga_backend_cpu_new(&be, &bp), SAGA_OK);
    saga_ctx *c = NULL;
    assert_int_equal(saga_ctx_new(&c, be, 1), SAGA_OK);
    saga_net_opts no = saga_net_opts_defaults();
    no.partition = pm;
    no.order = order;
    saga_net *net = NULL;
    assert_int_equal(saga_net_new(&net, c, D.g, &no), SAGA_OK);
    int iters = 0;
    double l1 = 0;
    saga_status rc = saga_net_pagerank(net, 0.85, 1e-300, 30, rank, &iters, &l1);
    if (rc != SAGA_OK)
        fail_msg("pagerank with budget %zu: %s", budget, saga_last_error());
    assert_int_equal(iters, 30);
    saga_net_get_stats(net, st);
    /* the five f64 vectors the scheduler copies (1 / out-degree, sinks, two of ranks,
     * contributions) and the parts' tiles it loads (their offsets and each edge's source) come
     * from the host allocator, pinned on CUDA, and go back with the net */
    saga_backend_stats bs;
    saga_backend_get_stats(be, &bs);
    size_t vectors = 5 * (size_t)D.n * sizeof(double);
    size_t edges = (size_t)saga_graph_n_edges(D.g) * sizeof(int32_t);
    if (bs.host_pinned_bytes < vectors + edges)
        fail_msg("pagerank with budget %zu: %zu bytes from the host allocator, the vectors are "
                 "%zu and the edges' sources %zu",
                 budget, bs.host_pinned_bytes, vectors, edges);
    saga_net_free(&net);
    saga_backend_get_stats(be, &bs);
    assert_int_equal(bs.host_pinned_bytes, 0);
    saga_ctx_free(&c);
    saga_backend_free_all(&be);
    return st->peak_device_bytes;
}

static size_t pagerank_net(size_t budget, saga_partition_method pm, double *rank,
                           saga_net_stats *st) {
    return pagerank_net_with(budget, pm, SAGA_ORDER_AUTO, 0, rank, st);
}

/* In memory, rows in degree order (the default for PageRank), in out-degree order and in the
 * graph's order give the reference's ranks in the graph's ids; each is the same bits for 1 and 3
 * threads. */
static void test_net_pagerank_orders_and_threads(void **state) {
    (void)state;
    data_load();
    int32_t n = D.n;
    double *ref = test_malloc((size_t)n * sizeof *ref), *r[3][2];
    pagerank_ref(D.g, 0.85, 30, ref);
    const double bound = saga_test_pagerank_bound(D.g, 0.85);
    static const saga_vertex_order orders[] = {SAGA_ORDER_DEGREE, SAGA_ORDER_OUT_DEGREE,
                                               SAGA_ORDER_GRAPH};
    for (int o = 0; o < 3; o++)
        for (int t = 0; t < 2; t++) {
            saga_net_stats st;
            r[o][t] = test_malloc((size_t)n * sizeof *r[o][t]);
            pagerank_net_with(0, SAGA_PARTITION_METIS, orders[o], t ? 3 : 1, r[o][t], &st);
            assert_false(st.streamed);
            assert_true(st.iterate_seconds > 0 && st.iterate_seconds <= st.seconds);
            char what[64];
            snprintf(what, sizeof what, "order %d, %d threads, against the reference",
                     (int)orders[o], t ? 3 : 1);
            saga_test_assert_close_f64(what, r[o][t], ref, n, bound, 0);
        }
    for (int o = 0; o < 3; o++) {
        assert_memory_equal(r[o][0], r[o][1], (size_t)n * sizeof(double));
        test_free(r[o][0]);
        test_free(r[o][1]);
    }
    test_free(ref);
}

/* PageRank's degree orders, checked against their definitions on a graph whose in-degrees span
 * the exact groups (0 to 32) and the powers of two (hubs with up to 300 in-edges), with ties, for
 * every vertex and for a subset ordered in place (a part's rows): each a permutation of its
 * vertices; by out-degree, highest first, ties by id; with the in-degree groups, groups the
 * longest first and within a group the out-degree order. */
static void test_net_degree_orders(void **state) {
    (void)state;
    enum { V = 700 };
    int32_t *src = test_malloc(V * 320 * sizeof *src), *dst = test_malloc(V * 320 * sizeof *dst);
    int64_t m = 0;
    uint64_t r = 12345;
    for (int32_t v = 0; v < V; v++) {
        /* in-degree: v % 40 for most, 33..300 for every 50th */
        int32_t din = v % 50 == 0 ? 33 + v * 267 / V : v % 40;
        for (int32_t k = 0; k < din; k++) {
            r = r * 6364136223846793005ULL + 1442695040888963407ULL;
            src[m] = (int32_t)((r >> 33) % (V / 3)); /* out-degrees uneven, some zero */
            dst[m++] = v;
        }
    }
    saga_graph_opts go = saga_graph_opts_defaults();
    go.duplicates = SAGA_DUPLICATES_KEEP;
    saga_graph *g = NULL;
    assert_int_equal(saga_graph_from_edges(&g, V, m, src, dst, NULL, NULL, &go), SAGA_OK);
    const saga_csr in = saga_graph_in(g), out = saga_graph_out(g);
    int32_t ids[V], odd[V / 2];
    for (int run = 0; run < 4; run++) {
        /* every vertex, then the odd ones alone (ordered in place), each by both keys */
        const int mode = run % 2, count = run < 2 ? V : V / 2;
        for (int32_t i = 0; i < V / 2; i++)
            odd[i] = 2 * i + 1;
        int32_t *got = run < 2 ? ids : odd;
        assert_int_equal(net_degree_order(g, mode == 1, run < 2 ? NULL : odd, count, got), SAGA_OK);
        bool seen[V] = {false};
        int64_t prev_group = INT64_MAX, prev_out = INT64_MAX;
        int32_t prev_v = -1;
        for (int32_t i = 0; i < count; i++) {
            const int32_t v = got[i];
            assert_true(v >= 0 && v < V && !seen[v] && (run < 2 || v % 2 == 1));
            seen[v] = true;
            const int64_t d = in.offsets[v + 1] - in.offsets[v],
                          o = out.offsets[v + 1] - out.offsets[v];
            int64_t group = 0;
            if (mode == 1) {
                group = d;
                if (d > 32) /* 33-63, 64-127, 128-255, ... */
                    for (group = 33; (d >> (group - 28 + 1)) != 0; group++)
                        ;
                if (group < prev_group)
                    prev_out = INT64_MAX, prev_v = -1;
                assert_true(group <= prev_group);
            }
            assert_true(o <= prev_out);
            assert_true(o < prev_out || v > prev_v);
            prev_group = group, prev_out = o, prev_v = v;
        }
    }
    saga_graph_free(&g);
    test_free(src);
    test_free(dst);
}

/* The degree order is PageRank's: a net with stages refuses it when it prepares, and says why. */
static void test_net_degree_order_refused_with_stages(void **state) {
    (void)state;
    saga_net_opts no = saga_net_opts_defaults();
    no.order = SAGA_ORDER_DEGREE;
    data_load();
    small_net sn;
    small_net_new(&sn, &D, 16, 0, &no);
    assert_int_equal(saga_net_forward(sn.net, NULL), SAGA_ERR_UNSUPPORTED);
    saga_test_assert_error_contains("degree order", NULL);
    small_net_free(&sn);
}

static void test_net_pagerank_streamed_equals_memory(void **state) {
    (void)state;
    data_load();
    int32_t n = D.n;
    double *ref = test_malloc((size_t)n * sizeof *ref), *mem = test_malloc((size_t)n * sizeof *mem),
           *str = test_malloc((size_t)n * sizeof *str);
    pagerank_ref(D.g, 0.85, 30, ref);
    saga_net_stats st;
    size_t peak = pagerank_net(0, SAGA_PARTITION_METIS, mem, &st);
    assert_false(st.streamed);
    const double bound = saga_test_pagerank_bound(D.g, 0.85);
    saga_test_assert_close_f64("in memory against the reference", mem, ref, n, bound, 0);
    static const int over[] = {4, 16};
    for (int i = 0; i < 2; i++) {
        pagerank_net(peak / (size_t)over[i], SAGA_PARTITION_METIS, str, &st);
        print_message("  pagerank, budget 1/%d of %zu: %d parts, peak %zu, h2d %llu\n", over[i],
                      peak, (int)st.parts, st.peak_device_bytes, (unsigned long long)st.h2d_bytes);
        assert_true(st.streamed);
        assert_true(st.peak_device_bytes <= st.budget_bytes);
        saga_test_assert_close_f64(over[i] == 4 ? "streamed at 1/4 against in memory"
                                                : "streamed at 1/16 against in memory",
                                   str, mem, n, bound, 0);
    }
    test_free(ref);
    test_free(mem);
    test_free(str);
}

static int teardown(void **state) {
    (void)state;
    net_data_free(&D);
    net_data_free(&SMALL);
    net_data_free(&WIDE);
    return 0;
}

/* Each test starts from run_model's defaults, whatever a failed test before it left set. */
static int net_setup(void **state) {
    HOST_HALOS = false;
    LAGGED = false;
    TRANSFER = SAGA_TRANSFER_F32;
    COPIES = SAGA_COPIES_AUTO;
    sparse_input = false;
    change_input = false;
    LISTED = NULL;
    GRAPH = NULL;
    FWD_ROWS = NULL;
    N_FWD_ROWS = 0;
    return saga_test_setup(state);
}
#undef cmocka_unit_test
#define cmocka_unit_test(f) cmocka_unit_test_setup_teardown(f, net_setup, saga_test_teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_net_train_queued),
        cmocka_unit_test(test_net_rows_queued),
        cmocka_unit_test(test_net_gcn_streamed_equals_memory),
        cmocka_unit_test(test_net_bounds_catch_mutants),
        cmocka_unit_test(test_net_sparse_input_equals_dense),
        cmocka_unit_test(test_net_input_auto),
        cmocka_unit_test(test_net_input_auto_calls),
        cmocka_unit_test(test_net_gcn_offload_equals_memory),
        cmocka_unit_test(test_net_gat_streamed_equals_memory),
        cmocka_unit_test(test_net_sage_streamed_equals_memory),
        cmocka_unit_test(test_net_memory_equals_program_run),
        cmocka_unit_test(test_net_metis_moves_fewer_bytes),
        cmocka_unit_test(test_net_forward_rows),
        cmocka_unit_test(test_net_streamed_chain),
        cmocka_unit_test(test_net_streamed_chain_later),
        cmocka_unit_test(test_net_streamed_sliced_training),
        cmocka_unit_test(test_net_streamed_chain_head),
        cmocka_unit_test(test_net_explain),
        cmocka_unit_test(test_net_loss_rows),
        cmocka_unit_test(test_net_head),
        cmocka_unit_test(test_net_streamed_host_arrays_pinned),
        cmocka_unit_test(test_net_memory_host_arrays_pinned),
        cmocka_unit_test(test_net_budget_too_small),
        cmocka_unit_test(test_net_budget_named_works),
        cmocka_unit_test(test_net_parts_search_fewest),
        cmocka_unit_test(test_net_budgets_down_to_named_run),
        cmocka_unit_test(test_net_gin_budgets_down_to_named_run),
        cmocka_unit_test(test_net_failing_allocations),
        cmocka_unit_test(test_net_failed_inference_keeps_gradients),
        cmocka_unit_test(test_net_resident_halos),
        cmocka_unit_test(test_net_copies_inline_or_worker),
        cmocka_unit_test(test_net_transfer_precision),
        cmocka_unit_test(test_net_pagerank_streamed_equals_memory),
        cmocka_unit_test(test_net_pagerank_orders_and_threads),
        cmocka_unit_test(test_net_degree_orders),
        cmocka_unit_test(test_net_degree_order_refused_with_stages),
    };
    return cmocka_run_group_tests(tests, NULL, teardown);
}
