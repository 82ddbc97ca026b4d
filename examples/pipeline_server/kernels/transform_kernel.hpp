// The pipeline server's GPU step on a stream: ferry_transform_checksum (transform.hpp defines what it
// computes), launched from the example's own fatbin (fatbin.hpp). The first launch in a context loads
// the fatbin into it (one module, through ferry's public kernel_module: ferry/kernel_module.hpp), where
// it stays for the context's life; unload_transform_kernel() unloads it earlier. On the sim backend the
// kernel is the host twin that :sim_twin registers.
//
// Context: the launch runs in the calling thread's current context, on `stream`, which must belong to
// it. The addresses are device memory of that context and must stay valid until the stream has run the
// kernel.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>

#include "ferry/stream.hpp"

namespace ferry::pipeline::kernels {

// On `stream`: zeroes the 64-bit word at `checksum` (8-byte aligned device memory), then runs
// ferry_transform_checksum over the `bytes` bytes at `data` (16-byte aligned when bytes > 0): with mode
// transform_in_place each word is transformed in place and the checksum is taken of the result, with
// checksum_only the data is only summed (parameters.hpp). The checksum is in place when the stream has
// run both; nothing is left for the caller to clean up.
//
// Never throws; returns the driver status. CUDA_ERROR_INVALID_VALUE, before anything is loaded or
// enqueued, unless mode is one of the two, checksum is non-null and 8-byte aligned, and [data, data +
// bytes) is a range of addresses starting 16-byte aligned (data may be null only when bytes is 0);
// CUDA_ERROR_INVALID_CONTEXT when no context is current; otherwise the status of loading the module, of
// the zeroing or of cuLaunchKernel. As with any kernel, a fault while it runs surfaces later on the
// stream, as the sticky CUDA_ERROR_ILLEGAL_ADDRESS.
CUresult launch_transform_checksum(CUdeviceptr data, std::size_t bytes, CUdeviceptr checksum, std::uint64_t mode,
                                   stream_ref stream) noexcept;

// Unloads the kernel's module from the current context if a launch loaded it there (CUDA_SUCCESS when
// it had none); the next launch loads it again. Returns cuModuleUnload's status, or
// CUDA_ERROR_INVALID_CONTEXT when no context is current. Launches in the context must not race with it.
CUresult unload_transform_kernel() noexcept;

}  // namespace ferry::pipeline::kernels
