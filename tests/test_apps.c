/* test_apps.c - pieces of the `saga` binary tested directly: the JSON writer and PageRank. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"

/* The binary's sources are not in the library; they are compiled into this test. */
#include "../apps/json.c"
#include "../apps/pagerank.c"

#include "saga.h"
#include "saga_datasets.h"

#include <omp.h>
#include <stdlib.h>

/* Runs a writer into memory and returns the text (static buffer). */
static char mem[4096];
static FILE *mem_open(void) {
    FILE *f = fmemopen(mem, sizeof mem, "w");
    assert_non_null(f);
    return f;
}
static const char *mem_close(FILE *f) {
    assert_int_equal(fclose(f), 0);
    return mem;
}

static void test_apps_json_structure_and_escaping(void **state) {
    (void)state;
    FILE *f = mem_open();
    json j;
    json_init(&j, f);
    json_object_begin(&j);
    json_key(&j, "name"), json_str(&j, "a\"b\\c\nd\te\x01");
    json_key(&j, "n"), json_int(&j, -42);
    json_key(&j, "u"), json_uint(&j, UINT64_MAX);
    json_key(&j, "list");
    json_array_begin(&j);
    json_int(&j, 1);
    json_object_begin(&j);
    json_key(&j, "ok"), json_bool(&j, true);
    json_object_end(&j);
    json_array_begin(&j);
    json_array_end(&j);
    json_null(&j);
    json_array_end(&j);
    json_key(&j, "empty"), json_object_begin(&j), json_object_end(&j);
    json_object_end(&j);
    json_finish(&j);
    assert_string_equal(mem_close(f),
                        "{\"name\":\"a\\\"b\\\\c\\nd\\te\\u0001\",\"n\":-42,"
                        "\"u\":18446744073709551615,\"list\":[1,{\"ok\":true},[],null],"
                        "\"empty\":{}}\n");
}

static void test_apps_json_utf8(void **state) {
    (void)state;
    FILE *f = mem_open();
    json j;
    json_init(&j, f);
    json_array_begin(&j);
    json_str(&j, "gr\xc3\xa4"
                 "ph \xe2\x82\xac");        /* valid: kept as is */
    json_str(&j, "bad \xff end");           /* invalid byte */
    json_str(&j, "overlong \xc0\xaf");      /* overlong '/' */
    json_str(&j, "cut \xe2\x82");           /* truncated sequence */
    json_str(&j, "surrogate \xed\xa0\x80"); /* UTF-16 surrogate */
    json_array_end(&j);
    json_finish(&j);
    assert_string_equal(mem_close(f), "[\"gr\xc3\xa4ph \xe2\x82\xac\",\"bad \\ufffd end\","
                                      "\"overlong \\ufffd\\ufffd\",\"cut \\ufffd\\ufffd\","
                                      "\"surrogate \\ufffd\\ufffd\\ufffd\"]\n");
}

static void test_apps_json_numbers(void **state) {
    (void)state;
    FILE *f = mem_open();
    json j;
    json_init(&j, f);
    json_array_begin(&j);
    json_num(&j, 0.85);
    json_num(&j, 0.1 + 0.2); /* needs 17 digits */
    json_num(&j, 1e-10);
    json_num(&j, -0.0);
    json_num(&j, 1.0 / 0.0);
    json_num(&j, -1.0 / 0.0);
    json_num(&j, 0.0 / 0.0);
    json_num(&j, 3);
    json_array_end(&j);
    json_finish(&j);
    assert_string_equal(mem_close(f), "[0.85,0.30000000000000004,1e-10,-0,null,null,null,3]\n");
    char buf[40];
    for (double v = 1e-300; v < 1e300; v *= 7.3) {
        json_format_double(buf, sizeof buf, v / 3);
        assert_true(strtod(buf, NULL) == v / 3);
    }
}

/* ---- PageRank ---------------------------------------------------------------------------- */

