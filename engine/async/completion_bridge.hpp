// The completion bridge: one thread per engine that learns when GPU work is done and calls the
// continuation registered for it. Under the poll policy it spins while work is young, backs off, then
// parks on a condition variable (no busy core when idle); host_callback and blocking_sync are the
// alternatives. Per stream, only the oldest pending work is looked at: a stream completes in order.
//
// What the poll policy spins on: a completion flag (completion_flags.hpp), a word the GPU writes after
// the watched work, read without a driver call; the work's event is queried only every
// event_sweep_interval (to learn of failures: a failed stream writes no flag) and for work that got no
// flag. Reading a word learns of a small copy's end sooner than querying its event, on this thread or
// on a second one, which the round trip of small copies needs (bench/completion_signals compares them).
//
// The submitting thread and the bridge thread share only a hand-off stack (incoming_): a submission
// pushes its entry with one compare-exchange and takes no lock; the bridge takes the whole stack with
// one exchange. What is pending is the bridge thread's own, so a submission never waits while the
// bridge queries the driver, and it wakes the bridge (a futex system call) only when the bridge is
// parked. Entries are reused (free_indices): after warm-up, watching work allocates nothing on either
// thread while fewer than `flag_words` ops are in flight.
#pragma once

#include <cuda.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "engine/async/completion_flags.hpp"
#include "engine/async/event_pool.hpp"
#include "engine/async/free_indices.hpp"
#include "engine/driver/driver_table.hpp"
#include "ferry/detail/engine_core.hpp"

namespace ferry::detail {

class completion_bridge {
  struct entry;

 public:
  // `done` runs on the bridge thread with the event's status: it must not block.
  using continuation = std::function<void(CUresult)>;

  // `flag_words`: how many entries are reused, each with its completion flag under the poll policy (work
  // beyond them gets an entry of its own, watched by its event alone).
  static constexpr std::size_t default_flag_words = 4096;
  // `before_idle_park`, if set, runs on the bridge thread each time it parks with nothing watched (it
  // must not block: the resident copier's stop).
  completion_bridge(const driver_table& driver, CUcontext context, const engine_options& options,
                    std::size_t flag_words = default_flag_words, std::function<void()> before_idle_park = {});
  completion_bridge(const completion_bridge&) = delete;
  completion_bridge& operator=(const completion_bridge&) = delete;
  // Waits for everything watched, then stops the thread.
  ~completion_bridge();

  // Marks `stream` after the work already there (poll: a flag write, else an event) and calls `done`
  // with the work's status when the GPU passes the mark. Returns the status of the marking (done is then
  // never called).
  CUresult watch(CUstream stream, continuation done);

  // watch() in two steps, for a caller with work to do between them: arm() puts the mark (the flag write
  // or the event) on `stream` right after the work, so that the GPU passes it as soon as the work is
  // done; watch_armed() hands it to the bridge with its continuation. With completion_mark::by_poller,
  // while the bridge thread is awake, arm() leaves the flag's write to it: the bridge writes it when it
  // takes the work over, after whatever the stream got meanwhile (the caller must put no more of its own
  // work on `stream` between the two calls). An armed ticket must be handed over (the bridge owns its
  // flag or event).
  class ticket {
   public:
    ticket() = default;
    ticket(ticket&& other) noexcept : item_(std::exchange(other.item_, nullptr)) {}
    ticket& operator=(ticket&& other) noexcept {
      item_ = std::exchange(other.item_, nullptr);
      return *this;
    }

   private:
    friend class completion_bridge;
    explicit ticket(entry* item) : item_(item) {}
    entry* item_ = nullptr;
  };
  CUresult arm(CUstream stream, ticket& armed);
  // arm() for work that writes its own completion flag (the resident copier's kernel): takes an entry
  // and a flag for work on `stream` and says where the work must write what, without a driver call.
  // False when no flag is free (poll policy only; all taken): the caller then takes another way.
  struct kernel_mark {
    CUdeviceptr flag = 0;
    std::uint32_t value = 0;
  };
  bool arm_for_kernel(CUstream stream, ticket& armed, kernel_mark& mark);
  // Gives back an armed ticket whose work never reached the GPU (nothing will write its flag).
  void disarm(ticket armed) noexcept;
  // What `done` will touch, for the bridge thread to bring into its cache when it takes the work over,
  // while the GPU still works (they must live until `done` has run: `done` holds them). Written by the
  // submitting thread on another core, each line would otherwise cost a transfer between the cores on
  // the way to the handler, after the flag is seen; brought in while the GPU works, they cost nothing
  // there (bench/stage_trace times each stage of that way).
  struct warm_up {
    const operation* op = nullptr;  // with its completion (operation::prefetch)
    const void* state = nullptr;    // and `state_bytes` of the continuation's own
    std::size_t state_bytes = 0;
  };
  void watch_armed(ticket armed, continuation done, warm_up warm);
  void watch_armed(ticket armed, continuation done) { watch_armed(std::move(armed), std::move(done), warm_up{}); }

