// engine_core::start: asks the planner (planner.hpp) how a transfer runs and hands it to the executor
// that runs the decision: at once on the caller's thread (single_submission.cc), or, once its op is made,
// queued on its stream, batched (batched_copies.cc), registered first or staged (staged_transfer.cc).
// An executor refused a resource notes it in the facts and the planner decides again.
#include "engine/async/engine_core_impl.hpp"

#include <utility>

#include "engine/memory/known_ranges.hpp"
#include "ferry/detail/op_blocks.hpp"

namespace ferry::detail {

namespace {

const endpoint& host_side_of(const prepared_transfer& transfer) {
  return transfer.source.kind == memory_kind::pageable_host ? transfer.source : transfer.destination;
}

}  // namespace

void engine_core::start(operation_factory make_op, transfer_request request, std::optional<CUstream> stream) {
  impl& engine = *impl_;
  prepared_transfer& prepared = prepared_of(request);
  plan_facts facts = engine.facts_of(prepared, stream);
  for (;;) {
    const plan_decision decision = decide(facts, engine.limits);
    if (!runs_at_once(decision.route)) {
      engine.run_queued(decision, facts, make_op, std::move(prepared), stream);
      return;
    }
    if (engine.run_at_once(decision, facts, make_op, prepared, stream)) return;
  }
}

plan_facts engine_core::impl::facts_of(const prepared_transfer& transfer, std::optional<CUstream> stream) const {
  plan_facts facts;
  facts.bytes = transfer.bytes;
  facts.pageable = transfer.pageable;
  facts.from_pageable = transfer.source.kind == memory_kind::pageable_host;
  facts.plain_copy = transfer.batchable;
  facts.pinned_host_and_device = !transfer.pageable && (transfer.source.kind == memory_kind::pinned_host) !=
                                                           (transfer.destination.kind == memory_kind::pinned_host);
  facts.kernels_reach = transfer.kernels_reach;
  facts.registrable = transfer.registrable;
  facts.forced = transfer.plan;
  if (transfer.pageable && transfer.plan == transfer_plan::automatic) {
    facts.known_page_locked = known_page_locked(transfer);
    facts.worth_registering =
        transfer.registrable && registrations->worth_registering(host_side_of(transfer).address, transfer.bytes);
  }
  facts.on_stream = stream.has_value();
  facts.healthy = sticky.load() == CUDA_SUCCESS;
  facts.batcher = batcher != nullptr;
  facts.small_copies_in_flight = small_copies_in_flight.load() > 0;
  facts.resident = resident != nullptr && resident->usable();
  return facts;
}

// Pinned or registered memory passed as a plain span: the driver knows the whole range as page-locked.
bool engine_core::impl::known_page_locked(const prepared_transfer& transfer) const {
  const endpoint& host = host_side_of(transfer);
  if (transfer.host_range_asked) {
    return transfer.host_range_end != 0 && host.address + transfer.bytes <= transfer.host_range_end;
  }
  const auto known = host_range_known_to_driver(host.address);
  return known && host.address + transfer.bytes <= known->base + known->size;
}

void engine_core::impl::run_queued(plan_decision decision, plan_facts& facts, operation_factory& make_op,
                                   prepared_transfer&& prepared, std::optional<CUstream> stream) {
  if (decision.remembered) {
    // Remembers a large buffer; may drop (unregister) an older registration at the same address, which
    // needs the engine's context current, and the caller's thread need not have it.
    caller_context in_engine(driver, context);
    registrations->acquire(host_side_of(prepared).address, prepared.bytes, false);
  }
  auto op = make_op();
  const std::uint64_t sequence = admit();
  // A reused block, as the op's: the thread that answers the op frees it, and memory from the global
  // allocator freed on another thread goes back under the allocating thread's arena lock.
  auto transfer =
      std::allocate_shared<prepared_transfer>(op_blocks::allocator<prepared_transfer>(), std::move(prepared));
  // Counted whether or not the batcher takes it: a copy submitted alone is in flight too.
  if (decision.counted) transfer->counted = count_small_copy();
  if (decision.route == route::batched) {
    if (offer_to_batcher(op, sequence, transfer)) {
      transfer->plan = transfer_plan::batched;
      record_plan(*transfer, transfer_plan::batched);
      return;
    }
    facts.batcher_refused = true;
    decision = decide(facts, limits);
  }
  transfer->plan = decision.plan;
  // A registered plan is final only once the memory is registered, on an engine thread (run_registered).
  if (decision.route != route::registered) record_plan(*transfer, decision.plan);
  const CUstream target = target_for(*transfer, stream);
  if (stream) {
    sequencer.submit(target, [this, route = decision.route, op = std::move(op), sequence,
                              transfer = std::move(transfer), target] {
      submit_queued(route, op, sequence, transfer, target, true);
    });
  } else {
    submit_queued(decision.route, std::move(op), sequence, std::move(transfer), target, false);
  }
}

void engine_core::impl::submit_queued(route way, std::shared_ptr<operation> op, std::uint64_t sequence,
                                      std::shared_ptr<prepared_transfer> transfer, CUstream stream, bool sequenced) {
  caller_context in_engine(driver, context);
  switch (way) {
    case route::staged:
      run_staged(std::move(op), sequence, std::move(transfer), stream, sequenced);
      return;
    case route::registered:
      // Registering blocks for milliseconds: never on the caller's thread.
      post_work([this, op = std::move(op), sequence, transfer = std::move(transfer), stream, sequenced] {
        run_registered(op, sequence, transfer, stream, sequenced);
      });
      return;
    default:
      run_single(std::move(op), sequence, std::move(transfer), stream, sequenced);
  }
}

void engine_core::impl::run_registered(std::shared_ptr<operation> op, std::uint64_t sequence,
                                       std::shared_ptr<prepared_transfer> transfer, CUstream stream, bool sequenced) {
  transfer->hold = registrations->acquire(host_side_of(*transfer).address, transfer->bytes, true);
  // The driver may refuse the registration (the range overlaps memory registered already, or it cannot
  // lock the pages): the transfer is staged instead, and reported so.
  transfer->plan = transfer->hold ? transfer_plan::registered : transfer_plan::staged;
  record_plan(*transfer, transfer->plan);
  if (!transfer->hold) {
    run_staged(std::move(op), sequence, std::move(transfer), stream, sequenced);
  } else {
    run_single(std::move(op), sequence, std::move(transfer), stream, sequenced);
  }
}

void engine_core::impl::record_plan(const prepared_transfer& transfer, transfer_plan plan) {
  switch (plan) {
    case transfer_plan::registered: registered_plans++; break;
    case transfer_plan::staged: staged_plans++; break;
    case transfer_plan::batched: batched_plans++; break;
    case transfer_plan::driver_staged: driver_staged_plans++; break;
    case transfer_plan::resident: resident_plans++; break;
    default: pinned_plans++; break;
  }
  if (options.on_plan) options.on_plan(transfer.operation, plan, transfer.bytes);
}

}  // namespace ferry::detail
