/* test_sgr.c - the .sgr cache: exact round trips, and corrupt, truncated, future and random files
 * refused without a crash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"

#include "graph_impl.h"
#include "io_test_alloc.h"
#include "parsers.h"
#include "saga_datasets.h"
#include "saga_io.h"

#include <dirent.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

enum { HEADER = 256 };
static const char *const ARRAYS[7] = {"in_offsets", "in_src", "in_w",    "out_offsets",
                                      "out_dst",    "out_w",  "orig_ids"};

static uint64_t rng_state = 88172645463325252ull;

/* n vertices, m random edges; weights and original ids on request. */
static saga_graph *random_graph(int32_t n, int64_t m, bool weighted, bool ids) {
    int32_t *src = malloc((size_t)m * sizeof *src + 1), *dst = malloc((size_t)m * sizeof *dst + 1);
    float *w = weighted ? malloc((size_t)m * sizeof *w + 1) : NULL;
    int64_t *orig = ids ? malloc((size_t)n * sizeof *orig + 1) : NULL;
    assert_true(src && dst);
    for (int64_t k = 0; k < m; k++) {
        src[k] = (int32_t)(saga_test_u64(&rng_state) % (uint64_t)n);
        dst[k] = (int32_t)(saga_test_u64(&rng_state) % (uint64_t)n);
        if (w)
            w[k] = (float)(saga_test_u64(&rng_state) % 1000) / 8.0f - 20.0f;
    }
    for (int32_t v = 0; ids && v < n; v++)
        orig[v] = 7 + 3 * (int64_t)v + (v > n / 2 ? 1000000000000ll : 0);
    saga_graph *g = NULL;
    assert_int_equal(saga_graph_from_edges(&g, n, m, src, dst, w, orig, NULL), SAGA_OK);
    free(src);
    free(dst);
    free(w);
    free(orig);
    return g;
}

static void assert_same_graph(const saga_graph *a, const saga_graph *b) {
    int32_t n = saga_graph_n_vertices(a);
    int64_t m = saga_graph_n_edges(a);
    assert_int_equal(saga_graph_n_vertices(b), n);
    assert_int_equal(saga_graph_n_edges(b), m);
    assert_int_equal(saga_graph_has_weights(a), saga_graph_has_weights(b));
    saga_csr views[2][2] = {{saga_graph_in(a), saga_graph_out(a)},
                            {saga_graph_in(b), saga_graph_out(b)}};
    for (int d = 0; d < 2; d++) {
        assert_memory_equal(views[0][d].offsets, views[1][d].offsets,
                            ((size_t)n + 1) * sizeof(int64_t));
        if (m > 0)
            assert_memory_equal(views[0][d].indices, views[1][d].indices,
                                (size_t)m * sizeof(int32_t));
        if (views[0][d].weights && m > 0)
            assert_memory_equal(views[0][d].weights, views[1][d].weights,
                                (size_t)m * sizeof(float));
    }
    const int64_t *ia = saga_graph_orig_ids(a), *ib = saga_graph_orig_ids(b);
    assert_int_equal(ia == NULL, ib == NULL);
    if (ia && n > 0)
        assert_memory_equal(ia, ib, (size_t)n * sizeof(int64_t));
}

static unsigned char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)size + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    *len = (size_t)size;
    return buf;
}

/* Writes g, reads it back both ways, and checks both copies are exact. */
static void round_trip(const saga_graph *g, const char *name) {
    const char *path = saga_test_tmp(name);
    assert_int_equal(saga_sgr_write(g, path), SAGA_OK);
    saga_graph *back = NULL;
    saga_status st = saga_sgr_read(&back, path);
    if (st != SAGA_OK)
        fail_msg("%s: %s", saga_status_name(st), saga_last_error());
    assert_non_null(back->mapping); /* loaded by mmap */
    assert_same_graph(g, back);
    saga_graph_free(&back);
    size_t len;
    unsigned char *bytes = slurp(path, &len);
    assert_int_equal(saga_sgr_parse_mem(&back, name, bytes, len), SAGA_OK);
    assert_null(back->mapping);
    assert_same_graph(g, back);
    saga_graph_free(&back);
    free(bytes);
}

static void test_sgr_round_trips(void **state) {
    (void)state;
    saga_graph *g = random_graph(1000, 20000, true, true);
    round_trip(g, "wi.sgr");
    saga_graph_free(&g);
    g = random_graph(777, 5000, false, false);
    round_trip(g, "plain.sgr");
    saga_graph_free(&g);
    g = random_graph(50, 300, true, false);
    round_trip(g, "w.sgr");
    saga_graph_free(&g);
    g = random_graph(64, 100, false, true);
    round_trip(g, "ids.sgr");
    saga_graph_free(&g);
    /* no edges at all, and no vertices */
    g = random_graph(5, 0, true, true);
    round_trip(g, "edgeless.sgr");
    saga_graph_free(&g);
    g = random_graph(1, 0, false, false);
    round_trip(g, "one.sgr");
    saga_graph_free(&g);
    assert_int_equal(saga_graph_from_edges(&g, 0, 0, NULL, NULL, NULL, NULL, NULL), SAGA_OK);
    round_trip(g, "empty.sgr");
    saga_graph_free(&g);
}

