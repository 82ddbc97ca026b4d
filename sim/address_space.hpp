// The simulated devices' virtual address space: one PROT_NONE reservation, so that device pointers are
// never dereferenceable on the host and never collide with host memory, carved first-fit into
// 256-byte-aligned ranges.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>

namespace ferry::sim::detail {

class address_space {
 public:
  static constexpr std::size_t alignment = 256;

  static address_space& instance();

  bool contains(std::uintptr_t address) const noexcept {
    return address - base_ < size_;
  }

  // A free range of at least `bytes`, or nullopt when the reservation is exhausted.
  std::optional<std::uintptr_t> take(std::size_t bytes);
  // Returns a range handed out by take(bytes).
  void give_back(std::uintptr_t address, std::size_t bytes);

 private:
  address_space();

  static std::size_t rounded(std::size_t bytes) noexcept {
    return (bytes + alignment - 1) / alignment * alignment;
  }

  std::uintptr_t base_ = 0;
  std::size_t size_ = 0;
  std::mutex mutex_;
  std::map<std::uintptr_t, std::size_t> free_;  // base -> size, coalesced
};

}  // namespace ferry::sim::detail
