/* test_program.c - vertex programs on the CPU backend: the fused and batched paths against plain
 * double-precision loops over the edges (GCN, GraphSAGE, GAT, MAX, edge features), within each
 * output's rounding bound derived from the magnitudes of its terms; finite-difference gradients,
 * dropout replay, edge cases and errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"
#include "test_xf.h"

#include "saga_program.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 12 /* vertices of the small test graph */
#define F 4  /* input features */
#define M_MAX 64

/* ---- fixtures ----------------------------------------------------------------------------- */

typedef struct edge {
    int32_t u, v;
    float w;
} edge;

static uint64_t rng_state = 1;

static double urand(void) { /* uniform in [0, 1) */
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) * (1.0 / 9007199254740992.0);
}

static void fill_random(float *x, int64_t n, double lo, double hi) {
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)(lo + (hi - lo) * urand());
}

/* 39 distinct edges between distinct vertices, none into vertex N-1 (it has out-edges only),
 * plus the self-loop 5 -> 5 of weight 2.5. */
static int64_t test_edges(edge *e) {
    rng_state = 12345;
    int64_t m = 0;
    while (m < 39) {
        int32_t u = (int32_t)(urand() * N), v = (int32_t)(urand() * (N - 1));
        bool dup = u == v;
        for (int64_t k = 0; k < m && !dup; k++)
            dup = e[k].u == u && e[k].v == v;
        if (dup)
            continue;
        e[m++] = (edge){u, v, (float)(0.5 + urand())};
    }
    e[m++] = (edge){5, 5, 2.5f};
    /* vertex N-1 must send something */
    e[0].u = N - 1;
    return m;
}

static saga_graph *graph_of(const edge *e, int64_t m, int32_t n) {
    int32_t src[M_MAX], dst[M_MAX];
    float w[M_MAX];
    for (int64_t k = 0; k < m; k++) {
        src[k] = e[k].u;
        dst[k] = e[k].v;
        w[k] = e[k].w;
    }
    saga_graph *g = NULL;
    assert_int_equal(saga_graph_from_edges(&g, n, m, src, dst, w, NULL, NULL), SAGA_OK);
    return g;
}

/* The reference's own placed edge list: one self-loop per vertex when add (an existing one
 * keeps its weight). */
static int64_t placed_edges(const edge *e, int64_t m, int32_t n, bool add, edge *out) {
    int64_t k = 0;
    for (int64_t i = 0; i < m; i++)
        if (!add || e[i].u != e[i].v)
            out[k++] = e[i];
    if (add)
        for (int32_t v = 0; v < n; v++) {
            float w = 1.0f;
            for (int64_t i = 0; i < m; i++)
                if (e[i].u == v && e[i].v == v)
                    w = e[i].w;
            out[k++] = (edge){v, v, w};
        }
    return k;
}

/* The scalar weight of each placed edge under mode (MEAN's division is separate). */
static void ref_weights(const edge *pe, int64_t m, int32_t n, saga_edge_weight mode, double *w) {
    int din[M_MAX] = {0}, dout[M_MAX] = {0};
    for (int64_t k = 0; k < m; k++) {
        din[pe[k].v]++;
        dout[pe[k].u]++;
    }
    for (int64_t k = 0; k < m; k++)
        w[k] = mode == SAGA_WEIGHT_NONE    ? 1.0
               : mode == SAGA_WEIGHT_GRAPH ? (double)pe[k].w
                                           : 1.0 / sqrt((double)din[pe[k].v] * dout[pe[k].u]);
}

/* out[v] = reduce over edges u -> v of msg[k] (rows of fo), 0 without in-edges. */
static void ref_reduce(const edge *pe, int64_t m, int32_t n, int fo, const double *msg,
                       saga_gather op, double *out) {
    for (int32_t v = 0; v < n; v++) {
        int cnt = 0;
        for (int j = 0; j < fo; j++)
            out[v * fo + j] = op == SAGA_GATHER_MAX ? -INFINITY : 0.0;
        for (int64_t k = 0; k < m; k++) {
            if (pe[k].v != v)
                continue;
            cnt++;
            for (int j = 0; j < fo; j++) {
                double x = msg[k * fo + j];
                if (op == SAGA_GATHER_MAX)
                    out[v * fo + j] = fmax(out[v * fo + j], x);
                else
                    out[v * fo + j] += x;
            }
        }
        for (int j = 0; j < fo; j++) {
            if (cnt == 0)
                out[v * fo + j] = 0.0;
            else if (op == SAGA_GATHER_MEAN)
                out[v * fo + j] /= cnt;
        }
    }
}

static saga_backend *cpu_backend(size_t budget) {
    saga_backend_params p = saga_backend_params_defaults();
    p.budget_bytes = budget;
    p.n_threads = 2;
    saga_backend *be = NULL;
    assert_int_equal(saga_backend_cpu_new(&be, &p), SAGA_OK);
    return be;
}

static saga_tensor *upload(saga_backend *be, int64_t rows, int64_t cols, const float *x) {
    saga_tensor *t = NULL;
    assert_int_equal(saga_tensor_from_host(&t, be, SAGA_F32, rows, cols, x), SAGA_OK);
    return t;
}

static void download(const saga_tensor *t, float *x) {
    assert_non_null(t);
    assert_int_equal(saga_tensor_to_host(t, x), SAGA_OK);
}

/* The most edges into one vertex of the placed edges. */
static int64_t max_in(const edge *pe, int64_t m) {
    int64_t in[N] = {0}, most = 0;
    for (int64_t k = 0; k < m; k++)
        most = ++in[pe[k].v] > most ? in[pe[k].v] : most;
    return most;
}

/* |got - ref| <= err elementwise: err holds each output's bound, derived by the reference from
 * the magnitudes of what it sums. */
static void assert_close(const double *ref, const double *err, const float *got, int64_t n,
                         const char *what) {
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]);
        if (!(d <= err[i])) {
            print_message("%s[%lld]: got %.9g, expected %.9g: %.3g times the bound %.3g\n", what,
                          (long long)i, (double)got[i], ref[i], d / err[i], err[i]);
            fail();
        }
    }
}

/* ---- apply functions ---------------------------------------------------------------------- */

typedef struct counting_layer {
    int calls;
    int64_t max_batch;  /* the program's max_batch_edges */
    int64_t most_edges; /* the biggest batch seen */
    int64_t edges_seen;
} counting_layer;

/* The fused path's message, computed with ops: forces the batched path. */
static saga_tensor *weighted_src(saga_ctx *c, const saga_edge_in *e, void *layer) {
    counting_layer *l = layer;
    if (l) {
        l->calls++;
        l->edges_seen += e->n_edges;
        if (e->n_edges > l->most_edges)
            l->most_edges = e->n_edges;
    }
    return e->weight ? saga_scale_rows(c, e->src, e->weight) : e->src;
}

typedef struct dense_layer {
    saga_tensor *W, *b;
    float dropout;
} dense_layer;

static saga_tensor *sage_vertex(saga_ctx *c, const saga_vertex_in *v, void *layer) {
    dense_layer *l = layer;
    return saga_matmul(c, saga_concat(c, v->self, v->gathered), l->W);
}

static saga_tensor *gcn_vertex(saga_ctx *c, const saga_vertex_in *v, void *layer) {
    dense_layer *l = layer;
    return saga_add_bias(c, v->gathered, l->b);
}

static saga_tensor *src_times_w(saga_ctx *c, const saga_edge_in *e, void *layer) {
    dense_layer *l = layer;
    saga_tensor *x = l->dropout > 0 ? saga_dropout(c, e->src, l->dropout) : e->src;
    return saga_matmul(c, x, l->W);
}

