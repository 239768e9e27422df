/* nn_dense.c - CPU kernels of the neural-network layer on dense f32 arrays: GEMM (OpenBLAS),
 * bias, activations, dropout, element-wise arithmetic, softmax, losses, sums, optimizers.
 *
 * Every loop is an OpenMP loop with a static schedule. Element-wise kernels give the same bits
 * for any thread count. Reductions give the same bits for a given thread count: each thread
 * reduces a fixed contiguous chunk in double and the partials are added in thread order. */
#include "nn_kernels.h"

#include "cpu_isa_impl.h"

#include <cblas.h>
#include <immintrin.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <string.h>

int64_t saga_cpu_nn_min_parallel_work = 1 << 15;

int saga_cpu_nn_threads(const saga_stream *s, int64_t work) {
    if (work < saga_cpu_nn_min_parallel_work)
        return 1;
    int t =
        s && s->be && s->be->params.n_threads > 0 ? s->be->params.n_threads : omp_get_max_threads();
    return t < 1 ? 1 : t > SAGA_CPU_NN_MAX_THREADS ? SAGA_CPU_NN_MAX_THREADS : t;
}

/* ---- GEMM -------------------------------------------------------------------------------- */

/* C = beta C over an M x N block (beta == 0 clears without reading C). */
static void scale_block(saga_stream *s, int64_t M, int64_t N, float beta, float *C, int64_t ldc) {
    if (beta == 1.0f)
        return;
#pragma omp parallel for schedule(static) num_threads(saga_cpu_nn_threads(s, M *N))
    for (int64_t i = 0; i < M; i++) {
        float *c = C + i * ldc;
        if (beta == 0.0f) {
            for (int64_t j = 0; j < N; j++)
                c[j] = 0.0f;
        } else {
            for (int64_t j = 0; j < N; j++)
                c[j] *= beta;
        }
    }
}

/* One pool of threads, OpenMP's: OpenBLAS is told to stay on the calling thread, and the rows of
 * C are split among the OpenMP threads, each calling SGEMM on its own block. Two pools (OpenBLAS
 * starts its own pthreads) fight for the cores: the idle OpenMP threads spin while OpenBLAS
 * works and the other way round, which on two cores cost more than the products themselves.
 * Every element of C is still one SGEMM's dot product over the whole of K. */
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static void blas_single_thread(void) {
    openblas_set_num_threads(1);
}

static void gemm_rows(bool trans_a, bool trans_b, int64_t m0, int64_t m1, int64_t N, int64_t K,
                      float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                      float beta, float *C, int64_t ldc) {
    if (m1 <= m0)
        return;
    /* Rows m0..m1 of op(A): rows of A, or columns of A when transposed. */
    const float *a = trans_a ? A + m0 : A + m0 * lda;
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, (int)(m1 - m0), (int)N, (int)K, alpha, a,
                (int)lda, B, (int)ldb, beta, C + m0 * ldc, (int)ldc);
}

/* ---- narrow GEMM: C = alpha A B + beta C for an untransposed A of many rows and N = 8 or 16
 * columns (a GCN layer's projection; AVX2 and FMA), or 32, 48 or 64 (an MLP's hidden layer, as
 * the Interaction Network's; AVX-512). SGEMM copies ("packs") the whole of A before multiplying,
 * and zeroes C first, which for so few columns costs about as much as the product: here A is
 * read once, in place, against B packed (K x N, under GEMM_NARROW_MAX_B floats) and kept in L1.
 * A block of R rows holds R x N accumulators in registers; every element of C is one chain of
 * fused multiply-adds over k in increasing order, so its bits do not depend on the blocking, the
 * thread split or the vector width. Other processors and widths keep SGEMM. */
enum { GEMM_NARROW_MAX_B = 4096 };

static inline __attribute__((always_inline, target("avx2,fma"))) void
narrow_block(const int R, const int V, int64_t K, float alpha, const float *A, int64_t lda,
             const float *B, float beta, float *C, int64_t ldc) {
    __m256 acc[8][2];
    for (int r = 0; r < R; r++)
        for (int v = 0; v < V; v++)
            acc[r][v] = _mm256_setzero_ps();
    for (int64_t k = 0; k < K; k++) {
        __m256 b[2];
        for (int v = 0; v < V; v++)
            b[v] = _mm256_loadu_ps(B + k * 8 * V + 8 * v);
        for (int r = 0; r < R; r++) {
            const __m256 a = _mm256_broadcast_ss(A + r * lda + k);
            for (int v = 0; v < V; v++)
                acc[r][v] = _mm256_fmadd_ps(a, b[v], acc[r][v]);
        }
    }
    const __m256 al = _mm256_set1_ps(alpha), be = _mm256_set1_ps(beta);
    for (int r = 0; r < R; r++)
        for (int v = 0; v < V; v++) {
            float *c = C + r * ldc + 8 * v;
            __m256 y = _mm256_mul_ps(al, acc[r][v]);
            if (beta != 0.0f)
                y = _mm256_add_ps(y, _mm256_mul_ps(be, _mm256_loadu_ps(c)));
            _mm256_storeu_ps(c, y);
        }
}

/* Rows [m0, m1) of C; V = N / 8 vectors per row, in blocks of 32 / (4 V) rows, then one by one. */
__attribute__((target("avx2,fma"))) static void
gemm_narrow_rows(int64_t m0, int64_t m1, int V, int64_t K, float alpha, const float *A, int64_t lda,
                 const float *B, float beta, float *C, int64_t ldc) {
    int64_t i = m0;
    if (V == 2) {
        for (; i + 4 <= m1; i += 4)
            narrow_block(4, 2, K, alpha, A + i * lda, lda, B, beta, C + i * ldc, ldc);
        for (; i < m1; i++)
            narrow_block(1, 2, K, alpha, A + i * lda, lda, B, beta, C + i * ldc, ldc);
    } else {
        for (; i + 8 <= m1; i += 8)
            narrow_block(8, 1, K, alpha, A + i * lda, lda, B, beta, C + i * ldc, ldc);
        for (; i < m1; i++)
            narrow_block(1, 1, K, alpha, A + i * lda, lda, B, beta, C + i * ldc, ldc);
    }
}

/* narrow_block with V 16-float vectors per row (AVX-512: 32 registers hold R x V accumulators,
 * B's V vectors of row k and A's broadcast). */
static inline __attribute__((always_inline, target("avx512f,fma"))) void
narrow_block16(const int R, const int V, int64_t K, float alpha, const float *A, int64_t lda,
               const float *B, float beta, float *C, int64_t ldc) {
    __m512 acc[8][4];
    for (int r = 0; r < R; r++)
        for (int v = 0; v < V; v++)
            acc[r][v] = _mm512_setzero_ps();
    for (int64_t k = 0; k < K; k++) {
        __m512 b[4];
        for (int v = 0; v < V; v++)
            b[v] = _mm512_loadu_ps(B + k * 16 * V + 16 * v);
        for (int r = 0; r < R; r++) {
            const __m512 a = _mm512_set1_ps(A[r * lda + k]);
            for (int v = 0; v < V; v++)
                acc[r][v] = _mm512_fmadd_ps(a, b[v], acc[r][v]);
        }
    }
    const __m512 al = _mm512_set1_ps(alpha), be = _mm512_set1_ps(beta);
    for (int r = 0; r < R; r++)
        for (int v = 0; v < V; v++) {
            float *c = C + r * ldc + 16 * v;
            __m512 y = _mm512_mul_ps(al, acc[r][v]);
            if (beta != 0.0f)
                y = _mm512_add_ps(y, _mm512_mul_ps(be, _mm512_loadu_ps(c)));
            _mm512_storeu_ps(c, y);
        }
}

