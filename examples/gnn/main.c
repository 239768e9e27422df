/* main.c - trains GAT or GraphSAGE node classification on a citation graph laid out as
 *   DIR/edges.txt[.gz]  DIR/features.txt[.gz]  DIR/labels.txt  DIR/{train,val,test}_idx.txt
 * (the layout of saga's Cora files and of `saga generate citation`).
 *
 *   gnn --model gat --data DIR [--epochs 300] [--seed 1] [--quiet]
 *
 * Prints one line per epoch (unless --quiet) and, at the end, the test accuracy at the epoch
 * with the best validation accuracy (model selection on the validation set, as in the GAT
 * paper) as `test_accuracy=...`. */
#include "gnn.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct options {
    const char *data, *model;
    int epochs, hidden, heads;
    float lr, weight_decay, dropout;
    uint64_t seed;
    bool quiet;
} options;

typedef struct dataset {
    saga_graph *graph;
    saga_tensor *x;                  /* n x F, rows scaled to sum 1 */
    saga_tensor *labels;             /* n x 1, i32 */
    saga_tensor *train, *val, *test; /* i32 row lists */
    int32_t *host_labels;
    int32_t *host_val, *host_test;
    int64_t n_val, n_test, n_features;
    int32_t n_classes;
} dataset;

typedef struct model {
    bool gat;
    gat_layer g1, g2;
    sage_layer s1, s2;
    float dropout;
} model;

static void usage(void) {
    fprintf(stderr, "usage: gnn --data DIR [--model gat|sage] [--epochs N] [--hidden N] "
                    "[--heads N] [--lr X] [--weight-decay X] [--dropout X] [--seed N] "
                    "[--quiet]\n");
}

static int parse_args(options *o, int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quiet")) {
            o->quiet = true;
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
        else if (!strcmp(a, "--seed"))
            o->seed = strtoull(v, NULL, 10);
        else {
            usage();
            return -1;
        }
    }
    bool gat = o->model && !strcmp(o->model, "gat");
    if (!o->data || !(gat || (o->model && !strcmp(o->model, "sage"))) || o->epochs < 1 ||
        o->hidden < 1 || o->heads < 1) {
        usage();
        return -1;
    }
    return 0;
}

/* DIR/name, or DIR/name.gz when only that exists. */
static const char *data_path(char *buf, size_t n, const char *dir, const char *name) {
    snprintf(buf, n, "%s/%s", dir, name);
    FILE *f = fopen(buf, "rb");
    if (f) {
        fclose(f);
        return buf;
    }
    snprintf(buf, n, "%s/%s.gz", dir, name);
    return buf;
}

static saga_status index_tensor(saga_tensor **out, int32_t **host, int64_t *n, saga_backend *be,
                                const char *dir, const char *name, const saga_graph *g) {
    char path[4096];
    int32_t *idx = NULL;
    saga_status st = saga_index_read(&idx, n, data_path(path, sizeof path, dir, name), g);
    if (st == SAGA_OK)
        st = saga_tensor_from_host(out, be, SAGA_I32, *n, 1, idx);
    if (host && st == SAGA_OK)
        *host = idx;
    else
        saga_free(idx);
    return st;
}

static saga_status load(dataset *d, saga_backend *be, const char *dir) {
    char path[4096];
    saga_load_opts lo = saga_load_opts_defaults();
    lo.graph.undirected = true;
    saga_status st =
        saga_graph_load(&d->graph, data_path(path, sizeof path, dir, "edges.txt"), &lo);
    if (st < 0)
        return st;

    float *x = NULL;
    int64_t rows = 0, cols = 0;
    saga_features_opts fo = saga_features_opts_defaults();
    fo.graph = d->graph;
    st = saga_features_read(&x, &rows, &cols, data_path(path, sizeof path, dir, "features.txt"),
                            &fo);
    if (st < 0)
        return st;
    for (int64_t i = 0; i < rows; i++) { /* row-normalise, as GCN and GAT do for Cora */
        double s = 0;
        for (int64_t j = 0; j < cols; j++)
            s += x[i * cols + j];
        for (int64_t j = 0; s > 0 && j < cols; j++)
            x[i * cols + j] = (float)(x[i * cols + j] / s);
    }
    d->n_features = cols;
    st = saga_tensor_from_host(&d->x, be, SAGA_F32, rows, cols, x);
    saga_free(x);
    if (st < 0)
        return st;

    int64_t n = 0;
    st = saga_labels_read(&d->host_labels, &n, data_path(path, sizeof path, dir, "labels.txt"),
                          d->graph);
    if (st < 0)
        return st;
    d->n_classes = 0;
    for (int64_t i = 0; i < n; i++)
        if (d->host_labels[i] + 1 > d->n_classes)
            d->n_classes = d->host_labels[i] + 1;
    st = saga_tensor_from_host(&d->labels, be, SAGA_I32, n, 1, d->host_labels);
    int64_t n_train = 0;
    if (st == SAGA_OK)
        st = index_tensor(&d->train, NULL, &n_train, be, dir, "train_idx.txt", d->graph);
    if (st == SAGA_OK)
        st = index_tensor(&d->val, &d->host_val, &d->n_val, be, dir, "val_idx.txt", d->graph);
    if (st == SAGA_OK)
        st = index_tensor(&d->test, &d->host_test, &d->n_test, be, dir, "test_idx.txt", d->graph);
    return st;
}

