/* net_halo.c - a net over several ranks' shards (saga_net_opts.halo): the halo's layout, and the
 * exchange of a program stage's halo rows as a node of the tape (forward: the owners' rows in
 * place of the local ones; backward: the halo rows' gradients to their owners, added there). */
#include "net_impl.h"
#include "saga_shards.h"

#include <string.h>

void net_halo_free(saga_net *n) {
    net_halo *x = n->hx;
    if (!x)
        return;
    if (x->dcomm && x->dcomm != x->comm)
        saga_comm_free(&x->dcomm);
    if (x->d_own)
        saga_backend_free(n->be, x->d_own, ((size_t)x->n_own + 1) * sizeof(int32_t));
    if (x->d_keys)
        saga_backend_free(n->be, x->d_keys, ((size_t)x->n_local + 1) * sizeof(int32_t));
    saga_free(x->keys);
    saga_free(x->recv_off);
    saga_free(x->send_off);
    saga_free(x->send_rows);
    saga_free(x->deg_off);
    saga_free(x->cnt);
    saga_free(x->vals);
    saga_free(x);
    n->hx = NULL;
}

saga_comm *net_ranks_comm(const saga_net *n) {
    return n->hx ? n->hx->comm : saga_comm_size(n->o.comm) > 1 ? n->o.comm : NULL;
}

static bool ascending(const int64_t *a, int p, int64_t last) {
    if (a[0] != 0 || a[p] != last)
        return false;
    for (int q = 0; q < p; q++)
        if (a[q + 1] < a[q])
            return false;
    return true;
}

saga_net_halo saga_net_halo_of_shard(const saga_shard *s, saga_comm *comm) {
    return (saga_net_halo){.comm = comm,
                           .n_own = (int32_t)s->n_own,
                           .recv_offsets = s->halo_offsets,
                           .send_offsets = s->send_offsets,
                           .send_rows = s->send_rows,
                           .out_degree = s->out_degree,
                           .row_ids = s->vertex};
}

