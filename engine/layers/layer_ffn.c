/* layer_ffn.c - the two-layer feed-forward network of the Interaction Network's blocks
 * (saga_layers.h). */
#include "layers_impl.h"
#include "nn_impl.h"

saga_status saga_ffn_init(saga_ffn *f, saga_model *m, const char *name, int64_t in, int64_t hidden,
                          int64_t out, uint64_t seed) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(f && m && name && in >= 1 && hidden >= 1 && out >= 1, SAGA_ERR_INVALID_ARG,
               "saga_ffn_init: ffn, model and name must be given, widths >= 1");
    if (!(f->W1 = layer_param(m, name, "W1", in, hidden, SAGA_INIT_KAIMING, seed * 4 + 1)) ||
        !(f->b1 = layer_param(m, name, "b1", 1, hidden, SAGA_INIT_ZEROS, 0)) ||
        !(f->W2 = layer_param(m, name, "W2", hidden, out, SAGA_INIT_GLOROT, seed * 4 + 2)) ||
        !(f->b2 = layer_param(m, name, "b2", 1, out, SAGA_INIT_ZEROS, 0)))
        return layer_param_failed();
fail:
    return st;
}

saga_tensor *saga_ffn_forward(saga_ctx *c, const saga_ffn *f, saga_tensor *x) {
    return saga_ffn_forward_cat(c, f, &x, 1);
}

saga_tensor *saga_ffn_forward_cat(saga_ctx *c, const saga_ffn *f, saga_tensor *const *xs, int n) {
    return layer_ffn_forward(c, f, xs, n, false);
}

saga_tensor *layer_ffn_forward(saga_ctx *c, const saga_ffn *f, saga_tensor *const *xs, int n,
                               bool tanh_out) {
    /* each product with its bias and activation in place (nn_matmul_cat_bias_act) */
    saga_tensor *h = nn_matmul_cat_bias_act(c, xs, n, f->W1, f->b1, SAGA_ACT_RELU);
    return tanh_out ? nn_matmul_cat_bias_act(c, &h, 1, f->W2, f->b2, SAGA_ACT_TANH)
                    : saga_matmul_cat_bias(c, &h, 1, f->W2, f->b2);
}
