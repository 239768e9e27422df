/* test_features.c - features (sparse, dense, auto), labels and index lists, on Cora and on small
 * files with every error. */
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

/* A graph of n isolated vertices, with original ids when ids != NULL. */
static saga_graph *vertices(int32_t n, const int64_t *ids) {
    saga_graph *g = NULL;
    assert_int_equal(saga_graph_from_edges(&g, n, 0, NULL, NULL, NULL, ids, NULL), SAGA_OK);
    return g;
}

typedef struct feats {
    float *x;
    int64_t rows, cols;
} feats;

static feats features_ok(const char *text, const saga_features_opts *o) {
    const char *path = saga_test_write_str("f.txt", text);
    feats f = {0};
    saga_status st = saga_features_read(&f.x, &f.rows, &f.cols, path, o);
    if (st != SAGA_OK)
        fail_msg("%s: %s", saga_status_name(st), saga_last_error());
    return f;
}

static const char *features_fail(const char *text, saga_status want, const saga_features_opts *o) {
    const char *path = saga_test_write_str("bad-f.txt", text);
    float *x = NULL;
    int64_t rows = -7, cols = -7;
    saga_status st = saga_features_read(&x, &rows, &cols, path, o);
    if (st != want)
        fail_msg("expected %s, got %s: %s", saga_status_name(want), saga_status_name(st),
                 saga_last_error());
    assert_null(x);
    assert_int_equal(rows, -7); /* outputs untouched on failure */
    assert_int_equal(cols, -7);
    return path;
}

static void assert_floats(const float *got, const float *want, int n) {
    for (int k = 0; k < n; k++)
        if (got[k] != want[k])
            fail_msg("value %d: got %g, want %g", k, (double)got[k], (double)want[k]);
}

/* ---- Cora ------------------------------------------------------------------------------------ */

static void test_features_cora(void **state) {
    (void)state;
    const char *path = saga_test_data("cora/features.txt.gz");
    float *x = NULL;
    int64_t rows, cols;
    assert_int_equal(saga_features_read(&x, &rows, &cols, path, NULL), SAGA_OK);
    assert_int_equal(rows, 2708);
    assert_int_equal(cols, 1433);
    int64_t nnz = 0;
    double sum = 0;
    for (int64_t k = 0; k < rows * cols; k++) {
        nnz += x[k] != 0;
        sum += x[k];
    }
    assert_int_equal(nnz, 49216);
    assert_true(sum == 49216.0);
    static const int row0[] = {19, 81, 146, 315, 774, 877, 1194, 1247, 1274};
    int seen = 0;
    for (int c = 0; c < 1433; c++)
        if (x[c] != 0) {
            assert_true(seen < 9);
            assert_int_equal(c, row0[seen++]);
        }
    assert_int_equal(seen, 9);
    int last = 0;
    for (int c = 0; c < 1433; c++)
        last += x[2707 * 1433 + c] != 0;
    assert_int_equal(last, 13);
    saga_free(x);

    /* the same through a graph of 2708 vertices, sparse named explicitly, n_cols given */
    saga_graph *g = vertices(2708, NULL);
    saga_features_opts o = saga_features_opts_defaults();
    o.graph = g;
    o.layout = SAGA_FEATURES_SPARSE;
    o.n_cols = 1433;
    assert_int_equal(saga_features_read(&x, &rows, &cols, path, &o), SAGA_OK);
    assert_int_equal(rows, 2708);
    assert_int_equal(cols, 1433);
    nnz = 0;
    for (int64_t k = 0; k < rows * cols; k++)
        nnz += x[k] == 1.0f;
    assert_int_equal(nnz, 49216);
    saga_free(x);
    /* and a smaller n_cols is an error naming the line */
    o.n_cols = 1000;
    assert_int_equal(saga_features_read(&x, &rows, &cols, path, &o), SAGA_ERR_PARSE);
    saga_test_assert_error_contains("features.txt.gz:", "feature index", "outside 0..999", NULL);
    saga_graph_free(&g);
}

