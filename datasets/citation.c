/* citation.c - a synthetic citation graph for node classification: a degree-corrected stochastic
 * block model with class-topic bag-of-words features and a Planetoid-style split. */
#include "saga_datasets.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

static const uint64_t GOLDEN = 0x9E3779B97F4A7C15ull;

/* Independent random streams, one per kind of draw, so that changing how many draws one stage
 * makes never shifts another stage's. */
enum {
    STREAM_CLASS_PERM = 1,
    STREAM_THETA,
    STREAM_EDGE,
    STREAM_WORD_PERM,
    STREAM_BACKGROUND_PERM,
    STREAM_WORDS,
    STREAM_SPLIT,
};

/* A propensity cap: without one, a power law with exponent 2.5 over 100,000 vertices gives one
 * vertex a few thousand times the mean degree, which real citation graphs do not have. */
static const double THETA_CAP = 50.0;

saga_citation_params saga_citation_params_defaults(void) {
    return (saga_citation_params){.n_vertices = 2708,
                                  .n_classes = 7,
                                  .avg_degree = 3.9,
                                  .n_features = 1433,
                                  .homophily = 0.8,
                                  .degree_exponent = 2.5,
                                  .words_per_vertex = 20,
                                  .topic_share = 0.15,
                                  .train_per_class = 20,
                                  .n_val = 500,
                                  .n_test = 1000,
                                  .seed = 1};
}

/* splitmix64's finaliser: a bijective 64-bit mix with good avalanche. */
static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t stream_key(uint64_t seed, int stream) {
    return mix64(mix64(seed ^ 0x43495441544E3031ull) + (uint64_t)stream * GOLDEN);
}

/* Draw i of a stream: 64 random bits. */
static inline uint64_t bits(uint64_t key, uint64_t i) {
    return mix64(key + (i + 1) * GOLDEN);
}

/* Uniform in [0, 1) with 53 bits. */
static inline double uniform(uint64_t key, uint64_t i) {
    return (double)(bits(key, i) >> 11) * (1.0 / 9007199254740992.0);
}

/* Uniform integer in [0, n), n < 2^32, by multiply-shift (bias below 2^-32). */
static inline uint32_t below(uint64_t key, uint64_t i, uint32_t n) {
    return (uint32_t)(((bits(key, i) >> 32) * (uint64_t)n) >> 32);
}

/* A seeded random permutation of 0..n-1 (Fisher-Yates). */
static saga_status permutation(int32_t **out, int32_t n, uint64_t key, const char *what) {
    int32_t *p = NULL;
    saga_status st = saga_alloc_array((void **)&p, (size_t)n, sizeof *p, what);
    if (st < 0)
        return st;
    for (int32_t i = 0; i < n; i++)
        p[i] = i;
    for (int32_t i = n - 1; i > 0; i--) {
        int32_t j = (int32_t)below(key, (uint64_t)i, (uint32_t)i + 1);
        int32_t t = p[i];
        p[i] = p[j];
        p[j] = t;
    }
    *out = p;
    return SAGA_OK;
}

/* First index i in [lo, hi) with cum[i] > x; cum ascending and x < cum[hi - 1]. */
static inline int64_t upper_bound(const double *cum, int64_t lo, int64_t hi, double x) {
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (cum[mid] > x)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

static saga_status check_params(const saga_citation_params *p) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(p != NULL, SAGA_ERR_INVALID_ARG, "citation: parameters are NULL");
    SAGA_CHECK(p->n_classes >= 2 && p->n_classes <= 1024, SAGA_ERR_INVALID_ARG,
               "citation: classes must be in 2..1024, got %d", p->n_classes);
    SAGA_CHECK(p->n_vertices >= 2 * p->n_classes && p->n_vertices <= (1 << 30),
               SAGA_ERR_INVALID_ARG,
               "citation: vertices must be in 2 * classes (%d) .. 2^30, got %d", 2 * p->n_classes,
               p->n_vertices);
    SAGA_CHECK(p->n_features >= p->n_classes && p->n_features <= (1 << 24), SAGA_ERR_INVALID_ARG,
               "citation: features must be in classes (%d) .. 2^24, got %d", p->n_classes,
               p->n_features);
    SAGA_CHECK(isfinite(p->avg_degree) && p->avg_degree > 0, SAGA_ERR_INVALID_ARG,
               "citation: average degree must be positive, got %g", p->avg_degree);
    double m = floor((double)p->n_vertices * p->avg_degree / 2 + 0.5);
    double pairs = (double)p->n_vertices * (p->n_vertices - 1) / 2;
    SAGA_CHECK(m >= 1 && m <= pairs / 2, SAGA_ERR_INVALID_ARG,
               "citation: average degree %g gives %.0f edges; it must give at least 1 and at most "
               "half of the %.0f vertex pairs",
               p->avg_degree, m, pairs);
    SAGA_CHECK(isfinite(p->homophily) && p->homophily >= 0 && p->homophily <= 1,
               SAGA_ERR_INVALID_ARG, "citation: homophily must be in [0, 1], got %g", p->homophily);
    SAGA_CHECK(isfinite(p->degree_exponent) && p->degree_exponent > 1 && p->degree_exponent <= 100,
               SAGA_ERR_INVALID_ARG, "citation: degree exponent must be in (1, 100], got %g",
               p->degree_exponent);
    SAGA_CHECK(p->words_per_vertex >= 1 && p->words_per_vertex <= 100000, SAGA_ERR_INVALID_ARG,
               "citation: words per vertex must be in 1..100000, got %d", p->words_per_vertex);
    SAGA_CHECK(isfinite(p->topic_share) && p->topic_share >= 0 && p->topic_share <= 1,
               SAGA_ERR_INVALID_ARG, "citation: topic share must be in [0, 1], got %g",
               p->topic_share);
    SAGA_CHECK(p->train_per_class >= 1 && p->n_val >= 0 && p->n_test >= 0, SAGA_ERR_INVALID_ARG,
               "citation: split sizes must be positive (train per class %d, val %d, test %d)",
               p->train_per_class, p->n_val, p->n_test);
fail:
    return st;
}

