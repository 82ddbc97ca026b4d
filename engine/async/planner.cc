// The planner: how a transfer reaches the device (pinned, batched, registered or staged), the plan a
// caller forces, and the report of the plan taken (engine_options::on_plan, plan_counts).
#include "engine/async/engine_core_impl.hpp"

#include <string>
#include <utility>

#include "engine/errors/check.hpp"
#include "ferry/error.hpp"
#include "engine/memory/known_ranges.hpp"
#include "engine/transfer/plans.hpp"
#include "ferry/detail/op_blocks.hpp"

namespace ferry::detail {

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

namespace {

const endpoint& host_side_of(const prepared_transfer& transfer) {
  return transfer.source.kind == memory_kind::pageable_host ? transfer.source : transfer.destination;
}

}  // namespace

// Pinned or registered memory passed as a plain span: the driver knows the whole range as page-locked.
bool engine_core::impl::known_page_locked(const prepared_transfer& transfer) const {
  const endpoint& host = host_side_of(transfer);
  if (transfer.host_range_asked) {
    return transfer.host_range_end != 0 && host.address + transfer.bytes <= transfer.host_range_end;
  }
  const auto known = host_range_known_to_driver(host.address);
  return known && host.address + transfer.bytes <= known->base + known->size;
}
void choose_batch_path(prepared_transfer& transfer, batch_path path, bool on_stream, int engine_device) {
  if (path != batch_path::copy_engine && path != batch_path::kernel) {
    throw_invalid_argument(transfer.operation, "transfer_options::batching " + std::to_string(static_cast<int>(path)) +
                                                   " is not a batch_path");
  }
  const std::string chosen = "transfer_options::batching is " + std::string(ferry::to_string(path)) + "; ";
  if (on_stream) {
    throw_invalid_argument(transfer.operation, chosen + "copies given a stream are never batched (they keep their "
                                                        "place in the stream's order): give no stream, or no batch path");
  }
  if (transfer.pageable) {
    throw_invalid_argument(transfer.operation, chosen + "a side of this transfer is pageable host memory, which is "
                                                        "never batched (batches carry page-locked and device memory)");
  }
  if (!transfer.batchable) {
    throw_invalid_argument(transfer.operation, chosen + "only plain 1-D copies are batched, not this operation");
  }
  if (path == batch_path::kernel && !transfer.kernels_reach) {
    // Every side out of the kernel's reach: a copy between two arrays of another device names both.
    std::string sides;
    for (const auto& [side, device] : {std::pair(&transfer.source, transfer.source_device),
                                       std::pair(&transfer.destination, transfer.destination_device)}) {
      if (side->kind != memory_kind::device || device == engine_device) continue;
      sides += memory_of_another_device(side->argument, side->address, device, engine_device) + "; ";
    }
    throw_invalid_argument(transfer.operation, chosen + sides +
                                                   "the engine's kernel cannot reach another device's memory (the "
                                                   "copy engine can): give copy_engine or no batch path");
  }
  transfer.batching = path;
}

}  // namespace ferry::detail

namespace ferry {

std::string_view to_string(batch_path path) noexcept {
  switch (path) {
    case batch_path::automatic: return "automatic";
    case batch_path::copy_engine: return "copy_engine";
    case batch_path::kernel: return "kernel";
  }
  return "?";
}

std::string_view to_string(transfer_plan plan) noexcept {
  switch (plan) {
    case transfer_plan::automatic: return "automatic";
    case transfer_plan::pinned: return "pinned";
    case transfer_plan::registered: return "registered";
    case transfer_plan::staged: return "staged";
    case transfer_plan::batched: return "batched";
    case transfer_plan::driver_staged: return "driver_staged";
    case transfer_plan::resident: return "resident";
  }
  return "?";
}

}  // namespace ferry

