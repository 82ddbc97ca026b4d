#include <string>

#include "engine/driver/driver_table.hpp"
#include "ferry/context.hpp"
#include "engine/errors/check.hpp"

namespace ferry {

int device::count() {
  int count = 0;
  detail::check(detail::driver().cuDeviceGetCount(&count), "cuDeviceGetCount");
  return count;
}

device device::get(int ordinal) {
  const int present = count();
  if (ordinal < 0 || ordinal >= present) {
    detail::throw_invalid_argument("device::get", "ordinal " + std::to_string(ordinal) + " is not in [0, " +
                                                      std::to_string(present) + "): " + std::to_string(present) +
                                                      " device(s) present");
  }
  CUdevice handle = 0;
  detail::check(detail::driver().cuDeviceGet(&handle, ordinal), "cuDeviceGet", "device " + std::to_string(ordinal));
  return device(handle, ordinal);
}

std::string device::name() const {
  char buffer[256] = {};
  detail::check(detail::driver().cuDeviceGetName(buffer, sizeof buffer - 1, handle_), "cuDeviceGetName",
                "device " + std::to_string(ordinal_));
  return buffer;
}

std::size_t device::total_memory() const {
  std::size_t bytes = 0;
  detail::check(detail::driver().cuDeviceTotalMem(&bytes, handle_), "cuDeviceTotalMem",
                "device " + std::to_string(ordinal_));
  return bytes;
}

int device::attribute(CUdevice_attribute attribute) const {
  int value = 0;
  detail::check(detail::driver().cuDeviceGetAttribute(&value, attribute, handle_), "cuDeviceGetAttribute",
                "device " + std::to_string(ordinal_) + ", attribute " + std::to_string(static_cast<int>(attribute)));
  return value;
}

}  // namespace ferry