static saga_tensor *src_times_data(saga_ctx *c, const saga_edge_in *e, void *layer) {
    return saga_scale_rows(c, e->src, e->data);
}

#define GAT_HEADS 2
#define GAT_FO 3

typedef struct gat_layer {
    saga_tensor *a_src[GAT_HEADS], *a_dst[GAT_HEADS];
} gat_layer;

static saga_tensor *gat_edge(saga_ctx *c, const saga_edge_in *e, void *layer) {
    gat_layer *l = layer;
    saga_tensor *scores = NULL, *src[GAT_HEADS];
    for (int k = 0; k < GAT_HEADS; k++) {
        src[k] = saga_slice_cols(c, e->src, k * GAT_FO, GAT_FO);
        saga_tensor *dst = saga_slice_cols(c, e->dst, k * GAT_FO, GAT_FO);
        saga_tensor *s = saga_leaky_relu(
            c, saga_add(c, saga_matmul(c, src[k], l->a_src[k]), saga_matmul(c, dst, l->a_dst[k])),
            0.2f);
        scores = k ? saga_concat(c, scores, s) : s;
    }
    saga_tensor *alpha = saga_edge_softmax(c, e, scores);
    saga_tensor *msg = NULL;
    for (int k = 0; k < GAT_HEADS; k++) {
        saga_tensor *mk = saga_scale_rows(c, src[k], saga_slice_cols(c, alpha, k, 1));
        msg = k ? saga_concat(c, msg, mk) : mk;
    }
    return msg;
}

/* ---- fused and batched against the reference ---------------------------------------------- */

static void test_program_fused_and_batched_match_reference(void **state) {
    (void)state;
    saga_backend *be = cpu_backend(0);
    saga_ctx *c = NULL;
    assert_int_equal(saga_ctx_new(&c, be, 1), SAGA_OK);
    edge e[M_MAX], pe[M_MAX];
    int64_t m = test_edges(e);
    saga_graph *g = graph_of(e, m, N);
    float hx[N * F];
    fill_random(hx, N * F, -1, 1);
    saga_tensor *h = upload(be, N, F, hx);
    const struct {
        saga_edge_weight w;
        bool add;
        saga_gather op;
    } cfg[] = {{SAGA_WEIGHT_SYMNORM, true, SAGA_GATHER_SUM},
               {SAGA_WEIGHT_NONE, false, SAGA_GATHER_MEAN},
               {SAGA_WEIGHT_GRAPH, false, SAGA_GATHER_SUM},
               {SAGA_WEIGHT_GRAPH, true, SAGA_GATHER_MEAN},
               {SAGA_WEIGHT_NONE, true, SAGA_GATHER_SUM}};
    for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
        saga_dgraph_opts o = saga_dgraph_opts_defaults();
        o.self_loops = cfg[i].add ? SAGA_DGRAPH_SELF_LOOPS_ADD : SAGA_DGRAPH_SELF_LOOPS_KEEP;
        saga_dgraph *dg = NULL;
        assert_int_equal(saga_dgraph_new(&dg, be, g, &o), SAGA_OK);
        int64_t pm = placed_edges(e, m, N, cfg[i].add, pe);
        assert_int_equal(saga_dgraph_n_edges(dg), pm);
        assert_int_equal(saga_dgraph_n_vertices(dg), N);

        double w[M_MAX], msg[M_MAX * F], ref[N * F], mag[M_MAX * F], err[N * F], err2[N * F];
        ref_weights(pe, pm, N, cfg[i].w, w);
        for (int64_t k = 0; k < pm; k++)
            for (int j = 0; j < F; j++) {
                msg[k * F + j] = w[k] * hx[pe[k].u * F + j];
                mag[k * F + j] = fabs(msg[k * F + j]);
            }
        ref_reduce(pe, pm, N, F, msg, cfg[i].op, ref);
        ref_reduce(pe, pm, N, F, mag, cfg[i].op, err);
        /* the edge values rounded to f32, the products, the sum of at most K and MEAN's division:
         * gamma_(K+3) of the terms' magnitudes against the reference, twice that between the
         * fused and the batched order */
        const double gk = gam(max_in(pe, pm) + 3);
        for (int k = 0; k < N * F; k++) {
            err2[k] = 2 * gk * err[k];
            err[k] *= gk;
        }

        saga_program p = {
            .scatter = SAGA_SCATTER_SRC, .edge_weight = cfg[i].w, .gather = cfg[i].op};
        float fused[N * F], batched[N * F];
        for (int train = 0; train < 2; train++) {
            saga_ctx_train(c, train);
            download(saga_program_run(c, &p, dg, h, NULL, NULL), fused);
            assert_close(ref, err, fused, N * F, "fused");

            counting_layer cl = {0};
            saga_program pb = p;
            pb.apply_edge = weighted_src;
            pb.max_batch_edges = 7;
            download(saga_program_run(c, &pb, dg, h, NULL, &cl), batched);
            assert_close(ref, err, batched, N * F, "batched");
            double fd[N * F];
            for (int k = 0; k < N * F; k++)
                fd[k] = fused[k];
            assert_close(fd, err2, batched, N * F, "batched against fused");
            /* every edge seen once, in many batches of at most 7 (no vertex has more) */
            assert_int_equal(cl.edges_seen, pm);
            assert_true(cl.calls >= (pm + 6) / 7);
            assert_true(cl.most_edges <= 7);
            assert_int_equal(saga_ctx_status(c), SAGA_OK);
            saga_ctx_clear(c);
        }
        saga_dgraph_free(&dg);
        assert_null(dg);
    }
    saga_tensor_free(&h);
    saga_graph_free(&g);
    saga_ctx_free(&c);
    saga_backend_free_all(&be);
}

/* ---- one fixture per program kind --------------------------------------------------------- */

typedef enum kind { K_GCN, K_SAGE, K_GAT, K_MAX, K_EDATA, K_COUNT } kind;

typedef struct fixture {
    kind k;
    saga_backend *be;
    saga_graph *g;
    saga_dgraph *dg;
    saga_model *m;
    edge pe[M_MAX];
    int64_t pm;
    saga_tensor *x; /* N x F: a parameter, or a constant when x_const */
    bool x_const;
    saga_tensor *W;
    saga_tensor *edata; /* K_EDATA: a parameter, pm x 1 */
    dense_layer dl;
    gat_layer gl;
    saga_program p;
} fixture;

static saga_tensor *identity_src(saga_ctx *c, const saga_edge_in *e, void *layer) {
    return e->src;
}

static saga_tensor *param(fixture *fx, const char *name, int64_t r, int64_t cols, double lo,
                          double hi) {
    saga_tensor *t = saga_model_param(fx->m, name, r, cols, SAGA_INIT_ZEROS, 1);
    assert_non_null(t);
    fill_random(saga_tensor_data(t), r * cols, lo, hi);
    return t;
}

