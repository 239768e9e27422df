/* dataset.c - a node-classification data set in the layout of the Planetoid Cora files: the
 * graph, features, labels (checked against classes.txt), the split, and the row normalisation. */
#include "parse_util.h"
#include "saga_dataset.h"
#include "saga_log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* Class ids above this are taken for a broken file rather than a data set's classes. */
#define MAX_CLASSES (1 << 20)

saga_dataset_opts saga_dataset_opts_defaults(void) {
    return (saga_dataset_opts){.normalize_features = true};
}

void saga_dataset_free(saga_dataset *d) {
    if (!d)
        return;
    saga_graph_free(&d->graph);
    saga_features_free(&d->features);
    saga_free(d->labels);
    saga_free(d->train);
    saga_free(d->val);
    saga_free(d->test);
    memset(d, 0, sizeof *d);
}

/* dir/name: the first of the candidates that exists (a .gz name first, then its plain twin). */
static saga_status find_file(char *out, size_t size, const char *dir, const char *const *names,
                             int n_names) {
    struct stat sb;
    for (int i = 0; i < n_names; i++) {
        snprintf(out, size, "%s/%s", dir, names[i]);
        if (stat(out, &sb) == 0)
            return SAGA_OK;
    }
    snprintf(out, size, "%s/%s", dir, names[0]);
    if (n_names == 1)
        return saga_error(SAGA_ERR_IO, "%s: %s", out, strerror(ENOENT));
    return saga_error(SAGA_ERR_IO, "%s: %s (nor %s)", out, strerror(ENOENT), names[1]);
}

/* Reads classes.txt: "index name" per line, the indices 0..C-1 each once, in any order. */
static saga_status classes_read(int32_t *n_classes, const char *path) {
    saga_status st = SAGA_OK;
    saga_reader *r = NULL;
    saga_lines *l = NULL;
    uint8_t *seen = NULL;
    int64_t count = 0, cap = 0, max_index = -1, max_line = 0;
    const char *line;
    size_t len;
    SAGA_TRY(saga_reader_open(&r, path));
    st = saga_lines_open(&l, r); /* owns r from here on, even when opening fails */
    r = NULL;
    if (st < 0)
        goto fail;
    for (;;) {
        SAGA_TRY(saga_lines_next(l, &line, &len));
        if (!line)
            break;
        const char *p = line, *end = line + len;
        if (saga_parse_is_blank(p, end) || saga_parse_is_comment(p, end, "#%"))
            continue;
        saga_text_skip_blank(&p, end);
        const char *t = p;
        int64_t k;
        saga_text_result tr = saga_text_u63(&p, end, &k);
        if (tr != SAGA_TEXT_OK) {
            st = saga_parse_token_error(l, "class index", "\"index name\"", tr, t, end);
            goto fail;
        }
        if (k >= MAX_CLASSES) {
            st = saga_parse_error(SAGA_ERR_PARSE, l, "class index %lld is too large (at most %d)",
                                  (long long)k, MAX_CLASSES - 1);
            goto fail;
        }
        if (k >= cap) {
            int64_t c = k + 1 > 2 * cap ? k + 1 : 2 * cap;
            SAGA_TRY(saga_realloc_array((void **)&seen, (size_t)c, 1, "class flags"));
            memset(seen + cap, 0, (size_t)(c - cap));
            cap = c;
        }
        if (seen[k]) {
            st = saga_parse_error(SAGA_ERR_PARSE, l, "class %lld is listed twice", (long long)k);
            goto fail;
        }
        seen[k] = 1;
        if (k > max_index)
            max_index = k, max_line = saga_lines_number(l);
        count++;
    }
    SAGA_CHECK(count > 0, SAGA_ERR_PARSE, "%s: no classes", path);
    SAGA_CHECK(max_index < count, SAGA_ERR_PARSE,
               "%s:%lld: class index %lld is outside 0..%lld (%lld classes listed)", path,
               (long long)max_line, (long long)max_index, (long long)count - 1, (long long)count);
    *n_classes = (int32_t)count;
fail:
    saga_free(seen);
    saga_lines_close(&l);
    saga_reader_close(&r);
    return st;
}

