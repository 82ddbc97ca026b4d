// How the staged (pageable) transfer's speed depends on the staging settings: chunk size, chunk count and
// copy threads (engine_options), beside what the host alone can do (memcpy into page-locked memory, one
// thread and many) and the raw driver's cuMemcpyHtoD / cuMemcpyDtoH from the same pageable memory. A
// diagnostic for tuning the defaults (the h2d_pageable figures): it prints a table and writes no
// result file.
#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iostream>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/harness/driver_check.hpp"
#include "bench/harness/run_to_completion.hpp"
#include "bench/harness/statistics.hpp"
#include "engine/driver/driver_table.hpp"
#include "ferry/engine.hpp"
#include "ferry/ferry.hpp"

namespace asio = boost::asio;
using namespace ferry;
using clock_type = std::chrono::steady_clock;
using bench::check;
using bench::median;
using bench::run_to_completion;

namespace {

// GB/s of `bytes` moved by `run`, median of 5 timed runs after one warm-up.
double median_gbps(std::size_t bytes, const std::function<void()>& run) {
  run();
  std::vector<double> speeds;
  for (int trial = 0; trial < 5; ++trial) {
    const auto start = clock_type::now();
    run();
    speeds.push_back(bytes / std::chrono::duration<double>(clock_type::now() - start).count() * 1e-9);
  }
  return median(speeds);
}


}  // namespace

int main() try {
  const device gpu_device = device::get(0);
  context primary = context::primary(gpu_device);
  context_guard guard(primary);
  const auto& raw = detail::driver();
  const bool sim = active_backend() == backend::sim;
  const std::size_t bytes = sim ? std::size_t{16} << 20 : std::size_t{256} << 20;

  std::vector<std::uint8_t> source(bytes), back(bytes);
  std::mt19937_64 generator(23);
  for (std::size_t i = 0; i + 8 <= bytes; i += 8) {
    const std::uint64_t word = generator();
    std::memcpy(source.data() + i, &word, 8);
  }
  pinned_buffer<std::uint8_t> pinned = pinned_buffer<std::uint8_t>::allocate(bytes);
  device_buffer<std::uint8_t> target = device_buffer<std::uint8_t>::allocate(bytes);
  auto verify = [&](const std::string& what) {
    std::fill(back.begin(), back.end(), 0xA5);
    check(raw.cuMemcpyDtoH(back.data(), target.get().get(), bytes), "cuMemcpyDtoH");
    if (back != source) throw std::runtime_error(what + ": data differs after the run");
  };
  auto poison = [&] { check(raw.cuMemsetD8(target.get().get(), 0xA5, bytes), "cuMemsetD8"); };

  struct row {
    std::string name;
    double gbps;
  };
  std::vector<row> rows;
  auto add = [&](std::string name, double gbps) {
    std::cerr << "  " << name << ": " << gbps << " GB/s\n";
    rows.push_back({std::move(name), gbps});
  };

  // What the host can do: memcpy from the pageable buffer into page-locked memory.
  add("host memcpy into pinned, 1 thread", median_gbps(bytes, [&] { std::memcpy(pinned.data(), source.data(), bytes); }));
  for (unsigned threads : {4u, 8u, 16u}) {
    add("host memcpy into pinned, " + std::to_string(threads) + " threads", median_gbps(bytes, [&] {
          std::vector<std::thread> crew;
          const std::size_t slice = bytes / threads;
          for (unsigned t = 0; t < threads; ++t) {
            crew.emplace_back([&, t] { std::memcpy(pinned.data() + t * slice, source.data() + t * slice, slice); });
          }
          for (auto& thread : crew) thread.join();
        }));
  }
  add("raw cuMemcpyHtoD from pageable", median_gbps(bytes, [&] {
        check(raw.cuMemcpyHtoD(target.get().get(), source.data(), bytes), "cuMemcpyHtoD");
      }));
  verify("raw cuMemcpyHtoD");
  poison();

  struct setting {
    std::size_t chunk_mib, chunks, threads;
  };
  const std::vector<setting> settings{{4, 8, 0},  {8, 8, 0},  {16, 4, 0},  {16, 8, 0},
                                      {32, 4, 0}, {16, 4, 16}, {16, 8, 16}, {32, 4, 16}};
  // Each setting runs once per round, rounds interleaved, so that a slow stretch of the machine does
  // not land on one setting alone; the table gives each setting's median over the rounds.
  constexpr int rounds = 3;
  std::vector<std::vector<double>> h2d(settings.size()), d2h(settings.size());
  const transfer_options staged{.plan = transfer_plan::staged};
  for (int round = 0; round < rounds; ++round) {
    for (std::size_t k = 0; k < settings.size(); ++k) {
      const setting& s = settings[k];
      asio::io_context io;
      auto work = asio::make_work_guard(io);
      std::thread io_thread([&] { io.run(); });
      {
        engine_options options;
        options.staging_chunk_bytes = s.chunk_mib << 20;
        options.staging_chunks = s.chunks;
        options.copy_threads = s.threads;
        engine gpu{io.get_executor(), options};
        h2d[k].push_back(median_gbps(bytes, [&] {
          run_to_completion([&](auto done) { gpu.poke(std::span<const std::uint8_t>(source), target.get(), staged, done); });
        }));
        verify("staged h2d");
        d2h[k].push_back(median_gbps(bytes, [&] {
          run_to_completion([&](auto done) {
            gpu.peek(device_ptr<const std::uint8_t>(target.get()), std::span<std::uint8_t>(back), staged, done);
          });
        }));
        if (back != source) throw std::runtime_error("staged d2h: data differs after the run");
        poison();
      }
      work.reset();
      io_thread.join();
    }
  }
  for (std::size_t k = 0; k < settings.size(); ++k) {
    const setting& s = settings[k];
    const std::string name = std::to_string(s.chunk_mib) + " MiB x " + std::to_string(s.chunks) + " chunks, " +
                             (s.threads ? std::to_string(s.threads) : std::string("default")) + " copy threads";
    add("staged h2d, " + name, median(h2d[k]));
    add("staged d2h, " + name, median(d2h[k]));
  }

  std::cout << "| staging setting (" << gpu_device.name() << ", " << (bytes >> 20) << " MiB) | GB/s |\n|---|---:|\n";
  for (const row& r : rows) std::cout << "| " << r.name << " | " << r.gbps << " |\n";
  return 0;
} catch (const std::exception& error) {
  std::cerr << "staging_sweep: " << error.what() << "\n";
  return 1;
}
