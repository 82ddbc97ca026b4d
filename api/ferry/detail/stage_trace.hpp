// Timestamps of the stages of one op's way through the engine, from its initiating call to its
// handler: where a round trip's time goes, for diagnostics. Off unless a diagnostic turns it on; then
// each mark costs a clock read, otherwise a load and a branch.
// One op at a time: each stage keeps the time it was last reached.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace ferry::detail::stage_trace {

// In the order a 4 KiB poke on an idle stream passes them.
enum class stage : std::size_t {
  prepare_begins,          // engine_core::prepare_copy (or prepare_blocks): the argument checks
  prepare_ends,
  enqueue_begins,          // the at-once route (run_at_once), the copy's driver call
  copy_enqueued,
  flag_enqueued,           // completion_bridge::arm: the completion flag's write
  event_recorded,
  operation_made,          // the Asio handler's operation, made after the enqueue
  admitted,                // in the engine's live set
  handed_to_bridge,
  initiating_call_returns,
  arrival_taken,           // the bridge thread takes the watched work over
  flag_seen,               // ... and sees the GPU's write of its flag
  continuation_begins,
  completion_begins,       // handler_completion::complete
  handed_to_mailbox,       // to a waiting keep_awake turn
  mailbox_taken,           // the turn takes it
  handler_runs,
  resumed,                 // set by the diagnostic after its co_await
  count
};

inline std::atomic<bool> enabled{false};
inline std::array<std::atomic<std::int64_t>, static_cast<std::size_t>(stage::count)> reached{};  // steady_clock ticks

inline void mark(stage reached_stage) noexcept {
  if (enabled.load(std::memory_order_relaxed)) [[unlikely]] {
    reached[static_cast<std::size_t>(reached_stage)].store(std::chrono::steady_clock::now().time_since_epoch().count(),
                                                           std::memory_order_relaxed);
  }
}

}  // namespace ferry::detail::stage_trace
