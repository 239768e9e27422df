/* sched.c - the block scheduler (sched_impl.h): residency under a cap, Belady eviction from the
 * plan, loads and write-backs on a copy stream (host rows gathered and added by the backend, host
 * packing through a ring of staging buffers). */
#include "sched_impl.h"

#include "saga_log.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    N_SLOTS = 4,     /* staging buffers in flight: two loads ahead, two write-backs behind */
    N_TICKETS = 256, /* host functions queued on the copy stream and not yet run */
};

#define NO_USE INT32_MAX

struct saga_blk {
    saga_sched *s;
    size_t bytes;
    saga_blk_life life;
    const char *kind;
    void *host;
    /* saga_blk_set_rows: rows.base set, rows.rows the block's own copy of the indices (the
     * backend's host memory); add_rows: written back by adding into those rows */
    saga_host_rows rows;
    bool add_rows;
    saga_blk_pack_fn pack;
    saga_blk_unpack_fn unpack;
    void *user;
    void *dev;
    bool dev_valid;  /* the device copy holds the content (or will, once its load completes) */
    bool host_valid; /* the host copy holds the content (in copy-stream order) */
    bool loading;    /* a load was issued and not yet waited for */
    bool copying;    /* ev marks a copy still possibly in flight */
    saga_event *ev;  /* the last copy that touched the device buffer */
    /* saga_blk_host_changed_after: the host content is there once this event (another stream's,
     * or another device's) completes; the next load waits for it first */
    saga_event *host_ev;
    bool pinned; /* used by the running step */
    int *uses;   /* the steps of the plan that use the block, ascending */
    int n_uses, cap_uses;
    int cursor; /* first entry of uses not yet run */
};

typedef struct use {
    saga_blk *b;
    uint8_t mode;
    uint8_t flags;
} use;

typedef struct step {
    int first, n; /* into uses */
    bool barrier; /* loads wait until the previous step has ended */
    bool hold;    /* and until this step begins */
    size_t cap;   /* the blocks it may hold at once (saga_sched_step_cap; 0: the scheduler's) */
} step;

/* One traced interval (saga_sched_set_trace): two events recorded on the stream that does the
 * work, so the times are the device's (a host function in the stream would stall it and move what
 * it measures), taken against the trace's origin event once the streams have passed both. */
typedef struct trace_rec {
    struct trace_rec *next;
    const char *what; /* "h2d", "d2h" or "compute" */
    const char *block;
    size_t bytes;
    int plan, step;
    saga_event *ev[2]; /* start, end (NULL until recorded) */
} trace_rec;

/* A staging buffer. Its uses are all queued on the copy stream, in order, so a use never passes
 * the one before: the host waits for its last copy only before it replaces the buffer. */
typedef struct slot {
    void *buf;
    size_t cap;
    saga_event *ev; /* the copy that last used buf */
    bool busy;
} slot;

/* The closure of one host function that fills or drains a staging buffer: a ring of them, so that
 * a queued function keeps its own block and buffer while the host goes on issuing. run is set by
 * the function when it has run; an entry is taken again only after that (the host waits for the
 * copy stream only if the ring has gone round while the functions lag behind). */
typedef struct ticket {
    saga_blk *b;
    void *buf;
    atomic_bool run;
} ticket;

struct saga_sched {
    saga_backend *be;
    saga_stream *copy; /* the default stream when copies run inline (saga_backend_copies_inline) */
    saga_event *compute_ev;
    size_t cap, resident;
    size_t room; /* the block room this scheduler set on the backend (0: none) */
    void (*trim)(void *);
    void *trim_user;
    saga_blk **blocks;
    int n_blocks, cap_blocks;
    use *uses;
    int n_uses, cap_uses_;
    step *steps;
    int n_steps, cap_steps;
    bool plan_failed;
    int running; /* the step between begin and end, or -1 */
    slot slots[N_SLOTS];
    int next_slot;
    ticket tickets[N_TICKETS];
    int next_ticket;
    saga_sched_stats st;
    FILE *trace;                        /* NULL: no trace, and nothing below is touched */
    trace_rec *trace_head, *trace_tail; /* recorded or in flight, in issue order */
    trace_rec *computing;               /* the running step's */
    saga_event *trace_origin;           /* time 0 of the trace, on the first traced stream */
    int n_plans;
    /* saga_sched_set_timed: pairs of events (start, end) recorded since the last finish, each
     * with what it times; the pool grows to a pass's count and is reused */
    bool timed;
    double timed_seconds[3]; /* since the last reset: by TIMED_H2D, TIMED_D2H, TIMED_EXPOSED */
    saga_event **tev;
    uint8_t *tev_what;  /* per pair: TIMED_H2D, TIMED_D2H, TIMED_EXPOSED */
    int n_tev, cap_tev; /* in pairs */
    /* a reset while pairs were in flight (a pass not waited for) sets them aside: the first
     * n_held pairs are the earlier pass's, read into held_seconds at the next finish */
    int n_held;
    bool held;
    double held_seconds[3];
    /* place_step's blocks to place, in order (cap_placing entries) */
    struct placing *placing;
    int cap_placing;
};

enum { TIMED_H2D, TIMED_D2H, TIMED_EXPOSED };

/* ---- helpers ------------------------------------------------------------------------------ */

static int next_use(const saga_blk *b) {
    return b->cursor < b->n_uses ? b->uses[b->cursor] : NO_USE;
}

static saga_status wait_copy(saga_sched *s, saga_blk *b) {
    saga_status st = SAGA_OK;
    if (b->copying) {
        double t0 = saga_now();
        st = saga_event_synchronize(b->ev);
        s->st.wait_seconds += saga_now() - t0;
        b->copying = false;
        b->loading = false;
    }
    return st;
}

/* Compute issued from now on runs after b's last copy: a step that overwrites b must not race
 * the write-back still reading it. The device waits, not the host, where the backend can (on
 * the CPU's synchronous default stream the caller blocks, which counts as exposed copy time). */
