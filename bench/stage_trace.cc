// Where a co_awaited poke's round trip goes (4 KiB unless --bytes says): the time at which it reaches
// each stage of the engine (engine/trace/stage_marks.hpp: built with `tools/ferry bench --stage-marks`,
// turned on here), median over 3,000 round trips,
// beside the raw driver's round trips in the same run (cuMemcpyHtoDAsync, then cuEventRecord and a spin on
// cuEventQuery, or cuStreamSynchronize as the size sweep's raw side waits). A
// diagnostic: it prints its tables and writes no result file. The marks cost a clock read each, so the
// traced round trip is a little longer than bench/engine_latency's. Built without the marks, it says so.
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/system_executor.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "bench/harness/driver_check.hpp"
#include "bench/harness/options.hpp"
#include "tools/command_line/command_line.hpp"
#include "engine/driver/driver_table.hpp"
#include "engine/trace/stage_marks.hpp"
#include "ferry/engine.hpp"
#include "ferry/ferry.hpp"

namespace asio = boost::asio;
using namespace ferry;
using clock_type = std::chrono::steady_clock;
using detail::stage_trace::stage;

namespace {

int warm_up_trips = 1000;
int measured_trips = 3000;
// --pause-us: how long each round trip waits before it starts (the engine's threads then find its ops
// after an idle time, as in a benchmark's trials or a service's sporadic requests). The waiting thread
// sleeps, or with --busy it spins (its own work between ops, such as a benchmark's check of the
// result: the core it runs on stays awake, as the engine's other threads may not).
std::chrono::microseconds idle_pause{0};
bool busy_pause = false;

// The wait before a round trip, on the thread that starts it.
void pause_before_round_trip() {
  if (idle_pause.count() == 0) return;
  if (!busy_pause) {
    std::this_thread::sleep_for(idle_pause);
    return;
  }
  const auto until = clock_type::now() + idle_pause;
  while (clock_type::now() < until) {
  }
}
constexpr std::size_t stage_count = static_cast<std::size_t>(stage::count);

constexpr const char* stage_names[stage_count] = {
    "prepare begins", "prepare ends", "enqueue begins", "copy enqueued", "flag enqueued", "event recorded",
    "operation made", "admitted", "handed to bridge", "initiating call returns", "arrival taken (bridge)",
    "flag seen (bridge)", "continuation begins", "handler runs", "coroutine resumed"};

double median(std::vector<double> values) {
  std::erase_if(values, [](double v) { return std::isnan(v); });
  if (values.empty()) return NAN;
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

// The raw round trip: the copy, then an event recorded and queried until it is done, or (`synchronize`)
// cuStreamSynchronize.
double raw_round_trip_us(const detail::driver_table& raw, CUdeviceptr destination, const void* source,
                         std::size_t bytes, CUstream stream, bool synchronize) {
  CUevent event = nullptr;
  bench::check(raw.cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  std::vector<double> samples;
  for (int i = 0; i < warm_up_trips + measured_trips; ++i) {
    pause_before_round_trip();
    const auto start = clock_type::now();
    bench::check(raw.cuMemcpyHtoDAsync(destination, source, bytes, stream), "cuMemcpyHtoDAsync");
    if (synchronize) {
      bench::check(raw.cuStreamSynchronize(stream), "cuStreamSynchronize");
    } else {
      bench::check(raw.cuEventRecord(event, stream), "cuEventRecord");
      CUresult status;
      while ((status = raw.cuEventQuery(event)) == CUDA_ERROR_NOT_READY) {
      }
      bench::check(status, "cuEventQuery");
    }
    if (i < warm_up_trips) continue;
    samples.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - start).count());
  }
  raw.cuEventDestroy(event);
  return median(samples);
}

// Appends, per stage, the microseconds from `start` (steady_clock ticks) at which this round trip reached
// it, NaN where it did not.
void record_stages(std::vector<std::vector<double>>& reached, std::int64_t start) {
  for (std::size_t k = 0; k < stage_count; ++k) {
    const auto at = detail::stage_trace::reached[k].load();
    reached[k].push_back(at != 0 ? (at - start) / 1000.0 : NAN);
  }
}

// Per stage, the microseconds from the co_await's start at which each round trip reached it (NaN: not
// reached, e.g. a completion posted rather than handed to the mailbox).
std::vector<std::vector<double>> traced_round_trips(engine& gpu, asio::io_context& io, const std::uint8_t* source,
                                                   CUdeviceptr destination, std::size_t bytes,
                                                   std::optional<stream_ref> stream) {
  std::vector<std::vector<double>> reached(stage_count);
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    asio::steady_timer idle(io);
    for (int i = 0; i < warm_up_trips + measured_trips; ++i) {
      if (idle_pause.count() > 0 && busy_pause) {
        pause_before_round_trip();  // on the io thread, which then never parks
      } else if (idle_pause.count() > 0) {
        idle.expires_after(idle_pause);
        co_await idle.async_wait(asio::use_awaitable);
      }
      for (auto& at : detail::stage_trace::reached) at.store(0);
      const auto start = clock_type::now().time_since_epoch().count();
      const auto from = pinned_span(host_ptr<const std::uint8_t>(source), bytes);
      if (stream) {
        co_await gpu.poke(from, device_ptr<std::uint8_t>(destination), *stream, asio::use_awaitable);
      } else {
        co_await gpu.poke(from, device_ptr<std::uint8_t>(destination), asio::use_awaitable);
      }
      detail::stage_trace::mark(stage::resumed);
      if (i < warm_up_trips) continue;
      record_stages(reached, start);
    }
  }, asio::detached);
  io.run();
  return reached;
}

