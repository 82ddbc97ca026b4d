// The planner: the one place that decides how a transfer runs (its plan, the executor that runs it and
// whether it is counted among the small copies in flight), from what the transfer is, how it was
// started and what the engine has free at that moment. The executors (single submission, resident
// copier, batcher, registration, staging) run its decision; when one finds a resource taken (the caller's
// stream busy, no small staging slot, the batcher or the resident ring full), it notes the refusal in
// the facts and asks again, so that the fallback is the planner's decision too.
//
// Pure: it reads only its arguments, so a test can walk its whole table (tests/engine/planner_test.cc).
#pragma once

#include <cstddef>
#include <string>

#include "ferry/engine_options.hpp"

namespace ferry::detail {

// What the planner reads. The first group comes from the transfer's checks, the second from the call,
// the third from the engine at the moment of the call, the last from executors that were refused.
struct plan_facts {
  std::size_t bytes = 0;
  bool pageable = false;            // a side is pageable host memory
  bool from_pageable = false;       // the source is (a poke): what the driver's own staging takes
  bool plain_copy = false;          // a 1-D copy, which a batch, a staging slot or the resident ring carries
  bool pinned_host_and_device = false;  // one side page-locked host memory, the other device memory
  bool kernels_reach = false;       // its device sides are memory the engine's kernels reach
  bool registrable = true;          // not a vector the op owns and hands back
  transfer_plan forced = transfer_plan::automatic;  // transfer_options::plan
  bool known_page_locked = false;   // pageable: the driver knows the host range as page-locked
  bool worth_registering = false;   // pageable: the registration cache would register it now

  bool on_stream = false;           // given a stream: it keeps its place in that stream's order

  bool healthy = true;              // no sticky error poisoned the context
  bool batcher = false;             // the engine batches small copies (engine_options::batch_window)
  bool small_copies_in_flight = false;
  bool resident = false;            // the resident copier runs (engine_options::resident_copies)

  bool stream_busy = false;         // an op before it is still submitting to the caller's stream
  bool no_small_slot = false;       // every small staging slot was in use
  bool batcher_refused = false;     // the batcher's queue was full
  bool resident_refused = false;    // the resident copier's ring was full, or its kernel stopped
};

// The engine_options the decision depends on.
struct plan_limits {
  std::size_t small_staged_max_bytes = 0;
  std::size_t driver_staged_max_bytes = 0;
  std::size_t registration_threshold_bytes = 0;
  std::size_t batch_max_bytes = 0;
  std::size_t resident_max_bytes = 0;

  static plan_limits of(const engine_options& options) noexcept;
};

// How a decided transfer runs. The first three put the work on its stream on the caller's thread before
// the op (its handler's operation) is made, so that making it overlaps the GPU's work; the others make
// the op first.
enum class route {
  at_once,               // one driver call on its stream (pinned, or a poke through the driver's staging)
  at_once_small_staged,  // the same, through a page-locked small staging slot
  resident,              // posted to the resident copier's ring
  queued,                // one driver call, in its stream's order behind the ops before it
  batched,               // to the copy batcher, with the copies that arrive beside it
  registered,            // a worker registers the host side, then one driver call (staged if refused)
  staged,                // through the staging pool, a chunk at a time
};

struct plan_decision {
  transfer_plan plan = transfer_plan::pinned;  // what plan_counts and on_plan report
  ferry::detail::route route = route::queued;
  bool counted = false;  // holds a unit of the engine's count of small copies in flight
  // A pageable buffer staged now is noted in the registration cache, so that it is registered when it is
  // seen again (registration_threshold_bytes).
  bool remembered = false;

  bool operator==(const plan_decision&) const = default;
};

plan_decision decide(const plan_facts& facts, const plan_limits& limits) noexcept;

// Whether `way` puts the work on its stream before the op is made (the first three routes).
constexpr bool runs_at_once(route way) noexcept {
  return way == route::at_once || way == route::at_once_small_staged || way == route::resident;
}

std::string_view to_string(route value) noexcept;
// "staged via at_once_small_staged", "pinned via at_once (counted)": for messages and the table test.
std::string describe(const plan_decision& decision);

}  // namespace ferry::detail
