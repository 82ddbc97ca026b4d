#include "examples/pipeline_server/ferry_stage.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstring>

#include "examples/pipeline_server/kernels/parameters.hpp"
#include "examples/pipeline_server/kernels/transform_kernel.hpp"
#include "ferry/buffers.hpp"
#include "ferry/error.hpp"

namespace asio = boost::asio;

namespace ferry::pipeline {
namespace {

stage_outcome failed(boost::system::error_code error, const deadline& limit, std::string_view step) {
  if (limit.expired()) {
    return {status::deadline_exceeded, "the request's deadline passed during the " + std::string(step), 0};
  }
  return {status::gpu_error, std::string(step) + " failed: " + error.message(), 0};
}

class ferry_lane final : public gpu_lane {
 public:
  ferry_lane(engine& gpu, stream s) : gpu_(gpu), stream_(std::move(s)) {}

  asio::awaitable<stage_outcome> run(operation op, staging_pair& pair, std::size_t bytes, deadline& limit) override {
    const device_ptr<std::uint8_t> device = pair.device.get();
    const std::size_t checksum_at = checksum_offset(bytes);
    if (bytes > 0) {
      // Up to the checksum word, padding included: the one peek below reads the padding back, and
      // device bytes nothing wrote would be reads of uninitialized memory (compute-sanitizer initcheck).
      auto [error, moved] = co_await gpu_.poke(std::span<const std::uint8_t>(pair.host.get(), checksum_at), device, stream_.ref(),
                                               asio::bind_cancellation_slot(limit.slot(), asio::as_tuple(asio::use_awaitable)));
      if (error || limit.expired()) co_return failed(error, limit, "poke of the payload");
    }
    // The poke is complete, so the kernel, enqueued now, follows it on the stream, and the peek,
    // enqueued after the kernel, follows the kernel.
    const std::uint64_t mode = op == operation::transform ? kernels::transform_in_place : kernels::checksum_only;
    if (CUresult status =
            kernels::launch_transform_checksum(device.get(), bytes, (device + checksum_at).get(), mode, stream_.ref());
        status != CUDA_SUCCESS) {
      co_return stage_outcome{status::gpu_error,
                              "launch of ferry_transform_checksum failed: " + make_error_code(status).message(), 0};
    }
    // One peek brings the result and the checksum behind it (only the checksum for op checksum).
    const std::size_t from = op == operation::transform ? 0 : checksum_at;
    const std::size_t length = checksum_at + sizeof(std::uint64_t) - from;
    auto [error, moved] =
        co_await gpu_.peek(device_ptr<const std::uint8_t>(device + from), std::span<std::uint8_t>(pair.host.get() + from, length),
                           stream_.ref(), asio::bind_cancellation_slot(limit.slot(), asio::as_tuple(asio::use_awaitable)));
    if (error || limit.expired()) {
      // A peek that gave up before reaching the stream does not wait for the kernel ahead of it, which
      // may still be writing the device buffer: the pair goes back to the pool only once it is done.
      // A host wait, on this rare path only.
      try {
        stream_.synchronize();
      } catch (const cuda_error&) {
        // The context failed; the error code of the peek says so already.
      }
      co_return failed(error, limit, "peek of the result");
    }
    stage_outcome outcome;
    std::memcpy(&outcome.checksum, pair.host.get() + checksum_at, sizeof outcome.checksum);
    co_return outcome;
  }

 private:
  engine& gpu_;
  stream stream_;
};

}  // namespace

ferry_stage::ferry_stage(asio::any_io_executor executor, options settings)
    : gpu_(std::move(executor), std::move(settings.engine)),
      register_from_bytes_(settings.register_from_bytes),
      on_new_stream_(std::move(settings.on_new_stream)) {}

std::shared_ptr<void> ferry_stage::adopt_host_buffer(std::span<std::uint8_t> memory) {
  if (memory.size() < register_from_bytes_) return nullptr;
  context_guard in_engine(gpu_.context());
  return std::make_shared<host_registration<std::uint8_t>>(host_registration<std::uint8_t>::register_range(memory));
}

std::unique_ptr<gpu_lane> ferry_stage::open_lane() {
  context_guard in_engine(gpu_.context());
  stream s = stream::create();
  if (on_new_stream_) on_new_stream_(s.ref());
  return std::make_unique<ferry_lane>(gpu_, std::move(s));
}

}  // namespace ferry::pipeline
