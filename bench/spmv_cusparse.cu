// spmv_cusparse.cu - saga's PageRank as a bare cuSPARSE loop: the practical limit that
// `saga pagerank --device cuda` is measured against in bench/gpu.sh.
//
//   spmv_cusparse FILE [--iters N] [--damping D] [--alg default|csr1|csr2] [--out FILE]
//
// FILE is read with libsaga (any format saga reads, typically an .sgr), so both programs see the
// same graph, and A^T is built as bench/pagerank_graphblas.c builds it: held by row (the
// in-edges of each vertex), one entry per distinct (source, destination) pair whose f64 value is
// the number of parallel edges between them. Each iteration is saga's definition
// (apps/pagerank.h), all on the GPU and without a host synchronisation:
//   t = x .* inv_outdeg, dangling = sum of x over the vertices without out-edges   (one kernel)
//   w = A^T t                                                         (cusparseSpMV, f64)
//   x' = (1-d)/N + d * (w + dangling/N), l1 = sum |x' - x|                           (one kernel)
// The scalars stay in device memory (one slot per iteration), so nothing waits for the host;
// exactly N iterations run (no convergence test). The setup (the buffer, cusparseSpMV_preprocess
// where the toolkit has it, one untimed iteration) is not timed; then x is reset to 1/N and the N
// iterations are timed with two cudaEvents.
//
// Prints "iterations=I seconds_per_iteration=S edges_per_second=E l1=L" on the last line of
// stdout, where E counts every edge of the graph (parallel ones included, as saga's edge count)
// per second of iteration; --out writes "id score" for every vertex in the order of saga's --out.
// Without a usable GPU, prints one line "no CUDA device: ..." and exits with 77.
#include "saga_graph.h"
#include "saga_io.h"

#include <cuda_runtime.h>
#include <cusparse.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

enum { BLOCK = 256, EXIT_SKIP = 77 };

