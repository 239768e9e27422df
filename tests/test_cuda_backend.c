/* test_cuda_backend.c - the CUDA backend against its CPU twin: every kernel on both (the f64
 * PageRank kernels and every f32 slot, edge cases and errors included), a small model trained
 * through saga_nn.h on both, the budget, the caching allocator and the block scheduler's placement
 * in its arena, tensors, and asynchronous copies ordered by events across two streams, host
 * functions and event timing. Exits 77 (skipped) when no CUDA backend can be opened. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"
#include "test_xf.h"

#include "backend_impl.h"
#include "saga_nn.h"
#include "saga_tensor.h"
#include "sched_impl.h"

#include <dlfcn.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static saga_backend *gpu; /* opened in main */
static saga_backend *cpu;

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static double rnd(void) {
    return (double)(saga_test_u64(&rng_state) >> 11) / (double)(1ull << 52) - 1.0;
}

/* got within bound of want. Equal values are close, infinities included (inf - inf is NaN, which
 * no bound admits), and NaN is close to NaN (the CPU's NaN where the GPU gives one too); an
 * infinity is close to nothing else (a bound computed from an infinite value would admit every
 * finite got). Bound 0: equal. */
static bool close_within(double got, double want, double bound) {
    if (got == want || (isnan(got) && isnan(want)))
        return true;
    if (isinf(got) || isinf(want))
        return false;
    return fabs(got - want) <= bound;
}

static void assert_close(double got, double want, double bound, const char *what, int64_t i) {
    if (!close_within(got, want, bound))
        fail_msg("%s[%lld]: cuda %.17g, cpu %.17g: differ by %.3g, past the bound %.3g", what,
                 (long long)i, got, want, fabs(got - want), bound);
}

/* The comparison the activation test relies on for its infinities and NaN. */
static void test_cuda_backend_assert_close(void **state) {
    (void)state;
    assert_close(INFINITY, INFINITY, 1e-6, "inf", 0);
    assert_close(-INFINITY, -INFINITY, 1e-6, "-inf", 0);
    assert_close(NAN, NAN, 1e-6, "nan", 0);
    assert_close(1.0 + 1e-7, 1.0, 1e-6, "within", 0);
    assert_false(close_within(INFINITY, -INFINITY, 1e-6));
    assert_false(close_within(1e300, INFINITY, 1e-6));
    assert_false(close_within(INFINITY, 1e300, 1e-6));
    assert_false(close_within(NAN, 1.0, 1e-6));
    assert_false(close_within(1.0, NAN, 1e-6));
    assert_false(close_within(1.0 + 1e-5, 1.0, 1e-6));
    assert_false(close_within(1.0 + 0x1p-52, 1.0, 0));
}

/* ---- bounds -------------------------------------------------------------------------------------
 *
 * The GPU and the CPU compute the same values in different orders (sums split over lanes and
 * blocks, cuBLAS's and OpenBLAS's blocking, multiply-adds the GPU fuses), with different libm
 * functions. The comparisons are held to bounds derived from that arithmetic (test_util.h, "bounds
 * for results computed in different orders"; test_xf.h for element-wise formulas): a sum of K
 * terms, in any order, with or without fused multiply-adds, is within gamma_K sum |terms| of the
 * exact sum, so the two are within 2 gamma_K sum |terms| of each other; one rounding is gamma_1.
 * Where the same operations run in the same order on both, the comparison is of bits. */

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
        double *cx = malloc(bytes), *cy = malloc(bytes), *cz = malloc(bytes), *mag = malloc(bytes);
        assert_true(hx && hy && hz && cx && cy && cz && mag);
        for (int op = 0; op < OP_COUNT; op++) {
            for (int64_t i = 0; i < n; i++) {
                hx[i] = rnd();
                hy[i] = op == OP_AXPBY_B0 ? NAN : rnd(); /* b == 0 must not read y */
                hz[i] = rnd();
                mag[i] = 0.75 * fabs(hx[i]) + 1.5 * fabs(hy[i]); /* axpby's terms */
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
            /* one IEEE operation per element: the same bits; a x + b y: two products and a sum,
             * which the GPU may fuse, within gamma_2 of the exact value on each side */
            for (int64_t i = 0; i < n; i++) {
                assert_close(hx[i], cx[i], 0, op_names[op], i);
                assert_close(hy[i], cy[i], op == OP_AXPBY ? 2 * gam64(2) * mag[i] : 0, op_names[op],
                             i);
                assert_close(hz[i], cz[i], 0, op_names[op], i);
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
        free(mag);
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
        double dmag = 0;
        for (int64_t i = 0; i < n; i++) {
            hx[i] = rnd() * 10.0;
            hy[i] = rnd();
            dmag += fabs(hx[i] * hy[i]);
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
        /* n products summed in two orders; l1_diff's terms |x - y| round alike on both, and are
         * non-negative: their magnitude is the sum */
        assert_close(gd, cd, 2 * gam64(n) * dmag, "dot", n);
        assert_close(gl, cl, 2 * gam64(n) * cl, "l1_diff", n);
        assert_memory_equal(&gd, &gd2, sizeof gd); /* deterministic */
        if (n == 0) {
            assert_true(gd == 0.0);
            assert_true(gl == 0.0);
        }
        /* the same sums added on the device, twice, to sums that start at 0.5: the bits of the
         * host's additions of the returned sums (n == 0 adds nothing) */
        const double start[2] = {0.5, 0.5};
        double *gacc = dev_upload(gpu, start, sizeof start), acc[2];
        for (int r = 0; r < 2; r++) {
            assert_int_equal(gpu->kernels->dot_acc_f64(gs, n, gx, gy, gacc), SAGA_OK);
            assert_int_equal(gpu->kernels->l1_diff_acc_f64(gs, n, gx, gy, gacc + 1), SAGA_OK);
        }
        dev_download(gpu, acc, gacc, sizeof acc);
        const double want[2] = {n ? (0.5 + gd) + gd : 0.5, n ? (0.5 + gl) + gl : 0.5};
        assert_memory_equal(acc, want, sizeof acc);
        /* x += a + b * c[0] with c the device's sum: the CPU's result within the rounding of
         * the scalar (an FMA or not) and of the one addition */
        if (n > 0) {
            double *hz = malloc(bytes), *cz = malloc(bytes);
            assert_true(hz && cz);
            memcpy(cz, hy, (size_t)n * sizeof(double));
            assert_int_equal(gpu->kernels->add_scalar_dev_f64(gs, n, 0.25, -0.75, gacc, gy),
                             SAGA_OK);
            assert_int_equal(cpu->kernels->add_scalar_dev_f64(cs, n, 0.25, -0.75, acc, cz),
                             SAGA_OK);
            dev_download(gpu, hz, gy, (size_t)n * sizeof(double));
            const double v = fabs(0.25) + fabs(0.75 * acc[0]);
            for (int64_t i = 0; i < n; i++)
                assert_close(hz[i], cz[i], 2 * DBL_EPSILON * (v + fabs(hy[i]) + v),
                             "add_scalar_dev", i);
            free(hz);
            free(cz);
        }
        saga_backend_free(gpu, gacc, sizeof start);
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
            /* a row's deg products summed in two orders, alpha's product and beta y's sum: at
             * most deg + 2 roundings per term on each side */
            for (int i = 0; i < ROWS; i++) {
                double m = betas[c] != 0.0 ? fabs(betas[c] * y[i]) : 0.0;
                for (int64_t k = off[i]; k < off[i + 1]; k++)
                    m += fabs(alphas[c] * (withvals ? val[k] : 1.0f) * x[idx[k]]);
                assert_close(gy_host[i], cy[i], 2 * gam64(off[i + 1] - off[i] + 2) * m,
                             withvals ? "spmv" : "spmv(ones)", i);
            }
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
    /* (and the default stream's scratch, reserved at the open) */
    saga_test_assert_error_contains("requested 600.0 KiB with 600.0 KiB in use", "of a 1.00 MiB",
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

/* C = A B on be for small integers (exact in any order of the sums), checked against a plain
 * loop: M x K times K x N. */
static void gemm_exact(saga_backend *be, int64_t M, int64_t N, int64_t K) {
    float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N);
    float *c = malloc(sizeof(float) * M * N);
    assert_true(a && b && c);
    for (int64_t e = 0; e < M * K; e++)
        a[e] = (float)((e * 7 + 3) % 5) - 2.0f;
    for (int64_t e = 0; e < K * N; e++)
        b[e] = (float)((e * 11 + 1) % 5) - 2.0f;
    float *ga = dev_upload(be, a, sizeof(float) * M * K);
    float *gb = dev_upload(be, b, sizeof(float) * K * N);
    float *gc = NULL; /* beta == 0: not read */
    assert_int_equal(saga_backend_alloc(be, (void **)&gc, sizeof(float) * M * N), SAGA_OK);
    assert_int_equal(be->kernels->gemm_f32(saga_backend_default_stream(be), false, false, M, N, K,
                                           1.0f, ga, K, gb, N, 0.0f, gc, N),
                     SAGA_OK);
    dev_download(be, c, gc, sizeof(float) * M * N);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            float want = 0.0f;
            for (int64_t k = 0; k < K; k++)
                want += a[i * K + k] * b[k * N + j];
            if (c[i * N + j] != want)
                fail_msg("gemm_f32[%lld][%lld]: %g, want %g", (long long)i, (long long)j,
                         (double)c[i * N + j], (double)want);
        }
    saga_backend_free(be, ga, sizeof(float) * M * K);
    saga_backend_free(be, gb, sizeof(float) * K * N);
    saga_backend_free(be, gc, sizeof(float) * M * N);
    free(a);
    free(b);
    free(c);
}

/* A gate a host function on a stream waits at until a helper thread opens it. */
typedef struct gate {
    pthread_mutex_t m;
    pthread_cond_t cv;
    bool open;
} gate;

static void gate_wait(void *arg) {
    gate *g = arg;
    pthread_mutex_lock(&g->m);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->m);
    pthread_mutex_unlock(&g->m);
}

static void *gate_open_later(void *arg) {
    gate *g = arg;
    struct timespec t = {0, 200 * 1000 * 1000};
    nanosleep(&t, NULL);
    pthread_mutex_lock(&g->m);
    g->open = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->m);
    return NULL;
}

/* A block freed while its last user on the default stream has not run yet comes back for a
 * request of its size, and work another stream issues on it then runs after that user: the
 * default stream is held at a gate (a host function) in front of a copy that reads the block;
 * the block is freed, allocated again and overwritten from the other stream; the gate opens
 * 200 ms later. The copy must have read the old contents. With no budget (budget_mib 0) the block
 * comes back from the cache by class; under one, from the arena. */
static void reuse_waits_on_device(size_t budget_mib) {
    saga_backend *be = NULL;
    saga_backend_params p = saga_backend_params_defaults();
    p.budget_bytes = budget_mib << 20;
    assert_int_equal(saga_backend_cuda_new(&be, 0, &p), SAGA_OK);
    enum { N = 4096 };
    const size_t bytes = N * sizeof(float);
    saga_stream *s0 = saga_backend_default_stream(be), *s1 = NULL;
    assert_int_equal(saga_stream_new(&s1, be), SAGA_OK);
    float *blk = NULL, *out = NULL, *old_h = NULL, *new_h = NULL;
    assert_int_equal(saga_backend_alloc(be, (void **)&blk, bytes), SAGA_OK);
    assert_int_equal(saga_backend_alloc(be, (void **)&out, bytes), SAGA_OK);
    assert_int_equal(saga_backend_host_alloc(be, (void **)&old_h, bytes), SAGA_OK);
    assert_int_equal(saga_backend_host_alloc(be, (void **)&new_h, bytes), SAGA_OK);
    for (int i = 0; i < N; i++)
        old_h[i] = 1.0f, new_h[i] = 2.0f;
    assert_int_equal(saga_memcpy_h2d_async(s0, blk, old_h, bytes), SAGA_OK);
    assert_int_equal(saga_backend_synchronize(be), SAGA_OK);

    gate g = {.open = false};
    pthread_mutex_init(&g.m, NULL);
    pthread_cond_init(&g.cv, NULL);
    assert_int_equal(saga_stream_launch_host_fn(s0, gate_wait, &g), SAGA_OK);
    assert_int_equal(saga_memcpy_d2d_async(s0, out, blk, bytes), SAGA_OK); /* blk's last user */
    saga_backend_free(be, blk, bytes);
    /* opens the gate even where the allocation below waits on the host for the free */
    pthread_t helper;
    assert_int_equal(pthread_create(&helper, NULL, gate_open_later, &g), 0);
    float *again = NULL;
    assert_int_equal(saga_backend_alloc(be, (void **)&again, bytes), SAGA_OK);
    assert_ptr_equal(again, blk); /* the freed block */
    assert_int_equal(saga_memcpy_h2d_async(s1, again, new_h, bytes), SAGA_OK);
    assert_int_equal(saga_stream_synchronize(s1), SAGA_OK);
    assert_int_equal(saga_backend_synchronize(be), SAGA_OK);
    pthread_join(helper, NULL);
    float *got = test_malloc(bytes);
    assert_int_equal(saga_memcpy_d2h_async(s0, got, out, bytes), SAGA_OK);
    assert_int_equal(saga_backend_synchronize(be), SAGA_OK);
    for (int i = 0; i < N; i++)
        if (got[i] != 1.0f)
            fail_msg("out[%d] = %g: the block was overwritten before its last user read it", i,
                     (double)got[i]);
    test_free(got);
    pthread_cond_destroy(&g.cv);
    pthread_mutex_destroy(&g.m);
    saga_backend_free(be, again, bytes);
    saga_backend_free(be, out, bytes);
    saga_backend_host_free(be, old_h, bytes);
    saga_backend_host_free(be, new_h, bytes);
    saga_stream_free(&s1);
    saga_backend_free_all(&be);
}

static void test_cuda_backend_cache_reuse_waits_on_device(void **state) {
    (void)state;
    reuse_waits_on_device(0);
}

static void test_cuda_backend_arena_reuse_waits_on_device(void **state) {
    (void)state;
    reuse_waits_on_device(8);
}

/* A CUDA backend whose budget leaves room bytes beside the scratch its default stream takes at the
 * open (measured by opening one first); *budget is that budget. */
static saga_backend *open_with_room(size_t room, size_t *budget) {
    saga_backend_params p = saga_backend_params_defaults();
    saga_backend *be = NULL;
    saga_backend_stats st;
    p.budget_bytes = room;
    assert_int_equal(saga_backend_cuda_new(&be, 0, &p), SAGA_OK);
    saga_backend_get_stats(be, &st);
    print_message("the default stream's scratch under a budget: %zu bytes\n", st.reserved_bytes);
    assert_true(st.reserved_bytes > 0);
    saga_backend_free_all(&be);
    p.budget_bytes = *budget = room + st.reserved_bytes;
    assert_int_equal(saga_backend_cuda_new(&be, 0, &p), SAGA_OK);
    return be;
}

/* Under a budget, ranges of the arena: a block scheduler's blocks from the bottom up, freed ones
 * merged with their free neighbours. Four 2 MiB blocks fill an 8 MiB arena; with the first and
 * third freed, 4 MiB are free in two pieces and a 3 MiB block, within the budget as counted, has
 * no range (SAGA_ERR_BUDGET, saying so); once the second is freed the three make one range, where
 * it is placed at the bottom. */
static void test_cuda_backend_arena_ranges_merge(void **state) {
    (void)state;
    const size_t MiB = (size_t)1 << 20;
    size_t budget = 0;
    saga_backend *be = open_with_room(8 * MiB, &budget);
    saga_backend_stats st;
    char *blk[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(saga_backend_alloc_block(be, (void **)&blk[i], 2 * MiB), SAGA_OK);
    for (int i = 1; i < 4; i++)
        assert_ptr_equal(blk[i], blk[0] + (size_t)i * 2 * MiB);
    saga_backend_free(be, blk[0], 2 * MiB);
    saga_backend_free(be, blk[2], 2 * MiB);
    char *big = NULL;
    assert_int_equal(saga_backend_alloc_block(be, (void **)&big, 3 * MiB), SAGA_ERR_BUDGET);
    saga_test_assert_error_contains("no free range of 3145728 bytes",
                                    "(4194304 bytes free in 2 ranges, the largest 2097152)", NULL);
    saga_backend_free(be, blk[1], 2 * MiB);
    assert_int_equal(saga_backend_alloc_block(be, (void **)&big, 3 * MiB), SAGA_OK);
    assert_ptr_equal(big, blk[0]);
    saga_backend_get_stats(be, &st);
    assert_int_equal(st.in_use_bytes, 5 * MiB);
    assert_int_equal(st.in_use_bytes + st.reserved_bytes + st.cached_bytes, budget);
    saga_backend_free(be, big, 3 * MiB);
    saga_backend_free(be, blk[3], 2 * MiB);
    assert_int_equal(saga_backend_synchronize(be), SAGA_OK);
    saga_backend_free_all(&be);
}

/* Under a budget, a block scheduler's blocks and the other allocations grow from opposite ends of
 * the arena, so that what a step allocates and frees leaves no hole between the blocks: in an
 * 8 MiB arena, blocks of 2 and 1 MiB go to the bottom (the lowest range that holds them, not the
 * best-fitting one), a step's tensors of 2 and 1 MiB to the top; once the tensors are freed, a
 * 5 MiB block has one range beside the others. A freed block's hole is filled by the next block
 * that fits it, before a better-fitting range above it. */
static void test_cuda_backend_arena_blocks_and_rest_apart(void **state) {
    (void)state;
    const size_t MiB = (size_t)1 << 20;
    size_t budget = 0;
    saga_backend *be = open_with_room(8 * MiB, &budget);
    char *b2 = NULL, *b1 = NULL, *t2 = NULL, *t1 = NULL, *b5 = NULL;
    assert_int_equal(saga_backend_alloc_block(be, (void **)&b2, 2 * MiB), SAGA_OK);
    assert_int_equal(saga_backend_alloc(be, (void **)&t2, 2 * MiB), SAGA_OK);
    assert_int_equal(saga_backend_alloc_block(be, (void **)&b1, MiB), SAGA_OK);
    assert_int_equal(saga_backend_alloc(be, (void **)&t1, MiB), SAGA_OK);
    char *base = b2;
    assert_ptr_equal(b1, base + 2 * MiB);
    assert_ptr_equal(t2, base + 6 * MiB);
    assert_ptr_equal(t1, base + 5 * MiB);
    saga_backend_free(be, t1, MiB);
    saga_backend_free(be, t2, 2 * MiB);
    assert_int_equal(saga_backend_alloc_block(be, (void **)&b5, 5 * MiB), SAGA_OK);
    assert_ptr_equal(b5, base + 3 * MiB);
    /* a 4 MiB tensor where the 5 MiB block was leaves 1 MiB free above the 1 MiB block; with the
     * 2 MiB block freed, a new 1 MiB block goes to the bottom, not into the better-fitting 1 MiB */
    saga_backend_free(be, b5, 5 * MiB);
    char *t4 = NULL, *again = NULL;
    assert_int_equal(saga_backend_alloc(be, (void **)&t4, 4 * MiB), SAGA_OK);
    assert_ptr_equal(t4, base + 4 * MiB);
    saga_backend_free(be, b2, 2 * MiB);
    assert_int_equal(saga_backend_alloc_block(be, (void **)&again, MiB), SAGA_OK);
    assert_ptr_equal(again, base);
    saga_backend_free(be, again, MiB);
    saga_backend_free(be, b1, MiB);
    saga_backend_free(be, t4, 4 * MiB);
    assert_int_equal(saga_backend_synchronize(be), SAGA_OK);
    saga_backend_free_all(&be);
}

static int cmp_ptr(const void *a, const void *b) {
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    return (x > y) - (x < y);
}

/* A block room (saga_backend_set_block_room): blocks only within the first bytes of the arena, the
 * rest for everything else. In an 8 MiB arena with a 4 MiB room, a 3 MiB block goes to the
 * bottom and a 2 MiB one is refused though 5 MiB are free (the message says why), while a 4 MiB
 * tensor takes the top; without the room the 2 MiB block fits. A scheduler with a cap sets its
 * cap as the room and lifts it when freed; blocks whose size classes pass the room (two of 1.5
 * MiB and a byte, 1.75 MiB each, under a cap of 3.25 MiB) are placed beyond it rather than fail. */
static void test_cuda_backend_block_room(void **state) {
    (void)state;
    const size_t MiB = (size_t)1 << 20;
    size_t budget = 0;
    saga_backend *be = open_with_room(8 * MiB, &budget);
    char *b3 = NULL, *b2 = NULL, *t4 = NULL;
    saga_backend_set_block_room(be, 4 * MiB);
    assert_int_equal(saga_backend_alloc_block(be, (void **)&b3, 3 * MiB), SAGA_OK);
    assert_int_equal(saga_backend_alloc_block(be, (void **)&b2, 2 * MiB), SAGA_ERR_BUDGET);
    saga_test_assert_error_contains("no free range of 2097152 bytes",
                                    "within the first 4194304 bytes, the blocks' room", NULL);
    assert_int_equal(saga_backend_alloc(be, (void **)&t4, 4 * MiB), SAGA_OK);
    assert_ptr_equal(t4, b3 + 4 * MiB);
    saga_backend_free(be, t4, 4 * MiB);
    saga_backend_set_block_room(be, 0);
    assert_int_equal(saga_backend_alloc_block(be, (void **)&b2, 2 * MiB), SAGA_OK);
    assert_ptr_equal(b2, b3 + 3 * MiB);
    saga_backend_free(be, b2, 2 * MiB);
    char *base = b3;
    saga_backend_free(be, b3, 3 * MiB);

    const size_t cap = 3 * MiB + MiB / 4, bytes = 3 * MiB / 2 + 1;
    saga_sched *s = NULL;
    assert_int_equal(saga_sched_new(&s, be, cap, NULL, NULL), SAGA_OK);
    assert_int_equal(saga_backend_block_room(be), cap);
    saga_blk *x = saga_sched_block(s, bytes, SAGA_BLK_TEMP, "x");
    saga_blk *y = saga_sched_block(s, bytes, SAGA_BLK_TEMP, "y");
    assert_true(x && y);
    saga_sched_plan_begin(s);
    const int a = saga_sched_step(s);
    saga_sched_use(s, a, x, SAGA_USE_WRITE, 0);
    saga_sched_use(s, a, y, SAGA_USE_WRITE, 0);
    assert_int_equal(saga_sched_plan_end(s), SAGA_OK);
    assert_int_equal(saga_sched_begin(s, a), SAGA_OK);
    char *d[2] = {saga_blk_dev(x), saga_blk_dev(y)};
    qsort(d, 2, sizeof d[0], cmp_ptr);
    assert_ptr_equal(d[0], base);
    assert_ptr_equal(d[1], base + 7 * MiB / 4);         /* ends at 3.5 MiB, past the room */
    assert_int_equal(saga_backend_block_room(be), cap); /* lifted for the step's placing alone */
    assert_int_equal(saga_sched_end(s, a), SAGA_OK);
    assert_int_equal(saga_sched_finish(s), SAGA_OK);
    saga_sched_free(&s);
    assert_int_equal(saga_backend_block_room(be), 0);
    assert_int_equal(saga_backend_synchronize(be), SAGA_OK);
    saga_backend_free_all(&be);
}

/* The plan of the two tests below on an 8 MiB arena: in step a, four 2 MiB blocks fill it (the
 * first and third temporary, dying there; the second and fourth of life `life` with host copies
 * host[0] and host[1], used with `mode`); in step b the second and fourth are read beside a new
 * 3 MiB block. Step a is begun and the arena checked full; *bottom is its lowest block. */
typedef struct four_and_big {
    saga_blk *t0, *m1, *t2, *m3, *big;
    int a, b;
    char *bottom;
} four_and_big;

static void four_and_big_begin(saga_sched *s, saga_blk_life life, saga_use_mode mode,
                               float *const host[2], four_and_big *f) {
    const size_t MiB = (size_t)1 << 20;
    f->t0 = saga_sched_block(s, 2 * MiB, SAGA_BLK_TEMP, "first");
    f->m1 = saga_sched_block(s, 2 * MiB, life, "second");
    f->t2 = saga_sched_block(s, 2 * MiB, SAGA_BLK_TEMP, "third");
    f->m3 = saga_sched_block(s, 2 * MiB, life, "fourth");
    f->big = saga_sched_block(s, 3 * MiB, SAGA_BLK_TEMP, "big");
    assert_true(f->t0 && f->m1 && f->t2 && f->m3 && f->big);
    saga_blk_set_host(f->m1, host[0]);
    saga_blk_set_host(f->m3, host[1]);
    saga_sched_plan_begin(s);
    f->a = saga_sched_step(s);
    saga_sched_use(s, f->a, f->t0, SAGA_USE_WRITE, 0);
    saga_sched_use(s, f->a, f->m1, mode, 0);
    saga_sched_use(s, f->a, f->t2, SAGA_USE_WRITE, 0);
    saga_sched_use(s, f->a, f->m3, mode, 0);
    f->b = saga_sched_step(s);
    saga_sched_use(s, f->b, f->m1, SAGA_USE_READ, 0);
    saga_sched_use(s, f->b, f->big, SAGA_USE_WRITE, 0);
    saga_sched_use(s, f->b, f->m3, SAGA_USE_READ, 0);
    assert_int_equal(saga_sched_plan_end(s), SAGA_OK);
    assert_int_equal(saga_sched_begin(s, f->a), SAGA_OK);
    char *d[4] = {saga_blk_dev(f->t0), saga_blk_dev(f->m1), saga_blk_dev(f->t2),
                  saga_blk_dev(f->m3)};
    qsort(d, 4, sizeof d[0], cmp_ptr);
    for (int i = 1; i < 4; i++)
        assert_ptr_equal(d[i], d[0] + (size_t)i * 2 * MiB); /* the arena is full */
    f->bottom = d[0];
}

/* The scheduler places a step's blocks again when the arena has their bytes only in pieces
 * (place_step). Four 2 MiB blocks fill an 8 MiB arena in step 0; the first and third die there
 * (temporary, no later use), so step 1 finds 4 MiB free in two pieces for its new 3 MiB block
 * beside the second and fourth, which it reads. Those two hold input loaded from the host: the
 * scheduler lets go of their device copies, places the 3 MiB block first, the others after it,
 * and loads them again, so the step runs and reads the host's values. */
static void test_cuda_backend_sched_places_again(void **state) {
    (void)state;
    const size_t MiB = (size_t)1 << 20, nf = 2 * MiB / sizeof(float);
    size_t budget = 0;
    saga_backend *be = open_with_room(8 * MiB, &budget);
    saga_stream *s0 = saga_backend_default_stream(be);
    float *host[2] = {NULL, NULL}, *back = NULL;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(saga_backend_host_alloc(be, (void **)&host[i], 2 * MiB), SAGA_OK);
        for (size_t k = 0; k < nf; k++)
            host[i][k] = (float)(i + 1) + (float)(k % 97);
    }
    assert_int_equal(saga_backend_host_alloc(be, (void **)&back, 2 * MiB), SAGA_OK);
    saga_sched *s = NULL;
    assert_int_equal(saga_sched_new(&s, be, 8 * MiB, NULL, NULL), SAGA_OK);
    four_and_big f;
    four_and_big_begin(s, SAGA_BLK_INPUT, SAGA_USE_READ, host, &f);
    saga_blk *in1 = f.m1, *in3 = f.m3, *big = f.big;
    char *d[1] = {f.bottom};
    const int b = f.b;
    assert_int_equal(saga_sched_end(s, f.a), SAGA_OK);

    /* placed again, the largest first: the big block at the bottom, the readers above it */
    assert_int_equal(saga_sched_begin(s, b), SAGA_OK);
    assert_ptr_equal(saga_blk_dev(big), d[0]);
    char *r1 = saga_blk_dev(in1), *r3 = saga_blk_dev(in3);
    assert_true((r1 == d[0] + 3 * MiB && r3 == d[0] + 5 * MiB) ||
                (r3 == d[0] + 3 * MiB && r1 == d[0] + 5 * MiB));
    assert_int_equal(
        be->kernels->fill_f32(s0, saga_blk_dev(big), (int64_t)(3 * MiB / sizeof(float)), 7.0f),
        SAGA_OK);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(saga_memcpy_d2h_async(s0, back, saga_blk_dev(i ? in3 : in1), 2 * MiB),
                         SAGA_OK);
        assert_int_equal(saga_stream_synchronize(s0), SAGA_OK);
        assert_memory_equal(back, host[i], 2 * MiB);
    }
    assert_int_equal(saga_sched_end(s, b), SAGA_OK);
    assert_int_equal(saga_sched_finish(s), SAGA_OK);
    saga_sched_stats st;
    saga_sched_get_stats(s, &st);
    assert_int_equal(st.loads, 4); /* the two inputs, each loaded twice */
    saga_sched_free(&s);
    for (int i = 0; i < 2; i++)
        saga_backend_host_free(be, host[i], 2 * MiB);
    saga_backend_host_free(be, back, 2 * MiB);
    saga_backend_free_all(&be);
}

