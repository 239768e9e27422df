/* net_pagerank.c - PageRank on a graph network's placed graph (saga_net_pagerank): f64 vectors
 * per part, iterated in memory or streamed through the device under the budget like the stages
 * of a network; over shards (saga_net_opts.halo), each rank's own rows in memory, the halo's
 * contributions from their owners every iteration. */
#include "net_impl.h"

#include <math.h>

/* ---- PageRank ----------------------------------------------------------------------------- */

/* Opens the profiler's range before iteration it (from 1) when it is the first asked for
 * (saga_net_opts.profile_first), and closes it after iteration it, once the device is done, when
 * it is the last asked for or, last, the last to run; *on: the range is open. */
static saga_status pr_profile(saga_net *n, int it, bool before, bool last, bool *on) {
    saga_status st = SAGA_OK;
    if (before && !*on && n->o.profile_first > 0 && it == n->o.profile_first) {
        SAGA_TRY(saga_backend_profile_range(n->be, true));
        *on = true;
    } else if (!before && *on && (last || it >= n->o.profile_last)) {
        SAGA_TRY(saga_backend_synchronize(n->be));
        SAGA_TRY(saga_backend_profile_range(n->be, false));
        *on = false;
    }
fail:
    return st;
}

/* The f64 vectors of one part. */
typedef struct pr_part {
    saga_blk *inv, *dang; /* 1 / out-degree (0 without out-edges); 1 where there are none */
    saga_blk *x[2];       /* ranks, alternating between iterations */
    saga_blk *c[2];       /* contributions x / out-degree, alternating as the ranks do */
    saga_blk *halo[2];    /* the contributions of the halo (the part's own c in memory) */
} pr_part;

/* The host vectors (n + 1 doubles each) come from saga_backend_host_alloc, for the reasons the
 * stages' host arrays do (struct saga_net). */
struct pr_state {
    pr_part *parts;
    double *h_inv, *h_dang, *h_x[2], *h_c[2];
    bool pull; /* a rank's shard in memory: one pagerank_pull_f64 an iteration, then the exchange */
    /* the whole graph's vertices (over shards every rank's own rows; else n->n), and the rows
     * iterated (the own rows over shards, whose halo rows take their owners' contributions) */
    double n_all;
    int32_t n_iter;
    /* by parts: each iteration's two sums on the device, [the L1 change, the sinks' rank], which
     * the parts add to (pagerank_pull_acc_f64) and the next iteration's parts read their base
     * from, alternating; h_sums: their host copies (0-1, 2-3) and the sums read back (4-5, and
     * 6-7: an iteration's, read while the next one runs, alternate between 4-5 and 6-7) */
    saga_blk *sums[2];
    double *h_sums;
};
typedef struct pr_state pr_state;

/* Frees n->pr and what it holds; n->pr becomes NULL (n->pr_free). */
static void pr_state_free(saga_net *n) {
    pr_state *p = n->pr;
    if (!p)
        return;
    size_t bytes = ((size_t)n->n + 1) * sizeof(double);
    saga_free(p->parts);
    saga_backend_host_free(n->be, p->h_inv, bytes);
    saga_backend_host_free(n->be, p->h_dang, bytes);
    saga_backend_host_free(n->be, p->h_x[0], bytes);
    saga_backend_host_free(n->be, p->h_x[1], bytes);
    saga_backend_host_free(n->be, p->h_c[0], bytes);
    saga_backend_host_free(n->be, p->h_c[1], bytes);
    saga_backend_host_free(n->be, p->h_sums, 8 * sizeof(double));
    saga_free(p);
    n->pr = NULL;
}

