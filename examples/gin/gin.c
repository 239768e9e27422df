/* gin.c - a user's own graph isomorphism network (GIN, Xu et al. 2019) on saga: node
 * classification on a data set in the Cora layout, trained in device memory or streamed through
 * a device budget part by part, written only against the installed library.
 *
 *   gin --data DIR [--epochs 200] [--hidden 64] [--lr 0.01] [--weight-decay 5e-4]
 *       [--dropout 0.5] [--seed 1] [--device cpu|cuda|cuda:N|auto]
 *       [--device-mem BYTES[K|M|G]] [--stream] [--quiet]
 *
 * A GIN layer is h'_v = MLP((1 + eps) h_v + sum over in-neighbours u of h_u), eps a learnable
 * scalar and MLP two linear layers with a relu between them. Two layers (the first followed by a
 * relu), dropout before each, the net's cross-entropy loss (saga_net_set_loss_cross_entropy),
 * Adam. Prints one line per epoch (unless --quiet) and at the end the test accuracy at the epoch
 * with the best validation accuracy, as `test_accuracy=...`. Under mpirun DIR may be a shard
 * directory (`saga partition --data DIR --shards R`): each rank then reads its own shard alone and
 * trains on its local graph, the halo's rows coming from their owners before each aggregation. */
#include <saga/saga.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct options {
    const char *data;
    const char *device;
    int epochs, hidden;
    float lr, weight_decay, dropout;
    uint64_t seed;
    bool quiet;
    size_t device_mem; /* bytes of device memory; 0: no limit */
    bool stream;       /* stream part by part even when everything fits */
} options;

/* ---- the layer ------------------------------------------------------------------------------
 *
 * The MLP's first linear layer commutes with the sum: ((1 + eps) h_v + sum h_u) W1 =
 * (1 + eps) h_v W1 + sum h_u W1. So the layer is two stages of a saga_net: a vertex stage that
 * projects every row once (dropout, then W1: the narrow rows are what the program moves), and a
 * program whose messages are the projected rows as they are (no apply_edge: the engine runs
 * Scatter-Gather as one sparse product) and whose apply_vertex adds (1 + eps) times the
 * vertex's own projected row, then the rest of the MLP. */

typedef struct gin_layer {
    saga_tensor *W1, *b1, *W2, *b2; /* the MLP: in x hidden, 1 x hidden, hidden x out, 1 x out */
    saga_tensor *eps;               /* 1 x 1, from 0 */
    float dropout;                  /* on the layer's input, in training */
    bool relu;                      /* on the layer's output */
} gin_layer;

/* Vertex stage: dropout(h) W1, on dense rows or on the stored entries of sparse ones. */
static saga_tensor *gin_project(saga_ctx *c, const saga_vertex_in *v, void *user) {
    const gin_layer *l = user;
    if (v->sparse) {
        saga_sparse x = saga_sparse_dropout(c, v->sparse, l->dropout);
        return x.values ? saga_spmm(c, &x, l->W1) : NULL;
    }
    return saga_matmul(c, saga_dropout(c, v->self, l->dropout), l->W1);
}

/* ApplyVertex: v->self is the vertex's projected row, v->gathered the sum of its neighbours'. */
static saga_tensor *gin_vertex(saga_ctx *c, const saga_vertex_in *v, void *user) {
    const gin_layer *l = user;
    saga_tensor *h = saga_add(c, saga_add(c, v->self, saga_scale(c, v->self, l->eps)), v->gathered);
    h = saga_relu(c, saga_add_bias(c, h, l->b1));
    h = saga_add_bias(c, saga_matmul(c, h, l->W2), l->b2);
    return l->relu ? saga_relu(c, h) : h;
}

static const saga_program gin_program = {
    .scatter = SAGA_SCATTER_SRC,
    .edge_weight = SAGA_WEIGHT_NONE,
    .apply_edge = NULL, /* the message is the source's row: one sparse product */
    .gather = SAGA_GATHER_SUM,
    .apply_vertex = gin_vertex,
};

