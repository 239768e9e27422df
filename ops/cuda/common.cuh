// common.cuh - shared pieces of the CUDA backend module: error conversion, stream access, the
// block reduction, and the kernel entries the kernel table points at.
#pragma once

#include "backend_impl.h"
#include "saga_log.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusparse.h>

#include <stdint.h>

// libsaga's error and log functions, handed to the module at init (the module does not link
// libsaga, so the thread-local error message it sets is the caller's one).
extern const saga_module_host *saga_cuda_host;

// Turns a failed CUDA runtime, cuBLAS or cuSPARSE call into a saga status and message, e.g.
// "cudaMalloc(&p, n): out of memory (cudaErrorMemoryAllocation) at ops/cuda/backend.cu:120".
saga_status saga_cuda_error(cudaError_t err, const char *what, const char *file, int line);
saga_status saga_cublas_error(cublasStatus_t err, const char *what, const char *file, int line);
saga_status saga_cusparse_error(cusparseStatus_t err, const char *what, const char *file, int line);

static inline saga_status saga_cuda_check(cudaError_t err, const char *what, const char *file,
                                          int line) {
    return err == cudaSuccess ? SAGA_OK : saga_cuda_error(err, what, file, line);
}
static inline saga_status saga_cuda_check(cublasStatus_t err, const char *what, const char *file,
                                          int line) {
    return err == CUBLAS_STATUS_SUCCESS ? SAGA_OK : saga_cublas_error(err, what, file, line);
}
static inline saga_status saga_cuda_check(cusparseStatus_t err, const char *what, const char *file,
                                          int line) {
    return err == CUSPARSE_STATUS_SUCCESS ? SAGA_OK : saga_cusparse_error(err, what, file, line);
}

