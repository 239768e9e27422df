/* graph.c - building the two CSR directions of a graph from edge arrays, in place. */
#include "graph_impl.h"
#include "mem_impl.h"
#include "saga_log.h"

#include <math.h>
#include <string.h>
#include <sys/mman.h>

#ifdef _OPENMP
#include <omp.h>
#endif

saga_graph_opts saga_graph_opts_defaults(void) {
    return (saga_graph_opts){.undirected = false,
                             .self_loops = SAGA_SELF_LOOPS_KEEP,
                             .duplicates = SAGA_DUPLICATES_AUTO};
}

/* ---- sorting edges in place ------------------------------------------------------------------
 *
 * An MSD radix sort ("American flag" sort), 11 bits per level, that permutes the key array and
 * the arrays riding along in place, so that no second copy of the edges is needed. Each level
 * keeps 2048 write heads whose cache lines stay hot, so the swaps mostly hit cache; short ranges
 * go to a quicksort. Buckets are independent and their results depend only on their contents,
 * so the output does not depend on the thread count. Equal keys end up in an unspecified (but
 * deterministic) order; the duplicate handling does not rely on it. */

enum {
    RADIX_BITS = 11,
    RADIX = 1 << RADIX_BITS,
    QUICK_SORT = 1024, /* ranges up to this size are sorted by comparisons */
    SMALL_SORT = 16,   /* and up to this by insertion */
    PAR_MIN_EDGES = 1 << 16
};

/* Swaps edges x and y of the arrays in scope (key, and oth / w when present). */
#define EDGE_SWAP(x, y)                                                                            \
    do {                                                                                           \
        size_t x_ = (x), y_ = (y);                                                                 \
        int32_t tk_ = key[x_];                                                                     \
        key[x_] = key[y_];                                                                         \
        key[y_] = tk_;                                                                             \
        if (has_oth) {                                                                             \
            int32_t to_ = oth[x_];                                                                 \
            oth[x_] = oth[y_];                                                                     \
            oth[y_] = to_;                                                                         \
        }                                                                                          \
        if (has_w) {                                                                               \
            float tw_ = w[x_];                                                                     \
            w[x_] = w[y_];                                                                         \
            w[y_] = tw_;                                                                           \
        }                                                                                          \
    } while (0)

static void flag_sort(int32_t *key, int32_t *oth, float *w, size_t n, int shift, bool par);

/* Sorts key[0..n) (moving oth and w along when not NULL) by key bits below shift + RADIX_BITS;
 * the bits above are equal within the range. */
static inline __attribute__((always_inline)) void flag_sort_impl(int32_t *key, int32_t *oth,
                                                                 float *w, size_t n, int shift,
                                                                 bool has_oth, bool has_w,
                                                                 bool par) {
    if (n <= QUICK_SORT) {
        /* Radix passes cost 2048 buckets each: short ranges go to a quicksort (median of
         * three, the smaller side on an explicit stack) finished by insertion sort. */
        size_t stack[2 * 64];
        int top = 0;
        size_t lo = 0, hi = n; /* [lo, hi) */
        for (;;) {
            while (hi - lo > SMALL_SORT) {
                size_t mid = lo + (hi - lo) / 2, last = hi - 1;
                if (key[mid] < key[lo])
                    EDGE_SWAP(mid, lo);
                if (key[last] < key[lo])
                    EDGE_SWAP(last, lo);
                if (key[last] < key[mid])
                    EDGE_SWAP(last, mid);
                int32_t p = key[mid];
                size_t i = lo, j = last;
                for (;;) {
                    do
                        i++;
                    while (key[i] < p);
                    do
                        j--;
                    while (key[j] > p);
                    if (i >= j)
                        break;
                    EDGE_SWAP(i, j);
                }
                /* [lo, j] <= p <= [j + 1, hi) */
                if (j + 1 - lo < hi - (j + 1)) {
                    stack[top++] = j + 1;
                    stack[top++] = hi;
                    hi = j + 1;
                } else {
                    stack[top++] = lo;
                    stack[top++] = j + 1;
                    lo = j + 1;
                }
            }
            for (size_t i = lo + 1; i < hi; i++) {
                int32_t k = key[i], o = has_oth ? oth[i] : 0;
                float wv = has_w ? w[i] : 0.0f;
                size_t j = i;
                for (; j > lo && key[j - 1] > k; j--) {
                    key[j] = key[j - 1];
                    if (has_oth)
                        oth[j] = oth[j - 1];
                    if (has_w)
                        w[j] = w[j - 1];
                }
                key[j] = k;
                if (has_oth)
                    oth[j] = o;
                if (has_w)
                    w[j] = wv;
            }
            if (top == 0)
                return;
            hi = stack[--top];
            lo = stack[--top];
        }
    }
    size_t count[RADIX] = {0};
    for (size_t i = 0; i < n; i++)
        count[((uint32_t)key[i] >> shift) & (RADIX - 1)]++;
    size_t head[RADIX], bound[RADIX + 1];
    size_t pos = 0;
    bool one_bucket = false;
    for (int b = 0; b < RADIX; b++) {
        one_bucket |= count[b] == n;
        head[b] = bound[b] = pos;
        pos += count[b];
    }
    bound[RADIX] = n;
    if (!one_bucket) {
        for (int b = 0; b < RADIX; b++) {
            size_t end = bound[b + 1];
            while (head[b] < end) {
                size_t i = head[b];
                int32_t k = key[i], o = has_oth ? oth[i] : 0;
                float wv = has_w ? w[i] : 0.0f;
                size_t d = ((uint32_t)k >> shift) & (RADIX - 1);
                while (d != (size_t)b) {
                    size_t j = head[d]++;
                    int32_t tk = key[j];
                    key[j] = k;
                    k = tk;
                    if (has_oth) {
                        int32_t to = oth[j];
                        oth[j] = o;
                        o = to;
                    }
                    if (has_w) {
                        float tw = w[j];
                        w[j] = wv;
                        wv = tw;
                    }
                    d = ((uint32_t)k >> shift) & (RADIX - 1);
                }
                key[i] = k;
                if (has_oth)
                    oth[i] = o;
                if (has_w)
                    w[i] = wv;
                head[b]++;
            }
        }
    }
    if (shift == 0)
        return;
    int next = shift > RADIX_BITS ? shift - RADIX_BITS : 0;
    if (one_bucket) {
        flag_sort(key, has_oth ? oth : NULL, has_w ? w : NULL, n, next, par);
        return;
    }
    /* buckets are independent; the top level hands them to threads */
#pragma omp parallel for schedule(dynamic, 1) if (par)
    for (int b = 0; b < RADIX; b++) {
        size_t lo = bound[b], len = bound[b + 1] - lo;
        if (len > 1)
            flag_sort(key + lo, has_oth ? oth + lo : NULL, has_w ? w + lo : NULL, len, next, false);
    }
}

