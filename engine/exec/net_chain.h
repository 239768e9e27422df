/* net_chain.h - a net's stages over the rows one demand needs: each stage's block over the rows
 * the demand pass (net_demand.h) gives it, chained so that a stage's output rows are the next
 * stage's input rows. In memory a training pass runs one from the loss rows and an inference of
 * chosen rows one from those; streamed, an inference of chosen rows runs the stages that need
 * every row by parts and the rest by slices: each stage's rows cut where the parts are, a step per
 * slice over those rows and their in-edges alone (net_slice), reading the stage before's rows from
 * the host, or from a resident stage's whole input on the device; a training pass runs one
 * from the loss rows, from the first stage when all of it fits the budget, else from the first
 * program stage at which it does or that the parts were planned to leave to it
 * (net_plan.parts_below): the parts run the stages below it over every row and write its input back
 * to the host (or whole on the device, where the stage is resident), the chain's step reads its
 * rows from there (gathered) and adds their gradient into the host's (the whole one's), and the
 * parts' backward pass reads that. When only vertex stages lie below it and their blocks fit beside
 * its input rows, the parts run them on those rows alone (the head), into a block of the chain's
 * rows on the device (or the first rows of the resident stage's whole input), and the gradient
 * stays there too. Internal to saga.
 *
 *   net_chain *ch;
 *   SAGA_TRY(net_chain_for(n, train, want, R, &ch)); // n prepared, one rank; NULL: no chain
 *   // stage s >= ch->whole_below (streamed) or every stage (in memory) runs on ch->blk[s]
 *   // (NULL: the net's whole block), the first reading ch->in's rows
 *
 * A program stage's block lists its rows with their in-edges over a halo that is the previous
 * stage's rows (their positions), or every vertex when that stage computes every row; a vertex
 * stage's block names its rows (graph ids for dropout). The cap of net_demand widens a demand of
 * nearly every row to every row. When the blocks do not fit in the room given, the stages from
 * the first on compute every row until they do (in memory a vertex stage with its predecessor;
 * streamed, by parts, never from a stage whose input stays whole on the device). */
#pragma once

#include "net_demand.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One step of a sliced chain (net_chain.slices): stage s over positions lo..hi-1 of the rows it
 * computes (net_demand.rows[s]), the rows of consecutive parts. */
typedef struct net_slice {
    int s;
    int32_t lo, hi;
    nblock *blk;     /* a program stage's rows with their in-edges over the slice's own halo; a
                      * vertex stage's rows (their graph ids) */
    nblock *in;      /* stage 0: its input rows (the halo's, or the rows'), from the net's input */
    saga_blk *b_in;  /* later stages: the same, gathered from the host rows of the stage before */
    bool whole;      /* or gathered into b_in on the device from the stage's whole input */
    saga_blk *b_out; /* its output rows, written back to the stage's rows on the host */
    /* a sliced training chain's: below the last stage, its output rows' gradient, loaded from
     * the stage's gradient rows on the host (gout_host); above the first, its input rows'
     * gradient, added on write-back into the gradient rows of the stage before, where the input
     * rows are (each slice in turn, so the sums take one order) */
    saga_blk *b_gout, *b_gin;
} net_slice;

