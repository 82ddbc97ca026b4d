// The fuzzer's oracle: ferry's argument rules written a second time, independently of engine/, in
// 128-bit arithmetic (nothing here can overflow), over a table of the memory the fuzzer owns. It says
// of each call whether ferry must accept it, must reject it with std::invalid_argument, may leave it to
// the driver, or must not be made at all (it would hand ferry pageable memory it cannot check).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ferry::fuzz {

using wide = unsigned __int128;
inline constexpr wide wide_size_max = static_cast<wide>(static_cast<std::size_t>(-1));

// What a call's arguments deserve; worse verdicts are larger.
enum class verdict {
  valid,           // must be accepted, must succeed, and must move the right bytes
  driver_decides,  // ferry may accept it (the driver then refuses or not); it must not crash
  unsafe,          // pageable memory outside anything the fuzzer owns: ferry cannot tell; not called
  invalid,         // must be rejected with std::invalid_argument before anything is enqueued
};
inline verdict worst(verdict a, verdict b) { return std::max(a, b); }

// The kind of memory a region is, and the kind an argument's type promises.
enum class memory { device, managed, mapped_pinned, pinned, pageable };
enum class promised { device, pinned, pageable };

inline bool is_host(promised kind) { return kind != promised::device; }

struct region {
  std::uintptr_t base;
  std::size_t size;
  memory kind;
  bool known_to_driver() const { return kind != memory::pageable; }
  bool host_accessible() const { return kind != memory::device; }
};

class memory_map {
 public:
  void add(region r) { regions_.push_back(r); }
  // The region holding `address`, among those the driver knows or all of them.
  const region* find(wide address, bool driver_only) const {
    for (const region& r : regions_) {
      if (driver_only && !r.known_to_driver()) continue;
      if (address >= r.base && address < static_cast<wide>(r.base) + r.size) return &r;
    }
    return nullptr;
  }
  const std::vector<region>& regions() const { return regions_; }

 private:
  std::vector<region> regions_;
};

// One side of a transfer: `bytes` from `address + offset`, promised to be `kind` memory.
inline verdict side_verdict(const memory_map& map, promised kind, std::uintptr_t address, wide offset, wide bytes) {
  // An empty span or vector may have no storage at all: a null pageable pointer is refused only when
  // bytes would be touched. Device and page-locked pointers are always named, never empty containers.
  if (address == 0) return kind == promised::pageable && bytes == 0 ? verdict::valid : verdict::invalid;
  if (bytes == 0) return verdict::valid;  // nothing is touched
  const wide begin = static_cast<wide>(address) + offset;
  const wide end = begin + bytes;
  if (kind == promised::pageable) {
    // A range past the end of the address space is no memory at all.
    if (end > (static_cast<wide>(1) << 64)) return verdict::invalid;
    // Otherwise ferry cannot check pageable memory; the call is only safe where the fuzzer owns the bytes.
    const region* r = map.find(begin, false);
    if (r == nullptr || end > static_cast<wide>(r->base) + r->size) return verdict::unsafe;
    return r->host_accessible() ? verdict::valid : verdict::unsafe;
  }
  const region* r = map.find(address, true);
  if (r == nullptr) return verdict::invalid;
  if (begin < r->base || end > static_cast<wide>(r->base) + r->size) return verdict::invalid;
  if (kind == promised::pinned) {
    return r->kind == memory::pinned || r->kind == memory::mapped_pinned ? verdict::valid : verdict::driver_decides;
  }
  return r->kind == memory::pinned ? verdict::driver_decides : verdict::valid;  // unmapped pinned: the driver's call
}

// Two ranges of equal length that share a byte. The copied areas may never overlap, whatever the kinds.
inline bool ranges_overlap(wide a, wide b, wide bytes) { return bytes != 0 && a < b + bytes && b < a + bytes; }

struct copy_1d_model {
  verdict outcome;
  wide bytes;
};

inline copy_1d_model model_copy_1d(const memory_map& map, std::size_t count, std::size_t element_size, promised from,
                                   std::uintptr_t source, promised to, std::uintptr_t destination) {
  const wide bytes = static_cast<wide>(count) * element_size;
  if (bytes > wide_size_max) return {verdict::invalid, bytes};
  verdict v = worst(side_verdict(map, from, source, 0, bytes), side_verdict(map, to, destination, 0, bytes));
  if (is_host(from) && is_host(to)) v = verdict::invalid;
  if (ranges_overlap(source, destination, bytes)) v = verdict::invalid;
  return {v, bytes};
}

// A 2-D region of one side: rows `pitch` elements apart, the corner at (x, y).
struct plane_model {
  verdict outcome = verdict::valid;
  wide begin = 0;   // bytes from the array's start to element (x, y)
  wide length = 0;  // bytes from there to the end of the last row (0 when nothing is copied)
};

inline plane_model model_plane(const memory_map& map, std::size_t width, std::size_t height, std::size_t element_size,
                               promised kind, std::uintptr_t address, std::size_t pitch, std::size_t x, std::size_t y) {
  plane_model p;
  // Every intermediate value ferry forms must fit in size_t, even when nothing is copied.
  const wide first = static_cast<wide>(y) * pitch + x;
  const wide rows = height == 0 ? 0 : height - 1;
  const wide span = rows * pitch + width;
  if (pitch == 0 || static_cast<wide>(pitch) * element_size > wide_size_max || x > pitch || width > pitch - x || static_cast<wide>(y) * pitch > wide_size_max ||
      first > wide_size_max || rows * pitch > wide_size_max || span > wide_size_max ||
      first * element_size > wide_size_max || (width != 0 && height != 0 && span * element_size > wide_size_max)) {
    p.outcome = verdict::invalid;
    return p;
  }
  p.begin = first * element_size;
  p.length = width == 0 || height == 0 ? 0 : span * element_size;
  p.outcome = side_verdict(map, kind, address, p.begin, p.length);
  return p;
}

// Whether some row of one region meets some row of the other. Equal pitches: row i of the source and row
// j of the destination meet when |(a - b) + (i - j) * pitch| < row bytes. Different pitches: any meeting
// of the two spans counts (ferry's documented rule).
inline bool regions_overlap(wide a, const plane_model& source, wide b, const plane_model& destination,
                            std::size_t width, std::size_t height, std::size_t element_size, std::size_t source_pitch,
                            std::size_t destination_pitch) {
  a += source.begin;
  b += destination.begin;
  if (source.length == 0 || destination.length == 0) return false;
  if (!(a < b + destination.length && b < a + source.length)) return false;
  if (source_pitch != destination_pitch || height == 1) return true;
  const wide pitch_bytes = static_cast<wide>(source_pitch) * element_size;
  const wide row_bytes = static_cast<wide>(width) * element_size;
  for (std::size_t i = 0; i < height; ++i) {  // both regions lie inside small arenas: height is small
    const wide row_a = a + i * pitch_bytes;
    // The destination row j nearest to row_a from below and from above.
    const wide j_low = row_a < b ? 0 : std::min<wide>((row_a - b) / pitch_bytes, height - 1);
    for (wide j = j_low; j <= j_low + 1 && j < height; ++j) {
      const wide row_b = b + j * pitch_bytes;
      if (row_a < row_b + row_bytes && row_b < row_a + row_bytes) return true;
    }
  }
  return false;
}

}  // namespace ferry::fuzz
