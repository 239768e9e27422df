/* sample.c - neighbour sampling into bipartite blocks (saga_sample.h).
 *
 * Hop h builds block n_layers - 1 - h. Its destinations are every row the sample holds so far;
 * each draws its in-neighbours on its own, from a random stream keyed by (seed, batch, hop,
 * vertex), so threads may take destinations in any order. Floyd's algorithm picks k distinct
 * positions of a row with k draws (a hash set of the picks in per-thread scratch); the picks are
 * sorted, so a row's sources keep the graph's order. Then one pass in edge order gives each new
 * source the next row, which makes the numbering, and the whole sample, independent of the thread
 * count. */
#include "sample_impl.h"

#include <omp.h>

enum { MAX_LAYERS = SAMPLE_MAX_LAYERS, MAX_FANOUT = SAMPLE_MAX_FANOUT };

saga_sampler_opts saga_sampler_opts_defaults(void) {
    return (saga_sampler_opts){.seed = 1,
                               .self_loops = SAGA_DGRAPH_SELF_LOOPS_KEEP,
                               .weight = SAGA_WEIGHT_NONE,
                               .degrees = SAGA_SAMPLE_DEGREES_FULL};
}

/* ---- the sampler ----------------------------------------------------------------------------- */

/* A sampler's fields every kind shares, from fanouts and o (checked): the layers, fan-outs,
 * options and the draws' scratch. */
static saga_status sampler_make(saga_sampler **out, const int32_t *fanouts, int32_t n_layers,
                                const saga_sampler_opts *o, const char *who) {
    saga_status st = SAGA_OK;
    saga_sampler *s = NULL;
    SAGA_CHECK(n_layers >= 1 && n_layers <= MAX_LAYERS, SAGA_ERR_INVALID_ARG,
               "%s: %d layers, expected 1..%d", who, (int)n_layers, MAX_LAYERS);
    saga_sampler_opts opts = o ? *o : saga_sampler_opts_defaults();
    SAGA_CHECK((unsigned)opts.self_loops < SAGA_DGRAPH_SELF_LOOPS_COUNT &&
                   (unsigned)opts.weight < SAGA_WEIGHT_COUNT &&
                   (unsigned)opts.degrees < SAGA_SAMPLE_DEGREES_COUNT && opts.threads >= 0 &&
                   opts.threads <= 4096,
               SAGA_ERR_INVALID_ARG, "%s: options out of range", who);
    int32_t widest = 0;
    for (int32_t h = 0; h < n_layers; h++) {
        SAGA_CHECK(fanouts[h] == -1 || (fanouts[h] >= 1 && fanouts[h] <= MAX_FANOUT),
                   SAGA_ERR_INVALID_ARG, "%s: fan-out %d of hop %d: expected -1 (all) or 1..%d",
                   who, (int)fanouts[h], (int)h + 1, MAX_FANOUT);
        widest = fanouts[h] > widest ? fanouts[h] : widest;
    }
    SAGA_TRY(saga_alloc_zeroed((void **)&s, 1, sizeof *s, "sampler"));
    s->n_layers = n_layers;
    memcpy(s->fanouts, fanouts, (size_t)n_layers * sizeof *fanouts);
    s->o = opts;
    if (widest > 0) {
        s->set_cap = 1;
        while (s->set_cap < 2 * (int64_t)widest)
            s->set_cap *= 2;
        s->per_thread = s->set_cap + widest;
        s->n_threads = opts.threads > 0 ? opts.threads : omp_get_max_threads();
        SAGA_TRY(saga_alloc_array((void **)&s->scratch, (size_t)s->n_threads * s->per_thread,
                                  sizeof *s->scratch, "sampling scratch"));
    }
    *out = s;
    return SAGA_OK;
fail:
    sampler_release(s);
    return st;
}

