// sum.cu - sum x[i] and sum x[i]^2 of f32 arrays, accumulated in double, deterministic (see
// common.cuh), returned to the host, or copied to pinned host memory in stream order.
#include "common.cuh"

#define SUM_BLOCK SAGA_CUDA_REDUCE_BLOCK

template <bool SQUARE>
static __global__ void __launch_bounds__(SUM_BLOCK)
    sum_f32_kernel(int64_t n, const float *__restrict__ x, double *__restrict__ partials) {
    double acc = 0.0;
    for (int64_t i = blockIdx.x * (int64_t)SUM_BLOCK + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * SUM_BLOCK) {
        const double v = x[i];
        acc += SQUARE ? v * v : v;
    }
    acc = saga_cuda_block_sum(acc);
    if (threadIdx.x == 0)
        partials[blockIdx.x] = acc;
}

// The sum into *out where `to` says (SAGA_CUDA_SUM_HOST or SAGA_CUDA_SUM_PINNED; n <= 0: 0 at
// once).
template <bool SQUARE>
static saga_status sum_f32(saga_stream *s, const char *slot, int64_t n, const float *x, double *out,
                           saga_cuda_sum_to to = SAGA_CUDA_SUM_HOST) {
    if (n <= 0) {
        *out = 0.0;
        return SAGA_OK;
    }
    cudaStream_t stream;
    saga_cuda_scratch sc;
    saga_status st = saga_cuda_slot_scratch(s, slot, 0, &stream, &sc);
    if (st < 0)
        return st;
    const unsigned blocks = saga_cuda_reduce_blocks(n);
    sum_f32_kernel<SQUARE><<<blocks, SUM_BLOCK, 0, stream>>>(n, x, sc.partials);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    return saga_cuda_sum_partials_to(s, slot, (int)blocks, to, out);
}

saga_status saga_cuda_sum_f32(saga_stream *s, int64_t n, const float *x, double *out) {
    return sum_f32<false>(s, "sum_f32", n, x, out);
}

saga_status saga_cuda_sumsq_f32(saga_stream *s, int64_t n, const float *x, double *out) {
    return sum_f32<true>(s, "sumsq_f32", n, x, out);
}

saga_status saga_cuda_sumsq_pinned_f32(saga_stream *s, int64_t n, const float *x, double *out) {
    return sum_f32<true>(s, "sumsq_pinned_f32", n, x, out, SAGA_CUDA_SUM_PINNED);
}
