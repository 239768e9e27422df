/* backend_impl.h - what a backend implements: the function table behind saga_backend.h and the
 * kernel table. Internal to saga (and to the CUDA module, which is built with it). */
#pragma once

#include "saga_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A CSR matrix whose arrays live in a backend's memory. Row i holds columns
 * indices[offsets[i] .. offsets[i+1]); values == NULL means every stored value is 1. */
typedef struct saga_csr_dev {
    int64_t n_rows;
    int64_t n_cols;
    int64_t nnz;
    const int64_t *offsets;
    const int32_t *indices;
    const float *values;
} saga_csr_dev;

/* Activation functions of act_f32 / act_bwd_f32. Append-only. */
typedef enum saga_act {
    SAGA_ACT_RELU = 0,   /* max(x, 0) */
    SAGA_ACT_LEAKY_RELU, /* x > 0 ? x : alpha x */
    SAGA_ACT_ELU,        /* x > 0 ? x : alpha (exp(x) - 1) */
    SAGA_ACT_SIGMOID,    /* 1 / (1 + exp(-x)) */
    SAGA_ACT_TANH,
    SAGA_ACT_COUNT
} saga_act;

/* Element-wise binary operations of binary_f32. Append-only. */
typedef enum saga_binop {
    SAGA_BINOP_ADD = 0,
    SAGA_BINOP_SUB,
    SAGA_BINOP_MUL,
    SAGA_BINOP_DIV,
    SAGA_BINOP_COUNT
} saga_binop;

/* Reductions over a segment of rows (segment_reduce_f32). Append-only. */
typedef enum saga_reduce {
    SAGA_REDUCE_SUM = 0,
    SAGA_REDUCE_MEAN,
    SAGA_REDUCE_MAX,
    SAGA_REDUCE_COUNT
} saga_reduce;

/* Kernels, all asynchronous on a stream unless they return a host scalar. Pointers are the
 * backend's memory. Shape checks happen in the callers (ops layer), once for every backend.
 *
 * Slots are named, never positional: a backend fills its table with designated initializers,
 * `size` = sizeof(saga_kernels) as it was built, and leaves NULL what it lacks. The generic layer
 * copies the table into the backend's own (saga_backend.kernels), so a slot appended after the
 * backend was built reads NULL there too: whether a backend has a kernel is one test anywhere,
 * the slot being non-NULL (saga_has_kernel). The table only grows: new slots are appended. */
