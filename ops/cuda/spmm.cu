// spmm.cu - Y = alpha A X + beta Y for CSR A (int64 offsets, int32 column indices, f32 values or
// NULL for ones) and row-major f32 X, Y with F columns: GCN's aggregation, forward (A) and
// backward (the transpose, stored as its own CSR, so both directions are non-transposed products).
//
// Two implementations:
// - cuSPARSE's SpMM, when the backend was opened with SAGA_CUDA_SPMM=cusparse (CSR_ALG2, or
//   cusparse-alg1 / -alg3; row-major dense matrices), for matrices with values whose sizes fit
//   its 32-bit indices. On an H200 (bench/README.md) CSR_ALG2 and CSR_ALG1 gave results that
//   differ from run to run in the last bits, so it is not the default. cuSPARSE wants one index
//   type for offsets and column indices, so the int64 offsets are first narrowed into the stream's
//   workspace (rows + 1 words, against nnz x F multiply-adds for the product). With beta == 0, Y is
//   cleared first, so NaNs in an unwritten Y never reach the result (BLAS's meaning, which the CPU
//   twin keeps). The descriptors and the workspace cuSPARSE asks for are kept per backend for the
//   last products' arrays and shapes (spmm_plan); the offsets are narrowed at every call, for the
//   arrays may hold other content at the same address (a streamed part's tile in a reused buffer).
// - A kernel of our own: the default for every product, and with cuSPARSE chosen, for matrices
//   of implicit ones (cuSPARSE has no such values, and an nnz array of ones would cost memory and
//   bandwidth), past the 32-bit range, for alpha == 0, for products cuSPARSE refuses as not
//   supported (said once per backend) or whose cuSPARSE workspace the device memory budget has
//   no room for. A group of lanes owns a row of A (see saga_cuda_group_shift):
//   its lanes read the X rows that the row's column indices name across consecutive columns
//   (coalesced), each lane keeping up to SPMM_ACC accumulators, so a row's indices are read once
//   per SPMM_ACC * width columns. Where F % 4 == 0 and X and Y are 16-byte aligned, each lane
//   reads and writes four consecutive columns at once (16-byte accesses, and up to four times
//   the rows per block for narrow F); the sums are the same. A row of more than SPMM_SPLIT entries
//   (power-law graphs' hubs), which one group would still walk long after the other rows are
//   done, is left by its group and taken by the whole block next: its entries are cut at fixed
//   points into SPMM_BLOCK / w pieces (w the lanes per row without vectors, so the cut depends on F
//   alone), a group of w lanes sums each, and the pieces are added in order through shared memory.
//   So an output element adds its row's entries in increasing order (in increasing order within
//   each piece, then the pieces in order, for a split row), with each multiply-add written out
//   (fmaf): the result has the same bits in every thread order, on every GPU, aligned or not, and
//   differs from the CPU's by rounding alone. The price: a barrier per set of rows a block takes
//   (to learn of their long rows) and two per SPMM_ACC * w columns of a split row, and 4 KiB of
//   shared memory a block. A split row stays within one block (one SM); a row much longer than a
//   block can absorb would need its pieces spread over blocks, with a second pass to add them.
//
// The backend's stats count the products that ran through cuSPARSE and those it refused, so a
// run can tell which SpMM it measured. Any other cuSPARSE failure (an invalid value is a misuse
// of the library by this file, not a shape to step around) is the slot's error.
#include "common.cuh"

#include <limits.h>
#include <new>
#include <stdint.h>
#include <stdio.h>

#define SPMM_BLOCK 256
#define SPMM_ACC 4     // accumulators per lane in the scalar walks, columns width apart
#define SPMM_VACC 2    // four-float vectors per lane in the vector walk
#define SPMM_SPLIT 128 // rows with more entries are split across the block

// Four consecutive floats of a row, one 16-byte access.
struct alignas(16) spmm_f4 {
    float x, y, z, w;
};

// acc plus a term: v x (one rounding) with values, x with ones.
template <bool VALUES> __device__ __forceinline__ float spmm_mad(float v, float x, float acc) {
    return VALUES ? fmaf(v, x, acc) : acc + x;
}

