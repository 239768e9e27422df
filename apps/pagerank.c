/* pagerank.c - PageRank in f64, pulled along the in-CSR, deterministic for any thread count: the
 * plain reference loop the tests hold the executor (saga_net_pagerank) against. */
#include "pagerank.h"

#include <math.h>
#include <string.h>

/* Reductions are summed per block of this many vertices and the blocks in order, so that the
 * rounding does not depend on how OpenMP splits the work. */
enum { PR_BLOCK = 2048 };

/* Sum of c over one row's sources, in order: the plain loop of the reference (the executor's
 * kernel, pagerank_pull_f64, is the fast one). */
static inline double row_sum(const double *c, const int32_t *idx, int64_t lo, int64_t hi) {
    double s = 0;
    for (int64_t k = lo; k < hi; k++)
        s += c[idx[k]];
    return s;
}

pr_opts pr_opts_defaults(void) {
    return (pr_opts){.damping = 0.85, .tol = 1e-10, .max_iters = 1000};
}

saga_status pr_run(double **scores, pr_result *result, const saga_graph *g, const pr_opts *o,
                   pr_progress_fn progress, void *ud) {
    saga_status st = SAGA_OK;
    double *x = NULL, *y = NULL, *c = NULL, *cn = NULL, *part = NULL;

    /* ---- check inputs ---- */
    SAGA_CHECK(scores && result && g && o, SAGA_ERR_INVALID_ARG, "pagerank: NULL argument");
    SAGA_CHECK(o->damping >= 0 && o->damping < 1, SAGA_ERR_INVALID_ARG,
               "pagerank: damping must be in [0, 1), got %g", o->damping);
    SAGA_CHECK(o->tol > 0 && isfinite(o->tol), SAGA_ERR_INVALID_ARG,
               "pagerank: tolerance must be positive, got %g", o->tol);
    SAGA_CHECK(o->max_iters >= 1, SAGA_ERR_INVALID_ARG,
               "pagerank: max iterations must be at least 1, got %d", o->max_iters);
    const int32_t n = saga_graph_n_vertices(g);
    SAGA_CHECK(n > 0, SAGA_ERR_INVALID_ARG, "pagerank: the graph has no vertices");
    const saga_csr in = saga_graph_in(g);
    const saga_csr out = saga_graph_out(g);
    const int64_t nb = (n + PR_BLOCK - 1) / PR_BLOCK;

    /* ---- initialize ---- */
    SAGA_TRY(saga_alloc_array((void **)&x, (size_t)n, sizeof *x, "pagerank scores"));
    SAGA_TRY(saga_alloc_array((void **)&y, (size_t)n, sizeof *y, "pagerank scores"));
    SAGA_TRY(saga_alloc_array((void **)&c, (size_t)n, sizeof *c, "pagerank contributions"));
    SAGA_TRY(saga_alloc_array((void **)&cn, (size_t)n, sizeof *cn, "pagerank contributions"));
    SAGA_TRY(saga_alloc_array((void **)&part, (size_t)nb * 2, sizeof *part, "pagerank sums"));
    const double d = o->damping, inv_n = 1.0 / n;
    double dangling = 0;
#pragma omp parallel for schedule(static) if (nb > 1)
    for (int64_t b = 0; b < nb; b++) {
        int32_t lo = (int32_t)(b * PR_BLOCK), hi = lo + PR_BLOCK < n ? lo + PR_BLOCK : n;
        double dang = 0;
        for (int32_t u = lo; u < hi; u++) {
            int64_t deg = out.offsets[u + 1] - out.offsets[u];
            x[u] = inv_n;
            c[u] = deg ? inv_n / (double)deg : 0.0;
            dang += deg ? 0.0 : inv_n;
        }
        part[2 * b + 1] = dang;
    }
    for (int64_t b = 0; b < nb; b++)
        dangling += part[2 * b + 1];

    /* ---- iterate ---- */
    double t0 = saga_now();
    double l1 = INFINITY;
    int it = 0;
    while (it < o->max_iters) {
        const double base = (1.0 - d) * inv_n + d * dangling * inv_n;
        /* Each vertex pulls the precomputed x[u]/outdeg(u) of its sources, and at once prepares
         * its own contribution for the next iteration, so one pass over the vertices suffices. */
#pragma omp parallel for schedule(dynamic, 1) if (nb > 1)
        for (int64_t b = 0; b < nb; b++) {
            int32_t lo = (int32_t)(b * PR_BLOCK), hi = lo + PR_BLOCK < n ? lo + PR_BLOCK : n;
            double l1b = 0, dang = 0;
            for (int32_t v = lo; v < hi; v++) {
                double xv = base + d * row_sum(c, in.indices, in.offsets[v], in.offsets[v + 1]);
                l1b += fabs(xv - x[v]);
                y[v] = xv;
                int64_t deg = out.offsets[v + 1] - out.offsets[v];
                if (deg) {
                    cn[v] = xv / (double)deg;
                } else {
                    cn[v] = 0.0;
                    dang += xv;
                }
            }
            part[2 * b] = l1b;
            part[2 * b + 1] = dang;
        }
        l1 = 0;
        dangling = 0;
        for (int64_t b = 0; b < nb; b++) {
            l1 += part[2 * b];
            dangling += part[2 * b + 1];
        }
        double *t = x;
        x = y, y = t;
        t = c;
        c = cn, cn = t;
        it++;
        if (progress)
            progress(ud, it, l1);
        if (l1 < o->tol)
            break;
    }

    result->iterations = it;
    result->l1_change = l1;
    result->converged = l1 < o->tol;
    result->seconds = saga_now() - t0;
    *scores = x;
    x = NULL;

    /* ---- free workspace ---- */
fail:
    saga_free(x);
    saga_free(y);
    saga_free(c);
    saga_free(cn);
    saga_free(part);
    return st;
}