static fixture *fixture_new(kind k, bool x_const) {
    fixture *fx = calloc(1, sizeof *fx);
    assert_non_null(fx);
    fx->k = k;
    fx->x_const = x_const;
    fx->be = cpu_backend(0);
    edge e[M_MAX];
    int64_t m = test_edges(e);
    fx->g = graph_of(e, m, N);
    bool add = k == K_GCN || k == K_GAT;
    saga_dgraph_opts o = saga_dgraph_opts_defaults();
    o.self_loops = add ? SAGA_DGRAPH_SELF_LOOPS_ADD : SAGA_DGRAPH_SELF_LOOPS_KEEP;
    assert_int_equal(saga_dgraph_new(&fx->dg, fx->be, fx->g, &o), SAGA_OK);
    fx->pm = placed_edges(e, m, N, add, fx->pe);
    assert_int_equal(saga_model_new(&fx->m, fx->be), SAGA_OK);
    rng_state = 777 + (uint64_t)k;
    if (x_const) {
        float hx[N * F];
        fill_random(hx, N * F, -1, 1);
        fx->x = upload(fx->be, N, F, hx);
    } else {
        fx->x = param(fx, "x", N, F, -1, 1);
    }
    switch (k) {
    case K_GCN:
        fx->W = fx->dl.W = param(fx, "W", F, 3, -1, 1);
        fx->dl.b = param(fx, "b", 1, 3, -1, 1);
        fx->p = (saga_program){.scatter = SAGA_SCATTER_SRC,
                               .edge_weight = SAGA_WEIGHT_SYMNORM,
                               .gather = SAGA_GATHER_SUM,
                               .apply_vertex = gcn_vertex};
        break;
    case K_SAGE:
        fx->W = fx->dl.W = param(fx, "W", 2 * F, 3, -1, 1);
        fx->p = (saga_program){.scatter = SAGA_SCATTER_SRC,
                               .apply_edge = identity_src,
                               .gather = SAGA_GATHER_MEAN,
                               .apply_vertex = sage_vertex,
                               .max_batch_edges = 7};
        break;
    case K_GAT:
        fx->W = param(fx, "W", F, GAT_HEADS * GAT_FO, -1, 1);
        for (int h = 0; h < GAT_HEADS; h++) {
            char name[16];
            snprintf(name, sizeof name, "a_src%d", h);
            fx->gl.a_src[h] = param(fx, name, GAT_FO, 1, -1, 1);
            snprintf(name, sizeof name, "a_dst%d", h);
            fx->gl.a_dst[h] = param(fx, name, GAT_FO, 1, -1, 1);
        }
        fx->p = (saga_program){.scatter = SAGA_SCATTER_BOTH,
                               .apply_edge = gat_edge,
                               .gather = SAGA_GATHER_SUM,
                               .max_batch_edges = 7};
        break;
    case K_MAX:
        fx->W = fx->dl.W = param(fx, "W", F, 3, -1, 1);
        fx->p = (saga_program){.scatter = SAGA_SCATTER_SRC,
                               .apply_edge = src_times_w,
                               .gather = SAGA_GATHER_MAX,
                               .max_batch_edges = 7};
        break;
    case K_EDATA:
        fx->edata = param(fx, "edata", fx->pm, 1, -1, 1);
        fx->p = (saga_program){.scatter = SAGA_SCATTER_SRC,
                               .apply_edge = src_times_data,
                               .gather = SAGA_GATHER_SUM,
                               .max_batch_edges = 7};
        break;
    default:
        fail();
    }
    return fx;
}

static void fixture_free(fixture *fx) {
    if (fx->x_const)
        saga_tensor_free(&fx->x);
    saga_model_free(&fx->m);
    saga_dgraph_free(&fx->dg);
    saga_graph_free(&fx->g);
    saga_backend_free_all(&fx->be);
    free(fx);
}

static saga_tensor *fixture_forward(saga_ctx *c, fixture *fx) {
    switch (fx->k) {
    case K_GCN:
        return saga_program_run(c, &fx->p, fx->dg, saga_matmul(c, fx->x, fx->W), NULL, &fx->dl);
    case K_GAT:
        return saga_program_run(c, &fx->p, fx->dg, saga_matmul(c, fx->x, fx->W), NULL, &fx->gl);
    case K_EDATA:
        return saga_program_run(c, &fx->p, fx->dg, fx->x, fx->edata, NULL);
    default:
        return saga_program_run(c, &fx->p, fx->dg, fx->x, NULL, &fx->dl);
    }
}

static int fixture_out_cols(const fixture *fx) {
    return fx->k == K_GAT ? GAT_HEADS * GAT_FO : fx->k == K_EDATA ? F : 3;
}

static const float *host(saga_tensor *t) { /* the CPU backend's memory is the host's */
    return saga_tensor_cdata(t);
}

/* xw = x W (rows of x: n, W: k x cols); xwa, when given, = |x| |W|, the magnitude of its terms. */
static void ref_matmul(const float *x, const float *W, int n, int k, int cols, double *xw,
                       double *xwa) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < cols; j++) {
            double s = 0, a = 0;
            for (int t = 0; t < k; t++) {
                s += (double)x[i * k + t] * W[t * cols + j];
                a += fabs((double)x[i * k + t] * W[t * cols + j]);
            }
            xw[i * cols + j] = s;
            if (xwa)
                xwa[i * cols + j] = a;
        }
}

/* The fixture's output computed in double, straight from the definitions, and err, the bound on
 * each output of the program's f32 arithmetic: each sum of K terms within gamma_K of the
 * magnitude of its terms, carried through the later sums (an error in a term of a sum adds to it
 * as the term does; MAX selects, moving by at most the largest error of its candidates). */
