/* net_sample.c - a net's stages over a sample (saga_net_train_sample, saga_net_forward_sample):
 * mini-batch training and sampled inference on the blocks of saga_sample.h.
 *
 * The rows of a sample are a prefix at every depth: the input rows are the sample's ids, a
 * program stage over block l reads its n_src rows and writes its n_dst rows, which are the first
 * n_dst of them, and a vertex stage keeps the rows it is given. So each stage runs once, over
 * exactly the rows the seeds depend on, on one tape: the forward pass, the loss over the seeds,
 * and the backward walk of that tape. Each block is placed on the device for the step
 * (saga_dgraph_new_block) with the degrees the sampler chose for SYMNORM, and freed after it. */
#include "net_impl.h"

#include "nn_impl.h"
#include "program_impl.h"

#include <math.h>
#include <string.h>

/* The context's error, or an internal one when an op gave NULL without one. */
static saga_status ctx_error(saga_ctx *c) {
    return saga_ctx_status(c) < 0 ? saga_ctx_status(c) : SAGA_ERR_INTERNAL;
}

/* The host row of the net's input holding graph vertex v: the input is kept in the net's own
 * row order once a pass has placed it (saga_net.plan.ids). */
static saga_status input_pos(saga_net *n, const int32_t **pos) {
    saga_status st = SAGA_OK;
    *pos = NULL;
    if (!n->plan.ids || n->sparse) /* a CSR input stays in the graph's order */
        return SAGA_OK;
    if (!n->sample_pos) {
        SAGA_TRY(saga_alloc_array((void **)&n->sample_pos, (size_t)n->n + 1, sizeof *n->sample_pos,
                                  "input rows of vertices"));
        for (int32_t r = 0; r < n->n; r++)
            n->sample_pos[n->plan.ids[r]] = r;
    }
    *pos = n->sample_pos;
fail:
    return st;
}

/* Slot k of the sample's input rows on the device (see saga_net), at least bytes: kept from
 * sample to sample, grown by a quarter more than asked. The old block's free is ordered after
 * the work queued on it (saga_backend_free); the copy stream is ordered after that free by the
 * backend where it gives the block out again. */
static saga_status slot_room(saga_net *n, int k, size_t bytes) {
    saga_status st = SAGA_OK;
    if (bytes <= n->smp_in_bytes[k])
        return SAGA_OK;
    saga_backend_free(n->be, n->smp_in[k], n->smp_in_bytes[k]);
    n->smp_in[k] = NULL;
    n->smp_in_bytes[k] = 0;
    const size_t want = bytes + bytes / 4;
    SAGA_TRY(saga_backend_alloc_block(n->be, &n->smp_in[k], want));
    n->smp_in_bytes[k] = want;
fail:
    return st;
}

void net_sample_release(saga_net *n) {
    for (int k = 0; k < 2; k++) {
        saga_backend_free(n->be, n->smp_in[k], n->smp_in_bytes[k]);
        n->smp_in[k] = NULL;
        n->smp_in_bytes[k] = 0;
    }
}

void net_sample_free(saga_net *n) {
    if (n->smp_copy)
        (void)saga_stream_synchronize(n->smp_copy);
    (void)saga_stream_synchronize(saga_backend_default_stream(n->be));
    net_sample_release(n);
    saga_stream_free(&n->smp_copy);
    for (int k = 0; k < 2; k++) {
        saga_event_free(&n->smp_ready[k]);
        saga_event_free(&n->smp_done[k]);
    }
    for (int q = 0; q < SAGA_NET_SAMPLES_QUEUED; q++)
        saga_event_free(&n->smp_loss_ev[q]);
    saga_backend_host_free(n->be, n->smp_loss_host, SAGA_NET_SAMPLES_QUEUED * sizeof(float));
    n->smp_loss_host = NULL;
}

/* Where a sample's input rows come from: the net's input by row (one process), or the rows the
 * sample carries (over shards, fetched from their owners: dense or a CSR). */
