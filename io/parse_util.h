/* parse_util.h - pieces shared by the text parsers of Matrix Market, METIS and vertex data
 * files: line-located error messages, token diagnostics and a growable edge buffer. Internal.
 *
 *   saga_edge_buf b;
 *   SAGA_TRY(saga_edge_buf_init(&b, hint, weighted));
 *   SAGA_TRY(saga_edge_buf_push(&b, u, v, w));
 *   SAGA_TRY(saga_edge_buf_build(&g, &b, n_vertices, &opts->graph));   // b is emptied
 */
#pragma once

#include "reader.h"
#include "saga_graph.h"
#include "text.h"

/* Sets "name:LINE: <message>" with status code and returns code. */
saga_status saga_parse_error(saga_status code, const saga_lines *l, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Describes a failed token scan r of `what` (e.g. "row index") whose token starts at tok:
 * "name:LINE: expected <what> (an integer), found \"x\"" and the like; SAGA_ERR_PARSE. */
saga_status saga_parse_token_error(const saga_lines *l, const char *what, const char *kind,
                                   saga_text_result r, const char *tok, const char *end);

/* A hint for a line [p, end) that did not parse, to append to the error message: the UTF-8
 * byte-order mark (EF BB BF) that some editors put at the start of a file (line_no 1), which saga
 * does not skip, or commas where saga expects blanks between the columns. "" when neither. */
const char *saga_parse_hint(const char *p, const char *end, int64_t line_no);

/* True when [p, end) holds only blanks. */
bool saga_parse_is_blank(const char *p, const char *end);

/* True when the line is a comment: its first non-blank byte is one of chars. */
bool saga_parse_is_comment(const char *p, const char *end, const char *chars);

/* Edges collected while parsing. The arrays are saga_malloc'd; weights only when weighted. */
typedef struct saga_edge_buf {
    int32_t *src, *dst;
    float *w;
    int64_t n, cap;
    bool weighted;
} saga_edge_buf;

/* Starts an empty buffer with room for cap_hint edges (at least a few). */
saga_status saga_edge_buf_init(saga_edge_buf *b, int64_t cap_hint, bool weighted);
/* Grows the buffer so that one more edge fits (the slow path of push). */
saga_status saga_edge_buf_grow(saga_edge_buf *b);
void saga_edge_buf_free(saga_edge_buf *b);
/* Hands the arrays to saga_graph_from_edges_take; the buffer is empty afterwards, also on
 * failure. */
saga_status saga_edge_buf_build(saga_graph **out, saga_edge_buf *b, int32_t n_vertices,
                                const saga_graph_opts *opts);

/* Appends the edge u -> v (weight ignored when the buffer is unweighted). */
static inline saga_status saga_edge_buf_push(saga_edge_buf *b, int32_t u, int32_t v, float w) {
    if (b->n == b->cap) {
        saga_status st = saga_edge_buf_grow(b);
        if (st < 0)
            return st;
    }
    b->src[b->n] = u;
    b->dst[b->n] = v;
    if (b->weighted)
        b->w[b->n] = w;
    b->n++;
    return SAGA_OK;
}

/* A reasonable first capacity for `declared` entries when the input is src_bytes long: a
 * header's count is not trusted for a large allocation before the entries are seen, since each
 * entry takes at least min_bytes bytes of (uncompressed) text. */
int64_t saga_parse_cap_hint(int64_t declared, uint64_t src_bytes, int64_t min_bytes);

/* zlib's CRC-32 of len bytes (in pieces of 1 GiB: zlib's length is an unsigned int). */
uint32_t saga_crc32(const void *data, uint64_t len);
