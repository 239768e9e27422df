/* parse_util.c - what the readers share: the loading options' defaults, line-located error
 * messages, token diagnostics and a growable edge buffer for the text parsers. Below the readers
 * and the dispatcher (load.c), which calls them; and the CRC-32 the binary formats check. */
#include "parse_util.h"
#include "saga_io.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

saga_load_opts saga_load_opts_defaults(void) {
    return (saga_load_opts){.format = SAGA_FORMAT_AUTO,
                            .weights = SAGA_WEIGHTS_AUTO,
                            .graph = saga_graph_opts_defaults(),
                            .self_loops_set = false};
}

saga_status saga_parse_error(saga_status code, const saga_lines *l, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return saga_error(code, "%s:%lld: %s", saga_lines_name(l), (long long)saga_lines_number(l),
                      msg);
}

const char *saga_parse_hint(const char *p, const char *end, int64_t line_no) {
    const char *q = p;
    saga_text_skip_blank(&q, end);
    if (line_no == 1 && end - q >= 3 && memcmp(q, "\xEF\xBB\xBF", 3) == 0)
        return "; the file starts with a UTF-8 byte-order mark (bytes EF BB BF), which saga does "
               "not read: save the file without it";
    if (memchr(q, ',', (size_t)(end - q)))
        return "; commas are not separators here: separate the columns with spaces or tabs (a "
               "comma-separated file can be converted with tr ',' ' ')";
    return "";
}

saga_status saga_parse_token_error(const saga_lines *l, const char *what, const char *kind,
                                   saga_text_result r, const char *tok, const char *end) {
    char buf[48];
    saga_text_token(tok, end, buf, sizeof buf);
    const char *hint = r == SAGA_TEXT_EMPTY || r == SAGA_TEXT_INVALID
                           ? saga_parse_hint(tok, end, saga_lines_number(l))
                           : "";
    switch (r) {
    case SAGA_TEXT_EMPTY:
        return saga_parse_error(SAGA_ERR_PARSE, l, "missing %s (expected %s)%s", what, kind, hint);
    case SAGA_TEXT_OVERFLOW:
        return saga_parse_error(SAGA_ERR_PARSE, l, "%s \"%s\" is too large", what, buf);
    case SAGA_TEXT_NEGATIVE:
        return saga_parse_error(SAGA_ERR_PARSE, l, "%s \"%s\" is negative (expected %s)", what, buf,
                                kind);
    case SAGA_TEXT_NONFINITE:
        return saga_parse_error(SAGA_ERR_PARSE, l, "%s \"%s\" is not finite", what, buf);
    default:
        return saga_parse_error(SAGA_ERR_PARSE, l, "expected %s as %s, found \"%s\"%s", kind, what,
                                buf, hint);
    }
}

bool saga_parse_is_blank(const char *p, const char *end) {
    return !saga_text_skip_blank(&p, end);
}

bool saga_parse_is_comment(const char *p, const char *end, const char *chars) {
    if (!saga_text_skip_blank(&p, end))
        return false;
    for (const char *c = chars; *c; c++)
        if (*p == *c)
            return true;
    return false;
}

saga_status saga_edge_buf_init(saga_edge_buf *b, int64_t cap_hint, bool weighted) {
    saga_status st = SAGA_OK;
    *b = (saga_edge_buf){.weighted = weighted};
    int64_t cap = cap_hint < 16 ? 16 : cap_hint;
    SAGA_TRY(saga_alloc_array((void **)&b->src, (size_t)cap, sizeof *b->src, "edge sources"));
    SAGA_TRY(saga_alloc_array((void **)&b->dst, (size_t)cap, sizeof *b->dst, "edge targets"));
    if (weighted)
        SAGA_TRY(saga_alloc_array((void **)&b->w, (size_t)cap, sizeof *b->w, "edge weights"));
    b->cap = cap;
    return SAGA_OK;
fail:
    saga_edge_buf_free(b);
    return st;
}

saga_status saga_edge_buf_grow(saga_edge_buf *b) {
    saga_status st = SAGA_OK;
    int64_t cap = b->cap + b->cap / 2 + 16;
    /* Each array is grown on its own; one that was grown before a later failure is simply
     * larger than cap, which is harmless. */
    SAGA_TRY(saga_realloc_array((void **)&b->src, (size_t)cap, sizeof *b->src, "edge sources"));
    SAGA_TRY(saga_realloc_array((void **)&b->dst, (size_t)cap, sizeof *b->dst, "edge targets"));
    if (b->weighted)
        SAGA_TRY(saga_realloc_array((void **)&b->w, (size_t)cap, sizeof *b->w, "edge weights"));
    b->cap = cap;
fail:
    return st;
}

void saga_edge_buf_free(saga_edge_buf *b) {
    saga_free(b->src);
    saga_free(b->dst);
    saga_free(b->w);
    *b = (saga_edge_buf){0};
}

saga_status saga_edge_buf_build(saga_graph **out, saga_edge_buf *b, int32_t n_vertices,
                                const saga_graph_opts *opts) {
    int64_t *orig = NULL;
    saga_status st =
        saga_graph_from_edges_take(out, n_vertices, b->n, &b->src, &b->dst, &b->w, &orig, opts);
    saga_edge_buf_free(b);
    return st;
}

int64_t saga_parse_cap_hint(int64_t declared, uint64_t src_bytes, int64_t min_bytes) {
    if (declared <= 0)
        return 0;
    uint64_t bound = 4096 + (src_bytes ? src_bytes / (uint64_t)min_bytes : 1u << 20);
    return (uint64_t)declared < bound ? declared : (int64_t)bound;
}

uint32_t saga_crc32(const void *data, uint64_t len) {
    uLong c = crc32(0L, Z_NULL, 0);
    const Bytef *b = data;
    while (len > 0) {
        uInt k = len > (1u << 30) ? (1u << 30) : (uInt)len;
        c = crc32(c, b, k);
        b += k;
        len -= k;
    }
    return (uint32_t)c;
}
