/* sample_impl.h - the sampler's state and its draws, shared by one process's sampling (sample.c)
 * and the sampling over shards (sample_shard.c). The draws are inline here, so that a row of a
 * shard draws exactly what the whole graph's row draws: the same key (its vertex), the same
 * candidates in the same order, the same random stream. */
#pragma once

#include "saga_comm.h"
#include "saga_sample.h"
#include "saga_shards.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

enum { SAMPLE_MAX_LAYERS = 64, SAMPLE_MAX_FANOUT = 1 << 24 };

struct saga_sampler {
    const saga_graph *g; /* one process: the graph; NULL over shards */
    /* the in-edges draws are made from: the graph's in-CSR, or over shards the own rows' in-edges
     * with their sources as the graph's vertices (sorted as the graph's rows) */
    saga_csr in, out;
    int32_t n_layers;
    int32_t fanouts[SAMPLE_MAX_LAYERS];
    saga_sampler_opts o;
    int32_t *loc;    /* one process: n, the vertex's row in the sample being built, or -1 */
    int32_t *loops;  /* rows of in: self-loops in each in-row (self_loops ADD), or NULL */
    int64_t set_cap; /* a thread's hash set of picks: a power of two >= 2 x the largest fan-out */
    int64_t per_thread;
    int n_threads;
    int64_t *scratch; /* n_threads x per_thread: the set, then the picks */
    /* over shards (saga_sampler_new_shard): */
    const saga_shard *sh;
    saga_comm *comm;
    int32_t *in_vertex; /* the own rows' in-edges' sources as vertices (in.indices) */
    int64_t *row0;      /* size + 1: rank q owns global rows row0[q] .. row0[q + 1] - 1 */
    int32_t *own_local; /* n_own: the local id of own global row row0[rank] + i */
};

/* ---- random streams ------------------------------------------------------------------------ */

