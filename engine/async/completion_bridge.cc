#include "engine/async/completion_bridge.hpp"

#include "ferry/detail/operation.hpp"
#include "ferry/detail/spin_pause.hpp"
#include "engine/trace/stage_marks.hpp"
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

// Poll: how often the stream of work that has a completion flag is queried, once that work has been
// its stream's oldest for this long. Only a failure needs the query (a failed stream writes no flag), and
// learning of one this much later costs nothing. A stream whose flags keep coming is not queried at all:
// the query takes the driver's lock, which a thread submitting meanwhile would wait for (and, once the
// bridge waits on it, wake the bridge from: a system call).
constexpr auto event_sweep_interval = std::chrono::microseconds(100);

// Poll: while some stream's oldest pending work is younger than this, the bridge looks at flag words
// after every 4 pauses; otherwise after every 32, leaving more of the core to whatever shares it (on a
// virtual machine, a hyperthread sibling may be another of our threads). Small copies finish inside it,
// and their round trip needs their end seen at once; a longer transfer loses only a small share of its
// time to a look that comes 32 pauses late.
constexpr auto fine_look_window = std::chrono::microseconds(50);

std::unique_ptr<completion_flags> flags_for(const driver_table& driver, const engine_options& options,
                                            std::size_t words) {
  if (options.policy != completion_policy::poll) return nullptr;
  return std::make_unique<completion_flags>(driver, words);
}

}  // namespace

completion_bridge::completion_bridge(const driver_table& driver, CUcontext context, const engine_options& options,
                                     std::size_t flag_words, std::function<void()> before_idle_park)
    : driver_(driver),
      context_(context),
      options_(options),
      events_(driver, event_flags(options.policy)),
      flags_(flags_for(driver, options, flag_words)),
      spin_window_(options.spin_window.value_or(std::chrono::microseconds(0))),
      max_spin_window_(std::max(spin_window_, options.max_spin_window.value_or(spin_window_))),
      pending_spin_(options.pending_spin.value_or(std::chrono::microseconds(0))),
      entries_(std::make_unique<entry[]>(flag_words)),
      free_entries_(static_cast<std::uint32_t>(flag_words)),
      window_us_(spin_window_.count()),
      last_activity_(std::chrono::steady_clock::now()),
      window_(spin_window_),
      before_idle_park_(std::move(before_idle_park)),
      thread_([this] { run(); }) {}

completion_bridge::~completion_bridge() {
  drain();
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    stop_requested_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (entry* item : unfired_) {
    events_.release(item->event);
    if (item->index == free_indices::none) delete item;
  }
}

completion_bridge::entry* completion_bridge::take_entry() {
  const std::uint32_t index = free_entries_.pop();
  if (index == free_indices::none) return new entry;
  entry* item = &entries_[index];
  item->index = index;
  return item;
}

void completion_bridge::recycle(entry* item) noexcept {
  if (item->index == free_indices::none) {
    delete item;
    return;
  }
  item->event = nullptr;
  item->done = nullptr;
  item->warm = {};
  item->fired.store(false, std::memory_order_relaxed);
  item->failure_seen = false;
  item->flag.reset();
  item->mark_deferred = false;
  item->kernel_marked = false;
  item->next = nullptr;
  free_entries_.push(item->index);
}

CUresult completion_bridge::arm(CUstream stream, ticket& armed) {
  entry* item = take_entry();
  item->stream = stream;
  item->bridge = this;
  // Poll: a flag is all that success needs, and a failure is learnt from the stream itself on a sweep,
  // so flagged work records no event (a driver call less per op). Other work, and work left without a
  // flag (all taken, or a driver that refuses the write), is watched through its event.
  if (flags_ && flags_usable_.load(std::memory_order_relaxed) && item->index != free_indices::none) {
    item->flag = flags_->next_use(item->index);
    // completion_mark::by_poller: an awake bridge writes the flag itself when it takes the entry over,
    // and the submitting thread makes no driver call for the mark. (A bridge that parks meanwhile is
    // woken by the hand-over.)
    item->mark_deferred =
        options_.marks == completion_mark::by_poller && !parked_.load(std::memory_order_relaxed);
  }
  if (!item->mark_deferred) {
    if (CUresult status = mark(*item); status != CUDA_SUCCESS) {
      recycle(item);
      return status;
    }
  }
  item->since = std::chrono::steady_clock::now();
  armed = ticket(item);
  return CUDA_SUCCESS;
}

