/* rmat.c - the R-MAT generator: counter-based draws, a seeded id permutation, fast text output. */
#include "saga_datasets.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* Edges are formatted and (for .gz) compressed in chunks of this many edges. The chunk size is
 * fixed, not derived from the thread count, so the bytes written never depend on it. */
enum { RMAT_CHUNK_EDGES = 1 << 18, RMAT_MAX_LINE = 22 /* two 10-digit ids, a tab, a newline */ };

static const uint64_t GOLDEN = 0x9E3779B97F4A7C15ull;

saga_rmat_params saga_rmat_params_defaults(void) {
    return (saga_rmat_params){.scale = 16,
                              .edge_factor = 16,
                              .a = 0.57,
                              .b = 0.19,
                              .c = 0.19,
                              .seed = 1,
                              .scramble = true};
}

/* splitmix64's finaliser: a bijective 64-bit mix with good avalanche. */
static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Everything a worker needs to draw edge k without shared state. */
typedef struct rmat_gen {
    int scale;
    uint32_t mask;
    uint64_t key; /* stream key derived from the seed */
    /* Quadrant thresholds on 32-bit uniforms, up to 2^32 so that d = 0 never draws D. */
    uint64_t t_a, t_ab, t_abc;
    bool scramble;
    uint32_t perm_mul[3], perm_add[3];
    int perm_shift;
} rmat_gen;

static uint64_t threshold(double p) {
    double t = p * 4294967296.0;
    if (t >= 4294967296.0)
        return UINT64_C(1) << 32;
    return t <= 0.0 ? 0 : (uint64_t)t;
}

static saga_status gen_init(rmat_gen *g, int64_t *n_edges, const saga_rmat_params *p) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(p != NULL, SAGA_ERR_INVALID_ARG, "R-MAT: parameters are NULL");
    SAGA_CHECK(p->scale >= 1 && p->scale <= 30, SAGA_ERR_INVALID_ARG,
               "R-MAT: scale must be in 1..30, got %d", p->scale);
    SAGA_CHECK(p->edge_factor >= 1, SAGA_ERR_INVALID_ARG,
               "R-MAT: edge factor must be at least 1, got %d", p->edge_factor);
    SAGA_CHECK(isfinite(p->a) && isfinite(p->b) && isfinite(p->c) && p->a >= 0 && p->b >= 0 &&
                   p->c >= 0,
               SAGA_ERR_INVALID_ARG, "R-MAT: probabilities a=%g b=%g c=%g must be in [0, 1]", p->a,
               p->b, p->c);
    double abc = p->a + p->b + p->c;
    SAGA_CHECK(abc <= 1.0 + 1e-12, SAGA_ERR_INVALID_ARG,
               "R-MAT: a+b+c = %.17g exceeds 1 (d = 1-a-b-c must be >= 0)", abc);

    memset(g, 0, sizeof *g);
    g->scale = p->scale;
    g->mask = (uint32_t)((UINT64_C(1) << p->scale) - 1);
    g->key = mix64(p->seed ^ 0x5A4741524D415431ull);
    g->t_a = threshold(p->a);
    g->t_ab = threshold(p->a + p->b);
    g->t_abc = threshold(abc);
    g->scramble = p->scramble;
    /* The permutation is keyed by the seed too, as Graph500 does. */
    uint64_t pk = mix64(g->key + GOLDEN);
    for (int r = 0; r < 3; r++) {
        uint64_t h = mix64(pk + (uint64_t)(r + 1) * GOLDEN);
        g->perm_mul[r] = (uint32_t)h | 1u; /* odd: a bijection modulo 2^scale */
        g->perm_add[r] = (uint32_t)(h >> 32);
    }
    g->perm_shift = (p->scale + 1) / 2;
    *n_edges = (int64_t)p->edge_factor << p->scale;
fail:
    return st;
}

/* A bijection of [0, 2^scale): multiply by an odd constant, xor-shift, add, three rounds. Each
 * step is invertible on scale-bit integers; the xor-shift carries high bits into low ones that
 * the multiplication alone would never reach. */
static inline uint32_t permute(const rmat_gen *g, uint32_t x) {
    for (int r = 0; r < 3; r++) {
        x = (x * g->perm_mul[r]) & g->mask;
        x ^= x >> g->perm_shift;
        x = (x + g->perm_add[r]) & g->mask;
    }
    return x;
}

