// Each transfer in two steps, shared by the synchronous Marshal calls and the async engine: plan_*
// checks the arguments (std::invalid_argument, before anything is enqueued) and works out what to ask of
// the driver; enqueue_* asks it. For the engine, prepare_* does both in a prepared_transfer: the checks
// at once, the enqueue when the engine starts it on a stream. Call prepare_* in the engine's context:
// the checks ask the driver about the pointers.
#pragma once

#include <cuda.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "engine/transfer/prepared_transfer.hpp"
#include "ferry/detail/transfer.hpp"

namespace ferry::detail {

enum class direction { host_to_device, device_to_host, device_to_device };
// Which way a copy between these sides goes; at most one of them is host memory (plan_copy_1d checks).
inline direction copy_direction(const endpoint& source, const endpoint& destination) noexcept {
  if (source.kind != memory_kind::device) return direction::host_to_device;
  return destination.kind != memory_kind::device ? direction::device_to_host : direction::device_to_device;
}

struct plan_1d {
  std::size_t bytes;
  direction way;
  bool kernels_reach = false;  // every device side is memory of the current context's device
  // The ordinals of the devices holding the sides' memory (-1 for host memory, a copy of no bytes, or
  // memory whose device the driver does not report).
  int source_device = -1;
  int destination_device = -1;
};
plan_1d plan_copy_1d(std::string_view operation, std::size_t count, std::size_t element_size, const endpoint& source,
                     const endpoint& destination);
// stream: nullopt = the synchronous call. Sets `call` to the driver entry point's name.
CUresult enqueue_copy_1d(const plan_1d& plan, const endpoint& source, const endpoint& destination,
                         stream_choice stream, const char*& call);
// Also refuses pageable memory that is device memory: the engine may stage it, and reads or writes it
// on the host then.
prepared_transfer prepare_copy_1d(std::string_view operation, std::size_t count, std::size_t element_size,
                                  const endpoint& source, const endpoint& destination);

// The descriptor for cuMemcpy2D[Async]; WidthInBytes or Height is 0 when there is nothing to copy.
CUDA_MEMCPY2D plan_copy_2d(std::string_view operation, std::size_t width, std::size_t height, std::size_t element_size,
                           const endpoint& source, const plane& source_plane, const endpoint& destination,
                           const plane& destination_plane);
prepared_transfer prepare_copy_2d(std::string_view operation, std::size_t width, std::size_t height,
                                  std::size_t element_size, const endpoint& source, const plane& source_plane,
                                  const endpoint& destination, const plane& destination_plane);

std::size_t plan_copy_peer(std::string_view operation, std::size_t count, std::size_t element_size, CUdeviceptr source,
                           CUcontext source_context, CUdeviceptr destination, CUcontext destination_context);
prepared_transfer prepare_copy_peer(std::string_view operation, std::size_t count, std::size_t element_size,
                                    CUdeviceptr source, CUcontext source_context, CUdeviceptr destination,
                                    CUcontext destination_context);

// A vectored transfer's blocks, checked: byte sizes, each side inside memory the driver knows (pageable
// host memory: not null, not device memory), host and device sides apart, the written sides disjoint.
// Every message names the block (blocks[i].host, blocks[i].device).
struct checked_block {
  std::uintptr_t host;
  CUdeviceptr device;
  std::size_t bytes;
};
// Copies as the copy kernel (ferry_copy_blocks) and cuMemcpyBatchAsync take them: copy j moves sizes[j]
// bytes from sources[j] to destinations[j].
struct copy_arrays {
  CUdeviceptr* sources = nullptr;
  CUdeviceptr* destinations = nullptr;
  std::size_t* sizes = nullptr;

  // Sets copy j: `bytes` from host to device memory where to_device, else the other way.
  void put(std::size_t j, std::uintptr_t host, CUdeviceptr device, std::size_t bytes, bool to_device) const noexcept {
    sources[j] = to_device ? host : device;
    destinations[j] = to_device ? device : host;
    sizes[j] = bytes;
  }
  // Copies `count` copies from index `first` on into `to`, from its index 0.
  void copy_to(const copy_arrays& to, std::size_t first, std::size_t count) const noexcept {
    std::copy_n(sources + first, count, to.sources);
    std::copy_n(destinations + first, count, to.destinations);
    std::copy_n(sizes + first, count, to.sizes);
  }
};
// A block whose device side is memory that the current context's kernels cannot reach.
struct foreign_block {
  std::size_t index;
  CUdeviceptr device;  // blocks[index].device
  int ordinal;         // of the memory's device (-1 where the driver did not say)
};
struct checked_blocks {
  // The blocks that hold bytes, in list order (empty ones are checked only); none where plan_blocks was
  // given arrays, which hold them instead.
  std::vector<checked_block> blocks;
  std::size_t copies = 0;  // how many blocks hold bytes
  std::size_t bytes = 0;   // all blocks together
  // The first block whose device side is memory of another device than the current context's: a kernel
  // launched in the current context cannot reach it.
  std::optional<foreign_block> foreign_device_block;
};
// `arrays`, where given (room for blocks.size() copies each), receive the blocks that hold bytes as copies,
// the first at index 0: a page-locked list's copies written where the GPU reads them, in the checks' own
// pass over the list.
checked_blocks plan_blocks(std::string_view operation, bool to_device, memory_kind host_kind,
                           const block_source& blocks, std::size_t element_size,
                           const copy_arrays* arrays = nullptr);

std::size_t plan_fill(std::string_view operation, CUdeviceptr destination, std::size_t count, std::size_t element_size);
// `pattern`: element_size bytes. No stream: the legacy stream, waited for.
CUresult enqueue_fill(CUdeviceptr destination, std::size_t count, std::size_t element_size, const void* pattern,
                      stream_choice stream, const char*& call);
// Keeps a copy of the pattern: the op may start after the caller's value is gone.
prepared_transfer prepare_fill(std::string_view operation, CUdeviceptr destination, std::size_t count,
                               std::size_t element_size, const void* pattern);

std::size_t plan_prefetch(std::string_view operation, CUdeviceptr pointer, std::size_t count, std::size_t element_size,
                          const CUmemLocation& location);
prepared_transfer prepare_prefetch(std::string_view operation, CUdeviceptr pointer, std::size_t count,
                                   std::size_t element_size, const CUmemLocation& location);
std::size_t plan_attach(std::string_view operation, CUdeviceptr pointer, std::size_t count, std::size_t element_size,
                        attach_flag flag);

}  // namespace ferry::detail
