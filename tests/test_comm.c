/* test_comm.c - the communicators (saga_comm.h). Runs as one process (the one-rank communicator)
 * and, registered again by ctest, under mpiexec with 2 and 4 ranks; SAGA_TEST_DEVICE=cuda runs
 * the device communicator on the CUDA backend (on the CUDA simulator with its NCCL stand-in).
 * Every rank checks what it received against what the others must have sent. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "backend_impl.h"
#include "saga_comm.h"
#include "saga_nn.h"
#include "tensor_impl.h"
#include "test_util.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static saga_comm *comm;  /* host */
static saga_comm *dcomm; /* device, over be */
static saga_backend *be;

static int rk(void) {
    return saga_comm_rank(comm);
}
static int np(void) {
    return saga_comm_size(comm);
}

/* n floats of device memory from host values, and back. */
static void *dev_from(const void *host, size_t bytes) {
    void *d = NULL;
    assert_int_equal(saga_backend_alloc(be, &d, bytes ? bytes : 1), SAGA_OK);
    if (bytes) {
        assert_int_equal(saga_memcpy_h2d_async(saga_backend_default_stream(be), d, host, bytes),
                         SAGA_OK);
        assert_int_equal(saga_backend_synchronize(be), SAGA_OK);
    }
    return d;
}
static void dev_to(void *host, const void *d, size_t bytes) {
    if (!bytes)
        return;
    assert_int_equal(saga_memcpy_d2h_async(saga_backend_default_stream(be), host, d, bytes),
                     SAGA_OK);
    assert_int_equal(saga_backend_synchronize(be), SAGA_OK);
}

static void test_comm_identity(void **state) {
    (void)state;
    assert_true(rk() >= 0 && rk() < np());
    assert_true(saga_comm_local_rank(comm) >= 0 &&
                saga_comm_local_rank(comm) < saga_comm_local_size(comm));
    assert_int_equal(saga_comm_size(dcomm), np());
    assert_int_equal(saga_comm_rank(dcomm), rk());
    assert_true(saga_comm_on_device(dcomm));
    assert_false(saga_comm_on_device(comm));
    if (np() == 1)
        assert_string_equal(saga_comm_name(comm), saga_comm_launched() ? "mpi (1 rank)" : "single");
}

static void test_comm_allreduce_host(void **state) {
    (void)state;
    int p = np(), r = rk();
    double d[3] = {r + 1.0, -(double)r, 0.5 * r};
    assert_int_equal(saga_comm_allreduce(comm, d, 3, SAGA_F64, SAGA_COMM_SUM, NULL), SAGA_OK);
    assert_true(d[0] == p * (p + 1) / 2.0);
    assert_true(d[1] == -(p * (p - 1) / 2.0));
    int32_t i = 10 * r - 3;
    assert_int_equal(saga_comm_allreduce(comm, &i, 1, SAGA_I32, SAGA_COMM_MIN, NULL), SAGA_OK);
    assert_int_equal(i, -3);
    int64_t l = (int64_t)r << 40;
    assert_int_equal(saga_comm_allreduce(comm, &l, 1, SAGA_I64, SAGA_COMM_MAX, NULL), SAGA_OK);
    assert_true(l == (int64_t)(p - 1) << 40);
    /* zero elements is fine; bad arguments are not */
    assert_int_equal(saga_comm_allreduce(comm, NULL, 0, SAGA_F32, SAGA_COMM_SUM, NULL), SAGA_OK);
    assert_int_equal(saga_comm_allreduce(comm, d, 1, SAGA_DTYPE_COUNT, SAGA_COMM_SUM, NULL),
                     SAGA_ERR_INVALID_ARG);
}

/* A thread's rounds of sums on its own communicator: round k adds rank + k over the ranks. */
typedef struct dup_rounds {
    saga_comm *c;
    int base; /* the rounds' own offset, so that the two threads' sums differ */
    int bad;  /* rounds whose sum was wrong, or -1 on a failed call */
} dup_rounds;

