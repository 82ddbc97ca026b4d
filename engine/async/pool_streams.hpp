// The engine's streams for work given none, and which of them takes the next such work. The GPU is done
// with small work sooner on the stream it ran last than on another one (docs/performance.md, "One pool
// stream while idle"), so work goes to the stream that took the work before it while none of the
// engine's work is left there: one op at a time then always uses one stream. Work that finds that stream
// busy goes to an idle one, or to the next in turn when none is idle, so that independent work still
// runs side by side and a small copy does not queue behind a large one. Which stream an op takes never
// matters for correctness (work given no stream has no order), only for speed: the counts are read
// without a lock.
#pragma once

#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <memory>
#include <vector>

#include "engine/transfer/prepared_transfer.hpp"
#include "ferry/detail/prefetch.hpp"

namespace ferry::detail {

class pool_streams {
 public:
  pool_streams() = default;
  pool_streams(const pool_streams&) = delete;
  pool_streams& operator=(const pool_streams&) = delete;

  // Room for `capacity` streams (engine_options::pool_streams, checked), made once before the first add().
  void reserve(std::size_t capacity) {
    busy_ = std::make_unique<std::atomic<std::size_t>[]>(capacity);
    streams_.reserve(capacity);
  }
  // At most `capacity` of them.
  void add(CUstream stream) { streams_.push_back(stream); }

  // A stream for one op's work, and the count of the engine's work on it, which the op holds until the
  // GPU is done with that work.
  struct choice {
    CUstream stream = nullptr;
    in_flight_count held;
  };
  choice take() noexcept {
    const std::size_t count = streams_.size();
    std::size_t chosen = last_.load(std::memory_order_relaxed);
    if (busy_[chosen].load(std::memory_order_relaxed) != 0) {
      std::size_t step = 1;
      while (step < count && busy_[(chosen + step) % count].load(std::memory_order_relaxed) != 0) ++step;
      chosen = (chosen + (step < count ? step : 1)) % count;
      last_.store(chosen, std::memory_order_relaxed);
    }
    return {streams_[chosen], in_flight_count(busy_[chosen])};
  }
  // A stream in turn, not counted: for work whose end the pool does not hear of (the batcher's batches).
  CUstream next_in_turn() noexcept {
    return streams_[turn_.fetch_add(1, std::memory_order_relaxed) % streams_.size()];
  }

  // The work counted on all the streams together.
  std::size_t in_flight() const noexcept {
    std::size_t sum = 0;
    for (std::size_t i = 0; i < streams_.size(); ++i) sum += busy_[i].load(std::memory_order_relaxed);
    return sum;
  }

  // Asks for the counts' line, which the thread that completed the last op wrote: take() reads and
  // writes it. (The first two lines at most: a pool larger than that gains nothing from it.)
  void prefetch() const noexcept {
    prefetch_for_write(busy_.get(), std::min<std::size_t>(streams_.size() * sizeof(std::atomic<std::size_t>), 128));
  }

 private:
  std::vector<CUstream> streams_;
  // The engine's work in flight on each stream: side by side, so that one line holds them (a pool of at
  // most eight streams).
  std::unique_ptr<std::atomic<std::size_t>[]> busy_;
  std::atomic<std::size_t> last_{0};  // the stream that took the last counted work
  std::atomic<std::size_t> turn_{0};
};

}  // namespace ferry::detail
