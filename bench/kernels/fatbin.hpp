// bench/kernel_path_cost's compute kernel (compute_spin.cu), compiled by nvcc into a fatbin of its own
// (sm_90 code, plus compute_90 PTX for newer GPUs) and embedded by :fatbin, as the library embeds its
// kernels (kernels/fatbin.bzl).
#pragma once

#include <span>

namespace ferry::bench::kernels {

// The fatbin image for cuModuleLoadData: 64-byte aligned, alive for the whole process.
std::span<const unsigned char> fatbin() noexcept;

}  // namespace ferry::bench::kernels