void saga_citation_free(saga_citation **c) {
    if (!c || !*c)
        return;
    saga_citation *x = *c;
    saga_free(x->edge_u);
    saga_free(x->edge_v);
    saga_free(x->feat_offsets);
    saga_free(x->feat_index);
    saga_free(x->labels);
    saga_free(x->train);
    saga_free(x->val);
    saga_free(x->test);
    saga_free(x);
    *c = NULL;
}

/* ---- labels ------------------------------------------------------------------------------- */

/* Class sizes proportional to 1 / (1 + 2c / C) (the largest class three times the smallest, as
 * in Cora), at least one vertex each; vertices get their class through a seeded permutation so
 * that ids say nothing about classes. by_class lists the vertices class by class (ascending
 * within a class), class_off[c] .. class_off[c + 1] being class c's range. */
static saga_status make_labels(saga_citation *out, int32_t *by_class, int64_t *class_off,
                               const saga_citation_params *p) {
    saga_status st = SAGA_OK;
    int32_t *perm = NULL;
    int32_t n = p->n_vertices, C = p->n_classes;
    double total = 0;
    for (int32_t c = 0; c < C; c++)
        total += 1.0 / (1.0 + 2.0 * c / C);
    int64_t assigned = 0;
    for (int32_t c = 0; c < C; c++) {
        int64_t size = 1 + (int64_t)floor((double)(n - C) * (1.0 / (1.0 + 2.0 * c / C)) / total);
        class_off[c + 1] = size;
        assigned += size;
    }
    for (int32_t c = 0; assigned < n; c = (c + 1) % C, assigned++)
        class_off[c + 1]++;
    class_off[0] = 0;
    for (int32_t c = 0; c < C; c++)
        class_off[c + 1] += class_off[c];

    SAGA_TRY(permutation(&perm, n, stream_key(p->seed, STREAM_CLASS_PERM), "citation labels"));
    for (int32_t c = 0; c < C; c++)
        for (int64_t i = class_off[c]; i < class_off[c + 1]; i++)
            out->labels[perm[i]] = c;
    /* by_class in ascending vertex order within each class: a counting pass over the labels. */
    int64_t *next = NULL;
    SAGA_TRY(saga_alloc_array((void **)&next, (size_t)C, sizeof *next, "citation class cursor"));
    memcpy(next, class_off, (size_t)C * sizeof *next);
    for (int32_t v = 0; v < n; v++)
        by_class[next[out->labels[v]]++] = v;
    saga_free(next);
fail:
    saga_free(perm);
    return st;
}

/* ---- edges -------------------------------------------------------------------------------- */

/* Open-addressing set of undirected pairs packed as (min << 32) | max. */
typedef struct pair_set {
    uint64_t *slots;
    uint64_t mask;
} pair_set;

static const uint64_t EMPTY = ~0ull;

/* Inserts key; false when it was already there. */
static bool pair_set_add(pair_set *s, uint64_t key) {
    uint64_t i = mix64(key) & s->mask;
    while (s->slots[i] != EMPTY) {
        if (s->slots[i] == key)
            return false;
        i = (i + 1) & s->mask;
    }
    s->slots[i] = key;
    return true;
}

