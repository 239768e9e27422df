/* saga_layers.h - graph layers of the library: GCN, GAT, GraphSAGE and GIN. Each is a vertex
 * program added to a saga_net as two stages (a per-vertex stage, then the program), with its
 * parameters in a saga_model, so it runs in memory, streamed through a device budget or over
 * ranks as any stage does, and trains with the net's derived backward pass.
 *
 *   saga_layer_opts lo = saga_layer_opts_defaults();
 *   lo.dropout = 0.6f, lo.attn_dropout = 0.6f, lo.heads = 8, lo.act = SAGA_LAYER_ELU;
 *   SAGA_TRY(saga_gat_add(net, model, "gat1", 1433, 8, &lo)); // 1433 -> 8 heads x 8
 *   lo.heads = 1, lo.act = SAGA_LAYER_NONE, lo.seed = 2;
 *   SAGA_TRY(saga_gat_add(net, model, "gat2", 64, 7, &lo));   // 64 -> 7 logits
 *
 * The net owns the layers it was given (they live until saga_net_free); the model owns their
 * parameters, named NAME.weight and so on. GCN and GAT attend to the vertex itself through the
 * graph's self-loops: build their net with saga_net_opts.self_loops = SAGA_DGRAPH_SELF_LOOPS_ADD;
 * GraphSAGE and GIN treat the vertex apart and want the graph as it is (KEEP). Input rows may be
 * sparse (saga_net_set_input_csr) where a layer multiplies them by its weights before the
 * aggregation (below); elsewhere the first pass fails with SAGA_ERR_INVALID_ARG naming the
 * layer. */
#pragma once

#include "saga_net.h"
#include "saga_nn.h"
#include "saga_program.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The activation on a layer's output. Append-only. */
typedef enum saga_layer_act {
    SAGA_LAYER_NONE = 0,
    SAGA_LAYER_RELU,
    SAGA_LAYER_ELU, /* alpha 1 */
    SAGA_LAYER_ACT_COUNT
} saga_layer_act;

typedef struct saga_layer_opts {
    float dropout;      /* on the layer's input rows, in training (0) */
    saga_layer_act act; /* on the layer's output (none) */
    uint64_t seed;      /* of the Glorot weights (1); biases (and GIN's eps) start at 0 */
    /* GCN: 1 multiplies the rows by W before the aggregation, 0 after it, -1 (default) before
     * when the layer narrows (out < in): the same product, aggregated on the narrower side.
     * Sparse input rows need 1 (or a narrowing layer). */
    int project_first;
    int64_t heads;      /* GAT: attention heads, concatenated (1) */
    float attn_dropout; /* GAT: on the attention coefficients, in training (0) */
    float leaky_slope;  /* GAT: the scores' leaky relu (0.2) */
    saga_gather aggr;   /* GraphSAGE: SAGA_GATHER_MEAN (default), SAGA_GATHER_MAX or SUM */
    int64_t mlp_hidden; /* GIN: the MLP's hidden width (0: out) */
} saga_layer_opts;

SAGA_API saga_layer_opts saga_layer_opts_defaults(void);

/* GCN (Kipf & Welling, ICLR 2017), with A + I from the net's self-loops and D its degrees:
 *   h'_v = act( sum over u -> v of (d_u d_v)^-1/2 dropout(h)_u W + b )
 * Parameters NAME.weight (in x out, Glorot) and NAME.bias (1 x out). One SpMM: no apply_edge. */
SAGA_API saga_status saga_gcn_add(saga_net *net, saga_model *m, const char *name, int64_t in,
                                  int64_t out, const saga_layer_opts *o);

/* GAT (Velickovic et al., ICLR 2018), per head k with z = dropout(h) W_k (in x out each):
 *   e(u -> v) = leaky_relu(z_u . a_src_k + z_v . a_dst_k)
 *   alpha(u -> v) = dropout(softmax over the in-edges of v of e)
 *   h'_v = act( concat over k of sum over u -> v of alpha(u -> v) z_u  + b )
 * The output has heads x out columns. Parameters NAME.weight (in x heads*out), NAME.att_src and
 * NAME.att_dst (out x heads, column k for head k), NAME.bias (1 x heads*out). z and both score
 * terms are computed once per vertex; the program moves [z | s_src | s_dst] to the edges. Sparse
 * input rows are multiplied sparse x dense. */
SAGA_API saga_status saga_gat_add(saga_net *net, saga_model *m, const char *name, int64_t in,
                                  int64_t out, const saga_layer_opts *o);

/* GraphSAGE (Hamilton et al., NeurIPS 2017), aggr the mean, the maximum (per column) or the sum
 * over the in-neighbours u of v (0 for a vertex without any):
 *   h'_v = act( dropout(h)_v W_self + aggr_u dropout(h)_u W_neigh + b )
 * Parameters NAME.weight_self, NAME.weight_neigh (in x out each) and NAME.bias. With the mean
 * or the sum, both products run before the aggregation when the layer narrows (out < in), on
 * sparse input rows too; the maximum aggregates the rows themselves. */
