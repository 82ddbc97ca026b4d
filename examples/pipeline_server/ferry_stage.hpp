// The GPU step through ferry's engine: each lane is a stream (lent to one request at a time by the
// server's lane_pool, so connections share a few streams); a request is poked from its host
// buffer, transformed by ferry_transform_checksum (the example's own kernel: kernels/) on the same
// stream, and peeked back together with its checksum. The request's deadline is bound to each engine operation, so an expired request stops
// between staging chunks instead of finishing its copy.
//
// Host buffers of 1 MiB classes and up are page-locked once, when the pool creates them (ferry's
// host_registration), and the planner then moves them in one DMA (plan pinned). The engine registers a
// pageable buffer itself only from 32 MiB and on its second sighting, because it cannot know that a buffer
// will come back; the pool knows it will, so page-locking pays off from much smaller sizes. (The engine's
// cache would not catch these buffers anyway: it keys a buffer by its address and size, and the requests
// in one pooled buffer vary in size.) Smaller buffers stay pageable and go through the staging pool (plan
// staged), where a chunk copy costs less than a page-locking call.
#pragma once

#include <boost/asio/any_io_executor.hpp>

#include <functional>

#include "examples/pipeline_server/gpu_stage.hpp"
#include "ferry/engine.hpp"
#include "ferry/stream.hpp"

namespace ferry::pipeline {

class ferry_stage final : public gpu_stage {
 public:
  // Called with each lane's stream once it exists (tests hold a stream back with a gate).
  using stream_hook = std::function<void(stream_ref)>;

  struct options {
    engine_options engine;
    // Host buffers of at least this many bytes are page-locked when created.
    std::size_t register_from_bytes = std::size_t{1} << 20;
    stream_hook on_new_stream;
  };

  ferry_stage(boost::asio::any_io_executor executor, options settings);

  std::unique_ptr<gpu_lane> open_lane() override;
  context_ref context() const noexcept override { return gpu_.context(); }
  std::shared_ptr<void> adopt_host_buffer(std::span<std::uint8_t> memory) override;
  void forget_host_memory(std::span<std::uint8_t> memory) override { gpu_.forget_host_memory(memory); }
  std::optional<ferry::plan_counts> plan_counts() const override { return gpu_.plan_counts(); }
  std::string name() const override { return "ferry"; }

 private:
  engine gpu_;
  std::size_t register_from_bytes_;
  stream_hook on_new_stream_;
};

}  // namespace ferry::pipeline
