/* main.c - trains GAT, GraphSAGE, GIN or GCN node classification with the library's layers
 * (saga_layers.h) on a citation graph laid out as
 *   DIR/edges.txt[.gz]  DIR/features.txt[.gz]  DIR/labels.txt  DIR/{train,val,test}_idx.txt
 * (the layout of saga's Cora files and of `saga generate citation`, read and checked by
 * saga_dataset_load), with the net's cross-entropy loss and saga_accuracy for evaluation: a
 * user's own training program, built against an installed saga.
 *
 *   gnn --model gat --data DIR [--epochs 300] [--seed 1] [--quiet]
 *
 * Prints one line per epoch (unless --quiet) and, at the end, the test accuracy at the epoch
 * with the best validation accuracy (model selection on the validation set, as in the GAT
 * paper) as `test_accuracy=...`. Under mpirun DIR may be a shard directory (`saga partition --data
 * DIR --shards R`): each rank then reads its own shard and trains on its local graph, exchanging
 * halo rows before each aggregation (GAT's attention dropout is drawn by the shard's edges). How a
 * layer is written as a vertex program: examples/gin and docs/writing-a-vertex-program.md. */
#include <saga/saga.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct options {
    const char *data, *model;
    const char *device; /* cpu, cuda, cuda:N or auto */
    int epochs, hidden, heads;
    float lr, weight_decay, dropout;
    uint64_t seed;
    bool quiet;
    size_t device_mem;               /* bytes of device memory; 0: no limit */
    bool stream;                     /* stream part by part even when everything fits */
    bool graphs;                     /* saga_net_opts.graphs: passes recorded as CUDA graphs */
    int profile_first, profile_last; /* epochs inside a profiler's capture range; 0: none */
} options;

static void usage(void) {
    fprintf(stderr, "usage: gnn --data DIR [--model gat|sage|gin|gcn] [--epochs N] [--hidden N] "
                    "[--heads N] [--lr X] [--weight-decay X] [--dropout X] [--seed N] "
                    "[--device cpu|cuda|cuda:N|auto] [--device-mem BYTES[K|M|G]] [--stream] "
                    "[--profile-epochs A:B] [--graphs] [--quiet]\n");
}

static int parse_args(options *o, int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quiet")) {
            o->quiet = true;
            continue;
        }
        if (!strcmp(a, "--stream")) {
            o->stream = true;
            continue;
        }
        if (!strcmp(a, "--graphs")) {
            o->graphs = true;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage();
            exit(0);
        }
        if (!v) {
            usage();
            return -1;
        }
        i++;
        if (!strcmp(a, "--data"))
            o->data = v;
        else if (!strcmp(a, "--model"))
            o->model = v;
        else if (!strcmp(a, "--device"))
            o->device = v;
        else if (!strcmp(a, "--epochs"))
            o->epochs = atoi(v);
        else if (!strcmp(a, "--hidden"))
            o->hidden = atoi(v);
        else if (!strcmp(a, "--heads"))
            o->heads = atoi(v);
        else if (!strcmp(a, "--lr"))
            o->lr = strtof(v, NULL);
        else if (!strcmp(a, "--weight-decay"))
            o->weight_decay = strtof(v, NULL);
        else if (!strcmp(a, "--dropout"))
            o->dropout = strtof(v, NULL);
        else if (!strcmp(a, "--profile-epochs")) {
            if (sscanf(v, "%d:%d", &o->profile_first, &o->profile_last) != 2 ||
                o->profile_first < 1 || o->profile_last < o->profile_first) {
                usage();
                return -1;
            }
        } else if (!strcmp(a, "--seed"))
            o->seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--device-mem")) {
            char *end = NULL;
            double b = strtod(v, &end);
            double unit = *end == 'K'   ? 1024.0
                          : *end == 'M' ? 1048576.0
                          : *end == 'G' ? 1073741824.0
                                        : 1.0;
            o->device_mem = (size_t)(b * unit);
        } else {
            usage();
            return -1;
        }
    }
    const char *const models[] = {"gat", "sage", "gin", "gcn"};
    bool known = false;
    for (int k = 0; k < 4; k++)
        known |= o->model && !strcmp(o->model, models[k]);
    if (!o->data || !known || o->epochs < 1 || o->hidden < 1 || o->heads < 1) {
        usage();
        return -1;
    }
    return 0;
}

/* saga_gcn_add, saga_sage_add and saga_gin_add have one shape. */
typedef saga_status (*add_fn)(saga_net *, saga_model *, const char *, int64_t, int64_t,
                              const saga_layer_opts *);

/* The logits of the rows listed alone (the net computes only the rows those read) into their
 * rows of all (n x C), through buf (count x C). */
static saga_status evaluate(saga_net *net, const int32_t *rows, int64_t count, int64_t C,
                            float *buf, float *all) {
    saga_status st = saga_net_forward_rows(net, rows, count, buf);
    for (int64_t i = 0; st == SAGA_OK && i < count; i++)
        memcpy(all + (int64_t)rows[i] * C, buf + i * C, (size_t)C * sizeof *all);
    return st;
}

