/* saga_net.h - a graph network as a sequence of stages, run in device memory or streamed through
 * it block by block when the graph and its activations do not fit.
 *
 *   saga_net *net = NULL;
 *   saga_net_opts o = saga_net_opts_defaults();         // AUTO: streamed only when needed
 *   o.self_loops = SAGA_DGRAPH_SELF_LOOPS_ADD;
 *   SAGA_TRY(saga_net_new(&net, c, g, &o));              // c: a context on the backend
 *   SAGA_TRY(saga_net_add_vertex(net, project, &l1, 16));         // rows: dropout(x) W1
 *   SAGA_TRY(saga_net_add_program(net, &gcn_program, &l1, 16));   // SpMM, then bias and relu
 *   SAGA_TRY(saga_net_add_vertex(net, project, &l2, 7));
 *   SAGA_TRY(saga_net_add_program(net, &gcn_program, &l2, 7));
 *   SAGA_TRY(saga_net_set_loss(net, nll_rows, &split));
 *   SAGA_TRY(saga_net_set_input(net, features, 1433));  // host rows, in the graph's vertex order
 *   for (int epoch = 0; epoch < 200; epoch++) {
 *       double loss = 0;
 *       SAGA_TRY(saga_net_train_step(net, &loss));      // gradients into the parameters
 *       SAGA_TRY(saga_optim_step(opt));
 *   }
 *   SAGA_TRY(saga_net_forward(net, out));               // inference: n x 7 on the host
 *
 * Stages are the user's functions over blocks of rows: a vertex stage maps the rows of its input
 * (apply_vertex with v->self, no gathered values); a program stage is a vertex program
 * (saga_program.h) whose apply_vertex sees the gathered values and v->self. The loss function
 * sees blocks of the last stage's output and returns each block's share of the loss (1 x 1):
 * the loss is their sum, so a mean must divide by the global count.
 *
 * Streamed, the graph is cut into parts (METIS by default) renumbered to contiguous ranges; each
 * part's in-edges with the rows they read (its halo) form a block; a block scheduler moves
 * blocks, activations and gradients through the device under the backend's budget, loading the
 * next block while the current one computes. The user's ids are kept at the interface: input
 * rows, output rows and the ids given to the loss function are in the graph's vertex order. In
 * memory the same code runs with one block and nothing moves after the first load. Results agree
 * to float rounding (the sums over blocks run in another order); dropout masks are the same.
 *
 * A pass that fails on one rank leaves the net as it was before it (its tape, the context's error,
 * the dropout counter put back; the plan is made again by the next call). When the net chose the
 * plan itself (exec not MEMORY, parts 0) under a budget and a step's tensors took more device
 * memory than the plan estimated (a stage function holding more than its widths suggest, such as
 * an MLP inside apply_vertex), the pass runs again on a plan for twice the stages' estimated work,
 * up to 8 times a call, with a warning; a training pass does so when its model is named
 * (saga_net_set_model): its gradients are put back first (kept in host memory as the first
 * training pass on a plan begins). Its results are then those of a net planned so from the
 * start.
 */
#pragma once

#include "saga_comm.h"
#include "saga_nn.h"
#include "saga_partition.h"
#include "saga_program.h"
#include "saga_sample.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct saga_net saga_net;

typedef enum saga_exec {
    SAGA_EXEC_AUTO = 0, /* in memory when the estimate fits the budget, else streamed */
    SAGA_EXEC_MEMORY,
    SAGA_EXEC_STREAM,
    SAGA_EXEC_COUNT
} saga_exec;

typedef enum saga_saved {
    SAGA_SAVED_RECOMPUTE = 0, /* the backward pass recomputes each block's gathered values */
    SAGA_SAVED_OFFLOAD,       /* the forward pass copies them to the host and the backward pass
                               * streams them back (fused programs; others recompute) */
    SAGA_SAVED_COUNT
} saga_saved;

/* The order of the net's rows in memory. Users never see it: input, output and scores stay in
 * the graph's order. */
