/* test_util.c - datasets, temporary files and a failing allocator for the tests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "test_util.h"

#include "saga_status.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

enum { PATH_SLOTS = 16, PATH_LEN = 4096 };
static char paths[PATH_SLOTS][PATH_LEN];
static int path_next;

static char *next_path(void) {
    char *p = paths[path_next];
    path_next = (path_next + 1) % PATH_SLOTS;
    return p;
}

const char *saga_test_data(const char *relative) {
    const char *dir = getenv("SAGA_DATA_DIR");
    if (!dir || !*dir)
        dir = SAGA_TEST_DATA_DIR;
    char *p = next_path();
    snprintf(p, PATH_LEN, "%s/%s", dir, relative);
    struct stat sb;
    if (stat(p, &sb) != 0) {
        const char *ci = getenv("CI");
        if (ci && strcmp(ci, "true") == 0)
            fail_msg("dataset %s is missing (set SAGA_DATA_DIR)", p);
        print_message("skipping: dataset %s is missing (set SAGA_DATA_DIR)\n", p);
        skip();
    }
    return p;
}

static const char *tmp_dir(void) {
    static char dir[PATH_LEN];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s/tmp-%d", SAGA_TEST_BINARY_DIR, (int)getpid());
        if (mkdir(dir, 0700) != 0 && errno != EEXIST)
            fail_msg("cannot create %s: %s", dir, strerror(errno));
    }
    return dir;
}

const char *saga_test_tmp(const char *name) {
    static int counter;
    char *p = next_path();
    snprintf(p, PATH_LEN, "%s/%d-%s", tmp_dir(), counter++, name);
    return p;
}

const char *saga_test_write(const char *name, const void *data, size_t len) {
    const char *p = saga_test_tmp(name);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    return p;
}

const char *saga_test_write_str(const char *name, const char *text) {
    return saga_test_write(name, text, strlen(text));
}

const char *saga_test_write_gz(const char *name, const void *data, size_t len) {
    const char *p = saga_test_tmp(name);
    gzFile f = gzopen(p, "wb");
    assert_non_null(f);
    if (len)
        assert_int_equal(gzwrite(f, data, (unsigned)len), (int)len);
    assert_int_equal(gzclose(f), Z_OK);
    return p;
}

/* ---- failing allocator --------------------------------------------------------------------- */

static long alloc_count;
static long alloc_fail_at;

static void *failing_malloc(void *ud, size_t size) {
    (void)ud;
    if (alloc_fail_at > 0 && ++alloc_count >= alloc_fail_at)
        return NULL;
    return malloc(size);
}
static void *failing_realloc(void *ud, void *ptr, size_t size) {
    (void)ud;
    if (alloc_fail_at > 0 && ++alloc_count >= alloc_fail_at)
        return NULL;
    return realloc(ptr, size);
}
static void failing_free(void *ud, void *ptr) {
    (void)ud;
    free(ptr);
}

long saga_test_fail_alloc_after(long n) {
    long made = alloc_count;
    alloc_count = 0;
    alloc_fail_at = n;
    if (n > 0) {
        saga_allocator a = {failing_malloc, failing_realloc, failing_free, NULL};
        saga_set_allocator(&a);
    } else {
        saga_set_allocator(NULL);
    }
    return made;
}

void saga_test_assert_error_contains(const char *needle, ...) {
    const char *msg = saga_last_error();
    va_list ap;
    va_start(ap, needle);
    for (const char *n = needle; n; n = va_arg(ap, const char *))
        if (!strstr(msg, n))
            fail_msg("error message \"%s\" lacks \"%s\"", msg, n);
    va_end(ap);
}