/* The variants, so that the inner loops carry no tests for absent arrays. */
static void flag_sort_kow(int32_t *k, int32_t *o, float *w, size_t n, int s, bool par) {
    flag_sort_impl(k, o, w, n, s, true, true, par);
}
static void flag_sort_ko(int32_t *k, int32_t *o, float *w, size_t n, int s, bool par) {
    flag_sort_impl(k, o, w, n, s, true, false, par);
}
static void flag_sort_kw(int32_t *k, int32_t *o, float *w, size_t n, int s, bool par) {
    flag_sort_impl(k, o, w, n, s, false, true, par);
}
static void flag_sort_k(int32_t *k, int32_t *o, float *w, size_t n, int s, bool par) {
    flag_sort_impl(k, o, w, n, s, false, false, par);
}

static void flag_sort(int32_t *key, int32_t *oth, float *w, size_t n, int shift, bool par) {
    if (oth)
        (w ? flag_sort_kow : flag_sort_ko)(key, oth, w, n, shift, par);
    else
        (w ? flag_sort_kw : flag_sort_k)(key, NULL, w, n, shift, par);
}

static int bits_for(int32_t n) {
    int b = 1;
    while (b < 31 && ((int64_t)1 << b) < (int64_t)n)
        b++;
    return b;
}

/* First edge index with an endpoint outside 0..n-1, or -1. */
static int64_t first_bad_edge(const int32_t *src, const int32_t *dst, int64_t m, int32_t n) {
    int64_t bad = m;
#pragma omp parallel for reduction(min : bad) schedule(static)
    for (int64_t k = 0; k < m; k++)
        if ((uint32_t)src[k] >= (uint32_t)n || (uint32_t)dst[k] >= (uint32_t)n)
            if (k < bad)
                bad = k;
    return bad == m ? -1 : bad;
}

static void graph_release(saga_graph *g) {
    if (!g)
        return;
    if (g->mapping) {
        munmap(g->mapping, g->mapping_len);
    } else {
        saga_free(g->in_offsets);
        saga_free(g->in_src);
        saga_free(g->in_w);
        saga_free(g->out_offsets);
        saga_free(g->out_dst);
        saga_free(g->out_w);
        saga_free(g->orig_ids);
    }
    saga_free(g);
}

/* Sorts each row of a CSR ascending, moving the weights along. */
static void sort_rows(int32_t n, const int64_t *off, int32_t *idx, float *w) {
    int shift = bits_for(n) > RADIX_BITS ? bits_for(n) - RADIX_BITS : 0;
#pragma omp parallel for schedule(dynamic, 1024)
    for (int32_t v = 0; v < n; v++) {
        int64_t lo = off[v], len = off[v + 1] - lo;
        bool sorted = true;
        for (int64_t k = lo + 1; k < lo + len && sorted; k++)
            sorted = idx[k - 1] <= idx[k];
        if (!sorted)
            flag_sort(idx + lo, NULL, w ? w + lo : NULL, (size_t)len, shift, false);
    }
}

/* The weight that stands for a run of equal edges: SUM adds (in double, so that the order of the
 * run does not matter), DROP keeps the smallest; the sort leaves no "first listed" order. */
static float merged_weight(const float *w, int64_t lo, int64_t hi, saga_duplicates dup) {
    if (dup == SAGA_DUPLICATES_SUM) {
        double sum = 0;
        for (int64_t t = lo; t < hi; t++)
            sum += w[t];
        return (float)sum;
    }
    float best = w[lo];
    for (int64_t t = lo + 1; t < hi; t++)
        best = w[t] < best ? w[t] : best;
    return best;
}

/* Merges runs of equal indices within the sorted rows, in place; returns the new edge count. */
static int64_t merge_duplicates(int32_t n, int64_t *off, int32_t *idx, float *w,
                                saga_duplicates dup) {
    int64_t j = 0, lo = off[0];
    for (int32_t v = 0; v < n; v++) {
        int64_t hi = off[v + 1];
        off[v] = j;
        for (int64_t k = lo; k < hi;) {
            int64_t r = k + 1;
            while (r < hi && idx[r] == idx[k])
                r++;
            idx[j] = idx[k];
            if (w)
                w[j] = merged_weight(w, k, r, dup);
            j++;
            k = r;
        }
        lo = hi;
    }
    off[n] = j;
    return j;
}