// Returns from the calling function with a saga status when expr (a cudaError_t, cublasStatus_t
// or cusparseStatus_t) is a failure.
#define SAGA_CUDA_RETURN(expr)                                                                     \
    do {                                                                                           \
        saga_status st_ = saga_cuda_check((expr), #expr, __FILE__, __LINE__);                      \
        if (st_ < 0)                                                                               \
            return st_;                                                                            \
    } while (0)

// Jumps to the function's `fail:` label with st set when expr fails (for functions that have
// something to release).
#define SAGA_CUDA_TRY(expr)                                                                        \
    do {                                                                                           \
        st = saga_cuda_check((expr), #expr, __FILE__, __LINE__);                                   \
        if (st < 0)                                                                                \
            goto fail;                                                                             \
    } while (0)

// After a kernel launch: launch errors (bad configuration, no kernel image for the device).
#define SAGA_CUDA_RETURN_LAUNCH() SAGA_CUDA_RETURN(cudaGetLastError())

// Errors of a kernel slot name the slot first: "gemm_f32: cublasSgemm(...): ... at file:line".
saga_status saga_cuda_slot_error(const char *slot, cudaError_t err, const char *what,
                                 const char *file, int line);
saga_status saga_cuda_slot_error(const char *slot, cublasStatus_t err, const char *what,
                                 const char *file, int line);
saga_status saga_cuda_slot_error(const char *slot, cusparseStatus_t err, const char *what,
                                 const char *file, int line);

static inline bool saga_cuda_ok(cudaError_t err) {
    return err == cudaSuccess;
}
static inline bool saga_cuda_ok(cublasStatus_t err) {
    return err == CUBLAS_STATUS_SUCCESS;
}
static inline bool saga_cuda_ok(cusparseStatus_t err) {
    return err == CUSPARSE_STATUS_SUCCESS;
}

template <typename E>
static inline saga_status saga_cuda_slot_check(const char *slot, E err, const char *what,
                                               const char *file, int line) {
    return saga_cuda_ok(err) ? SAGA_OK : saga_cuda_slot_error(slot, err, what, file, line);
}

// SAGA_CUDA_RETURN for kernel slots: the message names the slot and the call.
#define SAGA_CUDA_SLOT_RETURN(slot, expr)                                                          \
    do {                                                                                           \
        saga_status st_ = saga_cuda_slot_check((slot), (expr), #expr, __FILE__, __LINE__);         \
        if (st_ < 0)                                                                               \
            return st_;                                                                            \
    } while (0)

// After a kernel launch in a slot.
#define SAGA_CUDA_SLOT_LAUNCH(slot) SAGA_CUDA_SLOT_RETURN(slot, cudaGetLastError())

// What a saga_stream's impl points at on this backend.
//
// d_scratch is the device scratch of the kernels issued on the stream, used in stream order (so
// one per stream, not per backend: two streams may run at once). It holds the reduction partials
// (SAGA_CUDA_REDUCE_BLOCKS + 1 doubles), SAGA_CUDA_FLAG_WORDS words of flags (index checks), then
// a workspace that grows on demand (saga_cuda_stream_workspace). It is reserved through the
// generic layer (saga_module_host's reserve), so the backend's budget covers it. h_result is
// pinned host memory (SAGA_CUDA_HOST_WORDS words) that the synchronous slots copy their results
// into. Both are allocated on first use and freed with the stream.
struct saga_cuda_stream {
    cudaStream_t stream;
    int device;
    double *d_scratch;
    double *h_result;
    size_t scratch_bytes; // bytes of d_scratch
    // The smallest scratch that a request able to do without (saga_cuda_stream_workspace_try)
    // found no room for in the budget, 0 if none: later such requests as large are refused at
    // once, rather than wait for the stream and reallocate on every call of a slot.
    size_t refused_bytes;
    // Index checks issued on the stream (saga_cuda_check_indices): the parity picks which of two
    // flag words a check uses; it resets the other for the next, which its consumer has read.
    unsigned index_checks;
};

// Makes s's device current on the calling thread and gives its CUDA stream.
static inline saga_status saga_cuda_stream_get(saga_stream *s, cudaStream_t *out) {
    saga_cuda_stream *cs = (saga_cuda_stream *)s->impl;
    SAGA_CUDA_RETURN(cudaSetDevice(cs->device));
    *out = cs->stream;
    return SAGA_OK;
}

// ---- grid sizes and the deterministic reduction ------------------------------------------------

// Blocks for a grid-stride loop over n elements; the loops cover anything beyond the cap.
static inline unsigned saga_cuda_blocks(int64_t n, int block_size) {
    const int64_t cap = 1 << 20;
    int64_t b = (n + block_size - 1) / block_size;
    return (unsigned)(b < 1 ? 1 : b > cap ? cap : b);
}

// Reductions use a grid that depends on n alone (never on the device), each block sums a fixed
// set of elements in a fixed order, and one block adds the partials in block order: the same
// inputs give the same bits on every run.
#define SAGA_CUDA_REDUCE_BLOCK 256
#define SAGA_CUDA_REDUCE_BLOCKS 1024

static inline unsigned saga_cuda_reduce_blocks(int64_t n) {
    int64_t b = (n + 4 * SAGA_CUDA_REDUCE_BLOCK - 1) / (4 * SAGA_CUDA_REDUCE_BLOCK);
    return (unsigned)(b < 1 ? 1 : b > SAGA_CUDA_REDUCE_BLOCKS ? SAGA_CUDA_REDUCE_BLOCKS : b);
}

// Sum of v over the block (blockDim.x == SAGA_CUDA_REDUCE_BLOCK), valid in thread 0. A fixed
// tree: warps by shuffle, then the warp sums by the first warp. Every thread of the block must
// call it, at the same point (it holds barriers); the callers call it once after their loops.
__device__ __forceinline__ double saga_cuda_block_sum(double v) {
    __shared__ double warp_sums[SAGA_CUDA_REDUCE_BLOCK / 32];
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, off);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0)
        warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < SAGA_CUDA_REDUCE_BLOCK / 32 ? warp_sums[lane] : 0.0;
        for (int off = 16; off > 0; off >>= 1)
            v += __shfl_down_sync(0xffffffffu, v, off);
    }
    // Warp 0 reads warp_sums after the barrier above; without a second one, a later call in the
    // same kernel could let another warp's lane 0 overwrite its slot before warp 0 has read it.
    __syncthreads();
    return v;
}

