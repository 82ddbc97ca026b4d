// The simulated copy engines: byte copies paced to the configured bandwidth (set_copy_bandwidth), so
// that overlap and pipelining take observable time. The copy kernels' twins pace their bytes the same way.
#pragma once

#include <chrono>
#include <cstddef>

namespace ferry::sim::detail {

// Copies `bytes` (the ranges may overlap, as a device-to-device copy within one allocation can).
void engine_copy(std::byte* destination, const std::byte* source, std::size_t bytes);

// Sleeps until `bytes` would have been moved since `began` at the configured bandwidth (at once when
// unpaced).
void pace_from(std::chrono::steady_clock::time_point began, std::size_t bytes);

// One copy on a simulated engine, from its first byte until its pacing ends: counted among the copies in
// progress (copies_in_flight_peak) for that time.
class engine_run {
 public:
  engine_run();
  engine_run(const engine_run&) = delete;
  engine_run& operator=(const engine_run&) = delete;
  ~engine_run();
  // Sleeps until `bytes` would have crossed the engine since the run began, at the configured bandwidth.
  void pace(std::size_t bytes) const;

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace ferry::sim::detail
