// spmm.cu - Y = alpha A X + beta Y for CSR A (int64 offsets, int32 column indices, f32 values or
// NULL for ones) and row-major f32 X, Y with F columns: GCN's aggregation, forward (A) and
// backward (the transpose, stored as its own CSR, so both directions are non-transposed products).
//
// Two implementations:
// - cuSPARSE's SpMM (CSR_ALG2, row-major dense matrices, deterministic) for matrices with values
//   whose sizes fit its 32-bit indices. cuSPARSE wants one index type for offsets and column
//   indices, so the int64 offsets are first narrowed into the stream's workspace (rows + 1 words,
//   against nnz x F multiply-adds for the product). With beta == 0, Y is cleared first, so NaNs
//   in an unwritten Y never reach the result (BLAS's meaning, which the CPU twin keeps).
// - A kernel of our own, for matrices of implicit ones (cuSPARSE has no such values, and an nnz
//   array of ones would cost memory and bandwidth), past the 32-bit range, for alpha == 0, for
//   products cuSPARSE refuses as not supported (said once per backend) or whose cuSPARSE
//   workspace the device memory budget has no room for, and for every product when
//   SAGA_CUDA_SPMM=own at open. A group of lanes owns a row of A (see saga_cuda_group_shift):
//   its lanes read the X rows that the row's column indices name across consecutive columns
//   (coalesced), each lane keeping up to SPMM_ACC accumulators, so a row's indices are read once
//   per SPMM_ACC * width columns. Every output element adds its row's entries in increasing
//   order, as on the CPU, so the result is deterministic (and differs from the CPU's only where
//   the GPU fuses a multiply-add). Rows are not split: a row with many entries is walked by one
//   group, a cost on power-law graphs that a merge-path split of the entries would remove.
//
// The backend's stats count the products that ran through cuSPARSE and those it refused, so a
// run can tell which SpMM it measured. Any other cuSPARSE failure (an invalid value is a misuse
// of the library by this file, not a shape to step around) is the slot's error.
#include "common.cuh"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>

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

