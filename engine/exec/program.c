/* program.c - the vertex-program executor: graphs placed on a backend, the fused SpMM path, the
 * batched Scatter-ApplyEdge-Gather path with recomputation in the backward pass, and the edge
 * softmax. */
#include "saga_program.h"

#include "program_impl.h"

#include <math.h>
#include <string.h>

#define PROGRAM_DEFAULT_BATCH_EDGES ((int64_t)1 << 20)

/* ---- a graph placed on a backend ---------------------------------------------------------- */

/* Edge values of one (weight mode, mean) pair, in in-CSR order and in out-CSR order. */
typedef struct dgraph_values {
    bool ready;
    float *in;  /* device, nnz entries, or NULL: every value is 1 */
    float *out; /* the same values in the transposed (out-CSR) order */
} dgraph_values;

/* How the destinations are cut into batches for one max_batch_edges. */
typedef struct dgraph_plan {
    int64_t max_edges;
    int64_t n_batches;
    int32_t *v0;    /* host, n_batches + 1: batch b holds destinations v0[b] .. v0[b+1]-1 */
    int64_t *d_off; /* device, n + n_batches: batch b's offsets, relative to its first edge,
                     * start at d_off + v0[b] + b */
    size_t d_off_bytes;
    struct dgraph_plan *next;
} dgraph_plan;

struct saga_dgraph {
    saga_backend *be;
    saga_ctx *up;  /* a block's: the context whose stream its uploads are ordered in, or NULL */
    int32_t n;     /* destination rows */
    int32_t n_src; /* source rows: n for a whole graph, more for a block (saga_dgraph_new_block) */
    int64_t m;
    /* a block's degrees for SYMNORM (n and n_src entries), or NULL: counted in the placed graph */
    double *h_deg_in, *h_deg_out;
    /* the placed in-CSR on the host (the edge order of edata), its weights, and the transpose */
    int64_t *h_in_off;  /* n + 1 */
    int32_t *h_in_src;  /* m */
    float *h_in_w;      /* m or NULL */
    int64_t *h_out_off; /* n + 1 */
    int32_t *h_out_dst; /* m */
    int64_t *h_perm;    /* m: out-CSR position -> in-CSR position */
    /* device copies */
    int64_t *d_in_off;
    int32_t *d_in_src;   /* per edge (in order): its source */
    int32_t *d_edge_dst; /* per edge (in order): its destination */
    int64_t *d_out_off;
    int32_t *d_out_dst;
    /* lazily computed; not thread-safe (a dgraph is used by one context at a time) */
    dgraph_values vals[SAGA_WEIGHT_COUNT][2];
    dgraph_plan *plans;
    float *d_ones; /* m ones: the weight column of an unweighted graph */
};

saga_dgraph_opts saga_dgraph_opts_defaults(void) {
    saga_dgraph_opts o = {.self_loops = SAGA_DGRAPH_SELF_LOOPS_KEEP};
    return o;
}

/* Device copy of bytes of host memory into *out (NULL when bytes == 0) for g: in the stream order
 * of its context's uploads where it has one (a block), else synchronous. */
static saga_status dev_upload(const saga_dgraph *g, void **out, const void *host, size_t bytes) {
    saga_status st = SAGA_OK;
    void *d = NULL;
    SAGA_TRY(saga_backend_alloc(g->be, &d, bytes));
    if (bytes && g->up) {
        SAGA_TRY(saga_ctx_upload(g->up, d, host, bytes));
    } else if (bytes) {
        saga_stream *s = saga_backend_default_stream(g->be);
        SAGA_TRY(saga_memcpy_h2d_async(s, d, host, bytes));
        SAGA_TRY(saga_stream_synchronize(s));
    }
    *out = d;
    return SAGA_OK;
fail:
    saga_backend_free(g->be, d, bytes);
    return st;
}

/* Builds the placed in-CSR on the host: g's in-edges, with exactly one self-loop per vertex
 * when add_loops (an existing self-loop keeps the weight of its first copy; further copies
 * go). Rows stay sorted by source. */
saga_status saga_place_in_csr(const saga_graph *g, bool add_loops, int64_t **off_out,
                              int32_t **src_out, float **w_out, int64_t *m_out) {
    saga_status st = SAGA_OK;
    int64_t *off = NULL;
    int32_t *src = NULL;
    float *w = NULL;
    saga_csr in = saga_graph_in(g);
    int32_t n = in.n_rows;
    int64_t m = in.nnz;
    if (add_loops) {
        m = 0;
        for (int32_t v = 0; v < n; v++) {
            int64_t loops = 0;
            for (int64_t k = in.offsets[v]; k < in.offsets[v + 1]; k++)
                loops += in.indices[k] == v;
            m += in.offsets[v + 1] - in.offsets[v] - loops + 1;
        }
    }
    SAGA_TRY(
        saga_alloc_array((void **)&off, (size_t)n + 1, sizeof(int64_t), "placed graph offsets"));
    SAGA_TRY(saga_alloc_array((void **)&src, m ? (size_t)m : 1, sizeof(int32_t),
                              "placed graph sources"));
    if (in.weights)
        SAGA_TRY(saga_alloc_array((void **)&w, m ? (size_t)m : 1, sizeof(float),
                                  "placed graph weights"));
    int64_t k_out = 0;
    off[0] = 0;
    for (int32_t v = 0; v < n; v++) {
        bool placed = !add_loops;
        float loop_w = 1.0f;
        bool seen_loop = false;
        for (int64_t k = in.offsets[v]; k < in.offsets[v + 1]; k++) {
            int32_t u = in.indices[k];
            if (add_loops && u == v) {
                if (!seen_loop && in.weights)
                    loop_w = in.weights[k];
                seen_loop = true;
                continue;
            }
            if (!placed && u > v) {
                src[k_out] = v;
                if (w)
                    w[k_out] = loop_w;
                k_out++;
                placed = true;
            }
            src[k_out] = u;
            if (w)
                w[k_out] = in.weights[k];
            k_out++;
        }
        /* the row's sources were all below v: the loop goes last, with the weight it had (the
         * self-loops come after the smaller sources in a sorted row, so loop_w is known) */
        if (!placed) {
            src[k_out] = v;
            if (w)
                w[k_out] = loop_w;
            k_out++;
        }
        off[v + 1] = k_out;
    }
    *off_out = off;
    *src_out = src;
    *w_out = w;
    *m_out = m;
    return SAGA_OK;
fail:
    saga_free(off);
    saga_free(src);
    saga_free(w);
    return st;
}

static saga_status dgraph_place(saga_dgraph *dg, const saga_graph *g, bool add_loops) {
    saga_status st = SAGA_OK;
    SAGA_TRY(saga_place_in_csr(g, add_loops, &dg->h_in_off, &dg->h_in_src, &dg->h_in_w, &dg->m));
    dg->n = dg->n_src = saga_graph_n_vertices(g);
fail:
    return st;
}

/* The transpose of the placed in-CSR (rows = sources), with the permutation between the two
 * edge orders so that edge values need computing once. */
static saga_status dgraph_transpose(saga_dgraph *dg) {
    saga_status st = SAGA_OK;
    int32_t n = dg->n, ns = dg->n_src;
    int64_t m = dg->m;
    SAGA_TRY(saga_alloc_zeroed((void **)&dg->h_out_off, (size_t)ns + 1, sizeof(int64_t),
                               "placed graph out-offsets"));
    SAGA_TRY(saga_alloc_array((void **)&dg->h_out_dst, m ? (size_t)m : 1, sizeof(int32_t),
                              "placed graph destinations"));
    SAGA_TRY(saga_alloc_array((void **)&dg->h_perm, m ? (size_t)m : 1, sizeof(int64_t),
                              "placed graph edge permutation"));
    for (int64_t k = 0; k < m; k++)
        dg->h_out_off[dg->h_in_src[k] + 1]++;
    for (int32_t u = 0; u < ns; u++)
        dg->h_out_off[u + 1] += dg->h_out_off[u];
    /* destinations in increasing order land in each out-row in increasing order */
    int64_t *fill = NULL;
    SAGA_TRY(saga_alloc_array((void **)&fill, (size_t)ns + 1, sizeof(int64_t), "transpose cursor"));
    memcpy(fill, dg->h_out_off, ((size_t)ns + 1) * sizeof(int64_t));
    for (int32_t v = 0; v < n; v++)
        for (int64_t k = dg->h_in_off[v]; k < dg->h_in_off[v + 1]; k++) {
            int64_t pos = fill[dg->h_in_src[k]]++;
            dg->h_out_dst[pos] = v;
            dg->h_perm[pos] = k;
        }
    saga_free(fill);
fail:
    return st;
}