/* LSD radix sort of n keys by 16-bit digits; tmp (n keys) and hist (65537 counts) are scratch. */
static void radix_sort_u64(uint64_t *keys, uint64_t *tmp, int64_t *hist, int64_t n) {
    for (int shift = 0; shift < 64; shift += 16) {
        memset(hist, 0, 65537 * sizeof *hist);
        for (int64_t i = 0; i < n; i++)
            hist[((keys[i] >> shift) & 0xFFFF) + 1]++;
        if (hist[1] == n)
            continue; /* every key has a zero digit here: nothing moves */
        for (int d = 0; d < 65536; d++)
            hist[d + 1] += hist[d];
        for (int64_t i = 0; i < n; i++)
            tmp[hist[(keys[i] >> shift) & 0xFFFF]++] = keys[i];
        memcpy(keys, tmp, (size_t)n * sizeof *keys);
    }
}

/* Everything the edge sampler reads. */
typedef struct edge_model {
    int32_t n;
    const int32_t *labels;
    const int32_t *by_class;
    const int64_t *class_off;
    const double *cum; /* cumulative propensity over by_class order */
    double total;
    double homophily;
    uint64_t key;
} edge_model;

/* Propensity mass before position i of by_class. */
static inline double cum_before(const edge_model *e, int64_t i) {
    return i ? e->cum[i - 1] : 0.0;
}

/* A vertex drawn in proportion to its propensity (draw a of the edge stream). */
static int32_t pick_any(const edge_model *e, uint64_t a) {
    int64_t i = upper_bound(e->cum, 0, e->n, uniform(e->key, 4 * a) * e->total);
    return e->by_class[i < e->n ? i : e->n - 1];
}

/* A partner for u on attempt a: with probability homophily a vertex of u's class, else one of
 * another class, in proportion to the propensities. A class of one vertex has no partner inside,
 * so its edges always leave it. */
static int32_t pick_partner(const edge_model *e, int32_t u, uint64_t a) {
    int32_t c = e->labels[u];
    int64_t lo = e->class_off[c], hi = e->class_off[c + 1];
    double w_lo = cum_before(e, lo), w_hi = e->cum[hi - 1];
    double y = uniform(e->key, 4 * a + 2);
    int64_t i;
    if (hi - lo > 1 && uniform(e->key, 4 * a + 1) < e->homophily) {
        i = upper_bound(e->cum, lo, hi, w_lo + y * (w_hi - w_lo));
        if (i >= hi)
            i = hi - 1;
    } else {
        /* Draw over the other classes' mass and step over this class's range. */
        double x = y * (e->total - (w_hi - w_lo));
        if (x < w_lo) {
            i = upper_bound(e->cum, 0, lo, x);
            if (i >= lo)
                i = lo - 1;
        } else {
            i = upper_bound(e->cum, hi, e->n, x + (w_hi - w_lo));
            if (i >= e->n)
                i = e->n - 1;
        }
    }
    return e->by_class[i];
}

/* Draws the edges: first one per vertex (so that no vertex is isolated when there are at least
 * as many edges as vertices), then edges whose first end is drawn by propensity. A self-loop or a
 * pair already drawn is redrawn; the attempt limit only guards against parameters that leave
 * too few distinct pairs. The result is sorted by (u, v). */
