/* net_dist.c - a net over several ranks (saga_net_opts.comm): the parts dealt to ranks as
 * contiguous ranges balanced by in-edges, the halo rows each rank reads from the others, and the
 * exchanges of those rows (activations forward, gradients backward, PageRank's contributions)
 * and of the rows each rank owns (outputs). Every rank holds the whole graph and the host arrays
 * of every row on the host; its device holds its own blocks only. */
#include "net_impl.h"

#include "saga_log.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* A halo block's pack for a rank: waits until the chunk carrying its remote rows arrived. */
typedef struct net_pack {
    rows_io io;
    net_dist *x;
    int s;
    int32_t j;
} net_pack;

static pthread_mutex_t *mu(net_dist *x) {
    return (pthread_mutex_t *)x->lock;
}
static pthread_cond_t *cv(net_dist *x) {
    return (pthread_cond_t *)x->cond;
}

void net_dist_free(saga_net *n) {
    net_dist *x = n->dist;
    if (!x)
        return;
    (void)net_dist_wait(n);
    if (x->lock && x->cond) { /* both made, both initialised (net_dist_new) */
        pthread_mutex_destroy(mu(x));
        pthread_cond_destroy(cv(x));
    }
    saga_free(x->lock);
    saga_free(x->cond);
    saga_free(x->c_recv_rows);
    saga_free(x->c_send_rows);
    saga_free(x->c_cnt);
    saga_free(x->packs);
    saga_free(x->stage_done);
    saga_free(x->first);
    saga_free(x->row0);
    saga_free(x->recv_rows);
    saga_free(x->send_rows);
    saga_free(x->cnt);
    saga_free(x->sbuf);
    saga_free(x->rbuf);
    saga_free(x);
    n->dist = NULL;
}

saga_status net_dist_new(saga_net *n) {
    saga_status st = SAGA_OK;
    net_dist *x = NULL;
    saga_comm *comm = n->o.comm;
    SAGA_TRY(saga_alloc_zeroed((void **)&x, 1, sizeof *x, "the ranks of a net"));
    n->dist = x;
    x->comm = comm;
    x->rank = saga_comm_rank(comm);
    x->size = saga_comm_size(comm);
    size_t p = (size_t)x->size;
    SAGA_TRY(saga_alloc_zeroed((void **)&x->first, p + 1, sizeof *x->first, "parts of ranks"));
    SAGA_TRY(saga_alloc_zeroed((void **)&x->row0, p + 1, sizeof *x->row0, "rows of ranks"));
    /* per peer: rows received and sent, and their offsets; then the byte counts of an exchange */
    SAGA_TRY(saga_alloc_zeroed((void **)&x->cnt, 8 * p, sizeof *x->cnt, "exchange counts"));
    x->recv_n = x->cnt;
    x->recv_at = x->cnt + p;
    x->send_n = x->cnt + 2 * p;
    x->send_at = x->cnt + 3 * p;
    x->sb = x->cnt + 4 * p;
    x->so = x->cnt + 5 * p;
    x->rb = x->cnt + 6 * p;
    x->ro = x->cnt + 7 * p;
    SAGA_TRY(saga_alloc_array(&x->lock, 1, sizeof(pthread_mutex_t), "a lock"));
    SAGA_TRY(saga_alloc_array(&x->cond, 1, sizeof(pthread_cond_t), "a condition"));
    pthread_mutex_init(mu(x), NULL);
    pthread_cond_init(cv(x), NULL);
    SAGA_TRY(saga_alloc_zeroed((void **)&x->stage_done, (size_t)n->n_stages + 1,
                               sizeof *x->stage_done, "stage flags"));
    x->t_stage = -1;
fail:
    return st;
}

