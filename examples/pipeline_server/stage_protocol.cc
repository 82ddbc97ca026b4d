#include "examples/pipeline_server/stage_protocol.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "examples/pipeline_server/buffer_pool.hpp"
#include "examples/pipeline_server/wire_integers.hpp"

namespace ferry::pipeline {

using wire::get;
using wire::put;

std::vector<std::byte> encode_window(const window_header& header, std::span<const std::byte> descriptor) {
  std::vector<std::byte> out(window_header_bytes + descriptor.size());
  put(out.data(), window_magic);
  put(out.data() + 4, header.slots);
  put(out.data() + 8, header.slot_bytes);
  std::copy(descriptor.begin(), descriptor.end(), out.begin() + window_header_bytes);
  return out;
}

std::pair<window_header, std::span<const std::byte>> decode_window(std::span<const std::byte> message) {
  if (message.size() < window_header_bytes) {
    throw std::invalid_argument("the next stage's window message has " + std::to_string(message.size()) +
                                " bytes, fewer than its " + std::to_string(window_header_bytes) + "-byte header");
  }
  if (get<std::uint32_t>(message.data()) != window_magic) {
    throw std::invalid_argument("the next stage's first message is not a window message (magic 0x31575346, \"FSW1\"): "
                                "is the port a pipeline server's stage port?");
  }
  const window_header header{get<std::uint32_t>(message.data() + 4), get<std::uint64_t>(message.data() + 8)};
  if (header.slots == 0 || header.slot_bytes < checksum_slot_bytes || header.slot_bytes % 16 != 0) {
    throw std::invalid_argument("the next stage's window has " + std::to_string(header.slots) + " slots of " +
                                std::to_string(header.slot_bytes) +
                                " bytes: expected at least one slot, 16-byte aligned, with room for the checksum");
  }
  return {header, message.subspan(window_header_bytes)};
}

std::array<std::byte, forward_message_bytes> encode(const forward_message& message) noexcept {
  std::array<std::byte, forward_message_bytes> out{};
  put(out.data(), message.request_id);
  put(out.data() + 8, message.slot);
  put(out.data() + 12, message.bytes);
  return out;
}

std::optional<forward_message> decode_forward(std::span<const std::byte> message) noexcept {
  if (message.size() != forward_message_bytes) return std::nullopt;
  return forward_message{get<std::uint64_t>(message.data()), get<std::uint32_t>(message.data() + 8),
                         get<std::uint64_t>(message.data() + 12)};
}

std::vector<std::byte> encode(const forward_answer& answer) {
  const std::size_t text = std::min(answer.message.size(), answer_message_limit);
  std::vector<std::byte> out(answer_header_bytes + text);
  put(out.data(), answer.request_id);
  put(out.data() + 8, static_cast<std::uint32_t>(answer.status));
  put(out.data() + 12, answer.checksum);
  std::memcpy(out.data() + answer_header_bytes, answer.message.data(), text);
  return out;
}

std::optional<forward_answer> decode_answer(std::span<const std::byte> message) {
  if (message.size() < answer_header_bytes) return std::nullopt;
  forward_answer answer{get<std::uint64_t>(message.data()), static_cast<status>(get<std::uint32_t>(message.data() + 8)),
                        get<std::uint64_t>(message.data() + 12), {}};
  answer.message.assign(reinterpret_cast<const char*>(message.data() + answer_header_bytes),
                        message.size() - answer_header_bytes);
  return answer;
}

}  // namespace ferry::pipeline
