/* sgr.c - the .sgr binary graph cache: a checksummed header and 64-byte aligned arrays, written
 * atomically and loaded by mmap after every size, offset and checksum has been verified; and
 * loading one with options, which are applied to the graph or refused, never ignored.
 *
 * Layout, little endian (version 2):
 *
 *   offset  size  field
 *        0     8  magic "SAGAGRPH"
 *        8     4  u32 version (2)
 *       12     4  u32 flags: bit 0 weighted (in_w, out_w present), bit 1 original ids present
 *       16     8  i64 n_vertices (0..INT32_MAX)
 *       24     8  i64 n_edges
 *       32   112  7 x {u64 offset, u64 length in bytes} for in_offsets, in_src, in_w,
 *                 out_offsets, out_dst, out_w, orig_ids; an absent array is {0, 0}
 *      144    28  7 x u32 CRC32 (zlib) of each array's bytes (0 for an absent array)
 *      172     4  how the graph was built (saga_graph_opts): u8 1 when recorded, 0 when not
 *                 (the other three then 0); u8 undirected (0 or 1); u8 self-loops (0 keep,
 *                 1 drop); u8 duplicates (1 keep, 2 drop, 3 sum: saga_duplicates, never auto)
 *      176    76  reserved, zero
 *      252     4  u32 CRC32 of bytes 0..251
 *      256        the arrays, in the order above, each starting on a 64-byte boundary, the
 *                 gaps filled with zeros
 *
 * Version 1 is the same without the build record (bytes 172..175 reserved and zero): it loads,
 * with its build unknown. The header fills 256 bytes: the offset and length pairs of seven arrays
 * alone take 112. */
#include "graph_impl.h"
#include "parse_util.h"
#include "parsers.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

enum {
    SGR_HEADER_SIZE = 256,
    SGR_ALIGN = 64,
    SGR_VERSION = 2,
    SGR_N_ARRAYS = 7,
    SGR_OFF_ARRAYS = 32,
    SGR_OFF_CRCS = 144,
    SGR_OFF_BUILD = 172, /* version 2 on; reserved in version 1 */
    SGR_OFF_RESERVED = 176,
    SGR_OFF_HEADER_CRC = 252,
};

enum { SGR_FLAG_WEIGHTED = 1u, SGR_FLAG_ORIG_IDS = 2u, SGR_FLAGS_KNOWN = 3u };

enum { A_IN_OFFSETS, A_IN_SRC, A_IN_W, A_OUT_OFFSETS, A_OUT_DST, A_OUT_W, A_ORIG_IDS };

/* Fuzz builds compute the checksums but do not insist on them, so that mutated images get past
 * them to the structural checks, which are what must hold against any input. */
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
#define FUZZ_SKIPS_CRC true
#else
#define FUZZ_SKIPS_CRC false
#endif

static const char SGR_MAGIC[8] = {'S', 'A', 'G', 'A', 'G', 'R', 'P', 'H'};
static const char *const ARRAY_NAMES[SGR_N_ARRAYS] = {
    "in_offsets", "in_src", "in_w", "out_offsets", "out_dst", "out_w", "orig_ids"};

typedef struct sgr_layout {
    uint32_t version, flags;
    int64_t n, m;
    uint64_t off[SGR_N_ARRAYS], len[SGR_N_ARRAYS];
    uint32_t crc[SGR_N_ARRAYS];
    bool build_known;
    saga_graph_opts build;
} sgr_layout;

static bool host_little_endian(void) {
    const uint16_t one = 1;
    uint8_t first;
    memcpy(&first, &one, 1);
    return first == 1;
}

static saga_status refuse_big_endian(const char *path) {
    return saga_error(SAGA_ERR_UNSUPPORTED,
                      "%s: .sgr files are little endian and this host is big endian", path);
}

/* The host is little endian (checked first), so fields are copied as they lie. */
static uint32_t get_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}
static uint64_t get_u64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}
static void put_u32(uint8_t *p, uint32_t v) {
    memcpy(p, &v, sizeof v);
}
static void put_u64(uint8_t *p, uint64_t v) {
    memcpy(p, &v, sizeof v);
}

/* zlib's crc32 takes a uInt length, so long arrays go in chunks. */
static uint32_t crc_of(const void *data, uint64_t len) {
    return saga_crc32(data, len);
}

