// Keeping an io_context awake while completions are owed there. A thread parked on a virtual machine
// can take long to run again once woken, which is what an io_context thread pays when ferry posts a
// completion to it. While completions are owed to an io_context, the engine keeps one of its threads
// running: a small task that re-queues itself (defer, so that other handlers and the reactor run in
// between) until `spin` has passed without a submission or completion there (`linger` once nothing is
// owed). It is the counterpart of the driver's own spin-wait in cuStreamSynchronize;
// engine_options::executor_spin sets `spin` (zero: never); the linger is the poller's spin after activity.
#pragma once

#include <boost/asio/defer.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <utility>

#include "ferry/detail/pending_handlers.hpp"
#include "ferry/detail/spin_pause.hpp"

namespace ferry::detail {

// Deliveries taken from a mailbox, oldest first; those not run are destroyed with it (their handlers
// destroyed, as Asio destroys handlers it never ran).
class delivery_list {
  using delivery = pending_handlers::registry::delivery;

 public:
  // `stack`: newest first, as the mailbox holds them.
  explicit delivery_list(delivery* stack) noexcept {
    while (stack != nullptr) {
      delivery* next = stack->next;
      stack->next = first_;
      first_ = stack;
      stack = next;
    }
  }
  delivery_list(delivery_list&& other) noexcept : first_(std::exchange(other.first_, nullptr)) {}
  delivery_list& operator=(delivery_list&&) = delete;
  ~delivery_list() {
    while (first_ != nullptr) delete std::exchange(first_, first_->next);
  }
  bool empty() const noexcept { return first_ == nullptr; }
  // Runs them in order; if one throws, the rest stay in the list.
  void run_all() {
    while (first_ != nullptr) {
      std::unique_ptr<delivery> item(std::exchange(first_, first_->next));
      item->run();
    }
  }
  // Runs them in order up to the first that must follow a posted completion; the rest stay in the list.
  void run_until_behind_posted() {
    while (first_ != nullptr && !first_->behind_posted) {
      std::unique_ptr<delivery> item(std::exchange(first_, first_->next));
      item->run();
    }
  }

 private:
  delivery* first_ = nullptr;
};

// How long an io_context is kept awake without activity: `spin` while completions are owed there (zero:
// not at all), `linger` once none is (at most `spin`; each submission sets the io_context's linger). A
// thread that waits for each op before it submits the next (a request/response loop, the one-at-a-time
// transfers of a benchmark) submits within microseconds of its handler, or after a pause (its own work
// on the result, a benchmark's check between trials), and then finds a turn waiting instead of paying
// for posting a new one and for the parked thread's wake-up twice. The engine lingers as long as its
// poller spins after activity (completion_bridge::spin_window), so that such a pause finds both awake or
// both parked.
struct awake_times {
  std::chrono::microseconds spin{0};
  std::chrono::microseconds linger{0};
};

// The task that keeps a thread of an io_context running while completions are owed there.
template <class Executor>
struct keep_awake {
  // How long one turn of the task waits in place for a completion before it gives the thread back to
  // the io_context's other handlers. Waiting in place rather than re-queuing at once: an io thread
  // looping through its scheduler holds the scheduler's mutex much of the time, and the completion's
  // post from the engine's thread then waits for that mutex.
  static constexpr std::chrono::microseconds turn{20};
  // How long after the last submission or completion a turn looks for a completion often (see below).
  static constexpr std::chrono::microseconds fine_look_window{50};

  std::shared_ptr<pending_handlers::registry> owner;
  Executor executor;
  std::chrono::steady_clock::duration spin;  // the linger is the io_context's (owner->linger)

  bool wanted() const noexcept {
    if (owner->shut_down_flag()) return false;
    const std::int64_t idle = steady_ticks() - owner->last_activity.load();
    const std::int64_t spin_ticks = spin.count();
    const std::int64_t limit =
        owner->owed.load() > 0 ? spin_ticks : std::min(spin_ticks, owner->linger.load(std::memory_order_relaxed));
    return idle < limit;
  }
  // One turn: waits for a completion (handed to the mailbox, or posted), runs what was handed over, then
  // re-queues itself (or stops). The handlers run first: they are what the completion waits for, and the
  // re-queuing reads lines the completing thread has just written. A handler that throws leaves the task
  // re-queued (or stopped) all the same.
  void operator()() {
    const std::uint64_t posted = owner->posted.load(std::memory_order_acquire);
    const std::int64_t turn_begins = steady_ticks();
    const std::int64_t turn_ends =
        turn_begins + std::chrono::duration_cast<std::chrono::steady_clock::duration>(turn).count();
    // Right after a submission or completion another is likely soon: look often then (see the loop).
    const bool recent = turn_begins - owner->last_activity.load() <
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(fine_look_window).count();
    owner->mailbox.store(nullptr, std::memory_order_release);  // open: one turn runs at a time
    // Ends early when a completion was posted (now, or before the turn began and not yet run: it waits
    // in the queue behind this task). Within fine_look_window of the last activity a look is three loads
    // and two pauses, so that a handed-over completion runs soon after it arrives (a completion waits
    // half the time between looks on average); later, 16 pauses, leaving more of the core to what shares
    // it. The clock and wanted() (a clock read each) are looked at every 16th time only.
    const int pauses = recent ? 2 : 16;
    for (unsigned look = 1; owner->mailbox.load(std::memory_order_acquire) == nullptr &&
                            owner->posted.load(std::memory_order_acquire) == posted &&
                            owner->posted_not_run.load(std::memory_order_acquire) == 0;
         ++look) {
      if (look % 16 == 0 && (steady_ticks() >= turn_ends || !wanted())) break;
      for (int i = 0; i < pauses; ++i) spin_pause();
    }
    delivery_list handed(owner->mailbox.exchange(pending_handlers::registry::closed(), std::memory_order_acq_rel));
    const Executor here = executor;
    // After reschedule(), which moves *this away, only locals are touched.
    auto post_rest = [&] {
      if (!handed.empty()) boost::asio::post(here, [rest = std::move(handed)]() mutable { rest.run_all(); });
    };
    try {
      // Those handed over behind a posted completion (its op finished first) go behind it in the queue.
      handed.run_until_behind_posted();
    } catch (...) {
      // As if each had been posted: the exception leaves io_context::run, the others still run.
      reschedule();
      post_rest();
      throw;
    }
    reschedule();
    post_rest();
  }

 private:
  void reschedule() {
    while (true) {
      if (wanted()) {
        boost::asio::defer(executor, std::move(*this));
        return;
      }
      owner->kept_awake.store(false);
      // An op that arrived between the check and the store saw the flag set and started no task: look
      // again, and take the task back unless another one started meanwhile.
      if (!wanted() || owner->kept_awake.exchange(true)) return;
    }
  }
};

}  // namespace ferry::detail