saga_status net_halo_new(saga_net *n) {
    saga_status st = SAGA_OK;
    const saga_net_halo *h = n->o.halo;
    net_halo *x = NULL;
    int32_t *own = NULL;
    SAGA_CHECK(h->comm && h->recv_offsets && h->send_offsets && !n->o.comm, SAGA_ERR_INVALID_ARG,
               "saga_net: a halo needs its communicator and offsets (and no comm of its own)");
    const int p = saga_comm_size(h->comm), rank = saga_comm_rank(h->comm);
    const int64_t n_halo = h->recv_offsets[p], n_send = h->send_offsets[p];
    SAGA_CHECK(h->n_own >= 0 && h->n_own <= n->n &&
                   ascending(h->recv_offsets, p, n->n - h->n_own) &&
                   ascending(h->send_offsets, p, n_send) && (h->send_rows || !n_send) &&
                   h->recv_offsets[rank + 1] == h->recv_offsets[rank] &&
                   h->send_offsets[rank + 1] == h->send_offsets[rank],
               SAGA_ERR_INVALID_ARG,
               "saga_net: a halo of %lld rows after %d own rows does not fit a graph of %d "
               "vertices, or its offsets do not ascend",
               (long long)n_halo, (int)h->n_own, (int)n->n);
    for (int64_t j = 0; j < n_send; j++)
        SAGA_CHECK(h->send_rows[j] >= 0 && h->send_rows[j] < h->n_own, SAGA_ERR_INVALID_ARG,
                   "saga_net: send row %d (entry %lld) is not an own row (0..%d)",
                   (int)h->send_rows[j], (long long)j, (int)h->n_own - 1);
    SAGA_TRY(saga_alloc_zeroed((void **)&x, 1, sizeof *x, "a net's halo"));
    n->hx = x;
    x->comm = h->comm;
    x->rank = rank;
    x->size = p;
    x->n_own = h->n_own;
    x->n_local = n->n;
    SAGA_TRY(saga_alloc_array((void **)&x->recv_off, (size_t)p + 1, sizeof(int64_t), "halo"));
    SAGA_TRY(saga_alloc_array((void **)&x->send_off, (size_t)p + 1, sizeof(int64_t), "halo"));
    SAGA_TRY(saga_alloc_array((void **)&x->cnt, 4 * (size_t)p, sizeof(size_t), "halo"));
    memcpy(x->recv_off, h->recv_offsets, ((size_t)p + 1) * sizeof(int64_t));
    memcpy(x->send_off, h->send_offsets, ((size_t)p + 1) * sizeof(int64_t));
    SAGA_TRY(saga_alloc_array((void **)&x->send_rows, n_send ? (size_t)n_send : 1, sizeof(int32_t),
                              "send rows"));
    if (n_send)
        memcpy(x->send_rows, h->send_rows, (size_t)n_send * sizeof(int32_t));
    if (h->out_degree) {
        SAGA_TRY(saga_alloc_array((void **)&x->deg_off, (size_t)n->n + 1, sizeof(int64_t),
                                  "out-degrees"));
        x->deg_off[0] = 0;
        const bool loops = n->o.self_loops == SAGA_DGRAPH_SELF_LOOPS_ADD;
        for (int32_t v = 0; v < n->n; v++) {
            SAGA_CHECK(h->out_degree[v] >= 0, SAGA_ERR_INVALID_ARG,
                       "saga_net: out-degree %lld of row %d", (long long)h->out_degree[v], (int)v);
            x->deg_off[v + 1] = x->deg_off[v] + h->out_degree[v] + loops;
        }
    }
    saga_stream *s0 = saga_backend_default_stream(n->be);
    SAGA_TRY(saga_alloc_array((void **)&own, (size_t)x->n_own + 1, sizeof *own, "own rows"));
    for (int32_t i = 0; i < x->n_own; i++)
        own[i] = i;
    SAGA_TRY(saga_backend_alloc(n->be, (void **)&x->d_own, ((size_t)x->n_own + 1) * sizeof *own));
    SAGA_TRY(saga_memcpy_h2d_async(s0, x->d_own, own, ((size_t)x->n_own + 1) * sizeof *own));
    if (h->row_ids) {
        const size_t kb = ((size_t)x->n_local + 1) * sizeof(int32_t);
        SAGA_TRY(saga_alloc_array((void **)&x->keys, (size_t)x->n_local + 1, sizeof(int32_t),
                                  "row ids"));
        memcpy(x->keys, h->row_ids, (size_t)x->n_local * sizeof(int32_t));
        SAGA_TRY(saga_backend_alloc(n->be, (void **)&x->d_keys, kb));
        SAGA_TRY(saga_memcpy_h2d_async(s0, x->d_keys, x->keys, kb));
    }
    SAGA_TRY(saga_stream_synchronize(s0));
    SAGA_TRY(saga_comm_open_device(&x->dcomm, x->comm, n->be));
fail:
    saga_free(own);
    return st;
}

/* Byte counts and offsets of one all-to-all of rows of `row` bytes: rows from[q] .. from[q+1] to
 * (or from) rank q, into (or out of) rows to[q] .. . */
static void counts(net_halo *x, const int64_t *from, const int64_t *to, size_t row, size_t **fb,
                   size_t **fo, size_t **tb, size_t **to_o) {
    const int p = x->size;
    size_t *c = x->cnt;
    for (int q = 0; q < p; q++) {
        c[q] = (size_t)(from[q + 1] - from[q]) * row;
        c[p + q] = (size_t)from[q] * row;
        c[2 * p + q] = (size_t)(to[q + 1] - to[q]) * row;
        c[3 * p + q] = (size_t)to[q] * row;
    }
    *fb = c, *fo = c + p, *tb = c + 2 * p, *to_o = c + 3 * p;
}

void net_xplan_free(saga_net *n, net_xplan **xpp) {
    net_xplan *xp = xpp ? *xpp : NULL;
    if (!xp)
        return;
    if (xp->d_idx)
        saga_backend_free(n->be, xp->d_idx, xp->d_bytes);
    saga_free(xp->recv_off);
    saga_free(xp->send_off);
    saga_free(xp->recv_ids);
    saga_free(xp->send_ids);
    saga_free(xp);
    *xpp = NULL;
}