int main(int argc, char **argv) {
    options o = {.model = "gat",
                 .device = "cpu",
                 .epochs = 300,
                 .hidden = 8,
                 .heads = 8,
                 .lr = 0.005f,
                 .weight_decay = 5e-4f,
                 .dropout = 0.6f,
                 .seed = 1};
    if (argc > 1 && parse_args(&o, argc, argv) < 0)
        return 2;
    if (!o.data) {
        usage();
        return 2;
    }
    bool gat = !strcmp(o.model, "gat");

    saga_comm *comm = NULL;
    saga_backend *be = NULL;
    saga_ctx *c = NULL;
    saga_model *params = NULL;
    saga_optim *opt = NULL;
    saga_net *net = NULL;
    saga_dataset d = {0};
    saga_shard *shard = NULL;
    float *logp = NULL, *eval_out = NULL;
    int32_t *eval_rows = NULL;
    int rc = 1;

    /* The budget, when given, bounds the device memory: a graph that does not fit is streamed
     * through it part by part, with the same results. */
    saga_backend_params bp = saga_backend_params_defaults();
    bp.budget_bytes = o.device_mem;
    /* Under mpirun the ranks train one model together, each on its share of the graph's parts;
     * each takes the GPU of its rank on the machine. */
    if (saga_comm_open(&comm, "auto") < 0)
        goto done;
    bool lead = saga_comm_rank(comm) == 0;
    char device[32];
    if (!strcmp(o.device, "cuda") && saga_comm_local_size(comm) > 1)
        snprintf(device, sizeof device, "cuda:%d", saga_comm_local_rank(comm));
    else
        snprintf(device, sizeof device, "%s", o.device);
    /* The data set, checked, its non-negative feature rows scaled to sum 1 (as GCN and GAT do
     * for Cora); the layers take dense rows. */
    /* A shard directory (saga partition --data DIR --shards R) under R ranks: each rank reads
     * its own shard alone, its local graph with the halo its rows read. */
    char manifest[4096];
    snprintf(manifest, sizeof manifest, "%s/manifest.txt", o.data);
    bool shards = access(manifest, F_OK) == 0;
    if (saga_backend_open(&be, device, &bp) < 0 ||
        (shards
             ? saga_shards_dataset(&d, &shard, o.data, saga_comm_rank(comm), saga_comm_size(comm))
             : saga_dataset_load(&d, o.data, NULL)) < 0 ||
        saga_features_densify(&d.features) < 0)
        goto done;
    int64_t n_features = d.features.n_cols;
    if (saga_ctx_new(&c, be, o.seed) < 0 || saga_model_new(&params, be) < 0)
        goto done;

    /* The network: dropout -> layer -> act -> dropout -> layer, then log-softmax in the loss. */
    int32_t n = saga_graph_n_vertices(d.graph);
    saga_net_opts no = saga_net_opts_defaults();
    no.exec = o.stream ? SAGA_EXEC_STREAM : SAGA_EXEC_AUTO;
    no.graphs = o.graphs;
    /* GAT and GCN attend to the vertex itself too; SAGE and GIN keep it apart */
    no.self_loops =
        gat || !strcmp(o.model, "gcn") ? SAGA_DGRAPH_SELF_LOOPS_ADD : SAGA_DGRAPH_SELF_LOOPS_KEEP;
    no.comm = comm;
    saga_net_halo hx = {0};
    if (shards) { /* the halo's rows come from their owners before each aggregation */
        hx = saga_net_halo_of_shard(shard, comm);
        no.halo = &hx;
        no.comm = NULL;
    }
    if (saga_net_new(&net, c, d.graph, &no) < 0 || saga_net_set_model(net, params) < 0)
        goto done;
    /* two layers of the library: the first with dropout on its input and an activation, the
     * second to the classes; parameters in `params`, the layers owned by the net */
    saga_layer_opts l1 = saga_layer_opts_defaults(), l2 = saga_layer_opts_defaults();
    l1.dropout = l2.dropout = o.dropout;
    l1.seed = o.seed * 1000;
    l2.seed = o.seed * 1000 + 100;
    l1.act = gat ? SAGA_LAYER_ELU : SAGA_LAYER_RELU;
    saga_status st = SAGA_OK;
    if (gat) {
        l1.heads = o.heads;
        l1.attn_dropout = l2.attn_dropout = o.dropout;
        if ((st = saga_gat_add(net, params, "gat1", n_features, o.hidden, &l1)) == SAGA_OK)
            st = saga_gat_add(net, params, "gat2", (int64_t)o.heads * o.hidden, d.n_classes, &l2);
    } else {
        add_fn add = !strcmp(o.model, "sage")  ? saga_sage_add
                     : !strcmp(o.model, "gin") ? saga_gin_add
                                               : saga_gcn_add;
        if ((st = add(net, params, "layer1", n_features, o.hidden, &l1)) == SAGA_OK)
            st = add(net, params, "layer2", o.hidden, d.n_classes, &l2);
    }
    saga_optim_opts oo = saga_optim_opts_defaults(SAGA_OPTIM_ADAM);
    oo.lr = o.lr;
    oo.weight_decay = o.weight_decay;
    bool ok = st == SAGA_OK && saga_optim_new(&opt, params, &oo) == SAGA_OK;
    logp = malloc((size_t)n * (size_t)d.n_classes * sizeof *logp);
    /* evaluated after each epoch: the validation and test vertices */
    eval_rows = malloc(((size_t)(d.n_val + d.n_test) + 1) * sizeof *eval_rows);
    eval_out = malloc(((size_t)(d.n_val + d.n_test) + 1) * (size_t)d.n_classes * sizeof *eval_out);
    if (!eval_rows || !eval_out)
        goto done;
    memcpy(eval_rows, d.val, (size_t)d.n_val * sizeof *eval_rows);
    memcpy(eval_rows + d.n_val, d.test, (size_t)d.n_test * sizeof *eval_rows);
    if (!ok || !logp)
        goto done;
    /* the loss: the mean cross-entropy over the training rows (over shards, every rank's); it
     * reads those rows alone, so the net computes only what they read */
    if (saga_net_set_loss_cross_entropy(net, d.labels, d.train, d.n_train) < 0 ||
        saga_net_set_input(net, d.features.dense, n_features) < 0)
        goto done;

    double best_val = -1, test_at_best = 0, last_loss = 0;
    int best_epoch = 0;
    bool profiling = false;
    for (int epoch = 1; epoch <= o.epochs; epoch++) {
        double t0 = saga_now(), loss = 0;
        if (epoch == o.profile_first) {
            if (saga_backend_profile_range(be, true) < 0)
                goto done;
            profiling = true;
        }
        /* the training pass and the optimizer are queued; the evaluation's wait for its rows
         * ends them, and the loss is read after it: the host waits once an epoch */
        if (saga_net_train_queue(net) < 0 || saga_optim_step(opt) < 0)
            goto done;
        /* inference: logits, whose arg-max is the log-softmax's */
        if (evaluate(net, eval_rows, d.n_val + d.n_test, d.n_classes, eval_out, logp) < 0 ||
            saga_net_train_result(net, &loss, NULL) < 0)
            goto done;
        last_loss = loss;
        if (profiling && (epoch == o.profile_last || epoch == o.epochs)) {
            /* the range holds all of the epochs' work */
            if (saga_backend_synchronize(be) < 0 || saga_backend_profile_range(be, false) < 0)
                goto done;
            profiling = false;
        }
        /* over shards, the right answers of every rank's rows */
        double right[4] = {saga_accuracy(logp, d.n_classes, d.labels, d.val, d.n_val) * d.n_val,
                           saga_accuracy(logp, d.n_classes, d.labels, d.test, d.n_test) * d.n_test,
                           (double)d.n_val, (double)d.n_test};
        right[0] = round(right[0]), right[1] = round(right[1]);
        if (shards && saga_comm_allreduce(comm, right, 4, SAGA_F64, SAGA_COMM_SUM, NULL) < 0)
            goto done;
        double val = right[2] > 0 ? right[0] / right[2] : 0;
        double test = right[3] > 0 ? right[1] / right[3] : 0;
        if (val > best_val) {
            best_val = val;
            test_at_best = test;
            best_epoch = epoch;
        }
        if (!o.quiet && lead)
            printf("epoch %3d  loss %.4f  val %.4f  test %.4f  %.1f ms\n", epoch, loss, val, test,
                   (saga_now() - t0) * 1e3);
    }
    saga_net_stats ns;
    saga_net_get_stats(net, &ns);
    if (lead)
        printf("model=%s best_epoch=%d val_accuracy=%.4f test_accuracy=%.4f loss=%.9g "
               "memory=\"%s\" peak_device_bytes=%zu graph=%d\n",
               o.model, best_epoch, best_val, test_at_best, last_loss, saga_net_describe(net),
               ns.peak_device_bytes, (int)ns.graph);
    rc = 0;

done:
    if (rc && saga_comm_size(comm) > 1) {
        /* the other ranks may be waiting for this one: stop them all */
        fprintf(stderr, "gnn: rank %d: %s\n", saga_comm_rank(comm), saga_last_error());
        saga_comm_abort(comm, 1);
    }
    if (rc)
        fprintf(stderr, "gnn: %s\n", saga_last_error());
    free(logp);
    free(eval_rows);
    free(eval_out);
    saga_net_free(&net);
    saga_optim_free(&opt);
    saga_model_free(&params);
    saga_ctx_free(&c);
    saga_dataset_free(&d);
    saga_shard_close(&shard);
    saga_backend_free_all(&be);
    saga_comm_free(&comm);
    return rc;
}
