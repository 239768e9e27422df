/* saga_tensor.h - 2-D row-major contiguous tensors owned by a backend.
 *
 *   saga_tensor *x = NULL;
 *   SAGA_TRY(saga_tensor_new(&x, be, SAGA_F32, n_vertices, 16));     // zero-filled
 *   SAGA_TRY(saga_tensor_from_host(&y, be, SAGA_F64, n, 1, host_ptr)); // a copy
 *   SAGA_TRY(saga_tensor_to_host(y, out_ptr));                        // synchronous
 *   saga_tensor_free(&x);
 *
 * Vectors are n x 1. The data pointer is a device pointer on device backends.
 */
#pragma once

#include "saga_backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum saga_dtype { SAGA_F32 = 0, SAGA_F64, SAGA_I32, SAGA_I64, SAGA_DTYPE_COUNT } saga_dtype;

SAGA_API size_t saga_dtype_size(saga_dtype dt);
SAGA_API const char *saga_dtype_name(saga_dtype dt);

typedef struct saga_tensor saga_tensor;

/* New rows x cols tensor on be, filled with zeros. Caller owns it (saga_tensor_free). */
SAGA_API saga_status saga_tensor_new(saga_tensor **out, saga_backend *be, saga_dtype dt,
                                     int64_t rows, int64_t cols);
/* New tensor holding a copy of rows*cols elements read from host memory. */
SAGA_API saga_status saga_tensor_from_host(saga_tensor **out, saga_backend *be, saga_dtype dt,
                                           int64_t rows, int64_t cols, const void *host);
/* Copies the whole tensor to host memory (nbytes of room), waiting for pending work. */
SAGA_API saga_status saga_tensor_to_host(const saga_tensor *t, void *host);
/* Frees *t and sets it to NULL; accepts NULL. */
SAGA_API void saga_tensor_free(saga_tensor **t);

SAGA_API int64_t saga_tensor_rows(const saga_tensor *t);
SAGA_API int64_t saga_tensor_cols(const saga_tensor *t);
SAGA_API saga_dtype saga_tensor_dtype(const saga_tensor *t);
SAGA_API size_t saga_tensor_nbytes(const saga_tensor *t);
SAGA_API void *saga_tensor_data(saga_tensor *t);
SAGA_API const void *saga_tensor_cdata(const saga_tensor *t);
SAGA_API saga_backend *saga_tensor_backend(const saga_tensor *t);

#ifdef __cplusplus
}
#endif
