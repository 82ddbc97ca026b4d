#include "engine/async/small_staging.hpp"

#include "engine/async/caller_context.hpp"

namespace ferry::detail {

small_staging::small_staging(const driver_table& driver, CUcontext context, std::size_t slot_bytes, std::uint32_t slots)
    : driver_(driver),
      context_(context),
      slot_bytes_(slot_bytes),
      count_(slots),
      unavailable_(slot_bytes == 0 || slots == 0),
      free_(slots) {}

small_staging::~small_staging() {
  if (std::byte* memory = memory_.load(); memory != nullptr) driver_.cuMemFreeHost(memory);
}

bool small_staging::allocate_once() noexcept {
  std::lock_guard lock(allocating_);
  if (memory_.load() != nullptr) return true;
  if (unavailable_.load()) return false;
  // On the thread of the first small transfer, which need not have the engine's context.
  caller_context in_engine(driver_, context_);
  void* memory = nullptr;
  if (driver_.cuMemHostAlloc(&memory, slot_bytes_ * count_, CU_MEMHOSTALLOC_PORTABLE) != CUDA_SUCCESS) {
    unavailable_.store(true);
    return false;
  }
  memory_.store(static_cast<std::byte*>(memory));
  return true;
}

std::byte* small_staging::take(std::size_t bytes) noexcept {
  if (bytes > slot_bytes_ || unavailable_.load(std::memory_order_relaxed)) return nullptr;
  std::byte* memory = memory_.load(std::memory_order_acquire);
  if (memory == nullptr) {
    if (!allocate_once()) return nullptr;
    memory = memory_.load();
  }
  const std::uint32_t index = free_.pop();
  return index == free_indices::none ? nullptr : memory + std::size_t{index} * slot_bytes_;
}

void small_staging::give_back(std::byte* slot) noexcept {
  free_.push(static_cast<std::uint32_t>((slot - memory_.load(std::memory_order_relaxed)) / slot_bytes_));
}

std::size_t small_staging::allocated_bytes() const noexcept {
  return memory_.load() == nullptr ? 0 : slot_bytes_ * count_;
}

}  // namespace ferry::detail
