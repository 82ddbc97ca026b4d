// The grid and block shapes of the kernel launches, apart from the launches so that the tests that run
// the device code on the host (tests/kernels/device_code_test) use the shapes a GPU gets.
#pragma once

#include <cstdint>

#include "engine/kernels/geometry.hpp"

namespace ferry::detail {

// ferry_fill_8 / ferry_fill_16 over `bytes` (> 0) bytes.
launch_geometry fill_geometry(std::uint64_t bytes) noexcept;

// ferry_fill_2d over `height` (> 0) rows of `row_bytes` (> 0) bytes.
launch_geometry fill_2d_geometry(std::uint64_t row_bytes, std::uint64_t height, std::uint64_t resident_threads) noexcept;

// ferry_copy_blocks over `count` (> 0) blocks.
launch_geometry copy_blocks_geometry(std::uint64_t count) noexcept;

// ferry_resident_copy: one block.
launch_geometry resident_copy_geometry() noexcept;

// ferry_copy_span over `bytes` (> 0) bytes on a device that keeps `resident_threads` threads resident.
launch_geometry copy_span_geometry(std::uint64_t bytes, std::uint64_t resident_threads) noexcept;

}  // namespace ferry::detail
