// The device code of kernels/*.cu, compiled by g++ and run one thread at a time with the grid and block
// shapes a launch gives it (launch_geometry.hpp), against straightforward expectations, every byte. The
// sim backend's twins share the kernels' arithmetic but not their loops over threads; this runs those
// loops (the grid-stride walks, the four-way unrolling, the 2-D rows) where there is no GPU.
#include "tests/kernels/device_on_host.hpp"

#include "kernels/copy_blocks.cu"
#include "kernels/fill.cu"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "engine/kernels/launch_geometry.hpp"
#include "tests/support/random_bytes.hpp"

using ferry::detail::launch_geometry;
using ferry::testing::first_difference;
using bytes = std::vector<std::uint8_t>;

namespace {

// A GPU with one SM of 2048 threads (the grid-stride loops go round many times) and the H200 (132 SMs).
constexpr std::uint64_t resident_threads[] = {2048, 132 * 2048};

template <class Kernel>
void run(const launch_geometry& shape, Kernel kernel) {
  gridDim = {static_cast<unsigned>(shape.grid_x), static_cast<unsigned>(shape.grid_y), 1};
  blockDim = {shape.block_x, shape.block_y, 1};
  for (unsigned by = 0; by < gridDim.y; ++by) {
    for (unsigned bx = 0; bx < gridDim.x; ++bx) {
      for (unsigned ty = 0; ty < blockDim.y; ++ty) {
        for (unsigned tx = 0; tx < blockDim.x; ++tx) {
          blockIdx = {bx, by, 0};
          threadIdx = {tx, ty, 0};
          kernel();
        }
      }
    }
  }
}

// Memory that stands for a device allocation: 256-byte aligned like cuMemAlloc's, random to start with.
class memory {
 public:
  memory(std::size_t size, std::uint64_t seed) : storage_(size + 256), initial_(ferry::testing::random_vector<std::uint8_t>(size, seed)) {
    const auto address = reinterpret_cast<std::uintptr_t>(storage_.data());
    base_ = storage_.data() + (256 - address % 256) % 256;
    reset();
  }
  void reset() { std::memcpy(base_, initial_.data(), initial_.size()); }
  std::uint64_t address(std::size_t offset = 0) const { return reinterpret_cast<std::uint64_t>(base_ + offset); }
  const bytes& initial() const { return initial_; }
  bytes contents() const { return bytes(base_, base_ + initial_.size()); }

 private:
  bytes storage_;
  bytes initial_;
  std::uint8_t* base_ = nullptr;
};

ferry::detail::kernels::pattern16 replicated(const std::uint8_t* element, std::size_t element_size) {
  std::uint8_t pattern[16];
  for (std::size_t k = 0; k < 16; ++k) pattern[k] = element[k % element_size];
  ferry::detail::kernels::pattern16 p{};
  std::memcpy(&p.low, pattern, 8);
  std::memcpy(&p.high, pattern + 8, 8);
  return p;
}

bool same(const bytes& expected, const bytes& actual) {
  return !first_difference(std::as_bytes(std::span(expected)), std::as_bytes(std::span(actual)));
}

}  // namespace

BOOST_AUTO_TEST_CASE(fill_device_code_writes_the_elements_and_nothing_else) {
  memory m(1 << 20, 1);
  std::mt19937_64 generator(2);
  // The launcher's grid (a block per tile), and grids of 1 and 3 blocks, whose blocks take further tiles
  // in turn (as past the grid's limit).
  for (std::uint64_t blocks : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{3}}) {
    for (int trial = 0; trial < 200; ++trial) {
      const std::size_t element_size = trial % 2 == 0 ? 8 : 16;
      const std::size_t offset = generator() % 64;
      const std::size_t count = 1 + (trial < 80 ? generator() % 40 : generator() % ((1 << 19) / element_size));
      const auto element = ferry::testing::random_vector<std::uint8_t>(16, generator());
      ferry::detail::kernels::fill_parameters p{m.address(offset), count, replicated(element.data(), 16)};
      m.reset();
      launch_geometry shape = ferry::detail::fill_geometry(count * element_size);
      if (blocks != 0) shape.grid_x = blocks;
      run(shape, [&] { element_size == 8 ? ferry_fill_8(p) : ferry_fill_16(p); });
      bytes expected = m.initial();
      for (std::size_t i = 0; i < count * element_size; ++i) expected[offset + i] = element[i % element_size];
      BOOST_CHECK_MESSAGE(same(expected, m.contents()), element_size << "-byte fill of " << count << " at offset "
                                                                      << offset << ", grid " << shape.grid_x);
    }
  }
}

