/* layers_impl.h - what the library's layers (layer_*.c) share: their options checked, their
 * state handed to the net, their parameters named, their activation. Internal to saga. */
#pragma once

#include "saga_layers.h"

/* Checks net, m, name and o for the layer `what` (o NULL: the defaults, into *lo), then
 * allocates its zeroed state of `size` bytes, owned by the net from here on (freed by
 * saga_net_free, also when this or a later step fails). */
saga_status layer_begin(saga_net *net, saga_model *m, const char *what, const char *name,
                        int64_t in, int64_t out, const saga_layer_opts *o, saga_layer_opts *lo,
                        size_t size, void **state);

/* The parameter NAME.suffix of m, or NULL with the error set. */
saga_tensor *layer_param(saga_model *m, const char *name, const char *suffix, int64_t rows,
                         int64_t cols, saga_init init, uint64_t seed);

/* The status of the layer_param call that returned NULL (its message is set). */
saga_status layer_param_failed(void);

/* saga_ffn_forward_cat, and tanh of it when tanh_out (the Interaction Network's blocks), each
 * activation applied in place on its product. */
saga_tensor *layer_ffn_forward(saga_ctx *c, const saga_ffn *f, saga_tensor *const *xs, int n,
                               bool tanh_out);

/* act(h). */
saga_tensor *layer_act(saga_ctx *c, saga_tensor *h, saga_layer_act act);

/* Fails the pass: SAGA_ERR_INVALID_ARG with the message, as the context's sticky error; NULL. */
saga_tensor *layer_fail(saga_ctx *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
