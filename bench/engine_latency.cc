// The engine's completion path against the raw driver, same process: a co_awaited 4 KiB poke from
// initiation to coroutine resumption (per completion policy, with the poller writing the completion
// flags, given no stream to the resident copier, and each after 2 ms of the caller's own work, with
// the poller's CPU meanwhile), the same poke waited on through use_future by a thread that runs no
// io_context, the poller's CPU use over an idle second, the initiating call's cost (each way of writing
// the flags, and posted to the resident copier), and 1024 concurrent 4 KiB copies (pokes by each batch
// path, and peeks), with where their time went on the io thread (printed, not reported).
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/harness/comparison.hpp"
#include "bench/harness/driver_check.hpp"
#include "bench/harness/io_thread.hpp"
#include "bench/harness/program.hpp"
#include "bench/harness/statistics.hpp"
#include "engine/driver/driver_table.hpp"
#include "ferry/engine.hpp"
#include "ferry/ferry.hpp"

namespace asio = boost::asio;
using namespace ferry;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr std::size_t small_bytes = 4096;
constexpr int latency_samples = 2000;
constexpr int concurrent_ops = 1024;

using bench::check;
using bench::percentile;

const char* policy_name(completion_policy policy) {
  switch (policy) {
    case completion_policy::poll: return "poll";
    case completion_policy::host_callback: return "host_callback";
    case completion_policy::blocking_sync: return "blocking_sync";
  }
  return "?";
}

struct setup {
  const detail::driver_table& raw = detail::driver();
  pinned_buffer<std::uint8_t> source = pinned_buffer<std::uint8_t>::allocate(small_bytes * concurrent_ops);
  pinned_buffer<std::uint8_t> back = pinned_buffer<std::uint8_t>::allocate(small_bytes * concurrent_ops);
  device_buffer<std::uint8_t> destination = device_buffer<std::uint8_t>::allocate(small_bytes * concurrent_ops);
  std::vector<std::uint8_t> expected;
  setup() {
    std::mt19937_64 generator(7);
    expected.resize(source.size());
    for (auto& byte : expected) byte = static_cast<std::uint8_t>(generator());
    std::memcpy(source.data(), expected.data(), expected.size());
  }
  void verify(std::size_t bytes) {
    std::vector<std::uint8_t> back(bytes, 0xA5);
    check(raw.cuMemcpyDtoH(back.data(), destination.get().get(), bytes), "cuMemcpyDtoH");
    if (std::memcmp(back.data(), expected.data(), bytes) != 0) throw std::runtime_error("data differs after the run");
    check(raw.cuMemsetD8(destination.get().get(), 0xA5, bytes), "cuMemsetD8");
  }
  // Peeks: the device holds the expected bytes (fill_device), which must arrive in `back`.
  void fill_device() {
    check(raw.cuMemcpyHtoD(destination.get().get(), expected.data(), expected.size()), "cuMemcpyHtoD");
    std::memset(back.data(), 0xA5, back.size());
  }
  void verify_back(std::size_t bytes) {
    if (std::memcmp(back.data(), expected.data(), bytes) != 0) throw std::runtime_error("peeked data differs");
    std::memset(back.data(), 0xA5, bytes);
  }
  stream raw_stream = stream::create();
};

// How round trips follow each other: back to back, or each after the caller's own work (a spin of
// `work_between` on the thread that starts it, as a service's handling of a request between transfers).
struct pacing {
  int samples = latency_samples;
  std::chrono::microseconds work_between{0};
  void work() const {
    if (work_between.count() == 0) return;
    const auto until = clock_type::now() + work_between;
    while (clock_type::now() < until) {
    }
  }
};

