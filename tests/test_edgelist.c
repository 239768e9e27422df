/* test_edgelist.c - edge-list parsing: accepted variants, every rejected input with its message,
 * gzip, real datasets, failing allocations; and format detection / dispatch. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"

#include "parsers.h"
#include "saga_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static saga_graph *load_str(const char *text, const saga_load_opts *o) {
    const char *path = saga_test_write_str("g.txt", text);
    saga_graph *g = NULL;
    saga_status st = saga_edgelist_read(&g, path, o);
    if (st != SAGA_OK)
        fail_msg("loading \"%s\": %s: %s", text, saga_status_name(st), saga_last_error());
    return g;
}

/* Loads text from a file named name and expects status st with every needle in the message
 * (the file's path is checked too). */
static void expect_error(const char *name, const char *text, size_t len, const saga_load_opts *o,
                         saga_status want, const char *needle1, const char *needle2) {
    const char *path = saga_test_write(name, text, len);
    saga_graph *g = NULL;
    saga_status st = saga_edgelist_read(&g, path, o);
    if (st != want)
        fail_msg("%s: got %s (%s), expected %s", name, saga_status_name(st), saga_last_error(),
                 saga_status_name(want));
    assert_null(g);
    saga_test_assert_error_contains(path, needle1, needle2, NULL);
}

static void expect_error_str(const char *text, saga_status want, const char *needle1,
                             const char *needle2) {
    expect_error("bad.txt", text, strlen(text), NULL, want, needle1, needle2);
}

static void expect_in_row(const saga_graph *g, int32_t v, const int32_t *want, int64_t n) {
    saga_csr c = saga_graph_in(g);
    assert_int_equal(c.offsets[v + 1] - c.offsets[v], n);
    for (int64_t k = 0; k < n; k++)
        assert_int_equal(c.indices[c.offsets[v] + k], want[k]);
}

/* ---- accepted input ----------------------------------------------------------------------- */

static void test_edgelist_comments_blanks_tabs_crlf(void **state) {
    (void)state;
    saga_graph *g = load_str("# SNAP header\n% another comment\n\n   \n  # indented comment\n"
                             "1 2\n2\t3\r\n  3 \t 1  \r\n\t\n\r\n30 1",
                             NULL);
    assert_int_equal(saga_graph_n_vertices(g), 4);
    assert_int_equal(saga_graph_n_edges(g), 4);
    assert_false(saga_graph_has_weights(g));
    const int64_t *orig = saga_graph_orig_ids(g);
    assert_non_null(orig);
    assert_int_equal(orig[0], 1);
    assert_int_equal(orig[1], 2);
    assert_int_equal(orig[2], 3);
    assert_int_equal(orig[3], 30);
    /* 1->2 2->3 3->1 30->1 as 0->1 1->2 2->0 3->0 */
    expect_in_row(g, 0, (const int32_t[]){2, 3}, 2);
    expect_in_row(g, 1, (const int32_t[]){0}, 1);
    expect_in_row(g, 2, (const int32_t[]){1}, 1);
    saga_graph_free(&g);
}

static void test_edgelist_dense_ids_have_no_map(void **state) {
    (void)state;
    saga_graph *g = load_str("0 1\n1 2\n2 0\n4 3\n", NULL);
    assert_int_equal(saga_graph_n_vertices(g), 5);
    assert_null(saga_graph_orig_ids(g));
    saga_graph_free(&g);
    /* leading zeros and a plus sign take the careful path and mean the same */
    g = load_str("000 +1\n0000000000000000000000001 2\n", NULL);
    assert_int_equal(saga_graph_n_vertices(g), 3);
    assert_null(saga_graph_orig_ids(g));
    expect_in_row(g, 2, (const int32_t[]){1}, 1);
    saga_graph_free(&g);
}

