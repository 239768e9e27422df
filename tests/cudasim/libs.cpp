// libs.cpp - the CUDA simulator's stand-ins for cuBLAS and cuSPARSE: the calls saga makes, with
// the libraries' argument checks and status codes, and plain reference arithmetic queued on the
// handle's stream. Pointers that a GPU library would dereference must be device memory: anything
// else stops the program with a diagnostic (on a GPU it would fault, or read garbage).
#include "cudasim_internal.h"

#include <cublas_v2.h>
#include <cusparse.h>

#include <algorithm>
#include <new>
#include <vector>

using cudasim::fatal;
using cudasim::is_device_range;

// ---- cuBLAS -------------------------------------------------------------------------------------

struct cublasContext {
    cudaStream_t stream = nullptr;
    cublasMath_t math = CUBLAS_DEFAULT_MATH;
    void *workspace = nullptr;
    size_t workspace_bytes = 0;
};

cublasStatus_t cublasCreate(cublasHandle_t *handle) {
    if (!handle)
        return CUBLAS_STATUS_INVALID_VALUE;
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        cudaGetLastError();
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    *handle = new (std::nothrow) cublasContext();
    return *handle ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->stream = stream;
    // cuBLAS drops a user workspace when the stream changes: it must be set again for the next one.
    handle->workspace = nullptr;
    handle->workspace_bytes = 0;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (mode != CUBLAS_DEFAULT_MATH && mode != CUBLAS_TENSOR_OP_MATH &&
        mode != CUBLAS_PEDANTIC_MATH && mode != CUBLAS_TF32_TENSOR_OP_MATH)
        return CUBLAS_STATUS_INVALID_VALUE;
    handle->math = mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void *workspace, size_t bytes) {
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if ((workspace == nullptr) != (bytes == 0))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (((uintptr_t)workspace & 255) != 0)
        return CUBLAS_STATUS_INVALID_VALUE; // cuBLAS wants 256-byte alignment
    if (workspace && !is_device_range(workspace, bytes))
        fatal("cublasSetWorkspace: %zu bytes at %p are not device memory", bytes, workspace);
    handle->workspace = workspace;
    handle->workspace_bytes = bytes;
    return CUBLAS_STATUS_SUCCESS;
}

// Elements a column-major rows x cols matrix with leading dimension ld spans.
static size_t span(int rows, int cols, int ld) {
    return rows == 0 || cols == 0 ? 0 : (size_t)ld * (size_t)(cols - 1) + (size_t)rows;
}

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const float *alpha,
                           const float *A, int lda, const float *B, int ldb, const float *beta,
                           float *C, int ldc) {
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if ((transa != CUBLAS_OP_N && transa != CUBLAS_OP_T && transa != CUBLAS_OP_C) ||
        (transb != CUBLAS_OP_N && transb != CUBLAS_OP_T && transb != CUBLAS_OP_C))
        return CUBLAS_STATUS_INVALID_VALUE;
    const bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;
    const int a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
    if (m < 0 || n < 0 || k < 0 || lda < std::max(1, a_rows) || ldb < std::max(1, b_rows) ||
        ldc < std::max(1, m) || !alpha || !beta)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0)
        return CUBLAS_STATUS_SUCCESS;
    const float al = *alpha, be = *beta; // pointer mode host: read at the call
    const bool product = k > 0 && al != 0.0f;
    if (product && !is_device_range(A, span(a_rows, a_cols, lda) * sizeof(float)))
        fatal("cublasSgemm: A (%d x %d, lda %d) at %p is not device memory", a_rows, a_cols, lda,
              (const void *)A);
    if (product && !is_device_range(B, span(b_rows, b_cols, ldb) * sizeof(float)))
        fatal("cublasSgemm: B (%d x %d, ldb %d) at %p is not device memory", b_rows, b_cols, ldb,
              (const void *)B);
    if (!is_device_range(C, span(m, n, ldc) * sizeof(float)))
        fatal("cublasSgemm: C (%d x %d, ldc %d) at %p is not device memory", m, n, ldc, (void *)C);
    cudaError_t e = cudasim::enqueue(handle->stream, [=] {
        std::vector<float> acc((size_t)m);
        for (int j = 0; j < n; j++) {
            std::fill(acc.begin(), acc.end(), 0.0f);
            if (product) {
                for (int l = 0; l < k; l++) {
                    const float b = tb ? B[j + (size_t)l * ldb] : B[l + (size_t)j * ldb];
                    if (!ta) {
                        const float *a = A + (size_t)l * lda;
                        for (int i = 0; i < m; i++)
                            acc[(size_t)i] += a[i] * b;
                    } else {
                        for (int i = 0; i < m; i++)
                            acc[(size_t)i] += A[l + (size_t)i * lda] * b;
                    }
                }
            }
            float *c = C + (size_t)j * ldc;
            for (int i = 0; i < m; i++)
                c[i] = be == 0.0f ? al * acc[(size_t)i] : al * acc[(size_t)i] + be * c[i];
        }
    });
    return e == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

