// RAII owners of the four kinds of allocation (the C++ face of the seed's mallocHostForeignPtr):
// pinned_buffer, device_buffer, managed_buffer, and host_registration (a registered pageable range).
// Move-only; move-assignment frees what was held; release() gives the pointer up, adopt() takes one over.
#pragma once

#include "ferry/detail/require_cxx20.hpp"

#include <cstddef>
#include <span>
#include <utility>

#include "ferry/detail/memory.hpp"
#include "ferry/flags.hpp"
#include "ferry/pointers.hpp"
#include "ferry/views.hpp"

namespace ferry {
namespace detail {

// Owns `count` elements at a pointer of type Pointer; Kind::release frees them without throwing.
template <class Pointer, class Kind>
class owned_array {
 public:
  using pointer = Pointer;

  owned_array() noexcept = default;
  owned_array(const owned_array&) = delete;
  owned_array& operator=(const owned_array&) = delete;
  owned_array(owned_array&& other) noexcept
      : pointer_(std::exchange(other.pointer_, Pointer{})), count_(std::exchange(other.count_, 0)) {}
  owned_array& operator=(owned_array&& other) noexcept {
    owned_array(std::move(other)).swap(*this);  // the old contents die with the temporary
    return *this;
  }
  ~owned_array() {
    if (pointer_) Kind::release(pointer_);
  }

  // Takes ownership of `count` elements at `pointer`, which must come from the matching allocator.
  static owned_array adopt(Pointer pointer, std::size_t count) noexcept { return owned_array(pointer, count); }

  Pointer get() const noexcept { return pointer_; }
  std::size_t size() const noexcept { return count_; }
  std::size_t size_bytes() const noexcept { return count_ * sizeof(typename Pointer::element_type); }
  explicit operator bool() const noexcept { return static_cast<bool>(pointer_); }

  // Gives up ownership: the caller frees the memory.
  Pointer release() noexcept {
    count_ = 0;
    return std::exchange(pointer_, Pointer{});
  }
  void swap(owned_array& other) noexcept {
    std::swap(pointer_, other.pointer_);
    std::swap(count_, other.count_);
  }

 protected:
  owned_array(Pointer pointer, std::size_t count) noexcept : pointer_(pointer), count_(count) {}

 private:
  Pointer pointer_{};
  std::size_t count_ = 0;
};

struct pinned_kind {
  template <class P>
  static void release(P pointer) noexcept { free_host_nothrow(const_cast<void*>(static_cast<const void*>(pointer.get()))); }
};
struct registered_kind {
  template <class P>
  static void release(P pointer) noexcept { unregister_host_nothrow(const_cast<void*>(static_cast<const void*>(pointer.get()))); }
};
struct device_kind {
  template <class P>
  static void release(P pointer) noexcept { free_device_nothrow(pointer.get()); }
};

}  // namespace detail

// Page-locked host memory from cuMemHostAlloc.
template <storable T>
class pinned_buffer : public detail::owned_array<host_ptr<T>, detail::pinned_kind> {
  using base = detail::owned_array<host_ptr<T>, detail::pinned_kind>;

 public:
  using base::base;
  pinned_buffer(base&& other) noexcept : base(std::move(other)) {}

  // Throws std::invalid_argument (count 0, size overflow, unknown flags) or out_of_memory.
  static pinned_buffer allocate(std::size_t count, alloc_flags flags = alloc_flags::none) {
    return base::adopt(host_ptr<T>(static_cast<T*>(detail::malloc_host("pinned_buffer::allocate", count, sizeof(T), flags))),
                       count);
  }
  // A std::span that the engine knows to be page-locked.
  pinned_span<T> span() const noexcept { return {this->get(), this->size()}; }
  T* data() const noexcept { return this->get().get(); }
};

// Device memory from cuMemAlloc, in the context current at allocation.
template <storable T>
class device_buffer : public detail::owned_array<device_ptr<T>, detail::device_kind> {
  using base = detail::owned_array<device_ptr<T>, detail::device_kind>;

 public:
  using base::base;
  device_buffer(base&& other) noexcept : base(std::move(other)) {}

  static device_buffer allocate(std::size_t count) {
    return base::adopt(device_ptr<T>(detail::malloc_device("device_buffer::allocate", count, sizeof(T))), count);
  }
};

// Managed (unified) memory from cuMemAllocManaged: addressable from the host and the device.
template <storable T>
class managed_buffer : public detail::owned_array<device_ptr<T>, detail::device_kind> {
  using base = detail::owned_array<device_ptr<T>, detail::device_kind>;

 public:
  using base::base;
  managed_buffer(base&& other) noexcept : base(std::move(other)) {}

  // `flag` is attach_flag::global or attach_flag::host.
  static managed_buffer allocate(std::size_t count, attach_flag flag = attach_flag::global) {
    return base::adopt(device_ptr<T>(detail::malloc_managed("managed_buffer::allocate", count, sizeof(T), flag)), count);
  }
  // The host's view of the same memory.
  std::span<T> host_span() const noexcept { return {reinterpret_cast<T*>(this->get().get()), this->size()}; }
};

// A pageable host range page-locked with cuMemHostRegister, unregistered on destruction. The caller's
// memory must outlive the registration.
template <storable T>
class host_registration : public detail::owned_array<host_ptr<T>, detail::registered_kind> {
  using base = detail::owned_array<host_ptr<T>, detail::registered_kind>;

 public:
  using base::base;
  host_registration(base&& other) noexcept : base(std::move(other)) {}

  static host_registration register_range(std::span<T> range, register_flags flags = register_flags::none) {
    return base::adopt(host_ptr<T>(static_cast<T*>(detail::register_host("host_registration::register_range",
                                                                         range.data(), range.size(), sizeof(T), flags))),
                       range.size());
  }
  // The registered range, as a span that the engine knows to be page-locked.
  pinned_span<T> span() const noexcept { return {this->get(), this->size()}; }
};

}  // namespace ferry
