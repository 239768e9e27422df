/* test_citation.c - the synthetic citation generator: counts, structure, determinism, measured
 * homophily and feature signal, and the written files read back with the io/ parsers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"

#include "saga_datasets.h"
#include "saga_io.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static saga_citation *gen(const saga_citation_params *p) {
    saga_citation *c = NULL;
    assert_int_equal(saga_citation_generate(&c, p), SAGA_OK);
    assert_non_null(c);
    return c;
}

static saga_citation_params sized(int32_t n, int32_t classes, double degree, int32_t features,
                                  uint64_t seed) {
    saga_citation_params p = saga_citation_params_defaults();
    p.n_vertices = n;
    p.n_classes = classes;
    p.avg_degree = degree;
    p.n_features = features;
    p.seed = seed;
    return p;
}

static double homophily_of(const saga_citation *c) {
    int64_t same = 0;
    for (int64_t k = 0; k < c->n_edges; k++)
        same += c->labels[c->edge_u[k]] == c->labels[c->edge_v[k]];
    return (double)same / (double)c->n_edges;
}

static void test_citation_defaults_are_cora_shaped(void **state) {
    (void)state;
    saga_citation_params p = saga_citation_params_defaults();
    assert_int_equal(p.n_vertices, 2708);
    assert_int_equal(p.n_classes, 7);
    assert_int_equal(p.n_features, 1433);
    assert_true(p.avg_degree == 3.9 && p.homophily == 0.8);
    assert_int_equal(p.train_per_class, 20);
    assert_int_equal(p.n_val, 500);
    assert_int_equal(p.n_test, 1000);
}

/* Every structural promise of the header, checked on the arrays. */
static void check_structure(const saga_citation *c, const saga_citation_params *p) {
    int32_t n = p->n_vertices;
    assert_int_equal(c->n_vertices, n);
    assert_int_equal(c->n_classes, p->n_classes);
    assert_int_equal(c->n_features, p->n_features);
    assert_int_equal(c->n_edges, (int64_t)llround(n * p->avg_degree / 2));
    int64_t *deg = calloc((size_t)n, sizeof *deg);
    for (int64_t k = 0; k < c->n_edges; k++) {
        int32_t u = c->edge_u[k], v = c->edge_v[k];
        assert_true(u >= 0 && u < v && v < n);
        if (k > 0) /* strictly increasing pairs: sorted and no duplicates */
            assert_true(c->edge_u[k - 1] < u || (c->edge_u[k - 1] == u && c->edge_v[k - 1] < v));
        deg[u]++;
        deg[v]++;
    }
    if (p->avg_degree >= 2)
        for (int32_t v = 0; v < n; v++)
            assert_true(deg[v] >= 1);
    free(deg);

    int64_t *class_size = calloc((size_t)p->n_classes, sizeof *class_size);
    assert_int_equal(c->feat_offsets[0], 0);
    for (int32_t v = 0; v < n; v++) {
        assert_true(c->labels[v] >= 0 && c->labels[v] < p->n_classes);
        class_size[c->labels[v]]++;
        int64_t a = c->feat_offsets[v], b = c->feat_offsets[v + 1];
        assert_true(b > a);
        assert_true(b - a <= (3 * p->words_per_vertex + 1) / 2);
        for (int64_t k = a; k < b; k++) {
            assert_true(c->feat_index[k] >= 0 && c->feat_index[k] < p->n_features);
            if (k > a)
                assert_true(c->feat_index[k - 1] < c->feat_index[k]);
        }
    }
    for (int32_t k = 0; k < p->n_classes; k++)
        assert_true(class_size[k] >= 1);

    /* The split: ascending, disjoint, train per class at most train_per_class. */
    unsigned char *role = calloc((size_t)n, 1);
    int32_t *train_per = calloc((size_t)p->n_classes, sizeof *train_per);
    const int32_t *lists[3] = {c->train, c->val, c->test};
    int32_t counts[3] = {c->n_train, c->n_val, c->n_test};
    for (int s = 0; s < 3; s++)
        for (int32_t i = 0; i < counts[s]; i++) {
            int32_t v = lists[s][i];
            assert_true(v >= 0 && v < n);
            if (i > 0)
                assert_true(lists[s][i - 1] < v);
            assert_int_equal(role[v], 0);
            role[v] = (unsigned char)(s + 1);
            if (s == 0)
                train_per[c->labels[v]]++;
        }
    for (int32_t k = 0; k < p->n_classes; k++) {
        assert_true(train_per[k] >= 1 && train_per[k] <= p->train_per_class);
        assert_true(train_per[k] <= class_size[k]);
    }
    assert_true(c->n_val <= p->n_val && c->n_test <= p->n_test);
    assert_true(c->n_test >= 1);
    free(role);
    free(train_per);
    free(class_size);
}