static void test_sgr_real_graphs(void **state) {
    (void)state;
    saga_rmat_params p = saga_rmat_params_defaults();
    p.scale = 12;
    p.edge_factor = 8;
    saga_graph *g = NULL;
    assert_int_equal(saga_rmat_graph(&g, &p, NULL), SAGA_OK);
    round_trip(g, "rmat.sgr");
    saga_graph_free(&g);

    const char *path = saga_test_data("ca-GrQc/ca-GrQc.txt.gz");
    saga_status st = saga_graph_load(&g, path, NULL);
    if (st != SAGA_OK)
        fail_msg("%s: %s", saga_status_name(st), saga_last_error());
    /* the SNAP file lists each undirected edge in both directions: 28980 lines */
    assert_int_equal(saga_graph_n_vertices(g), 5242);
    assert_int_equal(saga_graph_n_edges(g), 28980);
    assert_non_null(saga_graph_orig_ids(g));
    round_trip(g, "ca-GrQc.sgr");
    saga_graph_free(&g);
}

/* ---- corrupt files ------------------------------------------------------------------------------
 */

static unsigned char *good_image(size_t *len, bool weighted, bool ids) {
    saga_graph *g = random_graph(40, 200, weighted, ids);
    const char *path = saga_test_tmp("good.sgr");
    assert_int_equal(saga_sgr_write(g, path), SAGA_OK);
    saga_graph_free(&g);
    return slurp(path, len);
}

static uint64_t get64(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static void put32(unsigned char *p, uint32_t v) {
    memcpy(p, &v, 4);
}
static void put64(unsigned char *p, uint64_t v) {
    memcpy(p, &v, 8);
}

static void fix_header_crc(unsigned char *img) {
    put32(img + 252, (uint32_t)crc32(0L, img, 252));
}

static void fix_array_crc(unsigned char *img, int a) {
    uint64_t off = get64(img + 32 + 16 * a), len = get64(img + 40 + 16 * a);
    put32(img + 144 + 4 * a, (uint32_t)crc32(0L, img + off, (uInt)len));
    fix_header_crc(img);
}

/* Both loaders refuse the image with SAGA_ERR_CORRUPT and a message holding needle. */
static void assert_refused(const unsigned char *img, size_t len, const char *needle) {
    saga_graph *g = NULL;
    saga_status st = saga_sgr_parse_mem(&g, "img.sgr", img, len);
    if (st != SAGA_ERR_CORRUPT)
        fail_msg("parse_mem: expected SAGA_ERR_CORRUPT, got %s: %s", saga_status_name(st),
                 saga_last_error());
    assert_null(g);
    if (needle)
        saga_test_assert_error_contains("img.sgr", needle, NULL);
    const char *path = saga_test_write("corrupt.sgr", img, len);
    st = saga_sgr_read(&g, path);
    if (st != SAGA_ERR_CORRUPT)
        fail_msg("read: expected SAGA_ERR_CORRUPT, got %s: %s", saga_status_name(st),
                 saga_last_error());
    assert_null(g);
    if (needle)
        saga_test_assert_error_contains(path, needle, NULL);
}

static void test_sgr_truncated(void **state) {
    (void)state;
    size_t len;
    unsigned char *img = good_image(&len, true, true);
    assert_refused(img, 0, NULL);
    assert_refused(img, 5, "not a saga .sgr file");
    size_t cuts[] = {8, 100, HEADER - 1};
    for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++)
        assert_refused(img, cuts[k], "the header alone takes 256");
    size_t tails[] = {HEADER, HEADER + 1, len / 2, len - 64, len - 1};
    for (size_t k = 0; k < sizeof tails / sizeof tails[0]; k++)
        assert_refused(img, tails[k], "truncated .sgr file");
    /* every length short of the whole file is refused */
    for (size_t cut = 0; cut < len; cut += 7) {
        saga_graph *g = NULL;
        assert_int_equal(saga_sgr_parse_mem(&g, "cut", img, cut), SAGA_ERR_CORRUPT);
    }
    free(img);
}

