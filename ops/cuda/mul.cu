// mul.cu - z = x .* y (z may alias x or y, so no __restrict__).
#include "common.cuh"

#define MUL_BLOCK 256

static __global__ void mul_f64_kernel(int64_t n, const double *x, const double *y, double *z) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        z[i] = x[i] * y[i];
}

static saga_status mul_f64_launch(cudaStream_t stream, int64_t n, const double *x, const double *y,
                                  double *z) {
    mul_f64_kernel<<<saga_cuda_blocks(n, MUL_BLOCK), MUL_BLOCK, 0, stream>>>(n, x, y, z);
    SAGA_CUDA_SLOT_LAUNCH("mul_f64");
    return SAGA_OK;
}

saga_status saga_cuda_mul_f64(saga_stream *s, int64_t n, const double *x, const double *y,
                              double *z) {
    if (n <= 0)
        return SAGA_OK;
    cudaStream_t stream;
    saga_status st = saga_cuda_stream_get(s, &stream);
    return st < 0 ? st : mul_f64_launch(stream, n, x, y, z);
}
