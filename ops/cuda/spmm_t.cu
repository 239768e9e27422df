// spmm_t.cu - Y = alpha A^T X + beta Y for CSR A without a stored transpose: the gradient of the
// dense factor of a sparse x dense product (dW = X^T dH for sparse input features).
//
// Rows of A that share a column meet in the same row of Y, and Y is often small (input features x
// hidden width), so lanes that each own rows of A and add into Y would need an atomic per entry
// and column on a few thousand addresses, contended by every SM and summed in whatever order the
// hardware picks. Instead A's entries, in storage order, are cut into C chunks of len consecutive
// entries (a long row falls into several), a group of lanes sums one chunk's terms into a partial
// P_c of Y of its own, its lanes owning disjoint columns (no atomics), and a second pass adds the
// partials into Y:
//
//   P_c[r][j] = the terms of the chunk's entries k in column r, in increasing k, each added by
//               p = fmaf(alpha * a_k, X[row of k][j], p) from p = 0
//   Y[r][j]   = ((fmaf(beta, Y[r][j], P_0[r][j]) + P_1[r][j]) + ...) + P_{C-1}[r][j]
//
// with P_0 alone for beta == 0, so that NaNs in an unwritten Y never reach the result; alpha == 0
// still multiplies (a NaN in X shows, as on the CPU); without entries Y = beta Y, or 0. C and len
// come from nnz, A's columns and F alone (spmm_t_plan), never from the device, and each
// multiply-add is written out, so every thread and block order, every GPU and every path below
// give the same bits. The CPU adds the terms one by one onto beta Y in increasing row order: the
// two differ by rounding alone.
//
// C = nnz / SPMM_T_CHUNK_MIN, at most nnz / A's columns (so that the partials, each cleared,
// written and read once, cost no more traffic than the terms), SPMM_T_MAX_CHUNKS (groups enough to
// fill a large GPU) and SPMM_T_WORK_FLOATS / (A's columns x F), at least 1; len = ceil(nnz / C),
// and C then the chunks that len makes. The partials take C x A's columns x F floats of the
// stream's workspace (at most 32 MiB unless one partial is larger). A group sums its chunk's
// terms for a slice of Y's rows (skipping the entries of other columns of A), kept
// - in shared memory when Y fits in at most SPMM_T_SHARED_SLICES slices of SPMM_T_SHARED_FLOATS
//   (a block holds as many groups as slices fit): a shared-memory read and write per term, then
//   a copy to the workspace;
// - in the workspace otherwise, Y in as many slices (up to SPMM_T_MAX_SLICES) as make
//   SPMM_T_MIN_GROUPS groups with the chunks: a global read and write per term, uncontended, in
//   L2 while the partials fit there.
// Every slice reads all of its chunk's entries. The slices change which lane adds a term, never
// the order of an element's sum.
// Under a device memory budget the workspace grows only within the share of the budget kept for
// a stream's work (the cuBLAS workspace's, none below 4 MiB of budget; the planners count on the
// rest), and the budget may refuse even that: the partials are then made in batches that fit the
// workspace the stream has, each batch added into Y (the sum so far) before the next. When not
// even one partial fits there, a block (one group) owns a tile of Y that fits shared memory and
// walks every chunk in turn, adding each chunk's partial of the tile into Y: every tile reads all
// of A and the grid has only as many blocks as tiles, so it is slow, but it needs no workspace
// and gives the same bits.
#include "common.cuh"

#include <stdint.h>

#define SPMM_T_BLOCK 256
#define SPMM_T_ACC 4              // columns per lane per walk over a chunk
#define SPMM_T_AHEAD 8            // entries whose columns and values a lane reads at once
#define SPMM_T_SHARED_FLOATS 8192 // 32 KiB of static shared memory per block
#define SPMM_T_CHUNK_MIN 256      // entries per chunk, at least
#define SPMM_T_MAX_CHUNKS 4096
#define SPMM_T_WORK_FLOATS (8ll << 20) // 32 MiB of partials, at most (unless one is larger)
#define SPMM_T_SHARED_SLICES 4 // slices of Y's rows that the shared-memory partials take, at most
#define SPMM_T_MIN_GROUPS 4096 // chunks x slices of Y for partials in the workspace, up to
#define SPMM_T_MAX_SLICES 64   // slices

