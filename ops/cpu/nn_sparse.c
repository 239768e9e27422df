/* nn_sparse.c - CPU kernels of the neural-network layer that follow indices: row gather and
 * scatter-add, SpMM (GCN aggregation), segment reductions and edge softmax (GAT attention).
 *
 * Every output element is computed by exactly one thread, from its inputs in a fixed order that
 * does not depend on how the work is split, so every kernel here gives the same bits for any
 * thread count. Work over CSR rows or segments is split into contiguous ranges of equal cost
 * (stored entries plus rows), found by binary search on the offsets: a power-law graph puts
 * most of its edges in a few rows, and an even split of rows would leave threads idle. */
#include "nn_kernels.h"

#include "cpu_isa_impl.h"

#include <math.h>
#include <omp.h>
#include <string.h>

/* ---- work splitting ------------------------------------------------------------------------ */

/* First row g in [0, n] whose cost prefix (off[g] - off[0]) + g reaches target. The prefix is
 * strictly increasing in g, so the split points of consecutive parts are ordered. */
static int64_t cost_search(const int64_t *off, int64_t n, int64_t target) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if ((off[mid] - off[0]) + mid < target)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* [lo, hi) of the rows that part id out of nt owns, balanced by entries plus rows. */
static void cost_chunk(const int64_t *off, int64_t n, int id, int nt, int64_t *lo, int64_t *hi) {
    const int64_t total = (off[n] - off[0]) + n;
    const int64_t q = total / nt, r = total % nt;
    *lo = id == 0 ? 0 : cost_search(off, n, q * id + (id < r ? id : r));
    *hi = id == nt - 1 ? n : cost_search(off, n, q * (id + 1) + (id + 1 < r ? id + 1 : r));
}

/* First position k < n whose index is outside [0, limit), or n when all are inside. The scan
 * that finds whether any is outside has no branch (it vectorises: a negative index is a huge
 * unsigned one); only then is the first one looked for. */
static int64_t first_bad_index(saga_stream *s, int64_t n, const int32_t *idx, int64_t limit) {
    const uint64_t lim = limit > 0 ? (uint64_t)limit : 0;
    int bad = 0;
#pragma omp parallel for simd schedule(static) reduction(|                                         \
                                                         : bad)                                    \
    num_threads(saga_cpu_nn_threads(s, n))
    for (int64_t k = 0; k < n; k++)
        bad |= (uint64_t)(int64_t)idx[k] >= lim;
    if (!bad)
        return n;
    int64_t k = 0;
    while (k < n && (uint64_t)(int64_t)idx[k] < lim)
        k++;
    return k;
}

/* Whether a row of n floats is all zeros, of either sign (NaN and infinities are not). */
static inline __attribute__((always_inline)) bool row_is_zero(const float *x, int64_t n) {
    uint32_t any = 0;
#pragma omp simd reduction(| : any)
    for (int64_t j = 0; j < n; j++) {
        uint32_t b;
        memcpy(&b, x + j, sizeof b);
        any |= b << 1; /* without the sign */
    }
    return any == 0;
}

static saga_status bad_index(const char *what, int64_t k, int32_t v, int64_t limit) {
    return saga_error(SAGA_ERR_INVALID_ARG, "%s: index %d at position %lld is outside [0, %lld)",
                      what, (int)v, (long long)k, (long long)limit);
}

/* ---- gather / scatter ---------------------------------------------------------------------- */

/* Every cache line of a row of w floats. */
static inline void prefetch_row(const float *r, int64_t w) {
    for (int64_t j = 0; j < w; j += 16)
        __builtin_prefetch(r + j);
}

/* How many rows ahead a gather asks for the row it will copy, for rows up to
 * GATHER_AHEAD_MAX_COLS floats (wider rows are long enough for the hardware's own prefetch). */
enum { GATHER_AHEAD = 16, GATHER_AHEAD_MAX_COLS = 64 };

saga_status saga_cpu_gather_rows_f32(saga_stream *s, int64_t n_idx, int64_t cols,
                                     const int32_t *idx, int64_t n_rows_x, const float *x,
                                     float *y) {
    saga_cpu_stream_drain(s);
    if (n_idx <= 0)
        return SAGA_OK;
    const int64_t bad = first_bad_index(s, n_idx, idx, n_rows_x);
    if (bad < n_idx)
        return bad_index("gather_rows_f32", bad, idx[bad], n_rows_x);
    if (cols <= 0)
        return SAGA_OK;
    /* the rows are scattered over x: each is asked for GATHER_AHEAD rows before it is copied,
     * so that the loads overlap instead of each waiting on memory in turn */
    const int64_t ahead = cols <= GATHER_AHEAD_MAX_COLS ? GATHER_AHEAD : 0;
#pragma omp parallel for schedule(static) num_threads(saga_cpu_nn_threads(s, n_idx *cols))
    for (int64_t k = 0; k < n_idx; k++) {
        if (ahead && k + ahead < n_idx)
            prefetch_row(x + (int64_t)idx[k + ahead] * cols, cols);
        memcpy(y + k * cols, x + (int64_t)idx[k] * cols, (size_t)cols * sizeof *y);
    }
    return SAGA_OK;
}

