// The index arithmetic of the kernels: how a byte range splits into an unaligned head, wide aligned units
// and a tail, which pattern a wide store writes, and how wide a copy can go. The kernels (nvcc, device
// code, through --expt-relaxed-constexpr) and their host twins (g++) call these same functions, so the
// sim backend runs the very splits the GPU runs and the tests on sim check them byte for byte.
#pragma once

#include <cstdint>

#include "kernels/parameters.hpp"

namespace ferry::detail::kernels {

// Byte `offset` of a fill that repeats `pattern` from its first byte.
constexpr std::uint8_t pattern_byte(pattern16 pattern, std::uint64_t offset) {
  offset %= 16;
  const std::uint64_t word = offset < 8 ? pattern.low : pattern.high;
  return static_cast<std::uint8_t>(word >> (8 * (offset % 8)));
}

// The 16 bytes such a fill holds from byte `offset` on: byte k of the result is pattern byte
// (offset + k) % 16. A wide store at an aligned address inside the fill writes this rotation.
constexpr pattern16 rotated(pattern16 pattern, std::uint64_t offset) {
  offset %= 16;
  if (offset >= 8) {
    pattern = pattern16{pattern.high, pattern.low};
    offset -= 8;
  }
  if (offset == 0) return pattern;  // shifting a 64-bit word by 64 would be undefined
  const unsigned shift = static_cast<unsigned>(8 * offset);
  return pattern16{(pattern.low >> shift) | (pattern.high << (64 - shift)),
                   (pattern.high >> shift) | (pattern.low << (64 - shift))};
}

// A byte range cut for accesses `width` bytes wide: `head` bytes up to the first address aligned to
// `width` (all of them when the range ends first), `units` aligned units of `width` bytes, `tail` bytes.
struct split {
  std::uint64_t head;
  std::uint64_t units;
  std::uint64_t tail;
};

// `width` is a power of two.
constexpr split split_at_width(std::uint64_t address, std::uint64_t bytes, std::uint64_t width) {
  std::uint64_t head = (width - address % width) % width;
  if (head > bytes) head = bytes;
  const std::uint64_t units = (bytes - head) / width;
  return split{head, units, bytes - head - units * width};
}

// The widest access (16, 8, 4, 2 or 1 bytes) that can be aligned at both ends of a copy: the largest
// power of two, at most 16, dividing source - destination. Once the destination is aligned to it, so
// is the source. Copies whose ends are misaligned to each other fall back to narrower accesses rather
// than shifting words into place: gathered records normally share their alignment, and even byte
// accesses stay coalesced across a warp.
constexpr std::uint64_t copy_width(std::uint64_t source, std::uint64_t destination) {
  const std::uint64_t difference = (source - destination) | 16;
  return difference & (~difference + 1);
}

}  // namespace ferry::detail::kernels