static void test_sgr_flipped_bytes(void **state) {
    (void)state;
    size_t len;
    unsigned char *img = good_image(&len, true, true);
    /* any byte of the header */
    for (int k = 0; k < HEADER; k++) {
        img[k] ^= 0x20;
        saga_graph *g = NULL;
        saga_status st = saga_sgr_parse_mem(&g, "flip", img, len);
        if (st != SAGA_ERR_CORRUPT)
            fail_msg("header byte %d flipped: %s", k, saga_status_name(st));
        img[k] ^= 0x20;
    }
    img[20] ^= 1;
    assert_refused(img, len, "header checksum mismatch");
    img[20] ^= 1;
    /* a byte in the middle of each array */
    for (int a = 0; a < 7; a++) {
        uint64_t off = get64(img + 32 + 16 * a), alen = get64(img + 40 + 16 * a);
        assert_true(alen > 0 && off % 64 == 0);
        img[off + alen / 2] ^= 0x01;
        char needle[64];
        snprintf(needle, sizeof needle, "%s checksum mismatch", ARRAYS[a]);
        assert_refused(img, len, needle);
        img[off + alen / 2] ^= 0x01;
    }
    saga_graph *g = NULL;
    assert_int_equal(saga_sgr_parse_mem(&g, "ok", img, len), SAGA_OK);
    saga_graph_free(&g);
    free(img);
}

static void test_sgr_magic_version_flags(void **state) {
    (void)state;
    size_t len;
    unsigned char *img = good_image(&len, false, false);
    img[7] = 'X';
    assert_refused(img, len, "not a saga .sgr file");
    img[7] = 'H';
    put32(img + 8, 3);
    assert_refused(img, len,
                   "written by a newer saga (version 3); this saga reads versions 1 to 2");
    fix_header_crc(img);
    assert_refused(img, len,
                   "written by a newer saga (version 3); this saga reads versions 1 to 2");
    put32(img + 8, 0);
    fix_header_crc(img);
    assert_refused(img, len, "unknown .sgr version 0");
    put32(img + 8, 2);
    put32(img + 12, 4);
    fix_header_crc(img);
    assert_refused(img, len, "unknown flags 0x4");
    /* the weighted flag without weight arrays listed */
    put32(img + 12, 1);
    fix_header_crc(img);
    assert_refused(img, len, "in_w has 0 bytes");
    put32(img + 12, 0);
    img[200] = 1;
    fix_header_crc(img);
    assert_refused(img, len, "reserved header byte 200");
    img[200] = 0;
    /* the build record: recorded (1) with policies in range, or four zeros */
    unsigned char rec[4];
    memcpy(rec, img + 172, 4);
    assert_int_equal(rec[0], 1);
    img[172] = 2;
    fix_header_crc(img);
    assert_refused(img, len, "build record 02");
    img[172] = 1;
    img[175] = 0; /* duplicates auto is never recorded */
    fix_header_crc(img);
    assert_refused(img, len, "build record 01");
    img[175] = 4;
    fix_header_crc(img);
    assert_refused(img, len, "duplicates 1..3");
    memcpy(img + 172, rec, 4);
    img[173] = 2;
    fix_header_crc(img);
    assert_refused(img, len, "undirected 0..1");
    memcpy(img + 172, "\0\0\1\0", 4); /* not recorded, yet a policy */
    fix_header_crc(img);
    assert_refused(img, len, "or four zeros");
    /* in a version 1 file those bytes are reserved */
    memcpy(img + 172, rec, 4);
    put32(img + 8, 1);
    fix_header_crc(img);
    assert_refused(img, len, "reserved header byte 172");
    memcpy(img + 172, rec, 4);
    put32(img + 8, 2);
    fix_header_crc(img);
    saga_graph *g = NULL;
    assert_int_equal(saga_sgr_parse_mem(&g, "ok", img, len), SAGA_OK);
    saga_graph_free(&g);
    free(img);
}

static void test_sgr_inconsistent_but_checksummed(void **state) {
    (void)state;
    size_t len;
    unsigned char *img = good_image(&len, false, true);
    unsigned char *orig = malloc(len);
    memcpy(orig, img, len);
    uint64_t m = get64(img + 24);
    /* counts that disagree with the array lengths */
    put64(img + 24, m + 1);
    fix_header_crc(img);
    assert_refused(img, len, "in_src has");
    put64(img + 24, UINT64_MAX / 2);
    fix_header_crc(img);
    assert_refused(img, len, NULL);
    put64(img + 24, (uint64_t)-5);
    fix_header_crc(img);
    assert_refused(img, len, "negative edge count");
    memcpy(img, orig, len);
    put64(img + 16, (uint64_t)1 << 40);
    fix_header_crc(img);
    assert_refused(img, len, "vertex count");
    /* an array placed past the end, misaligned, or overlapping the previous one */
    memcpy(img, orig, len);
    put64(img + 32 + 16 * 3, len + 64);
    fix_header_crc(img);
    assert_refused(img, len, "out_offsets");
    put64(img + 32 + 16 * 3, get64(orig + 32 + 16 * 3) + 4);
    fix_header_crc(img);
    assert_refused(img, len, "multiple of 64");
    put64(img + 32 + 16 * 3, get64(orig + 32 + 16 * 1));
    fix_header_crc(img);
    assert_refused(img, len, "out_offsets starts at");
    /* an index outside the vertex range, with valid checksums */
    memcpy(img, orig, len);
    uint64_t src_off = get64(img + 32 + 16 * 1);
    int32_t bad = 40;
    memcpy(img + src_off, &bad, 4);
    fix_array_crc(img, 1);
    assert_refused(img, len, "in-edge entry 0 is vertex 40");
    /* offsets that go down */
    memcpy(img, orig, len);
    uint64_t offs_off = get64(img + 32 + 16 * 3);
    int64_t big = (int64_t)m + 5;
    memcpy(img + offs_off + 8 * 10, &big, 8);
    fix_array_crc(img, 3);
    assert_refused(img, len, "out-edge offsets of vertex");
    /* a row out of order */
    memcpy(img, orig, len);
    int64_t o0, o1;
    memcpy(&o0, img + offs_off, 8);
    uint64_t dst_off = get64(img + 32 + 16 * 4);
    int32_t row[64];
    int v = 0;
    for (;; v++) {
        memcpy(&o0, img + offs_off + 8 * v, 8);
        memcpy(&o1, img + offs_off + 8 * (v + 1), 8);
        assert_true(o1 - o0 <= 64);
        memcpy(row, img + dst_off + 4 * o0, (size_t)(o1 - o0) * 4);
        if (o1 - o0 >= 2 && row[0] != row[o1 - o0 - 1])
            break;
    }
    int32_t t = row[0];
    row[0] = row[o1 - o0 - 1];
    row[o1 - o0 - 1] = t;
    memcpy(img + dst_off + 4 * o0, row, (size_t)(o1 - o0) * 4);
    fix_array_crc(img, 4);
    assert_refused(img, len, "not sorted");
    /* original ids that do not increase */
    memcpy(img, orig, len);
    uint64_t ids_off = get64(img + 32 + 16 * 6);
    memcpy(img + ids_off + 8, img + ids_off, 8);
    fix_array_crc(img, 6);
    assert_refused(img, len, "original ids are not increasing at vertex 1");
    free(orig);
    free(img);
}

