// pagerank_pull.cu - one PageRank iteration pulled along the rows of the in-CSR (the
// pagerank_pull_f64 slot): y[i] = base + d * (the sum of c over row i), c_next[i] = y[i] * inv[i],
// and the L1 change and the sinks' rank returned to the host; or (pagerank_pull_acc_f64) with the
// base read on the device and the two sums added into device memory, without a host wait.
//
// In-degrees follow a power law, so the rows are taken in two kinds, short and long. Short rows
// go one of two ways (SAGA_CUDA_PULL at the backend's open):
// - tiles (the default): a warp takes 32 consecutive rows and walks their entries as one run, in
//   chunks of 32 (lane j the chunk's j-th entry, whichever row it is in), so every lane has an
//   entry whatever the rows' degrees; each chunk's terms are summed per row across the lanes (a
//   segmented scan in a fixed order) and added to the row's sum by the lane that owns the row;
// - groups: a group of 2^shift lanes per row, the smallest power of two that covers the mean
//   degree (at most a warp), lanes striding over the row's entries, a shuffle tree in a fixed
//   order; rows far below the mean leave most of their group idle.
// Long rows: the short-row pass lists them and hands each a run of segments of PR_SEG entries;
// any block may take any segment (a block reduction in a fixed order), and a row's segments are
// then added in order.
// A row's sum depends on its entries and on where it stands in the graph, never on which lane,
// block or list position took it. The L1 change and the sinks' rank are summed over fixed grids
// (see common.cuh), so the outputs are the same bits on every run.
#include "common.cuh"

#define PR_BLOCK SAGA_CUDA_REDUCE_BLOCK // the block sums need it
#define PR_SEG (PR_BLOCK * 8)           // entries of a long row's segment
#define PR_SHORT_BLOCKS 2048            // the short-row pass's grid at most
#define PR_SEG_BLOCKS 1024              // the segment pass's grid

// The workspace: two counters, the long-row list, the segments, and the partial sums.
struct pr_work {
    unsigned long long *count; // [0] long rows listed, [1] segments handed out
    int64_t *long_row;         // the rows, in the order they were listed
    int64_t *long_seg;         // each listed row's first segment
    int64_t *seg_owner;        // each segment's list position
    double *seg_sum;           // each segment's sum
    double *part;              // l1 then sinks: nb1 + nb2 partials each, then the two sums
};

// The iteration's base: a, plus b times the sinks' rank on the device when base_in is given.
static __device__ __forceinline__ double pr_base(double a, double b, const double *base_in) {
    return base_in ? a + b * base_in[1] : a;
}

// A long row of e entries on the list, with its run of segments (one lane per row).
static __device__ __forceinline__ void pr_list_long(pr_work w, int64_t row, int64_t e) {
    const unsigned long long segs = (unsigned long long)((e + PR_SEG - 1) / PR_SEG);
    const unsigned long long pos = atomicAdd(&w.count[0], 1ull);
    const unsigned long long seg = atomicAdd(&w.count[1], segs);
    w.long_row[pos] = row;
    w.long_seg[pos] = (int64_t)seg;
    for (unsigned long long s = 0; s < segs; s++)
        w.seg_owner[seg + s] = (int64_t)pos;
}

// A short row's rank yi: written with its next contribution, its share of the L1 change and,
// for a sink, of the sinks' rank added to the thread's sums.
static __device__ __forceinline__ void pr_row_done(int64_t row, double yi, const double *x,
                                                   const double *inv, double *y, double *c_next,
                                                   double *l1, double *sinks) {
    y[row] = yi;
    c_next[row] = yi * inv[row];
    *l1 += fabs(yi - x[row]);
    *sinks += inv[row] == 0.0 ? yi : 0.0;
}

// The block's sums of the threads' L1 changes and sinks' ranks into its two partials.
static __device__ __forceinline__ void pr_block_out(pr_work w, double l1, double sinks,
                                                    int n_parts) {
    l1 = saga_cuda_block_sum(l1);
    sinks = saga_cuda_block_sum(sinks);
    if (threadIdx.x == 0) {
        w.part[blockIdx.x] = l1;
        w.part[n_parts + blockIdx.x] = sinks;
    }
}

