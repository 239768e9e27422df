/* graph_impl.h - the layout of saga_graph, shared by the builder and the .sgr loader. */
#pragma once

#include "saga_graph.h"

struct saga_graph {
    int32_t n_vertices;
    int64_t n_edges;
    int64_t *in_offsets; /* n+1 */
    int32_t *in_src;     /* m, sorted within each row */
    float *in_w;         /* m or NULL */
    int64_t *out_offsets;
    int32_t *out_dst;
    float *out_w;
    int64_t *orig_ids; /* n or NULL (identity) */
    /* orig_ids is not increasing: the graph was renumbered (saga_graph_permute), so lookups
     * by original id scan instead of bisecting, and the .sgr writer refuses it. */
    bool ids_unordered;
    /* How the graph was built (saga_graph_build_opts): the builder's options, duplicates never
     * AUTO; unknown for a graph read from a version 1 .sgr, which did not record them. */
    saga_graph_opts build;
    bool build_known;
    /* When mapping is non-NULL the arrays above point into an mmap of an .sgr file and are
     * not freed one by one; saga_graph_free unmaps it. */
    void *mapping;
    size_t mapping_len;
};

/* Builds in *out the graph that saga_graph_from_edges_take builds with opts from the edges of g,
 * taken as an edge list: every out-edge u -> v in row order, with its weight unless drop_weights
 * (or g has none). The original ids go along as they are (also when not increasing). The result
 * records opts as its build, which says how it was made from g, not from g's own source: a
 * caller that knows better (the .sgr loader) overwrites it. Errors: SAGA_ERR_OUT_OF_MEMORY. */
saga_status saga_graph_rebuild(saga_graph **out, const saga_graph *g, const saga_graph_opts *opts,
                               bool drop_weights);
