/* sample_shard.c - neighbour sampling over shards (saga_sampler_new_shard): each rank samples
 * from its own rows' in-edges and asks the owners of the others.
 *
 * A rank's rows are keyed by their global (renumbered) ids; rank q owns row0[q] .. row0[q+1] - 1
 * (in another order among its local ids: own_local).
 * Hop h: every row the sample holds so far is a destination (as in one process). A destination
 * the rank owns draws here; the others are sent to their owners, which draw them and send back
 * each kept edge's source (its global id, vertex and weight) in the order one process keeps
 * them. The draw is keyed by the destination's vertex and the candidates are its in-edges in the
 * graph's order, so it is one process's draw. New sources take the next rows in edge order. After
 * the hops, every row another rank owns is asked once for its degrees in the whole graph and its
 * input features. Each exchange is an all-to-all over the communicator, after every rank agreed
 * that it got there without failing (saga_comm_agree): a rank that fails takes the others with
 * it, none waits. */
#include "sample_impl.h"

#include <string.h>

/* A kept edge's source as its owner sends it. */
typedef struct sedge {
    int64_t gid;
    int32_t vertex;
    float w;
} sedge;

/* What an owner sends of a row after the hops: its degrees and its feature row's entries. */
typedef struct srow {
    double deg_in, deg_out;
    int64_t nnz;
} srow;

/* One all-to-all: bytes per peer each way and their offsets, the buffers. */
typedef struct xfer {
    size_t *sb, *so, *rb, *ro; /* p each */
    char *send, *recv;
} xfer;

/* The sample being built: its rows by global id (an open-addressing map), their global ids. */
typedef struct build {
    saga_sampler *s;
    saga_sample *smp;
    int p, me;
    int64_t *gid; /* the rows' global ids */
    int64_t cap;  /* of gid, smp->ids, smp->local */
    int64_t *key; /* map: global id + 1, 0 empty */
    int32_t *val; /* map: the row */
    int64_t map_cap;
    size_t *eights, *eight_at; /* the size exchange's 8 bytes per peer */
    xfer x;
    size_t *work; /* 10 x p sizes: a step's two exchanges and their cursors */
    /* per destination of a hop: its owner, and for an own row nothing more */
    int32_t *owner;
} build;

static void xfer_free(xfer *x) {
    saga_free(x->send);
    saga_free(x->recv);
    x->send = x->recv = NULL;
}

/* The owner of global row g: row0[q] <= g < row0[q + 1]. */
static int owner_of(const saga_sampler *s, int p, int64_t g) {
    int a = 0, b = p - 1;
    while (a < b) {
        int m = (a + b + 1) / 2;
        if (s->row0[m] <= g)
            a = m;
        else
            b = m - 1;
    }
    return a;
}

static uint64_t hash_gid(int64_t g) {
    return sample_mix64((uint64_t)g);
}

/* The row of global id g, or -1. */
static int32_t map_get(const build *B, int64_t g) {
    for (uint64_t i = hash_gid(g) & (uint64_t)(B->map_cap - 1);;
         i = (i + 1) & (uint64_t)(B->map_cap - 1)) {
        if (B->key[i] == g + 1)
            return B->val[i];
        if (B->key[i] == 0)
            return -1;
    }
}

static void map_put(build *B, int64_t g, int32_t row) {
    for (uint64_t i = hash_gid(g) & (uint64_t)(B->map_cap - 1);;
         i = (i + 1) & (uint64_t)(B->map_cap - 1))
        if (B->key[i] == 0) {
            B->key[i] = g + 1;
            B->val[i] = row;
            return;
        }
}

