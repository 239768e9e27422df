/* kernels.c - the CPU kernel table: OpenMP loops with a static schedule. Reductions are
 * deterministic for a given thread count: each thread sums a fixed contiguous chunk and the
 * partial sums are added in thread order. */
#include "backend_impl.h"
#include "half_impl.h"
#include "nn_kernels.h"

#include <math.h>
#include <omp.h>

enum {
    PAR_MIN_WORK =
        1 << 15,       /* below this many elements a parallel region costs more than it saves */
    MAX_THREADS = 256, /* partial sums live on the stack */
};

/* Threads for `work` elements of work issued on s: 1 for small work, else the backend's
 * n_threads (OpenMP's default when 0). */
static int threads_for(const saga_stream *s, int64_t work) {
    if (work < PAR_MIN_WORK)
        return 1;
    int t =
        s && s->be && s->be->params.n_threads > 0 ? s->be->params.n_threads : omp_get_max_threads();
    return t < 1 ? 1 : t > MAX_THREADS ? MAX_THREADS : t;
}

/* [lo, hi) of thread id out of nt over n items; chunks differ in size by at most one. */
static void chunk(int64_t n, int id, int nt, int64_t *lo, int64_t *hi) {
    int64_t q = n / nt, r = n % nt;
    *lo = q * id + (id < r ? id : r);
    *hi = *lo + q + (id < r ? 1 : 0);
}

static saga_status cpu_fill_f64(saga_stream *s, double *x, int64_t n, double v) {
    saga_cpu_stream_drain(s);
#pragma omp parallel for schedule(static) num_threads(threads_for(s, n))
    for (int64_t i = 0; i < n; i++)
        x[i] = v;
    return SAGA_OK;
}

/* b == 0 does not read y, so NaN or garbage in an output buffer does not leak through (the BLAS
 * convention; the CUDA kernels do the same). */
static saga_status cpu_axpby_f64(saga_stream *s, int64_t n, double a, const double *x, double b,
                                 double *y) {
    saga_cpu_stream_drain(s);
    if (b == 0.0) {
#pragma omp parallel for schedule(static) num_threads(threads_for(s, n))
        for (int64_t i = 0; i < n; i++)
            y[i] = a * x[i];
    } else {
#pragma omp parallel for schedule(static) num_threads(threads_for(s, n))
        for (int64_t i = 0; i < n; i++)
            y[i] = a * x[i] + b * y[i];
    }
    return SAGA_OK;
}

static saga_status cpu_mul_f64(saga_stream *s, int64_t n, const double *x, const double *y,
                               double *z) {
    saga_cpu_stream_drain(s);
#pragma omp parallel for schedule(static) num_threads(threads_for(s, n))
    for (int64_t i = 0; i < n; i++)
        z[i] = x[i] * y[i];
    return SAGA_OK;
}

static saga_status cpu_add_scalar_f64(saga_stream *s, int64_t n, double c, double *x) {
    saga_cpu_stream_drain(s);
#pragma omp parallel for schedule(static) num_threads(threads_for(s, n))
    for (int64_t i = 0; i < n; i++)
        x[i] += c;
    return SAGA_OK;
}

/* Rows are independent, so any row split gives the same bits; beta == 0 does not read y. */
static saga_status cpu_spmv_f64(saga_stream *s, const saga_csr_dev *A, double alpha,
                                const double *x, double beta, double *y) {
    saga_cpu_stream_drain(s);
    const int64_t n = A->n_rows;
    const int64_t *off = A->offsets;
    const int32_t *idx = A->indices;
    const float *val = A->values;
    const int nt = threads_for(s, n + A->nnz);
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t i = 0; i < n; i++) {
        double acc = 0.0;
        if (val) {
            for (int64_t k = off[i]; k < off[i + 1]; k++)
                acc += (double)val[k] * x[idx[k]];
        } else {
            for (int64_t k = off[i]; k < off[i + 1]; k++)
                acc += x[idx[k]];
        }
        y[i] = beta == 0.0 ? alpha * acc : alpha * acc + beta * y[i];
    }
    return SAGA_OK;
}

