/* test_sched.c - the block scheduler's SAGA_BLK_STATE life: a block changed on the device stays
 * resident across plans without moving, is written back when evicted after its last use in a
 * plan (where a SAGA_BLK_INPUT block would be dropped), and saga_sched_download brings it to the
 * host; a step that overwrites a block waits for the block's write-back still in flight; the
 * trace writes one line per copy and per step's compute; a block can be freed between plans, and
 * one prefetched can be given back under pressure; a step may be given a cap of its own. Checked
 * against values computed here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"

#include "sched_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { N = 256 }; /* floats per block */

/* Where the scheduler's copies run: every test runs with both (main). */
static saga_copies copies = SAGA_COPIES_WORKER;

static saga_backend *open_cpu(void) {
    saga_backend *be = NULL;
    saga_backend_params bp = saga_backend_params_defaults();
    bp.copies = copies;
    assert_int_equal(saga_backend_cpu_new(&be, &bp), SAGA_OK);
    return be;
}

/* One step that doubles b on the device. */
static void run_double(saga_sched *s, saga_backend *be, int t, saga_blk *b) {
    assert_int_equal(saga_sched_begin(s, t), SAGA_OK);
    float *d = saga_blk_dev(b);
    assert_non_null(d);
    assert_int_equal(be->kernels->scale_f32(saga_backend_default_stream(be), N, 2.0f, d, 0.0f, d),
                     SAGA_OK);
    assert_int_equal(saga_sched_end(s, t), SAGA_OK);
}

/* Changed on the device in one plan, evicted in the next one after its last use there: the
 * host copy gets the change. */
static void test_sched_state_written_back_on_eviction(void **state) {
    (void)state;
    saga_backend *be = open_cpu();
    saga_sched *s = NULL;
    size_t bytes = N * sizeof(float);
    assert_int_equal(saga_sched_new(&s, be, 2 * bytes, NULL, NULL), SAGA_OK);
    float a[N], x[N], y[N];
    for (int i = 0; i < N; i++)
        a[i] = (float)i, x[i] = 1.0f, y[i] = -1.0f;
    saga_blk *A = saga_sched_block(s, bytes, SAGA_BLK_STATE, "state");
    saga_blk *X = saga_sched_block(s, bytes, SAGA_BLK_INPUT, "x");
    saga_blk *Y = saga_sched_block(s, bytes, SAGA_BLK_INPUT, "y");
    assert_true(A && X && Y);
    saga_blk_set_host(A, a);
    saga_blk_set_host(X, x);
    saga_blk_set_host(Y, y);

    saga_sched_plan_begin(s);
    int t = saga_sched_step(s);
    saga_sched_use(s, t, A, SAGA_USE_RW, 0);
    assert_int_equal(saga_sched_plan_end(s), SAGA_OK);
    run_double(s, be, 0, A);
    assert_int_equal(saga_sched_finish(s), SAGA_OK);
    assert_true(a[3] == 3.0f); /* only the device copy changed */

    /* the next plan uses A first, then X and Y together: they evict A */
    saga_sched_plan_begin(s);
    t = saga_sched_step(s);
    saga_sched_use(s, t, A, SAGA_USE_RW, 0);
    t = saga_sched_step(s);
    saga_sched_use(s, t, X, SAGA_USE_READ, 0);
    saga_sched_use(s, t, Y, SAGA_USE_READ, 0);
    assert_int_equal(saga_sched_plan_end(s), SAGA_OK);
    run_double(s, be, 0, A);
    assert_int_equal(saga_sched_begin(s, 1), SAGA_OK);
    assert_int_equal(saga_sched_end(s, 1), SAGA_OK);
    assert_int_equal(saga_sched_finish(s), SAGA_OK);
    for (int i = 0; i < N; i++)
        assert_true(a[i] == 4.0f * (float)i);
    saga_sched_stats st;
    saga_sched_get_stats(s, &st);
    assert_int_equal(st.writebacks, 1);
    assert_int_equal(st.evictions, 1);
    saga_sched_free(&s);
    assert_null(s);
    saga_backend_free_all(&be);
}

