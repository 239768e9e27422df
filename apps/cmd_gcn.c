/* cmd_gcn.c - `saga gcn`: train Kipf & Welling's GCN for node classification and report the
 * test accuracy of the final model. */
#include "commands.h"
#include "gcn.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    OPT_DATA,
    OPT_SYNTHETIC,
    OPT_MODEL,
    OPT_HEADS,
    OPT_AGGR,
    OPT_DATA_SEED,
    OPT_EPOCHS,
    OPT_HIDDEN,
    OPT_LR,
    OPT_DROPOUT,
    OPT_WEIGHT_DECAY,
    OPT_SEED,
    OPT_EARLY_STOP,
    OPT_DEVICE,
    OPT_NO_NORMALIZE,
    OPT_DENSE_FEATURES,
    OPT_SPARSE_BELOW,
    OPT_CHECKPOINT,
    OPT_CHECKPOINT_EVERY,
    OPT_RESUME,
    OPT_LOG,
    OPT_PREDICTIONS,
    OPT_TRACE,
    OPT_EXPLAIN,
    OPT_PROFILE_EPOCHS,
    OPT_SAVED,
    OPT_TRANSFER,
    OPT_GRAPHS,
    OPT_FANOUT,
    OPT_BATCH_SIZE,
    OPT_SAMPLE_DEGREES,
    OPT_BATCH_BALANCE,
    OPT_PREFETCH,
    OPT_EVAL,
    OPT_EXEC, /* the CLI_EXEC_N_OPTS options of CLI_EXEC_OPTS */
};
static const cli_opt gcn_cli_opts[] = {
    {"data", 0, "DIR", NULL,
     "A data set in the layout of the bundled Cora: edges.txt[.gz] (\"u v\", undirected), "
     "features.txt[.gz] (sparse \"vertex feature [value]\" lines or dense rows, one per vertex), "
     "labels.txt, classes.txt (optional: \"index name\"; labels are checked against it), "
     "train_idx.txt, val_idx.txt, test_idx.txt. Or a shard directory (`saga partition --data "
     "DIR --shards R`), run over R ranks: each rank maps its own shard alone, trains on its "
     "local graph in memory, and exchanges the halo rows of each layer with the others."},
    {"synthetic", 0, "N,DEG,F,C", NULL,
     "Instead of --data: a citation graph generated in memory (as `saga generate citation`) with "
     "N vertices, mean degree DEG, F features and C classes."},
    {"model", 0, "M", "gcn",
     "The model: gcn (Kipf & Welling), gat (Velickovic et al.: attention heads concatenated, "
     "elu, then one head), sage (Hamilton et al.: the vertex and an aggregation of its "
     "neighbours, each through its own weights) or gin (Xu et al.: a two-layer MLP over the "
     "vertex and the sum of its neighbours, eps learnt). Each is two layers of the library "
     "(saga_layers.h); the defaults below are GCN's unless a model's own are named."},
    {"heads", 0, "K", "8", "GAT: attention heads of the first layer."},
    {"aggr", 0, "A", "mean", "GraphSAGE: how the neighbours aggregate: mean, max or sum."},
    {"data-seed", 0, "S", "1", "The seed of the --synthetic data set."},
    {"epochs", 0, "N", "200", "Training epochs (full-batch: one optimizer step each)."},
    {"hidden", 0, "H", "16",
     "Width of the hidden layer (GAT: per head, 8 by default; GIN: 64 by default)."},
    {"lr", 0, "R", "0.01", "Adam's learning rate (GAT and GIN: 0.005 by default)."},
    {"dropout", 0, "P", "0.5",
     "Drop probability of the input and hidden features, in [0, 1) (GAT: 0.6 by default, on the "
     "attention coefficients too)."},
    {"weight-decay", 0, "W", "5e-4",
     "L2 weight decay: on the first layer's weights for GCN, on every parameter for the other "
     "models (GIN: 5e-3 by default)."},
    {"seed", 0, "S", "1", "Seed of the weight initialisation and the dropout masks."},
    {"early-stop", 0, "P", "0",
     "Early stopping: end training once P epochs have passed without a validation accuracy above "
     "the best, and make the final model the one of the best epoch (the first of its best "
     "validation accuracy): its accuracies and predictions are reported, and --checkpoint saves "
     "its parameters. 100 is the GAT paper's protocol; 0 is off: the final model is the last "
     "epoch's. With --resume the best is sought from the resumed epoch on."},
    {"device", 0, "DEV", NULL, CLI_DEVICE_HELP},
    {"no-normalize-features", 0, NULL, NULL,
     "Use the features as read (by default each row whose entries are all non-negative is "
     "divided by its sum, as Kipf does for bag-of-words features; rows with a negative entry are "
     "always left as read)."},
    {"dense-features", 0, NULL, NULL,
     "Make sparse features dense before the net gets them, as PyTorch Geometric holds them (by "
     "default a sparse features file, or --synthetic, stays a CSR: the first layer drops its "
     "non-zeros and multiplies it sparse x dense). The net still keeps dense features as a CSR "
     "under --sparse-below."},
    {"sparse-below", 0, "D", "0.25",
     "Dense features (a dense file, or --dense-features) with at most this share of non-zero "
     "entries are kept as a CSR by the net, made once: only their non-zeros move and are "
     "multiplied. 0 keeps them dense (one dense product per layer)."},
    {"checkpoint", 0, "FILE", NULL,
     "Save the model, the optimizer state and the epoch to FILE at the end (and every "
     "--checkpoint-every epochs)."},
    {"checkpoint-every", 0, "K", NULL, "Also save the checkpoint every K epochs."},
    {"resume", 0, "FILE", NULL,
     "Start from a checkpoint of the same model and data: training continues at its epoch, with "
     "the same dropout masks, and ends as the uninterrupted run would."},
    {"log", 0, "FILE", NULL,
     "Write one JSON object per epoch: epoch, loss, train_accuracy, val_accuracy, test_accuracy, "
     "epoch_ms, eval_ms (and h2d_bytes, d2h_bytes, peak_device_bytes, overlap with --stats), "
     "named as in the --json summary."},
    {"predictions", 0, "FILE", NULL,
     "Write the final model's class of every vertex to FILE, one line each: the vertex (its row "
     "in the data set, from 0) and the class (an index as labels.txt gives them), in vertex "
     "order; over shards rank 0 writes every rank's. Costs one more inference pass over every "
     "row after training, which runs only when asked."},
    {"trace", 0, "FILE", NULL,
     "Write one JSON line per copy the block scheduler makes and per step it computes: "
     "{\"trace\": \"copy\" or \"compute\", stream, dir (h2d, d2h), block, bytes, plan, step, "
     "start, end} in seconds from the first traced work, timed by events on the streams that ran "
     "them (the device's clock on CUDA); `saga plot` "
     "draws them as a timeline. Tracing waits for the device after each pass, so it slows a "
     "streamed run a little; off by default. Rank 0 only."},
    {"explain", 0, NULL, NULL,
     "Print the net's plan to stderr after the first epoch: how it is placed (in memory, or "
     "streamed in parts with a pass's host-to-device floor) and per stage its kind, widths, the "
     "rows training and evaluation compute, the edges training reads and where its input lives."},
    {"profile-epochs", 0, "A[:B]", NULL,
     "Run epochs A to B (training and evaluation) inside a profiler's capture range: on CUDA "
     "cudaProfilerStart before epoch A and cudaProfilerStop after epoch B, which `nsys profile "
     "--capture-range=cudaProfilerApi` follows (and the CUDA simulator's counts, "
     "SAGA_CUDASIM_STATS); nothing on the CPU."},
    {"saved", 0, "MODE", "recompute",
     "Streamed: recompute each part's aggregation in the backward pass, or offload it to the "
     "host in the forward pass and stream it back."},
    {"transfer-precision", 0, "P", "f32",
     "Streamed: the precision the feature rows and the edge weights cross to the device in: "
     "f32, bf16 or fp16 (half the bytes; the device widens them, compute stays f32)."},
    {"graphs", 0, NULL, NULL,
     "On a GPU, in memory: record each training pass and evaluation as a CUDA graph and launch "
     "it as one unit, its arguments updated from epoch to epoch (the same results; off by "
     "default until its gain is measured)."},
    {"fanout", 0, "A,B", NULL,
     "Mini-batch training: each epoch cuts the training vertices, in an order drawn anew, into "
     "batches of --batch-size; a batch samples A in-neighbours of each of its vertices "
     "(uniformly, without replacement; -1: all of them), then B of each of those, and trains the "
     "two layers on the sampled rows and edges alone (one optimizer step per batch). The draws "
     "follow --seed, the epoch and the batch, the same on any thread count. Over shards each "
     "rank samples its own training vertices (a batch holds every rank's share of it) and asks "
     "the owners of the rows its batch reaches for their draws and features: one process's "
     "draws; the batches are then balanced by the expected cost of their seeds. Without it: "
     "full-graph training."},
    {"batch-size", 0, "N", "512", "Mini-batch training: training vertices per batch."},
    {"sample-degrees", 0, "D", "full",
     "Mini-batch training: the degrees GCN's normalisation divides by on a sampled batch: full "
     "(the whole graph's, as evaluation has them) or sampled (those of the batch's edges)."},
    {"batch-balance", 0, "B", "memory",
     "Mini-batch training: what the batches of an epoch even out, their number fixed by "
     "--batch-size: memory (the device bytes of each batch's sampled rows and edges at the "
     "model's widths), edges, rows, or none (equal seed counts; a batch of hubs then peaks far "
     "above one of leaves). Each batch is measured as it is packed (its draws do not depend on "
     "the other vertices), so a balanced batch holds what its peak needs, not a guess (over "
     "shards, where another rank draws its rows, by the seeds' expected costs); the summary "
     "reports the smallest and largest batch peak."},
    {"prefetch", 0, "N", "2",
     "Mini-batch training: a thread of its own packs and samples batches, up to N ahead of the "
     "training (the same batches: a batch's draws depend on its index alone); 0 samples each "
     "batch when its turn comes. The summary says how much of the sampling the training waited "
     "for."},
    {"eval", 0, "E", "exact",
     "Mini-batch training: how each epoch's model is evaluated: exact (every layer over the "
     "whole graph, as full-graph training does) or sampled (the evaluated vertices in batches of "
     "--batch-size, on samples with the same fan-outs: cheaper on a large graph, an estimate)."},
    CLI_EXEC_OPTS,
    {0}};