  // Work is about to be handed over: a parked bridge starts waking now, so that its wake-up (slow,
  // above all on a virtual machine) overlaps the rest of the initiating call and the GPU's work rather
  // than following the hand-over. Costs a load when the bridge is awake, a system call when it is
  // parked.
  void expect_work() {
    if (parked_.load(std::memory_order_relaxed)) nudge();
  }

  // How long the bridge thread now spins after activity before it parks: spin_window, grown up to
  // max_spin_window while ops keep coming after pauses it would not have covered (the poll policy's
  // rule: 5/4 of the longest of the last 8 pauses longer than spin_window that were at most
  // max_spin_window, when they are at least half of those 8). Any thread may ask.
  std::chrono::microseconds spin_window() const noexcept {
    return std::chrono::microseconds(window_us_.load(std::memory_order_relaxed));
  }

  // Whether the bridge thread sleeps (idle for longer than spin_window, or backing off from old work), and
  // how many times it has woken from such a sleep.
  bool parked() const noexcept { return parked_.load(std::memory_order_acquire); }
  std::uint64_t wake_ups() const noexcept { return wake_ups_.load(std::memory_order_acquire); }

  // Blocks until nothing is watched.
  void drain();

  // At process exit: stops the thread at once, leaving what is watched unanswered (the driver is about
  // to go away). The bridge must then be leaked, not destroyed: its destructor would call the driver.
  void stop_for_exit();

  double cpu_seconds() const;

 private:
  struct entry {
    CUevent event = nullptr;  // null for flagged work (poll), whose failure the stream's status tells
    CUstream stream = nullptr;
    continuation done;
    warm_up warm;  // prefetched on arrival
    std::uint64_t sequence = 0;
    std::chrono::steady_clock::time_point since;  // when it was watched
    std::chrono::steady_clock::time_point front_since;  // when it became its stream's oldest pending work
    std::atomic<bool> fired{false};  // host_callback: the callback after the event has run
    bool failure_seen = false;       // host_callback: its event failed, so no callback will come (bridge thread only)
    completion_bridge* bridge = nullptr;
    std::optional<completion_flags::flag> flag;  // poll: the word the GPU writes after the work
    bool mark_deferred = false;  // poll: the bridge thread writes the flag when it takes the entry
    // arm_for_kernel: a kernel that runs on after this work writes the flag; its stream's status tells
    // only the context's failure (it is not idle when the work is done).
    bool kernel_marked = false;
    entry* next = nullptr;  // in the hand-off stack, then in its stream's queue
    std::uint32_t index = free_indices::none;  // in entries_; none for an entry of its own (all were taken)
  };
  // The entries a stream's work waits in, oldest first (linked through entry::next).
  struct stream_queue {
    entry* front = nullptr;
    entry* back = nullptr;
  };
  // A stream's queue is kept while idle (a stream's next op finds it without allocating) until this
  // many streams have queues.
  static constexpr std::size_t kept_idle_queues = 64;

