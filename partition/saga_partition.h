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
    SAGA_PARTITION_METHOD_COUNT
} saga_partition_method;

typedef struct saga_partition_opts {
    saga_partition_method method;
    uint64_t seed; /* METIS's and RANDOM's; the same seed gives the same parts */
} saga_partition_opts;

saga_partition_opts saga_partition_opts_defaults(void);

/* The result. Allocated by saga_partition_graph, read-only for the caller, freed with
 * saga_partition_free. */
typedef struct saga_partition {
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
 * METIS. METIS may leave a part empty on a graph with too little structure.
 * Errors: SAGA_ERR_INVALID_ARG for k < 1, k > n_vertices or a bad method;
 * SAGA_ERR_UNSUPPORTED when the symmetrized graph does not fit METIS's index type;
 * SAGA_ERR_OUT_OF_MEMORY (also when METIS runs out); SAGA_ERR_INTERNAL for other METIS
 * failures. */
saga_status saga_partition_graph(saga_partition **out, const saga_graph *g, int32_t k,
                                 const saga_partition_opts *opts);

/* Frees *p and sets it to NULL; accepts NULL. */
void saga_partition_free(saga_partition **p);

/* The method's name ("metis", "contiguous", "random"), or "?" */
const char *saga_partition_method_name(saga_partition_method m);

#ifdef __cplusplus
}
#endif
