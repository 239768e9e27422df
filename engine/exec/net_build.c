/* net_build.c - building a graph network (saga_net.h) and preparing it to run: its stages and
 * input, the blocks of destinations with their halos, transposes and batch plans, the placed
 * graph and its edge values, the footprint estimates that choose between one block in device
 * memory and parts streamed through it, and the scheduler's blocks. */
#include "net_impl.h"

#include "net_chain.h"

#include "half_impl.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bytes of the host array of stage s's input rows (activations, gradients or saved values), one
 * float more so that none is empty. */
static size_t host_rows_bytes(const saga_net *n, int s) {
    int64_t cols = s == 0 ? n->in_cols : n->stages[s - 1].out_cols;
    return ((size_t)n->n * (size_t)cols + 1) * sizeof(float);
}

saga_net_opts saga_net_opts_defaults(void) {
    saga_net_opts o = {.exec = SAGA_EXEC_AUTO,
                       .parts = 0,
                       .partition = SAGA_PARTITION_METIS,
                       .partition_seed = 1,
                       .saved = SAGA_SAVED_RECOMPUTE,
                       .self_loops = SAGA_DGRAPH_SELF_LOOPS_KEEP};
    return o;
}

/* ---- building ----------------------------------------------------------------------------- */

saga_status saga_net_new(saga_net **out, saga_ctx *c, const saga_graph *g, const saga_net_opts *o) {
    saga_status st = SAGA_OK;
    saga_net *n = NULL;
    saga_net_opts def = saga_net_opts_defaults();
    if (!o)
        o = &def;
    SAGA_CHECK(out && c && g, SAGA_ERR_INVALID_ARG,
               "saga_net_new: out, context and graph must be given");
    SAGA_CHECK((unsigned)o->exec < SAGA_EXEC_COUNT && o->parts >= 0 &&
                   (unsigned)o->partition < SAGA_PARTITION_METHOD_COUNT &&
                   (unsigned)o->saved < SAGA_SAVED_COUNT &&
                   (unsigned)o->self_loops < SAGA_DGRAPH_SELF_LOOPS_COUNT &&
                   (unsigned)o->order < SAGA_ORDER_COUNT &&
                   (unsigned)o->transfer < SAGA_TRANSFER_COUNT,
               SAGA_ERR_INVALID_ARG,
               "saga_net_new: options out of range (exec %d, parts %d, partition %d, saved %d, "
               "self_loops %d, order %d, transfer %d)",
               (int)o->exec, o->parts, (int)o->partition, (int)o->saved, (int)o->self_loops,
               (int)o->order, (int)o->transfer);
    SAGA_TRY(saga_alloc_zeroed((void **)&n, 1, sizeof *n, "a net"));
    n->c = c;
    n->be = saga_ctx_backend(c);
    n->g_user = g;
    n->o = *o;
    n->n = saga_graph_n_vertices(g);
    n->work_scale = 1;
    if (o->halo)
        SAGA_TRY(net_halo_new(n));
    *out = n;
    return SAGA_OK;
fail:
    if (n)
        net_halo_free(n);
    saga_free(n);
    return st;
}

static saga_status add_stage(saga_net *n, const stage *s) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(!n->ready, SAGA_ERR_INVALID_ARG,
               "saga_net: stages must be added before the first run");
    SAGA_CHECK(s->out_cols >= 1, SAGA_ERR_INVALID_ARG,
               "saga_net: a stage's width must be >= 1, got %lld", (long long)s->out_cols);
    if (n->n_stages == n->cap_stages) {
        int cap = n->cap_stages ? 2 * n->cap_stages : 8;
        SAGA_TRY(
            saga_realloc_array((void **)&n->stages, (size_t)cap, sizeof *n->stages, "net stages"));
        n->cap_stages = cap;
    }
    n->stages[n->n_stages++] = *s;
fail:
    return st;
}

saga_status saga_net_add_vertex(saga_net *n, saga_apply_vertex_fn fn, void *layer,
                                int64_t out_cols) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(n && fn, SAGA_ERR_INVALID_ARG,
               "saga_net_add_vertex: net and function must be given");
    stage s = {.kind = STAGE_VERTEX, .fn = fn, .layer = layer, .out_cols = out_cols};
    SAGA_TRY(add_stage(n, &s));
fail:
    return st;
}

saga_status saga_net_set_dense_rows(saga_net *n) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(n && n->n_stages > 0 && n->stages[n->n_stages - 1].kind == STAGE_VERTEX,
               SAGA_ERR_INVALID_ARG,
               "saga_net_set_dense_rows: the last stage added must be a "
               "vertex stage (saga_net_add_vertex)");
    SAGA_CHECK(!n->ready, SAGA_ERR_INVALID_ARG,
               "saga_net_set_dense_rows: stages must be marked before the first run");
    n->stages[n->n_stages - 1].dense_rows = true;
fail:
    return st;
}

saga_status saga_net_add_program(saga_net *n, const saga_program *p, void *layer,
                                 int64_t out_cols) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(n && p, SAGA_ERR_INVALID_ARG, "saga_net_add_program: net and program must be given");
    SAGA_TRY(saga_program_check(p, "saga_net_add_program"));
    stage s = {.kind = STAGE_PROGRAM,
               .p = *p,
               .fn = p->apply_vertex,
               .layer = layer,
               .out_cols = out_cols};
    SAGA_TRY(add_stage(n, &s));
fail:
    return st;
}

saga_status saga_net_set_model(saga_net *n, saga_model *m) {
    if (!n)
        return saga_error(SAGA_ERR_INVALID_ARG, "saga_net_set_model: net is NULL");
    n->model = m;
    return SAGA_OK;
}

saga_status saga_net_set_loss(saga_net *n, saga_net_loss_fn fn, void *user) {
    if (!n)
        return saga_error(SAGA_ERR_INVALID_ARG, "saga_net_set_loss: net is NULL");
    n->loss = fn;
    n->loss_user = user;
    return SAGA_OK;
}

saga_status saga_net_set_loss_rows(saga_net *n, const int32_t *vertices, int64_t count) {
    saga_status st = SAGA_OK;
    uint8_t *seen = NULL;
    SAGA_CHECK(n && count >= 0 && (vertices || count == 0), SAGA_ERR_INVALID_ARG,
               "saga_net_set_loss_rows: net and vertices must be given (count %lld)",
               (long long)count);
    SAGA_CHECK(!n->ready, SAGA_ERR_INVALID_ARG,
               "saga_net_set_loss_rows: the loss rows must be set before the first run");
    for (int64_t i = 0; i < count; i++)
        SAGA_CHECK(vertices[i] >= 0 && vertices[i] < n->n, SAGA_ERR_INVALID_ARG,
                   "saga_net_set_loss_rows: vertex %d (entry %lld) is outside 0..%d",
                   (int)vertices[i], (long long)i, (int)n->n - 1);
    saga_free(n->loss_rows);
    n->loss_rows = NULL;
    n->n_loss_rows = 0;
    if (count == 0)
        return SAGA_OK;
    SAGA_TRY(saga_alloc_zeroed((void **)&seen, (size_t)n->n, 1, "loss rows"));
    int32_t k = 0;
    for (int64_t i = 0; i < count; i++)
        k += seen[vertices[i]] == 0, seen[vertices[i]] = 1;
    SAGA_TRY(saga_alloc_array((void **)&n->loss_rows, (size_t)k, sizeof(int32_t), "loss rows"));
    k = 0;
    for (int32_t v = 0; v < n->n; v++)
        if (seen[v])
            n->loss_rows[k++] = v;
    n->n_loss_rows = k;
fail:
    saga_free(seen);
    return st;
}

/* The first of x[0..count) that is not finite, or -1: input rows get the check a features file
 * gets. */
static int64_t first_nonfinite(const float *x, int64_t count) {
    for (int64_t k = 0; k < count; k++)
        if (!isfinite(x[k]))
            return k;
    return -1;
}

saga_status saga_net_set_input(saga_net *n, const float *x, int64_t cols) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(n && x && cols >= 1, SAGA_ERR_INVALID_ARG,
               "saga_net_set_input: net and rows must be given");
    SAGA_CHECK(!n->sparse, SAGA_ERR_INVALID_ARG,
               "saga_net_set_input: the net's input is sparse (saga_net_set_input_csr)");
    SAGA_CHECK(!n->ready || cols == n->in_cols, SAGA_ERR_INVALID_ARG,
               "saga_net_set_input: %lld columns, the net was prepared for %lld", (long long)cols,
               (long long)n->in_cols);
    int64_t bad = first_nonfinite(x, (int64_t)n->n * cols);
    SAGA_CHECK(bad < 0, SAGA_ERR_INVALID_ARG,
               "saga_net_set_input: row %lld, column %lld is %g: input rows must be finite",
               (long long)(bad / cols), (long long)(bad % cols), bad < 0 ? 0.0 : (double)x[bad]);
    SAGA_TRY(net_settle(n, false)); /* a queued pass may read the rows */
    SAGA_TRY(net_rows_settle(n));
    if (!n->x) {
        SAGA_TRY(saga_backend_host_alloc(n->be, (void **)&n->x,
                                         (size_t)n->n * (size_t)cols * sizeof(float) + 1));
        n->in_cols = cols;
    }
    if (n->plan.ids) {
        for (int32_t v = 0; v < n->n; v++)
            memcpy(n->x + (int64_t)v * cols, x + (int64_t)n->plan.ids[v] * cols,
                   (size_t)cols * sizeof(float));
    } else {
        memcpy(n->x, x, (size_t)n->n * (size_t)cols * sizeof(float));
    }
    n->x_changed = true;
fail:
    return st;
}

static void sparse_input_free(saga_net *n) {
    saga_backend_host_free(n->be, n->xs_off, ((size_t)n->n + 1) * sizeof(int64_t));
    saga_backend_host_free(n->be, n->xs_idx, ((size_t)n->x_nnz + 1) * sizeof(int32_t));
    saga_backend_host_free(n->be, n->xs_val, ((size_t)n->x_nnz + 1) * sizeof(float));
    n->xs_off = NULL;
    n->xs_idx = NULL;
    n->xs_val = NULL;
}