static void test_features_cora_labels(void **state) {
    (void)state;
    const char *path = saga_test_data("cora/labels.txt");
    int32_t *lab = NULL;
    int64_t n = 0;
    assert_int_equal(saga_labels_read(&lab, &n, path, NULL), SAGA_OK);
    assert_int_equal(n, 2708);
    int64_t counts[8] = {0};
    for (int64_t v = 0; v < n; v++) {
        assert_true(lab[v] >= 0 && lab[v] < 7);
        counts[lab[v]]++;
    }
    static const int64_t want[7] = {351, 217, 418, 818, 426, 298, 180};
    for (int c = 0; c < 7; c++)
        assert_int_equal(counts[c], want[c]);
    assert_int_equal(lab[0], 3);
    assert_int_equal(lab[1], 4);
    saga_free(lab);

    saga_graph *g = vertices(2708, NULL);
    assert_int_equal(saga_labels_read(&lab, &n, path, g), SAGA_OK);
    assert_int_equal(n, 2708);
    assert_int_equal(lab[2], 4);
    saga_free(lab);
    saga_graph_free(&g);
    /* a graph with fewer vertices than lines */
    g = vertices(2000, NULL);
    assert_int_equal(saga_labels_read(&lab, &n, path, g), SAGA_ERR_PARSE);
    saga_test_assert_error_contains("labels.txt:2001:", "more labels than the graph's 2000", NULL);
    saga_graph_free(&g);
}

static void check_range(const char *rel, int64_t count, int32_t first, int32_t last,
                        const saga_graph *g) {
    int32_t *idx = NULL;
    int64_t n = 0;
    assert_int_equal(saga_index_read(&idx, &n, saga_test_data(rel), g), SAGA_OK);
    assert_int_equal(n, count);
    assert_int_equal(idx[0], first);
    assert_int_equal(idx[n - 1], last);
    for (int64_t k = 1; k < n; k++)
        assert_int_equal(idx[k], idx[k - 1] + 1);
    saga_free(idx);
}

static void test_features_cora_splits(void **state) {
    (void)state;
    check_range("cora/train_idx.txt", 140, 0, 139, NULL);
    check_range("cora/val_idx.txt", 500, 140, 639, NULL);
    check_range("cora/test_idx.txt", 1000, 1708, 2707, NULL);
    saga_graph *g = vertices(2708, NULL);
    check_range("cora/test_idx.txt", 1000, 1708, 2707, g);
    saga_graph_free(&g);
    g = vertices(2000, NULL);
    int32_t *idx = NULL;
    int64_t n;
    assert_int_equal(saga_index_read(&idx, &n, saga_test_data("cora/test_idx.txt"), g),
                     SAGA_ERR_PARSE);
    saga_test_assert_error_contains("test_idx.txt:293:", "vertex 2000 is not a vertex", NULL);
    saga_graph_free(&g);
}

/* ---- features on small files ------------------------------------------------------------------
 */

static void test_features_sparse_small(void **state) {
    (void)state;
    feats f = features_ok("# comment\n0 1 0.5\n% another\n\n2 0\n", NULL);
    assert_int_equal(f.rows, 3);
    assert_int_equal(f.cols, 2);
    assert_floats(f.x, (float[]){0, 0.5f, 0, 0, 1, 0}, 6);
    saga_free(f.x);

    /* vertices named by original id through a graph */
    saga_graph *g = vertices(3, (int64_t[]){10, 20, 30});
    saga_features_opts o = saga_features_opts_defaults();
    o.graph = g;
    f = features_ok("20 1\n30 0 2.5\n10 2 -1\n", &o);
    assert_int_equal(f.rows, 3);
    assert_int_equal(f.cols, 3);
    assert_floats(f.x, (float[]){0, 0, -1, 0, 1, 0, 2.5f, 0, 0}, 9);
    saga_free(f.x);
    const char *p = features_fail("20 1\n25 0\n", SAGA_ERR_PARSE, &o);
    saga_test_assert_error_contains(p, ":2:", "vertex 25 is not a vertex of the graph", NULL);
    /* an empty file with a graph: all-zero rows, n_cols as given */
    o.n_cols = 4;
    f = features_ok("# nothing\n", &o);
    assert_int_equal(f.rows, 3);
    assert_int_equal(f.cols, 4);
    assert_floats(f.x, (float[12]){0}, 12);
    saga_free(f.x);
    saga_graph_free(&g);

    /* gzip */
    static const char text[] = "1 3\n0 0 7\n";
    const char *gz = saga_test_write_gz("f.txt.gz", text, sizeof text - 1);
    float *x = NULL;
    int64_t rows, cols;
    assert_int_equal(saga_features_read(&x, &rows, &cols, gz, NULL), SAGA_OK);
    assert_int_equal(rows, 2);
    assert_int_equal(cols, 4);
    assert_floats(x, (float[]){7, 0, 0, 0, 0, 0, 0, 1}, 8);
    saga_free(x);
}

