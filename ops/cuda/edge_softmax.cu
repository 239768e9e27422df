// edge_softmax.cu - softmax of f32 scores (nnz x H) over the rows of each segment, per column
// (head): GAT's attention over each vertex's in-edges, and its backward pass, as
// ops/cpu/nn_sparse.c computes them (the maximum subtracted first, sums in double).
//
// A warp owns a segment and, head after head, strides its lanes over the segment's rows,
// reducing with shuffles (every lane of the warp runs the same loops, so the shuffles have the
// whole warp). The sums add the CPU's terms in another order: they agree to double rounding, the
// outputs to f32 rounding (expf is within 2 ulp of glibc's). A warp per segment idles lanes on
// segments of fewer than 32 rows; GNN batches are memory-bound enough that this costs little.
#include "common.cuh"

#define EDGE_SOFTMAX_BLOCK 256
#define EDGE_SOFTMAX_WARPS (EDGE_SOFTMAX_BLOCK / 32)

__device__ __forceinline__ float warp_max(float v) {
    for (int off = 16; off > 0; off >>= 1) {
        const float o = __shfl_xor_sync(0xffffffffu, v, off);
        v = o > v ? o : v;
    }
    return v;
}

__device__ __forceinline__ double warp_sum(double v) {
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

// out may be scores: each lane reads the elements it later writes, and a head's maximum is
// reduced before any of that head's elements is written.
static __global__ void __launch_bounds__(EDGE_SOFTMAX_BLOCK)
    edge_softmax_f32_kernel(const int64_t *__restrict__ offsets, int64_t n_seg, int64_t H,
                            const float *sc, float *out) {
    const int lane = threadIdx.x & 31;
    const int64_t stride = (int64_t)gridDim.x * EDGE_SOFTMAX_WARPS;
    for (int64_t g = blockIdx.x * (int64_t)EDGE_SOFTMAX_WARPS + (threadIdx.x >> 5); g < n_seg;
         g += stride) {
        const int64_t r0 = offsets[g], r1 = offsets[g + 1];
        if (r0 >= r1)
            continue; // nothing to write; the condition is the same for the whole warp
        for (int64_t h = 0; h < H; h++) {
            float mx = -INFINITY;
            for (int64_t r = r0 + lane; r < r1; r += 32) {
                const float v = sc[r * H + h];
                mx = v > mx ? v : mx;
            }
            mx = warp_max(mx);
            double sum = 0.0;
            for (int64_t r = r0 + lane; r < r1; r += 32) {
                const float e = expf(sc[r * H + h] - mx);
                out[r * H + h] = e;
                sum += e;
            }
            const float inv = (float)(1.0 / warp_sum(sum));
            for (int64_t r = r0 + lane; r < r1; r += 32)
                out[r * H + h] *= inv;
        }
    }
}

// dscores = out (dout - sum_seg out dout) per head; dscores may be dout (the sum is reduced over
// the warp before any element of the head is written).
static __global__ void __launch_bounds__(EDGE_SOFTMAX_BLOCK)
    edge_softmax_bwd_f32_kernel(const int64_t *__restrict__ offsets, int64_t n_seg, int64_t H,
                                const float *__restrict__ out, const float *dout, float *dscores) {
    const int lane = threadIdx.x & 31;
    const int64_t stride = (int64_t)gridDim.x * EDGE_SOFTMAX_WARPS;
    for (int64_t g = blockIdx.x * (int64_t)EDGE_SOFTMAX_WARPS + (threadIdx.x >> 5); g < n_seg;
         g += stride) {
        const int64_t r0 = offsets[g], r1 = offsets[g + 1];
        for (int64_t h = 0; h < H; h++) {
            double acc = 0.0;
            for (int64_t r = r0 + lane; r < r1; r += 32)
                acc += (double)out[r * H + h] * dout[r * H + h];
            const float dot = (float)warp_sum(acc);
            for (int64_t r = r0 + lane; r < r1; r += 32)
                dscores[r * H + h] = out[r * H + h] * (dout[r * H + h] - dot);
        }
    }
}

saga_status saga_cuda_edge_softmax_f32(saga_stream *s, const int64_t *offsets, int64_t n_seg,
                                       int64_t H, const float *scores, float *out) {
    static const char slot[] = "edge_softmax_f32";
    if (n_seg <= 0 || H <= 0)
        return SAGA_OK;
    cudaStream_t stream;
    saga_status st = saga_cuda_slot_stream(s, slot, &stream);
    if (st < 0)
        return st;
    edge_softmax_f32_kernel<<<saga_cuda_blocks(n_seg, EDGE_SOFTMAX_WARPS), EDGE_SOFTMAX_BLOCK, 0,
                              stream>>>(offsets, n_seg, H, scores, out);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    return SAGA_OK;
}

saga_status saga_cuda_edge_softmax_bwd_f32(saga_stream *s, const int64_t *offsets, int64_t n_seg,
                                           int64_t H, const float *out, const float *dout,
                                           float *dscores) {
    static const char slot[] = "edge_softmax_bwd_f32";
    if (n_seg <= 0 || H <= 0)
        return SAGA_OK;
    cudaStream_t stream;
    saga_status st = saga_cuda_slot_stream(s, slot, &stream);
    if (st < 0)
        return st;
    edge_softmax_bwd_f32_kernel<<<saga_cuda_blocks(n_seg, EDGE_SOFTMAX_WARPS), EDGE_SOFTMAX_BLOCK,
                                  0, stream>>>(offsets, n_seg, H, out, dout, dscores);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    return SAGA_OK;
}
