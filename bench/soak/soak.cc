// Soak: 1,000 coroutines doing random verified operations (tests/stress/random_workload) for a while
// (300 s on a GPU, 10 s on sim), while a sampler reads, every second, the process's resident memory, the
// page-locked memory the engine holds (staging pool and registrations) and the device memory in use
// (cuMemGetInfo). After the warm-up (the first fifth of the run, at least 3 s) each must stay flat: the median of the
// last third of the samples may exceed the median of the first third by at most a stated bound. Medians,
// because a 64 MiB op in flight lifts a single sample. Exits 1 when anything grew past its bound or any
// verification failed.
//
// Records (the benchmarks' JSON, <machine>-soak.json): each figure of the late third (the "ferry"
// column) beside the same figure of the early third (the "raw" column, the baseline): ratio = early /
// late, so a ratio under 1 means growth (for soak_op_time_us, a slowdown).
//
// usage: soak [--out DIR] [--machine NAME] [--seconds N] [--workers N] (soak --help)
// FERRY_SOAK_SECONDS=N sets the duration too (the flag wins); 0 skips the soak (exit 0, no records),
// for bundle runs that leave it out.
#include <boost/asio/io_context.hpp>

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/harness/comparison.hpp"
#include "bench/harness/options.hpp"
#include "bench/harness/program.hpp"
#include "ferry/backend.hpp"
#include "ferry/engine.hpp"
#include "ferry/marshal.hpp"
#include "tests/stress/random_workload.hpp"
#include "tools/command_line/command_line.hpp"

namespace asio = boost::asio;
using namespace ferry;

namespace {

constexpr double mebibyte = 1024.0 * 1024.0;

struct soak_settings {
  bench::options output;
  double seconds = 0;
  std::size_t workers = 1000;
};

soak_settings parse(int argc, char** argv) {
  soak_settings settings;
  settings.seconds = active_backend() == backend::sim ? 10 : 300;
  if (const char* text = std::getenv("FERRY_SOAK_SECONDS"); text && *text) settings.seconds = std::atof(text);
  tools::command_line command(bench::program_name(argv[0]),
                              "1,000 coroutines of random verified operations while the process's memory is sampled\n"
                              "every second; exits 1 when anything grew past its bound (report: <out>/<machine>-soak).\n"
                              "FERRY_SOAK_SECONDS sets the duration too (the flag wins); 0 skips the soak.");
  bench::add_report_flags(command, settings.output);
  command.number("seconds", settings.seconds, "how long the workload runs")
      .number("workers", settings.workers, "coroutines running the workload");
  command.parse_or_exit(argc, argv, std::cout);
  return settings;
}

std::size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

struct sample {
  double seconds;
  double rss_mib, pinned_mib, device_used_mib;
  std::size_t ops;
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n == 0 ? 0 : n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// One watched figure: early and late medians after the warm-up, and its bound on growth.
struct watched {
  std::string name;
  double (*of)(const sample&);
  double bound_mib;
};

// Runs the workload on four io threads while this thread samples, once a second, until the workers are
// done.
std::vector<sample> run_sampled(const stress::workload_options& options, stress::workload_totals& totals,
                                std::chrono::steady_clock::time_point start) {
  std::vector<sample> samples;
  asio::io_context io(4);
  engine gpu{io.get_executor()};
  stress::spawn_workload(gpu, io.get_executor(), options, totals);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back([&] { io.run(); });
  auto next = start;
  while (totals.workers_done < options.workers) {
    next += std::chrono::seconds(1);
    while (totals.workers_done < options.workers && std::chrono::steady_clock::now() < next) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (totals.workers_done == options.workers) break;
    const mem_info memory = get_mem_info();
    const sample s{std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                   resident_bytes() / mebibyte, gpu.pinned_bytes() / mebibyte,
                   static_cast<double>(memory.total - memory.free) / mebibyte, totals.ops.load()};
    samples.push_back(s);
    std::fprintf(stderr, "  t=%5.1fs rss %8.1f MiB, pinned %7.1f MiB, device used %9.1f MiB, %zu ops, %zu failures\n",
                 s.seconds, s.rss_mib, s.pinned_mib, s.device_used_mib, s.ops, totals.failures.load());
  }
  for (auto& thread : threads) thread.join();
  return samples;
}

// The samples after the warm-up (a fifth of the run, at least 3 s), judged by their first and last thirds.
class steady_state {
 public:
  steady_state(const std::vector<sample>& samples, double seconds) {
    const double warm_up = std::max(3.0, seconds / 5);
    for (const sample& s : samples) {
      if (s.seconds >= warm_up) steady_.push_back(s);
    }
    third_ = std::max<std::size_t>(1, steady_.size() / 3);
  }
  bool enough() const { return steady_.size() >= 2; }
  std::size_t size() const { return steady_.size(); }
  // The median of a figure over the first or the last third.
  double window(bool late, double (*of)(const sample&)) const {
    std::vector<double> values;
    for (std::size_t i = 0; i < third_ && i < steady_.size(); ++i) values.push_back(of(steady_[late ? steady_.size() - 1 - i : i]));
    return median(values);
  }
  // Time per op over the first or the last third: the engine must not slow down as it runs.
  double op_time_us(bool late) const {
    if (steady_.size() < 2 * third_ + 1) return 0.0;
    const sample& first = late ? steady_[steady_.size() - 1 - third_] : steady_.front();
    const sample& last = late ? steady_.back() : steady_[third_];
    const std::size_t ops = last.ops - first.ops;
    return ops ? (last.seconds - first.seconds) * 1e6 / static_cast<double>(ops) : 0.0;
  }

