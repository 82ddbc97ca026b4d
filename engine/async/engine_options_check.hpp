// The checks an engine's options pass before the engine makes anything, and what they settle on the way:
// the device, the poller's spin windows, whether a kernel reaches page-locked host memory.
#pragma once

#include <cuda.h>

#include <chrono>

#include "engine/driver/driver_table.hpp"
#include "ferry/engine_options.hpp"

namespace ferry::detail {

// Whether a kernel on `device` reaches page-locked host memory at its host address: memory from
// cuMemHostAlloc through unified addressing, registered memory only where the device says so. A failed
// query answers false.
bool kernel_reaches_host_memory(const driver_table& driver, CUdevice device);

// engine_options::spin_window and max_spin_window as the engine runs them: the defaults of a machine of
// `cores` cores where unset. Throws nothing.
struct spin_windows {
  std::chrono::microseconds least;
  std::chrono::microseconds most;
};
spin_windows resolved_spin_windows(const engine_options& options, unsigned cores);

// Checks `options` for an engine on a machine of `cores` cores, in this order: the device, the pool's
// streams, staging, the spin windows (as resolved_spin_windows resolves them), batching, the completion
// marks, the resident copier. Asks the driver for the device count, the device, and whether the device
// reaches page-locked host memory where batching is kernel or resident_copies is on; makes nothing.
// Returns the device that options.device names.
// Throws std::invalid_argument ("engine: ...") naming the first option refused; the error of
// ferry/error.hpp where a driver query fails.
CUdevice check_engine_options(const engine_options& options, unsigned cores, const driver_table& driver);

}  // namespace ferry::detail
