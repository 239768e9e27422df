/* test_reader.c - chunked byte readers (plain, gzip, memory) and the line iterator. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"

#include "reader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Reads a whole file into a malloc'd buffer. */
static unsigned char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    assert_true(n >= 0);
    rewind(f);
    unsigned char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* Reads everything from r into a malloc'd buffer; returns the status of the last call. */
static saga_status drain(saga_reader *r, char **out, size_t *out_len, int *n_chunks) {
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    saga_status st;
    const char *data;
    size_t n;
    int chunks = 0;
    while ((st = saga_reader_next(r, &data, &n)) == SAGA_OK && n > 0) {
        chunks++;
        if (len + n > cap) {
            while (len + n > cap)
                cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
        memcpy(buf + len, data, n);
        len += n;
    }
    *out = buf;
    *out_len = len;
    if (n_chunks)
        *n_chunks = chunks;
    return st;
}

/* Deterministic text of about `size` bytes: numbered lines of varying length. */
static char *make_text(size_t size, size_t *len) {
    char *t = malloc(size + 64);
    assert_non_null(t);
    size_t o = 0;
    for (unsigned long i = 0; o < size; i++)
        o += (size_t)sprintf(t + o, "%lu\t%lu %.*s\n", i, i * 7919 % 100003, (int)(i % 23),
                             "abcdefghijklmnopqrstuvwxyz");
    *len = o;
    return t;
}

static void test_reader_plain_file_small(void **state) {
    (void)state;
    const char *path = saga_test_write_str("small.txt", "1 2\n3 4\n");
    saga_reader *r = NULL;
    assert_int_equal(saga_reader_open(&r, path), SAGA_OK);
    assert_false(saga_reader_is_gzip(r));
    assert_string_equal(saga_reader_name(r), path);
    assert_int_equal(saga_reader_source_size(r), 8);
    char *buf;
    size_t len;
    assert_int_equal(drain(r, &buf, &len, NULL), SAGA_OK);
    assert_int_equal(len, 8);
    assert_memory_equal(buf, "1 2\n3 4\n", 8);
    /* further calls keep reporting the end */
    const char *d;
    size_t n = 99;
    assert_int_equal(saga_reader_next(r, &d, &n), SAGA_OK);
    assert_int_equal(n, 0);
    free(buf);
    saga_reader_close(&r);
    assert_null(r);
    saga_reader_close(&r); /* NULL is fine */
    saga_reader_close(NULL);
}

static void test_reader_plain_file_large_in_chunks(void **state) {
    (void)state;
    size_t len;
    char *text = make_text(11u << 20, &len);
    const char *path = saga_test_write("large.txt", text, len);
    saga_reader *r = NULL;
    assert_int_equal(saga_reader_open(&r, path), SAGA_OK);
    char *buf;
    size_t got;
    int chunks = 0;
    assert_int_equal(drain(r, &buf, &got, &chunks), SAGA_OK);
    assert_int_equal(got, len);
    assert_memory_equal(buf, text, len);
    assert_true(chunks >= 3); /* 4 MiB chunks */
    free(buf);
    free(text);
    saga_reader_close(&r);
}

static void test_reader_empty_files(void **state) {
    (void)state;
    const char *plain = saga_test_write("empty.txt", "", 0);
    const char *gz = saga_test_write_gz("empty.txt.gz", "", 0);
    const char *paths[] = {plain, gz};
    for (int i = 0; i < 2; i++) {
        saga_reader *r = NULL;
        assert_int_equal(saga_reader_open(&r, paths[i]), SAGA_OK);
        assert_int_equal(saga_reader_is_gzip(r), i == 1);
        const char *d;
        size_t n = 1;
        assert_int_equal(saga_reader_next(r, &d, &n), SAGA_OK);
        assert_int_equal(n, 0);
        saga_reader_close(&r);
    }
}

static void test_reader_gzip_equals_plain(void **state) {
    (void)state;
    size_t len;
    char *text = make_text(13u << 20, &len); /* more than the ring holds */
    /* the name says nothing: gzip is told by its magic bytes */
    const char *path = saga_test_write_gz("data.txt", text, len);
    saga_reader *r = NULL;
    assert_int_equal(saga_reader_open(&r, path), SAGA_OK);
    assert_true(saga_reader_is_gzip(r));
    assert_true(saga_reader_source_size(r) > 0 && saga_reader_source_size(r) < len);
    char *buf;
    size_t got;
    assert_int_equal(drain(r, &buf, &got, NULL), SAGA_OK);
    assert_int_equal(got, len);
    assert_memory_equal(buf, text, len);
    free(buf);
    saga_reader_close(&r);
    free(text);
}

static void test_reader_gzip_concatenated_members(void **state) {
    (void)state;
    const char *a = saga_test_write_gz("a.gz", "1 2\n", 4);
    const char *b = saga_test_write_gz("b.gz", "3 4\n5 6\n", 8);
    size_t la, lb;
    unsigned char *da = slurp(a, &la), *db = slurp(b, &lb);
    unsigned char *both = malloc(la + lb);
    memcpy(both, da, la);
    memcpy(both + la, db, lb);
    const char *path = saga_test_write("both.gz", both, la + lb);

    saga_reader *r = NULL;
    assert_int_equal(saga_reader_open(&r, path), SAGA_OK);
    char *buf;
    size_t got;
    assert_int_equal(drain(r, &buf, &got, NULL), SAGA_OK);
    assert_int_equal(got, 12);
    assert_memory_equal(buf, "1 2\n3 4\n5 6\n", 12);
    free(buf);
    saga_reader_close(&r);

    /* the same from memory */
    assert_int_equal(saga_reader_open_mem(&r, "both.gz", both, la + lb), SAGA_OK);
    assert_true(saga_reader_is_gzip(r));
    assert_int_equal(drain(r, &buf, &got, NULL), SAGA_OK);
    assert_int_equal(got, 12);
    assert_memory_equal(buf, "1 2\n3 4\n5 6\n", 12);
    free(buf);
    saga_reader_close(&r);
    free(da);
    free(db);
    free(both);
}

static void test_reader_gzip_truncated(void **state) {
    (void)state;
    size_t len;
    char *text = make_text(6u << 20, &len);
    const char *full = saga_test_write_gz("t.gz", text, len);
    size_t zlen;
    unsigned char *z = slurp(full, &zlen);
    /* cut inside the deflate data, and cut only the 8-byte trailer */
    size_t cuts[] = {zlen / 2, zlen - 4, 10};
    for (int i = 0; i < 3; i++) {
        const char *path = saga_test_write("cut.gz", z, cuts[i]);
        saga_reader *r = NULL;
        assert_int_equal(saga_reader_open(&r, path), SAGA_OK);
        char *buf;
        size_t got;
        assert_int_equal(drain(r, &buf, &got, NULL), SAGA_ERR_CORRUPT);
        saga_test_assert_error_contains(path, ": truncated gzip stream", NULL);
        assert_true(got <= len);
        free(buf);
        saga_reader_close(&r);

        assert_int_equal(saga_reader_open_mem(&r, "mem.gz", z, cuts[i]), SAGA_OK);
        assert_int_equal(drain(r, &buf, &got, NULL), SAGA_ERR_CORRUPT);
        saga_test_assert_error_contains("mem.gz: truncated gzip stream", NULL);
        free(buf);
        saga_reader_close(&r);
    }
    free(z);
    free(text);
}

static void test_reader_gzip_corrupt(void **state) {
    (void)state;
    size_t len;
    char *text = make_text(1u << 20, &len);
    const char *full = saga_test_write_gz("c.gz", text, len);
    size_t zlen;
    unsigned char *z = slurp(full, &zlen);
    /* garble a run of bytes in the middle of the deflate stream */
    for (size_t k = zlen / 2; k < zlen / 2 + 64; k++)
        z[k] ^= 0x5a;
    const char *path = saga_test_write("bad.gz", z, zlen);
    saga_reader *r = NULL;
    assert_int_equal(saga_reader_open(&r, path), SAGA_OK);
    char *buf;
    size_t got;
    assert_int_equal(drain(r, &buf, &got, NULL), SAGA_ERR_CORRUPT);
    saga_test_assert_error_contains(path, ": corrupt gzip data (zlib: ", NULL);
    free(buf);
    saga_reader_close(&r);

    /* the magic followed by garbage */
    const unsigned char junk[] = {0x1f, 0x8b, 0x08, 0x00, 0xff, 0xff, 0xff, 0xff,
                                  0x00, 0x03, 0xde, 0xad, 0xbe, 0xef, 0x00, 0x11};
    assert_int_equal(saga_reader_open_mem(&r, "junk", junk, sizeof junk), SAGA_OK);
    assert_int_equal(drain(r, &buf, &got, NULL), SAGA_ERR_CORRUPT);
    saga_test_assert_error_contains("junk: ", "gzip", NULL);
    free(buf);
    saga_reader_close(&r);

    /* trailing garbage after a complete member */
    unsigned char *tail = malloc(zlen + 8);
    unsigned char *good = slurp(full, &zlen);
    memcpy(tail, good, zlen);
    memcpy(tail + zlen, "garbage!", 8);
    assert_int_equal(saga_reader_open_mem(&r, "tail.gz", tail, zlen + 8), SAGA_OK);
    assert_int_equal(drain(r, &buf, &got, NULL), SAGA_ERR_CORRUPT);
    saga_test_assert_error_contains("tail.gz: corrupt gzip data", NULL);
    free(buf);
    saga_reader_close(&r);
    free(tail);
    free(good);
    free(z);
    free(text);
}

static void test_reader_close_before_end(void **state) {
    (void)state;
    size_t len;
    char *text = make_text(30u << 20, &len);
    const char *path = saga_test_write_gz("early.gz", text, len);
    for (int reads = 0; reads < 3; reads++) {
        saga_reader *r = NULL;
        assert_int_equal(saga_reader_open(&r, path), SAGA_OK);
        for (int i = 0; i < reads; i++) {
            const char *d;
            size_t n;
            assert_int_equal(saga_reader_next(r, &d, &n), SAGA_OK);
            assert_true(n > 0);
            if (i == 0)
                assert_memory_equal(d, text, n);
        }
        /* sleeping lets the inflating thread fill the ring and block on it */
        if (reads == 2)
            usleep(200000);
        saga_reader_close(&r);
        assert_null(r);
    }
    free(text);
}

static void test_reader_open_errors(void **state) {
    (void)state;
    saga_reader *r = NULL;
    const char *missing = saga_test_tmp("does-not-exist.txt");
    assert_int_equal(saga_reader_open(&r, missing), SAGA_ERR_IO);
    assert_null(r);
    saga_test_assert_error_contains(missing, "No such file or directory", NULL);

    const char *dir = saga_test_tmp("a-directory");
    assert_int_equal(mkdir(dir, 0700), 0);
    assert_int_equal(saga_reader_open(&r, dir), SAGA_ERR_IO);
    assert_null(r);
    saga_test_assert_error_contains(dir, "Is a directory", NULL);

    if (geteuid() != 0) { /* root reads anything */
        const char *locked = saga_test_write_str("locked.txt", "1 2\n");
        assert_int_equal(chmod(locked, 0), 0);
        assert_int_equal(saga_reader_open(&r, locked), SAGA_ERR_IO);
        saga_test_assert_error_contains(locked, "Permission denied", NULL);
    }
}

static void test_reader_memory_plain_and_gzip(void **state) {
    (void)state;
    saga_reader *r = NULL;
    const char text[] = "# c\n0 1\n";
    assert_int_equal(saga_reader_open_mem(&r, "m.txt", text, sizeof text - 1), SAGA_OK);
    assert_false(saga_reader_is_gzip(r));
    assert_string_equal(saga_reader_name(r), "m.txt");
    assert_int_equal(saga_reader_source_size(r), sizeof text - 1);
    char *buf;
    size_t got;
    assert_int_equal(drain(r, &buf, &got, NULL), SAGA_OK);
    assert_int_equal(got, sizeof text - 1);
    assert_memory_equal(buf, text, got);
    free(buf);
    saga_reader_close(&r);

    size_t len;
    char *big = make_text(9u << 20, &len);
    size_t zlen;
    unsigned char *z = slurp(saga_test_write_gz("m.gz", big, len), &zlen);
    assert_int_equal(saga_reader_open_mem(&r, NULL, z, zlen), SAGA_OK);
    assert_true(saga_reader_is_gzip(r));
    assert_string_equal(saga_reader_name(r), "<memory>");
    assert_int_equal(drain(r, &buf, &got, NULL), SAGA_OK);
    assert_int_equal(got, len);
    assert_memory_equal(buf, big, len);
    free(buf);
    saga_reader_close(&r);
    free(z);
    free(big);

    assert_int_equal(saga_reader_open_mem(&r, "zero", NULL, 0), SAGA_OK);
    const char *d;
    size_t n = 5;
    assert_int_equal(saga_reader_next(r, &d, &n), SAGA_OK);
    assert_int_equal(n, 0);
    saga_reader_close(&r);
}

/* Collects all lines of r, joined with '|'. */
static saga_status join_lines(saga_reader *r, char *out, size_t cap, int64_t *n_lines) {
    saga_lines *l = NULL;
    saga_status st = saga_lines_open(&l, r);
    if (st < 0)
        return st;
    size_t o = 0;
    out[0] = '\0';
    const char *line;
    size_t len;
    while ((st = saga_lines_next(l, &line, &len)) == SAGA_OK && line) {
        assert_true(o + len + 2 < cap);
        if (o)
            out[o++] = '|';
        memcpy(out + o, line, len);
        o += len;
        out[o] = '\0';
        assert_int_equal(saga_lines_number(l), ++*n_lines);
    }
    saga_lines_close(&l);
    assert_null(l);
    return st;
}

static void test_reader_lines_endings(void **state) {
    (void)state;
    struct {
        const char *in, *out;
        int64_t n;
    } cases[] = {
        {"a\nb\nc\n", "a|b|c", 3},
        {"a\r\nb\r\nc", "a|b|c", 3}, /* CRLF, last line without newline */
        {"a\n\nb\r\n\r\n", "a||b|", 4},
        {"x\r", "x", 1}, /* a lone trailing CR */
        {"", "", 0},
        {"\n", "", 1},
        {"one line", "one line", 1},
        {"tab\there \n", "tab\there ", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        saga_reader *r = NULL;
        assert_int_equal(saga_reader_open_mem(&r, "l", cases[i].in, strlen(cases[i].in)), SAGA_OK);
        char out[256];
        int64_t n = 0;
        assert_int_equal(join_lines(r, out, sizeof out, &n), SAGA_OK);
        assert_string_equal(out, cases[i].out);
        assert_int_equal(n, cases[i].n);
    }
}

static void test_reader_lines_nul_byte(void **state) {
    (void)state;
    const char text[] = "1 2\n3\0 4\n5 6\n";
    const char *path = saga_test_write("nul.txt", text, sizeof text - 1);
    saga_reader *r = NULL;
    assert_int_equal(saga_reader_open(&r, path), SAGA_OK);
    char out[64];
    int64_t n = 0;
    assert_int_equal(join_lines(r, out, sizeof out, &n), SAGA_ERR_PARSE);
    assert_int_equal(n, 1);
    saga_test_assert_error_contains(path, ":2: NUL byte (binary data?)", NULL);
}

static void test_reader_lines_across_chunks_and_long(void **state) {
    (void)state;
    /* numbered lines over several 4 MiB chunks, then one 9 MiB line, then a short tail */
    size_t len;
    char *text = make_text(10u << 20, &len);
    size_t long_len = 9u << 20;
    char *all = malloc(len + long_len + 16);
    memcpy(all, text, len);
    memset(all + len, 'z', long_len);
    memcpy(all + len + long_len, "\r\nend", 5);
    size_t total = len + long_len + 5;
    for (int gz = 0; gz < 2; gz++) {
        const char *path =
            gz ? saga_test_write_gz("lines.gz", all, total) : saga_test_write("lines", all, total);
        saga_reader *r = NULL;
        assert_int_equal(saga_reader_open(&r, path), SAGA_OK);
        saga_lines *l = NULL;
        assert_int_equal(saga_lines_open(&l, r), SAGA_OK);
        assert_string_equal(saga_lines_name(l), path);
        const char *line;
        size_t n;
        size_t o = 0;
        int64_t count = 0;
        while (o < len) {
            assert_int_equal(saga_lines_next(l, &line, &n), SAGA_OK);
            assert_non_null(line);
            const char *nl = memchr(text + o, '\n', len - o);
            size_t expect = (size_t)(nl - (text + o));
            assert_int_equal(n, expect);
            assert_memory_equal(line, text + o, n);
            o += expect + 1;
            count++;
        }
        assert_int_equal(saga_lines_number(l), count);
        assert_int_equal(saga_lines_next(l, &line, &n), SAGA_OK);
        assert_int_equal(n, long_len);
        assert_true(line[0] == 'z' && line[n - 1] == 'z');
        assert_int_equal(saga_lines_next(l, &line, &n), SAGA_OK);
        assert_int_equal(n, 3);
        assert_memory_equal(line, "end", 3);
        assert_int_equal(saga_lines_number(l), count + 2);
        assert_int_equal(saga_lines_next(l, &line, &n), SAGA_OK);
        assert_null(line);
        saga_lines_close(&l);
    }
    free(all);
    free(text);
}

static void test_reader_lines_gzip_errors_pass_through(void **state) {
    (void)state;
    size_t len;
    char *text = make_text(1u << 20, &len);
    size_t zlen;
    unsigned char *z = slurp(saga_test_write_gz("p.gz", text, len), &zlen);
    saga_reader *r = NULL;
    assert_int_equal(saga_reader_open_mem(&r, "p.gz", z, zlen - 20), SAGA_OK);
    char *out = malloc(len + 16);
    int64_t n = 0;
    assert_int_equal(join_lines(r, out, len + 16, &n), SAGA_ERR_CORRUPT);
    saga_test_assert_error_contains("p.gz: truncated gzip stream", NULL);
    assert_true(n > 1000);
    free(out);
    free(z);
    free(text);
}

static void test_reader_failing_allocations(void **state) {
    (void)state;
    size_t len;
    char *text = make_text(5u << 20, &len);
    const char *paths[] = {saga_test_write("fa.txt", text, len),
                           saga_test_write_gz("fa.gz", text, len)};
    for (int p = 0; p < 2; p++) {
        int succeeded = 0;
        for (long fail_at = 1; fail_at < 100 && !succeeded; fail_at++) {
            saga_test_fail_alloc_after(fail_at);
            saga_reader *r = NULL;
            saga_lines *l = NULL;
            saga_status st = saga_reader_open(&r, paths[p]);
            if (st == SAGA_OK)
                st = saga_lines_open(&l, r);
            int64_t lines = 0;
            const char *line;
            size_t n;
            while (st == SAGA_OK && (st = saga_lines_next(l, &line, &n)) == SAGA_OK && line)
                lines++;
            saga_lines_close(&l);
            saga_test_fail_alloc_after(0);
            if (st == SAGA_OK) {
                succeeded = 1;
                assert_true(lines > 100000);
            } else {
                assert_int_equal(st, SAGA_ERR_OUT_OF_MEMORY);
            }
        }
        assert_true(succeeded);
    }
    free(text);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reader_plain_file_small),
        cmocka_unit_test(test_reader_plain_file_large_in_chunks),
        cmocka_unit_test(test_reader_empty_files),
        cmocka_unit_test(test_reader_gzip_equals_plain),
        cmocka_unit_test(test_reader_gzip_concatenated_members),
        cmocka_unit_test(test_reader_gzip_truncated),
        cmocka_unit_test(test_reader_gzip_corrupt),
        cmocka_unit_test(test_reader_close_before_end),
        cmocka_unit_test(test_reader_open_errors),
        cmocka_unit_test(test_reader_memory_plain_and_gzip),
        cmocka_unit_test(test_reader_lines_endings),
        cmocka_unit_test(test_reader_lines_nul_byte),
        cmocka_unit_test(test_reader_lines_across_chunks_and_long),
        cmocka_unit_test(test_reader_lines_gzip_errors_pass_through),
        cmocka_unit_test(test_reader_failing_allocations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
