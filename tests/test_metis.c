/* test_metis.c - METIS graph files: the manual's examples, fmt variants, and every error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"

#include "io_test_alloc.h"
#include "parsers.h"
#include "saga_io.h"

#include <stdio.h>
#include <string.h>

/* The 7-vertex, 11-edge graph of the METIS manual (figure 2a), unweighted and weighted. */
static const char MANUAL_PLAIN[] = "7 11\n"
                                   "5 3 2\n"
                                   "1 3 4\n"
                                   "5 4 2 1\n"
                                   "2 3 6 7\n"
                                   "1 3 6\n"
                                   "5 4 7\n"
                                   "6 4\n";
static const char MANUAL_EW[] = "7 11 1\n"
                                "5 1 3 2 2 1\n"
                                "1 1 3 2 4 1\n"
                                "5 3 4 2 2 2 1 2\n"
                                "2 1 3 2 6 2 7 5\n"
                                "1 1 3 3 6 2\n"
                                "5 2 4 2 7 6\n"
                                "6 6 4 5\n";

static saga_graph *read_ok(const char *text, const saga_load_opts *opts) {
    const char *path = saga_test_write_str("g.graph", text);
    saga_graph *g = NULL;
    saga_status st = saga_metis_read(&g, path, opts);
    if (st != SAGA_OK)
        fail_msg("%s: %s", saga_status_name(st), saga_last_error());
    return g;
}

static const char *read_fails(const char *text, saga_status want, const saga_load_opts *opts) {
    const char *path = saga_test_write_str("bad.graph", text);
    saga_graph *g = NULL;
    saga_status st = saga_metis_read(&g, path, opts);
    if (st != want)
        fail_msg("expected %s, got %s: %s", saga_status_name(want), saga_status_name(st),
                 saga_last_error());
    assert_null(g);
    return path;
}

static void assert_row(saga_csr c, int32_t v, const int32_t *want, const float *w, int n) {
    assert_int_equal(c.offsets[v + 1] - c.offsets[v], n);
    for (int k = 0; k < n; k++) {
        assert_int_equal(c.indices[c.offsets[v] + k], want[k]);
        if (w)
            assert_true(c.weights[c.offsets[v] + k] == w[k]);
    }
}

static void test_metis_manual_graph(void **state) {
    (void)state;
    saga_graph *g = read_ok(MANUAL_PLAIN, NULL);
    assert_int_equal(saga_graph_n_vertices(g), 7);
    assert_int_equal(saga_graph_n_edges(g), 22);
    assert_false(saga_graph_has_weights(g));
    saga_csr out = saga_graph_out(g);
    assert_row(out, 0, (int32_t[]){1, 2, 4}, NULL, 3);
    assert_row(out, 3, (int32_t[]){1, 2, 5, 6}, NULL, 4);
    assert_row(out, 6, (int32_t[]){3, 5}, NULL, 2);
    /* both arcs of every edge: in-rows equal out-rows */
    saga_csr in = saga_graph_in(g);
    assert_memory_equal(in.offsets, out.offsets, 8 * sizeof(int64_t));
    assert_memory_equal(in.indices, out.indices, 22 * sizeof(int32_t));
    saga_graph_free(&g);
}

static void test_metis_edge_weights(void **state) {
    (void)state;
    saga_graph *g = read_ok(MANUAL_EW, NULL);
    assert_int_equal(saga_graph_n_edges(g), 22);
    assert_true(saga_graph_has_weights(g));
    saga_csr out = saga_graph_out(g);
    assert_row(out, 0, (int32_t[]){1, 2, 4}, (float[]){1, 2, 1}, 3);
    assert_row(out, 3, (int32_t[]){1, 2, 5, 6}, (float[]){1, 2, 2, 5}, 4);
    assert_row(out, 6, (int32_t[]){3, 5}, (float[]){5, 6}, 2);
    saga_graph_free(&g);

    saga_load_opts o = saga_load_opts_defaults();
    o.weights = SAGA_WEIGHTS_IGNORE;
    g = read_ok(MANUAL_EW, &o);
    assert_false(saga_graph_has_weights(g));
    assert_int_equal(saga_graph_n_edges(g), 22);
    saga_graph_free(&g);

    o.weights = SAGA_WEIGHTS_REQUIRE;
    const char *p = read_fails(MANUAL_PLAIN, SAGA_ERR_PARSE, &o);
    saga_test_assert_error_contains(p, "required", "line 1", NULL);
}

