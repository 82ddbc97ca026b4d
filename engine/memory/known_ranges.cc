#include "engine/memory/known_ranges.hpp"

#include <cstdint>
#include <string>

#include "engine/driver/driver_table.hpp"
#include "engine/errors/check.hpp"
#include "engine/memory/own_ranges.hpp"

namespace ferry::detail {
namespace {

std::string_view kind_name(memory_kind kind) {
  switch (kind) {
    case memory_kind::device: return "device memory";
    case memory_kind::pinned_host: return "page-locked host memory";
    case memory_kind::pageable_host: return "host memory";
  }
  return "memory";
}

std::string_view how_to_get(memory_kind kind) {
  return kind == memory_kind::device ? "allocate it with malloc_array, malloc_managed_array or a device_buffer"
                                     : "allocate it with malloc_host_array or a pinned_buffer, or register it";
}

}  // namespace

host_memory_facts ask_driver_about_host_memory(std::uintptr_t address) noexcept {
  CUdeviceptr base = 0;
  std::size_t size = 0;
  int device = -1;
  unsigned type = 0, managed = 0;
  // Pointer attributes cover every kind the driver tracks (device, managed, pinned, registered) under
  // unified addressing, in one call: an op with a pageable side asks this once before its work is
  // enqueued. (An address the driver does not know is no error here: every attribute reads 0.)
  CUpointer_attribute attributes[] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                                      CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                      CU_POINTER_ATTRIBUTE_IS_MANAGED};
  void* values[] = {&base, &size, &device, &type, &managed};
  host_memory_facts facts;
  if (detail::driver().cuPointerGetAttributes(5, attributes, values, address) != CUDA_SUCCESS) return facts;
  facts.device_only = type == CU_MEMORYTYPE_DEVICE && !managed;
  if (size != 0) facts.range = known_range{static_cast<std::uintptr_t>(base), size, device};
  return facts;
}

std::optional<known_range> host_range_known_to_driver(std::uintptr_t address) noexcept {
  return ask_driver_about_host_memory(address).range;
}

std::optional<known_range> range_known_to_driver(std::uintptr_t address) noexcept {
  if (std::optional<known_range> known = host_range_known_to_driver(address)) return known;
  // cuMemGetAddressRange is the fallback for device memory.
  CUdeviceptr base = 0;
  std::size_t size = 0;
  if (detail::driver().cuMemGetAddressRange(&base, &size, static_cast<CUdeviceptr>(address)) == CUDA_SUCCESS) {
    return known_range{static_cast<std::uintptr_t>(base), size};
  }
  return std::nullopt;
}

int current_device() noexcept {
  CUdevice current = -1;
  return detail::driver().cuCtxGetDevice(&current) == CUDA_SUCCESS ? static_cast<int>(current) : -1;
}

bool on_current_device(const known_range& range) noexcept {
  return range.device >= 0 && current_device() == range.device;
}

std::string memory_of_another_device(std::string_view argument, std::uintptr_t address, int device,
                                     int engine_device) {
  const std::string engine = "the engine's device " + std::to_string(engine_device);
  return std::string(argument) + " " + hex(address) + " is memory " +
         (device >= 0 ? "of device " + std::to_string(device) + ", not of " + engine
                      : "whose device the driver does not report, not known to be " + engine);
}

namespace {

// The allocation holding `address`: from ferry's own record first, without a driver call.
std::optional<known_range> known_range_of(std::uintptr_t address) noexcept {
  if (std::optional<known_range> own = own_range(address)) return own;
  return range_known_to_driver(address);
}

}  // namespace

bool is_device_only_memory(std::uintptr_t address) noexcept {
  return ask_driver_about_host_memory(address).device_only;
}

std::optional<known_range> check_side(std::string_view operation, const endpoint& side, std::size_t offset,
                                      std::size_t bytes) {
  const std::string argument(side.argument);
  // An empty vector or span may have no storage: its null data() is fine when nothing is touched.
  // Device and page-locked pointers are named by the caller, never empty containers.
  if (side.address == 0 && !(side.kind == memory_kind::pageable_host && bytes == 0)) {
    throw_invalid_argument(operation, argument + " is a null pointer");
  }
  if (bytes == 0) return std::nullopt;
  if (side.kind == memory_kind::pageable_host) {
    // Pageable memory cannot be looked up, but a range past the end of the address space is no memory:
    // its end would wrap to a low address, which every later check (overlaps, packing) would misread.
    if (runs_past_address_space(side.address, offset, bytes)) {
      const std::string at = offset == 0 ? "" : " + offset " + std::to_string(offset);
      throw_invalid_argument(operation, argument + " " + hex(side.address) + at + ": " + std::to_string(bytes) +
                                            " bytes from there run past the end of the address space");
    }
    return std::nullopt;
  }
  const std::optional<known_range> range = known_range_of(side.address);
  if (!range) {
    throw_invalid_argument(operation, argument + " " + hex(side.address) + " is not " +
                                          std::string(kind_name(side.kind)) + " the driver knows (" +
                                          std::string(how_to_get(side.kind)) + "; freed memory is unknown too)");
  }
  // An offset that wraps the address space would land back inside the allocation.
  if (offset > UINTPTR_MAX - side.address) {
    throw_invalid_argument(operation, argument + " " + hex(side.address) + " + offset " + std::to_string(offset) +
                                          " bytes runs past the end of the address space");
  }
  const std::uintptr_t begin = side.address + offset;
  const std::uintptr_t end_of_allocation = range->base + range->size;
  if (begin < range->base || begin > end_of_allocation || bytes > end_of_allocation - begin) {
    const std::uintptr_t end = begin + bytes;
    throw_invalid_argument(operation, argument + " range [" + hex(begin) + ", " + hex(end) + ") of " +
                                          std::to_string(bytes) + " bytes runs " +
                                          std::to_string(end > end_of_allocation ? end - end_of_allocation : 0) +
                                          " bytes past the end of its allocation [" + hex(range->base) + ", " +
                                          hex(end_of_allocation) + ") of " + std::to_string(range->size) +
                                          " bytes");
  }
  return range;
}

void check_disjoint(std::string_view operation, std::uintptr_t a, std::uintptr_t b, std::size_t bytes) {
  if (bytes == 0) return;
  if (a < b + bytes && b < a + bytes) {
    throw_invalid_argument(operation, "source [" + hex(a) + ", " + hex(a + bytes) + ") and destination [" + hex(b) +
                                          ", " + hex(b + bytes) + ") overlap (" + std::to_string(bytes) +
                                          " bytes each); the copied areas may not overlap");
  }
}

}  // namespace ferry::detail
