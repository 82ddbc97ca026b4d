// The kernels of kernels/*.cu, compiled by nvcc into one fatbin (sm_90 code, plus compute_90 PTX that
// the driver compiles for newer GPUs) and embedded in the library by //kernels:fatbin.
#pragma once

#include <span>

namespace ferry::detail::kernels {

// The fatbin image for cuModuleLoadData: 64-byte aligned, alive for the whole process.
std::span<const unsigned char> fatbin() noexcept;

}  // namespace ferry::detail::kernels
