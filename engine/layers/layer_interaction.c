/* layer_interaction.c - a round of the Interaction Network (saga_layers.h): the edge block as
 * the program's ApplyEdge, the node block as its ApplyVertex, which also sums each vertex's
 * outgoing messages (the round's edge tensor, kept by saga_program_run_edges). */
#include "layers_impl.h"

struct saga_interaction {
    saga_ffn edge, node;
    /* the round running (saga_interaction_forward): its edge tensor, sources and vertex count */
    saga_tensor *edges, *src;
    int64_t n_vertices;
};

saga_tensor *saga_interaction_edges(saga_ctx *c, const saga_interaction *l, saga_tensor *hs,
                                    saga_tensor *hd, saga_tensor *e) {
    if (!l)
        return layer_fail(c, "saga_interaction_edges: the layer must be given");
    saga_tensor *in[3] = {hs, hd, e};
    return layer_ffn_forward(c, &l->edge, in, 3, true);
}

saga_tensor *saga_interaction_nodes(saga_ctx *c, const saga_interaction *l, saga_tensor *h,
                                    saga_tensor *in_sum, saga_tensor *out_sum) {
    if (!l)
        return layer_fail(c, "saga_interaction_nodes: the layer must be given");
    saga_tensor *in[3] = {h, in_sum, out_sum};
    return layer_ffn_forward(c, &l->node, in, 3, true);
}

/* ApplyEdge: the edge block. */
static saga_tensor *edge_block(saga_ctx *c, const saga_edge_in *e, void *layer) {
    return saga_interaction_edges(c, layer, e->src, e->dst, e->data);
}

/* ApplyVertex: the node block, the messages out summed from the round's edge tensor. */
static saga_tensor *node_block(saga_ctx *c, const saga_vertex_in *v, void *layer) {
    const saga_interaction *l = layer;
    saga_tensor *out_sum = saga_scatter_add_rows(c, l->edges, l->src, l->n_vertices);
    return saga_interaction_nodes(c, l, v->self, v->gathered, out_sum);
}

static const saga_program IN_PROGRAM = {
    .scatter = SAGA_SCATTER_BOTH,
    .edge_weight = SAGA_WEIGHT_NONE,
    .apply_edge = edge_block,
    .gather = SAGA_GATHER_SUM,
    .apply_vertex = node_block,
    /* bounds the transient memory of the edge block's network; the kept edge states grow with
     * the graph anyway */
    .max_batch_edges = 1 << 16,
    /* a graph within one batch keeps the edge block's forward pass for the backward pass
     * (about 1 KB an edge a round at hidden 32) rather than running it twice */
    .keep_forward = true,
};

saga_status saga_interaction_new(saga_interaction **out, saga_model *m, const char *edge_name,
                                 const char *node_name, int64_t hidden, uint64_t seed) {
    saga_status st = SAGA_OK;
    saga_interaction *l = NULL;
    SAGA_CHECK(out && m && edge_name && node_name && hidden >= 1 && hidden <= INT32_MAX / 3,
               SAGA_ERR_INVALID_ARG,
               "saga_interaction_new: model and names must be given, hidden in 1..%d",
               INT32_MAX / 3);
    SAGA_CHECK((l = saga_calloc(1, sizeof *l)), SAGA_ERR_OUT_OF_MEMORY,
               "saga_interaction_new: no memory for the layer");
    SAGA_TRY(saga_ffn_init(&l->edge, m, edge_name, 3 * hidden, hidden, hidden, seed));
    SAGA_TRY(saga_ffn_init(&l->node, m, node_name, 3 * hidden, hidden, hidden, seed + 1));
    *out = l;
    return SAGA_OK;
fail:
    saga_free(l);
    return st;
}

void saga_interaction_free(saga_interaction **l) {
    if (l) {
        saga_free(*l);
        *l = NULL;
    }
}

saga_tensor *saga_interaction_forward(saga_ctx *c, saga_interaction *l, const saga_dgraph *g,
                                      saga_tensor *h, saga_tensor *e, saga_tensor *src,
                                      saga_tensor **e_out) {
    if (!l || !h || !e_out)
        return layer_fail(c, "saga_interaction_forward: layer, rows and e_out must be given");
    l->edges = NULL;
    l->src = src;
    l->n_vertices = saga_tensor_rows(h);
    saga_tensor *out = saga_program_run_edges(c, &IN_PROGRAM, g, h, e, l, &l->edges);
    *e_out = l->edges;
    return out;
}
