/* edgelist.c - SNAP-style edge lists ("src dst [weight]" per line), plain or gzip, parsed by a
 * scanner that works directly on the reader's chunks.
 *
 * Speed: complete lines are scanned in place, with the line's '\n' as a sentinel so that the
 * digit and blank loops need no bounds checks; only a line split between two chunks is copied.
 * Lines the fast path does not recognise (comments, leading blanks, odd numbers, errors) go to a
 * careful slow path that validates everything and writes the messages.
 *
 * Memory: ids are stored as uint32 while they all fit, which is the common case; the first id
 * at or beyond 2^32 switches to a hash map from int64 to dense indices. After parsing, the ids
 * are renumbered in increasing order in place (a bitmap with a rank directory when the largest
 * id is small against the edge count, otherwise the hash map and a sort of the distinct ids),
 * and the arrays are handed to saga_graph_from_edges_take. */
#include "mem_impl.h"
#include "parse_util.h"
#include "parsers.h"
#include "saga_log.h"
#include "text.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

enum { FIRST_CAP = 1 << 16, TOKEN_SHOW = 48 };

/* Hash map from original id to a dense index in order of first appearance. The table holds
 * indices only (4 bytes a slot); the keys live once, in `keys`. */
typedef struct id_map {
    int32_t *table; /* -1 = empty */
    uint64_t mask;
    int64_t *keys; /* n entries, by index */
    int64_t n, keys_cap;
} id_map;

typedef struct el_state {
    const char *name;
    saga_weights wmode;
    int cols; /* 0 until the first data line decides, then 2 or 3 */
    int64_t cols_line;
    bool store_w; /* the weight column is kept */
    uint32_t *src, *dst;
    float *w;
    size_t m, cap;
    int64_t line;    /* number of the last line consumed */
    uint64_t max_id; /* raw mode: the largest id seen */
    bool hashed;     /* the arrays hold id_map indices instead of raw ids */
    id_map map;
    char *carry; /* a line split between chunks */
    size_t carry_len, carry_cap;
} el_state;

/* ---- id map ------------------------------------------------------------------------------- */

static inline uint64_t id_hash(int64_t key) {
    uint64_t z = (uint64_t)key * 0x9e3779b97f4a7c15ULL;
    return z ^ (z >> 29);
}

static void id_map_free(id_map *h) {
    saga_free(h->table);
    saga_free(h->keys);
    memset(h, 0, sizeof *h);
}

static saga_status id_map_rehash(id_map *h, uint64_t slots) {
    saga_status st = SAGA_OK;
    int32_t *t = NULL;
    SAGA_TRY(saga_alloc_array((void **)&t, slots, sizeof *t, "vertex id table"));
    memset(t, 0xff, slots * sizeof *t);
    uint64_t mask = slots - 1;
    for (int64_t i = 0; i < h->n; i++) {
        uint64_t s = id_hash(h->keys[i]) & mask;
        while (t[s] >= 0)
            s = (s + 1) & mask;
        t[s] = (int32_t)i;
    }
    saga_free(h->table);
    h->table = t;
    h->mask = mask;
fail:
    return st;
}

/* The dense index of key, added when new. */
static saga_status id_map_get(el_state *s, int64_t key, uint32_t *out) {
    saga_status st = SAGA_OK;
    id_map *h = &s->map;
    uint64_t slot = id_hash(key) & h->mask;
    for (;;) {
        int32_t i = h->table[slot];
        if (i < 0)
            break;
        if (h->keys[i] == key) {
            *out = (uint32_t)i;
            return SAGA_OK;
        }
        slot = (slot + 1) & h->mask;
    }
    SAGA_CHECK(h->n < INT32_MAX, SAGA_ERR_UNSUPPORTED, "%s:%lld: more than %d distinct vertex ids",
               s->name, (long long)s->line, INT32_MAX);
    if (h->n == h->keys_cap) {
        int64_t cap = h->keys_cap ? h->keys_cap * 2 : 1024;
        SAGA_TRY(saga_realloc_array((void **)&h->keys, (size_t)cap, sizeof *h->keys, "vertex ids"));
        h->keys_cap = cap;
    }
    h->keys[h->n] = key;
    h->table[slot] = (int32_t)h->n;
    *out = (uint32_t)h->n;
    h->n++;
    /* keep the load at most 1/2 */
    if ((uint64_t)h->n * 2 > h->mask + 1)
        SAGA_TRY(id_map_rehash(h, (h->mask + 1) * 2));
fail:
    return st;
}