// Raw: cuMemcpyHtoDAsync, then how the policy's raw equivalent learns completion.
std::vector<double> raw_round_trips(setup& s, completion_policy policy, CUstream stream, const pacing& pace) {
  unsigned flags = CU_EVENT_DISABLE_TIMING | (policy == completion_policy::blocking_sync ? CU_EVENT_BLOCKING_SYNC : 0);
  CUevent event = nullptr;
  check(s.raw.cuEventCreate(&event, flags), "cuEventCreate");
  std::vector<double> samples;
  std::atomic<bool> fired{false};
  for (int i = 0; i < pace.samples; ++i) {
    pace.work();
    const auto start = clock_type::now();
    check(s.raw.cuMemcpyHtoDAsync(s.destination.get().get(), s.source.data(), small_bytes, stream), "cuMemcpyHtoDAsync");
    if (policy == completion_policy::host_callback) {
      fired = false;
      check(s.raw.cuLaunchHostFunc(stream, [](void* flag) { static_cast<std::atomic<bool>*>(flag)->store(true); }, &fired),
            "cuLaunchHostFunc");
      while (!fired.load()) std::this_thread::yield();
    } else {
      check(s.raw.cuEventRecord(event, stream), "cuEventRecord");
      if (policy == completion_policy::blocking_sync) {
        check(s.raw.cuEventSynchronize(event), "cuEventSynchronize");
      } else {
        CUresult status;
        while ((status = s.raw.cuEventQuery(event)) == CUDA_ERROR_NOT_READY) {}
        check(status, "cuEventQuery");
      }
    }
    samples.push_back(std::chrono::duration<double>(clock_type::now() - start).count());
  }
  s.raw.cuEventDestroy(event);
  return samples;
}

std::vector<double> ferry_coroutine_round_trips(setup& s, engine& gpu, asio::io_context& io, transfer_options on,
                                                const pacing& pace) {
  std::vector<double> samples;
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    for (int i = 0; i < pace.samples; ++i) {
      pace.work();  // on the io thread, between one op's handler and the next op
      const auto start = clock_type::now();
      co_await gpu.poke(pinned_span(host_ptr<const std::uint8_t>(s.source.get()), small_bytes), s.destination.get(), on,
                        asio::use_awaitable);
      samples.push_back(std::chrono::duration<double>(clock_type::now() - start).count());
    }
  }, asio::detached);
  io.restart();
  io.run();
  return samples;
}

// The same round trip from a thread that runs no io_context and waits on a std::future (the engine's
// io_context runs on a thread of its own meanwhile, as a service's would).
std::vector<double> ferry_future_round_trips(setup& s, engine& gpu, asio::io_context& io, transfer_options on,
                                             const pacing& pace) {
  std::vector<double> samples;
  io.restart();
  const bench::io_thread runs_io(io);
  for (int i = 0; i < pace.samples; ++i) {
    pace.work();
    const auto start = clock_type::now();
    gpu.poke(pinned_span(host_ptr<const std::uint8_t>(s.source.get()), small_bytes), s.destination.get(), on,
             asio::use_future)
        .get();
    samples.push_back(std::chrono::duration<double>(clock_type::now() - start).count());
  }
  return samples;
}

// One configuration of the round trip: the completion policy, the io thread's spin before it parks, who
// writes the completion flag, and who waits.
struct configuration {
  std::string suffix;
  completion_policy policy;
  std::optional<std::chrono::microseconds> executor_spin;  // empty: the engine's choice for this machine
  completion_mark marks = completion_mark::by_submitter;
  // engine_options::resident_copies, with the pokes given no stream (the resident copier takes only those).
  bool resident = false;
  bool waits_on_future = false;  // ferry_future_round_trips instead of a coroutine
  pacing pace{};
  bool fixed_spin = false;  // max_spin_window = spin_window: the poller's spin after activity never grows
};

