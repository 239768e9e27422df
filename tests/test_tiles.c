/* test_tiles.c - edge tiles checked edge by edge against the in-CSR with plain loops, on random
 * and structured graphs renumbered through METIS and contiguous partitions; the choice of k
 * against the footprint rule recomputed here in double; errors and failing allocations. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "saga_partition.h"
#include "test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A ring of n_cliques cliques of size c joined by one edge each, undirected, with scattered
 * ids so that contiguous ranges are not the cliques. */
static saga_graph *ring_of_cliques(int32_t n_cliques, int32_t c) {
    int64_t cap = (int64_t)n_cliques * c * c + n_cliques;
    int32_t *src = malloc((size_t)cap * sizeof *src), *dst = malloc((size_t)cap * sizeof *dst);
    assert_non_null(src);
    assert_non_null(dst);
    int32_t n = n_cliques * c;
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
    for (int64_t e = 0; e < m; e++) {
        src[e] = (int32_t)(((int64_t)src[e] * 37) % n);
        dst[e] = (int32_t)(((int64_t)dst[e] * 37) % n);
    }
    saga_graph *g = NULL;
    saga_graph_opts o = saga_graph_opts_defaults();
    o.undirected = true;
    assert_int_equal(saga_graph_from_edges(&g, n, m, src, dst, NULL, NULL, &o), SAGA_OK);
    free(src);
    free(dst);
    return g;
}

/* A weighted directed multigraph with self-loops and parallel edges, from a fixed LCG. */
static saga_graph *random_weighted(int32_t n, int64_t m, uint32_t seed) {
    int32_t *src = malloc((size_t)m * sizeof *src), *dst = malloc((size_t)m * sizeof *dst);
    float *w = malloc((size_t)m * sizeof *w);
    assert_non_null(src);
    assert_non_null(dst);
    assert_non_null(w);
    uint32_t x = seed;
    for (int64_t e = 0; e < m; e++) {
        x = x * 1664525u + 1013904223u;
        src[e] = (int32_t)((x >> 8) % (uint32_t)n);
        x = x * 1664525u + 1013904223u;
        dst[e] = (int32_t)((x >> 8) % (uint32_t)n);
        w[e] = (float)e + 0.5f; /* distinct, so a misplaced weight shows */
    }
    if (m > 2) { /* one parallel edge and one self-loop for sure */
        src[1] = src[0];
        dst[1] = dst[0];
        src[2] = dst[2] = 3 % n;
    }
    saga_graph *g = NULL;
    assert_int_equal(saga_graph_from_edges(&g, n, m, src, dst, w, NULL, NULL), SAGA_OK);
    free(src);
    free(dst);
    free(w);
    return g;
}

/* The part of vertex v by scanning the offsets (independent of the library's lookup). */
static int32_t part_of(const int64_t *off, int32_t k, int32_t v) {
    for (int32_t q = 0; q < k; q++)
        if (v >= off[q] && v < off[q + 1])
            return q;
    fail_msg("vertex %d in no part", (int)v);
    return -1;
}

/* Checks t against h (renumbered by off into k parts) edge by edge: the tile list is exactly
 * the (s, d) pairs with edges, in destination-major order; each row of tile (s, d) is the
 * in-row of its vertex filtered to the sources in s, in order, weights included; bytes add up.
 * Returns the number of empty (s, d) pairs counted here. */
