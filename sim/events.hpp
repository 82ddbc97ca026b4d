// Simulated events. Each cuEventRecord makes a record point that the stream marks when it gets there;
// the event answers for its latest record point, and cuStreamWaitEvent waits on the one current at the
// time of the call, as the driver's semantics ask.
#pragma once

#include <cuda.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>

namespace ferry::sim::detail {

class context;

class record_point {
 public:
  using clock = std::chrono::steady_clock;

  void mark() noexcept;
  bool reached() const;
  clock::time_point when() const;
  // Until reached, or until `waiter` (and so whoever waits) is poisoned; returns reached().
  bool wait(const context& waiter) const;

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable marked_;
  bool reached_ = false;
  clock::time_point when_{};
};

class event {
 public:
  event(context& owner, unsigned flags) noexcept : owner_(owner), flags_(flags) {}

  context& owner() const noexcept { return owner_; }
  bool timing() const noexcept { return (flags_ & CU_EVENT_DISABLE_TIMING) == 0; }
  // Null until first recorded: an event recorded on nothing is complete.
  std::shared_ptr<record_point> last() const;
  void recorded_at(std::shared_ptr<record_point> point);

 private:
  context& owner_;
  const unsigned flags_;
  mutable std::mutex mutex_;
  std::shared_ptr<record_point> last_;
};

CUresult find_event(CUevent handle, std::shared_ptr<event>& out);
void forget_events_of(const context* ctx);
std::size_t event_count();

}  // namespace ferry::sim::detail