/* The label of a labels.txt data line: its last integer ("label" or "vertex label"). */
static bool line_label(const char *p, const char *end, int64_t *label) {
    bool any = false;
    while (saga_text_skip_blank(&p, end)) {
        if (saga_text_i64(&p, end, label) != SAGA_TEXT_OK)
            return false;
        any = true;
    }
    return any;
}

/* A label at or beyond n_classes was read from path: finds its line to name it. */
static saga_status label_beyond(const char *path, int32_t n_classes, const char *classes_path) {
    saga_status st = SAGA_OK;
    saga_reader *r = NULL;
    saga_lines *l = NULL;
    const char *line;
    size_t len;
    SAGA_TRY(saga_reader_open(&r, path));
    st = saga_lines_open(&l, r);
    r = NULL;
    if (st < 0)
        goto fail;
    for (;;) {
        SAGA_TRY(saga_lines_next(l, &line, &len));
        if (!line)
            break;
        const char *end = line + len;
        int64_t label;
        if (saga_parse_is_comment(line, end, "#%") || !line_label(line, end, &label))
            continue;
        if (label >= n_classes) {
            st = saga_parse_error(SAGA_ERR_PARSE, l,
                                  "label %lld is outside the %d classes of %s (0..%d)",
                                  (long long)label, n_classes, classes_path, n_classes - 1);
            goto fail;
        }
    }
    /* the file changed under us: still an error, without a line */
    st = saga_error(SAGA_ERR_PARSE, "%s: a label is outside the %d classes of %s", path, n_classes,
                    classes_path);
fail:
    saga_lines_close(&l);
    saga_reader_close(&r);
    return st;
}

/* The split file's vertices must be labelled vertices of the graph. */
static saga_status check_split(const char *path, const int32_t *ids, int64_t n,
                               const int32_t *labels, int64_t n_vertices) {
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= n_vertices)
            return saga_error(SAGA_ERR_PARSE,
                              "%s: entry %lld: vertex %d is out of range (labels.txt has %lld "
                              "vertices)",
                              path, (long long)i + 1, ids[i], (long long)n_vertices);
        if (labels[ids[i]] < 0)
            return saga_error(SAGA_ERR_PARSE, "%s: entry %lld: vertex %d has no label", path,
                              (long long)i + 1, ids[i]);
    }
    return SAGA_OK;
}

/* Rebuilds g on vertices 0..n-1 named by their original ids, so that vertices without edges
 * (absent from an edge list) keep their place. g is replaced. */
static saga_status graph_on_ids(saga_graph **g, int32_t n, const char *path) {
    saga_status st = SAGA_OK;
    int32_t *src = NULL, *dst = NULL;
    saga_graph *h = NULL;
    saga_csr out = saga_graph_out(*g);
    int32_t nv = saga_graph_n_vertices(*g);
    for (int32_t v = 0; v < nv; v++) {
        int64_t id = saga_graph_orig_id(*g, v);
        SAGA_CHECK(id < n, SAGA_ERR_PARSE,
                   "%s: vertex %lld is out of range (labels.txt has %d vertices)", path,
                   (long long)id, n);
    }
    SAGA_TRY(saga_alloc_array((void **)&src, (size_t)out.nnz + 1, sizeof *src, "data set edges"));
    SAGA_TRY(saga_alloc_array((void **)&dst, (size_t)out.nnz + 1, sizeof *dst, "data set edges"));
    for (int32_t u = 0; u < nv; u++)
        for (int64_t k = out.offsets[u]; k < out.offsets[u + 1]; k++) {
            src[k] = (int32_t)saga_graph_orig_id(*g, u);
            dst[k] = (int32_t)saga_graph_orig_id(*g, out.indices[k]);
        }
    saga_graph_opts o = saga_graph_opts_defaults();
    o.duplicates = SAGA_DUPLICATES_KEEP; /* already symmetric and without duplicates */
    SAGA_TRY(saga_graph_from_edges_take(&h, n, out.nnz, &src, &dst, NULL, NULL, &o));
    saga_graph_free(g);
    *g = h;
fail:
    saga_free(src);
    saga_free(dst);
    return st;
}

