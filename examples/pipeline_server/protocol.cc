#include "examples/pipeline_server/protocol.hpp"

#include "examples/pipeline_server/wire_integers.hpp"

namespace ferry::pipeline {

using wire::get;
using wire::put;

std::string_view to_string(operation op) noexcept {
  switch (op) {
    case operation::transform: return "transform";
    case operation::checksum: return "checksum";
    case operation::forward: return "forward";
  }
  return "unknown";
}

std::string_view to_string(status s) noexcept {
  switch (s) {
    case status::ok: return "ok";
    case status::unknown_operation: return "unknown_operation";
    case status::too_large: return "too_large";
    case status::bad_magic: return "bad_magic";
    case status::truncated: return "truncated";
    case status::deadline_exceeded: return "deadline_exceeded";
    case status::gpu_error: return "gpu_error";
    case status::shutting_down: return "shutting_down";
    case status::busy: return "busy";
    case status::no_next_stage: return "no_next_stage";
    case status::next_stage_failed: return "next_stage_failed";
  }
  return "unknown";
}

std::array<std::byte, request_header_bytes> encode(const request_header& header) noexcept {
  std::array<std::byte, request_header_bytes> out{};
  put(out.data(), header.magic);
  put(out.data() + 4, header.operation);
  put(out.data() + 8, header.length);
  return out;
}

std::array<std::byte, reply_header_bytes> encode(const reply_header& header) noexcept {
  std::array<std::byte, reply_header_bytes> out{};
  put(out.data(), header.magic);
  put(out.data() + 4, static_cast<std::uint32_t>(header.status));
  put(out.data() + 8, header.length);
  put(out.data() + 16, header.checksum);
  return out;
}

request_header decode_request(std::span<const std::byte, request_header_bytes> bytes) noexcept {
  return request_header{get<std::uint32_t>(bytes.data()), get<std::uint32_t>(bytes.data() + 4),
                        get<std::uint64_t>(bytes.data() + 8)};
}

reply_header decode_reply(std::span<const std::byte, reply_header_bytes> bytes) noexcept {
  return reply_header{get<std::uint32_t>(bytes.data()), static_cast<status>(get<std::uint32_t>(bytes.data() + 4)),
                      get<std::uint64_t>(bytes.data() + 8), get<std::uint64_t>(bytes.data() + 16)};
}

std::optional<operation> known_operation(std::uint32_t value) noexcept {
  if (value == static_cast<std::uint32_t>(operation::transform)) return operation::transform;
  if (value == static_cast<std::uint32_t>(operation::checksum)) return operation::checksum;
  if (value == static_cast<std::uint32_t>(operation::forward)) return operation::forward;
  return std::nullopt;
}

std::uint64_t reply_body_length(operation op, std::uint64_t payload_length) noexcept {
  return op == operation::transform ? payload_length : 0;
}

}  // namespace ferry::pipeline