static saga_status make_edges(saga_citation *out, const int32_t *by_class, const int64_t *class_off,
                              const saga_citation_params *p) {
    saga_status st = SAGA_OK;
    int32_t n = p->n_vertices;
    int64_t m = (int64_t)floor((double)n * p->avg_degree / 2 + 0.5);
    double *theta = NULL, *cum = NULL;
    uint64_t *keys = NULL, *tmp = NULL;
    int64_t *hist = NULL;
    pair_set set = {0};

    SAGA_TRY(saga_alloc_array((void **)&theta, (size_t)n, sizeof *theta, "citation propensities"));
    SAGA_TRY(saga_alloc_array((void **)&cum, (size_t)n, sizeof *cum, "citation propensities"));
    uint64_t tkey = stream_key(p->seed, STREAM_THETA);
    /* Pareto with minimum 1: P(theta > t) = t^-(exponent - 1). */
    for (int32_t v = 0; v < n; v++) {
        double t = pow(1.0 - uniform(tkey, (uint64_t)v), -1.0 / (p->degree_exponent - 1.0));
        theta[v] = t < THETA_CAP ? t : THETA_CAP;
    }
    double acc = 0;
    for (int64_t i = 0; i < n; i++)
        cum[i] = acc += theta[by_class[i]];

    uint64_t cap = 16;
    while (cap < 2 * (uint64_t)m)
        cap <<= 1;
    SAGA_TRY(
        saga_alloc_array((void **)&set.slots, (size_t)cap, sizeof *set.slots, "citation edge set"));
    memset(set.slots, 0xFF, (size_t)cap * sizeof *set.slots);
    set.mask = cap - 1;
    SAGA_TRY(saga_alloc_array((void **)&keys, (size_t)m, sizeof *keys, "citation edges"));

    edge_model e = {.n = n,
                    .labels = out->labels,
                    .by_class = by_class,
                    .class_off = class_off,
                    .cum = cum,
                    .total = acc,
                    .homophily = p->homophily,
                    .key = stream_key(p->seed, STREAM_EDGE)};
    int64_t have = 0;
    uint64_t a = 0, limit = 64 * (uint64_t)m + 4096;
    for (int32_t v = 0; v < n && have < m; v++) {
        /* A few tries per vertex: its own edge may repeat one it already got from another. */
        for (int t = 0; t < 8; t++, a++) {
            int32_t w = pick_partner(&e, v, a);
            if (w == v)
                continue;
            uint64_t key =
                v < w ? (uint64_t)v << 32 | (uint64_t)w : (uint64_t)w << 32 | (uint64_t)v;
            if (pair_set_add(&set, key)) {
                keys[have++] = key;
                a++;
                break;
            }
        }
    }
    for (; have < m && a < limit; a++) {
        int32_t u = pick_any(&e, a);
        int32_t w = pick_partner(&e, u, a);
        if (w == u)
            continue;
        uint64_t key = u < w ? (uint64_t)u << 32 | (uint64_t)w : (uint64_t)w << 32 | (uint64_t)u;
        if (pair_set_add(&set, key))
            keys[have++] = key;
    }
    SAGA_CHECK(have == m, SAGA_ERR_INVALID_ARG,
               "citation: found only %lld distinct edges of %lld after %llu draws; lower the "
               "degree or the homophily, or add vertices",
               (long long)have, (long long)m, (unsigned long long)a);
    saga_free(set.slots);
    set.slots = NULL;

    SAGA_TRY(saga_alloc_array((void **)&tmp, (size_t)m, sizeof *tmp, "citation edge sort"));
    SAGA_TRY(saga_alloc_array((void **)&hist, 65537, sizeof *hist, "citation edge sort"));
    radix_sort_u64(keys, tmp, hist, m);
    SAGA_TRY(
        saga_alloc_array((void **)&out->edge_u, (size_t)m, sizeof *out->edge_u, "citation edges"));
    SAGA_TRY(
        saga_alloc_array((void **)&out->edge_v, (size_t)m, sizeof *out->edge_v, "citation edges"));
    for (int64_t k = 0; k < m; k++) {
        out->edge_u[k] = (int32_t)(keys[k] >> 32);
        out->edge_v[k] = (int32_t)(keys[k] & 0xFFFFFFFFu);
    }
    out->n_edges = m;
fail:
    saga_free(theta);
    saga_free(cum);
    saga_free(set.slots);
    saga_free(keys);
    saga_free(tmp);
    saga_free(hist);
    return st;
}

/* ---- features ----------------------------------------------------------------------------- */

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Words of class c are those at positions c, c + C, c + 2C, ... of a seeded permutation of the
 * vocabulary, with Zipf weight 1 / (rank + 1); the background is Zipf over the whole vocabulary
 * in another seeded order. */
static saga_status make_features(saga_citation *out, const saga_citation_params *p) {
    saga_status st = SAGA_OK;
    int32_t n = p->n_vertices, C = p->n_classes, F = p->n_features;
    int32_t *topic_order = NULL, *bg_order = NULL, *words = NULL;
    double *zipf = NULL;
    SAGA_TRY(
        permutation(&topic_order, F, stream_key(p->seed, STREAM_WORD_PERM), "citation vocabulary"));
    SAGA_TRY(permutation(&bg_order, F, stream_key(p->seed, STREAM_BACKGROUND_PERM),
                         "citation vocabulary"));
    /* zipf[r] = sum of 1 / (i + 1) for i <= r: a class's topic uses a prefix of it. */
    SAGA_TRY(saga_alloc_array((void **)&zipf, (size_t)F, sizeof *zipf, "citation word weights"));
    double acc = 0;
    for (int32_t r = 0; r < F; r++)
        zipf[r] = acc += 1.0 / (r + 1.0);

    int32_t most = (int32_t)((3 * (int64_t)p->words_per_vertex + 1) / 2);
    SAGA_TRY(saga_alloc_array((void **)&words, (size_t)most, sizeof *words, "citation words"));
    SAGA_TRY(saga_alloc_array((void **)&out->feat_offsets, (size_t)n + 1, sizeof *out->feat_offsets,
                              "citation feature offsets"));
    int64_t cap = (int64_t)n * most;
    SAGA_TRY(saga_alloc_array((void **)&out->feat_index, (size_t)cap, sizeof *out->feat_index,
                              "citation features"));
    uint64_t key = stream_key(p->seed, STREAM_WORDS);
    uint64_t d = 0;
    int64_t nnz = 0;
    out->feat_offsets[0] = 0;
    for (int32_t v = 0; v < n; v++) {
        int32_t c = out->labels[v];
        int32_t n_topic = (F - c + C - 1) / C; /* ranks of class c's words */
        /* Between half and one and a half times the mean, at least one. */
        int32_t len = (int32_t)floor(p->words_per_vertex * (0.5 + uniform(key, d++)) + 0.5);
        if (len < 1)
            len = 1;
        if (len > most)
            len = most;
        for (int32_t k = 0; k < len; k++) {
            double u = uniform(key, d++), x = uniform(key, d++);
            int64_t r;
            if (u < p->topic_share) {
                r = upper_bound(zipf, 0, n_topic, x * zipf[n_topic - 1]);
                if (r >= n_topic)
                    r = n_topic - 1;
                words[k] = topic_order[r * C + c];
            } else {
                r = upper_bound(zipf, 0, F, x * zipf[F - 1]);
                if (r >= F)
                    r = F - 1;
                words[k] = bg_order[r];
            }
        }
        qsort(words, (size_t)len, sizeof *words, cmp_i32);
        for (int32_t k = 0; k < len; k++)
            if (k == 0 || words[k] != words[k - 1])
                out->feat_index[nnz++] = words[k];
        out->feat_offsets[v + 1] = nnz;
    }
    /* Give back the unused tail (the bound above is 1.5 times the mean). */
    if (nnz > 0)
        SAGA_TRY(saga_realloc_array((void **)&out->feat_index, (size_t)nnz, sizeof *out->feat_index,
                                    "citation features"));
fail:
    saga_free(topic_order);
    saga_free(bg_order);
    saga_free(zipf);
    saga_free(words);
    return st;
}