/* Transposes a CSR (n x n, m entries) into new arrays; buf, when not NULL, is a block of at
 * least m int32 (taken over) that becomes the index array, which saves first touches of fresh
 * memory. Visiting rows in increasing order leaves every row of the transpose sorted.
 *
 * A plain scatter (cursor[v]++ for every edge) misses the cache twice per edge once the graph is
 * large. Instead, slices of edges are first partitioned by the high bits of the target into a
 * small buffer, then each part is scattered: its cursors and its stretch of the output are
 * cache-sized. Parts cover disjoint rows, so they are scattered in parallel, deterministically. */
static saga_status csr_transpose(int64_t **t_off, int32_t **t_idx, float **t_w, int32_t n,
                                 int64_t m, const int64_t *off, const int32_t *idx, const float *w,
                                 int32_t *buf) {
    enum { SLICE = 1 << 22, PART_BITS = 8 };
    saga_status st = SAGA_OK;
    int64_t *to = NULL;
    int32_t *ti = buf;
    float *tw = NULL;
    int32_t *pu = NULL, *pv = NULL;
    float *pw = NULL;
    size_t *pcount = NULL;
    int bits = bits_for(n);
    int shift = bits > PART_BITS ? bits - PART_BITS : 0;
    size_t n_parts = n > 0 ? (size_t)((n - 1) >> shift) + 1 : 1;
    size_t slice = m < SLICE ? (size_t)m : SLICE;
    SAGA_TRY(saga_alloc_zeroed((void **)&to, (size_t)n + 1, sizeof *to, "edge offsets"));
    if (!ti)
        SAGA_TRY(saga_alloc_array((void **)&ti, (size_t)m, sizeof *ti, "edge array"));
    if (w)
        SAGA_TRY(saga_alloc_array((void **)&tw, (size_t)m, sizeof *tw, "edge weights"));
    SAGA_TRY(saga_alloc_array((void **)&pu, slice ? slice : 1, sizeof *pu, "transpose buffer"));
    SAGA_TRY(saga_alloc_array((void **)&pv, slice ? slice : 1, sizeof *pv, "transpose buffer"));
    if (w)
        SAGA_TRY(saga_alloc_array((void **)&pw, slice ? slice : 1, sizeof *pw, "transpose buffer"));
    SAGA_TRY(saga_alloc_array((void **)&pcount, n_parts + 1, sizeof *pcount, "transpose parts"));
    saga_advise_huge(ti, (size_t)m * sizeof *ti);
    if (tw)
        saga_advise_huge(tw, (size_t)m * sizeof *tw);
    saga_advise_huge(pu, slice * sizeof *pu);
    saga_advise_huge(pv, slice * sizeof *pv);
    if (pw)
        saga_advise_huge(pw, slice * sizeof *pw);

    /* Two sweeps over the slices: the first counts the rows of the transpose, the second fills
     * them once the offsets are known. */
    for (int sweep = 0; sweep < 2; sweep++) {
        int32_t u = 0;
        for (int64_t e0 = 0; e0 < m; e0 += (int64_t)slice) {
            int64_t e1 = e0 + (int64_t)slice < m ? e0 + (int64_t)slice : m;
            memset(pcount, 0, (n_parts + 1) * sizeof *pcount);
            for (int64_t k = e0; k < e1; k++)
                pcount[((uint32_t)idx[k] >> shift) + 1]++;
            for (size_t p = 0; p < n_parts; p++)
                pcount[p + 1] += pcount[p];
            /* partition; pcount[p] ends as the end of part p */
            for (int64_t k = e0; k < e1; k++) {
                while (off[u + 1] <= k)
                    u++;
                size_t q = pcount[(uint32_t)idx[k] >> shift]++;
                pv[q] = idx[k];
                if (sweep == 1) {
                    pu[q] = u;
                    if (w)
                        pw[q] = w[k];
                }
            }
            size_t total = (size_t)(e1 - e0);
            if (sweep == 0) {
                for (size_t q = 0; q < total; q++)
                    to[pv[q] + 1]++;
                continue;
            }
#pragma omp parallel for schedule(dynamic, 16)
            for (size_t p = 0; p < n_parts; p++) {
                size_t q0 = p ? pcount[p - 1] : 0, q1 = pcount[p];
                for (size_t q = q0; q < q1; q++) {
                    int64_t dst = to[pv[q]]++;
                    ti[dst] = pu[q];
                    if (w)
                        tw[dst] = pw[q];
                }
            }
        }
        if (sweep == 0) {
            for (int32_t v = 0; v < n; v++)
                to[v + 1] += to[v];
        }
    }
    /* to[v] served as the cursor of row v and now holds its end: shift to get the starts */
    memmove(to + 1, to, (size_t)n * sizeof *to);
    to[0] = 0;
    saga_free(pu);
    saga_free(pv);
    saga_free(pw);
    saga_free(pcount);
    *t_off = to;
    *t_idx = ti;
    *t_w = tw;
    return SAGA_OK;
fail:
    saga_free(pu);
    saga_free(pv);
    saga_free(pw);
    saga_free(pcount);
    saga_free(to);
    saga_free(ti);
    saga_free(tw);
    return st;
}