/* The self-loops of each row of s->in, whose row i is vertex vertex(i) (ADD only). */
static saga_status count_loops(saga_sampler *s, const int32_t *vertex) {
    saga_status st = SAGA_OK;
    const int32_t n = s->in.n_rows;
    if (s->o.self_loops != SAGA_DGRAPH_SELF_LOOPS_ADD)
        return SAGA_OK;
    SAGA_TRY(saga_alloc_zeroed((void **)&s->loops, (size_t)n + 1, sizeof *s->loops, "self-loops"));
    for (int32_t i = 0; i < n; i++) {
        const int32_t v = vertex ? vertex[i] : i;
        for (int64_t k = s->in.offsets[i]; k < s->in.offsets[i + 1]; k++)
            s->loops[i] += s->in.indices[k] == v;
    }
fail:
    return st;
}

saga_status saga_sampler_new(saga_sampler **out, const saga_graph *g, const int32_t *fanouts,
                             int32_t n_layers, const saga_sampler_opts *o) {
    saga_status st = SAGA_OK;
    saga_sampler *s = NULL;
    SAGA_CHECK(out && g && fanouts, SAGA_ERR_INVALID_ARG,
               "saga_sampler_new: out, graph and fan-outs must be given");
    *out = NULL;
    SAGA_TRY(sampler_make(&s, fanouts, n_layers, o, "saga_sampler_new"));
    s->g = g;
    s->in = saga_graph_in(g);
    s->out = saga_graph_out(g);
    const int32_t n = s->in.n_rows;
    SAGA_TRY(saga_alloc_array((void **)&s->loc, (size_t)n + 1, sizeof *s->loc, "sample rows"));
    for (int32_t v = 0; v < n; v++)
        s->loc[v] = -1;
    SAGA_TRY(count_loops(s, NULL));
    *out = s;
    return SAGA_OK;
fail:
    sampler_release(s);
    return st;
}

saga_status saga_sampler_new_shard(saga_sampler **out, const saga_shard *sh, saga_comm *comm,
                                   const int32_t *fanouts, int32_t n_layers,
                                   const saga_sampler_opts *o) {
    saga_status st = SAGA_OK;
    saga_sampler *s = NULL;
    SAGA_CHECK(out && sh && comm && fanouts, SAGA_ERR_INVALID_ARG,
               "saga_sampler_new_shard: out, shard, communicator and fan-outs must be given");
    *out = NULL;
    /* from here every rank reaches the agreement below, whatever fails on it */
    const int p = saga_comm_size(comm);
    if (sh->rank != saga_comm_rank(comm) || sh->n_shards != p)
        st = saga_error(SAGA_ERR_INVALID_ARG,
                        "saga_sampler_new_shard: shard %d of %d on rank %d of %d", (int)sh->rank,
                        (int)sh->n_shards, saga_comm_rank(comm), p);
    else if (sh->n_vertices >= INT32_MAX)
        st = saga_error(SAGA_ERR_UNSUPPORTED,
                        "saga_sampler_new_shard: %lld vertices: sampling takes graphs below 2^31",
                        (long long)sh->n_vertices);
    if (st == SAGA_OK)
        st = sampler_make(&s, fanouts, n_layers, o, "saga_sampler_new_shard");
    /* the own rows' in-edges with their sources as vertices: the graph's rows, in its order */
    if (st == SAGA_OK) {
        s->sh = sh;
        s->comm = comm;
        st = saga_alloc_array((void **)&s->in_vertex, (size_t)sh->nnz + 1, sizeof *s->in_vertex,
                              "sources of the shard's rows");
    }
    if (st == SAGA_OK) {
        for (int64_t e = 0; e < sh->nnz; e++)
            s->in_vertex[e] = sh->vertex[sh->in_indices[e]];
        s->in = (saga_csr){.n_rows = (int32_t)sh->n_own,
                           .nnz = sh->nnz,
                           .offsets = sh->in_offsets,
                           .indices = s->in_vertex,
                           .weights = sh->in_weights};
        st = count_loops(s, sh->vertex);
    }
    if (st == SAGA_OK) /* own rows by global id */
        st = saga_alloc_array((void **)&s->own_local, (size_t)sh->n_own + 1, sizeof *s->own_local,
                              "own rows");
    for (int64_t l = 0; st == SAGA_OK && l < sh->n_own; l++) {
        const int64_t i = sh->global_id[l] - sh->row0;
        if (i < 0 || i >= sh->n_own)
            st = saga_error(SAGA_ERR_INVALID_ARG,
                            "saga_sampler_new_shard: own row %lld has global id %lld, outside the "
                            "shard's %lld..%lld",
                            (long long)l, (long long)sh->global_id[l], (long long)sh->row0,
                            (long long)(sh->row0 + sh->n_own - 1));
        else
            s->own_local[i] = (int32_t)l;
    }
    if (st == SAGA_OK) /* every rank's row range */
        st = saga_alloc_zeroed((void **)&s->row0, (size_t)p + 1, sizeof *s->row0, "rows of ranks");
    st = saga_comm_agree(comm, st);
    if (st == SAGA_OK) {
        s->row0[sh->rank + 1] = sh->n_own;
        st = saga_comm_stop_unless_agreed(
            comm, saga_comm_allreduce(comm, s->row0 + 1, (size_t)p, SAGA_I64, SAGA_COMM_SUM, NULL));
    }
    SAGA_TRY(st);
    for (int q = 0; q < p; q++)
        s->row0[q + 1] += s->row0[q];
    if (s->row0[sh->rank] != sh->row0 || s->row0[p] != sh->n_vertices)
        st = saga_error(SAGA_ERR_INVALID_ARG,
                        "saga_sampler_new_shard: the ranks' shards do not cover one graph (rank "
                        "%d's rows begin at %lld, its shard's at %lld)",
                        (int)sh->rank, (long long)s->row0[sh->rank], (long long)sh->row0);
    SAGA_TRY(saga_comm_agree(comm, st));
    *out = s;
    return SAGA_OK;
fail:
    sampler_release(s);
    return st;
}