static saga_status pr_blocks(saga_net *n, pr_state *p) {
    saga_status st = SAGA_OK;
    size_t nn = (size_t)n->n;
    int32_t k = n->plan.k;
    double **hs[] = {&p->h_inv, &p->h_dang, &p->h_x[0], &p->h_x[1], &p->h_c[0], &p->h_c[1]};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
        SAGA_TRY(saga_backend_host_alloc(n->be, (void **)hs[i], (nn + 1) * sizeof(double)));
    /* over shards, the whole graph's out-degrees */
    const int64_t *off = n->hx ? n->hx->deg_off : n->out_off;
    for (int32_t v = 0; v < n->n; v++) {
        int64_t deg = off[v + 1] - off[v];
        p->h_inv[v] = deg ? 1.0 / (double)deg : 0.0;
        p->h_dang[v] = deg ? 0.0 : 1.0;
    }
    SAGA_TRY(saga_alloc_zeroed((void **)&p->parts, (size_t)k, sizeof *p->parts, "pagerank parts"));
    if (!p->pull) {
        SAGA_TRY(saga_backend_host_alloc(n->be, (void **)&p->h_sums, 8 * sizeof(double)));
        for (int i = 0; i < 2; i++) {
            if (!(p->sums[i] =
                      saga_sched_block(n->sched, 2 * sizeof(double), SAGA_BLK_TEMP, "sums")))
                goto oom;
            saga_blk_set_host(p->sums[i], p->h_sums + 2 * i);
        }
    }
    for (int32_t d = n->plan.d_lo; d < n->plan.d_hi; d++) {
        nblock *b = &n->plan.blk[d];
        pr_part *q = &p->parts[d];
        size_t rows = (size_t)(b->v1 - b->v0), P = rows * sizeof(double);
        if (!(q->inv = net_input_block(n, p->h_inv + b->v0, P, "out-degrees")) ||
            !(q->dang = net_input_block(n, p->h_dang + b->v0, P, "sinks")))
            goto oom;
        for (int i = 0; i < 2; i++) {
            if (!(q->x[i] = saga_sched_block(n->sched, P, SAGA_BLK_TEMP, "ranks")) ||
                !(q->c[i] = saga_sched_block(n->sched, P, SAGA_BLK_TEMP, "contributions")))
                goto oom;
            saga_blk_set_host(q->x[i], p->h_x[i] + b->v0);
            saga_blk_set_host(q->c[i], p->h_c[i] + b->v0);
            if (k == 1) {
                q->halo[i] = q->c[i];
                continue;
            }
            /* gathered from the host's contributions by the backend as they are loaded */
            if (!(q->halo[i] = saga_sched_block(n->sched, (size_t)b->n_halo * sizeof(double),
                                                SAGA_BLK_INPUT, "halo contributions")))
                goto oom;
            SAGA_TRY(saga_blk_set_rows(q->halo[i],
                                       &(saga_host_rows){.base = p->h_c[i],
                                                         .row_bytes = sizeof(double),
                                                         .rows = b->halo,
                                                         .n = b->n_halo},
                                       false));
        }
        if (!b->b_off &&
            !(b->b_off = net_input_block(n, b->off, (rows + 1) * sizeof(int64_t), "tile offsets")))
            goto oom;
        if (!b->b_src &&
            !(b->b_src = net_input_block(n, b->src, (size_t)(b->e1 - b->e0) * sizeof(int32_t),
                                         "tile sources")))
            goto oom;
    }
    return SAGA_OK;
oom:
    st = saga_error(SAGA_ERR_OUT_OF_MEMORY, "out of memory for PageRank's blocks");
fail:
    return st;
}

/* The contributions c (host copy h) of the halo rows from their owners, over shards, once the
 * step that wrote the own rows' has written them back; the sums of the own rows (count of them
 * in sums) become the ranks' sums. The next step that reads c loads it again. */
static saga_status pr_pull_exchange(saga_net *n, saga_blk *c, double *h, double *sums, int count) {
    saga_status st = SAGA_OK;
    SAGA_TRY(saga_sched_finish(n->sched));
    SAGA_TRY(saga_stream_synchronize(saga_backend_default_stream(n->be)));
    SAGA_TRY(net_halo_rows_f64(n, h));
    double t0 = saga_now();
    SAGA_TRY(saga_comm_allreduce(n->hx->comm, sums, count, SAGA_F64, SAGA_COMM_SUM, NULL));
    n->hx->seconds += saga_now() - t0;
    saga_blk_host_changed(c);
fail:
    return st;
}

/* A rank's own rows over shards, in memory: each iteration is one kernel (pagerank_pull_f64)
 * that pulls the contributions along the in-CSR, writes the new ranks and the next contributions,
 * and returns the L1 change and the rank of the vertices without out-edges; the halo rows'
 * contributions come from their owners between the iterations with the two sums. The
 * contributions alternate between c[0] and c[1] as the ranks between x[0] and x[1]. */
