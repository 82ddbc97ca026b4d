// Shutdown under load, at random points: random verified operations (random_workload) run from a
// two-thread io_context, and at a random moment the io_context is stopped and the engine destroyed
// with work in flight (in this process), or the process exits (a child: this binary run again with
// --run_test=shutdown_child). No crash, no hang, and no driver call once exit has begun (the sim
// reports such calls on stderr; the child runs with FERRY_SIM_EXIT_GRACE_MS so that a late one is seen).
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ferry/engine.hpp"
#include "tests/support/compute_sanitizer.hpp"
#include "tests/stress/random_workload.hpp"
#include "tests/support/device_fixture.hpp"

extern char** environ;

namespace asio = boost::asio;
using namespace ferry;

namespace {

stress::workload_options load_options(std::uint64_t seed, const std::vector<stream>& streams) {
  stress::workload_options options;
  options.workers = 16;
  options.big_max_bytes = std::size_t{16} << 20;
  options.big_every_ops = 200;
  options.max_ops = 0;  // until stopped
  options.cancel_probability = 0.05;
  options.seed = seed;
  for (const stream& s : streams) options.streams.push_back(s);
  return options;
}

std::vector<stream> two_streams() {
  std::vector<stream> streams;
  streams.push_back(stream::create());
  streams.push_back(stream::create());
  return streams;
}

// How the child ends (FERRY_SHUTDOWN_MODE).
const char* const exit_modes[] = {
    "stop_then_exit",       // io_context stopped and its threads joined, engine alive with work in flight
    "destroy_then_exit",    // the same, then the engine destroyed, then exit
    "exit_under_load",      // exit() on the main thread while the io_context's threads run the workload
    "exit_from_a_handler",  // exit() inside a handler, on one of the io_context's threads
};
constexpr int mode_count = 4;

// Each exit mode three times; twice under a sanitizer, which slows each round's engine and load 5-15x.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr int rounds = 2 * mode_count;
#else
constexpr int rounds = 3 * mode_count;
#endif

// Waits until every worker is issuing ops and some have completed. A slow machine (a sanitizer, other
// builds beside it) only makes the wait longer; a wait that sees no worker start and no op complete for
// 30 s is a stall. Returns what it saw when it gave up; empty once the load is there.
std::string wait_for_load(const stress::workload_totals& totals, std::size_t workers) {
  using clock = std::chrono::steady_clock;
  std::size_t started = totals.workers_started, ops = totals.ops;
  auto last_progress = clock::now();
  while (started < workers || ops < 100) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const std::size_t started_now = totals.workers_started, ops_now = totals.ops;
    if (started_now != started || ops_now != ops) {
      started = started_now;
      ops = ops_now;
      last_progress = clock::now();
    } else if (clock::now() - last_progress > std::chrono::seconds(30)) {
      return "no progress for 30 s: " + std::to_string(started) + " of " + std::to_string(workers) +
             " workers started, " + std::to_string(ops) + " ops completed, " + std::to_string(totals.failures) +
             " failures";
    }
  }
  return {};
}

// The children exit with device memory allocated on purpose, which memcheck's leak check would report
// (it follows child processes); the plain run on the GPU covers the case.
auto not_under_compute_sanitizer() {
  return boost::unit_test::precondition([](boost::unit_test::test_unit_id) {
    boost::test_tools::assertion_result result(!ferry::testing::under_compute_sanitizer());
    result.message() << "its child processes exit with memory held on purpose: not under compute-sanitizer";
    return result;
  });
}

struct child_result {
  int status = 0;
  bool hung = false;
  std::string output;
};