static saga_status compute_after_copy(saga_sched *s, saga_blk *b) {
    double t0 = saga_now();
    saga_status st = saga_stream_wait_event(saga_backend_default_stream(s->be), b->ev);
    s->st.wait_seconds += saga_now() - t0;
    return st;
}

static void release_dev(saga_sched *s, saga_blk *b) {
    if (!b->dev)
        return;
    saga_backend_free(s->be, b->dev, b->bytes);
    b->dev = NULL;
    b->dev_valid = false;
    s->resident -= b->bytes;
}

/* Drops b's host rows (saga_blk_set_rows). */
static void drop_rows(saga_blk *b) {
    saga_backend_host_free(b->s->be, (void *)b->rows.rows, (size_t)b->rows.n * sizeof(int32_t));
    b->rows = (saga_host_rows){0};
}

/* Frees b's own memory (its device copy gone already). */
static void blk_free(saga_blk *b) {
    saga_event_free(&b->ev);
    drop_rows(b);
    saga_free(b->uses);
    saga_free(b);
}

static void pack_tramp(void *arg) {
    ticket *t = arg;
    t->b->pack(t->b->user, t->buf);
    atomic_store_explicit(&t->run, true, memory_order_release);
}

static void unpack_tramp(void *arg) {
    ticket *t = arg;
    t->b->unpack(t->b->user, t->buf);
    atomic_store_explicit(&t->run, true, memory_order_release);
}

/* A traced interval of work about to be queued on stream (its start event recorded at once, in
 * stream order), or NULL in *out when no trace is on. */
static saga_status trace_begin(saga_sched *s, saga_stream *stream, const char *what,
                               const saga_blk *b, int t, trace_rec **out) {
    saga_status st = SAGA_OK;
    *out = NULL;
    if (!s->trace)
        return SAGA_OK;
    if (!s->trace_origin) {
        SAGA_TRY(saga_event_new(&s->trace_origin, s->be));
        SAGA_TRY(saga_event_record(s->trace_origin, stream));
    }
    trace_rec *r = NULL;
    SAGA_TRY(saga_alloc_zeroed((void **)&r, 1, sizeof *r, "a scheduler trace record"));
    r->what = what;
    r->block = b ? b->kind : NULL;
    r->bytes = b ? b->bytes : 0;
    r->plan = s->n_plans;
    r->step = t;
    if (s->trace_tail)
        s->trace_tail->next = r;
    else
        s->trace_head = r;
    s->trace_tail = r;
    SAGA_TRY(saga_event_new(&r->ev[0], s->be));
    SAGA_TRY(saga_event_record(r->ev[0], stream));
    *out = r;
fail:
    return st;
}

static saga_status trace_end(saga_sched *s, saga_stream *stream, trace_rec *r) {
    saga_status st = SAGA_OK;
    if (!r)
        return SAGA_OK;
    SAGA_TRY(saga_event_new(&r->ev[1], s->be));
    SAGA_TRY(saga_event_record(r->ev[1], stream));
fail:
    return st;
}

static void trace_rec_free(trace_rec *r) {
    saga_event_free(&r->ev[0]);
    saga_event_free(&r->ev[1]);
    saga_free(r);
}

/* Writes the records whose work has completed, as one JSON line each, and frees them. Waits
 * for the device first (only when tracing): the events are the streams'. */
static void trace_flush(saga_sched *s) {
    if (!s->trace || !s->trace_head)
        return;
    (void)saga_backend_synchronize(s->be);
    trace_rec **link = &s->trace_head, *last = NULL;
    while (*link) {
        trace_rec *r = *link;
        if (!r->ev[1] || r == s->computing) {
            last = r;
            link = &r->next;
            continue;
        }
        double start = -1, end = -1;
        if (saga_event_elapsed(s->trace_origin, r->ev[0], &start) != SAGA_OK ||
            saga_event_elapsed(s->trace_origin, r->ev[1], &end) != SAGA_OK)
            start = end = -1; /* not measurable: written as such rather than guessed */
        if (r->block)
            fprintf(s->trace,
                    "{\"trace\":\"copy\",\"stream\":\"copy\",\"dir\":\"%s\",\"block\":\"%s\","
                    "\"bytes\":%zu,\"plan\":%d,\"step\":%d,\"start\":%.9f,\"end\":%.9f}\n",
                    r->what, r->block, r->bytes, r->plan, r->step, start, end);
        else
            fprintf(s->trace,
                    "{\"trace\":\"compute\",\"stream\":\"compute\",\"plan\":%d,\"step\":%d,"
                    "\"start\":%.9f,\"end\":%.9f}\n",
                    r->plan, r->step, start, end);
        *link = r->next;
        trace_rec_free(r);
    }
    s->trace_tail = last;
}

/* Adds the timing pairs the streams have passed (all: every pair, after a finish) to the
 * figures, the first n_held to the earlier pass's (held_seconds), and keeps the others, in order,
 * at the front; their events stay in the pool. Without all it does not wait: a plan of many steps
 * between finishes (PageRank's iterations) reuses the pairs in flight. */
static void timed_read(saga_sched *s, bool all) {
    int w = 0, held = 0;
    const bool had_held = s->n_held > 0;
    for (int k = 0; k < s->n_tev; k++) {
        const bool early = k < s->n_held;
        double dt = 0;
        if (all || (saga_event_done(s->tev[2 * k + 1]) && saga_event_done(s->tev[2 * k]))) {
            if (saga_event_elapsed(s->tev[2 * k], s->tev[2 * k + 1], &dt) == SAGA_OK && dt >= 0)
                (early ? s->held_seconds : s->timed_seconds)[s->tev_what[k]] += dt;
            continue;
        }
        for (int e = 0; e < 2; e++) { /* in flight: to the front, its slot's events behind */
            saga_event *ev = s->tev[2 * w + e];
            s->tev[2 * w + e] = s->tev[2 * k + e];
            s->tev[2 * k + e] = ev;
        }
        s->tev_what[w++] = s->tev_what[k];
        held += early;
    }
    s->n_tev = w;
    s->n_held = held;
    s->held = s->held || (had_held && held == 0);
}

