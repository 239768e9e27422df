/* net_models.h - the models the executor tests train (test_net.c, test_net_ranks.c): a citation
 * data set, two-layer GCN, GAT-like and GraphSAGE-like programs with dropout, and a mean NLL loss
 * over every vertex, split into the blocks' shares. Include after <cmocka.h>. */
#pragma once

#include "saga_datasets.h"
#include "saga_net.h"

#include <stdio.h>

typedef struct net_data {
    saga_graph *g;
    float *x;
    int32_t *labels;
    int32_t n, F, C;
} net_data;

/* A generated citation graph with features and labels (once: later calls keep the first). */
static void net_data_load(net_data *d, int32_t n_vertices, int32_t n_classes, int32_t n_features,
                          int32_t words, uint64_t seed) {
    if (d->g)
        return;
    saga_citation_params p = saga_citation_params_defaults();
    p.n_vertices = n_vertices;
    p.n_classes = n_classes;
    p.avg_degree = 8;
    p.n_features = n_features;
    p.words_per_vertex = words;
    p.seed = seed;
    saga_citation *c = NULL;
    assert_int_equal(saga_citation_generate(&c, &p), SAGA_OK);
    assert_int_equal(saga_citation_graph(&d->g, c, NULL), SAGA_OK);
    assert_int_equal(saga_citation_features(&d->x, c), SAGA_OK);
    d->n = c->n_vertices;
    d->F = c->n_features;
    d->C = c->n_classes;
    d->labels = c->labels;
    c->labels = NULL;
    saga_citation_free(&c);
}

static void net_data_free(net_data *d) {
    saga_graph_free(&d->g);
    saga_free(d->x);
    saga_free(d->labels);
    d->x = NULL;
    d->labels = NULL;
}

/* Bounds (test_util.h) on the difference of two trainings of the two-layer model of width H on d
 * (net_model_stages) that add in different orders: loss[k] relative to step k's loss, out relative
 * to the magnitude of the outputs after `steps` steps. One step chains the forward pass's sums (the
 * first product, over F; the aggregation, over at most the largest in-degree plus the self loop;
 * GAT's edge softmax, over the same edges; the second product, over H; its aggregation and edge
 * softmax; log-softmax, over C) and the backward pass's (the aggregations transposed, over at most
 * the largest out-degree plus one; the weight gradients, over the n rows; the input gradient of the
 * second product, over C); the loss adds its mean over n, the outputs the forward pass after the
 * steps. An SGD step moves a weight by less than its magnitude (lr 0.5 on the gradient of a mean),
 * so it passes its gradient's relative error on once. u16 > 0: one of the two moves the input rows
 * and the aggregations' weights in 16 bits of that unit roundoff, which adds u16 for each product
 * that reads them (the first product, its weight gradient, both aggregations each way). */
typedef struct net_bounds {
    double loss[3], out;
} net_bounds;

static net_bounds net_run_bounds(const net_data *d, int H, int steps, double u16) {
    saga_graph_summary gs;
    saga_graph_summarize(d->g, &gs);
    const int64_t in = gs.in_degree_max + 1, out = gs.out_degree_max + 1;
    saga_test_chain fwd = {3 * u16, 0}, step = {0, 0}, loss = {0, 0};
    saga_test_chain_add(&fwd, d->F, 1);
    saga_test_chain_add(&fwd, in, 4);
    saga_test_chain_add(&fwd, H, 1);
    step.rel = fwd.rel + 3 * u16;
    saga_test_chain_add(&step, d->C, 2);
    saga_test_chain_add(&step, out, 2);
    saga_test_chain_add(&step, d->n, 2);
    saga_test_chain_add(&loss, d->C, 1);
    saga_test_chain_add(&loss, d->n, 1);
    net_bounds b;
    for (int k = 0; k < 3; k++)
        b.loss[k] = k * step.rel + fwd.rel + loss.rel;
    b.out = steps * step.rel + fwd.rel;
    return b;
}

/* Two trainings of 3 steps of that model (a, and b as `what` says it ran): each step's loss and
 * the outputs after the steps within net_run_bounds, the outputs relative to their magnitude (the
 * mean of a's). */
static void net_assert_close_runs(const net_data *d, int H, double u16, const double *loss_a,
                                  const float *out_a, const double *loss_b, const float *out_b,
                                  const char *what) {
    const net_bounds nb = net_run_bounds(d, H, 3, u16);
    char msg[96];
    for (int i = 0; i < 3; i++) {
        snprintf(msg, sizeof msg, "step %d's loss, %s", i, what);
        saga_test_assert_close_f64(msg, &loss_a[i], &loss_b[i], 1, nb.loss[i], 0);
    }
    const int64_t n = (int64_t)d->n * d->C;
    snprintf(msg, sizeof msg, "outputs, %s", what);
    saga_test_assert_close_f32(msg, out_a, out_b, n, nb.out, saga_test_mean_abs_f32(out_a, n));
}

typedef struct layer {
    saga_tensor *W, *b, *a; /* a: GAT attention vector (2 x 1 heads of width out) */
    saga_tensor *M1, *M2;   /* GIN-like: the MLP of apply_vertex (width out -> 4 out -> out) */
    bool relu;
    float dropout;
} layer;

/* rows times W, after dropout (on the non-zeros of sparse input rows) */
static saga_tensor *project(saga_ctx *c, const saga_vertex_in *v, void *l_) {
    layer *l = l_;
    if (v->sparse) {
        saga_sparse x = saga_sparse_dropout(c, v->sparse, l->dropout);
        return x.values ? saga_spmm(c, &x, l->W) : NULL;
    }
    return saga_matmul(c, saga_dropout(c, v->self, l->dropout), l->W);
}

