/* net_demand.h - the first pass of a net's plan: which rows each stage must compute so that the
 * rows read of the last stage's output come out right. Host-only; internal to saga.
 *
 *   net_demand d;
 *   SAGA_TRY(net_demand_build(&d, kinds, S, off, src, n, loss_rows, n_loss_rows));
 *   // d.rows[s][0 .. d.n_rows[s]) are the rows stage s computes
 *   net_demand_free(&d);
 *
 * Backwards from the last stage: a stage computes the rows its successor reads of its input (the
 * last stage, the rows read of the output); a vertex stage reads its own rows of its input, a
 * program stage its rows and their in-neighbours (gather over the in-edges, the vertex's own row
 * for ApplyVertex's self). So for GCN's four stages (X W, aggregate, H W, aggregate) and the rows
 * a loss reads, the first stage computes their two-hop in-neighbourhood: any program, any depth.
 * A stage whose demand is every row (n_rows[s] == n) lists no rows.
 *
 * One threshold widens a demand: a stage demanded more than net_demand_cap(n) rows computes every
 * row (and so does every stage before it). A block of nearly every row would save little of the
 * stage's work and cost its own copy of the graph's arrays and a gather of its input. */
#pragma once

#include "net_impl.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct net_demand {
    int n_stages;
    int32_t n;        /* vertices */
    int32_t *n_rows;  /* [s]: rows stage s computes */
    int32_t **rows;   /* [s]: those rows, increasing; NULL when they are every row */
    int64_t *n_edges; /* [s]: a program stage's in-edges of its rows (0 for a vertex stage) */
    int32_t n_in;     /* the rows of stage 0's input that it reads */
    int32_t *in_rows; /* those rows, increasing; NULL when they are every row */
} net_demand;

/* The most rows a stage of a net of n vertices computes alone: seven eighths of them. */
static inline int32_t net_demand_cap(int32_t n) {
    return n - n / 8;
}

/* Called at each program stage s once `next` holds the rows the stage reads of its input (want:
 * the rows it computes); it may add rows to next (n + 1 bytes, 1 for a row). Over shards, the
 * rows the other ranks read of this rank's (net_halo_demand). */
typedef struct net_demand_hook {
    saga_status (*fn)(void *user, int s, const uint8_t *want, uint8_t *next);
    void *user;
} net_demand_hook;

/* Fills *d (overwritten; free with net_demand_free) for stages of these kinds over the in-edge
 * CSR (off: n + 1 offsets, src: each in-edge's source), from the out_rows read of the last stage
 * (n_out of them, in any order, repeats allowed; out_rows NULL: every row). A demand of more than
 * cap rows (at a stage or of the input) becomes every row: net_demand_cap(n) for a net, n for
 * the exact sets. hook: NULL, or called at each program stage. Errors: SAGA_ERR_INVALID_ARG for a
 * row outside [0, n) or no stage; SAGA_ERR_OUT_OF_MEMORY; the hook's. */
saga_status net_demand_build(net_demand *d, const stage_kind *kinds, int n_stages,
                             const int64_t *off, const int32_t *src, int32_t n,
                             const int32_t *out_rows, int64_t n_out, int32_t cap,
                             const net_demand_hook *hook);
void net_demand_free(net_demand *d);

#ifdef __cplusplus
}
#endif
