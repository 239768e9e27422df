/* bench_program.c - one GCN layer (X W, then the SYMNORM aggregation with self-loops, then a
 * bias) forward and backward on an R-MAT graph, through the fused SpMM path and, for
 * comparison, through the batched path.
 *
 *   bench_program [SCALE [EDGE_FACTOR [ITERS]]]     default: 17 16 10 (131,072 vertices,
 *                                                   2,097,152 edges), 128 -> 16 features
 */
#include "saga.h"
#include "saga_datasets.h"
#include "saga_nn.h"
#include "saga_program.h"

#include <stdio.h>
#include <stdlib.h>

#define F_IN 128
#define F_OUT 16

typedef struct layer {
    saga_tensor *b;
} layer;

static saga_tensor *bias_vertex(saga_ctx *c, const saga_vertex_in *v, void *l) {
    return saga_add_bias(c, v->gathered, ((layer *)l)->b);
}

static saga_tensor *weighted_src(saga_ctx *c, const saga_edge_in *e, void *l) {
    return saga_scale_rows(c, e->src, e->weight);
}

/* Milliseconds per call of one layer (forward, plus backward when train). */
static double time_layer(saga_ctx *c, const saga_program *p, const saga_dgraph *dg, saga_tensor *x,
                         saga_tensor *W, layer *l, bool train, int iters) {
    double t0 = 0;
    for (int i = -2; i < iters; i++) { /* two warm-up calls fill the buffer caches */
        if (i == 0)
            t0 = saga_now();
        saga_ctx_train(c, train);
        saga_tensor *out = saga_program_run(c, p, dg, saga_matmul(c, x, W), NULL, l);
        saga_tensor *loss = saga_mean(c, out);
        if (!loss || (train && saga_backward(c, loss) < 0)) {
            fprintf(stderr, "bench_program: %s\n", saga_last_error());
            exit(1);
        }
        (void)saga_item(loss); /* waits for the work */
        saga_ctx_clear(c);
    }
    return (saga_now() - t0) * 1e3 / iters;
}

int main(int argc, char **argv) {
    saga_rmat_params rp = saga_rmat_params_defaults();
    rp.scale = argc > 1 ? atoi(argv[1]) : 17;
    rp.edge_factor = argc > 2 ? atoi(argv[2]) : 16;
    int iters = argc > 3 ? atoi(argv[3]) : 10;
    saga_graph *g = NULL;
    saga_backend *be = NULL;
    saga_dgraph *dg = NULL;
    saga_ctx *c = NULL;
    saga_model *m = NULL;
    saga_tensor *x = NULL;
    float *hx = NULL;
    int rc = 1;
    if (saga_rmat_graph(&g, &rp, NULL) < 0 || saga_backend_open(&be, "cpu", NULL) < 0)
        goto fail;
    saga_dgraph_opts o = saga_dgraph_opts_defaults();
    o.self_loops = SAGA_DGRAPH_SELF_LOOPS_ADD;
    double t0 = saga_now();
    if (saga_dgraph_new(&dg, be, g, &o) < 0)
        goto fail;
    double t_place = saga_now() - t0;
    int64_t n = saga_dgraph_n_vertices(dg);
    hx = malloc((size_t)n * F_IN * sizeof *hx);
    if (!hx)
        goto fail;
    uint64_t s = 1;
    for (int64_t i = 0; i < n * F_IN; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        hx[i] = (float)((s >> 40) * (1.0 / 16777216.0)) - 0.5f;
    }
    if (saga_tensor_from_host(&x, be, SAGA_F32, n, F_IN, hx) < 0 || saga_ctx_new(&c, be, 1) < 0 ||
        saga_model_new(&m, be) < 0)
        goto fail;
    saga_tensor *W = saga_model_param(m, "W", F_IN, F_OUT, SAGA_INIT_GLOROT, 1);
    layer l = {.b = saga_model_param(m, "b", 1, F_OUT, SAGA_INIT_ZEROS, 1)};
    if (!W || !l.b)
        goto fail;
    saga_program fused = {.scatter = SAGA_SCATTER_SRC,
                          .edge_weight = SAGA_WEIGHT_SYMNORM,
                          .gather = SAGA_GATHER_SUM,
                          .apply_vertex = bias_vertex};
    saga_program batched = fused;
    batched.apply_edge = weighted_src;

    printf("graph: R-MAT scale %d, %lld vertices, %lld edges placed (self-loops added), "
           "placed in %.0f ms\n",
           rp.scale, (long long)n, (long long)saga_dgraph_n_edges(dg), t_place * 1e3);
    printf("GCN layer %d -> %d, %d iterations, backend %s\n", F_IN, F_OUT, iters,
           saga_backend_name(be));
    printf("fused   forward+backward: %8.2f ms\n",
           time_layer(c, &fused, dg, x, W, &l, true, iters));
    printf("fused   forward         : %8.2f ms\n",
           time_layer(c, &fused, dg, x, W, &l, false, iters));
    printf("batched forward+backward: %8.2f ms\n",
           time_layer(c, &batched, dg, x, W, &l, true, iters));
    rc = 0;
fail:
    if (rc)
        fprintf(stderr, "bench_program: %s\n", saga_last_error());
    free(hx);
    saga_model_free(&m);
    saga_ctx_free(&c);
    saga_tensor_free(&x);
    saga_dgraph_free(&dg);
    saga_backend_free_all(&be);
    saga_graph_free(&g);
    return rc;
}