/* The scheduler's placing again goes further when the blocks in the way hold content only the
 * device has: written back to their homes on the host, placed again with the new block, loaded
 * again (place_step's last round). As in sched_places_again, but the second and fourth blocks are
 * state (a weight tile) that step 0 changes on the device: step 1 places its 3 MiB block at the
 * bottom and reads the values step 0 wrote, and the host holds them. */
static void test_cuda_backend_sched_writes_back_to_place(void **state) {
    (void)state;
    const size_t MiB = (size_t)1 << 20, nf = 2 * MiB / sizeof(float);
    size_t budget = 0;
    saga_backend *be = open_with_room(8 * MiB, &budget);
    saga_stream *s0 = saga_backend_default_stream(be);
    float *host[2] = {NULL, NULL}, *back = NULL;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(saga_backend_host_alloc(be, (void **)&host[i], 2 * MiB), SAGA_OK);
        for (size_t k = 0; k < nf; k++)
            host[i][k] = -1.0f;
    }
    assert_int_equal(saga_backend_host_alloc(be, (void **)&back, 2 * MiB), SAGA_OK);
    saga_sched *s = NULL;
    assert_int_equal(saga_sched_new(&s, be, 8 * MiB, NULL, NULL), SAGA_OK);
    four_and_big f;
    four_and_big_begin(s, SAGA_BLK_STATE, SAGA_USE_RW, host, &f);
    saga_blk *w1 = f.m1, *w3 = f.m3, *big = f.big;
    char *d[1] = {f.bottom};
    const int a = f.a, b = f.b;
    for (int i = 0; i < 2; i++) /* step 0 changes the state on the device */
        assert_int_equal(
            be->kernels->fill_f32(s0, saga_blk_dev(i ? w3 : w1), (int64_t)nf, (float)(5 + i)),
            SAGA_OK);
    assert_int_equal(saga_sched_end(s, a), SAGA_OK);

    assert_int_equal(saga_sched_begin(s, b), SAGA_OK);
    assert_ptr_equal(saga_blk_dev(big), d[0]);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(saga_memcpy_d2h_async(s0, back, saga_blk_dev(i ? w3 : w1), 2 * MiB),
                         SAGA_OK);
        assert_int_equal(saga_stream_synchronize(s0), SAGA_OK);
        for (size_t k = 0; k < nf; k += 4099)
            assert_true(back[k] == (float)(5 + i));
        assert_true(back[nf - 1] == (float)(5 + i));
    }
    assert_int_equal(saga_sched_end(s, b), SAGA_OK);
    assert_int_equal(saga_sched_finish(s), SAGA_OK);
    for (int i = 0; i < 2; i++) /* the write-backs reached the host */
        assert_true(host[i][0] == (float)(5 + i) && host[i][nf - 1] == (float)(5 + i));
    saga_sched_stats st;
    saga_sched_get_stats(s, &st);
    assert_int_equal(st.writebacks, 2);
    saga_sched_free(&s);
    for (int i = 0; i < 2; i++)
        saga_backend_host_free(be, host[i], 2 * MiB);
    saga_backend_host_free(be, back, 2 * MiB);
    saga_backend_free_all(&be);
}

/* The budget covers all that cudaMalloc gives the backend: each allocation at its size class,
 * the arena's free bytes, and the streams' scratch (reduction partials, the cuBLAS workspace).
 * Under a 3 MiB budget, a workload of odd sizes, a reduction and a product never held more than
 * the budget (held_peak_bytes); the cuBLAS workspace cuBLAS recommends (4 or 32 MiB) has no room
 * there, and the product runs within what the budget leaves. Without a budget, the product's
 * stream reserves the recommended workspace. */
static void test_cuda_backend_budget_covers_cache_and_scratch(void **state) {
    (void)state;
    const size_t MiB = (size_t)1 << 20;
    saga_backend_stats st;
    /* under a budget the default stream takes its scratch at the open: 3 MiB on top of that */
    size_t budget = 0;
    saga_backend *be = open_with_room(3 * MiB, &budget);
    saga_stream *s = saga_backend_default_stream(be);

    /* charged at the size class: 2.5 MiB + 1 byte takes 3 MiB. The backend holds the budget as
     * one arena: what is neither in use nor reserved is its free bytes (cached) */
    void *a = NULL, *b = NULL, *c = NULL;
    assert_int_equal(saga_backend_alloc(be, &a, 5 * MiB / 2 + 1), SAGA_OK);
    saga_backend_get_stats(be, &st);
    assert_int_equal(st.in_use_bytes, 3 * MiB);
    assert_int_equal(st.in_use_bytes + st.reserved_bytes + st.cached_bytes, budget);
    saga_backend_free(be, a, 5 * MiB / 2 + 1);
    saga_backend_get_stats(be, &st);
    assert_int_equal(st.in_use_bytes, 0);
    assert_int_equal(st.cached_bytes, 3 * MiB);
    /* a block of another class takes its room from the arena */
    assert_int_equal(saga_backend_alloc(be, &b, 1000), SAGA_OK);
    saga_backend_get_stats(be, &st);
    assert_int_equal(st.in_use_bytes, 1024);
    assert_int_equal(st.cached_bytes, 3 * MiB - 1024);
    /* 2.5 MiB + 1001 bytes requested would fit; as allocated they do not */
    assert_int_equal(saga_backend_alloc(be, &a, 5 * MiB / 2 + 1), SAGA_ERR_BUDGET);
    saga_test_assert_error_contains("(3.00 MiB as allocated) with 1.00 KiB in use", NULL);

    /* odd sizes through the arena, each freed range merged back with its neighbours */
    static const size_t odd[] = {MiB + 17,       700 * 1024 + 3,   2 * MiB - 5,
                                 300 * 1024 + 1, MiB + 300 * 1024, 700 * 1024 + 100};
    for (size_t k = 0; k < sizeof odd / sizeof *odd; k++) {
        assert_int_equal(saga_backend_alloc(be, &c, odd[k]), SAGA_OK);
        assert_int_equal(be->kernels->fill_f32(s, c, (int64_t)(odd[k] / sizeof(float)), 1.0f),
                         SAGA_OK);
        saga_backend_free(be, c, odd[k]);
    }

    /* a reduction: its partials are the stream's scratch, reserved within the budget */
    enum { N = 100003 };
    float *x = NULL;
    double sum = 0.0;
    assert_int_equal(saga_backend_alloc(be, (void **)&x, N * sizeof(float)), SAGA_OK);
    assert_int_equal(be->kernels->fill_f32(s, x, N, 0.5f), SAGA_OK);
    assert_int_equal(be->kernels->sum_f32(s, N, x, &sum), SAGA_OK);
    assert_true(sum == 0.5 * N);
    saga_backend_get_stats(be, &st);
    assert_true(st.reserved_bytes > 0);
    saga_backend_free(be, x, N * sizeof(float));

    /* a product whose recommended workspace has no room: it still runs, exactly */
    gemm_exact(be, 64, 48, 33);
    gemm_exact(be, 300, 130, 257);
    saga_backend_free(be, b, 1000);
    assert_int_equal(saga_backend_synchronize(be), SAGA_OK);
    saga_backend_get_stats(be, &st);
    print_message("held at most %zu of a %zu-byte budget (%zu reserved, %zu cached now)\n",
                  st.held_peak_bytes, budget, st.reserved_bytes, st.cached_bytes);
    assert_int_equal(st.in_use_bytes, 0);
    assert_true(st.peak_bytes <= budget);
    assert_true(st.held_peak_bytes <= budget);
    assert_true(st.held_peak_bytes == budget); /* the arena */
    assert_true(st.reserved_bytes + st.cached_bytes <= budget);
    saga_backend_free_all(&be);

    /* no budget: the stream reserves the recommended workspace for its products */
    assert_int_equal(saga_backend_cuda_new(&be, 0, NULL), SAGA_OK);
    gemm_exact(be, 64, 48, 33);
    saga_backend_get_stats(be, &st);
    print_message("reserved with no budget after a product: %zu bytes\n", st.reserved_bytes);
    assert_true(st.reserved_bytes >= 4 * MiB);
    /* SAGA_TEST_CUBLAS_WORKSPACE_MIB, where the device's compute capability is known (the CUDA
     * simulator's tests set it with SAGA_CUDASIM_CC): the workspace cuBLAS recommends for it,
     * 32 MiB from Hopper on, 4 MiB before */
    const char *want = getenv("SAGA_TEST_CUBLAS_WORKSPACE_MIB");
    if (want && *want) {
        const size_t ws = (size_t)strtoull(want, NULL, 10) * MiB;
        assert_true(st.reserved_bytes >= ws);
        assert_true(st.reserved_bytes < 2 * ws);
    }
    assert_true(st.held_peak_bytes >= st.reserved_bytes);
    saga_backend_free_all(&be);
}

/* A product whose cuBLAS workspace finds no room in the budget runs without it, and the default
 * stream keeps the scratch (partials and flags) it reserved when the backend opened: a later
 * reduction must not find that room taken. */
