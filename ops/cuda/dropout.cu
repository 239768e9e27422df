// dropout.cu - inverted dropout in f32 with the mask of backend_impl.h: a function of (seed,
// element index) only, drawn here bit for bit as the CPU draws it.
#include "common.cuh"

#define DROPOUT_BLOCK 256

// The splitmix64 finalizer (the same as ops/cpu/nn_dense.c's mix64).
__host__ __device__ __forceinline__ uint64_t dropout_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// keep <=> (z >> 40) 2^-24 >= p <=> (z >> 40) >= thr = ceil(p 2^24). y may be x.
static __global__ void __launch_bounds__(DROPOUT_BLOCK)
    dropout_f32_kernel(int64_t n, uint64_t key, uint64_t thr, float scale, int64_t first,
                       const float *x, float *y) {
    for (int64_t i = blockIdx.x * (int64_t)DROPOUT_BLOCK + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * DROPOUT_BLOCK) {
        const uint64_t z = dropout_mix64(key + 0x9E3779B97F4A7C15ull * (uint64_t)(first + i + 1));
        // a select, not x * 0: a dropped NaN or infinity gives +0 as on the CPU
        y[i] = (z >> 40) >= thr ? x[i] * scale : 0.0f;
    }
}

saga_status saga_cuda_dropout_f32(saga_stream *s, int64_t n, float p, uint64_t seed, int64_t first,
                                  const float *x, float *y) {
    static const char slot[] = "dropout_f32";
    if (!(p >= 0.0f && p < 1.0f))
        return saga_cuda_host->error(SAGA_ERR_INVALID_ARG, "%s: p must be in [0, 1), got %g", slot,
                                     (double)p);
    if (first < 0)
        return saga_cuda_host->error(SAGA_ERR_INVALID_ARG, "%s: first element index %lld < 0", slot,
                                     (long long)first);
    if (n <= 0)
        return SAGA_OK;
    cudaStream_t stream;
    saga_status st = saga_cuda_slot_stream(s, slot, &stream);
    if (st < 0)
        return st;
    if (p == 0.0f) {
        if (x != y)
            SAGA_CUDA_SLOT_RETURN(slot, cudaMemcpyAsync(y, x, (size_t)n * sizeof *y,
                                                        cudaMemcpyDeviceToDevice, stream));
        return SAGA_OK;
    }
    // The scalars as the CPU computes them, on the host, so that they are the same floats.
    const uint64_t key = dropout_mix64(seed);
    const float scale = 1.0f / (1.0f - p);
    const uint64_t thr = (uint64_t)ceilf(p * 0x1p24f);
    dropout_f32_kernel<<<saga_cuda_blocks(n, DROPOUT_BLOCK), DROPOUT_BLOCK, 0, stream>>>(
        n, key, thr, scale, first, x, y);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    return SAGA_OK;
}

// Row r of x stands for row ids[r] of the whole tensor: element (r, j) draws mask element
// ids[r] * cols + j.
static __global__ void __launch_bounds__(DROPOUT_BLOCK)
    dropout_rows_f32_kernel(int64_t rows, int64_t cols, uint64_t key, uint64_t thr, float scale,
                            const int32_t *ids, const float *x, float *y) {
    const int64_t n = rows * cols;
    for (int64_t i = blockIdx.x * (int64_t)DROPOUT_BLOCK + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * DROPOUT_BLOCK) {
        const int64_t r = i / cols, j = i - r * cols;
        const uint64_t e = (uint64_t)ids[r] * (uint64_t)cols + (uint64_t)j;
        const uint64_t z = dropout_mix64(key + 0x9E3779B97F4A7C15ull * (e + 1));
        y[i] = (z >> 40) >= thr ? x[i] * scale : 0.0f;
    }
}

saga_status saga_cuda_dropout_rows_f32(saga_stream *s, int64_t rows, int64_t cols, float p,
                                       uint64_t seed, const int32_t *row_ids, const float *x,
                                       float *y) {
    static const char slot[] = "dropout_rows_f32";
    if (!(p >= 0.0f && p < 1.0f))
        return saga_cuda_host->error(SAGA_ERR_INVALID_ARG, "%s: p must be in [0, 1), got %g", slot,
                                     (double)p);
    const int64_t n = rows * cols;
    if (n <= 0)
        return SAGA_OK;
    cudaStream_t stream;
    saga_status st = saga_cuda_slot_stream(s, slot, &stream);
    if (st < 0)
        return st;
    const uint64_t key = dropout_mix64(seed);
    const float scale = 1.0f / (1.0f - p);
    const uint64_t thr = (uint64_t)ceilf(p * 0x1p24f);
    dropout_rows_f32_kernel<<<saga_cuda_blocks(n, DROPOUT_BLOCK), DROPOUT_BLOCK, 0, stream>>>(
        rows, cols, key, thr, scale, row_ids, x, y);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    return SAGA_OK;
}
