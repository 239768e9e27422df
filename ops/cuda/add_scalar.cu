// add_scalar.cu - x += c, or x += a + b * c[0] with c on the device.
#include "common.cuh"

#define ADD_SCALAR_BLOCK 256

static __global__ void add_scalar_f64_kernel(int64_t n, double c, double *x) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        x[i] += c;
}

static saga_status add_scalar_f64_launch(cudaStream_t stream, int64_t n, double c, double *x) {
    add_scalar_f64_kernel<<<saga_cuda_blocks(n, ADD_SCALAR_BLOCK), ADD_SCALAR_BLOCK, 0, stream>>>(
        n, c, x);
    SAGA_CUDA_SLOT_LAUNCH("add_scalar_f64");
    return SAGA_OK;
}

saga_status saga_cuda_add_scalar_f64(saga_stream *s, int64_t n, double c, double *x) {
    if (n <= 0)
        return SAGA_OK;
    cudaStream_t stream;
    saga_status st = saga_cuda_stream_get(s, &stream);
    return st < 0 ? st : add_scalar_f64_launch(stream, n, c, x);
}

static __global__ void add_scalar_dev_f64_kernel(int64_t n, double a, double b,
                                                 const double *__restrict__ c, double *x) {
    const double v = a + b * c[0];
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        x[i] += v;
}

saga_status saga_cuda_add_scalar_dev_f64(saga_stream *s, int64_t n, double a, double b,
                                         const double *c, double *x) {
    if (n <= 0)
        return SAGA_OK;
    cudaStream_t stream;
    saga_status st = saga_cuda_stream_get(s, &stream);
    if (st < 0)
        return st;
    add_scalar_dev_f64_kernel<<<saga_cuda_blocks(n, ADD_SCALAR_BLOCK), ADD_SCALAR_BLOCK, 0,
                                stream>>>(n, a, b, c, x);
    SAGA_CUDA_SLOT_LAUNCH("add_scalar_dev_f64");
    return SAGA_OK;
}