// 1 / (1 + exp(-x)) without overflow for either sign, with the CPU's branches (the sigmoid
// activation and the BCE gradient).
__device__ __forceinline__ float saga_cuda_sigmoidf(float x) {
    if (x >= 0.0f)
        return 1.0f / (1.0f + expf(-x));
    const float e = expf(x);
    return e / (1.0f + e);
}

// The reduction scratch of stream s (allocated on first use, freed with the stream).
saga_status saga_cuda_stream_scratch(saga_stream *s, double **d_scratch, double **h_result);

#define SAGA_CUDA_FLAG_WORDS 32
#define SAGA_CUDA_HOST_WORDS 4

// The pieces of a stream's scratch (see saga_cuda_stream).
struct saga_cuda_scratch {
    double *partials;          // SAGA_CUDA_REDUCE_BLOCKS + 1 doubles
    unsigned long long *flags; // SAGA_CUDA_FLAG_WORDS words
    void *work;                // the bytes asked for (NULL when 0 were), 256-byte aligned
    double *host;              // pinned, SAGA_CUDA_HOST_WORDS words
};

// The scratch of stream s with at least work_bytes of workspace. Growing it waits for the
// stream (work queued there may still use the old buffer) and reallocates: the sizes asked for
// are few and the buffer only grows, so this happens a few times per stream. The new buffer is
// reserved against the budget (SAGA_ERR_BUDGET when it has no room). Errors name slot.
saga_status saga_cuda_stream_workspace(saga_stream *s, const char *slot, size_t work_bytes,
                                       saga_cuda_scratch *out);
// saga_cuda_stream_workspace for a caller that can make do without the workspace: when the
// budget has no room for it beside the stream's current scratch, SAGA_ERR_BUDGET with no message
// set, and the stream keeps the scratch it had. The stream remembers the refusal: a later request
// at least as large is refused at once, for the stream's life.
saga_status saga_cuda_stream_workspace_try(saga_stream *s, const char *slot, size_t work_bytes,
                                           saga_cuda_scratch *out);
// The workspace part of s's scratch as it is now, without growing it: NULL and 0 when there is
// none.
void saga_cuda_stream_work_area(saga_stream *s, void **work, size_t *bytes);

// Makes s's device current and gives its CUDA stream; errors name slot.
saga_status saga_cuda_slot_stream(saga_stream *s, const char *slot, cudaStream_t *out);

// saga_cuda_slot_stream, then saga_cuda_stream_workspace: the stream and its scratch with at
// least work_bytes of workspace, for the slots that reduce or keep partial results.
saga_status saga_cuda_slot_scratch(saga_stream *s, const char *slot, size_t work_bytes,
                                   cudaStream_t *stream, saga_cuda_scratch *out);

// Where the second pass of a reduction puts its sum.
enum saga_cuda_sum_to {
    SAGA_CUDA_SUM_HOST = 0, // copied to *out, waited for (a slot that returns a host scalar)
    SAGA_CUDA_SUM_ACC,      // added to *out, device memory, in stream order; nothing waits
    SAGA_CUDA_SUM_PINNED,   // copied to *out, pinned host memory, in stream order; nothing waits
};
// Adds partials[0..n_partials) (the stream's scratch) on the stream in a fixed order and puts the
// sum where `to` says. Errors name slot.
saga_status saga_cuda_sum_partials_to(saga_stream *s, const char *slot, int n_partials,
                                      saga_cuda_sum_to to, double *out);
