/* gcn.c - the GCN app: its data (a Cora-layout directory through saga_dataset_load, or a
 * generated citation graph), the two-layer model as vertex programs, and the training loop with
 * evaluation and checkpoints. */
#include "gcn.h"

#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- data --------------------------------------------------------------------------------- */

void gcn_data_free(gcn_data *d) {
    if (!d)
        return;
    saga_graph_free(&d->graph);
    saga_free(d->features);
    saga_free(d->x_offsets);
    saga_free(d->x_indices);
    saga_free(d->x_values);
    saga_free(d->labels);
    saga_free(d->train);
    saga_free(d->val);
    saga_free(d->test);
    saga_shard_close(&d->shard);
    memset(d, 0, sizeof *d);
}

bool gcn_data_is_shards(const char *dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/manifest.txt", dir);
    return access(path, F_OK) == 0;
}

/* The data set's arrays become d's. */
static void take_dataset(gcn_data *d, const saga_dataset *ds) {
    d->graph = ds->graph;
    d->n_vertices = (int32_t)ds->n_vertices;
    d->n_edges = ds->n_edges;
    d->features = ds->features.dense;
    d->n_features = ds->features.n_cols;
    d->x_offsets = ds->features.offsets;
    d->x_indices = ds->features.indices;
    d->x_values = ds->features.values;
    d->x_nnz = ds->features.nnz;
    d->labels = ds->labels;
    d->n_classes = ds->n_classes;
    d->train = ds->train, d->val = ds->val, d->test = ds->test;
    d->n_train = ds->n_train, d->n_val = ds->n_val, d->n_test = ds->n_test;
    d->norm = ds->norm;
}

saga_status gcn_data_load_shard(gcn_data *d, const char *dir, int rank, int ranks, bool normalize) {
    saga_status st = SAGA_OK;
    saga_shards_manifest m = {0};
    saga_dataset ds = {0};
    SAGA_CHECK(d && dir, SAGA_ERR_INVALID_ARG, "gcn_data_load_shard: NULL argument");
    memset(d, 0, sizeof *d);
    SAGA_TRY(saga_shards_manifest_read(&m, dir));
    const bool normalized = strstr(m.build, "row-normalised") != NULL;
    SAGA_CHECK(normalized == normalize, SAGA_ERR_INVALID_ARG,
               "%s holds features %s; %s (the shards were written %s --no-normalize-features)", dir,
               normalized ? "row-normalised" : "as read",
               normalize ? "drop --no-normalize-features here or write them again without it"
                         : "give --no-normalize-features to saga partition too",
               normalized ? "without" : "with");
    SAGA_TRY(saga_shards_dataset(&ds, &d->shard, dir, rank, ranks));
    take_dataset(d, &ds);
    d->all_vertices = m.n_vertices;
    /* counted as the whole data set counts them, where the manifest recorded it */
    d->all_edges = m.data_edges ? m.data_edges : m.n_edges;
    d->all_edge_cut = m.edge_cut;
    d->all_train = m.split_n[0], d->all_val = m.split_n[1], d->all_test = m.split_n[2];
fail:
    saga_shards_manifest_free(&m);
    if (st < 0 && d)
        gcn_data_free(d);
    return st;
}

saga_status gcn_data_load(gcn_data *d, const char *dir, const saga_dataset_opts *opts) {
    saga_status st = SAGA_OK;
    saga_dataset ds;
    SAGA_CHECK(d && dir, SAGA_ERR_INVALID_ARG, "gcn_data_load: NULL argument");
    memset(d, 0, sizeof *d);
    SAGA_TRY(saga_dataset_load(&ds, dir, opts));
    take_dataset(d, &ds);
fail:
    return st;
}

saga_status gcn_data_synthetic(gcn_data *d, const saga_citation_params *p) {
    saga_status st = SAGA_OK;
    saga_citation *c = NULL;
    SAGA_CHECK(d && p, SAGA_ERR_INVALID_ARG, "gcn_data_synthetic: NULL argument");
    memset(d, 0, sizeof *d);
    SAGA_TRY(saga_citation_generate(&c, p));
    SAGA_TRY(saga_citation_graph(&d->graph, c, NULL));
    /* the generator's words are already a CSR with values 1 */
    int64_t nnz = c->feat_offsets[c->n_vertices];
    SAGA_TRY(saga_alloc_array((void **)&d->x_values, nnz ? (size_t)nnz : 1, sizeof *d->x_values,
                              "features"));
    for (int64_t k = 0; k < nnz; k++)
        d->x_values[k] = 1.0f;
    d->x_offsets = c->feat_offsets, c->feat_offsets = NULL;
    d->x_indices = c->feat_index, c->feat_index = NULL;
    d->x_nnz = nnz;
    d->n_vertices = c->n_vertices;
    d->n_edges = c->n_edges;
    d->n_features = c->n_features;
    d->n_classes = c->n_classes;
    /* Take the arrays the data set needs from the generator's struct. */
    d->labels = c->labels, c->labels = NULL;
    d->train = c->train, c->train = NULL;
    d->val = c->val, c->val = NULL;
    d->test = c->test, c->test = NULL;
    d->n_train = c->n_train, d->n_val = c->n_val, d->n_test = c->n_test;
fail:
    saga_citation_free(&c);
    if (st < 0 && d)
        gcn_data_free(d);
    return st;
}

/* The features as a saga_features view (the arrays stay d's). */
static saga_features features_of(const gcn_data *d) {
    return (saga_features){.n_rows = d->n_vertices,
                           .n_cols = d->n_features,
                           .dense = d->features,
                           .nnz = d->x_nnz,
                           .offsets = d->x_offsets,
                           .indices = d->x_indices,
                           .values = d->x_values};
}

saga_features_norm gcn_data_normalize_features(gcn_data *d) {
    saga_features f = features_of(d);
    d->norm = saga_features_normalize_rows(&f);
    return d->norm;
}

saga_status gcn_data_densify(gcn_data *d) {
    saga_status st = SAGA_OK;
    saga_features f = features_of(d);
    SAGA_TRY(saga_features_densify(&f)); /* frees the CSR on success */
    d->features = f.dense;
    d->x_offsets = NULL;
    d->x_indices = NULL;
    d->x_values = NULL;
    d->x_nnz = 0;
fail:
    return st;
}

size_t gcn_data_feature_bytes(const gcn_data *d) {
    if (d->features)
        return (size_t)d->n_vertices * (size_t)d->n_features * sizeof(float);
    return ((size_t)d->n_vertices + 1) * sizeof(int64_t) +
           (size_t)d->x_nnz * (sizeof(int32_t) + sizeof(float));
}

/* ---- the model ---------------------------------------------------------------------------- */

gcn_opts gcn_opts_defaults(void) {
    return (gcn_opts){.model = GCN_MODEL_GCN,
                      .heads = 8,
                      .aggr = SAGA_GATHER_MEAN,
                      .epochs = 200,
                      .hidden = 16,
                      .lr = 0.01f,
                      .dropout = 0.5f,
                      .weight_decay = 5e-4f,
                      .seed = 1,
                      .checkpoint = NULL,
                      .checkpoint_every = 0,
                      .resume = NULL,
                      .exec = SAGA_EXEC_AUTO,
                      .parts = 0,
                      .partition = SAGA_PARTITION_METIS,
                      .saved = SAGA_SAVED_RECOMPUTE,
                      .comm = NULL,
                      .sparse_below = 0.25,
                      .n_fanout = 0,
                      .batch_size = 512,
                      .balance = GCN_BALANCE_MEMORY,
                      .prefetch = 2,
                      .sample_degrees = SAGA_SAMPLE_DEGREES_FULL,
                      .predictions = true};
}

