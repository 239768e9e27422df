/* backend.c - the generic backend layer: opening backends, budget accounting, streams, events
 * and copies above the function table, and loading the CUDA module. */
#include "backend_impl.h"
#include "module_impl.h"
#include "saga_log.h"

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

saga_backend_params saga_backend_params_defaults(void) {
    return (saga_backend_params){.budget_bytes = 0, .n_threads = 0};
}

/* ---- helpers ----------------------------------------------------------------------------- */

static void lock(const saga_backend *be) {
    pthread_mutex_lock((pthread_mutex_t *)be->lock);
}
static void unlock(const saga_backend *be) {
    pthread_mutex_unlock((pthread_mutex_t *)be->lock);
}

/* "512 B", "1.5 KiB", "12.0 MiB", "3.25 GiB" into buf. */
static const char *human_bytes(char *buf, size_t len, size_t n) {
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (n < 1024) {
        snprintf(buf, len, "%zu B", n);
        return buf;
    }
    double v = (double)n / 1024.0;
    int u = 0;
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, len, v < 10.0 ? "%.2f %s" : "%.1f %s", v, units[u]);
    return buf;
}

static saga_status check_params(const saga_backend_params *p) {
    if (p->n_threads < 0)
        return saga_error(SAGA_ERR_INVALID_ARG, "backend params: n_threads must be >= 0, got %d",
                          p->n_threads);
    if ((unsigned)p->copies >= SAGA_COPIES_COUNT)
        return saga_error(SAGA_ERR_INVALID_ARG, "backend params: copies %d is not a saga_copies",
                          (int)p->copies);
    return SAGA_OK;
}

/* A zeroed backend with its lock; the caller fills the table. */
static saga_status backend_alloc(saga_backend **out, const saga_backend_params *p) {
    saga_status st = SAGA_OK;
    saga_backend *be = NULL;
    pthread_mutex_t *mu = NULL;
    saga_backend_params params = p ? *p : saga_backend_params_defaults();
    SAGA_TRY(check_params(&params));
    saga_omp_idle_init();
    SAGA_TRY(saga_alloc_zeroed((void **)&be, 1, sizeof *be, "a backend"));
    SAGA_TRY(saga_alloc_array((void **)&mu, 1, sizeof *mu, "a backend lock"));
    SAGA_CHECK(pthread_mutex_init(mu, NULL) == 0, SAGA_ERR_INTERNAL,
               "cannot initialise a backend lock");
    be->lock = mu;
    mu = NULL;
    be->params = params;
    *out = be;
    return SAGA_OK;
fail:
    saga_free(mu);
    saga_free(be);
    return st;
}

/* Frees what backend_alloc made (the table must already be torn down). */
static void backend_release(saga_backend *be) {
    if (be->lock) {
        pthread_mutex_destroy((pthread_mutex_t *)be->lock);
        saga_free(be->lock);
    }
    saga_free(be);
}

/* A table of `size` bytes as its backend was built, copied into `full` bytes at dst: the slots
 * it does not reach (appended after the backend was built) stay NULL. */
static void copy_table(void *dst, size_t full, const void *src, size_t size) {
    memset(dst, 0, full);
    memcpy(dst, src, size < full ? size : full);
}

saga_status saga_backend_take_tables(saga_backend *be) {
    if (!be->iface || be->iface->size < offsetof(saga_backend_iface, memset_async) ||
        !be->kernels || be->kernels->size < offsetof(saga_kernels, pagerank_pull_f64))
        return saga_error(SAGA_ERR_INTERNAL, "backend %s: incomplete function table", be->name);
    copy_table(&be->iface_copy, sizeof be->iface_copy, be->iface, be->iface->size);
    copy_table(&be->kernels_copy, sizeof be->kernels_copy, be->kernels, be->kernels->size);
    be->iface = &be->iface_copy;
    be->kernels = &be->kernels_copy;
    return SAGA_OK;
}

/* Once the tables are in place: take them and create the default stream. On failure the caller
 * destroys the table. */