void saga_sampler_free(saga_sampler **s) {
    if (!s || !*s)
        return;
    sampler_release(*s);
    *s = NULL;
}

void saga_sample_free(saga_sample **b) {
    if (!b || !*b)
        return;
    sample_release(*b);
    *b = NULL;
}

/* ---- one hop --------------------------------------------------------------------------------- */

/* Destination v's edges at hop h into gsrc (graph ids) and, with GRAPH weights, w. */
static void fill_row(const saga_sampler *s, int32_t v, int32_t hop, uint64_t batch, int64_t *scr,
                     int32_t *gsrc, float *w) {
#define FILL_EDGE(e, p, wt)                                                                        \
    do {                                                                                           \
        gsrc[e] = (p) < 0 ? v : s->in.indices[p];                                                  \
        if (w)                                                                                     \
            w[e] = (wt);                                                                           \
    } while (0)
    SAMPLE_ROW_EDGES(s, v, v, hop, batch, scr, FILL_EDGE);
#undef FILL_EDGE
}

/* The whole graph's degrees as a full-graph net places it (saga_place_in_csr). */
static double full_in(const saga_sampler *s, int32_t v) {
    return sample_full_degree(s, s->in.offsets[v + 1] - s->in.offsets[v],
                              s->loops ? s->loops[v] : 0);
}
static double full_out(const saga_sampler *s, int32_t u) {
    return sample_full_degree(s, s->out.offsets[u + 1] - s->out.offsets[u],
                              s->loops ? s->loops[u] : 0);
}

/* Hop h: the block of the destinations smp->ids[0 .. n_ids - 1], its new sources appended to
 * smp->ids. */