const char *gcn_balance_name(gcn_balance b) {
    static const char *const names[GCN_BALANCE_COUNT] = {"memory", "edges", "rows", "none"};
    return (unsigned)b < GCN_BALANCE_COUNT ? names[b] : "?";
}

int gcn_balance_parse(const char *s) {
    for (int b = 0; s && b < GCN_BALANCE_COUNT; b++)
        if (strcmp(s, gcn_balance_name((gcn_balance)b)) == 0)
            return b;
    return -1;
}

const char *gcn_model_name(gcn_model m) {
    static const char *const names[GCN_MODEL_COUNT] = {"gcn", "gat", "sage", "gin"};
    return (unsigned)m < GCN_MODEL_COUNT ? names[m] : "?";
}

int gcn_model_parse(const char *s) {
    for (int m = 0; s && m < GCN_MODEL_COUNT; m++)
        if (strcmp(s, gcn_model_name((gcn_model)m)) == 0)
            return m;
    return -1;
}

gcn_opts gcn_opts_model(gcn_model model) {
    gcn_opts o = gcn_opts_defaults();
    o.model = model;
    switch (model) {
    case GCN_MODEL_GAT: /* Velickovic et al.'s Cora setting */
        o.hidden = 8;
        o.heads = 8;
        o.lr = 0.005f;
        o.dropout = 0.6f;
        break;
    case GCN_MODEL_GIN: /* its sums over many neighbours overfit Cora without more decay */
        o.hidden = 64;
        o.lr = 0.005f;
        o.weight_decay = 5e-3f;
        break;
    default:
        break;
    }
    return o;
}

/* The two layers of o->model from F input columns to C classes (saga_layers.h), their
 * parameters in m; *decay: the parameter weight decay applies to alone (GCN's first layer, as
 * Kipf's code), or NULL for every parameter. */
static saga_status add_layers(saga_net *net, saga_model *m, const gcn_opts *o, int64_t F, int64_t C,
                              bool sparse, bool agg_first, saga_tensor **decay) {
    saga_status st = SAGA_OK;
    const int64_t H = o->hidden;
    saga_layer_opts l1 = saga_layer_opts_defaults(), l2 = saga_layer_opts_defaults();
    l1.dropout = l2.dropout = o->dropout;
    l1.act = SAGA_LAYER_RELU;
    l1.seed = o->seed * 2 + 1;
    l2.seed = o->seed * 2 + 2;
    *decay = NULL;
    switch (o->model) {
    case GCN_MODEL_GCN: /* a narrowing layer, or sparse rows, multiply by W first */
        l1.project_first = agg_first ? 0 : H < F || sparse;
        l2.project_first = agg_first ? 0 : -1;
        SAGA_TRY(saga_gcn_add(net, m, "conv1", F, H, &l1));
        SAGA_TRY(saga_gcn_add(net, m, "conv2", H, C, &l2));
        *decay = saga_model_find(m, "conv1.weight");
        break;
    case GCN_MODEL_GAT: /* heads concatenated and elu, then one head for the classes */
        l1.act = SAGA_LAYER_ELU;
        l1.heads = o->heads;
        l1.attn_dropout = l2.attn_dropout = o->dropout;
        SAGA_TRY(saga_gat_add(net, m, "gat1", F, H, &l1));
        SAGA_TRY(saga_gat_add(net, m, "gat2", H * o->heads, C, &l2));
        break;
    case GCN_MODEL_SAGE: /* sparse rows (with the mean or the sum): multiplied first */
        l1.aggr = l2.aggr = o->aggr;
        l1.project_first = agg_first ? 0 : sparse ? 1 : -1;
        l2.project_first = agg_first ? 0 : -1;
        SAGA_TRY(saga_sage_add(net, m, "sage1", F, H, &l1));
        SAGA_TRY(saga_sage_add(net, m, "sage2", H, C, &l2));
        break;
    case GCN_MODEL_GIN:
        l1.mlp_hidden = l2.mlp_hidden = H;
        SAGA_TRY(saga_gin_add(net, m, "gin1", F, H, &l1));
        SAGA_TRY(saga_gin_add(net, m, "gin2", H, C, &l2));
        break;
    default:
        SAGA_CHECK(false, SAGA_ERR_INVALID_ARG, "GCN: unknown model %d", (int)o->model);
    }
fail:
    return st;
}

void gcn_result_free(gcn_result *r) {
    if (!r)
        return;
    saga_free(r->epoch_ms);
    saga_free(r->predictions);
    memset(r, 0, sizeof *r);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double gcn_median(const double *v, int n) {
    if (n <= 0)
        return 0.0;
    double *s = saga_malloc((size_t)n * sizeof *s);
    if (!s)
        return NAN;
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    double m = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    saga_free(s);
    return m;
}

double gcn_mean(const double *v, int n) {
    double s = 0;
    for (int i = 0; i < n; i++)
        s += v[i];
    return n > 0 ? s / n : 0.0;
}

static saga_status check_opts(const gcn_data *d, const gcn_opts *o) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(o->epochs >= 0 && o->hidden >= 1, SAGA_ERR_INVALID_ARG,
               "GCN: epochs must be >= 0 and hidden >= 1 (got %d, %d)", o->epochs, o->hidden);
    SAGA_CHECK(o->dropout >= 0 && o->dropout < 1, SAGA_ERR_INVALID_ARG,
               "GCN: dropout must be in [0, 1), got %g", (double)o->dropout);
    SAGA_CHECK(isfinite(o->lr) && o->lr > 0 && isfinite(o->weight_decay) && o->weight_decay >= 0,
               SAGA_ERR_INVALID_ARG, "GCN: lr must be > 0 and weight decay >= 0");
    SAGA_CHECK(o->checkpoint_every >= 0, SAGA_ERR_INVALID_ARG,
               "GCN: checkpoint interval must be >= 0");
    SAGA_CHECK((unsigned)o->model < GCN_MODEL_COUNT && o->heads >= 1 &&
                   (int64_t)o->heads * o->hidden <= (1 << 24) &&
                   (unsigned)o->aggr < SAGA_GATHER_COUNT,
               SAGA_ERR_INVALID_ARG, "GCN: invalid model options (model %d, heads %d, aggr %d)",
               (int)o->model, o->heads, (int)o->aggr);
    SAGA_CHECK(o->prefetch >= 0 && o->prefetch <= 64, SAGA_ERR_INVALID_ARG,
               "GCN: batches sampled ahead must be 0..64, got %d", o->prefetch);
    SAGA_CHECK((unsigned)o->balance < GCN_BALANCE_COUNT, SAGA_ERR_INVALID_ARG,
               "GCN: invalid batch balance %d", (int)o->balance);
    SAGA_CHECK(o->n_fanout == 0 || o->n_fanout == 2, SAGA_ERR_INVALID_ARG,
               "GCN: %d fan-outs for a model of 2 layers", o->n_fanout);
    for (int h = 0; h < o->n_fanout; h++)
        SAGA_CHECK(o->fanout[h] == -1 || o->fanout[h] >= 1, SAGA_ERR_INVALID_ARG,
                   "GCN: fan-out %d is neither -1 (all) nor >= 1", (int)o->fanout[h]);
    const bool ranks = !d->shard && o->comm && saga_comm_size(o->comm) > 1;
    SAGA_CHECK(!o->n_fanout || o->batch_size >= 1, SAGA_ERR_INVALID_ARG,
               "GCN: mini-batches need a batch size >= 1 (got %d)", (int)o->batch_size);
    SAGA_CHECK(!o->n_fanout || !ranks, SAGA_ERR_INVALID_ARG,
               "GCN: mini-batches over several ranks need the graph cut into shards (saga "
               "partition --shards)");
    SAGA_CHECK(!o->n_fanout || !d->shard || o->prefetch == 0 || saga_comm_threads(o->comm),
               SAGA_ERR_INVALID_ARG,
               "GCN: below MPI_THREAD_MULTIPLE mini-batches over shards are sampled on the "
               "training's path (gcn_opts_for_data)");
    SAGA_CHECK(o->early_stop >= 0, SAGA_ERR_INVALID_ARG,
               "GCN: early stopping's patience must be >= 0 (0: off), got %d", o->early_stop);
    SAGA_CHECK(!o->early_stop || (d->shard ? d->all_val : d->n_val) > 0, SAGA_ERR_INVALID_ARG,
               "GCN: early stopping selects on the validation vertices, and the data set has "
               "none");
    SAGA_CHECK(d->graph && (d->features || d->x_offsets) && d->labels &&
                   (d->shard ? d->all_train : d->n_train) > 0 && d->n_classes >= 1,
               SAGA_ERR_INVALID_ARG, "GCN: the data set has no training vertices");
fail:
    return st;
}