/* Adds the layer's parameters to m (Glorot weights from seed, zero biases and eps). */
static bool gin_layer_init(gin_layer *l, saga_model *m, const char *name, int64_t in,
                           int64_t hidden, int64_t out, uint64_t seed) {
    char n[64];
    snprintf(n, sizeof n, "%s.W1", name);
    l->W1 = saga_model_param(m, n, in, hidden, SAGA_INIT_GLOROT, seed);
    snprintf(n, sizeof n, "%s.b1", name);
    l->b1 = saga_model_param(m, n, 1, hidden, SAGA_INIT_ZEROS, 0);
    snprintf(n, sizeof n, "%s.W2", name);
    l->W2 = saga_model_param(m, n, hidden, out, SAGA_INIT_GLOROT, seed + 1);
    snprintf(n, sizeof n, "%s.b2", name);
    l->b2 = saga_model_param(m, n, 1, out, SAGA_INIT_ZEROS, 0);
    snprintf(n, sizeof n, "%s.eps", name);
    l->eps = saga_model_param(m, n, 1, 1, SAGA_INIT_ZEROS, 0);
    return l->W1 && l->b1 && l->W2 && l->b2 && l->eps;
}

static bool gin_layer_add(saga_net *net, gin_layer *l) {
    return saga_net_add_vertex(net, gin_project, l, saga_tensor_cols(l->W1)) == SAGA_OK &&
           saga_net_add_program(net, &gin_program, l, saga_tensor_cols(l->W2)) == SAGA_OK;
}

/* ---- the driver --------------------------------------------------------------------------- */