static saga_status dgraph_upload(saga_dgraph *dg) {
    saga_status st = SAGA_OK;
    size_t n1 = (size_t)dg->n + 1, ns1 = (size_t)dg->n_src + 1, m = (size_t)dg->m;
    int32_t *dst = NULL;
    SAGA_TRY(saga_alloc_array((void **)&dst, m ? m : 1, sizeof(int32_t), "edge destinations"));
    for (int32_t v = 0; v < dg->n; v++)
        for (int64_t k = dg->h_in_off[v]; k < dg->h_in_off[v + 1]; k++)
            dst[k] = v;
    SAGA_TRY(dev_upload(dg, (void **)&dg->d_in_off, dg->h_in_off, n1 * sizeof(int64_t)));
    SAGA_TRY(dev_upload(dg, (void **)&dg->d_in_src, dg->h_in_src, m * sizeof(int32_t)));
    SAGA_TRY(dev_upload(dg, (void **)&dg->d_edge_dst, dst, m * sizeof(int32_t)));
    SAGA_TRY(dev_upload(dg, (void **)&dg->d_out_off, dg->h_out_off, ns1 * sizeof(int64_t)));
    SAGA_TRY(dev_upload(dg, (void **)&dg->d_out_dst, dg->h_out_dst, m * sizeof(int32_t)));
fail:
    saga_free(dst);
    return st;
}

saga_status saga_dgraph_new(saga_dgraph **out, saga_backend *be, const saga_graph *g,
                            const saga_dgraph_opts *o) {
    saga_status st = SAGA_OK;
    saga_dgraph *dg = NULL;
    saga_dgraph_opts def = saga_dgraph_opts_defaults();
    if (!o)
        o = &def;
    SAGA_CHECK(out && be && g, SAGA_ERR_INVALID_ARG,
               "saga_dgraph_new: out, backend and graph must not be NULL");
    SAGA_CHECK((unsigned)o->self_loops < SAGA_DGRAPH_SELF_LOOPS_COUNT, SAGA_ERR_INVALID_ARG,
               "saga_dgraph_new: unknown self-loop mode %d", (int)o->self_loops);
    SAGA_TRY(saga_alloc_zeroed((void **)&dg, 1, sizeof *dg, "a placed graph"));
    dg->be = be;
    SAGA_TRY(dgraph_place(dg, g, o->self_loops == SAGA_DGRAPH_SELF_LOOPS_ADD));
    SAGA_TRY(dgraph_transpose(dg));
    SAGA_TRY(dgraph_upload(dg));
    *out = dg;
    return SAGA_OK;
fail:
    saga_dgraph_free(&dg);
    return st;
}

void saga_dgraph_free(saga_dgraph **gp) {
    if (!gp || !*gp)
        return;
    saga_dgraph *g = *gp;
    size_t n1 = g->h_in_off ? (size_t)g->n + 1 : 0, m = (size_t)g->m;
    size_t ns1 = g->h_in_off ? (size_t)g->n_src + 1 : 0;
    saga_backend_free(g->be, g->d_in_off, n1 * sizeof(int64_t));
    saga_backend_free(g->be, g->d_in_src, m * sizeof(int32_t));
    saga_backend_free(g->be, g->d_edge_dst, m * sizeof(int32_t));
    saga_backend_free(g->be, g->d_out_off, ns1 * sizeof(int64_t));
    saga_backend_free(g->be, g->d_out_dst, m * sizeof(int32_t));
    for (int w = 0; w < SAGA_WEIGHT_COUNT; w++)
        for (int mean = 0; mean < 2; mean++) {
            saga_backend_free(g->be, g->vals[w][mean].in, m * sizeof(float));
            saga_backend_free(g->be, g->vals[w][mean].out, m * sizeof(float));
        }
    saga_backend_free(g->be, g->d_ones, m * sizeof(float));
    while (g->plans) {
        dgraph_plan *p = g->plans;
        g->plans = p->next;
        saga_backend_free(g->be, p->d_off, p->d_off_bytes);
        saga_free(p->v0);
        saga_free(p);
    }
    saga_free(g->h_in_off);
    saga_free(g->h_in_src);
    saga_free(g->h_in_w);
    saga_free(g->h_out_off);
    saga_free(g->h_out_dst);
    saga_free(g->h_perm);
    saga_free(g->h_deg_in);
    saga_free(g->h_deg_out);
    saga_free(g);
    *gp = NULL;
}

int32_t saga_dgraph_n_vertices(const saga_dgraph *g) {
    return g->n;
}

int64_t saga_dgraph_n_edges(const saga_dgraph *g) {
    return g->m;
}

saga_csr saga_dgraph_edge_order(const saga_dgraph *g) {
    saga_csr c = {.n_rows = g->n,
                  .nnz = g->m,
                  .offsets = g->h_in_off,
                  .indices = g->h_in_src,
                  .weights = g->h_in_w};
    return c;
}

void saga_edge_values(int32_t n, const int64_t *in_off, const int32_t *in_src, const float *in_w,
                      const int64_t *out_off, saga_edge_weight w, bool mean, float *vals) {
    for (int32_t v = 0; v < n; v++) {
        int64_t deg_in = in_off[v + 1] - in_off[v];
        for (int64_t k = in_off[v]; k < in_off[v + 1]; k++) {
            double x = 1.0;
            if (w == SAGA_WEIGHT_GRAPH && in_w)
                x = in_w[k];
            else if (w == SAGA_WEIGHT_SYMNORM) {
                int32_t u = in_src[k];
                int64_t deg_out = out_off[u + 1] - out_off[u];
                x = 1.0 / sqrt((double)deg_in * (double)deg_out);
            }
            if (mean)
                x /= (double)deg_in;
            vals[k] = (float)x;
        }
    }
}

/* SYMNORM over a block's given degrees: 1 / sqrt(deg_in(v) deg_out(u)) (mean: divided by the
 * row's length). */
static void block_symnorm(const saga_dgraph *g, bool mean, float *vals) {
    for (int32_t v = 0; v < g->n; v++)
        for (int64_t k = g->h_in_off[v]; k < g->h_in_off[v + 1]; k++) {
            double x = 1.0 / sqrt(g->h_deg_in[v] * g->h_deg_out[g->h_in_src[k]]);
            if (mean)
                x /= (double)(g->h_in_off[v + 1] - g->h_in_off[v]);
            vals[k] = (float)x;
        }
}

