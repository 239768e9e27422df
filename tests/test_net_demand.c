/* test_net_demand.c - the first pass of a net's plan (engine/exec/net_demand.h): the rows each
 * stage computes, against sets computed here edge by edge, for any depth and mix of vertex and
 * program stages; every row in, every row out; the rows a loss reads of a two-layer GCN's output
 * give its two-hop in-neighbourhood at the first stage; rows outside the graph refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"

#include "net_demand.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9E3779B97F4A7C15ull;

/* A random graph of n vertices and m edges as edge arrays, and its in-edge CSR. */
typedef struct graph {
    int32_t n;
    int64_t m;
    int32_t *eu, *ev; /* edge k: eu[k] -> ev[k] */
    int64_t *off;
    int32_t *src;
} graph;

static void graph_new(graph *g, int32_t n, int64_t m) {
    g->n = n;
    g->m = m;
    g->eu = test_malloc((size_t)m * sizeof *g->eu + 4);
    g->ev = test_malloc((size_t)m * sizeof *g->ev + 4);
    g->off = test_calloc((size_t)n + 1, sizeof *g->off);
    g->src = test_malloc((size_t)m * sizeof *g->src + 4);
    for (int64_t k = 0; k < m; k++) {
        g->eu[k] = (int32_t)(saga_test_u64(&rng) % (uint64_t)n);
        g->ev[k] = (int32_t)(saga_test_u64(&rng) % (uint64_t)n);
        g->off[g->ev[k] + 1]++;
    }
    for (int32_t v = 0; v < n; v++)
        g->off[v + 1] += g->off[v];
    int64_t *fill = test_malloc(((size_t)n + 1) * sizeof *fill);
    memcpy(fill, g->off, ((size_t)n + 1) * sizeof *fill);
    for (int64_t k = 0; k < m; k++)
        g->src[fill[g->ev[k]]++] = g->eu[k];
    test_free(fill);
}

static void graph_free(graph *g) {
    test_free(g->eu);
    test_free(g->ev);
    test_free(g->off);
    test_free(g->src);
}

/* The demand computed edge by edge: in[s][v] = stage s computes row v; in[S][v]: stage 0 reads
 * row v of its input. */
static void brute(const graph *g, const stage_kind *kinds, int S, const uint8_t *out,
                  uint8_t **in) {
    uint8_t *want = test_malloc((size_t)g->n + 1);
    memcpy(want, out, (size_t)g->n);
    for (int s = S - 1; s >= 0; s--) {
        memcpy(in[s], want, (size_t)g->n);
        if (kinds[s] == STAGE_PROGRAM)
            for (int64_t k = 0; k < g->m; k++)
                if (in[s][g->ev[k]])
                    want[g->eu[k]] = 1;
    }
    memcpy(in[S], want, (size_t)g->n);
    test_free(want);
}

static void check(const graph *g, const stage_kind *kinds, int S, const int32_t *rows,
                  int64_t n_rows) {
    uint8_t *out = test_calloc((size_t)g->n + 1, 1);
    for (int64_t i = 0; i < n_rows; i++)
        out[rows ? rows[i] : i] = 1;
    uint8_t *in[8];
    for (int s = 0; s <= S; s++)
        in[s] = test_calloc((size_t)g->n + 1, 1);
    brute(g, kinds, S, out, in);
    net_demand d;
    assert_int_equal(net_demand_build(&d, kinds, S, g->off, g->src, g->n, rows, n_rows, g->n, NULL),
                     SAGA_OK);
    assert_int_equal(d.n_stages, S);
    for (int s = 0; s < S; s++) {
        int32_t want = 0;
        int64_t edges = 0;
        for (int32_t v = 0; v < g->n; v++)
            if (in[s][v]) {
                want++;
                edges += g->off[v + 1] - g->off[v];
            }
        assert_int_equal(d.n_rows[s], want);
        assert_int_equal(d.n_edges[s], kinds[s] == STAGE_PROGRAM ? edges : 0);
        if (want == g->n) { /* every row: none listed */
            assert_null(d.rows[s]);
            continue;
        }
        assert_non_null(d.rows[s]);
        for (int32_t i = 0; i < d.n_rows[s]; i++) {
            assert_true(in[s][d.rows[s][i]]);
            if (i)
                assert_true(d.rows[s][i] > d.rows[s][i - 1]);
        }
    }
    int32_t want = 0;
    for (int32_t v = 0; v < g->n; v++)
        want += in[S][v];
    assert_int_equal(d.n_in, want);
    if (want == g->n) {
        assert_null(d.in_rows);
    } else {
        for (int32_t i = 0; i < d.n_in; i++) {
            assert_true(in[S][d.in_rows[i]]);
            if (i)
                assert_true(d.in_rows[i] > d.in_rows[i - 1]);
        }
    }
    net_demand_free(&d);
    assert_null(d.rows);
    assert_null(d.in_rows);
    for (int s = 0; s <= S; s++)
        test_free(in[s]);
    test_free(out);
}

