/* test_mtx.c - Matrix Market coordinate files: fields, symmetry, gzip, and every error. */
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

static saga_graph *read_ok(const char *text, const saga_load_opts *opts) {
    const char *path = saga_test_write_str("g.mtx", text);
    saga_graph *g = NULL;
    saga_status st = saga_mtx_read(&g, path, opts);
    if (st != SAGA_OK)
        fail_msg("%s: %s", saga_status_name(st), saga_last_error());
    return g;
}

/* Reads text expecting status want; returns the file name for message checks. */
static const char *read_fails(const char *text, saga_status want, const saga_load_opts *opts) {
    const char *path = saga_test_write_str("bad.mtx", text);
    saga_graph *g = NULL;
    saga_status st = saga_mtx_read(&g, path, opts);
    if (st != want)
        fail_msg("expected %s, got %s: %s", saga_status_name(want), saga_status_name(st),
                 saga_last_error());
    assert_null(g);
    return path;
}

static void assert_row(saga_csr c, int32_t v, const int32_t *want, int n) {
    assert_int_equal(c.offsets[v + 1] - c.offsets[v], n);
    for (int k = 0; k < n; k++)
        assert_int_equal(c.indices[c.offsets[v] + k], want[k]);
}

static void test_mtx_general_real(void **state) {
    (void)state;
    saga_graph *g = read_ok("%%MatrixMarket matrix coordinate real general\n"
                            "% a comment\n"
                            "%\n"
                            "4 4 3\n"
                            "1 2 0.5\n"
                            "2 3 1.5\n"
                            "\n"
                            "4 1 -2e0\n",
                            NULL);
    assert_int_equal(saga_graph_n_vertices(g), 4);
    assert_int_equal(saga_graph_n_edges(g), 3);
    assert_true(saga_graph_has_weights(g));
    assert_null(saga_graph_orig_ids(g));
    saga_csr out = saga_graph_out(g);
    /* entry (i, j) is the edge i -> j */
    assert_row(out, 0, (int32_t[]){1}, 1);
    assert_row(out, 1, (int32_t[]){2}, 1);
    assert_row(out, 2, NULL, 0);
    assert_row(out, 3, (int32_t[]){0}, 1);
    assert_true(out.weights[out.offsets[0]] == 0.5f);
    assert_true(out.weights[out.offsets[1]] == 1.5f);
    assert_true(out.weights[out.offsets[3]] == -2.0f);
    saga_csr in = saga_graph_in(g);
    assert_row(in, 0, (int32_t[]){3}, 1);
    assert_true(in.weights[in.offsets[0]] == -2.0f);
    saga_graph_free(&g);
    assert_null(g);
}

static void test_mtx_pattern_symmetric(void **state) {
    (void)state;
    /* the diagonal entry is added once, the others in both directions */
    saga_graph *g = read_ok("%%MatrixMarket matrix coordinate pattern symmetric\n"
                            "3 3 3\n"
                            "1 1\n"
                            "2 1\n"
                            "3 2\n",
                            NULL);
    assert_int_equal(saga_graph_n_vertices(g), 3);
    assert_int_equal(saga_graph_n_edges(g), 5);
    assert_false(saga_graph_has_weights(g));
    saga_csr out = saga_graph_out(g);
    assert_null(out.weights);
    assert_row(out, 0, (int32_t[]){0, 1}, 2);
    assert_row(out, 1, (int32_t[]){0, 2}, 2);
    assert_row(out, 2, (int32_t[]){1}, 1);
    saga_graph_free(&g);
}

static void test_mtx_symmetric_upper_and_weights(void **state) {
    (void)state;
    /* an entry above the diagonal is mirrored like one below it; weights follow both arcs */
    saga_graph *g = read_ok("%%MatrixMarket matrix coordinate real symmetric\n"
                            "3 3 2\n"
                            "1 3 2.5\n"
                            "2 2 -1\n",
                            NULL);
    assert_int_equal(saga_graph_n_edges(g), 3);
    saga_csr out = saga_graph_out(g);
    assert_row(out, 0, (int32_t[]){2}, 1);
    assert_row(out, 1, (int32_t[]){1}, 1);
    assert_row(out, 2, (int32_t[]){0}, 1);
    assert_true(out.weights[out.offsets[0]] == 2.5f);
    assert_true(out.weights[out.offsets[1]] == -1.0f);
    assert_true(out.weights[out.offsets[2]] == 2.5f);
    saga_graph_free(&g);
}

