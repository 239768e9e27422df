/* backend_cpu.c - the CPU backend, which also plays the device on machines without a GPU:
 * aligned host memory as "device" memory and asynchronous streams with a worker thread each; the
 * generic layer gives it the OpenMP kernels of kernels.c (saga_cpu_backend_init), which call back
 * into nothing here but saga_cpu_stream_drain.
 *
 * Streams. The default stream is synchronous: a copy, memset, event record or host function
 * issued on it has run when the issuing call returns. Every stream made with saga_stream_new
 * owns one worker thread (no OpenMP inside it), started at the first operation issued on the
 * stream, that runs a FIFO queue of operations: copies (h2d, d2h and d2d are all memmove here),
 * memsets, event records, waits for events and host functions. Issuing queues the operation and
 * returns, so a copy on such a stream overlaps with kernels running on the caller, as a copy engine
 * does on a GPU. Kernels always run on the calling thread; one issued on an asynchronous stream
 * first waits until the stream has run what was queued before it (saga_cpu_stream_drain), so the
 * stream stays in order. Queue nodes come from saga_malloc on the issuing thread and are reused
 * once they have run: the worker never allocates, so a failed allocation is an error of the issuing
 * call with nothing queued.
 *
 * Events follow cudaEventRecord: each record makes a new point (a cpu_mark), which completes
 * when the worker reaches it (at once on the default stream) and keeps the CLOCK_MONOTONIC time
 * of its completion for saga_event_elapsed. Recording again moves the event to the new point;
 * waits queued before keep the old one. An event never recorded counts as complete. Waiting for
 * an event on the default stream blocks the caller: that is what a wait means on a synchronous
 * stream.
 *
 * Locks: one per stream (its queue), one for the list of live streams, one for all marks (with a
 * condition broadcast whenever a mark completes). A thread holds at most one of them at a time,
 * except backend synchronize, which holds the list while it waits on each stream in turn; the
 * time spent copying is added to the generic layer's copy_seconds under the backend's lock. */
#include "backend_impl.h"
#include "mem_impl.h"
#include "nn_kernels.h"
#include "saga_log.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

enum {
    CPU_ALIGN = 64,                 /* a cache line; what AVX-512 loads want */
    CPU_HUGE = 2 * 1024 * 1024,     /* a transparent huge page */
    CPU_HUGE_MIN = 2 * 1024 * 1024, /* regions this large are aligned to CPU_HUGE */
};

/* Allocates bytes aligned to 64 (to 2 MiB for regions of 2 MiB or more, so that the whole
 * region can be backed by huge pages). The block from saga_malloc is over-allocated; its base
 * pointer is kept just before the aligned pointer, and before that the bytes it holds. */
static saga_status cpu_aligned_alloc(void **out, size_t bytes, const char *what) {
    size_t align = bytes >= CPU_HUGE_MIN ? CPU_HUGE : CPU_ALIGN;
    size_t extra = align + 2 * sizeof(void *);
    if (bytes > SIZE_MAX - extra)
        return saga_error(SAGA_ERR_OUT_OF_MEMORY, "out of memory: %zu bytes of %s", bytes, what);
    char *base = saga_malloc(bytes + extra);
    if (!base)
        return saga_error(SAGA_ERR_OUT_OF_MEMORY, "out of memory: %zu bytes of %s", bytes, what);
    uintptr_t a = ((uintptr_t)base + 2 * sizeof(void *) + align - 1) & ~(uintptr_t)(align - 1);
    ((void **)a)[-1] = base;
    ((size_t *)a)[-2] = bytes;
    if (bytes >= CPU_HUGE_MIN) {
        /* First touch of fresh 4 KiB pages costs about 10 us each on the VMs saga runs on; huge
         * pages cut the number of faults 512-fold. Advice only: failure is harmless. */
        (void)madvise((void *)a, bytes & ~(size_t)(CPU_HUGE - 1), MADV_HUGEPAGE);
    }
    *out = (void *)a;
    return SAGA_OK;
}

static void cpu_aligned_free(void *ptr) {
    if (ptr)
        saga_free(((void **)ptr)[-1]);
}

/* ---- the context, streams and events ------------------------------------------------------- */

/* A point in a stream's queue that an event stands for. Referenced by the event last recorded
 * there and by the queued record and waits, so that a new record of the event, or freeing it,
 * does not take the point from under a worker that still waits for it. Marks whose last
 * reference is gone are kept on a spare list for the next record. Guarded by cpu_ctx.mark_lock. */
typedef struct cpu_mark {
    struct cpu_mark *next_spare;
    int refs;
    bool done;
    double t; /* CLOCK_MONOTONIC seconds when it completed */
} cpu_mark;

