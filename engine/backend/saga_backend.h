/* saga_backend.h - where memory lives and kernels run: the CPU backend, the CUDA backend.
 *
 *   saga_backend *be = NULL;
 *   saga_backend_params p = saga_backend_params_defaults();
 *   p.budget_bytes = 512u << 20;               // device memory saga may hold
 *   SAGA_TRY(saga_backend_open(&be, "auto", &p));  // a GPU if one works, else the CPU
 *   void *d = NULL;
 *   SAGA_TRY(saga_backend_alloc(be, &d, bytes)); // accounted against the budget
 *   SAGA_TRY(saga_memcpy_h2d_async(saga_backend_default_stream(be), d, host, bytes));
 *   SAGA_TRY(saga_backend_synchronize(be));
 *   saga_backend_free(be, d, bytes);
 *   saga_backend_free_all(&be);
 *
 * A backend is a table of functions (engine/backend/backend_impl.h) plus a context. Memory
 * accounting against the budget happens here, above the table, so every backend obeys it the
 * same way. Copies and kernels are issued on streams; within a stream they run in order; events
 * order work across streams, with the semantics of CUDA streams and events.
 *
 * On the CPU backend (the "simulated device") the default stream is synchronous: whatever is
 * issued on it has run when the issuing call returns. Every stream made with saga_stream_new is
 * asynchronous: it owns a worker thread that runs its copies, memsets, event records, event waits
 * and host functions in issue order while the caller goes on, so copies overlap with compute as
 * on a GPU. CPU kernels always run on the calling thread; one issued on an asynchronous stream
 * first waits until the work queued there before it has run, which keeps the stream in order.
 * As on CUDA, memory that queued work still uses must not be freed before that work has run
 * (order the free after an event, or synchronize).
 */
#pragma once

#include "saga_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct saga_backend saga_backend;
typedef struct saga_stream saga_stream;
typedef struct saga_event saga_event;

typedef enum saga_backend_kind {
    SAGA_BACKEND_CPU = 0,
    SAGA_BACKEND_CUDA = 1,
    SAGA_BACKEND_KIND_COUNT
} saga_backend_kind;

/* Where the CPU backend's copies between host and "device" memory run when a block scheduler
 * streams: a copy there is a memcpy that takes a core. */
typedef enum saga_copies {
    SAGA_COPIES_AUTO = 0, /* in order with the kernels when their threads take every core, else
                           * on a worker thread beside them */
    SAGA_COPIES_INLINE,   /* on the default stream, in order with the kernels */
    SAGA_COPIES_WORKER,   /* on a copy stream's worker thread, overlapping the kernels */
    SAGA_COPIES_COUNT
} saga_copies;

typedef struct saga_backend_params {
    size_t budget_bytes; /* most device bytes held at once; 0 = no limit beyond the device */
    int n_threads;       /* CPU kernel threads; 0 = OpenMP's default */
    saga_copies copies;  /* CPU: where a scheduler's copies run (GPUs copy with their engines) */
} saga_backend_params;

SAGA_API saga_backend_params saga_backend_params_defaults(void);

/* Opens a backend from a spec: "cpu", "cuda", "cuda:N" or "auto". "auto" tries CUDA device 0
 * and falls back to the CPU after logging one line saying why (at warn level). An explicit
 * "cuda" that cannot be opened returns SAGA_ERR_DEVICE (no GPU, no driver) or
 * SAGA_ERR_UNSUPPORTED (built without CUDA). p may be NULL for defaults. */
SAGA_API saga_status saga_backend_open(saga_backend **out, const char *spec,
                                       const saga_backend_params *p);

SAGA_API saga_status saga_backend_cpu_new(saga_backend **out, const saga_backend_params *p);
/* Loads the CUDA backend module (libsaga_cuda.so, found next to libsaga or the executable, then
 * on the library path) and opens device `device`. Once loaded, the module stays loaded until the
 * process exits. */
SAGA_API saga_status saga_backend_cuda_new(saga_backend **out, int device,
                                           const saga_backend_params *p);

/* Frees the backend and everything it still caches; *be becomes NULL. Accepts NULL. Memory
 * still allocated from it is a caller bug and is reported at warn level. */
SAGA_API void saga_backend_free_all(saga_backend **be);

