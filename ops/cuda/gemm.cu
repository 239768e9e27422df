// gemm.cu - C = alpha op(A) op(B) + beta C for row-major f32 matrices, through cuBLAS.
//
// cuBLAS is column-major: a row-major M x N matrix with leading dimension ld is, read
// column-major, its N x M transpose with the same ld. So C^T = op(B)^T op(A)^T is one SGEMM with
// the operands swapped, each keeping its own transpose flag. The handle computes in f32 (no TF32,
// see saga_cuda_cublas_acquire), so the result matches the CPU's SGEMM to f32 rounding; the
// summation order of the two libraries differs.
#include "common.cuh"

#include <limits.h>

#define GEMM_SCALE_BLOCK 256

// The least cuBLAS workspace a stream gives the handle: with less, some routines may fail with
// CUBLAS_STATUS_ALLOC_FAILED (cublasSetWorkspace's documentation: 16 KiB prevents it).
#define GEMM_MIN_WORKSPACE_BYTES SAGA_CUDA_GEMM_MIN_WORKSPACE

// C = beta C over M x N (beta == 0 writes zeros without reading C): the product when K == 0 or
// alpha == 0, which BLAS implementations treat differently, done here once for both backends'
// meaning. A group of lanes per row (see saga_cuda_group_shift).
template <bool READ_C>
static __global__ void __launch_bounds__(GEMM_SCALE_BLOCK)
    gemm_scale_kernel(int64_t M, int64_t N, int shift, float beta, float *C, int64_t ldc) {
    const int width = 1 << shift, lane = threadIdx.x & (width - 1);
    const int64_t stride = saga_cuda_group_stride(shift);
    for (int64_t i = saga_cuda_group_row(shift); i < M; i += stride) {
        float *c = C + i * ldc;
        for (int64_t j = lane; j < N; j += width)
            c[j] = READ_C ? beta * c[j] : 0.0f;
    }
}

static saga_status gemm_scale(cudaStream_t stream, const char *slot, int64_t M, int64_t N,
                              float beta, float *C, int64_t ldc) {
    if (beta == 1.0f)
        return SAGA_OK;
    const int shift = saga_cuda_group_shift(N);
    const unsigned blocks = saga_cuda_group_blocks(M, shift, GEMM_SCALE_BLOCK);
    if (beta == 0.0f)
        gemm_scale_kernel<false>
            <<<blocks, GEMM_SCALE_BLOCK, 0, stream>>>(M, N, shift, beta, C, ldc);
    else
        gemm_scale_kernel<true><<<blocks, GEMM_SCALE_BLOCK, 0, stream>>>(M, N, shift, beta, C, ldc);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    return SAGA_OK;
}

// One SGEMM on the locked handle, bound to the stream and its workspace. Each stream gives cuBLAS
// a workspace of its own (from the stream's scratch): a handle's default workspace is shared by
// every stream it is bound to, and one per stream lets SGEMMs on two streams run at once. Its
// size is the one cuBLAS's documentation (cublasSetWorkspace) recommends for the device (see
// saga_cuda_cublas_workspace_bytes); cuBLAS picks algorithms that fit.
static saga_status gemm_cublas(cublasHandle_t h, cudaStream_t stream, void *workspace,
                               size_t workspace_bytes, const char *slot, bool trans_a, bool trans_b,
                               int M, int N, int K, float alpha, const float *A, int lda,
                               const float *B, int ldb, float beta, float *C, int ldc) {
    // cublasSetStream also puts the handle back on cuBLAS's default workspace pool, which it
    // keeps when the stream has no workspace to give
    SAGA_CUDA_SLOT_RETURN(slot, cublasSetStream(h, stream));
    if (workspace)
        SAGA_CUDA_SLOT_RETURN(slot, cublasSetWorkspace(h, workspace, workspace_bytes));
    SAGA_CUDA_SLOT_RETURN(slot, cublasSgemm(h, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                            trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B,
                                            ldb, A, lda, &beta, C, ldc));
    return SAGA_OK;
}

saga_status saga_cuda_gemm_f32(saga_stream *s, bool trans_a, bool trans_b, int64_t M, int64_t N,
                               int64_t K, float alpha, const float *A, int64_t lda, const float *B,
                               int64_t ldb, float beta, float *C, int64_t ldc) {
    static const char slot[] = "gemm_f32";
    if (M <= 0 || N <= 0)
        return SAGA_OK;
    if (M > INT_MAX || N > INT_MAX || K > INT_MAX || lda > INT_MAX || ldb > INT_MAX ||
        ldc > INT_MAX)
        return saga_cuda_host->error(
            SAGA_ERR_UNSUPPORTED,
            "%s: M=%lld N=%lld K=%lld (lda %lld, ldb %lld, ldc %lld) passes the 32-bit integer "
            "range of the BLAS",
            slot, (long long)M, (long long)N, (long long)K, (long long)lda, (long long)ldb,
            (long long)ldc);
    // The row-major contract: a row of C, op(A) and op(B) as stored fits in its leading dimension.
    const int64_t a_cols = trans_a ? M : K, b_cols = trans_b ? K : N;
    const bool product = K > 0 && alpha != 0.0f;
    if (ldc < N || (product && (lda < a_cols || ldb < b_cols)))
        return saga_cuda_host->error(
            SAGA_ERR_INVALID_ARG,
            "%s: leading dimensions lda %lld, ldb %lld, ldc %lld are below the row lengths %lld, "
            "%lld, %lld of A, B and C (M=%lld N=%lld K=%lld, trans_a %d, trans_b %d)",
            slot, (long long)lda, (long long)ldb, (long long)ldc, (long long)a_cols,
            (long long)b_cols, (long long)N, (long long)M, (long long)N, (long long)K, (int)trans_a,
            (int)trans_b);
    cudaStream_t stream;
    saga_status st = saga_cuda_slot_stream(s, slot, &stream);
    if (st < 0)
        return st;
    if (!product)
        return gemm_scale(stream, slot, M, N, beta, C, ldc);

    // The workspace comes out of the budget: the size set at open
    // (saga_cuda_cublas_workspace_bytes, a share of the budget when there is one) when it has room,
    // else what the stream's scratch has if that is at least GEMM_MIN_WORKSPACE_BYTES, else none of
    // ours: cuBLAS then uses its default workspace pool, which it allocates itself, outside the
    // budget (a product slowed or taken from the pool rather than failed).
    size_t workspace_bytes = saga_cuda_cublas_workspace_bytes(s->be);
    saga_cuda_scratch sc;
    void *workspace = nullptr;
    st = workspace_bytes ? saga_cuda_stream_workspace_try(s, slot, workspace_bytes, &sc)
                         : SAGA_ERR_BUDGET;
    if (st >= 0) {
        workspace = sc.work;
    } else if (st == SAGA_ERR_BUDGET) {
        size_t have = 0;
        saga_cuda_stream_work_area(s, &workspace, &have);
        if (have < GEMM_MIN_WORKSPACE_BYTES) {
            workspace = nullptr;
            have = 0;
        }
        workspace_bytes = workspace_bytes && have > workspace_bytes ? workspace_bytes : have;
        st = SAGA_OK;
    } else {
        return st;
    }
    cublasHandle_t h = nullptr;
    st = saga_cuda_cublas_acquire(s->be, slot, &h);
    if (st < 0)
        return st;
    st = gemm_cublas(h, stream, workspace, workspace_bytes, slot, trans_a, trans_b, (int)M, (int)N,
                     (int)K, alpha, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
    saga_cuda_cublas_release(s->be, h);
    return st;
}
