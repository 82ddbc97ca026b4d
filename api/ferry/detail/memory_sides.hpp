// Which side of a transfer each kind of argument makes (detail::endpoint). Host memory for the engine's
// templates: a pinned_span (page-locked), a std::vector given as an rvalue (owned by the op and handed
// back), or anything that is a std::span of the element type (pageable: a span, a vector, an array).
// Pointers: device_ptr (device), host_ptr (page-locked), T* (pageable). 2-D regions: pitched_views.
#pragma once

#include <ranges>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

#include "ferry/blocks.hpp"
#include "ferry/detail/transfer.hpp"
#include "ferry/views.hpp"

namespace ferry::detail {

template <class Memory>
inline constexpr bool is_pinned_span = false;
template <class U>
inline constexpr bool is_pinned_span<pinned_span<U>> = true;

template <class Memory>
inline constexpr bool is_vector = false;
template <class U, class Allocator>
inline constexpr bool is_vector<std::vector<U, Allocator>> = true;

// Memory, as a forwarding reference's deduced type, is a vector handed over by rvalue: the op owns it.
template <class Memory>
inline constexpr bool is_owned_vector =
    !std::is_reference_v<Memory> && is_vector<std::remove_cv_t<Memory>> && !std::is_const_v<Memory>;

// A const rvalue vector can be neither owned (it cannot be moved from) nor borrowed (it dies at the end
// of the call): rejected with a static_assert in the operations.
template <class Memory>
inline constexpr bool is_const_temporary_vector =
    !std::is_reference_v<Memory> && is_vector<std::remove_cv_t<Memory>> && std::is_const_v<Memory>;

// Memory the op may borrow until its handler runs: an lvalue, or a view of memory that outlives the call
// (a span, a pinned_span). A temporary container would be destroyed before the GPU is done with it.
template <class Memory>
concept borrowable = std::is_lvalue_reference_v<Memory> || std::ranges::borrowed_range<Memory>;

// Host memory the engine reads T from / writes T to.
template <class Memory, class T>
concept host_source_of = std::is_convertible_v<std::remove_reference_t<Memory>&, std::span<const T>>;
template <class Memory, class T>
concept host_destination_of = !std::is_const_v<T> && std::is_convertible_v<std::remove_reference_t<Memory>&, std::span<T>>;

// A block list's element (engine::poke_blocks / peek_blocks): a ferry::block_pair whose host side is a view
// (pinned_span or std::span), so that the list names memory and never owns it.
template <class Host>
inline constexpr bool is_host_view = is_pinned_span<Host>;
template <class U, std::size_t Extent>
inline constexpr bool is_host_view<std::span<U, Extent>> = true;

template <class Block>
inline constexpr bool is_block = false;
template <class Host, class T>
inline constexpr bool is_block<block_pair<Host, T>> = is_host_view<Host>;

template <class Blocks>
concept block_range = std::ranges::contiguous_range<Blocks> && std::ranges::sized_range<Blocks> &&
                      is_block<std::ranges::range_value_t<Blocks>>;
template <class Blocks>
concept poke_block_range =
    block_range<Blocks> &&
    !std::is_const_v<typename std::ranges::range_value_t<Blocks>::element_type> &&
    host_source_of<typename std::ranges::range_value_t<Blocks>::host_type,
                   typename std::ranges::range_value_t<Blocks>::element_type>;
template <class Blocks>
concept peek_block_range =
    block_range<Blocks> &&
    host_destination_of<typename std::ranges::range_value_t<Blocks>::host_type,
                        std::remove_const_t<typename std::ranges::range_value_t<Blocks>::element_type>>;

template <class Memory>
endpoint host_side(std::string_view argument, const Memory& memory) {
  if constexpr (is_pinned_span<std::remove_cv_t<Memory>>) {
    return pinned_side(argument, memory.data());
  } else {
    return pageable_side(argument, std::data(memory));
  }
}

template <class T>
endpoint memory_side(std::string_view argument, device_ptr<T> pointer) {
  return device_side(argument, pointer.get());
}
template <class T>
endpoint memory_side(std::string_view argument, host_ptr<T> pointer) {
  return pinned_side(argument, pointer.get());
}
template <class T>
endpoint memory_side(std::string_view argument, T* pointer) {
  return pageable_side(argument, pointer);
}

template <class Pointer>
plane plane_of(const pitched_view<Pointer>& view) {
  return {view.pitch, view.x, view.y};
}

// The element type both regions of a 2-D copy hold (the destination's, which must not be const).
template <class Source, class Destination>
using common_element_t = typename pitched_view<Destination>::element_type;

template <class Source, class Destination>
concept same_elements_2d =
    std::is_same_v<std::remove_const_t<typename pitched_view<Source>::element_type>, common_element_t<Source, Destination>> &&
    !std::is_const_v<common_element_t<Source, Destination>>;

// A 2-D copy between two regions of one size, synchronous (no stream) or enqueued on `stream`.
template <class Source, class Destination>
  requires same_elements_2d<Source, Destination>
void copy_2d_views(std::string_view operation, const pitched_view<Source>& source,
                   const pitched_view<Destination>& destination, stream_choice stream) {
  check_same_extent(operation, source.width, source.height, destination.width, destination.height);
  copy_2d(operation, source.width, source.height, sizeof(common_element_t<Source, Destination>),
          memory_side("source", source.base), plane_of(source), memory_side("destination", destination.base),
          plane_of(destination), stream);
}

}  // namespace ferry::detail
