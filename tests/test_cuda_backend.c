/* test_cuda_backend.c - the CUDA backend against its CPU twin: every kernel on both, the budget,
 * the caching allocator, tensors, asynchronous copies ordered by events across two streams, host
 * functions and event timing. Exits 77 (skipped) when no CUDA backend can be opened. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"

#include "backend_impl.h"
#include "saga_tensor.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static saga_backend *gpu; /* opened in main */
static saga_backend *cpu;

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static double rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / (double)(1ull << 52) - 1.0;
}

static void assert_close(double got, double want, double rel, const char *what, int64_t i) {
    double tol = rel * fmax(1.0, fabs(want));
    if (!(fabs(got - want) <= tol))
        fail_msg("%s[%lld]: cuda %.17g, cpu %.17g (tolerance %.3g)", what, (long long)i, got, want,
                 tol);
}

/* Device copies of host arrays, freed by dev_free. */
static void *dev_upload(saga_backend *be, const void *host, size_t bytes) {
    void *d = NULL;
    assert_int_equal(saga_backend_alloc(be, &d, bytes), SAGA_OK);
    assert_int_equal(saga_memcpy_h2d_async(saga_backend_default_stream(be), d, host, bytes),
                     SAGA_OK);
    assert_int_equal(saga_stream_synchronize(saga_backend_default_stream(be)), SAGA_OK);
    return d;
}

static void dev_download(saga_backend *be, void *host, const void *d, size_t bytes) {
    assert_int_equal(saga_backend_synchronize(be), SAGA_OK);
    assert_int_equal(saga_memcpy_d2h_async(saga_backend_default_stream(be), host, d, bytes),
                     SAGA_OK);
    assert_int_equal(saga_stream_synchronize(saga_backend_default_stream(be)), SAGA_OK);
}

static void test_cuda_backend_identity(void **state) {
    (void)state;
    assert_int_equal(saga_backend_get_kind(gpu), SAGA_BACKEND_CUDA);
    assert_true(strncmp(saga_backend_name(gpu), "cuda:0 (", 8) == 0);
    saga_backend_stats s;
    saga_backend_get_stats(gpu, &s);
    assert_true(s.device_total >= (size_t)1 << 30);
    print_message("device: %s, %zu MiB\n", saga_backend_name(gpu), s.device_total >> 20);
}

/* Runs one elementwise kernel configuration on both backends and compares. */
enum { OP_FILL, OP_AXPBY, OP_AXPBY_B0, OP_MUL, OP_MUL_ALIAS, OP_ADD_SCALAR, OP_COUNT };
static const char *const op_names[OP_COUNT] = {"fill", "axpby",      "axpby(b=0)",
                                               "mul",  "mul(z=x*x)", "add_scalar"};

static void run_op(saga_backend *be, int op, int64_t n, double *x, double *y, double *z) {
    saga_stream *s = saga_backend_default_stream(be);
    const saga_kernels *k = be->kernels;
    switch (op) {
    case OP_FILL:
        assert_int_equal(k->fill_f64(s, z, n, -1.25), SAGA_OK);
        break;
    case OP_AXPBY:
        assert_int_equal(k->axpby_f64(s, n, 0.75, x, -1.5, y), SAGA_OK);
        break;
    case OP_AXPBY_B0:
        assert_int_equal(k->axpby_f64(s, n, 3.0, x, 0.0, y), SAGA_OK);
        break;
    case OP_MUL:
        assert_int_equal(k->mul_f64(s, n, x, y, z), SAGA_OK);
        break;
    case OP_MUL_ALIAS:
        assert_int_equal(k->mul_f64(s, n, x, x, x), SAGA_OK);
        break;
    case OP_ADD_SCALAR:
        assert_int_equal(k->add_scalar_f64(s, n, 0.125, y), SAGA_OK);
        break;
    }
}