typedef struct saga_kernels {
    size_t size;
    /* x[0..n) = v */
    saga_status (*fill_f64)(saga_stream *s, double *x, int64_t n, double v);
    /* y = a*x + b*y (x may be y; b == 0 does not read y) */
    saga_status (*axpby_f64)(saga_stream *s, int64_t n, double a, const double *x, double b,
                             double *y);
    /* z = x .* y (z may alias x or y) */
    saga_status (*mul_f64)(saga_stream *s, int64_t n, const double *x, const double *y, double *z);
    /* x += c */
    saga_status (*add_scalar_f64)(saga_stream *s, int64_t n, double c, double *x);
    /* y = alpha * A x + beta * y; x has A->n_cols entries, y has A->n_rows */
    saga_status (*spmv_f64)(saga_stream *s, const saga_csr_dev *A, double alpha, const double *x,
                            double beta, double *y);
    /* *out = sum x .* y, written to host memory once the stream has reached it (synchronous) */
    saga_status (*dot_f64)(saga_stream *s, int64_t n, const double *x, const double *y,
                           double *out);
    /* *out = sum |x - y| (synchronous) */
    saga_status (*l1_diff_f64)(saga_stream *s, int64_t n, const double *x, const double *y,
                               double *out);

    /* ---- neural-network kernels (f32) ------------------------------------------------------
     * Matrices are row-major; a matrix argument without its own leading dimension is
     * contiguous (leading dimension = cols). Outputs may alias inputs only where a slot says
     * so. Every slot checks only what depends on the data (indices, labels, scalar ranges);
     * shapes are the caller's. On the CPU, results are deterministic for a given thread count;
     * the slots marked "bitwise" below give the same bits for every thread count. A slot that
     * writes a host scalar is synchronous. */

    /* C = alpha op(A) op(B) + beta C, op(A) M x K, op(B) K x N, C M x N, with leading
     * dimensions lda, ldb, ldc; op transposes when trans_*. beta == 0 does not read C.
     * SAGA_ERR_UNSUPPORTED when a size passes the BLAS integer range. */
    saga_status (*gemm_f32)(saga_stream *s, bool trans_a, bool trans_b, int64_t M, int64_t N,
                            int64_t K, float alpha, const float *A, int64_t lda, const float *B,
                            int64_t ldb, float beta, float *C, int64_t ldc);
    /* y[i][j] = x[i][j] + b[j] (y may be x). Bitwise. */
    saga_status (*bias_add_f32)(saga_stream *s, int64_t rows, int64_t cols, const float *x,
                                const float *b, float *y);
    /* out[j] = sum_i x[i][j] + beta out[j] (the bias gradient); beta == 0 does not read out.
     * SAGA_ERR_OUT_OF_MEMORY when the per-thread partial sums cannot be allocated. */
    saga_status (*colsum_f32)(saga_stream *s, int64_t rows, int64_t cols, const float *x,
                              float beta, float *out);
    /* y = act(x) (y may be x). alpha: the slope of LEAKY_RELU, the scale of ELU. Bitwise. */
    saga_status (*act_f32)(saga_stream *s, saga_act kind, int64_t n, float alpha, const float *x,
                           float *y);
    /* dx = act'(x) dy, given the forward input x and output y (dx may be dy). RELU, SIGMOID and
     * TANH read only y, LEAKY_RELU only x, ELU both; the one not read may be NULL. Bitwise. */
    saga_status (*act_bwd_f32)(saga_stream *s, saga_act kind, int64_t n, float alpha,
                               const float *x, const float *y, const float *dy, float *dx);
    /* y[i] = keep(seed, first + i) ? x[i] * (1 / (1 - p)) : 0 in f32 (y may be x), 0 <= p < 1;
     * p == 0 copies. The mask is a function of (seed, element index) only, so the same call on
     * dy is the backward pass and no mask is stored, and a block of rows of a larger tensor
     * (first = its first element's index) draws the block of that tensor's mask. Every backend
     * draws the same mask:
     *   k = mix(seed); z = mix(k + 0x9E3779B97F4A7C15 * (i + 1)); keep = (z >> 40) * 2^-24 >= p
     * with mix the splitmix64 finalizer (z ^= z >> 30; z *= 0xBF58476D1CE4E5B9; z ^= z >> 27;
     * z *= 0x94D049BB133111EB; z ^= z >> 31), arithmetic modulo 2^64. Bitwise.
     * SAGA_ERR_INVALID_ARG when p is outside [0, 1) or first < 0. */
    saga_status (*dropout_f32)(saga_stream *s, int64_t n, float p, uint64_t seed, int64_t first,
                               const float *x, float *y);
    /* z = x op y element-wise (z may be x or y). Bitwise. */
    saga_status (*binary_f32)(saga_stream *s, saga_binop op, int64_t n, const float *x,
                              const float *y, float *z);
    /* y = a x + b y (x may be y); b == 0 does not read y. Bitwise. */
    saga_status (*scale_f32)(saga_stream *s, int64_t n, float a, const float *x, float b, float *y);
    /* x[0..n) = v. Bitwise. */
    saga_status (*fill_f32)(saga_stream *s, float *x, int64_t n, float v);
    /* dst[i][j] = src[i][j] (or += when accumulate) for a rows x cols block with leading
     * dimensions lds and ldd: concatenation and splitting of column blocks. The blocks must not
     * overlap. Bitwise. */
    saga_status (*copy2d_f32)(saga_stream *s, int64_t rows, int64_t cols, const float *src,
                              int64_t lds, float *dst, int64_t ldd, bool accumulate);
    /* Row-wise softmax (log-softmax when log) of a rows x cols matrix, computed after
     * subtracting the row maximum (y may be x). Bitwise. */
    saga_status (*softmax_rows_f32)(saga_stream *s, int64_t rows, int64_t cols, bool log,
                                    const float *x, float *y);
    /* Backward of softmax_rows_f32 from its output y: dx = y (dy - sum_j dy y) for softmax,
     * dx = dy - exp(y) sum_j dy for log-softmax (dx may be dy). Bitwise. */
    saga_status (*softmax_rows_bwd_f32)(saga_stream *s, int64_t rows, int64_t cols, bool log,
                                        const float *y, const float *dy, float *dx);
    /* Negative log-likelihood of log-probabilities logp (rows x cols) against labels (one per
     * row), averaged over the rows listed in rows_idx (n_idx of them; NULL = every row, n_idx
     * ignored; a row listed twice counts twice). *loss (host) gets the mean, 0 when no row is
     * selected. dlogp, when not NULL, gets the gradient of the mean: -1/n at (r, label[r]) of
     * each selected r, 0 elsewhere. Synchronous. SAGA_ERR_INVALID_ARG, with nothing written,
     * for a listed row outside [0, rows) or a selected row whose label is outside [0, cols). */
    saga_status (*nll_f32)(saga_stream *s, int64_t rows, int64_t cols, const float *logp,
                           const int32_t *labels, const int32_t *rows_idx, int64_t n_idx,
                           double *loss, float *dlogp);
    /* Binary cross-entropy on logits x against targets t in [0, 1], as PyTorch's
     * BCEWithLogitsLoss(pos_weight) with mean reduction: the mean over n of
     * -(pos_weight t log sigmoid(x) + (1 - t) log(1 - sigmoid(x))), computed stably. *loss
     * (host) gets the mean (0 when n == 0); dx, when not NULL, its gradient
     * (sigmoid(x) ((1 - t) + pos_weight t) - pos_weight t) / n. Synchronous. */
    saga_status (*bce_logits_f32)(saga_stream *s, int64_t n, const float *x, const float *target,
                                  float pos_weight, double *loss, float *dx);
    /* *out (host) = sum x[i], accumulated in double. Synchronous. */
    saga_status (*sum_f32)(saga_stream *s, int64_t n, const float *x, double *out);
    /* *out (host) = sum x[i]^2, accumulated in double. Synchronous. */
    saga_status (*sumsq_f32)(saga_stream *s, int64_t n, const float *x, double *out);
    /* y[k] = x[idx[k]] for k < n_idx, rows of cols floats; x has n_rows_x rows. Bitwise.
     * SAGA_ERR_INVALID_ARG, with nothing written, for an index outside [0, n_rows_x): at once
     * where the backend sees the indices without waiting (the CPU), else from the stream's or
     * the device's next synchronization (a device checks them in a kernel of its own, before
     * this one's, and the host does not wait for it). */
    saga_status (*gather_rows_f32)(saga_stream *s, int64_t n_idx, int64_t cols, const int32_t *idx,
                                   int64_t n_rows_x, const float *x, float *y);
    /* y[idx[k]] += x[k] for k < n_idx, rows of cols floats; y has n_rows_y rows. An element of x
     * that is zero (of either sign) leaves y's as it was (adding +0 would turn a -0 into +0), so
     * rows of zeros cost no access to y. On the CPU each row of y receives its contributions in
     * increasing k, so the result is bitwise the same for every thread count; the CUDA backend
     * adds with atomics, so its sums are the same up to the f32 rounding of the order the
     * additions land in. SAGA_ERR_INVALID_ARG, with nothing written, for an index outside [0,
     * n_rows_y), when gather_rows_f32 reports one. */
    saga_status (*scatter_add_rows_f32)(saga_stream *s, int64_t n_idx, int64_t cols,
                                        const int32_t *idx, const float *x, int64_t n_rows_y,
                                        float *y);
    /* Y = alpha A X + beta Y with A sparse (A->n_rows x A->n_cols), X A->n_cols x F, Y
     * A->n_rows x F; X and Y must not overlap; beta == 0 does not read Y. A's offsets run
     * from 0 to A->nnz (SAGA_ERR_INVALID_ARG otherwise, where the backend can see them without
     * waiting: on the CPU); its indices are trusted (a saga_graph's CSR is validated when it is
     * built). Bitwise. */
    saga_status (*spmm_f32)(saga_stream *s, const saga_csr_dev *A, int64_t F, float alpha,
                            const float *X, float beta, float *Y);
    /* Reduces the rows of x (nnz x F, grouped by segment: segment g is rows
     * offsets[g] .. offsets[g+1]) into y (n_seg x F) by op. An empty segment gives 0 (and
     * argmax -1). MAX requires argmax (n_seg x F): the row of x (first one on ties) that gave
     * each maximum; other ops ignore it. Bitwise. SAGA_ERR_INVALID_ARG for MAX without argmax. */
    saga_status (*segment_reduce_f32)(saga_stream *s, const int64_t *offsets, int64_t n_seg,
                                      int64_t F, saga_reduce op, const float *x, float *y,
                                      int32_t *argmax);
    /* Backward of segment_reduce_f32: dx (nnz x F, nnz = offsets[n_seg]) from dy (n_seg x F).
     * SUM copies dy[g] to every row of segment g, MEAN scales it by 1/size, MAX sends it to the
     * argmax row and 0 to the others. Bitwise. SAGA_ERR_INVALID_ARG for MAX without argmax. */
    saga_status (*segment_reduce_bwd_f32)(saga_stream *s, const int64_t *offsets, int64_t n_seg,
                                          int64_t F, saga_reduce op, const float *dy,
                                          const int32_t *argmax, float *dx);
    /* Softmax of scores (nnz x H) over the rows of each segment, per column (head): GAT's
     * attention over each vertex's in-edges. out may be scores. Bitwise. */
    saga_status (*edge_softmax_f32)(saga_stream *s, const int64_t *offsets, int64_t n_seg,
                                    int64_t H, const float *scores, float *out);
    /* Backward of edge_softmax_f32 from its output: dscores = out (dout - sum_seg out dout) per
     * segment and head (dscores may be dout). Bitwise. */
    saga_status (*edge_softmax_bwd_f32)(saga_stream *s, const int64_t *offsets, int64_t n_seg,
                                        int64_t H, const float *out, const float *dout,
                                        float *dscores);
    /* One Adam step on n parameters, as torch.optim.Adam (decoupled = false: weight decay added
     * to the gradient) or torch.optim.AdamW (decoupled = true: param *= 1 - lr weight_decay),
     * amsgrad off. step is the 1-based step count including this one; m and v are the moment
     * buffers (zero before step 1). grad is not modified. Bitwise. SAGA_ERR_INVALID_ARG for
     * step < 1. */
    saga_status (*adam_f32)(saga_stream *s, int64_t n, float lr, float beta1, float beta2,
                            float eps, float weight_decay, bool decoupled, int64_t step,
                            float *param, const float *grad, float *m, float *v);
    /* One SGD step on n parameters, as torch.optim.SGD with dampening 0: g = grad + wd param;
     * with momentum, buf = momentum buf + g (buf zero before the first step) and g = buf, or
     * g + momentum buf when nesterov; param -= lr g. buf may be NULL when momentum == 0.
     * Bitwise. SAGA_ERR_INVALID_ARG for momentum != 0 without buf. */
    saga_status (*sgd_f32)(saga_stream *s, int64_t n, float lr, float momentum, float weight_decay,
                           bool nesterov, float *param, const float *grad, float *buf);
    /* dropout_f32 over rows that stand for rows row_ids[r] of a larger tensor: element (r, j) of
     * x (rows x cols) keeps with keep(seed, row_ids[r] * cols + j), the formula of dropout_f32,
     * so a block of vertices in any order draws the whole tensor's mask for them. The ids are
     * trusted (non-negative). Bitwise. SAGA_ERR_INVALID_ARG when p is outside [0, 1). */
    saga_status (*dropout_rows_f32)(saga_stream *s, int64_t rows, int64_t cols, float p,
                                    uint64_t seed, const int32_t *row_ids, const float *x,
                                    float *y);

    /* optional: one PageRank iteration pulled over the rows of A (A->values ignored; c has
     * A->n_cols entries, the others A->n_rows):
     *   y[i] = base + d * sum of c[j] over row i's entries
     *   c_next[i] = y[i] * inv[i]
     * out[0] = sum |y - x|, out[1] = sum of y[i] where inv[i] == 0 (synchronous; host memory).
     * y, c_next and x are distinct from each other and from c. The sums are deterministic: the
     * same bits for any thread count. */
    saga_status (*pagerank_pull_f64)(saga_stream *s, const saga_csr_dev *A, double d, double base,
                                     const double *c, const double *x, const double *inv, double *y,
                                     double *c_next, double *out);

    /* Dropout on the stored entries of a CSR matrix (rows of a larger A->n_cols wide matrix):
     * y[k] = keep(seed, r * A->n_cols + A->indices[k]) ? A->values[k] / (1 - p) : 0 for entry k
     * of row i, where r = row_ids[i] when row_ids is given, else row_base + i; keep is the mask
     * of dropout_f32, so the entries draw the bits a dense dropout of the same matrix would draw
     * for them, and a block of rows draws the whole matrix's mask. values NULL reads ones. y has
     * A->nnz entries (y may be A->values). Bitwise. SAGA_ERR_INVALID_ARG when p is outside
     * [0, 1). */
    saga_status (*dropout_csr_f32)(saga_stream *s, const saga_csr_dev *A, float p, uint64_t seed,
                                   int64_t row_base, const int32_t *row_ids, float *y);
    /* Y = alpha A^T X + beta Y with A sparse (A->n_rows x A->n_cols), X A->n_rows x F, Y
     * A->n_cols x F, without a stored transpose: the gradient of the right factor of a sparse x
     * dense product (dW = X^T dH). beta == 0 does not read Y. On the CPU every element of Y adds
     * its terms in increasing row order, the same bits for any thread count; on CUDA without
     * atomics, in a fixed order of its own (chunks of entries summed, then added in order: see
     * spmm_t.cu), the same bits on any GPU and in any thread order. */
    saga_status (*spmm_t_f32)(saga_stream *s, const saga_csr_dev *A, int64_t F, float alpha,
                              const float *X, float beta, float *Y);

    /* y[i] = x[i] widened to f32, for i < n: x holds 16-bit floats, bfloat16 (bf16 true: the
     * top half of an f32) or IEEE binary16 (false). Exact. */
    saga_status (*half_to_f32)(saga_stream *s, int64_t n, const uint16_t *x, bool bf16, float *y);

    /* nll_f32 with the mean written as one float to *loss (the backend's memory) in stream order:
     * nothing waits on CUDA, where a bad listed row or label writes nothing (neither loss nor
     * dlogp) and surfaces as SAGA_ERR_INVALID_ARG at the next synchronization, as a bad index of
     * gather_rows_f32 does; the CPU is synchronous and reports it at the call. The mean is the
     * one nll_f32 computes, rounded to f32. */
    saga_status (*nll_dev_f32)(saga_stream *s, int64_t rows, int64_t cols, const float *logp,
                               const int32_t *labels, const int32_t *rows_idx, int64_t n_idx,
                               float *loss, float *dlogp);

    /* acc[0] += dot_f64's sum of x .* y (dot_acc_f64) or l1_diff_f64's sum |x - y|
     * (l1_diff_acc_f64), the same bits, with acc in the backend's memory: in stream order, and
     * nothing waits on CUDA (n <= 0 adds nothing). Sums that stay on the device until the host
     * reads them once (a PageRank iteration's parts). */
    saga_status (*dot_acc_f64)(saga_stream *s, int64_t n, const double *x, const double *y,
                               double *acc);
    saga_status (*l1_diff_acc_f64)(saga_stream *s, int64_t n, const double *x, const double *y,
                                   double *acc);
    /* x[i] += a + b * c[0] for i < n, with c in the backend's memory (a sum a kernel wrote). */
    saga_status (*add_scalar_dev_f64)(saga_stream *s, int64_t n, double a, double b,
                                      const double *c, double *x);
    /* sumsq_f32's sum (the same bits) written to *out, in pinned host memory
     * (saga_backend_host_alloc), in stream order: read after a synchronization (the CPU, and
     * n <= 0, write it at once). Nothing waits on CUDA. */
    saga_status (*sumsq_pinned_f32)(saga_stream *s, int64_t n, const float *x, double *out);

    /* pagerank_pull_f64 with its base read and its sums added on the device, for iterations
     * pulled part by part without the host waiting for each part: base = a + b * base_in[1]
     * (base_in: two doubles on the device, an iteration's [L1 change, sinks' rank]); then
     * acc[0] += sum |y - x| and acc[1] += sum of y[i] where inv[i] == 0, on the device in stream
     * order (acc is not base_in). The same bits as pagerank_pull_f64 with that base, its out
     * added into acc. */
    saga_status (*pagerank_pull_acc_f64)(saga_stream *s, const saga_csr_dev *A, double d, double a,
                                         double b, const double *base_in, const double *c,
                                         const double *x, const double *inv, double *y,
                                         double *c_next, double *acc);
    /* y[i, k F + j] = sc[i, k] x[i, k F + j] (+ beta y[i, k F + j]) for i < rows, k < heads,
     * j < F: each head's block of F columns scaled by its column of sc (rows x heads); with
     * heads 1, every row by its scalar. beta == 0 does not read y; x and y must not overlap.
     * Bitwise on the CPU; on CUDA the same unless the compiler fuses the product and the
     * addition (beta != 0). */
    saga_status (*scale_heads_f32)(saga_stream *s, int64_t rows, int64_t heads, int64_t F,
                                   const float *sc, const float *x, float beta, float *y);
} saga_kernels;

