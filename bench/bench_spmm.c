/* bench_spmm.c - the CPU spmm_f32 kernel (GCN aggregation, Y = A X) on an R-MAT graph.
 *
 *   bench_spmm [SCALE [EDGE_FACTOR [THREADS...]]]   defaults: 18 16 1 2
 *   bench_spmm --stream THREADS...                   the triad alone
 *
 * For F = 8, 16, 64 and 128 and each thread count, prints milliseconds per call (best and mean of
 * the timed calls, after one untimed call that touches every page), edges per second, and the
 * effective bandwidth: bytes of indices + offsets + X rows read (one row per stored entry) + Y
 * written, over the best time, next to the machine's STREAM-like bandwidth with the same threads
 * (the best of 5 triads a = b + s c over three arrays of 256 MiB). The
 * effective figure counts every gathered row as read from memory, so a kernel whose X rows stay
 * in cache can pass 100% of STREAM: the roofline is a bound on traffic, not on this count. A is
 * the in-edge CSR (row v lists the sources of edges into v), unweighted.
 */
#include "backend_impl.h"
#include "saga_datasets.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MIN_REPS = 5 };
static const double MIN_SECONDS = 1.0; /* time at least this long per configuration */

static int fail(const char *what) {
    fprintf(stderr, "bench_spmm: %s: %s\n", what, saga_last_error());
    return 1;
}

/* The best GB/s of a triad (24 bytes per element: two reads and a write, write-allocate not
 * counted, as STREAM does) with n_threads threads; 0 on failure. */
static double stream_gbs(int n_threads) {
    const size_t N = (size_t)1 << 25; /* 256 MiB per array */
    double *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b), *c = malloc(N * sizeof *c);
    double best = 0;
    if (a && b && c) {
#pragma omp parallel for num_threads(n_threads) schedule(static)
        for (size_t i = 0; i < N; i++)
            a[i] = 0, b[i] = 1, c[i] = 2;
        for (int r = 0; r < 5; r++) {
            double t0 = saga_now();
#pragma omp parallel for num_threads(n_threads) schedule(static)
            for (size_t i = 0; i < N; i++)
                a[i] = b[i] + 1.5 * c[i];
            double g = 24.0 * (double)N / (saga_now() - t0) * 1e-9;
            best = g > best ? g : best;
        }
    }
    free(a);
    free(b);
    free(c);
    return best;
}

/* Times one configuration; returns nonzero on error. */
static int run(const saga_csr *csr, int64_t F, int n_threads, double stream) {
    saga_backend_params p = saga_backend_params_defaults();
    p.n_threads = n_threads;
    saga_backend *be = NULL;
    if (saga_backend_cpu_new(&be, &p) < 0)
        return fail("backend");
    const int64_t n = csr->n_rows;
    const size_t bytes = (size_t)n * (size_t)F * sizeof(float);
    float *X = NULL, *Y = NULL;
    if (saga_backend_alloc(be, (void **)&X, bytes) < 0 ||
        saga_backend_alloc(be, (void **)&Y, bytes) < 0) {
        saga_backend_free(be, X, X ? bytes : 0);
        saga_backend_free_all(&be);
        return fail("alloc");
    }
    for (int64_t i = 0; i < n * F; i++)
        X[i] = (float)((i * 2654435761u) % 1000) * 1e-3f;
    const saga_csr_dev A = {.n_rows = n,
                            .n_cols = n,
                            .nnz = csr->nnz,
                            .offsets = csr->offsets,
                            .indices = csr->indices,
                            .values = NULL};
    saga_stream *s = saga_backend_default_stream(be);
    int rc = 0;
    if (be->kernels->spmm_f32(s, &A, F, 1.0f, X, 0.0f, Y) < 0) { /* first touch of Y */
        rc = fail("spmm_f32");
        goto done;
    }
    double best = 1e30, total = 0;
    int reps = 0;
    while (reps < MIN_REPS || total < MIN_SECONDS) {
        double t0 = saga_now();
        be->kernels->spmm_f32(s, &A, F, 1.0f, X, 0.0f, Y);
        double dt = saga_now() - t0;
        best = dt < best ? dt : best;
        total += dt;
        reps++;
    }
    const double moved = (double)csr->nnz * 4.0 + (double)(n + 1) * 8.0 +
                         (double)csr->nnz * (double)F * 4.0 + (double)n * (double)F * 4.0;
    const double gbs = moved / best * 1e-9;
    printf("F=%-4lld threads=%d  best %8.2f ms  mean %8.2f ms  (%3d calls)  %7.1f M edges/s  "
           "%6.2f ns/edge  %6.2f GB/s = %3.0f%% of triad\n",
           (long long)F, n_threads, best * 1e3, total / reps * 1e3, reps,
           (double)csr->nnz / best * 1e-6, best / (double)csr->nnz * 1e9, gbs,
           stream > 0 ? 100.0 * gbs / stream : 0.0);
    fflush(stdout);
done:
    saga_backend_free(be, X, bytes);
    saga_backend_free(be, Y, bytes);
    saga_backend_free_all(&be);
    return rc;
}

int main(int argc, char **argv) {
    /* --stream THREADS...: the triad alone (bench/pagerank.sh's floor) */
    if (argc > 1 && strcmp(argv[1], "--stream") == 0) {
        for (int i = 2; i < argc; i++)
            printf("STREAM-like triad, %d threads: %.1f GB/s\n", atoi(argv[i]),
                   stream_gbs(atoi(argv[i])));
        return 0;
    }
    saga_rmat_params rp = saga_rmat_params_defaults();
    rp.scale = argc > 1 ? atoi(argv[1]) : 18;
    rp.edge_factor = argc > 2 ? atoi(argv[2]) : 16;
    int threads[8] = {1, 2};
    int n_threads = 2;
    if (argc > 3) {
        n_threads = 0;
        for (int i = 3; i < argc && n_threads < 8; i++)
            threads[n_threads++] = atoi(argv[i]);
    }
    saga_graph *g = NULL;
    double t0 = saga_now();
    if (saga_rmat_graph(&g, &rp, NULL) < 0)
        return fail("R-MAT graph");
    const saga_csr csr = saga_graph_in(g);
    int32_t max_deg = 0;
    for (int32_t v = 0; v < csr.n_rows; v++) {
        int64_t d = csr.offsets[v + 1] - csr.offsets[v];
        max_deg = d > max_deg ? (int32_t)d : max_deg;
    }
    printf("R-MAT scale %d, edge factor %d: %d vertices, %lld edges, max in-degree %d "
           "(generated in %.1f s)\n",
           rp.scale, rp.edge_factor, (int)csr.n_rows, (long long)csr.nnz, (int)max_deg,
           saga_now() - t0);
    double stream[8] = {0};
    for (int ti = 0; ti < n_threads; ti++) {
        stream[ti] = stream_gbs(threads[ti]);
        printf("STREAM-like triad, %d threads: %.1f GB/s\n", threads[ti], stream[ti]);
    }
    static const int64_t Fs[] = {8, 16, 64, 128};
    int rc = 0;
    for (int fi = 0; fi < 4 && !rc; fi++)
        for (int ti = 0; ti < n_threads && !rc; ti++)
            rc = run(&csr, Fs[fi], threads[ti], stream[ti]);
    saga_graph_free(&g);
    return rc;
}
