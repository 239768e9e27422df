/* nn_ctx.c - the op context: sticky error, context-owned tensors with a cache of released
 * buffers, the tape and its regions, and the reverse walk of saga_backward. */
#include "nn_internal.h"

#include <stdio.h>
#include <string.h>

struct saga_node {
    saga_tensor *out;
    saga_tensor *in[SAGA_NODE_MAX_INPUTS];
    bool needs[SAGA_NODE_MAX_INPUTS];
    int n_in;
    saga_node_backward_fn bwd;
    void *state;
    saga_node_free_fn free_state;
};

typedef struct cached_buf {
    void *p;
    size_t n;
} cached_buf;

struct saga_ctx {
    saga_backend *be;
    uint64_t seed;
    uint64_t rng_counter;
    bool (*pressure)(void *user, size_t bytes);
    void *pressure_user;
    const int32_t *row_ids; /* device: the logical rows of a block's rows, or NULL */
    int64_t n_row_ids;
    int64_t row_base; /* row of the logical tensor that row 0 of a dropout input stands for */
    bool training;
    saga_status status;
    char msg[512]; /* the sticky error's message, restored by saga_ctx_status */

    saga_tensor **tensors; /* owned, in creation order (regions cut this list) */
    size_t n_tensors, cap_tensors;
    saga_node **nodes; /* the tape, in recording order */
    size_t n_nodes, cap_nodes;
    /* Released buffers by exact size. Steady-state training asks for the same sizes every
     * step, so after the first step no op touches fresh memory. */
    cached_buf *cache;
    size_t n_cache, cap_cache;
    saga_tensor *spare; /* released tensor structs, linked through grad */

    /* saga_ctx_set_defer: the deferred product, its kernel and arguments, and its output's
     * place in tensors[] */
    bool defer;
    saga_tensor *lazy_out;
    saga_lazy_fn lazy_fn;
    _Alignas(8) unsigned char lazy_args[SAGA_LAZY_ARGS];
    size_t lazy_at;

    /* The pinned staging of uploads (saga_ctx_from_host, saga_ctx_stage): two banks of
     * stage_cap / 2 bytes used in turn. Host values are written into the current bank at the
     * call and the device copies them out in stream order; bank_ev[k], recorded on the stream
     * when the staging leaves bank k, is what a return to bank k waits for, and only when the
     * device has not passed it. So a host one pass or more ahead of the device writes into one
     * bank while the device still reads the other. Where the other bank's copies have not run,
     * the ring grows instead (to at most 8 times the largest request; then it waits), and the
     * buffer it leaves is freed once the device has passed old_ev. */
    unsigned char *stage;
    size_t stage_cap, stage_used; /* stage_used: bytes taken in the current bank */
    int bank;
    saga_event *bank_ev[2];
    bool bank_rec[2]; /* bank_ev[k] recorded since the buffer was made */
    size_t stage_max; /* the largest request staged */
    unsigned char *old;
    size_t old_cap;
    saga_event *old_ev;
    size_t staged;  /* bytes staged since the context was made */
    bool recording; /* saga_ctx_record_begin .. end: the ring may not start over */
};

/* ---- buffers and tensors ------------------------------------------------------------------ */

static void cache_flush(saga_ctx *c) {
    for (size_t i = 0; i < c->n_cache; i++)
        saga_backend_free(c->be, c->cache[i].p, c->cache[i].n);
    c->n_cache = 0;
}

/* A buffer of exactly n bytes: a cached one when there is, else a fresh one; when the backend
 * refuses, the cache is given back and the allocation tried once more. */
static saga_status buf_get(saga_ctx *c, size_t n, void **out) {
    if (n == 0) {
        *out = NULL;
        return SAGA_OK;
    }
    for (size_t i = c->n_cache; i-- > 0;) {
        if (c->cache[i].n == n) {
            *out = c->cache[i].p;
            c->cache[i] = c->cache[--c->n_cache];
            return SAGA_OK;
        }
    }
    saga_status st = saga_backend_alloc(c->be, out, n);
    if ((st == SAGA_ERR_BUDGET || st == SAGA_ERR_OUT_OF_MEMORY) && c->n_cache) {
        cache_flush(c);
        st = saga_backend_alloc(c->be, out, n);
    }
    /* then whoever else holds device memory for this context (a block scheduler) gives some
     * back, as long as it has any to give */
    while ((st == SAGA_ERR_BUDGET || st == SAGA_ERR_OUT_OF_MEMORY) && c->pressure &&
           c->pressure(c->pressure_user, n))
        st = saga_backend_alloc(c->be, out, n);
    return st;
}