static void test_edgelist_huge_and_sparse_ids(void **state) {
    (void)state;
    saga_graph *g = load_str("9223372036854775807 1000000000000\n5 9223372036854775807\n"
                             "1000000000000 5\n4294967295 4294967296\n",
                             NULL);
    assert_int_equal(saga_graph_n_vertices(g), 5);
    const int64_t *orig = saga_graph_orig_ids(g);
    const int64_t want[] = {5, 4294967295LL, 4294967296LL, 1000000000000LL, INT64_MAX};
    assert_memory_equal(orig, want, sizeof want);
    int32_t v;
    assert_int_equal(saga_graph_find_vertex(g, INT64_MAX, &v), SAGA_OK);
    assert_int_equal(v, 4);
    expect_in_row(g, 3, (const int32_t[]){4}, 1); /* 2^63-1 -> 10^12 */
    expect_in_row(g, 0, (const int32_t[]){3}, 1); /* 10^12 -> 5 */
    saga_graph_free(&g);

    /* below 2^32 but far too sparse for a bitmap */
    g = load_str("4000000000 7\n7 3999999999\n", NULL);
    assert_int_equal(saga_graph_n_vertices(g), 3);
    orig = saga_graph_orig_ids(g);
    assert_int_equal(orig[0], 7);
    assert_int_equal(orig[1], 3999999999LL);
    assert_int_equal(orig[2], 4000000000LL);
    expect_in_row(g, 0, (const int32_t[]){2}, 1);
    saga_graph_free(&g);
}

static void test_edgelist_switch_to_map_midway(void **state) {
    (void)state;
    /* many small ids (over several chunks), then one beyond 2^32 */
    size_t cap = 16u << 20, o = 0;
    char *text = malloc(cap);
    int64_t lines = 0;
    while (o < (9u << 20)) {
        o += (size_t)sprintf(text + o, "%lld\t%lld\n", (long long)(lines * 7 % 500000),
                             (long long)((lines * 13 + 1) % 500000));
        lines++;
    }
    o += (size_t)sprintf(text + o, "99999999999 0\n");
    const char *path = saga_test_write("switch.txt", text, o);
    saga_graph *g = NULL;
    assert_int_equal(saga_edgelist_read(&g, path, NULL), SAGA_OK);
    assert_int_equal(saga_graph_n_edges(g), lines + 1);
    assert_int_equal(saga_graph_n_vertices(g), 500001);
    assert_non_null(saga_graph_orig_ids(g));
    assert_int_equal(saga_graph_orig_id(g, 500000), 99999999999LL);
    assert_int_equal(saga_graph_orig_id(g, 1234), 1234);
    /* line k: k*7 % 500000 -> (k*13+1) % 500000; check vertex 7's out-row holds 14 */
    saga_csr out = saga_graph_out(g);
    bool found = false;
    for (int64_t k = out.offsets[7]; k < out.offsets[8]; k++)
        found |= out.indices[k] == 14;
    assert_true(found);
    saga_csr in = saga_graph_in(g);
    int64_t into0 = 1; /* the last line */
    for (int64_t k = 0; k < lines; k++)
        into0 += (k * 13 + 1) % 500000 == 0;
    assert_int_equal(in.offsets[1] - in.offsets[0], into0);
    saga_graph_free(&g);
    free(text);
}

static void test_edgelist_weights(void **state) {
    (void)state;
    saga_graph *g = load_str("# w\n0 1 0.5\n1 2\t2.5e1\r\n2 0 -3\n", NULL);
    assert_true(saga_graph_has_weights(g));
    saga_csr out = saga_graph_out(g);
    assert_true(out.weights[0] == 0.5f);
    assert_true(out.weights[1] == 25.0f);
    assert_true(out.weights[2] == -3.0f);
    saga_graph_free(&g);

    saga_load_opts o = saga_load_opts_defaults();
    o.weights = SAGA_WEIGHTS_IGNORE;
    g = load_str("0 1 0.5\n1 2 2.5\n", &o);
    assert_false(saga_graph_has_weights(g));
    assert_int_equal(saga_graph_n_edges(g), 2);
    saga_graph_free(&g);
    /* ignored weights are still checked */
    expect_error("ign.txt", "0 1 0.5\n1 2 nan\n", 16, &o, SAGA_ERR_PARSE, ":2: ", "non-finite");

    o.weights = SAGA_WEIGHTS_REQUIRE;
    g = load_str("0 1 1\n", &o);
    assert_true(saga_graph_has_weights(g));
    saga_graph_free(&g);
    expect_error("req.txt", "# c\n0 1\n", 8, &o, SAGA_ERR_PARSE,
                 ":2: expected 3 columns (src dst weight) since weights are required", "found 2");
}

