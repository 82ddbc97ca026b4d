// The integers of the pipeline's messages (protocol.hpp, stage_protocol.hpp): little-endian, copied
// into and out of byte buffers as they lie in memory, at any alignment.
#pragma once

#include <bit>
#include <cstddef>
#include <cstring>

namespace ferry::pipeline::wire {

static_assert(std::endian::native == std::endian::little, "the protocol's integers are copied as they lie");

template <class T>
void put(std::byte* out, T value) noexcept {
  std::memcpy(out, &value, sizeof value);
}

template <class T>
T get(const std::byte* in) noexcept {
  T value;
  std::memcpy(&value, in, sizeof value);
  return value;
}

}  // namespace ferry::pipeline::wire
