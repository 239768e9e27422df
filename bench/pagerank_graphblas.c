/* pagerank_graphblas.c - PageRank written with SuiteSparse:GraphBLAS the way LAGraph's
 * LAGr_PageRank formulates it, in f64, as the peer in bench/pagerank.sh.
 *
 *   pagerank_graphblas FILE [--damping D] [--tol T] [--max-iters N] [--top K] [--out FILE]
 *
 * FILE is read with libsaga (any format saga reads, typically an .sgr), so both programs see the
 * same graph. The definition is saga's (apps/pagerank.h): x starts at 1/N; each iteration
 *   x' = (1-d)/N + d * (A^T (x ./ outdeg) + dangling/N)
 * where dangling is the total score of the vertices without out-edges; it stops when the L1
 * change is below T (T = 0: run exactly N iterations). As LAGraph writes it:
 * - A^T is held by row (the in-edges) and iso-valued: only its structure is stored, and the
 *   product is GrB_mxv over GxB_PLUS_SECOND_FP64, which sums the entries of w the row names;
 * - the out-degrees are divided by d once, before the iterations (w = x ./ (outdeg / d) is
 *   d x ./ outdeg), a vertex without out-edges getting 1/d so that nothing divides by zero (no
 *   row names it);
 * - the dangling mass is one masked reduction of x over the sinks per iteration, folded into the
 *   scalar every vertex starts from, which GrB_mxv then accumulates into: no vector is built in
 *   the loop.
 * An iso-valued A^T holds each pair (u, v) once, so a graph with parallel edges is counted as if
 * it had one of each (saga counts every copy): bench/pagerank.sh gives both programs a graph
 * without them, and this program says how many it collapsed.
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

/* Builds the structure of A^T (rows = destinations) from saga's in-CSR, iso-valued, with each
 * pair once (the rows are sorted there, so parallel edges are adjacent), and packs it as CSR
 * without GraphBLAS having to sort 2^26 tuples. *collapsed: the parallel edges left out. The
 * caller frees the matrix. */
