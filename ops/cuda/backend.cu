// backend.cu - the CUDA backend module: device selection, a caching allocator, streams, events,
// copies and the kernel table. libsaga loads it with dlopen (engine/backend/backend.c) and calls
// saga_cuda_module_init; the module does not link libsaga.
//
// Memory: requests are rounded up to size classes. A free is ordered on the default stream: the
// memory is handed out again only after the default stream has passed the point of the free (an
// event recorded there), and the other streams wait for that point on the device. Work on other
// streams that still uses the memory must be ordered before the free by the caller (an event, or
// a synchronize).
//
// Under a budget the backend takes the whole budget from the device at its first allocation, as
// one arena, and hands out ranges of it (arena_alloc: a block scheduler's blocks from the bottom
// up, everything else from the top down; free ranges kept by address, merged with their
// neighbours when freed). An epoch then neither allocates nor frees device memory nor waits for
// the device to do so, whatever the mix of sizes. Without a budget, or where the device refuses
// the arena, freed blocks go back to a cache of free lists by class; they go back to the driver
// when the backend is destroyed, when cudaMalloc fails (to retry), and when a new block would take
// what the device has given the backend past its budget.
//
// The budget covers every byte this module takes with cudaMalloc (see saga_backend_iface): the
// generic layer charges each allocation at its size class (alloc_size) and refuses one that would
// not fit beside what is in use and reserved; the streams' scratch, which holds the cuBLAS and
// cuSPARSE workspaces, is reserved through the generic layer (util.cu). The arena is the budget,
// and its free bytes are be->cached; without one, cuda_alloc trims the cache (be->cached) before
// a cudaMalloc that would otherwise pass the budget. So in_use + reserved + cached, all that
// cudaMalloc has given the module, stays within it. A request the arena cannot place for want of
// one free range large enough (its free bytes in pieces) fails as over budget: the callers give
// back what they hold (contexts' caches, schedulers' blocks) and ask again.
#include "common.cuh"

#include <cuda_profiler_api.h>

#ifdef SAGA_CUDA_HAVE_NCCL
#include <nccl.h>
#endif

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <new>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <type_traits>
#include <unordered_map>
#include <vector>

const saga_module_host *saga_cuda_host = nullptr;

// ---- errors ---------------------------------------------------------------------------------

// A failed runtime call also leaves its error as the thread's last error, which the next
// cudaGetLastError (the launch check of every kernel slot) would report again: a handled
// out-of-memory or invalid argument would fail an unrelated later kernel. Reported here, it is
// cleared (a sticky error, from a kernel fault, stays: every later call reports it anyway).
saga_status saga_cuda_error(cudaError_t err, const char *what, const char *file, int line) {
    cudaGetLastError();
    const saga_status st =
        err == cudaErrorMemoryAllocation ? SAGA_ERR_OUT_OF_MEMORY : SAGA_ERR_DEVICE;
    return saga_cuda_host->error(st, "%s: %s (%s) at %s:%d", what, cudaGetErrorString(err),
                                 cudaGetErrorName(err), file, line);
}

saga_status saga_cublas_error(cublasStatus_t err, const char *what, const char *file, int line) {
    const saga_status st =
        err == CUBLAS_STATUS_ALLOC_FAILED ? SAGA_ERR_OUT_OF_MEMORY : SAGA_ERR_DEVICE;
    return saga_cuda_host->error(st, "%s: %s (%s) at %s:%d", what, cublasGetStatusString(err),
                                 cublasGetStatusName(err), file, line);
}

saga_status saga_cusparse_error(cusparseStatus_t err, const char *what, const char *file,
                                int line) {
    const saga_status st =
        err == CUSPARSE_STATUS_ALLOC_FAILED ? SAGA_ERR_OUT_OF_MEMORY : SAGA_ERR_DEVICE;
    return saga_cuda_host->error(st, "%s: %s (%s) at %s:%d", what, cusparseGetErrorString(err),
                                 cusparseGetErrorName(err), file, line);
}

// ---- the context ------------------------------------------------------------------------------

namespace {

// A freed block kept for reuse. It is handed out again without the host waiting: where its free
// has not yet been reached, every other stream of the backend waits for it on the device (the
// default stream is ordered after it already, order_after_free), so no later work on any of them
// touches the block before its last users are done.
struct cached_block {
    void *ptr;
    cudaEvent_t freed; // recorded on the default stream when the block was freed
};

// A free range of the arena. freed: the latest free that made it (recorded on the default
// stream, so that it is passed only after every earlier free there), or null once passed or never
// used.
struct arena_range {
    size_t bytes;
    cudaEvent_t freed;
};

struct cuda_ctx {
    int device = 0;
    // under a budget: the arena and its free ranges by offset (see the top of the file)
    char *arena = nullptr;
    size_t arena_bytes = 0;
    bool arena_tried = false;
    std::map<size_t, arena_range> arena_free;
    // size class -> free blocks of exactly that size, oldest first
    std::unordered_map<size_t, std::vector<cached_block>> cache;
    std::vector<cudaEvent_t> spare_events; // the cache's bytes are be->cached
    std::mutex streams_lock;
    std::vector<cudaStream_t> streams; // every stream of the backend (cuda_stream_new)
    std::mutex handles_lock;
    std::mutex cublas_lock; // held from saga_cuda_cublas_acquire to saga_cuda_cublas_release
    cublasHandle_t cublas = nullptr;
    std::mutex cusparse_lock; // held from saga_cuda_cusparse_acquire to saga_cuda_cusparse_release
    cusparseHandle_t cusparse = nullptr;
    void *spmm_plans = nullptr;  // under cusparse_lock (saga_cuda_spmm_plans)
    size_t cublas_workspace = 0; // per stream (see saga_cuda_cublas_workspace_bytes)
    // the slots' bad indices found on the device (saga_cuda_index_fault_take): pinned, mapped
    saga_cuda_index_fault *fault = nullptr;     // as the host reads it
    saga_cuda_index_fault *fault_dev = nullptr; // as the device writes it
    bool spmm_cusparse = false;                 // SAGA_CUDA_SPMM at open: "cusparse*" turns it on
    int spmm_alg = 2;                           // and which of cuSPARSE's CSR algorithms: 1, 2, 3
    bool pull_tiles = true;                     // SAGA_CUDA_PULL at open: "groups" turns it off
    std::atomic<bool> spmm_refusal_noted{false};
    // a capture (cuda_capture_begin .. cuda_capture_end) on the default stream: the other streams
    // are forked into it by cap_fork and joined back by their cap_join events; frees while it
    // records wait in cap_frees for the launch of the recorded work (which may still read them)
    bool capturing = false;
    cudaEvent_t cap_fork = nullptr;
    std::vector<cudaEvent_t> cap_join;
    std::vector<cudaStream_t> cap_streams;
    std::vector<std::pair<void *, size_t>> cap_frees;
};

cuda_ctx *ctx_of(saga_backend *be) {
    return static_cast<cuda_ctx *>(be->ctx);
}

// Keeps ev for the next free to record (or destroys it when there is no room to).
void spare_event(cuda_ctx *c, cudaEvent_t ev) {
    try {
        c->spare_events.push_back(ev);
    } catch (const std::bad_alloc &) {
        cudaEventDestroy(ev);
    }
}

// Rounds a request up to its size class: 512-byte steps below 1 MiB, then four classes per power
// of two (at most 25% slack), so that freed blocks are found again by exact class. 0 on overflow.
size_t size_class(size_t n) {
    const size_t small = 512, big = size_t(1) << 20;
    if (n <= small)
        return small;
    size_t step = small;
    if (n > big) {
        size_t p = big;
        while (p <= n / 2)
            p <<= 1;
        step = p / 4;
    }
    if (n > SIZE_MAX - (step - 1))
        return 0;
    return (n + step - 1) / step * step;
}

// Gives cached blocks back to the driver, the largest first (the fewest cudaFree calls), until at
// most keep bytes stay cached; waits for the device first (a block's last users may still run).
void release_cache(saga_backend *be, cuda_ctx *c, size_t keep) {
    if (be->cached <= keep)
        return;
    cudaDeviceSynchronize();
    while (be->cached > keep) {
        auto big = c->cache.end();
        for (auto it = c->cache.begin(); it != c->cache.end(); ++it)
            if (!it->second.empty() && (big == c->cache.end() || it->first > big->first))
                big = it;
        if (big == c->cache.end())
            break; // (not reached: be->cached is the sum of the lists)
        const cached_block b = big->second.back();
        big->second.pop_back();
        cudaFree(b.ptr);
        spare_event(c, b.freed);
        be->cached -= big->first;
        if (big->second.empty())
            c->cache.erase(big);
    }
    cudaGetLastError(); // a failure here is not the next launch check's to report
}

} // namespace