/* Below this many columns per thread the columns are not split: each thread would touch only a
 * piece of a cache line of every row. 16 floats is one 64-byte line. */
enum { SCATTER_MIN_COLS_PER_THREAD = 16 };

/* A contribution of either zero is skipped: y's sign of zero stays (+0 + -0 would be +0). Adding
 * -0 changes no float, NaN and the infinities included, so the add needs no branch and
 * vectorises. */
static inline __attribute__((always_inline)) float skip_zero(float x) {
    return x != 0.0f ? x : -0.0f;
}

/* y's rows idx[k] += x's rows k, columns [c0, c1), for the k whose idx[k] lies in [r0, r1), in
 * increasing k (rows of zeros skipped: a backward pass's are often all zeros). Elementwise: every
 * build gives the same bits. */
static inline __attribute__((always_inline)) void
scatter_span_body(int64_t n_idx, int64_t cols, const int32_t *idx, const float *x, float *y,
                  int64_t c0, int64_t c1, int64_t r0, int64_t r1) {
    for (int64_t k = 0; k < n_idx; k++) {
        const int64_t r = idx[k];
        if (r < r0 || r >= r1)
            continue;
        const float *xk = x + k * cols;
        if (row_is_zero(xk + c0, c1 - c0))
            continue;
        float *yr = y + r * cols;
#pragma omp simd
        for (int64_t j = c0; j < c1; j++)
            yr[j] += skip_zero(xk[j]);
    }
}

SAGA_CPU_ISA_CLONES_V4(scatter_span,
                       (int64_t n_idx, int64_t cols, const int32_t *idx, const float *x, float *y,
                        int64_t c0, int64_t c1, int64_t r0, int64_t r1),
                       (n_idx, cols, idx, x, y, c0, c1, r0, r1))

/* Two splits keep every element of y receiving its contributions in increasing k: when rows are
 * wide, each thread owns a block of columns and walks all of idx; otherwise each thread owns a
 * range of destination rows and walks all of idx, skipping contributions to rows it does not
 * own. The second split reads idx once per thread, which is small against the rows it moves;
 * with skewed indices it can be unbalanced, the price of needing no sort and no buffer. */
saga_status saga_cpu_scatter_add_rows_f32(saga_stream *s, int64_t n_idx, int64_t cols,
                                          const int32_t *idx, const float *x, int64_t n_rows_y,
                                          float *y) {
    saga_cpu_stream_drain(s);
    if (n_idx <= 0)
        return SAGA_OK;
    const int64_t bad = first_bad_index(s, n_idx, idx, n_rows_y);
    if (bad < n_idx)
        return bad_index("scatter_add_rows_f32", bad, idx[bad], n_rows_y);
    if (cols <= 0)
        return SAGA_OK;
    const int nt = saga_cpu_nn_threads(s, n_idx * cols);
    const bool by_cols = cols >= (int64_t)nt * SCATTER_MIN_COLS_PER_THREAD;
#pragma omp parallel num_threads(nt)
    {
        int64_t lo, hi;
        saga_cpu_nn_chunk(by_cols ? cols : n_rows_y, omp_get_thread_num(), omp_get_num_threads(),
                          &lo, &hi);
        if (by_cols)
            scatter_span(n_idx, cols, idx, x, y, lo, hi, 0, n_rows_y);
        else
            scatter_span(n_idx, cols, idx, x, y, 0, cols, lo, hi);
    }
    return SAGA_OK;
}

/* ---- SpMM ---------------------------------------------------------------------------------- */

/* Columns accumulated at once in registers and L1: 1 KiB of floats, so a row's accumulator stays
 * put while the X rows stream past. Wider outputs are done in column blocks of this size. */
enum { SPMM_BLOCK = 256 };

/* Y[lo..hi) = alpha A X + beta Y, one row at a time, columns [c0, c1). Each output element sums
 * its row's entries in increasing k in f32; the split of rows does not enter. */
enum { SPMM_AHEAD = 16 };

