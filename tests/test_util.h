/* test_util.h - helpers shared by the cmocka tests: datasets, temporary files, failing
 * allocators. Include after <cmocka.h>. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Path of a file under the datasets directory ($SAGA_DATA_DIR, else the configured default), in
 * a static buffer. When the file is missing the test is skipped, or fails when $CI is "true". */
const char *saga_test_data(const char *relative);

/* A fresh path in the test's temporary directory (static buffer, unique per call). The file is
 * not created. */
const char *saga_test_tmp(const char *name);

/* Writes len bytes to a fresh temporary file and returns its path (static buffer per call). */
const char *saga_test_write(const char *name, const void *data, size_t len);
/* Same, from a NUL-terminated string. */
const char *saga_test_write_str(const char *name, const char *text);
/* Same, gzip-compressed. */
const char *saga_test_write_gz(const char *name, const void *data, size_t len);

/* Installs an allocator that fails the n-th allocation from now on (1 = the next one) and every
 * one after it; n = 0 restores the normal allocator. Returns how many allocations were made
 * since the last call. */
long saga_test_fail_alloc_after(long n);

/* Asserts that the last error message contains every NULL-terminated needle. */
void saga_test_assert_error_contains(const char *needle, ...);