/* Rows [m0, m1) of C; V = N / 16 vectors per row (2 to 4), in blocks of 8 rows (V = 2) or 4,
 * then one by one. */
__attribute__((target("avx512f,fma"))) static void
gemm_narrow16_rows(int64_t m0, int64_t m1, int V, int64_t K, float alpha, const float *A,
                   int64_t lda, const float *B, float beta, float *C, int64_t ldc) {
    int64_t i = m0;
#define NARROW16_ROWS(R_, V_)                                                                      \
    do {                                                                                           \
        for (; i + (R_) <= m1; i += (R_))                                                          \
            narrow_block16((R_), (V_), K, alpha, A + i * lda, lda, B, beta, C + i * ldc, ldc);     \
        for (; i < m1; i++)                                                                        \
            narrow_block16(1, (V_), K, alpha, A + i * lda, lda, B, beta, C + i * ldc, ldc);        \
    } while (0)
    if (V == 2)
        NARROW16_ROWS(8, 2);
    else if (V == 3)
        NARROW16_ROWS(4, 3);
    else
        NARROW16_ROWS(4, 4);
#undef NARROW16_ROWS
}

static bool gemm_narrow_fits(bool trans_a, int64_t N, int64_t K) {
    if (trans_a || K * N > GEMM_NARROW_MAX_B)
        return false;
    if (N == 8 || N == 16)
        return saga_cpu_isa() >= SAGA_CPU_ISA_AVX2;
    return (N == 32 || N == 48 || N == 64) && saga_cpu_isa() >= SAGA_CPU_ISA_AVX512;
}

static void gemm_narrow(saga_stream *s, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                        const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                        float *C, int64_t ldc) {
    float b[GEMM_NARROW_MAX_B];
    for (int64_t k = 0; k < K; k++)
        for (int64_t j = 0; j < N; j++)
            b[k * N + j] = trans_b ? B[j * ldb + k] : B[k * ldb + j];
#pragma omp parallel num_threads(saga_cpu_nn_threads(s, M *N *(K / 8 + 1)))
    {
        int64_t lo, hi;
        saga_cpu_nn_chunk(M, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        if (N <= 16)
            gemm_narrow_rows(lo, hi, (int)(N / 8), K, alpha, A, lda, b, beta, C, ldc);
        else
            gemm_narrow16_rows(lo, hi, (int)(N / 16), K, alpha, A, lda, b, beta, C, ldc);
    }
}

/* ---- narrow weight gradient: C = alpha A^T B + beta C for A (Kr x M) and B (Kr x N) of many
 * rows Kr, with M x N at most GEMM_NARROW_MAX_B and N = 32, 48 or 64 (an MLP's weight gradient,
 * X^T dY; AVX-512; a GCN layer's 8 or 16 columns keep SGEMM). SGEMM packs both operands for a
 * product this small; here each thread sums its range of rows in place, a chunk of rows at a time
 * (kept in L1 and L2 while D columns of A at a time meet all of B's row), into its own M x N
 * partial, and the partials are added in thread order: each element is one chain of fused
 * multiply-adds per thread, in increasing row order, so its bits depend on the thread count alone.
 */
enum { GEMM_TN_CHUNK = 128 };

static inline __attribute__((always_inline, target("avx512f,fma"))) void
tn_block(const int D, const int V, int64_t r0, int64_t r1, const float *A, int64_t lda,
         const float *B, int64_t ldb, float *P, int64_t N) {
    __m512 acc[8][4];
    for (int d = 0; d < D; d++)
        for (int v = 0; v < V; v++)
            acc[d][v] = _mm512_loadu_ps(P + d * N + 16 * v);
    for (int64_t r = r0; r < r1; r++) {
        __m512 b[4];
        for (int v = 0; v < V; v++)
            b[v] = _mm512_loadu_ps(B + r * ldb + 16 * v);
        for (int d = 0; d < D; d++) {
            const __m512 a = _mm512_set1_ps(A[r * lda + d]);
            for (int v = 0; v < V; v++)
                acc[d][v] = _mm512_fmadd_ps(a, b[v], acc[d][v]);
        }
    }
    for (int d = 0; d < D; d++)
        for (int v = 0; v < V; v++)
            _mm512_storeu_ps(P + d * N + 16 * v, acc[d][v]);
}

/* tn_block for the run-time D and V gemm_tn_rows picks (each pair a compiled instance). */
__attribute__((target("avx512f,fma"))) static void tn_block_any(int D, int V, int64_t r0,
                                                                int64_t r1, const float *A,
                                                                int64_t lda, const float *B,
                                                                int64_t ldb, float *P, int64_t N) {
#define TN(D_, V_)                                                                                 \
    if (D == (D_) && V == (V_)) {                                                                  \
        tn_block((D_), (V_), r0, r1, A, lda, B, ldb, P, N);                                        \
        return;                                                                                    \
    }
    TN(8, 2) TN(4, 2) TN(2, 2) TN(1, 2) TN(4, 3) TN(2, 3) TN(1, 3) TN(4, 4) TN(2, 4) TN(1, 4)
#undef TN
}

/* Rows [r0, r1) into the partial P (M x N, zeroed by the caller; V = N / 16, 2 to 4): columns of
 * A by 8 (V = 2) or 4, then 2 and 1, over chunks of GEMM_TN_CHUNK rows. */
static void gemm_tn_rows(int64_t r0, int64_t r1, int64_t M, int V, const float *A, int64_t lda,
                         const float *B, int64_t ldb, float *P, int64_t N) {
    const int wide = V <= 2 ? 8 : 4;
    for (int64_t c0 = r0; c0 < r1; c0 += GEMM_TN_CHUNK) {
        const int64_t c1 = c0 + GEMM_TN_CHUNK < r1 ? c0 + GEMM_TN_CHUNK : r1;
        int D;
        for (int64_t m = 0; m < M; m += D) {
            D = M - m >= wide ? wide : M - m >= 4 ? 4 : M - m >= 2 ? 2 : 1;
            tn_block_any(D, V, c0, c1, A + m, lda, B, ldb, P + m * N, N);
        }
    }
}

static bool gemm_tn_fits(bool trans_a, bool trans_b, int64_t M, int64_t N) {
    return trans_a && !trans_b && (N == 32 || N == 48 || N == 64) && M * N <= GEMM_NARROW_MAX_B &&
           saga_cpu_isa() >= SAGA_CPU_ISA_AVX512;
}

/* SAGA_OK, or SAGA_ERR_OUT_OF_MEMORY without the partials' memory (then SGEMM runs instead). */
static saga_status gemm_tn(saga_stream *s, int64_t M, int64_t N, int64_t K, float alpha,
                           const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                           float *C, int64_t ldc) {
    const int nt = saga_cpu_nn_threads(s, M * N * (K / 8 + 1));
    float *P = saga_malloc((size_t)nt * (size_t)(M * N) * sizeof *P);
    if (!P)
        return SAGA_ERR_OUT_OF_MEMORY;
    memset(P, 0, (size_t)nt * (size_t)(M * N) * sizeof *P);
#pragma omp parallel num_threads(nt)
    {
        const int id = omp_get_thread_num();
        int64_t lo, hi;
        saga_cpu_nn_chunk(K, id, omp_get_num_threads(), &lo, &hi);
        gemm_tn_rows(lo, hi, M, (int)(N / 16), A, lda, B, ldb, P + (int64_t)id * M * N, N);
    }
    for (int t = 1; t < nt; t++)
        for (int64_t i = 0; i < M * N; i++)
            P[i] += P[(int64_t)t * M * N + i];
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            float y = alpha * P[i * N + j];
            if (beta != 0.0f)
                y += beta * C[i * ldc + j];
            C[i * ldc + j] = y;
        }
    saga_free(P);
    return SAGA_OK;
}

