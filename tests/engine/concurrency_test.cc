// 10,000 coroutines on a multi-threaded io_context, each doing poke -> copy -> peek round trips on its
// own buffers, every byte verified.
#include "ferry/engine.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <mutex>
#include <string>
#include <cstdint>
#include <thread>
#include <vector>

#include "tests/support/compute_sanitizer.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/random_bytes.hpp"

namespace asio = boost::asio;
using namespace ferry;

BOOST_FIXTURE_TEST_SUITE(concurrency, ferry::testing::device_fixture)

BOOST_AUTO_TEST_CASE(ten_thousand_coroutines_round_trip_their_own_buffers) {
  // Under compute-sanitizer every driver call is many times slower: 10,000 took past 120 s in initcheck.
  const int coroutines = ferry::testing::under_compute_sanitizer() ? 2000 : 10000;
  asio::io_context io(4);
  std::mutex mutex;
  engine_options options;
  std::vector<std::string> reports;
  options.on_failure = [&](const std::string& message) {
    std::lock_guard lock(mutex);
    if (reports.size() < 3) reports.push_back(message);
  };
  engine gpu{io.get_executor(), options};
  std::atomic<int> verified{0}, failed{0};
  std::string first_failure;
  for (int i = 0; i < coroutines; ++i) {
    asio::co_spawn(io, [&, i]() -> asio::awaitable<void> {
      const std::size_t count = 64 + (i * 7919) % 4000;
      auto values = ferry::testing::random_vector<std::uint8_t>(count, 600 + i);
      auto a = gpu.allocate<std::uint8_t>(count);
      auto b = gpu.allocate<std::uint8_t>(count);
      co_await gpu.poke(std::span<const std::uint8_t>(values), a.get(), asio::use_awaitable);
      // Poisoned first, so the copy must overwrite every byte; and compute-sanitizer's initcheck does
      // not see cuMemcpyBatchAsync (which carries most of these small copies) write its destination.
      co_await gpu.memset(b.get(), count, std::uint8_t{0x5A}, asio::use_awaitable);
      co_await gpu.copy(device_ptr<const std::uint8_t>(a.get()), b.get(), count, asio::use_awaitable);
      std::vector<std::uint8_t> back(count, 0xA5);
      co_await gpu.peek(device_ptr<const std::uint8_t>(b.get()), std::span<std::uint8_t>(back), asio::use_awaitable);
      ++(back == values ? verified : failed);
    }, [&](std::exception_ptr error) {
      if (!error) return;
      ++failed;
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        std::lock_guard lock(mutex);
        if (first_failure.empty()) first_failure = e.what();
      }
    });
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back([&] { io.run(); });
  for (auto& thread : threads) thread.join();
  BOOST_TEST(verified.load() == coroutines);
  BOOST_TEST(failed.load() == 0, "first failure: " << first_failure);
  for (const std::string& report : reports) BOOST_TEST_MESSAGE("engine reported: " << report);
  BOOST_TEST(gpu.plan_counts().batch_refusals == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