// ---- memory -----------------------------------------------------------------------------------

// Orders every stream of the backend after freed (see cached_block), on the device.
static cudaError_t order_after_free(saga_backend *be, cuda_ctx *c, cudaEvent_t freed) {
    cudaError_t q = cudaEventQuery(freed);
    if (q != cudaErrorNotReady)
        return q;       // reached (cudaSuccess), or an error to report
    cudaGetLastError(); // not ready is no error
    const saga_cuda_stream *ds = static_cast<saga_cuda_stream *>(be->default_stream.impl);
    std::lock_guard<std::mutex> guard(c->streams_lock);
    for (cudaStream_t s : c->streams)
        if (!ds || s != ds->stream)
            if ((q = cudaStreamWaitEvent(s, freed, 0)) != cudaSuccess)
                return q;
    return cudaSuccess;
}

// An event recorded on the default stream now, marking a free there (see the top of the file), or
// null when there is no default stream (a free after the backend's teardown began, when the
// streams are idle) or no event could be made or recorded (the error cleared).
static cudaEvent_t free_event(saga_backend *be, cuda_ctx *c) {
    const saga_cuda_stream *ds = static_cast<saga_cuda_stream *>(be->default_stream.impl);
    if (!ds)
        return nullptr;
    cudaEvent_t ev = nullptr;
    if (!c->spare_events.empty()) {
        ev = c->spare_events.back();
        c->spare_events.pop_back();
    } else if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess) {
        ev = nullptr;
    }
    if (ev && cudaEventRecord(ev, ds->stream) == cudaSuccess)
        return ev;
    cudaGetLastError();
    if (ev)
        cudaEventDestroy(ev);
    return nullptr;
}

// Takes the budget from the device as the arena, once; without it (the device refuses) the
// cache by class serves instead.
static void arena_open(saga_backend *be, cuda_ctx *c) {
    c->arena_tried = true;
    const size_t bytes = be->params.budget_bytes / 512 * 512;
    void *p = nullptr;
    if (bytes == 0 || cudaMalloc(&p, bytes) != cudaSuccess) {
        cudaGetLastError();
        saga_cuda_host->log(SAGA_LOG_INFO,
                            "%s: cannot take the %zu-byte budget as one arena; allocating block "
                            "by block",
                            be->name, bytes);
        return;
    }
    try {
        c->arena_free.emplace(0, arena_range{bytes, nullptr});
    } catch (const std::bad_alloc &) {
        cudaFree(p);
        return;
    }
    c->arena = static_cast<char *>(p);
    c->arena_bytes = bytes;
    be->cached += bytes;
}

static bool in_arena(const cuda_ctx *c, const void *p) {
    const char *q = static_cast<const char *>(p);
    return c->arena && q >= c->arena && q < c->arena + c->arena_bytes;
}

// The event of two frees that made one range to keep: the later one, recorded after the other on
// the default stream, is passed only after it; the other goes spare.
static cudaEvent_t later_free(cuda_ctx *c, cudaEvent_t earlier, cudaEvent_t later) {
    if (!later)
        return earlier;
    if (earlier)
        spare_event(c, earlier);
    return later;
}

// A range of cls bytes. A block scheduler's blocks (block), which stay across steps, are placed at
// the front of the lowest free range that holds them; everything else (a step's own tensors,
// scratch, parameters) from the top of the arena down, at the end of the highest free range that
// holds it. The two kinds then do not leave each other's holes behind: a step's tensors come and
// go near the top, the blocks stay packed near the bottom (not in the best-fitting hole wherever
// it lies, which scatters them), and the free room between them stays in one piece as far as the
// blocks' lifetimes allow (a block the scheduler evicts leaves its hole until a block fills it).
// The range is handed out once every stream is ordered after the free that made it.
// Whether the free that made a range or a cached block has been reached on the device (no free:
// yes). While a graph records, only such memory is handed out: ordering a recorded stream after a
// free recorded outside the capture is not allowed, and nothing recorded has run.
static bool free_passed(cudaEvent_t freed) {
    if (!freed)
        return true;
    const cudaError_t q = cudaEventQuery(freed);
    if (q != cudaSuccess)
        cudaGetLastError();
    return q == cudaSuccess;
}

static saga_status arena_alloc(saga_backend *be, cuda_ctx *c, size_t cls, bool block, void **out) {
    const bool top = !block;
    // a block ends within the room a scheduler keeps its blocks in (saga_backend_set_block_room)
    const size_t room = block && be->block_room ? be->block_room : c->arena_bytes;
    auto best = c->arena_free.end();
    for (auto it = c->arena_free.begin(); it != c->arena_free.end(); ++it)
        if (it->second.bytes >= cls && (top || it->first + cls <= room) &&
            (!c->capturing || free_passed(it->second.freed))) {
            best = it;
            if (!top)
                break;
        }
    if (best == c->arena_free.end()) {
        size_t largest = 0;
        for (const auto &r : c->arena_free)
            largest = std::max(largest, r.second.bytes);
        char within[80] = "";
        if (room < c->arena_bytes)
            snprintf(within, sizeof within, " within the first %zu bytes, the blocks' room", room);
        return saga_cuda_host->error(
            SAGA_ERR_BUDGET,
            "%s: device memory budget: no free range of %zu bytes in the %zu-byte arena%s (%zu "
            "bytes free in %zu ranges, the largest %zu)%s",
            be->name, cls, c->arena_bytes, within, be->cached, c->arena_free.size(), largest,
            c->capturing ? " that no earlier work may still use while a graph records" : "");
    }
    const size_t off = best->first;
    const arena_range r = best->second;
    if (r.freed) {
        const cudaError_t q = order_after_free(be, c, r.freed);
        if (q != cudaSuccess)
            return saga_cuda_error(q, "cudaStreamWaitEvent(freed)", __FILE__, __LINE__);
    }
    // the rest keeps the event (its memory was freed by the same call); the part handed out was
    // ordered after it just now
    const size_t rest = r.bytes - cls;
    if (rest > 0 && top) {
        best->second.bytes = rest; // the front stays free
    } else {
        c->arena_free.erase(best);
        if (rest > 0)
            c->arena_free.emplace(off + cls, arena_range{rest, r.freed});
        else if (r.freed)
            spare_event(c, r.freed);
    }
    be->cached -= cls;
    *out = c->arena + (top ? off + rest : off);
    return SAGA_OK;
}

