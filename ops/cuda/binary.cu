// binary.cu - z = x op y element-wise in f32 (z may be x or y).
#include "common.cuh"

#define BINARY_BLOCK 256

// z may alias x or y: no __restrict__.
template <int OP>
static __global__ void __launch_bounds__(BINARY_BLOCK)
    binary_f32_kernel(int64_t n, const float *x, const float *y, float *z) {
    for (int64_t i = blockIdx.x * (int64_t)BINARY_BLOCK + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * BINARY_BLOCK) {
        const float a = x[i], b = y[i];
        z[i] = OP == SAGA_BINOP_ADD   ? a + b
               : OP == SAGA_BINOP_SUB ? a - b
               : OP == SAGA_BINOP_MUL ? a * b
                                      : a / b; // IEEE division (nvcc's default -prec-div=true)
    }
}

saga_status saga_cuda_binary_f32(saga_stream *s, saga_binop op, int64_t n, const float *x,
                                 const float *y, float *z) {
    static const char slot[] = "binary_f32";
    if ((unsigned)op >= SAGA_BINOP_COUNT)
        return saga_cuda_host->error(SAGA_ERR_INVALID_ARG, "%s: unknown operation %d", slot,
                                     (int)op);
    if (n <= 0)
        return SAGA_OK;
    cudaStream_t stream;
    saga_status st = saga_cuda_slot_stream(s, slot, &stream);
    if (st < 0)
        return st;
    const unsigned blocks = saga_cuda_blocks(n, BINARY_BLOCK);
    switch (op) {
    case SAGA_BINOP_ADD:
        binary_f32_kernel<SAGA_BINOP_ADD><<<blocks, BINARY_BLOCK, 0, stream>>>(n, x, y, z);
        break;
    case SAGA_BINOP_SUB:
        binary_f32_kernel<SAGA_BINOP_SUB><<<blocks, BINARY_BLOCK, 0, stream>>>(n, x, y, z);
        break;
    case SAGA_BINOP_MUL:
        binary_f32_kernel<SAGA_BINOP_MUL><<<blocks, BINARY_BLOCK, 0, stream>>>(n, x, y, z);
        break;
    default:
        binary_f32_kernel<SAGA_BINOP_DIV><<<blocks, BINARY_BLOCK, 0, stream>>>(n, x, y, z);
        break;
    }
    SAGA_CUDA_SLOT_LAUNCH(slot);
    return SAGA_OK;
}
