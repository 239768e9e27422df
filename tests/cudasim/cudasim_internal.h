// cudasim_internal.h - what the simulator's runtime shares with its cuBLAS, cuSPARSE and NCCL
// stand-ins.
#pragma once

#include <cuda_runtime.h>

#include <functional>

namespace cudasim {

// Queues fn on stream (NULL: the current device's default stream) after the work already there;
// while stream captures, records it in the graph instead (the library operation then runs at each
// launch of the graph). Returns the error CUDA's runtime gives a use of stream that capture
// forbids.
cudaError_t enqueue(cudaStream_t stream, std::function<void()> fn);

// enqueue for an operation whose work depends on the order in which it is issued (an NCCL
// communicator's sequence): make returns the work and is called once for each issue, at this call
// when stream does not capture, else at each cudaGraphLaunch of a graph that holds it (on the
// launching thread, in the graph's order).
cudaError_t enqueue_issued(cudaStream_t stream, std::function<std::function<void()>()> make);

// Whether stream (NULL: the current device's default stream) is being captured into a graph.
bool capturing(cudaStream_t stream);

// Whether [p, p + bytes) lies inside one device allocation (of any device).
bool is_device_range(const void *p, size_t bytes);

// Stops the program, with a diagnostic that names who (e.g. "kernel k launched at f.cu:12",
// "ncclAllReduce") and arg (e.g. "pointer argument", "recvbuff"), unless [p, p + bytes) lies in
// device memory of device, or in pinned host memory where pinned_ok.
void check_pointer(const char *who, const char *arg, const void *p, size_t bytes, int device,
                   bool pinned_ok);

// The device of stream (NULL: the current device's default stream).
int stream_device(cudaStream_t stream);

// The check at every API entry (func names the call): CUDA forbids runtime calls, and so library
// calls that queue work, from a host function queued with cudaLaunchHostFunc.
void api_entry(const char *func);

// api_entry for the length of a runtime call: the calls it makes to the runtime are its own, not
// the program's, and are left out of SAGA_CUDASIM_STATS's counts.
struct api_scope {
    explicit api_scope(const char *func);
    ~api_scope();
    api_scope(const api_scope &) = delete;
    api_scope &operator=(const api_scope &) = delete;
};

// Reports a misuse that CUDA leaves undefined (a fault, a hang or a wrong result on a GPU) and
// stops the program.
[[noreturn]] void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

} // namespace cudasim