// acc[t] = the sum over entries k0 .. k1 - 1, in order, of their terms in column c + t width (a
// column past F left at 0).
template <bool VALUES>
__device__ __forceinline__ void spmm_sums(float acc[SPMM_ACC], int64_t k0, int64_t k1, int64_t F,
                                          int64_t c, int width, const int32_t *__restrict__ indices,
                                          const float *__restrict__ values,
                                          const float *__restrict__ X) {
#pragma unroll
    for (int t = 0; t < SPMM_ACC; t++)
        acc[t] = 0.0f;
    for (int64_t k = k0; k < k1; k++) {
        const float *xr = X + (int64_t)indices[k] * F + c;
        const float v = VALUES ? values[k] : 1.0f;
#pragma unroll
        for (int t = 0; t < SPMM_ACC; t++)
            if (c + t * width < F)
                acc[t] = spmm_mad<VALUES>(v, xr[t * width], acc[t]);
    }
}

// An element of Y from its row's sum acc (Y unread without READ_Y).
template <bool READ_Y>
__device__ __forceinline__ float spmm_out(float alpha, float acc, float beta, const float *y) {
    return READ_Y ? fmaf(alpha, acc, beta * *y) : alpha * acc;
}

// Row i of Y by a group of width lanes, columns across the lanes (lane, + width, ...).
template <bool VALUES, bool READ_Y>
__device__ __forceinline__ void
spmm_row(int64_t i, int64_t k0, int64_t k1, int64_t F, int width, int lane,
         const int32_t *__restrict__ indices, const float *__restrict__ values, float alpha,
         const float *__restrict__ X, float beta, float *__restrict__ Y) {
    float *yi = Y + i * F;
    for (int64_t c0 = 0; c0 < F; c0 += (int64_t)SPMM_ACC * width) {
        const int64_t c = c0 + lane;
        float acc[SPMM_ACC];
        spmm_sums<VALUES>(acc, k0, k1, F, c, width, indices, values, X);
#pragma unroll
        for (int t = 0; t < SPMM_ACC; t++) {
            const int64_t j = c + t * width;
            if (j < F)
                yi[j] = spmm_out<READ_Y>(alpha, acc[t], beta, yi + j);
        }
    }
}

// spmm_row with 16-byte loads and stores: each lane four consecutive columns per vector (F % 4
// == 0, X and Y 16-byte aligned). The same operations on each element as spmm_row.
template <bool VALUES, bool READ_Y>
__device__ __forceinline__ void
spmm_row_vec(int64_t i, int64_t k0, int64_t k1, int64_t F, int width, int lane,
             const int32_t *__restrict__ indices, const float *__restrict__ values, float alpha,
             const float *__restrict__ X, float beta, float *__restrict__ Y) {
    const int64_t V = F / 4;
    const spmm_f4 *X4 = reinterpret_cast<const spmm_f4 *>(X);
    spmm_f4 *yi = reinterpret_cast<spmm_f4 *>(Y + i * F);
    for (int64_t q0 = 0; q0 < V; q0 += (int64_t)SPMM_VACC * width) {
        const int64_t q = q0 + lane;
        spmm_f4 acc[SPMM_VACC];
#pragma unroll
        for (int t = 0; t < SPMM_VACC; t++)
            acc[t] = spmm_f4{0.0f, 0.0f, 0.0f, 0.0f};
        for (int64_t k = k0; k < k1; k++) {
            const spmm_f4 *xr = X4 + (int64_t)indices[k] * V + q;
            const float v = VALUES ? values[k] : 1.0f;
#pragma unroll
            for (int t = 0; t < SPMM_VACC; t++)
                if (q + t * width < V) {
                    const spmm_f4 x = xr[t * width];
                    acc[t].x = spmm_mad<VALUES>(v, x.x, acc[t].x);
                    acc[t].y = spmm_mad<VALUES>(v, x.y, acc[t].y);
                    acc[t].z = spmm_mad<VALUES>(v, x.z, acc[t].z);
                    acc[t].w = spmm_mad<VALUES>(v, x.w, acc[t].w);
                }
        }
#pragma unroll
        for (int t = 0; t < SPMM_VACC; t++)
            if (q + t * width < V) {
                spmm_f4 *y = yi + q + t * width;
                spmm_f4 o;
                const spmm_f4 old = READ_Y ? *y : spmm_f4{0.0f, 0.0f, 0.0f, 0.0f};
                o.x = spmm_out<READ_Y>(alpha, acc[t].x, beta, &old.x);
                o.y = spmm_out<READ_Y>(alpha, acc[t].y, beta, &old.y);
                o.z = spmm_out<READ_Y>(alpha, acc[t].z, beta, &old.z);
                o.w = spmm_out<READ_Y>(alpha, acc[t].w, beta, &old.w);
                *y = o;
            }
    }
}

