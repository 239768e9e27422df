// h2d_cuda.cu - host-to-device copy bandwidth with the CUDA runtime alone: the reference for
// bench_h2d (saga's backend API), for copies of 1 MiB to 256 MiB.
//
//   h2d_cuda [DEVICE]      DEVICE: a CUDA device number (default 0)
//
// The same schedule as bench/bench_h2d.c: a pinned host buffer (cudaHostAlloc), a device buffer
// (cudaMalloc), copies with cudaMemcpyAsync on a non-default stream, timed by two events
// (cudaEventRecord before the first copy and after the last, cudaEventElapsedTime). For each
// size, one untimed copy, then TRIALS trials of back-to-back copies of that size, as many as make
// about 1 GiB (at least MIN_COPIES); the table gives the mean time per copy and the bandwidth of
// the best trial, in GB/s of 10^9 bytes.
//
// Without a usable GPU (no device, no driver), prints one line "no CUDA device: ..." and exits
// with 77.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

enum {
    MIN_SHIFT = 20, // 1 MiB
    MAX_SHIFT = 28, // 256 MiB
    TRIALS = 3,
    MIN_COPIES = 4,
    EXIT_SKIP = 77 // the test driver's "skipped"
};
static const double BYTES_PER_TRIAL = 1073741824.0; // 1 GiB of copies per trial

// Exits with the failing call's text; a benchmark has nothing to recover.
#define CUDA_OK(call)                                                                              \
    do {                                                                                           \
        cudaError_t err_ = (call);                                                                 \
        if (err_ != cudaSuccess) {                                                                 \
            fprintf(stderr, "h2d_cuda: %s failed: %s\n", #call, cudaGetErrorString(err_));         \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv) {
    int device = 0;
    if (argc > 2 || (argc == 2 && sscanf(argv[1], "%d", &device) != 1) || device < 0) {
        fprintf(stderr, "usage: h2d_cuda [DEVICE]\n");
        return 2;
    }
    int n_devices = 0;
    cudaError_t err = cudaGetDeviceCount(&n_devices);
    if (err != cudaSuccess || n_devices == 0) {
        printf("no CUDA device: cudaGetDeviceCount: %s\n",
               err != cudaSuccess ? cudaGetErrorString(err) : "found none");
        return EXIT_SKIP;
    }
    if (device >= n_devices) {
        printf("no CUDA device: device %d asked for, %d found\n", device, n_devices);
        return EXIT_SKIP;
    }
    CUDA_OK(cudaSetDevice(device));
    cudaDeviceProp prop;
    CUDA_OK(cudaGetDeviceProperties(&prop, device));

    const size_t max_bytes = (size_t)1 << MAX_SHIFT;
    void *host = nullptr, *dev = nullptr;
    cudaStream_t s;
    cudaEvent_t start, end;
    CUDA_OK(cudaHostAlloc(&host, max_bytes, cudaHostAllocDefault));
    CUDA_OK(cudaMalloc(&dev, max_bytes));
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA_OK(cudaEventCreate(&start));
    CUDA_OK(cudaEventCreate(&end));
    memset(host, 0x5a, max_bytes);

    printf("device: cuda:%d (%s), PCI %04x:%02x:%02x\n", device, prop.name, prop.pciDomainID,
           prop.pciBusID, prop.pciDeviceID);
    printf("host -> device, cudaMemcpyAsync from cudaHostAlloc memory; best of %d trials of ~1 GiB "
           "each\n",
           (int)TRIALS);
    printf("%10s %8s %12s %10s\n", "size_MiB", "copies", "ms_per_copy", "GB_per_s");
    for (int shift = MIN_SHIFT; shift <= MAX_SHIFT; shift++) {
        const size_t bytes = (size_t)1 << shift;
        int copies = (int)(BYTES_PER_TRIAL / (double)bytes);
        copies = copies < MIN_COPIES ? (int)MIN_COPIES : copies;
        CUDA_OK(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, s)); // warm-up
        CUDA_OK(cudaStreamSynchronize(s));
        float best_ms = 1e30f;
        for (int t = 0; t < TRIALS; t++) {
            CUDA_OK(cudaEventRecord(start, s));
            for (int i = 0; i < copies; i++)
                CUDA_OK(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, s));
            CUDA_OK(cudaEventRecord(end, s));
            CUDA_OK(cudaEventSynchronize(end));
            float ms = 0;
            CUDA_OK(cudaEventElapsedTime(&ms, start, end));
            best_ms = ms < best_ms ? ms : best_ms;
        }
        printf("%10zu %8d %12.4f %10.2f\n", bytes >> 20, copies, (double)best_ms / copies,
               (double)bytes * copies / ((double)best_ms * 1e-3) * 1e-9);
        fflush(stdout);
    }
    CUDA_OK(cudaEventDestroy(start));
    CUDA_OK(cudaEventDestroy(end));
    CUDA_OK(cudaStreamDestroy(s));
    CUDA_OK(cudaFree(dev));
    CUDA_OK(cudaFreeHost(host));
    return 0;
}
