// Managed-memory operations the Haskell package keeps beside Marshal (Foreign.CUDA.Driver.Unified):
// prefetch (CUDA 13 location API) and stream attachment.
#pragma once

#include "ferry/detail/require_cxx20.hpp"

#include <cuda.h>

#include <cstddef>

#include "ferry/context.hpp"
#include "ferry/detail/transfer.hpp"
#include "ferry/flags.hpp"
#include "ferry/pointers.hpp"
#include "ferry/stream.hpp"

namespace ferry {

// Where managed memory should live: the host, or a device.
class memory_location {
 public:
  static memory_location host() noexcept { return memory_location(CU_MEM_LOCATION_TYPE_HOST, 0); }
  static memory_location on(ferry::device device) noexcept {
    return memory_location(CU_MEM_LOCATION_TYPE_DEVICE, device.ordinal());
  }
  CUmemLocation to_driver() const noexcept {
    CUmemLocation location{};
    location.type = type_;
    location.id = id_;
    return location;
  }

 private:
  memory_location(CUmemLocationType type, int id) noexcept : type_(type), id_(id) {}
  CUmemLocationType type_;
  int id_;
};

// Advice to the unified-memory system about how a managed range will be used (cuMemAdvise).
enum class memory_advice {
  read_mostly = CU_MEM_ADVISE_SET_READ_MOSTLY,            // read far more than written: read-only copies where read
  unset_read_mostly = CU_MEM_ADVISE_UNSET_READ_MOSTLY,
  preferred_location = CU_MEM_ADVISE_SET_PREFERRED_LOCATION,  // keep the pages at `location` when possible
  unset_preferred_location = CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION,
  accessed_by = CU_MEM_ADVISE_SET_ACCESSED_BY,            // keep the range mapped for `location`'s accesses
  unset_accessed_by = CU_MEM_ADVISE_UNSET_ACCESSED_BY,
};

// Gives `advice` for `count` elements of managed memory. `location` matters for the preferred-location
// and accessed-by advice (the read-mostly advice ignores it). Throws std::invalid_argument for memory
// that is not managed, a range past its allocation or an unknown device; cuda_error otherwise.
template <storable T>
void advise_array(device_ptr<T> pointer, std::size_t count, memory_advice advice, memory_location location) {
  detail::advise("advise_array", pointer.get(), count, sizeof(T), static_cast<int>(advice),
                 location.to_driver());
}

// Migrates `count` elements of managed memory to `location`, ordered on `stream` (cuMemPrefetchAsync).
template <storable T>
void prefetch_array_async(device_ptr<T> pointer, std::size_t count, memory_location location, stream_ref stream) {
  detail::prefetch("prefetch_array_async", pointer.get(), count, sizeof(T), location.to_driver(), stream.get());
}

// Attaches `count` elements of managed memory to `stream` (attach_flag::single), to all streams
// (global) or to the host (cuStreamAttachMemAsync).
template <storable T>
void attach_array_async(attach_flag flag, stream_ref stream, device_ptr<T> pointer, std::size_t count) {
  detail::attach("attach_array_async", pointer.get(), count, sizeof(T), flag, stream.get());
}

}  // namespace ferry