/* The next pair of timing events, recorded as the start of `what` on stream; *pair is its index
 * for timed_end, or -1 when not timing. Every pair recorded before has its end recorded. */
static saga_status timed_begin(saga_sched *s, saga_stream *stream, int what, int *pair) {
    saga_status st = SAGA_OK;
    *pair = -1;
    if (!s->timed)
        return SAGA_OK;
    bool full = s->n_tev == s->cap_tev;
    if (full && s->cap_tev > 0) { /* the pool grows when over half of it is still in flight */
        timed_read(s, false);
        full = s->n_tev > s->cap_tev / 2;
    }
    if (full) {
        int cap = s->cap_tev ? 2 * s->cap_tev : 64;
        SAGA_TRY(saga_realloc_array((void **)&s->tev, (size_t)cap * 2, sizeof *s->tev,
                                    "the scheduler's timing events"));
        for (int i = 2 * s->cap_tev; i < 2 * cap; i++)
            s->tev[i] = NULL;
        SAGA_TRY(saga_realloc_array((void **)&s->tev_what, (size_t)cap, 1,
                                    "the scheduler's timing events"));
        s->cap_tev = cap;
    }
    const int k = s->n_tev;
    for (int e = 0; e < 2; e++)
        if (!s->tev[2 * k + e])
            SAGA_TRY(saga_event_new(&s->tev[2 * k + e], s->be));
    SAGA_TRY(saga_event_record(s->tev[2 * k], stream));
    s->tev_what[k] = (uint8_t)what;
    s->n_tev++;
    *pair = k;
fail:
    return st;
}

static saga_status timed_end(saga_sched *s, saga_stream *stream, int pair) {
    return pair < 0 ? SAGA_OK : saga_event_record(s->tev[2 * pair + 1], stream);
}

/* The next staging buffer, of at least bytes, with a closure for the host function that fills or
 * drains it for b. The caller queues the function and the copy on the copy stream, after the
 * buffer's earlier uses, and records sl->ev after them. */
static saga_status get_slot(saga_sched *s, size_t bytes, saga_blk *b, slot **out, ticket **tk) {
    saga_status st = SAGA_OK;
    slot *sl = &s->slots[s->next_slot];
    s->next_slot = (s->next_slot + 1) % N_SLOTS;
    ticket *t = &s->tickets[s->next_ticket];
    s->next_ticket = (s->next_ticket + 1) % N_TICKETS;
    if (!atomic_load_explicit(&t->run, memory_order_acquire)) {
        double t0 = saga_now();
        SAGA_TRY(saga_stream_synchronize(s->copy));
        s->st.wait_seconds += saga_now() - t0;
    }
    if (sl->cap < bytes && sl->busy) { /* the old buffer goes: its copies must be done */
        double t0 = saga_now();
        SAGA_TRY(saga_event_synchronize(sl->ev));
        s->st.wait_seconds += saga_now() - t0;
        sl->busy = false;
    }
    if (sl->cap < bytes) {
        saga_backend_host_free(s->be, sl->buf, sl->cap);
        sl->buf = NULL;
        sl->cap = 0;
        size_t cap = bytes + bytes / 4;
        SAGA_TRY(saga_backend_host_alloc(s->be, &sl->buf, cap));
        sl->cap = cap;
    }
    t->b = b;
    t->buf = sl->buf;
    atomic_store_explicit(&t->run, false, memory_order_relaxed);
    *out = sl;
    *tk = t;
fail:
    return st;
}

/* Whether the copies run inline (saga_backend_copies_inline): on the default stream. */
static bool copies_inline(const saga_sched *s) {
    return s->copy == saga_backend_default_stream(s->be);
}

/* Copies on a stream of their own wait for the compute issued so far (the buffer may have served
 * a block it still reads); inline ones follow it in order already. */
static saga_status after_compute(saga_sched *s) {
    if (copies_inline(s))
        return SAGA_OK;
    saga_status st = saga_event_record(s->compute_ev, saga_backend_default_stream(s->be));
    return st < 0 ? st : saga_stream_wait_event(s->copy, s->compute_ev);
}

/* Copies run inline take the compute's time: they count as waits, so that the overlap statistic
 * says none of them was hidden. */
static void inline_wait(saga_sched *s, double t0) {
    if (copies_inline(s))
        s->st.wait_seconds += saga_now() - t0;
}

/* Copies b to the host (after the compute issued so far), or through its unpack function. */
static saga_status writeback(saga_sched *s, saga_blk *b) {
    saga_status st = SAGA_OK;
    const double t0 = copies_inline(s) ? saga_now() : 0.0; /* inline_wait */
    SAGA_TRY(after_compute(s));
    trace_rec *tr = NULL;
    SAGA_TRY(trace_begin(s, s->copy, "d2h", b, s->running, &tr));
    int tp;
    SAGA_TRY(timed_begin(s, s->copy, TIMED_D2H, &tp));
    if (b->host) {
        SAGA_TRY(saga_memcpy_d2h_async(s->copy, b->host, b->dev, b->bytes));
    } else if (b->rows.base && b->add_rows) {
        SAGA_TRY(saga_add_rows_d2h_async(s->copy, &b->rows, b->dev));
    } else {
        SAGA_CHECK(b->unpack, SAGA_ERR_INTERNAL,
                   "block scheduler: a %s block has no host copy to write back to", b->kind);
        slot *sl = NULL;
        ticket *tk = NULL;
        SAGA_TRY(get_slot(s, b->bytes, b, &sl, &tk));
        SAGA_TRY(saga_memcpy_d2h_async(s->copy, sl->buf, b->dev, b->bytes));
        SAGA_TRY(timed_end(s, s->copy, tp)); /* the copy, not the host's unpacking */
        tp = -1;
        SAGA_TRY(saga_stream_launch_host_fn(s->copy, unpack_tramp, tk));
        SAGA_TRY(saga_event_record(sl->ev, s->copy));
        sl->busy = true;
    }
    SAGA_TRY(timed_end(s, s->copy, tp));
    SAGA_TRY(trace_end(s, s->copy, tr));
    SAGA_TRY(saga_event_record(b->ev, s->copy));
    inline_wait(s, t0);
    b->copying = true;
    b->host_valid = true;
    s->st.d2h_bytes += b->bytes;
    s->st.writebacks++;
fail:
    return st;
}

