// The messages between two pipeline servers in stage-to-stage mode, over ferry::remote (UCX): the
// previous stage (A) puts a transformed payload into a slot of the next stage's (B's) window, then sends
// a forward message naming the slot; B checksums the slot's bytes on its GPU and answers with the
// request's id, so that replies may come back in any order. Every integer little-endian, packed:
//
//   window (B -> A, the first message on a connection):
//     magic "FSW1" (u32 0x31575346) | slots (u32) | slot bytes (u64) | the window's descriptor
//     (ferry::remote::descriptor::serialize: slot i is [i * slot bytes, (i + 1) * slot bytes) of it)
//   forward (A -> B):  request id (u64) | slot (u32) | bytes (u64)
//   answer (B -> A):   request id (u64) | status (u32) | checksum (u64) | message (UTF-8, when not ok)
//
// A slot holds a payload of up to slot bytes - checksum_slot_bytes bytes, and B's checksum word after
// it (at checksum_offset(bytes)); slots start 16-byte aligned, as the kernel loads its data. A slot is
// A's to fill again only once B has answered for it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "examples/pipeline_server/protocol.hpp"

namespace ferry::pipeline {

inline constexpr std::uint32_t window_magic = 0x31575346;  // "FSW1" as bytes
inline constexpr std::size_t window_header_bytes = 16;
inline constexpr std::size_t forward_message_bytes = 20;
inline constexpr std::size_t answer_header_bytes = 20;
// An answer's message is cut to this, so that the receiver's buffer is of a known size.
inline constexpr std::size_t answer_message_limit = 1000;

struct window_header {
  std::uint32_t slots = 0;
  std::uint64_t slot_bytes = 0;
};

struct forward_message {
  std::uint64_t request_id = 0;
  std::uint32_t slot = 0;
  std::uint64_t bytes = 0;
};

struct forward_answer {
  std::uint64_t request_id = 0;
  pipeline::status status = status::ok;
  std::uint64_t checksum = 0;
  std::string message;  // why, when status is not ok
};

// The window message: the header, then the descriptor's bytes.
std::vector<std::byte> encode_window(const window_header& header, std::span<const std::byte> descriptor);
// The header and the descriptor's bytes of a window message; std::invalid_argument naming what is wrong.
std::pair<window_header, std::span<const std::byte>> decode_window(std::span<const std::byte> message);

std::array<std::byte, forward_message_bytes> encode(const forward_message& message) noexcept;
// Nothing when the message is not forward_message_bytes long.
std::optional<forward_message> decode_forward(std::span<const std::byte> message) noexcept;

std::vector<std::byte> encode(const forward_answer& answer);
// Nothing when the message is shorter than an answer's header.
std::optional<forward_answer> decode_answer(std::span<const std::byte> message);

}  // namespace ferry::pipeline