/* Warns about classes no vertex has; returns how many. */
static saga_status warn_empty_classes(int32_t *n_empty, const saga_dataset *d, const char *path) {
    saga_status st = SAGA_OK;
    int64_t *count = NULL;
    SAGA_TRY(
        saga_alloc_zeroed((void **)&count, (size_t)d->n_classes, sizeof *count, "class counts"));
    for (int64_t v = 0; v < d->n_vertices; v++)
        if (d->labels[v] >= 0)
            count[d->labels[v]]++;
    char list[256] = "";
    size_t used = 0;
    int32_t empty = 0;
    for (int32_t k = 0; k < d->n_classes; k++) {
        if (count[k])
            continue;
        if (empty < 8 && used < sizeof list)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%d", empty ? ", " : "", k);
        else if (empty == 8 && used < sizeof list)
            used += (size_t)snprintf(list + used, sizeof list - used, ", ...");
        empty++;
    }
    if (empty)
        saga_log(SAGA_LOG_WARN, "%s: %d of the %d classes have no vertex (%s %s)", path, empty,
                 d->n_classes, empty == 1 ? "class" : "classes", list);
    *n_empty = empty;
fail:
    saga_free(count);
    return st;
}

/* Warns about vertices listed in more than one of train / val / test; returns how many. */
static saga_status warn_split_overlap(int64_t *n_overlap, const saga_dataset *d, const char *dir) {
    saga_status st = SAGA_OK;
    uint8_t *in = NULL;
    SAGA_TRY(saga_alloc_zeroed((void **)&in, (size_t)d->n_vertices, 1, "split flags"));
    const int32_t *lists[3] = {d->train, d->val, d->test};
    int64_t counts[3] = {d->n_train, d->n_val, d->n_test};
    for (int s = 0; s < 3; s++)
        for (int64_t i = 0; i < counts[s]; i++)
            in[lists[s][i]] |= (uint8_t)(1u << s);
    int64_t both[3] = {0}, total = 0; /* train & val, train & test, val & test */
    int64_t first = -1;
    for (int64_t v = 0; v < d->n_vertices; v++) {
        uint8_t m = in[v];
        if ((m & (m - 1)) == 0)
            continue; /* in one list, or none */
        both[0] += (m & 3) == 3;
        both[1] += (m & 5) == 5;
        both[2] += (m & 6) == 6;
        if (first < 0)
            first = v;
        total++;
    }
    if (total)
        saga_log(SAGA_LOG_WARN,
                 "%s: %lld %s listed in more than one of train_idx.txt, val_idx.txt, "
                 "test_idx.txt (train and val %lld, train and test %lld, val and test %lld; the "
                 "first is vertex %lld)",
                 dir, (long long)total, total == 1 ? "vertex is" : "vertices are",
                 (long long)both[0], (long long)both[1], (long long)both[2], (long long)first);
    *n_overlap = total;
fail:
    saga_free(in);
    return st;
}