/* Frees b's device copy, writing it back first when its content is needed later and the host
 * does not have it. */
static saga_status evict(saga_sched *s, saga_blk *b, bool dead) {
    saga_status st = SAGA_OK;
    if (b->dev_valid && !b->host_valid && (next_use(b) != NO_USE || b->life == SAGA_BLK_STATE))
        SAGA_TRY(writeback(s, b));
    /* The compute that used b last has been issued, and on a device it may still run, as may
     * b's last copy. The backend hands b's memory out again only after the work queued on the
     * default stream when it is freed (ordering the other streams after it on the device), so
     * the default stream first waits for b's last copy: then neither is passed by b's next owner,
     * and the host does not wait (on the CPU, whose default stream is synchronous, it does). */
    if (b->copying) {
        SAGA_TRY(compute_after_copy(s, b));
        b->copying = false;
        b->loading = false;
    }
    release_dev(s, b);
    s->st.evictions += !dead;
fail:
    return st;
}

/* The resident, unpinned block whose next use lies furthest ahead, if beyond limit: an idle one,
 * or with loading, one whose load may still be in flight too (prefetched for a later step, it is
 * loaded again then). */
static saga_blk *victim(saga_sched *s, int limit, bool loading) {
    saga_blk *best = NULL;
    int best_use = limit;
    for (int i = 0; i < s->n_blocks; i++) {
        saga_blk *b = s->blocks[i];
        if (!b->dev || b->pinned || (b->loading && !loading))
            continue;
        int u = next_use(b);
        if (u > best_use || (u == best_use && best && u == NO_USE && b->bytes > best->bytes)) {
            best = b;
            best_use = u;
        }
    }
    return best;
}

/* The blocks step t may hold at once (0: no cap). */
static size_t step_cap(const saga_sched *s, int t) {
    return s->cap && s->steps[t].cap > s->cap ? s->steps[t].cap : s->cap;
}

/* An idle victim first, else one whose load may still be in flight (prefetched for a later step):
 * the device's next user of its memory waits for the load, not the host (evict). */
static saga_blk *any_victim(saga_sched *s, int limit) {
    saga_blk *v = victim(s, limit, false);
    return v ? v : victim(s, limit, true);
}

/* Device memory for b, a block of step limit, evicting blocks next used after it. *got false
 * (and SAGA_OK) when no room can be made that way and soft; an error otherwise. */
static saga_status alloc_dev(saga_sched *s, saga_blk *b, int limit, bool soft, bool *got) {
    saga_status st = SAGA_OK;
    *got = false;
    bool trimmed = false;
    const size_t cap = step_cap(s, limit);
    for (;;) {
        if (cap && s->resident + b->bytes > cap) {
            saga_blk *v = victim(s, limit, false);
            if (!v) {
                if (soft)
                    return SAGA_OK;
                return saga_error(SAGA_ERR_BUDGET,
                                  "block scheduler: a %zu-byte %s block does not fit: %zu of the "
                                  "%zu-byte cap are held by blocks needed sooner",
                                  b->bytes, b->kind, s->resident, cap);
            }
            SAGA_TRY(evict(s, v, false));
            continue;
        }
        st = saga_backend_alloc_block(s->be, &b->dev, b->bytes);
        if (st == SAGA_OK)
            break;
        if (st != SAGA_ERR_BUDGET && st != SAGA_ERR_OUT_OF_MEMORY)
            return st;
        if (!trimmed && s->trim) {
            s->trim(s->trim_user);
            trimmed = true;
            continue;
        }
        /* not soft, also a block whose load may be in flight (its range may join two free ones) */
        saga_blk *v = soft ? victim(s, limit, false) : any_victim(s, limit);
        if (!v) {
            if (soft)
                return SAGA_OK;
            return st;
        }
        SAGA_TRY(evict(s, v, false));
    }
    s->resident += b->bytes;
    if (s->resident > s->st.peak_bytes)
        s->st.peak_bytes = s->resident;
    *got = true;
fail:
    return st;
}

