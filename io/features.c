/* features.c - vertex data files: feature matrices (sparse triples or dense rows), labels and
 * vertex index lists such as train/validation/test splits. */
#include "parse_util.h"
#include "parsers.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

saga_features_opts saga_features_opts_defaults(void) {
    return (saga_features_opts){.layout = SAGA_FEATURES_AUTO, .graph = NULL, .n_cols = 0};
}

static const char COMMENT_CHARS[] = "#%";

/* Makes room for `need` elements of size elem in *p (capacity *cap), growing by half. */
static saga_status reserve(void **p, int64_t *cap, int64_t need, size_t elem, const char *what) {
    if (need <= *cap)
        return SAGA_OK;
    int64_t c = *cap + *cap / 2 + 64;
    if (c < need)
        c = need;
    saga_status st = saga_realloc_array(p, (size_t)c, elem, what);
    if (st == SAGA_OK)
        *cap = c;
    return st;
}

static bool is_data_line(const char *p, const char *end) {
    return !saga_parse_is_blank(p, end) && !saga_parse_is_comment(p, end, COMMENT_CHARS);
}

/* A number for a float array: finite and within float range. */
static saga_text_result scan_float(const char **p, const char *end, float *out) {
    double d;
    saga_text_result r = saga_text_f64(p, end, &d);
    if (r != SAGA_TEXT_OK)
        return r;
    if (fabs(d) > FLT_MAX)
        return SAGA_TEXT_OVERFLOW;
    *out = (float)d;
    return SAGA_TEXT_OK;
}

/* Maps an id from the file to a vertex: through the graph's original ids when there is a graph,
 * else the id itself (which must fit a vertex id). */
static saga_status map_vertex(int32_t *out, const saga_lines *l, const saga_graph *g, int64_t id,
                              const char *what) {
    if (g) {
        if (saga_graph_find_vertex(g, id, out) < 0)
            return saga_parse_error(SAGA_ERR_PARSE, l, "%s %lld is not a vertex of the graph", what,
                                    (long long)id);
        return SAGA_OK;
    }
    if (id >= INT32_MAX)
        return saga_parse_error(SAGA_ERR_PARSE, l, "%s %lld is too large (at most %d)", what,
                                (long long)id, (int)INT32_MAX - 1);
    *out = (int32_t)id;
    return SAGA_OK;
}

/* ---- features ------------------------------------------------------------------------------ */

typedef struct sparse_acc {
    int32_t *row, *col;
    float *val;
    int64_t n, cap;
    int64_t max_row, max_col; /* -1 when empty */
} sparse_acc;

typedef struct dense_acc {
    float *v;
    int64_t n_vals, cap;
    int64_t rows, width;
    int64_t width_line; /* line that set the width */
} dense_acc;

typedef enum line_result { LINE_OK, LINE_SHAPE, LINE_ERROR } line_result;

/* Tries the line as "vertex feature [value]". LINE_SHAPE: it does not have that shape (message
 * set); LINE_ERROR: it has the shape but names an unknown vertex, a feature out of range, or
 * memory ran out (*st says which). */
