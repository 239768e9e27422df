/* bench_spmm_dev.c - the sparse products on a device, timed by its events: what decides, per
 * shape, which SpMM a GPU should run.
 *
 *   bench_spmm_dev [SPEC [SCALE [EDGE_FACTOR [BUDGET]]]]   SPEC as saga_backend_open takes
 *                                         (cuda, cuda:N, cpu; default cuda); defaults 20 and 16
 *
 * Two graphs of 2^SCALE vertices and EDGE_FACTOR edges per vertex: R-MAT (power-law in-degrees,
 * a few rows with many entries) and R-MAT with equal quadrants (degrees near the mean). A is the
 * in-edge CSR with 1/in-degree values (a mean aggregation), A^T the out-edge CSR with the same
 * values. For each F, in alternating rounds, the median of each product's calls:
 *   - Y = A X through the backend's spmm_f32 (on CUDA: cuSPARSE's SpMM where it takes the shape)
 *     and, on CUDA, through saga's own kernel (a second backend opened with SAGA_CUDA_SPMM=own);
 *   - Y = A^T X by spmm_t_f32 (no stored transpose) and by spmm_f32 on the stored A^T.
 * With BUDGET (bytes), first a streamed part's X^T dH (2,048 rows of 128 features, 15 a row,
 * F = 16) without a budget and under BUDGET, whose workspace holds fewer partials at once.
 * Before the graphs, the transposed product where it serves, the weight gradient X^T dH of sparse
 * input features (2^SCALE rows of 1433 columns, 20 words a row): spmm_t_f32 against SpMM on the
 * stored X^T. Each line gives milliseconds (a product slower than 0.25 s a call: its first call of
 * each round), GFLOP/s (2 nnz F flops) and the ratios; the two ways of each product are compared
 * (the largest difference, which rounding alone explains). */
#include "backend_impl.h"
#include "saga_datasets.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { REPS = 9, ROUNDS = 3, MAX_BE = 2 };
#define SLOW_SECONDS 0.25 /* a product slower than this a call is timed once a round */

