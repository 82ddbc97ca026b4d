// The host twins of ferry's library kernels (kernels/), which the sim runs when a kernel is launched.
#pragma once

namespace ferry::sim::detail {

// Registers a twin under each kernel's name with ferry::sim::register_kernel; the twins run the host
// forms of engine/kernels/host_kernels.hpp on the memory ferry::sim::host_address finds. Idempotent and
// thread-safe. Throws std::bad_alloc.
void register_kernel_twins();

}  // namespace ferry::sim::detail