SAGA_API saga_status saga_sage_add(saga_net *net, saga_model *m, const char *name, int64_t in,
                                   int64_t out, const saga_layer_opts *o);

/* GIN (Xu et al., ICLR 2019), eps learnt, a two-layer MLP:
 *   g_v = (1 + eps) x_v + sum over u -> v of x_u,  x = dropout(h) W1
 *   h'_v = act( relu(g_v + b1) W2 + b2 )
 * W1 commutes with the sum, so the rows are projected before the aggregation (sparse input rows
 * too). Parameters NAME.weight1 (in x hidden), NAME.bias1, NAME.weight2 (hidden x out),
 * NAME.bias2, NAME.eps (1 x 1). */
SAGA_API saga_status saga_gin_add(saga_net *net, saga_model *m, const char *name, int64_t in,
                                  int64_t out, const saga_layer_opts *o);

/* ---- the Interaction Network's blocks (tensor level) -------------------------------------- */

/* A two-layer feed-forward network, x -> relu(x W1 + b1) W2 + b2. */
typedef struct saga_ffn {
    saga_tensor *W1, *b1, *W2, *b2;
} saga_ffn;

/* Adds NAME.W1 (in x hidden, Kaiming from seed * 4 + 1), NAME.b1, NAME.W2 (hidden x out, Glorot
 * from seed * 4 + 2) and NAME.b2 (zeros) to m. */
SAGA_API saga_status saga_ffn_init(saga_ffn *f, saga_model *m, const char *name, int64_t in,
                                   int64_t hidden, int64_t out, uint64_t seed);
SAGA_API saga_tensor *saga_ffn_forward(saga_ctx *c, const saga_ffn *f, saga_tensor *x);
/* saga_ffn_forward of [xs[0] | ... | xs[n-1]] (1 <= n <= 3) without forming it: the first
 * product is saga_matmul_cat. */
SAGA_API saga_tensor *saga_ffn_forward_cat(saga_ctx *c, const saga_ffn *f, saga_tensor *const *xs,
                                           int n);

/* One round of an Interaction Network (Battaglia et al., NeurIPS 2016, in the form particle
 * tracking uses): an edge block, then a node block, on a placed graph g (saga_program.h) whose
 * vertex rows h and edge rows e (in g's edge order) both have `hidden` columns:
 *   e'(u -> v) = tanh( FFN_e([ h_u | h_v | e(u -> v) ]) )
 *   h'_v = tanh( FFN_n([ h_v | sum over u -> v of e'(u -> v) | sum over v -> w of e'(v -> w) ]) )
 * FFN_e and FFN_n are saga_ffn of widths 3 hidden -> hidden -> hidden, named edge_name and
 * node_name, seeded by seed and seed + 1. The edge block is the program's ApplyEdge, the node
 * block its ApplyVertex; the messages are kept (saga_program_run_edges) so that the node block
 * sums them at both ends. */
typedef struct saga_interaction saga_interaction;

SAGA_API saga_status saga_interaction_new(saga_interaction **out, saga_model *m,
                                          const char *edge_name, const char *node_name,
                                          int64_t hidden, uint64_t seed);
SAGA_API void saga_interaction_free(saga_interaction **l);
/* A round: h' (g's vertices x hidden), and *e_out = e' (g's edges x hidden), owned by c; src
 * (g's edges x 1, i32) is each edge's source in g's edge order. NULL after an error (in c). */
SAGA_API saga_tensor *saga_interaction_forward(saga_ctx *c, saga_interaction *l,
                                               const saga_dgraph *g, saga_tensor *h, saga_tensor *e,
                                               saga_tensor *src, saga_tensor **e_out);
/* The round's two blocks on rows the caller gathered (a round run by chunks of edges and of
 * vertices, as `saga hep train --device-mem` streams an event): the edge block of rows of sources
 * hs, destinations hd and edges e (each k x hidden), tanh(FFN_e([hs | hd | e])), and the node
 * block of rows h with their sums in_sum of incoming and out_sum of outgoing e', tanh(FFN_n([h |
 * in_sum | out_sum])). saga_interaction_forward runs these same ops. NULL after an error (in c). */
SAGA_API saga_tensor *saga_interaction_edges(saga_ctx *c, const saga_interaction *l,
                                             saga_tensor *hs, saga_tensor *hd, saga_tensor *e);
SAGA_API saga_tensor *saga_interaction_nodes(saga_ctx *c, const saga_interaction *l, saga_tensor *h,
                                             saga_tensor *in_sum, saga_tensor *out_sum);

#ifdef __cplusplus
}
#endif
