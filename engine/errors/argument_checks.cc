#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>

#include "engine/errors/check.hpp"

namespace ferry::detail {

std::string hex(std::uintptr_t address) {
  char buffer[2 + 2 * sizeof(address) + 1];
  std::snprintf(buffer, sizeof buffer, "0x%llx", static_cast<unsigned long long>(address));
  return buffer;
}

void throw_invalid_argument(std::string_view operation, const std::string& what) {
  throw std::invalid_argument(std::string(operation) + ": " + what);
}

std::size_t byte_size(std::string_view operation, std::string_view argument, std::size_t count,
                      std::size_t element_size) {
  if (element_size != 0 && count > std::numeric_limits<std::size_t>::max() / element_size) {
    throw_invalid_argument(operation, std::string(argument) + " of " + std::to_string(count) + " elements of " +
                                          std::to_string(element_size) + " bytes overflows size_t");
  }
  return count * element_size;
}

void check_same_extent(std::string_view operation, std::size_t source_width, std::size_t source_height,
                       std::size_t destination_width, std::size_t destination_height) {
  if (source_width != destination_width || source_height != destination_height) {
    throw_invalid_argument(operation, "source is a " + std::to_string(source_width) + " x " +
                                          std::to_string(source_height) + " region but destination is " +
                                          std::to_string(destination_width) + " x " +
                                          std::to_string(destination_height) +
                                          " (width x height in elements): a 2-D copy needs regions of one size");
  }
}

}  // namespace ferry::detail