// The round trip's p50 and p99, ferry's beside raw's, from blocks of samples after a warm-up of both
// paths, alternated; then, unless the io thread is all that differs, the poller's idle cost.
std::vector<bench::result> round_trip_rows(setup& s, const configuration& config) {
  asio::io_context io(1);
  engine_options engine_settings;
  engine_settings.policy = config.policy;
  engine_settings.executor_spin = config.executor_spin;
  engine_settings.marks = config.marks;
  engine_settings.resident_copies = config.resident;
  if (config.fixed_spin) {
    engine_settings.spin_window = std::chrono::milliseconds(1);
    engine_settings.max_spin_window = engine_settings.spin_window;
  }
  engine gpu{io.get_executor(), engine_settings};
  stream own_stream = stream::create();
  const transfer_options ferry_stream = config.resident ? transfer_options{} : transfer_options{own_stream};
  const auto ferry_round_trips = config.waits_on_future ? ferry_future_round_trips : ferry_coroutine_round_trips;
  const pacing warm_up = config.pace.work_between.count() == 0 ? config.pace : pacing{100, config.pace.work_between};
  ferry_round_trips(s, gpu, io, ferry_stream, warm_up);
  raw_round_trips(s, config.policy, s.raw_stream.get(), warm_up);
  std::vector<double> ferry_samples, raw_samples;
  double poller_seconds = 0, ferry_seconds = 0;
  for (int block = 0; block < 3; ++block) {
    std::fprintf(stderr, "\r  roundtrip_4KiB%-22s block %d/3", config.suffix.c_str(), block + 1);
    const double poller_before = gpu.poller_cpu_seconds();
    const auto ferry_start = clock_type::now();
    auto f = ferry_round_trips(s, gpu, io, ferry_stream, config.pace);
    ferry_seconds += std::chrono::duration<double>(clock_type::now() - ferry_start).count();
    poller_seconds += gpu.poller_cpu_seconds() - poller_before;
    s.verify(small_bytes);
    auto r = raw_round_trips(s, config.policy, s.raw_stream.get(), config.pace);
    s.verify(small_bytes);
    ferry_samples.insert(ferry_samples.end(), f.begin(), f.end());
    raw_samples.insert(raw_samples.end(), r.begin(), r.end());
  }
  std::fprintf(stderr, "\r%80s\r", "");
  std::vector<bench::result> results;
  for (auto [tail, p] : {std::pair{"_p50", 0.5}, std::pair{"_p99", 0.99}}) {
    results.push_back({"roundtrip_4KiB" + config.suffix + tail, 0, percentile(ferry_samples, p),
                       percentile(raw_samples, p), static_cast<int>(ferry_samples.size()), 1, ""});
  }
  if (config.pace.work_between.count() > 0) {
    // What staying awake through the pauses costs: the poller's CPU over ferry's blocks (the io thread is
    // the caller's, busy with its own work between ops either way). No raw counterpart: both columns hold
    // ferry's figure.
    const double percent = poller_seconds / ferry_seconds * 100.0;
    results.push_back({"poller_cpu" + config.suffix, 0, percent, percent, 1, 1, "% of a core"});
    return results;
  }
  // The poller's idle cost depends on neither the io thread nor who writes the marks.
  if (config.suffix == "_parked_io" || config.marks != completion_mark::by_submitter || config.resident ||
      config.waits_on_future) {
    return results;
  }

  // Idle cost: the poller's CPU time over one second with nothing pending. The raw driver has no poller,
  // so both columns hold ferry's figure (ratio 1); the target is the figure itself (< 2% for poll).
  const double before = gpu.poller_cpu_seconds();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const double idle_percent = (gpu.poller_cpu_seconds() - before) * 100.0;
  const char* policy = policy_name(config.policy);
  std::cout << "poller idle CPU (" << policy << "): " << idle_percent << " % of a core over 1 s\n";
  results.push_back({std::string("poller_idle_cpu_") + policy, 0, idle_percent, idle_percent, 1, 1, "% of a core"});
  return results;
}