static int gcn_main(int argc, char **argv);

const cli_cmd cli_cmd_gcn = {
    .name = "gcn",
    .alias = "gnn",
    .summary = "Train a GCN, GAT, GraphSAGE or GIN for node classification",
    .args = NULL,
    .min_args = 0,
    .max_args = 0,
    .description =
        "Trains the two-layer GCN of Kipf & Welling (ICLR 2017) on a node-classification data "
        "set: dropout -> GCN layer (F -> H) -> relu -> dropout -> GCN layer (H -> C) -> "
        "log_softmax, where a GCN layer is D^-1/2 (A + I) D^-1/2 X W + b over the undirected graph "
        "with one self-loop per vertex. Full-batch training with the negative log-likelihood on "
        "the training vertices and Adam; the defaults are the paper's (200 epochs, 16 hidden "
        "units, learning rate 0.01, dropout 0.5, weight decay 5e-4 on the first layer, "
        "row-normalised features: each row without a negative entry divided by its sum, signed "
        "rows left as read), without early stopping (--early-stop).\n"
        "--model gat, sage or gin trains the same way two layers of GAT (Velickovic et al., ICLR "
        "2018: 8 heads of 8 units, elu, then one head; learning rate 0.005, dropout 0.6 on the "
        "features and the attention), GraphSAGE (Hamilton et al., NeurIPS 2017: --aggr mean, max "
        "or sum; relu between the layers) or GIN (Xu et al., ICLR 2019: a two-layer MLP of 64 "
        "units per layer; learning rate 0.005, weight decay 5e-3), with the weight decay on "
        "every parameter: the library's layers (saga_layers.h).\n"
        "After every epoch the model is evaluated in inference mode (no dropout) on the training, "
        "validation and test vertices. The reported test accuracy is that of the final model: "
        "after the last epoch, or with --early-stop P the model of the best "
        "validation accuracy, training ended P epochs after it, as in the GAT paper (P = 100). "
        "The validation accuracy is reported beside it and nothing is selected on the test set. "
        "The epoch of the best validation accuracy and that epoch's test accuracy are reported "
        "too.\n"
        "Each layer is one saga vertex program (scatter the source's value, weight it by the "
        "symmetric normalisation, sum at the destination: one sparse-dense product). A layer "
        "that narrows multiplies by W before aggregating, so the sparse product runs on the "
        "narrow side. The loss reads the training vertices alone, so the second layer trains "
        "on their rows only, the first layer's aggregation on the rows those read, and its "
        "product X W on the rows that aggregation reads (the same loss and gradients as over "
        "every row), in memory and, when the layers' inputs stay on the device, streamed. The "
        "epoch time is the forward pass, backward pass and optimizer step; the "
        "evaluation, and the partitioning and placing of the graph's blocks before the first "
        "epoch, are timed apart. On a terminal a progress line shows the epoch, the loss, the "
        "accuracies and the time per epoch.",
    .opts = gcn_cli_opts,
    .flags = CLI_THREADS,
    .example = "saga generate citation --vertices 20000 --classes 8 --features 500 -o cit20k\n"
               "saga gcn --data cit20k\n"
               "saga gcn --data cora --seed 3 --epochs 300 --log cora.jsonl --json\n"
               "saga gcn --data cora --model gat\n"
               "saga gcn --data cora --model sage --aggr max --hidden 32\n"
               "saga gcn --synthetic 100000,20,128,8 --device cpu --threads 2\n"
               "saga gcn --data cora --epochs 100 --checkpoint cora.ckpt\n"
               "saga gcn --data cora --resume cora.ckpt      # epochs 101..200\n"
               "saga gcn --synthetic 200000,20,128,8 --device-mem 64M --stats",
    .main = gcn_main,
};