/* The device bytes a sampled row and edge take, roughly, for o's model on F input columns (f32
 * throughout): a row's input (its non-zeros' index and value when the input is a CSR of nnz_row
 * entries a row), dropout mask and the activations and gradients of the layers' widths; an
 * edge's source, destination, transposed position and values both ways, with GAT's attention
 * per head on the tape. */
static void balance_weights(const gcn_opts *o, int64_t F, int32_t C, double nnz_row,
                            double *per_edge, double *per_row) {
    const double in = nnz_row > 0 ? 2 * nnz_row : (double)F;
    const double heads = o->model == GCN_MODEL_GAT ? o->heads : 1;
    *per_row = 4 * (2 * in + 3 * heads * o->hidden + 3 * (double)C);
    *per_edge = 28 + (o->model == GCN_MODEL_GAT ? 4 * 4 * heads : 0);
    switch (o->balance) {
    case GCN_BALANCE_EDGES:
        *per_edge = 1, *per_row = 0;
        break;
    case GCN_BALANCE_ROWS:
        *per_edge = 0, *per_row = 1;
        break;
    default:
        break;
    }
}

bool gcn_opts_for_data(gcn_opts *o, const gcn_data *d) {
    if (!o->n_fanout || !d->shard || o->prefetch == 0 || saga_comm_threads(o->comm))
        return false;
    o->prefetch = 0;
    return true;
}

/* The training vertices of every rank. */
static int64_t all_train(const gcn_data *d) {
    return d->shard ? d->all_train : d->n_train;
}

/* The batches of an epoch: as many as o->batch_size makes of the training vertices (over shards,
 * of every rank's: each rank's batch b holds its share of the batch's seeds). */
static int64_t epoch_batch_count(const gcn_data *d, const gcn_opts *o) {
    return (all_train(d) + o->batch_size - 1) / o->batch_size;
}

/* An epoch's batches: the training vertices in an order drawn from the seed and the epoch (into
 * order), cut into as many batches as o->batch_size makes (into first, nb + 1 entries): of equal
 * seed counts, or by o->balance even in their samples' memory, edges or rows (saga_sampler_pack).
 * Batch b of epoch e is sampled as batch (e - 1) nb + b. */