// Per policy, and for poll once more with the io thread left to park between round trips
// (executor_spin = 0: each completion then pays the wake-up of a parked thread), once more with the
// poller writing the completion flags, once more with the pokes given no stream to the resident copier
// (the raw side's copy is on a stream of its own either way), and once more waited on through use_future
// (the raw side spins on its event, as for poll).
std::vector<bench::result> round_trips(setup& s) {
  const std::optional<std::chrono::microseconds> default_spin;
  const pacing every_2ms{250, std::chrono::milliseconds(2)};
  std::vector<bench::result> results;
  for (const configuration& config : {configuration{"", completion_policy::poll, default_spin},
                                      configuration{"_parked_io", completion_policy::poll, std::chrono::microseconds(0)},
                                      configuration{"_marks_by_poller", completion_policy::poll, default_spin,
                                                    completion_mark::by_poller},
                                      configuration{"_resident", completion_policy::poll, default_spin,
                                                    completion_mark::by_submitter, true},
                                      configuration{"_use_future", completion_policy::poll, default_spin,
                                                    completion_mark::by_submitter, false, true},
                                      configuration{"_host_callback", completion_policy::host_callback, default_spin},
                                      configuration{"_blocking_sync", completion_policy::blocking_sync, default_spin},
                                      configuration{"_every_2ms", completion_policy::poll, default_spin,
                                                    completion_mark::by_submitter, false, false, every_2ms},
                                      configuration{"_every_2ms_fixed_spin", completion_policy::poll, default_spin,
                                                    completion_mark::by_submitter, false, false, every_2ms, true}}) {
    const std::vector<bench::result> rows = round_trip_rows(s, config);
    results.insert(results.end(), rows.begin(), rows.end());
  }
  return results;
}

// `count` raw cuMemcpyHtoDAsync of 4 KiB (1024 unless given), one per piece of the source.
void raw_small_copies(setup& s, int count = concurrent_ops) {
  for (int i = 0; i < count; ++i) {
    check(s.raw.cuMemcpyHtoDAsync(s.destination.get().get() + i * small_bytes, s.source.data() + i * small_bytes,
                                  small_bytes, s.raw_stream.get()),
          "cuMemcpyHtoDAsync");
  }
}

// One way of initiating the pokes of submit_cost.
struct submit_way {
  const char* name;
  completion_mark marks;
  // Pokes per round, each side (the raw side makes as many calls).
  int round = concurrent_ops;
  // The pokes given no stream to the resident copier (engine_options::resident_copies), batching off so
  // that each is posted on its own; in rounds of 128, the copier's ring (256 entries) never fills, so
  // none falls back to the copy engine.
  bool resident = false;
};

// What initiating an operation costs the caller's thread: rounds of 4 KiB pokes from pinned memory (on
// one stream, or to the resident copier), initiated with a callback (the completions are not timed),
// against as many cuMemcpyHtoDAsync on a stream; with the completion flags written by the initiating
// call, or by the poller, or by the resident copier's kernel.
std::vector<bench::result> submit_cost(setup& s, const submit_way& way) {
  asio::io_context io(1);
  engine_options engine_settings;
  engine_settings.marks = way.marks;
  if (way.resident) {
    engine_settings.resident_copies = true;
    engine_settings.batch_window = std::chrono::microseconds(0);
  }
  engine gpu{io.get_executor(), engine_settings};
  stream ferry_stream = stream::create();
  const transfer_options where = way.resident ? transfer_options{} : transfer_options{ferry_stream};
  const int round = way.round;
  std::size_t submitted = 0;
  std::size_t completed = 0;
  std::size_t failed = 0;
  auto ferry_run = [&] {
    for (int i = 0; i < round; ++i) {
      gpu.poke(pinned_span(host_ptr<const std::uint8_t>(s.source.get() + i * small_bytes), small_bytes),
               s.destination.get() + i * small_bytes, where, [&](boost::system::error_code error, std::size_t) {
                 ++completed;
                 if (error) ++failed;
               });
    }
    submitted += static_cast<std::size_t>(round);
  };
  auto drain_and_verify = [&] {
    while (completed < submitted) {
      io.restart();
      io.run_one();
    }
    s.raw_stream.synchronize();
    if (failed != 0) throw std::runtime_error(std::string(way.name) + ": " + std::to_string(failed) + " pokes failed");
    // A poke the copier did not take went by the copy engine: the row would not measure the copier.
    if (way.resident && gpu.plan_counts().resident != submitted) {
      throw std::runtime_error(std::string(way.name) + ": the resident copier took " +
                               std::to_string(gpu.plan_counts().resident) + " of " + std::to_string(submitted) +
                               " pokes");
    }
    s.verify(small_bytes * static_cast<std::size_t>(round));
  };
  std::vector<bench::result> results = bench::compare_all(
      {{way.name, 0, static_cast<std::size_t>(round), 2, 7, ferry_run, [&] { raw_small_copies(s, round); },
        drain_and_verify}});
  gpu.wait_all(asio::use_future).get();
  return results;
}

