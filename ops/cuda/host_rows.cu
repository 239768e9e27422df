// host_rows.cu - rows moved between pinned host arrays and device memory by kernels that reach
// the host memory where it lies (it is mapped: saga_backend_host_alloc): a gather of host rows
// into consecutive device rows, and the addition of consecutive device rows into host rows. They
// queue on a stream like copies and need no host thread (saga_memcpy_rows_h2d_async,
// saga_add_rows_d2h_async).
#include "common.cuh"

#define HOST_ROWS_BLOCK 256

// Row k of the host array: rows[k], or first + k.
__device__ __forceinline__ int64_t host_row(const int32_t *rows, int64_t first, int64_t k) {
    return rows ? (int64_t)rows[k] : first + k;
}

// dev[k] = host row k, in words of W (row_bytes / sizeof(W) words a row).
template <typename W>
static __global__ void __launch_bounds__(HOST_ROWS_BLOCK)
    rows_h2d_kernel(int64_t n, int64_t words, int shift, const W *__restrict__ base,
                    const int32_t *__restrict__ rows, int64_t first, W *__restrict__ dev) {
    const int width = 1 << shift, lane = threadIdx.x & (width - 1);
    const int64_t stride = saga_cuda_group_stride(shift);
    for (int64_t k = saga_cuda_group_row(shift); k < n; k += stride) {
        const W *h = base + host_row(rows, first, k) * words;
        W *d = dev + k * words;
        for (int64_t j = lane; j < words; j += width)
            d[j] = h[j];
    }
}

// host row k += dev[k], cols floats a row (the rows are distinct: no two threads add to one
// element).
static __global__ void __launch_bounds__(HOST_ROWS_BLOCK)
    rows_add_d2h_kernel(int64_t n, int64_t cols, int shift, float *__restrict__ base,
                        const int32_t *__restrict__ rows, int64_t first,
                        const float *__restrict__ dev) {
    const int width = 1 << shift, lane = threadIdx.x & (width - 1);
    const int64_t stride = saga_cuda_group_stride(shift);
    for (int64_t k = saga_cuda_group_row(shift); k < n; k += stride) {
        float *h = base + host_row(rows, first, k) * cols;
        const float *d = dev + k * cols;
        for (int64_t j = lane; j < cols; j += width)
            h[j] += d[j];
    }
}

// The device's address of host memory p from saga_backend_host_alloc (NULL stays NULL).
static saga_status mapped(const char *slot, const void *p, void **out) {
    *out = nullptr;
    if (!p)
        return SAGA_OK;
    const cudaError_t err = cudaHostGetDevicePointer(out, const_cast<void *>(p), 0);
    if (err != cudaSuccess) {
        cudaGetLastError();
        return saga_cuda_host->error(SAGA_ERR_INVALID_ARG,
                                     "%s: %p is not pinned host memory from "
                                     "saga_backend_host_alloc (%s)",
                                     slot, p, cudaGetErrorString(err));
    }
    return SAGA_OK;
}

// Launches rows_h2d_kernel with words of W.
template <typename W>
static void launch_h2d(cudaStream_t stream, const saga_host_rows *hr, const void *base,
                       const int32_t *rows, void *dev) {
    const int64_t words = (int64_t)(hr->row_bytes / sizeof(W));
    const int shift = saga_cuda_group_shift(words);
    rows_h2d_kernel<W>
        <<<saga_cuda_group_blocks(hr->n, shift, HOST_ROWS_BLOCK), HOST_ROWS_BLOCK, 0, stream>>>(
            hr->n, words, shift, static_cast<const W *>(base), rows, hr->first,
            static_cast<W *>(dev));
}

saga_status saga_cuda_copy_rows(saga_stream *s, const saga_host_rows *hr, void *dev, bool add) {
    const char *slot = add ? "saga_add_rows_d2h_async" : "saga_memcpy_rows_h2d_async";
    cudaStream_t stream;
    saga_status st = saga_cuda_slot_stream(s, slot, &stream);
    if (st < 0)
        return st;
    void *base = nullptr, *rows = nullptr;
    if ((st = mapped(slot, hr->base, &base)) < 0 || (st = mapped(slot, hr->rows, &rows)) < 0)
        return st;
    const int32_t *r = static_cast<const int32_t *>(rows);
    if (add) {
        const int64_t cols = (int64_t)(hr->row_bytes / sizeof(float));
        const int shift = saga_cuda_group_shift(cols);
        rows_add_d2h_kernel<<<saga_cuda_group_blocks(hr->n, shift, HOST_ROWS_BLOCK),
                              HOST_ROWS_BLOCK, 0, stream>>>(
            hr->n, cols, shift, static_cast<float *>(base), r, hr->first,
            static_cast<const float *>(dev));
        SAGA_CUDA_SLOT_LAUNCH(slot);
        return SAGA_OK;
    }
    // the widest word that divides the rows and both arrays' alignment
    const uintptr_t align = (uintptr_t)base | (uintptr_t)dev | (uintptr_t)hr->row_bytes;
    if (align % 16 == 0)
        launch_h2d<uint4>(stream, hr, base, r, dev);
    else if (align % 4 == 0)
        launch_h2d<uint32_t>(stream, hr, base, r, dev);
    else if (align % 2 == 0)
        launch_h2d<uint16_t>(stream, hr, base, r, dev);
    else
        launch_h2d<unsigned char>(stream, hr, base, r, dev);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    return SAGA_OK;
}