static void test_cuda_backend_full_budget_keeps_scratch(void **state) {
    (void)state;
    enum { CHUNK = 4096, SPARE = 8192, MAX_CHUNKS = 4096 };
    saga_backend_params p = saga_backend_params_defaults();
    p.budget_bytes = (size_t)8 << 20; /* a cuBLAS workspace share of 32 KiB */
    saga_backend *be = NULL;
    assert_int_equal(saga_backend_cuda_new(&be, 0, &p), SAGA_OK);
    saga_backend_stats st;
    saga_backend_get_stats(be, &st);
    const size_t reserved = st.reserved_bytes;
    assert_true(reserved > 0);
    /* fill the budget but for a few KiB: room for the product's matrices, not its workspace */
    static void *chunks[MAX_CHUNKS];
    int n = 0;
    for (;;) {
        saga_backend_get_stats(be, &st);
        if (p.budget_bytes - st.in_use_bytes - st.reserved_bytes < SPARE + CHUNK)
            break;
        assert_true(n < MAX_CHUNKS);
        assert_int_equal(saga_backend_alloc(be, &chunks[n++], CHUNK), SAGA_OK);
    }
    gemm_exact(be, 8, 8, 8);
    saga_backend_get_stats(be, &st);
    assert_int_equal(st.reserved_bytes, reserved);
    /* and a reduction still has its partials */
    float *x = NULL;
    double sum = 0.0;
    assert_int_equal(saga_backend_alloc(be, (void **)&x, 1000 * sizeof(float)), SAGA_OK);
    assert_int_equal(be->kernels->fill_f32(saga_backend_default_stream(be), x, 1000, 0.25f),
                     SAGA_OK);
    assert_int_equal(be->kernels->sum_f32(saga_backend_default_stream(be), 1000, x, &sum), SAGA_OK);
    assert_true(sum == 250.0);
    saga_backend_free(be, x, 1000 * sizeof(float));
    for (int i = 0; i < n; i++)
        saga_backend_free(be, chunks[i], CHUNK);
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

/* Rows gathered from pinned host memory and added into it by kernels, on the default stream and
 * on a stream of their own; memory that is not pinned is refused. */
static void test_cuda_backend_rows_copies(void **state) {
    (void)state;
    saga_test_rows_copies(gpu, saga_backend_default_stream(gpu));
    saga_stream *s = NULL;
    assert_int_equal(saga_stream_new(&s, gpu), SAGA_OK);
    saga_test_rows_copies(gpu, s);
    float pageable[8] = {0}, *d = NULL;
    assert_int_equal(saga_backend_alloc(gpu, (void **)&d, sizeof pageable), SAGA_OK);
    saga_host_rows hr = {.base = pageable, .row_bytes = sizeof pageable, .n = 1};
    assert_int_equal(saga_memcpy_rows_h2d_async(s, d, &hr), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("saga_memcpy_rows_h2d_async", "not pinned host memory", NULL);
    assert_int_equal(saga_stream_synchronize(s), SAGA_OK);
    saga_backend_free(gpu, d, sizeof pageable);
    saga_stream_free(&s);
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

/* Polling an event that has not completed: CUDA also leaves "not ready" as the thread's last
 * error, which the launch check of the next kernel (cudaGetLastError) must not report, on the
 * polling thread or on a fresh thread that never bound the device. saga_event_elapsed names the
 * event that was never recorded. */
typedef struct cuda_poll_arg {
    saga_event *e;
    double *d;
    int polls;
    saga_status st;
} cuda_poll_arg;

static void *cuda_poll_thread(void *arg) {
    cuda_poll_arg *p = arg;
    struct timespec ts = {0, 1000000L};
    while (!saga_event_done(p->e)) {
        p->polls++;
        nanosleep(&ts, NULL);
    }
    p->st = gpu->kernels->fill_f64(saga_backend_default_stream(gpu), p->d, 1, 5.0);
    if (p->st == SAGA_OK)
        p->st = saga_stream_synchronize(saga_backend_default_stream(gpu));
    return NULL;
}

static void test_cuda_backend_event_poll_then_launch(void **state) {
    (void)state;
    saga_stream *s = NULL;
    saga_event *e = NULL, *never = NULL;
    assert_int_equal(saga_stream_new(&s, gpu), SAGA_OK);
    assert_int_equal(saga_event_new(&e, gpu), SAGA_OK);
    assert_int_equal(saga_event_new(&never, gpu), SAGA_OK);
    double *d = NULL;
    assert_int_equal(saga_backend_alloc(gpu, (void **)&d, 2 * sizeof *d), SAGA_OK);
    saga_stream *ds = saga_backend_default_stream(gpu);

    int ms = 400;
    assert_int_equal(saga_stream_launch_host_fn(s, cuda_sleep_fn, &ms), SAGA_OK);
    assert_int_equal(saga_event_record(e, s), SAGA_OK);
    assert_false(saga_event_done(e)); /* the host function sleeps */
    /* a slot (named launch check) and an f64 kernel (plain launch check) */
    assert_int_equal(gpu->kernels->fill_f64(ds, d, 1, 4.0), SAGA_OK);
    assert_int_equal(gpu->kernels->axpby_f64(ds, 1, 2.0, d, 0.0, d), SAGA_OK);
    cuda_poll_arg p = {e, d + 1, 0, SAGA_ERR_INTERNAL};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, cuda_poll_thread, &p), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    print_message("the polling thread saw the event pending %d times\n", p.polls);
    assert_int_equal(p.st, SAGA_OK);
    assert_true(saga_event_done(e));
    double back[2] = {0.0, 0.0};
    dev_download(gpu, back, d, sizeof back);
    assert_true(back[0] == 8.0 && back[1] == 5.0);

    double secs = 0.0;
    assert_int_equal(saga_event_elapsed(never, e, &secs), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("start", "never recorded", NULL);
    assert_int_equal(saga_event_elapsed(e, never, &secs), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("end", "never recorded", NULL);
    assert_int_equal(saga_event_elapsed(e, e, &secs), SAGA_OK);
    assert_true(secs == 0.0);
    /* and the errors above left nothing for the next launch either */
    assert_int_equal(gpu->kernels->fill_f64(ds, d, 1, 1.0), SAGA_OK);
    assert_int_equal(saga_stream_synchronize(ds), SAGA_OK);

    saga_backend_free(gpu, d, 2 * sizeof *d);
    saga_event_free(&e);
    saga_event_free(&never);
    saga_stream_free(&s);
}

/* ---- f32 kernels: every slot of the table against the CPU's ------------------------------------
 *
 * Each test runs a slot on both backends with the same random inputs and compares. Bits are
 * compared where the GPU performs the CPU's operations in the CPU's order (data movement, ReLU,
 * dropout, segment reductions, the NLL gradient); elsewhere within a bound derived from the
 * arithmetic (above, "bounds"), with the derivation at each comparison: sums in another order,
 * multiply-adds the GPU fuses, libm functions within their documented errors. */

enum { MAX_TRACKED = 2048 };

static saga_stream *GS(void);

/* Buffers of the current test, freed by its teardown: GPU memory, and host memory. */
static void *gbufs[MAX_TRACKED];
static size_t gbuf_bytes[MAX_TRACKED];
static int n_gbufs;
static void *hbufs[MAX_TRACKED];
static int n_hbufs;

static int free_tracked(void **state) {
    (void)state;
    for (int i = 0; i < n_gbufs; i++)
        saga_backend_free(gpu, gbufs[i], gbuf_bytes[i]);
    for (int i = 0; i < n_hbufs; i++)
        free(hbufs[i]);
    n_gbufs = n_hbufs = 0;
    return saga_test_teardown(state);
}

/* Host memory (at least one byte, so that empty arrays are distinct pointers). */
static void *halloc(size_t bytes) {
    assert_true(n_hbufs < MAX_TRACKED);
    void *p = malloc(bytes ? bytes : 1);
    assert_non_null(p);
    hbufs[n_hbufs++] = p;
    return p;
}
static float *hf32(int64_t n) {
    return halloc((size_t)n * sizeof(float));
}
static int32_t *hi32(int64_t n) {
    return halloc((size_t)n * sizeof(int32_t));
}
static int64_t *hi64(int64_t n) {
    return halloc((size_t)n * sizeof(int64_t));
}

/* A GPU copy of bytes of host memory (at least 64 bytes are allocated, so that an empty array
 * is still a distinct pointer that offsets may be added to). */
static void *gput(const void *host, size_t bytes) {
    assert_true(n_gbufs < MAX_TRACKED);
    const size_t b = bytes ? bytes : 64;
    void *d = NULL;
    assert_int_equal(saga_backend_alloc(gpu, &d, b), SAGA_OK);
    gbufs[n_gbufs] = d;
    gbuf_bytes[n_gbufs++] = b;
    if (bytes) {
        assert_int_equal(saga_memcpy_h2d_async(GS(), d, host, bytes), SAGA_OK);
        assert_int_equal(saga_stream_synchronize(GS()), SAGA_OK);
    }
    return d;
}
static void gget(void *host, const void *d, size_t bytes) {
    if (bytes)
        dev_download(gpu, host, d, bytes);
}

/* A host copy of n floats (the CPU's operand, beside the GPU's). */
static float *hcopy(const float *x, int64_t n) {
    float *c = hf32(n);
    memcpy(c, x, (size_t)n * sizeof *c);
    return c;
}

static float frand(float lo, float hi) {
    return lo + (hi - lo) * (float)((rnd() + 1.0) * 0.5);
}
static int64_t irand(int64_t n) {
    return (int64_t)((rnd() + 1.0) * 0.5 * (double)n) % n;
}
static float *rand_f32(int64_t n, float lo, float hi) {
    float *x = hf32(n);
    for (int64_t i = 0; i < n; i++)
        x[i] = frand(lo, hi);
    return x;
}
static float *nan_f32(int64_t n) {
    float *x = hf32(n);
    for (int64_t i = 0; i < n; i++)
        x[i] = NAN;
    return x;
}

static saga_stream *GS(void) {
    return saga_backend_default_stream(gpu);
}
static saga_stream *CS(void) {
    return saga_backend_default_stream(cpu);
}
static const saga_kernels *GK(void) {
    return gpu->kernels;
}
static const saga_kernels *CK(void) {
    return cpu->kernels;
}

/* got (downloaded from d) against want: equal bits, or NaN on both (a GPU's arithmetic gives the
 * canonical NaN where x86 passes an operand's payload on). */
static void expect_bits(const void *d, const float *want, int64_t n, const char *what) {
    float *got = hf32(n);
    gget(got, d, (size_t)n * sizeof *got);
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof *got) != 0 && !(isnan(got[i]) && isnan(want[i])))
            fail_msg("%s[%lld]: cuda %.9g, cpu %.9g (bits differ)", what, (long long)i,
                     (double)got[i], (double)want[i]);
}

/* got (downloaded from d) against want within err[i] (close_within: NaN where the CPU has NaN,
 * an infinity where it has the same one). */
static void expect_within(const void *d, const float *want, const double *err, int64_t n,
                          const char *what) {
    float *got = hf32(n);
    gget(got, d, (size_t)n * sizeof *got);
    for (int64_t i = 0; i < n; i++)
        assert_close(got[i], want[i], err[i], what, i);
}

static double *hf64(int64_t n) {
    return halloc((size_t)n * sizeof(double));
}

/* ---- element-wise formulas: both sides within a bound of the exact value ------------------------
 *
 * Each value of a kernel's formula (the GPU's and the CPU's are the same operations, see the .cu
 * files) is carried as its exact value in double and a bound on how far an f32 computation of it
 * can be (running error analysis, Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed.,
 * sec. 3.3): an operation on operands within e_a and e_b of their values is within the propagated
 * error of its exact result, and its rounding adds u times that result, or LIBM_REL for a libm
 * function (at least the smallest normal's worth: ulps do not shrink among subnormals). The
 * second-order terms are kept, so the bound holds outright for the GPU's fused multiply-adds as for
 * the CPU's separate roundings; the two sides are within twice the bound of each other. */
#define U SAGA_TEST_U32

/* 1 / (1 + expf(-x)), or e / (1 + e) with e = expf(x) (saga_cuda_sigmoidf, nn_dense.c's sigmoidf)
 */
static xf xf_sigmoid(float x) {
    const xf one = xf_in(1), e = xf_exp(xf_in(x >= 0 ? -x : x));
    return x >= 0 ? xf_div(one, xf_add(one, e)) : xf_div(e, xf_add(one, e));
}

static void test_cuda_backend_f32_table_complete(void **state) {
    (void)state;
    const saga_kernels *k = GK();
    assert_int_equal(k->size, sizeof(saga_kernels));
    assert_true(k->pagerank_pull_f64 && k->pagerank_pull_acc_f64);
    assert_true(k->dot_acc_f64 && k->l1_diff_acc_f64 && k->add_scalar_dev_f64);
    const void *slots[] = {
        (const void *)k->gemm_f32,
        (const void *)k->bias_add_f32,
        (const void *)k->colsum_f32,
        (const void *)k->act_f32,
        (const void *)k->act_bwd_f32,
        (const void *)k->dropout_f32,
        (const void *)k->binary_f32,
        (const void *)k->scale_f32,
        (const void *)k->scale_heads_f32,
        (const void *)k->fill_f32,
        (const void *)k->copy2d_f32,
        (const void *)k->softmax_rows_f32,
        (const void *)k->softmax_rows_bwd_f32,
        (const void *)k->nll_f32,
        (const void *)k->bce_logits_f32,
        (const void *)k->sum_f32,
        (const void *)k->sumsq_f32,
        (const void *)k->gather_rows_f32,
        (const void *)k->scatter_add_rows_f32,
        (const void *)k->spmm_f32,
        (const void *)k->segment_reduce_f32,
        (const void *)k->segment_reduce_bwd_f32,
        (const void *)k->edge_softmax_f32,
        (const void *)k->edge_softmax_bwd_f32,
        (const void *)k->adam_f32,
        (const void *)k->sgd_f32,
        (const void *)k->dropout_rows_f32,
        (const void *)k->dropout_csr_f32,
        (const void *)k->spmm_t_f32,
        (const void *)k->half_to_f32,
        (const void *)k->nll_dev_f32,
    };
    for (size_t i = 0; i < sizeof slots / sizeof *slots; i++)
        if (!slots[i])
            fail_msg("f32 slot %zu of the CUDA kernel table is NULL", i);
}

static const int64_t elementwise_sizes[] = {0, 1, 31, 1000, 100003};

/* fill, scale (b == 0 must not read y; x == y), binary (z == x), with every size. */
static void test_cuda_backend_f32_fill_scale_binary(void **state) {
    (void)state;
    for (size_t si = 0; si < sizeof elementwise_sizes / sizeof *elementwise_sizes; si++) {
        const int64_t n = elementwise_sizes[si];
        const size_t bytes = (size_t)n * sizeof(float);
        float *x = rand_f32(n, -2.0f, 2.0f), *y = rand_f32(n, -2.0f, 2.0f);
        for (int64_t i = 0; i < n; i++) /* no division by (nearly) zero */
            y[i] = y[i] < 0.0f ? y[i] - 0.5f : y[i] + 0.5f;

        float *c = nan_f32(n), *g = gput(c, bytes);
        assert_int_equal(GK()->fill_f32(GS(), g, n, -1.25f), SAGA_OK);
        assert_int_equal(CK()->fill_f32(CS(), c, n, -1.25f), SAGA_OK);
        expect_bits(g, c, n, "fill_f32");

        /* b == 0: y holds NaN and must not be read */
        float *gx = gput(x, bytes);
        c = nan_f32(n);
        g = gput(c, bytes);
        assert_int_equal(GK()->scale_f32(GS(), n, 3.0f, gx, 0.0f, g), SAGA_OK);
        assert_int_equal(CK()->scale_f32(CS(), n, 3.0f, x, 0.0f, c), SAGA_OK);
        expect_bits(g, c, n, "scale_f32(b=0)"); /* one multiplication: the same bits */
        /* each head's block of columns by its coefficient: n = rows x 4 heads x F */
        if (n % 8 == 0) {
            const int64_t heads = 4, F = 2, rows = n / (heads * F);
            float *gs = gput(y, (size_t)(rows * heads) * sizeof(float));
            c = nan_f32(n);
            g = gput(c, bytes);
            assert_int_equal(GK()->scale_heads_f32(GS(), rows, heads, F, gs, gx, 0.0f, g), SAGA_OK);
            assert_int_equal(CK()->scale_heads_f32(CS(), rows, heads, F, y, x, 0.0f, c), SAGA_OK);
            expect_bits(g, c, n, "scale_heads_f32(beta=0)");
            c = hcopy(y, n);
            g = gput(y, bytes);
            assert_int_equal(GK()->scale_heads_f32(GS(), rows, heads, F, gs, gx, 1.0f, g), SAGA_OK);
            assert_int_equal(CK()->scale_heads_f32(CS(), rows, heads, F, y, x, 1.0f, c), SAGA_OK);
            double *e2 = hf64(n);
            for (int64_t i = 0; i < n; i++) /* sc x + y: a fused add may round once less */
                e2[i] = 2 * gam(2) * (fabs(y[i / F] * x[i]) + fabs(y[i]));
            expect_within(g, c, e2, n, "scale_heads_f32(beta=1)");
        }
        c = hcopy(y, n);
        g = gput(y, bytes);
        assert_int_equal(GK()->scale_f32(GS(), n, 0.75f, gx, -1.5f, g), SAGA_OK);
        assert_int_equal(CK()->scale_f32(CS(), n, 0.75f, x, -1.5f, c), SAGA_OK);
        /* a x + b y: the GPU may fuse one multiply into the add (one rounding less); each side
         * within gamma_2 (|a x| + |b y|) of the exact value */
        double *err = hf64(n);
        for (int64_t i = 0; i < n; i++)
            err[i] = 2 * gam(2) * (0.75 * fabs(x[i]) + 1.5 * fabs(y[i]));
        expect_within(g, c, err, n, "scale_f32");
        c = hcopy(x, n);
        g = gput(x, bytes);
        assert_int_equal(GK()->scale_f32(GS(), n, 2.0f, g, 0.5f, g), SAGA_OK);
        assert_int_equal(CK()->scale_f32(CS(), n, 2.0f, c, 0.5f, c), SAGA_OK);
        for (int64_t i = 0; i < n; i++)
            err[i] = 2 * gam(2) * 2.5 * fabs(x[i]);
        expect_within(g, c, err, n, "scale_f32(x=y)");

        float *gy = gput(y, bytes);
        for (int op = 0; op < SAGA_BINOP_COUNT; op++) {
            c = nan_f32(n);
            g = gput(c, bytes);
            assert_int_equal(GK()->binary_f32(GS(), (saga_binop)op, n, gx, gy, g), SAGA_OK);
            assert_int_equal(CK()->binary_f32(CS(), (saga_binop)op, n, x, y, c), SAGA_OK);
            expect_bits(g, c, n, "binary_f32"); /* one IEEE operation each */
            /* z == x */
            c = hcopy(x, n);
            g = gput(x, bytes);
            assert_int_equal(GK()->binary_f32(GS(), (saga_binop)op, n, g, gy, g), SAGA_OK);
            assert_int_equal(CK()->binary_f32(CS(), (saga_binop)op, n, c, y, c), SAGA_OK);
            expect_bits(g, c, n, "binary_f32(z=x)");
        }
    }
    float one = 1.0f, *g1 = gput(&one, sizeof one);
    assert_int_equal(GK()->binary_f32(GS(), SAGA_BINOP_COUNT, 1, g1, g1, g1), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("binary_f32", "unknown operation", NULL);
}

/* 16-bit floats widened on the device: the CPU's bits for every bf16 and fp16 value. */
static void test_cuda_backend_half_to_f32(void **state) {
    (void)state;
    const int64_t n = 65536;
    uint16_t *x = halloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++)
        x[i] = (uint16_t)i;
    void *gx = gput(x, (size_t)n * sizeof *x);
    for (int bf = 0; bf < 2; bf++) {
        float *c = nan_f32(n), *g = gput(c, (size_t)n * sizeof(float));
        assert_int_equal(GK()->half_to_f32(GS(), n, gx, bf, g), SAGA_OK);
        assert_int_equal(CK()->half_to_f32(CS(), n, x, bf, c), SAGA_OK);
        expect_bits(g, c, n, bf ? "half_to_f32(bf16)" : "half_to_f32(fp16)");
    }
}

/* The bounds on one side's act_f32 (ey, from x) and act_bwd_f32 (edx, from the CPU's y and dy):
 * act.cu's formulas, nn_dense.c's the same but for tanh, in xf. A non-finite input or output
 * gets 0: the same value (NaN, an infinity, or a limit like tanh's +-1) on both sides. */
static void act_err(saga_act kind, float x, float alpha, float y, float dy, double *ey,
                    double *edx) {
    *ey = *edx = 0;
    if (!isfinite(x) || !isfinite(y))
        return;
    const xf g = xf_in(dy), a = xf_in(alpha), one = xf_in(1), Y = xf_in(y);
    switch (kind) {
    case SAGA_ACT_RELU: /* selects: exact */
        break;
    case SAGA_ACT_LEAKY_RELU: /* alpha x, alpha dy */
        *ey = x > 0 ? 0 : xf_mul(a, xf_in(x)).e;
        *edx = x > 0 ? 0 : xf_mul(a, g).e;
        break;
    case SAGA_ACT_ELU: /* alpha expm1f(x); dy (y + alpha) */
        *ey = x > 0 ? 0 : xf_mul(a, xf_expm1(xf_in(x))).e;
        *edx = x > 0 ? 0 : xf_mul(g, xf_add(Y, a)).e;
        break;
    case SAGA_ACT_SIGMOID: /* dy (y (1 - y)) */
        *ey = xf_sigmoid(x).e;
        *edx = xf_mul(g, xf_mul(Y, xf_sub(one, Y))).e;
        break;
    default: /* dy (1 - y y) */
        *ey = xf_op(tanh((double)x), 0, TANH_REL).e;
        *edx = xf_mul(g, xf_sub(one, xf_mul(Y, Y))).e;
        break;
    }
}

/* Every activation forward and backward, with NaN and infinities among the inputs. */
static void test_cuda_backend_f32_activations(void **state) {
    (void)state;
    for (size_t si = 0; si < sizeof elementwise_sizes / sizeof *elementwise_sizes; si++) {
        const int64_t n = elementwise_sizes[si];
        const size_t bytes = (size_t)n * sizeof(float);
        float *x = rand_f32(n, -6.0f, 6.0f), *dy = rand_f32(n, -1.0f, 1.0f);
        if (n >= 1000) {
            x[3] = NAN;
            x[4] = INFINITY;
            x[5] = -INFINITY;
            x[6] = 0.0f;
            x[7] = -0.0f;
            x[8] = 90.0f; /* exp overflows */
            x[9] = -90.0f;
        }
        float *gx = gput(x, bytes);
        for (int kind = 0; kind < SAGA_ACT_COUNT; kind++) {
            const float alpha = kind == SAGA_ACT_LEAKY_RELU ? 0.1f : 1.3f;
            float *y = nan_f32(n), *gy = gput(y, bytes);
            assert_int_equal(GK()->act_f32(GS(), (saga_act)kind, n, alpha, gx, gy), SAGA_OK);
            assert_int_equal(CK()->act_f32(CS(), (saga_act)kind, n, alpha, x, y), SAGA_OK);
            /* each side within act_err of the exact value (expm1f, expf and tanh within their
             * documented errors), so within twice that of the other */
            double *err = hf64(n), *derr = hf64(n);
            for (int64_t i = 0; i < n; i++) {
                act_err((saga_act)kind, x[i], alpha, y[i], dy[i], &err[i], &derr[i]);
                err[i] *= 2;
                derr[i] *= 2;
            }
            if (kind == SAGA_ACT_RELU || kind == SAGA_ACT_LEAKY_RELU)
                expect_bits(gy, y, n, "act_f32");
            else
                expect_within(gy, y, err, n, "act_f32");
            /* the backward from the CPU's forward output, so both read the same y; dx == dy */
            float *gyc = gput(y, bytes);
            float *dx = hcopy(dy, n), *gdx = gput(dy, bytes);
            assert_int_equal(GK()->act_bwd_f32(GS(), (saga_act)kind, n, alpha, gx, gyc, gdx, gdx),
                             SAGA_OK);
            assert_int_equal(CK()->act_bwd_f32(CS(), (saga_act)kind, n, alpha, x, y, dx, dx),
                             SAGA_OK);
            /* a product or two: the GPU may fuse them */
            expect_within(gdx, dx, derr, n, "act_bwd_f32");
            /* in place: y == x */
            float *c = hcopy(x, n), *g = gput(x, bytes);
            assert_int_equal(GK()->act_f32(GS(), (saga_act)kind, n, alpha, g, g), SAGA_OK);
            assert_int_equal(CK()->act_f32(CS(), (saga_act)kind, n, alpha, c, c), SAGA_OK);
            expect_within(g, c, err, n, "act_f32(y=x)");
        }
    }
    float v = 1.0f, *g = gput(&v, sizeof v);
    assert_int_equal(GK()->act_f32(GS(), SAGA_ACT_COUNT, 1, 0.0f, g, g), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("act_f32", "unknown activation", NULL);
    assert_int_equal(GK()->act_bwd_f32(GS(), (saga_act)-1, 1, 0.0f, g, g, g, g),
                     SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("act_bwd_f32", "unknown activation", NULL);
}

/* The mask is the CPU's, bit for bit, for blocks of a larger tensor (first > 0) and in place. */
static void test_cuda_backend_f32_dropout(void **state) {
    (void)state;
    static const float ps[] = {0.0f, 0.1f, 0.5f, 0.9f};
    static const int64_t firsts[] = {0, 1, 12345, (int64_t)1 << 40};
    for (size_t si = 0; si < sizeof elementwise_sizes / sizeof *elementwise_sizes; si++) {
        const int64_t n = elementwise_sizes[si];
        const size_t bytes = (size_t)n * sizeof(float);
        float *x = rand_f32(n, -3.0f, 3.0f);
        if (n >= 31) {
            x[1] = NAN; /* dropped: +0 on both; kept: NaN on both */
            x[2] = INFINITY;
        }
        float *gx = gput(x, bytes);
        for (size_t pi = 0; pi < sizeof ps / sizeof *ps; pi++) {
            for (size_t fi = 0; fi < sizeof firsts / sizeof *firsts; fi++) {
                const uint64_t seed = 0x5eed0000u + pi * 7 + fi;
                float *y = nan_f32(n), *gy = gput(y, bytes);
                assert_int_equal(GK()->dropout_f32(GS(), n, ps[pi], seed, firsts[fi], gx, gy),
                                 SAGA_OK);
                assert_int_equal(CK()->dropout_f32(CS(), n, ps[pi], seed, firsts[fi], x, y),
                                 SAGA_OK);
                expect_bits(gy, y, n, "dropout_f32");
            }
            /* in place */
            float *c = hcopy(x, n), *g = gput(x, bytes);
            assert_int_equal(GK()->dropout_f32(GS(), n, ps[pi], 99, 7, g, g), SAGA_OK);
            assert_int_equal(CK()->dropout_f32(CS(), n, ps[pi], 99, 7, c, c), SAGA_OK);
            expect_bits(g, c, n, "dropout_f32(y=x)");
        }
    }
    /* bad arguments: an error, nothing written */
    float v[4] = {1, 2, 3, 4}, *g = gput(v, sizeof v), *o = gput(v, sizeof v);
    assert_int_equal(GK()->dropout_f32(GS(), 4, 1.0f, 1, 0, g, o), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("dropout_f32", "p must be in [0, 1)", NULL);
    assert_int_equal(GK()->dropout_f32(GS(), 4, -0.1f, 1, 0, g, o), SAGA_ERR_INVALID_ARG);
    assert_int_equal(GK()->dropout_f32(GS(), 4, NAN, 1, 0, g, o), SAGA_ERR_INVALID_ARG);
    assert_int_equal(GK()->dropout_f32(GS(), 4, 0.5f, 1, -1, g, o), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("dropout_f32", "first element index -1 < 0", NULL);
    expect_bits(o, v, 4, "dropout_f32 after errors");
}

/* Rows given by id draw the same bits on both backends. */
static void test_cuda_backend_f32_dropout_rows(void **state) {
    (void)state;
    static const int64_t shapes[][2] = {{0, 4}, {1, 1}, {333, 16}, {5000, 7}};
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        const int64_t rows = shapes[si][0], cols = shapes[si][1], n = rows * cols;
        int32_t *ids = test_malloc((size_t)(rows ? rows : 1) * sizeof *ids);
        for (int64_t r = 0; r < rows; r++)
            ids[r] = (int32_t)((r * 7919 + 13) % 100003);
        float *x = rand_f32(n, -3.0f, 3.0f);
        float *gx = gput(x, (size_t)n * sizeof(float));
        int32_t *gids = gput(ids, (size_t)(rows ? rows : 1) * sizeof *ids);
        for (int pi = 0; pi < 3; pi++) {
            const float p = pi * 0.3f;
            float *y = nan_f32(n), *gy = gput(y, (size_t)n * sizeof(float));
            assert_int_equal(GK()->dropout_rows_f32(GS(), rows, cols, p, 77, gids, gx, gy),
                             SAGA_OK);
            assert_int_equal(CK()->dropout_rows_f32(CS(), rows, cols, p, 77, ids, x, y), SAGA_OK);
            expect_bits(gy, y, n, "dropout_rows_f32");
        }
        test_free(ids);
    }
}

/* bias_add (y == x too), colsum (beta == 0 must not read out), copy2d (padded leading
 * dimensions, accumulate or not). */
static void test_cuda_backend_f32_rows_and_columns(void **state) {
    (void)state;
    static const int64_t shapes[][2] = {{0, 5},     {3, 0},      {1, 1},    {37, 7},
                                        {5000, 33}, {1000, 300}, {70000, 3}};
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        const int64_t rows = shapes[si][0], cols = shapes[si][1], n = rows * cols;
        const size_t bytes = (size_t)n * sizeof(float);
        float *x = rand_f32(n, -1.0f, 1.0f), *b = rand_f32(cols, -1.0f, 1.0f);
        float *gx = gput(x, bytes), *gb = gput(b, (size_t)cols * sizeof(float));

        float *y = nan_f32(n), *gy = gput(y, bytes);
        assert_int_equal(GK()->bias_add_f32(GS(), rows, cols, gx, gb, gy), SAGA_OK);
        assert_int_equal(CK()->bias_add_f32(CS(), rows, cols, x, b, y), SAGA_OK);
        expect_bits(gy, y, n, "bias_add_f32"); /* one addition */
        float *c = hcopy(x, n), *g = gput(x, bytes);
        assert_int_equal(GK()->bias_add_f32(GS(), rows, cols, g, gb, g), SAGA_OK);
        assert_int_equal(CK()->bias_add_f32(CS(), rows, cols, c, b, c), SAGA_OK);
        expect_bits(g, c, n, "bias_add_f32(y=x)");

        /* colsum: double sums of the same terms in another order, rounded once to f32 */
        for (int bi = 0; bi < 2; bi++) {
            const float beta = bi ? 0.5f : 0.0f;
            float *out = bi ? rand_f32(cols, -1.0f, 1.0f) : nan_f32(cols);
            float *gout = gput(out, (size_t)cols * sizeof(float));
            /* the two double sums of a column's rows + 1 terms within 2 gamma_{rows+1} of f64 of
             * each other; each rounded once to f32 */
            double *err = hf64(cols);
            for (int64_t j = 0; j < cols; j++) {
                double m = beta != 0.0f ? fabs(beta * out[j]) : 0.0;
                for (int64_t i = 0; i < rows; i++)
                    m += fabs(x[i * cols + j]);
                err[j] = 2 * gam64(rows + 1) * m;
            }
            assert_int_equal(GK()->colsum_f32(GS(), rows, cols, gx, beta, gout), SAGA_OK);
            assert_int_equal(CK()->colsum_f32(CS(), rows, cols, x, beta, out), SAGA_OK);
            for (int64_t j = 0; j < cols; j++)
                err[j] += 2 * gam(1) * (fabs(out[j]) + err[j]);
            expect_within(gout, out, err, cols, "colsum_f32");
        }

        /* copy2d: a block of cols columns between matrices of cols + 3 and cols + 5 columns */
        const int64_t lds = cols + 3, ldd = cols + 5;
        float *src = rand_f32(rows * lds, -1.0f, 1.0f);
        float *gsrc = gput(src, (size_t)(rows * lds) * sizeof(float));
        for (int acc = 0; acc < 2; acc++) {
            float *dst = rand_f32(rows * ldd, -1.0f, 1.0f);
            float *gdst = gput(dst, (size_t)(rows * ldd) * sizeof(float));
            assert_int_equal(
                GK()->copy2d_f32(GS(), rows, cols, gsrc + 1, lds, gdst + 2, ldd, acc != 0),
                SAGA_OK);
            assert_int_equal(
                CK()->copy2d_f32(CS(), rows, cols, src + 1, lds, dst + 2, ldd, acc != 0), SAGA_OK);
            /* the columns outside the block are untouched: compare the whole matrix */
            expect_bits(gdst, dst, rows * ldd, "copy2d_f32");
            /* lds == 0: one row broadcast to every row (a bias row over a batch) */
            float *bdst = rand_f32(rows * ldd, -1.0f, 1.0f);
            float *gbdst = gput(bdst, (size_t)(rows * ldd) * sizeof(float));
            assert_int_equal(GK()->copy2d_f32(GS(), rows, cols, gb, 0, gbdst + 1, ldd, acc != 0),
                             SAGA_OK);
            assert_int_equal(CK()->copy2d_f32(CS(), rows, cols, b, 0, bdst + 1, ldd, acc != 0),
                             SAGA_OK);
            expect_bits(gbdst, bdst, rows * ldd, "copy2d_f32(lds=0)");
        }
    }
}

/* C = alpha op(A) op(B) + beta C with every transpose, padded leading dimensions, K == 0,
 * alpha == 0, beta == 0 over a NaN C; and the leading-dimension and range checks. */
static void gemm_case(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, float beta) {
    const int64_t lda = (ta ? M : K) + 2, ldb = (tb ? K : N) + 1, ldc = N + 3;
    const int64_t a_rows = ta ? K : M, b_rows = tb ? N : K;
    float *A = rand_f32(a_rows * lda, -1.0f, 1.0f), *B = rand_f32(b_rows * ldb, -1.0f, 1.0f);
    float *C = beta == 0.0f ? nan_f32(M * ldc) : rand_f32(M * ldc, -1.0f, 1.0f);
    const float *C0 = hcopy(C, M * ldc);
    float *gA = gput(A, (size_t)(a_rows * lda) * sizeof(float));
    float *gB = gput(B, (size_t)(b_rows * ldb) * sizeof(float));
    float *gC = gput(C, (size_t)(M * ldc) * sizeof(float));
    assert_int_equal(GK()->gemm_f32(GS(), ta, tb, M, N, K, alpha, gA, lda, gB, ldb, beta, gC, ldc),
                     SAGA_OK);
    assert_int_equal(CK()->gemm_f32(CS(), ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc),
                     SAGA_OK);
    /* The two libraries sum the K products in different orders (and cuBLAS fuses multiply-adds):
     * a term passes through its product, at most K - 1 additions, alpha's product and the
     * addition of beta C, within gamma_{K+2} of the sum of the terms' magnitudes on each side. The
     * padding between rows of C is compared too (it must be untouched, NaN included). */
    double *mag = halloc((size_t)(M * ldc) * sizeof *mag);
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < ldc; j++) {
            double m = 0.0;
            if (j < N) {
                for (int64_t k = 0; k < K; k++) {
                    const float a = ta ? A[k * lda + i] : A[i * lda + k];
                    const float b = tb ? B[j * ldb + k] : B[k * ldb + j];
                    m += fabs((double)a * b);
                }
                m = fabs(alpha) * m + (beta != 0.0f ? fabs(beta * C0[i * ldc + j]) : 0.0);
            }
            mag[i * ldc + j] = m;
        }
    }
    float *got = hf32(M * ldc);
    gget(got, gC, (size_t)(M * ldc) * sizeof(float));
    for (int64_t e = 0; e < M * ldc; e++) {
        if (e % ldc >= N) { /* padding: untouched */
            if (memcmp(&got[e], &C0[e], sizeof *got) != 0)
                fail_msg("gemm_f32: padding element %lld of C was written", (long long)e);
            continue;
        }
        const double tol = 2 * gam(K + 2) * mag[e];
        if (!(fabs((double)got[e] - C[e]) <= tol))
            fail_msg("gemm_f32(ta %d tb %d M %lld N %lld K %lld alpha %g beta %g)[%lld]: cuda "
                     "%.9g, cpu %.9g (tolerance %.3g)",
                     ta, tb, (long long)M, (long long)N, (long long)K, (double)alpha, (double)beta,
                     (long long)e, (double)got[e], (double)C[e], tol);
    }
}

static void test_cuda_backend_f32_gemm(void **state) {
    (void)state;
    static const int64_t mnk[][3] = {
        {1, 1, 1}, {7, 5, 3}, {64, 48, 33}, {300, 130, 257}, {3, 2, 0}};
    static const float ab[][2] = {
        {1.0f, 0.0f}, {0.5f, 1.0f}, {-2.0f, 0.25f}, {0.0f, 0.5f}, {0.0f, 0.0f}};
    for (size_t si = 0; si < sizeof mnk / sizeof *mnk; si++)
        for (int t = 0; t < 4; t++)
            for (size_t ai = 0; ai < sizeof ab / sizeof *ab; ai++)
                gemm_case(t & 1, t & 2, mnk[si][0], mnk[si][1], mnk[si][2], ab[ai][0], ab[ai][1]);
    /* M == 0 or N == 0: nothing to do, no launch */
    assert_int_equal(
        GK()->gemm_f32(GS(), false, false, 0, 5, 5, 1.0f, NULL, 5, NULL, 5, 0.0f, NULL, 5),
        SAGA_OK);
    float v = 1.0f, *g = gput(&v, sizeof v);
    assert_int_equal(GK()->gemm_f32(GS(), false, false, 1, 1, (int64_t)1 << 31, 1.0f, g,
                                    (int64_t)1 << 31, g, 1, 0.0f, g, 1),
                     SAGA_ERR_UNSUPPORTED);
    saga_test_assert_error_contains("gemm_f32", "32-bit integer range", NULL);
    assert_int_equal(GK()->gemm_f32(GS(), false, false, 2, 3, 4, 1.0f, g, 3, g, 3, 0.0f, g, 3),
                     SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("gemm_f32", "leading dimensions", NULL);
    assert_int_equal(GK()->gemm_f32(GS(), false, false, 2, 3, 4, 1.0f, g, 4, g, 3, 0.0f, g, 2),
                     SAGA_ERR_INVALID_ARG);
}

/* Row-wise softmax and log-softmax, forward (y == x too) and backward (dx == dy too). */
static void test_cuda_backend_f32_softmax_rows(void **state) {
    (void)state;
    static const int64_t shapes[][2] = {{0, 4},     {5, 0},   {1, 1},    {100, 5},
                                        {1000, 32}, {77, 33}, {50, 1000}};
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        const int64_t rows = shapes[si][0], cols = shapes[si][1], n = rows * cols;
        const size_t bytes = (size_t)n * sizeof(float);
        float *x = rand_f32(n, -8.0f, 8.0f), *dy = rand_f32(n, -1.0f, 1.0f);
        float *gx = gput(x, bytes), *gdy = gput(dy, bytes);
        for (int lg = 0; lg < 2; lg++) {
            float *y = nan_f32(n), *gy = gput(y, bytes);
            assert_int_equal(GK()->softmax_rows_f32(GS(), rows, cols, lg, gx, gy), SAGA_OK);
            assert_int_equal(CK()->softmax_rows_f32(CS(), rows, cols, lg, x, y), SAGA_OK);
            /* the same operations, the double sums in another order, expf within 2 ulp on each
             * side: softmax_err each */
            double *err = hf64(n), *derr = hf64(n);
            for (int64_t i = 0; i < rows; i++) {
                xf_softmax_err(cols, 1, lg, x + i * cols, err + i * cols);
                xf_softmax_bwd_err(cols, 1, lg, y + i * cols, dy + i * cols, derr + i * cols);
            }
            for (int64_t i = 0; i < n; i++) {
                err[i] *= 2;
                derr[i] *= 2;
            }
            expect_within(gy, y, err, n, lg ? "log_softmax" : "softmax");
            float *c = hcopy(x, n), *g = gput(x, bytes);
            assert_int_equal(GK()->softmax_rows_f32(GS(), rows, cols, lg, g, g), SAGA_OK);
            assert_int_equal(CK()->softmax_rows_f32(CS(), rows, cols, lg, c, c), SAGA_OK);
            expect_within(g, c, err, n, lg ? "log_softmax(y=x)" : "softmax(y=x)");

            float *gyc = gput(y, bytes); /* both backward passes read the CPU's output */
            float *dx = nan_f32(n), *gdx = gput(dx, bytes);
            assert_int_equal(GK()->softmax_rows_bwd_f32(GS(), rows, cols, lg, gyc, gdy, gdx),
                             SAGA_OK);
            assert_int_equal(CK()->softmax_rows_bwd_f32(CS(), rows, cols, lg, y, dy, dx), SAGA_OK);
            expect_within(gdx, dx, derr, n, "softmax_rows_bwd_f32");
            c = hcopy(dy, n);
            g = gput(dy, bytes);
            assert_int_equal(GK()->softmax_rows_bwd_f32(GS(), rows, cols, lg, gyc, g, g), SAGA_OK);
            assert_int_equal(CK()->softmax_rows_bwd_f32(CS(), rows, cols, lg, y, c, c), SAGA_OK);
            expect_within(g, c, derr, n, "softmax_rows_bwd_f32(dx=dy)");
        }
    }
}

/* NLL over every row and over a list with repeats; empty lists; bad rows and labels leave the
 * loss and the gradient untouched. */
static void test_cuda_backend_f32_nll(void **state) {
    (void)state;
    enum { ROWS = 3000, COLS = 7, N_IDX = 1500 };
    float *logp = rand_f32(ROWS * COLS, -5.0f, 0.0f);
    int32_t *labels = hi32(ROWS), *idx = hi32(N_IDX);
    for (int i = 0; i < ROWS; i++)
        labels[i] = (int32_t)irand(COLS);
    for (int k = 0; k < N_IDX; k++)
        idx[k] = (int32_t)(k > 0 && k % 10 == 0 ? idx[k / 2] : irand(ROWS)); /* repeats */
    float *glogp = gput(logp, sizeof(float) * ROWS * COLS);
    int32_t *glabels = gput(labels, sizeof(int32_t) * ROWS),
            *gidx = gput(idx, sizeof(int32_t) * N_IDX);
    const size_t gbytes = sizeof(float) * ROWS * COLS;
    for (int with_idx = 0; with_idx < 2; with_idx++) {
        for (int with_grad = 0; with_grad < 2; with_grad++) {
            float *d = nan_f32(ROWS * COLS), *gd = gput(d, gbytes);
            double gl = -1.0, cl = -2.0, gl2 = -3.0;
            assert_int_equal(GK()->nll_f32(GS(), ROWS, COLS, glogp, glabels, with_idx ? gidx : NULL,
                                           N_IDX, &gl, with_grad ? gd : NULL),
                             SAGA_OK);
            assert_int_equal(CK()->nll_f32(CS(), ROWS, COLS, logp, labels, with_idx ? idx : NULL,
                                           N_IDX, &cl, with_grad ? d : NULL),
                             SAGA_OK);
            /* double sums of the same n f32 terms in another order, then / n */
            double m = 0;
            for (int k = 0; k < (with_idx ? N_IDX : ROWS); k++) {
                const int r = with_idx ? idx[k] : k;
                m += fabs(logp[r * COLS + labels[r]]);
            }
            const int64_t nt = with_idx ? N_IDX : ROWS;
            assert_close(gl, cl, 2 * gam64(nt + 1) * m / (double)nt, "nll_f32 loss", with_idx);
            assert_int_equal(GK()->nll_f32(GS(), ROWS, COLS, glogp, glabels, with_idx ? gidx : NULL,
                                           N_IDX, &gl2, NULL),
                             SAGA_OK);
            assert_memory_equal(&gl, &gl2, sizeof gl); /* deterministic */
            if (with_grad) /* -1/n added once per listing: the same bits in any order */
                expect_bits(gd, d, ROWS * COLS, "nll_f32 dlogp");
        }
    }
    /* an empty list: loss 0, gradient 0 */
    float *d = nan_f32(ROWS * COLS), *gd = gput(d, gbytes);
    double gl = -1.0;
    assert_int_equal(GK()->nll_f32(GS(), ROWS, COLS, glogp, glabels, gidx, 0, &gl, gd), SAGA_OK);
    assert_true(gl == 0.0);
    float *zeros = hf32(ROWS * COLS);
    memset(zeros, 0, gbytes);
    expect_bits(gd, zeros, ROWS * COLS, "nll_f32 dlogp (no rows)");

    /* errors: a listed row out of range (negative, too large) and a bad label */
    int32_t *bad = hi32(N_IDX);
    memcpy(bad, idx, sizeof(int32_t) * N_IDX);
    bad[1200] = ROWS;
    bad[1300] = -4;
    int32_t *gbad = gput(bad, sizeof(int32_t) * N_IDX);
    float *sentinel = rand_f32(ROWS * COLS, 1.0f, 2.0f), *gs = gput(sentinel, gbytes);
    gl = 42.0;
    assert_int_equal(GK()->nll_f32(GS(), ROWS, COLS, glogp, glabels, gbad, N_IDX, &gl, gs),
                     SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("nll_f32", "row index 3000 at position 1200", NULL);
    assert_true(gl == 42.0);
    expect_bits(gs, sentinel, ROWS * COLS, "nll_f32 dlogp after a bad row");
    int32_t *badl = hi32(ROWS);
    memcpy(badl, labels, sizeof(int32_t) * ROWS);
    badl[idx[700]] = COLS;
    int32_t *gbadl = gput(badl, sizeof(int32_t) * ROWS);
    assert_int_equal(GK()->nll_f32(GS(), ROWS, COLS, glogp, gbadl, gidx, N_IDX, &gl, gs),
                     SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("nll_f32", "has label 7, outside [0, 7)", NULL);
    assert_true(gl == 42.0);
    expect_bits(gs, sentinel, ROWS * COLS, "nll_f32 dlogp after a bad label");
    assert_int_equal(GK()->nll_f32(GS(), ROWS, COLS, glogp, gbadl, NULL, 0, &gl, gs),
                     SAGA_ERR_INVALID_ARG);
    assert_true(gl == 42.0);
}

/* nll_dev_f32 writes nll_f32's mean rounded to f32 and its gradient, bit for bit, on both
 * backends; an empty list writes 0. A bad row or label returns SAGA_OK on CUDA, writes neither
 * output and is reported once, at the next synchronization, in the CPU's words; the CPU reports
 * it at the call. */
static void test_cuda_backend_f32_nll_dev(void **state) {
    (void)state;
    enum { ROWS = 2000, COLS = 5, N_IDX = 900 };
    float *logp = rand_f32(ROWS * COLS, -5.0f, 0.0f);
    int32_t *labels = hi32(ROWS), *idx = hi32(N_IDX);
    for (int i = 0; i < ROWS; i++)
        labels[i] = (int32_t)irand(COLS);
    for (int k = 0; k < N_IDX; k++)
        idx[k] = (int32_t)(k > 0 && k % 10 == 0 ? idx[k / 2] : irand(ROWS));
    float *glogp = gput(logp, sizeof(float) * ROWS * COLS);
    int32_t *glabels = gput(labels, sizeof(int32_t) * ROWS),
            *gidx = gput(idx, sizeof(int32_t) * N_IDX);
    const size_t gbytes = sizeof(float) * ROWS * COLS;
    float *d = nan_f32(ROWS * COLS), *gd = gput(d, gbytes), *gd2 = gput(d, gbytes);
    float nan1 = NAN, *gloss = gput(&nan1, sizeof nan1);
    for (int with_idx = 0; with_idx < 2; with_idx++) {
        const int32_t *gi = with_idx ? gidx : NULL, *ci = with_idx ? idx : NULL;
        double want = 0.0;
        assert_int_equal(GK()->nll_f32(GS(), ROWS, COLS, glogp, glabels, gi, N_IDX, &want, gd),
                         SAGA_OK);
        assert_int_equal(GK()->nll_dev_f32(GS(), ROWS, COLS, glogp, glabels, gi, N_IDX, gloss, gd2),
                         SAGA_OK);
        float got = 0.0f, wantf = (float)want, cl = 0.0f;
        gget(&got, gloss, sizeof got);
        assert_memory_equal(&got, &wantf, sizeof got);
        float *dd = hf32(ROWS * COLS);
        gget(dd, gd, gbytes);
        expect_bits(gd2, dd, ROWS * COLS, "nll_dev_f32 dlogp");
        float *cd = nan_f32(ROWS * COLS);
        assert_int_equal(CK()->nll_dev_f32(CS(), ROWS, COLS, logp, labels, ci, N_IDX, &cl, cd),
                         SAGA_OK);
        double cwant = 0.0;
        assert_int_equal(CK()->nll_f32(CS(), ROWS, COLS, logp, labels, ci, N_IDX, &cwant, NULL),
                         SAGA_OK);
        float cwantf = (float)cwant;
        assert_memory_equal(&cl, &cwantf, sizeof cl);
        expect_bits(gd2, cd, ROWS * COLS, "nll_dev_f32 dlogp against the cpu");
    }
    /* an empty list */
    assert_int_equal(GK()->nll_dev_f32(GS(), ROWS, COLS, glogp, glabels, gidx, 0, gloss, gd2),
                     SAGA_OK);
    float got = -1.0f;
    gget(&got, gloss, sizeof got);
    assert_true(got == 0.0f);
    float *zeros = hf32(ROWS * COLS);
    memset(zeros, 0, gbytes);
    expect_bits(gd2, zeros, ROWS * COLS, "nll_dev_f32 dlogp (no rows)");

    /* a bad row, then a bad label: nothing written, reported once at the next synchronization */
    int32_t *bad = hi32(N_IDX);
    memcpy(bad, idx, sizeof(int32_t) * N_IDX);
    bad[600] = ROWS;
    bad[700] = -4;
    int32_t *gbad = gput(bad, sizeof(int32_t) * N_IDX);
    float *sentinel = rand_f32(ROWS * COLS, 1.0f, 2.0f), *gs = gput(sentinel, gbytes);
    float mark = 42.0f;
    gloss = gput(&mark, sizeof mark);
    assert_int_equal(GK()->nll_dev_f32(GS(), ROWS, COLS, glogp, glabels, gbad, N_IDX, gloss, gs),
                     SAGA_OK);
    assert_int_equal(saga_stream_synchronize(GS()), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("nll_f32", "row index 2000 at position 600",
                                    "found on the device", NULL);
    assert_int_equal(saga_stream_synchronize(GS()), SAGA_OK); /* once */
    gget(&got, gloss, sizeof got);
    assert_true(got == 42.0f);
    expect_bits(gs, sentinel, ROWS * COLS, "nll_dev_f32 dlogp after a bad row");
    int32_t *badl = hi32(ROWS);
    memcpy(badl, labels, sizeof(int32_t) * ROWS);
    badl[idx[300]] = COLS;
    int32_t *gbadl = gput(badl, sizeof(int32_t) * ROWS);
    assert_int_equal(GK()->nll_dev_f32(GS(), ROWS, COLS, glogp, gbadl, NULL, 0, gloss, gs),
                     SAGA_OK);
    assert_int_equal(saga_backend_synchronize(gpu), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("nll_f32", "has label 5, outside [0, 5)", NULL);
    gget(&got, gloss, sizeof got);
    assert_true(got == 42.0f);
    expect_bits(gs, sentinel, ROWS * COLS, "nll_dev_f32 dlogp after a bad label");
    /* the cpu: at the call */
    float cl = 42.0f;
    assert_int_equal(CK()->nll_dev_f32(CS(), ROWS, COLS, logp, labels, bad, N_IDX, &cl, NULL),
                     SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("nll_f32", "row index 2000 at position 600", NULL);
    assert_true(cl == 42.0f);
}

/* BCE with logits (pos_weight 1 and not, with and without the gradient), sum and sumsq. */
static void test_cuda_backend_f32_losses_and_sums(void **state) {
    (void)state;
    static const int64_t sizes[] = {0, 1, 1025, 300001};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        const int64_t n = sizes[si];
        const size_t bytes = (size_t)n * sizeof(float);
        float *x = rand_f32(n, -20.0f, 20.0f), *t = rand_f32(n, 0.0f, 1.0f);
        for (int64_t i = 0; i < n; i += 3)
            t[i] = (float)(i % 2); /* hard labels too */
        float *gx = gput(x, bytes), *gt = gput(t, bytes);
        for (int pw = 0; pw < 2; pw++) {
            const float pos_weight = pw ? 2.5f : 1.0f;
            float *dx = nan_f32(n), *gdx = gput(dx, bytes);
            double gl = -1.0, cl = -2.0, gl2 = -3.0;
            assert_int_equal(GK()->bce_logits_f32(GS(), n, gx, gt, pos_weight, &gl, gdx), SAGA_OK);
            assert_int_equal(CK()->bce_logits_f32(CS(), n, x, t, pos_weight, &cl, dx), SAGA_OK);
            /* the same f32 formula per element (bce_logits.cu, nn_dense.c) followed in xf: the
             * term (1 - t) x + (1 + (pw - 1) t) sp, sp = log1pf(expf(-|x|)) + max(-x, 0), summed
             * in double, then / n; dx = (sigmoid(x) ((1 - t) + pw t) - pw t) / n. Each side within
             * that of the exact value. */
            double *derr = hf64(n), lerr = 0, lmag = 0;
            const xf one = xf_in(1), PW = xf_in(pos_weight), inv_n = xf_round(1.0 / (double)n, 0);
            for (int64_t i = 0; i < n; i++) {
                const xf X = xf_in(x[i]), T = xf_in(t[i]);
                const xf sp =
                    xf_add(xf_log1p(xf_exp(xf_in(-fabsf(x[i])))), xf_in(x[i] < 0 ? -x[i] : 0));
                const xf lw = xf_add(one, xf_mul(xf_sub(PW, one), T));
                const xf term = xf_add(xf_mul(xf_sub(one, T), X), xf_mul(lw, sp));
                lerr += term.e;
                lmag += fabs(term.v);
                const xf pt = xf_mul(PW, T);
                const xf d = xf_sub(xf_mul(xf_sigmoid(x[i]), xf_add(xf_sub(one, T), pt)), pt);
                derr[i] = 2 * xf_mul(d, inv_n).e;
            }
            lerr = n ? 2 * (lerr + gam64(n + 1) * lmag) / (double)n : 0;
            assert_close(gl, cl, lerr, "bce_logits_f32 loss", n);
            expect_within(gdx, dx, derr, n, "bce_logits_f32 dx");
            assert_int_equal(GK()->bce_logits_f32(GS(), n, gx, gt, pos_weight, &gl2, NULL),
                             SAGA_OK);
            assert_memory_equal(&gl, &gl2, sizeof gl);
            if (n == 0)
                assert_true(gl == 0.0);
        }
        double gs = -1.0, cs = -2.0, gq = -1.0, cq = -2.0, gs2 = -3.0;
        assert_int_equal(GK()->sum_f32(GS(), n, gx, &gs), SAGA_OK);
        assert_int_equal(GK()->sum_f32(GS(), n, gx, &gs2), SAGA_OK);
        assert_int_equal(CK()->sum_f32(CS(), n, x, &cs), SAGA_OK);
        assert_int_equal(GK()->sumsq_f32(GS(), n, gx, &gq), SAGA_OK);
        assert_int_equal(CK()->sumsq_f32(CS(), n, x, &cq), SAGA_OK);
        /* double sums of n f32 values (or their exact squares) in another order: within
         * 2 gamma_n of f64 of the sum of the magnitudes (about 10 n here), not of the sum */
        double m = 0;
        for (int64_t i = 0; i < n; i++)
            m += fabs(x[i]);
        assert_close(gs, cs, 2 * gam64(n) * m, "sum_f32", n);
        assert_close(gq, cq, 2 * gam64(n) * cq, "sumsq_f32", n);
        assert_memory_equal(&gs, &gs2, sizeof gs); /* deterministic */
        if (n == 0)
            assert_true(gs == 0.0 && gq == 0.0);
        /* sumsq_pinned_f32: the same bits, in pinned memory once the stream has run; the CPU's
         * at once */
        double *pinned = NULL, cq2 = -4.0;
        assert_int_equal(saga_backend_host_alloc(gpu, (void **)&pinned, 2 * sizeof *pinned),
                         SAGA_OK);
        pinned[0] = pinned[1] = -5.0;
        assert_int_equal(GK()->sumsq_pinned_f32(GS(), n, gx, pinned + 1), SAGA_OK);
        assert_int_equal(saga_stream_synchronize(GS()), SAGA_OK);
        assert_memory_equal(&pinned[1], &gq, sizeof gq);
        assert_true(pinned[0] == -5.0); /* nothing else written */
        assert_int_equal(CK()->sumsq_pinned_f32(CS(), n, x, &cq2), SAGA_OK);
        assert_memory_equal(&cq2, &cq, sizeof cq);
        saga_backend_host_free(gpu, pinned, 2 * sizeof *pinned);
    }
}

/* gather (bits) and scatter-add (atomics: f32 rounding order) with repeated indices; a bad index
 * is an error with nothing written. */
static void test_cuda_backend_f32_gather_scatter(void **state) {
    (void)state;
    static const int64_t cols_list[] = {0, 1, 3, 64, 100};
    enum { N_ROWS = 700, N_IDX = 5000 };
    int32_t *idx = hi32(N_IDX);
    for (int k = 0; k < N_IDX; k++)
        idx[k] = (int32_t)irand(N_ROWS);
    int32_t *gidx = gput(idx, sizeof(int32_t) * N_IDX);
    for (size_t ci = 0; ci < sizeof cols_list / sizeof *cols_list; ci++) {
        const int64_t cols = cols_list[ci];
        const size_t xbytes = (size_t)(N_ROWS * cols) * sizeof(float);
        const size_t ybytes = (size_t)(N_IDX * cols) * sizeof(float);
        float *x = rand_f32(N_ROWS * cols, -1.0f, 1.0f), *gx = gput(x, xbytes);
        float *y = nan_f32(N_IDX * cols), *gy = gput(y, ybytes);
        assert_int_equal(GK()->gather_rows_f32(GS(), N_IDX, cols, gidx, N_ROWS, gx, gy), SAGA_OK);
        assert_int_equal(CK()->gather_rows_f32(CS(), N_IDX, cols, idx, N_ROWS, x, y), SAGA_OK);
        expect_bits(gy, y, N_IDX * cols, "gather_rows_f32");

        float *src = rand_f32(N_IDX * cols, -1.0f, 1.0f), *gsrc = gput(src, ybytes);
        float *acc = rand_f32(N_ROWS * cols, -1.0f, 1.0f), *gacc = gput(acc, xbytes);
        /* the GPU adds a row's contributions in the order its atomics land: a sum of the row's
         * listings and its old value, count additions, in another order than the CPU's */
        double *err = hf64(N_ROWS * cols);
        int64_t *count = hi64(N_ROWS);
        memset(count, 0, sizeof(int64_t) * N_ROWS);
        for (int k = 0; k < N_IDX; k++)
            count[idx[k]]++;
        for (int64_t e = 0; e < N_ROWS * cols; e++)
            err[e] = fabs(acc[e]);
        for (int k = 0; k < N_IDX; k++)
            for (int64_t j = 0; j < cols; j++)
                err[idx[k] * cols + j] += fabs(src[k * cols + j]);
        for (int64_t e = 0; e < N_ROWS * cols; e++)
            err[e] *= 2 * gam(count[e / cols]);
        assert_int_equal(GK()->scatter_add_rows_f32(GS(), N_IDX, cols, gidx, gsrc, N_ROWS, gacc),
                         SAGA_OK);
        assert_int_equal(CK()->scatter_add_rows_f32(CS(), N_IDX, cols, idx, src, N_ROWS, acc),
                         SAGA_OK);
        expect_within(gacc, acc, err, N_ROWS * cols, "scatter_add_rows_f32");
    }
    /* nothing to do */
    assert_int_equal(GK()->gather_rows_f32(GS(), 0, 4, NULL, 0, NULL, NULL), SAGA_OK);
    assert_int_equal(GK()->scatter_add_rows_f32(GS(), 0, 4, NULL, NULL, 0, NULL), SAGA_OK);
    /* bad indices: found on the device without a host wait, nothing written, and the CPU's
     * error at the stream's next synchronization (then cleared) */
    int32_t *bad = hi32(N_IDX);
    memcpy(bad, idx, sizeof(int32_t) * N_IDX);
    bad[4321] = N_ROWS;
    bad[4400] = -1;
    int32_t *gbad = gput(bad, sizeof(int32_t) * N_IDX);
    float *x = rand_f32(N_ROWS * 3, -1.0f, 1.0f), *gx = gput(x, sizeof(float) * N_ROWS * 3);
    float *y = rand_f32(N_IDX * 3, -1.0f, 1.0f), *gy = gput(y, sizeof(float) * N_IDX * 3);
    assert_int_equal(GK()->gather_rows_f32(GS(), N_IDX, 3, gbad, N_ROWS, gx, gy), SAGA_OK);
    assert_int_equal(saga_stream_synchronize(GS()), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains(
        "gather_rows_f32: index 700 at position 4321 is outside [0, 700)", "found on the device",
        NULL);
    assert_int_equal(saga_stream_synchronize(GS()), SAGA_OK); /* reported once */
    expect_bits(gy, y, N_IDX * 3, "gather_rows_f32 after a bad index");
    assert_int_equal(GK()->scatter_add_rows_f32(GS(), N_IDX, 3, gbad, gy, N_ROWS, gx), SAGA_OK);
    assert_int_equal(saga_backend_synchronize(gpu), SAGA_ERR_INVALID_ARG); /* the device's too */
    saga_test_assert_error_contains("scatter_add_rows_f32: index 700 at position 4321", NULL);
    expect_bits(gx, x, N_ROWS * 3, "scatter_add_rows_f32 after a bad index");
    /* cols == 0 still checks the indices, as on the CPU; a slot that waits for a host result
     * reports it too */
    assert_int_equal(GK()->gather_rows_f32(GS(), N_IDX, 0, gbad, N_ROWS, gx, gy), SAGA_OK);
    double sum = 0.0;
    assert_int_equal(GK()->sum_f32(GS(), N_ROWS * 3, gx, &sum), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("gather_rows_f32: index 700 at position 4321", NULL);
    /* the first of two bad calls is the one reported */
    assert_int_equal(GK()->scatter_add_rows_f32(GS(), N_IDX, 3, gbad, gy, N_ROWS, gx), SAGA_OK);
    assert_int_equal(GK()->gather_rows_f32(GS(), N_IDX, 3, gbad, N_ROWS, gx, gy), SAGA_OK);
    assert_int_equal(saga_stream_synchronize(GS()), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("scatter_add_rows_f32: index 700 at position 4321", NULL);
    /* good indices after them: no error, whichever of the checks' two flag words a call takes
     * (each clears the other for the next), before and after a bad call */
    for (int rep = 0; rep < 3; rep++) {
        assert_int_equal(GK()->gather_rows_f32(GS(), N_IDX, 3, gidx, N_ROWS, gx, gy), SAGA_OK);
        assert_int_equal(saga_stream_synchronize(GS()), SAGA_OK);
    }
    assert_int_equal(GK()->gather_rows_f32(GS(), N_IDX, 3, gbad, N_ROWS, gx, gy), SAGA_OK);
    for (int rep = 0; rep < 3; rep++)
        assert_int_equal(GK()->gather_rows_f32(GS(), N_IDX, 3, gidx, N_ROWS, gx, gy), SAGA_OK);
    assert_int_equal(saga_stream_synchronize(GS()), SAGA_ERR_INVALID_ARG); /* the bad one */
    for (int rep = 0; rep < 3; rep++) {
        assert_int_equal(GK()->scatter_add_rows_f32(GS(), N_IDX, 3, gidx, gy, N_ROWS, gx), SAGA_OK);
        assert_int_equal(saga_stream_synchronize(GS()), SAGA_OK);
    }
}

/* pagerank_pull_f64 against the CPU's, on both ways of taking the short rows (tiles of 32 rows on
 * gpu, groups of lanes on gpu_groups, opened with SAGA_CUDA_PULL=groups): rows of every kind the
 * kernels tell apart (empty, short, just below and above the long-row thresholds of both ways,
 * long rows of many segments, one every `every` rows), sinks, tiles whose runs span many chunks,
 * and mean degrees that give groups of 1, 8 and 32 lanes (the group covers the mean degree,
 * want_group). The ranks, contributions and sums agree to rounding, and two runs give the same
 * bits; with 32 lanes a row the two ways add in other orders, and some ranks differ in their bits
 * (each backend runs the way it was opened with). ways: 1, the tiles alone; 2, both. */
static saga_backend *gpu_groups;
static void pagerank_pull_case(int64_t n, int mean, int64_t every, int64_t want_group, int ways) {
    int64_t *off = hi64(n + 1);
    off[0] = 0;
    static const int64_t edges[] = {255,  256,  257,  511,  512,  513,
                                    1024, 1025, 2048, 2049, 4097, 40000};
    for (int64_t i = 0; i < n; i++) {
        int64_t len = i % 17 == 0 ? 0 : irand(2 * mean);
        if (i % every == 3)
            len = edges[(i / every) % (int64_t)(sizeof edges / sizeof edges[0])];
        off[i + 1] = off[i] + len;
    }
    const int64_t nnz = off[n];
    int64_t group = 1; /* the kernel's: a power of two covering the mean degree, at most 32 */
    while (group < (nnz + n - 1) / n && group < 32)
        group *= 2;
    assert_int_equal(group, want_group);
    int32_t *idx = hi32(nnz > 0 ? nnz : 1);
    for (int64_t k = 0; k < nnz; k++)
        idx[k] = (int32_t)irand(n);
    double *h = halloc(3 * (size_t)n * sizeof *h), *c = h, *x = h + n, *inv = h + 2 * n;
    for (int64_t i = 0; i < n; i++) {
        c[i] = fabs(rnd()) / (double)n;
        x[i] = fabs(rnd()) / (double)n;
        inv[i] = i % 5 == 0 ? 0.0 : 1.0 / (double)(1 + i % 9);
    }
    const double d = 0.85, base = 0.15 / (double)n;
    double *cy = halloc(2 * (size_t)n * sizeof *cy), *ccn = cy + n, cout[2];
    saga_csr_dev cA = {n, n, nnz, off, idx, NULL};
    assert_int_equal(CK()->pagerank_pull_f64(CS(), &cA, d, base, c, x, inv, cy, ccn, cout),
                     SAGA_OK);
    int64_t *goff = gput(off, (size_t)(n + 1) * sizeof *off);
    int32_t *gidx = gput(idx, (size_t)(nnz > 0 ? nnz : 1) * sizeof *idx);
    double *gc = gput(c, (size_t)n * sizeof *c), *gx = gput(x, (size_t)n * sizeof *x),
           *ginv = gput(inv, (size_t)n * sizeof *inv);
    double *gy = gput(cy, (size_t)n * sizeof *cy), *gcn = gput(cy, (size_t)n * sizeof *cy);
    double *got = halloc(4 * (size_t)n * sizeof *got), out[2][2];
    saga_csr_dev gA = {n, n, nnz, goff, gidx, NULL};
    saga_backend *backends[] = {gpu, gpu_groups};
    double *tiles_y = halloc((size_t)n * sizeof *tiles_y);
    for (int way = 0; way < ways; way++) {
        const saga_kernels *k = backends[way]->kernels;
        saga_stream *s = saga_backend_default_stream(backends[way]);
        for (int run = 0; run < 2; run++) {
            assert_int_equal(k->pagerank_pull_f64(s, &gA, d, base, gc, gx, ginv, gy, gcn, out[run]),
                             SAGA_OK);
            gget(got + 2 * run * n, gy, (size_t)n * sizeof *got);
            gget(got + (2 * run + 1) * n, gcn, (size_t)n * sizeof *got);
        }
        /* Every term is non-negative, so the magnitude of y's terms is y: base + d times a row's
         * sum of deg contributions is within gamma_{deg+2} of y on each side; c_next one product
         * more. The L1 change and the sinks sum n such values (each off by its y's bound) in two
         * orders. */
        double l1_err = 2 * gam64(n + 1) * cout[0], sinks_err = 2 * gam64(n) * cout[1];
        for (int64_t i = 0; i < n; i++) {
            const double yb = 2 * gam64(off[i + 1] - off[i] + 2) * cy[i];
            assert_close(got[i], cy[i], yb, "pagerank_pull y", i);
            assert_close(got[n + i], ccn[i], 2 * gam64(off[i + 1] - off[i] + 3) * ccn[i],
                         "pagerank_pull c_next", i);
            l1_err += yb;
            sinks_err += inv[i] == 0.0 ? yb : 0.0;
        }
        assert_close(out[0][0], cout[0], l1_err, "pagerank_pull l1", 0);
        assert_close(out[0][1], cout[1], sinks_err, "pagerank_pull sinks", 0);
        assert_memory_equal(got, got + 2 * n, 2 * (size_t)n * sizeof *got);
        assert_memory_equal(out[0], out[1], sizeof out[0]);
        if (way == 0)
            memcpy(tiles_y, got, (size_t)n * sizeof *got);
        else if (want_group == 32)
            assert_true(memcmp(tiles_y, got, (size_t)n * sizeof *got) != 0);
        /* pagerank_pull_acc_f64: half the base on the host, half read on the device (their sum
         * is the base exactly); the same rows, and its sums added to what acc held, with no
         * wait */
        const double half = base * 0.5, hin[2] = {-1.0, half}, hacc[2] = {1.0, 2.0};
        double *gin = gput(hin, sizeof hin), *gacc = gput(hacc, sizeof hacc), acc[2];
        assert_int_equal(
            k->pagerank_pull_acc_f64(s, &gA, d, half, 1.0, gin, gc, gx, ginv, gy, gcn, gacc),
            SAGA_OK);
        assert_int_equal(saga_stream_synchronize(s), SAGA_OK);
        gget(got + 2 * n, gy, (size_t)n * sizeof *got);
        gget(got + 3 * n, gcn, (size_t)n * sizeof *got);
        gget(acc, gacc, sizeof acc);
        assert_memory_equal(got, got + 2 * n, 2 * (size_t)n * sizeof *got);
        assert_true(acc[0] == 1.0 + out[0][0] && acc[1] == 2.0 + out[0][1]);
    }
}

static void test_cuda_backend_pagerank_pull_matches_cpu(void **state) {
    (void)state;
    assert_int_equal(setenv("SAGA_CUDA_PULL", "groups", 1), 0);
    const saga_status st = saga_backend_cuda_new(&gpu_groups, 0, NULL);
    unsetenv("SAGA_CUDA_PULL");
    assert_int_equal(st, SAGA_OK);
    pagerank_pull_case(120007, 1, 10007, 1, 1); /* the tiles alone (the groups: one lane a row) */
    pagerank_pull_case(30000, 6, 2503, 8, 2);
    pagerank_pull_case(12000, 32, 997, 32, 2);
    /* no rows: nothing to do, zero sums */
    double out[2] = {1, 1};
    saga_csr_dev A = {0, 0, 0, NULL, NULL, NULL};
    assert_int_equal(
        GK()->pagerank_pull_f64(GS(), &A, 0.85, 0.0, NULL, NULL, NULL, NULL, NULL, out), SAGA_OK);
    assert_true(out[0] == 0.0 && out[1] == 0.0);
    saga_backend_free_all(&gpu_groups);
}

/* A random CSR over n_rows rows, starting at entry base (offsets[0] = base), with empty rows and
 * a few rows longer than a warp; indices in [0, n_cols). Host arrays. */
static void random_csr(int64_t n_rows, int64_t n_cols, int64_t base, int64_t **off_out,
                       int32_t **ind_out, float **val_out) {
    int64_t *off = hi64(n_rows + 1);
    off[0] = base;
    for (int64_t i = 0; i < n_rows; i++) {
        const int64_t len = i % 11 == 0 ? 0 : i % 97 == 5 ? 300 + irand(400) : irand(24);
        off[i + 1] = off[i] + len;
    }
    const int64_t end = off[n_rows];
    int32_t *ind = hi32(end);
    float *val = hf32(end);
    for (int64_t k = 0; k < end; k++) {
        ind[k] = (int32_t)irand(n_cols);
        val[k] = frand(-1.0f, 1.0f);
    }
    *off_out = off;
    *ind_out = ind;
    *val_out = val;
}

/* ---- SpMM -------------------------------------------------------------------------------------
 *
 * saga's own SpMM kernel and spmm_t_f32 fix the order of every sum from the shape and the offsets
 * alone, with the multiply-adds written out (fmaf), so that their bits are the same in every thread
 * and block order and on every GPU. The functions below redo that order on the host (the constants
 * are spmm.cu's and spmm_t.cu's): the GPU's result must have their bits, which a sum whose order
 * followed the threads would miss in some order the simulator runs (forward, reverse, random). The
 * CPU twin adds in another order, so the GPU is held to it within the bound of the arithmetic. */

/* lanes per row of a row-major matrix of cols columns: 1 << this (saga_cuda_group_shift) */
static int lanes_shift(int64_t cols) {
    int shift = 0;
    while (shift < 5 && ((int64_t)1 << shift) < cols)
        shift++;
    return shift;
}

enum { OWN_SPMM_BLOCK = 256, OWN_SPMM_SPLIT = 128 };

/* saga's own SpMM kernel's order: a row of at most OWN_SPMM_SPLIT entries sums them in increasing
 * order; a longer one is cut into OWN_SPMM_BLOCK >> lanes_shift(F) pieces at len p / pieces, each
 * summed in increasing order and the pieces added in order; a term is one fmaf (values) or an
 * addition (ones), and Y = alpha sum (beta 0) or fmaf(alpha, sum, beta Y). A host CSR. */
static void spmm_own_order(const saga_csr_dev *A, int64_t F, float alpha, const float *X,
                           float beta, float *Y) {
    const int64_t n_pieces = OWN_SPMM_BLOCK >> lanes_shift(F);
    for (int64_t i = 0; i < A->n_rows; i++) {
        const int64_t k0 = A->offsets[i], len = A->offsets[i + 1] - k0;
        const int64_t n = len > OWN_SPMM_SPLIT ? n_pieces : 1;
        for (int64_t j = 0; j < F; j++) {
            float sum = 0.0f;
            for (int64_t p = 0; p < n; p++) {
                float s = 0.0f;
                for (int64_t k = k0 + len * p / n; k < k0 + len * (p + 1) / n; k++) {
                    const float x = X[(int64_t)A->indices[k] * F + j];
                    s = A->values ? fmaf(A->values[k], x, s) : s + x;
                }
                sum = p == 0 ? s : sum + s;
            }
            float *y = Y + i * F + j;
            *y = beta == 0.0f ? alpha * sum : fmaf(alpha, sum, beta * *y);
        }
    }
}

enum { SPMM_T_CHUNK_MIN = 256, SPMM_T_MAX_CHUNKS = 4096 };
#define SPMM_T_WORK_FLOATS ((int64_t)8 << 20)

/* spmm_t.cu's chunks of A's entries: their count and length. */
static void spmm_t_chunks(int64_t nnz, int64_t n_cols, int64_t F, int64_t *n_chunks, int64_t *len) {
    int64_t c = nnz / SPMM_T_CHUNK_MIN;
    c = c < nnz / n_cols ? c : nnz / n_cols;
    c = c < SPMM_T_MAX_CHUNKS ? c : SPMM_T_MAX_CHUNKS;
    c = c < SPMM_T_WORK_FLOATS / n_cols / F ? c : SPMM_T_WORK_FLOATS / n_cols / F;
    c = c < 1 ? 1 : c;
    *len = (nnz + c - 1) / c;
    *n_chunks = (nnz + *len - 1) / *len;
}

/* spmm_t_f32's order on CUDA: each chunk's partial P_c sums its entries' terms in increasing
 * order, fmaf(alpha a_k, X[i][j], p) from 0, and Y = ((fmaf(beta, Y, P_0) + P_1) + ...), P_0 for
 * beta 0; beta Y (0 for beta 0) without entries. A host CSR whose offsets start at 0. */
static void spmm_t_order(const saga_csr_dev *A, int64_t F, float alpha, const float *X, float beta,
                         float *Y) {
    const int64_t n_y = A->n_cols * F;
    if (A->n_rows <= 0 || A->nnz <= 0) {
        for (int64_t e = 0; e < n_y; e++)
            Y[e] = beta == 0.0f ? 0.0f : beta * Y[e];
        return;
    }
    int64_t n_chunks, len, i = 0;
    spmm_t_chunks(A->nnz, A->n_cols, F, &n_chunks, &len);
    float *P = hf32(n_y);
    for (int64_t c = 0; c < n_chunks; c++) {
        for (int64_t e = 0; e < n_y; e++)
            P[e] = 0.0f;
        const int64_t k1 = A->nnz - c * len < len ? A->nnz : (c + 1) * len;
        for (int64_t k = c * len; k < k1; k++) {
            while (A->offsets[i + 1] <= k)
                i++;
            const float a = A->values ? alpha * A->values[k] : alpha;
            float *p = P + (int64_t)A->indices[k] * F;
            for (int64_t j = 0; j < F; j++)
                p[j] = fmaf(a, X[i * F + j], p[j]);
        }
        for (int64_t e = 0; e < n_y; e++)
            Y[e] = c > 0 ? Y[e] + P[e] : beta == 0.0f ? P[e] : fmaf(beta, Y[e], P[e]);
    }
}

/* A CSR with power-law rows and columns: every 13th row empty, most rows short, every 50th of
 * 200 to 400 entries, row hub of hub_len; a quarter of the entries in the first 8 columns (rows of
 * A^T X with hundreds of terms). Host arrays. */
static void skewed_csr(int64_t n_rows, int64_t n_cols, int64_t hub, int64_t hub_len,
                       int64_t **off_out, int32_t **ind_out, float **val_out) {
    /* the same matrix whichever tests ran before (the chunk counts asserted depend on nnz) */
    const uint64_t saved = rng_state;
    rng_state = 0x9e3779b97f4a7c15ull ^ (uint64_t)(n_rows * 1000003 + n_cols * 7919 + hub_len);
    int64_t *off = hi64(n_rows + 1);
    off[0] = 0;
    for (int64_t i = 0; i < n_rows; i++) {
        const int64_t len = i == hub      ? hub_len
                            : i % 13 == 0 ? 0
                            : i % 50 == 3 ? 200 + irand(201)
                                          : 1 + irand(12);
        off[i + 1] = off[i] + len;
    }
    const int64_t nnz = off[n_rows];
    int32_t *ind = hi32(nnz);
    float *val = hf32(nnz);
    for (int64_t k = 0; k < nnz; k++) {
        ind[k] = (int32_t)(irand(4) == 0 ? irand(8) : irand(n_cols));
        val[k] = frand(-1.0f, 1.0f);
    }
    rng_state = saved;
    rng_state = saved;
    *off_out = off;
    *ind_out = ind;
    *val_out = val;
}

/* A device copy of n floats, offset floats past a 256-byte aligned start. */
static float *gput_at(const float *x, int64_t n, int offset) {
    float *h = hf32(n + offset);
    for (int i = 0; i < offset; i++)
        h[i] = 0.0f;
    memcpy(h + offset, x, (size_t)n * sizeof *h);
    return (float *)gput(h, (size_t)(n + offset) * sizeof *h) + offset;
}

/* got against want in bits (NaN where want has NaN), for a result named by what. */
static void expect_same_bits(const float *got, const float *want, int64_t n, const char *what) {
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof *got) != 0 && !(isnan(got[i]) && isnan(want[i])))
            fail_msg("%s[%lld]: cuda %a, fixed order %a (bits differ)", what, (long long)i,
                     (double)got[i], (double)want[i]);
}

/* spmm_f32 of host A (gA its device copy) with X (gX its device copy) on each backend of bes,
 * Y offset floats into its allocation, runs times: within the bound of the CPU's result (a term
 * passes through at most deg + 3 roundings: its product, alpha's on it or on the sum, deg - 1
 * additions, beta Y's product and addition, in any order and fused or not, so each side is within
 * gamma_{deg+3} of the sum of the terms' magnitudes) and, where the own kernel runs (gpu_own, or a
 * product without values or with alpha 0), with the bits of its order, the same in every run. */
static saga_backend *gpu_own;

static void check_spmm(saga_backend *const *bes, int n_bes, int runs, const saga_csr_dev *cA,
                       const saga_csr_dev *gA, int64_t F, float alpha, const float *X,
                       const float *gX, float beta, int offset) {
    const int64_t n_y = cA->n_rows * F;
    float *Y0 = beta == 0.0f ? nan_f32(n_y) : rand_f32(n_y, -1.0f, 1.0f);
    float *Y = hcopy(Y0, n_y), *want = hcopy(Y0, n_y), *got = hf32(2 * n_y);
    double *mag = hf64(n_y);
    for (int64_t i = 0; i < cA->n_rows; i++)
        for (int64_t j = 0; j < F; j++) {
            double m = 0.0;
            for (int64_t k = cA->offsets[i]; k < cA->offsets[i + 1]; k++)
                m += fabs((cA->values ? cA->values[k] : 1.0) * X[cA->indices[k] * F + j]);
            mag[i * F + j] = fabs(alpha) * m + (beta != 0.0f ? fabs(beta * Y[i * F + j]) : 0.0);
        }
    assert_int_equal(CK()->spmm_f32(CS(), cA, F, alpha, X, beta, Y), SAGA_OK);
    spmm_own_order(cA, F, alpha, X, beta, want);
    for (int b = 0; b < n_bes; b++) {
        saga_backend *be = bes[b];
        char what[160];
        snprintf(what, sizeof what, "spmm_f32 (%s, F %lld, %s, alpha %g, beta %g, Y at +%d)",
                 be == gpu_own ? "own kernel" : "default", (long long)F,
                 cA->values ? "values" : "ones", alpha, beta, offset);
        for (int run = 0; run < runs; run++) {
            float *gY = gput_at(Y0, n_y, offset);
            assert_int_equal(
                be->kernels->spmm_f32(saga_backend_default_stream(be), gA, F, alpha, gX, beta, gY),
                SAGA_OK);
            assert_int_equal(saga_backend_synchronize(be), SAGA_OK);
            gget(got + (run > 0) * n_y, gY, sizeof(float) * n_y);
            if (run > 0 && memcmp(got, got + n_y, sizeof(float) * n_y) != 0)
                fail_msg("%s: two runs differ", what);
        }
        for (int64_t i = 0; i < cA->n_rows; i++)
            for (int64_t j = 0; j < F; j++) {
                const int64_t e = i * F + j;
                const double tol = 2 * gam(cA->offsets[i + 1] - cA->offsets[i] + 3) * mag[e];
                if (!close_within(got[e], Y[e], tol))
                    fail_msg("%s[%lld][%lld]: cuda %.9g, cpu %.9g (tolerance %.3g)", what,
                             (long long)i, (long long)j, (double)got[e], (double)Y[e], tol);
            }
        if (be == gpu_own || !cA->values || alpha == 0.0f)
            expect_same_bits(got, want, n_y, what);
    }
}

/* spmm_f32 on both of the backend's paths against the CPU: cuSPARSE where it applies (the
 * default backend: matrices with values, alpha != 0), the own kernel everywhere on gpu_own (opened
 * with SAGA_CUDA_SPMM=own) and in the fixed order's bits. Column counts with and without four-float
 * vectors, rows past the split (random_csr's of 300 to 700 entries). */

static void test_cuda_backend_f32_spmm(void **state) {
    (void)state;
    enum { ROWS = 4000, COLS = 5000 };
    int64_t *off;
    int32_t *ind;
    float *val;
    random_csr(ROWS, COLS, 0, &off, &ind, &val);
    const int64_t nnz = off[ROWS];
    int64_t *goff = gput(off, sizeof(int64_t) * (ROWS + 1));
    int32_t *gind = gput(ind, sizeof(int32_t) * nnz);
    float *gval = gput(val, sizeof(float) * nnz);
    static const int64_t Fs[] = {1, 3, 16, 32, 33, 128, 130, 300};
    static const float ab[][2] = {{1.0f, 0.0f}, {0.5f, 1.0f}, {-2.0f, 0.25f}, {0.0f, 0.5f}};
    saga_backend *paths[] = {gpu, gpu_own};
    for (size_t fi = 0; fi < sizeof Fs / sizeof *Fs; fi++) {
        const int64_t F = Fs[fi];
        float *X = rand_f32(COLS * F, -1.0f, 1.0f), *gX = gput(X, sizeof(float) * COLS * F);
        for (int withvals = 0; withvals < 2; withvals++)
            for (size_t ai = 0; ai < sizeof ab / sizeof *ab; ai++) {
                const float alpha = ab[ai][0], beta = ab[ai][1];
                const saga_csr_dev gA = {ROWS, COLS, nnz, goff, gind, withvals ? gval : NULL};
                const saga_csr_dev cA = {ROWS, COLS, nnz, off, ind, withvals ? val : NULL};
                check_spmm(paths, 2, 1, &cA, &gA, F, alpha, X, gX, beta, 0);
            }
    }
    saga_csr_dev empty = {0, COLS, 0, goff, gind, NULL};
    assert_int_equal(GK()->spmm_f32(GS(), &empty, 8, 1.0f, NULL, 0.0f, NULL), SAGA_OK);
    /* a matrix with no entries (which cuSPARSE is not asked for): zeros for beta 0 */
    int64_t *zoff = hi64(ROWS + 1);
    memset(zoff, 0, sizeof(int64_t) * (ROWS + 1));
    saga_csr_dev none = {ROWS, COLS, 0, gput(zoff, sizeof(int64_t) * (ROWS + 1)), gind, gval};
    float *X = rand_f32(COLS * 4, -1.0f, 1.0f), *gX = gput(X, sizeof(float) * COLS * 4);
    float *nan4 = nan_f32(ROWS * 4), *got = hf32(ROWS * 4);
    for (int p = 0; p < 2; p++) {
        float *gY = gput(nan4, sizeof(float) * ROWS * 4);
        assert_int_equal(paths[p]->kernels->spmm_f32(saga_backend_default_stream(paths[p]), &none,
                                                     4, 1.0f, gX, 0.0f, gY),
                         SAGA_OK);
        assert_int_equal(saga_backend_synchronize(paths[p]), SAGA_OK);
        gget(got, gY, sizeof(float) * ROWS * 4);
        for (int64_t e = 0; e < ROWS * 4; e++)
            assert_true(got[e] == 0.0f);
    }
}

/* The own SpMM kernel on power-law rows (one of 5000 entries, dozens of 200 to 400, far past the
 * split) and empty ones: with and without four-float vectors (F a multiple of 4 or not; X and Y
 * aligned, or one float past it, which must give the same bits), alpha 0 with a NaN in X (it
 * shows, as on the CPU), beta 0 over NaNs in Y. */
static void test_cuda_backend_f32_spmm_split(void **state) {
    (void)state;
    enum { ROWS = 1500, COLS = 2000 };
    int64_t *off;
    int32_t *ind;
    float *val;
    skewed_csr(ROWS, COLS, 7, 5000, &off, &ind, &val);
    const int64_t nnz = off[ROWS];
    int64_t *goff = gput(off, sizeof(int64_t) * (ROWS + 1));
    int32_t *gind = gput(ind, sizeof(int32_t) * nnz);
    float *gval = gput(val, sizeof(float) * nnz);
    static const int64_t Fs[] = {1, 3, 4, 16, 33, 64};
    static const float ab[][2] = {{1.0f, 0.0f}, {0.5f, 1.0f}, {0.0f, 0.5f}};
    for (size_t fi = 0; fi < sizeof Fs / sizeof *Fs; fi++) {
        const int64_t F = Fs[fi];
        float *X = rand_f32(COLS * F, -1.0f, 1.0f);
        for (int offset = 0; offset < 2; offset++) {
            const float *gX = gput_at(X, COLS * F, offset);
            for (int withvals = 0; withvals < 2; withvals++)
                for (size_t ai = 0; ai < sizeof ab / sizeof *ab; ai++) {
                    const float alpha = ab[ai][0], beta = ab[ai][1];
                    const saga_csr_dev gA = {ROWS, COLS, nnz, goff, gind, withvals ? gval : NULL};
                    const saga_csr_dev cA = {ROWS, COLS, nnz, off, ind, withvals ? val : NULL};
                    check_spmm(&gpu_own, 1, 2, &cA, &gA, F, alpha, X, gX, beta, offset);
                }
        }
        /* alpha 0 multiplies: a NaN in a row of X reaches the rows of Y that name it */
        float *Xn = hcopy(X, COLS * F);
        Xn[3 * F] = NAN;
        const saga_csr_dev gA = {ROWS, COLS, nnz, goff, gind, gval};
        const saga_csr_dev cA = {ROWS, COLS, nnz, off, ind, val};
        check_spmm(&gpu_own, 1, 2, &cA, &gA, F, 0.0f, Xn, gput_at(Xn, COLS * F, 0), 0.5f, 0);
    }
}

/* spmm_t_f32 of host A (gA its device copy) with X, X and Y offset floats into their
 * allocations, twice: within the bound of the CPU's result (beta Y, then alpha a_ik X[i] for each
 * entry of the column, in any order: a term passes through at most count + 2 roundings), and with
 * the bits of the fixed order, the same in both runs. */
static void check_spmm_t(const saga_csr_dev *cA, const saga_csr_dev *gA, int64_t F, float alpha,
                         const float *X, float beta, int offset) {
    const int64_t n_y = cA->n_cols * F;
    char what[160];
    snprintf(what, sizeof what, "spmm_t_f32 (F %lld, %s, alpha %g, beta %g, X and Y at +%d)",
             (long long)F, cA->values ? "values" : "ones", alpha, beta, offset);
    float *Y0 = beta == 0.0f ? nan_f32(n_y) : rand_f32(n_y, -1.0f, 1.0f);
    float *Y = hcopy(Y0, n_y), *want = hcopy(Y0, n_y), *got = hf32(2 * n_y);
    int64_t *count = hi64(cA->n_cols); /* the entries of each column of A: a row of Y's terms */
    double *err = hf64(n_y);
    memset(count, 0, sizeof(int64_t) * (size_t)cA->n_cols);
    for (int64_t e = 0; e < n_y; e++)
        err[e] = beta != 0.0f ? fabs(beta * Y0[e]) : 0.0;
    for (int64_t i = 0; i < cA->n_rows; i++)
        for (int64_t k = cA->offsets[i]; k < cA->offsets[i + 1]; k++) {
            count[cA->indices[k]]++;
            const double a = (double)alpha * (cA->values ? cA->values[k] : 1.0);
            for (int64_t j = 0; j < F; j++)
                err[cA->indices[k] * F + j] += fabs(a * X[i * F + j]);
        }
    for (int64_t e = 0; e < n_y; e++)
        err[e] *= 2 * gam(count[e / F] + 2);
    assert_int_equal(CK()->spmm_t_f32(CS(), cA, F, alpha, X, beta, Y), SAGA_OK);
    spmm_t_order(cA, F, alpha, X, beta, want);
    const float *gX = gput_at(X, cA->n_rows * F, offset);
    for (int run = 0; run < 2; run++) {
        float *gY = gput_at(Y0, n_y, offset);
        assert_int_equal(GK()->spmm_t_f32(GS(), gA, F, alpha, gX, beta, gY), SAGA_OK);
        gget(got + run * n_y, gY, sizeof(float) * n_y);
    }
    if (memcmp(got, got + n_y, sizeof(float) * n_y) != 0)
        fail_msg("%s: two runs differ", what);
    for (int64_t e = 0; e < n_y; e++)
        if (!close_within(got[e], Y[e], err[e]))
            fail_msg("%s[%lld]: cuda %.9g, cpu %.9g (tolerance %.3g)", what, (long long)e,
                     (double)got[e], (double)Y[e], err[e]);
    expect_same_bits(got, want, n_y, what);
}

/* Sparse input features: dropout on a CSR's entries draws the CPU's bits (row ids or a row
 * base), and A^T X matches the CPU within the bound and the fixed order in bits. */
static void test_cuda_backend_f32_sparse_input(void **state) {
    (void)state;
    enum { ROWS = 3000, COLS = 700 };
    int64_t *off;
    int32_t *ind;
    float *val;
    random_csr(ROWS, COLS, 0, &off, &ind, &val);
    const int64_t nnz = off[ROWS];
    int64_t *goff = gput(off, sizeof(int64_t) * (ROWS + 1));
    int32_t *gind = gput(ind, sizeof(int32_t) * nnz);
    float *gval = gput(val, sizeof(float) * nnz);
    int32_t *ids = hi32(ROWS);
    for (int64_t r = 0; r < ROWS; r++)
        ids[r] = (int32_t)((r * 7919 + 13) % 100003);
    int32_t *gids = gput(ids, sizeof(int32_t) * ROWS);
    saga_csr_dev gA = {ROWS, COLS, nnz, goff, gind, gval};
    saga_csr_dev cA = {ROWS, COLS, nnz, off, ind, val};
    for (int pi = 0; pi < 3; pi++) {
        const float p = pi * 0.3f;
        for (int with_ids = 0; with_ids < 2; with_ids++) {
            float *y = nan_f32(nnz), *gy = gput(y, sizeof(float) * nnz);
            assert_int_equal(
                GK()->dropout_csr_f32(GS(), &gA, p, 91, 17, with_ids ? gids : NULL, gy), SAGA_OK);
            assert_int_equal(CK()->dropout_csr_f32(CS(), &cA, p, 91, 17, with_ids ? ids : NULL, y),
                             SAGA_OK);
            expect_bits(gy, y, nnz, "dropout_csr_f32");
        }
    }
    static const int64_t Fs[] = {1, 16, 33};
    static const float ab[][2] = {{1.0f, 0.0f}, {0.5f, 1.0f}};
    for (size_t fi = 0; fi < sizeof Fs / sizeof *Fs; fi++) {
        float *X = rand_f32(ROWS * Fs[fi], -1.0f, 1.0f);
        for (size_t ai = 0; ai < sizeof ab / sizeof *ab; ai++)
            check_spmm_t(&cA, &gA, Fs[fi], ab[ai][0], X, ab[ai][1], 0);
    }
}

/* spmm_t_f32 on power-law rows and columns (a row of 3000 entries across several chunks, columns
 * of hundreds of entries), X and Y aligned or one float past it, ones or values, beta 0 over NaNs,
 * alpha 0 with a NaN in X (it shows, as on the CPU): partials in shared memory (Y of 300 x F),
 * whole or in slices of Y's rows, and in the workspace (Y of 4200 x 128, past 64 slices of shared
 * memory); no rows, no entries. */
static void test_cuda_backend_f32_spmm_t(void **state) {
    (void)state;
    enum { ROWS = 2000, COLS = 300 };
    int64_t *off;
    int32_t *ind;
    float *val;
    skewed_csr(ROWS, COLS, 11, 3000, &off, &ind, &val);
    const int64_t nnz = off[ROWS];
    int64_t n_chunks, len;
    spmm_t_chunks(nnz, COLS, 16, &n_chunks, &len);
    assert_true(n_chunks > 10 && len < 3000 / 4); /* the hub row spans several chunks */
    int64_t *goff = gput(off, sizeof(int64_t) * (ROWS + 1));
    int32_t *gind = gput(ind, sizeof(int32_t) * nnz);
    float *gval = gput(val, sizeof(float) * nnz);
    static const int64_t Fs[] = {1, 4, 16, 33};
    static const float ab[][2] = {{1.0f, 0.0f}, {0.5f, 1.0f}, {-2.0f, 0.25f}};
    for (size_t fi = 0; fi < sizeof Fs / sizeof *Fs; fi++) {
        const int64_t F = Fs[fi];
        float *X = rand_f32(ROWS * F, -1.0f, 1.0f);
        for (int withvals = 0; withvals < 2; withvals++) {
            const saga_csr_dev gA = {ROWS, COLS, nnz, goff, gind, withvals ? gval : NULL};
            const saga_csr_dev cA = {ROWS, COLS, nnz, off, ind, withvals ? val : NULL};
            for (size_t ai = 0; ai < sizeof ab / sizeof *ab; ai++)
                for (int offset = 0; offset < 2; offset++)
                    check_spmm_t(&cA, &gA, F, ab[ai][0], X, ab[ai][1], offset);
            float *Xn = hcopy(X, ROWS * F);
            Xn[5 * F] = NAN;
            check_spmm_t(&cA, &gA, F, 0.0f, Xn, 0.5f, 0);
        }
    }
    /* a Y of 4200 x 128: partials in the workspace, two chunks */
    enum { WROWS = 500, WCOLS = 4200, WF = 128 };
    int64_t *woff;
    int32_t *wind;
    float *wval;
    skewed_csr(WROWS, WCOLS, 11, 3000, &woff, &wind, &wval);
    const int64_t wnnz = woff[WROWS];
    spmm_t_chunks(wnnz, WCOLS, WF, &n_chunks, &len);
    assert_true(n_chunks >= 2);
    const saga_csr_dev gW = {WROWS,
                             WCOLS,
                             wnnz,
                             gput(woff, sizeof(int64_t) * (WROWS + 1)),
                             gput(wind, sizeof(int32_t) * wnnz),
                             gput(wval, sizeof(float) * wnnz)};
    const saga_csr_dev cW = {WROWS, WCOLS, wnnz, woff, wind, wval};
    float *WX = rand_f32(WROWS * WF, -1.0f, 1.0f);
    check_spmm_t(&cW, &gW, WF, -2.0f, WX, 0.25f, 1);
    /* no rows, and rows without entries: beta Y, zeros for beta 0 */
    int64_t *zoff = hi64(ROWS + 1);
    memset(zoff, 0, sizeof(int64_t) * (ROWS + 1));
    int64_t *gzoff = gput(zoff, sizeof(int64_t) * (ROWS + 1));
    float *X = rand_f32(ROWS * 4, -1.0f, 1.0f);
    for (int rows = 0; rows < 2; rows++) {
        const saga_csr_dev gA = {rows ? ROWS : 0, COLS, 0, gzoff, gind, gval};
        const saga_csr_dev cA = {rows ? ROWS : 0, COLS, 0, zoff, ind, val};
        check_spmm_t(&cA, &gA, 4, 1.0f, X, 0.0f, 0);
        check_spmm_t(&cA, &gA, 4, 1.0f, X, 0.5f, 0);
    }
}

/* spmm_t_f32 under a device memory budget: its partials take no more workspace than the budget
 * keeps for a stream's work (work_reserve_bytes), in batches when they need more (16 MiB of
 * budget: a 64 KiB share, three partials of 19200 bytes at a time), by tiles of Y without any
 * (2 MiB of budget: no share; F 16: one tile, F 33: two, each reading every entry), and by tiles
 * where the budget, filled, refuses the share; the fixed order's bits every way. */
static void test_cuda_backend_f32_spmm_t_budget(void **state) {
    (void)state;
    enum { ROWS = 2000, COLS = 300, CHUNK = 4096, MAX_CHUNKS = 8192 };
    const size_t MiB = (size_t)1 << 20;
    int64_t *off;
    int32_t *ind;
    float *val;
    skewed_csr(ROWS, COLS, 11, 3000, &off, &ind, &val);
    const int64_t nnz = off[ROWS];
    const saga_csr_dev cA = {ROWS, COLS, nnz, off, ind, val};
    float *X = rand_f32(ROWS * 33, -1.0f, 1.0f);
    static void *chunks[MAX_CHUNKS];
    static const struct {
        int64_t F;
        size_t room_mib;
        bool fill, batched;
    } cases[] = {
        {16, 16, false, true}, {16, 2, false, false}, {33, 2, false, false}, {16, 16, true, false}};
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
        const int64_t F = cases[ci].F, n_y = COLS * F;
        float *Y0 = rand_f32(n_y, -1.0f, 1.0f), *want = hcopy(Y0, n_y), *got = hf32(n_y);
        spmm_t_order(&cA, F, 0.5f, X, 0.75f, want);
        size_t budget = 0;
        saga_backend *be = open_with_room(cases[ci].room_mib * MiB, &budget);
        saga_stream *s = saga_backend_default_stream(be);
        saga_backend_stats st;
        saga_backend_get_stats(be, &st);
        const size_t scratch_open = st.reserved_bytes;
        int64_t *goff = dev_upload(be, off, sizeof(int64_t) * (ROWS + 1));
        int32_t *gind = dev_upload(be, ind, sizeof(int32_t) * nnz);
        float *gval = dev_upload(be, val, sizeof(float) * nnz);
        float *gX = dev_upload(be, X, sizeof(float) * ROWS * F);
        float *gY = dev_upload(be, Y0, sizeof(float) * n_y);
        const saga_csr_dev gA = {ROWS, COLS, nnz, goff, gind, gval};
        int n = 0;
        while (cases[ci].fill) {
            saga_backend_get_stats(be, &st);
            if (budget - st.in_use_bytes - st.reserved_bytes < 2 * CHUNK)
                break;
            assert_true(n < MAX_CHUNKS);
            assert_int_equal(saga_backend_alloc(be, &chunks[n++], CHUNK), SAGA_OK);
        }
        assert_int_equal(be->kernels->spmm_t_f32(s, &gA, F, 0.5f, gX, 0.75f, gY), SAGA_OK);
        dev_download(be, got, gY, sizeof(float) * n_y);
        saga_backend_get_stats(be, &st);
        const size_t area = st.reserved_bytes - scratch_open;
        int64_t n_chunks, len;
        spmm_t_chunks(nnz, COLS, F, &n_chunks, &len);
        print_message("spmm_t_f32 under a %zu-byte budget: %zu bytes of workspace for %lld "
                      "partials of %lld bytes\n",
                      budget, area, (long long)n_chunks, (long long)n_y * 4);
        assert_true(st.reserved_bytes <= st.work_reserve_bytes);
        if (cases[ci].batched)
            assert_true(area >= (size_t)n_y * 4 * 2 && area < (size_t)(n_chunks * n_y * 4));
        else
            assert_true(area < (size_t)n_y * 4);
        expect_same_bits(got, want, n_y,
                         cases[ci].batched ? "spmm_t_f32 in batches" : "spmm_t_f32 by tiles of Y");
        for (int i = 0; i < n; i++)
            saga_backend_free(be, chunks[i], CHUNK);
        saga_backend_free(be, goff, sizeof(int64_t) * (ROWS + 1));
        saga_backend_free(be, gind, sizeof(int32_t) * nnz);
        saga_backend_free(be, gval, sizeof(float) * nnz);
        saga_backend_free(be, gX, sizeof(float) * ROWS * F);
        saga_backend_free(be, gY, sizeof(float) * n_y);
        saga_backend_free_all(&be);
    }
}

/* SAGA_CUDA_SPMM takes "cusparse" or "own"; anything else stops the backend from opening, with a
 * message that names the variable. */
static void test_cuda_backend_spmm_choice(void **state) {
    (void)state;
    saga_backend *be = NULL;
    assert_int_equal(setenv("SAGA_CUDA_SPMM", "fastest", 1), 0);
    assert_int_equal(saga_backend_cuda_new(&be, 0, NULL), SAGA_ERR_INVALID_ARG);
    assert_null(be);
    assert_non_null(strstr(saga_last_error(), "SAGA_CUDA_SPMM"));
    assert_int_equal(setenv("SAGA_CUDA_SPMM", "cusparse-alg4", 1), 0);
    assert_int_equal(saga_backend_cuda_new(&be, 0, NULL), SAGA_ERR_INVALID_ARG);
    assert_null(be);
    static const char *const good[] = {"cusparse", "own", "cusparse-alg1", "cusparse-alg2",
                                       "cusparse-alg3"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        assert_int_equal(setenv("SAGA_CUDA_SPMM", good[i], 1), 0);
        assert_int_equal(saga_backend_cuda_new(&be, 0, NULL), SAGA_OK);
        saga_backend_free_all(&be);
    }
    assert_int_equal(unsetenv("SAGA_CUDA_SPMM"), 0);
    /* SAGA_CUDA_PULL the same way: "tiles" or "groups" */
    assert_int_equal(setenv("SAGA_CUDA_PULL", "bins", 1), 0);
    assert_int_equal(saga_backend_cuda_new(&be, 0, NULL), SAGA_ERR_INVALID_ARG);
    assert_null(be);
    assert_non_null(strstr(saga_last_error(), "SAGA_CUDA_PULL"));
    assert_int_equal(setenv("SAGA_CUDA_PULL", "tiles", 1), 0);
    assert_int_equal(saga_backend_cuda_new(&be, 0, NULL), SAGA_OK);
    saga_backend_free_all(&be);
    assert_int_equal(unsetenv("SAGA_CUDA_PULL"), 0);
}

/* Which SpMM ran is counted: a product with values and alpha != 0 goes through cuSPARSE on gpu
 * (opened with SAGA_CUDA_SPMM=cusparse: spmm_cusparse + 1, nothing refused: this shape is one
 * CSR_ALG2 takes), while the products the own kernel takes (no values, alpha == 0) and every
 * product on gpu_own (SAGA_CUDA_SPMM=own) and on a backend opened without SAGA_CUDA_SPMM (the
 * own kernel is the default) count in neither counter. Values and X are small integers, so that
 * every order of the sums gives the CPU's bits. */
static void test_cuda_backend_spmm_counts_cusparse(void **state) {
    (void)state;
    enum { ROWS = 300, COLS = 200, F = 32 };
    int64_t *off = hi64(ROWS + 1);
    off[0] = 0;
    for (int64_t i = 0; i < ROWS; i++)
        off[i + 1] = off[i] + (i % 7 == 0 ? 0 : 1 + irand(8));
    const int64_t nnz = off[ROWS];
    int32_t *ind = hi32(nnz);
    float *val = hf32(nnz), *X = hf32(COLS * F);
    for (int64_t k = 0; k < nnz; k++) {
        ind[k] = (int32_t)irand(COLS);
        val[k] = (float)(irand(5) - 2);
    }
    for (int64_t e = 0; e < COLS * F; e++)
        X[e] = (float)(irand(7) - 3);
    int64_t *goff = gput(off, sizeof(int64_t) * (ROWS + 1));
    int32_t *gind = gput(ind, sizeof(int32_t) * nnz);
    float *gval = gput(val, sizeof(float) * nnz), *gX = gput(X, sizeof(float) * COLS * F);
    const saga_csr_dev gA = {ROWS, COLS, nnz, goff, gind, gval};
    const saga_csr_dev gones = {ROWS, COLS, nnz, goff, gind, NULL};
    const saga_csr_dev cA = {ROWS, COLS, nnz, off, ind, val};
    float *Y = nan_f32(ROWS * F);
    assert_int_equal(CK()->spmm_f32(CS(), &cA, F, 1.0f, X, 0.0f, Y), SAGA_OK);

    saga_backend *dflt = NULL;
    assert_int_equal(unsetenv("SAGA_CUDA_SPMM"), 0);
    assert_int_equal(saga_backend_cuda_new(&dflt, 0, NULL), SAGA_OK);
    saga_backend *paths[] = {gpu, gpu_own, dflt};
    for (int p = 0; p < 3; p++) {
        saga_backend *be = paths[p];
        saga_stream *s = saga_backend_default_stream(be);
        saga_backend_stats s0, s1;
        saga_backend_get_stats(be, &s0);
        float *gY = gput(nan_f32(ROWS * F), sizeof(float) * ROWS * F);
        assert_int_equal(be->kernels->spmm_f32(s, &gA, F, 1.0f, gX, 0.0f, gY), SAGA_OK);
        assert_int_equal(saga_backend_synchronize(be), SAGA_OK);
        saga_backend_get_stats(be, &s1);
        assert_int_equal(s1.spmm_cusparse, s0.spmm_cusparse + (p == 0 ? 1 : 0));
        assert_int_equal(s1.spmm_cusparse_refused, s0.spmm_cusparse_refused);
        expect_bits(gY, Y, ROWS * F, p == 0 ? "spmm_f32 (cuSPARSE)" : "spmm_f32 (own kernel)");
        /* the own kernel's products: no values, alpha == 0 */
        assert_int_equal(be->kernels->spmm_f32(s, &gones, F, 1.0f, gX, 0.0f, gY), SAGA_OK);
        assert_int_equal(be->kernels->spmm_f32(s, &gA, F, 0.0f, gX, 0.5f, gY), SAGA_OK);
        assert_int_equal(saga_backend_synchronize(be), SAGA_OK);
        saga_backend_get_stats(be, &s0);
        assert_int_equal(s0.spmm_cusparse, s1.spmm_cusparse);
        assert_int_equal(s0.spmm_cusparse_refused, s1.spmm_cusparse_refused);
        if (p >= 1)
            assert_true(s0.spmm_cusparse == 0 && s0.spmm_cusparse_refused == 0);
    }
    saga_backend_free_all(&dflt);
}

/* Segment sum, mean and max (ties: the first row wins) over segments starting at a nonzero row,
 * with empty ones, forward and backward: the CPU's operations in the CPU's order, so the bits. */
static void test_cuda_backend_f32_segment_reduce(void **state) {
    (void)state;
    enum { N_SEG = 3000, BASE = 5 };
    int64_t *off;
    int32_t *unused_ind;
    float *unused_val;
    random_csr(N_SEG, 1, BASE, &off, &unused_ind, &unused_val);
    const int64_t rows = off[N_SEG];
    int64_t *goff = gput(off, sizeof(int64_t) * (N_SEG + 1));
    static const int64_t Fs[] = {1, 4, 32, 45};
    for (size_t fi = 0; fi < sizeof Fs / sizeof *Fs; fi++) {
        const int64_t F = Fs[fi], n = rows * F, ny = (int64_t)N_SEG * F;
        float *x = rand_f32(n, -1.0f, 1.0f);
        for (int64_t e = 0; e + 2 * F < n; e += 17) /* ties down a column */
            x[e + F] = x[e];
        float *gx = gput(x, sizeof(float) * n);
        float *dy = rand_f32(ny, -1.0f, 1.0f), *gdy = gput(dy, sizeof(float) * ny);
        for (int op = 0; op < SAGA_REDUCE_COUNT; op++) {
            float *y = nan_f32(ny), *gy = gput(y, sizeof(float) * ny);
            int32_t *am = hi32(ny);
            memset(am, 0xff, sizeof(int32_t) * (size_t)ny);
            int32_t *gam = gput(am, sizeof(int32_t) * ny);
            assert_int_equal(
                GK()->segment_reduce_f32(GS(), goff, N_SEG, F, (saga_reduce)op, gx, gy, gam),
                SAGA_OK);
            assert_int_equal(
                CK()->segment_reduce_f32(CS(), off, N_SEG, F, (saga_reduce)op, x, y, am), SAGA_OK);
            expect_bits(gy, y, ny, "segment_reduce_f32");
            if (op == SAGA_REDUCE_MAX) {
                int32_t *gam_host = hi32(ny);
                gget(gam_host, gam, sizeof(int32_t) * ny);
                assert_memory_equal(gam_host, am, sizeof(int32_t) * ny);
            }
            /* backward: rows before the first segment (BASE of them) are not written */
            float *dx = nan_f32(n), *gdx = gput(dx, sizeof(float) * n);
            int32_t *gamc = gput(am, sizeof(int32_t) * ny); /* the CPU's argmax for both */
            assert_int_equal(
                GK()->segment_reduce_bwd_f32(GS(), goff, N_SEG, F, (saga_reduce)op, gdy, gamc, gdx),
                SAGA_OK);
            assert_int_equal(
                CK()->segment_reduce_bwd_f32(CS(), off, N_SEG, F, (saga_reduce)op, dy, am, dx),
                SAGA_OK);
            expect_bits(gdx, dx, n, "segment_reduce_bwd_f32");
        }
    }
    float v = 0.0f, *g = gput(&v, sizeof v);
    assert_int_equal(GK()->segment_reduce_f32(GS(), goff, N_SEG, 1, SAGA_REDUCE_MAX, g, g, NULL),
                     SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("segment_reduce_f32", "MAX needs an argmax array", NULL);
    assert_int_equal(
        GK()->segment_reduce_bwd_f32(GS(), goff, N_SEG, 1, SAGA_REDUCE_MAX, g, NULL, g),
        SAGA_ERR_INVALID_ARG);
    assert_int_equal(GK()->segment_reduce_f32(GS(), goff, 0, 1, SAGA_REDUCE_COUNT, g, g, NULL),
                     SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("unknown reduction", NULL);
    assert_int_equal(GK()->segment_reduce_f32(GS(), goff, 0, 1, SAGA_REDUCE_SUM, g, g, NULL),
                     SAGA_OK);
}

/* Edge softmax per segment and head, forward (out == scores too) and backward (dscores == dout
 * too), with empty segments and segments longer than a warp. */
static void test_cuda_backend_f32_edge_softmax(void **state) {
    (void)state;
    enum { N_SEG = 2000, BASE = 3 };
    int64_t *off;
    int32_t *unused_ind;
    float *unused_val;
    random_csr(N_SEG, 1, BASE, &off, &unused_ind, &unused_val);
    const int64_t rows = off[N_SEG];
    int64_t *goff = gput(off, sizeof(int64_t) * (N_SEG + 1));
    static const int64_t Hs[] = {1, 3, 8, 32}; /* 3: head after head; others: one pass */
    for (size_t hi = 0; hi < sizeof Hs / sizeof *Hs; hi++) {
        const int64_t H = Hs[hi], n = rows * H;
        const size_t bytes = sizeof(float) * (size_t)n;
        float *sc = rand_f32(n, -10.0f, 10.0f), *gsc = gput(sc, bytes);
        float *dout = rand_f32(n, -1.0f, 1.0f), *gdout = gput(dout, bytes);
        /* the rows before the first segment are not written: NaN on both */
        float *out = nan_f32(n), *gout = gput(out, bytes);
        assert_int_equal(GK()->edge_softmax_f32(GS(), goff, N_SEG, H, gsc, gout), SAGA_OK);
        assert_int_equal(CK()->edge_softmax_f32(CS(), off, N_SEG, H, sc, out), SAGA_OK);
        /* the same operations, the double sums in another order, expf within 2 ulp on each
         * side: softmax_err each (0 for the rows before the first segment: NaN on both) */
        double *err = hf64(n), *derr = hf64(n);
        memset(err, 0, (size_t)n * sizeof *err);
        memset(derr, 0, (size_t)n * sizeof *derr);
        for (int64_t g = 0; g < N_SEG; g++)
            for (int64_t h = 0; h < H; h++) {
                const int64_t o = off[g] * H + h, len = off[g + 1] - off[g];
                if (len > 0) {
                    xf_softmax_err(len, H, false, sc + o, err + o);
                    xf_softmax_bwd_err(len, H, false, out + o, dout + o, derr + o);
                }
            }
        for (int64_t i = 0; i < n; i++) {
            err[i] *= 2;
            derr[i] *= 2;
        }
        expect_within(gout, out, err, n, "edge_softmax_f32");
        float *c = hcopy(sc, n), *g = gput(sc, bytes);
        assert_int_equal(GK()->edge_softmax_f32(GS(), goff, N_SEG, H, g, g), SAGA_OK);
        assert_int_equal(CK()->edge_softmax_f32(CS(), off, N_SEG, H, c, c), SAGA_OK);
        expect_within(g, c, err, n, "edge_softmax_f32(out=scores)");

        float *goutc = gput(out, bytes); /* both backward passes read the CPU's output */
        float *ds = nan_f32(n), *gds = gput(ds, bytes);
        assert_int_equal(GK()->edge_softmax_bwd_f32(GS(), goff, N_SEG, H, goutc, gdout, gds),
                         SAGA_OK);
        assert_int_equal(CK()->edge_softmax_bwd_f32(CS(), off, N_SEG, H, out, dout, ds), SAGA_OK);
        expect_within(gds, ds, derr, n, "edge_softmax_bwd_f32");
        c = hcopy(dout, n);
        g = gput(dout, bytes);
        assert_int_equal(GK()->edge_softmax_bwd_f32(GS(), goff, N_SEG, H, goutc, g, g), SAGA_OK);
        assert_int_equal(CK()->edge_softmax_bwd_f32(CS(), off, N_SEG, H, out, c, c), SAGA_OK);
        expect_within(g, c, derr, n, "edge_softmax_bwd_f32(dscores=dout)");
    }
}

/* Three steps of Adam, AdamW and SGD (plain, momentum, Nesterov, weight decay). */
static void test_cuda_backend_f32_optimizers(void **state) {
    (void)state;
    static const int64_t sizes[] = {0, 1, 10007};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        const int64_t n = sizes[si];
        const size_t bytes = (size_t)n * sizeof(float);
        float *p0 = rand_f32(n, -1.0f, 1.0f);
        for (int variant = 0; variant < 8; variant++) {
            float *p = hcopy(p0, n), *m = hf32(n), *v = hf32(n);
            memset(m, 0, bytes);
            memset(v, 0, bytes);
            float *gp = gput(p, bytes), *gm = gput(m, bytes), *gv = gput(v, bytes);
            /* the exact values and one side's bounds (the element-wise formulas in xf) */
            xf *r = halloc(3 * (size_t)n * sizeof *r + 1), *rm = r + n, *rv = r + 2 * n;
            for (int64_t i = 0; i < n; i++) {
                r[i] = xf_in(p0[i]);
                rm[i] = rv[i] = xf_in(0);
            }
            for (int64_t step = 1; step <= 3; step++) {
                float *grad = rand_f32(n, -0.5f, 0.5f), *gg = gput(grad, bytes);
                if (variant < 3) { /* Adam; AdamW; Adam with L2 decay */
                    const bool decoupled = variant == 1;
                    const float wd = variant == 0 ? 0.0f : 0.01f;
                    for (int64_t i = 0; i < n; i++)
                        xf_adam_step(&r[i], &rm[i], &rv[i], grad[i], step, 0.01f, 0.9f, 0.999f,
                                     1e-8f, wd, decoupled);
                    assert_int_equal(GK()->adam_f32(GS(), n, 0.01f, 0.9f, 0.999f, 1e-8f, wd,
                                                    decoupled, step, gp, gg, gm, gv),
                                     SAGA_OK);
                    assert_int_equal(CK()->adam_f32(CS(), n, 0.01f, 0.9f, 0.999f, 1e-8f, wd,
                                                    decoupled, step, p, grad, m, v),
                                     SAGA_OK);
                } else { /* SGD: plain, momentum, Nesterov; then with weight decay */
                    const float mom = variant == 3 || variant == 6 ? 0.0f : 0.9f;
                    const float wd = variant >= 6 ? 5e-4f : 0.0f;
                    const bool nesterov = variant == 5 || variant == 7;
                    for (int64_t i = 0; i < n; i++)
                        xf_sgd_step(&r[i], &rm[i], grad[i], 0.1f, mom, wd, nesterov);
                    assert_int_equal(GK()->sgd_f32(GS(), n, 0.1f, mom, wd, nesterov, gp, gg,
                                                   mom != 0.0f ? gm : NULL),
                                     SAGA_OK);
                    assert_int_equal(CK()->sgd_f32(CS(), n, 0.1f, mom, wd, nesterov, p, grad,
                                                   mom != 0.0f ? m : NULL),
                                     SAGA_OK);
                }
            }
            /* the same f32 operations per element; the GPU may fuse multiply-adds: each side
             * within the xf bound of the exact value */
            double *err = hf64(3 * n);
            for (int64_t i = 0; i < 3 * n; i++)
                err[i] = 2 * r[i].e;
            expect_within(gp, p, err, n, "optimizer param");
            expect_within(gm, m, err + n, n, "optimizer state 1");
            expect_within(gv, v, err + 2 * n, n, "optimizer state 2");
        }
    }
    float v = 0.0f, *g = gput(&v, sizeof v);
    assert_int_equal(
        GK()->adam_f32(GS(), 1, 0.01f, 0.9f, 0.999f, 1e-8f, 0.0f, false, 0, g, g, g, g),
        SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("adam_f32", "step must be 1 or more", NULL);
    assert_int_equal(GK()->sgd_f32(GS(), 1, 0.1f, 0.9f, 0.0f, false, g, g, NULL),
                     SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("sgd_f32", "needs a momentum buffer", NULL);
}

/* A slot that cannot get its workspace fails, and the failed allocation is not reported again
 * by the launch check of the next kernel issued on the thread (CUDA keeps it as the thread's
 * last error until someone reads it). */
static void test_cuda_backend_f32_failed_workspace(void **state) {
    (void)state;
    float v = 1.0f, *g = gput(&v, sizeof v);
    /* column sums of 2^40 columns want 8 TiB of partial sums (rows == 0: nothing is read) */
    const saga_status st = GK()->colsum_f32(GS(), 0, (int64_t)1 << 40, g, 0.0f, g);
    assert_true(st == SAGA_ERR_OUT_OF_MEMORY || st == SAGA_ERR_DEVICE);
    saga_test_assert_error_contains("colsum_f32", NULL);
    assert_int_equal(GK()->fill_f32(GS(), g, 1, 3.0f), SAGA_OK);
    double sum = 0.0;
    assert_int_equal(GK()->sum_f32(GS(), 1, g, &sum), SAGA_OK);
    assert_true(sum == 3.0);
    const float three = 3.0f;
    expect_bits(g, &three, 1, "fill_f32 after a failed workspace");
}

/* Element counts past 2^31 (rows x cols = 2^31 + 4224 floats, 8 GiB): the kernels index in 64
 * bits. Skipped where the device has not room for it. Checked against exact expectations and,
 * for the dropout mask, against the CPU on the tail of the tensor. */
static void test_cuda_backend_f32_beyond_int32(void **state) {
    (void)state;
    const int64_t cols = 128, rows = ((int64_t)1 << 24) + 33, n = rows * cols;
    const size_t bytes = (size_t)n * sizeof(float);
    const char *small = getenv("SAGA_TEST_SKIP_LARGE"); /* memcheck over 16 GiB takes minutes */
    if (small && *small && strcmp(small, "0") != 0) {
        print_message("skipped: SAGA_TEST_SKIP_LARGE is set\n");
        skip();
    }
    saga_backend_stats bs;
    saga_backend_get_stats(gpu, &bs);
    if (bs.device_total < 2 * bytes) {
        print_message("skipped: %zu MiB of device memory, want %zu\n", bs.device_total >> 20,
                      (2 * bytes) >> 20);
        skip();
    }
    float *big = NULL;
    const saga_status st = saga_backend_alloc(gpu, (void **)&big, bytes);
    if (st == SAGA_ERR_OUT_OF_MEMORY) {
        print_message("skipped: %s\n", saga_last_error());
        saga_error_clear();
        skip();
    }
    assert_int_equal(st, SAGA_OK);
    assert_true(n_gbufs < MAX_TRACKED);
    gbufs[n_gbufs] = big;
    gbuf_bytes[n_gbufs++] = bytes;
    float *row = hf32(cols);

    /* fill, then x[i][j] = 1 + j by a bias, then + 0.5 j by a broadcast row (lds 0) */
    assert_int_equal(GK()->fill_f32(GS(), big, n, 1.0f), SAGA_OK);
    double sum = 0.0;
    assert_int_equal(GK()->sum_f32(GS(), n, big, &sum), SAGA_OK);
    assert_true(sum == (double)n);
    float *b = hf32(cols), *half = hf32(cols);
    for (int64_t j = 0; j < cols; j++) {
        b[j] = (float)j;
        half[j] = 0.5f * (float)j;
    }
    float *gb = gput(b, (size_t)cols * sizeof(float));
    float *ghalf = gput(half, (size_t)cols * sizeof(float));
    assert_int_equal(GK()->bias_add_f32(GS(), rows, cols, big, gb, big), SAGA_OK);
    assert_int_equal(GK()->copy2d_f32(GS(), rows, cols, ghalf, 0, big, cols, true), SAGA_OK);
    const int64_t check_rows[] = {0, ((int64_t)1 << 24) - 1, ((int64_t)1 << 24) + 1, rows - 1};
    for (size_t k = 0; k < sizeof check_rows / sizeof *check_rows; k++) {
        gget(row, big + check_rows[k] * cols, (size_t)cols * sizeof(float));
        for (int64_t j = 0; j < cols; j++)
            if (row[j] != 1.0f + 1.5f * (float)j)
                fail_msg("row %lld column %lld: %g, want %g", (long long)check_rows[k],
                         (long long)j, (double)row[j], 1.0 + 1.5 * (double)j);
    }
    /* every value is a multiple of 0.5 below 2^8, so the double sums are exact */
    assert_int_equal(GK()->sum_f32(GS(), n, big, &sum), SAGA_OK);
    assert_true(sum == (double)rows * (128.0 + 1.5 * 8128.0));
    float *cs = hf32(cols), *want = hf32(cols), *gcs = gput(cs, (size_t)cols * sizeof(float));
    assert_int_equal(GK()->colsum_f32(GS(), rows, cols, big, 0.0f, gcs), SAGA_OK);
    for (int64_t j = 0; j < cols; j++)
        want[j] = (float)((double)rows * (1.0 + 1.5 * (double)j));
    expect_bits(gcs, want, cols, "colsum_f32 over 2^31 elements");

    /* gather and scatter-add rows past element 2^31 */
    int32_t ids[3] = {(int32_t)(rows - 1), 0, (int32_t)(rows - 2)};
    int32_t *gids = gput(ids, sizeof ids);
    float *ones = hf32(3 * cols);
    float *gy = gput(nan_f32(3 * cols), (size_t)(3 * cols) * sizeof(float));
    assert_int_equal(GK()->gather_rows_f32(GS(), 3, cols, gids, rows, big, gy), SAGA_OK);
    for (int64_t j = 0; j < 3 * cols; j++)
        ones[j] = 1.0f + 1.5f * (float)(j % cols);
    expect_bits(gy, ones, 3 * cols, "gather_rows_f32 past 2^31");
    for (int64_t j = 0; j < 3 * cols; j++)
        ones[j] = 1.0f;
    float *gones = gput(ones, (size_t)(3 * cols) * sizeof(float));
    int32_t last2[3] = {(int32_t)(rows - 1), (int32_t)(rows - 1), (int32_t)(rows - 3)};
    int32_t *glast2 = gput(last2, sizeof last2);
    assert_int_equal(GK()->scatter_add_rows_f32(GS(), 3, cols, glast2, gones, rows, big), SAGA_OK);
    gget(row, big + (rows - 1) * cols, (size_t)cols * sizeof(float));
    for (int64_t j = 0; j < cols; j++)
        assert_true(row[j] == 3.0f + 1.5f * (float)j);

    /* a segment sum and an edge softmax over the last rows (element offsets past 2^31) */
    const int64_t off[3] = {rows - 4, rows - 2, rows};
    int64_t *goff = gput(off, sizeof off);
    float *tail = hf32(4 * cols), *seg = hf32(2 * cols);
    gget(tail, big + (rows - 4) * cols, (size_t)(4 * cols) * sizeof(float));
    float *gseg = gput(nan_f32(2 * cols), (size_t)(2 * cols) * sizeof(float));
    assert_int_equal(
        GK()->segment_reduce_f32(GS(), goff, 2, cols, SAGA_REDUCE_SUM, big, gseg, NULL), SAGA_OK);
    for (int64_t j = 0; j < cols; j++) {
        seg[j] = tail[j] + tail[cols + j];
        seg[cols + j] = tail[2 * cols + j] + tail[3 * cols + j];
    }
    expect_bits(gseg, seg, 2 * cols, "segment_reduce_f32 past 2^31");
    float *sm = hcopy(tail, 4 * cols);
    int64_t loff[3] = {0, 2, 4};
    assert_int_equal(CK()->edge_softmax_f32(CS(), loff, 2, cols, sm, sm), SAGA_OK);
    assert_int_equal(GK()->edge_softmax_f32(GS(), goff, 2, cols, big, big), SAGA_OK);
    float *got = hf32(4 * cols);
    gget(got, big + (rows - 4) * cols, (size_t)(4 * cols) * sizeof(float));
    double *err = hf64(4 * cols); /* each side within softmax_err of the exact value */
    for (int64_t sg = 0; sg < 2; sg++)
        for (int64_t h = 0; h < cols; h++)
            xf_softmax_err(2, cols, false, tail + 2 * sg * cols + h, err + 2 * sg * cols + h);
    for (int64_t e = 0; e < 4 * cols; e++)
        assert_close(got[e], sm[e], 2 * err[e], "edge_softmax_f32 past 2^31", e);

    /* dropout in place over the whole tensor: its tail is the CPU's mask for that block */
    enum { TAIL = 1000 };
    float *host_tail = hf32(TAIL);
    gget(host_tail, big + (n - TAIL), TAIL * sizeof(float));
    assert_int_equal(GK()->dropout_f32(GS(), n, 0.5f, 4242, 0, big, big), SAGA_OK);
    assert_int_equal(CK()->dropout_f32(CS(), TAIL, 0.5f, 4242, n - TAIL, host_tail, host_tail),
                     SAGA_OK);
    expect_bits(big + (n - TAIL), host_tail, TAIL, "dropout_f32 past 2^31");
}

/* ---- end to end: a two-layer MLP trained three steps through saga_nn.h on both backends ------
 *
 * The hidden layer is tanh, not ReLU: a pre-activation within rounding of zero would take ReLU's
 * other branch on the other backend and move the weights it feeds by a whole term of their
 * gradient, which no rounding bound covers; tanh is smooth, so the trainings stay within the
 * chain of sums below. */

enum { MLP_N = 200, MLP_IN = 12, MLP_HID = 32, MLP_OUT = 5, MLP_TRAIN = 120, MLP_STEPS = 3 };

/* Trains from the same data and initial parameters (the model initialises on the host from a
 * seed) and returns the losses and the final parameters, in host memory. */
static void mlp_run(saga_backend *be, const float *xh, const int32_t *yh, const int32_t *train,
                    double *losses, float *params_out) {
    saga_ctx *c = NULL;
    saga_model *m = NULL;
    saga_optim *o = NULL;
    assert_int_equal(saga_ctx_new(&c, be, 1234), SAGA_OK);
    assert_int_equal(saga_model_new(&m, be), SAGA_OK);
    saga_tensor *W1 = saga_model_param(m, "W1", MLP_IN, MLP_HID, SAGA_INIT_GLOROT, 1);
    saga_tensor *b1 = saga_model_param(m, "b1", 1, MLP_HID, SAGA_INIT_ZEROS, 2);
    saga_tensor *W2 = saga_model_param(m, "W2", MLP_HID, MLP_OUT, SAGA_INIT_GLOROT, 3);
    saga_tensor *b2 = saga_model_param(m, "b2", 1, MLP_OUT, SAGA_INIT_ZEROS, 4);
    assert_true(W1 && b1 && W2 && b2);
    saga_optim_opts oo = saga_optim_opts_defaults(SAGA_OPTIM_SGD);
    oo.lr = 0.2f;
    oo.momentum = 0.9f;
    oo.weight_decay = 5e-4f;
    assert_int_equal(saga_optim_new(&o, m, &oo), SAGA_OK);
    saga_tensor *x = NULL, *y = NULL, *rows = NULL;
    assert_int_equal(saga_tensor_from_host(&x, be, SAGA_F32, MLP_N, MLP_IN, xh), SAGA_OK);
    assert_int_equal(saga_tensor_from_host(&y, be, SAGA_I32, MLP_N, 1, yh), SAGA_OK);
    assert_int_equal(saga_tensor_from_host(&rows, be, SAGA_I32, MLP_TRAIN, 1, train), SAGA_OK);
    for (int step = 0; step < MLP_STEPS; step++) {
        saga_ctx_train(c, true);
        saga_tensor *h = saga_tanh(c, saga_add_bias(c, saga_matmul(c, x, W1), b1));
        h = saga_dropout(c, h, 0.25f); /* the same mask on both backends */
        saga_tensor *logits = saga_add_bias(c, saga_matmul(c, h, W2), b2);
        saga_tensor *loss = saga_nll_loss(c, saga_log_softmax(c, logits), y, rows);
        if (!loss)
            fail_msg("%s: forward pass: %s", saga_backend_name(be), saga_last_error());
        losses[step] = saga_item(loss);
        if (saga_backward(c, loss) != SAGA_OK)
            fail_msg("%s: backward: %s", saga_backend_name(be), saga_last_error());
        assert_int_equal(saga_optim_step(o), SAGA_OK);
        saga_ctx_clear(c);
    }
    float *at = params_out;
    for (int i = 0; i < saga_model_n_params(m); i++) {
        saga_tensor *p = saga_model_param_at(m, i);
        assert_int_equal(saga_tensor_to_host(p, at), SAGA_OK);
        at += saga_tensor_rows(p) * saga_tensor_cols(p);
    }
    saga_tensor_free(&x);
    saga_tensor_free(&y);
    saga_tensor_free(&rows);
    saga_optim_free(&o);
    saga_model_free(&m);
    saga_ctx_free(&c);
}

static void test_cuda_backend_f32_mlp_matches_cpu(void **state) {
    (void)state;
    enum { N_PARAMS = MLP_IN * MLP_HID + MLP_HID + MLP_HID * MLP_OUT + MLP_OUT };
    float *xh = rand_f32(MLP_N * MLP_IN, -1.0f, 1.0f);
    int32_t *yh = hi32(MLP_N), *train = hi32(MLP_TRAIN);
    for (int i = 0; i < MLP_N; i++)
        yh[i] = (int32_t)irand(MLP_OUT);
    for (int k = 0; k < MLP_TRAIN; k++)
        train[k] = (int32_t)(k * 5 % MLP_N);
    double gl[MLP_STEPS], cl[MLP_STEPS];
    float *gp = hf32(N_PARAMS), *cp = hf32(N_PARAMS);
    mlp_run(gpu, xh, yh, train, gl, gp);
    mlp_run(cpu, xh, yh, train, cl, cp);
    /* The bounds on the two trainings' difference relative to the magnitude of the terms, chained
     * as test_util.h describes (net_run_bounds in net_models.h for the GNNs). The forward pass:
     * x W1 + b1 (a GEMM over IN, gamma_{IN+2}, and the bias), tanh (each side within TANH_REL),
     * dropout's product, h W2 + b2 (over HID), log-softmax (its sum over OUT, its subtraction and
     * log, expf within LIBM_REL on each side); the loss, its mean over the training rows in double,
     * rounded to f32. A step adds the backward pass: log-softmax's (OUT, expf), the weight
     * gradients (GEMMs over the N rows) and bias gradients (double sums rounded once), dh = dlogits
     * W2^T (over OUT), dropout's and tanh's products, and SGD's update (weight decay, momentum and
     * lr: two roundings each). An update moves a weight by less than its magnitude (lr 0.2 on the
     * gradient of a mean), so the parameters carry each step's relative error once. */
    saga_test_chain fwd = {2 * TANH_REL + 2 * LIBM_REL, 0}, step = {2 * LIBM_REL, 0},
                    loss = {2 * saga_test_gamma(MLP_TRAIN + 1, SAGA_TEST_U64), 0};
    saga_test_chain_add(&fwd, MLP_IN + 3, 1);
    saga_test_chain_add(&fwd, 1, 1);
    saga_test_chain_add(&fwd, MLP_HID + 3, 1);
    saga_test_chain_add(&fwd, MLP_OUT + 2, 1);
    saga_test_chain_add(&loss, 1, 1);
    step.rel += fwd.rel;
    saga_test_chain_add(&step, MLP_OUT + 3, 1);
    saga_test_chain_add(&step, MLP_N + 2, 2);
    saga_test_chain_add(&step, 1, 2);
    saga_test_chain_add(&step, MLP_OUT + 2, 1);
    saga_test_chain_add(&step, 1, 1);
    saga_test_chain_add(&step, 3, 1);
    saga_test_chain_add(&step, 6, 1);
    for (int s = 0; s < MLP_STEPS; s++) {
        print_message("step %d: loss cuda %.9g, cpu %.9g\n", s, gl[s], cl[s]);
        assert_true(isfinite(gl[s]));
        char what[32];
        snprintf(what, sizeof what, "mlp step %d's loss", s);
        saga_test_assert_close_f64(what, &gl[s], &cl[s], 1, s * step.rel + fwd.rel + loss.rel, 0);
    }
    saga_test_assert_close_f32("mlp parameters", gp, cp, N_PARAMS, MLP_STEPS * step.rel,
                               saga_test_mean_abs_f32(cp, N_PARAMS));
}

/* A replay (saga_backend_capture_begin .. saga_replay_launch) computes the bits the same work
 * computes issued directly: a product (cuBLAS), a scaling and a copy on a second stream forked
 * and joined by events. Nothing runs while it records; a launch reads the memory as it is then;
 * a second recording with another argument updates the graph; an allocation while recording is
 * refused, and the recording still ends. The CPU backend has none. */
static void replay_work(saga_backend *be, saga_stream *side, saga_event *fork, saga_event *join,
                        const float *A, const float *B, float *C, float *D, float alpha) {
    saga_stream *ds = saga_backend_default_stream(be);
    const saga_kernels *k = be->kernels;
    enum { M = 24, N = 16, K = 40 };
    assert_int_equal(k->gemm_f32(ds, false, false, M, N, K, alpha, A, K, B, N, 0.0f, C, N),
                     SAGA_OK);
    assert_int_equal(saga_event_record(fork, ds), SAGA_OK);
    assert_int_equal(saga_stream_wait_event(side, fork), SAGA_OK);
    assert_int_equal(saga_memcpy_d2d_async(side, D, C, (size_t)M * N * sizeof(float)), SAGA_OK);
    assert_int_equal(k->scale_f32(side, (int64_t)M * N, 0.5f, D, 0.25f, D), SAGA_OK);
    assert_int_equal(saga_event_record(join, side), SAGA_OK);
    assert_int_equal(saga_stream_wait_event(ds, join), SAGA_OK);
    assert_int_equal(k->scale_f32(ds, (int64_t)M * N, 2.0f, D, -1.0f, C), SAGA_OK);
}

static void test_cuda_backend_replay_same_bits(void **state) {
    (void)state;
    enum { M = 24, N = 16, K = 40 };
    float hA[M * K], hB[K * N], want[M * N], got[M * N];
    for (int i = 0; i < M * K; i++)
        hA[i] = (float)rnd() - 0.5f;
    for (int i = 0; i < K * N; i++)
        hB[i] = (float)rnd() - 0.5f;
    saga_stream *side = NULL;
    saga_event *fork = NULL, *join = NULL;
    assert_int_equal(saga_stream_new(&side, gpu), SAGA_OK);
    assert_int_equal(saga_event_new(&fork, gpu), SAGA_OK);
    assert_int_equal(saga_event_new(&join, gpu), SAGA_OK);
    float *A = dev_upload(gpu, hA, sizeof hA), *B = dev_upload(gpu, hB, sizeof hB);
    float *C = NULL, *D = NULL;
    assert_int_equal(saga_backend_alloc(gpu, (void **)&C, sizeof want), SAGA_OK);
    assert_int_equal(saga_backend_alloc(gpu, (void **)&D, sizeof want), SAGA_OK);
    saga_stream *ds = saga_backend_default_stream(gpu);
    const saga_kernels *k = gpu->kernels;

    /* issued directly */
    replay_work(gpu, side, fork, join, A, B, C, D, 1.0f);
    dev_download(gpu, want, C, sizeof want);

    /* recorded: nothing runs until the launch */
    assert_true(saga_backend_can_capture(gpu));
    assert_int_equal(k->fill_f32(ds, C, M * N, NAN), SAGA_OK);
    assert_int_equal(saga_backend_synchronize(gpu), SAGA_OK);
    saga_replay *r = NULL;
    assert_int_equal(saga_backend_capture_begin(gpu), SAGA_OK);
    replay_work(gpu, side, fork, join, A, B, C, D, 1.0f);
    assert_int_equal(saga_backend_capture_end(gpu, &r), SAGA_OK);
    assert_non_null(r);
    dev_download(gpu, got, C, sizeof got);
    for (int i = 0; i < M * N; i++)
        if (!isnan(got[i]))
            fail_msg("C[%d] = %g before the launch: the recorded work ran", i, (double)got[i]);
    for (int rep = 0; rep < 2; rep++) {
        assert_int_equal(k->fill_f32(ds, C, M * N, NAN), SAGA_OK);
        assert_int_equal(saga_replay_launch(r), SAGA_OK);
        dev_download(gpu, got, C, sizeof got);
        assert_memory_equal(got, want, sizeof want);
    }

    /* a launch reads B as it is now: B doubled doubles the product, exactly */
    assert_int_equal(k->scale_f32(ds, K * N, 2.0f, B, 0.0f, B), SAGA_OK);
    replay_work(gpu, side, fork, join, A, B, C, D, 1.0f);
    dev_download(gpu, want, C, sizeof want);
    assert_int_equal(k->fill_f32(ds, C, M * N, NAN), SAGA_OK);
    assert_int_equal(saga_replay_launch(r), SAGA_OK);
    dev_download(gpu, got, C, sizeof got);
    assert_memory_equal(got, want, sizeof want);

    /* recorded again with another alpha: the graph takes the new argument */
    replay_work(gpu, side, fork, join, A, B, C, D, -3.0f);
    dev_download(gpu, want, C, sizeof want);
    saga_replay *before = r;
    assert_int_equal(saga_backend_capture_begin(gpu), SAGA_OK);
    replay_work(gpu, side, fork, join, A, B, C, D, -3.0f);
    assert_int_equal(saga_backend_capture_end(gpu, &r), SAGA_OK);
    assert_ptr_equal(r, before);
    assert_int_equal(k->fill_f32(ds, C, M * N, NAN), SAGA_OK);
    assert_int_equal(saga_replay_launch(r), SAGA_OK);
    dev_download(gpu, got, C, sizeof got);
    assert_memory_equal(got, want, sizeof want);

    /* an allocation while recording: a new block (no earlier work uses it), which the recorded
     * work writes; a free while recording waits for the launch, whose work still reads it */
    void *p = NULL;
    replay_work(gpu, side, fork, join, A, B, C, D, 1.0f);
    dev_download(gpu, want, C, sizeof want);
    assert_int_equal(saga_backend_capture_begin(gpu), SAGA_OK);
    assert_int_equal(saga_backend_alloc(gpu, &p, sizeof want), SAGA_OK);
    replay_work(gpu, side, fork, join, A, B, C, p, 1.0f);
    saga_backend_free(gpu, D, sizeof want);
    D = p;
    assert_int_equal(saga_backend_capture_end(gpu, &r), SAGA_OK);
    assert_int_equal(k->fill_f32(ds, C, M * N, NAN), SAGA_OK);
    assert_int_equal(saga_replay_launch(r), SAGA_OK);
    dev_download(gpu, got, C, sizeof got);
    assert_memory_equal(got, want, sizeof want);
    saga_replay_free(&r);
    assert_null(r);

    /* a recording discarded (after a failure between begin and end) runs nothing, and a free
     * made while it recorded is given back at its end (no launch will read the block) */
    void *q = NULL;
    assert_int_equal(saga_backend_alloc(gpu, &q, 4096), SAGA_OK);
    assert_int_equal(k->fill_f32(ds, C, M * N, NAN), SAGA_OK);
    assert_int_equal(saga_backend_synchronize(gpu), SAGA_OK);
    saga_backend_stats s0, s1;
    assert_int_equal(saga_backend_capture_begin(gpu), SAGA_OK);
    replay_work(gpu, side, fork, join, A, B, C, D, 1.0f);
    saga_backend_free(gpu, q, 4096);
    saga_backend_get_stats(gpu, &s0);
    assert_int_equal(saga_backend_capture_end(gpu, NULL), SAGA_OK);
    saga_backend_get_stats(gpu, &s1);
    assert_true(s1.cached_bytes > s0.cached_bytes);
    dev_download(gpu, got, C, sizeof got);
    assert_true(isnan(got[0]));

    /* the CPU backend has no graphs */
    assert_false(saga_backend_can_capture(cpu));
    assert_int_equal(saga_backend_capture_begin(cpu), SAGA_ERR_UNSUPPORTED);

    saga_backend_free(gpu, A, sizeof hA);
    saga_backend_free(gpu, B, sizeof hB);
    saga_backend_free(gpu, C, sizeof want);
    saga_backend_free(gpu, D, sizeof want);
    saga_event_free(&fork);
    saga_event_free(&join);
    saga_stream_free(&side);
}

/* a test whose buffers its teardown frees */
#define tracked_test(f) cmocka_unit_test_setup_teardown(f, saga_test_setup, free_tracked)

int main(void) {
    /* the comparisons themselves, which need no device */
    const struct CMUnitTest host_tests[] = {
        cmocka_unit_test(test_cuda_backend_assert_close),
    };
    const int host_failed = cmocka_run_group_tests_name("host", host_tests, NULL, NULL);
    /* gpu: cuSPARSE's SpMM where it applies (SAGA_CUDA_SPMM=cusparse; saga's own is the
     * default, which gpu_own has) */
    if (setenv("SAGA_CUDA_SPMM", "cusparse", 1) != 0)
        return 1;
    saga_status st = saga_backend_cuda_new(&gpu, 0, NULL);
    if (st != SAGA_OK) {
        printf("skipping: no CUDA backend: %s: %s\n", saga_status_name(st), saga_last_error());
        return host_failed ? host_failed : 77;
    }
    /* a second backend on the device whose spmm_f32 always runs saga's own kernel */
    if (setenv("SAGA_CUDA_SPMM", "own", 1) != 0 ||
        saga_backend_cuda_new(&gpu_own, 0, NULL) != SAGA_OK) {
        printf("cannot open a second CUDA backend: %s\n", saga_last_error());
        return 1;
    }
    unsetenv("SAGA_CUDA_SPMM");
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
        tracked_test(test_cuda_backend_pagerank_pull_matches_cpu),
        cmocka_unit_test(test_cuda_backend_budget_and_cache),
        cmocka_unit_test(test_cuda_backend_cache_reuse_waits_on_device),
        cmocka_unit_test(test_cuda_backend_arena_reuse_waits_on_device),
        cmocka_unit_test(test_cuda_backend_arena_ranges_merge),
        cmocka_unit_test(test_cuda_backend_arena_blocks_and_rest_apart),
        cmocka_unit_test(test_cuda_backend_block_room),
        cmocka_unit_test(test_cuda_backend_budget_covers_cache_and_scratch),
        cmocka_unit_test(test_cuda_backend_sched_places_again),
        cmocka_unit_test(test_cuda_backend_sched_writes_back_to_place),
        cmocka_unit_test(test_cuda_backend_full_budget_keeps_scratch),
        cmocka_unit_test(test_cuda_backend_tensors),
        cmocka_unit_test(test_cuda_backend_async_copies_with_events),
        cmocka_unit_test(test_cuda_backend_rows_copies),
        cmocka_unit_test(test_cuda_backend_host_fn_and_elapsed),
        cmocka_unit_test(test_cuda_backend_event_poll_then_launch),
        cmocka_unit_test(test_cuda_backend_replay_same_bits),
        cmocka_unit_test(test_cuda_backend_f32_table_complete),
        tracked_test(test_cuda_backend_f32_fill_scale_binary),
        tracked_test(test_cuda_backend_half_to_f32),
        tracked_test(test_cuda_backend_f32_activations),
        tracked_test(test_cuda_backend_f32_dropout),
        tracked_test(test_cuda_backend_f32_dropout_rows),
        tracked_test(test_cuda_backend_f32_rows_and_columns),
        tracked_test(test_cuda_backend_f32_gemm),
        tracked_test(test_cuda_backend_f32_softmax_rows),
        tracked_test(test_cuda_backend_f32_nll),
        tracked_test(test_cuda_backend_f32_nll_dev),
        tracked_test(test_cuda_backend_f32_losses_and_sums),
        tracked_test(test_cuda_backend_f32_gather_scatter),
        tracked_test(test_cuda_backend_f32_spmm),
        tracked_test(test_cuda_backend_f32_spmm_split),
        tracked_test(test_cuda_backend_f32_sparse_input),
        tracked_test(test_cuda_backend_f32_spmm_t),
        tracked_test(test_cuda_backend_f32_spmm_t_budget),
        cmocka_unit_test(test_cuda_backend_spmm_choice),
        tracked_test(test_cuda_backend_spmm_counts_cusparse),
        tracked_test(test_cuda_backend_f32_segment_reduce),
        tracked_test(test_cuda_backend_f32_edge_softmax),
        tracked_test(test_cuda_backend_f32_optimizers),
        tracked_test(test_cuda_backend_f32_failed_workspace),
        tracked_test(test_cuda_backend_f32_beyond_int32),
        tracked_test(test_cuda_backend_f32_mlp_matches_cpu),
    };
    /* SAGA_TEST_FILTER runs only the tests whose names match it (cmocka's * and ? patterns) */
    const char *filter = getenv("SAGA_TEST_FILTER");
    if (filter && *filter)
        cmocka_set_test_filter(filter);
    int failed = host_failed + cmocka_run_group_tests(tests, NULL, NULL);
    saga_backend_stats s;
    saga_backend_get_stats(gpu, &s);
    if (s.in_use_bytes != 0) {
        printf("cuda backend: %zu bytes still allocated after the tests\n", s.in_use_bytes);
        failed++;
    }
    /* the module's file, named by an address inside it (a function of its table) */
    char module[PATH_MAX] = "";
    Dl_info info;
    void *inside = NULL;
    memcpy(&inside, &gpu->iface->destroy, sizeof inside);
    if (dladdr(inside, &info) && info.dli_fname)
        snprintf(module, sizeof module, "%s", info.dli_fname);
    saga_backend_free_all(&gpu_own);
    saga_backend_free_all(&gpu);
    saga_backend_free_all(&cpu);
    /* with its last backend freed, the module (and its static CUDA runtime) stays loaded */
    void *still = module[0] ? dlopen(module, RTLD_NOW | RTLD_NOLOAD) : NULL;
    if (!still) {
        printf("cuda backend: the module %s was unloaded with its last backend\n", module);
        failed++;
    } else {
        dlclose(still);
    }
    return failed;
}
