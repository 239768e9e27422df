/* test_dataset.c - saga_dataset_load on small directories written here and on Cora: what it
 * reads, the errors for a short dense features file and a label beyond classes.txt, the
 * warnings for empty classes and overlapping splits, and the normalisation of signed rows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"

#include "saga_dataset.h"
#include "saga_log.h"

#include <fcntl.h>
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- helpers ------------------------------------------------------------------------------ */

static void put(const char *dir, const char *name, const char *text) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

static void drop(const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    assert_int_equal(unlink(path), 0);
}

/* A fresh directory with a 5-vertex path graph, 3 classes, 2 dense features and a split; the
 * caller replaces files to break it. Static buffer. */
static const char *small_set(const char *name) {
    static char dir[4096];
    snprintf(dir, sizeof dir, "%s", saga_test_tmp(name));
    assert_int_equal(mkdir(dir, 0700), 0);
    put(dir, "edges.txt", "0 1\n1 2\n2 3\n3 4\n");
    /* decimals: rows of two integers would read as sparse "vertex feature" lines */
    put(dir, "features.txt", "1.0 3\n2.0 2\n4.0 0\n0.0 1\n1.0 1\n");
    put(dir, "labels.txt", "0\n1\n0\n1\n2\n");
    put(dir, "classes.txt", "0 alpha\n1 beta\n2 gamma\n");
    put(dir, "train_idx.txt", "0\n1\n");
    put(dir, "val_idx.txt", "2\n");
    put(dir, "test_idx.txt", "3\n4\n");
    return dir;
}

/* stderr into a file while the library logs (warnings go there). */
typedef struct capture {
    int saved;
    char path[4096];
} capture;

