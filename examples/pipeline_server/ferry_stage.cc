#include "examples/pipeline_server/ferry_stage.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <array>
#include <cstring>
#include <stdexcept>

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

// One pass on the lane's stream: the data poked to the device (when it is on the host), the kernel over
// it, then one peek of the device bytes from `peek_from` to the checksum word's end.
struct gpu_pass {
  std::span<const std::uint8_t> poke;  // empty: the data is on the device already
  device_ptr<std::uint8_t> device;     // the data, with the checksum word at checksum_offset(bytes)
  std::size_t bytes = 0;
  std::uint64_t mode = kernels::transform_in_place;
  std::size_t peek_from = 0;  // checksum_offset(bytes): the checksum only
  std::uint8_t* peek_to = nullptr;  // receives device bytes [peek_from, checksum word's end)
};

class ferry_lane final : public gpu_lane {
 public:
  ferry_lane(engine& gpu, stream s) : gpu_(gpu), stream_(std::move(s)) {}

  asio::awaitable<stage_outcome> run(operation op, staging_pair& pair, std::size_t bytes, deadline& limit) override {
    const bool transform = op == operation::transform;
    co_return co_await run_pass(from_host(pair, bytes, transform ? kernels::transform_in_place : kernels::checksum_only,
                                          transform),
                                limit);
  }

  asio::awaitable<stage_outcome> transform_for_next_stage(staging_pair& pair, std::size_t bytes, bool result_to_host,
                                                          deadline& limit) override {
    // A device window takes the result from pair.device: only the checksum word comes back, and its
    // peek is what says the kernel is done with the data.
    co_return co_await run_pass(from_host(pair, bytes, kernels::transform_in_place, result_to_host), limit);
  }

  asio::awaitable<stage_outcome> checksum_slot(const window_slot& slot, std::size_t bytes, staging_pair* scratch,
                                               deadline& limit) override {
    const std::size_t checksum_at = checksum_offset(bytes);
    if (slot.host == nullptr) {
      std::array<std::uint8_t, sizeof(std::uint64_t)> word{};
      co_return co_await run_pass(gpu_pass{{}, slot.device, bytes, kernels::checksum_only, checksum_at, word.data()},
                                  limit);
    }
    if (scratch == nullptr) throw std::invalid_argument("ferry_lane::checksum_slot: a host slot needs a scratch pair");
    // Up to the checksum word, padding included, as run() pokes a payload: the kernel loads whole 16-byte
    // units, and device bytes nothing wrote would be reads of uninitialized memory.
    co_return co_await run_pass(gpu_pass{std::span<const std::uint8_t>(slot.host, checksum_at), scratch->device.get(),
                                         bytes, kernels::checksum_only, checksum_at, scratch->host.get() + checksum_at},
                                limit);
  }

 private:
  static gpu_pass from_host(staging_pair& pair, std::size_t bytes, std::uint64_t mode, bool result_to_host) {
    const std::size_t checksum_at = checksum_offset(bytes);
    // Up to the checksum word, padding included: a peek of the result reads the padding back, and
    // device bytes nothing wrote would be reads of uninitialized memory (compute-sanitizer initcheck).
    const std::size_t peek_from = result_to_host ? 0 : checksum_at;
    return gpu_pass{std::span<const std::uint8_t>(pair.host.get(), bytes > 0 ? checksum_at : 0), pair.device.get(),
                    bytes, mode, peek_from, pair.host.get() + peek_from};
  }

  asio::awaitable<stage_outcome> run_pass(gpu_pass pass, deadline& limit) {
    const std::size_t checksum_at = checksum_offset(pass.bytes);
    if (!pass.poke.empty()) {
      auto [error, moved] = co_await gpu_.poke(pass.poke, pass.device, stream_.ref(),
                                               asio::bind_cancellation_slot(limit.slot(), asio::as_tuple(asio::use_awaitable)));
      if (error || limit.expired()) co_return failed(error, limit, "poke of the payload");
    }
    // The poke is complete, so the kernel, enqueued now, follows it on the stream, and the peek,
    // enqueued after the kernel, follows the kernel.
    if (CUresult status = kernels::launch_transform_checksum(pass.device.get(), pass.bytes,
                                                             (pass.device + checksum_at).get(), pass.mode, stream_.ref());
        status != CUDA_SUCCESS) {
      co_return stage_outcome{status::gpu_error,
                              "launch of ferry_transform_checksum failed: " + make_error_code(status).message(), 0};
    }
    // One peek brings the result (when asked for) and the checksum behind it.
    const std::size_t length = checksum_at + sizeof(std::uint64_t) - pass.peek_from;
    auto [error, moved] = co_await gpu_.peek(device_ptr<const std::uint8_t>(pass.device + pass.peek_from),
                                             std::span<std::uint8_t>(pass.peek_to, length), stream_.ref(),
                                             asio::bind_cancellation_slot(limit.slot(), asio::as_tuple(asio::use_awaitable)));
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
    std::memcpy(&outcome.checksum, pass.peek_to + (checksum_at - pass.peek_from), sizeof outcome.checksum);
    co_return outcome;
  }

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