static void test_metis_vertex_columns_comments_isolated(void **state) {
    (void)state;
    /* fmt 111 with 2 constraints: size, 2 weights, then (neighbour, weight) pairs; vertex 3 has
     * no neighbours (an empty line); '%' lines may appear anywhere */
    saga_graph *g = read_ok("% a comment before the header\n"
                            "4 2 111 2\n"
                            "1 5 6 2 7\n"
                            "% between vertices\n"
                            "1 0 0 1 7 4 9\n"
                            "2 3 3\n"
                            "1 1 1 2 9\n",
                            NULL);
    assert_int_equal(saga_graph_n_vertices(g), 4);
    assert_int_equal(saga_graph_n_edges(g), 4);
    saga_csr out = saga_graph_out(g);
    assert_row(out, 0, (int32_t[]){1}, (float[]){7}, 1);
    assert_row(out, 1, (int32_t[]){0, 3}, (float[]){7, 9}, 2);
    assert_row(out, 2, NULL, NULL, 0);
    assert_row(out, 3, (int32_t[]){1}, (float[]){9}, 1);
    saga_graph_free(&g);

    /* fmt 010 (written "10"), default one constraint; vertex 3 has a weight, no neighbours */
    g = read_ok("3 1 10\n4 2\n9 1\n5\n", NULL);
    assert_int_equal(saga_graph_n_vertices(g), 3);
    assert_int_equal(saga_graph_n_edges(g), 2);
    assert_false(saga_graph_has_weights(g));
    saga_graph_free(&g);

    /* without vertex columns, a blank line is a vertex without neighbours */
    g = read_ok("4 1\n\n3\n2\n\n", NULL);
    assert_int_equal(saga_graph_n_vertices(g), 4);
    assert_int_equal(saga_graph_n_edges(g), 2);
    out = saga_graph_out(g);
    assert_row(out, 0, NULL, NULL, 0);
    assert_row(out, 1, (int32_t[]){2}, NULL, 1);
    assert_row(out, 3, NULL, NULL, 0);
    saga_graph_free(&g);

    /* fmt 001 spelled out; trailing comment and blank lines after the last vertex */
    g = read_ok("2 1 001\n2 3\n1 3\n% end\n\n", NULL);
    assert_int_equal(saga_graph_n_edges(g), 2);
    assert_true(saga_graph_out(g).weights[0] == 3.0f);
    saga_graph_free(&g);
}

static void test_metis_gzip(void **state) {
    (void)state;
    const char *path = saga_test_write_gz("m.graph.gz", MANUAL_EW, sizeof MANUAL_EW - 1);
    saga_graph *g = NULL;
    assert_int_equal(saga_metis_read(&g, path, NULL), SAGA_OK);
    assert_int_equal(saga_graph_n_edges(g), 22);
    saga_graph_free(&g);
}

static void test_metis_header_errors(void **state) {
    (void)state;
    const char *p;
    p = read_fails("", SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, "no header", NULL);
    p = read_fails("% only a comment\n", SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, "no header", NULL);
    p = read_fails("7\n", SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":1:", "missing edge count", NULL);
    p = read_fails("x 3\n", SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":1:", "vertex count", "\"x\"", NULL);
    p = read_fails("3 1 2\n2\n1\n\n", SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":1:", "fmt \"2\"", "0 or 1", NULL);
    p = read_fails("3 1 1011\n", SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":1:", "fmt \"1011\"", NULL);
    p = read_fails("3 1 1 2\n2 1\n1 1\n\n", SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":1:", "ncon = 2", "no vertex weights", NULL);
    p = read_fails("3 1 11 1 4\n", SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":1:", "extra \"4\"", NULL);
    p = read_fails("3000000000 1\n", SAGA_ERR_UNSUPPORTED, NULL);
    saga_test_assert_error_contains(p, ":1:", "3000000000 vertices", NULL);
}

