// The handler runs through its associated executor: a strand, or another io_context than the engine's;
// where Asio's dispatch would run it in place (system_executor, use_future's), on the engine's thread
// that completes the op.
#include "ferry/engine.hpp"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/system_executor.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "tests/support/device_fixture.hpp"
#include "tests/support/io_helpers.hpp"
#include "tests/support/random_bytes.hpp"

namespace asio = boost::asio;
using namespace ferry;

namespace {

// Holds every thread of Asio's system pool (where system_executor and use_future's executor post work)
// until destroyed: work posted there meanwhile waits, so a handler that runs anyway was not posted there.
class system_pool_held {
 public:
  system_pool_held() {
    // Asio's system context runs two threads per online core.
    const long threads = 2 * std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
    for (long i = 0; i < threads + 4; ++i) {
      asio::post(asio::system_executor(), [state = state_] {
        ++state->started;
        state->released.wait(false);
      });
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (state_->started.load() < threads && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    BOOST_REQUIRE_MESSAGE(state_->started.load() == threads, "the system pool ran " << state_->started.load()
                                                                 << " of its tasks at once, not " << threads);
  }
  system_pool_held(const system_pool_held&) = delete;
  system_pool_held& operator=(const system_pool_held&) = delete;
  ~system_pool_held() { release(); }

  void release() {
    state_->released = true;
    state_->released.notify_all();
  }

 private:
  struct state {
    std::atomic<long> started{0};
    std::atomic<bool> released{false};
  };
  std::shared_ptr<state> state_ = std::make_shared<state>();
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(executors, ferry::testing::device_fixture)

BOOST_AUTO_TEST_CASE(use_future_completes_on_the_engine_thread_while_the_system_pool_is_busy) {
  asio::io_context io;
  engine gpu{io.get_executor()};
  constexpr std::size_t count = 4096;
  const auto values = ferry::testing::random_vector<std::uint32_t>(count, 301);
  auto device = gpu.allocate<std::uint32_t>(count);
  system_pool_held busy;
  // No thread runs `io` either: nothing but the engine's own thread can deliver these.
  std::future<std::size_t> poked = gpu.poke(std::span<const std::uint32_t>(values), device.get(), asio::use_future);
  BOOST_TEST((poked.wait_for(std::chrono::seconds(10)) == std::future_status::ready));
  busy.release();  // a failed check above still lets the op end before the test does
  BOOST_TEST(poked.get() == count * sizeof(std::uint32_t));
  system_pool_held busy_again;
  std::future<std::vector<std::uint32_t>> peeked =
      gpu.peek(device_ptr<const std::uint32_t>(device.get()), count, asio::use_future);
  BOOST_TEST((peeked.wait_for(std::chrono::seconds(10)) == std::future_status::ready));
  busy_again.release();
  BOOST_TEST(ferry::testing::same_bytes(peeked.get(), values));
}

BOOST_AUTO_TEST_CASE(a_handler_bound_to_the_system_executor_runs_in_place_and_may_start_the_next_op) {
  asio::io_context io;
  engine gpu{io.get_executor()};
  constexpr std::size_t count = 1024;
  constexpr int links = 20;
  std::vector<std::vector<std::uint32_t>> values;
  for (int i = 0; i < links; ++i) values.push_back(ferry::testing::random_vector<std::uint32_t>(count, 400 + i));
  auto device = gpu.allocate<std::uint32_t>(count * links);
  system_pool_held busy;
  // Each handler starts the next poke from the thread it runs on; the last one raises the flag.
  // Boost.Test's checks are for the test's thread: the handlers, on the engine's, count what they see.
  std::promise<void> chain_done;
  std::atomic<int> handlers_run{0}, failed{0};
  std::function<void(int)> poke_link = [&](int link) {
    gpu.poke(std::span<const std::uint32_t>(values[link]), device.get() + link * count,
             asio::bind_executor(asio::system_executor(), [&, link](boost::system::error_code error, std::size_t) {
               if (error) ++failed;
               ++handlers_run;
               if (link + 1 < links) {
                 poke_link(link + 1);
               } else {
                 chain_done.set_value();
               }
             }));
  };
  poke_link(0);
  std::future<void> done = chain_done.get_future();
  BOOST_TEST((done.wait_for(std::chrono::seconds(10)) == std::future_status::ready));
  busy.release();  // a failed check above still lets the chain end before the test does
  done.get();
  BOOST_TEST(handlers_run.load() == links);
  BOOST_TEST(failed.load() == 0);
  for (int i = 0; i < links; ++i) {
    std::vector<std::uint32_t> back =
        gpu.peek(device_ptr<const std::uint32_t>(device.get() + i * count), count, asio::use_future).get();
    BOOST_TEST_INFO("link " << i);
    BOOST_TEST(ferry::testing::same_bytes(back, values[i]));
  }
}

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
