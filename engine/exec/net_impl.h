/* net_impl.h - what the files of the graph-network executor (saga_net.h) share: its stages, the
 * row copies, the batch plans, the blocks of destinations with their halos, struct saga_net; and
 * the functions net_build.c (building and preparing), net_run.c (planning and running the steps)
 * and net_pagerank.c call across them. Internal to saga. */
#pragma once

#include "saga_net.h"

#include "program_impl.h"
#include "saga_log.h"
#include "sched_impl.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum stage_kind { STAGE_VERTEX = 0, STAGE_PROGRAM } stage_kind;

typedef struct stage {
    stage_kind kind;
    saga_program p; /* STAGE_PROGRAM */
    saga_apply_vertex_fn fn;
    void *layer;
    int64_t in_cols, out_cols;
    uint64_t rng;    /* the dropout counter when the stage's forward pass began */
    bool dense_rows; /* STAGE_VERTEX: its function needs v->self (saga_net_set_dense_rows) */
} stage;

/* Rows that the host gathers from an array into a buffer (net_rows_pack): src[rows[i]]. */
typedef struct rows_io {
    const float *src;
    const int32_t *rows; /* NULL: the contiguous rows first .. first + n - 1 */
    int32_t first;
    int32_t n;
    int64_t cols;
    saga_transfer half; /* the buffer holds 16-bit floats */
} rows_io;

/* A batch plan of one block for one max_batch_edges. */
typedef struct bplan {
    int64_t max_edges;
    int64_t n_batches;
    int32_t *v0;    /* host, local destinations */
    int64_t *h_off; /* host, P + n_batches (NULL when one batch: the block's offsets serve) */
    saga_blk *b_off;
} bplan;

enum { N_KEYS = SAGA_WEIGHT_COUNT * 2 };

/* The destinations of one part with their in-edges and the rows those read (the halo). The
 * arrays the scheduler loads (off, src, edst, self_pos, toff, tdst, vout and the plans' h_off)
 * come from saga_backend_host_alloc, for the reasons the stages' host arrays do (struct
 * saga_net), and are freed with the sizes block_free recomputes; halo and tperm are read on the
 * host only. */
typedef struct nblock {
    int32_t v0, v1;
    int64_t e0, e1;
    int32_t n_halo;
    int32_t *halo;     /* sorted ids, the block's own rows included; NULL: every vertex */
    int32_t *self_pos; /* P: where row v0 + i sits in the halo (NULL with every vertex) */
    int64_t *off;      /* P + 1, from 0 */
    int32_t *src;      /* m_b: halo index of each edge's source */
    int32_t *edst;     /* m_b: local destination of each edge */
    int64_t *toff;     /* n_halo + 1: the transpose */
    int32_t *tdst;     /* m_b */
    int64_t *tperm;    /* m_b: transposed position -> block edge */
    /* a block of chosen rows (a chain's, net_rows_block), which are not a range: each entry's
     * index in the placed in-CSR; NULL for the parts, whose entries are e0 .. e1 - 1 */
    int64_t *epos;
    int32_t *reids; /* and for a batched stage, each entry's edge id for edge dropout (host) */
    /* the block's own host copies of its tile weights (m_b), in the net's transfer precision
     * (16-bit ones are widened by the steps on the device): vout_h in the transposed order,
     * vin_h only for 16-bit transfers (in f32 the block reads the net's vals in place) */
    void *vin_h[N_KEYS], *vout_h[N_KEYS];
    saga_blk *b_off, *b_src, *b_edst, *b_toff, *b_tdst, *b_self;
    saga_blk *b_ids, *b_eids; /* streamed: the graph's ids of the rows, the edges' indices */
    saga_blk *b_vin[N_KEYS], *b_vout[N_KEYS];
    /* the loss rows (saga_net_set_loss_rows) among a part's rows, for its loss step: their
     * indices in the part (lsel) and graph ids (lsel_ids), n_lsel of them; NULL until the first
     * loss step builds every part's */
    int32_t *lsel, *lsel_ids;
    int32_t n_lsel;
    int32_t *uids;    /* a block of chosen rows: the rows' graph ids (pinned, P; b_ids is their
                       * block) */
    int32_t *kids;    /* over shards with row ids (net_halo.keys): the rows' keys, which b_ids
                       * then holds instead (pinned, P) */
    int32_t *hids;    /* resident stages: the halo's ids (pinned, n_halo), and their block */
    saga_blk *b_hids; /* (NULL when no stage is resident) */
    bplan *plans;
    int n_plans;
    /* sparse input: the block's rows as a CSR (offsets from 0); the net's own arrays in memory,
     * else copies in the parts' order (x_own) */
    int64_t x_nnz;
    int64_t *xoff;
    int32_t *xidx;
    float *xval;
    bool x_own;
    saga_blk *b_xoff, *b_xidx, *b_xval;
    /* input rows picked by row (a head's block, or a chain's): their ids
     * in the net's order (not owned), and their dense rows in b_xrows: a later stage's gathered
     * from its host rows by the backend at each load, the net's input packed once (xio) into
     * xrows_h (pinned, xrows_bytes; net_block_input_changed packs it again when the input
     * changes) */
    const int32_t *rows;
    rows_io xio;
    saga_blk *b_xrows;
    void *xrows_h;
    size_t xrows_bytes;
} nblock;