static void test_metis_body_errors(void **state) {
    (void)state;
    const char *p;
    /* 2m entries needed, 4 listed */
    p = read_fails("3 3\n2 3\n1\n1\n", SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, "hold 4 entries", "m = 3", "2m = 6", NULL);
    p = read_fails("3 1\n2 3\n1\n1\n", SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":3:", "more than the 2 adjacency entries", NULL);
    p = read_fails("3 1\n2\n1 4\n\n", SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":3:", "neighbour 4 of vertex 2", "outside 1..3", NULL);
    p = read_fails("3 1\n0\n1\n\n", SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":2:", "neighbour 0", NULL);
    p = read_fails("3 2\n1 2\n1\n\n", SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":2:", "vertex 1 lists itself", "self-loops", NULL);
    p = read_fails("4 1\n2\n1\n", SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, "found 2 vertex lines", "declares 4 vertices", NULL);
    p = read_fails("2 1\n2\n1\n2\n", SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":4:", "more vertex lines than the 2", NULL);
    p = read_fails("2 1 1\n2 0\n1 1\n", SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":2:", "weight 0 of edge 1-2", "positive", NULL);
    p = read_fails("2 1 1\n2 1\n1\n", SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":3:", "missing edge weight", NULL);
    p = read_fails("2 1 1\n2 1.5\n1 1\n", SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":2:", "edge weight", "\"1.5\"", NULL);
    p = read_fails("2 1 10\n-1 2\n1 1\n", SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":2:", "weight 1 of vertex 1", "negative", NULL);
    p = read_fails("2 1 100\n\n1 1\n", SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":2:", "missing size of vertex 1", NULL);
    p = read_fails("2 1\n2 x\n1\n", SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":2:", "neighbour", "\"x\"", NULL);
}

static void test_metis_parse_on_memory(void **state) {
    (void)state;
    saga_reader *r = NULL;
    saga_graph *g = NULL;
    assert_int_equal(saga_reader_open_mem(&r, "mem.graph", MANUAL_PLAIN, sizeof MANUAL_PLAIN - 1),
                     SAGA_OK);
    assert_int_equal(saga_metis_parse(&g, r, NULL), SAGA_OK);
    assert_int_equal(saga_graph_n_edges(g), 22);
    saga_graph_free(&g);
    /* cut inside vertex 5's line */
    assert_int_equal(saga_reader_open_mem(&r, "cut.graph", MANUAL_PLAIN, 37), SAGA_OK);
    assert_int_equal(saga_metis_parse(&g, r, NULL), SAGA_ERR_PARSE);
    saga_test_assert_error_contains("cut.graph", "found 5 vertex lines", NULL);
}

static void test_metis_failing_allocations(void **state) {
    (void)state;
    saga_status st;
    saga_graph *g = NULL;
    const char *plain = saga_test_write_str("oom.graph", MANUAL_EW);
    IO_OOM_LOOP(st = saga_metis_read(&g, plain, NULL), saga_graph_free(&g));
    const char *gz = saga_test_write_gz("oom.graph.gz", MANUAL_PLAIN, sizeof MANUAL_PLAIN - 1);
    IO_OOM_LOOP(st = saga_metis_read(&g, gz, NULL), saga_graph_free(&g));
    saga_load_opts o = saga_load_opts_defaults();
    o.graph.duplicates = SAGA_DUPLICATES_DROP;
    IO_OOM_LOOP(st = saga_metis_read(&g, plain, &o), saga_graph_free(&g));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metis_manual_graph),
        cmocka_unit_test(test_metis_edge_weights),
        cmocka_unit_test(test_metis_vertex_columns_comments_isolated),
        cmocka_unit_test(test_metis_gzip),
        cmocka_unit_test(test_metis_header_errors),
        cmocka_unit_test(test_metis_body_errors),
        cmocka_unit_test(test_metis_parse_on_memory),
        cmocka_unit_test(test_metis_failing_allocations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
