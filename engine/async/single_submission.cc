// The single-submission executor: transfers that take one driver call. The work is enqueued, its
// completion armed behind it, and the op handed to the completion bridge. Where the planner decides a
// transfer runs at once (run_at_once), this happens before the op's bookkeeping, so that the bookkeeping
// overlaps the GPU's work; a queued transfer (run_single) has its op made first.
#include "engine/async/engine_core_impl.hpp"

#include <atomic>
#include <cstring>
#include <string>
#include <utility>

#include "engine/errors/check.hpp"
#include "ferry/error.hpp"
#include "ferry/detail/prefetch.hpp"
#include "engine/trace/stage_marks.hpp"

namespace ferry::detail {

void engine_core::impl::run_single(std::shared_ptr<operation> op, std::uint64_t sequence,
                                   std::shared_ptr<prepared_transfer> transfer, CUstream stream, bool sequenced) {
  // Never reached the stream: nothing to wait for. The transfer's hold on the engine (its count of small
  // copies in flight) goes before the op completes: once it has, the engine may be destroyed.
  auto never_submitted = [&] {
    if (sequenced) sequencer.done(stream);
    transfer->counted.reset();
    complete(op, sequence);
  };
  if (op->cancel_requested()) {
    never_submitted();
    return;
  }
  if (int status = sticky.load(); status != CUDA_SUCCESS) {
    fail(op, static_cast<CUresult>(status), where(*transfer, stream) + " (not submitted: the context failed earlier)");
    never_submitted();
    return;
  }
  submission submitted = enqueue_and_arm(*transfer, stream);
  // The transfer is this submission's from here on (its callers hand it over).
  single_slot* slot = take_slot(std::move(*transfer));
  slot->stream = stream;
  watch_submitted(std::move(op), sequence, slot, sequenced, std::move(submitted));
}

engine_core::impl::single_slot* engine_core::impl::take_slot(prepared_transfer&& transfer) {
  const std::uint32_t index = free_single_slots.pop();
  single_slot* slot = index == free_indices::none ? new single_slot : &single_slots[index];
  slot->index = index;
  slot->transfer = std::move(transfer);
  return slot;
}

void engine_core::impl::release_memory_of(single_slot& slot) noexcept {
  slot.transfer.hold.reset();
  slot.transfer.counted.reset();
  slot.transfer.on_pool_stream.reset();
  if (slot.staged_through != nullptr) small_slots->give_back(std::exchange(slot.staged_through, nullptr));
}

void engine_core::impl::return_slot(single_slot* slot) noexcept {
  release_memory_of(*slot);
  if (slot->index == free_indices::none) {
    delete slot;
    return;
  }
  slot->op.reset();
  slot->transfer = prepared_transfer{};
  free_single_slots.push(slot->index);
}

void engine_core::impl::single_done(single_slot* slot, CUresult result) {
  const std::shared_ptr<operation> op = std::move(slot->op);
  const std::uint64_t sequence = slot->sequence;
  if (result == CUDA_SUCCESS) {
    deliver_staged_bytes(*slot);
    op->add_bytes(slot->transfer.bytes);
  } else {
    fail(op, result, where(slot->transfer, slot->stream));
  }
  // The GPU is done with the memory: the registration is free, and the copy no longer in flight, before
  // the caller hears (who may start the next one at once). The slot goes back after the handler is on
  // its way (its free list is a line the submitting thread wrote last), and before the op is retired:
  // from then on the engine may be destroyed.
  release_memory_of(*slot);
  const bool finished = op->finish();
  return_slot(slot);
  if (finished) retire(sequence);
}

engine_core::impl::submission engine_core::impl::enqueue_and_arm(const prepared_transfer& transfer, CUstream stream) {
  submission submitted;
  submitted.enqueued = transfer.bytes == 0 ? CUDA_SUCCESS : transfer.enqueue(transfer, stream);
  stage_trace::mark(stage_trace::stage::copy_enqueued);
  if (submitted.enqueued == CUDA_SUCCESS) submitted.armed = bridge->arm(stream, submitted.ticket);
  return submitted;
}

void engine_core::impl::watch_submitted(std::shared_ptr<operation> op, std::uint64_t sequence, single_slot* slot,
                                        bool sequenced, submission submitted) {
  const CUstream stream = slot->stream;
  auto finished_submitting = [&] {
    if (sequenced) sequencer.done(stream);
  };
  if (submitted.enqueued != CUDA_SUCCESS) {
    fail(op, submitted.enqueued, where(slot->transfer, stream) + " (enqueue)");
    return_slot(slot);
    finished_submitting();
    complete(op, sequence);
    return;
  }
  op->mark_submitted();
  const CUresult status = submitted.armed;
  if (status == CUDA_SUCCESS) {
    slot->op = op;
    slot->sequence = sequence;
    const completion_bridge::warm_up touched{op.get(), slot, sizeof(single_slot)};
    // One pointer: std::function keeps it in place, without an allocation.
    bridge->watch_armed(std::move(submitted.ticket), [this, slot](CUresult result) { single_done(slot, result); },
                        touched);
  }
  finished_submitting();
  stage_trace::mark(stage_trace::stage::handed_to_bridge);
  if (status != CUDA_SUCCESS) {
    // The work is on the stream but cannot be watched: wait for it here rather than lose track of the
    // caller's memory.
    CUresult drained = driver.cuStreamSynchronize(stream);
    fail(op, status, where(slot->transfer, stream) + " (cuEventRecord)");
    if (drained == CUDA_SUCCESS) {
      deliver_staged_bytes(*slot);
      op->add_bytes(slot->transfer.bytes);
    }
    return_slot(slot);
    complete(op, sequence);
  }
}

engine_core::impl::submission engine_core::impl::enqueue_small_staged(prepared_transfer& transfer, CUstream stream,
                                                                      std::byte* slot) {
  const bool to_device = transfer.source.kind == memory_kind::pageable_host;
  endpoint& host = to_device ? transfer.source : transfer.destination;
  const endpoint callers = host;
  if (to_device) std::memcpy(slot, reinterpret_cast<const void*>(callers.address), transfer.bytes);
  host.address = reinterpret_cast<std::uintptr_t>(slot);
  host.kind = memory_kind::pinned_host;
  submission submitted = enqueue_and_arm(transfer, stream);
  host = callers;  // what messages name, and where a peek's bytes go
  return submitted;
}

void engine_core::impl::deliver_staged_bytes(const single_slot& slot) {
  if (slot.staged_through == nullptr || slot.transfer.destination.kind != memory_kind::pageable_host) return;
  std::memcpy(reinterpret_cast<void*>(slot.transfer.destination.address), slot.staged_through, slot.transfer.bytes);
}

in_flight_count engine_core::impl::count_small_copy() { return in_flight_count(small_copies_in_flight); }

bool engine_core::impl::post_to_resident(const prepared_transfer& transfer, submission& submitted) {
  completion_bridge::kernel_mark mark;
  if (!bridge->arm_for_kernel(resident->stream(), submitted.ticket, mark)) return false;
  if (!resident->post(transfer.source.address, transfer.destination.address, transfer.bytes, mark.flag, mark.value)) {
    bridge->disarm(std::move(submitted.ticket));
    return false;
  }
  stage_trace::mark(stage_trace::stage::copy_enqueued);
  return true;
}

void engine_core::impl::prefetch_bookkeeping() const noexcept {
  free_single_slots.prefetch();
  const auto* first = reinterpret_cast<const char*>(&live_mutex);
  prefetch_for_write(first, reinterpret_cast<const char*>(&live + 1) - first);
}

// The work on its stream, its completion armed: through the resident copier's ring where the planner
// chose it (the copy engine if the ring refuses: the planner decides again), a small staging slot, or
// one driver call. Returns the stream whose status is the copy's.
CUstream engine_core::impl::enqueue_at_once(plan_decision& decision, plan_facts& facts, prepared_transfer& prepared,
                                            CUstream target, std::byte* staging_slot, submission& submitted) {
  if (decision.route == route::resident) {
    if (post_to_resident(prepared, submitted)) {
      prepared.on_pool_stream.reset();  // the pool stream stays idle
      return resident->stream();
    }
    facts.resident_refused = true;
    decision = decide(facts, limits);  // the copy engine, at once, still counted
  }
  submitted = staging_slot != nullptr ? enqueue_small_staged(prepared, target, staging_slot)
                                      : enqueue_and_arm(prepared, target);
  return target;
}

// The at-once executor: the planner's at_once, at_once_small_staged and resident routes. The work goes on
// its stream first, with its completion armed right behind it (or, with completion_mark::by_poller, left
// for the bridge thread to mark), and the op's bookkeeping (its operation and handler, a reused slot,
// the live set, the lock-free hand-off to the bridge) runs while the GPU moves the bytes, which shortens
// a small transfer's round trip (docs/performance.md). False, with the refusal noted in `facts`, when
// the small staging slots are all in use or an op before it is still submitting to the caller's stream.
bool engine_core::impl::run_at_once(plan_decision decision, plan_facts& facts, operation_factory& make_op,
                                    prepared_transfer& prepared, std::optional<CUstream> stream) {
  std::byte* staging_slot = nullptr;
  if (decision.route == route::at_once_small_staged) {
    staging_slot = small_slots->take(prepared.bytes);
    if (staging_slot == nullptr) {
      facts.no_small_slot = true;
      return false;
    }
  }
  if (stream && !sequencer.try_claim(*stream)) {
    if (staging_slot != nullptr) small_slots->give_back(staging_slot);
    facts.stream_busy = true;
    return false;
  }
  in_flight_count counted = decision.counted ? count_small_copy() : in_flight_count{};
  CUstream target = target_for(prepared, stream);
  caller_context in_engine(driver, context);
  stage_trace::mark(stage_trace::stage::enqueue_begins);
  prefetch_bookkeeping();
  submission submitted;
  target = enqueue_at_once(decision, facts, prepared, target, staging_slot, submitted);
  // The work is on the stream: a parked bridge starts waking now, while the op's bookkeeping runs, not
  // at the hand-over. (Not before the copy: the wake-up's system call would delay the copy's start.)
  bridge->expect_work();
  at_once_work work{decision.plan, target, staging_slot, std::move(counted), std::move(submitted)};
  hand_over_at_once(make_op, prepared, work, stream.has_value());
  return true;
}

void engine_core::impl::hand_over_at_once(operation_factory& make_op, prepared_transfer& prepared,
                                          at_once_work& work, bool sequenced) {
  std::shared_ptr<operation> op;
  single_slot* slot = nullptr;
  std::uint64_t sequence = 0;
  try {
    op = make_op();
    stage_trace::mark(stage_trace::stage::operation_made);
    slot = take_slot(std::move(prepared));
    slot->staged_through = std::exchange(work.staging_slot, nullptr);
    slot->transfer.plan = work.plan;
    slot->transfer.counted = std::move(work.counted);
    slot->stream = work.target;
    sequence = admit();
    stage_trace::mark(stage_trace::stage::admitted);
  } catch (...) {
    // A staging slot stays out until the GPU is done with it (below).
    if (slot != nullptr) {
      work.staging_slot = std::exchange(slot->staged_through, nullptr);
      return_slot(slot);
    }
    abandon_at_once(work, sequenced);
    throw;
  }
  record_plan(slot->transfer, work.plan);
  watch_submitted(std::move(op), sequence, slot, sequenced, std::move(work.submitted));
}

// Nothing can report this op's completion (its operation could not be made): the GPU finishes with the
// caller's memory first. (The bridge takes the armed event back.)
void engine_core::impl::abandon_at_once(at_once_work& work, bool sequenced) noexcept {
  submission& submitted = work.submitted;
  if (work.plan == transfer_plan::resident) {
    // The kernel's stream runs on after the copy: the copy's own flag says when it is done.
    std::atomic<bool> copied{false};
    bridge->watch_armed(std::move(submitted.ticket), [&copied](CUresult) {
      copied.store(true);
      copied.notify_one();
    });
    copied.wait(false);
  } else {
    if (submitted.enqueued == CUDA_SUCCESS) driver.cuStreamSynchronize(work.target);
    if (submitted.enqueued == CUDA_SUCCESS && submitted.armed == CUDA_SUCCESS) {
      bridge->watch_armed(std::move(submitted.ticket), [](CUresult) {});
    }
  }
  if (work.staging_slot != nullptr) small_slots->give_back(std::exchange(work.staging_slot, nullptr));
  if (sequenced) sequencer.done(work.target);
}

}  // namespace ferry::detail
