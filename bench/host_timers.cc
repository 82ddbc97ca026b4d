// What the host's timers and wake-ups cost on this machine (a diagnostic beside the benchmarks; it
// prints a table and writes no result file): how late a short timed wait on a condition variable wakes,
// and how long a thread parked on a condition variable takes to run after notify_one, after a short
// and after a long idle time. The completion bridge's backoff and every hop to a sleeping io thread pay
// these.
#include <sys/prctl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/harness/options.hpp"
#include "bench/harness/statistics.hpp"

using clock_type = std::chrono::steady_clock;
using ferry::bench::percentile;

namespace {

// Microseconds past the deadline at which wait_until returns, for a wait of `wait`.
std::vector<double> timed_wait_overshoot(std::chrono::microseconds wait, int samples) {
  ::prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);  // as the completion bridge sets it
  std::mutex mutex;
  std::condition_variable never;
  std::vector<double> late;
  for (int i = 0; i < samples; ++i) {
    std::unique_lock lock(mutex);
    const auto deadline = clock_type::now() + wait;
    never.wait_until(lock, deadline, [] { return false; });
    late.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - deadline).count());
  }
  return late;
}

// Microseconds from notify_one to the parked thread running, after the thread has been idle for `idle`.
std::vector<double> wake_latency(std::chrono::microseconds idle, int samples) {
  std::mutex mutex;
  std::condition_variable wake;
  std::atomic<long long> notified_at{0};
  bool go = false, stop = false;
  std::vector<double> latency;
  std::atomic<int> seen{0};
  std::thread sleeper([&] {
    std::unique_lock lock(mutex);
    while (true) {
      wake.wait(lock, [&] { return go || stop; });
      if (stop) return;
      const long long now = clock_type::now().time_since_epoch().count();
      latency.push_back((now - notified_at.load()) / 1000.0);
      go = false;
      seen.fetch_add(1);
    }
  });
  for (int i = 0; i < samples; ++i) {
    std::this_thread::sleep_for(idle);
    {
      std::lock_guard lock(mutex);
      go = true;
      notified_at = clock_type::now().time_since_epoch().count();
    }
    wake.notify_one();
    while (seen.load() <= i) {
    }
  }
  {
    std::lock_guard lock(mutex);
    stop = true;
  }
  wake.notify_one();
  sleeper.join();
  return latency;
}

}  // namespace

int main(int argc, char** argv) {
  ferry::bench::parse_no_flags(argc, argv,
                               "What the host's timed waits and wake-ups cost on this machine (a diagnostic: prints a\n"
                               "table, writes no report).");
  std::cout << "| host timer or wake-up | p50 us | p99 us |\n|---|---:|---:|\n";
  auto row = [](const std::string& name, const std::vector<double>& values) {
    std::cout << "| " << name << " | " << percentile(values, 0.5) << " | " << percentile(values, 0.99) << " |\n";
  };
  for (int wait : {2, 10, 50, 200}) {
    row("condition variable wait_until " + std::to_string(wait) + " us: late by",
        timed_wait_overshoot(std::chrono::microseconds(wait), 400));
  }
  for (int idle : {20, 200, 2000}) {
    row("notify_one to parked thread running, idle " + std::to_string(idle) + " us",
        wake_latency(std::chrono::microseconds(idle), 300));
  }
  return 0;
}
