// cudasim_device.h - the device side of the CUDA simulator: what a .cu file's kernels see
// (threadIdx and friends, __syncthreads, warp shuffles and ballots, atomics) and the launcher that
// the build's rewrite of `k<<<grid, block, shmem, stream>>>(args)` calls.
//
// Every CUDA thread of a block is a fiber on the stream's worker thread. A thread runs until it
// reaches a barrier (__syncthreads, a warp collective) or returns; the scheduler then picks the
// next ready thread in the order SAGA_CUDASIM_ORDER names (forward, reverse or random), so that
// code which depends on an order the hardware does not promise gives different results, or a
// diagnostic, under different orders. Warp collectives wait for every lane their mask names and
// stop the program with a diagnostic when a named lane has exited, when lanes meet at different
// collectives, or when the block can no longer make progress.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
// No __noinline__: libstdc++ 13 spells its own attributes __noinline__, which such a macro would
// break; no kernel of ops/cuda uses it.
#define __launch_bounds__(...)
#define __constant__ static
// Shared memory is per block; the threads of a block are fibers of one OS thread and blocks run
// one after another on it, so a thread-local static is exactly one copy per running block.
#define __shared__ static thread_local

namespace cudasim {

struct site {
    const char *file;
    int line;
};

// What a fiber sees as its CUDA thread.
struct thread_state {
    uint3 thread_idx;
    uint3 block_idx;
    dim3 block_dim;
    dim3 grid_dim;
};

extern thread_local thread_state *current;

void syncthreads(site at);
// A warp collective: every lane named in mask contributes payload and param; combine runs once,
// in the last lane to arrive, and writes each participating lane's result. kind names the
// collective in diagnostics.
enum collective_kind {
    COLL_SHFL,
    COLL_SHFL_UP,
    COLL_SHFL_DOWN,
    COLL_SHFL_XOR,
    COLL_BALLOT,
    COLL_SYNCWARP,
    COLL_ANY,
    COLL_ALL
};
uint64_t warp_collective(site at, collective_kind kind, unsigned mask, uint64_t payload, int param,
                         int width);

inline void syncwarp(site at, unsigned mask = 0xffffffffu) {
    warp_collective(at, COLL_SYNCWARP, mask, 0, 0, 32);
}

template <typename T> inline uint64_t to_bits(T v) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value,
                  "a shuffled value is at most 8 bytes");
    uint64_t b = 0;
    std::memcpy(&b, &v, sizeof v);
    return b;
}
template <typename T> inline T from_bits(uint64_t b) {
    T v;
    std::memcpy(&v, &b, sizeof v);
    return v;
}

template <typename T>
inline T shfl(site at, collective_kind kind, unsigned mask, T v, int param, int width) {
    return from_bits<T>(warp_collective(at, kind, mask, to_bits(v), param, width));
}

// ---- launches ---------------------------------------------------------------------------------

// Queues a kernel of grid x block threads on stream, each thread running body (or, while stream
// captures, records it). Sets the calling thread's last error (and queues nothing) for a bad
// configuration or stream. func is the kernel function: a graph's kernel node keeps it.
void submit(const char *name, site at, const void *func, dim3 grid, dim3 block, size_t shmem,
            cudaStream_t stream, std::function<void()> body, const void *const *ptrs, int n_ptrs);

template <typename T> inline void collect_ptr(const T &, const void **, int &) {}
template <typename T> inline void collect_ptr(T *const &p, const void **out, int &n) {
    out[n++] = (const void *)p;
}

template <typename... P> struct launcher {
    const char *name;
    site at;
    void (*kernel)(P...);
    dim3 grid, block;
    size_t shmem;
    cudaStream_t stream;

    template <typename... A> void operator()(A &&...a) const {
        static_assert(sizeof...(A) == sizeof...(P), "kernel launched with a wrong argument count");
        // Arguments are converted to the parameters' types and copied at the launch, as CUDA does.
        auto args =
            std::make_shared<std::tuple<typename std::decay<P>::type...>>(std::forward<A>(a)...);
        const void *ptrs[sizeof...(P) + 1];
        int n_ptrs = 0;
        std::apply([&](const auto &...v) { (collect_ptr(v, ptrs, n_ptrs), ...); }, *args);
        void (*k)(P...) = kernel;
        submit(
            name, at, reinterpret_cast<const void *>(k), grid, block, shmem, stream,
            [k, args]() { std::apply(k, *args); }, ptrs, n_ptrs);
    }
};

template <typename... P>
inline launcher<P...> launch(const char *name, site at, void (*kernel)(P...), dim3 grid, dim3 block,
                             size_t shmem = 0, cudaStream_t stream = nullptr) {
    return launcher<P...>{name, at, kernel, grid, block, shmem, stream};
}

} // namespace cudasim

#define threadIdx (::cudasim::current->thread_idx)
#define blockIdx (::cudasim::current->block_idx)
#define blockDim (::cudasim::current->block_dim)
#define gridDim (::cudasim::current->grid_dim)
constexpr int warpSize = 32;

#define CUDASIM_SITE (::cudasim::site{__FILE__, __LINE__})
#define __syncthreads() ::cudasim::syncthreads(CUDASIM_SITE)
#define __syncwarp(...) ::cudasim::syncwarp(CUDASIM_SITE, ##__VA_ARGS__)
#define CUDASIM_SHFL_(kind, mask, v, param, width, ...)                                            \
    ::cudasim::shfl(CUDASIM_SITE, kind, mask, v, param, width)
