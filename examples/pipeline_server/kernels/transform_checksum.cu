// ferry_transform_checksum: the pipeline server's GPU step. It transforms a request's bytes in place and
// sums their checksum (transform.hpp defines both), or only sums.
//
// Shaped like the fills: a grid of one wave walks the data in 16-byte units (two words, one 16-byte load
// and store per thread per step), so the pass runs at memory bandwidth. Each thread keeps its own partial
// sum; a warp adds its 32 sums with shuffles and one lane adds the warp's total to the checksum word with
// one atomic, so atomics cost one per warp, not one per word. The last 1 to 15 bytes (the data need not
// be a whole number of units) are one thread's: loaded and stored byte by byte, zero-padded for the sum.
#include <cstddef>
#include <cstdint>

#include "examples/pipeline_server/kernels/parameters.hpp"
#include "examples/pipeline_server/kernels/transform.hpp"

namespace ferry::pipeline::kernels {
namespace {

// Device addresses arrive as integers (the parameter struct is shared with the host). Converting through
// the global-to-generic intrinsic tells the compiler that they are global memory, so it emits ld.global
// / st.global rather than generic accesses that must first find the window of the address.
template <class T>
__device__ __forceinline__ T* global(std::uint64_t address) {
  return static_cast<T*>(__cvta_global_to_generic(static_cast<std::size_t>(address)));
}

// Word j of the data, either transformed in place (returning the result) or left alone.
__device__ __forceinline__ std::uint64_t visit_word(std::uint64_t word, std::uint64_t j, bool transform) {
  return transform ? transform_word(word, j) : word;
}

// The last `bytes` (1 to 15) bytes, which start at word `first_word`.
__device__ __forceinline__ std::uint64_t tail_share(std::uint8_t* tail, std::uint64_t bytes, std::uint64_t first_word,
                                                   bool transform) {
  std::uint64_t sum = 0;
  for (std::uint64_t start = 0; start < bytes; start += 8) {
    const std::uint64_t length = bytes - start < 8 ? bytes - start : 8;
    std::uint64_t word = 0;
    for (std::uint64_t k = 0; k < length; ++k) word |= static_cast<std::uint64_t>(tail[start + k]) << (8 * k);
    const std::uint64_t j = first_word + start / 8;
    const std::uint64_t result = visit_word(word, j, transform) & partial_word_mask(length);
    if (transform) {
      for (std::uint64_t k = 0; k < length; ++k) tail[start + k] = static_cast<std::uint8_t>(result >> (8 * k));
    }
    sum += checksum_term(result, j);
  }
  return sum;
}

}  // namespace
}  // namespace ferry::pipeline::kernels

using namespace ferry::pipeline::kernels;

extern "C" __global__ void __launch_bounds__(transform_block_threads)
    ferry_transform_checksum(transform_checksum_parameters p) {
  const bool transform = p.mode == transform_in_place;
  const std::uint64_t thread = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::uint64_t threads = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  const std::uint64_t units = p.bytes / 16;
  ulonglong2* const data = global<ulonglong2>(p.data);

  std::uint64_t sum = 0;
  for (std::uint64_t i = thread; i < units; i += threads) {
    ulonglong2 unit = data[i];
    unit.x = visit_word(unit.x, 2 * i, transform);
    unit.y = visit_word(unit.y, 2 * i + 1, transform);
    if (transform) data[i] = unit;
    sum += checksum_term(unit.x, 2 * i) + checksum_term(unit.y, 2 * i + 1);
  }
  if (thread == 0 && p.bytes % 16 != 0) {
    sum += tail_share(global<std::uint8_t>(p.data + 16 * units), p.bytes % 16, 2 * units, transform);
  }

  // Every thread of the grid gets here (the launcher gives whole warps), so full-mask shuffles are safe.
  for (unsigned offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xFFFFFFFFu, sum, offset);
  if (threadIdx.x % 32 == 0 && sum != 0) {
    atomicAdd(global<unsigned long long>(p.checksum), static_cast<unsigned long long>(sum));
  }
}