static void test_edgelist_graph_options(void **state) {
    (void)state;
    const char *text = "0 1 1\n1 0 2\n1 1 4\n0 1 8\n2 1 16\n";
    saga_load_opts o = saga_load_opts_defaults();
    saga_graph *g = load_str(text, &o); /* directed: everything kept */
    assert_int_equal(saga_graph_n_edges(g), 5);
    saga_graph_free(&g);

    o.graph.undirected = true; /* duplicates dropped by default */
    g = load_str(text, &o);
    /* arcs 0-1, 1-0, 1-1, 1-2, 2-1 */
    assert_int_equal(saga_graph_n_edges(g), 5);
    expect_in_row(g, 1, (const int32_t[]){0, 1, 2}, 3);
    saga_csr in = saga_graph_in(g);
    assert_true(in.weights[in.offsets[1]] == 1.0f); /* smallest of 1, 2, 8 */
    saga_graph_free(&g);

    o.graph.self_loops = SAGA_SELF_LOOPS_DROP;
    o.graph.duplicates = SAGA_DUPLICATES_SUM;
    g = load_str(text, &o);
    assert_int_equal(saga_graph_n_edges(g), 4);
    in = saga_graph_in(g);
    expect_in_row(g, 1, (const int32_t[]){0, 2}, 2);
    assert_true(in.weights[in.offsets[1]] == 11.0f);
    saga_graph_free(&g);

    o.graph.duplicates = SAGA_DUPLICATES_KEEP;
    g = load_str(text, &o);
    assert_int_equal(saga_graph_n_edges(g), 8);
    saga_graph_free(&g);

    o = saga_load_opts_defaults();
    o.graph.duplicates = SAGA_DUPLICATES_DROP;
    g = load_str(text, &o);
    assert_int_equal(saga_graph_n_edges(g), 4);
    saga_graph_free(&g);
}

/* ---- rejected input -------------------------------------------------------------------------- */

static void test_edgelist_column_errors(void **state) {
    (void)state;
    expect_error_str("5\n", SAGA_ERR_PARSE, ":1: expected 2 or 3 columns (src dst [weight])",
                     "found 1");
    expect_error_str("# h\n0 1\n\n5\n", SAGA_ERR_PARSE,
                     ":4: expected 2 columns (src dst) like line 2, found 1", NULL);
    expect_error_str("0 1 2 3\n", SAGA_ERR_PARSE, ":1: expected 2 or 3 columns", "found 4");
    expect_error_str("0 1\n1 2\n2 3 4 5 6\n", SAGA_ERR_PARSE,
                     ":3: expected 2 columns (src dst) like line 1, found 5", NULL);
    expect_error_str("% c\n# c\n\n\n0 1 0.5\n1 2\n", SAGA_ERR_PARSE,
                     ":6: expected 3 columns (src dst weight) like line 5, found 2", NULL);
    expect_error_str("0 1 0.5\n1 2 3 4\n", SAGA_ERR_PARSE,
                     ":2: expected 3 columns (src dst weight) like line 1, found 4", NULL);
    expect_error_str("0 1\n1 2 0.5\n", SAGA_ERR_PARSE, ":2: expected 2 columns", "found 3");
}

static void test_edgelist_token_errors(void **state) {
    (void)state;
    expect_error_str("0 1\n1 x1\n", SAGA_ERR_PARSE, ":2: expected a vertex id",
                     "column 2, found not a number \"x1\"");
    expect_error_str("-3 1\n", SAGA_ERR_PARSE, ":1: expected a vertex id",
                     "found a negative number \"-3\"");
    expect_error_str("0 1\n9223372036854775808 1\n", SAGA_ERR_PARSE, ":2: expected a vertex id",
                     "a number out of range \"9223372036854775808\"");
    expect_error_str("1.5 2\n", SAGA_ERR_PARSE, ":1: ", "not a number \"1.5\"");
    expect_error_str("0 1 1\n1 2 inf\n", SAGA_ERR_PARSE, ":2: expected a finite number as weight",
                     "non-finite number \"inf\"");
    expect_error_str("0 1 nan\n", SAGA_ERR_PARSE, ":1: expected a finite number as weight",
                     "\"nan\"");
    expect_error_str("0 1 1\n1 2 abc\n", SAGA_ERR_PARSE, ":2: ", "not a number \"abc\"");
    expect_error_str("0 1 1e39\n", SAGA_ERR_PARSE, ":1: expected a weight within single precision",
                     "\"1e39\"");
    expect_error_str("0 1\n2 3x\n", SAGA_ERR_PARSE, ":2: ", "\"3x\"");
}