static saga_status backend_finish(saga_backend *be) {
    saga_status st = saga_backend_take_tables(be);
    if (st < 0)
        return st;
    be->default_stream.be = be;
    be->default_stream.impl = NULL;
    return be->iface->stream_new(be, &be->default_stream);
}

/* ---- opening ----------------------------------------------------------------------------- */

saga_status saga_backend_cpu_new(saga_backend **out, const saga_backend_params *p) {
    saga_status st = SAGA_OK;
    saga_backend *be = NULL;
    bool table = false;
    SAGA_CHECK(out, SAGA_ERR_INVALID_ARG, "saga_backend_cpu_new: out is NULL");
    SAGA_TRY(backend_alloc(&be, p));
    be->kind = SAGA_BACKEND_CPU;
    SAGA_TRY(saga_cpu_backend_init(be, &saga_cpu_kernels));
    table = true;
    SAGA_TRY(backend_finish(be));
    *out = be;
    return SAGA_OK;
fail:
    if (be) {
        if (table)
            be->iface->destroy(be);
        backend_release(be);
    }
    return st;
}

/* The services the CUDA module takes from libsaga. */
static const saga_module_host module_host = {.size = sizeof(saga_module_host),
                                             .error = saga_module_error,
                                             .log = saga_module_log,
                                             .reserve = saga_backend_reserve,
                                             .unreserve = saga_backend_unreserve};

/* Checks for the NVIDIA driver before loading the module: without it the module could only
 * report "no device", after the loader spent a long while mapping cuBLAS and friends. The handle
 * is kept until the module has opened its own reference. */
static saga_status open_driver(void *driver) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return saga_error(SAGA_ERR_DEVICE, "no CUDA driver (%s)", dlerror());
    *(void **)driver = h;
    return SAGA_OK;
}

/* dlopens the CUDA module ($SAGA_CUDA_MODULE, else beside libsaga or the executable, else the
 * loader's search: saga_module_open) once the driver is there. The module is linked with a
 * static CUDA runtime, and tearing that down when the module is unloaded (its destructors, and
 * exit handlers left pointing into unmapped code) is a known source of crashes at dlclose and at
 * exit: saga_module_open keeps it mapped (RTLD_NODELETE), and the dlclose calls below only drop
 * a reference. On success *driver may hold a handle on the driver library for the caller to
 * dlclose after the module's init. */
static saga_status load_cuda_module(void **module, void **driver, char *path, size_t path_len) {
    saga_status st =
        saga_module_open(module, SAGA_CUDA_MODULE_NAME, "SAGA_CUDA_MODULE",
                         "the CUDA backend module", open_driver, driver, path, path_len);
    if (st == SAGA_ERR_UNSUPPORTED)
        return saga_error_prefix(st, "CUDA backend not available (built without CUDA?): ");
    return st;
}

saga_status saga_backend_cuda_new(saga_backend **out, int device, const saga_backend_params *p) {
    saga_status st = SAGA_OK;
    saga_backend *be = NULL;
    void *module = NULL, *driver = NULL;
    bool table = false;
    char path[PATH_MAX];
    SAGA_CHECK(out, SAGA_ERR_INVALID_ARG, "saga_backend_cuda_new: out is NULL");
    SAGA_CHECK(device >= 0, SAGA_ERR_INVALID_ARG, "CUDA device must be >= 0, got %d", device);
    SAGA_TRY(backend_alloc(&be, p));
    be->kind = SAGA_BACKEND_CUDA;
    SAGA_TRY(load_cuda_module(&module, &driver, path, sizeof path));
    saga_log(SAGA_LOG_DEBUG, "loaded the CUDA backend module %s", path);
    saga_cuda_module_init_fn init = NULL;
    void *sym = NULL;
    SAGA_TRY(saga_module_sym(module, SAGA_CUDA_MODULE_INIT, path, &sym));
    /* POSIX guarantees that a dlsym result converts to a function pointer; ISO C does not, hence
     * the copy. */
    memcpy(&init, &sym, sizeof init);
    be->module = module;
    SAGA_TRY(init(be, device, &module_host));
    table = true;
    SAGA_TRY(backend_finish(be));
    if (driver)
        dlclose(driver);
    *out = be;
    return SAGA_OK;
fail:
    if (be) {
        if (table)
            be->iface->destroy(be);
        backend_release(be);
    }
    if (module)
        dlclose(module);
    if (driver)
        dlclose(driver);
    return st;
}

