// The stage port of a server in stage-to-stage mode (stage_protocol.hpp): previous stages connect here
// over ferry::remote. Each gets a window of its own, `slots` slots of max_payload_bytes (16-byte
// aligned, with room for the checksum word), registered with the worker and announced as the first
// message; then each forward message is checksummed on this server's GPU, with a lane of the server's
// lane_pool (and, for a host window, a device buffer leased from its buffer_pool), so that the work of
// previous stages is bounded as requests are, and answered by request id.
//
// The window is device memory on the cuda backend (the previous stage puts straight into the GPU's
// memory, and the kernel sums it where it lies) or host memory (on the sim backend, whose device memory
// UCX cannot reach; the slot is then poked into a device buffer first).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstddef>
#include <memory>

#include "examples/pipeline_server/buffer_pool.hpp"
#include "examples/pipeline_server/deadline.hpp"
#include "examples/pipeline_server/gpu_stage.hpp"
#include "examples/pipeline_server/lane_pool.hpp"
#include "examples/pipeline_server/stage_protocol.hpp"
#include "ferry/remote.hpp"

namespace ferry::pipeline {

class stage_listener {
 public:
  struct settings {
    std::size_t slots = 8;
    std::size_t max_payload_bytes = 0;
    remote::memory_kind memory = remote::memory_kind::host;
    std::chrono::milliseconds deadline{30000};  // for checksumming one forward, from its message
  };

  // The worker (already listening), the stage, its lanes and its pool outlive the listener.
  stage_listener(remote::worker& worker, gpu_stage& stage, lane_pool& lanes, buffer_pool& pool, settings s);

  // Accepts previous stages on `control` (a strand, the one stop() is called on); serves each on a
  // strand of `io` (whose threads have the stage's context current). Strands of the io_context's own
  // executor, as next_stage.cc says why.
  void start(boost::asio::any_io_executor control, boost::asio::io_context& io);
  // On the control strand: accepts no more. The caller then destroys the worker, which closes the
  // listener and every previous stage's endpoint (their loops end; forwards being checksummed finish).
  void stop() noexcept { stopped_ = true; }

  // A slot's size: checksum_offset(max_payload_bytes) plus the checksum word's room.
  std::size_t slot_bytes() const noexcept { return slot_bytes_; }

 private:
  struct window;  // one previous stage's

  boost::asio::awaitable<void> accept_loop();
  std::shared_ptr<window> make_window(remote::endpoint e);
  boost::asio::awaitable<void> serve(std::shared_ptr<window> w);
  boost::asio::awaitable<void> answer(std::shared_ptr<window> w, forward_message message);
  boost::asio::awaitable<stage_outcome> checksum(window& w, const forward_message& message, deadline& limit);

  remote::worker& worker_;
  gpu_stage& stage_;
  lane_pool& lanes_;
  buffer_pool& pool_;
  const settings settings_;
  const std::size_t slot_bytes_;
  boost::asio::io_context* io_ = nullptr;
  bool stopped_ = false;  // on the control strand
};

}  // namespace ferry::pipeline