BOOST_AUTO_TEST_CASE(fill_2d_device_code_writes_the_rows_and_nothing_between_them) {
  memory m(1 << 20, 3);
  std::mt19937_64 generator(4);
  for (std::uint64_t resident : resident_threads) {
    for (int trial = 0; trial < 150; ++trial) {
      const std::size_t element_size = std::size_t{1} << (generator() % 5);
      const std::size_t pitch = 16 + generator() % 5000;
      const std::size_t width = 1 + generator() % (pitch / element_size);
      const std::size_t x = generator() % ((pitch - width * element_size) / element_size + 1);
      const std::size_t rows = (1 << 20) / pitch;
      const std::size_t height = trial % 3 == 0 ? 1 + generator() % 4 : 1 + generator() % (rows - 1);
      const std::size_t y = generator() % (rows - height + 1);
      const auto element = ferry::testing::random_vector<std::uint8_t>(element_size, generator());
      const std::size_t row_bytes = width * element_size;
      ferry::detail::kernels::fill_2d_parameters p{m.address(y * pitch + x * element_size), pitch, row_bytes, height,
                                                   replicated(element.data(), element_size)};
      m.reset();
      run(ferry::detail::fill_2d_geometry(row_bytes, height, resident), [&] { ferry_fill_2d(p); });
      bytes expected = m.initial();
      for (std::size_t row = y; row < y + height; ++row) {
        for (std::size_t i = 0; i < row_bytes; ++i) expected[row * pitch + x * element_size + i] = element[i % element_size];
      }
      BOOST_CHECK_MESSAGE(same(expected, m.contents()), element_size << "-byte 2-D fill of " << width << " x " << height
                                                                      << " at (" << x << ", " << y << "), pitch "
                                                                      << pitch << ", " << resident << " threads");
    }
  }
}

BOOST_AUTO_TEST_CASE(copy_blocks_device_code_copies_every_block_and_nothing_else) {
  // Sources in the first half, destinations in the second, with gaps; one block in three shares its
  // alignment modulo 16 between its ends (16-byte accesses), the others fall where they may.
  memory m(1 << 20, 5);
  std::mt19937_64 generator(6);
  const std::size_t half = (1 << 20) / 2;
  for (int trial = 0; trial < 40; ++trial) {
    const std::size_t count = 1 + generator() % 300;
    std::vector<std::uint64_t> words(3 * count);
    bytes expected = m.initial();
    std::size_t next = half;
    for (std::size_t i = 0; i < count; ++i) {
      std::size_t size = 1 + (generator() % 2 == 0 ? generator() % 40 : generator() % 1500);
      const std::size_t destination = next + generator() % 40;
      if (destination + size > 2 * half) size = 0;
      next = destination + size;
      std::size_t source = 16 + generator() % (half - size - 16);
      if (i % 3 == 0) source -= (source - destination) % 16;
      words[i] = m.address(source);
      words[count + i] = m.address(destination);
      words[2 * count + i] = size;
      std::memcpy(expected.data() + destination, m.initial().data() + source, size);
    }
    const auto array = [&](std::size_t i) { return reinterpret_cast<std::uint64_t>(words.data() + i * count); };
    ferry::detail::kernels::copy_blocks_parameters p{array(0), array(1), array(2), count};
    m.reset();
    launch_geometry shape = ferry::detail::copy_blocks_geometry(count);
    if (trial % 2 == 1) shape.grid_x = 7;  // fewer blocks of threads than copies: each takes several in turn
    run(shape, [&] { ferry_copy_blocks(p); });
    BOOST_CHECK_MESSAGE(same(expected, m.contents()), count << " blocks, grid " << shape.grid_x);
  }
}

BOOST_AUTO_TEST_CASE(copy_span_device_code_copies_the_span_and_nothing_else) {
  // The launcher's grid on either GPU, and grids of 1 and 3 blocks that loop over the span many times;
  // ends aligned alike modulo 16 or not, sizes from a byte to past a pass of the grid.
  memory m(1 << 20, 7);
  std::mt19937_64 generator(8);
  const std::size_t half = (1 << 20) / 2;
  for (int trial = 0; trial < 60; ++trial) {
    const std::size_t size = 1 + (trial % 3 == 0 ? generator() % 40 : generator() % (half - 64));
    std::size_t source = generator() % (half - size);
    const std::size_t destination = half + generator() % (half - size);
    if (trial % 2 == 0 && source >= 16) source -= (source + 16 - destination % 16) % 16;
    ferry::detail::kernels::copy_span_parameters p{m.address(source), m.address(destination), size};
    launch_geometry shape = ferry::detail::copy_span_geometry(size, resident_threads[trial % 2]);
    if (trial % 4 == 1) shape.grid_x = 1;
    if (trial % 4 == 3) shape.grid_x = 3;
    m.reset();
    run(shape, [&] { ferry_copy_span(p); });
    bytes expected = m.initial();
    std::memcpy(expected.data() + destination, m.initial().data() + source, size);
    BOOST_CHECK_MESSAGE(same(expected, m.contents()), size << " bytes " << source << " -> " << destination << ", grid "
                                                            << shape.grid_x);
  }
}