typedef enum cpu_op_kind {
    CPU_OP_COPY = 0,
    CPU_OP_SET,
    CPU_OP_RECORD,
    CPU_OP_WAIT,
    CPU_OP_HOST_FN,
    CPU_OP_ROWS,
    CPU_OP_COUNT
} cpu_op_kind;

/* One operation in a stream's queue. */
typedef struct cpu_op {
    struct cpu_op *next;
    cpu_op_kind kind;
    union {
        struct {
            void *dst;
            const void *src;
            size_t n;
        } copy;
        struct {
            void *dst;
            int value;
            size_t n;
        } set;
        cpu_mark *mark; /* RECORD, WAIT: holds one reference */
        struct {
            void (*fn)(void *arg);
            void *arg;
        } host;
        struct {
            saga_host_rows hr;
            void *dev;
            bool add;
        } rows;
    } u;
} cpu_op;

/* The queue of an asynchronous stream (s->impl, made at its first operation; the default stream
 * has none). */
typedef struct cpu_stream {
    saga_backend *be;
    pthread_mutex_t lock;
    pthread_cond_t work; /* signalled when an operation is queued or stop is set */
    pthread_cond_t idle; /* broadcast when the worker finds the queue empty */
    cpu_op *head, *tail;
    cpu_op *spare; /* operations that have run, for reuse by the issuing threads */
    bool busy;     /* the worker is running an operation it took off the queue */
    bool stop;
    saga_status err; /* the first error an operation met, until a synchronize reports it */
    char err_msg[256];
    pthread_t thread;
    struct cpu_stream *prev, *next; /* in cpu_ctx.streams */
} cpu_stream;

/* Device blocks given back and kept for the next allocations (see cpu_alloc). */
enum {
    CPU_KEEP_MIN = 16 * 1024, /* smaller blocks go back to malloc's heap, which reuses them */
    CPU_KEEP_SLOTS = 1024,    /* a streamed pass holds a few blocks per part, a step's tape more */
};
#define CPU_KEEP_MAX_BYTES ((size_t)1 << 30) /* at most 1 GiB kept */

typedef struct cpu_block {
    void *p;      /* as cpu_aligned_alloc gave it */
    size_t bytes; /* what it holds */
} cpu_block;

/* be->ctx. */
typedef struct cpu_ctx {
    pthread_mutex_t streams_lock;
    cpu_stream *streams; /* live asynchronous streams, for backend synchronize */
    pthread_mutex_t mark_lock;
    pthread_cond_t mark_done; /* broadcast whenever a mark completes */
    cpu_mark *spare_marks;
    /* kept device blocks, guarded by the generic layer's backend lock (alloc and free run under
     * it) */
    cpu_block keep[CPU_KEEP_SLOTS];
    int n_keep;
    size_t keep_bytes;
} cpu_ctx;

static cpu_ctx *ctx_peek(const saga_backend *be) {
    return __atomic_load_n((cpu_ctx *const *)&be->ctx, __ATOMIC_ACQUIRE);
}

static cpu_stream *stream_peek(const saga_stream *s) {
    return __atomic_load_n((cpu_stream *const *)&s->impl, __ATOMIC_ACQUIRE);
}

static bool is_default(const saga_stream *s) {
    return s == &s->be->default_stream;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Adds to the backend's copy_seconds (under the generic layer's accounting lock). */
static void add_copy_seconds(saga_backend *be, double dt) {
    pthread_mutex_lock((pthread_mutex_t *)be->lock);
    be->copy_seconds += dt;
    pthread_mutex_unlock((pthread_mutex_t *)be->lock);
}

static void timed_copy(saga_backend *be, void *dst, const void *src, size_t n) {
    double t0 = now_seconds();
    memmove(dst, src, n);
    add_copy_seconds(be, now_seconds() - t0);
}

static void timed_set(saga_backend *be, void *dst, int value, size_t n) {
    double t0 = now_seconds();
    memset(dst, value, n);
    add_copy_seconds(be, now_seconds() - t0);
}

static void keep_release(cpu_ctx *ctx);

/* saga_memcpy_rows_h2d_async (add false) or saga_add_rows_d2h_async (add true), timed as a copy. */
static void rows_copy(saga_backend *be, const saga_host_rows *hr, void *dev, bool add) {
    const double t0 = now_seconds();
    const size_t rb = hr->row_bytes;
    for (int64_t i = 0; i < hr->n; i++) {
        unsigned char *h =
            (unsigned char *)hr->base + (hr->rows ? hr->rows[i] : hr->first + i) * rb;
        unsigned char *d = (unsigned char *)dev + i * (int64_t)rb;
        if (!add) {
            memcpy(d, h, rb);
            continue;
        }
        float *y = (float *)(void *)h;
        const float *x = (const float *)(const void *)d;
        for (size_t j = 0; j < rb / sizeof(float); j++)
            y[j] += x[j];
    }
    add_copy_seconds(be, now_seconds() - t0);
}