typedef enum saga_vertex_order {
    SAGA_ORDER_AUTO = 0,   /* DEGREE for PageRank in memory, else GRAPH */
    SAGA_ORDER_GRAPH,      /* the graph's own order (or the parts', streamed) */
    SAGA_ORDER_DEGREE,     /* in memory (on one rank, or a rank's own rows over shards): rows
                            * grouped by in-degree (each length up to 32, then powers of two; the
                            * longest first) so that consecutive rows run the same loop, and by
                            * out-degree within a group, highest first (ties: the graph's order),
                            * so that the sources most edges read share the cache; PageRank only
                            * (a net with stages refuses it: SAGA_ERR_UNSUPPORTED) */
    SAGA_ORDER_OUT_DEGREE, /* in memory: by out-degree alone, as above; PageRank only */
    SAGA_ORDER_COUNT
} saga_vertex_order;

/* The precision of the input rows and the program stages' edge weights as they move host ->
 * device in a streamed net (compute stays f32: a step widens its blocks on the device; the
 * weights are rounded once). In memory they cross once, in f32. */
typedef enum saga_transfer {
    SAGA_TRANSFER_F32 = 0,
    SAGA_TRANSFER_BF16, /* bfloat16: f32's exponent, 8 bits of mantissa; half the bytes */
    SAGA_TRANSFER_FP16, /* IEEE binary16: 11 bits of mantissa, |x| < 65520 (larger: inf) */
    SAGA_TRANSFER_COUNT
} saga_transfer;

/* One rank's share of a graph cut into shards (saga_shards.h, `saga partition --shards`): the
 * net's graph is the rank's local graph, its own rows 0 .. n_own - 1 with their in-edges, then
 * its halo, the other ranks' rows its own rows read, grouped by owner (rank q's at local rows
 * n_own + recv_offsets[q] .. n_own + recv_offsets[q + 1] - 1), which have no in-edges of their
 * own. Before each program stage the halo rows of the stage's input are received from their
 * owners, which send their rows send_rows[send_offsets[q] .. send_offsets[q + 1] - 1] to rank q
 * in the order q's halo lists them; in the backward pass the gradients of those rows go back and
 * are added there, rank by rank in rank order. Losses and the model's gradients
 * (saga_net_set_model) are summed over the ranks. Every rank makes the same stages, loss and
 * model and the same calls in the same order. In memory on each rank (a net that must stream
 * refuses: SAGA_ERR_UNSUPPORTED); every stage computes every local row, and the halo rows of a
 * stage are replaced by the owners' before a program stage reads them. A first stage that is a
 * program reads the input's halo rows from their owners too (dense input only). The arrays are
 * copied when the net is made. */
typedef struct saga_net_halo {
    saga_comm *comm; /* the ranks (not owned; must outlive the net) */
    int32_t n_own;
    const int64_t *recv_offsets; /* size(comm) + 1, from 0 to the halo's rows */
    const int64_t *send_offsets; /* size(comm) + 1 */
    const int32_t *send_rows;    /* own rows, send_offsets[size] of them */
    /* SYMNORM's out-degrees: each local row's out-edges in the whole graph (without self-loops,
     * which self_loops ADD counts on top), or NULL: the local graph's */
    const int64_t *out_degree;
    /* The row each local row's dropout masks are drawn by: its vertex in the whole graph, so
     * that the masks are one process's; or NULL: the local rows. */
    const int32_t *row_ids;
} saga_net_halo;

struct saga_shard;
/* The halo of shard s (saga_shard_open) over comm: its own rows, halo offsets, send lists, the
 * whole graph's out-degrees and its rows' vertex ids, pointing into s (which must outlive the
 * net). */
SAGA_API saga_net_halo saga_net_halo_of_shard(const struct saga_shard *s, saga_comm *comm);