typedef struct input_src {
    const float *x; /* dense rows of F columns, by row r */
    const int64_t *off;
    const int32_t *idx;
    const float *val;
    const int32_t *ids; /* sample row i reads row ids[i] (mapped by pos when given), or NULL: i */
    const int32_t *pos;
} input_src;

/* The row of src that sample row i reads. */
static inline int64_t src_row(const input_src *src, int32_t i) {
    return !src->ids ? i : src->pos ? src->pos[src->ids[i]] : src->ids[i];
}

/* The non-zeros of the row of src that sample row i reads, F columns. */
static inline int64_t src_nnz(const input_src *src, int32_t i, int64_t F) {
    const int64_t r = src_row(src, i);
    if (!src->x)
        return src->off[r + 1] - src->off[r];
    int64_t m = 0; /* a dense row's */
    for (int64_t j = 0; j < F; j++)
        m += src->x[r * F + j] != 0.0f;
    return m;
}

/* b rounded up to 256: where the input CSR's indices and values start in its slot. */
static size_t align256(size_t b) {
    return (b + 255) / 256 * 256;
}

/* The sample's input rows on the device, in the layout the net takes (converted where the
 * source holds the other): dense rows (*x) or a CSR (*xs, its tensors set). They are gathered
 * into the context's staging and copied from there into slot k, on the net's copy stream where
 * it has one (the compute's stream waits for the copy, the copy for the pass before that read
 * the slot), else on the compute's; on the CPU, gathered into slot k itself. */