/* Parses the digits after "cuda:" into *device. */
static bool parse_device(const char *s, int *device) {
    if (!*s)
        return false;
    long v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return false;
        v = v * 10 + (*s - '0');
        if (v > INT_MAX)
            return false;
    }
    *device = (int)v;
    return true;
}

saga_status saga_backend_open(saga_backend **out, const char *spec, const saga_backend_params *p) {
    if (!out || !spec)
        return saga_error(SAGA_ERR_INVALID_ARG, "saga_backend_open: %s is NULL",
                          out ? "spec" : "out");
    if (strcmp(spec, "cpu") == 0)
        return saga_backend_cpu_new(out, p);
    if (strcmp(spec, "cuda") == 0)
        return saga_backend_cuda_new(out, 0, p);
    int device = 0;
    if (strncmp(spec, "cuda:", 5) == 0 && parse_device(spec + 5, &device))
        return saga_backend_cuda_new(out, device, p);
    if (strcmp(spec, "auto") == 0) {
        saga_status st = saga_backend_cuda_new(out, 0, p);
        if (st == SAGA_OK)
            return SAGA_OK;
        if (st == SAGA_ERR_INVALID_ARG)
            return st; /* bad params fail the CPU the same way */
        saga_log(SAGA_LOG_WARN, "no usable GPU (%s); running on the CPU", saga_last_error());
        saga_error_clear();
        return saga_backend_cpu_new(out, p);
    }
    return saga_error(SAGA_ERR_INVALID_ARG,
                      "unknown device \"%s\": expected cpu, cuda, cuda:N (N a device number) or "
                      "auto",
                      spec);
}

void saga_backend_free_all(saga_backend **bep) {
    if (!bep || !*bep)
        return;
    saga_backend *be = *bep;
    be->iface->synchronize(be);
    if (be->in_use != 0) {
        char h[32];
        saga_log(SAGA_LOG_WARN, "backend %s freed with %s still allocated (a leak in the caller)",
                 be->name, human_bytes(h, sizeof h, be->in_use));
    }
    be->iface->stream_free(&be->default_stream);
    void *module = be->module;
    be->iface->destroy(be);
    backend_release(be);
    if (module)
        dlclose(module); /* drops the reference; the module stays mapped (RTLD_NODELETE) */
    *bep = NULL;
}

saga_backend_kind saga_backend_get_kind(const saga_backend *be) {
    return be->kind;
}

bool saga_backend_copies_inline(const saga_backend *be) {
    if (be->kind != SAGA_BACKEND_CPU || be->params.copies == SAGA_COPIES_WORKER)
        return false;
    if (be->params.copies == SAGA_COPIES_INLINE)
        return true;
    int threads = be->params.n_threads > 0 ? be->params.n_threads : omp_get_max_threads();
    return threads >= omp_get_num_procs();
}

const char *saga_backend_name(const saga_backend *be) {
    return be->name;
}

/* ---- device memory ----------------------------------------------------------------------- */

/* The budget (see saga_backend_iface): requests are charged at the size the backend's allocator
 * takes for them, and refused when in_use + reserved + that would pass the budget; cached blocks
 * are the backend's to give back before it takes more from the device. The helpers below run
 * under the lock. */

/* What a request of bytes is charged: the backend's size class, or bytes; 0 when impossible. */
static size_t charge_of(const saga_backend *be, size_t bytes) {
    if (be->iface->alloc_size)
        return be->iface->alloc_size(be, bytes);
    return bytes;
}

static void note_held(saga_backend *be) {
    const size_t held = be->in_use + be->reserved + be->cached;
    if (held > be->held_peak)
        be->held_peak = held;
}