saga_status net_halo_demand(saga_net *n, net_xplan **out, int s, const uint8_t *want,
                            uint8_t *next) {
    saga_status st = SAGA_OK;
    net_halo *x = n->hx;
    net_xplan *xp = NULL;
    uint8_t *asked = NULL;
    int64_t *cnt = NULL;
    const int p = x->size;
    (void)s;
    SAGA_TRY(saga_alloc_zeroed((void **)&xp, 1, sizeof *xp, "an exchange"));
    SAGA_TRY(saga_alloc_zeroed((void **)&xp->recv_off, (size_t)p + 1, sizeof(int64_t), "halo"));
    SAGA_TRY(saga_alloc_zeroed((void **)&xp->send_off, (size_t)p + 1, sizeof(int64_t), "halo"));
    SAGA_TRY(saga_alloc_zeroed((void **)&asked, (size_t)(x->n_local - x->n_own) + 1, 1, "halo"));
    SAGA_TRY(saga_alloc_zeroed((void **)&cnt, 2 * (size_t)p, sizeof(int64_t), "halo"));
    /* the halo rows the own rows computed here read */
    int64_t n_recv = 0;
    for (int32_t v = 0; v < x->n_own; v++)
        if (want[v])
            for (int64_t k = n->h_off[v]; k < n->h_off[v + 1]; k++) {
                int32_t u = n->h_src[k];
                if (u >= x->n_own && !asked[u - x->n_own])
                    asked[u - x->n_own] = 1, n_recv++;
            }
    SAGA_TRY(saga_alloc_array((void **)&xp->recv_ids, n_recv ? (size_t)n_recv : 1, sizeof(int32_t),
                              "halo rows asked"));
    /* by owner (the halo's groups), each group in order: the j-th of a group is its owner's
     * send_rows[send_off[this rank] + j] */
    int32_t *pos = NULL;
    int64_t k = 0;
    for (int q = 0; q < p; q++) {
        for (int64_t j = x->recv_off[q]; j < x->recv_off[q + 1]; j++)
            if (asked[j])
                xp->recv_ids[k++] = (int32_t)(x->n_own + j);
        xp->recv_off[q + 1] = k;
        cnt[q] = xp->recv_off[q + 1] - xp->recv_off[q];
    }
    /* how many each peer asks of this rank, then which (their positions in its send list) */
    size_t *sb, *so, *rb, *ro;
    for (int q = 0; q < p; q++) {
        x->cnt[q] = sizeof(int64_t), x->cnt[p + q] = (size_t)q * sizeof(int64_t);
        x->cnt[2 * p + q] = sizeof(int64_t), x->cnt[3 * p + q] = (size_t)q * sizeof(int64_t);
    }
    sb = x->cnt, so = x->cnt + p, rb = x->cnt + 2 * p, ro = x->cnt + 3 * p;
    SAGA_TRY(saga_comm_alltoallv(x->comm, cnt, sb, so, cnt + p, rb, ro, NULL));
    for (int q = 0; q < p; q++)
        xp->send_off[q + 1] = xp->send_off[q] + cnt[p + q];
    const int64_t n_send = xp->send_off[p];
    for (int q = 0; q < p; q++)
        SAGA_CHECK(cnt[p + q] <= x->send_off[q + 1] - x->send_off[q], SAGA_ERR_COMM,
                   "saga_net: rank %d asks %lld rows of rank %d, which sends it %lld at most", q,
                   (long long)cnt[p + q], x->rank,
                   (long long)(x->send_off[q + 1] - x->send_off[q]));
    SAGA_TRY(saga_alloc_array((void **)&xp->send_ids, n_send ? (size_t)n_send : 1, sizeof(int32_t),
                              "rows asked for"));
    SAGA_TRY(saga_alloc_array((void **)&pos, n_recv ? (size_t)n_recv : 1, sizeof(int32_t),
                              "rows asked"));
    for (int q = 0; q < p; q++)
        for (int64_t i = xp->recv_off[q]; i < xp->recv_off[q + 1]; i++)
            pos[i] = (int32_t)(xp->recv_ids[i] - x->n_own - x->recv_off[q]);
    counts(x, xp->recv_off, xp->send_off, sizeof(int32_t), &sb, &so, &rb, &ro);
    st = saga_comm_alltoallv(x->comm, pos, sb, so, xp->send_ids, rb, ro, NULL);
    saga_free(pos);
    SAGA_TRY(st);
    for (int q = 0; q < p; q++)
        for (int64_t i = xp->send_off[q]; i < xp->send_off[q + 1]; i++) {
            int32_t j = xp->send_ids[i];
            SAGA_CHECK(j >= 0 && j < x->send_off[q + 1] - x->send_off[q], SAGA_ERR_COMM,
                       "saga_net: rank %d asks for row %d of the %lld rank %d sends it", q, (int)j,
                       (long long)(x->send_off[q + 1] - x->send_off[q]), x->rank);
            xp->send_ids[i] = x->send_rows[x->send_off[q] + j];
            next[xp->send_ids[i]] = 1; /* computed here for the peers */
        }
    /* the halo's rows are received, not computed here: the stage's input takes them after the
     * rows of the stage before (net_halo_exchange) */
    for (int32_t u = x->n_own; u < x->n_local; u++)
        next[u] = 0;
    *out = xp;
    xp = NULL;
fail:
    net_xplan_free(n, &xp);
    saga_free(asked);
    saga_free(cnt);
    return st;
}