static void *dup_main(void *arg) {
    dup_rounds *d = arg;
    const int p = np(), r = rk();
    for (int k = 0; k < 200; k++) {
        int64_t v = d->base + k + r;
        if (saga_comm_allreduce(d->c, &v, 1, SAGA_I64, SAGA_COMM_SUM, NULL) != SAGA_OK) {
            d->bad = -1;
            return NULL;
        }
        d->bad += v != (int64_t)p * (d->base + k) + (int64_t)p * (p - 1) / 2;
    }
    return NULL;
}

/* A duplicate (saga_comm_dup) carries collectives of its own beside the original's, from
 * another thread at the same time, without their messages meeting; a device communicator is
 * refused. */
static void test_comm_dup(void **state) {
    (void)state;
    saga_comm *two = NULL;
    assert_int_equal(saga_comm_dup(&two, comm), SAGA_OK);
    assert_int_equal(saga_comm_rank(two), rk());
    assert_int_equal(saga_comm_size(two), np());
    if (saga_comm_threads(comm)) {
        dup_rounds a = {comm, 0, 0}, b = {two, 1000000, 0};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, dup_main, &b), 0);
        dup_main(&a);
        pthread_join(t, NULL);
        assert_int_equal(a.bad, 0);
        assert_int_equal(b.bad, 0);
    } else {
        print_message("  MPI below MPI_THREAD_MULTIPLE: the two threads' rounds are skipped\n");
    }
    saga_comm_free(&two);
    saga_comm *none = NULL;
    assert_int_equal(saga_comm_dup(&none, dcomm), SAGA_ERR_UNSUPPORTED);
    assert_null(none);
}

/* f32 sums and maxima of device buffers: every rank adds its rank to a ramp. */
static void test_comm_allreduce_device(void **state) {
    (void)state;
    int p = np(), r = rk();
    enum { N = 1000 };
    float h[N], want[N];
    for (int k = 0; k < N; k++) {
        h[k] = (float)k + (float)r;
        want[k] = (float)k * (float)p + (float)(p * (p - 1) / 2);
    }
    float *d = dev_from(h, sizeof h);
    assert_int_equal(saga_comm_allreduce(dcomm, d, N, SAGA_F32, SAGA_COMM_SUM, NULL), SAGA_OK);
    dev_to(h, d, sizeof h);
    for (int k = 0; k < N; k++)
        assert_true(h[k] == want[k]);
    for (int k = 0; k < N; k++)
        h[k] = (float)((k + r) % p);
    assert_int_equal(saga_memcpy_h2d_async(saga_backend_default_stream(be), d, h, sizeof h),
                     SAGA_OK);
    assert_int_equal(saga_comm_allreduce(dcomm, d, N, SAGA_F32, SAGA_COMM_MAX, NULL), SAGA_OK);
    dev_to(h, d, sizeof h);
    for (int k = 0; k < N; k++)
        assert_true(h[k] == (float)(p - 1));
    saga_backend_free(be, d, sizeof h);
}

static void test_comm_bcast(void **state) {
    (void)state;
    int p = np(), r = rk(), root = p - 1;
    char msg[32];
    snprintf(msg, sizeof msg, "from rank %d", r);
    assert_int_equal(saga_comm_bcast(comm, msg, sizeof msg, root, NULL), SAGA_OK);
    char want[32];
    snprintf(want, sizeof want, "from rank %d", root);
    assert_string_equal(msg, want);
    double h[5] = {r, r, r, r, r};
    double *d = dev_from(h, sizeof h);
    assert_int_equal(saga_comm_bcast(dcomm, d, sizeof h, 0, NULL), SAGA_OK);
    dev_to(h, d, sizeof h);
    for (int k = 0; k < 5; k++)
        assert_true(h[k] == 0.0);
    saga_backend_free(be, d, sizeof h);
    assert_int_equal(saga_comm_bcast(comm, msg, 1, p, NULL), SAGA_ERR_INVALID_ARG);
}

/* Rank r sends q + 1 ints of value 100 r + q + i to every rank q (itself included), in two
 * blocks per peer whose order must be kept, on host and device communicators. */
