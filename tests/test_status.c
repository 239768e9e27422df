/* test_status.c - status names, error messages, allocation helpers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "test_util.h"

#include "saga_log.h"
#include "saga_status.h"

#include <string.h>

static saga_status fails_with_context(int line) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(line < 0, SAGA_ERR_PARSE, "f.txt:%d: expected 2 columns, found 1", line);
fail:
    return st;
}

static void test_status_message_carries_context(void **state) {
    (void)state;
    saga_error_clear();
    assert_string_equal(saga_last_error(), "");
    assert_int_equal(fails_with_context(12), SAGA_ERR_PARSE);
    assert_string_equal(saga_last_error(), "f.txt:12: expected 2 columns, found 1");
    saga_error_prefix(SAGA_ERR_PARSE, "loading %s: ", "graph");
    assert_string_equal(saga_last_error(), "loading graph: f.txt:12: expected 2 columns, found 1");
}

static void test_status_last_status_and_append(void **state) {
    (void)state;
    saga_error_clear();
    assert_int_equal(saga_last_status(), SAGA_OK);
    assert_int_equal(fails_with_context(3), SAGA_ERR_PARSE);
    assert_int_equal(saga_last_status(), SAGA_ERR_PARSE);
    assert_int_equal(saga_error_append(SAGA_ERR_PARSE, "; %s", "a hint"), SAGA_ERR_PARSE);
    assert_string_equal(saga_last_error(), "f.txt:3: expected 2 columns, found 1; a hint");
    saga_error(SAGA_ERR_DEVICE, "no GPU");
    assert_int_equal(saga_last_status(), SAGA_ERR_DEVICE);
    saga_error_clear();
    assert_int_equal(saga_last_status(), SAGA_OK);
}

static void test_status_names(void **state) {
    (void)state;
    assert_string_equal(saga_status_name(SAGA_OK), "SAGA_OK");
    assert_string_equal(saga_status_name(SAGA_ERR_CORRUPT), "SAGA_ERR_CORRUPT");
    assert_string_equal(saga_status_name((saga_status)-99), "SAGA_ERR_UNKNOWN");
}

static void test_status_alloc_overflow_and_failure(void **state) {
    (void)state;
    void *p = NULL;
    assert_int_equal(saga_alloc_array(&p, SIZE_MAX / 2, 4, "huge"), SAGA_ERR_OUT_OF_MEMORY);
    assert_null(p);
    saga_test_assert_error_contains("huge", NULL);
    saga_test_fail_alloc_after(1);
    assert_int_equal(saga_alloc_array(&p, 4, 4, "small"), SAGA_ERR_OUT_OF_MEMORY);
    saga_test_fail_alloc_after(0);
    assert_int_equal(saga_alloc_zeroed(&p, 4, 4, "small"), SAGA_OK);
    assert_int_equal(((int *)p)[3], 0);
    assert_int_equal(saga_realloc_array(&p, 8, 4, "grow"), SAGA_OK);
    saga_free(p);
}

static void test_status_log_levels(void **state) {
    (void)state;
    assert_int_equal(saga_log_level_parse("debug"), SAGA_LOG_DEBUG);
    assert_int_equal(saga_log_level_parse("loud"), -1);
    saga_log_set_level(SAGA_LOG_ERROR);
    assert_int_equal(saga_log_get_level(), SAGA_LOG_ERROR);
    saga_log(SAGA_LOG_INFO, "not shown");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_message_carries_context),
        cmocka_unit_test(test_status_last_status_and_append),
        cmocka_unit_test(test_status_names),
        cmocka_unit_test(test_status_alloc_overflow_and_failure),
        cmocka_unit_test(test_status_log_levels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
