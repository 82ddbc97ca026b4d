// Typed pointers that carry the memory kind in the type: device_ptr<T> (device-accessible memory: device,
// managed, or the device view of mapped host memory) and host_ptr<T> (page-locked host memory: pinned by
// ferry or registered). A pageable host buffer is a plain T* or std::span<T>.
#pragma once

#include "ferry/detail/require_cxx20.hpp"

#include <cuda.h>

#include <compare>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace ferry {

// What the seed calls Storable: element types that may be copied as bytes.
template <class T>
concept storable = std::is_trivially_copyable_v<std::remove_const_t<T>> && !std::is_void_v<T>;

// A device address of an array of T. Arithmetic steps in elements, as for T*.
template <storable T>
class device_ptr {
 public:
  using element_type = T;

  constexpr device_ptr() noexcept = default;
  constexpr explicit device_ptr(CUdeviceptr address) noexcept : address_(address) {}
  // device_ptr<T> converts to device_ptr<const T>, never the other way.
  template <class U>
    requires std::is_same_v<std::add_const_t<U>, T> && (!std::is_same_v<U, T>)
  constexpr device_ptr(device_ptr<U> other) noexcept : address_(other.get()) {}

  constexpr CUdeviceptr get() const noexcept { return address_; }
  constexpr explicit operator bool() const noexcept { return address_ != 0; }

  constexpr device_ptr operator+(std::ptrdiff_t n) const noexcept {
    return device_ptr(address_ + static_cast<CUdeviceptr>(n * static_cast<std::ptrdiff_t>(sizeof(T))));
  }
  constexpr device_ptr operator-(std::ptrdiff_t n) const noexcept { return *this + (-n); }
  constexpr std::ptrdiff_t operator-(device_ptr other) const noexcept {
    return (static_cast<std::ptrdiff_t>(address_) - static_cast<std::ptrdiff_t>(other.address_)) /
           static_cast<std::ptrdiff_t>(sizeof(T));
  }
  constexpr device_ptr& operator+=(std::ptrdiff_t n) noexcept { return *this = *this + n; }
  constexpr device_ptr& operator-=(std::ptrdiff_t n) noexcept { return *this = *this - n; }
  constexpr device_ptr& operator++() noexcept { return *this += 1; }
  constexpr device_ptr& operator--() noexcept { return *this -= 1; }

  // Reinterprets the address as an array of U (the caller answers for alignment).
  template <storable U>
  constexpr device_ptr<U> cast() const noexcept { return device_ptr<U>(address_); }

  friend constexpr auto operator<=>(device_ptr, device_ptr) = default;

 private:
  CUdeviceptr address_ = 0;
};

// Page-locked host memory holding T: from malloc_host_array, register_array or a pinned_buffer.
// Constructing one from a pointer is the caller's promise that the memory is page-locked; ferry checks
// the promise (the driver must know the range) before it enqueues a transfer.
template <storable T>
class host_ptr {
 public:
  using element_type = T;

  constexpr host_ptr() noexcept = default;
  constexpr explicit host_ptr(T* pointer) noexcept : pointer_(pointer) {}
  template <class U>
    requires std::is_same_v<std::add_const_t<U>, T> && (!std::is_same_v<U, T>)
  constexpr host_ptr(host_ptr<U> other) noexcept : pointer_(other.get()) {}

  constexpr T* get() const noexcept { return pointer_; }
  constexpr explicit operator bool() const noexcept { return pointer_ != nullptr; }
  constexpr T& operator[](std::size_t i) const noexcept { return pointer_[i]; }

  constexpr host_ptr operator+(std::ptrdiff_t n) const noexcept { return host_ptr(pointer_ + n); }
  constexpr host_ptr operator-(std::ptrdiff_t n) const noexcept { return host_ptr(pointer_ - n); }
  constexpr std::ptrdiff_t operator-(host_ptr other) const noexcept { return pointer_ - other.pointer_; }

  template <storable U>
  host_ptr<U> cast() const noexcept { return host_ptr<U>(reinterpret_cast<U*>(pointer_)); }

  friend constexpr auto operator<=>(host_ptr, host_ptr) = default;

 private:
  T* pointer_ = nullptr;
};

}  // namespace ferry