// A reduction of two f64 vectors of n entries: partials_of launches the first pass (one partial
// per block of SAGA_CUDA_REDUCE_BLOCK threads into partials), then the second pass puts the sum
// where `to` says (n <= 0: 0, or nothing added).
typedef saga_status (*saga_cuda_partials_fn)(cudaStream_t stream, int64_t n, const double *x,
                                             const double *y, double *partials, unsigned blocks);
saga_status saga_cuda_reduce2_f64(saga_stream *s, const char *slot, int64_t n, const double *x,
                                  const double *y, saga_cuda_partials_fn partials_of,
                                  saga_cuda_sum_to to, double *out);
// saga_cuda_sum_partials_to(..., SAGA_CUDA_SUM_HOST, out).
saga_status saga_cuda_sum_partials(saga_stream *s, const char *slot, int n_partials, double *out);

// ---- indices checked on the device -----------------------------------------------------------

// The slots whose indices are checked on the device, by their place in the names table of
// saga_cuda_index_fault_take.
enum saga_cuda_index_slot {
    SAGA_CUDA_IDX_GATHER_ROWS = 0,
    SAGA_CUDA_IDX_SCATTER_ADD_ROWS = 1,
    SAGA_CUDA_IDX_NLL_ROW = 2,   // value: the row, pos: its position, limit: the rows
    SAGA_CUDA_IDX_NLL_LABEL = 3, // value: the label, pos: its row, limit: the classes
};

// The first index a slot found outside its range, in pinned host memory the device writes
// directly (one per backend): set goes from 0 to 1 once, by the kernel that records; the host
// reads it after a synchronization and clears it.
struct saga_cuda_index_fault {
    int set;
    int slot;        // saga_cuda_index_slot
    int value;       // the index
    long long pos;   // its position
    long long limit; // the range's end
};

// Queues the check of idx[0..n) against [0, limit) on the stream of s: the smallest bad position
// goes to *first (a device word of the stream's scratch, ULLONG_MAX when every index is inside),
// which the slot's kernel, queued next on the same stream, reads before it writes anything
// (saga_cuda_index_bad). No host wait: the error surfaces at the next synchronization
// (saga_cuda_index_fault_take). n > 0.
saga_status saga_cuda_check_indices(saga_stream *s, const char *slot, int64_t n, const int32_t *idx,
                                    int64_t limit, const unsigned long long **first);

// The backend's fault record, as the device addresses it.
saga_cuda_index_fault *saga_cuda_index_fault_record(saga_backend *be);

// After a synchronization of be's device or one of its streams: SAGA_ERR_INVALID_ARG, with the
// message the CPU twin gives at the call ("slot: index v at position k is outside [0, limit)")
// and a note that it was found on the device, when a slot recorded a bad index since the last
// call (the record is cleared); else SAGA_OK.
saga_status saga_cuda_index_fault_take(saga_backend *be);

// cudaStreamSynchronize of s's CUDA stream, then saga_cuda_index_fault_take: what every slot
// that waits for its stream to return a host result calls. Errors name slot.
saga_status saga_cuda_slot_sync(saga_stream *s, const char *slot, cudaStream_t stream);

// In a slot's kernel whose indices were checked (saga_cuda_check_indices): whether a bad index
// was found, in which case the kernel writes nothing; the first thread of the grid records it.
__device__ __forceinline__ bool saga_cuda_index_bad(const unsigned long long *first,
                                                    const int32_t *idx, int64_t limit,
                                                    saga_cuda_index_fault *rec, int slot) {
    const unsigned long long k = *first;
    if (k == ~0ull)
        return false;
    if (blockIdx.x == 0 && threadIdx.x == 0 && atomicCAS(&rec->set, 0, 1) == 0) {
        rec->slot = slot;
        rec->value = idx[k];
        rec->pos = (long long)k;
        rec->limit = (long long)limit;
    }
    return true;
}

// ---- groups of lanes per row ------------------------------------------------------------------

