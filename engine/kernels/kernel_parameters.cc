#include "engine/kernels/kernel_parameters.hpp"

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>

namespace ferry::detail {
namespace {

constexpr std::uint64_t address_limit = std::numeric_limits<std::uint64_t>::max();

// a * b, or false when it does not fit in 64 bits.
bool multiply(std::uint64_t a, std::uint64_t b, std::uint64_t& product) {
  if (b != 0 && a > address_limit / b) return false;
  product = a * b;
  return true;
}

// Whether [start, start + bytes) is a range of addresses: empty, or non-null and not wrapping around.
bool addressable(std::uint64_t start, std::uint64_t bytes) {
  return bytes == 0 || (start != 0 && bytes <= address_limit - start);
}

// The 16 bytes of `element` (element_size of 1, 2, 4, 8 or 16 bytes) repeated.
kernels::pattern16 replicated(const void* element, std::size_t element_size) {
  unsigned char bytes[16];
  for (std::size_t offset = 0; offset < sizeof bytes; offset += element_size) {
    std::memcpy(bytes + offset, element, element_size);
  }
  kernels::pattern16 pattern{};
  std::memcpy(&pattern.low, bytes, 8);
  std::memcpy(&pattern.high, bytes + 8, 8);
  return pattern;
}

}  // namespace

CUresult make_fill_parameters(CUdeviceptr destination, std::size_t count, std::size_t element_size,
                              const void* pattern, kernels::fill_parameters& out) noexcept {
  std::uint64_t bytes = 0;
  if ((element_size != 8 && element_size != 16) || pattern == nullptr || !multiply(count, element_size, bytes) ||
      !addressable(destination, bytes)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  out = kernels::fill_parameters{destination, count, replicated(pattern, element_size)};
  return CUDA_SUCCESS;
}

CUresult make_fill_2d_parameters(CUdeviceptr base, std::size_t pitch_bytes, std::size_t width_elements,
                                 std::size_t height, std::size_t element_size, const void* pattern,
                                 kernels::fill_2d_parameters& out) noexcept {
  const bool supported = element_size == 1 || element_size == 2 || element_size == 4 || element_size == 8 ||
                         element_size == 16;
  std::uint64_t row_bytes = 0;
  if (!supported || pattern == nullptr || !multiply(width_elements, element_size, row_bytes)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // Rows are filled in parallel: overlapping rows would race.
  if (height > 1 && row_bytes != 0 && pitch_bytes < row_bytes) return CUDA_ERROR_INVALID_VALUE;
  std::uint64_t extent = 0;
  if (height != 0 && row_bytes != 0) {
    std::uint64_t before_last_row = 0;
    if (!multiply(height - 1, pitch_bytes, before_last_row) || before_last_row > address_limit - row_bytes) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    extent = before_last_row + row_bytes;
  }
  if (!addressable(base, extent)) return CUDA_ERROR_INVALID_VALUE;
  out = kernels::fill_2d_parameters{base, pitch_bytes, row_bytes, height, replicated(pattern, element_size)};
  return CUDA_SUCCESS;
}

CUresult make_copy_blocks_parameters(CUdeviceptr sources, CUdeviceptr destinations, CUdeviceptr sizes,
                                     std::size_t count, kernels::copy_blocks_parameters& out) noexcept {
  std::uint64_t array_bytes = 0;
  if (!multiply(count, sizeof(std::uint64_t), array_bytes)) return CUDA_ERROR_INVALID_VALUE;
  if (count != 0) {
    for (CUdeviceptr array : {sources, destinations, sizes}) {
      // The kernel reads the arrays as 64-bit words, which must be aligned on the GPU.
      if (array % alignof(std::uint64_t) != 0 || !addressable(array, array_bytes)) return CUDA_ERROR_INVALID_VALUE;
    }
  }
  out = kernels::copy_blocks_parameters{sources, destinations, sizes, count};
  return CUDA_SUCCESS;
}

CUresult make_copy_span_parameters(CUdeviceptr source, CUdeviceptr destination, std::size_t bytes,
                                   kernels::copy_span_parameters& out) noexcept {
  if (bytes != 0) {
    if (!addressable(source, bytes) || !addressable(destination, bytes)) return CUDA_ERROR_INVALID_VALUE;
    // The grid reads and writes in no particular order: overlapping ends would read bytes already written.
    if (source < destination + bytes && destination < source + bytes) return CUDA_ERROR_INVALID_VALUE;
  }
  out = kernels::copy_span_parameters{source, destination, bytes};
  return CUDA_SUCCESS;
}

CUresult make_resident_copy_parameters(CUdeviceptr ring, std::size_t slots, std::uint64_t first, CUdeviceptr consumed,
                                       kernels::resident_copy_parameters& out) noexcept {
  if (slots == 0 || slots > SIZE_MAX / sizeof(kernels::resident_slot)) return CUDA_ERROR_INVALID_VALUE;
  if (ring % 8 != 0 || consumed % 8 != 0) return CUDA_ERROR_INVALID_VALUE;
  if (!addressable(ring, slots * sizeof(kernels::resident_slot)) || !addressable(consumed, sizeof(std::uint64_t))) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  out = kernels::resident_copy_parameters{ring, slots, first, consumed};
  return CUDA_SUCCESS;
}

}  // namespace ferry::detail