// Returns cls bytes at p to the arena, ordered on the default stream (ev, the free's event), merged
// with the free ranges beside them. Only a range with no free neighbour takes a new map node.
static void arena_release(saga_backend *be, cuda_ctx *c, void *p, size_t cls, cudaEvent_t ev) {
    const size_t off = static_cast<size_t>(static_cast<char *>(p) - c->arena);
    auto next = c->arena_free.lower_bound(off);
    auto prev = next == c->arena_free.begin() ? c->arena_free.end() : std::prev(next);
    const bool to_next = next != c->arena_free.end() && next->first == off + cls;
    const bool to_prev = prev != c->arena_free.end() && prev->first + prev->second.bytes == off;
    if (to_prev) { // prev grows over the range, and over next too when that follows
        prev->second.bytes += cls;
        prev->second.freed = later_free(c, prev->second.freed, ev);
        if (to_next) {
            prev->second.bytes += next->second.bytes;
            prev->second.freed = later_free(c, next->second.freed, prev->second.freed);
            c->arena_free.erase(next);
        }
    } else if (to_next) { // next moves down to start at off
        auto node = c->arena_free.extract(next);
        node.key() = off;
        node.mapped().bytes += cls;
        node.mapped().freed = later_free(c, node.mapped().freed, ev);
        c->arena_free.insert(std::move(node));
    } else {
        try {
            c->arena_free.emplace(off, arena_range{cls, ev});
        } catch (const std::bad_alloc &) {
            // (a map node of a few words) the range is lost to the arena until the backend closes
            if (ev)
                spare_event(c, ev);
            return;
        }
    }
    be->cached += cls;
}

// cudaMalloc's block p of cls bytes into *out, or its error as the backend's status.
static saga_status malloc_result(saga_backend *be, cudaError_t err, void *p, size_t cls,
                                 void **out) {
    if (err != cudaSuccess) {
        cudaGetLastError();
        return saga_cuda_host->error(
            err == cudaErrorMemoryAllocation ? SAGA_ERR_OUT_OF_MEMORY : SAGA_ERR_DEVICE,
            "%s: cudaMalloc of %zu bytes failed: %s", be->name, cls, cudaGetErrorString(err));
    }
    *out = p;
    return SAGA_OK;
}

// While a graph records: a cached block whose free has been reached, else a new one within the
// budget (cudaMalloc, which a capture allows once the thread relaxes its mode: the block has no
// earlier users); the cache is not trimmed (that waits for the device).
static saga_status capture_alloc(saga_backend *be, cuda_ctx *c, size_t cls, void **out) {
    auto it = c->cache.find(cls);
    if (it != c->cache.end())
        for (size_t i = 0; i < it->second.size(); i++)
            if (free_passed(it->second[i].freed)) {
                const cached_block b = it->second[i];
                it->second.erase(it->second.begin() + (std::ptrdiff_t)i);
                be->cached -= cls;
                spare_event(c, b.freed);
                *out = b.ptr;
                return SAGA_OK;
            }
    const size_t budget = be->params.budget_bytes;
    if (budget && be->in_use + be->reserved + be->cached + cls > budget)
        return saga_cuda_host->error(SAGA_ERR_BUDGET,
                                     "%s: device memory budget: no room for %zu bytes while a "
                                     "graph records (the cache is not trimmed then)",
                                     be->name, cls);
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    SAGA_CUDA_RETURN(cudaThreadExchangeStreamCaptureMode(&mode));
    void *p = nullptr;
    const cudaError_t err = cudaMalloc(&p, cls);
    cudaThreadExchangeStreamCaptureMode(&mode);
    return malloc_result(be, err, p, cls, out);
}

// block: a block scheduler's block (arena_alloc places it apart from the rest).
static saga_status cuda_alloc_at(saga_backend *be, void **out, size_t bytes, bool block) {
    cuda_ctx *c = ctx_of(be);
    const size_t cls = size_class(bytes);
    if (cls == 0)
        return saga_cuda_host->error(SAGA_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes",
                                     be->name, bytes);
    SAGA_CUDA_RETURN(cudaSetDevice(c->device));
    if (be->params.budget_bytes && !c->arena_tried)
        arena_open(be, c);
    if (c->arena) {
        try {
            return arena_alloc(be, c, cls, block, out);
        } catch (const std::bad_alloc &) {
            return saga_cuda_host->error(SAGA_ERR_OUT_OF_MEMORY,
                                         "%s: out of memory for the arena's free list", be->name);
        }
    }
    if (c->capturing)
        return capture_alloc(be, c, cls, out);
    auto it = c->cache.find(cls);
    if (it != c->cache.end() && !it->second.empty()) {
        std::vector<cached_block> &list = it->second;
        // The oldest block is the likeliest to be past its free already.
        cached_block b = list.front();
        list.erase(list.begin());
        be->cached -= cls;
        cudaError_t q = order_after_free(be, c, b.freed);
        spare_event(c, b.freed);
        if (q != cudaSuccess) {
            cudaGetLastError();
            cudaFree(b.ptr);
            return saga_cuda_error(q, "cudaStreamWaitEvent(freed)", __FILE__, __LINE__);
        }
        *out = b.ptr;
        return SAGA_OK;
    }
    // Room for the new block within the budget: the generic layer has checked that in_use +
    // reserved + cls fits, so the cache gives back whatever of it does not fit beside them.
    const size_t budget = be->params.budget_bytes, live = be->in_use + be->reserved;
    if (budget && be->cached > 0)
        release_cache(be, c, live + cls <= budget ? budget - live - cls : 0);
    void *p = nullptr;
    cudaError_t err = cudaMalloc(&p, cls);
    if (err == cudaErrorMemoryAllocation && be->cached > 0) {
        cudaGetLastError(); // clear the error before retrying
        saga_cuda_host->log(SAGA_LOG_INFO, "%s: out of memory; releasing %zu cached bytes",
                            be->name, be->cached);
        release_cache(be, c, 0);
        err = cudaMalloc(&p, cls);
    }
    return malloc_result(be, err, p, cls, out);
}

static saga_status cuda_alloc(saga_backend *be, void **out, size_t bytes) {
    return cuda_alloc_at(be, out, bytes, false);
}

static saga_status cuda_alloc_block(saga_backend *be, void **out, size_t bytes) {
    return cuda_alloc_at(be, out, bytes, true);
}

