/* test_streams.c - asynchronous streams of the CPU backend: issue order, real asynchrony, events
 * across streams, waits on the default stream, host functions, event timing, draining on free
 * and synchronize, copy time, failed allocations, and the generic fallbacks. Every host function
 * that blocks gives up after a few seconds, so a broken build fails instead of hanging. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"

#include "backend_impl.h"
#include "saga_log.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- helpers ----------------------------------------------------------------------------- */

enum { GATE_TIMEOUT_S = 5 };

static saga_backend *cpu_backend(void) {
    saga_backend *be = NULL;
    assert_int_equal(saga_backend_cpu_new(&be, NULL), SAGA_OK);
    return be;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* A host function that blocks its stream until the test opens the gate. It gives up after
 * GATE_TIMEOUT_S and says so in timed_out: if issuing it had blocked the caller, the caller
 * could never open the gate. */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool open;
    bool entered;   /* the function has started */
    bool finished;  /* the function has returned */
    bool timed_out; /* it gave up waiting */
} gate;

static void gate_init(gate *g) {
    memset(g, 0, sizeof *g);
    assert_int_equal(pthread_mutex_init(&g->mu, NULL), 0);
    assert_int_equal(pthread_cond_init(&g->cv, NULL), 0);
}

static void gate_destroy(gate *g) {
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
}

static struct timespec deadline_in(int seconds) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += seconds;
    return ts;
}