saga_status saga_cpu_gemm_f32(saga_stream *s, bool trans_a, bool trans_b, int64_t M, int64_t N,
                              int64_t K, float alpha, const float *A, int64_t lda, const float *B,
                              int64_t ldb, float beta, float *C, int64_t ldc) {
    saga_cpu_stream_drain(s);
    if (M <= 0 || N <= 0)
        return SAGA_OK;
    if (M > INT_MAX || N > INT_MAX || K > INT_MAX || lda > INT_MAX || ldb > INT_MAX ||
        ldc > INT_MAX)
        return saga_error(SAGA_ERR_UNSUPPORTED,
                          "gemm_f32: M=%lld N=%lld K=%lld (lda %lld, ldb %lld, ldc %lld) passes "
                          "the 32-bit integer range of the BLAS",
                          (long long)M, (long long)N, (long long)K, (long long)lda, (long long)ldb,
                          (long long)ldc);
    /* BLAS implementations disagree on whether K == 0 still scales C; do it here. */
    if (K <= 0 || alpha == 0.0f) {
        scale_block(s, M, N, beta, C, ldc);
        return SAGA_OK;
    }
    if (gemm_narrow_fits(trans_a, N, K)) {
        gemm_narrow(s, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return SAGA_OK;
    }
    if (gemm_tn_fits(trans_a, trans_b, M, N) &&
        gemm_tn(s, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc) == SAGA_OK)
        return SAGA_OK;
    pthread_once(&blas_once, blas_single_thread);
    /* Work in multiply-adds, scaled so that the threshold (elements touched) means the same. */
    int nt = saga_cpu_nn_threads(s, M * N * (K / 8 + 1));
    if (nt > M / 16)
        nt = (int)(M / 16) > 1 ? (int)(M / 16) : 1;
    if (nt <= 1) {
        gemm_rows(trans_a, trans_b, 0, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return SAGA_OK;
    }
#pragma omp parallel num_threads(nt)
    {
        int64_t lo, hi;
        saga_cpu_nn_chunk(M, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        gemm_rows(trans_a, trans_b, lo, hi, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    }
    return SAGA_OK;
}

/* ---- bias -------------------------------------------------------------------------------- */

/* The elementwise kernels below run their rows in spans built for the processor's vector width
 * (SAGA_CPU_ISA_CLONES_V4; this file is compiled without contracting a * b + c, so every build
 * gives the same bits). */
static inline __attribute__((always_inline)) void
bias_add_span_body(int64_t lo, int64_t hi, int64_t cols, const float *x, const float *b, float *y) {
    for (int64_t i = lo; i < hi; i++) {
        const float *xi = x + i * cols;
        float *yi = y + i * cols;
        for (int64_t j = 0; j < cols; j++)
            yi[j] = xi[j] + b[j];
    }
}

SAGA_CPU_ISA_CLONES_V4(bias_add_span,
                       (int64_t lo, int64_t hi, int64_t cols, const float *x, const float *b,
                        float *y),
                       (lo, hi, cols, x, b, y))

saga_status saga_cpu_bias_add_f32(saga_stream *s, int64_t rows, int64_t cols, const float *x,
                                  const float *b, float *y) {
    saga_cpu_stream_drain(s);
#pragma omp parallel num_threads(saga_cpu_nn_threads(s, rows *cols))
    {
        int64_t lo, hi;
        saga_cpu_nn_chunk(rows, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        bias_add_span(lo, hi, cols, x, b, y);
    }
    return SAGA_OK;
}

enum { COLSUM_STACK = 1024 }; /* doubles of per-thread partials kept on the stack */
enum { COLSUM_LOCAL = 64 };   /* columns a thread sums in its own array */

/* acc[0 .. cols) = the sums of rows [lo, hi) of x by column, in f64, in row order. */
static inline __attribute__((always_inline)) void
colsum_span_body(int64_t lo, int64_t hi, int64_t cols, const float *x, double *acc) {
    for (int64_t j = 0; j < cols; j++)
        acc[j] = 0.0;
    for (int64_t i = lo; i < hi; i++) {
        const float *xi = x + i * cols;
        for (int64_t j = 0; j < cols; j++)
            acc[j] += xi[j];
    }
}

SAGA_CPU_ISA_CLONES_V4(colsum_span,
                       (int64_t lo, int64_t hi, int64_t cols, const float *x, double *acc),
                       (lo, hi, cols, x, acc))

saga_status saga_cpu_colsum_f32(saga_stream *s, int64_t rows, int64_t cols, const float *x,
                                float beta, float *out) {
    saga_cpu_stream_drain(s);
    saga_status st = SAGA_OK;
    double stack[COLSUM_STACK];
    double *part = stack;
    if (cols <= 0)
        return SAGA_OK;
    int nt = saga_cpu_nn_threads(s, rows * cols);
    if ((int64_t)nt * cols > COLSUM_STACK)
        SAGA_TRY(saga_alloc_array((void **)&part, (size_t)nt * (size_t)cols, sizeof *part,
                                  "colsum_f32 partial sums"));
    int used = 1;
#pragma omp parallel num_threads(nt)
    {
        int id = omp_get_thread_num(), n_th = omp_get_num_threads();
        int64_t lo, hi;
        saga_cpu_nn_chunk(rows, id, n_th, &lo, &hi);
        /* summed in a local array when the row is short: the threads' partials sit side by
         * side in part, where writing them on every row would bounce shared cache lines */
        double local[COLSUM_LOCAL];
        double *acc = cols <= COLSUM_LOCAL ? local : part + (int64_t)id * cols;
        colsum_span(lo, hi, cols, x, acc);
        if (acc == local)
            memcpy(part + (int64_t)id * cols, local, (size_t)cols * sizeof *local);
        if (id == 0)
            used = n_th;
    }
    for (int64_t j = 0; j < cols; j++) {
        double sum = part[j];
        for (int t = 1; t < used; t++)
            sum += part[(int64_t)t * cols + j];
        out[j] = beta == 0.0f ? (float)sum : (float)(sum + (double)beta * out[j]);
    }
fail:
    if (part != stack)
        saga_free(part);
    return st;
}

/* ---- activations ------------------------------------------------------------------------- */

static saga_status bad_act(const char *what, saga_act kind) {
    return saga_error(SAGA_ERR_INVALID_ARG, "%s: unknown activation %d", what, (int)kind);
}

/* e^v for v in [0, 20], branch-free so that a loop of it vectorises: v = n ln2 + r with |r| <=
 * ln2 / 2 (ln2 split in two for an exact n ln2), e^r by its Taylor series to r^7 (truncation
 * below 6e-9 relative), 2^n put in the exponent bits. */
static inline float exp_0_20(float v) {
    int32_t n = (int32_t)(v * 1.44269504f + 0.5f); /* v >= 0: the truncation rounds */
    float r = v - (float)n * 0.693145751953125f - (float)n * 1.4286068203e-6f;
    float p =
        1.0f +
        r * (1.0f +
             r * (0.5f +
                  r * (1.0f / 6 +
                       r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720 + r * (1.0f / 5040)))))));
    int32_t bits = (n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* tanh without a call into libm, so that the loop over a tensor vectorises (glibc's tanhf, a
 * scalar call through expm1f, took a third of an Interaction Network's training step). |x| <
 * 0.55: the odd Taylor series to x^15 (the next term is below 3e-8 there); beyond: 1 - 2 / (e^2|x|
 * + 1) with the sign of x, |x| capped at 10 (tanh rounds to 1 in float from about 9.01); NaN stays
 * NaN. Within about 2e-7 of tanh relative (tests/test_nn_kernels.c sweeps it against the double
 * tanh). */
static inline float tanh_f32(float x) {
    float a = fabsf(x), x2 = x * x;
    a = a < 10.0f ? a : 10.0f; /* NaN: 10, and NaN is given back below */
    /* tanh x = x (1 - x^2/3 + 2x^4/15 - 17x^6/315 + ...), by Horner from the x^14 term down */
    float p = -929569.0f / 638512875;
    p = p * x2 + 21844.0f / 6081075;
    p = p * x2 - 1382.0f / 155925;
    p = p * x2 + 62.0f / 2835;
    p = p * x2 - 17.0f / 315;
    p = p * x2 + 2.0f / 15;
    p = p * x2 - 1.0f / 3;
    float small = x * (1.0f + x2 * p); /* x times: tanh(-0) stays -0 */
    float big = copysignf(1.0f - 2.0f / (exp_0_20(2.0f * a) + 1.0f), x);
    float y = a < 0.55f ? small : big;
    return x != x ? x : y;
}

/* tanh_f32 on eight values with AVX2, operation for operation (no FMA: each product and sum
 * rounds as in the scalar code), so the same bits. GCC leaves the scalar function's loop
 * unvectorised in an AVX2 clone (its selects stay branches), and SSE's four lanes are half. */
__attribute__((target("avx2"))) static __m256 tanh_avx2(__m256 x) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 a = _mm256_andnot_ps(sign, x), x2 = _mm256_mul_ps(x, x);
    /* a < 10 ? a : 10, NaN to 10 as in the scalar code: min's second operand wins a NaN */
    a = _mm256_min_ps(a, _mm256_set1_ps(10.0f));
    __m256 p = _mm256_set1_ps(-929569.0f / 638512875);
    p = _mm256_add_ps(_mm256_mul_ps(p, x2), _mm256_set1_ps(21844.0f / 6081075));
    p = _mm256_sub_ps(_mm256_mul_ps(p, x2), _mm256_set1_ps(1382.0f / 155925));
    p = _mm256_add_ps(_mm256_mul_ps(p, x2), _mm256_set1_ps(62.0f / 2835));
    p = _mm256_sub_ps(_mm256_mul_ps(p, x2), _mm256_set1_ps(17.0f / 315));
    p = _mm256_add_ps(_mm256_mul_ps(p, x2), _mm256_set1_ps(2.0f / 15));
    p = _mm256_sub_ps(_mm256_mul_ps(p, x2), _mm256_set1_ps(1.0f / 3));
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 small = _mm256_mul_ps(x, _mm256_add_ps(one, _mm256_mul_ps(x2, p)));
    /* exp_0_20(2 a) */
    __m256 v = _mm256_mul_ps(_mm256_set1_ps(2.0f), a);
    __m256i n = _mm256_cvttps_epi32(
        _mm256_add_ps(_mm256_mul_ps(v, _mm256_set1_ps(1.44269504f)), _mm256_set1_ps(0.5f)));
    __m256 nf = _mm256_cvtepi32_ps(n);
    __m256 r =
        _mm256_sub_ps(_mm256_sub_ps(v, _mm256_mul_ps(nf, _mm256_set1_ps(0.693145751953125f))),
                      _mm256_mul_ps(nf, _mm256_set1_ps(1.4286068203e-6f)));
    __m256 e = _mm256_set1_ps(1.0f / 5040);
    e = _mm256_add_ps(_mm256_set1_ps(1.0f / 720), _mm256_mul_ps(r, e));
    e = _mm256_add_ps(_mm256_set1_ps(1.0f / 120), _mm256_mul_ps(r, e));
    e = _mm256_add_ps(_mm256_set1_ps(1.0f / 24), _mm256_mul_ps(r, e));
    e = _mm256_add_ps(_mm256_set1_ps(1.0f / 6), _mm256_mul_ps(r, e));
    e = _mm256_add_ps(_mm256_set1_ps(0.5f), _mm256_mul_ps(r, e));
    e = _mm256_add_ps(one, _mm256_mul_ps(r, e));
    e = _mm256_add_ps(one, _mm256_mul_ps(r, e));
    __m256 scale =
        _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
    e = _mm256_mul_ps(e, scale);
    __m256 big = _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one)));
    big = _mm256_or_ps(_mm256_andnot_ps(sign, big), _mm256_and_ps(sign, x)); /* copysignf */
    __m256 y = _mm256_blendv_ps(big, small, _mm256_cmp_ps(a, _mm256_set1_ps(0.55f), _CMP_LT_OQ));
    return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q)); /* NaN stays */
}

