#include "engine/kernels/launch_geometry.hpp"

#include <algorithm>
#include <bit>

#include "kernels/parameters.hpp"

namespace ferry::detail {
namespace {

constexpr std::uint64_t max_grid_x = 2147483647;  // cuLaunchKernel's limits on gridDimX and gridDimY
constexpr std::uint64_t max_grid_y = 65535;

std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return a / b + (a % b != 0); }

// Blocks of fill_block_threads that the device keeps resident at once: one full wave. A fill's threads
// loop over the range, so more blocks than that would only queue behind the first wave.
std::uint64_t fill_wave(std::uint64_t resident_threads) {
  return std::max<std::uint64_t>(1, resident_threads / kernels::fill_block_threads);
}

// The 16-byte stores of a fill of `bytes`, plus one for the partial ones at its ends.
std::uint64_t fill_units(std::uint64_t bytes) { return bytes / 16 + 1; }

}  // namespace

// A block per tile of fill_units_per_thread units per thread (kernels/fill.cu), up to the grid's limit.
launch_geometry fill_geometry(std::uint64_t bytes) noexcept {
  const std::uint64_t tile = std::uint64_t{kernels::fill_units_per_thread} * kernels::fill_block_threads;
  const std::uint64_t blocks = std::min(ceil_div(fill_units(bytes), tile), max_grid_x);
  return launch_geometry{blocks, 1, kernels::fill_block_threads, 1};
}

// Blocks are shaped to the rows: threads across a row cover its 16-byte units (rounded up to a power of
// two, at least 8 so that a row's few unaligned bytes take a thread or two each), and the rest of the
// block's threads take further rows. A 64-byte row then occupies 8 threads, not a block of 256. The grid
// stays within one wave; rows past it are taken in a loop.
launch_geometry fill_2d_geometry(std::uint64_t row_bytes, std::uint64_t height, std::uint64_t resident_threads) noexcept {
  const std::uint64_t units = fill_units(row_bytes);
  const auto across = static_cast<unsigned>(std::clamp<std::uint64_t>(
      std::bit_ceil(std::min<std::uint64_t>(units, kernels::fill_block_threads)), 8, kernels::fill_block_threads));
  const unsigned rows_per_block = kernels::fill_block_threads / across;
  const std::uint64_t wave = fill_wave(resident_threads);
  const std::uint64_t grid_x = std::min(ceil_div(units, across), wave);
  const std::uint64_t grid_y =
      std::min({ceil_div(height, rows_per_block), max_grid_y, std::max<std::uint64_t>(1, wave / grid_x)});
  return launch_geometry{grid_x, grid_y, across, rows_per_block};
}

// One block of threads per copied block, as many blocks as there are copies (up to the grid limit, then
// the blocks loop): the block scheduler hands blocks to SMs as they free up, which balances copies of
// very different sizes better than a fixed share per block would.
launch_geometry copy_blocks_geometry(std::uint64_t count) noexcept {
  return launch_geometry{std::min(count, max_grid_x), 1, kernels::copy_block_threads, 1};
}

launch_geometry resident_copy_geometry() noexcept { return launch_geometry{1, 1, kernels::resident_copy_threads, 1}; }

// Enough blocks that each thread has its four 16-byte units per pass, at most one wave: the threads
// loop over the span, so more blocks would only queue behind the first wave.
launch_geometry copy_span_geometry(std::uint64_t bytes, std::uint64_t resident_threads) noexcept {
  const std::uint64_t per_block = std::uint64_t{4} * 16 * kernels::copy_span_threads;
  const std::uint64_t wave = std::max<std::uint64_t>(1, resident_threads / kernels::copy_span_threads);
  return launch_geometry{std::min(ceil_div(bytes, per_block), wave), 1, kernels::copy_span_threads, 1};
}

}  // namespace ferry::detail