/* Issues the load of b on the copy stream (memory must be there). */
static saga_status issue_load(saga_sched *s, saga_blk *b, int t) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(b->host_valid, SAGA_ERR_INTERNAL,
               "block scheduler: a %s block is read before anything wrote it", b->kind);
    const double t0 = copies_inline(s) ? saga_now() : 0.0; /* inline_wait */
    SAGA_TRY(after_compute(s)); /* the buffer may have served a block the compute still reads */
    if (b->host_ev) {           /* the host content's writer, on the device */
        SAGA_TRY(saga_stream_wait_event(s->copy, b->host_ev));
        b->host_ev = NULL;
    }
    trace_rec *tr = NULL;
    SAGA_TRY(trace_begin(s, s->copy, "h2d", b, t, &tr));
    int tp = -1;
    if (b->host) {
        SAGA_TRY(timed_begin(s, s->copy, TIMED_H2D, &tp));
        SAGA_TRY(saga_memcpy_h2d_async(s->copy, b->dev, b->host, b->bytes));
    } else if (b->rows.base && !b->add_rows) {
        SAGA_TRY(timed_begin(s, s->copy, TIMED_H2D, &tp));
        SAGA_TRY(saga_memcpy_rows_h2d_async(s->copy, b->dev, &b->rows));
    } else {
        SAGA_CHECK(b->pack, SAGA_ERR_INTERNAL, "block scheduler: a %s block has no host content",
                   b->kind);
        slot *sl = NULL;
        ticket *tk = NULL;
        SAGA_TRY(get_slot(s, b->bytes, b, &sl, &tk));
        SAGA_TRY(saga_stream_launch_host_fn(s->copy, pack_tramp, tk));
        SAGA_TRY(timed_begin(s, s->copy, TIMED_H2D, &tp)); /* the copy, not the packing */
        SAGA_TRY(saga_memcpy_h2d_async(s->copy, b->dev, sl->buf, b->bytes));
        SAGA_TRY(saga_event_record(sl->ev, s->copy));
        sl->busy = true;
    }
    SAGA_TRY(timed_end(s, s->copy, tp));
    SAGA_TRY(trace_end(s, s->copy, tr));
    SAGA_TRY(saga_event_record(b->ev, s->copy));
    inline_wait(s, t0);
    b->copying = b->loading = true;
    b->dev_valid = true;
    s->st.h2d_bytes += b->bytes;
    s->st.loads++;
fail:
    return st;
}

/* Starts loading step t's inputs while memory allows without evicting what is needed sooner. */
static saga_status prefetch(saga_sched *s, int t) {
    saga_status st = SAGA_OK;
    if (t >= s->n_steps)
        return SAGA_OK;
    const step *sp = &s->steps[t];
    for (int i = 0; i < sp->n; i++) {
        use *u = &s->uses[sp->first + i];
        saga_blk *b = u->b;
        if (!(u->mode & SAGA_USE_READ) || b->dev_valid || b->pinned)
            continue;
        if (!b->host_valid)
            continue; /* its content has not arrived yet: loaded when its step begins */
        bool got = b->dev != NULL;
        if (!got) {
            /* limit t: the blocks step t uses are not evicted to make room for this one */
            SAGA_TRY(alloc_dev(s, b, t, true, &got));
        }
        if (!got)
            break;
        SAGA_TRY(issue_load(s, b, t));
    }
fail:
    return st;
}

/* ---- public ------------------------------------------------------------------------------- */

saga_status saga_sched_new(saga_sched **out, saga_backend *be, size_t cap, void (*trim)(void *),
                           void *trim_user) {
    saga_status st = SAGA_OK;
    saga_sched *s = NULL;
    SAGA_CHECK(out && be, SAGA_ERR_INVALID_ARG, "saga_sched_new: out and backend must be given");
    SAGA_TRY(saga_alloc_zeroed((void **)&s, 1, sizeof *s, "a block scheduler"));
    s->be = be;
    s->cap = cap;
    s->trim = trim;
    s->trim_user = trim_user;
    s->running = -1;
    /* its blocks stay within the cap's bytes at the bottom of an arena: what the steps allocate
     * themselves has the rest, at the top, in one piece */
    if (cap) {
        saga_backend_set_block_room(be, cap);
        s->room = cap;
    }
    if (saga_backend_copies_inline(be))
        s->copy = saga_backend_default_stream(be);
    else
        SAGA_TRY(saga_stream_new(&s->copy, be));
    SAGA_TRY(saga_event_new(&s->compute_ev, be));
    /* a GPU's copies run on its copy engine, unseen by the host: events time them */
    s->timed = saga_backend_get_kind(be) == SAGA_BACKEND_CUDA;
    for (int i = 0; i < N_SLOTS; i++)
        SAGA_TRY(saga_event_new(&s->slots[i].ev, be));
    for (int i = 0; i < N_TICKETS; i++)
        atomic_init(&s->tickets[i].run, true);
    *out = s;
    return SAGA_OK;
fail:
    saga_sched_free(&s);
    return st;
}

void saga_sched_free(saga_sched **sp) {
    if (!sp || !*sp)
        return;
    saga_sched *s = *sp;
    if (s->copy)
        (void)saga_stream_synchronize(s->copy);
    if (s->room && saga_backend_block_room(s->be) == s->room)
        saga_backend_set_block_room(s->be, 0);
    s->computing = NULL;
    trace_flush(s);
    while (s->trace_head) { /* never ended: the run failed */
        trace_rec *r = s->trace_head;
        s->trace_head = r->next;
        trace_rec_free(r);
    }
    saga_event_free(&s->trace_origin);
    for (int i = 0; i < 2 * s->cap_tev; i++)
        saga_event_free(&s->tev[i]);
    saga_free(s->tev);
    saga_free(s->tev_what);
    saga_free(s->placing);
    for (int i = 0; i < s->n_blocks; i++) {
        saga_blk *b = s->blocks[i];
        release_dev(s, b);
        blk_free(b);
    }
    for (int i = 0; i < N_SLOTS; i++) {
        saga_backend_host_free(s->be, s->slots[i].buf, s->slots[i].cap);
        saga_event_free(&s->slots[i].ev);
    }
    saga_event_free(&s->compute_ev);
    if (s->copy && !copies_inline(s))
        saga_stream_free(&s->copy);
    saga_free(s->blocks);
    saga_free(s->uses);
    saga_free(s->steps);
    saga_free(s);
    *sp = NULL;
}

size_t saga_sched_resident_bytes(const saga_sched *s) {
    return s->resident;
}

