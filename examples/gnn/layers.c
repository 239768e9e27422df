/* layers.c - two graph layers written as vertex programs: GAT (multi-head attention) and
 * GraphSAGE (mean aggregator). Both use ApplyEdge, so the engine runs them on its general path:
 * edges in batches, messages built per batch by the functions below. */
#include "gnn.h"

#include <stdio.h>

/* ---- GAT (Velickovic et al. 2018) -------------------------------------------------------------
 *
 * Per head k: z = h W_k, e(u->v) = leaky_relu(a_src_k . z_u + a_dst_k . z_v), alpha = softmax of
 * e over the in-edges of v, and h'_v = sum_u alpha(u->v) z_u. The heads are concatenated.
 *
 * The dense work is done once per vertex, before the program runs: z for all heads at once
 * (one matmul), and the two attention terms of every vertex. The program then scatters one row
 * per vertex, [ z | s_src | s_dst ], onto both ends of each edge. */

/* ApplyEdge: the message of each edge of the batch, for all heads side by side. */
static saga_tensor *gat_edge(saga_ctx *c, const saga_edge_in *e, void *user) {
    const gat_layer *l = user; /* the layer itself: it outlives the backward pass */
    int64_t H = l->heads, F = l->out_per_head;
    /* e->src holds [z | s_src | s_dst] of the edge's source, e->dst the same of its target. */
    saga_tensor *score =
        saga_add(c, saga_slice_cols(c, e->src, H * F, H), saga_slice_cols(c, e->dst, H * F + H, H));
    saga_tensor *alpha = saga_edge_softmax(c, e, saga_leaky_relu(c, score, 0.2f));
    alpha = saga_dropout(c, alpha, l->attn_dropout);
    saga_tensor *msg = NULL;
    for (int64_t k = 0; k < H; k++) {
        saga_tensor *head = saga_scale_rows(c, saga_slice_cols(c, e->src, k * F, F),
                                            saga_slice_cols(c, alpha, k, 1));
        msg = msg ? saga_concat(c, msg, head) : head;
    }
    return msg;
}

static const saga_program gat_program = {
    .scatter = SAGA_SCATTER_BOTH,
    .edge_weight = SAGA_WEIGHT_NONE,
    .apply_edge = gat_edge,
    .gather = SAGA_GATHER_SUM,
    .apply_vertex = NULL, /* the bias is added below, on all vertices at once */
};

bool gat_layer_init(gat_layer *l, saga_model *m, const char *name, int64_t in, int64_t heads,
                    int64_t out_per_head, float attn_dropout, uint64_t seed) {
    char n[64];
    if (heads < 1 || heads > GAT_MAX_HEADS) {
        saga_error(SAGA_ERR_INVALID_ARG, "gat: 1 to %d heads, not %lld", GAT_MAX_HEADS,
                   (long long)heads);
        return false;
    }
    l->heads = heads;
    l->attn_dropout = attn_dropout;
    l->out_per_head = out_per_head;
    snprintf(n, sizeof n, "%s.W", name);
    l->W = saga_model_param(m, n, in, heads * out_per_head, SAGA_INIT_GLOROT, seed);
    for (int64_t k = 0; k < heads; k++) {
        snprintf(n, sizeof n, "%s.a_src%lld", name, (long long)k);
        l->a_src[k] = saga_model_param(m, n, out_per_head, 1, SAGA_INIT_GLOROT, seed + 1 + 2 * k);
        snprintf(n, sizeof n, "%s.a_dst%lld", name, (long long)k);
        l->a_dst[k] = saga_model_param(m, n, out_per_head, 1, SAGA_INIT_GLOROT, seed + 2 + 2 * k);
        if (!l->a_src[k] || !l->a_dst[k])
            return false;
    }
    snprintf(n, sizeof n, "%s.b", name);
    l->b = saga_model_param(m, n, 1, heads * out_per_head, SAGA_INIT_ZEROS, 0);
    return l->W && l->b;
}

/* The rows the program scatters, [ z | s_src | s_dst ], from the layer's input h. */
static saga_tensor *gat_rows(saga_ctx *c, const gat_layer *l, saga_tensor *h) {
    int64_t F = l->out_per_head;
    saga_tensor *z = saga_matmul(c, h, l->W);
    saga_tensor *s_src = NULL, *s_dst = NULL;
    for (int64_t k = 0; k < l->heads; k++) {
        saga_tensor *zk = saga_slice_cols(c, z, k * F, F);
        saga_tensor *a = saga_matmul(c, zk, l->a_src[k]);
        saga_tensor *b = saga_matmul(c, zk, l->a_dst[k]);
        s_src = s_src ? saga_concat(c, s_src, a) : a;
        s_dst = s_dst ? saga_concat(c, s_dst, b) : b;
    }
    return saga_concat(c, saga_concat(c, z, s_src), s_dst);
}