static void test_cuda_backend_elementwise_matches_cpu(void **state) {
    (void)state;
    static const int64_t sizes[] = {1, 255, 257, 100003, 3000001};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        const int64_t n = sizes[si];
        const size_t bytes = (size_t)n * sizeof(double);
        double *hx = malloc(bytes), *hy = malloc(bytes), *hz = malloc(bytes);
        double *cx = malloc(bytes), *cy = malloc(bytes), *cz = malloc(bytes);
        assert_true(hx && hy && hz && cx && cy && cz);
        for (int op = 0; op < OP_COUNT; op++) {
            for (int64_t i = 0; i < n; i++) {
                hx[i] = rnd();
                hy[i] = op == OP_AXPBY_B0 ? NAN : rnd(); /* b == 0 must not read y */
                hz[i] = rnd();
            }
            double *gx = dev_upload(gpu, hx, bytes), *gy = dev_upload(gpu, hy, bytes),
                   *gz = dev_upload(gpu, hz, bytes);
            memcpy(cx, hx, bytes);
            memcpy(cy, hy, bytes);
            memcpy(cz, hz, bytes);
            run_op(gpu, op, n, gx, gy, gz);
            run_op(cpu, op, n, cx, cy, cz);
            dev_download(gpu, hx, gx, bytes);
            dev_download(gpu, hy, gy, bytes);
            dev_download(gpu, hz, gz, bytes);
            for (int64_t i = 0; i < n; i++) {
                assert_close(hx[i], cx[i], 1e-12, op_names[op], i);
                assert_close(hy[i], cy[i], 1e-12, op_names[op], i);
                assert_close(hz[i], cz[i], 1e-12, op_names[op], i);
            }
            saga_backend_free(gpu, gx, bytes);
            saga_backend_free(gpu, gy, bytes);
            saga_backend_free(gpu, gz, bytes);
        }
        free(hx);
        free(hy);
        free(hz);
        free(cx);
        free(cy);
        free(cz);
    }
}

static void test_cuda_backend_reductions_match_cpu(void **state) {
    (void)state;
    static const int64_t sizes[] = {0, 1, 255, 1025, 100003, 5000011};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        const int64_t n = sizes[si];
        const size_t bytes = (size_t)(n > 0 ? n : 1) * sizeof(double);
        double *hx = malloc(bytes), *hy = malloc(bytes);
        assert_true(hx && hy);
        for (int64_t i = 0; i < n; i++) {
            hx[i] = rnd() * 10.0;
            hy[i] = rnd();
        }
        double *gx = dev_upload(gpu, hx, (size_t)n * sizeof(double));
        double *gy = dev_upload(gpu, hy, (size_t)n * sizeof(double));
        saga_stream *gs = saga_backend_default_stream(gpu);
        saga_stream *cs = saga_backend_default_stream(cpu);
        double gd = -1, gd2 = -2, cd = -3, gl = -1, cl = -3;
        assert_int_equal(gpu->kernels->dot_f64(gs, n, gx, gy, &gd), SAGA_OK);
        assert_int_equal(gpu->kernels->dot_f64(gs, n, gx, gy, &gd2), SAGA_OK);
        assert_int_equal(cpu->kernels->dot_f64(cs, n, hx, hy, &cd), SAGA_OK);
        assert_int_equal(gpu->kernels->l1_diff_f64(gs, n, gx, gy, &gl), SAGA_OK);
        assert_int_equal(cpu->kernels->l1_diff_f64(cs, n, hx, hy, &cl), SAGA_OK);
        assert_close(gd, cd, 1e-10, "dot", n);
        assert_close(gl, cl, 1e-10, "l1_diff", n);
        assert_memory_equal(&gd, &gd2, sizeof gd); /* deterministic */
        if (n == 0) {
            assert_true(gd == 0.0);
            assert_true(gl == 0.0);
        }
        saga_backend_free(gpu, gx, (size_t)n * sizeof(double));
        saga_backend_free(gpu, gy, (size_t)n * sizeof(double));
        free(hx);
        free(hy);
    }
}