static void cuda_free(saga_backend *be, void *ptr, size_t bytes) {
    cuda_ctx *c = ctx_of(be);
    if (c->capturing) {
        try {
            c->cap_frees.emplace_back(ptr, bytes);
            return;
        } catch (const std::bad_alloc &) {
            // (a vector entry) the block is lost to the backend until it closes
            return;
        }
    }
    const size_t cls = size_class(bytes);
    cudaSetDevice(c->device);
    const cudaEvent_t ev = free_event(be, c);
    if (in_arena(c, ptr)) {
        // with no event to order the next owner by, the device finishes the users now
        if (!ev && be->default_stream.impl)
            cudaDeviceSynchronize();
        arena_release(be, c, ptr, cls, ev);
        return;
    }
    if (ev) {
        try {
            c->cache[cls].push_back(cached_block{ptr, ev});
            be->cached += cls;
            return;
        } catch (const std::bad_alloc &) {
            spare_event(c, ev);
        }
    }
    // No event or no room to remember the block: give it back to the driver (which waits).
    cudaFree(ptr);
}

static saga_status cuda_host_alloc(saga_backend *be, void **out, size_t bytes) {
    SAGA_CUDA_RETURN(cudaSetDevice(ctx_of(be)->device));
    void *p = nullptr;
    // mapped: kernels reach it where it lies (saga_cuda_copy_rows)
    const cudaError_t err = cudaHostAlloc(&p, bytes, cudaHostAllocPortable | cudaHostAllocMapped);
    if (err != cudaSuccess) {
        cudaGetLastError();
        return saga_cuda_host->error(SAGA_ERR_OUT_OF_MEMORY,
                                     "%s: cannot allocate %zu bytes of pinned host memory: %s",
                                     be->name, bytes, cudaGetErrorString(err));
    }
    *out = p;
    return SAGA_OK;
}

// The charge of a request (see saga_backend_iface): its size class.
static size_t cuda_alloc_size(const saga_backend *be, size_t bytes) {
    (void)be;
    return size_class(bytes);
}

static void cuda_host_free(saga_backend *be, void *ptr, size_t bytes) {
    (void)bytes;
    cudaSetDevice(ctx_of(be)->device);
    cudaFreeHost(ptr);
}

// ---- streams and events ---------------------------------------------------------------------

static saga_status cuda_stream_new(saga_backend *be, saga_stream *s) {
    saga_cuda_stream *cs = new (std::nothrow) saga_cuda_stream();
    if (!cs)
        return saga_cuda_host->error(SAGA_ERR_OUT_OF_MEMORY, "%s: out of memory for a stream",
                                     be->name);
    cs->device = ctx_of(be)->device;
    saga_status st =
        saga_cuda_check(cudaSetDevice(cs->device), "cudaSetDevice", __FILE__, __LINE__);
    if (st >= 0)
        st = saga_cuda_check(cudaStreamCreateWithFlags(&cs->stream, cudaStreamNonBlocking),
                             "cudaStreamCreateWithFlags", __FILE__, __LINE__);
    if (st >= 0) {
        cuda_ctx *c = ctx_of(be);
        try {
            std::lock_guard<std::mutex> guard(c->streams_lock);
            c->streams.push_back(cs->stream);
        } catch (const std::bad_alloc &) {
            cudaStreamDestroy(cs->stream);
            st = saga_cuda_host->error(SAGA_ERR_OUT_OF_MEMORY, "%s: out of memory for a stream",
                                       be->name);
        }
    }
    if (st < 0) {
        delete cs;
        return st;
    }
    s->impl = cs;
    return SAGA_OK;
}

static void cuda_stream_free(saga_stream *s);

// Under a budget the default stream, where the executors' kernels run, takes its scratch (the
// reductions' partials and flags) when the backend opens: first, before any planner or scheduler
// fills the budget, so that a reduction never finds the room its scratch needs taken by blocks
// (whose size classes may pass a planner's estimate; the scheduler evicts for those).
static saga_status cuda_default_stream_new(saga_backend *be, saga_stream *s) {
    saga_status st = cuda_stream_new(be, s);
    if (st < 0 || s != &be->default_stream || be->params.budget_bytes == 0)
        return st;
    saga_cuda_scratch sc;
    st = saga_cuda_stream_workspace(s, "the default stream", 0, &sc);
    if (st < 0)
        cuda_stream_free(s);
    return st;
}

static void cuda_stream_free(saga_stream *s) {
    saga_cuda_stream *cs = static_cast<saga_cuda_stream *>(s->impl);
    if (!cs)
        return;
    cudaSetDevice(cs->device);
    cudaStreamSynchronize(cs->stream);
    // While the stream still exists: the cache orders a free on the default stream (maybe this).
    saga_cuda_host->unreserve(s->be, cs->d_scratch, cs->scratch_bytes);
    if (cuda_ctx *c = ctx_of(s->be)) {
        std::lock_guard<std::mutex> guard(c->streams_lock);
        c->streams.erase(std::remove(c->streams.begin(), c->streams.end(), cs->stream),
                         c->streams.end());
    }
    cudaStreamDestroy(cs->stream);
    cudaFreeHost(cs->h_result);
    delete cs;
    s->impl = nullptr;
}

static saga_status cuda_stream_sync(saga_stream *s) {
    cudaStream_t stream;
    saga_status st = saga_cuda_stream_get(s, &stream);
    if (st < 0)
        return st;
    SAGA_CUDA_RETURN(cudaStreamSynchronize(stream));
    return saga_cuda_index_fault_take(s->be);
}

// Also stream_wait_foreign: CUDA orders a stream after an event of another device of the process.
static saga_status cuda_stream_wait_event(saga_stream *s, saga_event *e) {
    cudaStream_t stream;
    saga_status st = saga_cuda_stream_get(s, &stream);
    if (st < 0)
        return st;
    SAGA_CUDA_RETURN(cudaStreamWaitEvent(stream, static_cast<cudaEvent_t>(e->impl), 0));
    return SAGA_OK;
}

static saga_status cuda_event_new(saga_backend *be, saga_event *e) {
    cudaEvent_t ev = nullptr;
    SAGA_CUDA_RETURN(cudaSetDevice(ctx_of(be)->device));
    // with timing (cudaEventDefault), so that saga_event_elapsed can measure between two events
    SAGA_CUDA_RETURN(cudaEventCreateWithFlags(&ev, cudaEventDefault));
    e->impl = ev;
    return SAGA_OK;
}

static void cuda_event_free(saga_event *e) {
    if (e->impl) {
        cudaSetDevice(ctx_of(e->be)->device);
        cudaEventDestroy(static_cast<cudaEvent_t>(e->impl));
    }
    e->impl = nullptr;
}

static saga_status cuda_event_record(saga_event *e, saga_stream *s) {
    cudaStream_t stream;
    saga_status st = saga_cuda_stream_get(s, &stream);
    if (st < 0)
        return st;
    SAGA_CUDA_RETURN(cudaEventRecord(static_cast<cudaEvent_t>(e->impl), stream));
    return SAGA_OK;
}

