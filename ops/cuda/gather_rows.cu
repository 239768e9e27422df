// gather_rows.cu - y[k] = x[idx[k]] for rows of f32, after checking every index (nothing is
// written when one is out of range; the check costs one stream synchronization).
#include "common.cuh"

#define GATHER_BLOCK 256

// A group of lanes per gathered row (see saga_cuda_group_shift).
static __global__ void __launch_bounds__(GATHER_BLOCK)
    gather_rows_f32_kernel(int64_t n_idx, int64_t cols, int shift, const int32_t *__restrict__ idx,
                           const float *__restrict__ x, float *__restrict__ y) {
    const int width = 1 << shift, lane = threadIdx.x & (width - 1);
    const int64_t stride = saga_cuda_group_stride(shift);
    for (int64_t k = saga_cuda_group_row(shift); k < n_idx; k += stride) {
        const float *xr = x + (int64_t)idx[k] * cols;
        float *yk = y + k * cols;
        for (int64_t j = lane; j < cols; j += width)
            yk[j] = xr[j];
    }
}

saga_status saga_cuda_gather_rows_f32(saga_stream *s, int64_t n_idx, int64_t cols,
                                      const int32_t *idx, int64_t n_rows_x, const float *x,
                                      float *y) {
    static const char slot[] = "gather_rows_f32";
    if (n_idx <= 0)
        return SAGA_OK;
    saga_status st = saga_cuda_check_indices(s, slot, n_idx, idx, n_rows_x);
    if (st < 0 || cols <= 0)
        return st;
    cudaStream_t stream;
    st = saga_cuda_slot_stream(s, slot, &stream);
    if (st < 0)
        return st;
    const int shift = saga_cuda_group_shift(cols);
    gather_rows_f32_kernel<<<saga_cuda_group_blocks(n_idx, shift, GATHER_BLOCK), GATHER_BLOCK, 0,
                             stream>>>(n_idx, cols, shift, idx, x, y);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    return SAGA_OK;
}
