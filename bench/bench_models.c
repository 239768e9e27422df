/* bench_models.c - the training epoch and the evaluation of five graph networks on a data set with
 * a train/validation/test split (Cora's Planetoid split by default), through saga_net in memory:
 * a 2-layer and a 3-layer GCN, GraphSAGE with mean aggregation, a GAT-like attention network
 * (the batched path) and GIN (sum aggregation, then a two-layer MLP). The loss reads the training
 * vertices alone (saga_net_set_loss_rows); the evaluation reads the validation and test vertices
 * (saga_net_forward_rows where the library has it, BENCH_FORWARD_ROWS; else every row). Prints one
 * line per model: median ms of a training step (with the optimizer's), of an evaluation, and with
 * how many stages after the first trained on fewer than every row and how many rows the first
 * trained on, and with BENCH_FORWARD_ROWS (a library with saga_net_forward_rows and
 * saga_net_stats.stage_rows; older ones give loss_rows_stages and head_rows) the rows the stages
 * computed in each (summed over the stages).
 *
 *   bench_models DATA_DIR [EPOCHS]       (BENCH_EXPLAIN=1: each net's plan after its line)
 *
 * BENCH_DEVICE picks the backend (default cpu; cuda, cuda:N); BENCH_BUDGET gives it a memory
 * budget, under which the nets stream: BYTES, /K for a K-th of each net's in-memory peak, or
 * all/K for a K-th of the peak of the same net whose loss reads every row (a short in-memory run
 * first finds either); BENCH_PARTS=K streams by K parts (saga's choice without).
 * Each line also gives the budget, the parts, the last epoch's loss and the sum of the evaluated
 * outputs, to set runs on two devices side by side.
 *
 * Uses only the public API, so that the same file builds against another version of the library
 * for a side-by-side run (bench/models.sh). */
#include "saga.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct layer {
    saga_tensor *W, *W2, *b, *a;
    bool relu;
    float dropout;
} layer;

static saga_tensor *project(saga_ctx *c, const saga_vertex_in *v, void *l_) {
    layer *l = l_;
    return saga_matmul(c, saga_dropout(c, v->self, l->dropout), l->W);
}

static saga_tensor *bias_act(saga_ctx *c, const saga_vertex_in *v, void *l_) {
    layer *l = l_;
    saga_tensor *h = saga_add_bias(c, v->gathered, l->b);
    return l->relu ? saga_relu(c, h) : h;
}

/* GIN's MLP on the summed rows (the vertex's own included by its self loop) */
static saga_tensor *gin_mlp(saga_ctx *c, const saga_vertex_in *v, void *l_) {
    layer *l = l_;
    saga_tensor *h = saga_relu(c, saga_add_bias(c, saga_matmul(c, v->gathered, l->W), l->b));
    h = saga_matmul(c, saga_dropout(c, h, l->dropout), l->W2);
    return l->relu ? saga_relu(c, h) : h;
}

static saga_tensor *attend(saga_ctx *c, const saga_edge_in *e, void *l_) {
    layer *l = l_;
    saga_tensor *s = saga_leaky_relu(c, saga_matmul(c, saga_concat(c, e->src, e->dst), l->a), 0.2f);
    saga_tensor *alpha = saga_dropout(c, saga_edge_softmax(c, e, s), l->dropout);
    return saga_scale_rows(c, e->src, alpha);
}

static const saga_program GCN = {.scatter = SAGA_SCATTER_SRC,
                                 .edge_weight = SAGA_WEIGHT_SYMNORM,
                                 .gather = SAGA_GATHER_SUM,
                                 .apply_vertex = bias_act};
static const saga_program SAGE = {.scatter = SAGA_SCATTER_SRC,
                                  .edge_weight = SAGA_WEIGHT_NONE,
                                  .gather = SAGA_GATHER_MEAN,
                                  .apply_vertex = bias_act};
static const saga_program GAT = {.scatter = SAGA_SCATTER_BOTH,
                                 .edge_weight = SAGA_WEIGHT_NONE,
                                 .apply_edge = attend,
                                 .gather = SAGA_GATHER_SUM,
                                 .apply_vertex = bias_act};
static const saga_program GIN = {.scatter = SAGA_SCATTER_SRC,
                                 .edge_weight = SAGA_WEIGHT_NONE,
                                 .gather = SAGA_GATHER_SUM,
                                 .apply_vertex = gin_mlp};

typedef struct loss_data {
    const int32_t *labels;
    int64_t n_train;
    int32_t *lab;
} loss_data;

