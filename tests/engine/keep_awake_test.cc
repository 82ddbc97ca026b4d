// Keeping the handler's io_context awake while completions are owed to it (engine_options::executor_spin):
// a thread running the context keeps running handlers instead of parking, stops once nothing is owed, and
// nothing of the kind happens for executors that are not an io_context's, or when it is turned off.
#include "ferry/engine.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdint>
#include <future>
#include <vector>

#include "ferry/marshal.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/io_helpers.hpp"
#include "tests/support/random_bytes.hpp"
#include "tests/support/stream_gate.hpp"

namespace asio = boost::asio;
using namespace ferry;
using ferry::testing::random_vector;

namespace {

constexpr std::size_t count = 4096;

engine_options with_spin(std::chrono::microseconds spin) {
  engine_options options;
  options.executor_spin = spin;
  return options;
}

// Handlers io.poll() ran within `how_long`: poll() returns at once when nothing is ready.
std::size_t handlers_run_for(asio::io_context& io, std::chrono::milliseconds how_long) {
  std::size_t ran = 0;
  const auto until = std::chrono::steady_clock::now() + how_long;
  while (std::chrono::steady_clock::now() < until) {
    io.restart();
    ran += io.poll();
  }
  return ran;
}

struct gated_poke {
  std::vector<std::uint32_t> values = random_vector<std::uint32_t>(count, 811);
  device_buffer<std::uint32_t> destination = device_buffer<std::uint32_t>::allocate(count);
  stream s = stream::create();
  ferry::testing::stream_gate gate{s};
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(keep_awake, ferry::testing::device_fixture)

BOOST_AUTO_TEST_CASE(an_io_context_owed_a_completion_keeps_running_until_it_arrives_then_parks) {
  asio::io_context io;
  engine gpu{io.get_executor(), with_spin(std::chrono::seconds(10))};
  gated_poke pending;
  bool done = false;
  gpu.poke(std::span<const std::uint32_t>(pending.values), pending.destination.get(), pending.s,
           [&](boost::system::error_code error, std::size_t bytes) {
             BOOST_TEST(!error);
             BOOST_TEST(bytes == count * 4);
             done = true;
           });
  // Held back by the gate: the context is kept busy with the keep-awake task, not the handler.
  BOOST_TEST(handlers_run_for(io, std::chrono::milliseconds(20)) > 10u);
  BOOST_TEST(!done);
  pending.gate.open();
  BOOST_TEST(ferry::testing::run_until(io, [&] { return done; }, std::chrono::seconds(10)));
  BOOST_TEST(peek_list_array(count, device_ptr<const std::uint32_t>(pending.destination.get())) == pending.values);
  // Nothing is owed any more: the task ends (at most one more turn), and the context parks again.
  handlers_run_for(io, std::chrono::milliseconds(5));
  BOOST_TEST(handlers_run_for(io, std::chrono::milliseconds(20)) == 0u);
}

BOOST_AUTO_TEST_CASE(the_task_stops_after_executor_spin_without_activity) {
  asio::io_context io;
  engine gpu{io.get_executor(), with_spin(std::chrono::milliseconds(2))};
  gated_poke pending;
  bool done = false;
  gpu.poke(std::span<const std::uint32_t>(pending.values), pending.destination.get(), pending.s,
           [&](boost::system::error_code error, std::size_t) {
             BOOST_TEST(!error);
             done = true;
           });
  handlers_run_for(io, std::chrono::milliseconds(10));  // past the 2 ms: the task gives up
  BOOST_TEST(handlers_run_for(io, std::chrono::milliseconds(20)) == 0u);
  pending.gate.open();
  BOOST_TEST(ferry::testing::run_until(io, [&] { return done; }, std::chrono::seconds(10)));
}

BOOST_AUTO_TEST_CASE(with_executor_spin_zero_a_waiting_context_runs_nothing) {
  asio::io_context io;
  engine gpu{io.get_executor(), with_spin(std::chrono::microseconds(0))};
  gated_poke pending;
  bool done = false;
  gpu.poke(std::span<const std::uint32_t>(pending.values), pending.destination.get(), pending.s,
           [&](boost::system::error_code, std::size_t) { done = true; });
  BOOST_TEST(handlers_run_for(io, std::chrono::milliseconds(20)) == 0u);
  pending.gate.open();
  BOOST_TEST(ferry::testing::run_until(io, [&] { return done; }, std::chrono::seconds(10)));
}

BOOST_AUTO_TEST_CASE(a_strand_of_the_io_context_is_kept_awake_and_the_handler_runs_on_the_strand) {
  asio::io_context io;
  engine gpu{io.get_executor(), with_spin(std::chrono::seconds(10))};
  auto strand = asio::make_strand(io);
  gated_poke pending;
  bool on_strand = false, done = false;
  gpu.poke(std::span<const std::uint32_t>(pending.values), pending.destination.get(), pending.s,
           asio::bind_executor(strand, [&](boost::system::error_code error, std::size_t) {
             BOOST_TEST(!error);
             on_strand = strand.running_in_this_thread();
             done = true;
           }));
  BOOST_TEST(handlers_run_for(io, std::chrono::milliseconds(20)) > 10u);
  pending.gate.open();
  BOOST_TEST(ferry::testing::run_until(io, [&] { return done; }, std::chrono::seconds(10)));
  BOOST_TEST(on_strand);
}

BOOST_AUTO_TEST_CASE(use_future_is_not_an_io_context_so_nothing_spins_for_it) {
  asio::io_context io;
  engine gpu{io.get_executor(), with_spin(std::chrono::seconds(10))};
  gated_poke pending;
  std::future<std::size_t> bytes =
      gpu.poke(std::span<const std::uint32_t>(pending.values), pending.destination.get(), pending.s, asio::use_future);
  BOOST_TEST(handlers_run_for(io, std::chrono::milliseconds(20)) == 0u);
  pending.gate.open();
  BOOST_TEST(bytes.get() == count * 4);
}

BOOST_AUTO_TEST_SUITE_END()
