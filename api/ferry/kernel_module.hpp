// A program's own kernels on ferry's contexts and streams: kernel_module loads the program's embedded
// fatbin into each context on first use, through the driver backend ferry chose, and launches its
// kernels on a ferry stream. On the sim backend (FERRY_BACKEND=sim) the same calls run the host twins
// the program registered under the kernels' names (ferry::sim::register_kernel), so the program's
// kernels run, and are tested, on either backend.
#pragma once

#include "ferry/detail/require_cxx20.hpp"

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <source_location>
#include <span>

#include "ferry/stream.hpp"

namespace ferry {

// Blocks in a grid, or threads in a block, along x, y and z.
struct launch_dims {
  unsigned x = 1;
  unsigned y = 1;
  unsigned z = 1;
};

// The shape of a launch: launch_shape{{blocks}, {threads_per_block}} for a 1-D launch.
struct launch_shape {
  launch_dims grid;
  launch_dims block;
};

// The kernels of one embedded fatbin, loaded into a context on the first call that needs them there
// (cuModuleLoadData, then cuModuleGetFunction for each name): one module per context, loaded once even
// when threads race on a context's first call, and kept for the context's life (a primary context that
// is released and retained again loads it again). Every call acts in the calling thread's current
// context. Thread-safe.
//
// Lifetime: create one per fatbin and keep it for the whole process, e.g.
//   static ferry::kernel_module& module = *new ferry::kernel_module(image, names);
// and never destroy it. Its modules belong to the contexts, which the driver frees with their modules at
// exit: a destructor that unloaded them would race the driver's own teardown, and a static that is
// destroyed at exit would leave launches from other threads or later static destructors with a dead
// object. Destroying it anyway frees only its own bookkeeping, and leaves its modules loaded until
// their contexts go (unload_current() in each context first frees them sooner).
class kernel_module {
 public:
  // `image`: a fatbin or cubin for cuModuleLoadData, 64-byte aligned; `kernels`: the names of
  // the kernels to look up in it (extern "C" names, or mangled ones), kernel i being kernels[i]. Both
  // must outlive this object. Loads nothing yet. Throws std::invalid_argument when `image` or `kernels`
  // is empty or a name is null; std::bad_alloc.
  kernel_module(std::span<const unsigned char> image, std::span<const char* const> kernels);
  kernel_module(const kernel_module&) = delete;
  kernel_module& operator=(const kernel_module&) = delete;
  ~kernel_module();

  std::size_t kernel_count() const noexcept;

  // Kernel `kernel` in the current context, the module loaded there first if it is not yet.
  // Throws std::invalid_argument when kernel >= kernel_count(); cuda_error (sticky_cuda_error,
  // out_of_memory) naming the driver call that failed: cuCtxGetCurrent when no context is current,
  // cuModuleLoadData, cuModuleGetFunction (for a name the image lacks: CUDA_ERROR_NOT_FOUND).
  CUfunction function(std::size_t kernel, std::source_location where = std::source_location::current()) const;

  // Launches kernel `kernel` on `stream` (a stream of the current context) with `shape` and no dynamic
  // shared memory, loading the module first as function() does. `params`: one pointer per parameter of
  // the kernel, to its value, as cuLaunchKernel takes them (read at launch, so they may go when this
  // returns); null for a kernel without parameters. Throws std::invalid_argument, before anything is
  // loaded or enqueued, when kernel >= kernel_count() or a dimension of `shape` is 0; cuda_error naming
  // the failing call as function() does, or cuLaunchKernel (a stream of another context, a block too
  // large for the kernel). As with any kernel, a fault while it runs surfaces later on the stream.
  void launch(std::size_t kernel, launch_shape shape, void** params, stream_ref stream,
              std::source_location where = std::source_location::current()) const;

  // The threads the current context's device keeps resident at once (multiprocessors x threads per
  // multiprocessor): one full wave, which grid-stride kernels size their grids to. Loads the module as
  // function() does, and throws as it does.
  std::uint64_t resident_threads(std::source_location where = std::source_location::current()) const;

  // Unloads the module from the current context if it was loaded there (nothing to do otherwise); the
  // next call that needs it loads it again. Launches in the context must not race with it. Throws
  // cuda_error naming cuCtxGetCurrent when no context is current, or cuModuleUnload.
  void unload_current(std::source_location where = std::source_location::current());
  // The same, for destructors and cleanup paths: returns the driver status instead of throwing
  // (CUDA_ERROR_INVALID_CONTEXT when no context is current).
  CUresult unload_current_nothrow() noexcept;

 private:
  struct state;
  std::unique_ptr<state> state_;
};

}  // namespace ferry