static int64_t pr_long_threshold(int shift) {
    const int64_t t = (int64_t)32 << shift; // 32 strides of the group
    return t < 512 ? 512 : t;
}

// Short rows, and the list of long ones. The groups of a warp take consecutive rows, and a warp
// walks its rows in lockstep (the loop bound is the warp's), so every shuffle has the full warp.
static __global__ void __launch_bounds__(PR_BLOCK)
    pr_short_kernel(int64_t n, const int64_t *__restrict__ off, const int32_t *__restrict__ idx,
                    int shift, int64_t long_min, double d, double a, double b,
                    const double *__restrict__ base_in, const double *__restrict__ c,
                    const double *__restrict__ x, const double *__restrict__ inv,
                    double *__restrict__ y, double *__restrict__ c_next, pr_work w, int n_parts) {
    const int g = 1 << shift, glane = threadIdx.x & (g - 1);
    const int64_t t = blockIdx.x * (int64_t)PR_BLOCK + threadIdx.x;
    const int64_t warp_first = (t - (threadIdx.x & 31)) >> shift;
    const int64_t stride = ((int64_t)gridDim.x * PR_BLOCK) >> shift;
    const int64_t mine = (t >> shift) - warp_first;
    const double base = pr_base(a, b, base_in);
    double l1 = 0.0, sinks = 0.0;
    for (int64_t first = warp_first; first < n; first += stride) {
        const int64_t row = first + mine;
        double acc = 0.0;
        bool done = false;
        if (row < n) {
            const int64_t b = off[row], e = off[row + 1];
            if (e - b < long_min) {
                for (int64_t k = b + glane; k < e; k += g)
                    acc += c[idx[k]];
                done = true;
            } else if (glane == 0) {
                pr_list_long(w, row, e - b);
            }
        }
        for (int o = g >> 1; o > 0; o >>= 1)
            acc += __shfl_down_sync(0xffffffffu, acc, o, g);
        if (done && glane == 0)
            pr_row_done(row, base + d * acc, x, inv, y, c_next, &l1, &sinks);
    }
    pr_block_out(w, l1, sinks, n_parts);
}

