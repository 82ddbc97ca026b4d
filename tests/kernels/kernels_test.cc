// The kernels of kernels/ through engine/kernels: every byte of every result is compared with a
// straightforward expectation, and with the host reference (host_kernels.hpp, the code the sim's twins
// run). On cuda that compares the GPU kernel with its twin; on sim the twin runs as the kernel, and the
// expectation, written independently, is what checks it.
#include "engine/kernels/launch.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <span>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <vector>

#include "engine/driver/driver_table.hpp"
#include "engine/kernels/copy_block_list.hpp"
#include "engine/kernels/host_kernels.hpp"
#include "engine/kernels/kernel_parameters.hpp"
#include "ferry/marshal.hpp"
#include "sim/control.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/random_bytes.hpp"

using namespace ferry;
using ferry::testing::first_difference;
using ferry::testing::on_sim;
using ferry::testing::only_on_sim;
using ferry::testing::random_vector;
using bytes = std::vector<std::uint8_t>;

namespace {

// Kernels loaded during a test are unloaded before device_fixture checks for leaks (it counts modules)
// and releases the primary context (which would free the module behind the loader's back).
struct kernels_fixture : ferry::testing::device_fixture {
  ~kernels_fixture() { BOOST_CHECK_EQUAL(detail::unload_kernels(), CUDA_SUCCESS); }
};

std::size_t modules_loaded() { return ferry::testing::usage_now().modules; }

// A device buffer and the bytes it was given: random, or poison for destinations.
struct arena {
  enum class start { random, poisoned };

  arena(std::size_t size, start contents, std::uint64_t seed)
      : initial(contents == start::random ? random_vector<std::uint8_t>(size, seed)
                                          : bytes(size, static_cast<std::uint8_t>(ferry::testing::poison))),
        buffer(device_buffer<std::uint8_t>::allocate(size)) {
    poke_array(size, initial.data(), buffer.get());
    // A synchronous copy from pageable memory may return before its DMA has landed (the driver only
    // promises the bytes have left the caller's buffer); the kernels run on non-blocking streams, which
    // do not wait for it, and would race it.
    BOOST_REQUIRE_EQUAL(detail::driver().cuCtxSynchronize(), CUDA_SUCCESS);
  }

  CUdeviceptr base() const { return buffer.get().get(); }
  bytes read() const { return peek_list_array(initial.size(), buffer.get()); }

  bytes initial;
  device_buffer<std::uint8_t> buffer;
};

// Host copies of device buffers, standing in for them when the host reference runs: a device range
// inside one of them maps to the same bytes of its copy. Anything else throws, as a kernel would fault.
class host_mirror {
 public:
  void add(const arena& a) { copies_.emplace(a.base(), a.initial); }
  bytes& of(const arena& a) { return copies_.at(a.base()); }

  void* operator()(std::uint64_t address, std::uint64_t size) {
    auto it = copies_.upper_bound(address);
    if (it != copies_.begin()) {
      --it;
      const std::uint64_t offset = address - it->first;
      if (offset <= it->second.size() && size <= it->second.size() - offset) return it->second.data() + offset;
    }
    throw std::out_of_range("host_mirror: the range is not in any mirrored buffer");
  }

