// cusparse.h - the cuSPARSE generic API as the CUDA simulator provides it: CSR SpMM with 32-bit
// indices, f32 values and row-major dense matrices, computed by plain reference code in stream
// order; other shapes and types are CUSPARSE_STATUS_NOT_SUPPORTED (see tests/cudasim/libs.cpp).
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

typedef enum cudaDataType_t {
    CUDA_R_32F = 0,
    CUDA_R_64F = 1,
    CUDA_R_16F = 2,
    CUDA_R_32I = 10,
} cudaDataType;

typedef enum {
    CUSPARSE_STATUS_SUCCESS = 0,
    CUSPARSE_STATUS_NOT_INITIALIZED = 1,
    CUSPARSE_STATUS_ALLOC_FAILED = 2,
    CUSPARSE_STATUS_INVALID_VALUE = 3,
    CUSPARSE_STATUS_ARCH_MISMATCH = 4,
    CUSPARSE_STATUS_MAPPING_ERROR = 5,
    CUSPARSE_STATUS_EXECUTION_FAILED = 6,
    CUSPARSE_STATUS_INTERNAL_ERROR = 7,
    CUSPARSE_STATUS_MATRIX_TYPE_NOT_SUPPORTED = 8,
    CUSPARSE_STATUS_ZERO_PIVOT = 9,
    CUSPARSE_STATUS_NOT_SUPPORTED = 10,
    CUSPARSE_STATUS_INSUFFICIENT_RESOURCES = 11,
} cusparseStatus_t;

typedef enum {
    CUSPARSE_OPERATION_NON_TRANSPOSE = 0,
    CUSPARSE_OPERATION_TRANSPOSE = 1,
    CUSPARSE_OPERATION_CONJUGATE_TRANSPOSE = 2,
} cusparseOperation_t;

typedef enum {
    CUSPARSE_INDEX_16U = 1,
    CUSPARSE_INDEX_32I = 2,
    CUSPARSE_INDEX_64I = 3,
} cusparseIndexType_t;

typedef enum { CUSPARSE_INDEX_BASE_ZERO = 0, CUSPARSE_INDEX_BASE_ONE = 1 } cusparseIndexBase_t;

typedef enum { CUSPARSE_ORDER_COL = 1, CUSPARSE_ORDER_ROW = 2 } cusparseOrder_t;

typedef enum {
    CUSPARSE_SPMM_ALG_DEFAULT = 0,
    CUSPARSE_SPMM_COO_ALG1 = 1,
    CUSPARSE_SPMM_COO_ALG2 = 2,
    CUSPARSE_SPMM_COO_ALG3 = 3,
    CUSPARSE_SPMM_CSR_ALG1 = 4,
    CUSPARSE_SPMM_COO_ALG4 = 5,
    CUSPARSE_SPMM_CSR_ALG2 = 6,
    CUSPARSE_SPMM_CSR_ALG3 = 12,
} cusparseSpMMAlg_t;

typedef struct cusparseContext *cusparseHandle_t;
typedef struct cusparseSpMatDescr *cusparseSpMatDescr_t;
typedef struct cusparseDnMatDescr *cusparseDnMatDescr_t;

cusparseStatus_t cusparseCreate(cusparseHandle_t *handle);
cusparseStatus_t cusparseDestroy(cusparseHandle_t handle);
cusparseStatus_t cusparseSetStream(cusparseHandle_t handle, cudaStream_t stream);
cusparseStatus_t cusparseCreateCsr(cusparseSpMatDescr_t *descr, int64_t rows, int64_t cols,
                                   int64_t nnz, void *offsets, void *columns, void *values,
                                   cusparseIndexType_t offset_type, cusparseIndexType_t col_type,
                                   cusparseIndexBase_t base, cudaDataType value_type);
cusparseStatus_t cusparseCsrSetPointers(cusparseSpMatDescr_t descr, void *offsets, void *columns,
                                        void *values);
cusparseStatus_t cusparseDestroySpMat(cusparseSpMatDescr_t descr);
cusparseStatus_t cusparseCreateDnMat(cusparseDnMatDescr_t *descr, int64_t rows, int64_t cols,
                                     int64_t ld, void *values, cudaDataType value_type,
                                     cusparseOrder_t order);
cusparseStatus_t cusparseDestroyDnMat(cusparseDnMatDescr_t descr);
cusparseStatus_t cusparseDnMatSetValues(cusparseDnMatDescr_t descr, void *values);
cusparseStatus_t cusparseSpMM_bufferSize(cusparseHandle_t handle, cusparseOperation_t op_a,
                                         cusparseOperation_t op_b, const void *alpha,
                                         cusparseSpMatDescr_t A, cusparseDnMatDescr_t B,
                                         const void *beta, cusparseDnMatDescr_t C,
                                         cudaDataType compute_type, cusparseSpMMAlg_t alg,
                                         size_t *bytes);
cusparseStatus_t cusparseSpMM(cusparseHandle_t handle, cusparseOperation_t op_a,
                              cusparseOperation_t op_b, const void *alpha, cusparseSpMatDescr_t A,
                              cusparseDnMatDescr_t B, const void *beta, cusparseDnMatDescr_t C,
                              cudaDataType compute_type, cusparseSpMMAlg_t alg,
                              void *external_buffer);
const char *cusparseGetErrorName(cusparseStatus_t status);
const char *cusparseGetErrorString(cusparseStatus_t status);
