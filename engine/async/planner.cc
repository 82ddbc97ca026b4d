// The planner's decision (planner.hpp). Its order is its policy, read from the top:
//   1. At once, on the caller's thread, before the op is made: page-locked memory (through the resident
//      copier's ring where it takes the copy), and small pageable transfers that one driver call moves
//      (through a small staging slot, or a poke through the driver's own staging). Not while another
//      small copy is in flight: that one goes to the batcher, whose batch it may join.
//   2. Otherwise the op is made first and the transfer queued: page-locked memory (batched when small
//      and given no stream), pageable memory registered when it is large and seen again, moved as it is
//      when the driver knows it page-locked, through the driver's staging when a small poke, else
//      through the staging pool.
#include "engine/async/planner.hpp"

#include <optional>
#include <string>

namespace ferry::detail {

plan_limits plan_limits::of(const engine_options& options) noexcept {
  return {options.small_staged_max_bytes, options.driver_staged_max_bytes, options.registration_threshold_bytes,
          options.batch_max_bytes, options.resident_max_bytes};
}

namespace {

// A small copy of page-locked or device memory given no stream, which the batcher may carry. (Pageable
// memory never: a batch's kernel path reads its sides on the GPU.)
bool batch_eligible(const plan_facts& facts, const plan_limits& limits) noexcept {
  return !facts.on_stream && facts.batcher && facts.plain_copy && !facts.pageable && facts.healthy &&
         facts.bytes > 0 && facts.bytes <= limits.batch_max_bytes;
}

// A pageable plain copy small enough for a small staging slot, its plan not forced. A forced staged plan
// keeps the staging pool's way (a chunk at a time, cancellable between chunks); a buffer as large as
// registration_threshold_bytes is the planner's to register when seen again.
bool small_stageable(const plan_facts& facts, const plan_limits& limits) noexcept {
  return facts.pageable && facts.plain_copy && facts.forced == transfer_plan::automatic && facts.bytes > 0 &&
         facts.bytes <= limits.small_staged_max_bytes && facts.bytes < limits.registration_threshold_bytes;
}

// A poke from pageable memory small enough for the driver's own staging, or forced to it.
bool driver_stageable(const plan_facts& facts, const plan_limits& limits) noexcept {
  if (!facts.pageable || !facts.from_pageable || facts.bytes == 0) return false;
  return facts.forced == transfer_plan::driver_staged ||
         (facts.forced == transfer_plan::automatic && facts.bytes <= limits.driver_staged_max_bytes);
}

// Given no stream (a copy on the caller's stream keeps its place among the stream's other work, which the
// kernel's own stream knows nothing of), not forced to the copy engine, between page-locked host memory
// and device memory the engine's kernel reaches at the addresses given.
bool resident_eligible(const plan_facts& facts, const plan_limits& limits) noexcept {
  return !facts.on_stream && facts.resident && !facts.resident_refused && facts.plain_copy && !facts.pageable &&
         facts.forced == transfer_plan::automatic && facts.bytes <= limits.resident_max_bytes &&
         facts.pinned_host_and_device && facts.kernels_reach;
}

std::optional<plan_decision> at_once(const plan_facts& facts, const plan_limits& limits) noexcept {
  // The batcher refused an op made for it: it runs queued.
  if (facts.bytes == 0 || !facts.healthy || facts.stream_busy || facts.batcher_refused) return std::nullopt;
  if (facts.pageable) {
    const bool small = small_stageable(facts, limits);
    const bool driver = driver_stageable(facts, limits);
    if (!small && !driver) return std::nullopt;
    if (facts.forced == transfer_plan::automatic && facts.known_page_locked) {
      return plan_decision{transfer_plan::pinned, route::at_once, false, false};
    }
    if (small && !facts.no_small_slot) return plan_decision{transfer_plan::staged, route::at_once_small_staged, false, false};
    if (driver) return plan_decision{transfer_plan::driver_staged, route::at_once, false, false};
    return std::nullopt;  // the staging pool's
  }
  const bool batch = batch_eligible(facts, limits);
  if (batch && facts.small_copies_in_flight) return std::nullopt;  // the batcher's
  if (resident_eligible(facts, limits)) return plan_decision{transfer_plan::resident, route::resident, batch, false};
  return plan_decision{transfer_plan::pinned, route::at_once, batch, false};
}

transfer_plan queued_plan(const plan_facts& facts, const plan_limits& limits) noexcept {
  if (!facts.pageable) return transfer_plan::pinned;
  if (facts.forced != transfer_plan::automatic) return facts.forced;
  // The cache first: memory it registered is known to the driver too.
  if (facts.registrable && facts.worth_registering) return transfer_plan::registered;
  if (facts.known_page_locked) return transfer_plan::pinned;  // the caller's own, passed as a span
  if (driver_stageable(facts, limits)) return transfer_plan::driver_staged;
  return transfer_plan::staged;
}

}  // namespace

plan_decision decide(const plan_facts& facts, const plan_limits& limits) noexcept {
  if (auto decision = at_once(facts, limits)) return *decision;
  const transfer_plan plan = queued_plan(facts, limits);
  const bool batch = plan == transfer_plan::pinned && batch_eligible(facts, limits);
  if (batch && !facts.batcher_refused) return plan_decision{transfer_plan::batched, route::batched, true, false};
  switch (plan) {
    case transfer_plan::registered: return plan_decision{plan, route::registered, false, false};
    case transfer_plan::staged:
      // A large buffer is noted, so that it is registered when it is seen again.
      return plan_decision{plan, route::staged, false,
                           facts.forced == transfer_plan::automatic && facts.registrable};
    default: return plan_decision{plan, route::queued, batch, false};
  }
}

std::string_view to_string(route value) noexcept {
  switch (value) {
    case route::at_once: return "at_once";
    case route::at_once_small_staged: return "at_once_small_staged";
    case route::resident: return "resident";
    case route::queued: return "queued";
    case route::batched: return "batched";
    case route::registered: return "registered";
    case route::staged: return "staged";
  }
  return "?";
}

std::string describe(const plan_decision& decision) {
  std::string text = std::string(ferry::to_string(decision.plan)) + " via " + std::string(to_string(decision.route));
  if (decision.counted) text += " (counted)";
  if (decision.remembered) text += " (remembered)";
  return text;
}

}  // namespace ferry::detail
