// cudasim_internal.h - what the simulator's runtime shares with its cuBLAS and cuSPARSE
// stand-ins.
#pragma once

#include <cuda_runtime.h>

#include <functional>

namespace cudasim {

// Queues fn on stream (NULL: the current device's default stream) after the work already there.
cudaError_t enqueue(cudaStream_t stream, std::function<void()> fn);

// Whether [p, p + bytes) lies inside one device allocation (of any device).
bool is_device_range(const void *p, size_t bytes);

// Reports a misuse that CUDA leaves undefined (a fault, a hang or a wrong result on a GPU) and
// stops the program.
[[noreturn]] void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

} // namespace cudasim