static void gate_fn(void *arg) {
    gate *g = arg;
    struct timespec until = deadline_in(GATE_TIMEOUT_S);
    pthread_mutex_lock(&g->mu);
    g->entered = true;
    pthread_cond_broadcast(&g->cv);
    while (!g->open) {
        if (pthread_cond_timedwait(&g->cv, &g->mu, &until) == ETIMEDOUT) {
            g->timed_out = true;
            break;
        }
    }
    g->finished = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static void gate_open(gate *g) {
    pthread_mutex_lock(&g->mu);
    g->open = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* Waits (bounded) until the gate's function has started; false when it did not. */
static bool gate_wait_entered(gate *g) {
    struct timespec until = deadline_in(GATE_TIMEOUT_S);
    pthread_mutex_lock(&g->mu);
    while (!g->entered)
        if (pthread_cond_timedwait(&g->cv, &g->mu, &until) == ETIMEDOUT)
            break;
    bool entered = g->entered;
    pthread_mutex_unlock(&g->mu);
    return entered;
}

static bool gate_get(gate *g, const bool *field) {
    pthread_mutex_lock(&g->mu);
    bool v = *field;
    pthread_mutex_unlock(&g->mu);
    return v;
}

/* Opens a gate from another thread after a delay, for tests in which the main thread blocks. */
typedef struct opener {
    gate *g;
    int delay_ms;
    pthread_t thread;
} opener;

static void *opener_main(void *arg) {
    opener *o = arg;
    sleep_ms(o->delay_ms);
    gate_open(o->g);
    return NULL;
}

static void opener_start(opener *o, gate *g, int delay_ms) {
    o->g = g;
    o->delay_ms = delay_ms;
    assert_int_equal(pthread_create(&o->thread, NULL, opener_main, o), 0);
}

static void opener_join(opener *o) {
    assert_int_equal(pthread_join(o->thread, NULL), 0);
}

/* Host functions that leave a trace. */
typedef struct trace {
    atomic_int n;
    atomic_int order[64];
} trace;

typedef struct trace_arg {
    trace *t;
    int id;
} trace_arg;

static void trace_fn(void *arg) {
    trace_arg *a = arg;
    int k = atomic_fetch_add(&a->t->n, 1);
    if (k < 64)
        atomic_store(&a->t->order[k], a->id);
}

static void sleep_fn(void *arg) {
    sleep_ms(*(const int *)arg);
}

static void set_flag_fn(void *arg) {
    atomic_store((atomic_int *)arg, 1);
}

/* Deterministic pseudo-random numbers. */
static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t rnd_u32(void) {
    return (uint32_t)(saga_test_u64(&rng) >> 32);
}

/* ---- order ------------------------------------------------------------------------------- */

/* A long random sequence of copies and memsets between overlapping regions, issued on one
 * asynchronous stream, ends as the same sequence run with memmove/memset on the test's own
 * arrays. */
static void test_streams_fifo_order_matches_sequential(void **state) {
    (void)state;
    enum { DEV = 1 << 16, HOST = 1 << 16, OPS = 2000, MAXLEN = 6000 };
    saga_backend *be = cpu_backend();
    saga_stream *s = NULL;
    assert_int_equal(saga_stream_new(&s, be), SAGA_OK);
    unsigned char *dev = NULL, *src = malloc(HOST), *out = malloc(HOST);
    unsigned char *ref_dev = malloc(DEV), *ref_out = malloc(HOST);
    assert_true(src && out && ref_dev && ref_out);
    assert_int_equal(saga_backend_alloc(be, (void **)&dev, DEV), SAGA_OK);
    for (int i = 0; i < HOST; i++)
        src[i] = (unsigned char)rnd_u32();
    memset(dev, 0, DEV);
    memset(ref_dev, 0, DEV);
    memset(out, 0, HOST);
    memset(ref_out, 0, HOST);

    for (int k = 0; k < OPS; k++) {
        size_t n = 1 + rnd_u32() % MAXLEN;
        size_t a = rnd_u32() % (DEV - n), b = rnd_u32() % (DEV - n);
        switch (rnd_u32() % 4) {
        case 0:
            assert_int_equal(saga_memcpy_h2d_async(s, dev + a, src + b, n), SAGA_OK);
            memmove(ref_dev + a, src + b, n);
            break;
        case 1: /* often overlapping: both regions lie in the same 64 KiB */
            assert_int_equal(saga_memcpy_d2d_async(s, dev + a, dev + b, n), SAGA_OK);
            memmove(ref_dev + a, ref_dev + b, n);
            break;
        case 2:
            assert_int_equal(saga_memcpy_d2h_async(s, out + a, dev + b, n), SAGA_OK);
            memmove(ref_out + a, ref_dev + b, n);
            break;
        default: {
            int v = (int)(rnd_u32() & 0xff);
            assert_int_equal(be->iface->memset_async(s, dev + a, v, n), SAGA_OK);
            memset(ref_dev + a, v, n);
            break;
        }
        }
    }
    assert_int_equal(saga_stream_synchronize(s), SAGA_OK);
    assert_memory_equal(dev, ref_dev, DEV);
    assert_memory_equal(out, ref_out, HOST);

    /* host functions on one stream run in issue order, after the copies before them */
    trace t = {0};
    trace_arg args[16];
    for (int i = 0; i < 16; i++) {
        args[i] = (trace_arg){&t, i};
        assert_int_equal(saga_stream_launch_host_fn(s, trace_fn, &args[i]), SAGA_OK);
    }
    assert_int_equal(saga_stream_synchronize(s), SAGA_OK);
    assert_int_equal(atomic_load(&t.n), 16);
    for (int i = 0; i < 16; i++)
        assert_int_equal(atomic_load(&t.order[i]), i);

    saga_stream_free(&s);
    saga_backend_free(be, dev, DEV);
    saga_backend_free_all(&be);
    free(src);
    free(out);
    free(ref_dev);
    free(ref_out);
}

/* ---- asynchrony -------------------------------------------------------------------------- */

/* Issuing returns before the work runs: a host function that waits for the caller does not
 * block the launch, and the copy queued behind it waits for it. */
static void test_streams_issue_returns_before_work_runs(void **state) {
    (void)state;
    saga_backend *be = cpu_backend();
    saga_stream *s = NULL;
    saga_event *e = NULL;
    assert_int_equal(saga_stream_new(&s, be), SAGA_OK);
    assert_int_equal(saga_event_new(&e, be), SAGA_OK);
    enum { N = 4096 };
    unsigned char src[N], dst[N];
    memset(src, 0xab, N);
    memset(dst, 0, N);
    gate g;
    gate_init(&g);

    assert_int_equal(saga_stream_launch_host_fn(s, gate_fn, &g), SAGA_OK);
    assert_int_equal(saga_memcpy_d2h_async(s, dst, src, N), SAGA_OK);
    assert_int_equal(saga_event_record(e, s), SAGA_OK);
    /* all three calls returned while the worker sits in gate_fn */
    assert_true(gate_wait_entered(&g));
    assert_false(gate_get(&g, &g.finished));
    assert_false(saga_event_done(e));
    for (int i = 0; i < N; i++)
        assert_int_equal(dst[i], 0); /* the copy waits behind the host function */
    gate_open(&g);
    assert_int_equal(saga_event_synchronize(e), SAGA_OK);
    assert_true(saga_event_done(e));
    assert_false(gate_get(&g, &g.timed_out));
    assert_memory_equal(dst, src, N);
    assert_int_equal(saga_stream_synchronize(s), SAGA_OK);

    gate_destroy(&g);
    saga_event_free(&e);
    saga_stream_free(&s);
    saga_backend_free_all(&be);
}

/* ---- events ------------------------------------------------------------------------------ */

typedef struct write_arg {
    gate *g;
    unsigned char *buf;
    size_t n;
    unsigned char value;
} write_arg;

/* Waits at the gate, then writes the buffer: a slow producer. */
static void gated_write_fn(void *arg) {
    write_arg *w = arg;
    gate_fn(w->g);
    memset(w->buf, w->value, w->n);
}

/* Stream B waits for an event that stream A records after slow work; B's copy sees A's effect,
 * and a later record of the event elsewhere does not release the wait B already queued. */
static void test_streams_event_orders_two_streams(void **state) {
    (void)state;
    saga_backend *be = cpu_backend();
    saga_stream *a = NULL, *b = NULL;
    saga_event *e = NULL;
    assert_int_equal(saga_stream_new(&a, be), SAGA_OK);
    assert_int_equal(saga_stream_new(&b, be), SAGA_OK);
    assert_int_equal(saga_event_new(&e, be), SAGA_OK);
    enum { N = 1 << 16 };
    unsigned char *src = NULL, *dst = malloc(N);
    assert_non_null(dst);
    assert_int_equal(saga_backend_alloc(be, (void **)&src, N), SAGA_OK);
    memset(src, 1, N);
    memset(dst, 0, N);
    gate g;
    gate_init(&g);
    write_arg w = {&g, src, N, 7};
    atomic_int b_done = 0;

    assert_int_equal(saga_stream_launch_host_fn(a, gated_write_fn, &w), SAGA_OK);
    assert_int_equal(saga_event_record(e, a), SAGA_OK);
    assert_int_equal(saga_stream_wait_event(b, e), SAGA_OK);
    assert_int_equal(saga_memcpy_d2h_async(b, dst, src, N), SAGA_OK);
    assert_int_equal(saga_stream_launch_host_fn(b, set_flag_fn, &b_done), SAGA_OK);

    /* re-recording e on the default stream completes it at once; B still waits for A's point */
    assert_true(gate_wait_entered(&g));
    assert_false(saga_event_done(e));
    assert_int_equal(saga_event_record(e, saga_backend_default_stream(be)), SAGA_OK);
    assert_true(saga_event_done(e));
    sleep_ms(20);
    assert_int_equal(atomic_load(&b_done), 0);

    gate_open(&g);
    assert_int_equal(saga_stream_synchronize(b), SAGA_OK);
    assert_int_equal(atomic_load(&b_done), 1);
    assert_false(gate_get(&g, &g.timed_out));
    for (int i = 0; i < N; i++)
        assert_int_equal(dst[i], 7);

    /* a wait on a complete or never-recorded event passes straight through */
    saga_event *never = NULL;
    assert_int_equal(saga_event_new(&never, be), SAGA_OK);
    assert_int_equal(saga_stream_wait_event(b, never), SAGA_OK);
    assert_int_equal(saga_stream_wait_event(b, e), SAGA_OK);
    assert_int_equal(saga_stream_synchronize(b), SAGA_OK);

    gate_destroy(&g);
    saga_event_free(&never);
    saga_event_free(&e);
    saga_stream_free(&a);
    saga_stream_free(&b);
    saga_backend_free(be, src, N);
    saga_backend_free_all(&be);
    free(dst);
}

/* On the synchronous default stream a wait blocks the caller until the event completes. */
static void test_streams_default_stream_wait_blocks(void **state) {
    (void)state;
    saga_backend *be = cpu_backend();
    saga_stream *a = NULL;
    saga_event *e = NULL, *never = NULL;
    assert_int_equal(saga_stream_new(&a, be), SAGA_OK);
    assert_int_equal(saga_event_new(&e, be), SAGA_OK);
    assert_int_equal(saga_event_new(&never, be), SAGA_OK);

    /* never recorded: done, and waiting for it returns at once */
    assert_true(saga_event_done(never));
    assert_int_equal(saga_event_synchronize(never), SAGA_OK);
    assert_int_equal(saga_stream_wait_event(saga_backend_default_stream(be), never), SAGA_OK);

    gate g;
    gate_init(&g);
    assert_int_equal(saga_stream_launch_host_fn(a, gate_fn, &g), SAGA_OK);
    assert_int_equal(saga_event_record(e, a), SAGA_OK);
    assert_true(gate_wait_entered(&g));
    assert_false(saga_event_done(e));

    opener o;
    opener_start(&o, &g, 50);
    double t0 = now_s();
    assert_int_equal(saga_stream_wait_event(saga_backend_default_stream(be), e), SAGA_OK);
    double waited = now_s() - t0;
    /* it returned only after the gate opened and the worker passed the record */
    assert_true(gate_get(&g, &g.finished));
    assert_true(saga_event_done(e));
    assert_true(waited >= 0.04);
    opener_join(&o);
    assert_false(gate_get(&g, &g.timed_out));

    /* recorded on the default stream: complete at once */
    assert_int_equal(saga_event_record(never, saga_backend_default_stream(be)), SAGA_OK);
    assert_true(saga_event_done(never));

    gate_destroy(&g);
    saga_event_free(&e);
    saga_event_free(&never);
    saga_stream_free(&a);
    saga_backend_free_all(&be);
}

/* A kernel issued on an asynchronous stream runs on the caller once the copies queued before it
 * have run. */
static void test_streams_kernel_after_queued_copy(void **state) {
    (void)state;
    enum { N = 50000 };
    saga_backend *be = cpu_backend();
    saga_stream *s = NULL;
    assert_int_equal(saga_stream_new(&s, be), SAGA_OK);
    double *host = malloc(N * sizeof *host), *x = NULL, *y = NULL;
    assert_non_null(host);
    for (int i = 0; i < N; i++)
        host[i] = i * 0.5;
    assert_int_equal(saga_backend_alloc(be, (void **)&x, N * sizeof *x), SAGA_OK);
    assert_int_equal(saga_backend_alloc(be, (void **)&y, N * sizeof *y), SAGA_OK);
    memset(x, 0, N * sizeof *x);

    gate g;
    gate_init(&g);
    assert_int_equal(saga_stream_launch_host_fn(s, gate_fn, &g), SAGA_OK);
    assert_int_equal(saga_memcpy_h2d_async(s, x, host, N * sizeof *x), SAGA_OK);
    opener o;
    opener_start(&o, &g, 30);
    /* blocks until the gate opens and the copy is done, then computes y = 3 x */
    assert_int_equal(be->kernels->axpby_f64(s, N, 3.0, x, 0.0, y), SAGA_OK);
    opener_join(&o);
    for (int i = 0; i < N; i++)
        assert_true(y[i] == 3.0 * (i * 0.5));
    assert_false(gate_get(&g, &g.timed_out));

    gate_destroy(&g);
    saga_stream_free(&s);
    saga_backend_free(be, x, N * sizeof *x);
    saga_backend_free(be, y, N * sizeof *y);
    saga_backend_free_all(&be);
    free(host);
}

/* The prefetch pattern of a block scheduler: a copy stream uploads chunk i + 1 into one of two
 * staging buffers while the caller computes on chunk i, each side waiting for the other's event
 * before it reuses a buffer. */
static void test_streams_double_buffered_pipeline(void **state) {
    (void)state;
    enum { CHUNKS = 40, LEN = 20000 };
    saga_backend *be = cpu_backend();
    saga_stream *copy = NULL, *def = saga_backend_default_stream(be);
    saga_event *ready[2] = {NULL, NULL}, *consumed[2] = {NULL, NULL};
    assert_int_equal(saga_stream_new(&copy, be), SAGA_OK);
    double *host = malloc((size_t)CHUNKS * LEN * sizeof *host), *stage[2] = {NULL, NULL};
    double *acc = NULL;
    assert_non_null(host);
    for (int b = 0; b < 2; b++) {
        assert_int_equal(saga_event_new(&ready[b], be), SAGA_OK);
        assert_int_equal(saga_event_new(&consumed[b], be), SAGA_OK);
        assert_int_equal(saga_backend_alloc(be, (void **)&stage[b], LEN * sizeof(double)), SAGA_OK);
    }
    assert_int_equal(saga_backend_alloc(be, (void **)&acc, LEN * sizeof(double)), SAGA_OK);
    for (size_t i = 0; i < (size_t)CHUNKS * LEN; i++)
        host[i] = (double)(rnd_u32() % 1000) - 500.0;
    assert_int_equal(be->kernels->fill_f64(def, acc, LEN, 0.0), SAGA_OK);

    for (int c = 0; c <= CHUNKS; c++) {
        if (c < CHUNKS) { /* prefetch chunk c into buffer c % 2 once chunk c - 2 is consumed */
            int b = c % 2;
            assert_int_equal(saga_stream_wait_event(copy, consumed[b]), SAGA_OK);
            assert_int_equal(
                saga_memcpy_h2d_async(copy, stage[b], host + (size_t)c * LEN, LEN * sizeof(double)),
                SAGA_OK);
            assert_int_equal(saga_event_record(ready[b], copy), SAGA_OK);
        }
        if (c > 0) { /* compute on chunk c - 1 */
            int b = (c - 1) % 2;
            assert_int_equal(saga_stream_wait_event(def, ready[b]), SAGA_OK);
            assert_int_equal(be->kernels->axpby_f64(def, LEN, (double)c, stage[b], 1.0, acc),
                             SAGA_OK);
            assert_int_equal(saga_event_record(consumed[b], def), SAGA_OK);
        }
    }
    assert_int_equal(saga_backend_synchronize(be), SAGA_OK);
    for (int j = 0; j < LEN; j++) {
        double ref = 0.0;
        for (int c = 0; c < CHUNKS; c++)
            ref += (double)(c + 1) * host[(size_t)c * LEN + j];
        assert_true(acc[j] == ref); /* small integers: exact in any order */
    }

    for (int b = 0; b < 2; b++) {
        saga_event_free(&ready[b]);
        saga_event_free(&consumed[b]);
        saga_backend_free(be, stage[b], LEN * sizeof(double));
    }
    saga_backend_free(be, acc, LEN * sizeof(double));
    saga_stream_free(&copy);
    saga_backend_free_all(&be);
    free(host);
}

/* ---- timing ------------------------------------------------------------------------------ */

static void test_streams_event_elapsed(void **state) {
    (void)state;
    saga_backend *be = cpu_backend();
    saga_stream *s = NULL;
    saga_event *start = NULL, *end = NULL, *never = NULL;
    assert_int_equal(saga_stream_new(&s, be), SAGA_OK);
    assert_int_equal(saga_event_new(&start, be), SAGA_OK);
    assert_int_equal(saga_event_new(&end, be), SAGA_OK);
    assert_int_equal(saga_event_new(&never, be), SAGA_OK);
    double secs = -1.0;

    /* a 20 ms host function between two records on an asynchronous stream */
    int ms = 20;
    double t0 = now_s();
    assert_int_equal(saga_event_record(start, s), SAGA_OK);
    assert_int_equal(saga_stream_launch_host_fn(s, sleep_fn, &ms), SAGA_OK);
    assert_int_equal(saga_event_record(end, s), SAGA_OK);
    assert_int_equal(saga_event_synchronize(end), SAGA_OK);
    double wall = now_s() - t0;
    assert_int_equal(saga_event_elapsed(start, end, &secs), SAGA_OK);
    assert_true(secs >= 0.019);
    assert_true(secs <= wall);
    assert_int_equal(saga_event_elapsed(end, start, &secs), SAGA_OK);
    assert_true(secs <= -0.019);

    /* on the default stream the caller's own time counts */
    saga_stream *def = saga_backend_default_stream(be);
    assert_int_equal(saga_event_record(start, def), SAGA_OK);
    sleep_ms(20);
    assert_int_equal(saga_event_record(end, def), SAGA_OK);
    assert_int_equal(saga_event_elapsed(start, end, &secs), SAGA_OK);
    assert_true(secs >= 0.019);

    /* not recorded, not complete: named in the error, *seconds untouched */
    secs = 123.0;
    assert_int_equal(saga_event_elapsed(never, end, &secs), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("start event", "never recorded", NULL);
    assert_int_equal(saga_event_elapsed(start, never, &secs), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("end event", "never recorded", NULL);
    gate g;
    gate_init(&g);
    assert_int_equal(saga_stream_launch_host_fn(s, gate_fn, &g), SAGA_OK);
    assert_int_equal(saga_event_record(end, s), SAGA_OK);
    assert_int_equal(saga_event_elapsed(start, end, &secs), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("end event", "not completed", NULL);
    assert_true(secs == 123.0);
    gate_open(&g);
    assert_int_equal(saga_stream_synchronize(s), SAGA_OK);
    assert_int_equal(saga_event_elapsed(start, end, &secs), SAGA_OK);
    assert_true(secs >= 0.0);
    assert_int_equal(saga_event_elapsed(NULL, end, &secs), SAGA_ERR_INVALID_ARG);
    assert_int_equal(saga_event_elapsed(start, end, NULL), SAGA_ERR_INVALID_ARG);

    gate_destroy(&g);
    saga_event_free(&start);
    saga_event_free(&end);
    saga_event_free(&never);
    saga_stream_free(&s);
    saga_backend_free_all(&be);
}

/* copy_seconds: the time inside copies, on every stream, never more than the wall time they
 * took; reset to 0. */
static void test_streams_copy_seconds(void **state) {
    (void)state;
    enum { N = 32 << 20, REPS = 4 };
    saga_backend *be = cpu_backend();
    saga_stream *s = NULL;
    assert_int_equal(saga_stream_new(&s, be), SAGA_OK);
    unsigned char *host = malloc(N), *dev = NULL;
    assert_non_null(host);
    memset(host, 3, N);
    assert_int_equal(saga_backend_alloc(be, (void **)&dev, N), SAGA_OK);
    memset(dev, 0, N); /* first touch outside the timed copies */
    saga_backend_stats st;
    saga_backend_reset_stats(be);
    saga_backend_get_stats(be, &st);
    assert_true(st.copy_seconds == 0.0);

    double t0 = now_s();
    for (int r = 0; r < REPS; r++)
        assert_int_equal(saga_memcpy_h2d_async(s, dev, host, N), SAGA_OK);
    assert_int_equal(saga_stream_synchronize(s), SAGA_OK);
    double wall = now_s() - t0;
    saga_backend_get_stats(be, &st);
    double after_async = st.copy_seconds;
    assert_true(after_async > 0.0);
    assert_true(after_async <= wall);
    assert_int_equal(st.h2d_bytes, (uint64_t)REPS * N);

    /* the default stream and memsets count too */
    assert_int_equal(saga_memcpy_d2h_async(saga_backend_default_stream(be), host, dev, N), SAGA_OK);
    saga_backend_get_stats(be, &st);
    assert_true(st.copy_seconds > after_async);
    double before_set = st.copy_seconds;
    assert_int_equal(be->iface->memset_async(s, dev, 0, N), SAGA_OK);
    assert_int_equal(saga_stream_synchronize(s), SAGA_OK);
    saga_backend_get_stats(be, &st);
    assert_true(st.copy_seconds > before_set);

    saga_backend_reset_stats(be);
    saga_backend_get_stats(be, &st);
    assert_true(st.copy_seconds == 0.0);
    assert_int_equal(st.h2d_bytes, 0);

    saga_stream_free(&s);
    saga_backend_free(be, dev, N);
    saga_backend_free_all(&be);
    free(host);
}

/* ---- draining ---------------------------------------------------------------------------- */

static void test_streams_free_and_backend_synchronize_drain(void **state) {
    (void)state;
    enum { N = 1 << 20 };
    saga_backend *be = cpu_backend();
    unsigned char *src = malloc(N), *dst[3] = {malloc(N), malloc(N), malloc(N)};
    assert_true(src && dst[0] && dst[1] && dst[2]);
    memset(src, 9, N);
    int ms = 30;

    /* freeing a stream with pending work runs that work first */
    saga_stream *s = NULL;
    assert_int_equal(saga_stream_new(&s, be), SAGA_OK);
    memset(dst[0], 0, N);
    atomic_int flag = 0;
    assert_int_equal(saga_stream_launch_host_fn(s, sleep_fn, &ms), SAGA_OK);
    assert_int_equal(saga_memcpy_d2h_async(s, dst[0], src, N), SAGA_OK);
    assert_int_equal(saga_stream_launch_host_fn(s, set_flag_fn, &flag), SAGA_OK);
    saga_stream_free(&s);
    assert_null(s);
    assert_int_equal(atomic_load(&flag), 1);
    assert_memory_equal(dst[0], src, N);

    /* backend synchronize waits for every stream */
    saga_stream *ss[3] = {NULL, NULL, NULL};
    atomic_int flags[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(saga_stream_new(&ss[i], be), SAGA_OK);
        memset(dst[i], 0, N);
        assert_int_equal(saga_stream_launch_host_fn(ss[i], sleep_fn, &ms), SAGA_OK);
        assert_int_equal(saga_memcpy_d2h_async(ss[i], dst[i], src, N), SAGA_OK);
        assert_int_equal(saga_stream_launch_host_fn(ss[i], set_flag_fn, &flags[i]), SAGA_OK);
    }
    saga_stream *idle = NULL; /* a stream that never carried work */
    assert_int_equal(saga_stream_new(&idle, be), SAGA_OK);
    assert_int_equal(saga_backend_synchronize(be), SAGA_OK);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(atomic_load(&flags[i]), 1);
        assert_memory_equal(dst[i], src, N);
    }
    assert_int_equal(saga_stream_synchronize(idle), SAGA_OK);
    saga_stream_free(&idle);
    for (int i = 0; i < 3; i++)
        saga_stream_free(&ss[i]);
    saga_backend_free_all(&be);
    free(src);
    for (int i = 0; i < 3; i++)
        free(dst[i]);
}

/* ---- failures ---------------------------------------------------------------------------- */

/* Fails the 1st, 2nd, ... allocation of a stream's first operations: each failure is
 * SAGA_ERR_OUT_OF_MEMORY with nothing queued, and the stream works afterwards. A gate holds the
 * worker at the first operation, so no node has run and been recycled while the others are
 * issued, and the count of allocations is fixed. */
static void test_streams_issue_fails_cleanly_on_alloc_failure(void **state) {
    (void)state;
    enum { N = 256 };
    unsigned char src[N], dst[N];
    memset(src, 5, N);
    int failures = 0;
    for (long k = 1; k < 50; k++) {
        saga_backend *be = cpu_backend();
        saga_stream *s = NULL;
        saga_event *e = NULL;
        assert_int_equal(saga_stream_new(&s, be), SAGA_OK);
        assert_int_equal(saga_event_new(&e, be), SAGA_OK);
        memset(dst, 0, N);
        atomic_int flag = 0;
        gate g;
        gate_init(&g);
        saga_test_fail_alloc_after(k);
        saga_status st = saga_stream_launch_host_fn(s, gate_fn, &g);
        if (st == SAGA_OK)
            st = saga_memcpy_d2h_async(s, dst, src, N);
        if (st == SAGA_OK)
            st = saga_event_record(e, s);
        if (st == SAGA_OK)
            st = saga_stream_launch_host_fn(s, set_flag_fn, &flag);
        saga_test_fail_alloc_after(0);
        gate_open(&g);
        assert_int_equal(saga_stream_synchronize(s), SAGA_OK);
        assert_false(g.timed_out);
        if (st == SAGA_OK) {
            assert_memory_equal(dst, src, N);
            assert_int_equal(atomic_load(&flag), 1);
            assert_true(saga_event_done(e));
        } else {
            failures++;
            assert_int_equal(st, SAGA_ERR_OUT_OF_MEMORY);
            assert_true(strlen(saga_last_error()) > 0);
            assert_int_equal(atomic_load(&flag), 0); /* the host fn was never queued */
            /* the stream still works */
            assert_int_equal(saga_stream_launch_host_fn(s, set_flag_fn, &flag), SAGA_OK);
            assert_int_equal(saga_stream_synchronize(s), SAGA_OK);
            assert_int_equal(atomic_load(&flag), 1);
        }
        gate_destroy(&g);
        saga_event_free(&e);
        saga_stream_free(&s);
        saga_backend_free_all(&be);
        if (st == SAGA_OK)
            break;
    }
    /* the context, the stream's queue and thread, the gate, the copy, the record's node and
     * mark, the host function */
    assert_int_equal(failures, 7);
}

/* ---- generic fallbacks ------------------------------------------------------------------- */

typedef struct read_arg {
    const unsigned char *buf;
    size_t n;
    unsigned char want;
    atomic_int ok; /* 1: every byte was `want` when fn ran, -1: not */
} read_arg;

static void check_fn(void *arg) {
    read_arg *r = arg;
    int ok = 1;
    for (size_t i = 0; i < r->n; i++)
        if (r->buf[i] != r->want)
            ok = -1;
    atomic_store(&r->ok, ok);
}

/* On the default stream fn runs before the launch returns. Without the backend slot the generic
 * layer synchronizes the stream and runs fn on the caller, after the work queued before; without
 * event_elapsed, timing is unsupported. */
static void test_streams_host_fn_default_and_fallback(void **state) {
    (void)state;
    enum { N = 1 << 20 };
    saga_backend *be = cpu_backend();
    atomic_int flag = 0;
    assert_int_equal(
        saga_stream_launch_host_fn(saga_backend_default_stream(be), set_flag_fn, &flag), SAGA_OK);
    assert_int_equal(atomic_load(&flag), 1);
    assert_int_equal(saga_stream_launch_host_fn(NULL, set_flag_fn, &flag), SAGA_ERR_INVALID_ARG);
    assert_int_equal(saga_stream_launch_host_fn(saga_backend_default_stream(be), NULL, &flag),
                     SAGA_ERR_INVALID_ARG);

    saga_backend_iface without = *be->iface;
    without.launch_host_fn = NULL;
    without.event_elapsed = NULL;
    const saga_backend_iface *with = be->iface;
    be->iface = &without;

    saga_stream *s = NULL;
    assert_int_equal(saga_stream_new(&s, be), SAGA_OK);
    unsigned char *src = malloc(N), *dst = malloc(N);
    assert_true(src && dst);
    memset(src, 4, N);
    memset(dst, 0, N);
    int ms = 20;
    /* the slow copy is still queued when the fallback starts: it must synchronize first */
    assert_int_equal(with->launch_host_fn(s, sleep_fn, &ms), SAGA_OK);
    assert_int_equal(saga_memcpy_d2h_async(s, dst, src, N), SAGA_OK);
    read_arg r = {dst, N, 4, 0};
    assert_int_equal(saga_stream_launch_host_fn(s, check_fn, &r), SAGA_OK);
    assert_int_equal(atomic_load(&r.ok), 1); /* ran before the launch returned, after the copy */

    saga_event *a = NULL, *b = NULL;
    assert_int_equal(saga_event_new(&a, be), SAGA_OK);
    assert_int_equal(saga_event_new(&b, be), SAGA_OK);
    assert_int_equal(saga_event_record(a, s), SAGA_OK);
    assert_int_equal(saga_event_record(b, s), SAGA_OK);
    assert_int_equal(saga_event_synchronize(b), SAGA_OK);
    double secs = 0.0;
    assert_int_equal(saga_event_elapsed(a, b, &secs), SAGA_ERR_UNSUPPORTED);
    saga_test_assert_error_contains("does not time events", NULL);

    saga_event_free(&a);
    saga_event_free(&b);
    saga_stream_free(&s);
    be->iface = with;
    saga_backend_free_all(&be);
    free(src);
    free(dst);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_streams_fifo_order_matches_sequential),
        cmocka_unit_test(test_streams_issue_returns_before_work_runs),
        cmocka_unit_test(test_streams_event_orders_two_streams),
        cmocka_unit_test(test_streams_default_stream_wait_blocks),
        cmocka_unit_test(test_streams_kernel_after_queued_copy),
        cmocka_unit_test(test_streams_double_buffered_pipeline),
        cmocka_unit_test(test_streams_event_elapsed),
        cmocka_unit_test(test_streams_copy_seconds),
        cmocka_unit_test(test_streams_free_and_backend_synchronize_drain),
        cmocka_unit_test(test_streams_issue_fails_cleanly_on_alloc_failure),
        cmocka_unit_test(test_streams_host_fn_default_and_fallback),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