static void exchange(saga_comm *c, bool device) {
    int p = np(), r = rk();
    size_t max = (size_t)p + 1;
    int32_t *out = calloc((size_t)p * max, sizeof *out), *in = calloc((size_t)p * max, 4);
    assert_non_null(out);
    assert_non_null(in);
    for (int q = 0; q < p; q++)
        for (int i = 0; i <= q; i++)
            out[q * max + i] = 100 * r + q + i;
    size_t bytes = (size_t)p * max * 4;
    int32_t *dout = device ? dev_from(out, bytes) : out, *din = device ? dev_from(in, bytes) : in;
    saga_comm_block *s = calloc(2 * (size_t)p, sizeof *s), *v = calloc(2 * (size_t)p, sizeof *v);
    int ns = 0, nv = 0;
    for (int q = 0; q < p; q++) {
        /* to q: q + 1 ints as a first int and the rest; from q: r + 1 ints the same way */
        s[ns++] = (saga_comm_block){q, dout + q * max, 4};
        s[ns++] = (saga_comm_block){q, dout + q * max + 1, (size_t)q * 4};
        v[nv++] = (saga_comm_block){q, din + q * max, 4};
        v[nv++] = (saga_comm_block){q, din + q * max + 1, (size_t)r * 4};
    }
    assert_int_equal(saga_comm_sendrecv(c, s, ns, v, nv, NULL), SAGA_OK);
    if (device)
        dev_to(in, din, bytes);
    for (int q = 0; q < p; q++)
        for (int i = 0; i <= r; i++)
            assert_int_equal(in[q * max + i], 100 * q + r + i);
    /* the same as an all-to-all */
    size_t *sb = calloc(4 * (size_t)p, sizeof *sb);
    size_t *so = sb + p, *rb = sb + 2 * p, *ro = sb + 3 * p;
    for (int q = 0; q < p; q++) {
        sb[q] = (size_t)(q + 1) * 4;
        so[q] = (size_t)q * max * 4;
        rb[q] = (size_t)(r + 1) * 4;
        ro[q] = (size_t)q * max * 4;
    }
    memset(in, 0, bytes);
    if (device)
        assert_int_equal(saga_memcpy_h2d_async(saga_backend_default_stream(be), din, in, bytes),
                         SAGA_OK);
    assert_int_equal(saga_comm_alltoallv(c, dout, sb, so, din, rb, ro, NULL), SAGA_OK);
    if (device)
        dev_to(in, din, bytes);
    for (int q = 0; q < p; q++)
        for (int i = 0; i <= r; i++)
            assert_int_equal(in[q * max + i], 100 * q + r + i);
    if (device) {
        saga_backend_free(be, dout, bytes);
        saga_backend_free(be, din, bytes);
    }
    free(sb);
    free(s);
    free(v);
    free(out);
    free(in);
}

static void test_comm_sendrecv_host(void **state) {
    (void)state;
    exchange(comm, false);
    saga_comm_stats st;
    saga_comm_get_stats(comm, &st);
    assert_true(st.calls > 0);
}

static void test_comm_sendrecv_device(void **state) {
    (void)state;
    exchange(dcomm, saga_backend_get_kind(be) != SAGA_BACKEND_CPU);
}

static void test_comm_sendrecv_unmatched_self(void **state) {
    (void)state;
    int x = 1, y = 0;
    saga_comm_block s = {rk(), &x, sizeof x}, v = {rk(), &y, 2};
    assert_int_equal(saga_comm_sendrecv(comm, &s, 1, &v, 1, NULL), SAGA_ERR_INVALID_ARG);
    saga_comm_block bad = {np(), &x, sizeof x};
    assert_int_equal(saga_comm_sendrecv(comm, &bad, 1, NULL, 0, NULL), SAGA_ERR_INVALID_ARG);
}