static inline uint64_t sample_mix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* splitmix64: the next draw of stream *s */
static inline uint64_t sample_next64(uint64_t *s) {
    *s += 0x9e3779b97f4a7c15ull;
    uint64_t z = *s;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in 0 .. n - 1 (n >= 1), without bias: Lemire's multiply-shift with rejection. */
static inline uint64_t sample_below(uint64_t *s, uint64_t n) {
    unsigned __int128 m = (unsigned __int128)sample_next64(s) * n;
    uint64_t low = (uint64_t)m;
    if (low < n) {
        uint64_t t = (0 - n) % n;
        while (low < t) {
            m = (unsigned __int128)sample_next64(s) * n;
            low = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

/* Adds t to the set (cap a power of two; keys stored + 1, 0 is empty); false when it was there. */
static inline bool sample_set_add(int64_t *set, int64_t cap, int64_t t) {
    for (uint64_t i = sample_mix64((uint64_t)t) & (uint64_t)(cap - 1);;
         i = (i + 1) & (uint64_t)(cap - 1)) {
        if (set[i] == t + 1)
            return false;
        if (set[i] == 0) {
            set[i] = t + 1;
            return true;
        }
    }
}

static inline int sample_cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* k distinct positions of 0 .. d - 1 (k < d), each k-subset equally likely (Floyd's algorithm),
 * into pick in ascending order. */
static inline void sample_choose(uint64_t *rs, int64_t d, int64_t k, int64_t *set, int64_t cap,
                                 int64_t *pick) {
    memset(set, 0, (size_t)cap * sizeof *set);
    for (int64_t j = d - k, c = 0; j < d; j++, c++) {
        int64_t t = (int64_t)sample_below(rs, (uint64_t)j + 1);
        if (!sample_set_add(set, cap, t)) {
            sample_set_add(set, cap, j);
            t = j;
        }
        pick[c] = t;
    }
    if (k <= 32) {
        for (int64_t i = 1; i < k; i++) {
            int64_t x = pick[i], j = i;
            for (; j > 0 && pick[j - 1] > x; j--)
                pick[j] = pick[j - 1];
            pick[j] = x;
        }
    } else {
        qsort(pick, (size_t)k, sizeof *pick, sample_cmp_i64);
    }
}

/* ---- one destination's draw ------------------------------------------------------------------ */

/* A destination's draw at a hop: its row's first edge, where its self-loops begin and how many
 * (ADD), how many it keeps, and which (pick, ascending positions among the candidates; NULL when
 * it keeps them all). */
typedef struct row_draw {
    int64_t r0, lo, nl, k;
    const int64_t *pick;
} row_draw;

/* The draw of row `row` of s->in, whose vertex is v (the draw's key), at hop h of batch `batch`.
 * scr: the thread's scratch (set_cap + widest fan-out). */
static inline void sample_draw_row(const saga_sampler *s, int32_t row, int32_t v, int32_t hop,
                                   uint64_t batch, int64_t *scr, row_draw *dr) {
    const saga_csr *in = &s->in;
    const int64_t r0 = in->offsets[row], d_all = in->offsets[row + 1] - r0;
    const int64_t nl = s->loops ? s->loops[row] : 0, d = d_all - nl;
    int64_t lo = d_all; /* where the row's self-loops begin (ADD; sorted row) */
    if (nl) {
        int64_t a = 0, b = d_all;
        while (a < b) {
            int64_t m = a + (b - a) / 2;
            if (in->indices[r0 + m] < v)
                a = m + 1;
            else
                b = m;
        }
        lo = a;
    }
    const int32_t fan = s->fanouts[hop];
    *dr = (row_draw){.r0 = r0, .lo = lo, .nl = nl, .k = fan < 0 || fan >= d ? d : fan};
    if (dr->k < d) {
        int64_t *pick = scr + s->set_cap;
        uint64_t rs = sample_mix64(sample_mix64(sample_mix64(s->o.seed) ^ batch) ^
                                   ((uint64_t)(uint32_t)hop << 32 | (uint64_t)(uint32_t)v));
        sample_choose(&rs, d, dr->k, scr, s->set_cap, pick);
        dr->pick = pick;
    }
}

/* The position in s->in of the i-th source a draw keeps. */
static inline int64_t sample_drawn_at(const row_draw *dr, int64_t i) {
    int64_t p = dr->pick ? dr->pick[i] : i;
    return dr->r0 + (p < dr->lo ? p : p + dr->nl); /* past the self-loops */
}

/* The edges row `row` keeps at a hop of fan-out `fanout`, its self-loop (ADD) counted. */
static inline int64_t sample_row_edges(const saga_sampler *s, int32_t row, int32_t fanout) {
    const bool add = s->loops != NULL;
    int64_t d = s->in.offsets[row + 1] - s->in.offsets[row] - (add ? s->loops[row] : 0);
    return (fanout < 0 || fanout >= d ? d : fanout) + (add ? 1 : 0);
}

/* Row `row` (vertex v)'s edges at a hop, in the order a block holds them: calls
 * edge(arg, e, position in s->in or -1 for the added self-loop, weight) for e = 0, 1, ... The
 * added self-loop (ADD) takes its place among the sources by vertex, with the weight of the
 * vertex's own loop, or 1. */
#define SAMPLE_ROW_EDGES(s, row, v, hop, batch, scr, EDGE)                                         \
    do {                                                                                           \
        row_draw dr_;                                                                              \
        sample_draw_row((s), (row), (v), (hop), (batch), (scr), &dr_);                             \
        const float loop_w_ = dr_.nl && (s)->in.weights ? (s)->in.weights[dr_.r0 + dr_.lo] : 1.0f; \
        bool placed_ = (s)->loops == NULL;                                                         \
        int64_t e_ = 0;                                                                            \
        for (int64_t i_ = 0; i_ < dr_.k; i_++) {                                                   \
            const int64_t p_ = sample_drawn_at(&dr_, i_);                                          \
            if (!placed_ && (s)->in.indices[p_] > (v)) {                                           \
                EDGE(e_, -1, loop_w_);                                                             \
                e_++;                                                                              \
                placed_ = true;                                                                    \
            }                                                                                      \
            EDGE(e_, p_, (s)->in.weights ? (s)->in.weights[p_] : 1.0f);                            \
            e_++;                                                                                  \
        }                                                                                          \
        if (!placed_)                                                                              \
            EDGE(e_, -1, loop_w_);                                                                 \
    } while (0)

/* SYMNORM's degrees of a row as a full-graph net places it (saga_place_in_csr): in-edges d_in
 * and out-edges d_out in the whole graph, its self-loops nl (ADD replaces them by one). */
static inline double sample_full_degree(const saga_sampler *s, int64_t d, int64_t nl) {
    return (double)(s->loops ? d - nl + 1 : d);
}

/* A block's values once its degrees are set (deg_in, deg_out): SYMNORM's 1 / sqrt(deg_in(v)
 * deg_out(u)), the graph's weights, or 1. */
static inline void sample_block_values(const saga_sampler *s, saga_sample_block *b) {
    for (int32_t i = 0; i < b->n_dst && b->values; i++)
        for (int64_t e = b->offsets[i]; e < b->offsets[i + 1]; e++)
            b->values[e] = s->o.weight == SAGA_WEIGHT_SYMNORM
                               ? (float)(1.0 / sqrt(b->deg_in[i] * b->deg_out[b->src[e]]))
                           : b->weights ? b->weights[e]
                                        : 1.0f;
}

/* Frees a sample's arrays and the sample (saga_sample_free's body). */
static inline void sample_release(saga_sample *b) {
    if (!b)
        return;
    if (b->blocks)
        for (int32_t l = 0; l < b->n_layers; l++) {
            saga_free(b->blocks[l].offsets);
            saga_free(b->blocks[l].src);
            saga_free(b->blocks[l].values);
            saga_free(b->blocks[l].weights);
            saga_free(b->blocks[l].deg_in);
            saga_free(b->blocks[l].deg_out);
        }
    saga_free(b->blocks);
    saga_free(b->ids);
    saga_free(b->local);
    saga_free(b->x);
    saga_free(b->x_offsets);
    saga_free(b->x_indices);
    saga_free(b->x_values);
    saga_free(b);
}

/* Frees a sampler's arrays and the sampler (saga_sampler_free's body). */
static inline void sampler_release(saga_sampler *s) {
    if (!s)
        return;
    saga_free(s->loc);
    saga_free(s->loops);
    saga_free(s->scratch);
    saga_free(s->in_vertex);
    saga_free(s->row0);
    saga_free(s->own_local);
    saga_free(s);
}

/* Over shards (sample_shard.c): the sample of the batch whose seeds are the own rows seeds[0 ..
 * n_seeds - 1] (local ids), into smp (allocated, zeroed; freed by the caller on failure).
 * Collective over s->comm. */
saga_status sample_shard(saga_sampler *s, const int32_t *seeds, int64_t n_seeds, uint64_t batch,
                         saga_sample *smp);
