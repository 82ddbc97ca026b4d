// An owner for a handle the engine makes through the driver table (a stream, an event, page-locked
// memory): released once, by the driver call that releases its kind, when the owner goes; moved, never
// copied. At process exit, once the driver's teardown has begun, a handle must not be released through
// it: abandon() lets go of it without a call.
#pragma once

#include <cuda.h>

#include <utility>

#include "engine/driver/driver_table.hpp"

namespace ferry::detail {

template <class Handle, auto Release>
class driver_handle {
 public:
  driver_handle() = default;
  driver_handle(const driver_table& driver, Handle handle) noexcept : driver_(&driver), handle_(handle) {}
  driver_handle(driver_handle&& other) noexcept
      : driver_(other.driver_), handle_(std::exchange(other.handle_, Handle{})) {}
  driver_handle& operator=(driver_handle&& other) noexcept {
    if (this != &other) {
      reset();
      driver_ = other.driver_;
      handle_ = std::exchange(other.handle_, Handle{});
    }
    return *this;
  }
  driver_handle(const driver_handle&) = delete;
  driver_handle& operator=(const driver_handle&) = delete;
  ~driver_handle() { reset(); }

  Handle get() const noexcept { return handle_; }
  explicit operator bool() const noexcept { return handle_ != Handle{}; }

  void reset() noexcept {
    if (handle_ != Handle{}) (driver_->*Release)(std::exchange(handle_, Handle{}));
  }
  // Lets go of the handle without calling the driver (process exit).
  Handle abandon() noexcept { return std::exchange(handle_, Handle{}); }

 private:
  const driver_table* driver_ = nullptr;
  Handle handle_{};
};

using owned_stream = driver_handle<CUstream, &driver_table::cuStreamDestroy>;
using owned_event = driver_handle<CUevent, &driver_table::cuEventDestroy>;
using owned_host_memory = driver_handle<void*, &driver_table::cuMemFreeHost>;

}  // namespace ferry::detail
