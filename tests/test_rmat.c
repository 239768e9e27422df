/* test_rmat.c - the R-MAT generator: determinism, counts, skew, scrambling, text round trip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"

#include "saga_datasets.h"
#include "saga_io.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

typedef struct edges {
    int32_t *src, *dst;
    int64_t m;
    int32_t n;
} edges;

static edges gen(const saga_rmat_params *p) {
    edges e = {0};
    assert_int_equal(saga_rmat_edges(&e.src, &e.dst, &e.m, &e.n, p), SAGA_OK);
    return e;
}

static void edges_free(edges *e) {
    saga_free(e->src);
    saga_free(e->dst);
    memset(e, 0, sizeof *e);
}

static saga_rmat_params small(int scale, int edge_factor, uint64_t seed) {
    saga_rmat_params p = saga_rmat_params_defaults();
    p.scale = scale;
    p.edge_factor = edge_factor;
    p.seed = seed;
    return p;
}

static void test_rmat_defaults(void **state) {
    (void)state;
    saga_rmat_params p = saga_rmat_params_defaults();
    assert_int_equal(p.scale, 16);
    assert_int_equal(p.edge_factor, 16);
    assert_true(p.a == 0.57 && p.b == 0.19 && p.c == 0.19);
    assert_true(p.seed == 1);
    assert_true(p.scramble);
}

static void test_rmat_counts_and_range(void **state) {
    (void)state;
    saga_rmat_params p = small(12, 8, 3);
    edges e = gen(&p);
    assert_int_equal(e.n, 4096);
    assert_int_equal(e.m, 8 * 4096);
    for (int64_t k = 0; k < e.m; k++) {
        assert_true(e.src[k] >= 0 && e.src[k] < e.n);
        assert_true(e.dst[k] >= 0 && e.dst[k] < e.n);
    }
    edges_free(&e);
}

static int64_t n_differ(const edges *x, const edges *y) {
    int64_t d = 0;
    for (int64_t k = 0; k < x->m; k++)
        d += x->src[k] != y->src[k] || x->dst[k] != y->dst[k];
    return d;
}

static void test_rmat_deterministic_across_threads(void **state) {
    (void)state;
    saga_rmat_params p = small(13, 16, 42);
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    edges one = gen(&p);
    omp_set_num_threads(3);
    edges three = gen(&p);
    omp_set_num_threads(saved);
    edges again = gen(&p);
    assert_int_equal(one.m, three.m);
    assert_int_equal(n_differ(&one, &three), 0);
    assert_int_equal(n_differ(&one, &again), 0);

    p.seed = 43;
    edges other = gen(&p);
    /* A different seed changes nearly every edge, not a few. */
    assert_true(n_differ(&one, &other) > one.m * 9 / 10);
    edges_free(&one);
    edges_free(&three);
    edges_free(&again);
    edges_free(&other);
}

static void degrees(const edges *e, int32_t **deg_out) {
    int32_t *deg = calloc((size_t)e->n, sizeof *deg);
    assert_non_null(deg);
    for (int64_t k = 0; k < e->m; k++) {
        deg[e->src[k]]++;
        deg[e->dst[k]]++;
    }
    *deg_out = deg;
}

static void test_rmat_degree_is_skewed(void **state) {
    (void)state;
    saga_rmat_params p = small(14, 16, 1);
    edges e = gen(&p);
    int32_t *deg = NULL;
    degrees(&e, &deg);
    int32_t max = 0, zero = 0;
    for (int32_t v = 0; v < e.n; v++) {
        max = deg[v] > max ? deg[v] : max;
        zero += deg[v] == 0;
    }
    double mean = 2.0 * (double)e.m / e.n; /* 32 */
    /* A uniform random graph of this size has max degree near 60; R-MAT's is in the hundreds,
     * and many vertices get no edge at all. */
    assert_true(max > 20 * mean);
    assert_true(zero > e.n / 20);
    free(deg);
    edges_free(&e);
}

/* Without scrambling, the first draw puts the source in the lower half of the ids with
 * probability a+b and the destination there with probability a+c; scrambling must remove that
 * correlation between degree and id. */