/* Row v of A + A^T (a self-loop counted once, from A), duplicates merged unless dup is KEEP,
 * written to out (or only counted when out is NULL). Both rows are sorted: a merge. */
static int64_t union_row(int32_t v, const int32_t *a, const float *aw, int64_t na, const int32_t *b,
                         const float *bw, int64_t nb, saga_duplicates dup, int32_t *out,
                         float *out_w) {
    int64_t i = 0, j = 0, o = 0;
    for (;;) {
        while (j < nb && b[j] == v) /* the self-loop comes from a */
            j++;
        if (i >= na && j >= nb)
            break;
        bool from_a = j >= nb || (i < na && a[i] <= b[j]);
        int32_t x = from_a ? a[i] : b[j];
        if (dup == SAGA_DUPLICATES_KEEP) {
            if (out) {
                out[o] = x;
                if (out_w)
                    out_w[o] = from_a ? aw[i] : bw[j];
            }
            if (from_a)
                i++;
            else
                j++;
            o++;
            continue;
        }
        /* a run of x in either row becomes one edge */
        double sum = 0;
        float best = 0;
        bool first = true;
        for (; i < na && a[i] == x; i++)
            if (out_w) {
                sum += aw[i];
                best = first || aw[i] < best ? aw[i] : best;
                first = false;
            }
        if (x != v)
            for (; j < nb && b[j] == x; j++)
                if (out_w) {
                    sum += bw[j];
                    best = first || bw[j] < best ? bw[j] : best;
                    first = false;
                }
        if (out) {
            out[o] = x;
            if (out_w)
                out_w[o] = dup == SAGA_DUPLICATES_SUM ? (float)sum : best;
        }
        o++;
    }
    return o;
}

/* The undirected graph A + A^T from the out-CSR A (rows sorted), for both directions. */
static saga_status symmetrize(saga_graph *g, int32_t n, const int64_t *a_off, const int32_t *a_idx,
                              const float *a_w, saga_duplicates dup, int32_t *buf) {
    saga_status st = SAGA_OK;
    int64_t *t_off = NULL, *s_off = NULL;
    int32_t *t_idx = NULL, *s_idx = NULL;
    float *t_w = NULL, *s_w = NULL;
    int64_t m = a_off[n];
    SAGA_TRY(csr_transpose(&t_off, &t_idx, &t_w, n, m, a_off, a_idx, a_w, buf));
    /* sizes first, so that the union is allocated (and touched) at its final size */
    SAGA_TRY(saga_alloc_array((void **)&s_off, (size_t)n + 1, sizeof *s_off, "edge offsets"));
    s_off[0] = 0;
#pragma omp parallel for schedule(dynamic, 1024)
    for (int32_t v = 0; v < n; v++)
        s_off[v + 1] = union_row(v, a_idx + a_off[v], NULL, a_off[v + 1] - a_off[v],
                                 t_idx + t_off[v], NULL, t_off[v + 1] - t_off[v], dup, NULL, NULL);
    for (int32_t v = 0; v < n; v++)
        s_off[v + 1] += s_off[v];
    int64_t sm = s_off[n];
    SAGA_TRY(saga_alloc_array((void **)&s_idx, (size_t)sm, sizeof *s_idx, "edge array"));
    if (a_w)
        SAGA_TRY(saga_alloc_array((void **)&s_w, (size_t)sm, sizeof *s_w, "edge weights"));
    saga_advise_huge(s_idx, (size_t)sm * sizeof *s_idx);
#pragma omp parallel for schedule(dynamic, 1024)
    for (int32_t v = 0; v < n; v++)
        union_row(v, a_idx + a_off[v], a_w ? a_w + a_off[v] : NULL, a_off[v + 1] - a_off[v],
                  t_idx + t_off[v], t_w ? t_w + t_off[v] : NULL, t_off[v + 1] - t_off[v], dup,
                  s_idx + s_off[v], s_w ? s_w + s_off[v] : NULL);
    saga_free(t_off);
    saga_free(t_idx);
    saga_free(t_w);
    t_off = NULL, t_idx = NULL, t_w = NULL;
    /* the graph is symmetric: the in-CSR is a copy */
    g->n_edges = sm;
    g->out_offsets = s_off;
    g->out_dst = s_idx;
    g->out_w = s_w;
    s_off = NULL, s_idx = NULL, s_w = NULL;
    SAGA_TRY(
        saga_alloc_array((void **)&g->in_offsets, (size_t)n + 1, sizeof(int64_t), "edge offsets"));
    memcpy(g->in_offsets, g->out_offsets, ((size_t)n + 1) * sizeof(int64_t));
    SAGA_TRY(saga_alloc_array((void **)&g->in_src, (size_t)sm, sizeof(int32_t), "edge array"));
    if (sm)
        memcpy(g->in_src, g->out_dst, (size_t)sm * sizeof(int32_t));
    if (g->out_w) {
        SAGA_TRY(saga_alloc_array((void **)&g->in_w, (size_t)sm, sizeof(float), "edge weights"));
        if (sm)
            memcpy(g->in_w, g->out_w, (size_t)sm * sizeof(float));
    }
fail:
    saga_free(t_off);
    saga_free(t_idx);
    saga_free(t_w);
    saga_free(s_off);
    saga_free(s_idx);
    saga_free(s_w);
    return st;
}