static GrB_Matrix build_at(const saga_graph *g, int64_t *collapsed) {
    const saga_csr in = saga_graph_in(g);
    const int32_t n = in.n_rows;
    GrB_Index *ap = xmalloc((size_t)n + 1, sizeof *ap);
    GrB_Index *aj = xmalloc((size_t)in.nnz, sizeof *aj);
    bool *ax = xmalloc(1, sizeof *ax);
    *ax = true;
    GrB_Index nz = 0;
    for (int32_t v = 0; v < n; v++) {
        ap[v] = nz;
        for (int64_t k = in.offsets[v]; k < in.offsets[v + 1]; k++)
            if (nz == ap[v] || aj[nz - 1] != (GrB_Index)in.indices[k])
                aj[nz++] = (GrB_Index)in.indices[k];
    }
    ap[n] = nz;
    *collapsed = in.nnz - (int64_t)nz;
    GrB_Matrix at = NULL;
    GRB_OK(GrB_Matrix_new(&at, GrB_BOOL, (GrB_Index)n, (GrB_Index)n));
    /* GraphBLAS takes the arrays (they came from the C allocator it uses) */
    GRB_OK(GxB_Matrix_pack_CSR(at, &ap, &aj, (void **)&ax, ((GrB_Index)n + 1) * sizeof *ap,
                               (in.nnz ? (GrB_Index)in.nnz : 1) * sizeof *aj, sizeof *ax, true,
                               false, NULL));
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
    int64_t collapsed = 0;
    GrB_Matrix at = build_at(g, &collapsed);
    const GrB_Index nn = (GrB_Index)n;

    /* dd: the out-degree (of distinct neighbours, as A^T holds them) over d, 1/d for a sink;
     * sink: the vertices without out-edges */
    GrB_Vector dd = NULL, sink = NULL, r = NULL, t = NULL, w = NULL;
    GRB_OK(GrB_Vector_new(&dd, GrB_FP64, nn));
    GRB_OK(GrB_Vector_new(&sink, GrB_BOOL, nn));
    GrB_Index nsinks = 0;
    {
        const saga_csr out = saga_graph_out(g);
        GrB_Index *idx = xmalloc((size_t)n, sizeof *idx), *sidx = xmalloc((size_t)n, sizeof *sidx);
        double *val = xmalloc((size_t)n, sizeof *val);
        bool *sval = xmalloc((size_t)n, sizeof *sval);
        for (int32_t u = 0; u < n; u++) {
            int64_t deg = 0; /* distinct out-neighbours: the out-rows are sorted too */
            for (int64_t k = out.offsets[u]; k < out.offsets[u + 1]; k++)
                deg += k == out.offsets[u] || out.indices[k] != out.indices[k - 1];
            idx[u] = (GrB_Index)u;
            val[u] = deg ? (double)deg / d : 1.0 / d;
            if (!deg) {
                sidx[nsinks] = (GrB_Index)u;
                sval[nsinks++] = true;
            }
        }
        GRB_OK(GrB_Vector_build_FP64(dd, idx, val, nn, GrB_PLUS_FP64));
        GRB_OK(GrB_Vector_build_BOOL(sink, sidx, sval, nsinks, GrB_LOR));
        free(idx);
        free(sidx);
        free(val);
        free(sval);
    }
    GRB_OK(GrB_Vector_new(&r, GrB_FP64, nn));
    GRB_OK(GrB_Vector_new(&t, GrB_FP64, nn));
    GRB_OK(GrB_Vector_new(&w, GrB_FP64, nn));
    const double inv_n = 1.0 / (double)n;
    GRB_OK(GrB_Vector_assign_FP64(r, NULL, NULL, inv_n, GrB_ALL, nn, NULL));
    GRB_OK(GrB_Vector_wait(r, GrB_MATERIALIZE));
    GRB_OK(GrB_Matrix_wait(at, GrB_MATERIALIZE));
    t_build = now() - t_build;

    /* ---- iterate (timed) ---- */
    double t0 = now();
    double l1 = INFINITY;
    long it = 0;
    while (it < max_iters) {
        /* the scalar every vertex starts from: teleport, plus the sinks' mass spread evenly */
        double teleport = (1.0 - d) * inv_n, dangling = 0;
        if (nsinks) {
            GRB_OK(GrB_Vector_clear(t));
            GRB_OK(GrB_Vector_assign(t, sink, NULL, r, GrB_ALL, nn, GrB_DESC_S));
            GRB_OK(GrB_Vector_reduce_FP64(&dangling, NULL, GrB_PLUS_MONOID_FP64, t, NULL));
            teleport += d * dangling * inv_n;
        }
        /* t: the old scores; w = t ./ dd; r = teleport + A^T w */
        GrB_Vector tmp = t;
        t = r, r = tmp;
        GRB_OK(GrB_eWiseMult(w, NULL, NULL, GrB_DIV_FP64, t, dd, NULL));
        GRB_OK(GrB_Vector_assign_FP64(r, NULL, NULL, teleport, GrB_ALL, nn, NULL));
        GRB_OK(GrB_mxv(r, NULL, GrB_PLUS_FP64, GxB_PLUS_SECOND_FP64, at, w, NULL));
        /* L1 change: sum |t - r| */
        GRB_OK(GrB_Vector_assign(t, NULL, GrB_MINUS_FP64, r, GrB_ALL, nn, NULL));
        GRB_OK(GrB_Vector_apply(t, NULL, NULL, GrB_ABS_FP64, t, NULL));
        GRB_OK(GrB_Vector_reduce_FP64(&l1, NULL, GrB_PLUS_MONOID_FP64, t, NULL));
        it++;
        if (l1 < tol)
            break;
    }
    const double seconds = now() - t0;
    GrB_Vector x = r;

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
        ranked *rk = xmalloc((size_t)n, sizeof *rk);
        for (int32_t v = 0; v < n; v++)
            rk[v] = (ranked){xv[v], v};
        qsort(rk, (size_t)n, sizeof *rk, cmp_ranked);
        printf("%-6s %-12s %s\n", "rank", "id", "score");
        for (long i = 0; i < top; i++)
            printf("%-6ld %-12lld %.17g\n", i + 1, (long long)saga_graph_orig_id(g, rk[i].v),
                   rk[i].score);
        free(rk);
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
            "graphblas %d.%d.%d (LAGraph's formulation), %d threads; %d vertices, %lld edges "
            "(%llu distinct%s); load %.3f s, build %.3f s\n",
            GxB_IMPLEMENTATION_MAJOR, GxB_IMPLEMENTATION_MINOR, GxB_IMPLEMENTATION_SUB, nthreads, n,
            (long long)saga_graph_n_edges(g), (unsigned long long)nvals_at,
            collapsed ? ": parallel edges counted once, unlike saga" : "", t_load, t_build);
    printf("iterations=%ld seconds_per_iteration=%.6f l1=%.6g seconds=%.6f\n", it,
           seconds / (double)it, l1, seconds);

    free(xv);
    GrB_Matrix_free(&at);
    GrB_Vector_free(&dd);
    GrB_Vector_free(&sink);
    GrB_Vector_free(&r);
    GrB_Vector_free(&t);
    GrB_Vector_free(&w);
    GrB_finalize();
    saga_graph_free(&g);
    return 0;
}