/* ---- split -------------------------------------------------------------------------------- */

/* Walks the vertices in a seeded order: the first t of each class go to train, then the next
 * vertices to validation and test. t is train_per_class, but at most a fifth of the graph over
 * the classes and half of the class, so that small graphs keep vertices to evaluate on. */
static saga_status make_split(saga_citation *out, const int64_t *class_off,
                              const saga_citation_params *p) {
    saga_status st = SAGA_OK;
    int32_t n = p->n_vertices, C = p->n_classes;
    int32_t *perm = NULL, *taken = NULL;
    uint8_t *role = NULL; /* 0 none, 1 train, 2 val, 3 test */
    SAGA_TRY(permutation(&perm, n, stream_key(p->seed, STREAM_SPLIT), "citation split"));
    SAGA_TRY(saga_alloc_zeroed((void **)&taken, (size_t)C, sizeof *taken, "citation split"));
    SAGA_TRY(saga_alloc_zeroed((void **)&role, (size_t)n, sizeof *role, "citation split"));
    int32_t t = p->train_per_class;
    if (t > n / (5 * C))
        t = n / (5 * C) > 1 ? n / (5 * C) : 1;
    int32_t n_train = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t v = perm[i], c = out->labels[v];
        int64_t size = class_off[c + 1] - class_off[c];
        int32_t tc = size / 2 < t ? (int32_t)(size / 2 > 1 ? size / 2 : 1) : t;
        if (taken[c] < tc) {
            taken[c]++;
            role[v] = 1;
            n_train++;
        }
    }
    int32_t rest = n - n_train;
    int32_t n_val = p->n_val < rest / 3 ? p->n_val : rest / 3;
    int32_t n_test = p->n_test < rest - n_val ? p->n_test : rest - n_val;
    int32_t got_val = 0, got_test = 0;
    for (int32_t i = 0; i < n && got_test < n_test; i++) {
        int32_t v = perm[i];
        if (role[v])
            continue;
        if (got_val < n_val) {
            role[v] = 2;
            got_val++;
        } else {
            role[v] = 3;
            got_test++;
        }
    }
    SAGA_TRY(saga_alloc_array((void **)&out->train, (size_t)n_train + 1, sizeof *out->train,
                              "citation train split"));
    SAGA_TRY(saga_alloc_array((void **)&out->val, (size_t)n_val + 1, sizeof *out->val,
                              "citation validation split"));
    SAGA_TRY(saga_alloc_array((void **)&out->test, (size_t)n_test + 1, sizeof *out->test,
                              "citation test split"));
    /* Ascending ids, as the Planetoid index files are. */
    for (int32_t v = 0; v < n; v++) {
        if (role[v] == 1)
            out->train[out->n_train++] = v;
        else if (role[v] == 2)
            out->val[out->n_val++] = v;
        else if (role[v] == 3)
            out->test[out->n_test++] = v;
    }
fail:
    saga_free(perm);
    saga_free(taken);
    saga_free(role);
    return st;
}