/* SAGA_ERR_BUDGET unless charge more bytes fit beside in_use and reserved. The message names the
 * request (for `what` when not NULL), or is not set when quiet. */
static saga_status check_budget(saga_backend *be, size_t bytes, size_t charge, const char *what,
                                bool quiet) {
    const size_t budget = be->params.budget_bytes, held = be->in_use + be->reserved;
    if (!budget || (charge <= budget && held <= budget - charge))
        return SAGA_OK;
    if (quiet)
        return SAGA_ERR_BUDGET;
    char req[32], as[32], used[32], res[32], bud[32];
    char rounded[64] = "", reserved[80] = "";
    if (charge != bytes)
        snprintf(rounded, sizeof rounded, " (%s as allocated)", human_bytes(as, sizeof as, charge));
    if (be->reserved)
        snprintf(reserved, sizeof reserved, " and %s reserved for the backend's own work",
                 human_bytes(res, sizeof res, be->reserved));
    return saga_error(
        SAGA_ERR_BUDGET,
        "%s: device memory budget exceeded: %s%srequested %s%s with %s in use%s of a %s budget",
        be->name, what ? what : "", what ? ": " : "", human_bytes(req, sizeof req, bytes), rounded,
        human_bytes(used, sizeof used, be->in_use), reserved, human_bytes(bud, sizeof bud, budget));
}

