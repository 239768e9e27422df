/* pagerank.h - PageRank in f64 over a saga_graph, pulled along the in-edges.
 *
 *   pr_opts o = pr_opts_defaults();
 *   double *x = NULL;
 *   pr_result r;
 *   SAGA_TRY(pr_run(&x, &r, g, &o, NULL, NULL));
 *   if (!r.converged) ...                       // the caller decides whether that is an error
 *   saga_free(x);
 *
 * Definition: x starts at 1/N; each iteration
 *   x'[v] = (1-d)/N + d * (sum over edges u->v of x[u]/outdeg(u) + (sum over dangling u of x[u])/N)
 * where a parallel edge counts once per copy and a self-loop is an ordinary out-link; weights are
 * ignored. It stops when sum |x' - x| < tol. Sums are taken over fixed blocks of vertices and
 * combined in block order, so the result is bit-for-bit the same for any thread count.
 */
#pragma once

#include "saga_graph.h"

typedef struct pr_opts {
    double damping;
    double tol;    /* on the L1 change between iterations */
    int max_iters; /* at least 1 */
    /* on a backend: iterations inside a profiler's capture range (saga_net_opts) */
    int32_t profile_first, profile_last;
} pr_opts;

typedef struct pr_result {
    int iterations;
    double l1_change; /* of the last iteration */
    bool converged;   /* l1_change < tol */
    double seconds;   /* all iterations, setup excluded */
} pr_result;

/* d = 0.85, tol = 1e-10, 1000 iterations. */
pr_opts pr_opts_defaults(void);

/* Called after every iteration (may be NULL), e.g. for progress. */
typedef void (*pr_progress_fn)(void *ud, int iteration, double l1_change);

/* Runs PageRank on g. *scores receives N values (saga_malloc'd, owned by the caller) whether or
 * not it converged within max_iters; see result->converged. Errors: SAGA_ERR_INVALID_ARG (an
 * empty graph, d outside [0, 1), tol not positive), SAGA_ERR_OUT_OF_MEMORY. */
saga_status pr_run(double **scores, pr_result *result, const saga_graph *g, const pr_opts *o,
                   pr_progress_fn progress, void *ud);