/* Room for `rows` rows: the row arrays and a map at most half full. */
static saga_status room(build *B, int64_t rows) {
    saga_status st = SAGA_OK;
    saga_sample *smp = B->smp;
    if (rows > B->cap) {
        int64_t cap = B->cap * 2 > rows ? B->cap * 2 : rows;
        SAGA_TRY(saga_realloc_array((void **)&B->gid, (size_t)cap, sizeof *B->gid, "sample rows"));
        SAGA_TRY(
            saga_realloc_array((void **)&smp->ids, (size_t)cap, sizeof *smp->ids, "sample rows"));
        SAGA_TRY(saga_realloc_array((void **)&smp->local, (size_t)cap, sizeof *smp->local,
                                    "sample rows"));
        B->cap = cap;
    }
    if (2 * rows > B->map_cap) {
        int64_t cap = B->map_cap ? B->map_cap : 64;
        while (2 * rows > cap)
            cap *= 2;
        saga_free(B->key);
        saga_free(B->val);
        B->key = NULL;
        B->val = NULL;
        SAGA_TRY(saga_alloc_zeroed((void **)&B->key, (size_t)cap, sizeof *B->key, "sample rows"));
        SAGA_TRY(saga_alloc_array((void **)&B->val, (size_t)cap, sizeof *B->val, "sample rows"));
        B->map_cap = cap;
        for (int32_t r = 0; r < smp->n_ids; r++)
            map_put(B, B->gid[r], r);
    }
fail:
    return st;
}

/* Row g (vertex v) joins the sample as its next row. */
static void add_row(build *B, int64_t g, int32_t v) {
    saga_sample *smp = B->smp;
    const int64_t r0 = B->s->row0[B->me], own = B->s->row0[B->me + 1] - r0;
    const int32_t r = smp->n_ids++;
    B->gid[r] = g;
    smp->ids[r] = v;
    smp->local[r] = g - r0 >= 0 && g - r0 < own ? B->s->own_local[g - r0] : -1;
    map_put(B, g, r);
}

/* The all-to-all of x after every rank agreed on st: sizes known on both sides (x->rb set) when
 * `known`, else x->sb's sizes go first. x->so and x->ro are made from the sizes. */
static saga_status swap(build *B, xfer *x, bool known, saga_status st) {
    saga_comm *c = B->s->comm;
    st = saga_comm_agree(c, st);
    if (st < 0)
        return st;
    /* a communication that fails here alone leaves the others inside it: every rank stops */
    if (!known)
        SAGA_TRY(saga_comm_stop_unless_agreed(c, saga_comm_alltoallv(c, x->sb, B->eights,
                                                                     B->eight_at, x->rb, B->eights,
                                                                     B->eight_at, NULL)));
    size_t sent = 0, got = 0;
    for (int q = 0; q < B->p; q++) {
        x->so[q] = sent, sent += x->sb[q];
        x->ro[q] = got, got += x->rb[q];
    }
    saga_free(x->recv);
    x->recv = NULL;
    st = saga_alloc_array((void **)&x->recv, got + 1, 1, "rows from other ranks");
    st = saga_comm_agree(c, st);
    if (st < 0)
        return st;
    SAGA_TRY(saga_comm_stop_unless_agreed(
        c, saga_comm_alltoallv(c, x->send, x->sb, x->so, x->recv, x->rb, x->ro, NULL)));
fail:
    return st;
}

/* The global ids of the rows that other ranks own, grouped by owner in row order, into x->send
 * (x->sb: bytes per owner); rows 0 .. n - 1; B->owner gets each row's owner. */
static saga_status ask_owners(build *B, int32_t n) {
    saga_status st = SAGA_OK;
    xfer *x = &B->x;
    memset(x->sb, 0, (size_t)B->p * sizeof *x->sb);
    SAGA_TRY(saga_realloc_array((void **)&B->owner, (size_t)n + 1, sizeof *B->owner, "owners"));
    for (int32_t i = 0; i < n; i++) {
        B->owner[i] = owner_of(B->s, B->p, B->gid[i]);
        if (B->owner[i] != B->me)
            x->sb[B->owner[i]] += sizeof(int64_t);
    }
    size_t *at = x->so, total = 0; /* cursors (swap makes the offsets) */
    for (int q = 0; q < B->p; q++)
        at[q] = total, total += x->sb[q];
    saga_free(x->send);
    x->send = NULL;
    SAGA_TRY(saga_alloc_array((void **)&x->send, total + 1, 1, "rows asked for"));
    for (int32_t i = 0; i < n; i++)
        if (B->owner[i] != B->me) {
            memcpy(x->send + at[B->owner[i]], &B->gid[i], sizeof(int64_t));
            at[B->owner[i]] += sizeof(int64_t);
        }
fail:
    return st;
}