 private:
  std::map<std::uint64_t, bytes> copies_;
};

// Every byte: the expectation against the host reference and against what the kernel wrote.
void check_bytes(const char* what, const bytes& expected, const bytes& reference, const bytes& device) {
  const auto as_bytes = [](const bytes& b) { return std::as_bytes(std::span(b)); };
  if (auto at = first_difference(as_bytes(expected), as_bytes(reference))) {
    BOOST_ERROR(what << ": the host reference differs from the expectation at byte " << *at);
  }
  if (auto at = first_difference(as_bytes(expected), as_bytes(device))) {
    BOOST_ERROR(what << ": the kernel (" << (on_sim() ? "its host twin on sim" : "on the GPU")
                     << ") differs from the expectation at byte " << *at << ": expected 0x" << std::hex
                     << int{expected[*at]} << ", got 0x" << int{device[*at]} << std::dec);
  }
}

// Fills `count` elements of `element_size` bytes at byte `offset` of a random arena of `size` bytes.
void check_fill(std::size_t size, std::size_t offset, std::size_t count, std::size_t element_size,
                std::uint64_t seed) {
  arena a(size, arena::start::random, seed);
  const bytes element = random_vector<std::uint8_t>(element_size, seed + 1);
  stream s = stream::create();
  BOOST_REQUIRE_EQUAL(detail::launch_fill(a.base() + offset, count, element_size, element.data(), s.get()),
                      CUDA_SUCCESS);
  s.synchronize();

  bytes expected = a.initial;
  for (std::size_t i = 0; i < count * element_size; ++i) expected[offset + i] = element[i % element_size];

  host_mirror mirror;
  mirror.add(a);
  detail::kernels::fill_parameters p{};
  BOOST_REQUIRE_EQUAL(detail::make_fill_parameters(a.base() + offset, count, element_size, element.data(), p),
                      CUDA_SUCCESS);
  detail::host_kernels::fill(element_size, p, mirror);
  BOOST_TEST_CONTEXT(element_size << "-byte fill of " << count << " elements at offset " << offset) {
    check_bytes("fill", expected, mirror.of(a), a.read());
  }
}

// Fills `height` rows of `width` elements from element (x, y) of a random pitched arena of `rows` rows.
void check_fill_2d(std::size_t pitch, std::size_t rows, std::size_t x, std::size_t y, std::size_t width,
                   std::size_t height, std::size_t element_size, std::uint64_t seed) {
  arena a(pitch * rows, arena::start::random, seed);
  const bytes element = random_vector<std::uint8_t>(element_size, seed + 1);
  const CUdeviceptr base = a.base() + y * pitch + x * element_size;
  stream s = stream::create();
  BOOST_REQUIRE_EQUAL(detail::launch_fill_2d(base, pitch, width, height, element_size, element.data(), s.get()),
                      CUDA_SUCCESS);
  s.synchronize();

  bytes expected = a.initial;
  for (std::size_t row = y; row < y + height; ++row) {
    for (std::size_t i = 0; i < width * element_size; ++i) {
      expected[row * pitch + x * element_size + i] = element[i % element_size];
    }
  }

  host_mirror mirror;
  mirror.add(a);
  detail::kernels::fill_2d_parameters p{};
  BOOST_REQUIRE_EQUAL(detail::make_fill_2d_parameters(base, pitch, width, height, element_size, element.data(), p),
                      CUDA_SUCCESS);
  detail::host_kernels::fill_2d(p, mirror);
  BOOST_TEST_CONTEXT(element_size << "-byte 2-D fill of " << width << " x " << height << " at (" << x << ", " << y
                                  << "), pitch " << pitch) {
    check_bytes("fill_2d", expected, mirror.of(a), a.read());
  }
}

struct block {
  std::size_t source_offset;
  std::size_t destination_offset;
  std::size_t size;
};

// `count` blocks with sizes from 1 byte to 64 KiB (log-uniform, so that small and large ones both
// abound, plus the sizes around 16), at random places of a source of `source_size` bytes, and places
// that do not overlap in a destination of the returned size. One in four shares its alignment modulo 16
// between the two ends, one in four modulo 8, one in four modulo 4, the rest are random; the blocks are
// then shuffled, so destinations are in no order.
std::vector<block> random_blocks(std::size_t count, std::size_t source_size, CUdeviceptr source_base,
                                 CUdeviceptr destination_base, std::uint64_t seed, std::size_t& destination_size) {
  std::mt19937_64 generator(seed);
  std::uniform_real_distribution<double> log_size(0.0, 16.0);
  const std::vector<std::size_t> edge_sizes = {1, 2, 15, 16, 17, 31, 32, 33, 65536};
  std::vector<block> blocks;
  std::size_t next = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t size = i < edge_sizes.size()
                                 ? edge_sizes[i]
                                 : std::clamp<std::size_t>(static_cast<std::size_t>(std::exp2(log_size(generator))), 1, 65536);
    const std::size_t destination_offset = next + generator() % 64;
    next = destination_offset + size;
    const std::size_t modulus[] = {16, 16, 8, 1};
    const std::size_t remainder[] = {0, 8, 4, 0};
    const std::size_t kind = i % 4;
    // Moves a random source offset down until (source - destination) % modulus == remainder.
    const std::size_t r = 16 + generator() % (source_size - size - 16);
    const std::uint64_t difference = source_base + r - (destination_base + destination_offset) - remainder[kind];
    blocks.push_back(block{r - difference % modulus[kind], destination_offset, size});
  }
  std::shuffle(blocks.begin(), blocks.end(), generator);
  destination_size = next + 64;
  return blocks;
}