typedef enum saga_copy_kind {
    SAGA_COPY_H2D = 0,
    SAGA_COPY_D2H,
    SAGA_COPY_D2D,
    SAGA_COPY_KIND_COUNT
} saga_copy_kind;

/* The function table, filled and copied as the kernel table is (saga_kernels). Slots marked
 * optional may be NULL. The generic layer calls alloc, free and
 * alloc_size with the backend's accounting lock held, so they need no locking of their own.
 *
 * The budget. What the generic layer charges against params.budget_bytes is what the device
 * gives the backend: each allocation at the size the backend's allocator takes for it
 * (alloc_size), in_use; the backend's own working memory (a stream's scratch, library
 * workspaces), reserved, which it allocates through saga_backend_reserve; and the freed blocks
 * it keeps for reuse, cached, which it keeps up to date in alloc and free. A request is refused
 * when in_use + reserved + its size would pass the budget; a backend that caches must then give
 * back cached blocks before taking new memory from the device whenever in_use + reserved +
 * cached + the new block would pass it. So in_use + reserved + cached, what the device has given
 * the backend, never passes the budget. */
typedef struct saga_backend_iface {
    size_t size; /* sizeof(saga_backend_iface) as the backend was built: see saga_kernels */
    void (*destroy)(saga_backend *be); /* frees be->ctx and whatever it holds */
    saga_status (*alloc)(saga_backend *be, void **out, size_t bytes);
    void (*free)(saga_backend *be, void *ptr, size_t bytes);
    saga_status (*host_alloc)(saga_backend *be, void **out, size_t bytes);
    void (*host_free)(saga_backend *be, void *ptr, size_t bytes);
    saga_status (*stream_new)(saga_backend *be, saga_stream *s); /* fills s->impl */
    void (*stream_free)(saga_stream *s);
    saga_status (*stream_sync)(saga_stream *s);
    saga_status (*stream_wait_event)(saga_stream *s, saga_event *e);
    saga_status (*event_new)(saga_backend *be, saga_event *e); /* fills e->impl */
    void (*event_free)(saga_event *e);
    saga_status (*event_record)(saga_event *e, saga_stream *s);
    saga_status (*event_sync)(saga_event *e);
    bool (*event_query)(saga_event *e);
    saga_status (*memcpy_async)(saga_stream *s, void *dst, const void *src, size_t n,
                                saga_copy_kind kind);
    saga_status (*synchronize)(saga_backend *be);
    /* optional: dst[0..n) = (unsigned char)value, queued on s; NULL means the tensor layer
     * cannot zero-fill on this backend */
    saga_status (*memset_async)(saga_stream *s, void *dst, int value, size_t n);
    /* optional: fn(arg) runs on a host thread when s reaches this point; NULL means the generic
     * layer synchronizes s and calls fn on the caller's thread */
    saga_status (*launch_host_fn)(saga_stream *s, void (*fn)(void *arg), void *arg);
    /* optional: seconds from start's completion to end's; both recorded and complete, else
     * SAGA_ERR_INVALID_ARG. NULL means SAGA_ERR_UNSUPPORTED. */
    saga_status (*event_elapsed)(saga_event *start, saga_event *end, double *seconds);
    /* optional: make the device current on the calling thread */
    saga_status (*bind_thread)(saga_backend *be);
    /* optional: the bytes alloc takes from the device for a request of `bytes`
     * (its size class), which is what the generic layer charges; 0 when no such block can exist.
     * NULL means exactly `bytes`. alloc and free are still given the bytes requested. */
    size_t (*alloc_size)(const saga_backend *be, size_t bytes);
    /* optional: open (start) or close a profiler's capture range
     * (cudaProfilerStart / cudaProfilerStop on CUDA); NULL means there is none to tell */
    saga_status (*profile_range)(saga_backend *be, bool start);
    /* optional: saga_memcpy_rows_h2d_async (add false: dev is the destination) or
     * saga_add_rows_d2h_async (add true: dev holds the rows added into the host's), queued on s;
     * NULL means SAGA_ERR_UNSUPPORTED */
    saga_status (*copy_rows)(saga_stream *s, const saga_host_rows *hr, void *dev, bool add);
    /* optional: stream_wait_event for an event of another backend with the same implementation
     * (this function: another device of the process); NULL means such an event can only be waited
     * for on the host (saga_stream_can_wait) */
    saga_status (*stream_wait_foreign)(saga_stream *s, saga_event *e);
    /* optional, all four or none: graphs (saga_backend_capture_begin). end gives
     * the executable graph in *exec: made when *exec is NULL, else *exec updated in place (or
     * replaced, when the work's shape changed); exec NULL discards the recording */
    saga_status (*capture_begin)(saga_backend *be);
    saga_status (*capture_end)(saga_backend *be, void **exec);
    saga_status (*graph_launch)(saga_backend *be, void *exec);
    void (*graph_free)(saga_backend *be, void *exec);
    /* optional: alloc for a block that a block scheduler holds across its steps
     * (saga_backend_alloc_block). Where the backend places memory itself (CUDA's arena under a
     * budget), such blocks and the other allocations (the steps' own tensors, which come and go
     * within a step) grow from opposite ends, so that the short-lived ones leave no holes between
     * the blocks and the blocks none between them. NULL means alloc. */
    saga_status (*alloc_block)(saga_backend *be, void **out, size_t bytes);
} saga_backend_iface;

