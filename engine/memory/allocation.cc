#include <string>

#include "engine/driver/driver_table.hpp"
#include "engine/memory/known_ranges.hpp"
#include "engine/memory/own_ranges.hpp"
#include "engine/errors/check.hpp"
#include "ferry/detail/memory.hpp"

namespace ferry::detail {
namespace {

constexpr unsigned known_alloc_flags = CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED;
constexpr unsigned known_register_flags = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                                          CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY;

std::size_t allocation_bytes(std::string_view operation, std::size_t count, std::size_t element_size) {
  if (count == 0) throw_invalid_argument(operation, "count is 0; an allocation holds at least one element");
  return byte_size(operation, "count", count, element_size);
}

std::string describe_request(std::string_view operation, std::size_t count, std::size_t element_size) {
  return std::string(operation) + " of " + std::to_string(count) + " elements of " + std::to_string(element_size) +
         " bytes";
}

// Frees run in destructors on any thread, often one with no current context (an io_context thread):
// the driver then refuses with CUDA_ERROR_INVALID_CONTEXT, so the call is made again in the context
// that owns the memory.
template <class Call>
CUresult in_owner_context(std::uintptr_t address, Call call) {
  CUresult status = call();
  if (status != CUDA_ERROR_INVALID_CONTEXT) return status;
  const auto& table = driver();
  CUcontext owner = nullptr;
  if (table.cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, address) != CUDA_SUCCESS || owner == nullptr) {
    return status;
  }
  if (table.cuCtxPushCurrent(owner) != CUDA_SUCCESS) return status;
  status = call();
  CUcontext popped = nullptr;
  table.cuCtxPopCurrent(&popped);
  return status;
}

std::uintptr_t address_of(const void* pointer) { return reinterpret_cast<std::uintptr_t>(pointer); }

}  // namespace

void* malloc_host(std::string_view operation, std::size_t count, std::size_t element_size, alloc_flags flags) {
  const std::size_t bytes = allocation_bytes(operation, count, element_size);
  if ((to_driver(flags) & ~known_alloc_flags) != 0) {
    throw_invalid_argument(operation, "flags " + to_string(flags) + " hold bits alloc_flags does not define");
  }
  void* pointer = nullptr;
  CUresult status = driver().cuMemHostAlloc(&pointer, bytes, to_driver(flags));
  if (status != CUDA_SUCCESS) {
    throw_cuda_error(status, "cuMemHostAlloc", describe_request(operation, count, element_size),
                     std::source_location::current());
  }
  remember_own_range(address_of(pointer), bytes, current_device());
  return pointer;
}

void free_host(std::string_view operation, void* pointer) {
  if (pointer == nullptr) throw_invalid_argument(operation, "pointer is a null pointer");
  forget_own_range(address_of(pointer));
  CUresult status = in_owner_context(address_of(pointer), [&] { return driver().cuMemFreeHost(pointer); });
  if (status == CUDA_ERROR_INVALID_VALUE) {
    throw_invalid_argument(operation, "pointer " + hex(pointer) +
                                          " is not page-locked memory from malloc_host_array (already freed?)");
  }
  check(status, "cuMemFreeHost", hex(pointer));
}

void free_host_nothrow(void* pointer) noexcept {
  forget_own_range(address_of(pointer));
  in_owner_context(address_of(pointer), [&] { return driver().cuMemFreeHost(pointer); });
}