/* Edge k depends only on (seed, k): its draws are splitmix64 outputs of a per-edge state. */
static inline void draw_edge(const rmat_gen *g, int64_t k, uint32_t *src, uint32_t *dst) {
    uint64_t h = mix64(g->key + (uint64_t)k * GOLDEN);
    uint32_t s = 0, d = 0;
    uint64_t r = 0;
    for (int level = 0; level < g->scale; level++) {
        uint32_t u;
        if ((level & 1) == 0) {
            r = mix64(h + (uint64_t)(level + 1) * GOLDEN);
            u = (uint32_t)r;
        } else {
            u = (uint32_t)(r >> 32);
        }
        /* Branch-free: the quadrant draw is unpredictable by design. Source bit set in C and D;
         * destination bit set in B and D. */
        uint64_t w = u;
        uint32_t sb = w >= g->t_ab;
        uint32_t db = (uint32_t)(w >= g->t_a) ^ sb ^ (uint32_t)(w >= g->t_abc);
        s = (s << 1) | sb;
        d = (d << 1) | db;
    }
    if (g->scramble) {
        s = permute(g, s);
        d = permute(g, d);
    }
    *src = s;
    *dst = d;
}

saga_status saga_rmat_edges(int32_t **src, int32_t **dst, int64_t *n_edges, int32_t *n_vertices,
                            const saga_rmat_params *p) {
    saga_status st = SAGA_OK;
    int32_t *s = NULL, *d = NULL;
    rmat_gen g;
    int64_t m = 0;
    SAGA_CHECK(src && dst && n_edges && n_vertices, SAGA_ERR_INVALID_ARG,
               "R-MAT: output pointers are NULL");
    SAGA_TRY(gen_init(&g, &m, p));
    SAGA_TRY(saga_alloc_array((void **)&s, (size_t)m, sizeof *s, "R-MAT sources"));
    SAGA_TRY(saga_alloc_array((void **)&d, (size_t)m, sizeof *d, "R-MAT destinations"));

    /* Each thread first-touches the pages it writes. */
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < m; k++) {
        uint32_t a, b;
        draw_edge(&g, k, &a, &b);
        s[k] = (int32_t)a;
        d[k] = (int32_t)b;
    }
    *src = s;
    *dst = d;
    *n_edges = m;
    *n_vertices = (int32_t)(g.mask + 1u);
    return SAGA_OK;
fail:
    saga_free(s);
    saga_free(d);
    return st;
}

saga_status saga_rmat_graph(saga_graph **out, const saga_rmat_params *p,
                            const saga_graph_opts *opts) {
    saga_status st = SAGA_OK;
    int32_t *s = NULL, *d = NULL;
    int64_t m = 0;
    int32_t n = 0;
    SAGA_CHECK(out != NULL, SAGA_ERR_INVALID_ARG, "R-MAT: output pointer is NULL");
    SAGA_TRY(saga_rmat_edges(&s, &d, &m, &n, p));
    saga_graph_opts o = opts ? *opts : saga_graph_opts_defaults();
    /* Takes the arrays, also on failure. */
    SAGA_TRY(saga_graph_from_edges_take(out, n, m, &s, &d, NULL, NULL, &o));
fail:
    saga_free(s);
    saga_free(d);
    return st;
}

/* ---- text output ------------------------------------------------------------------------- */

static inline char *put_u32(char *p, uint32_t v) {
    char tmp[10];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = tmp[--n];
    return p;
}

static voidpf zalloc_saga(voidpf opaque, uInt items, uInt size) {
    (void)opaque;
    return saga_calloc(items, size);
}
static void zfree_saga(voidpf opaque, voidpf ptr) {
    (void)opaque;
    saga_free(ptr);
}

/* One worker's buffers: the chunk's text, and its gzip member when compressing. */
typedef struct rmat_slot {
    char *text;
    unsigned char *gz;
    size_t gz_cap;
} rmat_slot;

/* Compresses text[0..len) into one complete gzip member. Returns the member's size, 0 on
 * failure. zlib writes a zero mtime, so the bytes are reproducible. */