static saga_status sample_input(saga_net *n, const saga_sample *smp, int k, saga_tensor **x,
                                saga_sparse *xs) {
    saga_status st = SAGA_OK;
    saga_ctx *c = n->c;
    const int32_t R = smp->n_ids;
    const int64_t F = n->in_cols;
    const int32_t *pos = NULL;
    input_src src = {0};
    if (smp->local) { /* the rows the sample carries */
        src = (input_src){
            .x = smp->x, .off = smp->x_offsets, .idx = smp->x_indices, .val = smp->x_values};
    } else {
        SAGA_TRY(input_pos(n, &pos));
        src = (input_src){.x = n->sparse ? NULL : n->x,
                          .off = n->xs_off,
                          .idx = n->xs_idx,
                          .val = n->xs_val,
                          .ids = smp->ids,
                          .pos = pos};
    }
    int64_t nnz = 0;
    size_t idx_at = 0, val_at = 0, bytes = (size_t)R * (size_t)F * sizeof(float);
    /* the rows are gathered on the kernels' threads where there are many (random reads of whole
     * rows: the memory's latency, not its bandwidth, bounds one thread) */
    const bool par = (int64_t)R * F >= ((int64_t)1 << 16);
    if (n->sparse) {
#pragma omp parallel for schedule(static) reduction(+ : nnz) if (par)
        for (int32_t i = 0; i < R; i++)
            nnz += src_nnz(&src, i, F);
        idx_at = align256(((size_t)R + 1) * sizeof(int64_t));
        val_at = align256(idx_at + (size_t)nnz * sizeof(int32_t));
        bytes = val_at + (size_t)nnz * sizeof(float);
    }
    /* where the device's memory is the host's (the CPU), the rows go straight into the slot: the
     * passes before have run (its default stream is synchronous) */
    const bool direct = saga_backend_get_kind(n->be) == SAGA_BACKEND_CPU;
    void *h = NULL;
    SAGA_TRY(slot_room(n, k, bytes));
    n->smp_input_bytes = bytes;
    if (direct)
        h = n->smp_in[k];
    else
        SAGA_TRY(saga_ctx_stage(c, bytes, &h));
    if (!n->sparse) {
        float *rows = h;
#pragma omp parallel for schedule(static) if (par)
        for (int32_t i = 0; i < R; i++) {
            const int64_t r = src_row(&src, i);
            float *to = rows + (int64_t)i * F;
            if (src.x) {
                memcpy(to, src.x + r * F, (size_t)F * sizeof(float));
            } else { /* a CSR row spread out */
                memset(to, 0, (size_t)F * sizeof(float));
                for (int64_t e = src.off[r]; e < src.off[r + 1]; e++)
                    to[src.idx[e]] = src.val[e];
            }
        }
    } else {
        int64_t *off = h;
        int32_t *idx = (int32_t *)((char *)h + idx_at);
        float *val = (float *)((char *)h + val_at);
        off[0] = 0;
        for (int32_t i = 0; i < R; i++) /* the offsets first, then the rows in parallel */
            off[i + 1] = off[i] + src_nnz(&src, i, F);
#pragma omp parallel for schedule(static) if (par)
        for (int32_t i = 0; i < R; i++) {
            const int64_t r = src_row(&src, i);
            int64_t e = off[i];
            if (src.x) {
                for (int64_t j = 0; j < F; j++)
                    if (src.x[r * F + j] != 0.0f)
                        idx[e] = (int32_t)j, val[e++] = src.x[r * F + j];
            } else {
                const int64_t a = src.off[r], m = src.off[r + 1] - a;
                memcpy(idx + e, src.idx + a, (size_t)m * sizeof *idx);
                memcpy(val + e, src.val + a, (size_t)m * sizeof *val);
            }
        }
    }
    saga_stream *s = saga_ctx_stream(c), *cs = n->smp_copy ? n->smp_copy : s;
    if (!direct && n->smp_copy && n->smp_done_rec[k])
        SAGA_TRY(saga_stream_wait_event(cs, n->smp_done[k]));
    if (!direct && bytes)
        SAGA_TRY(saga_memcpy_h2d_async(cs, n->smp_in[k], h, bytes));
    if (!direct && n->smp_copy) { /* before anything else is staged (saga_ctx_stage) */
        if (!n->smp_ready[k])
            SAGA_TRY(saga_event_new(&n->smp_ready[k], n->be));
        SAGA_TRY(saga_event_record(n->smp_ready[k], cs));
        SAGA_TRY(saga_stream_wait_event(s, n->smp_ready[k]));
    }
    char *d = n->smp_in[k];
    if (!n->sparse) {
        *x = saga_ctx_wrap(c, SAGA_F32, R, F, d);
        SAGA_CHECK(*x, ctx_error(c), "saga_net: the sample's input rows: %s", saga_last_error());
        return SAGA_OK;
    }
    xs->rows = R;
    xs->cols = F;
    xs->nnz = nnz;
    xs->offsets = saga_ctx_wrap(c, SAGA_I64, R + 1, 1, d);
    xs->indices = saga_ctx_wrap(c, SAGA_I32, nnz, 1, d + idx_at);
    xs->values = saga_ctx_wrap(c, SAGA_F32, nnz, 1, d + val_at);
    SAGA_CHECK(xs->offsets && xs->indices && xs->values, ctx_error(c),
               "saga_net: the sample's input rows: %s", saga_last_error());
fail:
    return st;
}