/* FNV-1a over 8-byte words (then the bytes left), on from h. */
static uint64_t fnv(uint64_t h, const void *p, size_t bytes) {
    const unsigned char *b = p;
    size_t i = 0;
    for (; i + 8 <= bytes; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = (h ^ w) * 1099511628211ull;
    }
    for (; i < bytes; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

saga_status net_dist_agree_partition(saga_net *n) {
    saga_status st = SAGA_OK;
    /* every rank must hold the same graph and input and partition it the same way: METIS and
     * the seeded shuffle are deterministic, but a rank that loaded other data, or came to other
     * parts, would exchange the wrong rows. Two fingerprints, the data's (counts, the in-edges,
     * the input rows) and the parts', must agree */
    const uint64_t seed = 1469598103934665603ull;
    const saga_csr in = saga_graph_in(n->g_user);
    const int64_t counts[4] = {n->n, in.nnz, n->in_cols, n->sparse ? n->x_nnz : -1};
    uint64_t hd = fnv(seed, counts, sizeof counts);
    hd = fnv(hd, in.offsets, ((size_t)in.n_rows + 1) * sizeof *in.offsets);
    hd = fnv(hd, in.indices, (size_t)in.nnz * sizeof *in.indices);
    if (n->sparse) {
        hd = fnv(hd, n->xs_off, ((size_t)n->n + 1) * sizeof *n->xs_off);
        hd = fnv(hd, n->xs_idx, (size_t)n->x_nnz * sizeof *n->xs_idx);
        hd = fnv(hd, n->xs_val, (size_t)n->x_nnz * sizeof *n->xs_val);
    } else if (n->x) {
        hd = fnv(hd, n->x, (size_t)n->n * (size_t)n->in_cols * sizeof *n->x);
    }
    const uint64_t hp = fnv(seed, n->plan.part->perm, (size_t)n->n * sizeof(int32_t));
    int64_t lo[2] = {(int64_t)(hd >> 1), (int64_t)(hp >> 1)}, hi[2] = {lo[0], lo[1]};
    SAGA_TRY(saga_comm_allreduce(n->o.comm, lo, 2, SAGA_I64, SAGA_COMM_MIN, NULL));
    SAGA_TRY(saga_comm_allreduce(n->o.comm, hi, 2, SAGA_I64, SAGA_COMM_MAX, NULL));
    if (lo[0] != hi[0])
        st = saga_error(SAGA_ERR_COMM,
                        "saga_net: the ranks hold different graphs or input rows (their counts, "
                        "in-edges or values differ): every rank must load the same data");
    else if (lo[1] != hi[1])
        st = saga_error(SAGA_ERR_COMM,
                        "saga_net: the ranks partitioned the graph differently (a METIS of another "
                        "build on some machine?)");
    /* every rank saw the same sums, so a failure is every rank's: agreed as such, each rank
     * returns it with its own message instead of stopping the job (where one rank's stop could
     * cut the others' messages short) */
    return saga_comm_agree(n->o.comm, st);
fail:
    return st;
}

saga_status net_dist_deal(saga_net *n) {
    net_dist *x = n->dist;
    int32_t k = n->plan.k, R = x->size;
    if (k < R)
        return saga_error(SAGA_ERR_INTERNAL, "saga_net: %d parts for %d ranks", (int)k, (int)R);
    /* contiguous ranges of parts, cut where the in-edges (plus one per row, so that edgeless
     * parts still count) pass each rank's share; at least one part each */
    const int64_t *off = n->plan.part->offsets;
    double total = (double)n->m + (double)n->n;
    x->first[0] = 0;
    int32_t d = 0;
    for (int r = 1; r < R; r++) {
        double want = total * r / R;
        int32_t lo = x->first[r - 1] + 1, hi = k - (R - r);
        d = d < lo ? lo : d;
        while (d < hi && (double)(n->h_off[off[d]] + off[d]) < want)
            d++;
        x->first[r] = d;
    }
    x->first[R] = k;
    for (int r = 0; r <= R; r++)
        x->row0[r] = (int32_t)off[x->first[r]];
    n->plan.d_lo = x->first[x->rank];
    n->plan.d_hi = x->first[x->rank + 1];
    return SAGA_OK;
}

/* The owner of row v (rows of ranks are contiguous and increasing). */
static int owner_of(const net_dist *x, int32_t v) {
    int lo = 0, hi = x->size - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (x->row0[mid] <= v)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* The chunks of the forward exchange (see net_dist in net_impl.h). */
static saga_status chunk_lists(saga_net *n) {
    saga_status st = SAGA_OK;
    net_dist *x = n->dist;
    int32_t *first = NULL;
    size_t *tmp = NULL;
    int32_t *rows_in = NULL;
    size_t p = (size_t)x->size;
    int32_t mine0 = x->row0[x->rank], mine1 = x->row0[x->rank + 1];
    int64_t J = n->plan.d_hi - n->plan.d_lo;
    SAGA_TRY(saga_comm_allreduce(x->comm, &J, 1, SAGA_I64, SAGA_COMM_MAX, NULL));
    x->n_chunks = (int32_t)J;
    size_t C = (size_t)J * p;
    SAGA_TRY(saga_alloc_zeroed((void **)&x->c_cnt, 4 * C, sizeof *x->c_cnt, "chunk counts"));
    x->c_recv_n = x->c_cnt;
    x->c_recv_at = x->c_cnt + C;
    x->c_send_n = x->c_cnt + 2 * C;
    x->c_send_at = x->c_cnt + 3 * C;
    /* the chunk that first needs each remote row */
    SAGA_TRY(saga_alloc_array((void **)&first, (size_t)n->n + 1, sizeof *first, "chunk marks"));
    for (int32_t v = 0; v < n->n; v++)
        first[v] = -1;
    for (int32_t d = n->plan.d_lo; d < n->plan.d_hi; d++) {
        const nblock *b = &n->plan.blk[d];
        for (int32_t i = 0; i < b->n_halo; i++) {
            int32_t u = b->halo[i];
            if ((u < mine0 || u >= mine1) && first[u] < 0)
                first[u] = d - n->plan.d_lo;
        }
    }
    for (int32_t v = 0; v < n->n; v++)
        if (first[v] >= 0)
            x->c_recv_n[(size_t)first[v] * p + (size_t)owner_of(x, v)]++;
    for (size_t i = 0, at = 0; i < C; i++)
        x->c_recv_at[i] = at, at += x->c_recv_n[i];
    SAGA_TRY(saga_alloc_array((void **)&x->c_recv_rows, x->n_recv ? x->n_recv : 1, sizeof(int32_t),
                              "chunk rows"));
    SAGA_TRY(saga_alloc_zeroed((void **)&tmp, C + 1, sizeof *tmp, "chunk cursor"));
    for (int32_t v = 0; v < n->n; v++)
        if (first[v] >= 0) {
            size_t i = (size_t)first[v] * p + (size_t)owner_of(x, v);
            x->c_recv_rows[x->c_recv_at[i] + tmp[i]++] = v;
        }
    /* to each owner: its J counts, then its rows chunk by chunk; from each peer the same */
    size_t *cnt_in = NULL;
    SAGA_TRY(saga_alloc_array((void **)&cnt_in, C + 1, sizeof *cnt_in, "chunk counts"));
    size_t *out = tmp; /* reused: per peer, its J counts in a row */
    for (size_t q = 0; q < p; q++)
        for (size_t j = 0; j < (size_t)J; j++)
            out[q * (size_t)J + j] = x->c_recv_n[j * p + q];
    for (size_t q = 0; q < p; q++) {
        x->sb[q] = x->rb[q] = (size_t)J * sizeof(size_t);
        x->so[q] = x->ro[q] = q * (size_t)J * sizeof(size_t);
    }
    st = saga_comm_alltoallv(x->comm, out, x->sb, x->so, cnt_in, x->rb, x->ro, NULL);
    if (st == SAGA_OK) {
        for (size_t q = 0; q < p; q++)
            for (size_t j = 0; j < (size_t)J; j++)
                x->c_send_n[j * p + q] = cnt_in[q * (size_t)J + j];
    }
    saga_free(cnt_in);
    SAGA_TRY(st);
    for (size_t i = 0, at = 0; i < C; i++)
        x->c_send_at[i] = at, at += x->c_send_n[i];
    /* the rows, per peer chunk by chunk, into peer-major buffers, then chunk-major */
    SAGA_TRY(saga_alloc_array((void **)&rows_in, x->n_send ? x->n_send : 1, sizeof *rows_in,
                              "chunk rows"));
    int32_t *rows_out = NULL;
    SAGA_TRY(saga_alloc_array((void **)&rows_out, x->n_recv ? x->n_recv : 1, sizeof *rows_out,
                              "chunk rows"));
    size_t ao = 0, ai = 0;
    for (size_t q = 0; q < p; q++) {
        x->so[q] = ao * sizeof(int32_t);
        x->ro[q] = ai * sizeof(int32_t);
        size_t no = 0, ni = 0;
        for (size_t j = 0; j < (size_t)J; j++) {
            size_t i = j * p + q;
            memcpy(rows_out + ao + no, x->c_recv_rows + x->c_recv_at[i],
                   x->c_recv_n[i] * sizeof(int32_t));
            no += x->c_recv_n[i];
            ni += x->c_send_n[i];
        }
        x->sb[q] = no * sizeof(int32_t);
        x->rb[q] = ni * sizeof(int32_t);
        ao += no;
        ai += ni;
    }
    st = saga_comm_alltoallv(x->comm, rows_out, x->sb, x->so, rows_in, x->rb, x->ro, NULL);
    saga_free(rows_out);
    SAGA_TRY(st);
    SAGA_TRY(saga_alloc_array((void **)&x->c_send_rows, x->n_send ? x->n_send : 1, sizeof(int32_t),
                              "chunk rows"));
    ai = 0;
    for (size_t q = 0; q < p; q++)
        for (size_t j = 0; j < (size_t)J; j++) {
            size_t i = j * p + q;
            memcpy(x->c_send_rows + x->c_send_at[i], rows_in + ai,
                   x->c_send_n[i] * sizeof(int32_t));
            ai += x->c_send_n[i];
        }
    SAGA_CHECK(ai == x->n_send, SAGA_ERR_INTERNAL, "saga_net: %zu rows in the chunks, %zu to send",
               ai, x->n_send);
fail:
    saga_free(first);
    saga_free(tmp);
    saga_free(rows_in);
    return st;
}

saga_status net_dist_halo(saga_net *n) {
    saga_status st = SAGA_OK;
    net_dist *x = n->dist;
    uint8_t *mark = NULL;
    size_t p = (size_t)x->size;
    int32_t mine0 = x->row0[x->rank], mine1 = x->row0[x->rank + 1];
    SAGA_TRY(saga_alloc_zeroed((void **)&mark, (size_t)n->n + 1, 1, "halo marks"));
    for (int32_t d = n->plan.d_lo; d < n->plan.d_hi; d++) {
        const nblock *b = &n->plan.blk[d];
        for (int32_t i = 0; i < b->n_halo; i++) {
            int32_t u = b->halo[i];
            if (u < mine0 || u >= mine1)
                mark[u] = 1;
        }
    }
    size_t nr = 0;
    for (int32_t v = 0; v < n->n; v++)
        nr += mark[v];
    SAGA_TRY(saga_alloc_array((void **)&x->recv_rows, nr ? nr : 1, sizeof(int32_t), "halo rows"));
    memset(x->recv_n, 0, p * sizeof *x->recv_n);
    nr = 0;
    for (int32_t v = 0; v < n->n; v++)
        if (mark[v]) {
            x->recv_rows[nr++] = v;
            x->recv_n[owner_of(x, v)]++;
        }
    x->n_recv = nr;
    for (size_t q = 0, at = 0; q < p; q++)
        x->recv_at[q] = at, at += x->recv_n[q];
    /* how many of its rows each peer sends: the counts, then the lists */
    for (size_t q = 0; q < p; q++) {
        x->sb[q] = x->rb[q] = sizeof(size_t);
        x->so[q] = x->ro[q] = q * sizeof(size_t);
    }
    SAGA_TRY(saga_comm_alltoallv(x->comm, x->recv_n, x->sb, x->so, x->send_n, x->rb, x->ro, NULL));
    size_t ns = 0;
    for (size_t q = 0; q < p; q++)
        x->send_at[q] = ns, ns += x->send_n[q];
    x->n_send = ns;
    SAGA_TRY(saga_alloc_array((void **)&x->send_rows, ns ? ns : 1, sizeof(int32_t), "halo rows"));
    for (size_t q = 0; q < p; q++) {
        x->sb[q] = x->recv_n[q] * sizeof(int32_t);
        x->so[q] = x->recv_at[q] * sizeof(int32_t);
        x->rb[q] = x->send_n[q] * sizeof(int32_t);
        x->ro[q] = x->send_at[q] * sizeof(int32_t);
    }
    SAGA_TRY(
        saga_comm_alltoallv(x->comm, x->recv_rows, x->sb, x->so, x->send_rows, x->rb, x->ro, NULL));
    for (size_t i = 0; i < ns; i++)
        SAGA_CHECK(x->send_rows[i] >= mine0 && x->send_rows[i] < mine1, SAGA_ERR_INTERNAL,
                   "saga_net: rank %d was asked for row %d it does not own", x->rank,
                   (int)x->send_rows[i]);
    SAGA_TRY(chunk_lists(n));
fail:
    saga_free(mark);
    return st;
}

/* Staging buffers of at least the rows each way of cols floats. */
static saga_status buffers(net_dist *x, int64_t cols) {
    saga_status st = SAGA_OK;
    size_t need_s = (x->n_send > x->n_recv ? x->n_send : x->n_recv) * (size_t)cols;
    if (need_s > x->buf_floats) {
        saga_free(x->sbuf);
        saga_free(x->rbuf);
        x->sbuf = x->rbuf = NULL;
        x->buf_floats = 0;
        SAGA_TRY(saga_alloc_array((void **)&x->sbuf, need_s, sizeof(float), "exchange buffer"));
        SAGA_TRY(saga_alloc_array((void **)&x->rbuf, need_s, sizeof(float), "exchange buffer"));
        x->buf_floats = need_s;
    }
fail:
    return st;
}

/* Byte counts of an exchange of rows of cols floats: `out` rows (n_out/at_out per peer) sent,
 * `in` rows received. */
static void counts(net_dist *x, const size_t *n_out, const size_t *at_out, const size_t *n_in,
                   const size_t *at_in, int64_t cols) {
    size_t row = (size_t)cols * sizeof(float);
    for (int q = 0; q < x->size; q++) {
        x->sb[q] = n_out[q] * row;
        x->so[q] = at_out[q] * row;
        x->rb[q] = n_in[q] * row;
        x->ro[q] = at_in[q] * row;
    }
}

saga_status net_dist_rows(saga_net *n, float *host, int64_t cols) {
    saga_status st = SAGA_OK;
    net_dist *x = n->dist;
    double t0 = saga_now();
    SAGA_TRY(buffers(x, cols));
    size_t row = (size_t)cols * sizeof(float);
    for (size_t i = 0; i < x->n_send; i++)
        memcpy(x->sbuf + i * (size_t)cols, host + (size_t)x->send_rows[i] * (size_t)cols, row);
    counts(x, x->send_n, x->send_at, x->recv_n, x->recv_at, cols);
    SAGA_TRY(saga_comm_alltoallv(x->comm, x->sbuf, x->sb, x->so, x->rbuf, x->rb, x->ro, NULL));
    for (size_t i = 0; i < x->n_recv; i++)
        memcpy(host + (size_t)x->recv_rows[i] * (size_t)cols, x->rbuf + i * (size_t)cols, row);
    x->rows_moved += x->n_recv;
fail:
    x->seconds += saga_now() - t0;
    return st;
}

saga_status net_dist_grads(saga_net *n, float *host, int64_t cols) {
    saga_status st = SAGA_OK;
    net_dist *x = n->dist;
    double t0 = saga_now();
    SAGA_TRY(buffers(x, cols));
    size_t row = (size_t)cols * sizeof(float);
    /* what this rank added into rows of others goes to their owners */
    for (size_t i = 0; i < x->n_recv; i++)
        memcpy(x->sbuf + i * (size_t)cols, host + (size_t)x->recv_rows[i] * (size_t)cols, row);
    counts(x, x->recv_n, x->recv_at, x->send_n, x->send_at, cols);
    SAGA_TRY(saga_comm_alltoallv(x->comm, x->sbuf, x->sb, x->so, x->rbuf, x->rb, x->ro, NULL));
    /* peers in rank order, each peer's rows in increasing order: the same order of additions on
     * every run */
    for (size_t i = 0; i < x->n_send; i++) {
        float *d = host + (size_t)x->send_rows[i] * (size_t)cols;
        const float *s = x->rbuf + i * (size_t)cols;
        for (int64_t j = 0; j < cols; j++)
            d[j] += s[j];
    }
fail:
    x->seconds += saga_now() - t0;
    return st;
}

saga_status net_dist_gather(saga_net *n, void *host, size_t row_bytes) {
    net_dist *x = n->dist;
    double t0 = saga_now();
    int me = x->rank;
    for (int q = 0; q < x->size; q++) {
        bool self = q == me;
        x->sb[q] = self ? 0 : (size_t)(x->row0[me + 1] - x->row0[me]) * row_bytes;
        x->so[q] = (size_t)x->row0[me] * row_bytes;
        x->rb[q] = self ? 0 : (size_t)(x->row0[q + 1] - x->row0[q]) * row_bytes;
        x->ro[q] = (size_t)x->row0[q] * row_bytes;
    }
    saga_status st = saga_comm_alltoallv(x->comm, host, x->sb, x->so, host, x->rb, x->ro, NULL);
    x->seconds += saga_now() - t0;
    return st;
}

/* ---- the forward exchange in chunks --------------------------------------------------------- */

/* Exchanges chunk j of the rows of host (cols floats a row). */
static saga_status chunk_exchange(net_dist *x, float *host, int64_t cols, int32_t j) {
    size_t p = (size_t)x->size, row = (size_t)cols * sizeof(float);
    size_t s0 = x->c_send_at[(size_t)j * p], r0 = x->c_recv_at[(size_t)j * p], ns = 0, nr = 0;
    for (size_t q = 0; q < p; q++) {
        size_t i = (size_t)j * p + q;
        x->sb[q] = x->c_send_n[i] * row;
        x->so[q] = (x->c_send_at[i] - s0) * row;
        x->rb[q] = x->c_recv_n[i] * row;
        x->ro[q] = (x->c_recv_at[i] - r0) * row;
        ns += x->c_send_n[i];
        nr += x->c_recv_n[i];
    }
    for (size_t i = 0; i < ns; i++)
        memcpy(x->sbuf + i * (size_t)cols, host + (size_t)x->c_send_rows[s0 + i] * (size_t)cols,
               row);
    saga_status st =
        saga_comm_alltoallv(x->comm, x->sbuf, x->sb, x->so, x->rbuf, x->rb, x->ro, NULL);
    if (st < 0)
        return st;
    for (size_t i = 0; i < nr; i++)
        memcpy(host + (size_t)x->c_recv_rows[r0 + i] * (size_t)cols, x->rbuf + i * (size_t)cols,
               row);
    x->rows_moved += nr;
    return SAGA_OK;
}

/* The thread: chunks 1 .. n_chunks - 1 of stage t_stage, each announced as it lands. */
static void *chunk_thread(void *arg) {
    net_dist *x = arg;
    double t0 = saga_now();
    saga_status st = SAGA_OK;
    for (int32_t j = 1; j < x->n_chunks && st == SAGA_OK; j++) {
        st = chunk_exchange(x, x->t_host, x->t_cols, j);
        pthread_mutex_lock(mu(x));
        if (st == SAGA_OK)
            x->t_done = j + 1;
        pthread_cond_broadcast(cv(x));
        pthread_mutex_unlock(mu(x));
    }
    pthread_mutex_lock(mu(x));
    if (st < 0) {
        x->t_st = st;
        snprintf(x->t_msg, sizeof x->t_msg, "%s", saga_last_error());
    }
    /* done, or failed: the packs waiting go on (the error comes out of net_dist_wait) */
    x->stage_done[x->t_stage] = true;
    x->t_seconds += saga_now() - t0;
    pthread_cond_broadcast(cv(x));
    pthread_mutex_unlock(mu(x));
    return NULL;
}

saga_status net_dist_wait(saga_net *n) {
    net_dist *x = n->dist;
    if (!x || !x->thread_on)
        return SAGA_OK;
    pthread_join((pthread_t)x->thread, NULL);
    x->thread_on = false;
    if (x->t_st < 0) {
        saga_status st = x->t_st;
        x->t_st = SAGA_OK;
        return saga_error(st, "%s", x->t_msg);
    }
    return SAGA_OK;
}

void net_dist_reset(saga_net *n) {
    net_dist *x = n->dist;
    pthread_mutex_lock(mu(x));
    for (int s = 0; s <= n->n_stages; s++)
        x->stage_done[s] = false;
    x->t_stage = -1;
    x->t_done = 0;
    x->t_seconds = x->wait_seconds = 0;
    pthread_mutex_unlock(mu(x));
}

saga_status net_dist_rows_start(saga_net *n, int s, float *host, int64_t cols) {
    saga_status st = SAGA_OK;
    net_dist *x = n->dist;
    double t0 = saga_now();
    SAGA_TRY(net_dist_wait(n));
    SAGA_TRY(buffers(x, cols));
    pthread_mutex_lock(mu(x));
    x->t_stage = s;
    x->t_done = 0;
    x->t_host = host;
    x->t_cols = cols;
    pthread_mutex_unlock(mu(x));
    st = x->n_chunks > 0 ? chunk_exchange(x, host, cols, 0) : SAGA_OK;
    pthread_mutex_lock(mu(x));
    x->t_done = st == SAGA_OK ? 1 : 0;
    if (x->n_chunks <= 1 || st < 0)
        x->stage_done[s] = true;
    pthread_cond_broadcast(cv(x));
    pthread_mutex_unlock(mu(x));
    SAGA_TRY(st);
    if (x->n_chunks > 1) {
        /* the remaining chunks on a thread while the first ones' blocks compute; here, before
         * any block computes, when MPI must not be called from two threads at once or no thread
         * starts */
        pthread_t t;
        int rc = saga_comm_threads(x->comm) ? pthread_create(&t, NULL, chunk_thread, x) : -1;
        if (rc != 0) {
            for (int32_t j = 1; j < x->n_chunks && st == SAGA_OK; j++)
                st = chunk_exchange(x, host, cols, j);
            pthread_mutex_lock(mu(x));
            x->t_done = x->n_chunks;
            x->stage_done[s] = true;
            pthread_cond_broadcast(cv(x));
            pthread_mutex_unlock(mu(x));
            SAGA_TRY(st);
        } else {
            x->thread = (uint64_t)t;
            x->thread_on = true;
        }
    }
fail:
    x->seconds += saga_now() - t0;
    return st;
}

/* The pack of a halo block over ranks: its chunk first. Runs on the scheduler's copy stream. */
static void dist_pack(void *user, void *staging) {
    net_pack *k = user;
    net_dist *x = k->x;
    double t0 = saga_now();
    pthread_mutex_lock(mu(x));
    while (!x->stage_done[k->s] && !(x->t_stage == k->s && x->t_done > k->j))
        pthread_cond_wait(cv(x), mu(x));
    x->wait_seconds += saga_now() - t0;
    pthread_mutex_unlock(mu(x));
    net_rows_pack(&k->io, staging);
}

saga_status net_dist_packs(saga_net *n) {
    saga_status st = SAGA_OK;
    net_dist *x = n->dist;
    int S = n->n_stages;
    int32_t own = n->plan.d_hi - n->plan.d_lo;
    SAGA_TRY(saga_alloc_zeroed((void **)&x->packs, (size_t)S * (size_t)(own ? own : 1),
                               sizeof *x->packs, "halo packs"));
    for (int s = 1; s < S; s++) {
        if (n->stages[s].kind != STAGE_PROGRAM)
            continue;
        for (int32_t d = n->plan.d_lo; d < n->plan.d_hi; d++) {
            const nblock *b = &n->plan.blk[d];
            net_pack *k = &x->packs[(size_t)s * (size_t)own + (size_t)(d - n->plan.d_lo)];
            *k = (net_pack){{.src = n->act_host[s],
                             .rows = b->halo,
                             .n = b->n_halo,
                             .cols = n->stages[s].in_cols},
                            x,
                            s,
                            d - n->plan.d_lo};
            saga_blk_set_pack(n->halo[s][d], dist_pack, NULL, k);
        }
    }
fail:
    return st;
}

saga_status net_dist_failed(saga_net *n, saga_status st) {
    return saga_comm_stop_unless_agreed(n ? net_ranks_comm(n) : NULL, st);
}
