/* layer_gcn.c - the GCN layer (saga_layers.h): a vertex stage (dropout, then W when it goes
 * first) and one fused SpMM over the symmetric-normalised graph, whose ApplyVertex multiplies by
 * W when it did not go first, adds the bias and the activation. */
#include "layers_impl.h"

typedef struct gcn_layer {
    saga_tensor *W, *b;
    bool project_first;
    float dropout;
    saga_layer_act act;
} gcn_layer;

/* The rows the program aggregates: dropout(h), times W when it goes first. Sparse input rows are
 * dropped on their non-zeros and multiplied sparse x dense. */
static saga_tensor *gcn_rows(saga_ctx *c, const saga_vertex_in *v, void *layer) {
    const gcn_layer *l = layer;
    if (v->sparse) { /* project_first: a stage aggregating first takes dense rows alone */
        saga_sparse x = saga_sparse_dropout(c, v->sparse, l->dropout);
        return x.values ? saga_spmm(c, &x, l->W) : NULL;
    }
    saga_tensor *h = saga_dropout(c, v->self, l->dropout);
    return l->project_first ? saga_matmul(c, h, l->W) : h;
}

static saga_tensor *gcn_vertex(saga_ctx *c, const saga_vertex_in *v, void *layer) {
    const gcn_layer *l = layer;
    saga_tensor *h = l->project_first ? v->gathered : saga_matmul(c, v->gathered, l->W);
    return layer_act(c, saga_add_bias(c, h, l->b), l->act);
}

static const saga_program GCN_PROGRAM = {
    .scatter = SAGA_SCATTER_SRC,
    .edge_weight = SAGA_WEIGHT_SYMNORM,
    .apply_edge = NULL, /* fused: one SpMM with D^-1/2 (A + I) D^-1/2 */
    .gather = SAGA_GATHER_SUM,
    .apply_vertex = gcn_vertex,
};

saga_status saga_gcn_add(saga_net *net, saga_model *m, const char *name, int64_t in, int64_t out,
                         const saga_layer_opts *o) {
    saga_status st = SAGA_OK;
    saga_layer_opts lo;
    gcn_layer *l = NULL;
    SAGA_TRY(layer_begin(net, m, "GCN layer", name, in, out, o, &lo, sizeof *l, (void **)&l));
    l->project_first = lo.project_first == 1 || (lo.project_first == -1 && out < in);
    l->dropout = lo.dropout;
    l->act = lo.act;
    if (!(l->W = layer_param(m, name, "weight", in, out, SAGA_INIT_GLOROT, lo.seed)) ||
        !(l->b = layer_param(m, name, "bias", 1, out, SAGA_INIT_ZEROS, 0)))
        return layer_param_failed();
    SAGA_TRY(saga_net_add_vertex(net, gcn_rows, l, l->project_first ? out : in));
    if (!l->project_first)
        SAGA_TRY(saga_net_set_dense_rows(net));
    SAGA_TRY(saga_net_add_program(net, &GCN_PROGRAM, l, out));
fail:
    return st;
}
