/* cc.c - weakly connected components by label propagation, written as a vertex program. */
#include "cc.h"

#include <stdlib.h>
#include <string.h>

/* ApplyVertex: max(self, gathered), as self + relu(gathered - self); exact on integers below
 * 2^24, which is what the labels are. */
static saga_tensor *cc_vertex(saga_ctx *c, const saga_vertex_in *v, void *user) {
    (void)user;
    return saga_add(c, v->self, saga_relu(c, saga_sub(c, v->gathered, v->self)));
}

static const saga_program cc_program = {
    .scatter = SAGA_SCATTER_SRC,
    .edge_weight = SAGA_WEIGHT_NONE,
    .apply_edge = NULL,
    .gather = SAGA_GATHER_MAX, /* a vertex without in-edges gathers 0: below every label */
    .apply_vertex = cc_vertex,
};

/* The graph the rounds run on: g itself when it holds both directions of every edge, else its
 * symmetrized copy, left in *own for the caller to free. */
static saga_status undirected_of(const saga_graph **use, saga_graph **own, cc_result *r,
                                 const saga_graph *g) {
    saga_status st = SAGA_OK;
    *use = g;
    if (!saga_graph_is_symmetric(g)) {
        SAGA_TRY(saga_graph_symmetrize(own, g));
        *use = *own;
        r->symmetrized = true;
    }
    r->n_edges = saga_graph_n_edges(*use);
fail:
    return st;
}

/* The label n-1-m names m, the smallest vertex of the component; sizes counted in size. */
static void name_components(int32_t *out, int32_t *size, cc_result *r, const float *lab,
                            int32_t n) {
    for (int32_t v = 0; v < n; v++) {
        out[v] = n - 1 - (int32_t)lab[v];
        if (size[out[v]]++ == 0)
            r->n_components++;
        if (size[out[v]] > r->largest)
            r->largest = size[out[v]];
    }
}

saga_status cc_run(int32_t **comp, cc_result *result, saga_backend *be, const saga_graph *g,
                   cc_progress_fn progress, void *ud) {
    saga_status st = SAGA_OK;
    saga_ctx *c = NULL;
    saga_dgraph *dg = NULL;
    saga_tensor *x = NULL;
    float *lab = NULL;
    int32_t *out = NULL, *size = NULL;
    saga_graph *own = NULL;
    int32_t n = saga_graph_n_vertices(g);
    cc_result r = {0};

    /* ---- check inputs ---- */
    SAGA_CHECK(n <= (1 << 24), SAGA_ERR_UNSUPPORTED,
               "cc: %d vertices; labels travel as f32, exact up to 2^24 = 16777216 vertices", n);

    /* ---- initialize ---- */
    SAGA_TRY(undirected_of(&g, &own, &r, g));
    SAGA_TRY(saga_alloc_array((void **)&lab, n ? (size_t)n : 1, sizeof *lab, "cc labels"));
    SAGA_TRY(saga_alloc_array((void **)&out, n ? (size_t)n : 1, sizeof *out, "cc components"));
    SAGA_TRY(saga_alloc_zeroed((void **)&size, n ? (size_t)n : 1, sizeof *size, "cc sizes"));
    for (int32_t v = 0; v < n; v++)
        lab[v] = (float)(n - 1 - v);
    SAGA_TRY(saga_ctx_new(&c, be, 0));
    SAGA_TRY(saga_dgraph_new(&dg, be, g, NULL));
    SAGA_TRY(saga_tensor_from_host(&x, be, SAGA_F32, n, 1, lab));

    /* ---- iterate: one round of Scatter / Gather MAX / ApplyVertex until nothing changes ---- */
    double t0 = saga_now();
    for (;;) {
        saga_tensor *y = saga_program_run(c, &cc_program, dg, x, NULL, NULL);
        /* Labels only grow, so the sum of the increments is zero exactly when none changed. */
        saga_tensor *change = saga_sum(c, saga_sub(c, y, x));
        SAGA_TRY(saga_ctx_status(c));
        r.iterations++;
        if (progress)
            progress(ud, r.iterations);
        float delta = saga_item(change);
        /* y is the context's and goes at the clear: keep it in x, on the device. */
        saga_stream *s = saga_backend_default_stream(be);
        SAGA_TRY(saga_memcpy_d2d_async(s, saga_tensor_data(x), saga_tensor_cdata(y),
                                       saga_tensor_nbytes(x)));
        SAGA_TRY(saga_stream_synchronize(s));
        saga_ctx_clear(c);
        if (delta == 0.0f)
            break;
    }
    SAGA_TRY(saga_tensor_to_host(x, lab));
    r.seconds = saga_now() - t0;

    name_components(out, size, &r, lab, n);
    *comp = out;
    out = NULL;
    *result = r;

fail:
    saga_free(size);
    saga_free(out);
    saga_free(lab);
    saga_tensor_free(&x);
    saga_ctx_free(&c);
    saga_dgraph_free(&dg);
    saga_graph_free(&own);
    return st;
}