static int fail(const char *what) {
    fprintf(stderr, "bench_spmm_dev: %s: %s\n", what, saga_last_error());
    return 1;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A CSR with its values on one backend. */
typedef struct dev_csr {
    saga_csr_dev m;
    size_t off_bytes, idx_bytes, val_bytes;
} dev_csr;

static void *upload(saga_backend *be, const void *host, size_t bytes) {
    void *d = NULL;
    if (saga_backend_alloc(be, &d, bytes) < 0)
        return NULL;
    if (saga_memcpy_h2d_async(saga_backend_default_stream(be), d, host, bytes) < 0 ||
        saga_stream_synchronize(saga_backend_default_stream(be)) < 0) {
        saga_backend_free(be, d, bytes);
        return NULL;
    }
    return d;
}

/* X, n x F values in [-0.5, 0.5), on be; NULL when there is no memory for it. */
static float *x_upload(saga_backend *be, int64_t n, int64_t F) {
    const size_t bytes = (size_t)n * (size_t)F * sizeof(float);
    float *hx = malloc(bytes), *X = NULL;
    if (!hx)
        return NULL;
    for (int64_t i = 0; i < n * F; i++)
        hx[i] = (float)((uint64_t)i * 2654435761u % 1000) * 1e-3f - 0.5f;
    X = upload(be, hx, bytes);
    free(hx);
    return X;
}

/* A rows x cols CSR of the host's arrays, uploaded. */
static int csr_upload(saga_backend *be, int64_t rows, int64_t cols, int64_t nnz, const int64_t *off,
                      const int32_t *idx, const float *vals, dev_csr *out) {
    out->off_bytes = ((size_t)rows + 1) * sizeof(int64_t);
    out->idx_bytes = (size_t)nnz * sizeof(int32_t);
    out->val_bytes = (size_t)nnz * sizeof(float);
    out->m = (saga_csr_dev){.n_rows = rows,
                            .n_cols = cols,
                            .nnz = nnz,
                            .offsets = upload(be, off, out->off_bytes),
                            .indices = upload(be, idx, out->idx_bytes),
                            .values = upload(be, vals, out->val_bytes)};
    return out->m.offsets && out->m.indices && out->m.values ? 0 : fail("uploading a CSR");
}

static void csr_free(saga_backend *be, dev_csr *d) {
    saga_backend_free(be, (void *)d->m.offsets, d->off_bytes);
    saga_backend_free(be, (void *)d->m.indices, d->idx_bytes);
    saga_backend_free(be, (void *)d->m.values, d->val_bytes);
}

/* Seconds of one call of op on be's default stream, timed by events around it. */
typedef saga_status (*product_fn)(saga_backend *be, const saga_csr_dev *A, int64_t F,
                                  const float *X, float *Y);

static saga_status spmm(saga_backend *be, const saga_csr_dev *A, int64_t F, const float *X,
                        float *Y) {
    return be->kernels->spmm_f32(saga_backend_default_stream(be), A, F, 1.0f, X, 0.0f, Y);
}

static saga_status spmm_t(saga_backend *be, const saga_csr_dev *A, int64_t F, const float *X,
                          float *Y) {
    return be->kernels->spmm_t_f32(saga_backend_default_stream(be), A, F, 1.0f, X, 0.0f, Y);
}

static int timed(saga_backend *be, product_fn op, const saga_csr_dev *A, int64_t F, const float *X,
                 float *Y, saga_event *e0, saga_event *e1, double *seconds) {
    saga_stream *s = saga_backend_default_stream(be);
    if (saga_event_record(e0, s) < 0 || op(be, A, F, X, Y) < 0 || saga_event_record(e1, s) < 0 ||
        saga_event_synchronize(e1) < 0)
        return fail("a product");
    if (saga_event_elapsed(e0, e1, seconds) < 0) /* a backend that does not time events */
        return fail("timing");
    return 0;
}

/* The median of REPS calls (after one untimed call). */
static int median_of(saga_backend *be, product_fn op, const saga_csr_dev *A, int64_t F,
                     const float *X, float *Y, saga_event *e0, saga_event *e1, double *out) {
    double t[REPS];
    /* the first call warms up; one slower than SLOW_SECONDS is all that is timed */
    if (timed(be, op, A, F, X, Y, e0, e1, &t[0]))
        return 1;
    if (t[0] > SLOW_SECONDS) {
        *out = t[0];
        return 0;
    }
    for (int r = 0; r < REPS; r++)
        if (timed(be, op, A, F, X, Y, e0, e1, &t[r]))
            return 1;
    qsort(t, REPS, sizeof *t, cmp_double);
    *out = t[REPS / 2];
    return 0;
}

/* med[k] = the median over the ROUNDS rounds of column k of t (ROUNDS rows of stride doubles),
 * for k < n. */
static void medians(const double *t, int stride, int n, double *med) {
    for (int k = 0; k < n; k++) {
        double col[ROUNDS];
        for (int r = 0; r < ROUNDS; r++)
            col[r] = t[r * stride + k];
        qsort(col, ROUNDS, sizeof *col, cmp_double);
        med[k] = col[ROUNDS / 2];
    }
}

/* The largest |a - b| over n floats of two device arrays, and the largest |a|. */
static int max_diff(saga_backend *be, const float *a, const float *b, size_t n, double *diff,
                    double *scale) {
    float *ha = malloc(n * sizeof *ha), *hb = malloc(n * sizeof *hb);
    int rc = !ha || !hb;
    saga_stream *s = saga_backend_default_stream(be);
    if (!rc &&
        (saga_memcpy_d2h_async(s, ha, a, n * sizeof *ha) < 0 ||
         saga_memcpy_d2h_async(s, hb, b, n * sizeof *hb) < 0 || saga_stream_synchronize(s) < 0))
        rc = fail("reading a product back");
    *diff = *scale = 0;
    for (size_t i = 0; !rc && i < n; i++) {
        *diff = fmax(*diff, fabs((double)ha[i] - (double)hb[i]));
        *scale = fmax(*scale, fabs((double)ha[i]));
    }
    free(ha);
    free(hb);
    return rc;
}

static int bench_graph(saga_backend **be, int n_be, const char *kind, const saga_rmat_params *rp,
                       const int64_t *Fs, int n_F) {
    saga_graph *g = NULL;
    if (saga_rmat_graph(&g, rp, NULL) < 0)
        return fail("R-MAT graph");
    const saga_csr in = saga_graph_in(g), out = saga_graph_out(g);
    const int64_t n = in.n_rows, nnz = in.nnz;
    float *a_vals = malloc((size_t)nnz * sizeof *a_vals), *at_vals = malloc((size_t)nnz * 4);
    int32_t max_deg = 0;
    int rc = !a_vals || !at_vals;
    for (int64_t v = 0; !rc && v < n; v++) {
        const int64_t d = in.offsets[v + 1] - in.offsets[v];
        max_deg = d > max_deg ? (int32_t)d : max_deg;
        for (int64_t k = in.offsets[v]; k < in.offsets[v + 1]; k++)
            a_vals[k] = 1.0f / (float)d;
    }
    for (int64_t u = 0; !rc && u < n; u++) /* A^T[u][v] = A[v][u] = 1 / in-degree(v) */
        for (int64_t k = out.offsets[u]; k < out.offsets[u + 1]; k++) {
            const int32_t v = out.indices[k];
            at_vals[k] = 1.0f / (float)(in.offsets[v + 1] - in.offsets[v]);
        }
    printf("%s: %lld vertices, %lld entries, max in-degree %d\n", kind, (long long)n,
           (long long)nnz, (int)max_deg);
    dev_csr A[MAX_BE], AT[MAX_BE];
    memset(A, 0, sizeof A);
    memset(AT, 0, sizeof AT);
    for (int b = 0; !rc && b < n_be; b++)
        rc = csr_upload(be[b], n, n, nnz, in.offsets, in.indices, a_vals, &A[b]) ||
             csr_upload(be[b], n, n, nnz, out.offsets, out.indices, at_vals, &AT[b]);
    saga_event *e0 = NULL, *e1 = NULL;
    if (!rc && (saga_event_new(&e0, be[0]) < 0 || saga_event_new(&e1, be[0]) < 0))
        rc = fail("events");
    for (int fi = 0; !rc && fi < n_F; fi++) {
        const int64_t F = Fs[fi];
        const size_t bytes = (size_t)n * (size_t)F * sizeof(float);
        float *X = x_upload(be[0], n, F), *Y = NULL, *Y2 = NULL;
        if (!X || saga_backend_alloc(be[0], (void **)&Y, bytes) < 0 ||
            saga_backend_alloc(be[0], (void **)&Y2, bytes) < 0) {
            rc = fail("device memory for X and Y");
        }
        /* [round][0 default spmm, 1 own spmm, 2 spmm_t, 3 spmm on A^T] */
        double t[ROUNDS][4], med[4];
        for (int r = 0; !rc && r < ROUNDS; r++) {
            rc = median_of(be[0], spmm, &A[0].m, F, X, Y, e0, e1, &t[r][0]);
            if (!rc && n_be > 1) { /* the second backend times with the first's events: one
                                    * device, and its stream is idle between the records */
                saga_event *f0 = NULL, *f1 = NULL;
                rc = saga_event_new(&f0, be[1]) < 0 || saga_event_new(&f1, be[1]) < 0
                         ? fail("events")
                         : median_of(be[1], spmm, &A[1].m, F, X, Y2, f0, f1, &t[r][1]);
                saga_event_free(&f0);
                saga_event_free(&f1);
            }
            if (!rc)
                rc = median_of(be[0], spmm_t, &A[0].m, F, X, Y, e0, e1, &t[r][2]);
            if (!rc)
                rc = median_of(be[0], spmm, &AT[0].m, F, X, Y2, e0, e1, &t[r][3]);
        }
        double d_fwd = 0, d_t = 0, s_fwd = 0, s_t = 0;
        if (!rc && n_be > 1) { /* the two SpMMs of A X */
            rc = spmm(be[0], &A[0].m, F, X, Y) < 0 || spmm(be[1], &A[1].m, F, X, Y2) < 0 ||
                         saga_backend_synchronize(be[1]) < 0
                     ? fail("a product")
                     : max_diff(be[0], Y, Y2, (size_t)n * (size_t)F, &d_fwd, &s_fwd);
        }
        if (!rc) /* the two products of A^T X */
            rc = spmm_t(be[0], &A[0].m, F, X, Y) < 0 || spmm(be[0], &AT[0].m, F, X, Y2) < 0
                     ? fail("a product")
                     : max_diff(be[0], Y, Y2, (size_t)n * (size_t)F, &d_t, &s_t);
        if (!rc) {
            medians(&t[0][0], 4, 4, med);
            const double flops = 2.0 * (double)nnz * (double)F * 1e-9;
            printf("%s F=%-4lld A X:   %s %8.3f ms (%6.1f GFLOP/s)", kind, (long long)F,
                   n_be > 1 ? "cuSPARSE" : "spmm_f32", med[0] * 1e3, flops / med[0]);
            if (n_be > 1)
                printf("  own %8.3f ms (%6.1f GFLOP/s)  own/cuSPARSE %.2f  |diff| %.2g of %.2g",
                       med[1] * 1e3, flops / med[1], med[1] / med[0], d_fwd, s_fwd);
            printf("\n%s F=%-4lld A^T X: spmm_t %8.3f ms (%6.1f GFLOP/s)  stored A^T %8.3f ms "
                   "(%6.1f GFLOP/s)  spmm_t/stored %.2f  |diff| %.2g of %.2g\n",
                   kind, (long long)F, med[2] * 1e3, flops / med[2], med[3] * 1e3, flops / med[3],
                   med[2] / med[3], d_t, s_t);
            fflush(stdout);
        }
        saga_backend_free(be[0], X, bytes);
        saga_backend_free(be[0], Y, bytes);
        saga_backend_free(be[0], Y2, bytes);
    }
    saga_event_free(&e0);
    saga_event_free(&e1);
    for (int b = 0; b < n_be; b++) {
        csr_free(be[b], &A[b]);
        csr_free(be[b], &AT[b]);
    }
    free(a_vals);
    free(at_vals);
    saga_graph_free(&g);
    return rc;
}

/* The transposed product where it serves: the weight gradient X^T dH of sparse input features X
 * (n x C, per_row words a row, columns drawn skewed to the low ids as word counts are; values
 * 1/per_row as normalized rows), against SpMM on X^T stored (C x n). Y is C x F: few rows that
 * every chunk of X adds into. */
static int bench_features(saga_backend *be, int64_t n, int64_t C, int per_row, const int64_t *Fs,
                          int n_F) {
    const int64_t nnz = n * per_row;
    int64_t *off = malloc(((size_t)n + 1) * sizeof *off), *toff = calloc((size_t)C + 1, 8);
    int32_t *idx = malloc((size_t)nnz * sizeof *idx), *tidx = malloc((size_t)nnz * 4);
    float *val = malloc((size_t)nnz * sizeof *val), *tval = malloc((size_t)nnz * 4);
    int rc = !off || !toff || !idx || !tidx || !val || !tval ? fail("host memory") : 0;
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int64_t i = 0; !rc && i <= n; i++)
        off[i] = i * per_row;
    for (int64_t k = 0; !rc && k < nnz; k++) { /* the rows' words, in increasing order */
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const double u = (double)(x >> 11) / (double)(1ull << 53);
        idx[k] = (int32_t)((double)C * u * u * u);
        val[k] = 1.0f / (float)per_row;
    }
    for (int64_t i = 0; !rc && i < n; i++) /* sorted within a row (insertion: per_row is small) */
        for (int64_t a = off[i] + 1; a < off[i + 1]; a++)
            for (int64_t b = a; b > off[i] && idx[b - 1] > idx[b]; b--) {
                const int32_t t = idx[b];
                idx[b] = idx[b - 1];
                idx[b - 1] = t;
            }
    for (int64_t k = 0; !rc && k < nnz; k++) /* the transpose, by counting */
        toff[idx[k] + 1]++;
    for (int64_t c = 0; !rc && c < C; c++)
        toff[c + 1] += toff[c];
    for (int64_t i = 0; !rc && i < n; i++)
        for (int64_t k = off[i]; k < off[i + 1]; k++) {
            const int64_t at = toff[idx[k]]++;
            tidx[at] = (int32_t)i;
            tval[at] = val[k];
        }
    for (int64_t c = C; !rc && c > 0; c--)
        toff[c] = toff[c - 1];
    if (!rc)
        toff[0] = 0;
    printf("features: %lld rows x %lld columns, %d words a row (%lld entries)\n", (long long)n,
           (long long)C, per_row, (long long)nnz);
    dev_csr A = {0}, AT = {0};
    if (!rc)
        rc = csr_upload(be, n, C, nnz, off, idx, val, &A) ||
             csr_upload(be, C, n, nnz, toff, tidx, tval, &AT);
    saga_event *e0 = NULL, *e1 = NULL;
    if (!rc && (saga_event_new(&e0, be) < 0 || saga_event_new(&e1, be) < 0))
        rc = fail("events");
    for (int fi = 0; !rc && fi < n_F; fi++) {
        const int64_t F = Fs[fi];
        const size_t xbytes = (size_t)n * (size_t)F * sizeof(float),
                     ybytes = (size_t)C * (size_t)F * sizeof(float);
        float *X = x_upload(be, n, F), *Y = NULL, *Y2 = NULL;
        if (!X || saga_backend_alloc(be, (void **)&Y, ybytes) < 0 ||
            saga_backend_alloc(be, (void **)&Y2, ybytes) < 0)
            rc = fail("device memory for X and Y");
        double t[ROUNDS][2], med[2], d = 0, sc = 0;
        for (int r = 0; !rc && r < ROUNDS; r++) {
            rc = median_of(be, spmm_t, &A.m, F, X, Y, e0, e1, &t[r][0]);
            if (!rc)
                rc = median_of(be, spmm, &AT.m, F, X, Y2, e0, e1, &t[r][1]);
        }
        if (!rc)
            rc = spmm_t(be, &A.m, F, X, Y) < 0 || spmm(be, &AT.m, F, X, Y2) < 0
                     ? fail("a product")
                     : max_diff(be, Y, Y2, (size_t)C * (size_t)F, &d, &sc);
        if (!rc) {
            medians(&t[0][0], 2, 2, med);
            const double flops = 2.0 * (double)nnz * (double)F * 1e-9;
            printf("features F=%-4lld X^T dH: spmm_t %8.3f ms (%6.1f GFLOP/s)  stored X^T %8.3f "
                   "ms (%6.1f GFLOP/s)  spmm_t/stored %.2f  |diff| %.2g of %.2g\n",
                   (long long)F, med[0] * 1e3, flops / med[0], med[1] * 1e3, flops / med[1],
                   med[0] / med[1], d, sc);
            fflush(stdout);
        }
        saga_backend_free(be, X, xbytes);
        saga_backend_free(be, Y, ybytes);
        saga_backend_free(be, Y2, ybytes);
    }
    saga_event_free(&e0);
    saga_event_free(&e1);
    if (A.m.offsets)
        csr_free(be, &A);
    if (AT.m.offsets)
        csr_free(be, &AT);
    free(off);
    free(toff);
    free(idx);
    free(tidx);
    free(val);
    free(tval);
    return rc;
}

