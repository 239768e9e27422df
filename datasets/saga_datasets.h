/* saga_datasets.h - deterministic synthetic graphs: R-MAT (Graph500 parameters by default).
 *
 *   saga_rmat_params p = saga_rmat_params_defaults();
 *   p.scale = 16;                    // 65,536 vertices
 *   p.edge_factor = 16;              // 1,048,576 edges
 *   saga_graph *g = NULL;
 *   SAGA_TRY(saga_rmat_graph(&g, &p, NULL));
 *
 * The same parameters and seed give the same edges on every machine and thread count.
 */
#pragma once

#include "saga_graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct saga_rmat_params {
    int scale;        /* 2^scale vertices, 1..30 */
    int edge_factor;  /* edges = edge_factor * 2^scale */
    double a, b, c;   /* quadrant probabilities; d = 1 - a - b - c */
    uint64_t seed;
    bool scramble;    /* permute vertex ids so that degree is not correlated with id */
} saga_rmat_params;

/* scale 16, edge factor 16, a=0.57 b=0.19 c=0.19, seed 1, scrambled. */
saga_rmat_params saga_rmat_params_defaults(void);

/* Generates the edge arrays (saga_malloc'd; the caller owns them). Self-loops and duplicate edges
 * are kept as drawn. */
saga_status saga_rmat_edges(int32_t **src, int32_t **dst, int64_t *n_edges, int32_t *n_vertices,
                            const saga_rmat_params *p);
/* Generates a graph; opts as for saga_graph_from_edges (NULL = defaults). */
saga_status saga_rmat_graph(saga_graph **out, const saga_rmat_params *p, const saga_graph_opts *opts);
/* Writes the edges as a text edge list ("src dst" per line, a '#' header naming the parameters),
 * gzip-compressed when path ends in ".gz". */
saga_status saga_rmat_write(const char *path, const saga_rmat_params *p);

#ifdef __cplusplus
}
#endif
