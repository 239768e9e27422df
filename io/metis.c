/* metis.c - METIS graph files: a header "n m [fmt [ncon]]", then line i+1 lists the 1-based
 * neighbours of vertex i. Each listed neighbour becomes one arc, so the undirected graph of
 * METIS arrives with both arcs of every edge (2m in all). */
#include "parse_util.h"
#include "parsers.h"

#include <stdio.h>

typedef struct metis_header {
    int64_t n, m;
    bool vsize, vweights, eweights; /* fmt digits: 100, 010, 001 */
    int64_t ncon;                   /* vertex weights per vertex when vweights */
    int64_t line;
} metis_header;

static saga_status parse_header(metis_header *h, const saga_lines *l, const char *p,
                                const char *end) {
    char tok[48];
    const char *t;
    saga_text_result r;
    saga_text_skip_blank(&p, end);
    t = p;
    if ((r = saga_text_u63(&p, end, &h->n)) != SAGA_TEXT_OK)
        return saga_parse_token_error(l, "vertex count", "\"n m [fmt [ncon]]\"", r, t, end);
    saga_text_skip_blank(&p, end);
    t = p;
    if ((r = saga_text_u63(&p, end, &h->m)) != SAGA_TEXT_OK)
        return saga_parse_token_error(l, "edge count", "\"n m [fmt [ncon]]\"", r, t, end);
    if (h->n > INT32_MAX)
        return saga_parse_error(SAGA_ERR_UNSUPPORTED, l,
                                "%lld vertices is more than saga supports (%d)", (long long)h->n,
                                (int)INT32_MAX);
    if (h->m > INT64_MAX / 2)
        return saga_parse_error(SAGA_ERR_PARSE, l, "edge count %lld is too large", (long long)h->m);
    h->ncon = 1;
    h->line = saga_lines_number(l);
    if (!saga_text_skip_blank(&p, end))
        return SAGA_OK;

    /* fmt is written as up to three digits, each 0 or 1: vertex sizes, vertex weights, edge
     * weights (so "1" and "001" both mean edge weights). */
    t = p;
    const char *fmt_tok = t;
    size_t nd = 0;
    while (p < end && *p != ' ' && *p != '\t' && *p != '\r' && *p != '\v' && *p != '\f') {
        p++;
        nd++;
    }
    bool ok = nd >= 1 && nd <= 3;
    for (size_t k = 0; ok && k < nd; k++)
        ok = t[k] == '0' || t[k] == '1';
    if (!ok)
        return saga_parse_error(SAGA_ERR_PARSE, l,
                                "fmt \"%s\" must be up to 3 digits, each 0 or 1 (vertex sizes, "
                                "vertex weights, edge weights)",
                                saga_text_token(t, end, tok, sizeof tok));
    h->eweights = t[nd - 1] == '1';
    h->vweights = nd >= 2 && t[nd - 2] == '1';
    h->vsize = nd == 3 && t[0] == '1';
    if (!saga_text_skip_blank(&p, end))
        return SAGA_OK;

    t = p;
    int64_t ncon;
    if ((r = saga_text_u63(&p, end, &ncon)) != SAGA_TEXT_OK)
        return saga_parse_token_error(l, "ncon", "the number of vertex weights", r, t, end);
    if (ncon > 0 && !h->vweights)
        return saga_parse_error(SAGA_ERR_PARSE, l,
                                "ncon = %lld but fmt \"%.*s\" has no vertex weights (use 010 or "
                                "011)",
                                (long long)ncon, (int)nd, fmt_tok);
    h->ncon = ncon > 0 ? ncon : 1;
    if (saga_text_skip_blank(&p, end))
        return saga_parse_error(SAGA_ERR_PARSE, l,
                                "expected \"n m [fmt [ncon]]\", found an extra \"%s\"",
                                saga_text_token(p, end, tok, sizeof tok));
    return SAGA_OK;
}

/* Vertex sizes and weights are checked (non-negative integers, as METIS requires) and then
 * dropped: a saga graph has no vertex weights; partitioning computes its own. */
static saga_status skip_vertex_numbers(const saga_lines *l, const char **p, const char *end,
                                       const metis_header *h, int64_t v) {
    char what[64];
    int64_t count = (h->vsize ? 1 : 0) + (h->vweights ? h->ncon : 0);
    for (int64_t k = 0; k < count; k++) {
        bool is_size = h->vsize && k == 0;
        if (is_size)
            snprintf(what, sizeof what, "size of vertex %lld", (long long)v + 1);
        else
            snprintf(what, sizeof what, "weight %lld of vertex %lld",
                     (long long)(k - (h->vsize ? 1 : 0) + 1), (long long)v + 1);
        saga_text_skip_blank(p, end);
        const char *t = *p;
        int64_t x;
        saga_text_result r = saga_text_u63(p, end, &x);
        if (r != SAGA_TEXT_OK)
            return saga_parse_token_error(l, what, "a non-negative integer", r, t, end);
    }
    return SAGA_OK;
}

