/* test_layers.c - the library's layers (saga_layers.h) against their equations: each layer alone
 * on a small random graph, its output by saga_net_forward (in memory, streamed by parts, from
 * dense and from sparse input rows) against the equations evaluated in double from the same
 * parameters, within a bound from the arithmetic; and the errors a layer reports. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_util.h"

#include "saga.h"

#include <stdlib.h>
#include <string.h>

enum { N = 40, F = 12, DEG = 3 };
#define U32 (0x1p-24)

typedef struct fixture {
    saga_graph *g; /* undirected, no self-loops */
    float x[N * F];
    int64_t xo[N + 1];
    int32_t xi[N * F];
    float xv[N * F];
} fixture;

static fixture fx;

/* A random undirected graph of N vertices, each joined to DEG others, and input rows of which
 * about half the entries are zero (so that the CSR differs from the dense rows). */
static void fixture_make(void) {
    if (fx.g)
        return;
    int32_t src[N * DEG], dst[N * DEG];
    uint64_t s = 12345;
    for (int v = 0; v < N; v++)
        for (int k = 0; k < DEG; k++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            int u = (int)((s >> 33) % (N - 1));
            src[v * DEG + k] = v;
            dst[v * DEG + k] = u >= v ? u + 1 : u;
        }
    saga_graph_opts o = saga_graph_opts_defaults();
    o.undirected = true;
    o.self_loops = SAGA_SELF_LOOPS_DROP;
    assert_int_equal(saga_graph_from_edges(&fx.g, N, N * DEG, src, dst, NULL, NULL, &o), SAGA_OK);
    int64_t nnz = 0;
    for (int v = 0; v < N; v++) {
        fx.xo[v] = nnz;
        for (int i = 0; i < F; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            float val = (float)((double)(s >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
            fx.x[v * F + i] = (s >> 20) % 2 ? val : 0.0f;
            if (fx.x[v * F + i] != 0.0f) {
                fx.xi[nnz] = i;
                fx.xv[nnz++] = fx.x[v * F + i];
            }
        }
    }
    fx.xo[N] = nnz;
}

/* The in-neighbours of v as the net sees them: the graph's, and v itself with self-loops ADD. */
static int neighbours(int v, bool self, int *out) {
    saga_csr in = saga_graph_in(fx.g);
    int k = 0;
    for (int64_t e = in.offsets[v]; e < in.offsets[v + 1]; e++)
        out[k++] = in.indices[e];
    if (self)
        out[k++] = v;
    return k;
}

static int max_neighbours(bool self) {
    int nb[N + 1], most = 0;
    for (int v = 0; v < N; v++) {
        int k = neighbours(v, self, nb);
        most = k > most ? k : most;
    }
    return most;
}

static double gam(int64_t k) {
    return saga_test_gamma(k, U32);
}

/* A parameter of m on the host (double). */
static double *param(const saga_model *m, const char *name) {
    saga_tensor *t = saga_model_find(m, name);
    assert_non_null(t);
    int64_t n = saga_tensor_rows(t) * saga_tensor_cols(t);
    float *f = malloc((size_t)n * sizeof *f);
    double *d = malloc((size_t)n * sizeof *d);
    assert_true(f && d);
    assert_int_equal(saga_tensor_to_host(t, f), SAGA_OK);
    for (int64_t i = 0; i < n; i++)
        d[i] = f[i];
    free(f);
    return d;
}

/* y = |x| |W| (n rows, in x out), or x W when abs is false; x is the fixture's input. */
static void project(const double *W, int in, int out, bool abs_, double *y) {
    for (int v = 0; v < N; v++)
        for (int j = 0; j < out; j++) {
            double s = 0;
            for (int i = 0; i < in; i++)
                s += abs_ ? fabs(fx.x[v * F + i]) * fabs(W[i * out + j])
                          : fx.x[v * F + i] * W[i * out + j];
            y[v * out + j] = s;
        }
}

/* How a case runs the layer: in memory, streamed by parts, or from the CSR of the rows. */
typedef enum run_kind { RUN_MEMORY = 0, RUN_STREAMED, RUN_SPARSE, RUN_COUNT } run_kind;
static const char *const run_names[RUN_COUNT] = {"in memory", "streamed", "sparse input"};

typedef saga_status (*add_fn)(saga_net *, saga_model *, const char *, int64_t, int64_t,
                              const saga_layer_opts *);

/* The layer alone on the fixture: its output (N x width) into out; the model for its
 * parameters into *mp (the caller frees it). Returns the forward pass's status. */
static saga_status run_layer(add_fn add, const saga_layer_opts *lo, int64_t out_cols, bool self,
                             run_kind how, float *out, saga_model **mp, saga_backend *be,
                             void (*tweak)(saga_model *)) {
    saga_ctx *c = NULL;
    saga_net *net = NULL;
    assert_int_equal(saga_ctx_new(&c, be, 7), SAGA_OK);
    assert_int_equal(saga_model_new(mp, be), SAGA_OK);
    saga_net_opts no = saga_net_opts_defaults();
    no.self_loops = self ? SAGA_DGRAPH_SELF_LOOPS_ADD : SAGA_DGRAPH_SELF_LOOPS_KEEP;
    if (how == RUN_STREAMED) {
        no.exec = SAGA_EXEC_STREAM;
        no.parts = 3;
        no.partition = SAGA_PARTITION_CONTIGUOUS;
    }
    assert_int_equal(saga_net_new(&net, c, fx.g, &no), SAGA_OK);
    assert_int_equal(add(net, *mp, "layer", F, out_cols, lo), SAGA_OK);
    if (tweak)
        tweak(*mp);
    if (how == RUN_SPARSE)
        assert_int_equal(saga_net_set_input_csr(net, fx.xo, fx.xi, fx.xv, F), SAGA_OK);
    else
        assert_int_equal(saga_net_set_input(net, fx.x, F), SAGA_OK);
    saga_status st = saga_net_forward(net, out);
    saga_net_free(&net);
    saga_ctx_free(&c);
    return st;
}

/* Every output within its bound of the reference, naming the worst. */
static void assert_within(const char *what, const float *got, const double *ref,
                          const double *bound, int64_t n) {
    double worst = 0;
    int64_t at = -1;
    for (int64_t i = 0; i < n; i++) {
        double r = fabs(got[i] - ref[i]) / bound[i];
        if (!(r <= worst))
            worst = r, at = i;
    }
    if (!(worst <= 1.0))
        fail_msg("%s: output %lld is %.9g, the equations give %.9g (bound %.3g: %.2f of it)", what,
                 (long long)at, (double)got[at], ref[at], bound[at], worst);
}

static saga_backend *cpu(void) {
    saga_backend *be = NULL;
    assert_int_equal(saga_backend_open(&be, "cpu", NULL), SAGA_OK);
    return be;
}

/* ---- GCN ---------------------------------------------------------------------------------- */

static void check_gcn(int out_cols, int project_first, run_kind how) {
    fixture_make();
    saga_backend *be = cpu();
    saga_model *m = NULL;
    saga_layer_opts lo = saga_layer_opts_defaults();
    lo.project_first = project_first;
    float *got = malloc((size_t)N * out_cols * sizeof *got);
    assert_non_null(got);
    assert_int_equal(run_layer(saga_gcn_add, &lo, out_cols, true, how, got, &m, be, NULL), SAGA_OK);
    double *W = param(m, "layer.weight"), *b = param(m, "layer.bias");
    double *xw = malloc((size_t)N * out_cols * sizeof *xw),
           *xa = malloc((size_t)N * out_cols * sizeof *xa);
    double *ref = malloc((size_t)N * out_cols * sizeof *ref),
           *bnd = malloc((size_t)N * out_cols * sizeof *bnd);
    assert_true(xw && xa && ref && bnd);
    project(W, F, out_cols, false, xw);
    project(W, F, out_cols, true, xa);
    int nb[N + 1], deg[N];
    for (int v = 0; v < N; v++)
        deg[v] = neighbours(v, true, nb);
    /* the product over F, the aggregation over the neighbours with weights from the degrees
     * (a square root and a division: 4 roundings), the bias */
    double g = gam(F + max_neighbours(true) + 6);
    for (int v = 0; v < N; v++) {
        int k = neighbours(v, true, nb);
        for (int j = 0; j < out_cols; j++) {
            double s = 0, a = 0;
            for (int t = 0; t < k; t++) {
                double w = 1.0 / sqrt((double)deg[nb[t]] * deg[v]);
                s += w * xw[nb[t] * out_cols + j];
                a += w * xa[nb[t] * out_cols + j];
            }
            ref[v * out_cols + j] = s + b[j];
            bnd[v * out_cols + j] = 2 * g * (a + fabs(b[j])) + 1e-30;
        }
    }
    char what[96];
    snprintf(what, sizeof what, "GCN %d -> %d (project_first %d), %s", F, out_cols, project_first,
             run_names[how]);
    assert_within(what, got, ref, bnd, (int64_t)N * out_cols);
    free(W), free(b), free(xw), free(xa), free(ref), free(bnd), free(got);
    saga_model_free(&m);
    saga_backend_free_all(&be);
}

static void test_layers_gcn(void **state) {
    (void)state;
    for (int how = 0; how < RUN_COUNT; how++) {
        check_gcn(5, -1, how); /* narrows: W first */
        check_gcn(20, 1, how); /* widens, W forced first */
        if (how != RUN_SPARSE)
            check_gcn(20, -1, how); /* widens: W after the aggregation */
    }
}

/* ---- GAT ---------------------------------------------------------------------------------- */

static void check_gat(int heads, int out, run_kind how) {
    fixture_make();
    saga_backend *be = cpu();
    saga_model *m = NULL;
    saga_layer_opts lo = saga_layer_opts_defaults();
    lo.heads = heads;
    const int hf = heads * out;
    float *got = malloc((size_t)N * hf * sizeof *got);
    assert_non_null(got);
    assert_int_equal(run_layer(saga_gat_add, &lo, out, true, how, got, &m, be, NULL), SAGA_OK);
    double *W = param(m, "layer.weight"), *as = param(m, "layer.att_src"),
           *ad = param(m, "layer.att_dst"), *b = param(m, "layer.bias");
    double *z = malloc((size_t)N * hf * sizeof *z), *za = malloc((size_t)N * hf * sizeof *za);
    double *ref = malloc((size_t)N * hf * sizeof *ref), *bnd = malloc((size_t)N * hf * sizeof *bnd);
    double *ss = malloc((size_t)N * heads * 4 * sizeof *ss); /* s_src, s_dst, |s_src|, |s_dst| */
    assert_true(z && za && ref && bnd && ss);
    project(W, F, hf, false, z);
    project(W, F, hf, true, za);
    for (int u = 0; u < N; u++)
        for (int k = 0; k < heads; k++) {
            double s1 = 0, s2 = 0, a1 = 0, a2 = 0;
            for (int j = 0; j < out; j++) {
                s1 += z[u * hf + k * out + j] * as[j * heads + k];
                s2 += z[u * hf + k * out + j] * ad[j * heads + k];
                a1 += za[u * hf + k * out + j] * fabs(as[j * heads + k]);
                a2 += za[u * hf + k * out + j] * fabs(ad[j * heads + k]);
            }
            ss[(u * heads + k) * 4 + 0] = s1, ss[(u * heads + k) * 4 + 1] = s2;
            ss[(u * heads + k) * 4 + 2] = a1, ss[(u * heads + k) * 4 + 3] = a2;
        }
    const int D = max_neighbours(true);
    int nb[N + 1];
    for (int v = 0; v < N; v++) {
        int n = neighbours(v, true, nb);
        for (int k = 0; k < heads; k++) {
            double e[N + 1], mx = -INFINITY, delta = 0, spread = 0, sum = 0;
            for (int t = 0; t < n; t++) {
                double sc = ss[(nb[t] * heads + k) * 4 + 0] + ss[(v * heads + k) * 4 + 1];
                e[t] = sc > 0 ? sc : 0.2 * sc;
                mx = e[t] > mx ? e[t] : mx;
                /* a score's error: the products over F and out, the sum of its two terms */
                double d = gam(F + out + 1) *
                           (ss[(nb[t] * heads + k) * 4 + 2] + ss[(v * heads + k) * 4 + 3]);
                delta = d > delta ? d : delta;
            }
            for (int t = 0; t < n; t++) {
                spread = fabs(e[t] - mx) > spread ? fabs(e[t] - mx) : spread;
                sum += exp(e[t] - mx);
            }
            /* the coefficients' relative error: the scores' errors (twice, through the
             * numerator and the normaliser), the rounding of e - max carried by exp, exp
             * itself (2 ulps), the normaliser's sum over the edges and the division */
            double rel = 2 * delta + 2 * U32 * spread + gam(D + 4);
            for (int j = 0; j < out; j++) {
                double s = 0, a = 0;
                for (int t = 0; t < n; t++) {
                    double alpha = exp(e[t] - mx) / sum;
                    s += alpha * z[nb[t] * hf + k * out + j];
                    a += alpha * za[nb[t] * hf + k * out + j];
                }
                int64_t i = (int64_t)v * hf + k * out + j;
                ref[i] = s + b[k * out + j];
                /* the messages' products over F, their sum over the edges, the bias */
                bnd[i] = 2 * (rel + gam(F + D + 1)) * (a + fabs(b[k * out + j])) + 1e-30;
            }
        }
    }
    char what[96];
    snprintf(what, sizeof what, "GAT %d -> %d x %d, %s", F, heads, out, run_names[how]);
    assert_within(what, got, ref, bnd, (int64_t)N * hf);
    free(W), free(as), free(ad), free(b), free(z), free(za), free(ref), free(bnd), free(ss);
    free(got);
    saga_model_free(&m);
    saga_backend_free_all(&be);
}

static void test_layers_gat(void **state) {
    (void)state;
    for (int how = 0; how < RUN_COUNT; how++) {
        check_gat(1, 5, how);
        check_gat(3, 4, how);
    }
}

/* ---- GraphSAGE ------------------------------------------------------------------------------ */

static void check_sage(saga_gather aggr, int out, run_kind how) {
    fixture_make();
    saga_backend *be = cpu();
    saga_model *m = NULL;
    saga_layer_opts lo = saga_layer_opts_defaults();
    lo.aggr = aggr;
    float *got = malloc((size_t)N * out * sizeof *got);
    assert_non_null(got);
    assert_int_equal(run_layer(saga_sage_add, &lo, out, false, how, got, &m, be, NULL), SAGA_OK);
    double *Ws = param(m, "layer.weight_self"), *Wn = param(m, "layer.weight_neigh"),
           *b = param(m, "layer.bias");
    double *ref = malloc((size_t)N * out * sizeof *ref),
           *bnd = malloc((size_t)N * out * sizeof *bnd);
    assert_true(ref && bnd);
    /* two products over F, the aggregation over the neighbours (and the mean's division), their
     * sum and the bias; the maximum is exact */
    double g = gam(2 * F + max_neighbours(false) + 3);
    int nb[N + 1];
    for (int v = 0; v < N; v++) {
        int n = neighbours(v, false, nb);
        for (int j = 0; j < out; j++) {
            double s = b[j], a = fabs(b[j]);
            for (int i = 0; i < F; i++) {
                s += fx.x[v * F + i] * Ws[i * out + j];
                a += fabs(fx.x[v * F + i] * Ws[i * out + j]);
                double agg = 0, aa = 0;
                for (int t = 0; t < n; t++) {
                    double xv = fx.x[nb[t] * F + i];
                    if (aggr == SAGA_GATHER_MAX)
                        agg = t == 0 || xv > agg ? xv : agg;
                    else
                        agg += xv;
                    aa = aggr == SAGA_GATHER_MAX ? (fabs(xv) > aa ? fabs(xv) : aa) : aa + fabs(xv);
                }
                if (aggr == SAGA_GATHER_MEAN && n > 0)
                    agg /= n, aa /= n;
                s += agg * Wn[i * out + j];
                a += aa * fabs(Wn[i * out + j]);
            }
            ref[v * out + j] = s;
            bnd[v * out + j] = 2 * g * a + 1e-30;
        }
    }
    static const char *const names[] = {"sum", "mean", "max"};
    char what[96];
    snprintf(what, sizeof what, "GraphSAGE-%s %d -> %d, %s", names[aggr], F, out, run_names[how]);
    assert_within(what, got, ref, bnd, (int64_t)N * out);
    free(Ws), free(Wn), free(b), free(ref), free(bnd), free(got);
    saga_model_free(&m);
    saga_backend_free_all(&be);
}

static void test_layers_sage(void **state) {
    (void)state;
    for (int how = 0; how < RUN_COUNT; how++)
        for (int a = 0; a < SAGA_GATHER_COUNT; a++) {
            if (how != RUN_SPARSE || a != SAGA_GATHER_MAX)
                check_sage((saga_gather)a, 5, how); /* narrows: the products first */
            if (how != RUN_SPARSE)
                check_sage((saga_gather)a, 20, how); /* widens: the rows aggregated */
        }
}

/* ---- GIN ---------------------------------------------------------------------------------- */

static void gin_eps(saga_model *m) { /* eps away from its initial 0, to reach its term */
    saga_tensor *eps = saga_model_find(m, "layer.eps");
    assert_non_null(eps);
    ((float *)saga_tensor_data(eps))[0] = 0.375f;
}

static void check_gin(int hidden, int out, run_kind how) {
    fixture_make();
    saga_backend *be = cpu();
    saga_model *m = NULL;
    saga_layer_opts lo = saga_layer_opts_defaults();
    lo.mlp_hidden = hidden;
    float *got = malloc((size_t)N * out * sizeof *got);
    assert_non_null(got);
    assert_int_equal(run_layer(saga_gin_add, &lo, out, false, how, got, &m, be, gin_eps), SAGA_OK);
    double *W1 = param(m, "layer.weight1"), *b1 = param(m, "layer.bias1"),
           *W2 = param(m, "layer.weight2"), *b2 = param(m, "layer.bias2"),
           *eps = param(m, "layer.eps");
    double *y = malloc((size_t)N * hidden * sizeof *y),
           *ya = malloc((size_t)N * hidden * sizeof *ya);
    double *ref = malloc((size_t)N * out * sizeof *ref),
           *bnd = malloc((size_t)N * out * sizeof *bnd);
    assert_true(y && ya && ref && bnd);
    project(W1, F, hidden, false, y);
    project(W1, F, hidden, true, ya);
    /* the first product over F, the sum over the neighbours and the vertex's (1 + eps) term, the
     * bias (relu passes an error on, no larger), the second product over hidden and its bias */
    double g = gam(F + max_neighbours(false) + hidden + 5);
    int nb[N + 1];
    for (int v = 0; v < N; v++) {
        int n = neighbours(v, false, nb);
        for (int j = 0; j < out; j++) {
            double s = b2[j], a = fabs(b2[j]);
            for (int k = 0; k < hidden; k++) {
                double gk = (1 + eps[0]) * y[v * hidden + k] + b1[k];
                double gka = fabs(1 + eps[0]) * ya[v * hidden + k] + fabs(b1[k]);
                for (int t = 0; t < n; t++)
                    gk += y[nb[t] * hidden + k], gka += ya[nb[t] * hidden + k];
                s += (gk > 0 ? gk : 0) * W2[k * out + j];
                a += gka * fabs(W2[k * out + j]);
            }
            ref[v * out + j] = s;
            bnd[v * out + j] = 2 * g * a + 1e-30;
        }
    }
    char what[96];
    snprintf(what, sizeof what, "GIN %d -> %d -> %d, %s", F, hidden, out, run_names[how]);
    assert_within(what, got, ref, bnd, (int64_t)N * out);
    free(W1), free(b1), free(W2), free(b2), free(eps), free(y), free(ya), free(ref), free(bnd);
    free(got);
    saga_model_free(&m);
    saga_backend_free_all(&be);
}

static void test_layers_gin(void **state) {
    (void)state;
    for (int how = 0; how < RUN_COUNT; how++) {
        check_gin(8, 5, how);
        check_gin(16, 3, how);
    }
}

/* ---- the Interaction Network ---------------------------------------------------------------- */

/* y = x W + b (in -> out) in double, with ey bounding |computed - y| in f32 to first order: the
 * errors ex of x carried through |W|, and the rounding of the sum of in + 1 terms. */
static void lin(const double *x, const double *ex, const double *W, const double *b, int in,
                int out, double *y, double *ey) {
    for (int j = 0; j < out; j++) {
        double s = b[j], a = fabs(b[j]), e = 0;
        for (int i = 0; i < in; i++) {
            s += x[i] * W[i * out + j];
            a += fabs(x[i] * W[i * out + j]);
            e += ex[i] * fabs(W[i * out + j]);
        }
        y[j] = s;
        ey[j] = e + gam(in + 1) * a;
    }
}

/* FFN_name(x) then tanh, as saga_ffn_forward and saga_tanh compute it (width Hd in and out of
 * the hidden layer; in columns in), with its error bound: relu and tanh pass an error on no
 * larger, tanh adds its own rounding (2 ulps). */
static void ffn_tanh(const saga_model *m, const char *name, const double *x, const double *ex,
                     int in, int Hd, double *y, double *ey) {
    char n[64];
    double *W[4];
    const char *part[4] = {"W1", "b1", "W2", "b2"};
    for (int k = 0; k < 4; k++) {
        snprintf(n, sizeof n, "%s.%s", name, part[k]);
        W[k] = param(m, n);
    }
    double h[64], eh[64];
    assert_true(Hd <= 64);
    lin(x, ex, W[0], W[1], in, Hd, h, eh);
    for (int j = 0; j < Hd; j++)
        h[j] = h[j] > 0 ? h[j] : 0;
    lin(h, eh, W[2], W[3], Hd, Hd, y, ey);
    for (int j = 0; j < Hd; j++) {
        y[j] = tanh(y[j]);
        ey[j] += 2 * U32 * fabs(y[j]);
    }
    for (int k = 0; k < 4; k++)
        free(W[k]);
}

static void test_layers_interaction_round(void **state) {
    (void)state;
    fixture_make();
    enum { Hd = 4 };
    saga_backend *be = cpu();
    saga_ctx *c = NULL;
    saga_model *m = NULL;
    saga_dgraph *g = NULL;
    saga_interaction *l = NULL;
    assert_int_equal(saga_ctx_new(&c, be, 3), SAGA_OK);
    assert_int_equal(saga_model_new(&m, be), SAGA_OK);
    assert_int_equal(saga_interaction_new(&l, m, "eb", "nb", Hd, 11), SAGA_OK);
    saga_dgraph_opts go = saga_dgraph_opts_defaults();
    go.self_loops = SAGA_DGRAPH_SELF_LOOPS_KEEP;
    assert_int_equal(saga_dgraph_new(&g, be, fx.g, &go), SAGA_OK);
    saga_csr ord = saga_dgraph_edge_order(g);
    const int64_t M = ord.nnz;
    /* vertex and edge rows from the fixture's inputs; each edge's source and destination */
    float *hv = malloc((size_t)N * Hd * sizeof *hv), *ev = malloc((size_t)M * Hd * sizeof *ev);
    int32_t *src = malloc((size_t)M * sizeof *src), *dst = malloc((size_t)M * sizeof *dst);
    assert_true(hv && ev && src && dst);
    for (int i = 0; i < N * Hd; i++)
        hv[i] = fx.x[i % (N * F)];
    for (int64_t i = 0; i < M * Hd; i++)
        ev[i] = fx.x[(i * 7) % (N * F)] * 0.5f;
    for (int v = 0; v < N; v++)
        for (int64_t k = ord.offsets[v]; k < ord.offsets[v + 1]; k++)
            src[k] = ord.indices[k], dst[k] = v;
    saga_tensor *h = NULL, *e = NULL, *s = NULL;
    assert_int_equal(saga_tensor_from_host(&h, be, SAGA_F32, N, Hd, hv), SAGA_OK);
    assert_int_equal(saga_tensor_from_host(&e, be, SAGA_F32, M, Hd, ev), SAGA_OK);
    assert_int_equal(saga_tensor_from_host(&s, be, SAGA_I32, M, 1, src), SAGA_OK);
    saga_tensor *e_out = NULL;
    saga_tensor *h_out = saga_interaction_forward(c, l, g, h, e, s, &e_out);
    assert_non_null(h_out);
    assert_non_null(e_out);
    float *got_h = malloc((size_t)N * Hd * sizeof *got_h);
    float *got_e = malloc((size_t)M * Hd * sizeof *got_e);
    assert_true(got_h && got_e);
    assert_int_equal(saga_tensor_to_host(h_out, got_h), SAGA_OK);
    assert_int_equal(saga_tensor_to_host(e_out, got_e), SAGA_OK);

    /* the edge block, then the node block, in double with their bounds */
    double *re = malloc((size_t)M * Hd * sizeof *re), *be_ = malloc((size_t)M * Hd * sizeof *be_);
    double rh[N * Hd], bh[N * Hd], zero[3 * Hd] = {0};
    assert_true(re && be_);
    for (int64_t k = 0; k < M; k++) {
        double x[3 * Hd];
        for (int j = 0; j < Hd; j++) {
            x[j] = hv[src[k] * Hd + j];
            x[Hd + j] = hv[dst[k] * Hd + j];
            x[2 * Hd + j] = ev[k * Hd + j];
        }
        ffn_tanh(m, "eb", x, zero, 3 * Hd, Hd, re + k * Hd, be_ + k * Hd);
    }
    for (int v = 0; v < N; v++) {
        double x[3 * Hd], ex[3 * Hd];
        int64_t deg_in = 0, deg_out = 0;
        for (int j = 0; j < Hd; j++) {
            x[j] = hv[v * Hd + j], ex[j] = 0;
            x[Hd + j] = x[2 * Hd + j] = ex[Hd + j] = ex[2 * Hd + j] = 0;
        }
        double a_in[Hd] = {0}, a_out[Hd] = {0};
        for (int64_t k = 0; k < M; k++)
            for (int j = 0; j < Hd; j++) {
                if (dst[k] == v) {
                    x[Hd + j] += re[k * Hd + j], ex[Hd + j] += be_[k * Hd + j];
                    a_in[j] += fabs(re[k * Hd + j]), deg_in += j == 0;
                }
                if (src[k] == v) {
                    x[2 * Hd + j] += re[k * Hd + j], ex[2 * Hd + j] += be_[k * Hd + j];
                    a_out[j] += fabs(re[k * Hd + j]), deg_out += j == 0;
                }
            }
        for (int j = 0; j < Hd; j++) { /* the two sums' own rounding */
            ex[Hd + j] += gam(deg_in) * a_in[j];
            ex[2 * Hd + j] += gam(deg_out) * a_out[j];
        }
        ffn_tanh(m, "nb", x, ex, 3 * Hd, Hd, rh + v * Hd, bh + v * Hd);
    }
    for (int64_t i = 0; i < M * Hd; i++)
        be_[i] = 2 * be_[i] + 1e-30; /* two orders */
    for (int i = 0; i < N * Hd; i++)
        bh[i] = 2 * bh[i] + 1e-30;
    assert_within("interaction round, edge block", got_e, re, be_, M * Hd);
    assert_within("interaction round, node block", got_h, rh, bh, (int64_t)N * Hd);
    assert_non_null(saga_model_find(m, "eb.W1"));
    assert_non_null(saga_model_find(m, "nb.b2"));
    free(hv), free(ev), free(src), free(dst), free(got_h), free(got_e), free(re), free(be_);
    saga_tensor_free(&h);
    saga_tensor_free(&e);
    saga_tensor_free(&s);
    saga_interaction_free(&l);
    saga_dgraph_free(&g);
    saga_model_free(&m);
    saga_ctx_free(&c);
    saga_backend_free_all(&be);
}

/* ---- the net's cross-entropy loss ------------------------------------------------------------ */

/* saga_net_set_loss_cross_entropy: a training pass's loss is the mean of -log softmax over the
 * listed rows (a row listed twice counts once) of the logits the net's forward pass gives. */
static void test_layers_cross_entropy_loss(void **state) {
    (void)state;
    fixture_make();
    enum { C = 4 };
    saga_backend *be = cpu();
    saga_ctx *c = NULL;
    saga_model *m = NULL;
    saga_net *net = NULL;
    assert_int_equal(saga_ctx_new(&c, be, 5), SAGA_OK);
    assert_int_equal(saga_model_new(&m, be), SAGA_OK);
    saga_net_opts no = saga_net_opts_defaults();
    no.self_loops = SAGA_DGRAPH_SELF_LOOPS_ADD;
    assert_int_equal(saga_net_new(&net, c, fx.g, &no), SAGA_OK);
    assert_int_equal(saga_net_set_model(net, m), SAGA_OK);
    assert_int_equal(saga_gcn_add(net, m, "l", F, C, NULL), SAGA_OK);
    int32_t labels[N];
    for (int v = 0; v < N; v++)
        labels[v] = v % 5 == 4 ? -1 : v % C;
    const int32_t rows[] = {3, 0, 7, 3, 12, 21, 38};
    /* refused: a vertex outside the graph, a listed vertex without a class, no row at all */
    const int32_t outside[] = {1, N};
    assert_int_equal(saga_net_set_loss_cross_entropy(net, labels, outside, 2),
                     SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("vertex 40", "outside 0..39", NULL);
    const int32_t unlabelled[] = {1, 9};
    assert_int_equal(saga_net_set_loss_cross_entropy(net, labels, unlabelled, 2),
                     SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("vertex 9", "no class", NULL);
    assert_int_equal(saga_net_set_loss_cross_entropy(net, labels, rows, 0), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("no row is listed", NULL);
    assert_int_equal(saga_net_set_loss_cross_entropy(net, labels, rows, 7), SAGA_OK);
    assert_int_equal(saga_net_set_input(net, fx.x, F), SAGA_OK);
    float logits[N * C];
    assert_int_equal(saga_net_forward(net, logits), SAGA_OK);
    double loss = 0;
    assert_int_equal(saga_net_train_step(net, &loss), SAGA_OK);
    /* the mean over the six distinct rows, from the forward pass's logits (no dropout: the same
     * logits); log-softmax over C, the mean over 6 */
    double ref = 0, mag = 0;
    const int32_t distinct[] = {0, 3, 7, 12, 21, 38};
    for (int i = 0; i < 6; i++) {
        const float *z = logits + distinct[i] * C;
        double mx = z[0], sum = 0;
        for (int k = 1; k < C; k++)
            mx = z[k] > mx ? z[k] : mx;
        for (int k = 0; k < C; k++)
            sum += exp(z[k] - mx);
        double nll = -(z[labels[distinct[i]]] - mx - log(sum));
        ref += nll / 6;
        mag += (fabs(z[labels[distinct[i]]] - mx) + fabs(log(sum))) / 6;
    }
    assert_true(fabs(loss - ref) <= 2 * gam(C + 6 + 8) * mag);
    saga_net_free(&net);
    saga_model_free(&m);
    saga_ctx_free(&c);
    saga_backend_free_all(&be);
}

/* ---- errors --------------------------------------------------------------------------------- */

/* A layer that aggregates its input before multiplying marks its first stage as taking dense
 * rows (saga_net_set_dense_rows): a CSR is refused when the net first runs, and dense rows
 * through saga_net_set_input_auto stay dense, even at a density bound of 1; a layer that
 * multiplies first gets them as a CSR. */
static void test_layers_sparse_input_refused(void **state) {
    (void)state;
    fixture_make();
    saga_backend *be = cpu();
    float *out = malloc((size_t)N * 20 * sizeof *out);
    assert_non_null(out);
    saga_model *m = NULL;
    saga_layer_opts lo = saga_layer_opts_defaults();
    lo.project_first = 0;
    assert_int_equal(run_layer(saga_gcn_add, &lo, 20, true, RUN_SPARSE, out, &m, be, NULL),
                     SAGA_ERR_UNSUPPORTED);
    saga_test_assert_error_contains("first stage needs dense rows", NULL);
    saga_model_free(&m);
    lo = saga_layer_opts_defaults();
    lo.aggr = SAGA_GATHER_MAX;
    assert_int_equal(run_layer(saga_sage_add, &lo, 5, false, RUN_SPARSE, out, &m, be, NULL),
                     SAGA_ERR_UNSUPPORTED);
    saga_test_assert_error_contains("first stage needs dense rows", NULL);
    saga_model_free(&m);
    for (int first = 0; first <= 1; first++) {
        saga_ctx *c = NULL;
        saga_net *net = NULL;
        assert_int_equal(saga_ctx_new(&c, be, 7), SAGA_OK);
        assert_int_equal(saga_model_new(&m, be), SAGA_OK);
        assert_int_equal(saga_net_new(&net, c, fx.g, NULL), SAGA_OK);
        lo = saga_layer_opts_defaults();
        lo.project_first = first;
        assert_int_equal(saga_gcn_add(net, m, "layer", F, 5, &lo), SAGA_OK);
        assert_int_equal(saga_net_set_input_auto(net, fx.x, F, 1.0), SAGA_OK);
        assert_int_equal(saga_net_forward(net, out), SAGA_OK);
        saga_net_stats st;
        saga_net_get_stats(net, &st);
        assert_int_equal(st.input_packed, first);
        assert_int_equal(st.sparse_input, first);
        saga_net_free(&net);
        saga_model_free(&m);
        saga_ctx_free(&c);
    }
    free(out);
    saga_backend_free_all(&be);
}

static void test_layers_bad_arguments(void **state) {
    (void)state;
    fixture_make();
    saga_backend *be = cpu();
    saga_ctx *c = NULL;
    saga_model *m = NULL;
    saga_net *net = NULL;
    assert_int_equal(saga_ctx_new(&c, be, 1), SAGA_OK);
    assert_int_equal(saga_model_new(&m, be), SAGA_OK);
    assert_int_equal(saga_net_new(&net, c, fx.g, NULL), SAGA_OK);
    saga_layer_opts lo = saga_layer_opts_defaults();
    lo.heads = 0;
    assert_int_equal(saga_gat_add(net, m, "a", F, 4, &lo), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("GAT layer a", "heads", NULL);
    lo = saga_layer_opts_defaults();
    lo.aggr = (saga_gather)7;
    assert_int_equal(saga_sage_add(net, m, "b", F, 4, &lo), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("GraphSAGE layer b", "aggregation", NULL);
    lo = saga_layer_opts_defaults();
    lo.aggr = SAGA_GATHER_MAX;
    lo.project_first = 1;
    assert_int_equal(saga_sage_add(net, m, "b", F, 4, &lo), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("does not commute", NULL);
    lo = saga_layer_opts_defaults();
    lo.dropout = 1.0f;
    assert_int_equal(saga_gcn_add(net, m, "c", F, 4, &lo), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("GCN layer c", "dropout", NULL);
    assert_int_equal(saga_gin_add(net, m, "d", F, 0, NULL), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("GIN layer d", "widths", NULL);
    assert_int_equal(saga_gcn_add(net, m, NULL, F, 4, NULL), SAGA_ERR_INVALID_ARG);
    assert_int_equal(saga_gcn_add(NULL, m, "e", F, 4, NULL), SAGA_ERR_INVALID_ARG);
    /* input rows get the check a features file gets: finite values */
    float x[N * F];
    memcpy(x, fx.x, sizeof x);
    x[2 * F + 3] = NAN;
    assert_int_equal(saga_net_set_input(net, x, F), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("row 2, column 3", "finite", NULL);
    float v[N * F];
    memcpy(v, fx.xv, (size_t)fx.xo[N] * sizeof *v);
    v[5] = -INFINITY;
    assert_int_equal(saga_net_set_input_csr(net, fx.xo, fx.xi, v, F), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("entry 5", "finite", NULL);
    /* one name, two layers: the model refuses the second's parameters */
    assert_int_equal(saga_gcn_add(net, m, "f", F, 4, NULL), SAGA_OK);
    assert_int_equal(saga_gcn_add(net, m, "f", 4, 4, NULL), SAGA_ERR_INVALID_ARG);
    saga_test_assert_error_contains("f.weight", NULL);
    assert_non_null(saga_model_find(m, "f.bias"));
    assert_null(saga_model_find(m, "g.bias"));
    saga_net_free(&net);
    saga_model_free(&m);
    saga_ctx_free(&c);
    saga_backend_free_all(&be);
}

static int teardown_fixture(void **state) {
    (void)state;
    saga_graph_free(&fx.g);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layers_gcn),
        cmocka_unit_test(test_layers_gat),
        cmocka_unit_test(test_layers_sage),
        cmocka_unit_test(test_layers_gin),
        cmocka_unit_test(test_layers_interaction_round),
        cmocka_unit_test(test_layers_cross_entropy_loss),
        cmocka_unit_test(test_layers_sparse_input_refused),
        cmocka_unit_test(test_layers_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, teardown_fixture);
}