static saga_status pr_pull(saga_net *n, pr_state *p, double damping, double tol, int max_iter,
                           int *itp, double *l1p, double *secs) {
    saga_status st = SAGA_OK;
    const saga_kernels *K = n->be->kernels;
    saga_sched *sc = n->sched;
    saga_stream *s = saga_backend_default_stream(n->be);
    pr_part *q = &p->parts[0];
    nblock *b = &n->plan.blk[0];
    saga_blk **c = q->c;
    double **h_c = p->h_c;
    const int64_t N = p->n_iter, cols = n->n;
    const unsigned back = n->hx ? SAGA_USE_WRITEBACK : 0; /* the owners' rows for the others */
    double sums[2] = {0, 0}, l1 = INFINITY;               /* the L1 change, the sinks' rank */
    int it = 0;
    bool prof = false; /* inside the profiler's range */
    saga_sched_plan_begin(sc);
    int t = saga_sched_step(sc);
    saga_sched_use(sc, t, q->x[0], SAGA_USE_WRITE, 0);
    saga_sched_use(sc, t, q->inv, SAGA_USE_READ, 0);
    saga_sched_use(sc, t, q->dang, SAGA_USE_READ, 0);
    saga_sched_use(sc, t, c[0], SAGA_USE_WRITE, back);
    saga_sched_use(sc, t, b->b_off, SAGA_USE_READ, 0); /* loaded before the iterations */
    saga_sched_use(sc, t, b->b_src, SAGA_USE_READ, 0);
    for (int i = 0; i < max_iter; i++) {
        int xi = i % 2;
        t = saga_sched_step(sc);
        if (n->hx)
            saga_sched_step_hold(sc, t); /* the halo's contributions arrive first */
        saga_sched_use(sc, t, b->b_off, SAGA_USE_READ, 0);
        saga_sched_use(sc, t, b->b_src, SAGA_USE_READ, 0);
        saga_sched_use(sc, t, q->inv, SAGA_USE_READ, 0);
        saga_sched_use(sc, t, c[xi], SAGA_USE_READ, 0);
        saga_sched_use(sc, t, q->x[xi], SAGA_USE_READ, 0);
        saga_sched_use(sc, t, q->x[1 - xi], SAGA_USE_WRITE, 0);
        saga_sched_use(sc, t, c[1 - xi], SAGA_USE_WRITE, back);
    }
    t = saga_sched_step(sc);
    saga_sched_use(sc, t, q->x[max_iter % 2], SAGA_USE_READ, 0);
    SAGA_TRY(saga_sched_plan_end(sc));

    t = 0;
    SAGA_TRY(saga_sched_begin(sc, t));
    if (N) {
        SAGA_TRY(K->fill_f64(s, saga_blk_dev(q->x[0]), N, 1.0 / p->n_all));
        SAGA_TRY(K->mul_f64(s, N, saga_blk_dev(q->x[0]), saga_blk_dev(q->inv), saga_blk_dev(c[0])));
        SAGA_TRY(K->dot_f64(s, N, saga_blk_dev(q->x[0]), saga_blk_dev(q->dang), &sums[1]));
    }
    SAGA_TRY(saga_sched_end(sc, t++));
    if (n->hx)
        SAGA_TRY(pr_pull_exchange(n, c[0], h_c[0], &sums[1], 1));
    double t_it = saga_now(); /* dot_f64 returned: the step is done */
    while (it < max_iter) {
        int xi = it % 2;
        const double base = (1.0 - damping) / p->n_all + damping * sums[1] / p->n_all;
        SAGA_TRY(pr_profile(n, it + 1, true, false, &prof));
        SAGA_TRY(saga_sched_begin(sc, t));
        saga_csr_dev A = {N, cols, b->off[N], saga_blk_dev(b->b_off), saga_blk_dev(b->b_src), NULL};
        sums[0] = sums[1] = 0.0;
        if (N)
            SAGA_TRY(K->pagerank_pull_f64(
                s, &A, damping, base, saga_blk_dev(c[xi]), saga_blk_dev(q->x[xi]),
                saga_blk_dev(q->inv), saga_blk_dev(q->x[1 - xi]), saga_blk_dev(c[1 - xi]), sums));
        SAGA_TRY(saga_sched_end(sc, t++));
        if (n->hx)
            SAGA_TRY(pr_pull_exchange(n, c[1 - xi], h_c[1 - xi], sums, 2));
        l1 = sums[0];
        it++;
        SAGA_TRY(pr_profile(n, it, false, l1 < tol || it == max_iter, &prof));
        if (l1 < tol)
            break;
    }
    *secs = saga_now() - t_it; /* the sums returned: so did the iteration */
fail:
    if (prof) /* an error inside the range: it closes */
        (void)saga_backend_profile_range(n->be, false);
    *itp = it;
    *l1p = l1;
    return st;
}