/* Builds a graph from edge arrays it takes over; see saga_graph.h.
 *
 * The edges are sorted by source in place (skipped when the input is already grouped by source,
 * as SNAP files are), so that the source array turns into out-row offsets and the target array
 * into the out-CSR; each row is sorted, duplicates merged, and the in-CSR is the transpose. An
 * undirected graph is the union with the transpose, formed row by row. Peak memory stays near the
 * final size: the input arrays, or both CSR directions (plus the transpose for undirected). */
saga_status saga_graph_from_edges_take(saga_graph **out, int32_t n_vertices, int64_t n_edges,
                                       int32_t **src_p, int32_t **dst_p, float **w_p,
                                       int64_t **orig_p, const saga_graph_opts *opts) {
    saga_status st = SAGA_OK;
    saga_graph *g = NULL;
    int64_t *off = NULL;
    int32_t *src = src_p ? *src_p : NULL;
    int32_t *dst = dst_p ? *dst_p : NULL;
    float *w = w_p ? *w_p : NULL;
    int64_t *orig = orig_p ? *orig_p : NULL;
    if (src_p)
        *src_p = NULL;
    if (dst_p)
        *dst_p = NULL;
    if (w_p)
        *w_p = NULL;
    if (orig_p)
        *orig_p = NULL;
    saga_graph_opts o = opts ? *opts : saga_graph_opts_defaults();
    int32_t n = n_vertices;
    int64_t m = n_edges;

    /* ---- check inputs */
    SAGA_CHECK(out, SAGA_ERR_INVALID_ARG, "saga_graph_from_edges: out is NULL");
    SAGA_CHECK(n >= 0, SAGA_ERR_INVALID_ARG, "saga_graph_from_edges: n_vertices is negative (%d)",
               (int)n);
    SAGA_CHECK(m >= 0 && (uint64_t)m <= SIZE_MAX / 2 / sizeof(int32_t), SAGA_ERR_INVALID_ARG,
               "saga_graph_from_edges: edge count %lld out of range", (long long)m);
    SAGA_CHECK(m == 0 || (src && dst), SAGA_ERR_INVALID_ARG,
               "saga_graph_from_edges: %lld edges but no source or destination array",
               (long long)m);
    SAGA_CHECK((unsigned)o.self_loops < SAGA_SELF_LOOPS_COUNT &&
                   (unsigned)o.duplicates < SAGA_DUPLICATES_COUNT,
               SAGA_ERR_INVALID_ARG, "saga_graph_from_edges: invalid options");
    int64_t bad = first_bad_edge(src, dst, m, n);
    if (bad >= 0) {
        bool src_bad = (uint32_t)src[bad] >= (uint32_t)n;
        SAGA_CHECK(false, SAGA_ERR_INVALID_ARG, "edge %lld: %s %d outside the vertex range 0..%lld",
                   (long long)bad, src_bad ? "source" : "destination",
                   src_bad ? (int)src[bad] : (int)dst[bad], (long long)n - 1);
    }
    if (orig)
        for (int32_t v = 1; v < n; v++)
            SAGA_CHECK(orig[v - 1] < orig[v], SAGA_ERR_INVALID_ARG,
                       "original ids not strictly increasing at vertex %d (%lld after %lld)",
                       (int)v, (long long)orig[v], (long long)orig[v - 1]);
    if (w)
        for (int64_t k = 0; k < m; k++)
            SAGA_CHECK(isfinite(w[k]), SAGA_ERR_INVALID_ARG,
                       "edge %lld: weight %g is not finite (a weighted edge list with it is "
                       "refused too)",
                       (long long)k, (double)w[k]);
    saga_duplicates dup = o.duplicates;
    if (dup == SAGA_DUPLICATES_AUTO)
        dup = o.undirected ? SAGA_DUPLICATES_DROP : SAGA_DUPLICATES_KEEP;

    /* ---- self-loops */
    if (o.self_loops == SAGA_SELF_LOOPS_DROP) {
        int64_t j = 0;
        for (int64_t k = 0; k < m; k++) {
            if (src[k] == dst[k])
                continue;
            src[j] = src[k];
            dst[j] = dst[k];
            if (w)
                w[j] = w[k];
            j++;
        }
        m = j;
    }

    /* ---- the out-CSR: group by source, count the rows, sort each row */
    double t0 = saga_now();
    bool grouped = true;
    for (int64_t k = 1; k < m && grouped; k++)
        grouped = src[k - 1] <= src[k];
    if (!grouped) {
        int bits = bits_for(n);
        flag_sort(src, dst, w, (size_t)m, bits > RADIX_BITS ? bits - RADIX_BITS : 0,
                  m >= PAR_MIN_EDGES);
    }
    SAGA_TRY(saga_alloc_zeroed((void **)&off, (size_t)n + 1, sizeof *off, "edge offsets"));
    for (int64_t k = 0; k < m; k++)
        off[src[k] + 1]++;
    for (int32_t v = 0; v < n; v++)
        off[v + 1] += off[v];
    /* The offsets say what src said; its block is kept to hold the transpose. */
    sort_rows(n, off, dst, w);
    double t1 = saga_now();

    SAGA_TRY(saga_alloc_zeroed((void **)&g, 1, sizeof *g, "graph"));
    g->n_vertices = n;
    if (o.undirected) {
        int32_t *buf = src;
        src = NULL;
        SAGA_TRY(symmetrize(g, n, off, dst, w, dup, buf));
        saga_free(off);
        saga_free(dst);
        saga_free(w);
        off = NULL, dst = NULL, w = NULL;
    } else {
        if (dup != SAGA_DUPLICATES_KEEP)
            m = merge_duplicates(n, off, dst, w, dup);
        /* Give back what merging freed (and the parser's spare capacity); a failed shrink just
         * keeps the larger block. */
        if (m > 0) {
            int32_t *d2 = saga_realloc(dst, (size_t)m * sizeof *dst);
            if (d2)
                dst = d2;
            if (w) {
                float *w2 = saga_realloc(w, (size_t)m * sizeof *w);
                if (w2)
                    w = w2;
            }
        }
        g->n_edges = m;
        g->out_offsets = off;
        g->out_dst = dst;
        g->out_w = w;
        off = NULL, dst = NULL, w = NULL;
        int32_t *buf = src;
        src = NULL;
        if (m > 0) { /* trim the parser's spare capacity */
            int32_t *b2 = saga_realloc(buf, (size_t)m * sizeof *buf);
            if (b2)
                buf = b2;
        }
        SAGA_TRY(csr_transpose(&g->in_offsets, &g->in_src, &g->in_w, n, m, g->out_offsets,
                               g->out_dst, g->out_w, buf));
    }
    g->orig_ids = orig;
    orig = NULL;
    g->build = (saga_graph_opts){
        .undirected = o.undirected, .self_loops = o.self_loops, .duplicates = dup};
    g->build_known = true;
    saga_log(SAGA_LOG_DEBUG,
             "graph: %d vertices, %lld edges: %s by source in %.3f s, built in %.3f s", (int)n,
             (long long)g->n_edges, grouped ? "grouped" : "sorted", t1 - t0, saga_now() - t1);
    *out = g;
    return SAGA_OK;
fail:
    graph_release(g);
    saga_free(off);
    saga_free(src);
    saga_free(dst);
    saga_free(w);
    saga_free(orig);
    return st;
}