__attribute__((target("avx2"))) static void tanh_span_avx2(int64_t n, const float *x, float *y) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, tanh_avx2(_mm256_loadu_ps(x + i)));
    for (; i < n; i++)
        y[i] = tanh_f32(x[i]);
}

/* tanh_avx2 on sixteen values with AVX-512, operation for operation: the same bits. */
__attribute__((target("avx512f,avx512dq"))) static __m512 tanh_avx512(__m512 x) {
    const __m512 sign = _mm512_set1_ps(-0.0f);
    __m512 a = _mm512_andnot_ps(sign, x), x2 = _mm512_mul_ps(x, x);
    a = _mm512_min_ps(a, _mm512_set1_ps(10.0f)); /* NaN to 10: min's second operand wins */
    __m512 p = _mm512_set1_ps(-929569.0f / 638512875);
    p = _mm512_add_ps(_mm512_mul_ps(p, x2), _mm512_set1_ps(21844.0f / 6081075));
    p = _mm512_sub_ps(_mm512_mul_ps(p, x2), _mm512_set1_ps(1382.0f / 155925));
    p = _mm512_add_ps(_mm512_mul_ps(p, x2), _mm512_set1_ps(62.0f / 2835));
    p = _mm512_sub_ps(_mm512_mul_ps(p, x2), _mm512_set1_ps(17.0f / 315));
    p = _mm512_add_ps(_mm512_mul_ps(p, x2), _mm512_set1_ps(2.0f / 15));
    p = _mm512_sub_ps(_mm512_mul_ps(p, x2), _mm512_set1_ps(1.0f / 3));
    const __m512 one = _mm512_set1_ps(1.0f);
    __m512 small = _mm512_mul_ps(x, _mm512_add_ps(one, _mm512_mul_ps(x2, p)));
    __m512 v = _mm512_mul_ps(_mm512_set1_ps(2.0f), a);
    __m512i n = _mm512_cvttps_epi32(
        _mm512_add_ps(_mm512_mul_ps(v, _mm512_set1_ps(1.44269504f)), _mm512_set1_ps(0.5f)));
    __m512 nf = _mm512_cvtepi32_ps(n);
    __m512 r =
        _mm512_sub_ps(_mm512_sub_ps(v, _mm512_mul_ps(nf, _mm512_set1_ps(0.693145751953125f))),
                      _mm512_mul_ps(nf, _mm512_set1_ps(1.4286068203e-6f)));
    __m512 e = _mm512_set1_ps(1.0f / 5040);
    e = _mm512_add_ps(_mm512_set1_ps(1.0f / 720), _mm512_mul_ps(r, e));
    e = _mm512_add_ps(_mm512_set1_ps(1.0f / 120), _mm512_mul_ps(r, e));
    e = _mm512_add_ps(_mm512_set1_ps(1.0f / 24), _mm512_mul_ps(r, e));
    e = _mm512_add_ps(_mm512_set1_ps(1.0f / 6), _mm512_mul_ps(r, e));
    e = _mm512_add_ps(_mm512_set1_ps(0.5f), _mm512_mul_ps(r, e));
    e = _mm512_add_ps(one, _mm512_mul_ps(r, e));
    e = _mm512_add_ps(one, _mm512_mul_ps(r, e));
    __m512 scale =
        _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n, _mm512_set1_epi32(127)), 23));
    e = _mm512_mul_ps(e, scale);
    __m512 big = _mm512_sub_ps(one, _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, one)));
    big = _mm512_or_ps(_mm512_andnot_ps(sign, big), _mm512_and_ps(sign, x)); /* copysignf */
    __m512 y =
        _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, _mm512_set1_ps(0.55f), _CMP_LT_OQ), big, small);
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, x); /* NaN stays */
}

