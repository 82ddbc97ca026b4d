// The checks of a caller's transfer_options on a prepared transfer (transfer_request::apply: force_plan,
// choose_batch_path, refuse_peer_path), and the names of plans, batch paths and peer paths.
#include <string>
#include <utility>

#include "engine/errors/check.hpp"
#include "engine/memory/known_ranges.hpp"
#include "engine/transfer/prepared_transfer.hpp"
#include "ferry/error.hpp"

namespace ferry::detail {

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


void refuse_peer_path(const prepared_transfer& transfer, peer_path path) {
  if (path == peer_path::automatic) return;
  throw_invalid_argument(transfer.operation, "transfer_options::peer is " +
                                                 (ferry::to_string(path) != "?" ? std::string(ferry::to_string(path))
                                                                   : std::to_string(static_cast<int>(path))) +
                                                 "; only copy_peer takes a peer_path");
}

void transfer_request::apply(const transfer_options& options, int engine_device) {
  prepared_transfer& transfer = prepared_of(*this);
  if (options.plan != transfer_plan::automatic) force_plan(transfer, options.plan);
  if (options.peer != peer_path::automatic) refuse_peer_path(transfer, options.peer);
  if (options.batching != batch_path::automatic) {
    choose_batch_path(transfer, options.batching, options.stream.has_value(), engine_device);
  }
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


std::string_view to_string(peer_path path) noexcept {
  switch (path) {
    case peer_path::automatic: return "automatic";
    case peer_path::copy_engine: return "copy_engine";
    case peer_path::split: return "split";
    case peer_path::kernel: return "kernel";
  }
  return "?";
}

}  // namespace ferry