static void test_mtx_integer_case_insensitive_isolated(void **state) {
    (void)state;
    saga_graph *g = read_ok("%%matrixmarket MATRIX Coordinate Integer GENERAL\r\n"
                            "6 6 2\r\n"
                            "  1   6   -7  \r\n"
                            "6\t1\t3\r\n",
                            NULL);
    /* vertices 2..5 have no edges but exist */
    assert_int_equal(saga_graph_n_vertices(g), 6);
    assert_int_equal(saga_graph_n_edges(g), 2);
    saga_csr out = saga_graph_out(g);
    assert_row(out, 0, (int32_t[]){5}, 1);
    assert_row(out, 5, (int32_t[]){0}, 1);
    assert_true(out.weights[out.offsets[0]] == -7.0f);
    assert_true(out.weights[out.offsets[5]] == 3.0f);
    saga_graph_free(&g);
}

static void test_mtx_weight_options(void **state) {
    (void)state;
    const char *real = "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 2 4.25\n";
    saga_load_opts o = saga_load_opts_defaults();
    o.weights = SAGA_WEIGHTS_IGNORE;
    saga_graph *g = read_ok(real, &o);
    assert_false(saga_graph_has_weights(g));
    assert_int_equal(saga_graph_n_edges(g), 1);
    saga_graph_free(&g);
    /* ignored weights are still checked */
    const char *path = read_fails("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 2 x\n",
                                  SAGA_ERR_PARSE, &o);
    saga_test_assert_error_contains(path, ":3:", "\"x\"", NULL);

    o.weights = SAGA_WEIGHTS_REQUIRE;
    g = read_ok(real, &o);
    assert_true(saga_graph_has_weights(g));
    saga_graph_free(&g);
    path = read_fails("%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 2\n",
                      SAGA_ERR_PARSE, &o);
    saga_test_assert_error_contains(path, "required", "pattern", NULL);

    /* graph options pass through: undirected adds reverse arcs */
    o = saga_load_opts_defaults();
    o.graph.undirected = true;
    g = read_ok("%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 2\n2 3\n", &o);
    assert_int_equal(saga_graph_n_edges(g), 4);
    saga_graph_free(&g);
}

static void test_mtx_gzip_and_larger(void **state) {
    (void)state;
    /* a directed ring of 5000 vertices, gzip-compressed */
    enum { N = 5000 };
    size_t cap = 64 + (size_t)N * 24;
    char *text = malloc(cap);
    assert_non_null(text);
    size_t len = (size_t)snprintf(
        text, cap, "%%%%MatrixMarket matrix coordinate integer general\n%d %d %d\n", N, N, N);
    for (int i = 0; i < N; i++)
        len += (size_t)snprintf(text + len, cap - len, "%d %d %d\n", i + 1, (i + 1) % N + 1, i);
    const char *path = saga_test_write_gz("ring.mtx.gz", text, len);
    free(text);
    saga_graph *g = NULL;
    assert_int_equal(saga_mtx_read(&g, path, NULL), SAGA_OK);
    assert_int_equal(saga_graph_n_vertices(g), N);
    assert_int_equal(saga_graph_n_edges(g), N);
    saga_csr in = saga_graph_in(g);
    for (int v = 0; v < N; v++) {
        int32_t src = (v + N - 1) % N;
        assert_int_equal(in.offsets[v + 1] - in.offsets[v], 1);
        assert_int_equal(in.indices[in.offsets[v]], src);
        assert_true(in.weights[in.offsets[v]] == (float)src);
    }
    saga_graph_free(&g);
}

