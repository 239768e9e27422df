/* saga_partition.h - cutting a graph into k parts whose vertices are renumbered to contiguous
 * ranges: the first step towards streaming graphs larger than device memory.
 *
 *   saga_partition *p = NULL;
 *   saga_partition_opts o = saga_partition_opts_defaults();   // METIS, seed 1
 *   SAGA_TRY(saga_partition_graph(&p, g, 8, &o));
 *   printf("cut %lld, balance %.3f\n", (long long)p->edge_cut, p->balance);
 *   saga_graph *r = NULL;
 *   SAGA_TRY(saga_graph_permute(&r, g, p->perm));              // part q = [offs[q], offs[q+1])
 *   saga_partition_free(&p);
 *
 * Within a part, vertices keep their relative order, so a graph whose ids already follow its
 * structure keeps that locality inside each part.
 */
#pragma once

#include "saga_graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum saga_partition_method {
    SAGA_PARTITION_METIS = 0,  /* METIS k-way on the symmetrized graph (no self-loops/duplicates) */
    SAGA_PARTITION_CONTIGUOUS, /* k equal ranges of vertex ids */
    SAGA_PARTITION_RANDOM,     /* a seeded shuffle cut into k equal ranges (a baseline) */
    SAGA_PARTITION_FENNEL,     /* one pass over the vertices in id order, each placed where most
                                * of its placed neighbours are, less a size penalty (Fennel,
                                * Tsourakakis et al. 2014): O(n + k) memory beside the graph */
    SAGA_PARTITION_METHOD_COUNT
} saga_partition_method;

typedef struct saga_partition_opts {
    saga_partition_method method;
    uint64_t seed;      /* METIS's and RANDOM's; the same seed gives the same parts */
    bool balance_edges; /* METIS: balance 1 + in-degree per part rather than vertices, so that the
                         * parts' in-edges (a streamed block's size) are even on skewed graphs */
    int refine_iters;   /* METIS: refinement passes per uncoarsening level; 0 is METIS's own
                         * default (10). Fewer passes cost a little cut for much less time. */
    /* METIS: the most symmetrized adjacency entries to give METIS; 0 is what this METIS build's
     * index type holds. A graph with more, or one METIS runs out of memory on, is cut by
     * FENNEL instead, with a warning, and the result's method says so. */
    int64_t metis_max_entries;
} saga_partition_opts;

SAGA_API saga_partition_opts saga_partition_opts_defaults(void);

/* The result. Allocated by saga_partition_graph, read-only for the caller, freed with
 * saga_partition_free. */
typedef struct saga_partition {
    saga_partition_method method; /* the method that cut it (FENNEL when METIS could not) */
    int32_t n_parts;
    int32_t n_vertices;
    int32_t *part;    /* n_vertices: the part of each (old) vertex, 0..n_parts-1 */
    int32_t *perm;    /* n_vertices: new id -> old id; parts in order, each in old-id order */
    int32_t *inverse; /* n_vertices: old id -> new id */
    int64_t *offsets; /* n_parts + 1: part q holds the new ids [offsets[q], offsets[q+1]) */
    /* Directed edges u -> v of the graph (as stored: parallel edges count each time, an
     * undirected graph's edge counts once per direction) with part[u] != part[v]: the edges
     * that land outside the diagonal tiles. */
    int64_t edge_cut;
    double balance; /* largest part / (n_vertices / n_parts); 1 is perfect */
    double seconds; /* the partitioning itself, without building the result's arrays */
} saga_partition;

/* Cuts g into k parts with opts (NULL: defaults) and stores the result in *out (the caller
 * frees it with saga_partition_free). k == 1 puts every vertex in part 0 without calling
 * METIS. METIS may leave a part empty on a graph with too little structure. When METIS cannot
 * take the graph (more adjacency entries than its indices or opts->metis_max_entries allow, or
 * it runs out of memory), FENNEL cuts it instead (a warning; p->method says FENNEL).
 * Errors: SAGA_ERR_INVALID_ARG for k < 1, k > n_vertices, a bad method or a negative limit;
 * SAGA_ERR_OUT_OF_MEMORY; SAGA_ERR_INTERNAL for other METIS failures. */
SAGA_API saga_status saga_partition_graph(saga_partition **out, const saga_graph *g, int32_t k,
                                          const saga_partition_opts *opts);

/* Frees *p and sets it to NULL; accepts NULL. */
SAGA_API void saga_partition_free(saga_partition **p);

/* The method's name ("metis", "contiguous", "random", "fennel"), or "?" */
SAGA_API const char *saga_partition_method_name(saga_partition_method m);