SAGA_API saga_backend_kind saga_backend_get_kind(const saga_backend *be);
/* "cpu", or "cuda:0 (NVIDIA H100 80GB HBM3)". */
SAGA_API const char *saga_backend_name(const saga_backend *be);

/* ---- device memory, accounted against the budget -------------------------------------- */

/* Allocates `bytes` of device memory (64-byte aligned at least). The budget is charged what the
 * backend's allocator takes for the request: on CUDA, bytes rounded up to a size class (512-byte
 * steps below 1 MiB, at most a quarter more above); on the CPU, bytes. SAGA_ERR_BUDGET when that
 * and what the backend holds (in use, and reserved for its own work: see saga_backend_stats)
 * would pass the budget (the message names them), SAGA_ERR_OUT_OF_MEMORY/DEVICE when the device
 * itself refuses. bytes == 0 gives NULL and succeeds. */
SAGA_API saga_status saga_backend_alloc(saga_backend *be, void **out, size_t bytes);
/* Frees memory from saga_backend_alloc; bytes must be the size it was allocated with. */
SAGA_API void saga_backend_free(saga_backend *be, void *ptr, size_t bytes);

/* Host memory for staging transfers: pinned on CUDA, plain (aligned) on the CPU. Not counted
 * against the device budget. */
SAGA_API saga_status saga_backend_host_alloc(saga_backend *be, void **out, size_t bytes);
SAGA_API void saga_backend_host_free(saga_backend *be, void *ptr, size_t bytes);

typedef struct saga_backend_stats {
    size_t budget_bytes; /* 0 = unlimited */
    size_t in_use_bytes; /* device bytes allocated now, as charged (see saga_backend_alloc) */
    size_t peak_bytes;   /* most device bytes allocated at once since the last reset */
    uint64_t h2d_bytes;  /* bytes copied host -> device since the last reset */
    uint64_t d2h_bytes;  /* bytes copied device -> host */
    uint64_t n_allocs;   /* successful allocations */
    size_t device_total; /* physical memory of the device (host RAM for the CPU) */
    /* Seconds spent inside copies and memsets since the last reset, summed over streams. The
     * CPU backend measures it (its workers for asynchronous streams, the caller for the default
     * stream); on CUDA it stays 0, as the generic layer cannot see when a device copy runs
     * (time one with events and saga_event_elapsed instead). */
    double copy_seconds;
    /* Host bytes from saga_backend_host_alloc not yet given back to saga_backend_host_free
     * (pinned memory on CUDA, plain aligned memory on the CPU). A level, like in_use_bytes:
     * saga_backend_reset_stats leaves it alone. */
    size_t host_pinned_bytes;
    /* spmm_f32 products since the backend was opened that ran through cuSPARSE, and those that
     * cuSPARSE refused as not supported (then run by saga's own kernel). The products the own
     * kernel takes from the start (a matrix without values, alpha == 0, sizes past cuSPARSE's
     * 32-bit indices, SAGA_CUDA_SPMM=own), or because the budget has no room for cuSPARSE's
     * workspace, count in neither. 0 on the CPU. Not reset. */
    uint64_t spmm_cusparse;
    uint64_t spmm_cusparse_refused;
    /* Device memory the backend holds beside in_use_bytes: reserved_bytes for its own work (on
     * CUDA each stream's scratch: reduction partials, index checks, the cuBLAS and cuSPARSE
     * workspaces), charged against the budget as allocations are; cached_bytes in freed blocks
     * it keeps for reuse, which it gives back to the device when a new block would otherwise
     * take the total past the budget. 0 on the CPU. */
    size_t reserved_bytes;
    size_t cached_bytes;
    /* The most device memory the backend held at once since the last reset: in_use + reserved +
     * cached, all that the device had given it. Never above the budget. */
    size_t held_peak_bytes;
    /* Of the budget, what the backend keeps for its own work (on CUDA a stream's scratch with its
     * cuBLAS workspace): the executors plan with the budget less this. 0 on the CPU. */
    size_t work_reserve_bytes;
} saga_backend_stats;

SAGA_API void saga_backend_get_stats(const saga_backend *be, saga_backend_stats *out);
/* Resets peak to the current in-use bytes (held_peak to what is held now) and zeroes the copy
 * counters and copy_seconds. */
SAGA_API void saga_backend_reset_stats(saga_backend *be);

/* ---- streams and events ---------------------------------------------------------------- */

