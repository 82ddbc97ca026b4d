// The GPU step of a request, behind an interface so that the server logic (sockets, framing, memory
// budget, deadlines, metrics) is one piece of code whichever way the bytes reach the GPU: through ferry's
// engine (ferry_stage.hpp) or, for comparison, the way a server without ferry would do it
// (bench/pipeline_load's thread-pool baseline).
#pragma once

#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "examples/pipeline_server/buffer_pool.hpp"
#include "examples/pipeline_server/deadline.hpp"
#include "examples/pipeline_server/protocol.hpp"
#include "ferry/context.hpp"
#include "ferry/engine_options.hpp"
#include "ferry/pointers.hpp"

namespace ferry::pipeline {

struct stage_outcome {
  pipeline::status status = status::ok;
  std::string message;  // why, when status is not ok
  std::uint64_t checksum = 0;
};

// Where the bytes of a forward lie on the next stage: a slot of its window (stage_protocol.hpp), in host
// memory or in device memory of the stage's context (one of the two is set), with room for the checksum
// word at checksum_offset(bytes) after the data.
struct window_slot {
  std::uint8_t* host = nullptr;
  device_ptr<std::uint8_t> device;
};

// A way to the GPU (ferry's stage: a stream), lent by the server's lane_pool to one request at a time.
class gpu_lane {
 public:
  virtual ~gpu_lane() = default;
  // Runs `op` over the first `bytes` bytes of pair.host: afterwards pair.host holds the reply body
  // (reply_body_length(op, bytes) bytes) and the outcome the checksum. Runs on the request's connection's strand,
  // in a thread where the stage's context is current. When `limit` expires the step stops as soon as it
  // can and reports deadline_exceeded; it never returns while the GPU may still touch the pair.
  virtual boost::asio::awaitable<stage_outcome> run(operation op, staging_pair& pair, std::size_t bytes,
                                                    deadline& limit) = 0;
  // Operation forward on the previous stage: transforms the first `bytes` bytes of pair.host as run()
  // does for transform, leaving the result in pair.device, and in pair.host too when `result_to_host`
  // (the next stage's window is host memory, so the put goes from there). As run() otherwise; a stage
  // that cannot forward answers gpu_error saying so.
  virtual boost::asio::awaitable<stage_outcome> transform_for_next_stage(staging_pair& pair, std::size_t bytes,
                                                                         bool result_to_host, deadline& limit) = 0;
  // On the next stage: the checksum of the `bytes` bytes in `slot` (the kernel's checksum_only mode),
  // reading nothing else of the data. A device slot is summed where it lies (the checksum word is the
  // slot's own, after the data); a host slot is first poked into `scratch`'s device buffer (a pair of at
  // least the class of `bytes`, which must then be given). As run() for the deadline.
  virtual boost::asio::awaitable<stage_outcome> checksum_slot(const window_slot& slot, std::size_t bytes,
                                                              staging_pair* scratch, deadline& limit) = 0;
};

class gpu_stage {
 public:
  virtual ~gpu_stage() = default;
  // Throws ferry's errors when the lane's resources (a stream) cannot be had. Called by the server's
  // lane_pool, at most its size times.
  virtual std::unique_ptr<gpu_lane> open_lane() = 0;
  virtual context_ref context() const noexcept = 0;
  // A new host buffer of the pool: what the stage returns is kept with the buffer while it lives.
  virtual std::shared_ptr<void> adopt_host_buffer(std::span<std::uint8_t> memory) = 0;
  // The pool is about to free a host buffer the stage may have seen.
  virtual void forget_host_memory(std::span<std::uint8_t> memory) = 0;
  // The planner's decisions so far, for the metrics (none for a stage without ferry's planner).
  virtual std::optional<ferry::plan_counts> plan_counts() const = 0;
  // "ferry", "thread_pool": a label of the metrics.
  virtual std::string name() const = 0;
};

}  // namespace ferry::pipeline