/* A plain dense power iteration with the same definition, as the reference. */
static void power_iteration(double *x, int n, const int *src, const int *dst, int m, double d,
                            int iters) {
    int outdeg[16] = {0};
    for (int k = 0; k < m; k++)
        outdeg[src[k]]++;
    for (int v = 0; v < n; v++)
        x[v] = 1.0 / n;
    for (int it = 0; it < iters; it++) {
        double y[16], dang = 0;
        for (int v = 0; v < n; v++)
            dang += outdeg[v] ? 0 : x[v];
        for (int v = 0; v < n; v++)
            y[v] = (1 - d) / n + d * dang / n;
        for (int k = 0; k < m; k++)
            y[dst[k]] += d * x[src[k]] / outdeg[src[k]];
        memcpy(x, y, sizeof(double) * (size_t)n);
    }
}

/* 0->1, 1->2, 2->0, 2->3: vertex 3 is dangling. */
static saga_graph *small_graph(void) {
    const int32_t src[] = {0, 1, 2, 2}, dst[] = {1, 2, 0, 3};
    saga_graph *g = NULL;
    assert_int_equal(saga_graph_from_edges(&g, 4, 4, src, dst, NULL, NULL, NULL), SAGA_OK);
    return g;
}

static void test_apps_pagerank_matches_power_iteration(void **state) {
    (void)state;
    saga_graph *g = small_graph();
    pr_opts o = pr_opts_defaults();
    o.tol = 1e-14;
    double *x = NULL;
    pr_result r;
    assert_int_equal(pr_run(&x, &r, g, &o, NULL, NULL), SAGA_OK);
    assert_true(r.converged);
    assert_true(r.l1_change < 1e-14);
    assert_true(r.iterations > 10 && r.iterations < 200);
    const int s[] = {0, 1, 2, 2}, d[] = {1, 2, 0, 3};
    double ref[4];
    power_iteration(ref, 4, s, d, 4, 0.85, 500);
    /* Rounding, relative to each rank; and what pr_run left to converge: each step contracts the
     * L1 distance to the fixed point by d, so that distance is at most d / (1 - d) times the
     * last step's change (the reference's 500 steps leave d^500). */
    const double bound = saga_test_pagerank_bound(g, o.damping),
                 left = o.damping / (1 - o.damping) * r.l1_change;
    double sum = 0;
    for (int v = 0; v < 4; v++) {
        assert_true(fabs(x[v] - ref[v]) <= bound * ref[v] + left);
        sum += x[v];
    }
    /* every step keeps the sum at 1: the ranks' rounding and that of this sum of 4 */
    assert_true(fabs(sum - 1) <= bound + saga_test_gamma(4, SAGA_TEST_U64));
    assert_true(x[0] == x[3]); /* both receive exactly x2/2 */
    assert_true(x[2] > x[1] && x[1] > x[0]);
    saga_free(x);
    saga_graph_free(&g);
}