/* A random CSR with empty rows and some long rows (more entries than a warp has lanes). */
static void test_cuda_backend_spmv_matches_cpu(void **state) {
    (void)state;
    enum { ROWS = 50000, COLS = 70000 };
    int64_t *off = malloc((ROWS + 1) * sizeof *off);
    assert_non_null(off);
    off[0] = 0;
    for (int i = 0; i < ROWS; i++) {
        int64_t len = i % 13 == 0 ? 0 : i % 97 == 0 ? 700 : (int64_t)(fabs(rnd()) * 24);
        off[i + 1] = off[i] + len;
    }
    const int64_t nnz = off[ROWS];
    int32_t *idx = malloc(nnz * sizeof *idx);
    float *val = malloc(nnz * sizeof *val);
    double *x = malloc(COLS * sizeof *x), *y = malloc(ROWS * sizeof *y),
           *cy = malloc(ROWS * sizeof *cy), *gy_host = malloc(ROWS * sizeof *gy_host);
    assert_true(idx && val && x && y && cy && gy_host);
    for (int64_t k = 0; k < nnz; k++) {
        idx[k] = (int32_t)((uint64_t)(fabs(rnd()) * COLS) % COLS);
        val[k] = (float)rnd();
    }
    for (int i = 0; i < COLS; i++)
        x[i] = rnd();
    for (int i = 0; i < ROWS; i++)
        y[i] = rnd();

    int64_t *goff = dev_upload(gpu, off, (ROWS + 1) * sizeof *off);
    int32_t *gidx = dev_upload(gpu, idx, nnz * sizeof *idx);
    float *gval = dev_upload(gpu, val, nnz * sizeof *val);
    double *gx = dev_upload(gpu, x, COLS * sizeof *x);
    static const double alphas[] = {1.0, 0.85, -2.0};
    static const double betas[] = {0.0, 0.15, 1.0};
    for (int withvals = 0; withvals < 2; withvals++) {
        for (int c = 0; c < 3; c++) {
            saga_csr_dev gA = {ROWS, COLS, nnz, goff, gidx, withvals ? gval : NULL};
            saga_csr_dev cA = {ROWS, COLS, nnz, off, idx, withvals ? val : NULL};
            memcpy(cy, y, ROWS * sizeof *y);
            if (betas[c] == 0.0) /* y must not be read */
                for (int i = 0; i < ROWS; i++)
                    cy[i] = NAN;
            double *gy = dev_upload(gpu, cy, ROWS * sizeof *cy);
            assert_int_equal(gpu->kernels->spmv_f64(saga_backend_default_stream(gpu), &gA,
                                                    alphas[c], gx, betas[c], gy),
                             SAGA_OK);
            assert_int_equal(cpu->kernels->spmv_f64(saga_backend_default_stream(cpu), &cA,
                                                    alphas[c], x, betas[c], cy),
                             SAGA_OK);
            dev_download(gpu, gy_host, gy, ROWS * sizeof *gy_host);
            for (int i = 0; i < ROWS; i++)
                assert_close(gy_host[i], cy[i], 1e-10, withvals ? "spmv" : "spmv(ones)", i);
            for (int i = 0; i < ROWS; i += 13) /* the empty rows */
                assert_true(gy_host[i] == betas[c] * y[i] || betas[c] == 0.0);
            saga_backend_free(gpu, gy, ROWS * sizeof *gy);
        }
    }
    saga_backend_free(gpu, goff, (ROWS + 1) * sizeof *off);
    saga_backend_free(gpu, gidx, nnz * sizeof *idx);
    saga_backend_free(gpu, gval, nnz * sizeof *val);
    saga_backend_free(gpu, gx, COLS * sizeof *x);
    free(off);
    free(idx);
    free(val);
    free(x);
    free(y);
    free(cy);
    free(gy_host);
}

static void test_cuda_backend_budget_and_cache(void **state) {
    (void)state;
    saga_backend_params p = saga_backend_params_defaults();
    p.budget_bytes = (size_t)1 << 20;
    saga_backend *be = NULL;
    assert_int_equal(saga_backend_cuda_new(&be, 0, &p), SAGA_OK);
    void *a = NULL, *b = NULL;
    assert_int_equal(saga_backend_alloc(be, &a, 600 * 1024), SAGA_OK);
    assert_int_equal((uintptr_t)a % 256, 0);
    assert_int_equal(saga_backend_alloc(be, &b, 600 * 1024), SAGA_ERR_BUDGET);
    saga_test_assert_error_contains("requested 600.0 KiB with 600.0 KiB in use of a 1.00 MiB",
                                    NULL);
    saga_backend_stats s;
    saga_backend_get_stats(be, &s);
    assert_int_equal(s.in_use_bytes, 600 * 1024);
    assert_int_equal(s.peak_bytes, 600 * 1024);

    /* a freed block comes back for a request of the same size class, with its data intact
     * ordering: the fill before the free is on the default stream */
    saga_stream *ds = saga_backend_default_stream(be);
    assert_int_equal(be->kernels->fill_f64(ds, a, 600 * 1024 / 8, 7.0), SAGA_OK);
    saga_backend_free(be, a, 600 * 1024);
    assert_int_equal(saga_backend_alloc(be, &b, 600 * 1024 - 100), SAGA_OK);
    assert_ptr_equal(a, b);
    double first = 0;
    dev_download(be, &first, b, sizeof first);
    assert_true(first == 7.0);
    saga_backend_free(be, b, 600 * 1024 - 100);
    saga_backend_get_stats(be, &s);
    assert_int_equal(s.in_use_bytes, 0);
    assert_int_equal(s.n_allocs, 2);
    saga_backend_free_all(&be);
}