saga_tensor *gat_layer_forward(saga_ctx *c, const gat_layer *l, const saga_dgraph *g,
                               saga_tensor *h) {
    saga_tensor *rows = gat_rows(c, l, h);
    return saga_add_bias(c, saga_program_run(c, &gat_program, g, rows, NULL, (void *)l), l->b);
}

/* ---- as stages of a saga_net: the same computation on blocks of vertices ---------------- */

static saga_tensor *gat_stage_rows(saga_ctx *c, const saga_vertex_in *v, void *user) {
    const gat_layer *l = user;
    return gat_rows(c, l, saga_dropout(c, v->self, l->in_dropout));
}

static saga_tensor *gat_stage_vertex(saga_ctx *c, const saga_vertex_in *v, void *user) {
    const gat_layer *l = user;
    saga_tensor *h = saga_add_bias(c, v->gathered, l->b);
    return l->elu ? saga_elu(c, h, 1.0f) : h;
}

static const saga_program gat_stage_program = {
    .scatter = SAGA_SCATTER_BOTH,
    .edge_weight = SAGA_WEIGHT_NONE,
    .apply_edge = gat_edge,
    .gather = SAGA_GATHER_SUM,
    .apply_vertex = gat_stage_vertex,
};

bool gat_layer_add(saga_net *net, gat_layer *l) {
    int64_t hf = l->heads * l->out_per_head;
    return saga_net_add_vertex(net, gat_stage_rows, l, hf + 2 * l->heads) == SAGA_OK &&
           saga_net_add_program(net, &gat_stage_program, l, hf) == SAGA_OK;
}

/* ---- GraphSAGE, mean aggregator (Hamilton et al. 2017) ----------------------------------------
 *
 * h'_v = [h_v | mean over in-edges u->v of h_u] W + b. */

/* ApplyEdge: the message is the source's value itself. Written out to show the stage; with
 * .apply_edge = NULL the engine would fuse scatter, mean and gather into one sparse product,
 * which is faster and gives the same numbers. */
static saga_tensor *sage_edge(saga_ctx *c, const saga_edge_in *e, void *user) {
    (void)c;
    (void)user;
    return e->src;
}

/* ApplyVertex: the vertex's own value next to the mean of its neighbours', projected. */
static saga_tensor *sage_vertex(saga_ctx *c, const saga_vertex_in *v, void *user) {
    const sage_layer *l = user;
    return saga_add_bias(c, saga_matmul(c, saga_concat(c, v->self, v->gathered), l->W), l->b);
}

static const saga_program sage_program = {
    .scatter = SAGA_SCATTER_SRC,
    .edge_weight = SAGA_WEIGHT_NONE,
    .apply_edge = sage_edge,
    .gather = SAGA_GATHER_MEAN,
    .apply_vertex = sage_vertex,
};

bool sage_layer_init(sage_layer *l, saga_model *m, const char *name, int64_t in, int64_t out,
                     uint64_t seed) {
    char n[64];
    snprintf(n, sizeof n, "%s.W", name);
    l->W = saga_model_param(m, n, 2 * in, out, SAGA_INIT_GLOROT, seed);
    snprintf(n, sizeof n, "%s.b", name);
    l->b = saga_model_param(m, n, 1, out, SAGA_INIT_ZEROS, 0);
    return l->W && l->b;
}

saga_tensor *sage_layer_forward(saga_ctx *c, const sage_layer *l, const saga_dgraph *g,
                                saga_tensor *h) {
    return saga_program_run(c, &sage_program, g, h, NULL, (void *)l);
}

static saga_tensor *sage_stage_rows(saga_ctx *c, const saga_vertex_in *v, void *user) {
    const sage_layer *l = user;
    return saga_dropout(c, v->self, l->in_dropout);
}

static saga_tensor *sage_stage_vertex(saga_ctx *c, const saga_vertex_in *v, void *user) {
    const sage_layer *l = user;
    saga_tensor *h = sage_vertex(c, v, user);
    return l->relu ? saga_relu(c, h) : h;
}

static const saga_program sage_stage_program = {
    .scatter = SAGA_SCATTER_SRC,
    .edge_weight = SAGA_WEIGHT_NONE,
    .apply_edge = sage_edge,
    .gather = SAGA_GATHER_MEAN,
    .apply_vertex = sage_stage_vertex,
};

bool sage_layer_add(saga_net *net, sage_layer *l) {
    int64_t in = saga_tensor_rows(l->W) / 2, out = saga_tensor_cols(l->W);
    return saga_net_add_vertex(net, sage_stage_rows, l, in) == SAGA_OK &&
           saga_net_add_program(net, &sage_stage_program, l, out) == SAGA_OK;
}
