// What every prepared transfer shares, whatever its kind: how messages name it.
#include <string>

#include "engine/errors/check.hpp"
#include "ferry/detail/engine_core.hpp"

namespace ferry::detail {

std::string prepared_transfer::label() const {
  if (source.address == 0) return std::string(operation) + ": " + extra;  // fill, prefetch: one side
  return std::string(operation) + ": " + std::to_string(bytes) + " bytes [" + hex(source.address) + " -> " +
         hex(destination.address) + ")" + extra;
}

}  // namespace ferry::detail
