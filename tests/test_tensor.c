/* test_tensor.c - tensors on the CPU backend: shapes, zero fill, host copies, the budget, errors.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"

#include "saga_tensor.h"
#include "tensor_impl.h"

#include <stdint.h>
#include <string.h>

static saga_backend *cpu_backend(size_t budget) {
    saga_backend_params p = saga_backend_params_defaults();
    p.budget_bytes = budget;
    saga_backend *be = NULL;
    assert_int_equal(saga_backend_cpu_new(&be, &p), SAGA_OK);
    return be;
}

static void test_tensor_dtypes(void **state) {
    (void)state;
    assert_int_equal(saga_dtype_size(SAGA_F32), 4);
    assert_int_equal(saga_dtype_size(SAGA_F64), 8);
    assert_int_equal(saga_dtype_size(SAGA_I32), 4);
    assert_int_equal(saga_dtype_size(SAGA_I64), 8);
    assert_int_equal(saga_dtype_size(SAGA_DTYPE_COUNT), 0);
    assert_string_equal(saga_dtype_name(SAGA_F32), "f32");
    assert_string_equal(saga_dtype_name(SAGA_F64), "f64");
    assert_string_equal(saga_dtype_name(SAGA_I32), "i32");
    assert_string_equal(saga_dtype_name(SAGA_I64), "i64");
    assert_string_equal(saga_dtype_name((saga_dtype)42), "unknown");
}

static void test_tensor_new_is_zero_filled(void **state) {
    (void)state;
    saga_backend *be = cpu_backend(0);
    /* dirty a block first, so that a fresh one that reuses it shows whether it is cleared */
    saga_tensor *t = NULL;
    assert_int_equal(saga_tensor_new(&t, be, SAGA_F64, 300, 7), SAGA_OK);
    memset(saga_tensor_data(t), 0xff, saga_tensor_nbytes(t));
    saga_tensor_free(&t);
    assert_null(t);
    assert_int_equal(saga_tensor_new(&t, be, SAGA_F64, 300, 7), SAGA_OK);
    assert_int_equal(saga_tensor_rows(t), 300);
    assert_int_equal(saga_tensor_cols(t), 7);
    assert_int_equal(saga_tensor_dtype(t), SAGA_F64);
    assert_int_equal(saga_tensor_nbytes(t), 300 * 7 * 8);
    assert_ptr_equal(saga_tensor_backend(t), be);
    assert_ptr_equal(saga_tensor_cdata(t), saga_tensor_data(t));
    const double *d = saga_tensor_cdata(t);
    for (int i = 0; i < 300 * 7; i++)
        assert_true(d[i] == 0.0);
    saga_backend_stats s;
    saga_backend_get_stats(be, &s);
    assert_int_equal(s.in_use_bytes, 300 * 7 * 8);
    saga_tensor_free(&t);
    saga_backend_get_stats(be, &s);
    assert_int_equal(s.in_use_bytes, 0);
    saga_tensor_free(&t); /* NULL is fine */
    saga_tensor_free(NULL);
    saga_backend_free_all(&be);
}

static void test_tensor_host_round_trip_every_dtype(void **state) {
    (void)state;
    saga_backend *be = cpu_backend(0);
    int64_t i64[6] = {1, -2, INT64_MAX, INT64_MIN, 0, 42};
    int32_t i32[6] = {1, -2, INT32_MAX, INT32_MIN, 0, 42};
    float f32[6] = {1.5f, -2.25f, 1e30f, -0.0f, 0.0f, 3.0f};
    double f64[6] = {1.5, -2.25, 1e300, -0.0, 5e-324, 3.0};
    const void *src[SAGA_DTYPE_COUNT] = {f32, f64, i32, i64};
    for (int dt = 0; dt < SAGA_DTYPE_COUNT; dt++) {
        saga_tensor *t = NULL;
        assert_int_equal(saga_tensor_from_host(&t, be, (saga_dtype)dt, 2, 3, src[dt]), SAGA_OK);
        assert_int_equal(saga_tensor_nbytes(t), 6 * saga_dtype_size((saga_dtype)dt));
        unsigned char back[56];
        memset(back, 0x5a, sizeof back);
        assert_int_equal(saga_tensor_to_host(t, back), SAGA_OK);
        assert_memory_equal(back, src[dt], saga_tensor_nbytes(t));
        assert_true(back[saga_tensor_nbytes(t)] == 0x5a); /* not a byte more */
        saga_tensor_free(&t);
    }
    saga_backend_stats s;
    saga_backend_get_stats(be, &s);
    assert_int_equal(s.h2d_bytes, 4 * 6 + 8 * 6 + 4 * 6 + 8 * 6);
    assert_int_equal(s.d2h_bytes, s.h2d_bytes);
    assert_int_equal(s.peak_bytes, 48);
    saga_backend_free_all(&be);
}

