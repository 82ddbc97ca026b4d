// How a transfer is named in a cuda_error: the operation, the byte range, and where it ran.
#pragma once

#include <string>
#include <string_view>

#include "engine/errors/check.hpp"
#include "ferry/detail/transfer.hpp"

namespace ferry::detail {

inline std::string describe_stream(const stream_choice& stream) {
  if (!stream) return "synchronously";
  return *stream ? "on stream " + hex(*stream) : "on the legacy default stream";
}

// "poke_array_async: 4096 bytes from 0x.. to 0x.. on stream 0x.."
inline std::string describe_transfer(std::string_view operation, std::size_t bytes, std::uintptr_t from,
                                     std::uintptr_t to, const stream_choice& stream) {
  return std::string(operation) + ": " + std::to_string(bytes) + " bytes from " + hex(from) + " to " + hex(to) + " " +
         describe_stream(stream);
}

}  // namespace ferry::detail