/* Random graphs, stage mixes of depth 1 to 6 and output rows (some repeated). */
static void test_net_demand_against_edges(void **state) {
    (void)state;
    for (int trial = 0; trial < 60; trial++) {
        graph g;
        graph_new(&g, 40 + (int32_t)(saga_test_u64(&rng) % 200),
                  (int64_t)(saga_test_u64(&rng) % 600));
        stage_kind kinds[6];
        const int S = 1 + (int)(saga_test_u64(&rng) % 6);
        for (int s = 0; s < S; s++)
            kinds[s] = saga_test_u64(&rng) % 2 ? STAGE_PROGRAM : STAGE_VERTEX;
        const int64_t R = (int64_t)(saga_test_u64(&rng) % 12);
        int32_t rows[12];
        for (int64_t i = 0; i < R; i++)
            rows[i] = i && saga_test_u64(&rng) % 4 == 0
                          ? rows[i - 1]
                          : (int32_t)(saga_test_u64(&rng) % (uint64_t)g.n);
        check(&g, kinds, S, rows, R);
        check(&g, kinds, S, NULL, g.n); /* every row */
        graph_free(&g);
    }
}

/* GCN's stages (X W, aggregate, H W, aggregate) on a graph with a self loop at every vertex: the
 * rows a loss reads are what the last two stages compute, the first aggregation computes their
 * in-neighbourhood, the first product the two-hop one; no output row, no row anywhere. */
static void test_net_demand_gcn(void **state) {
    (void)state;
    graph g;
    graph_new(&g, 300, 900);
    /* the self loops: rebuilt with them */
    int32_t *eu = test_malloc((size_t)(g.m + g.n) * sizeof *eu);
    int32_t *ev = test_malloc((size_t)(g.m + g.n) * sizeof *ev);
    memcpy(eu, g.eu, (size_t)g.m * sizeof *eu);
    memcpy(ev, g.ev, (size_t)g.m * sizeof *ev);
    for (int32_t v = 0; v < g.n; v++)
        eu[g.m + v] = ev[g.m + v] = v;
    graph gs = g;
    gs.m = g.m + g.n;
    gs.eu = eu;
    gs.ev = ev;
    gs.off = test_calloc((size_t)g.n + 1, sizeof *gs.off);
    gs.src = test_malloc((size_t)gs.m * sizeof *gs.src);
    for (int64_t k = 0; k < gs.m; k++)
        gs.off[ev[k] + 1]++;
    for (int32_t v = 0; v < g.n; v++)
        gs.off[v + 1] += gs.off[v];
    int64_t *fill = test_malloc(((size_t)g.n + 1) * sizeof *fill);
    memcpy(fill, gs.off, ((size_t)g.n + 1) * sizeof *fill);
    for (int64_t k = 0; k < gs.m; k++)
        gs.src[fill[ev[k]]++] = eu[k];
    test_free(fill);
    const stage_kind gcn[4] = {STAGE_VERTEX, STAGE_PROGRAM, STAGE_VERTEX, STAGE_PROGRAM};
    int32_t rows[10];
    for (int i = 0; i < 10; i++)
        rows[i] = g.n - 1 - 29 * i;
    net_demand d;
    assert_int_equal(net_demand_build(&d, gcn, 4, gs.off, gs.src, gs.n, rows, 10, gs.n, NULL),
                     SAGA_OK);
    /* one hop and two hops, counted here from the edges */
    uint8_t hop[2][300] = {{0}};
    for (int i = 0; i < 10; i++)
        hop[0][rows[i]] = 1;
    for (int64_t k = 0; k < gs.m; k++)
        if (hop[0][gs.ev[k]])
            hop[1][gs.eu[k]] = 1;
    int32_t one = 0, two = 0;
    uint8_t two_hop[300];
    memcpy(two_hop, hop[1], sizeof two_hop);
    for (int64_t k = 0; k < gs.m; k++)
        if (hop[1][gs.ev[k]])
            two_hop[gs.eu[k]] = 1;
    for (int32_t v = 0; v < g.n; v++) {
        one += hop[1][v];
        two += two_hop[v];
    }
    assert_int_equal(d.n_rows[3], 10);
    assert_int_equal(d.n_rows[2], one);
    assert_int_equal(d.n_rows[1], one);
    assert_int_equal(d.n_rows[0], two);
    print_message("  10 loss rows of %d: the aggregations compute %d and %d rows, X W %d\n",
                  (int)g.n, (int)d.n_rows[1], (int)d.n_rows[3], (int)d.n_rows[0]);
    net_demand_free(&d);
    assert_int_equal(net_demand_build(&d, gcn, 4, gs.off, gs.src, gs.n, rows, 0, gs.n, NULL),
                     SAGA_OK);
    for (int s = 0; s < 4; s++)
        assert_int_equal(d.n_rows[s], 0);
    net_demand_free(&d);
    test_free(eu);
    test_free(ev);
    test_free(gs.off);
    test_free(gs.src);
    graph_free(&g);
}