/* One iteration of pr_parts: each part pulls its rows over its halo's contributions
 * (pagerank_pull_acc_f64) from the ranks and contributions of iteration it (xi = it % 2), its base
 * read from the sums of iteration it - 1 on the device, its own sums added into the other pair,
 * which is then copied to the host (h_sums + at). Steps t onwards. */
static saga_status pr_queue(saga_net *n, pr_state *p, double damping, int it, int *t, int at) {
    saga_status st = SAGA_OK;
    const saga_kernels *K = n->be->kernels;
    saga_sched *sc = n->sched;
    saga_stream *s = saga_backend_default_stream(n->be);
    const int32_t lo = n->plan.d_lo, hi = n->plan.d_hi;
    const bool shared = n->plan.k > 1 || n->dist;
    const int xi = it % 2;
    /* base = (1 - d) / n + d / n * (the sinks' rank), each part reading the rank on the device */
    const double teleport = (1.0 - damping) / p->n_all, spread = damping / p->n_all;
    if (shared) /* the others' contributions, written back (or received) since the last load */
        for (int32_t d = lo; d < hi; d++)
            saga_blk_host_changed(p->parts[d].halo[xi]);
    for (int32_t d = lo; d < hi; d++, (*t)++) {
        SAGA_TRY(saga_sched_begin(sc, *t));
        pr_part *q = &p->parts[d];
        nblock *b = &n->plan.blk[d];
        const int64_t P = b->v1 - b->v0;
        double *in = saga_blk_dev(p->sums[xi]), *acc = saga_blk_dev(p->sums[1 - xi]);
        saga_csr_dev A = {
            P, b->n_halo, b->e1 - b->e0, saga_blk_dev(b->b_off), saga_blk_dev(b->b_src), NULL};
        if (d == lo) {
            if (n->dist) /* the sinks' rank over the ranks */
                SAGA_TRY(saga_memcpy_h2d_async(s, in + 1, p->h_sums + 5, sizeof(double)));
            SAGA_TRY(K->fill_f64(s, acc, 2, 0.0));
        }
        if (P)
            SAGA_TRY(K->pagerank_pull_acc_f64(s, &A, damping, teleport, spread, in,
                                              saga_blk_dev(q->halo[xi]), saga_blk_dev(q->x[xi]),
                                              saga_blk_dev(q->inv), saga_blk_dev(q->x[1 - xi]),
                                              saga_blk_dev(q->c[1 - xi]), acc));
        if (d == hi - 1)
            SAGA_TRY(saga_memcpy_d2h_async(s, p->h_sums + at, acc, 2 * sizeof(double)));
        SAGA_TRY(saga_sched_end(sc, *t));
    }
fail:
    return st;
}

/* Streamed, or over several ranks that each read the whole graph, or in memory on one rank: per
 * iteration, each part pulls its rows over its halo's contributions (pr_queue), writing its next
 * contributions back for the halos of others (exchanged between ranks after the iteration), its
 * base read from the sums of the iteration before and its own sums added on the device.
 * In memory on one rank nothing waits on the host inside an iteration: iteration i + 1 is queued
 * before the host reads iteration i's L1 change (an event after its copy), so the device never
 * idles for the host, and at convergence one iteration more has run, whose results are not taken
 * (the ranks and contributions alternate between two copies, so iteration i's are intact).
 * Streamed, the host waits once an iteration for the L1 change (one part more would be one
 * iteration's loads ahead of the plan's use of the ranks); over ranks, for the exchange and the
 * L1 change over the ranks. */
