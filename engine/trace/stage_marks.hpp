// Stage marks: the time at which one op reached each stage of its way through the engine, for the traced
// diagnostics (bench/stage_trace, bench/block_lists' breakdown) that ask where a round trip's time goes.
// They compile in only under the build setting `--define ferry_stage_marks=on` (`tools/ferry bench
// --stage-marks`), which defines FERRY_STAGE_MARKS for every target that includes this header; the default
// build's marks are empty functions. Compiled in, a mark is a load and a branch until a diagnostic sets
// `enabled`, then a clock read. One op at a time: each stage keeps the time it was last reached.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace ferry::detail::stage_trace {

// In the order a 4 KiB poke on an idle stream passes them. The engine marks the stages up to
// handed_to_bridge and from arrival_taken to continuation_begins; the diagnostic marks the others itself.
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
  initiating_call_returns,  // marked by the caller
  arrival_taken,           // the bridge thread takes the watched work over
  flag_seen,               // ... and sees the GPU's write of its flag
  continuation_begins,
  handler_runs,            // marked by the caller's handler
  resumed,                 // marked by the caller after its co_await
  count
};

#ifdef FERRY_STAGE_MARKS
inline constexpr bool compiled_in = true;
#else
inline constexpr bool compiled_in = false;
#endif

inline std::atomic<bool> enabled{false};
inline std::array<std::atomic<std::int64_t>, static_cast<std::size_t>(stage::count)> reached{};  // steady_clock ticks

inline void mark([[maybe_unused]] stage reached_stage) noexcept {
  if constexpr (compiled_in) {
    if (enabled.load(std::memory_order_relaxed)) [[unlikely]] {
      reached[static_cast<std::size_t>(reached_stage)].store(
          std::chrono::steady_clock::now().time_since_epoch().count(), std::memory_order_relaxed);
    }
  }
}

}  // namespace ferry::detail::stage_trace