// The three arrays of a copy_block_list for `blocks`, uploaded in one copy.
arena upload(const detail::copy_block_list& list) {
  arena table(list.bytes(), arena::start::poisoned, 0);
  std::memcpy(table.initial.data(), list.words.data(), list.bytes());
  poke_array(table.initial.size(), table.initial.data(), table.buffer.get());
  return table;
}

detail::copy_block_list list_of(const std::vector<block>& blocks, CUdeviceptr source, CUdeviceptr destination) {
  detail::copy_block_list list;
  list.words.resize(3 * blocks.size());
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    list.words[i] = source + blocks[i].source_offset;
    list.words[blocks.size() + i] = destination + blocks[i].destination_offset;
    list.words[2 * blocks.size() + i] = blocks[i].size;
  }
  return list;
}

// Runs the host reference of ferry_copy_blocks for an uploaded list on mirrors of the three arenas and
// returns what it left in the destination.
bytes reference_copy(const arena& source, const arena& destination, const arena& table, std::size_t count) {
  host_mirror mirror;
  mirror.add(source);
  mirror.add(destination);
  mirror.add(table);
  const std::uint64_t array_bytes = count * sizeof(std::uint64_t);
  detail::kernels::copy_blocks_parameters p{};
  BOOST_REQUIRE_EQUAL(detail::make_copy_blocks_parameters(table.base(), table.base() + array_bytes,
                                                          table.base() + 2 * array_bytes, count, p),
                      CUDA_SUCCESS);
  detail::host_kernels::copy_blocks(p, mirror);
  return mirror.of(destination);
}

}  // namespace

// The arithmetic the GPU kernels share with their twins, against its definitions, so that what only a
// GPU would show (an access wider than both ends are aligned to, a store of the wrong rotation) shows here.
BOOST_AUTO_TEST_CASE(layout_arithmetic_keeps_its_definitions) {
  using namespace detail::kernels;
  for (std::uint64_t difference = 0; difference < 64; ++difference) {
    std::uint64_t widest = 16;
    while (difference % widest != 0) widest /= 2;
    BOOST_CHECK_EQUAL(copy_width(1000 + difference, 1000), widest);
    BOOST_CHECK_EQUAL(copy_width(1000, 1000 + difference), widest);
  }
  const pattern16 counting{0x0706050403020100u, 0x0f0e0d0c0b0a0908u};
  for (std::uint64_t offset = 0; offset < 40; ++offset) {
    const pattern16 r = rotated(counting, offset);
    for (std::uint64_t k = 0; k < 16; ++k) {
      BOOST_CHECK_EQUAL(pattern_byte(r, k), (offset + k) % 16);
      BOOST_CHECK_EQUAL(pattern_byte(counting, offset + k), (offset + k) % 16);
    }
  }
  for (std::uint64_t width : {1, 2, 4, 8, 16}) {
    for (std::uint64_t address = 1024; address < 1064; ++address) {
      for (std::uint64_t size = 0; size < 70; ++size) {
        const split parts = split_at_width(address, size, width);
        const bool ok = parts.head + parts.units * width + parts.tail == size && parts.head < width &&
                        (parts.head == size || (address + parts.head) % width == 0) && parts.tail < width &&
                        (parts.tail == 0 || parts.head < size);
        BOOST_CHECK_MESSAGE(ok, "split_at_width(" << address << ", " << size << ", " << width << ") = {" << parts.head
                                                  << ", " << parts.units << ", " << parts.tail << "}");
      }
    }
  }
}

// The resident copier's slot words: every value below 2^48 comes back with its entry's tag, and the
// entries that take turns in one slot of a ring of up to 65,534 slots never share a tag.
BOOST_AUTO_TEST_CASE(resident_slot_words_carry_their_entrys_tag_and_turns_in_a_slot_never_share_one) {
  using namespace detail::kernels;
  std::mt19937_64 random(7);
  for (int trial = 0; trial < 10000; ++trial) {
    const std::uint64_t value = random() % resident_value_limit;
    const std::uint64_t index = random();
    const std::uint64_t word = resident_word(value, index);
    BOOST_TEST_REQUIRE(resident_value(word) == value);
    BOOST_TEST_REQUIRE(resident_word_of(word, index));
    BOOST_TEST_REQUIRE(!resident_word_of(word, index + 1));
    BOOST_TEST_REQUIRE(!resident_word_of(value, index));  // a word without the tag
  }
  for (std::uint64_t slots : {1u, 2u, 256u, 4096u, 65534u}) {
    for (std::uint64_t index : {std::uint64_t{0}, std::uint64_t{65533}, std::uint64_t{1} << 40}) {
      BOOST_TEST(resident_tag(index) != resident_tag(index + slots), "slots " << slots << ", entry " << index);
      BOOST_TEST(resident_tag(index) != 0u);
    }
  }
}