static line_result sparse_line(sparse_acc *a, saga_status *st, const saga_lines *l, const char *p,
                               const char *end, const saga_features_opts *o) {
    char tok[48];
    int64_t id, feat;
    float val = 1.0f;
    saga_text_result r;
    const char *t;
    saga_text_skip_blank(&p, end);
    t = p;
    if ((r = saga_text_u63(&p, end, &id)) != SAGA_TEXT_OK) {
        *st = saga_parse_token_error(l, "vertex", "\"vertex feature [value]\"", r, t, end);
        return LINE_SHAPE;
    }
    saga_text_skip_blank(&p, end);
    t = p;
    if ((r = saga_text_u63(&p, end, &feat)) != SAGA_TEXT_OK) {
        *st = saga_parse_token_error(l, "feature index", "\"vertex feature [value]\"", r, t, end);
        return LINE_SHAPE;
    }
    if (saga_text_skip_blank(&p, end)) {
        t = p;
        if ((r = scan_float(&p, end, &val)) != SAGA_TEXT_OK) {
            *st = saga_parse_token_error(l, "feature value", "a finite 32-bit float", r, t, end);
            return LINE_SHAPE;
        }
        if (saga_text_skip_blank(&p, end)) {
            *st = saga_parse_error(SAGA_ERR_PARSE, l,
                                   "expected \"vertex feature [value]\", found an extra \"%s\"",
                                   saga_text_token(p, end, tok, sizeof tok));
            return LINE_SHAPE;
        }
    }
    int32_t v;
    if ((*st = map_vertex(&v, l, o->graph, id, "vertex")) < 0)
        return LINE_ERROR;
    if (o->n_cols > 0 && feat >= o->n_cols) {
        *st = saga_parse_error(SAGA_ERR_PARSE, l,
                               "feature index %lld is outside 0..%lld (n_cols = %lld)",
                               (long long)feat, (long long)o->n_cols - 1, (long long)o->n_cols);
        return LINE_ERROR;
    }
    if (feat >= INT32_MAX) {
        *st = saga_parse_error(SAGA_ERR_PARSE, l, "feature index %lld is too large (at most %d)",
                               (long long)feat, (int)INT32_MAX - 1);
        return LINE_ERROR;
    }
    if ((*st = reserve((void **)&a->row, &(int64_t){a->cap}, a->n + 1, sizeof *a->row,
                       "sparse feature rows")) < 0 ||
        (*st = reserve((void **)&a->col, &(int64_t){a->cap}, a->n + 1, sizeof *a->col,
                       "sparse feature columns")) < 0 ||
        (*st = reserve((void **)&a->val, &a->cap, a->n + 1, sizeof *a->val,
                       "sparse feature values")) < 0)
        return LINE_ERROR;
    a->row[a->n] = v;
    a->col[a->n] = (int32_t)feat;
    a->val[a->n] = val;
    a->n++;
    if (v > a->max_row)
        a->max_row = v;
    if (feat > a->max_col)
        a->max_col = feat;
    return LINE_OK;
}

/* Appends the line as a dense row; every row must be as wide as the first (or n_cols). */
static saga_status dense_line(dense_acc *a, const saga_lines *l, const char *p, const char *end,
                              const saga_features_opts *o) {
    saga_status st = SAGA_OK;
    int64_t start = a->n_vals;
    int64_t width = 0;
    if (o->graph && a->rows == saga_graph_n_vertices(o->graph))
        return saga_parse_error(SAGA_ERR_PARSE, l, "more feature rows than the graph's %d vertices",
                                (int)saga_graph_n_vertices(o->graph));
    while (saga_text_skip_blank(&p, end)) {
        const char *t = p;
        float x;
        saga_text_result r = scan_float(&p, end, &x);
        if (r != SAGA_TEXT_OK) {
            char what[64];
            snprintf(what, sizeof what, "value %lld of row %lld", (long long)width + 1,
                     (long long)a->rows + 1);
            st = saga_parse_token_error(l, what, "a finite 32-bit float", r, t, end);
            goto fail;
        }
        if (a->rows > 0 && width == a->width) {
            st = saga_parse_error(SAGA_ERR_PARSE, l,
                                  "row has more than %lld values; rows must all be as wide as "
                                  "the first (line %lld)",
                                  (long long)a->width, (long long)a->width_line);
            goto fail;
        }
        SAGA_TRY(reserve((void **)&a->v, &a->cap, a->n_vals + 1, sizeof *a->v, "dense features"));
        a->v[a->n_vals++] = x;
        width++;
    }
    if (a->rows == 0) {
        if (o->n_cols > 0 && width != o->n_cols) {
            st = saga_parse_error(SAGA_ERR_PARSE, l, "row has %lld values, expected n_cols = %lld",
                                  (long long)width, (long long)o->n_cols);
            goto fail;
        }
        a->width = width;
        a->width_line = saga_lines_number(l);
    } else if (width != a->width) {
        st = saga_parse_error(SAGA_ERR_PARSE, l,
                              "row has %lld values, the first row (line %lld) has %lld",
                              (long long)width, (long long)a->width_line, (long long)a->width);
        goto fail;
    }
    if (a->rows == INT32_MAX) {
        st = saga_parse_error(SAGA_ERR_PARSE, l, "more than %d feature rows", (int)INT32_MAX);
        goto fail;
    }
    a->rows++;
    return SAGA_OK;
fail:
    a->n_vals = start;
    return st;
}

/* Copies the thread's error message so that a later, more relevant one can take its place. */
typedef struct deferred {
    saga_status st;
    char msg[512];
} deferred;

