// The simulated copy engines: byte copies paced to the configured bandwidth (set_copy_bandwidth), so
// that overlap and pipelining take observable time.
#pragma once

#include <chrono>
#include <cstddef>

namespace ferry::sim::detail {

// Copies `bytes` (the ranges may overlap, as a device-to-device copy within one allocation can).
void engine_copy(std::byte* destination, const std::byte* source, std::size_t bytes);

// Sleeps until `bytes` would have crossed the engine since `start` at the configured bandwidth.
void pace(std::size_t bytes, std::chrono::steady_clock::time_point start);

}  // namespace ferry::sim::detail
