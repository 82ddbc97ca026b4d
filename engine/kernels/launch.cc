#include "engine/kernels/launch.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>

#include "engine/driver/driver_table.hpp"
#include "engine/kernels/kernel_parameters.hpp"
#include "engine/kernels/loaded_kernels.hpp"
#include "kernels/parameters.hpp"

namespace ferry::detail {
namespace {

constexpr std::uint64_t max_grid_x = 2147483647;  // cuLaunchKernel's limit on gridDimX
constexpr std::uint64_t max_grid_y = 65535;

std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return a / b + (a % b != 0); }

// Blocks of fill_block_threads that the device keeps resident at once: one full wave. A fill's
// threads loop over the range, so more blocks than that would only queue behind the first wave.
std::uint64_t fill_wave(const loaded_kernels& k) {
  return std::max<std::uint64_t>(1, k.resident_threads / kernels::fill_block_threads);
}

// The 16-byte stores of a fill of `bytes`, plus one for the partial ones at its ends.
std::uint64_t fill_units(std::uint64_t bytes) { return bytes / 16 + 1; }

CUresult launch(CUfunction function, std::uint64_t grid_x, std::uint64_t grid_y, unsigned block_x, unsigned block_y,
                void* parameters, CUstream stream) noexcept try {
  void* kernel_params[] = {parameters};
  return driver().cuLaunchKernel(function, static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y), 1, block_x,
                                 block_y, 1, 0, stream, kernel_params, nullptr);
} catch (...) {
  return CUDA_ERROR_NOT_INITIALIZED;  // unreachable once current_kernels succeeded: driver() was chosen
}

}  // namespace

CUresult launch_fill(CUdeviceptr destination, std::size_t count, std::size_t element_size, const void* pattern,
                     CUstream stream) noexcept {
  kernels::fill_parameters p{};
  if (CUresult status = make_fill_parameters(destination, count, element_size, pattern, p); status != CUDA_SUCCESS) {
    return status;
  }
  if (count == 0) return CUDA_SUCCESS;
  loaded_kernels k;
  if (CUresult status = current_kernels(k); status != CUDA_SUCCESS) return status;
  const std::uint64_t blocks = std::min(ceil_div(fill_units(count * element_size), kernels::fill_block_threads), fill_wave(k));
  return launch(element_size == 8 ? k.fill_8 : k.fill_16, blocks, 1, kernels::fill_block_threads, 1, &p, stream);
}

// Blocks are shaped to the rows: threads across a row cover its 16-byte units (rounded up to a power
// of two, at least 8 so that a row's few unaligned bytes take a thread or two each), and the rest of the
// block's threads take further rows. A 64-byte row then occupies 8 threads, not a block of 256.
CUresult launch_fill_2d(CUdeviceptr base, std::size_t pitch_bytes, std::size_t width_elements, std::size_t height,
                        std::size_t element_size, const void* pattern, CUstream stream) noexcept {
  kernels::fill_2d_parameters p{};
  if (CUresult status = make_fill_2d_parameters(base, pitch_bytes, width_elements, height, element_size, pattern, p);
      status != CUDA_SUCCESS) {
    return status;
  }
  if (p.row_bytes == 0 || p.height == 0) return CUDA_SUCCESS;
  loaded_kernels k;
  if (CUresult status = current_kernels(k); status != CUDA_SUCCESS) return status;
  const std::uint64_t units = fill_units(p.row_bytes);
  const auto across = static_cast<unsigned>(
      std::clamp<std::uint64_t>(std::bit_ceil(std::min<std::uint64_t>(units, kernels::fill_block_threads)), 8,
                                kernels::fill_block_threads));
  const unsigned rows_per_block = kernels::fill_block_threads / across;
  const std::uint64_t wave = fill_wave(k);
  const std::uint64_t grid_x = std::min(ceil_div(units, across), wave);
  const std::uint64_t grid_y = std::min({ceil_div(p.height, rows_per_block), max_grid_y, std::max<std::uint64_t>(1, wave / grid_x)});
  return launch(k.fill_2d, grid_x, grid_y, across, rows_per_block, &p, stream);
}

// One block of threads per copied block, as many blocks as there are copies (up to the grid limit, then
// the blocks loop): the block scheduler hands blocks to SMs as they free up, which balances copies of
// very different sizes better than a fixed share per block would.
CUresult launch_copy_blocks(CUdeviceptr sources, CUdeviceptr destinations, CUdeviceptr sizes, std::size_t count,
                            CUstream stream) noexcept {
  kernels::copy_blocks_parameters p{};
  if (CUresult status = make_copy_blocks_parameters(sources, destinations, sizes, count, p); status != CUDA_SUCCESS) {
    return status;
  }
  if (count == 0) return CUDA_SUCCESS;
  loaded_kernels k;
  if (CUresult status = current_kernels(k); status != CUDA_SUCCESS) return status;
  return launch(k.copy_blocks, std::min<std::uint64_t>(count, max_grid_x), 1, kernels::copy_block_threads, 1, &p,
                stream);
}

CUresult unload_kernels() noexcept { return unload_current_kernels(); }

}  // namespace ferry::detail
