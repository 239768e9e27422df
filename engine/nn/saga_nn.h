/* saga_nn.h - tensor ops with a derived backward pass, parameters, optimizers and checkpoints.
 *
 *   saga_ctx *c = NULL;
 *   SAGA_TRY(saga_ctx_new(&c, be, 42));                  // seed: dropout masks, init
 *   saga_model *m = NULL;
 *   SAGA_TRY(saga_model_new(&m, be));
 *   saga_tensor *W = saga_model_param(m, "W", 1433, 16, SAGA_INIT_GLOROT, 42);
 *   saga_optim *opt = NULL;
 *   saga_optim_opts oo = saga_optim_opts_defaults(SAGA_OPTIM_ADAM);  // lr 0.01
 *   SAGA_TRY(saga_optim_new(&opt, m, &oo));
 *   for (int epoch = 0; epoch < 200; epoch++) {
 *       saga_ctx_train(c, true);
 *       saga_tensor *h = saga_relu(c, saga_matmul(c, x, W));          // eager, recorded
 *       saga_tensor *loss = saga_nll_loss(c, saga_log_softmax(c, h), labels, train_idx);
 *       SAGA_TRY(saga_backward(c, loss));                // gradients into the parameters
 *       SAGA_TRY(saga_optim_step(opt));                  // then zeroes the gradients
 *       saga_ctx_clear(c);                               // frees this step's tensors
 *   }
 *
 * Ops run eagerly on the context's backend. Each op returns a new tensor owned by the context
 * (freed by saga_ctx_clear or saga_ctx_free), or NULL on error: the first error sticks to the
 * context (saga_ctx_status, with its message in saga_last_error()), and every later op given a
 * NULL input returns NULL at once, so expressions can be nested and checked once at the end.
 *
 * While the context is training, ops whose inputs need a gradient (parameters, or results of
 * such ops) are recorded on the context's tape; saga_backward walks it in reverse. Tensors made
 * by the user (saga_tensor_new, ...) are constants. Everything here is f32 unless an argument
 * says otherwise (labels and indices are i32 tensors, n x 1).
 */
#pragma once

#include "saga_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- context ------------------------------------------------------------------------------ */

typedef struct saga_ctx saga_ctx;

/* New context on be (not owned; must outlive the context). seed drives dropout masks. */
SAGA_API saga_status saga_ctx_new(saga_ctx **out, saga_backend *be, uint64_t seed);
/* Frees every tensor the context owns, the tape, and *c; *c becomes NULL. Accepts NULL. */
SAGA_API void saga_ctx_free(saga_ctx **c);
SAGA_API saga_backend *saga_ctx_backend(const saga_ctx *c);
/* Training mode: ops are recorded for saga_backward and dropout is active. Off: inference, no
 * tape, dropout is the identity. Off by default. */
SAGA_API void saga_ctx_train(saga_ctx *c, bool training);
SAGA_API bool saga_ctx_training(const saga_ctx *c);
/* The first error since the last clear (0 when none). */
SAGA_API saga_status saga_ctx_status(const saga_ctx *c);
/* Frees the tensors made by ops and the tape, and forgets the sticky error. Parameters and the
 * user's tensors are untouched. Dropout masks keep advancing: each dropout call draws a fresh
 * mask from (seed, a counter the context keeps). */
SAGA_API void saga_ctx_clear(saga_ctx *c);
/* Frees the device buffers the context keeps for reuse (released tensors' buffers), e.g. before
 * measuring peak device memory or after a step much larger than the next ones. */
SAGA_API void saga_ctx_trim(saga_ctx *c);
/* Sets the dropout counter (checkpoints save and restore it so that a resumed run draws the
 * same masks as the uninterrupted one). */
SAGA_API uint64_t saga_ctx_rng_counter(const saga_ctx *c);
SAGA_API void saga_ctx_set_rng_counter(saga_ctx *c, uint64_t counter);

/* ---- ops (f32 unless stated). Shapes: a is n x k, b is k x m, ... ------------------------- */

