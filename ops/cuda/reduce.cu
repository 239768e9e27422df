// reduce.cu - the second pass shared by the reductions: one block adds the per-block partials in
// block order and the sum is copied to pinned host memory, or added to a sum on the device.
#include "common.cuh"

#define SUM_PARTIALS_BLOCK SAGA_CUDA_REDUCE_BLOCK

// partials[n] receives the sum, or (acc not NULL) *acc += the sum.
static __global__ void __launch_bounds__(SUM_PARTIALS_BLOCK)
    sum_partials_kernel(double *partials, int n, double *acc_out) {
    double acc = 0.0;
    for (int i = threadIdx.x; i < n; i += SUM_PARTIALS_BLOCK)
        acc += partials[i];
    acc = saga_cuda_block_sum(acc);
    if (threadIdx.x == 0) {
        if (acc_out)
            *acc_out += acc;
        else
            partials[n] = acc;
    }
}

static saga_status sum_partials_launch(saga_stream *s, cudaStream_t stream, const char *slot,
                                       double *partials, int n, double *h_result) {
    sum_partials_kernel<<<1, SUM_PARTIALS_BLOCK, 0, stream>>>(partials, n, nullptr);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    SAGA_CUDA_SLOT_RETURN(slot, cudaMemcpyAsync(h_result, partials + n, sizeof(double),
                                                cudaMemcpyDeviceToHost, stream));
    return saga_cuda_slot_sync(s, slot, stream);
}

saga_status saga_cuda_sum_partials(saga_stream *s, const char *slot, int n_partials, double *out) {
    cudaStream_t stream;
    saga_cuda_scratch sc;
    saga_status st = saga_cuda_slot_scratch(s, slot, 0, &stream, &sc);
    if (st >= 0)
        st = sum_partials_launch(s, stream, slot, sc.partials, n_partials, sc.host);
    if (st >= 0)
        *out = sc.host[0];
    return st;
}

saga_status saga_cuda_sum_partials_acc(saga_stream *s, const char *slot, int n_partials,
                                       double *acc) {
    cudaStream_t stream;
    saga_cuda_scratch sc;
    saga_status st = saga_cuda_slot_scratch(s, slot, 0, &stream, &sc);
    if (st < 0)
        return st;
    sum_partials_kernel<<<1, SUM_PARTIALS_BLOCK, 0, stream>>>(sc.partials, n_partials, acc);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    return SAGA_OK;
}

saga_status saga_cuda_sum_partials_pinned(saga_stream *s, const char *slot, int n_partials,
                                          double *out) {
    cudaStream_t stream;
    saga_cuda_scratch sc;
    saga_status st = saga_cuda_slot_scratch(s, slot, 0, &stream, &sc);
    if (st < 0)
        return st;
    sum_partials_kernel<<<1, SUM_PARTIALS_BLOCK, 0, stream>>>(sc.partials, n_partials, nullptr);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    SAGA_CUDA_SLOT_RETURN(slot, cudaMemcpyAsync(out, sc.partials + n_partials, sizeof(double),
                                                cudaMemcpyDeviceToHost, stream));
    return SAGA_OK;
}
