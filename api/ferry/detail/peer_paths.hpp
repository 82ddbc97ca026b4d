// How engine::copy_peer moves (peer_path): the engine's choice and settings, the streams a split copy
// forks onto, and the per-call path checks. Implemented in engine/async (peer_paths.cc).
#pragma once

#include <cuda.h>

#include <memory>

#include "ferry/detail/engine_core.hpp"
#include "ferry/engine_options.hpp"

namespace ferry::detail {

// One engine's peer copies: its peer_path settings, and the streams and events its split copies fork
// onto and join back from (made in the engine's context on the first split, released with the last
// copy that holds them).
class peer_lanes;

// Checks the peer settings of `options` (std::invalid_argument naming the value) and keeps them for the
// engine whose context is `engine_context` on `device`. Creates no stream yet.
std::shared_ptr<peer_lanes> make_peer_lanes(CUcontext engine_context, CUdevice device, const engine_options& options);

// Sets how `transfer`, a copy_peer prepared between `source_context` and `destination_context`, moves:
// `path` (transfer_options::peer), or the engine's own when it is automatic. Throws std::invalid_argument
// naming the path and the devices when they cannot take it (peer_path::kernel), and cuda_error when a
// driver query or the enabling of peer access fails; nothing is enqueued either way.
void choose_peer_path(transfer_request& transfer, peer_path path, const std::shared_ptr<peer_lanes>& lanes,
                      CUcontext source_context, CUcontext destination_context);

// How many copies took each path.
peer_counts counts_of(const peer_lanes& lanes) noexcept;

}  // namespace ferry::detail