static void defer(deferred *d, saga_status st) {
    if (d->st < 0)
        return;
    d->st = st;
    snprintf(d->msg, sizeof d->msg, "%s", saga_last_error());
}

static saga_status raise(const deferred *d) {
    return saga_error(d->st, "%s", d->msg);
}

/* The CSR of the triples: rows in vertex order, each row's columns increasing (a counting sort
 * by row keeps the file's order within a row, then each row is sorted). A (vertex, feature)
 * listed twice is an error. */
static saga_status sparse_finish(saga_features *out, const sparse_acc *a, const saga_lines *l,
                                 const saga_features_opts *o) {
    saga_status st = SAGA_OK;
    int64_t *off = NULL;
    int32_t *idx = NULL;
    float *val = NULL;
    int64_t rows = o->graph ? saga_graph_n_vertices(o->graph) : a->max_row + 1;
    int64_t cols = o->n_cols > 0 ? o->n_cols : a->max_col + 1;
    size_t nz = a->n ? (size_t)a->n : 1;
    SAGA_TRY(saga_alloc_zeroed((void **)&off, (size_t)rows + 2, sizeof *off, "feature offsets"));
    SAGA_TRY(saga_alloc_array((void **)&idx, nz, sizeof *idx, "feature columns"));
    SAGA_TRY(saga_alloc_array((void **)&val, nz, sizeof *val, "feature values"));
    for (int64_t k = 0; k < a->n; k++)
        off[a->row[k] + 2]++;
    for (int64_t r = 0; r < rows; r++)
        off[r + 2] += off[r + 1];
    for (int64_t k = 0; k < a->n; k++) {
        int64_t q = off[a->row[k] + 1]++;
        idx[q] = a->col[k];
        val[q] = a->val[k];
    }
    /* off[r + 1] is now the end of row r: off[0 .. rows] are the offsets */
    for (int64_t r = 0; r < rows; r++) {
        /* rows are a few dozen entries: an insertion sort, stable */
        for (int64_t k = off[r] + 1; k < off[r + 1]; k++) {
            int32_t c = idx[k];
            float v = val[k];
            int64_t j = k;
            for (; j > off[r] && idx[j - 1] > c; j--) {
                idx[j] = idx[j - 1];
                val[j] = val[j - 1];
            }
            idx[j] = c;
            val[j] = v;
        }
        for (int64_t k = off[r] + 1; k < off[r + 1]; k++)
            if (idx[k] == idx[k - 1]) {
                st = saga_error(
                    SAGA_ERR_PARSE, "%s: feature %d of vertex %lld is listed twice",
                    saga_lines_name(l), (int)idx[k],
                    (long long)(o->graph ? saga_graph_orig_id(o->graph, (int32_t)r) : r));
                goto fail;
            }
    }
    memset(out, 0, sizeof *out);
    out->n_rows = rows;
    out->n_cols = cols;
    out->nnz = a->n;
    out->offsets = off;
    out->indices = idx;
    out->values = val;
    return SAGA_OK;
fail:
    saga_free(off);
    saga_free(idx);
    saga_free(val);
    return st;
}

void saga_features_free(saga_features *f) {
    if (!f)
        return;
    saga_free(f->dense);
    saga_free(f->offsets);
    saga_free(f->indices);
    saga_free(f->values);
    memset(f, 0, sizeof *f);
}

saga_status saga_features_densify(saga_features *f) {
    saga_status st = SAGA_OK;
    float *x = NULL;
    SAGA_CHECK(f, SAGA_ERR_INVALID_ARG, "saga_features_densify: NULL features");
    if (f->dense)
        return SAGA_OK;
    SAGA_CHECK(f->n_cols == 0 || f->n_rows <= INT64_MAX / f->n_cols, SAGA_ERR_OUT_OF_MEMORY,
               "a %lld x %lld feature matrix is too large", (long long)f->n_rows,
               (long long)f->n_cols);
    int64_t cells = f->n_rows * f->n_cols;
    SAGA_TRY(
        saga_alloc_zeroed((void **)&x, (size_t)(cells ? cells : 1), sizeof *x, "feature matrix"));
    for (int64_t r = 0; r < f->n_rows; r++)
        for (int64_t k = f->offsets[r]; k < f->offsets[r + 1]; k++)
            x[r * f->n_cols + f->indices[k]] = f->values[k];
    int64_t rows = f->n_rows, cols = f->n_cols;
    saga_features_free(f);
    f->n_rows = rows;
    f->n_cols = cols;
    f->dense = x;
fail:
    return st;
}

