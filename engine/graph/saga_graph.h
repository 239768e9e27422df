/* saga_graph.h - a directed graph held twice in CSR form: by destination (in-edges) and by
 * source (out-edges), with optional f32 edge weights and the vertices' original ids.
 *
 *   saga_graph *g = NULL;
 *   SAGA_TRY(saga_graph_load(&g, "edges.txt.gz", NULL));       // saga_io.h
 *   saga_csr in = saga_graph_in(g);                             // rows = destinations
 *   for (int64_t k = in.offsets[v]; k < in.offsets[v + 1]; k++)
 *       use(in.indices[k]);                                     // a source of v
 *   printf("%lld\n", (long long)saga_graph_orig_id(g, v));     // the id the file used
 *   saga_graph_free(&g);
 *
 * Vertex ids inside saga are int32 0..n-1, given in increasing order of the original ids, so a
 * file that already uses 0..n-1 keeps its ids. Offsets are int64. Within a row, indices are
 * sorted ascending.
 */
#pragma once

#include "saga_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct saga_graph saga_graph;

/* A read-only view of one CSR direction; valid while the graph lives. */
typedef struct saga_csr {
    int32_t n_rows;
    int64_t nnz;
    const int64_t *offsets; /* n_rows + 1 */
    const int32_t *indices; /* nnz */
    const float *weights;   /* nnz, or NULL when the graph is unweighted */
} saga_csr;

typedef enum saga_self_loops {
    SAGA_SELF_LOOPS_KEEP = 0, /* as listed */
    SAGA_SELF_LOOPS_DROP,     /* removed */
    SAGA_SELF_LOOPS_COUNT
} saga_self_loops;

typedef enum saga_duplicates {
    SAGA_DUPLICATES_AUTO = 0, /* KEEP for a directed graph, DROP when made undirected */
    SAGA_DUPLICATES_KEEP,     /* parallel edges stay (a multigraph) */
    SAGA_DUPLICATES_DROP,     /* one edge kept per (src, dst), with the smallest of their weights */
    SAGA_DUPLICATES_SUM,      /* one edge kept per (src, dst) with the weights summed */
    SAGA_DUPLICATES_COUNT
} saga_duplicates;

/* How edge arrays become a graph. */
typedef struct saga_graph_opts {
    bool undirected; /* add (v,u) for every (u,v); a self-loop is added once */
    saga_self_loops self_loops;
    saga_duplicates duplicates;
} saga_graph_opts;

SAGA_API saga_graph_opts saga_graph_opts_defaults(void);

/* Builds a graph from n_edges edges src[k] -> dst[k] with vertices 0..n_vertices-1, taking
 * ownership of the arrays (allocated with saga_malloc) and setting the caller's pointers to
 * NULL, also on failure. w (weights) and orig_ids (n_vertices entries, strictly increasing)
 * may point to NULL. The arrays are reused in place, so the peak memory stays near the final
 * size. Errors: SAGA_ERR_INVALID_ARG for an endpoint outside 0..n_vertices-1, a count that does
 * not fit, or orig_ids not increasing; SAGA_ERR_OUT_OF_MEMORY. */
SAGA_API saga_status saga_graph_from_edges_take(saga_graph **out, int32_t n_vertices,
                                                int64_t n_edges, int32_t **src, int32_t **dst,
                                                float **w, int64_t **orig_ids,
                                                const saga_graph_opts *opts);

/* Same as saga_graph_from_edges_take but copies the arrays; the caller keeps them. */
SAGA_API saga_status saga_graph_from_edges(saga_graph **out, int32_t n_vertices, int64_t n_edges,
                                           const int32_t *src, const int32_t *dst, const float *w,
                                           const int64_t *orig_ids, const saga_graph_opts *opts);

