/* test_sample.c - neighbour sampling (saga_sample.h): with every fan-out -1 a block is the graph a
 * full-graph net places, edge values to the bit; fan-outs draw distinct in-neighbours, uniformly;
 * a sample is the same on any thread count and differs from batch to batch; refusals and failed
 * allocations leave the sampler as it was. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"

#include "program_impl.h"
#include "saga.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

enum { N = 300, M = 3000 };

/* A random directed multigraph of N vertices and M edges, some of them self-loops and some
 * repeated, with weights in [0.5, 2). */
static saga_graph *multigraph(void) {
    int32_t *src = malloc(M * sizeof *src), *dst = malloc(M * sizeof *dst);
    float *w = malloc(M * sizeof *w);
    assert_true(src && dst && w);
    uint64_t s = 77;
    for (int k = 0; k < M; k++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        src[k] = (int32_t)((s >> 33) % N);
        dst[k] = k % 50 == 0 ? src[k] : (int32_t)((s >> 13) % N); /* every 50th a self-loop */
        w[k] = 0.5f + (float)((s >> 40) % 1024) / 682.0f;
        if (k % 40 == 1) { /* a repeated edge */
            src[k] = src[k - 1];
            dst[k] = dst[k - 1];
        }
    }
    saga_graph_opts o = saga_graph_opts_defaults();
    o.duplicates = SAGA_DUPLICATES_KEEP;
    saga_graph *g = NULL;
    assert_int_equal(saga_graph_from_edges(&g, N, M, src, dst, w, NULL, &o), SAGA_OK);
    free(src);
    free(dst);
    free(w);
    return g;
}

static saga_graph *rmat(int scale) {
    saga_rmat_params p = saga_rmat_params_defaults();
    p.scale = scale;
    saga_graph *g = NULL;
    assert_int_equal(saga_rmat_graph(&g, &p, NULL), SAGA_OK);
    return g;
}

static saga_sample *sample(const saga_graph *g, const int32_t *fan, int layers,
                           const saga_sampler_opts *o, const int32_t *seeds, int64_t n_seeds,
                           uint64_t batch) {
    saga_sampler *s = NULL;
    saga_sample *b = NULL;
    assert_int_equal(saga_sampler_new(&s, g, fan, layers, o), SAGA_OK);
    assert_int_equal(saga_sampler_sample(s, seeds, n_seeds, batch, &b), SAGA_OK);
    saga_sampler_free(&s);
    return b;
}

/* The layout every sample has: the seeds first among distinct ids, each block's destinations the
 * next block's sources, sources in range. */
static void check_layout(const saga_sample *b, const int32_t *seeds, int64_t n_seeds, int32_t n) {
    assert_int_equal(b->blocks[b->n_layers - 1].n_dst, n_seeds);
    assert_memory_equal(b->ids, seeds, (size_t)n_seeds * sizeof *seeds);
    assert_int_equal(b->blocks[0].n_src, b->n_ids);
    char *seen = calloc((size_t)n, 1);
    assert_non_null(seen);
    for (int32_t i = 0; i < b->n_ids; i++) {
        assert_true(b->ids[i] >= 0 && b->ids[i] < n);
        assert_false(seen[b->ids[i]]);
        seen[b->ids[i]] = 1;
    }
    free(seen);
    int64_t total = 0;
    for (int l = 0; l < b->n_layers; l++) {
        const saga_sample_block *k = &b->blocks[l];
        if (l + 1 < b->n_layers)
            assert_int_equal(k->n_dst, b->blocks[l + 1].n_src);
        assert_true(k->n_dst <= k->n_src);
        assert_int_equal(k->offsets[0], 0);
        assert_int_equal(k->offsets[k->n_dst], k->n_edges);
        for (int64_t e = 0; e < k->n_edges; e++)
            assert_true(k->src[e] >= 0 && k->src[e] < k->n_src);
        total += k->n_edges;
    }
    assert_int_equal(b->n_edges, total);
}

/* Every fan-out -1: each block row is the row a full-graph net places (saga_place_in_csr), with
 * saga_edge_values' values to the bit, with the graph's self-loops kept or one added. */