/* Switches from raw uint32 ids to map indices, rewriting what was stored so far. */
static saga_status to_hashed(el_state *s) {
    saga_status st = SAGA_OK;
    SAGA_TRY(id_map_rehash(&s->map, 1024));
    s->hashed = true;
    for (size_t k = 0; k < s->m; k++) {
        SAGA_TRY(id_map_get(s, (int64_t)s->src[k], &s->src[k]));
        SAGA_TRY(id_map_get(s, (int64_t)s->dst[k], &s->dst[k]));
    }
fail:
    return st;
}

/* ---- storing edges ------------------------------------------------------------------------ */

static saga_status grow(el_state *s) {
    saga_status st = SAGA_OK;
    size_t cap = s->cap ? s->cap * 2 : FIRST_CAP;
    /* Large blocks are mmap'd and realloc grows them with mremap: no copy, and capacity that is
     * never written costs no memory. */
    SAGA_TRY(saga_realloc_array((void **)&s->src, cap, sizeof *s->src, "edge sources"));
    SAGA_TRY(saga_realloc_array((void **)&s->dst, cap, sizeof *s->dst, "edge targets"));
    if (s->store_w)
        SAGA_TRY(saga_realloc_array((void **)&s->w, cap, sizeof *s->w, "edge weights"));
    s->cap = cap;
    saga_advise_huge(s->src, cap * sizeof *s->src);
    saga_advise_huge(s->dst, cap * sizeof *s->dst);
    if (s->store_w)
        saga_advise_huge(s->w, cap * sizeof *s->w);
fail:
    return st;
}

/* Stores an edge whatever its ids (the fast path stores small ids itself). */
static saga_status add_edge(el_state *s, uint64_t a, uint64_t b, float w) {
    saga_status st = SAGA_OK;
    if (s->m == s->cap)
        SAGA_TRY(grow(s));
    if (!s->hashed && ((a | b) >> 32) != 0)
        SAGA_TRY(to_hashed(s));
    uint32_t ia, ib;
    if (s->hashed) {
        SAGA_TRY(id_map_get(s, (int64_t)a, &ia));
        SAGA_TRY(id_map_get(s, (int64_t)b, &ib));
    } else {
        ia = (uint32_t)a;
        ib = (uint32_t)b;
        if (a > s->max_id)
            s->max_id = a;
        if (b > s->max_id)
            s->max_id = b;
    }
    s->src[s->m] = ia;
    s->dst[s->m] = ib;
    if (s->store_w)
        s->w[s->m] = w;
    s->m++;
fail:
    return st;
}

/* ---- the careful path: one line [p, e), with every check and message ------------------------ */

