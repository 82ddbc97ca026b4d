// The fuzzer's bytes read as arguments: integers taken from the front of the input (zeros once it is
// used up), and pickers that steer most draws toward the values where argument checks break (0, 1,
// the edge of an allocation, one past it, values whose products overflow size_t, addresses that wrap).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

namespace ferry::fuzz {

class fuzz_input {
 public:
  fuzz_input(const std::uint8_t* data, std::size_t size) noexcept : data_(data), left_(size) {}

  bool empty() const noexcept { return left_ == 0; }

  std::uint8_t byte() noexcept {
    if (left_ == 0) return 0;
    --left_;
    return *data_++;
  }
  std::uint16_t u16() noexcept { return static_cast<std::uint16_t>(byte() | (byte() << 8)); }
  std::uint64_t u64() noexcept {
    std::uint64_t value = 0;
    for (int i = 0; i < 8; ++i) value |= std::uint64_t{byte()} << (8 * i);
    return value;
  }
  // One of `choices` values, 0 to choices - 1.
  unsigned choose(unsigned choices) noexcept { return byte() % choices; }

 private:
  const std::uint8_t* data_;
  std::size_t left_;
};

inline constexpr std::size_t size_max = std::numeric_limits<std::size_t>::max();

// A count of elements of `element_size` bytes for an array of `room` bytes.
inline std::size_t pick_count(fuzz_input& in, std::size_t element_size, std::size_t room) {
  switch (in.choose(11)) {
    case 0: return 0;
    case 1: return 1;
    case 2: return in.byte();
    case 3: return room / element_size;
    case 4: return room / element_size + 1;
    case 5: return size_max;
    case 6: return size_max / element_size + 1;  // the byte count overflows size_t
    case 7: return in.u64();
    case 8: return std::size_t{1} << 32;
    case 9: return room / element_size - in.byte() % 4;
    default: return in.u16() % (room / element_size + 2);
  }
}

// A byte offset from the start of an allocation of `room` bytes (wraps for "negative" ones). Offsets
// stay within a few bytes of the allocation (or go far past it): the memory next to it may be someone
// else's allocation (the engine's staging chunks), which the fuzzer's model does not know.
inline std::size_t pick_offset(fuzz_input& in, std::size_t element_size, std::size_t room) {
  switch (in.choose(8)) {
    case 0: return 0;
    case 1: return element_size * (in.byte() % 16);
    case 2: return room - element_size * (in.byte() % 4);
    case 3: return room;
    case 4: return in.u16() % (room + 16);
    case 5: return in.u64();
    case 6: return size_max - element_size * (in.byte() % 4);  // just below the start
    default: return element_size * (in.u16() % (room / element_size + 2));
  }
}

// A 2-D extent: width, height, pitch, x or y, in elements.
inline std::size_t pick_extent(fuzz_input& in) {
  switch (in.choose(10)) {
    case 0: return 0;
    case 1: return 1;
    case 2: return in.byte() % 70;
    case 3: return 64;
    case 4: return size_max;
    case 5: return std::size_t{1} << 62;
    case 6: return std::size_t{1} << 63;
    case 7: return in.u64();
    case 8: return size_max - in.byte();
    default: return in.byte() % 16;
  }
}

}  // namespace ferry::fuzz