saga_status saga_dataset_load(saga_dataset *out, const char *dir, const saga_dataset_opts *opts) {
    saga_status st = SAGA_OK;
    char path[4096], classes_path[4096];
    saga_dataset d = {0};
    saga_features x = {0};
    saga_dataset_opts defaults = saga_dataset_opts_defaults();
    if (out)
        memset(out, 0, sizeof *out);
    SAGA_CHECK(out && dir, SAGA_ERR_INVALID_ARG, "saga_dataset_load: NULL argument");
    if (!opts)
        opts = &defaults;
    struct stat sb;
    SAGA_CHECK(stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode), SAGA_ERR_IO, "%s: %s", dir,
               stat(dir, &sb) == 0 ? "not a directory" : strerror(errno));

    /* ---- labels first: they fix the vertex count; classes.txt, when there, the class count */
    snprintf(classes_path, sizeof classes_path, "%s/classes.txt", dir);
    d.has_classes_file = stat(classes_path, &sb) == 0;
    if (d.has_classes_file)
        SAGA_TRY(classes_read(&d.n_classes, classes_path));
    static const char *const labels_names[] = {"labels.txt"};
    SAGA_TRY(find_file(path, sizeof path, dir, labels_names, 1));
    int64_t n = 0;
    SAGA_TRY(saga_labels_read(&d.labels, &n, path, NULL));
    SAGA_CHECK(n > 0, SAGA_ERR_PARSE, "%s: no labels", path);
    SAGA_CHECK(n < INT32_MAX, SAGA_ERR_PARSE,
               "%s: %lld labels, more than the %d vertices a graph has", path, (long long)n,
               (int)INT32_MAX - 1);
    d.n_vertices = n;
    int32_t max_label = -1;
    for (int64_t i = 0; i < n; i++)
        max_label = d.labels[i] > max_label ? d.labels[i] : max_label;
    SAGA_CHECK(max_label >= 0, SAGA_ERR_PARSE, "%s: every label is -1", path);
    if (d.has_classes_file) {
        if (max_label >= d.n_classes) {
            st = label_beyond(path, d.n_classes, classes_path);
            goto fail;
        }
    } else {
        SAGA_CHECK(max_label < MAX_CLASSES, SAGA_ERR_PARSE,
                   "%s: label %d is too large (classes are numbered 0..C-1)", path, max_label);
        d.n_classes = max_label + 1;
    }

    /* ---- the graph, on vertices 0..n-1 */
    static const char *const edges_names[] = {"edges.txt.gz", "edges.txt"};
    SAGA_TRY(find_file(path, sizeof path, dir, edges_names, 2));
    saga_load_opts lo = saga_load_opts_defaults();
    lo.format = SAGA_FORMAT_EDGELIST;
    lo.weights = SAGA_WEIGHTS_IGNORE;
    lo.graph.undirected = true;
    lo.graph.self_loops = SAGA_SELF_LOOPS_DROP; /* models add their own, once per vertex */
    SAGA_TRY(saga_graph_load(&d.graph, path, &lo));
    if (saga_graph_orig_ids(d.graph) || saga_graph_n_vertices(d.graph) != n)
        SAGA_TRY(graph_on_ids(&d.graph, (int32_t)n, path));
    d.n_edges = saga_graph_n_edges(d.graph) / 2;

    /* ---- features: row v is vertex v */
    static const char *const feat_names[] = {"features.txt.gz", "features.txt"};
    SAGA_TRY(find_file(path, sizeof path, dir, feat_names, 2));
    SAGA_TRY(saga_features_load(&x, path, NULL));
    int64_t rows = x.n_rows, cols = x.n_cols;
    SAGA_CHECK(rows <= n, SAGA_ERR_PARSE, "%s: %lld feature rows, labels.txt has %lld vertices",
               path, (long long)rows, (long long)n);
    /* A dense file lists every vertex: a short one is a truncated or mismatched file, and padding
     * it with zeros would train on vertices without features. */
    SAGA_CHECK(rows == n || !x.dense, SAGA_ERR_PARSE,
               "%s: %lld dense feature rows, labels.txt has %lld vertices (a dense features file "
               "needs one row per vertex)",
               path, (long long)rows, (long long)n);
    SAGA_CHECK(cols > 0, SAGA_ERR_PARSE, "%s: no features", path);
    if (rows < n) { /* a sparse file may end before the last vertices: they have no features */
        SAGA_TRY(saga_realloc_array((void **)&x.offsets, (size_t)n + 1, sizeof *x.offsets,
                                    "feature offsets"));
        for (int64_t v = rows + 1; v <= n; v++)
            x.offsets[v] = x.nnz;
        x.n_rows = n;
    }
    d.features = x;
    memset(&x, 0, sizeof x);

    /* ---- the split */
    static const char *const split_names[3][1] = {
        {"train_idx.txt"}, {"val_idx.txt"}, {"test_idx.txt"}};
    int32_t **lists[3] = {&d.train, &d.val, &d.test};
    int64_t *counts[3] = {&d.n_train, &d.n_val, &d.n_test};
    for (int s = 0; s < 3; s++) {
        SAGA_TRY(find_file(path, sizeof path, dir, split_names[s], 1));
        SAGA_TRY(saga_index_read(lists[s], counts[s], path, NULL));
        SAGA_TRY(check_split(path, *lists[s], *counts[s], d.labels, n));
    }
    SAGA_CHECK(d.n_train > 0, SAGA_ERR_PARSE, "%s/train_idx.txt: no training vertices", dir);

    /* ---- warnings, once the data set is whole */
    snprintf(path, sizeof path, "%s/labels.txt", dir);
    SAGA_TRY(warn_empty_classes(&d.n_empty_classes, &d, path));
    SAGA_TRY(warn_split_overlap(&d.n_split_overlap, &d, dir));

    if (opts->normalize_features)
        d.norm = saga_features_normalize_rows(&d.features);
    *out = d;
    return SAGA_OK;
fail:
    saga_features_free(&x);
    saga_dataset_free(&d);
    return st;
}
