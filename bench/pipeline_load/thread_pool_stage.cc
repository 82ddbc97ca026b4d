#include "bench/pipeline_load/thread_pool_stage.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstring>
#include <string>

#include "engine/driver/driver_table.hpp"
#include "examples/pipeline_server/kernels/parameters.hpp"
#include "examples/pipeline_server/kernels/transform_kernel.hpp"
#include "ferry/error.hpp"

namespace asio = boost::asio;

namespace ferry::pipeline {
namespace {

stage_outcome driver_failure(const char* call, CUresult status) {
  return {status::gpu_error, std::string(call) + " failed: " + make_error_code(status).message(), 0};
}

asio::awaitable<stage_outcome> on_worker(thread_pool_stage* stage, operation op, staging_pair* pair, std::size_t bytes) {
  co_return stage->run_on_worker(op, *pair, bytes);
}

class thread_pool_lane final : public gpu_lane {
 public:
  explicit thread_pool_lane(thread_pool_stage& stage) : stage_(stage) {}
  asio::awaitable<stage_outcome> run(operation op, staging_pair& pair, std::size_t bytes, deadline& limit) override {
    // Synchronous calls cannot be cancelled: the deadline is only checked once they are done.
    stage_outcome outcome =
        co_await asio::co_spawn(stage_.workers(), on_worker(&stage_, op, &pair, bytes), asio::use_awaitable);
    if (outcome.status == status::ok && limit.expired()) {
      outcome = {status::deadline_exceeded, "the request's deadline passed while the GPU step ran", 0};
    }
    co_return outcome;
  }

  // The baseline is the single server of the comparison: it is never given a next stage, nor one before it.
  asio::awaitable<stage_outcome> transform_for_next_stage(staging_pair&, std::size_t, bool, deadline&) override {
    co_return cannot_forward();
  }
  asio::awaitable<stage_outcome> checksum_slot(const window_slot&, std::size_t, staging_pair*, deadline&) override {
    co_return cannot_forward();
  }

 private:
  static stage_outcome cannot_forward() {
    return {status::gpu_error, "the thread-pool baseline does not run in stage-to-stage mode", 0};
  }

  thread_pool_stage& stage_;
};

}  // namespace

thread_pool_stage::thread_pool_stage(context_ref context, std::size_t threads) : context_(context), workers_(threads) {}

thread_pool_stage::~thread_pool_stage() {
  workers_.join();
  context_guard in_context(context_);
  for (CUstream stream : all_streams_) detail::driver().cuStreamDestroy(stream);
}

std::unique_ptr<gpu_lane> thread_pool_stage::open_lane() { return std::make_unique<thread_pool_lane>(*this); }

CUstream thread_pool_stage::take_stream() {
  std::lock_guard lock(mutex_);
  if (!idle_streams_.empty()) {
    CUstream stream = idle_streams_.back();
    idle_streams_.pop_back();
    return stream;
  }
  CUstream stream = nullptr;
  // Blocking (CU_STREAM_DEFAULT): its kernel waits for the copies on the legacy stream before it.
  if (CUresult status = detail::driver().cuStreamCreate(&stream, CU_STREAM_DEFAULT); status != CUDA_SUCCESS) {
    throw cuda_error(status, "cuStreamCreate", "baseline worker stream");
  }
  all_streams_.push_back(stream);
  return stream;
}

void thread_pool_stage::give_back(CUstream stream) {
  std::lock_guard lock(mutex_);
  idle_streams_.push_back(stream);
}

stage_outcome thread_pool_stage::run_on_worker(operation op, staging_pair& pair, std::size_t bytes) {
  const detail::driver_table& driver = detail::driver();
  context_guard in_context(context_);
  const CUdeviceptr device = pair.device.get().get();
  const std::size_t checksum_at = checksum_offset(bytes);
  if (bytes > 0) {
    // Padding up to the checksum word included, as the ferry stage does: the copy back reads it.
    if (CUresult s = driver.cuMemcpyHtoD(device, pair.host.get(), checksum_at); s != CUDA_SUCCESS) {
      return driver_failure("cuMemcpyHtoD", s);
    }
  }
  CUstream stream = nullptr;
  try {
    stream = take_stream();
  } catch (const cuda_error& error) {
    return {status::gpu_error, error.what(), 0};
  }
  const std::uint64_t mode = op == operation::transform ? kernels::transform_in_place : kernels::checksum_only;
  CUresult status = kernels::launch_transform_checksum(device, bytes, device + checksum_at, mode, stream_ref(stream));
  const CUresult synchronized = driver.cuStreamSynchronize(stream);
  give_back(stream);
  if (status != CUDA_SUCCESS) return driver_failure("launch_transform_checksum", status);
  if (synchronized != CUDA_SUCCESS) return driver_failure("cuStreamSynchronize", synchronized);
  const std::size_t from = op == operation::transform ? 0 : checksum_at;
  if (CUresult s = driver.cuMemcpyDtoH(pair.host.get() + from, device + from, checksum_at + 8 - from); s != CUDA_SUCCESS) {
    return driver_failure("cuMemcpyDtoH", s);
  }
  stage_outcome outcome;
  std::memcpy(&outcome.checksum, pair.host.get() + checksum_at, sizeof outcome.checksum);
  return outcome;
}

}  // namespace ferry::pipeline
