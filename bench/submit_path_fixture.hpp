// What submit_path_costs measures with: 1024 pinned 4 KiB pieces and their device destinations, a
// stream and 1024 events; how it times a call (per call over rounds of many, or alone); its rows.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <string>
#include <utility>
#include <vector>

#include "bench/harness/driver_check.hpp"
#include "bench/harness/per_call.hpp"
#include "bench/harness/statistics.hpp"
#include "engine/driver/driver_table.hpp"
#include "ferry/engine.hpp"
#include "ferry/ferry.hpp"

namespace ferry::bench {

inline constexpr std::size_t small_bytes = 4096;
inline constexpr int calls = 1024;

struct submit_fixture {
  explicit submit_fixture(context_ref primary) : primary(primary) {
    for (CUevent& event : events) check(raw.cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  }
  submit_fixture(const submit_fixture&) = delete;
  submit_fixture& operator=(const submit_fixture&) = delete;
  ~submit_fixture() {
    for (CUevent event : events) raw.cuEventDestroy(event);
  }

  // The raw copy of piece i; its status goes unchecked, so that the rows time the driver call alone.
  void copy(int i) const {
    raw.cuMemcpyHtoDAsync(device_base + i * small_bytes, source.data() + i * small_bytes, small_bytes, s.get());
  }
  void synchronize() const { check(raw.cuStreamSynchronize(s.get()), "cuStreamSynchronize"); }
  // Spins until the work before the last record of `event` is done.
  void spin_on(CUevent event) const {
    while (raw.cuEventQuery(event) == CUDA_ERROR_NOT_READY) {
    }
  }
  host_ptr<const std::uint8_t> source_piece(int i) const { return host_ptr<const std::uint8_t>(source.get() + i * small_bytes); }
  device_ptr<std::uint8_t> destination_piece(int i) const { return destination.get() + i * small_bytes; }

  const detail::driver_table& raw = detail::driver();
  context_ref primary;
  pinned_buffer<std::uint8_t> source = pinned_buffer<std::uint8_t>::allocate(small_bytes * calls);
  device_buffer<std::uint8_t> destination = device_buffer<std::uint8_t>::allocate(small_bytes * calls);
  stream s = stream::create();
  const CUdeviceptr device_base = destination.get().get();
  const std::uintptr_t host_base = reinterpret_cast<std::uintptr_t>(source.data());
  std::vector<CUevent> events = std::vector<CUevent>(calls);
};

// A row of the table: what was timed, in microseconds per call.
struct row {
  std::string name;
  double us;
};

// A table of rows still to time, run in order by measure_all.
using row_table = std::vector<std::pair<std::string, std::function<double()>>>;

inline std::vector<row> measure_all(const row_table& table) {
  std::vector<row> rows;
  for (const auto& [name, measure] : table) rows.push_back({name, measure()});
  return rows;
}

// Median over 7 rounds (after 2 more) of `calls` calls, in microseconds per call; `drain` (untimed) runs
// after each round.
inline double per_call(const std::function<void(int)>& body, const std::function<void()>& drain) {
  return per_call_us(calls, 9, 2, body, drain);
}

// Median of single calls, each timed alone and followed (untimed) by `settle`, which waits until the GPU
// and the engine are idle: what a call costs when no completion runs beside it.
inline double isolated_us(const std::function<void(int)>& body, const std::function<void()>& settle) {
  std::vector<double> samples;
  for (int i = 0; i < calls; ++i) {
    const auto start = std::chrono::steady_clock::now();
    body(i);
    samples.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() * 1e6);
    settle();
  }
  return median(samples);
}

inline void spin_until(const std::atomic<bool>& flag) {
  while (!flag.load()) {
  }
}

struct raise_flag final : detail::completion {
  explicit raise_flag(std::atomic<bool>& done) : done(done) {}
  void complete(boost::system::error_code, std::size_t) override { done.store(true); }
  std::atomic<bool>& done;
};

struct set_on_complete final : detail::completion {
  explicit set_on_complete(std::promise<void>& done) : done(done) {}
  void complete(boost::system::error_code, std::size_t) override { done.set_value(); }
  std::promise<void>& done;
};

// The engine's core without Asio, and the pieces of its bookkeeping one by one (submit_path_core.cc).
std::vector<row> engine_core_rows(submit_fixture& f);

}  // namespace ferry::bench