static void test_citation_structure(void **state) {
    (void)state;
    saga_citation_params p = saga_citation_params_defaults();
    saga_citation *c = gen(&p);
    check_structure(c, &p);
    /* At Cora's size the split is Planetoid's exactly. */
    assert_int_equal(c->n_train, 140);
    assert_int_equal(c->n_val, 500);
    assert_int_equal(c->n_test, 1000);
    saga_citation_free(&c);
    assert_null(c);
    saga_citation_free(&c); /* NULL is fine */
    saga_citation_free(NULL);

    saga_citation_params q[] = {sized(40, 4, 3, 16, 2), sized(5000, 3, 1.5, 50, 3),
                                sized(3000, 12, 12, 300, 4)};
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
        c = gen(&q[i]);
        check_structure(c, &q[i]);
        saga_citation_free(&c);
    }
}

static void test_citation_small_graph_split_is_capped(void **state) {
    (void)state;
    saga_citation_params p = sized(100, 7, 4, 50, 9);
    saga_citation *c = gen(&p);
    assert_true(c->n_train <= 100 / 5 + 7);
    assert_true(c->n_val >= 1 && c->n_test >= 1);
    assert_true(c->n_train + c->n_val + c->n_test <= 100);
    saga_citation_free(&c);
}

static void test_citation_deterministic(void **state) {
    (void)state;
    saga_citation_params p = sized(3000, 5, 6, 200, 11);
    saga_citation *a = gen(&p), *b = gen(&p);
    assert_int_equal(a->n_edges, b->n_edges);
    assert_memory_equal(a->edge_u, b->edge_u, (size_t)a->n_edges * sizeof *a->edge_u);
    assert_memory_equal(a->edge_v, b->edge_v, (size_t)a->n_edges * sizeof *a->edge_v);
    assert_memory_equal(a->labels, b->labels, 3000 * sizeof *a->labels);
    assert_memory_equal(a->feat_offsets, b->feat_offsets, 3001 * sizeof *a->feat_offsets);
    assert_memory_equal(a->feat_index, b->feat_index,
                        (size_t)a->feat_offsets[3000] * sizeof *a->feat_index);
    assert_int_equal(a->n_test, b->n_test);
    assert_memory_equal(a->test, b->test, (size_t)a->n_test * sizeof *a->test);

    p.seed = 12;
    saga_citation *d = gen(&p);
    int64_t differ = 0;
    for (int32_t v = 0; v < 3000; v++)
        differ += a->labels[v] != d->labels[v];
    assert_true(differ > 1000);
    saga_citation_free(&a);
    saga_citation_free(&b);
    saga_citation_free(&d);
}

static void test_citation_homophily_is_measured_as_asked(void **state) {
    (void)state;
    double targets[] = {0.8, 0.5, 0.1};
    for (size_t i = 0; i < 3; i++) {
        saga_citation_params p = sized(20000, 8, 8, 100, 5);
        p.homophily = targets[i];
        saga_citation *c = gen(&p);
        double h = homophily_of(c);
        print_message("homophily asked %.2f, measured %.4f\n", targets[i], h);
        assert_true(fabs(h - targets[i]) < 0.02);
        saga_citation_free(&c);
    }
}