// Exit with the failing call's text; a benchmark has nothing to recover.
#define CUDA_OK(call)                                                                              \
    do {                                                                                           \
        cudaError_t err_ = (call);                                                                 \
        if (err_ != cudaSuccess) {                                                                 \
            fprintf(stderr, "spmv_cusparse: %s failed: %s\n", #call, cudaGetErrorString(err_));    \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
#define CUSPARSE_OK(call)                                                                          \
    do {                                                                                           \
        cusparseStatus_t st_ = (call);                                                             \
        if (st_ != CUSPARSE_STATUS_SUCCESS) {                                                      \
            fprintf(stderr, "spmv_cusparse: %s failed: %s\n", #call, cusparseGetErrorString(st_)); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// calloc that exits on failure.
static void *xmalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fprintf(stderr, "spmv_cusparse: out of memory (%zu x %zu bytes)\n", n, size);
        exit(1);
    }
    return p;
}

[[noreturn]] static void usage(void) {
    fprintf(stderr, "usage: spmv_cusparse FILE [--iters N] [--damping D] "
                    "[--alg default|csr1|csr2] [--out FILE]\n");
    exit(2);
}

// The sum of v over the block, valid in thread 0.
static __device__ double block_sum(double v) {
    __shared__ double partial[BLOCK / 32];
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, off);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0)
        partial[warp] = v;
    __syncthreads();
    v = 0;
    if (warp == 0) {
        v = lane < BLOCK / 32 ? partial[lane] : 0.0;
        for (int off = 16; off > 0; off >>= 1)
            v += __shfl_down_sync(0xffffffffu, v, off);
    }
    return v;
}

// t = x .* inv_deg; *dangling += the sum of x where inv_deg is 0 (no out-edges).
static __global__ void scale_kernel(int64_t n, const double *__restrict__ x,
                                    const double *__restrict__ inv_deg, double *__restrict__ t,
                                    double *dangling) {
    double sum = 0;
    for (int64_t i = blockIdx.x * (int64_t)BLOCK + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * BLOCK) {
        const double xi = x[i], s = inv_deg[i];
        t[i] = xi * s;
        sum += s == 0.0 ? xi : 0.0;
    }
    sum = block_sum(sum);
    if (threadIdx.x == 0)
        atomicAdd(dangling, sum);
}

// xn = (1-d)/n + d * (w + dangling/n); *l1 += sum |xn - x|.
static __global__ void update_kernel(int64_t n, double d, double inv_n,
                                     const double *__restrict__ dangling,
                                     const double *__restrict__ w, const double *__restrict__ x,
                                     double *__restrict__ xn, double *l1) {
    const double base = (1.0 - d) * inv_n + d * *dangling * inv_n;
    double sum = 0;
    for (int64_t i = blockIdx.x * (int64_t)BLOCK + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * BLOCK) {
        const double v = base + d * w[i];
        sum += fabs(v - x[i]);
        xn[i] = v;
    }
    sum = block_sum(sum);
    if (threadIdx.x == 0)
        atomicAdd(l1, sum);
}

// A^T by row from saga's in-CSR (rows sorted, so parallel edges are adjacent): each run of equal
// sources becomes one entry holding its length. Fills *ap (n + 1), *aj and *ax (*nnz entries).
static void build_at(const saga_graph *g, int64_t **ap, int32_t **aj, double **ax, int64_t *nnz) {
    const saga_csr in = saga_graph_in(g);
    const int32_t n = in.n_rows;
    int64_t *p = (int64_t *)xmalloc((size_t)n + 1, sizeof *p);
    int32_t *j = (int32_t *)xmalloc((size_t)in.nnz, sizeof *j);
    double *x = (double *)xmalloc((size_t)in.nnz, sizeof *x);
    int64_t nz = 0;
    for (int32_t v = 0; v < n; v++) {
        p[v] = nz;
        for (int64_t k = in.offsets[v]; k < in.offsets[v + 1]; k++) {
            if (nz > p[v] && j[nz - 1] == in.indices[k]) {
                x[nz - 1] += 1.0;
            } else {
                j[nz] = in.indices[k];
                x[nz] = 1.0;
                nz++;
            }
        }
    }
    p[n] = nz;
    *ap = p, *aj = j, *ax = x, *nnz = nz;
}

// A device copy of n host elements of `size` bytes.
static void *to_device(const void *host, size_t n, size_t size) {
    void *d = nullptr;
    CUDA_OK(cudaMalloc(&d, n * size));
    CUDA_OK(cudaMemcpy(d, host, n * size, cudaMemcpyHostToDevice));
    return d;
}

int main(int argc, char **argv) {
    const char *path = nullptr, *out_path = nullptr, *alg_name = "default";
    double d = 0.85;
    long iters = 20;
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
        char *end = nullptr;
        errno = 0;
        if (!strcmp(a, "--iters"))
            iters = strtol(v, &end, 10);
        else if (!strcmp(a, "--damping"))
            d = strtod(v, &end);
        else if (!strcmp(a, "--alg"))
            alg_name = v, end = (char *)v + strlen(v);
        else if (!strcmp(a, "--out"))
            out_path = v, end = (char *)v + strlen(v);
        else
            usage();
        if (errno || !end || *end || end == v)
            usage();
    }
    cusparseSpMVAlg_t alg;
    if (!strcmp(alg_name, "default"))
        alg = CUSPARSE_SPMV_ALG_DEFAULT;
    else if (!strcmp(alg_name, "csr1"))
        alg = CUSPARSE_SPMV_CSR_ALG1;
    else if (!strcmp(alg_name, "csr2"))
        alg = CUSPARSE_SPMV_CSR_ALG2;
    else
        usage();
    if (!path || !(d >= 0 && d < 1) || iters < 1 || iters > 1000000)
        usage();

    // The device first: without one, say so before spending time on the graph.
    int n_devices = 0;
    cudaError_t err = cudaGetDeviceCount(&n_devices);
    if (err != cudaSuccess || n_devices == 0) {
        printf("no CUDA device: cudaGetDeviceCount: %s\n",
               err != cudaSuccess ? cudaGetErrorString(err) : "found none");
        return EXIT_SKIP;
    }
    CUDA_OK(cudaSetDevice(0));
    cudaDeviceProp prop;
    CUDA_OK(cudaGetDeviceProperties(&prop, 0));

    saga_graph *g = nullptr;
    double t_load = now();
    if (saga_graph_load(&g, path, nullptr) < 0) {
        fprintf(stderr, "spmv_cusparse: %s\n", saga_last_error());
        return 1;
    }
    t_load = now() - t_load;
    const int32_t n = saga_graph_n_vertices(g);
    const int64_t n_edges = saga_graph_n_edges(g);
    if (n <= 0) {
        fprintf(stderr, "spmv_cusparse: %s has no vertices\n", path);
        return 1;
    }

    // ---- A^T, 1/outdeg, vectors (untimed) ----
    double t_build = now();
    int64_t *ap = nullptr, nnz = 0;
    int32_t *aj = nullptr;
    double *ax = nullptr;
    build_at(g, &ap, &aj, &ax, &nnz);
    double *inv_deg = (double *)xmalloc((size_t)n, sizeof *inv_deg);
    {
        const saga_csr out = saga_graph_out(g);
        for (int32_t u = 0; u < n; u++) {
            const int64_t deg = out.offsets[u + 1] - out.offsets[u];
            inv_deg[u] = deg ? 1.0 / (double)deg : 0.0;
        }
    }
    // One index type for offsets and columns, as cuSPARSE's SpMV wants: 32-bit when nnz fits.
    const bool idx32 = nnz <= INT32_MAX;
    void *d_ap, *d_aj;
    if (idx32) {
        int32_t *p32 = (int32_t *)xmalloc((size_t)n + 1, sizeof *p32);
        for (int64_t v = 0; v <= n; v++)
            p32[v] = (int32_t)ap[v];
        d_ap = to_device(p32, (size_t)n + 1, sizeof *p32);
        d_aj = to_device(aj, (size_t)nnz, sizeof *aj);
        free(p32);
    } else {
        int64_t *j64 = (int64_t *)xmalloc((size_t)nnz, sizeof *j64);
        for (int64_t k = 0; k < nnz; k++)
            j64[k] = aj[k];
        d_ap = to_device(ap, (size_t)n + 1, sizeof *ap);
        d_aj = to_device(j64, (size_t)nnz, sizeof *j64);
        free(j64);
    }
    double *d_ax = (double *)to_device(ax, (size_t)nnz, sizeof *ax);
    double *d_inv_deg = (double *)to_device(inv_deg, (size_t)n, sizeof *inv_deg);
    free(ap);
    free(aj);
    free(ax);
    free(inv_deg);

    double *x0 = (double *)xmalloc((size_t)n, sizeof *x0);
    const double inv_n = 1.0 / (double)n;
    for (int32_t v = 0; v < n; v++)
        x0[v] = inv_n;
    double *d_x, *d_xn, *d_t, *d_w, *d_acc; // d_acc: dangling and l1 of each iteration
    CUDA_OK(cudaMalloc(&d_x, (size_t)n * sizeof(double)));
    CUDA_OK(cudaMalloc(&d_xn, (size_t)n * sizeof(double)));
    CUDA_OK(cudaMalloc(&d_t, (size_t)n * sizeof(double)));
    CUDA_OK(cudaMalloc(&d_w, (size_t)n * sizeof(double)));
    CUDA_OK(cudaMalloc(&d_acc, 2 * ((size_t)iters + 1) * sizeof(double)));

    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cusparseHandle_t h;
    CUSPARSE_OK(cusparseCreate(&h));
    CUSPARSE_OK(cusparseSetStream(h, s));
    const cusparseIndexType_t it = idx32 ? CUSPARSE_INDEX_32I : CUSPARSE_INDEX_64I;
    cusparseSpMatDescr_t A;
    cusparseDnVecDescr_t vt, vw;
    CUSPARSE_OK(cusparseCreateCsr(&A, n, n, nnz, d_ap, d_aj, d_ax, it, it, CUSPARSE_INDEX_BASE_ZERO,
                                  CUDA_R_64F));
    CUSPARSE_OK(cusparseCreateDnVec(&vt, n, d_t, CUDA_R_64F));
    CUSPARSE_OK(cusparseCreateDnVec(&vw, n, d_w, CUDA_R_64F));
    const double one = 1.0, zero = 0.0;
    size_t buf_bytes = 0;
    void *d_buf = nullptr;
    CUSPARSE_OK(cusparseSpMV_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, vt, &zero, vw,
                                        CUDA_R_64F, alg, &buf_bytes));
    if (buf_bytes)
        CUDA_OK(cudaMalloc(&d_buf, buf_bytes));
#if CUSPARSE_VERSION >= 12300 // cuSPARSE of CUDA 12.4 and later
    CUSPARSE_OK(cusparseSpMV_preprocess(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, vt, &zero, vw,
                                        CUDA_R_64F, alg, d_buf));
#endif
    const int grid = prop.multiProcessorCount * 8;

    // One iteration: scalars in acc[0] (dangling) and acc[1] (l1), x -> xn.
    auto iteration = [&](double *x, double *xn, double *acc) {
        scale_kernel<<<grid, BLOCK, 0, s>>>(n, x, d_inv_deg, d_t, acc);
        CUDA_OK(cudaGetLastError());
        CUSPARSE_OK(cusparseSpMV(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, A, vt, &zero, vw,
                                 CUDA_R_64F, alg, d_buf));
        update_kernel<<<grid, BLOCK, 0, s>>>(n, d, inv_n, acc, d_w, x, xn, acc + 1);
        CUDA_OK(cudaGetLastError());
    };
    CUDA_OK(cudaMemcpyAsync(d_x, x0, (size_t)n * sizeof(double), cudaMemcpyHostToDevice, s));
    CUDA_OK(cudaMemsetAsync(d_acc, 0, 2 * ((size_t)iters + 1) * sizeof(double), s));
    iteration(d_x, d_xn, d_acc + 2 * iters); // warm-up, in the spare last slot
    CUDA_OK(cudaMemcpyAsync(d_x, x0, (size_t)n * sizeof(double), cudaMemcpyHostToDevice, s));
    CUDA_OK(cudaStreamSynchronize(s));
    t_build = now() - t_build;

    // ---- iterate (timed) ----
    cudaEvent_t start, end;
    CUDA_OK(cudaEventCreate(&start));
    CUDA_OK(cudaEventCreate(&end));
    CUDA_OK(cudaEventRecord(start, s));
    for (long k = 0; k < iters; k++) {
        iteration(d_x, d_xn, d_acc + 2 * k);
        double *tmp = d_x;
        d_x = d_xn, d_xn = tmp;
    }
    CUDA_OK(cudaEventRecord(end, s));
    CUDA_OK(cudaEventSynchronize(end));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, start, end));
    const double seconds = (double)ms * 1e-3;

    // ---- report ----
    double l1 = 0;
    CUDA_OK(cudaMemcpy(&l1, d_acc + 2 * (iters - 1) + 1, sizeof l1, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(x0, d_x, (size_t)n * sizeof(double), cudaMemcpyDeviceToHost));
    double total = 0;
    for (int32_t v = 0; v < n; v++)
        total += x0[v];
    if (out_path) {
        FILE *f = fopen(out_path, "w");
        if (!f) {
            fprintf(stderr, "spmv_cusparse: cannot create '%s': %s\n", out_path, strerror(errno));
            return 1;
        }
        for (int32_t v = 0; v < n; v++)
            fprintf(f, "%lld %.17g\n", (long long)saga_graph_orig_id(g, v), x0[v]);
        if (fclose(f) != 0) {
            fprintf(stderr, "spmv_cusparse: %s: write failed\n", out_path);
            return 1;
        }
    }
    int cusparse_version = 0;
    CUSPARSE_OK(cusparseGetVersion(h, &cusparse_version));
    fprintf(stderr,
            "spmv_cusparse: %s, cuSPARSE %d, alg %s, %s indices; %d vertices, %lld edges (%lld "
            "distinct); load %.3f s, setup %.3f s; sum of scores %.15g\n",
            prop.name, cusparse_version, alg_name, idx32 ? "32-bit" : "64-bit", n,
            (long long)n_edges, (long long)nnz, t_load, t_build, total);
    printf("iterations=%ld seconds_per_iteration=%.9f edges_per_second=%.6g l1=%.6g "
           "seconds=%.6f\n",
           iters, seconds / (double)iters, (double)n_edges * (double)iters / seconds, l1, seconds);

    CUDA_OK(cudaEventDestroy(start));
    CUDA_OK(cudaEventDestroy(end));
    CUSPARSE_OK(cusparseDestroySpMat(A));
    CUSPARSE_OK(cusparseDestroyDnVec(vt));
    CUSPARSE_OK(cusparseDestroyDnVec(vw));
    CUSPARSE_OK(cusparseDestroy(h));
    CUDA_OK(cudaStreamDestroy(s));
    cudaFree(d_buf);
    cudaFree(d_ap);
    cudaFree(d_aj);
    cudaFree(d_ax);
    cudaFree(d_inv_deg);
    cudaFree(d_x);
    cudaFree(d_xn);
    cudaFree(d_t);
    cudaFree(d_w);
    cudaFree(d_acc);
    free(x0);
    saga_graph_free(&g);
    return 0;
}