/* What the per-epoch callback needs. */
typedef struct epoch_sink {
    cli_ctx *c;
    FILE *log;
    const char *log_path;
    bool progress; /* refresh a line on the terminal */
    bool stats;    /* bytes moved and overlap per epoch */
    bool shown;    /* a progress line is on screen */
    double last_shown;
} epoch_sink;

static saga_status on_epoch(const gcn_epoch *e, void *user) {
    epoch_sink *s = user;
    if (s->log) {
        json j;
        json_init(&j, s->log);
        json_object_begin(&j);
        json_key(&j, "epoch"), json_int(&j, e->epoch);
        json_key(&j, "loss"), json_num(&j, e->loss);
        json_key(&j, "train_accuracy"), json_num(&j, e->train_acc);
        json_key(&j, "val_accuracy"), json_num(&j, e->val_acc);
        json_key(&j, "test_accuracy"), json_num(&j, e->test_acc);
        json_key(&j, "epoch_ms"), json_num(&j, e->ms);
        json_key(&j, "eval_ms"), json_num(&j, e->eval_ms);
        if (s->stats) {
            json_key(&j, "h2d_bytes"), json_int(&j, (int64_t)e->stats.h2d_bytes);
            json_key(&j, "d2h_bytes"), json_int(&j, (int64_t)e->stats.d2h_bytes);
            json_key(&j, "peak_device_bytes"), json_int(&j, (int64_t)e->stats.peak_device_bytes);
            json_key(&j, "overlap"), json_num(&j, e->stats.overlap);
        }
        json_object_end(&j);
        fputc('\n', s->log);
        if (ferror(s->log))
            return saga_error(SAGA_ERR_IO, "%s: write failed: %s", s->log_path, strerror(errno));
    }
    if (s->progress) {
        double now = saga_now();
        if (now - s->last_shown >= 0.1 || e->epoch == e->epochs) {
            s->last_shown = now;
            fprintf(stderr, "\r\033[Kepoch %d/%d  loss %.4f  train %.3f  val %.3f  %.2f ms/epoch",
                    e->epoch, e->epochs, (double)e->loss, e->train_acc, e->val_acc, e->ms);
            if (s->stats)
                fprintf(stderr, "  h2d %.1f MB  d2h %.1f MB  peak %.1f MB  overlap %.0f%%",
                        e->stats.h2d_bytes / 1e6, e->stats.d2h_bytes / 1e6,
                        e->stats.peak_device_bytes / 1e6, 100 * e->stats.overlap);
            fflush(stderr);
            s->shown = true;
        }
    }
    return SAGA_OK;
}

static void progress_end(epoch_sink *s) {
    if (s->shown) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        s->shown = false;
    }
}

/* "N,DEG,F,C" -> citation parameters; 0 on success, else a usage error. */
static int parse_synthetic(cli_ctx *c, const char *arg, saga_citation_params *p) {
    char buf[128];
    const char *what[4] = {"N", "DEG", "F", "C"};
    char *fields[4] = {0};
    if (strlen(arg) >= sizeof buf)
        return cli_usage(c, "--synthetic: expected N,DEG,F,C, got '%s'", arg);
    strcpy(buf, arg);
    char *q = buf;
    for (int i = 0; i < 4; i++) {
        fields[i] = q;
        q = strchr(q, ',');
        if ((q == NULL) != (i == 3))
            return cli_usage(c, "--synthetic: expected N,DEG,F,C, got '%s'", arg);
        if (q)
            *q++ = '\0';
    }
    int64_t v[4] = {0};
    double deg = 0;
    for (int i = 0; i < 4; i++) {
        char *end = NULL;
        errno = 0;
        if (i == 1)
            deg = strtod(fields[i], &end);
        else
            v[i] = strtoll(fields[i], &end, 10);
        if (end == fields[i] || *end || errno)
            return cli_usage(c, "--synthetic: %s is not a number: '%s'", what[i], fields[i]);
    }
    if (v[3] < 2 || v[3] > 1024)
        return cli_usage(c, "--synthetic: C must be in 2..1024, got %lld", (long long)v[3]);
    if (v[0] < 2 * v[3] || v[0] > (1 << 30))
        return cli_usage(c, "--synthetic: N must be in 2*C..2^30, got %lld", (long long)v[0]);
    if (!(deg > 0 && deg <= 1e6))
        return cli_usage(c, "--synthetic: DEG must be positive, got %g", deg);
    if (v[2] < v[3] || v[2] > (1 << 24))
        return cli_usage(c, "--synthetic: F must be in C..2^24, got %lld", (long long)v[2]);
    p->n_vertices = (int32_t)v[0];
    p->avg_degree = deg;
    p->n_features = (int32_t)v[2];
    p->n_classes = (int32_t)v[3];
    return 0;
}

/* A float default as a user would have written it (0.005, not 0.004999999888), for the report. */
static double as_given(float x) {
    char buf[32];
    snprintf(buf, sizeof buf, "%.7g", (double)x);
    return strtod(buf, NULL);
}

