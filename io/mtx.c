/* mtx.c - Matrix Market coordinate files as graphs: entry (i, j) is the edge i -> j. */
#include "parse_util.h"
#include "parsers.h"

#include <float.h>
#include <math.h>
#include <string.h>
#include <strings.h>

#define BANNER_EXPECTED                                                                            \
    "expected the banner \"%%MatrixMarket matrix coordinate pattern|real|integer "                 \
    "general|symmetric\""

typedef enum mtx_field { MTX_PATTERN, MTX_REAL, MTX_INTEGER } mtx_field;

typedef struct mtx_header {
    mtx_field field;
    bool symmetric;
    int64_t rows, cols, nnz;
    int64_t size_line; /* where rows/cols/nnz were declared, for messages */
} mtx_header;

/* The next blank-separated word of [*p, end) as (start, length); false when none is left. */
static bool next_word(const char **p, const char *end, const char **w, size_t *n) {
    if (!saga_text_skip_blank(p, end))
        return false;
    *w = *p;
    while (*p < end && !(**p == ' ' || **p == '\t' || **p == '\r' || **p == '\v' || **p == '\f'))
        (*p)++;
    *n = (size_t)(*p - *w);
    return true;
}

static bool word_is(const char *w, size_t n, const char *s) {
    return n == strlen(s) && strncasecmp(w, s, n) == 0;
}

/* Parses "%%MatrixMarket matrix coordinate <field> <symmetry>". */
static saga_status parse_banner(mtx_header *h, const saga_lines *l, const char *p,
                                const char *end) {
    const char *w[5];
    size_t n[5];
    char tok[48];
    int count = 0;
    const char *q = p;
    while (count < 5 && next_word(&q, end, &w[count], &n[count]))
        count++;
    if (count == 0 || !word_is(w[0], n[0], "%%MatrixMarket"))
        return saga_parse_error(SAGA_ERR_PARSE, l, "%s, found \"%s\"", BANNER_EXPECTED,
                                saga_text_token(p, end, tok, sizeof tok));
    if (count < 5)
        return saga_parse_error(SAGA_ERR_PARSE, l, "banner has %d words; %s", count,
                                "expected \"%%MatrixMarket matrix coordinate <field> <symmetry>\"");
    if (saga_text_skip_blank(&q, end))
        return saga_parse_error(SAGA_ERR_PARSE, l, "unexpected \"%s\" after the banner's 5 words",
                                saga_text_token(q, end, tok, sizeof tok));
    if (!word_is(w[1], n[1], "matrix"))
        return saga_parse_error(SAGA_ERR_UNSUPPORTED, l,
                                "unsupported Matrix Market object \"%s\" (saga reads \"matrix\")",
                                saga_text_token(w[1], end, tok, sizeof tok));
    if (word_is(w[2], n[2], "array"))
        return saga_parse_error(SAGA_ERR_UNSUPPORTED, l,
                                "unsupported Matrix Market format \"array\" (a dense matrix); "
                                "a graph needs \"coordinate\"");
    if (!word_is(w[2], n[2], "coordinate"))
        return saga_parse_error(SAGA_ERR_PARSE, l,
                                "unknown Matrix Market format \"%s\" (expected \"coordinate\")",
                                saga_text_token(w[2], end, tok, sizeof tok));
    if (word_is(w[3], n[3], "pattern"))
        h->field = MTX_PATTERN;
    else if (word_is(w[3], n[3], "real") || word_is(w[3], n[3], "double"))
        h->field = MTX_REAL;
    else if (word_is(w[3], n[3], "integer"))
        h->field = MTX_INTEGER;
    else if (word_is(w[3], n[3], "complex"))
        return saga_parse_error(SAGA_ERR_UNSUPPORTED, l,
                                "unsupported Matrix Market field \"complex\" (saga reads "
                                "pattern, real and integer)");
    else
        return saga_parse_error(SAGA_ERR_PARSE, l,
                                "unknown Matrix Market field \"%s\" (expected pattern, real or "
                                "integer)",
                                saga_text_token(w[3], end, tok, sizeof tok));
    if (word_is(w[4], n[4], "general"))
        h->symmetric = false;
    else if (word_is(w[4], n[4], "symmetric"))
        h->symmetric = true;
    else if (word_is(w[4], n[4], "skew-symmetric") || word_is(w[4], n[4], "hermitian"))
        return saga_parse_error(SAGA_ERR_UNSUPPORTED, l,
                                "unsupported Matrix Market symmetry \"%s\" (saga reads general "
                                "and symmetric)",
                                saga_text_token(w[4], end, tok, sizeof tok));
    else
        return saga_parse_error(SAGA_ERR_PARSE, l,
                                "unknown Matrix Market symmetry \"%s\" (expected general or "
                                "symmetric)",
                                saga_text_token(w[4], end, tok, sizeof tok));
    return SAGA_OK;
}