// The twin of ferry_resident_copy takes an entry only once every word of its slot carries the entry's
// tag: with one word still from before, it waits and has copied nothing; then it copies every byte,
// gives the slot back, writes the flag, and ends at the stop entry behind.
BOOST_AUTO_TEST_CASE(the_resident_copiers_twin_waits_for_every_word_of_an_entry) {
  using namespace detail::kernels;
  const bytes source = random_vector<std::uint8_t>(3001, 11);
  constexpr auto poisoned = std::to_integer<std::uint8_t>(ferry::testing::poison);
  bytes destination(source.size(), poisoned);
  std::vector<resident_slot> ring(4, resident_slot{});
  std::uint64_t consumed = 0;
  std::uint32_t flag = 0;
  const auto address = [](const void* p) { return reinterpret_cast<std::uint64_t>(p); };
  std::uint64_t copy[resident_slot_words];
  resident_words({address(source.data()), address(destination.data()), source.size(), address(&flag), 0xfeedu,
                  resident_copy_entry},
                 0, copy);
  for (unsigned k = 0; k + 1 < resident_slot_words; ++k) ring[0].words[k] = copy[k];
  resident_words({0, 0, 0, 0, 0, resident_stop}, 1, ring[1].words);
  int waits = 0;
  const resident_copy_parameters p{address(ring.data()), ring.size(), 0, address(&consumed)};
  detail::host_kernels::resident_copy(
      p, [](std::uint64_t at, std::uint64_t) { return reinterpret_cast<void*>(at); },
      [&](std::uint64_t looks) {
        ++waits;
        BOOST_TEST_REQUIRE(looks == 0u);
        BOOST_TEST_REQUIRE(
            std::all_of(destination.begin(), destination.end(), [&](std::uint8_t b) { return b == poisoned; }));
        BOOST_TEST_REQUIRE(consumed == 0u);
        ring[0].words[4] = copy[4];  // the entry's last word
      },
      [](std::uint64_t) {});
  BOOST_TEST(waits == 1);
  BOOST_TEST(ferry::testing::same_bytes(destination, source));
  BOOST_TEST(consumed == 1u);
  BOOST_TEST(flag == 0xfeedu);
}

BOOST_FIXTURE_TEST_SUITE(kernels_suite, kernels_fixture)

BOOST_AUTO_TEST_CASE(fill_8_writes_every_element_and_nothing_around_them) {
  check_fill(1 << 20, 8, 1, 8, 11);
  check_fill(1 << 20, 8 * 3, 1001, 8, 12);        // 8 bytes past a 16-byte boundary
  check_fill(1 << 20, 16 * 5, 4096, 8, 13);       // aligned, a whole number of 16-byte stores
  check_fill(1 << 20, 8 * 7, 100003, 8, 14);      // odd count: a half store at the end
  check_fill(1 << 20, 3, 17, 8, 15);              // no alignment at all
  check_fill(1 << 20, (1 << 20) - 8 * 5, 5, 8, 16);  // up to the last byte of the allocation
}

BOOST_AUTO_TEST_CASE(fill_16_writes_every_element_and_nothing_around_them) {
  check_fill(1 << 20, 16, 1, 16, 21);
  check_fill(1 << 20, 16 * 3, 7, 16, 22);
  check_fill(1 << 20, 16 * 3 + 8, 65000, 16, 23);    // 8-byte aligned elements: every store straddles two
  check_fill(1 << 20, 5, 333, 16, 24);
  check_fill(1 << 20, 0, (1 << 20) / 16, 16, 25);  // the whole allocation
}

BOOST_AUTO_TEST_CASE(fills_larger_than_one_wave_of_threads_loop_to_the_end) {
  // 64 MiB: many times what one wave of the grid stores per pass, with a ragged end.
  check_fill((std::size_t{64} << 20) + 4096, 24, ((std::size_t{64} << 20) + 40) / 8, 8, 31);
  check_fill((std::size_t{64} << 20) + 4096, 16, ((std::size_t{64} << 20) + 48) / 16, 16, 32);
}

