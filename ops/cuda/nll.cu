// nll.cu - negative log-likelihood of log-probabilities in f32 over a list of rows, as
// ops/cpu/nn_dense.c computes it: the mean (a deterministic double sum, see common.cuh) to the
// host (nll_f32) or to device memory (nll_dev_f32), the gradient on the stream.
//
// One pass checks every selected row and label and sums; the smallest bad position lands in a
// device word. nll_f32 brings it back with the sum, in the one synchronization the host scalar
// needs, and writes dlogp only then; nll_dev_f32 waits for nothing: its later kernels read the
// word and write nothing when it is set, and the first records the fault for the next
// synchronization (saga_cuda_index_fault_take). Either way a bad row or label leaves the outputs
// untouched.
#include "common.cuh"

#include <limits.h>
#include <string.h>

#define NLL_BLOCK SAGA_CUDA_REDUCE_BLOCK
#define NLL_GRAD_BLOCK 256

template <bool HAS_IDX>
static __global__ void __launch_bounds__(NLL_BLOCK)
    nll_f32_kernel(int64_t n, int64_t rows, int64_t cols, const float *__restrict__ logp,
                   const int32_t *__restrict__ labels, const int32_t *__restrict__ rows_idx,
                   double *__restrict__ partials, unsigned long long *__restrict__ first_bad) {
    double acc = 0.0;
    for (int64_t k = blockIdx.x * (int64_t)NLL_BLOCK + threadIdx.x; k < n;
         k += (int64_t)gridDim.x * NLL_BLOCK) {
        const int64_t r = HAS_IDX ? (int64_t)rows_idx[k] : k;
        int64_t label = -1;
        if (r >= 0 && r < rows)
            label = labels[r];
        if (label < 0 || label >= cols) {
            atomicMin(first_bad, (unsigned long long)k); // later positions of this thread are
            break;                                       // larger
        }
        acc -= logp[r * cols + label];
    }
    acc = saga_cuda_block_sum(acc);
    if (threadIdx.x == 0)
        partials[blockIdx.x] = acc;
}

// dlogp[r][label[r]] += g for every selected r (dlogp zeroed before). A row listed twice gets g
// twice; since every addend is the same g, any order of the atomic adds performs the same
// sequence 0 + g, (0 + g) + g, ..., so this matches the CPU's serial loop bit for bit.
// With first_bad (nll_dev_f32), nothing when a bad position was found.
template <bool HAS_IDX>
static __global__ void __launch_bounds__(NLL_GRAD_BLOCK)
    nll_grad_f32_kernel(int64_t n, int64_t cols, const int32_t *__restrict__ labels,
                        const int32_t *__restrict__ rows_idx, const unsigned long long *first_bad,
                        float g, float *__restrict__ dlogp) {
    if (first_bad && *first_bad != ~0ull)
        return;
    for (int64_t k = blockIdx.x * (int64_t)NLL_GRAD_BLOCK + threadIdx.x; k < n;
         k += (int64_t)gridDim.x * NLL_GRAD_BLOCK) {
        const int64_t r = HAS_IDX ? (int64_t)rows_idx[k] : k;
        atomicAdd(dlogp + r * cols + labels[r], g);
    }
}

// The CPU's message for the first bad position k (read back from the device: the error path).
static saga_status nll_bad(cudaStream_t stream, const char *slot, int64_t k, int64_t rows,
                           int64_t cols, const int32_t *labels, const int32_t *rows_idx,
                           double *host) {
    int32_t v = 0;
    int64_t r = k;
    if (rows_idx) {
        SAGA_CUDA_SLOT_RETURN(
            slot, cudaMemcpyAsync(host, rows_idx + k, sizeof v, cudaMemcpyDeviceToHost, stream));
        SAGA_CUDA_SLOT_RETURN(slot, cudaStreamSynchronize(stream));
        memcpy(&v, host, sizeof v);
        r = v;
    }
    if (r < 0 || r >= rows)
        return saga_cuda_host->error(SAGA_ERR_INVALID_ARG,
                                     "%s: row index %lld at position %lld is outside [0, %lld)",
                                     slot, (long long)r, (long long)k, (long long)rows);
    SAGA_CUDA_SLOT_RETURN(
        slot, cudaMemcpyAsync(host, labels + r, sizeof v, cudaMemcpyDeviceToHost, stream));
    SAGA_CUDA_SLOT_RETURN(slot, cudaStreamSynchronize(stream));
    memcpy(&v, host, sizeof v);
    return saga_cuda_host->error(SAGA_ERR_INVALID_ARG,
                                 "%s: row %lld has label %d, outside [0, %lld)", slot, (long long)r,
                                 (int)v, (long long)cols);
}

