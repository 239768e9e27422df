/* dense_impl.h - what the files of the tiled MLP (saga_dense.h) share: tiles, layers, the steps
 * of a stage's plan, stage boundaries, stages and struct saga_mlp; and the functions that mlp.c
 * (tiles, the planner, the network's construction) and pipeline.c (stages on several devices,
 * their threads and boundaries) call across them, those of stage_ops.c (a stage's host arrays,
 * its steps and the passes of a tile) included. mlp.c calls into pipeline.c and stage_ops.c,
 * pipeline.c into stage_ops.c, and stage_ops.c into neither. Internal to saga. */
#pragma once

#include "saga_dense.h"

#include "nn_internal.h"
#include "sched_impl.h"

#include <pthread.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A tile: rows or columns [off, off + n) of W, with its bias share. Its parameters, gradient and
 * moments are laid out alike: the W part (row-major, n_w floats) then the bias part (n_b), at
 * float offset pos of the layer's host arrays. */
typedef struct tile {
    int64_t off, n;
    int64_t n_w, n_b;
    size_t pos, bytes;
    saga_blk *p[2]; /* the weights; p[1] only with PipeDream-2BW (the second version) */
    saga_blk *m, *v;
    /* the gradient: ADAM sums the step's micro-batches into it; ADAMA writes one micro-batch's
     * and frees it when that backward step ends */
    saga_blk *g;
} tile;

typedef struct layer {
    int64_t in, out;
    int32_t n_tiles, units; /* units: columns (COLS) or rows (ROWS) per tile */
    size_t tile_bytes;
    tile *tiles;
    float *hp[2], *hm, *hv, *hg;
    size_t n_params; /* in * out + out */
} layer;

enum { OP_FWD = 0, OP_BWD = 1 };

/* A step of a stage's plan: the forward or backward pass of one tile for micro-batch g of the
 * call (g / n_micro: the step of the call; g % n_micro: the micro-batch in it). */
typedef struct op {
    uint8_t kind;
    int32_t g, l, j;
} op;

/* Across ranks, one direction of one boundary at this rank's stage: a thread that moves the
 * call's micro-batches in order between the ring buffer and the neighbour's rank. */
typedef struct xfer {
    saga_mlp *m;
    int32_t b;       /* between stages b and b + 1 */
    bool grad, send; /* gradients (up the pipeline) or activations (down); sent or received */
    int peer;
    saga_comm *comm; /* its own: a communicator is used by one thread at a time */
    pthread_t thread;
    saga_status st;
    char err[512];
} xfer;

enum { DENSE_MAX_XFERS = 4 }; /* a stage between two others: both directions at both ends */

typedef struct stage {
    saga_mlp *m;
    int32_t idx, l0, l1; /* layers [l0, l1) */
    saga_backend *be;
    saga_sched *s;
    size_t cap;
    bool streamed;
    size_t footprint, params, step_bytes;
    /* per ring slot r (micro-batch g in slot g % R), [r * (L + 1) + l] for l0 <= l <= l1 */
    saga_blk **h, **d;
    saga_blk **t; /* targets (last stage) */
    saga_blk *ones;
    float *act_host;
    size_t act_floats;
    float *ones_host;
    size_t host_bytes;
    op *ops;
    int32_t n_ops, cap_ops;
    /* micro-batches of the call whose input, targets and output gradient are marked on the
     * host for the scheduler */
    int64_t marked_x, marked_y, marked_dy;
    double idle_seconds;
    saga_status st;
    char err[512];
    pthread_t thread;
} stage;