/* The cap widens a demand: a stage demanded more than cap rows computes every row, and so do the
 * stages before it and the input; those at or below the cap keep their exact rows. */
static void test_net_demand_cap(void **state) {
    (void)state;
    for (int trial = 0; trial < 40; trial++) {
        graph g;
        graph_new(&g, 50 + (int32_t)(saga_test_u64(&rng) % 150),
                  (int64_t)(saga_test_u64(&rng) % 400));
        stage_kind kinds[5];
        const int S = 1 + (int)(saga_test_u64(&rng) % 5);
        for (int s = 0; s < S; s++)
            kinds[s] = saga_test_u64(&rng) % 2 ? STAGE_PROGRAM : STAGE_VERTEX;
        int32_t rows[16];
        for (int i = 0; i < 16; i++)
            rows[i] = (int32_t)(saga_test_u64(&rng) % (uint64_t)g.n);
        net_demand exact, d;
        assert_int_equal(net_demand_build(&exact, kinds, S, g.off, g.src, g.n, rows, 16, g.n, NULL),
                         SAGA_OK);
        const int32_t cap = (int32_t)(saga_test_u64(&rng) % (uint64_t)g.n);
        assert_int_equal(net_demand_build(&d, kinds, S, g.off, g.src, g.n, rows, 16, cap, NULL),
                         SAGA_OK);
        bool widened = false;
        for (int s = S; s >= 0; s--) { /* s == 0: the input */
            int32_t n_exact = s ? exact.n_rows[s - 1] : exact.n_in;
            int32_t n_got = s ? d.n_rows[s - 1] : d.n_in;
            const int32_t *r_exact = s ? exact.rows[s - 1] : exact.in_rows;
            const int32_t *r_got = s ? d.rows[s - 1] : d.in_rows;
            widened = widened || n_exact > cap;
            if (widened) {
                assert_int_equal(n_got, g.n);
                assert_null(r_got);
            } else {
                assert_int_equal(n_got, n_exact);
                if (r_exact)
                    assert_memory_equal(r_got, r_exact, (size_t)n_got * sizeof(int32_t));
            }
        }
        net_demand_free(&exact);
        net_demand_free(&d);
        graph_free(&g);
    }
}

static void test_net_demand_refusals(void **state) {
    (void)state;
    graph g;
    graph_new(&g, 10, 20);
    const stage_kind k[1] = {STAGE_PROGRAM};
    const int32_t bad[2] = {3, 10};
    net_demand d;
    assert_int_equal(net_demand_build(&d, k, 1, g.off, g.src, g.n, bad, 2, g.n, NULL),
                     SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("row 10", "outside [0, 10)", NULL);
    assert_null(d.rows);
    assert_int_equal(net_demand_build(&d, k, 0, g.off, g.src, g.n, NULL, 10, g.n, NULL),
                     SAGA_ERR_INVALID_ARG);
    /* every allocation that fails is an error, with nothing left behind */
    for (long fail_at = 1;; fail_at++) {
        saga_test_fail_alloc_after(fail_at);
        saga_status st = net_demand_build(&d, k, 1, g.off, g.src, g.n, bad, 1, g.n, NULL);
        saga_test_fail_alloc_after(0);
        if (st == SAGA_OK) {
            net_demand_free(&d);
            break;
        }
        assert_int_equal(st, SAGA_ERR_OUT_OF_MEMORY);
        assert_null(d.rows);
    }
    graph_free(&g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_net_demand_against_edges),
        cmocka_unit_test(test_net_demand_gcn),
        cmocka_unit_test(test_net_demand_cap),
        cmocka_unit_test(test_net_demand_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