typedef struct saga_net_opts {
    saga_exec exec;
    int32_t parts; /* streamed: parts; 0 = the fewest whose blocks fit, and a training pass
                    * whose loss rows' demand fits the budget whole then runs as one step over
                    * it; given, every training pass runs by these parts */
    saga_partition_method partition; /* METIS (default), contiguous ranges or random */
    uint64_t partition_seed;
    saga_saved saved;
    saga_dgraph_self_loops self_loops;
    saga_vertex_order order; /* in memory on one rank; streamed nets keep the parts' order */
    /* Streamed on one rank, a program stage after the first whose input (and its gradient) is
     * small against the budget keeps it whole on the device: halos are gathered and halo
     * gradients added there (saga_net_stats.resident_bytes). true: every halo goes through
     * the host instead, as with several ranks. */
    bool host_halos;
    saga_transfer transfer; /* streamed on one rank (several: SAGA_ERR_UNSUPPORTED unless f32) */
    /* Several ranks (NULL or one rank: this process alone; not owned, must outlive the net).
     * Every rank makes the same net over the same graph, stages, loss and input, and makes the
     * same calls in the same order. The parts (at least one per rank; METIS unless told
     * otherwise) are dealt to the ranks as contiguous ranges balanced by in-edges; a rank's
     * device holds its own blocks only (streamed under its budget when they do not fit), and
     * before each program stage it receives the rows its blocks read from their owners, and in
     * the backward pass sends the gradients of those rows back to be added there. Losses and
     * the model's gradients (saga_net_set_model) are summed over the ranks; outputs are
     * gathered on every rank. The parts must come out the same on every rank (METIS and the
     * seeded shuffle are deterministic): the net checks it. */
    saga_comm *comm;
    /* Several ranks over shards (see saga_net_halo; comm must then be NULL), or NULL. */
    const saga_net_halo *halo;
    /* When not NULL: the block scheduler writes one JSON line to trace per copy it issues and
     * per step it computes (stream, copy or compute, block kind, bytes, plan, step, start and
     * end seconds), for a timeline of copies against compute (`saga plot`). Not owned; must
     * outlive the net. NULL (the default): no tracing work. */
    FILE *trace;
    /* saga_net_pagerank: iterations profile_first .. profile_last (from 1) run inside a
     * profiler's capture range (saga_backend_profile_range), closed after a wait for the device
     * at the last of them or at the last iteration run; 0 (the default): none. */
    int32_t profile_first, profile_last;
    /* In memory on one rank, on a backend with graphs (CUDA): a pass like the one before it
     * (which allocated nothing) is recorded as a graph and launched as one unit, its graph
     * updated to the new arguments from pass to pass (saga_net_stats.graph). The same
     * results as without; false (the default): every kernel launched on its own. */
    bool graphs;
} saga_net_opts;

SAGA_API saga_net_opts saga_net_opts_defaults(void);

/* The block of rows a loss function sees: v->first .. v->first + v->count - 1 in the net's own
 * order, v->self the last stage's output for them, ids[i] the graph's id of row i (host). */
typedef saga_tensor *(*saga_net_loss_fn)(saga_ctx *c, const saga_vertex_in *v, const int32_t *ids,
                                         void *user);

/* A net over g (not owned; must outlive the net) whose ops run in c (not owned) on c's backend;
 * the budget is the backend's. Errors: SAGA_ERR_INVALID_ARG for options out of range. */
SAGA_API saga_status saga_net_new(saga_net **out, saga_ctx *c, const saga_graph *g,
                                  const saga_net_opts *o);
SAGA_API void saga_net_free(saga_net **n);

/* Appends a stage; out_cols is its output width (checked when it runs). fn/p and layer must
 * stay valid while the net is used. */
SAGA_API saga_status saga_net_add_vertex(saga_net *n, saga_apply_vertex_fn fn, void *layer,
                                         int64_t out_cols);
SAGA_API saga_status saga_net_add_program(saga_net *n, const saga_program *p, void *layer,
                                          int64_t out_cols);
/* The last stage added, a vertex stage, needs dense rows (v->self): its function cannot take
 * sparse input rows (v->sparse). saga_net_set_input_auto then keeps dense rows dense, and a net
 * given a CSR whose first stage is so marked is refused when it first runs
 * (SAGA_ERR_UNSUPPORTED). A layer that aggregates its input before multiplying marks its first
 * stage so. Before the first run; SAGA_ERR_INVALID_ARG when the last stage is not a vertex
 * stage. */
SAGA_API saga_status saga_net_set_dense_rows(saga_net *n);
SAGA_API saga_status saga_net_set_loss(saga_net *n, saga_net_loss_fn fn, void *user);
/* The vertices (graph ids, any order, copied) whose rows alone the loss sees (ids[i] names its
 * row i; the others' gradients are zero); a pass computes only what those read. NULL or 0: every
 * row. Before the first run; SAGA_ERR_INVALID_ARG for an id outside 0..n-1. */