struct saga_stream {
    saga_backend *be;
    void *impl;
};

struct saga_event {
    saga_backend *be;
    void *impl;
};

struct saga_backend {
    /* The tables: the backend's own while it opens, then the generic layer's copies below
     * (saga_kernels), for as long as the backend lives. */
    const saga_backend_iface *iface;
    const saga_kernels *kernels;
    saga_backend_iface iface_copy;
    saga_kernels kernels_copy;
    void *ctx;
    saga_backend_kind kind;
    saga_backend_params params;
    char name[128];
    size_t device_total;
    saga_stream default_stream;
    /* accounting, updated under `lock` (copies may be issued from several threads) */
    void *lock;
    size_t in_use;
    size_t peak;
    uint64_t h2d_bytes;
    uint64_t d2h_bytes;
    uint64_t n_allocs;
    double copy_seconds; /* time inside copies and memsets, for backends that measure it */
    size_t host_pinned;  /* bytes from host_alloc not yet freed */
    void *module; /* dlopen handle of the CUDA module, closed after destroy (it stays mapped) */
    /* spmm_f32 products that ran through cuSPARSE, and that cuSPARSE refused (see
     * saga_backend_stats): the CUDA module adds to them from any thread without the lock, so
     * both sides use atomic operations on them (the GCC __atomic builtins). */
    uint64_t spmm_cusparse;
    uint64_t spmm_cusparse_refused;
    /* The rest of the budget (see saga_backend_iface), under `lock`: reserved changes only in
     * saga_backend_reserve and saga_backend_unreserve; cached is the backend's to keep, in its
     * alloc and free (which run under the lock) and when it is destroyed. held_peak is the most
     * in_use + reserved + cached at once since the last reset. */
    size_t reserved;
    size_t cached;
    size_t held_peak;
    /* Bytes of the budget the backend expects to reserve for its own work during a run (set by
     * the backend when it opens; 0 on the CPU): planners leave them out of what they plan with. */
    size_t work_reserve;
    /* Bytes from the bottom of a budget's arena that saga_backend_alloc_block may place blocks in
     * (0: anywhere), under `lock` (saga_backend_set_block_room). */
    size_t block_room;
};