saga_blk *saga_sched_block(saga_sched *s, size_t bytes, saga_blk_life life, const char *kind) {
    saga_blk *b = NULL;
    if (s->n_blocks == s->cap_blocks) {
        int cap = s->cap_blocks ? 2 * s->cap_blocks : 64;
        if (saga_realloc_array((void **)&s->blocks, (size_t)cap, sizeof *s->blocks,
                               "scheduler blocks") < 0)
            return NULL;
        s->cap_blocks = cap;
    }
    if (saga_alloc_zeroed((void **)&b, 1, sizeof *b, "a block") < 0)
        return NULL;
    if (saga_event_new(&b->ev, s->be) < 0) {
        saga_free(b);
        return NULL;
    }
    b->s = s;
    b->bytes = bytes;
    b->life = life;
    b->kind = kind;
    b->host_valid = life == SAGA_BLK_INPUT || life == SAGA_BLK_STATE;
    s->blocks[s->n_blocks++] = b;
    return b;
}

saga_status saga_sched_block_free(saga_sched *s, saga_blk **bp) {
    saga_blk *b = bp ? *bp : NULL;
    if (!b)
        return SAGA_OK;
    saga_status st = b->copying ? saga_event_synchronize(b->ev) : SAGA_OK;
    release_dev(s, b);
    int i = 0;
    while (i < s->n_blocks && s->blocks[i] != b)
        i++;
    if (i < s->n_blocks) {
        memmove(&s->blocks[i], &s->blocks[i + 1],
                (size_t)(s->n_blocks - i - 1) * sizeof *s->blocks);
        s->n_blocks--;
    }
    /* the plan in force may name it: it is dropped */
    s->n_uses = 0;
    s->n_steps = 0;
    s->running = -1;
    blk_free(b);
    *bp = NULL;
    return st;
}

void saga_blk_set_host(saga_blk *b, void *host) {
    b->host = host;
}

saga_status saga_blk_set_rows(saga_blk *b, const saga_host_rows *hr, bool add) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(hr->base && hr->n >= 0 && (size_t)hr->n * hr->row_bytes == b->bytes,
               SAGA_ERR_INVALID_ARG,
               "block scheduler: %lld rows of %zu bytes for a %zu-byte %s block", (long long)hr->n,
               hr->row_bytes, b->bytes, b->kind);
    int32_t *ids = NULL;
    if (hr->rows && hr->n > 0) {
        SAGA_TRY(saga_backend_host_alloc(b->s->be, (void **)&ids, (size_t)hr->n * sizeof(int32_t)));
        memcpy(ids, hr->rows, (size_t)hr->n * sizeof(int32_t));
    }
    drop_rows(b);
    b->pack = NULL;
    b->unpack = NULL;
    b->rows = *hr;
    b->rows.rows = ids;
    b->add_rows = add;
fail:
    return st;
}

void saga_blk_set_pack(saga_blk *b, saga_blk_pack_fn pack, saga_blk_unpack_fn unpack, void *user) {
    drop_rows(b);
    b->pack = pack;
    b->unpack = unpack;
    b->user = user;
}

void saga_blk_host_changed(saga_blk *b) {
    b->host_valid = true;
    b->dev_valid = false;
    b->host_ev = NULL;
}

void saga_blk_host_changed_after(saga_blk *b, saga_event *ev) {
    saga_blk_host_changed(b);
    b->host_ev = ev;
}

void *saga_blk_dev(const saga_blk *b) {
    return b->pinned ? b->dev : NULL;
}

size_t saga_blk_bytes(const saga_blk *b) {
    return b->bytes;
}

void saga_sched_plan_begin(saga_sched *s) {
    s->n_plans++;
    s->n_uses = 0;
    s->n_steps = 0;
    s->plan_failed = false;
    s->running = -1;
    for (int i = 0; i < s->n_blocks; i++) {
        s->blocks[i]->n_uses = 0;
        s->blocks[i]->cursor = 0;
    }
}

int saga_sched_step(saga_sched *s) {
    if (s->n_steps == s->cap_steps) {
        int cap = s->cap_steps ? 2 * s->cap_steps : 64;
        if (saga_realloc_array((void **)&s->steps, (size_t)cap, sizeof *s->steps,
                               "scheduler steps") < 0) {
            s->plan_failed = true;
            return -1;
        }
        s->cap_steps = cap;
    }
    s->steps[s->n_steps] =
        (step){.first = s->n_uses, .n = 0, .barrier = false, .hold = false, .cap = 0};
    return s->n_steps++;
}

void saga_sched_step_barrier(saga_sched *s, int t) {
    if (t >= 0 && t < s->n_steps)
        s->steps[t].barrier = true;
}

void saga_sched_step_cap(saga_sched *s, int t, size_t cap) {
    if (t >= 0 && t < s->n_steps)
        s->steps[t].cap = cap;
}

void saga_sched_step_hold(saga_sched *s, int t) {
    if (t >= 0 && t < s->n_steps)
        s->steps[t].barrier = s->steps[t].hold = true;
}

void saga_sched_use(saga_sched *s, int t, saga_blk *b, saga_use_mode mode, unsigned flags) {
    if (t < 0 || t != s->n_steps - 1 || !b) {
        s->plan_failed = true; /* uses are appended to the last step only */
        return;
    }
    if (b->n_uses && b->uses[b->n_uses - 1] == t) {
        /* a second use in the same step: one use with both modes; a read keeps its load */
        for (int i = s->steps[t].first; i < s->n_uses; i++)
            if (s->uses[i].b == b) {
                s->uses[i].mode |= (uint8_t)mode;
                s->uses[i].flags |= (uint8_t)flags;
            }
        return;
    }
    if (s->n_uses == s->cap_uses_) {
        int cap = s->cap_uses_ ? 2 * s->cap_uses_ : 256;
        if (saga_realloc_array((void **)&s->uses, (size_t)cap, sizeof *s->uses, "scheduler uses") <
            0) {
            s->plan_failed = true;
            return;
        }
        s->cap_uses_ = cap;
    }
    if (b->n_uses == b->cap_uses) {
        int cap = b->cap_uses ? 2 * b->cap_uses : 8;
        if (saga_realloc_array((void **)&b->uses, (size_t)cap, sizeof *b->uses, "block uses") < 0) {
            s->plan_failed = true;
            return;
        }
        b->cap_uses = cap;
    }
    b->uses[b->n_uses++] = t;
    s->uses[s->n_uses++] = (use){b, (uint8_t)mode, (uint8_t)flags};
    s->steps[t].n++;
}