static void cpu_destroy(saga_backend *be) {
    cpu_ctx *ctx = be->ctx;
    if (!ctx)
        return;
    int live = 0;
    for (cpu_stream *cs = ctx->streams; cs; cs = cs->next)
        live++;
    if (live)
        saga_log(SAGA_LOG_WARN,
                 "backend %s freed with %d stream%s still alive (free streams before their "
                 "backend)",
                 be->name, live, live == 1 ? "" : "s");
    while (ctx->spare_marks) {
        cpu_mark *m = ctx->spare_marks;
        ctx->spare_marks = m->next_spare;
        saga_free(m);
    }
    keep_release(ctx);
    pthread_cond_destroy(&ctx->mark_done);
    pthread_mutex_destroy(&ctx->mark_lock);
    pthread_mutex_destroy(&ctx->streams_lock);
    saga_free(ctx);
    be->ctx = NULL;
}

/* Keeping freed blocks: a training loop frees and allocates the same tensors step after step, at
 * sizes that change with the data (events, micro-batches). Through malloc each large block is a
 * fresh mmap: every page faults and is cleared again, a fifth of an Interaction Network's step.
 * Blocks of CPU_KEEP_MIN bytes or more are kept instead (up to CPU_KEEP_SLOTS and
 * CPU_KEEP_MAX_BYTES, the oldest given back first), and an allocation takes the smallest kept
 * block that holds it and is at most twice its size. The backend's accounting (in use, peak,
 * budget) counts what was asked for, as before; the memory kept is not counted. Under
 * AddressSanitizer nothing is kept, so that a use after free is still caught. A streamed GCN pass
 * of 32 parts frees and makes again over a hundred such blocks: with 32 slots, some passes gave
 * back blocks the next one faulted in again (2.3x slower passes, in stretches). An Interaction
 * Network's micro-batch makes many of 16 to 256 KiB: given back to malloc, they came from fresh
 * mmaps or a heap it had trimmed, 500 page faults a micro-batch (8% of the epoch). */
#define CPU_KEEP (!SAGA_ASAN)

static size_t block_bytes(void *p) {
    return ((size_t *)p)[-2];
}

/* Gives every kept block back to malloc. Under the backend lock. */
static void keep_release(cpu_ctx *ctx) {
    for (int i = 0; i < ctx->n_keep; i++)
        cpu_aligned_free(ctx->keep[i].p);
    ctx->n_keep = 0;
    ctx->keep_bytes = 0;
}

static void keep_drop(cpu_ctx *ctx, int i) {
    ctx->keep_bytes -= ctx->keep[i].bytes;
    memmove(&ctx->keep[i], &ctx->keep[i + 1], (size_t)(ctx->n_keep - i - 1) * sizeof *ctx->keep);
    ctx->n_keep--;
}

static saga_status ctx_new(cpu_ctx **out);

static saga_status cpu_alloc(saga_backend *be, void **out, size_t bytes) {
    cpu_ctx *ctx = ctx_peek(be);
    if (CPU_KEEP && !ctx && bytes >= CPU_KEEP_MIN && ctx_new(&ctx) == SAGA_OK)
        __atomic_store_n((cpu_ctx **)&be->ctx, ctx, __ATOMIC_RELEASE); /* under the lock */
    if (CPU_KEEP && ctx && bytes >= CPU_KEEP_MIN) {
        int best = -1;
        for (int i = 0; i < ctx->n_keep; i++) {
            size_t b = ctx->keep[i].bytes;
            if (b >= bytes && b / 2 <= bytes && (best < 0 || b < ctx->keep[best].bytes))
                best = i;
        }
        if (best >= 0) {
            *out = ctx->keep[best].p;
            keep_drop(ctx, best);
            return SAGA_OK;
        }
    }
    saga_status st = cpu_aligned_alloc(out, bytes, "device memory (cpu)");
    if (st == SAGA_ERR_OUT_OF_MEMORY && ctx && ctx->n_keep) {
        keep_release(ctx); /* what is kept may be what was missing */
        st = cpu_aligned_alloc(out, bytes, "device memory (cpu)");
    }
    return st;
}

static void cpu_free(saga_backend *be, void *ptr, size_t bytes) {
    (void)bytes; /* the block may hold more than this tensor asked for: see block_bytes */
    cpu_ctx *ctx = ctx_peek(be); /* made by cpu_alloc for any block large enough to keep */
    size_t held = block_bytes(ptr);
    if (!CPU_KEEP || !ctx || held < CPU_KEEP_MIN || held > CPU_KEEP_MAX_BYTES) {
        cpu_aligned_free(ptr);
        return;
    }
    while (ctx->n_keep == CPU_KEEP_SLOTS || ctx->keep_bytes + held > CPU_KEEP_MAX_BYTES) {
        cpu_aligned_free(ctx->keep[0].p); /* the oldest */
        keep_drop(ctx, 0);
    }
    ctx->keep[ctx->n_keep++] = (cpu_block){ptr, held};
    ctx->keep_bytes += held;
}

