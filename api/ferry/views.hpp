// Views of memory whose type says what the memory is: pinned_span<T> (a span of page-locked host memory)
// and pitched_view<Pointer> (a 2-D region of an array whose rows are `pitch` elements apart).
#pragma once

#include "ferry/detail/require_cxx20.hpp"

#include <cstddef>
#include <memory>
#include <ranges>
#include <span>
#include <type_traits>

#include "ferry/pointers.hpp"

namespace ferry {

// A span of page-locked host memory (from a pinned_buffer, malloc_host_array or a registration). It is a
// std::span<T> wherever one is wanted; given to the engine, it is transferred with one DMA, no staging and
// no planning. Constructing one from a host_ptr is the caller's promise that the memory is page-locked,
// which ferry checks (the driver must know the range) before it enqueues anything.
template <storable T>
class pinned_span : public std::span<T> {
 public:
  constexpr pinned_span() noexcept = default;
  constexpr pinned_span(host_ptr<T> base, std::size_t count) noexcept : std::span<T>(base.get(), count) {}
  // pinned_span<T> converts to pinned_span<const T>, never the other way.
  template <class U>
    requires std::is_same_v<std::add_const_t<U>, T> && (!std::is_same_v<U, T>)
  constexpr pinned_span(pinned_span<U> other) noexcept : std::span<T>(other.data(), other.size()) {}

  constexpr host_ptr<T> pointer() const noexcept { return host_ptr<T>(this->data()); }
  // A part of a page-locked span is page-locked too (std::span's own subspan would forget it).
  constexpr pinned_span subspan(std::size_t offset, std::size_t count) const noexcept {
    return pinned_span(pointer() + static_cast<std::ptrdiff_t>(offset), count);
  }
};

// A width x height region (in elements) whose corner is at column x, row y of an array whose rows are
// `pitch` elements apart (the seed's "array width"), starting at `base`. Pointer says what memory it is:
// device_ptr<T> (device), host_ptr<T> (page-locked host), or T* (pageable host: synchronous copies only).
template <class Pointer>
struct pitched_view {
  using pointer = Pointer;
  using element_type = typename std::pointer_traits<Pointer>::element_type;

  Pointer base;
  std::size_t pitch;
  std::size_t width;
  std::size_t height;
  std::size_t x = 0;
  std::size_t y = 0;

  constexpr pitched_view(Pointer base, std::size_t pitch, std::size_t width, std::size_t height, std::size_t x = 0,
                         std::size_t y = 0) noexcept
      : base(base), pitch(pitch), width(width), height(height), x(x), y(y) {}
};

}  // namespace ferry

// A pinned_span, like a std::span, refers to memory it does not own.
template <class T>
inline constexpr bool std::ranges::enable_borrowed_range<ferry::pinned_span<T>> = true;