// Short rows by tiles: a warp per 32 consecutive rows (see the top). The tile's short rows' entries
// are numbered 0.. in row order (a long row counts as empty here); lane j's row holds positions
// [start, end). Chunk by chunk, lane j takes position c0 + j, finds the row it falls in (the first
// lane whose end passes it, by a binary search over the lanes), loads its term, and the lanes of
// one row add their terms in a segmented scan; the row's lane adds the chunk's share to its sum.
// PR_TILE_UNROLL chunks' loads are issued before their sums (the sums' order is the chunks'); the
// chunks past the run's end are skipped, the whole warp alike. On an
// H200, R-MAT scale 22 (bench/README.md): 2, 4, 8 and 16 chunks took 0.74, 0.64, 0.58 and 0.62 ms
// an iteration; long rows from 257 entries 0.56 ms (from 129, 513 and 4,097: 0.67, 0.59, 1.10).
#ifndef PR_TILE_UNROLL
#define PR_TILE_UNROLL 8
#endif
// A short row has fewer entries than this by tiles (the groups' threshold is pr_long_threshold's).
#ifndef PR_TILE_LONG
#define PR_TILE_LONG 257
#endif
static __global__ void __launch_bounds__(PR_BLOCK)
    pr_tile_kernel(int64_t n, const int64_t *__restrict__ off, const int32_t *__restrict__ idx,
                   int64_t long_min, double d, double a, double b,
                   const double *__restrict__ base_in, const double *__restrict__ c,
                   const double *__restrict__ x, const double *__restrict__ inv,
                   double *__restrict__ y, double *__restrict__ c_next, pr_work w, int n_parts) {
    const unsigned full = 0xffffffffu;
    const int lane = threadIdx.x & 31;
    const int64_t warp = (blockIdx.x * (int64_t)PR_BLOCK + threadIdx.x) >> 5;
    const int64_t n_warps = ((int64_t)gridDim.x * PR_BLOCK) >> 5;
    const double base = pr_base(a, b, base_in);
    double l1 = 0.0, sinks = 0.0;
    for (int64_t tile = warp; tile * 32 < n; tile += n_warps) {
        const int64_t row = tile * 32 + lane;
        int64_t first = 0;
        int len = 0; // a short row has fewer than long_min (at most 2^16) entries
        bool listed = false;
        if (row < n) {
            first = off[row];
            const int64_t e = off[row + 1] - first;
            if (e < long_min) {
                len = (int)e;
            } else {
                listed = true;
                pr_list_long(w, row, e);
            }
        }
        int end = len; // the inclusive prefix of the lanes' lengths
        for (int o = 1; o < 32; o <<= 1) {
            const int t = __shfl_up_sync(full, end, o);
            if (lane >= o)
                end += t;
        }
        const int start = end - len, total = __shfl_sync(full, end, 31);
        const int64_t at = first - start; // position p of this lane's row is entry at + p
        double acc = 0.0;
        for (int c0 = 0; c0 < total; c0 += 32 * PR_TILE_UNROLL) {
            int from[PR_TILE_UNROLL], col[PR_TILE_UNROLL];
            double v[PR_TILE_UNROLL];
            const int live =
                (total - c0 + 31) / 32; // chunks of this round with entries (warp-wide)
#pragma unroll
            for (int u = 0; u < PR_TILE_UNROLL; u++) {
                from[u] = 0;
                col[u] = -1;
                if (u >= live)
                    continue;
                const int p = c0 + 32 * u + lane;
                int o = 0; // the first lane whose end passes p (31 past the run's end)
                for (int s = 16; s > 0; s >>= 1)
                    if (__shfl_sync(full, end, o + s - 1) <= p)
                        o += s;
                const int64_t k = __shfl_sync(full, at, o) + p;
                // the first lane of the chunk in the owner's row
                const int st = __shfl_sync(full, start, o) - (c0 + 32 * u);
                from[u] = st > 0 ? st : 0;
                col[u] = p < total ? idx[k] : -1;
            }
#pragma unroll
            for (int u = 0; u < PR_TILE_UNROLL; u++)
                v[u] = col[u] >= 0 ? c[col[u]] : 0.0;
#pragma unroll
            for (int u = 0; u < PR_TILE_UNROLL; u++) {
                if (u >= live)
                    continue;
                const int cu = c0 + 32 * u;
                for (int s = 1; s < 32; s <<= 1) {
                    const double t = __shfl_up_sync(full, v[u], s);
                    if (lane - s >= from[u])
                        v[u] += t;
                }
                // this lane's row's share of the chunk: at the last lane of its run there
                const int lo = start > cu ? start : cu, hi = end < cu + 32 ? end : cu + 32;
                const double share = __shfl_sync(full, v[u], hi > lo ? hi - 1 - cu : 0);
                if (hi > lo)
                    acc += share;
            }
        }
        if (row < n && !listed)
            pr_row_done(row, base + d * acc, x, inv, y, c_next, &l1, &sinks);
    }
    pr_block_out(w, l1, sinks, n_parts);
}

// The long rows' segments: a block per segment, in turn.
static __global__ void __launch_bounds__(PR_BLOCK)
    pr_segment_kernel(const int64_t *__restrict__ off, const int32_t *__restrict__ idx,
                      const double *__restrict__ c, pr_work w) {
    const int64_t total = (int64_t)w.count[1];
    for (int64_t s = blockIdx.x; s < total; s += gridDim.x) {
        const int64_t pos = w.seg_owner[s], row = w.long_row[pos];
        const int64_t b = off[row] + (s - w.long_seg[pos]) * PR_SEG;
        const int64_t end = off[row + 1], e = end < b + PR_SEG ? end : b + PR_SEG;
        double acc = 0.0;
        for (int64_t k = b + threadIdx.x; k < e; k += PR_BLOCK)
            acc += c[idx[k]];
        acc = saga_cuda_block_sum(acc);
        if (threadIdx.x == 0)
            w.seg_sum[s] = acc;
    }
}