/* Builds in *out the graph g with its vertices renumbered: new vertex i is old vertex perm[i]
 * (perm: n_vertices entries, a permutation of 0..n-1; the caller keeps it). Every edge u -> v
 * of g becomes inv[u] -> inv[v] with its weight; self-loops and parallel edges stay. Original
 * ids travel with their vertices, so saga_graph_orig_id(out, i) == saga_graph_orig_id(g,
 * perm[i]); the id map of the result is then in general not increasing, which makes
 * saga_graph_find_vertex a scan and saga_sgr_write refuse the graph. The result records g's
 * build (saga_graph_build_opts). The caller owns *out.
 * Errors: SAGA_ERR_INVALID_ARG when perm is not a permutation; SAGA_ERR_OUT_OF_MEMORY. */
SAGA_API saga_status saga_graph_permute(saga_graph **out, const saga_graph *g, const int32_t *perm);

/* Builds in *out the undirected graph of g: every edge u -> v of g in both directions, parallel
 * edges merged into one with the smallest of their weights, a self-loop once; the original ids
 * stay. This is what saga_graph_from_edges with undirected set (duplicates AUTO) builds from g's
 * edges, so a graph built directed and then symmetrized equals the graph built undirected from
 * the same edges. The caller owns *out. Errors: SAGA_ERR_OUT_OF_MEMORY. */
SAGA_API saga_status saga_graph_symmetrize(saga_graph **out, const saga_graph *g);

/* Whether every vertex's in-edges are its out-edges: the in- and out-CSR hold the same rows, so
 * each edge u -> v comes with v -> u as often. Weights are not compared. True for every graph
 * built undirected, and for a directed one that lists both directions of each edge. Reads both
 * directions once. */
SAGA_API bool saga_graph_is_symmetric(const saga_graph *g);

/* How g was built: writes the options its builder was given to *out, duplicates resolved (KEEP,
 * DROP or SUM, never AUTO), and returns true; returns false, leaving *out alone, when that is not
 * known (a graph read from a version 1 .sgr file, which did not record it). A graph loaded from an
 * .sgr reports how the file's graph was built, with the loading options applied on top (see
 * saga_graph_load). */
SAGA_API bool saga_graph_build_opts(const saga_graph *g, saga_graph_opts *out);

/* Frees *g and sets it to NULL; accepts NULL. */
SAGA_API void saga_graph_free(saga_graph **g);

SAGA_API int32_t saga_graph_n_vertices(const saga_graph *g);
SAGA_API int64_t saga_graph_n_edges(const saga_graph *g);
SAGA_API bool saga_graph_has_weights(const saga_graph *g);

/* In-edges: row v lists the sources of edges into v. */
SAGA_API saga_csr saga_graph_in(const saga_graph *g);
/* Out-edges: row u lists the destinations of edges out of u. */
SAGA_API saga_csr saga_graph_out(const saga_graph *g);

/* Original id of vertex v (v itself when the graph has no id map). */
SAGA_API int64_t saga_graph_orig_id(const saga_graph *g, int32_t v);
/* The id map (n_vertices entries, increasing unless the graph came from saga_graph_permute) or
 * NULL when ids are 0..n-1 already. */
SAGA_API const int64_t *saga_graph_orig_ids(const saga_graph *g);
/* Vertex whose original id is orig: SAGA_ERR_INVALID_ARG when there is none. */
SAGA_API saga_status saga_graph_find_vertex(const saga_graph *g, int64_t orig, int32_t *out);

/* Degree summary and counts, computed in one pass. */
typedef struct saga_graph_summary {
    int32_t n_vertices;
    int64_t n_edges;
    int64_t n_self_loops;
    int64_t n_duplicates; /* edges beyond the first between the same ordered pair */
    int32_t in_degree_min, in_degree_max;
    int32_t out_degree_min, out_degree_max;
    double degree_mean; /* n_edges / n_vertices */
    int32_t n_isolated; /* neither in- nor out-edges */
    int32_t n_dangling; /* no out-edges */
} saga_graph_summary;

SAGA_API void saga_graph_summarize(const saga_graph *g, saga_graph_summary *out);

#ifdef __cplusplus
}
#endif
