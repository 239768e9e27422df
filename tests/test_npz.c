/* test_npz.c - the .npy header and .npz (ZIP, stored entries) writer: header bytes as numpy
 * writes them, the archive's records and CRCs read back field by field, and its errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_util.h"

/* The app's sources are not in the library; they are compiled into this test. */
#include "../apps/npz.c"

#include <stdlib.h>
#include <sys/stat.h>

static uint32_t rd16(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

static uint32_t rd32(const unsigned char *p) {
    return rd16(p) | rd16(p + 2) << 16;
}

static unsigned char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* The header of np.zeros((3, 4), np.float32): numpy's dict, padded with spaces and a '\n' to the
 * next multiple of 64 bytes (numpy itself pads further, to 128 here too). */
static void test_npz_header_bytes_match_numpy(void **state) {
    (void)state;
    char h[256];
    size_t n = npy_header(h, sizeof h, NPZ_F32, 2, (int64_t[]){3, 4});
    assert_int_equal(n, 128);
    assert_memory_equal(h, "\x93NUMPY\x01\x00", 8);
    assert_int_equal(rd16((const unsigned char *)h + 8), 118);
    const char dict[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }";
    assert_memory_equal(h + 10, dict, sizeof dict - 1);
    for (size_t i = 10 + sizeof dict - 1; i < 127; i++)
        assert_int_equal(h[i], ' ');
    assert_int_equal(h[127], '\n');

    /* one dimension "(n,)", no dimension "()", each dtype's descr */
    n = npy_header(h, sizeof h, NPZ_I64, 1, (int64_t[]){7});
    assert_int_equal(n, 128);
    assert_non_null(strstr(h + 10, "{'descr': '<i8', 'fortran_order': False, 'shape': (7,), }"));
    n = npy_header(h, sizeof h, NPZ_U8, 0, NULL);
    assert_int_equal(n, 128);
    assert_non_null(strstr(h + 10, "'descr': '|u1'"));
    assert_non_null(strstr(h + 10, "'shape': (), }"));
    n = npy_header(h, sizeof h, NPZ_F64, 2, (int64_t[]){0, 6});
    assert_non_null(strstr(h + 10, "'descr': '<f8'"));
    assert_non_null(strstr(h + 10, "'shape': (0, 6), }"));
    n = npy_header(h, sizeof h, NPZ_I32, 1, (int64_t[]){2});
    assert_non_null(strstr(h + 10, "'descr': '<i4'"));

    /* a long shape (a dict of 125 characters) takes the header to the next multiple, 192 */
    int64_t big[8] = {1000000000000, 1000000000000, 1000000000000, 1000000000000, 1, 2, 3, 4};
    n = npy_header(h, sizeof h, NPZ_F32, 8, big);
    assert_int_equal(n, 192);
    assert_int_equal(rd16((const unsigned char *)h + 8), 182);
    assert_int_equal(h[191], '\n');
    assert_non_null(strstr(h + 10, "(1000000000000, 1000000000000, 1000000000000, "
                                   "1000000000000, 1, 2, 3, 4), }"));

    /* bad arguments and a buffer too small give 0 */
    assert_int_equal(npy_header(h, sizeof h, NPZ_DTYPE_COUNT, 1, (int64_t[]){1}), 0);
    assert_int_equal(npy_header(h, sizeof h, NPZ_F32, 1, (int64_t[]){-1}), 0);
    assert_int_equal(npy_header(h, sizeof h, NPZ_F32, NPY_MAX_DIMS + 1, big), 0);
    assert_int_equal(npy_header(h, 127, NPZ_F32, 2, (int64_t[]){3, 4}), 0);
}

static void test_npz_crc32_check_value(void **state) {
    (void)state;
    /* the CRC-32 check value of the ZIP/zlib polynomial */
    assert_int_equal(npz_crc32(0, "123456789", 9), 0xCBF43926u);
    /* continued over pieces, as the writer does over header and data */
    assert_int_equal(npz_crc32(npz_crc32(0, "1234", 4), "56789", 5), 0xCBF43926u);
    assert_int_equal(npz_crc32(0, "", 0), 0);
}

/* Writes two arrays and reads every record of the ZIP back. */
static void test_npz_archive_reads_back(void **state) {
    (void)state;
    const char *path = saga_test_tmp("two.npz");
    const float x[6] = {1, 2, 3, 4, 5, 6};
    const int64_t ei[4] = {0, 1, 2, 3};
    npz_writer *w = NULL;
    assert_int_equal(npz_open(&w, path), SAGA_OK);
    assert_int_equal(npz_add(w, "x", NPZ_F32, 2, (int64_t[]){2, 3}, x), SAGA_OK);
    assert_int_equal(npz_add(w, "edge_index", NPZ_I64, 2, (int64_t[]){2, 2}, ei), SAGA_OK);
    assert_int_equal(npz_add(w, "empty", NPZ_F32, 1, (int64_t[]){0}, NULL), SAGA_OK);
    assert_int_equal(npz_finish(w), SAGA_OK);
    npz_free(&w);
    assert_null(w);

    size_t len = 0;
    unsigned char *b = slurp(path, &len);
    const char *names[3] = {"x.npy", "edge_index.npy", "empty.npy"};
    const void *data[3] = {x, ei, NULL};
    const size_t bytes[3] = {sizeof x, sizeof ei, 0};
    /* the end record, the central directory, each local entry */
    assert_true(len > 22);
    const unsigned char *end = b + len - 22;
    assert_int_equal(rd32(end), 0x06054b50);
    assert_int_equal(rd16(end + 8), 3);
    assert_int_equal(rd16(end + 10), 3);
    uint32_t cd = rd32(end + 16), cd_size = rd32(end + 12);
    assert_int_equal(cd + cd_size, len - 22);
    const unsigned char *c = b + cd;
    size_t local = 0;
    for (int i = 0; i < 3; i++) {
        size_t nlen = strlen(names[i]);
        assert_int_equal(rd32(c), 0x02014b50);
        assert_int_equal(rd16(c + 10), 0); /* stored */
        assert_int_equal(rd16(c + 28), nlen);
        assert_memory_equal(c + 46, names[i], nlen);
        uint32_t crc = rd32(c + 16), size = rd32(c + 20);
        assert_int_equal(size, rd32(c + 24));
        assert_int_equal(rd32(c + 42), local);
        const unsigned char *l = b + rd32(c + 42);
        assert_int_equal(rd32(l), 0x04034b50);
        assert_int_equal(rd16(l + 8), 0);
        assert_int_equal(rd32(l + 14), crc);
        assert_int_equal(rd32(l + 18), size);
        assert_int_equal(rd16(l + 26), nlen);
        assert_memory_equal(l + 30, names[i], nlen);
        const unsigned char *npy = l + 30 + nlen;
        assert_int_equal(npz_crc32(0, npy, size), crc);
        assert_memory_equal(npy, "\x93NUMPY\x01\x00", 8);
        size_t hlen = 10 + rd16(npy + 8);
        assert_int_equal(hlen % NPY_ALIGN, 0);
        assert_int_equal(size, hlen + bytes[i]);
        if (bytes[i])
            assert_memory_equal(npy + hlen, data[i], bytes[i]);
        local = (size_t)(npy + size - b);
        c += 46 + nlen;
    }
    assert_int_equal(local, cd);
    assert_non_null(strstr((const char *)b + 30 + 5 + 10, "'shape': (2, 3), }"));
    free(b);
}

static void test_npz_errors(void **state) {
    (void)state;
    npz_writer *w = NULL;
    const char *dir = saga_test_tmp("npz-no-such-dir");
    char path[4096];
    snprintf(path, sizeof path, "%s/a.npz", dir);
    assert_int_equal(npz_open(&w, path), SAGA_ERR_IO);
    assert_null(w);
    saga_test_assert_error_contains(path, NULL);

    const char *p = saga_test_tmp("bad.npz");
    float v = 1;
    assert_int_equal(npz_open(&w, p), SAGA_OK);
    assert_int_equal(npz_add(w, "a/b", NPZ_F32, 1, (int64_t[]){1}, &v), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("bad array name 'a/b'", NULL);
    assert_int_equal(npz_add(w, "", NPZ_F32, 1, (int64_t[]){1}, &v), SAGA_ERR_INVALID_ARG);
    assert_int_equal(npz_add(w, "v", NPZ_F32, 1, (int64_t[]){-2}, &v), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("bad.npz: array 'v'", NULL);
    assert_int_equal(npz_add(w, "v", NPZ_F32, 1, (int64_t[]){1}, NULL), SAGA_ERR_INVALID_ARG);
    int64_t huge[2] = {1 << 20, 1 << 20};
    assert_int_equal(npz_add(w, "h", NPZ_F32, 2, huge, &v), SAGA_ERR_UNSUPPORTED);
    saga_test_assert_error_contains("4 GiB", NULL);
    /* an archive never finished is removed: no half file for numpy */
    npz_free(&w);
    struct stat sb;
    assert_int_not_equal(stat(p, &sb), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_npz_header_bytes_match_numpy),
        cmocka_unit_test(test_npz_crc32_check_value),
        cmocka_unit_test(test_npz_archive_reads_back),
        cmocka_unit_test(test_npz_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