// The long rows' ranks: a thread per listed row adds its segments in order.
static __global__ void pr_long_kernel(const int64_t *__restrict__ off, double d, double a, double b,
                                      const double *__restrict__ base_in,
                                      const double *__restrict__ inv, double *__restrict__ y,
                                      double *__restrict__ c_next, pr_work w) {
    const int64_t listed = (int64_t)w.count[0];
    const double base = pr_base(a, b, base_in);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < listed;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t row = w.long_row[i], first = w.long_seg[i];
        const int64_t segs = (off[row + 1] - off[row] + PR_SEG - 1) / PR_SEG;
        double acc = 0.0;
        for (int64_t s = 0; s < segs; s++)
            acc += w.seg_sum[first + s];
        const double yi = base + d * acc;
        y[row] = yi;
        c_next[row] = yi * inv[row];
    }
}

// The long rows' share of the L1 change and the sinks' rank, over a grid that depends on n alone
// (the list's order does not enter the sums).
static __global__ void __launch_bounds__(PR_BLOCK)
    pr_long_sums_kernel(int64_t n, const int64_t *__restrict__ off, int64_t long_min,
                        const double *__restrict__ x, const double *__restrict__ inv,
                        const double *__restrict__ y, double *part, int n_parts, int at) {
    double l1 = 0.0, sinks = 0.0;
    for (int64_t i = blockIdx.x * (int64_t)PR_BLOCK + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * PR_BLOCK) {
        if (off[i + 1] - off[i] >= long_min) {
            l1 += fabs(y[i] - x[i]);
            sinks += inv[i] == 0.0 ? y[i] : 0.0;
        }
    }
    l1 = saga_cuda_block_sum(l1);
    sinks = saga_cuda_block_sum(sinks);
    if (threadIdx.x == 0) {
        part[at + blockIdx.x] = l1;
        part[n_parts + at + blockIdx.x] = sinks;
    }
}

// part[0..n_parts) and part[n_parts..2 n_parts) added in order into part[2 n_parts + 0, 1], and
// into acc[0, 1] when given.
static __global__ void __launch_bounds__(PR_BLOCK)
    pr_finish_kernel(double *part, int n_parts, double *acc) {
    double l1 = 0.0, sinks = 0.0;
    for (int i = threadIdx.x; i < n_parts; i += PR_BLOCK) {
        l1 += part[i];
        sinks += part[n_parts + i];
    }
    l1 = saga_cuda_block_sum(l1);
    sinks = saga_cuda_block_sum(sinks);
    if (threadIdx.x == 0) {
        part[2 * n_parts] = l1;
        part[2 * n_parts + 1] = sinks;
        if (acc) {
            acc[0] += l1;
            acc[1] += sinks;
        }
    }
}

static size_t pr_align(size_t bytes) {
    return (bytes + 255) & ~(size_t)255;
}