/* Partial sums over [lo, hi) with four accumulators: a fixed order, so a fixed result. */
static double dot_range(const double *x, const double *y, int64_t lo, int64_t hi) {
    double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
    int64_t i = lo;
    for (; i + 4 <= hi; i += 4) {
        a0 += x[i] * y[i];
        a1 += x[i + 1] * y[i + 1];
        a2 += x[i + 2] * y[i + 2];
        a3 += x[i + 3] * y[i + 3];
    }
    for (; i < hi; i++)
        a0 += x[i] * y[i];
    return (a0 + a1) + (a2 + a3);
}

static double l1_range(const double *x, const double *y, int64_t lo, int64_t hi) {
    double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
    int64_t i = lo;
    for (; i + 4 <= hi; i += 4) {
        a0 += fabs(x[i] - y[i]);
        a1 += fabs(x[i + 1] - y[i + 1]);
        a2 += fabs(x[i + 2] - y[i + 2]);
        a3 += fabs(x[i + 3] - y[i + 3]);
    }
    for (; i < hi; i++)
        a0 += fabs(x[i] - y[i]);
    return (a0 + a1) + (a2 + a3);
}

/* Each thread reduces its own contiguous chunk; the partials are added in thread order. */
static double reduce(const saga_stream *s, int64_t n, const double *x, const double *y,
                     double (*range)(const double *, const double *, int64_t, int64_t)) {
    double partial[MAX_THREADS];
    int used = 1;
#pragma omp parallel num_threads(threads_for(s, n))
    {
        int id = omp_get_thread_num(), nt = omp_get_num_threads();
        int64_t lo, hi;
        chunk(n, id, nt, &lo, &hi);
        partial[id] = range(x, y, lo, hi);
        if (id == 0)
            used = nt;
    }
    double sum = 0.0;
    for (int t = 0; t < used; t++)
        sum += partial[t];
    return sum;
}

/* The reduction of x and y by range into *out, or added to it (acc, the _acc slots); nothing is
 * added for n == 0. */
static saga_status reduce_into(saga_stream *s, int64_t n, const double *x, const double *y,
                               double (*range)(const double *, const double *, int64_t, int64_t),
                               double *out, bool acc) {
    saga_cpu_stream_drain(s);
    const double r = n > 0 ? reduce(s, n, x, y, range) : 0.0;
    *out = acc ? *out + r : r;
    return SAGA_OK;
}

static saga_status cpu_dot_f64(saga_stream *s, int64_t n, const double *x, const double *y,
                               double *out) {
    return reduce_into(s, n, x, y, dot_range, out, false);
}

static saga_status cpu_l1_diff_f64(saga_stream *s, int64_t n, const double *x, const double *y,
                                   double *out) {
    return reduce_into(s, n, x, y, l1_range, out, false);
}

static saga_status cpu_dot_acc_f64(saga_stream *s, int64_t n, const double *x, const double *y,
                                   double *acc) {
    return reduce_into(s, n, x, y, dot_range, acc, true);
}

static saga_status cpu_l1_diff_acc_f64(saga_stream *s, int64_t n, const double *x, const double *y,
                                       double *acc) {
    return reduce_into(s, n, x, y, l1_range, acc, true);
}

static saga_status cpu_add_scalar_dev_f64(saga_stream *s, int64_t n, double a, double b,
                                          const double *c, double *x) {
    saga_cpu_stream_drain(s);
    return n > 0 ? cpu_add_scalar_f64(s, n, a + b * c[0], x) : SAGA_OK;
}

/* ---- PageRank ------------------------------------------------------------------------------ */

enum { PR_BLOCKS = 1024 }; /* the most blocks a pull is cut into (their partial sums: stack) */

