// The pipeline server's kernel (transform_checksum.cu), compiled by nvcc into a fatbin of its own (sm_90
// code, plus compute_90 PTX that the driver compiles for newer GPUs) and embedded by :fatbin, as the
// library embeds its kernels (kernels/fatbin.bzl).
#pragma once

#include <span>

namespace ferry::pipeline::kernels {

// The fatbin image for cuModuleLoadData: 64-byte aligned, alive for the whole process.
std::span<const unsigned char> fatbin() noexcept;

}  // namespace ferry::pipeline::kernels
