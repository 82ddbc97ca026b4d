// The parameters of ferry_transform_checksum (transform_checksum.cu), one struct passed by value. The
// launcher (transform_kernel.cc), the kernel and its host twin all read this one definition, so the
// layout in kernelParams cannot drift between them. Plain 64-bit fields: the same layout under nvcc and g++.
#pragma once

#include <cstdint>

namespace ferry::pipeline::kernels {

// The `bytes` bytes at `data` (16-byte aligned), as words of transform.hpp. mode transform_in_place:
// each word is replaced by transform_word of it, and the checksum is taken of the result; mode
// checksum_only: the data is left alone and the checksum is taken of it. The checksum (the sum of
// checksum_term over the words) is added to the 64-bit word at `checksum` (8-byte aligned), which the
// launcher zeroes first on the same stream.
struct transform_checksum_parameters {
  std::uint64_t data;
  std::uint64_t bytes;
  std::uint64_t checksum;
  std::uint64_t mode;
};
inline constexpr std::uint64_t transform_in_place = 0;
inline constexpr std::uint64_t checksum_only = 1;

// Threads per block, fixed at compile time so that the kernel can promise it in __launch_bounds__ (which
// lets ptxas budget registers for full occupancy) and the launcher cannot ask for more: the shape of
// ferry's fills (a grid-stride walk over 16-byte units, 256 threads, 8 blocks per SM at Hopper's 2048
// resident threads), plus one atomic add per warp.
inline constexpr unsigned transform_block_threads = 256;

}  // namespace ferry::pipeline::kernels