bool completion_bridge::arm_for_kernel(CUstream stream, ticket& armed, kernel_mark& mark) {
  if (!flags_) return false;
  entry* item = take_entry();
  if (item->index == free_indices::none) {
    recycle(item);
    return false;
  }
  item->stream = stream;
  item->bridge = this;
  item->flag = flags_->next_use(item->index);
  item->kernel_marked = true;
  item->since = std::chrono::steady_clock::now();
  mark = kernel_mark{flags_->device_address(*item->flag), item->flag->value};
  armed = ticket(item);
  return true;
}

void completion_bridge::disarm(ticket armed) noexcept {
  if (entry* item = std::exchange(armed.item_, nullptr)) recycle(item);
}

CUresult completion_bridge::mark(entry& item) {
  // A deferred flag may have been chosen before a refused write turned flags off: it is not asked again.
  if (item.flag && !flags_usable_.load(std::memory_order_relaxed)) item.flag.reset();
  if (item.flag) {
    const CUresult written = flags_->enqueue_write(item.stream, *item.flag);
    stage_trace::mark(stage_trace::stage::flag_enqueued);
    if (written == CUDA_SUCCESS) return CUDA_SUCCESS;
    item.flag.reset();
    // A sticky error fails the record below too; anything else means this driver or device does not
    // take stream memory operations: the events alone will tell.
    if (!is_sticky(written)) flags_usable_.store(false, std::memory_order_relaxed);
  }
  if (CUresult status = events_.acquire(item.event); status != CUDA_SUCCESS) return status;
  if (CUresult status = driver_.cuEventRecord(item.event, item.stream); status != CUDA_SUCCESS) {
    events_.release(item.event);
    item.event = nullptr;
    return status;
  }
  stage_trace::mark(stage_trace::stage::event_recorded);
  return CUDA_SUCCESS;
}

void completion_bridge::watch_armed(ticket armed, continuation done, warm_up warm) {
  entry* item = std::exchange(armed.item_, nullptr);
  item->done = std::move(done);
  item->warm = warm;
  if (options_.policy == completion_policy::host_callback) {
    // The callback only flags the entry; the status is read afterwards with cuEventQuery, because the
    // driver tells a host function nothing about failures before it.
    if (CUresult status = driver_.cuLaunchHostFunc(item->stream, &completion_bridge::host_function_fired, item);
        status != CUDA_SUCCESS) {
      item->fired = true;  // the event alone will tell
    }
  }
  hand_over(item);
}

CUresult completion_bridge::watch(CUstream stream, continuation done) {
  ticket armed;
  if (CUresult status = arm(stream, armed); status != CUDA_SUCCESS) return status;
  watch_armed(std::move(armed), std::move(done));
  return CUDA_SUCCESS;
}

void completion_bridge::hand_over(entry* item) {
  // One count until the entry is answered, one until this call stops touching the bridge: once the
  // entry is pushed, the work may complete and the engine go on to destroy the bridge.
  pending_count_.fetch_add(2, std::memory_order_relaxed);
  entry* newest = incoming_.load(std::memory_order_relaxed);
  do {
    item->next = newest;
  } while (!incoming_.compare_exchange_weak(newest, item, std::memory_order_seq_cst, std::memory_order_relaxed));
  // A spinning bridge sees the push without a system call. Sequentially consistent with park(), which
  // raises parked_ before it looks at incoming_: either it sees this push, or this sees it parked. The
  // notify is under the lock, so that it cannot fall between park()'s look and its sleep.
  if (parked_.load(std::memory_order_seq_cst)) {
    std::lock_guard lock(mutex_);
    wake_.notify_one();
  }
  release_count();
}

void completion_bridge::nudge() {
  {
    std::lock_guard lock(mutex_);
    nudged_ = true;
  }
  wake_.notify_one();
}

