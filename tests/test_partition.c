/* test_partition.c - partitions checked for validity by plain loops, METIS against the random
 * baseline on graphs with structure, the edge cut against a count done here, the renumbered
 * graph edge by edge, argument errors and failing allocations. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "saga_io.h"
#include "saga_partition.h"
#include "test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const saga_partition_method methods[] = {SAGA_PARTITION_METIS, SAGA_PARTITION_CONTIGUOUS,
                                                SAGA_PARTITION_RANDOM, SAGA_PARTITION_FENNEL};
enum { N_METHODS = 4 };

/* Every vertex in exactly one part, parts in range, offsets matching the part sizes, perm a
 * permutation listing the parts in order with each part in increasing old ids, inverse its
 * inverse, balance as defined. */
static void check_valid(const saga_partition *p, int32_t n, int32_t k) {
    assert_int_equal(p->n_parts, k);
    assert_int_equal(p->n_vertices, n);
    int64_t *size = calloc((size_t)k, sizeof *size);
    char *seen = calloc((size_t)n, 1);
    assert_non_null(size);
    assert_non_null(seen);
    for (int32_t v = 0; v < n; v++) {
        assert_true(p->part[v] >= 0 && p->part[v] < k);
        size[p->part[v]]++;
    }
    assert_int_equal(p->offsets[0], 0);
    assert_int_equal(p->offsets[k], n);
    int64_t largest = 0;
    for (int32_t q = 0; q < k; q++) {
        assert_int_equal(p->offsets[q + 1] - p->offsets[q], size[q]);
        largest = size[q] > largest ? size[q] : largest;
        for (int64_t i = p->offsets[q]; i < p->offsets[q + 1]; i++) {
            int32_t v = p->perm[i];
            assert_true(v >= 0 && v < n);
            assert_false(seen[v]);
            seen[v] = 1;
            assert_int_equal(p->part[v], q);
            assert_int_equal(p->inverse[v], i);
            if (i > p->offsets[q])
                assert_true(p->perm[i - 1] < v);
        }
    }
    for (int32_t v = 0; v < n; v++)
        assert_true(seen[v]);
    /* the ratio of exact integers, rounded once; another order (through the mean part size)
     * rounds twice */
    const double balance = (double)largest * k / n;
    assert_true(fabs(p->balance - balance) <= saga_test_gamma(2, SAGA_TEST_U64) * balance);
    free(size);
    free(seen);
}

/* The cut counted from the in-CSR (the library counts from the out-CSR). */
static int64_t reference_cut(const saga_graph *g, const int32_t *part) {
    saga_csr in = saga_graph_in(g);
    int64_t cut = 0;
    for (int32_t v = 0; v < in.n_rows; v++)
        for (int64_t j = in.offsets[v]; j < in.offsets[v + 1]; j++)
            if (part[in.indices[j]] != part[v])
                cut++;
    return cut;
}

static saga_status run(saga_partition **p, const saga_graph *g, int32_t k, saga_partition_method m,
                       uint64_t seed) {
    saga_partition_opts o = saga_partition_opts_defaults();
    o.method = m;
    o.seed = seed;
    return saga_partition_graph(p, g, k, &o);
}

/* A ring of n_cliques cliques of size c, each joined to the next by one edge; undirected. */
static saga_graph *ring_of_cliques(int32_t n_cliques, int32_t c) {
    int64_t cap = (int64_t)n_cliques * c * c + n_cliques;
    int32_t *src = malloc((size_t)cap * sizeof *src), *dst = malloc((size_t)cap * sizeof *dst);
    assert_non_null(src);
    assert_non_null(dst);
    int64_t m = 0;
    for (int32_t q = 0; q < n_cliques; q++) {
        for (int32_t a = 0; a < c; a++)
            for (int32_t b = a + 1; b < c; b++) {
                src[m] = q * c + a;
                dst[m++] = q * c + b;
            }
        src[m] = q * c + c - 1;
        dst[m++] = ((q + 1) % n_cliques) * c;
    }
    saga_graph *g = NULL;
    saga_graph_opts o = saga_graph_opts_defaults();
    o.undirected = true;
    /* Scattered vertex ids, so that contiguous ranges are not the cliques. */
    int32_t n = n_cliques * c;
    for (int64_t e = 0; e < m; e++) {
        src[e] = (int32_t)(((int64_t)src[e] * 37) % n);
        dst[e] = (int32_t)(((int64_t)dst[e] * 37) % n);
    }
    assert_int_equal(saga_graph_from_edges(&g, n, m, src, dst, NULL, NULL, &o), SAGA_OK);
    free(src);
    free(dst);
    return g;
}