/* The own row of global id g that a peer asked for, checked. */
static saga_status own_row(const build *B, int64_t g, int32_t *u) {
    const int64_t r0 = B->s->row0[B->me], own = B->s->row0[B->me + 1] - r0;
    if (g < r0 || g - r0 >= own)
        return saga_error(SAGA_ERR_INTERNAL,
                          "saga_sampler_sample: rank %d was asked for row %lld, not its own", B->me,
                          (long long)g);
    *u = B->s->own_local[g - r0];
    return SAGA_OK;
}

/* Own row u's edges at hop h into e (its destination's global id g). */
static void draw_edges(const build *B, int32_t u, int64_t g, int32_t h, uint64_t batch, sedge *e) {
    const saga_sampler *s = B->s;
    const saga_shard *sh = s->sh;
#define SHARD_EDGE(k, p, wt)                                                                       \
    do {                                                                                           \
        if ((p) < 0)                                                                               \
            e[k] = (sedge){.gid = g, .vertex = sh->vertex[u], .w = (wt)};                          \
        else                                                                                       \
            e[k] = (sedge){                                                                        \
                .gid = sh->global_id[sh->in_indices[p]], .vertex = s->in.indices[p], .w = (wt)};   \
    } while (0)
    SAMPLE_ROW_EDGES(s, u, sh->vertex[u], h, batch, s->scratch, SHARD_EDGE);
#undef SHARD_EDGE
}

/* Sizes of an answer: for what q asked (x->rb[q] bytes of 8-byte ids) `per` bytes an id back,
 * and as much from q for what was asked of it (x->sb[q]). */
static void answer_sizes(const build *B, size_t per, size_t *sb, size_t *rb) {
    for (int q = 0; q < B->p; q++) {
        sb[q] = B->x.rb[q] / sizeof(int64_t) * per;
        rb[q] = B->x.sb[q] / sizeof(int64_t) * per;
    }
}

/* The bytes of the entries behind runs of counts: for each peer, the sum of n_of(record) over its
 * run of records (bytes `at`, `len` of records of size `rec` in buf) times `entry`. */
static void run_bytes(const char *buf, const size_t *at, const size_t *len, size_t rec,
                      int64_t (*n_of)(const void *), size_t entry, int p, size_t *out) {
    for (int q = 0; q < p; q++) {
        int64_t k = 0;
        for (size_t i = at[q]; i < at[q] + len[q]; i += rec)
            k += n_of(buf + i);
        out[q] = (size_t)k * entry;
    }
}

static int64_t count_of(const void *r) {
    return *(const int64_t *)r;
}