SAGA_API saga_status saga_net_set_loss_rows(saga_net *n, const int32_t *vertices, int64_t count);
/* The masked cross-entropy as the loss, for node classification: the mean over the listed
 * vertices (graph ids, copied; a vertex listed twice counts once) of -log softmax(logits)[label],
 * the last stage's output rows taken as logits and labels[v] (n entries, copied; -1 for a vertex
 * without a class, which must not be listed) as the classes. Sets the loss rows to the listed
 * vertices (saga_net_set_loss_rows), so a pass computes only what those read. With a halo
 * (saga_net_opts.halo: ranks over shards, each listing its own rows) the mean is over every
 * rank's, and every rank calls it. SAGA_ERR_INVALID_ARG for a listed vertex outside 0..n-1 or
 * without a class, or when no vertex is listed on any rank. */
SAGA_API saga_status saga_net_set_loss_cross_entropy(saga_net *n, const int32_t *labels,
                                                     const int32_t *rows, int64_t n_rows);
/* The parameters the stages train (not owned): with several ranks, saga_net_train_step sums
 * their gradients over the ranks (saga_comm_allreduce_grads) before it returns, so every rank's
 * optimizer takes the same step; it refuses to train over several ranks without them
 * (SAGA_ERR_INVALID_ARG). Not needed with one rank. */
SAGA_API saga_status saga_net_set_model(saga_net *n, saga_model *m);
/* The input rows (n x cols f32, row v for vertex v, finite: SAGA_ERR_INVALID_ARG naming the first
 * that is not), copied. Call again when they change. */
SAGA_API saga_status saga_net_set_input(saga_net *n, const float *x, int64_t cols);
/* Sparse input rows instead: an n x cols CSR (offsets: n + 1 from 0 to nnz; indices: columns in
 * [0, cols); values), copied and kept sparse on the device (each block's rows move as their
 * offsets, indices and values). The first stage must be a vertex stage: its function sees the
 * block's rows as v->sparse (v->self is NULL), e.g. saga_spmm(c, v->sparse, W). Call again when
 * the values change; once the net has run, the offsets must stay the same. A net takes dense or
 * sparse input, not both. Errors: SAGA_ERR_INVALID_ARG for offsets or indices out of range. */
SAGA_API saga_status saga_net_set_input_csr(saga_net *n, const int64_t *offsets,
                                            const int32_t *indices, const float *values,
                                            int64_t cols);
/* Dense rows (as saga_net_set_input) that the net keeps as a CSR (as saga_net_set_input_csr)
 * when at most max_density of their entries are non-zero and the first stage, added before this
 * call, is a vertex stage not marked by saga_net_set_dense_rows, whose function must then take
 * v->sparse: bag-of-words features handed
 * over dense then move and multiply as their non-zeros alone, the CSR made once here. Otherwise
 * the rows stay dense; saga_net_stats.input_packed says which was chosen. Call again when the
 * values change: the first call's choice is kept, and a net that ran on the CSR needs each row's
 * non-zero count unchanged. max_density 0 keeps the rows dense unless they are all zero. Errors:
 * those of the call it becomes, SAGA_ERR_INVALID_ARG for max_density outside [0, 1], a net
 * given a CSR, or changed counts. */
SAGA_API saga_status saga_net_set_input_auto(saga_net *n, const float *x, int64_t cols,
                                             double max_density);