 private:
  std::vector<sample> steady_;
  std::size_t third_ = 1;
};

// Prints each watched figure's growth and adds its record; false when one grew past its bound or there
// were too few samples to tell.
bool judge_memory(const steady_state& steady, std::size_t big_max_bytes, std::vector<bench::result>& results) {
  const std::vector<watched> figures = {
      {"soak_rss_MiB", [](const sample& s) { return s.rss_mib; }, 32},
      // Registrations come and go with the big worker's pageable buffer (twice its largest op).
      {"soak_pinned_MiB", [](const sample& s) { return s.pinned_mib; }, 2.0 * big_max_bytes / mebibyte},
      {"soak_device_used_MiB", [](const sample& s) { return s.device_used_mib; }, 16},
  };
  const bool enough = steady.enough();
  bool flat = enough;
  if (!enough) std::cout << "soak: too few samples after the warm-up (" << steady.size() << "); run longer\n";
  for (const watched& figure : figures) {
    const double early = enough ? steady.window(false, figure.of) : 0, late = enough ? steady.window(true, figure.of) : 0;
    const bool ok = late - early <= figure.bound_mib;
    flat = flat && ok;
    std::printf("%-22s early %9.1f MiB, late %9.1f MiB, growth %8.1f MiB (bound %.0f MiB): %s\n", figure.name.c_str(),
                early, late, late - early, figure.bound_mib, ok ? "flat" : "GREW");
    results.push_back({figure.name, 0, late, early, static_cast<int>(steady.size()), 1, "MiB"});
  }
  return flat;
}

stress::workload_options workload(const soak_settings& settings, const std::vector<stream>& streams,
                                  std::chrono::steady_clock::time_point start) {
  stress::workload_options options;
  options.workers = settings.workers;
  options.small_max_bytes = std::size_t{64} << 10;
  options.big_every_ops = 20000;
  options.max_ops = 0;
  options.seed = 300;
  for (const stream& s : streams) options.streams.push_back(s);
  options.deadline = start + std::chrono::milliseconds(static_cast<long long>(settings.seconds * 1000));
  return options;
}

}  // namespace

int main(int argc, char** argv) try {
  // A fixed mmap threshold: glibc otherwise raises it to the size of each large block freed, and then
  // keeps later large blocks (the 64 MiB ops' buffers) in its heaps, where the resident size shows
  // memory the allocator caches rather than memory anything holds.
  mallopt(M_MMAP_THRESHOLD, 256 << 10);
  const soak_settings settings = parse(argc, argv);
  const std::string backend_name(to_string(active_backend()));
  if (settings.seconds == 0) {
    std::cout << "soak: skipped (FERRY_SOAK_SECONDS=0 or --seconds 0)\n";
    return 0;
  }
  const bench::primary_device on;
  std::cerr << "ferry soak on the " << backend_name << " backend: " << on.gpu.name() << ", " << settings.workers
            << " coroutines, " << settings.seconds << " s\n";

  std::vector<stream> streams;
  for (int i = 0; i < 8; ++i) streams.push_back(stream::create());
  const auto start = std::chrono::steady_clock::now();
  const stress::workload_options options = workload(settings, streams, start);
  stress::workload_totals totals;
  const std::vector<sample> samples = run_sampled(options, totals, start);

  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "soak: " << totals.ops << " ops (" << totals.bytes_moved << " bytes moved), " << totals.bytes_verified
            << " bytes verified (" << totals.read_backs << " read-backs), " << totals.cancel_requests
            << " cancellations requested, " << totals.aborted << " aborted, " << totals.failures << " failures, "
            << options.workers << " coroutines, " << elapsed << " s\n";
  for (const std::string& message : totals.failure_messages()) std::cout << "failure: " << message << "\n";

  const steady_state steady(samples, settings.seconds);
  std::vector<bench::result> results;
  const bool flat = judge_memory(steady, options.big_max_bytes, results);
  const int count = static_cast<int>(steady.size());
  results.push_back({"soak_op_time_us", 0, steady.op_time_us(true), steady.op_time_us(false), count, 1, "us per op"});
  results.push_back({"soak_ops_verified", 0, double(totals.ops), double(totals.ops), 1, 1, "ops"});
  results.push_back({"soak_bytes_verified_GB", 0, totals.bytes_verified / 1e9, totals.bytes_verified / 1e9, 1, 1, "GB"});

  const std::string machine = bench::machine_name(settings.output, backend_name, on.gpu.name());
  bench::write_report(results, settings.output.out_dir, machine + "-soak", on.gpu.name(), backend_name);
  const bool verified = totals.failures == 0 && totals.workers_done == options.workers && totals.ops > 0;
  std::cout << "soak: " << (verified ? "every op verified" : "VERIFICATION FAILED") << "; "
            << (flat ? "memory flat after the warm-up" : "memory NOT flat") << "\n";
  return verified && flat ? 0 : 1;
} catch (const std::exception& error) {
  std::cerr << "soak: " << error.what() << "\n";
  return 1;
}
