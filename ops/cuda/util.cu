// util.cu - what the kernel slots share: errors that name the slot, the per-stream scratch and
// its workspace, and the index check that runs before a slot writes anything.
#include "common.cuh"

#include <stdio.h>

// ---- errors -----------------------------------------------------------------------------------

saga_status saga_cuda_slot_error(const char *slot, cudaError_t err, const char *what,
                                 const char *file, int line) {
    cudaGetLastError(); // reported once (see saga_cuda_error)
    const saga_status st =
        err == cudaErrorMemoryAllocation ? SAGA_ERR_OUT_OF_MEMORY : SAGA_ERR_DEVICE;
    return saga_cuda_host->error(st, "%s: %s: %s (%s) at %s:%d", slot, what,
                                 cudaGetErrorString(err), cudaGetErrorName(err), file, line);
}

saga_status saga_cuda_slot_error(const char *slot, cublasStatus_t err, const char *what,
                                 const char *file, int line) {
    const saga_status st =
        err == CUBLAS_STATUS_ALLOC_FAILED ? SAGA_ERR_OUT_OF_MEMORY : SAGA_ERR_DEVICE;
    return saga_cuda_host->error(st, "%s: %s: %s (%s) at %s:%d", slot, what,
                                 cublasGetStatusString(err), cublasGetStatusName(err), file, line);
}

saga_status saga_cuda_slot_error(const char *slot, cusparseStatus_t err, const char *what,
                                 const char *file, int line) {
    cudaGetLastError(); // a cuSPARSE call that failed in a launch leaves the error behind it
    const saga_status st =
        err == CUSPARSE_STATUS_ALLOC_FAILED ? SAGA_ERR_OUT_OF_MEMORY : SAGA_ERR_DEVICE;
    return saga_cuda_host->error(st, "%s: %s: %s (%s) at %s:%d", slot, what,
                                 cusparseGetErrorString(err), cusparseGetErrorName(err), file,
                                 line);
}

saga_status saga_cuda_slot_stream(saga_stream *s, const char *slot, cudaStream_t *out) {
    saga_cuda_stream *cs = static_cast<saga_cuda_stream *>(s->impl);
    SAGA_CUDA_SLOT_RETURN(slot, cudaSetDevice(cs->device));
    *out = cs->stream;
    return SAGA_OK;
}

// ---- scratch ----------------------------------------------------------------------------------

static constexpr size_t align_up(size_t n, size_t a) {
    return (n + a - 1) / a * a;
}

// Layout of d_scratch: partials, flags, workspace, each 256-byte aligned.
static constexpr size_t FLAGS_AT = align_up((SAGA_CUDA_REDUCE_BLOCKS + 1) * sizeof(double), 256);
static constexpr size_t WORK_AT = FLAGS_AT + align_up(SAGA_CUDA_FLAG_WORDS * 8, 256);
// The flag words of the index checks: INDEX_FLAGS and the next (word 0 is the losses').
static constexpr size_t INDEX_FLAGS = 2;

size_t saga_cuda_scratch_bytes_for(size_t work_bytes) {
    const size_t work = align_up(work_bytes, 256);
    return WORK_AT + align_up(work + work / 2, 256);
}

// Reserves a scratch of at least need bytes through the generic layer, so that the budget covers
// it: half again as much as asked where the budget has room for it, so that slowly growing
// requests reallocate rarely, else exactly need. quiet: no room is SAGA_ERR_BUDGET with no message.
static saga_status scratch_reserve(saga_stream *s, const char *slot, size_t need, bool quiet,
                                   void **p, size_t *bytes) {
    if (need - WORK_AT <= (SIZE_MAX - need) / 2 && need > WORK_AT) {
        *bytes = align_up(need + (need - WORK_AT) / 2, 256);
        if (saga_cuda_host->reserve(s->be, p, *bytes, nullptr) >= 0)
            return SAGA_OK;
    }
    char what[80];
    snprintf(what, sizeof what, "%s scratch", slot);
    *bytes = need;
    return saga_cuda_host->reserve(s->be, p, need, quiet ? nullptr : what);
}