/* Checks the tables a backend's init filled (be->iface, be->kernels: each must have every slot
 * up to its first optional one) and takes the generic layer's copies of them (saga_kernels).
 * SAGA_ERR_INTERNAL, with nothing copied, for a missing or short table. */
saga_status saga_backend_take_tables(saga_backend *be);

/* saga_backend_alloc for a block a block scheduler holds across its steps: placed apart from the
 * other allocations where the backend places memory itself (see the table's alloc_block). */
saga_status saga_backend_alloc_block(saga_backend *be, void **out, size_t bytes);
/* Keeps the blocks of saga_backend_alloc_block within the first `bytes` of a budget's arena, where
 * the backend places memory itself (CUDA): a block scheduler whose blocks may hold `bytes` at most
 * (its cap) leaves the rest, at the top, to what its steps allocate themselves, in one piece.
 * 0 lifts the limit. A block that finds no room there is refused (SAGA_ERR_BUDGET). */
void saga_backend_set_block_room(saga_backend *be, size_t bytes);
size_t saga_backend_block_room(saga_backend *be);

/* Device memory for the backend's own work (a stream's scratch, a library's workspace), taken
 * with be->iface->alloc and charged against the budget as saga_backend_alloc charges, but counted
 * in reserved rather than in_use (nor in n_allocs). bytes == 0 gives NULL. SAGA_ERR_BUDGET when
 * it does not fit: with a message naming `what`, or, when what is NULL, with no message at all,
 * for a caller that then makes do with less; the backend's own errors (out of memory) carry its
 * message, prefixed by what when given. Must not be called with the lock held (not from alloc or
 * free). */
