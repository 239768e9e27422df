/* saga_program.h - vertex programs: Scatter, ApplyEdge, Gather, ApplyVertex.
 *
 *   static saga_tensor *gcn_vertex(saga_ctx *c, const saga_vertex_in *v, void *layer) {
 *       struct gcn_layer *l = layer;
 *       return saga_add_bias(c, saga_matmul(c, v->gathered, l->W), l->b);
 *   }
 *   static const saga_program gcn_layer = {
 *       .scatter = SAGA_SCATTER_SRC,          // message source: h[u] of each edge u -> v
 *       .edge_weight = SAGA_WEIGHT_SYMNORM,   // scaled by 1 / sqrt(deg(u) deg(v))
 *       .apply_edge = NULL,                   // identity message: runs as one SpMM
 *       .gather = SAGA_GATHER_SUM,
 *       .apply_vertex = gcn_vertex,
 *   };
 *
 *   saga_dgraph *dg = NULL;
 *   saga_dgraph_opts go = saga_dgraph_opts_defaults();
 *   go.self_loops = SAGA_DGRAPH_SELF_LOOPS_ADD;
 *   SAGA_TRY(saga_dgraph_new(&dg, be, g, &go));
 *   saga_tensor *h1 = saga_program_run(c, &gcn_layer, dg, x, NULL, &layer1);
 *
 * The engine scatters vertex values onto edges, calls apply_edge on batches of edges, reduces
 * the messages at each destination, and calls apply_vertex on the vertices. apply_edge and
 * apply_vertex are the user's C functions; they call the ops of saga_nn.h on the batch they are
 * given, so the backward pass is derived like any other op's.
 *
 * When apply_edge is NULL and gather is SUM or MEAN, Scatter-ApplyEdge-Gather is one sparse
 * matrix product (backward: the product with the transpose) and no edge tensor exists.
 * Otherwise edges are taken in batches that hold every in-edge of a range of destinations, at
 * most max_batch_edges of them (more only when one vertex has more in-edges), so memory stays
 * bounded; for the backward pass a batch is recomputed rather than kept.
 */
#pragma once

#include "saga_graph.h"
#include "saga_nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- a graph placed on a backend ---------------------------------------------------------- */

typedef struct saga_dgraph saga_dgraph;

typedef enum saga_dgraph_self_loops {
    SAGA_DGRAPH_SELF_LOOPS_KEEP = 0, /* the graph's edges as they are */
    SAGA_DGRAPH_SELF_LOOPS_ADD,      /* exactly one self-loop per vertex (GCN's A + I) */
    SAGA_DGRAPH_SELF_LOOPS_COUNT
} saga_dgraph_self_loops;

typedef struct saga_dgraph_opts {
    saga_dgraph_self_loops self_loops;
} saga_dgraph_opts;

SAGA_API saga_dgraph_opts saga_dgraph_opts_defaults(void);
/* Copies g's in-edges (and what the programs need: out-edges, degrees, edge weights) to be,
 * adding self-loops when o asks (NULL: defaults). g may be freed afterwards. The device memory
 * is accounted against be's budget; edge values for each weight mode and the batch plans are
 * computed on first use and kept until saga_dgraph_free. A placed graph is used by one context
 * at a time and must outlive the tapes of the runs that used it (until saga_ctx_clear).
 * Errors: SAGA_ERR_BUDGET / OUT_OF_MEMORY, SAGA_ERR_INVALID_ARG. */
SAGA_API saga_status saga_dgraph_new(saga_dgraph **out, saga_backend *be, const saga_graph *g,
                                     const saga_dgraph_opts *o);
/* Frees *g (host and device memory) and sets it to NULL; accepts NULL. */
SAGA_API void saga_dgraph_free(saga_dgraph **g);
SAGA_API int32_t saga_dgraph_n_vertices(const saga_dgraph *g);
/* Edges of the placed graph (with the added self-loops). */
SAGA_API int64_t saga_dgraph_n_edges(const saga_dgraph *g);
/* The edge order of the placed graph, on the host: its in-CSR (rows = destinations, sources
 * ascending within a row), with the graph's weights (NULL when it has none). Edge k of this
 * view is row k of a run's edata and of the edges apply_edge sees (a batch is a consecutive
 * range of it). With SELF_LOOPS_KEEP it is saga_graph_in of the original graph; with
 * SELF_LOOPS_ADD each row holds exactly one self-loop, in its sorted place (an existing
 * self-loop keeps its first copy's weight, added ones weigh 1). Valid while g lives. */
SAGA_API saga_csr saga_dgraph_edge_order(const saga_dgraph *g);

/* ---- the program -------------------------------------------------------------------------- */

typedef enum saga_scatter {
    SAGA_SCATTER_SRC = 0, /* e->src = h[u] for each edge u -> v */
    SAGA_SCATTER_DST,     /* e->dst = h[v] */
    SAGA_SCATTER_BOTH,    /* both */
    SAGA_SCATTER_COUNT
} saga_scatter;

typedef enum saga_edge_weight {
    SAGA_WEIGHT_NONE = 0, /* no scalar weight */
    SAGA_WEIGHT_GRAPH,    /* the graph's own edge weights (1 where it has none) */
    SAGA_WEIGHT_SYMNORM,  /* 1 / sqrt(deg_in(v) deg_out(u)) over the placed graph */
    SAGA_WEIGHT_COUNT
} saga_edge_weight;

