// The state every asynchronous engine operation shares with the engine: a type-erased completion, the
// cancellation state machine, and what the op has moved so far. Owned by the engine (shared_ptr) until
// the GPU is done with the op's memory, whatever happens to the caller's handler.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <boost/system/error_code.hpp>

#include "ferry/detail/prefetch.hpp"

namespace ferry::detail {

// Delivers an op's result to its handler: on the handler's associated executor, exactly once.
// complete() may be called from any thread; abandon() destroys the handler without calling it.
class completion {
 public:
  virtual ~completion() = default;
  virtual void complete(boost::system::error_code error, std::size_t bytes) = 0;
  // Brings what complete() will touch into the calling thread's cache (see operation::prefetch).
  virtual void prefetch() const noexcept {}
};

// Marks, for its scope, whether the calling thread delivers completions outside any initiating function
// and outside any lock a handler may want (true): the completion bridge once the GPU is done, a remote
// worker's pass once UCX's progress is over. There complete() runs a handler here and now where
// asio::dispatch would run it: one whose executor runs work in place on any thread (runs_in_place_anywhere:
// system_executor, use_future's), rather than on a thread of Asio's system pool, and one of the
// io_context's own executor when this thread is running that io_context, rather than behind its
// reactor's next turn. A handler run so holds one saying false: an op it starts that completes at once is
// then posted, never run inside its initiating call.
class in_place_completions {
 public:
  explicit in_place_completions(bool allowed) noexcept : was_(allowed_) { allowed_ = allowed; }
  in_place_completions(const in_place_completions&) = delete;
  in_place_completions& operator=(const in_place_completions&) = delete;
  ~in_place_completions() { allowed_ = was_; }

  static bool allowed() noexcept { return allowed_; }

 private:
  static inline thread_local bool allowed_ = false;
  bool was_;
};

class operation {
 public:
  // The four states of a cancellable op: not_submitted -> submitted -> completed, with cancel_requested
  // reachable from the first two. Transitions are compare-exchanges, so a cancellation racing with the
  // GPU's completion resolves one way only.
  enum class state : int { not_submitted, submitted, cancel_requested, completed };

  explicit operation(std::unique_ptr<completion> done) : owned_done_(std::move(done)), done_(owned_done_.get()) {}

  // From the handler's cancellation slot (any thread). Returns true when the request was recorded.
  bool request_cancel() noexcept {
    state expected = state::not_submitted;
    if (state_.compare_exchange_strong(expected, state::cancel_requested)) return true;
    expected = state::submitted;
    // Work on a stream cannot be aborted: the request only changes how the op will complete.
    return state_.compare_exchange_strong(expected, state::cancel_requested);
  }
  bool cancel_requested() const noexcept { return state_.load() == state::cancel_requested; }

  // Marks that work of this op is on a stream (not_submitted -> submitted; cancel_requested stays).
  void mark_submitted() noexcept {
    state expected = state::not_submitted;
    state_.compare_exchange_strong(expected, state::submitted);
  }

  void add_bytes(std::size_t bytes) noexcept { bytes_.fetch_add(bytes); }
  std::size_t bytes() const noexcept { return bytes_.load(); }

  // Called by the thread that will complete the op, while it waits for the GPU: the op and its
  // handler were written by the submitting thread, on another core, and each line the completion
  // then reads or writes would cost a transfer between the cores on the way to the handler.
  void prefetch() const noexcept {
    prefetch_for_write(this, sizeof(*this));
    done_->prefetch();
  }

  // Keeps the first error an op meets (enqueue failure, stream failure).
  void record_error(boost::system::error_code error, std::string detail) {
    std::lock_guard lock(mutex_);
    if (!error_) {
      error_ = error;
      detail_ = std::move(detail);
      failed_.store(true, std::memory_order_release);
    }
  }
  std::string error_detail() const {
    std::lock_guard lock(mutex_);
    return detail_;
  }

  // Completes the op once: with its first error, else operation_aborted when cancellation was requested,
  // else success. Returns false if it had completed already.
  bool finish();

 protected:
  // For an op that holds its completion as a member (one allocation for both): the derived class names
  // it once that member is constructed.
  operation() = default;
  void set_completion(completion& done) noexcept { done_ = &done; }

 private:
  std::unique_ptr<completion> owned_done_;  // empty when the derived op holds its completion
  completion* done_ = nullptr;
  std::atomic<state> state_{state::not_submitted};
  std::atomic<std::size_t> bytes_{0};
  std::atomic<bool> failed_{false};  // error_ is set: finish() takes the mutex only then
  mutable std::mutex mutex_;
  boost::system::error_code error_;
  std::string detail_;
};

}  // namespace ferry::detail
