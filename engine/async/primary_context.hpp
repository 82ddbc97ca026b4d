// The engine's hold on a device's primary context. ferry::context owns such a hold too, but needs a
// ferry::device, whose lookup calls the driver again for an ordinal the engine has checked already.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <source_location>
#include <string>
#include <utility>

#include "engine/driver/context_releases.hpp"
#include "engine/driver/driver_table.hpp"
#include "engine/errors/check.hpp"
#include "ferry/context.hpp"

namespace ferry::detail {

// Owns one retain of a primary context (cuDevicePrimaryCtxRetain) and releases it on destruction
// (cuDevicePrimaryCtxRelease, never throwing). Move-only; move-assignment releases what was held. The
// non-owning view is ferry::context_ref.
class retained_primary_context {
 public:
  // Holds nothing, as a moved-from one does.
  retained_primary_context() noexcept = default;
  retained_primary_context(std::nullptr_t) = delete;

  // Retains `device`'s primary context; `ordinal` names the device in the error. Throws cuda_error.
  static retained_primary_context retain(const driver_table& driver, CUdevice device, int ordinal,
                                         std::source_location where = std::source_location::current()) {
    CUcontext handle = nullptr;
    check(driver.cuDevicePrimaryCtxRetain(&handle, device), "cuDevicePrimaryCtxRetain",
          "device " + std::to_string(ordinal), where);
    return retained_primary_context(driver, device, handle);
  }
  // Takes over a retain of `device`'s primary context `handle` made elsewhere.
  static retained_primary_context adopt(const driver_table& driver, CUdevice device, CUcontext handle) noexcept {
    return retained_primary_context(driver, device, handle);
  }

  retained_primary_context(const retained_primary_context&) = delete;
  retained_primary_context& operator=(const retained_primary_context&) = delete;
  retained_primary_context(retained_primary_context&& other) noexcept
      : driver_(other.driver_), device_(other.device_), handle_(other.release()) {}
  retained_primary_context& operator=(retained_primary_context&& other) noexcept {
    retained_primary_context moved(std::move(other));
    std::swap(driver_, moved.driver_);
    std::swap(device_, moved.device_);
    std::swap(handle_, moved.handle_);
    return *this;
  }
  ~retained_primary_context() {
    if (handle_ == nullptr) return;
    driver_->cuDevicePrimaryCtxRelease(device_);
    // The hold may have been the last on the context: if so, its memory went with it.
    note_context_released();
  }

  CUcontext get() const noexcept { return handle_; }
  context_ref ref() const noexcept { return context_ref(handle_); }
  CUdevice device() const noexcept { return device_; }
  // Gives the hold up without releasing it (the process is exiting: the driver is called no more).
  CUcontext release() noexcept { return std::exchange(handle_, nullptr); }

 private:
  retained_primary_context(const driver_table& driver, CUdevice device, CUcontext handle) noexcept
      : driver_(&driver), device_(device), handle_(handle) {}

  const driver_table* driver_ = nullptr;
  CUdevice device_ = 0;
  CUcontext handle_ = nullptr;
};

}  // namespace ferry::detail