static void buf_put(saga_ctx *c, void *p, size_t n) {
    if (!p)
        return;
    if (c->n_cache == c->cap_cache) {
        size_t cap = c->cap_cache ? 2 * c->cap_cache : 64;
        if (saga_realloc_array((void **)&c->cache, cap, sizeof *c->cache, "buffer cache") < 0) {
            saga_backend_free(c->be, p, n); /* no room to remember it: give it back */
            return;
        }
        c->cap_cache = cap;
    }
    c->cache[c->n_cache++] = (cached_buf){p, n};
}

/* A context tensor struct with its buffer, not yet on any list. Sets no sticky error. */
static saga_status tensor_make(saga_ctx *c, saga_dtype dt, int64_t rows, int64_t cols,
                               saga_tensor **out) {
    saga_status st = SAGA_OK;
    saga_tensor *t = NULL;
    SAGA_TRY(saga_tensor_check_shape(dt, rows, cols));
    size_t esize = saga_dtype_size(dt);
    if (c->spare) {
        t = c->spare;
        c->spare = t->grad;
        memset(t, 0, sizeof *t);
    } else {
        SAGA_TRY(saga_alloc_zeroed((void **)&t, 1, sizeof *t, "a tensor"));
    }
    t->be = c->be;
    t->dtype = dt;
    t->rows = rows;
    t->cols = cols;
    t->nbytes = (size_t)rows * (size_t)cols * esize;
    t->owner = c;
    SAGA_TRY(buf_get(c, t->nbytes, &t->data));
    *out = t;
    return SAGA_OK;
fail:
    if (t) {
        t->grad = c->spare;
        c->spare = t;
    }
    return st;
}

/* Gives a context tensor's buffer (and its gradient's) back to the cache. */
static void tensor_release(saga_ctx *c, saga_tensor *t) {
    if (!t)
        return;
    if (t->grad)
        tensor_release(c, t->grad);
    if (!t->borrowed)
        buf_put(c, t->data, t->nbytes);
    memset(t, 0, sizeof *t);
    t->grad = c->spare;
    c->spare = t;
}

static saga_status grow(void **arr, size_t *cap, size_t need, size_t elem, const char *what) {
    if (need <= *cap)
        return SAGA_OK;
    size_t n = *cap ? 2 * *cap : 256;
    while (n < need)
        n *= 2;
    saga_status st = saga_realloc_array(arr, n, elem, what);
    if (st == SAGA_OK)
        *cap = n;
    return st;
}

saga_tensor *saga_ctx_tensor(saga_ctx *c, saga_dtype dt, int64_t rows, int64_t cols) {
    saga_status st = SAGA_OK;
    saga_tensor *t = NULL;
    if (!c)
        return NULL;
    SAGA_TRY(grow((void **)&c->tensors, &c->cap_tensors, c->n_tensors + 1, sizeof *c->tensors,
                  "context tensor list"));
    SAGA_TRY(tensor_make(c, dt, rows, cols, &t));
    c->tensors[c->n_tensors++] = t;
    return t;
fail:
    saga_ctx_fail(c, st);
    return NULL;
}

/* Frees the buffer the ring left (after the device passed it; wait: waiting for that). */
static saga_status old_release(saga_ctx *c, bool wait) {
    saga_status st = SAGA_OK;
    if (!c->old)
        return SAGA_OK;
    if (!saga_event_done(c->old_ev)) {
        if (!wait)
            return SAGA_OK;
        SAGA_TRY(saga_event_synchronize(c->old_ev));
    }
    saga_backend_host_free(c->be, c->old, c->old_cap);
    c->old = NULL;
    c->old_cap = 0;
fail:
    return st;
}

/* Room for n bytes (a multiple of 64) at c->stage + c->bank * (stage_cap / 2) + c->stage_used:
 * in the current bank, else in the other one (see saga_ctx), else in a larger ring. */
