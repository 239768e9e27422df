/* net_dist.c - a net over several ranks (saga_net_opts.comm): the parts dealt to ranks as
 * contiguous ranges balanced by in-edges, the halo rows each rank reads from the others, and the
 * exchanges of those rows (activations forward, gradients backward, PageRank's contributions)
 * and of the rows each rank owns (outputs). Every rank holds the whole graph and the host arrays
 * of every row on the host; its device holds its own blocks only. */
#include "net_impl.h"

#include "saga_log.h"

#include <string.h>

void net_dist_free(saga_net *n) {
    net_dist *x = n->dist;
    if (!x)
        return;
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
fail:
    return st;
}

saga_status net_dist_agree_partition(saga_net *n) {
    saga_status st = SAGA_OK;
    /* every rank partitions the same graph with the same options: METIS and the seeded shuffle
     * are deterministic, but a rank that came to other parts would exchange the wrong rows, so
     * the parts' fingerprints must agree */
    uint64_t h = 1469598103934665603ull;
    for (int32_t v = 0; v < n->n; v++)
        h = (h ^ (uint64_t)(uint32_t)n->part->perm[v]) * 1099511628211ull;
    int64_t lo = (int64_t)(h >> 1), hi = lo;
    SAGA_TRY(saga_comm_allreduce(n->o.comm, &lo, 1, SAGA_I64, SAGA_COMM_MIN, NULL));
    SAGA_TRY(saga_comm_allreduce(n->o.comm, &hi, 1, SAGA_I64, SAGA_COMM_MAX, NULL));
    SAGA_CHECK(lo == hi, SAGA_ERR_COMM,
               "saga_net: the ranks partitioned the graph differently (a METIS of another build "
               "on some machine?)");
fail:
    return st;
}

saga_status net_dist_deal(saga_net *n) {
    net_dist *x = n->dist;
    int32_t k = n->k, R = x->size;
    if (k < R)
        return saga_error(SAGA_ERR_INTERNAL, "saga_net: %d parts for %d ranks", (int)k, (int)R);
    /* contiguous ranges of parts, cut where the in-edges (plus one per row, so that edgeless
     * parts still count) pass each rank's share; at least one part each */
    const int64_t *off = n->part->offsets;
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
    n->d_lo = x->first[x->rank];
    n->d_hi = x->first[x->rank + 1];
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

saga_status net_dist_halo(saga_net *n) {
    saga_status st = SAGA_OK;
    net_dist *x = n->dist;
    uint8_t *mark = NULL;
    int32_t *lists = NULL;
    size_t p = (size_t)x->size;
    int32_t mine0 = x->row0[x->rank], mine1 = x->row0[x->rank + 1];
    SAGA_TRY(saga_alloc_zeroed((void **)&mark, (size_t)n->n + 1, 1, "halo marks"));
    for (int32_t d = n->d_lo; d < n->d_hi; d++) {
        const nblock *b = &n->blk[d];
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
    (void)lists;
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