static saga_status hop(saga_sampler *s, saga_sample *smp, int32_t h, uint64_t batch,
                       int64_t *ids_cap) {
    saga_status st = SAGA_OK;
    saga_sample_block *b = &smp->blocks[s->n_layers - 1 - h];
    int32_t *gsrc = NULL;
    const int32_t nd = smp->n_ids, fan = s->fanouts[h];
    const bool weighted = s->in.weights != NULL;
    b->n_dst = nd;
    SAGA_TRY(saga_alloc_array((void **)&b->offsets, (size_t)nd + 1, sizeof *b->offsets,
                              "sample block offsets"));
    b->offsets[0] = 0;
    for (int32_t i = 0; i < nd; i++)
        b->offsets[i + 1] = b->offsets[i] + sample_row_edges(s, smp->ids[i], fan);
    const int64_t m = b->offsets[nd];
    b->n_edges = m;
    SAGA_TRY(saga_alloc_array((void **)&gsrc, (size_t)m + 1, sizeof *gsrc, "sampled sources"));
    SAGA_TRY(saga_alloc_array((void **)&b->src, (size_t)m + 1, sizeof *b->src, "sample block"));
    if (weighted)
        SAGA_TRY(saga_alloc_array((void **)&b->weights, (size_t)m + 1, sizeof *b->weights,
                                  "sampled edge weights"));
    if (s->o.weight != SAGA_WEIGHT_NONE)
        SAGA_TRY(saga_alloc_array((void **)&b->values, (size_t)m + 1, sizeof *b->values,
                                  "sample edge values"));

    /* a hop of few destinations runs on this thread: waking the others costs more */
    const int nt = s->scratch ? s->n_threads : 1;
#pragma omp parallel for schedule(dynamic, 64) num_threads(nt) if (nt > 1 && nd > 4096)
    for (int32_t i = 0; i < nd; i++) {
        int64_t *scr =
            s->scratch ? s->scratch + (int64_t)omp_get_thread_num() * s->per_thread : NULL;
        fill_row(s, smp->ids[i], h, batch, scr, gsrc + b->offsets[i],
                 weighted ? b->weights + b->offsets[i] : NULL);
    }

    /* new sources take the next rows in the order of the edges (counted in smp->n_ids at once,
     * so that a failure leaves every marked row listed) */
    for (int64_t e = 0; e < m; e++) {
        int32_t u = gsrc[e];
        if (s->loc[u] < 0) {
            if (smp->n_ids == *ids_cap) {
                int64_t cap = *ids_cap * 2 < s->in.n_rows ? *ids_cap * 2 : s->in.n_rows;
                SAGA_TRY(saga_realloc_array((void **)&smp->ids, (size_t)cap, sizeof(int32_t),
                                            "sample rows"));
                *ids_cap = cap;
            }
            s->loc[u] = smp->n_ids;
            smp->ids[smp->n_ids++] = u;
        }
        b->src[e] = s->loc[u];
    }
    const int32_t n_src = smp->n_ids;
    b->n_src = n_src;

    /* SYMNORM's degrees, then the values */
    SAGA_TRY(saga_alloc_array((void **)&b->deg_in, (size_t)nd + 1, sizeof *b->deg_in, "degrees"));
    SAGA_TRY(
        saga_alloc_zeroed((void **)&b->deg_out, (size_t)n_src + 1, sizeof *b->deg_out, "degrees"));
    if (s->o.degrees == SAGA_SAMPLE_DEGREES_FULL) {
        for (int32_t i = 0; i < nd; i++)
            b->deg_in[i] = full_in(s, smp->ids[i]);
        for (int32_t j = 0; j < n_src; j++)
            b->deg_out[j] = full_out(s, smp->ids[j]);
    } else {
        for (int32_t i = 0; i < nd; i++)
            b->deg_in[i] = (double)(b->offsets[i + 1] - b->offsets[i]);
        for (int64_t e = 0; e < m; e++)
            b->deg_out[b->src[e]] += 1.0;
    }
    sample_block_values(s, b);
fail:
    saga_free(gsrc);
    return st;
}