static void test_sample_full_fanout_is_the_placed_graph(void **state) {
    (void)state;
    saga_graph *g = multigraph();
    const int32_t fan[3] = {-1, -1, -1};
    const int32_t seeds[] = {5, 17, 0, 299, 123, 42, 7};
    const int64_t ns = sizeof seeds / sizeof *seeds;
    for (int add = 0; add <= 1; add++) {
        int64_t *off = NULL, m = 0;
        int32_t *src = NULL;
        float *w = NULL;
        assert_int_equal(saga_place_in_csr(g, add, &off, &src, &w, &m), SAGA_OK);
        int64_t *outd = calloc(N + 1, sizeof *outd);
        float *sym = malloc((size_t)m * sizeof *sym), *gw = malloc((size_t)m * sizeof *gw);
        assert_true(outd && sym && gw);
        for (int64_t k = 0; k < m; k++)
            outd[src[k] + 1]++;
        for (int v = 0; v < N; v++)
            outd[v + 1] += outd[v];
        saga_edge_values(N, off, src, w, outd, SAGA_WEIGHT_SYMNORM, false, sym);
        saga_edge_values(N, off, src, w, outd, SAGA_WEIGHT_GRAPH, false, gw);
        for (int kind = 0; kind < 2; kind++) {
            saga_sampler_opts o = saga_sampler_opts_defaults();
            o.self_loops = add ? SAGA_DGRAPH_SELF_LOOPS_ADD : SAGA_DGRAPH_SELF_LOOPS_KEEP;
            o.weight = kind ? SAGA_WEIGHT_SYMNORM : SAGA_WEIGHT_GRAPH;
            saga_sample *b = sample(g, fan, 3, &o, seeds, ns, 0);
            check_layout(b, seeds, ns, N);
            const float *want = kind ? sym : gw;
            for (int l = 0; l < 3; l++) {
                const saga_sample_block *k = &b->blocks[l];
                for (int32_t i = 0; i < k->n_dst; i++) {
                    int32_t v = b->ids[i];
                    assert_int_equal(k->offsets[i + 1] - k->offsets[i], off[v + 1] - off[v]);
                    for (int64_t e = k->offsets[i], p = off[v]; e < k->offsets[i + 1]; e++, p++) {
                        assert_int_equal(b->ids[k->src[e]], src[p]);
                        assert_true(memcmp(&k->values[e], &want[p], sizeof(float)) == 0);
                    }
                }
            }
            /* the hops reach every in-neighbour: a breadth-first walk's vertices */
            char *in = calloc(N, 1);
            assert_non_null(in);
            int32_t queue[N], head = 0, tail = 0, level_end;
            for (int64_t i = 0; i < ns; i++)
                in[queue[tail++] = seeds[i]] = 1;
            for (int h = 0; h < 3; h++) {
                level_end = tail;
                for (head = 0; head < level_end; head++)
                    for (int64_t p = off[queue[head]]; p < off[queue[head] + 1]; p++)
                        if (!in[src[p]])
                            in[queue[tail++] = src[p]] = 1;
            }
            assert_int_equal(b->n_ids, tail);
            free(in);
            saga_sample_free(&b);
            assert_null(b);
        }
        free(outd);
        free(sym);
        free(gw);
        saga_free(off);
        saga_free(src);
        saga_free(w);
    }
    saga_graph_free(&g);
}

/* Fan-outs: each destination gets min(fan-out, its in-edges) of its own in-edges (self-loops
 * left out and one added with ADD), each as often as the graph has it at most, in the graph's
 * order; with the sampled degrees each value is 1 / sqrt(row length x the source's count). */