saga_status saga_net_set_input_csr(saga_net *n, const int64_t *offsets, const int32_t *indices,
                                   const float *values, int64_t cols) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(n && offsets && (indices || offsets[n->n] == 0) && (values || offsets[n->n] == 0) &&
                   cols >= 1,
               SAGA_ERR_INVALID_ARG, "saga_net_set_input_csr: net and CSR must be given");
    SAGA_CHECK(!n->x, SAGA_ERR_INVALID_ARG,
               "saga_net_set_input_csr: the net's input is dense (saga_net_set_input)");
    SAGA_CHECK(!n->ready || cols == n->in_cols, SAGA_ERR_INVALID_ARG,
               "saga_net_set_input_csr: %lld columns, the net was prepared for %lld",
               (long long)cols, (long long)n->in_cols);
    int64_t nnz = offsets[n->n];
    SAGA_CHECK(offsets[0] == 0 && nnz >= 0, SAGA_ERR_INVALID_ARG,
               "saga_net_set_input_csr: the offsets run from %lld to %lld; they must start at 0",
               (long long)offsets[0], (long long)nnz);
    for (int32_t v = 0; v < n->n; v++)
        SAGA_CHECK(offsets[v + 1] >= offsets[v], SAGA_ERR_INVALID_ARG,
                   "saga_net_set_input_csr: offsets decrease at row %d", (int)v);
    int64_t bad = first_nonfinite(values, nnz);
    SAGA_CHECK(bad < 0, SAGA_ERR_INVALID_ARG,
               "saga_net_set_input_csr: entry %lld is %g: input values must be finite",
               (long long)bad, bad < 0 ? 0.0 : (double)values[bad]);
    for (int64_t k = 0; k < nnz; k++)
        SAGA_CHECK(indices[k] >= 0 && indices[k] < cols, SAGA_ERR_INVALID_ARG,
                   "saga_net_set_input_csr: column %d of entry %lld is outside [0, %lld)",
                   (int)indices[k], (long long)k, (long long)cols);
    if (n->ready)
        SAGA_CHECK(nnz == n->x_nnz &&
                       memcmp(offsets, n->xs_off, ((size_t)n->n + 1) * sizeof(int64_t)) == 0,
                   SAGA_ERR_INVALID_ARG,
                   "saga_net_set_input_csr: the rows' entry counts changed after the net ran");
    SAGA_TRY(net_settle(n, false)); /* a queued pass may read the rows */
    SAGA_TRY(net_rows_settle(n));
    if (n->xs_off && nnz != n->x_nnz)
        sparse_input_free(n);
    if (!n->xs_off) {
        n->x_nnz = nnz;
        SAGA_TRY(net_host_array(n, (void **)&n->xs_off, (size_t)n->n + 1, sizeof(int64_t),
                                "sparse input offsets"));
        SAGA_TRY(net_host_array(n, (void **)&n->xs_idx, (size_t)nnz + 1, sizeof(int32_t),
                                "sparse input indices"));
        SAGA_TRY(net_host_array(n, (void **)&n->xs_val, (size_t)nnz + 1, sizeof(float),
                                "sparse input values"));
    }
    memcpy(n->xs_off, offsets, ((size_t)n->n + 1) * sizeof(int64_t));
    if (nnz) {
        memcpy(n->xs_idx, indices, (size_t)nnz * sizeof(int32_t));
        memcpy(n->xs_val, values, (size_t)nnz * sizeof(float));
    }
    n->sparse = true;
    n->in_cols = cols;
    n->x_changed = true;
    return SAGA_OK;
fail:
    if (n && !n->ready && st == SAGA_ERR_OUT_OF_MEMORY) {
        sparse_input_free(n);
        n->x_nnz = 0;
    }
    return st;
}

saga_status saga_net_set_input_auto(saga_net *n, const float *x, int64_t cols, double max_density) {
    saga_status st = SAGA_OK;
    int64_t *off = NULL;
    int32_t *idx = NULL;
    float *val = NULL;
    SAGA_CHECK(n && x && cols >= 1, SAGA_ERR_INVALID_ARG,
               "saga_net_set_input_auto: net and rows must be given");
    SAGA_CHECK(max_density >= 0 && max_density <= 1, SAGA_ERR_INVALID_ARG,
               "saga_net_set_input_auto: max_density %g is outside [0, 1]", max_density);
    SAGA_CHECK(!n->sparse || n->packed, SAGA_ERR_INVALID_ARG,
               "saga_net_set_input_auto: the net's input is a CSR (saga_net_set_input_csr)");
    if (n->x || n->n_stages == 0 || n->stages[0].kind != STAGE_VERTEX || n->stages[0].dense_rows ||
        cols > INT32_MAX)
        return saga_net_set_input(n, x, cols);
    const int64_t total = (int64_t)n->n * cols;
    SAGA_TRY(saga_alloc_array((void **)&off, (size_t)n->n + 1, sizeof *off, "input offsets"));
    off[0] = 0;
    for (int32_t v = 0; v < n->n; v++) {
        const float *r = x + (int64_t)v * cols;
        int64_t k = 0;
        for (int64_t j = 0; j < cols; j++)
            k += r[j] != 0.0f; /* a NaN is kept */
        off[v + 1] = off[v] + k;
    }
    const int64_t nnz = off[n->n];
    if (!n->sparse && (double)nnz > max_density * (double)total) {
        saga_free(off);
        return saga_net_set_input(n, x, cols);
    }
    if (n->sparse && n->ready)
        SAGA_CHECK(nnz == n->x_nnz &&
                       memcmp(off, n->xs_off, ((size_t)n->n + 1) * sizeof(int64_t)) == 0,
                   SAGA_ERR_INVALID_ARG,
                   "saga_net_set_input_auto: the net ran on these rows as a CSR; their non-zero "
                   "counts must stay the same");
    SAGA_TRY(saga_alloc_array((void **)&idx, (size_t)nnz + 1, sizeof *idx, "input indices"));
    SAGA_TRY(saga_alloc_array((void **)&val, (size_t)nnz + 1, sizeof *val, "input values"));
    for (int32_t v = 0; v < n->n; v++) {
        const float *r = x + (int64_t)v * cols;
        int64_t q = off[v];
        for (int64_t j = 0; j < cols; j++)
            if (r[j] != 0.0f) {
                idx[q] = (int32_t)j;
                val[q++] = r[j];
            }
    }
    if ((st = saga_net_set_input_csr(n, off, idx, val, cols)) == SAGA_OK)
        n->packed = true;
fail:
    saga_free(off);
    saga_free(idx);
    saga_free(val);
    return st;
}

void net_sparse_fill(saga_net *n) {
    for (int32_t d = n->plan.d_lo; d < n->plan.d_hi; d++) {
        if (n->plan.blk[d].x_own)
            net_sparse_fill_block(n, &n->plan.blk[d]);
    }
}

/* The sparse input's entries in rows v0 .. v1 - 1 of the net's order. */
static int64_t sparse_rows_nnz(const saga_net *n, int32_t v0, int32_t v1) {
    if (!n->plan.ids)
        return n->xs_off[v1] - n->xs_off[v0];
    int64_t nz = 0;
    for (int32_t v = v0; v < v1; v++)
        nz += n->xs_off[n->plan.ids[v] + 1] - n->xs_off[n->plan.ids[v]];
    return nz;
}

/* Frees what net_prepare made (the scheduler's blocks go with it). */
/* Puts the input rows back in the graph's order (x_placed): row v of the parts' order goes to
 * row plan.ids[v], cycle by cycle, each cycle's rows marked done in plan.ids (which goes with the
 * plan), through the two rows of x_room; a pass that reads x has ended (net_settle). */
static void input_unplace(saga_net *n) {
    const size_t row = (size_t)n->in_cols * sizeof(float);
    int32_t *ids = n->plan.ids;
    float *carry = n->x_room, *swap = n->x_room + n->in_cols;
    for (int32_t s = 0; s < n->n; s++) {
        if (ids[s] < 0)
            continue;
        memcpy(carry, n->x + (int64_t)s * n->in_cols, row);
        int32_t j = s;
        do {
            const int32_t to = ids[j];
            ids[j] = ~to; /* done */
            float *at = n->x + (int64_t)to * n->in_cols;
            memcpy(swap, at, row);
            memcpy(at, carry, row);
            float *t = carry;
            carry = swap;
            swap = t;
            j = to;
        } while (j != s);
    }
    n->x_placed = false;
}

static void unprepare(saga_net *n) {
    int S = n->n_stages;
    if (n->pr_free)
        n->pr_free(n);
    net_chain_free(n, &n->plan.tchain);
    net_chain_free(n, &n->plan.echain);
    n->plan.tchain_none = false;
    if (n->sched)
        saga_ctx_set_pressure(n->c, NULL, NULL);
    saga_sched_free(&n->sched); /* no copy reads the input rows after it */
    if (n->x_placed)
        input_unplace(n);
    n->x_changed = true; /* the next plan's blocks and 16-bit copy load it afresh */
    if (n->plan.blk)
        for (int32_t d = n->plan.d_lo; d < n->plan.d_hi; d++)
            net_block_free(n, &n->plan.blk[d]);
    net_dist_free(n);
    saga_free(n->plan.blk);
    n->plan.blk = NULL;
    for (int i = 0; i < N_KEYS; i++) {
        saga_backend_host_free(n->be, n->vals[i], net_edge_bytes(n->m));
        n->vals[i] = NULL;
    }
    saga_blk ***tabs[] = {n->act, n->halo, n->grad, n->gin, n->ghalo, n->saved};
    for (size_t t = 0; t < sizeof tabs / sizeof tabs[0]; t++) {
        if (!tabs[t])
            continue;
        for (int s = 0; s <= S; s++)
            saga_free(tabs[t][s]);
        saga_free(tabs[t]);
    }
    n->act = n->halo = n->grad = n->gin = n->ghalo = n->saved = NULL;
    saga_backend_host_free(n->be, n->x16, (size_t)n->n * (size_t)n->in_cols * 2 + 1);
    n->x16 = NULL;
    saga_free(n->plan.resident);
    saga_free(n->full);
    saga_free(n->gfull);
    n->plan.resident = NULL;
    n->full = n->gfull = NULL;
    float **hosts[] = {n->act_host, n->grad_host, n->saved_host};
    for (int t = 0; t < 3; t++) {
        if (!hosts[t])
            continue;
        /* act_host[0] is the input (n->x), grad_host[0] is unused; saved_host[0] holds what a
         * first stage that is a program saves */
        for (int s = hosts[t] == n->saved_host ? 0 : 1; s <= S; s++)
            saga_backend_host_free(n->be, hosts[t][s], host_rows_bytes(n, s));
        saga_free(hosts[t]);
    }
    n->act_host = n->grad_host = n->saved_host = NULL;
    saga_backend_host_free(n->be, n->eids, net_edge_bytes(n->m));
    n->eids = NULL;
    saga_free(n->h_off);
    saga_free(n->h_src);
    saga_free(n->h_w);
    saga_free(n->out_off);
    n->h_off = n->out_off = NULL;
    n->h_src = NULL;
    n->h_w = NULL;
    saga_partition_free(&n->plan.part);
    saga_backend_host_free(n->be, n->plan.ids, (size_t)n->n * sizeof(int32_t));
    n->plan.ids = NULL;
    saga_free(n->sample_pos);
    n->sample_pos = NULL;
    saga_free(n->iota);
    n->iota = NULL;
    n->proven = false;
    n->ready = false;
}