// The event entry points may be the first call of a new thread (a poller, a copy thread): make
// the backend's device current first, as the stream entry points do, rather than letting the
// runtime bind device 0 to the thread.
static saga_status cuda_event_sync(saga_event *e) {
    SAGA_CUDA_RETURN(cudaSetDevice(ctx_of(e->be)->device));
    SAGA_CUDA_RETURN(cudaEventSynchronize(static_cast<cudaEvent_t>(e->impl)));
    return saga_cuda_index_fault_take(e->be);
}

static bool cuda_event_query(saga_event *e) {
    cudaSetDevice(ctx_of(e->be)->device);
    const cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(e->impl));
    if (err == cudaErrorNotReady) {
        // "not ready" is also left as the thread's last error: cleared, or the launch check of
        // the next kernel issued on this thread (cudaGetLastError) would fail with it.
        cudaGetLastError();
        return false;
    }
    if (err != cudaSuccess) {
        // A failed device never completes the work: report it and say done, so pollers stop.
        cudaGetLastError();
        saga_cuda_host->log(SAGA_LOG_ERROR, "cudaEventQuery: %s", cudaGetErrorString(err));
    }
    return true;
}

static saga_status cuda_memcpy_async(saga_stream *s, void *dst, const void *src, size_t n,
                                     saga_copy_kind kind) {
    static const cudaMemcpyKind kinds[SAGA_COPY_KIND_COUNT] = {
        cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice};
    cudaStream_t stream;
    saga_status st = saga_cuda_stream_get(s, &stream);
    if (st < 0)
        return st;
    SAGA_CUDA_RETURN(cudaMemcpyAsync(dst, src, n, kinds[kind], stream));
    return SAGA_OK;
}

static saga_status cuda_memset_async(saga_stream *s, void *dst, int value, size_t n) {
    cudaStream_t stream;
    saga_status st = saga_cuda_stream_get(s, &stream);
    if (st < 0)
        return st;
    SAGA_CUDA_RETURN(cudaMemsetAsync(dst, value, n, stream));
    return SAGA_OK;
}

// saga's host function type is cudaHostFn_t's (CUDART_CB is empty on Linux, the only system the
// module is built for), so fn goes to CUDA as it is: no trampoline state to allocate, and none to
// leak when a failed stream never runs the function.
static_assert(std::is_same<cudaHostFn_t, void (*)(void *)>::value,
              "cudaHostFn_t differs from saga's host function type");

static saga_status cuda_launch_host_fn(saga_stream *s, void (*fn)(void *arg), void *arg) {
    cudaStream_t stream;
    saga_status st = saga_cuda_stream_get(s, &stream);
    if (st < 0)
        return st;
    SAGA_CUDA_RETURN(cudaLaunchHostFunc(stream, fn, arg));
    return SAGA_OK;
}

static saga_status cuda_bind_thread(saga_backend *be) {
    SAGA_CUDA_RETURN(cudaSetDevice(ctx_of(be)->device));
    return SAGA_OK;
}

static saga_status cuda_profile_range(saga_backend *be, bool start) {
    SAGA_CUDA_RETURN(cudaSetDevice(ctx_of(be)->device));
    SAGA_CUDA_RETURN(start ? cudaProfilerStart() : cudaProfilerStop());
    return SAGA_OK;
}

static saga_status cuda_event_elapsed(saga_event *start, saga_event *end, double *seconds) {
    cudaEvent_t a = static_cast<cudaEvent_t>(start->impl), b = static_cast<cudaEvent_t>(end->impl);
    SAGA_CUDA_RETURN(cudaSetDevice(ctx_of(start->be)->device));
    // cudaEventElapsedTime reports an incomplete event as not ready and a never-recorded one as an
    // invalid handle; look at each first so that the message names the event at fault (a query
    // says "done" for a never-recorded event; the time from an event to itself does not)
    const char *names[2] = {"start", "end"};
    const cudaEvent_t evs[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        const cudaError_t q = cudaEventQuery(evs[i]);
        if (q == cudaErrorNotReady) {
            cudaGetLastError();
            return saga_cuda_host->error(SAGA_ERR_INVALID_ARG,
                                         "saga_event_elapsed: the %s event has not completed",
                                         names[i]);
        }
        float self = 0.0f;
        const cudaError_t r = cudaEventElapsedTime(&self, evs[i], evs[i]);
        if (r != cudaSuccess)
            cudaGetLastError(); // any other failure is the call's below to report
        if (r == cudaErrorInvalidResourceHandle)
            return saga_cuda_host->error(SAGA_ERR_INVALID_ARG,
                                         "saga_event_elapsed: the %s event was never recorded",
                                         names[i]);
    }
    float ms = 0.0f;
    const cudaError_t err = cudaEventElapsedTime(&ms, a, b);
    if (err == cudaErrorInvalidResourceHandle) {
        cudaGetLastError();
        return saga_cuda_host->error(SAGA_ERR_INVALID_ARG,
                                     "saga_event_elapsed: an event was never recorded (%s)",
                                     cudaGetErrorString(err));
    }
    SAGA_CUDA_RETURN(err);
    *seconds = 1e-3 * (double)ms;
    return SAGA_OK;
}

static saga_status cuda_synchronize(saga_backend *be) {
    SAGA_CUDA_RETURN(cudaSetDevice(ctx_of(be)->device));
    SAGA_CUDA_RETURN(cudaDeviceSynchronize());
    return saga_cuda_index_fault_take(be);
}

// ---- graphs -----------------------------------------------------------------------------------

// The frees made while a graph recorded, now that what the graph reads has run or been queued
// ahead of them on the default stream (they are ordered after it as any free is).
static void release_capture_frees(saga_backend *be, cuda_ctx *c) {
    std::vector<std::pair<void *, size_t>> frees;
    frees.swap(c->cap_frees);
    for (const auto &f : frees)
        cuda_free(be, f.first, f.second);
}