/* Which arrays a file with these flags holds, and how many bytes each must have. Returns false
 * when a size does not fit 64 bits. */
static bool expected_lengths(uint64_t want[SGR_N_ARRAYS], int64_t n, int64_t m, uint32_t flags) {
    bool w = flags & SGR_FLAG_WEIGHTED, ids = flags & SGR_FLAG_ORIG_IDS;
    if ((uint64_t)m > UINT64_MAX / 8)
        return false;
    uint64_t offs = ((uint64_t)n + 1) * sizeof(int64_t);
    uint64_t idx = (uint64_t)m * sizeof(int32_t);
    want[A_IN_OFFSETS] = offs;
    want[A_IN_SRC] = idx;
    want[A_IN_W] = w ? (uint64_t)m * sizeof(float) : 0;
    want[A_OUT_OFFSETS] = offs;
    want[A_OUT_DST] = idx;
    want[A_OUT_W] = w ? (uint64_t)m * sizeof(float) : 0;
    want[A_ORIG_IDS] = ids ? (uint64_t)n * sizeof(int64_t) : 0;
    return true;
}

static bool array_present(int a, uint32_t flags) {
    if (a == A_IN_W || a == A_OUT_W)
        return flags & SGR_FLAG_WEIGHTED;
    if (a == A_ORIG_IDS)
        return flags & SGR_FLAG_ORIG_IDS;
    return true;
}

/* ---- the build record ------------------------------------------------------------------------ */

static void put_build(uint8_t *p, const saga_graph *g) {
    if (!g->build_known)
        return; /* four zeros: not recorded */
    p[0] = 1;
    p[1] = g->build.undirected ? 1 : 0;
    p[2] = (uint8_t)g->build.self_loops;
    p[3] = (uint8_t)g->build.duplicates;
}

static saga_status read_build(sgr_layout *lay, const char *name, const uint8_t *p) {
    saga_status st = SAGA_OK;
    lay->build_known = p[0] == 1;
    lay->build = saga_graph_opts_defaults();
    if (!lay->build_known) {
        SAGA_CHECK(p[0] == 0 && p[1] == 0 && p[2] == 0 && p[3] == 0, SAGA_ERR_CORRUPT,
                   "%s: build record %02x %02x %02x %02x: expected 01 and three policies, or four "
                   "zeros",
                   name, p[0], p[1], p[2], p[3]);
        return SAGA_OK;
    }
    SAGA_CHECK(p[1] <= 1 && p[2] < SAGA_SELF_LOOPS_COUNT && p[3] > SAGA_DUPLICATES_AUTO &&
                   p[3] < SAGA_DUPLICATES_COUNT,
               SAGA_ERR_CORRUPT,
               "%s: build record %02x %02x %02x %02x: expected undirected 0..1, self-loops 0..%d, "
               "duplicates 1..%d",
               name, p[0], p[1], p[2], p[3], SAGA_SELF_LOOPS_COUNT - 1, SAGA_DUPLICATES_COUNT - 1);
    lay->build.undirected = p[1] == 1;
    lay->build.self_loops = (saga_self_loops)p[2];
    lay->build.duplicates = (saga_duplicates)p[3];
fail:
    return st;
}

/* ---- reading -------------------------------------------------------------------------------- */