static void test_cuda_backend_tensors(void **state) {
    (void)state;
    saga_tensor *t = NULL;
    assert_int_equal(saga_tensor_new(&t, gpu, SAGA_F32, 1000, 33), SAGA_OK);
    float *back = malloc(1000 * 33 * sizeof *back);
    assert_non_null(back);
    memset(back, 0xff, 1000 * 33 * sizeof *back);
    assert_int_equal(saga_tensor_to_host(t, back), SAGA_OK);
    for (int i = 0; i < 1000 * 33; i++)
        assert_true(back[i] == 0.0f);
    saga_tensor_free(&t);
    int64_t host[5] = {1, -2, INT64_MAX, INT64_MIN, 9};
    int64_t out[5] = {0};
    assert_int_equal(saga_tensor_from_host(&t, gpu, SAGA_I64, 5, 1, host), SAGA_OK);
    assert_int_equal(saga_tensor_to_host(t, out), SAGA_OK);
    assert_memory_equal(out, host, sizeof host);
    saga_tensor_free(&t);
    free(back);
}

/* Upload on a copy stream into pinned memory, compute on a second stream after an event, and
 * download there: the result must reflect every step, in order. */
static void test_cuda_backend_async_copies_with_events(void **state) {
    (void)state;
    enum { N = 1 << 22, CHUNKS = 4 };
    const size_t bytes = N * sizeof(double);
    saga_stream *copy = NULL, *compute = NULL;
    saga_event *uploaded[CHUNKS] = {NULL}, *done = NULL;
    assert_int_equal(saga_stream_new(&copy, gpu), SAGA_OK);
    assert_int_equal(saga_stream_new(&compute, gpu), SAGA_OK);
    for (int c = 0; c < CHUNKS; c++)
        assert_int_equal(saga_event_new(&uploaded[c], gpu), SAGA_OK);
    assert_int_equal(saga_event_new(&done, gpu), SAGA_OK);
    double *host = NULL, *out = NULL, *d = NULL;
    assert_int_equal(saga_backend_host_alloc(gpu, (void **)&host, bytes), SAGA_OK);
    assert_int_equal(saga_backend_host_alloc(gpu, (void **)&out, bytes), SAGA_OK);
    assert_int_equal(saga_backend_alloc(gpu, (void **)&d, bytes), SAGA_OK);
    for (int i = 0; i < N; i++)
        host[i] = i;
    saga_backend_reset_stats(gpu);

    const int64_t per = N / CHUNKS;
    for (int c = 0; c < CHUNKS; c++) {
        assert_int_equal(
            saga_memcpy_h2d_async(copy, d + c * per, host + c * per, per * sizeof(double)),
            SAGA_OK);
        assert_int_equal(saga_event_record(uploaded[c], copy), SAGA_OK);
    }
    for (int c = 0; c < CHUNKS; c++) {
        assert_int_equal(saga_stream_wait_event(compute, uploaded[c]), SAGA_OK);
        assert_int_equal(gpu->kernels->axpby_f64(compute, per, 2.0, d + c * per, 0.0, d + c * per),
                         SAGA_OK);
        assert_int_equal(gpu->kernels->add_scalar_f64(compute, per, 1.0, d + c * per), SAGA_OK);
    }
    assert_int_equal(saga_memcpy_d2h_async(compute, out, d, bytes), SAGA_OK);
    assert_int_equal(saga_event_record(done, compute), SAGA_OK);
    assert_int_equal(saga_event_synchronize(done), SAGA_OK);
    assert_true(saga_event_done(done));
    for (int i = 0; i < N; i++)
        if (out[i] != 2.0 * i + 1.0)
            fail_msg("out[%d] = %g, want %g", i, out[i], 2.0 * i + 1.0);
    saga_backend_stats s;
    saga_backend_get_stats(gpu, &s);
    assert_int_equal(s.h2d_bytes, bytes);
    assert_int_equal(s.d2h_bytes, bytes);

    saga_backend_free(gpu, d, bytes);
    saga_backend_host_free(gpu, host, bytes);
    saga_backend_host_free(gpu, out, bytes);
    for (int c = 0; c < CHUNKS; c++)
        saga_event_free(&uploaded[c]);
    saga_event_free(&done);
    saga_stream_free(&copy);
    saga_stream_free(&compute);
}

/* Host functions run in stream order: one checks the pinned buffer a download just filled, one
 * sleeps between two events whose elapsed time must cover it. copy_seconds is not measured. */
typedef struct cuda_check_arg {
    const double *buf;
    int64_t n;
    int ok; /* written by the host function before the stream goes on */
} cuda_check_arg;