static int64_t check_tiles(const saga_tiles *t, const saga_graph *h, const int64_t *off,
                           int32_t k) {
    saga_csr in = saga_graph_in(h);
    int64_t *cnt = calloc((size_t)k * (size_t)k, sizeof *cnt);
    assert_non_null(cnt);
    for (int32_t v = 0; v < in.n_rows; v++)
        for (int64_t j = in.offsets[v]; j < in.offsets[v + 1]; j++)
            cnt[(size_t)part_of(off, k, in.indices[j]) * (size_t)k + (size_t)part_of(off, k, v)]++;
    int64_t n_empty = 0, n_nonempty = 0;
    for (int64_t i = 0; i < (int64_t)k * k; i++)
        *(cnt[i] ? &n_nonempty : &n_empty) += 1;
    assert_int_equal(t->n_parts, k);
    assert_int_equal(t->n_tiles, n_nonempty);
    assert_memory_equal(t->part_offsets, off, ((size_t)k + 1) * sizeof *off);

    int64_t *row_seen = calloc((size_t)in.n_rows + 1, sizeof *row_seen);
    assert_non_null(row_seen);
    double total = 0, largest = 0;
    int64_t edges = 0;
    for (int64_t i = 0; i < t->n_tiles; i++) {
        const saga_tile *x = &t->tiles[i];
        int32_t s = x->src_part, d = x->dst_part;
        assert_true(s >= 0 && s < k && d >= 0 && d < k);
        if (i > 0) { /* strictly increasing (d, s): destination-major, no pair twice */
            const saga_tile *p = &t->tiles[i - 1];
            assert_true(p->dst_part < d || (p->dst_part == d && p->src_part < s));
        }
        assert_int_equal(x->nnz, cnt[(size_t)s * (size_t)k + (size_t)d]);
        assert_int_equal(x->n_rows, off[d + 1] - off[d]);
        assert_int_equal(x->offsets[0], 0);
        assert_int_equal(x->offsets[x->n_rows], x->nnz);
        assert_int_equal(x->weights != NULL, in.weights != NULL);
        for (int32_t r = 0; r < x->n_rows; r++) {
            int32_t v = (int32_t)(off[d] + r);
            int64_t a = x->offsets[r];
            for (int64_t j = in.offsets[v]; j < in.offsets[v + 1]; j++) {
                if (part_of(off, k, in.indices[j]) != s)
                    continue;
                assert_true(a < x->offsets[r + 1]);
                assert_int_equal(x->indices[a], in.indices[j]);
                if (in.weights)
                    assert_true(x->weights[a] == in.weights[j]);
                a++;
            }
            assert_int_equal(a, x->offsets[r + 1]);
            row_seen[v] += x->offsets[r + 1] - x->offsets[r];
        }
        edges += x->nnz;
        double b = 8.0 * (x->n_rows + 1) + 4.0 * (double)x->nnz * (in.weights ? 2 : 1);
        assert_true((double)x->bytes == b);
        total += b;
        largest = b > largest ? b : largest;
    }
    /* every in-edge of every vertex landed in exactly one tile */
    for (int32_t v = 0; v < in.n_rows; v++)
        assert_int_equal(row_seen[v], in.offsets[v + 1] - in.offsets[v]);
    assert_int_equal(edges, saga_graph_n_edges(h));
    assert_true((double)t->total_bytes == total);
    assert_true((double)t->max_tile_bytes == largest);
    free(cnt);
    free(row_seen);
    return n_empty;
}

/* Partitions g into k parts with method m, renumbers it into *h and returns the partition. */
static saga_partition *cut(saga_graph **h, const saga_graph *g, int32_t k,
                           saga_partition_method m) {
    saga_partition_opts o = saga_partition_opts_defaults();
    o.method = m;
    saga_partition *p = NULL;
    assert_int_equal(saga_partition_graph(&p, g, k, &o), SAGA_OK);
    assert_int_equal(saga_graph_permute(h, g, p->perm), SAGA_OK);
    return p;
}

static void test_tiles_every_edge_in_its_tile(void **state) {
    (void)state;
    saga_graph *graphs[] = {random_weighted(300, 2500, 7), ring_of_cliques(8, 10),
                            random_weighted(40, 30, 3)};
    static const saga_partition_method methods[] = {SAGA_PARTITION_METIS,
                                                    SAGA_PARTITION_CONTIGUOUS};
    static const int32_t ks[] = {1, 2, 3, 8, 17};
    for (size_t gi = 0; gi < 3; gi++)
        for (size_t mi = 0; mi < 2; mi++)
            for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
                saga_graph *h = NULL;
                saga_partition *p = cut(&h, graphs[gi], ks[ki], methods[mi]);
                saga_tiles *t = NULL;
                assert_int_equal(saga_tiles_build(&t, h, p->offsets, ks[ki]), SAGA_OK);
                int64_t n_empty = check_tiles(t, h, p->offsets, ks[ki]);
                assert_int_equal(n_empty + t->n_tiles, (int64_t)ks[ki] * ks[ki]);
                if (gi == 2 && ks[ki] >= 8) /* 30 edges cannot fill 64 tiles */
                    assert_true(n_empty > 0);
                saga_tiles_free(&t);
                assert_null(t);
                saga_partition_free(&p);
                saga_graph_free(&h);
            }
    for (size_t gi = 0; gi < 3; gi++)
        saga_graph_free(&graphs[gi]);
    saga_tiles_free(NULL);
}

