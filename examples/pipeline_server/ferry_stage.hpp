// The GPU step through ferry's engine: each connection gets a stream; a request is poked from its
// pageable buffer (the planner picks staged or registered), transformed by ferry_transform_checksum on
// the same stream, and peeked back together with its checksum. The request's deadline is bound to each
// engine operation, so an expired request stops between staging chunks instead of finishing its copy.
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

  ferry_stage(boost::asio::any_io_executor executor, engine_options options, stream_hook on_new_stream = {});

  std::unique_ptr<gpu_lane> open_lane() override;
  context_ref context() const noexcept override { return gpu_.context(); }
  void forget_host_memory(std::span<std::uint8_t> memory) override { gpu_.forget_host_memory(memory); }
  std::optional<detail::plan_counts> plan_counts() const override { return gpu_.plan_counts(); }
  std::string name() const override { return "ferry"; }

 private:
  engine gpu_;
  stream_hook on_new_stream_;
};

}  // namespace ferry::pipeline