static void cuda_check_fn(void *arg) {
    cuda_check_arg *c = arg;
    c->ok = 1;
    for (int64_t i = 0; i < c->n; i++)
        if (c->buf[i] != 3.0 * (double)i)
            c->ok = -1;
}

static void cuda_sleep_fn(void *arg) {
    struct timespec ts = {0, (long)*(const int *)arg * 1000000L};
    nanosleep(&ts, NULL);
}

static void test_cuda_backend_host_fn_and_elapsed(void **state) {
    (void)state;
    enum { N = 1 << 20 };
    const size_t bytes = N * sizeof(double);
    saga_stream *s = NULL;
    saga_event *start = NULL, *end = NULL, *never = NULL;
    assert_int_equal(saga_stream_new(&s, gpu), SAGA_OK);
    assert_int_equal(saga_event_new(&start, gpu), SAGA_OK);
    assert_int_equal(saga_event_new(&end, gpu), SAGA_OK);
    assert_int_equal(saga_event_new(&never, gpu), SAGA_OK);
    double *host = NULL, *out = NULL, *d = NULL;
    assert_int_equal(saga_backend_host_alloc(gpu, (void **)&host, bytes), SAGA_OK);
    assert_int_equal(saga_backend_host_alloc(gpu, (void **)&out, bytes), SAGA_OK);
    assert_int_equal(saga_backend_alloc(gpu, (void **)&d, bytes), SAGA_OK);
    for (int i = 0; i < N; i++) {
        host[i] = i;
        out[i] = -1.0;
    }
    saga_backend_reset_stats(gpu);

    cuda_check_arg check = {out, N, 0};
    int ms = 20;
    assert_int_equal(saga_memcpy_h2d_async(s, d, host, bytes), SAGA_OK);
    assert_int_equal(gpu->kernels->axpby_f64(s, N, 3.0, d, 0.0, d), SAGA_OK);
    assert_int_equal(saga_memcpy_d2h_async(s, out, d, bytes), SAGA_OK);
    assert_int_equal(saga_stream_launch_host_fn(s, cuda_check_fn, &check), SAGA_OK);
    assert_int_equal(saga_event_record(start, s), SAGA_OK);
    assert_int_equal(saga_stream_launch_host_fn(s, cuda_sleep_fn, &ms), SAGA_OK);
    assert_int_equal(saga_event_record(end, s), SAGA_OK);
    assert_int_equal(saga_event_synchronize(end), SAGA_OK);
    assert_int_equal(check.ok, 1);
    double secs = 0.0;
    assert_int_equal(saga_event_elapsed(start, end, &secs), SAGA_OK);
    assert_true(secs >= 0.019);
    assert_int_equal(saga_event_elapsed(never, end, &secs), SAGA_ERR_INVALID_ARG);
    saga_backend_stats st;
    saga_backend_get_stats(gpu, &st);
    assert_true(st.copy_seconds == 0.0);

    saga_backend_free(gpu, d, bytes);
    saga_backend_host_free(gpu, host, bytes);
    saga_backend_host_free(gpu, out, bytes);
    saga_event_free(&start);
    saga_event_free(&end);
    saga_event_free(&never);
    saga_stream_free(&s);
}

int main(void) {
    saga_status st = saga_backend_cuda_new(&gpu, 0, NULL);
    if (st != SAGA_OK) {
        printf("skipping: no CUDA backend: %s: %s\n", saga_status_name(st), saga_last_error());
        return 77;
    }
    saga_backend_params p = saga_backend_params_defaults();
    p.n_threads = 2;
    if (saga_backend_cpu_new(&cpu, &p) != SAGA_OK) {
        printf("cannot open the CPU backend: %s\n", saga_last_error());
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuda_backend_identity),
        cmocka_unit_test(test_cuda_backend_elementwise_matches_cpu),
        cmocka_unit_test(test_cuda_backend_reductions_match_cpu),
        cmocka_unit_test(test_cuda_backend_spmv_matches_cpu),
        cmocka_unit_test(test_cuda_backend_budget_and_cache),
        cmocka_unit_test(test_cuda_backend_tensors),
        cmocka_unit_test(test_cuda_backend_async_copies_with_events),
        cmocka_unit_test(test_cuda_backend_host_fn_and_elapsed),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    saga_backend_stats s;
    saga_backend_get_stats(gpu, &s);
    if (s.in_use_bytes != 0) {
        printf("cuda backend: %zu bytes still allocated after the tests\n", s.in_use_bytes);
        failed++;
    }
    saga_backend_free_all(&gpu);
    saga_backend_free_all(&cpu);
    return failed;
}