static saga_status pr_parts(saga_net *n, pr_state *pp, double damping, double tol, int max_iter,
                            int *itp, double *l1p, double *secs) {
    saga_status st = SAGA_OK;
    const saga_kernels *K = n->be->kernels;
    pr_state p = *pp;
    const int32_t k = n->plan.k, lo = n->plan.d_lo, hi = n->plan.d_hi;
    const bool shared = k > 1 || n->dist; /* the contributions of others cross the host */
    const unsigned back = shared ? SAGA_USE_WRITEBACK : 0;
    saga_sched *sc = n->sched;
    saga_stream *s = saga_backend_default_stream(n->be);
    saga_event *done_ev[2] = {NULL, NULL}; /* iteration i's sums on the host: done_ev[i % 2] */
    int t = 0, it = 0;
    double l1 = INFINITY;
    bool prof = false; /* inside the profiler's range */

    /* the plan of max_iter iterations, left at convergence; before them the first ranks, their
     * contributions and the sinks' rank */
    saga_sched_plan_begin(sc);
    for (int32_t d = lo; d < hi; d++) {
        int ts = saga_sched_step(sc);
        pr_part *q = &p.parts[d];
        saga_sched_use(sc, ts, p.sums[0], d == lo ? SAGA_USE_WRITE : SAGA_USE_RW, 0);
        saga_sched_use(sc, ts, q->x[0], SAGA_USE_WRITE, 0);
        saga_sched_use(sc, ts, q->inv, SAGA_USE_READ, 0);
        saga_sched_use(sc, ts, q->dang, SAGA_USE_READ, 0);
        saga_sched_use(sc, ts, q->c[0], SAGA_USE_WRITE, back);
    }
    for (int i = 0; i < max_iter; i++) {
        int xi = i % 2;
        for (int32_t d = lo; d < hi; d++) {
            int ts = saga_sched_step(sc);
            if (d == lo && n->dist)
                saga_sched_step_hold(sc, ts); /* the contributions of others arrive first */
            else if (d == lo && k > 1)
                saga_sched_step_barrier(sc, ts);
            pr_part *q = &p.parts[d];
            nblock *b = &n->plan.blk[d];
            saga_sched_use(sc, ts, p.sums[xi], SAGA_USE_READ, 0);
            saga_sched_use(sc, ts, p.sums[1 - xi], d == lo ? SAGA_USE_WRITE : SAGA_USE_RW, 0);
            saga_sched_use(sc, ts, q->halo[xi], SAGA_USE_READ, 0);
            saga_sched_use(sc, ts, b->b_off, SAGA_USE_READ, 0);
            saga_sched_use(sc, ts, b->b_src, SAGA_USE_READ, 0);
            saga_sched_use(sc, ts, q->x[xi], SAGA_USE_READ, 0);
            saga_sched_use(sc, ts, q->inv, SAGA_USE_READ, 0);
            saga_sched_use(sc, ts, q->x[1 - xi], SAGA_USE_WRITE, 0);
            saga_sched_use(sc, ts, q->c[1 - xi], SAGA_USE_WRITE, back);
        }
    }
    /* the ranks of the last iteration are read after it: kept until downloaded */
    for (int32_t d = lo; d < hi; d++) {
        int ts = saga_sched_step(sc);
        saga_sched_use(sc, ts, p.parts[d].x[max_iter % 2], SAGA_USE_READ, 0);
    }
    SAGA_TRY(saga_sched_plan_end(sc));

    for (int32_t d = lo; d < hi; d++, t++) {
        SAGA_TRY(saga_sched_begin(sc, t));
        pr_part *q = &p.parts[d];
        int64_t P = n->plan.blk[d].v1 - n->plan.blk[d].v0;
        double *sums = saga_blk_dev(p.sums[0]), *x = saga_blk_dev(q->x[0]);
        if (d == lo)
            SAGA_TRY(K->fill_f64(s, sums, 2, 0.0));
        if (P) {
            SAGA_TRY(K->fill_f64(s, x, P, 1.0 / p.n_all));
            SAGA_TRY(K->mul_f64(s, P, x, saga_blk_dev(q->inv), saga_blk_dev(q->c[0])));
            SAGA_TRY(K->dot_acc_f64(s, P, x, saga_blk_dev(q->dang), sums + 1));
        }
        if (n->dist && d == hi - 1)
            SAGA_TRY(saga_memcpy_d2h_async(s, p.h_sums + 4, sums, 2 * sizeof(double)));
        SAGA_TRY(saga_sched_end(sc, t));
    }
    SAGA_TRY(saga_sched_finish(sc));
    double t_it = saga_now(), t_said = t_it;
    if (!n->dist && k == 1) {
        /* in memory on one rank: one iteration ahead of the host (see above) */
        for (int i = 0; i < 2; i++)
            SAGA_TRY(saga_event_new(&done_ev[i], n->be));
        int queued = 0;
        while (true) {
            while (queued < max_iter && queued <= it + 1) {
                SAGA_TRY(pr_profile(n, queued + 1, true, false, &prof));
                SAGA_TRY(pr_queue(n, &p, damping, queued, &t, 4 + 2 * (queued % 2)));
                SAGA_TRY(saga_event_record(done_ev[queued % 2], s));
                queued++;
            }
            SAGA_TRY(saga_event_synchronize(done_ev[it % 2])); /* iteration it's L1 change */
            l1 = p.h_sums[4 + 2 * (it % 2)];
            it++;
            SAGA_TRY(pr_profile(n, it, false, l1 < tol || it == max_iter, &prof));
            if (l1 < tol || it == max_iter)
                break;
        }
        goto done;
    }
    while (true) {
        if (n->dist) {
            /* the contributions this rank's blocks read from the others, and the sums over the
             * ranks, which the next iteration's first step puts back on the device */
            SAGA_TRY(saga_sched_finish(sc));
            SAGA_TRY(saga_stream_synchronize(s));
            SAGA_TRY(net_dist_rows(n, (float *)p.h_c[it % 2], 2));
            SAGA_TRY(
                saga_comm_allreduce(n->o.comm, p.h_sums + 4, 2, SAGA_F64, SAGA_COMM_SUM, NULL));
        } else if (it > 0) {
            SAGA_TRY(saga_stream_synchronize(s)); /* the iteration's one wait: its L1 change */
        }
        if (it > 0) {
            l1 = p.h_sums[4];
            SAGA_TRY(pr_profile(n, it, false, l1 < tol || it == max_iter, &prof));
            if (l1 < tol || it == max_iter)
                break;
            if (n->plan.many_parts && saga_now() - t_said >= 30.0) {
                /* net_prepare warned that the budget asked for many parts: a word every 30 s */
                t_said = saga_now();
                saga_log(SAGA_LOG_WARN,
                         "pagerank: iteration %d of at most %d, L1 change %.3g, %.0f s", it,
                         max_iter, l1, t_said - t_it);
            }
        }
        SAGA_TRY(pr_profile(n, it + 1, true, false, &prof));
        SAGA_TRY(pr_queue(n, &p, damping, it, &t, 4));
        it++;
    }
done:
    /* the last iteration whose L1 change was read is done; one more may still run (in memory) */
    *secs = saga_now() - t_it;
fail:
    if (prof) /* an error inside the range: it closes */
        (void)saga_backend_profile_range(n->be, false);
    for (int i = 0; i < 2; i++)
        saga_event_free(&done_ev[i]);
    *itp = it;
    *l1p = l1;
    return st;
}