// The product's shape and chunks. The kernels take the arrays apart, as pointer arguments (the
// CUDA simulator checks those).
struct spmm_t_shape {
    int64_t n_rows, n_cols, nnz, F;
    int64_t len; // entries per chunk
    float alpha;
    int shift; // lanes per group: 1 << shift
};

// What a group's walk over a chunk reads.
struct spmm_t_in {
    spmm_t_shape sh;
    const int64_t *offsets;
    const int32_t *indices;
    const float *values; // NULL: ones
    const float *X;
};

static __global__ void __launch_bounds__(SPMM_T_BLOCK)
    spmm_t_scale_kernel(int64_t n, float beta, float *__restrict__ Y) {
    for (int64_t i = blockIdx.x * (int64_t)SPMM_T_BLOCK + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * SPMM_T_BLOCK)
        Y[i] = beta == 0.0f ? 0.0f : beta * Y[i];
}

// The row of A that holds entry k < nnz: the last row whose offset is at most k (the rows before
// it may be empty).
__device__ __forceinline__ int64_t spmm_t_row_of(const int64_t *__restrict__ offsets,
                                                 int64_t n_rows, int64_t k) {
    int64_t lo = 0, hi = n_rows; // offsets[lo] <= k < offsets[hi]
    while (hi - lo > 1) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (offsets[mid] <= k)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

// The calling lane's SPMM_T_ACC columns c, c + width, ... of row i of X (0 from j1 on).
__device__ __forceinline__ void spmm_t_load_x(const spmm_t_in &in, int64_t i, int64_t c, int64_t j1,
                                              int width, float *x) {
    const float *xi = in.X + i * in.sh.F;
#pragma unroll
    for (int t = 0; t < SPMM_T_ACC; t++)
        x[t] = c + t * width < j1 ? xi[c + t * width] : 0.0f;
}

// Adds the terms of entries [k0, k1) whose column r of A lies in [r0, r1) into P, element (r, j)
// at P[(r - r0) * ldp + j - j0], for the columns j of [j0, j1) that are the calling lane's (j0 +
// lane, + width, ...): entry by entry in increasing order, each element by this lane alone. X's
// row is held in registers while the entries stay in it.
// The entries' columns and values are read SPMM_T_AHEAD at a time before any of their terms is
// added (the additions write P, which the compiler cannot tell apart from A's arrays), so that a
// lane waits for one round of loads per SPMM_T_AHEAD entries rather than one per entry; the terms
// are still added one by one in increasing order.
template <bool VALUES>
__device__ void spmm_t_add_chunk(const spmm_t_in &in, int64_t k0, int64_t k1, int64_t r0,
                                 int64_t r1, int64_t j0, int64_t j1, float *P, int64_t ldp,
                                 int lane, int width) {
    const int64_t i0 = spmm_t_row_of(in.offsets, in.sh.n_rows, k0);
    for (int64_t c = j0 + lane; c < j1; c += (int64_t)SPMM_T_ACC * width) {
        int64_t i = i0, next = in.offsets[i0 + 1];
        float x[SPMM_T_ACC];
        spmm_t_load_x(in, i, c, j1, width, x);
        for (int64_t kb = k0; kb < k1; kb += SPMM_T_AHEAD) {
            int32_t rs[SPMM_T_AHEAD];
            float vs[SPMM_T_AHEAD];
#pragma unroll
            for (int u = 0; u < SPMM_T_AHEAD; u++) {
                rs[u] = kb + u < k1 ? in.indices[kb + u] : -1;
                vs[u] = VALUES && kb + u < k1 ? in.values[kb + u] : 1.0f;
            }
#pragma unroll
            for (int u = 0; u < SPMM_T_AHEAD; u++) {
                const int64_t k = kb + u;
                if (k >= k1)
                    break;
                if (k >= next) {
                    do
                        next = in.offsets[++i + 1];
                    while (k >= next);
                    spmm_t_load_x(in, i, c, j1, width, x);
                }
                const int64_t r = rs[u];
                if (r < r0 || r >= r1)
                    continue;
                const float coef = VALUES ? in.sh.alpha * vs[u] : in.sh.alpha;
                float *p = P + (r - r0) * ldp + (c - j0);
#pragma unroll
                for (int t = 0; t < SPMM_T_ACC; t++)
                    if (c + t * width < j1)
                        p[t * width] = fmaf(coef, x[t], p[t * width]);
            }
        }
    }
}

// Zeros the calling lane's columns of a rows x cols partial (row stride ld).
__device__ __forceinline__ void spmm_t_clear(float *P, int64_t rows, int64_t cols, int64_t ld,
                                             int lane, int width) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = lane; j < cols; j += width)
            P[r * ld + j] = 0.0f;
}

