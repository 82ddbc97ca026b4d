// Seeded pseudo-random test data, and byte-exact comparison that names the first difference.
#pragma once

#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <optional>
#include <random>
#include <span>
#include <type_traits>
#include <vector>

namespace ferry::testing {

// Fills `out` with bytes from a seeded generator: never zeros or a constant pattern.
inline void fill_random(std::span<std::byte> out, std::uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::size_t i = 0;
  for (; i + 8 <= out.size(); i += 8) {
    std::uint64_t word = generator();
    std::memcpy(out.data() + i, &word, 8);
  }
  std::uint64_t word = generator();
  for (; i < out.size(); ++i, word >>= 8) out[i] = static_cast<std::byte>(word & 0xff);
}

template <class T>
  requires std::is_trivially_copyable_v<T>
std::vector<T> random_vector(std::size_t count, std::uint64_t seed) {
  std::vector<T> values(count);
  fill_random(std::as_writable_bytes(std::span(values)), seed);
  return values;
}

template <class T>
void fill_random(std::span<T> out, std::uint64_t seed) {
  fill_random(std::as_writable_bytes(out), seed);
}

// A byte that differs from every byte a test writes on purpose: destinations are poisoned with it
// before a transfer so that bytes the transfer failed to write are caught.
inline constexpr std::byte poison{0xA5};

template <class T>
void poison_fill(std::span<T> out) {
  std::memset(out.data(), static_cast<int>(poison), out.size_bytes());
}

// Index of the first differing byte, or nullopt when equal (sizes must match).
inline std::optional<std::size_t> first_difference(std::span<const std::byte> a, std::span<const std::byte> b) {
  if (a.size() != b.size()) return std::min(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return i;
  }
  return std::nullopt;
}

// Byte equality of two arrays: floats with random bits include NaNs, which == would call unequal.
template <class T>
bool same_bytes(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && !first_difference(std::as_bytes(std::span(a)), std::as_bytes(std::span(b)));
}

}  // namespace ferry::testing
