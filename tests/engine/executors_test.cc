// The handler runs through its associated executor: a strand, or another io_context than the engine's.
#include "ferry/engine.hpp"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <thread>

#include "tests/support/device_fixture.hpp"
#include "tests/support/io_helpers.hpp"

namespace asio = boost::asio;
using namespace ferry;

BOOST_FIXTURE_TEST_SUITE(executors, ferry::testing::device_fixture)

BOOST_AUTO_TEST_CASE(a_handler_bound_to_a_strand_runs_inside_the_strand) {
  asio::io_context io(2);
  engine gpu{io.get_executor()};
  auto strand = asio::make_strand(io);
  // Each memset has its own slice: ops on pool streams may run at once.
  auto destination = gpu.allocate<std::uint32_t>(50 * 256);
  std::atomic<int> in_strand{0}, calls{0};
  for (int i = 0; i < 50; ++i) {
    gpu.memset(destination.get() + i * 256, 256, std::uint32_t(i), asio::bind_executor(strand, [&](auto error) {
                 BOOST_TEST(!error);
                 if (strand.running_in_this_thread()) ++in_strand;
                 ++calls;
               }));
  }
  std::thread other([&] { ferry::testing::run_until(io, [&] { return calls == 50; }); });
  ferry::testing::run_until(io, [&] { return calls == 50; });
  other.join();
  BOOST_TEST(calls.load() == 50);
  BOOST_TEST(in_strand.load() == 50);
}

BOOST_AUTO_TEST_CASE(a_handler_bound_to_a_second_io_context_runs_only_when_that_context_runs) {
  asio::io_context engine_io, handler_io;
  engine gpu{engine_io.get_executor()};
  auto destination = gpu.allocate<std::uint32_t>(256);
  std::thread::id ran_on;
  bool called = false;
  gpu.memset(destination.get(), 256, std::uint32_t{3}, asio::bind_executor(handler_io, [&](auto error) {
               BOOST_TEST(!error);
               ran_on = std::this_thread::get_id();
               called = true;
             }));
  ferry::testing::run_for_a_while(engine_io);
  BOOST_TEST(!called);  // the engine's executor does not run it
  std::thread runner([&] { ferry::testing::run_until(handler_io, [&] { return called; }); });
  const std::thread::id runner_id = runner.get_id();
  runner.join();
  BOOST_TEST(called);
  BOOST_TEST((ran_on == runner_id));
}

BOOST_AUTO_TEST_SUITE_END()