saga_status saga_sampler_sample(saga_sampler *s, const int32_t *seeds, int64_t n_seeds,
                                uint64_t batch, saga_sample **out) {
    saga_status st = SAGA_OK;
    saga_sample *smp = NULL;
    SAGA_CHECK(s && (seeds || (s->sh && n_seeds == 0)) && out, SAGA_ERR_INVALID_ARG,
               "saga_sampler_sample: sampler, seeds and out must be given");
    *out = NULL;
    if (s->sh) { /* over shards: collective */
        st = saga_alloc_zeroed((void **)&smp, 1, sizeof *smp, "sample");
        if (st == SAGA_OK)
            st = sample_shard(s, seeds, n_seeds, batch, smp);
        else /* the others learn of it where sample_shard agrees first */
            st = saga_comm_agree(s->comm, st);
        if (st < 0)
            goto fail;
        *out = smp;
        return SAGA_OK;
    }
    const int32_t n = s->in.n_rows;
    SAGA_CHECK(n_seeds >= 1 && n_seeds <= n, SAGA_ERR_INVALID_ARG,
               "saga_sampler_sample: %lld seeds for a graph of %d vertices", (long long)n_seeds,
               (int)n);
    SAGA_TRY(saga_alloc_zeroed((void **)&smp, 1, sizeof *smp, "sample"));
    SAGA_TRY(saga_alloc_zeroed((void **)&smp->blocks, (size_t)s->n_layers, sizeof *smp->blocks,
                               "sample blocks"));
    smp->n_layers = s->n_layers;
    int64_t cap = n_seeds * 4 < n ? n_seeds * 4 : n;
    SAGA_TRY(saga_alloc_array((void **)&smp->ids, (size_t)cap, sizeof *smp->ids, "sample rows"));
    for (int64_t i = 0; i < n_seeds; i++) {
        int32_t v = seeds[i];
        SAGA_CHECK(v >= 0 && v < n, SAGA_ERR_INVALID_ARG,
                   "saga_sampler_sample: seed %lld is vertex %d, outside 0..%d", (long long)i,
                   (int)v, (int)n - 1);
        SAGA_CHECK(s->loc[v] < 0, SAGA_ERR_INVALID_ARG,
                   "saga_sampler_sample: seed %lld is vertex %d, given before as seed %d",
                   (long long)i, (int)v, (int)s->loc[v]);
        s->loc[v] = (int32_t)i;
        smp->ids[smp->n_ids++] = v;
    }
    for (int32_t h = 0; h < s->n_layers; h++) {
        SAGA_TRY(hop(s, smp, h, batch, &cap));
        smp->n_edges += smp->blocks[s->n_layers - 1 - h].n_edges;
    }
    smp->all_seeds = n_seeds;
fail:
    /* the rows' marks are cleared for the next sample */
    for (int32_t i = 0; smp && s->loc && i < smp->n_ids; i++)
        s->loc[smp->ids[i]] = -1;
    if (st == SAGA_OK)
        *out = smp;
    else
        saga_sample_free(&smp);
    return st;
}

/* ---- balanced batches ------------------------------------------------------------------------ */

/* Over shards: the halo rows' values of e and r (2 doubles a row) from their owners, who send
 * their own rows' (the shard's send lists). buf: room for 2 x (sent + received) rows. */
static saga_status cost_halo(const saga_sampler *s, double *e, double *r, double *buf,
                             saga_status st) {
    const saga_shard *sh = s->sh;
    const int p = sh->n_shards;
    size_t *sz = NULL;
    if (st == SAGA_OK)
        st = saga_alloc_array((void **)&sz, 4 * (size_t)p, sizeof *sz, "sizes");
    st = saga_comm_agree(s->comm, st); /* no rank waits below for one that failed */
    if (st < 0)
        goto fail;
    const int64_t n_send = sh->send_offsets[p], own = sh->n_own;
    double *sbuf = buf, *rbuf = buf + 2 * n_send;
    for (int64_t i = 0; i < n_send; i++) {
        sbuf[2 * i] = e[sh->send_rows[i]];
        sbuf[2 * i + 1] = r[sh->send_rows[i]];
    }
    for (int q = 0; q < p; q++) {
        sz[q] = (size_t)(sh->send_offsets[q + 1] - sh->send_offsets[q]) * 2 * sizeof(double);
        sz[p + q] = (size_t)sh->send_offsets[q] * 2 * sizeof(double);
        sz[2 * p + q] =
            (size_t)(sh->halo_offsets[q + 1] - sh->halo_offsets[q]) * 2 * sizeof(double);
        sz[3 * p + q] = (size_t)sh->halo_offsets[q] * 2 * sizeof(double);
    }
    st = saga_comm_stop_unless_agreed(s->comm, saga_comm_alltoallv(s->comm, sbuf, sz, sz + p, rbuf,
                                                                   sz + 2 * p, sz + 3 * p, NULL));
    for (int64_t i = 0; st == SAGA_OK && i < sh->n_halo; i++) {
        e[own + i] = rbuf[2 * i];
        r[own + i] = rbuf[2 * i + 1];
    }
fail:
    saga_free(sz);
    return st;
}

