// How the staged (pageable) transfer's speed depends on the staging settings: chunk size, chunk count and
// copy threads (engine_options), beside what the host alone can do (memcpy into page-locked memory, one
// thread and many) and the raw driver's cuMemcpyHtoD / cuMemcpyDtoH from the same pageable memory. A
// diagnostic for tuning the defaults (the h2d_pageable figures): it prints a table and writes no
// result file.
#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iostream>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/harness/driver_check.hpp"
#include "bench/harness/io_thread.hpp"
#include "bench/harness/program.hpp"
#include "bench/harness/run_to_completion.hpp"
#include "bench/harness/statistics.hpp"
#include "bench/harness/test_data.hpp"
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

// The bytes every row moves, the page-locked and device memory they move to, and the check of a result.
struct sweep_fixture {
  void verify(const std::string& what) {
    std::fill(back.begin(), back.end(), 0xA5);
    check(raw.cuMemcpyDtoH(back.data(), target.get().get(), bytes), "cuMemcpyDtoH");
    if (back != source) throw std::runtime_error(what + ": data differs after the run");
  }
  void poison() { check(raw.cuMemsetD8(target.get().get(), 0xA5, bytes), "cuMemsetD8"); }

  const detail::driver_table& raw = detail::driver();
  const std::size_t bytes = active_backend() == backend::sim ? std::size_t{16} << 20 : std::size_t{256} << 20;
  std::vector<std::uint8_t> source = bench::random_bytes(bytes, 23);
  std::vector<std::uint8_t> back = std::vector<std::uint8_t>(bytes);
  pinned_buffer<std::uint8_t> pinned = pinned_buffer<std::uint8_t>::allocate(bytes);
  device_buffer<std::uint8_t> target = device_buffer<std::uint8_t>::allocate(bytes);
};

struct row {
  std::string name;
  double gbps;
};

void add(std::vector<row>& rows, std::string name, double gbps) {
  std::cerr << "  " << name << ": " << gbps << " GB/s\n";
  rows.push_back({std::move(name), gbps});
}

// What the host can do (memcpy from the pageable buffer into page-locked memory, on one thread and on
// several), and the raw driver's copy from the same pageable memory.
void host_rows(sweep_fixture& f, std::vector<row>& rows) {
  const std::size_t bytes = f.bytes;
  add(rows, "host memcpy into pinned, 1 thread", median_gbps(bytes, [&] { std::memcpy(f.pinned.data(), f.source.data(), bytes); }));
  for (unsigned threads : {4u, 8u, 16u}) {
    add(rows, "host memcpy into pinned, " + std::to_string(threads) + " threads", median_gbps(bytes, [&] {
          std::vector<std::thread> crew;
          const std::size_t slice = bytes / threads;
          for (unsigned t = 0; t < threads; ++t) {
            crew.emplace_back([&, t] { std::memcpy(f.pinned.data() + t * slice, f.source.data() + t * slice, slice); });
          }
          for (auto& thread : crew) thread.join();
        }));
  }
  add(rows, "raw cuMemcpyHtoD from pageable", median_gbps(bytes, [&] {
        check(f.raw.cuMemcpyHtoD(f.target.get().get(), f.source.data(), bytes), "cuMemcpyHtoD");
      }));
  f.verify("raw cuMemcpyHtoD");
  f.poison();
}

struct setting {
  std::size_t chunk_mib, chunks, threads;
};

// One round of a setting: a staged poke and a staged peek through an engine of that setting.
void run_setting(sweep_fixture& f, const setting& s, std::vector<double>& h2d, std::vector<double>& d2h) {
  const transfer_options staged{transfer_plan::staged};
  asio::io_context io;
  bench::io_thread completions(io);
  engine_options options;
  options.staging_chunk_bytes = s.chunk_mib << 20;
  options.staging_chunks = s.chunks;
  options.copy_threads = s.threads;
  engine gpu{io.get_executor(), options};
  h2d.push_back(median_gbps(f.bytes, [&] {
    run_to_completion([&](auto done) { gpu.poke(std::span<const std::uint8_t>(f.source), f.target.get(), staged, done); });
  }));
  f.verify("staged h2d");
  d2h.push_back(median_gbps(f.bytes, [&] {
    run_to_completion([&](auto done) {
      gpu.peek(device_ptr<const std::uint8_t>(f.target.get()), std::span<std::uint8_t>(f.back), staged, done);
    });
  }));
  if (f.back != f.source) throw std::runtime_error("staged d2h: data differs after the run");
  f.poison();
}

// Each setting runs once per round, rounds interleaved, so that a slow stretch of the machine does
// not land on one setting alone; the table gives each setting's median over the rounds.
void staged_rows(sweep_fixture& f, std::vector<row>& rows) {
  const std::vector<setting> settings{{4, 8, 0},  {8, 8, 0},  {16, 4, 0},  {16, 8, 0},
                                      {32, 4, 0}, {16, 4, 16}, {16, 8, 16}, {32, 4, 16}};
  constexpr int rounds = 3;
  std::vector<std::vector<double>> h2d(settings.size()), d2h(settings.size());
  for (int round = 0; round < rounds; ++round) {
    for (std::size_t k = 0; k < settings.size(); ++k) run_setting(f, settings[k], h2d[k], d2h[k]);
  }
  for (std::size_t k = 0; k < settings.size(); ++k) {
    const setting& s = settings[k];
    const std::string name = std::to_string(s.chunk_mib) + " MiB x " + std::to_string(s.chunks) + " chunks, " +
                             (s.threads ? std::to_string(s.threads) : std::string("default")) + " copy threads";
    add(rows, "staged h2d, " + name, median(h2d[k]));
    add(rows, "staged d2h, " + name, median(d2h[k]));
  }
}

}  // namespace

int main(int argc, char** argv) try {
  bench::parse_no_flags(argc, argv,
                        "The staged (pageable) transfer's speed against its staging settings, beside the host\n"
                        "alone and the raw driver (a diagnostic: prints a table, writes no report).");
  const bench::primary_device on;
  sweep_fixture fixture;
  std::vector<row> rows;
  host_rows(fixture, rows);
  staged_rows(fixture, rows);

  std::cout << "| staging setting (" << on.gpu.name() << ", " << (fixture.bytes >> 20) << " MiB) | GB/s |\n|---|---:|\n";
  for (const row& r : rows) std::cout << "| " << r.name << " | " << r.gbps << " |\n";
  return 0;
} catch (const std::exception& error) {
  std::cerr << "staging_sweep: " << error.what() << "\n";
  return 1;
}

