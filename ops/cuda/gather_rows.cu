// gather_rows.cu - y[k] = x[idx[k]] for rows of f32, after checking every index on the device
// (nothing is written when one is out of range, and the error surfaces at the next
// synchronization: saga_cuda_check_indices).
#include "common.cuh"

#define GATHER_BLOCK 256

// A group of lanes per gathered row (see saga_cuda_group_shift).
static __global__ void __launch_bounds__(GATHER_BLOCK)
    gather_rows_f32_kernel(int64_t n_idx, int64_t cols, int shift, const int32_t *__restrict__ idx,
                           int64_t n_rows_x, const unsigned long long *first,
                           saga_cuda_index_fault *rec, const float *__restrict__ x,
                           float *__restrict__ y) {
    if (saga_cuda_index_bad(first, idx, n_rows_x, rec, SAGA_CUDA_IDX_GATHER_ROWS))
        return;
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
    const unsigned long long *first = nullptr;
    saga_status st = saga_cuda_check_indices(s, slot, n_idx, idx, n_rows_x, &first);
    if (st < 0)
        return st;
    cudaStream_t stream;
    st = saga_cuda_slot_stream(s, slot, &stream);
    if (st < 0)
        return st;
    // with cols == 0 one block, which records a bad index and copies nothing
    const int shift = saga_cuda_group_shift(cols);
    const unsigned blocks = cols > 0 ? saga_cuda_group_blocks(n_idx, shift, GATHER_BLOCK) : 1;
    gather_rows_f32_kernel<<<blocks, GATHER_BLOCK, 0, stream>>>(
        n_idx, cols, shift, idx, n_rows_x, first, saga_cuda_index_fault_record(s->be), x, y);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    return SAGA_OK;
}