int main(int argc, char **argv) {
    const char *spec = argc > 1 ? argv[1] : "cuda";
    saga_rmat_params rp = saga_rmat_params_defaults();
    rp.scale = argc > 2 ? atoi(argv[2]) : 20;
    rp.edge_factor = argc > 3 ? atoi(argv[3]) : 16;
    const size_t budget = argc > 4 ? (size_t)strtoull(argv[4], NULL, 10) : 0;
    if (rp.scale < 4 || rp.scale > 26 || rp.edge_factor < 1) {
        fprintf(stderr, "usage: bench_spmm_dev [SPEC [SCALE (4..26) [EDGE_FACTOR [BUDGET]]]]\n");
        return 2;
    }
    saga_backend *be[MAX_BE] = {NULL, NULL};
    int n_be = 1;
    /* on CUDA, be[0] takes cuSPARSE's SpMM (SAGA_CUDA_SPMM=cusparse, unless set otherwise) */
    const bool chosen = getenv("SAGA_CUDA_SPMM") != NULL;
    if ((!chosen && setenv("SAGA_CUDA_SPMM", "cusparse", 1) != 0) ||
        saga_backend_open(&be[0], spec, NULL) < 0)
        return fail(spec);
    if (saga_backend_get_kind(be[0]) == SAGA_BACKEND_CUDA) {
        /* the same device with every product through saga's own kernel */
        if (setenv("SAGA_CUDA_SPMM", "own", 1) != 0 || saga_backend_open(&be[1], spec, NULL) < 0)
            return fail("a second backend (SAGA_CUDA_SPMM=own)");
        n_be = 2;
    }
    if (!chosen)
        unsetenv("SAGA_CUDA_SPMM");
    printf("device %s\n", saga_backend_name(be[0]));
    static const int64_t Fs[] = {16, 64, 128, 256};
    const int n_F = rp.scale <= 12 ? 2 : 4; /* small: a rehearsal */
    int rc = 0;
    if (budget) {
        /* a streamed part's X^T dH (2,048 rows of 128 features, 15 a row, H = 16), without and
         * under the budget, whose workspace share holds fewer partials at once */
        saga_backend_params bp = saga_backend_params_defaults();
        bp.budget_bytes = budget;
        saga_backend *bb = NULL;
        printf("a part's shape, without a budget:\n");
        rc = bench_features(be[0], 2048, 128, 15, Fs, 1);
        if (!rc && saga_backend_open(&bb, spec, &bp) < 0)
            rc = fail("a backend under the budget");
        if (!rc) {
            printf("a part's shape, under a budget of %zu bytes:\n", budget);
            rc = bench_features(bb, 2048, 128, 15, Fs, 1);
        }
        saga_backend_free_all(&bb);
    }
    /* Cora's vocabulary, a bag of about 20 words a row: the shape models ask for, first */
    if (!rc)
        rc = bench_features(be[0], (int64_t)1 << rp.scale, 1433, 20, Fs, n_F);
    if (!rc)
        rc = bench_graph(be, n_be, "rmat", &rp, Fs, n_F);
    if (!rc) {
        rp.a = rp.b = rp.c = 0.25;
        rc = bench_graph(be, n_be, "uniform", &rp, Fs, n_F);
    }
    for (int b = 0; b < n_be; b++)
        saga_backend_free_all(&be[b]);
    return rc;
}