saga_features_norm saga_features_normalize_rows(saga_features *f) {
    int64_t n_norm = 0, n_signed = 0;
    if (f->dense) {
        int64_t F = f->n_cols;
#pragma omp parallel for schedule(static) reduction(+ : n_norm, n_signed)
        for (int64_t v = 0; v < f->n_rows; v++) {
            float *row = f->dense + v * F;
            double s = 0;
            bool negative = false;
            for (int64_t j = 0; j < F; j++) {
                s += row[j];
                negative |= row[j] < 0;
            }
            if (negative) {
                n_signed++;
            } else if (s != 0) {
                float inv = (float)(1.0 / s);
                for (int64_t j = 0; j < F; j++)
                    row[j] *= inv;
                n_norm++;
            }
        }
    } else {
        /* the same sums in the same order as the dense loop's, whose zeros add nothing */
#pragma omp parallel for schedule(static) reduction(+ : n_norm, n_signed)
        for (int64_t v = 0; v < f->n_rows; v++) {
            double s = 0;
            bool negative = false;
            for (int64_t k = f->offsets[v]; k < f->offsets[v + 1]; k++) {
                s += f->values[k];
                negative |= f->values[k] < 0;
            }
            if (negative) {
                n_signed++;
            } else if (s != 0) {
                float inv = (float)(1.0 / s);
                for (int64_t k = f->offsets[v]; k < f->offsets[v + 1]; k++)
                    f->values[k] *= inv;
                n_norm++;
            }
        }
    }
    return (saga_features_norm){
        .n_normalized = n_norm, .n_signed = n_signed, .n_zero = f->n_rows - n_norm - n_signed};
}

saga_status saga_features_parse_any(saga_features *out, saga_reader *r,
                                    const saga_features_opts *opts) {
    saga_status st = SAGA_OK;
    saga_lines *l = NULL;
    sparse_acc sp = {.max_row = -1, .max_col = -1};
    dense_acc de = {0};
    deferred sparse_err = {0}, dense_err = {0};
    saga_features_opts defaults = saga_features_opts_defaults();
    const char *line;
    size_t len;
    if (!opts)
        opts = &defaults;
    SAGA_CHECK(opts->layout >= 0 && opts->layout < SAGA_FEATURES_LAYOUT_COUNT, SAGA_ERR_INVALID_ARG,
               "unknown features layout %d", (int)opts->layout);
    SAGA_CHECK(opts->n_cols >= 0, SAGA_ERR_INVALID_ARG, "n_cols must be >= 0, got %lld",
               (long long)opts->n_cols);
    /* The iterator owns r from here on, even when opening it fails. */
    st = saga_lines_open(&l, r);
    r = NULL;
    if (st < 0)
        goto fail;

    /* AUTO follows both readings until one fails: the file is sparse when every line has the
     * sparse shape, else dense. An error that is not about shape (an unknown vertex, a row of
     * the wrong width) is kept for when its reading turns out to be the one chosen. */
    bool want_sparse = opts->layout != SAGA_FEATURES_DENSE;
    bool want_dense = opts->layout != SAGA_FEATURES_SPARSE;
    bool sparse_shape = want_sparse;
    for (;;) {
        SAGA_TRY(saga_lines_next(l, &line, &len));
        if (!line)
            break;
        const char *end = line + len;
        if (!is_data_line(line, end))
            continue;
        if (sparse_shape && sparse_err.st == SAGA_OK) {
            line_result lr = sparse_line(&sp, &st, l, line, end, opts);
            if (lr != LINE_OK &&
                (opts->layout == SAGA_FEATURES_SPARSE || st == SAGA_ERR_OUT_OF_MEMORY))
                goto fail;
            if (lr == LINE_SHAPE)
                sparse_shape = false;
            else if (lr == LINE_ERROR)
                defer(&sparse_err, st);
            st = SAGA_OK;
        } else if (sparse_shape) {
            /* A sparse error is already pending; only the shape still matters. */
            const char *p = line;
            int64_t a, b;
            float v;
            saga_text_skip_blank(&p, end);
            bool shaped = saga_text_u63(&p, end, &a) == SAGA_TEXT_OK &&
                          saga_text_skip_blank(&p, end) &&
                          saga_text_u63(&p, end, &b) == SAGA_TEXT_OK;
            if (shaped && saga_text_skip_blank(&p, end))
                shaped = scan_float(&p, end, &v) == SAGA_TEXT_OK && !saga_text_skip_blank(&p, end);
            sparse_shape = shaped;
        }
        if (want_dense && dense_err.st == SAGA_OK) {
            st = dense_line(&de, l, line, end, opts);
            if (st < 0 && (opts->layout == SAGA_FEATURES_DENSE || st == SAGA_ERR_OUT_OF_MEMORY))
                goto fail;
            if (st < 0) {
                defer(&dense_err, st);
                saga_free(de.v);
                de.v = NULL;
                de.cap = de.n_vals = 0;
            }
            st = SAGA_OK;
        }
        if (!sparse_shape) {
            /* The reading left is dense; free what the sparse one held. */
            saga_free(sp.row);
            saga_free(sp.col);
            saga_free(sp.val);
            sp.row = sp.col = NULL;
            sp.val = NULL;
            sp.n = sp.cap = 0;
            if (dense_err.st < 0) {
                st = raise(&dense_err);
                goto fail;
            }
        }
    }

    if (sparse_shape) {
        if (sparse_err.st < 0) {
            st = raise(&sparse_err);
            goto fail;
        }
        SAGA_TRY(sparse_finish(out, &sp, l, opts));
    } else {
        if (opts->graph && de.rows != saga_graph_n_vertices(opts->graph)) {
            st = saga_error(SAGA_ERR_PARSE, "%s: %lld feature rows, the graph has %d vertices",
                            saga_lines_name(l), (long long)de.rows,
                            (int)saga_graph_n_vertices(opts->graph));
            goto fail;
        }
        if (!de.v) /* no rows at all */
            SAGA_TRY(saga_alloc_array((void **)&de.v, 1, sizeof *de.v, "dense features"));
        memset(out, 0, sizeof *out);
        out->dense = de.v;
        out->n_rows = de.rows;
        out->n_cols = de.rows ? de.width : (opts->n_cols > 0 ? opts->n_cols : 0);
        de.v = NULL;
    }
    st = SAGA_OK;
fail:
    saga_free(sp.row);
    saga_free(sp.col);
    saga_free(sp.val);
    saga_free(de.v);
    saga_lines_close(&l);
    saga_reader_close(&r);
    return st;
}