static void usage(void) {
    fprintf(stderr, "usage: gin --data DIR [--epochs N] [--hidden N] [--lr X] [--weight-decay X] "
                    "[--dropout X] [--seed N] [--device cpu|cuda|cuda:N|auto] "
                    "[--device-mem BYTES[K|M|G]] [--stream] [--quiet]\n");
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
        else if (!strcmp(a, "--device"))
            o->device = v;
        else if (!strcmp(a, "--epochs"))
            o->epochs = atoi(v);
        else if (!strcmp(a, "--hidden"))
            o->hidden = atoi(v);
        else if (!strcmp(a, "--lr"))
            o->lr = strtof(v, NULL);
        else if (!strcmp(a, "--weight-decay"))
            o->weight_decay = strtof(v, NULL);
        else if (!strcmp(a, "--dropout"))
            o->dropout = strtof(v, NULL);
        else if (!strcmp(a, "--seed"))
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
    if (!o->data || o->epochs < 1 || o->hidden < 1 || !(o->dropout >= 0 && o->dropout < 1)) {
        usage();
        return -1;
    }
    return 0;
}

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
    options o = {.device = "cpu",
                 .epochs = 200,
                 .hidden = 64,
                 .lr = 0.01f,
                 .weight_decay = 5e-4f,
                 .dropout = 0.5f,
                 .seed = 1};
    if (parse_args(&o, argc, argv) < 0)
        return 2;

    saga_comm *comm = NULL;
    saga_backend *be = NULL;
    saga_ctx *c = NULL;
    saga_model *params = NULL;
    saga_optim *opt = NULL;
    saga_net *net = NULL;
    saga_dataset d = {0};
    saga_shard *shard = NULL;
    float *scores = NULL, *eval_out = NULL;
    int32_t *eval_rows = NULL;
    int rc = 1;

    /* The budget, when given, bounds the device memory: a graph that does not fit is streamed
     * through it part by part, with the same results. */
    saga_backend_params bp = saga_backend_params_defaults();
    bp.budget_bytes = o.device_mem;
    /* Under mpirun the processes are ranks; a shard directory (saga partition --data DIR
     * --shards R) gives each its own shard alone: its rows, their in-edges and the halo */
    if (saga_comm_open(&comm, "auto") < 0 || saga_backend_open(&be, o.device, &bp) < 0)
        goto done;
    const bool lead = saga_comm_rank(comm) == 0;
    char manifest[4096];
    snprintf(manifest, sizeof manifest, "%s/manifest.txt", o.data);
    const bool shards = access(manifest, F_OK) == 0;
    /* edges, features (row-normalised), labels and the split, checked */
    if ((shards
             ? saga_shards_dataset(&d, &shard, o.data, saga_comm_rank(comm), saga_comm_size(comm))
             : saga_dataset_load(&d, o.data, NULL)) < 0)
        goto done;
    if (saga_ctx_new(&c, be, o.seed) < 0 || saga_model_new(&params, be) < 0)
        goto done;

    const int64_t F = d.features.n_cols, H = o.hidden, C = d.n_classes;
    gin_layer l1 = {.dropout = o.dropout, .relu = true}, l2 = {.dropout = o.dropout};
    bool ok = gin_layer_init(&l1, params, "gin1", F, H, H, o.seed * 1000) &&
              gin_layer_init(&l2, params, "gin2", H, H, C, o.seed * 1000 + 100);
    saga_optim_opts oo = saga_optim_opts_defaults(SAGA_OPTIM_ADAM);
    oo.lr = o.lr;
    oo.weight_decay = o.weight_decay;
    if (!ok || saga_optim_new(&opt, params, &oo) < 0)
        goto done;

    /* The network: project, aggregate, MLP, relu; project, aggregate, MLP; log-softmax in the
     * loss. GIN sums the neighbours and adds the vertex itself through eps: no self-loops. */
    saga_net_opts no = saga_net_opts_defaults();
    no.exec = o.stream ? SAGA_EXEC_STREAM : SAGA_EXEC_AUTO;
    no.self_loops = SAGA_DGRAPH_SELF_LOOPS_KEEP;
    saga_net_halo hx = {0};
    if (shards) { /* the halo's rows come from their owners before each aggregation */
        hx = saga_net_halo_of_shard(shard, comm);
        no.halo = &hx;
    }
    /* with ranks, the model whose gradients they sum */
    if (saga_net_new(&net, c, d.graph, &no) < 0 || saga_net_set_model(net, params) < 0 ||
        !gin_layer_add(net, &l1) || !gin_layer_add(net, &l2))
        goto done;
    const int64_t n = d.n_vertices;
    scores = malloc((size_t)n * (size_t)C * sizeof *scores);
    /* evaluated after each epoch: the validation and test vertices */
    eval_rows = malloc(((size_t)(d.n_val + d.n_test) + 1) * sizeof *eval_rows);
    eval_out = malloc(((size_t)(d.n_val + d.n_test) + 1) * (size_t)C * sizeof *eval_out);
    if (!eval_rows || !eval_out)
        goto done;
    memcpy(eval_rows, d.val, (size_t)d.n_val * sizeof *eval_rows);
    memcpy(eval_rows + d.n_val, d.test, (size_t)d.n_test * sizeof *eval_rows);
    if (!scores) {
        saga_error(SAGA_ERR_OUT_OF_MEMORY, "gin: %lld vertices", (long long)n);
        goto done;
    }
    /* the loss: the mean cross-entropy over the training rows (over shards, every rank's); it
     * reads those rows alone, so the net computes only what they read */
    saga_status st = saga_net_set_loss_cross_entropy(net, d.labels, d.train, d.n_train);
    if (st == SAGA_OK)
        st = d.features.dense ? saga_net_set_input(net, d.features.dense, F)
                              : saga_net_set_input_csr(net, d.features.offsets, d.features.indices,
                                                       d.features.values, F);
    if (st < 0)
        goto done;

    double best_val = -1, test_at_best = 0, last_loss = 0;
    int best_epoch = 0;
    for (int epoch = 1; epoch <= o.epochs; epoch++) {
        double t0 = saga_now(), loss = 0;
        if (saga_net_train_step(net, &loss) < 0 || saga_optim_step(opt) < 0)
            goto done;
        /* inference: logits, whose arg-max is the log-softmax's */
        if (evaluate(net, eval_rows, d.n_val + d.n_test, C, eval_out, scores) < 0)
            goto done;
        /* over shards, the right answers of every rank's rows */
        double right[4] = {round(saga_accuracy(scores, C, d.labels, d.val, d.n_val) * d.n_val),
                           round(saga_accuracy(scores, C, d.labels, d.test, d.n_test) * d.n_test),
                           (double)d.n_val, (double)d.n_test};
        if (shards && saga_comm_allreduce(comm, right, 4, SAGA_F64, SAGA_COMM_SUM, NULL) < 0)
            goto done;
        double val = right[2] > 0 ? right[0] / right[2] : 0;
        double test = right[3] > 0 ? right[1] / right[3] : 0;
        last_loss = loss;
        if (val > best_val) {
            best_val = val;
            test_at_best = test;
            best_epoch = epoch;
        }
        if (!o.quiet && lead)
            printf("epoch %3d  loss %.4f  val %.4f  test %.4f  eps %.3f %.3f  %.1f ms\n", epoch,
                   loss, val, test, saga_item(l1.eps), saga_item(l2.eps), (saga_now() - t0) * 1e3);
    }
    saga_net_stats ns;
    saga_net_get_stats(net, &ns);
    if (lead)
        printf("model=gin best_epoch=%d val_accuracy=%.4f test_accuracy=%.4f loss=%.9g "
               "memory=\"%s\" peak_device_bytes=%zu\n",
               best_epoch, best_val, test_at_best, last_loss, saga_net_describe(net),
               ns.peak_device_bytes);
    rc = 0;

done:
    if (rc)
        fprintf(stderr, "gin: %s\n", saga_last_error());
    free(scores);
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