static saga_status stage_room(saga_ctx *c, size_t n) {
    saga_status st = SAGA_OK;
    const size_t half = c->stage_cap / 2;
    if (c->stage_used + n <= half)
        return SAGA_OK;
    /* the recorded copies of what is in the ring have not run: it may not be left or
     * overwritten, and no event may be recorded */
    SAGA_CHECK(!c->recording, SAGA_ERR_UNSUPPORTED,
               "a recorded pass staged more uploads than the %zu bytes room was made for",
               half - c->stage_used);
    saga_stream *s = saga_ctx_stream(c);
    c->stage_max = n > c->stage_max ? n : c->stage_max;
    SAGA_TRY(old_release(c, false));
    if (c->stage) { /* leave the current bank: after every copy out of it queued so far */
        if (!c->bank_ev[c->bank])
            SAGA_TRY(saga_event_new(&c->bank_ev[c->bank], c->be));
        SAGA_TRY(saga_event_record(c->bank_ev[c->bank], s));
        c->bank_rec[c->bank] = true;
    }
    const int other = 1 - c->bank;
    const bool busy = c->bank_rec[other] && !saga_event_done(c->bank_ev[other]);
    if (n <= half && (!busy || c->stage_cap >= 8 * c->stage_max)) {
        if (busy)
            SAGA_TRY(saga_event_synchronize(c->bank_ev[other]));
        c->bank = other;
        c->stage_used = 0;
        return SAGA_OK;
    }
    /* a larger ring, each bank room for twice the request at least; the buffer left behind is
     * freed once the device has passed the event just recorded (after every copy out of it) */
    size_t cap = c->stage_cap * 2 > 4 * n ? c->stage_cap * 2 : 4 * n;
    cap = cap > ((size_t)128 << 10) ? cap : (size_t)128 << 10;
    void *p = NULL;
    SAGA_TRY(old_release(c, true)); /* one buffer left behind at a time */
    SAGA_TRY(saga_backend_host_alloc(c->be, &p, cap));
    if (c->stage) {
        saga_event *e = c->old_ev;
        c->old_ev = c->bank_ev[c->bank];
        c->bank_ev[c->bank] = e;
        c->old = c->stage;
        c->old_cap = c->stage_cap;
    }
    c->stage = p;
    c->stage_cap = cap;
    c->bank = 0;
    c->stage_used = 0;
    c->bank_rec[0] = c->bank_rec[1] = false;
fail:
    return st;
}

saga_status saga_ctx_stage(saga_ctx *c, size_t bytes, void **host) {
    saga_status st = SAGA_OK;
    const size_t at = (bytes + 63) / 64 * 64;
    *host = NULL;
    SAGA_TRY(stage_room(c, at));
    *host = c->stage + (size_t)c->bank * (c->stage_cap / 2) + c->stage_used;
    c->stage_used += at;
    c->staged += at;
fail:
    return st;
}

saga_status saga_ctx_upload(saga_ctx *c, void *dev, const void *host, size_t bytes) {
    saga_status st = SAGA_OK;
    void *p = NULL;
    if (!bytes)
        return SAGA_OK;
    SAGA_TRY(saga_ctx_stage(c, bytes, &p));
    memcpy(p, host, bytes);
    SAGA_TRY(saga_memcpy_h2d_async(saga_ctx_stream(c), dev, p, bytes));
fail:
    return st;
}

saga_tensor *saga_ctx_from_host(saga_ctx *c, saga_dtype dt, int64_t rows, int64_t cols,
                                const void *host) {
    saga_status st = SAGA_OK;
    saga_tensor *t = saga_ctx_tensor(c, dt, rows, cols);
    if (!t || !t->nbytes)
        return t;
    SAGA_TRY(saga_ctx_upload(c, t->data, host, t->nbytes));
    return t;
fail:
    saga_ctx_fail(c, st);
    return NULL;
}

size_t saga_ctx_staged_bytes(const saga_ctx *c) {
    return c->staged;
}

saga_status saga_ctx_record_begin(saga_ctx *c, size_t bytes) {
    saga_status st = SAGA_OK;
    SAGA_TRY(stage_room(c, (bytes + 63) / 64 * 64)); /* leaves the bank now, if it has to */
    c->recording = true;
fail:
    return st;
}

saga_status saga_ctx_record_end(saga_ctx *c, bool launched) {
    (void)launched; /* a launch's copies out of the ring are before the event that leaves the
                     * bank, recorded on the stream after it */
    c->recording = false;
    return SAGA_OK;
}

saga_tensor *saga_ctx_wrap(saga_ctx *c, saga_dtype dt, int64_t rows, int64_t cols, void *data) {
    saga_status st = SAGA_OK;
    saga_tensor *t = NULL;
    if (!c)
        return NULL;
    SAGA_TRY(saga_tensor_check_shape(dt, rows, cols));
    SAGA_TRY(grow((void **)&c->tensors, &c->cap_tensors, c->n_tensors + 1, sizeof *c->tensors,
                  "context tensor list"));
    SAGA_TRY(tensor_make(c, dt, 0, 0, &t));
    t->rows = rows;
    t->cols = cols;
    t->nbytes = (size_t)rows * (size_t)cols * saga_dtype_size(dt);
    t->data = t->nbytes ? data : NULL;
    t->borrowed = true;
    c->tensors[c->n_tensors++] = t;
    return t;
fail:
    saga_ctx_fail(c, st);
    return NULL;
}