// Both slots: base a + b * base_in[1] (base_in on the device, or NULL: a); the sums to out on the
// host after a wait, or added into acc on the device (out NULL).
static saga_status pr_pull(saga_stream *s, const char *slot, const saga_csr_dev *A, double d,
                           double a, double b, const double *base_in, const double *c,
                           const double *x, const double *inv, double *y, double *c_next,
                           double *out, double *acc) {
    const int64_t n = A->n_rows, nnz = A->nnz;
    if (out)
        out[0] = out[1] = 0.0;
    if (n <= 0)
        return SAGA_OK;
    const bool tiles = saga_cuda_pull_tiles(s->be);
    const int64_t mean = (nnz + n - 1) / n;
    const int shift = tiles ? 5 : saga_cuda_group_shift(mean); // tiles: a warp per 32 rows
    const int64_t long_min = tiles ? PR_TILE_LONG : pr_long_threshold(shift) + 1;
    const int64_t want = ((n << shift) + PR_BLOCK - 1) / PR_BLOCK;
    const unsigned nb1 = (unsigned)(want < PR_SHORT_BLOCKS ? want : PR_SHORT_BLOCKS);
    const unsigned nb2 = saga_cuda_reduce_blocks(n);
    const int n_parts = (int)(nb1 + nb2);
    // a long row has at least long_min entries and at most entries / PR_SEG + 1 segments
    const int64_t max_long = nnz / long_min + 1, max_seg = nnz / PR_SEG + max_long + 1;
    const size_t b_count = pr_align(2 * sizeof(unsigned long long)),
                 b_list = pr_align((size_t)max_long * sizeof(int64_t)),
                 b_seg = pr_align((size_t)max_seg * sizeof(int64_t)),
                 b_part = pr_align((size_t)(2 * n_parts + 2) * sizeof(double));
    cudaStream_t stream;
    saga_cuda_scratch sc;
    saga_status st =
        saga_cuda_slot_scratch(s, slot, b_count + 2 * b_list + 2 * b_seg + b_part, &stream, &sc);
    if (st < 0)
        return st;
    char *p = (char *)sc.work;
    pr_work w;
    w.count = (unsigned long long *)p;
    p += b_count;
    w.long_row = (int64_t *)p;
    p += b_list;
    w.long_seg = (int64_t *)p;
    p += b_list;
    w.seg_owner = (int64_t *)p;
    p += b_seg;
    w.seg_sum = (double *)p;
    p += b_seg;
    w.part = (double *)p;

    SAGA_CUDA_SLOT_RETURN(slot,
                          cudaMemsetAsync(w.count, 0, 2 * sizeof(unsigned long long), stream));
    if (tiles)
        pr_tile_kernel<<<nb1, PR_BLOCK, 0, stream>>>(n, A->offsets, A->indices, long_min, d, a, b,
                                                     base_in, c, x, inv, y, c_next, w, n_parts);
    else
        pr_short_kernel<<<nb1, PR_BLOCK, 0, stream>>>(n, A->offsets, A->indices, shift, long_min, d,
                                                      a, b, base_in, c, x, inv, y, c_next, w,
                                                      n_parts);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    if (nnz >= long_min) { // else no row can be long
        pr_segment_kernel<<<PR_SEG_BLOCKS, PR_BLOCK, 0, stream>>>(A->offsets, A->indices, c, w);
        SAGA_CUDA_SLOT_LAUNCH(slot);
        pr_long_kernel<<<saga_cuda_blocks(max_long, 128), 128, 0, stream>>>(
            A->offsets, d, a, b, base_in, inv, y, c_next, w);
        SAGA_CUDA_SLOT_LAUNCH(slot);
    }
    pr_long_sums_kernel<<<nb2, PR_BLOCK, 0, stream>>>(n, A->offsets, long_min, x, inv, y, w.part,
                                                      n_parts, (int)nb1);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    pr_finish_kernel<<<1, PR_BLOCK, 0, stream>>>(w.part, n_parts, acc);
    SAGA_CUDA_SLOT_LAUNCH(slot);
    if (!out)
        return SAGA_OK;
    SAGA_CUDA_SLOT_RETURN(slot, cudaMemcpyAsync(sc.host, w.part + 2 * n_parts, 2 * sizeof(double),
                                                cudaMemcpyDeviceToHost, stream));
    if ((st = saga_cuda_slot_sync(s, slot, stream)) < 0)
        return st;
    out[0] = sc.host[0];
    out[1] = sc.host[1];
    return SAGA_OK;
}

saga_status saga_cuda_pagerank_pull_f64(saga_stream *s, const saga_csr_dev *A, double d,
                                        double base, const double *c, const double *x,
                                        const double *inv, double *y, double *c_next, double *out) {
    return pr_pull(s, "pagerank_pull_f64", A, d, base, 0.0, nullptr, c, x, inv, y, c_next, out,
                   nullptr);
}

saga_status saga_cuda_pagerank_pull_acc_f64(saga_stream *s, const saga_csr_dev *A, double d,
                                            double a, double b, const double *base_in,
                                            const double *c, const double *x, const double *inv,
                                            double *y, double *c_next, double *acc) {
    return pr_pull(s, "pagerank_pull_acc_f64", A, d, a, b, base_in, c, x, inv, y, c_next, nullptr,
                   acc);
}
