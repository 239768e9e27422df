/* test_graph.c - building graphs from edge arrays: CSR layout, options, errors, summaries. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"

#include "saga_graph.h"

#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

static void expect_row(saga_csr c, int32_t v, const int32_t *want, int64_t n) {
    int64_t lo = c.offsets[v], hi = c.offsets[v + 1];
    if (hi - lo != n)
        fail_msg("row %d has %lld entries, expected %lld", (int)v, (long long)(hi - lo),
                 (long long)n);
    for (int64_t k = 0; k < n; k++)
        if (c.indices[lo + k] != want[k])
            fail_msg("row %d entry %lld is %d, expected %d", (int)v, (long long)k,
                     (int)c.indices[lo + k], (int)want[k]);
}

static void test_graph_small_directed_layout(void **state) {
    (void)state;
    /* 0->1 0->2 2->0 1->2 3->2, listed out of order */
    const int32_t src[] = {3, 0, 2, 1, 0};
    const int32_t dst[] = {2, 2, 0, 2, 1};
    saga_graph *g = NULL;
    assert_int_equal(saga_graph_from_edges(&g, 5, 5, src, dst, NULL, NULL, NULL), SAGA_OK);
    assert_int_equal(saga_graph_n_vertices(g), 5);
    assert_int_equal(saga_graph_n_edges(g), 5);
    assert_false(saga_graph_has_weights(g));
    saga_csr in = saga_graph_in(g), out = saga_graph_out(g);
    assert_int_equal(in.n_rows, 5);
    assert_int_equal(in.nnz, 5);
    assert_null(in.weights);
    const int64_t in_off[] = {0, 1, 2, 5, 5, 5};
    const int32_t in_idx[] = {2, 0, 0, 1, 3};
    const int64_t out_off[] = {0, 2, 3, 4, 5, 5};
    const int32_t out_idx[] = {1, 2, 2, 0, 2};
    assert_memory_equal(in.offsets, in_off, sizeof in_off);
    assert_memory_equal(in.indices, in_idx, sizeof in_idx);
    assert_memory_equal(out.offsets, out_off, sizeof out_off);
    assert_memory_equal(out.indices, out_idx, sizeof out_idx);
    assert_null(saga_graph_orig_ids(g));
    assert_int_equal(saga_graph_orig_id(g, 3), 3);
    int32_t v = -1;
    assert_int_equal(saga_graph_find_vertex(g, 4, &v), SAGA_OK);
    assert_int_equal(v, 4);
    assert_int_equal(saga_graph_find_vertex(g, 5, &v), SAGA_ERR_INVALID_ARG);
    assert_int_equal(saga_graph_find_vertex(g, -1, &v), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("-1", NULL);

    saga_graph_summary s;
    saga_graph_summarize(g, &s);
    assert_int_equal(s.n_vertices, 5);
    assert_int_equal(s.n_edges, 5);
    assert_int_equal(s.n_self_loops, 0);
    assert_int_equal(s.n_duplicates, 0);
    assert_int_equal(s.in_degree_min, 0);
    assert_int_equal(s.in_degree_max, 3);
    assert_int_equal(s.out_degree_min, 0);
    assert_int_equal(s.out_degree_max, 2);
    assert_true(s.degree_mean == 1.0);
    assert_int_equal(s.n_isolated, 1); /* vertex 4 */
    assert_int_equal(s.n_dangling, 1); /* vertex 4; 3 has an out-edge */
    saga_graph_free(&g);
    assert_null(g);
    saga_graph_free(&g);
    saga_graph_free(NULL);
}

