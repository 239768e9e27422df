/* gcn.h - Kipf & Welling's graph convolutional network (ICLR 2017) for node classification,
 * written as saga vertex programs: the data it reads and the training loop.
 *
 *   gcn_data d;
 *   SAGA_TRY(gcn_data_load(&d, "cora", NULL));       // Cora layout: edges, features, labels, split
 *   gcn_opts o = gcn_opts_defaults();                // Kipf's hyper-parameters
 *   gcn_result r;
 *   SAGA_TRY(gcn_train(&r, be, &d, &o, NULL, NULL));
 *   printf("test accuracy %.4f\n", r.test_acc);
 *   gcn_result_free(&r);
 *   gcn_data_free(&d);
 *
 * The model: dropout -> GCN layer (F -> hidden) -> relu -> dropout -> GCN layer (hidden -> C) ->
 * log_softmax, trained with the mean negative log-likelihood over the training vertices and
 * Adam, weight decay on the first layer's weights only. A GCN layer computes
 * D^-1/2 (A + I) D^-1/2 H W + b as one vertex program (SCATTER_SRC, SYMNORM weights, no
 * apply_edge, GATHER_SUM: a single SpMM). When the layer narrows (F_out < F_in), H W is computed
 * first and the narrow result aggregated: the same product, with the SpMM on F_out columns.
 */
#pragma once

#include "saga.h"
#include "saga_net.h"
#include "saga_nn.h"
#include "saga_program.h"

#include <stdbool.h>
#include <stdint.h>

/* A node-classification data set on the host. */
typedef struct gcn_data {
    saga_graph *graph; /* undirected, vertices 0..n-1 (row i of features is vertex i) */
    int32_t n_vertices;
    int64_t n_edges; /* undirected edges, each counted once */
    float *features; /* n_vertices x n_features, row-major; NULL when the features are sparse */
    int64_t n_features;
    /* sparse features (features == NULL): CSR over n_vertices rows, as saga_features holds it */
    int64_t *x_offsets; /* n_vertices + 1 */
    int32_t *x_indices; /* x_nnz */
    float *x_values;    /* x_nnz */
    int64_t x_nnz;
    int32_t *labels; /* n_vertices; -1 for a vertex without a label */
    int32_t n_classes;
    int32_t *train, *val, *test;
    int64_t n_train, n_val, n_test;
    saga_features_norm norm; /* what the row normalisation did (all 0 when it did not run) */
    /* One rank's shard (gcn_data_load_shard), or NULL: the arrays above are then its local
     * graph's (own rows first, then the halo, whose features are zero and labels -1) and the
     * split its own rows; the whole graph's counts beside them. */
    saga_shard *shard;
    int64_t all_vertices, all_edges, all_train, all_val, all_test;
    int64_t all_edge_cut; /* the shards' partition's, over the stored directed edges */
} gcn_data;

/* Loads a directory in the layout of the bundled Cora with saga_dataset_load (saga_dataset.h:
 * the files, the checks and the warnings are its; opts NULL = its defaults, which normalise the
 * non-negative feature rows) and takes its arrays. d is zeroed first; on failure it holds
 * nothing. */
saga_status gcn_data_load(gcn_data *d, const char *dir, const saga_dataset_opts *opts);
/* Whether dir is a shard directory (saga partition --shards: it has a manifest.txt). */
bool gcn_data_is_shards(const char *dir);
/* Rank `rank` of `ranks`' shard of the directory dir as d (see gcn_data.shard); the shards must
 * be as many as the ranks, and their features normalised as `normalize` says. */
saga_status gcn_data_load_shard(gcn_data *d, const char *dir, int rank, int ranks, bool normalize);
/* Generates a data set in memory with saga_citation_generate (sparse features). */
saga_status gcn_data_synthetic(gcn_data *d, const saga_citation_params *p);
/* Frees what d holds and zeroes it. */
void gcn_data_free(gcn_data *d);
/* Divides each feature row whose entries are all non-negative by its sum (rows of zeros and
 * rows with a negative entry stay as they are: saga_features_normalize_rows), as Kipf's
 * preprocessing; dense and sparse features give the same values. Returns (and keeps in d->norm)
 * how many rows went which way. */
saga_features_norm gcn_data_normalize_features(gcn_data *d);
/* Makes sparse features dense (nothing when they are). SAGA_ERR_OUT_OF_MEMORY leaves d as it
 * was. */
saga_status gcn_data_densify(gcn_data *d);
/* Bytes of the features on the host: n x F floats, or the CSR's offsets, indices and values. */
size_t gcn_data_feature_bytes(const gcn_data *d);