/* Checks the header of an image of size bytes and every array's place and checksum in it. */
static saga_status check_image(sgr_layout *lay, const char *name, const uint8_t *data,
                               uint64_t size) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(size >= sizeof SGR_MAGIC && memcmp(data, SGR_MAGIC, sizeof SGR_MAGIC) == 0,
               SAGA_ERR_CORRUPT, "%s: not a saga .sgr file (it does not start with \"SAGAGRPH\")",
               name);
    SAGA_CHECK(size >= SGR_HEADER_SIZE, SAGA_ERR_CORRUPT,
               "%s: truncated .sgr file: %llu bytes, the header alone takes %d", name,
               (unsigned long long)size, SGR_HEADER_SIZE);
    lay->version = get_u32(data + 8);
    /* The version comes before the header checksum: a newer layout may put it elsewhere. */
    SAGA_CHECK(lay->version <= SGR_VERSION, SAGA_ERR_CORRUPT,
               "%s: written by a newer saga (version %u); this saga reads versions 1 to %d", name,
               lay->version, SGR_VERSION);
    SAGA_CHECK(lay->version >= 1, SAGA_ERR_CORRUPT,
               "%s: unknown .sgr version %u; this saga reads versions 1 to %d", name, lay->version,
               SGR_VERSION);
    uint32_t stored = get_u32(data + SGR_OFF_HEADER_CRC);
    uint32_t computed = crc_of(data, SGR_OFF_HEADER_CRC);
    SAGA_CHECK(stored == computed || FUZZ_SKIPS_CRC, SAGA_ERR_CORRUPT,
               "%s: header checksum mismatch (stored %08x, computed %08x)", name, stored, computed);
    lay->flags = get_u32(data + 12);
    lay->n = (int64_t)get_u64(data + 16);
    lay->m = (int64_t)get_u64(data + 24);
    SAGA_CHECK(!(lay->flags & ~SGR_FLAGS_KNOWN), SAGA_ERR_CORRUPT, "%s: unknown flags 0x%x", name,
               lay->flags);
    int reserved = lay->version >= 2 ? SGR_OFF_RESERVED : SGR_OFF_BUILD;
    for (int k = reserved; k < SGR_OFF_HEADER_CRC; k++)
        SAGA_CHECK(data[k] == 0, SAGA_ERR_CORRUPT, "%s: reserved header byte %d is not zero", name,
                   k);
    lay->build_known = false; /* version 1 does not say */
    lay->build = saga_graph_opts_defaults();
    if (lay->version >= 2)
        SAGA_TRY(read_build(lay, name, data + SGR_OFF_BUILD));
    SAGA_CHECK(lay->n >= 0 && lay->n <= INT32_MAX, SAGA_ERR_CORRUPT,
               "%s: vertex count %lld is outside 0..%d", name, (long long)lay->n, (int)INT32_MAX);
    SAGA_CHECK(lay->m >= 0, SAGA_ERR_CORRUPT, "%s: negative edge count %lld", name,
               (long long)lay->m);
    uint64_t want[SGR_N_ARRAYS];
    SAGA_CHECK(expected_lengths(want, lay->n, lay->m, lay->flags), SAGA_ERR_CORRUPT,
               "%s: edge count %lld is impossible for a %llu-byte file", name, (long long)lay->m,
               (unsigned long long)size);
    uint64_t prev_end = SGR_HEADER_SIZE;
    for (int a = 0; a < SGR_N_ARRAYS; a++) {
        const uint8_t *slot = data + SGR_OFF_ARRAYS + 16 * a;
        uint64_t off = get_u64(slot), len = get_u64(slot + 8);
        uint32_t crc = get_u32(data + SGR_OFF_CRCS + 4 * a);
        lay->off[a] = off;
        lay->len[a] = len;
        lay->crc[a] = crc;
        if (!array_present(a, lay->flags)) {
            SAGA_CHECK(off == 0 && len == 0 && crc == 0, SAGA_ERR_CORRUPT,
                       "%s: %s is listed (offset %llu, length %llu) but the flags say it is "
                       "absent",
                       name, ARRAY_NAMES[a], (unsigned long long)off, (unsigned long long)len);
            continue;
        }
        SAGA_CHECK(len == want[a], SAGA_ERR_CORRUPT,
                   "%s: %s has %llu bytes, %lld vertices and %lld edges need %llu", name,
                   ARRAY_NAMES[a], (unsigned long long)len, (long long)lay->n, (long long)lay->m,
                   (unsigned long long)want[a]);
        SAGA_CHECK(off % SGR_ALIGN == 0 && off >= prev_end, SAGA_ERR_CORRUPT,
                   "%s: %s starts at %llu, expected a multiple of %d at or after %llu", name,
                   ARRAY_NAMES[a], (unsigned long long)off, SGR_ALIGN,
                   (unsigned long long)prev_end);
        SAGA_CHECK(off <= size && len <= size - off, SAGA_ERR_CORRUPT,
                   "%s: truncated .sgr file: %s needs bytes %llu..%llu, the file has %llu", name,
                   ARRAY_NAMES[a], (unsigned long long)off, (unsigned long long)(off + len),
                   (unsigned long long)size);
        prev_end = off + len;
    }
    for (int a = 0; a < SGR_N_ARRAYS; a++) {
        if (!array_present(a, lay->flags))
            continue;
        uint32_t c = crc_of(data + lay->off[a], lay->len[a]);
        SAGA_CHECK(c == lay->crc[a] || FUZZ_SKIPS_CRC, SAGA_ERR_CORRUPT,
                   "%s: %s checksum mismatch (stored %08x, computed %08x)", name, ARRAY_NAMES[a],
                   lay->crc[a], c);
    }