std::vector<bench::result> submit_costs(setup& s) {
  std::vector<bench::result> results;
  for (const submit_way& way : {submit_way{"submit_4KiB", completion_mark::by_submitter},
                                submit_way{"submit_4KiB_marks_by_poller", completion_mark::by_poller},
                                submit_way{"submit_4KiB_rounds_of_128", completion_mark::by_submitter, 128},
                                submit_way{"submit_4KiB_resident", completion_mark::by_submitter, 128, true}}) {
    const std::vector<bench::result> rows = submit_cost(s, way);
    results.insert(results.end(), rows.begin(), rows.end());
  }
  return results;
}

void raw_small_peeks(setup& s) {
  for (int i = 0; i < concurrent_ops; ++i) {
    check(s.raw.cuMemcpyDtoHAsync(s.back.data() + i * small_bytes, s.destination.get().get() + i * small_bytes,
                                  small_bytes, s.raw_stream.get()),
          "cuMemcpyDtoHAsync");
  }
}

// Where a run of many_copies spent its time (microseconds per op): on the io thread's CPU, until the last
// coroutine reached its op, and in all. Printed per row as the median over its runs: the rows are bound
// by the io thread when its CPU time per op is near the time per op in all.
struct many_copies_times {
  std::vector<double> io_cpu;
  std::vector<double> last_reached;
  std::vector<double> wall;
  void print(const std::string& row) const {
    if (wall.empty()) return;
    std::cerr << "many_small: " << row << ": per op, io thread busy " << percentile(io_cpu, 0.5) * 1e6
              << " us, the last op reached after " << percentile(last_reached, 0.5) * 1e6 << " us, all done after "
              << percentile(wall, 0.5) * 1e6 << " us\n";
  }
};

double thread_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// 1024 concurrent 4 KiB copies from coroutines, all in flight at once: pokes from page-locked memory, or
// peeks into it.
void many_copies(setup& s, asio::io_context& io, engine& gpu, bool peeks, many_copies_times& times) {
  int done = 0;
  int reached = 0;
  const auto start = clock_type::now();
  clock_type::time_point last_reached_at;
  const double cpu_start = thread_cpu_seconds();
  for (int i = 0; i < concurrent_ops; ++i) {
    asio::co_spawn(io, [&, i]() -> asio::awaitable<void> {
      // The op's initiating call runs when the coroutine suspends on it: the next coroutine to start (or
      // the end of the run) comes after it.
      if (++reached == concurrent_ops) last_reached_at = clock_type::now();
      const std::size_t offset = static_cast<std::size_t>(i) * small_bytes;
      if (peeks) {
        co_await gpu.peek(device_ptr<const std::uint8_t>(s.destination.get() + offset),
                          pinned_span(host_ptr<std::uint8_t>(s.back.get() + offset), small_bytes), asio::use_awaitable);
      } else {
        co_await gpu.poke(pinned_span(host_ptr<const std::uint8_t>(s.source.get() + offset), small_bytes),
                          s.destination.get() + offset, asio::use_awaitable);
      }
      // The run ends with the last copy's handler, as the raw side's with its stream's synchronization:
      // not when run() would return by itself, after the engine's keep-awake task has lingered
      // (engine_options::executor_spin) and left the io_context without work.
      if (++done == concurrent_ops) io.stop();
    }, asio::detached);
  }
  io.restart();
  io.run();
  const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  if (done != concurrent_ops) throw std::runtime_error("many_small: not every copy completed");
  times.io_cpu.push_back((thread_cpu_seconds() - cpu_start) / concurrent_ops);
  times.last_reached.push_back(std::chrono::duration<double>(last_reached_at - start).count() / concurrent_ops);
  times.wall.push_back(seconds / concurrent_ops);
}

