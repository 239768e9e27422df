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

// What a saga_stream's impl points at on this backend.
struct saga_cuda_stream {
    cudaStream_t stream;
    int device;
    double *d_scratch; // reduction partials, allocated on first use (SAGA_CUDA_REDUCE_BLOCKS + 1)
    double *h_result;  // pinned host word the reductions copy their result into
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
// tree: warps by shuffle, then the warp sums by the first warp.
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
    return v;
}

// The reduction scratch of stream s (allocated on first use, freed with the stream).
saga_status saga_cuda_stream_scratch(saga_stream *s, double **d_scratch, double **h_result);

// Adds partials[0..n_partials) on the stream in a fixed order and copies the sum to *out, waiting
// for it (the second pass of dot and l1_diff).
saga_status saga_cuda_sum_partials(saga_stream *s, int n_partials, double *out);

// cuBLAS and cuSPARSE handles of the backend, created on first use; bound to no stream (set one
// with cublasSetStream / cusparseSetStream before each call).
saga_status saga_cuda_cublas(saga_backend *be, cublasHandle_t *out);
saga_status saga_cuda_cusparse(saga_backend *be, cusparseHandle_t *out);

// ---- the kernel entries (one .cu each) --------------------------------------------------------

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