static void spmm_rows(const saga_csr_dev *A, int64_t F, int64_t c0, int64_t c1, float alpha,
                      const float *X, float beta, float *Y, int64_t lo, int64_t hi) {
    const int64_t *off = A->offsets;
    const int32_t *ind = A->indices;
    const float *val = A->values;
    const int64_t w = c1 - c0;
    float acc[SPMM_BLOCK];
    for (int64_t i = lo; i < hi; i++) {
#pragma omp simd
        for (int64_t j = 0; j < w; j++)
            acc[j] = 0.0f;
        /* The rows of X are read in the order of the column indices, which is random for most
         * graphs: ask for the row SPMM_AHEAD entries ahead so that several misses are in flight
         * (the prefetch of the last rows of A reads past this row's entries into the next row's,
         * which is still inside the array: offsets end at nnz, and k + SPMM_AHEAD is checked). */
        const int64_t k1 = off[i + 1], nnz = off[A->n_rows];
        if (val) {
            for (int64_t k = off[i]; k < k1; k++) {
                if (k + SPMM_AHEAD < nnz)
                    prefetch_row(X + (int64_t)ind[k + SPMM_AHEAD] * F + c0, w);
                const float v = val[k];
                const float *xr = X + (int64_t)ind[k] * F + c0;
#pragma omp simd
                for (int64_t j = 0; j < w; j++)
                    acc[j] += v * xr[j];
            }
        } else {
            for (int64_t k = off[i]; k < k1; k++) {
                if (k + SPMM_AHEAD < nnz)
                    prefetch_row(X + (int64_t)ind[k + SPMM_AHEAD] * F + c0, w);
                const float *xr = X + (int64_t)ind[k] * F + c0;
#pragma omp simd
                for (int64_t j = 0; j < w; j++)
                    acc[j] += xr[j];
            }
        }
        float *yr = Y + i * F + c0;
        if (beta == 0.0f) {
#pragma omp simd
            for (int64_t j = 0; j < w; j++)
                yr[j] = alpha * acc[j];
        } else {
#pragma omp simd
            for (int64_t j = 0; j < w; j++)
                yr[j] = alpha * acc[j] + beta * yr[j];
        }
    }
}

/* spmm_rows for F == W, a constant: the row's accumulator is W floats held in registers instead
 * of an array in memory, and the prefetch is one line. Two rows are walked side by side so that
 * the two chains of additions (each row's entries still in increasing k) overlap their latency;
 * the longer row finishes alone. Same operations in the same order as spmm_rows: same bits. */
enum { SPMM_FIXED_MAX = 16 };

static inline __attribute__((always_inline)) void
spmm_rows_fixed(const saga_csr_dev *A, const int64_t W, float alpha, const float *X, float beta,
                float *Y, int64_t lo, int64_t hi) {
    const int64_t *off = A->offsets;
    const int32_t *ind = A->indices;
    const float *val = A->values;
    const int64_t nnz = off[A->n_rows];
    int64_t i = lo;
    for (; i < hi; i += 2) {
        const bool two = i + 1 < hi;
        float a0[SPMM_FIXED_MAX], a1[SPMM_FIXED_MAX];
        for (int64_t j = 0; j < W; j++)
            a0[j] = a1[j] = 0.0f;
        int64_t k = off[i], e = off[i + 1];
        int64_t k1 = two ? off[i + 1] : e, e1 = two ? off[i + 2] : e;
        const int64_t both = e - k < e1 - k1 ? e - k : e1 - k1;
        for (int64_t t = 0; t < both; t++, k++, k1++) {
            if (k1 + SPMM_AHEAD < nnz) {
                __builtin_prefetch(X + (int64_t)ind[k + SPMM_AHEAD] * W);
                __builtin_prefetch(X + (int64_t)ind[k1 + SPMM_AHEAD] * W);
            }
            const float v0 = val ? val[k] : 1.0f, v1 = val ? val[k1] : 1.0f;
            const float *x0 = X + (int64_t)ind[k] * W, *x1 = X + (int64_t)ind[k1] * W;
            for (int64_t j = 0; j < W; j++) {
                a0[j] += v0 * x0[j];
                a1[j] += v1 * x1[j];
            }
        }
        for (; k < e; k++) {
            if (k + SPMM_AHEAD < nnz)
                __builtin_prefetch(X + (int64_t)ind[k + SPMM_AHEAD] * W);
            const float v0 = val ? val[k] : 1.0f;
            const float *x0 = X + (int64_t)ind[k] * W;
            for (int64_t j = 0; j < W; j++)
                a0[j] += v0 * x0[j];
        }
        for (; k1 < e1; k1++) {
            if (k1 + SPMM_AHEAD < nnz)
                __builtin_prefetch(X + (int64_t)ind[k1 + SPMM_AHEAD] * W);
            const float v1 = val ? val[k1] : 1.0f;
            const float *x1 = X + (int64_t)ind[k1] * W;
            for (int64_t j = 0; j < W; j++)
                a1[j] += v1 * x1[j];
        }
        float *y0 = Y + i * W, *y1 = Y + (i + 1) * W;
        for (int64_t j = 0; j < W; j++)
            y0[j] = beta == 0.0f ? alpha * a0[j] : alpha * a0[j] + beta * y0[j];
        if (two)
            for (int64_t j = 0; j < W; j++)
                y1[j] = beta == 0.0f ? alpha * a1[j] : alpha * a1[j] + beta * y1[j];
    }
}

