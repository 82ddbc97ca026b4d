// Kernels of an embedded fatbin on ferry's driver backend: the fatbin loaded into each context on first
// use (one module per context), its kernels looked up by name, and launched on the caller's stream.
// ferry's own kernels are loaded this way (loaded_kernels.hpp), and so can a program's own: every call
// goes through the driver table ferry chose (engine/driver), so the kernels run on ferry's contexts and
// streams, and on the sim backend the same code runs the host twins the program registered under the
// kernels' names (ferry::sim::register_kernel, sim/control.hpp).
//
// Loading: cuModuleLoadData of the image, then cuModuleGetFunction for each kernel, in the calling
// thread's current context, once per context (thread-safe: threads that race on a context's first call
// load one module between them). Modules stay loaded for the context's life: the driver frees them with
// the context, and a context that comes back (a primary context released and retained again) gets a new
// ID and loads them again. unload_current() unloads one earlier.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/kernels/geometry.hpp"

namespace ferry::detail {

// Which driver call a failure of fatbin_module came from, for callers that throw an error naming it
// (ferry::kernel_module).
struct fatbin_failure {
  // e.g. "cuModuleLoadData"; "cuCtxGetCurrent" when no context is current; null when the failure was
  // no driver call's (an allocation, spans of different lengths).
  const char* call = nullptr;
  const char* kernel = nullptr;  // the kernel's name when the call was about one (cuModuleGetFunction)
};

class fatbin_module {
 public:
  // `image`: a fatbin for cuModuleLoadData, 64-byte aligned; `kernels`: the names of its kernels. Both
  // must outlive this object, which is meant to live as long as the process: create it with new and
  // never delete it (at exit the driver unloads the modules of live contexts with the contexts, and a
  // destructor that unloaded them would race the driver's own teardown). Loads nothing yet.
  // Throws std::bad_alloc.
  fatbin_module(std::span<const unsigned char> image, std::span<const char* const> kernels);
  fatbin_module(const fatbin_module&) = delete;
  fatbin_module& operator=(const fatbin_module&) = delete;

  // Writes the kernels of the calling thread's current context to `functions` (functions[i] is
  // kernels[i]; the spans are as long) and the threads its device keeps resident at once (SMs x threads
  // per SM: one full wave, which launches size their grids to) to `resident_threads`, loading the
  // module on the context's first call. Returns the failing driver status (CUDA_ERROR_INVALID_CONTEXT
  // when no context is current, CUDA_ERROR_INVALID_VALUE for spans of different lengths) and leaves
  // nothing loaded on failure; `failure` (when given) then says which call failed.
  CUresult current(std::span<CUfunction> functions, std::uint64_t& resident_threads,
                   fatbin_failure* failure = nullptr) noexcept;

  // Unloads the current context's module, if it has one (CUDA_SUCCESS when it had none); the next
  // current() in the context loads it again. Returns cuModuleUnload's status, or
  // CUDA_ERROR_INVALID_CONTEXT when no context is current. Launches in the context must not race with it.
  // On failure, `failure` (when given) says which call failed.
  CUresult unload_current(fatbin_failure* failure = nullptr) noexcept;

 private:
  struct loaded {
    CUmodule module = nullptr;
    std::vector<CUfunction> functions;
    std::uint64_t resident_threads = 0;
  };
  CUresult load(loaded& out, fatbin_failure& failure) const;

  std::span<const unsigned char> image_;
  std::span<const char* const> kernels_;
  // Held while a context's module loads: a first launch waits for another thread's load of the same
  // module instead of loading a second one. Loads are rare (once per context), launches only look up.
  std::mutex mutex_;
  std::unordered_map<unsigned long long, loaded> by_context_;  // by cuCtxGetId
};

// cuLaunchKernel of `function` with `shape` on `stream` (z dimensions 1, no dynamic shared memory):
// kernel_params as the driver takes them, one pointer per parameter of the kernel, read at launch.
// Returns the driver status.
CUresult launch_kernel(CUfunction function, const launch_geometry& shape, void** kernel_params,
                       CUstream stream) noexcept;

}  // namespace ferry::detail
