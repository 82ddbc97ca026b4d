// A million random operations (poke, peek, copy, memset, copy_2d; 1 B to 64 MiB, most small; pageable,
// pinned or owned host memory; a stream_ref or none; 1% cancelled) from 32 coroutines on a four-thread
// io_context, every completed transfer checked against a host model of device memory. On the GPU the
// same million ops; FERRY_STRESS_OPS overrides the count.
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "ferry/engine.hpp"
#include "tests/stress/random_workload.hpp"
#include "tests/support/device_fixture.hpp"

namespace asio = boost::asio;
using namespace ferry;

namespace {

std::size_t ops_to_run() {
  if (const char* text = std::getenv("FERRY_STRESS_OPS"); text && *text) return std::stoull(text);
  return 1000000;
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(random_operations, ferry::testing::device_fixture)

BOOST_AUTO_TEST_CASE(a_million_random_operations_from_four_threads_all_match_the_model) {
  const std::size_t ops = ops_to_run();
  std::vector<stream> streams;
  for (int i = 0; i < 4; ++i) streams.push_back(stream::create());
  asio::io_context io(4);
  stress::workload_totals totals;
  stress::workload_options options;
  options.max_ops = ops;
  options.seed = 20261129;
  for (const stream& s : streams) options.streams.push_back(s);
  const auto start = std::chrono::steady_clock::now();
  {
    engine gpu{io.get_executor()};
    stress::spawn_workload(gpu, io.get_executor(), options, totals);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) threads.emplace_back([&] { io.run(); });
    for (auto& thread : threads) thread.join();
    const auto plans = gpu.plan_counts();
    std::cout << "plans: pinned " << plans.pinned << ", staged " << plans.staged << ", registered " << plans.registered
              << ", batched " << plans.batched << "\n";
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "stress: " << totals.ops << " ops (" << totals.bytes_moved << " bytes moved), " << totals.bytes_verified
            << " bytes verified (" << totals.read_backs << " read-backs), " << totals.cancel_requests
            << " cancellations requested, " << totals.aborted << " aborted, " << totals.failures << " failures, in "
            << seconds << " s\n";
  for (const std::string& message : totals.failure_messages()) std::cout << "failure: " << message << "\n";
  BOOST_TEST(totals.failures == 0u);
  BOOST_TEST(totals.workers_done == options.workers);
  BOOST_TEST(totals.ops == ops);
  BOOST_TEST(totals.cancel_requests > 0u);
  BOOST_TEST(totals.bytes_verified >= totals.bytes_moved / 2);
}

BOOST_AUTO_TEST_SUITE_END()