namespace ferry::detail {

void engine_core::start(operation_factory make_op, prepared_transfer prepared, std::optional<CUstream> stream) {
  impl& engine = *impl_;
  if (engine.start_at_once(make_op, prepared, stream)) return;
  auto op = make_op();
  const std::uint64_t sequence = engine.admit();
  // A reused block, as the op's: the thread that answers the op frees it, and memory from the global
  // allocator freed on another thread goes back under the allocating thread's arena lock.
  auto transfer =
      std::allocate_shared<prepared_transfer>(op_blocks::allocator<prepared_transfer>(), std::move(prepared));
  const bool sequenced = stream.has_value();
  transfer_plan plan = engine.plan_for(*transfer);
  if (plan == transfer_plan::pinned && engine.batchable(*transfer, sequenced) &&
      engine.offer_to_batcher(op, sequence, transfer)) {
    plan = transfer_plan::batched;
  }
  transfer->plan = plan;
  // A registered plan is final only once the memory is registered, on an engine thread (run_registered).
  if (plan != transfer_plan::registered) engine.record_plan(*transfer, plan);
  if (plan == transfer_plan::batched) return;
  const CUstream target = engine.target_for(*transfer, stream);
  if (sequenced) {
    engine.sequencer.submit(target, [&engine, op = std::move(op), sequence, transfer = std::move(transfer), target] {
      engine.submit_planned(op, sequence, transfer, target, true);
    });
  } else {
    engine.submit_planned(std::move(op), sequence, std::move(transfer), target, false);
  }
}

// Page-locked memory goes straight to the copy engine; pageable memory is registered when it is large
// and seen again, else staged.
transfer_plan engine_core::impl::plan_for(const prepared_transfer& transfer) {
  if (!transfer.pageable) return transfer_plan::pinned;
  if (transfer.plan != transfer_plan::automatic) return transfer.plan;  // forced by the caller
  const endpoint& host = host_side_of(transfer);
  // The cache first: memory it registered is known to the driver too.
  if (transfer.registrable && registrations->worth_registering(host.address, transfer.bytes)) {
    return transfer_plan::registered;
  }
  if (known_page_locked(transfer)) return transfer_plan::pinned;  // the caller's own, passed as a span
  if (driver_stageable(transfer)) return transfer_plan::driver_staged;
  // Remembers a large buffer; may drop (unregister) an older registration at the same address, which
  // needs the engine's context current, and the caller's thread need not have it.
  if (transfer.registrable) {
    caller_context in_engine(driver, context);
    registrations->acquire(host.address, transfer.bytes, false);
  }
  return transfer_plan::staged;
}

bool engine_core::impl::offer_to_batcher(const std::shared_ptr<operation>& op, std::uint64_t sequence,
                                         const std::shared_ptr<prepared_transfer>& transfer) {
  // Counted whether or not the batcher takes it: a copy submitted alone is in flight too.
  transfer->counted = count_small_copy();
  copy_batcher::copy item{transfer->destination.address,
                          transfer->source.address,
                          transfer->bytes,
                          copy_direction(transfer->source, transfer->destination),
                          transfer->batching,
                          transfer->kernels_reach,
                          op,
                          sequence,
                          transfer};
  return batcher->offer(item);
}

void engine_core::impl::batched_copy_done(copy_batcher::copy& item, CUresult result) {
  const std::shared_ptr<operation>& op = item.op;
  prepared_transfer& transfer = *item.transfer;
  if (result == CUDA_SUCCESS) {
    op->add_bytes(transfer.bytes);
  } else if (result != copy_batcher::not_submitted) {
    fail(op, result, transfer.label() + " (batched) of device " + std::to_string(ordinal));
  }
  transfer.counted.reset();  // before the caller hears
  complete(op, item.sequence);
}

void engine_core::impl::submit_planned(std::shared_ptr<operation> op, std::uint64_t sequence,
                                       std::shared_ptr<prepared_transfer> transfer, CUstream stream, bool sequenced) {
  caller_context in_engine(driver, context);
  if (transfer->plan == transfer_plan::staged) {
    run_staged(std::move(op), sequence, std::move(transfer), stream, sequenced);
  } else if (transfer->plan == transfer_plan::registered) {
    // Registering blocks for milliseconds: never on the caller's thread.
    post_work([this, op = std::move(op), sequence, transfer = std::move(transfer), stream, sequenced] {
      run_registered(op, sequence, transfer, stream, sequenced);
    });
  } else {
    run_single(std::move(op), sequence, std::move(transfer), stream, sequenced);
  }
}

void engine_core::impl::run_registered(std::shared_ptr<operation> op, std::uint64_t sequence,
                                       std::shared_ptr<prepared_transfer> transfer, CUstream stream, bool sequenced) {
  const endpoint& host = host_side_of(*transfer);
  transfer->hold = registrations->acquire(host.address, transfer->bytes, true);
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

void force_plan(prepared_transfer& transfer, transfer_plan plan) {
  switch (plan) {
    case transfer_plan::automatic:
    case transfer_plan::pinned:
      transfer.plan = plan;
      return;
    case transfer_plan::registered:
    case transfer_plan::staged:
    case transfer_plan::driver_staged:
      if (!transfer.pageable) {
        throw_invalid_argument(transfer.operation, "transfer_options::plan is " + std::string(ferry::to_string(plan)) +
                                                       "; no side of this transfer is pageable host memory, so it "
                                                       "moves as it is (force automatic or pinned)");
      }
      if (plan == transfer_plan::registered && !transfer.registrable) {
        throw_invalid_argument(transfer.operation,
                               "transfer_options::plan is registered; the op owns the vector and hands it back, "
                               "where ferry cannot see it freed, so it cannot stay registered (force staged or "
                               "pinned)");
      }
      if (plan == transfer_plan::driver_staged && transfer.source.kind != memory_kind::pageable_host) {
        throw_invalid_argument(transfer.operation,
                               "transfer_options::plan is driver_staged, which only pokes take: the driver's "
                               "pageable device-to-host copy would block this thread until the stream is done");
      }
      transfer.plan = plan;
      return;
    case transfer_plan::batched:
    case transfer_plan::resident:
      throw_invalid_argument(transfer.operation,
                             "transfer_options::plan is " + std::string(ferry::to_string(plan)) +
                                 "; it is the planner's choice for small page-locked copies and cannot be forced "
                                 "(force pinned, registered or staged)");
  }
  throw_invalid_argument(transfer.operation, "transfer_options::plan " + std::to_string(static_cast<int>(plan)) +
                                                 " is not a transfer_plan");
}

}  // namespace ferry::detail
