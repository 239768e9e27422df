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

// The mask's scalars, computed as the CPU computes them, on the host, so that they are the same
// floats: key = mix64(seed); keep <=> (z >> 40) 2^-24 >= p <=> (z >> 40) >= thr = ceil(p 2^24).
struct dropout_mask {
    uint64_t key, thr;
    float scale;
};

static saga_status dropout_mask_for(const char *slot, float p, uint64_t seed, dropout_mask *out) {
    if (!(p >= 0.0f && p < 1.0f))
        return saga_cuda_host->error(SAGA_ERR_INVALID_ARG, "%s: p must be in [0, 1), got %g", slot,
                                     (double)p);
    out->key = dropout_mix64(seed);
    out->thr = (uint64_t)ceilf(p * 0x1p24f);
    out->scale = 1.0f / (1.0f - p);
    return SAGA_OK;
}

// v with element e of the mask applied. A select, not v * 0: a dropped NaN or infinity gives +0
// as on the CPU.
__device__ __forceinline__ float dropout_apply(const dropout_mask &m, uint64_t e, float v) {
    const uint64_t z = dropout_mix64(m.key + 0x9E3779B97F4A7C15ull * (e + 1));
    return (z >> 40) >= m.thr ? v * m.scale : 0.0f;
}

// y may be x.
static __global__ void __launch_bounds__(DROPOUT_BLOCK)
    dropout_f32_kernel(int64_t n, dropout_mask m, int64_t first, const float *x, float *y) {
    for (int64_t i = blockIdx.x * (int64_t)DROPOUT_BLOCK + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * DROPOUT_BLOCK)
        y[i] = dropout_apply(m, (uint64_t)(first + i), x[i]);
}

saga_status saga_cuda_dropout_f32(saga_stream *s, int64_t n, float p, uint64_t seed, int64_t first,
                                  const float *x, float *y) {
    static const char slot[] = "dropout_f32";
    dropout_mask m;
    saga_status st = dropout_mask_for(slot, p, seed, &m);
    if (st < 0)
        return st;
    if (first < 0)
        return saga_cuda_host->error(SAGA_ERR_INVALID_ARG, "%s: first element index %lld < 0", slot,
                                     (long long)first);
    if (n <= 0)
        return SAGA_OK;
    cudaStream_t stream;
    st = saga_cuda_slot_stream(s, slot, &stream);
    if (st < 0)
        return st;
    if (p == 0.0f) {
        if (x != y)
            SAGA_CUDA_SLOT_RETURN(slot, cudaMemcpyAsync(y, x, (size_t)n * sizeof *y,
                                                        cudaMemcpyDeviceToDevice, stream));
        return SAGA_OK;
    }
    dropout_f32_kernel<<<saga_cuda_blocks(n, DROPOUT_BLOCK), DROPOUT_BLOCK, 0, stream>>>(
        n, m, first, x, y);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    return SAGA_OK;
}

// Row r of x stands for row ids[r] of the whole tensor: element (r, j) draws mask element
// ids[r] * cols + j.
static __global__ void __launch_bounds__(DROPOUT_BLOCK)
    dropout_rows_f32_kernel(int64_t rows, int64_t cols, dropout_mask m, const int32_t *ids,
                            const float *x, float *y) {
    const int64_t n = rows * cols;
    for (int64_t i = blockIdx.x * (int64_t)DROPOUT_BLOCK + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * DROPOUT_BLOCK) {
        const int64_t r = i / cols, j = i - r * cols;
        y[i] = dropout_apply(m, (uint64_t)ids[r] * (uint64_t)cols + (uint64_t)j, x[i]);
    }
}

saga_status saga_cuda_dropout_rows_f32(saga_stream *s, int64_t rows, int64_t cols, float p,
                                       uint64_t seed, const int32_t *row_ids, const float *x,
                                       float *y) {
    static const char slot[] = "dropout_rows_f32";
    dropout_mask m;
    saga_status st = dropout_mask_for(slot, p, seed, &m);
    const int64_t n = rows * cols;
    if (st < 0 || n <= 0)
        return st;
    cudaStream_t stream;
    st = saga_cuda_slot_stream(s, slot, &stream);
    if (st < 0)
        return st;
    dropout_rows_f32_kernel<<<saga_cuda_blocks(n, DROPOUT_BLOCK), DROPOUT_BLOCK, 0, stream>>>(
        rows, cols, m, row_ids, x, y);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    return SAGA_OK;
}

// Dropout on the stored entries of a CSR block: a thread per row walks its entries; entry k of
// row i draws mask element r * n_cols + indices[k], r the row's id in the whole matrix.
static __global__ void __launch_bounds__(DROPOUT_BLOCK)
    dropout_csr_f32_kernel(int64_t n_rows, int64_t n_cols, dropout_mask m, int64_t row_base,
                           const int32_t *__restrict__ row_ids, const int64_t *__restrict__ offsets,
                           const int32_t *__restrict__ indices, const float *values, float *y) {
    for (int64_t i = blockIdx.x * (int64_t)DROPOUT_BLOCK + threadIdx.x; i < n_rows;
         i += (int64_t)gridDim.x * DROPOUT_BLOCK) {
        const uint64_t r = row_ids ? (uint64_t)row_ids[i] : (uint64_t)(row_base + i);
        for (int64_t k = offsets[i]; k < offsets[i + 1]; k++)
            y[k] = dropout_apply(m, r * (uint64_t)n_cols + (uint64_t)indices[k],
                                 values ? values[k] : 1.0f);
    }
}

saga_status saga_cuda_dropout_csr_f32(saga_stream *s, const saga_csr_dev *A, float p, uint64_t seed,
                                      int64_t row_base, const int32_t *row_ids, float *y) {
    static const char slot[] = "dropout_csr_f32";
    dropout_mask m;
    saga_status st = dropout_mask_for(slot, p, seed, &m);
    if (st < 0 || A->n_rows <= 0 || A->nnz <= 0)
        return st;
    cudaStream_t stream;
    st = saga_cuda_slot_stream(s, slot, &stream);
    if (st < 0)
        return st;
    dropout_csr_f32_kernel<<<saga_cuda_blocks(A->n_rows, DROPOUT_BLOCK), DROPOUT_BLOCK, 0,
                             stream>>>(A->n_rows, A->n_cols, m, row_base, row_ids, A->offsets,
                                       A->indices, A->values, y);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    return SAGA_OK;
}
