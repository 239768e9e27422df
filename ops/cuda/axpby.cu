// axpby.cu - y = a*x + b*y; b == 0 does not read y (as the CPU kernel). x may be y (in-place
// scaling), so no __restrict__.
#include "common.cuh"

#define AXPBY_BLOCK 256

template <bool READ_Y>
static __global__ void axpby_f64_kernel(int64_t n, double a, const double *x, double b, double *y) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = READ_Y ? a * x[i] + b * y[i] : a * x[i];
}

static saga_status axpby_f64_launch(cudaStream_t stream, int64_t n, double a, const double *x,
                                    double b, double *y) {
    const unsigned blocks = saga_cuda_blocks(n, AXPBY_BLOCK);
    if (b == 0.0)
        axpby_f64_kernel<false><<<blocks, AXPBY_BLOCK, 0, stream>>>(n, a, x, b, y);
    else
        axpby_f64_kernel<true><<<blocks, AXPBY_BLOCK, 0, stream>>>(n, a, x, b, y);
    SAGA_CUDA_SLOT_LAUNCH("axpby_f64");
    return SAGA_OK;
}

saga_status saga_cuda_axpby_f64(saga_stream *s, int64_t n, double a, const double *x, double b,
                                double *y) {
    if (n <= 0)
        return SAGA_OK;
    cudaStream_t stream;
    saga_status st = saga_cuda_stream_get(s, &stream);
    return st < 0 ? st : axpby_f64_launch(stream, n, a, x, b, y);
}