/* PageRank's state (net_pagerank.c). */
struct pr_state;

/* A net over several ranks' shards (net_halo.c, saga_net_opts.halo): the halo's layout, and
 * what the exchanges of its rows need on the device. */
typedef struct net_halo {
    saga_comm *comm;  /* the ranks (the option's) */
    saga_comm *dcomm; /* for device memory: NCCL on CUDA, comm itself on the CPU */
    int rank, size;
    int32_t n_own, n_local;
    int64_t *recv_off, *send_off; /* size + 1 rows each */
    int32_t *send_rows;           /* send_off[size] (the exchanges' plans pick from them) */
    int32_t *d_own;               /* 0 .. n_own - 1, device: the rows the loss sees */
    int32_t *keys;       /* n_local: the rows dropout draws masks by (o.halo->row_ids), or NULL */
    int32_t *d_keys;     /* the same on the device */
    int64_t *deg_off;    /* n_local + 1: offsets whose steps are SYMNORM's out-degrees, or NULL */
    size_t *cnt;         /* 4 x size: byte counts and offsets of one all-to-all */
    double *vals;        /* send_off[size] values of net_halo_rows_f64, made at its first call */
    uint64_t rows_moved; /* halo rows received in the current call (forward) */
    double seconds;      /* in exchanges and the reductions, the current call */
} net_halo;

/* The exchange before one program stage of a chain over shards (net_halo.c): the halo rows its
 * rows read, from their owners, and the own rows the other ranks' read, to them; each located in
 * the stage's input, whose rows are the previous stage's (n_h of them). */
typedef struct net_xplan {
    int64_t *recv_off, *send_off; /* size + 1 rows each */
    int32_t *recv_ids;            /* halo rows received (local ids, by owner, ascending) */
    int32_t *send_ids;            /* own rows sent (local ids, per peer in the peer's order) */
    int64_t n_h;
    /* the received rows follow the n_h of the input (the previous stage computed chosen rows,
     * never the halo's), or take their places among them (it computed every local row) */
    bool append;
    /* device, one allocation: the sent rows' positions (n_send), the received rows' (n_recv),
     * then the forward gather (n_h: k, or n_h + j for the j-th received row) and the backward's
     * (n_h: k, or n_h, a zero row, where a row was received) */
    int32_t *d_idx;
    size_t d_bytes;
} net_xplan;