/* Zero-fills through the backend (memset, else the f32 fill kernel). */
static saga_status zero_fill(saga_ctx *c, saga_tensor *t) {
    if (!t->nbytes)
        return SAGA_OK;
    if (c->be->iface->memset_async)
        return c->be->iface->memset_async(saga_ctx_stream(c), t->data, 0, t->nbytes);
    if (t->dtype == SAGA_F32 && c->be->kernels->fill_f32)
        return c->be->kernels->fill_f32(saga_ctx_stream(c), t->data, t->rows * t->cols, 0.0f);
    return saga_error(SAGA_ERR_UNSUPPORTED, "backend %s cannot zero-fill memory", c->be->name);
}

saga_tensor *saga_ctx_zeros(saga_ctx *c, saga_dtype dt, int64_t rows, int64_t cols) {
    saga_tensor *t = saga_ctx_tensor(c, dt, rows, cols);
    if (!t)
        return NULL;
    saga_status st = zero_fill(c, t);
    if (st < 0) {
        saga_ctx_fail(c, st);
        return NULL;
    }
    return t;
}

saga_tensor *saga_ctx_temp(saga_ctx *c, saga_dtype dt, int64_t rows, int64_t cols) {
    saga_tensor *t = NULL;
    saga_status st = tensor_make(c, dt, rows, cols, &t);
    if (st < 0) {
        saga_ctx_fail(c, st);
        return NULL;
    }
    return t;
}

void saga_ctx_temp_free(saga_ctx *c, saga_tensor **t) {
    if (!t || !*t)
        return;
    tensor_release(c, *t);
    *t = NULL;
}

saga_status saga_ctx_wrap_grad(saga_ctx *c, saga_tensor *t, void *data) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(c && t && t->owner == c && !t->grad && t->dtype == SAGA_F32, SAGA_ERR_INVALID_ARG,
               "saga_ctx_wrap_grad: needs an f32 context tensor without a gradient");
    SAGA_TRY(tensor_make(c, SAGA_F32, 0, 0, &t->grad));
    t->grad->rows = t->rows;
    t->grad->cols = t->cols;
    t->grad->nbytes = t->nbytes;
    t->grad->data = t->nbytes ? data : NULL;
    t->grad->borrowed = true;
fail:
    return st;
}

saga_tensor *saga_ctx_leaf(saga_ctx *c, const saga_tensor *t) {
    if (!c || !t || saga_ctx_failed(c))
        return NULL;
    if (t->be != c->be) {
        saga_error(SAGA_ERR_INVALID_ARG, "saga_ctx_leaf: tensor is on backend %s, context on %s",
                   t->be->name, c->be->name);
        saga_ctx_fail(c, SAGA_ERR_INVALID_ARG);
        return NULL;
    }
    saga_tensor *l = saga_ctx_tensor(c, t->dtype, t->rows, t->cols);
    if (!l)
        return NULL;
    if (t->nbytes) {
        saga_status st = saga_memcpy_d2d_async(saga_ctx_stream(c), l->data, t->data, t->nbytes);
        if (st < 0) {
            saga_ctx_fail(c, st);
            return NULL;
        }
    }
    saga_ctx_mark_leaf(c, l);
    return l;
}

void saga_ctx_mark_leaf(saga_ctx *c, saga_tensor *t) {
    if (!t)
        return;
    t->requires_grad = true;
    t->is_leaf = true;
}

/* ---- the context -------------------------------------------------------------------------- */

saga_status saga_ctx_new(saga_ctx **out, saga_backend *be, uint64_t seed) {
    saga_status st = SAGA_OK;
    saga_ctx *c = NULL;
    SAGA_CHECK(out && be, SAGA_ERR_INVALID_ARG, "saga_ctx_new: %s is NULL",
               out ? "backend" : "out");
    SAGA_TRY(saga_alloc_zeroed((void **)&c, 1, sizeof *c, "an op context"));
    c->be = be;
    c->seed = seed;
    *out = c;
    return SAGA_OK;
fail:
    return st;
}

static void free_node(saga_node *n) {
    if (!n)
        return;
    if (n->out && n->out->node == n)
        n->out->node = NULL;
    if (n->free_state)
        n->free_state(n->state);
    saga_free(n);
}