static void test_sample_fanouts_draw_without_replacement(void **state) {
    (void)state;
    saga_graph *g = multigraph();
    saga_csr in = saga_graph_in(g);
    const int32_t fan[2] = {4, 2};
    int32_t seeds[60];
    for (int i = 0; i < 60; i++)
        seeds[i] = (i * 37) % N;
    for (int add = 0; add <= 1; add++) {
        saga_sampler_opts o = saga_sampler_opts_defaults();
        o.self_loops = add ? SAGA_DGRAPH_SELF_LOOPS_ADD : SAGA_DGRAPH_SELF_LOOPS_KEEP;
        o.weight = SAGA_WEIGHT_SYMNORM;
        o.degrees = SAGA_SAMPLE_DEGREES_SAMPLED;
        saga_sample *b = sample(g, fan, 2, &o, seeds, 60, 3);
        check_layout(b, seeds, 60, N);
        int64_t drawn = 0, avail = 0;
        for (int l = 0; l < 2; l++) {
            const saga_sample_block *k = &b->blocks[l];
            const int32_t f = fan[1 - l];
            int64_t *count = calloc((size_t)k->n_src, sizeof *count);
            assert_non_null(count);
            for (int64_t e = 0; e < k->n_edges; e++)
                count[k->src[e]]++;
            for (int32_t i = 0; i < k->n_dst; i++) {
                int32_t v = b->ids[i];
                int64_t loops = 0, self = 0, d = in.offsets[v + 1] - in.offsets[v];
                for (int64_t p = in.offsets[v]; p < in.offsets[v + 1]; p++)
                    loops += in.indices[p] == v;
                int64_t cand = add ? d - loops : d, len = k->offsets[i + 1] - k->offsets[i];
                assert_int_equal(len, (cand < f ? cand : f) + add);
                drawn += len - add;
                avail += cand;
                int32_t prev = -1;
                for (int64_t e = k->offsets[i]; e < k->offsets[i + 1]; e++) {
                    int32_t u = b->ids[k->src[e]];
                    assert_true(u >= prev); /* the graph's order */
                    prev = u;
                    if (u == v && add) {
                        self++;
                        assert_int_equal(k->src[e], i);
                        continue;
                    }
                    int64_t here = 0, there = 0; /* times in the row: sampled, in the graph */
                    for (int64_t q = k->offsets[i]; q < k->offsets[i + 1]; q++)
                        here += b->ids[k->src[q]] == u;
                    for (int64_t p = in.offsets[v]; p < in.offsets[v + 1]; p++)
                        there += in.indices[p] == u;
                    assert_true(here <= there);
                    double x = 1.0 / sqrt((double)len * (double)count[k->src[e]]);
                    assert_true(k->values[e] == (float)x);
                }
                assert_int_equal(self, add);
            }
            free(count);
        }
        assert_true(drawn < avail); /* the fan-outs did cut */
        saga_sample_free(&b);
    }
    saga_graph_free(&g);
}

/* Vertex 0 with in-neighbours 1..20, fan-out 5, over 4000 batches: each neighbour is drawn
 * 4000 x 5/20 = 1000 times in expectation (standard deviation 27.4), a given pair 4000 x C(18,3)
 * / C(20,5) = 210.5 times (14.1); the counts stay within 6 deviations. */
static void test_sample_uniform(void **state) {
    (void)state;
    int32_t src[20], dst[20];
    for (int i = 0; i < 20; i++)
        src[i] = i + 1, dst[i] = 0;
    saga_graph *g = NULL;
    assert_int_equal(saga_graph_from_edges(&g, 21, 20, src, dst, NULL, NULL, NULL), SAGA_OK);
    saga_sampler *s = NULL;
    const int32_t fan = 5, seed = 0;
    assert_int_equal(saga_sampler_new(&s, g, &fan, 1, NULL), SAGA_OK);
    int count[21] = {0}, pair = 0;
    for (uint64_t batch = 0; batch < 4000; batch++) {
        saga_sample *b = NULL;
        assert_int_equal(saga_sampler_sample(s, &seed, 1, batch, &b), SAGA_OK);
        assert_int_equal(b->blocks[0].n_edges, 5);
        bool one = false, two = false;
        for (int e = 0; e < 5; e++) {
            int32_t u = b->ids[b->blocks[0].src[e]];
            count[u]++;
            one |= u == 1;
            two |= u == 2;
        }
        pair += one && two;
        saga_sample_free(&b);
    }
    for (int u = 1; u <= 20; u++)
        assert_true(fabs(count[u] - 1000.0) <= 6 * 27.4);
    assert_true(fabs(pair - 210.5) <= 6 * 14.1);
    saga_sampler_free(&s);
    saga_graph_free(&g);
}