fail:
    return st;
}

/* The CSR invariants cheap enough to check: offsets rise from 0 to m, indices are vertices and
 * ascending within a row. */
static saga_status check_csr(const char *name, const char *which, int64_t n, int64_t m,
                             const int64_t *offsets, const int32_t *idx) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(offsets[0] == 0 && offsets[n] == m, SAGA_ERR_CORRUPT,
               "%s: %s offsets run from %lld to %lld, expected 0 to %lld", name, which,
               (long long)offsets[0], (long long)offsets[n], (long long)m);
    for (int64_t v = 0; v < n; v++) {
        int64_t b = offsets[v], e = offsets[v + 1];
        SAGA_CHECK(b <= e && e <= m, SAGA_ERR_CORRUPT,
                   "%s: %s offsets of vertex %lld (%lld..%lld) are not ascending within 0..%lld",
                   name, which, (long long)v, (long long)b, (long long)e, (long long)m);
        for (int64_t k = b; k < e; k++) {
            SAGA_CHECK(idx[k] >= 0 && idx[k] < n, SAGA_ERR_CORRUPT,
                       "%s: %s entry %lld is vertex %d, outside 0..%lld", name, which, (long long)k,
                       (int)idx[k], (long long)n - 1);
            SAGA_CHECK(k == b || idx[k - 1] <= idx[k], SAGA_ERR_CORRUPT,
                       "%s: %s row of vertex %lld is not sorted at entry %lld", name, which,
                       (long long)v, (long long)k);
        }
    }
fail:
    return st;
}

/* What the build record promises of the edges, checked, since loading with options relies on it:
 * an undirected graph is symmetric, dropped self-loops are absent, merged duplicates too. */
static saga_status check_build(const char *name, const saga_graph *g) {
    saga_status st = SAGA_OK;
    if (!g->build_known)
        return SAGA_OK;
    SAGA_CHECK(!g->build.undirected || saga_graph_is_symmetric(g), SAGA_ERR_CORRUPT,
               "%s: the header records an undirected graph, but its in-edges and out-edges "
               "differ",
               name);
    bool loops = g->build.self_loops == SAGA_SELF_LOOPS_DROP;
    bool merged = g->build.duplicates != SAGA_DUPLICATES_KEEP;
    for (int32_t v = 0; v < g->n_vertices && (loops || merged); v++)
        for (int64_t k = g->out_offsets[v]; k < g->out_offsets[v + 1]; k++) {
            SAGA_CHECK(!loops || g->out_dst[k] != v, SAGA_ERR_CORRUPT,
                       "%s: the header records self-loops dropped, but vertex %d has one", name,
                       (int)v);
            SAGA_CHECK(!merged || k == g->out_offsets[v] || g->out_dst[k - 1] != g->out_dst[k],
                       SAGA_ERR_CORRUPT,
                       "%s: the header records parallel edges merged, but vertex %d has two "
                       "edges to vertex %d",
                       name, (int)v, (int)g->out_dst[k]);
        }
fail:
    return st;
}

static saga_status check_graph(const char *name, const saga_graph *g) {
    saga_status st = SAGA_OK;
    SAGA_TRY(check_csr(name, "in-edge", g->n_vertices, g->n_edges, g->in_offsets, g->in_src));
    SAGA_TRY(check_csr(name, "out-edge", g->n_vertices, g->n_edges, g->out_offsets, g->out_dst));
    if (g->orig_ids)
        for (int32_t v = 1; v < g->n_vertices; v++)
            SAGA_CHECK(g->orig_ids[v - 1] < g->orig_ids[v], SAGA_ERR_CORRUPT,
                       "%s: original ids are not increasing at vertex %d", name, (int)v);
    SAGA_TRY(check_build(name, g));
fail:
    return st;
}