/* The model gcn_train builds: two layers of saga_layers.h. */
typedef enum gcn_model {
    GCN_MODEL_GCN = 0, /* Kipf & Welling */
    GCN_MODEL_GAT,     /* Velickovic et al.: heads concatenated, elu, then one head */
    GCN_MODEL_SAGE,    /* Hamilton et al.: aggr over the in-neighbours */
    GCN_MODEL_GIN,     /* Xu et al.: a two-layer MLP per layer, eps learnt */
    GCN_MODEL_COUNT
} gcn_model;

/* "gcn", "gat", "sage", "gin"; gcn_model_parse gives -1 for anything else. */
const char *gcn_model_name(gcn_model m);
int gcn_model_parse(const char *s);

enum { GCN_MAX_LAYERS = 8 };

/* What mini-batches even out (saga_sampler_pack): the device bytes of their samples' rows and
 * edges at the model's widths, their edges, their rows, or nothing (equal seed counts). */
typedef enum gcn_balance {
    GCN_BALANCE_MEMORY = 0,
    GCN_BALANCE_EDGES,
    GCN_BALANCE_ROWS,
    GCN_BALANCE_NONE,
    GCN_BALANCE_COUNT
} gcn_balance;

/* "memory", "edges", "rows", "none"; gcn_balance_parse gives -1 for anything else. */
const char *gcn_balance_name(gcn_balance b);
int gcn_balance_parse(const char *s);

typedef struct gcn_opts {
    gcn_model model;        /* GCN */
    int heads;              /* GAT: the first layer's heads (8) */
    saga_gather aggr;       /* GraphSAGE: mean (default), max or sum */
    int epochs;             /* train until this many epochs are done in total (200) */
    int hidden;             /* width of the hidden layer (16) */
    float lr;               /* Adam's learning rate (0.01) */
    float dropout;          /* drop probability before each layer (0.5) */
    float weight_decay;     /* L2 on GCN's first layer's weights, other models' every
                             * parameter (5e-4) */
    uint64_t seed;          /* weights' initialisation and dropout masks (1) */
    const char *checkpoint; /* save here at the end and every checkpoint_every epochs, or NULL */
    int checkpoint_every;   /* 0: only at the end */
    const char *resume;     /* start from this checkpoint, or NULL */
    saga_exec exec;         /* in memory, streamed through the device budget, or chosen (auto) */
    int32_t parts;          /* streamed: parts (0: from the budget) */
    saga_partition_method partition; /* streamed: how the graph is cut (METIS) */
    saga_saved saved;       /* streamed: gathered values recomputed or offloaded for backward */
    bool host_halos;        /* streamed: saga_net_opts.host_halos */
    bool graphs;            /* saga_net_opts.graphs */
    saga_transfer transfer; /* streamed: saga_net_opts.transfer */
    saga_comm *comm;        /* partition-parallel over these ranks (saga_net_opts.comm), or NULL for
                             * this process alone; every rank calls gcn_train with the same data and
                             * options, rank 0 writes the checkpoints */
    FILE *trace;            /* the block scheduler's copies and computes, one JSON line each
                             * (saga_net_opts.trace), or NULL */
    bool explain;           /* saga_net_explain to stderr after the first epoch (rank 0) */
    /* epochs profile_first .. profile_last run inside a profiler's capture range
     * (saga_backend_profile_range); 0: none */
    int32_t profile_first, profile_last;
    double sparse_below; /* dense features with at most this share of non-zeros are kept as a
                          * CSR by the net (saga_net_set_input_auto; 0.25); 0: dense */
    /* mini-batch training (saga_sampler, saga_net_train_sample) when n_fanout > 0: in-neighbours
     * per hop from the seeds (one per layer: 2; -1 for all), training vertices per batch (512),
     * the degrees SYMNORM divides by (the full graph's) */
    int32_t fanout[GCN_MAX_LAYERS];
    int n_fanout;
    int32_t batch_size;
    saga_sample_degrees sample_degrees;
    gcn_balance balance; /* what batches even out (memory) */
    int prefetch;        /* batches a sampling thread prepares ahead of the training (2; 0: none) */
    bool eval_sampled;   /* evaluate on samples of the evaluated rows with the same fan-outs, in
                          * batches of batch_size (false: exact, over the whole graph) */
    /* early stopping: end training once this many epochs have passed without a validation
     * accuracy above the best, and make the final model the one of the best epoch (the first
     * epoch of the best validation accuracy: its parameters are kept on the host as training
     * goes on and put back at the end; the GAT paper's protocol with 100); 0: off */
    int early_stop;
    /* gcn_result.predictions, by one more inference pass over every row after training (true);
     * false leaves them NULL and saves that pass's time and memory */
    bool predictions;
} gcn_opts;