static void fixture_reference(fixture *fx, double *out, double *err) {
    const float *x = host(fx->x);
    const edge *pe = fx->pe;
    int64_t pm = fx->pm;
    const int64_t K = max_in(pe, pm);
    static double msg[M_MAX * 8], mag[M_MAX * 8], xw[N * 8], xwa[N * 8], agg[N * 8], w[M_MAX];
    switch (fx->k) {
    case K_GCN: {
        ref_matmul(x, host(fx->W), N, F, 3, xw, xwa);
        ref_weights(pe, pm, N, SAGA_WEIGHT_SYMNORM, w);
        for (int64_t k = 0; k < pm; k++)
            for (int j = 0; j < 3; j++) {
                msg[k * 3 + j] = w[k] * xw[pe[k].u * 3 + j];
                mag[k * 3 + j] = w[k] * xwa[pe[k].u * 3 + j];
            }
        ref_reduce(pe, pm, N, 3, msg, SAGA_GATHER_SUM, out);
        ref_reduce(pe, pm, N, 3, mag, SAGA_GATHER_SUM, err);
        /* x W over F; the edge value's rounding and the product; the sum of K and the bias */
        for (int v = 0; v < N; v++)
            for (int j = 0; j < 3; j++) {
                out[v * 3 + j] += host(fx->dl.b)[j];
                err[v * 3 + j] += fabs(host(fx->dl.b)[j]);
                err[v * 3 + j] *= gam(F) + gam(K + 3);
            }
        break;
    }
    case K_SAGE: {
        for (int64_t k = 0; k < pm; k++)
            for (int j = 0; j < F; j++) {
                msg[k * F + j] = x[pe[k].u * F + j];
                mag[k * F + j] = fabs(msg[k * F + j]);
            }
        ref_reduce(pe, pm, N, F, msg, SAGA_GATHER_MEAN, agg);
        ref_reduce(pe, pm, N, F, mag, SAGA_GATHER_MEAN, xwa); /* the mean's magnitude */
        const float *W = host(fx->W);
        /* [x, mean] W over 2F, the mean's K terms and division ahead of it */
        for (int v = 0; v < N; v++)
            for (int j = 0; j < 3; j++) {
                double s = 0, a = 0;
                for (int t = 0; t < F; t++) {
                    s += x[v * F + t] * (double)W[t * 3 + j] + agg[v * F + t] * W[(F + t) * 3 + j];
                    a += fabs(x[v * F + t] * (double)W[t * 3 + j]) +
                         xwa[v * F + t] * fabs(W[(F + t) * 3 + j]);
                }
                out[v * 3 + j] = s;
                err[v * 3 + j] = (gam(2 * F) + gam(K + 1)) * a;
            }
        break;
    }
    case K_GAT: {
        const int H = GAT_HEADS, FO = GAT_FO, C = H * FO;
        ref_matmul(x, host(fx->W), N, F, C, xw, xwa);
        static double score[M_MAX * GAT_HEADS], smag[M_MAX * GAT_HEADS];
        for (int64_t k = 0; k < pm; k++)
            for (int h = 0; h < H; h++) {
                double s = 0, a = 0;
                for (int j = 0; j < FO; j++) {
                    s += host(fx->gl.a_src[h])[j] * xw[pe[k].u * C + h * FO + j] +
                         host(fx->gl.a_dst[h])[j] * xw[pe[k].v * C + h * FO + j];
                    a += fabs(host(fx->gl.a_src[h])[j]) * xwa[pe[k].u * C + h * FO + j] +
                         fabs(host(fx->gl.a_dst[h])[j]) * xwa[pe[k].v * C + h * FO + j];
                }
                score[k * H + h] = s > 0 ? s : 0.2 * s;
                smag[k * H + h] = a;
            }
        for (int v = 0; v < N; v++)
            for (int h = 0; h < H; h++) {
                double mx = -INFINITY, z = 0, most = 0;
                for (int64_t k = 0; k < pm; k++)
                    if (pe[k].v == v) {
                        mx = fmax(mx, score[k * H + h]);
                        most = fmax(most, smag[k * H + h]);
                    }
                for (int64_t k = 0; k < pm; k++)
                    if (pe[k].v == v)
                        z += exp(score[k * H + h] - mx);
                /* a score's error: x W over F and the attention's 2 FO terms, the leaky relu's
                 * product and the max's subtraction; the softmax moves an alpha by at most twice
                 * the largest, relative */
                const double ds = (gam(F) + gam(2 * FO + 2)) * most;
                for (int64_t k = 0; k < pm; k++)
                    if (pe[k].v == v) {
                        double a = exp(score[k * H + h] - mx) / z;
                        for (int j = 0; j < FO; j++) {
                            msg[k * C + h * FO + j] = a * xw[pe[k].u * C + h * FO + j];
                            mag[k * C + h * FO + j] = a * xwa[pe[k].u * C + h * FO + j] *
                                                      (2 * ds + gam(F) + 2 * gam(K + 2));
                        }
                    }
            }
        /* alpha x W: x W's error, the softmax's (its scores', the exp, its sum of K and
         * division), the product and the sum of K */
        ref_reduce(pe, pm, N, C, msg, SAGA_GATHER_SUM, out);
        ref_reduce(pe, pm, N, C, mag, SAGA_GATHER_SUM, err);
        break;
    }
    case K_MAX: {
        ref_matmul(x, host(fx->W), N, F, 3, xw, xwa);
        for (int64_t k = 0; k < pm; k++)
            for (int j = 0; j < 3; j++) {
                msg[k * 3 + j] = xw[pe[k].u * 3 + j];
                mag[k * 3 + j] = gam(F) * xwa[pe[k].u * 3 + j]; /* x W over F */
            }
        ref_reduce(pe, pm, N, 3, msg, SAGA_GATHER_MAX, out);
        ref_reduce(pe, pm, N, 3, mag, SAGA_GATHER_MAX, err);
        break;
    }
    case K_EDATA: {
        /* edata rows follow the placed graph's edge order */
        saga_csr ord = saga_dgraph_edge_order(fx->dg);
        static edge oe[M_MAX];
        for (int32_t v = 0; v < N; v++)
            for (int64_t k = ord.offsets[v]; k < ord.offsets[v + 1]; k++) {
                oe[k] = (edge){ord.indices[k], v, 1.0f};
                for (int j = 0; j < F; j++) {
                    msg[k * F + j] = x[ord.indices[k] * F + j] * (double)host(fx->edata)[k];
                    mag[k * F + j] = fabs(msg[k * F + j]);
                }
            }
        ref_reduce(oe, ord.nnz, N, F, msg, SAGA_GATHER_SUM, out);
        ref_reduce(oe, ord.nnz, N, F, mag, SAGA_GATHER_SUM, err);
        for (int i = 0; i < N * F; i++)
            err[i] *= gam(K + 1); /* the products and the sum of K */
        break;
    }
    default:
        fail();
    }
}

static void test_program_kinds_match_reference(void **state) {
    (void)state;
    for (kind k = 0; k < K_COUNT; k++) {
        fixture *fx = fixture_new(k, false);
        saga_ctx *c = NULL;
        assert_int_equal(saga_ctx_new(&c, fx->be, 1), SAGA_OK);
        int fo = fixture_out_cols(fx);
        double ref[N * 8], err[N * 8];
        float got[N * 8];
        fixture_reference(fx, ref, err);
        for (int train = 0; train < 2; train++) {
            saga_ctx_train(c, train);
            saga_tensor *out = fixture_forward(c, fx);
            assert_non_null(out);
            assert_int_equal(saga_tensor_rows(out), N);
            assert_int_equal(saga_tensor_cols(out), fo);
            download(out, got);
            assert_close(ref, err, got, N * fo, "program output");
            saga_ctx_clear(c);
        }
        saga_ctx_free(&c);
        fixture_free(fx);
    }
}

/* ---- gradients by finite differences ------------------------------------------------------ */

/* loss = sum(out .* R), in double, for the current parameter values (inference mode). */
static double fd_loss(saga_ctx *c, fixture *fx, const float *R, int64_t n) {
    saga_ctx_train(c, false);
    saga_tensor *out = fixture_forward(c, fx);
    assert_non_null(out);
    float got[N * 8];
    download(out, got);
    double l = 0;
    for (int64_t i = 0; i < n; i++)
        l += (double)got[i] * R[i];
    saga_ctx_clear(c);
    return l;
}

/* Every parameter of m: its gradient (a backward pass has computed it) against the central
 * difference of loss(c, arg) over steps of eps, within tol relative to 1 + |difference|; a
 * failure names the parameter, after what. */
static void params_match_differences(saga_model *m, saga_ctx *c, double (*loss)(saga_ctx *, void *),
                                     void *arg, double eps, double tol, const char *what) {
    for (int i = 0; i < saga_model_n_params(m); i++) {
        saga_tensor *p = saga_model_param_at(m, i);
        const float *g = host(saga_grad(p));
        float *v = saga_tensor_data(p);
        int64_t np = saga_tensor_rows(p) * saga_tensor_cols(p);
        for (int64_t j = 0; j < np; j++) {
            float keep = v[j];
            v[j] = keep + (float)eps;
            double lp = loss(c, arg);
            v[j] = keep - (float)eps;
            double lm = loss(c, arg);
            v[j] = keep;
            double fd = (lp - lm) / (2 * eps);
            if (fabs(fd - g[j]) > tol * (1 + fabs(fd))) {
                print_message("%s, d/d %s[%lld]: backward %.6g, finite difference %.6g\n", what,
                              saga_model_param_name(m, i), (long long)j, (double)g[j], fd);
                fail();
            }
        }
    }
}

/* fd_loss of a fixture with its random weights R of n outputs */
typedef struct fd_arg {
    fixture *fx;
    const float *R;
    int64_t n;
} fd_arg;