  // A reused entry, or one of its own when all are taken.
  entry* take_entry();
  // Puts the entry's mark on its stream: its flag's write, else (no flag, or the write refused) an event.
  CUresult mark(entry& item);
  // Cleans a finished (or never handed over) entry and reuses it, or deletes one of its own.
  void recycle(entry* item) noexcept;
  static void CUDA_CB host_function_fired(void* user_data);
  // Hands an entry to the bridge thread.
  void hand_over(entry* item);
  // Wakes a parked bridge, which then spins for spin_window as after activity.
  void nudge();
  // One count of pending_count_ gone: wakes drain() when it was the last.
  void release_count();
  void run();
  // Moves what submitters handed over into pending_. Returns false once stopping and nothing is pending.
  bool take_incoming();
  // Sleeps until a submission, a host function or `until` (the bridge thread only).
  void park(std::optional<std::chrono::steady_clock::time_point> until);
  // Work arrives (or is expected: a nudge) at `now`: the activity the spin counts from, and, when none was
  // pending, the end of a pause.
  void note_arrival(std::chrono::steady_clock::time_point now);
  // A pause ends at `now` (none was pending): the pause since the last activity counts toward the spin
  // window (spin_window()).
  void note_pause_end(std::chrono::steady_clock::time_point now);
  using finished_list = std::vector<std::pair<entry*, CUresult>>;
  // Looks at the front of each stream (at `now`); puts the finished ones, popped from pending_, in
  // finished_. Returns whether any finished.
  bool collect_finished(std::chrono::steady_clock::time_point now);
  void pop_front(entry* item, std::chrono::steady_clock::time_point now);
  // Calls the continuations, then recycles the flags and events; empties `finished`.
  void finish(finished_list& finished);
  // host_callback: flags fronts whose event failed (no callback will come for them).
  void mark_failed_fronts();

  const driver_table& driver_;
  CUcontext context_;
  engine_options options_;
  event_pool events_;
  std::unique_ptr<completion_flags> flags_;  // poll policy only
  std::atomic<bool> flags_usable_{true};     // false once the driver refused a flag write (unsupported)
  std::chrono::microseconds spin_window_;   // engine_options::spin_window (the engine resolves its default)
  std::chrono::microseconds max_spin_window_;  // engine_options::max_spin_window (likewise)
  std::chrono::microseconds pending_spin_;  // engine_options::pending_spin (the engine resolves its default)

  std::unique_ptr<entry[]> entries_;  // reused, each with its flag word (the word of the same index)
  free_indices free_entries_;

  // Shared with submitters and host functions.
  std::atomic<entry*> incoming_{nullptr};  // handed over, not yet seen by the bridge thread (newest first)
  // Watched and not yet answered, plus one per hand_over still running (it touches the bridge after its
  // push): drain() waits for zero, so that the bridge is never destroyed under a submitter.
  std::atomic<std::size_t> pending_count_{0};
  // The bridge thread sleeps (or is about to) on wake_: a submission must notify it. A line of its own:
  // every fast-path submission reads it (expect_work), and the lines beside it change with each hand-over.
  alignas(64) std::atomic<bool> parked_{false};
  alignas(64) mutable std::mutex mutex_;  // for the sleeps on wake_ and drained_ (not on parked_'s line)
  std::condition_variable wake_;
  std::condition_variable drained_;
  bool signalled_ = false;  // host_callback: a host function ran since the bridge last looked (under mutex_)
  bool nudged_ = false;     // expect_work() woke the bridge before any hand-over (under mutex_)
  std::atomic<std::uint64_t> wake_ups_{0};  // returns from park()
  // window_, in microseconds, for other threads: every submission reads it, so it has a line of its own
  // (the bridge writes it only when a pause changes the window).
  alignas(64) std::atomic<std::int64_t> window_us_;
  bool stopping_ = false;   // under mutex_
  std::atomic<bool> abandoned_{false};        // stop_for_exit: no more driver calls
  std::atomic<bool> stop_requested_{false};   // stopping_, readable without the lock

  // The bridge thread's own.
  std::map<CUstream, stream_queue> pending_;
  std::size_t pending_entries_ = 0;  // in pending_'s queues
  std::uint64_t next_sequence_ = 0;  // the order of arrival (blocking_sync answers the oldest first)
  std::chrono::steady_clock::time_point last_activity_;
  // The spin after activity now (spin_window()), and the last pauses longer than spin_window_ that it
  // follows (a ring; the bridge thread's own).
  std::chrono::steady_clock::duration window_;
  static constexpr std::size_t remembered_pauses = 8;
  std::array<std::chrono::steady_clock::duration, remembered_pauses> pauses_{};
  std::size_t pauses_seen_ = 0;
  bool before_first_work_ = true;
  std::chrono::steady_clock::time_point next_event_sweep_;  // poll: when flagged work's events are next queried
  // host_callback: entries whose callback never ran (the stream failed); kept until destruction because
  // the driver may still hold their pointer.
  std::vector<entry*> unfired_;
  std::vector<entry*> fronts_;  // scratch
  finished_list finished_;      // scratch
  bool queried_events_ = false;  // the last collect_finished asked cuEventQuery about work without a flag
  std::function<void()> before_idle_park_;  // set before the thread starts
  std::thread thread_;
};

}  // namespace ferry::detail