/* Copies the arrays and builds; see saga_graph.h. */
saga_status saga_graph_from_edges(saga_graph **out, int32_t n_vertices, int64_t n_edges,
                                  const int32_t *src, const int32_t *dst, const float *w,
                                  const int64_t *orig_ids, const saga_graph_opts *opts) {
    saga_status st = SAGA_OK;
    int32_t *s = NULL, *d = NULL;
    float *wc = NULL;
    int64_t *oc = NULL;
    SAGA_CHECK(n_edges >= 0 && n_vertices >= 0, SAGA_ERR_INVALID_ARG,
               "saga_graph_from_edges: negative count (%d vertices, %lld edges)", (int)n_vertices,
               (long long)n_edges);
    SAGA_CHECK(n_edges == 0 || (src && dst), SAGA_ERR_INVALID_ARG,
               "saga_graph_from_edges: %lld edges but no source or destination array",
               (long long)n_edges);
    size_t m = (size_t)n_edges;
    SAGA_TRY(saga_alloc_array((void **)&s, m, sizeof *s, "edge sources"));
    SAGA_TRY(saga_alloc_array((void **)&d, m, sizeof *d, "edge targets"));
    if (m) {
        memcpy(s, src, m * sizeof *s);
        memcpy(d, dst, m * sizeof *d);
    }
    if (w) {
        SAGA_TRY(saga_alloc_array((void **)&wc, m, sizeof *wc, "edge weights"));
        if (m)
            memcpy(wc, w, m * sizeof *wc);
    }
    if (orig_ids) {
        SAGA_TRY(saga_alloc_array((void **)&oc, (size_t)n_vertices, sizeof *oc, "original ids"));
        if (n_vertices)
            memcpy(oc, orig_ids, (size_t)n_vertices * sizeof *oc);
    }
    return saga_graph_from_edges_take(out, n_vertices, n_edges, &s, &d, &wc, &oc, opts);
fail:
    saga_free(s);
    saga_free(d);
    saga_free(wc);
    saga_free(oc);
    return st;
}

/* The edges of g as a new edge list for the builder; see graph_impl.h. */
saga_status saga_graph_rebuild(saga_graph **out, const saga_graph *g, const saga_graph_opts *opts,
                               bool drop_weights) {
    saga_status st = SAGA_OK;
    int32_t *src = NULL, *dst = NULL;
    float *w = NULL;
    int64_t *orig = NULL;
    saga_graph *h = NULL;
    SAGA_CHECK(out && g, SAGA_ERR_INVALID_ARG, "saga_graph_rebuild: out and graph are required");
    int32_t n = g->n_vertices;
    int64_t m = g->n_edges;
    size_t m1 = m ? (size_t)m : 1;
    SAGA_TRY(saga_alloc_array((void **)&src, m1, sizeof *src, "edge sources"));
    SAGA_TRY(saga_alloc_array((void **)&dst, m1, sizeof *dst, "edge targets"));
    if (g->out_w && !drop_weights)
        SAGA_TRY(saga_alloc_array((void **)&w, m1, sizeof *w, "edge weights"));
    if (g->orig_ids)
        SAGA_TRY(saga_alloc_array((void **)&orig, n ? (size_t)n : 1, sizeof *orig, "original ids"));
#pragma omp parallel for schedule(dynamic, 1024)
    for (int32_t u = 0; u < n; u++)
        for (int64_t k = g->out_offsets[u]; k < g->out_offsets[u + 1]; k++)
            src[k] = u;
    if (m) {
        memcpy(dst, g->out_dst, (size_t)m * sizeof *dst);
        if (w)
            memcpy(w, g->out_w, (size_t)m * sizeof *w);
    }
    if (orig && n)
        memcpy(orig, g->orig_ids, (size_t)n * sizeof *orig);
    /* The ids go in afterwards: the builder wants them increasing, a renumbered graph's are not. */
    SAGA_TRY(saga_graph_from_edges_take(&h, n, m, &src, &dst, &w, NULL, opts));
    h->orig_ids = orig;
    h->ids_unordered = g->ids_unordered;
    *out = h;
    return SAGA_OK;
fail:
    saga_free(src);
    saga_free(dst);
    saga_free(w);
    saga_free(orig);
    return st;
}

