#include "engine/kernels/host_kernels.hpp"

#include <bit>

namespace ferry::detail::host_kernels {

// pattern16 keeps pattern bytes in the order of a little-endian load, as the GPU reads them.
static_assert(std::endian::native == std::endian::little, "ferry's kernels assume a little-endian host");

void fill_range(std::uint64_t address, std::byte* host, std::uint64_t bytes, kernels::pattern16 pattern) noexcept {
  const kernels::split parts = kernels::split_at_width(address, bytes, 16);
  for (std::uint64_t k = 0; k < parts.head; ++k) host[k] = std::byte{kernels::pattern_byte(pattern, k)};
  const kernels::pattern16 wide = kernels::rotated(pattern, parts.head);
  std::byte unit[16];
  std::memcpy(unit, &wide.low, 8);
  std::memcpy(unit + 8, &wide.high, 8);
  std::byte* const units = host + parts.head;
  for (std::uint64_t i = 0; i < parts.units; ++i) std::memcpy(units + 16 * i, unit, 16);
  const std::uint64_t tail = parts.head + 16 * parts.units;
  for (std::uint64_t k = 0; k < parts.tail; ++k) host[tail + k] = std::byte{kernels::pattern_byte(pattern, tail + k)};
}

void copy_range(std::uint64_t source, std::uint64_t destination, const std::byte* from, std::byte* to,
                std::uint64_t bytes) noexcept {
  // The pieces land where the kernel puts them: a cut that lost or repeated bytes shows in the tests.
  const std::uint64_t width = kernels::copy_width(source, destination);
  const kernels::split parts = kernels::split_at_width(destination, bytes, width);
  const std::uint64_t body = parts.units * width;
  std::memcpy(to, from, parts.head);
  std::memcpy(to + parts.head, from + parts.head, body);
  std::memcpy(to + parts.head + body, from + parts.head + body, parts.tail);
}

}  // namespace ferry::detail::host_kernels