saga_status saga_metis_parse(saga_graph **out, saga_reader *r, const saga_load_opts *opts) {
    saga_status st = SAGA_OK;
    saga_lines *l = NULL;
    saga_edge_buf edges = {0};
    saga_load_opts defaults = {.graph = saga_graph_opts_defaults()};
    metis_header h = {0};
    const char *line;
    size_t len;
    if (!opts)
        opts = &defaults;
    uint64_t src_bytes = saga_reader_is_gzip(r) ? 0 : saga_reader_source_size(r);
    /* The iterator owns r from here on, even when opening it fails. */
    st = saga_lines_open(&l, r);
    r = NULL;
    if (st < 0)
        goto fail;

    for (;;) {
        SAGA_TRY(saga_lines_next(l, &line, &len));
        SAGA_CHECK(line, SAGA_ERR_PARSE, "%s: no header; expected \"n m [fmt [ncon]]\"",
                   saga_lines_name(l));
        if (!saga_parse_is_comment(line, line + len, "%") && !saga_parse_is_blank(line, line + len))
            break;
    }
    SAGA_TRY(parse_header(&h, l, line, line + len));
    SAGA_CHECK(h.eweights || opts->weights != SAGA_WEIGHTS_REQUIRE, SAGA_ERR_PARSE,
               "%s: weights are required but the header (line %lld) declares no edge weights",
               saga_lines_name(l), (long long)h.line);
    bool keep_w = h.eweights && opts->weights != SAGA_WEIGHTS_IGNORE;
    /* " 1" is the shortest adjacency entry. */
    SAGA_TRY(saga_edge_buf_init(&edges, saga_parse_cap_hint(2 * h.m, src_bytes, 2), keep_w));

    int64_t entries = 0;
    for (int64_t v = 0; v < h.n; v++) {
        /* A blank line is a vertex without neighbours; only '%' lines are skipped. */
        do {
            SAGA_TRY(saga_lines_next(l, &line, &len));
            SAGA_CHECK(line, SAGA_ERR_PARSE,
                       "%s: found %lld vertex lines, the header (line %lld) declares %lld "
                       "vertices",
                       saga_lines_name(l), (long long)v, (long long)h.line, (long long)h.n);
        } while (saga_parse_is_comment(line, line + len, "%"));
        const char *p = line, *end = line + len;
        SAGA_TRY(skip_vertex_numbers(l, &p, end, &h, v));
        while (saga_text_skip_blank(&p, end)) {
            const char *t = p;
            int64_t u;
            saga_text_result tr = saga_text_u63(&p, end, &u);
            if (tr != SAGA_TEXT_OK) {
                st = saga_parse_token_error(l, "neighbour", "a vertex number", tr, t, end);
                goto fail;
            }
            if (u < 1 || u > h.n) {
                st = saga_parse_error(SAGA_ERR_PARSE, l,
                                      "neighbour %lld of vertex %lld is outside 1..%lld",
                                      (long long)u, (long long)v + 1, (long long)h.n);
                goto fail;
            }
            if (u == v + 1) {
                st = saga_parse_error(SAGA_ERR_PARSE, l,
                                      "vertex %lld lists itself; METIS graphs have no self-loops",
                                      (long long)u);
                goto fail;
            }
            float w = 1.0f;
            if (h.eweights) {
                int64_t x;
                saga_text_skip_blank(&p, end);
                t = p;
                tr = saga_text_i64(&p, end, &x);
                if (tr != SAGA_TEXT_OK) {
                    st = saga_parse_token_error(l, "edge weight",
                                                "a positive integer after "
                                                "each neighbour (fmt has edge weights)",
                                                tr, t, end);
                    goto fail;
                }
                if (x <= 0) {
                    st = saga_parse_error(SAGA_ERR_PARSE, l,
                                          "weight %lld of edge %lld-%lld must be positive",
                                          (long long)x, (long long)v + 1, (long long)u);
                    goto fail;
                }
                w = (float)x;
            }
            if (entries == 2 * h.m) {
                st = saga_parse_error(SAGA_ERR_PARSE, l,
                                      "more than the %lld adjacency entries that m = %lld edges "
                                      "(header, line %lld) allow",
                                      (long long)(2 * h.m), (long long)h.m, (long long)h.line);
                goto fail;
            }
            entries++;
            SAGA_TRY(saga_edge_buf_push(&edges, (int32_t)v, (int32_t)(u - 1), w));
        }
    }
    for (;;) {
        SAGA_TRY(saga_lines_next(l, &line, &len));
        if (!line)
            break;
        if (saga_parse_is_comment(line, line + len, "%") || saga_parse_is_blank(line, line + len))
            continue;
        st = saga_parse_error(SAGA_ERR_PARSE, l,
                              "more vertex lines than the %lld vertices the header (line %lld) "
                              "declares",
                              (long long)h.n, (long long)h.line);
        goto fail;
    }
    if (entries != 2 * h.m) {
        st = saga_error(SAGA_ERR_PARSE,
                        "%s: the adjacency lists hold %lld entries, but the header (line %lld) "
                        "declares m = %lld edges, which needs 2m = %lld (each edge listed at "
                        "both ends)",
                        saga_lines_name(l), (long long)entries, (long long)h.line, (long long)h.m,
                        (long long)(2 * h.m));
        goto fail;
    }
    saga_lines_close(&l);
    return saga_edge_buf_build(out, &edges, (int32_t)h.n, &opts->graph);

fail:
    saga_edge_buf_free(&edges);
    saga_lines_close(&l);
    saga_reader_close(&r);
    return st;
}

saga_status saga_metis_read(saga_graph **out, const char *path, const saga_load_opts *opts) {
    saga_status st = SAGA_OK;
    saga_reader *r = NULL;
    SAGA_TRY(saga_reader_open(&r, path));
    return saga_metis_parse(out, r, opts);
fail:
    return st;
}