// Row r, longer than SPMM_SPLIT, by the whole block: its entries in SPMM_BLOCK >> shift pieces
// cut at fixed points (piece g from k0 + len g / pieces), a group of 1 << shift lanes each
// (columns across the lanes, as spmm_row), whose sums the block adds in piece order through
// shared memory. Every thread of the block calls it, at the same point (it holds barriers).
template <bool VALUES, bool READ_Y>
__device__ void spmm_long_row(int64_t r, int64_t F, int shift, const int64_t *__restrict__ offsets,
                              const int32_t *__restrict__ indices, const float *__restrict__ values,
                              float alpha, const float *__restrict__ X, float beta,
                              float *__restrict__ Y, float *pieces) {
    const int width = 1 << shift, lane = threadIdx.x & (width - 1), g = threadIdx.x >> shift;
    const int n_pieces = SPMM_BLOCK >> shift, cols = SPMM_ACC * width;
    const int64_t k0 = offsets[r], len = offsets[r + 1] - k0;
    const int64_t kb = k0 + len * g / n_pieces, ke = k0 + len * (g + 1) / n_pieces;
    float *yr = Y + r * F;
    for (int64_t c0 = 0; c0 < F; c0 += cols) {
        const int64_t c = c0 + lane;
        float acc[SPMM_ACC];
        spmm_sums<VALUES>(acc, kb, ke, F, c, width, indices, values, X);
#pragma unroll
        for (int t = 0; t < SPMM_ACC; t++)
            pieces[g * cols + lane + t * width] = acc[t];
        __syncthreads();
        const int col = (int)threadIdx.x;
        const int64_t j = c0 + col;
        if (col < cols && j < F) {
            float sum = pieces[col];
            for (int p = 1; p < n_pieces; p++)
                sum += pieces[p * cols + col];
            yr[j] = spmm_out<READ_Y>(alpha, sum, beta, yr + j);
        }
        __syncthreads();
    }
}

// A group of 1 << shift lanes per row (see saga_cuda_group_shift; of F / 4 vectors with VEC),
// SPMM_BLOCK >> shift consecutive rows per block at a time. The rows longer than SPMM_SPLIT are
// left out by their groups and done next by the whole block (spmm_long_row, its groups of
// 1 << split_shift lanes, split_shift from F whatever VEC, so that the pieces, and so the bits,
// do not depend on the alignment).
template <bool VALUES, bool READ_Y, bool VEC>
static __global__ void __launch_bounds__(SPMM_BLOCK)
    spmm_f32_kernel(int64_t n_rows, int64_t F, int shift, int split_shift,
                    const int64_t *__restrict__ offsets, const int32_t *__restrict__ indices,
                    const float *__restrict__ values, float alpha, const float *__restrict__ X,
                    float beta, float *__restrict__ Y) {
    __shared__ float pieces[SPMM_ACC * SPMM_BLOCK];
    // each warp's long rows, by the lane of their groups' first lane; two sets, so that a warp
    // writing the next rows' cannot overwrite those that a slower warp still reads
    __shared__ unsigned long_rows[2][SPMM_BLOCK / 32];
    const int width = 1 << shift, lane = threadIdx.x & (width - 1);
    const int rows = SPMM_BLOCK >> shift;
    int set = 0;
    for (int64_t base = blockIdx.x * (int64_t)rows; base < n_rows;
         base += (int64_t)gridDim.x * rows, set ^= 1) {
        const int64_t i = base + (threadIdx.x >> shift);
        bool split = false;
        if (i < n_rows) {
            const int64_t k0 = offsets[i], k1 = offsets[i + 1];
            split = k1 - k0 > SPMM_SPLIT;
            if (!split && VEC)
                spmm_row_vec<VALUES, READ_Y>(i, k0, k1, F, width, lane, indices, values, alpha, X,
                                             beta, Y);
            else if (!split)
                spmm_row<VALUES, READ_Y>(i, k0, k1, F, width, lane, indices, values, alpha, X, beta,
                                         Y);
        }
        const unsigned mine = __ballot_sync(0xffffffffu, split && lane == 0);
        if ((threadIdx.x & 31) == 0)
            long_rows[set][threadIdx.x >> 5] = mine;
        __syncthreads();
        for (int w = 0; w < SPMM_BLOCK / 32; w++)
            for (unsigned m = long_rows[set][w]; m; m &= m - 1) {
                const int64_t r = base + ((w * 32 + __ffs((int)m) - 1) >> shift);
                spmm_long_row<VALUES, READ_Y>(r, F, split_shift, offsets, indices, values, alpha, X,
                                              beta, Y, pieces);
            }
    }
}

