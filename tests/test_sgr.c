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
static uint64_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* n vertices, m random edges; weights and original ids on request. */
static saga_graph *random_graph(int32_t n, int64_t m, bool weighted, bool ids) {
    int32_t *src = malloc((size_t)m * sizeof *src + 1), *dst = malloc((size_t)m * sizeof *dst + 1);
    float *w = weighted ? malloc((size_t)m * sizeof *w + 1) : NULL;
    int64_t *orig = ids ? malloc((size_t)n * sizeof *orig + 1) : NULL;
    assert_true(src && dst);
    for (int64_t k = 0; k < m; k++) {
        src[k] = (int32_t)(rng() % (uint64_t)n);
        dst[k] = (int32_t)(rng() % (uint64_t)n);
        if (w)
            w[k] = (float)(rng() % 1000) / 8.0f - 20.0f;
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
    put32(img + 8, 2);
    assert_refused(img, len, "written by a newer saga (version 2); this saga reads version 1");
    fix_header_crc(img);
    assert_refused(img, len, "written by a newer saga (version 2); this saga reads version 1");
    put32(img + 8, 0);
    fix_header_crc(img);
    assert_refused(img, len, "unknown .sgr version 0");
    put32(img + 8, 1);
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
        size_t len = (size_t)(rng() % sizeof buf);
        for (size_t k = 0; k < len; k++)
            buf[k] = (unsigned char)rng();
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
        cmocka_unit_test(test_sgr_random_bytes),
        cmocka_unit_test(test_sgr_files),
        cmocka_unit_test(test_sgr_failing_allocations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