/* a b (n x k times k x m). */
SAGA_API saga_tensor *saga_matmul(saga_ctx *c, saga_tensor *a, saga_tensor *b);
/* [xs[0] | ... | xs[n-1]] w, 1 <= n <= 3, without forming the concatenation: the sum over i of
 * xs[i] times the rows of w facing xs[i]'s columns (the xs share a row count; their column
 * counts add up to w's rows). The same value and gradients as saga_matmul(saga_concat(...), w)
 * up to the order of the sums: the k-th column block is added after the ones before it. */
SAGA_API saga_tensor *saga_matmul_cat(saga_ctx *c, saga_tensor *const *xs, int n, saga_tensor *w);
/* saga_matmul_cat(xs, n, w) + b, b a 1 x w->cols row: the same values and gradients as
 * saga_add_bias of it, to the bit, without the product as a tensor of its own (b is added into the
 * product's output, and its gradient is not copied for it). n may be 1. */
SAGA_API saga_tensor *saga_matmul_cat_bias(saga_ctx *c, saga_tensor *const *xs, int n,
                                           saga_tensor *w, saga_tensor *b);
/* x + b, b a 1 x cols row broadcast over the rows of x. */
SAGA_API saga_tensor *saga_add_bias(saga_ctx *c, saga_tensor *x, saga_tensor *b);
SAGA_API saga_tensor *saga_relu(saga_ctx *c, saga_tensor *x);
SAGA_API saga_tensor *saga_leaky_relu(saga_ctx *c, saga_tensor *x, float slope);
SAGA_API saga_tensor *saga_elu(saga_ctx *c, saga_tensor *x, float alpha);
SAGA_API saga_tensor *saga_sigmoid(saga_ctx *c, saga_tensor *x);
SAGA_API saga_tensor *saga_tanh(saga_ctx *c, saga_tensor *x);
/* Inverted dropout with drop probability p in [0, 1): identity when not training. */
SAGA_API saga_tensor *saga_dropout(saga_ctx *c, saga_tensor *x, float p);
/* Element-wise, same shapes. */
SAGA_API saga_tensor *saga_add(saga_ctx *c, saga_tensor *a, saga_tensor *b);
SAGA_API saga_tensor *saga_sub(saga_ctx *c, saga_tensor *a, saga_tensor *b);
SAGA_API saga_tensor *saga_mul(saga_ctx *c, saga_tensor *a, saga_tensor *b);
SAGA_API saga_tensor *saga_div(saga_ctx *c, saga_tensor *a, saga_tensor *b);
/* a x + b (scalars). */
SAGA_API saga_tensor *saga_affine(saga_ctx *c, saga_tensor *x, float a, float b);
/* [a | b]: the columns of a, then those of b (same number of rows). */
SAGA_API saga_tensor *saga_concat(saga_ctx *c, saga_tensor *a, saga_tensor *b);
/* Columns [first, first + count) of x. */
SAGA_API saga_tensor *saga_slice_cols(saga_ctx *c, saga_tensor *x, int64_t first, int64_t count);
/* Row-wise softmax and log-softmax. */
SAGA_API saga_tensor *saga_softmax(saga_ctx *c, saga_tensor *x);
SAGA_API saga_tensor *saga_log_softmax(saga_ctx *c, saga_tensor *x);
/* Mean negative log-likelihood (1 x 1) of log-probabilities logp (n x classes) against labels
 * (i32, n x 1), over the rows listed in rows (i32, r x 1), or every row when rows is NULL. */
SAGA_API saga_tensor *saga_nll_loss(saga_ctx *c, saga_tensor *logp, saga_tensor *labels,
                                    saga_tensor *rows);
/* Masked cross-entropy: the mean negative log-likelihood of log_softmax(logits) (logits
 * n x classes) against labels (i32, n x 1) over the rows listed in rows (i32, r x 1), or every
 * row when rows is NULL; 1 x 1, with its backward (saga_nll_loss of saga_log_softmax). Every
 * listed row's label must be a class (0..classes-1): a -1 there is an error naming the row. */
