// scatter_add_rows.cu - y[idx[k]] += x[k] for rows of f32, after checking every index on the
// device (nothing is written when one is out of range, and the error surfaces at the next
// synchronization: saga_cuda_check_indices). Zeros of x are not added.
//
// The adds are atomic: rows of x that share a destination reach it in an order the hardware
// picks, so on the GPU the result is deterministic only up to f32 rounding order (the CPU adds in
// increasing k and is bitwise reproducible). A sorted, segmented reduction would restore the
// order at the price of a sort per call; the batched executor's gradients do not need it.
#include "common.cuh"

#define SCATTER_BLOCK 256

// A group of lanes per source row (see saga_cuda_group_shift): the atomics of a group hit
// consecutive addresses of one destination row.
static __global__ void __launch_bounds__(SCATTER_BLOCK)
    scatter_add_rows_f32_kernel(int64_t n_idx, int64_t cols, int shift,
                                const int32_t *__restrict__ idx, int64_t n_rows_y,
                                const unsigned long long *first, saga_cuda_index_fault *rec,
                                const float *__restrict__ x, float *__restrict__ y) {
    if (saga_cuda_index_bad(first, idx, n_rows_y, rec, SAGA_CUDA_IDX_SCATTER_ADD_ROWS))
        return;
    const int width = 1 << shift, lane = threadIdx.x & (width - 1);
    const int64_t stride = saga_cuda_group_stride(shift);
    for (int64_t k = saga_cuda_group_row(shift); k < n_idx; k += stride) {
        const float *xk = x + k * cols;
        float *yr = y + (int64_t)idx[k] * cols;
        for (int64_t j = lane; j < cols; j += width) {
            const float v = xk[j];
            if (v != 0.0f) // a zero leaves y as it was, and costs no atomic
                atomicAdd(yr + j, v);
        }
    }
}

saga_status saga_cuda_scatter_add_rows_f32(saga_stream *s, int64_t n_idx, int64_t cols,
                                           const int32_t *idx, const float *x, int64_t n_rows_y,
                                           float *y) {
    static const char slot[] = "scatter_add_rows_f32";
    if (n_idx <= 0)
        return SAGA_OK;
    const unsigned long long *first = nullptr;
    saga_status st = saga_cuda_check_indices(s, slot, n_idx, idx, n_rows_y, &first);
    if (st < 0)
        return st;
    cudaStream_t stream;
    st = saga_cuda_slot_stream(s, slot, &stream);
    if (st < 0)
        return st;
    // with cols == 0 one block, which records a bad index and adds nothing
    const int shift = saga_cuda_group_shift(cols);
    const unsigned blocks = cols > 0 ? saga_cuda_group_blocks(n_idx, shift, SCATTER_BLOCK) : 1;
    scatter_add_rows_f32_kernel<<<blocks, SCATTER_BLOCK, 0, stream>>>(
        n_idx, cols, shift, idx, n_rows_y, first, saga_cuda_index_fault_record(s->be), x, y);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    return SAGA_OK;
}
