// The free members of a fixed set of slots, named by index, taken and given back by any thread without a
// lock: a stack whose head carries a version beside the index, so that a head popped and pushed back
// between another thread's read and its compare-exchange is not mistaken for the one it read (ABA).
// What the bridge's entries and the engine's submission slots are reused through: a submission takes one
// and the bridge thread gives it back, with no allocation and no lock on either side.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "ferry/detail/prefetch.hpp"

namespace ferry::detail {

class free_indices {
 public:
  static constexpr std::uint32_t none = UINT32_MAX;

  // Every index in [0, count) starts free. count < none.
  explicit free_indices(std::uint32_t count) : next_(std::make_unique<std::atomic<std::uint32_t>[]>(count)) {
    for (std::uint32_t i = 0; i < count; ++i) next_[i].store(i + 1 < count ? i + 1 : none, std::memory_order_relaxed);
    head_.store(count > 0 ? 0 : none, std::memory_order_release);
  }
  free_indices(const free_indices&) = delete;
  free_indices& operator=(const free_indices&) = delete;

  // A free index, now the caller's, or none when every one is taken. What the last holder wrote to the
  // slot happens before the caller's use (acquire on the head, released by push).
  std::uint32_t pop() noexcept {
    std::uint64_t head = head_.load(std::memory_order_acquire);
    while (index_of(head) != none) {
      // A stale read of next_ (the slot was taken and given back meanwhile) fails the exchange: the
      // version moved on.
      const std::uint32_t next = next_[index_of(head)].load(std::memory_order_relaxed);
      if (head_.compare_exchange_weak(head, with_version(head, next), std::memory_order_acquire,
                                      std::memory_order_acquire)) {
        return index_of(head);
      }
    }
    return none;
  }

  // Asks for the head's line ahead of a pop or push (another thread's push or pop wrote it last).
  void prefetch() const noexcept { prefetch_for_write(&head_, sizeof(head_)); }

  // Gives `index` back (its holder is done with the slot).
  void push(std::uint32_t index) noexcept {
    std::uint64_t head = head_.load(std::memory_order_relaxed);
    do {
      next_[index].store(index_of(head), std::memory_order_relaxed);
    } while (!head_.compare_exchange_weak(head, with_version(head, index), std::memory_order_release,
                                          std::memory_order_relaxed));
  }

 private:
  static std::uint32_t index_of(std::uint64_t head) noexcept { return static_cast<std::uint32_t>(head); }
  static std::uint64_t with_version(std::uint64_t previous, std::uint32_t index) noexcept {
    return ((previous >> 32) + 1) << 32 | index;
  }

  std::unique_ptr<std::atomic<std::uint32_t>[]> next_;
  std::atomic<std::uint64_t> head_{none};
};

}  // namespace ferry::detail