saga_status saga_dgraph_new_block(saga_dgraph **out, saga_ctx *c, int32_t n_dst, int32_t n_src,
                                  const int64_t *off, const int32_t *src, const float *w,
                                  const double *deg_in, const double *deg_out) {
    saga_status st = SAGA_OK;
    saga_dgraph *dg = NULL;
    SAGA_CHECK(out && c && off && n_dst >= 0 && n_src >= n_dst && !deg_in == !deg_out,
               SAGA_ERR_INVALID_ARG, "saga_dgraph_new_block: invalid arguments");
    const int64_t m = off[n_dst];
    SAGA_TRY(saga_alloc_zeroed((void **)&dg, 1, sizeof *dg, "a placed block"));
    dg->be = saga_ctx_backend(c);
    dg->up = c;
    dg->n = n_dst;
    dg->n_src = n_src;
    dg->m = m;
    SAGA_TRY(saga_alloc_array((void **)&dg->h_in_off, (size_t)n_dst + 1, sizeof(int64_t),
                              "block offsets"));
    SAGA_TRY(saga_alloc_array((void **)&dg->h_in_src, m ? (size_t)m : 1, sizeof(int32_t),
                              "block sources"));
    memcpy(dg->h_in_off, off, ((size_t)n_dst + 1) * sizeof(int64_t));
    if (m)
        memcpy(dg->h_in_src, src, (size_t)m * sizeof(int32_t));
    if (w) {
        SAGA_TRY(saga_alloc_array((void **)&dg->h_in_w, m ? (size_t)m : 1, sizeof(float),
                                  "block weights"));
        if (m)
            memcpy(dg->h_in_w, w, (size_t)m * sizeof(float));
    }
    if (deg_in) {
        SAGA_TRY(saga_alloc_array((void **)&dg->h_deg_in, (size_t)n_dst + 1, sizeof(double),
                                  "block degrees"));
        SAGA_TRY(saga_alloc_array((void **)&dg->h_deg_out, (size_t)n_src + 1, sizeof(double),
                                  "block degrees"));
        memcpy(dg->h_deg_in, deg_in, (size_t)n_dst * sizeof(double));
        memcpy(dg->h_deg_out, deg_out, (size_t)n_src * sizeof(double));
    }
    SAGA_TRY(dgraph_transpose(dg));
    SAGA_TRY(dgraph_upload(dg));
    *out = dg;
    return SAGA_OK;
fail:
    saga_dgraph_free(&dg);
    return st;
}

/* The edge values for weight mode w (mean: divided by the destination's in-degree), in both
 * edge orders, computed on first use. in and out are NULL when every value is 1. */
static saga_status dgraph_values_get(saga_dgraph *g, saga_edge_weight w, bool mean,
                                     const float **in, const float **out) {
    saga_status st = SAGA_OK;
    dgraph_values *dv = &g->vals[w][mean];
    float *h_in = NULL, *h_out = NULL;
    if (!dv->ready && (w == SAGA_WEIGHT_NONE && !mean)) {
        dv->ready = true; /* all ones: the kernels take NULL values */
    } else if (!dv->ready && (w == SAGA_WEIGHT_GRAPH && !mean && !g->h_in_w)) {
        dv->ready = true;
    } else if (!dv->ready) {
        size_t m = (size_t)g->m;
        SAGA_TRY(saga_alloc_array((void **)&h_in, m ? m : 1, sizeof(float), "edge values"));
        SAGA_TRY(saga_alloc_array((void **)&h_out, m ? m : 1, sizeof(float), "edge values"));
        if (g->h_deg_in && w == SAGA_WEIGHT_SYMNORM)
            block_symnorm(g, mean, h_in);
        else
            saga_edge_values(g->n, g->h_in_off, g->h_in_src, g->h_in_w, g->h_out_off, w, mean,
                             h_in);
        for (size_t k = 0; k < m; k++)
            h_out[k] = h_in[g->h_perm[k]];
        SAGA_TRY(dev_upload(g, (void **)&dv->in, h_in, m * sizeof(float)));
        st = dev_upload(g, (void **)&dv->out, h_out, m * sizeof(float));
        if (st < 0) {
            saga_backend_free(g->be, dv->in, m * sizeof(float));
            dv->in = NULL;
            goto fail;
        }
        dv->ready = true;
    }
    *in = dv->in;
    *out = dv->out;
fail:
    saga_free(h_in);
    saga_free(h_out);
    return st;
}

/* The scalar weight of every edge (in-CSR order) for apply_edge: the mode's values, or a
 * column of ones (kept once) where the kernels would take NULL. */
static saga_status dgraph_weight_column(saga_dgraph *g, saga_edge_weight w, const float **out) {
    saga_status st = SAGA_OK;
    const float *in = NULL, *unused = NULL;
    float *ones = NULL;
    SAGA_TRY(dgraph_values_get(g, w, false, &in, &unused));
    if (!in && !g->d_ones) {
        size_t m = (size_t)g->m;
        SAGA_TRY(saga_alloc_array((void **)&ones, m ? m : 1, sizeof(float), "unit weights"));
        for (size_t i = 0; i < m; i++)
            ones[i] = 1.0f;
        SAGA_TRY(dev_upload(g, (void **)&g->d_ones, ones, m * sizeof(float)));
    }
    *out = in ? in : g->d_ones;
fail:
    saga_free(ones);
    return st;
}

/* The batches for max_edges: consecutive destinations whose in-edges add up to at most
 * max_edges (a vertex with more is a batch of its own). Computed once per max_edges. */
int64_t saga_prog_batch_edges(const saga_program *p) {
    return p->max_batch_edges > 0 ? p->max_batch_edges : PROGRAM_DEFAULT_BATCH_EDGES;
}

int64_t saga_prog_cut_batches(int32_t n, const int64_t *off, int64_t max_edges, int32_t *v0) {
    /* at most n batches; no edges (or no rows) make one empty batch */
    int64_t nb = 0;
    v0[0] = 0;
    for (int32_t v = 0; v < n;) {
        int32_t w = v;
        do
            w++;
        while (w < n && off[w + 1] - off[v] <= max_edges);
        v0[++nb] = w;
        v = w;
    }
    if (nb == 0)
        v0[++nb] = 0;
    return nb;
}

void saga_prog_batch_offsets(const int64_t *off, int64_t nb, const int32_t *v0, int64_t *h_off) {
    for (int64_t b = 0; b < nb; b++)
        for (int32_t v = v0[b]; v <= v0[b + 1]; v++)
            h_off[v + b] = off[v] - off[v0[b]];
}

static saga_status dgraph_plan_get(saga_dgraph *g, int64_t max_edges, const dgraph_plan **out) {
    saga_status st = SAGA_OK;
    dgraph_plan *p = NULL;
    int64_t *h_off = NULL;
    for (p = g->plans; p; p = p->next)
        if (p->max_edges == max_edges) {
            *out = p;
            return SAGA_OK;
        }
    SAGA_TRY(saga_alloc_zeroed((void **)&p, 1, sizeof *p, "a batch plan"));
    p->max_edges = max_edges;
    SAGA_TRY(saga_alloc_array((void **)&p->v0, (size_t)g->n + 2, sizeof(int32_t), "batch plan"));
    int64_t nb = saga_prog_cut_batches(g->n, g->h_in_off, max_edges, p->v0);
    p->n_batches = nb;
    size_t n_off = (size_t)g->n + (size_t)nb;
    SAGA_TRY(saga_alloc_array((void **)&h_off, n_off, sizeof(int64_t), "batch offsets"));
    saga_prog_batch_offsets(g->h_in_off, nb, p->v0, h_off);
    p->d_off_bytes = n_off * sizeof(int64_t);
    SAGA_TRY(dev_upload(g, (void **)&p->d_off, h_off, p->d_off_bytes));
    saga_free(h_off);
    p->next = g->plans;
    g->plans = p;
    *out = p;
    return SAGA_OK;
fail:
    saga_free(h_off);
    if (p)
        saga_free(p->v0);
    saga_free(p);
    return st;
}

/* ---- helpers ------------------------------------------------------------------------------ */

/* Makes st sticky in c (its message is set) and returns NULL, for the ops-style entries. */
static saga_tensor *ctx_fail_null(saga_ctx *c, saga_status st) {
    saga_ctx_fail(c, st);
    return NULL;
}

/* The status to return after a ctx-style call gave NULL: the sticky one. */
static saga_status ctx_error(saga_ctx *c) {
    saga_status st = saga_ctx_status(c);
    return st < 0 ? st : saga_error(SAGA_ERR_INTERNAL, "an op failed without an error");
}

static float *f32_rows(const saga_tensor *t, int64_t row) {
    return t->data ? (float *)t->data + row * t->cols : NULL;
}

/* ---- fused path: one SpMM ----------------------------------------------------------------- */