static saga_status sample_check(const saga_net *n, const saga_sample *smp, bool train,
                                const char *who) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(n && smp, SAGA_ERR_INVALID_ARG, "%s: net and sample must be given", who);
    SAGA_CHECK(smp->n_layers >= 1 && smp->n_layers <= 64 && smp->blocks && smp->ids,
               SAGA_ERR_INVALID_ARG, "%s: a sample of %d layers (expected 1..64)", who,
               (int)smp->n_layers);
    SAGA_CHECK(!n->dist, SAGA_ERR_UNSUPPORTED,
               "%s: a net over ranks trains on samples over shards (saga_net_halo, "
               "saga_sampler_new_shard)",
               who);
    SAGA_CHECK(!n->hx == !smp->local, SAGA_ERR_INVALID_ARG,
               n->hx ? "%s: a net over shards takes samples over shards (saga_sampler_new_shard)"
                     : "%s: a sample over shards needs a net over shards (saga_net_opts.halo)",
               who);
    SAGA_CHECK(!train || !n->hx || n->model, SAGA_ERR_INVALID_ARG,
               "%s: over several ranks the model's gradients are summed over them: give the net "
               "its model (saga_net_set_model)",
               who);
    SAGA_CHECK(n->n_stages > 0 && (n->x || n->sparse), SAGA_ERR_INVALID_ARG,
               "%s: the net needs stages and input rows (saga_net_set_input) first", who);
    SAGA_CHECK(!train || n->loss, SAGA_ERR_INVALID_ARG, "%s: no loss function (saga_net_set_loss)",
               who);
    SAGA_CHECK(!n->sparse || n->stages[0].kind == STAGE_VERTEX, SAGA_ERR_UNSUPPORTED,
               "%s: sparse input needs a vertex stage first", who);
    int programs = 0;
    for (int s = 0; s < n->n_stages; s++)
        programs += n->stages[s].kind == STAGE_PROGRAM;
    SAGA_CHECK(programs == smp->n_layers, SAGA_ERR_INVALID_ARG,
               "%s: the net has %d program stages, the sample %d layers", who, programs,
               (int)smp->n_layers);
    SAGA_CHECK((smp->n_ids >= 1 || smp->local) && smp->blocks[0].n_src == smp->n_ids,
               SAGA_ERR_INVALID_ARG, "%s: the sample's rows do not match its first block", who);
    if (smp->local) { /* over shards: the seeds are own rows; the input rows come with it */
        const int32_t seeds = smp->blocks[smp->n_layers - 1].n_dst;
        for (int32_t i = 0; i < seeds; i++)
            SAGA_CHECK(smp->local[i] >= 0 && smp->local[i] < n->hx->n_own, SAGA_ERR_INVALID_ARG,
                       "%s: the sample's seed %d is not an own row of the shard", who, (int)i);
        SAGA_CHECK(smp->n_ids == 0 || (smp->x_cols == n->in_cols && (smp->x || smp->x_offsets)),
                   SAGA_ERR_INVALID_ARG,
                   "%s: the sample carries %lld input columns, the net takes %lld (a shard with "
                   "its features)",
                   who, (long long)smp->x_cols, (long long)n->in_cols);
    }
    for (int32_t i = 0; !smp->local && i < smp->n_ids; i++)
        SAGA_CHECK(smp->ids[i] >= 0 && smp->ids[i] < n->n, SAGA_ERR_INVALID_ARG,
                   "%s: the sample's row %d is vertex %d, outside the net's graph (0..%d)", who,
                   (int)i, (int)smp->ids[i], (int)n->n - 1);
    for (int l = 0; l + 1 < smp->n_layers; l++)
        SAGA_CHECK(smp->blocks[l].n_dst == smp->blocks[l + 1].n_src, SAGA_ERR_INVALID_ARG,
                   "%s: block %d's destinations (%d) are not block %d's sources (%d)", who, l,
                   (int)smp->blocks[l].n_dst, l + 1, (int)smp->blocks[l + 1].n_src);
fail:
    return st;
}

/* The stages over the sample on the context's tape from mark, its input rows in slot k; *out: the
 * last stage's rows (the seeds'). dg[l] gets block l placed (freed by the caller after the
 * tape). */
