// Launches of the kernels in kernels/: fills of 8- and 16-byte patterns, 2-D fills with elements of 1 to
// 16 bytes, and copies of many blocks in one launch (gather and scatter: copy_block_list.hpp).
//
// Context: a launch runs in the calling thread's current context, on `stream`, which must belong to that
// context (a null stream is its legacy stream). Every address is device-accessible memory of that
// context (device, managed, or mapped host memory) and must stay valid until the stream has run the
// kernel; the launch itself neither reads nor checks it.
//
// Loading: the first launch in a context loads the kernels into it (one module: cuModuleLoadData of the
// embedded fatbin, thread-safe), and they stay loaded for the context's life (the driver frees the
// module with the context; ferry keys its modules by context ID, so a context that comes back loads
// them again). unload_kernels() unloads them earlier.
//
// Errors: no function throws; each returns the driver status. CUDA_ERROR_INVALID_VALUE for arguments the
// kernel cannot take (see kernel_parameters.hpp), found before anything is loaded or enqueued;
// CUDA_ERROR_INVALID_CONTEXT when no context is current; otherwise the status of cuModuleLoadData,
// cuModuleGetFunction or cuLaunchKernel. An empty launch (nothing to write) succeeds at once and enqueues
// nothing. As with any kernel, a fault while it runs (an address outside device memory) surfaces later on
// the stream, as the sticky CUDA_ERROR_ILLEGAL_ADDRESS.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>

namespace ferry::detail {

// Writes `count` elements of `element_size` bytes (8 or 16) from `destination`, each a copy of the
// element_size bytes at `pattern`. `destination` needs no particular alignment.
CUresult launch_fill(CUdeviceptr destination, std::size_t count, std::size_t element_size, const void* pattern,
                     CUstream stream) noexcept;

// Writes `height` rows of `width_elements` elements of `element_size` bytes (1, 2, 4, 8 or 16), row y
// from base + y * pitch_bytes, each element a copy of the element_size bytes at `pattern`. The bytes
// between rows are left alone. pitch_bytes >= width_elements * element_size when height > 1.
CUresult launch_fill_2d(CUdeviceptr base, std::size_t pitch_bytes, std::size_t width_elements, std::size_t height,
                        std::size_t element_size, const void* pattern, CUstream stream) noexcept;

// For i in [0, count): copies sizes[i] bytes from sources[i] to destinations[i], where the three are
// 8-byte aligned arrays of `count` 64-bit words in device memory (read when the kernel runs). Blocks are
// copied concurrently, in no particular order: no destination range may overlap another block's
// destination or any source range. Blocks may be empty and need no alignment; the copy is widest
// (16-byte accesses) when a block's source and destination are aligned alike modulo 16.
CUresult launch_copy_blocks(CUdeviceptr sources, CUdeviceptr destinations, CUdeviceptr sizes, std::size_t count,
                            CUstream stream) noexcept;

// Copies `bytes` bytes from `source` to `destination` with the SMs of the current context's device (the
// whole grid on one span, 16-byte accesses where both ends are aligned alike modulo 16). Either end may be
// another device's memory that the context reaches through peer access; the two ranges must not overlap.
CUresult launch_copy_span(CUdeviceptr source, CUdeviceptr destination, std::size_t bytes, CUstream stream) noexcept;

// Starts the resident copier (kernels/parameters.hpp, resident_slot): one block on `stream` that copies
// the entries posted to the ring of `slots` slots at `ring` (mapped page-locked memory), from entry
// `first` on, writing the entries it has read to the 64-bit word at `consumed`, until an entry of kind
// resident_stop. The kernel runs until then: `stream` (and a cuCtxSynchronize) waits for it.
CUresult launch_resident_copy(CUdeviceptr ring, std::size_t slots, std::uint64_t first, CUdeviceptr consumed,
                              CUstream stream) noexcept;

// Unloads the kernels from the current context if a launch loaded them there (CUDA_SUCCESS when it had
// none); the next launch in the context loads them again. Returns cuModuleUnload's status, or
// CUDA_ERROR_INVALID_CONTEXT when no context is current. Launches in the context must not race with it.
CUresult unload_kernels() noexcept;

}  // namespace ferry::detail
