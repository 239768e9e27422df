/* pagerank_graphblas.c - the same PageRank as `saga pagerank`, written with SuiteSparse:GraphBLAS,
 * as the peer in bench/pagerank.sh.
 *
 *   pagerank_graphblas FILE [--damping D] [--tol T] [--max-iters N] [--top K] [--out FILE]
 *
 * FILE is read with libsaga (any format saga reads, typically an .sgr), so both programs see the
 * same graph. The definition is saga's (apps/pagerank.h): x starts at 1/N; each iteration
 *   x' = (1-d)/N + d * (A^T (x ./ outdeg) + dangling/N)
 * where A[u][v] counts the edges u->v (a parallel edge counts once per copy), dangling is the
 * total score of the vertices without out-edges, weights are ignored; it stops when the L1 change
 * is below T (T = 0: run exactly N iterations). A^T is held by row (the in-edges), so GrB_mxv
 * pulls along the in-edges with dot products, as saga does.
 *
 * Only the iterations are timed. Prints "iterations=I seconds_per_iteration=S l1=L" on the last
 * line of stdout, after the top K vertices ("rank id score", ids as in the file); --out writes
 * "id score" for every vertex in the order of saga's --out.
 */
#include "saga_graph.h"
#include "saga_io.h"

#include <GraphBLAS.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Aborts with the failing call's text when a GraphBLAS method does not succeed; a benchmark has
 * nothing to recover. */