// Records what this thread issues on the default stream, and on every other stream of the
// backend: they are forked into the capture by an event, so that work queued on them (the
// scheduler's copies) is recorded too and ordered as issued.
static saga_status cuda_capture_begin(saga_backend *be) {
    cuda_ctx *c = ctx_of(be);
    if (c->capturing)
        return saga_cuda_host->error(SAGA_ERR_INVALID_ARG, "%s: a graph is recording already",
                                     be->name);
    cudaStream_t ds;
    saga_status st = saga_cuda_stream_get(&be->default_stream, &ds);
    if (st < 0)
        return st;
    try {
        std::lock_guard<std::mutex> guard(c->streams_lock);
        c->cap_streams.clear();
        for (cudaStream_t s : c->streams)
            if (s != ds)
                c->cap_streams.push_back(s);
        while (c->cap_join.size() < c->cap_streams.size()) {
            cudaEvent_t ev = nullptr;
            SAGA_CUDA_RETURN(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
            c->cap_join.push_back(ev);
        }
    } catch (const std::bad_alloc &) {
        return saga_cuda_host->error(SAGA_ERR_OUT_OF_MEMORY, "%s: out of memory for a capture",
                                     be->name);
    }
    if (!c->cap_fork)
        SAGA_CUDA_RETURN(cudaEventCreateWithFlags(&c->cap_fork, cudaEventDisableTiming));
    SAGA_CUDA_RETURN(cudaStreamBeginCapture(ds, cudaStreamCaptureModeThreadLocal));
    c->capturing = true;
    cudaError_t err = cudaEventRecord(c->cap_fork, ds);
    for (size_t i = 0; err == cudaSuccess && i < c->cap_streams.size(); i++)
        err = cudaStreamWaitEvent(c->cap_streams[i], c->cap_fork, 0);
    if (err != cudaSuccess) {
        cudaGraph_t none = nullptr;
        cudaStreamEndCapture(ds, &none);
        if (none)
            cudaGraphDestroy(none);
        cudaGetLastError();
        c->capturing = false;
        return saga_cuda_error(err, "forking the streams into a capture", __FILE__, __LINE__);
    }
    return SAGA_OK;
}

// Ends the capture: *exec made or updated, or with exec NULL the recording discarded.
static saga_status cuda_capture_end(saga_backend *be, void **exec) {
    cuda_ctx *c = ctx_of(be);
    if (!c->capturing)
        return saga_cuda_host->error(SAGA_ERR_INVALID_ARG, "%s: no graph is recording", be->name);
    cudaStream_t ds;
    saga_status st = saga_cuda_stream_get(&be->default_stream, &ds);
    if (st < 0)
        return st;
    cudaError_t err = cudaSuccess;
    for (size_t i = 0; err == cudaSuccess && i < c->cap_streams.size(); i++) {
        err = cudaEventRecord(c->cap_join[i], c->cap_streams[i]);
        if (err == cudaSuccess)
            err = cudaStreamWaitEvent(ds, c->cap_join[i], 0);
    }
    cudaGraph_t graph = nullptr;
    const cudaError_t end = cudaStreamEndCapture(ds, &graph);
    c->capturing = false;
    if (err == cudaSuccess)
        err = end;
    if (err == cudaSuccess && !exec) { // discarded: nothing recorded will run
        cudaGraphDestroy(graph);
        release_capture_frees(be, c);
        return SAGA_OK;
    }
    if (err != cudaSuccess) {
        if (graph)
            cudaGraphDestroy(graph);
        cudaGetLastError();
        release_capture_frees(be, c); // nothing recorded will run
        return saga_cuda_error(err, "cudaStreamEndCapture", __FILE__, __LINE__);
    }
    cudaGraphExec_t e = static_cast<cudaGraphExec_t>(*exec);
    if (e) {
        cudaGraphExecUpdateResultInfo info;
        if (cudaGraphExecUpdate(e, graph, &info) != cudaSuccess) {
            cudaGetLastError();        // another shape of work: made anew below
            cudaStreamSynchronize(ds); // the old graph's last launch may still run
            cudaGraphExecDestroy(e);
            e = nullptr;
            *exec = nullptr;
        }
    }
    if (!e) {
        err = cudaGraphInstantiate(&e, graph, 0);
        if (err != cudaSuccess) {
            cudaGraphDestroy(graph);
            cudaGetLastError();
            release_capture_frees(be, c);
            return saga_cuda_error(err, "cudaGraphInstantiate", __FILE__, __LINE__);
        }
    }
    cudaGraphDestroy(graph);
    *exec = e;
    return SAGA_OK;
}

static saga_status cuda_graph_launch(saga_backend *be, void *exec) {
    cudaStream_t ds;
    saga_status st = saga_cuda_stream_get(&be->default_stream, &ds);
    if (st < 0)
        return st;
    SAGA_CUDA_RETURN(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec), ds));
    release_capture_frees(be, ctx_of(be));
    return SAGA_OK;
}

static void cuda_graph_free(saga_backend *be, void *exec) {
    cudaStream_t ds;
    if (saga_cuda_stream_get(&be->default_stream, &ds) == SAGA_OK)
        cudaStreamSynchronize(ds); // a launch in flight completes first
    cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec));
    cudaGetLastError();
}

// ---- bad indices found on the device ----------------------------------------------------------

saga_cuda_index_fault *saga_cuda_index_fault_record(saga_backend *be) {
    return ctx_of(be)->fault_dev;
}

saga_status saga_cuda_index_fault_take(saga_backend *be) {
    static const char *const names[] = {"gather_rows_f32", "scatter_add_rows_f32"};
    saga_cuda_index_fault *f = ctx_of(be)->fault;
    if (!__atomic_load_n(&f->set, __ATOMIC_ACQUIRE))
        return SAGA_OK;
    const saga_cuda_index_fault r = *f;
    __atomic_store_n(&f->set, 0, __ATOMIC_RELEASE);
    // the loss's own words, as the CPU's nll_f32 gives them
    if (r.slot == SAGA_CUDA_IDX_NLL_ROW)
        return saga_cuda_host->error(SAGA_ERR_INVALID_ARG,
                                     "nll_f32: row index %d at position %lld is outside [0, %lld) "
                                     "(found on the device; nothing was written)",
                                     r.value, r.pos, r.limit);
    if (r.slot == SAGA_CUDA_IDX_NLL_LABEL)
        return saga_cuda_host->error(SAGA_ERR_INVALID_ARG,
                                     "nll_f32: row %lld has label %d, outside [0, %lld) (found on "
                                     "the device; nothing was written)",
                                     r.pos, r.value, r.limit);
    const char *slot =
        r.slot >= 0 && r.slot < (int)(sizeof names / sizeof *names) ? names[r.slot] : "a kernel";
    return saga_cuda_host->error(SAGA_ERR_INVALID_ARG,
                                 "%s: index %d at position %lld is outside [0, %lld) (found on the "
                                 "device; nothing was written)",
                                 slot, r.value, r.pos, r.limit);
}

// ---- library handles --------------------------------------------------------------------------

// Creates the handle on first use; errors name slot.
static saga_status cublas_handle(saga_backend *be, const char *slot, cublasHandle_t *out) {
    cuda_ctx *c = ctx_of(be);
    std::lock_guard<std::mutex> guard(c->handles_lock);
    if (!c->cublas) {
        SAGA_CUDA_SLOT_RETURN(slot, cudaSetDevice(c->device));
        cublasHandle_t h = nullptr;
        SAGA_CUDA_SLOT_RETURN(slot, cublasCreate(&h));
        // The default math mode keeps f32 products in f32 (TF32 only with
        // CUBLAS_TF32_TENSOR_OP_MATH), so results match the CPU's SGEMM within f32 rounding.
        const cublasStatus_t err = cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
        if (err != CUBLAS_STATUS_SUCCESS) {
            cublasDestroy(h);
            return saga_cuda_slot_error(slot, err, "cublasSetMathMode(h, CUBLAS_DEFAULT_MATH)",
                                        __FILE__, __LINE__);
        }
        c->cublas = h;
    }
    *out = c->cublas;
    return SAGA_OK;
}

saga_status saga_cuda_cublas_acquire(saga_backend *be, const char *slot, cublasHandle_t *out) {
    cublasHandle_t h = nullptr;
    const saga_status st = cublas_handle(be, slot, &h);
    if (st < 0)
        return st;
    ctx_of(be)->cublas_lock.lock();
    *out = h;
    return SAGA_OK;
}