static saga_status cpu_host_alloc(saga_backend *be, void **out, size_t bytes) {
    (void)be;
    return cpu_aligned_alloc(out, bytes, "host staging memory");
}

static void cpu_host_free(saga_backend *be, void *ptr, size_t bytes) {
    (void)be;
    (void)bytes;
    cpu_aligned_free(ptr);
}

/* ---- marks (guarded by ctx->mark_lock) ------------------------------------------------------ */

/* Drops one reference; the last one sends m to the spare list. Accepts NULL. */
static void mark_unref(cpu_ctx *ctx, cpu_mark *m) {
    if (m && --m->refs == 0) {
        m->next_spare = ctx->spare_marks;
        ctx->spare_marks = m;
    }
}

/* A mark for a new record, from the spare list or saga_malloc; the caller sets its fields under
 * the lock. SAGA_ERR_OUT_OF_MEMORY. */
static saga_status mark_take(cpu_ctx *ctx, cpu_mark **out) {
    pthread_mutex_lock(&ctx->mark_lock);
    cpu_mark *m = ctx->spare_marks;
    if (m)
        ctx->spare_marks = m->next_spare;
    pthread_mutex_unlock(&ctx->mark_lock);
    if (!m && !(m = saga_malloc(sizeof *m)))
        return saga_error(SAGA_ERR_OUT_OF_MEMORY, "out of memory: an event record (%zu bytes)",
                          sizeof *m);
    *out = m;
    return SAGA_OK;
}

/* Blocks until m completes; the caller holds a reference and the lock. */
static saga_status mark_wait_locked(cpu_ctx *ctx, const cpu_mark *m) {
    while (!m->done) {
        int rc = pthread_cond_wait(&ctx->mark_done, &ctx->mark_lock);
        if (rc != 0)
            return saga_error(SAGA_ERR_INTERNAL, "waiting for an event: pthread_cond_wait: %s",
                              strerror(rc));
    }
    return SAGA_OK;
}

/* ---- the worker ----------------------------------------------------------------------------- */

/* Runs one operation on the worker. Only a failed wait can fail. */
static saga_status cpu_op_run(cpu_stream *cs, const cpu_op *op) {
    cpu_ctx *ctx = ctx_peek(cs->be);
    saga_status st = SAGA_OK;
    switch (op->kind) {
    case CPU_OP_COPY:
        timed_copy(cs->be, op->u.copy.dst, op->u.copy.src, op->u.copy.n);
        break;
    case CPU_OP_SET:
        timed_set(cs->be, op->u.set.dst, op->u.set.value, op->u.set.n);
        break;
    case CPU_OP_RECORD:
        pthread_mutex_lock(&ctx->mark_lock);
        op->u.mark->t = now_seconds();
        op->u.mark->done = true;
        mark_unref(ctx, op->u.mark);
        pthread_cond_broadcast(&ctx->mark_done);
        pthread_mutex_unlock(&ctx->mark_lock);
        break;
    case CPU_OP_WAIT:
        pthread_mutex_lock(&ctx->mark_lock);
        st = mark_wait_locked(ctx, op->u.mark);
        mark_unref(ctx, op->u.mark);
        pthread_mutex_unlock(&ctx->mark_lock);
        break;
    case CPU_OP_HOST_FN:
        op->u.host.fn(op->u.host.arg);
        break;
    case CPU_OP_ROWS:
        rows_copy(cs->be, &op->u.rows.hr, op->u.rows.dev, op->u.rows.add);
        break;
    default:
        st = saga_error(SAGA_ERR_INTERNAL, "stream operation of unknown kind %d", (int)op->kind);
        break;
    }
    return st;
}

/* The worker thread of an asynchronous stream: runs the queue in order until stop is set and the
 * queue is empty. */
static void *cpu_worker(void *arg) {
    cpu_stream *cs = arg;
    pthread_mutex_lock(&cs->lock);
    for (;;) {
        while (!cs->head && !cs->stop)
            pthread_cond_wait(&cs->work, &cs->lock);
        if (!cs->head)
            break;
        cpu_op *op = cs->head;
        cs->head = op->next;
        if (!cs->head)
            cs->tail = NULL;
        cs->busy = true;
        pthread_mutex_unlock(&cs->lock);

        saga_status st = cpu_op_run(cs, op);

        pthread_mutex_lock(&cs->lock);
        if (st < 0 && cs->err == SAGA_OK) {
            /* the message lives in this thread: copy it for the thread that synchronizes */
            cs->err = st;
            snprintf(cs->err_msg, sizeof cs->err_msg, "%s", saga_last_error());
        }
        cs->busy = false;
        op->next = cs->spare;
        cs->spare = op;
        if (!cs->head)
            pthread_cond_broadcast(&cs->idle);
    }
    pthread_mutex_unlock(&cs->lock);
    return NULL;
}