/* A net over several ranks (net_dist.c). */
typedef struct net_dist {
    saga_comm *comm; /* the net's (o.comm) */
    int rank, size;
    int32_t *first; /* size + 1: rank q owns parts [first[q], first[q + 1]) */
    int32_t *row0;  /* size + 1: and rows [row0[q], row0[q + 1]) in the net's order */
    /* the rows of others that this rank's blocks read (recv_rows, increasing, so grouped by
     * owner: recv_n[q] from rank q at recv_at[q]), and the rows of this rank that the others'
     * blocks read (send_rows, send_n[q] for rank q at send_at[q]) */
    int32_t *recv_rows, *send_rows;
    size_t n_recv, n_send;
    size_t *cnt; /* the arrays below, 8 x size */
    size_t *recv_n, *recv_at, *send_n, *send_at;
    size_t *sb, *so, *rb, *ro; /* byte counts and offsets of one all-to-all */
    float *sbuf, *rbuf;
    size_t buf_floats;
    uint64_t rows_moved; /* rows received by net_dist_rows in the current call */
    double seconds;      /* in exchanges, the current call */
    /* The forward exchange in chunks, one per position j of a rank's own blocks (n_chunks: the
     * most blocks any rank has): chunk j brings the remote rows of this rank's j-th block that
     * no earlier chunk brought, and sends the rows of this rank that each peer's j-th block
     * reads first. Chunk 0 is exchanged before the stage's first block; a thread exchanges the
     * others while the blocks compute, and the packing of block j's halo waits for chunk j.
     * Rows are listed chunk-major, then by peer: (j, q) at c_recv_at / c_send_at[j * size + q]
     * with c_recv_n / c_send_n of them. */
    int32_t n_chunks;
    int32_t *c_recv_rows, *c_send_rows;
    size_t *c_cnt; /* the four arrays below, n_chunks x size each */
    size_t *c_recv_n, *c_recv_at, *c_send_n, *c_send_at;
    struct net_pack *packs; /* per stage and own block: the halo's pack, waiting for its chunk */
    void *lock, *cond;      /* pthread mutex and condition for the chunks' progress */
    bool thread_on;
    uint64_t thread; /* pthread_t */
    float *t_host;   /* what the thread exchanges: the input rows of stage t_stage */
    int64_t t_cols;
    int t_stage;         /* the stage whose chunks are under way or last exchanged */
    int32_t t_done;      /* of its chunks, those that have arrived */
    saga_status t_st;    /* the thread's first error */
    char t_msg[256];     /* and its message */
    bool *stage_done;    /* per stage: its chunks all arrived in this call */
    double t_seconds;    /* the thread's time in exchanges, this call */
    double wait_seconds; /* packs' time waiting for chunks, this call */
} net_dist;

/* More parts than this, chosen from the budget, make a slow partitioning and many small steps:
 * net_prepare warns and names a budget that needs fewer; PageRank logs its progress. */
enum { NET_MANY_PARTS = 256 };
/* A streamed training chain's start (chain_start in net_build.c) keeps its input whole on the
 * device first, before the other resident stages, when that and the chain's estimated blocks
 * leave the parts' steps at least 1/NET_PARTS_SHARE of what the budget leaves */
enum { NET_PARTS_SHARE = 8 };
/* METIS's refinement passes per level for the parts of a streamed run: 2 instead of METIS's 10
 * takes about half the time for a cut within 1% (a 200k-vertex citation graph, Slashdot,
 * ca-GrQc at 8 and 64 parts) */
enum { NET_METIS_REFINE = 2 };

/* A prepared net's plan: what net_prepare's passes decided, which the steps read. Pass 1, the
 * demand (net_demand.h), lives in the chains it builds; the others write here in order. */
typedef struct net_plan {
    /* pass 2, the parts: how many (k, 1 in memory), METIS's or the ranges' partition, the rows
     * renumbered by part, and the parts this rank runs */
    bool streamed;
    bool many_parts; /* the budget asked for more than NET_MANY_PARTS: warned, progress logged */
    int32_t k;
    saga_partition *part; /* NULL in memory */
    int32_t *ids;         /* net row -> graph id (NULL: the same); host-allocated, n entries */
    int32_t d_lo, d_hi;   /* [d_lo, d_hi): this rank's parts (all of them with one rank) */
    /* pass 3, placement: what the input blocks hold (o.transfer streamed, else f32); the
     * resident stages (streamed, one rank): resident[s] when program stage s's input, n x
     * in_cols, is small enough to stay on the device whole (saga_net.full[s]) while the parts
     * stream: the stage before writes each part's rows into it, each part's halo is gathered
     * from it on the device (halo[s][d] is then a scratch block), and the backward pass adds
     * each part's halo gradient into gfull[s], which the stage before reads its rows' gradients
     * from; no halo row or halo gradient crosses to the host (S + 1 entries, NULL when none).
     * Streamed, the parts train the stages below parts_below, the training chain the others. */
    saga_transfer transfer;
    bool *resident;
    int parts_below;
    /* the device bytes the chains' blocks and tensors may take (in memory what the budget leaves
     * beside the whole block's step, streamed beside the resident stages, which a streamed
     * training chain counts itself from step_room; SIZE_MAX without a budget) */
    size_t chain_room;
    /* what the budget leaves a step's blocks and tensors together (streamed; 0 without a
     * budget): a step whose tensors are fewer than the largest step's may hold more blocks than
     * the scheduler's cap (saga_sched_step_cap) */
    size_t step_room;
    /* pass 4, the steps and their blocks: one block per part (blk, k of them) */
    nblock *blk;
    size_t chain_est_bytes; /* what a chain from chain_start holds, estimated once (0: not yet) */
    /* on one rank: the chains (net_chain.h) of training, from the loss rows (every row without
     * them; streamed, only one that fits from the first stage), and of the last inference of
     * chosen rows (saga_net_forward_rows) */
    struct net_chain *tchain, *echain;
    bool tchain_none; /* streamed: training's chain was built and did not fit (net_chain_for) */
    /* one pass's share of saga_net_stats.h2d_floor_bytes: the input rows and every program
     * stage's tiles (offsets, sources, edge values) once; a training pass's, twice that, or with
     * a training chain what its parts, its head and its step move (net_chain_for) */
    uint64_t floor_pass_bytes;
    uint64_t floor_train_bytes;
} net_plan;