static void capture_begin(capture *c) {
    snprintf(c->path, sizeof c->path, "%s", saga_test_tmp("stderr.txt"));
    fflush(stderr);
    c->saved = dup(STDERR_FILENO);
    int fd = open(c->path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(c->saved >= 0 && fd >= 0);
    assert_int_equal(dup2(fd, STDERR_FILENO), STDERR_FILENO);
    close(fd);
}

/* Restores stderr; returns what was written (static buffer). */
static const char *capture_end(capture *c) {
    static char text[8192];
    fflush(stderr);
    assert_int_equal(dup2(c->saved, STDERR_FILENO), STDERR_FILENO);
    close(c->saved);
    FILE *f = fopen(c->path, "r");
    assert_non_null(f);
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    return text;
}

static void assert_contains(const char *text, const char *needle) {
    if (!strstr(text, needle))
        fail_msg("\"%s\" lacks \"%s\"", text, needle);
}

static int setup(void **state) {
    (void)state;
    saga_log_set_level(SAGA_LOG_WARN);
    return 0;
}

/* ---- tests -------------------------------------------------------------------------------- */

static void test_dataset_small(void **state) {
    (void)state;
    const char *dir = small_set("small");
    saga_dataset d;
    saga_dataset_opts o = saga_dataset_opts_defaults();
    assert_true(o.normalize_features);
    capture cap;
    capture_begin(&cap);
    saga_status st = saga_dataset_load(&d, dir, NULL);
    const char *err = capture_end(&cap);
    if (st != SAGA_OK)
        fail_msg("%s", saga_last_error());
    assert_string_equal(err, ""); /* nothing to warn about */
    assert_int_equal(d.n_vertices, 5);
    assert_int_equal(saga_graph_n_vertices(d.graph), 5);
    assert_int_equal(d.n_edges, 4);
    assert_int_equal(saga_graph_n_edges(d.graph), 8); /* both directions */
    assert_int_equal(d.n_classes, 3);
    assert_true(d.has_classes_file);
    assert_int_equal(d.n_empty_classes, 0);
    assert_int_equal(d.n_split_overlap, 0);
    assert_int_equal(d.n_train, 2);
    assert_int_equal(d.n_val, 1);
    assert_int_equal(d.n_test, 2);
    assert_int_equal(d.test[1], 4);
    assert_int_equal(d.labels[4], 2);
    assert_non_null(d.features.dense);
    assert_int_equal(d.features.n_rows, 5);
    assert_int_equal(d.features.n_cols, 2);
    const float want[10] = {0.25f, 0.75f, 0.5f, 0.5f, 1, 0, 0, 1, 0.5f, 0.5f};
    for (int i = 0; i < 10; i++)
        assert_true(d.features.dense[i] == want[i]);
    assert_int_equal(d.norm.n_normalized, 5);
    assert_int_equal(d.norm.n_signed, 0);
    saga_dataset_free(&d);
    assert_null(d.graph);
    saga_dataset_free(&d); /* twice: nothing left */
    saga_dataset_free(NULL);

    /* without classes.txt: the largest label + 1 */
    drop(dir, "classes.txt");
    assert_int_equal(saga_dataset_load(&d, dir, NULL), SAGA_OK);
    assert_int_equal(d.n_classes, 3);
    assert_false(d.has_classes_file);
    saga_dataset_free(&d);
}

/* A dense features file with fewer rows than vertices is an error naming the file and both
 * counts; a sparse file may end before the last vertices. */
static void test_dataset_short_dense_features(void **state) {
    (void)state;
    const char *dir = small_set("short");
    saga_dataset d;
    put(dir, "features.txt", "1.0 3\n2.0 2\n4.0 0\n");
    assert_int_equal(saga_dataset_load(&d, dir, NULL), SAGA_ERR_PARSE);
    saga_test_assert_error_contains("features.txt", "3 dense feature rows", "5 vertices", NULL);
    assert_null(d.graph);
    assert_null(d.labels);

    /* one row too many is an error as well */
    put(dir, "features.txt", "1.0 3\n2.0 2\n4.0 0\n0.0 1\n1.0 1\n1.0 1\n");
    assert_int_equal(saga_dataset_load(&d, dir, NULL), SAGA_ERR_PARSE);
    saga_test_assert_error_contains("features.txt", "6 feature rows", "5 vertices", NULL);

    /* sparse, naming vertices 0..2 only: vertices 3 and 4 have no features */
    put(dir, "features.txt", "0 0\n0 2\n2 1 4\n");
    assert_int_equal(saga_dataset_load(&d, dir, NULL), SAGA_OK);
    assert_null(d.features.dense);
    assert_int_equal(d.features.n_rows, 5);
    assert_int_equal(d.features.n_cols, 3);
    assert_int_equal(d.features.nnz, 3);
    assert_int_equal(d.features.offsets[3], 3);
    assert_int_equal(d.features.offsets[5], 3);
    assert_true(d.features.values[0] == 0.5f && d.features.values[2] == 1.0f);
    assert_int_equal(d.norm.n_normalized, 2);
    assert_int_equal(d.norm.n_zero, 3);
    saga_dataset_free(&d);
}

/* With classes.txt every label is below its count; the error names the line, the label and the
 * count. Classes without a vertex are a warning. */
static void test_dataset_classes(void **state) {
    (void)state;
    const char *dir = small_set("classes");
    saga_dataset d;
    put(dir, "labels.txt", "0\n1\n0\n99\n2\n");
    assert_int_equal(saga_dataset_load(&d, dir, NULL), SAGA_ERR_PARSE);
    saga_test_assert_error_contains("labels.txt:4:", "label 99", "3 classes", "classes.txt", NULL);
    assert_null(d.labels);
    /* after comment lines and in "vertex label" pairs, the line is still the one at fault */
    put(dir, "labels.txt", "# vertex class\n0 0\n1 1\n2 0\n3 1\n4 3\n");
    assert_int_equal(saga_dataset_load(&d, dir, NULL), SAGA_ERR_PARSE);
    saga_test_assert_error_contains("labels.txt:6:", "label 3", "3 classes", NULL);

    /* four classes listed, three used: n_classes is 4, and class 3 is warned about */
    put(dir, "labels.txt", "0\n1\n0\n1\n2\n");
    put(dir, "classes.txt", "# index name\n3 delta\n0 alpha\n1 beta\n2 gamma\n");
    capture cap;
    capture_begin(&cap);
    saga_status st = saga_dataset_load(&d, dir, NULL);
    const char *err = capture_end(&cap);
    assert_int_equal(st, SAGA_OK);
    assert_int_equal(d.n_classes, 4);
    assert_int_equal(d.n_empty_classes, 1);
    assert_contains(err, "warning");
    assert_contains(err, "1 of the 4 classes have no vertex (class 3)");
    saga_dataset_free(&d);

    /* a broken classes.txt is an error naming it */
    put(dir, "classes.txt", "0 alpha\n1 beta\n1 gamma\n");
    assert_int_equal(saga_dataset_load(&d, dir, NULL), SAGA_ERR_PARSE);
    saga_test_assert_error_contains("classes.txt:3:", "class 1 is listed twice", NULL);
    put(dir, "classes.txt", "0 alpha\n1 beta\n5 gamma\n");
    assert_int_equal(saga_dataset_load(&d, dir, NULL), SAGA_ERR_PARSE);
    saga_test_assert_error_contains("classes.txt:3:", "class index 5", "3 classes listed", NULL);
    put(dir, "classes.txt", "alpha\n");
    assert_int_equal(saga_dataset_load(&d, dir, NULL), SAGA_ERR_PARSE);
    saga_test_assert_error_contains("classes.txt:1:", "class index", NULL);
    put(dir, "classes.txt", "# nothing\n");
    assert_int_equal(saga_dataset_load(&d, dir, NULL), SAGA_ERR_PARSE);
    saga_test_assert_error_contains("classes.txt", "no classes", NULL);

    /* without classes.txt a large label makes that many classes, the unused ones warned about */
    drop(dir, "classes.txt");
    put(dir, "labels.txt", "0\n1\n0\n9\n2\n");
    capture_begin(&cap);
    st = saga_dataset_load(&d, dir, NULL);
    err = capture_end(&cap);
    assert_int_equal(st, SAGA_OK);
    assert_int_equal(d.n_classes, 10);
    assert_int_equal(d.n_empty_classes, 6);
    assert_contains(err, "6 of the 10 classes have no vertex (classes 3, 4, 5, 6, 7, 8)");
    saga_dataset_free(&d);
}

/* A vertex in more than one of train / val / test is a warning, with the counts. */
static void test_dataset_split_overlap(void **state) {
    (void)state;
    const char *dir = small_set("overlap");
    saga_dataset d;
    put(dir, "val_idx.txt", "2\n0\n");
    put(dir, "test_idx.txt", "3\n4\n1\n0\n");
    capture cap;
    capture_begin(&cap);
    saga_status st = saga_dataset_load(&d, dir, NULL);
    const char *err = capture_end(&cap);
    assert_int_equal(st, SAGA_OK);
    assert_int_equal(d.n_split_overlap, 2);
    assert_contains(err, "warning");
    assert_contains(err, "2 vertices are listed in more than one of train_idx.txt, val_idx.txt, "
                         "test_idx.txt (train and val 1, train and test 2, val and test 1; the "
                         "first is vertex 0)");
    saga_dataset_free(&d);
}

/* Rows with a negative entry are not divided by their sum; the result counts both kinds. */
static void test_dataset_signed_rows(void **state) {
    (void)state;
    const char *dir = small_set("signed");
    saga_dataset d;
    put(dir, "features.txt", "1 3\n-1 3\n0 0\n2 2\n0.5 -0.5\n");
    assert_int_equal(saga_dataset_load(&d, dir, NULL), SAGA_OK);
    const float want[10] = {0.25f, 0.75f, -1, 3, 0, 0, 0.5f, 0.5f, 0.5f, -0.5f};
    for (int i = 0; i < 10; i++)
        if (d.features.dense[i] != want[i])
            fail_msg("feature %d: %g, expected %g", i, (double)d.features.dense[i],
                     (double)want[i]);
    assert_int_equal(d.norm.n_normalized, 2);
    assert_int_equal(d.norm.n_signed, 2);
    assert_int_equal(d.norm.n_zero, 1);
    saga_dataset_free(&d);

    /* the same rows sparse: the same values */
    put(dir, "features.txt", "0 0 1\n0 1 3\n1 0 -1\n1 1 3\n3 0 2\n3 1 2\n4 0 0.5\n4 1 -0.5\n");
    assert_int_equal(saga_dataset_load(&d, dir, NULL), SAGA_OK);
    assert_null(d.features.dense);
    assert_int_equal(saga_features_densify(&d.features), SAGA_OK);
    for (int i = 0; i < 10; i++)
        assert_true(d.features.dense[i] == want[i]);
    assert_int_equal(d.norm.n_signed, 2);
    saga_dataset_free(&d);

    /* not asked for: as read, nothing counted */
    put(dir, "features.txt", "1 3\n-1 3\n0 0\n2 2\n0.5 -0.5\n");
    saga_dataset_opts o = saga_dataset_opts_defaults();
    o.normalize_features = false;
    assert_int_equal(saga_dataset_load(&d, dir, &o), SAGA_OK);
    assert_true(d.features.dense[0] == 1 && d.features.dense[7] == 2);
    assert_int_equal(d.norm.n_normalized + d.norm.n_signed + d.norm.n_zero, 0);
    saga_dataset_free(&d);
}

static void test_dataset_errors(void **state) {
    (void)state;
    saga_dataset d;
    assert_int_equal(saga_dataset_load(NULL, "x", NULL), SAGA_ERR_INVALID_ARG);
    assert_int_equal(saga_dataset_load(&d, NULL, NULL), SAGA_ERR_INVALID_ARG);
    const char *missing = saga_test_tmp("no-such-dir");
    assert_int_equal(saga_dataset_load(&d, missing, NULL), SAGA_ERR_IO);
    saga_test_assert_error_contains(missing, NULL);

    const char *dir = small_set("errors");
    drop(dir, "val_idx.txt");
    assert_int_equal(saga_dataset_load(&d, dir, NULL), SAGA_ERR_IO);
    saga_test_assert_error_contains("val_idx.txt", NULL);
    put(dir, "val_idx.txt", "7\n");
    assert_int_equal(saga_dataset_load(&d, dir, NULL), SAGA_ERR_PARSE);
    saga_test_assert_error_contains("val_idx.txt", "vertex 7 is out of range", NULL);
    put(dir, "val_idx.txt", "2\n");
    put(dir, "labels.txt", "0\n1\n-1\n1\n2\n");
    assert_int_equal(saga_dataset_load(&d, dir, NULL), SAGA_ERR_PARSE);
    saga_test_assert_error_contains("val_idx.txt", "vertex 2 has no label", NULL);
    put(dir, "labels.txt", "0\n1\n0\n1\n2\n");
    put(dir, "train_idx.txt", "# none\n");
    assert_int_equal(saga_dataset_load(&d, dir, NULL), SAGA_ERR_PARSE);
    saga_test_assert_error_contains("train_idx.txt", "no training vertices", NULL);
    put(dir, "train_idx.txt", "0\n");
    put(dir, "edges.txt", "0 1\n1 9\n");
    assert_int_equal(saga_dataset_load(&d, dir, NULL), SAGA_ERR_PARSE);
    saga_test_assert_error_contains("edges.txt", "vertex 9 is out of range", NULL);

    /* every failed allocation fails cleanly (the leak checker sees the rest) */
    put(dir, "edges.txt", "0 1\n1 2\n2 3\n3 4\n");
    assert_int_equal(saga_dataset_load(&d, dir, NULL), SAGA_OK);
    saga_dataset_free(&d);
    for (long n = 1;; n++) {
        saga_test_fail_alloc_after(n);
        saga_status st = saga_dataset_load(&d, dir, NULL);
        saga_test_fail_alloc_after(0);
        if (st == SAGA_OK) {
            saga_dataset_free(&d);
            break;
        }
        assert_int_equal(st, SAGA_ERR_OUT_OF_MEMORY);
        assert_null(d.graph);
    }
}

/* The bundled Cora: the Planetoid counts, classes.txt read, every row normalised. */
static void test_dataset_cora(void **state) {
    (void)state;
    char labels[4096];
    snprintf(labels, sizeof labels, "%s", saga_test_data("cora/labels.txt"));
    const char *dir = dirname(labels);
    saga_dataset d;
    if (saga_dataset_load(&d, dir, NULL) != SAGA_OK)
        fail_msg("%s", saga_last_error());
    assert_int_equal(d.n_vertices, 2708);
    assert_int_equal(d.n_edges, 5278);
    assert_int_equal(d.n_classes, 7);
    assert_true(d.has_classes_file);
    assert_int_equal(d.n_train, 140);
    assert_int_equal(d.n_val, 500);
    assert_int_equal(d.n_test, 1000);
    assert_int_equal(d.n_split_overlap, 0);
    assert_int_equal(d.n_empty_classes, 0);
    assert_null(d.features.dense);
    assert_int_equal(d.features.n_cols, 1433);
    assert_int_equal(d.features.nnz, 49216);
    assert_int_equal(d.norm.n_normalized, 2708);
    /* row 0 has 9 words: each 1/9 */
    assert_int_equal(d.features.offsets[1], 9);
    assert_true(d.features.values[0] == (float)(1.0 / 9));
    saga_dataset_free(&d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dataset_small),
        cmocka_unit_test(test_dataset_short_dense_features),
        cmocka_unit_test(test_dataset_classes),
        cmocka_unit_test(test_dataset_split_overlap),
        cmocka_unit_test(test_dataset_signed_rows),
        cmocka_unit_test(test_dataset_errors),
        cmocka_unit_test(test_dataset_cora),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