/* Mini-batch training on a sample of the net's graph (saga_sample.h, from saga_sampler_sample on
 * the same graph): the stages run over the sample's rows alone, program stage l over block l and
 * a vertex stage over the rows the stage before gave (the last stages over the seeds), from the
 * input rows of the sample's vertices, copied to the device for the step; the loss function sees
 * the seeds' rows (saga_net_set_loss_cross_entropy's loss: the mean over the seeds it lists),
 * and d loss / d parameter is added to each parameter's gradient (saga_optim_step applies it);
 * *loss gets the loss (loss may be NULL). A program stage over a block divides SYMNORM by the
 * degrees the sampler chose (saga_sampler_opts.degrees) and a mean by the sampled in-edges.
 * In memory; a pass waits for the device once. Over shards (a net made with saga_net_opts.halo,
 * samples of saga_sampler_new_shard) each rank passes its sample of the batch, whose input rows
 * the sample carries; the loss function returns the rank's share of the batch's loss, as in a
 * pass over ranks (the library's cross-entropy: its seeds' share of the mean over every rank's
 * seeds, smp->all_seeds, every seed a listed row), and after the backward pass the loss and the
 * model's gradients (saga_net_set_model, required) are summed over the ranks, so that every rank
 * holds what one process training on the union of the batch's seeds holds; a rank whose sample
 * has no seed takes part in the sums only. A pass that fails leaves the net ready for the next
 * sample, but the gradients may hold part of its backward pass: zero them (saga_model_zero_grad)
 * before training on. Errors: SAGA_ERR_INVALID_ARG when the net's program stages are not as many as
 * the sample's layers, a row is outside the graph, or a sample over shards meets a net that is not
 * (or the other way round); SAGA_ERR_UNSUPPORTED over ranks without shards (saga_net_opts.comm);
 * the stages' own. Over shards a failure on any rank fails every rank's training pass. */
SAGA_API saga_status saga_net_train_sample(saga_net *n, const saga_sample *smp, double *loss);
/* The most training passes over samples queued whose losses wait to be taken. */
enum { SAGA_NET_SAMPLES_QUEUED = 8 };
/* saga_net_train_sample without its wait for the device: the pass over smp is queued (forward,
 * loss, backward), the optimizer's step and the next passes queue behind it, and smp may be
 * freed once this returns. saga_net_train_sample_take reads the queued passes' losses in the
 * order they were queued; at most SAGA_NET_SAMPLES_QUEUED wait to be taken. Taking each loss one
 * pass late keeps the device busy: the next sample's input rows are gathered on the host, and
 * copied to the device on a stream of their own, while the pass before runs.
 *
 *   for (b = 0; b < batches; b++) {
 *       SAGA_TRY(saga_net_train_sample_queue(net, smp[b]));
 *       SAGA_TRY(saga_optim_step(opt));
 *       if (b > 0)
 *           SAGA_TRY(saga_net_train_sample_take(net, &loss[b - 1]));
 *   }
 *   SAGA_TRY(saga_net_train_sample_take(net, &loss[batches - 1]));
 *
 * Over shards the pass waits, as saga_net_train_sample does (its loss and gradients are summed
 * over the ranks), and its loss waits to be taken all the same. Errors: those of
 * saga_net_train_sample, and SAGA_ERR_INVALID_ARG when SAGA_NET_SAMPLES_QUEUED losses wait to be
 * taken; a pass that fails here is not queued. saga_net_train_sample refuses (INVALID_ARG) while
 * losses of queued passes wait to be taken. */
SAGA_API saga_status saga_net_train_sample_queue(saga_net *n, const saga_sample *smp);
/* The loss of the oldest training pass over a sample queued and not yet taken, waiting for it;
 * an error the device found in that pass is reported here (and the pass counts as taken).
 * SAGA_ERR_INVALID_ARG when none is queued. loss may be NULL. */
SAGA_API saga_status saga_net_train_sample_take(saga_net *n, double *loss);
/* Inference over a sample (the context out of training mode): the last stage's output of the
 * seeds into out (n_seeds x its width, row i for the sample's seed i). Over shards each rank's
 * own seeds, with no communication. */
SAGA_API saga_status saga_net_forward_sample(saga_net *n, const saga_sample *smp, float *out);

/* Inference (the context is put out of training mode): the last stage's output into out (n x
 * its width, row v for vertex v), or nowhere when out is NULL. */
SAGA_API saga_status saga_net_forward(saga_net *n, float *out);
/* Inference of chosen rows: the last stage's output of vertices[i] into row i of out (count x
 * its width; ids may repeat). On one rank the stages compute only the rows these read (their
 * in-neighbours, as deep as the stages go; the plan is kept while the rows stay the same): in
 * memory all of them; streamed, the stages that need (nearly) every row run by parts and the
 * rest in one step over the rows read. Over several ranks every row runs and these are picked.
 * Errors: SAGA_ERR_INVALID_ARG for an id outside 0..n-1. */