/* The last rank fails; every rank learns it, with its message. */
static void test_comm_agree(void **state) {
    (void)state;
    int p = np(), r = rk();
    assert_int_equal(saga_comm_agree(comm, SAGA_OK), SAGA_OK);
    saga_status mine = SAGA_OK;
    if (r == p - 1)
        mine = saga_error(SAGA_ERR_IO, "cannot open part-%d.txt", r);
    saga_status got = saga_comm_agree(comm, mine);
    assert_int_equal(got, SAGA_ERR_IO);
    char want[64];
    snprintf(want, sizeof want, "cannot open part-%d.txt", p - 1);
    assert_non_null(strstr(saga_last_error(), want));
    if (r != p - 1) {
        snprintf(want, sizeof want, "rank %d: ", p - 1);
        assert_non_null(strstr(saga_last_error(), want));
    }
    /* agreement does not count as the work's traffic */
    saga_comm_reset_stats(comm);
    assert_int_equal(saga_comm_agree(comm, SAGA_OK), SAGA_OK);
    saga_comm_stats st;
    saga_comm_get_stats(comm, &st);
    assert_true(st.sent_bytes == 0 && st.recv_bytes == 0);
    assert_int_equal(saga_comm_barrier(comm), SAGA_OK);
    assert_int_equal(saga_comm_barrier(dcomm), SAGA_OK);
}

/* Gradients summed over the ranks, and averaged. */
static void test_comm_allreduce_grads(void **state) {
    (void)state;
    int p = np(), r = rk();
    saga_model *m = NULL;
    assert_int_equal(saga_model_new(&m, be), SAGA_OK);
    saga_tensor *W = saga_model_param(m, "W", 3, 4, SAGA_INIT_ZEROS, 1);
    saga_tensor *b = saga_model_param(m, "b", 1, 4, SAGA_INIT_ZEROS, 1);
    assert_non_null(W);
    assert_non_null(b);
    float gw[12], gb[4];
    for (int k = 0; k < 12; k++)
        gw[k] = (float)(r + k);
    for (int k = 0; k < 4; k++)
        gb[k] = (float)(2 * r);
    for (int t = 0; t < 2; t++) {
        assert_int_equal(
            saga_memcpy_h2d_async(saga_backend_default_stream(be), W->grad->data, gw, sizeof gw),
            SAGA_OK);
        assert_int_equal(
            saga_memcpy_h2d_async(saga_backend_default_stream(be), b->grad->data, gb, sizeof gb),
            SAGA_OK);
        double scale = t == 0 ? 1.0 : (double)p;
        assert_int_equal(saga_comm_allreduce_grads(t == 0 ? comm : dcomm, m, scale), SAGA_OK);
        float hw[12], hb[4];
        dev_to(hw, W->grad->data, sizeof hw);
        dev_to(hb, b->grad->data, sizeof hb);
        /* small integers add exactly in f32, in any order: the sum is exact; the average is it
         * times 1 / p rounded, two roundings against this one division's one */
        const double bound = t == 0 ? 0 : saga_test_gamma(3, SAGA_TEST_U32);
        for (int k = 0; k < 12; k++) {
            float sum = (float)(p * (p - 1) / 2 + p * k), want = t == 0 ? sum : sum / (float)p;
            assert_true(fabsf(hw[k] - want) <= bound * fabsf(want));
        }
        for (int k = 0; k < 4; k++) {
            float sum = (float)(p * (p - 1)), want = t == 0 ? sum : sum / (float)p;
            assert_true(fabsf(hb[k] - want) <= bound * fabsf(want));
        }
    }
    saga_model_free(&m);
}

