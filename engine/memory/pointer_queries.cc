#include <string>

#include "engine/driver/driver_table.hpp"
#include "engine/errors/check.hpp"
#include "ferry/detail/memory.hpp"
#include "ferry/marshal.hpp"

namespace ferry {
namespace detail {

CUdeviceptr mapped_device_pointer(std::string_view operation, alloc_flags flags, const void* host) {
  if (flags != alloc_flags::none) {
    throw_invalid_argument(operation, "flags must be alloc_flags::none (the driver defines no options), got " +
                                          to_string(flags));
  }
  if (host == nullptr) throw_invalid_argument(operation, "pointer is a null pointer");
  CUdeviceptr device = 0;
  CUresult status = driver().cuMemHostGetDevicePointer(&device, const_cast<void*>(host), 0);
  if (status == CUDA_ERROR_INVALID_VALUE) {
    throw_invalid_argument(operation, "pointer " + hex(host) +
                                          " is not mapped into the device's address space (allocate it with "
                                          "alloc_flags::device_mapped, or register it with register_flags::device_map)");
  }
  check(status, "cuMemHostGetDevicePointer", hex(host));
  return device;
}

std::pair<CUdeviceptr, std::size_t> allocation_of(std::string_view operation, CUdeviceptr pointer) {
  if (pointer == 0) throw_invalid_argument(operation, "pointer is a null device pointer");
  CUdeviceptr base = 0;
  std::size_t size = 0;
  CUresult status = driver().cuMemGetAddressRange(&base, &size, pointer);
  if (status == CUDA_ERROR_NOT_FOUND || status == CUDA_ERROR_INVALID_VALUE) {
    throw_invalid_argument(operation, "pointer " + hex(pointer) + " is not inside a live device allocation");
  }
  check(status, "cuMemGetAddressRange", hex(pointer));
  return {base, size};
}

}  // namespace detail

mem_info get_mem_info() {
  std::size_t free = 0;
  std::size_t total = 0;
  detail::check(detail::driver().cuMemGetInfo(&free, &total), "cuMemGetInfo");
  return {static_cast<std::int64_t>(free), static_cast<std::int64_t>(total)};
}

}  // namespace ferry