void saga_ctx_set_defer(saga_ctx *c, bool on) {
    c->defer = on;
}

bool saga_ctx_defer(saga_ctx *c, saga_tensor *out, saga_lazy_fn fn, const void *args, size_t size) {
    if (!c->defer || size > sizeof c->lazy_args || !c->n_tensors ||
        c->tensors[c->n_tensors - 1] != out)
        return false;
    saga_ctx_flush(c); /* one at a time */
    memcpy(c->lazy_args, args, size);
    c->lazy_fn = fn;
    c->lazy_out = out;
    c->lazy_at = c->n_tensors - 1;
    out->lazy = c;
    out->lazy_flush = saga_ctx_flush; /* what core calls before it reads out's data */
    return true;
}

void saga_ctx_flush(saga_ctx *c) {
    if (c && c->lazy_out)
        (void)saga_ctx_flush_to(c, c->lazy_out, c->lazy_out->data);
}

int saga_ctx_flush_to(saga_ctx *c, saga_tensor *t, void *dst) {
    if (!c || !t || c->lazy_out != t)
        return 0;
    t->lazy = NULL;
    c->lazy_out = NULL;
    saga_status st = c->lazy_fn(c, c->lazy_args, dst);
    if (st < 0)
        return saga_ctx_fail(c, st);
    return 1;
}

void saga_tape_release(saga_ctx *c, saga_tape_pos m) {
    if (!c)
        return;
    if (c->lazy_out && c->lazy_at >= m.n_tensors) {
        /* nothing read it: its kernel never runs */
        c->lazy_out->lazy = NULL;
        c->lazy_out = NULL;
    }
    while (c->n_nodes > m.n_nodes)
        free_node(c->nodes[--c->n_nodes]);
    while (c->n_tensors > m.n_tensors)
        tensor_release(c, c->tensors[--c->n_tensors]);
}

void saga_tape_release_failed(saga_ctx *c, saga_tape_pos m) {
    if (!c)
        return;
    saga_tape_release(c, m);
    c->status = SAGA_OK;
    c->msg[0] = '\0';
}

void saga_ctx_clear(saga_ctx *c) {
    if (!c)
        return;
    saga_tape_release(c, (saga_tape_pos){0, 0});
    c->status = SAGA_OK;
    c->msg[0] = '\0';
}

void saga_ctx_free(saga_ctx **cp) {
    if (!cp || !*cp)
        return;
    saga_ctx *c = *cp;
    saga_ctx_clear(c);
    cache_flush(c);
    while (c->spare) {
        saga_tensor *t = c->spare;
        c->spare = t->grad;
        saga_free(t);
    }
    if (c->stage) /* the copies out of the ring have run */
        (void)saga_stream_synchronize(saga_ctx_stream(c));
    (void)old_release(c, true);
    for (int k = 0; k < 2; k++)
        saga_event_free(&c->bank_ev[k]);
    saga_event_free(&c->old_ev);
    saga_backend_host_free(c->be, c->stage, c->stage_cap);
    saga_free(c->cache);
    saga_free(c->tensors);
    saga_free(c->nodes);
    saga_free(c);
    *cp = NULL;
}

saga_backend *saga_ctx_backend(const saga_ctx *c) {
    return c ? c->be : NULL;
}

void saga_ctx_train(saga_ctx *c, bool training) {
    if (c)
        c->training = training;
}

bool saga_ctx_training(const saga_ctx *c) {
    return c && c->training;
}

/* Also puts the sticky error's message back as the thread's last error, since later calls may
 * have replaced it. */
saga_status saga_ctx_status(const saga_ctx *c) {
    if (!c)
        return SAGA_ERR_INVALID_ARG;
    if (c->status < 0)
        saga_error(c->status, "%s", c->msg);
    return c->status;
}

bool saga_ctx_failed(const saga_ctx *c) {
    return c->status < 0;
}

saga_status saga_ctx_fail(saga_ctx *c, saga_status st) {
    if (c && st < 0 && c->status == SAGA_OK) {
        c->status = st;
        snprintf(c->msg, sizeof c->msg, "%s", saga_last_error());
    }
    return st;
}

uint64_t saga_ctx_rng_counter(const saga_ctx *c) {
    return c ? c->rng_counter : 0;
}

void saga_ctx_set_rng_counter(saga_ctx *c, uint64_t counter) {
    if (c)
        c->rng_counter = counter;
}

uint64_t saga_ctx_next_dropout_seed(saga_ctx *c) {
    uint64_t s = c->seed ^ (0xD1B54A32D192ED03ull * (c->rng_counter + 1));
    c->rng_counter++;
    return saga_splitmix64(&s);
}