struct saga_net {
    saga_ctx *c;
    saga_backend *be;
    /* what the net owns for its stages and loss (net_keep), freed with it */
    struct net_kept *kept;
    int n_kept, cap_kept;
    const saga_graph *g_user;
    saga_net_opts o;
    int32_t n;
    stage *stages;
    int n_stages, cap_stages;
    saga_net_loss_fn loss;
    void *loss_user;
    int32_t *loss_rows; /* saga_net_set_loss_rows: increasing graph ids, or NULL */
    int32_t n_loss_rows;
    /* a training pass's losses, one per loss step, copied into pinned host memory in stream
     * order as the steps return them and added up after the pass's one wait */
    float *loss_host;
    size_t loss_bytes;
    int32_t loss_used;
    /* saga_net_train_queue: a training pass queued whose end the host has not waited for
     * (net_settle), begun at queued_t0; the last training pass's loss, and its figures (the timed
     * ones complete once it has ended) */
    bool queued;
    /* saga_net_train_sample is in its loss: the library's losses take the mean over the batch,
     * whose seeds over every rank are sample_seeds */
    bool sampling;
    int64_t sample_seeds;
    int32_t *sample_pos; /* graph id -> the input's host row once plan.ids reorders it, or NULL */
    /* A sample's input rows on the device (net_sample.c): two slots used in turn by the passes
     * over samples (smp_serial counts them), each filled from the context's staging on smp_copy
     * (NULL where copies run in order with the kernels: the CPU's default stream) while the pass
     * before may still run; smp_ready[k] is recorded after slot k's copy, smp_done[k] after the
     * pass that read it (smp_done_rec[k]: recorded since the slot was made). */
    void *smp_in[2];
    size_t smp_in_bytes[2];
    saga_event *smp_ready[2], *smp_done[2];
    bool smp_done_rec[2];
    saga_stream *smp_copy;
    uint64_t smp_serial;
    size_t smp_input_bytes; /* the input rows of the last pass over a sample */
    /* saga_net_train_sample_queue: the losses of the passes queued and not yet taken, in order
     * (entries smp_q_head .. smp_q_tail - 1, modulo SAGA_NET_SAMPLES_QUEUED): a value known on the
     * host (smp_q_val), or one the device copies into smp_loss_host[i], smp_loss_ev[i] after it */
    uint64_t smp_q_head, smp_q_tail;
    double smp_q_val[SAGA_NET_SAMPLES_QUEUED];
    bool smp_q_dev[SAGA_NET_SAMPLES_QUEUED];
    float *smp_loss_host;
    saga_event *smp_loss_ev[SAGA_NET_SAMPLES_QUEUED];
    double queued_t0;
    /* A pass that takes a step over the budget on a plan the net chose itself (one rank, the
     * parts left to it, a budget; net_run.c: net_replan) runs again on a plan made for
     * work_scale (from 1, doubled each time) times the tensors the stages' estimated work
     * (step_estimate); replan says the last pass failed so, after putting back what it changed.
     * Until a training pass has run on a plan (proven), a training pass keeps the model's
     * gradients as they were when it began in host memory (grad_keep, grads_kept). */
    double work_scale;
    bool replan, proven, grads_kept;
    /* A pass queued in memory on one rank ends at an event recorded on the default stream after
     * it (its losses and outputs are copied back on that stream): the training pass's (train_ev,
     * when train_ev_ok; issued_since: a pass was issued after it, whose run reset the backend's
     * figures) and an inference of chosen rows's (rows_ev, rows_queued; run queues one when
     * rows_queue_req). The rows asked for by the last inference of chosen rows, rows_count of
     * them, are rows rows_pos[i] of rows_out once it has ended (rows_ready until taken). */
    saga_event *train_ev, *rows_ev;
    bool train_ev_ok, issued_since, rows_queue_req, rows_queued, rows_ready;
    int64_t *rows_pos;
    int64_t rows_count;
    void *grad_keep;
    size_t grad_keep_bytes;
    double train_loss;
    saga_net_stats train_stats;
    /* saga_net_opts.graphs: per kind of pass (inference, training) its graph, and of the last
     * such pass the chain it ran (its serial: a chain rebuilt for other rows is another), the
     * bytes it staged for upload and whether it allocated nothing (steady: a pass on the same
     * chain may be recorded) */
    saga_replay *replay[2];
    uint64_t chains, steady_ch[2]; /* chains built; the serial of the last pass's (0: none) */
    size_t staged[2];
    bool steady[2];
    /* saga_net_forward_rows: a chain's output rows, copied back into pinned memory */
    float *rows_out;
    size_t rows_out_bytes;
    /* Which OpenMP idle policy a streamed pass on the CPU runs under (saga_idle_tuner), timed
     * over the inference (0) and the training (1) passes: many short steps, each opening parallel
     * regions. Training decides once the net trains; saga_net_free puts the sleeping threads back
     */
    saga_idle_tuner tune[2];
    float *x; /* user input in the net's order (n x in_cols) */
    int64_t in_cols;
    bool x_changed;
    /* x is in the parts' order (prep_blocks moved its rows by plan.ids), which dropping the plan
     * undoes (unprepare) through two rows of room kept for it (x_room, 2 in_cols floats) */
    bool x_placed;
    float *x_room;
    /* sparse input (saga_net_set_input_csr): a CSR in the graph's order, host-allocated with one
     * entry more than needed so that no array is empty; the blocks hold it in the net's order */
    bool sparse;
    bool packed; /* ... made from dense rows (saga_net_set_input_auto) */
    int64_t x_nnz;
    int64_t *xs_off;
    int32_t *xs_idx;
    float *xs_val;
    bool pagerank; /* prepared for saga_net_pagerank: no stages, f64 vertex values */
    struct pr_state *pr;
    void (*pr_free)(saga_net *n); /* frees pr (set with it by net_pagerank.c) */