saga_status saga_backend_reserve(saga_backend *be, void **out, size_t bytes, const char *what);
/* Gives back memory from saga_backend_reserve; bytes must be the size it was reserved with.
 * Accepts NULL. */
void saga_backend_unreserve(saga_backend *be, void *ptr, size_t bytes);

/* The few services the CUDA module takes from libsaga, passed in explicitly so the module need
 * not link libsaga (and so the thread-local error message is the caller's one). Fields are only
 * appended; size is sizeof(saga_module_host) as libsaga was built. */
typedef struct saga_module_host {
    size_t size;
    saga_status (*error)(saga_status st, const char *fmt, ...);
    void (*log)(int level, const char *fmt, ...);
    /* saga_backend_reserve and saga_backend_unreserve */
    saga_status (*reserve)(saga_backend *be, void **out, size_t bytes, const char *what);
    void (*unreserve)(saga_backend *be, void *ptr, size_t bytes);
} saga_module_host;

/* Entry point the CUDA module exports: fills be->iface, kernels, ctx, name, device_total. */
typedef saga_status (*saga_cuda_module_init_fn)(saga_backend *be, int device,
                                                const saga_module_host *host);
#define SAGA_CUDA_MODULE_INIT "saga_cuda_module_init"
#define SAGA_CUDA_MODULE_NAME "libsaga_cuda.so"

