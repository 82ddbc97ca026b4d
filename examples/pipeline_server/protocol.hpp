// The pipeline server's wire protocol: length-prefixed binary frames over TCP, every integer
// little-endian. A connection carries any number of requests; replies come back in request order.
//
//   request:  magic "FRQ1" (u32 0x31515246) | operation (u32) | payload length (u64) | payload
//   reply:    magic "FRP1" (u32 0x31505246) | status (u32) | body length (u64) | checksum (u64) | body
//
// Operations: transform (1): the body of an ok reply is the payload transformed (kernels/transform.hpp)
// and the checksum is that of the result; checksum (2): the body is empty and the checksum is that of the
// payload; forward (3): the payload is transformed here and handed to the server's next stage, which
// checksums it: the body is empty and the checksum is that of the transformed payload (the value
// transform reports), as the next stage computed it. A reply whose status is not ok carries a message in
// its body (UTF-8, no terminator) and checksum 0.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace ferry::pipeline {

inline constexpr std::uint32_t request_magic = 0x31515246;  // "FRQ1" as bytes
inline constexpr std::uint32_t reply_magic = 0x31505246;    // "FRP1"
inline constexpr std::size_t request_header_bytes = 16;
inline constexpr std::size_t reply_header_bytes = 24;

enum class operation : std::uint32_t {
  transform = 1,
  checksum = 2,
  forward = 3,  // transform here, checksum on the next stage (stage_protocol.hpp)
};

enum class status : std::uint32_t {
  ok = 0,
  unknown_operation = 1,  // then the connection is closed
  too_large = 2,          // payload length over the server's maximum; then closed
  bad_magic = 3,          // not a request frame; then closed
  truncated = 4,          // the client ended its side before a whole frame; then closed
  deadline_exceeded = 5,  // the request ran past the server's per-request deadline
  gpu_error = 6,          // the GPU step failed (the message names the driver status)
  shutting_down = 7,      // the server stopped before the request could run; then closed
  busy = 8,               // the server serves its maximum of connections: sent instead of serving one; then closed
  no_next_stage = 9,      // forward on a server without a next stage
  next_stage_failed = 10,  // forward: the next stage is gone or answered an error (the message says which)
};

std::string_view to_string(operation op) noexcept;
std::string_view to_string(status s) noexcept;

struct request_header {
  std::uint32_t magic = request_magic;
  std::uint32_t operation = 0;  // raw: an unknown value is the server's to report, not the decoder's
  std::uint64_t length = 0;
};

struct reply_header {
  std::uint32_t magic = reply_magic;
  pipeline::status status = status::ok;
  std::uint64_t length = 0;
  std::uint64_t checksum = 0;
};

std::array<std::byte, request_header_bytes> encode(const request_header& header) noexcept;
std::array<std::byte, reply_header_bytes> encode(const reply_header& header) noexcept;
request_header decode_request(std::span<const std::byte, request_header_bytes> bytes) noexcept;
reply_header decode_reply(std::span<const std::byte, reply_header_bytes> bytes) noexcept;

// The operation a request names, or nothing for a value the protocol does not define.
std::optional<operation> known_operation(std::uint32_t value) noexcept;

// The body length an ok reply to `op` over `payload_length` bytes carries.
std::uint64_t reply_body_length(operation op, std::uint64_t payload_length) noexcept;

}  // namespace ferry::pipeline