saga_status saga_citation_generate(saga_citation **out, const saga_citation_params *p) {
    saga_status st = SAGA_OK;
    saga_citation *c = NULL;
    int32_t *by_class = NULL;
    int64_t *class_off = NULL;
    SAGA_CHECK(out != NULL, SAGA_ERR_INVALID_ARG, "citation: output pointer is NULL");
    SAGA_TRY(check_params(p));
    SAGA_TRY(saga_alloc_zeroed((void **)&c, 1, sizeof *c, "citation data set"));
    c->params = *p;
    c->n_vertices = p->n_vertices;
    c->n_classes = p->n_classes;
    c->n_features = p->n_features;
    SAGA_TRY(saga_alloc_array((void **)&c->labels, (size_t)p->n_vertices, sizeof *c->labels,
                              "citation labels"));
    SAGA_TRY(saga_alloc_array((void **)&by_class, (size_t)p->n_vertices, sizeof *by_class,
                              "citation classes"));
    SAGA_TRY(saga_alloc_array((void **)&class_off, (size_t)p->n_classes + 1, sizeof *class_off,
                              "citation classes"));
    SAGA_TRY(make_labels(c, by_class, class_off, p));
    SAGA_TRY(make_edges(c, by_class, class_off, p));
    SAGA_TRY(make_features(c, p));
    SAGA_TRY(make_split(c, class_off, p));
    *out = c;
    c = NULL;
fail:
    saga_citation_free(&c);
    saga_free(by_class);
    saga_free(class_off);
    return st;
}

saga_status saga_citation_graph(saga_graph **out, const saga_citation *c,
                                const saga_graph_opts *opts) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(out != NULL && c != NULL, SAGA_ERR_INVALID_ARG, "citation: NULL argument");
    saga_graph_opts o = opts ? *opts : saga_graph_opts_defaults();
    o.undirected = true;
    SAGA_TRY(saga_graph_from_edges(out, c->n_vertices, c->n_edges, c->edge_u, c->edge_v, NULL, NULL,
                                   &o));
fail:
    return st;
}

saga_status saga_citation_features(float **out, const saga_citation *c) {
    saga_status st = SAGA_OK;
    float *x = NULL;
    SAGA_CHECK(out != NULL && c != NULL, SAGA_ERR_INVALID_ARG, "citation: NULL argument");
    SAGA_TRY(saga_alloc_zeroed((void **)&x, (size_t)c->n_vertices * (size_t)c->n_features,
                               sizeof *x, "citation feature matrix"));
    for (int32_t v = 0; v < c->n_vertices; v++)
        for (int64_t k = c->feat_offsets[v]; k < c->feat_offsets[v + 1]; k++)
            x[(int64_t)v * c->n_features + c->feat_index[k]] = 1.0f;
    *out = x;
fail:
    return st;
}

/* ---- writing ------------------------------------------------------------------------------ */

enum { SINK_BUF = 1 << 20 };

/* A text file written through a buffer, deflated to gzip when asked. zlib writes a zero mtime
 * in the gzip header, so the bytes depend only on the text. */
typedef struct sink {
    FILE *f;
    const char *path;
    bool gz, z_ready;
    z_stream zs;
    char *buf;
    size_t len;
    unsigned char *zbuf;
} sink;

static voidpf zalloc_saga(voidpf opaque, uInt items, uInt size) {
    (void)opaque;
    return saga_calloc(items, size);
}
static void zfree_saga(voidpf opaque, voidpf ptr) {
    (void)opaque;
    saga_free(ptr);
}