static saga_status sample_forward(saga_net *n, const saga_sample *smp, int k, saga_dgraph **dg,
                                  const char *who, saga_tensor **out) {
    saga_status st = SAGA_OK;
    saga_ctx *c = n->c;
    int32_t *iota = NULL;
    saga_tensor *H = NULL;
    saga_sparse xs = {0};
    SAGA_TRY(sample_input(n, smp, k, &H, &xs));
    saga_tensor *ids = saga_ctx_from_host(c, SAGA_I32, smp->n_ids, 1, smp->ids);
    SAGA_CHECK(ids, ctx_error(c), "%s: %s", who, saga_last_error());
    SAGA_TRY(saga_alloc_array((void **)&iota, (size_t)smp->n_ids, sizeof *iota, "row ids"));
    for (int32_t i = 0; i < smp->n_ids; i++)
        iota[i] = i;
    int32_t R = smp->n_ids;
    for (int s = 0, l = 0; s < n->n_stages; s++) {
        const stage *sg = &n->stages[s];
        saga_tensor *y = NULL;
        /* dropout inside the functions draws by the rows' graph ids, a prefix of the sample's */
        saga_ctx_set_row_ids(c, ids->data, R);
        if (sg->kind == STAGE_VERTEX) {
            saga_vertex_in v = {
                .first = 0, .count = R, .self = H, .sparse = s == 0 && n->sparse ? &xs : NULL};
            st = saga_prog_apply_vertex(c, sg->fn, &v, sg->layer, who, &y);
        } else {
            const saga_sample_block *b = &smp->blocks[l];
            SAGA_TRY(saga_dgraph_new_block(&dg[l], c, b->n_dst, b->n_src, b->offsets, b->src,
                                           b->weights, b->deg_in, b->deg_out));
            saga_prog_view view;
            SAGA_TRY(saga_dgraph_view(dg[l], &sg->p, &view));
            /* the destinations' own rows: the first n_dst of the sources' */
            saga_tensor *self = H;
            if (b->n_dst < R)
                self = saga_gather_rows(c, H, saga_ctx_from_host(c, SAGA_I32, b->n_dst, 1, iota));
            saga_tensor *g =
                self ? saga_prog_gather(c, &sg->p, &view, H, self, NULL, sg->layer) : NULL;
            if (g && sg->fn) {
                saga_vertex_in v = {.first = 0, .count = b->n_dst, .gathered = g, .self = self};
                saga_ctx_set_row_ids(c, ids->data, b->n_dst);
                st = saga_prog_apply_vertex(c, sg->fn, &v, sg->layer, who, &y);
            } else {
                y = g;
            }
            R = b->n_dst;
            l++;
        }
        saga_ctx_set_row_ids(c, NULL, 0);
        SAGA_TRY(st);
        SAGA_CHECK(y, ctx_error(c), "%s: stage %d: %s", who, s, saga_last_error());
        SAGA_CHECK(y->cols == sg->out_cols, SAGA_ERR_INVALID_ARG,
                   "%s: stage %d returned %lld columns, it was added with %lld", who, s,
                   (long long)y->cols, (long long)sg->out_cols);
        H = y;
    }
    *out = H;
fail:
    saga_ctx_set_row_ids(c, NULL, 0);
    saga_free(iota);
    return st;
}

typedef enum pass_kind { PASS_INFER, PASS_TRAIN, PASS_QUEUE } pass_kind;

/* One pass over the sample: training (the loss and its gradients; PASS_TRAIN: into *loss;
 * PASS_QUEUE: queued, its loss to be taken) or inference (into out). */
