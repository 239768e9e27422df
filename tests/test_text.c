/* test_text.c - integer and floating point token scanning. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"

#include "text.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static saga_text_result u63(const char *s, int64_t *v, size_t *consumed) {
    const char *p = s;
    saga_text_result r = saga_text_u63(&p, s + strlen(s), v);
    *consumed = (size_t)(p - s);
    return r;
}

static void test_text_skip_blank(void **state) {
    (void)state;
    const char s[] = " \t\r\v\fx";
    const char *p = s;
    assert_true(saga_text_skip_blank(&p, s + strlen(s)));
    assert_ptr_equal(p, s + 5);
    const char b[] = " \t\r\n"; /* '\n' is not a blank */
    p = b;
    assert_true(saga_text_skip_blank(&p, b + 4));
    assert_int_equal(*p, '\n');
    p = b;
    assert_false(saga_text_skip_blank(&p, b + 3));
    assert_ptr_equal(p, b + 3);
}

static void test_text_u63_values(void **state) {
    (void)state;
    int64_t v = -1;
    size_t c;
    assert_int_equal(u63("0", &v, &c), SAGA_TEXT_OK);
    assert_int_equal(v, 0);
    assert_int_equal(c, 1);
    assert_int_equal(u63("  42\t7", &v, &c), SAGA_TEXT_OK);
    assert_int_equal(v, 42);
    assert_int_equal(c, 4);
    assert_int_equal(u63("+17", &v, &c), SAGA_TEXT_OK);
    assert_int_equal(v, 17);
    assert_int_equal(u63("000123", &v, &c), SAGA_TEXT_OK);
    assert_int_equal(v, 123);
    assert_int_equal(u63("1000000000000", &v, &c), SAGA_TEXT_OK);
    assert_int_equal(v, 1000000000000LL);
    assert_int_equal(u63("9223372036854775807", &v, &c), SAGA_TEXT_OK);
    assert_true(v == INT64_MAX);
    assert_int_equal(u63("00000000000000000000009223372036854775807\r", &v, &c), SAGA_TEXT_OK);
    assert_true(v == INT64_MAX);
    assert_int_equal(u63("922337203685477580", &v, &c), SAGA_TEXT_OK);
    assert_true(v == 922337203685477580LL);
    assert_int_equal(u63("-0", &v, &c), SAGA_TEXT_OK);
    assert_int_equal(v, 0);
}

static void test_text_u63_errors(void **state) {
    (void)state;
    int64_t v = 5;
    size_t c;
    assert_int_equal(u63("9223372036854775808", &v, &c), SAGA_TEXT_OVERFLOW);
    assert_int_equal(c, 0);
    assert_int_equal(u63("9223372036854775810", &v, &c), SAGA_TEXT_OVERFLOW);
    assert_int_equal(u63("18446744073709551616", &v, &c), SAGA_TEXT_OVERFLOW);
    assert_int_equal(u63("99999999999999999999999999", &v, &c), SAGA_TEXT_OVERFLOW);
    assert_int_equal(u63("-1", &v, &c), SAGA_TEXT_NEGATIVE);
    assert_int_equal(u63("-99999999999999999999999", &v, &c), SAGA_TEXT_NEGATIVE);
    assert_int_equal(u63("abc", &v, &c), SAGA_TEXT_INVALID);
    assert_int_equal(u63("12a", &v, &c), SAGA_TEXT_INVALID);
    assert_int_equal(u63("1.5", &v, &c), SAGA_TEXT_INVALID);
    assert_int_equal(u63("1e3", &v, &c), SAGA_TEXT_INVALID);
    assert_int_equal(u63("+", &v, &c), SAGA_TEXT_INVALID);
    assert_int_equal(u63("-", &v, &c), SAGA_TEXT_INVALID);
    assert_int_equal(u63("--1", &v, &c), SAGA_TEXT_INVALID);
    assert_int_equal(u63("99999999999999999999x", &v, &c), SAGA_TEXT_INVALID);
    assert_int_equal(c, 0);
    assert_int_equal(u63("", &v, &c), SAGA_TEXT_EMPTY);
    assert_int_equal(u63(" \t ", &v, &c), SAGA_TEXT_EMPTY);
    assert_int_equal(v, 5); /* untouched on failure */
    /* a token cut by the range end is complete */
    const char s[] = "1234";
    const char *p = s;
    assert_int_equal(saga_text_u63(&p, s + 2, &v), SAGA_TEXT_OK);
    assert_int_equal(v, 12);
}

static void test_text_i64(void **state) {
    (void)state;
    const char *cases[] = {"-9223372036854775808", "9223372036854775807", "-42", "+0"};
    const int64_t expect[] = {INT64_MIN, INT64_MAX, -42, 0};
    for (int i = 0; i < 4; i++) {
        const char *p = cases[i];
        int64_t v = 1;
        assert_int_equal(saga_text_i64(&p, cases[i] + strlen(cases[i]), &v), SAGA_TEXT_OK);
        assert_true(v == expect[i]);
        assert_ptr_equal(p, cases[i] + strlen(cases[i]));
    }
    const char *bad[] = {"-9223372036854775809", "9223372036854775808", "4x", "- 4"};
    const saga_text_result res[] = {SAGA_TEXT_OVERFLOW, SAGA_TEXT_OVERFLOW, SAGA_TEXT_INVALID,
                                    SAGA_TEXT_INVALID};
    for (int i = 0; i < 4; i++) {
        const char *p = bad[i];
        int64_t v;
        assert_int_equal(saga_text_i64(&p, bad[i] + strlen(bad[i]), &v), res[i]);
        assert_ptr_equal(p, bad[i]);
    }
}

