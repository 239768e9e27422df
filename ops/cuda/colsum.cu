// colsum.cu - out[j] = sum_i x[i][j] + beta out[j] in f32 with double sums (the bias gradient).
//
// Two passes, deterministic: the rows are cut into chunks fixed by (rows, cols) alone; a block
// sums a 32-column tile of one chunk (32 columns across the lanes, so reads are coalesced, and
// 8 row lanes, added in a fixed tree) into a double partial per chunk and column; the second pass
// adds each column's partials in chunk order. The partials live in the stream's workspace.
#include "common.cuh"

#define COLSUM_TX 32 // columns per tile, across the lanes of a warp
#define COLSUM_TY 8  // row lanes per block
#define COLSUM_ROWS_PER_CHUNK 512
#define COLSUM_MAX_CHUNKS 1024
#define COLSUM_MAX_PARTIALS ((int64_t)1 << 22) // chunks x cols doubles: at most 32 MiB
#define COLSUM_FINISH_BLOCK 256

// part[c * cols + j] = sum over the rows of chunk c of x[i][j].
static __global__ void __launch_bounds__(COLSUM_TX *COLSUM_TY)
    colsum_partial_kernel(int64_t rows, int64_t cols, int64_t rows_per_chunk,
                          const float *__restrict__ x, double *__restrict__ part) {
    __shared__ double tile[COLSUM_TY][COLSUM_TX + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int64_t c = blockIdx.y;
    const int64_t r0 = c * rows_per_chunk;
    const int64_t r1 = r0 + rows_per_chunk < rows ? r0 + rows_per_chunk : rows;
    // The loop bound depends on the block alone, so every thread reaches the barriers.
    for (int64_t j0 = blockIdx.x * (int64_t)COLSUM_TX; j0 < cols;
         j0 += (int64_t)gridDim.x * COLSUM_TX) {
        const int64_t j = j0 + tx;
        double acc = 0.0;
        if (j < cols)
            for (int64_t i = r0 + ty; i < r1; i += COLSUM_TY)
                acc += x[i * cols + j];
        tile[ty][tx] = acc;
        __syncthreads();
        if (ty == 0 && j < cols) {
            double sum = tile[0][tx];
            for (int k = 1; k < COLSUM_TY; k++)
                sum += tile[k][tx];
            part[c * cols + j] = sum;
        }
        __syncthreads();
    }
}

static __global__ void __launch_bounds__(COLSUM_FINISH_BLOCK)
    colsum_finish_kernel(int64_t cols, int64_t n_chunks, const double *__restrict__ part,
                         float beta, float *__restrict__ out) {
    for (int64_t j = blockIdx.x * (int64_t)COLSUM_FINISH_BLOCK + threadIdx.x; j < cols;
         j += (int64_t)gridDim.x * COLSUM_FINISH_BLOCK) {
        double sum = part[j];
        for (int64_t c = 1; c < n_chunks; c++)
            sum += part[c * cols + j];
        out[j] = beta == 0.0f ? (float)sum : (float)(sum + (double)beta * out[j]);
    }
}

saga_status saga_cuda_colsum_f32(saga_stream *s, int64_t rows, int64_t cols, const float *x,
                                 float beta, float *out) {
    static const char slot[] = "colsum_f32";
    if (cols <= 0)
        return SAGA_OK;
    // Chunks: enough to fill the device for tall matrices, within the workspace cap.
    int64_t n_chunks = (rows + COLSUM_ROWS_PER_CHUNK - 1) / COLSUM_ROWS_PER_CHUNK;
    if (n_chunks > COLSUM_MAX_CHUNKS)
        n_chunks = COLSUM_MAX_CHUNKS;
    if (n_chunks > COLSUM_MAX_PARTIALS / cols)
        n_chunks = COLSUM_MAX_PARTIALS / cols;
    if (n_chunks < 1)
        n_chunks = 1;
    const int64_t rows_per_chunk = rows > 0 ? (rows + n_chunks - 1) / n_chunks : 0;

    cudaStream_t stream;
    saga_cuda_scratch sc;
    saga_status st =
        saga_cuda_slot_scratch(s, slot, (size_t)(n_chunks * cols) * sizeof(double), &stream, &sc);
    if (st < 0)
        return st;
    double *part = static_cast<double *>(sc.work);
    const int64_t tiles = (cols + COLSUM_TX - 1) / COLSUM_TX;
    const dim3 grid((unsigned)(tiles < 65535 ? tiles : 65535), (unsigned)n_chunks);
    colsum_partial_kernel<<<grid, dim3(COLSUM_TX, COLSUM_TY), 0, stream>>>(rows, cols,
                                                                           rows_per_chunk, x, part);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    colsum_finish_kernel<<<saga_cuda_blocks(cols, COLSUM_FINISH_BLOCK), COLSUM_FINISH_BLOCK, 0,
                           stream>>>(cols, n_chunks, part, beta, out);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    return SAGA_OK;
}