static double fd_loss_of(saga_ctx *c, void *a) {
    const fd_arg *f = a;
    return fd_loss(c, f->fx, f->R, f->n);
}

static void grad_check(fixture *fx, double eps, double tol) {
    saga_ctx *c = NULL;
    assert_int_equal(saga_ctx_new(&c, fx->be, 3), SAGA_OK);
    int64_t n = (int64_t)N * fixture_out_cols(fx);
    float R[N * 8];
    fill_random(R, n, -1, 1);
    saga_tensor *Rt = upload(fx->be, N, fixture_out_cols(fx), R);

    assert_int_equal(saga_model_zero_grad(fx->m), SAGA_OK);
    saga_ctx_train(c, true);
    saga_tensor *loss = saga_sum(c, saga_mul(c, fixture_forward(c, fx), Rt));
    assert_non_null(loss);
    assert_int_equal(saga_backward(c, loss), SAGA_OK);
    saga_ctx_clear(c);

    char what[32];
    snprintf(what, sizeof what, "kind %d", (int)fx->k);
    fd_arg arg = {fx, R, n};
    params_match_differences(fx->m, c, fd_loss_of, &arg, eps, tol, what);
    saga_tensor_free(&Rt);
    saga_ctx_free(&c);
}

static void test_program_gradients_match_finite_differences(void **state) {
    (void)state;
    for (kind k = 0; k < K_COUNT; k++) {
        fixture *fx = fixture_new(k, false);
        /* MAX and GAT's leaky relu have kinks: a small step stays on one side of them */
        grad_check(fx, k == K_MAX || k == K_GAT ? 1e-3 : 1e-2, 5e-3);
        fixture_free(fx);
    }
}

/* The parameters apply_edge uses get their gradients even when the input needs none. */
static void test_program_gradients_reach_apply_edge_params_with_constant_input(void **state) {
    (void)state;
    fixture *fx = fixture_new(K_MAX, true);
    grad_check(fx, 1e-3, 5e-3);
    fixture_free(fx);
    fx = fixture_new(K_GAT, true);
    grad_check(fx, 1e-3, 5e-3);
    fixture_free(fx);
}

/* Dropout inside apply_edge: the backward pass recomputes each batch, and must draw the masks
 * the forward pass drew. The output is linear in W, so loss = <dloss/dW, W> holds (to the
 * rounding of its sums) for the forward's masks and fails for any other. */
static void test_program_recompute_replays_dropout(void **state) {
    (void)state;
    fixture *fx = fixture_new(K_MAX, true);
    fx->p.gather = SAGA_GATHER_SUM;
    fx->dl.dropout = 0.5f;
    saga_ctx *c = NULL;
    assert_int_equal(saga_ctx_new(&c, fx->be, 99), SAGA_OK);
    float R[N * 3];
    fill_random(R, N * 3, -1, 1);
    saga_tensor *Rt = upload(fx->be, N, 3, R);
    /* Both sides sum the products R[v, j] x[u, t] W[t, j] (x after dropout: 0 or 2 x) over the
     * edges u -> v, in f32 and in different orders: the loss over x W's F terms, the K edges into
     * a vertex and the sum's 3 N; the gradient over the pm edges (the dot with W is in double).
     * Masks drawn again would move it by some of these products, not by their rounding. */
    const float *x = host(fx->x), *W = host(fx->W);
    double mag = 0;
    for (int64_t k = 0; k < fx->pm; k++)
        for (int j = 0; j < 3; j++)
            for (int t = 0; t < F; t++)
                mag += fabs(R[fx->pe[k].v * 3 + j] * 2.0 * x[fx->pe[k].u * F + t] * W[t * 3 + j]);
    const double bound =
        (gam(F) + gam(max_in(fx->pe, fx->pm)) + gam(3 * N + 1) + gam(fx->pm + 1)) * mag;
    for (int step = 0; step < 3; step++) {
        assert_int_equal(saga_model_zero_grad(fx->m), SAGA_OK);
        saga_ctx_train(c, true);
        uint64_t before = saga_ctx_rng_counter(c);
        saga_tensor *loss = saga_sum(c, saga_mul(c, fixture_forward(c, fx), Rt));
        assert_non_null(loss);
        double l = saga_item(loss);
        uint64_t after = saga_ctx_rng_counter(c);
        assert_true(after > before); /* masks were drawn */
        assert_int_equal(saga_backward(c, loss), SAGA_OK);
        assert_true(saga_ctx_rng_counter(c) == after); /* backward leaves the counter */
        const float *g = host(saga_grad(fx->W)), *w = host(fx->W);
        double dot = 0;
        for (int i = 0; i < F * 3; i++)
            dot += (double)g[i] * w[i];
        assert_true(fabs(dot - l) <= bound);
        saga_ctx_clear(c);
    }
    saga_tensor_free(&Rt);
    saga_ctx_free(&c);
    fixture_free(fx);
}

/* ---- edge cases --------------------------------------------------------------------------- */

static void test_program_edgeless_graph(void **state) {
    (void)state;
    saga_backend *be = cpu_backend(0);
    saga_ctx *c = NULL;
    assert_int_equal(saga_ctx_new(&c, be, 1), SAGA_OK);
    saga_graph *g = graph_of(NULL, 0, 5);
    float hx[5 * F];
    fill_random(hx, 5 * F, -1, 1);
    saga_tensor *h = upload(be, 5, F, hx);
    saga_model *m = NULL;
    assert_int_equal(saga_model_new(&m, be), SAGA_OK);
    dense_layer dl = {.W = saga_model_param(m, "W", F, 3, SAGA_INIT_GLOROT, 1)};
    saga_dgraph *dg = NULL;
    assert_int_equal(saga_dgraph_new(&dg, be, g, NULL), SAGA_OK);
    assert_int_equal(saga_dgraph_n_edges(dg), 0);
    float got[5 * F];
    for (int train = 0; train < 2; train++) {
        saga_ctx_train(c, train);
        saga_program sum = {.scatter = SAGA_SCATTER_SRC, .edge_weight = SAGA_WEIGHT_SYMNORM};
        download(saga_program_run(c, &sum, dg, h, NULL, NULL), got);
        for (int i = 0; i < 5 * F; i++)
            assert_true(got[i] == 0.0f);
        saga_program mx = {
            .scatter = SAGA_SCATTER_SRC, .apply_edge = src_times_w, .gather = SAGA_GATHER_MAX};
        saga_tensor *out = saga_program_run(c, &mx, dg, h, NULL, &dl);
        assert_non_null(out);
        assert_int_equal(saga_tensor_cols(out), 3);
        download(out, got);
        for (int i = 0; i < 5 * 3; i++)
            assert_true(got[i] == 0.0f);
        if (train) {
            saga_tensor *loss = saga_sum(c, out);
            assert_int_equal(saga_backward(c, loss), SAGA_OK);
        }
        assert_int_equal(saga_ctx_status(c), SAGA_OK);
        saga_ctx_clear(c);
    }
    saga_dgraph_free(&dg);

    /* with self-loops added, SYMNORM is the identity on an edgeless graph */
    saga_dgraph_opts o = {.self_loops = SAGA_DGRAPH_SELF_LOOPS_ADD};
    assert_int_equal(saga_dgraph_new(&dg, be, g, &o), SAGA_OK);
    assert_int_equal(saga_dgraph_n_edges(dg), 5);
    saga_program sum = {.scatter = SAGA_SCATTER_SRC, .edge_weight = SAGA_WEIGHT_SYMNORM};
    download(saga_program_run(c, &sum, dg, h, NULL, NULL), got);
    for (int i = 0; i < 5 * F; i++) /* one term, times 1 / sqrt(1 * 1) = 1: no rounding */
        assert_true(got[i] == hx[i]);
    saga_ctx_clear(c);
    saga_dgraph_free(&dg);

    /* no vertices at all */
    saga_graph *g0 = graph_of(NULL, 0, 0);
    assert_int_equal(saga_dgraph_new(&dg, be, g0, NULL), SAGA_OK);
    saga_tensor *h0 = upload(be, 0, F, NULL);
    saga_tensor *out = saga_program_run(c, &sum, dg, h0, NULL, NULL);
    assert_non_null(out);
    assert_int_equal(saga_tensor_rows(out), 0);
    saga_ctx_clear(c);
    saga_tensor_free(&h0);
    saga_dgraph_free(&dg);
    saga_graph_free(&g0);

    saga_model_free(&m);
    saga_tensor_free(&h);
    saga_graph_free(&g);
    saga_ctx_free(&c);
    saga_backend_free_all(&be);
}