/* With room for it, a state block is loaded once, changed by every plan without moving, and
 * saga_sched_download gives the host the latest content. */
static void test_sched_state_stays_resident(void **state) {
    (void)state;
    saga_backend *be = open_cpu();
    saga_sched *s = NULL;
    size_t bytes = N * sizeof(float);
    assert_int_equal(saga_sched_new(&s, be, 4 * bytes, NULL, NULL), SAGA_OK);
    float a[N];
    for (int i = 0; i < N; i++)
        a[i] = 1.0f + (float)i;
    saga_blk *A = saga_sched_block(s, bytes, SAGA_BLK_STATE, "state");
    assert_non_null(A);
    saga_blk_set_host(A, a);
    for (int plan = 0; plan < 3; plan++) {
        saga_sched_plan_begin(s);
        int t = saga_sched_step(s);
        saga_sched_use(s, t, A, SAGA_USE_RW, 0);
        assert_int_equal(saga_sched_plan_end(s), SAGA_OK);
        run_double(s, be, 0, A);
        assert_int_equal(saga_sched_finish(s), SAGA_OK);
    }
    saga_sched_stats st;
    saga_sched_get_stats(s, &st);
    assert_int_equal(st.loads, 1);
    assert_int_equal(st.h2d_bytes, bytes);
    assert_int_equal(st.d2h_bytes, 0);
    assert_true(a[1] == 2.0f);
    assert_int_equal(saga_sched_download(s, A), SAGA_OK);
    for (int i = 0; i < N; i++)
        assert_true(a[i] == 8.0f * (1.0f + (float)i));
    assert_int_equal(saga_sched_resident_bytes(s), bytes);
    saga_sched_free(&s);
    saga_backend_free_all(&be);
}

/* A step may hold more blocks than the cap when it is given a cap of its own
 * (saga_sched_step_cap), and only that step: one below the scheduler's cap is ignored, a plan
 * whose step needs more than its cap is refused, and the step after it evicts back under the
 * scheduler's cap. */
static void test_sched_step_cap(void **state) {
    (void)state;
    saga_backend *be = open_cpu();
    saga_sched *s = NULL;
    const size_t bytes = N * sizeof(float);
    assert_int_equal(saga_sched_new(&s, be, 2 * bytes, NULL, NULL), SAGA_OK);
    static float h[4][N];
    saga_blk *b[4];
    for (int i = 0; i < 4; i++) {
        for (int j = 0; j < N; j++)
            h[i][j] = (float)(i * N + j);
        assert_non_null(b[i] = saga_sched_block(s, bytes, SAGA_BLK_INPUT, "x"));
        saga_blk_set_host(b[i], h[i]);
    }
    /* step 1 reads three blocks, steps 0 and 2 one each */
    for (int round = 0; round < 3; round++) {
        saga_sched_plan_begin(s);
        int t0 = saga_sched_step(s);
        saga_sched_use(s, t0, b[0], SAGA_USE_READ, 0);
        int t1 = saga_sched_step(s);
        for (int i = 1; i < 4; i++)
            saga_sched_use(s, t1, b[i], SAGA_USE_READ, 0);
        int t2 = saga_sched_step(s);
        saga_sched_use(s, t2, b[0], SAGA_USE_READ, 0);
        if (round == 0) {
            assert_int_equal(saga_sched_plan_end(s), SAGA_ERR_BUDGET);
            continue;
        }
        saga_sched_step_cap(s, t1, round == 1 ? bytes : 3 * bytes);
        if (round == 1) { /* below the scheduler's cap: ignored */
            assert_int_equal(saga_sched_plan_end(s), SAGA_ERR_BUDGET);
            continue;
        }
        assert_int_equal(saga_sched_plan_end(s), SAGA_OK);
        for (int t = 0; t < 3; t++) {
            assert_int_equal(saga_sched_begin(s, t), SAGA_OK);
            const int first = t == 1 ? 1 : 0, last = t == 1 ? 3 : 0;
            for (int i = first; i <= last; i++)
                assert_true(((const float *)saga_blk_dev(b[i]))[5] == (float)(i * N + 5));
            if (t == 2)
                assert_true(saga_sched_resident_bytes(s) <= 2 * bytes);
            assert_int_equal(saga_sched_end(s, t), SAGA_OK);
        }
        assert_int_equal(saga_sched_finish(s), SAGA_OK);
    }
    saga_sched_stats st;
    saga_sched_get_stats(s, &st);
    assert_int_equal(st.peak_bytes, 3 * bytes);
    saga_sched_free(&s);
    saga_backend_free_all(&be);
}