saga_status saga_sched_plan_end(saga_sched *s) {
    if (s->plan_failed)
        return saga_error(SAGA_ERR_OUT_OF_MEMORY,
                          "block scheduler: the plan could not be recorded");
    for (int t = 0; t < s->n_steps; t++) {
        size_t bytes = 0;
        for (int i = 0; i < s->steps[t].n; i++)
            bytes += s->uses[s->steps[t].first + i].b->bytes;
        const size_t cap = step_cap(s, t);
        if (cap && bytes > cap)
            return saga_error(SAGA_ERR_BUDGET,
                              "block scheduler: step %d needs %zu bytes of blocks at once, more "
                              "than the %zu-byte cap",
                              t, bytes, cap);
    }
    return SAGA_OK;
}

int saga_sched_n_steps(const saga_sched *s) {
    return s->n_steps;
}

/* A step's block waiting for device memory and its place among the step's uses. */
typedef struct placing {
    saga_blk *b;
    int i;
} placing;

/* The larger first, then the earlier use. */
static int placing_cmp(const void *pa, const void *pb) {
    const placing *a = pa, *b = pb;
    if (a->b->bytes != b->b->bytes)
        return a->b->bytes > b->b->bytes ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

/* Whether b's device content can be written back to the host (it has a home there). */
static bool has_host_home(const saga_blk *b) {
    return b->host || (b->rows.base && b->add_rows) || b->unpack;
}

/* Device memory for step t's blocks that have none, the largest first (the small ones then fill
 * what is left between others). When the memory is there but in pieces (a budget's arena), the
 * step's blocks let go of theirs and all are placed again, the largest first: first those whose
 * content is on the host or not yet made; then, when that is not enough, also those whose content
 * is on the device alone and has a home on the host, written back first (read again when the step
 * loads them); last, beyond the block room the scheduler keeps (its blocks' size classes may pass
 * the cap's bytes), rather than fail. Only the blocks of memory nothing in the scheduler owns can
 * then keep the step's blocks apart. */
static saga_status place_step(saga_sched *s, int t) {
    saga_status st = SAGA_OK;
    const step *sp = &s->steps[t];
    if (sp->n > s->cap_placing) {
        SAGA_TRY(saga_realloc_array((void **)&s->placing, (size_t)sp->n, sizeof *s->placing,
                                    "the scheduler's placements"));
        s->cap_placing = sp->n;
    }
    for (int round = 0;; round++) {
        int k = 0;
        for (int i = 0; i < sp->n; i++)
            if (!s->uses[sp->first + i].b->dev)
                s->placing[k++] = (placing){s->uses[sp->first + i].b, i};
        qsort(s->placing, (size_t)k, sizeof *s->placing, placing_cmp);
        st = SAGA_OK;
        if (round == 3)
            saga_backend_set_block_room(s->be, 0);
        for (int j = 0; j < k && st == SAGA_OK; j++) {
            bool got = false;
            st = alloc_dev(s, s->placing[j].b, t, false, &got);
        }
        if (round == 3)
            saga_backend_set_block_room(s->be, s->room);
        if (st != SAGA_ERR_BUDGET || round == 3 || (round == 2 && !s->room))
            return st;
        for (int i = 0; i < sp->n; i++) {
            saga_blk *b = s->uses[sp->first + i].b;
            if (b->dev && (!b->dev_valid || b->host_valid))
                SAGA_TRY(evict(s, b, true));
            else if (b->dev && round == 1 && has_host_home(b))
                SAGA_TRY(evict(s, b, false)); /* written back, loaded again below */
        }
    }
fail:
    return st;
}

saga_status saga_sched_begin(saga_sched *s, int t) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(t >= 0 && t < s->n_steps && s->running < 0, SAGA_ERR_INTERNAL,
               "block scheduler: step %d begun out of order", t);
    const step *sp = &s->steps[t];
    for (int i = 0; i < sp->n; i++)
        s->uses[sp->first + i].b->pinned = true;
    s->running = t;
    SAGA_TRY(place_step(s, t));
    for (int i = 0; i < sp->n; i++) {
        use *u = &s->uses[sp->first + i];
        saga_blk *b = u->b;
        if ((u->mode & SAGA_USE_READ) && !b->dev_valid)
            SAGA_TRY(issue_load(s, b, t));
    }
    /* the step's compute waits on the device for its blocks' loads (issued before the next
     * step's), never the host. A block the step writes may still be read by a write-back an
     * earlier step asked for (a ring slot whose host copy the next stage reads): the compute
     * waits for that copy too, so the host copy gets the old content whole while other copies
     * keep overlapping. Either way the block's copies are then behind the default stream */
    bool waits = false;
    for (int i = 0; i < sp->n && !waits; i++) {
        const use *u = &s->uses[sp->first + i];
        waits = u->b->loading || ((u->mode & SAGA_USE_WRITE) && u->b->copying);
    }
    int tp = -1;
    if (waits)
        SAGA_TRY(timed_begin(s, saga_backend_default_stream(s->be), TIMED_EXPOSED, &tp));
    for (int i = 0; i < sp->n; i++) {
        use *u = &s->uses[sp->first + i];
        saga_blk *b = u->b;
        if (b->loading || ((u->mode & SAGA_USE_WRITE) && b->copying)) {
            SAGA_TRY(compute_after_copy(s, b));
            b->copying = b->loading = false;
        }
    }
    SAGA_TRY(timed_end(s, saga_backend_default_stream(s->be), tp));
    if (t + 1 < s->n_steps && !s->steps[t + 1].barrier)
        SAGA_TRY(prefetch(s, t + 1));
    /* the step's compute is issued on the default stream from here to saga_sched_end */
    SAGA_TRY(trace_begin(s, saga_backend_default_stream(s->be), "compute", NULL, t, &s->computing));
fail:
    return st;
}

