// reduce.cu - the second pass shared by the reductions: one block adds the per-block partials in
// block order; the sum is returned to the host, added to a sum on the device, or copied to pinned
// host memory in stream order.
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

saga_status saga_cuda_sum_partials_to(saga_stream *s, const char *slot, int n_partials,
                                      saga_cuda_sum_to to, double *out) {
    cudaStream_t stream;
    saga_cuda_scratch sc;
    saga_status st = saga_cuda_slot_scratch(s, slot, 0, &stream, &sc);
    if (st < 0)
        return st;
    sum_partials_kernel<<<1, SUM_PARTIALS_BLOCK, 0, stream>>>(
        sc.partials, n_partials, to == SAGA_CUDA_SUM_ACC ? out : nullptr);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    if (to == SAGA_CUDA_SUM_ACC)
        return SAGA_OK;
    // the host's result goes through the stream's pinned slot, then into *out once waited for
    double *dst = to == SAGA_CUDA_SUM_PINNED ? out : sc.host;
    SAGA_CUDA_SLOT_RETURN(slot, cudaMemcpyAsync(dst, sc.partials + n_partials, sizeof(double),
                                                cudaMemcpyDeviceToHost, stream));
    if (to == SAGA_CUDA_SUM_PINNED)
        return SAGA_OK;
    if ((st = saga_cuda_slot_sync(s, slot, stream)) >= 0)
        *out = sc.host[0];
    return st;
}

saga_status saga_cuda_sum_partials(saga_stream *s, const char *slot, int n_partials, double *out) {
    return saga_cuda_sum_partials_to(s, slot, n_partials, SAGA_CUDA_SUM_HOST, out);
}

saga_status saga_cuda_reduce2_f64(saga_stream *s, const char *slot, int64_t n, const double *x,
                                  const double *y, saga_cuda_partials_fn partials_of,
                                  saga_cuda_sum_to to, double *out) {
    if (n <= 0) {
        if (to != SAGA_CUDA_SUM_ACC)
            *out = 0.0;
        return SAGA_OK;
    }
    cudaStream_t stream;
    double *partials, *h_result;
    saga_status st = saga_cuda_stream_get(s, &stream);
    if (st >= 0)
        st = saga_cuda_stream_scratch(s, &partials, &h_result);
    const unsigned blocks = saga_cuda_reduce_blocks(n);
    if (st >= 0)
        st = partials_of(stream, n, x, y, partials, blocks);
    return st < 0 ? st : saga_cuda_sum_partials_to(s, slot, (int)blocks, to, out);
}
