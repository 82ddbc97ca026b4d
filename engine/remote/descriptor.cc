// ferry::remote::descriptor: the bytes a peer needs to reach a registered window, and the checks that
// turn a malformed or out-of-range descriptor into a clear std::invalid_argument before anything is sent.
#include <cstring>
#include <stdexcept>
#include <string>

#include "ferry/remote.hpp"

namespace ferry::remote {
namespace {

// "FRYDESC1": the format and its version; a descriptor of another format is refused, never guessed at.
constexpr std::uint64_t format_tag = 0x3143534544595246ull;
constexpr std::size_t fixed_bytes = 8 * 7 + 1;

std::string hex(std::uint64_t value) {
  char text[19];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

void check_bounds(std::uint64_t region_address, std::uint64_t region_size, std::uint64_t address, std::uint64_t size,
                  const char* where) {
  if (region_size == 0 || region_address + region_size < region_address) {
    throw std::invalid_argument(std::string(where) + ": the registration [" + hex(region_address) + ", +" +
                                std::to_string(region_size) + ") is empty or wraps around the address space");
  }
  if (size == 0 || address < region_address || address + size < address ||
      address + size > region_address + region_size) {
    throw std::invalid_argument(std::string(where) + ": the window [" + hex(address) + ", +" + std::to_string(size) +
                                ") is empty or lies outside its registration [" + hex(region_address) + ", +" +
                                std::to_string(region_size) + ")");
  }
}

void put_word(std::vector<std::byte>& out, std::uint64_t value) {
  const auto* bytes = reinterpret_cast<const std::byte*>(&value);
  out.insert(out.end(), bytes, bytes + 8);
}

std::uint64_t take_word(std::span<const std::byte>& in) {
  std::uint64_t value;
  std::memcpy(&value, in.data(), 8);
  in = in.subspan(8);
  return value;
}

}  // namespace

descriptor descriptor::make(std::uint64_t owner, memory_kind kind, std::uint64_t region_address,
                            std::uint64_t region_size, std::uint64_t address, std::uint64_t size,
                            std::vector<std::byte> key) {
  check_bounds(region_address, region_size, address, size, "ferry::remote::descriptor");
  if (kind != memory_kind::host && kind != memory_kind::device) {
    throw std::invalid_argument("ferry::remote::descriptor: memory kind " + std::to_string(static_cast<int>(kind)) +
                                " is neither host (1) nor device (2)");
  }
  if (key.empty()) throw std::invalid_argument("ferry::remote::descriptor: the packed remote key is empty");
  descriptor made;
  made.owner_ = owner;
  made.kind_ = kind;
  made.region_address_ = region_address;
  made.region_size_ = region_size;
  made.address_ = address;
  made.size_ = size;
  made.key_ = std::move(key);
  return made;
}

descriptor descriptor::window(std::uint64_t offset, std::uint64_t size) const {
  if (offset > size_ || size > size_ - offset || size == 0) {
    throw std::invalid_argument("ferry::remote::descriptor::window: offset " + std::to_string(offset) + " and size " +
                                std::to_string(size) + " do not fit in the descriptor's " + std::to_string(size_) +
                                " bytes (or size is 0)");
  }
  descriptor part = *this;
  part.address_ = address_ + offset;
  part.size_ = size;
  return part;
}

std::vector<std::byte> descriptor::serialize() const {
  std::vector<std::byte> out;
  out.reserve(fixed_bytes + key_.size());
  put_word(out, format_tag);
  put_word(out, owner_);
  put_word(out, region_address_);
  put_word(out, region_size_);
  put_word(out, address_);
  put_word(out, size_);
  put_word(out, key_.size());
  out.push_back(static_cast<std::byte>(kind_));
  out.insert(out.end(), key_.begin(), key_.end());
  return out;
}

descriptor descriptor::deserialize(std::span<const std::byte> bytes) {
  if (bytes.size() < fixed_bytes) {
    throw std::invalid_argument("ferry::remote::descriptor::deserialize: " + std::to_string(bytes.size()) +
                                " bytes, fewer than the " + std::to_string(fixed_bytes) + " of a descriptor's header");
  }
  if (std::uint64_t tag = take_word(bytes); tag != format_tag) {
    throw std::invalid_argument("ferry::remote::descriptor::deserialize: format tag " + hex(tag) + ", expected " +
                                hex(format_tag) + " (not a ferry::remote descriptor, or another version)");
  }
  std::uint64_t owner = take_word(bytes);
  std::uint64_t region_address = take_word(bytes);
  std::uint64_t region_size = take_word(bytes);
  std::uint64_t address = take_word(bytes);
  std::uint64_t size = take_word(bytes);
  std::uint64_t key_size = take_word(bytes);
  auto kind = static_cast<memory_kind>(bytes[0]);
  bytes = bytes.subspan(1);
  if (key_size != bytes.size()) {
    throw std::invalid_argument("ferry::remote::descriptor::deserialize: the header announces a " +
                                std::to_string(key_size) + "-byte remote key, " + std::to_string(bytes.size()) +
                                " bytes follow");
  }
  return make(owner, kind, region_address, region_size, address, size, std::vector<std::byte>(bytes.begin(), bytes.end()));
}

}  // namespace ferry::remote