static saga_status parse_size(mtx_header *h, const saga_lines *l, const char *p, const char *end) {
    static const char *const names[3] = {"row count", "column count", "entry count"};
    int64_t v[3];
    char tok[48];
    for (int k = 0; k < 3; k++) {
        saga_text_skip_blank(&p, end);
        const char *t = p;
        saga_text_result r = saga_text_u63(&p, end, &v[k]);
        if (r != SAGA_TEXT_OK)
            return saga_parse_token_error(l, names[k], "a non-negative integer", r, t, end);
    }
    if (saga_text_skip_blank(&p, end))
        return saga_parse_error(SAGA_ERR_PARSE, l,
                                "expected \"rows columns entries\", found an extra \"%s\"",
                                saga_text_token(p, end, tok, sizeof tok));
    if (v[0] != v[1])
        return saga_parse_error(SAGA_ERR_UNSUPPORTED, l,
                                "a graph needs a square matrix, this one is %lld x %lld",
                                (long long)v[0], (long long)v[1]);
    if (v[0] > INT32_MAX)
        return saga_parse_error(SAGA_ERR_UNSUPPORTED, l,
                                "%lld vertices is more than saga supports (%d)", (long long)v[0],
                                (int)INT32_MAX);
    /* A symmetric file can double its entries; keep that count representable. */
    if (h->symmetric && v[2] > INT64_MAX / 2)
        return saga_parse_error(SAGA_ERR_PARSE, l, "entry count %lld is too large",
                                (long long)v[2]);
    h->rows = v[0];
    h->cols = v[1];
    h->nnz = v[2];
    h->size_line = saga_lines_number(l);
    return SAGA_OK;
}

/* A 1-based index in 1..n, returned 0-based. */
static saga_status parse_index(int32_t *out, const saga_lines *l, const char **p, const char *end,
                               const char *what, int64_t n) {
    saga_text_skip_blank(p, end);
    const char *t = *p;
    int64_t v;
    saga_text_result r = saga_text_u63(p, end, &v);
    if (r != SAGA_TEXT_OK)
        return saga_parse_token_error(l, what, "an integer in 1..n", r, t, end);
    if (v < 1 || v > n)
        return saga_parse_error(SAGA_ERR_PARSE, l, "%s %lld is outside 1..%lld", what, (long long)v,
                                (long long)n);
    *out = (int32_t)(v - 1);
    return SAGA_OK;
}

static saga_status parse_value(float *out, const saga_lines *l, const char **p, const char *end,
                               mtx_field field) {
    saga_text_skip_blank(p, end);
    const char *t = *p;
    double d;
    saga_text_result r;
    if (field == MTX_INTEGER) {
        int64_t i;
        r = saga_text_i64(p, end, &i);
        if (r != SAGA_TEXT_OK)
            return saga_parse_token_error(l, "value", "an integer", r, t, end);
        d = (double)i;
    } else {
        r = saga_text_f64(p, end, &d);
        if (r != SAGA_TEXT_OK)
            return saga_parse_token_error(l, "value", "a real number", r, t, end);
    }
    if (fabs(d) > FLT_MAX) {
        char tok[48];
        return saga_parse_error(SAGA_ERR_PARSE, l, "value %s does not fit a 32-bit float",
                                saga_text_token(t, end, tok, sizeof tok));
    }
    *out = (float)d;
    return SAGA_OK;
}