/* The stream kernels run on unless told otherwise; owned by the backend. */
SAGA_API saga_stream *saga_backend_default_stream(saga_backend *be);
/* A new stream of be, owned by the caller (free it with saga_stream_free before the backend).
 * SAGA_ERR_OUT_OF_MEMORY. On the CPU its queue and worker thread are made by the first operation
 * issued on it, which fails with SAGA_ERR_OUT_OF_MEMORY (nothing queued) when memory or threads
 * run out. */
SAGA_API saga_status saga_stream_new(saga_stream **out, saga_backend *be);
/* Waits until the work queued on *s has run, then frees it; *s becomes NULL. Accepts NULL. */
SAGA_API void saga_stream_free(saga_stream **s);
/* Blocks until every operation issued on s so far has run. Returns an error that an operation
 * met while it ran on the stream (kept there until this call reports it; on a GPU, an index
 * outside its range that a gather or scatter of rows found on the device). */
SAGA_API saga_status saga_stream_synchronize(saga_stream *s);
/* Work issued on s after this call waits until the point e was last recorded at has completed
 * (a later record of e does not move it); e may belong to any stream of the same backend, or of
 * another backend where saga_stream_can_wait says so. A never-recorded or complete event imposes
 * no wait. On a synchronous stream (the CPU's default one) the caller blocks until e completes. */
SAGA_API saga_status saga_stream_wait_event(saga_stream *s, saga_event *e);
/* Whether s can wait for e on the device (saga_stream_wait_event): e of s's backend, or of
 * another device of the same kind that the backend can order its streams after (CUDA devices of
 * one process). Otherwise e can only be waited for on the host (saga_event_synchronize). */
SAGA_API bool saga_stream_can_wait(const saga_stream *s, const saga_event *e);

/* Runs fn(arg) on a host thread once s reaches this point; work issued on s later waits until fn
 * has returned. As with cudaLaunchHostFunc, fn must not issue work on this backend's streams nor
 * synchronize them or their events (it could wait for itself). Without support in the backend,
 * the caller synchronizes s and calls fn itself. SAGA_ERR_OUT_OF_MEMORY (fn is then not called)
 * when the operation cannot be queued. */
SAGA_API saga_status saga_stream_launch_host_fn(saga_stream *s, void (*fn)(void *arg), void *arg);

SAGA_API saga_status saga_event_new(saga_event **out, saga_backend *be);
SAGA_API void saga_event_free(saga_event **e);
/* Marks the point in s's queue that e stands for: e completes when s reaches it, at once on a
 * synchronous stream. Recording again replaces the previous point, as cudaEventRecord. */
SAGA_API saga_status saga_event_record(saga_event *e, saga_stream *s);
/* Blocks until e has completed (returns at once for a never-recorded event). */
SAGA_API saga_status saga_event_synchronize(saga_event *e);
/* true when the work before the recorded point has completed (or e was never recorded). Does
 * not block. */
SAGA_API bool saga_event_done(saga_event *e);
/* *seconds = the time from the completion of start to the completion of end (negative when end
 * completed first). Both must have been recorded and have completed: SAGA_ERR_INVALID_ARG names
 * the one that was not. SAGA_ERR_UNSUPPORTED on a backend that does not time events. */
SAGA_API saga_status saga_event_elapsed(saga_event *start, saga_event *end, double *seconds);

/* Waits for all work on all of the backend's streams. Returns the first error kept on one of
 * them (see saga_stream_synchronize). */
SAGA_API saga_status saga_backend_synchronize(saga_backend *be);

/* Makes be's device the current one of the calling thread (cudaSetDevice on CUDA; nothing on
 * the CPU). A thread that issues work on a backend other than the one it started with (one
 * thread per GPU of a pipeline) calls it first. */
SAGA_API saga_status saga_backend_bind_thread(saga_backend *be);

/* Opens (start) or closes a profiler's capture range around the work issued in between: on CUDA
 * cudaProfilerStart / cudaProfilerStop, which `nsys profile --capture-range=cudaProfilerApi` and
 * the CUDA simulator's counts (SAGA_CUDASIM_STATS) follow; nothing on the CPU. Close it after
 * the work is synchronized so that all of it falls inside. */
SAGA_API saga_status saga_backend_profile_range(saga_backend *be, bool start);

/* Asynchronous copies. The host side must stay valid until the stream reaches the copy; with
 * pinned host memory (saga_backend_host_alloc) CUDA copies overlap with compute. */