typedef enum saga_gather {
    SAGA_GATHER_SUM = 0,
    SAGA_GATHER_MEAN, /* divided by the number of in-edges; a vertex without any gets 0 */
    SAGA_GATHER_MAX,  /* per column; a vertex without in-edges gets 0 */
    SAGA_GATHER_COUNT
} saga_gather;

typedef struct saga_edge_batch saga_edge_batch;

/* What apply_edge sees: one batch of edges, grouped by destination. */
typedef struct saga_edge_in {
    int64_t n_edges;
    saga_tensor *src;             /* n_edges x F: h[u] (SCATTER_SRC, BOTH), else NULL */
    saga_tensor *dst;             /* n_edges x F: h[v] (SCATTER_DST, BOTH), else NULL */
    saga_tensor *data;            /* n_edges x D: the run's edge features, else NULL */
    saga_tensor *weight;          /* n_edges x 1: the scalar weight, else NULL */
    const saga_edge_batch *batch; /* for saga_edge_softmax */
} saga_edge_in;

/* What apply_vertex sees: vertices first .. first + count - 1. */
typedef struct saga_vertex_in {
    int32_t first;
    int32_t count;
    saga_tensor *gathered; /* count x F': the reduced messages */
    saga_tensor *self;     /* count x F: the vertices' input values h[v] */
    /* a saga_net's first stage over sparse input (saga_net_set_input_csr): the vertices' rows
     * as a count x F CSR, and self is NULL; NULL everywhere else */
    const saga_sparse *sparse;
} saga_vertex_in;

/* Return the messages (n_edges x F') / new values (count x F''), made with saga_nn.h ops, or
 * NULL after an error (which the ops have recorded in c). layer is the run's user pointer. */
typedef saga_tensor *(*saga_apply_edge_fn)(saga_ctx *c, const saga_edge_in *e, void *layer);
typedef saga_tensor *(*saga_apply_vertex_fn)(saga_ctx *c, const saga_vertex_in *v, void *layer);

typedef struct saga_program {
    saga_scatter scatter;
    saga_edge_weight edge_weight;
    saga_apply_edge_fn apply_edge; /* NULL: the message is the scattered value (times weight);
                                    * SCATTER_BOTH then is an error */
    saga_gather gather;
    saga_apply_vertex_fn apply_vertex; /* NULL: the result is the gathered value */
    int64_t max_batch_edges;           /* 0: the engine's default (1 << 20) */
    /* A run that fits in one batch keeps apply_edge's forward pass on the tape, to be
     * differentiated as any ops are, instead of recomputing it in the backward pass: faster, and
     * the batch's intermediates stay in memory until the backward pass. false: recompute. */
    bool keep_forward;
} saga_program;

/* Runs one layer: h is f32 n x F (n = the graph's vertices), edata f32 n_edges x D in the
 * placed graph's edge order (saga_dgraph_edge_order), or NULL; only apply_edge sees it. Returns
 * the new vertex values, owned by c, or NULL with the error in c (sticky; SAGA_ERR_INVALID_ARG
 * for shapes, dtypes or backends that do not match, naming them). Recorded on the tape like
 * any op: the fused path as one SpMM node; the batched path as one node whose backward
 * recomputes every batch (with the dropout counter it had in the forward pass; a run of one batch
 * with keep_forward is recorded op by op instead, the gathers of h included), so apply_edge
 * must compute the same function when called again on the same batch, and p and layer must
 * stay valid until the backward pass has run (a pointer to a caller's local variable that has
 * gone out of scope by then is a bug). */
SAGA_API saga_tensor *saga_program_run(saga_ctx *c, const saga_program *p, const saga_dgraph *g,
                                       saga_tensor *h, saga_tensor *edata, void *layer);

/* saga_program_run, and the messages too: *edges_out (not NULL) receives a context-owned
 * n_edges x F' tensor with apply_edge's output for every edge, in the placed graph's edge
 * order (saga_dgraph_edge_order), recorded on the tape: a loss on it back-propagates through
 * apply_edge, and the gathered values' gradient adds to it. Needs apply_edge
 * (SAGA_ERR_INVALID_ARG otherwise). *edges_out is written before apply_vertex runs, so an
 * apply_vertex that also reduces the messages by source (an Interaction Network aggregating at
 * both ends of an edge) can reach them through layer. The batches' messages are kept (n_edges x
 * F' floats for the whole run) instead of being recomputed for the gather; the backward pass
 * still recomputes each batch to reach apply_edge's inputs. */
SAGA_API saga_tensor *saga_program_run_edges(saga_ctx *c, const saga_program *p,
                                             const saga_dgraph *g, saga_tensor *h,
                                             saga_tensor *edata, void *layer,
                                             saga_tensor **edges_out);

/* Softmax of scores (n_edges x H) over the in-edges of each destination, per column: GAT's
 * attention. Only inside apply_edge, on the batch it was given. */
SAGA_API saga_tensor *saga_edge_softmax(saga_ctx *c, const saga_edge_in *e, saga_tensor *scores);

#ifdef __cplusplus
}
#endif