bool saga_prog_fused(const saga_program *p) {
    return !p->apply_edge && p->scatter == SAGA_SCATTER_SRC && p->gather != SAGA_GATHER_MAX;
}

typedef struct fused_state {
    saga_csr_dev at; /* the transpose with its values: the backward's matrix */
} fused_state;

static saga_status fused_backward(saga_ctx *c, saga_node *n, saga_tensor *grad_out) {
    saga_status st = SAGA_OK;
    const fused_state *fs = saga_node_state(n);
    if (!saga_node_needs_grad(n, 0))
        return SAGA_OK;
    saga_tensor *h = saga_node_input(n, 0);
    float beta = 0.0f; /* into h's gradient directly: 1 adds to what it holds */
    float *dh = saga_node_grad_target(c, n, 0, &beta);
    if (!dh && (h->nbytes || saga_ctx_status(c) < 0))
        return ctx_error(c); /* an empty gradient has no buffer */
    if (h->nbytes)
        SAGA_TRY(saga_ctx_kernels(c)->spmm_f32(saga_ctx_stream(c), &fs->at, h->cols, 1.0f,
                                               grad_out->data, beta, dh));
fail:
    return st;
}

static saga_tensor *run_fused(saga_ctx *c, const saga_prog_view *v, saga_tensor *h) {
    saga_status st = SAGA_OK;
    const saga_kernels *k = saga_ctx_kernels(c);
    if (!saga_ctx_kernel(c, k->spmm_f32 != NULL, "spmm_f32"))
        return NULL;
    saga_csr_dev a = {v->n_dst, v->n_src, v->m, v->d_in_off, v->d_in_src, v->vals_in};
    saga_tensor *out = saga_ctx_tensor(c, SAGA_F32, v->n_dst, h->cols);
    if (!out)
        return NULL;
    if (out->nbytes)
        SAGA_TRY(k->spmm_f32(saga_ctx_stream(c), &a, h->cols, 1.0f, h->data, 0.0f, out->data));
    fused_state *fs = NULL;
    SAGA_TRY(saga_alloc_array((void **)&fs, 1, sizeof *fs, "a program node"));
    fs->at = (saga_csr_dev){v->n_src, v->n_dst, v->m, v->d_out_off, v->d_out_dst, v->vals_out};
    if (saga_tape_record(c, out, &h, 1, fused_backward, fs, saga_free) < 0)
        return NULL;
    return out;
fail:
    return ctx_fail_null(c, st);
}

/* ---- batched path ------------------------------------------------------------------------- */

struct saga_edge_batch {
    const int64_t *offsets; /* device, n_seg + 1, relative to the batch's first edge */
    int64_t n_seg;
};

/* Everything a batch needs, in the forward pass and in the backward's recomputation. */
typedef struct batch_run {
    saga_program p;
    saga_prog_view v;
    void *layer;
    int64_t f_out;    /* message width, known after the first batch */
    uint64_t rng;     /* the context's dropout counter at the start: every batch starts there */
    uint64_t rng_end; /* and where the forward pass left it */
    bool keep_edges;  /* the output is the messages themselves (m rows), not their gather */
} batch_run;

static void batch_run_free(void *state) {
    saga_free(state);
}

static saga_tensor *default_apply_edge(saga_ctx *c, const saga_edge_in *e, void *layer) {
    saga_tensor *x = e->src ? e->src : e->dst;
    return e->weight ? saga_scale_rows(c, x, e->weight) : x;
}

/* Destinations v0 .. v1-1 and edges e0 .. e1-1 of batch b, within the view. */
static void batch_range(const batch_run *r, int64_t b, int32_t *v0, int32_t *v1, int64_t *e0,
                        int64_t *e1) {
    *v0 = r->v.plan.v0[b];
    *v1 = r->v.plan.v0[b + 1];
    *e0 = r->v.h_in_off[*v0] - r->v.h_off_base;
    *e1 = r->v.h_in_off[*v1] - r->v.h_off_base;
}

/* A context tensor holding the rows idx[0 .. n_idx) of x (a leaf when leaf). */
static saga_tensor *batch_gather(saga_ctx *c, const saga_tensor *x, const int32_t *idx,
                                 int64_t n_idx, bool leaf) {
    saga_tensor *t = saga_ctx_tensor(c, SAGA_F32, n_idx, x->cols);
    if (!t)
        return NULL;
    if (t->nbytes) {
        saga_status st = saga_ctx_kernels(c)->gather_rows_f32(saga_ctx_stream(c), n_idx, x->cols,
                                                              idx, x->rows, x->data, t->data);
        if (st < 0)
            return ctx_fail_null(c, st);
    }
    if (leaf)
        saga_ctx_mark_leaf(c, t);
    return t;
}

/* A context tensor holding rows r0 .. r0 + rows - 1 of the device matrix x (cols wide). */
static saga_tensor *batch_slice(saga_ctx *c, const float *x, int64_t r0, int64_t rows, int64_t cols,
                                bool leaf) {
    saga_tensor *t = saga_ctx_tensor(c, SAGA_F32, rows, cols);
    if (!t)
        return NULL;
    if (t->nbytes) {
        saga_status st =
            saga_memcpy_d2d_async(saga_ctx_stream(c), t->data, x + r0 * cols, t->nbytes);
        if (st < 0)
            return ctx_fail_null(c, st);
    }
    if (leaf)
        saga_ctx_mark_leaf(c, t);
    return t;
}

/* The rows idx[0 .. n) of x as a recorded op (saga_gather_rows over the borrowed indices). */
static saga_tensor *taped_gather(saga_ctx *c, saga_tensor *x, const int32_t *idx, int64_t n) {
    saga_tensor *ix = saga_ctx_wrap(c, SAGA_I32, n, 1, (void *)idx);
    return ix ? saga_gather_rows(c, x, ix) : NULL;
}

/* Scatters batch b onto its edges and runs apply_edge: the messages (n_edges x f_out), owned by
 * c, or NULL with the sticky error set. leaf_h / leaf_e make the scattered rows leaves so that
 * the region's backward gives their gradients; taped instead records the gathers of h as ops
 * (and takes edata as it is: the batch must span every edge of edata). Dropout inside apply_edge
 * draws the rows of the whole graph's edge mask that the batch's edges stand for. */
static saga_tensor *batch_messages(saga_ctx *c, batch_run *r, int64_t b, saga_tensor *h_src,
                                   saga_tensor *h_dst, saga_tensor *edata, bool leaf_h, bool leaf_e,
                                   bool taped, saga_edge_in *e, saga_edge_batch *eb) {
    int32_t v0, v1;
    int64_t e0, e1;
    batch_range(r, b, &v0, &v1, &e0, &e1);
    int64_t ne = e1 - e0;
    eb->offsets = r->v.plan.d_off + v0 + b;
    eb->n_seg = v1 - v0;
    memset(e, 0, sizeof *e);
    e->n_edges = ne;
    e->batch = eb;
    bool want_src = r->p.scatter != SAGA_SCATTER_DST, want_dst = r->p.scatter != SAGA_SCATTER_SRC;
    if (taped) {
        if (want_src && !(e->src = taped_gather(c, h_src, r->v.d_in_src + e0, ne)))
            return NULL;
        if (want_dst && !(e->dst = taped_gather(c, h_dst, r->v.d_edge_dst + e0, ne)))
            return NULL;
        e->data = edata;
    } else {
        if (want_src && !(e->src = batch_gather(c, h_src, r->v.d_in_src + e0, ne, leaf_h)))
            return NULL;
        if (want_dst && !(e->dst = batch_gather(c, h_dst, r->v.d_edge_dst + e0, ne, leaf_h)))
            return NULL;
        if (edata && !(e->data = batch_slice(c, edata->data, e0, ne, edata->cols, leaf_e)))
            return NULL;
    }
    if (r->v.weights && !(e->weight = batch_slice(c, r->v.weights, e0, ne, 1, false)))
        return NULL;
    saga_apply_edge_fn fn = r->p.apply_edge ? r->p.apply_edge : default_apply_edge;
    int64_t row_base = saga_ctx_row_base(c);
    const int32_t *row_ids = saga_ctx_row_ids(c, r->v.n_dst);
    saga_ctx_set_rng_counter(c, r->rng);
    saga_ctx_set_row_base(c, r->v.e0 + e0);
    saga_ctx_set_row_ids(c, r->v.d_edge_ids ? r->v.d_edge_ids + e0 : NULL, ne);
    saga_tensor *msg = fn(c, e, r->layer);
    saga_ctx_set_row_base(c, row_base);
    saga_ctx_set_row_ids(c, row_ids, r->v.n_dst);
    if (!msg) {
        if (saga_ctx_status(c) == SAGA_OK)
            saga_ctx_fail(c, saga_error(SAGA_ERR_INVALID_ARG,
                                        "saga_program_run: apply_edge returned NULL without an "
                                        "error"));
        return NULL;
    }
    if (msg->dtype != SAGA_F32 || msg->rows != ne || (r->f_out >= 0 && msg->cols != r->f_out)) {
        saga_ctx_fail(c, saga_error(SAGA_ERR_INVALID_ARG,
                                    "saga_program_run: apply_edge returned a %s %lld x %lld "
                                    "tensor for a batch of %lld edges (expected f32, %lld "
                                    "columns)",
                                    saga_dtype_name(msg->dtype), (long long)msg->rows,
                                    (long long)msg->cols, (long long)ne,
                                    (long long)(r->f_out >= 0 ? r->f_out : msg->cols)));
        return NULL;
    }
    return msg;
}