/* Hand-made ranges with an empty part in the middle and a graph with no edges at all. */
static void test_tiles_empty_parts_and_no_edges(void **state) {
    (void)state;
    saga_graph *g = random_weighted(20, 60, 11);
    const int64_t off[] = {0, 5, 5, 12, 20};
    saga_tiles *t = NULL;
    assert_int_equal(saga_tiles_build(&t, g, off, 4), SAGA_OK);
    int64_t n_empty = check_tiles(t, g, off, 4);
    assert_true(n_empty >= 7); /* row and column of the empty part 1 */
    for (int64_t i = 0; i < t->n_tiles; i++)
        assert_true(t->tiles[i].src_part != 1 && t->tiles[i].dst_part != 1);
    saga_tiles_free(&t);
    saga_graph_free(&g);

    assert_int_equal(saga_graph_from_edges(&g, 6, 0, NULL, NULL, NULL, NULL, NULL), SAGA_OK);
    const int64_t off2[] = {0, 3, 6};
    assert_int_equal(saga_tiles_build(&t, g, off2, 2), SAGA_OK);
    assert_int_equal(check_tiles(t, g, off2, 2), 4);
    assert_int_equal(t->n_tiles, 0);
    assert_int_equal(t->total_bytes, 0);
    assert_int_equal(t->max_tile_bytes, 0);
    saga_tiles_free(&t);
    saga_graph_free(&g);
}

static int64_t off_diagonal_edges(const saga_tiles *t, int64_t *n_tiles) {
    int64_t e = 0;
    *n_tiles = 0;
    for (int64_t i = 0; i < t->n_tiles; i++)
        if (t->tiles[i].src_part != t->tiles[i].dst_part) {
            e += t->tiles[i].nnz;
            (*n_tiles)++;
        }
    return e;
}

static void test_tiles_metis_fewer_off_diagonal_than_random(void **state) {
    (void)state;
    saga_graph *g = ring_of_cliques(8, 10);
    int64_t edges[2], tiles[2];
    static const saga_partition_method methods[] = {SAGA_PARTITION_METIS, SAGA_PARTITION_RANDOM};
    for (int mi = 0; mi < 2; mi++) {
        saga_graph *h = NULL;
        saga_partition *p = cut(&h, g, 8, methods[mi]);
        saga_tiles *t = NULL;
        assert_int_equal(saga_tiles_build(&t, h, p->offsets, 8), SAGA_OK);
        check_tiles(t, h, p->offsets, 8);
        edges[mi] = off_diagonal_edges(t, &tiles[mi]);
        assert_int_equal(edges[mi], p->edge_cut); /* the cut is exactly the off-diagonal */
        saga_tiles_free(&t);
        saga_partition_free(&p);
        saga_graph_free(&h);
    }
    print_message("ring of 8 cliques, k=8: off-diagonal edges metis %lld in %lld tiles, "
                  "random %lld in %lld tiles\n",
                  (long long)edges[0], (long long)tiles[0], (long long)edges[1],
                  (long long)tiles[1]);
    assert_true(edges[0] * 10 < edges[1]);
    assert_true(tiles[0] < tiles[1]);
    saga_graph_free(&g);
}

/* The footprint rule of saga_partition.h, recomputed in double. */
static double reference_footprint(const saga_graph *g, int32_t k, double f) {
    double n = saga_graph_n_vertices(g), m = (double)saga_graph_n_edges(g);
    double rows = ceil(n / k), edges = ceil(m / k);
    double tile = 8 * (rows + 1) + edges * (saga_graph_has_weights(g) ? 8 : 4);
    return 2 * rows * f + 2 * (rows * f + tile);
}

/* The number after "at least " in the last error message. */
static size_t budget_in_message(void) {
    const char *at = strstr(saga_last_error(), "at least ");
    assert_non_null(at);
    return (size_t)strtoull(at + strlen("at least "), NULL, 10);
}