static void test_graph_take_clears_pointers_and_keeps_orig_ids(void **state) {
    (void)state;
    int32_t *src = malloc(3 * sizeof *src), *dst = malloc(3 * sizeof *dst);
    float *w = malloc(3 * sizeof *w);
    int64_t *orig = malloc(3 * sizeof *orig);
    src[0] = 2, dst[0] = 0, w[0] = 0.5f;
    src[1] = 0, dst[1] = 1, w[1] = 1.5f;
    src[2] = 1, dst[2] = 0, w[2] = 2.5f;
    orig[0] = 10, orig[1] = 1000000000000LL, orig[2] = INT64_MAX;
    saga_graph *g = NULL;
    assert_int_equal(saga_graph_from_edges_take(&g, 3, 3, &src, &dst, &w, &orig, NULL), SAGA_OK);
    assert_null(src);
    assert_null(dst);
    assert_null(w);
    assert_null(orig);
    assert_true(saga_graph_has_weights(g));
    saga_csr in = saga_graph_in(g), out = saga_graph_out(g);
    /* in row 0: sources 1 (2.5) and 2 (0.5) */
    assert_int_equal(in.indices[0], 1);
    assert_true(in.weights[0] == 2.5f);
    assert_int_equal(in.indices[1], 2);
    assert_true(in.weights[1] == 0.5f);
    assert_true(out.weights[out.offsets[0]] == 1.5f);
    assert_true(saga_graph_orig_id(g, 2) == INT64_MAX);
    assert_non_null(saga_graph_orig_ids(g));
    int32_t v = -1;
    assert_int_equal(saga_graph_find_vertex(g, 1000000000000LL, &v), SAGA_OK);
    assert_int_equal(v, 1);
    assert_int_equal(saga_graph_find_vertex(g, 11, &v), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("11", NULL);
    assert_int_equal(saga_graph_find_vertex(g, INT64_MAX, &v), SAGA_OK);
    assert_int_equal(v, 2);
    saga_graph_free(&g);
}

static void test_graph_invalid_arguments(void **state) {
    (void)state;
    saga_graph *g = NULL;
    const int32_t src[] = {0, 1, 2, 3};
    const int32_t dst[] = {1, 2, 3, 7};
    assert_int_equal(saga_graph_from_edges(&g, 5, 4, src, dst, NULL, NULL, NULL),
                     SAGA_ERR_INVALID_ARG);
    assert_null(g);
    saga_test_assert_error_contains("edge 3", "destination 7", "0..4", NULL);
    const int32_t neg[] = {0, -2};
    assert_int_equal(saga_graph_from_edges(&g, 5, 2, neg, dst, NULL, NULL, NULL),
                     SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("edge 1", "source -2", NULL);
    const int64_t orig[] = {5, 9, 9, 12, 20};
    assert_int_equal(saga_graph_from_edges(&g, 5, 3, src, dst, NULL, orig, NULL),
                     SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("strictly increasing", "vertex 2", NULL);
    /* a weight a weighted edge-list file could not give: NaN or infinite */
    const float bad_w[2][3] = {{1.0f, NAN, 2.0f}, {1.0f, 2.0f, -INFINITY}};
    for (int t = 0; t < 2; t++) {
        assert_int_equal(saga_graph_from_edges(&g, 5, 3, src, dst, bad_w[t], NULL, NULL),
                         SAGA_ERR_INVALID_ARG);
        assert_null(g);
        saga_test_assert_error_contains(t ? "edge 2" : "edge 1", "not finite", NULL);
    }
    assert_int_equal(saga_graph_from_edges(&g, -1, 0, NULL, NULL, NULL, NULL, NULL),
                     SAGA_ERR_INVALID_ARG);
    assert_int_equal(saga_graph_from_edges(&g, 3, 2, NULL, NULL, NULL, NULL, NULL),
                     SAGA_ERR_INVALID_ARG);
    saga_graph_opts o = saga_graph_opts_defaults();
    o.duplicates = (saga_duplicates)42;
    assert_int_equal(saga_graph_from_edges(&g, 5, 3, src, dst, NULL, NULL, &o),
                     SAGA_ERR_INVALID_ARG);
    /* take frees and clears on failure too */
    int32_t *s = malloc(sizeof *s), *d = malloc(sizeof *d);
    s[0] = 0, d[0] = 9;
    assert_int_equal(saga_graph_from_edges_take(&g, 2, 1, &s, &d, NULL, NULL, NULL),
                     SAGA_ERR_INVALID_ARG);
    assert_null(s);
    assert_null(d);
    assert_null(g);
}

static void test_graph_empty(void **state) {
    (void)state;
    saga_graph *g = NULL;
    assert_int_equal(saga_graph_from_edges(&g, 3, 0, NULL, NULL, NULL, NULL, NULL), SAGA_OK);
    saga_graph_summary s;
    saga_graph_summarize(g, &s);
    assert_int_equal(s.n_vertices, 3);
    assert_int_equal(s.n_edges, 0);
    assert_int_equal(s.n_isolated, 3);
    assert_int_equal(s.n_dangling, 3);
    assert_int_equal(saga_graph_in(g).offsets[3], 0);
    saga_graph_free(&g);
    assert_int_equal(saga_graph_from_edges(&g, 0, 0, NULL, NULL, NULL, NULL, NULL), SAGA_OK);
    saga_graph_summarize(g, &s);
    assert_int_equal(s.n_vertices, 0);
    assert_int_equal(s.in_degree_min, 0);
    assert_true(s.degree_mean == 0.0);
    saga_graph_free(&g);
}

static void test_graph_undirected_self_loops_duplicates(void **state) {
    (void)state;
    /* 0-1 twice (once reversed), a self-loop on 2, 1-2 weighted */
    const int32_t src[] = {0, 1, 2, 1, 2};
    const int32_t dst[] = {1, 0, 2, 2, 2};
    const float w[] = {1.0f, 4.0f, 8.0f, 2.0f, 16.0f};
    saga_graph *g = NULL;
    saga_graph_opts o = saga_graph_opts_defaults();
    o.undirected = true; /* AUTO -> DROP */
    assert_int_equal(saga_graph_from_edges(&g, 3, 5, src, dst, NULL, NULL, &o), SAGA_OK);
    /* arcs: 0-1, 1-0, 1-2, 2-1, 2-2 */
    assert_int_equal(saga_graph_n_edges(g), 5);
    saga_csr in = saga_graph_in(g);
    expect_row(in, 0, (const int32_t[]){1}, 1);
    expect_row(in, 1, (const int32_t[]){0, 2}, 2);
    expect_row(in, 2, (const int32_t[]){1, 2}, 2);
    saga_graph_free(&g);

    o.duplicates = SAGA_DUPLICATES_KEEP;
    assert_int_equal(saga_graph_from_edges(&g, 3, 5, src, dst, NULL, NULL, &o), SAGA_OK);
    /* 0->1 1->0 2->2 1->2 2->2 plus reverses of the 3 non-loops: 8 arcs */
    assert_int_equal(saga_graph_n_edges(g), 8);
    expect_row(saga_graph_in(g), 2, (const int32_t[]){1, 2, 2}, 3);
    saga_graph_summary s;
    saga_graph_summarize(g, &s);
    assert_int_equal(s.n_self_loops, 2);
    assert_int_equal(s.n_duplicates, 3); /* 0->1, 1->0, 2->2 each once more */
    saga_graph_free(&g);

    o.self_loops = SAGA_SELF_LOOPS_DROP;
    o.duplicates = SAGA_DUPLICATES_SUM;
    assert_int_equal(saga_graph_from_edges(&g, 3, 5, src, dst, w, NULL, &o), SAGA_OK);
    assert_int_equal(saga_graph_n_edges(g), 4);
    in = saga_graph_in(g);
    expect_row(in, 0, (const int32_t[]){1}, 1);
    assert_true(in.weights[in.offsets[0]] == 5.0f); /* 1 + 4 */
    expect_row(in, 2, (const int32_t[]){1}, 1);
    assert_true(in.weights[in.offsets[2]] == 2.0f);
    saga_csr out = saga_graph_out(g);
    assert_true(out.weights[out.offsets[1]] == 5.0f); /* 1->0 */
    assert_true(out.weights[out.offsets[1] + 1] == 2.0f);
    saga_graph_free(&g);

    o.duplicates = SAGA_DUPLICATES_DROP; /* the smallest weight of a group stays */
    assert_int_equal(saga_graph_from_edges(&g, 3, 5, src, dst, w, NULL, &o), SAGA_OK);
    in = saga_graph_in(g);
    assert_true(in.weights[in.offsets[0]] == 1.0f);
    assert_true(in.weights[in.offsets[1]] == 1.0f);
    saga_graph_free(&g);

    /* directed: AUTO keeps parallel edges, DROP removes them */
    const int32_t ds[] = {0, 0, 0, 1};
    const int32_t dd[] = {1, 1, 1, 1};
    o = saga_graph_opts_defaults();
    assert_int_equal(saga_graph_from_edges(&g, 2, 4, ds, dd, NULL, NULL, &o), SAGA_OK);
    assert_int_equal(saga_graph_n_edges(g), 4);
    saga_graph_summarize(g, &s);
    assert_int_equal(s.n_duplicates, 2);
    assert_int_equal(s.n_self_loops, 1);
    saga_graph_free(&g);
    o.duplicates = SAGA_DUPLICATES_DROP;
    assert_int_equal(saga_graph_from_edges(&g, 2, 4, ds, dd, NULL, NULL, &o), SAGA_OK);
    assert_int_equal(saga_graph_n_edges(g), 2);
    expect_row(saga_graph_in(g), 1, (const int32_t[]){0, 1}, 2);
    saga_graph_free(&g);
}

/* ---- against a plain reference ---------------------------------------------------------- */

typedef struct triple {
    int32_t a, b; /* row, column */
    float w;
} triple;

static int cmp_triple(const void *x, const void *y) {
    const triple *p = x, *q = y;
    if (p->a != q->a)
        return p->a < q->a ? -1 : 1;
    if (p->b != q->b)
        return p->b < q->b ? -1 : 1;
    return (p->w > q->w) - (p->w < q->w);
}

/* Checks one CSR direction against the edge list (rows = key a), weights as multisets. */
static void check_csr(saga_csr c, int32_t n, triple *t, int64_t m) {
    qsort(t, (size_t)m, sizeof *t, cmp_triple);
    assert_int_equal(c.nnz, m);
    assert_int_equal(c.offsets[0], 0);
    assert_int_equal(c.offsets[n], m);
    triple *mine = malloc((size_t)(m ? m : 1) * sizeof *mine);
    for (int32_t v = 0; v < n; v++) {
        assert_true(c.offsets[v] <= c.offsets[v + 1]);
        for (int64_t k = c.offsets[v]; k < c.offsets[v + 1]; k++) {
            if (k > c.offsets[v])
                assert_true(c.indices[k - 1] <= c.indices[k]); /* sorted rows */
            mine[k] = (triple){v, c.indices[k], c.weights ? c.weights[k] : 0.0f};
        }
    }
    qsort(mine, (size_t)m, sizeof *mine, cmp_triple);
    for (int64_t k = 0; k < m; k++)
        if (cmp_triple(&mine[k], &t[k]) != 0)
            fail_msg("entry %lld: (%d,%d,%g) vs reference (%d,%d,%g)", (long long)k, (int)mine[k].a,
                     (int)mine[k].b, (double)mine[k].w, (int)t[k].a, (int)t[k].b, (double)t[k].w);
    free(mine);
}

static uint64_t rng_next(uint64_t *s) {
    *s += 0x9e3779b97f4a7c15ULL;
    uint64_t z = *s;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void random_edges(uint64_t seed, int32_t n, int64_t m, int32_t *src, int32_t *dst,
                         float *w) {
    for (int64_t k = 0; k < m; k++) {
        uint64_t r = rng_next(&seed);
        /* a skewed distribution: many edges land on a few hubs */
        int32_t a = (int32_t)(r % (uint64_t)n);
        int32_t b = (int32_t)((r >> 32) % (uint64_t)n);
        if ((r >> 20) % 4 == 0)
            b = b % 7;
        src[k] = a;
        dst[k] = b;
        if (w)
            w[k] = (float)((r >> 40) % 1000) / 8.0f;
    }
}

static void test_graph_random_against_reference(void **state) {
    (void)state;
    const int32_t sizes_n[] = {1, 7, 300, 5000, 100000, 3000000};
    const int64_t sizes_m[] = {20, 100, 10000, 200000, 300000, 400000};
    for (int c = 0; c < 6; c++) {
        int32_t n = sizes_n[c];
        int64_t m = sizes_m[c];
        int32_t *src = malloc((size_t)m * sizeof *src), *dst = malloc((size_t)m * sizeof *dst);
        float *w = malloc((size_t)m * sizeof *w);
        random_edges(42 + (uint64_t)c, n, m, src, dst, w);
        saga_graph *g = NULL;
        assert_int_equal(saga_graph_from_edges(&g, n, m, src, dst, w, NULL, NULL), SAGA_OK);
        triple *t = malloc((size_t)m * sizeof *t);
        for (int64_t k = 0; k < m; k++)
            t[k] = (triple){dst[k], src[k], w[k]};
        check_csr(saga_graph_in(g), n, t, m);
        for (int64_t k = 0; k < m; k++)
            t[k] = (triple){src[k], dst[k], w[k]};
        check_csr(saga_graph_out(g), n, t, m);
        saga_graph_summary s;
        saga_graph_summarize(g, &s);
        int64_t loops = 0;
        for (int64_t k = 0; k < m; k++)
            loops += src[k] == dst[k];
        assert_int_equal(s.n_self_loops, loops);
        saga_graph_free(&g);
        free(t);
        free(src);
        free(dst);
        free(w);
    }
}

static int cmp_src_dst_desc(const void *x, const void *y) {
    const int32_t *p = x, *q = y;
    return p[0] != q[0] ? (p[0] > q[0]) - (p[0] < q[0]) : (p[1] < q[1]) - (p[1] > q[1]);
}

static void test_graph_grouped_input_and_drop_against_reference(void **state) {
    (void)state;
    /* edges already grouped by source (as SNAP files are) take the path without the sort */
    int32_t n = 30000;
    int64_t m = 250000;
    int32_t *pairs = malloc((size_t)m * 2 * sizeof *pairs);
    int32_t *src = malloc((size_t)m * sizeof *src), *dst = malloc((size_t)m * sizeof *dst);
    float *w = malloc((size_t)m * sizeof *w);
    random_edges(11, n, m, src, dst, NULL);
    for (int64_t k = 0; k < m; k++) {
        pairs[2 * k] = src[k];
        pairs[2 * k + 1] = dst[k];
    }
    /* sources ascending, targets descending within a row (the rows still need sorting) */
    qsort(pairs, (size_t)m, 2 * sizeof *pairs, cmp_src_dst_desc);
    for (int64_t k = 0; k < m; k++) {
        src[k] = pairs[2 * k];
        dst[k] = pairs[2 * k + 1];
        w[k] = (float)(k % 97); /* weights tell parallel edges apart */
    }
    triple *t = malloc((size_t)m * sizeof *t);
    for (int64_t k = 0; k < m; k++)
        t[k] = (triple){dst[k], src[k], w[k]};
    saga_graph *g = NULL;
    assert_int_equal(saga_graph_from_edges(&g, n, m, src, dst, w, NULL, NULL), SAGA_OK);
    check_csr(saga_graph_in(g), n, t, m);
    saga_graph_free(&g);

    /* DROP: one edge per pair with the smallest weight */
    saga_graph_opts o = saga_graph_opts_defaults();
    o.duplicates = SAGA_DUPLICATES_DROP;
    assert_int_equal(saga_graph_from_edges(&g, n, m, src, dst, w, NULL, &o), SAGA_OK);
    for (int64_t k = 0; k < m; k++)
        t[k] = (triple){src[k], dst[k], w[k]};
    qsort(t, (size_t)m, sizeof *t, cmp_triple);
    int64_t j = 0;
    for (int64_t k = 0; k < m; k++)
        if (k == 0 || t[k].a != t[k - 1].a || t[k].b != t[k - 1].b)
            t[j++] = t[k]; /* sorted by weight within a pair: the first is the smallest */
    check_csr(saga_graph_out(g), n, t, j);
    saga_graph_free(&g);
    free(t);
    free(pairs);
    free(src);
    free(dst);
    free(w);
}

static void test_graph_undirected_random_against_reference(void **state) {
    (void)state;
    int32_t n = 20000;
    int64_t m = 150000;
    int32_t *src = malloc((size_t)m * sizeof *src), *dst = malloc((size_t)m * sizeof *dst);
    float *w = malloc((size_t)m * sizeof *w);
    random_edges(7, n, m, src, dst, w);
    /* reference: both directions, self-loops once, then one edge per pair with summed weight */
    triple *t = malloc((size_t)(2 * m) * sizeof *t);
    int64_t mt = 0;
    for (int64_t k = 0; k < m; k++) {
        t[mt++] = (triple){dst[k], src[k], w[k]};
        if (src[k] != dst[k])
            t[mt++] = (triple){src[k], dst[k], w[k]};
    }
    saga_graph_opts o = saga_graph_opts_defaults();
    o.undirected = true;
    o.duplicates = SAGA_DUPLICATES_KEEP;
    saga_graph *g = NULL;
    assert_int_equal(saga_graph_from_edges(&g, n, m, src, dst, w, NULL, &o), SAGA_OK);
    check_csr(saga_graph_out(g), n, t, mt); /* sorts t */
    saga_graph_free(&g);
    int64_t j = 0;
    for (int64_t k = 0; k < mt;) {
        int64_t r = k;
        double sum = 0;
        while (r < mt && t[r].a == t[k].a && t[r].b == t[k].b)
            sum += t[r++].w;
        t[j++] = (triple){t[k].a, t[k].b, (float)sum};
        k = r;
    }
    o.duplicates = SAGA_DUPLICATES_SUM;
    assert_int_equal(saga_graph_from_edges(&g, n, m, src, dst, w, NULL, &o), SAGA_OK);
    check_csr(saga_graph_in(g), n, t, j);
    /* symmetric: the out-CSR equals the in-CSR */
    saga_csr in = saga_graph_in(g), out = saga_graph_out(g);
    assert_memory_equal(in.offsets, out.offsets, ((size_t)n + 1) * sizeof(int64_t));
    assert_memory_equal(in.indices, out.indices, (size_t)j * sizeof(int32_t));
    assert_memory_equal(in.weights, out.weights, (size_t)j * sizeof(float));
    saga_graph_free(&g);
    free(t);
    free(src);
    free(dst);
    free(w);
}

/* The builder records its options; saga_graph_symmetrize of a directed graph is the graph built
 * undirected from the same edges, and both are symmetric. */
static void test_graph_build_record_and_symmetrize(void **state) {
    (void)state;
    int32_t n = 3000;
    int64_t m = 20000;
    int32_t *src = malloc((size_t)m * sizeof *src), *dst = malloc((size_t)m * sizeof *dst);
    float *w = malloc((size_t)m * sizeof *w);
    random_edges(11, n, m, src, dst, w);
    saga_graph *d = NULL, *u = NULL, *s = NULL, *p = NULL;
    saga_graph_opts o = saga_graph_opts_defaults(), b;
    o.self_loops = SAGA_SELF_LOOPS_DROP;
    assert_int_equal(saga_graph_from_edges(&d, n, m, src, dst, w, NULL, &o), SAGA_OK);
    assert_true(saga_graph_build_opts(d, &b));
    assert_false(b.undirected);
    assert_int_equal(b.self_loops, SAGA_SELF_LOOPS_DROP);
    assert_int_equal(b.duplicates, SAGA_DUPLICATES_KEEP); /* auto, resolved */
    assert_false(saga_graph_is_symmetric(d));

    o.undirected = true;
    assert_int_equal(saga_graph_from_edges(&u, n, m, src, dst, w, NULL, &o), SAGA_OK);
    assert_true(saga_graph_build_opts(u, &b));
    assert_true(b.undirected);
    assert_int_equal(b.duplicates, SAGA_DUPLICATES_DROP);
    assert_true(saga_graph_is_symmetric(u));

    assert_int_equal(saga_graph_symmetrize(&s, d), SAGA_OK);
    assert_true(saga_graph_is_symmetric(s));
    assert_int_equal(saga_graph_n_edges(s), saga_graph_n_edges(u));
    saga_csr a = saga_graph_out(u), c = saga_graph_out(s);
    assert_memory_equal(a.offsets, c.offsets, ((size_t)n + 1) * sizeof(int64_t));
    assert_memory_equal(a.indices, c.indices, (size_t)a.nnz * sizeof(int32_t));
    assert_memory_equal(a.weights, c.weights, (size_t)a.nnz * sizeof(float));
    assert_true(saga_graph_build_opts(s, &b));
    assert_true(b.undirected);
    assert_int_equal(b.self_loops, SAGA_SELF_LOOPS_DROP);
    assert_int_equal(b.duplicates, SAGA_DUPLICATES_DROP);

    /* summed weights of a directed graph: the symmetrized one is no build of the source */
    saga_graph_free(&d);
    o.undirected = false;
    o.duplicates = SAGA_DUPLICATES_SUM;
    assert_int_equal(saga_graph_from_edges(&d, n, m, src, dst, w, NULL, &o), SAGA_OK);
    saga_graph_free(&s);
    assert_int_equal(saga_graph_symmetrize(&s, d), SAGA_OK);
    assert_false(saga_graph_build_opts(s, &b));

    /* renumbering keeps the record */
    int32_t *perm = malloc((size_t)n * sizeof *perm);
    for (int32_t v = 0; v < n; v++)
        perm[v] = n - 1 - v;
    assert_int_equal(saga_graph_permute(&p, u, perm), SAGA_OK);
    assert_true(saga_graph_build_opts(p, &b));
    assert_true(b.undirected);
    assert_true(saga_graph_is_symmetric(p));
    free(perm);
    saga_graph_free(&p);
    saga_graph_free(&s);
    saga_graph_free(&u);
    saga_graph_free(&d);
    free(src);
    free(dst);
    free(w);
}

static void test_graph_deterministic_across_threads(void **state) {
    (void)state;
#ifdef _OPENMP
    int32_t n = 50000;
    int64_t m = 400000;
    int32_t *src = malloc((size_t)m * sizeof *src), *dst = malloc((size_t)m * sizeof *dst);
    float *w = malloc((size_t)m * sizeof *w);
    random_edges(99, n, m, src, dst, w);
    saga_graph_opts o = saga_graph_opts_defaults();
    o.undirected = true;
    o.duplicates = SAGA_DUPLICATES_KEEP;
    saga_graph *g[2] = {NULL, NULL};
    int saved = omp_get_max_threads();
    for (int i = 0; i < 2; i++) {
        omp_set_num_threads(i == 0 ? 1 : 3);
        assert_int_equal(saga_graph_from_edges(&g[i], n, m, src, dst, w, NULL, &o), SAGA_OK);
    }
    omp_set_num_threads(saved);
    saga_csr a = saga_graph_in(g[0]), b = saga_graph_in(g[1]);
    assert_int_equal(a.nnz, b.nnz);
    assert_memory_equal(a.indices, b.indices, (size_t)a.nnz * sizeof(int32_t));
    assert_memory_equal(a.weights, b.weights, (size_t)a.nnz * sizeof(float));
    a = saga_graph_out(g[0]), b = saga_graph_out(g[1]);
    assert_memory_equal(a.weights, b.weights, (size_t)a.nnz * sizeof(float));
    saga_graph_free(&g[0]);
    saga_graph_free(&g[1]);
    free(src);
    free(dst);
    free(w);
#else
    skip();
#endif
}

static void test_graph_failing_allocations(void **state) {
    (void)state;
    const int32_t src[] = {0, 1, 2, 3, 3, 4, 1};
    const int32_t dst[] = {1, 2, 0, 3, 4, 0, 2};
    const float w[] = {1, 2, 3, 4, 5, 6, 7};
    const int64_t orig[] = {3, 5, 8, 13, 21};
    for (int variant = 0; variant < 2; variant++) {
        saga_graph_opts o = saga_graph_opts_defaults();
        o.undirected = variant == 1;
        bool ok = false;
        int failures = 0;
        for (long n = 1; n < 50 && !ok; n++) {
            saga_graph *g = NULL;
            saga_test_fail_alloc_after(n);
            saga_status st = saga_graph_from_edges(&g, 5, 7, src, dst, w, orig, &o);
            saga_test_fail_alloc_after(0);
            if (st == SAGA_OK) {
                ok = true;
                assert_int_equal(saga_graph_n_edges(g), variant ? 11 : 7);
                assert_int_equal(saga_graph_orig_id(g, 4), 21);
                saga_graph_free(&g);
            } else {
                assert_int_equal(st, SAGA_ERR_OUT_OF_MEMORY);
                assert_null(g);
                failures++;
            }
        }
        assert_true(ok);
        assert_true(failures >= 6);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_graph_small_directed_layout),
        cmocka_unit_test(test_graph_take_clears_pointers_and_keeps_orig_ids),
        cmocka_unit_test(test_graph_invalid_arguments),
        cmocka_unit_test(test_graph_empty),
        cmocka_unit_test(test_graph_undirected_self_loops_duplicates),
        cmocka_unit_test(test_graph_random_against_reference),
        cmocka_unit_test(test_graph_grouped_input_and_drop_against_reference),
        cmocka_unit_test(test_graph_undirected_random_against_reference),
        cmocka_unit_test(test_graph_build_record_and_symmetrize),
        cmocka_unit_test(test_graph_deterministic_across_threads),
        cmocka_unit_test(test_graph_failing_allocations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
