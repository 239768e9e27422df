/* saga_dense.h - dense networks larger than the device: an MLP whose Linear layers are split into
 * tiles of rows or columns of their weight matrix, each tile (weights, gradient, Adam moments)
 * moved through the device by the block scheduler under a byte budget.
 *
 *   int32_t widths[] = {1024, 2048, 2048, 16};     // input, hidden, hidden, output
 *   saga_mlp_params p = saga_mlp_params_defaults();
 *   p.n_layers = 3;
 *   p.widths = widths;
 *   p.batch = 256;                                // rows per training step
 *   p.n_micro = 4;                                // in micro-batches of 64 rows
 *   p.device_bytes = 16u << 20;                   // cap; 0: the backend's budget
 *   saga_mlp *m = NULL;
 *   SAGA_TRY(saga_mlp_new(&m, be, &p));
 *   puts(saga_mlp_describe(m));                   // the planner's tiling
 *   double loss;
 *   for (int s = 0; s < steps; s++)
 *       SAGA_TRY(saga_mlp_train_step(m, x, y, &loss));   // x: batch x 1024, y: batch x 16
 *   saga_mlp_free(&m);
 *
 * Layer l computes h_{l+1} = relu(h_l W_l + b_l) (no relu after the last layer); the loss is the
 * mean squared error against the targets, averaged over every row and output of the batch (as
 * torch.nn.MSELoss). W_l (in x out, f32) is cut into column tiles (each gives its columns of the
 * output) or row tiles (each adds its partial product); a tile holds its share of the bias. The
 * planner sizes the tiles so that one step's blocks fit twice in the budget (the next step's load
 * then overlaps the current step's compute), or once when that is impossible; when every block
 * fits at once there is one tile per layer and after the first step only the batch moves.
 *
 * Pipelines: with n_stages > 1 the layers are cut into contiguous stages, stage s on backend
 * stage_backends[s] (several GPUs, or several CPU backends) with its own tiles, cap and block
 * scheduler, driven by a thread of its own. Micro-batches flow through the stages in the 1F1B
 * order (stage s runs n_stages - 1 - s forward passes ahead, then alternates one forward and
 * one backward); activations go down the pipeline and their gradients up it through pinned
 * host buffers, each sent as soon as its copy to the host completes.
 *   SAGA_DENSE_PIPE_SYNC  every step ends with a flush: each stage updates its tiles after its
 *                         last backward pass of the step, and the next step's forward passes
 *                         start after that. The result equals one stage running the same
 *                         micro-batches in order.
 *   SAGA_DENSE_PIPE_2BW   PipeDream-2BW: saga_mlp_train_steps runs its steps back to back with
 *                         no flush; every stage keeps two versions of its weights. Step b's
 *                         micro-batches run forward and backward on version max(b - 1, 0) and
 *                         the update after step b makes version b + 1 from version b:
 *                           W_{b+1} = W_b - update(grad f_b(W_{b-1})),
 *                         one step of staleness (none for the first step). This is a property
 *                         of the step index, not of timing, so results are deterministic, and
 *                         the same with one stage or several. Needs n_micro >= n_stages - 1.
 *
 * Stages on ranks: with a communicator of R > 1 ranks in comm (saga_comm.h, a host one) and
 * n_stages == R, stage s runs on rank s, on the backend that rank passes as be (stage_backends
 * is ignored), driven by the calling thread. Every rank makes the same calls with the same
 * arguments, and each is collective: saga_mlp_new, saga_mlp_train_step(s) (the batches given on
 * every rank: stage 0 reads x, the last stage y), saga_mlp_get_layer and saga_mlp_free.
 * Activations and gradients go between the ranks as point-to-point transfers of the same pinned
 * ring buffers, by a thread per direction and neighbour (each on a communicator of its own,
 * duplicated from MPI_COMM_WORLD as the given one is; a program that initialises MPI itself must
 * ask for MPI_THREAD_MULTIPLE, as saga does): a micro-batch is sent as soon as its copy to the
 * host completes, and the next ones are received while the stage computes. The 1F1B
 * order, SYNC and 2BW are as above, so the results are those of the pipeline in one process.
 * The loss is computed on the last rank and every rank returns it; the statistics cover every
 * stage on every rank.
 *   Failures: a call fails on every rank or on none. A stage that fails in the middle of a step
 * keeps exchanging its (now meaningless) buffers with its neighbours until the call's
 * micro-batches are through, then saga_comm_agree gives every rank its error (the other ranks
 * get it prefixed "rank R: "). A transfer that fails (an MPI error) cannot be finished that
 * way: the rank that saw it returns SAGA_ERR_COMM without agreement and its neighbours may wait
 * for it; stop the job then (saga_comm_abort).
 */