static void test_tiles_choose_parts(void **state) {
    (void)state;
    saga_graph *graphs[] = {random_weighted(1000, 20000, 5), ring_of_cliques(8, 10)};
    static const int64_t feats[] = {0, 4, 256, 4096};
    int n_split = 0, n_refused = 0; /* both branches must be reached */
    for (int gi = 0; gi < 2; gi++) {
        int32_t n = saga_graph_n_vertices(graphs[gi]);
        for (size_t fi = 0; fi < sizeof feats / sizeof feats[0]; fi++) {
            double f = (double)feats[fi];
            double top = reference_footprint(graphs[gi], 1, f);
            for (double frac = 1.5; frac > 1e-4; frac /= 1.7) {
                size_t budget = (size_t)(top * frac);
                int32_t k = -1;
                saga_status st = saga_tiles_choose_parts(&k, graphs[gi], feats[fi], budget);
                if (st == SAGA_ERR_BUDGET) {
                    n_refused++;
                    assert_int_equal(k, -1);
                    assert_true(reference_footprint(graphs[gi], n, f) > (double)budget);
                    size_t need = budget_in_message();
                    assert_true((double)need == reference_footprint(graphs[gi], n, f));
                    assert_int_equal(saga_tiles_choose_parts(&k, graphs[gi], feats[fi], need),
                                     SAGA_OK);
                    assert_int_equal(k, n);
                    continue;
                }
                assert_int_equal(st, SAGA_OK);
                assert_true(k >= 1 && k <= n);
                assert_true(reference_footprint(graphs[gi], k, f) <= (double)budget);
                assert_true((double)saga_tiles_footprint(graphs[gi], k, feats[fi]) ==
                            reference_footprint(graphs[gi], k, f));
                if (k > 1) {
                    n_split++;
                    assert_true(reference_footprint(graphs[gi], k / 2, f) > (double)budget);
                }
            }
        }
    }
    assert_true(n_split > 10);
    assert_true(n_refused > 0);
    /* a budget of nothing, and one byte short of the footprint at k = n */
    int32_t k = -1;
    assert_int_equal(saga_tiles_choose_parts(&k, graphs[1], 64, 0), SAGA_ERR_BUDGET);
    saga_test_assert_error_contains("too small", NULL);
    size_t need = budget_in_message();
    assert_int_equal(saga_tiles_choose_parts(&k, graphs[1], 64, need - 1), SAGA_ERR_BUDGET);
    assert_int_equal(saga_tiles_choose_parts(&k, graphs[1], 64, need), SAGA_OK);
    assert_int_equal(k, 80);
    assert_int_equal(saga_tiles_choose_parts(&k, graphs[1], -1, need), SAGA_ERR_INVALID_ARG);
    assert_int_equal(saga_tiles_footprint(graphs[1], 0, 4), 0);
    for (int gi = 0; gi < 2; gi++)
        saga_graph_free(&graphs[gi]);
}

static void test_tiles_invalid_arguments(void **state) {
    (void)state;
    saga_graph *g = random_weighted(10, 30, 1);
    saga_tiles *t = NULL;
    const int64_t good[] = {0, 4, 10}, short_end[] = {0, 4, 9}, late[] = {1, 4, 10},
                  down[] = {0, 6, 4, 10};
    assert_int_equal(saga_tiles_build(&t, g, good, 0), SAGA_ERR_INVALID_ARG);
    assert_int_equal(saga_tiles_build(&t, g, short_end, 2), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("10 vertices", NULL);
    assert_int_equal(saga_tiles_build(&t, g, late, 2), SAGA_ERR_INVALID_ARG);
    assert_int_equal(saga_tiles_build(&t, g, down, 3), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("decrease", NULL);
    assert_int_equal(saga_tiles_build(&t, g, NULL, 2), SAGA_ERR_INVALID_ARG);
    assert_int_equal(saga_tiles_build(NULL, g, good, 2), SAGA_ERR_INVALID_ARG);
    assert_null(t);
    saga_graph_free(&g);
}

static void test_tiles_failing_allocations(void **state) {
    (void)state;
    saga_graph *g = random_weighted(50, 400, 9);
    const int64_t off[] = {0, 10, 25, 25, 50};
    bool ok = false;
    long n;
    for (n = 1; n < 200 && !ok; n++) {
        saga_tiles *t = NULL;
        saga_test_fail_alloc_after(n);
        saga_status st = saga_tiles_build(&t, g, off, 4);
        saga_test_fail_alloc_after(0);
        if (st == SAGA_OK) {
            ok = true;
            check_tiles(t, g, off, 4);
        } else {
            assert_int_equal(st, SAGA_ERR_OUT_OF_MEMORY);
            assert_null(t);
        }
        saga_tiles_free(&t);
    }
    assert_true(ok);
    assert_true(n > 10); /* the failures reached the tiles' own arrays */
    saga_graph_free(&g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiles_every_edge_in_its_tile),
        cmocka_unit_test(test_tiles_empty_parts_and_no_edges),
        cmocka_unit_test(test_tiles_metis_fewer_off_diagonal_than_random),
        cmocka_unit_test(test_tiles_choose_parts),
        cmocka_unit_test(test_tiles_invalid_arguments),
        cmocka_unit_test(test_tiles_failing_allocations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