template <bool VALUES, bool READ_Y, bool VEC>
static void spmm_launch(cudaStream_t stream, const saga_csr_dev *A, int64_t F, int shift,
                        int split_shift, float alpha, const float *X, float beta, float *Y) {
    spmm_f32_kernel<VALUES, READ_Y, VEC>
        <<<saga_cuda_group_blocks(A->n_rows, shift, SPMM_BLOCK), SPMM_BLOCK, 0, stream>>>(
            A->n_rows, F, shift, split_shift, A->offsets, A->indices, A->values, alpha, X, beta, Y);
}

template <bool VALUES, bool READ_Y>
static void spmm_launch_vec(cudaStream_t stream, const saga_csr_dev *A, int64_t F, float alpha,
                            const float *X, float beta, float *Y) {
    const int split_shift = saga_cuda_group_shift(F);
    const bool vec =
        F % 4 == 0 && (reinterpret_cast<uintptr_t>(X) | reinterpret_cast<uintptr_t>(Y)) % 16 == 0;
    if (vec)
        spmm_launch<VALUES, READ_Y, true>(stream, A, F, saga_cuda_group_shift(F / 4), split_shift,
                                          alpha, X, beta, Y);
    else
        spmm_launch<VALUES, READ_Y, false>(stream, A, F, split_shift, split_shift, alpha, X, beta,
                                           Y);
}

