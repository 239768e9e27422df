/* layer_sage.c - the GraphSAGE layer (saga_layers.h). With the mean or the sum and a narrowing
 * layer, a vertex stage multiplies the rows by both weights, [ x W_self | x W_neigh ], and the
 * program aggregates them (one SpMM) and adds the vertex's own first half to the aggregated
 * second; otherwise the program aggregates the rows themselves (the maximum per column runs the
 * batched path) and ApplyVertex multiplies both sides. */
#include "layers_impl.h"

typedef struct sage_layer {
    int64_t out;
    saga_tensor *W_self, *W_neigh, *b;
    bool project_first;
    float dropout;
    saga_layer_act act;
} sage_layer;

static saga_tensor *sage_rows(saga_ctx *c, const saga_vertex_in *v, void *layer) {
    const sage_layer *l = layer;
    if (v->sparse) { /* project_first: a stage aggregating first takes dense rows alone */
        saga_sparse x = saga_sparse_dropout(c, v->sparse, l->dropout);
        if (!x.values)
            return NULL;
        return saga_concat(c, saga_spmm(c, &x, l->W_self), saga_spmm(c, &x, l->W_neigh));
    }
    saga_tensor *x = saga_dropout(c, v->self, l->dropout);
    if (!l->project_first)
        return x;
    return saga_concat(c, saga_matmul(c, x, l->W_self), saga_matmul(c, x, l->W_neigh));
}

static saga_tensor *sage_vertex(saga_ctx *c, const saga_vertex_in *v, void *layer) {
    const sage_layer *l = layer;
    saga_tensor *h = NULL;
    if (l->project_first)
        h = saga_add(c, saga_slice_cols(c, v->self, 0, l->out),
                     saga_slice_cols(c, v->gathered, l->out, l->out));
    else
        h = saga_add(c, saga_matmul(c, v->self, l->W_self),
                     saga_matmul(c, v->gathered, l->W_neigh));
    return layer_act(c, saga_add_bias(c, h, l->b), l->act);
}

static const saga_program SAGE_PROGRAMS[SAGA_GATHER_COUNT] = {
    [SAGA_GATHER_SUM] = {.scatter = SAGA_SCATTER_SRC,
                         .edge_weight = SAGA_WEIGHT_NONE,
                         .gather = SAGA_GATHER_SUM,
                         .apply_vertex = sage_vertex},
    [SAGA_GATHER_MEAN] = {.scatter = SAGA_SCATTER_SRC,
                          .edge_weight = SAGA_WEIGHT_NONE,
                          .gather = SAGA_GATHER_MEAN,
                          .apply_vertex = sage_vertex},
    [SAGA_GATHER_MAX] = {.scatter = SAGA_SCATTER_SRC,
                         .edge_weight = SAGA_WEIGHT_NONE,
                         .gather = SAGA_GATHER_MAX,
                         .apply_vertex = sage_vertex},
};

saga_status saga_sage_add(saga_net *net, saga_model *m, const char *name, int64_t in, int64_t out,
                          const saga_layer_opts *o) {
    saga_status st = SAGA_OK;
    saga_layer_opts lo;
    sage_layer *l = NULL;
    SAGA_TRY(layer_begin(net, m, "GraphSAGE layer", name, in, out, o, &lo, sizeof *l, (void **)&l));
    SAGA_CHECK((unsigned)lo.aggr < SAGA_GATHER_COUNT, SAGA_ERR_INVALID_ARG,
               "GraphSAGE layer %s: invalid aggregation %d", name, (int)lo.aggr);
    SAGA_CHECK(lo.aggr != SAGA_GATHER_MAX || lo.project_first != 1, SAGA_ERR_INVALID_ARG,
               "GraphSAGE layer %s: the maximum does not commute with the weights "
               "(project_first 1)",
               name);
    l->out = out;
    l->project_first = lo.aggr != SAGA_GATHER_MAX &&
                       (lo.project_first == 1 || (lo.project_first == -1 && out < in));
    l->dropout = lo.dropout;
    l->act = lo.act;
    if (!(l->W_self = layer_param(m, name, "weight_self", in, out, SAGA_INIT_GLOROT, lo.seed)) ||
        !(l->W_neigh =
              layer_param(m, name, "weight_neigh", in, out, SAGA_INIT_GLOROT, lo.seed + 1)) ||
        !(l->b = layer_param(m, name, "bias", 1, out, SAGA_INIT_ZEROS, 0)))
        return layer_param_failed();
    int64_t rows = l->project_first ? 2 * out : in;
    SAGA_TRY(saga_net_add_vertex(net, sage_rows, l, rows));
    if (!l->project_first)
        SAGA_TRY(saga_net_set_dense_rows(net));
    SAGA_TRY(saga_net_add_program(net, &SAGE_PROGRAMS[lo.aggr], l, out));
fail:
    return st;
}