saga_status saga_mtx_parse(saga_graph **out, saga_reader *r, const saga_load_opts *opts) {
    saga_status st = SAGA_OK;
    saga_lines *l = NULL;
    saga_edge_buf edges = {0};
    saga_load_opts defaults = {.graph = saga_graph_opts_defaults()};
    mtx_header h = {0};
    const char *line;
    size_t len;
    char tok[48];
    if (!opts)
        opts = &defaults;
    uint64_t src_bytes = saga_reader_is_gzip(r) ? 0 : saga_reader_source_size(r);
    /* The iterator owns r from here on, even when opening it fails. */
    st = saga_lines_open(&l, r);
    r = NULL;
    if (st < 0)
        goto fail;

    /* ---- banner, comments, size line ---- */
    SAGA_TRY(saga_lines_next(l, &line, &len));
    SAGA_CHECK(line, SAGA_ERR_PARSE, "%s: empty file; %s", saga_lines_name(l), BANNER_EXPECTED);
    SAGA_TRY(parse_banner(&h, l, line, line + len));
    for (;;) {
        SAGA_TRY(saga_lines_next(l, &line, &len));
        SAGA_CHECK(line, SAGA_ERR_PARSE,
                   "%s:%lld: file ends before the size line \"rows columns "
                   "entries\"",
                   saga_lines_name(l), (long long)saga_lines_number(l));
        if (!saga_parse_is_comment(line, line + len, "%") && !saga_parse_is_blank(line, line + len))
            break;
    }
    SAGA_TRY(parse_size(&h, l, line, line + len));
    if (h.field == MTX_PATTERN && opts->weights == SAGA_WEIGHTS_REQUIRE)
        SAGA_CHECK(false, SAGA_ERR_PARSE,
                   "%s: weights are required but the matrix is \"pattern\" (it has no values)",
                   saga_lines_name(l));
    bool keep_w = h.field != MTX_PATTERN && opts->weights != SAGA_WEIGHTS_IGNORE;
    int64_t arcs = h.symmetric ? 2 * h.nnz : h.nnz;
    /* "1 1\n" is the shortest entry. */
    SAGA_TRY(saga_edge_buf_init(&edges, saga_parse_cap_hint(arcs, src_bytes, h.symmetric ? 2 : 4),
                                keep_w));

    /* ---- entries ---- */
    int64_t seen = 0;
    for (;;) {
        SAGA_TRY(saga_lines_next(l, &line, &len));
        if (!line)
            break;
        const char *p = line, *end = line + len;
        if (saga_parse_is_comment(p, end, "%") || saga_parse_is_blank(p, end))
            continue;
        if (seen == h.nnz) {
            st = saga_parse_error(SAGA_ERR_PARSE, l,
                                  "more entries than the %lld declared on line %lld",
                                  (long long)h.nnz, (long long)h.size_line);
            goto fail;
        }
        int32_t i = 0, j = 0;
        float w = 1.0f;
        SAGA_TRY(parse_index(&i, l, &p, end, "row index", h.rows));
        SAGA_TRY(parse_index(&j, l, &p, end, "column index", h.cols));
        if (h.field != MTX_PATTERN) {
            if (!saga_text_skip_blank(&p, end)) {
                st = saga_parse_error(SAGA_ERR_PARSE, l,
                                      "expected \"row column value\", found no value");
                goto fail;
            }
            SAGA_TRY(parse_value(&w, l, &p, end, h.field));
        }
        if (saga_text_skip_blank(&p, end)) {
            st = saga_parse_error(SAGA_ERR_PARSE, l, "expected %s, found an extra \"%s\"",
                                  h.field == MTX_PATTERN ? "\"row column\" (the matrix is pattern)"
                                                         : "\"row column value\"",
                                  saga_text_token(p, end, tok, sizeof tok));
            goto fail;
        }
        seen++;
        SAGA_TRY(saga_edge_buf_push(&edges, i, j, w));
        /* The standard stores only the lower triangle of a symmetric matrix; an entry above
         * the diagonal is accepted as well and mirrored the same way. */
        if (h.symmetric && i != j)
            SAGA_TRY(saga_edge_buf_push(&edges, j, i, w));
    }
    if (seen != h.nnz) {
        st = saga_error(SAGA_ERR_PARSE, "%s: found %lld entries, line %lld declares %lld",
                        saga_lines_name(l), (long long)seen, (long long)h.size_line,
                        (long long)h.nnz);
        goto fail;
    }
    saga_lines_close(&l);
    return saga_edge_buf_build(out, &edges, (int32_t)h.rows, &opts->graph);

fail:
    saga_edge_buf_free(&edges);
    saga_lines_close(&l);
    saga_reader_close(&r);
    return st;
}

saga_status saga_mtx_read(saga_graph **out, const char *path, const saga_load_opts *opts) {
    saga_status st = SAGA_OK;
    saga_reader *r = NULL;
    SAGA_TRY(saga_reader_open(&r, path));
    return saga_mtx_parse(out, r, opts);
fail:
    return st;
}