#pragma once

#include "saga_backend.h"
#include "saga_comm.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct saga_mlp saga_mlp;

/* How a weight matrix is cut. Append-only. */
typedef enum saga_dense_split {
    SAGA_DENSE_SPLIT_COLS = 0, /* tiles of output columns: W[:, c0:c1] and b[c0:c1] */
    SAGA_DENSE_SPLIT_ROWS,     /* tiles of input rows: W[r0:r1, :]; the first tile holds b */
    SAGA_DENSE_SPLIT_COUNT
} saga_dense_split;

/* How the steps of a pipeline follow each other. Append-only. */
typedef enum saga_dense_pipe {
    SAGA_DENSE_PIPE_SYNC = 0, /* flush after every step: equal to sequential training */
    SAGA_DENSE_PIPE_2BW,      /* no flush, double-buffered weights, one step stale */
    SAGA_DENSE_PIPE_COUNT
} saga_dense_pipe;

/* How micro-batches meet the optimizer. Append-only. */
typedef enum saga_dense_optim {
    /* gradients summed over the micro-batches, then one torch.optim.Adam step (no weight decay,
     * amsgrad off) on the sum, tile by tile, in the last micro-batch's backward pass */
    SAGA_DENSE_ADAM = 0,
    /* Adam accumulation: each micro-batch's gradient share c_k (its part of the batch gradient,
     * c_k = g_k / n_micro for the micro-batch's own mean-loss gradient g_k) goes into the moments
     * as soon as it is computed and the gradient tile is freed:
     *   m_t = b1 m_{t-1} + (1 - b1) sum_k c_k,   v_t = b2 v_{t-1} + (1 - b2) sum_k c_k^2,
     * then the Adam update from m_t and v_t with torch's bias correction. m_t is Adam's; v_t sums
     * the squares of the shares instead of squaring their sum (equal for one micro-batch). */
    SAGA_DENSE_ADAMA,
    SAGA_DENSE_OPTIM_COUNT
} saga_dense_optim;

typedef struct saga_mlp_params {
    int32_t n_layers;      /* Linear layers, >= 1 */
    const int32_t *widths; /* n_layers + 1 widths: input, hidden ..., output (copied) */
    int32_t batch;         /* rows of a training step */
    int32_t n_micro;       /* micro-batches per step; must divide batch */
    saga_dense_split split;
    saga_dense_optim optim;
    float lr, beta1, beta2, eps;
    size_t device_bytes;    /* cap on the blocks' device bytes; 0: the backend's budget (0 there
                             * too: no cap, one tile per layer) */
    int32_t max_tile_units; /* at most this many rows or columns per tile; 0: the planner's */
    uint64_t seed;          /* initial weights and biases, uniform in +-1/sqrt(in) as torch */
    int32_t n_stages;       /* pipeline stages, 1 <= n_stages <= n_layers */
    saga_backend *const *stage_backends; /* n_stages distinct backends, stage s on the s-th
                                          * (device_bytes caps each); NULL: one stage on be */
    const int32_t *stage_layers;         /* n_stages + 1 ascending layer indices from 0 to n_layers:
                                          * stage s has layers [stage_layers[s], stage_layers[s + 1]);
                                          * NULL: contiguous stages balanced by parameter count */
    saga_dense_pipe pipe;
    saga_comm *comm; /* ranks to run the stages on, one each (n_stages == its size); NULL or one
                      * rank: every stage in this process */
} saga_mlp_params;

/* 1 layer, batch 1, 1 micro-batch, column tiles, Adam lr 1e-3, betas 0.9 / 0.999, eps 1e-8,
 * no cap, planner's tiles, seed 1, one stage, synchronous, no communicator; widths NULL (the
 * caller sets them). */
SAGA_API saga_mlp_params saga_mlp_params_defaults(void);

/* Builds the network on be (which must outlive it; with stage_backends, be is NULL or the first
 * of them; across ranks, this rank's stage's), initializes its parameters from the seed
 * (the same values for every tiling) and plans the tiles. The host keeps the parameters, the
 * moments, the summed gradients (SAGA_DENSE_ADAM only) and the activations; the device holds
 * what the running and the next step use, and whatever else the cap leaves room for.
 * SAGA_ERR_INVALID_ARG for inconsistent parameters; SAGA_ERR_BUDGET when the cap cannot hold
 * one step with tiles of a single row or column (the message names the smallest cap that
 * works); SAGA_ERR_OUT_OF_MEMORY. */
