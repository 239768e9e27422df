// half_to_f32.cu - 16-bit floats (bfloat16 or IEEE binary16) widened to f32: the device side of a
// transfer in 16 bits (saga_net_opts.transfer).
#include "common.cuh"

#define HALF_BLOCK 256

static __device__ float bf16_to_f32(uint16_t h) {
    return __uint_as_float((uint32_t)h << 16);
}

// IEEE binary16 by its bits: the same arithmetic as the host's saga_fp16_to_f32.
static __device__ float fp16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f)
        return __uint_as_float(sign | 0x7f800000u | (m << 13));
    if (e == 0) {
        float v = (float)m * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return __uint_as_float(sign | ((e + 112u) << 23) | (m << 13));
}

template <bool BF16>
static __global__ void __launch_bounds__(HALF_BLOCK)
    half_to_f32_kernel(int64_t n, const uint16_t *__restrict__ x, float *__restrict__ y) {
    for (int64_t i = blockIdx.x * (int64_t)HALF_BLOCK + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * HALF_BLOCK)
        y[i] = BF16 ? bf16_to_f32(x[i]) : fp16_to_f32(x[i]);
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
