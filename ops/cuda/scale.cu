// scale.cu - y = a x + b y in f32 (x may be y; b == 0 does not read y).
#include "common.cuh"

#define SCALE_BLOCK 256

// x and y may be the same array: no __restrict__.
template <bool READ_Y>
static __global__ void __launch_bounds__(SCALE_BLOCK)
    scale_f32_kernel(int64_t n, float a, const float *x, float b, float *y) {
    for (int64_t i = blockIdx.x * (int64_t)SCALE_BLOCK + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * SCALE_BLOCK)
        y[i] = READ_Y ? a * x[i] + b * y[i] : a * x[i];
}

saga_status saga_cuda_scale_f32(saga_stream *s, int64_t n, float a, const float *x, float b,
                                float *y) {
    static const char slot[] = "scale_f32";
    if (n <= 0)
        return SAGA_OK;
    cudaStream_t stream;
    saga_status st = saga_cuda_slot_stream(s, slot, &stream);
    if (st < 0)
        return st;
    const unsigned blocks = saga_cuda_blocks(n, SCALE_BLOCK);
    if (b == 0.0f)
        scale_f32_kernel<false><<<blocks, SCALE_BLOCK, 0, stream>>>(n, a, x, b, y);
    else
        scale_f32_kernel<true><<<blocks, SCALE_BLOCK, 0, stream>>>(n, a, x, b, y);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    return SAGA_OK;
}