// The way of bench/transfer_bandwidth's size sweep: the poke is made on this thread, given no stream;
// its handler runs on the engine's io_context, run by another thread, and raises a flag this thread
// spins on ("coroutine resumed" is then this thread seeing the flag). With `in_place`, the handler is
// bound to asio::system_executor and runs on the engine's thread that completes the op instead.
std::vector<std::vector<double>> traced_round_trips_from_another_thread(engine& gpu, asio::io_context& io,
                                                                       const std::uint8_t* source,
                                                                       CUdeviceptr destination, std::size_t bytes,
                                                                       bool in_place) {
  auto keep_running = asio::make_work_guard(io);
  std::thread io_thread([&] { io.run(); });
  std::vector<std::vector<double>> reached(stage_count);
  boost::system::error_code failure;
  for (int i = 0; i < warm_up_trips + measured_trips && !failure; ++i) {
    pause_before_round_trip();
    for (auto& at : detail::stage_trace::reached) at.store(0);
    const auto start = clock_type::now().time_since_epoch().count();
    std::atomic<bool> done{false};
    auto raise_flag = [&](boost::system::error_code error, std::size_t) {
      detail::stage_trace::mark(stage::handler_runs);
      failure = error;
      done.store(true, std::memory_order_release);
    };
    const auto poke = [&](auto handler) {
      gpu.poke(pinned_span(host_ptr<const std::uint8_t>(source), bytes), device_ptr<std::uint8_t>(destination),
               std::move(handler));
    };
    if (in_place) {
      poke(asio::bind_executor(asio::system_executor(), raise_flag));
    } else {
      poke(raise_flag);
    }
    detail::stage_trace::mark(stage::initiating_call_returns);
    while (!done.load(std::memory_order_acquire)) {
    }
    detail::stage_trace::mark(stage::resumed);
    if (i < warm_up_trips) continue;
    record_stages(reached, start);
  }
  keep_running.reset();
  io_thread.join();
  if (failure) throw boost::system::system_error(failure);
  return reached;
}

void print_table(const char* title, const std::vector<std::vector<double>>& reached, double raw_us,
                 double raw_synchronized_us) {
  std::printf("\n%s (raw round trip in the same run: %.2f us; with cuStreamSynchronize %.2f us)\n", title, raw_us,
              raw_synchronized_us);
  std::printf("| stage | reached at, us (median) | since the stage before, us (median) |\n|---|---:|---:|\n");
  for (std::size_t k = 0; k < stage_count; ++k) {
    std::vector<double> since_before;  // since the latest stage before it that this round trip reached
    for (std::size_t n = 0; n < reached[k].size(); ++n) {
      double before = 0;
      for (std::size_t j = k; j-- > 0;) {
        if (!std::isnan(reached[j][n])) {
          before = reached[j][n];
          break;
        }
      }
      since_before.push_back(reached[k][n] - before);
    }
    std::printf("| %s | %.2f | %.2f |\n", stage_names[k], median(reached[k]), median(since_before));
  }
  std::printf("round trip %.2f us: %.2fx the raw driver's\n", median(reached[stage_count - 1]),
              median(reached[stage_count - 1]) / raw_us);
}

}  // namespace