static void test_partition_every_method_valid(void **state) {
    (void)state;
    saga_graph *g = ring_of_cliques(8, 10);
    static const int32_t ks[] = {1, 2, 3, 8, 13, 80};
    for (int mi = 0; mi < N_METHODS; mi++)
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
            saga_partition *p = NULL;
            assert_int_equal(run(&p, g, ks[ki], methods[mi], 3), SAGA_OK);
            check_valid(p, 80, ks[ki]);
            assert_int_equal(p->edge_cut, reference_cut(g, p->part));
            if (ks[ki] == 1)
                assert_int_equal(p->edge_cut, 0);
            if (methods[mi] == SAGA_PARTITION_CONTIGUOUS ||
                methods[mi] == SAGA_PARTITION_RANDOM) /* equal ranges: sizes differ by <= 1 */
                assert_true(p->balance <= (1 + saga_test_gamma(2, SAGA_TEST_U64)) *
                                              (double)(80 / ks[ki] + 1) * ks[ki] / 80);
            if (methods[mi] == SAGA_PARTITION_FENNEL) /* no part past ceil(1.1 n / k) */
                assert_true(p->balance <= (1 + saga_test_gamma(2, SAGA_TEST_U64)) *
                                              ceil(1.1 * 80 / ks[ki]) * ks[ki] / 80);
            saga_partition_free(&p);
            assert_null(p);
        }
    saga_partition_free(NULL);
    saga_graph_free(&g);
}

static void test_partition_contiguous_ranges(void **state) {
    (void)state;
    saga_graph *g = ring_of_cliques(2, 5); /* 10 vertices */
    saga_partition *p = NULL;
    assert_int_equal(run(&p, g, 3, SAGA_PARTITION_CONTIGUOUS, 0), SAGA_OK);
    static const int32_t want[10] = {0, 0, 0, 1, 1, 1, 2, 2, 2, 2};
    for (int v = 0; v < 10; v++) {
        assert_int_equal(p->part[v], want[v]);
        assert_int_equal(p->perm[v], v);
    }
    saga_partition_free(&p);
    saga_graph_free(&g);
}

static void test_partition_seeded_repeatable(void **state) {
    (void)state;
    saga_graph *g = ring_of_cliques(8, 10);
    for (int mi = 0; mi < N_METHODS; mi++) {
        saga_partition *a = NULL, *b = NULL, *c = NULL;
        assert_int_equal(run(&a, g, 4, methods[mi], 11), SAGA_OK);
        assert_int_equal(run(&b, g, 4, methods[mi], 11), SAGA_OK);
        assert_memory_equal(a->part, b->part, 80 * sizeof *a->part);
        if (methods[mi] == SAGA_PARTITION_RANDOM) {
            assert_int_equal(run(&c, g, 4, methods[mi], 12), SAGA_OK);
            assert_memory_not_equal(a->part, c->part, 80 * sizeof *a->part);
        }
        saga_partition_free(&a);
        saga_partition_free(&b);
        saga_partition_free(&c);
    }
    saga_graph_free(&g);
}

static void test_partition_metis_finds_the_cliques(void **state) {
    (void)state;
    saga_graph *g = ring_of_cliques(8, 10);
    saga_partition *pm = NULL, *pr = NULL;
    assert_int_equal(run(&pm, g, 8, SAGA_PARTITION_METIS, 1), SAGA_OK);
    assert_int_equal(run(&pr, g, 8, SAGA_PARTITION_RANDOM, 1), SAGA_OK);
    print_message("ring of 8 cliques: cut metis %lld, random %lld (of %lld)\n",
                  (long long)pm->edge_cut, (long long)pr->edge_cut,
                  (long long)saga_graph_n_edges(g));
    /* The best cut is the 8 ring edges, both directions; random cuts about 7/8 of 736. */
    assert_true(pm->edge_cut >= 16);
    assert_true(pm->edge_cut <= 32);
    assert_true(pr->edge_cut > 400);
    saga_partition_free(&pm);
    saga_partition_free(&pr);
    saga_graph_free(&g);
}