/* --fanout A,B: one fan-out per layer, each -1 or >= 1. */
static int parse_fanout(cli_ctx *c, const char *arg, gcn_opts *go) {
    int n = 0;
    const char *p = arg;
    while (true) {
        char *end = NULL;
        long f = strtol(p, &end, 10);
        if (end == p || (*end != ',' && *end != '\0') || n == GCN_MAX_LAYERS ||
            !(f == -1 || (f >= 1 && f <= (1 << 24))))
            return cli_usage(c,
                             "--fanout: expected one count per layer, each -1 (all) or 1..%d, "
                             "as 15,10; got '%s'",
                             1 << 24, arg);
        go->fanout[n++] = (int32_t)f;
        if (*end == '\0')
            break;
        p = end + 1;
    }
    if (n != 2)
        return cli_usage(c, "--fanout: the models have 2 layers, so 2 fan-outs, got %d in '%s'", n,
                         arg);
    go->n_fanout = n;
    return 0;
}

/* --predictions: the final model's class of every vertex, "vertex class" lines in vertex order,
 * written by rank 0. Over shards each rank holds its own rows' (d->shard->vertex), summed into
 * one array of every vertex over the ranks first (class + 1 at a rank's own rows, 0 elsewhere). */
static saga_status write_predictions(const char *path, const gcn_data *d, const gcn_result *r,
                                     saga_comm *comm, int rank) {
    saga_status st = SAGA_OK;
    int32_t *all = NULL;
    FILE *f = NULL;
    const int32_t *pred = r->predictions;
    int64_t n = d->n_vertices;
    if (d->shard) {
        n = d->all_vertices;
        SAGA_TRY(saga_alloc_zeroed((void **)&all, (size_t)(n ? n : 1), sizeof *all,
                                   "every vertex's class"));
        for (int64_t i = 0; i < d->shard->n_own; i++)
            all[d->shard->vertex[i]] = r->predictions[i] + 1;
        SAGA_TRY(saga_comm_allreduce(comm, all, (size_t)n, SAGA_I32, SAGA_COMM_SUM, NULL));
        for (int64_t v = 0; v < n; v++)
            all[v]--;
        pred = all;
    }
    if (rank == 0) {
        SAGA_CHECK(f = fopen(path, "w"), SAGA_ERR_IO, "cannot create '%s': %s", path,
                   strerror(errno));
        for (int64_t v = 0; v < n; v++)
            fprintf(f, "%lld %d\n", (long long)v, (int)pred[v]);
        int bad = ferror(f);
        bad |= fclose(f);
        f = NULL;
        SAGA_CHECK(!bad, SAGA_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    }
fail:
    if (f)
        fclose(f);
    saga_free(all);
    return st;
}

static int gcn_main(int argc, char **argv) {
    cli_ctx c;
    const char *arg = NULL, *data_dir = NULL, *synthetic = NULL, *device = cli_default_device();
    const char *log_path = NULL, *trace_path = NULL, *pred_path = NULL;
    gcn_opts go = gcn_opts_defaults();
    saga_citation_params cp = saga_citation_params_defaults();
    bool normalize = true, dense_features = false;
    cli_exec ex = cli_exec_defaults();
    int64_t v = 0;
    /* The values as given, for the report: the model uses them as floats. */
    double lr = 0.01, dropout = 0.5, weight_decay = 5e-4;
    /* a model's own defaults, for what was not given */
    bool given_hidden = false, given_lr = false, given_dropout = false, given_decay = false;
    bool given_heads = false, given_aggr = false, given_batch = false;
    int model = GCN_MODEL_GCN;
    int o;
    cli_begin(&c, &cli_cmd_gcn, argc, argv);
    while ((o = cli_next(&c, &arg)) >= 0) {
        int bad = 0;
        switch (o) {
        case OPT_DATA:
            data_dir = arg;
            break;
        case OPT_SYNTHETIC:
            synthetic = arg;
            bad = parse_synthetic(&c, arg, &cp);
            break;
        case OPT_MODEL:
            if ((model = gcn_model_parse(arg)) < 0)
                bad = cli_usage(&c, "--model must be gcn, gat, sage or gin, got '%s'", arg);
            break;
        case OPT_HEADS:
            if (!(bad = cli_int(&c, "--heads", arg, 1, 1 << 10, &v)))
                go.heads = (int)v, given_heads = true;
            break;
        case OPT_AGGR:
            given_aggr = true;
            if (strcmp(arg, "mean") == 0)
                go.aggr = SAGA_GATHER_MEAN;
            else if (strcmp(arg, "max") == 0)
                go.aggr = SAGA_GATHER_MAX;
            else if (strcmp(arg, "sum") == 0)
                go.aggr = SAGA_GATHER_SUM;
            else
                bad = cli_usage(&c, "--aggr must be mean, max or sum, got '%s'", arg);
            break;
        case OPT_DATA_SEED:
            bad = cli_u64(&c, "--data-seed", arg, &cp.seed);
            break;
        case OPT_EPOCHS:
            if (!(bad = cli_int(&c, "--epochs", arg, 0, 1000000000, &v)))
                go.epochs = (int)v;
            break;
        case OPT_HIDDEN:
            if (!(bad = cli_int(&c, "--hidden", arg, 1, 1 << 20, &v)))
                go.hidden = (int)v, given_hidden = true;
            break;
        case OPT_LR:
            if (!(bad = cli_double(&c, "--lr", arg, 1e-12, 1e6, false, &lr)))
                go.lr = (float)lr, given_lr = true;
            break;
        case OPT_DROPOUT:
            if (!(bad = cli_double(&c, "--dropout", arg, 0, 1, true, &dropout)))
                go.dropout = (float)dropout, given_dropout = true;
            break;
        case OPT_WEIGHT_DECAY:
            if (!(bad = cli_double(&c, "--weight-decay", arg, 0, 1e6, false, &weight_decay)))
                go.weight_decay = (float)weight_decay, given_decay = true;
            break;
        case OPT_SEED:
            bad = cli_u64(&c, "--seed", arg, &go.seed);
            break;
        case OPT_DEVICE:
            device = arg;
            break;
        case OPT_NO_NORMALIZE:
            normalize = false;
            break;
        case OPT_DENSE_FEATURES:
            dense_features = true;
            break;
        case OPT_SPARSE_BELOW:
            bad = cli_double(&c, "--sparse-below", arg, 0, 1, false, &go.sparse_below);
            break;
        case OPT_CHECKPOINT:
            go.checkpoint = arg;
            break;
        case OPT_EARLY_STOP:
            if (!(bad = cli_int(&c, "--early-stop", arg, 0, 1000000000, &v)))
                go.early_stop = (int)v;
            break;
        case OPT_CHECKPOINT_EVERY:
            if (!(bad = cli_int(&c, "--checkpoint-every", arg, 1, 1000000000, &v)))
                go.checkpoint_every = (int)v;
            break;
        case OPT_RESUME:
            go.resume = arg;
            break;
        case OPT_LOG:
            log_path = arg;
            break;
        case OPT_PREDICTIONS:
            pred_path = arg;
            break;
        case OPT_TRACE:
            trace_path = arg;
            break;
        case OPT_EXPLAIN:
            go.explain = true;
            break;
        case OPT_PROFILE_EPOCHS:
            bad = cli_int_range(&c, "--profile-epochs", "epoch", arg, &go.profile_first,
                                &go.profile_last);
            break;
        case OPT_SAVED:
            if (strcmp(arg, "recompute") == 0)
                go.saved = SAGA_SAVED_RECOMPUTE;
            else if (strcmp(arg, "offload") == 0)
                go.saved = SAGA_SAVED_OFFLOAD;
            else
                bad = cli_usage(&c, "--saved must be recompute or offload, got '%s'", arg);
            break;
        case OPT_GRAPHS:
            go.graphs = true;
            break;
        case OPT_FANOUT:
            bad = parse_fanout(&c, arg, &go);
            break;
        case OPT_BATCH_SIZE:
            if (!(bad = cli_int(&c, "--batch-size", arg, 1, INT32_MAX, &v)))
                go.batch_size = (int32_t)v;
            given_batch = true;
            break;
        case OPT_BATCH_BALANCE: {
            const int k = gcn_balance_parse(arg);
            if (k < 0)
                bad = cli_usage(&c, "--batch-balance must be memory, edges, rows or none, got '%s'",
                                arg);
            else
                go.balance = (gcn_balance)k;
            given_batch = true;
            break;
        }
        case OPT_PREFETCH:
            if (!(bad = cli_int(&c, "--prefetch", arg, 0, 64, &v)))
                go.prefetch = (int)v;
            given_batch = true;
            break;
        case OPT_EVAL:
            if (strcmp(arg, "exact") == 0 || strcmp(arg, "sampled") == 0)
                go.eval_sampled = arg[0] == 's';
            else
                bad = cli_usage(&c, "--eval must be exact or sampled, got '%s'", arg);
            given_batch = true;
            break;
        case OPT_SAMPLE_DEGREES:
            if (strcmp(arg, "full") == 0)
                go.sample_degrees = SAGA_SAMPLE_DEGREES_FULL;
            else if (strcmp(arg, "sampled") == 0)
                go.sample_degrees = SAGA_SAMPLE_DEGREES_SAMPLED;
            else
                bad = cli_usage(&c, "--sample-degrees must be full or sampled, got '%s'", arg);
            given_batch = true;
            break;
        case OPT_TRANSFER:
            if (strcmp(arg, "f32") == 0)
                go.transfer = SAGA_TRANSFER_F32;
            else if (strcmp(arg, "bf16") == 0)
                go.transfer = SAGA_TRANSFER_BF16;
            else if (strcmp(arg, "fp16") == 0)
                go.transfer = SAGA_TRANSFER_FP16;
            else
                bad =
                    cli_usage(&c, "--transfer-precision must be f32, bf16 or fp16, got '%s'", arg);
            break;
        default:
            bad = cli_exec_opt(&c, o - OPT_EXEC, arg, &ex);
            break;
        }
        if (bad)
            return bad;
    }
    if (o == CLI_EXIT)
        return c.exit_code;
    go.model = (gcn_model)model;
    if (given_heads && go.model != GCN_MODEL_GAT)
        return cli_usage(&c, "--heads applies to --model gat");
    if (given_aggr && go.model != GCN_MODEL_SAGE)
        return cli_usage(&c, "--aggr applies to --model sage");
    if (given_batch && !go.n_fanout)
        return cli_usage(&c,
                         "--batch-size, --batch-balance, --prefetch, --eval and --sample-degrees "
                         "apply to --fanout");
    const gcn_opts md = gcn_opts_model(go.model);
    if (!given_hidden)
        go.hidden = md.hidden;
    if (!given_lr)
        go.lr = md.lr, lr = as_given(md.lr);
    if (!given_dropout)
        go.dropout = md.dropout, dropout = as_given(md.dropout);
    if (!given_decay)
        go.weight_decay = md.weight_decay, weight_decay = as_given(md.weight_decay);
    if (!data_dir == !synthetic)
        return cli_usage(&c, "give exactly one of --data DIR and --synthetic N,DEG,F,C");
    if (go.checkpoint_every && !go.checkpoint)
        return cli_usage(&c, "--checkpoint-every needs --checkpoint FILE");
    if (cli_check_device(&c, device))
        return CLI_USAGE;

    int rc = CLI_ERROR;
    bool agreed = true; /* a failure every rank knows of (cli_fail_ranks) */
    gcn_data d = {0};
    gcn_result r = {0};
    saga_comm *comm = NULL;
    cli_rank_stats rs = {0};
    saga_backend *be = NULL;
    epoch_sink sink = {.c = &c, .log_path = log_path, .stats = ex.stats};
    char b1[32], b2[32], b3[32], b4[32], b5[32];

    /* ---- ranks: partition-parallel over them when a launcher started several */
    double t0 = saga_now();
    saga_status st = cli_comm_open(&c, &comm);
    if (st < 0)
        goto fail;

    /* ---- data: every rank reads it all, or (a shard directory) its own shard alone */
    const bool shards = data_dir && gcn_data_is_shards(data_dir);
    if (shards) {
        st = gcn_data_load_shard(&d, data_dir, c.rank, c.ranks, normalize);
    } else if (data_dir) {
        saga_dataset_opts dso = saga_dataset_opts_defaults();
        dso.normalize_features = normalize;
        st = gcn_data_load(&d, data_dir, &dso);
    } else {
        cli_say(&c,
                "generating a citation graph: %s vertices, mean degree %g, %d features, %d "
                "classes, seed %llu\n",
                cli_count(b1, sizeof b1, cp.n_vertices), cp.avg_degree, cp.n_features, cp.n_classes,
                (unsigned long long)cp.seed);
        st = gcn_data_synthetic(&d, &cp);
    }
    if ((st = saga_comm_agree(comm, st)) < 0)
        goto fail;
    if (normalize && !data_dir)
        gcn_data_normalize_features(&d);
    bool sparse_file = d.features == NULL;
    /* a rank that cannot hold the dense rows stops every rank */
    if (dense_features && (st = saga_comm_agree(comm, gcn_data_densify(&d))) < 0)
        goto fail;
    double t_load = saga_now() - t0;
    if (shards)
        cli_say(&c,
                "data      %s: %d shards of %s vertices and %s edges, %lld features, %d classes; "
                "split %lld / %lld / %lld; rank 0's shard %s own rows, %s halo rows, %s in-edges "
                "(%.2f s)\n",
                data_dir, c.ranks, cli_count(b1, sizeof b1, d.all_vertices),
                cli_count(b2, sizeof b2, d.all_edges), (long long)d.n_features, d.n_classes,
                (long long)d.all_train, (long long)d.all_val, (long long)d.all_test,
                cli_count(b3, sizeof b3, d.shard->n_own), cli_count(b4, sizeof b4, d.shard->n_halo),
                cli_count(b5, sizeof b5, d.n_edges), t_load);
    else
        cli_say(&c,
                "data      %s: %s vertices, %s edges, %lld features, %d classes; split %lld / "
                "%lld / %lld (%.2f s)\n",
                data_dir ? data_dir : "synthetic", cli_count(b1, sizeof b1, d.n_vertices),
                cli_count(b2, sizeof b2, d.n_edges), (long long)d.n_features, d.n_classes,
                (long long)d.n_train, (long long)d.n_val, (long long)d.n_test, t_load);

    go.comm = comm;
    if (gcn_opts_for_data(&go, &d))
        cli_say(&c, "batches   over shards below MPI_THREAD_MULTIPLE: sampled on the training's "
                    "path (--prefetch 0)\n");

    double dense_nz = 0; /* dense features: the share of non-zero entries */
    int64_t input_nnz = d.features ? 0 : d.x_nnz;
    if (d.features) {
        int64_t total = d.n_vertices * d.n_features;
        for (int64_t i = 0; i < total; i++)
            input_nnz += d.features[i] != 0.0f;
        dense_nz = total ? (double)input_nnz / (double)total : 0;
        cli_say(&c, "features  dense%s: %s on the host, %.2f%% non-zero\n",
                sparse_file ? " (--dense-features)" : "",
                cli_bytes(b1, sizeof b1, (int64_t)gcn_data_feature_bytes(&d)), 100 * dense_nz);
    } else
        cli_say(&c, "features  sparse (CSR): %s non-zeros, %.2f%% of the matrix, %s on the host\n",
                cli_count(b1, sizeof b1, d.x_nnz),
                100.0 * (double)d.x_nnz / ((double)d.n_vertices * (double)d.n_features),
                cli_bytes(b2, sizeof b2, (int64_t)gcn_data_feature_bytes(&d)));
    if (normalize && shards)
        cli_say(&c, "features  row-normalised when the shards were written\n");
    else if (normalize)
        cli_say(&c,
                "features  row-normalised: %s rows divided by their sum, %s with a negative entry "
                "left as read, %s all zero\n",
                cli_count(b1, sizeof b1, d.norm.n_normalized),
                cli_count(b2, sizeof b2, d.norm.n_signed), cli_count(b3, sizeof b3, d.norm.n_zero));
    else
        cli_say(&c, "features  used as read (--no-normalize-features)\n");

    /* ---- backend */
    saga_backend_params bp = saga_backend_params_defaults();
    bp.n_threads = c.threads;
    bp.budget_bytes = ex.device_mem;
    go.exec = ex.stream ? SAGA_EXEC_STREAM : SAGA_EXEC_AUTO;
    go.parts = ex.parts;
    go.partition = ex.partition;
    go.host_halos = ex.host_halos;
    st = cli_backend_open(&c, &be, device, comm, &bp);
    if ((st = saga_comm_agree(comm, st)) < 0)
        goto fail;
    go.comm = comm;
    int n_threads = cli_threads_of(be);
    if (n_threads)
        cli_say(&c, "device    %s, %d threads\n", saga_backend_name(be), n_threads);
    else
        cli_say(&c, "device    %s\n", saga_backend_name(be));
    static const char *const aggr_names[SAGA_GATHER_COUNT] = {"sum", "mean", "max"};
    char desc[128];
    if (go.model == GCN_MODEL_GAT)
        snprintf(desc, sizeof desc, "GAT %lld -> %dx%d -> %d", (long long)d.n_features, go.heads,
                 go.hidden, d.n_classes);
    else
        snprintf(desc, sizeof desc, "%s%s%s %lld -> %d -> %d",
                 go.model == GCN_MODEL_SAGE  ? "GraphSAGE"
                 : go.model == GCN_MODEL_GIN ? "GIN"
                                             : "GCN",
                 go.model == GCN_MODEL_SAGE ? "-" : "",
                 go.model == GCN_MODEL_SAGE ? aggr_names[go.aggr] : "", (long long)d.n_features,
                 go.hidden, d.n_classes);
    cli_say(
        &c, "model     %s, dropout %g, Adam lr %g, weight decay %g on %s, %d epochs, seed %llu\n",
        desc, dropout, lr, weight_decay, go.model == GCN_MODEL_GCN ? "layer 1" : "every parameter",
        go.epochs, (unsigned long long)go.seed);
    if (go.n_fanout)
        cli_say(&c, "batches   %d training vertices each, fan-outs %d,%d, %s degrees\n",
                (int)go.batch_size, (int)go.fanout[0], (int)go.fanout[1],
                go.sample_degrees == SAGA_SAMPLE_DEGREES_FULL ? "the whole graph's"
                                                              : "the sampled edges'");

    /* ---- train (rank 0 alone writes the log and the trace; every rank learns whether it can,
     * for the others would wait for it in the first collective) */
    if (log_path && c.rank == 0 && !(sink.log = fopen(log_path, "w")))
        st = saga_error(SAGA_ERR_IO, "cannot create '%s': %s", log_path, strerror(errno));
    if (st == SAGA_OK && trace_path && c.rank == 0 && !(go.trace = fopen(trace_path, "w")))
        st = saga_error(SAGA_ERR_IO, "cannot create '%s': %s", trace_path, strerror(errno));
    if ((st = saga_comm_agree(comm, st)) < 0)
        goto fail;
    sink.progress = !c.quiet && isatty(STDERR_FILENO);
    go.predictions = pred_path != NULL; /* the pass that makes them only when they are written */
    st = gcn_train(&r, be, &d, &go, on_epoch, &sink);
    progress_end(&sink);
    if (st < 0) {
        /* the others may be waiting for this rank, unless every rank learnt of the failure */
        agreed = saga_comm_failure_agreed(comm);
        goto fail;
    }
    /* closing them can fail on rank 0 alone, before the collective that gathers the figures */
    if (sink.log) {
        int close_rc = fclose(sink.log);
        sink.log = NULL;
        if (close_rc != 0)
            st = saga_error(SAGA_ERR_IO, "%s: write failed: %s", log_path, strerror(errno));
    }
    if (go.trace) {
        int close_rc = ferror(go.trace) | fclose(go.trace);
        go.trace = NULL;
        if (close_rc != 0 && st == SAGA_OK)
            st = saga_error(SAGA_ERR_IO, "%s: write failed: %s", trace_path, strerror(errno));
    }
    if (st == SAGA_OK && pred_path)
        st = write_predictions(pred_path, &d, &r, comm, c.rank);
    if ((st = saga_comm_agree(comm, st)) < 0)
        goto fail;
    double total = saga_now() - t0;
    double med = gcn_median(r.epoch_ms, r.n_epoch_ms), mean = gcn_mean(r.epoch_ms, r.n_epoch_ms);

    if (r.start_epoch > 0)
        cli_say(&c, "resumed   from %s at epoch %d\n", go.resume, r.start_epoch);
    cli_say(&c, "trained   %d epochs in %.2f s: %.3f ms per epoch (median), %.3f (mean)",
            r.n_epoch_ms, r.seconds, med, mean);
    if (r.prepare_seconds >= 0.05)
        cli_say(&c, "; %.1f s partitioning the graph and placing its blocks first",
                r.prepare_seconds);
    cli_say(&c, "\n");
    if (go.n_fanout)
        cli_say(&c,
                "sampled   %d batches an epoch: %.0f rows and %.0f edges per batch (mean); device "
                "peaks %s to %s (%.2fx)\n",
                r.batches, r.batch_rows, r.batch_edges,
                cli_bytes(b4, sizeof b4, (int64_t)r.batch_peak_min),
                cli_bytes(b5, sizeof b5, (int64_t)r.batch_peak_max),
                r.batch_peak_min ? (double)r.batch_peak_max / (double)r.batch_peak_min : 0.0);
    if (go.n_fanout && r.sample_seconds > 0)
        cli_say(&c,
                "sampling  %.2f s (%.1f M edges/s)%s; the training waited %.2f s for it (%.0f%% "
                "hidden)\n",
                r.sample_seconds, r.sampled_edges / r.sample_seconds / 1e6,
                go.prefetch ? " on its own thread" : " on the training's path",
                go.prefetch ? r.sample_wait_seconds : r.sample_seconds,
                go.prefetch ? 100 * (1 - fmin(1, r.sample_wait_seconds / r.sample_seconds)) : 0.0);
    if (go.n_fanout && shards)
        cli_say(&c, "sampling  over shards: rank 0 sent %s and received %s of rows asked for\n",
                cli_bytes(b4, sizeof b4, (int64_t)r.sample_sent_bytes),
                cli_bytes(b5, sizeof b5, (int64_t)r.sample_recv_bytes));
    cli_say(&c, "final     loss %.4f  train %.4f  val %.4f  (%s parameters)\n", (double)r.loss,
            r.train_acc, r.val_acc, cli_count(b3, sizeof b3, r.n_params));
    if (r.stats.input_packed)
        cli_say(&c,
                "input     the dense features were kept as a CSR: %.2f%% non-zero, at most %g%% "
                "(--sparse-below)\n",
                100 * dense_nz, 100 * go.sparse_below);
    if (go.checkpoint)
        cli_say(&c, "saved     %s (epoch %d)\n", go.checkpoint, r.epochs);
    /* the last epoch's moves, with the peak over every epoch */
    saga_net_stats ns = r.stats;
    ns.peak_device_bytes = r.peak_device_bytes;
    ns.prepare_seconds = r.prepare_seconds;
    if ((st = cli_rank_stats_of(&rs, comm, &ns)) < 0) {
        agreed = false;
        goto fail;
    }
    if (cli_exec_wanted(&ex)) {
        cli_say_net_stats(&c, &ns, " per epoch");
        cli_say(&c, "input: %s, %s on the device\n",
                ns.input_packed   ? "sparse (CSR made from the dense rows)"
                : ns.sparse_input ? "sparse (CSR)"
                                  : "dense rows",
                cli_bytes(b1, sizeof b1, (int64_t)ns.input_bytes));
    }
    if (c.ranks > 1) /* on mini-batches the rows the samples asked for are on the sampling line */
        cli_say_rank_stats(&c, &rs,
                           go.n_fanout ? " by full-graph training passes" : " in the last epoch");
    cli_say(&c, "selected  epoch %d by validation accuracy %.4f: test accuracy %.4f\n",
            r.best_epoch, r.best_val_acc, r.test_at_best_val);
    if (go.early_stop && r.stopped)
        cli_say(&c,
                "early stop: no better validation accuracy in the %d epochs after epoch %d, "
                "training ended after epoch %d; the final model is epoch %d's\n",
                go.early_stop, r.best_epoch, r.epochs, r.model_epoch);
    else if (go.early_stop)
        cli_say(&c,
                "early stop: training ran the %d epochs asked for; the final model is epoch %d's, "
                "of the best validation accuracy\n",
                r.epochs, r.model_epoch);
    cli_say(&c, "test accuracy %.4f (final model, %lld test vertices)\n", r.test_acc,
            (long long)(shards ? d.all_test : d.n_test));

    if (c.json) {
        json j;
        json_init(&j, stdout);
        json_object_begin(&j);
        json_key(&j, "input");
        data_dir ? json_str(&j, data_dir) : json_null(&j);
        json_key(&j, "synthetic");
        synthetic ? json_str(&j, synthetic) : json_null(&j);
        json_key(&j, "vertices"), json_int(&j, shards ? d.all_vertices : d.n_vertices);
        json_key(&j, "edges"), json_int(&j, shards ? d.all_edges : d.n_edges);
        json_key(&j, "features"), json_int(&j, d.n_features);
        json_key(&j, "classes"), json_int(&j, d.n_classes);
        json_key(&j, "train"), json_int(&j, shards ? d.all_train : d.n_train);
        json_key(&j, "val"), json_int(&j, shards ? d.all_val : d.n_val);
        json_key(&j, "test"), json_int(&j, shards ? d.all_test : d.n_test);
        json_key(&j, "shards"), json_bool(&j, shards);
        if (shards) { /* this rank's (rank 0's) */
            json_key(&j, "shard_own_rows"), json_int(&j, d.shard->n_own);
            json_key(&j, "shard_halo_rows"), json_int(&j, d.shard->n_halo);
        }
        cli_json_device(&j, be);
        json_key(&j, "epochs"), json_int(&j, r.epochs);
        json_key(&j, "start_epoch"), json_int(&j, r.start_epoch);
        json_key(&j, "model"), json_str(&j, gcn_model_name(go.model));
        if (go.model == GCN_MODEL_GAT)
            json_key(&j, "heads"), json_int(&j, go.heads);
        if (go.model == GCN_MODEL_SAGE)
            json_key(&j, "aggr"), json_str(&j, aggr_names[go.aggr]);
        json_key(&j, "hidden"), json_int(&j, go.hidden);
        json_key(&j, "lr"), json_num(&j, lr);
        json_key(&j, "dropout"), json_num(&j, dropout);
        json_key(&j, "weight_decay"), json_num(&j, weight_decay);
        json_key(&j, "seed"), json_uint(&j, go.seed);
        json_key(&j, "normalize_features"), json_bool(&j, normalize);
        json_key(&j, "rows_normalized"), json_int(&j, d.norm.n_normalized);
        json_key(&j, "rows_signed"), json_int(&j, d.norm.n_signed);
        json_key(&j, "input_layout"), json_str(&j, ns.sparse_input ? "sparse" : "dense");
        json_key(&j, "input_packed"), json_bool(&j, ns.input_packed);
        json_key(&j, "sparse_below"), json_num(&j, go.sparse_below);
        json_key(&j, "input_nnz"), json_int(&j, input_nnz);
        json_key(&j, "input_bytes"), json_int(&j, (int64_t)ns.input_bytes);
        json_key(&j, "parameters"), json_int(&j, r.n_params);
        json_key(&j, "loss"), json_num(&j, r.loss);
        json_key(&j, "train_accuracy"), json_num(&j, r.train_acc);
        json_key(&j, "val_accuracy"), json_num(&j, r.val_acc);
        json_key(&j, "test_accuracy"), json_num(&j, r.test_acc);
        json_key(&j, "early_stop"), json_int(&j, go.early_stop);
        json_key(&j, "stopped"), json_bool(&j, r.stopped);
        json_key(&j, "model_epoch"), json_int(&j, r.model_epoch);
        json_key(&j, "best_epoch"), json_int(&j, r.best_epoch);
        json_key(&j, "best_val_accuracy"), json_num(&j, r.best_val_acc);
        json_key(&j, "test_accuracy_at_best_val"), json_num(&j, r.test_at_best_val);
        json_key(&j, "epoch_ms_median"), json_num(&j, med);
        json_key(&j, "epoch_ms_mean"), json_num(&j, mean);
        json_key(&j, "load_seconds"), json_num(&j, t_load);
        json_key(&j, "train_seconds"), json_num(&j, r.seconds);
        json_key(&j, "total_seconds"), json_num(&j, total);
        json_key(&j, "device_mem"), json_int(&j, (int64_t)ex.device_mem);
        static const char *const tp[] = {"f32", "bf16", "fp16"};
        json_key(&j, "transfer_precision"), json_str(&j, tp[go.transfer]);
        json_key(&j, "fanout");
        if (go.n_fanout) {
            json_array_begin(&j);
            for (int h = 0; h < go.n_fanout; h++)
                json_int(&j, go.fanout[h]);
            json_array_end(&j);
            json_key(&j, "batch_size"), json_int(&j, go.batch_size);
            json_key(&j, "sample_degrees"),
                json_str(&j, go.sample_degrees == SAGA_SAMPLE_DEGREES_FULL ? "full" : "sampled");
            json_key(&j, "batches"), json_int(&j, r.batches);
            json_key(&j, "batch_rows"), json_num(&j, r.batch_rows);
            json_key(&j, "batch_edges"), json_num(&j, r.batch_edges);
            json_key(&j, "batch_balance"), json_str(&j, gcn_balance_name(go.balance));
            json_key(&j, "batch_peak_min"), json_int(&j, (int64_t)r.batch_peak_min);
            json_key(&j, "batch_peak_max"), json_int(&j, (int64_t)r.batch_peak_max);
            json_key(&j, "prefetch"), json_int(&j, go.prefetch);
            json_key(&j, "eval"), json_str(&j, go.eval_sampled ? "sampled" : "exact");
            json_key(&j, "sample_seconds"), json_num(&j, r.sample_seconds);
            json_key(&j, "sample_wait_seconds"),
                json_num(&j, go.prefetch ? r.sample_wait_seconds : r.sample_seconds);
            json_key(&j, "sampled_edges"), json_num(&j, r.sampled_edges);
            json_key(&j, "sample_comm_bytes");
            json_object_begin(&j);
            json_key(&j, "sent"), json_num(&j, r.sample_sent_bytes);
            json_key(&j, "received"), json_num(&j, r.sample_recv_bytes);
            json_object_end(&j);
        } else {
            json_null(&j);
        }
        cli_json_net_stats(&j, &ns);
        json_key(&j, "halo_rows"), json_int(&j, rs.halo_rows);
        cli_json_rank_stats(&j, &rs);
        json_key(&j, "edge_cut"), json_int(&j, shards ? d.all_edge_cut : r.stats.edge_cut);
        const char *written[4] = {log_path, go.checkpoint, trace_path, pred_path};
        cli_json_outputs(&j, written, 4);
        json_object_end(&j);
        json_finish(&j);
    }
    rc = CLI_OK;
fail:
    progress_end(&sink);
    if (rc != CLI_OK)
        rc = cli_fail_ranks(&c, comm, agreed);
    if (sink.log)
        fclose(sink.log);
    if (go.trace)
        fclose(go.trace);
    cli_rank_stats_free(&rs);
    gcn_result_free(&r);
    gcn_data_free(&d);
    saga_backend_free_all(&be);
    saga_comm_free(&comm);
    return rc;
}