/* ---- 2-D edge tiles over a renumbered graph ------------------------------------------------
 *
 *   saga_tiles *t = NULL;
 *   SAGA_TRY(saga_tiles_build(&t, r, p->offsets, p->n_parts));   // r from saga_graph_permute
 *   for (int64_t i = 0; i < t->n_tiles; i++) {                  // destination-major
 *       const saga_tile *x = &t->tiles[i];                      // edges part s -> part d
 *       for (int32_t row = 0; row < x->n_rows; row++)           // v = offsets[d] + row
 *           for (int64_t j = x->offsets[row]; j < x->offsets[row + 1]; j++)
 *               use(x->indices[j]);                             // a global source id in part s
 *   }
 *   saga_tiles_free(&t);
 */

/* Tile (src_part, dst_part): the in-edges u -> v with u in part src_part and v in part dst_part,
 * as a CSR over the destination part's vertices. Within a row the edges keep the graph's in-CSR
 * order (sources ascending, parallel edges in place). */
typedef struct saga_tile {
    int32_t src_part, dst_part;
    int32_t n_rows; /* vertices of the destination part; row = v - part_offsets[dst_part] */
    int64_t nnz;    /* > 0: empty tiles are not stored */
    int64_t
        *offsets; /* n_rows + 1, relative to the tile: offsets[0] == 0, offsets[n_rows] == nnz */
    int32_t *indices; /* nnz: GLOBAL source ids (of the renumbered graph), all in src_part */
    float *weights;   /* nnz, or NULL when the graph is unweighted */
    size_t bytes;     /* offsets + indices + weights: what moving the tile costs */
} saga_tile;

/* The non-empty tiles of a graph. Allocated by saga_tiles_build, read-only for the caller,
 * freed with saga_tiles_free. */
typedef struct saga_tiles {
    int32_t n_parts;
    int64_t *part_offsets; /* n_parts + 1: a copy of the ranges the tiles were cut by */
    int64_t n_tiles;       /* non-empty tiles, at most min(n_parts^2, n_edges) */
    saga_tile *tiles;      /* n_tiles, destination-major: by dst_part, then src_part */
    size_t total_bytes;    /* sum of the tiles' bytes */
    size_t max_tile_bytes; /* the largest tile's bytes (0 when there are none) */
} saga_tiles;

/* Cuts the in-edges of g, a graph already renumbered so that part q is the vertex ids
 * [part_offsets[q], part_offsets[q + 1]) (the caller keeps part_offsets), into the n_parts^2
 * tiles (s, d) and stores the non-empty ones in *out (the caller frees it with
 * saga_tiles_free). Parts may be empty. Errors: SAGA_ERR_INVALID_ARG when n_parts < 1 or the
 * offsets do not start at 0, decrease, or end elsewhere than n_vertices;
 * SAGA_ERR_OUT_OF_MEMORY. */
SAGA_API saga_status saga_tiles_build(saga_tiles **out, const saga_graph *g,
                                      const int64_t *part_offsets, int32_t n_parts);

/* Frees *t and its tiles and sets it to NULL; accepts NULL. */
SAGA_API void saga_tiles_free(saga_tiles **t);

/* The device memory a streamed pass over g cut into k parts is expected to need, for
 * feature_bytes_per_vertex bytes of vertex data per vertex. With P = ceil(n / k) the rows of
 * the largest part and E = ceil(m / k) the in-edges of an average destination part (a bound on
 * each of its tiles when in-degrees are balanced; m / k^2 would badly underestimate the
 * diagonal tiles METIS fills):
 *   tile(k)      = 8 (P + 1) + E (4 + 4 if weighted)
 *   footprint(k) = 2 P F                  destination part: output rows and gathered rows
 *                + 2 (P F + tile(k))      one source part's rows and one tile, double-buffered
 * It does not increase with k. Returns 0 for k < 1 or a negative feature size; saturates at
 * SIZE_MAX. */
SAGA_API size_t saga_tiles_footprint(const saga_graph *g, int32_t k,
                                     int64_t feature_bytes_per_vertex);

/* The smallest k among 1, 2, 4, ... (below n_vertices) and finally n_vertices whose
 * saga_tiles_footprint fits in budget_bytes, into *k. Since the footprint does not increase
 * with k, footprint(k / 2) exceeds the budget unless k == 1. Errors: SAGA_ERR_INVALID_ARG for a
 * negative feature size; SAGA_ERR_BUDGET, naming the footprint at k = n_vertices (the smallest
 * budget that works), when even that does not fit. */
SAGA_API saga_status saga_tiles_choose_parts(int32_t *k, const saga_graph *g,
                                             int64_t feature_bytes_per_vertex, size_t budget_bytes);

#ifdef __cplusplus
}
#endif
