#include "sim/address_space.hpp"

#include <sys/mman.h>

#include <iterator>

namespace ferry::sim::detail {

address_space& address_space::instance() {
  // Leaked: stream workers may still resolve addresses while static destructors run at exit.
  static address_space* const space = new address_space();
  return *space;
}

address_space::address_space() {
  // Sanitizers shadow or limit large mappings, so back off until one fits: a smaller space only means
  // an earlier CUDA_ERROR_OUT_OF_MEMORY.
  for (std::size_t gib : {64, 32, 16, 4, 1}) {
    const std::size_t bytes = gib << 30;
    void* start = ::mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (start == MAP_FAILED) continue;
    base_ = reinterpret_cast<std::uintptr_t>(start);
    size_ = bytes;
    free_.emplace(base_, size_);
    return;
  }
}

std::optional<std::uintptr_t> address_space::take(std::size_t bytes) {
  if (bytes == 0 || bytes > size_) return std::nullopt;
  const std::size_t wanted = rounded(bytes);
  std::lock_guard lock(mutex_);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < wanted) continue;
    const std::uintptr_t address = it->first;
    const std::size_t left = it->second - wanted;
    free_.erase(it);
    if (left != 0) free_.emplace(address + wanted, left);
    return address;
  }
  return std::nullopt;
}

void address_space::give_back(std::uintptr_t address, std::size_t bytes) {
  std::size_t size = rounded(bytes);
  std::lock_guard lock(mutex_);
  auto next = free_.lower_bound(address);
  if (next != free_.end() && address + size == next->first) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto previous = std::prev(next);
    if (previous->first + previous->second == address) {
      previous->second += size;
      return;
    }
  }
  free_.emplace(address, size);
}

}  // namespace ferry::sim::detail