/* ---- issuing -------------------------------------------------------------------------------- */

/* An operation node for cs, reused or from saga_malloc. SAGA_ERR_OUT_OF_MEMORY. */
static saga_status op_take(cpu_stream *cs, cpu_op **out) {
    pthread_mutex_lock(&cs->lock);
    cpu_op *op = cs->spare;
    if (op)
        cs->spare = op->next;
    pthread_mutex_unlock(&cs->lock);
    if (!op && !(op = saga_malloc(sizeof *op)))
        return saga_error(SAGA_ERR_OUT_OF_MEMORY,
                          "out of memory: a stream operation (%zu bytes); nothing was queued",
                          sizeof *op);
    *out = op;
    return SAGA_OK;
}

/* Gives back a node that was not queued. */
static void op_give_back(cpu_stream *cs, cpu_op *op) {
    pthread_mutex_lock(&cs->lock);
    op->next = cs->spare;
    cs->spare = op;
    pthread_mutex_unlock(&cs->lock);
}

static void op_push(cpu_stream *cs, cpu_op *op) {
    op->next = NULL;
    pthread_mutex_lock(&cs->lock);
    if (cs->tail)
        cs->tail->next = op;
    else
        cs->head = op;
    cs->tail = op;
    pthread_cond_signal(&cs->work);
    pthread_mutex_unlock(&cs->lock);
}

/* Blocks until cs has run everything queued so far. With report, a kept error is returned (with
 * its message) and cleared. */
static saga_status stream_wait_idle(cpu_stream *cs, bool report) {
    saga_status st = SAGA_OK;
    pthread_mutex_lock(&cs->lock);
    while (cs->head || cs->busy)
        pthread_cond_wait(&cs->idle, &cs->lock);
    if (report && cs->err < 0) {
        st = saga_error(cs->err, "%s", cs->err_msg);
        cs->err = SAGA_OK;
    }
    pthread_mutex_unlock(&cs->lock);
    return st;
}

/* ---- lazy state ----------------------------------------------------------------------------
 *
 * Nothing is made before it is needed: the context (stream list, marks) at the first event
 * record or asynchronous operation on the backend, a stream's queue and worker thread at the
 * first operation issued on it. Opening a backend, making a stream or an event thus costs one
 * allocation each, as before, and a stream that only ever carries kernels never starts a thread.
 * be->ctx and s->impl go from NULL to their final value once, under a lock, and are read with
 * acquire loads, so issuing threads need no lock to find them. */

/* Makes a context. SAGA_ERR_OUT_OF_MEMORY, SAGA_ERR_INTERNAL (a lock cannot be made). */
static saga_status ctx_new(cpu_ctx **out) {
    saga_status st = SAGA_OK;
    cpu_ctx *ctx = NULL;
    int made = 0; /* how many of streams_lock, mark_lock, mark_done exist */
    SAGA_TRY(saga_alloc_zeroed((void **)&ctx, 1, sizeof *ctx, "the CPU backend's stream state"));
    SAGA_CHECK(pthread_mutex_init(&ctx->streams_lock, NULL) == 0, SAGA_ERR_INTERNAL,
               "cannot initialise the CPU backend's stream list lock");
    made = 1;
    SAGA_CHECK(pthread_mutex_init(&ctx->mark_lock, NULL) == 0, SAGA_ERR_INTERNAL,
               "cannot initialise the CPU backend's event lock");
    made = 2;
    SAGA_CHECK(pthread_cond_init(&ctx->mark_done, NULL) == 0, SAGA_ERR_INTERNAL,
               "cannot initialise the CPU backend's event condition");
    *out = ctx;
    return SAGA_OK;
fail:
    if (made >= 2)
        pthread_mutex_destroy(&ctx->mark_lock);
    if (made >= 1)
        pthread_mutex_destroy(&ctx->streams_lock);
    saga_free(ctx);
    return st;
}