/* Points (or, when copy, copies) the arrays of a checked image into g. */
static saga_status fill_graph(saga_graph *g, const sgr_layout *lay, const uint8_t *data,
                              bool copy) {
    saga_status st = SAGA_OK;
    void *arr[SGR_N_ARRAYS] = {0};
    for (int a = 0; a < SGR_N_ARRAYS; a++) {
        if (!array_present(a, lay->flags))
            continue;
        if (copy) {
            SAGA_TRY(saga_alloc_array(&arr[a], lay->len[a] ? (size_t)lay->len[a] : 1, 1,
                                      ARRAY_NAMES[a]));
            memcpy(arr[a], data + lay->off[a], (size_t)lay->len[a]);
        } else {
            arr[a] = (void *)(data + lay->off[a]);
        }
    }
    g->n_vertices = (int32_t)lay->n;
    g->n_edges = lay->m;
    g->in_offsets = arr[A_IN_OFFSETS];
    g->in_src = arr[A_IN_SRC];
    g->in_w = arr[A_IN_W];
    g->out_offsets = arr[A_OUT_OFFSETS];
    g->out_dst = arr[A_OUT_DST];
    g->out_w = arr[A_OUT_W];
    g->orig_ids = arr[A_ORIG_IDS];
    g->build_known = lay->build_known;
    g->build = lay->build;
    return SAGA_OK;
fail:
    for (int a = 0; a < SGR_N_ARRAYS; a++)
        saga_free(arr[a]);
    return st;
}

saga_status saga_sgr_parse_mem(saga_graph **out, const char *name, const void *data, size_t len) {
    saga_status st = SAGA_OK;
    saga_graph *g = NULL;
    sgr_layout lay;
    if (!name)
        name = "<memory>";
    if (!host_little_endian())
        return refuse_big_endian(name);
    SAGA_CHECK(data || len == 0, SAGA_ERR_INVALID_ARG, "%s: no data", name);
    SAGA_TRY(check_image(&lay, name, data, len));
    SAGA_TRY(saga_alloc_zeroed((void **)&g, 1, sizeof *g, "graph"));
    SAGA_TRY(fill_graph(g, &lay, data, true));
    SAGA_TRY(check_graph(name, g));
    *out = g;
    return SAGA_OK;
fail:
    saga_graph_free(&g);
    return st;
}