// Runs this binary again as the child, with `mode` and `seed`; kills it after 60 s.
child_result run_child(const std::string& mode, int seed) {
  std::vector<std::string> environment;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    // The child must not write the parent's JUnit report (BOOST_TEST_LOGGER names the file).
    if (entry.rfind("BOOST_TEST_", 0) == 0 || entry.rfind("XML_OUTPUT_FILE=", 0) == 0) continue;
    if (entry.rfind("ASAN_OPTIONS=", 0) == 0 || entry.rfind("TSAN_OPTIONS=", 0) == 0) continue;
    environment.push_back(entry);
  }
  environment.push_back("FERRY_SHUTDOWN_MODE=" + mode);
  environment.push_back("FERRY_SHUTDOWN_SEED=" + std::to_string(seed));
  environment.push_back("FERRY_SIM_EXIT_GRACE_MS=100");
  // The child exits with its engine, buffers and threads alive on purpose: leaks are the design.
  environment.push_back("ASAN_OPTIONS=detect_leaks=0");
  // The same for threads: the io threads are still alive when the child exits (the atexit hook stops
  // them but does not join them), which TSan reports as a thread leak and turns into exit status 66.
  environment.push_back("TSAN_OPTIONS=report_thread_leaks=0");
  std::vector<char*> envp;
  for (std::string& entry : environment) envp.push_back(entry.data());
  envp.push_back(nullptr);

  char output_path[] = "/tmp/ferry-shutdown-child.XXXXXX";
  const int output = ::mkstemp(output_path);
  BOOST_REQUIRE(output >= 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, output, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, output, STDERR_FILENO);
  std::string self = "/proc/self/exe", run_test = "--run_test=shutdown_child", quiet = "--log_level=nothing",
              no_report = "--report_level=no";
  char* argv[] = {self.data(), run_test.data(), quiet.data(), no_report.data(), nullptr};
  pid_t child = 0;
  const int spawned = ::posix_spawn(&child, "/proc/self/exe", &actions, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  BOOST_REQUIRE_MESSAGE(spawned == 0, "posix_spawn: " << std::strerror(spawned));

  child_result result;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (::waitpid(child, &result.status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      result.hung = true;
      ::kill(child, SIGKILL);
      ::waitpid(child, &result.status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::close(output);
  std::ifstream in(output_path);
  std::ostringstream text;
  text << in.rdbuf();
  result.output = text.str();
  ::unlink(output_path);
  return result;
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(shutdown_under_load, ferry::testing::device_fixture)

BOOST_AUTO_TEST_CASE(stopping_the_io_context_and_destroying_the_engine_at_random_points_is_clean) {
  std::mt19937 random(4242);
  std::size_t total_ops = 0;
  for (int round = 0; round < rounds; ++round) {
    const std::vector<stream> streams = two_streams();
    stress::workload_totals totals;
    const auto options = load_options(round + 1, streams);
    {
      asio::io_context io(2);
      auto gpu = std::make_unique<engine>(io.get_executor());
      stress::spawn_workload(*gpu, io.get_executor(), options, totals);
      std::thread first([&] { io.run(); }), second([&] { io.run(); });
      const std::string stalled = wait_for_load(totals, options.workers);
      BOOST_TEST(stalled.empty(), "round " << round << ": " << stalled);
      std::this_thread::sleep_for(std::chrono::microseconds(random() % 50000));
      io.stop();
      first.join();
      second.join();
      const auto destroying = std::chrono::steady_clock::now();
      gpu.reset();  // work in flight: it waits for the GPU, then posts completions nobody will run
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - destroying).count();
      BOOST_TEST(seconds < 10.0, "round " << round << ": destroying the engine took " << seconds << " s");
    }  // the io_context goes, and the workers' coroutines (with their buffers) with it
    BOOST_TEST(totals.failures == 0u, "round " << round << ": " << (totals.failure_messages().empty() ? "" : totals.failure_messages()[0]));
    total_ops += totals.ops;
  }
  std::cout << "shutdown: " << rounds << " rounds stopped at random points, " << total_ops << " ops verified before\n";
  // device_fixture checks, on sim, that nothing was left behind.
}

BOOST_AUTO_TEST_CASE(exiting_the_process_at_random_points_under_load_is_clean, *not_under_compute_sanitizer()) {
  std::mt19937 random(777);
  for (int round = 0; round < rounds; ++round) {
    const std::string mode = exit_modes[round % mode_count];
    const child_result child = run_child(mode, static_cast<int>(random() % 100000));
    const std::string where = "round " + std::to_string(round) + " (" + mode + "): ";
    BOOST_TEST(!child.hung, where << "the child hung; its output:\n" << child.output);
    BOOST_TEST((WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0),
               where << "the child ended with status " << child.status << "; its output:\n" << child.output);
    BOOST_TEST(child.output.find("called after the driver was torn down") == std::string::npos,
               where << "a driver call came after exit began:\n" << child.output);
    BOOST_TEST(child.output.find("child: exiting") != std::string::npos, where << "the child did not get to exit:\n"
                                                                              << child.output);
    std::istringstream lines(child.output);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("child: exiting", 0) == 0) std::cout << where << line << "\n";
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

// The child: load from a two-thread io_context, then, after a random 0-100 ms, the exit its mode
// names. Disabled: only run_child runs it (--run_test enables it). Where exit() comes while the
// io_context's threads run, the program does what a well-behaved one does: an atexit hook, registered
// after the engine (so run before the engine's own), stops the io_context and joins its other threads.
BOOST_AUTO_TEST_SUITE(shutdown_child, *boost::unit_test::disabled())

BOOST_AUTO_TEST_CASE(load_then_exit) {
  const char* mode_text = std::getenv("FERRY_SHUTDOWN_MODE");
  const char* seed_text = std::getenv("FERRY_SHUTDOWN_SEED");
  BOOST_REQUIRE(mode_text && seed_text);
  const std::string mode = mode_text;
  const int seed = std::atoi(seed_text);
  // Everything is leaked: the process exits with it alive, as a program that exits mid-work does.
  auto* primary = new context(context::primary(device::get(0)));
  context_guard current(*primary);
  auto* streams = new std::vector<stream>(two_streams());
  auto* io = new asio::io_context(2);
  auto* gpu = new engine(io->get_executor());
  auto* totals = new stress::workload_totals;
  stress::spawn_workload(*gpu, io->get_executor(), load_options(seed, *streams), *totals);
  // The threads say when they have left run(): the atexit hook waits for that rather than joining them
  // (joining threads from inside exit() hung under AddressSanitizer).
  static std::atomic<int> in_run{2};
  static thread_local bool io_thread = false;
  auto run = [io] {
    io_thread = true;
    io->run();
    --in_run;
  };
  auto* first = new std::thread(run);
  auto* second = new std::thread(run);
  static asio::io_context* running = io;
  const std::string stalled = wait_for_load(*totals, 16);
  BOOST_REQUIRE_MESSAGE(stalled.empty(), "child: " << stalled);
  std::this_thread::sleep_for(std::chrono::microseconds(std::mt19937(seed)() % 100000));
  auto say = [mode, totals] {
    std::printf("child: exiting (%s) after %zu ops, %zu failures\n", mode.c_str(), totals->ops.load(),
                totals->failures.load());
    std::fflush(stdout);
  };
  if (mode == "stop_then_exit" || mode == "destroy_then_exit") {
    io->stop();
    first->join();
    second->join();
    if (mode == "destroy_then_exit") delete gpu;
    say();
    std::exit(totals->failures == 0 ? 0 : 3);
  }
  std::atexit([] {
    running->stop();
    const int self = io_thread ? 1 : 0;  // exit() on an io thread: that one is still inside run()
    while (in_run.load() > self) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  if (mode == "exit_under_load") {
    say();
    std::exit(totals->failures == 0 ? 0 : 3);
  }
  asio::post(*io, [say, totals] {
    say();
    std::exit(totals->failures == 0 ? 0 : 3);
  });
  std::this_thread::sleep_for(std::chrono::seconds(50));  // the handler exits the process meanwhile
  BOOST_FAIL("the exiting handler did not run");
}

BOOST_AUTO_TEST_SUITE_END()