void saga_cuda_cublas_release(saga_backend *be, cublasHandle_t h) {
    // Back to the legacy stream and cuBLAS's own workspace, so the handle keeps no pointer to a
    // stream or a buffer that may be freed before it.
    cublasSetStream(h, nullptr);
    ctx_of(be)->cublas_lock.unlock();
}

static saga_status cusparse_handle(saga_backend *be, const char *slot, cusparseHandle_t *out) {
    cuda_ctx *c = ctx_of(be);
    std::lock_guard<std::mutex> guard(c->handles_lock);
    if (!c->cusparse) {
        SAGA_CUDA_SLOT_RETURN(slot, cudaSetDevice(c->device));
        cusparseHandle_t h = nullptr;
        SAGA_CUDA_SLOT_RETURN(slot, cusparseCreate(&h));
        c->cusparse = h;
    }
    *out = c->cusparse;
    return SAGA_OK;
}

saga_status saga_cuda_cusparse_acquire(saga_backend *be, const char *slot, cusparseHandle_t *out) {
    cusparseHandle_t h = nullptr;
    const saga_status st = cusparse_handle(be, slot, &h);
    if (st < 0)
        return st;
    ctx_of(be)->cusparse_lock.lock();
    *out = h;
    return SAGA_OK;
}

void saga_cuda_cusparse_release(saga_backend *be, cusparseHandle_t h) {
    cusparseSetStream(h, nullptr);
    ctx_of(be)->cusparse_lock.unlock();
}

size_t saga_cuda_cublas_workspace_bytes(saga_backend *be) {
    return ctx_of(be)->cublas_workspace;
}

void **saga_cuda_spmm_plans(saga_backend *be) {
    return &ctx_of(be)->spmm_plans;
}

bool saga_cuda_spmm_cusparse(saga_backend *be) {
    return ctx_of(be)->spmm_cusparse;
}

int saga_cuda_spmm_alg(saga_backend *be) {
    return ctx_of(be)->spmm_alg;
}

bool saga_cuda_pull_tiles(saga_backend *be) {
    return ctx_of(be)->pull_tiles;
}

void saga_cuda_spmm_note_refusal(saga_backend *be, const char *why) {
    if (!ctx_of(be)->spmm_refusal_noted.exchange(true))
        saga_cuda_host->log(SAGA_LOG_INFO,
                            "%s: spmm_f32: %s; such products run on saga's own SpMM kernel",
                            be->name, why);
}

// ---- the tables -------------------------------------------------------------------------------

static void cuda_destroy(saga_backend *be) {
    cuda_ctx *c = ctx_of(be);
    if (!c)
        return;
    cudaSetDevice(c->device);
    release_cache(be, c, 0);
    for (const auto &f : c->cap_frees) // (a graph recorded and never launched)
        if (!in_arena(c, f.first))
            cudaFree(f.first);
    if (c->cap_fork)
        cudaEventDestroy(c->cap_fork);
    for (cudaEvent_t ev : c->cap_join)
        cudaEventDestroy(ev);
    if (c->arena) {
        cudaFree(c->arena); // (waits for the device)
        for (const auto &r : c->arena_free)
            if (r.second.freed)
                cudaEventDestroy(r.second.freed);
        be->cached = 0;
    }
    for (cudaEvent_t ev : c->spare_events)
        cudaEventDestroy(ev);
    if (c->cublas)
        cublasDestroy(c->cublas);
    saga_cuda_spmm_plans_free(c->spmm_plans);
    if (c->cusparse)
        cusparseDestroy(c->cusparse);
    if (c->fault)
        cudaFreeHost(c->fault);
    delete c;
    be->ctx = nullptr;
}

static const saga_backend_iface cuda_iface = {
    .size = sizeof(saga_backend_iface),
    .destroy = cuda_destroy,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .stream_new = cuda_default_stream_new,
    .stream_free = cuda_stream_free,
    .stream_sync = cuda_stream_sync,
    .stream_wait_event = cuda_stream_wait_event,
    .event_new = cuda_event_new,
    .event_free = cuda_event_free,
    .event_record = cuda_event_record,
    .event_sync = cuda_event_sync,
    .event_query = cuda_event_query,
    .memcpy_async = cuda_memcpy_async,
    .synchronize = cuda_synchronize,
    .memset_async = cuda_memset_async,
    .launch_host_fn = cuda_launch_host_fn,
    .event_elapsed = cuda_event_elapsed,
    .bind_thread = cuda_bind_thread,
    .alloc_size = cuda_alloc_size,
    .profile_range = cuda_profile_range,
    .copy_rows = saga_cuda_copy_rows,
    .stream_wait_foreign = cuda_stream_wait_event,
    .capture_begin = cuda_capture_begin,
    .capture_end = cuda_capture_end,
    .graph_launch = cuda_graph_launch,
    .graph_free = cuda_graph_free,
    .alloc_block = cuda_alloc_block,
};

static const saga_kernels cuda_kernels = {
    .size = sizeof(saga_kernels),
    .fill_f64 = saga_cuda_fill_f64,
    .axpby_f64 = saga_cuda_axpby_f64,
    .mul_f64 = saga_cuda_mul_f64,
    .add_scalar_f64 = saga_cuda_add_scalar_f64,
    .spmv_f64 = saga_cuda_spmv_f64,
    .dot_f64 = saga_cuda_dot_f64,
    .l1_diff_f64 = saga_cuda_l1_diff_f64,
    .gemm_f32 = saga_cuda_gemm_f32,
    .bias_add_f32 = saga_cuda_bias_add_f32,
    .colsum_f32 = saga_cuda_colsum_f32,
    .act_f32 = saga_cuda_act_f32,
    .act_bwd_f32 = saga_cuda_act_bwd_f32,
    .dropout_f32 = saga_cuda_dropout_f32,
    .binary_f32 = saga_cuda_binary_f32,
    .scale_f32 = saga_cuda_scale_f32,
    .fill_f32 = saga_cuda_fill_f32,
    .copy2d_f32 = saga_cuda_copy2d_f32,
    .softmax_rows_f32 = saga_cuda_softmax_rows_f32,
    .softmax_rows_bwd_f32 = saga_cuda_softmax_rows_bwd_f32,
    .nll_f32 = saga_cuda_nll_f32,
    .bce_logits_f32 = saga_cuda_bce_logits_f32,
    .sum_f32 = saga_cuda_sum_f32,
    .sumsq_f32 = saga_cuda_sumsq_f32,
    .gather_rows_f32 = saga_cuda_gather_rows_f32,
    .scatter_add_rows_f32 = saga_cuda_scatter_add_rows_f32,
    .spmm_f32 = saga_cuda_spmm_f32,
    .segment_reduce_f32 = saga_cuda_segment_reduce_f32,
    .segment_reduce_bwd_f32 = saga_cuda_segment_reduce_bwd_f32,
    .edge_softmax_f32 = saga_cuda_edge_softmax_f32,
    .edge_softmax_bwd_f32 = saga_cuda_edge_softmax_bwd_f32,
    .adam_f32 = saga_cuda_adam_f32,
    .sgd_f32 = saga_cuda_sgd_f32,
    .dropout_rows_f32 = saga_cuda_dropout_rows_f32,
    .pagerank_pull_f64 = saga_cuda_pagerank_pull_f64,
    .dropout_csr_f32 = saga_cuda_dropout_csr_f32,
    .spmm_t_f32 = saga_cuda_spmm_t_f32,
    .half_to_f32 = saga_cuda_half_to_f32,
    .nll_dev_f32 = saga_cuda_nll_dev_f32,
    .dot_acc_f64 = saga_cuda_dot_acc_f64,
    .l1_diff_acc_f64 = saga_cuda_l1_diff_acc_f64,
    .add_scalar_dev_f64 = saga_cuda_add_scalar_dev_f64,
    .sumsq_pinned_f32 = saga_cuda_sumsq_pinned_f32,
    .pagerank_pull_acc_f64 = saga_cuda_pagerank_pull_acc_f64,
    .scale_heads_f32 = saga_cuda_scale_heads_f32,
};