/* Hop h: block n_layers - 1 - h of the destinations (every row so far), its new sources added. */
static saga_status hop(build *B, int32_t h, uint64_t batch) {
    saga_status st = SAGA_OK;
    saga_sampler *s = B->s;
    saga_sample *smp = B->smp;
    xfer *x = &B->x;
    const int p = B->p;
    const int32_t nd = smp->n_ids, fan = s->fanouts[h];
    saga_sample_block *b = &smp->blocks[s->n_layers - 1 - h];
    size_t *w = B->work, *csb = w, *crb = w + p, *cro = w + 3 * p, *esb = w + 4 * p,
           *erb = w + 5 * p, *ero = w + 7 * p, *at_cnt = w + 8 * p, *at_edge = w + 9 * p;
    xfer cnt = {.sb = csb, .rb = crb, .so = w + 2 * p, .ro = cro};   /* edge counts per row */
    xfer edges = {.sb = esb, .rb = erb, .so = w + 6 * p, .ro = ero}; /* their edges */
    sedge *e_all = NULL;
    b->n_dst = nd;

    /* the destinations others own, to their owners; the rows asked of this rank back */
    st = ask_owners(B, nd);
    SAGA_TRY(swap(B, x, false, st));
    const int64_t n_asked = (int64_t)(x->ro[p - 1] + x->rb[p - 1]) / (int64_t)sizeof(int64_t);
    const int64_t *asked = (const int64_t *)x->recv;

    /* this rank's answers: each asked row's edge count, then its edges */
    answer_sizes(B, sizeof(int64_t), csb, crb);
    st = saga_alloc_array((void **)&cnt.send, (size_t)n_asked * sizeof(int64_t) + 1, 1,
                          "edge counts");
    int64_t m_asked = 0;
    for (int64_t i = 0; st == SAGA_OK && i < n_asked; i++) {
        int32_t u = 0;
        st = own_row(B, asked[i], &u);
        ((int64_t *)cnt.send)[i] = st == SAGA_OK ? sample_row_edges(s, u, fan) : 0;
        m_asked += ((int64_t *)cnt.send)[i];
    }
    if (st == SAGA_OK)
        st = saga_alloc_array((void **)&edges.send, (size_t)m_asked * sizeof(sedge) + 1, 1,
                              "sampled edges");
    for (int64_t i = 0, at = 0; st == SAGA_OK && i < n_asked; i++) {
        draw_edges(B, s->own_local[asked[i] - s->row0[B->me]], asked[i], h, batch,
                   (sedge *)edges.send + at);
        at += ((int64_t *)cnt.send)[i];
    }
    SAGA_TRY(swap(B, &cnt, true, st));
    /* the edges: as many each way as the counts say */
    run_bytes(cnt.send, cnt.so, cnt.sb, sizeof(int64_t), count_of, sizeof(sedge), p, esb);
    run_bytes(cnt.recv, cnt.ro, cnt.rb, sizeof(int64_t), count_of, sizeof(sedge), p, erb);
    SAGA_TRY(swap(B, &edges, true, SAGA_OK));

    /* the block, destination by destination: own rows drawn here, the others' from their answers
     * in the order they were asked */
    const int64_t *got_cnt = (const int64_t *)cnt.recv;
    SAGA_TRY(saga_alloc_array((void **)&b->offsets, (size_t)nd + 1, sizeof *b->offsets,
                              "sample block offsets"));
    for (int q = 0; q < p; q++)
        at_cnt[q] = cro[q] / sizeof(int64_t), at_edge[q] = ero[q] / sizeof(sedge);
    b->offsets[0] = 0;
    for (int32_t i = 0; i < nd; i++) {
        const int q = B->owner[i];
        const int64_t k =
            q == B->me ? sample_row_edges(s, smp->local[i], fan) : got_cnt[at_cnt[q]++];
        b->offsets[i + 1] = b->offsets[i] + k;
    }
    const int64_t m = b->offsets[nd];
    b->n_edges = m;
    SAGA_TRY(saga_alloc_array((void **)&e_all, (size_t)m + 1, sizeof *e_all, "sampled edges"));
    for (int32_t i = 0; i < nd; i++) {
        const int q = B->owner[i];
        sedge *e = e_all + b->offsets[i];
        const int64_t k = b->offsets[i + 1] - b->offsets[i];
        if (q == B->me) {
            draw_edges(B, smp->local[i], B->gid[i], h, batch, e);
        } else {
            memcpy(e, (const sedge *)edges.recv + at_edge[q], (size_t)k * sizeof *e);
            at_edge[q] += (size_t)k;
        }
    }
    SAGA_TRY(saga_alloc_array((void **)&b->src, (size_t)m + 1, sizeof *b->src, "sample block"));
    if (s->in.weights)
        SAGA_TRY(saga_alloc_array((void **)&b->weights, (size_t)m + 1, sizeof *b->weights,
                                  "sampled edge weights"));
    if (s->o.weight != SAGA_WEIGHT_NONE)
        SAGA_TRY(saga_alloc_array((void **)&b->values, (size_t)m + 1, sizeof *b->values,
                                  "sample edge values"));
    /* new sources take the next rows in the order of the edges */
    for (int64_t e = 0; e < m; e++) {
        int32_t r = map_get(B, e_all[e].gid);
        if (r < 0) {
            SAGA_TRY(room(B, (int64_t)smp->n_ids + 1));
            r = smp->n_ids;
            add_row(B, e_all[e].gid, e_all[e].vertex);
        }
        b->src[e] = r;
        if (b->weights)
            b->weights[e] = e_all[e].w;
    }
    b->n_src = smp->n_ids;
fail:
    saga_free(e_all);
    xfer_free(&cnt);
    xfer_free(&edges);
    return st;
}