void net_unprepare(saga_net *n) {
    unprepare(n);
}

saga_status net_keep(saga_net *n, void *p, void (*free_fn)(void *p)) {
    if (n->n_kept == n->cap_kept) {
        int cap = n->cap_kept ? 2 * n->cap_kept : 8;
        net_kept *k = saga_realloc(n->kept, (size_t)cap * sizeof *k);
        if (!k) {
            if (free_fn)
                free_fn(p);
            saga_free(p);
            return saga_error(SAGA_ERR_OUT_OF_MEMORY, "saga_net: no memory to keep a layer");
        }
        n->kept = k;
        n->cap_kept = cap;
    }
    n->kept[n->n_kept++] = (net_kept){p, free_fn};
    return SAGA_OK;
}

void saga_net_free(saga_net **np) {
    if (!np || !*np)
        return;
    saga_net *n = *np;
    (void)net_settle(n, false); /* its error was the queued pass's to report */
    (void)net_rows_settle(n);
    net_sample_free(n);
    for (int k = 0; k < 2; k++)
        saga_idle_tuner_finish(&n->tune[k]); /* idle threads sleep again after the passes */
    unprepare(n);
    saga_free(n->x_room);
    saga_backend_host_free(n->be, n->grad_keep, n->grad_keep_bytes);
    saga_event_free(&n->train_ev);
    saga_event_free(&n->rows_ev);
    saga_free(n->rows_pos);
    saga_backend_host_free(n->be, n->loss_host, n->loss_bytes);
    saga_backend_host_free(n->be, n->rows_out, n->rows_out_bytes);
    saga_replay_free(&n->replay[0]);
    saga_replay_free(&n->replay[1]);
    saga_comm_free(&n->dcomm);
    net_halo_free(n);
    if (n->x)
        saga_backend_host_free(n->be, n->x, (size_t)n->n * (size_t)n->in_cols * sizeof(float) + 1);
    sparse_input_free(n);
    saga_free(n->loss_rows);
    saga_free(n->stages);
    for (int i = 0; i < n->n_kept; i++) {
        if (n->kept[i].free_fn)
            n->kept[i].free_fn(n->kept[i].p);
        saga_free(n->kept[i].p);
    }
    saga_free(n->kept);
    saga_free(n);
    *np = NULL;
}

/* The search over the number of parts when saga chooses it under a budget: each try partitions,
 * places the blocks and measures the largest step (with what stays resident beside it). METIS
 * takes seconds per try on a few million edges, so with METIS contiguous ranges, cut in no time,
 * probe first, growing k as the search does until one fits. METIS then tries the last probed k
 * that did not fit (its halos are smaller) and walks down the probed counts while it fits; the
 * partition of the fewest parts that fit is kept, so that going back to it costs no second
 * METIS run. Where METIS does not fit at the first count it tries, the search grows k as it
 * does without probes. */
typedef enum ks_phase { KS_GROW = 0, KS_PROBE, KS_METIS } ks_phase;

typedef struct ksearch {
    ks_phase phase;
    int n_probes, at;     /* at: the probe METIS tries now */
    int32_t probe_k[32];  /* the probes, k growing: at least doubling, so 32 hold any int32 k */
    int32_t k_fits;       /* the fewest parts METIS fit at, 0 while none */
    saga_partition *kept; /* METIS's partition into k_fits parts */
} ksearch;

/* After the try at k (k > 1; fits: its step fits, last: it fits or k can grow no more): the next
 * k to try, 0 to keep this one, or -1 to grow k as without probes. */
static int32_t ksearch_next(ksearch *ks, saga_net *n, int32_t k, bool fits, bool last) {
    switch (ks->phase) {
    case KS_PROBE:
        if (ks->n_probes < 32)
            ks->probe_k[ks->n_probes++] = k;
        if (!last)
            return -1;
        ks->phase = KS_METIS;
        ks->at = ks->n_probes - (ks->n_probes > 1 ? 2 : 1);
        return ks->probe_k[ks->at];
    case KS_METIS:
        if (fits && ks->at > 0) { /* k is probe_k[at] */
            /* keep this partition, try the next fewer parts */
            saga_partition_free(&ks->kept);
            ks->kept = n->plan.part;
            n->plan.part = NULL;
            ks->k_fits = k;
            return ks->probe_k[--ks->at];
        }
        if (fits)
            return 0;
        ks->phase = KS_GROW;
        return ks->k_fits ? ks->k_fits : -1;
    case KS_GROW:
        break;
    }
    return -1;
}

/* ---- preparing ---------------------------------------------------------------------------- */

static void trim_ctx(void *user) {
    saga_ctx_trim((saga_ctx *)user);
}

static bool give_back(void *user, size_t bytes) {
    saga_net *n = user;
    return n->sched && saga_sched_give_back(n->sched, bytes);
}

/* The group of a row with d in-edges in the degree order: d itself up to 32, then one group per
 * power of two. Neighbouring rows of one length run the pull loop (unrolled by four) the same
 * number of times, so its branches are predicted; a longer row mispredicts about once, over at
 * least 33 entries. */
static int in_degree_group(int64_t d) {
    return d <= 32 ? (int)d : 28 + (63 - __builtin_clzll((unsigned long long)d));
}

enum { IN_GROUPS = 28 + 64 };

