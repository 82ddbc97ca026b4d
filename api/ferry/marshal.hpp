// The whole of the Haskell `cuda` package's Foreign.CUDA.Driver.Marshal, typed, in snake_case, with its
// meaning kept. Counts and 2-D geometry are in elements, as in the seed. Every operation checks its
// arguments before anything is enqueued and throws std::invalid_argument naming the argument and the
// values; allocation failures throw ferry::out_of_memory; other driver failures ferry::cuda_error.
// Operations act in the calling thread's current context (see context.hpp).
//
// Synchronous forms take pageable host memory (T*); the *_async forms take page-locked memory
// (host_ptr<T>) and a stream, as the seed does. The 2-D copies also take their regions as pitched_views
// (views.hpp), typed by what memory each side is.
#pragma once

#include "ferry/detail/require_cxx20.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "ferry/buffers.hpp"
#include "ferry/context.hpp"
#include "ferry/detail/memory.hpp"
#include "ferry/detail/memory_sides.hpp"
#include "ferry/detail/transfer.hpp"
#include "ferry/error.hpp"
#include "ferry/flags.hpp"
#include "ferry/pointers.hpp"
#include "ferry/stream.hpp"
#include "ferry/views.hpp"

namespace ferry {

// ---- Host allocation

// Page-locked host memory for `count` elements (cuMemHostAlloc). Free it with free_host.
template <storable T>
host_ptr<T> malloc_host_array(alloc_flags flags, std::size_t count) {
  return host_ptr<T>(static_cast<T*>(detail::malloc_host("malloc_host_array", count, sizeof(T), flags)));
}

// As malloc_host_array, but owned: freed when the owner is destroyed (the seed's ForeignPtr).
template <storable T>
pinned_buffer<T> malloc_host_foreign_ptr(alloc_flags flags, std::size_t count) {
  return pinned_buffer<T>::adopt(
      host_ptr<T>(static_cast<T*>(detail::malloc_host("malloc_host_foreign_ptr", count, sizeof(T), flags))), count);
}

template <storable T>
void free_host(host_ptr<T> pointer) {
  detail::free_host("free_host", const_cast<std::remove_const_t<T>*>(pointer.get()));
}

// Page-locks `count` elements of pageable memory at `pointer` (cuMemHostRegister).
template <storable T>
host_ptr<T> register_array(register_flags flags, std::size_t count, T* pointer) {
  return host_ptr<T>(static_cast<T*>(detail::register_host("register_array", pointer, count, sizeof(T), flags)));
}

// Makes registered memory pageable again and returns the plain pointer.
template <storable T>
T* unregister_array(host_ptr<T> pointer) {
  detail::unregister_host("unregister_array", pointer.get());
  return pointer.get();
}

// ---- Device allocation

template <storable T>
device_ptr<T> malloc_array(std::size_t count) {
  return device_ptr<T>(detail::malloc_device("malloc_array", count, sizeof(T)));
}

template <storable T>
void free(device_ptr<T> pointer) {
  detail::free_device("free", pointer.get());
}

// Runs f on a temporary device array of `count` elements, freed when f returns or throws. Work f enqueues
// on streams must be finished before it returns.
template <storable T, class F>
decltype(auto) alloca_array(std::size_t count, F&& f) {
  device_buffer<T> scratch = device_buffer<T>::adopt(device_ptr<T>(detail::malloc_device("alloca_array", count, sizeof(T))), count);
  return std::forward<F>(f)(scratch.get());
}

// ---- Unified memory allocation

// Managed memory for `count` elements, attached `global` or to the `host` (attach_flag::single is for
// attach_array_async only). Free it with free.
template <storable T>
device_ptr<T> malloc_managed_array(attach_flag flag, std::size_t count) {
  return device_ptr<T>(detail::malloc_managed("malloc_managed_array", count, sizeof(T), flag));
}

// ---- Marshalling: device to host

template <storable T>
void peek_array(std::size_t count, device_ptr<T> source, std::remove_const_t<T>* destination) {
  detail::copy_1d("peek_array", count, sizeof(T), detail::device_side("source", source.get()),
                  detail::pageable_side("destination", destination), std::nullopt);
}

template <storable T>
void peek_array_async(std::size_t count, device_ptr<T> source, host_ptr<std::remove_const_t<T>> destination,
                      stream_ref stream) {
  detail::copy_1d("peek_array_async", count, sizeof(T), detail::device_side("source", source.get()),
                  detail::pinned_side("destination", destination.get()), stream.get());
}

// Copies a width x height region at (source_x, source_y) of a source array whose rows are source_width
// elements apart, to (destination_x, destination_y) of a destination whose rows are destination_width apart.
template <storable T>
void peek_array_2d(std::size_t width, std::size_t height, device_ptr<T> source, std::size_t source_width,
                   std::size_t source_x, std::size_t source_y, std::remove_const_t<T>* destination,
                   std::size_t destination_width, std::size_t destination_x, std::size_t destination_y) {
  detail::copy_2d_views("peek_array_2d", pitched_view(source, source_width, width, height, source_x, source_y),
                        pitched_view(destination, destination_width, width, height, destination_x, destination_y),
                        std::nullopt);
}
// Typed: a region of device memory to one of host memory (pageable T* or page-locked host_ptr).
template <storable T, class Destination>
  requires detail::same_elements_2d<device_ptr<T>, Destination>
void peek_array_2d(pitched_view<device_ptr<T>> source, pitched_view<Destination> destination) {
  detail::copy_2d_views("peek_array_2d", source, destination, std::nullopt);
}

template <storable T>
void peek_array_2d_async(std::size_t width, std::size_t height, device_ptr<T> source, std::size_t source_width,
                         std::size_t source_x, std::size_t source_y, host_ptr<std::remove_const_t<T>> destination,
                         std::size_t destination_width, std::size_t destination_x, std::size_t destination_y,
                         stream_ref stream) {
  detail::copy_2d_views("peek_array_2d_async", pitched_view(source, source_width, width, height, source_x, source_y),
                        pitched_view(destination, destination_width, width, height, destination_x, destination_y),
                        stream.get());
}
template <storable T, storable U>
  requires detail::same_elements_2d<device_ptr<T>, host_ptr<U>>
void peek_array_2d_async(pitched_view<device_ptr<T>> source, pitched_view<host_ptr<U>> destination, stream_ref stream) {
  detail::copy_2d_views("peek_array_2d_async", source, destination, stream.get());
}

// Reads `count` elements into a new vector (the seed's list). The source range is checked before the
// vector is made: a count past the allocation is an invalid_argument, not a host allocation.
template <storable T>
std::vector<std::remove_const_t<T>> peek_list_array(std::size_t count, device_ptr<T> source) {
  detail::check_device_range("peek_list_array", count, sizeof(T), detail::device_side("source", source.get()));
  std::vector<std::remove_const_t<T>> values(count);
  detail::copy_1d("peek_list_array", count, sizeof(T), detail::device_side("source", source.get()),
                  detail::pageable_side("destination", values.data()), std::nullopt);
  return values;
}

// ---- Marshalling: host to device

template <storable T>
void poke_array(std::size_t count, const T* source, device_ptr<T> destination) {
  detail::copy_1d("poke_array", count, sizeof(T), detail::pageable_side("source", source),
                  detail::device_side("destination", destination.get()), std::nullopt);
}

template <storable T>
void poke_array_async(std::size_t count, host_ptr<const T> source, device_ptr<T> destination, stream_ref stream) {
  detail::copy_1d("poke_array_async", count, sizeof(T), detail::pinned_side("source", source.get()),
                  detail::device_side("destination", destination.get()), stream.get());
}

template <storable T>
void poke_array_2d(std::size_t width, std::size_t height, const T* source, std::size_t source_width,
                   std::size_t source_x, std::size_t source_y, device_ptr<T> destination,
                   std::size_t destination_width, std::size_t destination_x, std::size_t destination_y) {
  detail::copy_2d_views("poke_array_2d", pitched_view(source, source_width, width, height, source_x, source_y),
                        pitched_view(destination, destination_width, width, height, destination_x, destination_y),
                        std::nullopt);
}
// Typed: a region of host memory (pageable T* or page-locked host_ptr) to one of device memory.
template <class Source, storable T>
  requires detail::same_elements_2d<Source, device_ptr<T>>
void poke_array_2d(pitched_view<Source> source, pitched_view<device_ptr<T>> destination) {
  detail::copy_2d_views("poke_array_2d", source, destination, std::nullopt);
}

template <storable T>
void poke_array_2d_async(std::size_t width, std::size_t height, host_ptr<const T> source, std::size_t source_width,
                         std::size_t source_x, std::size_t source_y, device_ptr<T> destination,
                         std::size_t destination_width, std::size_t destination_x, std::size_t destination_y,
                         stream_ref stream) {
  detail::copy_2d_views("poke_array_2d_async", pitched_view(source, source_width, width, height, source_x, source_y),
                        pitched_view(destination, destination_width, width, height, destination_x, destination_y),
                        stream.get());
}
template <storable S, storable T>
  requires detail::same_elements_2d<host_ptr<S>, device_ptr<T>>
void poke_array_2d_async(pitched_view<host_ptr<S>> source, pitched_view<device_ptr<T>> destination, stream_ref stream) {
  detail::copy_2d_views("poke_array_2d_async", source, destination, stream.get());
}

// Writes all of `values` to the device array (which must hold values.size() elements).
template <storable T>
void poke_list_array(std::span<const T> values, device_ptr<T> destination) {
  detail::copy_1d("poke_list_array", values.size(), sizeof(T), detail::pageable_side("source", values.data()),
                  detail::device_side("destination", destination.get()), std::nullopt);
}

// ---- Marshalling: device to device

// The ranges must not overlap. Asynchronous with respect to the host (as cuMemcpyDtoD).
template <storable T>
void copy_array(std::size_t count, device_ptr<T> source, device_ptr<std::remove_const_t<T>> destination) {
  detail::copy_1d("copy_array", count, sizeof(T), detail::device_side("source", source.get()),
                  detail::device_side("destination", destination.get()), std::nullopt);
}

template <storable T>
void copy_array_async(std::size_t count, device_ptr<T> source, device_ptr<std::remove_const_t<T>> destination,
                      stream_ref stream) {
  detail::copy_1d("copy_array_async", count, sizeof(T), detail::device_side("source", source.get()),
                  detail::device_side("destination", destination.get()), stream.get());
}

template <storable T>
void copy_array_2d(std::size_t width, std::size_t height, device_ptr<T> source, std::size_t source_width,
                   std::size_t source_x, std::size_t source_y, device_ptr<std::remove_const_t<T>> destination,
                   std::size_t destination_width, std::size_t destination_x, std::size_t destination_y) {
  detail::copy_2d_views("copy_array_2d", pitched_view(source, source_width, width, height, source_x, source_y),
                        pitched_view(destination, destination_width, width, height, destination_x, destination_y),
                        std::nullopt);
}
// Typed: a region of device memory to one of device memory.
template <storable S, storable T>
  requires detail::same_elements_2d<device_ptr<S>, device_ptr<T>>
void copy_array_2d(pitched_view<device_ptr<S>> source, pitched_view<device_ptr<T>> destination) {
  detail::copy_2d_views("copy_array_2d", source, destination, std::nullopt);
}

template <storable T>
void copy_array_2d_async(std::size_t width, std::size_t height, device_ptr<T> source, std::size_t source_width,
                         std::size_t source_x, std::size_t source_y, device_ptr<std::remove_const_t<T>> destination,
                         std::size_t destination_width, std::size_t destination_x, std::size_t destination_y,
                         stream_ref stream) {
  detail::copy_2d_views("copy_array_2d_async", pitched_view(source, source_width, width, height, source_x, source_y),
                        pitched_view(destination, destination_width, width, height, destination_x, destination_y),
                        stream.get());
}
template <storable S, storable T>
  requires detail::same_elements_2d<device_ptr<S>, device_ptr<T>>
void copy_array_2d_async(pitched_view<device_ptr<S>> source, pitched_view<device_ptr<T>> destination,
                         stream_ref stream) {
  detail::copy_2d_views("copy_array_2d_async", source, destination, stream.get());
}

// From memory of one context to memory of another (cuMemcpyPeer): serialised with all work in both.
template <storable T>
void copy_array_peer(std::size_t count, device_ptr<T> source, context_ref source_context,
                     device_ptr<std::remove_const_t<T>> destination, context_ref destination_context) {
  detail::copy_peer("copy_array_peer", count, sizeof(T), source.get(), source_context.get(), destination.get(),
                    destination_context.get(), std::nullopt);
}

template <storable T>
void copy_array_peer_async(std::size_t count, device_ptr<T> source, context_ref source_context,
                           device_ptr<std::remove_const_t<T>> destination, context_ref destination_context,
                           stream_ref stream) {
  detail::copy_peer("copy_array_peer_async", count, sizeof(T), source.get(), source_context.get(),
                    destination.get(), destination_context.get(), stream.get());
}

// ---- Combined allocation and marshalling

// A new device array holding `values`; free it with free.
template <storable T>
device_ptr<T> new_list_array(std::span<const T> values) {
  device_buffer<T> array = device_buffer<T>::adopt(
      device_ptr<T>(detail::malloc_device("new_list_array", values.size(), sizeof(T))), values.size());
  detail::copy_1d("new_list_array", values.size(), sizeof(T), detail::pageable_side("values", values.data()),
                  detail::device_side("array", array.get().get()), std::nullopt);
  return array.release();
}

// As new_list_array, with the number of elements written.
template <storable T>
std::pair<device_ptr<T>, std::size_t> new_list_array_len(std::span<const T> values) {
  return {new_list_array(values), values.size()};
}

// Runs f on a temporary device array holding `values`, freed when f returns or throws.
template <storable T, class F>
decltype(auto) with_list_array(std::span<const T> values, F&& f) {
  device_buffer<T> array = device_buffer<T>::adopt(new_list_array(values), values.size());
  return std::forward<F>(f)(array.get());
}

// As with_list_array; f also receives the number of elements: f(count, array).
template <storable T, class F>
decltype(auto) with_list_array_len(std::span<const T> values, F&& f) {
  device_buffer<T> array = device_buffer<T>::adopt(new_list_array(values), values.size());
  return std::forward<F>(f)(values.size(), array.get());
}

// ---- Utility

// Sets `count` elements to `value`. Elements of 1, 2, 4, 8 or 16 bytes (the seed's 8-, 16- and 32-bit
// values through the driver, 64- and 128-bit ones through ferry's fill kernel); other sizes throw
// std::invalid_argument.
template <storable T>
void memset(device_ptr<T> destination, std::size_t count, const T& value) {
  detail::fill("memset", destination.get(), count, sizeof(T), &value, std::nullopt);
}

template <storable T>
void memset_async(device_ptr<T> destination, std::size_t count, const T& value, stream_ref stream) {
  detail::fill("memset_async", destination.get(), count, sizeof(T), &value, stream.get());
}

// The device address of mapped page-locked memory (alloc_flags::device_mapped or
// register_flags::device_map). `flags` must be alloc_flags::none: the driver defines no options.
template <storable T>
device_ptr<T> get_device_ptr(alloc_flags flags, host_ptr<T> pointer) {
  return device_ptr<T>(detail::mapped_device_pointer("get_device_ptr", flags, pointer.get()));
}

// The base address and size in bytes of the allocation that holds `pointer`.
template <storable T>
std::pair<device_ptr<T>, std::int64_t> get_base_ptr(device_ptr<T> pointer) {
  auto [base, size] = detail::allocation_of("get_base_ptr", pointer.get());
  return {device_ptr<T>(base), static_cast<std::int64_t>(size)};
}

struct mem_info {
  std::int64_t free;
  std::int64_t total;
};

// Free and total memory of the current context's device, in bytes.
mem_info get_mem_info();

}  // namespace ferry