static void dataset_free(dataset *d) {
    saga_graph_free(&d->graph);
    saga_tensor_free(&d->x);
    saga_tensor_free(&d->labels);
    saga_tensor_free(&d->train);
    saga_tensor_free(&d->val);
    saga_tensor_free(&d->test);
    saga_free(d->host_labels);
    saga_free(d->host_val);
    saga_free(d->host_test);
}

/* Log-probabilities of every vertex (n x classes). */
static saga_tensor *forward(saga_ctx *c, const model *m, const saga_dgraph *g, saga_tensor *x) {
    saga_tensor *h = saga_dropout(c, x, m->dropout);
    if (m->gat) {
        h = saga_elu(c, gat_layer_forward(c, &m->g1, g, h), 1.0f);
        h = gat_layer_forward(c, &m->g2, g, saga_dropout(c, h, m->dropout));
    } else {
        h = saga_relu(c, sage_layer_forward(c, &m->s1, g, h));
        h = sage_layer_forward(c, &m->s2, g, saga_dropout(c, h, m->dropout));
    }
    return saga_log_softmax(c, h);
}

/* Fraction of the listed vertices whose most likely class is their label. */
static double accuracy(const float *logp, int32_t n_classes, const int32_t *labels,
                       const int32_t *idx, int64_t n_idx) {
    int64_t hits = 0;
    for (int64_t k = 0; k < n_idx; k++) {
        const float *row = logp + (int64_t)idx[k] * n_classes;
        int32_t best = 0;
        for (int32_t j = 1; j < n_classes; j++)
            if (row[j] > row[best])
                best = j;
        hits += best == labels[idx[k]];
    }
    return n_idx ? (double)hits / (double)n_idx : 0.0;
}

int main(int argc, char **argv) {
    options o = {.model = "gat",
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

    saga_backend *be = NULL;
    saga_ctx *c = NULL;
    saga_model *params = NULL;
    saga_optim *opt = NULL;
    saga_dgraph *g = NULL;
    dataset d = {0};
    float *logp = NULL;
    int rc = 1;

    /* "cpu": saga's CUDA backend does not have the f32 training kernels yet. */
    if (saga_backend_open(&be, "cpu", NULL) < 0 || load(&d, be, o.data) < 0)
        goto done;
    saga_dgraph_opts go = saga_dgraph_opts_defaults();
    /* GAT attends to the vertex itself too; SAGE keeps it apart (the [self | mean] concat). */
    go.self_loops = gat ? SAGA_DGRAPH_SELF_LOOPS_ADD : SAGA_DGRAPH_SELF_LOOPS_KEEP;
    if (saga_dgraph_new(&g, be, d.graph, &go) < 0 || saga_ctx_new(&c, be, o.seed) < 0 ||
        saga_model_new(&params, be) < 0)
        goto done;

    model m = {.gat = gat, .dropout = o.dropout};
    bool ok =
        gat ? gat_layer_init(&m.g1, params, "gat1", d.n_features, o.heads, o.hidden, o.dropout,
                             o.seed * 1000) &&
                  gat_layer_init(&m.g2, params, "gat2", (int64_t)o.heads * o.hidden, 1, d.n_classes,
                                 o.dropout, o.seed * 1000 + 100)
            : sage_layer_init(&m.s1, params, "sage1", d.n_features, o.hidden, o.seed * 1000) &&
                  sage_layer_init(&m.s2, params, "sage2", o.hidden, d.n_classes,
                                  o.seed * 1000 + 100);
    saga_optim_opts oo = saga_optim_opts_defaults(SAGA_OPTIM_ADAM);
    oo.lr = o.lr;
    oo.weight_decay = o.weight_decay;
    if (!ok || saga_optim_new(&opt, params, &oo) < 0)
        goto done;

    int64_t n = saga_graph_n_vertices(d.graph);
    logp = malloc((size_t)n * (size_t)d.n_classes * sizeof *logp);
    if (!logp)
        goto done;
    double best_val = -1, test_at_best = 0;
    int best_epoch = 0;
    for (int epoch = 1; epoch <= o.epochs; epoch++) {
        double t0 = saga_now();
        saga_ctx_train(c, true);
        saga_tensor *loss = saga_nll_loss(c, forward(c, &m, g, d.x), d.labels, d.train);
        if (!loss || saga_backward(c, loss) < 0 || saga_optim_step(opt) < 0)
            goto done;
        float train_loss = saga_item(loss);
        saga_ctx_clear(c);

        saga_ctx_train(c, false);
        saga_tensor *out = forward(c, &m, g, d.x);
        if (!out || saga_tensor_to_host(out, logp) < 0)
            goto done;
        saga_ctx_clear(c);
        double val = accuracy(logp, d.n_classes, d.host_labels, d.host_val, d.n_val);
        double test = accuracy(logp, d.n_classes, d.host_labels, d.host_test, d.n_test);
        if (val > best_val) {
            best_val = val;
            test_at_best = test;
            best_epoch = epoch;
        }
        if (!o.quiet)
            printf("epoch %3d  loss %.4f  val %.4f  test %.4f  %.1f ms\n", epoch, train_loss, val,
                   test, (saga_now() - t0) * 1e3);
    }
    printf("model=%s best_epoch=%d val_accuracy=%.4f test_accuracy=%.4f\n", o.model, best_epoch,
           best_val, test_at_best);
    rc = 0;

done:
    if (rc)
        fprintf(stderr, "gnn: %s\n", saga_last_error());
    free(logp);
    saga_optim_free(&opt);
    saga_model_free(&params);
    saga_dgraph_free(&g);
    saga_ctx_free(&c);
    dataset_free(&d);
    saga_backend_free_all(&be);
    return rc;
}