/* The backend's context, made on first use under the backend's lock. */
static saga_status ctx_get(saga_backend *be, cpu_ctx **out) {
    cpu_ctx *ctx = ctx_peek(be);
    saga_status st = SAGA_OK;
    if (!ctx) {
        pthread_mutex_lock((pthread_mutex_t *)be->lock);
        ctx = ctx_peek(be);
        if (!ctx) {
            st = ctx_new(&ctx);
            if (st == SAGA_OK)
                __atomic_store_n((cpu_ctx **)&be->ctx, ctx, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock((pthread_mutex_t *)be->lock);
    }
    if (st == SAGA_OK)
        *out = ctx;
    return st;
}

/* A queue and a running worker thread for a stream. SAGA_ERR_OUT_OF_MEMORY when memory or threads
 * run out, SAGA_ERR_INTERNAL when a lock cannot be made. */
static saga_status stream_state_new(saga_backend *be, cpu_stream **out) {
    saga_status st = SAGA_OK;
    cpu_stream *cs = NULL;
    int made = 0; /* how many of lock, work, idle exist */
    SAGA_TRY(saga_alloc_zeroed((void **)&cs, 1, sizeof *cs, "a stream's queue"));
    cs->be = be;
    SAGA_CHECK(pthread_mutex_init(&cs->lock, NULL) == 0, SAGA_ERR_INTERNAL,
               "cannot initialise a stream lock");
    made = 1;
    SAGA_CHECK(pthread_cond_init(&cs->work, NULL) == 0, SAGA_ERR_INTERNAL,
               "cannot initialise a stream condition");
    made = 2;
    SAGA_CHECK(pthread_cond_init(&cs->idle, NULL) == 0, SAGA_ERR_INTERNAL,
               "cannot initialise a stream condition");
    made = 3;
    int rc = pthread_create(&cs->thread, NULL, cpu_worker, cs);
    SAGA_CHECK(rc == 0, rc == EAGAIN ? SAGA_ERR_OUT_OF_MEMORY : SAGA_ERR_INTERNAL,
               "cannot start the worker thread of a stream: %s", strerror(rc));
    *out = cs;
    return SAGA_OK;
fail:
    if (made >= 3)
        pthread_cond_destroy(&cs->idle);
    if (made >= 2)
        pthread_cond_destroy(&cs->work);
    if (made >= 1)
        pthread_mutex_destroy(&cs->lock);
    saga_free(cs);
    return st;
}

/* The queue of an asynchronous stream (not the default one), made on first use and entered in
 * the backend's list of live streams. */
static saga_status stream_get(saga_stream *s, cpu_stream **out) {
    cpu_stream *cs = stream_peek(s);
    if (cs) {
        *out = cs;
        return SAGA_OK;
    }
    cpu_ctx *ctx = NULL;
    saga_status st = ctx_get(s->be, &ctx);
    if (st < 0)
        return st;
    pthread_mutex_lock(&ctx->streams_lock);
    cs = stream_peek(s);
    if (!cs) {
        st = stream_state_new(s->be, &cs);
        if (st == SAGA_OK) {
            cs->next = ctx->streams;
            if (ctx->streams)
                ctx->streams->prev = cs;
            ctx->streams = cs;
            __atomic_store_n((cpu_stream **)&s->impl, cs, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&ctx->streams_lock);
    if (st == SAGA_OK)
        *out = cs;
    return st;
}

/* The stream's queue (made on first use) and a free operation node to fill and push. */
static saga_status op_begin(saga_stream *s, cpu_stream **cs, cpu_op **op) {
    saga_status st = stream_get(s, cs);
    if (st == SAGA_OK)
        st = op_take(*cs, op);
    return st;
}

/* Queues an operation with op's kind and arguments on asynchronous stream s. */
static saga_status op_queue(saga_stream *s, const cpu_op *op) {
    cpu_stream *cs = NULL;
    cpu_op *node = NULL;
    saga_status st = op_begin(s, &cs, &node);
    if (st < 0)
        return st;
    node->kind = op->kind;
    node->u = op->u;
    op_push(cs, node);
    return SAGA_OK;
}

void saga_cpu_stream_drain(saga_stream *s) {
    cpu_stream *cs = s ? stream_peek(s) : NULL;
    if (cs)
        (void)stream_wait_idle(cs, false);
}

/* ---- the stream and event slots --------------------------------------------------------- */

/* No state yet (see "lazy state" above): the default stream never has any, being synchronous. */
static saga_status cpu_stream_new(saga_backend *be, saga_stream *s) {
    (void)be;
    s->impl = NULL;
    return SAGA_OK;
}

/* Lets the worker run what is queued, stops and joins it, and frees the stream. An error still
 * kept there is logged, since no synchronize will report it. */
static void cpu_stream_free(saga_stream *s) {
    cpu_stream *cs = stream_peek(s);
    if (!cs)
        return;
    cpu_ctx *ctx = ctx_peek(cs->be);
    (void)stream_wait_idle(cs, false);
    pthread_mutex_lock(&cs->lock);
    if (cs->err < 0)
        saga_log(SAGA_LOG_WARN, "stream freed with an unreported error: %s", cs->err_msg);
    cs->stop = true;
    pthread_cond_signal(&cs->work);
    pthread_mutex_unlock(&cs->lock);
    pthread_join(cs->thread, NULL);

    pthread_mutex_lock(&ctx->streams_lock);
    if (cs->prev)
        cs->prev->next = cs->next;
    else
        ctx->streams = cs->next;
    if (cs->next)
        cs->next->prev = cs->prev;
    pthread_mutex_unlock(&ctx->streams_lock);

    while (cs->spare) {
        cpu_op *op = cs->spare;
        cs->spare = op->next;
        saga_free(op);
    }
    pthread_cond_destroy(&cs->idle);
    pthread_cond_destroy(&cs->work);
    pthread_mutex_destroy(&cs->lock);
    saga_free(cs);
    s->impl = NULL;
}

static saga_status cpu_stream_sync(saga_stream *s) {
    cpu_stream *cs = stream_peek(s);
    return cs ? stream_wait_idle(cs, true) : SAGA_OK;
}

static saga_status cpu_event_sync(saga_event *e);

static saga_status cpu_stream_wait_event(saga_stream *s, saga_event *e) {
    if (is_default(s))
        return cpu_event_sync(e); /* a synchronous stream waits by blocking its caller */
    cpu_ctx *ctx = ctx_peek(s->be);
    if (!ctx)
        return SAGA_OK; /* no event of this backend was ever recorded */
    cpu_stream *cs = NULL;
    cpu_op *op = NULL;
    saga_status st = op_begin(s, &cs, &op);
    if (st < 0)
        return st;
    pthread_mutex_lock(&ctx->mark_lock);
    cpu_mark *m = e->impl;
    if (m && !m->done)
        m->refs++;
    else
        m = NULL; /* never recorded or complete: nothing to wait for */
    pthread_mutex_unlock(&ctx->mark_lock);
    if (!m) {
        op_give_back(cs, op);
        return SAGA_OK;
    }
    op->kind = CPU_OP_WAIT;
    op->u.mark = m;
    op_push(cs, op);
    return SAGA_OK;
}

/* e->impl is the mark of the last record (NULL: never recorded), guarded by ctx->mark_lock. An
 * event with a mark implies a context; without a context no event of the backend has a mark. */
static saga_status cpu_event_new(saga_backend *be, saga_event *e) {
    (void)be;
    e->impl = NULL;
    return SAGA_OK;
}

static void cpu_event_free(saga_event *e) {
    cpu_ctx *ctx = ctx_peek(e->be);
    if (!ctx)
        return;
    pthread_mutex_lock(&ctx->mark_lock);
    mark_unref(ctx, e->impl);
    e->impl = NULL;
    pthread_mutex_unlock(&ctx->mark_lock);
}

static saga_status cpu_event_record(saga_event *e, saga_stream *s) {
    cpu_ctx *ctx = NULL;
    cpu_stream *cs = NULL;
    cpu_op *op = NULL;
    cpu_mark *m = NULL;
    saga_status st = SAGA_OK;
    SAGA_TRY(ctx_get(e->be, &ctx));
    if (!is_default(s)) {
        SAGA_TRY(stream_get(s, &cs));
        SAGA_TRY(op_take(cs, &op));
    }
    SAGA_TRY(mark_take(ctx, &m));
    pthread_mutex_lock(&ctx->mark_lock);
    m->refs = cs ? 2 : 1; /* the event, and the queued record */
    m->done = !cs;
    m->t = cs ? 0.0 : now_seconds();
    mark_unref(ctx, e->impl);
    e->impl = m;
    pthread_mutex_unlock(&ctx->mark_lock);
    if (cs) {
        op->kind = CPU_OP_RECORD;
        op->u.mark = m;
        op_push(cs, op);
    }
    return SAGA_OK;
fail:
    if (op)
        op_give_back(cs, op);
    return st;
}

static saga_status cpu_event_sync(saga_event *e) {
    cpu_ctx *ctx = ctx_peek(e->be);
    saga_status st = SAGA_OK;
    if (!ctx)
        return SAGA_OK; /* never recorded */
    pthread_mutex_lock(&ctx->mark_lock);
    cpu_mark *m = e->impl;
    if (m) {
        m->refs++; /* a record from another thread may drop the event's reference meanwhile */
        st = mark_wait_locked(ctx, m);
        mark_unref(ctx, m);
    }
    pthread_mutex_unlock(&ctx->mark_lock);
    return st;
}

static bool cpu_event_query(saga_event *e) {
    cpu_ctx *ctx = ctx_peek(e->be);
    if (!ctx)
        return true; /* never recorded */
    pthread_mutex_lock(&ctx->mark_lock);
    const cpu_mark *m = e->impl;
    bool done = !m || m->done;
    pthread_mutex_unlock(&ctx->mark_lock);
    return done;
}

static saga_status cpu_event_elapsed(saga_event *start, saga_event *end, double *seconds) {
    cpu_ctx *ctx = ctx_peek(start->be);
    if (!ctx)
        return saga_error(SAGA_ERR_INVALID_ARG, "saga_event_elapsed: the start event was never "
                                                "recorded");
    const char *which = NULL, *why = NULL;
    pthread_mutex_lock(&ctx->mark_lock);
    const cpu_mark *ms = start->impl, *me = end->impl;
    if (!ms || !me) {
        which = !ms ? "start" : "end";
        why = "was never recorded";
    } else if (!ms->done || !me->done) {
        which = !ms->done ? "start" : "end";
        why = "has not completed";
    } else {
        *seconds = me->t - ms->t;
    }
    pthread_mutex_unlock(&ctx->mark_lock);
    if (which)
        return saga_error(SAGA_ERR_INVALID_ARG, "saga_event_elapsed: the %s event %s", which, why);
    return SAGA_OK;
}

static saga_status cpu_memcpy_async(saga_stream *s, void *dst, const void *src, size_t n,
                                    saga_copy_kind kind) {
    (void)kind;
    if (is_default(s)) {
        timed_copy(s->be, dst, src, n);
        return SAGA_OK;
    }
    return op_queue(s, &(cpu_op){.kind = CPU_OP_COPY, .u.copy = {dst, src, n}});
}

static saga_status cpu_memset_async(saga_stream *s, void *dst, int value, size_t n) {
    if (is_default(s)) {
        timed_set(s->be, dst, value, n);
        return SAGA_OK;
    }
    return op_queue(s, &(cpu_op){.kind = CPU_OP_SET, .u.set = {dst, value, n}});
}

static saga_status cpu_launch_host_fn(saga_stream *s, void (*fn)(void *arg), void *arg) {
    if (is_default(s)) {
        fn(arg);
        return SAGA_OK;
    }
    return op_queue(s, &(cpu_op){.kind = CPU_OP_HOST_FN, .u.host = {fn, arg}});
}

static saga_status cpu_copy_rows(saga_stream *s, const saga_host_rows *hr, void *dev, bool add) {
    if (is_default(s)) {
        rows_copy(s->be, hr, dev, add);
        return SAGA_OK;
    }
    return op_queue(s, &(cpu_op){.kind = CPU_OP_ROWS, .u.rows = {*hr, dev, add}});
}

/* Waits for every live asynchronous stream (the default one has nothing pending). The first
 * kept error is reported; the other streams keep theirs for their own synchronize. */
static saga_status cpu_synchronize(saga_backend *be) {
    cpu_ctx *ctx = ctx_peek(be);
    saga_status st = SAGA_OK;
    if (!ctx)
        return SAGA_OK; /* no stream ever had work */
    pthread_mutex_lock(&ctx->streams_lock);
    for (cpu_stream *cs = ctx->streams; cs; cs = cs->next) {
        saga_status st1 = stream_wait_idle(cs, st == SAGA_OK);
        if (st == SAGA_OK)
            st = st1;
    }
    pthread_mutex_unlock(&ctx->streams_lock);
    return st;
}

static const saga_backend_iface cpu_iface = {
    .size = sizeof(saga_backend_iface),
    .destroy = cpu_destroy,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .host_alloc = cpu_host_alloc,
    .host_free = cpu_host_free,
    .stream_new = cpu_stream_new,
    .stream_free = cpu_stream_free,
    .stream_sync = cpu_stream_sync,
    .stream_wait_event = cpu_stream_wait_event,
    .event_new = cpu_event_new,
    .event_free = cpu_event_free,
    .event_record = cpu_event_record,
    .event_sync = cpu_event_sync,
    .event_query = cpu_event_query,
    .memcpy_async = cpu_memcpy_async,
    .synchronize = cpu_synchronize,
    .memset_async = cpu_memset_async,
    .launch_host_fn = cpu_launch_host_fn,
    .event_elapsed = cpu_event_elapsed,
    .copy_rows = cpu_copy_rows,
};

saga_status saga_cpu_backend_init(saga_backend *be, const saga_kernels *kernels) {
    long pages = sysconf(_SC_PHYS_PAGES);
    long page_size = sysconf(_SC_PAGESIZE);
    be->iface = &cpu_iface;
    be->kernels = kernels;
    be->ctx = NULL; /* made on first use: see "lazy state" */
    be->kind = SAGA_BACKEND_CPU;
    snprintf(be->name, sizeof be->name, "cpu");
    be->device_total = pages > 0 && page_size > 0 ? (size_t)pages * (size_t)page_size : 0;
    return SAGA_OK;
}
