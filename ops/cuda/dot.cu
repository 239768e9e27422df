// dot.cu - *out = sum x .* y, deterministic (see common.cuh), returned to the host, or added to a
// sum on the device.
#include "common.cuh"

#define DOT_BLOCK SAGA_CUDA_REDUCE_BLOCK

static __global__ void dot_f64_kernel(int64_t n, const double *__restrict__ x,
                                      const double *__restrict__ y, double *__restrict__ partials) {
    double acc = 0.0;
    for (int64_t i = blockIdx.x * (int64_t)DOT_BLOCK + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * DOT_BLOCK)
        acc += x[i] * y[i];
    acc = saga_cuda_block_sum(acc);
    if (threadIdx.x == 0)
        partials[blockIdx.x] = acc;
}

static saga_status dot_f64_launch(cudaStream_t stream, int64_t n, const double *x, const double *y,
                                  double *partials, unsigned blocks) {
    dot_f64_kernel<<<blocks, DOT_BLOCK, 0, stream>>>(n, x, y, partials);
    SAGA_CUDA_SLOT_LAUNCH("dot_f64");
    return SAGA_OK;
}

saga_status saga_cuda_dot_f64(saga_stream *s, int64_t n, const double *x, const double *y,
                              double *out) {
    return saga_cuda_reduce2_f64(s, "dot_f64", n, x, y, dot_f64_launch, SAGA_CUDA_SUM_HOST, out);
}

saga_status saga_cuda_dot_acc_f64(saga_stream *s, int64_t n, const double *x, const double *y,
                                  double *acc) {
    return saga_cuda_reduce2_f64(s, "dot_acc_f64", n, x, y, dot_f64_launch, SAGA_CUDA_SUM_ACC, acc);
}
