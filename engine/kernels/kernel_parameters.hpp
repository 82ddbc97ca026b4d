// The parameters each launch passes its kernel, built from the launch arguments after checking them.
// launch.hpp builds them this way, and the tests build them the same way to run the host reference.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>

#include "kernels/parameters.hpp"

namespace ferry::detail {

// For launch_fill: CUDA_ERROR_INVALID_VALUE unless element_size is 8 or 16, pattern is not null and
// [destination, destination + count * element_size) is a range of addresses (not null when it is not empty).
CUresult make_fill_parameters(CUdeviceptr destination, std::size_t count, std::size_t element_size,
                              const void* pattern, kernels::fill_parameters& out) noexcept;

// For launch_fill_2d: CUDA_ERROR_INVALID_VALUE unless element_size is 1, 2, 4, 8 or 16, pattern is not
// null, rows do not overlap (pitch_bytes >= width_elements * element_size when height > 1) and the region
// is a range of addresses (base not null when it is not empty). The element is replicated into the
// kernel's 16-byte pattern.
CUresult make_fill_2d_parameters(CUdeviceptr base, std::size_t pitch_bytes, std::size_t width_elements,
                                 std::size_t height, std::size_t element_size, const void* pattern,
                                 kernels::fill_2d_parameters& out) noexcept;

// For launch_copy_blocks: CUDA_ERROR_INVALID_VALUE unless, when count > 0, the three arrays are non-null,
// 8-byte aligned and `count` words long within the address space.
CUresult make_copy_blocks_parameters(CUdeviceptr sources, CUdeviceptr destinations, CUdeviceptr sizes,
                                     std::size_t count, kernels::copy_blocks_parameters& out) noexcept;

// For launch_copy_span: CUDA_ERROR_INVALID_VALUE unless, when bytes > 0, both ends are non-null ranges
// within the address space that do not overlap.
CUresult make_copy_span_parameters(CUdeviceptr source, CUdeviceptr destination, std::size_t bytes,
                                   kernels::copy_span_parameters& out) noexcept;

// For launch_resident_copy: CUDA_ERROR_INVALID_VALUE unless the ring (slots > 0 slots of 64 bytes) and
// the consumed word are non-null ranges within the address space, 8-byte aligned.
CUresult make_resident_copy_parameters(CUdeviceptr ring, std::size_t slots, std::uint64_t first, CUdeviceptr consumed,
                                       kernels::resident_copy_parameters& out) noexcept;

}  // namespace ferry::detail