/* the mean NLL over the rows the loss sees (the training rows) */
static saga_tensor *nll(saga_ctx *c, const saga_vertex_in *v, const int32_t *ids, void *u) {
    loss_data *L = u;
    for (int32_t i = 0; i < v->count; i++)
        L->lab[i] = L->labels[ids[i]];
    saga_tensor *t = saga_ctx_from_host(c, SAGA_I32, v->count, 1, L->lab);
    saga_tensor *l = saga_nll_loss(c, saga_log_softmax(c, v->self), t, NULL);
    return saga_affine(c, l, (float)v->count / (float)L->n_train, 0.0f);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if ((x) < 0) {                                                                             \
            fprintf(stderr, "bench_models: %s\n", saga_last_error());                              \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Trains and evaluates one model for `epochs` epochs under `budget` bytes (0: none); prints its
 * line unless quiet. Returns the device peak of its last epoch. */
static size_t run(const char *name, const saga_dataset *d, int epochs, int depth, size_t budget,
                  bool quiet, bool every_row) {
    const int64_t F = d->features.n_cols, H = 16, C = d->n_classes;
    const int32_t n = saga_graph_n_vertices(d->graph);
    const bool gin = !strcmp(name, "gin"), gat = !strcmp(name, "gat");
    const saga_program *prog = gin ? &GIN : gat ? &GAT : !strcmp(name, "sage") ? &SAGE : &GCN;
    saga_backend *be = NULL;
    saga_ctx *c = NULL;
    saga_model *m = NULL;
    saga_optim *opt = NULL;
    saga_net *net = NULL;
    saga_backend_params bp = saga_backend_params_defaults();
    const char *dev = getenv("BENCH_DEVICE");
    bp.budget_bytes = budget;
    CHECK(saga_backend_open(&be, dev && *dev ? dev : "cpu", &bp));
    CHECK(saga_ctx_new(&c, be, 1));
    CHECK(saga_model_new(&m, be));
    layer l[4];
    memset(l, 0, sizeof l);
    saga_net_opts no = saga_net_opts_defaults();
    no.self_loops = SAGA_DGRAPH_SELF_LOOPS_ADD;
    const char *parts = getenv("BENCH_PARTS");
    no.parts = parts ? atoi(parts) : 0;
    CHECK(saga_net_new(&net, c, d->graph, &no));
    int64_t in = F;
    for (int k = 0; k < depth; k++) {
        const bool last = k == depth - 1;
        const int64_t out = last ? C : H;
        char nm[16];
        l[k] = (layer){.relu = !last, .dropout = 0.5f};
        snprintf(nm, sizeof nm, "W%d", k);
        if (gin) {
            /* the sum of the input rows, then the MLP (in -> H -> out) */
            l[k].W = saga_model_param(m, nm, in, H, SAGA_INIT_GLOROT, 10 + (uint64_t)k);
            snprintf(nm, sizeof nm, "V%d", k);
            l[k].W2 = saga_model_param(m, nm, H, out, SAGA_INIT_GLOROT, 20 + (uint64_t)k);
            snprintf(nm, sizeof nm, "b%d", k);
            l[k].b = saga_model_param(m, nm, 1, H, SAGA_INIT_ZEROS, 0);
            CHECK(saga_net_add_program(net, prog, &l[k], out));
        } else {
            l[k].W = saga_model_param(m, nm, in, out, SAGA_INIT_GLOROT, 10 + (uint64_t)k);
            snprintf(nm, sizeof nm, "b%d", k);
            l[k].b = saga_model_param(m, nm, 1, out, SAGA_INIT_ZEROS, 0);
            snprintf(nm, sizeof nm, "a%d", k);
            l[k].a = saga_model_param(m, nm, 2 * out, 1, SAGA_INIT_GLOROT, 30 + (uint64_t)k);
            CHECK(saga_net_add_vertex(net, project, &l[k], out));
            CHECK(saga_net_add_program(net, prog, &l[k], out));
        }
        in = out;
    }
    saga_optim_opts oo = saga_optim_opts_defaults(SAGA_OPTIM_ADAM);
    oo.lr = 0.01f;
    CHECK(saga_optim_new(&opt, m, &oo));
    loss_data ld = {d->labels, d->n_train, malloc((size_t)n * sizeof(int32_t))};
    CHECK(saga_net_set_loss(net, nll, &ld));
    if (!every_row) /* else the loss reads every row (a probe of the every-row peak) */
        CHECK(saga_net_set_loss_rows(net, d->train, d->n_train));
    CHECK(saga_net_set_input(net, d->features.dense, F));
    const int64_t n_eval = d->n_val + d->n_test;
    int32_t *eval = malloc((size_t)n_eval * sizeof *eval);
    memcpy(eval, d->val, (size_t)d->n_val * sizeof *eval);
    memcpy(eval + d->n_val, d->test, (size_t)d->n_test * sizeof *eval);
    float *out = malloc((size_t)n * (size_t)C * sizeof *out);
    double *tt = malloc((size_t)epochs * sizeof *tt), *te = malloc((size_t)epochs * sizeof *te);
    int64_t rows_train = 0, rows_eval = 0, head = 0;
    int subset = 0;
    double loss = 0;
    size_t peak = 0;
    int32_t parts_used = 1;
    for (int e = 0; e < epochs; e++) {
        double t0 = saga_now();
        CHECK(saga_net_train_step(net, &loss));
        CHECK(saga_optim_step(opt));
        double t1 = saga_now();
        saga_net_stats st;
        saga_net_get_stats(net, &st);
        peak = st.peak_device_bytes > peak ? st.peak_device_bytes : peak; /* training's */
        parts_used = st.parts;
#ifdef BENCH_FORWARD_ROWS
        subset = 0;
        for (int s = 1; s < st.stages && s < SAGA_NET_STAGE_ROWS; s++)
            subset += st.stage_rows[s] < n;
        head = st.stage_rows[0] < n ? st.stage_rows[0] : 0;
        rows_train = st.rows_computed;
        CHECK(saga_net_forward_rows(net, eval, n_eval, out));
        saga_net_get_stats(net, &st);
        rows_eval = st.rows_computed;
#else
        subset = st.loss_rows_stages;
        head = st.head_rows;
        CHECK(saga_net_forward(net, out));
#endif
        double t2 = saga_now();
        /* the first epoch prepares the net: left out */
        tt[e] = (t1 - t0 - (e == 0 ? st.prepare_seconds : 0)) * 1e3;
        te[e] = (t2 - t1) * 1e3;
    }
    int skip = epochs > 1; /* the first epoch loads the blocks */
    double mt = median(tt + skip, epochs - skip), me = median(te + skip, epochs - skip);
    if (quiet)
        goto done;
    printf("%-6s %d stages  train %8.3f ms  eval %8.3f ms  epoch %8.3f ms", name,
           2 * depth - (gin ? depth : 0), mt, me, mt + me);
    printf("  training: %d stages after the first on fewer rows, the first on %lld", subset,
           (long long)(head ? head : n));
    if (rows_train)
        printf("  rows computed: train %lld, eval %lld (every row: %lld)", (long long)rows_train,
               (long long)rows_eval, (long long)n * (2 * depth - (gin ? depth : 0)));
    double sum = 0; /* the evaluated rows' outputs (forward_rows packs them; forward gives all) */
    for (int64_t i = 0; i < n_eval; i++)
        for (int64_t j = 0; j < C; j++)
#ifdef BENCH_FORWARD_ROWS
            sum += out[i * C + j];
#else
            sum += out[(int64_t)eval[i] * C + j];
#endif
    printf("  budget %zu  parts %d  loss %.9g  eval sum %.9g\n", budget, (int)parts_used, loss,
           sum);
#ifdef BENCH_FORWARD_ROWS
    if (getenv("BENCH_EXPLAIN")) /* the plan, stage by stage */
        CHECK(saga_net_explain(net, stdout));
#endif
done:
    free(ld.lab);
    free(eval);
    free(out);
    free(tt);
    free(te);
    saga_net_free(&net);
    saga_optim_free(&opt);
    saga_model_free(&m);
    saga_ctx_free(&c);
    saga_backend_free_all(&be);
    return peak;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_models DATA_DIR [EPOCHS]\n");
        return 2;
    }
    int epochs = argc > 2 ? atoi(argv[2]) : 50;
    saga_dataset d = {0};
    CHECK(saga_dataset_load(&d, argv[1], NULL));
    CHECK(saga_features_densify(&d.features));
    const char *b = getenv("BENCH_BUDGET");
    const bool all = b && !strncmp(b, "all/", 4);
    const int k = b && (b[0] == '/' || all) ? atoi(b + (all ? 4 : 1)) : 0;
    const size_t bytes = b && !k ? (size_t)strtoull(b, NULL, 10) : 0;
    const char *names[] = {"gcn", "gcn", "sage", "gat", "gin"};
    for (int i = 0; i < 5; i++) {
        const int depth = i == 1 ? 3 : 2;
        size_t budget = k > 0 ? run(names[i], &d, 2, depth, 0, true, all) / (size_t)k : bytes;
        run(names[i], &d, epochs, depth, budget, false, false);
    }
    saga_dataset_free(&d);
    return 0;
}