/* Sum of c over the entries [lo, hi) of idx. Four partial sums hide the additions' latency, which
 * otherwise bounds the loop at one entry per add; the order is fixed. */
static inline double pr_row_sum(const double *c, const int32_t *idx, int64_t lo, int64_t hi) {
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t k = lo;
    for (; k + 4 <= hi; k += 4) {
        s0 += c[idx[k]];
        s1 += c[idx[k + 1]];
        s2 += c[idx[k + 2]];
        s3 += c[idx[k + 3]];
    }
    for (; k < hi; k++)
        s0 += c[idx[k]];
    return (s0 + s1) + (s2 + s3);
}

/* The first row r with off[r] + r >= target: blocks cut by entries plus rows, so that a block of
 * hubs (a degree order puts them together) is no longer than a block of leaves. */
static int64_t pr_cut(const int64_t *off, int64_t n, int64_t target) {
    int64_t a = 0, b = n;
    while (a < b) {
        int64_t m = a + (b - a) / 2;
        if (off[m] + m < target)
            a = m + 1;
        else
            b = m;
    }
    return a;
}

/* The rows are cut into blocks by work; threads take blocks as they finish (a degree order makes
 * the work uneven), and the blocks' partial sums are added in block order, so the sums do not
 * depend on the threads. */
static saga_status cpu_pagerank_pull_f64(saga_stream *s, const saga_csr_dev *A, double d,
                                         double base, const double *c, const double *x,
                                         const double *inv, double *y, double *c_next,
                                         double *out) {
    saga_cpu_stream_drain(s);
    const int64_t n = A->n_rows, work = A->nnz + n;
    const int64_t *off = A->offsets;
    const int32_t *idx = A->indices;
    int64_t nb = work / 4096;
    nb = nb < 1 ? 1 : nb > PR_BLOCKS ? PR_BLOCKS : nb;
    double part[2 * PR_BLOCKS];
    const int nt = threads_for(s, work);
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
    for (int64_t b = 0; b < nb; b++) {
        int64_t lo = pr_cut(off, n, work * b / nb), hi = pr_cut(off, n, work * (b + 1) / nb);
        double l1 = 0, dang = 0;
        for (int64_t i = lo; i < hi; i++) {
            double yi = base + d * pr_row_sum(c, idx, off[i], off[i + 1]);
            l1 += fabs(yi - x[i]);
            y[i] = yi;
            c_next[i] = yi * inv[i];
            dang += inv[i] == 0.0 ? yi : 0.0;
        }
        part[2 * b] = l1;
        part[2 * b + 1] = dang;
    }
    out[0] = out[1] = 0.0;
    for (int64_t b = 0; b < nb; b++) {
        out[0] += part[2 * b];
        out[1] += part[2 * b + 1];
    }
    return SAGA_OK;
}

/* The CPU is synchronous: the base read and the sums added at once. */
static saga_status cpu_pagerank_pull_acc_f64(saga_stream *s, const saga_csr_dev *A, double d,
                                             double a, double b, const double *base_in,
                                             const double *c, const double *x, const double *inv,
                                             double *y, double *c_next, double *acc) {
    double out[2];
    saga_status st = cpu_pagerank_pull_f64(s, A, d, a + b * base_in[1], c, x, inv, y, c_next, out);
    if (st == SAGA_OK) {
        acc[0] += out[0];
        acc[1] += out[1];
    }
    return st;
}

/* ---- losses ------------------------------------------------------------------------------- */

/* The CPU is synchronous: nll_f32's mean rounded to f32, written at once. */
static saga_status cpu_nll_dev_f32(saga_stream *s, int64_t rows, int64_t cols, const float *logp,
                                   const int32_t *labels, const int32_t *rows_idx, int64_t n_idx,
                                   float *loss, float *dlogp) {
    double l = 0.0;
    saga_status st = saga_cpu_nll_f32(s, rows, cols, logp, labels, rows_idx, n_idx, &l, dlogp);
    if (st == SAGA_OK)
        *loss = (float)l;
    return st;
}