/* The charge of bytes, or SAGA_ERR_OUT_OF_MEMORY when the backend can make no such block. */
static saga_status charge_or_fail(saga_backend *be, size_t bytes, size_t *charge) {
    *charge = charge_of(be, bytes);
    if (*charge == 0)
        return saga_error(SAGA_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes", be->name, bytes);
    return SAGA_OK;
}

/* saga_backend_alloc, through the table's alloc_block for a scheduler's block when it has one. */
static saga_status alloc_placed(saga_backend *be, void **out, size_t bytes, bool block) {
    if (!be || !out)
        return saga_error(SAGA_ERR_INVALID_ARG, "saga_backend_alloc: %s is NULL",
                          be ? "out" : "backend");
    if (bytes == 0) {
        *out = NULL;
        return SAGA_OK;
    }
    saga_status st = SAGA_OK;
    size_t charge = 0;
    void *p = NULL;
    lock(be);
    SAGA_TRY(charge_or_fail(be, bytes, &charge));
    SAGA_TRY(check_budget(be, bytes, charge, NULL, false));
    if (block && be->iface->alloc_block)
        SAGA_TRY(be->iface->alloc_block(be, &p, bytes));
    else
        SAGA_TRY(be->iface->alloc(be, &p, bytes));
    be->in_use += charge;
    if (be->in_use > be->peak)
        be->peak = be->in_use;
    be->n_allocs++;
    note_held(be);
    *out = p;
fail:
    unlock(be);
    return st;
}

saga_status saga_backend_alloc(saga_backend *be, void **out, size_t bytes) {
    return alloc_placed(be, out, bytes, false);
}

saga_status saga_backend_alloc_block(saga_backend *be, void **out, size_t bytes) {
    return alloc_placed(be, out, bytes, true);
}

void saga_backend_set_block_room(saga_backend *be, size_t bytes) {
    lock(be);
    be->block_room = bytes;
    unlock(be);
}

size_t saga_backend_block_room(saga_backend *be) {
    lock(be);
    const size_t bytes = be->block_room;
    unlock(be);
    return bytes;
}

/* Takes bytes off *counter (in_use, reserved or host_pinned), logging an error, not underflowing,
 * when the counter holds less. Under the lock. */
static void uncount(saga_backend *be, size_t *counter, size_t bytes, const char *counter_name) {
    if (bytes > *counter) {
        saga_log(SAGA_LOG_ERROR, "backend %s: giving back %zu bytes with only %zu %s", be->name,
                 bytes, *counter, counter_name);
        *counter = 0;
    } else {
        *counter -= bytes;
    }
}

void saga_backend_free(saga_backend *be, void *ptr, size_t bytes) {
    if (!be || !ptr)
        return;
    lock(be);
    uncount(be, &be->in_use, charge_of(be, bytes), "in use");
    be->iface->free(be, ptr, bytes);
    unlock(be);
}

saga_status saga_backend_reserve(saga_backend *be, void **out, size_t bytes, const char *what) {
    if (bytes == 0) {
        *out = NULL;
        return SAGA_OK;
    }
    saga_status st = SAGA_OK;
    size_t charge = 0;
    void *p = NULL;
    lock(be);
    SAGA_TRY(charge_or_fail(be, bytes, &charge));
    SAGA_TRY(check_budget(be, bytes, charge, what, what == NULL));
    st = be->iface->alloc(be, &p, bytes);
    if (st < 0) {
        if (what) { /* say what the memory was for (a copy: the message is rewritten) */
            char why[512];
            snprintf(why, sizeof why, "%s", saga_last_error());
            saga_error(st, "%s: %s", what, why);
        }
        goto fail;
    }
    be->reserved += charge;
    note_held(be);
    *out = p;
fail:
    unlock(be);
    return st;
}

void saga_backend_unreserve(saga_backend *be, void *ptr, size_t bytes) {
    if (!be || !ptr)
        return;
    lock(be);
    uncount(be, &be->reserved, charge_of(be, bytes), "reserved");
    be->iface->free(be, ptr, bytes);
    unlock(be);
}

saga_status saga_backend_host_alloc(saga_backend *be, void **out, size_t bytes) {
    if (!be || !out)
        return saga_error(SAGA_ERR_INVALID_ARG, "saga_backend_host_alloc: %s is NULL",
                          be ? "out" : "backend");
    if (bytes == 0) {
        *out = NULL;
        return SAGA_OK;
    }
    saga_status st = be->iface->host_alloc(be, out, bytes);
    if (st == SAGA_OK) {
        lock(be);
        be->host_pinned += bytes;
        unlock(be);
    }
    return st;
}

void saga_backend_host_free(saga_backend *be, void *ptr, size_t bytes) {
    if (!be || !ptr)
        return;
    lock(be);
    uncount(be, &be->host_pinned, bytes, "host bytes in use");
    unlock(be);
    be->iface->host_free(be, ptr, bytes);
}

saga_status saga_backend_host_room(saga_backend *be, void **p, size_t *have, size_t need) {
    if (need <= *have)
        return SAGA_OK;
    saga_backend_host_free(be, *p, *have);
    *p = NULL;
    *have = 0;
    saga_status st = saga_backend_host_alloc(be, p, need);
    if (st == SAGA_OK)
        *have = need;
    return st;
}

void saga_backend_get_stats(const saga_backend *be, saga_backend_stats *out) {
    lock(be);
    *out = (saga_backend_stats){
        .budget_bytes = be->params.budget_bytes,
        .in_use_bytes = be->in_use,
        .peak_bytes = be->peak,
        .h2d_bytes = be->h2d_bytes,
        .d2h_bytes = be->d2h_bytes,
        .n_allocs = be->n_allocs,
        .device_total = be->device_total,
        .copy_seconds = be->copy_seconds,
        .host_pinned_bytes = be->host_pinned,
        .spmm_cusparse = __atomic_load_n(&be->spmm_cusparse, __ATOMIC_RELAXED),
        .spmm_cusparse_refused = __atomic_load_n(&be->spmm_cusparse_refused, __ATOMIC_RELAXED),
        .reserved_bytes = be->reserved,
        .cached_bytes = be->cached,
        .held_peak_bytes = be->held_peak,
        .work_reserve_bytes = be->work_reserve,
    };
    unlock(be);
}

void saga_backend_reset_stats(saga_backend *be) {
    lock(be);
    be->peak = be->in_use;
    be->held_peak = be->in_use + be->reserved + be->cached;
    be->h2d_bytes = 0;
    be->d2h_bytes = 0;
    be->copy_seconds = 0.0;
    unlock(be);
}

/* ---- streams and events ------------------------------------------------------------------ */

saga_stream *saga_backend_default_stream(saga_backend *be) {
    return &be->default_stream;
}

saga_status saga_stream_new(saga_stream **out, saga_backend *be) {
    saga_status st = SAGA_OK;
    saga_stream *s = NULL;
    SAGA_CHECK(out && be, SAGA_ERR_INVALID_ARG, "saga_stream_new: %s is NULL",
               out ? "backend" : "out");
    SAGA_TRY(saga_alloc_zeroed((void **)&s, 1, sizeof *s, "a stream"));
    s->be = be;
    SAGA_TRY(be->iface->stream_new(be, s));
    *out = s;
    return SAGA_OK;
fail:
    saga_free(s);
    return st;
}

void saga_stream_free(saga_stream **sp) {
    if (!sp || !*sp)
        return;
    saga_stream *s = *sp;
    if (s == &s->be->default_stream) {
        /* owned by the backend: freeing it here would leave the backend without one */
        saga_log(SAGA_LOG_ERROR, "saga_stream_free: the default stream belongs to its backend");
        *sp = NULL;
        return;
    }
    s->be->iface->stream_free(s);
    saga_free(s);
    *sp = NULL;
}

saga_status saga_stream_synchronize(saga_stream *s) {
    if (!s)
        return saga_error(SAGA_ERR_INVALID_ARG, "saga_stream_synchronize: stream is NULL");
    return s->be->iface->stream_sync(s);
}

saga_status saga_stream_wait_event(saga_stream *s, saga_event *e) {
    if (!s || !e)
        return saga_error(SAGA_ERR_INVALID_ARG, "saga_stream_wait_event: %s is NULL",
                          s ? "event" : "stream");
    if (s->be == e->be)
        return s->be->iface->stream_wait_event(s, e);
    if (!saga_stream_can_wait(s, e))
        return saga_error(SAGA_ERR_INVALID_ARG,
                          "saga_stream_wait_event: stream and event belong to different backends, "
                          "and %s cannot order a stream after another device's event",
                          s->be->name);
    return s->be->iface->stream_wait_foreign(s, e);
}

bool saga_stream_can_wait(const saga_stream *s, const saga_event *e) {
    if (!s || !e)
        return false;
    if (s->be == e->be)
        return true;
    const saga_backend_iface *f = s->be->iface;
    return f->stream_wait_foreign && f->stream_wait_foreign == e->be->iface->stream_wait_foreign;
}

saga_status saga_stream_launch_host_fn(saga_stream *s, void (*fn)(void *arg), void *arg) {
    if (!s || !fn)
        return saga_error(SAGA_ERR_INVALID_ARG, "saga_stream_launch_host_fn: %s is NULL",
                          s ? "fn" : "stream");
    if (s->be->iface->launch_host_fn)
        return s->be->iface->launch_host_fn(s, fn, arg);
    /* Without a backend queue, running fn once the stream has drained gives the same order:
     * everything issued before has run, and nothing issued later can start before fn returns. */
    saga_status st = s->be->iface->stream_sync(s);
    if (st < 0)
        return st;
    fn(arg);
    return SAGA_OK;
}

saga_status saga_event_new(saga_event **out, saga_backend *be) {
    saga_status st = SAGA_OK;
    saga_event *e = NULL;
    SAGA_CHECK(out && be, SAGA_ERR_INVALID_ARG, "saga_event_new: %s is NULL",
               out ? "backend" : "out");
    SAGA_TRY(saga_alloc_zeroed((void **)&e, 1, sizeof *e, "an event"));
    e->be = be;
    SAGA_TRY(be->iface->event_new(be, e));
    *out = e;
    return SAGA_OK;
fail:
    saga_free(e);
    return st;
}

void saga_event_free(saga_event **ep) {
    if (!ep || !*ep)
        return;
    (*ep)->be->iface->event_free(*ep);
    saga_free(*ep);
    *ep = NULL;
}

saga_status saga_event_record(saga_event *e, saga_stream *s) {
    if (!s || !e)
        return saga_error(SAGA_ERR_INVALID_ARG, "saga_event_record: %s is NULL",
                          s ? "event" : "stream");
    if (s->be != e->be)
        return saga_error(SAGA_ERR_INVALID_ARG,
                          "saga_event_record: stream and event belong to different backends");
    return e->be->iface->event_record(e, s);
}

saga_status saga_event_synchronize(saga_event *e) {
    if (!e)
        return saga_error(SAGA_ERR_INVALID_ARG, "saga_event_synchronize: event is NULL");
    return e->be->iface->event_sync(e);
}

bool saga_event_done(saga_event *e) {
    return e ? e->be->iface->event_query(e) : true;
}

saga_status saga_event_elapsed(saga_event *start, saga_event *end, double *seconds) {
    if (!start || !end || !seconds)
        return saga_error(SAGA_ERR_INVALID_ARG, "saga_event_elapsed: %s is NULL",
                          !start ? "start"
                          : !end ? "end"
                                 : "seconds");
    if (start->be != end->be)
        return saga_error(SAGA_ERR_INVALID_ARG,
                          "saga_event_elapsed: the events belong to different backends");
    if (!start->be->iface->event_elapsed)
        return saga_error(SAGA_ERR_UNSUPPORTED,
                          "saga_event_elapsed: backend %s does not time events", start->be->name);
    double t = 0.0;
    saga_status st = start->be->iface->event_elapsed(start, end, &t);
    if (st < 0)
        return st;
    *seconds = t;
    return SAGA_OK;
}

saga_status saga_backend_synchronize(saga_backend *be) {
    if (!be)
        return saga_error(SAGA_ERR_INVALID_ARG, "saga_backend_synchronize: backend is NULL");
    return be->iface->synchronize(be);
}

saga_status saga_backend_bind_thread(saga_backend *be) {
    if (!be)
        return saga_error(SAGA_ERR_INVALID_ARG, "saga_backend_bind_thread: backend is NULL");
    if (!be->iface->bind_thread)
        return SAGA_OK;
    return be->iface->bind_thread(be);
}

saga_status saga_backend_profile_range(saga_backend *be, bool start) {
    if (!be)
        return saga_error(SAGA_ERR_INVALID_ARG, "saga_backend_profile_range: backend is NULL");
    if (!be->iface->profile_range)
        return SAGA_OK;
    return be->iface->profile_range(be, start);
}

/* ---- graphs ------------------------------------------------------------------------------ */

struct saga_replay {
    saga_backend *be;
    void *exec;
};

bool saga_backend_can_capture(const saga_backend *be) {
    return be && be->iface->capture_begin;
}

saga_status saga_backend_capture_begin(saga_backend *be) {
    if (!saga_backend_can_capture(be))
        return saga_error(SAGA_ERR_UNSUPPORTED, "saga_backend_capture_begin: %s has no graphs",
                          be ? be->name : "(no backend)");
    return be->iface->capture_begin(be);
}

saga_status saga_backend_capture_end(saga_backend *be, saga_replay **g) {
    saga_status st = SAGA_OK;
    saga_replay *made = NULL;
    SAGA_CHECK(saga_backend_can_capture(be), SAGA_ERR_INVALID_ARG,
               "saga_backend_capture_end: the backend has no graphs");
    if (!g) { /* discarded */
        SAGA_TRY(be->iface->capture_end(be, NULL));
        goto fail;
    }
    SAGA_CHECK(!*g || (*g)->be == be, SAGA_ERR_INVALID_ARG,
               "saga_backend_capture_end: the graph belongs to another backend");
    if (!*g) {
        st = saga_alloc_zeroed((void **)&made, 1, sizeof *made, "a graph");
        if (st < 0) {
            (void)be->iface->capture_end(be, NULL); /* the capture still has to end */
            goto fail;
        }
        made->be = be;
    }
    saga_replay *to = *g ? *g : made;
    SAGA_TRY(be->iface->capture_end(be, &to->exec));
    *g = to;
    made = NULL;
fail:
    saga_free(made);
    return st;
}

saga_status saga_replay_launch(saga_replay *g) {
    if (!g || !g->exec)
        return saga_error(SAGA_ERR_INVALID_ARG, "saga_replay_launch: %s",
                          g ? "the graph has no work" : "graph is NULL");
    return g->be->iface->graph_launch(g->be, g->exec);
}

void saga_replay_free(saga_replay **gp) {
    if (!gp || !*gp)
        return;
    saga_replay *g = *gp;
    if (g->exec)
        g->be->iface->graph_free(g->be, g->exec);
    saga_free(g);
    *gp = NULL;
}

saga_backend *saga_stream_backend(const saga_stream *s) {
    return s->be;
}

/* ---- copies -------------------------------------------------------------------------------- */

static saga_status copy(saga_stream *s, void *dst, const void *src, size_t n, saga_copy_kind kind,
                        const char *what) {
    if (n == 0)
        return SAGA_OK;
    if (!s || !dst || !src)
        return saga_error(SAGA_ERR_INVALID_ARG, "%s: %s is NULL (%zu bytes)", what,
                          !s     ? "stream"
                          : !dst ? "dst"
                                 : "src",
                          n);
    saga_status st = s->be->iface->memcpy_async(s, dst, src, n, kind);
    if (st < 0)
        return st;
    if (kind != SAGA_COPY_D2D) {
        lock(s->be);
        if (kind == SAGA_COPY_H2D)
            s->be->h2d_bytes += n;
        else
            s->be->d2h_bytes += n;
        unlock(s->be);
    }
    return SAGA_OK;
}

saga_status saga_memcpy_h2d_async(saga_stream *s, void *dst_dev, const void *src_host, size_t n) {
    return copy(s, dst_dev, src_host, n, SAGA_COPY_H2D, "saga_memcpy_h2d_async");
}

saga_status saga_memcpy_d2h_async(saga_stream *s, void *dst_host, const void *src_dev, size_t n) {
    return copy(s, dst_host, src_dev, n, SAGA_COPY_D2H, "saga_memcpy_d2h_async");
}

saga_status saga_memcpy_d2d_async(saga_stream *s, void *dst_dev, const void *src_dev, size_t n) {
    return copy(s, dst_dev, src_dev, n, SAGA_COPY_D2D, "saga_memcpy_d2d_async");
}

static saga_status copy_rows(saga_stream *s, const saga_host_rows *hr, void *dev, bool add,
                             const char *what) {
    if (hr && (hr->n == 0 || hr->row_bytes == 0))
        return SAGA_OK;
    if (!s || !hr || !dev)
        return saga_error(SAGA_ERR_INVALID_ARG, "%s: %s is NULL", what,
                          !s    ? "stream"
                          : !hr ? "rows"
                                : "device pointer");
    if (hr->n < 0 || (hr->n > 0 && !hr->base) || (!hr->rows && hr->first < 0) ||
        (add && hr->row_bytes % sizeof(float) != 0))
        return saga_error(SAGA_ERR_INVALID_ARG,
                          "%s: %lld rows of %zu bytes from row %lld of %p are not a valid request",
                          what, (long long)hr->n, hr->row_bytes, (long long)hr->first, hr->base);
    if (!s->be->iface->copy_rows)
        return saga_error(SAGA_ERR_UNSUPPORTED, "%s: the %s backend cannot copy rows", what,
                          s->be->name);
    saga_status st = s->be->iface->copy_rows(s, hr, dev, add);
    if (st < 0)
        return st;
    lock(s->be);
    if (add)
        s->be->d2h_bytes += (uint64_t)hr->n * hr->row_bytes;
    else
        s->be->h2d_bytes += (uint64_t)hr->n * hr->row_bytes;
    unlock(s->be);
    return SAGA_OK;
}

saga_status saga_memcpy_rows_h2d_async(saga_stream *s, void *dst_dev, const saga_host_rows *hr) {
    return copy_rows(s, hr, dst_dev, false, "saga_memcpy_rows_h2d_async");
}

saga_status saga_add_rows_d2h_async(saga_stream *s, const saga_host_rows *hr,
                                    const float *src_dev) {
    return copy_rows(s, hr, (void *)src_dev, true, "saga_add_rows_d2h_async");
}
