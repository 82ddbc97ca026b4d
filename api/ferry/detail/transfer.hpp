// Byte-level transfers behind marshal.hpp and managed.hpp: one description of each side of a copy, so
// that argument checks are written once. Implemented in engine/transfer.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "ferry/flags.hpp"

namespace ferry::detail {

enum class memory_kind { pageable_host, pinned_host, device };

// One side of a transfer: where, what kind of memory, and the argument's name for error messages.
struct endpoint {
  memory_kind kind;
  std::uintptr_t address;
  std::string_view argument;
};

inline endpoint pinned_side(std::string_view argument, const void* address) {
  return {memory_kind::pinned_host, reinterpret_cast<std::uintptr_t>(address), argument};
}
inline endpoint pageable_side(std::string_view argument, const void* address) {
  return {memory_kind::pageable_host, reinterpret_cast<std::uintptr_t>(address), argument};
}
inline endpoint device_side(std::string_view argument, CUdeviceptr address) {
  return {memory_kind::device, static_cast<std::uintptr_t>(address), argument};
}

// A 2-D array seen as rows of `pitch` elements, and the corner (x, y) of the region of interest.
struct plane {
  std::size_t pitch;  // the seed's "array width", in elements
  std::size_t x;
  std::size_t y;
};

// No stream: a synchronous copy. A stream: enqueued on it (host sides must be pinned).
using stream_choice = std::optional<CUstream>;

// Checks a copy's device side alone: count * element_size bytes from side.address lie within memory the
// driver knows. For the operations that allocate the host side themselves (a new vector of `count`
// elements): they check first, so that a bad count is an invalid_argument, never an allocation.
void check_device_range(std::string_view operation, std::size_t count, std::size_t element_size, endpoint side);

// Both regions of a 2-D copy have the same width and height (elements); invalid_argument names them otherwise.
void check_same_extent(std::string_view operation, std::size_t source_width, std::size_t source_height,
                       std::size_t destination_width, std::size_t destination_height);

void copy_1d(std::string_view operation, std::size_t count, std::size_t element_size, endpoint source,
             endpoint destination, stream_choice stream);

void copy_2d(std::string_view operation, std::size_t width, std::size_t height, std::size_t element_size,
             endpoint source, plane source_plane, endpoint destination, plane destination_plane,
             stream_choice stream);

void copy_peer(std::string_view operation, std::size_t count, std::size_t element_size, CUdeviceptr source,
               CUcontext source_context, CUdeviceptr destination, CUcontext destination_context,
               stream_choice stream);

// Sets `count` elements of `element_size` (1, 2, 4, 8 or 16) bytes to the element_size bytes at
// `pattern` (the driver's cuMemsetD8/16/32 for the small sizes, the fill kernel for 8 and 16).
void fill(std::string_view operation, CUdeviceptr destination, std::size_t count, std::size_t element_size,
          const void* pattern, stream_choice stream);

void prefetch(std::string_view operation, CUdeviceptr pointer, std::size_t count, std::size_t element_size,
              CUmemLocation location, CUstream stream);
// `advice`: a memory_advice's value, checked before it becomes a CUmem_advise (a value outside that
// enumeration's range cannot be held in it).
void advise(std::string_view operation, CUdeviceptr pointer, std::size_t count, std::size_t element_size,
            int advice, CUmemLocation location);
void attach(std::string_view operation, CUdeviceptr pointer, std::size_t count, std::size_t element_size,
            attach_flag flag, CUstream stream);

}  // namespace ferry::detail