/* An own row's degrees in the whole graph and its feature entries (dense: the columns). */
static srow own_srow(const saga_sampler *s, int32_t u) {
    const saga_shard *sh = s->sh;
    const int64_t nl = s->loops ? s->loops[u] : 0;
    return (srow){.deg_in = sample_full_degree(s, sh->in_offsets[u + 1] - sh->in_offsets[u], nl),
                  .deg_out = sample_full_degree(s, sh->out_degree[u], nl),
                  .nnz = sh->feature_offsets ? sh->feature_offsets[u + 1] - sh->feature_offsets[u]
                                             : sh->feature_cols};
}

/* A CSR feature entry as sent. */
typedef struct sentry {
    int32_t col;
    float val;
} sentry;

/* Own row u's feature entries into e (dense: every column). */
static void own_entries(const saga_shard *sh, int32_t u, float *dense, sentry *e) {
    if (!sh->feature_offsets) {
        memcpy(dense, sh->features + (int64_t)u * sh->feature_cols,
               (size_t)sh->feature_cols * sizeof *dense);
        return;
    }
    for (int64_t k = sh->feature_offsets[u], j = 0; k < sh->feature_offsets[u + 1]; k++, j++)
        e[j] = (sentry){.col = sh->feature_indices[k], .val = sh->feature_values[k]};
}

static int64_t nnz_of(const void *r) {
    return ((const srow *)r)->nnz;
}

/* The blocks' degrees (FULL: the rows' records; SAMPLED: counted in the block) and values. */
static saga_status block_degrees(saga_sampler *s, saga_sample *smp, const srow *rows) {
    saga_status st = SAGA_OK;
    for (int32_t l = 0; l < smp->n_layers; l++) {
        saga_sample_block *b = &smp->blocks[l];
        SAGA_TRY(saga_alloc_array((void **)&b->deg_in, (size_t)b->n_dst + 1, sizeof *b->deg_in,
                                  "degrees"));
        SAGA_TRY(saga_alloc_zeroed((void **)&b->deg_out, (size_t)b->n_src + 1, sizeof *b->deg_out,
                                   "degrees"));
        if (s->o.degrees == SAGA_SAMPLE_DEGREES_FULL) {
            for (int32_t i = 0; i < b->n_dst; i++)
                b->deg_in[i] = rows[i].deg_in;
            for (int32_t j = 0; j < b->n_src; j++)
                b->deg_out[j] = rows[j].deg_out;
        } else {
            for (int32_t i = 0; i < b->n_dst; i++)
                b->deg_in[i] = (double)(b->offsets[i + 1] - b->offsets[i]);
            for (int64_t e = 0; e < b->n_edges; e++)
                b->deg_out[b->src[e]] += 1.0;
        }
        sample_block_values(s, b);
    }
fail:
    return st;
}

/* The sample's input rows as the shard holds them (dense or a CSR): own rows from the shard, the
 * others' entries from ent (x_at: each peer's next entry). */
static saga_status input_rows(build *B, const srow *rows, const char *ent, size_t *at) {
    saga_status st = SAGA_OK;
    const saga_shard *sh = B->s->sh;
    saga_sample *smp = B->smp;
    const int32_t n = smp->n_ids;
    const int64_t F = sh->feature_cols;
    smp->x_cols = F;
    if (!sh->feature_offsets) {
        SAGA_TRY(saga_alloc_array((void **)&smp->x, (size_t)n * (size_t)F + 1, sizeof *smp->x,
                                  "the sample's input rows"));
        for (int32_t i = 0; i < n; i++) {
            const int q = B->owner[i];
            float *row = smp->x + (int64_t)i * F;
            if (q == B->me) {
                own_entries(sh, smp->local[i], row, NULL);
            } else {
                memcpy(row, (const float *)ent + at[q], (size_t)F * sizeof *row);
                at[q] += (size_t)F;
            }
        }
        return SAGA_OK;
    }
    int64_t nnz = 0;
    for (int32_t i = 0; i < n; i++)
        nnz += rows[i].nnz;
    SAGA_TRY(saga_alloc_array((void **)&smp->x_offsets, (size_t)n + 1, sizeof *smp->x_offsets,
                              "the sample's input rows"));
    SAGA_TRY(saga_alloc_array((void **)&smp->x_indices, (size_t)nnz + 1, sizeof *smp->x_indices,
                              "the sample's input rows"));
    SAGA_TRY(saga_alloc_array((void **)&smp->x_values, (size_t)nnz + 1, sizeof *smp->x_values,
                              "the sample's input rows"));
    smp->x_offsets[0] = 0;
    for (int32_t i = 0; i < n; i++) {
        const int q = B->owner[i];
        const int64_t a = smp->x_offsets[i], k = rows[i].nnz;
        smp->x_offsets[i + 1] = a + k;
        if (q == B->me) {
            const int64_t f0 = sh->feature_offsets[smp->local[i]];
            memcpy(smp->x_indices + a, sh->feature_indices + f0, (size_t)k * sizeof(int32_t));
            memcpy(smp->x_values + a, sh->feature_values + f0, (size_t)k * sizeof(float));
        } else {
            const sentry *e = (const sentry *)ent + at[q];
            for (int64_t j = 0; j < k; j++) {
                smp->x_indices[a + j] = e[j].col;
                smp->x_values[a + j] = e[j].val;
            }
            at[q] += (size_t)k;
        }
    }
fail:
    return st;
}

