/* gnn.h - a user's own graph neural networks on saga: GAT and GraphSAGE layers as vertex
 * programs (layers.c) and a training driver (main.c). Built against an installed saga. */
#pragma once

#include <saga/saga.h>

#include <stdbool.h>

#define GAT_MAX_HEADS 16

typedef struct gat_layer {
    int64_t heads, out_per_head;
    float attn_dropout;                /* on the attention coefficients, in training */
    saga_tensor *W;                    /* in x heads*out_per_head */
    saga_tensor *a_src[GAT_MAX_HEADS]; /* out_per_head x 1 per head */
    saga_tensor *a_dst[GAT_MAX_HEADS];
    saga_tensor *b; /* 1 x heads*out_per_head */
    /* as stages of a saga_net: dropout on the layer's input, elu on its output */
    float in_dropout;
    bool elu;
} gat_layer;

typedef struct sage_layer {
    saga_tensor *W; /* 2*in x out: [self | mean of neighbours] */
    saga_tensor *b;
    float in_dropout; /* as stages of a saga_net: dropout on the input, relu on the output */
    bool relu;
} sage_layer;

/* Adds the layer's parameters to m; false (message in saga_last_error()) on failure. */
bool gat_layer_init(gat_layer *l, saga_model *m, const char *name, int64_t in, int64_t heads,
                    int64_t out_per_head, float attn_dropout, uint64_t seed);
/* The layer on h (n x in): n x heads*out_per_head, heads concatenated. NULL after an error. */
saga_tensor *gat_layer_forward(saga_ctx *c, const gat_layer *l, const saga_dgraph *g,
                               saga_tensor *h);

bool sage_layer_init(sage_layer *l, saga_model *m, const char *name, int64_t in, int64_t out,
                     uint64_t seed);
saga_tensor *sage_layer_forward(saga_ctx *c, const sage_layer *l, const saga_dgraph *g,
                                saga_tensor *h);

/* The same layers as stages of a network run by saga_net (in memory, or streamed through the
 * device budget part by part): a vertex stage for the per-vertex work, then the program, whose
 * apply_vertex adds the bias and the activation. l must outlive the net. false on failure. */
bool gat_layer_add(saga_net *net, gat_layer *l);
bool sage_layer_add(saga_net *net, sage_layer *l);