static saga_status sample_pass(saga_net *n, const saga_sample *smp, pass_kind kind, double *loss,
                               float *out, const char *who) {
    saga_status st = SAGA_OK;
    const bool train = kind != PASS_INFER;
    st = sample_check(n, smp, train, who);
    if (st == SAGA_OK && kind == PASS_TRAIN && n->smp_q_tail != n->smp_q_head)
        st = saga_error(SAGA_ERR_INVALID_ARG,
                        "%s: %d queued passes' losses are still to be taken "
                        "(saga_net_train_sample_take)",
                        who, (int)(n->smp_q_tail - n->smp_q_head));
    if (st == SAGA_OK && kind == PASS_QUEUE &&
        n->smp_q_tail - n->smp_q_head >= SAGA_NET_SAMPLES_QUEUED)
        st = saga_error(SAGA_ERR_INVALID_ARG,
                        "%s: %d passes' losses wait to be taken already "
                        "(saga_net_train_sample_take)",
                        who, SAGA_NET_SAMPLES_QUEUED);
    if (st == SAGA_OK)
        st = net_settle(n, false); /* a queued training pass over the graph ends first */
    if (st == SAGA_OK && !n->smp_copy && saga_backend_get_kind(n->be) != SAGA_BACKEND_CPU &&
        !saga_backend_copies_inline(n->be))
        st = saga_stream_new(&n->smp_copy, n->be);
    const int q = n ? (int)(n->smp_q_tail % SAGA_NET_SAMPLES_QUEUED) : 0;
    /* the loss stays on the device until taken: queued on one rank (over shards it is summed) */
    const bool on_dev = kind == PASS_QUEUE && n && !n->hx;
    if (st == SAGA_OK && on_dev && !n->smp_loss_host)
        st = saga_backend_host_alloc(n->be, (void **)&n->smp_loss_host,
                                     SAGA_NET_SAMPLES_QUEUED * sizeof(float));
    if (st == SAGA_OK && on_dev && !n->smp_loss_ev[q])
        st = saga_event_new(&n->smp_loss_ev[q], n->be);
    if (st < 0) {
        if (n && n->hx && train) /* the other ranks learn of it where they sum */
            (void)saga_comm_agree(n->hx->comm, st);
        return st;
    }
    saga_ctx *c = n->c;
    saga_dgraph *dg[64] = {NULL};
    /* the pass's figures: its own device memory is its peak above what was held before it, less
     * what the input's slot grew by, plus its input rows (as if allocated for it alone) */
    const double t0 = saga_now();
    saga_backend_stats b0, b1;
    saga_backend_reset_stats(n->be);
    saga_backend_get_stats(n->be, &b0);
    const size_t slots0 = n->smp_in_bytes[0] + n->smp_in_bytes[1];
    n->smp_input_bytes = 0;
    saga_ctx_train(c, train);
    saga_tape_pos mark = saga_tape_mark(c);
    saga_tensor *y = NULL;
    const int k = (int)(n->smp_serial++ % 2);
    const int32_t seeds = smp->blocks[smp->n_layers - 1].n_dst;
    double lv = 0; /* over shards a rank without seeds in the batch only takes part in the sums */
    const uint64_t draws0 = saga_ctx_rng_counter(c);
    if (seeds > 0)
        st = sample_forward(n, smp, k, dg, who, &y);
    if (st == SAGA_OK && train && seeds > 0) {
        saga_vertex_in v = {.first = 0, .count = seeds, .self = y};
        /* the library's losses take the mean over this batch's rows (over shards, this rank's
         * share of the mean over every rank's seeds) */
        n->sampling = true;
        n->sample_seeds = smp->all_seeds;
        saga_tensor *l = n->loss(c, &v, smp->local ? smp->local : smp->ids, n->loss_user);
        n->sampling = false;
        if (!l)
            st = saga_ctx_status(c) < 0
                     ? saga_ctx_status(c)
                     : saga_error(SAGA_ERR_INVALID_ARG, "%s: the loss function returned NULL", who);
        else if (l->rows != 1 || l->cols != 1 || l->dtype != SAGA_F32)
            st = saga_error(SAGA_ERR_INVALID_ARG,
                            "%s: the loss function returned a %lld x %lld tensor (expected 1 x 1)",
                            who, (long long)l->rows, (long long)l->cols);
        if (st == SAGA_OK)
            st = saga_tape_backward_range(c, mark, l, NULL);
        if (st == SAGA_OK && on_dev) { /* copied out in stream order, read when taken */
            st = saga_memcpy_d2h_async(saga_ctx_stream(c), &n->smp_loss_host[q], l->data,
                                       sizeof(float));
            if (st == SAGA_OK)
                st = saga_event_record(n->smp_loss_ev[q], saga_ctx_stream(c));
        } else if (st == SAGA_OK) {
            lv = saga_item(l);
        }
    } else if (st == SAGA_OK && out && seeds > 0) {
        st = saga_tensor_to_host(y, out);
    }
    if (n->hx && train) { /* the loss and the gradients summed over the ranks, once all got here */
        st = saga_comm_agree(n->hx->comm, st);
        /* with the loss, the dropout draws a pass made where it had seeds: a rank without them
         * counts as many, so that every rank's next masks are one process's */
        double sums[3] = {lv, seeds > 0 ? (double)(saga_ctx_rng_counter(c) - draws0) : 0.0,
                          seeds > 0 ? 1.0 : 0.0};
        if (st == SAGA_OK) /* from here a failure on one rank alone stops every rank */
            st = saga_comm_stop_unless_agreed(
                n->hx->comm,
                saga_comm_allreduce(n->hx->comm, sums, 3, SAGA_F64, SAGA_COMM_SUM, NULL));
        lv = sums[0];
        if (st == SAGA_OK && seeds == 0 && sums[2] > 0)
            saga_ctx_set_rng_counter(c, draws0 + (uint64_t)llround(sums[1] / sums[2]));
        if (st == SAGA_OK)
            st = saga_comm_stop_unless_agreed(
                n->hx->comm, saga_comm_allreduce_grads(n->hx->dcomm, n->model, 1.0));
    }
    if (st == SAGA_OK && kind == PASS_TRAIN && loss)
        *loss = lv;
    if (st == SAGA_OK && kind == PASS_QUEUE) { /* a rank without seeds has its loss: the sum */
        n->smp_q_dev[q] = on_dev && seeds > 0;
        n->smp_q_val[q] = lv;
        n->smp_q_tail++;
    }
    /* a failed pass leaves nothing behind: the net takes the next sample afresh */
    if (st < 0)
        saga_tape_release_failed(c, mark);
    else
        saga_tape_release(c, mark);
    for (int l = 0; l < smp->n_layers; l++)
        saga_dgraph_free(&dg[l]);
    /* slot k is the next copy's into it once the device has passed this pass */
    if (n->smp_copy) {
        saga_status sd = n->smp_done[k] ? SAGA_OK : saga_event_new(&n->smp_done[k], n->be);
        if (sd == SAGA_OK)
            sd = saga_event_record(n->smp_done[k], saga_ctx_stream(c));
        n->smp_done_rec[k] = sd == SAGA_OK;
        if (sd < 0) /* no event to order the copy by: the device finishes the pass now */
            (void)saga_stream_synchronize(saga_ctx_stream(c));
    }
    /* the context keeps released buffers by exact size, and each sample's shapes are its own:
     * kept, they would pile up batch after batch (the backend keeps freed blocks, bounded) */
    saga_ctx_trim(c);
    saga_backend_get_stats(n->be, &b1);
    const size_t grown = n->smp_in_bytes[0] + n->smp_in_bytes[1] - slots0;
    memset(&n->stats, 0, sizeof n->stats);
    n->stats.peak_device_bytes =
        b1.peak_bytes > b0.in_use_bytes + grown ? b1.peak_bytes - b0.in_use_bytes - grown : 0;
    n->stats.peak_device_bytes += n->smp_input_bytes;
    n->stats.input_bytes = n->smp_input_bytes;
    n->stats.h2d_bytes = b1.h2d_bytes;
    n->stats.d2h_bytes = b1.d2h_bytes;
    n->stats.budget_bytes = b1.budget_bytes;
    n->stats.seconds = saga_now() - t0;
    return st;
}