saga_status net_xplan_place(saga_net *n, net_xplan *xp, const int32_t *prev, int64_t n_prev) {
    saga_status st = SAGA_OK;
    net_halo *x = n->hx;
    int32_t *at = NULL, *h = NULL;
    const int64_t n_recv = xp->recv_off[x->size], n_send = xp->send_off[x->size];
    xp->n_h = prev ? n_prev : x->n_local;
    xp->append = prev != NULL;
    SAGA_TRY(saga_alloc_array((void **)&at, (size_t)x->n_local + 1, sizeof *at, "positions"));
    for (int32_t v = 0; v < x->n_local; v++)
        at[v] = prev ? -1 : v;
    for (int64_t i = 0; prev && i < n_prev; i++)
        at[prev[i]] = (int32_t)i;
    const size_t count = (size_t)(n_send + n_recv + 2 * xp->n_h);
    SAGA_TRY(saga_alloc_array((void **)&h, count + 1, sizeof *h, "positions"));
    int32_t *sp = h, *rp = h + n_send, *fwd = rp + n_recv, *bwd = fwd + xp->n_h;
    for (int64_t i = 0; i < n_send; i++)
        sp[i] = at[xp->send_ids[i]];
    for (int64_t k = 0; k < xp->n_h; k++)
        fwd[k] = bwd[k] = (int32_t)k;
    for (int64_t j = 0; j < n_recv; j++) {
        /* appended after the rows of the stage before, or in place of their copies there */
        rp[j] = xp->append ? (int32_t)(xp->n_h + j) : at[xp->recv_ids[j]];
        if (!xp->append) {
            fwd[rp[j]] = (int32_t)(xp->n_h + j);
            bwd[rp[j]] = (int32_t)xp->n_h;
        }
    }
    for (size_t i = 0; i < (size_t)(n_send + n_recv); i++)
        SAGA_CHECK(h[i] >= 0, SAGA_ERR_INTERNAL,
                   "saga_net: a row of an exchange is not among its stage's input rows");
    xp->d_bytes = (count + 1) * sizeof *h;
    SAGA_TRY(saga_backend_alloc(n->be, (void **)&xp->d_idx, xp->d_bytes));
    saga_stream *s0 = saga_backend_default_stream(n->be);
    SAGA_TRY(saga_memcpy_h2d_async(s0, xp->d_idx, h, xp->d_bytes));
    SAGA_TRY(saga_stream_synchronize(s0));
fail:
    saga_free(at);
    saga_free(h);
    return st;
}

typedef struct halo_node {
    saga_net *n;
    const net_xplan *xp;
} halo_node;

/* The received rows' gradients to their owners, who add them into the rows they sent (rank by
 * rank, in rank order), and every other row's gradient through. */
