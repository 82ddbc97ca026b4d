#include "sim/copy_engine.hpp"

#include <atomic>
#include <cstring>
#include <thread>

#include "sim/control.hpp"

namespace ferry::sim::detail {
namespace {

std::atomic<double> bandwidth{0.0};  // bytes per second; 0 = unpaced
std::atomic<std::size_t> in_flight{0};
std::atomic<std::size_t> in_flight_peak{0};

}  // namespace

void engine_copy(std::byte* destination, const std::byte* source, std::size_t bytes) {
  const engine_run run;
  std::memmove(destination, source, bytes);
  run.pace(bytes);
}

engine_run::engine_run() : start_(std::chrono::steady_clock::now()) {
  const std::size_t now = in_flight.fetch_add(1) + 1;
  std::size_t peak = in_flight_peak.load();
  while (now > peak && !in_flight_peak.compare_exchange_weak(peak, now)) {
  }
}

engine_run::~engine_run() { in_flight.fetch_sub(1); }

void engine_run::pace(std::size_t bytes) const { pace_from(start_, bytes); }

void pace_from(std::chrono::steady_clock::time_point began, std::size_t bytes) {
  const double rate = bandwidth.load(std::memory_order_relaxed);
  if (rate <= 0.0 || bytes == 0) return;
  const std::chrono::duration<double> takes(static_cast<double>(bytes) / rate);
  std::this_thread::sleep_until(began + std::chrono::duration_cast<std::chrono::steady_clock::duration>(takes));
}

}  // namespace ferry::sim::detail

namespace ferry::sim {

void set_copy_bandwidth(double bytes_per_second) {
  detail::bandwidth.store(bytes_per_second > 0.0 ? bytes_per_second : 0.0, std::memory_order_relaxed);
}

std::size_t copies_in_flight_peak() { return detail::in_flight_peak.load(); }

void reset_copies_in_flight_peak() { detail::in_flight_peak.store(detail::in_flight.load()); }

}  // namespace ferry::sim