/* A rebuild that adds the reverse edges and merges; see saga_graph.h. */
saga_status saga_graph_symmetrize(saga_graph **out, const saga_graph *g) {
    saga_status st = SAGA_OK;
    saga_graph *h = NULL;
    SAGA_CHECK(out && g, SAGA_ERR_INVALID_ARG, "saga_graph_symmetrize: out and graph are required");
    saga_graph_opts o = {
        .undirected = true, .self_loops = SAGA_SELF_LOOPS_KEEP, .duplicates = SAGA_DUPLICATES_DROP};
    SAGA_TRY(saga_graph_rebuild(&h, g, &o, false));
    /* How h comes from g's own source: undirected, with g's self-loops, parallel edges dropped,
     * unless g summed their weights. An undirected g that summed them is its own result; the
     * smallest of a directed g's sums u -> v and v -> u is no build of the source. */
    bool sum = g->build.duplicates == SAGA_DUPLICATES_SUM && g->out_w;
    h->build_known = g->build_known && !(sum && !g->build.undirected);
    h->build = saga_graph_opts_defaults();
    if (h->build_known)
        h->build =
            (saga_graph_opts){.undirected = true,
                              .self_loops = g->build.self_loops,
                              .duplicates = sum ? SAGA_DUPLICATES_SUM : SAGA_DUPLICATES_DROP};
    *out = h;
fail:
    return st;
}

/* Compares the two CSR directions' rows. Not the weights: the builder transposes a row's run of
 * parallel edges in another order than it lists them, so a symmetric multigraph may hold the same
 * weights in another order on either side. */
bool saga_graph_is_symmetric(const saga_graph *g) {
    size_t n1 = (size_t)g->n_vertices + 1, m = (size_t)g->n_edges;
    if (memcmp(g->in_offsets, g->out_offsets, n1 * sizeof *g->in_offsets) != 0)
        return false;
    return !m || memcmp(g->in_src, g->out_dst, m * sizeof *g->in_src) == 0;
}

bool saga_graph_build_opts(const saga_graph *g, saga_graph_opts *out) {
    if (!g->build_known)
        return false;
    *out = g->build;
    return true;
}

/* Frees the graph (or unmaps its file image); accepts NULL. */
void saga_graph_free(saga_graph **g) {
    if (!g || !*g)
        return;
    graph_release(*g);
    *g = NULL;
}

int32_t saga_graph_n_vertices(const saga_graph *g) {
    return g->n_vertices;
}

int64_t saga_graph_n_edges(const saga_graph *g) {
    return g->n_edges;
}

bool saga_graph_has_weights(const saga_graph *g) {
    return g->in_w != NULL;
}

saga_csr saga_graph_in(const saga_graph *g) {
    return (saga_csr){g->n_vertices, g->n_edges, g->in_offsets, g->in_src, g->in_w};
}

saga_csr saga_graph_out(const saga_graph *g) {
    return (saga_csr){g->n_vertices, g->n_edges, g->out_offsets, g->out_dst, g->out_w};
}

int64_t saga_graph_orig_id(const saga_graph *g, int32_t v) {
    return g->orig_ids ? g->orig_ids[v] : (int64_t)v;
}

const int64_t *saga_graph_orig_ids(const saga_graph *g) {
    return g->orig_ids;
}

/* Binary search over the increasing original ids (a scan for a renumbered graph). */
saga_status saga_graph_find_vertex(const saga_graph *g, int64_t orig, int32_t *out) {
    if (g->ids_unordered) {
        for (int32_t v = 0; v < g->n_vertices; v++)
            if (g->orig_ids[v] == orig) {
                *out = v;
                return SAGA_OK;
            }
        return saga_error(SAGA_ERR_INVALID_ARG, "no vertex with original id %lld", (long long)orig);
    }
    if (!g->orig_ids) {
        if (orig < 0 || orig >= g->n_vertices)
            return saga_error(SAGA_ERR_INVALID_ARG, "no vertex with id %lld (ids are 0..%lld)",
                              (long long)orig, (long long)g->n_vertices - 1);
        *out = (int32_t)orig;
        return SAGA_OK;
    }
    int64_t lo = 0, hi = g->n_vertices;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (g->orig_ids[mid] < orig)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == g->n_vertices || g->orig_ids[lo] != orig)
        return saga_error(SAGA_ERR_INVALID_ARG, "no vertex with original id %lld", (long long)orig);
    *out = (int32_t)lo;
    return SAGA_OK;
}