void saga_ctx_set_row_base(saga_ctx *c, int64_t row) {
    if (c)
        c->row_base = row;
}

int64_t saga_ctx_row_base(const saga_ctx *c) {
    return c ? c->row_base : 0;
}

saga_status saga_ctx_buffer(saga_ctx *c, void **out, size_t bytes) {
    return buf_get(c, bytes, out);
}

void saga_ctx_buffer_free(saga_ctx *c, void *p, size_t bytes) {
    buf_put(c, p, bytes);
}

void saga_ctx_set_pressure(saga_ctx *c, bool (*fn)(void *user, size_t bytes), void *user) {
    if (c) {
        c->pressure = fn;
        c->pressure_user = user;
    }
}

void saga_ctx_set_row_ids(saga_ctx *c, const int32_t *ids, int64_t n) {
    if (c) {
        c->row_ids = ids;
        c->n_row_ids = ids ? n : 0;
    }
}

const int32_t *saga_ctx_row_ids(const saga_ctx *c, int64_t rows) {
    return c && c->row_ids && c->n_row_ids == rows ? c->row_ids : NULL;
}

void saga_ctx_trim(saga_ctx *c) {
    if (c)
        cache_flush(c);
}

saga_stream *saga_ctx_stream(saga_ctx *c) {
    return saga_backend_default_stream(c->be);
}

const saga_kernels *saga_ctx_kernels(const saga_ctx *c) {
    return c->be->kernels;
}

bool saga_ctx_kernel(saga_ctx *c, bool present, const char *slot_name) {
    if (present)
        return true;
    saga_error(SAGA_ERR_UNSUPPORTED, "backend %s has no %s kernel", c->be->name, slot_name);
    saga_ctx_fail(c, SAGA_ERR_UNSUPPORTED);
    return false;
}

/* ---- the tape ----------------------------------------------------------------------------- */

bool saga_tensor_needs_grad(const saga_tensor *t) {
    return t && t->requires_grad;
}

saga_status saga_tape_record(saga_ctx *c, saga_tensor *out, saga_tensor *const *inputs,
                             int n_inputs, saga_node_backward_fn bwd, void *state,
                             saga_node_free_fn free_state) {
    return saga_tape_record_ex(c, out, inputs, n_inputs, false, bwd, state, free_state);
}

saga_status saga_tape_record_ex(saga_ctx *c, saga_tensor *out, saga_tensor *const *inputs,
                                int n_inputs, bool always, saga_node_backward_fn bwd, void *state,
                                saga_node_free_fn free_state) {
    saga_status st = SAGA_OK;
    saga_node *n = NULL;
    SAGA_CHECK(c && out && bwd && n_inputs >= 0 && n_inputs <= SAGA_NODE_MAX_INPUTS &&
                   (inputs || n_inputs == 0),
               SAGA_ERR_INVALID_ARG, "saga_tape_record: bad arguments (%d inputs)", n_inputs);
    if (c->status < 0) {
        st = saga_ctx_status(c);
        goto fail;
    }
    bool any = always;
    for (int i = 0; i < n_inputs; i++)
        any = any || saga_tensor_needs_grad(inputs[i]);
    if (!c->training || !any) {
        if (free_state)
            free_state(state);
        return SAGA_OK;
    }
    SAGA_TRY(grow((void **)&c->nodes, &c->cap_nodes, c->n_nodes + 1, sizeof *c->nodes, "tape"));
    SAGA_TRY(saga_alloc_zeroed((void **)&n, 1, sizeof *n, "a tape node"));
    n->out = out;
    n->n_in = n_inputs;
    for (int i = 0; i < n_inputs; i++) {
        n->in[i] = inputs[i];
        n->needs[i] = saga_tensor_needs_grad(inputs[i]);
    }
    n->bwd = bwd;
    n->state = state;
    n->free_state = free_state;
    c->nodes[c->n_nodes++] = n;
    out->requires_grad = true;
    out->node = n;
    return SAGA_OK;
fail:
    if (free_state)
        free_state(state);
    return saga_ctx_fail(c, st);
}

saga_tensor *saga_node_input(const saga_node *n, int i) {
    return i >= 0 && i < n->n_in ? n->in[i] : NULL;
}
saga_tensor *saga_node_output(const saga_node *n) {
    return n->out;
}
void *saga_node_state(const saga_node *n) {
    return n->state;
}
bool saga_node_needs_grad(const saga_node *n, int i) {
    return i >= 0 && i < n->n_in && n->needs[i];
}