typedef struct net_chain {
    bool streamed; /* a streamed net's: the stages below whole_below run by parts, and the
                    * chain reads its first stage's input rows from the host */
    bool train;    /* a streamed net's training chain (net_chain_for) */
    int32_t *want; /* the output rows it was built for: the net's order, increasing, distinct */
    int32_t n_want;
    net_demand d; /* pass 1; the stages below `whole_below` compute every row regardless */
    int whole_below;
    nblock **blk;  /* [s]: stage s's rows, or NULL: every row (n->plan.blk[0]) */
    nblock *in;    /* stage 0's input rows, or NULL: every row (blk[0] when a vertex stage) */
    int32_t n_out; /* rows of the last stage's output */
    const int32_t *out_ids; /* their graph ids (host; NULL: every row, n->iota) */
    size_t bytes;           /* the blocks' device bytes, estimated */
    /* a streamed training chain after the parts' stages (whole_below > 0): the gradient of its
     * input rows, which its step writes back to be added into n->grad_host[whole_below] */
    saga_blk *b_gin;
    size_t cap; /* a streamed training chain: the blocks its step may hold (saga_sched_step_cap) */
    /* a streamed training chain after vertex stages alone (the head): per part (k, this rank's
     * filled; net_head_blocks) the slice of its input rows, on which the parts run the stages
     * below it; their last writes its rows into the chain's input (in->b_xrows) on the device
     * and reads their gradient from b_gin there, neither crossing to the host. NULL otherwise.
     * hcap: the blocks the head's steps may hold */
    nblock *head;
    size_t hcap;
    /* a head runs the stages below whole_below (head then set once built); where stage
     * whole_below is resident, it writes the input rows at the first rows of its whole input
     * (in->b_xrows is saga_net.full[whole_below], b_gin its gfull: not the chain's to free) */
    bool use_head;
    uint64_t serial; /* the net's count of chains built when this one was (saga_net.chains) */
    /* over shards: [s] the exchange before program stage s (NULL for the others) */
    net_xplan **xp;
    /* a streamed inference: the stages from the first that needs fewer than every row
     * (whole_below) on run by slices, one step each, the slices of a stage in order and each
     * stage after the one before; stage s's output rows (its demand's, in order) go to
     * out_host[s] on the host (the last stage's to the pass's output), which the next stage's
     * slices gather theirs from. NULL otherwise (blk then holds the stages) */
    net_slice *slices;
    int32_t n_slices;
    float **out_host; /* [s], n_rows[s] x out_cols; NULL below whole_below and for the last */
    /* a streamed training chain whose stages below its start would compute every row by parts
     * (no head applies) runs by slices from the first stage instead (whole_below 0): each stage's
     * slices forward, the last stage's each with the loss and its backward pass, then the other
     * stages' backward passes by slices from the top, each slice computing its rows again on a
     * tape of its own. gout_host[s]: the gradient of stage s's output rows (n_rows[s] x out_cols,
     * zeroed at each pass's start), for the stages below the last; NULL otherwise */
    float **gout_host;
    /* its host-to-device floor (saga_net_stats.h2d_floor_bytes): the net's input as the parts
     * below whole_below and the first stage's slices read it, and each program stage's tiles, by
     * part below whole_below and by slice from it */
    uint64_t floor_bytes;
} net_chain;

/* The chain (*out) of prepared net n (streamed or in memory) for the R output rows (increasing,
 * distinct, the net's order; rows NULL: every row), with blocks of at most room bytes (SIZE_MAX:
 * no limit); streamed and train, a training chain (net_chain.train), whose whole_below is 0, a
 * program stage (with b_gin where its input is not resident or a head writes it), or n_stages
 * where none fits. Errors: SAGA_ERR_OUT_OF_MEMORY, SAGA_ERR_UNSUPPORTED (a batched stage over
 * 2^31 edges). */
saga_status net_chain_build(saga_net *n, net_chain **out, const int32_t *rows, int32_t R,
                            size_t room, bool streamed, bool train);
/* Frees the chain and its scheduler blocks (between passes). */
void net_chain_free(saga_net *n, net_chain **ch);
/* The input changed: the chain's own copies of its rows refilled and reloaded. */
void net_chain_input_changed(saga_net *n, net_chain *ch);
/* The chain of a call (*out): training, from the loss rows (n->plan.tchain, every row without them;
 * streamed, with loss rows where saga chose the parts or planned the chain's start, and the chain
 * fits the room from some stage on: else NULL, and n->plan.tchain_none; its floor goes to
 * net_plan.floor_train_bytes);
 * inference of the rows want (R, increasing and distinct), n->plan.echain, kept while they stay the
 * same; NULL where chains do not apply or for inference of every row. A new one's time counts as
 * preparation (saga_net_stats.prepare_seconds). */
saga_status net_chain_for(saga_net *n, bool train, const int32_t *want, int32_t R, net_chain **out);
/* Whether a streamed training chain reads its input from the whole copy the parts write on the
 * device (its first stage is resident: saga_net.full) and adds its gradient into gfull there,
 * rather than through the host (b_gin). */
bool net_chain_reads_whole(const saga_net *n, const net_chain *ch);
/* Rows stage s computes. */
int32_t net_chain_rows(const saga_net *n, const net_chain *ch, int s);

#ifdef __cplusplus
}
#endif