// The partials of chunks [c_first, c_first + n_batch) into work (n_batch partials of n_cols x F):
// a group per chunk and slice of slice_rows rows of Y, the slices of a chunk in consecutive
// groups (they read the same entries). SHARED: the slice is summed in shared memory, then copied.
template <bool VALUES, bool SHARED>
static __global__ void __launch_bounds__(SPMM_T_BLOCK)
    spmm_t_partials_kernel(spmm_t_shape sh, const int64_t *__restrict__ offsets,
                           const int32_t *__restrict__ indices, const float *__restrict__ values,
                           const float *__restrict__ X, int64_t c_first, int64_t n_batch,
                           int64_t n_slices, int64_t slice_rows, float *__restrict__ work) {
    const spmm_t_in in = {sh, offsets, indices, values, X};
    const int width = 1 << sh.shift, lane = threadIdx.x & (width - 1);
    const int g = threadIdx.x >> sh.shift;
    const int64_t group = (int64_t)blockIdx.x * (blockDim.x >> sh.shift) + g;
    const int64_t b = group / n_slices, r0 = group % n_slices * slice_rows;
    if (b >= n_batch)
        return;
    const int64_t c = c_first + b, k0 = c * sh.len;
    const int64_t k1 = sh.nnz - k0 < sh.len ? sh.nnz : k0 + sh.len;
    const int64_t r1 = sh.n_cols - r0 < slice_rows ? sh.n_cols : r0 + slice_rows;
    float *out = work + b * sh.n_cols * sh.F + r0 * sh.F;
    if constexpr (SHARED) {
        __shared__ float part[SPMM_T_SHARED_FLOATS];
        float *P = part + g * slice_rows * sh.F;
        spmm_t_clear(P, r1 - r0, sh.F, sh.F, lane, width);
        spmm_t_add_chunk<VALUES>(in, k0, k1, r0, r1, 0, sh.F, P, sh.F, lane, width);
        for (int64_t r = 0; r < r1 - r0; r++)
            for (int64_t j = lane; j < sh.F; j += width)
                out[r * sh.F + j] = P[r * sh.F + j];
    } else {
        spmm_t_clear(out, r1 - r0, sh.F, sh.F, lane, width);
        spmm_t_add_chunk<VALUES>(in, k0, k1, r0, r1, 0, sh.F, out, sh.F, lane, width);
    }
}

// An element of Y with a chunk's partial p of it added: the first chunk's meets beta Y (Y unread
// for beta == 0).
__device__ __forceinline__ float spmm_t_fold(bool first, float beta, const float *y, float p) {
    if (!first)
        return *y + p;
    return beta == 0.0f ? p : fmaf(beta, *y, p);
}

// Adds n_batch partials (n_y floats apart) into Y in their order; first: the batch starts at
// chunk 0, whose partial meets beta Y.
static __global__ void __launch_bounds__(SPMM_T_BLOCK)
    spmm_t_combine_kernel(int64_t n_y, int64_t n_batch, bool first, float beta,
                          const float *__restrict__ P, float *__restrict__ Y) {
    for (int64_t e = blockIdx.x * (int64_t)SPMM_T_BLOCK + threadIdx.x; e < n_y;
         e += (int64_t)gridDim.x * SPMM_T_BLOCK) {
        float acc = spmm_t_fold(first, beta, Y + e, P[e]);
        // the partials' loads are independent of the sum: several in flight at once
#pragma unroll 8
        for (int64_t b = 1; b < n_batch; b++)
            acc += P[b * n_y + e];
        Y[e] = acc;
    }
}