    /* prepared */
    bool ready;
    net_plan plan;
    int32_t *iota;  /* 0 .. n-1: the ids the loss sees when rows are in the graph's order */
    int64_t *h_off; /* the placed in-CSR in the net's order */
    int32_t *h_src;
    float *h_w;
    int64_t *out_off; /* sources' out-degrees as offsets; NULL where a halo gives them */
    int64_t m;
    /* per (weight mode, mean): edge values in in-CSR order; host-allocated, edge_bytes */
    float *vals[N_KEYS];
    int32_t *eids; /* streamed: each edge's index in the in-memory edge order (edge_bytes) */
    saga_sched *sched;
    /* per stage s = 0..S and block: act[s] is stage s's input (act[S] the output). The host
     * arrays come from saga_backend_host_alloc (host_rows_bytes each): the scheduler copies to
     * and from them on its copy stream, which on CUDA overlaps only with pinned memory, and
     * loads some of them after host functions on that stream have written them, which a copy
     * from pageable memory (staged when issued) would not wait for */
    float **act_host;  /* S + 1 (act_host[0] = x) */
    float **grad_host; /* S + 1 (k > 1; [0] unused) */
    float **saved_host;
    saga_blk ***act, ***halo, ***grad, ***gin, ***ghalo, ***saved;
    /* the input in the transfer precision when it crosses in 16 bits (n x in_cols halves, host
     * memory from the backend): made from x when x changes, then copied and gathered from as it
     * lies */
    uint16_t *x16;
    /* the whole inputs (full[s]) and gradients (gfull[s]) of the resident stages (plan.resident),
     * S + 1 entries each, NULL when none */
    saga_blk **full, **gfull;

