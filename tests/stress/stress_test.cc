// A million random operations (poke, peek, copy, memset, copy_2d; 1 B to 64 MiB, most small; pageable,
// pinned or owned host memory; a stream_ref or none; 1% cancelled) from 32 coroutines on a four-thread
// io_context, every completed transfer checked against a host model of device memory.
//
// Sim: about 30 s on two cores (a 25th of the ops under ThreadSanitizer, a tenth under AddressSanitizer,
// which slow it 5-15x and 2-3x: enough ops for every kind, size class and cancellation to meet the other
// threads many times over, in a few minutes of CI). On a GPU the same million ops, cut off after 90 s
// if the device is slower than expected (then at least 100,000 must have completed; 1,000 under
// compute-sanitizer). FERRY_STRESS_OPS overrides the count. Then a tenth as many again with the resident
// copier on.
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "ferry/engine.hpp"
#include "tests/support/compute_sanitizer.hpp"
#include "tests/stress/random_workload.hpp"
#include "tests/support/device_fixture.hpp"

namespace asio = boost::asio;
using namespace ferry;

namespace {

std::size_t ops_to_run() {
  if (const char* text = std::getenv("FERRY_STRESS_OPS"); text && *text) return std::stoull(text);
#if defined(__SANITIZE_THREAD__)
  return 40000;
#elif defined(__SANITIZE_ADDRESS__)
  return 100000;
#else
  return 1000000;
#endif
}

// The GPU run's time limit; the sim run has none (its op count bounds it).
std::chrono::steady_clock::time_point deadline() {
  return ferry::testing::on_sim() ? std::chrono::steady_clock::time_point::max()
                                  : std::chrono::steady_clock::now() + std::chrono::seconds(90);
}

// What one run of the workload left: its totals, and the options it ran with (workers, deadline).
struct workload_run {
  stress::workload_totals totals;
  stress::workload_options options;
};

// Every thread's stack, by gdb or cuda-gdb where one is installed: the driver call or lock each thread
// waits in. The process aborts next anyway: cuda-gdb was seen to print the stacks and then leave the
// process faulting as it detached, or not return (it gets a minute, then is killed, and the process is
// continued in case it was left stopped).
void print_thread_stacks() {
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY);
  const std::string pid = std::to_string(getpid());
  const std::string command =
      "debugger=$(command -v gdb || command -v cuda-gdb || command -v /usr/local/cuda/bin/cuda-gdb) || exit 127; "
      "timeout -k 5 60 $debugger -p " + pid + " -batch -nx -ex 'thread apply all bt 24' 1>&2; status=$?; "
      "kill -CONT " + pid + "; exit $status";
  const int status = std::system(command.c_str());
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
    std::cerr << "stress: no thread stacks (no gdb or cuda-gdb)\n";
  } else if (status != 0) {
    std::cerr << "stress: the debugger ended with status " << status << "\n";
  }
}

// Waits for the workload's workers. A run in which no op completes for `limit` names the ops it still
// waits for, prints every thread's stack and aborts: an op whose handler never runs would otherwise
// hang the test until its time limit with nothing said.
void watch_for_stalls(const stress::workload_totals& totals, std::size_t workers, std::chrono::seconds limit) {
  auto progress = [&] { return totals.ops + totals.read_backs; };
  std::size_t seen = progress();
  auto since = std::chrono::steady_clock::now();
  while (totals.workers_done < workers) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const auto now = std::chrono::steady_clock::now();
    if (const std::size_t made = progress(); made != seen) {
      seen = made;
      since = now;
    } else if (now - since > limit) {
      const std::vector<std::string> waiting = totals.outstanding();
      std::cerr << "stress: no op completed for " << limit.count() << " s; " << totals.workers_started << " of "
                << workers << " workers past their set-up; " << waiting.size() << " ops initiated and not completed:\n";
      for (const std::string& description : waiting) std::cerr << "  " << description << "\n";
      print_thread_stacks();
      std::abort();
    }
  }
}