static void test_citation_degrees_are_skewed(void **state) {
    (void)state;
    saga_citation_params p = sized(20000, 8, 8, 100, 6);
    saga_citation *c = gen(&p);
    int64_t *deg = calloc(20000, sizeof *deg);
    for (int64_t k = 0; k < c->n_edges; k++) {
        deg[c->edge_u[k]]++;
        deg[c->edge_v[k]]++;
    }
    int64_t max = 0, low = 0;
    for (int32_t v = 0; v < 20000; v++) {
        max = deg[v] > max ? deg[v] : max;
        low += deg[v] <= 4;
    }
    print_message("max degree %lld, %lld of 20000 vertices with degree <= 4 (mean 8)\n",
                  (long long)max, (long long)low);
    assert_true(max > 10 * 8);    /* a heavy tail */
    assert_true(low > 20000 / 4); /* and most vertices below the mean */
    free(deg);
    saga_citation_free(&c);
}

/* Nearest-centroid accuracy of the features alone (cosine to the class means of the training
 * vertices), in double: the topics carry signal when topic_share > 0 and none when it is 0. */
static double centroid_accuracy(const saga_citation *c) {
    int32_t C = c->n_classes, F = c->n_features;
    double *mean = calloc((size_t)C * (size_t)F, sizeof *mean);
    for (int32_t i = 0; i < c->n_train; i++) {
        int32_t v = c->train[i];
        for (int64_t k = c->feat_offsets[v]; k < c->feat_offsets[v + 1]; k++)
            mean[(size_t)c->labels[v] * F + c->feat_index[k]] += 1.0;
    }
    for (int32_t k = 0; k < C; k++) {
        double norm = 0;
        for (int32_t f = 0; f < F; f++)
            norm += mean[(size_t)k * F + f] * mean[(size_t)k * F + f];
        for (int32_t f = 0; f < F; f++)
            mean[(size_t)k * F + f] /= sqrt(norm) + 1e-12;
    }
    int32_t right = 0;
    for (int32_t i = 0; i < c->n_test; i++) {
        int32_t v = c->test[i], best = 0;
        double best_score = -1;
        for (int32_t k = 0; k < C; k++) {
            double s = 0;
            for (int64_t j = c->feat_offsets[v]; j < c->feat_offsets[v + 1]; j++)
                s += mean[(size_t)k * F + c->feat_index[j]];
            if (s > best_score)
                best_score = s, best = k;
        }
        right += best == c->labels[v];
    }
    free(mean);
    return (double)right / c->n_test;
}

static void test_citation_features_carry_class_signal(void **state) {
    (void)state;
    saga_citation_params p = saga_citation_params_defaults();
    saga_citation *c = gen(&p);
    double with_topic = centroid_accuracy(c);
    saga_citation_free(&c);
    p.topic_share = 0;
    c = gen(&p);
    double without = centroid_accuracy(c);
    saga_citation_free(&c);
    print_message("nearest-centroid test accuracy: %.3f (topic share 0.15), %.3f (0)\n", with_topic,
                  without);
    assert_true(with_topic > 0.4);
    assert_true(without < 0.3);
}