    net_dist *dist; /* several ranks; NULL with one */
    net_halo *hx;   /* several ranks over shards (o.halo); NULL otherwise */
    saga_model *model;
    bool model_agreed; /* over ranks: the first training pass found the model set on every rank */
    saga_comm *dcomm;  /* for the model's gradients on the device (NCCL on CUDA), made at the
                        * first training step */
    saga_comm_stats comm_at, dcomm_at; /* the communicators' counters when the call began */

    saga_net_stats stats;
    char desc[128];
};

/* qsort's and bsearch's order of int32_t ids. */
static inline int net_cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* ---- net_block.c -------------------------------------------------------------------------- */

/* An array of count entries of size bytes from the backend's host allocator (pinned on CUDA):
 * the host side of a scheduler block, which its copy stream reads asynchronously. */
saga_status net_host_array(saga_net *n, void **out, size_t count, size_t size, const char *what);

/* PageRank's vertex orders (SAGA_ORDER_DEGREE, SAGA_ORDER_OUT_DEGREE): the count vertices vs
 * (NULL: 0 .. count - 1; in increasing order) into ids (which may be vs), by out-degree, highest
 * first, ties in g's order; with by_in_group, then grouped by in-degree, stably, the longest rows
 * first: each in-degree up to 32 a group, then one per power of two (33-63, 64-127, ...). In
 * memory every row is ordered, over shards a rank's own rows, streamed each part's. */
saga_status net_degree_order(const saga_graph *g, bool by_in_group, const int32_t *vs,
                             int32_t count, int32_t *ids);
/* Bytes of a host array of one 4-byte value per edge (one more when there are none). */
size_t net_edge_bytes(int64_t m);
/* Device bytes a program stage's messages take over m edges: a batched stage's source and
 * destination rows and its messages for at most one batch of them; none for a fused one. */
size_t net_message_bytes(const stage *sg, int64_t m);
/* Gathers the rows of a rows_io from its host array into a buffer (converting them when it holds
 * 16-bit floats): once for rows of the input, or as a scheduler block's pack function. */
void net_rows_pack(void *user, void *staging);
/* The key of vals, vout, b_vin and b_vout for an edge weight and (fused) mean. */
int net_key_of(saga_edge_weight w, bool mean);
/* That key for program stage sg. */
int net_stage_key(const stage *sg);
/* Block b's batch plan for max_edges, or NULL when none was made. */
bplan *net_plan_of(const nblock *b, int64_t max_edges);
/* A scheduler block of bytes whose content is host (SAGA_BLK_INPUT); NULL when out of memory. */
saga_blk *net_input_block(saga_net *n, void *host, size_t bytes, const char *kind);
/* Block b's own copy of its rows of the sparse input (b->rows, or v0 .. v1 - 1). */
void net_sparse_fill_block(const saga_net *n, nblock *b);
/* Block b's host arrays over the rows v0 .. v1 - 1 (a part): over every vertex (whole), else
 * with its halo; pos is n entries of -1 (restored). */
saga_status net_block_build(saga_net *n, nblock *b, int32_t v0, int32_t v1, bool whole,
                            int32_t *pos);
/* The device blocks of block b that stage s needs (the transpose for a fused stage's backward
 * pass, a batch plan for a batched one), made once. */
saga_status net_block_blocks(saga_net *n, nblock *b, const stage *s);
/* The halo of R rows (increasing) over the in-CSR off/src of N vertices and their in-edge count
 * *m: with their own halo (own) the rows and their sources, pos[v] the index of halo vertex v
 * and -1 elsewhere, *n_halo of them; else every vertex, pos[v] 0 for the rows. */
void net_rows_halo(const int64_t *off, const int32_t *src, int32_t N, const int32_t *rows,
                   int32_t R, bool own, int32_t *pos, int64_t *m, int32_t *n_halo);
/* What net_rows_block's block holds on the device, and streamed its step's tensors. */
size_t net_rows_block_bytes(int32_t R, int64_t m, int32_t NH, bool own, bool ids, bool streamed,
                            int32_t g_rows, int64_t cols, int64_t out);
/* A block (*out, allocated) of R rows (increasing, the net's order) with their in-edges for
 * program stage sg, over the halo net_rows_halo gave (pos, m, NH): own, with the rows' graph ids
 * (ids) for dropout; else over every vertex. */