BOOST_AUTO_TEST_CASE(fill_2d_fills_the_region_and_leaves_the_gaps_between_rows) {
  std::uint64_t seed = 41;
  for (std::size_t element_size : {1, 2, 4, 8, 16}) {
    // A pitch that is no multiple of 16, so that each row starts at another alignment.
    check_fill_2d(1000, 40, 3, 5, 1000 / element_size - 4, 30, element_size, seed++);
    check_fill_2d(4096, 12, 1, 2, 7, 9, element_size, seed++);
    check_fill_2d(48, 3000, 1, 7, 16 / element_size + 1, 2990, element_size, seed++);  // narrow rows
  }
  // Rows wider than one block (grid x > 1) and more rows than grid y can hold at once.
  check_fill_2d(80016, 6, 1, 1, 80000 / 16 - 1, 5, 16, seed++);
  check_fill_2d(20, 70010, 2, 3, 12, 70000, 1, seed++);
}

BOOST_AUTO_TEST_CASE(empty_launches_succeed_and_write_nothing) {
  arena a(256, arena::start::random, 51);
  const std::uint64_t pattern[2] = {1, 2};
  stream s = stream::create();
  BOOST_CHECK_EQUAL(detail::launch_fill(a.base(), 0, 8, pattern, s.get()), CUDA_SUCCESS);
  BOOST_CHECK_EQUAL(detail::launch_fill_2d(a.base(), 64, 0, 3, 4, pattern, s.get()), CUDA_SUCCESS);
  BOOST_CHECK_EQUAL(detail::launch_fill_2d(a.base(), 64, 3, 0, 4, pattern, s.get()), CUDA_SUCCESS);
  BOOST_CHECK_EQUAL(detail::launch_copy_blocks(0, 0, 0, 0, s.get()), CUDA_SUCCESS);
  s.synchronize();
  BOOST_CHECK(a.read() == a.initial);
}

BOOST_AUTO_TEST_CASE(copy_blocks_copies_hundreds_of_blocks_of_random_sizes_at_random_offsets) {
  arena source(std::size_t{1} << 20, arena::start::random, 61);
  std::size_t destination_size = 0;
  // Place blocks relative to where the destination will be: allocate it first with a generous size.
  arena destination(std::size_t{8} << 20, arena::start::poisoned, 0);
  std::vector<block> blocks = random_blocks(300, source.initial.size(), source.base(), destination.base(), 62,
                                            destination_size);
  BOOST_REQUIRE_LE(destination_size, destination.initial.size());

  const detail::copy_block_list list = list_of(blocks, source.base(), destination.base());
  arena table = upload(list);
  stream s = stream::create();
  BOOST_REQUIRE_EQUAL(detail::launch_copy_block_list(table.base(), list.count(), s.get()), CUDA_SUCCESS);
  s.synchronize();

  bytes expected = destination.initial;
  for (const block& b : blocks) {
    std::memcpy(expected.data() + b.destination_offset, source.initial.data() + b.source_offset, b.size);
  }
  check_bytes("copy_blocks", expected, reference_copy(source, destination, table, list.count()), destination.read());
}

BOOST_AUTO_TEST_CASE(copy_span_copies_spans_at_every_alignment_and_nothing_around_them) {
  // Sizes below one 16-byte unit, around a pass of the grid, and past one wave of threads; ends aligned
  // alike modulo 16 (16-byte accesses) and not.
  std::uint64_t seed = 65;
  for (auto [source_offset, destination_offset, size] :
       {std::tuple<std::size_t, std::size_t, std::size_t>{0, 0, 1}, {3, 19, 15}, {16, 48, 4096 * 16 + 5},
        {1, 6, 100003}, {7, 7, (std::size_t{6} << 20) + 9}}) {
    arena source(size + 64, arena::start::random, ++seed);
    arena destination(size + 64, arena::start::poisoned, 0);
    stream s = stream::create();
    BOOST_REQUIRE_EQUAL(detail::launch_copy_span(source.base() + source_offset, destination.base() + destination_offset,
                                                 size, s.get()),
                        CUDA_SUCCESS);
    s.synchronize();
    bytes expected = destination.initial;
    std::memcpy(expected.data() + destination_offset, source.initial.data() + source_offset, size);
    host_mirror mirror;
    mirror.add(source);
    mirror.add(destination);
    detail::kernels::copy_span_parameters p{};
    BOOST_REQUIRE_EQUAL(detail::make_copy_span_parameters(source.base() + source_offset,
                                                          destination.base() + destination_offset, size, p),
                        CUDA_SUCCESS);
    detail::host_kernels::copy_span(p, mirror);
    BOOST_TEST_CONTEXT(size << " bytes from offset " << source_offset << " to offset " << destination_offset) {
      check_bytes("copy_span", expected, mirror.of(destination), destination.read());
    }
  }
}