static size_t gzip_member(unsigned char *out, size_t cap, const char *text, size_t len) {
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    zs.zalloc = zalloc_saga;
    zs.zfree = zfree_saga;
    if (deflateInit2(&zs, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return 0;
    zs.next_in = (Bytef *)(uintptr_t)text;
    zs.avail_in = (uInt)len;
    zs.next_out = out;
    zs.avail_out = (uInt)cap;
    int rc = deflate(&zs, Z_FINISH);
    size_t n = zs.total_out;
    deflateEnd(&zs);
    return rc == Z_STREAM_END ? n : 0;
}

/* The fewest digits (15..17) that read back as v: "0.57", not "0.56999999999999995". */
static const char *shortest(char buf[32], double v) {
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, 32, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    return buf;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

saga_status saga_rmat_write(const char *path, const saga_rmat_params *p) {
    saga_status st = SAGA_OK;
    rmat_slot *slots = NULL;
    FILE *f = NULL;
    int n_slots = 0;
    bool created = false;
    rmat_gen g;
    int64_t m = 0;
    char header[256];
    SAGA_CHECK(path != NULL, SAGA_ERR_INVALID_ARG, "R-MAT: output path is NULL");
    SAGA_TRY(gen_init(&g, &m, p));
    bool gz = ends_with(path, ".gz");
    char fa[32], fb[32], fc[32];
    int header_len =
        snprintf(header, sizeof header,
                 "# R-MAT scale %d edge_factor %d a %s b %s c %s seed %llu%s\n"
                 "# vertices %lld edges %lld\n",
                 p->scale, p->edge_factor, shortest(fa, p->a), shortest(fb, p->b),
                 shortest(fc, p->c), (unsigned long long)p->seed, p->scramble ? "" : " unscrambled",
                 (long long)g.mask + 1, (long long)m);

    int64_t chunk = m < RMAT_CHUNK_EDGES ? m : RMAT_CHUNK_EDGES;
    int64_t n_chunks = (m + chunk - 1) / chunk;
    size_t text_cap = (size_t)chunk * RMAT_MAX_LINE + (size_t)header_len;
    size_t gz_cap = gz ? (size_t)compressBound((uLong)text_cap) + 64 : 0;
    n_slots = omp_get_max_threads();
    if (n_slots > n_chunks)
        n_slots = (int)n_chunks;
    SAGA_TRY(saga_alloc_zeroed((void **)&slots, (size_t)n_slots, sizeof *slots, "R-MAT writers"));
    for (int i = 0; i < n_slots; i++) {
        SAGA_TRY(saga_alloc_array((void **)&slots[i].text, text_cap, 1, "R-MAT text buffer"));
        if (gz)
            SAGA_TRY(saga_alloc_array((void **)&slots[i].gz, gz_cap, 1, "R-MAT gzip buffer"));
        slots[i].gz_cap = gz_cap;
    }

    f = fopen(path, "wb");
    SAGA_CHECK(f != NULL, SAGA_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
    created = true;

    /* Workers format (and compress) chunks in parallel; the ordered section writes them in
     * chunk order, so the file is the same for any thread count. Errors cannot leave an OpenMP
     * loop, so they are flagged and the remaining chunks skip their work. */
    int failed = 0; /* 1: compression, 2: write */
    int write_errno = 0;
#pragma omp parallel num_threads(n_slots)
    {
        rmat_slot *slot = &slots[omp_get_thread_num()];
#pragma omp for ordered schedule(static, 1)
        for (int64_t c = 0; c < n_chunks; c++) {
            int bad;
#pragma omp atomic read
            bad = failed;
            char *q = slot->text;
            const void *bytes = NULL;
            size_t len = 0;
            if (!bad) {
                if (c == 0) {
                    memcpy(q, header, (size_t)header_len);
                    q += header_len;
                }
                int64_t end = (c + 1) * chunk < m ? (c + 1) * chunk : m;
                for (int64_t k = c * chunk; k < end; k++) {
                    uint32_t a, b;
                    draw_edge(&g, k, &a, &b);
                    q = put_u32(q, a);
                    *q++ = '\t';
                    q = put_u32(q, b);
                    *q++ = '\n';
                }
                len = (size_t)(q - slot->text);
                bytes = slot->text;
                if (gz) {
                    len = gzip_member(slot->gz, slot->gz_cap, slot->text, len);
                    bytes = slot->gz;
                    if (len == 0) {
#pragma omp atomic write
                        failed = 1;
                    }
                }
            }
#pragma omp ordered
            {
#pragma omp atomic read
                bad = failed;
                if (!bad && fwrite(bytes, 1, len, f) != len) {
                    write_errno = errno;
#pragma omp atomic write
                    failed = 2;
                }
            }
        }
    }
    SAGA_CHECK(failed != 1, SAGA_ERR_OUT_OF_MEMORY, "%s: gzip compression failed", path);
    SAGA_CHECK(failed != 2, SAGA_ERR_IO, "%s: write failed: %s", path, strerror(write_errno));
    int rc = fclose(f);
    f = NULL;
    SAGA_CHECK(rc == 0, SAGA_ERR_IO, "%s: write failed: %s", path, strerror(errno));
fail:
    if (f)
        fclose(f);
    if (st < 0 && created)
        remove(path); /* no half-written edge list left behind */
    for (int i = 0; slots && i < n_slots; i++) {
        saga_free(slots[i].text);
        saga_free(slots[i].gz);
    }
    saga_free(slots);
    return st;
}