/* Fennel in one pass over the ids: the cliques are contiguous, so each fills a part; the METIS
 * fallback takes the same path when the adjacency passes the limit. */
static void test_partition_fennel_finds_the_cliques(void **state) {
    (void)state;
    saga_graph *g = ring_of_cliques(8, 10);
    saga_partition *pf = NULL, *pm = NULL;
    assert_int_equal(run(&pf, g, 8, SAGA_PARTITION_FENNEL, 1), SAGA_OK);
    assert_int_equal(pf->method, SAGA_PARTITION_FENNEL);
    print_message("ring of 8 cliques: cut fennel %lld\n", (long long)pf->edge_cut);
    assert_true(pf->edge_cut >= 16);
    assert_true(pf->edge_cut <= 64);
    saga_partition_opts o = saga_partition_opts_defaults();
    o.metis_max_entries = 735; /* the symmetrized adjacency has 736 entries */
    assert_int_equal(saga_partition_graph(&pm, g, 8, &o), SAGA_OK);
    assert_int_equal(pm->method, SAGA_PARTITION_FENNEL);
    assert_memory_equal(pm->part, pf->part, 80 * sizeof *pm->part);
    saga_partition_free(&pm);
    o.metis_max_entries = 736;
    assert_int_equal(saga_partition_graph(&pm, g, 8, &o), SAGA_OK);
    assert_int_equal(pm->method, SAGA_PARTITION_METIS);
    o.metis_max_entries = -1;
    saga_partition_free(&pm);
    assert_int_equal(saga_partition_graph(&pm, g, 8, &o), SAGA_ERR_INVALID_ARG);
    saga_partition_free(&pf);
    saga_graph_free(&g);
}

static void test_partition_metis_beats_random_on_ca_grqc(void **state) {
    (void)state;
    saga_graph *g = NULL;
    assert_int_equal(saga_graph_load(&g, saga_test_data("ca-GrQc/ca-GrQc.txt.gz"), NULL), SAGA_OK);
    int32_t n = saga_graph_n_vertices(g);
    static const int32_t ks[] = {2, 8, 32};
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
        saga_partition *pm = NULL, *pr = NULL;
        assert_int_equal(run(&pm, g, ks[ki], SAGA_PARTITION_METIS, 1), SAGA_OK);
        assert_int_equal(run(&pr, g, ks[ki], SAGA_PARTITION_RANDOM, 1), SAGA_OK);
        check_valid(pm, n, ks[ki]);
        check_valid(pr, n, ks[ki]);
        assert_int_equal(pm->edge_cut, reference_cut(g, pm->part));
        assert_int_equal(pr->edge_cut, reference_cut(g, pr->part));
        print_message("ca-GrQc k=%d: cut metis %lld, random %lld; balance metis %.3f\n",
                      (int)ks[ki], (long long)pm->edge_cut, (long long)pr->edge_cut, pm->balance);
        assert_true(pm->edge_cut * 3 < pr->edge_cut);
        assert_true(pm->balance < 1.1);
        /* two refinement passes (what streamed runs use) instead of METIS's ten: a cut as good
         * within 5% */
        saga_partition *p2 = NULL;
        saga_partition_opts o = saga_partition_opts_defaults();
        o.refine_iters = 2;
        assert_int_equal(saga_partition_graph(&p2, g, ks[ki], &o), SAGA_OK);
        check_valid(p2, n, ks[ki]);
        assert_int_equal(p2->edge_cut, reference_cut(g, p2->part));
        print_message("  2 refinement passes: cut %lld, balance %.3f\n", (long long)p2->edge_cut,
                      p2->balance);
        assert_true((double)p2->edge_cut <= 1.05 * (double)pm->edge_cut);
        assert_true(p2->balance < 1.1);
        saga_partition_free(&p2);
        saga_partition_free(&pm);
        saga_partition_free(&pr);
    }
    saga_graph_free(&g);
}

