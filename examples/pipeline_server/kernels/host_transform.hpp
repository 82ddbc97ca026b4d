// The host form of ferry_transform_checksum: the sim's twin runs it (sim_twin.cc), and the tests on a GPU
// run it as the reference the kernel is compared with, so twin and reference are one piece of code. It
// computes the words of transform.hpp in order, one at a time, where the kernel computes them in parallel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "examples/pipeline_server/kernels/parameters.hpp"

namespace ferry::pipeline::kernels {

// Transforms (or only sums) `bytes` bytes at `data` as ferry_transform_checksum does, and returns the
// checksum of the result (the sum the kernel adds to its checksum word).
std::uint64_t transform_checksum_range(std::byte* data, std::uint64_t bytes, std::uint64_t mode) noexcept;

// The checksum of the `bytes` bytes at `data` once transformed, leaving them alone: what transform
// reports for them, and what a forward's reply must carry (the next stage sums the transformed bytes).
std::uint64_t transformed_checksum(const std::byte* data, std::uint64_t bytes) noexcept;

// The kernel on parameters `p`: adds the checksum to the word at p.checksum, as the kernel's atomics do.
// Device addresses become host memory through `to_host(address, bytes) -> void*`, which throws when
// [address, address + bytes) is not memory the kernel may touch (ferry::sim::host_address in the twin).
template <class ToHost>
void transform_checksum(const transform_checksum_parameters& p, ToHost&& to_host) {
  auto* checksum = static_cast<std::byte*>(to_host(p.checksum, sizeof(std::uint64_t)));
  const std::uint64_t sum =
      p.bytes == 0 ? 0 : transform_checksum_range(static_cast<std::byte*>(to_host(p.data, p.bytes)), p.bytes, p.mode);
  std::uint64_t word = 0;
  std::memcpy(&word, checksum, sizeof word);
  word += sum;
  std::memcpy(checksum, &word, sizeof word);
}

}  // namespace ferry::pipeline::kernels