saga_status saga_net_train_sample(saga_net *n, const saga_sample *smp, double *loss) {
    return sample_pass(n, smp, PASS_TRAIN, loss, NULL, "saga_net_train_sample");
}

saga_status saga_net_train_sample_queue(saga_net *n, const saga_sample *smp) {
    return sample_pass(n, smp, PASS_QUEUE, NULL, NULL, "saga_net_train_sample_queue");
}

saga_status saga_net_train_sample_take(saga_net *n, double *loss) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(n, SAGA_ERR_INVALID_ARG, "saga_net_train_sample_take: no net");
    SAGA_CHECK(n->smp_q_head != n->smp_q_tail, SAGA_ERR_INVALID_ARG,
               "saga_net_train_sample_take: no training pass over a sample is queued");
    const int q = (int)(n->smp_q_head++ % SAGA_NET_SAMPLES_QUEUED);
    double v = n->smp_q_val[q];
    if (n->smp_q_dev[q]) {
        SAGA_TRY(saga_event_synchronize(n->smp_loss_ev[q]));
        v = n->smp_loss_host[q];
    }
    if (loss)
        *loss = v;
fail:
    return st;
}

saga_status saga_net_forward_sample(saga_net *n, const saga_sample *smp, float *out) {
    return sample_pass(n, smp, PASS_INFER, NULL, out, "saga_net_forward_sample");
}