// The first pass over the n selected positions: *d_first set to none, then the check and the
// blocks' partial sums (blocks of them, saga_cuda_reduce_blocks(n)). n > 0.
static saga_status nll_sum_launch(cudaStream_t stream, const char *slot, int64_t n, int64_t rows,
                                  int64_t cols, const float *logp, const int32_t *labels,
                                  const int32_t *rows_idx, double *partials,
                                  unsigned long long *d_first) {
    SAGA_CUDA_SLOT_RETURN(slot, cudaMemsetAsync(d_first, 0xff, sizeof *d_first, stream));
    const unsigned blocks = saga_cuda_reduce_blocks(n);
    if (rows_idx)
        nll_f32_kernel<true><<<blocks, NLL_BLOCK, 0, stream>>>(n, rows, cols, logp, labels,
                                                               rows_idx, partials, d_first);
    else
        nll_f32_kernel<false><<<blocks, NLL_BLOCK, 0, stream>>>(n, rows, cols, logp, labels,
                                                                rows_idx, partials, d_first);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    return SAGA_OK;
}

// -1/n added at each selected (r, label[r]) of dlogp (zeroed before; with first_bad, nothing when
// a bad position was found). n > 0.
static saga_status nll_grad_launch(cudaStream_t stream, const char *slot, int64_t n, int64_t cols,
                                   const int32_t *labels, const int32_t *rows_idx,
                                   const unsigned long long *first_bad, float *dlogp) {
    const float g = (float)(-1.0 / (double)n);
    const unsigned blocks = saga_cuda_blocks(n, NLL_GRAD_BLOCK);
    if (rows_idx)
        nll_grad_f32_kernel<true>
            <<<blocks, NLL_GRAD_BLOCK, 0, stream>>>(n, cols, labels, rows_idx, first_bad, g, dlogp);
    else
        nll_grad_f32_kernel<false>
            <<<blocks, NLL_GRAD_BLOCK, 0, stream>>>(n, cols, labels, rows_idx, first_bad, g, dlogp);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    return SAGA_OK;
}

// The positions the loss selects: the listed rows, or every row.
static int64_t nll_count(int64_t rows, const int32_t *rows_idx, int64_t n_idx) {
    return rows_idx ? (n_idx > 0 ? n_idx : 0) : (rows > 0 ? rows : 0);
}

saga_status saga_cuda_nll_f32(saga_stream *s, int64_t rows, int64_t cols, const float *logp,
                              const int32_t *labels, const int32_t *rows_idx, int64_t n_idx,
                              double *loss, float *dlogp) {
    static const char slot[] = "nll_f32";
    const int64_t n = nll_count(rows, rows_idx, n_idx);
    cudaStream_t stream;
    saga_cuda_scratch sc;
    saga_status st = saga_cuda_slot_scratch(s, slot, 0, &stream, &sc);
    if (st < 0)
        return st;

    // ---- check and sum (synchronous) ----
    double sum = 0.0;
    if (n > 0) {
        const unsigned blocks = saga_cuda_reduce_blocks(n);
        unsigned long long *d_first = sc.flags;
        if ((st = nll_sum_launch(stream, slot, n, rows, cols, logp, labels, rows_idx, sc.partials,
                                 d_first)) < 0)
            return st;
        // host[1] gets the first bad position; saga_cuda_sum_partials waits for the stream.
        SAGA_CUDA_SLOT_RETURN(slot, cudaMemcpyAsync(sc.host + 1, d_first, sizeof *d_first,
                                                    cudaMemcpyDeviceToHost, stream));
        st = saga_cuda_sum_partials(s, slot, (int)blocks, &sum);
        if (st < 0)
            return st;
        unsigned long long first;
        memcpy(&first, sc.host + 1, sizeof first);
        if (first != ULLONG_MAX)
            return nll_bad(stream, slot, (int64_t)first, rows, cols, labels, rows_idx, sc.host);
    }

    // ---- outputs ----
    *loss = n > 0 ? sum / (double)n : 0.0;
    if (dlogp && rows > 0 && cols > 0) {
        SAGA_CUDA_SLOT_RETURN(
            slot, cudaMemsetAsync(dlogp, 0, (size_t)(rows * cols) * sizeof *dlogp, stream));
        if (n > 0)
            return nll_grad_launch(stream, slot, n, cols, labels, rows_idx, nullptr, dlogp);
    }
    return SAGA_OK;
}