// Kernels over the rows of a row-major matrix give each row a group of 2^shift consecutive
// lanes (at most a warp), the smallest that covers the columns: narrow rows (a few features or
// heads) keep every lane busy, wide rows are walked by a whole warp with each lane striding over
// the columns, reading consecutive addresses across the lanes.
static inline int saga_cuda_group_shift(int64_t cols) {
    int shift = 0;
    while (shift < 5 && ((int64_t)1 << shift) < cols)
        shift++;
    return shift;
}

// Blocks of block_size threads for rows rows in groups of 2^shift lanes (a grid-stride loop
// covers the rest).
static inline unsigned saga_cuda_group_blocks(int64_t rows, int shift, int block_size) {
    return saga_cuda_blocks(rows, block_size >> shift);
}

// The first row of the calling thread's group and the stride between a group's rows.
__device__ __forceinline__ int64_t saga_cuda_group_row(int shift) {
    return (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> shift;
}
__device__ __forceinline__ int64_t saga_cuda_group_stride(int shift) {
    return ((int64_t)gridDim.x * blockDim.x) >> shift;
}

// The backend's cuSPARSE handle (created on first use) for one call sequence, locked as the
// cuBLAS handle is (a handle has one stream): the caller binds its stream, calls, and gives it
// back with saga_cuda_cusparse_release, which unbinds the stream and unlocks. Errors name slot.
saga_status saga_cuda_cusparse_acquire(saga_backend *be, const char *slot, cusparseHandle_t *out);
void saga_cuda_cusparse_release(saga_backend *be, cusparseHandle_t h);

// Whether spmm_f32 may use cuSPARSE's SpMM on this backend: true unless the environment variable
// SAGA_CUDA_SPMM was "own" when the backend was opened (see spmm.cu).
bool saga_cuda_spmm_cusparse(saga_backend *be);
// Which of cuSPARSE's CSR algorithms the SpMM asks for: 1, 2 (the default) or 3 (SAGA_CUDA_SPMM).
int saga_cuda_spmm_alg(saga_backend *be);
// Whether PageRank's pull takes short rows by tiles of 32 (SAGA_CUDA_PULL at open: "tiles", the
// default) or by groups sized by the mean degree ("groups"); see pagerank_pull.cu.
bool saga_cuda_pull_tiles(saga_backend *be);

// The backend's cache of cuSPARSE SpMM descriptors (spmm.cu), read and changed only while the
// cuSPARSE handle is held (saga_cuda_cusparse_acquire); saga_cuda_spmm_plans_free frees it.
void **saga_cuda_spmm_plans(saga_backend *be);
void saga_cuda_spmm_plans_free(void *plans);

// Says once per backend, at info level, that cuSPARSE refused a product (why names the call and
// its status) and that spmm_f32 falls back to its own kernel for such products.
void saga_cuda_spmm_note_refusal(saga_backend *be, const char *why);

// The backend's cuBLAS handle (created on first use, with CUBLAS_DEFAULT_MATH: f32 products in
// f32, never TF32) for one call sequence: saga_cuda_cublas_acquire locks it (a handle's stream
// and workspace are per handle, so two threads must not set them at once); the caller binds its
// stream and workspace, calls, and gives it back with saga_cuda_cublas_release, which unbinds
// them and unlocks. Errors name slot.
saga_status saga_cuda_cublas_acquire(saga_backend *be, const char *slot, cublasHandle_t *out);
void saga_cuda_cublas_release(saga_backend *be, cublasHandle_t h);

// Bytes of the cuBLAS workspace a stream gives the handle on this backend's device: what the
// cuBLAS documentation recommends for it, 32 MiB from compute capability 9.0 (Hopper) on, 4 MiB
// before.
size_t saga_cuda_cublas_workspace_bytes(saga_backend *be);

// The least cuBLAS workspace saga gives a handle (see gemm.cu).
#define SAGA_CUDA_GEMM_MIN_WORKSPACE ((size_t)16 << 10)

// The most device memory a stream's scratch takes to hold work_bytes of workspace (it grows by
// half again where the budget has room): what the backend keeps free of a budget for its own work.
size_t saga_cuda_scratch_bytes_for(size_t work_bytes);

// ---- the kernel entries (one .cu each) --------------------------------------------------------

// f64 (PageRank)

saga_status saga_cuda_fill_f64(saga_stream *s, double *x, int64_t n, double v);
saga_status saga_cuda_axpby_f64(saga_stream *s, int64_t n, double a, const double *x, double b,
                                double *y);
saga_status saga_cuda_mul_f64(saga_stream *s, int64_t n, const double *x, const double *y,
                              double *z);
saga_status saga_cuda_add_scalar_f64(saga_stream *s, int64_t n, double c, double *x);
saga_status saga_cuda_spmv_f64(saga_stream *s, const saga_csr_dev *A, double alpha, const double *x,
                               double beta, double *y);
saga_status saga_cuda_dot_f64(saga_stream *s, int64_t n, const double *x, const double *y,
                              double *out);
saga_status saga_cuda_l1_diff_f64(saga_stream *s, int64_t n, const double *x, const double *y,
                                  double *out);
saga_status saga_cuda_dot_acc_f64(saga_stream *s, int64_t n, const double *x, const double *y,
                                  double *acc);
saga_status saga_cuda_l1_diff_acc_f64(saga_stream *s, int64_t n, const double *x, const double *y,
                                      double *acc);
saga_status saga_cuda_add_scalar_dev_f64(saga_stream *s, int64_t n, double a, double b,
                                         const double *c, double *x);
saga_status saga_cuda_pagerank_pull_f64(saga_stream *s, const saga_csr_dev *A, double d,
                                        double base, const double *c, const double *x,
                                        const double *inv, double *y, double *c_next, double *out);
saga_status saga_cuda_pagerank_pull_acc_f64(saga_stream *s, const saga_csr_dev *A, double d,
                                            double a, double b, const double *base_in,
                                            const double *c, const double *x, const double *inv,
                                            double *y, double *c_next, double *acc);

// f32 (neural networks), in the order of the kernel table
saga_status saga_cuda_gemm_f32(saga_stream *s, bool trans_a, bool trans_b, int64_t M, int64_t N,
                               int64_t K, float alpha, const float *A, int64_t lda, const float *B,
                               int64_t ldb, float beta, float *C, int64_t ldc);
saga_status saga_cuda_bias_add_f32(saga_stream *s, int64_t rows, int64_t cols, const float *x,
                                   const float *b, float *y);
saga_status saga_cuda_colsum_f32(saga_stream *s, int64_t rows, int64_t cols, const float *x,
                                 float beta, float *out);
saga_status saga_cuda_act_f32(saga_stream *s, saga_act kind, int64_t n, float alpha, const float *x,
                              float *y);
saga_status saga_cuda_act_bwd_f32(saga_stream *s, saga_act kind, int64_t n, float alpha,
                                  const float *x, const float *y, const float *dy, float *dx);
saga_status saga_cuda_dropout_f32(saga_stream *s, int64_t n, float p, uint64_t seed, int64_t first,
                                  const float *x, float *y);
saga_status saga_cuda_dropout_rows_f32(saga_stream *s, int64_t rows, int64_t cols, float p,
                                       uint64_t seed, const int32_t *row_ids, const float *x,
                                       float *y);
saga_status saga_cuda_binary_f32(saga_stream *s, saga_binop op, int64_t n, const float *x,
                                 const float *y, float *z);
saga_status saga_cuda_half_to_f32(saga_stream *s, int64_t n, const uint16_t *x, bool bf16,
                                  float *y);
saga_status saga_cuda_scale_heads_f32(saga_stream *s, int64_t rows, int64_t heads, int64_t F,
                                      const float *sc, const float *x, float beta, float *y);
saga_status saga_cuda_scale_f32(saga_stream *s, int64_t n, float a, const float *x, float b,
                                float *y);
saga_status saga_cuda_fill_f32(saga_stream *s, float *x, int64_t n, float v);
saga_status saga_cuda_copy2d_f32(saga_stream *s, int64_t rows, int64_t cols, const float *src,
                                 int64_t lds, float *dst, int64_t ldd, bool accumulate);
saga_status saga_cuda_softmax_rows_f32(saga_stream *s, int64_t rows, int64_t cols, bool log,
                                       const float *x, float *y);
saga_status saga_cuda_softmax_rows_bwd_f32(saga_stream *s, int64_t rows, int64_t cols, bool log,
                                           const float *y, const float *dy, float *dx);
saga_status saga_cuda_nll_f32(saga_stream *s, int64_t rows, int64_t cols, const float *logp,
                              const int32_t *labels, const int32_t *rows_idx, int64_t n_idx,
                              double *loss, float *dlogp);
saga_status saga_cuda_nll_dev_f32(saga_stream *s, int64_t rows, int64_t cols, const float *logp,
                                  const int32_t *labels, const int32_t *rows_idx, int64_t n_idx,
                                  float *loss, float *dlogp);
saga_status saga_cuda_bce_logits_f32(saga_stream *s, int64_t n, const float *x, const float *target,
                                     float pos_weight, double *loss, float *dx);
saga_status saga_cuda_sum_f32(saga_stream *s, int64_t n, const float *x, double *out);
saga_status saga_cuda_sumsq_f32(saga_stream *s, int64_t n, const float *x, double *out);
saga_status saga_cuda_sumsq_pinned_f32(saga_stream *s, int64_t n, const float *x, double *out);
saga_status saga_cuda_copy_rows(saga_stream *s, const saga_host_rows *hr, void *dev, bool add);
saga_status saga_cuda_gather_rows_f32(saga_stream *s, int64_t n_idx, int64_t cols,
                                      const int32_t *idx, int64_t n_rows_x, const float *x,
                                      float *y);
saga_status saga_cuda_scatter_add_rows_f32(saga_stream *s, int64_t n_idx, int64_t cols,
                                           const int32_t *idx, const float *x, int64_t n_rows_y,
                                           float *y);
saga_status saga_cuda_dropout_csr_f32(saga_stream *s, const saga_csr_dev *A, float p, uint64_t seed,
                                      int64_t row_base, const int32_t *row_ids, float *y);
saga_status saga_cuda_spmm_t_f32(saga_stream *s, const saga_csr_dev *A, int64_t F, float alpha,
                                 const float *X, float beta, float *Y);
saga_status saga_cuda_spmm_f32(saga_stream *s, const saga_csr_dev *A, int64_t F, float alpha,
                               const float *X, float beta, float *Y);
saga_status saga_cuda_segment_reduce_f32(saga_stream *s, const int64_t *offsets, int64_t n_seg,
                                         int64_t F, saga_reduce op, const float *x, float *y,
                                         int32_t *argmax);
saga_status saga_cuda_segment_reduce_bwd_f32(saga_stream *s, const int64_t *offsets, int64_t n_seg,
                                             int64_t F, saga_reduce op, const float *dy,
                                             const int32_t *argmax, float *dx);
saga_status saga_cuda_edge_softmax_f32(saga_stream *s, const int64_t *offsets, int64_t n_seg,
                                       int64_t H, const float *scores, float *out);
saga_status saga_cuda_edge_softmax_bwd_f32(saga_stream *s, const int64_t *offsets, int64_t n_seg,
                                           int64_t H, const float *out, const float *dout,
                                           float *dscores);
saga_status saga_cuda_adam_f32(saga_stream *s, int64_t n, float lr, float beta1, float beta2,
                               float eps, float weight_decay, bool decoupled, int64_t step,
                               float *param, const float *grad, float *m, float *v);
saga_status saga_cuda_sgd_f32(saga_stream *s, int64_t n, float lr, float momentum,
                              float weight_decay, bool nesterov, float *param, const float *grad,
                              float *buf);
