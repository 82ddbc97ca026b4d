#include "engine/async/completion_bridge.hpp"

#include "ferry/error.hpp"

#include <pthread.h>
#include <sys/prctl.h>
#include <time.h>

#include <algorithm>

namespace ferry::detail {
namespace {

unsigned event_flags(completion_policy policy) {
  return policy == completion_policy::blocking_sync ? CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC
                                                    : CU_EVENT_DISABLE_TIMING;
}

// How often the host_callback and blocking_sync policies look at streams whose callbacks have not run:
// after a sticky error the driver runs no more host functions, and nothing may wait forever.
constexpr auto failure_check_interval = std::chrono::milliseconds(10);

}  // namespace

completion_bridge::completion_bridge(const driver_table& driver, CUcontext context, const engine_options& options)
    : driver_(driver),
      context_(context),
      options_(options),
      events_(driver, event_flags(options.policy)),
      last_activity_(std::chrono::steady_clock::now()),
      thread_([this] { run(); }) {}

completion_bridge::~completion_bridge() {
  drain();
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (entry_ptr& item : unfired_) events_.release(item->event);
}

CUresult completion_bridge::watch(CUstream stream, continuation done) {
  auto item = std::make_shared<entry>();
  if (CUresult status = events_.acquire(item->event); status != CUDA_SUCCESS) return status;
  if (CUresult status = driver_.cuEventRecord(item->event, stream); status != CUDA_SUCCESS) {
    events_.release(item->event);
    return status;
  }
  item->stream = stream;
  item->since = std::chrono::steady_clock::now();
  item->done = std::move(done);
  item->bridge = this;
  if (options_.policy == completion_policy::host_callback) {
    // The callback only flags the entry; the status is read afterwards with cuEventQuery, because the
    // driver tells a host function nothing about failures before it.
    if (CUresult status = driver_.cuLaunchHostFunc(stream, &completion_bridge::host_function_fired, item.get());
        status != CUDA_SUCCESS) {
      item->fired = true;  // the event alone will tell
    }
  }
  {
    std::lock_guard lock(mutex_);
    item->sequence = next_sequence_++;
    pending_[stream].push_back(std::move(item));
    ++pending_count_;
    last_activity_ = std::chrono::steady_clock::now();
  }
  wake_.notify_one();
  return CUDA_SUCCESS;
}

void completion_bridge::stop_for_exit() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    abandoned_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void completion_bridge::drain() {
  std::unique_lock lock(mutex_);
  drained_.wait(lock, [&] { return pending_count_ == 0; });
}

double completion_bridge::cpu_seconds() const {
  clockid_t clock;
  timespec used{};
  if (pthread_getcpuclockid(const_cast<std::thread&>(thread_).native_handle(), &clock) == 0 &&
      clock_gettime(clock, &used) == 0) {
    return used.tv_sec + used.tv_nsec * 1e-9;
  }
  return 0;
}

void CUDA_CB completion_bridge::host_function_fired(void* user_data) {
  auto* item = static_cast<entry*>(user_data);
  completion_bridge* bridge = item->bridge;
  {
    std::lock_guard lock(bridge->mutex_);
    item->fired = true;
  }
  bridge->wake_.notify_one();
}

std::vector<std::pair<completion_bridge::entry_ptr, CUresult>> completion_bridge::collect_finished(
    std::unique_lock<std::mutex>& lock) {
  std::vector<entry_ptr>& fronts = fronts_;  // reused: this loop runs continuously while work is young
  fronts.clear();
  const bool callbacks = options_.policy == completion_policy::host_callback;
  if (abandoned_) return {};
  for (auto& [stream, queue] : pending_) {
    if (!queue.empty() && (!callbacks || queue.front()->fired || queue.front()->failure_seen)) {
      fronts.push_back(queue.front());
    }
  }
  lock.unlock();
  std::vector<std::pair<entry_ptr, CUresult>> finished;
  for (entry_ptr& item : fronts) {
    CUresult status = driver_.cuEventQuery(item->event);
    if (status != CUDA_ERROR_NOT_READY) finished.emplace_back(std::move(item), status);
  }
  lock.lock();
  for (auto& [item, status] : finished) {
    auto& queue = pending_[item->stream];
    queue.pop_front();  // only this thread pops, so the finished entry is still the front
    if (queue.empty()) pending_.erase(item->stream);
    --pending_count_;
  }
  return finished;
}

void completion_bridge::finish(std::vector<std::pair<entry_ptr, CUresult>>& finished) {
  for (auto& [item, status] : finished) {
    if (status != CUDA_SUCCESS && !is_sticky(status)) {
      // The query failed but the context lives: the work may still be running. Wait for the stream
      // before anyone is told, so that no memory is handed back while the GPU may use it. (After a
      // sticky error the device runs nothing more of the context.)
      const CUresult drained = driver_.cuStreamSynchronize(item->stream);
      if (drained != CUDA_SUCCESS && !is_sticky(drained)) status = drained;
    }
    item->done(status);
    item->done = nullptr;
    if (options_.policy == completion_policy::host_callback && !item->fired) {
      std::lock_guard lock(mutex_);
      unfired_.push_back(item);
    } else {
      events_.release(item->event);
    }
  }
}

void completion_bridge::run() {
  driver_.cuCtxSetCurrent(context_);
  // Linux lets a sleep overrun by up to 50 us (timer slack); the backoff sleeps are meant to be short.
  ::prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  std::unique_lock lock(mutex_);
  while (!abandoned_) {
    if (pending_count_ == 0) {
      drained_.notify_all();
      if (stopping_) break;
      // Right after activity more work usually follows (a coroutine's next transfer): stay awake for the
      // spin window so that it is seen without a wake-up, then park.
      if (options_.policy == completion_policy::poll &&
          std::chrono::steady_clock::now() - last_activity_ < options_.spin_window) {
        lock.unlock();
        for (int i = 0; i < 32; ++i) __builtin_ia32_pause();
        lock.lock();
        continue;
      }
      wake_.wait(lock, [&] { return pending_count_ > 0 || stopping_; });
      continue;
    }
    if (options_.policy == completion_policy::blocking_sync) {
      entry_ptr oldest;
      for (auto& [stream, queue] : pending_) {
        if (!oldest || queue.front()->sequence < oldest->sequence) oldest = queue.front();
      }
      lock.unlock();
      CUresult status = driver_.cuEventSynchronize(oldest->event);
      lock.lock();
      // The oldest entry overall is also the front of its stream.
      auto& queue = pending_[oldest->stream];
      queue.pop_front();
      if (queue.empty()) pending_.erase(oldest->stream);
      --pending_count_;
      std::vector<std::pair<entry_ptr, CUresult>> finished{{oldest, status}};
      lock.unlock();
      finish(finished);
      lock.lock();
      continue;
    }

    auto finished = collect_finished(lock);
    if (!finished.empty()) {
      last_activity_ = std::chrono::steady_clock::now();
      lock.unlock();
      finish(finished);
      lock.lock();
      continue;
    }
    if (options_.policy == completion_policy::host_callback) {
      // Sleep until a callback fires; look at the streams now and then in case one failed.
      auto any_ready = [&] {
        return std::any_of(pending_.begin(), pending_.end(), [](const auto& item) {
          return item.second.front()->fired.load() || item.second.front()->failure_seen;
        });
      };
      if (!any_ready() && !wake_.wait_for(lock, failure_check_interval, [&] { return stopping_ || any_ready(); })) {
        std::vector<entry_ptr> fronts;
        for (auto& [stream, queue] : pending_) fronts.push_back(queue.front());
        lock.unlock();
        std::vector<entry_ptr> failed;
        for (entry_ptr& item : fronts) {
          CUresult status = driver_.cuEventQuery(item->event);
          if (status != CUDA_SUCCESS && status != CUDA_ERROR_NOT_READY) failed.push_back(item);
        }
        lock.lock();
        for (entry_ptr& item : failed) item->failure_seen = true;
      }
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - last_activity_ < options_.spin_window) {
      // Young work: keep querying. A short pause between queries, not a yield: a system call would cost
      // more than the query and could hand the core away for a time slice.
      lock.unlock();
      for (int i = 0; i < 32; ++i) __builtin_ia32_pause();
      lock.lock();
    } else {
      // Old work: sleep in proportion to how long the oldest pending work has run, so that noticing its
      // end late costs under 1% of its duration, and a long transfer costs few wake-ups.
      auto oldest = now;
      for (const auto& [stream, queue] : pending_) oldest = std::min(oldest, queue.front()->since);
      const auto proportional = std::chrono::duration_cast<std::chrono::microseconds>(now - oldest) / 128;
      const auto backoff = std::clamp(proportional, std::chrono::microseconds(2), options_.max_backoff);
      wake_.wait_for(lock, backoff);
    }
  }
  lock.unlock();
  // The thread's CPU time is read by cpu_seconds() while it runs; nothing to publish at exit.
}

}  // namespace ferry::detail