static saga_status sink_open(sink *s, const char *path, bool gz) {
    saga_status st = SAGA_OK;
    memset(s, 0, sizeof *s);
    s->path = path;
    s->gz = gz;
    SAGA_TRY(saga_alloc_array((void **)&s->buf, SINK_BUF, 1, "citation text buffer"));
    if (gz) {
        SAGA_TRY(saga_alloc_array((void **)&s->zbuf, SINK_BUF, 1, "citation gzip buffer"));
        s->zs.zalloc = zalloc_saga;
        s->zs.zfree = zfree_saga;
        SAGA_CHECK(deflateInit2(&s->zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK,
                   SAGA_ERR_OUT_OF_MEMORY, "%s: cannot start gzip compression", path);
        s->z_ready = true;
    }
    s->f = fopen(path, "wb");
    SAGA_CHECK(s->f != NULL, SAGA_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
fail:
    return st;
}

/* Hands the buffered text to the file (through deflate when compressing); finish ends the gzip
 * stream. */
static saga_status sink_flush(sink *s, bool finish) {
    saga_status st = SAGA_OK;
    if (!s->gz) {
        SAGA_CHECK(fwrite(s->buf, 1, s->len, s->f) == s->len, SAGA_ERR_IO, "%s: write failed: %s",
                   s->path, strerror(errno));
        s->len = 0;
        return SAGA_OK;
    }
    s->zs.next_in = (Bytef *)s->buf;
    s->zs.avail_in = (uInt)s->len;
    int flush = finish ? Z_FINISH : Z_NO_FLUSH;
    for (;;) {
        s->zs.next_out = s->zbuf;
        s->zs.avail_out = SINK_BUF;
        int rc = deflate(&s->zs, flush);
        SAGA_CHECK(rc == Z_OK || rc == Z_STREAM_END || rc == Z_BUF_ERROR, SAGA_ERR_IO,
                   "%s: gzip compression failed", s->path);
        size_t have = SINK_BUF - s->zs.avail_out;
        SAGA_CHECK(fwrite(s->zbuf, 1, have, s->f) == have, SAGA_ERR_IO, "%s: write failed: %s",
                   s->path, strerror(errno));
        if (finish ? rc == Z_STREAM_END : s->zs.avail_out != 0)
            break;
    }
    s->len = 0;
fail:
    return st;
}

/* Room for one more line of at most 64 bytes. */
static inline saga_status sink_room(sink *s) {
    return s->len + 64 <= SINK_BUF ? SAGA_OK : sink_flush(s, false);
}

static inline void put_u32(sink *s, uint32_t v) {
    char tmp[10];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        s->buf[s->len++] = tmp[--n];
}

static inline void put_char(sink *s, char ch) {
    s->buf[s->len++] = ch;
}

static saga_status sink_text(sink *s, const char *text) {
    saga_status st = SAGA_OK;
    size_t n = strlen(text);
    while (n) {
        if (s->len == SINK_BUF)
            SAGA_TRY(sink_flush(s, false));
        size_t k = SINK_BUF - s->len < n ? SINK_BUF - s->len : n;
        memcpy(s->buf + s->len, text, k);
        s->len += k;
        text += k;
        n -= k;
    }
fail:
    return st;
}

/* Finishes the file; on success it is complete on disk. Frees the buffers either way. */
static saga_status sink_close(sink *s, bool ok) {
    saga_status st = SAGA_OK;
    if (ok)
        SAGA_TRY(sink_flush(s, true));
fail:
    if (s->z_ready)
        deflateEnd(&s->zs);
    if (s->f) {
        int rc = fclose(s->f);
        if (ok && st == SAGA_OK && rc != 0)
            st = saga_error(SAGA_ERR_IO, "%s: write failed: %s", s->path, strerror(errno));
    }
    saga_free(s->buf);
    saga_free(s->zbuf);
    memset(s, 0, sizeof *s);
    return st;
}

/* The fewest digits (15..17) that read back as v. */
static const char *shortest(char buf[32], double v) {
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, 32, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    return buf;
}

typedef enum file_kind {
    FILE_EDGES,
    FILE_FEATURES,
    FILE_LABELS,
    FILE_CLASSES,
    FILE_TRAIN,
    FILE_VAL,
    FILE_TEST,
    FILE_README,
    FILE_COUNT
} file_kind;

static const char *const FILE_NAMES[FILE_COUNT] = {"edges.txt.gz", "features.txt.gz", "labels.txt",
                                                   "classes.txt",  "train_idx.txt",   "val_idx.txt",
                                                   "test_idx.txt", "README.md"};

static double measured_homophily(const saga_citation *c) {
    int64_t same = 0;
    for (int64_t k = 0; k < c->n_edges; k++)
        same += c->labels[c->edge_u[k]] == c->labels[c->edge_v[k]];
    return c->n_edges ? (double)same / (double)c->n_edges : 0.0;
}

static saga_status write_readme(sink *s, const saga_citation *c) {
    saga_status st = SAGA_OK;
    const saga_citation_params *p = &c->params;
    char text[4096], d1[32], d2[32], d3[32], d4[32];
    int64_t nnz = c->feat_offsets[c->n_vertices];
    snprintf(text, sizeof text,
             "# Synthetic citation graph\n\n"
             "Generated by saga (`saga generate citation`, `saga_citation_generate`): a "
             "degree-corrected stochastic block model with class-topic bag-of-words features and a "
             "Planetoid-style split, in the layout of the Cora files (see the list below). The "
             "same parameters give the same bytes.\n\n"
             "    saga generate citation --vertices %d --classes %d --degree %s --features %d "
             "--homophily %s --words %d --topic-share %s --seed %llu -o DIR\n\n"
             "| parameter | value |\n|---|---|\n"
             "| vertices | %d |\n| classes | %d |\n| mean degree | %s |\n| features | %d |\n"
             "| homophily | %s |\n| degree exponent | %s |\n| words per vertex | %d |\n"
             "| topic share | %s |\n| train per class | %d |\n| validation | %d |\n"
             "| test | %d |\n| seed | %llu |\n\n"
             "| count | value |\n|---|---|\n"
             "| undirected edges | %lld |\n| feature non-zeros | %lld |\n"
             "| measured homophily | %.4f |\n| train / val / test | %d / %d / %d |\n\n"
             "Files: `edges.txt.gz` (`u v`, u < v, each edge once, sorted), `features.txt.gz` "
             "(`vertex feature`, value 1), `labels.txt` (line i = class of vertex i), "
             "`classes.txt` (`index name`), `train_idx.txt`, `val_idx.txt`, `test_idx.txt` (one "
             "vertex per line, ascending).\n",
             p->n_vertices, p->n_classes, shortest(d1, p->avg_degree), p->n_features,
             shortest(d2, p->homophily), p->words_per_vertex, shortest(d3, p->topic_share),
             (unsigned long long)p->seed, p->n_vertices, p->n_classes, d1, p->n_features, d2,
             shortest(d4, p->degree_exponent), p->words_per_vertex, d3, p->train_per_class,
             p->n_val, p->n_test, (unsigned long long)p->seed, (long long)c->n_edges,
             (long long)nnz, measured_homophily(c), c->n_train, c->n_val, c->n_test);
    SAGA_TRY(sink_text(s, text));
fail:
    return st;
}

static saga_status write_ids(sink *s, const int32_t *ids, int32_t n) {
    saga_status st = SAGA_OK;
    for (int32_t i = 0; i < n; i++) {
        SAGA_TRY(sink_room(s));
        put_u32(s, (uint32_t)ids[i]);
        put_char(s, '\n');
    }
fail:
    return st;
}

static saga_status write_body(sink *s, const saga_citation *c, file_kind kind) {
    saga_status st = SAGA_OK;
    switch (kind) {
    case FILE_EDGES:
        for (int64_t k = 0; k < c->n_edges; k++) {
            SAGA_TRY(sink_room(s));
            put_u32(s, (uint32_t)c->edge_u[k]);
            put_char(s, ' ');
            put_u32(s, (uint32_t)c->edge_v[k]);
            put_char(s, '\n');
        }
        break;
    case FILE_FEATURES:
        for (int32_t v = 0; v < c->n_vertices; v++)
            for (int64_t k = c->feat_offsets[v]; k < c->feat_offsets[v + 1]; k++) {
                SAGA_TRY(sink_room(s));
                put_u32(s, (uint32_t)v);
                put_char(s, ' ');
                put_u32(s, (uint32_t)c->feat_index[k]);
                put_char(s, '\n');
            }
        break;
    case FILE_LABELS:
        SAGA_TRY(write_ids(s, c->labels, c->n_vertices));
        break;
    case FILE_CLASSES:
        for (int32_t k = 0; k < c->n_classes; k++) {
            SAGA_TRY(sink_room(s));
            put_u32(s, (uint32_t)k);
            SAGA_TRY(sink_text(s, " topic_"));
            SAGA_TRY(sink_room(s));
            put_u32(s, (uint32_t)k);
            put_char(s, '\n');
        }
        break;
    case FILE_TRAIN:
        SAGA_TRY(write_ids(s, c->train, c->n_train));
        break;
    case FILE_VAL:
        SAGA_TRY(write_ids(s, c->val, c->n_val));
        break;
    case FILE_TEST:
        SAGA_TRY(write_ids(s, c->test, c->n_test));
        break;
    case FILE_README:
        SAGA_TRY(write_readme(s, c));
        break;
    case FILE_COUNT:
        break;
    }
fail:
    return st;
}

saga_status saga_citation_write(const saga_citation *c, const char *dir) {
    saga_status st = SAGA_OK;
    char *path = NULL, *tmp = NULL;
    sink s;
    bool open = false;
    memset(&s, 0, sizeof s);
    SAGA_CHECK(c != NULL && dir != NULL, SAGA_ERR_INVALID_ARG, "citation: NULL argument");
    if (mkdir(dir, 0777) != 0) {
        struct stat sb;
        SAGA_CHECK(errno == EEXIST && stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode), SAGA_ERR_IO,
                   "cannot create directory '%s': %s", dir,
                   errno == EEXIST ? "a file of that name exists" : strerror(errno));
    }
    size_t cap = strlen(dir) + 32;
    SAGA_TRY(saga_alloc_array((void **)&path, cap, 1, "citation path"));
    SAGA_TRY(saga_alloc_zeroed((void **)&tmp, cap, 1, "citation path"));
    for (int k = 0; k < FILE_COUNT; k++) {
        snprintf(path, cap, "%s/%s", dir, FILE_NAMES[k]);
        snprintf(tmp, cap, "%s.tmp", path);
        open = true;
        SAGA_TRY(sink_open(&s, tmp, k == FILE_EDGES || k == FILE_FEATURES));
        SAGA_TRY(write_body(&s, c, (file_kind)k));
        open = false;
        SAGA_TRY(sink_close(&s, true));
        SAGA_CHECK(rename(tmp, path) == 0, SAGA_ERR_IO, "cannot rename '%s' to '%s': %s", tmp, path,
                   strerror(errno));
    }
fail:
    if (st < 0 && tmp && tmp[0]) {
        if (open)
            (void)sink_close(&s, false);
        remove(tmp); /* no half-written file left behind */
    }
    saga_free(path);
    saga_free(tmp);
    return st;
}