static void test_sgr_random_bytes(void **state) {
    (void)state;
    unsigned char buf[4096];
    for (int trial = 0; trial < 400; trial++) {
        size_t len = (size_t)(saga_test_u64(&rng_state) % sizeof buf);
        for (size_t k = 0; k < len; k++)
            buf[k] = (unsigned char)saga_test_u64(&rng_state);
        if (trial % 2 && len >= 8)
            memcpy(buf, "SAGAGRPH", 8);
        if (trial % 4 == 3 && len >= HEADER) {
            put32(buf + 8, 1);
            fix_header_crc(buf);
        }
        saga_graph *g = NULL;
        assert_int_equal(saga_sgr_parse_mem(&g, "random", buf, len), SAGA_ERR_CORRUPT);
        assert_null(g);
    }
    const char *path = saga_test_write("random.sgr", buf, 1000);
    saga_graph *g = NULL;
    assert_int_equal(saga_sgr_read(&g, path), SAGA_ERR_CORRUPT);
}

/* ---- how the graph was built ------------------------------------------------------------------
 */

/* A small multigraph with self-loops and parallel edges (with differing weights): every loading
 * option changes something in it. */
enum { SRC_N = 30, SRC_M = 260 };
static int32_t src_u[SRC_M], src_v[SRC_M];
static float src_w[SRC_M];
static int64_t src_ids[SRC_N];

static void make_source(void) {
    for (int k = 0; k < SRC_M; k++) {
        src_u[k] = (int32_t)(saga_test_u64(&rng_state) % SRC_N);
        src_v[k] = k % 13 == 0 ? src_u[k] : (int32_t)(saga_test_u64(&rng_state) % SRC_N);
        src_w[k] = (float)(saga_test_u64(&rng_state) % 64) / 4.0f + 0.25f;
    }
    for (int k = 0; k < 40; k++) { /* parallel edges, some reversed */
        src_u[SRC_M - 1 - k] = src_u[k];
        src_v[SRC_M - 1 - k] = src_v[k];
        if (k % 3 == 0) {
            src_u[SRC_M - 1 - k] = src_v[k];
            src_v[SRC_M - 1 - k] = src_u[k];
        }
    }
    for (int v = 0; v < SRC_N; v++)
        src_ids[v] = 100 + 7 * (int64_t)v;
}

