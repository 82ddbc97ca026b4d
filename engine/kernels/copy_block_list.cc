#include "engine/kernels/copy_block_list.hpp"

#include <limits>
#include <stdexcept>
#include <string>

#include "engine/kernels/launch.hpp"

namespace ferry::detail {
namespace {

// Which end of the copies is the packed range: gather's destination, scatter's source.
enum class packed_end { destination, source };

copy_block_list packed_list(const char* operation, CUdeviceptr packed, packed_end end,
                            std::span<const CUdeviceptr> scattered, std::span<const std::size_t> sizes) {
  if (scattered.size() != sizes.size()) {
    throw std::invalid_argument(std::string(operation) + ": " + std::to_string(scattered.size()) + " addresses but " +
                                std::to_string(sizes.size()) + " sizes");
  }
  const std::size_t count = sizes.size();
  copy_block_list list;
  list.words.resize(3 * count);
  std::uint64_t offset = 0;
  for (std::size_t i = 0; i < count; ++i) {
    if (sizes[i] > std::numeric_limits<std::uint64_t>::max() - packed - offset) {
      throw std::invalid_argument(std::string(operation) + ": the packed blocks run past the end of the address space");
    }
    const std::uint64_t packed_address = packed + offset;
    const bool gathering = end == packed_end::destination;
    list.words[i] = gathering ? scattered[i] : packed_address;
    list.words[count + i] = gathering ? packed_address : scattered[i];
    list.words[2 * count + i] = sizes[i];
    offset += sizes[i];
  }
  return list;
}

}  // namespace

copy_block_list gather_list(std::span<const CUdeviceptr> sources, std::span<const std::size_t> sizes,
                            CUdeviceptr destination) {
  return packed_list("gather_list", destination, packed_end::destination, sources, sizes);
}

copy_block_list scatter_list(CUdeviceptr source, std::span<const CUdeviceptr> destinations,
                             std::span<const std::size_t> sizes) {
  return packed_list("scatter_list", source, packed_end::source, destinations, sizes);
}

CUresult launch_copy_block_list(CUdeviceptr uploaded, std::size_t count, CUstream stream) noexcept {
  const std::uint64_t array_bytes = static_cast<std::uint64_t>(count) * sizeof(std::uint64_t);
  return launch_copy_blocks(uploaded, uploaded + array_bytes, uploaded + 2 * array_bytes, count, stream);
}

}  // namespace ferry::detail
