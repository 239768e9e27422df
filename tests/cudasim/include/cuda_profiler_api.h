// cuda_profiler_api.h - the CUDA profiler API as the CUDA simulator provides it: a window of
// counts (SAGA_CUDASIM_STATS, docs/cudasim.md) from cudaProfilerStart to cudaProfilerStop.
// Built as C++ only, against tests/cudasim/runtime.cpp.
#pragma once

#include "cuda_runtime.h"

cudaError_t cudaProfilerStart(void);
cudaError_t cudaProfilerStop(void);