float *saga_grad_target(saga_ctx *c, saga_tensor *t, float *beta) {
    saga_status st = SAGA_OK;
    if (t->grad) {
        *beta = 1.0f;
        return t->grad->data;
    }
    SAGA_CHECK(t->dtype == SAGA_F32, SAGA_ERR_INVALID_ARG,
               "gradient of a %s tensor: only f32 tensors have gradients",
               saga_dtype_name(t->dtype));
    if (t->owner) {
        SAGA_TRY(tensor_make(c, SAGA_F32, t->rows, t->cols, &t->grad));
        *beta = 0.0f;
    } else {
        /* a user's tensor keeps its gradient past saga_ctx_clear, so it is a plain tensor */
        SAGA_TRY(saga_tensor_new(&t->grad, t->be, SAGA_F32, t->rows, t->cols));
        *beta = 1.0f;
    }
    return t->grad->data;
fail:
    saga_ctx_fail(c, st);
    return NULL;
}

saga_status saga_grad_accumulate(saga_ctx *c, saga_tensor *t, const saga_tensor *g) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(t && g, SAGA_ERR_INVALID_ARG, "saga_grad_accumulate: %s is NULL",
               t ? "gradient" : "tensor");
    SAGA_CHECK(g->dtype == SAGA_F32 && g->rows == t->rows && g->cols == t->cols,
               SAGA_ERR_INVALID_ARG,
               "saga_grad_accumulate: gradient is %lld x %lld %s, tensor is %lld x %lld",
               (long long)g->rows, (long long)g->cols, saga_dtype_name(g->dtype),
               (long long)t->rows, (long long)t->cols);
    float beta = 0.0f;
    float *dst = saga_grad_target(c, t, &beta);
    if (!dst)
        return saga_ctx_status(c);
    if (!g->nbytes)
        return SAGA_OK;
    if (beta == 0.0f) {
        SAGA_TRY(saga_memcpy_d2d_async(saga_ctx_stream(c), dst, g->data, g->nbytes));
    } else {
        const saga_kernels *k = c->be->kernels;
        if (!saga_ctx_kernel(c, k->scale_f32 != NULL, "scale_f32"))
            return saga_ctx_status(c);
        SAGA_TRY(k->scale_f32(saga_ctx_stream(c), t->rows * t->cols, 1.0f, g->data, 1.0f, dst));
    }
    return SAGA_OK;
fail:
    return saga_ctx_fail(c, st);
}

saga_status saga_node_accumulate(saga_ctx *c, saga_node *n, int i, const saga_tensor *g) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(n && i >= 0 && i < n->n_in && n->in[i], SAGA_ERR_INVALID_ARG,
               "saga_node_accumulate: no input %d", i);
    if (!n->needs[i])
        return SAGA_OK;
    return saga_grad_accumulate(c, n->in[i], g);
fail:
    return saga_ctx_fail(c, st);
}

float *saga_node_grad_target(saga_ctx *c, saga_node *n, int i, float *beta) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(n && i >= 0 && i < n->n_in && n->in[i], SAGA_ERR_INVALID_ARG,
               "saga_node_grad_target: no input %d", i);
    return saga_grad_target(c, n->in[i], beta);
fail:
    saga_ctx_fail(c, st);
    return NULL;
}

saga_tape_pos saga_tape_mark(const saga_ctx *c) {
    return (saga_tape_pos){c->n_nodes, c->n_tensors};
}

/* An intermediate gradient can go once its node has passed it on; a leaf's or parameter's is
 * what the caller wants, and a user tensor's lives with the tensor. */
static void drop_grad(saga_ctx *c, saga_tensor *t) {
    if (t->grad && t->owner == c && !t->is_leaf && !t->is_param) {
        tensor_release(c, t->grad);
        t->grad = NULL;
    }
}