saga_status saga_sampler_cost(const saga_sampler *s, double per_edge, double per_row,
                              double *cost) {
    saga_status st = SAGA_OK;
    double *e_next = NULL, *r_next = NULL, *e_cur = NULL, *buf = NULL;
    SAGA_CHECK(s && cost && per_edge >= 0 && per_row >= 0 && per_edge + per_row > 0,
               SAGA_ERR_INVALID_ARG,
               "saga_sampler_cost: sampler and output must be given, the weights >= 0, not both 0");
    const saga_shard *sh = s->sh;
    /* rows costed (own rows over shards), and rows whose costs they read (the halo's too) */
    const int32_t n = s->in.n_rows, n_read = sh ? (int32_t)sh->n_local : n;
    const int32_t *cand = sh ? sh->in_indices : s->in.indices; /* a candidate's row */
    const bool add = s->loops != NULL;
    /* over shards every rank goes through every exchange, whatever fails on it */
    st = saga_alloc_array((void **)&e_next, (size_t)n_read + 1, sizeof *e_next, "seed costs");
    if (st == SAGA_OK)
        st = saga_alloc_array((void **)&r_next, (size_t)n_read + 1, sizeof *r_next, "seed costs");
    if (st == SAGA_OK)
        st = saga_alloc_array((void **)&e_cur, (size_t)n + 1, sizeof *e_cur, "seed costs");
    if (st == SAGA_OK && sh)
        st = saga_alloc_array((void **)&buf,
                              2 * (size_t)(sh->send_offsets[sh->n_shards] + sh->n_halo) + 1,
                              sizeof *buf, "seed costs");
    /* past the last hop: a vertex is one row and adds no edge */
    for (int32_t v = 0; st == SAGA_OK && v < n_read; v++) {
        e_next[v] = 0.0;
        r_next[v] = 1.0;
    }
    for (int32_t h = s->n_layers - 1; h >= 0; h--) {
        const int32_t f = s->fanouts[h];
        /* cost holds the rows of this hop while r_next holds the next hop's */
#pragma omp parallel for schedule(dynamic, 1024) if (st == SAGA_OK)
        for (int32_t v = 0; v < (st == SAGA_OK ? n : 0); v++) {
            const int64_t r0 = s->in.offsets[v], r1 = s->in.offsets[v + 1];
            const int64_t d = r1 - r0 - (add ? s->loops[v] : 0);
            const int64_t k = f < 0 || f >= d ? d : f;
            const int32_t key = sh ? sh->vertex[v] : v; /* the row's vertex */
            double e_reach = 0, r_reach = 0; /* the candidates' costs from the next hop on */
            for (int64_t e = r0; e < r1; e++)
                if (!add || s->in.indices[e] != key) {
                    e_reach += e_next[cand[e]];
                    r_reach += r_next[cand[e]];
                }
            const double p = d > 0 ? (double)k / (double)d : 0.0;
            /* edges: its own at this hop (and its self-loop), its own from the next hop on, and
             * its sampled neighbours'; rows: itself once, then its sampled neighbours' */
            e_cur[v] = (double)k + (add ? 1.0 : 0.0) + e_next[v] + p * e_reach;
            cost[v] = 1.0 + p * r_reach;
        }
        if (st == SAGA_OK) {
            memcpy(e_next, e_cur, (size_t)n * sizeof *e_next);
            memcpy(r_next, cost, (size_t)n * sizeof *r_next);
        }
        if (sh && h > 0) /* the halo's, from their owners, for the hop before */
            st = cost_halo(s, e_next, r_next, buf, st);
        if (st < 0 && (!sh || saga_comm_failure_agreed(s->comm)))
            goto fail;
    }
    if (sh) /* every rank returns what every rank got */
        st = saga_comm_agree(s->comm, st);
    SAGA_TRY(st);
    for (int32_t v = 0; v < n; v++)
        cost[v] = per_edge * e_next[v] + per_row * r_next[v];
fail:
    saga_free(e_next);
    saga_free(r_next);
    saga_free(e_cur);
    saga_free(buf);
    return st;
}

