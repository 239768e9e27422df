// softmax_rows.cu - row-wise softmax and log-softmax in f32 and their backward pass, as
// ops/cpu/nn_dense.c computes them: the row maximum subtracted first, sums in double.
//
// A group of lanes per row (see saga_cuda_group_shift) reduces with shuffles. The loop over rows
// runs the same number of times in every lane of a warp (lanes past the last row stay idle), so
// each shuffle has the whole warp. The sums add the same terms as the CPU in another order: they
// agree to double rounding, and the outputs to f32 rounding (expf is within 2 ulp of glibc's).
#include "common.cuh"

#define SOFTMAX_BLOCK 256

__device__ __forceinline__ float group_max(float v, int width) {
    for (int off = width >> 1; off > 0; off >>= 1) {
        const float o = __shfl_xor_sync(0xffffffffu, v, off);
        v = o > v ? o : v;
    }
    return v;
}

__device__ __forceinline__ double group_sum(double v, int width) {
    for (int off = width >> 1; off > 0; off >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

// y may be x: each lane reads its own columns before writing them.
template <bool LOG>
static __global__ void __launch_bounds__(SOFTMAX_BLOCK)
    softmax_rows_f32_kernel(int64_t rows, int64_t cols, int shift, const float *x, float *y) {
    const int width = 1 << shift, lane = threadIdx.x & (width - 1);
    const int64_t g = saga_cuda_group_row(shift), stride = saga_cuda_group_stride(shift);
    const int64_t g_warp = g - ((threadIdx.x & 31) >> shift); // the warp's first group
    for (int64_t base = g_warp; base < rows; base += stride) {
        const int64_t i = base + (g - g_warp);
        const bool active = i < rows;
        const float *xi = x + (active ? i : 0) * cols;
        float *yi = y + (active ? i : 0) * cols;
        float mx = -INFINITY;
        if (active)
            for (int64_t j = lane; j < cols; j += width)
                mx = xi[j] > mx ? xi[j] : mx;
        mx = group_max(mx, width);
        double sum = 0.0;
        if (active) {
            for (int64_t j = lane; j < cols; j += width) {
                const float e = expf(xi[j] - mx);
                if (!LOG)
                    yi[j] = e;
                sum += e;
            }
        }
        sum = group_sum(sum, width);
        if (!active)
            continue;
        if (LOG) {
            const float lse = mx + (float)log(sum);
            for (int64_t j = lane; j < cols; j += width)
                yi[j] = xi[j] - lse;
        } else {
            const float inv = (float)(1.0 / sum);
            for (int64_t j = lane; j < cols; j += width)
                yi[j] *= inv;
        }
    }
}

// dx = y (dy - sum dy y), or dy - exp(y) sum dy for log-softmax. dx may be dy.
template <bool LOG>
static __global__ void __launch_bounds__(SOFTMAX_BLOCK)
    softmax_rows_bwd_f32_kernel(int64_t rows, int64_t cols, int shift, const float *__restrict__ y,
                                const float *dy, float *dx) {
    const int width = 1 << shift, lane = threadIdx.x & (width - 1);
    const int64_t g = saga_cuda_group_row(shift), stride = saga_cuda_group_stride(shift);
    const int64_t g_warp = g - ((threadIdx.x & 31) >> shift);
    for (int64_t base = g_warp; base < rows; base += stride) {
        const int64_t i = base + (g - g_warp);
        const bool active = i < rows;
        const int64_t at = (active ? i : 0) * cols;
        const float *yi = y + at, *dyi = dy + at;
        float *dxi = dx + at;
        double acc = 0.0;
        if (active)
            for (int64_t j = lane; j < cols; j += width)
                acc += LOG ? (double)dyi[j] : (double)dyi[j] * yi[j];
        acc = group_sum(acc, width);
        if (!active)
            continue;
        const float s = (float)acc;
        for (int64_t j = lane; j < cols; j += width)
            dxi[j] = LOG ? dyi[j] - expf(yi[j]) * s : yi[j] * (dyi[j] - s);
    }
}

saga_status saga_cuda_softmax_rows_f32(saga_stream *s, int64_t rows, int64_t cols, bool log,
                                       const float *x, float *y) {
    static const char slot[] = "softmax_rows_f32";
    if (rows <= 0 || cols <= 0)
        return SAGA_OK;
    cudaStream_t stream;
    saga_status st = saga_cuda_slot_stream(s, slot, &stream);
    if (st < 0)
        return st;
    const int shift = saga_cuda_group_shift(cols);
    const unsigned blocks = saga_cuda_group_blocks(rows, shift, SOFTMAX_BLOCK);
    if (log)
        softmax_rows_f32_kernel<true>
            <<<blocks, SOFTMAX_BLOCK, 0, stream>>>(rows, cols, shift, x, y);
    else
        softmax_rows_f32_kernel<false>
            <<<blocks, SOFTMAX_BLOCK, 0, stream>>>(rows, cols, shift, x, y);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    return SAGA_OK;
}

saga_status saga_cuda_softmax_rows_bwd_f32(saga_stream *s, int64_t rows, int64_t cols, bool log,
                                           const float *y, const float *dy, float *dx) {
    static const char slot[] = "softmax_rows_bwd_f32";
    if (rows <= 0 || cols <= 0)
        return SAGA_OK;
    cudaStream_t stream;
    saga_status st = saga_cuda_slot_stream(s, slot, &stream);
    if (st < 0)
        return st;
    const int shift = saga_cuda_group_shift(cols);
    const unsigned blocks = saga_cuda_group_blocks(rows, shift, SOFTMAX_BLOCK);
    if (log)
        softmax_rows_bwd_f32_kernel<true>
            <<<blocks, SOFTMAX_BLOCK, 0, stream>>>(rows, cols, shift, y, dy, dx);
    else
        softmax_rows_bwd_f32_kernel<false>
            <<<blocks, SOFTMAX_BLOCK, 0, stream>>>(rows, cols, shift, y, dy, dx);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    return SAGA_OK;
}