saga_status saga_sched_end(saga_sched *s, int t) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(t == s->running, SAGA_ERR_INTERNAL, "block scheduler: step %d ended out of order",
               t);
    if (s->computing) {
        trace_rec *tr = s->computing;
        s->computing = NULL;
        SAGA_TRY(trace_end(s, saga_backend_default_stream(s->be), tr));
    }
    const step *sp = &s->steps[t];
    for (int i = 0; i < sp->n; i++) {
        use *u = &s->uses[sp->first + i];
        saga_blk *b = u->b;
        b->cursor++;
        if (u->mode & SAGA_USE_WRITE) {
            b->dev_valid = true;
            b->host_valid = false;
        }
        if (u->flags & SAGA_USE_WRITEBACK)
            SAGA_TRY(writeback(s, b));
    }
    for (int i = 0; i < sp->n; i++) {
        use *u = &s->uses[sp->first + i];
        saga_blk *b = u->b;
        b->pinned = false;
        if (u->flags & SAGA_USE_DISCARD) {
            b->dev_valid = false; /* nothing to write back */
            if (b->dev)
                SAGA_TRY(evict(s, b, true));
            b->host_valid = false;
        } else if (b->life == SAGA_BLK_TEMP && next_use(b) == NO_USE && b->dev) {
            SAGA_TRY(evict(s, b, true));
        }
    }
    s->running = -1;
    if (t + 1 < s->n_steps && s->steps[t + 1].barrier && !s->steps[t + 1].hold)
        SAGA_TRY(prefetch(s, t + 1));
fail:
    return st;
}

saga_status saga_sched_download(saga_sched *s, saga_blk *b) {
    saga_status st = SAGA_OK;
    if (b->dev && b->dev_valid && !b->host_valid)
        SAGA_TRY(writeback(s, b));
    SAGA_TRY(wait_copy(s, b));
fail:
    return st;
}

bool saga_sched_give_back(saga_sched *s, size_t bytes) {
    size_t freed = 0;
    while (freed < bytes) {
        saga_blk *v = any_victim(s, -1);
        if (!v || evict(s, v, false) < 0)
            break;
        freed += v->bytes;
    }
    return freed > 0;
}

saga_status saga_sched_copies_event(saga_sched *s, saga_event *ev) {
    return saga_event_record(ev, s->copy);
}

/* What the copies' completion lets go: the blocks' copy flags, the staging slots, the timing
 * events (whose streams have completed) and the trace. */
static void finished(saga_sched *s) {
    for (int i = 0; i < s->n_blocks; i++)
        s->blocks[i]->copying = s->blocks[i]->loading = false;
    for (int i = 0; i < N_SLOTS; i++)
        s->slots[i].busy = false;
    if (s->n_tev)
        timed_read(s, true);
    trace_flush(s);
}

saga_status saga_sched_finish(saga_sched *s) {
    saga_status st = SAGA_OK;
    double t0 = saga_now();
    SAGA_TRY(saga_stream_synchronize(s->copy));
    s->st.wait_seconds += saga_now() - t0;
    if (s->n_tev)
        SAGA_TRY(saga_stream_synchronize(saga_backend_default_stream(s->be)));
    finished(s);
fail:
    return st;
}

saga_status saga_sched_finish_device(saga_sched *s) {
    saga_status st = SAGA_OK;
    double t0 = saga_now();
    SAGA_TRY(saga_backend_synchronize(s->be));
    s->st.wait_seconds += saga_now() - t0;
    finished(s);
fail:
    return st;
}

saga_status saga_sched_set_timed(saga_sched *s, bool on) {
    saga_status st = SAGA_OK;
    if (s->n_tev) { /* pairs of a pass not finished: read what completed */
        SAGA_TRY(saga_backend_synchronize(s->be));
        timed_read(s, true);
    }
    s->timed = on;
fail:
    return st;
}

void saga_sched_set_trace(saga_sched *s, FILE *f) {
    s->trace = f;
}

/* The timed figures of out from seconds by TIMED_H2D, TIMED_D2H, TIMED_EXPOSED. */
static void timed_figures(const double seconds[3], saga_sched_stats *out) {
    out->h2d_seconds = seconds[TIMED_H2D];
    out->copy_seconds = out->h2d_seconds + seconds[TIMED_D2H];
    out->wait_seconds = seconds[TIMED_EXPOSED];
}

void saga_sched_get_stats(const saga_sched *s, saga_sched_stats *out) {
    *out = s->st;
    out->copies_inline = copies_inline(s);
    out->timed = s->timed;
    if (s->timed) {
        timed_figures(s->timed_seconds, out);
    } else {
        saga_backend_stats bs;
        saga_backend_get_stats(s->be, &bs);
        out->copy_seconds = bs.copy_seconds;
        out->h2d_seconds = 0;
    }
}

void saga_sched_reset_stats(saga_sched *s) {
    memset(&s->st, 0, sizeof s->st);
    /* a pass not finished: what was read of its pairs so far (timed_read) is its too */
    if (s->n_tev > 0)
        memcpy(s->held_seconds, s->timed_seconds, sizeof s->held_seconds);
    else
        memset(s->held_seconds, 0, sizeof s->held_seconds);
    memset(s->timed_seconds, 0, sizeof s->timed_seconds);
    s->st.peak_bytes = s->resident;
    s->n_held = s->n_tev;
    s->held = false;
}

bool saga_sched_held_stats(const saga_sched *s, saga_sched_stats *out) {
    if (!s->held || !s->timed)
        return false;
    memset(out, 0, sizeof *out);
    out->timed = true;
    out->copies_inline = copies_inline(s);
    timed_figures(s->held_seconds, out);
    return true;
}
