// adam.cu - one Adam / AdamW step in f32, as torch.optim.Adam(W) (single-tensor path, amsgrad
// off) and ops/cpu/nn_dense.c compute it: the scalar factors in double on the host, rounded once
// to f32, and the same f32 operations per element.
#include "common.cuh"

#include <math.h>

#define ADAM_BLOCK 256

struct adam_scalars {
    float beta2, eps, weight_decay;
    float step_size; // lr / (1 - beta1^step)
    float bc2_sqrt;  // sqrt(1 - beta2^step)
    float w1, w2;    // 1 - beta1, 1 - beta2 (the lerp and addcmul weights)
    float decay;     // 1 - lr weight_decay (AdamW)
};

template <bool L2, bool SHRINK>
static __global__ void __launch_bounds__(ADAM_BLOCK)
    adam_f32_kernel(int64_t n, adam_scalars a, float *__restrict__ param,
                    const float *__restrict__ grad, float *__restrict__ m, float *__restrict__ v) {
    for (int64_t i = blockIdx.x * (int64_t)ADAM_BLOCK + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * ADAM_BLOCK) {
        float p = param[i];
        const float g = L2 ? grad[i] + a.weight_decay * p : grad[i];
        if (SHRINK)
            p *= a.decay;
        // torch's lerp: start + w (end - start) for w < 0.5, else end - (end - start)(1 - w)
        float mi = m[i];
        mi = a.w1 < 0.5f ? mi + a.w1 * (g - mi) : g - (g - mi) * (1.0f - a.w1);
        const float vi = v[i] * a.beta2 + a.w2 * g * g; // addcmul: (value t1) t2
        const float denom = sqrtf(vi) / a.bc2_sqrt + a.eps;
        m[i] = mi;
        v[i] = vi;
        param[i] = p + -a.step_size * mi / denom; // addcdiv: (value t1) / t2
    }
}

saga_status saga_cuda_adam_f32(saga_stream *s, int64_t n, float lr, float beta1, float beta2,
                               float eps, float weight_decay, bool decoupled, int64_t step,
                               float *param, const float *grad, float *m, float *v) {
    static const char slot[] = "adam_f32";
    if (step < 1)
        return saga_cuda_host->error(SAGA_ERR_INVALID_ARG, "%s: step must be 1 or more, got %lld",
                                     slot, (long long)step);
    if (n <= 0)
        return SAGA_OK;
    cudaStream_t stream;
    saga_status st = saga_cuda_slot_stream(s, slot, &stream);
    if (st < 0)
        return st;
    const double bc1 = 1.0 - pow((double)beta1, (double)step);
    const double bc2 = 1.0 - pow((double)beta2, (double)step);
    adam_scalars a;
    a.beta2 = beta2;
    a.eps = eps;
    a.weight_decay = weight_decay;
    a.step_size = (float)((double)lr / bc1);
    a.bc2_sqrt = (float)sqrt(bc2);
    a.w1 = (float)(1.0 - (double)beta1);
    a.w2 = (float)(1.0 - (double)beta2);
    a.decay = (float)(1.0 - (double)lr * (double)weight_decay);
    const bool l2 = weight_decay != 0.0f && !decoupled;
    const bool shrink = weight_decay != 0.0f && decoupled;
    const unsigned blocks = saga_cuda_blocks(n, ADAM_BLOCK);
    if (l2)
        adam_f32_kernel<true, false><<<blocks, ADAM_BLOCK, 0, stream>>>(n, a, param, grad, m, v);
    else if (shrink)
        adam_f32_kernel<false, true><<<blocks, ADAM_BLOCK, 0, stream>>>(n, a, param, grad, m, v);
    else
        adam_f32_kernel<false, false><<<blocks, ADAM_BLOCK, 0, stream>>>(n, a, param, grad, m, v);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    return SAGA_OK;
}