__attribute__((target("avx512f,avx512dq"))) static void tanh_span_avx512(int64_t n, const float *x,
                                                                         float *y) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, tanh_avx512(_mm512_loadu_ps(x + i)));
    for (; i < n; i++)
        y[i] = tanh_f32(x[i]);
}

/* tanh_f32 over n values: AVX-512 or AVX2 where the processor has them, else the scalar loop
 * (SSE); every path the same bits. */
static void tanh_span(int64_t n, const float *x, float *y) {
    if (saga_cpu_isa() >= SAGA_CPU_ISA_AVX512) {
        tanh_span_avx512(n, x, y);
        return;
    }
    if (saga_cpu_isa() >= SAGA_CPU_ISA_AVX2) {
        tanh_span_avx2(n, x, y);
        return;
    }
#pragma omp simd
    for (int64_t i = 0; i < n; i++)
        y[i] = tanh_f32(x[i]);
}

/* 1 / (1 + exp(-x)) without overflow for either sign. */
static inline float sigmoidf(float x) {
    if (x >= 0.0f)
        return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

/* y = x > 0 ? x : 0 (relu), or alpha x (leaky). */
static inline __attribute__((always_inline)) void relu_span_body(int64_t n, bool leaky, float alpha,
                                                                 const float *x, float *y) {
    if (!leaky)
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] > 0.0f ? x[i] : 0.0f;
    else
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] > 0.0f ? x[i] : alpha * x[i];
}

SAGA_CPU_ISA_CLONES_V4(relu_span, (int64_t n, bool leaky, float alpha, const float *x, float *y),
                       (n, leaky, alpha, x, y))

