/* layer_gin.c - the GIN layer (saga_layers.h). The MLP's first product commutes with the sum:
 * ((1 + eps) h_v + sum h_u) W1 = (1 + eps) h_v W1 + sum h_u W1. So a vertex stage projects every
 * row once (dropout, then W1: the narrow rows are what the program moves), the program sums the
 * projected rows as they are (one SpMM), and ApplyVertex adds (1 + eps) times the vertex's own,
 * then runs the rest of the MLP. */
#include "layers_impl.h"

typedef struct gin_layer {
    saga_tensor *W1, *b1, *W2, *b2, *eps;
    float dropout;
    saga_layer_act act;
} gin_layer;

static saga_tensor *gin_rows(saga_ctx *c, const saga_vertex_in *v, void *layer) {
    const gin_layer *l = layer;
    if (v->sparse) {
        saga_sparse x = saga_sparse_dropout(c, v->sparse, l->dropout);
        return x.values ? saga_spmm(c, &x, l->W1) : NULL;
    }
    return saga_matmul(c, saga_dropout(c, v->self, l->dropout), l->W1);
}

static saga_tensor *gin_vertex(saga_ctx *c, const saga_vertex_in *v, void *layer) {
    const gin_layer *l = layer;
    saga_tensor *g = saga_add(c, saga_add(c, v->self, saga_scale(c, v->self, l->eps)), v->gathered);
    g = saga_relu(c, saga_add_bias(c, g, l->b1));
    return layer_act(c, saga_add_bias(c, saga_matmul(c, g, l->W2), l->b2), l->act);
}

static const saga_program GIN_PROGRAM = {
    .scatter = SAGA_SCATTER_SRC,
    .edge_weight = SAGA_WEIGHT_NONE,
    .apply_edge = NULL, /* the message is the source's projected row: one SpMM */
    .gather = SAGA_GATHER_SUM,
    .apply_vertex = gin_vertex,
};

saga_status saga_gin_add(saga_net *net, saga_model *m, const char *name, int64_t in, int64_t out,
                         const saga_layer_opts *o) {
    saga_status st = SAGA_OK;
    saga_layer_opts lo;
    gin_layer *l = NULL;
    SAGA_TRY(layer_begin(net, m, "GIN layer", name, in, out, o, &lo, sizeof *l, (void **)&l));
    int64_t hid = lo.mlp_hidden > 0 ? lo.mlp_hidden : out;
    SAGA_CHECK(lo.mlp_hidden >= 0 && hid <= INT32_MAX, SAGA_ERR_INVALID_ARG,
               "GIN layer %s: the MLP's hidden width must be >= 0 (0: out), got %lld", name,
               (long long)lo.mlp_hidden);
    l->dropout = lo.dropout;
    l->act = lo.act;
    if (!(l->W1 = layer_param(m, name, "weight1", in, hid, SAGA_INIT_GLOROT, lo.seed)) ||
        !(l->b1 = layer_param(m, name, "bias1", 1, hid, SAGA_INIT_ZEROS, 0)) ||
        !(l->W2 = layer_param(m, name, "weight2", hid, out, SAGA_INIT_GLOROT, lo.seed + 1)) ||
        !(l->b2 = layer_param(m, name, "bias2", 1, out, SAGA_INIT_ZEROS, 0)) ||
        !(l->eps = layer_param(m, name, "eps", 1, 1, SAGA_INIT_ZEROS, 0)))
        return layer_param_failed();
    SAGA_TRY(saga_net_add_vertex(net, gin_rows, l, hid));
    SAGA_TRY(saga_net_add_program(net, &GIN_PROGRAM, l, out));
fail:
    return st;
}
