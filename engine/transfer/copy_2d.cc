#include <cstdint>
#include <string>

#include "engine/driver/driver_table.hpp"
#include "engine/memory/known_ranges.hpp"
#include "engine/transfer/plans.hpp"
#include "engine/transfer/stream_names.hpp"
#include "engine/errors/check.hpp"
#include "ferry/detail/transfer.hpp"

namespace ferry::detail {
namespace {

// The bytes a region touches, from its first element to the end of its last row.
struct footprint {
  std::size_t begin;   // offset of element (x, y) from the array's start
  std::size_t length;  // from there to the end of the region's last row
};

std::size_t checked_multiply(std::string_view operation, std::string_view what, std::size_t a, std::size_t b) {
  return byte_size(operation, what, a, b);
}

std::size_t checked_add(std::string_view operation, std::string_view what, std::size_t a, std::size_t b) {
  if (a > SIZE_MAX - b) {
    throw_invalid_argument(operation, std::string(what) + " overflows size_t (" + std::to_string(a) + " + " +
                                          std::to_string(b) + ")");
  }
  return a + b;
}

footprint check_plane(std::string_view operation, std::size_t width, std::size_t height, std::size_t element_size,
                      const endpoint& side, const plane& geometry) {
  const std::string argument(side.argument);
  if (geometry.pitch == 0) throw_invalid_argument(operation, argument + " width (pitch) is 0");
  // The driver takes the pitch in bytes (and the overlap check below computes with it).
  checked_multiply(operation, argument + " width (pitch) in bytes", geometry.pitch, element_size);
  if (geometry.x > geometry.pitch || width > geometry.pitch - geometry.x) {
    throw_invalid_argument(operation, argument + " region of width " + std::to_string(width) + " at x " +
                                          std::to_string(geometry.x) + " is wider than its array width " +
                                          std::to_string(geometry.pitch) + " (x + width must be <= array width)");
  }
  const std::size_t first = checked_add(operation, argument + " offset",
                                        checked_multiply(operation, argument + " y * width", geometry.y, geometry.pitch),
                                        geometry.x);
  const std::size_t rows = height == 0 ? 0 : height - 1;
  const std::size_t span = checked_add(operation, argument + " extent",
                                       checked_multiply(operation, argument + " height * width", rows, geometry.pitch),
                                       width);
  const footprint bytes{checked_multiply(operation, argument + " offset", first, element_size),
                        width == 0 || height == 0 ? 0 : checked_multiply(operation, argument + " extent", span, element_size)};
  check_side(operation, side, bytes.begin, bytes.length);
  return bytes;
}

// Two device regions overlap when some row of one meets some row of the other. With equal pitches P,
// row i of the source starts at a + i*P and row j of the destination at b + j*P: they meet when
// |(a - b) + k*P| < row bytes for some k = i - j in (-height, height). Row bytes never exceed P, so only the
// two k nearest (b - a) / P can qualify. With different pitches any meeting of the spans is refused.
void check_regions_disjoint(std::string_view operation, std::size_t width, std::size_t height, std::size_t element_size,
                            const endpoint& source, const plane& source_plane, const footprint& source_bytes,
                            const endpoint& destination, const plane& destination_plane,
                            const footprint& destination_bytes) {
  const std::uintptr_t a = source.address + source_bytes.begin;
  const std::uintptr_t b = destination.address + destination_bytes.begin;
  const bool spans_meet = a < b + destination_bytes.length && b < a + source_bytes.length;
  if (!spans_meet) return;
  // One row each: the spans are the rows. (Past one row, pitch * element_size fits in the allocation, so
  // the signed arithmetic below cannot overflow; with one row the pitch is unchecked and may be huge.)
  if (height > 1 && source_plane.pitch == destination_plane.pitch) {
    const auto pitch = static_cast<std::int64_t>(source_plane.pitch * element_size);
    const auto row_bytes = static_cast<std::int64_t>(width * element_size);
    const auto rows = static_cast<std::int64_t>(height);
    const std::int64_t d = static_cast<std::int64_t>(a) - static_cast<std::int64_t>(b);
    const std::int64_t nearest = -d / pitch;  // truncates toward zero; its neighbours cover the floor and ceiling
    bool rows_meet = false;
    for (std::int64_t k = nearest - 1; k <= nearest + 1; ++k) {
      const std::int64_t gap = d + k * pitch;
      if (k > -rows && k < rows && gap > -row_bytes && gap < row_bytes) rows_meet = true;
    }
    if (!rows_meet) return;
  }
  throw_invalid_argument(operation, "source region at " + hex(a) + " and destination region at " + hex(b) + " (" +
                                        std::to_string(width) + " x " + std::to_string(height) +
                                        " elements) overlap; the copied areas may not overlap");
}

// What a 2-D transfer's messages add to those of a 1-D one: " (4 x 8 elements)".
std::string describe_region(std::size_t width, std::size_t height) {
  return " (" + std::to_string(width) + " x " + std::to_string(height) + " elements)";
}

void describe_side(CUDA_MEMCPY2D& copy, bool is_source, const endpoint& side, const plane& geometry,
                   std::size_t element_size) {
  const bool device = side.kind == memory_kind::device;
  const CUmemorytype type = device ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
  if (is_source) {
    copy.srcMemoryType = type;
    if (device) copy.srcDevice = side.address; else copy.srcHost = reinterpret_cast<const void*>(side.address);
    copy.srcXInBytes = geometry.x * element_size;
    copy.srcY = geometry.y;
    copy.srcPitch = geometry.pitch * element_size;
  } else {
    copy.dstMemoryType = type;
    if (device) copy.dstDevice = side.address; else copy.dstHost = reinterpret_cast<void*>(side.address);
    copy.dstXInBytes = geometry.x * element_size;
    copy.dstY = geometry.y;
    copy.dstPitch = geometry.pitch * element_size;
  }
}

}  // namespace

CUDA_MEMCPY2D plan_copy_2d(std::string_view operation, std::size_t width, std::size_t height, std::size_t element_size,
                           const endpoint& source, const plane& source_plane, const endpoint& destination,
                           const plane& destination_plane) {
  const footprint source_bytes = check_plane(operation, width, height, element_size, source, source_plane);
  const footprint destination_bytes = check_plane(operation, width, height, element_size, destination, destination_plane);
  const bool source_on_device = source.kind == memory_kind::device;
  const bool destination_on_device = destination.kind == memory_kind::device;
  // Page-locked to page-locked is a copy the driver does on a stream (cuMemcpy2DAsync); pageable memory
  // moves only to or from a device.
  const bool both_pinned = source.kind == memory_kind::pinned_host && destination.kind == memory_kind::pinned_host;
  if (!source_on_device && !destination_on_device && !both_pinned) {
    throw_invalid_argument(operation, "source and destination are both host memory, and not both page-locked; ferry "
                                      "copies pageable memory only to or from a device");
  }
  {  // whatever the kinds, as for 1-D copies: a host pointer may name memory the device side names too
    check_regions_disjoint(operation, width, height, element_size, source, source_plane, source_bytes, destination,
                           destination_plane, destination_bytes);
  }
  CUDA_MEMCPY2D copy{};
  describe_side(copy, true, source, source_plane, element_size);
  describe_side(copy, false, destination, destination_plane, element_size);
  copy.WidthInBytes = width * element_size;
  copy.Height = height;
  return copy;
}

prepared_transfer prepare_copy_2d(std::string_view operation, std::size_t width, std::size_t height,
                                  std::size_t element_size, const endpoint& source, const plane& source_plane,
                                  const endpoint& destination, const plane& destination_plane) {
  const CUDA_MEMCPY2D copy =
      plan_copy_2d(operation, width, height, element_size, source, source_plane, destination, destination_plane);
  prepared_transfer transfer;
  transfer.operation = operation;
  transfer.bytes = copy.WidthInBytes * copy.Height;
  transfer.source = source;
  transfer.destination = destination;
  transfer.extra = describe_region(width, height);
  const auto& driver = detail::driver();
  transfer.enqueue = [&driver, copy](const prepared_transfer&, CUstream stream) {
    return driver.cuMemcpy2DAsync(&copy, stream);
  };
  return transfer;
}

void copy_2d(std::string_view operation, std::size_t width, std::size_t height, std::size_t element_size,
             endpoint source, plane source_plane, endpoint destination, plane destination_plane,
             stream_choice stream) {
  const CUDA_MEMCPY2D copy =
      plan_copy_2d(operation, width, height, element_size, source, source_plane, destination, destination_plane);
  if (copy.WidthInBytes == 0 || copy.Height == 0) return;
  const auto& driver = detail::driver();
  CUresult status = stream ? driver.cuMemcpy2DAsync(&copy, *stream) : driver.cuMemcpy2D(&copy);
  if (status != CUDA_SUCCESS) {
    throw_cuda_error(status, stream ? "cuMemcpy2DAsync" : "cuMemcpy2D",
                     describe_transfer(operation, width * height * element_size, source.address, destination.address,
                                       stream) +
                         describe_region(width, height),
                     std::source_location::current());
  }
}

}  // namespace ferry::detail
