// The grid and block shape of a kernel launch (z is 1). Plain C++: the tests that run device code on the
// host (tests/kernels/device_code_test) use it without CUDA's headers.
#pragma once

#include <cstdint>

namespace ferry::detail {

struct launch_geometry {
  std::uint64_t grid_x = 1;
  std::uint64_t grid_y = 1;
  unsigned block_x = 1;
  unsigned block_y = 1;
};

}  // namespace ferry::detail
