// The kernels of the current context: the embedded fatbin (kernels/), loaded into each context on first
// use by a fatbin_module (fatbin_module.hpp).
#pragma once

#include <cuda.h>

#include <cstdint>

namespace ferry::detail {

struct loaded_kernels {
  CUfunction fill_8 = nullptr;
  CUfunction fill_16 = nullptr;
  CUfunction fill_2d = nullptr;
  CUfunction copy_blocks = nullptr;
  CUfunction copy_span = nullptr;
  CUfunction resident_copy = nullptr;
  // Threads the context's device keeps resident at once (SMs x threads per SM): one full wave, which
  // the launches size their grids to.
  std::uint64_t resident_threads = 0;
};

// The kernels of the calling thread's current context, which loads them (cuModuleLoadData of
// kernels::fatbin(), then cuModuleGetFunction for each kernel) on the first call in that context.
// Thread-safe: threads that race on a context's first call load one module between them. On the sim
// backend the host twins are registered before the first load. Returns the failing driver status
// (CUDA_ERROR_INVALID_CONTEXT when no context is current) and leaves nothing loaded on failure.
CUresult current_kernels(loaded_kernels& out) noexcept;

// Unloads the module of the current context, if it has one. See unload_kernels (launch.hpp).
CUresult unload_current_kernels() noexcept;

}  // namespace ferry::detail