SAGA_API saga_tensor *saga_cross_entropy(saga_ctx *c, saga_tensor *logits, saga_tensor *labels,
                                         saga_tensor *rows);
/* Fraction of the listed rows whose arg-max over scores (n x n_classes, host, row-major; the
 * first of equal maxima wins) equals the row's label: rows holds n_rows row ids, or is NULL for
 * rows 0..n_rows-1. A row labelled -1 counts as wrong; 0 when n_rows is 0. Host arrays only
 * (e.g. what saga_net_forward or saga_tensor_to_host wrote); nothing is checked beyond that. */
SAGA_API double saga_accuracy(const float *scores, int64_t n_classes, const int32_t *labels,
                              const int32_t *rows, int64_t n_rows);
/* Mean binary cross-entropy with logits (1 x 1), as PyTorch's BCEWithLogitsLoss(pos_weight):
 * target has x's shape, values in [0, 1]. */
SAGA_API saga_tensor *saga_bce_logits(saga_ctx *c, saga_tensor *x, saga_tensor *target,
                                      float pos_weight);
/* Sum and mean of all entries (1 x 1). */
SAGA_API saga_tensor *saga_sum(saga_ctx *c, saga_tensor *x);
SAGA_API saga_tensor *saga_mean(saga_ctx *c, saga_tensor *x);
/* Sum of the squares of all entries (1 x 1): an explicit L2 penalty. */
SAGA_API saga_tensor *saga_sumsq(saga_ctx *c, saga_tensor *x);
/* Row sums (n x 1). */
SAGA_API saga_tensor *saga_row_sum(saga_ctx *c, saga_tensor *x);
/* x s[0]: every entry of x times the 1 x 1 s, e.g. a learnable scalar such as GIN's epsilon,
 * (1 + eps) h = saga_add(c, h, saga_scale(c, h, eps)). Gradients: dy s[0] to x, the sum of
 * dy .* x to s. */
SAGA_API saga_tensor *saga_scale(saga_ctx *c, saga_tensor *x, saga_tensor *s);
/* x * s where s is n x H and H divides the m columns of x (n x m): column k of s scales the
 * columns k m/H .. (k + 1) m/H - 1 of x (with H = 1, each row by its scalar; with heads side by
 * side, each head's block by its own coefficient). */
SAGA_API saga_tensor *saga_scale_rows(saga_ctx *c, saga_tensor *x, saga_tensor *s);
/* Rows idx[k] of x (idx i32, r x 1): r x cols. An index outside [0, rows) is an error. */
SAGA_API saga_tensor *saga_gather_rows(saga_ctx *c, saga_tensor *x, saga_tensor *idx);
/* An n_rows x cols tensor whose row idx[k] accumulates row k of x (idx i32, x->rows x 1). */
SAGA_API saga_tensor *saga_scatter_add_rows(saga_ctx *c, saga_tensor *x, saga_tensor *idx,
                                            int64_t n_rows);

/* A sparse matrix in CSR on the context's backend, rows x cols with nnz stored entries: row i's
 * are indices[offsets[i] .. offsets[i + 1]) with values beside them, offsets from 0. A view of
 * tensors it does not own; an input, to which no gradient flows (sparse input features). */
typedef struct saga_sparse {
    int64_t rows, cols, nnz;
    saga_tensor *offsets; /* (rows + 1) x 1, i64 */
    saga_tensor *indices; /* nnz x 1, i32 */
    saga_tensor *values;  /* nnz x 1, f32 */
} saga_sparse;

/* Dropout on the stored entries of x, as Kipf & Welling's sparse_dropout: x's structure with
 * values kept with probability 1 - p and scaled by 1 / (1 - p), or 0 (the entry stays stored).
 * Entry (i, j) draws the bit saga_dropout would draw for element (i, j) of x made dense (the same
 * seed from the context's counter, the same row ids or row base), so a model gives the same
 * masks, and up to float rounding the same results, with sparse or dense input. x itself when
 * not training or p == 0; on error a saga_sparse with NULL tensors (the error is in c). */