static saga_tensor *bias_act(saga_ctx *c, const saga_vertex_in *v, void *l_) {
    layer *l = l_;
    saga_tensor *h = saga_add_bias(c, v->gathered, l->b);
    return l->relu ? saga_relu(c, h) : h;
}

/* the normalized aggregation plus bias: the fused SpMM path */
static const saga_program GCN = {
    .scatter = SAGA_SCATTER_SRC,
    .edge_weight = SAGA_WEIGHT_SYMNORM,
    .gather = SAGA_GATHER_SUM,
    .apply_vertex = bias_act,
};

/* GAT-like: attention logits from [h_src | h_dst], softmax over each destination's in-edges,
 * dropout on the attention: the batched path (max_batch_edges set by the caller) */
static saga_tensor *attend(saga_ctx *c, const saga_edge_in *e, void *l_) {
    layer *l = l_;
    saga_tensor *s = saga_leaky_relu(c, saga_matmul(c, saga_concat(c, e->src, e->dst), l->a), 0.2f);
    saga_tensor *alpha = saga_dropout(c, saga_edge_softmax(c, e, s), l->dropout);
    return saga_scale_rows(c, e->src, alpha);
}

static saga_program gat_program(int64_t max_batch_edges) {
    return (saga_program){
        .scatter = SAGA_SCATTER_BOTH,
        .edge_weight = SAGA_WEIGHT_NONE,
        .apply_edge = attend,
        .gather = SAGA_GATHER_SUM,
        .apply_vertex = bias_act,
        .max_batch_edges = max_batch_edges,
    };
}

/* GraphSAGE-like: the mean of the in-neighbours plus the vertex's own row (v->self), then bias
 * and activation: the fused MEAN path, with gradients through self as well. */
static saga_tensor *sage_vertex(saga_ctx *c, const saga_vertex_in *v, void *l_) {
    layer *l = l_;
    saga_tensor *h = saga_add_bias(c, saga_add(c, v->self, v->gathered), l->b);
    return l->relu ? saga_relu(c, h) : h;
}

static const saga_program SAGE = {
    .scatter = SAGA_SCATTER_SRC,
    .edge_weight = SAGA_WEIGHT_NONE,
    .gather = SAGA_GATHER_MEAN,
    .apply_vertex = sage_vertex,
};

/* A CPU backend without a budget, a context (seed 3) on it and an empty model. */
static inline void open_cpu_model(saga_backend **be, saga_ctx **c, saga_model **m) {
    assert_int_equal(saga_backend_cpu_new(be, NULL), SAGA_OK);
    assert_int_equal(saga_ctx_new(c, *be, 3), SAGA_OK);
    assert_int_equal(saga_model_new(m, *be), SAGA_OK);
}

typedef struct loss_ctx {
    const int32_t *labels;
    int32_t n;
} loss_ctx;

/* Sum over the block's rows of -log p(label) / n: the mean NLL over all vertices. */
static saga_tensor *nll_rows(saga_ctx *c, const saga_vertex_in *v, const int32_t *ids, void *u) {
    loss_ctx *lc = u;
    int32_t *lab = test_malloc((size_t)v->count * sizeof *lab + 4);
    for (int32_t i = 0; i < v->count; i++)
        lab[i] = lc->labels[ids[i]];
    /* a context tensor: it lives as long as the block's tape, which the backward pass needs */
    saga_tensor *t = saga_ctx_from_host(c, SAGA_I32, v->count, 1, lab);
    test_free(lab);
    if (!t)
        return NULL; /* the context's error (net_ranks_fail.sh fails its allocations) */
    saga_tensor *l = saga_nll_loss(c, saga_log_softmax(c, v->self), t, NULL);
    return saga_affine(c, l, (float)v->count / (float)lc->n, 0.0f);
}

/* The two-layer model's parameters in m (hidden width H, d's features and classes): W1, b1, W2,
 * b2 and the GAT attention vectors a1, a2 (unused by GCN), from fixed seeds; dropout 0.3 before
 * each layer. */
static void net_model_params(saga_model *m, const net_data *d, int H, layer *l1, layer *l2) {
    *l1 = (layer){.relu = true, .dropout = 0.3f};
    *l2 = (layer){.relu = false, .dropout = 0.3f};
    l1->W = saga_model_param(m, "W1", d->F, H, SAGA_INIT_GLOROT, 11);
    l1->b = saga_model_param(m, "b1", 1, H, SAGA_INIT_ZEROS, 0);
    l2->W = saga_model_param(m, "W2", H, d->C, SAGA_INIT_GLOROT, 12);
    l2->b = saga_model_param(m, "b2", 1, d->C, SAGA_INIT_ZEROS, 0);
    l1->a = saga_model_param(m, "a1", 2 * H, 1, SAGA_INIT_GLOROT, 13);
    l2->a = saga_model_param(m, "a2", 2 * d->C, 1, SAGA_INIT_GLOROT, 14);
    assert_non_null(l2->a);
}

/* The net's stages: rows times W1, prog, rows times W2, prog. */
static void net_model_stages(saga_net *net, const saga_program *prog, const net_data *d, int H,
                             layer *l1, layer *l2) {
    assert_int_equal(saga_net_add_vertex(net, project, l1, H), SAGA_OK);
    assert_int_equal(saga_net_add_program(net, prog, l1, H), SAGA_OK);
    assert_int_equal(saga_net_add_vertex(net, project, l2, d->C), SAGA_OK);
    assert_int_equal(saga_net_add_program(net, prog, l2, d->C), SAGA_OK);
}