static saga_status halo_bwd(saga_ctx *c, saga_node *node, saga_tensor *gy) {
    saga_status st = SAGA_OK;
    halo_node *hn = saga_node_state(node);
    saga_net *n = hn->n;
    const net_xplan *xp = hn->xp;
    net_halo *x = n->hx;
    if (!saga_node_needs_grad(node, 0))
        return SAGA_OK;
    saga_ctx_flush(c);
    SAGA_TRY(saga_ctx_status(c));
    const int p = x->size;
    const int64_t cols = gy->cols, n_h = xp->n_h, n_recv = xp->recv_off[p],
                  n_send = xp->send_off[p];
    const size_t row = (size_t)cols * sizeof(float);
    const int32_t *sp = xp->d_idx, *rp = sp + n_send, *bwd = rp + n_recv + n_h;
    const saga_kernels *K = n->be->kernels;
    saga_stream *s0 = saga_backend_default_stream(n->be);
    /* through the host, the exchange waits for the queued kernels: not its own time */
    if (!saga_comm_on_device(x->dcomm))
        SAGA_TRY(saga_stream_synchronize(s0));
    double t0 = saga_now();
    /* into the input's gradient directly where it holds none yet (beta 0), else into a tensor
     * added to it: one pass over the rows fewer than a tensor copied in */
    float beta = 0.0f;
    float *dst = saga_node_grad_target(c, node, 0, &beta);
    if (!dst && (n_h || saga_ctx_status(c) < 0))
        SAGA_TRY(saga_ctx_status(c));
    saga_tensor *got = saga_ctx_tensor(c, SAGA_F32, n_send ? n_send : 1, cols);
    saga_tensor *gt = beta != 0.0f ? saga_ctx_tensor(c, SAGA_F32, n_h, cols) : NULL;
    if (!got || (beta != 0.0f && !gt))
        SAGA_TRY(saga_ctx_status(c));
    float *g = gt ? gt->data : dst;
    size_t *sb, *so, *rb, *ro;
    counts(x, xp->recv_off, xp->send_off, row, &sb, &so, &rb, &ro);
    if (xp->append) {
        /* the received rows' gradients follow the others': they go back as they lie */
        SAGA_TRY(saga_comm_alltoallv(x->dcomm, (char *)gy->data + (size_t)n_h * row, sb, so,
                                     got->data, rb, ro, s0));
        if (n_h)
            SAGA_TRY(saga_memcpy_d2d_async(s0, g, gy->data, (size_t)n_h * row));
    } else {
        saga_tensor *back = saga_ctx_tensor(c, SAGA_F32, n_recv ? n_recv : 1, cols);
        saga_tensor *g1 = saga_ctx_tensor(c, SAGA_F32, n_h + 1, cols);
        if (!back || !g1)
            SAGA_TRY(saga_ctx_status(c));
        if (n_recv)
            SAGA_TRY(K->gather_rows_f32(s0, n_recv, cols, rp, n_h, gy->data, back->data));
        SAGA_TRY(saga_comm_alltoallv(x->dcomm, back->data, sb, so, got->data, rb, ro, s0));
        /* every row's gradient but the received rows' (zero: they are their owners') */
        SAGA_TRY(saga_memcpy_d2d_async(s0, g1->data, gy->data, (size_t)n_h * row));
        SAGA_TRY(n->be->iface->memset_async(s0, (char *)g1->data + (size_t)n_h * row, 0, row));
        SAGA_TRY(K->gather_rows_f32(s0, n_h, cols, bwd, n_h + 1, g1->data, g));
    }
    for (int q = 0; q < p; q++) {
        const int64_t k = xp->send_off[q + 1] - xp->send_off[q];
        if (k)
            SAGA_TRY(K->scatter_add_rows_f32(s0, k, cols, sp + xp->send_off[q],
                                             (const float *)got->data + xp->send_off[q] * cols, n_h,
                                             g));
    }
    if (gt && n_h)
        SAGA_TRY(K->scale_f32(s0, n_h * cols, 1.0f, g, 1.0f, dst));
    x->seconds += saga_now() - t0;
fail:
    return st;
}