BOOST_AUTO_TEST_CASE(copy_span_refuses_overlapping_or_null_ends_before_anything_is_loaded) {
  arena a(4096, arena::start::random, 67);
  stream s = stream::create();
  BOOST_CHECK_EQUAL(detail::launch_copy_span(a.base(), a.base() + 100, 200, s.get()), CUDA_ERROR_INVALID_VALUE);
  BOOST_CHECK_EQUAL(detail::launch_copy_span(0, a.base(), 16, s.get()), CUDA_ERROR_INVALID_VALUE);
  BOOST_CHECK_EQUAL(detail::launch_copy_span(a.base(), 0, 16, s.get()), CUDA_ERROR_INVALID_VALUE);
  BOOST_CHECK_EQUAL(detail::launch_copy_span(0, 0, 0, s.get()), CUDA_SUCCESS);  // nothing to copy
  s.synchronize();
  BOOST_CHECK(a.read() == a.initial);
}

BOOST_AUTO_TEST_CASE(gather_packs_blocks_in_order_and_scatter_spreads_them_out_again) {
  // Gather: 200 blocks from random, possibly overlapping, places of the source, packed in order.
  arena source(std::size_t{1} << 20, arena::start::random, 71);
  std::mt19937_64 generator(72);
  std::vector<CUdeviceptr> places;
  std::vector<std::size_t> sizes;
  bytes expected_packed;
  for (std::size_t i = 0; i < 200; ++i) {
    sizes.push_back(1 + generator() % 4096);
    const std::size_t offset = generator() % (source.initial.size() - sizes.back());
    places.push_back(source.base() + offset);
    expected_packed.insert(expected_packed.end(), source.initial.begin() + static_cast<std::ptrdiff_t>(offset),
                           source.initial.begin() + static_cast<std::ptrdiff_t>(offset + sizes.back()));
  }
  arena packed(expected_packed.size(), arena::start::poisoned, 0);
  const detail::copy_block_list gather = detail::gather_list(places, sizes, packed.base());
  arena gather_table = upload(gather);
  stream s = stream::create();
  BOOST_REQUIRE_EQUAL(detail::launch_copy_block_list(gather_table.base(), gather.count(), s.get()), CUDA_SUCCESS);
  s.synchronize();
  check_bytes("gather", expected_packed, reference_copy(source, packed, gather_table, gather.count()), packed.read());

  // Scatter the packed blocks (as the gather left them on the device) to places that do not overlap,
  // in an order unrelated to the packing.
  std::vector<std::size_t> order(sizes.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), generator);
  std::vector<std::size_t> scattered_offsets(sizes.size());
  std::size_t next = 0;
  for (std::size_t i : order) {
    scattered_offsets[i] = next + generator() % 32;
    next = scattered_offsets[i] + sizes[i];
  }
  arena scattered(next + 32, arena::start::poisoned, 0);
  std::vector<CUdeviceptr> destinations;
  for (std::size_t offset : scattered_offsets) destinations.push_back(scattered.base() + offset);
  packed.initial = packed.read();
  const detail::copy_block_list scatter = detail::scatter_list(packed.base(), destinations, sizes);
  arena scatter_table = upload(scatter);
  BOOST_REQUIRE_EQUAL(detail::launch_copy_block_list(scatter_table.base(), scatter.count(), s.get()), CUDA_SUCCESS);
  s.synchronize();
  bytes expected_scattered = scattered.initial;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    std::memcpy(expected_scattered.data() + scattered_offsets[i], source.initial.data() + (places[i] - source.base()),
                sizes[i]);
  }
  check_bytes("scatter", expected_scattered, reference_copy(packed, scattered, scatter_table, scatter.count()),
              scattered.read());
}