// Entry point (see backend_impl.h): fills be's table, kernels, context, name and device_total. On
// failure be is left untouched and the status says why (no driver, no device, no such device).
extern "C" __attribute__((visibility("default"))) saga_status
saga_cuda_module_init(saga_backend *be, int device, const saga_module_host *host) {
    if (!host || host->size < sizeof(saga_module_host) || !host->error || !host->log ||
        !host->reserve || !host->unreserve)
        return SAGA_ERR_INTERNAL;
    saga_cuda_host = host;

    int n_devices = 0;
    cudaError_t err = cudaGetDeviceCount(&n_devices);
    if (err != cudaSuccess) {
        cudaGetLastError();
        return host->error(SAGA_ERR_DEVICE, "no CUDA device (cudaGetDeviceCount: %s)",
                           cudaGetErrorString(err));
    }
    if (n_devices == 0)
        return host->error(SAGA_ERR_DEVICE, "no CUDA device (cudaGetDeviceCount found none)");
    if (device >= n_devices)
        return host->error(SAGA_ERR_DEVICE, "cuda:%d: no such device (%d CUDA device%s found)",
                           device, n_devices, n_devices == 1 ? "" : "s");
    SAGA_CUDA_RETURN(cudaSetDevice(device));
    cudaDeviceProp prop;
    SAGA_CUDA_RETURN(cudaGetDeviceProperties(&prop, device));

    // Which SpMM spmm_f32 runs: saga's own kernel (the default: the same bits every run, and on
    // an H200 as fast as cuSPARSE's on GCN's products), or cuSPARSE's where it applies: "cusparse"
    // is its CSR_ALG2, "cusparse-alg1" and "cusparse-alg3" the others. On an H200 CSR_ALG2 and
    // CSR_ALG1 gave other bits from run to run (bench/README.md), and are faster on power-law rows.
    const char *spmm = getenv("SAGA_CUDA_SPMM");
    int spmm_alg = 2;
    if (spmm && (strcmp(spmm, "cusparse-alg1") == 0 || strcmp(spmm, "cusparse-alg2") == 0 ||
                 strcmp(spmm, "cusparse-alg3") == 0))
        spmm_alg = spmm[12] - '0';
    else if (spmm && *spmm && strcmp(spmm, "cusparse") != 0 && strcmp(spmm, "own") != 0)
        return host->error(SAGA_ERR_INVALID_ARG,
                           "SAGA_CUDA_SPMM is '%.40s'; it must be 'cusparse', 'own' or "
                           "'cusparse-alg1', -alg2, -alg3",
                           spmm);
    // How PageRank's pull takes its short rows (pagerank_pull.cu): tiles of 32 rows (the
    // default), or groups of lanes sized by the mean degree.
    const char *pull = getenv("SAGA_CUDA_PULL");
    if (pull && *pull && strcmp(pull, "tiles") != 0 && strcmp(pull, "groups") != 0)
        return host->error(SAGA_ERR_INVALID_ARG,
                           "SAGA_CUDA_PULL is '%.40s'; it must be 'tiles' or 'groups'", pull);

    cuda_ctx *c = new (std::nothrow) cuda_ctx();
    if (!c)
        return host->error(SAGA_ERR_OUT_OF_MEMORY, "out of memory for the CUDA backend context");
    c->device = device;
    // cublasSetWorkspace's documentation recommends 32 MiB of workspace on Hopper and 4 MiB on
    // the architectures before it; later ones get Hopper's.
    c->cublas_workspace = (size_t)(prop.major >= 9 ? 32 : 4) << 20;
    // Under a budget the workspace is a share of it (1/256, within [16 KiB, the recommended size];
    // none below 4 MiB of budget, where cuBLAS keeps its own pool), and the backend keeps room for
    // one stream's scratch with that workspace, plus a little for the slots' partial results, out
    // of what the planners hand out (be->work_reserve).
    const size_t budget = be->params.budget_bytes;
    if (budget) {
        size_t share = budget / 256 / 256 * 256;
        if (share < SAGA_CUDA_GEMM_MIN_WORKSPACE)
            share = 0;
        if (share < c->cublas_workspace)
            c->cublas_workspace = share;
        be->work_reserve = saga_cuda_scratch_bytes_for(c->cublas_workspace) + ((size_t)4 << 10);
    }
    c->spmm_cusparse = spmm && strncmp(spmm, "cusparse", 8) == 0;
    c->spmm_alg = spmm_alg;
    c->pull_tiles = !(pull && strcmp(pull, "groups") == 0);
    // the record of bad indices, which kernels write and the host reads after a synchronization
    void *fault = nullptr, *fault_dev = nullptr;
    cudaError_t ferr =
        cudaHostAlloc(&fault, sizeof *c->fault, cudaHostAllocPortable | cudaHostAllocMapped);
    if (ferr == cudaSuccess) {
        memset(fault, 0, sizeof *c->fault);
        ferr = cudaHostGetDevicePointer(&fault_dev, fault, 0);
    }
    if (ferr != cudaSuccess) {
        if (fault)
            cudaFreeHost(fault);
        delete c;
        return saga_cuda_error(ferr, "the record of bad indices (pinned, mapped)", __FILE__,
                               __LINE__);
    }
    c->fault = static_cast<saga_cuda_index_fault *>(fault);
    c->fault_dev = static_cast<saga_cuda_index_fault *>(fault_dev);

    be->iface = &cuda_iface;
    be->kernels = &cuda_kernels;
    be->ctx = c;
    // device names are short ("NVIDIA H100 80GB HBM3"); keep the name within be->name
    snprintf(be->name, sizeof be->name, "cuda:%d (%.100s)", device, prop.name);
    be->device_total = prop.totalGlobalMem;

    int driver = 0, runtime = 0, nccl = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
#ifdef SAGA_CUDA_HAVE_NCCL
    ncclGetVersion(&nccl);
#endif
    host->log(SAGA_LOG_DEBUG,
              "%s: compute capability %d.%d, %zu MiB, %d SMs; driver %d, runtime %d, NCCL %d",
              be->name, prop.major, prop.minor, (size_t)(prop.totalGlobalMem >> 20),
              prop.multiProcessorCount, driver, runtime, nccl);
    return SAGA_OK;
}