SAGA_API saga_status saga_net_forward_rows(saga_net *n, const int32_t *vertices, int64_t count,
                                           float *out);
/* saga_net_forward_rows in two calls, so that the host need not wait for the device between
 * epochs: the inference is queued behind what is queued (in memory on one rank; elsewhere it
 * runs and is waited for here), and saga_net_forward_rows_take waits for its end alone and
 * writes the rows into out (count x the last stage's width, as saga_net_forward_rows). Between
 * the two a training pass and the optimizer's step may be queued, and the take then leaves them
 * running:
 *
 *   SAGA_TRY(saga_net_train_queue(net));                           // epoch e
 *   SAGA_TRY(saga_optim_step(opt));
 *   if (e > 1)
 *       SAGA_TRY(saga_net_forward_rows_take(net, out));            // epoch e - 1's rows
 *   SAGA_TRY(saga_net_forward_rows_queue(net, rows, count));       // epoch e's
 *   SAGA_TRY(saga_net_train_result(net, &loss, NULL));             // epoch e's loss
 *
 * Another inference of chosen rows drops rows not yet taken. Errors: those of
 * saga_net_forward_rows; the take's SAGA_ERR_INVALID_ARG when nothing is queued. */
SAGA_API saga_status saga_net_forward_rows_queue(saga_net *n, const int32_t *vertices,
                                                 int64_t count);
SAGA_API saga_status saga_net_forward_rows_take(saga_net *n, float *out);
/* One training pass: forward with dropout, the loss, backward; the parameters' gradients are
 * added to (the caller's optimizer steps them). *loss = the sum of the blocks' losses. It waits
 * for the device; saga_net_train_queue (below) does not. */
SAGA_API saga_status saga_net_train_step(saga_net *n, double *loss);

/* PageRank of the net's graph in f64 through the same blocks (in memory or streamed): damping
 * d in [0, 1), teleport and the rank of vertices without out-edges spread uniformly, from 1/n,
 * until the L1 change of an iteration is below tol or max_iter iterations ran. rank (n entries,
 * by the graph's ids) gets the ranks; *iterations and *l1 (may be NULL) what ran. A net used for
 * PageRank has no stages. Errors: SAGA_ERR_INVALID_ARG for arguments out of range, those of the
 * budget as for the other runs. */
SAGA_API saga_status saga_net_pagerank(saga_net *n, double damping, double tol, int max_iter,
                                       double *rank, int *iterations, double *l1);

/* What the net runs, as a table: how it is placed (in memory, or streamed in parts with the
 * host-to-device floor of a pass), and per stage its kind, widths, the rows a training pass and the
 * last saga_net_forward_rows compute (of n), the edges a training pass reads, and where its input
 * lives. Prepares the net (and its training plan) when it is not yet. */
SAGA_API saga_status saga_net_explain(saga_net *n, FILE *f);

/* The stages whose rows saga_net_stats lists one by one. */
enum { SAGA_NET_STAGE_ROWS = 16 };