/* Degrees, self-loops, duplicates, isolated and dangling vertices in one pass over the rows. */
void saga_graph_summarize(const saga_graph *g, saga_graph_summary *out) {
    saga_graph_summary s = {0};
    int32_t n = g->n_vertices;
    s.n_vertices = n;
    s.n_edges = g->n_edges;
    s.degree_mean = n > 0 ? (double)g->n_edges / (double)n : 0.0;
    int64_t loops = 0, dups = 0, isolated = 0, dangling = 0;
    int64_t in_min = n > 0 ? INT64_MAX : 0, in_max = 0, out_min = n > 0 ? INT64_MAX : 0,
            out_max = 0;
#pragma omp parallel for schedule(static) reduction(+ : loops, dups, isolated, dangling)          \
    reduction(min : in_min, out_min) reduction(max : in_max, out_max)
    for (int32_t v = 0; v < n; v++) {
        int64_t lo = g->in_offsets[v], hi = g->in_offsets[v + 1];
        int64_t din = hi - lo;
        int64_t dout = g->out_offsets[v + 1] - g->out_offsets[v];
        for (int64_t k = lo; k < hi; k++) {
            loops += g->in_src[k] == v;
            dups += k > lo && g->in_src[k] == g->in_src[k - 1];
        }
        isolated += din == 0 && dout == 0;
        dangling += dout == 0;
        in_min = din < in_min ? din : in_min;
        in_max = din > in_max ? din : in_max;
        out_min = dout < out_min ? dout : out_min;
        out_max = dout > out_max ? dout : out_max;
    }
    s.n_self_loops = loops;
    s.n_duplicates = dups;
    s.n_isolated = (int32_t)isolated;
    s.n_dangling = (int32_t)dangling;
    s.in_degree_min = (int32_t)in_min;
    s.in_degree_max = (int32_t)in_max;
    s.out_degree_min = (int32_t)out_min;
    s.out_degree_max = (int32_t)out_max;
    *out = s;
}

/* Builds the renumbered graph; see saga_graph.h. The edges are listed by new source in the
 * order of the old out-rows, so the builder finds them grouped and only sorts within rows. */
saga_status saga_graph_permute(saga_graph **out, const saga_graph *g, const int32_t *perm) {
    saga_status st = SAGA_OK;
    int32_t *inv = NULL, *src = NULL, *dst = NULL;
    float *w = NULL;
    int64_t *orig = NULL;
    saga_graph *h = NULL;

    /* ---- check inputs */
    SAGA_CHECK(out && g && (perm || g->n_vertices == 0), SAGA_ERR_INVALID_ARG,
               "saga_graph_permute: out, graph and permutation are required");
    int32_t n = g->n_vertices;
    int64_t m = g->n_edges;
    SAGA_TRY(
        saga_alloc_array((void **)&inv, n ? (size_t)n : 1, sizeof *inv, "inverse permutation"));
    for (int32_t v = 0; v < n; v++)
        inv[v] = -1;
    for (int32_t i = 0; i < n; i++) {
        int32_t u = perm[i];
        SAGA_CHECK(u >= 0 && u < n, SAGA_ERR_INVALID_ARG,
                   "saga_graph_permute: perm[%d] = %d is outside 0..%d", (int)i, (int)u,
                   (int)n - 1);
        SAGA_CHECK(inv[u] < 0, SAGA_ERR_INVALID_ARG,
                   "saga_graph_permute: vertex %d appears twice in the permutation (at %d and %d)",
                   (int)u, (int)inv[u], (int)i);
        inv[u] = i;
    }

    /* ---- the edges under the new numbering */
    SAGA_TRY(saga_alloc_array((void **)&src, m ? (size_t)m : 1, sizeof *src, "edge sources"));
    SAGA_TRY(saga_alloc_array((void **)&dst, m ? (size_t)m : 1, sizeof *dst, "edge targets"));
    if (g->out_w)
        SAGA_TRY(saga_alloc_array((void **)&w, m ? (size_t)m : 1, sizeof *w, "edge weights"));
    SAGA_TRY(saga_alloc_array((void **)&orig, n ? (size_t)n : 1, sizeof *orig, "original ids"));
    int64_t e = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t u = perm[i];
        orig[i] = saga_graph_orig_id(g, u);
        for (int64_t k = g->out_offsets[u]; k < g->out_offsets[u + 1]; k++, e++) {
            src[e] = i;
            dst[e] = inv[g->out_dst[k]];
            if (w)
                w[e] = g->out_w[k];
        }
    }
    saga_free(inv);
    inv = NULL;

    /* Everything is kept as it is (self-loops, parallel edges): only the names change. The ids
     * go in afterwards because the builder wants them increasing. */
    saga_graph_opts o = {.undirected = false,
                         .self_loops = SAGA_SELF_LOOPS_KEEP,
                         .duplicates = SAGA_DUPLICATES_KEEP};
    SAGA_TRY(saga_graph_from_edges_take(&h, n, m, &src, &dst, &w, NULL, &o));
    bool increasing = true;
    for (int32_t i = 1; i < n && increasing; i++)
        increasing = orig[i - 1] < orig[i];
    /* renumbering changes no edge: the graph is built as g was */
    h->build = g->build;
    h->build_known = g->build_known;
    if (increasing && (n == 0 || (orig[0] == 0 && orig[n - 1] == n - 1))) {
        saga_free(orig); /* the identity: no map, as the loaders do */
    } else {
        h->orig_ids = orig;
        h->ids_unordered = !increasing;
    }
    orig = NULL;
    *out = h;
    return SAGA_OK;
fail:
    saga_free(inv);
    saga_free(src);
    saga_free(dst);
    saga_free(w);
    saga_free(orig);
    return st;
}
