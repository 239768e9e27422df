/* layers.c - what the library's layers share (layers_impl.h). */
#include "layers_impl.h"

#include "net_impl.h"
#include "nn_impl.h"

#include <stdio.h>

saga_layer_opts saga_layer_opts_defaults(void) {
    return (saga_layer_opts){.dropout = 0.0f,
                             .act = SAGA_LAYER_NONE,
                             .seed = 1,
                             .project_first = -1,
                             .heads = 1,
                             .attn_dropout = 0.0f,
                             .leaky_slope = 0.2f,
                             .aggr = SAGA_GATHER_MEAN,
                             .mlp_hidden = 0};
}

saga_status layer_begin(saga_net *net, saga_model *m, const char *what, const char *name,
                        int64_t in, int64_t out, const saga_layer_opts *o, saga_layer_opts *lo,
                        size_t size, void **state) {
    saga_status st = SAGA_OK;
    *lo = o ? *o : saga_layer_opts_defaults();
    SAGA_CHECK(net && m && name && *name, SAGA_ERR_INVALID_ARG,
               "%s: net, model and name must be given", what);
    SAGA_CHECK(in >= 1 && out >= 1 && in <= INT32_MAX && out <= INT32_MAX, SAGA_ERR_INVALID_ARG,
               "%s %s: widths must be in 1..%d (in %lld, out %lld)", what, name, INT32_MAX,
               (long long)in, (long long)out);
    SAGA_CHECK(lo->dropout >= 0 && lo->dropout < 1 && lo->attn_dropout >= 0 && lo->attn_dropout < 1,
               SAGA_ERR_INVALID_ARG, "%s %s: dropout must be in [0, 1) (got %g, attention %g)",
               what, name, (double)lo->dropout, (double)lo->attn_dropout);
    SAGA_CHECK((unsigned)lo->act < SAGA_LAYER_ACT_COUNT && lo->project_first >= -1 &&
                   lo->project_first <= 1,
               SAGA_ERR_INVALID_ARG, "%s %s: invalid options (act %d, project_first %d)", what,
               name, (int)lo->act, lo->project_first);
    void *p = saga_calloc(1, size);
    SAGA_CHECK(p, SAGA_ERR_OUT_OF_MEMORY, "%s %s: no memory for the layer", what, name);
    SAGA_TRY(net_keep(net, p, NULL));
    *state = p;
fail:
    return st;
}

saga_tensor *layer_param(saga_model *m, const char *name, const char *suffix, int64_t rows,
                         int64_t cols, saga_init init, uint64_t seed) {
    char full[256];
    int len = snprintf(full, sizeof full, "%s.%s", name, suffix);
    if (len < 0 || (size_t)len >= sizeof full) {
        saga_error(SAGA_ERR_INVALID_ARG, "layer name \"%s\" is too long", name);
        return NULL;
    }
    return saga_model_param(m, full, rows, cols, init, seed);
}

saga_status layer_param_failed(void) {
    saga_status st = saga_last_status();
    return st < 0 ? st : SAGA_ERR_INTERNAL;
}

saga_tensor *layer_act(saga_ctx *c, saga_tensor *h, saga_layer_act act) {
    switch (act) {
    case SAGA_LAYER_RELU:
        return saga_relu(c, h);
    case SAGA_LAYER_ELU:
        return saga_elu(c, h, 1.0f);
    default:
        return h;
    }
}

saga_tensor *layer_fail(saga_ctx *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    saga_status st = saga_error_v(SAGA_ERR_INVALID_ARG, fmt, ap);
    va_end(ap);
    saga_ctx_fail(c, st);
    return NULL;
}
