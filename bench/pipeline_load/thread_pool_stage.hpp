// The baseline GPU step: the pipeline server written the way most people would without ferry. A thread
// pool takes each request and makes the synchronous driver calls on its pageable buffers:
// cuMemcpyHtoD, the same kernel (on a blocking stream, which orders it after the legacy-stream copy),
// cuStreamSynchronize, cuMemcpyDtoH. Through ferry's driver table, so it runs on sim too. Everything
// else (sockets, framing, the memory budget, metrics) is the same server code as ferry's.
#pragma once

#include <boost/asio/thread_pool.hpp>

#include <mutex>
#include <vector>

#include "examples/pipeline_server/gpu_stage.hpp"

namespace ferry::pipeline {

class thread_pool_stage final : public gpu_stage {
 public:
  // `threads` workers, each in `context` while it works.
  thread_pool_stage(context_ref context, std::size_t threads);
  // Joins the workers, then destroys the streams they used.
  ~thread_pool_stage() override;

  std::unique_ptr<gpu_lane> open_lane() override;
  context_ref context() const noexcept override { return context_; }
  // Pageable buffers as they come: nothing is registered or cached per host buffer.
  std::shared_ptr<void> adopt_host_buffer(std::span<std::uint8_t>) override { return nullptr; }
  void forget_host_memory(std::span<std::uint8_t>) override {}
  std::optional<ferry::plan_counts> plan_counts() const override { return std::nullopt; }
  std::string name() const override { return "thread_pool"; }

  // The blocking work of one request, on a worker.
  stage_outcome run_on_worker(operation op, staging_pair& pair, std::size_t bytes);
  boost::asio::thread_pool& workers() noexcept { return workers_; }

 private:
  CUstream take_stream();
  void give_back(CUstream stream);

  context_ref context_;
  boost::asio::thread_pool workers_;
  std::mutex mutex_;
  std::vector<CUstream> idle_streams_;
  std::vector<CUstream> all_streams_;
};

}  // namespace ferry::pipeline