gcn_opts gcn_opts_defaults(void);
/* gcn_opts_defaults with the model's own hyper-parameters: GAT 8 hidden units per head, 8 heads,
 * learning rate 0.005, dropout 0.6 (features and attention); GIN 64 hidden units, learning rate
 * 0.005, weight decay 5e-3; GCN and GraphSAGE the defaults. */
gcn_opts gcn_opts_model(gcn_model model);
/* The options as data d takes them: over shards, where MPI does not take calls from two threads
 * at once (saga_comm_threads), mini-batches are sampled on the training's path (prefetch 0: the
 * sampling's exchanges keep to the training's thread). True when that changed o. */
bool gcn_opts_for_data(gcn_opts *o, const gcn_data *d);

/* What one epoch reports (accuracies of the model after the epoch's update, in inference mode:
 * no dropout). */
typedef struct gcn_epoch {
    int epoch;  /* 1-based */
    int epochs; /* the total asked for */
    float loss; /* training loss of the epoch's forward pass (with dropout) */
    double train_acc, val_acc, test_acc;
    double ms;            /* forward, backward and optimizer step of the epoch, in milliseconds */
    double eval_ms;       /* the inference pass that measured the accuracies */
    saga_net_stats stats; /* the training step's bytes moved, peak device bytes, overlap */
} gcn_epoch;

/* Called after every epoch; a negative status stops training with that status. */
typedef saga_status (*gcn_epoch_fn)(const gcn_epoch *e, void *user);

typedef struct gcn_result {
    int start_epoch; /* epochs already done by the resumed checkpoint (0 without --resume) */
    int epochs;      /* epochs done in total */
    float loss;      /* the last epoch's training loss (NAN when no epoch ran) */
    double train_acc, val_acc, test_acc; /* of the final model */
    /* model selection on the validation set: the first epoch of the best validation accuracy
     * (0 when no epoch was evaluated), and the test accuracy of that epoch's model */
    int best_epoch;
    double best_val_acc, test_at_best_val;
    /* the epoch whose parameters the final model has: epochs, or with early stopping best_epoch
     * (its accuracies above are then that model's); stopped: early stopping ended training
     * before the epochs asked for */
    int model_epoch;
    bool stopped;
    int32_t *predictions; /* n_vertices: the final model's class for each vertex, the arg-max of
                             its scores, ties to the first class (saga_malloc'd); NULL without
                             gcn_opts.predictions. Over shards the own rows' (shard->n_own), in
                             their order */
    double *epoch_ms;     /* the epochs run here: epochs - start_epoch entries (saga_malloc'd) */
    int n_epoch_ms;
    double seconds;   /* the whole of gcn_train: upload, training, evaluation, checkpoints */
    int64_t n_params; /* scalars over all parameters */
    size_t peak_device_bytes; /* the most device memory any training step held */
    double prepare_seconds;   /* partitioning and placing the graph's blocks, which the first
                               * training step does before its work: not in epoch_ms */
    saga_net_stats stats;     /* of the last training step */
    /* mini-batch training: batches per epoch, sampled edges and rows per batch (the mean over
     * the last epoch's) */
    int batches;
    double batch_edges, batch_rows;
    /* the device bytes each batch of the last epoch peaked at beyond what the net holds between
     * batches: the smallest and the largest */
    size_t batch_peak_min, batch_peak_max;
    /* packing and sampling: its time (on the sampling thread with prefetch), the training's waits
     * for it (0 without prefetch: then it is all on the training's path), the edges sampled */
    double sample_seconds, sample_wait_seconds, sampled_edges;
    /* over shards: the bytes this rank's training samples sent to the other ranks (the draws,
     * degrees and feature rows they asked of it) and received from them */
    double sample_sent_bytes, sample_recv_bytes;
} gcn_result;

/* Trains a GCN on d with backend be (not owned), calling on_epoch (may be NULL) after every
 * epoch. On success *out holds the result (gcn_result_free). Errors: those of the ops, of the
 * checkpoint files (naming them), SAGA_ERR_INVALID_ARG for options out of range or a data set
 * without training vertices. */
saga_status gcn_train(gcn_result *out, saga_backend *be, const gcn_data *d, const gcn_opts *o,
                      gcn_epoch_fn on_epoch, void *user);
void gcn_result_free(gcn_result *r);

/* Median and mean of n values (0 when n is 0). */
double gcn_median(const double *v, int n);
double gcn_mean(const double *v, int n);