/* The widths GCN aggregates at (hidden 16, a handful of classes), compiled for AVX2 where the
 * processor has it; neither build contracts a * b + c, so both give spmm_rows's bits. */
static inline __attribute__((always_inline)) void spmm_rows_16_body(const saga_csr_dev *A,
                                                                    float alpha, const float *X,
                                                                    float beta, float *Y,
                                                                    int64_t lo, int64_t hi) {
    spmm_rows_fixed(A, 16, alpha, X, beta, Y, lo, hi);
}

static inline __attribute__((always_inline)) void spmm_rows_8_body(const saga_csr_dev *A,
                                                                   float alpha, const float *X,
                                                                   float beta, float *Y, int64_t lo,
                                                                   int64_t hi) {
    spmm_rows_fixed(A, 8, alpha, X, beta, Y, lo, hi);
}

SAGA_CPU_ISA_CLONES(spmm_rows_16,
                    (const saga_csr_dev *A, float alpha, const float *X, float beta, float *Y,
                     int64_t lo, int64_t hi),
                    (A, alpha, X, beta, Y, lo, hi))
SAGA_CPU_ISA_CLONES(spmm_rows_8,
                    (const saga_csr_dev *A, float alpha, const float *X, float beta, float *Y,
                     int64_t lo, int64_t hi),
                    (A, alpha, X, beta, Y, lo, hi))

/* ---- rows of X that are all zero ---------------------------------------------------------- */

/* A term whose row of X is all zeros (either sign) adds +0 or -0 to a sum, which leaves it as it
 * is unless the sum is -0; an SpMM's sums start at +0 and never become -0 (x + -x is +0), so they
 * can skip such rows and keep their bits. A gradient that only some rows carry (that of a loss
 * over a few vertices, one layer back) is mostly such rows, and skipping them skips the gathers.
 * SPMM_LIVE_SHARE: the rows are skipped when at most 1 in this many holds a non-zero. */
enum { SPMM_LIVE_SHARE = 8 };

/* X's live rows (those holding a non-zero, NaN or infinity): a bitmask, the number of live rows
 * before each 64-row word (both in one allocation), and the live rows themselves packed in order
 * (n_live x F), so that the few gathers left read a small array that stays in cache. */
typedef struct live_set {
    uint64_t *bits;
    int32_t *before;
    float *rows;
} live_set;

/* The packed row of X's row u, or NULL when u is not live. */
static inline const float *live_row(const live_set *L, int32_t u, int64_t F) {
    const uint64_t word = L->bits[u >> 6], bit = 1ull << (u & 63);
    if (!(word & bit))
        return NULL;
    return L->rows + (int64_t)(L->before[u >> 6] + __builtin_popcountll(word & (bit - 1))) * F;
}

/* Fills *L (true; free with live_free) when at most rows / SPMM_LIVE_SHARE of X's rows (rows x
 * F) are live; false otherwise (the scan stops there, so a dense X costs a pass over that share
 * of it and nothing is copied) or when the arrays cannot be allocated. */
static bool live_rows(const float *X, int64_t rows, int64_t F, live_set *L) {
    if (rows < 64 * SPMM_LIVE_SHARE)
        return false;
    const int64_t words = (rows + 63) / 64;
    int64_t n_live = 0;
    L->rows = NULL;
    L->bits = NULL; /* freed on the way out when its own allocation fails */
    if (saga_alloc_zeroed((void **)&L->bits, (size_t)words, sizeof(uint64_t) + sizeof(int32_t),
                          "live rows") < 0)
        goto fail;
    L->before = (int32_t *)(L->bits + words);
    for (int64_t u = 0; u < rows; u++) {
        const bool nz = !row_is_zero(X + u * F, F);
        if (nz && ++n_live > rows / SPMM_LIVE_SHARE) {
            saga_free(L->bits);
            return false;
        }
        L->bits[u >> 6] |= (uint64_t)nz << (u & 63);
    }
    if (saga_alloc_array((void **)&L->rows, n_live ? (size_t)n_live : 1, (size_t)F * sizeof(float),
                         "live rows") < 0)
        goto fail;
    for (int64_t w = 0, c = 0; w < words; w++) {
        L->before[w] = (int32_t)c;
        for (uint64_t bits = L->bits[w]; bits; bits &= bits - 1, c++)
            memcpy(L->rows + c * F, X + (w * 64 + __builtin_ctzll(bits)) * F,
                   (size_t)F * sizeof(float));
    }
    return true;
fail:
    saga_error_clear();
    saga_free(L->bits);
    return false;
}

