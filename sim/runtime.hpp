// Whether cuInit has run, and the simulated devices it found.
#pragma once

#include <cuda.h>

namespace ferry::sim::detail {

// cuInit: reads FERRY_SIM_DEVICES (default 2) on the first call.
CUresult initialize(unsigned flags);

bool initialized() noexcept;
// The process is exiting and the simulated driver has been torn down (its atexit handler ran).
bool torn_down_at_exit() noexcept;

// Number of simulated devices; 0 before cuInit.
int device_count() noexcept;

bool valid_device(CUdevice device) noexcept;

}  // namespace ferry::sim::detail