saga_status saga_features_parse(float **out, int64_t *n_rows, int64_t *n_cols, saga_reader *r,
                                const saga_features_opts *opts) {
    saga_status st = SAGA_OK;
    saga_features f = {0};
    SAGA_TRY(saga_features_parse_any(&f, r, opts));
    SAGA_TRY(saga_features_densify(&f));
    *out = f.dense;
    *n_rows = f.n_rows;
    *n_cols = f.n_cols;
    return SAGA_OK;
fail:
    saga_features_free(&f);
    return st;
}

saga_status saga_features_read(float **out, int64_t *n_rows, int64_t *n_cols, const char *path,
                               const saga_features_opts *opts) {
    saga_status st = SAGA_OK;
    saga_reader *r = NULL;
    SAGA_TRY(saga_reader_open(&r, path));
    return saga_features_parse(out, n_rows, n_cols, r, opts);
fail:
    return st;
}

saga_status saga_features_load(saga_features *out, const char *path,
                               const saga_features_opts *opts) {
    saga_status st = SAGA_OK;
    saga_reader *r = NULL;
    SAGA_CHECK(out, SAGA_ERR_INVALID_ARG, "saga_features_load: NULL output");
    SAGA_TRY(saga_reader_open(&r, path));
    return saga_features_parse_any(out, r, opts);
fail:
    return st;
}

/* ---- labels --------------------------------------------------------------------------------- */

/* Grows the label array (and its seen flags) to n entries, new ones unlabelled. */
static saga_status labels_extend(int32_t **lab, uint8_t **seen, int64_t *cap, int64_t *n,
                                 int64_t need) {
    saga_status st = SAGA_OK;
    if (need > *cap) {
        int64_t c = *cap + *cap / 2 + 64;
        if (c < need)
            c = need;
        SAGA_TRY(saga_realloc_array((void **)lab, (size_t)c, sizeof **lab, "labels"));
        if (seen)
            SAGA_TRY(saga_realloc_array((void **)seen, (size_t)c, 1, "label flags"));
        *cap = c;
    }
    for (int64_t k = *n; k < need; k++) {
        (*lab)[k] = -1;
        if (seen)
            (*seen)[k] = 0;
    }
    if (need > *n)
        *n = need;
fail:
    return st;
}