// Replaces the stream's scratch by one of at least need bytes (scratch_reserve). A request that
// must succeed (!quiet) gives the old scratch back first, so that its room counts for the new one,
// and leaves the stream with none when even that does not fit. A request that can do without
// (quiet) keeps the old scratch unless the new one fits beside it: the partials and flags that
// every reduction needs, reserved when the backend opened, are never given up for a workspace.
static saga_status scratch_grow(saga_stream *s, saga_cuda_stream *cs, const char *slot, size_t need,
                                bool quiet) {
    SAGA_CUDA_SLOT_RETURN(slot, cudaSetDevice(cs->device));
    void *p = nullptr;
    size_t bytes = 0;
    if (quiet) {
        saga_status st = scratch_reserve(s, slot, need, true, &p, &bytes);
        if (st < 0)
            return st;
    }
    if (cs->d_scratch) {
        // Kernels queued on the stream may still read or write the old buffer.
        saga_status st = saga_cuda_slot_check(slot, cudaStreamSynchronize(cs->stream),
                                              "cudaStreamSynchronize", __FILE__, __LINE__);
        if (st < 0) {
            saga_cuda_host->unreserve(s->be, p, bytes);
            return st;
        }
        saga_cuda_host->unreserve(s->be, cs->d_scratch, cs->scratch_bytes);
        cs->d_scratch = nullptr;
        cs->scratch_bytes = 0;
    }
    if (!quiet) {
        saga_status st = scratch_reserve(s, slot, need, false, &p, &bytes);
        if (st < 0)
            return st;
    }
    cs->d_scratch = static_cast<double *>(p);
    cs->scratch_bytes = bytes;
    // the index checks' two flag words start clear (saga_cuda_check_indices keeps them so)
    SAGA_CUDA_SLOT_RETURN(slot, cudaMemsetAsync(reinterpret_cast<char *>(p) + FLAGS_AT +
                                                    INDEX_FLAGS * sizeof(unsigned long long),
                                                0xff, 2 * sizeof(unsigned long long), cs->stream));
    return SAGA_OK;
}

static saga_status stream_workspace(saga_stream *s, const char *slot, size_t work_bytes, bool quiet,
                                    saga_cuda_scratch *out) {
    saga_cuda_stream *cs = static_cast<saga_cuda_stream *>(s->impl);
    if (work_bytes > SIZE_MAX - WORK_AT - 255)
        return saga_cuda_host->error(SAGA_ERR_OUT_OF_MEMORY,
                                     "%s: cannot allocate a workspace of %zu bytes", slot,
                                     work_bytes);
    const size_t need = WORK_AT + align_up(work_bytes, 256);
    if (need > cs->scratch_bytes) {
        if (quiet && cs->refused_bytes && need >= cs->refused_bytes)
            return SAGA_ERR_BUDGET;
        const saga_status st = scratch_grow(s, cs, slot, need, quiet);
        if (st == SAGA_ERR_BUDGET && quiet)
            cs->refused_bytes = need;
        if (st < 0)
            return st;
    }
    if (!cs->h_result) {
        SAGA_CUDA_SLOT_RETURN(slot, cudaSetDevice(cs->device));
        SAGA_CUDA_SLOT_RETURN(slot,
                              cudaHostAlloc(&cs->h_result, SAGA_CUDA_HOST_WORDS * sizeof(double),
                                            cudaHostAllocPortable));
    }
    char *base = reinterpret_cast<char *>(cs->d_scratch);
    out->partials = cs->d_scratch;
    out->flags = reinterpret_cast<unsigned long long *>(base + FLAGS_AT);
    out->work = work_bytes ? base + WORK_AT : nullptr;
    out->host = cs->h_result;
    return SAGA_OK;
}

