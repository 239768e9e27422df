// act.cu - activation functions in f32 and their backward pass, as ops/cpu/nn_dense.c computes
// them (the same branches; CUDA's expf, expm1f and tanhf are within 2 ulp of glibc's).
#include "common.cuh"

#define ACT_BLOCK 256

// y may be x: no __restrict__.
template <int KIND>
static __global__ void __launch_bounds__(ACT_BLOCK)
    act_f32_kernel(int64_t n, float alpha, const float *x, float *y) {
    for (int64_t i = blockIdx.x * (int64_t)ACT_BLOCK + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * ACT_BLOCK) {
        const float v = x[i];
        float r;
        if (KIND == SAGA_ACT_RELU)
            r = v > 0.0f ? v : 0.0f;
        else if (KIND == SAGA_ACT_LEAKY_RELU)
            r = v > 0.0f ? v : alpha * v;
        else if (KIND == SAGA_ACT_ELU)
            r = v > 0.0f ? v : alpha * expm1f(v);
        else if (KIND == SAGA_ACT_SIGMOID)
            r = saga_cuda_sigmoidf(v);
        else
            r = tanhf(v);
        y[i] = r;
    }
}

// Each kind reads what its derivative needs (see backend_impl.h); the other may be NULL. dx may
// be dy: no __restrict__.
template <int KIND>
static __global__ void __launch_bounds__(ACT_BLOCK)
    act_bwd_f32_kernel(int64_t n, float alpha, const float *x, const float *y, const float *dy,
                       float *dx) {
    for (int64_t i = blockIdx.x * (int64_t)ACT_BLOCK + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * ACT_BLOCK) {
        const float g = dy[i];
        float r;
        if (KIND == SAGA_ACT_RELU) {
            r = y[i] > 0.0f ? g : 0.0f;
        } else if (KIND == SAGA_ACT_LEAKY_RELU) {
            r = x[i] > 0.0f ? g : alpha * g;
        } else if (KIND == SAGA_ACT_ELU) { // for x <= 0, d/dx alpha (e^x - 1) = y + alpha
            r = x[i] > 0.0f ? g : g * (y[i] + alpha);
        } else if (KIND == SAGA_ACT_SIGMOID) {
            const float v = y[i];
            r = g * (v * (1.0f - v));
        } else {
            const float v = y[i];
            r = g * (1.0f - v * v);
        }
        dx[i] = r;
    }
}

static saga_status bad_act(const char *slot, saga_act kind) {
    return saga_cuda_host->error(SAGA_ERR_INVALID_ARG, "%s: unknown activation %d", slot,
                                 (int)kind);
}

saga_status saga_cuda_act_f32(saga_stream *s, saga_act kind, int64_t n, float alpha, const float *x,
                              float *y) {
    static const char slot[] = "act_f32";
    if ((unsigned)kind >= SAGA_ACT_COUNT)
        return bad_act(slot, kind);
    if (n <= 0)
        return SAGA_OK;
    cudaStream_t stream;
    saga_status st = saga_cuda_slot_stream(s, slot, &stream);
    if (st < 0)
        return st;
    const unsigned blocks = saga_cuda_blocks(n, ACT_BLOCK);
    switch (kind) {
    case SAGA_ACT_RELU:
        act_f32_kernel<SAGA_ACT_RELU><<<blocks, ACT_BLOCK, 0, stream>>>(n, alpha, x, y);
        break;
    case SAGA_ACT_LEAKY_RELU:
        act_f32_kernel<SAGA_ACT_LEAKY_RELU><<<blocks, ACT_BLOCK, 0, stream>>>(n, alpha, x, y);
        break;
    case SAGA_ACT_ELU:
        act_f32_kernel<SAGA_ACT_ELU><<<blocks, ACT_BLOCK, 0, stream>>>(n, alpha, x, y);
        break;
    case SAGA_ACT_SIGMOID:
        act_f32_kernel<SAGA_ACT_SIGMOID><<<blocks, ACT_BLOCK, 0, stream>>>(n, alpha, x, y);
        break;
    default:
        act_f32_kernel<SAGA_ACT_TANH><<<blocks, ACT_BLOCK, 0, stream>>>(n, alpha, x, y);
        break;
    }
    SAGA_CUDA_SLOT_LAUNCH(slot);
    return SAGA_OK;
}

saga_status saga_cuda_act_bwd_f32(saga_stream *s, saga_act kind, int64_t n, float alpha,
                                  const float *x, const float *y, const float *dy, float *dx) {
    static const char slot[] = "act_bwd_f32";
    if ((unsigned)kind >= SAGA_ACT_COUNT)
        return bad_act(slot, kind);
    if (n <= 0)
        return SAGA_OK;
    cudaStream_t stream;
    saga_status st = saga_cuda_slot_stream(s, slot, &stream);
    if (st < 0)
        return st;
    const unsigned blocks = saga_cuda_blocks(n, ACT_BLOCK);
    switch (kind) {
    case SAGA_ACT_RELU:
        act_bwd_f32_kernel<SAGA_ACT_RELU><<<blocks, ACT_BLOCK, 0, stream>>>(n, alpha, x, y, dy, dx);
        break;
    case SAGA_ACT_LEAKY_RELU:
        act_bwd_f32_kernel<SAGA_ACT_LEAKY_RELU>
            <<<blocks, ACT_BLOCK, 0, stream>>>(n, alpha, x, y, dy, dx);
        break;
    case SAGA_ACT_ELU:
        act_bwd_f32_kernel<SAGA_ACT_ELU><<<blocks, ACT_BLOCK, 0, stream>>>(n, alpha, x, y, dy, dx);
        break;
    case SAGA_ACT_SIGMOID:
        act_bwd_f32_kernel<SAGA_ACT_SIGMOID>
            <<<blocks, ACT_BLOCK, 0, stream>>>(n, alpha, x, y, dy, dx);
        break;
    default:
        act_bwd_f32_kernel<SAGA_ACT_TANH><<<blocks, ACT_BLOCK, 0, stream>>>(n, alpha, x, y, dy, dx);
        break;
    }
    SAGA_CUDA_SLOT_LAUNCH(slot);
    return SAGA_OK;
}