static void test_rmat_quadrants_and_scrambling(void **state) {
    (void)state;
    saga_rmat_params p = small(14, 16, 9);
    p.a = 0.6, p.b = 0.25, p.c = 0.1; /* a+b = 0.85, a+c = 0.70 */
    p.scramble = false;
    edges plain = gen(&p);
    int64_t half = plain.n / 2, src_low = 0, dst_low = 0;
    for (int64_t k = 0; k < plain.m; k++) {
        src_low += plain.src[k] < half;
        dst_low += plain.dst[k] < half;
    }
    double fs = (double)src_low / (double)plain.m, fd = (double)dst_low / (double)plain.m;
    assert_true(fs > 0.845 && fs < 0.855);
    assert_true(fd > 0.695 && fd < 0.705);
    /* Unscrambled, vertex 0 wins every draw with probability a^scale: the top vertex. */
    int32_t *deg = NULL;
    degrees(&plain, &deg);
    int32_t argmax = 0;
    for (int32_t v = 1; v < plain.n; v++)
        if (deg[v] > deg[argmax])
            argmax = v;
    assert_int_equal(argmax, 0);
    free(deg);

    p.scramble = true;
    edges mixed = gen(&p);
    src_low = 0;
    for (int64_t k = 0; k < mixed.m; k++)
        src_low += mixed.src[k] < half;
    fs = (double)src_low / (double)mixed.m;
    assert_true(fs > 0.35 && fs < 0.65);
    /* The permutation is a bijection: the sorted degree sequences are the same. */
    int32_t *d1 = NULL, *d2 = NULL;
    degrees(&plain, &d1);
    degrees(&mixed, &d2);
    int64_t hist1[64] = {0}, hist2[64] = {0};
    for (int32_t v = 0; v < plain.n; v++) {
        int b1 = 0, b2 = 0;
        while ((1 << b1) <= d1[v] && b1 < 63)
            b1++;
        while ((1 << b2) <= d2[v] && b2 < 63)
            b2++;
        hist1[b1]++;
        hist2[b2]++;
    }
    int32_t max1 = 0, max2 = 0;
    for (int32_t v = 0; v < plain.n; v++) {
        max1 = d1[v] > max1 ? d1[v] : max1;
        max2 = d2[v] > max2 ? d2[v] : max2;
    }
    assert_int_equal(max1, max2);
    assert_memory_equal(hist1, hist2, sizeof hist1);
    free(d1);
    free(d2);
    edges_free(&plain);
    edges_free(&mixed);
}

