// The host twins of the kernels, for the sim backend.
#pragma once

namespace ferry::detail {

// Registers a twin under each kernel's name with ferry::sim::register_kernel; the twins run the host
// forms of host_kernels.hpp on the memory ferry::sim::host_address finds. Idempotent and thread-safe.
// Throws std::bad_alloc.
void register_twins();

}  // namespace ferry::detail
