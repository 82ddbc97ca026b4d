// Running an io_context in tests: until a condition holds (or a deadline passes), counting handlers;
// and recording what an op's handler was called with.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/system/error_code.hpp>
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>

#include "tests/support/device_fixture.hpp"

namespace ferry::testing {

// Runs handlers of `io` until `done()` or `limit` passes; returns done().
inline bool run_until(boost::asio::io_context& io, const std::function<bool()>& done,
                      std::chrono::milliseconds limit = std::chrono::seconds(60)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    io.restart();
    io.run_for(std::chrono::milliseconds(5));
  }
  return done();
}

// Starts `count` transfers at once (start(i, handler) starts the i-th), so that they meet in the engine's
// batches, and runs `io` until each completed; checks that each moved `bytes_each` bytes without error.
// On the sim each copy started here takes 2 ms, so that they meet however slowly they are started.
template <class Start>
void run_together(boost::asio::io_context& io, std::size_t count, std::size_t bytes_each, Start start) {
  const paced_sim_copies paced(bytes_each);
  std::atomic<std::size_t> done{0};
  for (std::size_t i = 0; i < count; ++i) {
    start(i, [&](boost::system::error_code error, std::size_t moved) {
      BOOST_TEST(!error);
      BOOST_TEST(moved == bytes_each);
      ++done;
    });
  }
  BOOST_TEST(run_until(io, [&] { return done == count; }));
}

// Runs `io` for a while: long enough for a completion to have arrived if one were coming.
inline void run_for_a_while(boost::asio::io_context& io, std::chrono::milliseconds how_long = std::chrono::milliseconds(100)) {
  io.restart();
  io.run_for(how_long);
}

// What a transfer's handler (void(error_code, std::size_t)) was called with, and how many times.
struct outcome {
  int calls = 0;
  boost::system::error_code error;
  std::size_t bytes = 0;
};

// A handler that records into `into`, which must outlive it.
inline auto record(outcome& into) {
  return [&into](boost::system::error_code error, std::size_t bytes) {
    ++into.calls;
    into.error = error;
    into.bytes = bytes;
  };
}

// The same for a handler of void(error_code) (memset, prefetch, wait_all, wait): bytes stays 0.
inline auto record_status(outcome& into) {
  return [&into](boost::system::error_code error) {
    ++into.calls;
    into.error = error;
  };
}

}  // namespace ferry::testing