/* A weighted directed multigraph with a self-loop and sparse original ids. */
static saga_graph *small_weighted(void) {
    static const int32_t src[] = {0, 1, 2, 3, 4, 5, 6, 0, 0, 3, 6, 2};
    static const int32_t dst[] = {1, 2, 3, 4, 5, 6, 0, 3, 3, 3, 1, 5};
    static const float w[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    static const int64_t orig[] = {5, 17, 18, 40, 41, 100, 1000};
    saga_graph *g = NULL;
    assert_int_equal(saga_graph_from_edges(&g, 7, 12, src, dst, w, orig, NULL), SAGA_OK);
    return g;
}

/* Out-rows of g and of h = g renumbered by perm, compared as multisets of (old dst, weight). */
static void check_permuted(const saga_graph *g, const saga_graph *h, const int32_t *perm) {
    int32_t n = saga_graph_n_vertices(g);
    assert_int_equal(saga_graph_n_vertices(h), n);
    assert_int_equal(saga_graph_n_edges(h), saga_graph_n_edges(g));
    assert_int_equal(saga_graph_has_weights(h), saga_graph_has_weights(g));
    saga_csr go = saga_graph_out(g), ho = saga_graph_out(h), hi = saga_graph_in(h);
    for (int32_t i = 0; i < n; i++) {
        int32_t u = perm[i];
        assert_int_equal(saga_graph_orig_id(h, i), saga_graph_orig_id(g, u));
        int32_t id = -1;
        assert_int_equal(saga_graph_find_vertex(h, saga_graph_orig_id(g, u), &id), SAGA_OK);
        assert_int_equal(id, i);
        int64_t len = go.offsets[u + 1] - go.offsets[u];
        assert_int_equal(ho.offsets[i + 1] - ho.offsets[i], len);
        char *used = calloc((size_t)len + 1, 1);
        for (int64_t a = ho.offsets[i]; a < ho.offsets[i + 1]; a++) {
            int32_t old = perm[ho.indices[a]];
            bool found = false;
            for (int64_t b = 0; b < len && !found; b++) {
                int64_t e = go.offsets[u] + b;
                if (!used[b] && go.indices[e] == old &&
                    (!go.weights || go.weights[e] == ho.weights[a])) {
                    used[b] = 1;
                    found = true;
                }
            }
            assert_true(found);
        }
        free(used);
    }
    /* the in-CSR of h is the transpose of its out-CSR: count edges both ways */
    int64_t in_total = 0;
    for (int32_t v = 0; v < n; v++)
        in_total += hi.offsets[v + 1] - hi.offsets[v];
    assert_int_equal(in_total, saga_graph_n_edges(h));
    int32_t *one_part = calloc((size_t)n + 1, sizeof *one_part);
    assert_int_equal(reference_cut(h, one_part), 0);
    free(one_part);
}

static void test_partition_permute_keeps_edges_and_ids(void **state) {
    (void)state;
    saga_graph *g = small_weighted();
    for (int mi = 0; mi < N_METHODS; mi++) {
        saga_partition *p = NULL;
        saga_graph *h = NULL;
        assert_int_equal(run(&p, g, 3, methods[mi], 5), SAGA_OK);
        check_valid(p, 7, 3);
        assert_int_equal(p->edge_cut, reference_cut(g, p->part));
        assert_int_equal(saga_graph_permute(&h, g, p->perm), SAGA_OK);
        check_permuted(g, h, p->perm);
        /* the cut of the renumbered graph under the renumbered parts is the same */
        int32_t newpart[7];
        for (int32_t i = 0; i < 7; i++)
            newpart[i] = p->part[p->perm[i]];
        assert_int_equal(reference_cut(h, newpart), p->edge_cut);
        saga_graph_free(&h);
        saga_partition_free(&p);
    }
    /* a permutation that is not one; a renumbered graph refused by the .sgr writer */
    saga_graph *h = NULL;
    int32_t bad[7] = {0, 1, 2, 3, 4, 5, 5};
    assert_int_equal(saga_graph_permute(&h, g, bad), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("twice", NULL);
    bad[6] = 7;
    assert_int_equal(saga_graph_permute(&h, g, bad), SAGA_ERR_INVALID_ARG);
    assert_null(h);
    int32_t rev[7] = {6, 5, 4, 3, 2, 1, 0};
    assert_int_equal(saga_graph_permute(&h, g, rev), SAGA_OK);
    check_permuted(g, h, rev);
    int32_t id = 0;
    assert_int_equal(saga_graph_find_vertex(h, 6, &id), SAGA_ERR_INVALID_ARG);
    assert_int_equal(saga_sgr_write(h, saga_test_tmp("renumbered.sgr")), SAGA_ERR_UNSUPPORTED);
    saga_graph_free(&h);
    saga_graph_free(&g);
}

static void test_partition_invalid_arguments(void **state) {
    (void)state;
    saga_graph *g = small_weighted();
    saga_partition *p = NULL;
    for (int mi = 0; mi < N_METHODS; mi++) {
        assert_int_equal(run(&p, g, 0, methods[mi], 1), SAGA_ERR_INVALID_ARG);
        assert_int_equal(run(&p, g, -3, methods[mi], 1), SAGA_ERR_INVALID_ARG);
        assert_int_equal(run(&p, g, 8, methods[mi], 1), SAGA_ERR_INVALID_ARG);
        saga_test_assert_error_contains("8 parts", "7 vertices", NULL);
        assert_null(p);
    }
    assert_int_equal(run(&p, g, 2, SAGA_PARTITION_METHOD_COUNT, 1), SAGA_ERR_INVALID_ARG);
    saga_partition_opts o = saga_partition_opts_defaults();
    o.refine_iters = -1;
    assert_int_equal(saga_partition_graph(&p, g, 2, &o), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("refinement", NULL);
    assert_null(p);
    assert_int_equal(saga_partition_graph(NULL, g, 2, NULL), SAGA_ERR_INVALID_ARG);
    assert_int_equal(saga_partition_graph(&p, g, 7, NULL), SAGA_OK); /* k == n */
    check_valid(p, 7, 7);
    saga_partition_free(&p);
    saga_graph_free(&g);
}

static void test_partition_failing_allocations(void **state) {
    (void)state;
    saga_graph *g = ring_of_cliques(4, 6);
    for (int mi = 0; mi <= N_METHODS; mi++) { /* the last round: saga_graph_permute */
        bool ok = false;
        for (long n = 1; n < 100 && !ok; n++) {
            saga_partition *p = NULL;
            saga_graph *h = NULL;
            int32_t perm[24];
            for (int i = 0; i < 24; i++)
                perm[i] = (i * 5) % 24;
            saga_test_fail_alloc_after(n);
            saga_status st =
                mi < N_METHODS ? run(&p, g, 3, methods[mi], 1) : saga_graph_permute(&h, g, perm);
            saga_test_fail_alloc_after(0);
            if (st == SAGA_OK) {
                ok = true;
                if (p)
                    check_valid(p, 24, 3);
                if (h)
                    check_permuted(g, h, perm);
            } else {
                assert_int_equal(st, SAGA_ERR_OUT_OF_MEMORY);
                assert_null(p);
                assert_null(h);
            }
            saga_partition_free(&p);
            saga_graph_free(&h);
        }
        assert_true(ok);
    }
    saga_graph_free(&g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_partition_every_method_valid),
        cmocka_unit_test(test_partition_contiguous_ranges),
        cmocka_unit_test(test_partition_seeded_repeatable),
        cmocka_unit_test(test_partition_metis_finds_the_cliques),
        cmocka_unit_test(test_partition_fennel_finds_the_cliques),
        cmocka_unit_test(test_partition_metis_beats_random_on_ca_grqc),
        cmocka_unit_test(test_partition_permute_keeps_edges_and_ids),
        cmocka_unit_test(test_partition_invalid_arguments),
        cmocka_unit_test(test_partition_failing_allocations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