// nll_dev_f32's end of the sum: one block adds the partials in block order, as
// sum_partials_kernel does, and writes the mean as a float; or, when a position was bad, its
// first thread records the fault (the listed row, or the row's label) and nothing is written.
static __global__ void __launch_bounds__(NLL_BLOCK)
    nll_dev_finish_kernel(int n_partials, int64_t n, int64_t rows, int64_t cols,
                          const int32_t *__restrict__ labels, const int32_t *__restrict__ rows_idx,
                          const double *__restrict__ partials, const unsigned long long *first_bad,
                          saga_cuda_index_fault *rec, float *loss) {
    const unsigned long long k = *first_bad;
    if (k != ~0ull) { // the same word for every thread: the whole block leaves
        if (threadIdx.x == 0 && atomicCAS(&rec->set, 0, 1) == 0) {
            const int64_t r = rows_idx ? (int64_t)rows_idx[k] : (int64_t)k;
            const bool row_bad = r < 0 || r >= rows;
            rec->slot = row_bad ? SAGA_CUDA_IDX_NLL_ROW : SAGA_CUDA_IDX_NLL_LABEL;
            rec->value = row_bad ? (int)r : labels[r];
            rec->pos = row_bad ? (long long)k : (long long)r;
            rec->limit = row_bad ? (long long)rows : (long long)cols;
        }
        return;
    }
    double acc = 0.0;
    for (int i = threadIdx.x; i < n_partials; i += NLL_BLOCK)
        acc += partials[i];
    acc = saga_cuda_block_sum(acc);
    if (threadIdx.x == 0)
        *loss = (float)(acc / (double)n);
}

// y[0..n) = 0 unless a bad position was found.
static __global__ void __launch_bounds__(NLL_GRAD_BLOCK)
    nll_zero_kernel(int64_t n, const unsigned long long *first_bad, float *__restrict__ y) {
    if (*first_bad != ~0ull)
        return;
    for (int64_t i = blockIdx.x * (int64_t)NLL_GRAD_BLOCK + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * NLL_GRAD_BLOCK)
        y[i] = 0.0f;
}

saga_status saga_cuda_nll_dev_f32(saga_stream *s, int64_t rows, int64_t cols, const float *logp,
                                  const int32_t *labels, const int32_t *rows_idx, int64_t n_idx,
                                  float *loss, float *dlogp) {
    static const char slot[] = "nll_f32";
    const int64_t n = nll_count(rows, rows_idx, n_idx);
    cudaStream_t stream;
    saga_cuda_scratch sc;
    saga_status st = saga_cuda_slot_scratch(s, slot, 0, &stream, &sc);
    if (st < 0)
        return st;
    unsigned long long *d_first = sc.flags;
    if (n == 0) {
        SAGA_CUDA_SLOT_RETURN(slot, cudaMemsetAsync(d_first, 0xff, sizeof *d_first, stream));
        SAGA_CUDA_SLOT_RETURN(slot, cudaMemsetAsync(loss, 0, sizeof *loss, stream));
    } else {
        const unsigned blocks = saga_cuda_reduce_blocks(n);
        if ((st = nll_sum_launch(stream, slot, n, rows, cols, logp, labels, rows_idx, sc.partials,
                                 d_first)) < 0)
            return st;
        nll_dev_finish_kernel<<<1, NLL_BLOCK, 0, stream>>>(
            (int)blocks, n, rows, cols, labels, rows_idx, sc.partials, d_first,
            saga_cuda_index_fault_record(s->be), loss);
        SAGA_CUDA_SLOT_LAUNCH(slot);
    }
    if (dlogp && rows > 0 && cols > 0) {
        const int64_t total = rows * cols;
        nll_zero_kernel<<<saga_cuda_blocks(total, NLL_GRAD_BLOCK), NLL_GRAD_BLOCK, 0, stream>>>(
            total, d_first, dlogp);
        SAGA_CUDA_SLOT_LAUNCH(slot);
        if (n > 0)
            return nll_grad_launch(stream, slot, n, cols, labels, rows_idx, d_first, dlogp);
    }
    return SAGA_OK;
}