static saga_status spmm_own(cudaStream_t stream, const char *slot, const saga_csr_dev *A, int64_t F,
                            float alpha, const float *X, float beta, float *Y) {
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

// ---- cuSPARSE -----------------------------------------------------------------------------------

#define NARROW_BLOCK 256

static __global__ void __launch_bounds__(NARROW_BLOCK)
    narrow_offsets_kernel(int64_t n, const int64_t *__restrict__ in, int32_t *__restrict__ out) {
    const int64_t stride = (int64_t)gridDim.x * NARROW_BLOCK;
    for (int64_t i = blockIdx.x * (int64_t)NARROW_BLOCK + threadIdx.x; i < n; i += stride)
        out[i] = (int32_t)in[i];
}

// Whether cuSPARSE can take the product: values to read, every count within its 32-bit indices
// (nnz bounds the offsets), the dense matrices' element counts too (their offsets may be 32-bit
// inside), and alpha != 0 (a library may then skip X, where the own kernel lets a NaN in X
// through as the CPU does).
static bool spmm_cusparse_fits(const saga_csr_dev *A, int64_t F, float alpha) {
    return A->values && alpha != 0.0f && A->nnz > 0 && A->n_cols > 0 && A->nnz <= INT_MAX &&
           A->n_rows < INT_MAX && A->n_cols <= INT_MAX && F <= INT_MAX &&
           A->n_rows <= INT_MAX / F && A->n_cols <= INT_MAX / F;
}

// The descriptors of one product, destroyed together.
struct spmm_descs {
    cusparseSpMatDescr_t a = nullptr;
    cusparseDnMatDescr_t x = nullptr, y = nullptr;
    ~spmm_descs() {
        if (a)
            cusparseDestroySpMat(a);
        if (x)
            cusparseDestroyDnMat(x);
        if (y)
            cusparseDestroyDnMat(y);
    }
};

// Narrows A's offsets into the workspace's first off_bytes; the workspace is stream-ordered, so
// the product queued after it reads them.
static saga_status narrow_offsets(cudaStream_t stream, const char *slot, const saga_csr_dev *A,
                                  int32_t *off32) {
    const int64_t n = A->n_rows + 1;
    narrow_offsets_kernel<<<saga_cuda_blocks(n, NARROW_BLOCK), NARROW_BLOCK, 0, stream>>>(
        n, A->offsets, off32);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    return SAGA_OK;
}

// The status cuSPARSE gives for a product it does not implement (a shape or an alignment its
// algorithm does not take), as opposed to a failure. CUSPARSE_STATUS_INVALID_VALUE is not one:
// the arguments are checked to fit before cuSPARSE is asked, so it would mean a misuse here, and
// falling back on it would hide that.
static bool cusparse_refused(cusparseStatus_t err) {
    return err == CUSPARSE_STATUS_NOT_SUPPORTED;
}

// Why a product went to the own kernel after all: cuSPARSE refused it, or the budget has no room
// for its workspace (which comes out of the budget; the own kernel needs none).
enum spmm_fallback { SPMM_NO_FALLBACK, SPMM_REFUSED, SPMM_NO_ROOM };

// The product through cuSPARSE on the locked handle h. *fallback is set, with nothing queued but
// (when cuSPARSE refuses the product itself) the offsets' narrowing and Y's clearing, which the
// own kernel then overwrites, when cuSPARSE refuses the shape or the budget its workspace.
static saga_status spmm_cusparse_locked(saga_stream *s, cusparseHandle_t h, cudaStream_t stream,
                                        const char *slot, const saga_csr_dev *A, int64_t F,
                                        float alpha, const float *X, float beta, float *Y,
                                        spmm_fallback *fallback) {
    const size_t off_bytes = ((size_t)(A->n_rows + 1) * sizeof(int32_t) + 255) / 256 * 256;
    // The descriptors are made on a workspace of the offsets' size, for cuSPARSE to size its own
    // buffer; the workspace may then move as it grows, so the offsets are narrowed into the final
    // one and the descriptor pointed at it.
    saga_cuda_scratch sc;
    saga_status st = saga_cuda_stream_workspace_try(s, slot, off_bytes, &sc);
    if (st == SAGA_ERR_BUDGET)
        *fallback = SPMM_NO_ROOM;
    if (st < 0)
        return st == SAGA_ERR_BUDGET ? SAGA_OK : st;
    SAGA_CUDA_SLOT_RETURN(slot, cusparseSetStream(h, stream));
    spmm_descs d;
    SAGA_CUDA_SLOT_RETURN(slot, cusparseCreateCsr(&d.a, A->n_rows, A->n_cols, A->nnz, sc.work,
                                                  const_cast<int32_t *>(A->indices),
                                                  const_cast<float *>(A->values),
                                                  CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                                  CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
    SAGA_CUDA_SLOT_RETURN(slot, cusparseCreateDnMat(&d.x, A->n_cols, F, F, const_cast<float *>(X),
                                                    CUDA_R_32F, CUSPARSE_ORDER_ROW));
    SAGA_CUDA_SLOT_RETURN(
        slot, cusparseCreateDnMat(&d.y, A->n_rows, F, F, Y, CUDA_R_32F, CUSPARSE_ORDER_ROW));
    const cusparseOperation_t nt = CUSPARSE_OPERATION_NON_TRANSPOSE;
    size_t work_bytes = 0;
    const char *call = "cusparseSpMM_bufferSize(CUSPARSE_SPMM_CSR_ALG2)";
    cusparseStatus_t err = cusparseSpMM_bufferSize(h, nt, nt, &alpha, d.a, d.x, &beta, d.y,
                                                   CUDA_R_32F, CUSPARSE_SPMM_CSR_ALG2, &work_bytes);
    if (err == CUSPARSE_STATUS_SUCCESS) {
        if (work_bytes > SIZE_MAX - off_bytes)
            return saga_cuda_host->error(SAGA_ERR_OUT_OF_MEMORY,
                                         "%s: cuSPARSE asks for a workspace of %zu bytes", slot,
                                         work_bytes);
        st = saga_cuda_stream_workspace_try(s, slot, off_bytes + work_bytes, &sc);
        if (st == SAGA_ERR_BUDGET)
            *fallback = SPMM_NO_ROOM;
        if (st < 0)
            return st == SAGA_ERR_BUDGET ? SAGA_OK : st;
        int32_t *off32 = static_cast<int32_t *>(sc.work);
        st = narrow_offsets(stream, slot, A, off32);
        if (st < 0)
            return st;
        SAGA_CUDA_SLOT_RETURN(slot,
                              cusparseCsrSetPointers(d.a, off32, const_cast<int32_t *>(A->indices),
                                                     const_cast<float *>(A->values)));
        if (beta == 0.0f)
            SAGA_CUDA_SLOT_RETURN(
                slot, cudaMemsetAsync(Y, 0, (size_t)A->n_rows * F * sizeof(float), stream));
        call = "cusparseSpMM(CUSPARSE_SPMM_CSR_ALG2)";
        err = cusparseSpMM(h, nt, nt, &alpha, d.a, d.x, &beta, d.y, CUDA_R_32F,
                           CUSPARSE_SPMM_CSR_ALG2,
                           work_bytes ? static_cast<char *>(sc.work) + off_bytes : nullptr);
    }
    if (cusparse_refused(err)) {
        cudaGetLastError();
        char why[160];
        snprintf(why, sizeof why, "cuSPARSE refused a %lld x %lld product with %lld columns (%s)",
                 (long long)A->n_rows, (long long)A->n_cols, (long long)F,
                 cusparseGetErrorName(err));
        saga_cuda_spmm_note_refusal(s->be, why);
        *fallback = SPMM_REFUSED;
        return SAGA_OK;
    }
    if (err != CUSPARSE_STATUS_SUCCESS)
        return saga_cuda_slot_error(slot, err, call, __FILE__, __LINE__);
    return SAGA_OK;
}

static saga_status spmm_cusparse(saga_stream *s, cudaStream_t stream, const char *slot,
                                 const saga_csr_dev *A, int64_t F, float alpha, const float *X,
                                 float beta, float *Y, spmm_fallback *fallback) {
    cusparseHandle_t h = nullptr;
    saga_status st = saga_cuda_cusparse_acquire(s->be, slot, &h);
    if (st < 0)
        return st;
    st = spmm_cusparse_locked(s, h, stream, slot, A, F, alpha, X, beta, Y, fallback);
    saga_cuda_cusparse_release(s->be, h);
    return st;
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
    if (saga_cuda_spmm_cusparse(s->be) && spmm_cusparse_fits(A, F, alpha)) {
        spmm_fallback fallback = SPMM_NO_FALLBACK;
        st = spmm_cusparse(s, stream, slot, A, F, alpha, X, beta, Y, &fallback);
        if (st < 0)
            return st;
        // counted from any thread that issues products (the backend's stats read them)
        if (fallback != SPMM_NO_ROOM)
            __atomic_fetch_add(fallback == SPMM_REFUSED ? &s->be->spmm_cusparse_refused
                                                        : &s->be->spmm_cusparse,
                               1, __ATOMIC_RELAXED);
        if (fallback == SPMM_NO_FALLBACK)
            return SAGA_OK;
    }
    return spmm_own(stream, slot, A, F, alpha, X, beta, Y);
}