// What the coroutines of many_copies cost by themselves: each co_awaits asio::post instead of a copy
// (microseconds per coroutine, the median of `runs`). The floor under many_small's ferry side on this
// host: the same co_spawn, suspension and resumption on the io thread, without ferry.
double coroutine_floor_us(asio::io_context& io, int runs) {
  std::vector<double> per_op;
  for (int run = 0; run < runs; ++run) {
    int done = 0;
    const auto start = clock_type::now();
    for (int i = 0; i < concurrent_ops; ++i) {
      asio::co_spawn(io, [&]() -> asio::awaitable<void> {
        co_await asio::post(io, asio::use_awaitable);
        ++done;
      }, asio::detached);
    }
    io.restart();
    io.run();
    if (done != concurrent_ops) throw std::runtime_error("many_small: not every coroutine ended");
    per_op.push_back(std::chrono::duration<double>(clock_type::now() - start).count() / concurrent_ops);
  }
  return percentile(per_op, 0.5) * 1e6;
}

// One row of many_small: the engine's batches moved the way `path` says, against a raw loop of
// cuMemcpyHtoDAsync (pokes) or cuMemcpyDtoHAsync (peeks) then a sync.
bench::comparison_spec many_small_case(setup& s, asio::io_context& io, engine& gpu, std::string name, bool peeks,
                                       many_copies_times& times) {
  auto raw_run = [&s, peeks] {
    if (peeks) {
      raw_small_peeks(s);
    } else {
      raw_small_copies(s);
    }
    check(s.raw.cuStreamSynchronize(s.raw_stream.get()), "cuStreamSynchronize");
  };
  auto verify = [&s, peeks] {
    if (peeks) {
      s.verify_back(small_bytes * concurrent_ops);
    } else {
      s.verify(small_bytes * concurrent_ops);
    }
  };
  return {std::move(name), small_bytes * concurrent_ops, 1, 2, 7,
          [&s, &io, &gpu, peeks, &times] { many_copies(s, io, gpu, peeks, times); }, raw_run, verify};
}

// 1024 concurrent 4 KiB copies: pokes with the planner's choice of batch path and with each path forced,
// and peeks with the planner's choice.
std::vector<bench::result> many_small(setup& s) {
  asio::io_context io(1);
  auto engine_for = [&io](batch_path path) {
    engine_options options;
    options.batching = path;
    return std::make_unique<engine>(io.get_executor(), options);
  };
  const auto automatic = engine_for(batch_path::automatic);
  const auto by_kernel = engine_for(batch_path::kernel);
  const auto by_copy_engine = engine_for(batch_path::copy_engine);
  std::vector<many_copies_times> times(4);
  std::vector<bench::result> rows = bench::compare_all({
      many_small_case(s, io, *automatic, "many_small_4KiB", false, times[0]),
      many_small_case(s, io, *by_kernel, "many_small_4KiB_kernel", false, times[1]),
      many_small_case(s, io, *by_copy_engine, "many_small_4KiB_copy_engine", false, times[2]),
  });
  s.fill_device();  // what the peeks read
  for (bench::result& row :
       bench::compare_all({many_small_case(s, io, *automatic, "many_small_4KiB_d2h", true, times[3])})) {
    rows.push_back(std::move(row));
  }
  for (std::size_t i = 0; i < rows.size(); ++i) times[i].print(rows[i].name);
  std::cerr << "many_small: the same coroutines, each co_awaiting asio::post instead of a copy: "
            << coroutine_floor_us(io, 9) << " us per coroutine\n";
  const plan_counts counted = automatic->plan_counts();
  std::cerr << "many_small: the automatic engine moved " << counted.kernel_batches << " batches by kernel, "
            << counted.copy_engine_batches << " by copy engine; " << counted.pinned << " copies went alone\n";
  return rows;
}

}  // namespace

int main(int argc, char** argv) try {
  const bench::comparison_program program(argc, argv);
  const std::string device_name = program.on.gpu.name();
  std::cerr << "ferry engine_latency on the " << program.backend << " backend: " << device_name << "\n";
  setup s;
  program.report(bench::run_groups(s, {round_trips, submit_costs, many_small}), "engine", device_name);
  return 0;
} catch (const std::exception& error) {
  std::cerr << "engine_latency: " << error.what() << "\n";
  return 1;
}
