/* bench_gemm.c - the CPU backend's gemm_f32 kernel (OpenBLAS SGEMM): the machine's peak on square
 * products, and the rate at the shapes of the HEP Interaction Network's training step.
 *
 *   bench_gemm [HIDDEN [EDGES [THREADS...]]]   defaults: 64 20000 1 2
 *
 * For each thread count prints GFLOP/s (2 M N K over the best time of at least 5 calls and 1 s,
 * after one untimed call) for C = A B at M = N = K = 2048 (the peak a large product reaches),
 * and at the step's shapes with H = HIDDEN and E = EDGES rows: the round's MLP on the edges
 * forward (E x 3H times 3H x H, then E x H times H x H), its input gradient (E x H times H x 3H,
 * B transposed) and its weight gradient (3H x E times E x H, A transposed). `saga hep train`
 * reports its epoch's GFLOP/s of matrix products; these are the rates those products can reach
 * here.
 */
#include "backend_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MIN_REPS = 5 };
static const double MIN_SECONDS = 1.0;

typedef struct shape {
    const char *what;
    bool ta, tb;
    int64_t M, N, K;
} shape;

static int fail(const char *what) {
    fprintf(stderr, "bench_gemm: %s: %s\n", what, saga_last_error());
    return 1;
}

/* Times one product; returns nonzero on error. */
static int run(saga_backend *be, const shape *s, int n_threads) {
    size_t a_n = (size_t)(s->M * s->K), b_n = (size_t)(s->K * s->N), c_n = (size_t)(s->M * s->N);
    float *A = malloc(a_n * sizeof *A), *B = malloc(b_n * sizeof *B), *C = malloc(c_n * sizeof *C);
    int rc = 0;
    if (!A || !B || !C) {
        fprintf(stderr, "bench_gemm: out of memory\n");
        rc = 1;
        goto done;
    }
    for (size_t i = 0; i < a_n; i++)
        A[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
    for (size_t i = 0; i < b_n; i++)
        B[i] = (float)((i * 40503u) % 1000) * 1e-3f - 0.5f;
    memset(C, 0, c_n * sizeof *C);
    /* row-major: op(A) is M x K, stored K x M when transposed; likewise B */
    int64_t lda = s->ta ? s->M : s->K, ldb = s->tb ? s->K : s->N;
    saga_stream *st = saga_backend_default_stream(be);
    const saga_kernels *k = be->kernels;
    if (k->gemm_f32(st, s->ta, s->tb, s->M, s->N, s->K, 1.0f, A, lda, B, ldb, 0.0f, C, s->N) <
        0) {
        rc = fail("gemm_f32");
        goto done;
    }
    double best = 1e30, total = 0;
    int reps = 0;
    while (reps < MIN_REPS || total < MIN_SECONDS) {
        double t0 = saga_now();
        k->gemm_f32(st, s->ta, s->tb, s->M, s->N, s->K, 1.0f, A, lda, B, ldb, 0.0f, C, s->N);
        double dt = saga_now() - t0;
        best = dt < best ? dt : best;
        total += dt;
        reps++;
    }
    double flop = 2.0 * (double)s->M * (double)s->N * (double)s->K;
    printf("threads=%d  %-34s M=%-6lld N=%-5lld K=%-6lld  best %8.3f ms  %7.1f GFLOP/s\n",
           n_threads, s->what, (long long)s->M, (long long)s->N, (long long)s->K, best * 1e3,
           flop / best * 1e-9);
    fflush(stdout);
done:
    free(A);
    free(B);
    free(C);
    return rc;
}

int main(int argc, char **argv) {
    int64_t H = argc > 1 ? atoll(argv[1]) : 64, E = argc > 2 ? atoll(argv[2]) : 20000;
    if (H < 1 || E < 1) {
        fprintf(stderr, "usage: bench_gemm [HIDDEN [EDGES [THREADS...]]]\n");
        return 2;
    }
    int threads[16] = {1, 2}, n_threads = 2;
    if (argc > 3) {
        n_threads = 0;
        for (int i = 3; i < argc && n_threads < 16; i++)
            threads[n_threads++] = atoi(argv[i]);
    }
    const shape shapes[] = {
        {"square (peak)", false, false, 2048, 2048, 2048},
        {"edge MLP layer 1, forward", false, false, E, H, 3 * H},
        {"edge MLP layer 2, forward", false, false, E, H, H},
        {"edge MLP layer 1, input gradient", false, true, E, 3 * H, H},
        {"edge MLP layer 1, weight gradient", true, false, 3 * H, H, E},
    };
    for (int t = 0; t < n_threads; t++) {
        saga_backend_params p = saga_backend_params_defaults();
        p.n_threads = threads[t];
        saga_backend *be = NULL;
        if (saga_backend_cpu_new(&be, &p) < 0)
            return fail("backend");
        for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
            if (run(be, &shapes[i], threads[t])) {
                saga_backend_free_all(&be);
                return 1;
            }
        saga_backend_free_all(&be);
    }
    return 0;
}