void* register_host(std::string_view operation, void* pointer, std::size_t count, std::size_t element_size,
                    register_flags flags) {
  if (pointer == nullptr) throw_invalid_argument(operation, "pointer is a null pointer");
  const std::size_t bytes = allocation_bytes(operation, count, element_size);
  if ((to_driver(flags) & ~known_register_flags) != 0) {
    throw_invalid_argument(operation, "flags " + to_string(flags) + " hold bits register_flags does not define");
  }
  CUresult status = driver().cuMemHostRegister(pointer, bytes, to_driver(flags));
  if (status == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED) {
    throw_invalid_argument(operation, "range [" + hex(pointer) + ", +" + std::to_string(bytes) +
                                          " bytes) overlaps memory that is already registered");
  }
  if (status != CUDA_SUCCESS) {
    throw_cuda_error(status, "cuMemHostRegister", hex(pointer) + ", " + describe_request(operation, count, element_size),
                     std::source_location::current());
  }
  remember_own_range(address_of(pointer), bytes, current_device());
  return pointer;
}

void unregister_host(std::string_view operation, void* pointer) {
  if (pointer == nullptr) throw_invalid_argument(operation, "pointer is a null pointer");
  forget_own_range(address_of(pointer));
  CUresult status = in_owner_context(address_of(pointer), [&] { return driver().cuMemHostUnregister(pointer); });
  if (status == CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED) {
    throw_invalid_argument(operation, "pointer " + hex(pointer) +
                                          " is not the start of a registered range (never registered, or already "
                                          "unregistered)");
  }
  check(status, "cuMemHostUnregister", hex(pointer));
}

void unregister_host_nothrow(void* pointer) noexcept {
  forget_own_range(address_of(pointer));
  in_owner_context(address_of(pointer), [&] { return driver().cuMemHostUnregister(pointer); });
}

CUdeviceptr malloc_device(std::string_view operation, std::size_t count, std::size_t element_size) {
  const std::size_t bytes = allocation_bytes(operation, count, element_size);
  CUdeviceptr pointer = 0;
  CUresult status = driver().cuMemAlloc(&pointer, bytes);
  if (status != CUDA_SUCCESS) {
    throw_cuda_error(status, "cuMemAlloc", describe_request(operation, count, element_size),
                     std::source_location::current());
  }
  remember_own_range(pointer, bytes, current_device());
  return pointer;
}

CUdeviceptr malloc_managed(std::string_view operation, std::size_t count, std::size_t element_size,
                           attach_flag flag) {
  if (flag != attach_flag::global && flag != attach_flag::host) {
    throw_invalid_argument(operation, "attach flag " + to_string(flag) +
                                          " is not accepted here (global or host; single is for attach_array_async)");
  }
  const std::size_t bytes = allocation_bytes(operation, count, element_size);
  CUdeviceptr pointer = 0;
  CUresult status = driver().cuMemAllocManaged(&pointer, bytes, to_driver(flag));
  if (status != CUDA_SUCCESS) {
    throw_cuda_error(status, "cuMemAllocManaged", describe_request(operation, count, element_size),
                     std::source_location::current());
  }
  remember_own_range(pointer, bytes, current_device());
  return pointer;
}

void free_device(std::string_view operation, CUdeviceptr pointer) {
  if (pointer == 0) throw_invalid_argument(operation, "pointer is a null device pointer");
  CUdeviceptr base = 0;
  std::size_t size = 0;
  // Checked first so that a double free or an interior pointer is a clear invalid_argument rather than
  // whatever the driver makes of it.
  if (driver().cuMemGetAddressRange(&base, &size, pointer) != CUDA_SUCCESS) {
    throw_invalid_argument(operation, "pointer " + hex(pointer) +
                                          " is not a live device allocation (never allocated, or already freed)");
  }
  if (base != pointer) {
    throw_invalid_argument(operation, "pointer " + hex(pointer) + " points inside the allocation that starts at " +
                                          hex(base) + "; free takes the start of an allocation");
  }
  forget_own_range(pointer);
  check(in_owner_context(pointer, [&] { return driver().cuMemFree(pointer); }), "cuMemFree", hex(pointer));
}

void free_device_nothrow(CUdeviceptr pointer) noexcept {
  forget_own_range(pointer);
  in_owner_context(pointer, [&] { return driver().cuMemFree(pointer); });
}

}  // namespace ferry::detail
