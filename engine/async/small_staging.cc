#include "engine/async/small_staging.hpp"

#include <utility>

#include "engine/async/caller_context.hpp"
#include "engine/errors/check.hpp"

namespace ferry::detail {

small_staging::small_staging(const driver_table& driver, CUcontext context, std::size_t slot_bytes, std::uint32_t slots,
                             std::function<void(const std::string&)> report)
    : driver_(driver),
      context_(context),
      slot_bytes_(slot_bytes),
      count_(slots),
      report_(std::move(report)),
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
  if (const CUresult status = driver_.cuMemHostAlloc(&memory, slot_bytes_ * count_, CU_MEMHOSTALLOC_PORTABLE);
      status != CUDA_SUCCESS) {
    // Not asked again for every small transfer: a refusal that does not pass would cost each of them a
    // driver call. The transfers still move, by the other plans, and the caller hears why they are slower.
    unavailable_.store(true);
    if (report_) {
      try {
        report_("no page-locked memory for the small staging slots (" + std::to_string(count_) + " of " +
                std::to_string(slot_bytes_) + " bytes: " + status_name(status) +
                "); small pageable transfers take the driver's staging or the staging pool from now on");
      } catch (...) {  // a report that cannot be made (no memory for its text) is not worth an op
      }
    }
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