saga_status saga_cpu_act_f32(saga_stream *s, saga_act kind, int64_t n, float alpha, const float *x,
                             float *y) {
    saga_cpu_stream_drain(s);
    const int nt = saga_cpu_nn_threads(s, n);
    switch (kind) {
    case SAGA_ACT_RELU:
    case SAGA_ACT_LEAKY_RELU:
#pragma omp parallel num_threads(nt)
    {
        int64_t lo, hi;
        saga_cpu_nn_chunk(n, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        relu_span(hi - lo, kind == SAGA_ACT_LEAKY_RELU, alpha, x + lo, y + lo);
    } break;
    case SAGA_ACT_ELU:
#pragma omp parallel for schedule(static) num_threads(nt)
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] > 0.0f ? x[i] : alpha * expm1f(x[i]);
        break;
    case SAGA_ACT_SIGMOID:
#pragma omp parallel for schedule(static) num_threads(nt)
        for (int64_t i = 0; i < n; i++)
            y[i] = sigmoidf(x[i]);
        break;
    case SAGA_ACT_TANH:
#pragma omp parallel num_threads(nt)
    {
        int64_t lo, hi;
        saga_cpu_nn_chunk(n, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        tanh_span(hi - lo, x + lo, y + lo);
    } break;
    default:
        return bad_act("act_f32", kind);
    }
    return SAGA_OK;
}

/* Each kind reads what makes its derivative cheapest: the output where the derivative is a
 * function of it (no exp or tanh again), the input where the output loses the sign. Elements
 * [lo, hi); kind is one of those below. */
static inline __attribute__((always_inline)) void act_bwd_span_body(saga_act kind, int64_t lo,
                                                                    int64_t hi, float alpha,
                                                                    const float *x, const float *y,
                                                                    const float *dy, float *dx) {
    switch (kind) {
    /* dy is read whatever the sign, so that the choice is a select the loop vectorises, not a
     * branch taken at random */
    case SAGA_ACT_RELU:
        for (int64_t i = lo; i < hi; i++) {
            const float g = dy[i];
            dx[i] = y[i] > 0.0f ? g : 0.0f;
        }
        break;
    case SAGA_ACT_LEAKY_RELU:
        for (int64_t i = lo; i < hi; i++) {
            const float g = dy[i];
            dx[i] = x[i] > 0.0f ? g : alpha * g;
        }
        break;
    case SAGA_ACT_ELU: /* for x <= 0, d/dx alpha (e^x - 1) = alpha e^x = y + alpha */
        for (int64_t i = lo; i < hi; i++)
            dx[i] = x[i] > 0.0f ? dy[i] : dy[i] * (y[i] + alpha);
        break;
    case SAGA_ACT_SIGMOID:
        for (int64_t i = lo; i < hi; i++)
            dx[i] = dy[i] * (y[i] * (1.0f - y[i]));
        break;
    default: /* SAGA_ACT_TANH */
        for (int64_t i = lo; i < hi; i++)
            dx[i] = dy[i] * (1.0f - y[i] * y[i]);
        break;
    }
}

SAGA_CPU_ISA_CLONES_V4(act_bwd_span,
                       (saga_act kind, int64_t lo, int64_t hi, float alpha, const float *x,
                        const float *y, const float *dy, float *dx),
                       (kind, lo, hi, alpha, x, y, dy, dx))

saga_status saga_cpu_act_bwd_f32(saga_stream *s, saga_act kind, int64_t n, float alpha,
                                 const float *x, const float *y, const float *dy, float *dx) {
    saga_cpu_stream_drain(s);
    if (kind != SAGA_ACT_RELU && kind != SAGA_ACT_LEAKY_RELU && kind != SAGA_ACT_ELU &&
        kind != SAGA_ACT_SIGMOID && kind != SAGA_ACT_TANH)
        return bad_act("act_bwd_f32", kind);
#pragma omp parallel num_threads(saga_cpu_nn_threads(s, n))
    {
        int64_t lo, hi;
        saga_cpu_nn_chunk(n, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        act_bwd_span(kind, lo, hi, alpha, x, y, dy, dx);
    }
    return SAGA_OK;
}

/* ---- dropout ----------------------------------------------------------------------------- */

/* The splitmix64 finalizer: a bijection of 64-bit words whose outputs pass BigCrush for
 * consecutive inputs. A counter-based draw: element i needs no state from element i - 1. */
static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The mask's scalars. The seed is mixed first so that seeds differing by the counter step do not
 * give shifted copies of one mask. keep <=> u >= p with u = (z >> 40) 2^-24 <=> (z >> 40) >=
 * thr = ceil(p 2^24), exactly (p 2^24 is exact in a float). */
typedef struct dropout_mask {
    uint64_t key, thr;
    float scale;
} dropout_mask;

static saga_status dropout_mask_for(const char *slot, float p, uint64_t seed, dropout_mask *m) {
    if (!(p >= 0.0f && p < 1.0f))
        return saga_error(SAGA_ERR_INVALID_ARG, "%s: p must be in [0, 1), got %g", slot, (double)p);
    m->key = mix64(seed);
    m->thr = (uint64_t)ceilf(p * 0x1p24f);
    m->scale = 1.0f / (1.0f - p);
    return SAGA_OK;
}

/* y[i] = x[i] * scale or +0 (also for a NaN or infinite x) for the n elements whose mask indices
 * follow the one of counter c0 = key + 0x9E3779B97F4A7C15 (index + 1), the draw of the first.
 * Written so that the compiler vectorises it (AVX-512 with its 64-bit multiply, vpmullq, or AVX2
 * where the processor has them; SSE2 has no 64-bit multiply): a select by bit mask, not a branch
 * taken at random, and the test on the top 24 bits of mix64's last product, which its final
 * xor-shift (z ^ z >> 31) does not change: (z >> 40) >= thr <=> z >= thr 2^40. y may be x. */
static inline __attribute__((always_inline)) void
dropout_span_body(const dropout_mask *m, uint64_t c0, int64_t n, const float *x, float *y) {
    const uint64_t thr = m->thr << 40;
    const float scale = m->scale;
    for (int64_t i = 0; i < n; i++) {
        uint64_t z = c0 + 0x9E3779B97F4A7C15ull * (uint64_t)i;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        const uint32_t mask = 0u - (uint32_t)(z >= thr);
        float v = x[i] * scale;
        uint32_t bits;
        memcpy(&bits, &v, sizeof bits);
        bits &= mask;
        memcpy(&y[i], &bits, sizeof bits);
    }
}

SAGA_CPU_ISA_CLONES_V4(dropout_span,
                       (const dropout_mask *m, uint64_t c0, int64_t n, const float *x, float *y),
                       (m, c0, n, x, y))

saga_status saga_cpu_dropout_f32(saga_stream *s, int64_t n, float p, uint64_t seed, int64_t first,
                                 const float *x, float *y) {
    saga_cpu_stream_drain(s);
    dropout_mask m;
    saga_status st = dropout_mask_for("dropout_f32", p, seed, &m);
    if (st < 0)
        return st;
    if (first < 0)
        return saga_error(SAGA_ERR_INVALID_ARG, "dropout_f32: first element index %lld < 0",
                          (long long)first);
    const int nt = saga_cpu_nn_threads(s, n);
    if (p == 0.0f) {
        if (x != y) {
#pragma omp parallel for schedule(static) num_threads(nt)
            for (int64_t i = 0; i < n; i++)
                y[i] = x[i];
        }
        return SAGA_OK;
    }
#pragma omp parallel num_threads(nt) firstprivate(m)
    {
        int64_t lo, hi;
        saga_cpu_nn_chunk(n, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        dropout_span(&m, m.key + 0x9E3779B97F4A7C15ull * (uint64_t)(first + lo + 1), hi - lo,
                     x + lo, y + lo);
    }
    return SAGA_OK;
}

saga_status saga_cpu_dropout_rows_f32(saga_stream *s, int64_t rows, int64_t cols, float p,
                                      uint64_t seed, const int32_t *row_ids, const float *x,
                                      float *y) {
    saga_cpu_stream_drain(s);
    dropout_mask m;
    saga_status st = dropout_mask_for("dropout_rows_f32", p, seed, &m);
    if (st < 0)
        return st;
    const int nt = saga_cpu_nn_threads(s, rows * cols);
#pragma omp parallel for schedule(static) num_threads(nt) firstprivate(m)
    for (int64_t r = 0; r < rows; r++) {
        /* the loop of dropout_f32 over one row, from the row's place in the whole tensor */
        dropout_span(&m,
                     m.key + 0x9E3779B97F4A7C15ull * ((uint64_t)row_ids[r] * (uint64_t)cols + 1),
                     cols, x + r * cols, y + r * cols);
    }
    return SAGA_OK;
}

/* One CSR row's entries (columns idx, values val or ones) through the mask of dropout_span, c0
 * being the counter of the row's column 0; vectorised as dropout_span is. y may be val. */
static inline __attribute__((always_inline)) void dropout_csr_row_body(const dropout_mask *m,
                                                                       uint64_t c0, int64_t n,
                                                                       const int32_t *idx,
                                                                       const float *val, float *y) {
    const uint64_t thr = m->thr << 40;
    const float scale = m->scale;
    for (int64_t k = 0; k < n; k++) {
        uint64_t z = c0 + 0x9E3779B97F4A7C15ull * (uint64_t)(uint32_t)idx[k];
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        const uint32_t mask = 0u - (uint32_t)(z >= thr);
        float v = (val ? val[k] : 1.0f) * scale;
        uint32_t bits;
        memcpy(&bits, &v, sizeof bits);
        bits &= mask;
        memcpy(&y[k], &bits, sizeof bits);
    }
}

SAGA_CPU_ISA_CLONES_V4(dropout_csr_row,
                       (const dropout_mask *m, uint64_t c0, int64_t n, const int32_t *idx,
                        const float *val, float *y),
                       (m, c0, n, idx, val, y))

saga_status saga_cpu_dropout_csr_f32(saga_stream *s, const saga_csr_dev *A, float p, uint64_t seed,
                                     int64_t row_base, const int32_t *row_ids, float *y) {
    saga_cpu_stream_drain(s);
    dropout_mask m;
    saga_status st = dropout_mask_for("dropout_csr_f32", p, seed, &m);
    if (st < 0)
        return st;
    const uint64_t cols = (uint64_t)A->n_cols;
    const int64_t *off = A->offsets;
    const int nt = saga_cpu_nn_threads(s, A->nnz);
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t i = 0; i < A->n_rows; i++) {
        const uint64_t r = row_ids ? (uint64_t)row_ids[i] : (uint64_t)(row_base + i);
        /* dropout_span's draw for element r * cols + column: the counter of column 0, plus the
         * column's multiple of the increment */
        dropout_csr_row(&m, m.key + 0x9E3779B97F4A7C15ull * (r * cols + 1), off[i + 1] - off[i],
                        A->indices + off[i], A->values ? A->values + off[i] : NULL, y + off[i]);
    }
    return SAGA_OK;
}

/* ---- element-wise ------------------------------------------------------------------------ */

saga_status saga_cpu_binary_f32(saga_stream *s, saga_binop op, int64_t n, const float *x,
                                const float *y, float *z) {
    saga_cpu_stream_drain(s);
    const int nt = saga_cpu_nn_threads(s, n);
    switch (op) {
    case SAGA_BINOP_ADD:
#pragma omp parallel for schedule(static) num_threads(nt)
        for (int64_t i = 0; i < n; i++)
            z[i] = x[i] + y[i];
        break;
    case SAGA_BINOP_SUB:
#pragma omp parallel for schedule(static) num_threads(nt)
        for (int64_t i = 0; i < n; i++)
            z[i] = x[i] - y[i];
        break;
    case SAGA_BINOP_MUL:
#pragma omp parallel for schedule(static) num_threads(nt)
        for (int64_t i = 0; i < n; i++)
            z[i] = x[i] * y[i];
        break;
    case SAGA_BINOP_DIV:
#pragma omp parallel for schedule(static) num_threads(nt)
        for (int64_t i = 0; i < n; i++)
            z[i] = x[i] / y[i];
        break;
    default:
        return saga_error(SAGA_ERR_INVALID_ARG, "binary_f32: unknown operation %d", (int)op);
    }
    return SAGA_OK;
}

/* b == 0 does not read y, so garbage in a fresh output buffer does not leak through. */
static inline __attribute__((always_inline)) void
scale_span_body(int64_t n, float a, const float *x, float b, float *y) {
    if (b == 0.0f)
        for (int64_t i = 0; i < n; i++)
            y[i] = a * x[i];
    else
        for (int64_t i = 0; i < n; i++)
            y[i] = a * x[i] + b * y[i];
}

SAGA_CPU_ISA_CLONES_V4(scale_span, (int64_t n, float a, const float *x, float b, float *y),
                       (n, a, x, b, y))

saga_status saga_cpu_scale_f32(saga_stream *s, int64_t n, float a, const float *x, float b,
                               float *y) {
    saga_cpu_stream_drain(s);
#pragma omp parallel num_threads(saga_cpu_nn_threads(s, n))
    {
        int64_t lo, hi;
        saga_cpu_nn_chunk(n, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        scale_span(hi - lo, a, x + lo, b, y + lo);
    }
    return SAGA_OK;
}

saga_status saga_cpu_scale_heads_f32(saga_stream *s, int64_t rows, int64_t heads, int64_t F,
                                     const float *sc, const float *x, float beta, float *y) {
    saga_cpu_stream_drain(s);
    const int64_t cols = heads * F;
#pragma omp parallel for schedule(static) num_threads(saga_cpu_nn_threads(s, rows *cols))
    for (int64_t i = 0; i < rows; i++)
        for (int64_t k = 0; k < heads; k++) {
            const float a = sc[i * heads + k];
            const float *xr = x + i * cols + k * F;
            float *yr = y + i * cols + k * F;
            if (beta == 0.0f)
                for (int64_t j = 0; j < F; j++)
                    yr[j] = a * xr[j];
            else
                for (int64_t j = 0; j < F; j++)
                    yr[j] = a * xr[j] + beta * yr[j];
        }
    return SAGA_OK;
}

saga_status saga_cpu_fill_f32(saga_stream *s, float *x, int64_t n, float v) {
    saga_cpu_stream_drain(s);
#pragma omp parallel for schedule(static) num_threads(saga_cpu_nn_threads(s, n))
    for (int64_t i = 0; i < n; i++)
        x[i] = v;
    return SAGA_OK;
}

saga_status saga_cpu_copy2d_f32(saga_stream *s, int64_t rows, int64_t cols, const float *src,
                                int64_t lds, float *dst, int64_t ldd, bool accumulate) {
    saga_cpu_stream_drain(s);
    if (cols <= 0)
        return SAGA_OK;
    const int nt = saga_cpu_nn_threads(s, rows * cols);
    if (accumulate) {
#pragma omp parallel for schedule(static) num_threads(nt)
        for (int64_t i = 0; i < rows; i++) {
            const float *a = src + i * lds;
            float *b = dst + i * ldd;
            for (int64_t j = 0; j < cols; j++)
                b[j] += a[j];
        }
    } else {
#pragma omp parallel for schedule(static) num_threads(nt)
        for (int64_t i = 0; i < rows; i++)
            memcpy(dst + i * ldd, src + i * lds, (size_t)cols * sizeof *dst);
    }
    return SAGA_OK;
}

/* ---- softmax ----------------------------------------------------------------------------- */

/* One row. The sum of exponentials is accumulated in double: with thousands of columns a float
 * sum loses digits the caller would see in the loss. */
static void softmax_row(int64_t cols, bool log_space, const float *x, float *y) {
    float mx = x[0];
    for (int64_t j = 1; j < cols; j++)
        mx = x[j] > mx ? x[j] : mx;
    double sum = 0.0;
    if (log_space) {
        for (int64_t j = 0; j < cols; j++)
            sum += expf(x[j] - mx);
        float lse = mx + (float)log(sum);
        for (int64_t j = 0; j < cols; j++)
            y[j] = x[j] - lse;
    } else {
        for (int64_t j = 0; j < cols; j++) {
            float e = expf(x[j] - mx);
            y[j] = e;
            sum += e;
        }
        float inv = (float)(1.0 / sum);
        for (int64_t j = 0; j < cols; j++)
            y[j] *= inv;
    }
}

saga_status saga_cpu_softmax_rows_f32(saga_stream *s, int64_t rows, int64_t cols, bool log,
                                      const float *x, float *y) {
    saga_cpu_stream_drain(s);
    if (cols <= 0)
        return SAGA_OK;
#pragma omp parallel for schedule(static) num_threads(saga_cpu_nn_threads(s, rows *cols))
    for (int64_t i = 0; i < rows; i++)
        softmax_row(cols, log, x + i * cols, y + i * cols);
    return SAGA_OK;
}

saga_status saga_cpu_softmax_rows_bwd_f32(saga_stream *s, int64_t rows, int64_t cols, bool log,
                                          const float *y, const float *dy, float *dx) {
    saga_cpu_stream_drain(s);
#pragma omp parallel for schedule(static) num_threads(saga_cpu_nn_threads(s, rows *cols))
    for (int64_t i = 0; i < rows; i++) {
        const float *yi = y + i * cols, *dyi = dy + i * cols;
        float *dxi = dx + i * cols;
        double acc = 0.0;
        if (log) {
            for (int64_t j = 0; j < cols; j++)
                acc += dyi[j];
            float sum = (float)acc;
            for (int64_t j = 0; j < cols; j++)
                dxi[j] = dyi[j] - expf(yi[j]) * sum;
        } else {
            for (int64_t j = 0; j < cols; j++)
                acc += (double)dyi[j] * yi[j];
            float dot = (float)acc;
            for (int64_t j = 0; j < cols; j++)
                dxi[j] = yi[j] * (dyi[j] - dot);
        }
    }
    return SAGA_OK;
}

/* ---- losses ------------------------------------------------------------------------------ */

saga_status saga_cpu_nll_f32(saga_stream *s, int64_t rows, int64_t cols, const float *logp,
                             const int32_t *labels, const int32_t *rows_idx, int64_t n_idx,
                             double *loss, float *dlogp) {
    saga_cpu_stream_drain(s);
    const int64_t n = rows_idx ? n_idx : rows;
    double part[SAGA_CPU_NN_MAX_THREADS];
    int64_t bad[SAGA_CPU_NN_MAX_THREADS]; /* first bad position of each thread, or n */
    int used = 1;
    /* Check and sum in one pass; the first bad position over all threads is the one reported,
     * so the message does not depend on the thread count. */
#pragma omp parallel num_threads(saga_cpu_nn_threads(s, n))
    {
        int id = omp_get_thread_num(), nt = omp_get_num_threads();
        int64_t lo, hi;
        saga_cpu_nn_chunk(n, id, nt, &lo, &hi);
        double acc = 0.0;
        int64_t first_bad = n;
        for (int64_t k = lo; k < hi; k++) {
            int64_t r = rows_idx ? rows_idx[k] : k;
            if (r < 0 || r >= rows || labels[r] < 0 || labels[r] >= cols) {
                first_bad = k;
                break;
            }
            acc -= logp[r * cols + labels[r]];
        }
        part[id] = acc;
        bad[id] = first_bad;
        if (id == 0)
            used = nt;
    }
    double sum = 0.0;
    for (int t = 0; t < used; t++) {
        if (bad[t] < n) {
            int64_t k = bad[t], r = rows_idx ? rows_idx[k] : k;
            if (r < 0 || r >= rows)
                return saga_error(SAGA_ERR_INVALID_ARG,
                                  "nll_f32: row index %lld at position %lld is outside [0, %lld)",
                                  (long long)r, (long long)k, (long long)rows);
            return saga_error(SAGA_ERR_INVALID_ARG,
                              "nll_f32: row %lld has label %d, outside [0, %lld)", (long long)r,
                              (int)labels[r], (long long)cols);
        }
        sum += part[t];
    }
    *loss = n > 0 ? sum / (double)n : 0.0;
    if (dlogp) {
        saga_cpu_fill_f32(s, dlogp, rows * cols, 0.0f);
        const float g = n > 0 ? (float)(-1.0 / (double)n) : 0.0f;
        /* Serial: a row listed twice must receive both contributions. */
        for (int64_t k = 0; k < n; k++) {
            int64_t r = rows_idx ? rows_idx[k] : k;
            dlogp[r * cols + labels[r]] += g;
        }
    }
    return SAGA_OK;
}

saga_status saga_cpu_bce_logits_f32(saga_stream *s, int64_t n, const float *x, const float *target,
                                    float pos_weight, double *loss, float *dx) {
    saga_cpu_stream_drain(s);
    double part[SAGA_CPU_NN_MAX_THREADS];
    int used = 1;
    const float inv_n = n > 0 ? (float)(1.0 / (double)n) : 0.0f;
#pragma omp parallel num_threads(saga_cpu_nn_threads(s, n))
    {
        int id = omp_get_thread_num(), nt = omp_get_num_threads();
        int64_t lo, hi;
        saga_cpu_nn_chunk(n, id, nt, &lo, &hi);
        double acc = 0.0;
        for (int64_t i = lo; i < hi; i++) {
            float xi = x[i], t = target[i];
            /* -log sigmoid(x) = log(1 + e^-|x|) + max(-x, 0) never overflows; PyTorch's form */
            float log_weight = 1.0f + (pos_weight - 1.0f) * t;
            float sp = log1pf(expf(-fabsf(xi))) + (xi < 0.0f ? -xi : 0.0f);
            acc += (double)((1.0f - t) * xi + log_weight * sp);
            if (dx) {
                float pt = pos_weight * t;
                dx[i] = (sigmoidf(xi) * ((1.0f - t) + pt) - pt) * inv_n;
            }
        }
        part[id] = acc;
        if (id == 0)
            used = nt;
    }
    double sum = 0.0;
    for (int t = 0; t < used; t++)
        sum += part[t];
    *loss = n > 0 ? sum / (double)n : 0.0;
    return SAGA_OK;
}

/* ---- sums -------------------------------------------------------------------------------- */

/* Four accumulators over [lo, hi): a fixed order, so a fixed result. */
static double sum_range(const float *x, int64_t lo, int64_t hi, bool square) {
    double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
    int64_t i = lo;
    if (square) {
        for (; i + 4 <= hi; i += 4) {
            a0 += (double)x[i] * x[i];
            a1 += (double)x[i + 1] * x[i + 1];
            a2 += (double)x[i + 2] * x[i + 2];
            a3 += (double)x[i + 3] * x[i + 3];
        }
        for (; i < hi; i++)
            a0 += (double)x[i] * x[i];
    } else {
        for (; i + 4 <= hi; i += 4) {
            a0 += x[i];
            a1 += x[i + 1];
            a2 += x[i + 2];
            a3 += x[i + 3];
        }
        for (; i < hi; i++)
            a0 += x[i];
    }
    return (a0 + a1) + (a2 + a3);
}

static double sum_all(saga_stream *s, int64_t n, const float *x, bool square) {
    double part[SAGA_CPU_NN_MAX_THREADS];
    int used = 1;
#pragma omp parallel num_threads(saga_cpu_nn_threads(s, n))
    {
        int id = omp_get_thread_num(), nt = omp_get_num_threads();
        int64_t lo, hi;
        saga_cpu_nn_chunk(n, id, nt, &lo, &hi);
        part[id] = sum_range(x, lo, hi, square);
        if (id == 0)
            used = nt;
    }
    double sum = 0.0;
    for (int t = 0; t < used; t++)
        sum += part[t];
    return sum;
}

saga_status saga_cpu_sum_f32(saga_stream *s, int64_t n, const float *x, double *out) {
    saga_cpu_stream_drain(s);
    *out = n > 0 ? sum_all(s, n, x, false) : 0.0;
    return SAGA_OK;
}

saga_status saga_cpu_sumsq_f32(saga_stream *s, int64_t n, const float *x, double *out) {
    saga_cpu_stream_drain(s);
    *out = n > 0 ? sum_all(s, n, x, true) : 0.0;
    return SAGA_OK;
}

/* ---- optimizers -------------------------------------------------------------------------- */

/* torch.optim.Adam / AdamW, single-tensor path, in the same f32 operations: the scalar factors
 * are computed in double (Python floats there) and rounded once; the moments move by lerp as
 * exp_avg.lerp_(grad, 1 - beta1) does. */
saga_status saga_cpu_adam_f32(saga_stream *s, int64_t n, float lr, float beta1, float beta2,
                              float eps, float weight_decay, bool decoupled, int64_t step,
                              float *param, const float *grad, float *m, float *v) {
    saga_cpu_stream_drain(s);
    if (step < 1)
        return saga_error(SAGA_ERR_INVALID_ARG, "adam_f32: step must be 1 or more, got %lld",
                          (long long)step);
    const double bc1 = 1.0 - pow((double)beta1, (double)step);
    const double bc2 = 1.0 - pow((double)beta2, (double)step);
    const float step_size = (float)((double)lr / bc1);
    const float bc2_sqrt = (float)sqrt(bc2);
    const float w1 = (float)(1.0 - (double)beta1); /* lerp weight */
    const float w2 = (float)(1.0 - (double)beta2);
    const float decay = (float)(1.0 - (double)lr * (double)weight_decay);
    const bool l2 = weight_decay != 0.0f && !decoupled;
    const bool shrink = weight_decay != 0.0f && decoupled;
#pragma omp parallel for schedule(static) num_threads(saga_cpu_nn_threads(s, n))
    for (int64_t i = 0; i < n; i++) {
        float p = param[i];
        float g = l2 ? grad[i] + weight_decay * p : grad[i];
        if (shrink)
            p *= decay;
        /* torch's lerp: start + w (end - start) for w < 0.5, else end - (end - start)(1 - w) */
        float mi = m[i];
        mi = w1 < 0.5f ? mi + w1 * (g - mi) : g - (g - mi) * (1.0f - w1);
        float vi = v[i] * beta2 + w2 * g * g; /* addcmul: (value t1) t2 */
        float denom = sqrtf(vi) / bc2_sqrt + eps;
        m[i] = mi;
        v[i] = vi;
        param[i] = p + -step_size * mi / denom; /* addcdiv: (value t1) / t2 */
    }
    return SAGA_OK;
}

/* torch.optim.SGD with dampening 0, single-tensor path. PyTorch sets buf = grad on the first
 * step; momentum * 0 + grad is the same value, so a zeroed buf needs no first-step case. */
saga_status saga_cpu_sgd_f32(saga_stream *s, int64_t n, float lr, float momentum,
                             float weight_decay, bool nesterov, float *param, const float *grad,
                             float *buf) {
    saga_cpu_stream_drain(s);
    if (momentum != 0.0f && !buf)
        return saga_error(SAGA_ERR_INVALID_ARG,
                          "sgd_f32: momentum %g needs a momentum buffer, got NULL",
                          (double)momentum);
    const bool decay = weight_decay != 0.0f;
    const bool mom = momentum != 0.0f;
#pragma omp parallel for schedule(static) num_threads(saga_cpu_nn_threads(s, n))
    for (int64_t i = 0; i < n; i++) {
        float g = decay ? grad[i] + weight_decay * param[i] : grad[i];
        if (mom) {
            float b = buf[i] * momentum + g;
            buf[i] = b;
            g = nesterov ? g + momentum * b : b;
        }
        param[i] = param[i] + -lr * g;
    }
    return SAGA_OK;
}
