#include <stdexcept>
#include <string>
#include <utility>

#include "engine/driver/context_releases.hpp"
#include "engine/driver/driver_table.hpp"
#include "ferry/context.hpp"
#include "engine/errors/check.hpp"

namespace ferry {
namespace {

std::string describe(CUcontext handle) { return "context " + detail::hex(handle); }

}  // namespace

ferry::device context_ref::device() const {
  const auto& driver = detail::driver();
  detail::check(driver.cuCtxPushCurrent(handle_), "cuCtxPushCurrent", describe(handle_));
  CUdevice handle = 0;
  CUresult status = driver.cuCtxGetDevice(&handle);
  CUcontext popped = nullptr;
  driver.cuCtxPopCurrent(&popped);
  detail::check(status, "cuCtxGetDevice", describe(handle_));
  // CUdevice values are ordinals in every driver release ferry supports.
  return ferry::device::get(static_cast<int>(handle));
}

void context_ref::make_current() const {
  detail::check(detail::driver().cuCtxSetCurrent(handle_), "cuCtxSetCurrent", describe(handle_));
}

void context_ref::synchronize() const {
  context_guard guard(*this);
  detail::check(detail::driver().cuCtxSynchronize(), "cuCtxSynchronize", describe(handle_));
}

context_ref context_ref::current() {
  CUcontext handle = nullptr;
  detail::check(detail::driver().cuCtxGetCurrent(&handle), "cuCtxGetCurrent");
  if (handle == nullptr) throw std::logic_error("context_ref::current: the calling thread has no current context");
  return context_ref(handle);
}

context context::primary(ferry::device device) {
  CUcontext handle = nullptr;
  detail::check(detail::driver().cuDevicePrimaryCtxRetain(&handle, device.handle()), "cuDevicePrimaryCtxRetain",
                "device " + std::to_string(device.ordinal()));
  return context(handle, device, true);
}

context context::create(ferry::device device) {
  const auto& driver = detail::driver();
  CUcontext handle = nullptr;
  detail::check(driver.cuCtxCreate(&handle, nullptr, 0, device.handle()), "cuCtxCreate",
                "device " + std::to_string(device.ordinal()));
  // cuCtxCreate also makes the new context current; creating an object must not change the caller's
  // current context, so put the previous one back.
  CUcontext created = nullptr;
  driver.cuCtxPopCurrent(&created);
  return context(handle, device, false);
}

context::context(context&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), device_(other.device_), primary_(other.primary_) {}

context& context::operator=(context&& other) noexcept {
  context moved(std::move(other));
  std::swap(handle_, moved.handle_);
  std::swap(device_, moved.device_);
  std::swap(primary_, moved.primary_);
  return *this;
}

context::~context() { reset(); }

void context::reset() noexcept {
  if (handle_ == nullptr) return;
  const auto& driver = detail::driver();
  if (primary_) {
    driver.cuDevicePrimaryCtxRelease(device_.handle());
  } else {
    driver.cuCtxDestroy(handle_);
  }
  handle_ = nullptr;
  // The context may be gone, and its memory with it.
  detail::note_context_released();
}

context_guard::context_guard(context_ref context) {
  detail::check(detail::driver().cuCtxPushCurrent(context.get()), "cuCtxPushCurrent", describe(context.get()));
}

context_guard::~context_guard() {
  CUcontext popped = nullptr;
  detail::driver().cuCtxPopCurrent(&popped);
}

}  // namespace ferry
