// copy2d.cu - dst[i][j] = src[i][j] (or +=) for a rows x cols block with leading dimensions lds
// and ldd, in f32: concatenation and splitting of column blocks. The blocks do not overlap.
#include "common.cuh"

#define COPY2D_BLOCK 256

// A group of lanes per row (see saga_cuda_group_shift).
template <bool ACCUMULATE>
static __global__ void __launch_bounds__(COPY2D_BLOCK)
    copy2d_f32_kernel(int64_t rows, int64_t cols, int shift, const float *__restrict__ src,
                      int64_t lds, float *__restrict__ dst, int64_t ldd) {
    const int width = 1 << shift, lane = threadIdx.x & (width - 1);
    const int64_t stride = saga_cuda_group_stride(shift);
    for (int64_t i = saga_cuda_group_row(shift); i < rows; i += stride) {
        const float *a = src + i * lds;
        float *b = dst + i * ldd;
        for (int64_t j = lane; j < cols; j += width)
            b[j] = ACCUMULATE ? b[j] + a[j] : a[j];
    }
}

saga_status saga_cuda_copy2d_f32(saga_stream *s, int64_t rows, int64_t cols, const float *src,
                                 int64_t lds, float *dst, int64_t ldd, bool accumulate) {
    static const char slot[] = "copy2d_f32";
    if (rows <= 0 || cols <= 0)
        return SAGA_OK;
    cudaStream_t stream;
    saga_status st = saga_cuda_slot_stream(s, slot, &stream);
    if (st < 0)
        return st;
    const int shift = saga_cuda_group_shift(cols);
    const unsigned blocks = saga_cuda_group_blocks(rows, shift, COPY2D_BLOCK);
    if (accumulate)
        copy2d_f32_kernel<true>
            <<<blocks, COPY2D_BLOCK, 0, stream>>>(rows, cols, shift, src, lds, dst, ldd);
    else
        copy2d_f32_kernel<false>
            <<<blocks, COPY2D_BLOCK, 0, stream>>>(rows, cols, shift, src, lds, dst, ldd);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    return SAGA_OK;
}