// Without a workspace: a block (one group) per tile of tile_rows x tile_cols of Y, which walks
// every chunk in order, keeping the chunk's partial of the tile in shared memory and adding it
// into Y before the next.
template <bool VALUES>
static __global__ void __launch_bounds__(32)
    spmm_t_tiles_kernel(spmm_t_shape sh, const int64_t *__restrict__ offsets,
                        const int32_t *__restrict__ indices, const float *__restrict__ values,
                        const float *__restrict__ X, int64_t n_chunks, int64_t tile_rows,
                        int64_t tile_cols, float beta, float *__restrict__ Y) {
    __shared__ float part[SPMM_T_SHARED_FLOATS];
    const spmm_t_in in = {sh, offsets, indices, values, X};
    const int width = 1 << sh.shift, lane = threadIdx.x;
    const int64_t row_tiles = (sh.n_cols + tile_rows - 1) / tile_rows;
    const int64_t tiles = row_tiles * ((sh.F + tile_cols - 1) / tile_cols);
    for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
        const int64_t r0 = t % row_tiles * tile_rows, j0 = t / row_tiles * tile_cols;
        const int64_t r1 = sh.n_cols - r0 < tile_rows ? sh.n_cols : r0 + tile_rows;
        const int64_t j1 = sh.F - j0 < tile_cols ? sh.F : j0 + tile_cols, ld = j1 - j0;
        for (int64_t c = 0; c < n_chunks; c++) {
            const int64_t k0 = c * sh.len, k1 = sh.nnz - k0 < sh.len ? sh.nnz : k0 + sh.len;
            spmm_t_clear(part, r1 - r0, ld, ld, lane, width);
            spmm_t_add_chunk<VALUES>(in, k0, k1, r0, r1, j0, j1, part, ld, lane, width);
            for (int64_t r = r0; r < r1; r++)
                for (int64_t j = lane; j < ld; j += width) {
                    float *y = Y + r * sh.F + j0 + j;
                    *y = spmm_t_fold(c == 0, beta, y, part[(r - r0) * ld + j]);
                }
        }
    }
}

// The chunks of A's entries (see the top comment): from the shape alone.
static void spmm_t_plan(int64_t nnz, int64_t n_cols, int64_t F, int64_t *n_chunks, int64_t *len) {
    int64_t c = nnz / SPMM_T_CHUNK_MIN;
    if (c > nnz / n_cols)
        c = nnz / n_cols;
    if (c > SPMM_T_MAX_CHUNKS)
        c = SPMM_T_MAX_CHUNKS;
    if (c > SPMM_T_WORK_FLOATS / n_cols / F)
        c = SPMM_T_WORK_FLOATS / n_cols / F;
    if (c < 1)
        c = 1;
    *len = (nnz + c - 1) / c;
    *n_chunks = (nnz + *len - 1) / *len;
}

