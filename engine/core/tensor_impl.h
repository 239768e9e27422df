/* tensor_impl.h - the tensor struct, internal to saga (the ops layer and autograd read it). */
#pragma once

#include "saga_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

struct saga_tensor {
    saga_backend *be; /* owns data */
    saga_dtype dtype;
    int64_t rows;
    int64_t cols;
    size_t nbytes; /* rows * cols * saga_dtype_size(dtype) */
    void *data;    /* backend memory from saga_backend_alloc; NULL when nbytes == 0 */

    /* autograd (engine/nn/nn_*.c); all zero for a tensor made with saga_tensor_new */
    saga_tensor *grad;      /* d loss / d this tensor, same shape; NULL until accumulated. Owned
                             * by the tensor (freed with it) */
    struct saga_node *node; /* the tape node that produced it while that node lives, else NULL */
    struct saga_ctx *owner; /* the context that owns it (and its grad), NULL for user tensors */
    bool requires_grad;     /* a parameter, a leaf, or the output of a recorded op */
    bool is_param;          /* made by saga_model_param: its gradient persists (saga_grad) */
    bool is_leaf;           /* saga_ctx_leaf / saga_ctx_mark_leaf: backward keeps its gradient */
    bool borrowed;         /* saga_ctx_wrap: data belongs to someone else (not freed, not cached) */
    struct saga_ctx *lazy; /* the context whose deferred product has not yet written data
                            * (saga_ctx_set_defer), else NULL */
    /* set with lazy, by the context: runs lazy's deferred product. tensor.c calls it before it
     * reads data, so that core never calls up into the layer that defers */
    void (*lazy_flush)(struct saga_ctx *c);
};

/* SAGA_ERR_INVALID_ARG (with the message) for an unknown dtype, a negative dimension or a size
 * past the address space; used by every place that makes tensors. */
saga_status saga_tensor_check_shape(saga_dtype dt, int64_t rows, int64_t cols);

#ifdef __cplusplus
}
#endif