/* The CPU kernel table (ops/cpu), used by the CPU backend. */
extern const saga_kernels saga_cpu_kernels;

/* Fills a freshly zeroed backend with the CPU table (memory, streams, events: ops/cpu/
 * backend_cpu.c), the kernels given (saga_cpu_kernels, whose kernels call into the streams), its
 * context, name and device_total; the generic layer then creates the default stream. */
saga_status saga_cpu_backend_init(saga_backend *be, const saga_kernels *kernels);

/* Host memory from saga_backend_host_alloc of at least need bytes at *p (*have bytes now), grown
 * when short; what it held is not kept. For buffers reused pass after pass (losses, rows read
 * back), so that a pass allocates nothing once they have grown. */
saga_status saga_backend_host_room(saga_backend *be, void **p, size_t *have, size_t need);

/* Whether a copy stream should run its copies on the default stream, in order with the kernels,
 * rather than beside them: on the CPU (saga_backend_params.copies), where a copy is a memcpy that
 * takes a core, by default when the kernels' threads take every core (a copy stream's worker
 * thread then takes one from them). A GPU copies with its own engines: false. */
bool saga_backend_copies_inline(const saga_backend *be);

/* Once per process, when the first backend opens: makes libgomp's idle threads sleep after a
 * short spin instead of ~3 ms, unless OMP_WAIT_POLICY, GOMP_SPINCOUNT or SAGA_OMP_SPIN=1 is set
 * (omp_idle.c says how). Returns 1 when in effect, -1 when left alone. Thread-safe. */