void completion_bridge::release_count() {
  if (pending_count_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    std::lock_guard lock(mutex_);  // drain() checks the count under the lock: no lost wake-up
    drained_.notify_all();
  }
}

void completion_bridge::stop_for_exit() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    stop_requested_ = true;
    abandoned_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void completion_bridge::drain() {
  std::unique_lock lock(mutex_);
  drained_.wait(lock, [&] { return pending_count_.load() == 0; });
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
  item->fired = true;
  std::lock_guard lock(bridge->mutex_);  // notified under the lock, as in watch()
  bridge->signalled_ = true;
  bridge->wake_.notify_one();
}

bool completion_bridge::take_incoming() {
  // A look at the head first: a spinning bridge that exchanged on every turn would take the line from
  // the submitting core each time.
  entry* newest = incoming_.load(std::memory_order_relaxed) != nullptr
                      ? incoming_.exchange(nullptr, std::memory_order_acquire)
                      : nullptr;
  if (newest == nullptr) {
    return !(stop_requested_.load(std::memory_order_acquire) && pending_entries_ == 0);
  }
  note_arrival(std::chrono::steady_clock::now());
  stage_trace::mark(stage_trace::stage::arrival_taken);
  // The stack holds the newest first: reversed, it is the order of the hand-overs.
  entry* oldest = nullptr;
  while (newest != nullptr) {
    entry* next = newest->next;
    newest->next = oldest;
    oldest = newest;
    newest = next;
  }
  while (oldest != nullptr) {
    entry* item = oldest;
    oldest = item->next;
    item->next = nullptr;
    if (item->mark_deferred && !abandoned_.load()) {
      item->mark_deferred = false;
      // Unmarked, the work cannot be watched: it is answered with the failure (finish() waits for the
      // stream first, so that its memory is never handed back while the GPU may use it).
      if (CUresult status = mark(*item); status != CUDA_SUCCESS) {
        finished_.emplace_back(item, status);
        continue;
      }
    }
    item->sequence = next_sequence_++;
    if (item->warm.op) item->warm.op->prefetch();
    if (item->warm.state) prefetch_for_write(item->warm.state, item->warm.state_bytes);
    stream_queue& queue = pending_[item->stream];
    if (queue.back != nullptr) {
      queue.back->next = item;
    } else {
      queue.front = item;
      item->front_since = last_activity_;
    }
    queue.back = item;
    ++pending_entries_;
  }
  if (!finished_.empty()) finish(finished_);
  return true;
}

void completion_bridge::park(std::optional<std::chrono::steady_clock::time_point> until) {
  std::unique_lock lock(mutex_);
  parked_.store(true, std::memory_order_seq_cst);
  auto woken = [&] {
    return incoming_.load(std::memory_order_seq_cst) != nullptr || signalled_ || nudged_ || stopping_;
  };
  if (until) {
    wake_.wait_until(lock, *until, woken);
  } else {
    wake_.wait(lock, woken);
  }
  parked_.store(false, std::memory_order_relaxed);
  wake_ups_.fetch_add(1, std::memory_order_release);
  signalled_ = false;
  // Woken ahead of a hand-over: stay awake for it (the spin window counts from now).
  if (std::exchange(nudged_, false)) note_arrival(std::chrono::steady_clock::now());
}

void completion_bridge::note_arrival(std::chrono::steady_clock::time_point now) {
  if (pending_entries_ == 0) note_pause_end(now);
  last_activity_ = now;
}