static void live_free(live_set *L) {
    saga_free(L->bits);
    saga_free(L->rows);
}

/* spmm_rows's sums over the terms whose row of X is live, columns [c0, c0 + w), w <=
 * SPMM_BLOCK: the same bits (above). */
static inline __attribute__((always_inline)) void
spmm_rows_live_w(const saga_csr_dev *A, int64_t F, int64_t c0, int64_t w, float alpha,
                 const live_set *L, float beta, float *Y, int64_t lo, int64_t hi) {
    const int64_t *off = A->offsets;
    const int32_t *ind = A->indices;
    const float *val = A->values;
    float acc[SPMM_BLOCK];
    for (int64_t i = lo; i < hi; i++) {
        for (int64_t j = 0; j < w; j++)
            acc[j] = 0.0f;
        for (int64_t k = off[i]; k < off[i + 1]; k++) {
            const float *xr = live_row(L, ind[k], F);
            if (!xr)
                continue;
            const float v = val ? val[k] : 1.0f;
            for (int64_t j = 0; j < w; j++)
                acc[j] += v * xr[c0 + j];
        }
        float *yr = Y + i * F + c0;
        for (int64_t j = 0; j < w; j++)
            yr[j] = beta == 0.0f ? alpha * acc[j] : alpha * acc[j] + beta * yr[j];
    }
}

static inline __attribute__((always_inline)) void
spmm_rows_live_body(const saga_csr_dev *A, int64_t F, float alpha, const live_set *L, float beta,
                    float *Y, int64_t lo, int64_t hi) {
    if (F == 16)
        spmm_rows_live_w(A, 16, 0, 16, alpha, L, beta, Y, lo, hi);
    else if (F == 8)
        spmm_rows_live_w(A, 8, 0, 8, alpha, L, beta, Y, lo, hi);
    else
        for (int64_t c0 = 0; c0 < F; c0 += SPMM_BLOCK)
            spmm_rows_live_w(A, F, c0, F - c0 < SPMM_BLOCK ? F - c0 : SPMM_BLOCK, alpha, L, beta, Y,
                             lo, hi);
}

SAGA_CPU_ISA_CLONES(spmm_rows_live,
                    (const saga_csr_dev *A, int64_t F, float alpha, const live_set *L, float beta,
                     float *Y, int64_t lo, int64_t hi),
                    (A, F, alpha, L, beta, Y, lo, hi))

