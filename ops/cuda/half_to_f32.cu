// half_to_f32.cu - 16-bit floats (bfloat16 or IEEE binary16) widened to f32: the device side of a
// transfer in 16 bits (saga_net_opts.transfer).
#include "common.cuh"
#include "half_impl.h"

#define HALF_BLOCK 256

template <bool BF16>
static __global__ void __launch_bounds__(HALF_BLOCK)
    half_to_f32_kernel(int64_t n, const uint16_t *__restrict__ x, float *__restrict__ y) {
    for (int64_t i = blockIdx.x * (int64_t)HALF_BLOCK + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * HALF_BLOCK)
        y[i] = BF16 ? saga_bf16_to_f32(x[i]) : saga_fp16_to_f32(x[i]);
}

saga_status saga_cuda_half_to_f32(saga_stream *s, int64_t n, const uint16_t *x, bool bf16,
                                  float *y) {
    static const char slot[] = "half_to_f32";
    if (n <= 0)
        return SAGA_OK;
    cudaStream_t stream;
    saga_status st = saga_cuda_slot_stream(s, slot, &stream);
    if (st < 0)
        return st;
    const unsigned blocks = saga_cuda_blocks(n, HALF_BLOCK);
    if (bf16)
        half_to_f32_kernel<true><<<blocks, HALF_BLOCK, 0, stream>>>(n, x, y);
    else
        half_to_f32_kernel<false><<<blocks, HALF_BLOCK, 0, stream>>>(n, x, y);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    return SAGA_OK;
}