static saga_status parse_label(int32_t *out, const saga_lines *l, const char **p, const char *end) {
    saga_text_skip_blank(p, end);
    const char *t = *p;
    int64_t v;
    saga_text_result r = saga_text_i64(p, end, &v);
    if (r != SAGA_TEXT_OK)
        return saga_parse_token_error(l, "label", "an integer class (-1 for none)", r, t, end);
    if (v < -1 || v > INT32_MAX)
        return saga_parse_error(SAGA_ERR_PARSE, l,
                                "label %lld is invalid (expected a class >= 0, or -1 for none)",
                                (long long)v);
    *out = (int32_t)v;
    return SAGA_OK;
}

saga_status saga_labels_parse(int32_t **out, int64_t *n, saga_reader *r, const saga_graph *graph) {
    saga_status st = SAGA_OK;
    saga_lines *l = NULL;
    int32_t *lab = NULL;
    uint8_t *seen = NULL;
    int64_t cap = 0, count = 0;
    int64_t pending_blank = 0; /* blank lines not yet known to be inside the list */
    int64_t filled = 0;        /* vertices given so far by a one-label-per-line file */
    int mode = 0;              /* 1: one label per line, 2: "vertex label" pairs */
    int64_t mode_line = 0;
    int64_t nv = graph ? saga_graph_n_vertices(graph) : -1;
    const char *line;
    size_t len;
    char tok[48];
    /* The iterator owns r from here on, even when opening it fails. */
    st = saga_lines_open(&l, r);
    r = NULL;
    if (st < 0)
        goto fail;
    if (graph) {
        SAGA_TRY(labels_extend(&lab, NULL, &cap, &count, nv));
        SAGA_TRY(saga_alloc_zeroed((void **)&seen, (size_t)nv + 1, 1, "label flags"));
    }

    for (;;) {
        SAGA_TRY(saga_lines_next(l, &line, &len));
        if (!line)
            break;
        const char *p = line, *end = line + len;
        if (saga_parse_is_comment(p, end, COMMENT_CHARS))
            continue;
        if (saga_parse_is_blank(p, end)) {
            pending_blank++;
            continue;
        }
        if (mode == 0) {
            /* The first data line decides the layout. */
            int words = 0;
            const char *q = p;
            while (saga_text_skip_blank(&q, end)) {
                words++;
                while (q < end && *q != ' ' && *q != '\t' && *q != '\r' && *q != '\v' && *q != '\f')
                    q++;
            }
            if (words != 1 && words != 2) {
                st = saga_parse_error(SAGA_ERR_PARSE, l,
                                      "expected \"label\" or \"vertex label\", found %d values",
                                      words);
                goto fail;
            }
            mode = words;
            mode_line = saga_lines_number(l);
        }
        if (mode == 1) {
            /* Blank lines inside the list are vertices without a label. */
            int32_t label = -1;
            SAGA_TRY(parse_label(&label, l, &p, end));
            int64_t v = filled + pending_blank;
            if (graph && v >= nv) {
                st = saga_parse_error(SAGA_ERR_PARSE, l,
                                      "more labels than the graph's %lld vertices", (long long)nv);
                goto fail;
            }
            if (!graph) {
                SAGA_CHECK(v < INT32_MAX, SAGA_ERR_PARSE, "%s:%lld: more than %d labels",
                           saga_lines_name(l), (long long)saga_lines_number(l), (int)INT32_MAX);
                SAGA_TRY(labels_extend(&lab, NULL, &cap, &count, v + 1));
            }
            lab[v] = label;
            filled = v + 1;
        } else {
            const char *t = (saga_text_skip_blank(&p, end), p);
            int64_t id;
            saga_text_result tr = saga_text_u63(&p, end, &id);
            if (tr != SAGA_TEXT_OK) {
                st = saga_parse_token_error(l, "vertex", "\"vertex label\"", tr, t, end);
                goto fail;
            }
            if (!saga_text_skip_blank(&p, end)) {
                st = saga_parse_error(SAGA_ERR_PARSE, l,
                                      "expected \"vertex label\" like line %lld, found one value",
                                      (long long)mode_line);
                goto fail;
            }
            int32_t v = 0, label = -1;
            SAGA_TRY(map_vertex(&v, l, graph, id, "vertex"));
            SAGA_TRY(parse_label(&label, l, &p, end));
            if (!graph) {
                SAGA_TRY(labels_extend(&lab, &seen, &cap, &count, (int64_t)v + 1));
            }
            if (seen[v]) {
                st = saga_parse_error(SAGA_ERR_PARSE, l, "vertex %lld is labelled twice",
                                      (long long)id);
                goto fail;
            }
            seen[v] = 1;
            lab[v] = label;
        }
        if (saga_text_skip_blank(&p, end)) {
            st = saga_parse_error(SAGA_ERR_PARSE, l,
                                  "expected %s like line %lld, found an "
                                  "extra \"%s\"",
                                  mode == 1 ? "one label" : "\"vertex label\"",
                                  (long long)mode_line, saga_text_token(p, end, tok, sizeof tok));
            goto fail;
        }
        pending_blank = 0;
    }
    /* Trailing blank lines may stand for the last, unlabelled vertices of the graph. */
    if (graph && mode == 1 && filled + pending_blank < nv) {
        st = saga_error(SAGA_ERR_PARSE, "%s: labels for %lld vertices, the graph has %lld",
                        saga_lines_name(l), (long long)(filled + pending_blank), (long long)nv);
        goto fail;
    }
    if (!lab) /* an empty file and no graph */
        SAGA_TRY(saga_alloc_array((void **)&lab, 1, sizeof *lab, "labels"));
    *out = lab;
    *n = count;
    lab = NULL;
fail:
    saga_free(lab);
    saga_free(seen);
    saga_lines_close(&l);
    saga_reader_close(&r);
    return st;
}

