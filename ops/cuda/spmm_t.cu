// spmm_t.cu - Y = alpha A^T X + beta Y for CSR A without a stored transpose: the gradient of the
// dense factor of a sparse x dense product (dW = X^T dH for sparse input features).
//
// Y is first scaled by beta (cleared when beta == 0), then a group of lanes per row i of A adds
// alpha a_ik X[i] into row indices[k] of Y with atomics, the lanes across consecutive columns. Rows
// of A that share a column reach Y's row in the order the hardware picks, so the result is
// deterministic only up to f32 rounding order (the CPU adds in increasing row order), as with
// scatter_add_rows_f32.
#include "common.cuh"

#define SPMM_T_BLOCK 256

static __global__ void __launch_bounds__(SPMM_T_BLOCK)
    spmm_t_scale_kernel(int64_t n, float beta, float *__restrict__ Y) {
    for (int64_t i = blockIdx.x * (int64_t)SPMM_T_BLOCK + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * SPMM_T_BLOCK)
        Y[i] = beta == 0.0f ? 0.0f : beta * Y[i];
}

static __global__ void __launch_bounds__(SPMM_T_BLOCK)
    spmm_t_f32_kernel(int64_t n_rows, int64_t F, int shift, const int64_t *__restrict__ offsets,
                      const int32_t *__restrict__ indices, const float *__restrict__ values,
                      float alpha, const float *__restrict__ X, float *__restrict__ Y) {
    const int width = 1 << shift, lane = threadIdx.x & (width - 1);
    const int64_t stride = saga_cuda_group_stride(shift);
    for (int64_t i = saga_cuda_group_row(shift); i < n_rows; i += stride) {
        const float *xi = X + i * F;
        for (int64_t k = offsets[i]; k < offsets[i + 1]; k++) {
            const float a = alpha * (values ? values[k] : 1.0f);
            float *yr = Y + (int64_t)indices[k] * F;
            for (int64_t j = lane; j < F; j += width)
                atomicAdd(yr + j, a * xi[j]);
        }
    }
}

saga_status saga_cuda_spmm_t_f32(saga_stream *s, const saga_csr_dev *A, int64_t F, float alpha,
                                 const float *X, float beta, float *Y) {
    static const char slot[] = "spmm_t_f32";
    if (A->n_cols <= 0 || F <= 0)
        return SAGA_OK;
    cudaStream_t stream;
    saga_status st = saga_cuda_slot_stream(s, slot, &stream);
    if (st < 0)
        return st;
    const int64_t n_y = A->n_cols * F;
    spmm_t_scale_kernel<<<saga_cuda_blocks(n_y, SPMM_T_BLOCK), SPMM_T_BLOCK, 0, stream>>>(n_y, beta,
                                                                                          Y);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    if (A->n_rows <= 0 || A->nnz <= 0)
        return SAGA_OK;
    const int shift = saga_cuda_group_shift(F);
    spmm_t_f32_kernel<<<saga_cuda_group_blocks(A->n_rows, shift, SPMM_T_BLOCK), SPMM_T_BLOCK, 0,
                        stream>>>(A->n_rows, F, shift, A->offsets, A->indices, A->values, alpha, X,
                                  Y);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    return SAGA_OK;
}