void completion_bridge::note_pause_end(std::chrono::steady_clock::time_point now) {
  if (options_.policy != completion_policy::poll || max_spin_window_ == spin_window_) return;
  // The time before the first work is the engine's setup, not a pause between ops.
  if (std::exchange(before_first_work_, false)) return;
  const auto pause = now - last_activity_;
  if (pause <= spin_window_) return;  // covered as it is
  pauses_[pauses_seen_++ % remembered_pauses] = pause;
  // Spinning pays where pauses keep being short enough to spin through: then long enough for the longest
  // of them, with a margin; else no longer than spin_window.
  const std::size_t remembered = std::min(pauses_seen_, remembered_pauses);
  std::size_t short_enough = 0;
  std::chrono::steady_clock::duration longest{0};
  for (std::size_t i = 0; i < remembered; ++i) {
    if (pauses_[i] > max_spin_window_) continue;
    ++short_enough;
    longest = std::max(longest, pauses_[i]);
  }
  window_ = 2 * short_enough >= remembered
                ? std::clamp<std::chrono::steady_clock::duration>(longest * 5 / 4, spin_window_, max_spin_window_)
                : std::chrono::steady_clock::duration(spin_window_);
  window_us_.store(std::chrono::duration_cast<std::chrono::microseconds>(window_).count(), std::memory_order_relaxed);
}

bool completion_bridge::collect_finished(std::chrono::steady_clock::time_point now) {
  // The scratch lists are reused: this runs continuously while work is young.
  std::vector<entry*>& fronts = fronts_;
  fronts.clear();
  const bool callbacks = options_.policy == completion_policy::host_callback;
  for (auto& [stream, queue] : pending_) {
    entry* front = queue.front;
    if (front != nullptr && (!callbacks || front->fired.load() || front->failure_seen)) fronts.push_back(front);
  }
  // Flagged work is read from its word; its event is queried only on a sweep (see event_sweep_interval).
  const bool sweep = now >= next_event_sweep_;
  if (sweep) next_event_sweep_ = now + event_sweep_interval;
  finished_list& finished = finished_;
  queried_events_ = false;
  for (entry* item : fronts) {
    if (abandoned_.load()) {
      finished.clear();
      return false;
    }
    if (item->flag && flags_->is_written(*item->flag)) {
      stage_trace::mark(stage_trace::stage::flag_seen);
      finished.emplace_back(item, CUDA_SUCCESS);
      continue;
    }
    if (item->flag && !(sweep && now - item->front_since >= event_sweep_interval)) continue;
    queried_events_ = queried_events_ || !item->flag;
    // Flagged work has no event: the stream's status tells a failure (a failed stream writes no flag);
    // an idle stream has run the work, and so written its flag.
    CUresult status = item->event ? driver_.cuEventQuery(item->event) : driver_.cuStreamQuery(item->stream);
    // A kernel's stream (arm_for_kernel) runs on after the work: only a failure of the context says the
    // flag will not come. (Waiting for that stream to drain, as below for other failed queries, would
    // wait for the kernel to stop, which this thread does.)
    if (item->kernel_marked && status != CUDA_SUCCESS && !is_sticky(status)) continue;
    if (status != CUDA_ERROR_NOT_READY) finished.emplace_back(item, status);
  }
  for (auto& [item, status] : finished) pop_front(item, now);
  return !finished.empty();
}

void completion_bridge::pop_front(entry* item, std::chrono::steady_clock::time_point now) {
  auto queue = pending_.find(item->stream);
  // Only fronts finish, so the entry is its stream's front.
  queue->second.front = item->next;
  if (item->next != nullptr) item->next->front_since = now;
  if (queue->second.front == nullptr) {
    queue->second.back = nullptr;
    if (pending_.size() > kept_idle_queues) pending_.erase(queue);
  }
  item->next = nullptr;
  --pending_entries_;
}

void completion_bridge::finish(finished_list& finished) {
  for (auto& [item, status] : finished) {
    if (status != CUDA_SUCCESS && !is_sticky(status)) {
      // The query failed but the context lives: the work may still be running. Wait for the stream
      // before anyone is told, so that no memory is handed back while the GPU may use it. (After a
      // sticky error the device runs nothing more of the context.)
      const CUresult drained = driver_.cuStreamSynchronize(item->stream);
      if (drained != CUDA_SUCCESS && !is_sticky(drained)) status = drained;
    }
    // The continuation first: it is what the caller waits for. The flag and event go back right after,
    // long before the caller, woken by it, can submit again.
    stage_trace::mark(stage_trace::stage::continuation_begins);
    item->done(status);
    item->done = nullptr;
    if (options_.policy == completion_policy::host_callback && !item->fired) {
      unfired_.push_back(item);
    } else {
      if (item->event) events_.release(item->event);
      recycle(item);
    }
    release_count();
  }
  finished.clear();
  last_activity_ = std::chrono::steady_clock::now();
}

