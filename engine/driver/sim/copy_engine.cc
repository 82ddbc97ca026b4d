#include "engine/driver/sim/copy_engine.hpp"

#include <atomic>
#include <cstring>
#include <thread>

#include "engine/driver/sim/control.hpp"

namespace ferry::sim::detail {
namespace {

std::atomic<double> bandwidth{0.0};  // bytes per second; 0 = unpaced

}  // namespace

void engine_copy(std::byte* destination, const std::byte* source, std::size_t bytes) {
  const auto start = std::chrono::steady_clock::now();
  std::memmove(destination, source, bytes);
  pace(bytes, start);
}

void pace(std::size_t bytes, std::chrono::steady_clock::time_point start) {
  const double rate = bandwidth.load(std::memory_order_relaxed);
  if (rate <= 0.0 || bytes == 0) return;
  const std::chrono::duration<double> takes(static_cast<double>(bytes) / rate);
  std::this_thread::sleep_until(start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(takes));
}

}  // namespace ferry::sim::detail

namespace ferry::sim {

void set_copy_bandwidth(double bytes_per_second) {
  detail::bandwidth.store(bytes_per_second > 0.0 ? bytes_per_second : 0.0, std::memory_order_relaxed);
}

}  // namespace ferry::sim
