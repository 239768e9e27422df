/* nn_ops.c - the tensor ops of saga_nn.h and their backward functions. Shapes and dtypes are
 * checked here, once for every backend; the arithmetic is the backend's kernel table. */
#include "nn_internal.h"

#include <math.h>
#include <stdarg.h>

#define K (saga_ctx_kernels(c))
#define S (saga_ctx_stream(c))

/* ---- checks ------------------------------------------------------------------------------- */

/* Records an error made from the message and returns NULL, for `return op_err(...)`. */
static saga_tensor *op_err(saga_ctx *c, saga_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static saga_tensor *op_err(saga_ctx *c, saga_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    saga_error_v(st, fmt, ap);
    va_end(ap);
    saga_ctx_fail(c, st);
    return NULL;
}

/* A kernel's failure, its message prefixed with the op. */
static bool kfail(saga_ctx *c, const char *op, saga_status st) {
    if (st >= 0)
        return false;
    saga_error_prefix(st, "%s: ", op);
    saga_ctx_fail(c, st);
    return true;
}

/* Whether op can run: the context is live and the slot exists (else UNSUPPORTED naming the op,
 * the backend and the slot). */
static bool has(saga_ctx *c, const char *op, bool present, const char *slot) {
    if (present)
        return true;
    op_err(c, SAGA_ERR_UNSUPPORTED, "%s: backend %s has no %s kernel", op,
           saga_ctx_backend(c)->name, slot);
    return false;
}

/* Whether t is a usable input of op: not NULL (a NULL input after an error returns at once),
 * on the context's backend, of dtype dt. */
static bool arg(saga_ctx *c, const char *op, const char *name, const saga_tensor *t,
                saga_dtype dt) {
    if (!t) {
        if (!saga_ctx_failed(c))
            op_err(c, SAGA_ERR_INVALID_ARG, "%s: %s is NULL", op, name);
        return false;
    }
    if (t->be != saga_ctx_backend(c)) {
        op_err(c, SAGA_ERR_INVALID_ARG, "%s: %s is on backend %s, the context on %s", op, name,
               t->be->name, saga_ctx_backend(c)->name);
        return false;
    }
    if (t->dtype != dt) {
        op_err(c, SAGA_ERR_INVALID_ARG, "%s: %s must be %s, got %s", op, name, saga_dtype_name(dt),
               saga_dtype_name(t->dtype));
        return false;
    }
    return true;
}

/* Whether an op may run; a deferred product (saga_ctx_set_defer) runs first, whatever the op
 * reads. */
static bool live(saga_ctx *c) {
    saga_ctx_flush(c);
    return c && !saga_ctx_failed(c);
}

static int64_t numel(const saga_tensor *t) {
    return t->rows * t->cols;
}

/* Records out's node when the context trains and an input needs a gradient. state is owned
 * from here on (saga_free'd). Returns out, or NULL on error. */
static saga_tensor *rec(saga_ctx *c, saga_tensor *out, saga_tensor *a, saga_tensor *b,
                        saga_node_backward_fn bwd, void *state) {
    saga_tensor *in[2] = {a, b};
    if (saga_tape_record(c, out, in, b ? 2 : 1, bwd, state, state ? saga_free : NULL) < 0)
        return NULL;
    return out;
}

/* A small saved state (scalars) for a backward function; NULL with the sticky error. */
static void *state_new(saga_ctx *c, size_t size) {
    void *p = NULL;
    if (!saga_ctx_training(c))
        return NULL;
    if (saga_alloc_zeroed(&p, 1, size, "op state") < 0)
        saga_ctx_fail(c, SAGA_ERR_OUT_OF_MEMORY);
    return p;
}

/* Whether any of the inputs will be recorded (then the state must exist). */
static bool recording(const saga_ctx *c, const saga_tensor *a, const saga_tensor *b) {
    return saga_ctx_training(c) && (saga_tensor_needs_grad(a) || saga_tensor_needs_grad(b));
}

/* ---- backward helpers --------------------------------------------------------------------- */

/* Where input t's gradient contribution goes for a kernel that cannot accumulate: t's gradient
 * itself when it has none yet, else a temporary that grad_end adds. */
static float *grad_begin(saga_ctx *c, saga_tensor *t, saga_tensor **tmp) {
    float beta = 0.0f;
    *tmp = NULL;
    if (!t->grad) {
        float *g = saga_grad_target(c, t, &beta);
        if (!g || beta == 0.0f)
            return g;
        /* a user tensor's fresh gradient is zeroed: accumulate into it like any other */
    }
    *tmp = saga_ctx_temp(c, SAGA_F32, t->rows, t->cols);
    return *tmp ? (*tmp)->data : NULL;
}

static saga_status grad_end(saga_ctx *c, saga_tensor *t, saga_tensor **tmp) {
    saga_status st = SAGA_OK;
    if (*tmp && numel(t))
        st = K->scale_f32(S, numel(t), 1.0f, (*tmp)->data, 1.0f, t->grad->data);
    saga_ctx_temp_free(c, tmp);
    return st;
}

/* dy of a 1 x 1 output, read to the host (losses and reductions are synchronous anyway). */
static saga_status read_scalar(saga_ctx *c, const saga_tensor *dy, float *v) {
    saga_status st = SAGA_OK;
    SAGA_TRY(saga_memcpy_d2h_async(S, v, dy->data, sizeof *v));
    SAGA_TRY(saga_stream_synchronize(S));
fail:
    return st;
}

/* A temporary of n ones. */
static saga_tensor *ones_temp(saga_ctx *c, int64_t n) {
    saga_tensor *t = saga_ctx_temp(c, SAGA_F32, n, 1);
    if (t && n && kfail(c, "ones", K->fill_f32(S, t->data, n, 1.0f)))
        saga_ctx_temp_free(c, &t);
    return t;
}

/* ---- matmul, bias ------------------------------------------------------------------------- */

static saga_status matmul_bwd(saga_ctx *c, saga_node *n, saga_tensor *dy) {
    saga_status st = SAGA_OK;
    saga_tensor *a = saga_node_input(n, 0), *b = saga_node_input(n, 1);
    int64_t N = a->rows, Kd = a->cols, M = b->cols;
    float beta = 0.0f;
    /* da = dy b^T and db = a^T dy, with the transposes folded into the GEMM */
    if (saga_node_needs_grad(n, 0)) {
        float *da = saga_grad_target(c, a, &beta);
        if (!da)
            return saga_ctx_status(c);
        if (numel(a))
            SAGA_TRY(
                K->gemm_f32(S, false, true, N, Kd, M, 1.0f, dy->data, M, b->data, M, beta, da, Kd));
    }
    if (saga_node_needs_grad(n, 1)) {
        float *db = saga_grad_target(c, b, &beta);
        if (!db)
            return saga_ctx_status(c);
        if (numel(b))
            SAGA_TRY(
                K->gemm_f32(S, true, false, Kd, M, N, 1.0f, a->data, Kd, dy->data, M, beta, db, M));
    }
fail:
    return st;
}

/* y = a b, deferred while the context defers (saga_ctx_defer) */
typedef struct matmul_args {
    const float *a, *b;
    int64_t m, n, k;
} matmul_args;

static saga_status matmul_run(saga_ctx *c, const void *args, float *y) {
    const matmul_args *g = args;
    if (g->k == 0)
        return K->fill_f32(S, y, g->m * g->n, 0.0f);
    return K->gemm_f32(S, false, false, g->m, g->n, g->k, 1.0f, g->a, g->k, g->b, g->n, 0.0f, y,
                       g->n);
}

saga_tensor *saga_matmul(saga_ctx *c, saga_tensor *a, saga_tensor *b) {
    static const char op[] = "saga_matmul";
    if (!live(c) || !arg(c, op, "a", a, SAGA_F32) || !arg(c, op, "b", b, SAGA_F32) ||
        !has(c, op, K->gemm_f32, "gemm_f32"))
        return NULL;
    if (a->cols != b->rows)
        return op_err(c, SAGA_ERR_INVALID_ARG,
                      "saga_matmul: a is %lld x %lld, b is %lld x %lld: inner dimensions differ",
                      (long long)a->rows, (long long)a->cols, (long long)b->rows,
                      (long long)b->cols);
    saga_tensor *y = saga_ctx_tensor(c, SAGA_F32, a->rows, b->cols);
    if (!y)
        return NULL;
    matmul_args g = {a->data, b->data, a->rows, b->cols, a->cols};
    if (numel(y) && !saga_ctx_defer(c, y, matmul_run, &g, sizeof g) &&
        kfail(c, op, matmul_run(c, &g, y->data)))
        return NULL;
    return rec(c, y, a, b, matmul_bwd, NULL);
}

/* ---- a product of concatenated columns ---------------------------------------------------- */

enum { MATMUL_CAT_MAX = 3 };

/* inputs 0 .. n-1 the parts, input n the weight, input n + 1 the bias where there is one */
typedef struct matmul_cat_state {
    int n;
    bool bias;
    int act; /* a saga_act applied in place (one whose derivative reads the output), or -1 */
} matmul_cat_state;

static saga_status matmul_cat_bwd(saga_ctx *c, saga_node *nd, saga_tensor *dy) {
    saga_status st = SAGA_OK;
    const matmul_cat_state *ms = saga_node_state(nd);
    int n = ms->n;
    saga_tensor *w = saga_node_input(nd, n), *tmp = NULL;
    int64_t rows = dy->rows, M = w->cols, first = 0;
    float *dw = NULL, beta_w = 0.0f;
    if (ms->act >= 0) {
        /* the gradient before the activation, from its output (as act_bwd's) */
        if (!(tmp = saga_ctx_temp(c, SAGA_F32, rows, M)))
            return saga_ctx_status(c);
        if (rows > 0 && M > 0)
            SAGA_TRY(K->act_bwd_f32(S, (saga_act)ms->act, rows * M, 0.0f, NULL,
                                    saga_node_output(nd)->data, dy->data, tmp->data));
        dy = tmp;
    }
    if (saga_node_needs_grad(nd, n) && !(dw = saga_grad_target(c, w, &beta_w))) {
        saga_ctx_temp_free(c, &tmp);
        return saga_ctx_status(c);
    }
    for (int i = 0; i < n; i++) {
        saga_tensor *x = saga_node_input(nd, i);
        int64_t k = x->cols;
        const float *wi = (const float *)w->data + first * M;
        /* dx_i = dy w_i^T; dw_i = x_i^T dy, into w's rows facing x_i */
        if (saga_node_needs_grad(nd, i) && numel(x)) {
            float beta = 0.0f;
            float *dx = saga_grad_target(c, x, &beta);
            if (!dx) {
                st = saga_ctx_status(c);
                goto fail;
            }
            SAGA_TRY(
                K->gemm_f32(S, false, true, rows, k, M, 1.0f, dy->data, M, wi, M, beta, dx, k));
        }
        if (dw && k) {
            if (rows)
                SAGA_TRY(K->gemm_f32(S, true, false, k, M, rows, 1.0f, x->data, k, dy->data, M,
                                     beta_w, dw + first * M, M));
            else if (beta_w == 0.0f)
                SAGA_TRY(K->fill_f32(S, dw + first * M, k * M, 0.0f));
        }
        first += k;
    }
    if (ms->bias && saga_node_needs_grad(nd, n + 1)) {
        /* db = the column sums of dy, as saga_add_bias's */
        saga_tensor *b = saga_node_input(nd, n + 1);
        float beta = 0.0f, *db = saga_grad_target(c, b, &beta);
        if (!db) {
            st = saga_ctx_status(c);
            goto fail;
        }
        if (numel(b))
            SAGA_TRY(K->colsum_f32(S, rows, M, dy->data, beta, db));
    }
fail:
    saga_ctx_temp_free(c, &tmp);
    return st;
}

/* [xs] w, plus the row b when b is not NULL: the products into one output, then b added there
 * (the values saga_add_bias of saga_matmul_cat gives, without their intermediate tensor or its
 * gradient's copy). */
static saga_tensor *matmul_cat_bias(saga_ctx *c, const char *op, saga_tensor *const *xs, int n,
                                    saga_tensor *w, saga_tensor *b, int act) {
    if (!live(c) || !arg(c, op, "w", w, SAGA_F32) || !has(c, op, K->gemm_f32, "gemm_f32"))
        return NULL;
    if (b && (!arg(c, op, "b", b, SAGA_F32) ||
              !has(c, op, K->bias_add_f32 && K->colsum_f32, "bias_add_f32/colsum_f32")))
        return NULL;
    if (!xs || n < 1 || n > MATMUL_CAT_MAX)
        return op_err(c, SAGA_ERR_INVALID_ARG, "%s: 1 to %d parts, got %d", op, MATMUL_CAT_MAX, n);
    if (act >= 0 && !has(c, op, K->act_f32 && K->act_bwd_f32, "act_f32/act_bwd_f32"))
        return NULL;
    if (n == 1 && !b && act < 0)
        return saga_matmul(c, xs[0], w); /* one part: the product itself (deferred as it is) */
    int64_t cols = 0;
    for (int i = 0; i < n; i++) {
        if (!arg(c, op, "a part", xs[i], SAGA_F32))
            return NULL;
        if (xs[i]->rows != xs[0]->rows)
            return op_err(c, SAGA_ERR_INVALID_ARG, "%s: part %d has %lld rows, part 0 %lld", op, i,
                          (long long)xs[i]->rows, (long long)xs[0]->rows);
        cols += xs[i]->cols;
    }
    if (cols != w->rows)
        return op_err(c, SAGA_ERR_INVALID_ARG, "%s: the parts have %lld columns, w is %lld x %lld",
                      op, (long long)cols, (long long)w->rows, (long long)w->cols);
    if (b && (b->rows != 1 || b->cols != w->cols))
        return op_err(c, SAGA_ERR_INVALID_ARG, "%s: b must be 1 x %lld, got %lld x %lld", op,
                      (long long)w->cols, (long long)b->rows, (long long)b->cols);
    int64_t rows = xs[0]->rows, M = w->cols, first = 0;
    saga_tensor *y = saga_ctx_tensor(c, SAGA_F32, rows, M);
    if (!y)
        return NULL;
    bool written = false;
    for (int i = 0; i < n && numel(y); i++) {
        int64_t k = xs[i]->cols;
        if (k && kfail(c, op,
                       K->gemm_f32(S, false, false, rows, M, k, 1.0f, xs[i]->data, k,
                                   (const float *)w->data + first * M, M, written ? 1.0f : 0.0f,
                                   y->data, M)))
            return NULL;
        written |= k > 0;
        first += k;
    }
    if (numel(y) && !written && kfail(c, op, K->fill_f32(S, y->data, numel(y), 0.0f)))
        return NULL;
    if (numel(y) && b && kfail(c, op, K->bias_add_f32(S, rows, M, y->data, b->data, y->data)))
        return NULL;
    if (numel(y) && act >= 0 &&
        kfail(c, op, K->act_f32(S, (saga_act)act, numel(y), 0.0f, y->data, y->data)))
        return NULL;
    if (!saga_ctx_training(c))
        return y;
    saga_tensor *in[MATMUL_CAT_MAX + 2];
    for (int i = 0; i < n; i++)
        in[i] = xs[i];
    in[n] = w;
    if (b)
        in[n + 1] = b;
    matmul_cat_state *state = state_new(c, sizeof *state);
    if (!state)
        return NULL;
    *state = (matmul_cat_state){n, b != NULL, act};
    if (saga_tape_record(c, y, in, n + 1 + (b != NULL), matmul_cat_bwd, state, saga_free) < 0)
        return NULL;
    return y;
}

saga_tensor *saga_matmul_cat(saga_ctx *c, saga_tensor *const *xs, int n, saga_tensor *w) {
    return matmul_cat_bias(c, "saga_matmul_cat", xs, n, w, NULL, -1);
}

saga_tensor *saga_matmul_cat_bias(saga_ctx *c, saga_tensor *const *xs, int n, saga_tensor *w,
                                  saga_tensor *b) {
    if (live(c) && !b)
        return op_err(c, SAGA_ERR_INVALID_ARG, "saga_matmul_cat_bias: b must be given");
    return matmul_cat_bias(c, "saga_matmul_cat_bias", xs, n, w, b, -1);
}

saga_tensor *nn_matmul_cat_bias_act(saga_ctx *c, saga_tensor *const *xs, int n, saga_tensor *w,
                                    saga_tensor *b, saga_act act) {
    static const char op[] = "nn_matmul_cat_bias_act";
    if (live(c) &&
        (!b || (act != SAGA_ACT_RELU && act != SAGA_ACT_SIGMOID && act != SAGA_ACT_TANH)))
        return op_err(c, SAGA_ERR_INVALID_ARG,
                      "%s: b must be given, and the activation be relu, sigmoid or tanh", op);
    return matmul_cat_bias(c, op, xs, n, w, b, (int)act);
}

/* ---- learnable scalar --------------------------------------------------------------------- */

/* x s[0] is the product of x's entries as a column (numel x 1) with the 1 x 1 s: a GEMM with
 * K = 1, so the scale never leaves the device and every backend with a GEMM runs it. */
static saga_status scale_bwd(saga_ctx *c, saga_node *n, saga_tensor *dy) {
    saga_status st = SAGA_OK;
    saga_tensor *x = saga_node_input(n, 0), *s = saga_node_input(n, 1);
    int64_t len = numel(x);
    float beta = 0.0f;
    if (saga_node_needs_grad(n, 0) && len) {
        /* dx = dy s */
        float *dx = saga_grad_target(c, x, &beta);
        if (!dx)
            return saga_ctx_status(c);
        SAGA_TRY(
            K->gemm_f32(S, false, false, len, 1, 1, 1.0f, dy->data, 1, s->data, 1, beta, dx, 1));
    }
    if (saga_node_needs_grad(n, 1)) {
        /* ds = x . dy, the column's transpose times the column */
        float *ds = saga_grad_target(c, s, &beta);
        if (!ds)
            return saga_ctx_status(c);
        if (len)
            SAGA_TRY(
                K->gemm_f32(S, true, false, 1, 1, len, 1.0f, x->data, 1, dy->data, 1, beta, ds, 1));
        else if (beta == 0.0f)
            SAGA_TRY(K->fill_f32(S, ds, 1, 0.0f));
    }
fail:
    return st;
}

saga_tensor *saga_scale(saga_ctx *c, saga_tensor *x, saga_tensor *s) {
    static const char op[] = "saga_scale";
    if (!live(c) || !arg(c, op, "x", x, SAGA_F32) || !arg(c, op, "s", s, SAGA_F32) ||
        !has(c, op, K->gemm_f32 && K->fill_f32, "gemm_f32/fill_f32"))
        return NULL;
    if (s->rows != 1 || s->cols != 1)
        return op_err(c, SAGA_ERR_INVALID_ARG, "saga_scale: s must be 1 x 1, got %lld x %lld",
                      (long long)s->rows, (long long)s->cols);
    saga_tensor *y = saga_ctx_tensor(c, SAGA_F32, x->rows, x->cols);
    if (!y)
        return NULL;
    if (numel(y) && kfail(c, op,
                          K->gemm_f32(S, false, false, numel(x), 1, 1, 1.0f, x->data, 1, s->data, 1,
                                      0.0f, y->data, 1)))
        return NULL;
    return rec(c, y, x, s, scale_bwd, NULL);
}

/* ---- sparse x dense ------------------------------------------------------------------------ */

/* Whether x is a usable sparse input of op: its tensors on the context's backend, of the CSR's
 * dtypes and shapes. */
static bool sparse_arg(saga_ctx *c, const char *op, const saga_sparse *x) {
    if (!x) {
        op_err(c, SAGA_ERR_INVALID_ARG, "%s: x is NULL", op);
        return false;
    }
    if (!arg(c, op, "x->offsets", x->offsets, SAGA_I64) ||
        !arg(c, op, "x->indices", x->indices, SAGA_I32) ||
        !arg(c, op, "x->values", x->values, SAGA_F32))
        return false;
    if (x->rows < 0 || x->cols < 0 || x->nnz < 0 || numel(x->offsets) != x->rows + 1 ||
        numel(x->indices) != x->nnz || numel(x->values) != x->nnz) {
        op_err(c, SAGA_ERR_INVALID_ARG,
               "%s: a %lld x %lld CSR with %lld entries needs %lld offsets and %lld indices and "
               "values, got %lld, %lld and %lld",
               op, (long long)x->rows, (long long)x->cols, (long long)x->nnz,
               (long long)x->rows + 1, (long long)x->nnz, (long long)numel(x->offsets),
               (long long)numel(x->indices), (long long)numel(x->values));
        return false;
    }
    return true;
}

static saga_csr_dev csr_of(const saga_sparse *x) {
    return (saga_csr_dev){x->rows,          x->cols,          x->nnz,
                          x->offsets->data, x->indices->data, x->values->data};
}

saga_sparse saga_sparse_dropout(saga_ctx *c, const saga_sparse *x, float p) {
    static const char op[] = "saga_sparse_dropout";
    saga_sparse out = {0};
    if (!live(c) || !sparse_arg(c, op, x))
        return out;
    if (!(p >= 0.0f && p < 1.0f)) {
        op_err(c, SAGA_ERR_INVALID_ARG, "saga_sparse_dropout: p must be in [0, 1), got %g",
               (double)p);
        return out;
    }
    if (!saga_ctx_training(c) || p == 0.0f)
        return *x;
    if (!has(c, op, K->dropout_csr_f32, "dropout_csr_f32"))
        return out;
    /* the draw of saga_dropout on the dense matrix: the same seed, the same row numbering */
    uint64_t seed = saga_ctx_next_dropout_seed(c);
    saga_tensor *v = saga_ctx_tensor(c, SAGA_F32, x->nnz, 1);
    if (!v)
        return out;
    saga_csr_dev a = csr_of(x);
    if (x->nnz && kfail(c, op,
                        K->dropout_csr_f32(S, &a, p, seed, saga_ctx_row_base(c),
                                           saga_ctx_row_ids(c, x->rows), v->data)))
        return out;
    out = *x;
    out.values = v;
    return out;
}

/* The sparse factor of a product, kept for its backward pass (its tensors are the context's and
 * outlive the tape's use of them). */
typedef struct spmm_state {
    saga_sparse x;
} spmm_state;

static saga_status spmm_bwd(saga_ctx *c, saga_node *n, saga_tensor *dy) {
    saga_status st = SAGA_OK;
    const spmm_state *s = saga_node_state(n);
    saga_tensor *w = saga_node_input(n, 0);
    float beta = 0.0f;
    if (saga_node_needs_grad(n, 0)) {
        /* dW = X^T dY, without a stored transpose */
        float *dw = saga_grad_target(c, w, &beta);
        if (!dw)
            return saga_ctx_status(c);
        saga_csr_dev a = csr_of(&s->x);
        if (numel(w))
            SAGA_TRY(K->spmm_t_f32(S, &a, w->cols, 1.0f, dy->data, beta, dw));
    }
fail:
    return st;
}

/* y = x w, deferred while the context defers (saga_ctx_defer) */
typedef struct spmm_args {
    saga_csr_dev a;
    const float *w;
    int64_t cols;
} spmm_args;

static saga_status spmm_run(saga_ctx *c, const void *args, float *y) {
    const spmm_args *g = args;
    return K->spmm_f32(S, &g->a, g->cols, 1.0f, g->w, 0.0f, y);
}

saga_tensor *saga_spmm(saga_ctx *c, const saga_sparse *x, saga_tensor *w) {
    static const char op[] = "saga_spmm";
    if (!live(c) || !sparse_arg(c, op, x) || !arg(c, op, "w", w, SAGA_F32) ||
        !has(c, op, K->spmm_f32, "spmm_f32"))
        return NULL;
    if (x->cols != w->rows)
        return op_err(c, SAGA_ERR_INVALID_ARG,
                      "saga_spmm: x is %lld x %lld, w is %lld x %lld: inner dimensions differ",
                      (long long)x->rows, (long long)x->cols, (long long)w->rows,
                      (long long)w->cols);
    spmm_state *s = NULL;
    if (recording(c, w, NULL)) {
        if (!has(c, op, K->spmm_t_f32, "spmm_t_f32"))
            return NULL;
        if (!(s = state_new(c, sizeof *s)))
            return NULL;
        s->x = *x;
    }
    saga_tensor *y = saga_ctx_tensor(c, SAGA_F32, x->rows, w->cols);
    if (!y) {
        saga_free(s);
        return NULL;
    }
    spmm_args g = {csr_of(x), w->data, w->cols};
    if (numel(y) && !saga_ctx_defer(c, y, spmm_run, &g, sizeof g) &&
        kfail(c, op, spmm_run(c, &g, y->data))) {
        saga_free(s);
        return NULL;
    }
    return rec(c, y, w, NULL, spmm_bwd, s);
}

static saga_status add_bias_bwd(saga_ctx *c, saga_node *n, saga_tensor *dy) {
    saga_status st = SAGA_OK;
    saga_tensor *x = saga_node_input(n, 0), *b = saga_node_input(n, 1);
    float beta = 0.0f;
    if (saga_node_needs_grad(n, 0))
        SAGA_TRY(saga_grad_accumulate(c, x, dy));
    if (saga_node_needs_grad(n, 1)) {
        float *db = saga_grad_target(c, b, &beta);
        if (!db)
            return saga_ctx_status(c);
        if (numel(b))
            SAGA_TRY(K->colsum_f32(S, x->rows, x->cols, dy->data, beta, db));
    }
fail:
    return st;
}

saga_tensor *saga_add_bias(saga_ctx *c, saga_tensor *x, saga_tensor *b) {
    static const char op[] = "saga_add_bias";
    if (!live(c) || !arg(c, op, "x", x, SAGA_F32) || !arg(c, op, "b", b, SAGA_F32) ||
        !has(c, op, K->bias_add_f32 && K->colsum_f32, "bias_add_f32/colsum_f32"))
        return NULL;
    if (b->rows != 1 || b->cols != x->cols)
        return op_err(c, SAGA_ERR_INVALID_ARG,
                      "saga_add_bias: b must be 1 x %lld for x of %lld x %lld, got %lld x %lld",
                      (long long)x->cols, (long long)x->rows, (long long)x->cols,
                      (long long)b->rows, (long long)b->cols);
    saga_tensor *y = saga_ctx_tensor(c, SAGA_F32, x->rows, x->cols);
    if (!y)
        return NULL;
    if (numel(y) && kfail(c, op, K->bias_add_f32(S, x->rows, x->cols, x->data, b->data, y->data)))
        return NULL;
    return rec(c, y, x, b, add_bias_bwd, NULL);
}

/* ---- activations -------------------------------------------------------------------------- */

typedef struct act_state {
    saga_act kind;
    float alpha;
} act_state;

static saga_status act_bwd(saga_ctx *c, saga_node *n, saga_tensor *dy) {
    saga_status st = SAGA_OK;
    const act_state *s = saga_node_state(n);
    saga_tensor *x = saga_node_input(n, 0), *y = saga_node_output(n), *tmp = NULL;
    float *dx = grad_begin(c, x, &tmp);
    if (!dx)
        return saga_ctx_status(c);
    if (numel(x))
        SAGA_TRY(K->act_bwd_f32(S, s->kind, numel(x), s->alpha, x->data, y->data, dy->data, dx));
    st = grad_end(c, x, &tmp);
fail:
    saga_ctx_temp_free(c, &tmp);
    return st;
}

static saga_tensor *act(saga_ctx *c, const char *op, saga_tensor *x, saga_act kind, float alpha) {
    if (!live(c) || !arg(c, op, "x", x, SAGA_F32) ||
        !has(c, op, K->act_f32 && K->act_bwd_f32, "act_f32/act_bwd_f32"))
        return NULL;
    act_state *s = NULL;
    if (recording(c, x, NULL)) {
        s = state_new(c, sizeof *s);
        if (!s)
            return NULL;
        s->kind = kind;
        s->alpha = alpha;
    }
    saga_tensor *y = saga_ctx_tensor(c, SAGA_F32, x->rows, x->cols);
    if (!y || (numel(y) && kfail(c, op, K->act_f32(S, kind, numel(x), alpha, x->data, y->data)))) {
        saga_free(s);
        return NULL;
    }
    return rec(c, y, x, NULL, act_bwd, s);
}

saga_tensor *saga_relu(saga_ctx *c, saga_tensor *x) {
    return act(c, "saga_relu", x, SAGA_ACT_RELU, 0.0f);
}
saga_tensor *saga_leaky_relu(saga_ctx *c, saga_tensor *x, float slope) {
    return act(c, "saga_leaky_relu", x, SAGA_ACT_LEAKY_RELU, slope);
}
saga_tensor *saga_elu(saga_ctx *c, saga_tensor *x, float alpha) {
    return act(c, "saga_elu", x, SAGA_ACT_ELU, alpha);
}
saga_tensor *saga_sigmoid(saga_ctx *c, saga_tensor *x) {
    return act(c, "saga_sigmoid", x, SAGA_ACT_SIGMOID, 0.0f);
}
saga_tensor *saga_tanh(saga_ctx *c, saga_tensor *x) {
    return act(c, "saga_tanh", x, SAGA_ACT_TANH, 0.0f);
}

/* ---- dropout ------------------------------------------------------------------------------ */

typedef struct dropout_state {
    float p;
    uint64_t seed;
    int64_t first;      /* index of x's first element in the mask (saga_ctx_set_row_base) */
    const int32_t *ids; /* or the logical row of each row (saga_ctx_set_row_ids) */
} dropout_state;

static saga_status dropout_call(saga_ctx *c, const saga_tensor *x, float p, uint64_t seed,
                                int64_t first, const int32_t *ids, const float *in, float *out) {
    if (ids)
        return K->dropout_rows_f32(S, x->rows, x->cols, p, seed, ids, in, out);
    return K->dropout_f32(S, numel(x), p, seed, first, in, out);
}

/* The mask is a function of (seed, index), so the backward pass redraws it on dy. */
static saga_status dropout_bwd(saga_ctx *c, saga_node *n, saga_tensor *dy) {
    saga_status st = SAGA_OK;
    const dropout_state *s = saga_node_state(n);
    saga_tensor *x = saga_node_input(n, 0), *tmp = NULL;
    float *dx = grad_begin(c, x, &tmp);
    if (!dx)
        return saga_ctx_status(c);
    if (numel(x))
        SAGA_TRY(dropout_call(c, x, s->p, s->seed, s->first, s->ids, dy->data, dx));
    st = grad_end(c, x, &tmp);
fail:
    saga_ctx_temp_free(c, &tmp);
    return st;
}

/* Not training (or p == 0): x itself is returned, no copy. */
saga_tensor *saga_dropout(saga_ctx *c, saga_tensor *x, float p) {
    static const char op[] = "saga_dropout";
    if (!live(c) || !arg(c, op, "x", x, SAGA_F32))
        return NULL;
    if (!(p >= 0.0f && p < 1.0f))
        return op_err(c, SAGA_ERR_INVALID_ARG, "saga_dropout: p must be in [0, 1), got %g",
                      (double)p);
    if (!saga_ctx_training(c) || p == 0.0f)
        return x;
    if (!has(c, op, K->dropout_f32, "dropout_f32"))
        return NULL;
    uint64_t seed = saga_ctx_next_dropout_seed(c);
    int64_t first = saga_ctx_row_base(c) * x->cols;
    const int32_t *ids = saga_ctx_row_ids(c, x->rows);
    if (ids && !has(c, op, K->dropout_rows_f32, "dropout_rows_f32"))
        return NULL;
    dropout_state *s = NULL;
    if (recording(c, x, NULL)) {
        s = state_new(c, sizeof *s);
        if (!s)
            return NULL;
        s->p = p;
        s->seed = seed;
        s->first = first;
        s->ids = ids;
    }
    saga_tensor *y = saga_ctx_tensor(c, SAGA_F32, x->rows, x->cols);
    if (!y ||
        (numel(y) && kfail(c, op, dropout_call(c, x, p, seed, first, ids, x->data, y->data)))) {
        saga_free(s);
        return NULL;
    }
    return rec(c, y, x, NULL, dropout_bwd, s);
}

/* ---- element-wise ------------------------------------------------------------------------- */

static saga_status add_bwd(saga_ctx *c, saga_node *n, saga_tensor *dy) {
    saga_status st = SAGA_OK;
    for (int i = 0; i < 2; i++)
        if (saga_node_needs_grad(n, i))
            SAGA_TRY(saga_node_accumulate(c, n, i, dy));
fail:
    return st;
}

static saga_status sub_bwd(saga_ctx *c, saga_node *n, saga_tensor *dy) {
    saga_status st = SAGA_OK;
    if (saga_node_needs_grad(n, 0))
        SAGA_TRY(saga_node_accumulate(c, n, 0, dy));
    if (saga_node_needs_grad(n, 1)) {
        saga_tensor *b = saga_node_input(n, 1);
        float beta = 0.0f;
        float *db = saga_grad_target(c, b, &beta);
        if (!db)
            return saga_ctx_status(c);
        if (numel(b))
            SAGA_TRY(K->scale_f32(S, numel(b), -1.0f, dy->data, beta, db));
    }
fail:
    return st;
}

/* d(a b) = dy b, dy a. */
static saga_status mul_bwd(saga_ctx *c, saga_node *n, saga_tensor *dy) {
    saga_status st = SAGA_OK;
    saga_tensor *tmp = NULL;
    for (int i = 0; i < 2; i++) {
        if (!saga_node_needs_grad(n, i))
            continue;
        saga_tensor *t = saga_node_input(n, i), *other = saga_node_input(n, 1 - i);
        float *g = grad_begin(c, t, &tmp);
        if (!g)
            return saga_ctx_status(c);
        if (numel(t))
            SAGA_TRY(K->binary_f32(S, SAGA_BINOP_MUL, numel(t), dy->data, other->data, g));
        SAGA_TRY(grad_end(c, t, &tmp));
    }
fail:
    saga_ctx_temp_free(c, &tmp);
    return st;
}

/* d(a / b) = dy / b, -dy a / b^2 = -(dy y) / b. */
static saga_status div_bwd(saga_ctx *c, saga_node *n, saga_tensor *dy) {
    saga_status st = SAGA_OK;
    saga_tensor *a = saga_node_input(n, 0), *b = saga_node_input(n, 1), *y = saga_node_output(n);
    saga_tensor *tmp = NULL;
    int64_t len = numel(y);
    if (saga_node_needs_grad(n, 0)) {
        float *da = grad_begin(c, a, &tmp);
        if (!da)
            return saga_ctx_status(c);
        if (len)
            SAGA_TRY(K->binary_f32(S, SAGA_BINOP_DIV, len, dy->data, b->data, da));
        SAGA_TRY(grad_end(c, a, &tmp));
    }
    if (saga_node_needs_grad(n, 1)) {
        tmp = saga_ctx_temp(c, SAGA_F32, y->rows, y->cols);
        if (!tmp)
            return saga_ctx_status(c);
        float beta = 0.0f;
        float *db = saga_grad_target(c, b, &beta);
        if (!db)
            goto fail_ctx;
        if (len) {
            SAGA_TRY(K->binary_f32(S, SAGA_BINOP_MUL, len, dy->data, y->data, tmp->data));
            SAGA_TRY(K->binary_f32(S, SAGA_BINOP_DIV, len, tmp->data, b->data, tmp->data));
            SAGA_TRY(K->scale_f32(S, len, -1.0f, tmp->data, beta, db));
        }
        saga_ctx_temp_free(c, &tmp);
    }
    return SAGA_OK;
fail_ctx:
    st = saga_ctx_status(c);
fail:
    saga_ctx_temp_free(c, &tmp);
    return st;
}

static saga_tensor *binary(saga_ctx *c, const char *op, saga_binop bop, saga_tensor *a,
                           saga_tensor *b, saga_node_backward_fn bwd) {
    if (!live(c) || !arg(c, op, "a", a, SAGA_F32) || !arg(c, op, "b", b, SAGA_F32) ||
        !has(c, op, K->binary_f32 && K->scale_f32, "binary_f32/scale_f32"))
        return NULL;
    if (a->rows != b->rows || a->cols != b->cols)
        return op_err(
            c, SAGA_ERR_INVALID_ARG, "%s: shapes differ: a is %lld x %lld, b is %lld x %lld", op,
            (long long)a->rows, (long long)a->cols, (long long)b->rows, (long long)b->cols);
    saga_tensor *y = saga_ctx_tensor(c, SAGA_F32, a->rows, a->cols);
    if (!y ||
        (numel(y) && kfail(c, op, K->binary_f32(S, bop, numel(y), a->data, b->data, y->data))))
        return NULL;
    return rec(c, y, a, b, bwd, NULL);
}

saga_tensor *saga_add(saga_ctx *c, saga_tensor *a, saga_tensor *b) {
    return binary(c, "saga_add", SAGA_BINOP_ADD, a, b, add_bwd);
}
saga_tensor *saga_sub(saga_ctx *c, saga_tensor *a, saga_tensor *b) {
    return binary(c, "saga_sub", SAGA_BINOP_SUB, a, b, sub_bwd);
}
saga_tensor *saga_mul(saga_ctx *c, saga_tensor *a, saga_tensor *b) {
    return binary(c, "saga_mul", SAGA_BINOP_MUL, a, b, mul_bwd);
}
saga_tensor *saga_div(saga_ctx *c, saga_tensor *a, saga_tensor *b) {
    return binary(c, "saga_div", SAGA_BINOP_DIV, a, b, div_bwd);
}

typedef struct scalar_state {
    float a;
} scalar_state;

static saga_status affine_bwd(saga_ctx *c, saga_node *n, saga_tensor *dy) {
    const scalar_state *s = saga_node_state(n);
    saga_tensor *x = saga_node_input(n, 0);
    float beta = 0.0f;
    float *dx = saga_grad_target(c, x, &beta);
    if (!dx)
        return saga_ctx_status(c);
    return numel(x) ? K->scale_f32(S, numel(x), s->a, dy->data, beta, dx) : SAGA_OK;
}

saga_tensor *saga_affine(saga_ctx *c, saga_tensor *x, float a, float b) {
    static const char op[] = "saga_affine";
    if (!live(c) || !arg(c, op, "x", x, SAGA_F32) ||
        !has(c, op, K->scale_f32 && K->fill_f32, "scale_f32/fill_f32"))
        return NULL;
    scalar_state *s = NULL;
    if (recording(c, x, NULL)) {
        s = state_new(c, sizeof *s);
        if (!s)
            return NULL;
        s->a = a;
    }
    saga_tensor *y = saga_ctx_tensor(c, SAGA_F32, x->rows, x->cols);
    if (!y)
        goto fail;
    if (numel(y)) {
        if (b != 0.0f && kfail(c, op, K->fill_f32(S, y->data, numel(y), b)))
            goto fail;
        if (kfail(c, op, K->scale_f32(S, numel(y), a, x->data, b != 0.0f ? 1.0f : 0.0f, y->data)))
            goto fail;
    }
    return rec(c, y, x, NULL, affine_bwd, s);
fail:
    saga_free(s);
    return NULL;
}

/* ---- columns ------------------------------------------------------------------------------ */

static saga_status concat_bwd(saga_ctx *c, saga_node *n, saga_tensor *dy) {
    saga_status st = SAGA_OK;
    int64_t first = 0;
    for (int i = 0; i < 2; i++) {
        saga_tensor *t = saga_node_input(n, i);
        if (saga_node_needs_grad(n, i)) {
            float beta = 0.0f;
            float *g = saga_grad_target(c, t, &beta);
            if (!g)
                return saga_ctx_status(c);
            if (numel(t))
                SAGA_TRY(K->copy2d_f32(S, t->rows, t->cols, (const float *)dy->data + first,
                                       dy->cols, g, t->cols, beta != 0.0f));
        }
        first += t->cols;
    }
fail:
    return st;
}

saga_tensor *saga_concat(saga_ctx *c, saga_tensor *a, saga_tensor *b) {
    static const char op[] = "saga_concat";
    if (!live(c) || !arg(c, op, "a", a, SAGA_F32) || !arg(c, op, "b", b, SAGA_F32) ||
        !has(c, op, K->copy2d_f32, "copy2d_f32"))
        return NULL;
    if (a->rows != b->rows)
        return op_err(c, SAGA_ERR_INVALID_ARG,
                      "saga_concat: a is %lld x %lld, b is %lld x %lld: row counts differ",
                      (long long)a->rows, (long long)a->cols, (long long)b->rows,
                      (long long)b->cols);
    int64_t m = a->cols + b->cols;
    saga_tensor *y = saga_ctx_tensor(c, SAGA_F32, a->rows, m);
    if (!y)
        return NULL;
    if (numel(a) &&
        kfail(c, op, K->copy2d_f32(S, a->rows, a->cols, a->data, a->cols, y->data, m, false)))
        return NULL;
    if (numel(b) && kfail(c, op,
                          K->copy2d_f32(S, b->rows, b->cols, b->data, b->cols,
                                        (float *)y->data + a->cols, m, false)))
        return NULL;
    return rec(c, y, a, b, concat_bwd, NULL);
}

typedef struct slice_state {
    int64_t first;
} slice_state;

static saga_status slice_bwd(saga_ctx *c, saga_node *n, saga_tensor *dy) {
    saga_status st = SAGA_OK;
    const slice_state *s = saga_node_state(n);
    saga_tensor *x = saga_node_input(n, 0);
    float beta = 0.0f;
    float *dx = saga_grad_target(c, x, &beta);
    if (!dx)
        return saga_ctx_status(c);
    if (beta == 0.0f && numel(x))
        SAGA_TRY(K->fill_f32(S, dx, numel(x), 0.0f)); /* the other columns get nothing */
    if (numel(dy))
        SAGA_TRY(
            K->copy2d_f32(S, dy->rows, dy->cols, dy->data, dy->cols, dx + s->first, x->cols, true));
fail:
    return st;
}

saga_tensor *saga_slice_cols(saga_ctx *c, saga_tensor *x, int64_t first, int64_t count) {
    static const char op[] = "saga_slice_cols";
    if (!live(c) || !arg(c, op, "x", x, SAGA_F32) ||
        !has(c, op, K->copy2d_f32 && K->fill_f32, "copy2d_f32/fill_f32"))
        return NULL;
    if (first < 0 || count < 0 || first > x->cols || count > x->cols - first)
        return op_err(c, SAGA_ERR_INVALID_ARG,
                      "saga_slice_cols: columns [%lld, %lld + %lld) outside x of %lld x %lld",
                      (long long)first, (long long)first, (long long)count, (long long)x->rows,
                      (long long)x->cols);
    slice_state *s = NULL;
    if (recording(c, x, NULL)) {
        s = state_new(c, sizeof *s);
        if (!s)
            return NULL;
        s->first = first;
    }
    saga_tensor *y = saga_ctx_tensor(c, SAGA_F32, x->rows, count);
    if (!y || (numel(y) && kfail(c, op,
                                 K->copy2d_f32(S, x->rows, count, (const float *)x->data + first,
                                               x->cols, y->data, count, false)))) {
        saga_free(s);
        return NULL;
    }
    return rec(c, y, x, NULL, slice_bwd, s);
}

/* ---- softmax ------------------------------------------------------------------------------ */

static saga_status softmax_bwd_common(saga_ctx *c, saga_node *n, saga_tensor *dy, bool log) {
    saga_status st = SAGA_OK;
    saga_tensor *x = saga_node_input(n, 0), *y = saga_node_output(n), *tmp = NULL;
    float *dx = grad_begin(c, x, &tmp);
    if (!dx)
        return saga_ctx_status(c);
    if (numel(x))
        SAGA_TRY(K->softmax_rows_bwd_f32(S, x->rows, x->cols, log, y->data, dy->data, dx));
    st = grad_end(c, x, &tmp);
fail:
    saga_ctx_temp_free(c, &tmp);
    return st;
}
static saga_status softmax_bwd(saga_ctx *c, saga_node *n, saga_tensor *dy) {
    return softmax_bwd_common(c, n, dy, false);
}
static saga_status log_softmax_bwd(saga_ctx *c, saga_node *n, saga_tensor *dy) {
    return softmax_bwd_common(c, n, dy, true);
}

static saga_tensor *softmax(saga_ctx *c, const char *op, saga_tensor *x, bool log) {
    if (!live(c) || !arg(c, op, "x", x, SAGA_F32) ||
        !has(c, op, K->softmax_rows_f32 && K->softmax_rows_bwd_f32,
             "softmax_rows_f32/softmax_rows_bwd_f32"))
        return NULL;
    saga_tensor *y = saga_ctx_tensor(c, SAGA_F32, x->rows, x->cols);
    if (!y ||
        (numel(y) && kfail(c, op, K->softmax_rows_f32(S, x->rows, x->cols, log, x->data, y->data))))
        return NULL;
    return rec(c, y, x, NULL, log ? log_softmax_bwd : softmax_bwd, NULL);
}

saga_tensor *saga_softmax(saga_ctx *c, saga_tensor *x) {
    return softmax(c, "saga_softmax", x, false);
}
saga_tensor *saga_log_softmax(saga_ctx *c, saga_tensor *x) {
    return softmax(c, "saga_log_softmax", x, true);
}

/* ---- losses ------------------------------------------------------------------------------- */

/* A loss kernel computes its gradient with the value; the node keeps it as a temporary. */
typedef struct saved_grad {
    saga_ctx *c;
    saga_tensor *g;
} saved_grad;

static void saved_grad_free(void *p) {
    saved_grad *s = p;
    if (s) {
        saga_ctx_temp_free(s->c, &s->g);
        saga_free(s);
    }
}

/* dx += dy * saved gradient. */
static saga_status saved_grad_bwd(saga_ctx *c, saga_node *n, saga_tensor *dy) {
    saga_status st = SAGA_OK;
    const saved_grad *s = saga_node_state(n);
    saga_tensor *x = saga_node_input(n, 0);
    float beta = 0.0f;
    float *dx = saga_grad_target(c, x, &beta);
    if (!dx)
        return saga_ctx_status(c);
    /* dx = g dy + beta dx with dy read on the device (g: numel x 1, dy: 1 x 1), not waited for */
    if (numel(x))
        SAGA_TRY(K->gemm_f32(S, false, false, numel(x), 1, 1, 1.0f, s->g->data, 1, dy->data, 1,
                             beta, dx, 1));
fail:
    return st;
}

/* Loss tensor y recorded with the saved gradient g (taken). */
static saga_tensor *loss_record(saga_ctx *c, saga_tensor *y, saga_tensor *x, saga_tensor *other,
                                saga_tensor *g) {
    if (!g)
        return y;
    saved_grad *s = NULL;
    if (saga_alloc_zeroed((void **)&s, 1, sizeof *s, "loss state") < 0) {
        saga_ctx_fail(c, SAGA_ERR_OUT_OF_MEMORY);
        saga_ctx_temp_free(c, &g);
        return NULL;
    }
    s->c = c;
    s->g = g;
    saga_tensor *in[2] = {x, other};
    if (saga_tape_record(c, y, in, other ? 2 : 1, saved_grad_bwd, s, saved_grad_free) < 0)
        return NULL;
    return y;
}

/* The loss tensor from a host value, recorded with the saved gradient g (taken). */
static saga_tensor *loss_out(saga_ctx *c, const char *op, double v, saga_tensor *x,
                             saga_tensor *other, saga_tensor *g) {
    saga_tensor *y = saga_ctx_tensor(c, SAGA_F32, 1, 1);
    if (!y || kfail(c, op, K->fill_f32(S, y->data, 1, (float)v))) {
        saga_ctx_temp_free(c, &g);
        return NULL;
    }
    return loss_record(c, y, x, other, g);
}

saga_tensor *saga_nll_loss(saga_ctx *c, saga_tensor *logp, saga_tensor *labels, saga_tensor *rows) {
    static const char op[] = "saga_nll_loss";
    if (!live(c) || !arg(c, op, "logp", logp, SAGA_F32) ||
        !arg(c, op, "labels", labels, SAGA_I32) || (rows && !arg(c, op, "rows", rows, SAGA_I32)) ||
        !has(c, op, K->nll_dev_f32 && K->gemm_f32, "nll_dev_f32"))
        return NULL;
    if (labels->rows != logp->rows || labels->cols != 1)
        return op_err(c, SAGA_ERR_INVALID_ARG,
                      "saga_nll_loss: labels must be %lld x 1 for logp of %lld x %lld, got %lld "
                      "x %lld",
                      (long long)logp->rows, (long long)logp->rows, (long long)logp->cols,
                      (long long)labels->rows, (long long)labels->cols);
    if (rows && rows->cols != 1)
        return op_err(c, SAGA_ERR_INVALID_ARG, "saga_nll_loss: rows must be r x 1, got %lld x %lld",
                      (long long)rows->rows, (long long)rows->cols);
    saga_tensor *g = NULL;
    if (recording(c, logp, NULL)) {
        g = saga_ctx_temp(c, SAGA_F32, logp->rows, logp->cols);
        if (!g)
            return NULL;
    }
    /* the loss is written on the device, nothing waits: a bad row or label surfaces at the next
     * synchronization on CUDA */
    saga_tensor *y = saga_ctx_tensor(c, SAGA_F32, 1, 1);
    if (!y || kfail(c, op,
                    K->nll_dev_f32(S, logp->rows, logp->cols, logp->data, labels->data,
                                   rows ? rows->data : NULL, rows ? rows->rows : 0, y->data,
                                   g ? g->data : NULL))) {
        saga_ctx_temp_free(c, &g);
        return NULL;
    }
    return loss_record(c, y, logp, NULL, g);
}

saga_tensor *saga_cross_entropy(saga_ctx *c, saga_tensor *logits, saga_tensor *labels,
                                saga_tensor *rows) {
    static const char op[] = "saga_cross_entropy";
    if (!live(c) || !arg(c, op, "logits", logits, SAGA_F32))
        return NULL;
    return saga_nll_loss(c, saga_log_softmax(c, logits), labels, rows);
}

double saga_accuracy(const float *scores, int64_t n_classes, const int32_t *labels,
                     const int32_t *rows, int64_t n_rows) {
    if (!scores || !labels || n_rows <= 0 || n_classes <= 0)
        return 0.0;
    int64_t right = 0;
    for (int64_t i = 0; i < n_rows; i++) {
        int64_t r = rows ? rows[i] : i;
        const float *row = scores + r * n_classes;
        int64_t best = 0;
        for (int64_t k = 1; k < n_classes; k++)
            if (row[k] > row[best])
                best = k;
        right += best == labels[r];
    }
    return (double)right / (double)n_rows;
}

saga_tensor *saga_bce_logits(saga_ctx *c, saga_tensor *x, saga_tensor *target, float pos_weight) {
    static const char op[] = "saga_bce_logits";
    if (!live(c) || !arg(c, op, "x", x, SAGA_F32) || !arg(c, op, "target", target, SAGA_F32) ||
        !has(c, op, K->bce_logits_f32 && K->fill_f32 && K->gemm_f32, "bce_logits_f32"))
        return NULL;
    if (target->rows != x->rows || target->cols != x->cols)
        return op_err(c, SAGA_ERR_INVALID_ARG,
                      "saga_bce_logits: x is %lld x %lld, target is %lld x %lld: shapes differ",
                      (long long)x->rows, (long long)x->cols, (long long)target->rows,
                      (long long)target->cols);
    saga_tensor *g = NULL;
    if (recording(c, x, NULL)) {
        g = saga_ctx_temp(c, SAGA_F32, x->rows, x->cols);
        if (!g)
            return NULL;
    }
    double loss = 0.0;
    if (kfail(c, op,
              K->bce_logits_f32(S, numel(x), x->data, target->data, pos_weight, &loss,
                                g ? g->data : NULL))) {
        saga_ctx_temp_free(c, &g);
        return NULL;
    }
    return loss_out(c, op, loss, x, NULL, g);
}

/* ---- reductions --------------------------------------------------------------------------- */

typedef struct reduce_state {
    int kind; /* 0 sum, 1 mean, 2 sum of squares */
} reduce_state;

static saga_status reduce_bwd(saga_ctx *c, saga_node *n, saga_tensor *dy) {
    saga_status st = SAGA_OK;
    const reduce_state *s = saga_node_state(n);
    saga_tensor *x = saga_node_input(n, 0), *tmp = NULL;
    int64_t len = numel(x);
    float d = 0.0f, beta = 0.0f;
    SAGA_TRY(read_scalar(c, dy, &d));
    if (s->kind == 2) { /* d sum x^2 = 2 x dy */
        float *dx = saga_grad_target(c, x, &beta);
        if (!dx)
            return saga_ctx_status(c);
        if (len)
            SAGA_TRY(K->scale_f32(S, len, 2.0f * d, x->data, beta, dx));
        return SAGA_OK;
    }
    float v = s->kind == 1 ? (float)((double)d / (double)len) : d;
    float *dx = grad_begin(c, x, &tmp);
    if (!dx)
        return saga_ctx_status(c);
    if (len)
        SAGA_TRY(K->fill_f32(S, dx, len, v));
    st = grad_end(c, x, &tmp);
fail:
    saga_ctx_temp_free(c, &tmp);
    return st;
}

static saga_tensor *reduce(saga_ctx *c, const char *op, saga_tensor *x, int kind) {
    if (!live(c) || !arg(c, op, "x", x, SAGA_F32) ||
        !has(c, op, K->sum_f32 && K->sumsq_f32 && K->fill_f32 && K->scale_f32,
             "sum_f32/sumsq_f32/fill_f32"))
        return NULL;
    double v = 0.0;
    if (kfail(c, op,
              kind == 2 ? K->sumsq_f32(S, numel(x), x->data, &v)
                        : K->sum_f32(S, numel(x), x->data, &v)))
        return NULL;
    if (kind == 1)
        v = numel(x) ? v / (double)numel(x) : NAN;
    reduce_state *s = NULL;
    if (recording(c, x, NULL)) {
        s = state_new(c, sizeof *s);
        if (!s)
            return NULL;
        s->kind = kind;
    }
    saga_tensor *y = saga_ctx_tensor(c, SAGA_F32, 1, 1);
    if (!y || kfail(c, op, K->fill_f32(S, y->data, 1, (float)v))) {
        saga_free(s);
        return NULL;
    }
    return rec(c, y, x, NULL, reduce_bwd, s);
}

saga_tensor *saga_sum(saga_ctx *c, saga_tensor *x) {
    return reduce(c, "saga_sum", x, 0);
}
saga_tensor *saga_mean(saga_ctx *c, saga_tensor *x) {
    return reduce(c, "saga_mean", x, 1);
}
saga_tensor *saga_sumsq(saga_ctx *c, saga_tensor *x) {
    return reduce(c, "saga_sumsq", x, 2);
}

/* dx (n x m) += dy (n x 1) 1^T: a rank-1 GEMM against a vector of ones. */
static saga_status row_sum_bwd(saga_ctx *c, saga_node *n, saga_tensor *dy) {
    saga_status st = SAGA_OK;
    saga_tensor *x = saga_node_input(n, 0);
    float beta = 0.0f;
    if (!numel(x))
        return SAGA_OK;
    saga_tensor *ones = ones_temp(c, x->cols);
    if (!ones)
        return saga_ctx_status(c);
    float *dx = saga_grad_target(c, x, &beta);
    if (!dx) {
        st = saga_ctx_status(c);
        goto fail;
    }
    SAGA_TRY(K->gemm_f32(S, false, false, x->rows, x->cols, 1, 1.0f, dy->data, 1, ones->data,
                         x->cols, beta, dx, x->cols));
fail:
    saga_ctx_temp_free(c, &ones);
    return st;
}

saga_tensor *saga_row_sum(saga_ctx *c, saga_tensor *x) {
    static const char op[] = "saga_row_sum";
    if (!live(c) || !arg(c, op, "x", x, SAGA_F32) ||
        !has(c, op, K->gemm_f32 && K->fill_f32, "gemm_f32/fill_f32"))
        return NULL;
    saga_tensor *y = saga_ctx_tensor(c, SAGA_F32, x->rows, 1);
    if (!y)
        return NULL;
    if (x->rows) {
        if (x->cols == 0) {
            if (kfail(c, op, K->fill_f32(S, y->data, x->rows, 0.0f)))
                return NULL;
        } else {
            saga_tensor *ones = ones_temp(c, x->cols);
            if (!ones)
                return NULL;
            saga_status st = K->gemm_f32(S, false, false, x->rows, 1, x->cols, 1.0f, x->data,
                                         x->cols, ones->data, 1, 0.0f, y->data, 1);
            saga_ctx_temp_free(c, &ones);
            if (kfail(c, op, st))
                return NULL;
        }
    }
    return rec(c, y, x, NULL, row_sum_bwd, NULL);
}

/* ---- rows --------------------------------------------------------------------------------- */

/* With H = s->cols heads of F = x->cols / H columns: dx += dy scaled head by head by s
 * (scale_heads_f32); ds[:, k] += the row sums of (dy .* x) over head k's columns. */
static saga_status scale_rows_bwd(saga_ctx *c, saga_node *n, saga_tensor *dy) {
    saga_status st = SAGA_OK;
    saga_tensor *x = saga_node_input(n, 0), *s = saga_node_input(n, 1);
    saga_tensor *tmp = NULL, *ones = NULL;
    const int64_t H = s->cols, F = x->cols / H;
    float beta = 0.0f;
    if (!numel(x))
        return SAGA_OK;
    if (saga_node_needs_grad(n, 0)) {
        float *dx = saga_grad_target(c, x, &beta);
        if (!dx)
            return saga_ctx_status(c);
        SAGA_TRY(K->scale_heads_f32(S, x->rows, H, F, s->data, dy->data, beta, dx));
    }
    if (saga_node_needs_grad(n, 1)) {
        tmp = saga_ctx_temp(c, SAGA_F32, x->rows, x->cols);
        ones = ones_temp(c, F);
        float *ds = tmp && ones ? saga_grad_target(c, s, &beta) : NULL;
        if (!ds) {
            st = saga_ctx_status(c);
            goto fail;
        }
        SAGA_TRY(K->binary_f32(S, SAGA_BINOP_MUL, numel(x), dy->data, x->data, tmp->data));
        for (int64_t k = 0; k < H; k++) /* head k's columns of tmp times ones: column k of ds */
            SAGA_TRY(K->gemm_f32(S, false, false, x->rows, 1, F, 1.0f,
                                 (const float *)tmp->data + k * F, x->cols, ones->data, 1, beta,
                                 ds + k, H));
    }
fail:
    saga_ctx_temp_free(c, &tmp);
    saga_ctx_temp_free(c, &ones);
    return st;
}

saga_tensor *saga_scale_rows(saga_ctx *c, saga_tensor *x, saga_tensor *s) {
    static const char op[] = "saga_scale_rows";
    if (!live(c) || !arg(c, op, "x", x, SAGA_F32) || !arg(c, op, "s", s, SAGA_F32) ||
        !has(c, op, K->scale_heads_f32 && K->binary_f32 && K->gemm_f32 && K->fill_f32,
             "scale_heads_f32/binary_f32/gemm_f32"))
        return NULL;
    if (s->rows != x->rows || s->cols < 1 || x->cols % s->cols)
        return op_err(c, SAGA_ERR_INVALID_ARG,
                      "saga_scale_rows: s must be %lld x H, H dividing the %lld columns of x, got "
                      "%lld x %lld",
                      (long long)x->rows, (long long)x->cols, (long long)s->rows,
                      (long long)s->cols);
    saga_tensor *y = saga_ctx_tensor(c, SAGA_F32, x->rows, x->cols);
    if (!y)
        return NULL;
    if (numel(y) && kfail(c, op,
                          K->scale_heads_f32(S, x->rows, s->cols, x->cols / s->cols, s->data,
                                             x->data, 0.0f, y->data)))
        return NULL;
    return rec(c, y, x, s, scale_rows_bwd, NULL);
}

static saga_status gather_rows_bwd(saga_ctx *c, saga_node *n, saga_tensor *dy) {
    saga_status st = SAGA_OK;
    saga_tensor *x = saga_node_input(n, 0), *idx = saga_node_input(n, 1);
    float beta = 0.0f;
    float *dx = saga_grad_target(c, x, &beta);
    if (!dx)
        return saga_ctx_status(c);
    if (beta == 0.0f && numel(x))
        SAGA_TRY(K->fill_f32(S, dx, numel(x), 0.0f));
    if (numel(dy))
        SAGA_TRY(K->scatter_add_rows_f32(S, idx->rows, x->cols, idx->data, dy->data, x->rows, dx));
fail:
    return st;
}

saga_tensor *saga_gather_rows(saga_ctx *c, saga_tensor *x, saga_tensor *idx) {
    static const char op[] = "saga_gather_rows";
    if (!live(c) || !arg(c, op, "x", x, SAGA_F32) || !arg(c, op, "idx", idx, SAGA_I32) ||
        !has(c, op, K->gather_rows_f32 && K->scatter_add_rows_f32 && K->fill_f32,
             "gather_rows_f32/scatter_add_rows_f32"))
        return NULL;
    if (idx->cols != 1)
        return op_err(c, SAGA_ERR_INVALID_ARG,
                      "saga_gather_rows: idx must be r x 1, got %lld x %lld", (long long)idx->rows,
                      (long long)idx->cols);
    saga_tensor *y = saga_ctx_tensor(c, SAGA_F32, idx->rows, x->cols);
    if (!y)
        return NULL;
    if (idx->rows &&
        kfail(c, op,
              K->gather_rows_f32(S, idx->rows, x->cols, idx->data, x->rows, x->data, y->data)))
        return NULL;
    return rec(c, y, x, idx, gather_rows_bwd, NULL);
}

static saga_status scatter_add_rows_bwd(saga_ctx *c, saga_node *n, saga_tensor *dy) {
    saga_status st = SAGA_OK;
    saga_tensor *x = saga_node_input(n, 0), *idx = saga_node_input(n, 1), *tmp = NULL;
    float *dx = grad_begin(c, x, &tmp);
    if (!dx)
        return saga_ctx_status(c);
    if (numel(x))
        SAGA_TRY(K->gather_rows_f32(S, idx->rows, x->cols, idx->data, dy->rows, dy->data, dx));
    st = grad_end(c, x, &tmp);
fail:
    saga_ctx_temp_free(c, &tmp);
    return st;
}

saga_tensor *saga_scatter_add_rows(saga_ctx *c, saga_tensor *x, saga_tensor *idx, int64_t n_rows) {
    static const char op[] = "saga_scatter_add_rows";
    if (!live(c) || !arg(c, op, "x", x, SAGA_F32) || !arg(c, op, "idx", idx, SAGA_I32) ||
        !has(c, op, K->gather_rows_f32 && K->scatter_add_rows_f32 && K->fill_f32,
             "gather_rows_f32/scatter_add_rows_f32"))
        return NULL;
    if (idx->cols != 1 || idx->rows != x->rows || n_rows < 0)
        return op_err(c, SAGA_ERR_INVALID_ARG,
                      "saga_scatter_add_rows: idx must be %lld x 1 for x of %lld x %lld, got "
                      "%lld x %lld (n_rows %lld)",
                      (long long)x->rows, (long long)x->rows, (long long)x->cols,
                      (long long)idx->rows, (long long)idx->cols, (long long)n_rows);
    saga_tensor *y = saga_ctx_tensor(c, SAGA_F32, n_rows, x->cols);
    if (!y)
        return NULL;
    if (numel(y) && kfail(c, op, K->fill_f32(S, y->data, numel(y), 0.0f)))
        return NULL;
    if (numel(x) &&
        kfail(c, op,
              K->scatter_add_rows_f32(S, x->rows, x->cols, idx->data, x->data, n_rows, y->data)))
        return NULL;
    return rec(c, y, x, idx, scatter_add_rows_bwd, NULL);
}

/* ---- reading ------------------------------------------------------------------------------ */

float saga_item(const saga_tensor *t) {
    float v = NAN;
    if (!t || t->dtype != SAGA_F32 || t->nbytes < sizeof v)
        return NAN;
    saga_ctx_flush(t->lazy);
    /* the context's ops run on the default stream: the copy follows them */
    saga_stream *s = saga_backend_default_stream(t->be);
    if (saga_memcpy_d2h_async(s, &v, t->data, sizeof v) < 0 || saga_stream_synchronize(s) < 0)
        return NAN;
    return v;
}

saga_tensor *saga_grad(saga_tensor *param) {
    return param && (param->is_param || param->is_leaf) ? param->grad : NULL;
}
