// scale_heads.cu - y[i, k F + j] = sc[i, k] x[i, k F + j] (+ beta y): each head's block of columns
// scaled by its own column of sc (GAT's attention coefficients on the messages of every head).
#include "common.cuh"

#define SCALE_HEADS_BLOCK 256

template <bool READ_Y>
static __global__ void __launch_bounds__(SCALE_HEADS_BLOCK)
    scale_heads_f32_kernel(int64_t n, int64_t heads, int64_t F, const float *__restrict__ sc,
                           const float *__restrict__ x, float beta, float *__restrict__ y) {
    const int64_t cols = heads * F;
    for (int64_t e = blockIdx.x * (int64_t)SCALE_HEADS_BLOCK + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * SCALE_HEADS_BLOCK) {
        const int64_t i = e / cols, k = (e % cols) / F;
        const float a = sc[i * heads + k] * x[e];
        y[e] = READ_Y ? a + beta * y[e] : a;
    }
}

saga_status saga_cuda_scale_heads_f32(saga_stream *s, int64_t rows, int64_t heads, int64_t F,
                                      const float *sc, const float *x, float beta, float *y) {
    static const char slot[] = "scale_heads_f32";
    const int64_t n = rows * heads * F;
    if (n <= 0)
        return SAGA_OK;
    cudaStream_t stream;
    saga_status st = saga_cuda_slot_stream(s, slot, &stream);
    if (st < 0)
        return st;
    const unsigned blocks = saga_cuda_blocks(n, SCALE_HEADS_BLOCK);
    if (beta == 0.0f)
        scale_heads_f32_kernel<false>
            <<<blocks, SCALE_HEADS_BLOCK, 0, stream>>>(n, heads, F, sc, x, beta, y);
    else
        scale_heads_f32_kernel<true>
            <<<blocks, SCALE_HEADS_BLOCK, 0, stream>>>(n, heads, F, sc, x, beta, y);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    return SAGA_OK;
}