BOOST_AUTO_TEST_CASE(gather_and_scatter_lists_refuse_mismatched_spans) {
  const std::vector<CUdeviceptr> places = {0x1000, 0x2000};
  const std::vector<std::size_t> sizes = {16};
  ferry::testing::expect_error<std::invalid_argument>([&] { detail::gather_list(places, sizes, 0x8000); },
                                                      {"gather_list: 2 addresses but 1 sizes"});
  ferry::testing::expect_error<std::invalid_argument>([&] { detail::scatter_list(0x8000, places, sizes); },
                                                      {"scatter_list: 2 addresses but 1 sizes"});
  const std::vector<std::size_t> huge = {std::size_t{1} << 63, std::size_t{1} << 63};
  ferry::testing::expect_error<std::invalid_argument>([&] { detail::gather_list(places, huge, 0x8000); },
                                                      {"gather_list: the packed blocks run past the end"});
}

BOOST_AUTO_TEST_CASE(arguments_a_kernel_cannot_take_are_refused_before_anything_is_loaded) {
  arena a(4096, arena::start::random, 81);
  const std::uint64_t pattern[2] = {1, 2};
  const std::size_t modules = modules_loaded();
  stream s = stream::create();
  const CUstream q = s.get();
  BOOST_CHECK_EQUAL(detail::launch_fill(a.base(), 4, 4, pattern, q), CUDA_ERROR_INVALID_VALUE);
  BOOST_CHECK_EQUAL(detail::launch_fill(a.base(), 4, 8, nullptr, q), CUDA_ERROR_INVALID_VALUE);
  BOOST_CHECK_EQUAL(detail::launch_fill(0, 4, 8, pattern, q), CUDA_ERROR_INVALID_VALUE);
  BOOST_CHECK_EQUAL(detail::launch_fill(a.base(), std::size_t{1} << 61, 16, pattern, q), CUDA_ERROR_INVALID_VALUE);
  BOOST_CHECK_EQUAL(detail::launch_fill(~CUdeviceptr{0} - 8, 2, 8, pattern, q), CUDA_ERROR_INVALID_VALUE);
  BOOST_CHECK_EQUAL(detail::launch_fill_2d(a.base(), 64, 4, 4, 3, pattern, q), CUDA_ERROR_INVALID_VALUE);
  BOOST_CHECK_EQUAL(detail::launch_fill_2d(a.base(), 15, 4, 4, 4, pattern, q), CUDA_ERROR_INVALID_VALUE);
  BOOST_CHECK_EQUAL(detail::launch_fill_2d(a.base(), 64, 4, 4, 4, nullptr, q), CUDA_ERROR_INVALID_VALUE);
  BOOST_CHECK_EQUAL(detail::launch_fill_2d(a.base(), ~std::size_t{0} / 2, 4, 4, 4, pattern, q),
                    CUDA_ERROR_INVALID_VALUE);
  BOOST_CHECK_EQUAL(detail::launch_copy_blocks(a.base() + 4, a.base() + 64, a.base() + 128, 2, q),
                    CUDA_ERROR_INVALID_VALUE);
  BOOST_CHECK_EQUAL(detail::launch_copy_blocks(0, a.base() + 64, a.base() + 128, 2, q), CUDA_ERROR_INVALID_VALUE);
  BOOST_CHECK_EQUAL(detail::launch_copy_blocks(a.base(), a.base(), a.base(), std::size_t{1} << 62, q),
                    CUDA_ERROR_INVALID_VALUE);
  s.synchronize();
  BOOST_CHECK_EQUAL(modules_loaded(), modules);
  BOOST_CHECK(a.read() == a.initial);
}

BOOST_AUTO_TEST_CASE(a_launch_without_a_current_context_reports_invalid_context) {
  arena a(64, arena::start::random, 91);
  CUresult status = CUDA_SUCCESS;
  std::thread([&] {
    const std::uint64_t pattern = 7;
    status = detail::launch_fill(a.base(), 2, 8, &pattern, nullptr);
  }).join();
  BOOST_CHECK_EQUAL(status, CUDA_ERROR_INVALID_CONTEXT);
  BOOST_CHECK(a.read() == a.initial);
}

