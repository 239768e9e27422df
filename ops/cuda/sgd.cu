// sgd.cu - one SGD step in f32, as torch.optim.SGD with dampening 0 (single-tensor path) and
// ops/cpu/nn_dense.c compute it. A zeroed momentum buffer needs no first-step case: momentum * 0
// + g is g, which is what PyTorch stores on the first step.
#include "common.cuh"

#define SGD_BLOCK 256

template <bool DECAY, bool MOMENTUM, bool NESTEROV>
static __global__ void __launch_bounds__(SGD_BLOCK)
    sgd_f32_kernel(int64_t n, float lr, float momentum, float weight_decay,
                   float *__restrict__ param, const float *__restrict__ grad,
                   float *__restrict__ buf) {
    for (int64_t i = blockIdx.x * (int64_t)SGD_BLOCK + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * SGD_BLOCK) {
        const float p = param[i];
        float g = DECAY ? grad[i] + weight_decay * p : grad[i];
        if (MOMENTUM) {
            const float b = buf[i] * momentum + g;
            buf[i] = b;
            g = NESTEROV ? g + momentum * b : b;
        }
        param[i] = p + -lr * g;
    }
}

template <bool DECAY>
static void sgd_launch(cudaStream_t stream, int64_t n, float lr, float momentum, float weight_decay,
                       bool nesterov, float *param, const float *grad, float *buf) {
    const unsigned blocks = saga_cuda_blocks(n, SGD_BLOCK);
    if (momentum == 0.0f)
        sgd_f32_kernel<DECAY, false, false>
            <<<blocks, SGD_BLOCK, 0, stream>>>(n, lr, momentum, weight_decay, param, grad, buf);
    else if (nesterov)
        sgd_f32_kernel<DECAY, true, true>
            <<<blocks, SGD_BLOCK, 0, stream>>>(n, lr, momentum, weight_decay, param, grad, buf);
    else
        sgd_f32_kernel<DECAY, true, false>
            <<<blocks, SGD_BLOCK, 0, stream>>>(n, lr, momentum, weight_decay, param, grad, buf);
}

saga_status saga_cuda_sgd_f32(saga_stream *s, int64_t n, float lr, float momentum,
                              float weight_decay, bool nesterov, float *param, const float *grad,
                              float *buf) {
    static const char slot[] = "sgd_f32";
    if (momentum != 0.0f && !buf)
        return saga_cuda_host->error(SAGA_ERR_INVALID_ARG,
                                     "%s: momentum %g needs a momentum buffer, got NULL", slot,
                                     (double)momentum);
    if (n <= 0)
        return SAGA_OK;
    cudaStream_t stream;
    saga_status st = saga_cuda_slot_stream(s, slot, &stream);
    if (st < 0)
        return st;
    if (weight_decay != 0.0f)
        sgd_launch<true>(stream, n, lr, momentum, weight_decay, nesterov, param, grad, buf);
    else
        sgd_launch<false>(stream, n, lr, momentum, weight_decay, nesterov, param, grad, buf);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    return SAGA_OK;
}
