// bias_add.cu - y[i][j] = x[i][j] + b[j] in f32 (y may be x).
#include "common.cuh"

#define BIAS_BLOCK 256

// A group of lanes per row (see saga_cuda_group_shift). y may be x: no __restrict__.
static __global__ void __launch_bounds__(BIAS_BLOCK)
    bias_add_f32_kernel(int64_t rows, int64_t cols, int shift, const float *x,
                        const float *__restrict__ b, float *y) {
    const int width = 1 << shift, lane = threadIdx.x & (width - 1);
    const int64_t stride = saga_cuda_group_stride(shift);
    for (int64_t i = saga_cuda_group_row(shift); i < rows; i += stride) {
        const float *xi = x + i * cols;
        float *yi = y + i * cols;
        for (int64_t j = lane; j < cols; j += width)
            yi[j] = xi[j] + b[j];
    }
}

saga_status saga_cuda_bias_add_f32(saga_stream *s, int64_t rows, int64_t cols, const float *x,
                                   const float *b, float *y) {
    static const char slot[] = "bias_add_f32";
    if (rows <= 0 || cols <= 0)
        return SAGA_OK;
    cudaStream_t stream;
    saga_status st = saga_cuda_slot_stream(s, slot, &stream);
    if (st < 0)
        return st;
    const int shift = saga_cuda_group_shift(cols);
    bias_add_f32_kernel<<<saga_cuda_group_blocks(rows, shift, BIAS_BLOCK), BIAS_BLOCK, 0, stream>>>(
        rows, cols, shift, x, b, y);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    return SAGA_OK;
}