/* After the hops: every row's degrees in the whole graph and input features, from their owners;
 * the blocks' degrees and values. */
static saga_status rows_from_owners(build *B) {
    saga_status st = SAGA_OK;
    saga_sampler *s = B->s;
    const saga_shard *sh = s->sh;
    saga_sample *smp = B->smp;
    xfer *x = &B->x;
    const int p = B->p;
    const int32_t n = smp->n_ids;
    const bool csr = sh->feature_offsets != NULL;
    const size_t entry = csr ? sizeof(sentry) : sizeof(float);
    size_t *w = B->work, *rsb = w, *rrb = w + p, *rro = w + 3 * p, *esb = w + 4 * p,
           *erb = w + 5 * p, *ero = w + 7 * p, *at_rec = w + 8 * p, *at_ent = w + 9 * p;
    xfer recs = {.sb = rsb, .rb = rrb, .so = w + 2 * p, .ro = rro}; /* a record per row asked */
    xfer ent = {.sb = esb, .rb = erb, .so = w + 6 * p, .ro = ero};  /* their feature entries */
    srow *rows = NULL;
    st = ask_owners(B, n);
    SAGA_TRY(swap(B, x, false, st));
    const int64_t n_asked = (int64_t)(x->ro[p - 1] + x->rb[p - 1]) / (int64_t)sizeof(int64_t);
    const int64_t *asked = (const int64_t *)x->recv;
    /* the answers: a record per asked row, then its feature entries */
    answer_sizes(B, sizeof(srow), rsb, rrb);
    st = saga_alloc_array((void **)&recs.send, (size_t)n_asked * sizeof(srow) + 1, 1, "rows asked");
    srow *ans = (srow *)recs.send;
    size_t pay = 0;
    for (int64_t i = 0; st == SAGA_OK && i < n_asked; i++) {
        int32_t u = 0;
        st = own_row(B, asked[i], &u);
        if (st == SAGA_OK)
            ans[i] = own_srow(s, u), pay += (size_t)ans[i].nnz * entry;
    }
    if (st == SAGA_OK)
        st = saga_alloc_array((void **)&ent.send, pay + 1, 1, "feature rows asked");
    for (int64_t i = 0, at = 0; st == SAGA_OK && i < n_asked; at += ans[i].nnz, i++) {
        const int32_t u = s->own_local[asked[i] - s->row0[B->me]];
        own_entries(sh, u, (float *)ent.send + (csr ? 0 : at), (sentry *)ent.send + (csr ? at : 0));
    }
    SAGA_TRY(swap(B, &recs, true, st));
    run_bytes(recs.send, recs.so, recs.sb, sizeof(srow), nnz_of, entry, p, esb);
    run_bytes(recs.recv, recs.ro, recs.rb, sizeof(srow), nnz_of, entry, p, erb);
    SAGA_TRY(swap(B, &ent, true, SAGA_OK));

    /* each row's record: own rows here, the others' in the order asked */
    SAGA_TRY(saga_alloc_array((void **)&rows, (size_t)n + 1, sizeof *rows, "rows"));
    for (int q = 0; q < p; q++)
        at_rec[q] = rro[q] / sizeof(srow), at_ent[q] = ero[q] / entry;
    for (int32_t i = 0; i < n; i++)
        rows[i] = B->owner[i] == B->me ? own_srow(s, smp->local[i])
                                       : ((const srow *)recs.recv)[at_rec[B->owner[i]]++];
    SAGA_TRY(block_degrees(s, smp, rows));
    if (sh->feature_cols > 0)
        SAGA_TRY(input_rows(B, rows, ent.recv, at_ent));
fail:
    saga_free(rows);
    xfer_free(&recs);
    xfer_free(&ent);
    return st;
}

