/* net_halo.c - a net over several ranks' shards (saga_net_opts.halo): the halo's layout, and the
 * exchange of a program stage's halo rows as a node of the tape (forward: the owners' rows in
 * place of the local ones; backward: the halo rows' gradients to their owners, added there). */
#include "net_impl.h"

#include <string.h>

void net_halo_free(saga_net *n) {
    net_halo *x = n->hx;
    if (!x)
        return;
    if (x->dcomm && x->dcomm != x->comm)
        saga_comm_free(&x->dcomm);
    if (x->d_send_rows)
        saga_backend_free(n->be, x->d_send_rows, x->d_bytes);
    if (x->d_own)
        saga_backend_free(n->be, x->d_own, ((size_t)x->n_own + 1) * sizeof(int32_t));
    saga_free(x->recv_off);
    saga_free(x->send_off);
    saga_free(x->send_rows);
    saga_free(x->deg_off);
    saga_free(x->cnt);
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
    x->d_bytes = (size_t)(n_send ? n_send : 1) * sizeof(int32_t);
    SAGA_TRY(saga_backend_alloc(n->be, (void **)&x->d_send_rows, x->d_bytes));
    saga_stream *s0 = saga_backend_default_stream(n->be);
    SAGA_TRY(saga_memcpy_h2d_async(s0, x->d_send_rows, x->send_rows, x->d_bytes));
    SAGA_TRY(saga_alloc_array((void **)&own, (size_t)x->n_own + 1, sizeof *own, "own rows"));
    for (int32_t i = 0; i < x->n_own; i++)
        own[i] = i;
    SAGA_TRY(saga_backend_alloc(n->be, (void **)&x->d_own, ((size_t)x->n_own + 1) * sizeof *own));
    SAGA_TRY(saga_memcpy_h2d_async(s0, x->d_own, own, ((size_t)x->n_own + 1) * sizeof *own));
    SAGA_TRY(saga_stream_synchronize(s0));
    SAGA_TRY(saga_comm_open_device(&x->dcomm, x->comm, n->be));
fail:
    saga_free(own);
    return st;
}

/* Byte counts and offsets of one all-to-all of rows of cols floats: rows from[q] .. from[q+1] to
 * (or from) rank q, into (or out of) rows to[q] .. . */
static void counts(net_halo *x, const int64_t *from, const int64_t *to, int64_t cols, size_t **fb,
                   size_t **fo, size_t **tb, size_t **to_o) {
    const int p = x->size;
    size_t *c = x->cnt, row = (size_t)cols * sizeof(float);
    for (int q = 0; q < p; q++) {
        c[q] = (size_t)(from[q + 1] - from[q]) * row;
        c[p + q] = (size_t)from[q] * row;
        c[2 * p + q] = (size_t)(to[q + 1] - to[q]) * row;
        c[3 * p + q] = (size_t)to[q] * row;
    }
    *fb = c, *fo = c + p, *tb = c + 2 * p, *to_o = c + 3 * p;
}

typedef struct halo_node {
    saga_net *n;
} halo_node;

/* The halo rows' gradients to their owners, who add them into their own rows' (rank by rank, in
 * rank order), and the own rows' gradients through. */
static saga_status halo_bwd(saga_ctx *c, saga_node *node, saga_tensor *gy) {
    saga_status st = SAGA_OK;
    halo_node *hn = saga_node_state(node);
    saga_net *n = hn->n;
    net_halo *x = n->hx;
    if (!saga_node_needs_grad(node, 0))
        return SAGA_OK;
    saga_ctx_flush(c);
    SAGA_TRY(saga_ctx_status(c));
    const int64_t cols = gy->cols, n_send = x->send_off[x->size];
    const size_t row = (size_t)cols * sizeof(float);
    double t0 = saga_now();
    saga_stream *s0 = saga_backend_default_stream(n->be);
    saga_tensor *g = saga_ctx_tensor(c, SAGA_F32, x->n_local, cols);
    saga_tensor *rb = saga_ctx_tensor(c, SAGA_F32, n_send ? n_send : 1, cols);
    if (!g || !rb)
        SAGA_TRY(saga_ctx_status(c));
    size_t *sb, *so, *rbytes, *ro;
    counts(x, x->recv_off, x->send_off, cols, &sb, &so, &rbytes, &ro);
    SAGA_TRY(saga_comm_alltoallv(x->dcomm, (char *)gy->data + (size_t)x->n_own * row, sb, so,
                                 rb->data, rbytes, ro, s0));
    SAGA_TRY(saga_memcpy_d2d_async(s0, g->data, gy->data, (size_t)x->n_own * row));
    if (x->n_local > x->n_own)
        SAGA_TRY(n->be->iface->memset_async(s0, (char *)g->data + (size_t)x->n_own * row, 0,
                                            (size_t)(x->n_local - x->n_own) * row));
    for (int q = 0; q < x->size; q++) {
        const int64_t k = x->send_off[q + 1] - x->send_off[q];
        if (k)
            SAGA_TRY(n->be->kernels->scatter_add_rows_f32(
                s0, k, cols, x->d_send_rows + x->send_off[q],
                (const float *)rb->data + x->send_off[q] * cols, x->n_local, g->data));
    }
    x->seconds += saga_now() - t0;
    SAGA_TRY(saga_node_accumulate(c, node, 0, g));
fail:
    return st;
}

saga_tensor *net_halo_exchange(saga_net *n, saga_tensor *in) {
    saga_status st = SAGA_OK;
    saga_ctx *c = n->c;
    net_halo *x = n->hx;
    saga_tensor *y = NULL;
    halo_node *hn = NULL;
    saga_ctx_flush(c);
    SAGA_TRY(saga_ctx_status(c));
    SAGA_CHECK(in->rows == x->n_local && in->dtype == SAGA_F32, SAGA_ERR_INTERNAL,
               "saga_net: a halo exchange of %lld rows for %d local rows", (long long)in->rows,
               (int)x->n_local);
    const int64_t cols = in->cols, n_send = x->send_off[x->size];
    const size_t row = (size_t)cols * sizeof(float);
    double t0 = saga_now();
    saga_stream *s0 = saga_backend_default_stream(n->be);
    y = saga_ctx_tensor(c, SAGA_F32, x->n_local, cols);
    saga_tensor *sbuf = saga_ctx_tensor(c, SAGA_F32, n_send ? n_send : 1, cols);
    if (!y || !sbuf)
        SAGA_TRY(saga_ctx_status(c));
    SAGA_TRY(saga_memcpy_d2d_async(s0, y->data, in->data, (size_t)x->n_own * row));
    if (n_send)
        SAGA_TRY(n->be->kernels->gather_rows_f32(s0, n_send, cols, x->d_send_rows, x->n_local,
                                                 in->data, sbuf->data));
    size_t *sb, *so, *rb, *ro;
    counts(x, x->send_off, x->recv_off, cols, &sb, &so, &rb, &ro);
    SAGA_TRY(saga_comm_alltoallv(x->dcomm, sbuf->data, sb, so, (char *)y->data + x->n_own * row, rb,
                                 ro, s0));
    x->rows_moved += (uint64_t)(x->n_local - x->n_own);
    x->seconds += saga_now() - t0;
    SAGA_TRY(saga_alloc_zeroed((void **)&hn, 1, sizeof *hn, "a halo exchange"));
    hn->n = n;
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