int saga_omp_idle_init(void);

/* While saga_omp_idle_init's team is in effect: spin = true ends it, so that libgomp's idle
 * threads spin their default ~3 ms again; false brings it back. Neither waits for the team's
 * threads. For passes of many short steps, whose regions follow each other closely
 * (saga_idle_tuner decides when). Thread-safe; nothing when the team is not in effect. */
void saga_omp_idle_spin(bool spin);

/* ---- graphs ---------------------------------------------------------------------------------
 * Work captured once and launched as one unit (CUDA graphs): the kernels and copies a pass issues
 * go to the device in one launch, and a pass whose work has the same shape as the last one only
 * updates the graph's arguments.
 *
 *   SAGA_TRY(saga_backend_capture_begin(be));   // what this thread issues is recorded, not run
 *   ... issue the pass on be's streams ...
 *   SAGA_TRY(saga_backend_capture_end(be, &g)); // g made, or updated to the new arguments
 *   SAGA_TRY(saga_replay_launch(g));             // runs on the default stream
 *
 * Between begin and end the caller must not allocate or free device memory, synchronize, query
 * an event or read on the host what the device computes: nothing has run yet. */
typedef struct saga_replay saga_replay;

/* Whether be captures graphs (CUDA); without, capture_begin returns SAGA_ERR_UNSUPPORTED. */
bool saga_backend_can_capture(const saga_backend *be);
/* Starts recording what the calling thread issues on be's default stream; the backend's other
 * streams are forked into the recording by an event (and joined back at its end), so that work
 * queued on them is recorded too, ordered as issued. */
saga_status saga_backend_capture_begin(saga_backend *be);
/* Ends the recording: *g is a new graph when NULL, else updated to the recorded work (its
 * arguments, or the whole graph when the work changed shape); g NULL discards it (after a failure
 * in between). On failure (a call that may not be recorded was made in between) nothing recorded
 * runs, *g is left as it was, and the backend is no longer capturing. */
saga_status saga_backend_capture_end(saga_backend *be, saga_replay **g);
/* Queues g's work on its backend's default stream. */
saga_status saga_replay_launch(saga_replay *g);
/* Frees *g (NULL is fine) and sets it to NULL; a launch in flight completes first. */
void saga_replay_free(saga_replay **g);

#ifdef __cplusplus
}
#endif