static saga_reduce reduce_of(saga_gather g) {
    return g == SAGA_GATHER_MEAN ? SAGA_REDUCE_MEAN
                                 : (g == SAGA_GATHER_MAX ? SAGA_REDUCE_MAX : SAGA_REDUCE_SUM);
}

/* Reduces the messages of batch b into y (the batch's n_seg rows, f_out wide). */
static saga_status batch_reduce(saga_ctx *c, const batch_run *r, const saga_edge_batch *eb,
                                const saga_tensor *msg, float *y) {
    saga_status st = SAGA_OK;
    int32_t *argmax = NULL;
    if (eb->n_seg == 0 || r->f_out == 0)
        return SAGA_OK;
    if (r->p.gather == SAGA_GATHER_MAX) {
        saga_tensor *am = saga_ctx_tensor(c, SAGA_I32, eb->n_seg, r->f_out);
        if (!am)
            return ctx_error(c);
        argmax = am->data;
    }
    SAGA_TRY(saga_ctx_kernels(c)->segment_reduce_f32(saga_ctx_stream(c), eb->offsets, eb->n_seg,
                                                     r->f_out, reduce_of(r->p.gather), msg->data, y,
                                                     argmax));
fail:
    return st;
}

/* Adds a scattered side's gradient (ne rows) into dh by the batch's indices. */
static saga_status scatter_grad(saga_ctx *c, const saga_tensor *side, const int32_t *idx,
                                saga_tensor *dh) {
    if (!side || !side->grad || !side->grad->nbytes)
        return SAGA_OK;
    return saga_ctx_kernels(c)->scatter_add_rows_f32(saga_ctx_stream(c), side->rows, dh->cols, idx,
                                                     side->grad->data, dh->rows, dh->data);
}

/* Backward of the whole Scatter-ApplyEdge-Gather: each batch is recomputed in a region (with
 * the dropout counter of the forward pass), its messages get their gradient from the batch's
 * rows of grad_out (through the gather's backward, or, with keep_edges, as they are: the edge
 * tensor's gradient holds the gather's contribution and any loss on the edges), the region's
 * backward gives the gradients of the parameters and of the scattered rows, and those are added
 * into d h_src, d h_dst (by source / destination) and d edata. Inputs: 0 h_src, 1 edata, 2 h_dst
 * (absent or NULL when it is h_src or unused). */
static saga_status batched_backward(saga_ctx *c, saga_node *n, saga_tensor *grad_out) {
    saga_status st = SAGA_OK;
    batch_run *r = saga_node_state(n);
    saga_tensor *hs = saga_node_input(n, 0), *edata = saga_node_input(n, 1);
    saga_tensor *hd = saga_node_input(n, 2) ? saga_node_input(n, 2) : hs;
    bool same = hd == hs;
    bool need_s = saga_node_needs_grad(n, 0), need_e = edata && saga_node_needs_grad(n, 1);
    bool need_d = same ? need_s : saga_node_needs_grad(n, 2);
    const saga_kernels *k = saga_ctx_kernels(c);
    saga_stream *s = saga_ctx_stream(c);
    uint64_t rng_saved = saga_ctx_rng_counter(c);
    bool in_region = false;
    saga_tape_pos mark = {0, 0};
    saga_tensor *dhs = NULL, *dhd = NULL, *de = NULL;
    if (need_s && !(dhs = saga_ctx_zeros(c, SAGA_F32, hs->rows, hs->cols)))
        return ctx_error(c);
    dhd = same ? dhs : NULL;
    if (!same && need_d && !(dhd = saga_ctx_zeros(c, SAGA_F32, hd->rows, hd->cols)))
        return ctx_error(c);
    if (need_e && !(de = saga_ctx_zeros(c, SAGA_F32, edata->rows, edata->cols)))
        return ctx_error(c);
    for (int64_t b = 0; b < r->v.plan.n_batches; b++) {
        int32_t v0, v1;
        int64_t e0, e1;
        batch_range(r, b, &v0, &v1, &e0, &e1);
        mark = saga_tape_mark(c);
        in_region = true;
        saga_edge_in e;
        saga_edge_batch eb;
        saga_tensor *msg =
            batch_messages(c, r, b, hs, hd, edata, need_s || need_d, need_e, false, &e, &eb);
        if (!msg)
            SAGA_TRY(ctx_error(c));
        if (saga_tensor_needs_grad(msg) && e.n_edges > 0 && r->f_out > 0) {
            saga_tensor *dmsg = NULL;
            if (r->keep_edges) {
                /* the batch's rows of the edge tensor's gradient */
                if (!(dmsg = batch_slice(c, grad_out->data, e0, e.n_edges, r->f_out, false)))
                    SAGA_TRY(ctx_error(c));
            } else {
                if (!(dmsg = saga_ctx_tensor(c, SAGA_F32, e.n_edges, r->f_out)))
                    SAGA_TRY(ctx_error(c));
                const int32_t *argmax = NULL;
                if (r->p.gather == SAGA_GATHER_MAX) {
                    /* the argmax is not kept from the forward pass: recomputed with the
                     * messages */
                    saga_tensor *y = saga_ctx_tensor(c, SAGA_F32, eb.n_seg, r->f_out);
                    saga_tensor *am = saga_ctx_tensor(c, SAGA_I32, eb.n_seg, r->f_out);
                    if (!y || !am)
                        SAGA_TRY(ctx_error(c));
                    SAGA_TRY(k->segment_reduce_f32(s, eb.offsets, eb.n_seg, r->f_out,
                                                   SAGA_REDUCE_MAX, msg->data, y->data, am->data));
                    argmax = am->data;
                }
                SAGA_TRY(k->segment_reduce_bwd_f32(s, eb.offsets, eb.n_seg, r->f_out,
                                                   reduce_of(r->p.gather), f32_rows(grad_out, v0),
                                                   argmax, dmsg->data));
            }
            SAGA_TRY(saga_tape_backward_range(c, mark, msg, dmsg));
            if (need_s)
                SAGA_TRY(scatter_grad(c, e.src, r->v.d_in_src + e0, dhs));
            if (need_d)
                SAGA_TRY(scatter_grad(c, e.dst, r->v.d_edge_dst + e0, dhd));
            if (e.data && e.data->grad && e.data->nbytes)
                SAGA_TRY(
                    saga_memcpy_d2d_async(s, f32_rows(de, e0), e.data->grad->data, e.data->nbytes));
        }
        saga_tape_release(c, mark);
        in_region = false;
    }
    saga_ctx_set_rng_counter(c, rng_saved);
    if (dhs)
        SAGA_TRY(saga_node_accumulate(c, n, 0, dhs));
    if (de)
        SAGA_TRY(saga_node_accumulate(c, n, 1, de));
    if (dhd && !same)
        SAGA_TRY(saga_node_accumulate(c, n, 2, dhd));
    return SAGA_OK;
fail:
    if (in_region)
        saga_tape_release(c, mark);
    saga_ctx_set_rng_counter(c, rng_saved);
    return st;
}