SAGA_API saga_status saga_memcpy_h2d_async(saga_stream *s, void *dst_dev, const void *src_host,
                                           size_t n);
SAGA_API saga_status saga_memcpy_d2h_async(saga_stream *s, void *dst_host, const void *src_dev,
                                           size_t n);
SAGA_API saga_status saga_memcpy_d2d_async(saga_stream *s, void *dst_dev, const void *src_dev,
                                           size_t n);

/* Rows of a host array: rows[i] (or first + i when rows is NULL) for i < n, each of row_bytes
 * at base. base and rows are host memory from saga_backend_host_alloc, which a CUDA device reads
 * and writes where it lies (pinned, mapped memory); the caller vouches that every row lies in
 * base's array (saga built the indices and checked them when it did). */
typedef struct saga_host_rows {
    void *base;
    size_t row_bytes;
    const int32_t *rows;
    int64_t first;
    int64_t n;
} saga_host_rows;

/* Gathers the host rows hr into hr->n consecutive rows at dst_dev, in s's order and without the
 * host: on CUDA a kernel reads them where they lie. Both arrays, and the rows they name, must
 * stay valid and unchanged until s reaches the copy. */
SAGA_API saga_status saga_memcpy_rows_h2d_async(saga_stream *s, void *dst_dev,
                                                const saga_host_rows *hr);
/* Adds hr->n consecutive rows of floats at src_dev into the host rows hr (row_bytes a multiple
 * of 4, the rows distinct), in s's order and without the host: on CUDA a kernel writes them where
 * they lie. The host must not touch those rows until s reaches the end of the addition. */
SAGA_API saga_status saga_add_rows_d2h_async(saga_stream *s, const saga_host_rows *hr,
                                             const float *src_dev);

/* The backend a stream belongs to. */
SAGA_API saga_backend *saga_stream_backend(const saga_stream *s);

/* ---- OpenMP's idle threads in a loop of repeated work ---------------------------------- */

/* For a loop that repeats the same work, such as training epochs, on the CPU backend: whether
 * OpenMP's idle threads sleep between saga's kernels (the default: a spinning thread takes the
 * core that the caller's serial work, or other programs, need) or spin (a woken thread costs tens
 * of microseconds on a virtual machine, which many short kernels pay again and again), chosen by
 * timing the repetitions: after SAGA_IDLE_WARM of them, SAGA_IDLE_KEEP run asleep and
 * SAGA_IDLE_KEEP spinning, then the way whose last SAGA_IDLE_KEEP include the fastest (other work
 * only ever slows one), the other every SAGA_IDLE_EXPLORE-th so that a lasting change of the
 * machine's load is seen. The results are the same either way; only the time moves. The state
 * stays between repetitions (changing it at each start would churn threads) and is process-wide:
 * saga_idle_tuner_finish puts the sleeping threads back. Nothing on other backends, or when the
 * user's OMP_WAIT_POLICY, GOMP_SPINCOUNT or SAGA_OMP_SPIN=1 decides. Zero-initialise. */
enum { SAGA_IDLE_WARM = 2, SAGA_IDLE_KEEP = 3, SAGA_IDLE_EXPLORE = 32 };
typedef struct saga_idle_tuner {
    double ms[2][SAGA_IDLE_KEEP]; /* the last times, idle threads asleep (0) and spinning (1) */
    int runs[2];                  /* repetitions timed under each */
    int reps;                     /* repetitions ended */
    int policy;                   /* of the repetition under way: 1 spinning, 0 asleep */
    double t0;                    /* its start (saga_now) */
    bool active;                  /* begun on a CPU backend and not yet ended */
    bool spun;                    /* some repetition ran spinning */
} saga_idle_tuner;

/* Before a repetition: sets the idle policy it runs under (nothing unless be is a CPU backend). */
SAGA_API void saga_idle_tuner_begin(saga_idle_tuner *t, saga_backend *be);
/* After it (its device work done): records its time. what names the work in the line logged
 * (SAGA_LOG_INFO) when the choice is first made. */
SAGA_API void saga_idle_tuner_end(saga_idle_tuner *t, const char *what);
/* The loop is over: the threads sleep again when some repetition spun. */
SAGA_API void saga_idle_tuner_finish(saga_idle_tuner *t);

#ifdef __cplusplus
}
#endif