static void test_rmat_rejects_bad_params(void **state) {
    (void)state;
    int32_t *s = NULL, *d = NULL;
    int64_t m = 0;
    int32_t n = 0;
    saga_rmat_params p = small(0, 4, 1);
    assert_int_equal(saga_rmat_edges(&s, &d, &m, &n, &p), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("scale", "1..30", "got 0", NULL);
    p = small(31, 4, 1);
    assert_int_equal(saga_rmat_edges(&s, &d, &m, &n, &p), SAGA_ERR_INVALID_ARG);
    p = small(4, 0, 1);
    assert_int_equal(saga_rmat_edges(&s, &d, &m, &n, &p), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("edge factor", NULL);
    p = small(4, 4, 1);
    p.a = 0.7, p.b = 0.2, p.c = 0.2;
    assert_int_equal(saga_rmat_edges(&s, &d, &m, &n, &p), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("a+b+c", NULL);
    p.a = -0.1;
    assert_int_equal(saga_rmat_edges(&s, &d, &m, &n, &p), SAGA_ERR_INVALID_ARG);
    assert_null(s);
    assert_null(d);
    assert_int_equal(saga_rmat_write(saga_test_tmp("bad.txt"), &p), SAGA_ERR_INVALID_ARG);
}

static void test_rmat_d_zero_never_draws_d(void **state) {
    (void)state;
    saga_rmat_params p = small(10, 16, 5);
    p.a = 0.5, p.b = 0.25, p.c = 0.25; /* d = 0: never both bits set at any level */
    p.scramble = false;
    edges e = gen(&p);
    for (int64_t k = 0; k < e.m; k++)
        assert_int_equal(e.src[k] & e.dst[k], 0);
    edges_free(&e);
}

static void test_rmat_alloc_failure_leaks_nothing(void **state) {
    (void)state;
    saga_rmat_params p = small(8, 4, 1);
    for (long n = 1; n <= 2; n++) {
        int32_t *s = NULL, *d = NULL;
        int64_t m = 0;
        int32_t nv = 0;
        saga_test_fail_alloc_after(n);
        saga_status st = saga_rmat_edges(&s, &d, &m, &nv, &p);
        saga_test_fail_alloc_after(0);
        assert_int_equal(st, SAGA_ERR_OUT_OF_MEMORY);
        assert_null(s);
        assert_null(d);
    }
}

static char *slurp(const char *path, size_t *len) {
    gzFile f = gzopen(path, "rb"); /* reads plain files too */
    assert_non_null(f);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    int got;
    while ((got = gzread(f, buf + n, (unsigned)(cap - n))) > 0) {
        n += (size_t)got;
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
    }
    assert_int_equal(got, 0);
    gzclose(f);
    *len = n;
    return buf;
}

static char *raw(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static int cmp_pair(const void *a, const void *b) {
    const int64_t *x = a, *y = b;
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

/* Writes text and gzip, checks the header and the bytes, loads both back and compares the
 * multiset of (original src, original dst) with the generated edges. */
static void test_rmat_write_load_round_trip(void **state) {
    (void)state;
    saga_rmat_params p = small(9, 6, 77);
    edges e = gen(&p);
    const char *txt = saga_test_tmp("rmat.txt");
    char gzpath[4096];
    snprintf(gzpath, sizeof gzpath, "%s", saga_test_tmp("rmat.txt.gz"));
    assert_int_equal(saga_rmat_write(txt, &p), SAGA_OK);
    assert_int_equal(saga_rmat_write(gzpath, &p), SAGA_OK);

    size_t tlen = 0, zlen = 0;
    char *text = raw(txt, &tlen);
    char *unz = slurp(gzpath, &zlen);
    assert_int_equal(tlen, zlen);
    assert_memory_equal(text, unz, tlen);
    const char *want = "# R-MAT scale 9 edge_factor 6 a 0.57 b 0.19 c 0.19 seed 77\n";
    assert_true(strncmp(text, want, strlen(want)) == 0);
    /* The first edge line is edge 0. */
    const char *line = strchr(strchr(text, '\n') + 1, '\n') + 1;
    char expect[64];
    snprintf(expect, sizeof expect, "%d\t%d\n", e.src[0], e.dst[0]);
    assert_true(strncmp(line, expect, strlen(expect)) == 0);
    free(unz);

    /* Same parameters write the same gzip bytes. */
    char again[4096];
    snprintf(again, sizeof again, "%s", saga_test_tmp("rmat2.txt.gz"));
    assert_int_equal(saga_rmat_write(again, &p), SAGA_OK);
    size_t l1 = 0, l2 = 0;
    char *z1 = raw(gzpath, &l1), *z2 = raw(again, &l2);
    assert_int_equal(l1, l2);
    assert_memory_equal(z1, z2, l1);
    free(z1);
    free(z2);
    free(text);

    int64_t *want_pairs = malloc((size_t)e.m * 2 * sizeof *want_pairs);
    int64_t *got_pairs = malloc((size_t)e.m * 2 * sizeof *got_pairs);
    for (int64_t k = 0; k < e.m; k++) {
        want_pairs[2 * k] = e.src[k];
        want_pairs[2 * k + 1] = e.dst[k];
    }
    qsort(want_pairs, (size_t)e.m, 2 * sizeof *want_pairs, cmp_pair);
    const char *paths[2] = {txt, gzpath};
    for (int i = 0; i < 2; i++) {
        saga_graph *g = NULL;
        assert_int_equal(saga_graph_load(&g, paths[i], NULL), SAGA_OK);
        assert_int_equal(saga_graph_n_edges(g), e.m);
        saga_csr out = saga_graph_out(g);
        int64_t k = 0;
        for (int32_t u = 0; u < out.n_rows; u++)
            for (int64_t j = out.offsets[u]; j < out.offsets[u + 1]; j++, k++) {
                got_pairs[2 * k] = saga_graph_orig_id(g, u);
                got_pairs[2 * k + 1] = saga_graph_orig_id(g, out.indices[j]);
            }
        assert_int_equal(k, e.m);
        qsort(got_pairs, (size_t)e.m, 2 * sizeof *got_pairs, cmp_pair);
        assert_memory_equal(want_pairs, got_pairs, (size_t)e.m * 2 * sizeof *got_pairs);
        saga_graph_free(&g);
    }
    free(want_pairs);
    free(got_pairs);
    edges_free(&e);
}

/* The file spans several chunks (and gzip members) and is the same for any thread count. */
static void test_rmat_write_multi_chunk_any_threads(void **state) {
    (void)state;
    saga_rmat_params p = small(16, 8, 3); /* 524,288 edges: two chunks */
    char a[4096], b[4096];
    snprintf(a, sizeof a, "%s", saga_test_tmp("one.txt.gz"));
    snprintf(b, sizeof b, "%s", saga_test_tmp("three.txt.gz"));
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    assert_int_equal(saga_rmat_write(a, &p), SAGA_OK);
    omp_set_num_threads(3);
    assert_int_equal(saga_rmat_write(b, &p), SAGA_OK);
    omp_set_num_threads(saved);
    size_t la = 0, lb = 0;
    char *x = raw(a, &la), *y = raw(b, &lb);
    assert_int_equal(la, lb);
    assert_memory_equal(x, y, la);
    free(x);
    free(y);
    size_t n = 0;
    char *text = slurp(a, &n);
    int64_t lines = 0;
    for (size_t i = 0; i < n; i++)
        lines += text[i] == '\n';
    assert_int_equal(lines, 2 + ((int64_t)8 << 16));
    assert_int_equal(text[n - 1], '\n');
    free(text);
}

static void test_rmat_write_bad_path(void **state) {
    (void)state;
    saga_rmat_params p = small(4, 2, 1);
    const char *path = saga_test_tmp("no-such-dir/rmat.txt");
    assert_int_equal(saga_rmat_write(path, &p), SAGA_ERR_IO);
    saga_test_assert_error_contains(path, "No such file", NULL);
}

static void test_rmat_graph_keeps_every_vertex(void **state) {
    (void)state;
    saga_rmat_params p = small(10, 4, 2);
    edges e = gen(&p);
    saga_graph *g = NULL;
    assert_int_equal(saga_rmat_graph(&g, &p, NULL), SAGA_OK);
    assert_int_equal(saga_graph_n_vertices(g), 1024);
    assert_int_equal(saga_graph_n_edges(g), e.m);
    saga_csr out = saga_graph_out(g);
    int64_t *outdeg = calloc(1024, sizeof *outdeg);
    for (int64_t k = 0; k < e.m; k++)
        outdeg[e.src[k]]++;
    for (int32_t u = 0; u < 1024; u++)
        assert_int_equal(out.offsets[u + 1] - out.offsets[u], outdeg[u]);
    free(outdeg);
    saga_graph_free(&g);
    assert_null(g);
    edges_free(&e);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rmat_defaults),
        cmocka_unit_test(test_rmat_counts_and_range),
        cmocka_unit_test(test_rmat_deterministic_across_threads),
        cmocka_unit_test(test_rmat_degree_is_skewed),
        cmocka_unit_test(test_rmat_quadrants_and_scrambling),
        cmocka_unit_test(test_rmat_rejects_bad_params),
        cmocka_unit_test(test_rmat_d_zero_never_draws_d),
        cmocka_unit_test(test_rmat_alloc_failure_leaks_nothing),
        cmocka_unit_test(test_rmat_write_load_round_trip),
        cmocka_unit_test(test_rmat_write_multi_chunk_any_threads),
        cmocka_unit_test(test_rmat_write_bad_path),
        cmocka_unit_test(test_rmat_graph_keeps_every_vertex),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