/* The source built with opts, as a text file loaded with them would be. */
static saga_graph *source_built(const saga_graph_opts *opts, bool weighted) {
    saga_graph *g = NULL;
    saga_status st = saga_graph_from_edges(&g, SRC_N, SRC_M, src_u, src_v, weighted ? src_w : NULL,
                                           src_ids, opts);
    if (st != SAGA_OK)
        fail_msg("%s: %s", saga_status_name(st), saga_last_error());
    return g;
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* The same graph, the weights of parallel edges compared as a multiset: which of two parallel
 * edges comes first is the sort's business, not the graph's. */
static void assert_equivalent(const saga_graph *a, const saga_graph *b, const char *what) {
    int32_t n = saga_graph_n_vertices(a);
    int64_t m = saga_graph_n_edges(a);
    if (saga_graph_n_vertices(b) != n || saga_graph_n_edges(b) != m)
        fail_msg("%s: %d vertices, %lld edges; expected %d, %lld", what, saga_graph_n_vertices(b),
                 (long long)saga_graph_n_edges(b), n, (long long)m);
    if (saga_graph_has_weights(a) != saga_graph_has_weights(b))
        fail_msg("%s: weighted %d, expected %d", what, saga_graph_has_weights(b),
                 saga_graph_has_weights(a));
    saga_csr va[2] = {saga_graph_in(a), saga_graph_out(a)};
    saga_csr vb[2] = {saga_graph_in(b), saga_graph_out(b)};
    for (int d = 0; d < 2; d++) {
        if (memcmp(va[d].offsets, vb[d].offsets, ((size_t)n + 1) * sizeof(int64_t)) != 0 ||
            (m && memcmp(va[d].indices, vb[d].indices, (size_t)m * sizeof(int32_t)) != 0))
            fail_msg("%s: the %s-edges differ", what, d ? "out" : "in");
        if (!va[d].weights)
            continue;
        float *wa = malloc((size_t)m * sizeof *wa + 1), *wb = malloc((size_t)m * sizeof *wb + 1);
        memcpy(wa, va[d].weights, (size_t)m * sizeof *wa);
        memcpy(wb, vb[d].weights, (size_t)m * sizeof *wb);
        for (int64_t k = 0; k < m;) {
            int32_t row = 0;
            while (va[d].offsets[row + 1] <= k)
                row++;
            int64_t r = k + 1;
            while (r < va[d].offsets[row + 1] && va[d].indices[r] == va[d].indices[k])
                r++;
            qsort(wa + k, (size_t)(r - k), sizeof *wa, cmp_float);
            qsort(wb + k, (size_t)(r - k), sizeof *wb, cmp_float);
            k = r;
        }
        if (memcmp(wa, wb, (size_t)m * sizeof *wa) != 0)
            fail_msg("%s: the %s-edge weights differ", what, d ? "out" : "in");
        free(wa);
        free(wb);
    }
    for (int32_t v = 0; v < n; v++)
        assert_int_equal(saga_graph_orig_id(a, v), saga_graph_orig_id(b, v));
}

static void assert_build(const saga_graph *g, bool undirected, saga_self_loops loops,
                         saga_duplicates dup) {
    saga_graph_opts b;
    assert_true(saga_graph_build_opts(g, &b));
    assert_int_equal(b.undirected, undirected);
    assert_int_equal(b.self_loops, loops);
    assert_int_equal(b.duplicates, dup);
}

/* Every build is recorded in the file and read back, with the graph. */
static void test_sgr_build_round_trip(void **state) {
    (void)state;
    make_source();
    for (int u = 0; u < 2; u++)
        for (int sl = 0; sl < SAGA_SELF_LOOPS_COUNT; sl++)
            for (int dup = 0; dup < SAGA_DUPLICATES_COUNT; dup++) {
                saga_graph_opts o = {.undirected = u,
                                     .self_loops = (saga_self_loops)sl,
                                     .duplicates = (saga_duplicates)dup};
                saga_graph *g = source_built(&o, true);
                saga_duplicates resolved = (saga_duplicates)dup;
                if (resolved == SAGA_DUPLICATES_AUTO)
                    resolved = u ? SAGA_DUPLICATES_DROP : SAGA_DUPLICATES_KEEP;
                assert_build(g, u, (saga_self_loops)sl, resolved);
                round_trip(g, "build.sgr");
                char path[4096];
                snprintf(path, sizeof path, "%s", saga_test_tmp("build.sgr"));
                assert_int_equal(saga_sgr_write(g, path), SAGA_OK);
                saga_graph *back = NULL;
                assert_int_equal(saga_sgr_read(&back, path), SAGA_OK);
                assert_build(back, u, (saga_self_loops)sl, resolved);
                saga_graph_free(&back);
                size_t len;
                unsigned char *img = slurp(path, &len);
                assert_int_equal(get64(img + 8) & 0xffffffffu, 2); /* format version 2 */
                assert_int_equal(img[172], 1);
                assert_int_equal(img[173], u);
                assert_int_equal(img[174], sl);
                assert_int_equal(img[175], resolved);
                assert_int_equal(saga_sgr_parse_mem(&back, "build", img, len), SAGA_OK);
                assert_build(back, u, (saga_self_loops)sl, resolved);
                saga_graph_free(&back);
                free(img);
                saga_graph_free(&g);
            }
}

/* A header whose build record promises what the edges do not keep is refused. */
static void test_sgr_build_checked(void **state) {
    (void)state;
    make_source();
    saga_graph *g = source_built(&(saga_graph_opts){.duplicates = SAGA_DUPLICATES_KEEP}, false);
    char path[4096];
    snprintf(path, sizeof path, "%s", saga_test_tmp("directed.sgr"));
    assert_int_equal(saga_sgr_write(g, path), SAGA_OK);
    saga_graph_free(&g);
    size_t len;
    unsigned char *img = slurp(path, &len);
    img[173] = 1;
    fix_header_crc(img);
    assert_refused(img, len, "records an undirected graph");
    img[173] = 0;
    img[174] = SAGA_SELF_LOOPS_DROP;
    fix_header_crc(img);
    assert_refused(img, len, "records self-loops dropped, but vertex");
    img[174] = SAGA_SELF_LOOPS_KEEP;
    img[175] = SAGA_DUPLICATES_SUM;
    fix_header_crc(img);
    assert_refused(img, len, "records parallel edges merged, but vertex");
    img[175] = SAGA_DUPLICATES_KEEP;
    fix_header_crc(img);
    assert_int_equal(saga_sgr_parse_mem(&g, "ok", img, len), SAGA_OK);
    saga_graph_free(&g);
    free(img);
}

/* Loading an .sgr with options gives what loading the source with them gives, or a refusal.
 * Every build of the source is stored, then loaded with every combination of options; for each:
 *  - the result records the options asked for (defaults: as the file was built);
 *  - it is the source built with what it records, whichever way it was reached;
 *  - a file that lost nothing (self-loops and parallel edges kept) takes every option;
 *  - the refusals are the documented ones, with a message naming the file. */
static void test_sgr_load_options(void **state) {
    (void)state;
    make_source();
    char path[4096], path2[4096];
    snprintf(path, sizeof path, "%s", saga_test_tmp("opts.sgr"));
    snprintf(path2, sizeof path2, "%s", saga_test_tmp("again.sgr"));
    int accepted = 0, refused = 0;
    for (int bu = 0; bu < 2; bu++)
        for (int bsl = 0; bsl < SAGA_SELF_LOOPS_COUNT; bsl++)
            for (int bdup = SAGA_DUPLICATES_KEEP; bdup < SAGA_DUPLICATES_COUNT; bdup++) {
                saga_graph_opts b = {.undirected = bu,
                                     .self_loops = (saga_self_loops)bsl,
                                     .duplicates = (saga_duplicates)bdup};
                saga_graph *stored = source_built(&b, true);
                assert_int_equal(saga_sgr_write(stored, path), SAGA_OK);
                bool lossless = bsl == SAGA_SELF_LOOPS_KEEP && bdup == SAGA_DUPLICATES_KEEP;
                for (int ru = 0; ru < 2; ru++)
                    for (int rsl = -1; rsl < SAGA_SELF_LOOPS_COUNT; rsl++)
                        for (int rdup = 0; rdup < SAGA_DUPLICATES_COUNT; rdup++)
                            for (int rw = 0; rw < 2; rw++) {
                                saga_load_opts o = saga_load_opts_defaults();
                                o.graph.undirected = ru;
                                o.graph.self_loops =
                                    rsl < 0 ? SAGA_SELF_LOOPS_KEEP : (saga_self_loops)rsl;
                                o.self_loops_set = rsl >= 0;
                                o.graph.duplicates = (saga_duplicates)rdup;
                                o.weights = rw ? SAGA_WEIGHTS_IGNORE : SAGA_WEIGHTS_AUTO;
                                char what[160];
                                snprintf(what, sizeof what,
                                         "stored u%d sl%d dup%d, loaded u%d sl%d dup%d w%d", bu,
                                         bsl, bdup, ru, rsl, rdup, rw);
                                saga_graph *g = NULL;
                                saga_status st = saga_graph_load(&g, path, &o);
                                /* the refusals saga_io.h documents */
                                bool merged = bdup != SAGA_DUPLICATES_KEEP;
                                saga_duplicates want_dup = rdup != SAGA_DUPLICATES_AUTO
                                                               ? (saga_duplicates)rdup
                                                           : ru ? SAGA_DUPLICATES_DROP
                                                                : (saga_duplicates)bdup;
                                bool lost_loops =
                                    rsl == SAGA_SELF_LOOPS_KEEP && bsl == SAGA_SELF_LOOPS_DROP;
                                bool lost_dups =
                                    merged && (want_dup == SAGA_DUPLICATES_KEEP ||
                                               (want_dup != (saga_duplicates)bdup && !rw));
                                if (lost_loops || lost_dups) {
                                    assert_false(lossless);
                                    if (st != SAGA_ERR_UNSUPPORTED)
                                        fail_msg("%s: expected a refusal, got %s", what,
                                                 saga_status_name(st));
                                    assert_null(g);
                                    saga_test_assert_error_contains(path, "cannot be applied",
                                                                    NULL);
                                    refused++;
                                    continue;
                                }
                                if (st != SAGA_OK)
                                    fail_msg("%s: %s: %s", what, saga_status_name(st),
                                             saga_last_error());
                                saga_graph_opts got;
                                assert_true(saga_graph_build_opts(g, &got));
                                assert_int_equal(got.undirected, bu || ru);
                                assert_int_equal(got.self_loops, rsl < 0 ? bsl : rsl);
                                assert_int_equal(got.duplicates, want_dup);
                                assert_int_equal(saga_graph_has_weights(g), !rw);
                                saga_graph *want = source_built(&got, !rw);
                                assert_equivalent(want, g, what);
                                saga_graph_free(&want);
                                /* written again, it reads back with what it records */
                                saga_graph *again = NULL;
                                assert_int_equal(saga_sgr_write(g, path2), SAGA_OK);
                                st = saga_sgr_read(&again, path2);
                                if (st != SAGA_OK)
                                    fail_msg("%s, written again: %s", what, saga_last_error());
                                assert_build(again, got.undirected, got.self_loops, got.duplicates);
                                saga_graph_free(&again);
                                saga_graph_free(&g);
                                accepted++;
                            }
                saga_graph_free(&stored);
            }
    /* both kinds happen, and most combinations are accepted (350 of 576) */
    assert_true(refused > 0);
    print_message("%d loads accepted, %d refused\n", accepted, refused);
    assert_true(accepted > refused);
}

/* The cases of the issue, by name: --undirected on a directed file is the undirected graph of the
 * text path; on an undirected file it changes nothing, and the mapping stays. */
static void test_sgr_load_undirected(void **state) {
    (void)state;
    make_source();
    saga_graph *directed = source_built(NULL, false);
    char path[4096], upath[4096];
    snprintf(path, sizeof path, "%s", saga_test_tmp("directed.sgr"));
    snprintf(upath, sizeof upath, "%s", saga_test_tmp("undirected.sgr"));
    assert_int_equal(saga_sgr_write(directed, path), SAGA_OK);
    saga_load_opts o = saga_load_opts_defaults();
    o.graph.undirected = true;
    saga_graph *g = NULL, *text = source_built(&o.graph, false);
    assert_int_equal(saga_graph_load(&g, path, &o), SAGA_OK);
    assert_true(saga_graph_n_edges(g) > saga_graph_n_edges(directed));
    assert_true(saga_graph_is_symmetric(g));
    assert_same_graph(text, g);
    saga_graph_free(&g);

    /* already undirected: loaded as it is, mapped */
    assert_int_equal(saga_sgr_write(text, upath), SAGA_OK);
    assert_int_equal(saga_graph_load(&g, upath, &o), SAGA_OK);
    assert_non_null(g->mapping);
    assert_same_graph(text, g);
    saga_graph_free(&g);
    /* no options at all: the file as it is, also for the directed one */
    assert_int_equal(saga_graph_load(&g, path, NULL), SAGA_OK);
    assert_non_null(g->mapping);
    assert_same_graph(directed, g);
    saga_graph_free(&g);

    /* weights required from a file without them: refused, naming the file */
    o = saga_load_opts_defaults();
    o.weights = SAGA_WEIGHTS_REQUIRE;
    assert_int_equal(saga_graph_load(&g, path, &o), SAGA_ERR_UNSUPPORTED);
    saga_test_assert_error_contains(path, "weights are required", NULL);
    assert_null(g);
    saga_graph_free(&text);
    saga_graph_free(&directed);
}

/* A version 1 file loads with its build unknown; options that depend on the build are refused
 * with a message saying to convert the source again, the others applied. */
static void test_sgr_version1(void **state) {
    (void)state;
    make_source();
    saga_graph *g = source_built(NULL, true), *back = NULL;
    char path[4096], v1[4096];
    snprintf(path, sizeof path, "%s", saga_test_tmp("v2.sgr"));
    assert_int_equal(saga_sgr_write(g, path), SAGA_OK);
    size_t len;
    unsigned char *img = slurp(path, &len);
    put32(img + 8, 1);
    memset(img + 172, 0, 4);
    fix_header_crc(img);
    snprintf(v1, sizeof v1, "%s", saga_test_write("v1.sgr", img, len));
    free(img);

    if (saga_graph_load(&back, v1, NULL) != SAGA_OK)
        fail_msg("%s", saga_last_error());
    saga_graph_opts b;
    assert_false(saga_graph_build_opts(back, &b));
    assert_same_graph(g, back);
    saga_graph_free(&back);

    saga_load_opts o = saga_load_opts_defaults();
    o.graph.undirected = true;
    assert_int_equal(saga_graph_load(&back, v1, &o), SAGA_ERR_UNSUPPORTED);
    saga_test_assert_error_contains(v1, "--undirected cannot be applied", "format version 1",
                                    "convert the source again", NULL);
    o = saga_load_opts_defaults();
    o.self_loops_set = true;
    assert_int_equal(saga_graph_load(&back, v1, &o), SAGA_ERR_UNSUPPORTED);
    saga_test_assert_error_contains("--self-loops keep", NULL);
    o = saga_load_opts_defaults();
    o.graph.duplicates = SAGA_DUPLICATES_SUM;
    assert_int_equal(saga_graph_load(&back, v1, &o), SAGA_ERR_UNSUPPORTED);
    saga_test_assert_error_contains("--duplicates sum", NULL);

    /* dropping self-loops and weights needs no knowing how the file was built */
    o = saga_load_opts_defaults();
    o.graph.self_loops = SAGA_SELF_LOOPS_DROP;
    o.weights = SAGA_WEIGHTS_IGNORE;
    assert_int_equal(saga_graph_load(&back, v1, &o), SAGA_OK);
    saga_graph *want = source_built(&o.graph, false);
    assert_same_graph(want, back);
    assert_false(saga_graph_build_opts(back, &b));
    saga_graph_free(&want);
    saga_graph_free(&back);

    /* written again, it stays "not recorded" */
    assert_int_equal(saga_graph_load(&back, v1, NULL), SAGA_OK);
    assert_int_equal(saga_sgr_write(back, path), SAGA_OK);
    saga_graph_free(&back);
    img = slurp(path, &len);
    assert_int_equal(img[8], 2);
    assert_memory_equal(img + 172, "\0\0\0\0", 4);
    free(img);
    assert_int_equal(saga_sgr_read(&back, path), SAGA_OK);
    assert_false(saga_graph_build_opts(back, &b));
    saga_graph_free(&back);
    saga_graph_free(&g);
}

/* ---- files --------------------------------------------------------------------------------------
 */

static void test_sgr_files(void **state) {
    (void)state;
    saga_graph *g = random_graph(30, 90, true, false), *back = NULL;
    const char *missing_dir = saga_test_tmp("no-such-dir/g.sgr");
    assert_int_equal(saga_sgr_write(g, missing_dir), SAGA_ERR_IO);
    saga_test_assert_error_contains(missing_dir, "cannot create", NULL);
    assert_int_equal(saga_sgr_read(&back, missing_dir), SAGA_ERR_IO);
    saga_test_assert_error_contains(missing_dir, "cannot open", NULL);

    /* overwriting replaces the file and leaves no temporary behind */
    char path[4096];
    snprintf(path, sizeof path, "%s", saga_test_tmp("over.sgr"));
    assert_int_equal(saga_sgr_write(g, path), SAGA_OK);
    saga_graph *h = random_graph(20, 10, false, true);
    assert_int_equal(saga_sgr_write(h, path), SAGA_OK);
    assert_int_equal(saga_sgr_read(&back, path), SAGA_OK);
    assert_same_graph(h, back);
    saga_graph_free(&back);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    DIR *d = opendir(dirname(dir));
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));)
        if (strstr(e->d_name, ".tmp."))
            fail_msg("temporary file %s left behind", e->d_name);
    closedir(d);

    /* a directory is not an .sgr file */
    snprintf(dir, sizeof dir, "%s", path);
    assert_int_equal(saga_sgr_read(&back, dirname(dir)), SAGA_ERR_IO);
    saga_test_assert_error_contains("not a regular file", NULL);
    const char *empty = saga_test_write("empty.sgr", "", 0);
    assert_int_equal(saga_sgr_read(&back, empty), SAGA_ERR_CORRUPT);
    saga_test_assert_error_contains(empty, "empty file", NULL);
    saga_graph_free(&g);
    saga_graph_free(&h);
}