saga_status saga_labels_read(int32_t **out, int64_t *n, const char *path, const saga_graph *graph) {
    saga_status st = SAGA_OK;
    saga_reader *r = NULL;
    SAGA_TRY(saga_reader_open(&r, path));
    return saga_labels_parse(out, n, r, graph);
fail:
    return st;
}

/* ---- index lists ---------------------------------------------------------------------------- */

saga_status saga_index_parse(int32_t **out, int64_t *n, saga_reader *r, const saga_graph *graph) {
    saga_status st = SAGA_OK;
    saga_lines *l = NULL;
    int32_t *idx = NULL;
    int64_t count = 0, cap = 0;
    const char *line;
    size_t len;
    char tok[48];
    /* The iterator owns r from here on, even when opening it fails. */
    st = saga_lines_open(&l, r);
    r = NULL;
    if (st < 0)
        goto fail;
    for (;;) {
        SAGA_TRY(saga_lines_next(l, &line, &len));
        if (!line)
            break;
        const char *p = line, *end = line + len;
        if (!is_data_line(p, end))
            continue;
        saga_text_skip_blank(&p, end);
        const char *t = p;
        int64_t id;
        saga_text_result tr = saga_text_u63(&p, end, &id);
        if (tr != SAGA_TEXT_OK) {
            st = saga_parse_token_error(l, "vertex", "one vertex id per line", tr, t, end);
            goto fail;
        }
        if (saga_text_skip_blank(&p, end)) {
            st = saga_parse_error(SAGA_ERR_PARSE, l,
                                  "expected one vertex id per line, found an extra \"%s\"",
                                  saga_text_token(p, end, tok, sizeof tok));
            goto fail;
        }
        int32_t v;
        SAGA_TRY(map_vertex(&v, l, graph, id, "vertex"));
        SAGA_TRY(reserve((void **)&idx, &cap, count + 1, sizeof *idx, "vertex index list"));
        idx[count++] = v;
    }
    if (!idx)
        SAGA_TRY(saga_alloc_array((void **)&idx, 1, sizeof *idx, "vertex index list"));
    *out = idx;
    *n = count;
    idx = NULL;
fail:
    saga_free(idx);
    saga_lines_close(&l);
    saga_reader_close(&r);
    return st;
}

saga_status saga_index_read(int32_t **out, int64_t *n, const char *path, const saga_graph *graph) {
    saga_status st = SAGA_OK;
    saga_reader *r = NULL;
    SAGA_TRY(saga_reader_open(&r, path));
    return saga_index_parse(out, n, r, graph);
fail:
    return st;
}