SAGA_API saga_sparse saga_sparse_dropout(saga_ctx *c, const saga_sparse *x, float p);
/* x w (x sparse rows x k, w k x m): rows x m. Backward: w's gradient x^T dy (none for x). */
SAGA_API saga_tensor *saga_spmm(saga_ctx *c, const saga_sparse *x, saga_tensor *w);

/* A context-owned tensor holding a copy of rows x cols values read from host memory (labels, row
 * lists): freed with the context's other tensors (saga_ctx_clear, or the end of the block a
 * saga_net loss function runs in). The values are read at the call (host may change after it
 * returns); the host does not wait for the device's copy. NULL with the error in c. */
SAGA_API saga_tensor *saga_ctx_from_host(saga_ctx *c, saga_dtype dt, int64_t rows, int64_t cols,
                                         const void *host);

/* The value of a 1 x 1 (or any) f32 tensor's first entry, read synchronously; NAN when t is
 * NULL. For losses and metrics. */
SAGA_API float saga_item(const saga_tensor *t);

/* ---- autograd ----------------------------------------------------------------------------- */

/* Back-propagates from loss (1 x 1) through the tape: every parameter reached gets d loss / d
 * parameter added to its gradient. The tape is consumed (run saga_ctx_clear before the next
 * step). SAGA_ERR_INVALID_ARG when the context was not training or loss is not 1 x 1. */
SAGA_API saga_status saga_backward(saga_ctx *c, saga_tensor *loss);
/* saga_backward from an output of any shape with its gradient given (f32, out's shape): every
 * parameter reached gets d sum(out * grad) / d parameter added to its gradient, and every input
 * made by saga_ctx_input its own. For a network the caller runs in pieces, carrying gradients
 * between them. The tape is consumed as by saga_backward. */
SAGA_API saga_status saga_backward_from(saga_ctx *c, saga_tensor *out, const saga_tensor *grad);
/* A context-owned copy of rows x cols f32 host values, as saga_ctx_from_host, whose gradient a
 * backward pass keeps (saga_grad reads it until the context is cleared). NULL with the error in
 * c. */
SAGA_API saga_tensor *saga_ctx_input(saga_ctx *c, int64_t rows, int64_t cols, const float *host);
/* The gradient accumulated for a parameter (same shape; zero before any backward), or for an
 * input made by saga_ctx_input (NULL before a backward pass reaches it), or NULL for any other
 * tensor. Owned by the parameter (the context, for an input). */
SAGA_API saga_tensor *saga_grad(saga_tensor *param);

/* ---- parameters --------------------------------------------------------------------------- */

typedef struct saga_model saga_model;

typedef enum saga_init {
    SAGA_INIT_ZEROS = 0,
    SAGA_INIT_GLOROT,  /* uniform in +-sqrt(6 / (rows + cols)) (Glorot & Bengio) */
    SAGA_INIT_KAIMING, /* uniform in +-sqrt(6 / rows) (He, for relu layers) */
    SAGA_INIT_COUNT
} saga_init;

/* A set of named parameters on be (not owned). */
SAGA_API saga_status saga_model_new(saga_model **out, saga_backend *be);
/* Frees the parameters and *m; *m becomes NULL. Accepts NULL. */
SAGA_API void saga_model_free(saga_model **m);
/* Adds a rows x cols f32 parameter initialised from (init, seed); owned by the model. Returns
 * NULL on error (a duplicate name, no memory; see saga_last_error()). */
SAGA_API saga_tensor *saga_model_param(saga_model *m, const char *name, int64_t rows, int64_t cols,
                                       saga_init init, uint64_t seed);
