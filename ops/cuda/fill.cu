// fill.cu - x[0..n) = v, in f64 (PageRank) and f32.
#include "common.cuh"

#define FILL_BLOCK 256

template <typename T>
static __global__ void __launch_bounds__(FILL_BLOCK) fill_kernel(T *x, int64_t n, T v) {
    for (int64_t i = blockIdx.x * (int64_t)FILL_BLOCK + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * FILL_BLOCK)
        x[i] = v;
}

template <typename T>
static saga_status fill_launch(cudaStream_t stream, const char *slot, T *x, int64_t n, T v) {
    fill_kernel<T><<<saga_cuda_blocks(n, FILL_BLOCK), FILL_BLOCK, 0, stream>>>(x, n, v);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    return SAGA_OK;
}

saga_status saga_cuda_fill_f64(saga_stream *s, double *x, int64_t n, double v) {
    if (n <= 0)
        return SAGA_OK;
    cudaStream_t stream;
    saga_status st = saga_cuda_slot_stream(s, "fill_f64", &stream);
    return st < 0 ? st : fill_launch(stream, "fill_f64", x, n, v);
}

saga_status saga_cuda_fill_f32(saga_stream *s, float *x, int64_t n, float v) {
    if (n <= 0)
        return SAGA_OK;
    cudaStream_t stream;
    saga_status st = saga_cuda_slot_stream(s, "fill_f32", &stream);
    return st < 0 ? st : fill_launch(stream, "fill_f32", x, n, v);
}
