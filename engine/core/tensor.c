/* tensor.c - 2-D row-major tensors in a backend's memory: creation, host copies, accessors. */
#include "tensor_impl.h"

#include "backend_impl.h"

size_t saga_dtype_size(saga_dtype dt) {
    switch (dt) {
    case SAGA_F32:
        return 4;
    case SAGA_F64:
        return 8;
    case SAGA_I32:
        return 4;
    case SAGA_I64:
        return 8;
    default:
        return 0;
    }
}

const char *saga_dtype_name(saga_dtype dt) {
    switch (dt) {
    case SAGA_F32:
        return "f32";
    case SAGA_F64:
        return "f64";
    case SAGA_I32:
        return "i32";
    case SAGA_I64:
        return "i64";
    default:
        return "unknown";
    }
}

saga_status saga_tensor_check_shape(saga_dtype dt, int64_t rows, int64_t cols) {
    saga_status st = SAGA_OK;
    SAGA_CHECK((unsigned)dt < SAGA_DTYPE_COUNT, SAGA_ERR_INVALID_ARG, "tensor: unknown dtype %d",
               (int)dt);
    SAGA_CHECK(rows >= 0 && cols >= 0, SAGA_ERR_INVALID_ARG,
               "tensor: dimensions must be >= 0, got %lld x %lld", (long long)rows,
               (long long)cols);
    size_t esize = saga_dtype_size(dt);
    SAGA_CHECK(cols == 0 || (uint64_t)rows <= SIZE_MAX / esize / (uint64_t)cols,
               SAGA_ERR_INVALID_ARG, "tensor: %lld x %lld %s elements overflow the address space",
               (long long)rows, (long long)cols, saga_dtype_name(dt));
fail:
    return st;
}

/* Runs the deferred product that has not yet written t's data, if any. */
static void flush_lazy(const saga_tensor *t) {
    if (t->lazy)
        t->lazy_flush(t->lazy);
}

/* A tensor struct with its memory allocated but not initialised. */
static saga_status tensor_alloc(saga_tensor **out, saga_backend *be, saga_dtype dt, int64_t rows,
                                int64_t cols) {
    saga_status st = SAGA_OK;
    saga_tensor *t = NULL;
    SAGA_CHECK(be, SAGA_ERR_INVALID_ARG, "tensor: backend is NULL");
    SAGA_TRY(saga_tensor_check_shape(dt, rows, cols));
    size_t esize = saga_dtype_size(dt);
    SAGA_TRY(saga_alloc_zeroed((void **)&t, 1, sizeof *t, "a tensor"));
    t->be = be;
    t->dtype = dt;
    t->rows = rows;
    t->cols = cols;
    t->nbytes = (size_t)rows * (size_t)cols * esize;
    SAGA_TRY(saga_backend_alloc(be, &t->data, t->nbytes));
    *out = t;
    return SAGA_OK;
fail:
    saga_free(t);
    return st;
}

saga_status saga_tensor_new(saga_tensor **out, saga_backend *be, saga_dtype dt, int64_t rows,
                            int64_t cols) {
    saga_status st = SAGA_OK;
    saga_tensor *t = NULL;
    SAGA_CHECK(out, SAGA_ERR_INVALID_ARG, "saga_tensor_new: out is NULL");
    SAGA_CHECK(!be || be->iface->memset_async, SAGA_ERR_UNSUPPORTED,
               "saga_tensor_new: backend %s cannot zero-fill memory", be ? be->name : "");
    SAGA_TRY(tensor_alloc(&t, be, dt, rows, cols));
    /* Queued on the default stream: work issued there later sees the zeros; other streams must
     * order themselves after it with an event, as for any other work. */
    if (t->nbytes)
        SAGA_TRY(be->iface->memset_async(&be->default_stream, t->data, 0, t->nbytes));
    *out = t;
    return SAGA_OK;
fail:
    saga_tensor_free(&t);
    return st;
}

saga_status saga_tensor_from_host(saga_tensor **out, saga_backend *be, saga_dtype dt, int64_t rows,
                                  int64_t cols, const void *host) {
    saga_status st = SAGA_OK;
    saga_tensor *t = NULL;
    SAGA_CHECK(out, SAGA_ERR_INVALID_ARG, "saga_tensor_from_host: out is NULL");
    SAGA_TRY(tensor_alloc(&t, be, dt, rows, cols));
    SAGA_CHECK(host || t->nbytes == 0, SAGA_ERR_INVALID_ARG,
               "saga_tensor_from_host: host data is NULL");
    if (t->nbytes) {
        saga_stream *s = saga_backend_default_stream(be);
        SAGA_TRY(saga_memcpy_h2d_async(s, t->data, host, t->nbytes));
        /* the caller may reuse host as soon as we return */
        SAGA_TRY(saga_stream_synchronize(s));
    }
    *out = t;
    return SAGA_OK;
fail:
    saga_tensor_free(&t);
    return st;
}

saga_status saga_tensor_to_host(const saga_tensor *t, void *host) {
    saga_status st = SAGA_OK;
    SAGA_CHECK(t, SAGA_ERR_INVALID_ARG, "saga_tensor_to_host: tensor is NULL");
    if (t->nbytes == 0)
        return SAGA_OK;
    SAGA_CHECK(host, SAGA_ERR_INVALID_ARG, "saga_tensor_to_host: host buffer is NULL");
    /* pending work on any stream may still write the tensor */
    flush_lazy(t);
    SAGA_TRY(saga_backend_synchronize(t->be));
    saga_stream *s = saga_backend_default_stream(t->be);
    SAGA_TRY(saga_memcpy_d2h_async(s, host, t->data, t->nbytes));
    SAGA_TRY(saga_stream_synchronize(s));
fail:
    return st;
}

void saga_tensor_free(saga_tensor **tp) {
    if (!tp || !*tp)
        return;
    saga_tensor *t = *tp;
    /* a context-owned tensor's gradient comes from the context's cache and goes back there; a
     * user tensor's or parameter's gradient is a plain tensor */
    if (!t->owner)
        saga_tensor_free(&t->grad);
    saga_backend_free(t->be, t->data, t->nbytes);
    saga_free(t);
    *tp = NULL;
}

int64_t saga_tensor_rows(const saga_tensor *t) {
    return t->rows;
}
int64_t saga_tensor_cols(const saga_tensor *t) {
    return t->cols;
}
saga_dtype saga_tensor_dtype(const saga_tensor *t) {
    return t->dtype;
}
size_t saga_tensor_nbytes(const saga_tensor *t) {
    return t->nbytes;
}
void *saga_tensor_data(saga_tensor *t) {
    flush_lazy(t);
    return t->data;
}
const void *saga_tensor_cdata(const saga_tensor *t) {
    flush_lazy(t);
    return t->data;
}
saga_backend *saga_tensor_backend(const saga_tensor *t) {
    return t->be;
}