BOOST_AUTO_TEST_CASE(threads_racing_on_the_first_launch_load_one_module_and_all_launch) {
  constexpr std::size_t threads = 8;
  constexpr std::size_t per_thread = 1000;
  arena a(threads * per_thread * 16, arena::start::random, 101);
  const std::size_t modules = modules_loaded();
  std::vector<CUresult> results(threads, CUDA_ERROR_UNKNOWN);
  std::atomic<std::size_t> waiting{threads};
  std::vector<std::thread> workers;
  for (std::size_t t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      context_guard current(primary);
      stream s = stream::create();
      const std::uint64_t pattern[2] = {0x0101010101010101u * (t + 1), 0x1010101010101010u * (t + 1)};
      waiting.fetch_sub(1);
      while (waiting.load() != 0) std::this_thread::yield();
      results[t] = detail::launch_fill(a.base() + t * per_thread * 16, per_thread, 16, pattern, s.get());
      s.synchronize();
    });
  }
  for (std::thread& w : workers) w.join();
  for (std::size_t t = 0; t < threads; ++t) BOOST_CHECK_EQUAL(results[t], CUDA_SUCCESS);
  if (on_sim()) BOOST_CHECK_EQUAL(modules_loaded(), modules + 1);
  bytes expected(a.initial.size());
  for (std::size_t t = 0; t < threads; ++t) {
    const std::uint64_t pattern[2] = {0x0101010101010101u * (t + 1), 0x1010101010101010u * (t + 1)};
    for (std::size_t i = 0; i < per_thread; ++i) std::memcpy(expected.data() + (t * per_thread + i) * 16, pattern, 16);
  }
  BOOST_CHECK(a.read() == expected);
}

BOOST_AUTO_TEST_CASE(kernels_load_once_per_context_and_unload_releases_them, *only_on_sim()) {
  const std::uint64_t pattern = 0x0123456789abcdefu;
  arena a(64, arena::start::random, 111);
  stream s = stream::create();
  const std::size_t modules = modules_loaded();
  BOOST_REQUIRE_EQUAL(detail::launch_fill(a.base(), 2, 8, &pattern, s.get()), CUDA_SUCCESS);
  BOOST_CHECK_EQUAL(modules_loaded(), modules + 1);
  BOOST_REQUIRE_EQUAL(detail::launch_fill(a.base(), 2, 8, &pattern, s.get()), CUDA_SUCCESS);
  BOOST_CHECK_EQUAL(modules_loaded(), modules + 1);
  {
    context other = context::create(device::get(0));
    context_guard current(other);
    arena b(64, arena::start::random, 112);
    stream t = stream::create();
    BOOST_REQUIRE_EQUAL(detail::launch_fill(b.base(), 2, 8, &pattern, t.get()), CUDA_SUCCESS);
    t.synchronize();
    BOOST_CHECK_EQUAL(modules_loaded(), modules + 2);
    BOOST_CHECK_EQUAL(detail::unload_kernels(), CUDA_SUCCESS);
    BOOST_CHECK_EQUAL(modules_loaded(), modules + 1);
  }
  s.synchronize();
  BOOST_CHECK_EQUAL(detail::unload_kernels(), CUDA_SUCCESS);
  BOOST_CHECK_EQUAL(modules_loaded(), modules);
  BOOST_CHECK_EQUAL(detail::unload_kernels(), CUDA_SUCCESS);  // nothing loaded: nothing to do
  // The next launch loads them again.
  BOOST_REQUIRE_EQUAL(detail::launch_fill(a.base() + 16, 2, 8, &pattern, s.get()), CUDA_SUCCESS);
  s.synchronize();
  BOOST_CHECK_EQUAL(modules_loaded(), modules + 1);
  bytes expected = a.initial;
  for (std::size_t i = 0; i < 32; ++i) expected[i] = static_cast<std::uint8_t>(pattern >> (8 * (i % 8)));
  BOOST_CHECK(a.read() == expected);
}

BOOST_AUTO_TEST_CASE(a_block_outside_device_memory_faults_like_a_kernel, *only_on_sim()) {
  // Only on sim: on a GPU the fault would be sticky and end the context for every later test.
  arena source(64, arena::start::random, 121);
  arena destination(64, arena::start::poisoned, 0);
  const std::vector<block> blocks = {{0, 0, 16}, {32, 32, 64}};  // the second runs past both buffers
  const detail::copy_block_list list = list_of(blocks, source.base(), destination.base());
  arena table = upload(list);
  stream s = stream::create();
  BOOST_REQUIRE_EQUAL(detail::launch_copy_block_list(table.base(), list.count(), s.get()), CUDA_SUCCESS);
  BOOST_CHECK_EQUAL(detail::driver().cuStreamSynchronize(s.get()), CUDA_ERROR_ILLEGAL_ADDRESS);
  sim::reset_faults();
}

BOOST_AUTO_TEST_SUITE_END()