/* The state of one batched run over view v (the kernels it needs checked), or false with the
 * error recorded in c. */
static bool batch_run_new(saga_ctx *c, const saga_program *p, const saga_prog_view *v, void *layer,
                          bool keep_edges, batch_run **out) {
    const saga_kernels *k = saga_ctx_kernels(c);
    batch_run *r = NULL;
    if (!saga_ctx_kernel(c, k->gather_rows_f32 != NULL, "gather_rows_f32") ||
        !saga_ctx_kernel(c, k->segment_reduce_f32 != NULL, "segment_reduce_f32") ||
        !saga_ctx_kernel(c, k->segment_reduce_bwd_f32 != NULL, "segment_reduce_bwd_f32") ||
        !saga_ctx_kernel(c, k->scatter_add_rows_f32 != NULL, "scatter_add_rows_f32"))
        return false;
    saga_status st = saga_alloc_zeroed((void **)&r, 1, sizeof *r, "a program node");
    if (st < 0) {
        saga_ctx_fail(c, st);
        return false;
    }
    r->p = *p;
    r->v = *v;
    r->layer = layer;
    r->f_out = -1;
    r->rng = r->rng_end = saga_ctx_rng_counter(c);
    r->keep_edges = keep_edges;
    *out = r;
    return true;
}

/* The forward pass of the batched path: each batch's messages made in a region, then reduced
 * into their destinations' rows of *out (n_dst rows) or, with keep_edges, copied into their
 * edges' rows (m rows). *out is made once the first batch has told the width. *msg_grad: whether
 * any batch's messages needed a gradient. The dropout counter ends where the batches left it. */
static saga_status batches_forward(saga_ctx *c, batch_run *r, saga_tensor *h_src,
                                   saga_tensor *h_dst, saga_tensor *edata, saga_tensor **out,
                                   bool *msg_grad) {
    bool keep_edges = r->keep_edges;
    saga_status st = SAGA_OK;
    saga_stream *s = saga_ctx_stream(c);
    saga_tensor *y = NULL;
    void *first = NULL;
    size_t first_bytes = 0;
    bool in_region = false;
    saga_tape_pos mark = {0, 0};
    *msg_grad = false;
    for (int64_t b = 0; b < r->v.plan.n_batches; b++) {
        int32_t v0, v1;
        int64_t e0, e1;
        batch_range(r, b, &v0, &v1, &e0, &e1);
        mark = saga_tape_mark(c);
        in_region = true;
        saga_edge_in e;
        saga_edge_batch eb;
        saga_tensor *msg =
            batch_messages(c, r, b, h_src, h_dst, edata, false, false, false, &e, &eb);
        if (!msg)
            SAGA_TRY(ctx_error(c));
        if (saga_ctx_rng_counter(c) > r->rng_end)
            r->rng_end = saga_ctx_rng_counter(c);
        *msg_grad = *msg_grad || saga_tensor_needs_grad(msg);
        float *dst = NULL;
        if (b == 0) {
            /* the width is known only now, and the output must outlive this region: the first
             * batch's rows wait in a scratch buffer until the output exists */
            r->f_out = msg->cols;
            int64_t rows = keep_edges ? e1 - e0 : v1 - v0;
            first_bytes = (size_t)rows * (size_t)r->f_out * sizeof(float);
            SAGA_TRY(saga_ctx_buffer(c, &first, first_bytes));
            dst = first;
        } else {
            dst = keep_edges ? f32_rows(y, e0) : f32_rows(y, v0);
        }
        if (!keep_edges)
            SAGA_TRY(batch_reduce(c, r, &eb, msg, dst));
        else if (msg->nbytes)
            SAGA_TRY(saga_memcpy_d2d_async(s, dst, msg->data, msg->nbytes));
        saga_tape_release(c, mark);
        in_region = false;
        if (b == 0) {
            if (!(y = saga_ctx_tensor(c, SAGA_F32, keep_edges ? r->v.m : r->v.n_dst, r->f_out)))
                SAGA_TRY(ctx_error(c));
            /* the scratch goes back to the context's cache, whose next user works on the same
             * stream, after the copy */
            if (first_bytes)
                SAGA_TRY(saga_memcpy_d2d_async(s, y->data, first, first_bytes));
            saga_ctx_buffer_free(c, first, first_bytes);
            first = NULL;
        }
    }
    saga_ctx_set_rng_counter(c, r->rng_end);
    *out = y;
    return SAGA_OK;
fail:
    if (in_region)
        saga_tape_release(c, mark);
    saga_ctx_buffer_free(c, first, first_bytes);
    return st;
}

static saga_tensor *gather_edges(saga_ctx *c, const saga_program *p, const saga_prog_view *v,
                                 saga_tensor *E);

/* Whether a run keeps its forward pass on the tape (saga_program.keep_forward): training, one
 * batch, and the edge rows (if any) exactly the batch's. */
static bool keeps_forward(saga_ctx *c, const saga_program *p, const saga_prog_view *v,
                          const saga_tensor *edata) {
    return p->keep_forward && saga_ctx_training(c) && v->plan.n_batches == 1 &&
           (!edata || edata->rows == v->m);
}

/* The messages of a run of one batch, recorded op by op (keeps_forward): the gathers of h and
 * apply_edge's ops stay on the tape and the backward pass differentiates them as they are. */
static saga_tensor *messages_kept(saga_ctx *c, const saga_program *p, const saga_prog_view *v,
                                  saga_tensor *h_src, saga_tensor *h_dst, saga_tensor *edata,
                                  void *layer) {
    batch_run *r = NULL;
    if (!batch_run_new(c, p, v, layer, false, &r))
        return NULL;
    saga_edge_in e;
    saga_edge_batch eb;
    saga_tensor *msg = batch_messages(c, r, 0, h_src, h_dst, edata, false, false, true, &e, &eb);
    batch_run_free(r);
    return msg;
}

static saga_tensor *run_batched(saga_ctx *c, const saga_program *p, const saga_prog_view *v,
                                saga_tensor *h_src, saga_tensor *h_dst, saga_tensor *edata,
                                void *layer) {
    saga_status st = SAGA_OK;
    batch_run *r = NULL;
    saga_tensor *out = NULL;
    bool msg_grad = false;
    if (keeps_forward(c, p, v, edata)) {
        saga_tensor *msg = messages_kept(c, p, v, h_src, h_dst, edata, layer);
        return msg ? gather_edges(c, p, v, msg) : NULL;
    }
    if (!batch_run_new(c, p, v, layer, false, &r))
        return NULL;
    SAGA_TRY(batches_forward(c, r, h_src, h_dst, edata, &out, &msg_grad));

    /* The parameters apply_edge used are not inputs of the node: when the messages needed a
     * gradient, the node is recorded whether or not h and edata need one. */
    bool uses_dst = p->scatter != SAGA_SCATTER_SRC;
    saga_tensor *inputs[3] = {h_src, edata, uses_dst && h_dst != h_src ? h_dst : NULL};
    batch_run *state = r;
    r = NULL;
    if (saga_tape_record_ex(c, out, inputs, 3, msg_grad, batched_backward, state, batch_run_free) <
        0)
        return NULL;
    return out;
fail:
    batch_run_free(r);
    return ctx_fail_null(c, st);
}

