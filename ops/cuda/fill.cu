// fill.cu - x[0..n) = v.
#include "common.cuh"

#define FILL_BLOCK 256

static __global__ void fill_f64_kernel(double *x, int64_t n, double v) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        x[i] = v;
}

static saga_status fill_f64_launch(cudaStream_t stream, double *x, int64_t n, double v) {
    fill_f64_kernel<<<saga_cuda_blocks(n, FILL_BLOCK), FILL_BLOCK, 0, stream>>>(x, n, v);
    SAGA_CUDA_RETURN_LAUNCH();
    return SAGA_OK;
}

saga_status saga_cuda_fill_f64(saga_stream *s, double *x, int64_t n, double v) {
    if (n <= 0)
        return SAGA_OK;
    cudaStream_t stream;
    saga_status st = saga_cuda_stream_get(s, &stream);
    return st < 0 ? st : fill_f64_launch(stream, x, n, v);
}