SAGA_API int saga_model_n_params(const saga_model *m);
SAGA_API saga_tensor *saga_model_param_at(const saga_model *m, int i);
SAGA_API const char *saga_model_param_name(const saga_model *m, int i);
/* The parameter named name (saga_model_param), or NULL when m has none. */
SAGA_API saga_tensor *saga_model_find(const saga_model *m, const char *name);
/* Number of scalars over all parameters. */
SAGA_API int64_t saga_model_n_scalars(const saga_model *m);
/* Zeroes every parameter's gradient. */
SAGA_API saga_status saga_model_zero_grad(saga_model *m);
/* Every parameter's gradient, in the model's order, copied into host memory (back false;
 * saga_model_n_scalars floats) or from it into the gradients (back true), queued on the backend's
 * default stream: the host reads or changes `host` after a wait for the device. Pinned memory
 * (saga_backend_host_alloc) lets the copies run without one. For putting back what a failed step
 * added. */
SAGA_API saga_status saga_model_copy_grads(saga_model *m, float *host, bool back);
/* Every parameter's values, in the model's order, copied into host memory (back false) or from
 * it into the parameters (back true), queued on the default stream as saga_model_copy_grads: a
 * snapshot of the model between optimizer steps (the model of the best validation epoch, kept
 * while training goes on) and its return. */
SAGA_API saga_status saga_model_copy_params(saga_model *m, float *host, bool back);

/* ---- optimizers --------------------------------------------------------------------------- */

typedef struct saga_optim saga_optim;

typedef enum saga_optim_kind {
    SAGA_OPTIM_SGD = 0, /* with momentum and Nesterov as torch.optim.SGD */
    SAGA_OPTIM_ADAM,    /* weight decay added to the gradient, as torch.optim.Adam */
    SAGA_OPTIM_ADAMW,   /* decoupled weight decay, as torch.optim.AdamW */
    SAGA_OPTIM_COUNT
} saga_optim_kind;

typedef struct saga_optim_opts {
    saga_optim_kind kind;
    float lr;
    float weight_decay;      /* for every parameter unless saga_optim_set_weight_decay says else */
    float momentum;          /* SGD */
    bool nesterov;           /* SGD */
    float beta1, beta2, eps; /* Adam, AdamW */
} saga_optim_opts;

/* lr 0.01, no weight decay, momentum 0, betas (0.9, 0.999), eps 1e-8; AdamW decay 0.01. */
SAGA_API saga_optim_opts saga_optim_opts_defaults(saga_optim_kind kind);
/* An optimizer over every parameter of m (m must outlive it; parameters added later are not
 * seen). */
SAGA_API saga_status saga_optim_new(saga_optim **out, saga_model *m, const saga_optim_opts *o);
SAGA_API void saga_optim_free(saga_optim **o);
/* Weight decay for one parameter (e.g. only the first layer, as in GCN). */
SAGA_API saga_status saga_optim_set_weight_decay(saga_optim *o, const saga_tensor *param, float wd);
/* The learning rate of the next steps (a schedule sets it before each step or epoch; the state,
 * Adam's moments and step count, is kept). SAGA_ERR_INVALID_ARG for lr < 0 or not finite. */
SAGA_API saga_status saga_optim_set_lr(saga_optim *o, float lr);
SAGA_API float saga_optim_lr(const saga_optim *o);
/* One update of every parameter from its gradient, then zeroes the gradients. */
SAGA_API saga_status saga_optim_step(saga_optim *o);
SAGA_API int64_t saga_optim_steps(const saga_optim *o);

/* ---- checkpoints -------------------------------------------------------------------------- */

/* Writes the parameters, the optimizer state (may be NULL) and user_step / rng_counter to path
 * (binary, CRC32-checked; written to path.tmp and renamed). */
SAGA_API saga_status saga_checkpoint_save(const char *path, const saga_model *m,
                                          const saga_optim *o, int64_t user_step,
                                          uint64_t rng_counter);
/* Reads a checkpoint into an existing model (and optimizer) with the same parameter names and
 * shapes. SAGA_ERR_PARSE naming the file for a bad magic, version, size or checksum, or a
 * parameter that does not match; nothing is changed then. */
SAGA_API saga_status saga_checkpoint_load(const char *path, saga_model *m, saga_optim *o,
                                          int64_t *user_step, uint64_t *rng_counter);

#ifdef __cplusplus
}
#endif
