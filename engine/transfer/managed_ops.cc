#include <string>

#include "engine/driver/driver_table.hpp"
#include "engine/memory/known_ranges.hpp"
#include "engine/transfer/plans.hpp"
#include "engine/transfer/stream_names.hpp"
#include "engine/errors/check.hpp"
#include "ferry/detail/transfer.hpp"

namespace ferry::detail {
namespace {

void check_managed(std::string_view operation, CUdeviceptr pointer, std::size_t bytes) {
  check_side(operation, device_side("pointer", pointer), 0, bytes);
  unsigned int managed = 0;
  if (driver().cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, pointer) != CUDA_SUCCESS || !managed) {
    throw_invalid_argument(operation, "pointer " + hex(pointer) +
                                          " is not managed memory (allocate it with malloc_managed_array)");
  }
}

// "the host" or "device 1": where a prefetch moves the pages, in messages.
std::string describe_location(const CUmemLocation& location) {
  return location.type == CU_MEM_LOCATION_TYPE_HOST ? std::string("the host") : "device " + std::to_string(location.id);
}

}  // namespace

std::size_t plan_prefetch(std::string_view operation, CUdeviceptr pointer, std::size_t count, std::size_t element_size,
                          const CUmemLocation& location) {
  const std::size_t bytes = byte_size(operation, "count", count, element_size);
  check_managed(operation, pointer, bytes);
  if (location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
    int devices = 0;
    check(driver().cuDeviceGetCount(&devices), "cuDeviceGetCount");
    if (location.id < 0 || location.id >= devices) {
      throw_invalid_argument(operation, "location names device " + std::to_string(location.id) + ", but " +
                                            std::to_string(devices) + " device(s) are present");
    }
  } else if (location.type != CU_MEM_LOCATION_TYPE_HOST) {
    throw_invalid_argument(operation, "location type " + std::to_string(static_cast<int>(location.type)) +
                                          " is neither a device nor the host");
  }
  return bytes;
}

prepared_transfer prepare_prefetch(std::string_view operation, CUdeviceptr pointer, std::size_t count,
                                   std::size_t element_size, const CUmemLocation& location) {
  const std::size_t bytes = plan_prefetch(operation, pointer, count, element_size, location);
  prepared_transfer transfer;
  transfer.operation = operation;
  transfer.bytes = bytes;
  transfer.destination = device_side("pointer", pointer);
  transfer.extra = std::to_string(bytes) + " bytes at " + hex(pointer) + " to " + describe_location(location);
  const auto& driver = detail::driver();
  transfer.enqueue = [&driver, pointer, bytes, location](const prepared_transfer&, CUstream stream) {
    return driver.cuMemPrefetchAsync(pointer, bytes, location, 0, stream);
  };
  return transfer;
}

void prefetch(std::string_view operation, CUdeviceptr pointer, std::size_t count, std::size_t element_size,
              CUmemLocation location, CUstream stream) {
  const std::size_t bytes = plan_prefetch(operation, pointer, count, element_size, location);
  if (bytes == 0) return;
  CUresult status = driver().cuMemPrefetchAsync(pointer, bytes, location, 0, stream);
  if (status != CUDA_SUCCESS) {
    throw_cuda_error(status, "cuMemPrefetchAsync",
                     std::string(operation) + ": " + std::to_string(bytes) + " bytes at " + hex(pointer) + " to " +
                         describe_location(location) + " " + describe_stream(stream),
                     std::source_location::current());
  }
}

void advise(std::string_view operation, CUdeviceptr pointer, std::size_t count, std::size_t element_size,
            int advice, CUmemLocation location) {
  // The same checks as a prefetch: managed memory, inside its allocation, a device that exists; and
  // advice the driver defines (a memory_advice cast from another number is none).
  const std::size_t bytes = plan_prefetch(operation, pointer, count, element_size, location);
  if (advice < CU_MEM_ADVISE_SET_READ_MOSTLY || advice > CU_MEM_ADVISE_UNSET_ACCESSED_BY) {
    throw_invalid_argument(operation, "advice " + std::to_string(advice) +
                                          " is not one of memory_advice's values (1 to 6)");
  }
  if (bytes == 0) return;
  CUresult status = driver().cuMemAdvise(pointer, bytes, static_cast<CUmem_advise>(advice), location);
  if (status != CUDA_SUCCESS) {
    throw_cuda_error(status, "cuMemAdvise",
                     std::string(operation) + ": advice " + std::to_string(advice) + " for " +
                         std::to_string(bytes) + " bytes at " + hex(pointer),
                     std::source_location::current());
  }
}

std::size_t plan_attach(std::string_view operation, CUdeviceptr pointer, std::size_t count, std::size_t element_size,
                        attach_flag flag) {
  const std::size_t bytes = byte_size(operation, "count", count, element_size);
  check_managed(operation, pointer, bytes);
  if (flag != attach_flag::global && flag != attach_flag::host && flag != attach_flag::single) {
    throw_invalid_argument(operation, "attach flag " + to_string(flag) + " is not one of global, host, single");
  }
  return bytes;
}

void attach(std::string_view operation, CUdeviceptr pointer, std::size_t count, std::size_t element_size,
            attach_flag flag, CUstream stream) {
  const std::size_t bytes = plan_attach(operation, pointer, count, element_size, flag);
  CUresult status = driver().cuStreamAttachMemAsync(stream, pointer, bytes, to_driver(flag));
  if (status != CUDA_SUCCESS) {
    throw_cuda_error(status, "cuStreamAttachMemAsync",
                     std::string(operation) + ": " + std::to_string(bytes) + " bytes at " + hex(pointer) + " (" +
                         to_string(flag) + ") " + describe_stream(stream),
                     std::source_location::current());
  }
}

}  // namespace ferry::detail