saga_status saga_tape_backward_range(saga_ctx *c, saga_tape_pos m, saga_tensor *out,
                                     const saga_tensor *grad_out) {
    saga_status st = SAGA_OK;
    saga_tensor *ones = NULL;
    if (!c)
        return saga_error(SAGA_ERR_INVALID_ARG, "saga_tape_backward_range: context is NULL");
    if (c->status < 0)
        return saga_ctx_status(c);
    SAGA_CHECK(out, SAGA_ERR_INVALID_ARG, "backward: output is NULL");
    if (!out->requires_grad)
        return SAGA_OK; /* nothing it depends on wants a gradient */
    if (grad_out) {
        SAGA_TRY(saga_grad_accumulate(c, out, grad_out));
    } else {
        SAGA_CHECK(out->rows == 1 && out->cols == 1 && out->dtype == SAGA_F32, SAGA_ERR_INVALID_ARG,
                   "backward: without an output gradient the output must be 1 x 1 f32, got "
                   "%lld x %lld %s",
                   (long long)out->rows, (long long)out->cols, saga_dtype_name(out->dtype));
        const saga_kernels *k = c->be->kernels;
        if (!saga_ctx_kernel(c, k->fill_f32 != NULL, "fill_f32"))
            return saga_ctx_status(c);
        ones = saga_ctx_temp(c, SAGA_F32, 1, 1);
        if (!ones)
            return saga_ctx_status(c);
        SAGA_TRY(k->fill_f32(saga_ctx_stream(c), ones->data, 1, 1.0f));
        SAGA_TRY(saga_grad_accumulate(c, out, ones));
        saga_ctx_temp_free(c, &ones);
    }
    /* Newest first. The tape may grow while a backward function runs (the executor recomputes
     * a batch in a region of its own and releases it), so nodes are looked up by index. */
    for (size_t i = c->n_nodes; i > m.n_nodes; i--) {
        saga_node *n = c->nodes[i - 1];
        saga_tensor *o = n->out;
        if (!o->grad)
            continue; /* the loss does not depend on this node */
        st = n->bwd(c, n, o->grad);
        if (st < 0 || c->status < 0)
            goto fail;
        drop_grad(c, o);
    }
    return SAGA_OK;
fail:
    saga_ctx_temp_free(c, &ones);
    saga_ctx_fail(c, st < 0 ? st : c->status);
    return saga_ctx_status(c);
}

saga_status saga_backward_from(saga_ctx *c, saga_tensor *out, const saga_tensor *grad) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(c, SAGA_ERR_INVALID_ARG, "saga_backward_from: context is NULL");
    if (c->status < 0)
        return saga_ctx_status(c);
    SAGA_CHECK(out && grad, SAGA_ERR_INVALID_ARG, "saga_backward_from: %s is NULL",
               out ? "the gradient" : "the output");
    SAGA_CHECK(c->training, SAGA_ERR_INVALID_ARG,
               "saga_backward_from: the context is not training (saga_ctx_train(c, true) before "
               "the forward pass)");
    SAGA_CHECK(out->dtype == SAGA_F32 && grad->dtype == SAGA_F32 && grad->rows == out->rows &&
                   grad->cols == out->cols,
               SAGA_ERR_INVALID_ARG,
               "saga_backward_from: the gradient is %lld x %lld %s, the output %lld x %lld %s",
               (long long)grad->rows, (long long)grad->cols, saga_dtype_name(grad->dtype),
               (long long)out->rows, (long long)out->cols, saga_dtype_name(out->dtype));
    SAGA_TRY(saga_tape_backward_range(c, (saga_tape_pos){0, 0}, out, grad));
    while (c->n_nodes > 0)
        free_node(c->nodes[--c->n_nodes]);
fail:
    return st;
}

saga_tensor *saga_ctx_input(saga_ctx *c, int64_t rows, int64_t cols, const float *host) {
    saga_tensor *t = saga_ctx_from_host(c, SAGA_F32, rows, cols, host);
    if (t)
        saga_ctx_mark_leaf(c, t);
    return t;
}

saga_status saga_backward(saga_ctx *c, saga_tensor *loss) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(c, SAGA_ERR_INVALID_ARG, "saga_backward: context is NULL");
    if (c->status < 0)
        return saga_ctx_status(c);
    SAGA_CHECK(loss, SAGA_ERR_INVALID_ARG, "saga_backward: loss is NULL");
    SAGA_CHECK(c->training, SAGA_ERR_INVALID_ARG,
               "saga_backward: the context is not training (saga_ctx_train(c, true) before the "
               "forward pass)");
    SAGA_CHECK(loss->rows == 1 && loss->cols == 1 && loss->dtype == SAGA_F32, SAGA_ERR_INVALID_ARG,
               "saga_backward: loss must be 1 x 1 f32, got %lld x %lld %s", (long long)loss->rows,
               (long long)loss->cols, saga_dtype_name(loss->dtype));
    SAGA_TRY(saga_tape_backward_range(c, (saga_tape_pos){0, 0}, loss, NULL));
    /* consumed: the nodes (and what their states hold) go now, the tensors at the clear */
    while (c->n_nodes > 0)
        free_node(c->nodes[--c->n_nodes]);
fail:
    return st;
}
