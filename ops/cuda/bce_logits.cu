// bce_logits.cu - binary cross-entropy on logits in f32, as PyTorch's
// BCEWithLogitsLoss(pos_weight) with mean reduction and as ops/cpu/nn_dense.c computes it: the
// mean (a deterministic double sum, see common.cuh) to the host, the gradient on the stream.
#include "common.cuh"

#define BCE_BLOCK SAGA_CUDA_REDUCE_BLOCK

template <bool GRAD>
static __global__ void __launch_bounds__(BCE_BLOCK)
    bce_logits_f32_kernel(int64_t n, const float *__restrict__ x, const float *__restrict__ target,
                          float pos_weight, float inv_n, double *__restrict__ partials,
                          float *__restrict__ dx) {
    double acc = 0.0;
    for (int64_t i = blockIdx.x * (int64_t)BCE_BLOCK + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * BCE_BLOCK) {
        const float xi = x[i], t = target[i];
        // -log sigmoid(x) = log(1 + e^-|x|) + max(-x, 0) never overflows; PyTorch's form
        const float log_weight = 1.0f + (pos_weight - 1.0f) * t;
        const float sp = log1pf(expf(-fabsf(xi))) + (xi < 0.0f ? -xi : 0.0f);
        acc += (double)((1.0f - t) * xi + log_weight * sp);
        if (GRAD) {
            const float pt = pos_weight * t;
            dx[i] = (saga_cuda_sigmoidf(xi) * ((1.0f - t) + pt) - pt) * inv_n;
        }
    }
    acc = saga_cuda_block_sum(acc);
    if (threadIdx.x == 0)
        partials[blockIdx.x] = acc;
}

saga_status saga_cuda_bce_logits_f32(saga_stream *s, int64_t n, const float *x, const float *target,
                                     float pos_weight, double *loss, float *dx) {
    static const char slot[] = "bce_logits_f32";
    if (n <= 0) {
        *loss = 0.0;
        return SAGA_OK;
    }
    cudaStream_t stream;
    saga_cuda_scratch sc;
    saga_status st = saga_cuda_slot_scratch(s, slot, 0, &stream, &sc);
    if (st < 0)
        return st;
    const float inv_n = (float)(1.0 / (double)n);
    const unsigned blocks = saga_cuda_reduce_blocks(n);
    if (dx)
        bce_logits_f32_kernel<true>
            <<<blocks, BCE_BLOCK, 0, stream>>>(n, x, target, pos_weight, inv_n, sc.partials, dx);
    else
        bce_logits_f32_kernel<false>
            <<<blocks, BCE_BLOCK, 0, stream>>>(n, x, target, pos_weight, inv_n, sc.partials, dx);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    double sum = 0.0;
    st = saga_cuda_sum_partials(s, slot, (int)blocks, &sum);
    if (st < 0)
        return st;
    *loss = sum / (double)n;
    return SAGA_OK;
}