static void test_tensor_empty_shapes(void **state) {
    (void)state;
    saga_backend *be = cpu_backend(0);
    saga_tensor *t = NULL;
    assert_int_equal(saga_tensor_new(&t, be, SAGA_F32, 0, 5), SAGA_OK);
    assert_int_equal(saga_tensor_rows(t), 0);
    assert_int_equal(saga_tensor_cols(t), 5);
    assert_int_equal(saga_tensor_nbytes(t), 0);
    assert_null(saga_tensor_data(t));
    assert_int_equal(saga_tensor_to_host(t, NULL), SAGA_OK);
    saga_tensor_free(&t);
    assert_int_equal(saga_tensor_from_host(&t, be, SAGA_I64, 7, 0, NULL), SAGA_OK);
    assert_int_equal(saga_tensor_nbytes(t), 0);
    saga_tensor_free(&t);
    saga_backend_free_all(&be);
}

static void test_tensor_rejects_bad_arguments(void **state) {
    (void)state;
    saga_backend *be = cpu_backend(0);
    saga_tensor *t = (saga_tensor *)0x1;
    assert_int_equal(saga_tensor_new(&t, be, SAGA_F32, -1, 4), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("dimensions must be >= 0", "-1 x 4", NULL);
    assert_int_equal(saga_tensor_new(&t, be, SAGA_F32, 4, -3), SAGA_ERR_INVALID_ARG);
    assert_int_equal(saga_tensor_new(&t, be, SAGA_F64, INT64_MAX / 4, 3), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("overflow", "f64", NULL);
    assert_int_equal(saga_tensor_new(&t, be, SAGA_I32, (int64_t)1 << 32, (int64_t)1 << 30),
                     SAGA_ERR_INVALID_ARG);
    assert_int_equal(saga_tensor_new(&t, be, (saga_dtype)9, 2, 2), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("unknown dtype 9", NULL);
    assert_int_equal(saga_tensor_new(&t, NULL, SAGA_F32, 2, 2), SAGA_ERR_INVALID_ARG);
    assert_int_equal(saga_tensor_from_host(&t, be, SAGA_F32, 2, 2, NULL), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("host data is NULL", NULL);
    assert_int_equal(saga_tensor_new(NULL, be, SAGA_F32, 2, 2), SAGA_ERR_INVALID_ARG);
    assert_int_equal(saga_tensor_to_host(NULL, &t), SAGA_ERR_INVALID_ARG);
    assert_ptr_equal(t, (saga_tensor *)0x1); /* outputs untouched on failure */
    saga_backend_stats s;
    saga_backend_get_stats(be, &s);
    assert_int_equal(s.in_use_bytes, 0); /* nothing left over from the failures */
    saga_backend_free_all(&be);
}

static void test_tensor_obeys_the_budget(void **state) {
    (void)state;
    saga_backend *be = cpu_backend(1024);
    saga_tensor *a = NULL, *b = NULL;
    assert_int_equal(saga_tensor_new(&a, be, SAGA_F64, 100, 1), SAGA_OK); /* 800 B */
    assert_int_equal(saga_tensor_new(&b, be, SAGA_F64, 50, 1), SAGA_ERR_BUDGET);
    saga_test_assert_error_contains("requested 400 B with 800 B in use of a 1.00 KiB budget", NULL);
    assert_null(b);
    assert_int_equal(saga_tensor_new(&b, be, SAGA_F32, 56, 1), SAGA_OK); /* 224 B: exactly full */
    saga_backend_stats s;
    saga_backend_get_stats(be, &s);
    assert_int_equal(s.in_use_bytes, 1024);
    saga_tensor_free(&a);
    saga_tensor_free(&b);
    saga_backend_free_all(&be);
}

static void test_tensor_fails_cleanly_on_alloc_failure(void **state) {
    (void)state;
    saga_backend *be = cpu_backend(0);
    const double host[4] = {1, 2, 3, 4};
    int failures = 0;
    for (long k = 1; k < 20; k++) {
        saga_tensor *t = NULL;
        saga_test_fail_alloc_after(k);
        saga_status st = saga_tensor_from_host(&t, be, SAGA_F64, 4, 1, host);
        saga_test_fail_alloc_after(0);
        if (st == SAGA_OK) {
            double back[4];
            assert_int_equal(saga_tensor_to_host(t, back), SAGA_OK);
            assert_memory_equal(back, host, sizeof back);
            saga_tensor_free(&t);
            break;
        }
        failures++;
        assert_int_equal(st, SAGA_ERR_OUT_OF_MEMORY);
        assert_null(t);
        saga_backend_stats s;
        saga_backend_get_stats(be, &s);
        assert_int_equal(s.in_use_bytes, 0);
    }
    assert_int_equal(failures, 2); /* the struct, the memory */
    saga_backend_free_all(&be);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tensor_dtypes),
        cmocka_unit_test(test_tensor_new_is_zero_filled),
        cmocka_unit_test(test_tensor_host_round_trip_every_dtype),
        cmocka_unit_test(test_tensor_empty_shapes),
        cmocka_unit_test(test_tensor_rejects_bad_arguments),
        cmocka_unit_test(test_tensor_obeys_the_budget),
        cmocka_unit_test(test_tensor_fails_cleanly_on_alloc_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