static void test_mtx_unsupported_kinds(void **state) {
    (void)state;
    const char *p;
    p = read_fails("%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n",
                   SAGA_ERR_UNSUPPORTED, NULL);
    saga_test_assert_error_contains(p, ":1:", "unsupported", "\"array\"", NULL);
    p = read_fails("%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 1 1 0\n",
                   SAGA_ERR_UNSUPPORTED, NULL);
    saga_test_assert_error_contains(p, ":1:", "unsupported", "\"complex\"", NULL);
    p = read_fails("%%MatrixMarket matrix coordinate real hermitian\n2 2 1\n1 1 1\n",
                   SAGA_ERR_UNSUPPORTED, NULL);
    saga_test_assert_error_contains(p, ":1:", "unsupported", "\"hermitian\"", NULL);
    p = read_fails("%%MatrixMarket matrix coordinate real Skew-Symmetric\n2 2 1\n2 1 1\n",
                   SAGA_ERR_UNSUPPORTED, NULL);
    saga_test_assert_error_contains(p, ":1:", "unsupported", "\"Skew-Symmetric\"", NULL);
    p = read_fails("%%MatrixMarket vector coordinate real general\n2 1\n1 1\n",
                   SAGA_ERR_UNSUPPORTED, NULL);
    saga_test_assert_error_contains(p, ":1:", "\"vector\"", NULL);
    p = read_fails("%%MatrixMarket matrix coordinate pattern general\n3 4 1\n1 1\n",
                   SAGA_ERR_UNSUPPORTED, NULL);
    saga_test_assert_error_contains(p, ":2:", "square", "3 x 4", NULL);
    p = read_fails("%%MatrixMarket matrix coordinate pattern general\n3000000000 3000000000 0\n",
                   SAGA_ERR_UNSUPPORTED, NULL);
    saga_test_assert_error_contains(p, ":2:", "3000000000 vertices", "2147483647", NULL);
}

static void test_mtx_malformed(void **state) {
    (void)state;
    const char *p;
    p = read_fails("", SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, "empty file", "%%MatrixMarket", NULL);
    p = read_fails("1 2\n2 3\n", SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":1:", "banner", "found \"1\"", NULL);
    p = read_fails("%%MatrixMarket matrix coordinate\n", SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":1:", "3 words", NULL);
    p = read_fails("%%MatrixMarket matrix coordinate real general extra\n", SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":1:", "\"extra\"", NULL);
    p = read_fails("%%MatrixMarket matrix coordinate quaternion general\n", SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":1:", "\"quaternion\"", NULL);
    p = read_fails("%%MatrixMarket matrix coordinate real general\n% only comments\n",
                   SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":2:", "size line", NULL);
    p = read_fails("%%MatrixMarket matrix coordinate real general\n3 3\n", SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":2:", "missing entry count", NULL);
    p = read_fails("%%MatrixMarket matrix coordinate real general\n3 3 -1\n", SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":2:", "entry count", "negative", NULL);
    p = read_fails("%%MatrixMarket matrix coordinate real general\n3 3 1 9\n", SAGA_ERR_PARSE,
                   NULL);
    saga_test_assert_error_contains(p, ":2:", "extra \"9\"", NULL);
}

static void test_mtx_bad_entries(void **state) {
    (void)state;
    const char *hdr = "%%MatrixMarket matrix coordinate real general\n3 3 2\n";
    char text[256];
    const char *p;
    snprintf(text, sizeof text, "%s1 2 1\n4 1 1\n", hdr);
    p = read_fails(text, SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":4:", "row index 4", "outside 1..3", NULL);
    snprintf(text, sizeof text, "%s1 0 1\n2 1 1\n", hdr);
    p = read_fails(text, SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":3:", "column index 0", "outside 1..3", NULL);
    snprintf(text, sizeof text, "%s1 2 nan\n2 1 1\n", hdr);
    p = read_fails(text, SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":3:", "\"nan\"", "not finite", NULL);
    snprintf(text, sizeof text, "%s1 2 1e39\n2 1 1\n", hdr);
    p = read_fails(text, SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":3:", "1e39", "32-bit float", NULL);
    snprintf(text, sizeof text, "%s1 2\n2 1 1\n", hdr);
    p = read_fails(text, SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":3:", "no value", NULL);
    snprintf(text, sizeof text, "%s1 2 1 5\n2 1 1\n", hdr);
    p = read_fails(text, SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":3:", "extra \"5\"", NULL);
    snprintf(text, sizeof text, "%s1 b 1\n", hdr);
    p = read_fails(text, SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":3:", "column index", "\"b\"", NULL);
    p = read_fails("%%MatrixMarket matrix coordinate pattern general\n3 3 1\n1 2 1\n",
                   SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":3:", "pattern", "extra \"1\"", NULL);
    p = read_fails("%%MatrixMarket matrix coordinate integer general\n3 3 1\n1 2 1.5\n",
                   SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":3:", "integer", "\"1.5\"", NULL);
}

