// Fills of patterns the driver's memsets cannot write: 8- and 16-byte elements (ferry_fill_8,
// ferry_fill_16) and rows of a pitched array with elements of 1 to 16 bytes (ferry_fill_2d).
//
// A fill is a stream of stores and nothing else, so it runs at the write bandwidth of the memory only
// if every warp store moves as many bytes as it can: every thread stores 16 bytes at a 16-byte aligned
// address (one st.global.v2.u64, 512 contiguous bytes per warp), a few bytes of unaligned head and tail
// aside. The 1-D fills give each block one tile of fill_units_per_thread units per thread, contiguous,
// and the launcher a block per tile: blocks that finish their tile and leave make room for the next,
// which keeps the memory busier than one wave of blocks striding over the whole range
// (bench/transfer_bandwidth's fill64 row; the 2-D fill keeps the wave). Past the grid's limit, blocks
// take further tiles in a loop.
#include <cstdint>

#include "kernels/global_memory.cuh"
#include "kernels/layout.hpp"
#include "kernels/parameters.hpp"

namespace ferry::detail::kernels {
namespace {

// Thread `thread` of `threads` writes its share of the fill of [start, start + bytes), which repeats
// `pattern` from `start`: head bytes one by one, then 16-byte aligned units (each holding the pattern
// rotated to its offset, which is the same for all of them), then tail bytes.
__device__ __forceinline__ void fill_share(std::uint64_t start, std::uint64_t bytes, pattern16 pattern,
                                           std::uint64_t thread, std::uint64_t threads) {
  const split parts = split_at_width(start, bytes, 16);
  std::uint8_t* const out = global<std::uint8_t>(start);
  for (std::uint64_t k = thread; k < parts.head; k += threads) out[k] = pattern_byte(pattern, k);

  const pattern16 wide = rotated(pattern, parts.head);
  const ulonglong2 value = make_ulonglong2(wide.low, wide.high);
  ulonglong2* const units = global<ulonglong2>(start + parts.head);
  std::uint64_t i = thread;
  for (; i + 3 * threads < parts.units; i += 4 * threads) {
    units[i] = value;
    units[i + threads] = value;
    units[i + 2 * threads] = value;
    units[i + 3 * threads] = value;
  }
  for (; i < parts.units; i += threads) units[i] = value;

  const std::uint64_t tail = parts.head + 16 * parts.units;
  for (std::uint64_t k = thread; k < parts.tail; k += threads) out[tail + k] = pattern_byte(pattern, tail + k);
}

// The 1-D form: the head and tail bytes as fill_share has them; the units in tiles of
// fill_units_per_thread * blockDim.x, one per block (the grid's blocks take further tiles in turn), each
// thread storing fill_units_per_thread units one block width apart, so that a warp's stores are
// contiguous.
__device__ __forceinline__ void fill_tiles(std::uint64_t start, std::uint64_t bytes, pattern16 pattern) {
  const std::uint64_t thread = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::uint64_t threads = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  const split parts = split_at_width(start, bytes, 16);
  std::uint8_t* const out = global<std::uint8_t>(start);
  for (std::uint64_t k = thread; k < parts.head; k += threads) out[k] = pattern_byte(pattern, k);

  const pattern16 wide = rotated(pattern, parts.head);
  const ulonglong2 value = make_ulonglong2(wide.low, wide.high);
  ulonglong2* const units = global<ulonglong2>(start + parts.head);
  const std::uint64_t tile = static_cast<std::uint64_t>(fill_units_per_thread) * blockDim.x;
  for (std::uint64_t first = blockIdx.x * tile; first < parts.units; first += gridDim.x * tile) {
    for (unsigned k = 0; k < fill_units_per_thread; ++k) {
      const std::uint64_t i = first + threadIdx.x + static_cast<std::uint64_t>(k) * blockDim.x;
      if (i < parts.units) units[i] = value;
    }
  }

  const std::uint64_t tail = parts.head + 16 * parts.units;
  for (std::uint64_t k = thread; k < parts.tail; k += threads) out[tail + k] = pattern_byte(pattern, tail + k);
}

__device__ __forceinline__ std::uint64_t global_thread_x() {
  return static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ std::uint64_t thread_count_x() {
  return static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
}

}  // namespace
}  // namespace ferry::detail::kernels

using namespace ferry::detail::kernels;

// Both 1-D fills are one byte-level fill: an 8-byte pattern is a 16-byte pattern with equal halves, so
// ferry_fill_8 needs no alignment beyond what the 16-byte units already handle.
extern "C" __global__ void __launch_bounds__(fill_block_threads) ferry_fill_8(fill_parameters p) {
  fill_tiles(p.destination, p.count * 8, pattern16{p.pattern.low, p.pattern.low});
}

extern "C" __global__ void __launch_bounds__(fill_block_threads) ferry_fill_16(fill_parameters p) {
  fill_tiles(p.destination, p.count * 16, p.pattern);
}

// x spans a row, y walks the rows. The launcher shapes the block to the rows (narrow rows get fewer
// threads across and more rows per block), so that short rows do not leave most of a block idle.
extern "C" __global__ void __launch_bounds__(fill_block_threads) ferry_fill_2d(fill_2d_parameters p) {
  const std::uint64_t rows_at_once = static_cast<std::uint64_t>(gridDim.y) * blockDim.y;
  for (std::uint64_t y = static_cast<std::uint64_t>(blockIdx.y) * blockDim.y + threadIdx.y; y < p.height;
       y += rows_at_once) {
    fill_share(p.base + y * p.pitch, p.row_bytes, p.pattern, global_thread_x(), thread_count_x());
  }
}