static saga_status spmm_own(cudaStream_t stream, const char *slot, const saga_csr_dev *A, int64_t F,
                            float alpha, const float *X, float beta, float *Y) {
    const bool vals = A->values != NULL, read_y = beta != 0.0f;
    if (vals && read_y)
        spmm_launch_vec<true, true>(stream, A, F, alpha, X, beta, Y);
    else if (vals)
        spmm_launch_vec<true, false>(stream, A, F, alpha, X, beta, Y);
    else if (read_y)
        spmm_launch_vec<false, true>(stream, A, F, alpha, X, beta, Y);
    else
        spmm_launch_vec<false, false>(stream, A, F, alpha, X, beta, Y);
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

// The descriptors of a product and the workspace cuSPARSE asked for it, kept per backend for the
// SPMM_PLANS products last made (the least recently used replaced): a product of the same arrays
// and shape points them at this call's offsets, X and Y (cusparseCsrSetPointers,
// cusparseDnMatSetValues) instead of making them and asking for the workspace again. They hold
// pointers alone, set at each call, so a key whose arrays now hold other content is no harm.
#define SPMM_PLANS 16

struct spmm_plan {
    const void *off, *idx, *val;
    int64_t rows, cols, nnz, F;
    bool beta0;
    cusparseSpMatDescr_t a;
    cusparseDnMatDescr_t x, y;
    size_t work;
    uint64_t used;
};

struct spmm_plans {
    spmm_plan p[SPMM_PLANS];
    int n;
    uint64_t clock;
};

static void spmm_plan_destroy(spmm_plan *p) {
    if (p->a)
        cusparseDestroySpMat(p->a);
    if (p->x)
        cusparseDestroyDnMat(p->x);
    if (p->y)
        cusparseDestroyDnMat(p->y);
    p->a = nullptr;
    p->x = p->y = nullptr;
}

void saga_cuda_spmm_plans_free(void *plans) {
    spmm_plans *ps = static_cast<spmm_plans *>(plans);
    if (!ps)
        return;
    for (int i = 0; i < ps->n; i++)
        spmm_plan_destroy(&ps->p[i]);
    delete ps;
}

static bool spmm_plan_is(const spmm_plan *p, const spmm_plan *key) {
    return p->off == key->off && p->idx == key->idx && p->val == key->val && p->rows == key->rows &&
           p->cols == key->cols && p->nnz == key->nnz && p->F == key->F && p->beta0 == key->beta0;
}

// Makes key's descriptors (on the offsets' 64-bit array, a valid device address until the call
// points them at the narrowed copy) and asks for its workspace; *err is cuSPARSE's status, the
// plan destroyed unless it succeeded.
static saga_status spmm_plan_make(cusparseHandle_t h, const char *slot, const saga_csr_dev *A,
                                  spmm_plan *p, float alpha, float beta, cusparseSpMMAlg_t alg,
                                  cusparseStatus_t *err) {
    const cusparseStatus_t made[3] = {
        cusparseCreateCsr(&p->a, A->n_rows, A->n_cols, A->nnz, const_cast<int64_t *>(A->offsets),
                          const_cast<int32_t *>(A->indices), const_cast<float *>(A->values),
                          CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO,
                          CUDA_R_32F),
        cusparseCreateDnMat(&p->x, A->n_cols, p->F, p->F, const_cast<int64_t *>(A->offsets),
                            CUDA_R_32F, CUSPARSE_ORDER_ROW),
        cusparseCreateDnMat(&p->y, A->n_rows, p->F, p->F, const_cast<int64_t *>(A->offsets),
                            CUDA_R_32F, CUSPARSE_ORDER_ROW)};
    for (cusparseStatus_t m : made)
        if (m != CUSPARSE_STATUS_SUCCESS) {
            spmm_plan_destroy(p);
            return saga_cuda_slot_error(slot, m, "cusparseCreateCsr / cusparseCreateDnMat",
                                        __FILE__, __LINE__);
        }
    const cusparseOperation_t nt = CUSPARSE_OPERATION_NON_TRANSPOSE;
    *err = cusparseSpMM_bufferSize(h, nt, nt, &alpha, p->a, p->x, &beta, p->y, CUDA_R_32F, alg,
                                   &p->work);
    if (*err != CUSPARSE_STATUS_SUCCESS)
        spmm_plan_destroy(p);
    return SAGA_OK;
}

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

// cuSPARSE refused the product: said once, and the own kernel takes it (*fallback).
static void spmm_refused(saga_stream *s, const saga_csr_dev *A, int64_t F, cusparseStatus_t err,
                         spmm_fallback *fallback) {
    cudaGetLastError();
    char why[160];
    snprintf(why, sizeof why, "cuSPARSE refused a %lld x %lld product with %lld columns (%s)",
             (long long)A->n_rows, (long long)A->n_cols, (long long)F, cusparseGetErrorName(err));
    saga_cuda_spmm_note_refusal(s->be, why);
    *fallback = SPMM_REFUSED;
}

// The product through cuSPARSE on the locked handle h, with the backend's plan for it (made now
// when there is none). *fallback is set, with nothing queued but (when cuSPARSE refuses the
// product itself) the offsets' narrowing and Y's clearing, which the own kernel then overwrites,
// when cuSPARSE refuses the shape or the budget its workspace.
static saga_status spmm_cusparse_locked(saga_stream *s, cusparseHandle_t h, cudaStream_t stream,
                                        const char *slot, const saga_csr_dev *A, int64_t F,
                                        float alpha, const float *X, float beta, float *Y,
                                        spmm_fallback *fallback) {
    spmm_plans *&ps = *reinterpret_cast<spmm_plans **>(saga_cuda_spmm_plans(s->be));
    if (!ps && !(ps = new (std::nothrow) spmm_plans()))
        return saga_cuda_host->error(SAGA_ERR_OUT_OF_MEMORY, "%s: out of memory for a plan", slot);
    const spmm_plan key = {A->offsets,   A->indices, A->values, A->n_rows, A->n_cols, A->nnz, F,
                           beta == 0.0f, nullptr,    nullptr,   nullptr,   0,         0};
    spmm_plan *p = nullptr;
    for (int i = 0; i < ps->n && !p; i++)
        if (spmm_plan_is(&ps->p[i], &key))
            p = &ps->p[i];
    const int which = saga_cuda_spmm_alg(s->be);
    const cusparseSpMMAlg_t alg = which == 1   ? CUSPARSE_SPMM_CSR_ALG1
                                  : which == 3 ? CUSPARSE_SPMM_CSR_ALG3
                                               : CUSPARSE_SPMM_CSR_ALG2;
    SAGA_CUDA_SLOT_RETURN(slot, cusparseSetStream(h, stream));
    if (!p) {
        spmm_plan made = key;
        cusparseStatus_t err = CUSPARSE_STATUS_SUCCESS;
        saga_status st = spmm_plan_make(h, slot, A, &made, alpha, beta, alg, &err);
        if (st < 0)
            return st;
        if (cusparse_refused(err)) {
            spmm_refused(s, A, F, err, fallback);
            return SAGA_OK;
        }
        if (err != CUSPARSE_STATUS_SUCCESS)
            return saga_cuda_slot_error(slot, err, "cusparseSpMM_bufferSize", __FILE__, __LINE__);
        if (ps->n < SPMM_PLANS) {
            p = &ps->p[ps->n++];
        } else {
            p = &ps->p[0];
            for (int i = 1; i < SPMM_PLANS; i++)
                if (ps->p[i].used < p->used)
                    p = &ps->p[i];
            spmm_plan_destroy(p);
        }
        *p = made;
    }
    p->used = ++ps->clock;
    const size_t off_bytes = ((size_t)(A->n_rows + 1) * sizeof(int32_t) + 255) / 256 * 256;
    if (p->work > SIZE_MAX - off_bytes)
        return saga_cuda_host->error(SAGA_ERR_OUT_OF_MEMORY,
                                     "%s: cuSPARSE asks for a workspace of %zu bytes", slot,
                                     p->work);
    saga_cuda_scratch sc;
    saga_status st = saga_cuda_stream_workspace_try(s, slot, off_bytes + p->work, &sc);
    if (st == SAGA_ERR_BUDGET)
        *fallback = SPMM_NO_ROOM;
    if (st < 0)
        return st == SAGA_ERR_BUDGET ? SAGA_OK : st;
    int32_t *off32 = static_cast<int32_t *>(sc.work);
    st = narrow_offsets(stream, slot, A, off32);
    if (st < 0)
        return st;
    SAGA_CUDA_SLOT_RETURN(slot,
                          cusparseCsrSetPointers(p->a, off32, const_cast<int32_t *>(A->indices),
                                                 const_cast<float *>(A->values)));
    SAGA_CUDA_SLOT_RETURN(slot, cusparseDnMatSetValues(p->x, const_cast<float *>(X)));
    SAGA_CUDA_SLOT_RETURN(slot, cusparseDnMatSetValues(p->y, Y));
    if (beta == 0.0f)
        SAGA_CUDA_SLOT_RETURN(slot,
                              cudaMemsetAsync(Y, 0, (size_t)A->n_rows * F * sizeof(float), stream));
    const cusparseOperation_t nt = CUSPARSE_OPERATION_NON_TRANSPOSE;
    const cusparseStatus_t err =
        cusparseSpMM(h, nt, nt, &alpha, p->a, p->x, &beta, p->y, CUDA_R_32F, alg,
                     p->work ? static_cast<char *>(sc.work) + off_bytes : nullptr);
    if (cusparse_refused(err)) {
        spmm_refused(s, A, F, err, fallback);
        return SAGA_OK;
    }
    if (err != CUSPARSE_STATUS_SUCCESS)
        return saga_cuda_slot_error(slot, err, "cusparseSpMM", __FILE__, __LINE__);
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