static void assert_same_sample(const saga_sample *a, const saga_sample *b) {
    assert_int_equal(a->n_ids, b->n_ids);
    assert_int_equal(a->n_edges, b->n_edges);
    assert_memory_equal(a->ids, b->ids, (size_t)a->n_ids * sizeof *a->ids);
    for (int l = 0; l < a->n_layers; l++) {
        const saga_sample_block *x = &a->blocks[l], *y = &b->blocks[l];
        assert_int_equal(x->n_dst, y->n_dst);
        assert_int_equal(x->n_src, y->n_src);
        assert_memory_equal(x->offsets, y->offsets, ((size_t)x->n_dst + 1) * sizeof *x->offsets);
        assert_memory_equal(x->src, y->src, (size_t)x->n_edges * sizeof *x->src);
        assert_true(!x->values == !y->values);
        if (x->values)
            assert_memory_equal(x->values, y->values, (size_t)x->n_edges * sizeof *x->values);
    }
}

/* On an R-MAT graph with hubs: the same sample on 1, 2 and 4 threads, and from a sampler used
 * before; another batch index or seed draws another. */
static void test_sample_same_on_any_thread_count(void **state) {
    (void)state;
    saga_graph *g = rmat(14);
    const int32_t n = saga_graph_n_vertices(g);
    const int32_t fan[3] = {15, 10, 5};
    int32_t seeds[512];
    for (int i = 0; i < 512; i++)
        seeds[i] = (int32_t)(((int64_t)i * 7919) % n);
    saga_sampler_opts o = saga_sampler_opts_defaults();
    o.seed = 9;
    o.self_loops = SAGA_DGRAPH_SELF_LOOPS_ADD;
    o.weight = SAGA_WEIGHT_SYMNORM;
    const int before = omp_get_max_threads();
    omp_set_num_threads(1);
    saga_sample *one = sample(g, fan, 3, &o, seeds, 512, 5);
    check_layout(one, seeds, 512, n);
    /* the last hop has more destinations than a hop the sampler runs on one thread */
    assert_true(one->blocks[0].n_dst > 4096);
    for (int t = 2; t <= 4; t += 2) {
        omp_set_num_threads(t);
        saga_sample *many = sample(g, fan, 3, &o, seeds, 512, 5);
        assert_same_sample(one, many);
        saga_sample_free(&many);
    }
    omp_set_num_threads(before);
    o.threads = 3; /* the option, not OpenMP's count */
    saga_sample *three = sample(g, fan, 3, &o, seeds, 512, 5);
    assert_same_sample(one, three);
    saga_sample_free(&three);
    o.threads = 0;
    saga_sampler *s = NULL;
    saga_sample *b = NULL;
    assert_int_equal(saga_sampler_new(&s, g, fan, 3, &o), SAGA_OK);
    for (uint64_t batch = 0; batch < 6; batch++) { /* after other batches: the same */
        assert_int_equal(saga_sampler_sample(s, seeds, 512, batch, &b), SAGA_OK);
        if (batch == 5)
            assert_same_sample(one, b);
        else
            assert_true(b->n_edges != one->n_edges ||
                        memcmp(b->blocks[2].src, one->blocks[2].src,
                               (size_t)b->blocks[2].n_edges * sizeof(int32_t)) != 0);
        saga_sample_free(&b);
    }
    saga_sampler_free(&s);
    o.seed = 10;
    saga_sample *other = sample(g, fan, 3, &o, seeds, 512, 5);
    assert_true(other->n_edges != one->n_edges ||
                memcmp(other->blocks[2].src, one->blocks[2].src,
                       (size_t)other->blocks[2].n_edges * sizeof(int32_t)) != 0);
    saga_sample_free(&other);
    saga_sample_free(&one);
    saga_graph_free(&g);
}