void completion_bridge::mark_failed_fronts() {
  for (auto& [stream, queue] : pending_) {
    if (queue.front == nullptr) continue;
    entry& front = *queue.front;
    if (front.fired.load() || front.failure_seen || abandoned_.load()) continue;
    const CUresult status = driver_.cuEventQuery(front.event);
    if (status != CUDA_SUCCESS && status != CUDA_ERROR_NOT_READY) front.failure_seen = true;
  }
}

void completion_bridge::run() {
  driver_.cuCtxSetCurrent(context_);
  // No op's initiating call runs on this thread, except one that a handler run here starts (which holds
  // an in_place_completions(false) meanwhile).
  const in_place_completions delivering(true);
  // Linux's default timer slack lets a sleep overrun by up to 50 us; the backoff sleeps are meant to be
  // short.
  ::prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  auto last_failure_check = std::chrono::steady_clock::now();
  while (!abandoned_.load() && take_incoming()) {
    const auto now = std::chrono::steady_clock::now();
    const bool young = now - last_activity_ < window_;
    if (pending_entries_ == 0) {
      // Right after activity more work usually follows (a coroutine's next transfer): stay awake for the
      // spin window so that it is seen without a wake-up, then park.
      if (options_.policy == completion_policy::poll && young) {
        for (int i = 0; i < 32; ++i) spin_pause();
      } else {
        if (before_idle_park_) before_idle_park_();
        park(std::nullopt);
      }
      continue;
    }
    if (options_.policy == completion_policy::blocking_sync) {
      entry* oldest = nullptr;
      for (auto& [stream, queue] : pending_) {
        if (queue.front != nullptr && (!oldest || queue.front->sequence < oldest->sequence)) oldest = queue.front;
      }
      finished_.emplace_back(oldest, driver_.cuEventSynchronize(oldest->event));
      pop_front(oldest, now);  // the oldest entry overall is also the front of its stream
      finish(finished_);
      continue;
    }
    if (collect_finished(now)) {
      finish(finished_);
      continue;
    }
    if (options_.policy == completion_policy::host_callback) {
      // Sleep until a callback fires; look at the streams now and then, because after a failure the
      // driver runs no more host functions.
      if (now - last_failure_check >= failure_check_interval) {
        mark_failed_fronts();
        last_failure_check = now;
      } else {
        park(last_failure_check + failure_check_interval);
      }
      continue;
    }
    auto oldest = now;
    auto newest = std::chrono::steady_clock::time_point::min();
    for (const auto& [stream, queue] : pending_) {
      if (queue.front == nullptr) continue;
      oldest = std::min(oldest, queue.front->since);
      newest = std::max(newest, queue.front->since);
    }
    if (young || now - oldest < pending_spin_) {
      // Young work: keep looking, with a short pause between looks, not a yield: a system call would
      // cost more than a look and could hand the core away for a time slice. Reading flag words costs
      // nothing until the GPU writes them, so young work's flags are looked at after every few pauses,
      // and a small copy's flag is seen soon after the GPU writes it (see fine_look_window). Spinning
      // on cuEventQuery holds driver locks that submitting threads wait for: more pauses between
      // queries.
      const bool fine = !queried_events_ && now - newest < fine_look_window;
      const int pauses = fine ? 4 : 32;
      for (int i = 0; i < pauses; ++i) spin_pause();
    } else {
      // Old work: sleep in proportion to how long the oldest pending work has run, so that noticing its
      // end late costs under 1% of its duration, and a long transfer costs few wake-ups.
      const auto proportional = std::chrono::duration_cast<std::chrono::microseconds>(now - oldest) / 128;
      park(now + std::clamp(proportional, std::chrono::microseconds(2), options_.max_backoff));
    }
  }
  // The thread's CPU time is read by cpu_seconds() while it runs; nothing to publish at exit.
}

}  // namespace ferry::detail
