#include "examples/pipeline_server/kernels/host_transform.hpp"

#include <bit>

#include "examples/pipeline_server/kernels/transform.hpp"

namespace ferry::pipeline::kernels {

// Words are little-endian loads, as the GPU reads them.
static_assert(std::endian::native == std::endian::little, "the transform's words assume a little-endian host");

namespace {

// The checksum of the `bytes` bytes at `data`, transformed first when `transform`; the words summed are
// written to `result` when it is given (it may be `data`).
std::uint64_t checksum_words(const std::byte* data, std::uint64_t bytes, bool transform, std::byte* result) noexcept {
  std::uint64_t sum = 0;
  for (std::uint64_t start = 0, j = 0; start < bytes; start += 8, ++j) {
    const std::uint64_t length = bytes - start < 8 ? bytes - start : 8;
    std::uint64_t word = 0;
    std::memcpy(&word, data + start, length);
    const std::uint64_t summed = (transform ? transform_word(word, j) : word) & partial_word_mask(length);
    if (result != nullptr) std::memcpy(result + start, &summed, length);
    sum += checksum_term(summed, j);
  }
  return sum;
}

}  // namespace

std::uint64_t transform_checksum_range(std::byte* data, std::uint64_t bytes, std::uint64_t mode) noexcept {
  const bool transform = mode == transform_in_place;
  return checksum_words(data, bytes, transform, transform ? data : nullptr);
}

std::uint64_t transformed_checksum(const std::byte* data, std::uint64_t bytes) noexcept {
  return checksum_words(data, bytes, true, nullptr);
}

}  // namespace ferry::pipeline::kernels
