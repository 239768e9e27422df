// edge_softmax.cu - softmax of f32 scores (nnz x H) over the rows of each segment, per column
// (head): GAT's attention over each vertex's in-edges, and its backward pass, as
// ops/cpu/nn_sparse.c computes them (the maximum subtracted first, sums in double).
//
// A warp owns a segment and reduces with shuffles (every lane of the warp runs the same loops, so
// the shuffles have the whole warp). When H is a power of two up to 32, the lanes stride over the
// segment's nnz x H block as one array: lane l always meets head l % H (32 is a multiple of H), so
// one coalesced pass covers every head and a head's lanes reduce over the shuffle offsets from 16
// down to H. Otherwise the warp goes head after head, its lanes striding over the rows. The sums
// add the CPU's terms in another order: they agree to double rounding, the outputs to f32
// rounding (expf is within 2 ulp of glibc's). A warp per segment idles lanes on segments of few
// rows; GNN batches are memory-bound enough that this costs little.
#include "common.cuh"

#define EDGE_SOFTMAX_BLOCK 256
#define EDGE_SOFTMAX_WARPS (EDGE_SOFTMAX_BLOCK / 32)

// Max and sum over the lanes that agree with this one below bit log2(stop).
__device__ __forceinline__ float lanes_max(float v, int stop) {
    for (int off = 16; off >= stop; off >>= 1) {
        const float o = __shfl_xor_sync(0xffffffffu, v, off);
        v = o > v ? o : v;
    }
    return v;
}

__device__ __forceinline__ double lanes_sum(double v, int stop) {
    for (int off = 16; off >= stop; off >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

// How a warp walks a segment's elements e (row r, head h at e = r H + h), see above: n_pass
// passes, each over e = first(pass) + k step below r1 H, reduced over the lanes down to `stop`.
struct edge_walk {
    bool flat;
    int stop;
    int64_t n_pass, step;
};

static edge_walk edge_walk_for(int64_t H) {
    const bool flat = H <= 32 && (H & (H - 1)) == 0;
    return flat ? edge_walk{true, (int)H, 1, 32} : edge_walk{false, 1, H, 32 * H};
}

__device__ __forceinline__ int64_t edge_first(const edge_walk &w, int64_t r0, int64_t H,
                                              int64_t pass, int lane) {
    return w.flat ? r0 * H + lane : (r0 + lane) * H + pass;
}

// out may be scores: each lane reads the elements it later writes, and a head's maximum is
// reduced before any element of the pass is written.
static __global__ void __launch_bounds__(EDGE_SOFTMAX_BLOCK)
    edge_softmax_f32_kernel(const int64_t *__restrict__ offsets, int64_t n_seg, int64_t H,
                            edge_walk w, const float *sc, float *out) {
    const int lane = threadIdx.x & 31;
    const int64_t stride = (int64_t)gridDim.x * EDGE_SOFTMAX_WARPS;
    for (int64_t g = blockIdx.x * (int64_t)EDGE_SOFTMAX_WARPS + (threadIdx.x >> 5); g < n_seg;
         g += stride) {
        const int64_t r0 = offsets[g], r1 = offsets[g + 1];
        if (r0 >= r1)
            continue; // nothing to write; the condition is the same for the whole warp
        const int64_t end = r1 * H;
        for (int64_t pass = 0; pass < w.n_pass; pass++) {
            const int64_t first = edge_first(w, r0, H, pass, lane);
            float mx = -INFINITY;
            for (int64_t e = first; e < end; e += w.step) {
                const float v = sc[e];
                mx = v > mx ? v : mx;
            }
            mx = lanes_max(mx, w.stop);
            double sum = 0.0;
            for (int64_t e = first; e < end; e += w.step) {
                const float x = expf(sc[e] - mx);
                out[e] = x;
                sum += x;
            }
            const float inv = (float)(1.0 / lanes_sum(sum, w.stop));
            for (int64_t e = first; e < end; e += w.step)
                out[e] *= inv;
        }
    }
}

// dscores = out (dout - sum_seg out dout) per head; dscores may be dout (the sum is reduced over
// the warp before any element of the pass is written).
static __global__ void __launch_bounds__(EDGE_SOFTMAX_BLOCK)
    edge_softmax_bwd_f32_kernel(const int64_t *__restrict__ offsets, int64_t n_seg, int64_t H,
                                edge_walk w, const float *__restrict__ out, const float *dout,
                                float *dscores) {
    const int lane = threadIdx.x & 31;
    const int64_t stride = (int64_t)gridDim.x * EDGE_SOFTMAX_WARPS;
    for (int64_t g = blockIdx.x * (int64_t)EDGE_SOFTMAX_WARPS + (threadIdx.x >> 5); g < n_seg;
         g += stride) {
        const int64_t r0 = offsets[g], r1 = offsets[g + 1];
        if (r0 >= r1)
            continue;
        const int64_t end = r1 * H;
        for (int64_t pass = 0; pass < w.n_pass; pass++) {
            const int64_t first = edge_first(w, r0, H, pass, lane);
            double acc = 0.0;
            for (int64_t e = first; e < end; e += w.step)
                acc += (double)out[e] * dout[e];
            const float dot = (float)lanes_sum(acc, w.stop);
            for (int64_t e = first; e < end; e += w.step)
                dscores[e] = out[e] * (dout[e] - dot);
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
                              stream>>>(offsets, n_seg, H, edge_walk_for(H), scores, out);
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
                                  0, stream>>>(offsets, n_seg, H, edge_walk_for(H), out, dout,
                                               dscores);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    return SAGA_OK;
}