struct saga_mlp {
    saga_backend *be;
    saga_mlp_params p;
    int32_t *widths;
    int32_t L, mb, S, R;
    int32_t *stage_layers;
    layer *layers;
    stage *stages;
    /* boundary b (between stages b and b + 1), ring slot r: bx[b * R + r] the activations that
     * leave stage b, bg[b * R + r] their gradients coming back; pinned on stage b's backend */
    float **bx, **bg;
    /* [(2 * b + grad) * R + r]: recorded on the sending stage's copy stream after the copy of
     * the micro-batch in ring slot r to the host (in one process; across ranks, for this rank's
     * sends); NULL where this process does not send */
    saga_event **sent;
    int64_t *arrived;   /* [2 * b + grad]: micro-batches of the call across boundary b: sent, i.e.
                         * their copy to the host issued and its event recorded; across ranks,
                         * for the direction this rank receives, received into its ring buffer */
    pthread_mutex_t mu; /* guards arrived, failed and the transfer state below */
    pthread_cond_t cv;
    bool sync_made, failed;
    int32_t first_failed;
    /* across ranks (p.comm of several ranks): this rank runs stage me alone; the other stages
     * keep their layer range and the plan's figures, gathered from their ranks */
    saga_comm *comm;
    int32_t me;                        /* -1: every stage in this process */
    saga_comm *xcomm[DENSE_MAX_XFERS]; /* the transfer threads' communicators */
    xfer xf[DENSE_MAX_XFERS];
    int32_t n_xf;
    int gate;       /* for the transfer threads: 0 wait, 1 run, -1 stop at once */
    bool halted;    /* this rank's stage is done with the call (its copies too) */
    int32_t n_call; /* micro-batches of the running call */
    bool xfer_failed;
    uint64_t sent_bytes;
    int64_t *gather_i; /* the statistics all ranks sum after a call (4 + 2 S and 2 + S) */
    double *gather_d;
    /* the running call */
    const float *const *xs, *const *ys;
    double *loss_sums; /* per step of the call */
    int32_t cap_steps;
    /* the last stage's sums of squared errors, one per micro-batch of the call, copied into
     * pinned memory of its backend as they are computed and read after the call's wait */
    double *loss_parts;
    size_t loss_parts_bytes;
    int64_t step; /* steps trained so far */
    int32_t *st_tiles, *st_units;
    size_t *st_tile_bytes, *st_peak;
    double *st_idle;
    uint64_t *st_h2d;
    saga_mlp_stats stats;
    char desc[512];
};

/* Whether stage q runs in this process. */
static inline bool dense_here(const saga_mlp *m, int32_t q) {
    return m->me < 0 || q == m->me;
}

/* The block of h_l or d_l (a: the stage's h or d) in ring slot r of a stage. */
static inline saga_blk **dense_slot(const stage *sg, saga_blk **a, int32_t r, int32_t l) {
    return a + (size_t)r * (size_t)(sg->m->L + 1) + (size_t)l;
}

/* ---- stage_ops.c -------------------------------------------------------------------------- */

/* Whether the pipeline keeps two weight versions (PipeDream-2BW). */
bool dense_two_bw(const saga_mlp *m);

/* n zeroed floats from the stage's backend's host allocator, counted in its host bytes (NULL
 * when n is 0). */
saga_status dense_host_array(stage *sg, float **out, size_t n);

/* Stage sg's plan for n micro-batches, in the 1F1B order. */
saga_status dense_make_ops(stage *sg, int32_t n);

/* The blocks of h_l and d_l of micro-batch g at stage sg (in its ring slot). */
saga_blk *dense_h(const stage *sg, int32_t g, int32_t l);
saga_blk *dense_d(const stage *sg, int32_t g, int32_t l);

/* Records op o's step, with the blocks it uses, in the stage's scheduler plan. */
void dense_record(stage *sg, const op *o);

/* The forward and backward passes of op o's tile. */
saga_status dense_run_fwd(stage *sg, const op *o);
saga_status dense_run_bwd(stage *sg, const op *o);

/* ---- pipeline.c --------------------------------------------------------------------------- */

/* Stage boundaries that minimize the largest stage's parameter count (m->stage_layers). */
saga_status dense_balance_stages(saga_mlp *m);

/* Floats of one micro-batch's activations (or their gradients) across boundary b. */
size_t dense_boundary_floats(const saga_mlp *m, int32_t b);

/* The pinned buffers activations and gradients cross the stage boundaries through (those of
 * this process's stages); freed by dense_free_boundaries. */
saga_status dense_make_boundaries(saga_mlp *m);
void dense_free_boundaries(saga_mlp *m);

/* Across ranks, after each rank built its stage: the transfer threads' communicators, and the
 * plan's figures of every stage on every rank. Collective. */
saga_status dense_join_ranks(saga_mlp *m);
/* Frees the transfer threads' communicators. */
void dense_leave_ranks(saga_mlp *m);

#ifdef __cplusplus
}
#endif