saga_status saga_net_pagerank(saga_net *n, double damping, double tol, int max_iter, double *rank,
                              int *iterations, double *l1_out) {
    saga_status st = SAGA_OK;
    double t0 = saga_now();
    SAGA_CHECK(n && rank, SAGA_ERR_INVALID_ARG, "saga_net_pagerank: net and output must be given");
    SAGA_CHECK(n->n_stages == 0, SAGA_ERR_INVALID_ARG, "saga_net_pagerank: the net has stages");
    SAGA_CHECK(
        damping >= 0 && damping < 1 && tol > 0 && max_iter >= 1, SAGA_ERR_INVALID_ARG,
        "saga_net_pagerank: damping must be in [0, 1), tol > 0, max_iter >= 1 (got %g, %g, %d)",
        damping, tol, max_iter);
    SAGA_CHECK(n->n > 0, SAGA_ERR_INVALID_ARG, "saga_net_pagerank: the graph has no vertices");
    const saga_kernels *K = n->be->kernels;
    SAGA_CHECK(K->mul_f64 && K->dot_f64 && K->fill_f64 && K->dot_acc_f64 && K->pagerank_pull_f64 &&
                   K->pagerank_pull_acc_f64,
               SAGA_ERR_UNSUPPORTED, "saga_net_pagerank: backend %s lacks the f64 kernels",
               n->be->name);
    SAGA_CHECK(!n->hx || n->hx->deg_off, SAGA_ERR_INVALID_ARG,
               "saga_net_pagerank: over shards it needs the whole graph's out-degrees "
               "(saga_net_halo.out_degree)");
    n->pagerank = true;
    SAGA_TRY(net_prepare(n, false));
    if (!n->pr) {
        SAGA_TRY(saga_alloc_zeroed((void **)&n->pr, 1, sizeof *n->pr, "PageRank state"));
        n->pr_free = pr_state_free;
        /* over shards; in memory on one rank, pr_parts runs its one part a step ahead */
        n->pr->pull = n->plan.k == 1 && !n->dist && n->hx;
        n->pr->n_all = n->n;
        n->pr->n_iter = n->n;
        if (n->hx) {
            int64_t all = n->hx->n_own;
            SAGA_TRY(saga_comm_allreduce(n->hx->comm, &all, 1, SAGA_I64, SAGA_COMM_SUM, NULL));
            n->pr->n_all = (double)all;
            n->pr->n_iter = n->hx->n_own;
        }
        double t_blocks = saga_now();
        st = pr_blocks(n, n->pr);
        if (st < 0) {
            pr_state_free(n);
            goto fail;
        }
        n->stats.prepare_seconds += saga_now() - t_blocks; /* the vectors are part of it */
    }
    pr_state p = *n->pr;
    saga_backend_reset_stats(n->be);
    saga_sched_reset_stats(n->sched);
    if (n->dist) {
        n->dist->seconds = 0;
        n->dist->rows_moved = 0;
        saga_comm_get_stats(n->o.comm, &n->comm_at);
    }
    if (n->hx) {
        n->hx->seconds = 0;
        n->hx->rows_moved = 0;
        saga_comm_get_stats(n->hx->comm, &n->comm_at);
        if (n->hx->dcomm && n->hx->dcomm != n->hx->comm)
            saga_comm_get_stats(n->hx->dcomm, &n->dcomm_at);
    }
    double secs = 0;
    int it = 0;
    double l1 = INFINITY;
    st = n->pr->pull ? pr_pull(n, n->pr, damping, tol, max_iter, &it, &l1, &secs)
                     : pr_parts(n, n->pr, damping, tol, max_iter, &it, &l1, &secs);
    if (st < 0)
        goto fail;
    n->stats.iterate_seconds = secs;
    SAGA_TRY(saga_sched_finish(n->sched));
    for (int32_t d = n->plan.d_lo; d < n->plan.d_hi; d++)
        SAGA_TRY(saga_sched_download(n->sched, p.parts[d].x[it % 2]));
    SAGA_TRY(saga_sched_finish(n->sched));
    if (n->dist)
        SAGA_TRY(net_dist_gather(n, p.h_x[it % 2], sizeof(double)));
    const double *res = p.h_x[it % 2];
    for (int32_t v = 0; v < n->n; v++) /* over shards the halo's are its owners' to give */
        rank[n->plan.ids ? n->plan.ids[v] : v] = v < p.n_iter ? res[v] : 0.0;
    if (iterations)
        *iterations = it;
    if (l1_out)
        *l1_out = l1;
fail:
    if (st < 0 && n)
        n->stats.iterate_seconds = 0;
    if (n && n->sched) {
        (void)saga_sched_finish(n->sched);
        net_collect_stats(n, t0);
    }
    return net_dist_failed(n, st);
}