typedef struct saga_net_stats {
    bool streamed;
    int32_t parts;
    uint64_t h2d_bytes, d2h_bytes; /* moved by the last call */
    size_t peak_device_bytes;      /* the backend's peak during the last call; after a pass
                                    * over a sample, the pass's own: its peak above what was
                                    * held before it, its input rows counted at their size
                                    * (not the slots kept for them from sample to sample) */
    size_t budget_bytes;
    double copy_seconds;    /* time the copies took: the copy stream's, timed by events on a
                             * GPU, the copy worker's on the CPU (0 where neither tells) */
    double wait_seconds;    /* of which the compute side waited for (on a GPU: the compute
                             * stream's time between reaching a step's waits and passing them) */
    double overlap;         /* share of copy time hidden behind compute: 1 - wait / copy */
    double seconds;         /* the last call */
    double prepare_seconds; /* of which partitioning and building the blocks (first call) */
    int64_t halo_rows;      /* rows read by all blocks of one program stage (n in memory) */
    bool sparse_input;      /* the input is a CSR (saga_net_set_input_csr) */
    bool input_packed;      /* ... made from dense rows by saga_net_set_input_auto */
    size_t input_bytes;     /* the input's blocks on the device: dense rows, or the CSR's
                             * offsets, indices and values (what one pass moves, streamed) */
    int64_t edge_cut;       /* of the partition (0 in memory) */
    double partition_seconds;
    /* several ranks: their number; bytes this rank sent to and received from the others in the
     * last call (halo rows, gradients, losses, outputs); the time it spent exchanging, and the
     * share of it hidden behind compute (the forward halos of a rank's second and later parts
     * travel while the earlier parts compute); the rows it received in forward exchanges */
    int32_t ranks;
    uint64_t comm_sent_bytes, comm_recv_bytes;
    double comm_seconds;
    double comm_hidden;
    int64_t remote_rows;
    /* saga_net_pagerank: the iterations alone (the start vector, and in memory the graph's
     * first load, before them; the download of the ranks after) */
    double iterate_seconds;
    /* streamed: device bytes held by stages whose input stays whole on the device (their halos
     * are gathered there, not copied: saga_net_opts.host_halos) */
    uint64_t resident_bytes;
    /* what a streamed schedule that keeps nothing on the device from one pass to the next
     * moves host -> device at least in the last call: the input rows and each program stage's
     * graph tiles once per pass (forward; training, forward and backward), where a training
     * pass that runs its later stages on the rows the loss reads alone (saga_net_set_loss_rows)
     * counts those stages' tiles of those rows, and their input rows from the host, once instead
     * (and the input of the rows the first stages then compute, where they compute fewer); an
     * inference of chosen rows (saga_net_forward_rows) counts the input and tiles that its parts
     * and its slices of the stages needing fewer than every row read. A schedule whose blocks
     * stay resident across passes (a budget near the footprint) moves less. */
    uint64_t h2d_floor_bytes;
    /* rows the stages computed in the last call (forward; this rank's), summed over the stages
     * (n times the stage count when every stage ran every row), and per stage for the first
     * SAGA_NET_STAGE_ROWS stages (stages: how many there are) */
    int64_t rows_computed;
    int32_t stages;
    int64_t stage_rows[SAGA_NET_STAGE_ROWS];
    /* streamed on the CPU with the kernels on every core: the copies ran in order with the
     * kernels, on the compute's stream (a copy worker would have taken a core from them), so
     * overlap is 0 */
    bool copies_inline;
    /* of copy_seconds, the host -> device copies' on a GPU (timed by events; 0 on the CPU,
     * whose copy time is one sum): h2d_bytes / h2d_seconds is the bandwidth the copies had */
    double h2d_seconds;
    /* the last call's work went to the device as one recorded graph (saga_net_opts.graphs) */
    bool graph;
} saga_net_stats;

SAGA_API void saga_net_get_stats(const saga_net *n, saga_net_stats *s);
/* saga_net_train_step without its wait for the device: the pass is queued (on one rank; with
 * several it waits as saga_net_train_step does, for their exchanges do), the optimizer's step and
 * further passes queue behind it, and saga_net_train_result reads its loss and figures. A pass
 * that waits (an inference, whose outputs the host reads) covers the queued one, so that an
 * epoch of a training pass and an evaluation waits once:
 *
 *   SAGA_TRY(saga_net_train_queue(net));
 *   SAGA_TRY(saga_optim_step(opt));
 *   SAGA_TRY(saga_net_forward_rows(net, rows, count, out));   // waits
 *   SAGA_TRY(saga_net_train_result(net, &loss, &stats));      // does not
 *
 * An error the device finds in the queued pass (a label out of range in a loss) is reported by
 * the call that waits for it. */
SAGA_API saga_status saga_net_train_queue(saga_net *n);
/* The loss and figures (may be NULL) of the last training pass, waiting for it when it is queued
 * and no pass has waited since (a queued pass's seconds are the time it took to queue; in memory
 * the wait is for the pass's end, not the device's, and when an inference was queued after it
 * its figures are those known when it was queued). */
SAGA_API saga_status saga_net_train_result(saga_net *n, double *loss, saga_net_stats *stats);
/* For messages: "in memory", "streamed, 16 parts (metis)", or with ranks "rank 0 of 4, parts
 * 0-1 of 8 (metis), in memory". */
SAGA_API const char *saga_net_describe(const saga_net *n);

#ifdef __cplusplus
}
#endif