saga_tensor *net_halo_exchange(saga_net *n, saga_tensor *in, const net_xplan *xp) {
    saga_status st = SAGA_OK;
    saga_ctx *c = n->c;
    net_halo *x = n->hx;
    saga_tensor *y = NULL;
    halo_node *hn = NULL;
    saga_ctx_flush(c);
    SAGA_TRY(saga_ctx_status(c));
    SAGA_CHECK(xp && in->rows == xp->n_h && in->dtype == SAGA_F32, SAGA_ERR_INTERNAL,
               "saga_net: a halo exchange over %lld rows for a plan of %lld", (long long)in->rows,
               (long long)(xp ? xp->n_h : -1));
    const int p = x->size;
    const int64_t cols = in->cols, n_h = xp->n_h, n_recv = xp->recv_off[p],
                  n_send = xp->send_off[p];
    const size_t row = (size_t)cols * sizeof(float);
    const int32_t *sp = xp->d_idx, *fwd = sp + n_send + n_recv;
    const saga_kernels *K = n->be->kernels;
    saga_stream *s0 = saga_backend_default_stream(n->be);
    /* through the host, the exchange waits for the queued kernels: not its own time */
    if (!saga_comm_on_device(x->dcomm))
        SAGA_TRY(saga_stream_synchronize(s0));
    double t0 = saga_now();
    /* the input's rows, then the received ones, gathered into place */
    saga_tensor *cat = saga_ctx_tensor(c, SAGA_F32, n_h + n_recv, cols);
    saga_tensor *sbuf = saga_ctx_tensor(c, SAGA_F32, n_send ? n_send : 1, cols);
    y = xp->append ? cat : saga_ctx_tensor(c, SAGA_F32, n_h, cols);
    if (!cat || !sbuf || !y)
        SAGA_TRY(saga_ctx_status(c));
    SAGA_TRY(saga_memcpy_d2d_async(s0, cat->data, in->data, (size_t)n_h * row));
    if (n_send)
        SAGA_TRY(K->gather_rows_f32(s0, n_send, cols, sp, n_h, in->data, sbuf->data));
    size_t *sb, *so, *rb, *ro;
    counts(x, xp->send_off, xp->recv_off, row, &sb, &so, &rb, &ro);
    SAGA_TRY(saga_comm_alltoallv(x->dcomm, sbuf->data, sb, so, (char *)cat->data + n_h * row, rb,
                                 ro, s0));
    if (xp->append) /* the input's rows, then the received ones */
        y = cat;
    else
        SAGA_TRY(K->gather_rows_f32(s0, n_h, cols, fwd, n_h + n_recv, cat->data, y->data));
    x->rows_moved += (uint64_t)n_recv;
    x->seconds += saga_now() - t0;
    SAGA_TRY(saga_alloc_zeroed((void **)&hn, 1, sizeof *hn, "a halo exchange"));
    hn->n = n;
    hn->xp = xp;
    saga_tensor *inputs[1] = {in};
    st = saga_tape_record(c, y, inputs, 1, halo_bwd, hn, saga_free);
    hn = NULL;
    SAGA_TRY(st);
    return y;
fail:
    saga_free(hn);
    saga_ctx_fail(c, st);
    return NULL;
}

saga_status net_halo_reorder(saga_net *n, const int32_t *ids) {
    saga_status st = SAGA_OK;
    const saga_net_halo *h = n->o.halo;
    net_halo *x = n->hx;
    int32_t *pos = NULL;
    SAGA_TRY(saga_alloc_array((void **)&pos, (size_t)x->n_own + 1, sizeof *pos, "row positions"));
    for (int32_t i = 0; i < x->n_own; i++)
        pos[ids[i]] = i;
    for (int64_t j = 0; j < x->send_off[x->size]; j++)
        x->send_rows[j] = pos[h->send_rows[j]];
    if (x->deg_off) {
        const int64_t loops = n->o.self_loops == SAGA_DGRAPH_SELF_LOOPS_ADD;
        for (int32_t v = 0; v < n->n; v++)
            x->deg_off[v + 1] = x->deg_off[v] + h->out_degree[ids[v]] + loops;
    }
fail:
    saga_free(pos);
    return st;
}

saga_status net_halo_rows_f64(saga_net *n, double *v) {
    saga_status st = SAGA_OK;
    net_halo *x = n->hx;
    const int p = x->size;
    const int64_t n_send = x->send_off[p];
    double t0 = saga_now();
    if (!x->vals) /* once: every call sends the same rows */
        SAGA_TRY(saga_alloc_array((void **)&x->vals, n_send ? (size_t)n_send : 1, sizeof *x->vals,
                                  "halo values"));
    double *sb = x->vals;
    for (int64_t j = 0; j < n_send; j++)
        sb[j] = v[x->send_rows[j]];
    size_t *sc = x->cnt, *so = x->cnt + p, *rc = x->cnt + 2 * p, *ro = x->cnt + 3 * p;
    for (int q = 0; q < p; q++) {
        sc[q] = (size_t)(x->send_off[q + 1] - x->send_off[q]) * sizeof(double);
        so[q] = (size_t)x->send_off[q] * sizeof(double);
        rc[q] = (size_t)(x->recv_off[q + 1] - x->recv_off[q]) * sizeof(double);
        ro[q] = (size_t)x->recv_off[q] * sizeof(double);
    }
    SAGA_TRY(saga_comm_alltoallv(x->comm, sb, sc, so, v + x->n_own, rc, ro, NULL));
    x->rows_moved += (uint64_t)x->recv_off[p];
fail:
    x->seconds += saga_now() - t0;
    return st;
}
