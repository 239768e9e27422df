/* backend_impl.h - what a backend implements: the function table behind saga_backend.h and the
 * kernel table. Internal to saga (and to the CUDA module, which is built with it). */
#pragma once

#include "saga_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A CSR matrix whose arrays live in a backend's memory. Row i holds columns
 * indices[offsets[i] .. offsets[i+1]); values == NULL means every stored value is 1. */
typedef struct saga_csr_dev {
    int64_t n_rows;
    int64_t n_cols;
    int64_t nnz;
    const int64_t *offsets;
    const int32_t *indices;
    const float *values;
} saga_csr_dev;

/* Kernels, all asynchronous on a stream unless they return a host scalar. Pointers are the
 * backend's memory. Shape checks happen in the callers (ops layer), once for every backend.
 * The table only grows: new slots are appended and `version` goes up. */
typedef struct saga_kernels {
    int version;
    /* x[0..n) = v */
    saga_status (*fill_f64)(saga_stream *s, double *x, int64_t n, double v);
    /* y = a*x + b*y (x may be y; b == 0 does not read y) */
    saga_status (*axpby_f64)(saga_stream *s, int64_t n, double a, const double *x, double b,
                             double *y);
    /* z = x .* y (z may alias x or y) */
    saga_status (*mul_f64)(saga_stream *s, int64_t n, const double *x, const double *y, double *z);
    /* x += c */
    saga_status (*add_scalar_f64)(saga_stream *s, int64_t n, double c, double *x);
    /* y = alpha * A x + beta * y; x has A->n_cols entries, y has A->n_rows */
    saga_status (*spmv_f64)(saga_stream *s, const saga_csr_dev *A, double alpha, const double *x,
                            double beta, double *y);
    /* *out = sum x .* y, written to host memory once the stream has reached it (synchronous) */
    saga_status (*dot_f64)(saga_stream *s, int64_t n, const double *x, const double *y,
                           double *out);
    /* *out = sum |x - y| (synchronous) */
    saga_status (*l1_diff_f64)(saga_stream *s, int64_t n, const double *x, const double *y,
                               double *out);

} saga_kernels;

typedef enum saga_copy_kind {
    SAGA_COPY_H2D = 0,
    SAGA_COPY_D2H,
    SAGA_COPY_D2D,
    SAGA_COPY_KIND_COUNT
} saga_copy_kind;

/* The function table. Slots marked optional may be NULL. The generic layer calls alloc and free
 * with the backend's accounting lock held, so they need no locking of their own. */
typedef struct saga_backend_iface {
    int version;
    void (*destroy)(saga_backend *be); /* frees be->ctx and whatever it holds */
    saga_status (*alloc)(saga_backend *be, void **out, size_t bytes);
    void (*free)(saga_backend *be, void *ptr, size_t bytes);
    saga_status (*host_alloc)(saga_backend *be, void **out, size_t bytes);
    void (*host_free)(saga_backend *be, void *ptr, size_t bytes);
    saga_status (*stream_new)(saga_backend *be, saga_stream *s); /* fills s->impl */
    void (*stream_free)(saga_stream *s);
    saga_status (*stream_sync)(saga_stream *s);
    saga_status (*stream_wait_event)(saga_stream *s, saga_event *e);
    saga_status (*event_new)(saga_backend *be, saga_event *e); /* fills e->impl */
    void (*event_free)(saga_event *e);
    saga_status (*event_record)(saga_event *e, saga_stream *s);
    saga_status (*event_sync)(saga_event *e);
    bool (*event_query)(saga_event *e);
    saga_status (*memcpy_async)(saga_stream *s, void *dst, const void *src, size_t n,
                                saga_copy_kind kind);
    saga_status (*synchronize)(saga_backend *be);
    /* optional: dst[0..n) = (unsigned char)value, queued on s; NULL means the tensor layer
     * cannot zero-fill on this backend */
    saga_status (*memset_async)(saga_stream *s, void *dst, int value, size_t n);
} saga_backend_iface;

struct saga_stream {
    saga_backend *be;
    void *impl;
};

struct saga_event {
    saga_backend *be;
    void *impl;
};

struct saga_backend {
    const saga_backend_iface *iface;
    const saga_kernels *kernels;
    void *ctx;
    saga_backend_kind kind;
    saga_backend_params params;
    char name[128];
    size_t device_total;
    saga_stream default_stream;
    /* accounting, updated under `lock` (copies may be issued from several threads) */
    void *lock;
    size_t in_use;
    size_t peak;
    uint64_t h2d_bytes;
    uint64_t d2h_bytes;
    uint64_t n_allocs;
    void *module; /* dlopen handle of the CUDA module, closed after destroy */
};

/* The few services the CUDA module takes from libsaga, passed in explicitly so the module need
 * not link libsaga (and so the thread-local error message is the caller's one). */
typedef struct saga_module_host {
    int version;
    saga_status (*error)(saga_status st, const char *fmt, ...);
    void (*log)(int level, const char *fmt, ...);
} saga_module_host;

/* Entry point the CUDA module exports: fills be->iface, kernels, ctx, name, device_total. */
typedef saga_status (*saga_cuda_module_init_fn)(saga_backend *be, int device,
                                                const saga_module_host *host);
#define SAGA_CUDA_MODULE_INIT "saga_cuda_module_init"
#define SAGA_CUDA_MODULE_NAME "libsaga_cuda.so"

/* The CPU kernel table (ops/cpu), used by the CPU backend. */
extern const saga_kernels saga_cpu_kernels;

/* Fills a freshly zeroed backend with the CPU table, kernels, context, name and device_total
 * (ops/cpu/backend_cpu.c); the generic layer then creates the default stream. */
saga_status saga_cpu_backend_init(saga_backend *be);

#ifdef __cplusplus
}
#endif