/* A run's sample as seeds join it (saga_sampler_pack): depth[v], the hop that brought row v in
 * (0 for a seed, 255 for none), the rows and edges so far, the rows to clear afterwards. */
typedef struct pack_run {
    uint8_t *depth;
    int32_t *touched;
    int64_t n_touched;
    double edges, rows;
    uint64_t batch;
    int64_t *picks; /* a hop's kept positions, per hop (the draws nest) */
    int32_t widest;
} pack_run;

/* Row v now comes in at hop d (or earlier already): it is a destination from hop d on, so the
 * hops between d and the one that brought it before draw its in-neighbours, which come in a hop
 * later. Each draw is the one saga_sampler_sample makes for v in this batch. */
static void pack_raise(saga_sampler *s, pack_run *r, int32_t v, int d) {
    const int old = r->depth[v];
    if (old <= d)
        return;
    if (old == 255) {
        r->rows += 1;
        r->touched[r->n_touched++] = v;
    }
    r->depth[v] = (uint8_t)d;
    const int hi = old < s->n_layers ? old : s->n_layers;
    for (int h = d; h < hi; h++) {
        row_draw dr;
        sample_draw_row(s, v, v, h, r->batch, s->scratch, &dr);
        r->edges += (double)dr.k + (s->loops ? 1.0 : 0.0);
        if (dr.pick) { /* the next draws reuse the scratch */
            memcpy(r->picks + (int64_t)h * r->widest, dr.pick, (size_t)dr.k * sizeof *dr.pick);
            dr.pick = r->picks + (int64_t)h * r->widest;
        }
        for (int64_t i = 0; i < dr.k; i++)
            pack_raise(s, r, s->in.indices[sample_drawn_at(&dr, i)], h + 1);
    }
}

/* Clears the run's rows for the next one (its counts stay). */
static void pack_clear(pack_run *r) {
    for (int64_t t = 0; t < r->n_touched; t++)
        r->depth[r->touched[t]] = 255;
    r->n_touched = 0;
}

/* Over shards (collective): a run takes seeds while the expected cost of its seeds stays under
 * its share of what the seeds left are expected to cost (saga_sampler_cost over the shards); a
 * run may be empty where the rank has fewer seeds than runs. */
static saga_status pack_shard(saga_sampler *s, const int32_t *seeds, int64_t n_seeds,
                              int64_t n_batches, double per_edge, double per_row, int64_t *first) {
    saga_status st = SAGA_OK;
    double *est = NULL;
    const int64_t own = s->sh->n_own;
    if (n_batches < 1 || n_seeds < 0)
        st = saga_error(SAGA_ERR_INVALID_ARG, "saga_sampler_pack: %lld batches of %lld seeds",
                        (long long)n_batches, (long long)n_seeds);
    for (int64_t i = 0; st == SAGA_OK && i < n_seeds; i++)
        if (seeds[i] < 0 || seeds[i] >= own)
            st = saga_error(SAGA_ERR_INVALID_ARG,
                            "saga_sampler_pack: seed %lld is row %d, not one of the shard's own "
                            "rows 0..%lld",
                            (long long)i, (int)seeds[i], (long long)own - 1);
    if (st == SAGA_OK)
        st = saga_alloc_array((void **)&est, (size_t)own + 1, sizeof *est, "seed costs");
    SAGA_TRY(saga_comm_agree(s->comm, st)); /* the costs are collective */
    SAGA_TRY(saga_sampler_cost(s, per_edge, per_row, est));
    double left = 0;
    for (int64_t i = 0; i < n_seeds; i++)
        left += est[seeds[i]];
    first[0] = 0;
    int64_t i = 0;
    for (int64_t b = 0; b < n_batches; b++) {
        const double target = left / (double)(n_batches - b);
        double run = 0;
        for (int64_t taken = 0;
             i < n_seeds && (b + 1 == n_batches || taken == 0 || run + est[seeds[i]] / 2 < target);
             taken++) {
            run += est[seeds[i]];
            left -= est[seeds[i++]];
        }
        first[b + 1] = i;
    }
fail:
    saga_free(est);
    return st;
}