saga_status net_rows_block(saga_net *n, nblock **out, const int32_t *rows, int32_t R, bool own,
                           bool ids, const int32_t *pos, int64_t m, int32_t NH, const stage *sg);
/* Block b's rows: the P rows listed (not copied; the net's order; NULL: the first P) and their
 * graph ids (uids, and b_ids their block), for dropout and the loss. */
saga_status net_rows_ids(saga_net *n, nblock *b, const int32_t *rows, int32_t P);
/* Block b's rows (net_rows_ids) with their rows of stage s's input: stage 0's (s <= 0) as a CSR
 * (filled by net_sparse_fill_block) or dense rows in the transfer precision, a later stage's as
 * f32 rows; dense rows are packed from the host array (n->x, act_host[s]) as the block loads
 * (b_xrows). */
saga_status net_rows_input(saga_net *n, nblock *b, const int32_t *rows, int32_t P, int s);
/* The slice of R increasing rows (the net's order) within part block pb's rows: from *r (the
 * first row not below an earlier part's), which moves past them; returns the slice's start. */
int32_t net_rows_in_part(const nblock *pb, const int32_t *rows, int32_t R, int32_t *r);
/* The head blocks (*out, k of them, those of this rank's parts filled) over R rows (increasing,
 * the net's order): part d's holds the slice of rows within its rows, at positions v0 .. v1 - 1
 * of the list, with their graph ids and their rows of the net's input (net_rows_input; a sparse
 * input filled); a part with none has v0 == v1 and no blocks. Errors: out of memory. */
saga_status net_head_blocks(saga_net *n, const int32_t *rows, int32_t R, nblock **out);
/* The bytes block b's input rows move once: the CSR's three blocks of a sparse input, else its
 * dense rows (the block rows). */
size_t net_block_input_bytes(const saga_net *n, const nblock *b, const saga_blk *rows);
/* The bytes block b's graph tiles for a program stage with edge-value key `key` move once: its
 * offsets, sources and edge values. */
uint64_t net_tile_bytes(const nblock *b, int key);
/* What the parts' steps of stages 0 .. s_end - 1 move host -> device at least: their input rows
 * and their program stages' graph tiles, once each. */
uint64_t net_parts_floor(const saga_net *n, int s_end);
/* The input changed: block b's packed copy of the net's input rows (if it has one) packed again,
 * and its device copies of the sparse input and of rows (its input rows' block, or NULL) reloaded
 * at their next use. */
void net_block_input_changed(nblock *b, saga_blk *rows);
/* Frees block b's arrays (not its scheduler blocks, which go with the scheduler). */
void net_block_free(saga_net *n, nblock *b);

/* ---- net_build.c -------------------------------------------------------------------------- */

/* Places the graph, in memory or cut into parts under the budget, and makes the scheduler and
 * its blocks; nothing once prepared. */
saga_status net_prepare(saga_net *n, bool train);
/* Drops the plan (parts, blocks, scheduler): the next pass prepares again. */
void net_unprepare(saga_net *n);

/* Copies the sparse input's rows into the blocks that keep them in the parts' order. */
void net_sparse_fill(saga_net *n);

/* ---- net_stats.c -------------------------------------------------------------------------- */

/* The end of a training pass saga_net_train_queue left queued: waits for the device unless
 * waited (a later pass's wait covered it), then its loss and timed figures; nothing when none is
 * queued. Before anything changes host memory such a pass may still read or write. */
/* The end of a queued inference of chosen rows (its rows stay to be taken): before the host
 * changes memory it may read or write. */
saga_status net_rows_settle(saga_net *n);
/* net_sample.c: gives back the device slots of samples' input rows (their frees ordered after
 * the passes that use them), before a pass over the graph plans its memory; and frees all the
 * net's sample state, after the device has passed it. */
void net_sample_release(saga_net *n);
void net_sample_free(saga_net *n);
saga_status net_settle(saga_net *n, bool waited);
/* The sum of the last training pass's losses (their host copies). */
double net_losses_sum(const saga_net *n);

/* The last call's figures from the backend's and the scheduler's counters. */
void net_collect_stats(saga_net *n, double t0);
/* The copy and wait figures of st from the scheduler's (timed or not), and their overlap. */
void net_stats_timed(saga_net_stats *st, const saga_sched_stats *ss);

/* ---- several ranks (net_dist.c) ----------------------------------------------------------- */