static void test_program_edge_order(void **state) {
    (void)state;
    saga_backend *be = cpu_backend(0);
    edge e[M_MAX], pe[M_MAX];
    int64_t m = test_edges(e);
    saga_graph *g = graph_of(e, m, N);
    for (int add = 0; add < 2; add++) {
        saga_dgraph_opts o = {.self_loops =
                                  add ? SAGA_DGRAPH_SELF_LOOPS_ADD : SAGA_DGRAPH_SELF_LOOPS_KEEP};
        saga_dgraph *dg = NULL;
        assert_int_equal(saga_dgraph_new(&dg, be, g, &o), SAGA_OK);
        int64_t pm = placed_edges(e, m, N, add, pe);
        saga_csr ord = saga_dgraph_edge_order(dg);
        assert_int_equal(ord.n_rows, N);
        assert_int_equal(ord.nnz, pm);
        assert_int_equal(ord.offsets[N], pm);
        assert_non_null(ord.weights);
        bool used[M_MAX] = {false};
        for (int32_t v = 0; v < N; v++) {
            int loops = 0;
            for (int64_t k = ord.offsets[v]; k < ord.offsets[v + 1]; k++) {
                if (k > ord.offsets[v])
                    assert_true(ord.indices[k - 1] < ord.indices[k]);
                loops += ord.indices[k] == v;
                /* each placed edge appears exactly once, with its weight */
                int64_t i = 0;
                while (i < pm && (used[i] || pe[i].u != ord.indices[k] || pe[i].v != v))
                    i++;
                assert_true(i < pm);
                assert_true(ord.weights[k] == pe[i].w);
                used[i] = true;
            }
            if (add)
                assert_int_equal(loops, 1);
        }
        saga_dgraph_free(&dg);
    }
    saga_graph_free(&g);
    saga_backend_free_all(&be);
}

/* ---- errors ------------------------------------------------------------------------------- */

static saga_tensor *too_few_rows(saga_ctx *c, const saga_edge_in *e, void *layer) {
    return saga_slice_cols(c, saga_gather_rows(c, e->src, (saga_tensor *)layer), 0, 1);
}