saga_status net_degree_order(const saga_graph *g, bool by_in_group, const int32_t *vs,
                             int32_t count, int32_t *ids) {
    saga_status st = SAGA_OK;
    int64_t *cnt = NULL;
    int32_t *tmp = NULL;
    const int32_t N = count;
    const saga_csr out = saga_graph_out(g), in = saga_graph_in(g);
#define VTX(i) (vs ? vs[i] : (int32_t)(i))
#define OUTDEG(v) (out.offsets[(v) + 1] - out.offsets[(v)])
    int64_t top = 0;
    for (int32_t i = 0; i < N; i++)
        top = OUTDEG(VTX(i)) > top ? OUTDEG(VTX(i)) : top;
    top = top < IN_GROUPS ? IN_GROUPS : top;
    SAGA_TRY(saga_alloc_zeroed((void **)&cnt, (size_t)top + 2, sizeof *cnt, "degree counts"));
    SAGA_TRY(saga_alloc_array((void **)&tmp, N ? (size_t)N : 1, sizeof *tmp, "vertex ids"));
    /* by out-degree, highest first, stable: into tmp (ids may be vs) */
    for (int32_t i = 0; i < N; i++)
        cnt[top - OUTDEG(VTX(i)) + 1]++;
    for (int64_t d = 0; d <= top; d++)
        cnt[d + 1] += cnt[d];
    for (int32_t i = 0; i < N; i++) {
        const int32_t v = VTX(i);
        tmp[cnt[top - OUTDEG(v)]++] = v;
    }
    if (!by_in_group) {
        memcpy(ids, tmp, (size_t)N * sizeof *ids);
        goto fail;
    }
    /* then by in-degree group, the longest rows first, stable */
    memset(cnt, 0, (IN_GROUPS + 1) * sizeof *cnt);
    for (int32_t i = 0; i < N; i++)
        cnt[IN_GROUPS - in_degree_group(in.offsets[tmp[i] + 1] - in.offsets[tmp[i]])]++;
    for (int k = 0; k < IN_GROUPS; k++)
        cnt[k + 1] += cnt[k];
    for (int32_t i = 0; i < N; i++) {
        const int32_t v = tmp[i];
        ids[cnt[IN_GROUPS - 1 - in_degree_group(in.offsets[v + 1] - in.offsets[v])]++] = v;
    }
#undef VTX
#undef OUTDEG
fail:
    saga_free(cnt);
    saga_free(tmp);
    return st;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Renumbers the placed in-CSR (in the graph's order) into the order of n->plan.ids: row i is the
 * graph's row ids[i], with its sources renumbered and sorted (their values with them). */
static saga_status permute_placed(saga_net *n) {
    saga_status st = SAGA_OK;
    int32_t *pos = NULL, *src = NULL;
    int64_t *off = NULL;
    uint64_t *keys = NULL;
    float *w = NULL;
    const int32_t N = n->n;
    SAGA_TRY(saga_alloc_array((void **)&pos, (size_t)N, sizeof *pos, "vertex positions"));
    SAGA_TRY(saga_alloc_array((void **)&off, (size_t)N + 1, sizeof *off, "placed offsets"));
    SAGA_TRY(
        saga_alloc_array((void **)&src, n->m ? (size_t)n->m : 1, sizeof *src, "placed sources"));
    if (n->h_w)
        SAGA_TRY(
            saga_alloc_array((void **)&w, n->m ? (size_t)n->m : 1, sizeof *w, "placed weights"));
    for (int32_t i = 0; i < N; i++)
        pos[n->plan.ids[i]] = i;
    off[0] = 0;
    for (int32_t i = 0; i < N; i++)
        off[i + 1] = off[i] + (n->h_off[n->plan.ids[i] + 1] - n->h_off[n->plan.ids[i]]);
    /* rows longer than an insertion sort handles are sorted as (source, value) keys, the
     * source in the high half, in a scratch row per thread */
    int64_t longest = 0;
    for (int32_t i = 0; i < N; i++)
        longest = off[i + 1] - off[i] > longest ? off[i + 1] - off[i] : longest;
    const int nt = omp_get_max_threads();
    SAGA_TRY(saga_alloc_array((void **)&keys, (size_t)nt * (size_t)(longest + 1), sizeof *keys,
                              "sort keys"));
#pragma omp parallel for schedule(dynamic, 256) num_threads(nt)
    for (int32_t i = 0; i < N; i++) {
        const int64_t a = n->h_off[n->plan.ids[i]], len = off[i + 1] - off[i];
        int32_t *s = src + off[i];
        if (!n->h_w && len <= 32) {
            for (int64_t k = 0; k < len; k++) {
                int32_t x = pos[n->h_src[a + k]];
                int64_t j = k;
                for (; j > 0 && s[j - 1] > x; j--)
                    s[j] = s[j - 1];
                s[j] = x;
            }
            continue;
        }
        uint64_t *t = keys + (size_t)omp_get_thread_num() * (size_t)(longest + 1);
        for (int64_t k = 0; k < len; k++) {
            uint32_t bits = 0;
            if (n->h_w)
                memcpy(&bits, &n->h_w[a + k], sizeof bits);
            t[k] = (uint64_t)(uint32_t)pos[n->h_src[a + k]] << 32 | bits;
        }
        qsort(t, (size_t)len, sizeof *t, cmp_u64);
        for (int64_t k = 0; k < len; k++) {
            s[k] = (int32_t)(t[k] >> 32);
            if (w) {
                uint32_t bits = (uint32_t)t[k];
                memcpy(&w[off[i] + k], &bits, sizeof bits);
            }
        }
    }
    saga_free(n->h_off);
    saga_free(n->h_src);
    saga_free(n->h_w);
    n->h_off = off;
    n->h_src = src;
    n->h_w = w;
    off = NULL, src = NULL, w = NULL;
fail:
    saga_free(pos);
    saga_free(off);
    saga_free(src);
    saga_free(w);
    saga_free(keys);
    return st;
}

/* The placed in-CSR of the (renumbered) graph and the edge values the stages use. */
static saga_status place(saga_net *n, const saga_graph *g) {
    saga_status st = SAGA_OK;
    SAGA_TRY(saga_place_in_csr(g, n->o.self_loops == SAGA_DGRAPH_SELF_LOOPS_ADD, &n->h_off,
                               &n->h_src, &n->h_w, &n->m));
    if (n->plan.ids && !n->plan.part)
        SAGA_TRY(permute_placed(n)); /* a vertex order in memory */
    if (!(n->hx && n->hx->deg_off)) {
        /* the sources' out-degrees (as offsets), counted here; over shards they are the whole
         * graph's, kept with the halo */
        SAGA_TRY(saga_alloc_zeroed((void **)&n->out_off, (size_t)n->n + 1, sizeof(int64_t),
                                   "out-degrees"));
        for (int64_t k = 0; k < n->m; k++)
            n->out_off[n->h_src[k] + 1]++;
        for (int32_t u = 0; u < n->n; u++)
            n->out_off[u + 1] += n->out_off[u];
    }
    for (int s = 0; s < n->n_stages; s++) {
        const stage *sg = &n->stages[s];
        if (sg->kind != STAGE_PROGRAM)
            continue;
        bool fused = saga_prog_fused(&sg->p);
        bool mean = fused && sg->p.gather == SAGA_GATHER_MEAN;
        int key = net_key_of(sg->p.edge_weight, mean);
        if ((sg->p.edge_weight == SAGA_WEIGHT_NONE && !mean) || n->vals[key])
            continue;
        SAGA_TRY(net_host_array(n, (void **)&n->vals[key], net_edge_bytes(n->m), 1, "edge values"));
        /* over shards, the sources' out-degrees are the whole graph's */
        const int64_t *deg = n->hx && n->hx->deg_off ? n->hx->deg_off : n->out_off;
        saga_edge_values(n->n, n->h_off, n->h_src, n->h_w, deg, sg->p.edge_weight, mean,
                         n->vals[key]);
    }
fail:
    return st;
}

/* Device bytes the largest step of a plan with k blocks holds at once (its blocks twice over,
 * for the next step's prefetch, but a resident stage's gathered halo once, plus the compute's own
 * tensors, estimated). A training pass trains stages below train_below part by part; the parts
 * run the others in inference only (the training chain trains them, see parts_train_below). */
static size_t step_estimate(const saga_net *n, bool train_pass, int train_below, size_t *max_work) {
    size_t worst = 0, wmax = 0;
    if (n->pagerank) {
        /* a step holds the part's CSR, the halo's contributions and four f64 vectors of it */
        for (int32_t d = n->plan.d_lo; d < n->plan.d_hi; d++) {
            const nblock *b = &n->plan.blk[d];
            size_t P = (size_t)(b->v1 - b->v0), H = (size_t)b->n_halo, mb = (size_t)(b->e1 - b->e0);
            size_t need = 2 * ((P + 1) * 8 + mb * 4 + H * 8 + P * 8 * 4);
            worst = need > worst ? need : worst;
        }
        if (max_work)
            *max_work = 4096;
        return worst;
    }
    for (int32_t d = n->plan.d_lo; d < n->plan.d_hi; d++) {
        const nblock *b = &n->plan.blk[d];
        size_t P = (size_t)(b->v1 - b->v0), H = (size_t)b->n_halo, mb = (size_t)(b->e1 - b->e0);
        for (int s = 0; s < n->n_stages; s++) {
            const stage *sg = &n->stages[s];
            const bool train = train_pass && s < train_below;
            size_t fi = (size_t)sg->in_cols * 4, fo = (size_t)sg->out_cols * 4, blocks = 0,
                   once = 0, work = 0;
            if (s == 0 && n->sparse) {
                /* the block's CSR, its dropped values, the products */
                size_t in = (P + 1) * 8 + (size_t)sparse_rows_nnz(n, b->v0, b->v1) * 8;
                blocks = (in + P * fo) * (train ? 2 : 1);
                work = (size_t)sparse_rows_nnz(n, b->v0, b->v1) * 4 + P * fo * 3;
            } else if (sg->kind == STAGE_VERTEX) {
                blocks = P * (fi + fo) * (train ? 2 : 1);
                work = P * (fi + fo) * 3;
            } else {
                /* a resident stage's halo is gathered into a block made when its step begins and
                 * dropped when it ends: the next step's prefetch never holds one beside it */
                const bool gathered = n->plan.resident && n->plan.resident[s];
                once = gathered ? H * fi : 0;
                blocks = (P + 1) * 8 + mb * 12 + (gathered ? 0 : H * fi) + P * fo +
                         (train ? H * 12 + mb * 8 + P * fo : 0) +
                         (n->o.saved == SAGA_SAVED_OFFLOAD ? P * fi : 0);
                work = P * (fi + fo) * 4 + H * fi * (train ? 2 : 0) +
                       net_message_bytes(sg, (int64_t)mb);
            }
            /* the stages' functions may hold more than estimated: net_replan's correction */
            work = (size_t)((double)work * n->work_scale);
            size_t need = 2 * blocks + once + work;
            worst = need > worst ? need : worst;
            wmax = work > wmax ? work : wmax;
        }
    }
    if (max_work)
        *max_work = wmax;
    return worst;
}

/* Everything resident at once: the in-memory footprint. */
static size_t memory_estimate(const saga_net *n, bool train) {
    if (n->pagerank) {
        size_t m = (size_t)saga_graph_n_edges(n->g_user);
        return (size_t)(n->n + 1) * 8 + m * 4 + (size_t)n->n * 8 * 7 + 4096;
    }
    size_t total = (size_t)(n->n + 1) * 16 + (size_t)n->m * 20 * (train ? 2 : 1);
    size_t act = n->sparse ? ((size_t)n->n + 1) * 8 + (size_t)n->x_nnz * 8
                           : (size_t)n->n * (size_t)n->in_cols * 4,
           widest = 0;
    for (int s = 0; s < n->n_stages; s++) {
        size_t w = (size_t)n->n * (size_t)n->stages[s].out_cols * 4;
        act += w * (train ? 3 : 1);
        widest = w > widest ? w : widest;
    }
    return total + (size_t)((double)(act + 4 * widest) * n->work_scale);
}

static saga_status build_blocks(saga_net *n, const saga_graph *g, int32_t k) {
    saga_status st = SAGA_OK;
    int32_t *pos = NULL;
    n->plan.k = k;
    n->plan.d_lo = 0;
    n->plan.d_hi = k;
    SAGA_TRY(place(n, g));
    SAGA_TRY(
        saga_alloc_zeroed((void **)&n->plan.blk, (size_t)k, sizeof *n->plan.blk, "net blocks"));
    if (n->dist)
        SAGA_TRY(net_dist_deal(n)); /* this rank's blocks are built, the others' left empty */
    SAGA_TRY(saga_alloc_array((void **)&pos, (size_t)n->n + 1, sizeof(int32_t), "halo marks"));
    for (int32_t v = 0; v < n->n; v++)
        pos[v] = -1;
    for (int32_t d = n->plan.d_lo; d < n->plan.d_hi; d++) {
        int32_t v0 = n->plan.part ? (int32_t)n->plan.part->offsets[d] : 0;
        int32_t v1 = n->plan.part ? (int32_t)n->plan.part->offsets[d + 1] : n->n;
        SAGA_TRY(net_block_build(n, &n->plan.blk[d], v0, v1, k == 1, pos));
    }
fail:
    saga_free(pos);
    return st;
}

static saga_status sparse_blocks(saga_net *n, nblock *b);

/* Per stage and block: the scheduler's blocks for activations, halos and gradients. */
/* Built once for inference and training alike (a net used only for inference keeps gradient
 * blocks it never touches: they hold no device memory until a plan uses them). */
static saga_status stage_blocks(saga_net *n) {
    saga_status st = SAGA_OK;
    int S = n->n_stages;
    int32_t k = n->plan.k;
    bool multi = k > 1;
    saga_blk ****tabs[] = {&n->act, &n->halo, &n->grad, &n->gin, &n->ghalo, &n->saved};
    for (size_t t = 0; t < sizeof tabs / sizeof tabs[0]; t++) {
        SAGA_TRY(saga_alloc_zeroed((void **)tabs[t], (size_t)S + 1, sizeof(saga_blk **),
                                   "net block table"));
        for (int s = 0; s <= S; s++)
            SAGA_TRY(saga_alloc_zeroed((void **)&(*tabs[t])[s], (size_t)k, sizeof(saga_blk *),
                                       "net block table"));
    }
    SAGA_TRY(saga_alloc_zeroed((void **)&n->act_host, (size_t)S + 1, sizeof(float *),
                               "net activations"));
    SAGA_TRY(
        saga_alloc_zeroed((void **)&n->grad_host, (size_t)S + 1, sizeof(float *), "net gradients"));
    SAGA_TRY(saga_alloc_zeroed((void **)&n->saved_host, (size_t)S + 1, sizeof(float *),
                               "net saved values"));
    n->act_host[0] = n->x;
    n->plan.transfer = multi ? n->o.transfer : SAGA_TRANSFER_F32;
    if (n->plan.transfer != SAGA_TRANSFER_F32 && !n->sparse) /* filled when the pass starts */
        SAGA_TRY(saga_backend_host_alloc(n->be, (void **)&n->x16,
                                         (size_t)n->n * (size_t)n->in_cols * 2 + 1));
    if (n->plan.resident) {
        SAGA_TRY(saga_alloc_zeroed((void **)&n->full, (size_t)S + 1, sizeof(saga_blk *),
                                   "resident inputs"));
        SAGA_TRY(saga_alloc_zeroed((void **)&n->gfull, (size_t)S + 1, sizeof(saga_blk *),
                                   "resident gradients"));
    }
    for (int s = 1; s <= S; s++) {
        SAGA_TRY(saga_backend_host_alloc(n->be, (void **)&n->act_host[s], host_rows_bytes(n, s)));
        if (multi)
            SAGA_TRY(
                saga_backend_host_alloc(n->be, (void **)&n->grad_host[s], host_rows_bytes(n, s)));
    }
    for (int s = 0; s < S; s++) {
        stage *sg = &n->stages[s];
        sg->in_cols = s == 0 ? n->in_cols : n->stages[s - 1].out_cols;
        if (n->o.saved == SAGA_SAVED_OFFLOAD && sg->kind == STAGE_PROGRAM &&
            saga_prog_fused(&sg->p))
            SAGA_TRY(
                saga_backend_host_alloc(n->be, (void **)&n->saved_host[s], host_rows_bytes(n, s)));
    }
    for (int s = 0; s <= S; s++) {
        int64_t cols = s == 0 ? n->in_cols : n->stages[s - 1].out_cols;
        bool program_in = s < S && n->stages[s].kind == STAGE_PROGRAM;
        bool whole = n->plan.resident && n->plan.resident[s];
        if (whole) {
            /* their host copies serve only an eviction's write-back and reload */
            size_t bytes = (size_t)n->n * (size_t)cols * 4;
            if (!(n->full[s] =
                      saga_sched_block(n->sched, bytes, SAGA_BLK_TEMP, "resident activations")) ||
                !(n->gfull[s] =
                      saga_sched_block(n->sched, bytes, SAGA_BLK_TEMP, "resident gradients")))
                goto oom;
            saga_blk_set_host(n->full[s], n->act_host[s]);
            saga_blk_set_host(n->gfull[s], n->grad_host[s]);
        }
        /* the input rows in 16 bits: copied from x16 */
        size_t esz = s == 0 && n->plan.transfer != SAGA_TRANSFER_F32 ? 2 : 4;
        void *rows_host = esz == 2 ? (void *)n->x16 : (void *)n->act_host[s];
        for (int32_t d = n->plan.d_lo; d < n->plan.d_hi; d++) {
            nblock *b = &n->plan.blk[d];
            size_t P = (size_t)(b->v1 - b->v0);
            if (s == 0 && n->sparse) {
                SAGA_TRY(sparse_blocks(n, b));
                continue;
            }
            saga_blk *a = saga_sched_block(n->sched, P * (size_t)cols * esz,
                                           s == 0 ? SAGA_BLK_INPUT : SAGA_BLK_TEMP,
                                           s == 0 ? "input rows" : "activations");
            if (!a)
                goto oom;
            saga_blk_set_host(a, (char *)rows_host + (size_t)b->v0 * (size_t)cols * esz);
            n->act[s][d] = a;
            if (program_in) {
                if (!multi) {
                    n->halo[s][d] = a;
                } else if (whole) {
                    /* gathered on the device from full[s] by the step that reads it */
                    if (!(n->halo[s][d] =
                              saga_sched_block(n->sched, (size_t)b->n_halo * (size_t)cols * 4,
                                               SAGA_BLK_TEMP, "halo rows")))
                        goto oom;
                    if (!b->b_hids) {
                        size_t hb = ((size_t)b->n_halo + 1) * sizeof(int32_t);
                        SAGA_TRY(saga_backend_host_alloc(n->be, (void **)&b->hids, hb));
                        memcpy(b->hids, b->halo, (size_t)b->n_halo * sizeof(int32_t));
                        if (!(b->b_hids = net_input_block(
                                  n, b->hids, (size_t)b->n_halo * sizeof(int32_t), "halo ids")))
                            goto oom;
                    }
                } else {
                    /* gathered from the host rows by the backend as they are loaded (a rank's
                     * rows from others pack on the host instead: net_dist_packs) */
                    saga_blk *h = saga_sched_block(n->sched, (size_t)b->n_halo * (size_t)cols * esz,
                                                   SAGA_BLK_INPUT, "halo rows");
                    if (!h)
                        goto oom;
                    n->halo[s][d] = h;
                    SAGA_TRY(saga_blk_set_rows(h,
                                               &(saga_host_rows){.base = rows_host,
                                                                 .row_bytes = (size_t)cols * esz,
                                                                 .rows = b->halo,
                                                                 .n = b->n_halo},
                                               false));
                }
                if (n->saved_host[s]) {
                    saga_blk *sv = saga_sched_block(n->sched, P * (size_t)cols * 4, SAGA_BLK_TEMP,
                                                    "saved values");
                    if (!sv)
                        goto oom;
                    saga_blk_set_host(sv, n->saved_host[s] + (int64_t)b->v0 * cols);
                    n->saved[s][d] = sv;
                }
            }
            if (s == 0)
                continue;
            if (whole)
                continue; /* its gradient is gfull[s], added up on the device */
            /* the gradient of act[s]: written block by block, or (a program stage reading act[s]
             * across parts) added up on the host from every block's halo gradient */
            bool summed = multi && program_in;
            saga_blk *gb = saga_sched_block(n->sched, P * (size_t)cols * 4,
                                            summed ? SAGA_BLK_INPUT : SAGA_BLK_TEMP, "gradients");
            if (!gb)
                goto oom;
            if (multi)
                saga_blk_set_host(gb, n->grad_host[s] + (int64_t)b->v0 * cols);
            n->grad[s][d] = gb;
            if (summed) {
                saga_blk *gh = saga_sched_block(n->sched, (size_t)b->n_halo * (size_t)cols * 4,
                                                SAGA_BLK_TEMP, "halo gradients");
                if (!gh)
                    goto oom;
                n->ghalo[s][d] = gh;
                SAGA_TRY(saga_blk_set_rows(gh,
                                           &(saga_host_rows){.base = n->grad_host[s],
                                                             .row_bytes = (size_t)cols * 4,
                                                             .rows = b->halo,
                                                             .n = b->n_halo},
                                           true));
            }
        }
    }
    for (int32_t d = n->plan.d_lo; d < n->plan.d_hi && n->plan.ids; d++) {
        nblock *b = &n->plan.blk[d];
        if (!(b->b_ids = net_input_block(n, n->plan.ids + b->v0,
                                         (size_t)(b->v1 - b->v0) * sizeof(int32_t), "vertex ids")))
            goto oom;
    }
    for (int s = 0; s < S; s++)
        if (n->stages[s].kind == STAGE_PROGRAM)
            for (int32_t d = n->plan.d_lo; d < n->plan.d_hi; d++)
                SAGA_TRY(net_block_blocks(n, &n->plan.blk[d], &n->stages[s]));
    return SAGA_OK;
oom:
    st = saga_error(SAGA_ERR_OUT_OF_MEMORY, "out of memory for the net's blocks");
fail:
    return st;
}

/* Block b's sparse input: the net's CSR when the block is the whole graph in its order, else a
 * copy of its rows (filled by net_sparse_fill); three scheduler blocks. */
static saga_status sparse_blocks(saga_net *n, nblock *b) {
    saga_status st = SAGA_OK;
    size_t P = (size_t)(b->v1 - b->v0);
    b->x_nnz = sparse_rows_nnz(n, b->v0, b->v1);
    size_t nz1 = (size_t)b->x_nnz + 1;
    if (!n->plan.ids) {
        b->xoff = n->xs_off + b->v0; /* v0 = 0: the offsets start at 0 */
        b->xidx = n->xs_idx;
        b->xval = n->xs_val;
    } else {
        SAGA_TRY(net_host_array(n, (void **)&b->xoff, P + 1, sizeof(int64_t), "sparse input rows"));
        b->x_own = true; /* the arrays below are freed with the sizes x_nnz gives them */
        SAGA_TRY(net_host_array(n, (void **)&b->xidx, nz1, sizeof(int32_t), "sparse input rows"));
        SAGA_TRY(net_host_array(n, (void **)&b->xval, nz1, sizeof(float), "sparse input rows"));
    }
    /* an empty CSR still gets a word, as the arrays do */
    size_t nb = (b->x_nnz ? (size_t)b->x_nnz : 1) * 4;
    if (!(b->b_xoff = net_input_block(n, b->xoff, (P + 1) * sizeof(int64_t), "input offsets")) ||
        !(b->b_xidx = net_input_block(n, b->xidx, nb, "input indices")) ||
        !(b->b_xval = net_input_block(n, b->xval, nb, "input values")))
        SAGA_CHECK(false, SAGA_ERR_OUT_OF_MEMORY, "out of memory for the sparse input's blocks");
fail:
    return st;
}

/* For a renumbered graph: each placed edge's index in the placed in-CSR of the graph as given
 * (the in-memory edge order), so that edge dropout masks do not depend on the parts. */
static saga_status edge_ids(saga_net *n) {
    saga_status st = SAGA_OK;
    int64_t *off = NULL, m = 0;
    int32_t *src = NULL;
    float *w = NULL;
    SAGA_TRY(saga_place_in_csr(n->g_user, n->o.self_loops == SAGA_DGRAPH_SELF_LOOPS_ADD, &off, &src,
                               &w, &m));
    SAGA_CHECK(m == n->m, SAGA_ERR_INTERNAL, "saga_net: %lld edges placed, %lld renumbered",
               (long long)m, (long long)n->m);
    SAGA_TRY(net_host_array(n, (void **)&n->eids, net_edge_bytes(m), 1, "edge ids"));
    for (int32_t v2 = 0; v2 < n->n; v2++) {
        int32_t v = n->plan.ids[v2];
        int64_t lo = off[v], hi = off[v + 1], run = 0;
        for (int64_t k = n->h_off[v2]; k < n->h_off[v2 + 1]; k++) {
            int32_t u = n->plan.ids[n->h_src[k]];
            /* parallel edges: the j-th copy here is the j-th copy there */
            run = k > n->h_off[v2] && n->h_src[k - 1] == n->h_src[k] ? run + 1 : 0;
            int64_t a = lo, b = hi;
            while (a < b) {
                int64_t mid = a + (b - a) / 2;
                if (src[mid] < u)
                    a = mid + 1;
                else
                    b = mid;
            }
            n->eids[k] = (int32_t)(a + run);
        }
    }
fail:
    saga_free(off);
    saga_free(src);
    saga_free(w);
    return st;
}

/* What a streamed training chain from stage p (chain_start) holds, estimated as two blocks
 * (net_rows_block_bytes, with their step's tensors): the last stage's over the R loss rows (m
 * in-edges, a halo of NH rows), and stage p's over those NH rows (tm in-edges, over every vertex),
 * with the stages between on them. */
static size_t chain_est(const saga_net *n, int p, int32_t R, int64_t m, int32_t NH, int64_t tm) {
    const int S = n->n_stages;
    /* each stage's tensors hold its rows' input and output (a vertex stage's function copies
     * its input, under dropout) with their gradients */
    int64_t cols = 0;
    for (int s = p; s < S - 1; s++)
        cols += n->stages[s].in_cols + n->stages[s].out_cols;
    return net_rows_block_bytes(R, m, NH, true, true, true, 0, n->stages[S - 1].in_cols,
                                n->stages[S - 1].in_cols + n->stages[S - 1].out_cols) +
           net_rows_block_bytes(NH, tm, n->n, false, true, true, 0, 0, cols);
}

/* The stage the plan lets a streamed training chain start at (net_chain.h): with loss rows and a
 * fused last program, the program stage before it when only vertex stages lie between them and
 * it is fused too; -1 when there is none. Where its input stays whole on the device
 * (plan_resident) and the chain's blocks fit beside it, the parts' steps are sized without
 * training the stages from it on (parts_train_below), and the chain starts there. */
static int chain_start(const saga_net *n) {
    const int S = n->n_stages;
    if (!n->loss_rows || S < 2 || n->stages[S - 1].kind != STAGE_PROGRAM ||
        !saga_prog_fused(&n->stages[S - 1].p))
        return -1;
    int p = S - 2;
    while (p >= 0 && n->stages[p].kind != STAGE_PROGRAM)
        p--;
    if (p < 0 || !saga_prog_fused(&n->stages[p].p))
        return -1;
    return p;
}

/* What a chain from stage p holds (chain_est) into *out, from the user's graph, so before it is
 * cut: the counts do not depend on the order. Kept in n->plan.chain_est_bytes. */
static saga_status chain_start_bytes(saga_net *n, int p, size_t *out) {
    saga_status st = SAGA_OK;
    int64_t *off = NULL, m_all = 0, m = 0, tm = 0;
    int32_t *src = NULL, *pos = NULL, NH = 0;
    float *w = NULL;
    const int32_t N = n->n;
    if (n->plan.chain_est_bytes) {
        *out = n->plan.chain_est_bytes;
        return SAGA_OK;
    }
    SAGA_TRY(saga_place_in_csr(n->g_user, n->o.self_loops == SAGA_DGRAPH_SELF_LOOPS_ADD, &off, &src,
                               &w, &m_all));
    SAGA_TRY(saga_alloc_array((void **)&pos, (size_t)N + 1, sizeof(int32_t), "loss rows"));
    net_rows_halo(off, src, N, n->loss_rows, n->n_loss_rows, true, pos, &m, &NH);
    for (int32_t v = 0; v < N; v++)
        if (pos[v] >= 0)
            tm += off[v + 1] - off[v];
    n->plan.chain_est_bytes = chain_est(n, p, n->n_loss_rows, m, NH, tm);
    *out = n->plan.chain_est_bytes;
fail:
    saga_free(off);
    saga_free(src);
    saga_free(w);
    saga_free(pos);
    return st;
}

/* Which program stages keep their input whole on the device when the net streams (struct
 * saga_net): those after the first whose input and its gradient, n x in_cols twice, take at
 * most half of what the budget leaves (avail), and at most limit for all of them together: three
 * quarters of avail while the parts are cut (they are then cut smaller: their halos cost no
 * copies), what the largest step leaves once they are. The chain's start (chain_start) comes
 * first and may take up to limit alone, when with the chain's blocks (chain_start_bytes) it
 * leaves the parts 1/NET_PARTS_SHARE of avail: training then runs the stages from it in one step
 * and needs no other stage resident. Returns the bytes they hold; the flags are in n->resident
 * (S + 1 entries). */
static saga_status plan_resident(saga_net *n, size_t avail, size_t limit, size_t *bytes) {
    saga_status st = SAGA_OK;
    int S = n->n_stages;
    size_t total = 0;
    *bytes = 0;
    saga_free(n->plan.resident);
    n->plan.resident = NULL;
    SAGA_TRY(saga_alloc_zeroed((void **)&n->plan.resident, (size_t)S + 1, sizeof(bool),
                               "resident stages"));
    const int p = chain_start(n);
    if (p > 0 && avail) {
        /* first, when it and the chain's blocks leave the parts their share */
        size_t b = 2 * (size_t)n->n * (size_t)n->stages[p - 1].out_cols * sizeof(float), t = 0;
        SAGA_TRY(chain_start_bytes(n, p, &t));
        if (b <= limit && b + t <= avail / NET_PARTS_SHARE * (NET_PARTS_SHARE - 1)) {
            n->plan.resident[p] = true;
            total = b;
        }
    }
    for (int s = 1; s < S && avail; s++) {
        if (n->stages[s].kind != STAGE_PROGRAM || n->plan.resident[s])
            continue;
        size_t b = 2 * (size_t)n->n * (size_t)n->stages[s - 1].out_cols * sizeof(float);
        if (b <= avail / 2 && total + b <= limit) {
            n->plan.resident[s] = true;
            total += b;
        }
    }
    *bytes = total;
fail:
    return st;
}

/* The first stage whose training the parts leave to the training chain (net_plan.parts_below):
 * chain_start's, when plan_resident keeps its input whole and the chain's blocks
 * (n->plan.chain_est_bytes) fit beside the resident stages (res); else the stage count. */
static int parts_train_below(const saga_net *n, size_t avail, size_t res) {
    const int p = chain_start(n);
    return p > 0 && n->plan.k > 1 && n->plan.resident && n->plan.resident[p] &&
                   n->plan.chain_est_bytes + res <= avail
               ? p
               : n->n_stages;
}

/* What net_prepare's passes share. */
typedef struct prep {
    bool train;
    saga_backend_stats bs;
    size_t budget, avail, held; /* the device budget, what the backend leaves of it */
    int R;                      /* ranks */
    bool stream;
    int32_t k, max_k;
    size_t res;            /* what the resident stages hold */
    int32_t k_less;        /* of the k search's tries that did not fit: the most parts among */
    size_t need_less;      /* those up to NET_MANY_PARTS, else the fewest, and their step */
    size_t need, max_work; /* the largest step, and the most of its own tensors */
    size_t cap;            /* what the scheduler's blocks may hold */
    ksearch ks;
    saga_graph *g; /* the graph in the parts' order */
} prep;

/* The budget the plan works with (with ranks, the smallest among them) and the checks of what
 * the net was given. */
static saga_status prep_budget(saga_net *n, prep *p) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(n->pagerank || (n->n_stages > 0 && (n->x || n->sparse)), SAGA_ERR_INVALID_ARG,
               "saga_net: needs stages and input rows (saga_net_set_input) before running");
    SAGA_CHECK(!n->sparse || n->stages[0].kind == STAGE_VERTEX, SAGA_ERR_UNSUPPORTED,
               "saga_net: sparse input needs a vertex stage first (a program gathers dense rows)");
    SAGA_CHECK(!n->sparse || !n->stages[0].dense_rows, SAGA_ERR_UNSUPPORTED,
               "saga_net: sparse input rows, but the first stage needs dense rows "
               "(saga_net_set_dense_rows)");

    saga_backend_get_stats(n->be, &p->bs);
    p->budget = p->bs.budget_bytes;
    /* what the backend keeps for its own work (its scratch; held already, or still to come) is
     * not the network's to plan with */
    p->held = p->bs.in_use_bytes + (p->bs.reserved_bytes > p->bs.work_reserve_bytes
                                        ? p->bs.reserved_bytes
                                        : p->bs.work_reserve_bytes);
    p->avail = p->budget > p->held ? p->budget - p->held : 0;
    for (int s = 0; s < n->n_stages; s++)
        n->stages[s].in_cols = s == 0 ? n->in_cols : n->stages[s - 1].out_cols;
    SAGA_CHECK(n->o.transfer == SAGA_TRANSFER_F32 || n->be->kernels->half_to_f32 != NULL,
               SAGA_ERR_UNSUPPORTED, "saga_net: backend %s cannot widen 16-bit input rows",
               n->be->name);
    SAGA_CHECK(n->o.transfer == SAGA_TRANSFER_F32 || saga_comm_size(n->o.comm) == 1,
               SAGA_ERR_UNSUPPORTED,
               "saga_net: input transfers in 16 bits are for one rank; several exchange f32 rows");
    const bool by_degree = n->o.order == SAGA_ORDER_DEGREE || n->o.order == SAGA_ORDER_OUT_DEGREE;
    SAGA_CHECK(!by_degree || n->pagerank, SAGA_ERR_UNSUPPORTED,
               "saga_net: the degree order is PageRank's; a net with stages keeps the graph's "
               "order");
    n->plan.k = 1;
    /* several ranks: every decision below (parts, streaming) must come out the same on all of
     * them, so they plan with the smallest budget among them (none counts as the largest) and
     * the largest step; each rank's scheduler then keeps within its own */
    p->R = saga_comm_size(n->o.comm);
    if (p->R > 1) {
        SAGA_CHECK(p->R <= n->n, SAGA_ERR_INVALID_ARG, "saga_net: %d ranks for %d vertices", p->R,
                   (int)n->n);
        int64_t lim[2] = {p->budget ? (int64_t)(p->avail < INT64_MAX ? p->avail : INT64_MAX)
                                    : INT64_MAX,
                          p->budget ? 1 : 0};
        SAGA_TRY(saga_comm_allreduce(n->o.comm, &lim[0], 1, SAGA_I64, SAGA_COMM_MIN, NULL));
        SAGA_TRY(saga_comm_allreduce(n->o.comm, &lim[1], 1, SAGA_I64, SAGA_COMM_MAX, NULL));
        p->budget = lim[1] ? (p->budget ? p->budget : (size_t)lim[0]) : 0;
        p->avail = (size_t)lim[0];
    }
fail:
    return st;
}

/* Pass 2, the parts (with the placement of resident stages inside, which the step depends on):
 * in memory, or the k search under the budget, each try partitioned and its blocks built. */
static saga_status prep_parts(saga_net *n, prep *p) {
    saga_status st = SAGA_OK;
    p->stream = n->o.exec == SAGA_EXEC_STREAM;
    if (n->o.exec == SAGA_EXEC_AUTO && p->budget) {
        /* a rough first look; the exact footprint is known once placed */
        p->stream = memory_estimate(n, true) / (size_t)p->R > p->avail;
    }
    p->k = p->R;
    /* parts of fewer than 8 vertices would not save memory worth their halos, and METIS is not
     * made for them (it prints warnings and may leave parts empty) */
    p->max_k = n->n / 8 > 2 ? n->n / 8 : 2;
    p->max_k = p->max_k > p->R ? p->max_k : p->R;
    if (p->stream) {
        p->k = n->o.parts;
        if (p->k == 0) {
            size_t est = memory_estimate(n, p->train);
            size_t target = p->avail / 2 ? p->avail / 2 : 1;
            p->k = 2 * p->R;
            while ((size_t)p->k * target < est && p->k < p->max_k)
                p->k *= 2;
            p->k = p->k < p->max_k ? p->k : p->max_k;
        }
        if (p->k > n->n)
            p->k = n->n > 0 ? n->n : 1;
    } else if (p->R > 1 && n->o.parts > p->R) {
        p->k = n->o.parts <= n->n ? n->o.parts : n->n;
    }
    SAGA_CHECK(p->k >= p->R, SAGA_ERR_INVALID_ARG,
               "saga_net: %d parts for %d ranks (at least one each)", (int)p->k, p->R);
    p->res = 0;
    /* the passes that did not fit: the most parts among those up to NET_MANY_PARTS, else the
     * fewest, and what the largest step needed there (for the warning after the loop) */
    p->k_less = 0;
    p->need_less = 0;
    n->plan.many_parts = false;
    p->ks.phase =
        !n->o.parts && p->budget && n->o.partition == SAGA_PARTITION_METIS ? KS_PROBE : KS_GROW;
    for (;;) {
        bool probing = p->ks.phase == KS_PROBE;
        /* streamed on one rank, the narrow inputs of later program stages may stay on the
         * device whole: what they hold is not the parts' to plan with */
        p->res = 0;
        if (p->R == 1 && !n->pagerank && p->budget && p->k > 1 && !n->o.host_halos)
            SAGA_TRY(plan_resident(n, p->avail, p->avail / 4 * 3, &p->res));
        if (p->k > NET_MANY_PARTS && !n->o.parts && p->budget && !n->plan.many_parts && !probing) {
            /* the user must not wait minutes without a word: METIS on thousands of parts takes
             * a while, and so does every pass over that many small steps */
            n->plan.many_parts = true;
            saga_log(SAGA_LOG_WARN,
                     "the device budget of %zu bytes (%zu after the backend's own) needs more than "
                     "%d parts (trying %d): partitioning and streaming that many is slow "
                     "(progress is logged)",
                     p->budget, p->avail, NET_MANY_PARTS, (int)p->k);
        }
        if (p->k > 1) {
            double t_part = saga_now();
            saga_partition_opts po = saga_partition_opts_defaults();
            po.method = probing ? SAGA_PARTITION_CONTIGUOUS : n->o.partition;
            po.seed = n->o.partition_seed;
            po.balance_edges = true; /* a block's size follows its in-edges */
            po.refine_iters = NET_METIS_REFINE;
            if (p->ks.kept && p->ks.kept->n_parts == p->k) {
                n->plan.part = p->ks.kept; /* METIS's parts, from an earlier try */
                p->ks.kept = NULL;
                saga_log(SAGA_LOG_INFO, "back to the %d parts (%s) of an earlier try", (int)p->k,
                         saga_partition_method_name(po.method));
            } else {
                SAGA_TRY(saga_partition_graph(&n->plan.part, n->g_user, p->k, &po));
                saga_log(n->plan.many_parts && !probing ? SAGA_LOG_WARN : SAGA_LOG_INFO,
                         "%s %d vertices into %d parts (%s) in %.1f s",
                         probing ? "probed" : "partitioned", (int)n->n, (int)p->k,
                         saga_partition_method_name(po.method), saga_now() - t_part);
            }
            if (p->R > 1)
                SAGA_TRY(net_dist_agree_partition(n));
            /* the permutation, which the scheduler can load the ids from: the parts', and for
             * PageRank each part's rows in degree order among themselves */
            SAGA_TRY(net_host_array(n, (void **)&n->plan.ids, (size_t)n->n, sizeof(int32_t),
                                    "vertex ids"));
            memcpy(n->plan.ids, n->plan.part->perm, (size_t)n->n * sizeof(int32_t));
            if (n->pagerank && n->o.order != SAGA_ORDER_GRAPH) {
                const int64_t *at = n->plan.part->offsets;
                for (int32_t q = 0; q < n->plan.part->n_parts; q++)
                    SAGA_TRY(net_degree_order(n->g_user, n->o.order != SAGA_ORDER_OUT_DEGREE,
                                              n->plan.ids + at[q], (int32_t)(at[q + 1] - at[q]),
                                              n->plan.ids + at[q]));
            }
            SAGA_TRY(saga_graph_permute(&p->g, n->g_user, n->plan.ids));
        } else if (p->R == 1 &&
                   (n->o.order == SAGA_ORDER_DEGREE || n->o.order == SAGA_ORDER_OUT_DEGREE ||
                    (n->o.order == SAGA_ORDER_AUTO && n->pagerank))) {
            /* over shards the own rows among themselves, the halo's after them as they are */
            SAGA_TRY(net_host_array(n, (void **)&n->plan.ids, (size_t)n->n, sizeof(int32_t),
                                    "vertex ids"));
            const int32_t sorted = n->hx ? n->hx->n_own : n->n;
            SAGA_TRY(net_degree_order(n->g_user, n->o.order != SAGA_ORDER_OUT_DEGREE, NULL, sorted,
                                      n->plan.ids));
            for (int32_t v = sorted; v < n->n; v++)
                n->plan.ids[v] = v;
            if (n->hx)
                SAGA_TRY(net_halo_reorder(n, n->plan.ids));
        }
        if (p->R > 1)
            SAGA_TRY(net_dist_new(n));
        SAGA_TRY(build_blocks(n, p->g ? p->g : n->g_user, p->k));
        p->need = step_estimate(n, true, parts_train_below(n, p->avail, p->res), NULL);
        if (p->R > 1) {
            int64_t nd = (int64_t)p->need;
            SAGA_TRY(saga_comm_allreduce(n->o.comm, &nd, 1, SAGA_I64, SAGA_COMM_MAX, NULL));
            p->need = (size_t)nd;
        }
        bool fits = p->need + p->res <= p->avail, last = fits || p->k >= p->max_k || p->k >= n->n;
        int32_t next = p->k > 1 ? ksearch_next(&p->ks, n, p->k, fits, last) : -1;
        if (next == 0)
            break;
        if (next > 0) {
            unprepare(n);
            saga_graph_free(&p->g);
            p->k = next;
            continue;
        }
        if (!p->budget || last || (n->o.parts && p->stream))
            break;
        if (!p->stream) {
            /* the whole graph does not fit after all */
            p->stream = true;
        }
        if (!probing && (p->k_less == 0 || p->k <= NET_MANY_PARTS))
            p->k_less = p->k, p->need_less = p->need + p->res;
        unprepare(n);
        saga_graph_free(&p->g);
        /* a step shrinks about as 1/k: jump by the power of two the overshoot asks for, so that
         * few partitions are computed */
        int32_t grow = 2;
        while ((size_t)grow * p->avail < p->need && grow < (1 << 20))
            grow *= 2;
        p->k = p->k == 1 ? grow : p->k * grow;
        p->k = p->k > p->max_k ? p->max_k : p->k;
    }
    if (n->plan.many_parts && p->k > NET_MANY_PARTS && p->k_less > 0)
        saga_log(SAGA_LOG_WARN,
                 "the device budget of %zu bytes needs %d parts; a budget of %zu bytes or more "
                 "would need %d (with %d parts the largest step needs %zu bytes)",
                 p->budget, (int)p->k, p->need_less + (p->budget - p->avail), (int)p->k_less,
                 (int)p->k_less, p->need_less);
fail:
    return st;
}

/* Whether the largest step fits, with what stays resident beside it (the resident stages kept
 * to what it leaves when it does not), and with ranks the halos they exchange. */
static saga_status prep_fit(saga_net *n, prep *p) {
    saga_status st = SAGA_OK;
    p->max_work = 0;
    n->plan.parts_below = parts_train_below(n, p->avail, p->res);
    p->need = step_estimate(n, true, n->plan.parts_below, &p->max_work);
    if (p->res && p->need + p->res > p->avail) {
        /* the parts are cut (as small as they get, or as many as asked) and the resident
         * stages do not fit beside the largest step: keep only those that fit in what it
         * leaves (none, at the budget the message below names), so that a budget that holds
         * the step runs; without the chain's start the parts train every stage */
        SAGA_TRY(plan_resident(n, p->avail, p->need < p->avail ? p->avail - p->need : 0, &p->res));
        if (parts_train_below(n, p->avail, p->res) != n->plan.parts_below)
            n->plan.parts_below = n->n_stages;
        p->need =
            step_estimate(n, true, n->plan.parts_below, &p->max_work); /* halos gathered or not */
    }
    if (p->R > 1) {
        /* this rank's own budget, for its message and its scheduler */
        p->avail = p->bs.budget_bytes > p->held ? p->bs.budget_bytes - p->held : 0;
        p->budget = p->bs.budget_bytes;
    }
    saga_status fits = SAGA_OK;
    p->need += p->res;
    if (p->budget && p->need > p->avail) {
        char msg[160];
        snprintf(msg, sizeof msg, "%d parts", (int)p->k);
        fits = saga_error(
            SAGA_ERR_BUDGET,
            "saga_net: the device budget leaves %zu bytes; the largest block needs %zu with %s "
            "(budget at least %zu bytes)",
            p->avail, p->need, msg, p->need + (p->budget - p->avail));
    }
    if (p->R > 1)
        fits = saga_comm_agree(n->o.comm, fits); /* the others must not wait for this rank */
    SAGA_TRY(fits);
    if (p->R > 1)
        SAGA_TRY(net_dist_halo(n));
fail:
    return st;
}

/* The scheduler and every block the steps load: the input in the parts' order, the stages'
 * blocks, the loss rows' side of a streamed net, the sparse input's copies. */
static saga_status prep_blocks(saga_net *n, prep *p) {
    saga_status st = SAGA_OK;
    n->plan.streamed = n->plan.d_hi - n->plan.d_lo > 1;
    /* the blocks may hold what a step's own tensors (estimated, with a margin) leave */
    p->cap = 0;
    if (p->budget && n->plan.streamed) {
        size_t reserve = p->max_work; /* need <= avail leaves twice the largest step's blocks */
        p->cap = p->avail > reserve ? p->avail - reserve : p->avail / 2;
    }
    SAGA_TRY(saga_sched_new(&n->sched, n->be, p->cap, trim_ctx, n->c));
    if (n->o.trace)
        saga_sched_set_trace(n->sched, n->o.trace);
    saga_ctx_set_pressure(n->c, give_back, n);
    if (n->plan.ids && n->x) {
        /* the input was copied in the graph's order: put it in the parts' order */
        float *tmp = NULL;
        size_t bytes = (size_t)n->n * (size_t)n->in_cols * sizeof(float);
        if (!n->x_room)
            SAGA_TRY(saga_alloc_array((void **)&n->x_room, 2 * (size_t)n->in_cols, sizeof(float),
                                      "input rows"));
        SAGA_TRY(saga_alloc_array((void **)&tmp, bytes / 4 + 1, sizeof(float), "input rows"));
        memcpy(tmp, n->x, bytes);
        for (int32_t v = 0; v < n->n; v++)
            memcpy(n->x + (int64_t)v * n->in_cols, tmp + (int64_t)n->plan.ids[v] * n->in_cols,
                   (size_t)n->in_cols * sizeof(float));
        saga_free(tmp);
        n->x_placed = true;
    }
    bool batched = false;
    for (int s = 0; s < n->n_stages; s++)
        batched =
            batched || (n->stages[s].kind == STAGE_PROGRAM && !saga_prog_fused(&n->stages[s].p));
    if (n->plan.ids && batched)
        SAGA_TRY(edge_ids(n));
    if (!n->pagerank)
        SAGA_TRY(stage_blocks(n));
    /* the chains (net_chain.c) run the rows a pass needs: in memory in what the budget leaves
     * beside the whole step; streamed after the parts' steps, with their tensors, in what the
     * resident stages leave */
    n->plan.step_room = p->budget && n->plan.streamed ? p->avail : 0;
    n->plan.chain_room = !p->budget          ? SIZE_MAX
                         : !n->plan.streamed ? (p->avail > p->need ? p->avail - p->need : 0)
                         : p->avail > p->res ? p->avail - p->res
                                             : 0;
    if (n->sparse)
        net_sparse_fill(n);
    if (n->dist && !n->pagerank)
        SAGA_TRY(net_dist_packs(n));
    if (!n->plan.ids) {
        SAGA_TRY(
            saga_alloc_array((void **)&n->iota, (size_t)n->n + 1, sizeof(int32_t), "vertex ids"));
        for (int32_t v = 0; v < n->n; v++)
            n->iota[v] = v;
    }
fail:
    return st;
}

/* The description, the statistics of the placement and the host-to-device floors. */
static void prep_stats(saga_net *n, prep *p) {
    char mode[64];
    if (n->plan.streamed)
        snprintf(mode, sizeof mode, "streamed, %d parts (%s)", (int)(n->plan.d_hi - n->plan.d_lo),
                 saga_partition_method_name(n->o.partition));
    else
        snprintf(mode, sizeof mode, "in memory");
    if (p->R > 1)
        snprintf(n->desc, sizeof n->desc, "%d ranks, %d parts (%s); rank %d: parts %d-%d, %s", p->R,
                 (int)p->k, saga_partition_method_name(n->o.partition), n->dist->rank,
                 (int)n->plan.d_lo, (int)n->plan.d_hi - 1, mode);
    else
        snprintf(n->desc, sizeof n->desc, "%s", mode);
    n->stats.parts = p->k;
    n->stats.streamed = n->plan.streamed;
    n->stats.edge_cut = n->plan.part ? n->plan.part->edge_cut : 0;
    n->stats.partition_seconds = n->plan.part ? n->plan.part->seconds : 0;
    int64_t halo = 0;
    for (int32_t d = n->plan.d_lo; d < n->plan.d_hi; d++)
        halo += n->plan.blk[d].n_halo;
    n->stats.halo_rows = halo;
    n->stats.resident_bytes = p->res;
    n->stats.sparse_input = n->sparse;
    n->stats.input_packed = n->packed;
    n->stats.input_bytes = 0;
    for (int32_t d = n->plan.d_lo; d < n->plan.d_hi && !n->pagerank; d++)
        n->stats.input_bytes += net_block_input_bytes(n, &n->plan.blk[d], n->act[0][d]);
    /* the input's blocks as they cross (dense in the transfer precision, or sparse) */
    n->plan.floor_pass_bytes = n->pagerank ? 0 : net_parts_floor(n, n->n_stages);
    n->plan.floor_train_bytes = 2 * n->plan.floor_pass_bytes;
    n->stats.ranks = p->R;
    saga_log(SAGA_LOG_INFO,
             "net: %s, %lld halo rows per program stage, estimated step %zu bytes of %zu", n->desc,
             (long long)halo, p->need, p->avail);
}

saga_status net_prepare(saga_net *n, bool train) {
    saga_status st = SAGA_OK;
    prep p = {.train = train, .ks = {.phase = KS_GROW}};
    n->stats.prepare_seconds = 0;
    if (n->ready)
        return SAGA_OK;
    double t_prep = saga_now();
    SAGA_TRY(prep_budget(n, &p));
    SAGA_TRY(prep_parts(n, &p));
    SAGA_TRY(prep_fit(n, &p));
    SAGA_CHECK(!n->hx || n->plan.k == 1, SAGA_ERR_UNSUPPORTED,
               "saga_net: over shards a rank runs its local graph in memory; it needs %d parts "
               "under its device budget (%s), which shards do not stream yet: give each rank more "
               "device memory or more ranks",
               (int)n->plan.k, n->pagerank ? "PageRank" : "its net");
    SAGA_CHECK(!n->hx || !n->sparse || n->stages[0].kind != STAGE_PROGRAM, SAGA_ERR_UNSUPPORTED,
               "saga_net: over shards a first program stage reads its input's halo rows from "
               "their owners, which needs dense input rows");
    SAGA_TRY(prep_blocks(n, &p));
    n->ready = true;
    prep_stats(n, &p);
    saga_graph_free(&p.g);
    saga_partition_free(&p.ks.kept);
    n->stats.prepare_seconds = saga_now() - t_prep;
    if (n->hx) {
        n->stats.ranks = n->hx->size;
        /* every rank goes on, or none: the next call exchanges */
        st = saga_comm_agree(n->hx->comm, SAGA_OK);
        if (st < 0) {
            unprepare(n);
            return st;
        }
    }
    return SAGA_OK;
fail:
    saga_graph_free(&p.g);
    saga_partition_free(&p.ks.kept);
    unprepare(n);
    if (n->hx)
        st = saga_comm_agree(n->hx->comm, st);
    return net_dist_failed(n, st);
}
