/* nn_internal.h - what the files of the ops layer share among themselves (context scratch,
 * gradient targets, the model and optimizer structs). Not for the executor: it uses nn_impl.h. */
#pragma once

#include "nn_impl.h"

#ifdef __cplusplus
extern "C" {
#endif

struct saga_model {
    saga_backend *be;
    int n;
    int cap;
    saga_tensor **params; /* owned, each with a zeroed gradient from creation */
    char **names;         /* owned copies */
};

struct saga_optim {
    saga_model *m;
    saga_optim_opts o;
    int n;              /* parameters seen at creation */
    float *wd;          /* per-parameter weight decay */
    saga_tensor **buf1; /* SGD momentum buffer or Adam's first moment, per parameter (NULL when
                         * the method keeps none) */
    saga_tensor **buf2; /* Adam's second moment */
    int64_t step;       /* completed steps */
};

/* Number of state buffers per parameter for a kind of optimizer (0, 1 or 2). */
int saga_optim_n_state(const saga_optim_opts *o);

/* A tensor that is not on the context's list (a temporary of a backward function): its buffer
 * comes from the cache; give it back with saga_ctx_temp_free as soon as it is not needed. NULL
 * with the sticky error set on failure. */
saga_tensor *saga_ctx_temp(saga_ctx *c, saga_dtype dt, int64_t rows, int64_t cols);
void saga_ctx_temp_free(saga_ctx *c, saga_tensor **t);

/* Where to write t's gradient: its buffer, with *beta = 1 when it already holds a gradient to
 * add to, or a fresh uninitialised one with *beta = 0 that the caller must overwrite entirely.
 * Lets kernels with a beta argument (gemm, colsum, scale) accumulate in place. NULL with the
 * sticky error set on failure. */
float *saga_grad_target(saga_ctx *c, saga_tensor *t, float *beta);

/* A deferred product's kernel (saga_ctx_set_defer): writes its output into y, from the arguments
 * saga_ctx_defer copied. */
enum { SAGA_LAZY_ARGS = 96 };
typedef saga_status (*saga_lazy_fn)(saga_ctx *c, const void *args, float *y);
/* While deferring: defers fn(args, out's buffer) (args: size bytes, copied), out being the tensor
 * the context made last, and runs the product deferred before it. False when it does not defer:
 * the caller runs the kernel now. */
bool saga_ctx_defer(saga_ctx *c, saga_tensor *out, saga_lazy_fn fn, const void *args, size_t size);

/* The context's sticky status, used by ops to stop at once after an error. */
bool saga_ctx_failed(const saga_ctx *c);

/* Seed of the next dropout mask (advances the counter). */
uint64_t saga_ctx_next_dropout_seed(saga_ctx *c);

/* splitmix64: the generator behind parameter initialisation. */
static inline uint64_t saga_splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

#ifdef __cplusplus
}
#endif