/* n->dist for n->o.comm (called when it has more than one rank). */
saga_status net_dist_new(saga_net *n);
void net_dist_free(saga_net *n);

/* net_halo.c: ranks over shards. net_halo_new copies o.halo (checked) into n->hx. */
saga_status net_halo_new(saga_net *n);
void net_halo_free(saga_net *n);
/* The demand hook over shards (net_demand_hook; collective over the ranks): at program stage s,
 * the halo rows the own rows of want read are asked of their owners, and the own rows the others
 * ask for are added to next; *xp (made) records both. */
saga_status net_halo_demand(saga_net *n, net_xplan **xp, int s, const uint8_t *want, uint8_t *next);
/* Locates xp's rows in a stage input of the rows prev (n_prev of them, increasing; NULL: every
 * local row) and loads the positions on the device. */
saga_status net_xplan_place(saga_net *n, net_xplan *xp, const int32_t *prev, int64_t n_prev);
void net_xplan_free(saga_net *n, net_xplan **xp);
/* x (a program stage's input: xp->n_h rows) with the halo rows xp receives after its rows
 * (xp->append: n_h + received rows) or in their places, recorded on the tape when training
 * (backward: those rows' gradients go back to their owners, added there rank by rank). NULL with
 * the error in the context. */
saga_tensor *net_halo_exchange(saga_net *n, saga_tensor *x, const net_xplan *xp);
/* v (one value per local row, host): the halo rows' values from their owners, which get the own
 * rows the others' halos list (collective over the ranks; PageRank's contributions). */
saga_status net_halo_rows_f64(saga_net *n, double *v);
/* The own rows renumbered (row i is the local graph's ids[i]; the halo rows stay): the rows sent
 * to the others and the whole graph's out-degrees follow them, from saga_net_opts.halo. */
saga_status net_halo_reorder(saga_net *n, const int32_t *ids);
/* The communicator of the net's ranks (o.comm, or the shards'), NULL with one rank. */
saga_comm *net_ranks_comm(const saga_net *n);
/* SAGA_ERR_COMM unless every rank holds the same graph and input rows and computed the same
 * parts. */
saga_status net_dist_agree_partition(saga_net *n);
/* Deals the k parts (placed: n->h_off) to the ranks: n->plan.d_lo, n->plan.d_hi and dist->first,
 * row0. */
saga_status net_dist_deal(saga_net *n);
/* The rows to receive and to send, from the halos of this rank's blocks (collective). */
saga_status net_dist_halo(saga_net *n);
/* The rows of host (n x cols floats) that this rank reads from others, from their owners, in one
 * exchange (PageRank's contributions; the network's stages use the chunks below). */
saga_status net_dist_rows(saga_net *n, float *host, int64_t cols);
/* Backward: what this rank added into others' rows of host goes to their owners, who add it
 * into theirs. */
saga_status net_dist_grads(saga_net *n, float *host, int64_t cols);
/* Every rank's own rows of host (n rows of row_bytes) to every rank. */
saga_status net_dist_gather(saga_net *n, void *host, size_t row_bytes);
/* Forward, before program stage s's first block: chunk 0 of the rows of host (its input, cols
 * floats a row) now, the others on a thread while the blocks compute. */
saga_status net_dist_rows_start(saga_net *n, int s, float *host, int64_t cols);
/* Waits for the thread's chunks (before anything else uses the communicator); its error. */
saga_status net_dist_wait(saga_net *n);
/* Makes block d's halo pack of program stage s wait for its chunk (after stage_blocks). */
saga_status net_dist_packs(saga_net *n);
/* A new call: no stage's chunks have arrived. */
void net_dist_reset(saga_net *n);
/* st, from a call over ranks that failed (n may be NULL: st); when the other ranks were not told
 * (the failure did not come out of saga_comm_agree) they may be waiting in a collective this rank
 * will not join: every rank stops (saga_comm_abort) with this rank's message instead. */
saga_status net_dist_failed(saga_net *n, saga_status st);

/* Hands p (saga_malloc'd) to the net, which frees it in saga_net_free, after free_fn(p) when
 * given (what p holds); on failure both happen at once. */
typedef struct net_kept {
    void *p;
    void (*free_fn)(void *p);
} net_kept;
saga_status net_keep(saga_net *n, void *p, void (*free_fn)(void *p));

#ifdef __cplusplus
}
#endif
