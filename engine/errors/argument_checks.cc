#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>

#include "ferry/detail/check.hpp"
#include "ferry/detail/engine_core.hpp"

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

void force_plan(prepared_transfer& transfer, transfer_plan plan) {
  switch (plan) {
    case transfer_plan::automatic:
    case transfer_plan::pinned:
    case transfer_plan::registered:
    case transfer_plan::staged:
      transfer.plan = plan;
      return;
    case transfer_plan::batched:
      throw_invalid_argument(transfer.operation,
                             "transfer_options::plan is batched; batching is the planner's choice for small "
                             "page-locked copies and cannot be forced (force pinned, registered or staged)");
  }
  throw_invalid_argument(transfer.operation, "transfer_options::plan " + std::to_string(static_cast<int>(plan)) +
                                                 " is not a transfer_plan");
}

}  // namespace ferry::detail
