/* program_impl.h - the executor's view of a graph: what the fused and batched paths of a vertex
 * program read, whether the graph is placed whole (saga_dgraph) or streamed one block of
 * destinations at a time (engine/exec/net_*.c). Internal to saga. */
#pragma once

#include "nn_impl.h"
#include "saga_program.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Destinations cut into batches of at most max_batch_edges in-edges. */
typedef struct saga_prog_plan {
    int64_t n_batches;
    const int32_t *v0;    /* host, n_batches + 1: batch b is destinations v0[b] .. v0[b+1]-1 */
    const int64_t *d_off; /* device, n_dst + n_batches: batch b's offsets, relative to its first
                           * edge, start at d_off + v0[b] + b */
} saga_prog_plan;

/* A bipartite CSR on a backend: n_dst destination rows whose in-edges come from n_src source
 * rows (the rows of h_src). The whole graph: n_dst = n_src = n, sources are vertex ids. A
 * block of a streamed graph: the destinations of one part, sources indexed into the part's
 * halo (the sorted list of the vertices its in-edges come from). Every pointer is borrowed and
 * must stay valid until the tape that used the view is released. */
typedef struct saga_prog_view {
    int32_t n_dst, n_src;
    int64_t m;
    int64_t e0; /* index of the first edge in the whole graph's edge order (dropout row base) */
    const int64_t *h_in_off; /* host, n_dst + 1; edge k of row i is h_in_off[i] - h_off_base + k */
    int64_t h_off_base;
    const int64_t *d_in_off;   /* device, n_dst + 1, starting at 0 */
    const int32_t *d_in_src;   /* device, m: source row (into h_src) of each edge */
    const int32_t *d_edge_dst; /* device, m: destination row of each edge (batched path) */
    const int64_t *d_out_off;  /* device, n_src + 1: the transpose (fused backward) */
    const int32_t *d_out_dst;  /* device, m */
    const float *vals_in;      /* fused: the program's edge values in in-CSR order (NULL: 1) */
    const float *vals_out;     /* the same in the transpose's order */
    const float *weights;      /* batched: the weight column in edge order, NULL without one */
    const int32_t *d_edge_ids; /* device, m: each edge's index in the whole graph's edge order
                                * (dropout masks in apply_edge), or NULL: e0 + its position */
    saga_prog_plan plan;       /* batched */
} saga_prog_view;

/* The in-CSR a placed graph uses (saga_dgraph_new): g's in-edges, with exactly one self-loop
 * per vertex when add_loops; rows sorted by source. Host arrays (saga_free): offsets n + 1,
 * sources and weights (NULL when g has none) m. */
saga_status saga_place_in_csr(const saga_graph *g, bool add_loops, int64_t **off, int32_t **src,
                              float **w, int64_t *m);

/* The value of every edge of a placed in-CSR for weight mode w (mean: divided by the in-degree):
 * the graph's weights (1 without), 1 / sqrt(deg_in(v) deg_out(u)) for SYMNORM with out-degrees
 * from out_off (n + 1 offsets of the transpose), or 1. vals has in_off[n] entries. */
void saga_edge_values(int32_t n, const int64_t *in_off, const int32_t *in_src, const float *in_w,
                      const int64_t *out_off, saga_edge_weight w, bool mean, float *vals);

/* A placed block (saga_dgraph) for context c: n_dst destination rows over n_src >= n_dst source
 * rows, from a host CSR (off: n_dst + 1 from 0; src: off[n_dst] sources in [0, n_src); w: their
 * weights, or NULL), copied. deg_in (n_dst) and deg_out (n_src): the degrees SYMNORM divides by,
 * or both NULL to count them in the block. Its copies to the device (here, and of the values and
 * plans made on first use) are queued in c's stream order through c's staging: the host does not
 * wait for them. A program runs over it through saga_dgraph_view and saga_prog_gather: source
 * rows in, destination rows out. */
saga_status saga_dgraph_new_block(saga_dgraph **out, saga_ctx *c, int32_t n_dst, int32_t n_src,
                                  const int64_t *off, const int32_t *src, const float *w,
                                  const double *deg_in, const double *deg_out);
/* The view of placed graph (or block) g for program p: its edge values and batch plans made on
 * first use. */
saga_status saga_dgraph_view(saga_dgraph *g, const saga_program *p, saga_prog_view *v);

/* p's max_batch_edges, or the default (1 << 20) for 0. */
int64_t saga_prog_batch_edges(const saga_program *p);

/* Cuts rows 0 .. n-1 of a CSR (offsets off, n + 1) into batches of consecutive rows with at most
 * max_edges edges each (a row with more alone): v0 (n + 2 entries) gets the batches' first rows
 * and the end, v0[nb] = n (an empty CSR is one empty batch). Returns nb. */
int64_t saga_prog_cut_batches(int32_t n, const int64_t *off, int64_t max_edges, int32_t *v0);
/* The batches' offsets, each batch's relative to its first edge (saga_prog_plan's d_off on the
 * host): h_off has n + nb entries. */
void saga_prog_batch_offsets(const int64_t *off, int64_t nb, const int32_t *v0, int64_t *h_off);

/* Whether p runs as one SpMM (no apply_edge, SCATTER_SRC, SUM or MEAN). */
bool saga_prog_fused(const saga_program *p);

/* Scatter-ApplyEdge-Gather of p over view v: the gathered values (v->n_dst x F'), recorded on
 * c's tape, or NULL with the error in c. h_src has v->n_src rows, h_dst (SCATTER_DST, BOTH)
 * v->n_dst rows (the same tensor as h_src for a whole graph). edata has v->m rows or is NULL.
 * apply_edge sees edge dropout rows from v->e0 on. */
saga_tensor *saga_prog_gather(saga_ctx *c, const saga_program *p, const saga_prog_view *v,
                              saga_tensor *h_src, saga_tensor *h_dst, saga_tensor *edata,
                              void *layer);

/* Checks a program's fields (enums in range, SCATTER_BOTH with an apply_edge); who names the
 * caller in the message. */
saga_status saga_program_check(const saga_program *p, const char *who);

/* Runs apply_vertex fn (or an executor's vertex function) over v, with dropout rows from
 * v->first on, into *out, and checks that it gave f32 rows for v->count vertices: the error (not
 * recorded in c) when not. who names the caller in the message. */
saga_status saga_prog_apply_vertex(saga_ctx *c, saga_apply_vertex_fn fn, const saga_vertex_in *v,
                                   void *layer, const char *who, saga_tensor **out);

#ifdef __cplusplus
}
#endif