// `ops` random operations from the workload's coroutines on a four-thread io_context, by an engine with
// `settings`; `inspect` looks at the engine once every worker is done, before it is destroyed.
template <class Inspect>
void run_workload(workload_run& run, std::size_t ops, std::uint64_t seed, const engine_options& settings,
                  Inspect inspect) {
  std::vector<stream> streams;
  for (int i = 0; i < 4; ++i) streams.push_back(stream::create());
  asio::io_context io(4);
  run.options.max_ops = ops;
  run.options.seed = seed;
  run.options.deadline = deadline();
  for (const stream& s : streams) run.options.streams.push_back(s);
  engine gpu{io.get_executor(), settings};
  stress::spawn_workload(gpu, io.get_executor(), run.options, run.totals);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back([&] { io.run(); });
  watch_for_stalls(run.totals, run.options.workers, std::chrono::seconds(60));
  for (auto& thread : threads) thread.join();
  inspect(gpu);
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(random_operations, ferry::testing::device_fixture)

BOOST_AUTO_TEST_CASE(a_million_random_operations_from_four_threads_all_match_the_model) {
  const std::size_t ops = ops_to_run();
  workload_run run;
  const auto start = std::chrono::steady_clock::now();
  run_workload(run, ops, 20261129, engine_options{}, [](engine& gpu) {
    const auto plans = gpu.plan_counts();
    std::cout << "plans: pinned " << plans.pinned << ", staged " << plans.staged << ", registered " << plans.registered
              << ", batched " << plans.batched << "; engine holds " << gpu.pinned_bytes() << " pinned bytes\n";
    BOOST_TEST(plans.staged > 0u);
    // The staging pool (by default 8 chunks of 8 MiB) at least, once anything was staged.
    BOOST_TEST(gpu.pinned_bytes() >= std::size_t{32} << 20);
  });
  const stress::workload_totals& totals = run.totals;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "stress: " << totals.ops << " ops (" << totals.bytes_moved << " bytes moved), " << totals.bytes_verified
            << " bytes verified (" << totals.read_backs << " read-backs), " << totals.block_lists
            << " block lists, " << totals.cancel_requests
            << " cancellations requested, " << totals.aborted << " aborted, " << totals.failures << " failures, in "
            << seconds << " s\n";
  for (const std::string& message : totals.failure_messages()) std::cout << "failure: " << message << "\n";
  BOOST_TEST(totals.failures == 0u);
  BOOST_TEST(totals.workers_done == run.options.workers);
  if (std::chrono::steady_clock::now() < run.options.deadline) {
    BOOST_TEST(totals.ops == ops);
  } else {
    std::cout << "stress: stopped by the 90 s limit after " << totals.ops << " of " << ops << " ops\n";
    BOOST_TEST(totals.ops >= (ferry::testing::under_compute_sanitizer() ? 1000u : 100000u));
  }
  BOOST_TEST(totals.cancel_requests > 0u);
  BOOST_TEST(totals.block_lists > 0u);
  BOOST_TEST(totals.bytes_verified >= totals.bytes_moved / 2);
}

// A tenth of the ops again, with the resident copier on: its one-at-a-time small copies among the
// batched, staged and streamed ones and pageable block lists staged chunk by chunk (the staging chunks are
// small here), cancellations included, and the workers' allocations and frees among them, which wait for
// the kernel to stop under compute-sanitizer (frees always: the poller, or the copier's idle watch, stops
// it once nothing is posted).
BOOST_AUTO_TEST_CASE(random_operations_with_the_resident_copier_on_all_match_the_model) {
  const std::size_t ops = std::max<std::size_t>(1000, ops_to_run() / 10);
  engine_options resident;
  resident.resident_copies = true;
  // Small chunks: pageable block lists of more than 32 KiB are staged chunk by chunk.
  resident.staging_chunk_bytes = std::size_t{32} << 10;
  workload_run run;
  run_workload(run, ops, 20261202, resident, [](engine& gpu) {
    const auto plans = gpu.plan_counts();
    std::cout << "plans: resident " << plans.resident << ", pinned " << plans.pinned << ", batched " << plans.batched
              << ", staged " << plans.staged << "\n";
    BOOST_TEST(plans.resident > 0u);
  });
  const stress::workload_totals& totals = run.totals;
  for (const std::string& message : totals.failure_messages()) std::cout << "failure: " << message << "\n";
  BOOST_TEST(totals.failures == 0u);
  BOOST_TEST(totals.workers_done == run.options.workers);
  if (std::chrono::steady_clock::now() < run.options.deadline) BOOST_TEST(totals.ops == ops);
  BOOST_TEST(totals.bytes_verified >= totals.bytes_moved / 2);
}

BOOST_AUTO_TEST_SUITE_END()
