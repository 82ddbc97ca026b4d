// The data a benchmark moves and its check: random bytes from a fixed seed (every run moves the same
// bytes), and a comparison that ends the run when a result differs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace ferry::bench {

// `bytes` random bytes, eight at a time from mt19937_64(seed); a tail shorter than eight stays zero.
inline std::vector<std::uint8_t> random_bytes(std::size_t bytes, std::uint64_t seed) {
  std::vector<std::uint8_t> out(bytes);
  std::mt19937_64 generator(seed);
  for (std::size_t i = 0; i + 8 <= bytes; i += 8) {
    const std::uint64_t word = generator();
    std::memcpy(out.data() + i, &word, 8);
  }
  return out;
}

// Throws std::runtime_error naming `what` unless the two ranges hold the same bytes.
inline void require_equal(const void* a, const void* b, std::size_t bytes, const std::string& what) {
  if (std::memcmp(a, b, bytes) != 0) throw std::runtime_error(what + ": data differs after the run");
}

}  // namespace ferry::bench