/* Sparse files stay sparse with saga_features_load: a CSR with each row's columns increasing,
 * the same matrix saga_features_read makes dense, and row normalisation gives the dense bits. */
static void test_features_sparse_csr(void **state) {
    (void)state;
    const char *path = saga_test_write_str("csr.txt", "2 3 0.5\n0 4\n2 1 2\n0 0 -1\n2 0\n");
    saga_features f = {0};
    assert_int_equal(saga_features_load(&f, path, NULL), SAGA_OK);
    assert_null(f.dense);
    assert_int_equal(f.n_rows, 3);
    assert_int_equal(f.n_cols, 5);
    assert_int_equal(f.nnz, 5);
    static const int64_t off[] = {0, 2, 2, 5};
    static const int32_t idx[] = {0, 4, 0, 1, 3};
    for (int i = 0; i < 4; i++)
        assert_int_equal(f.offsets[i], off[i]);
    for (int k = 0; k < 5; k++)
        assert_int_equal(f.indices[k], idx[k]);
    assert_floats(f.values, (float[]){-1, 1, 1, 2, 0.5f}, 5);
    saga_features_norm nr = saga_features_normalize_rows(&f);
    float inv = (float)(1.0 / 3.5); /* row 0 has a negative entry, row 1 none: left as they are */
    assert_floats(f.values, (float[]){-1, 1, 1 * inv, 2 * inv, 0.5f * inv}, 5);
    assert_int_equal(nr.n_normalized, 1);
    assert_int_equal(nr.n_signed, 1);
    assert_int_equal(nr.n_zero, 1);
    assert_int_equal(saga_features_densify(&f), SAGA_OK);
    assert_non_null(f.dense);
    assert_null(f.offsets);
    assert_floats(f.dense, (float[]){-1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 10);
    saga_features_free(&f);
    saga_features_free(&f); /* twice: nothing left to free */

    /* a dense file stays dense; a signed row (Gaussian features, say) is not divided by its sum,
     * even when the sum is positive */
    path = saga_test_write_str("dense.txt", "0.5 2\n3 4\n-1 3\n");
    assert_int_equal(saga_features_load(&f, path, NULL), SAGA_OK);
    assert_non_null(f.dense);
    assert_null(f.offsets);
    assert_int_equal(f.n_rows, 3);
    nr = saga_features_normalize_rows(&f);
    assert_floats(f.dense,
                  (float[]){0.5f * (float)(1 / 2.5), 2 * (float)(1 / 2.5), 3 * (float)(1.0 / 7),
                            4 * (float)(1.0 / 7), -1, 3},
                  6);
    assert_int_equal(nr.n_normalized, 2);
    assert_int_equal(nr.n_signed, 1);
    assert_int_equal(nr.n_zero, 0);
    saga_features_free(&f);

    /* a pair listed twice is an error naming it, as in the dense reading */
    path = saga_test_write_str("twice.txt", "0 1\n1 2\n0 1\n");
    assert_int_equal(saga_features_load(&f, path, NULL), SAGA_ERR_PARSE);
    saga_test_assert_error_contains("feature 1 of vertex 0 is listed twice", NULL);
    assert_null(f.offsets);

    /* Cora: 49,216 non-zeros, and normalised rows equal the dense normalisation bit for bit */
    saga_features s = {0}, d = {0};
    const char *cora = saga_test_data("cora/features.txt.gz");
    assert_int_equal(saga_features_load(&s, cora, NULL), SAGA_OK);
    assert_int_equal(s.n_rows, 2708);
    assert_int_equal(s.n_cols, 1433);
    assert_int_equal(s.nnz, 49216);
    assert_int_equal(s.offsets[1], 9);
    assert_int_equal(s.indices[8], 1274);
    assert_int_equal(saga_features_read(&d.dense, &d.n_rows, &d.n_cols, cora, NULL), SAGA_OK);
    saga_features_normalize_rows(&s);
    saga_features_normalize_rows(&d);
    assert_int_equal(saga_features_densify(&s), SAGA_OK);
    assert_memory_equal(s.dense, d.dense, (size_t)(2708 * 1433) * sizeof(float));
    saga_features_free(&s);
    saga_features_free(&d);
}

static void test_features_sparse_errors(void **state) {
    (void)state;
    saga_features_opts o = saga_features_opts_defaults();
    const char *p;
    o.n_cols = 2;
    p = features_fail("0 1\n0 2\n", SAGA_ERR_PARSE, &o);
    saga_test_assert_error_contains(p, ":2:", "feature index 2 is outside 0..1", NULL);
    p = features_fail("0 1\n1 0\n0 1 2\n", SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, "feature 1 of vertex 0 is listed twice", NULL);
    o = saga_features_opts_defaults();
    o.layout = SAGA_FEATURES_SPARSE;
    p = features_fail("0 1\n0.5 2\n", SAGA_ERR_PARSE, &o);
    saga_test_assert_error_contains(p, ":2:", "vertex", "\"0.5\"", NULL);
    p = features_fail("0 1 inf\n", SAGA_ERR_PARSE, &o);
    saga_test_assert_error_contains(p, ":1:", "feature value", "not finite", NULL);
    p = features_fail("0 1 2 3\n", SAGA_ERR_PARSE, &o);
    saga_test_assert_error_contains(p, ":1:", "extra \"3\"", NULL);
    p = features_fail("3000000000 1\n", SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":1:", "vertex 3000000000 is too large", NULL);
    o.layout = (saga_features_layout)9;
    p = features_fail("0 1\n", SAGA_ERR_INVALID_ARG, &o);
    saga_test_assert_error_contains("layout 9", NULL);
}

static void test_features_dense(void **state) {
    (void)state;
    feats f = features_ok("0.5 1.0 -2\n3 4 5e-1\n", NULL);
    assert_int_equal(f.rows, 2);
    assert_int_equal(f.cols, 3);
    assert_floats(f.x, (float[]){0.5f, 1, -2, 3, 4, 0.5f}, 6);
    saga_free(f.x);

    /* "1 2 3" rows look sparse: AUTO reads them as triples, DENSE as rows */
    f = features_ok("1 2 3\n4 5 6\n", NULL);
    assert_int_equal(f.rows, 5);
    assert_int_equal(f.cols, 6);
    assert_true(f.x[1 * 6 + 2] == 3.0f && f.x[4 * 6 + 5] == 6.0f);
    saga_free(f.x);
    saga_features_opts o = saga_features_opts_defaults();
    o.layout = SAGA_FEATURES_DENSE;
    f = features_ok("1 2 3\n4 5 6\n", &o);
    assert_int_equal(f.rows, 2);
    assert_int_equal(f.cols, 3);
    assert_floats(f.x, (float[]){1, 2, 3, 4, 5, 6}, 6);
    saga_free(f.x);

    /* sparse-looking lines followed by one that is not: the whole file is dense */
    f = features_ok("1 2 0.5\n3 4 0.25\n2.5 1 1\n", NULL);
    assert_int_equal(f.rows, 3);
    assert_int_equal(f.cols, 3);
    assert_floats(f.x, (float[]){1, 2, 0.5f, 3, 4, 0.25f, 2.5f, 1, 1}, 9);
    saga_free(f.x);

    /* rows in vertex order of a graph */
    saga_graph *g = vertices(2, (int64_t[]){100, 200});
    o.graph = g;
    o.layout = SAGA_FEATURES_AUTO;
    f = features_ok("# header\n1.5 2 3 4\n5 6 7 8\n", &o);
    assert_int_equal(f.rows, 2);
    assert_int_equal(f.cols, 4);
    assert_true(f.x[7] == 8.0f);
    saga_free(f.x);
    saga_graph_free(&g);
}

static void test_features_dense_errors(void **state) {
    (void)state;
    const char *p;
    p = features_fail("1.5 2 3 4\n1 2\n", SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":2:", "2 values", "first row (line 1) has 4", NULL);
    p = features_fail("1.5 2 3 4\n1 2 3 4 5\n", SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":2:", "more than 4 values", "line 1", NULL);
    /* neither reading fits: the dense error is the one reported */
    p = features_fail("1 2\n1.5 2 3\n", SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":2:", "more than 2 values", "(line 1)", NULL);
    p = features_fail("1.5 2 x\n", SAGA_ERR_PARSE, NULL);
    saga_test_assert_error_contains(p, ":1:", "value 3 of row 1", "\"x\"", NULL);
    saga_features_opts o = saga_features_opts_defaults();
    o.n_cols = 3;
    p = features_fail("1.5 2 3 4\n", SAGA_ERR_PARSE, &o);
    saga_test_assert_error_contains(p, ":1:", "4 values", "n_cols = 3", NULL);
    saga_graph *g = vertices(3, NULL);
    o = saga_features_opts_defaults();
    o.graph = g;
    p = features_fail("0.5 1 1 1\n1 1 1 1\n", SAGA_ERR_PARSE, &o);
    saga_test_assert_error_contains(p, "2 feature rows, the graph has 3 vertices", NULL);
    p = features_fail("0.5 1 1 1\n1 1 1 1\n1 1 1 1\n1 1 1 1\n", SAGA_ERR_PARSE, &o);
    saga_test_assert_error_contains(p, ":4:", "more feature rows than the graph's 3", NULL);
    o.layout = SAGA_FEATURES_DENSE;
    p = features_fail("", SAGA_ERR_PARSE, &o);
    saga_test_assert_error_contains(p, "0 feature rows, the graph has 3 vertices", NULL);
    saga_graph_free(&g);
    /* without a graph an empty file is an empty matrix */
    feats f = features_ok("", NULL);
    assert_int_equal(f.rows, 0);
    assert_int_equal(f.cols, 0);
    saga_free(f.x);
}

/* ---- labels ------------------------------------------------------------------------------------
 */

static void labels_ok(const char *text, const saga_graph *g, const int32_t *want, int64_t n) {
    const char *path = saga_test_write_str("l.txt", text);
    int32_t *lab = NULL;
    int64_t got = -1;
    saga_status st = saga_labels_read(&lab, &got, path, g);
    if (st != SAGA_OK)
        fail_msg("%s: %s", saga_status_name(st), saga_last_error());
    assert_int_equal(got, n);
    for (int64_t k = 0; k < n; k++)
        assert_int_equal(lab[k], want[k]);
    saga_free(lab);
}

static const char *labels_fail(const char *text, const saga_graph *g) {
    const char *path = saga_test_write_str("bad-l.txt", text);
    int32_t *lab = NULL;
    int64_t n = -7;
    assert_int_equal(saga_labels_read(&lab, &n, path, g), SAGA_ERR_PARSE);
    assert_null(lab);
    assert_int_equal(n, -7);
    return path;
}

static void test_features_labels(void **state) {
    (void)state;
    /* one label per line: blank lines inside the list are unlabelled vertices */
    labels_ok("# classes\n3\n-1\n\n0\n\n", NULL, (int32_t[]){3, -1, -1, 0}, 4);
    saga_graph *g3 = vertices(3, (int64_t[]){10, 20, 30});
    labels_ok("1\n2\n\n", g3, (int32_t[]){1, 2, -1}, 3);
    labels_ok("", g3, (int32_t[]){-1, -1, -1}, 3);
    /* pairs: by original id with a graph, by index without */
    labels_ok("30 2\n% c\n10 0\n", g3, (int32_t[]){0, -1, 2}, 3);
    labels_ok("4 1\n0 2\n", NULL, (int32_t[]){2, -1, -1, -1, 1}, 5);

    const char *p;
    saga_graph *g5 = vertices(5, NULL);
    p = labels_fail("1\n2\n\n", g5);
    saga_test_assert_error_contains(p, "labels for 3 vertices, the graph has 5", NULL);
    p = labels_fail("1\n2\n3\n4\n", g3);
    saga_test_assert_error_contains(p, ":4:", "more labels than the graph's 3", NULL);
    p = labels_fail("1\n2 3\n", NULL);
    saga_test_assert_error_contains(p, ":2:", "one label like line 1", "extra \"3\"", NULL);
    p = labels_fail("1 2\n3\n", NULL);
    saga_test_assert_error_contains(p, ":2:", "\"vertex label\" like line 1", "one value", NULL);
    p = labels_fail("-2\n", NULL);
    saga_test_assert_error_contains(p, ":1:", "label -2 is invalid", NULL);
    p = labels_fail("1 2 3\n", NULL);
    saga_test_assert_error_contains(p, ":1:", "found 3 values", NULL);
    p = labels_fail("x\n", NULL);
    saga_test_assert_error_contains(p, ":1:", "label", "\"x\"", NULL);
    p = labels_fail("10 1\n25 1\n", g3);
    saga_test_assert_error_contains(p, ":2:", "vertex 25 is not a vertex of the graph", NULL);
    p = labels_fail("1 2\n\n1 3\n", NULL);
    saga_test_assert_error_contains(p, ":3:", "vertex 1 is labelled twice", NULL);
    p = labels_fail("1 99999999999\n", NULL);
    saga_test_assert_error_contains(p, ":1:", "label 99999999999 is invalid", NULL);
    saga_graph_free(&g3);
    saga_graph_free(&g5);

    /* labels on a reader */
    static const char text[] = "5\n6\n";
    saga_reader *r = NULL;
    assert_int_equal(saga_reader_open_mem(&r, "mem", text, sizeof text - 1), SAGA_OK);
    int32_t *lab = NULL;
    int64_t n;
    assert_int_equal(saga_labels_parse(&lab, &n, r, NULL), SAGA_OK);
    assert_int_equal(n, 2);
    assert_int_equal(lab[1], 6);
    saga_free(lab);
}

static void test_features_index_lists(void **state) {
    (void)state;
    saga_graph *g = vertices(3, (int64_t[]){10, 20, 30});
    const char *path = saga_test_write_str("i.txt", "# split\n20\n\n10\n");
    int32_t *idx = NULL;
    int64_t n;
    assert_int_equal(saga_index_read(&idx, &n, path, g), SAGA_OK);
    assert_int_equal(n, 2);
    assert_int_equal(idx[0], 1);
    assert_int_equal(idx[1], 0);
    saga_free(idx);
    struct {
        const char *text;
        const saga_graph *g;
        const char *needle;
    } bad[] = {
        {"10\n15\n", g, ":2: vertex 15 is not a vertex of the graph"},
        {"1 2\n", NULL, ":1: expected one vertex id per line, found an extra \"2\""},
        {"-3\n", NULL, "negative"},
        {"3000000000\n", NULL, "vertex 3000000000 is too large"},
        {"a\n", NULL, "\"a\""},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        path = saga_test_write_str("bad-i.txt", bad[k].text);
        idx = NULL;
        assert_int_equal(saga_index_read(&idx, &n, path, bad[k].g), SAGA_ERR_PARSE);
        saga_test_assert_error_contains(path, bad[k].needle, NULL);
        assert_null(idx);
    }
    saga_graph_free(&g);
    /* identity ids are checked against the vertex count */
    g = vertices(3, NULL);
    path = saga_test_write_str("i3.txt", "2\n3\n");
    assert_int_equal(saga_index_read(&idx, &n, path, g), SAGA_ERR_PARSE);
    saga_test_assert_error_contains(path, ":2:", "vertex 3 is not a vertex", NULL);
    saga_graph_free(&g);
}

static void test_features_failing_allocations(void **state) {
    (void)state;
    saga_status st;
    float *x = NULL;
    int32_t *lab = NULL;
    int64_t rows, cols, n;
    const char *sparse = saga_test_write_str("oom-s.txt", "0 1 0.5\n2 0\n1 3\n");
    const char *dense = saga_test_write_str("oom-d.txt", "0.5 1 2\n3 4 5\n6 7 8\n");
    const char *mixed = saga_test_write_str("oom-m.txt", "1 2 0.5\n3 4 0.25\n2.5 1 1\n");
    IO_OOM_LOOP(st = saga_features_read(&x, &rows, &cols, sparse, NULL), saga_free(x));
    IO_OOM_LOOP(st = saga_features_read(&x, &rows, &cols, dense, NULL), saga_free(x));
    IO_OOM_LOOP(st = saga_features_read(&x, &rows, &cols, mixed, NULL), saga_free(x));
    static const char gz_text[] = "0 1\n1 0\n";
    const char *gz = saga_test_write_gz("oom.txt.gz", gz_text, sizeof gz_text - 1);
    IO_OOM_LOOP(st = saga_features_read(&x, &rows, &cols, gz, NULL), saga_free(x));
    saga_features f = {0};
    IO_OOM_LOOP(st = saga_features_load(&f, sparse, NULL), saga_features_free(&f));
    IO_OOM_LOOP(st = saga_features_load(&f, dense, NULL), saga_features_free(&f));
    saga_graph *g = vertices(3, (int64_t[]){0, 1, 2});
    saga_features_opts o = saga_features_opts_defaults();
    o.graph = g;
    IO_OOM_LOOP(st = saga_features_read(&x, &rows, &cols, sparse, &o), saga_free(x));
    IO_OOM_LOOP(st = saga_features_read(&x, &rows, &cols, dense, &o), saga_free(x));

    const char *single = saga_test_write_str("oom-l.txt", "1\n\n2\n");
    const char *pairs = saga_test_write_str("oom-p.txt", "2 1\n0 3\n");
    IO_OOM_LOOP(st = saga_labels_read(&lab, &n, single, NULL), saga_free(lab));
    IO_OOM_LOOP(st = saga_labels_read(&lab, &n, pairs, NULL), saga_free(lab));
    IO_OOM_LOOP(st = saga_labels_read(&lab, &n, pairs, g), saga_free(lab));
    IO_OOM_LOOP(st = saga_labels_read(&lab, &n, single, g), saga_free(lab));
    const char *index = saga_test_write_str("oom-i.txt", "# split\n2\n0\n1\n");
    IO_OOM_LOOP(st = saga_index_read(&lab, &n, index, NULL), saga_free(lab));
    IO_OOM_LOOP(st = saga_index_read(&lab, &n, index, g), saga_free(lab));
    saga_graph_free(&g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_features_cora),
        cmocka_unit_test(test_features_cora_labels),
        cmocka_unit_test(test_features_cora_splits),
        cmocka_unit_test(test_features_sparse_small),
        cmocka_unit_test(test_features_sparse_csr),
        cmocka_unit_test(test_features_sparse_errors),
        cmocka_unit_test(test_features_dense),
        cmocka_unit_test(test_features_dense_errors),
        cmocka_unit_test(test_features_labels),
        cmocka_unit_test(test_features_index_lists),
        cmocka_unit_test(test_features_failing_allocations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