/* ---- 16-bit floats ------------------------------------------------------------------------- */

static saga_status cpu_half_to_f32(saga_stream *s, int64_t n, const uint16_t *x, bool bf16,
                                   float *y) {
    saga_cpu_stream_drain(s);
    enum { CHUNK = 1 << 14 };
    const int64_t chunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static) num_threads(threads_for(s, n))
    for (int64_t k = 0; k < chunks; k++) {
        const int64_t i = k * CHUNK;
        saga_half_to_f32_n(x + i, n - i < CHUNK ? n - i : CHUNK, bf16, y + i);
    }
    return SAGA_OK;
}

const saga_kernels saga_cpu_kernels = {
    .size = sizeof(saga_kernels),
    .fill_f64 = cpu_fill_f64,
    .axpby_f64 = cpu_axpby_f64,
    .mul_f64 = cpu_mul_f64,
    .add_scalar_f64 = cpu_add_scalar_f64,
    .spmv_f64 = cpu_spmv_f64,
    .dot_f64 = cpu_dot_f64,
    .l1_diff_f64 = cpu_l1_diff_f64,
    .gemm_f32 = saga_cpu_gemm_f32,
    .bias_add_f32 = saga_cpu_bias_add_f32,
    .colsum_f32 = saga_cpu_colsum_f32,
    .act_f32 = saga_cpu_act_f32,
    .act_bwd_f32 = saga_cpu_act_bwd_f32,
    .dropout_f32 = saga_cpu_dropout_f32,
    .binary_f32 = saga_cpu_binary_f32,
    .scale_f32 = saga_cpu_scale_f32,
    .fill_f32 = saga_cpu_fill_f32,
    .copy2d_f32 = saga_cpu_copy2d_f32,
    .softmax_rows_f32 = saga_cpu_softmax_rows_f32,
    .softmax_rows_bwd_f32 = saga_cpu_softmax_rows_bwd_f32,
    .nll_f32 = saga_cpu_nll_f32,
    .bce_logits_f32 = saga_cpu_bce_logits_f32,
    .sum_f32 = saga_cpu_sum_f32,
    .sumsq_f32 = saga_cpu_sumsq_f32,
    .gather_rows_f32 = saga_cpu_gather_rows_f32,
    .scatter_add_rows_f32 = saga_cpu_scatter_add_rows_f32,
    .spmm_f32 = saga_cpu_spmm_f32,
    .segment_reduce_f32 = saga_cpu_segment_reduce_f32,
    .segment_reduce_bwd_f32 = saga_cpu_segment_reduce_bwd_f32,
    .edge_softmax_f32 = saga_cpu_edge_softmax_f32,
    .edge_softmax_bwd_f32 = saga_cpu_edge_softmax_bwd_f32,
    .adam_f32 = saga_cpu_adam_f32,
    .sgd_f32 = saga_cpu_sgd_f32,
    .dropout_rows_f32 = saga_cpu_dropout_rows_f32,
    .pagerank_pull_f64 = cpu_pagerank_pull_f64,
    .dropout_csr_f32 = saga_cpu_dropout_csr_f32,
    .spmm_t_f32 = saga_cpu_spmm_t_f32,
    .half_to_f32 = cpu_half_to_f32,
    .nll_dev_f32 = cpu_nll_dev_f32,
    .dot_acc_f64 = cpu_dot_acc_f64,
    .l1_diff_acc_f64 = cpu_l1_diff_acc_f64,
    .add_scalar_dev_f64 = cpu_add_scalar_dev_f64,
    .sumsq_pinned_f32 = saga_cpu_sumsq_f32, /* synchronous: at once */
    .pagerank_pull_acc_f64 = cpu_pagerank_pull_acc_f64,
    .scale_heads_f32 = saga_cpu_scale_heads_f32,
};
