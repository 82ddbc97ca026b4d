// The sequence numbers of the engine's ops still in flight, for wait_all: which is the oldest. Ops are
// admitted in sequence order and retired in any order, so a ring of done marks over [oldest, next)
// answers it, and reuses its memory: no allocation per op once it has grown to the most ops in flight.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ferry::detail {

class live_sequences {
 public:
  // `sequence` is one past the last inserted (the first may be any).
  void insert(std::uint64_t sequence) {
    if (count_ == 0) begin_ = end_ = sequence;
    if (end_ - begin_ == done_.size()) grow();
    done_[end_ & (done_.size() - 1)] = 0;
    ++end_;
    ++count_;
  }
  // `sequence` is live.
  void erase(std::uint64_t sequence) noexcept {
    done_[sequence & (done_.size() - 1)] = 1;
    --count_;
    while (begin_ != end_ && done_[begin_ & (done_.size() - 1)] != 0) ++begin_;
  }
  bool empty() const noexcept { return count_ == 0; }
  // The oldest live sequence; not empty().
  std::uint64_t oldest() const noexcept { return begin_; }

 private:
  // Doubles the ring (a power of two), keeping each mark at its sequence's place.
  void grow() {
    std::vector<std::uint8_t> larger(done_.size() * 2);
    for (std::uint64_t s = begin_; s != end_; ++s) larger[s & (larger.size() - 1)] = done_[s & (done_.size() - 1)];
    done_.swap(larger);
  }

  std::vector<std::uint8_t> done_ = std::vector<std::uint8_t>(64);  // 1: retired, over [begin_, end_)
  std::uint64_t begin_ = 0;  // the oldest live sequence (when count_ > 0)
  std::uint64_t end_ = 0;    // one past the newest admitted
  std::size_t count_ = 0;
};

}  // namespace ferry::detail