const char *cublasGetStatusName(cublasStatus_t status) {
    switch (status) {
    case CUBLAS_STATUS_SUCCESS:
        return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
        return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
        return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
        return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
        return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
        return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
        return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
        return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
        return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR:
        return "CUBLAS_STATUS_LICENSE_ERROR";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

const char *cublasGetStatusString(cublasStatus_t status) {
    switch (status) {
    case CUBLAS_STATUS_SUCCESS:
        return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED:
        return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED:
        return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE:
        return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_EXECUTION_FAILED:
        return "the GPU program failed to execute";
    case CUBLAS_STATUS_NOT_SUPPORTED:
        return "the functionality requested is not supported";
    default:
        return "an internal operation failed";
    }
}

// ---- cuSPARSE -----------------------------------------------------------------------------------

struct cusparseContext {
    cudaStream_t stream = nullptr;
};

struct cusparseSpMatDescr {
    int64_t rows, cols, nnz;
    void *offsets, *columns, *values;
    cusparseIndexType_t offset_type, col_type;
    cusparseIndexBase_t base;
    cudaDataType value_type;
};

struct cusparseDnMatDescr {
    int64_t rows, cols, ld;
    void *values;
    cudaDataType value_type;
    cusparseOrder_t order;
};

cusparseStatus_t cusparseCreate(cusparseHandle_t *handle) {
    if (!handle)
        return CUSPARSE_STATUS_INVALID_VALUE;
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        cudaGetLastError();
        return CUSPARSE_STATUS_NOT_INITIALIZED;
    }
    *handle = new (std::nothrow) cusparseContext();
    return *handle ? CUSPARSE_STATUS_SUCCESS : CUSPARSE_STATUS_ALLOC_FAILED;
}

cusparseStatus_t cusparseDestroy(cusparseHandle_t handle) {
    if (!handle)
        return CUSPARSE_STATUS_NOT_INITIALIZED;
    delete handle;
    return CUSPARSE_STATUS_SUCCESS;
}

cusparseStatus_t cusparseSetStream(cusparseHandle_t handle, cudaStream_t stream) {
    if (!handle)
        return CUSPARSE_STATUS_NOT_INITIALIZED;
    handle->stream = stream;
    return CUSPARSE_STATUS_SUCCESS;
}

cusparseStatus_t cusparseCreateCsr(cusparseSpMatDescr_t *descr, int64_t rows, int64_t cols,
                                   int64_t nnz, void *offsets, void *columns, void *values,
                                   cusparseIndexType_t offset_type, cusparseIndexType_t col_type,
                                   cusparseIndexBase_t base, cudaDataType value_type) {
    if (!descr || rows < 0 || cols < 0 || nnz < 0 || (nnz > 0 && (!columns || !values)) ||
        (rows > 0 && !offsets))
        return CUSPARSE_STATUS_INVALID_VALUE;
    if ((offset_type != CUSPARSE_INDEX_32I && offset_type != CUSPARSE_INDEX_64I) ||
        (col_type != CUSPARSE_INDEX_32I && col_type != CUSPARSE_INDEX_64I) ||
        (base != CUSPARSE_INDEX_BASE_ZERO && base != CUSPARSE_INDEX_BASE_ONE))
        return CUSPARSE_STATUS_INVALID_VALUE;
    *descr = new (std::nothrow) cusparseSpMatDescr{
        rows, cols, nnz, offsets, columns, values, offset_type, col_type, base, value_type};
    return *descr ? CUSPARSE_STATUS_SUCCESS : CUSPARSE_STATUS_ALLOC_FAILED;
}

cusparseStatus_t cusparseCsrSetPointers(cusparseSpMatDescr_t descr, void *offsets, void *columns,
                                        void *values) {
    if (!descr || !offsets || (descr->nnz > 0 && (!columns || !values)))
        return CUSPARSE_STATUS_INVALID_VALUE;
    descr->offsets = offsets;
    descr->columns = columns;
    descr->values = values;
    return CUSPARSE_STATUS_SUCCESS;
}

cusparseStatus_t cusparseDestroySpMat(cusparseSpMatDescr_t descr) {
    delete descr;
    return CUSPARSE_STATUS_SUCCESS;
}

cusparseStatus_t cusparseCreateDnMat(cusparseDnMatDescr_t *descr, int64_t rows, int64_t cols,
                                     int64_t ld, void *values, cudaDataType value_type,
                                     cusparseOrder_t order) {
    if (!descr || rows < 0 || cols < 0 ||
        (order != CUSPARSE_ORDER_ROW && order != CUSPARSE_ORDER_COL))
        return CUSPARSE_STATUS_INVALID_VALUE;
    if (ld < (order == CUSPARSE_ORDER_ROW ? cols : rows))
        return CUSPARSE_STATUS_INVALID_VALUE;
    *descr = new (std::nothrow) cusparseDnMatDescr{rows, cols, ld, values, value_type, order};
    return *descr ? CUSPARSE_STATUS_SUCCESS : CUSPARSE_STATUS_ALLOC_FAILED;
}

cusparseStatus_t cusparseDestroyDnMat(cusparseDnMatDescr_t descr) {
    delete descr;
    return CUSPARSE_STATUS_SUCCESS;
}

cusparseStatus_t cusparseDnMatSetValues(cusparseDnMatDescr_t descr, void *values) {
    if (!descr || !values)
        return CUSPARSE_STATUS_INVALID_VALUE;
    descr->values = values;
    return CUSPARSE_STATUS_SUCCESS;
}

// What the stand-in implements: C = alpha A B + beta C, A CSR with 32-bit indices from zero, f32
// throughout, B and C row-major, no transposes. Shapes that do not agree are invalid values;
// anything else is not supported.
static cusparseStatus_t spmm_check(cusparseHandle_t handle, cusparseOperation_t op_a,
                                   cusparseOperation_t op_b, const void *alpha,
                                   cusparseSpMatDescr_t A, cusparseDnMatDescr_t B, const void *beta,
                                   cusparseDnMatDescr_t C, cudaDataType compute_type,
                                   cusparseSpMMAlg_t alg) {
    if (!handle)
        return CUSPARSE_STATUS_NOT_INITIALIZED;
    if (!alpha || !beta || !A || !B || !C)
        return CUSPARSE_STATUS_INVALID_VALUE;
    if (A->rows != C->rows || A->cols != B->rows || B->cols != C->cols)
        return CUSPARSE_STATUS_INVALID_VALUE;
    if (op_a != CUSPARSE_OPERATION_NON_TRANSPOSE || op_b != CUSPARSE_OPERATION_NON_TRANSPOSE ||
        A->offset_type != CUSPARSE_INDEX_32I || A->col_type != CUSPARSE_INDEX_32I ||
        A->base != CUSPARSE_INDEX_BASE_ZERO || A->value_type != CUDA_R_32F ||
        B->value_type != CUDA_R_32F || C->value_type != CUDA_R_32F || compute_type != CUDA_R_32F ||
        B->order != CUSPARSE_ORDER_ROW || C->order != CUSPARSE_ORDER_ROW ||
        (alg != CUSPARSE_SPMM_ALG_DEFAULT && alg != CUSPARSE_SPMM_CSR_ALG1 &&
         alg != CUSPARSE_SPMM_CSR_ALG2))
        return CUSPARSE_STATUS_NOT_SUPPORTED;
    return CUSPARSE_STATUS_SUCCESS;
}

static size_t spmm_buffer_bytes(cusparseSpMatDescr_t A) {
    // Some workspace, proportional to the rows as CSR_ALG2's is, so that callers must size and
    // pass it.
    return ((size_t)(A->rows + 1) * sizeof(int32_t) + 255) / 256 * 256;
}

cusparseStatus_t cusparseSpMM_bufferSize(cusparseHandle_t handle, cusparseOperation_t op_a,
                                         cusparseOperation_t op_b, const void *alpha,
                                         cusparseSpMatDescr_t A, cusparseDnMatDescr_t B,
                                         const void *beta, cusparseDnMatDescr_t C,
                                         cudaDataType compute_type, cusparseSpMMAlg_t alg,
                                         size_t *bytes) {
    if (!bytes)
        return CUSPARSE_STATUS_INVALID_VALUE;
    cusparseStatus_t st = spmm_check(handle, op_a, op_b, alpha, A, B, beta, C, compute_type, alg);
    if (st != CUSPARSE_STATUS_SUCCESS)
        return st;
    *bytes = spmm_buffer_bytes(A);
    return CUSPARSE_STATUS_SUCCESS;
}

cusparseStatus_t cusparseSpMM(cusparseHandle_t handle, cusparseOperation_t op_a,
                              cusparseOperation_t op_b, const void *alpha, cusparseSpMatDescr_t A,
                              cusparseDnMatDescr_t B, const void *beta, cusparseDnMatDescr_t C,
                              cudaDataType compute_type, cusparseSpMMAlg_t alg,
                              void *external_buffer) {
    cusparseStatus_t st = spmm_check(handle, op_a, op_b, alpha, A, B, beta, C, compute_type, alg);
    if (st != CUSPARSE_STATUS_SUCCESS)
        return st;
    const int64_t rows = A->rows, cols = A->cols, nnz = A->nnz, F = B->cols;
    const size_t need = spmm_buffer_bytes(A);
    if (!external_buffer || !is_device_range(external_buffer, need))
        fatal("cusparseSpMM: the external buffer %p does not hold the %zu bytes "
              "cusparseSpMM_bufferSize asked for",
              external_buffer, need);
    const int32_t *off = static_cast<const int32_t *>(A->offsets);
    const int32_t *col = static_cast<const int32_t *>(A->columns);
    const float *val = static_cast<const float *>(A->values);
    const float *X = static_cast<const float *>(B->values);
    float *Y = static_cast<float *>(C->values);
    if (!is_device_range(off, (size_t)(rows + 1) * 4) ||
        (nnz > 0 &&
         (!is_device_range(col, (size_t)nnz * 4) || !is_device_range(val, (size_t)nnz * 4))))
        fatal("cusparseSpMM: the CSR arrays of a %lld x %lld matrix with %lld entries are not "
              "device memory",
              (long long)rows, (long long)cols, (long long)nnz);
    if (F > 0 && ((cols > 0 && !is_device_range(X, ((size_t)(cols - 1) * B->ld + F) * 4)) ||
                  (rows > 0 && !is_device_range(Y, ((size_t)(rows - 1) * C->ld + F) * 4))))
        fatal("cusparseSpMM: the dense matrices (%lld and %lld rows of %lld) are not device "
              "memory",
              (long long)cols, (long long)rows, (long long)F);
    const float al = *static_cast<const float *>(alpha), be = *static_cast<const float *>(beta);
    const int64_t ldx = B->ld, ldy = C->ld;
    cudaError_t e = cudasim::enqueue(handle->stream, [=] {
        // What the GPU reads is checked when it reads it: offsets from 0 to nnz, nondecreasing,
        // column indices inside the matrix (a GPU would read out of bounds or fault).
        if (rows > 0 && (off[0] != 0 || off[rows] != nnz))
            fatal("cusparseSpMM: CSR offsets run from %d to %d, not from 0 to nnz = %lld", off[0],
                  off[rows], (long long)nnz);
        std::vector<float> acc((size_t)F);
        for (int64_t i = 0; i < rows; i++) {
            if (off[i + 1] < off[i])
                fatal("cusparseSpMM: CSR offsets decrease at row %lld", (long long)i);
            std::fill(acc.begin(), acc.end(), 0.0f);
            for (int64_t p = off[i]; p < off[i + 1]; p++) {
                const int32_t c = col[p];
                if (c < 0 || c >= cols)
                    fatal("cusparseSpMM: column index %d at entry %lld is outside [0, %lld)", c,
                          (long long)p, (long long)cols);
                const float *x = X + (size_t)c * ldx;
                for (int64_t j = 0; j < F; j++)
                    acc[(size_t)j] += val[p] * x[j];
            }
            // C is read even when beta is 0, as a library may: 0 * NaN is NaN.
            float *y = Y + (size_t)i * ldy;
            for (int64_t j = 0; j < F; j++)
                y[j] = al * acc[(size_t)j] + be * y[j];
        }
    });
    return e == cudaSuccess ? CUSPARSE_STATUS_SUCCESS : CUSPARSE_STATUS_EXECUTION_FAILED;
}

const char *cusparseGetErrorName(cusparseStatus_t status) {
    switch (status) {
    case CUSPARSE_STATUS_SUCCESS:
        return "CUSPARSE_STATUS_SUCCESS";
    case CUSPARSE_STATUS_NOT_INITIALIZED:
        return "CUSPARSE_STATUS_NOT_INITIALIZED";
    case CUSPARSE_STATUS_ALLOC_FAILED:
        return "CUSPARSE_STATUS_ALLOC_FAILED";
    case CUSPARSE_STATUS_INVALID_VALUE:
        return "CUSPARSE_STATUS_INVALID_VALUE";
    case CUSPARSE_STATUS_ARCH_MISMATCH:
        return "CUSPARSE_STATUS_ARCH_MISMATCH";
    case CUSPARSE_STATUS_MAPPING_ERROR:
        return "CUSPARSE_STATUS_MAPPING_ERROR";
    case CUSPARSE_STATUS_EXECUTION_FAILED:
        return "CUSPARSE_STATUS_EXECUTION_FAILED";
    case CUSPARSE_STATUS_INTERNAL_ERROR:
        return "CUSPARSE_STATUS_INTERNAL_ERROR";
    case CUSPARSE_STATUS_MATRIX_TYPE_NOT_SUPPORTED:
        return "CUSPARSE_STATUS_MATRIX_TYPE_NOT_SUPPORTED";
    case CUSPARSE_STATUS_ZERO_PIVOT:
        return "CUSPARSE_STATUS_ZERO_PIVOT";
    case CUSPARSE_STATUS_NOT_SUPPORTED:
        return "CUSPARSE_STATUS_NOT_SUPPORTED";
    case CUSPARSE_STATUS_INSUFFICIENT_RESOURCES:
        return "CUSPARSE_STATUS_INSUFFICIENT_RESOURCES";
    }
    return "CUSPARSE_STATUS_UNKNOWN";
}

const char *cusparseGetErrorString(cusparseStatus_t status) {
    switch (status) {
    case CUSPARSE_STATUS_SUCCESS:
        return "success";
    case CUSPARSE_STATUS_INVALID_VALUE:
        return "invalid value";
    case CUSPARSE_STATUS_NOT_SUPPORTED:
        return "operation not supported";
    case CUSPARSE_STATUS_ALLOC_FAILED:
        return "resource allocation failed";
    case CUSPARSE_STATUS_NOT_INITIALIZED:
        return "initialization error";
    default:
        return "internal error";
    }
}