static void test_mtx_entry_count_mismatch(void **state) {
    (void)state;
    const char *p;
    p = read_fails("%%MatrixMarket matrix coordinate pattern general\n%\n3 3 3\n1 2\n2 3\n",
                   SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, "found 2 entries", "line 3 declares 3", NULL);
    p = read_fails("%%MatrixMarket matrix coordinate pattern general\n3 3 1\n1 2\n2 3\n",
                   SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":4:", "more entries than the 1 declared on line 2", NULL);
    /* a huge declared count is not trusted for an allocation */
    p = read_fails("%%MatrixMarket matrix coordinate pattern general\n3 3 4000000000000\n1 2\n",
                   SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, "found 1 entries", "4000000000000", NULL);
}

static void test_mtx_parse_on_memory(void **state) {
    (void)state;
    static const char text[] = "%%MatrixMarket matrix coordinate pattern general\n2 2 1\n2 1\n";
    saga_reader *r = NULL;
    assert_int_equal(saga_reader_open_mem(&r, "mem.mtx", text, sizeof text - 1), SAGA_OK);
    saga_graph *g = NULL;
    assert_int_equal(saga_mtx_parse(&g, r, NULL), SAGA_OK);
    assert_int_equal(saga_graph_n_edges(g), 1);
    assert_int_equal(saga_graph_out(g).indices[0], 0);
    saga_graph_free(&g);
    assert_int_equal(saga_reader_open_mem(&r, "mem.mtx", text, 20), SAGA_OK);
    assert_int_equal(saga_mtx_parse(&g, r, NULL), SAGA_ERR_PARSE);
    saga_test_assert_error_contains("mem.mtx:1:", NULL);
}

static void test_mtx_missing_file(void **state) {
    (void)state;
    saga_graph *g = NULL;
    const char *path = saga_test_tmp("absent.mtx");
    assert_int_equal(saga_mtx_read(&g, path, NULL), SAGA_ERR_IO);
    saga_test_assert_error_contains(path, NULL);
    assert_null(g);
}

static void test_mtx_failing_allocations(void **state) {
    (void)state;
    saga_status st;
    saga_graph *g = NULL;
    const char *plain =
        saga_test_write_str("oom.mtx", "%%MatrixMarket matrix coordinate real symmetric\n"
                                       "4 4 4\n1 1 1\n2 1 2\n3 2 3\n4 3 4\n");
    IO_OOM_LOOP(st = saga_mtx_read(&g, plain, NULL), saga_graph_free(&g));
    static const char text[] = "%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 2\n3 "
                               "1\n";
    const char *gz = saga_test_write_gz("oom.mtx.gz", text, sizeof text - 1);
    IO_OOM_LOOP(st = saga_mtx_read(&g, gz, NULL), saga_graph_free(&g));
    /* error paths under failing allocations too */
    const char *bad =
        saga_test_write_str("oom-bad.mtx", "%%MatrixMarket matrix coordinate pattern general\n"
                                           "3 3 2\n1 2\n");
    for (long n = 1; n < 50; n++) {
        io_alloc_start(n);
        st = saga_mtx_read(&g, bad, NULL);
        long live = io_alloc_stop();
        assert_true(st == SAGA_ERR_OUT_OF_MEMORY || st == SAGA_ERR_PARSE);
        assert_int_equal(live, 0);
        assert_null(g);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mtx_general_real),
        cmocka_unit_test(test_mtx_pattern_symmetric),
        cmocka_unit_test(test_mtx_symmetric_upper_and_weights),
        cmocka_unit_test(test_mtx_integer_case_insensitive_isolated),
        cmocka_unit_test(test_mtx_weight_options),
        cmocka_unit_test(test_mtx_gzip_and_larger),
        cmocka_unit_test(test_mtx_unsupported_kinds),
        cmocka_unit_test(test_mtx_malformed),
        cmocka_unit_test(test_mtx_bad_entries),
        cmocka_unit_test(test_mtx_entry_count_mismatch),
        cmocka_unit_test(test_mtx_parse_on_memory),
        cmocka_unit_test(test_mtx_missing_file),
        cmocka_unit_test(test_mtx_failing_allocations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