saga_status sample_shard(saga_sampler *s, const int32_t *seeds, int64_t n_seeds, uint64_t batch,
                         saga_sample *smp) {
    saga_status st = SAGA_OK;
    const saga_shard *sh = s->sh;
    build B = {.s = s, .smp = smp, .p = saga_comm_size(s->comm), .me = saga_comm_rank(s->comm)};
    const int p = B.p;
    smp->n_layers = s->n_layers;
    st = saga_alloc_zeroed((void **)&smp->blocks, (size_t)s->n_layers, sizeof *smp->blocks,
                           "sample blocks");
    if (st == SAGA_OK) /* the size exchange's, the requests', a step's */
        st = saga_alloc_array((void **)&B.eights, 16 * (size_t)p, sizeof *B.eights, "sizes");
    if (st == SAGA_OK) {
        B.eight_at = B.eights + p;
        B.x = (xfer){.sb = B.eights + 2 * p,
                     .so = B.eights + 3 * p,
                     .rb = B.eights + 4 * p,
                     .ro = B.eights + 5 * p};
        B.work = B.eights + 6 * p;
        for (int q = 0; q < p; q++)
            B.eights[q] = sizeof(size_t), B.eight_at[q] = (size_t)q * sizeof(size_t);
    }
    if (st == SAGA_OK && (n_seeds < 0 || n_seeds > sh->n_own))
        st = saga_error(SAGA_ERR_INVALID_ARG,
                        "saga_sampler_sample: %lld seeds for a shard of %lld own rows",
                        (long long)n_seeds, (long long)sh->n_own);
    if (st == SAGA_OK)
        st = room(&B, n_seeds * 4 + 16);
    for (int64_t i = 0; st == SAGA_OK && i < n_seeds; i++) {
        const int32_t u = seeds[i];
        if (u < 0 || u >= sh->n_own)
            st = saga_error(SAGA_ERR_INVALID_ARG,
                            "saga_sampler_sample: seed %lld is row %d, not one of the shard's own "
                            "rows 0..%lld",
                            (long long)i, (int)u, (long long)sh->n_own - 1);
        else if (map_get(&B, sh->global_id[u]) >= 0)
            st = saga_error(SAGA_ERR_INVALID_ARG,
                            "saga_sampler_sample: seed %lld is row %d, given before as seed %d",
                            (long long)i, (int)u, (int)map_get(&B, sh->global_id[u]));
        else
            add_row(&B, sh->global_id[u], sh->vertex[u]);
    }
    /* the batch's seeds over every rank */
    st = saga_comm_agree(s->comm, st);
    smp->all_seeds = n_seeds;
    if (st == SAGA_OK)
        st = saga_comm_stop_unless_agreed(
            s->comm,
            saga_comm_allreduce(s->comm, &smp->all_seeds, 1, SAGA_I64, SAGA_COMM_SUM, NULL));
    for (int32_t h = 0; st == SAGA_OK && h < s->n_layers; h++) {
        st = hop(&B, h, batch);
        if (st == SAGA_OK)
            smp->n_edges += smp->blocks[s->n_layers - 1 - h].n_edges;
    }
    if (st == SAGA_OK)
        st = rows_from_owners(&B);
    /* every rank returns what every rank got */
    if (!saga_comm_failure_agreed(s->comm))
        st = saga_comm_agree(s->comm, st);
    saga_free(B.gid);
    saga_free(B.key);
    saga_free(B.val);
    saga_free(B.eights);
    saga_free(B.owner);
    xfer_free(&B.x);
    return st;
}