static void test_text_f64(void **state) {
    (void)state;
    struct {
        const char *s;
        double v;
    } ok[] = {
        {"1", 1.0},
        {"0.5", 0.5},
        {"-2.25", -2.25},
        {"1e3", 1000.0},
        {"1.5E-3", 1.5e-3},
        {".5", 0.5},
        {"5.", 5.0},
        {"+7", 7.0},
        {"0.1", 0.1},
        {"3.14159265358979", 3.14159265358979},
        {"123456789012345678901234", 1.2345678901234568e23},
        {"1e-300", 1e-300},
        {"2.5e10", 2.5e10},
        {"0.30000000000000004", 0.30000000000000004},
        {"1e22", 1e22},
        {"1e23", 1e23},
        {"4.9e-324", 4.9e-324},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        const char *p = ok[i].s;
        const char *end = p + strlen(p);
        double v = -99;
        assert_int_equal(saga_text_f64(&p, end, &v), SAGA_TEXT_OK);
        if (v != ok[i].v)
            fail_msg("%s parsed as %.17g, expected %.17g", ok[i].s, v, ok[i].v);
        assert_ptr_equal(p, end);
        /* must agree exactly with strtod */
        assert_true(v == strtod(ok[i].s, NULL));
    }
    struct {
        const char *s;
        saga_text_result r;
    } bad[] = {
        {"nan", SAGA_TEXT_NONFINITE},   {"NaN", SAGA_TEXT_NONFINITE},
        {"inf", SAGA_TEXT_NONFINITE},   {"-Infinity", SAGA_TEXT_NONFINITE},
        {"1e999", SAGA_TEXT_NONFINITE}, {"abc", SAGA_TEXT_INVALID},
        {"1.2.3", SAGA_TEXT_INVALID},   {"0x10", SAGA_TEXT_INVALID},
        {"1e", SAGA_TEXT_INVALID},      {"e5", SAGA_TEXT_INVALID},
        {".", SAGA_TEXT_INVALID},       {"1,5", SAGA_TEXT_INVALID},
        {"", SAGA_TEXT_EMPTY},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *p = bad[i].s;
        double v = 0;
        assert_int_equal(saga_text_f64(&p, p + strlen(p), &v), bad[i].r);
        assert_ptr_equal(p, bad[i].s);
    }
    /* a token followed by another */
    const char two[] = "0.25\t3";
    const char *p = two;
    double v;
    assert_int_equal(saga_text_f64(&p, two + strlen(two), &v), SAGA_TEXT_OK);
    assert_true(v == 0.25);
    assert_int_equal(*p, '\t');
    /* an over-long token is rejected, not truncated */
    char longtok[300];
    memset(longtok, '1', sizeof longtok - 1);
    longtok[sizeof longtok - 1] = '\0';
    p = longtok;
    assert_int_equal(saga_text_f64(&p, longtok + strlen(longtok), &v), SAGA_TEXT_INVALID);
}

static void test_text_f64_matches_strtod_randomly(void **state) {
    (void)state;
    /* random decimals of many shapes, checked bit-exactly against strtod */
    unsigned long x = 12345;
    for (int i = 0; i < 200000; i++) {
        char s[64];
        x = x * 6364136223846793005UL + 1442695040888963407UL;
        unsigned long m = (x >> 11) % 100000000000000000UL;
        int digits_after = (int)((x >> 3) % 20);
        int expo = (int)((x >> 40) % 50) - 25;
        int form = (int)((x >> 50) % 3);
        if (form == 0)
            snprintf(s, sizeof s, "%lu", m);
        else if (form == 1)
            snprintf(s, sizeof s, "%lu.%0*lu", m / 1000, digits_after % 10 + 1, m % 1000);
        else
            snprintf(s, sizeof s, "%lue%d", m % 1000000, expo);
        const char *p = s;
        double v;
        assert_int_equal(saga_text_f64(&p, s + strlen(s), &v), SAGA_TEXT_OK);
        if (v != strtod(s, NULL))
            fail_msg("%s: %.17g vs strtod %.17g", s, v, strtod(s, NULL));
    }
}

static void test_text_token_and_results(void **state) {
    (void)state;
    char buf[16];
    const char s[] = "  ab\x01z rest";
    assert_string_equal(saga_text_token(s, s + strlen(s), buf, sizeof buf), "ab\\x01z");
    const char l[] = "0123456789abcdefghij";
    assert_string_equal(saga_text_token(l, l + strlen(l), buf, sizeof buf), "0123456789ab...");
    assert_true(strlen(buf) < sizeof buf);
    assert_string_equal(saga_text_token(l, l, buf, sizeof buf), "");
    assert_string_equal(saga_text_result_str(SAGA_TEXT_OVERFLOW), "a number out of range");
    assert_string_equal(saga_text_result_str(SAGA_TEXT_INVALID), "not a number");
    for (int r = 0; r < SAGA_TEXT_RESULT_COUNT; r++)
        assert_true(strlen(saga_text_result_str((saga_text_result)r)) > 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_skip_blank),
        cmocka_unit_test(test_text_u63_values),
        cmocka_unit_test(test_text_u63_errors),
        cmocka_unit_test(test_text_i64),
        cmocka_unit_test(test_text_f64),
        cmocka_unit_test(test_text_f64_matches_strtod_randomly),
        cmocka_unit_test(test_text_token_and_results),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
