// spmm.cu - Y = alpha A X + beta Y for CSR A (int64 offsets, int32 column indices, f32 values or
// NULL for ones) and row-major f32 X, Y with F columns: GCN's aggregation.
//
// A kernel of our own rather than cuSPARSE's SpMM: cuSPARSE wants one index type for the offsets
// and the column indices (ours are int64 and int32, so every call would first widen the indices
// or narrow the offsets into a copy), has no implicit all-ones values, and needs a workspace per
// shape. Here a group of lanes owns a row of A (see saga_cuda_group_shift): its lanes read the
// X rows that the row's column indices name across consecutive columns (coalesced), each lane
// keeping up to SPMM_ACC accumulators, so a row's indices are read once per SPMM_ACC * width
// columns. Every output element adds its row's entries in increasing order, as on the CPU, so the
// result is deterministic (and differs from the CPU's only where the GPU fuses a multiply-add).
// Rows are not split: a row with many entries is walked by one group, a cost on power-law graphs
// that a merge-path split of the entries would remove.
#include "common.cuh"

#define SPMM_BLOCK 256
#define SPMM_ACC 4

template <bool VALUES, bool READ_Y>
static __global__ void __launch_bounds__(SPMM_BLOCK)
    spmm_f32_kernel(int64_t n_rows, int64_t F, int shift, const int64_t *__restrict__ offsets,
                    const int32_t *__restrict__ indices, const float *__restrict__ values,
                    float alpha, const float *__restrict__ X, float beta, float *__restrict__ Y) {
    const int width = 1 << shift, lane = threadIdx.x & (width - 1);
    const int64_t stride = saga_cuda_group_stride(shift);
    for (int64_t i = saga_cuda_group_row(shift); i < n_rows; i += stride) {
        const int64_t k0 = offsets[i], k1 = offsets[i + 1];
        float *yi = Y + i * F;
        for (int64_t c0 = 0; c0 < F; c0 += (int64_t)SPMM_ACC * width) {
            const int64_t c = c0 + lane;
            float acc[SPMM_ACC];
#pragma unroll
            for (int t = 0; t < SPMM_ACC; t++)
                acc[t] = 0.0f;
            for (int64_t k = k0; k < k1; k++) {
                const float *xr = X + (int64_t)indices[k] * F + c;
                const float v = VALUES ? values[k] : 1.0f;
#pragma unroll
                for (int t = 0; t < SPMM_ACC; t++)
                    if (c + t * width < F)
                        acc[t] += VALUES ? v * xr[t * width] : xr[t * width];
            }
#pragma unroll
            for (int t = 0; t < SPMM_ACC; t++) {
                const int64_t j = c + t * width;
                if (j < F)
                    yi[j] = READ_Y ? alpha * acc[t] + beta * yi[j] : alpha * acc[t];
            }
        }
    }
}

template <bool VALUES, bool READ_Y>
static void spmm_launch(cudaStream_t stream, const saga_csr_dev *A, int64_t F, int shift,
                        float alpha, const float *X, float beta, float *Y) {
    spmm_f32_kernel<VALUES, READ_Y>
        <<<saga_cuda_group_blocks(A->n_rows, shift, SPMM_BLOCK), SPMM_BLOCK, 0, stream>>>(
            A->n_rows, F, shift, A->offsets, A->indices, A->values, alpha, X, beta, Y);
}

saga_status saga_cuda_spmm_f32(saga_stream *s, const saga_csr_dev *A, int64_t F, float alpha,
                               const float *X, float beta, float *Y) {
    static const char slot[] = "spmm_f32";
    if (A->n_rows <= 0 || F <= 0)
        return SAGA_OK;
    cudaStream_t stream;
    saga_status st = saga_cuda_slot_stream(s, slot, &stream);
    if (st < 0)
        return st;
    const int shift = saga_cuda_group_shift(F);
    const bool vals = A->values != NULL, read_y = beta != 0.0f;
    if (vals && read_y)
        spmm_launch<true, true>(stream, A, F, shift, alpha, X, beta, Y);
    else if (vals)
        spmm_launch<true, false>(stream, A, F, shift, alpha, X, beta, Y);
    else if (read_y)
        spmm_launch<false, true>(stream, A, F, shift, alpha, X, beta, Y);
    else
        spmm_launch<false, false>(stream, A, F, shift, alpha, X, beta, Y);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    return SAGA_OK;
}