static void test_edgelist_nul_empty_binary(void **state) {
    (void)state;
    expect_error("nul.txt", "0 1\n1\0 2\n", 8, NULL, SAGA_ERR_PARSE, ":2: NUL byte (binary data?)",
                 NULL);
    expect_error("nul2.txt", "# he\0ader\n0 1\n", 14, NULL, SAGA_ERR_PARSE, ":1: NUL byte", NULL);
    expect_error("nul3.txt", "0 1\n2 3\0", 8, NULL, SAGA_ERR_PARSE, ":2: NUL byte", NULL);
    expect_error_str("", SAGA_ERR_PARSE, ": no edges found", NULL);
    expect_error_str("# only\n% comments\n\n \n", SAGA_ERR_PARSE, ": no edges found", NULL);

    /* random binary data: an error naming the file, never a graph */
    for (uint32_t seed = 1; seed <= 20; seed++) {
        size_t len = 1000 + seed * 997;
        unsigned char *b = malloc(len);
        uint32_t x = seed;
        for (size_t i = 0; i < len; i++) {
            x = x * 1664525u + 1013904223u;
            b[i] = (unsigned char)(x >> 24);
        }
        b[0] = (unsigned char)('a' + seed); /* not the gzip magic */
        const char *path = saga_test_write("random.bin", b, len);
        saga_graph *g = NULL;
        saga_status st = saga_edgelist_read(&g, path, NULL);
        assert_true(st == SAGA_ERR_PARSE);
        assert_null(g);
        saga_test_assert_error_contains(path, NULL);
        free(b);
    }
}

static void test_edgelist_gzip_errors(void **state) {
    (void)state;
    size_t cap = 4u << 20, o = 0;
    char *text = malloc(cap + 64);
    for (int i = 0; o < cap; i++)
        o += (size_t)sprintf(text + o, "%d %d\n", i, i + 1);
    const char *gz = saga_test_write_gz("t.txt.gz", text, o);
    FILE *f = fopen(gz, "rb");
    unsigned char *z = malloc(o);
    size_t zlen = fread(z, 1, o, f);
    fclose(f);
    expect_error("cut.txt.gz", (const char *)z, zlen - 9, NULL, SAGA_ERR_CORRUPT,
                 ": truncated gzip stream", NULL);
    for (size_t k = zlen / 3; k < zlen / 3 + 32; k++)
        z[k] ^= 0xa5;
    expect_error("bad.txt.gz", (const char *)z, zlen, NULL, SAGA_ERR_CORRUPT,
                 ": corrupt gzip data (zlib: ", NULL);
    free(z);
    free(text);
}

static void test_edgelist_missing_file(void **state) {
    (void)state;
    saga_graph *g = NULL;
    const char *path = saga_test_tmp("nope.txt");
    assert_int_equal(saga_edgelist_read(&g, path, NULL), SAGA_ERR_IO);
    saga_test_assert_error_contains(path, "No such file", NULL);
    assert_int_equal(saga_graph_load(&g, path, NULL), SAGA_ERR_IO);
    saga_test_assert_error_contains(path, "No such file", NULL);
}

/* ---- gzip and chunk boundaries -----------------------------------------------------------------
 */