static void test_citation_rejects_bad_params(void **state) {
    (void)state;
    saga_citation *c = NULL;
    saga_citation_params p = sized(100, 1, 4, 50, 1);
    assert_int_equal(saga_citation_generate(&c, &p), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("classes", NULL);
    p = sized(10, 7, 2, 50, 1);
    assert_int_equal(saga_citation_generate(&c, &p), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("vertices", NULL);
    p = sized(100, 7, 4, 5, 1);
    assert_int_equal(saga_citation_generate(&c, &p), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("features", NULL);
    p = sized(20, 2, 15, 50, 1); /* 150 edges of 190 pairs: too dense */
    assert_int_equal(saga_citation_generate(&c, &p), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("half of the", NULL);
    p = sized(100, 7, 4, 50, 1);
    p.homophily = 1.5;
    assert_int_equal(saga_citation_generate(&c, &p), SAGA_ERR_INVALID_ARG);
    p = sized(100, 7, NAN, 50, 1);
    assert_int_equal(saga_citation_generate(&c, &p), SAGA_ERR_INVALID_ARG);
    assert_int_equal(saga_citation_generate(&c, NULL), SAGA_ERR_INVALID_ARG);
    assert_null(c);
}

static void test_citation_alloc_failure_leaks_nothing(void **state) {
    (void)state;
    saga_citation_params p = sized(200, 4, 4, 40, 3);
    saga_test_fail_alloc_after(LONG_MAX); /* counts the allocations, fails none */
    saga_citation *c = gen(&p);
    long n_allocs = saga_test_fail_alloc_after(0);
    saga_citation_free(&c);
    assert_true(n_allocs > 5);
    for (long n = 1; n <= n_allocs; n++) {
        saga_test_fail_alloc_after(n);
        saga_status st = saga_citation_generate(&c, &p);
        saga_test_fail_alloc_after(0);
        assert_int_equal(st, SAGA_ERR_OUT_OF_MEMORY);
        assert_null(c);
    }
}

static void test_citation_graph_and_dense_features(void **state) {
    (void)state;
    saga_citation_params p = sized(500, 4, 6, 60, 8);
    saga_citation *c = gen(&p);
    saga_graph *g = NULL;
    assert_int_equal(saga_citation_graph(&g, c, NULL), SAGA_OK);
    assert_int_equal(saga_graph_n_vertices(g), 500);
    assert_int_equal(saga_graph_n_edges(g), 2 * c->n_edges);
    saga_csr in = saga_graph_in(g);
    for (int64_t k = 0; k < c->n_edges; k++) { /* both directions present */
        int32_t u = c->edge_u[k], v = c->edge_v[k];
        bool found = false;
        for (int64_t j = in.offsets[v]; j < in.offsets[v + 1]; j++)
            found |= in.indices[j] == u;
        assert_true(found);
    }
    saga_graph_free(&g);
    float *x = NULL;
    assert_int_equal(saga_citation_features(&x, c), SAGA_OK);
    double total = 0;
    for (int64_t i = 0; i < 500 * 60; i++)
        total += x[i];
    assert_true(total == (double)c->feat_offsets[500]);
    for (int32_t v = 0; v < 500; v++)
        for (int64_t k = c->feat_offsets[v]; k < c->feat_offsets[v + 1]; k++)
            assert_true(x[(int64_t)v * 60 + c->feat_index[k]] == 1.0f);
    saga_free(x);
    saga_citation_free(&c);
}

static char *slurp(const char *path, size_t *len) {
    gzFile f = gzopen(path, "rb"); /* reads plain files too */
    assert_non_null(f);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    int got;
    while ((got = gzread(f, buf + n, (unsigned)(cap - n))) > 0) {
        n += (size_t)got;
        if (n == cap)
            buf = realloc(buf, cap *= 2);
    }
    gzclose(f);
    *len = n;
    return buf;
}

static char *raw(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static const char *const FILES[] = {"edges.txt.gz", "features.txt.gz", "labels.txt",
                                    "classes.txt",  "train_idx.txt",   "val_idx.txt",
                                    "test_idx.txt", "README.md"};

static void test_citation_write_reads_back(void **state) {
    (void)state;
    saga_citation_params p = sized(1500, 5, 5, 120, 21);
    saga_citation *c = gen(&p);
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s", saga_test_tmp("citation"));
    assert_int_equal(saga_citation_write(c, dir), SAGA_OK);

    /* The edges load as the undirected graph on 0..n-1 (every vertex has an edge). */
    snprintf(path, sizeof path, "%s/edges.txt.gz", dir);
    saga_load_opts lo = saga_load_opts_defaults();
    lo.graph.undirected = true;
    saga_graph *g = NULL;
    assert_int_equal(saga_graph_load(&g, path, &lo), SAGA_OK);
    assert_int_equal(saga_graph_n_vertices(g), 1500);
    assert_int_equal(saga_graph_n_edges(g), 2 * c->n_edges);
    assert_null(saga_graph_orig_ids(g));
    saga_graph_free(&g);

    /* The text itself: "u v" lines in the generator's order. */
    size_t len;
    char *text = slurp(path, &len);
    char *q = text;
    for (int64_t k = 0; k < c->n_edges; k++) {
        char *e;
        assert_int_equal(strtol(q, &e, 10), c->edge_u[k]);
        assert_int_equal(*e, ' ');
        assert_int_equal(strtol(e + 1, &q, 10), c->edge_v[k]);
        assert_int_equal(*q++, '\n');
    }
    assert_true(q == text + len);
    free(text);

    snprintf(path, sizeof path, "%s/features.txt.gz", dir);
    saga_features_opts fo = saga_features_opts_defaults();
    fo.layout = SAGA_FEATURES_SPARSE;
    fo.n_cols = 120;
    float *x = NULL, *want = NULL;
    int64_t rows = 0, cols = 0;
    assert_int_equal(saga_features_read(&x, &rows, &cols, path, &fo), SAGA_OK);
    assert_int_equal(rows, 1500);
    assert_int_equal(cols, 120);
    assert_int_equal(saga_citation_features(&want, c), SAGA_OK);
    assert_memory_equal(x, want, 1500 * 120 * sizeof *x);
    saga_free(x);
    saga_free(want);

    int32_t *ids = NULL;
    int64_t n = 0;
    snprintf(path, sizeof path, "%s/labels.txt", dir);
    assert_int_equal(saga_labels_read(&ids, &n, path, NULL), SAGA_OK);
    assert_int_equal(n, 1500);
    assert_memory_equal(ids, c->labels, 1500 * sizeof *ids);
    saga_free(ids);
    const char *split_names[3] = {"train_idx.txt", "val_idx.txt", "test_idx.txt"};
    const int32_t *splits[3] = {c->train, c->val, c->test};
    int32_t split_n[3] = {c->n_train, c->n_val, c->n_test};
    for (int s = 0; s < 3; s++) {
        snprintf(path, sizeof path, "%s/%s", dir, split_names[s]);
        assert_int_equal(saga_index_read(&ids, &n, path, NULL), SAGA_OK);
        assert_int_equal(n, split_n[s]);
        assert_memory_equal(ids, splits[s], (size_t)n * sizeof *ids);
        saga_free(ids);
    }
    snprintf(path, sizeof path, "%s/classes.txt", dir);
    text = raw(path, &len);
    assert_true(len > 0 && strncmp(text, "0 topic_0\n1 topic_1\n", 20) == 0);
    free(text);

    /* Same parameters, same bytes; the .tmp files are gone. */
    char dir2[512];
    snprintf(dir2, sizeof dir2, "%s", saga_test_tmp("citation-again"));
    saga_citation *c2 = gen(&p);
    assert_int_equal(saga_citation_write(c2, dir2), SAGA_OK);
    for (size_t i = 0; i < sizeof FILES / sizeof FILES[0]; i++) {
        size_t la, lb;
        snprintf(path, sizeof path, "%s/%s", dir, FILES[i]);
        char *a = raw(path, &la);
        snprintf(path, sizeof path, "%s/%s", dir2, FILES[i]);
        char *b = raw(path, &lb);
        assert_int_equal(la, lb);
        assert_memory_equal(a, b, la);
        free(a);
        free(b);
        snprintf(path, sizeof path, "%s/%s.tmp", dir, FILES[i]);
        FILE *f = fopen(path, "rb");
        assert_null(f);
    }
    saga_citation_free(&c2);
    saga_citation_free(&c);
}

static void test_citation_write_bad_dir(void **state) {
    (void)state;
    saga_citation_params p = sized(100, 4, 4, 40, 3);
    saga_citation *c = gen(&p);
    const char *file = saga_test_write_str("plain-file", "x\n");
    assert_int_equal(saga_citation_write(c, file), SAGA_ERR_IO);
    saga_test_assert_error_contains(file, "exists", NULL);
    const char *deep = saga_test_tmp("no-such-dir/citation");
    assert_int_equal(saga_citation_write(c, deep), SAGA_ERR_IO);
    saga_test_assert_error_contains(deep, "No such file", NULL);
    saga_citation_free(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_citation_defaults_are_cora_shaped),
        cmocka_unit_test(test_citation_structure),
        cmocka_unit_test(test_citation_small_graph_split_is_capped),
        cmocka_unit_test(test_citation_deterministic),
        cmocka_unit_test(test_citation_homophily_is_measured_as_asked),
        cmocka_unit_test(test_citation_degrees_are_skewed),
        cmocka_unit_test(test_citation_features_carry_class_signal),
        cmocka_unit_test(test_citation_rejects_bad_params),
        cmocka_unit_test(test_citation_alloc_failure_leaks_nothing),
        cmocka_unit_test(test_citation_graph_and_dense_features),
        cmocka_unit_test(test_citation_write_reads_back),
        cmocka_unit_test(test_citation_write_bad_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
