/* tensor_impl.h - the tensor struct, internal to saga (the ops layer and autograd read it). */
#pragma once

#include "saga_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

struct saga_tensor {
    saga_backend *be; /* owns data */
    saga_dtype dtype;
    int64_t rows;
    int64_t cols;
    size_t nbytes; /* rows * cols * saga_dtype_size(dtype) */
    void *data;    /* backend memory from saga_backend_alloc; NULL when nbytes == 0 */
};

#ifdef __cplusplus
}
#endif