saga_tensor *saga_prog_gather(saga_ctx *c, const saga_program *p, const saga_prog_view *v,
                              saga_tensor *h_src, saga_tensor *h_dst, saga_tensor *edata,
                              void *layer) {
    saga_ctx_flush(c); /* a deferred product runs before anything reads it */
    if (saga_prog_fused(p))
        return run_fused(c, v, h_src);
    return run_batched(c, p, v, h_src, h_dst, edata, layer);
}

saga_status saga_program_check(const saga_program *p, const char *who) {
    saga_status st = SAGA_OK;
    SAGA_CHECK((unsigned)p->scatter < SAGA_SCATTER_COUNT &&
                   (unsigned)p->edge_weight < SAGA_WEIGHT_COUNT &&
                   (unsigned)p->gather < SAGA_GATHER_COUNT && p->max_batch_edges >= 0,
               SAGA_ERR_INVALID_ARG,
               "%s: bad program (scatter %d, edge_weight %d, gather %d, max_batch_edges %lld)", who,
               (int)p->scatter, (int)p->edge_weight, (int)p->gather, (long long)p->max_batch_edges);
    SAGA_CHECK(p->apply_edge || p->scatter != SAGA_SCATTER_BOTH, SAGA_ERR_INVALID_ARG,
               "%s: SCATTER_BOTH needs an apply_edge to combine the two sides", who);
fail:
    return st;
}

saga_status saga_prog_apply_vertex(saga_ctx *c, saga_apply_vertex_fn fn, const saga_vertex_in *v,
                                   void *layer, const char *who, saga_tensor **out_p) {
    saga_status st = SAGA_OK;
    int64_t row_base = saga_ctx_row_base(c);
    saga_ctx_set_row_base(c, v->first);
    saga_tensor *out = fn(c, v, layer);
    saga_ctx_set_row_base(c, row_base);
    *out_p = NULL;
    if (!out) {
        SAGA_CHECK(saga_ctx_status(c) < 0, SAGA_ERR_INVALID_ARG,
                   "%s: apply_vertex returned NULL without an error", who);
        return saga_ctx_status(c);
    }
    SAGA_CHECK(out->dtype == SAGA_F32 && out->rows == v->count, SAGA_ERR_INVALID_ARG,
               "%s: apply_vertex returned a %s %lld x %lld tensor for %lld vertices", who,
               saga_dtype_name(out->dtype), (long long)out->rows, (long long)out->cols,
               (long long)v->count);
    *out_p = out;
fail:
    return st;
}

/* The view of a whole placed graph for program p (edge values and batch plans computed on
 * first use). */
static saga_status dgraph_view(saga_dgraph *g, const saga_program *p, saga_prog_view *v) {
    saga_status st = SAGA_OK;
    memset(v, 0, sizeof *v);
    v->n_dst = g->n;
    v->n_src = g->n_src;
    v->m = g->m;
    v->h_in_off = g->h_in_off;
    v->d_in_off = g->d_in_off;
    v->d_in_src = g->d_in_src;
    v->d_edge_dst = g->d_edge_dst;
    v->d_out_off = g->d_out_off;
    v->d_out_dst = g->d_out_dst;
    if (saga_prog_fused(p)) {
        SAGA_TRY(dgraph_values_get(g, p->edge_weight, p->gather == SAGA_GATHER_MEAN, &v->vals_in,
                                   &v->vals_out));
    } else {
        const dgraph_plan *plan = NULL;
        SAGA_TRY(dgraph_plan_get(g, saga_prog_batch_edges(p), &plan));
        v->plan = (saga_prog_plan){plan->n_batches, plan->v0, plan->d_off};
        if (p->edge_weight != SAGA_WEIGHT_NONE)
            SAGA_TRY(dgraph_weight_column(g, p->edge_weight, &v->weights));
    }
fail:
    return st;
}

saga_status saga_dgraph_view(saga_dgraph *g, const saga_program *p, saga_prog_view *v) {
    return dgraph_view(g, p, v);
}

/* ---- the entry ---------------------------------------------------------------------------- */

/* Checks the arguments of a run of p over the whole placed graph g; edges (saga_program_run_edges)
 * asks for an apply_edge. who names the entry in the messages. When h is NULL because an op before
 * failed, the sticky error. */
static saga_status run_check(saga_ctx *c, const saga_program *p, const saga_dgraph *g,
                             const saga_tensor *h, const saga_tensor *edata, bool edges,
                             const char *who) {
    saga_status st = SAGA_OK;
    if (!h) {
        if (saga_ctx_status(c) < 0)
            return saga_ctx_status(c);
        SAGA_CHECK(false, SAGA_ERR_INVALID_ARG, "%s: h is NULL", who);
    }
    SAGA_CHECK(p && g, SAGA_ERR_INVALID_ARG, "%s: program and graph must be given", who);
    SAGA_CHECK(!edges || p->apply_edge, SAGA_ERR_INVALID_ARG,
               "%s: the program has no apply_edge (its messages would be the scattered values "
               "themselves)",
               who);
    SAGA_TRY(saga_program_check(p, who));
    SAGA_CHECK(h->be == g->be && h->be == saga_ctx_backend(c), SAGA_ERR_INVALID_ARG,
               "%s: h is on backend %s, the graph on %s, the context on %s", who,
               saga_backend_name(h->be), saga_backend_name(g->be),
               saga_backend_name(saga_ctx_backend(c)));
    SAGA_CHECK(h->dtype == SAGA_F32 && h->rows == g->n, SAGA_ERR_INVALID_ARG,
               "%s: h is %s %lld x %lld, the graph has %lld vertices (expected f32 %lld x F)", who,
               saga_dtype_name(h->dtype), (long long)h->rows, (long long)h->cols, (long long)g->n,
               (long long)g->n);
    if (edata) {
        SAGA_CHECK(p->apply_edge, SAGA_ERR_INVALID_ARG,
                   "%s: edge data given but the program has no apply_edge", who);
        SAGA_CHECK(edata->be == g->be && edata->dtype == SAGA_F32 && edata->rows == g->m,
                   SAGA_ERR_INVALID_ARG,
                   "%s: edata is %s %lld x %lld on %s, the graph has %lld edges (expected f32 "
                   "%lld x D on %s)",
                   who, saga_dtype_name(edata->dtype), (long long)edata->rows,
                   (long long)edata->cols, saga_backend_name(edata->be), (long long)g->m,
                   (long long)g->m, saga_backend_name(g->be));
    }
fail:
    return st;
}

saga_tensor *saga_program_run(saga_ctx *c, const saga_program *p, const saga_dgraph *cg,
                              saga_tensor *h, saga_tensor *edata, void *layer) {
    saga_status st = SAGA_OK;
    if (!c)
        return NULL;
    saga_ctx_flush(c);
    /* the placed graph's lazy caches (edge values, batch plans) are filled on first use */
    saga_dgraph *g = (saga_dgraph *)cg;
    SAGA_TRY(run_check(c, p, g, h, edata, false, "saga_program_run"));

    saga_prog_view v;
    SAGA_TRY(dgraph_view(g, p, &v));
    saga_tensor *gathered = saga_prog_gather(c, p, &v, h, h, edata, layer);
    if (!gathered || !p->apply_vertex)
        return gathered;

    saga_vertex_in vin = {.first = 0, .count = g->n, .gathered = gathered, .self = h};
    saga_tensor *out = NULL;
    SAGA_TRY(saga_prog_apply_vertex(c, p->apply_vertex, &vin, layer, "saga_program_run", &out));
    return out;
fail:
    return ctx_fail_null(c, st);
}

/* ---- edge softmax ------------------------------------------------------------------------- */

