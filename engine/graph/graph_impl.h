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
    /* When mapping is non-NULL the arrays above point into an mmap of an .sgr file and are
     * not freed one by one; saga_graph_free unmaps it. */
    void *mapping;
    size_t mapping_len;
};