saga_status saga_sgr_read(saga_graph **out, const char *path) {
    saga_status st = SAGA_OK;
    saga_graph *g = NULL;
    void *map = NULL;
    size_t size = 0;
    int fd = -1;
    sgr_layout lay;
    if (!host_little_endian())
        return refuse_big_endian(path);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    SAGA_CHECK(fd >= 0, SAGA_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    SAGA_CHECK(fstat(fd, &sb) == 0, SAGA_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    SAGA_CHECK(S_ISREG(sb.st_mode), SAGA_ERR_IO, "%s: not a regular file", path);
    SAGA_CHECK(sb.st_size > 0, SAGA_ERR_CORRUPT, "%s: empty file, not a saga .sgr file", path);
    SAGA_CHECK((uint64_t)sb.st_size <= SIZE_MAX, SAGA_ERR_IO, "%s: too large to map", path);
    size = (size_t)sb.st_size;
    map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
        map = NULL;
        SAGA_CHECK(false, SAGA_ERR_IO, "%s: cannot map %zu bytes: %s", path, size, strerror(errno));
    }
    close(fd);
    fd = -1;
    /* The graph keeps pointing into this mapping. A file cut short by someone else while it is
     * mapped would fault; saga itself never changes an .sgr in place (it writes a new file and
     * renames it over the old one, which leaves existing mappings intact).
     * The checksums read the whole file once, front to back. */
    madvise(map, size, MADV_WILLNEED);
    SAGA_TRY(check_image(&lay, path, map, size));
    SAGA_TRY(saga_alloc_zeroed((void **)&g, 1, sizeof *g, "graph"));
    SAGA_TRY(fill_graph(g, &lay, map, false));
    g->mapping = map;
    g->mapping_len = size;
    map = NULL;
    SAGA_TRY(check_graph(path, g));
    *out = g;
    return SAGA_OK;
fail:
    saga_graph_free(&g);
    if (map)
        munmap(map, size);
    if (fd >= 0)
        close(fd);
    return st;
}

/* ---- loading with options ----------------------------------------------------------------- */

/* "a directed graph (self-loops kept, parallel edges kept)" and the like. */
static const char *describe(char *buf, size_t cap, const saga_graph_opts *b) {
    static const char *const dups[SAGA_DUPLICATES_COUNT] = {
        "as built", "kept", "merged keeping the smallest weight", "merged with weights summed"};
    snprintf(buf, cap, "%s graph (self-loops %s, parallel edges %s)",
             b->undirected ? "an undirected" : "a directed",
             b->self_loops == SAGA_SELF_LOOPS_DROP ? "dropped" : "kept", dups[b->duplicates]);
    return buf;
}

static const char *duplicates_opt(saga_duplicates d) {
    static const char *const names[SAGA_DUPLICATES_COUNT] = {
        "--duplicates auto", "--duplicates keep", "--duplicates drop", "--duplicates sum"};
    return names[d];
}

/* Drops the weights of g, which has no other use for them (a mapping stays as it is). */
static void strip_weights(saga_graph *g) {
    if (!g->mapping) {
        saga_free(g->in_w);
        saga_free(g->out_w);
    }
    g->in_w = NULL;
    g->out_w = NULL;
}

/* Reads path and applies the options to the graph it holds; see saga_io.h.
 *
 * The file holds build_B(S), the graph built from a source S with the options B it records; the
 * caller asks for build_R(S). Options left at their defaults take B's value ("as the file was
 * built"). What is asked is done by rebuilding the stored edges, which gives build_R(S) exactly
 * when B lost nothing R needs: self-loops dropped stay dropped, merged parallel edges stay merged
 * (and their weights, summed or the smallest, cannot turn into the other). Anything else is
 * refused with what the file holds and what was asked. */
saga_status saga_sgr_load(saga_graph **out, const char *path, const saga_load_opts *opts) {
    saga_status st = SAGA_OK;
    saga_graph *g = NULL, *h = NULL;
    char held[128];
    SAGA_CHECK(out && path, SAGA_ERR_INVALID_ARG, "saga_sgr_load: NULL argument");
    saga_load_opts o = opts ? *opts : saga_load_opts_defaults();
    SAGA_CHECK((unsigned)o.weights < SAGA_WEIGHTS_COUNT &&
                   (unsigned)o.graph.self_loops < SAGA_SELF_LOOPS_COUNT &&
                   (unsigned)o.graph.duplicates < SAGA_DUPLICATES_COUNT,
               SAGA_ERR_INVALID_ARG, "saga_sgr_load: invalid options");
    SAGA_TRY(saga_sgr_read(&g, path));

    /* ---- weights: kept, dropped, or required */
    bool has_w = g->in_w != NULL;
    SAGA_CHECK(has_w || o.weights != SAGA_WEIGHTS_REQUIRE, SAGA_ERR_UNSUPPORTED,
               "%s: weights are required (--weights require) but the file holds none: it was "
               "made from a graph without edge weights, or with --weights ignore",
               path);
    bool drop_w = has_w && o.weights == SAGA_WEIGHTS_IGNORE;
    bool weighted = has_w && !drop_w;
    bool sl_drop = o.graph.self_loops == SAGA_SELF_LOOPS_DROP;
    bool sl_keep = o.graph.self_loops == SAGA_SELF_LOOPS_KEEP && o.self_loops_set;

    /* ---- a file that does not say how it was built: only what needs no knowing of it */
    if (!g->build_known) {
        const char *asked = o.graph.undirected ? "--undirected"
                            : sl_keep          ? "--self-loops keep"
                            : o.graph.duplicates != SAGA_DUPLICATES_AUTO
                                ? duplicates_opt(o.graph.duplicates)
                                : NULL;
        SAGA_CHECK(!asked, SAGA_ERR_UNSUPPORTED,
                   "%s: %s cannot be applied: the file does not record how its graph was built "
                   "(directed or not, self-loops, parallel edges), as .sgr files of format "
                   "version 1 and those made from them do not; convert the source again with "
                   "this saga to record it",
                   path, asked);
        if (sl_drop) {
            saga_graph_opts r = {.undirected = false,
                                 .self_loops = SAGA_SELF_LOOPS_DROP,
                                 .duplicates = SAGA_DUPLICATES_KEEP};
            SAGA_TRY(saga_graph_rebuild(&h, g, &r, drop_w));
            h->build_known = false;
            h->build = saga_graph_opts_defaults();
            saga_graph_free(&g);
            g = h;
            h = NULL;
        } else if (drop_w) {
            strip_weights(g);
        }
        *out = g;
        return SAGA_OK;
    }

    /* ---- what is asked, in full */
    saga_graph_opts b = g->build, want = b;
    want.undirected = b.undirected || o.graph.undirected;
    if (sl_drop || sl_keep)
        want.self_loops = o.graph.self_loops;
    if (o.graph.duplicates != SAGA_DUPLICATES_AUTO)
        want.duplicates = o.graph.duplicates;
    else if (o.graph.undirected) /* as the text formats do: auto drops them when undirected */
        want.duplicates = SAGA_DUPLICATES_DROP;
    bool merged = b.duplicates != SAGA_DUPLICATES_KEEP;

    /* ---- what cannot be had from the stored edges */
    SAGA_CHECK(!(want.self_loops == SAGA_SELF_LOOPS_KEEP && b.self_loops == SAGA_SELF_LOOPS_DROP),
               SAGA_ERR_UNSUPPORTED,
               "%s holds %s; --self-loops keep cannot be applied: the self-loops were dropped when "
               "the file was made. Convert the source again with the options wanted",
               path, describe(held, sizeof held, &b));
    SAGA_CHECK(!(want.duplicates == SAGA_DUPLICATES_KEEP && merged), SAGA_ERR_UNSUPPORTED,
               "%s holds %s; --duplicates keep cannot be applied: the parallel edges were merged "
               "when the file was made. Convert the source again with the options wanted",
               path, describe(held, sizeof held, &b));
    SAGA_CHECK(!(merged && want.duplicates != b.duplicates && weighted), SAGA_ERR_UNSUPPORTED,
               "%s holds %s; %s%s cannot be applied: the weights of parallel edges were merged "
               "when the file was made. Convert the source again with the options wanted, or "
               "load it with --weights ignore",
               path, describe(held, sizeof held, &b), duplicates_opt(want.duplicates),
               o.graph.duplicates == SAGA_DUPLICATES_AUTO ? " (--undirected's default)" : "");

    /* ---- apply it: one rebuild of the stored edges, or nothing */
    bool sym = want.undirected && !b.undirected;
    saga_graph_opts r = {
        .undirected = sym,
        .self_loops =
            want.self_loops == SAGA_SELF_LOOPS_DROP && b.self_loops != SAGA_SELF_LOOPS_DROP
                ? SAGA_SELF_LOOPS_DROP
                : SAGA_SELF_LOOPS_KEEP,
        /* symmetrizing makes parallel arcs of its own; merged ones in the file stay merged */
        .duplicates = sym || !merged ? want.duplicates : SAGA_DUPLICATES_KEEP};
    if (r.undirected || r.self_loops == SAGA_SELF_LOOPS_DROP ||
        r.duplicates != SAGA_DUPLICATES_KEEP) {
        SAGA_TRY(saga_graph_rebuild(&h, g, &r, drop_w));
        saga_graph_free(&g);
        g = h;
        h = NULL;
    } else if (drop_w) {
        strip_weights(g);
    }
    g->build = want;
    g->build_known = true;
    *out = g;
    return SAGA_OK;
fail:
    saga_graph_free(&g);
    return st;
}

/* ---- writing -------------------------------------------------------------------------------- */

static bool write_all(int fd, const void *data, uint64_t len) {
    const uint8_t *p = data;
    while (len > 0) {
        size_t k = len > (1u << 30) ? (1u << 30) : (size_t)len;
        ssize_t w = write(fd, p, k);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        len -= (uint64_t)w;
    }
    return true;
}

saga_status saga_sgr_write(const saga_graph *g, const char *path) {
    saga_status st = SAGA_OK;
    char *tmp = NULL;
    int fd = -1;
    bool created = false; /* tmp exists and is ours to remove */
    uint8_t header[SGR_HEADER_SIZE] = {0};
    static const uint8_t zeros[SGR_ALIGN] = {0};
    if (!host_little_endian())
        return refuse_big_endian(path);
    SAGA_CHECK(g && path, SAGA_ERR_INVALID_ARG, "saga_sgr_write: graph and path are required");
    SAGA_CHECK(!g->ids_unordered, SAGA_ERR_UNSUPPORTED,
               "%s: a renumbered graph (original ids not increasing) cannot be cached as .sgr",
               path);

    /* ---- layout and header ---- */
    uint32_t flags = (g->in_w ? SGR_FLAG_WEIGHTED : 0) | (g->orig_ids ? SGR_FLAG_ORIG_IDS : 0);
    const void *arr[SGR_N_ARRAYS] = {g->in_offsets, g->in_src, g->in_w,    g->out_offsets,
                                     g->out_dst,    g->out_w,  g->orig_ids};
    uint64_t len[SGR_N_ARRAYS], off[SGR_N_ARRAYS] = {0};
    expected_lengths(len, g->n_vertices, g->n_edges, flags);
    uint64_t pos = SGR_HEADER_SIZE;
    memcpy(header, SGR_MAGIC, sizeof SGR_MAGIC);
    put_u32(header + 8, SGR_VERSION);
    put_u32(header + 12, flags);
    put_u64(header + 16, (uint64_t)g->n_vertices);
    put_u64(header + 24, (uint64_t)g->n_edges);
    put_build(header + SGR_OFF_BUILD, g);
    for (int a = 0; a < SGR_N_ARRAYS; a++) {
        if (!array_present(a, flags))
            continue;
        pos = (pos + SGR_ALIGN - 1) / SGR_ALIGN * SGR_ALIGN;
        off[a] = pos;
        pos += len[a];
        put_u64(header + SGR_OFF_ARRAYS + 16 * a, off[a]);
        put_u64(header + SGR_OFF_ARRAYS + 16 * a + 8, len[a]);
        put_u32(header + SGR_OFF_CRCS + 4 * a, crc_of(arr[a], len[a]));
    }
    put_u32(header + SGR_OFF_HEADER_CRC, crc_of(header, SGR_OFF_HEADER_CRC));

    /* ---- write a temporary file next to path, then rename it over path ---- */
    size_t tmp_cap = strlen(path) + 64;
    SAGA_TRY(saga_alloc_array((void **)&tmp, tmp_cap, 1, "temporary file name"));
    static unsigned counter;
    for (int attempt = 0; fd < 0; attempt++) {
        snprintf(tmp, tmp_cap, "%s.tmp.%ld.%u", path, (long)getpid(),
                 __atomic_fetch_add(&counter, 1u, __ATOMIC_RELAXED));
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        SAGA_CHECK(fd >= 0 || (errno == EEXIST && attempt < 100), SAGA_ERR_IO,
                   "%s: cannot create %s: %s", path, tmp, strerror(errno));
    }
    created = true;
    SAGA_CHECK(write_all(fd, header, SGR_HEADER_SIZE), SAGA_ERR_IO, "%s: write failed: %s", tmp,
               strerror(errno));
    uint64_t at = SGR_HEADER_SIZE;
    for (int a = 0; a < SGR_N_ARRAYS; a++) {
        if (!array_present(a, flags))
            continue;
        SAGA_CHECK(write_all(fd, zeros, off[a] - at) && write_all(fd, arr[a], len[a]), SAGA_ERR_IO,
                   "%s: write failed: %s", tmp, strerror(errno));
        at = off[a] + len[a];
    }
    /* Data reaches the disk before the name does, so a crash leaves the old file or the new
     * one, never a torn one. */
    SAGA_CHECK(fsync(fd) == 0, SAGA_ERR_IO, "%s: fsync failed: %s", tmp, strerror(errno));
    int rc = close(fd);
    fd = -1;
    SAGA_CHECK(rc == 0, SAGA_ERR_IO, "%s: close failed: %s", tmp, strerror(errno));
    SAGA_CHECK(rename(tmp, path) == 0, SAGA_ERR_IO, "%s: cannot rename %s into place: %s", path,
               tmp, strerror(errno));
    saga_free(tmp);
    return SAGA_OK;
fail:
    if (fd >= 0)
        close(fd);
    if (created)
        unlink(tmp);
    saga_free(tmp);
    return st;
}