static void sleep_fn(void *arg) {
    int ms = *(const int *)arg;
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* A CPU backend, a stream beside its default one with an event for it, and a scheduler without
 * a cap: what the tests of content another stream makes start from. */
typedef struct other_stream {
    saga_backend *be;
    saga_stream *other;
    saga_event *ev;
    saga_sched *s;
} other_stream;

static other_stream other_stream_open(void) {
    other_stream f = {.be = open_cpu()};
    assert_int_equal(saga_stream_new(&f.other, f.be), SAGA_OK);
    assert_int_equal(saga_event_new(&f.ev, f.be), SAGA_OK);
    assert_int_equal(saga_sched_new(&f.s, f.be, 0, NULL, NULL), SAGA_OK);
    return f;
}

static void other_stream_close(other_stream *f) {
    saga_sched_free(&f->s);
    saga_event_free(&f->ev);
    saga_stream_free(&f->other);
    saga_backend_free_all(&f->be);
}

/* A step writes a block whose write-back (asked for by the step before) is still queued on the
 * copy stream, as the dense pipeline's activation ring slots are: the host copy must get the
 * content the write-back was issued for, whole, and not the next step's. The copy stream is held
 * back by a load that waits for another stream's event (saga_blk_host_changed_after, as a
 * pipeline stage's input waits for its neighbour's copy), itself behind a host function that
 * sleeps there. */
static void test_sched_write_waits_for_writeback(void **state) {
    (void)state;
    other_stream f = other_stream_open();
    saga_backend *be = f.be;
    saga_stream *ds = saga_backend_default_stream(be), *other = f.other;
    saga_event *ev = f.ev;
    saga_sched *s = f.s;
    size_t bytes = N * sizeof(float);
    float h[N], hb[N];
    for (int i = 0; i < N; i++) {
        h[i] = -1.0f;
        hb[i] = 0.0f;
    }
    saga_blk *A = saga_sched_block(s, bytes, SAGA_BLK_TEMP, "ring slot");
    saga_blk *B = saga_sched_block(s, bytes, SAGA_BLK_TEMP, "neighbour's content");
    assert_non_null(A);
    assert_non_null(B);
    saga_blk_set_host(A, h);
    saga_blk_set_host(B, hb);

    saga_sched_plan_begin(s);
    int t = saga_sched_step(s);
    saga_sched_use(s, t, A, SAGA_USE_WRITE, SAGA_USE_WRITEBACK);
    t = saga_sched_step(s);
    saga_sched_use(s, t, A, SAGA_USE_WRITE, 0);
    saga_sched_use(s, t, B, SAGA_USE_READ, 0);
    assert_int_equal(saga_sched_plan_end(s), SAGA_OK);

    /* B's content is there once the other stream passes a 100 ms sleep; B is step 1's, so its
     * load is queued on the copy stream while step 0 runs, before step 0's write-back of A */
    int ms = 100;
    assert_int_equal(saga_stream_launch_host_fn(other, sleep_fn, &ms), SAGA_OK);
    assert_int_equal(saga_event_record(ev, other), SAGA_OK);
    saga_blk_host_changed_after(B, ev);
    assert_int_equal(saga_sched_begin(s, 0), SAGA_OK);
    assert_int_equal(be->kernels->fill_f32(ds, saga_blk_dev(A), N, 1.0f), SAGA_OK);
    assert_int_equal(saga_sched_end(s, 0), SAGA_OK);
    assert_int_equal(saga_sched_begin(s, 1), SAGA_OK);
    assert_int_equal(be->kernels->fill_f32(ds, saga_blk_dev(A), N, 2.0f), SAGA_OK);
    assert_int_equal(saga_sched_end(s, 1), SAGA_OK);
    assert_int_equal(saga_sched_finish(s), SAGA_OK);
    for (int i = 0; i < N; i++)
        if (h[i] != 1.0f)
            fail_msg("host copy [%d] = %g after the write-back of 1s (step 1 wrote 2s)", i,
                     (double)h[i]);
    saga_sched_stats st;
    saga_sched_get_stats(s, &st);
    assert_int_equal(st.writebacks, 1);
    assert_int_equal(st.loads, 1);
    other_stream_close(&f);
}

/* A block whose host content another stream writes (saga_blk_host_changed_after): its load waits
 * for that stream's event, so it reads what the stream wrote, not what was there before. */
static void write_ones(void *arg) {
    float *h = arg;
    struct timespec ts = {0, 50 * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
    for (int i = 0; i < N; i++)
        h[i] = 1.0f;
}

static void test_sched_load_waits_for_event(void **state) {
    (void)state;
    other_stream f = other_stream_open();
    saga_backend *be = f.be;
    saga_stream *other = f.other;
    saga_event *ev = f.ev;
    saga_sched *s = f.s;
    size_t bytes = N * sizeof(float);
    float h[N], out[N];
    for (int i = 0; i < N; i++)
        h[i] = -1.0f;
    saga_blk *X = saga_sched_block(s, bytes, SAGA_BLK_INPUT, "neighbour's content");
    assert_non_null(X);
    saga_blk_set_host(X, h);
    saga_sched_plan_begin(s);
    int t = saga_sched_step(s);
    saga_sched_use(s, t, X, SAGA_USE_READ, 0);
    assert_int_equal(saga_sched_plan_end(s), SAGA_OK);
    assert_int_equal(saga_stream_launch_host_fn(other, write_ones, h), SAGA_OK);
    assert_int_equal(saga_event_record(ev, other), SAGA_OK);
    saga_blk_host_changed_after(X, ev);
    assert_int_equal(saga_sched_begin(s, 0), SAGA_OK);
    saga_stream *ds = saga_backend_default_stream(be);
    assert_int_equal(saga_memcpy_d2h_async(ds, out, saga_blk_dev(X), bytes), SAGA_OK);
    assert_int_equal(saga_stream_synchronize(ds), SAGA_OK);
    assert_int_equal(saga_sched_end(s, 0), SAGA_OK);
    assert_int_equal(saga_sched_finish(s), SAGA_OK);
    for (int i = 0; i < N; i++)
        if (out[i] != 1.0f)
            fail_msg("device copy [%d] = %g: the load did not wait for the event", i,
                     (double)out[i]);
    other_stream_close(&f);
}

/* The trace: one line per load and write-back and one per step's compute, each interval stamped
 * in order on its stream, written at saga_sched_finish; nothing without a trace. */
static void test_sched_trace_lines(void **state) {
    (void)state;
    saga_backend *be = open_cpu();
    saga_stream *ds = saga_backend_default_stream(be);
    saga_sched *s = NULL;
    size_t bytes = N * sizeof(float);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(saga_sched_new(&s, be, 0, NULL, NULL), SAGA_OK);
    saga_sched_set_trace(s, f);
    float hx[N], hy[N];
    for (int i = 0; i < N; i++)
        hx[i] = 1.0f;
    saga_blk *X = saga_sched_block(s, bytes, SAGA_BLK_INPUT, "features");
    saga_blk *Y = saga_sched_block(s, bytes, SAGA_BLK_TEMP, "result");
    saga_blk_set_host(X, hx);
    saga_blk_set_host(Y, hy);
    saga_sched_plan_begin(s);
    int t = saga_sched_step(s);
    saga_sched_use(s, t, X, SAGA_USE_READ, 0);
    t = saga_sched_step(s);
    saga_sched_use(s, t, X, SAGA_USE_READ, 0);
    saga_sched_use(s, t, Y, SAGA_USE_WRITE, SAGA_USE_WRITEBACK);
    assert_int_equal(saga_sched_plan_end(s), SAGA_OK);
    for (t = 0; t < 2; t++) {
        assert_int_equal(saga_sched_begin(s, t), SAGA_OK);
        if (t == 1)
            assert_int_equal(
                be->kernels->scale_f32(ds, N, 3.0f, saga_blk_dev(X), 0.0f, saga_blk_dev(Y)),
                SAGA_OK);
        assert_int_equal(saga_sched_end(s, t), SAGA_OK);
    }
    assert_int_equal(saga_sched_finish(s), SAGA_OK);
    fflush(f);
    assert_true(hy[0] == 3.0f);
    /* h2d of features for step 0, compute 0, compute 1, d2h of result in step 1 */
    const char *want[4][3] = {
        {"\"trace\":\"copy\"", "\"dir\":\"h2d\",\"block\":\"features\"", "\"plan\":1,\"step\":0,"},
        {"\"trace\":\"compute\"", "\"stream\":\"compute\"", "\"plan\":1,\"step\":0,"},
        {"\"trace\":\"compute\"", "\"stream\":\"compute\"", "\"plan\":1,\"step\":1,"},
        {"\"trace\":\"copy\"", "\"dir\":\"d2h\",\"block\":\"result\"", "\"plan\":1,\"step\":1,"}};
    int n = 0;
    double prev_compute_end = -1;
    for (char *line = buf, *nl; line && *line; line = nl ? nl + 1 : NULL, n++) {
        nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        if (n >= 4)
            fail_msg("more than 4 trace lines: '%s'", line);
        for (int k = 0; k < 3; k++)
            if (!strstr(line, want[n][k]))
                fail_msg("trace line %d lacks %s: '%s'", n + 1, want[n][k], line);
        const char *st = strstr(line, "\"start\":"), *en = strstr(line, "\"end\":");
        assert_non_null(st);
        assert_non_null(en);
        double a = strtod(st + 8, NULL), b = strtod(en + 6, NULL);
        if (!(a >= 0 && b >= a))
            fail_msg("trace line %d: start %g, end %g", n + 1, a, b);
        if (strstr(line, "compute")) {
            assert_true(a >= prev_compute_end); /* one stream: in order */
            prev_compute_end = b;
        }
        if (strstr(line, "\"bytes\":") && !strstr(line, "\"bytes\":1024,"))
            fail_msg("trace line %d: expected 1024 bytes: '%s'", n + 1, line);
    }
    assert_int_equal(n, 4);
    saga_sched_free(&s);
    fclose(f);
    free(buf);
    saga_backend_free_all(&be);
}

/* Timed by events (saga_sched_set_timed): the load and the write-back give the copy stream's time
 * each way, the step's wait for its load the compute stream's, all read back at finish; reset
 * clears them. Untimed (the CPU's default), the copy time is the backend's copy worker's. */
static void test_sched_timed(void **state) {
    (void)state;
    saga_backend *be = open_cpu();
    saga_stream *ds = saga_backend_default_stream(be);
    float hx[N], hy[N];
    for (int i = 0; i < N; i++)
        hx[i] = 2.0f;
    for (int timed = 1; timed >= 0; timed--) {
        saga_sched *s = NULL;
        assert_int_equal(saga_sched_new(&s, be, 0, NULL, NULL), SAGA_OK);
        assert_int_equal(saga_sched_set_timed(s, timed), SAGA_OK);
        saga_blk *X = saga_sched_block(s, N * sizeof(float), SAGA_BLK_INPUT, "features");
        saga_blk *Y = saga_sched_block(s, N * sizeof(float), SAGA_BLK_TEMP, "result");
        saga_blk_set_host(X, hx);
        saga_blk_set_host(Y, hy);
        saga_sched_plan_begin(s);
        int t = saga_sched_step(s);
        saga_sched_use(s, t, X, SAGA_USE_READ, 0);
        saga_sched_use(s, t, Y, SAGA_USE_WRITE, SAGA_USE_WRITEBACK);
        assert_int_equal(saga_sched_plan_end(s), SAGA_OK);
        assert_int_equal(saga_sched_begin(s, 0), SAGA_OK);
        assert_int_equal(
            be->kernels->scale_f32(ds, N, 0.5f, saga_blk_dev(X), 0.0f, saga_blk_dev(Y)), SAGA_OK);
        assert_int_equal(saga_sched_end(s, 0), SAGA_OK);
        assert_int_equal(saga_sched_finish(s), SAGA_OK);
        assert_true(hy[N - 1] == 1.0f);
        saga_sched_stats ss;
        saga_sched_get_stats(s, &ss);
        assert_int_equal(ss.timed, timed);
        if (timed) {
            /* both directions timed: the load's time and, beyond it, the write-back's */
            assert_true(ss.h2d_seconds > 0 && ss.copy_seconds > ss.h2d_seconds);
            assert_true(ss.wait_seconds >= 0);
        } else {
            assert_true(ss.h2d_seconds == 0); /* the copy worker's time is one sum */
            saga_backend_stats bs;
            saga_backend_get_stats(be, &bs);
            assert_true(ss.copy_seconds == bs.copy_seconds);
        }
        saga_sched_reset_stats(s);
        saga_sched_get_stats(s, &ss);
        assert_true(ss.h2d_seconds == 0 && (!timed || ss.copy_seconds == 0));
        saga_sched_free(&s);
    }
    saga_backend_free_all(&be);
}

/* A pass reset before it was finished (queued without a wait) keeps its timing pairs apart: the
 * next finish reads them into saga_sched_held_stats, not into the next pass's figures. The first
 * pass loads more blocks than the pool of pairs first holds, so pairs that completed are read
 * back while it runs (the pool is reused). */
static void test_sched_timed_held(void **state) {
    (void)state;
    enum { K = 80 };
    saga_backend *be = open_cpu();
    saga_sched *s = NULL;
    assert_int_equal(saga_sched_new(&s, be, 0, NULL, NULL), SAGA_OK);
    assert_int_equal(saga_sched_set_timed(s, true), SAGA_OK);
    static float hx[K][N];
    saga_blk *X[K];
    for (int i = 0; i < K; i++) {
        X[i] = saga_sched_block(s, N * sizeof(float), SAGA_BLK_INPUT, "features");
        assert_non_null(X[i]);
        saga_blk_set_host(X[i], hx[i]);
    }
    saga_sched_plan_begin(s);
    for (int i = 0; i < K; i++)
        saga_sched_use(s, saga_sched_step(s), X[i], SAGA_USE_READ, 0);
    assert_int_equal(saga_sched_plan_end(s), SAGA_OK);
    for (int t = 0; t < K; t++) {
        assert_int_equal(saga_sched_begin(s, t), SAGA_OK);
        assert_int_equal(saga_sched_end(s, t), SAGA_OK);
    }
    saga_sched_stats hs, ss;
    assert_false(saga_sched_held_stats(s, &hs));
    saga_sched_reset_stats(s); /* not finished: its pairs are held */
    saga_sched_plan_begin(s);
    saga_sched_use(s, saga_sched_step(s), X[K - 1], SAGA_USE_READ, 0); /* resident: no load */
    assert_int_equal(saga_sched_plan_end(s), SAGA_OK);
    assert_int_equal(saga_sched_begin(s, 0), SAGA_OK);
    assert_int_equal(saga_sched_end(s, 0), SAGA_OK);
    assert_int_equal(saga_sched_finish(s), SAGA_OK);
    assert_true(saga_sched_held_stats(s, &hs));
    assert_true(hs.timed && hs.h2d_seconds > 0 && hs.copy_seconds >= hs.h2d_seconds);
    saga_sched_get_stats(s, &ss);
    assert_true(ss.h2d_seconds == 0 && ss.copy_seconds == 0);
    assert_int_equal(ss.h2d_bytes, 0);
    saga_sched_reset_stats(s);
    assert_false(saga_sched_held_stats(s, &hs));
    saga_sched_free(&s);
    saga_backend_free_all(&be);
}

/* A block freed between plans leaves the scheduler (its device bytes with it) and the others
 * run on; under pressure during a step, a block prefetched for the next step is given back, its
 * load waited for, and loads again when that step begins. */
static void test_sched_block_free_and_give_back(void **state) {
    (void)state;
    saga_backend *be = open_cpu();
    saga_sched *s = NULL;
    size_t bytes = N * sizeof(float);
    assert_int_equal(saga_sched_new(&s, be, 2 * bytes, NULL, NULL), SAGA_OK);
    float a[N], b[N], c[N];
    for (int i = 0; i < N; i++)
        a[i] = 1.0f, b[i] = (float)i, c[i] = 2.0f * (float)i;
    saga_blk *A = saga_sched_block(s, bytes, SAGA_BLK_INPUT, "a");
    saga_blk *B = saga_sched_block(s, bytes, SAGA_BLK_INPUT, "b");
    saga_blk *C = saga_sched_block(s, bytes, SAGA_BLK_INPUT, "c");
    assert_true(A && B && C);
    saga_blk_set_host(A, a);
    saga_blk_set_host(B, b);
    saga_blk_set_host(C, c);
    saga_sched_plan_begin(s);
    saga_sched_use(s, saga_sched_step(s), A, SAGA_USE_READ, 0);
    assert_int_equal(saga_sched_plan_end(s), SAGA_OK);
    assert_int_equal(saga_sched_begin(s, 0), SAGA_OK);
    assert_int_equal(saga_sched_end(s, 0), SAGA_OK);
    assert_int_equal(saga_sched_finish(s), SAGA_OK);
    assert_int_equal(saga_sched_resident_bytes(s), bytes);
    assert_int_equal(saga_sched_block_free(s, &A), SAGA_OK);
    assert_null(A);
    assert_int_equal(saga_sched_resident_bytes(s), 0);
    assert_int_equal(saga_sched_block_free(s, &A), SAGA_OK); /* NULL: nothing */

    saga_sched_plan_begin(s);
    saga_sched_use(s, saga_sched_step(s), B, SAGA_USE_READ, 0);
    saga_sched_use(s, saga_sched_step(s), C, SAGA_USE_READ, 0);
    assert_int_equal(saga_sched_plan_end(s), SAGA_OK);
    assert_int_equal(saga_sched_begin(s, 0), SAGA_OK);
    /* C prefetched beside B, its load perhaps still in flight */
    assert_int_equal(saga_sched_resident_bytes(s), 2 * bytes);
    assert_true(saga_sched_give_back(s, bytes));
    assert_int_equal(saga_sched_resident_bytes(s), bytes);
    const float *db = saga_blk_dev(B);
    assert_non_null(db);
    assert_true(db[N - 1] == (float)(N - 1));
    assert_false(saga_sched_give_back(s, bytes)); /* B is the running step's */
    assert_int_equal(saga_sched_end(s, 0), SAGA_OK);
    assert_int_equal(saga_sched_begin(s, 1), SAGA_OK);
    const float *dc = saga_blk_dev(C);
    assert_non_null(dc);
    assert_true(dc[N - 1] == 2.0f * (float)(N - 1));
    assert_int_equal(saga_sched_end(s, 1), SAGA_OK);
    assert_int_equal(saga_sched_finish(s), SAGA_OK);
    saga_sched_free(&s);
    saga_backend_free_all(&be);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sched_state_written_back_on_eviction),
        cmocka_unit_test(test_sched_state_stays_resident),
        cmocka_unit_test(test_sched_write_waits_for_writeback),
        cmocka_unit_test(test_sched_load_waits_for_event),
        cmocka_unit_test(test_sched_trace_lines),
        cmocka_unit_test(test_sched_timed),
        cmocka_unit_test(test_sched_timed_held),
        cmocka_unit_test(test_sched_block_free_and_give_back),
        cmocka_unit_test(test_sched_step_cap),
    };
    copies = SAGA_COPIES_WORKER;
    int failed = cmocka_run_group_tests_name("copies on a worker thread", tests, NULL, NULL);
    copies = SAGA_COPIES_INLINE;
    return failed + cmocka_run_group_tests_name("copies inline", tests, NULL, NULL);
}