static void assert_same_graph(const saga_graph *a, const saga_graph *b) {
    assert_int_equal(saga_graph_n_vertices(a), saga_graph_n_vertices(b));
    assert_int_equal(saga_graph_n_edges(a), saga_graph_n_edges(b));
    int32_t n = saga_graph_n_vertices(a);
    int64_t m = saga_graph_n_edges(a);
    saga_csr x = saga_graph_in(a), y = saga_graph_in(b);
    assert_memory_equal(x.offsets, y.offsets, ((size_t)n + 1) * sizeof(int64_t));
    assert_memory_equal(x.indices, y.indices, (size_t)m * sizeof(int32_t));
    assert_int_equal(x.weights != NULL, y.weights != NULL);
    if (x.weights)
        assert_memory_equal(x.weights, y.weights, (size_t)m * sizeof(float));
    assert_int_equal(saga_graph_orig_ids(a) != NULL, saga_graph_orig_ids(b) != NULL);
    if (saga_graph_orig_ids(a))
        assert_memory_equal(saga_graph_orig_ids(a), saga_graph_orig_ids(b),
                            (size_t)n * sizeof(int64_t));
}

static uint64_t rng(uint64_t *s) {
    *s += 0x9e3779b97f4a7c15ULL;
    uint64_t z = *s;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void test_edgelist_gzip_equals_plain_and_reference(void **state) {
    (void)state;
    /* ~10 MiB of varied formatting so that lines straddle chunk boundaries */
    const int64_t m = 700000;
    size_t cap = 40u << 20, o = 0;
    char *text = malloc(cap);
    int32_t *src = malloc((size_t)m * sizeof *src), *dst = malloc((size_t)m * sizeof *dst);
    float *w = malloc((size_t)m * sizeof *w);
    uint64_t seed = 5;
    o += (size_t)sprintf(text + o, "# Directed graph\n# Nodes: ? Edges: ?\n");
    for (int64_t k = 0; k < m; k++) {
        uint64_t r = rng(&seed);
        /* ids: multiples of 3 below 600000 (sparse, bitmap renumbering) */
        int64_t a = (int64_t)(r % 200000) * 3, b = (int64_t)((r >> 32) % 200000) * 3;
        float wt = (float)((r >> 20) % 64) * 0.25f;
        src[k] = (int32_t)(a / 3);
        dst[k] = (int32_t)(b / 3);
        w[k] = wt;
        const char *sep = (r >> 8) & 1 ? "\t" : "  ";
        const char *eol = (r >> 9) & 1 ? "\r\n" : "\n";
        o += (size_t)sprintf(text + o, "%lld%s%lld %g%s", (long long)a, sep, (long long)b,
                             (double)wt, eol);
        if ((r >> 10) % 1000 == 0)
            o += (size_t)sprintf(text + o, "# a comment in the middle\n\n");
    }
    const char *plain = saga_test_write("eq.txt", text, o);
    const char *gz = saga_test_write_gz("eq.txt.gz", text, o);
    saga_graph *a = NULL, *b = NULL, *ref = NULL;
    assert_int_equal(saga_edgelist_read(&a, plain, NULL), SAGA_OK);
    assert_int_equal(saga_edgelist_read(&b, gz, NULL), SAGA_OK);
    assert_same_graph(a, b);

    /* the reference: vertices are the distinct ids used, in increasing order */
    int32_t *rank = calloc(200000, sizeof *rank);
    for (int64_t k = 0; k < m; k++)
        rank[src[k]] = rank[dst[k]] = 1;
    int32_t n = 0;
    int64_t *orig = malloc(200000 * sizeof *orig);
    for (int32_t i = 0; i < 200000; i++)
        if (rank[i]) {
            orig[n] = (int64_t)i * 3;
            rank[i] = n++;
        }
    for (int64_t k = 0; k < m; k++) {
        src[k] = rank[src[k]];
        dst[k] = rank[dst[k]];
    }
    assert_int_equal(saga_graph_from_edges(&ref, n, m, src, dst, w, orig, NULL), SAGA_OK);
    /* weights of parallel edges may be ordered differently: compare topology and weight sums */
    assert_int_equal(saga_graph_n_vertices(a), n);
    assert_int_equal(saga_graph_n_edges(a), m);
    saga_csr x = saga_graph_in(a), y = saga_graph_in(ref);
    assert_memory_equal(x.offsets, y.offsets, ((size_t)n + 1) * sizeof(int64_t));
    assert_memory_equal(x.indices, y.indices, (size_t)m * sizeof(int32_t));
    double sx = 0, sy = 0;
    for (int64_t k = 0; k < m; k++) {
        sx += x.weights[k];
        sy += y.weights[k];
    }
    assert_true(sx == sy);
    assert_memory_equal(saga_graph_orig_ids(a), orig, (size_t)n * sizeof(int64_t));
    saga_graph_free(&a);
    saga_graph_free(&b);
    saga_graph_free(&ref);
    free(rank);
    free(orig);
    free(src);
    free(dst);
    free(w);
    free(text);
}

static void test_edgelist_from_memory(void **state) {
    (void)state;
    const char text[] = "10 20\n20 30\n";
    saga_reader *r = NULL;
    assert_int_equal(saga_reader_open_mem(&r, "mem.txt", text, sizeof text - 1), SAGA_OK);
    saga_graph *g = NULL;
    assert_int_equal(saga_edgelist_parse(&g, r, NULL), SAGA_OK);
    assert_int_equal(saga_graph_n_vertices(g), 3);
    assert_int_equal(saga_graph_orig_id(g, 2), 30);
    saga_graph_free(&g);
    const char bad[] = "10 20\n20\n";
    assert_int_equal(saga_reader_open_mem(&r, "mem.txt", bad, sizeof bad - 1), SAGA_OK);
    assert_int_equal(saga_edgelist_parse(&g, r, NULL), SAGA_ERR_PARSE);
    saga_test_assert_error_contains("mem.txt:2: expected 2 columns", NULL);
}

/* ---- real datasets ------------------------------------------------------------------------------
 */

static void test_edgelist_dataset_ca_grqc(void **state) {
    (void)state;
    const char *path = saga_test_data("ca-GrQc/ca-GrQc.txt.gz");
    saga_graph *g = NULL;
    assert_int_equal(saga_graph_load(&g, path, NULL), SAGA_OK);
    saga_graph_summary s;
    saga_graph_summarize(g, &s);
    assert_int_equal(s.n_vertices, 5242);
    assert_int_equal(s.n_edges, 28980);
    assert_int_equal(s.n_self_loops, 12);
    assert_int_equal(s.n_duplicates, 0);
    assert_int_equal(s.n_dangling, 0);
    assert_int_equal(saga_graph_orig_id(g, 0), 13);
    assert_int_equal(saga_graph_orig_id(g, 5241), 26196);
    saga_graph_free(&g);
    /* every collaboration is listed both ways: undirected with duplicates dropped is the same */
    saga_load_opts o = saga_load_opts_defaults();
    o.graph.undirected = true;
    assert_int_equal(saga_graph_load(&g, path, &o), SAGA_OK);
    assert_int_equal(saga_graph_n_edges(g), 28980);
    saga_graph_free(&g);
}

static void test_edgelist_dataset_email_eu_core(void **state) {
    (void)state;
    const char *path = saga_test_data("email-Eu-core/email-Eu-core.txt.gz");
    saga_graph *g = NULL;
    assert_int_equal(saga_graph_load(&g, path, NULL), SAGA_OK);
    saga_graph_summary s;
    saga_graph_summarize(g, &s);
    assert_int_equal(s.n_vertices, 1005);
    assert_int_equal(s.n_edges, 25571);
    assert_int_equal(s.n_self_loops, 642);
    assert_int_equal(s.n_dangling, 137);
    assert_null(saga_graph_orig_ids(g));
    saga_graph_free(&g);
    /* 16064 undirected pairs besides the 642 self-loops (as ca-GrQc's README spells out) */
    saga_load_opts o = saga_load_opts_defaults();
    o.graph.undirected = true;
    assert_int_equal(saga_graph_load(&g, path, &o), SAGA_OK);
    assert_int_equal(saga_graph_n_edges(g), 2 * 16064 + 642);
    saga_graph_free(&g);
}

static void test_edgelist_dataset_slashdot(void **state) {
    (void)state;
    const char *path = saga_test_data("soc-Slashdot0902/soc-Slashdot0902.txt.gz");
    saga_graph *g = NULL;
    assert_int_equal(saga_graph_load(&g, path, NULL), SAGA_OK);
    saga_graph_summary s;
    saga_graph_summarize(g, &s);
    assert_int_equal(s.n_vertices, 82168);
    assert_int_equal(s.n_edges, 948464);
    assert_int_equal(s.n_self_loops, 78303);
    assert_int_equal(s.n_duplicates, 0);
    assert_int_equal(s.n_dangling, 3727);
    assert_null(saga_graph_orig_ids(g));
    saga_graph_free(&g);
    saga_load_opts o = saga_load_opts_defaults();
    o.graph.undirected = true;
    assert_int_equal(saga_graph_load(&g, path, &o), SAGA_OK);
    /* 504230 undirected pairs besides the 78303 self-loops */
    assert_int_equal(saga_graph_n_edges(g), 2 * 504230 + 78303);
    saga_graph_free(&g);
}

static void test_edgelist_dataset_karate_and_cora(void **state) {
    (void)state;
    saga_load_opts o = saga_load_opts_defaults();
    o.graph.undirected = true;
    saga_graph *g = NULL;
    assert_int_equal(saga_graph_load(&g, saga_test_data("karate/edges.txt"), &o), SAGA_OK);
    assert_int_equal(saga_graph_n_vertices(g), 34);
    assert_int_equal(saga_graph_n_edges(g), 156);
    saga_graph_summary s;
    saga_graph_summarize(g, &s);
    assert_int_equal(s.n_self_loops, 0);
    assert_int_equal(s.in_degree_max, 17); /* vertex 33 */
    assert_int_equal(s.n_isolated, 0);
    saga_graph_free(&g);
    assert_int_equal(saga_graph_load(&g, saga_test_data("cora/edges.txt.gz"), &o), SAGA_OK);
    assert_int_equal(saga_graph_n_vertices(g), 2708);
    assert_int_equal(saga_graph_n_edges(g), 10556);
    saga_graph_summarize(g, &s);
    assert_int_equal(s.n_isolated, 0);
    assert_int_equal(s.n_duplicates, 0);
    saga_graph_free(&g);
}

/* ---- failing allocations
 * -------------------------------------------------------------------------- */

static void test_edgelist_failing_allocations(void **state) {
    (void)state;
    const char *text = "# t\n5 7 1\n7 9 2\n9 5 3\n5 5 4\n";
    const char *huge = "# t\n5 99999999999 1\n99999999999 9 2\n9 5 3\n";
    const char *paths[] = {saga_test_write_str("fa.txt", text),
                           saga_test_write_gz("fa.txt.gz", text, strlen(text)),
                           saga_test_write_str("fa-huge.txt", huge)};
    for (int p = 0; p < 3; p++) {
        for (int undirected = 0; undirected < 2; undirected++) {
            saga_load_opts o = saga_load_opts_defaults();
            o.graph.undirected = undirected;
            bool ok = false;
            int failures = 0;
            for (long n = 1; n < 200 && !ok; n++) {
                saga_graph *g = NULL;
                saga_test_fail_alloc_after(n);
                saga_status st = saga_graph_load(&g, paths[p], &o);
                saga_test_fail_alloc_after(0);
                if (st == SAGA_OK) {
                    ok = true;
                    assert_int_equal(saga_graph_n_vertices(g), 3);
                    saga_graph_free(&g);
                } else {
                    if (st != SAGA_ERR_OUT_OF_MEMORY)
                        fail_msg("allocation %ld: %s: %s", n, saga_status_name(st),
                                 saga_last_error());
                    assert_null(g);
                    failures++;
                }
            }
            assert_true(ok);
            assert_true(failures >= 8);
        }
    }
}

/* ---- format detection and dispatch
 * ----------------------------------------------------------------- */

static void test_edgelist_format_detect_and_names(void **state) {
    (void)state;
    saga_format f = SAGA_FORMAT_COUNT;
    const char *mm = "%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 2\n";
    assert_int_equal(saga_format_detect(saga_test_write_str("m.txt", mm), &f), SAGA_OK);
    assert_int_equal(f, SAGA_FORMAT_MTX);
    assert_int_equal(saga_format_detect(saga_test_write_gz("m.dat", mm, strlen(mm)), &f), SAGA_OK);
    assert_int_equal(f, SAGA_FORMAT_MTX);
    assert_int_equal(saga_format_detect(saga_test_write_str("g.graph", "3 2\n2\n1 3\n2\n"), &f),
                     SAGA_OK);
    assert_int_equal(f, SAGA_FORMAT_METIS);
    assert_int_equal(saga_format_detect(saga_test_write_gz("g.metis.gz", "3 2\n", 4), &f), SAGA_OK);
    assert_int_equal(f, SAGA_FORMAT_METIS);
    assert_int_equal(saga_format_detect(saga_test_write("c.bin", "SAGAGRPH\1\0\0\0", 12), &f),
                     SAGA_OK);
    assert_int_equal(f, SAGA_FORMAT_SGR);
    assert_int_equal(saga_format_detect(saga_test_write_str("e.txt", "0 1\n"), &f), SAGA_OK);
    assert_int_equal(f, SAGA_FORMAT_EDGELIST);
    assert_int_equal(saga_format_detect(saga_test_write_gz("e.txt.gz", "0 1\n", 4), &f), SAGA_OK);
    assert_int_equal(f, SAGA_FORMAT_EDGELIST);
    assert_int_equal(saga_format_detect(saga_test_write_str("empty", ""), &f), SAGA_OK);
    assert_int_equal(f, SAGA_FORMAT_EDGELIST);
    assert_int_equal(saga_format_detect(saga_test_tmp("none.txt"), &f), SAGA_ERR_IO);

    for (int i = 0; i < SAGA_FORMAT_COUNT; i++)
        assert_int_equal(saga_format_parse(saga_format_name((saga_format)i)), i);
    assert_string_equal(saga_format_name(SAGA_FORMAT_EDGELIST), "edgelist");
    assert_string_equal(saga_format_name(SAGA_FORMAT_SGR), "sgr");
    assert_int_equal(saga_format_parse("MTX"), SAGA_FORMAT_MTX);
    assert_int_equal(saga_format_parse("graphml"), -1);
    assert_int_equal(saga_format_parse(NULL), -1);

    saga_load_opts o = saga_load_opts_defaults();
    assert_int_equal(o.format, SAGA_FORMAT_AUTO);
    assert_int_equal(o.weights, SAGA_WEIGHTS_AUTO);
    assert_false(o.graph.undirected);
    /* forcing the edge-list reader on a file of another name */
    o.format = SAGA_FORMAT_EDGELIST;
    saga_graph *g = NULL;
    assert_int_equal(saga_graph_load(&g, saga_test_write_str("x.graph", "0 1\n1 2\n"), &o),
                     SAGA_OK);
    assert_int_equal(saga_graph_n_edges(g), 2);
    saga_graph_free(&g);
    o.format = (saga_format)77;
    assert_int_equal(saga_graph_load(&g, saga_test_write_str("y.txt", "0 1\n"), &o),
                     SAGA_ERR_INVALID_ARG);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_edgelist_comments_blanks_tabs_crlf),
        cmocka_unit_test(test_edgelist_dense_ids_have_no_map),
        cmocka_unit_test(test_edgelist_huge_and_sparse_ids),
        cmocka_unit_test(test_edgelist_switch_to_map_midway),
        cmocka_unit_test(test_edgelist_weights),
        cmocka_unit_test(test_edgelist_graph_options),
        cmocka_unit_test(test_edgelist_column_errors),
        cmocka_unit_test(test_edgelist_token_errors),
        cmocka_unit_test(test_edgelist_nul_empty_binary),
        cmocka_unit_test(test_edgelist_gzip_errors),
        cmocka_unit_test(test_edgelist_missing_file),
        cmocka_unit_test(test_edgelist_gzip_equals_plain_and_reference),
        cmocka_unit_test(test_edgelist_from_memory),
        cmocka_unit_test(test_edgelist_dataset_ca_grqc),
        cmocka_unit_test(test_edgelist_dataset_email_eu_core),
        cmocka_unit_test(test_edgelist_dataset_slashdot),
        cmocka_unit_test(test_edgelist_dataset_karate_and_cora),
        cmocka_unit_test(test_edgelist_failing_allocations),
        cmocka_unit_test(test_edgelist_format_detect_and_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
