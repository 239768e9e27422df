// spmv.cu - y = alpha * A x + beta * y for CSR A with int64 offsets, int32 column indices and f32
// values (NULL: all ones) against f64 vectors.
//
// cuSPARSE's SpMV wants one index type for offsets and columns and one value type for A and x,
// so this is a kernel of our own: a warp per row, lanes striding over the row's entries, a
// shuffle reduction in a fixed order (so the result is deterministic).
#include "common.cuh"

#define SPMV_BLOCK 256
#define SPMV_ROWS_PER_BLOCK (SPMV_BLOCK / 32)

template <bool HAS_VALUES, bool READ_Y>
static __global__ void
spmv_f64_kernel(int64_t n_rows, const int64_t *__restrict__ offsets,
                const int32_t *__restrict__ indices, const float *__restrict__ values, double alpha,
                const double *__restrict__ x, double beta, double *__restrict__ y) {
    const int lane = threadIdx.x & 31;
    const int64_t warp = blockIdx.x * (int64_t)SPMV_ROWS_PER_BLOCK + (threadIdx.x >> 5);
    const int64_t n_warps = (int64_t)gridDim.x * SPMV_ROWS_PER_BLOCK;
    for (int64_t row = warp; row < n_rows; row += n_warps) {
        const int64_t begin = offsets[row], end = offsets[row + 1];
        double acc = 0.0;
        for (int64_t k = begin + lane; k < end; k += 32)
            acc += (HAS_VALUES ? (double)values[k] : 1.0) * x[indices[k]];
        for (int off = 16; off > 0; off >>= 1)
            acc += __shfl_down_sync(0xffffffffu, acc, off);
        if (lane == 0)
            y[row] = READ_Y ? alpha * acc + beta * y[row] : alpha * acc;
    }
}

static saga_status spmv_f64_launch(cudaStream_t stream, const saga_csr_dev *A, double alpha,
                                   const double *x, double beta, double *y) {
    const unsigned blocks = saga_cuda_blocks(A->n_rows, SPMV_ROWS_PER_BLOCK);
    const bool vals = A->values != NULL, read_y = beta != 0.0;
    if (vals && read_y)
        spmv_f64_kernel<true, true><<<blocks, SPMV_BLOCK, 0, stream>>>(
            A->n_rows, A->offsets, A->indices, A->values, alpha, x, beta, y);
    else if (vals)
        spmv_f64_kernel<true, false><<<blocks, SPMV_BLOCK, 0, stream>>>(
            A->n_rows, A->offsets, A->indices, A->values, alpha, x, beta, y);
    else if (read_y)
        spmv_f64_kernel<false, true><<<blocks, SPMV_BLOCK, 0, stream>>>(
            A->n_rows, A->offsets, A->indices, A->values, alpha, x, beta, y);
    else
        spmv_f64_kernel<false, false><<<blocks, SPMV_BLOCK, 0, stream>>>(
            A->n_rows, A->offsets, A->indices, A->values, alpha, x, beta, y);
    SAGA_CUDA_SLOT_LAUNCH("spmv_f64");
    return SAGA_OK;
}

saga_status saga_cuda_spmv_f64(saga_stream *s, const saga_csr_dev *A, double alpha, const double *x,
                               double beta, double *y) {
    if (A->n_rows <= 0)
        return SAGA_OK;
    cudaStream_t stream;
    saga_status st = saga_cuda_stream_get(s, &stream);
    return st < 0 ? st : spmv_f64_launch(stream, A, alpha, x, beta, y);
}