static inline bool is_blank(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static const char *cols_desc(int cols) {
    return cols == 3 ? "src dst weight" : "src dst";
}

static saga_status slow_line(el_state *s, const char *p, const char *e) {
    saga_status st = SAGA_OK;
    char tok[TOKEN_SHOW];
    const char *name = s->name;
    long long ln = (long long)s->line;
    SAGA_CHECK(!memchr(p, '\0', (size_t)(e - p)), SAGA_ERR_PARSE,
               "%s:%lld: NUL byte (binary data?)", name, ln);
    const char *q = p;
    if (!saga_text_skip_blank(&q, e) || *q == '#' || *q == '%')
        return SAGA_OK; /* blank line or comment */

    const char *start[4];
    int ntok = 0;
    for (const char *t = q; t < e;) {
        if (!saga_text_skip_blank(&t, e))
            break;
        if (ntok < 4)
            start[ntok] = t;
        ntok++;
        while (t < e && !is_blank(*t))
            t++;
    }
    if (s->cols == 0) {
        SAGA_CHECK(ntok == 2 || ntok == 3, SAGA_ERR_PARSE,
                   "%s:%lld: expected 2 or 3 columns (src dst [weight]), found %d", name, ln, ntok);
        SAGA_CHECK(ntok == 3 || s->wmode != SAGA_WEIGHTS_REQUIRE, SAGA_ERR_PARSE,
                   "%s:%lld: expected 3 columns (src dst weight) since weights are required, "
                   "found 2",
                   name, ln);
        s->cols = ntok;
        s->cols_line = s->line;
        s->store_w = ntok == 3 && s->wmode != SAGA_WEIGHTS_IGNORE;
        if (s->store_w && s->cap > 0)
            SAGA_TRY(saga_realloc_array((void **)&s->w, s->cap, sizeof *s->w, "edge weights"));
    }
    SAGA_CHECK(ntok == s->cols, SAGA_ERR_PARSE,
               "%s:%lld: expected %d columns (%s) like line %lld, found %d", name, ln, s->cols,
               cols_desc(s->cols), (long long)s->cols_line, ntok);

    int64_t id[2];
    for (int c = 0; c < 2; c++) {
        const char *t = start[c];
        saga_text_result r = saga_text_u63(&t, e, &id[c]);
        SAGA_CHECK(r == SAGA_TEXT_OK, SAGA_ERR_PARSE,
                   "%s:%lld: expected a vertex id (an integer 0..%lld) in column %d, found %s "
                   "\"%s\"",
                   name, ln, (long long)INT64_MAX, c + 1, saga_text_result_str(r),
                   saga_text_token(start[c], e, tok, sizeof tok));
    }
    float wv = 1.0f;
    if (s->cols == 3) {
        const char *t = start[2];
        double d = 0;
        saga_text_result r = saga_text_f64(&t, e, &d);
        SAGA_CHECK(r == SAGA_TEXT_OK, SAGA_ERR_PARSE,
                   "%s:%lld: expected a finite number as weight in column 3, found %s \"%s\"", name,
                   ln, saga_text_result_str(r), saga_text_token(start[2], e, tok, sizeof tok));
        SAGA_CHECK(fabs(d) <= FLT_MAX, SAGA_ERR_PARSE,
                   "%s:%lld: expected a weight within single precision range, found \"%s\"", name,
                   ln, saga_text_token(start[2], e, tok, sizeof tok));
        wv = (float)d;
    }
    SAGA_TRY(add_edge(s, (uint64_t)id[0], (uint64_t)id[1], wv));
fail:
    if (st == SAGA_ERR_PARSE) {
        const char *hint = saga_parse_hint(p, e, (int64_t)s->line);
        if (*hint)
            saga_error_append(st, "%s", hint);
    }
    return st;
}

/* ---- the fast path: complete lines [p, end), end[-1] == '\n' --------------------------------- */

static saga_status scan_lines(el_state *s, const char *p, const char *end) {
    saga_status st = SAGA_OK;
    size_t m = s->m, cap = s->cap;
    uint32_t *src = s->src, *dst = s->dst;
    uint64_t max_id = s->max_id;
    int64_t line = s->line;
    while (p < end) {
        line++;
        const char *q = p;
        uint64_t a = 0, b = 0;
        unsigned d;
        const char *t = q;
        /* id, blanks, id: every loop stops at the line's '\n' at the latest */
        if ((d = (unsigned)(*q - '0')) > 9 || s->cols == 0)
            goto slow;
        do {
            a = a * 10 + d;
            q++;
        } while ((d = (unsigned)(*q - '0')) <= 9);
        if (q - t > 18 || (*q != ' ' && *q != '\t'))
            goto slow;
        do
            q++;
        while (*q == ' ' || *q == '\t');
        t = q;
        if ((d = (unsigned)(*q - '0')) > 9)
            goto slow;
        do {
            b = b * 10 + d;
            q++;
        } while ((d = (unsigned)(*q - '0')) <= 9);
        if (q - t > 18)
            goto slow;
        float wv = 1.0f;
        if (s->cols == 3) {
            if (*q != ' ' && *q != '\t')
                goto slow;
            do
                q++;
            while (*q == ' ' || *q == '\t');
            const char *we = q;
            while (*we != '\n' && !is_blank(*we))
                we++;
            double dv;
            if (we == q || saga_text_f64(&q, we, &dv) != SAGA_TEXT_OK || !(fabs(dv) <= FLT_MAX))
                goto slow;
            wv = (float)dv;
        }
        if (*q != '\n') {
            while (is_blank(*q))
                q++;
            if (*q != '\n')
                goto slow;
        }
        if (((a | b) >> 32) != 0 || s->hashed || m == cap) {
            s->m = m;
            s->max_id = max_id;
            s->line = line;
            SAGA_TRY(add_edge(s, a, b, wv));
            m = s->m, cap = s->cap, src = s->src, dst = s->dst, max_id = s->max_id;
        } else {
            src[m] = (uint32_t)a;
            dst[m] = (uint32_t)b;
            if (s->store_w)
                s->w[m] = wv;
            m++;
            max_id = a > max_id ? a : max_id;
            max_id = b > max_id ? b : max_id;
        }
        p = q + 1;
        continue;
    slow:
        q = memchr(p, '\n', (size_t)(end - p));
        s->m = m;
        s->max_id = max_id;
        s->line = line;
        SAGA_TRY(slow_line(s, p, q));
        m = s->m, cap = s->cap, src = s->src, dst = s->dst, max_id = s->max_id;
        p = q + 1;
    }
    s->m = m;
    s->max_id = max_id;
    s->line = line;
fail:
    return st;
}

static saga_status carry_add(el_state *s, const char *p, size_t n) {
    if (s->carry_len + n > s->carry_cap) {
        size_t cap = s->carry_cap ? s->carry_cap : 4096;
        while (cap < s->carry_len + n)
            cap *= 2;
        saga_status st = saga_realloc_array((void **)&s->carry, cap, 1, "long line");
        if (st < 0)
            return st;
        s->carry_cap = cap;
    }
    memcpy(s->carry + s->carry_len, p, n);
    s->carry_len += n;
    return SAGA_OK;
}

/* Parses one chunk: first the line carried over from the previous chunk, then the complete
 * lines in place, and carries the incomplete tail. */
static saga_status scan_chunk(el_state *s, const char *p, size_t len) {
    saga_status st = SAGA_OK;
    const char *end = p + len;
    if (s->carry_len > 0) {
        const char *nl = memchr(p, '\n', len);
        if (!nl)
            return carry_add(s, p, len);
        SAGA_TRY(carry_add(s, p, (size_t)(nl + 1 - p)));
        SAGA_TRY(scan_lines(s, s->carry, s->carry + s->carry_len));
        s->carry_len = 0;
        p = nl + 1;
    }
    const char *last = p < end ? memrchr(p, '\n', (size_t)(end - p)) : NULL;
    if (last) {
        SAGA_TRY(scan_lines(s, p, last + 1));
        p = last + 1;
    }
    if (p < end)
        SAGA_TRY(carry_add(s, p, (size_t)(end - p)));
fail:
    return st;
}

/* ---- renumbering ---------------------------------------------------------------------------- */

/* Bit count without relying on a popcnt instruction (the library is built for any x86-64). */
static inline uint32_t popcount64(uint64_t x) {
    x = x - ((x >> 1) & 0x5555555555555555ULL);
    x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
    return (uint32_t)((x * 0x0101010101010101ULL) >> 56);
}

/* Ids all below 2^32 and max_id not much larger than the edge count: a bitmap of the ids present
 * and a rank directory (popcount prefix per 64-bit word) give each id its rank. */
static saga_status renumber_bitmap(el_state *s, int32_t *n_out, int64_t **orig_out) {
    /* One 16-byte entry per 64 ids: the presence bits and the rank of the first of them, so
     * that a lookup touches a single cache line. */
    typedef struct rank_word {
        uint64_t bits;
        uint64_t rank;
    } rank_word;
    saga_status st = SAGA_OK;
    rank_word *rw = NULL;
    int64_t *orig = NULL;
    uint64_t n_ids = s->max_id + 1;
    size_t n_words = (size_t)((n_ids + 63) / 64);
    SAGA_TRY(saga_alloc_zeroed((void **)&rw, n_words, sizeof *rw, "vertex id bitmap"));
    size_t m = s->m;
    uint32_t *src = s->src, *dst = s->dst;
    for (size_t k = 0; k < m; k++) {
        rw[src[k] >> 6].bits |= 1ULL << (src[k] & 63);
        rw[dst[k] >> 6].bits |= 1ULL << (dst[k] & 63);
    }
    uint64_t n = 0;
    for (size_t i = 0; i < n_words; i++) {
        rw[i].rank = n;
        n += popcount64(rw[i].bits);
    }
    SAGA_CHECK(n <= INT32_MAX, SAGA_ERR_UNSUPPORTED, "%s: more than %d distinct vertex ids",
               s->name, INT32_MAX);
    if (n == n_ids) { /* ids are 0..n-1 already */
        *n_out = (int32_t)n;
        *orig_out = NULL;
        goto fail; /* just frees the bitmap */
    }
    SAGA_TRY(saga_alloc_array((void **)&orig, (size_t)n, sizeof *orig, "original vertex ids"));
    for (size_t i = 0; i < n_words; i++) {
        uint64_t r = rw[i].rank;
        for (uint64_t word = rw[i].bits; word; word &= word - 1)
            orig[r++] = (int64_t)(i * 64 + (size_t)__builtin_ctzll(word));
    }
#pragma omp parallel for schedule(static)
    for (size_t k = 0; k < m; k++) {
        const rank_word *a = &rw[src[k] >> 6], *b = &rw[dst[k] >> 6];
        src[k] = (uint32_t)a->rank + popcount64(a->bits & ((1ULL << (src[k] & 63)) - 1));
        dst[k] = (uint32_t)b->rank + popcount64(b->bits & ((1ULL << (dst[k] & 63)) - 1));
    }
    *n_out = (int32_t)n;
    *orig_out = orig;
    orig = NULL;
fail:
    saga_free(rw);
    saga_free(orig);
    return st;
}

static int cmp_key_index(const void *x, const void *y) {
    const int64_t *a = x, *b = y;
    return (a[0] > b[0]) - (a[0] < b[0]);
}

/* Arrays hold map indices (first appearance): sort the distinct ids and rewrite by rank. */
static saga_status renumber_hashed(el_state *s, int32_t *n_out, int64_t **orig_out) {
    saga_status st = SAGA_OK;
    int64_t *pairs = NULL; /* (id, index) */
    uint32_t *rank = NULL;
    int64_t *orig = NULL;
    id_map *h = &s->map;
    size_t n = (size_t)h->n;
    saga_free(h->table); /* lookups are over */
    h->table = NULL;
    SAGA_TRY(saga_alloc_array((void **)&pairs, n, 2 * sizeof *pairs, "vertex id order"));
    for (size_t i = 0; i < n; i++) {
        pairs[2 * i] = h->keys[i];
        pairs[2 * i + 1] = (int64_t)i;
    }
    saga_free(h->keys);
    h->keys = NULL;
    qsort(pairs, n, 2 * sizeof *pairs, cmp_key_index);
    SAGA_TRY(saga_alloc_array((void **)&rank, n, sizeof *rank, "vertex id ranks"));
    SAGA_TRY(saga_alloc_array((void **)&orig, n, sizeof *orig, "original vertex ids"));
    for (size_t r = 0; r < n; r++) {
        orig[r] = pairs[2 * r];
        rank[pairs[2 * r + 1]] = (uint32_t)r;
    }
    saga_free(pairs);
    pairs = NULL;
    uint32_t *src = s->src, *dst = s->dst;
    size_t m = s->m;
#pragma omp parallel for schedule(static)
    for (size_t k = 0; k < m; k++) {
        src[k] = rank[src[k]];
        dst[k] = rank[dst[k]];
    }
    /* ids 0..n-1 (possible when the switch came from a sparse raw file): no map needed */
    bool identity = true;
    for (size_t r = 0; r < n && identity; r++)
        identity = orig[r] == (int64_t)r;
    if (identity) {
        saga_free(orig);
        orig = NULL;
    }
    *n_out = (int32_t)n;
    *orig_out = orig;
    orig = NULL;
fail:
    saga_free(pairs);
    saga_free(rank);
    saga_free(orig);
    return st;
}

static void state_free(el_state *s) {
    saga_free(s->src);
    saga_free(s->dst);
    saga_free(s->w);
    saga_free(s->carry);
    id_map_free(&s->map);
}

/* Parses an edge list from r (owned, closed here); see parsers.h and saga_io.h. */
saga_status saga_edgelist_parse(saga_graph **out, saga_reader *r, const saga_load_opts *opts) {
    saga_status st = SAGA_OK;
    el_state s = {0};
    int64_t *orig = NULL;
    SAGA_CHECK(out && r, SAGA_ERR_INVALID_ARG, "saga_edgelist_parse: NULL argument");
    saga_load_opts o = opts ? *opts : saga_load_opts_defaults();
    s.name = saga_reader_name(r);
    s.wmode = o.weights;
    SAGA_CHECK((unsigned)s.wmode < SAGA_WEIGHTS_COUNT, SAGA_ERR_INVALID_ARG,
               "%s: invalid weights option %d", s.name, (int)s.wmode);

    const char *data;
    size_t len;
    double t0 = saga_now();
    for (;;) {
        SAGA_TRY(saga_reader_next(r, &data, &len));
        if (len == 0)
            break;
        st = scan_chunk(&s, data, len);
        if (st == SAGA_ERR_PARSE && saga_reader_is_gzip(r)) {
            /* Damaged gzip data inflates to garbage before zlib notices; when the stream turns
             * out to be corrupt, that is the error to report. */
            saga_status parse_st = st;
            char msg[512];
            snprintf(msg, sizeof msg, "%s", saga_last_error());
            while ((st = saga_reader_next(r, &data, &len)) == SAGA_OK && len > 0)
                ;
            if (st == SAGA_ERR_CORRUPT)
                goto fail;
            st = saga_error(parse_st, "%s", msg);
        }
        if (st < 0)
            goto fail;
    }
    if (s.carry_len > 0) { /* a last line without newline */
        SAGA_TRY(carry_add(&s, "\n", 1));
        SAGA_TRY(scan_lines(&s, s.carry, s.carry + s.carry_len));
        s.carry_len = 0;
    }
    SAGA_CHECK(s.m > 0, SAGA_ERR_PARSE, "%s: no edges found", s.name);
    SAGA_CHECK(s.m <= (size_t)INT64_MAX, SAGA_ERR_UNSUPPORTED, "%s: too many edges", s.name);

    double t1 = saga_now();
    int32_t n = 0;
    bool was_hashed = s.hashed;
    if (!s.hashed) {
        /* Past about 16 ids per edge a bitmap costs more than a map of the distinct ids. */
        if (s.max_id >= 16 * (uint64_t)s.m + (1u << 26))
            SAGA_TRY(to_hashed(&s));
        else
            SAGA_TRY(renumber_bitmap(&s, &n, &orig));
    }
    if (s.hashed)
        SAGA_TRY(renumber_hashed(&s, &n, &orig));
    saga_free(s.carry);
    s.carry = NULL;
    saga_log(SAGA_LOG_DEBUG,
             "%s: scanned %lld lines, %zu edges in %.3f s; renumbered %d ids (%s) in %.3f s",
             s.name, (long long)s.line, s.m, t1 - t0, (int)n,
             was_hashed ? "map" : (s.hashed ? "sparse, map" : (orig ? "bitmap" : "dense")),
             saga_now() - t1);

    /* The uint32 arrays now hold ranks below 2^31, read as int32 from here on. */
    int32_t *src = (int32_t *)s.src, *dst = (int32_t *)s.dst;
    float *w = s.w;
    s.src = s.dst = NULL;
    s.w = NULL;
    if (!s.store_w) {
        saga_free(w);
        w = NULL;
    }
    saga_reader_close(&r);
    return saga_graph_from_edges_take(out, n, (int64_t)s.m, &src, &dst, &w, &orig, &o.graph);
fail:
    state_free(&s);
    saga_free(orig);
    saga_reader_close(&r);
    return st;
}

/* Opens path and parses it as an edge list; see saga_io.h. */
saga_status saga_edgelist_read(saga_graph **out, const char *path, const saga_load_opts *opts) {
    saga_reader *r = NULL;
    saga_status st = saga_reader_open(&r, path);
    if (st < 0)
        return st;
    return saga_edgelist_parse(out, r, opts);
}
