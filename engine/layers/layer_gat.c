/* layer_gat.c - the GAT layer (saga_layers.h). A vertex stage computes, once per vertex, z for
 * every head (one product) and both attention terms of each head; the program scatters the row
 * [ z | s_src | s_dst ] to both ends of each edge, where ApplyEdge forms the scores, their
 * softmax over each vertex's in-edges and the weighted messages; ApplyVertex adds the bias and the
 * activation. ApplyEdge runs the engine's batched path: edges in batches, the messages built per
 * batch and recomputed in the backward pass. */
#include "layers_impl.h"

#include <math.h>

typedef struct gat_layer {
    int64_t heads, out; /* out: columns per head */
    saga_tensor *W, *att_src, *att_dst, *b;
    float dropout, attn_dropout, slope;
    saga_layer_act act;
} gat_layer;

/* The row each vertex scatters, [ z | s_src | s_dst ] (heads*out + 2*heads columns). */
static saga_tensor *gat_rows(saga_ctx *c, const saga_vertex_in *v, void *layer) {
    const gat_layer *l = layer;
    saga_tensor *z = NULL;
    if (v->sparse) {
        saga_sparse x = saga_sparse_dropout(c, v->sparse, l->dropout);
        z = x.values ? saga_spmm(c, &x, l->W) : NULL;
    } else {
        z = saga_matmul(c, saga_dropout(c, v->self, l->dropout), l->W);
    }
    saga_tensor *s_src = NULL, *s_dst = NULL;
    for (int64_t k = 0; k < l->heads; k++) {
        saga_tensor *zk = saga_slice_cols(c, z, k * l->out, l->out);
        saga_tensor *a = saga_matmul(c, zk, saga_slice_cols(c, l->att_src, k, 1));
        saga_tensor *d = saga_matmul(c, zk, saga_slice_cols(c, l->att_dst, k, 1));
        s_src = s_src ? saga_concat(c, s_src, a) : a;
        s_dst = s_dst ? saga_concat(c, s_dst, d) : d;
    }
    return saga_concat(c, saga_concat(c, z, s_src), s_dst);
}

/* ApplyEdge: the messages of a batch of edges, every head side by side. e->src holds the
 * source's row, e->dst the target's. */
static saga_tensor *gat_edge(saga_ctx *c, const saga_edge_in *e, void *layer) {
    const gat_layer *l = layer;
    int64_t H = l->heads, F = l->out;
    saga_tensor *score =
        saga_add(c, saga_slice_cols(c, e->src, H * F, H), saga_slice_cols(c, e->dst, H * F + H, H));
    saga_tensor *alpha = saga_edge_softmax(c, e, saga_leaky_relu(c, score, l->slope));
    alpha = saga_dropout(c, alpha, l->attn_dropout);
    /* each head's columns of z scaled by its coefficient, all heads in one op */
    return saga_scale_rows(c, saga_slice_cols(c, e->src, 0, H * F), alpha);
}

static saga_tensor *gat_vertex(saga_ctx *c, const saga_vertex_in *v, void *layer) {
    const gat_layer *l = layer;
    return layer_act(c, saga_add_bias(c, v->gathered, l->b), l->act);
}

static const saga_program GAT_PROGRAM = {
    .scatter = SAGA_SCATTER_BOTH,
    .edge_weight = SAGA_WEIGHT_NONE,
    .apply_edge = gat_edge,
    .gather = SAGA_GATHER_SUM,
    .apply_vertex = gat_vertex,
};

saga_status saga_gat_add(saga_net *net, saga_model *m, const char *name, int64_t in, int64_t out,
                         const saga_layer_opts *o) {
    saga_status st = SAGA_OK;
    saga_layer_opts lo;
    gat_layer *l = NULL;
    SAGA_TRY(layer_begin(net, m, "GAT layer", name, in, out, o, &lo, sizeof *l, (void **)&l));
    SAGA_CHECK(lo.heads >= 1 && lo.heads * out <= INT32_MAX && isfinite(lo.leaky_slope),
               SAGA_ERR_INVALID_ARG, "GAT layer %s: heads must be >= 1, got %lld", name,
               (long long)lo.heads);
    l->heads = lo.heads;
    l->out = out;
    l->dropout = lo.dropout;
    l->attn_dropout = lo.attn_dropout;
    l->slope = lo.leaky_slope;
    l->act = lo.act;
    int64_t hf = lo.heads * out;
    if (!(l->W = layer_param(m, name, "weight", in, hf, SAGA_INIT_GLOROT, lo.seed)) ||
        !(l->att_src =
              layer_param(m, name, "att_src", out, lo.heads, SAGA_INIT_GLOROT, lo.seed + 1)) ||
        !(l->att_dst =
              layer_param(m, name, "att_dst", out, lo.heads, SAGA_INIT_GLOROT, lo.seed + 2)) ||
        !(l->b = layer_param(m, name, "bias", 1, hf, SAGA_INIT_ZEROS, 0)))
        return layer_param_failed();
    SAGA_TRY(saga_net_add_vertex(net, gat_rows, l, hf + 2 * lo.heads));
    SAGA_TRY(saga_net_add_program(net, &GAT_PROGRAM, l, hf));
fail:
    return st;
}
