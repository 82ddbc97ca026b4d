// Gather and scatter as lists of blocks for ferry_copy_blocks (launch_copy_blocks): built on the host,
// uploaded with one copy, copied in one launch.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace ferry::detail {

// The three arrays launch_copy_blocks reads, back to back so that one copy uploads them: words
// [0, count) are the sources, [count, 2 count) the destinations, [2 count, 3 count) the sizes.
struct copy_block_list {
  std::vector<std::uint64_t> words;

  std::size_t count() const noexcept { return words.size() / 3; }
  std::size_t bytes() const noexcept { return words.size() * sizeof(std::uint64_t); }
};

// Gather: block i, the sizes[i] bytes at sources[i], goes to destination + (sizes[0] + ... + sizes[i-1]),
// so the blocks end up packed in order in [destination, destination + the sum of sizes). Packing is
// tight: a block whose packed place is aligned differently from its source is copied with narrower
// accesses. Throws std::invalid_argument when the spans differ in length or the packed range does not
// fit in the address space.
copy_block_list gather_list(std::span<const CUdeviceptr> sources, std::span<const std::size_t> sizes,
                            CUdeviceptr destination);

// Scatter, the reverse: the packed blocks of [source, source + the sum of sizes) go to destinations[i].
// Throws std::invalid_argument as gather_list does.
copy_block_list scatter_list(CUdeviceptr source, std::span<const CUdeviceptr> destinations,
                             std::span<const std::size_t> sizes);

// launch_copy_blocks of a list whose words() were copied to `uploaded` (8-byte aligned device memory).
CUresult launch_copy_block_list(CUdeviceptr uploaded, std::size_t count, CUstream stream) noexcept;

}  // namespace ferry::detail