#define __shfl_sync(...) CUDASIM_SHFL_(::cudasim::COLL_SHFL, __VA_ARGS__, 32, 0)
#define __shfl_up_sync(...) CUDASIM_SHFL_(::cudasim::COLL_SHFL_UP, __VA_ARGS__, 32, 0)
#define __shfl_down_sync(...) CUDASIM_SHFL_(::cudasim::COLL_SHFL_DOWN, __VA_ARGS__, 32, 0)
#define __shfl_xor_sync(...) CUDASIM_SHFL_(::cudasim::COLL_SHFL_XOR, __VA_ARGS__, 32, 0)
#define __ballot_sync(mask, pred)                                                                  \
    ((unsigned)::cudasim::warp_collective(CUDASIM_SITE, ::cudasim::COLL_BALLOT, mask,              \
                                          (pred) ? 1u : 0u, 0, 32))
#define __any_sync(mask, pred)                                                                     \
    ((int)::cudasim::warp_collective(CUDASIM_SITE, ::cudasim::COLL_ANY, mask, (pred) ? 1u : 0u, 0, \
                                     32))
#define __all_sync(mask, pred)                                                                     \
    ((int)::cudasim::warp_collective(CUDASIM_SITE, ::cudasim::COLL_ALL, mask, (pred) ? 1u : 0u, 0, \
                                     32))

// ---- atomics (other streams' kernels run on other OS threads: real atomics)
// ----------------------

inline int atomicAdd(int *a, int v) {
    return __atomic_fetch_add(a, v, __ATOMIC_RELAXED);
}
inline unsigned atomicAdd(unsigned *a, unsigned v) {
    return __atomic_fetch_add(a, v, __ATOMIC_RELAXED);
}
inline unsigned long long atomicAdd(unsigned long long *a, unsigned long long v) {
    return __atomic_fetch_add(a, v, __ATOMIC_RELAXED);
}
template <typename F, typename U> inline F cudasim_atomic_add_fp(F *a, F v) {
    U old = __atomic_load_n(reinterpret_cast<U *>(a), __ATOMIC_RELAXED);
    for (;;) {
        F f;
        std::memcpy(&f, &old, sizeof f);
        const F sum = f + v;
        U next;
        std::memcpy(&next, &sum, sizeof next);
        if (__atomic_compare_exchange_n(reinterpret_cast<U *>(a), &old, next, false,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            return f;
    }
}
inline float atomicAdd(float *a, float v) {
    return cudasim_atomic_add_fp<float, uint32_t>(a, v);
}
inline double atomicAdd(double *a, double v) {
    return cudasim_atomic_add_fp<double, uint64_t>(a, v);
}
template <typename T> inline T cudasim_atomic_min(T *a, T v) {
    T old = __atomic_load_n(a, __ATOMIC_RELAXED);
    while (v < old &&
           !__atomic_compare_exchange_n(a, &old, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return old;
}
template <typename T> inline T cudasim_atomic_max(T *a, T v) {
    T old = __atomic_load_n(a, __ATOMIC_RELAXED);
    while (v > old &&
           !__atomic_compare_exchange_n(a, &old, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return old;
}
inline int atomicMin(int *a, int v) {
    return cudasim_atomic_min(a, v);
}
inline unsigned atomicMin(unsigned *a, unsigned v) {
    return cudasim_atomic_min(a, v);
}
inline unsigned long long atomicMin(unsigned long long *a, unsigned long long v) {
    return cudasim_atomic_min(a, v);
}
inline long long atomicMin(long long *a, long long v) {
    return cudasim_atomic_min(a, v);
}
inline int atomicMax(int *a, int v) {
    return cudasim_atomic_max(a, v);
}
inline unsigned long long atomicMax(unsigned long long *a, unsigned long long v) {
    return cudasim_atomic_max(a, v);
}
inline int atomicCAS(int *a, int cmp, int v) {
    __atomic_compare_exchange_n(a, &cmp, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return cmp;
}
inline unsigned long long atomicCAS(unsigned long long *a, unsigned long long cmp,
                                    unsigned long long v) {
    __atomic_compare_exchange_n(a, &cmp, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return cmp;
}

// Device math that CUDA adds to the C library's.
inline float __expf(float x) {
    return expf(x);
}
inline float __logf(float x) {
    return logf(x);
}
inline float __fdividef(float a, float b) {
    return a / b;
}
inline float rsqrtf(float x) {
    return 1.0f / sqrtf(x);
}
inline double rsqrt(double x) {
    return 1.0 / sqrt(x);
}
template <typename T> inline T __ldg(const T *p) {
    return *p;
}
inline int __popc(unsigned x) {
    return __builtin_popcount(x);
}
inline int __popcll(unsigned long long x) {
    return __builtin_popcountll(x);
}
inline int __ffs(int x) {
    return __builtin_ffs(x);
}
inline int __clz(int x) {
    return x == 0 ? 32 : __builtin_clz((unsigned)x);
}
inline float __uint_as_float(unsigned x) {
    float f;
    std::memcpy(&f, &x, sizeof f);
    return f;
}
inline unsigned __float_as_uint(float f) {
    unsigned x;
    std::memcpy(&x, &f, sizeof x);
    return x;
}
