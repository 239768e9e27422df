/* saga_sample.h - neighbour sampling for mini-batch training: from a batch of seed vertices, hop
 * by hop, a uniform sample without replacement of each destination's in-neighbours, into one
 * bipartite block per layer (the sampled in-edges of the layer's destination rows, its sources
 * renumbered), as GraphSAGE, PyG's NeighborLoader and DGL's samplers draw them.
 *
 *   int32_t fanouts[2] = {15, 10}; // hop 1 from the seeds: 15 in-neighbours each; hop 2: 10
 *   saga_sampler_opts so = saga_sampler_opts_defaults();
 *   so.seed = 1;
 *   so.self_loops = SAGA_DGRAPH_SELF_LOOPS_ADD; // GCN's A + I, normalised by the full graph's
 *   so.weight = SAGA_WEIGHT_SYMNORM;            // degrees (so.degrees)
 *   SAGA_TRY(saga_sampler_new(&s, g, fanouts, 2, &so));
 *   for (uint64_t b = 0; b < n_batches; b++) {
 *       SAGA_TRY(saga_sampler_sample(s, seeds + b * B, B, b, &smp));
 *       // smp->ids: the graph ids of the input rows (seeds first); smp->blocks[0] the first
 *       // layer, its sources those rows; smp->blocks[1] the last, its destinations the seeds
 *       saga_sample_free(&smp);
 *   }
 *   saga_sampler_free(&s);
 *
 * A sample depends on the graph, the fan-outs, the options, the seed vertices and the batch index
 * alone: the same bits on any thread count. A sampler is used by one thread at a time; threads
 * that sample concurrently each use their own (on the same graph).
 */
#pragma once

#include "saga_api.h"
#include "saga_graph.h"
#include "saga_program.h"
#include "saga_status.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The degrees of SAGA_WEIGHT_SYMNORM's 1 / sqrt(deg_in(v) deg_out(u)). */
typedef enum saga_sample_degrees {
    SAGA_SAMPLE_DEGREES_FULL = 0, /* the whole graph's, as a full-graph net places it (its
                                   * self-loops as saga_sampler_opts.self_loops says) */
    SAGA_SAMPLE_DEGREES_SAMPLED,  /* counted in the layer's block: the destination's sampled
                                   * in-edges, the source's sampled out-edges */
    SAGA_SAMPLE_DEGREES_COUNT
} saga_sample_degrees;

typedef struct saga_sampler_opts {
    uint64_t seed; /* of every draw (1) */
    /* KEEP (the default): a destination's in-edges are sampled as the graph has them, self-loops
     * included. ADD: the graph's self-loops are not sampled, and each destination's block row
     * holds one edge from itself beside its sampled in-neighbours (not counted in the fan-out). */
    saga_dgraph_self_loops self_loops;
    /* The blocks' edge values: NONE (the default: no values), GRAPH (the graph's weights, 1
     * without; an added self-loop has the weight of the vertex's own loop, or 1), SYMNORM. */
    saga_edge_weight weight;
    saga_sample_degrees degrees; /* SYMNORM's degrees (FULL) */
    /* the OpenMP threads a sample's hops run on: 0 (the default) OpenMP's count when the sampler
     * is made; 1 for a sampler on a thread of its own beside other work. The samples are the same
     * on any count. */
    int threads;
} saga_sampler_opts;

SAGA_API saga_sampler_opts saga_sampler_opts_defaults(void);

/* One layer's edges: destination rows 0 .. n_dst - 1 are source rows 0 .. n_dst - 1 (the rows of
 * a layer's destinations come first among its sources), so a layer's output rows are the next
 * layer's first input rows. */
typedef struct saga_sample_block {
    int32_t n_dst, n_src;
    int64_t n_edges;
    int64_t *offsets; /* n_dst + 1: destination i's edges are offsets[i] .. offsets[i + 1] - 1 */
    int32_t *src;     /* n_edges source rows, each row's in the order of the graph's sources */
    float *values;    /* n_edges edge values, or NULL (SAGA_WEIGHT_NONE) */
    float *weights;   /* n_edges: the graph's weights of the edges (GRAPH's values), or NULL for a
                       * graph without weights */
    /* the degrees SYMNORM divides by, as saga_sampler_opts.degrees says: the destinations'
     * in-degrees (n_dst) and the sources' out-degrees (n_src) */
    double *deg_in, *deg_out;
} saga_sample_block;

typedef struct saga_sample {
    int32_t n_layers;
    /* blocks[0]: the first layer, its sources the input rows (n_ids); blocks[n_layers - 1]: the
     * last, its destinations the seeds; blocks[l].n_dst == blocks[l + 1].n_src. */
    saga_sample_block *blocks;
    int32_t n_ids;
    /* n_ids graph ids of the rows: the seeds in the order given, then each hop's new sources in
     * the order they first appear in its edges (over shards: the vertices of the whole graph,
     * saga_shard.vertex, which one process's sample lists) */
    int32_t *ids;
    int64_t n_edges; /* over every block */
    /* The batch's seeds over every rank: n_seeds on one process; over shards the sum of the
     * ranks' (a rank's share of the batch's mean loss is its seeds over this). */
    int64_t all_seeds;
    /* Over shards (saga_sampler_new_shard), else NULL: */
    int32_t *local; /* n_ids: the row's own local id in the rank's shard, or -1 for another's */
    /* the rows' input features fetched from their owners when the shard has them: x_cols columns,
     * dense (x: n_ids x x_cols) or a CSR (x_offsets: n_ids + 1, x_indices, x_values) as the
     * shard holds them */
    int64_t x_cols;
    float *x;
    int64_t *x_offsets;
    int32_t *x_indices;
    float *x_values;
} saga_sample;