/* Refusals name what is wrong; a refused sample leaves the sampler as it was. */
static void test_sample_refusals(void **state) {
    (void)state;
    saga_graph *g = multigraph();
    saga_sampler *s = NULL;
    int32_t fan[65];
    for (int i = 0; i < 65; i++)
        fan[i] = 3;
    assert_int_equal(saga_sampler_new(&s, g, fan, 0, NULL), SAGA_ERR_INVALID_ARG);
    assert_int_equal(saga_sampler_new(&s, g, fan, 65, NULL), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("65 layers", NULL);
    const int32_t bad[] = {0, -2, (1 << 24) + 1};
    for (int i = 0; i < 3; i++) {
        int32_t f[2] = {3, bad[i]};
        assert_int_equal(saga_sampler_new(&s, g, f, 2, NULL), SAGA_ERR_INVALID_ARG);
        saga_test_assert_error_contains("of hop 2", NULL);
        assert_null(s);
    }
    saga_sampler_opts o = saga_sampler_opts_defaults();
    o.weight = SAGA_WEIGHT_COUNT;
    assert_int_equal(saga_sampler_new(&s, g, fan, 2, &o), SAGA_ERR_INVALID_ARG);
    o = saga_sampler_opts_defaults();
    o.threads = -1;
    assert_int_equal(saga_sampler_new(&s, g, fan, 2, &o), SAGA_ERR_INVALID_ARG);

    assert_int_equal(saga_sampler_new(&s, g, fan, 2, NULL), SAGA_OK);
    saga_sample *b = NULL, *ref = NULL;
    const int32_t seeds[] = {3, 9, 27, 81};
    assert_int_equal(saga_sampler_sample(s, seeds, 4, 1, &ref), SAGA_OK);
    const int32_t twice[] = {3, 9, 27, 9}, outside[] = {3, 300};
    assert_int_equal(saga_sampler_sample(s, twice, 4, 1, &b), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("seed 3 is vertex 9, given before as seed 1", NULL);
    assert_null(b);
    assert_int_equal(saga_sampler_sample(s, outside, 2, 1, &b), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("outside 0..299", NULL);
    assert_int_equal(saga_sampler_sample(s, seeds, 0, 1, &b), SAGA_ERR_INVALID_ARG);
    assert_int_equal(saga_sampler_sample(s, seeds, 4, 1, &b), SAGA_OK);
    assert_same_sample(ref, b);
    saga_sample_free(&b);
    saga_sample_free(&ref);
    saga_sampler_free(&s);
    saga_sampler_free(&s); /* NULL is accepted */
    saga_sample_free(&b);
    saga_graph_free(&g);
}

/* Every allocation of a sampler and a sample failing in turn: SAGA_ERR_OUT_OF_MEMORY, nothing
 * leaked, and the sampler then gives the sample it would have. */
static void test_sample_failing_allocations(void **state) {
    (void)state;
    saga_graph *g = multigraph();
    const int32_t fan[2] = {5, 3}, seeds[] = {1, 2, 3, 4, 5, 6, 7, 8};
    saga_sampler_opts o = saga_sampler_opts_defaults();
    o.self_loops = SAGA_DGRAPH_SELF_LOOPS_ADD;
    o.weight = SAGA_WEIGHT_SYMNORM;
    o.degrees = SAGA_SAMPLE_DEGREES_SAMPLED;
    saga_sample *ref = sample(g, fan, 2, &o, seeds, 8, 2);
    int failures = 0;
    bool ok = false;
    for (long n = 1; n < 100 && !ok; n++) {
        saga_sampler *s = NULL;
        saga_sample *b = NULL;
        saga_test_fail_alloc_after(n);
        saga_status st = saga_sampler_new(&s, g, fan, 2, &o);
        if (st == SAGA_OK)
            st = saga_sampler_sample(s, seeds, 8, 2, &b);
        saga_test_fail_alloc_after(0);
        if (st == SAGA_OK) {
            ok = true;
            assert_same_sample(ref, b);
        } else {
            assert_int_equal(st, SAGA_ERR_OUT_OF_MEMORY);
            assert_null(b);
            failures++;
            if (s) { /* the sample failed: the sampler still works */
                assert_int_equal(saga_sampler_sample(s, seeds, 8, 2, &b), SAGA_OK);
                assert_same_sample(ref, b);
            }
        }
        saga_sample_free(&b);
        saga_sampler_free(&s);
    }
    assert_true(ok);
    assert_true(failures >= 8);
    saga_sample_free(&ref);
    saga_graph_free(&g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sample_full_fanout_is_the_placed_graph),
        cmocka_unit_test(test_sample_fanouts_draw_without_replacement),
        cmocka_unit_test(test_sample_uniform),
        cmocka_unit_test(test_sample_same_on_any_thread_count),
        cmocka_unit_test(test_sample_refusals),
        cmocka_unit_test(test_sample_failing_allocations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