SAGA_API saga_status saga_mlp_new(saga_mlp **out, saga_backend *be, const saga_mlp_params *p);
/* Frees the network, its host arrays and its device blocks; *m becomes NULL. Accepts NULL. */
SAGA_API void saga_mlp_free(saga_mlp **m);

/* One training step on a batch: x (batch x widths[0]) and targets y (batch x widths[n_layers]),
 * row-major host arrays read until the call returns. Runs forward and backward micro-batch by
 * micro-batch, tile by tile, and the optimizer on each tile in the last backward pass that
 * touches it; *loss (may be NULL) gets the batch's mean squared error before the update.
 * Errors of the backend and the scheduler (SAGA_ERR_BUDGET when another user of the backend
 * took the room the plan counted on). After an error the parameters are undefined. */
SAGA_API saga_status saga_mlp_train_step(saga_mlp *m, const float *x, const float *y, double *loss);

/* n_steps training steps, step t on xs[t] and ys[t] (shaped as above, read until the call
 * returns); losses[t] (may be NULL) gets step t's loss. Synchronous pipelines (and one stage)
 * run them as n_steps calls of saga_mlp_train_step; PipeDream-2BW streams them through the
 * pipeline without a flush. The statistics cover the whole call. */
SAGA_API saga_status saga_mlp_train_steps(saga_mlp *m, int32_t n_steps, const float *const *xs,
                                          const float *const *ys, double *losses);

/* Copies layer l's weights (in x out, row-major) and bias (out) to the host arrays W and b
 * (either may be NULL), bringing the device copies of its tiles back first. Across ranks it is
 * collective: the rank of the layer's stage sends them to every rank. */
SAGA_API saga_status saga_mlp_get_layer(saga_mlp *m, int32_t l, float *W, float *b);

typedef struct saga_mlp_stats {
    /* the plan */
    bool streamed;             /* false: every block fits the cap at once, one tile per layer */
    int32_t n_layers;          /* tiles[l], tile_units[l] and tile_bytes[l] for l < n_layers: */
    const int32_t *tiles;      /* tiles per layer (valid while the network lives) */
    const int32_t *tile_units; /* rows or columns per tile (the last may have fewer) */
    const size_t *tile_bytes;  /* bytes of the largest parameter tile (its gradient and each
                                * moment have as many) */
    int32_t steps_per_batch;   /* scheduler steps of one training step */
    size_t param_bytes;        /* weights and biases */
    size_t footprint_bytes;    /* every block resident at once (an upper bound) */
    size_t step_bytes;         /* the largest step's blocks */
    size_t cap_bytes;          /* the cap the plan fits (0: none) */
    size_t resident_bytes;     /* planned to stay on the device between steps */
    size_t host_bytes;         /* host arrays: parameters, moments, gradients, activations */
    /* the last call of saga_mlp_train_step or saga_mlp_train_steps (all its steps) */
    uint64_t h2d_bytes, d2h_bytes; /* the backend's counters */
    size_t peak_device_bytes;      /* the backend's peak */
    size_t kept_bytes;             /* device bytes the blocks still hold after the step */
    double copy_seconds;           /* time the copies took (0 where the backend cannot tell) */
    double wait_seconds;           /* of which the compute side waited for */
    double overlap;                /* 1 - wait / copy: share of copy time hidden */
    double seconds;
    /* the pipeline (n_stages entries each, valid while the network lives) */
    int32_t n_stages;
    const int32_t *stage_layers;      /* n_stages + 1 layer boundaries */
    const size_t *stage_peak_bytes;   /* each stage's backend peak in the last call */
    const double *stage_idle_seconds; /* time each stage waited for its neighbours */
    const uint64_t *stage_h2d_bytes;  /* bytes each stage's backend copied to its device */
    /* across ranks */
    int32_t ranks;       /* the stages' ranks (1: one process) */
    uint64_t sent_bytes; /* activations and gradients the ranks sent each other in the last call */
} saga_mlp_stats;

SAGA_API void saga_mlp_get_stats(const saga_mlp *m, saga_mlp_stats *s);
/* One line for messages: "in memory: 3 layers, 1 tile each, 50.3 MB resident" or
 * "streamed: column tiles 9/17/1 of <= 1.05 MB, steps of 4.3 MB under a 10.0 MB cap", after
 * "2 stages (layers 0-1 | 2-3), 1F1B with a flush each step; " for a pipeline ("2 stages on
 * 2 ranks (...)" across ranks). */
SAGA_API const char *saga_mlp_describe(const saga_mlp *m);

#ifdef __cplusplus
}
#endif