int main(int argc, char** argv) try {
  std::size_t bytes = 4096;
  bool resident = false;
  std::size_t pool_streams = engine_options{}.pool_streams;
  tools::command_line command(bench::program_name(argv[0]),
                              "Where a co_awaited poke's round trip goes, stage by stage, beside the raw\n"
                              "driver's round trip (a diagnostic: prints tables, writes no report).");
  command.number("bytes", bytes, "bytes each poke moves");
  command.duration<std::chrono::microseconds>("pause-us", idle_pause,
                                              "microseconds each round trip waits before it starts (then 100 "
                                              "round trips warm up and 1,000 are measured)");
  command.switch_flag("busy", busy_pause,
                      "spin through each --pause-us rather than sleep (the thread's own work between round trips)");
  std::chrono::microseconds spin_window{0};
  command.duration<std::chrono::microseconds>(
      "spin-window-us", spin_window,
      "engine_options::spin_window of the engines: how long the poller, and the handler's io thread once "
      "nothing is owed, stay awake after activity (0: the engine's default)");
  std::chrono::microseconds max_spin_window{0};
  command.duration<std::chrono::microseconds>(
      "max-spin-window-us", max_spin_window,
      "engine_options::max_spin_window of the engines: the longest that stay grows to where pauses between ops "
      "keep being longer than spin_window (0: the engine's default)");
  command.switch_flag("resident", resident,
                      "engines with engine_options::resident_copies on (the pool-stream cases then take the resident "
                      "copier)");
  command.number("pool-streams", pool_streams,
                 "engine_options::pool_streams of the engines (the streams of ops given none)");
  command.parse_or_exit(argc, argv, std::cout);
  if (bytes == 0) command.exit_with_usage_error("--bytes is 0; give at least one byte to move");
  if (idle_pause.count() > 0) {
    warm_up_trips = 100;
    measured_trips = 1000;
  }
  const auto& raw = detail::driver();
  const device gpu_device = device::get(0);
  context primary = context::primary(gpu_device);
  context_guard guard(primary);
  auto source = pinned_buffer<std::uint8_t>::allocate(bytes);
  auto destination = device_buffer<std::uint8_t>::allocate(bytes);
  std::mt19937_64 generator(5);
  for (std::size_t i = 0; i < bytes; ++i) source.data()[i] = static_cast<std::uint8_t>(generator());
  if (!detail::stage_trace::compiled_in) {
    std::printf("ferry stage_trace: this build has no stage marks; build it with them: tools/ferry bench "
                "--stage-marks stage_trace\n");
    return 0;
  }
  detail::stage_trace::enabled = true;
  std::printf("ferry stage_trace on the %s backend: %s\n", std::string(to_string(active_backend())).c_str(),
              gpu_device.name().c_str());

  // Every round trip poked the same random bytes: the destination, poisoned before each case, holds them.
  auto expect_poked_bytes = [&] {
    std::vector<std::uint8_t> back(bytes);
    bench::check(raw.cuMemcpyDtoH(back.data(), destination.get().get(), bytes), "cuMemcpyDtoH");
    if (std::memcmp(back.data(), source.data(), bytes) != 0) throw std::runtime_error("the poked bytes differ");
  };
  engine_options options;
  options.resident_copies = resident;
  options.pool_streams = pool_streams;
  if (spin_window.count() > 0) options.spin_window = spin_window;
  if (max_spin_window.count() > 0) options.max_spin_window = max_spin_window;
  stream raw_stream = stream::create();
  const double raw_us = raw_round_trip_us(raw, destination.get().get(), source.data(), bytes, raw_stream.get(), false);
  const double raw_synchronized_us =
      raw_round_trip_us(raw, destination.get().get(), source.data(), bytes, raw_stream.get(), true);
  for (bool own_stream : {true, false}) {
    asio::io_context io(1);
    engine gpu{io.get_executor(), options};
    stream ferry_stream = stream::create();
    bench::check(raw.cuMemsetD8(destination.get().get(), 0xA5, bytes), "cuMemsetD8");
    const auto reached = traced_round_trips(gpu, io, source.data(), destination.get().get(), bytes,
                                            own_stream ? std::optional<stream_ref>(ferry_stream) : std::nullopt);
    expect_poked_bytes();
    print_table(own_stream ? "co_await poke, on a stream of its own" : "co_await poke, on a pool stream", reached,
                raw_us, raw_synchronized_us);
  }
  for (bool in_place : {false, true}) {
    asio::io_context io(1);
    engine gpu{io.get_executor(), options};
    bench::check(raw.cuMemsetD8(destination.get().get(), 0xA5, bytes), "cuMemsetD8");
    const auto reached =
        traced_round_trips_from_another_thread(gpu, io, source.data(), destination.get().get(), bytes, in_place);
    expect_poked_bytes();
    print_table(in_place ? "poke from another thread, callback bound to system_executor (run in place) raising a "
                           "flag, pool stream"
                         : "poke from another thread, callback on the io thread raising a flag, pool stream (the "
                           "size sweep's way)",
                reached, raw_us, raw_synchronized_us);
  }
  return 0;
} catch (const std::exception& error) {
  std::fprintf(stderr, "stage_trace: %s\n", error.what());
  return 1;
}