typedef struct saga_sampler saga_sampler;

/* A sampler of g's in-neighbours (g not owned; it must outlive the sampler): n_layers hops with
 * fanouts[h] in-neighbours per destination at hop h + 1 from the seeds (fanouts[0]: the seeds'
 * own, the last layer's block), -1 for all of them; a destination with fewer has them all. o: NULL
 * for the defaults. SAGA_ERR_INVALID_ARG for n_layers outside 1..64, a fan-out that is neither
 * -1 nor in 1..2^24, or options out of range. */
SAGA_API saga_status saga_sampler_new(saga_sampler **out, const saga_graph *g,
                                      const int32_t *fanouts, int32_t n_layers,
                                      const saga_sampler_opts *o);
SAGA_API void saga_sampler_free(saga_sampler **s);

struct saga_shard;
struct saga_comm;
/* A sampler over shards (saga_shards.h): rank r of comm samples from its shard s (s->rank == r;
 * s must outlive the sampler), its seeds its own rows. A destination another rank owns is drawn
 * by that rank, with the draw one process makes for its vertex (the same key, the same
 * candidates in the graph's order), and every row's degrees and input features come from its
 * owner: a sample over shards holds the rows, edges, values and degrees one process's sample of
 * the same seeds holds (the rows reached from several ranks' seeds once on each). Host memory per
 * rank: the shard, plus each sample. Collective: every rank makes it, and every rank samples each
 * batch (saga_sampler_sample, its own seeds, none allowed) in the same order. Errors:
 * saga_sampler_new's, SAGA_ERR_INVALID_ARG for a shard of another rank or communicator size. */
SAGA_API saga_status saga_sampler_new_shard(saga_sampler **out, const struct saga_shard *s,
                                            struct saga_comm *comm, const int32_t *fanouts,
                                            int32_t n_layers, const saga_sampler_opts *o);

/* The sample of the batch whose seeds are seeds[0 .. n_seeds - 1] (distinct graph ids) and whose
 * index is batch (it keys the draws: a vertex is sampled anew in each batch and hop). The caller
 * owns *out (saga_sample_free). SAGA_ERR_INVALID_ARG for no seed, a seed outside 0..n-1 or given
 * twice. Over shards the seeds are own rows (local ids 0 .. n_own - 1), none is allowed, and the
 * call is collective (a failure on any rank fails every rank's call, with its message). */
SAGA_API saga_status saga_sampler_sample(saga_sampler *s, const int32_t *seeds, int64_t n_seeds,
                                         uint64_t batch, saga_sample **out);
/* Frees *b and sets it to NULL; accepts NULL. */
SAGA_API void saga_sample_free(saga_sample **b);

/* What each vertex costs as a seed, in expectation over the draws, into cost (n entries):
 * per_edge times the edges its hops add to a sample plus per_row times the rows, counting a vertex
 * reached twice twice (a batch's sample shares what its seeds reach in common, so it holds at most
 * the sum): (1, 0) evens out the sampled edges, (0, 1) the rows, the bytes a batch's edge and row
 * take on the device its memory. Hop by hop from the last: a destination with d candidate
 * in-edges and fan-out f keeps k = min(d, f) of them, each with probability k / d. O(hops x
 * edges). SAGA_ERR_INVALID_ARG for a negative weight or both 0. Over shards (collective): cost
 * gets the shard's own rows' (n_own entries, by local id), each hop reading its halo rows' costs
 * from their owners: the values one process computes for those vertices. */
SAGA_API saga_status saga_sampler_cost(const saga_sampler *s, double per_edge, double per_row,
                                       double *cost);
/* Cuts seeds (n_seeds, in the order given) into n_batches consecutive runs, run b to be sampled
 * as batch batch0 + b, whose samples hold even amounts of per_edge x edges + per_row x rows (the
 * weights of saga_sampler_cost): run b is seeds[first[b] .. first[b + 1] - 1] (first: n_batches +
 * 1 entries from 0 to n_seeds, no run empty). A vertex's draws in a batch do not depend on the
 * batch's other vertices, so each run's sample is measured exactly as its seeds join it (the
 * draws saga_sampler_sample will make); a run closes once it reaches its share of what the seeds
 * left are expected to cost (saga_sampler_cost, scaled by how the runs so far measured against
 * their expectation). The last run takes the seeds left. Sequential: about one epoch's sampling.
 * SAGA_ERR_INVALID_ARG for n_batches outside 1..n_seeds, a seed outside the graph, or weights as
 * saga_sampler_cost refuses. Over shards (collective; n_batches the same on every rank): the
 * rank's own seeds (local ids) by their expected costs alone, since the draws of the other ranks'
 * rows are theirs to make; a run may be empty where a rank has fewer seeds than runs. */
SAGA_API saga_status saga_sampler_pack(saga_sampler *s, const int32_t *seeds, int64_t n_seeds,
                                       int64_t n_batches, uint64_t batch0, double per_edge,
                                       double per_row, int64_t *first);

#ifdef __cplusplus
}
#endif