static void expect_error(saga_ctx *c, saga_tensor *out, const char *needle1, const char *needle2) {
    assert_null(out);
    assert_int_equal(saga_ctx_status(c), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains(needle1, needle2, NULL);
    saga_ctx_clear(c);
    assert_int_equal(saga_ctx_status(c), SAGA_OK);
}

static void test_program_errors(void **state) {
    (void)state;
    saga_backend *be = cpu_backend(0);
    saga_ctx *c = NULL;
    assert_int_equal(saga_ctx_new(&c, be, 1), SAGA_OK);
    edge e[M_MAX];
    int64_t m = test_edges(e);
    saga_graph *g = graph_of(e, m, N);
    saga_dgraph *dg = NULL;
    assert_int_equal(saga_dgraph_new(&dg, be, g, NULL), SAGA_OK);
    float hx[(N + 1) * F] = {0};
    saga_tensor *bad = upload(be, N + 1, F, hx), *h = upload(be, N, F, hx);
    saga_program p = {.scatter = SAGA_SCATTER_SRC};

    /* wrong number of rows: sticky, naming the entry and both shapes */
    saga_tensor *out = saga_program_run(c, &p, dg, bad, NULL, NULL);
    assert_null(out);
    assert_int_equal(saga_ctx_status(c), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("saga_program_run", "13 x 4", "12 vertices", NULL);
    assert_null(saga_relu(c, out)); /* later ops on the NULL result fail at once */
    assert_int_equal(saga_ctx_status(c), SAGA_ERR_INVALID_ARG);
    saga_ctx_clear(c);

    /* a NULL input after an earlier error keeps that error */
    assert_null(saga_program_run(c, &p, dg, NULL, NULL, NULL));
    saga_test_assert_error_contains("h is NULL", NULL);
    saga_ctx_clear(c);

    expect_error(c, saga_program_run(c, &p, dg, h, h, NULL), "saga_program_run", "apply_edge");
    saga_program both = {.scatter = SAGA_SCATTER_BOTH};
    expect_error(c, saga_program_run(c, &both, dg, h, NULL, NULL), "saga_program_run",
                 "SCATTER_BOTH");
    saga_program badg = {.scatter = SAGA_SCATTER_SRC, .gather = SAGA_GATHER_COUNT};
    expect_error(c, saga_program_run(c, &badg, dg, h, NULL, NULL), "saga_program_run", "gather 3");
    saga_program ed = {.scatter = SAGA_SCATTER_SRC, .apply_edge = src_times_data};
    expect_error(c, saga_program_run(c, &ed, dg, h, h, NULL), "edata is f32 12 x 4", "40 edges");
    /* apply_edge returning the wrong number of rows */
    int32_t zero = 0;
    saga_tensor *idx = NULL;
    assert_int_equal(saga_tensor_from_host(&idx, be, SAGA_I32, 1, 1, &zero), SAGA_OK);
    saga_program few = {.scatter = SAGA_SCATTER_SRC, .apply_edge = too_few_rows};
    expect_error(c, saga_program_run(c, &few, dg, h, NULL, idx), "apply_edge returned", "1 x 1");
    /* saga_edge_softmax outside a batch */
    saga_edge_in none = {0};
    expect_error(c, saga_edge_softmax(c, &none, h), "saga_edge_softmax", "batch");

    saga_tensor_free(&idx);
    saga_tensor_free(&bad);
    saga_tensor_free(&h);
    saga_dgraph_free(&dg);
    saga_graph_free(&g);
    saga_ctx_free(&c);
    saga_backend_free_all(&be);
}

/* Placing a graph within a budget, and failing every host allocation in turn. */
static void test_program_dgraph_budget_and_allocation_failures(void **state) {
    (void)state;
    edge e[M_MAX];
    int64_t m = test_edges(e);
    saga_graph *g = graph_of(e, m, N);
    saga_backend *be = cpu_backend(256);
    saga_dgraph *dg = NULL;
    assert_int_equal(saga_dgraph_new(&dg, be, g, NULL), SAGA_ERR_BUDGET);
    assert_null(dg);
    saga_backend_stats s;
    saga_backend_get_stats(be, &s);
    assert_int_equal(s.in_use_bytes, 0);
    saga_backend_free_all(&be);

    be = cpu_backend(0);
    saga_dgraph_opts o = {.self_loops = SAGA_DGRAPH_SELF_LOOPS_ADD};
    saga_status st = SAGA_ERR_OUT_OF_MEMORY;
    for (long n = 1; st != SAGA_OK; n++) {
        saga_test_fail_alloc_after(n);
        st = saga_dgraph_new(&dg, be, g, &o);
        saga_test_fail_alloc_after(0);
        if (st != SAGA_OK) {
            assert_int_equal(st, SAGA_ERR_OUT_OF_MEMORY);
            assert_null(dg);
            saga_backend_get_stats(be, &s);
            assert_int_equal(s.in_use_bytes, 0);
        }
        assert_true(n < 1000);
    }
    assert_int_equal(saga_dgraph_n_edges(dg), m - 1 + N);
    saga_dgraph_free(&dg);
    saga_backend_free_all(&be);
    saga_graph_free(&g);
}

/* ---- per-edge outputs (saga_program_run_edges) --------------------------------------------- */

#define RE_FE 3 /* edge state width */
#define RE_FV 2 /* vertex output width */

typedef struct edges_fixture {
    saga_backend *be;
    saga_graph *g;
    saga_dgraph *dg;
    saga_model *m;
    saga_tensor *x, *edata, *We, *Wv; /* x: N x F, edata: m x 2, We: 2F+2 x RE_FE, Wv */
    saga_program p;
} edges_fixture;

/* An Interaction Network's edge update: tanh([h_src, h_dst, e] We). */
static saga_tensor *in_edge(saga_ctx *c, const saga_edge_in *e, void *layer) {
    edges_fixture *fx = layer;
    return saga_tanh(
        c, saga_matmul(c, saga_concat(c, saga_concat(c, e->src, e->dst), e->data), fx->We));
}

/* Its node update: [h, gathered] Wv. */
static saga_tensor *in_vertex(saga_ctx *c, const saga_vertex_in *v, void *layer) {
    edges_fixture *fx = layer;
    return saga_matmul(c, saga_concat(c, v->self, v->gathered), fx->Wv);
}

/* How a fixture's program runs: batches of 7 edges recomputed in the backward pass, or one batch
 * whose forward pass stays on the tape (keep_forward). */
enum { EDGES_BATCHED, EDGES_KEPT, EDGES_MODES };

static void edges_fixture_init(edges_fixture *fx, saga_gather op, int mode) {
    memset(fx, 0, sizeof *fx);
    fx->be = cpu_backend(0);
    edge e[M_MAX];
    int64_t m = test_edges(e);
    fx->g = graph_of(e, m, N);
    assert_int_equal(saga_dgraph_new(&fx->dg, fx->be, fx->g, NULL), SAGA_OK);
    assert_int_equal(saga_model_new(&fx->m, fx->be), SAGA_OK);
    rng_state = 4242;
    const char *names[4] = {"x", "edata", "We", "Wv"};
    int64_t rows[4] = {N, m, 2 * F + 2, F + RE_FE}, cols[4] = {F, 2, RE_FE, RE_FV};
    saga_tensor **t[4] = {&fx->x, &fx->edata, &fx->We, &fx->Wv};
    for (int i = 0; i < 4; i++) {
        *t[i] = saga_model_param(fx->m, names[i], rows[i], cols[i], SAGA_INIT_ZEROS, 1);
        assert_non_null(*t[i]);
        fill_random(saga_tensor_data(*t[i]), rows[i] * cols[i], -0.8, 0.8);
    }
    bool kept = mode == EDGES_KEPT;
    fx->p = (saga_program){.scatter = SAGA_SCATTER_BOTH,
                           .apply_edge = in_edge,
                           .gather = op,
                           .apply_vertex = in_vertex,
                           .max_batch_edges = kept ? 0 : 7,
                           .keep_forward = kept};
}

static void edges_fixture_free(edges_fixture *fx) {
    saga_model_free(&fx->m);
    saga_dgraph_free(&fx->dg);
    saga_graph_free(&fx->g);
    saga_backend_free_all(&fx->be);
}

/* The edge states (m x RE_FE) and vertex outputs (N x RE_FV) in double, from the definitions,
 * over the placed graph's edge order, and Eerr, oerr: the bounds on the program's f32 results, as
 * in fixture_reference. */
static void edges_reference(const edges_fixture *fx, double *E, double *out, double *Eerr,
                            double *oerr) {
    saga_csr ord = saga_dgraph_edge_order(fx->dg);
    const float *x = host(fx->x), *ed = host(fx->edata), *We = host(fx->We), *Wv = host(fx->Wv);
    static edge oe[M_MAX];
    int64_t K = 0;
    for (int32_t v = 0; v < N; v++) {
        K = ord.offsets[v + 1] - ord.offsets[v] > K ? ord.offsets[v + 1] - ord.offsets[v] : K;
        for (int64_t k = ord.offsets[v]; k < ord.offsets[v + 1]; k++) {
            int32_t u = ord.indices[k];
            oe[k] = (edge){u, v, 1.0f};
            double in[2 * F + 2];
            for (int j = 0; j < F; j++) {
                in[j] = x[u * F + j];
                in[F + j] = x[v * F + j];
            }
            in[2 * F] = ed[k * 2];
            in[2 * F + 1] = ed[k * 2 + 1];
            for (int j = 0; j < RE_FE; j++) {
                double s = 0, a = 0;
                for (int t = 0; t < 2 * F + 2; t++) {
                    s += in[t] * We[t * RE_FE + j];
                    a += fabs(in[t] * We[t * RE_FE + j]);
                }
                E[k * RE_FE + j] = tanh(s);
                /* the product's 2F + 2 terms through tanh's slope, and saga's tanh, within 4 u
                 * of tanh (ops/cpu/nn_dense.c) */
                Eerr[k * RE_FE + j] =
                    gam(2 * F + 2) * a * (1 - E[k * RE_FE + j] * E[k * RE_FE + j]) +
                    4 * SAGA_TEST_U32 * fabs(E[k * RE_FE + j]);
            }
        }
    }
    double agg[N * RE_FE], aerr[N * RE_FE], amag[N * RE_FE], Emag[M_MAX * RE_FE];
    for (int64_t i = 0; i < ord.nnz * RE_FE; i++)
        Emag[i] = fabs(E[i]);
    ref_reduce(oe, ord.nnz, N, RE_FE, E, fx->p.gather, agg);
    ref_reduce(oe, ord.nnz, N, RE_FE, Eerr, fx->p.gather, aerr);
    ref_reduce(oe, ord.nnz, N, RE_FE, Emag, fx->p.gather, amag);
    for (int v = 0; v < N; v++)
        for (int j = 0; j < RE_FV; j++) {
            double s = 0, a = 0, e = 0;
            for (int t = 0; t < F; t++) {
                s += x[v * F + t] * (double)Wv[t * RE_FV + j];
                a += fabs(x[v * F + t] * (double)Wv[t * RE_FV + j]);
            }
            for (int t = 0; t < RE_FE; t++) {
                s += agg[v * RE_FE + t] * Wv[(F + t) * RE_FV + j];
                a += amag[v * RE_FE + t] * fabs(Wv[(F + t) * RE_FV + j]);
                /* the states' errors, and (SUM, MEAN) the gather's K terms and division */
                e += fabs(Wv[(F + t) * RE_FV + j]) *
                     (aerr[v * RE_FE + t] +
                      (fx->p.gather == SAGA_GATHER_MAX ? 0 : gam(K + 1)) * amag[v * RE_FE + t]);
            }
            out[v * RE_FV + j] = s;
            oerr[v * RE_FV + j] = e + gam(F + RE_FE) * a; /* [x, gathered] Wv's F + RE_FE terms */
        }
}

/* loss = sum(E .* R1) + sum(out .* R2) on the current parameters, in inference mode. */
static double edges_loss(saga_ctx *c, edges_fixture *fx, const float *R1, const float *R2) {
    saga_ctx_train(c, false);
    saga_tensor *E = NULL;
    saga_tensor *out = saga_program_run_edges(c, &fx->p, fx->dg, fx->x, fx->edata, fx, &E);
    assert_non_null(out);
    assert_non_null(E);
    int64_t m = saga_dgraph_n_edges(fx->dg);
    const float *e = host(E), *o = host(out);
    double l = 0;
    for (int64_t i = 0; i < m * RE_FE; i++)
        l += (double)e[i] * R1[i];
    for (int64_t i = 0; i < N * RE_FV; i++)
        l += (double)o[i] * R2[i];
    saga_ctx_clear(c);
    return l;
}

/* Runs body on a fresh fixture and context for each way of running the program (EDGES_MODES)
 * and each gather (sum, mean, max). */
static void each_edges_case(void (*body)(edges_fixture *fx, saga_ctx *c, int mode)) {
    const saga_gather ops[] = {SAGA_GATHER_SUM, SAGA_GATHER_MEAN, SAGA_GATHER_MAX};
    for (int mode = 0; mode < EDGES_MODES; mode++)
        for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
            edges_fixture fx;
            edges_fixture_init(&fx, ops[i], mode);
            saga_ctx *c = NULL;
            assert_int_equal(saga_ctx_new(&c, fx.be, 1), SAGA_OK);
            body(&fx, c, mode);
            saga_ctx_free(&c);
            edges_fixture_free(&fx);
        }
}

static void edges_matches_reference(edges_fixture *fx, saga_ctx *c, int mode) {
    (void)mode;
    int64_t m = saga_dgraph_n_edges(fx->dg);
    double Eref[M_MAX * RE_FE], oref[N * RE_FV], Eerr[M_MAX * RE_FE], oerr[N * RE_FV];
    float Egot[M_MAX * RE_FE], ogot[N * RE_FV];
    edges_reference(fx, Eref, oref, Eerr, oerr);
    for (int train = 0; train < 2; train++) {
        saga_ctx_train(c, train);
        saga_tensor *E = NULL;
        saga_tensor *out = saga_program_run_edges(c, &fx->p, fx->dg, fx->x, fx->edata, fx, &E);
        assert_non_null(out);
        assert_int_equal(saga_tensor_rows(E), m);
        assert_int_equal(saga_tensor_cols(E), RE_FE);
        download(E, Egot);
        download(out, ogot);
        assert_close(Eref, Eerr, Egot, m * RE_FE, "edge states");
        assert_close(oref, oerr, ogot, N * RE_FV, "vertex outputs");
        /* the same program through saga_program_run gives the same vertex outputs */
        download(saga_program_run(c, &fx->p, fx->dg, fx->x, fx->edata, fx), ogot);
        assert_close(oref, oerr, ogot, N * RE_FV, "saga_program_run");
        saga_ctx_clear(c);
    }
}

static void test_program_run_edges_matches_reference(void **state) {
    (void)state;
    each_edges_case(edges_matches_reference);
}

/* edges_loss of a fixture with its random weights R1 (edges) and R2 (vertices) */
typedef struct edges_arg {
    edges_fixture *fx;
    const float *R1, *R2;
} edges_arg;

static double edges_loss_of(saga_ctx *c, void *a) {
    const edges_arg *e = a;
    return edges_loss(c, e->fx, e->R1, e->R2);
}

/* Backward through both uses of the edge tensor (a loss on the edges and the gather) against
 * central differences, for every parameter: x (scattered both ways), edata, We, Wv. */
static void edges_gradients_match(edges_fixture *fx, saga_ctx *c, int mode) {
    const saga_gather op = fx->p.gather;
    int64_t m = saga_dgraph_n_edges(fx->dg);
    float R1[M_MAX * RE_FE], R2[N * RE_FV];
    fill_random(R1, m * RE_FE, -1, 1);
    fill_random(R2, N * RE_FV, -1, 1);
    saga_tensor *R1t = upload(fx->be, m, RE_FE, R1), *R2t = upload(fx->be, N, RE_FV, R2);

    assert_int_equal(saga_model_zero_grad(fx->m), SAGA_OK);
    saga_ctx_train(c, true);
    saga_tensor *E = NULL;
    saga_tensor *out = saga_program_run_edges(c, &fx->p, fx->dg, fx->x, fx->edata, fx, &E);
    saga_tensor *loss =
        saga_add(c, saga_sum(c, saga_mul(c, E, R1t)), saga_sum(c, saga_mul(c, out, R2t)));
    assert_non_null(loss);
    assert_int_equal(saga_backward(c, loss), SAGA_OK);
    saga_ctx_clear(c);

    /* MAX has kinks where two messages tie: a small step stays on one side */
    char what[48];
    snprintf(what, sizeof what, "mode %d, gather %d", mode, (int)op);
    edges_arg arg = {fx, R1, R2};
    params_match_differences(fx->m, c, edges_loss_of, &arg, op == SAGA_GATHER_MAX ? 1e-3 : 1e-2,
                             5e-3, what);
    saga_tensor_free(&R1t);
    saga_tensor_free(&R2t);
}

static void test_program_run_edges_gradients_match_finite_differences(void **state) {
    (void)state;
    each_edges_case(edges_gradients_match);
}

static void test_program_run_edges_errors(void **state) {
    (void)state;
    edges_fixture fx;
    edges_fixture_init(&fx, SAGA_GATHER_SUM, EDGES_BATCHED);
    saga_ctx *c = NULL;
    assert_int_equal(saga_ctx_new(&c, fx.be, 1), SAGA_OK);
    saga_tensor *E = NULL;
    saga_program p = {.scatter = SAGA_SCATTER_SRC, .gather = SAGA_GATHER_SUM};
    assert_null(saga_program_run_edges(c, &p, fx.dg, fx.x, NULL, NULL, &E));
    assert_int_equal(saga_ctx_status(c), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("apply_edge", NULL);
    assert_null(E);
    saga_ctx_clear(c);
    assert_null(saga_program_run_edges(c, &fx.p, fx.dg, fx.x, fx.edata, &fx, NULL));
    assert_int_equal(saga_ctx_status(c), SAGA_ERR_INVALID_ARG);
    saga_ctx_clear(c);
    /* edge data with the wrong number of rows */
    assert_null(saga_program_run_edges(c, &fx.p, fx.dg, fx.x, fx.x, &fx, &E));
    assert_int_equal(saga_ctx_status(c), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("edata", NULL);
    saga_ctx_free(&c);
    edges_fixture_free(&fx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_program_fused_and_batched_match_reference),
        cmocka_unit_test(test_program_kinds_match_reference),
        cmocka_unit_test(test_program_gradients_match_finite_differences),
        cmocka_unit_test(test_program_gradients_reach_apply_edge_params_with_constant_input),
        cmocka_unit_test(test_program_recompute_replays_dropout),
        cmocka_unit_test(test_program_edgeless_graph),
        cmocka_unit_test(test_program_edge_order),
        cmocka_unit_test(test_program_errors),
        cmocka_unit_test(test_program_dgraph_budget_and_allocation_failures),
        cmocka_unit_test(test_program_run_edges_matches_reference),
        cmocka_unit_test(test_program_run_edges_gradients_match_finite_differences),
        cmocka_unit_test(test_program_run_edges_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
