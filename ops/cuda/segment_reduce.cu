// segment_reduce.cu - sum, mean or max of the rows of each segment of an f32 matrix (the Gather
// of the batched executor), and the backward pass, as ops/cpu/nn_sparse.c computes them.
//
// A group of lanes owns a segment (see saga_cuda_group_shift), each lane a set of columns, and
// walks the segment's rows in increasing order: every output element is computed by one thread in
// the CPU's order with the CPU's operations (adds, one division; max replacing only on a strictly
// greater value, so the first of equal maxima wins), so the results are the CPU's bits.
#include "common.cuh"

#define SEGMENT_BLOCK 256

template <int OP>
static __global__ void __launch_bounds__(SEGMENT_BLOCK)
    segment_reduce_f32_kernel(const int64_t *__restrict__ offsets, int64_t n_seg, int64_t F,
                              int shift, const float *__restrict__ x, float *__restrict__ y,
                              int32_t *__restrict__ argmax) {
    const int width = 1 << shift, lane = threadIdx.x & (width - 1);
    const int64_t stride = saga_cuda_group_stride(shift);
    for (int64_t g = saga_cuda_group_row(shift); g < n_seg; g += stride) {
        const int64_t r0 = offsets[g], r1 = offsets[g + 1];
        float *yg = y + g * F;
        int32_t *ag = OP == SAGA_REDUCE_MAX ? argmax + g * F : nullptr;
        for (int64_t j = lane; j < F; j += width) {
            if (r0 >= r1) { // an empty segment
                yg[j] = 0.0f;
                if (OP == SAGA_REDUCE_MAX)
                    ag[j] = -1;
                continue;
            }
            float acc = x[r0 * F + j];
            if (OP == SAGA_REDUCE_MAX) {
                int32_t at = (int32_t)r0;
                for (int64_t r = r0 + 1; r < r1; r++) {
                    const float v = x[r * F + j];
                    if (v > acc) {
                        acc = v;
                        at = (int32_t)r;
                    }
                }
                ag[j] = at;
            } else {
                for (int64_t r = r0 + 1; r < r1; r++)
                    acc += x[r * F + j];
                if (OP == SAGA_REDUCE_MEAN)
                    acc /= (float)(r1 - r0);
            }
            yg[j] = acc;
        }
    }
}

template <int OP>
static __global__ void __launch_bounds__(SEGMENT_BLOCK)
    segment_reduce_bwd_f32_kernel(const int64_t *__restrict__ offsets, int64_t n_seg, int64_t F,
                                  int shift, const float *__restrict__ dy,
                                  const int32_t *__restrict__ argmax, float *__restrict__ dx) {
    const int width = 1 << shift, lane = threadIdx.x & (width - 1);
    const int64_t stride = saga_cuda_group_stride(shift);
    for (int64_t g = saga_cuda_group_row(shift); g < n_seg; g += stride) {
        const int64_t r0 = offsets[g], r1 = offsets[g + 1];
        const float *dyg = dy + g * F;
        const float inv = OP == SAGA_REDUCE_MEAN && r1 > r0 ? 1.0f / (float)(r1 - r0) : 0.0f;
        for (int64_t j = lane; j < F; j += width) {
            const float d = dyg[j];
            const int64_t at = OP == SAGA_REDUCE_MAX ? argmax[g * F + j] : -1;
            for (int64_t r = r0; r < r1; r++)
                dx[r * F + j] = OP == SAGA_REDUCE_MAX    ? (at == r ? d : 0.0f)
                                : OP == SAGA_REDUCE_MEAN ? d * inv
                                                         : d;
        }
    }
}

static saga_status check_reduce(const char *slot, saga_reduce op, const int32_t *argmax) {
    if ((unsigned)op >= SAGA_REDUCE_COUNT)
        return saga_cuda_host->error(SAGA_ERR_INVALID_ARG, "%s: unknown reduction %d", slot,
                                     (int)op);
    if (op == SAGA_REDUCE_MAX && !argmax)
        return saga_cuda_host->error(SAGA_ERR_INVALID_ARG,
                                     "%s: MAX needs an argmax array, got NULL", slot);
    return SAGA_OK;
}

saga_status saga_cuda_segment_reduce_f32(saga_stream *s, const int64_t *offsets, int64_t n_seg,
                                         int64_t F, saga_reduce op, const float *x, float *y,
                                         int32_t *argmax) {
    static const char slot[] = "segment_reduce_f32";
    saga_status st = check_reduce(slot, op, argmax);
    if (st < 0 || n_seg <= 0 || F <= 0)
        return st;
    cudaStream_t stream;
    st = saga_cuda_slot_stream(s, slot, &stream);
    if (st < 0)
        return st;
    const int shift = saga_cuda_group_shift(F);
    const unsigned blocks = saga_cuda_group_blocks(n_seg, shift, SEGMENT_BLOCK);
    switch (op) {
    case SAGA_REDUCE_SUM:
        segment_reduce_f32_kernel<SAGA_REDUCE_SUM>
            <<<blocks, SEGMENT_BLOCK, 0, stream>>>(offsets, n_seg, F, shift, x, y, argmax);
        break;
    case SAGA_REDUCE_MEAN:
        segment_reduce_f32_kernel<SAGA_REDUCE_MEAN>
            <<<blocks, SEGMENT_BLOCK, 0, stream>>>(offsets, n_seg, F, shift, x, y, argmax);
        break;
    default:
        segment_reduce_f32_kernel<SAGA_REDUCE_MAX>
            <<<blocks, SEGMENT_BLOCK, 0, stream>>>(offsets, n_seg, F, shift, x, y, argmax);
        break;
    }
    SAGA_CUDA_SLOT_LAUNCH(slot);
    return SAGA_OK;
}

saga_status saga_cuda_segment_reduce_bwd_f32(saga_stream *s, const int64_t *offsets, int64_t n_seg,
                                             int64_t F, saga_reduce op, const float *dy,
                                             const int32_t *argmax, float *dx) {
    static const char slot[] = "segment_reduce_bwd_f32";
    saga_status st = check_reduce(slot, op, argmax);
    if (st < 0 || n_seg <= 0 || F <= 0)
        return st;
    cudaStream_t stream;
    st = saga_cuda_slot_stream(s, slot, &stream);
    if (st < 0)
        return st;
    const int shift = saga_cuda_group_shift(F);
    const unsigned blocks = saga_cuda_group_blocks(n_seg, shift, SEGMENT_BLOCK);
    switch (op) {
    case SAGA_REDUCE_SUM:
        segment_reduce_bwd_f32_kernel<SAGA_REDUCE_SUM>
            <<<blocks, SEGMENT_BLOCK, 0, stream>>>(offsets, n_seg, F, shift, dy, argmax, dx);
        break;
    case SAGA_REDUCE_MEAN:
        segment_reduce_bwd_f32_kernel<SAGA_REDUCE_MEAN>
            <<<blocks, SEGMENT_BLOCK, 0, stream>>>(offsets, n_seg, F, shift, dy, argmax, dx);
        break;
    default:
        segment_reduce_bwd_f32_kernel<SAGA_REDUCE_MAX>
            <<<blocks, SEGMENT_BLOCK, 0, stream>>>(offsets, n_seg, F, shift, dy, argmax, dx);
        break;
    }
    SAGA_CUDA_SLOT_LAUNCH(slot);
    return SAGA_OK;
}