saga_status saga_cpu_spmm_f32(saga_stream *s, const saga_csr_dev *A, int64_t F, float alpha,
                              const float *X, float beta, float *Y) {
    saga_cpu_stream_drain(s);
    const int64_t n = A->n_rows;
    if (n <= 0 || F <= 0)
        return SAGA_OK;
    const int64_t *off = A->offsets;
    if (off[0] != 0 || off[n] != A->nnz)
        return saga_error(SAGA_ERR_INVALID_ARG,
                          "spmm_f32: the offsets run from %lld to %lld; they must run from 0 to "
                          "nnz = %lld",
                          (long long)off[0], (long long)off[n], (long long)A->nnz);
    const int nt = saga_cpu_nn_threads(s, (n + A->nnz) * F);
    live_set L;
    const bool live = live_rows(X, A->n_cols, F, &L);
#pragma omp parallel num_threads(nt)
    {
        int64_t lo, hi;
        cost_chunk(off, n, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        if (live)
            spmm_rows_live(A, F, alpha, &L, beta, Y, lo, hi);
        else if (F == 16)
            spmm_rows_16(A, alpha, X, beta, Y, lo, hi);
        else if (F == 8)
            spmm_rows_8(A, alpha, X, beta, Y, lo, hi);
        else
            for (int64_t c0 = 0; c0 < F; c0 += SPMM_BLOCK) {
                const int64_t c1 = F - c0 < SPMM_BLOCK ? F : c0 + SPMM_BLOCK;
                spmm_rows(A, F, c0, c1, alpha, X, beta, Y, lo, hi);
            }
    }
    if (live)
        live_free(&L);
    return SAGA_OK;
}

/* Y[:, 0..c1 - c0) += alpha A^T X[:, c0..c1), the rows of A in increasing order; Y's rows are
 * ldy floats apart, and X and Y do not overlap. skip_zero (no -0 in Y to start with, so none in
 * any sum: see live_rows) skips the rows of X whose columns here are all zeros. Row i of X is read
 * once into a local array (at most SPMM_BLOCK columns at a time), so that the compiler keeps it in
 * registers rather than reloading it after every store to Y. */
static inline __attribute__((always_inline)) void
spmm_t_cols(const saga_csr_dev *A, int64_t F, int64_t c0, int64_t c1, float alpha,
            const float *restrict X, float *restrict Y, int64_t ldy, bool skip_zero) {
    const int64_t *off = A->offsets;
    const int32_t *ind = A->indices;
    const float *val = A->values;
    for (int64_t b0 = c0; b0 < c1; b0 += SPMM_BLOCK) {
        const int64_t w = c1 - b0 < SPMM_BLOCK ? c1 - b0 : SPMM_BLOCK;
        for (int64_t i = 0; i < A->n_rows; i++) {
            float x[SPMM_BLOCK];
            bool nz = false;
            for (int64_t j = 0; j < w; j++) {
                x[j] = X[i * F + b0 + j];
                nz |= x[j] != 0.0f;
            }
            if (skip_zero && !nz)
                continue;
            for (int64_t k = off[i]; k < off[i + 1]; k++) {
                const float a = alpha * (val ? val[k] : 1.0f);
                float *restrict y = Y + (int64_t)ind[k] * ldy + (b0 - c0);
                for (int64_t j = 0; j < w; j++)
                    y[j] += a * x[j];
            }
        }
    }
}

/* The widths a thread's share of a first layer's hidden width comes to (16 on one thread, 8 on
 * two): a constant row width, vectorised whole; the same operations as spmm_t_cols. */
static inline __attribute__((always_inline)) void
spmm_t_cols_16_body(const saga_csr_dev *A, int64_t F, int64_t c0, float alpha, const float *X,
                    float *Y, int64_t ldy, bool skip_zero) {
    spmm_t_cols(A, F, c0, c0 + 16, alpha, X, Y, ldy, skip_zero);
}

static inline __attribute__((always_inline)) void
spmm_t_cols_8_body(const saga_csr_dev *A, int64_t F, int64_t c0, float alpha, const float *X,
                   float *Y, int64_t ldy, bool skip_zero) {
    spmm_t_cols(A, F, c0, c0 + 8, alpha, X, Y, ldy, skip_zero);
}

SAGA_CPU_ISA_CLONES(spmm_t_cols_16,
                    (const saga_csr_dev *A, int64_t F, int64_t c0, float alpha, const float *X,
                     float *Y, int64_t ldy, bool skip_zero),
                    (A, F, c0, alpha, X, Y, ldy, skip_zero))
SAGA_CPU_ISA_CLONES(spmm_t_cols_8,
                    (const saga_csr_dev *A, int64_t F, int64_t c0, float alpha, const float *X,
                     float *Y, int64_t ldy, bool skip_zero),
                    (A, F, c0, alpha, X, Y, ldy, skip_zero))

enum { SPMM_T_PRIVATE_MAX = 1 << 24 }; /* bytes of Y up to which the threads sum apart */

/* The threads split Y's columns, so that each element of Y is one thread's and adds its terms in
 * increasing row order whatever the thread count; every thread walks all of A. The products this
 * serves (X^T dH of a first layer) are narrow, F = 16 or so, and A is read from the cache after the
 * first thread's pass. */
saga_status saga_cpu_spmm_t_f32(saga_stream *s, const saga_csr_dev *A, int64_t F, float alpha,
                                const float *X, float beta, float *Y) {
    saga_cpu_stream_drain(s);
    const int64_t n = A->n_rows, m = A->n_cols;
    if (m <= 0 || F <= 0)
        return SAGA_OK;
    if (n > 0 && (A->offsets[0] != 0 || A->offsets[n] != A->nnz))
        return saga_error(SAGA_ERR_INVALID_ARG,
                          "spmm_t_f32: the offsets run from %lld to %lld; they must run from 0 to "
                          "nnz = %lld",
                          (long long)A->offsets[0], (long long)A->offsets[n], (long long)A->nnz);
    int nt = saga_cpu_nn_threads(s, (n + A->nnz) * F);
    nt = nt < F ? nt : (int)F;
    /* With several threads, a row of Y holds every thread's columns, often in one cache line:
     * each thread sums its columns in a private m x (c1 - c0) array instead, which it copies
     * into Y at the end (the same operations on each element, in the same order). */
    float *priv = NULL;
    if (nt > 1 && (size_t)m * (size_t)F * sizeof(float) <= SPMM_T_PRIVATE_MAX) {
        saga_status st = saga_alloc_array((void **)&priv, (size_t)m * (size_t)F, sizeof *priv,
                                          "spmm_t_f32 partial sums");
        if (st < 0)
            return st;
    }
#pragma omp parallel num_threads(nt)
    {
        int64_t c0, c1;
        saga_cpu_nn_chunk(F, omp_get_thread_num(), omp_get_num_threads(), &c0, &c1);
        const int64_t w = c1 - c0;
        float *out = priv ? priv + m * c0 : Y + c0;
        const int64_t ld = priv ? w : F;
        bool neg_zero = false;
        for (int64_t r = 0; r < m; r++)
            for (int64_t j = 0; j < w; j++) {
                const float v = beta == 0.0f ? 0.0f : beta * Y[r * F + c0 + j];
                out[r * ld + j] = v;
                neg_zero |= v == 0.0f && signbit(v);
            }
        /* no sum that starts without a -0 can reach one (see live_rows): the zero rows of X
         * then add nothing, whatever beta (a gradient accumulated over blocks has beta 1) */
        const bool skip = !neg_zero;
        if (w == 16)
            spmm_t_cols_16(A, F, c0, alpha, X, out, ld, skip);
        else if (w == 8)
            spmm_t_cols_8(A, F, c0, alpha, X, out, ld, skip);
        else
            spmm_t_cols(A, F, c0, c1, alpha, X, out, ld, skip);
        if (priv)
            for (int64_t r = 0; r < m; r++)
                memcpy(Y + r * F + c0, out + r * w, (size_t)w * sizeof *Y);
    }
    saga_free(priv);
    return SAGA_OK;
}

/* ---- segment reductions -------------------------------------------------------------------- */

static saga_status check_reduce(const char *what, saga_reduce op, const int32_t *argmax) {
    if ((unsigned)op >= SAGA_REDUCE_COUNT)
        return saga_error(SAGA_ERR_INVALID_ARG, "%s: unknown reduction %d", what, (int)op);
    if (op == SAGA_REDUCE_MAX && !argmax)
        return saga_error(SAGA_ERR_INVALID_ARG, "%s: MAX needs an argmax array, got NULL", what);
    return SAGA_OK;
}

/* Segment g of x into y[g] (and argmax[g] for MAX). Rows are visited in increasing order; MAX
 * replaces only on a strictly greater value, so the first of equal maxima wins. */
static void reduce_segment(int64_t r0, int64_t r1, int64_t F, saga_reduce op, const float *x,
                           float *yg, int32_t *ag) {
    if (r0 >= r1) {
        for (int64_t j = 0; j < F; j++)
            yg[j] = 0.0f;
        if (op == SAGA_REDUCE_MAX)
            for (int64_t j = 0; j < F; j++)
                ag[j] = -1;
        return;
    }
    if (op == SAGA_REDUCE_MAX) {
        const float *x0 = x + r0 * F;
        for (int64_t j = 0; j < F; j++) {
            yg[j] = x0[j];
            ag[j] = (int32_t)r0;
        }
        for (int64_t r = r0 + 1; r < r1; r++) {
            const float *xr = x + r * F;
#pragma omp simd
            for (int64_t j = 0; j < F; j++) {
                const bool gt = xr[j] > yg[j];
                yg[j] = gt ? xr[j] : yg[j];
                ag[j] = gt ? (int32_t)r : ag[j];
            }
        }
        return;
    }
    memcpy(yg, x + r0 * F, (size_t)F * sizeof *yg);
    for (int64_t r = r0 + 1; r < r1; r++) {
        const float *xr = x + r * F;
#pragma omp simd
        for (int64_t j = 0; j < F; j++)
            yg[j] += xr[j];
    }
    if (op == SAGA_REDUCE_MEAN) {
        const float size = (float)(r1 - r0);
#pragma omp simd
        for (int64_t j = 0; j < F; j++)
            yg[j] /= size;
    }
}

saga_status saga_cpu_segment_reduce_f32(saga_stream *s, const int64_t *offsets, int64_t n_seg,
                                        int64_t F, saga_reduce op, const float *x, float *y,
                                        int32_t *argmax) {
    saga_cpu_stream_drain(s);
    saga_status st = check_reduce("segment_reduce_f32", op, argmax);
    if (st < 0)
        return st;
    if (n_seg <= 0 || F <= 0)
        return SAGA_OK;
    const int nt = saga_cpu_nn_threads(s, (n_seg + (offsets[n_seg] - offsets[0])) * F);
#pragma omp parallel num_threads(nt)
    {
        int64_t lo, hi;
        cost_chunk(offsets, n_seg, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        for (int64_t g = lo; g < hi; g++)
            reduce_segment(offsets[g], offsets[g + 1], F, op, x, y + g * F,
                           op == SAGA_REDUCE_MAX ? argmax + g * F : NULL);
    }
    return SAGA_OK;
}

saga_status saga_cpu_segment_reduce_bwd_f32(saga_stream *s, const int64_t *offsets, int64_t n_seg,
                                            int64_t F, saga_reduce op, const float *dy,
                                            const int32_t *argmax, float *dx) {
    saga_cpu_stream_drain(s);
    saga_status st = check_reduce("segment_reduce_bwd_f32", op, argmax);
    if (st < 0)
        return st;
    if (n_seg <= 0 || F <= 0)
        return SAGA_OK;
    const int nt = saga_cpu_nn_threads(s, (n_seg + (offsets[n_seg] - offsets[0])) * F);
#pragma omp parallel num_threads(nt)
    {
        int64_t lo, hi;
        cost_chunk(offsets, n_seg, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        for (int64_t g = lo; g < hi; g++) {
            const int64_t r0 = offsets[g], r1 = offsets[g + 1];
            const float *dyg = dy + g * F;
            if (op == SAGA_REDUCE_MAX) {
                const int32_t *ag = argmax + g * F;
                for (int64_t r = r0; r < r1; r++) {
                    float *dxr = dx + r * F;
#pragma omp simd
                    for (int64_t j = 0; j < F; j++)
                        dxr[j] = ag[j] == r ? dyg[j] : 0.0f;
                }
            } else if (op == SAGA_REDUCE_MEAN) {
                const float inv = r1 > r0 ? 1.0f / (float)(r1 - r0) : 0.0f;
                for (int64_t r = r0; r < r1; r++) {
                    float *dxr = dx + r * F;
#pragma omp simd
                    for (int64_t j = 0; j < F; j++)
                        dxr[j] = dyg[j] * inv;
                }
            } else {
                for (int64_t r = r0; r < r1; r++)
                    memcpy(dx + r * F, dyg, (size_t)F * sizeof *dx);
            }
        }
    }
    return SAGA_OK;
}

/* ---- edge softmax -------------------------------------------------------------------------- */

/* Softmax over the rows r0..r1 of column h of an nnz x H matrix. The sum is accumulated in
 * double, as in softmax_rows_f32: a vertex of high degree has thousands of terms. */
static void edge_softmax_column(int64_t r0, int64_t r1, int64_t H, int64_t h, const float *sc,
                                float *out) {
    float mx = sc[r0 * H + h];
    for (int64_t r = r0 + 1; r < r1; r++)
        mx = sc[r * H + h] > mx ? sc[r * H + h] : mx;
    double sum = 0.0;
    for (int64_t r = r0; r < r1; r++) {
        const float e = expf(sc[r * H + h] - mx);
        out[r * H + h] = e;
        sum += e;
    }
    const float inv = (float)(1.0 / sum);
    for (int64_t r = r0; r < r1; r++)
        out[r * H + h] *= inv;
}

saga_status saga_cpu_edge_softmax_f32(saga_stream *s, const int64_t *offsets, int64_t n_seg,
                                      int64_t H, const float *scores, float *out) {
    saga_cpu_stream_drain(s);
    if (n_seg <= 0 || H <= 0)
        return SAGA_OK;
    const int nt = saga_cpu_nn_threads(s, (n_seg + (offsets[n_seg] - offsets[0])) * H);
#pragma omp parallel num_threads(nt)
    {
        int64_t lo, hi;
        cost_chunk(offsets, n_seg, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        for (int64_t g = lo; g < hi; g++) {
            if (offsets[g] >= offsets[g + 1])
                continue;
            for (int64_t h = 0; h < H; h++)
                edge_softmax_column(offsets[g], offsets[g + 1], H, h, scores, out);
        }
    }
    return SAGA_OK;
}

/* Per segment and head, the dot product sum out dout is taken over the whole segment before any
 * element of that column is written, which is what lets dscores be dout. */
saga_status saga_cpu_edge_softmax_bwd_f32(saga_stream *s, const int64_t *offsets, int64_t n_seg,
                                          int64_t H, const float *out, const float *dout,
                                          float *dscores) {
    saga_cpu_stream_drain(s);
    if (n_seg <= 0 || H <= 0)
        return SAGA_OK;
    const int nt = saga_cpu_nn_threads(s, (n_seg + (offsets[n_seg] - offsets[0])) * H);
#pragma omp parallel num_threads(nt)
    {
        int64_t lo, hi;
        cost_chunk(offsets, n_seg, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        for (int64_t g = lo; g < hi; g++) {
            const int64_t r0 = offsets[g], r1 = offsets[g + 1];
            for (int64_t h = 0; h < H; h++) {
                double acc = 0.0;
                for (int64_t r = r0; r < r1; r++)
                    acc += (double)out[r * H + h] * dout[r * H + h];
                const float dot = (float)acc;
                for (int64_t r = r0; r < r1; r++)
                    dscores[r * H + h] = out[r * H + h] * (dout[r * H + h] - dot);
            }
        }
    }
    return SAGA_OK;
}