static void test_sgr_failing_allocations(void **state) {
    (void)state;
    saga_status st;
    saga_graph *g = random_graph(100, 700, true, true), *back = NULL;
    const char *path = saga_test_tmp("oom.sgr");
    IO_OOM_LOOP(st = saga_sgr_write(g, path), (void)0);
    IO_OOM_LOOP(st = saga_sgr_read(&back, path), saga_graph_free(&back));
    /* options applied after loading: a rebuild that frees what it took on every failure */
    saga_load_opts o = saga_load_opts_defaults();
    o.graph.undirected = true;
    o.graph.self_loops = SAGA_SELF_LOOPS_DROP;
    IO_OOM_LOOP(st = saga_graph_load(&back, path, &o), saga_graph_free(&back));
    size_t len;
    unsigned char *bytes = slurp(path, &len);
    IO_OOM_LOOP(st = saga_sgr_parse_mem(&back, "oom", bytes, len), saga_graph_free(&back));
    free(bytes);
    assert_int_equal(saga_sgr_read(&back, path), SAGA_OK);
    assert_same_graph(g, back);
    saga_graph_free(&back);
    saga_graph_free(&g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sgr_round_trips),
        cmocka_unit_test(test_sgr_real_graphs),
        cmocka_unit_test(test_sgr_truncated),
        cmocka_unit_test(test_sgr_flipped_bytes),
        cmocka_unit_test(test_sgr_magic_version_flags),
        cmocka_unit_test(test_sgr_inconsistent_but_checksummed),
        cmocka_unit_test(test_sgr_build_round_trip),
        cmocka_unit_test(test_sgr_build_checked),
        cmocka_unit_test(test_sgr_load_options),
        cmocka_unit_test(test_sgr_load_undirected),
        cmocka_unit_test(test_sgr_version1),
        cmocka_unit_test(test_sgr_random_bytes),
        cmocka_unit_test(test_sgr_files),
        cmocka_unit_test(test_sgr_failing_allocations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
