#include "sim/runtime.hpp"

#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <cstring>
#include <mutex>

namespace ferry::sim::detail {
namespace {

// More devices than this would only exhaust the simulated address space.
constexpr int max_devices = 64;
constexpr int default_devices = 2;

std::atomic<int> devices{0};
std::atomic<bool> torn_down{false};
std::atomic<bool> done{false};

int devices_from_environment() {
  const char* text = std::getenv("FERRY_SIM_DEVICES");
  if (text == nullptr || *text == '\0') return default_devices;
  int value = 0;
  const char* end = text + std::strlen(text);
  auto [rest, error] = std::from_chars(text, end, value);
  if (error != std::errc{} || rest != end || value < 0) return default_devices;
  return value > max_devices ? max_devices : value;
}

}  // namespace

CUresult initialize(unsigned flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  static std::once_flag once;
  std::call_once(once, [] {
    devices.store(devices_from_environment(), std::memory_order_relaxed);
    done.store(true, std::memory_order_release);
    // As the real driver does at cuInit: tear down at exit. What was registered with atexit later (a
    // library that saw cuInit succeed) runs before this; anything calling in after it is a bug.
    std::atexit([] {
      torn_down.store(true, std::memory_order_release);
      // FERRY_SIM_EXIT_GRACE_MS keeps the process alive a little after the teardown, so that a thread
      // still calling the driver is seen (and reported) rather than cut off by the exit.
      if (const char* grace = std::getenv("FERRY_SIM_EXIT_GRACE_MS")) {
        std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(grace)));
      }
    });
  });
  return devices.load(std::memory_order_relaxed) == 0 ? CUDA_ERROR_NO_DEVICE : CUDA_SUCCESS;
}

bool torn_down_at_exit() noexcept { return torn_down.load(std::memory_order_acquire); }

bool initialized() noexcept {
  return done.load(std::memory_order_acquire) && devices.load(std::memory_order_relaxed) > 0;
}

int device_count() noexcept { return done.load(std::memory_order_acquire) ? devices.load() : 0; }

bool valid_device(CUdevice device) noexcept { return device >= 0 && device < device_count(); }

}  // namespace ferry::sim::detail