static void test_comm_open_errors(void **state) {
    (void)state;
    saga_comm *c = NULL;
    assert_int_equal(saga_comm_open(&c, "tcp"), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("tcp", "auto, single or mpi", NULL);
    assert_null(c);
    assert_int_equal(saga_comm_open(NULL, "single"), SAGA_ERR_INVALID_ARG);
    assert_int_equal(saga_comm_open(&c, "single"), SAGA_OK);
    assert_int_equal(saga_comm_size(c), 1);
    saga_comm *d = NULL;
    assert_int_equal(saga_comm_open_device(&d, c, be), SAGA_OK);
    assert_int_equal(saga_comm_open_device(NULL, c, be), SAGA_ERR_INVALID_ARG);
    saga_comm *dd = NULL;
    assert_int_equal(saga_comm_open_device(&dd, d, be), SAGA_ERR_INVALID_ARG);
    saga_comm_free(&d);
    saga_comm_free(&c);
    assert_null(c);
    saga_comm_free(&c);
}

/* SAGA_TEST_STALL=sendrecv|allreduce (comm_watchdog.sh, with SAGA_COMM_TIMEOUT): rank 1 sleeps
 * instead of taking part; every other rank's operation must fail naming what it waited for,
 * whereupon it stops the job as a net would (saga_comm_abort). Returns the exit code. */
static int stall(const char *mode) {
    const int r = saga_comm_rank(comm), p = saga_comm_size(comm);
    if (r == 1) {
        sleep(60);
        return 0;
    }
    saga_status st;
    double t0 = saga_now();
    if (strcmp(mode, "allreduce") == 0) {
        double x = 1;
        st = saga_comm_allreduce(comm, &x, 1, SAGA_F64, SAGA_COMM_SUM, NULL);
    } else {
        /* every rank sends every other one 8 bytes */
        double *buf = calloc(2 * (size_t)p, sizeof *buf);
        size_t *cnt = calloc(4 * (size_t)p, sizeof *cnt);
        for (int q = 0; q < p; q++) {
            cnt[q] = cnt[2 * p + q] = q == r ? 0 : sizeof(double);
            cnt[p + q] = cnt[3 * p + q] = (size_t)q * sizeof(double);
        }
        st = saga_comm_alltoallv(comm, buf, cnt, cnt + p, buf + p, cnt + 2 * p, cnt + 3 * p, NULL);
        free(buf);
        free(cnt);
    }
    fprintf(stderr, "rank %d: %s after %.1f s: %s\n", r, mode, saga_now() - t0,
            st < 0 ? saga_last_error() : "completed");
    fflush(stderr);
    saga_comm_abort(comm, 3);
    return 3;
}

int main(void) {
    const char *dev = getenv("SAGA_TEST_DEVICE");
    if (saga_comm_open(&comm, "auto") < 0) {
        fprintf(stderr, "test_comm: %s\n", saga_last_error());
        return 1;
    }
    const char *stall_mode = getenv("SAGA_TEST_STALL");
    if (stall_mode && *stall_mode)
        return stall(stall_mode);
    char spec[32] = "cpu";
    if (dev && strcmp(dev, "cuda") == 0)
        snprintf(spec, sizeof spec, "cuda:%d", saga_comm_local_rank(comm));
    if (saga_backend_open(&be, spec, NULL) < 0 || saga_comm_open_device(&dcomm, comm, be) < 0) {
        fprintf(stderr, "test_comm: rank %d: %s\n", saga_comm_rank(comm), saga_last_error());
        saga_comm_abort(comm, 1);
    }
    if (saga_comm_rank(comm) == 0)
        printf("test_comm: %s, device %s over %s\n", saga_comm_name(comm), saga_comm_name(dcomm),
               saga_backend_name(be));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_comm_identity),
        cmocka_unit_test(test_comm_allreduce_host),
        cmocka_unit_test(test_comm_allreduce_device),
        cmocka_unit_test(test_comm_bcast),
        cmocka_unit_test(test_comm_sendrecv_host),
        cmocka_unit_test(test_comm_sendrecv_device),
        cmocka_unit_test(test_comm_sendrecv_unmatched_self),
        cmocka_unit_test(test_comm_agree),
        cmocka_unit_test(test_comm_allreduce_grads),
        cmocka_unit_test(test_comm_open_errors),
        cmocka_unit_test(test_comm_dup),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    /* a rank whose test failed must not leave the others waiting */
    int32_t any = failed;
    if (saga_comm_allreduce(comm, &any, 1, SAGA_I32, SAGA_COMM_MAX, NULL) < 0)
        any = 1;
    saga_comm_free(&dcomm);
    saga_backend_free_all(&be);
    saga_comm_free(&comm);
    return any ? 1 : 0;
}