static saga_status epoch_batches(saga_sampler *s, const gcn_data *d, const gcn_opts *o, int epoch,
                                 double per_edge, double per_row, int32_t *order, int64_t *first) {
    const int64_t nt = d->n_train, nb = epoch_batch_count(d, o);
    memcpy(order, d->train, (size_t)nt * sizeof *order);
    uint64_t z = o->seed * 0x9e3779b97f4a7c15ull ^ (uint64_t)epoch * 0xbf58476d1ce4e5b9ull;
    for (int64_t i = nt - 1; i > 0; i--) {
        z = z * 6364136223846793005ull + 1442695040888963407ull;
        int64_t j = (int64_t)((z >> 17) % (uint64_t)(i + 1));
        int32_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    if (o->balance != GCN_BALANCE_NONE)
        return saga_sampler_pack(s, order, nt, nb, (uint64_t)(epoch - 1) * (uint64_t)nb, per_edge,
                                 per_row, first);
    for (int64_t b = 0; b <= nb; b++) /* over shards: this rank's share of each batch */
        first[b] = d->shard ? nt * b / nb : b * o->batch_size < nt ? b * o->batch_size : nt;
    return SAGA_OK;
}

/* Mini-batches prepared ahead: a thread of its own packs each epoch's batches and samples them,
 * at most `ahead` samples before the training takes them, with a sampler of its own (on one
 * OpenMP thread, beside the training's). The samples are those the training would draw itself:
 * a batch's draws depend on its index alone. */
typedef struct batch_feed {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool started;
    saga_sampler *s;
    saga_comm *comm;            /* over shards: the thread's own communicator (saga_comm_dup) */
    saga_comm_stats comm_stats; /* what it carried (feed_stop) */
    const gcn_data *d;
    const gcn_opts *o;
    double per_edge, per_row;
    int epoch_first, epoch_last;
    int ahead;
    saga_sample **ring; /* ahead slots */
    int head, n;        /* the oldest slot and how many are filled */
    bool stop;
    saga_status st; /* the thread's failure, with its message */
    char msg[512];
    double busy_s, wait_s; /* the thread's packing and sampling; the training's waits for it */
} batch_feed;

static void *feed_main(void *arg) {
    batch_feed *f = arg;
    saga_status st = SAGA_OK;
    int32_t *order = NULL;
    int64_t *first = NULL;
    saga_sample *smp = NULL;
    const int64_t nt = f->d->n_train, nb = epoch_batch_count(f->d, f->o);
    omp_set_num_threads(1); /* this thread's other OpenMP regions (the packer's costs) too */
    SAGA_TRY(saga_alloc_array((void **)&order, (size_t)nt, sizeof *order, "training order"));
    SAGA_TRY(saga_alloc_array((void **)&first, (size_t)nb + 1, sizeof *first, "batches"));
    for (int e = f->epoch_first; e <= f->epoch_last; e++) {
        double t0 = saga_now();
        SAGA_TRY(epoch_batches(f->s, f->d, f->o, e, f->per_edge, f->per_row, order, first));
        f->busy_s += saga_now() - t0;
        for (int64_t b = 0; b < nb; b++) {
            if (f->comm) { /* over shards the ranks' threads stop at the same batch */
                pthread_mutex_lock(&f->mu);
                bool stop = f->stop;
                pthread_mutex_unlock(&f->mu);
                SAGA_TRY(saga_comm_agree(
                    f->comm,
                    stop ? saga_error(SAGA_ERR_INTERNAL, "GCN: the training stopped") : SAGA_OK));
            }
            t0 = saga_now();
            SAGA_TRY(saga_sampler_sample(f->s, order + first[b], first[b + 1] - first[b],
                                         (uint64_t)(e - 1) * (uint64_t)nb + (uint64_t)b, &smp));
            f->busy_s += saga_now() - t0;
            pthread_mutex_lock(&f->mu);
            while (f->n == f->ahead && !f->stop)
                pthread_cond_wait(&f->cv, &f->mu);
            bool stop = f->stop;
            if (!stop) {
                int slot = (f->head + f->n) % f->ahead;
                f->ring[slot] = smp;
                f->n++;
                smp = NULL;
                pthread_cond_broadcast(&f->cv);
            }
            pthread_mutex_unlock(&f->mu);
            /* Alone, the thread leaves here. Over shards it leaves only at an agreement: another
             * rank's thread may have found room for this batch and be waiting in the next one's,
             * so this one goes on to that agreement and says there that it stops. */
            if (stop && !f->comm)
                goto fail;
            saga_sample_free(&smp);
        }
    }
fail:
    saga_sample_free(&smp);
    saga_free(order);
    saga_free(first);
    pthread_mutex_lock(&f->mu);
    if (st < 0) {
        f->st = st;
        snprintf(f->msg, sizeof f->msg, "%s", saga_last_error());
    }
    f->stop = true; /* nothing more comes */
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

static saga_status feed_start(batch_feed *f, const gcn_data *d, const gcn_opts *o, double per_edge,
                              double per_row, int epoch_first, int epoch_last,
                              const saga_sampler_opts *so) {
    saga_status st = SAGA_OK;
    memset(f, 0, sizeof *f);
    f->d = d;
    f->o = o;
    f->per_edge = per_edge;
    f->per_row = per_row;
    f->epoch_first = epoch_first;
    f->epoch_last = epoch_last;
    f->ahead = o->prefetch;
    saga_sampler_opts one = *so;
    one.threads = 1; /* beside the training's kernels */
    if (d->shard) {  /* its exchanges on a communicator of its own, beside the training's */
        SAGA_TRY(saga_comm_dup(&f->comm, o->comm));
        SAGA_TRY(saga_sampler_new_shard(&f->s, d->shard, f->comm, o->fanout, o->n_fanout, &one));
    } else {
        SAGA_TRY(saga_sampler_new(&f->s, d->graph, o->fanout, o->n_fanout, &one));
    }
    SAGA_TRY(saga_alloc_zeroed((void **)&f->ring, (size_t)f->ahead, sizeof *f->ring, "batches"));
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    SAGA_CHECK(pthread_create(&f->thread, NULL, feed_main, f) == 0, SAGA_ERR_OUT_OF_MEMORY,
               "GCN: cannot start the batch sampling thread");
    f->started = true;
fail:
    return st;
}

/* The next batch's sample (the caller frees it), waiting for it when it is not ready. */
static saga_status feed_take(batch_feed *f, saga_sample **out) {
    saga_status st = SAGA_OK;
    double t0 = saga_now();
    pthread_mutex_lock(&f->mu);
    while (f->n == 0 && !f->stop)
        pthread_cond_wait(&f->cv, &f->mu);
    if (f->n > 0) {
        *out = f->ring[f->head];
        f->ring[f->head] = NULL;
        f->head = (f->head + 1) % f->ahead;
        f->n--;
        pthread_cond_broadcast(&f->cv);
    } else {
        st = f->st < 0 ? saga_error(f->st, "%s", f->msg)
                       : saga_error(SAGA_ERR_INTERNAL, "GCN: the sampling thread ended early");
    }
    pthread_mutex_unlock(&f->mu);
    f->wait_s += saga_now() - t0;
    return st;
}

static void feed_stop(batch_feed *f) {
    if (f->started) {
        pthread_mutex_lock(&f->mu);
        f->stop = true;
        pthread_cond_broadcast(&f->cv);
        pthread_mutex_unlock(&f->mu);
        pthread_join(f->thread, NULL);
        pthread_mutex_destroy(&f->mu);
        pthread_cond_destroy(&f->cv);
        f->started = false;
    }
    for (int i = 0; f->ring && i < f->n; i++)
        saga_sample_free(&f->ring[(f->head + i) % f->ahead]);
    f->n = 0;
    saga_free(f->ring);
    f->ring = NULL;
    saga_sampler_free(&f->s);
    if (f->comm) /* all its communicator carried, once the thread has ended */
        saga_comm_get_stats(f->comm, &f->comm_stats);
    saga_comm_free(&f->comm);
}

/* The evaluated rows' outputs on samples (--eval sampled) into their rows of logp: the distinct
 * rows in batches of `batch` in their order, batch b of epoch e drawn as batch 2^62 + e n + b (n
 * batches an evaluation), apart from every training batch's draws. */
static saga_status eval_samples(saga_net *net, saga_sampler *s, saga_comm *shards,
                                const int32_t *rows, int64_t n_rows, int32_t batch, int epoch,
                                int32_t C, float *logp) {
    saga_status st = SAGA_OK;
    int32_t *uniq = NULL;
    float *out = NULL;
    saga_sample *smp = NULL;
    st = saga_alloc_array((void **)&uniq, (size_t)n_rows + 1, sizeof *uniq, "evaluated rows");
    if (st == SAGA_OK)
        st = saga_alloc_array((void **)&out, (size_t)batch * (size_t)C + 1, sizeof *out,
                              "evaluated outputs");
    if (shards) /* no rank waits below for one that failed */
        st = saga_comm_agree(shards, st);
    SAGA_TRY(st);
    int64_t k = 0;
    for (int64_t i = 0; i < n_rows; i++) /* the first listing of each row (the splits may share) */
        logp[(int64_t)rows[i] * C] = NAN;
    for (int64_t i = 0; i < n_rows; i++)
        if (isnan(logp[(int64_t)rows[i] * C])) {
            logp[(int64_t)rows[i] * C] = 0.0f;
            uniq[k++] = rows[i];
        }
    int64_t nb = (k + batch - 1) / batch;
    if (shards) /* every rank samples as many batches, some without seeds */
        SAGA_TRY(saga_comm_allreduce(shards, &nb, 1, SAGA_I64, SAGA_COMM_MAX, NULL));
    for (int64_t b = 0; b < nb; b++) {
        const int64_t first = b * batch < k ? b * batch : k;
        const int64_t count = k - first < batch ? k - first : batch;
        SAGA_TRY(saga_sampler_sample(s, uniq + first, count,
                                     (1ull << 62) + (uint64_t)epoch * (uint64_t)nb + (uint64_t)b,
                                     &smp));
        SAGA_TRY(saga_net_forward_sample(net, smp, out));
        for (int64_t i = 0; i < count; i++)
            memcpy(logp + (int64_t)uniq[first + i] * C, out + i * C, (size_t)C * sizeof *logp);
        saga_sample_free(&smp);
    }
fail:
    saga_sample_free(&smp);
    saga_free(uniq);
    saga_free(out);
    return st;
}

/* st of making the model's parameters or the optimizer's state on be: a refusal for the budget
 * says what stays on the device whole (the backend's words after it). */
static saga_status model_fits(saga_status st, saga_backend *be) {
    if (st != SAGA_ERR_BUDGET)
        return st;
    char cause[512];
    snprintf(cause, sizeof cause, "%s", saga_last_error());
    saga_backend_stats bs;
    saga_backend_get_stats(be, &bs);
    const bool mib = bs.budget_bytes >= ((size_t)1 << 20);
    return saga_error(SAGA_ERR_BUDGET,
                      "GCN: the model does not fit in the device budget of %.1f %s: its "
                      "parameters, their gradients and Adam's two moments (16 bytes a parameter) "
                      "stay on the device whole, while the graph's rows stream through the rest; "
                      "give a larger budget (%s)",
                      (double)bs.budget_bytes / (mib ? 1048576.0 : 1024.0), mib ? "MiB" : "KiB",
                      cause);
}

/* The loss of the oldest batch queued and not taken, added to *sum by its seeds. */
static saga_status take_loss(saga_net *net, int64_t seeds, double *sum) {
    double l = 0;
    saga_status st = saga_net_train_sample_take(net, &l);
    *sum += l * (double)seeds; /* over shards l is the batch's, every rank's */
    return st;
}

/* One epoch of mini-batches (epoch_batches), from the feed when there is one, else packed and
 * sampled here; each trained with an optimizer step, its device peak measured. *loss: the mean
 * over the batches, weighted by their seeds; *held_peak: the most device memory a batch held. */
static saga_status train_batches(saga_net *net, saga_optim *opt, saga_sampler *s, batch_feed *feed,
                                 saga_backend *be, const gcn_data *d, const gcn_opts *o, int epoch,
                                 int32_t *order, double per_edge, double per_row, double *loss,
                                 size_t *held_peak, gcn_result *r) {
    saga_status st = SAGA_OK;
    saga_sample *smp = NULL;
    int64_t *first = NULL;
    int queued = 0; /* passes queued whose losses are not taken */
    const int64_t nb = epoch_batch_count(d, o);
    const uint64_t batch0 = (uint64_t)(epoch - 1) * (uint64_t)nb;
    if (!feed) {
        SAGA_TRY(saga_alloc_array((void **)&first, (size_t)nb + 1, sizeof *first, "batches"));
        double t0 = saga_now();
        SAGA_TRY(epoch_batches(s, d, o, epoch, per_edge, per_row, order, first));
        r->sample_seconds += saga_now() - t0;
    }
    double sum = 0, edges = 0, rows = 0;
    int64_t seeds_before = 0; /* the seeds of the batch whose loss is still to be taken */
    r->batch_peak_min = SIZE_MAX;
    r->batch_peak_max = 0;
    /* Each batch's pass is queued and its loss taken after the next one is queued: the host
     * gathers the next batch's input rows, and they are copied to the device, while the device
     * runs the batch before. */
    for (int64_t b = 0; b < nb; b++) {
        if (feed) {
            SAGA_TRY(feed_take(feed, &smp));
        } else {
            double t0 = saga_now();
            saga_comm_stats c0 = {0}, c1 = {0};
            if (d->shard)
                saga_comm_get_stats(o->comm, &c0);
            SAGA_TRY(saga_sampler_sample(s, order + first[b], first[b + 1] - first[b],
                                         batch0 + (uint64_t)b, &smp));
            r->sample_seconds += saga_now() - t0;
            if (d->shard) {
                saga_comm_get_stats(o->comm, &c1);
                r->sample_sent_bytes += (double)(c1.sent_bytes - c0.sent_bytes);
                r->sample_recv_bytes += (double)(c1.recv_bytes - c0.recv_bytes);
            }
        }
        saga_backend_stats bs;
        saga_net_stats ns;
        SAGA_TRY(saga_net_train_sample_queue(net, smp));
        saga_backend_get_stats(be, &bs); /* reset by the pass */
        saga_net_get_stats(net, &ns);
        const size_t peak = ns.peak_device_bytes; /* the batch's own */
        r->batch_peak_min = peak < r->batch_peak_min ? peak : r->batch_peak_min;
        r->batch_peak_max = peak > r->batch_peak_max ? peak : r->batch_peak_max;
        if (bs.held_peak_bytes > *held_peak) /* held since the reset: this batch's */
            *held_peak = bs.held_peak_bytes;
        queued++;
        SAGA_TRY(saga_optim_step(opt));
        if (queued > 1) {
            queued--;
            SAGA_TRY(take_loss(net, seeds_before, &sum));
        }
        seeds_before = smp->all_seeds;
        edges += (double)smp->n_edges;
        rows += (double)smp->n_ids;
        r->sampled_edges += (double)smp->n_edges;
        saga_sample_free(&smp);
    }
    if (queued) {
        queued--;
        SAGA_TRY(take_loss(net, seeds_before, &sum));
    }
    *loss = sum / (double)all_train(d);
    r->batches = (int)nb;
    r->batch_edges = edges / (double)nb;
    r->batch_rows = rows / (double)nb;
fail:
    while (queued-- > 0) /* a failed epoch leaves no loss behind to be taken */
        (void)saga_net_train_sample_take(net, NULL);
    saga_sample_free(&smp);
    saga_free(first);
    return st;
}

/* The accuracies of logp (the evaluated rows' outputs by vertex) into r: over shards every rank's
 * rows, each rank's share of the right answers summed. */
static saga_status measure(gcn_result *r, const gcn_data *d, const gcn_opts *o, const float *logp) {
    saga_status st = SAGA_OK;
    const int32_t C = d->n_classes;
    if (d->shard) { /* each rank's share of the right answers, over every rank's rows */
        double right[6] = {saga_accuracy(logp, C, d->labels, d->train, d->n_train) * d->n_train,
                           saga_accuracy(logp, C, d->labels, d->val, d->n_val) * d->n_val,
                           saga_accuracy(logp, C, d->labels, d->test, d->n_test) * d->n_test,
                           (double)d->n_train,
                           (double)d->n_val,
                           (double)d->n_test};
        for (int k = 0; k < 3; k++)
            right[k] = round(right[k]);
        SAGA_TRY(saga_comm_allreduce(o->comm, right, 6, SAGA_F64, SAGA_COMM_SUM, NULL));
        r->train_acc = right[3] > 0 ? right[0] / right[3] : 0;
        r->val_acc = right[4] > 0 ? right[1] / right[4] : 0;
        r->test_acc = right[5] > 0 ? right[2] / right[5] : 0;
    } else {
        r->train_acc = saga_accuracy(logp, C, d->labels, d->train, d->n_train);
        r->val_acc = saga_accuracy(logp, C, d->labels, d->val, d->n_val);
        r->test_acc = saga_accuracy(logp, C, d->labels, d->test, d->n_test);
    }
fail:
    return st;
}

/* Early stopping's copies of the parameters (gcn_opts.early_stop): each epoch's, queued after its
 * optimizer step into snap[epoch % 2] (the host reads an epoch's evaluation while the next epoch
 * trains), and the best epoch's, copied from there once its evaluation is read. Host memory of
 * the backend (pinned on CUDA), n floats each. */
typedef struct keep_params {
    saga_backend *be;
    saga_model *m;
    float *snap[2], *best;
    saga_event *done[2]; /* recorded after each snapshot's copy */
    size_t bytes;        /* of each: saga_model_n_scalars floats (at least one) */
    int best_epoch;      /* whose parameters best holds; 0: none yet */
} keep_params;

static void keep_free(keep_params *k) {
    for (int i = 0; i < 2; i++) {
        if (k->snap[i])
            saga_backend_host_free(k->be, k->snap[i], k->bytes);
        saga_event_free(&k->done[i]);
    }
    saga_free(k->best);
    memset(k, 0, sizeof *k);
}

static saga_status keep_new(keep_params *k, saga_backend *be, saga_model *m) {
    saga_status st = SAGA_OK;
    memset(k, 0, sizeof *k);
    k->be = be;
    k->m = m;
    const int64_t n = saga_model_n_scalars(m);
    k->bytes = (size_t)(n > 0 ? n : 1) * sizeof(float);
    for (int i = 0; i < 2; i++) {
        SAGA_TRY(saga_backend_host_alloc(be, (void **)&k->snap[i], k->bytes));
        SAGA_TRY(saga_event_new(&k->done[i], be));
    }
    SAGA_TRY(saga_alloc_array((void **)&k->best, k->bytes, 1, "the best epoch's parameters"));
fail:
    if (st != SAGA_OK)
        keep_free(k);
    return st;
}

/* Queues the copy of the parameters after epoch's optimizer step. */
static saga_status keep_snap(keep_params *k, int epoch) {
    saga_status st = SAGA_OK;
    SAGA_TRY(saga_model_copy_params(k->m, k->snap[epoch % 2], false));
    SAGA_TRY(saga_event_record(k->done[epoch % 2], saga_backend_default_stream(k->be)));
fail:
    return st;
}

/* Epoch's snapshot becomes the best. */
static saga_status keep_best(keep_params *k, int epoch) {
    saga_status st = SAGA_OK;
    if (!saga_event_done(k->done[epoch % 2]))
        SAGA_TRY(saga_event_synchronize(k->done[epoch % 2]));
    memcpy(k->best, k->snap[epoch % 2], k->bytes);
    k->best_epoch = epoch;
fail:
    return st;
}

/* Early stopping's decision after an epoch, the same on every rank: over ranks any rank's stop is
 * every rank's (their accuracies agree, being summed or computed from the same rows; this keeps a
 * rank from leaving the others in a collective if they ever did not). */
static saga_status stop_here(const gcn_opts *o, bool mine, bool *stop) {
    saga_status st = SAGA_OK;
    int32_t s = mine;
    if (o->early_stop && o->comm && saga_comm_size(o->comm) > 1)
        SAGA_TRY(saga_comm_allreduce(o->comm, &s, 1, SAGA_I32, SAGA_COMM_MAX, NULL));
    *stop = s != 0;
fail:
    return st;
}

/* The evaluated rows' outputs of the inference queued last (saga_net_forward_rows_queue), in
 * eval_rows' order into eval_out, then by vertex into logp: logits, whose arg-max is the
 * log-softmax's. */
static saga_status take_rows(saga_net *net, const int32_t *eval_rows, int64_t n_eval, int32_t C,
                             float *eval_out, float *logp) {
    saga_status st = SAGA_OK;
    SAGA_TRY(saga_net_forward_rows_take(net, eval_out));
    for (int64_t i = 0; i < n_eval; i++)
        memcpy(logp + (int64_t)eval_rows[i] * C, eval_out + i * C, (size_t)C * sizeof *logp);
fail:
    return st;
}

/* The end of epoch e's report: its evaluation taken where it was queued (take: the rows, in
 * eval_rows' order, into logp by vertex; else logp holds them), its training time from the
 * events of its start and end (te; NULL: e->ms is set), the accuracies, the epoch of the best
 * validation accuracy, the net explained after the first epoch, and on_epoch. */
static saga_status finish_epoch(gcn_epoch *e, gcn_result *r, saga_net *net, const gcn_data *d,
                                const gcn_opts *o, const int32_t *eval_rows, int64_t n_eval,
                                float *eval_out, float *logp, bool take, saga_event *const *te,
                                int done, keep_params *keep, gcn_epoch_fn on_epoch, void *user) {
    saga_status st = SAGA_OK;
    const int32_t C = d->n_classes;
    if (take) {
        double t0 = saga_now();
        SAGA_TRY(take_rows(net, eval_rows, n_eval, C, eval_out, logp));
        e->eval_ms += (saga_now() - t0) * 1e3;
    }
    if (te) {
        double sec = 0;
        if (!saga_event_done(te[1]))
            SAGA_TRY(saga_event_synchronize(te[1]));
        SAGA_TRY(saga_event_elapsed(te[0], te[1], &sec));
        e->ms = (sec - e->stats.prepare_seconds) * 1e3;
        r->epoch_ms[r->n_epoch_ms++] = e->ms;
    }
    SAGA_TRY(measure(r, d, o, logp));
    e->train_acc = r->train_acc;
    e->val_acc = r->val_acc;
    e->test_acc = r->test_acc;
    if (r->best_epoch == 0 || e->val_acc > r->best_val_acc) {
        r->best_epoch = e->epoch <= o->epochs ? e->epoch : done;
        r->best_val_acc = e->val_acc;
        r->test_at_best_val = e->test_acc;
        if (keep && e->epoch <= o->epochs) /* its parameters, copied after its step */
            SAGA_TRY(keep_best(keep, e->epoch));
    }
    if (o->explain && e->epoch == done + 1 && saga_comm_rank(o->comm) == 0)
        SAGA_TRY(saga_net_explain(net, stderr));
    if (on_epoch && e->epoch <= o->epochs)
        SAGA_TRY(on_epoch(e, user));
fail:
    return st;
}

saga_status gcn_train(gcn_result *out, saga_backend *be, const gcn_data *d, const gcn_opts *o,
                      gcn_epoch_fn on_epoch, void *user) {
    saga_status st = SAGA_OK;
    double t0 = saga_now();
    saga_net *net = NULL;
    saga_ctx *c = NULL;
    saga_model *m = NULL;
    saga_optim *opt = NULL;
    float *logp = NULL, *eval_out = NULL, *dense_x = NULL;
    int32_t *eval_rows = NULL;
    saga_event *ev[4] = {NULL};       /* two epochs' training: their starts and ends */
    saga_sampler *sampler = NULL;     /* mini-batch training */
    int32_t *order = NULL;            /* its training vertices, shuffled each epoch */
    double per_edge = 0, per_row = 0; /* what a batch's sampled edge and row weigh */
    saga_sampler_opts so = saga_sampler_opts_defaults();
    batch_feed feed = {0};              /* batches sampled ahead (o->prefetch) */
    keep_params keep = {0}, *kp = NULL; /* early stopping's parameters */
    bool stop = false;                  /* early stopping ends the training */
    gcn_result r = {0};
    r.loss = NAN;
    SAGA_CHECK(out && be && d && o, SAGA_ERR_INVALID_ARG, "gcn_train: NULL argument");
    SAGA_TRY(check_opts(d, o));
    int32_t n = d->n_vertices, C = d->n_classes;
    int64_t F = d->n_features;

    SAGA_TRY(
        saga_alloc_array((void **)&logp, (size_t)n * (size_t)C, sizeof *logp, "log-probabilities"));
    /* the rows evaluated after each epoch: the training, validation and test vertices */
    int64_t n_eval = d->n_train + d->n_val + d->n_test;
    SAGA_TRY(saga_alloc_array((void **)&eval_rows, n_eval ? (size_t)n_eval : 1, sizeof *eval_rows,
                              "evaluated rows"));
    memcpy(eval_rows, d->train, (size_t)d->n_train * sizeof *eval_rows);
    memcpy(eval_rows + d->n_train, d->val, (size_t)d->n_val * sizeof *eval_rows);
    memcpy(eval_rows + d->n_train + d->n_val, d->test, (size_t)d->n_test * sizeof *eval_rows);
    SAGA_TRY(saga_alloc_array((void **)&eval_out, (size_t)(n_eval ? n_eval : 1) * (size_t)C,
                              sizeof *eval_out, "evaluated rows"));

    /* ---- the network: two layers of the model, in memory or streamed; Glorot weights and zero
     * biases */
    SAGA_TRY(saga_ctx_new(&c, be, o->seed));
    SAGA_TRY(saga_model_new(&m, be));
    /* Where GCN and GraphSAGE aggregate before they multiply, the input rows must be dense: with
     * GraphSAGE's maximum (which does not commute with the weights), and on sampled mini-batches
     * of dense or narrow rows, whose blocks read many more source rows than they write (16k
     * destinations read 72k sources on a 200k-vertex graph at fan-outs 15,10): multiplying first
     * would multiply every source row, aggregating first multiplies the destinations' alone.
     * Sparse rows of many columns (bag-of-words, as Cora's 1,433) stay a CSR and multiply first:
     * their few non-zeros cost less than the destinations' dense rows. */
    bool sparse = d->features == NULL;
    const float *x = d->features;
    const bool agg_first =
        (o->model == GCN_MODEL_SAGE && o->aggr == SAGA_GATHER_MAX) ||
        (o->n_fanout && (o->model == GCN_MODEL_GCN || o->model == GCN_MODEL_SAGE) &&
         (!sparse || F <= 256));
    if (sparse && agg_first) {
        SAGA_TRY(saga_alloc_zeroed((void **)&dense_x, (size_t)n * (size_t)F, sizeof *dense_x,
                                   "dense input rows"));
        for (int32_t v = 0; v < n; v++)
            for (int64_t k = d->x_offsets[v]; k < d->x_offsets[v + 1]; k++)
                dense_x[(int64_t)v * F + d->x_indices[k]] = d->x_values[k];
        x = dense_x;
        sparse = false;
    }
    saga_net_opts no = saga_net_opts_defaults();
    no.exec = o->exec;
    no.parts = o->parts;
    no.partition = o->partition;
    no.saved = o->saved;
    no.host_halos = o->host_halos;
    no.graphs = o->graphs;
    no.transfer = o->transfer;
    /* GCN and GAT aggregate over A + I; GraphSAGE and GIN keep the vertex apart */
    no.self_loops = o->model == GCN_MODEL_GCN || o->model == GCN_MODEL_GAT
                        ? SAGA_DGRAPH_SELF_LOOPS_ADD
                        : SAGA_DGRAPH_SELF_LOOPS_KEEP;
    no.comm = o->comm;
    no.trace = o->trace;
    saga_net_halo hx = {0};
    if (d->shard) { /* ranks over shards: each its local graph */
        hx = saga_net_halo_of_shard(d->shard, o->comm);
        no.halo = &hx;
        no.comm = NULL;
    }
    SAGA_TRY(saga_net_new(&net, c, d->graph, &no));
    if (d->shard) /* the net has copied the halo layout it reads */
        saga_shard_release_pages(d->shard);
    SAGA_TRY(saga_net_set_model(net, m)); /* with ranks: gradients summed over them */
    saga_tensor *decay = NULL;
    SAGA_TRY(model_fits(add_layers(net, m, o, F, C, sparse, agg_first, &decay), be));
    r.n_params = saga_model_n_scalars(m);
    saga_optim_opts oo = saga_optim_opts_defaults(SAGA_OPTIM_ADAM);
    oo.lr = o->lr;
    oo.weight_decay = decay ? 0 : o->weight_decay;
    SAGA_TRY(model_fits(saga_optim_new(&opt, m, &oo), be));
    if (decay)
        SAGA_TRY(saga_optim_set_weight_decay(opt, decay, o->weight_decay));
    /* the mean NLL over the training rows; the loss reads those alone, so the last layer runs on
     * them (and over shards each rank lists its own) */
    SAGA_TRY(saga_net_set_loss_cross_entropy(net, d->labels, d->train, d->n_train));
    if (sparse)
        SAGA_TRY(saga_net_set_input_csr(net, d->x_offsets, d->x_indices, d->x_values, F));
    else /* a CSR when the first layer multiplies before it aggregates (saga_net_set_dense_rows) */
        SAGA_TRY(saga_net_set_input_auto(net, x, F, o->sparse_below));

    if (o->n_fanout) {
        so.seed = o->seed;
        so.self_loops = no.self_loops;
        so.degrees = o->sample_degrees;
        if (d->shard) /* over shards: each rank's own seeds, the others' rows asked of them */
            SAGA_TRY(
                saga_sampler_new_shard(&sampler, d->shard, o->comm, o->fanout, o->n_fanout, &so));
        else
            SAGA_TRY(saga_sampler_new(&sampler, d->graph, o->fanout, o->n_fanout, &so));
        SAGA_TRY(
            saga_alloc_array((void **)&order, (size_t)d->n_train, sizeof *order, "training order"));
        const double nnz_row = sparse ? (double)d->x_offsets[n] / (double)(n ? n : 1) : 0.0;
        balance_weights(o, F, C, nnz_row, &per_edge, &per_row);
    }

    int64_t done = 0;
    if (o->resume) {
        uint64_t counter = 0;
        SAGA_TRY(saga_checkpoint_load(o->resume, m, opt, &done, &counter));
        SAGA_CHECK(done >= 0 && done <= INT32_MAX, SAGA_ERR_PARSE,
                   "%s: epoch count %lld out of range", o->resume, (long long)done);
        saga_ctx_set_rng_counter(c, counter);
    }
    r.start_epoch = (int)done;
    if (sampler && o->prefetch > 0 && o->epochs > done)
        SAGA_TRY(feed_start(&feed, d, o, per_edge, per_row, (int)done + 1, o->epochs, &so));
    int to_run = o->epochs > done ? o->epochs - (int)done : 0;
    if (to_run > 0)
        SAGA_TRY(saga_alloc_array((void **)&r.epoch_ms, (size_t)to_run, sizeof *r.epoch_ms,
                                  "epoch times"));
    if (o->early_stop && to_run > 0) {
        SAGA_TRY(keep_new(&keep, be, m));
        kp = &keep;
    }

    /* ---- train */
    for (int k = 0; k < 4; k++)
        SAGA_TRY(saga_event_new(&ev[k], be));
    saga_stream *s0 = saga_backend_default_stream(be);
    bool profiling = false; /* inside the profiler's range (o->profile_first .. profile_last) */
    /* Full-batch epochs run one behind on the host: epoch e's training pass, optimizer step and
     * evaluation are queued, then the host reads epoch e - 1's evaluation (its pass ended before
     * epoch e's began, which keeps the device busy) and e's loss (whose pass ended before e's
     * step and evaluation): the device never drains between epochs. pend is the epoch whose
     * evaluation is still to be read, its training timed by ev[2 (pend.epoch % 2)] and the next. */
    gcn_epoch pend = {0};
    bool pending = false;
    for (int epoch = (int)done + 1; epoch <= o->epochs || epoch == (int)done + 1; epoch++) {
        gcn_epoch e = {.epoch = epoch, .epochs = o->epochs, .loss = NAN};
        if (o->profile_first > 0 && epoch == o->profile_first && epoch <= o->epochs) {
            SAGA_TRY(saga_backend_profile_range(be, true));
            profiling = true;
        }
        double batch_loss = 0;
        if (epoch <= o->epochs && !sampler) {
            saga_event **te = &ev[2 * (epoch % 2)];
            SAGA_TRY(saga_event_record(te[0], s0));
            SAGA_TRY(saga_net_train_queue(net));
            SAGA_TRY(saga_optim_step(opt));
            SAGA_TRY(saga_event_record(te[1], s0));
            if (kp)
                SAGA_TRY(keep_snap(kp, epoch));
            r.epochs = epoch;
            if (pending) {
                SAGA_TRY(finish_epoch(&pend, &r, net, d, o, eval_rows, n_eval, eval_out, logp, true,
                                      &ev[2 * (pend.epoch % 2)], (int)done, kp, on_epoch, user));
                pending = false;
                SAGA_TRY(stop_here(o, kp && pend.epoch - r.best_epoch >= o->early_stop, &stop));
            }
        }
        if (stop) {
            /* epoch e - 1 ended the training: e's pass, queued before e - 1's evaluation was
             * read, is left out (its loss read and dropped; the best epoch's model is put back) */
            double loss = 0;
            SAGA_TRY(saga_net_train_result(net, &loss, NULL));
            r.epochs = pend.epoch;
        } else if (epoch <= o->epochs && !sampler) {
            double te0 = saga_now();
            SAGA_TRY(saga_net_forward_rows_queue(net, eval_rows, n_eval));
            e.eval_ms = (saga_now() - te0) * 1e3;
            double loss = 0;
            SAGA_TRY(saga_net_train_result(net, &loss, &e.stats));
            e.loss = (float)loss;
            r.prepare_seconds += e.stats.prepare_seconds;
            if (e.stats.peak_device_bytes > r.peak_device_bytes)
                r.peak_device_bytes = e.stats.peak_device_bytes;
            r.stats = e.stats;
            r.loss = e.loss;
            pend = e;
            pending = true;
        } else if (epoch <= o->epochs) {
            /* mini-batches: each waits for its loss, so the wall clock times them */
            double tb = saga_now();
            SAGA_TRY(train_batches(net, opt, sampler, feed.started ? &feed : NULL, be, d, o, epoch,
                                   order, per_edge, per_row, &batch_loss,
                                   &e.stats.peak_device_bytes, &r));
            if (kp)
                SAGA_TRY(keep_snap(kp, epoch));
            SAGA_TRY(saga_backend_synchronize(be));
            e.ms = (saga_now() - tb) * 1e3;
            r.epochs = epoch;
            /* the peak over the batches (train_batches), not the evaluation's after them */
            e.loss = r.loss = (float)batch_loss;
            if (e.stats.peak_device_bytes > r.peak_device_bytes)
                r.peak_device_bytes = e.stats.peak_device_bytes;
            r.epoch_ms[r.n_epoch_ms++] = e.ms;
        } else {
            r.epochs = (int)done; /* nothing to train: evaluate the resumed model */
        }
        if (!pending && !stop) {
            /* Inference of the rows evaluated alone: no dropout, no tape; exact, or on samples */
            double te = saga_now();
            if (o->eval_sampled && sampler)
                SAGA_TRY(eval_samples(net, sampler, d->shard ? o->comm : NULL, eval_rows, n_eval,
                                      o->batch_size, epoch, C, logp));
            else
                SAGA_TRY(saga_net_forward_rows_queue(net, eval_rows, n_eval));
            e.eval_ms = (saga_now() - te) * 1e3;
            SAGA_TRY(finish_epoch(&e, &r, net, d, o, eval_rows, n_eval, eval_out, logp,
                                  !(o->eval_sampled && sampler), NULL, (int)done, kp, on_epoch,
                                  user));
            SAGA_TRY(stop_here(o, kp && epoch <= o->epochs && epoch - r.best_epoch >= o->early_stop,
                               &stop));
        }
        if (profiling && (epoch == o->profile_last || epoch == o->epochs || stop)) {
            SAGA_TRY(saga_backend_synchronize(be)); /* the range holds all of the epochs' work */
            SAGA_TRY(saga_backend_profile_range(be, false));
            profiling = false;
        }
        if (epoch > o->epochs || (stop && epoch != r.epochs))
            break; /* nothing trained, or the pass of an epoch after the stop left out */
        bool last = epoch == o->epochs || stop;
        if (o->checkpoint && saga_comm_rank(o->comm) == 0 &&
            ((last && !kp) || (o->checkpoint_every && epoch % o->checkpoint_every == 0)))
            SAGA_TRY(saga_checkpoint_save(o->checkpoint, m, opt, epoch, saga_ctx_rng_counter(c)));
        if (stop)
            break;
    }
    if (pending) /* the last epoch's evaluation */
        SAGA_TRY(finish_epoch(&pend, &r, net, d, o, eval_rows, n_eval, eval_out, logp, true,
                              &ev[2 * (pend.epoch % 2)], (int)done, kp, on_epoch, user));
    r.stopped = stop;
    r.model_epoch = r.epochs;
    if (kp && keep.best_epoch > 0) {
        /* the final model is the best epoch's: its parameters back, its evaluation again */
        SAGA_TRY(saga_model_copy_params(m, keep.best, true));
        if (o->eval_sampled && sampler) {
            SAGA_TRY(eval_samples(net, sampler, d->shard ? o->comm : NULL, eval_rows, n_eval,
                                  o->batch_size, keep.best_epoch, C, logp));
        } else {
            SAGA_TRY(saga_net_forward_rows_queue(net, eval_rows, n_eval));
            SAGA_TRY(take_rows(net, eval_rows, n_eval, C, eval_out, logp));
        }
        SAGA_TRY(measure(&r, d, o, logp));
        r.model_epoch = keep.best_epoch;
        if (o->checkpoint && saga_comm_rank(o->comm) == 0)
            SAGA_TRY(
                saga_checkpoint_save(o->checkpoint, m, opt, r.epochs, saga_ctx_rng_counter(c)));
    }
    if (feed.started) { /* every batch was taken: the thread has ended */
        feed_stop(&feed);
        r.sample_seconds = feed.busy_s;
        r.sample_wait_seconds = feed.wait_s;
        r.sample_sent_bytes = feed.comm_stats.sent_bytes;
        r.sample_recv_bytes = feed.comm_stats.recv_bytes;
    }
    if (to_run == 0 && o->checkpoint && saga_comm_rank(o->comm) == 0)
        SAGA_TRY(saga_checkpoint_save(o->checkpoint, m, opt, done, saga_ctx_rng_counter(c)));
    if (o->predictions) { /* every vertex's, from the final model */
        SAGA_TRY(saga_net_forward(net, logp));
        r.predictions = saga_malloc((size_t)d->n_vertices * sizeof *r.predictions);
        SAGA_CHECK(r.predictions, SAGA_ERR_OUT_OF_MEMORY, "gcn: no memory for %d predictions",
                   (int)d->n_vertices);
        for (int64_t v = 0; v < d->n_vertices; v++) {
            const float *row = logp + v * C;
            int32_t best = 0;
            for (int32_t k = 1; k < C; k++)
                best = row[k] > row[best] ? k : best;
            r.predictions[v] = best;
        }
    }
    r.seconds = saga_now() - t0;
    *out = r;
    r.epoch_ms = NULL;
    r.predictions = NULL;
fail:
    saga_free(r.epoch_ms);
    saga_free(r.predictions);
    saga_net_free(&net);
    saga_optim_free(&opt);
    saga_ctx_free(&c);
    saga_model_free(&m);
    saga_free(logp);
    saga_free(eval_rows);
    saga_free(eval_out);
    saga_free(dense_x);
    for (int k = 0; k < 4; k++)
        saga_event_free(&ev[k]);
    feed_stop(&feed);
    keep_free(&keep);
    saga_sampler_free(&sampler);
    saga_free(order);
    return st;
}