saga_status saga_sampler_pack(saga_sampler *s, const int32_t *seeds, int64_t n_seeds,
                              int64_t n_batches, uint64_t batch0, double per_edge, double per_row,
                              int64_t *first) {
    saga_status st = SAGA_OK;
    double *est = NULL;
    pack_run r = {0};
    SAGA_CHECK(s && (seeds || (s->sh && n_seeds == 0)) && first, SAGA_ERR_INVALID_ARG,
               "saga_sampler_pack: sampler, seeds and output must be given");
    if (s->sh)
        return pack_shard(s, seeds, n_seeds, n_batches, per_edge, per_row, first);
    SAGA_CHECK(n_batches >= 1 && n_batches <= n_seeds, SAGA_ERR_INVALID_ARG,
               "saga_sampler_pack: %lld batches of %lld seeds", (long long)n_batches,
               (long long)n_seeds);
    const int32_t n = s->in.n_rows;
    for (int64_t i = 0; i < n_seeds; i++)
        SAGA_CHECK(seeds[i] >= 0 && seeds[i] < n, SAGA_ERR_INVALID_ARG,
                   "saga_sampler_pack: seed %lld is vertex %d, outside 0..%d", (long long)i,
                   (int)seeds[i], (int)n - 1);
    SAGA_TRY(saga_alloc_array((void **)&est, (size_t)n + 1, sizeof *est, "seed costs"));
    SAGA_TRY(saga_sampler_cost(s, per_edge, per_row, est));
    SAGA_TRY(saga_alloc_array((void **)&r.depth, (size_t)n + 1, 1, "sample depths"));
    memset(r.depth, 255, (size_t)n);
    SAGA_TRY(saga_alloc_array((void **)&r.touched, (size_t)n + 1, sizeof *r.touched, "rows"));
    r.widest = s->set_cap ? (int32_t)(s->per_thread - s->set_cap) : 0;
    SAGA_TRY(saga_alloc_array((void **)&r.picks, (size_t)s->n_layers * (size_t)r.widest + 1,
                              sizeof *r.picks, "draws"));
    /* pass 1: runs of equal seed counts, measured: what a run holds on average, and how the
     * measure compares with the expectation (which counts rows and edges that seeds share once
     * per seed) */
    double expected = 0;
    for (int64_t b = 0; b < n_batches; b++) {
        r.batch = batch0 + (uint64_t)b;
        for (int64_t i = n_seeds * b / n_batches; i < n_seeds * (b + 1) / n_batches; i++) {
            pack_raise(s, &r, seeds[i], 0);
            expected += est[seeds[i]];
        }
        pack_clear(&r);
    }
    const double exact = per_edge * r.edges + per_row * r.rows;
    const double ratio = expected > 0 ? exact / expected : 1.0;
    /* pass 2: a run takes seeds while it stays under its share of what the seeds left are
     * expected to cost (so a run that ends above or below it moves the later runs' shares), a
     * seed's own share judged by its expectation; as many seeds are left as runs after it, and
     * the last run takes the rest */
    double left = expected;
    first[0] = 0;
    int64_t i = 0;
    for (int64_t b = 0; b < n_batches; b++) {
        const int64_t last = b + 1 == n_batches ? n_seeds : n_seeds - (n_batches - b - 1);
        const double target = ratio * left / (double)(n_batches - b);
        r.batch = batch0 + (uint64_t)b;
        r.edges = r.rows = 0;
        do {
            left -= est[seeds[i]];
            pack_raise(s, &r, seeds[i++], 0);
        } while (i < last &&
                 (b + 1 == n_batches ||
                  per_edge * r.edges + per_row * r.rows + ratio * est[seeds[i]] / 2 < target));
        pack_clear(&r);
        first[b + 1] = i;
    }
fail:
    saga_free(est);
    saga_free(r.depth);
    saga_free(r.touched);
    saga_free(r.picks);
    return st;
}