saga_status cc_run_net(int32_t **comp, cc_result *result, saga_backend *be, const saga_graph *g,
                       const saga_net_opts *no, const int32_t *vertex, int64_t n_all,
                       saga_net_stats *stats, cc_progress_fn progress, void *ud) {
    saga_status st = SAGA_OK;
    saga_ctx *c = NULL;
    saga_net *net = NULL;
    float *lab = NULL, *next = NULL;
    int32_t *out = NULL, *size = NULL;
    saga_graph *own = NULL;
    int32_t n = saga_graph_n_vertices(g);
    cc_result r = {0};
    const saga_net_halo *hx = no ? no->halo : NULL;
    const int64_t n_lab = hx ? n_all : n;
    SAGA_CHECK(n_lab <= (1 << 24), SAGA_ERR_UNSUPPORTED,
               "cc: %lld vertices; labels travel as f32, exact up to 2^24 = 16777216 vertices",
               (long long)n_lab);
    SAGA_CHECK(!hx || vertex, SAGA_ERR_INVALID_ARG,
               "cc: over shards the rows' vertices are needed");
    /* every rank symmetrizes its copy of the graph alike; over shards the whole graph is
     * symmetric (the caller's to check) and each rank holds its rows' in-edges, every edge */
    if (hx)
        r.n_edges = saga_graph_n_edges(g);
    else
        SAGA_TRY(undirected_of(&g, &own, &r, g));
    size_t n1 = n ? (size_t)n : 1;
    SAGA_TRY(saga_alloc_array((void **)&lab, n1, sizeof *lab, "cc labels"));
    SAGA_TRY(saga_alloc_array((void **)&next, n1, sizeof *next, "cc labels"));
    SAGA_TRY(saga_alloc_array((void **)&out, n1, sizeof *out, "cc components"));
    SAGA_TRY(saga_alloc_zeroed((void **)&size, n1, sizeof *size, "cc sizes"));
    for (int32_t v = 0; v < n; v++)
        lab[v] = (float)(n_lab - 1 - (hx ? vertex[v] : v));
    /* the rows whose labels a round gives: every row, or over shards the own rows */
    const int32_t rows = hx ? hx->n_own : n;
    SAGA_TRY(saga_ctx_new(&c, be, 0));
    SAGA_TRY(saga_net_new(&net, c, g, no));
    SAGA_TRY(saga_net_add_program(net, &cc_program, NULL, 1));
    double t0 = saga_now();
    for (;;) {
        SAGA_TRY(saga_net_set_input(net, lab, 1));
        SAGA_TRY(saga_net_forward(net, next));
        r.iterations++;
        if (progress)
            progress(ud, r.iterations);
        int32_t changed = 0;
        for (int32_t v = 0; v < rows; v++)
            changed = changed || next[v] != lab[v];
        if (hx) /* every rank goes on while one changed; the halo's labels come from the owners */
            SAGA_TRY(saga_comm_allreduce(hx->comm, &changed, 1, SAGA_I32, SAGA_COMM_MAX, NULL));
        memcpy(lab, next, (size_t)rows * sizeof *lab);
        if (!changed)
            break;
    }
    r.seconds = saga_now() - t0;
    if (stats)
        saga_net_get_stats(net, stats);
    if (hx) /* the label n_all-1-m names m */
        for (int32_t v = 0; v < rows; v++)
            out[v] = (int32_t)(n_lab - 1 - (int64_t)lab[v]);
    else
        name_components(out, size, &r, lab, n);
    *comp = out;
    out = NULL;
    *result = r;
fail:
    saga_net_free(&net);
    saga_ctx_free(&c);
    saga_free(lab);
    saga_free(next);
    saga_free(out);
    saga_free(size);
    saga_graph_free(&own);
    return st;
}