saga_status saga_cuda_stream_workspace(saga_stream *s, const char *slot, size_t work_bytes,
                                       saga_cuda_scratch *out) {
    return stream_workspace(s, slot, work_bytes, false, out);
}

saga_status saga_cuda_stream_workspace_try(saga_stream *s, const char *slot, size_t work_bytes,
                                           saga_cuda_scratch *out) {
    return stream_workspace(s, slot, work_bytes, true, out);
}

void saga_cuda_stream_work_area(saga_stream *s, void **work, size_t *bytes) {
    const saga_cuda_stream *cs = static_cast<const saga_cuda_stream *>(s->impl);
    const bool has = cs->d_scratch && cs->scratch_bytes > WORK_AT;
    *work = has ? reinterpret_cast<char *>(cs->d_scratch) + WORK_AT : nullptr;
    *bytes = has ? cs->scratch_bytes - WORK_AT : 0;
}

saga_status saga_cuda_slot_scratch(saga_stream *s, const char *slot, size_t work_bytes,
                                   cudaStream_t *stream, saga_cuda_scratch *out) {
    const saga_status st = saga_cuda_slot_stream(s, slot, stream);
    return st < 0 ? st : saga_cuda_stream_workspace(s, slot, work_bytes, out);
}

saga_status saga_cuda_stream_scratch(saga_stream *s, double **d_scratch, double **h_result) {
    saga_cuda_scratch sc;
    const saga_status st = saga_cuda_stream_workspace(s, "reduction", 0, &sc);
    if (st < 0)
        return st;
    *d_scratch = sc.partials;
    *h_result = sc.host;
    return SAGA_OK;
}

// ---- index check ------------------------------------------------------------------------------

#define CHECK_BLOCK 256

// *first = min(*first, k) over the positions k whose index is outside [0, limit) (*first clear,
// ~0, on entry). One atomic per thread that found something, none on valid input. *next is
// cleared for the next check: the word the check before this one used, whose consumer has run.
static __global__ void __launch_bounds__(CHECK_BLOCK)
    check_indices_kernel(int64_t n, const int32_t *__restrict__ idx, int64_t limit,
                         unsigned long long *__restrict__ first,
                         unsigned long long *__restrict__ next) {
    if (blockIdx.x == 0 && threadIdx.x == 0)
        *next = ~0ull;
    const int64_t stride = (int64_t)gridDim.x * CHECK_BLOCK;
    for (int64_t k = blockIdx.x * (int64_t)CHECK_BLOCK + threadIdx.x; k < n; k += stride) {
        const int64_t v = idx[k];
        if (v < 0 || v >= limit) {
            atomicMin(first, (unsigned long long)k);
            return; // later positions of this thread are larger
        }
    }
}

saga_status saga_cuda_check_indices(saga_stream *s, const char *slot, int64_t n, const int32_t *idx,
                                    int64_t limit, const unsigned long long **first) {
    cudaStream_t stream;
    saga_cuda_scratch sc;
    saga_status st = saga_cuda_slot_scratch(s, slot, 0, &stream, &sc);
    if (st < 0)
        return st;
    // two words taken in turn, so that no memset clears one before each check
    saga_cuda_stream *cs = static_cast<saga_cuda_stream *>(s->impl);
    const unsigned k = cs->index_checks++ & 1;
    unsigned long long *d_first = sc.flags + INDEX_FLAGS + k;
    check_indices_kernel<<<saga_cuda_blocks(n, CHECK_BLOCK), CHECK_BLOCK, 0, stream>>>(
        n, idx, limit, d_first, sc.flags + INDEX_FLAGS + (k ^ 1));
    SAGA_CUDA_SLOT_LAUNCH(slot);
    *first = d_first;
    return SAGA_OK;
}

saga_status saga_cuda_slot_sync(saga_stream *s, const char *slot, cudaStream_t stream) {
    SAGA_CUDA_SLOT_RETURN(slot, cudaStreamSynchronize(stream));
    return saga_cuda_index_fault_take(s->be);
}