#define GRB_OK(call)                                                                               \
    do {                                                                                           \
        GrB_Info info_ = (call);                                                                   \
        if (info_ != GrB_SUCCESS && info_ != GrB_NO_VALUE) {                                       \
            fprintf(stderr, "pagerank_graphblas: %s failed: GrB_Info %d\n", #call, (int)info_);    \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* malloc that exits on failure (the program holds no state worth unwinding). */
static void *xmalloc(size_t n, size_t size) {
    void *p = n ? calloc(n, size) : malloc(1);
    if (!p) {
        fprintf(stderr, "pagerank_graphblas: out of memory (%zu x %zu bytes)\n", n, size);
        exit(1);
    }
    return p;
}

static void usage(void) {
    fprintf(stderr, "usage: pagerank_graphblas FILE [--damping D] [--tol T] [--max-iters N] "
                    "[--top K] [--out FILE]\n");
    exit(2);
}

/* Builds A^T (rows = destinations) from saga's in-CSR. Rows are sorted there, so parallel edges
 * are adjacent: each run becomes one entry holding its length, and the matrix is imported as CSR
 * without GraphBLAS having to sort 2^26 tuples. The caller frees the matrix. */
static GrB_Matrix build_at(const saga_graph *g) {
    const saga_csr in = saga_graph_in(g);
    const int32_t n = in.n_rows;
    GrB_Index *ap = xmalloc((size_t)n + 1, sizeof *ap);
    GrB_Index *aj = xmalloc((size_t)in.nnz, sizeof *aj);
    double *ax = xmalloc((size_t)in.nnz, sizeof *ax);
    GrB_Index nz = 0;
    for (int32_t v = 0; v < n; v++) {
        ap[v] = nz;
        for (int64_t k = in.offsets[v]; k < in.offsets[v + 1]; k++) {
            if (nz > ap[v] && aj[nz - 1] == (GrB_Index)in.indices[k]) {
                ax[nz - 1] += 1.0;
            } else {
                aj[nz] = (GrB_Index)in.indices[k];
                ax[nz] = 1.0;
                nz++;
            }
        }
    }
    ap[n] = nz;
    GrB_Matrix at = NULL;
    GRB_OK(GrB_Matrix_import_FP64(&at, GrB_FP64, (GrB_Index)n, (GrB_Index)n, ap, aj, ax,
                                  (GrB_Index)n + 1, nz, nz, GrB_CSR_FORMAT));
    free(ap);
    free(aj);
    free(ax);
    return at;
}

typedef struct ranked {
    double score;
    int32_t v;
} ranked;

/* Score descending, then id ascending (internal ids are ordered as the original ids), as saga
 * breaks ties. */
static int cmp_ranked(const void *pa, const void *pb) {
    const ranked *a = pa, *b = pb;
    if (a->score != b->score)
        return a->score > b->score ? -1 : 1;
    return (a->v > b->v) - (a->v < b->v);
}

int main(int argc, char **argv) {
    const char *path = NULL, *out_path = NULL;
    double d = 0.85, tol = 1e-10;
    long max_iters = 1000, top = 10;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-') {
            if (path)
                usage();
            path = a;
            continue;
        }
        if (i + 1 >= argc)
            usage();
        const char *v = argv[++i];
        char *end = NULL;
        errno = 0;
        if (!strcmp(a, "--damping"))
            d = strtod(v, &end);
        else if (!strcmp(a, "--tol"))
            tol = strtod(v, &end);
        else if (!strcmp(a, "--max-iters"))
            max_iters = strtol(v, &end, 10);
        else if (!strcmp(a, "--top"))
            top = strtol(v, &end, 10);
        else if (!strcmp(a, "--out"))
            out_path = v, end = (char *)v + strlen(v);
        else
            usage();
        if (errno || !end || *end || end == v)
            usage();
    }
    if (!path || !(d >= 0 && d < 1) || !(tol >= 0) || max_iters < 1 || top < 0)
        usage();

    saga_graph *g = NULL;
    double t_load = now();
    if (saga_graph_load(&g, path, NULL) < 0) {
        fprintf(stderr, "pagerank_graphblas: %s\n", saga_last_error());
        return 1;
    }
    const int32_t n = saga_graph_n_vertices(g);
    if (n <= 0) {
        fprintf(stderr, "pagerank_graphblas: %s has no vertices\n", path);
        return 1;
    }
    t_load = now() - t_load;

    GRB_OK(GrB_init(GrB_NONBLOCKING));
    double t_build = now();
    GrB_Matrix at = build_at(g);
    const GrB_Index nn = (GrB_Index)n;

    /* inv_deg: 1/outdeg, 0 for a dangling vertex; dind: 1 at the dangling vertices only. */
    const saga_csr out = saga_graph_out(g);
    GrB_Vector inv_deg = NULL, dind = NULL, x = NULL, xn = NULL, t = NULL, w = NULL, diff = NULL,
               xd = NULL;
    GRB_OK(GrB_Vector_new(&inv_deg, GrB_FP64, nn));
    GRB_OK(GrB_Vector_new(&dind, GrB_FP64, nn));
    {
        GrB_Index *idx = xmalloc((size_t)n, sizeof *idx);
        double *val = xmalloc((size_t)n, sizeof *val);
        GrB_Index *didx = xmalloc((size_t)n, sizeof *didx);
        double *dval = xmalloc((size_t)n, sizeof *dval);
        GrB_Index nd = 0;
        for (int32_t u = 0; u < n; u++) {
            int64_t deg = out.offsets[u + 1] - out.offsets[u];
            idx[u] = (GrB_Index)u;
            val[u] = deg ? 1.0 / (double)deg : 0.0;
            if (!deg) {
                didx[nd] = (GrB_Index)u;
                dval[nd++] = 1.0;
            }
        }
        GRB_OK(GrB_Vector_build_FP64(inv_deg, idx, val, nn, GrB_PLUS_FP64));
        GRB_OK(GrB_Vector_build_FP64(dind, didx, dval, nd, GrB_PLUS_FP64));
        free(idx);
        free(val);
        free(didx);
        free(dval);
    }
    GRB_OK(GrB_Vector_new(&x, GrB_FP64, nn));
    GRB_OK(GrB_Vector_new(&xn, GrB_FP64, nn));
    GRB_OK(GrB_Vector_new(&t, GrB_FP64, nn));
    GRB_OK(GrB_Vector_new(&w, GrB_FP64, nn));
    GRB_OK(GrB_Vector_new(&diff, GrB_FP64, nn));
    GRB_OK(GrB_Vector_new(&xd, GrB_FP64, nn));
    const double inv_n = 1.0 / (double)n;
    GRB_OK(GrB_Vector_assign_FP64(x, NULL, NULL, inv_n, GrB_ALL, nn, NULL));
    GRB_OK(GrB_Vector_wait(x, GrB_MATERIALIZE));
    GRB_OK(GrB_Matrix_wait(at, GrB_MATERIALIZE));
    t_build = now() - t_build;

    /* ---- iterate (timed) ---- */
    double t0 = now();
    double l1 = INFINITY;
    long it = 0;
    while (it < max_iters) {
        double dangling = 0;
        GRB_OK(GrB_eWiseMult(xd, NULL, NULL, GrB_TIMES_FP64, x, dind, NULL));
        GRB_OK(GrB_Vector_reduce_FP64(&dangling, NULL, GrB_PLUS_MONOID_FP64, xd, NULL));
        const double base = (1.0 - d) * inv_n + d * dangling * inv_n;
        /* t = x ./ outdeg; w = A^T t; x' = base + d w (w lacks the vertices without in-edges,
         * which keep base through the accumulator). */
        GRB_OK(GrB_eWiseMult(t, NULL, NULL, GrB_TIMES_FP64, x, inv_deg, NULL));
        GRB_OK(GrB_mxv(w, NULL, NULL, GrB_PLUS_TIMES_SEMIRING_FP64, at, t, NULL));
        GRB_OK(GrB_Vector_assign_FP64(xn, NULL, NULL, base, GrB_ALL, nn, NULL));
        GRB_OK(
            GrB_Vector_apply_BinaryOp1st_FP64(xn, NULL, GrB_PLUS_FP64, GrB_TIMES_FP64, d, w, NULL));
        /* L1 change: sum |x' - x|. */
        GRB_OK(GrB_eWiseAdd(diff, NULL, NULL, GrB_MINUS_FP64, xn, x, NULL));
        GRB_OK(GrB_Vector_apply(diff, NULL, NULL, GrB_ABS_FP64, diff, NULL));
        GRB_OK(GrB_Vector_reduce_FP64(&l1, NULL, GrB_PLUS_MONOID_FP64, diff, NULL));
        GrB_Vector tmp = x;
        x = xn, xn = tmp;
        it++;
        if (l1 < tol)
            break;
    }
    const double seconds = now() - t0;

    /* ---- report ---- */
    double *xv = xmalloc((size_t)n, sizeof *xv);
    {
        GrB_Index *idx = xmalloc((size_t)n, sizeof *idx);
        double *val = xmalloc((size_t)n, sizeof *val);
        GrB_Index nvals = nn;
        GRB_OK(GrB_Vector_extractTuples_FP64(idx, val, &nvals, x));
        for (GrB_Index k = 0; k < nvals; k++)
            xv[idx[k]] = val[k];
        free(idx);
        free(val);
    }
    if (top > n)
        top = n;
    if (top > 0) {
        ranked *r = xmalloc((size_t)n, sizeof *r);
        for (int32_t v = 0; v < n; v++)
            r[v] = (ranked){xv[v], v};
        qsort(r, (size_t)n, sizeof *r, cmp_ranked);
        printf("%-6s %-12s %s\n", "rank", "id", "score");
        for (long i = 0; i < top; i++)
            printf("%-6ld %-12lld %.17g\n", i + 1, (long long)saga_graph_orig_id(g, r[i].v),
                   r[i].score);
        free(r);
    }
    if (out_path) {
        FILE *f = fopen(out_path, "w");
        if (!f) {
            fprintf(stderr, "pagerank_graphblas: cannot create '%s': %s\n", out_path,
                    strerror(errno));
            return 1;
        }
        for (int32_t v = 0; v < n; v++)
            fprintf(f, "%lld %.17g\n", (long long)saga_graph_orig_id(g, v), xv[v]);
        if (fclose(f) != 0) {
            fprintf(stderr, "pagerank_graphblas: %s: write failed\n", out_path);
            return 1;
        }
    }
    int nthreads = 0;
    GRB_OK(GxB_Global_Option_get(GxB_NTHREADS, &nthreads));
    GrB_Index nvals_at = 0;
    GRB_OK(GrB_Matrix_nvals(&nvals_at, at));
    fprintf(stderr,
            "graphblas %d.%d.%d, %d threads; %d vertices, %lld edges (%llu distinct); load "
            "%.3f s, build %.3f s\n",
            GxB_IMPLEMENTATION_MAJOR, GxB_IMPLEMENTATION_MINOR, GxB_IMPLEMENTATION_SUB, nthreads, n,
            (long long)saga_graph_n_edges(g), (unsigned long long)nvals_at, t_load, t_build);
    printf("iterations=%ld seconds_per_iteration=%.6f l1=%.6g seconds=%.6f\n", it,
           seconds / (double)it, l1, seconds);

    free(xv);
    GrB_Matrix_free(&at);
    GrB_Vector_free(&inv_deg);
    GrB_Vector_free(&dind);
    GrB_Vector_free(&x);
    GrB_Vector_free(&xn);
    GrB_Vector_free(&t);
    GrB_Vector_free(&w);
    GrB_Vector_free(&diff);
    GrB_Vector_free(&xd);
    GrB_finalize();
    saga_graph_free(&g);
    return 0;
}