template <bool VALUES>
static saga_status spmm_t_run(saga_stream *s, cudaStream_t stream, const char *slot,
                              const spmm_t_shape &sh, const saga_csr_dev *A, const float *X,
                              int64_t n_chunks, float beta, float *Y) {
    const int64_t n_y = sh.n_cols * sh.F;
    const int width = 1 << sh.shift;
    const size_t part_bytes = (size_t)n_y * sizeof(float);
    // The partials, in batches of what the stream's workspace holds where it cannot grow to take
    // them all (see the top comment).
    size_t want = (size_t)n_chunks * part_bytes;
    const size_t share = saga_cuda_cublas_workspace_bytes(s->be);
    if (s->be->params.budget_bytes && want > share)
        want = share;
    if (want >= part_bytes) {
        saga_cuda_scratch sc;
        const saga_status st = saga_cuda_stream_workspace_try(s, slot, want, &sc);
        if (st < 0 && st != SAGA_ERR_BUDGET)
            return st;
    }
    void *area = nullptr;
    size_t have = 0;
    saga_cuda_stream_work_area(s, &area, &have);
    float *work = static_cast<float *>(area);
    int64_t batch = (int64_t)(have / part_bytes);
    batch = batch < n_chunks ? batch : n_chunks;
    if (batch == 0) {
        const int64_t tile_cols = sh.F < SPMM_T_SHARED_FLOATS ? sh.F : SPMM_T_SHARED_FLOATS;
        const int64_t rows_fit = SPMM_T_SHARED_FLOATS / tile_cols;
        const int64_t tile_rows = sh.n_cols < rows_fit ? sh.n_cols : rows_fit;
        const int64_t tiles =
            (sh.n_cols + tile_rows - 1) / tile_rows * ((sh.F + tile_cols - 1) / tile_cols);
        spmm_t_tiles_kernel<VALUES><<<saga_cuda_blocks(tiles, 1), width, 0, stream>>>(
            sh, A->offsets, A->indices, A->values, X, n_chunks, tile_rows, tile_cols, beta, Y);
        SAGA_CUDA_SLOT_LAUNCH(slot);
        return SAGA_OK;
    }
    // Slices of Y's rows (see the top comment): few for shared memory, since each reads its
    // chunk's entries again; more in the workspace, where a group's global reads and writes
    // shrink with its slice.
    const int64_t rows_fit = SPMM_T_SHARED_FLOATS / sh.F;
    const int64_t fit = rows_fit > 0 ? (sh.n_cols + rows_fit - 1) / rows_fit : 0;
    const bool shared = fit > 0 && fit <= SPMM_T_SHARED_SLICES;
    int64_t n_slices = shared ? fit : (SPMM_T_MIN_GROUPS + n_chunks - 1) / n_chunks;
    n_slices = n_slices < SPMM_T_MAX_SLICES ? n_slices : SPMM_T_MAX_SLICES;
    n_slices = n_slices < sh.n_cols ? n_slices : sh.n_cols;
    const int64_t slice_rows = (sh.n_cols + n_slices - 1) / n_slices;
    n_slices = (sh.n_cols + slice_rows - 1) / slice_rows;
    int64_t groups = SPMM_T_BLOCK >> sh.shift;
    if (shared && groups > SPMM_T_SHARED_FLOATS / (slice_rows * sh.F))
        groups = SPMM_T_SHARED_FLOATS / (slice_rows * sh.F);
    for (int64_t c0 = 0; c0 < n_chunks; c0 += batch) {
        const int64_t nb = n_chunks - c0 < batch ? n_chunks - c0 : batch;
        const unsigned blocks = (unsigned)((nb * n_slices + groups - 1) / groups);
        const unsigned threads = (unsigned)(groups * width);
        if (shared)
            spmm_t_partials_kernel<VALUES, true><<<blocks, threads, 0, stream>>>(
                sh, A->offsets, A->indices, A->values, X, c0, nb, n_slices, slice_rows, work);
        else
            spmm_t_partials_kernel<VALUES, false><<<blocks, threads, 0, stream>>>(
                sh, A->offsets, A->indices, A->values, X, c0, nb, n_slices, slice_rows, work);
        SAGA_CUDA_SLOT_LAUNCH(slot);
        spmm_t_combine_kernel<<<saga_cuda_blocks(n_y, SPMM_T_BLOCK), SPMM_T_BLOCK, 0, stream>>>(
            n_y, nb, c0 == 0, beta, work, Y);
        SAGA_CUDA_SLOT_LAUNCH(slot);
    }
    return SAGA_OK;
}

saga_status saga_cuda_spmm_t_f32(saga_stream *s, const saga_csr_dev *A, int64_t F, float alpha,
                                 const float *X, float beta, float *Y) {
    static const char slot[] = "spmm_t_f32";
    if (A->n_cols <= 0 || F <= 0)
        return SAGA_OK;
    cudaStream_t stream;
    saga_status st = saga_cuda_slot_stream(s, slot, &stream);
    if (st < 0)
        return st;
    const int64_t n_y = A->n_cols * F;
    if (A->n_rows <= 0 || A->nnz <= 0) {
        spmm_t_scale_kernel<<<saga_cuda_blocks(n_y, SPMM_T_BLOCK), SPMM_T_BLOCK, 0, stream>>>(
            n_y, beta, Y);
        SAGA_CUDA_SLOT_LAUNCH(slot);
        return SAGA_OK;
    }
    int64_t n_chunks, len;
    spmm_t_plan(A->nnz, A->n_cols, F, &n_chunks, &len);
    const spmm_t_shape sh = {A->n_rows, A->n_cols, A->nnz, F, len, alpha, saga_cuda_group_shift(F)};
    return A->values ? spmm_t_run<true>(s, stream, slot, sh, A, X, n_chunks, beta, Y)
                     : spmm_t_run<false>(s, stream, slot, sh, A, X, n_chunks, beta, Y);
}
