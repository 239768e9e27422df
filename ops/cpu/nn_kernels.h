/* nn_kernels.h - the CPU neural-network kernels (f32) of nn_dense.c and nn_sparse.c, as kernels.c
 * registers them in saga_cpu_kernels, and the threading helpers they share. Internal. */
#pragma once

#include "backend_impl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Blocks until the work queued before on s has run (backend_cpu.c). Kernels run on the calling
 * thread whatever their stream; each calls this first so that, on an asynchronous stream, it
 * comes after the copies, waits and host functions issued there before it. Returns at once on the
 * default stream (and for s == NULL). */
void saga_cpu_stream_drain(saga_stream *s);

/* Most threads a kernel uses (per-thread partial sums live on the stack). */
#define SAGA_CPU_NN_MAX_THREADS 256

/* Below this much work (elements touched) a kernel runs on one thread: a parallel region costs
 * more than it saves. A variable so that tests can set it to 0 and drive the parallel paths with
 * small inputs; not for tuning at run time. */
extern int64_t saga_cpu_nn_min_parallel_work;

/* Threads for `work` elements issued on s: 1 below saga_cpu_nn_min_parallel_work, else the
 * backend's n_threads (OpenMP's current default when 0), capped at SAGA_CPU_NN_MAX_THREADS. */
int saga_cpu_nn_threads(const saga_stream *s, int64_t work);

/* [lo, hi) of part id out of nt over n items; parts differ in size by at most one. */
static inline void saga_cpu_nn_chunk(int64_t n, int id, int nt, int64_t *lo, int64_t *hi) {
    int64_t q = n / nt, r = n % nt;
    *lo = q * id + (id < r ? id : r);
    *hi = *lo + q + (id < r ? 1 : 0);
}

/* ---- nn_dense.c ---------------------------------------------------------------------------- */
saga_status saga_cpu_gemm_f32(saga_stream *s, bool trans_a, bool trans_b, int64_t M, int64_t N,
                              int64_t K, float alpha, const float *A, int64_t lda, const float *B,
                              int64_t ldb, float beta, float *C, int64_t ldc);
saga_status saga_cpu_bias_add_f32(saga_stream *s, int64_t rows, int64_t cols, const float *x,
                                  const float *b, float *y);
saga_status saga_cpu_colsum_f32(saga_stream *s, int64_t rows, int64_t cols, const float *x,
                                float beta, float *out);
saga_status saga_cpu_act_f32(saga_stream *s, saga_act kind, int64_t n, float alpha, const float *x,
                             float *y);
saga_status saga_cpu_act_bwd_f32(saga_stream *s, saga_act kind, int64_t n, float alpha,
                                 const float *x, const float *y, const float *dy, float *dx);
saga_status saga_cpu_dropout_f32(saga_stream *s, int64_t n, float p, uint64_t seed, int64_t first,
                                 const float *x, float *y);
saga_status saga_cpu_binary_f32(saga_stream *s, saga_binop op, int64_t n, const float *x,
                                const float *y, float *z);
saga_status saga_cpu_scale_heads_f32(saga_stream *s, int64_t rows, int64_t heads, int64_t F,
                                     const float *sc, const float *x, float beta, float *y);
saga_status saga_cpu_scale_f32(saga_stream *s, int64_t n, float a, const float *x, float b,
                               float *y);
saga_status saga_cpu_fill_f32(saga_stream *s, float *x, int64_t n, float v);
saga_status saga_cpu_copy2d_f32(saga_stream *s, int64_t rows, int64_t cols, const float *src,
                                int64_t lds, float *dst, int64_t ldd, bool accumulate);
saga_status saga_cpu_softmax_rows_f32(saga_stream *s, int64_t rows, int64_t cols, bool log,
                                      const float *x, float *y);
saga_status saga_cpu_softmax_rows_bwd_f32(saga_stream *s, int64_t rows, int64_t cols, bool log,
                                          const float *y, const float *dy, float *dx);
saga_status saga_cpu_nll_f32(saga_stream *s, int64_t rows, int64_t cols, const float *logp,
                             const int32_t *labels, const int32_t *rows_idx, int64_t n_idx,
                             double *loss, float *dlogp);
saga_status saga_cpu_bce_logits_f32(saga_stream *s, int64_t n, const float *x, const float *target,
                                    float pos_weight, double *loss, float *dx);
saga_status saga_cpu_sum_f32(saga_stream *s, int64_t n, const float *x, double *out);
saga_status saga_cpu_sumsq_f32(saga_stream *s, int64_t n, const float *x, double *out);
saga_status saga_cpu_adam_f32(saga_stream *s, int64_t n, float lr, float beta1, float beta2,
                              float eps, float weight_decay, bool decoupled, int64_t step,
                              float *param, const float *grad, float *m, float *v);
saga_status saga_cpu_dropout_rows_f32(saga_stream *s, int64_t rows, int64_t cols, float p,
                                      uint64_t seed, const int32_t *row_ids, const float *x,
                                      float *y);
saga_status saga_cpu_sgd_f32(saga_stream *s, int64_t n, float lr, float momentum,
                             float weight_decay, bool nesterov, float *param, const float *grad,
                             float *buf);

/* ---- nn_sparse.c --------------------------------------------------------------------------- */
saga_status saga_cpu_gather_rows_f32(saga_stream *s, int64_t n_idx, int64_t cols,
                                     const int32_t *idx, int64_t n_rows_x, const float *x,
                                     float *y);
saga_status saga_cpu_scatter_add_rows_f32(saga_stream *s, int64_t n_idx, int64_t cols,
                                          const int32_t *idx, const float *x, int64_t n_rows_y,
                                          float *y);
saga_status saga_cpu_dropout_csr_f32(saga_stream *s, const saga_csr_dev *A, float p, uint64_t seed,
                                     int64_t row_base, const int32_t *row_ids, float *y);
saga_status saga_cpu_spmm_t_f32(saga_stream *s, const saga_csr_dev *A, int64_t F, float alpha,
                                const float *X, float beta, float *Y);
saga_status saga_cpu_spmm_f32(saga_stream *s, const saga_csr_dev *A, int64_t F, float alpha,
                              const float *X, float beta, float *Y);
saga_status saga_cpu_segment_reduce_f32(saga_stream *s, const int64_t *offsets, int64_t n_seg,
                                        int64_t F, saga_reduce op, const float *x, float *y,
                                        int32_t *argmax);
saga_status saga_cpu_segment_reduce_bwd_f32(saga_stream *s, const int64_t *offsets, int64_t n_seg,
                                            int64_t F, saga_reduce op, const float *dy,
                                            const int32_t *argmax, float *dx);
saga_status saga_cpu_edge_softmax_f32(saga_stream *s, const int64_t *offsets, int64_t n_seg,
                                      int64_t H, const float *scores, float *out);
saga_status saga_cpu_edge_softmax_bwd_f32(saga_stream *s, const int64_t *offsets, int64_t n_seg,
                                          int64_t H, const float *out, const float *dout,
                                          float *dscores);

#ifdef __cplusplus
}
#endif