static void test_apps_pagerank_reports_unconverged(void **state) {
    (void)state;
    saga_graph *g = small_graph();
    pr_opts o = pr_opts_defaults();
    o.max_iters = 3;
    double *x = NULL;
    pr_result r;
    assert_int_equal(pr_run(&x, &r, g, &o, NULL, NULL), SAGA_OK);
    assert_false(r.converged);
    assert_int_equal(r.iterations, 3);
    assert_true(r.l1_change > o.tol);
    saga_free(x);
    x = NULL;

    o.damping = 1.0;
    assert_int_equal(pr_run(&x, &r, g, &o, NULL, NULL), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("damping", NULL);
    o = pr_opts_defaults();
    o.tol = 0;
    assert_int_equal(pr_run(&x, &r, g, &o, NULL, NULL), SAGA_ERR_INVALID_ARG);
    assert_null(x);
    saga_graph_free(&g);
}

/* The same bits for any thread count, on a graph with several blocks of vertices. */
static void test_apps_pagerank_thread_independent(void **state) {
    (void)state;
    saga_rmat_params p = saga_rmat_params_defaults();
    p.scale = 14;
    p.edge_factor = 8;
    saga_graph *g = NULL;
    assert_int_equal(saga_rmat_graph(&g, &p, NULL), SAGA_OK);
    pr_opts o = pr_opts_defaults();
    double *x1 = NULL, *x3 = NULL;
    pr_result r1, r3;
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    assert_int_equal(pr_run(&x1, &r1, g, &o, NULL, NULL), SAGA_OK);
    omp_set_num_threads(3);
    assert_int_equal(pr_run(&x3, &r3, g, &o, NULL, NULL), SAGA_OK);
    omp_set_num_threads(saved);
    assert_int_equal(r1.iterations, r3.iterations);
    assert_true(r1.l1_change == r3.l1_change);
    assert_memory_equal(x1, x3, sizeof(double) << 14);
    double sum = 0;
    for (int v = 0; v < 1 << 14; v++)
        sum += x1[v];
    /* every step keeps the sum at 1, converged or not: the ranks' rounding (relative to each)
     * and this sum's */
    assert_true(fabs(sum - 1) <=
                saga_test_pagerank_bound(g, o.damping) + saga_test_gamma(1 << 14, SAGA_TEST_U64));
    saga_free(x1);
    saga_free(x3);
    saga_graph_free(&g);
}

/* The executor's PageRank (in memory: rows in degree order, one pull kernel an iteration)
 * against this reference loop, to convergence on an R-MAT graph: the same iteration count and
 * the same scores to rounding (saga_test_pagerank_bound: the two add in different orders), on 1
 * and 2 threads. */
static void test_apps_pagerank_executor_matches_reference(void **state) {
    (void)state;
    saga_rmat_params p = saga_rmat_params_defaults();
    p.scale = 13;
    p.edge_factor = 8;
    saga_graph *g = NULL;
    assert_int_equal(saga_rmat_graph(&g, &p, NULL), SAGA_OK);
    const int32_t n = saga_graph_n_vertices(g);
    pr_opts o = pr_opts_defaults();
    double *ref = NULL;
    pr_result r;
    assert_int_equal(pr_run(&ref, &r, g, &o, NULL, NULL), SAGA_OK);
    assert_true(r.converged);
    double *x = malloc((size_t)n * sizeof *x);
    assert_non_null(x);
    const double bound = saga_test_pagerank_bound(g, o.damping);
    for (int t = 1; t <= 2; t++) {
        saga_backend_params bp = saga_backend_params_defaults();
        bp.n_threads = t;
        saga_backend *be = NULL;
        assert_int_equal(saga_backend_cpu_new(&be, &bp), SAGA_OK);
        saga_ctx *c = NULL;
        assert_int_equal(saga_ctx_new(&c, be, 0), SAGA_OK);
        saga_net *net = NULL;
        assert_int_equal(saga_net_new(&net, c, g, NULL), SAGA_OK);
        int iters = 0;
        double l1 = 0;
        assert_int_equal(saga_net_pagerank(net, o.damping, o.tol, o.max_iters, x, &iters, &l1),
                         SAGA_OK);
        saga_net_stats st;
        saga_net_get_stats(net, &st);
        assert_false(st.streamed);
        assert_int_equal(iters, r.iterations);
        saga_test_assert_close_f64(t == 1 ? "1 thread" : "2 threads", x, ref, n, bound, 0);
        saga_net_free(&net);
        saga_ctx_free(&c);
        saga_backend_free_all(&be);
    }
    free(x);
    saga_free(ref);
    saga_graph_free(&g);
}

static void test_apps_pagerank_alloc_failure(void **state) {
    (void)state;
    saga_graph *g = small_graph();
    pr_opts o = pr_opts_defaults();
    for (long n = 1; n <= 5; n++) {
        double *x = NULL;
        pr_result r;
        saga_test_fail_alloc_after(n);
        saga_status st = pr_run(&x, &r, g, &o, NULL, NULL);
        saga_test_fail_alloc_after(0);
        assert_int_equal(st, SAGA_ERR_OUT_OF_MEMORY);
        assert_null(x);
    }
    saga_graph_free(&g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_apps_json_structure_and_escaping),
        cmocka_unit_test(test_apps_json_utf8),
        cmocka_unit_test(test_apps_json_numbers),
        cmocka_unit_test(test_apps_pagerank_matches_power_iteration),
        cmocka_unit_test(test_apps_pagerank_reports_unconverged),
        cmocka_unit_test(test_apps_pagerank_thread_independent),
        cmocka_unit_test(test_apps_pagerank_executor_matches_reference),
        cmocka_unit_test(test_apps_pagerank_alloc_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