static saga_status edge_softmax_backward(saga_ctx *c, saga_node *n, saga_tensor *grad_out) {
    saga_status st = SAGA_OK;
    const saga_edge_batch *eb = saga_node_state(n);
    saga_tensor *y = saga_node_output(n);
    saga_tensor *dx = saga_ctx_tensor(c, SAGA_F32, y->rows, y->cols);
    if (!dx)
        return ctx_error(c);
    if (dx->nbytes)
        SAGA_TRY(saga_ctx_kernels(c)->edge_softmax_bwd_f32(saga_ctx_stream(c), eb->offsets,
                                                           eb->n_seg, y->cols, y->data,
                                                           grad_out->data, dx->data));
    SAGA_TRY(saga_node_accumulate(c, n, 0, dx));
fail:
    return st;
}

saga_tensor *saga_edge_softmax(saga_ctx *c, const saga_edge_in *e, saga_tensor *scores) {
    saga_status st = SAGA_OK;
    if (!c || !scores)
        return NULL;
    saga_ctx_flush(c);
    const saga_kernels *k = saga_ctx_kernels(c);
    SAGA_CHECK(e && e->batch, SAGA_ERR_INVALID_ARG,
               "saga_edge_softmax: needs the batch apply_edge was given");
    SAGA_CHECK(scores->dtype == SAGA_F32 && scores->rows == e->n_edges, SAGA_ERR_INVALID_ARG,
               "saga_edge_softmax: scores are %s %lld x %lld for a batch of %lld edges",
               saga_dtype_name(scores->dtype), (long long)scores->rows, (long long)scores->cols,
               (long long)e->n_edges);
    if (!saga_ctx_kernel(c, k->edge_softmax_f32 != NULL, "edge_softmax_f32") ||
        !saga_ctx_kernel(c, k->edge_softmax_bwd_f32 != NULL, "edge_softmax_bwd_f32"))
        return NULL;
    saga_tensor *out = saga_ctx_tensor(c, SAGA_F32, scores->rows, scores->cols);
    if (!out)
        return NULL;
    if (out->nbytes)
        SAGA_TRY(k->edge_softmax_f32(saga_ctx_stream(c), e->batch->offsets, e->batch->n_seg,
                                     scores->cols, scores->data, out->data));
    /* the batch's offsets live in the placed graph's plan; the node is released with the
     * batch's region, so a copy of the two fields is all it keeps */
    saga_edge_batch *eb = NULL;
    SAGA_TRY(saga_alloc_array((void **)&eb, 1, sizeof *eb, "an edge-softmax node"));
    *eb = *e->batch;
    if (saga_tape_record(c, out, &scores, 1, edge_softmax_backward, eb, saga_free) < 0)
        return NULL;
    return out;
fail:
    return ctx_fail_null(c, st);
}

/* ---- per-edge outputs: saga_program_run_edges ---------------------------------------------- */

/* The gather as a reduction over the kept edge tensor, by destination (the placed in-CSR's
 * offsets). MAX keeps its argmax, a context tensor that lives as long as the tape. */
typedef struct edges_gather_state {
    const int64_t *offsets; /* device, n + 1 */
    int64_t n_seg;
    saga_reduce op;
    const int32_t *argmax; /* MAX only */
} edges_gather_state;

static saga_status edges_gather_backward(saga_ctx *c, saga_node *n, saga_tensor *grad_out) {
    saga_status st = SAGA_OK;
    const edges_gather_state *gs = saga_node_state(n);
    saga_tensor *E = saga_node_input(n, 0);
    saga_tensor *dE = saga_ctx_tensor(c, SAGA_F32, E->rows, E->cols);
    if (!dE)
        return ctx_error(c);
    if (dE->nbytes)
        SAGA_TRY(saga_ctx_kernels(c)->segment_reduce_bwd_f32(saga_ctx_stream(c), gs->offsets,
                                                             gs->n_seg, E->cols, gs->op,
                                                             grad_out->data, gs->argmax, dE->data));
    SAGA_TRY(saga_node_accumulate(c, n, 0, dE));
fail:
    return st;
}

/* The gather over the messages E (v's n_edges x F'), recorded: y (n_dst x F'), or NULL with the
 * error. */
static saga_tensor *gather_edges(saga_ctx *c, const saga_program *p, const saga_prog_view *v,
                                 saga_tensor *E) {
    saga_status st = SAGA_OK;
    const saga_kernels *k = saga_ctx_kernels(c);
    saga_reduce op = reduce_of(p->gather);
    saga_tensor *y = saga_ctx_tensor(c, SAGA_F32, v->n_dst, E->cols);
    saga_tensor *am =
        op == SAGA_REDUCE_MAX ? saga_ctx_tensor(c, SAGA_I32, v->n_dst, E->cols) : NULL;
    if (!y || (op == SAGA_REDUCE_MAX && !am))
        return NULL;
    if (y->nbytes)
        SAGA_TRY(k->segment_reduce_f32(saga_ctx_stream(c), v->d_in_off, v->n_dst, E->cols, op,
                                       E->data, y->data, am ? am->data : NULL));
    edges_gather_state *gs = NULL;
    SAGA_TRY(saga_alloc_array((void **)&gs, 1, sizeof *gs, "a gather node"));
    *gs = (edges_gather_state){v->d_in_off, v->n_dst, op, am ? am->data : NULL};
    if (saga_tape_record(c, y, &E, 1, edges_gather_backward, gs, saga_free) < 0)
        return NULL;
    return y;
fail:
    return ctx_fail_null(c, st);
}

/* The run's messages, kept: every batch's apply_edge output in one n_edges x F' tensor E (rows in
 * the placed graph's edge order), recorded as one node over (h, edata) whose backward is the
 * batched path's with keep_edges (or op by op, keeps_forward); *gathered its reduction by
 * destination. */
static saga_tensor *run_edges_batched(saga_ctx *c, const saga_program *p, const saga_prog_view *v,
                                      saga_tensor *h, saga_tensor *edata, void *layer,
                                      saga_tensor **gathered) {
    saga_status st = SAGA_OK;
    batch_run *r = NULL;
    saga_tensor *E = NULL;
    bool msg_grad = false;
    if (keeps_forward(c, p, v, edata)) {
        if (!(E = messages_kept(c, p, v, h, h, edata, layer)))
            return NULL;
    } else {
        if (!batch_run_new(c, p, v, layer, true, &r))
            return NULL;
        SAGA_TRY(batches_forward(c, r, h, h, edata, &E, &msg_grad));
        saga_tensor *inputs[2] = {h, edata};
        batch_run *state = r;
        r = NULL;
        if (saga_tape_record_ex(c, E, inputs, 2, msg_grad, batched_backward, state,
                                batch_run_free) < 0)
            return NULL;
    }
    if (!(*gathered = gather_edges(c, p, v, E)))
        return NULL;
    return E;
fail:
    batch_run_free(r);
    return ctx_fail_null(c, st);
}

saga_tensor *saga_program_run_edges(saga_ctx *c, const saga_program *p, const saga_dgraph *cg,
                                    saga_tensor *h, saga_tensor *edata, void *layer,
                                    saga_tensor **edges_out) {
    saga_status st = SAGA_OK;
    if (!c)
        return NULL;
    saga_ctx_flush(c);
    saga_dgraph *g = (saga_dgraph *)cg; /* lazy caches, as in saga_program_run */
    SAGA_CHECK(edges_out, SAGA_ERR_INVALID_ARG, "saga_program_run_edges: edges_out is NULL");
    SAGA_TRY(run_check(c, p, g, h, edata, true, "saga_program_run_edges"));

    saga_prog_view v;
    SAGA_TRY(dgraph_view(g, p, &v));
    saga_tensor *gathered = NULL;
    saga_tensor *E = run_edges_batched(c, p, &v, h, edata, layer, &gathered);
    if (!E)
        return NULL;
    *edges_out = E;
    if (!p->apply_vertex)
        return gathered;
    saga_vertex_in vin = {.first = 0, .count = g->n, .gathered = gathered, .self = h};
    saga_tensor *out = NULL;
    SAGA_TRY(
        saga_prog_apply_vertex(c, p->apply_vertex, &vin, layer, "saga_program_run_edges", &out));
    return out;
fail:
    return ctx_fail_null(c, st);
}
