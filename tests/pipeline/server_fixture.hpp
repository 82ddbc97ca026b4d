// A pipeline server with ferry's GPU step on an ephemeral loopback port, for a test: small limits so that
// the budget, deadlines and shutdown are reached quickly, and on the sim backend the leak check of
// device_fixture once the server is gone. Lanes' streams can be held back with gates (both backends).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "examples/pipeline_server/ferry_stage.hpp"
#include "examples/pipeline_server/kernels/transform_kernel.hpp"
#include "examples/pipeline_server/server.hpp"
#include "tests/pipeline/client.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/random_bytes.hpp"
#include "tests/support/stream_gate.hpp"

namespace ferry::testing {

inline pipeline::server_options small_server_options() {
  pipeline::server_options o;
  o.max_payload_bytes = std::size_t{1} << 20;
  o.memory_budget_bytes = std::size_t{4} << 20;
  o.request_deadline = std::chrono::seconds(20);
  o.write_deadline = std::chrono::seconds(10);  // no test's client pauses that long by accident
  o.shutdown_grace = std::chrono::seconds(5);
  o.io_threads = 2;
  o.header_deadline = std::chrono::seconds(20);  // no test's client pauses that long by accident
  return o;
}

// Polls `done` until it holds or `limit` passes; returns done().
inline bool eventually(const std::function<bool()>& done, std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return done();
}

struct server_fixture : device_fixture {
  // `gated_lanes`: the first so many lanes' streams are held back until open_gates() (lanes are opened
  // when a request finds every open one busy, so the first request runs on the first lane).
  // Host buffers of `register_from_bytes` or more are page-locked (the default is the stage's: the
  // 1 MiB class of the largest requests here is, smaller ones are staged).
  void start(pipeline::server_options options = small_server_options(), std::size_t gated_lanes = 0,
             std::size_t register_from_bytes = pipeline::ferry_stage::options{}.register_from_bytes) {
    pipeline::ferry_stage::options stage;
    stage.register_from_bytes = register_from_bytes;
    stage.on_new_stream = [this, gated_lanes](stream_ref s) {
      std::lock_guard lock(gates_mutex);
      ++streams_opened;
      if (gates.size() < gated_lanes) gates.push_back(std::make_unique<stream_gate>(s));
    };
    srv = std::make_unique<pipeline::server>(options, [stage](boost::asio::any_io_executor executor) {
      return std::make_unique<pipeline::ferry_stage>(std::move(executor), stage);
    });
  }
  void open_gates() {
    std::lock_guard lock(gates_mutex);
    for (auto& gate : gates) gate->open();
  }
  std::size_t gates_placed() {
    std::lock_guard lock(gates_mutex);
    return gates.size();
  }
  std::size_t streams() {
    std::lock_guard lock(gates_mutex);
    return streams_opened;
  }
  // The server goes first (it waits for the GPU, so the gates open before), then the gates' memory.
  // The kernel's module stays loaded for the context's life, as ferry's do: unloaded here, so that
  // device_fixture's leak check sees the context as the test found it.
  ~server_fixture() {
    open_gates();
    srv.reset();
    gates.clear();
    pipeline::kernels::unload_transform_kernel();
  }

  std::mutex gates_mutex;
  std::vector<std::unique_ptr<stream_gate>> gates;
  std::size_t streams_opened = 0;  // by the stage, for its lanes
  std::unique_ptr<pipeline::server> srv;
};

// The reply to `op` over `payload` is correct in every byte and in its checksum.
inline void check_reply(const reply& r, pipeline::operation op, const std::vector<std::uint8_t>& payload) {
  BOOST_REQUIRE_MESSAGE(r.header.status == pipeline::status::ok,
                        "status " << pipeline::to_string(r.header.status) << ": " << r.text());
  const expected_reply expected = expected_for(op, payload);
  BOOST_CHECK_EQUAL(r.header.checksum, expected.checksum);
  BOOST_CHECK_MESSAGE(same_bytes(r.body, expected.body), "the result differs from the transform of the payload");
}

}  // namespace ferry::testing
