/* cc.h - weakly connected components as a vertex program (label propagation).
 *
 *   int32_t *comp = NULL;
 *   cc_result r;
 *   SAGA_TRY(cc_run(&comp, &r, be, g, NULL, NULL));
 *   // comp[v]: the smallest vertex of v's component (internal ids), for every v
 *   saga_free(comp);
 *
 * Every vertex starts with the label n-1-v; each round, a vertex takes the largest label among
 * itself and its neighbours (Scatter the source's label, Gather MAX, ApplyVertex max(self,
 * gathered)), until no label changes. Weak components are those of the undirected graph: a
 * graph that does not hold both directions of every edge (saga_graph_is_symmetric) is
 * symmetrized first (saga_graph_symmetrize, into a copy that lives for the call), so any graph
 * may be passed, directed or not, with the same components. Labels travel as f32,
 * exact for up to 2^24 vertices; larger graphs are refused.
 */
#pragma once

#include "saga.h"
#include "saga_net.h"

typedef struct cc_result {
    int iterations; /* rounds, including the last one that changed nothing */
    int32_t n_components;
    int32_t largest;  /* vertices in the largest component */
    int64_t n_edges;  /* edges the rounds ran over: g's, or those of its symmetrized copy */
    bool symmetrized; /* g did not hold both directions of every edge and was symmetrized */
    double seconds;   /* the rounds, setup excluded */
} cc_result;

typedef void (*cc_progress_fn)(void *ud, int iteration);

/* Labels every vertex of g with the smallest vertex id of its weakly connected component (edge
 * direction ignored), computed on backend be. *comp receives n entries (saga_malloc'd, owned by the
 * caller). Errors: SAGA_ERR_UNSUPPORTED for more than 2^24 vertices; SAGA_ERR_OUT_OF_MEMORY /
 * BUDGET; backend errors. */
saga_status cc_run(int32_t **comp, cc_result *result, saga_backend *be, const saga_graph *g,
                   cc_progress_fn progress, void *ud);
/* The same through the graph executor (saga_net.h) with options no (NULL: defaults), in memory or
 * streamed through be's budget; *stats (may be NULL) gets the moves of the last round. Each round
 * is one forward pass whose input and output cross the host. Over shards (no->halo): g is a
 * rank's local graph of a symmetric whole graph, vertex[l] each local row's vertex in it and n_all
 * its vertices; the rounds go on while any rank's labels change, and *comp gets the own rows'
 * components alone (their smallest vertex, as the whole graph numbers it), result none of the
 * counts (the whole graph's, for the caller to make of every rank's rows). */
saga_status cc_run_net(int32_t **comp, cc_result *result, saga_backend *be, const saga_graph *g,
                       const saga_net_opts *no, const int32_t *vertex, int64_t n_all,
                       saga_net_stats *stats, cc_progress_fn progress, void *ud);
