// Vectored transfers: engine::poke_blocks and peek_blocks move a list of blocks in one operation, by the
// gather/scatter kernel or the copy engine, from page-locked memory in place or from pageable memory
// packed through a staging chunk, or staged chunk by chunk where one chunk cannot take them. Every block
// lands at its own device offset (random, unaligned sizes, some empty), every byte is checked both ways;
// a staged list holds no thread while it waits; bad blocks are refused naming the block before anything
// moves; a list cancelled before it reaches its stream never moves; a refused launch falls back to the
// copy engine and says so; a failed list, or a refused chunk, fails its op.
#include "ferry/engine.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "ferry/marshal.hpp"
#include "sim/control.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/failure_log.hpp"
#include "tests/support/io_helpers.hpp"
#include "tests/support/random_bytes.hpp"
#include "tests/support/stream_gate.hpp"

namespace asio = boost::asio;
using namespace ferry;
using ferry::testing::outcome;
using ferry::testing::random_vector;
using ferry::testing::record;

namespace {

constexpr std::size_t block_count = 300;
constexpr std::size_t device_slots = 2 * block_count;  // blocks go to a random half of the slots
constexpr std::size_t slot_bytes = 5000;

// Where each block's bytes lie on the host (packed one after another) and on the device (a slot chosen
// at random, so that neighbours on the host are far apart on the device), and how many there are:
// 0 .. slot_bytes, so that blocks start and end at every alignment and some are empty.
struct layout {
  std::vector<std::size_t> host_offset;
  std::vector<std::size_t> device_offset;
  std::vector<std::size_t> bytes;
  std::size_t host_bytes = 0;

  explicit layout(std::uint64_t seed, std::size_t blocks = block_count) {
    std::mt19937_64 random(seed);
    std::vector<std::size_t> slots(device_slots);
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin(), slots.end(), random);
    for (std::size_t i = 0; i < blocks; ++i) {
      const std::size_t size = i % 37 == 5 ? 0 : 1 + random() % slot_bytes;
      host_offset.push_back(host_bytes);
      device_offset.push_back(slots[i] * slot_bytes + random() % (slot_bytes - size + 1));
      bytes.push_back(size);
      host_bytes += size;
    }
  }
};

// `blocks` equal blocks of `size` bytes packed on the host, each at the start of its own slot of a
// shuffled grid of `stride`-byte slots on the device, shifted by `shift` bytes when the block's index
// is odd (stride == size and shift 0: every block exactly on its slot, the KV-cache layout).
layout grid_layout(std::uint64_t seed, std::size_t blocks, std::size_t size, std::size_t stride, std::size_t shift) {
  layout shape(seed, 0);
  std::mt19937_64 random(seed);
  std::vector<std::size_t> slots(device_slots * slot_bytes / stride - 1);
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), random);
  for (std::size_t i = 0; i < blocks; ++i) {
    shape.host_offset.push_back(shape.host_bytes);
    shape.device_offset.push_back(slots[i] * stride + (i % 2 == 1 ? shift : 0));
    shape.bytes.push_back(size);
    shape.host_bytes += size;
  }
  return shape;
}

// How many times the simulated driver's entry point has been called so far (none yet: 0).
std::size_t calls_of(const std::string& entry) {
  const auto calls = sim::call_counts();
  return calls.contains(entry) ? calls.at(entry) : 0;
}

// `small_blocks` blocks of `small` bytes, then `large_blocks` of `large`, packed on the host and laid on the
// device in the opposite order, 8 bytes apart.
layout small_then_large(std::uint64_t seed, std::size_t small_blocks, std::size_t small, std::size_t large_blocks,
                        std::size_t large) {
  layout shape(seed, 0);
  for (std::size_t i = 0; i < small_blocks + large_blocks; ++i) {
    const std::size_t size = i < small_blocks ? small : large;
    shape.host_offset.push_back(shape.host_bytes);
    shape.device_offset.push_back(device_slots * slot_bytes - shape.host_bytes - size - 8 * i);
    shape.bytes.push_back(size);
    shape.host_bytes += size;
  }
  return shape;
}

struct block_fixture : ferry::testing::device_fixture {
  block_fixture() {
    options.on_failure = failures.recorder();
  }
  ~block_fixture() { gpu.reset(); }

  engine& start() {
    gpu = std::make_unique<engine>(io.get_executor(), options);
    return *gpu;
  }

  template <class Operation>
  outcome run(Operation start_op) {
    outcome result;
    start_op(record(result));
    BOOST_TEST(ferry::testing::run_until(io, [&] { return result.calls == 1; }));
    return result;
  }

  // The list that pokes block i of `shape` from `source` (host memory of the Host view's kind) to its
  // device place in `area`, and the list that peeks it back into `back`.
  template <template <class> class Host>
  static std::vector<block_pair<Host<const std::uint8_t>, std::uint8_t>> poke_list(const layout& shape,
                                                                                   const std::uint8_t* source,
                                                                                   device_ptr<std::uint8_t> area) {
    std::vector<block_pair<Host<const std::uint8_t>, std::uint8_t>> list;
    for (std::size_t i = 0; i < shape.bytes.size(); ++i) {
      list.push_back({host_view<Host<const std::uint8_t>>(source + shape.host_offset[i], shape.bytes[i]),
                      area + shape.device_offset[i]});
    }
    return list;
  }
  template <template <class> class Host>
  static std::vector<block_pair<Host<std::uint8_t>, const std::uint8_t>> peek_list(const layout& shape,
                                                                                   std::uint8_t* back,
                                                                                   device_ptr<std::uint8_t> area) {
    std::vector<block_pair<Host<std::uint8_t>, const std::uint8_t>> list;
    for (std::size_t i = 0; i < shape.bytes.size(); ++i) {
      list.push_back({host_view<Host<std::uint8_t>>(back + shape.host_offset[i], shape.bytes[i]),
                      device_ptr<const std::uint8_t>(area + shape.device_offset[i])});
    }
    return list;
  }

  // Pokes the blocks of `source` (host memory laid out by `shape`) to their device slots, checks the
  // device's bytes (every block in place, every other byte untouched), peeks them back into `back` and
  // checks every byte there.
  template <template <class> class Host>
  void round_trip(const layout& shape, std::span<std::uint8_t> source, std::span<std::uint8_t> back,
                  transfer_options per_call = {}) {
    ferry::testing::fill_random(source, 4242);
    std::fill(back.begin(), back.end(), std::uint8_t{0xA5});
    auto area = gpu->allocate<std::uint8_t>(device_slots * slot_bytes);
    const std::vector<std::uint8_t> before = random_vector<std::uint8_t>(device_slots * slot_bytes, 77);
    poke_list_array(std::span<const std::uint8_t>(before), area.get());

    const auto pokes = poke_list<Host>(shape, source.data(), area.get());
    const auto peeks = peek_list<Host>(shape, back.data(), area.get());
    outcome poked = run([&](auto handler) { gpu->poke_blocks(pokes, per_call, handler); });
    BOOST_TEST(!poked.error, poked.error.message());
    BOOST_TEST(poked.bytes == shape.host_bytes);

    std::vector<std::uint8_t> expected = before;
    for (std::size_t i = 0; i < shape.bytes.size(); ++i) {
      std::copy_n(source.data() + shape.host_offset[i], shape.bytes[i], expected.begin() + shape.device_offset[i]);
    }
    BOOST_TEST(ferry::testing::same_bytes(peek_list_array(device_slots * slot_bytes, area.get()), expected));

    outcome peeked = run([&](auto handler) { gpu->peek_blocks(peeks, per_call, handler); });
    BOOST_TEST(!peeked.error, peeked.error.message());
    BOOST_TEST(peeked.bytes == shape.host_bytes);
    BOOST_TEST(std::equal(source.begin(), source.begin() + shape.host_bytes, back.begin()));
    BOOST_TEST(std::all_of(back.begin() + shape.host_bytes, back.end(), [](std::uint8_t b) { return b == 0xA5; }));
  }

  template <class View>
  static View host_view(typename View::pointer data, std::size_t size) {
    if constexpr (std::is_same_v<View, pinned_span<typename View::element_type>>) {
      return View(host_ptr<typename View::element_type>(data), size);
    } else {
      return View(data, size);
    }
  }

  std::vector<std::string> failures_seen() const { return failures.seen(); }

  ferry::testing::failure_log failures;  // before the engine, which reports to it
  asio::io_context io;
  engine_options options;
  std::unique_ptr<engine> gpu;
};

template <class T>
using pageable = std::span<T>;

}  // namespace

BOOST_FIXTURE_TEST_SUITE(block_lists, block_fixture)

BOOST_AUTO_TEST_CASE(page_locked_blocks_move_by_one_kernel_launch_each_way) {
  start();
  const layout shape(1);
  auto source = pinned_buffer<std::uint8_t>::allocate(shape.host_bytes + 64);
  auto back = pinned_buffer<std::uint8_t>::allocate(shape.host_bytes + 64);
  round_trip<pinned_span>(shape, source.span(), back.span(), batch_path::kernel);
  BOOST_TEST(gpu->plan_counts().kernel_block_lists == 2u);
  BOOST_TEST(gpu->plan_counts().copy_engine_block_lists == 0u);
  BOOST_TEST(failures_seen().empty());
}

// Equal blocks of a power-of-two size: on their slots (the overlap check's grid of slots), and off
// them by a few bytes (the check's sort), each way, every byte checked.
BOOST_AUTO_TEST_CASE(equal_blocks_on_a_grid_and_off_it_move_each_way) {
  start();
  for (std::size_t shift : {std::size_t{0}, std::size_t{24}}) {
    const layout shape = grid_layout(5 + shift, 256, 4096, shift == 0 ? 4096 : 8192, shift);
    auto source = pinned_buffer<std::uint8_t>::allocate(shape.host_bytes);
    auto back = pinned_buffer<std::uint8_t>::allocate(shape.host_bytes + 64);
    round_trip<pinned_span>(shape, source.span(), back.span(), batch_path::kernel);
  }
  BOOST_TEST(gpu->plan_counts().kernel_block_lists == 4u);
  BOOST_TEST(failures_seen().empty());
}

// Blocks whose sides alternate between two page-locked buffers and two device areas (no block in the
// allocations of the block before it), some empty, each way, every byte of all four checked.
BOOST_AUTO_TEST_CASE(blocks_alternating_between_allocations_move_each_way) {
  start();
  constexpr std::size_t blocks = 200;
  constexpr std::size_t block_bytes = 3000;
  constexpr std::size_t area_bytes = blocks * block_bytes;
  std::array<pinned_buffer<std::uint8_t>, 2> sources{pinned_buffer<std::uint8_t>::allocate(area_bytes),
                                                     pinned_buffer<std::uint8_t>::allocate(area_bytes)};
  std::array<pinned_buffer<std::uint8_t>, 2> backs{pinned_buffer<std::uint8_t>::allocate(area_bytes),
                                                   pinned_buffer<std::uint8_t>::allocate(area_bytes)};
  std::array<device_buffer<std::uint8_t>, 2> areas{gpu->allocate<std::uint8_t>(area_bytes),
                                                   gpu->allocate<std::uint8_t>(area_bytes)};
  std::array<std::vector<std::uint8_t>, 2> on_device;
  for (std::size_t k = 0; k < 2; ++k) {
    ferry::testing::fill_random(std::span<std::uint8_t>(sources[k].data(), area_bytes), 31 + k);
    std::fill_n(backs[k].data(), area_bytes, std::uint8_t{0xA5});
    on_device[k] = random_vector<std::uint8_t>(area_bytes, 41 + k);
    poke_list_array(std::span<const std::uint8_t>(on_device[k]), areas[k].get());
  }
  // Block i: host slot i of source i % 2, device slot slots[i] of area (i / 3) % 2, empty every 17th.
  std::vector<std::size_t> slots(blocks);
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), std::mt19937_64(5));
  std::vector<block_pair<pinned_span<const std::uint8_t>, std::uint8_t>> pokes;
  std::vector<block_pair<pinned_span<std::uint8_t>, const std::uint8_t>> peeks;
  std::array<std::vector<std::uint8_t>, 2> expected_back{std::vector<std::uint8_t>(area_bytes, 0xA5),
                                                         std::vector<std::uint8_t>(area_bytes, 0xA5)};
  std::size_t moved = 0;
  for (std::size_t i = 0; i < blocks; ++i) {
    const std::size_t bytes = i % 17 == 3 ? 0 : block_bytes - i % 50;
    const std::size_t host = i % 2;
    const std::size_t area = (i / 3) % 2;
    const std::size_t host_offset = i * block_bytes;
    const std::size_t device_offset = slots[i] * block_bytes;
    pokes.push_back({pinned_span<const std::uint8_t>(host_ptr<const std::uint8_t>(sources[host].data() + host_offset),
                                                     bytes),
                     areas[area].get() + device_offset});
    peeks.push_back({pinned_span<std::uint8_t>(host_ptr<std::uint8_t>(backs[host].data() + host_offset), bytes),
                     device_ptr<const std::uint8_t>(areas[area].get() + device_offset)});
    std::copy_n(sources[host].data() + host_offset, bytes, on_device[area].begin() + device_offset);
    std::copy_n(sources[host].data() + host_offset, bytes, expected_back[host].begin() + host_offset);
    moved += bytes;
  }
  for (const batch_path path : {batch_path::kernel, batch_path::copy_engine}) {
    outcome poked = run([&](auto handler) { gpu->poke_blocks(pokes, path, handler); });
    BOOST_TEST(!poked.error, poked.error.message());
    BOOST_TEST(poked.bytes == moved);
    for (std::size_t k = 0; k < 2; ++k) {
      BOOST_TEST(ferry::testing::same_bytes(peek_list_array(area_bytes, areas[k].get()), on_device[k]));
    }
    outcome peeked = run([&](auto handler) { gpu->peek_blocks(peeks, path, handler); });
    BOOST_TEST(!peeked.error, peeked.error.message());
    BOOST_TEST(peeked.bytes == moved);
    for (std::size_t k = 0; k < 2; ++k) {
      BOOST_TEST(ferry::testing::same_bytes(std::vector<std::uint8_t>(backs[k].data(), backs[k].data() + area_bytes),
                                            expected_back[k]));
      std::fill_n(backs[k].data(), area_bytes, std::uint8_t{0xA5});
    }
  }
  BOOST_TEST(gpu->plan_counts().kernel_block_lists == 2u);
  BOOST_TEST(gpu->plan_counts().copy_engine_block_lists == 2u);
  BOOST_TEST(failures_seen().empty());
}

BOOST_AUTO_TEST_CASE(page_locked_blocks_move_by_the_copy_engine_when_asked) {
  start();
  const layout shape(2);
  auto source = pinned_buffer<std::uint8_t>::allocate(shape.host_bytes);
  auto back = pinned_buffer<std::uint8_t>::allocate(shape.host_bytes);
  round_trip<pinned_span>(shape, source.span(), back.span(), batch_path::copy_engine);
  BOOST_TEST(gpu->plan_counts().kernel_block_lists == 0u);
  BOOST_TEST(gpu->plan_counts().copy_engine_block_lists == 2u);
}

BOOST_AUTO_TEST_CASE(automatic_lists_take_the_kernel_from_the_engines_threshold_on) {
  options.batch_kernel_min_copies = 8;
  start();
  const layout few(3, 5);  // five blocks, one of them empty: four to move
  auto source = pinned_buffer<std::uint8_t>::allocate(few.host_bytes);
  auto back = pinned_buffer<std::uint8_t>::allocate(few.host_bytes);
  round_trip<pinned_span>(few, source.span(), back.span());
  BOOST_TEST(gpu->plan_counts().copy_engine_block_lists == 2u);
  const layout many(4, 40);
  auto more_source = pinned_buffer<std::uint8_t>::allocate(many.host_bytes);
  auto more_back = pinned_buffer<std::uint8_t>::allocate(many.host_bytes);
  round_trip<pinned_span>(many, more_source.span(), more_back.span());
  BOOST_TEST(gpu->plan_counts().kernel_block_lists == 2u);
}

// However many they are, blocks that average more than the engine's mean go through the copy engine,
// which moves large blocks at the link's speed without SMs; at or below it they take the kernel.
BOOST_AUTO_TEST_CASE(automatic_lists_of_blocks_larger_than_the_engines_mean_take_the_copy_engine) {
  options.batch_kernel_min_copies = 8;
  options.batch_kernel_max_mean_bytes = 16 << 10;
  start();
  const layout large = grid_layout(17, 40, 20000, 40000, 8);
  auto source = pinned_buffer<std::uint8_t>::allocate(large.host_bytes);
  auto back = pinned_buffer<std::uint8_t>::allocate(large.host_bytes);
  round_trip<pinned_span>(large, source.span(), back.span());
  BOOST_TEST(gpu->plan_counts().copy_engine_block_lists == 2u);
  BOOST_TEST(gpu->plan_counts().kernel_block_lists == 0u);
  const layout at_the_mean = grid_layout(18, 40, 16 << 10, 40000, 8);
  round_trip<pinned_span>(at_the_mean, source.span(), back.span());
  BOOST_TEST(gpu->plan_counts().kernel_block_lists == 2u);
  BOOST_TEST(failures_seen().empty());
}

// A page-locked list whose checks wrote into a free descriptor slab, but which the copy engine takes
// (its blocks average more than the bound), gives the slab back at its call: a kernel list made while
// the first still waits on its stream finds the slab free, and no slab is allocated for it.
BOOST_AUTO_TEST_CASE(a_copy_engine_list_gives_back_the_slab_its_checks_wrote_into, *ferry::testing::only_on_sim()) {
  options.batch_kernel_min_copies = 8;
  options.batch_kernel_max_mean_bytes = 16 << 10;
  start();
  const layout small = grid_layout(21, 40, 4096, 8192, 0);
  const layout large = grid_layout(22, 40, 20000, 40000, 8);
  auto source = pinned_buffer<std::uint8_t>::allocate(large.host_bytes);
  auto back = pinned_buffer<std::uint8_t>::allocate(large.host_bytes);
  auto large_area = gpu->allocate<std::uint8_t>(device_slots * slot_bytes);
  ferry::testing::fill_random(source.span(), 2201);
  round_trip<pinned_span>(small, source.span(), back.span());  // the engine's first slab, free again after
  auto small_area = gpu->allocate<std::uint8_t>(device_slots * slot_bytes);
  const auto small_pokes = poke_list<pinned_span>(small, source.data(), small_area.get());
  const auto large_pokes = poke_list<pinned_span>(large, source.data(), large_area.get());
  stream held = stream::create();
  outcome large_poked;
  {
    // (No synchronous call while the gate is shut: the legacy stream would wait for the held one.)
    ferry::testing::stream_gate gate(held);
    const std::size_t host_allocations = calls_of("cuMemHostAlloc");  // the gate's flag is one
    gpu->poke_blocks(large_pokes, transfer_options{held}, record(large_poked));
    const outcome small_poked = run([&](auto handler) { gpu->poke_blocks(small_pokes, handler); });
    BOOST_TEST(!small_poked.error, small_poked.error.message());
    BOOST_TEST(calls_of("cuMemHostAlloc") == host_allocations);
    BOOST_TEST(large_poked.calls == 0);
    gate.open();
    BOOST_TEST(ferry::testing::run_until(io, [&] { return large_poked.calls == 1; }));
  }
  BOOST_TEST(!large_poked.error, large_poked.error.message());
  BOOST_TEST(large_poked.bytes == large.host_bytes);
  for (const auto& [shape, area] : {std::pair(&large, &large_area), std::pair(&small, &small_area)}) {
    const std::vector<std::uint8_t> there = peek_list_array(device_slots * slot_bytes, area->get());
    for (std::size_t i = 0; i < shape->bytes.size(); ++i) {
      const std::uint8_t* from = source.data() + shape->host_offset[i];
      BOOST_TEST(std::equal(from, from + shape->bytes[i], there.begin() + shape->device_offset[i]));
    }
  }
  BOOST_TEST(gpu->plan_counts().copy_engine_block_lists == 1u);
  BOOST_TEST(gpu->plan_counts().kernel_block_lists == 3u);
  BOOST_TEST(failures_seen().empty());
}

BOOST_AUTO_TEST_CASE(pageable_blocks_are_packed_through_a_staging_chunk_for_the_kernel) {
  start();
  const layout shape(5);
  std::vector<std::uint8_t> source(shape.host_bytes + 100);
  std::vector<std::uint8_t> back(shape.host_bytes + 100);
  round_trip<pageable>(shape, source, back, batch_path::kernel);
  BOOST_TEST(gpu->plan_counts().kernel_block_lists == 2u);
}

// Chunk by chunk, as a pageable transfer is staged: blocks span the chunks' boundaries. A launch per
// chunk, the chunk's descriptors after its bytes, or a cuMemcpyBatchAsync per chunk.
BOOST_AUTO_TEST_CASE(pageable_blocks_too_many_for_a_chunk_are_staged_chunk_by_chunk) {
  options.staging_chunk_bytes = 64 << 10;  // the blocks hold about 750 KB
  start();
  const layout shape(6);
  std::vector<std::uint8_t> source(shape.host_bytes);
  std::vector<std::uint8_t> back(shape.host_bytes);
  round_trip<pageable>(shape, source, back);  // 300 blocks: the kernel
  BOOST_TEST(gpu->plan_counts().kernel_block_lists == 2u);
  BOOST_TEST(gpu->plan_counts().copy_engine_block_lists == 0u);
  BOOST_TEST(gpu->plan_counts().staged == 2u);
  round_trip<pageable>(shape, source, back, batch_path::copy_engine);
  BOOST_TEST(gpu->plan_counts().kernel_block_lists == 2u);
  BOOST_TEST(gpu->plan_counts().copy_engine_block_lists == 2u);
  BOOST_TEST(gpu->plan_counts().staged == 4u);
  BOOST_TEST(failures_seen().empty());
}

// Pieces of a byte or two: a chunk's descriptors take most of it, and a chunk carries as many pieces as
// fit beside theirs (in 64 bytes two pieces, or one of up to 33 bytes); chunks of 71 bytes lie at
// addresses that are not multiples of 8, where the descriptors begin at the next 8-byte boundary.
BOOST_AUTO_TEST_CASE(staged_chunks_for_the_kernel_carry_as_many_pieces_as_fit_beside_their_descriptors) {
  for (const std::size_t chunk : {std::size_t{64}, std::size_t{71}}) {
    options.staging_chunk_bytes = chunk;
    start();
    layout shape(14, 0);
    std::mt19937_64 random(14 + chunk);
    for (std::size_t i = 0; i < 200; ++i) {
      const std::size_t size = 1 + random() % (i % 10 == 0 ? 100 : 2);
      shape.host_offset.push_back(shape.host_bytes);
      shape.device_offset.push_back(i * slot_bytes + random() % (slot_bytes - size));
      shape.bytes.push_back(size);
      shape.host_bytes += size;
    }
    std::vector<std::uint8_t> source(shape.host_bytes);
    std::vector<std::uint8_t> back(shape.host_bytes);
    round_trip<pageable>(shape, source, back, batch_path::kernel);
    BOOST_TEST(gpu->plan_counts().kernel_block_lists == 2u);
    BOOST_TEST(gpu->plan_counts().staged == 2u);
  }
  BOOST_TEST(failures_seen().empty());
}

// Where a list chose the kernel, a chunk of fewer pieces than the engine's threshold (a few large
// blocks) goes through the copy engine: one launch would give each piece a single block of threads.
BOOST_AUTO_TEST_CASE(staged_chunks_of_few_pieces_go_through_the_copy_engine, *ferry::testing::only_on_sim()) {
  options.staging_chunk_bytes = 64 << 10;
  options.batch_kernel_min_copies = 8;
  start();
  const layout shape = grid_layout(16, 40, 30000, 40000, 8);  // two or three pieces a chunk
  std::vector<std::uint8_t> source(shape.host_bytes);
  std::vector<std::uint8_t> back(shape.host_bytes);
  const std::size_t launches_before = calls_of("cuLaunchKernel");
  round_trip<pageable>(shape, source, back);
  BOOST_TEST(gpu->plan_counts().copy_engine_block_lists == 2u);
  BOOST_TEST(gpu->plan_counts().kernel_block_lists == 0u);
  BOOST_TEST(gpu->plan_counts().staged == 2u);
  BOOST_TEST(calls_of("cuLaunchKernel") == launches_before);
  BOOST_TEST(failures_seen().empty());
}

// The rule applies chunk by chunk: a list of small blocks then large ones (their mean within the engine's)
// takes the kernel for its first chunk, 50 pieces of about 1.3 KB, and the copy engine for the four
// after it, of 16000-byte pieces.
BOOST_AUTO_TEST_CASE(staged_chunks_of_pieces_larger_than_the_engines_mean_go_through_the_copy_engine,
                     *ferry::testing::only_on_sim()) {
  options.staging_chunk_bytes = 64 << 10;
  options.batch_kernel_min_copies = 2;
  options.batch_kernel_max_mean_bytes = 8 << 10;
  start();
  const layout shape = small_then_large(19, 48, 1000, 16, 16000);
  std::vector<std::uint8_t> source(shape.host_bytes);
  std::vector<std::uint8_t> back(shape.host_bytes);
  const std::size_t launches_before = calls_of("cuLaunchKernel");
  const std::size_t batches_before = calls_of("cuMemcpyBatchAsync");
  round_trip<pageable>(shape, source, back);
  BOOST_TEST(calls_of("cuLaunchKernel") - launches_before == 2u);  // a chunk each way
  BOOST_TEST(calls_of("cuMemcpyBatchAsync") - batches_before == 8u);
  BOOST_TEST(gpu->plan_counts().kernel_block_lists == 2u);  // counted by the first chunk
  BOOST_TEST(gpu->plan_counts().staged == 2u);
  BOOST_TEST(failures_seen().empty());
}

// A staged list is judged chunk by chunk, not by its mean: 64 blocks of 1000 bytes beside one of 600,000
// (a mean of about 10 KB, over the bound) take the kernel for their chunk, the large block's chunks the
// copy engine. A bound of zero keeps every automatic list and chunk off the kernel.
BOOST_AUTO_TEST_CASE(a_staged_lists_small_pieces_take_the_kernel_whatever_the_lists_mean,
                     *ferry::testing::only_on_sim()) {
  options.staging_chunk_bytes = 64 << 10;
  options.batch_kernel_min_copies = 2;
  options.batch_kernel_max_mean_bytes = 8 << 10;
  const layout shape = small_then_large(20, 64, 1000, 1, 600000);
  std::vector<std::uint8_t> source(shape.host_bytes);
  std::vector<std::uint8_t> back(shape.host_bytes);
  start();
  std::size_t before = calls_of("cuLaunchKernel");
  round_trip<pageable>(shape, source, back);
  BOOST_TEST(calls_of("cuLaunchKernel") - before == 2u);  // the small blocks' chunk, each way
  BOOST_TEST(gpu->plan_counts().kernel_block_lists == 2u);
  BOOST_TEST(gpu->plan_counts().staged == 2u);

  options.batch_kernel_max_mean_bytes = 0;
  start();
  before = calls_of("cuLaunchKernel");
  round_trip<pageable>(shape, source, back);
  const layout packed = grid_layout(21, 40, 100, 200, 8);  // pinned, in place: the list's own mean
  auto pinned_source = pinned_buffer<std::uint8_t>::allocate(packed.host_bytes);
  auto pinned_back = pinned_buffer<std::uint8_t>::allocate(packed.host_bytes);
  round_trip<pinned_span>(packed, pinned_source.span(), pinned_back.span());
  BOOST_TEST(calls_of("cuLaunchKernel") == before);
  BOOST_TEST(gpu->plan_counts().kernel_block_lists == 0u);
  BOOST_TEST(gpu->plan_counts().copy_engine_block_lists == 4u);
  BOOST_TEST(failures_seen().empty());
}

// A launch the driver refuses for a staged chunk leaves nothing of it on the stream: the copy engine takes
// that chunk and the rest (no launch is tried again), the refusal is reported once, and every byte lands;
// a list whose first chunk's launch is refused is counted as the copy engine's.
BOOST_AUTO_TEST_CASE(a_staged_chunk_whose_launch_is_refused_goes_through_the_copy_engine,
                     *ferry::testing::only_on_sim()) {
  options.staging_chunk_bytes = 64 << 10;
  const layout shape(15);  // about 750 KB: a dozen chunks
  const auto source = random_vector<std::uint8_t>(shape.host_bytes, 1501);
  for (const unsigned refused : {3u, 1u}) {
    start();
    auto area = gpu->allocate<std::uint8_t>(device_slots * slot_bytes);
    std::vector<std::uint8_t> back(shape.host_bytes, 0xA5);
    const auto pokes = poke_list<pageable>(shape, source.data(), area.get());
    const auto peeks = peek_list<pageable>(shape, back.data(), area.get());
    // The poke's refused launch on the first engine, the peek's (its first chunk's) on the second.
    const bool in_peek = refused == 1;
    if (in_peek) {
      const outcome poked = run([&](auto handler) { gpu->poke_blocks(pokes, batch_path::kernel, handler); });
      BOOST_TEST_REQUIRE(!poked.error, poked.error.message());
    }
    const std::size_t launches_before = calls_of("cuLaunchKernel");
    const std::size_t batches_before = calls_of("cuMemcpyBatchAsync");
    sim::fail_call("cuLaunchKernel", refused, CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
    const outcome done = run([&](auto handler) {
      if (in_peek) {
        gpu->peek_blocks(peeks, batch_path::kernel, handler);
      } else {
        gpu->poke_blocks(pokes, batch_path::kernel, handler);
      }
    });
    BOOST_TEST(!done.error, done.error.message());
    BOOST_TEST(done.bytes == shape.host_bytes);
    BOOST_TEST(calls_of("cuLaunchKernel") - launches_before == refused);  // none after the refusal
    BOOST_TEST(calls_of("cuMemcpyBatchAsync") - batches_before >= 5u);
    if (in_peek) {
      BOOST_TEST(ferry::testing::same_bytes(back, source));
      BOOST_TEST(gpu->plan_counts().kernel_block_lists == 1u);  // the poke
      BOOST_TEST(gpu->plan_counts().copy_engine_block_lists == 1u);
    } else {
      std::vector<std::uint8_t> expected(device_slots * slot_bytes);
      const std::vector<std::uint8_t> there = peek_list_array(expected.size(), area.get());
      for (std::size_t i = 0; i < shape.bytes.size(); ++i) {
        BOOST_TEST(std::equal(source.begin() + shape.host_offset[i],
                              source.begin() + shape.host_offset[i] + shape.bytes[i],
                              there.begin() + shape.device_offset[i]));
      }
      BOOST_TEST(gpu->plan_counts().kernel_block_lists == 1u);  // by its first chunk
    }
    const std::vector<std::string> seen = failures_seen();
    BOOST_TEST_REQUIRE(seen.size() == (in_peek ? 2u : 1u));
    BOOST_TEST(seen.back().find("the copy kernel (ferry_copy_blocks) could not take a staged chunk of") !=
                   std::string::npos,
               seen.back());
    BOOST_TEST(seen.back().find("the rest of its list too") != std::string::npos, seen.back());
    BOOST_TEST(seen.back().find("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES") != std::string::npos, seen.back());
  }
}

// A staged list waits for its stream's turn and its chunks without holding any thread: a poke and a peek
// of pageable lists behind a closed gate return from their calls at once (the driver would hold a call
// that writes pageable memory until the stream reached it), move nothing until the gate opens, and then
// move every byte in the stream's order (the peek's chunks unpacked by the engine's workers).
BOOST_AUTO_TEST_CASE(a_staged_list_on_a_held_stream_returns_from_its_call_at_once) {
  options.staging_chunk_bytes = 200 << 10;  // larger than a peek's chunk unpacked where its copy completes
  start();
  stream held = stream::create();
  const layout shape(11);
  auto area = gpu->allocate<std::uint8_t>(device_slots * slot_bytes);
  const auto before = random_vector<std::uint8_t>(device_slots * slot_bytes, 1101);
  poke_list_array(std::span<const std::uint8_t>(before), area.get());
  const auto source = random_vector<std::uint8_t>(shape.host_bytes, 1102);
  std::vector<std::uint8_t> back(shape.host_bytes, 0xA5);
  const auto pokes = poke_list<pageable>(shape, source.data(), area.get());
  const auto peeks = peek_list<pageable>(shape, back.data(), area.get());
  outcome poked, peeked;
  {
    ferry::testing::stream_gate gate(held);
    std::future<void> called = std::async(std::launch::async, [&] {
      gpu->poke_blocks(pokes, transfer_options{held}, record(poked));
      gpu->peek_blocks(peeks, transfer_options{held}, record(peeked));
    });
    BOOST_TEST_REQUIRE((called.wait_for(std::chrono::seconds(20)) == std::future_status::ready));
    called.get();
    ferry::testing::run_for_a_while(io);
    BOOST_TEST(poked.calls == 0);
    BOOST_TEST(peeked.calls == 0);
    gate.open();
    BOOST_TEST(ferry::testing::run_until(io, [&] { return poked.calls == 1 && peeked.calls == 1; }));
  }
  BOOST_TEST(!poked.error, poked.error.message());
  BOOST_TEST(!peeked.error, peeked.error.message());
  BOOST_TEST(poked.bytes == shape.host_bytes);
  BOOST_TEST(peeked.bytes == shape.host_bytes);
  BOOST_TEST(ferry::testing::same_bytes(back, source));
  std::vector<std::uint8_t> expected = before;
  for (std::size_t i = 0; i < shape.bytes.size(); ++i) {
    std::copy_n(source.begin() + shape.host_offset[i], shape.bytes[i], expected.begin() + shape.device_offset[i]);
  }
  BOOST_TEST(ferry::testing::same_bytes(peek_list_array(device_slots * slot_bytes, area.get()), expected));
  BOOST_TEST(gpu->plan_counts().staged == 2u);
}

// A chunk the driver refuses (its batch, then its first copy one by one) fails the op, naming where in the
// list it began; what the chunk before it moved is counted.
BOOST_AUTO_TEST_CASE(a_staged_list_whose_chunk_is_refused_fails_its_op, *ferry::testing::only_on_sim()) {
  options.staging_chunk_bytes = 64 << 10;
  start();
  const layout shape(12);
  auto area = gpu->allocate<std::uint8_t>(device_slots * slot_bytes);
  const auto source = random_vector<std::uint8_t>(shape.host_bytes, 1201);
  const auto pokes = poke_list<pageable>(shape, source.data(), area.get());
  sim::fail_call("cuMemcpyBatchAsync", 2, CUDA_ERROR_NOT_SUPPORTED);
  sim::fail_call("cuMemcpyHtoDAsync", 1, CUDA_ERROR_INVALID_VALUE);
  outcome failed = run([&](auto handler) { gpu->poke_blocks(pokes, batch_path::copy_engine, handler); });
  BOOST_TEST(failed.error == std::error_code(CUDA_ERROR_INVALID_VALUE, cuda_category()));
  BOOST_TEST(failed.bytes == std::size_t{64} << 10);  // the first chunk
  const std::vector<std::string> seen = failures_seen();
  BOOST_TEST_REQUIRE(seen.size() == 2u);
  BOOST_TEST(seen[0].find("cuMemcpyBatchAsync refused a batch of") != std::string::npos, seen[0]);
  BOOST_TEST(seen[1].find("engine::poke_blocks") != std::string::npos, seen[1]);
  BOOST_TEST(seen[1].find("blocks") != std::string::npos, seen[1]);
  BOOST_TEST(seen[1].find("chunk at offset 65536") != std::string::npos, seen[1]);
  std::vector<std::uint8_t> expected(65536);
  const std::vector<std::uint8_t> there = peek_list_array(device_slots * slot_bytes, area.get());
  std::size_t at = 0;
  for (std::size_t i = 0; i < shape.bytes.size() && at < expected.size(); ++i) {
    const std::size_t bytes = std::min(shape.bytes[i], expected.size() - at);
    BOOST_TEST(std::equal(source.begin() + shape.host_offset[i], source.begin() + shape.host_offset[i] + bytes,
                          there.begin() + shape.device_offset[i]));
    at += bytes;
  }
}

// Chunk boundaries where they are hardest: a block exactly one chunk long (the next begins a chunk), one
// that spans four chunks, blocks of a byte or two on either side of a boundary.
BOOST_AUTO_TEST_CASE(staged_chunks_split_and_join_blocks_at_every_kind_of_boundary) {
  options.staging_chunk_bytes = 64 << 10;
  start();
  layout shape(13, 0);
  std::size_t device_at = device_slots * slot_bytes;  // the blocks lie backwards from the device area's end
  for (const std::size_t size : {std::size_t{65536}, std::size_t{1}, std::size_t{65534}, std::size_t{1},
                                 std::size_t{200000}, std::size_t{2}, std::size_t{7000}}) {
    device_at -= size + 3;
    shape.host_offset.push_back(shape.host_bytes);
    shape.device_offset.push_back(device_at);
    shape.bytes.push_back(size);
    shape.host_bytes += size;
  }
  std::vector<std::uint8_t> source(shape.host_bytes);
  std::vector<std::uint8_t> back(shape.host_bytes);
  round_trip<pageable>(shape, source, back);  // seven blocks: the copy engine
  BOOST_TEST(gpu->plan_counts().copy_engine_block_lists == 2u);
  round_trip<pageable>(shape, source, back, batch_path::kernel);
  BOOST_TEST(gpu->plan_counts().kernel_block_lists == 2u);
  BOOST_TEST(gpu->plan_counts().staged == 4u);
}

// Lists pack at their call and may then wait behind a staged transfer on their stream, which waits for a
// chunk in turn: were they allowed every chunk, lists queued on two streams could hold what the staged
// transfers ahead of them wait for, and nothing would move again. A list never takes the pool's last
// free chunk: with two chunks and a first list packed and held back on its stream, a second list, on a
// stream of its own, is staged chunk by chunk through the last one, and a staged transfer of several
// chunks completes meanwhile.
BOOST_AUTO_TEST_CASE(a_list_never_takes_the_last_free_staging_chunk) {
  options.staging_chunk_bytes = 64 << 10;
  options.staging_chunks = 2;
  start();
  stream held = stream::create();
  stream other = stream::create();
  constexpr std::size_t blocks = 12, block = 1000;
  auto area = gpu->allocate<std::uint8_t>(2 * blocks * block);
  const auto first = random_vector<std::uint8_t>(blocks * block, 901);
  const auto second = random_vector<std::uint8_t>(blocks * block, 902);
  // Block i of list k goes to slot 2i + k: the two lists interleave on the device.
  auto list_of = [&](const std::vector<std::uint8_t>& values, std::size_t k) {
    std::vector<block_pair<std::span<const std::uint8_t>, std::uint8_t>> list;
    for (std::size_t i = 0; i < blocks; ++i) {
      list.push_back({std::span(values).subspan(i * block, block), area.get() + (2 * i + k) * block});
    }
    return list;
  };
  const auto staged_values = random_vector<std::uint32_t>(std::size_t{48} << 10, 903);  // 192 KiB: three chunks
  auto staged_destination = gpu->allocate<std::uint32_t>(staged_values.size());
  // The kernel's first launch in a context loads ferry's kernels (cuModuleLoadData), which waits for the
  // context's work in flight: behind the closed gate below it would wait for ever. A list first.
  outcome warmed;
  gpu->poke_blocks(list_of(second, 1), transfer_options{held}, record(warmed));
  BOOST_TEST(ferry::testing::run_until(io, [&] { return warmed.calls == 1; }));
  BOOST_TEST(!warmed.error, warmed.error.message());
  const plan_counts before = gpu->plan_counts();
  BOOST_TEST(before.kernel_block_lists == 1u);
  outcome first_done, second_done, staged;
  {
    ferry::testing::stream_gate gate(held);
    gpu->poke_blocks(list_of(first, 0), transfer_options{held}, record(first_done));
    BOOST_TEST(gpu->plan_counts().kernel_block_lists == 2u);  // packed: one chunk held
    BOOST_TEST(gpu->plan_counts().staged == 0u);
    gpu->poke_blocks(list_of(second, 1), transfer_options{other}, record(second_done));
    gpu->poke(std::span<const std::uint32_t>(staged_values), staged_destination.get(), transfer_plan::staged,
              record(staged));
    BOOST_TEST(ferry::testing::run_until(io, [&] { return staged.calls == 1 && second_done.calls == 1; }));
    BOOST_TEST(gpu->plan_counts().kernel_block_lists == 3u);
    BOOST_TEST(gpu->plan_counts().staged == 2u);  // not packed: the list staged, and the transfer
    BOOST_TEST(first_done.calls == 0);
    gate.open();
    BOOST_TEST(ferry::testing::run_until(io, [&] { return first_done.calls == 1 && second_done.calls == 1; }));
  }
  BOOST_TEST(!first_done.error, first_done.error.message());
  BOOST_TEST(!second_done.error, second_done.error.message());
  BOOST_TEST(!staged.error, staged.error.message());
  BOOST_TEST(
      ferry::testing::same_bytes(peek_list_array(staged_values.size(), staged_destination.get()), staged_values));
  const std::vector<std::uint8_t> there = peek_list_array(area.size(), area.get());
  for (std::size_t i = 0; i < blocks; ++i) {
    BOOST_TEST(std::equal(first.begin() + i * block, first.begin() + (i + 1) * block, there.begin() + 2 * i * block));
    BOOST_TEST(std::equal(second.begin() + i * block, second.begin() + (i + 1) * block,
                          there.begin() + (2 * i + 1) * block));
  }
}

// More blocks than one launch's descriptor slab holds: several launches, one op.
BOOST_AUTO_TEST_CASE(a_list_longer_than_a_launch_takes_several_and_completes_once) {
  start();
  const std::size_t blocks = 9000;  // more than one launch carries (4096)
  auto area = gpu->allocate<std::uint32_t>(blocks * 3);
  const auto values = random_vector<std::uint32_t>(blocks * 3, 606);
  auto source = pinned_buffer<std::uint32_t>::allocate(blocks * 3);
  std::copy(values.begin(), values.end(), source.data());
  std::vector<block_pair<pinned_span<const std::uint32_t>, std::uint32_t>> list;
  for (std::size_t i = 0; i < blocks; ++i) {  // block i lands in the place of block blocks - 1 - i
    list.push_back({pinned_span<const std::uint32_t>(host_ptr<const std::uint32_t>(source.data() + 3 * i), 3),
                    area.get() + 3 * (blocks - 1 - i)});
  }
  outcome poked = run([&](auto handler) { gpu->poke_blocks(list, batch_path::kernel, handler); });
  BOOST_TEST(!poked.error);
  BOOST_TEST(poked.bytes == blocks * 12);
  const std::vector<std::uint32_t> there = peek_list_array(blocks * 3, area.get());
  bool every_block = true;
  for (std::size_t i = 0; i < blocks; ++i) {
    every_block = every_block && std::equal(values.begin() + 3 * i, values.begin() + 3 * i + 3,
                                            there.begin() + 3 * (blocks - 1 - i));
  }
  BOOST_TEST(every_block);
  BOOST_TEST(gpu->plan_counts().kernel_block_lists == 1u);
}

BOOST_AUTO_TEST_CASE(block_lists_work_with_asios_composition) {
  start();
  const auto values = random_vector<std::uint64_t>(4096, 707);
  auto source = pinned_buffer<std::uint64_t>::allocate(4096);
  std::copy(values.begin(), values.end(), source.data());
  auto area = gpu->allocate<std::uint64_t>(4096);
  std::vector<block_pair<pinned_span<const std::uint64_t>, std::uint64_t>> low, high;
  for (std::size_t i = 0; i < 16; ++i) {
    low.push_back({pinned_span<const std::uint64_t>(host_ptr<const std::uint64_t>(source.data() + i * 128), 128),
                   area.get() + i * 128});
    high.push_back({pinned_span<const std::uint64_t>(host_ptr<const std::uint64_t>(source.data() + 2048 + i * 128), 128),
                    area.get() + 2048 + i * 128});
  }
  bool grouped = false;
  asio::experimental::make_parallel_group(gpu->poke_blocks(low, asio::deferred), gpu->poke_blocks(high, asio::deferred))
      .async_wait(asio::experimental::wait_for_all(),
                  [&](std::array<std::size_t, 2>, boost::system::error_code a, std::size_t a_bytes,
                      boost::system::error_code b, std::size_t b_bytes) {
                    grouped = !a && !b && a_bytes == 16384 && b_bytes == 16384;
                  });
  BOOST_TEST(ferry::testing::run_until(io, [&] { return grouped; }));
  BOOST_TEST(ferry::testing::same_bytes(peek_list_array(4096, area.get()), values));

  std::vector<std::uint64_t> back(4096);
  std::vector<block_pair<std::span<std::uint64_t>, const std::uint64_t>> peeks;
  for (std::size_t i = 0; i < 32; ++i) {
    peeks.push_back({std::span(back).subspan(i * 128, 128), device_ptr<const std::uint64_t>(area.get() + i * 128)});
  }
  bool awaited = false;
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    awaited = co_await gpu->peek_blocks(peeks, asio::use_awaitable) == 32768;
  }, asio::detached);
  BOOST_TEST(ferry::testing::run_until(io, [&] { return awaited; }));
  BOOST_TEST(ferry::testing::same_bytes(back, values));
}

BOOST_AUTO_TEST_CASE(bad_blocks_are_refused_naming_the_block_before_anything_moves) {
  start();
  auto area = gpu->allocate<std::uint32_t>(1000);
  auto source = pinned_buffer<std::uint32_t>::allocate(1000);
  using pinned_block = block_pair<pinned_span<const std::uint32_t>, std::uint32_t>;
  const auto piece = [&](std::size_t offset, std::size_t count) {
    return pinned_span<const std::uint32_t>(host_ptr<const std::uint32_t>(source.data() + offset), count);
  };
  const std::vector<pinned_block> overlapping{{piece(0, 10), area.get()}, {piece(10, 10), area.get() + 50},
                                              {piece(20, 10), area.get() + 45}};
  ferry::testing::expect_error<std::invalid_argument>(
      [&] { gpu->poke_blocks(overlapping, asio::use_future); },
      {"engine::poke_blocks: blocks[1].device [", "and blocks[2].device [", "overlap; the blocks' destinations may not overlap"});
  // Equal blocks on a grid of slots, out of order, one slot named twice.
  const std::vector<pinned_block> slot_twice{{piece(0, 10), area.get() + 20}, {piece(10, 10), area.get()},
                                             {piece(20, 10), area.get() + 30}, {piece(30, 10), area.get() + 20},
                                             {piece(40, 10), area.get() + 10}};
  ferry::testing::expect_error<std::invalid_argument>(
      [&] { gpu->poke_blocks(slot_twice, asio::use_future); },
      {"engine::poke_blocks: blocks[0].device [", "and blocks[3].device [", "overlap; the blocks' destinations may not overlap"});
  // The same with blocks of a power-of-two size (64 bytes), and with one of them off its slot.
  const std::vector<pinned_block> slot_twice_power_of_two{{piece(0, 16), area.get() + 32}, {piece(16, 16), area.get()},
                                                          {piece(32, 16), area.get() + 48},
                                                          {piece(48, 16), area.get() + 32}};
  ferry::testing::expect_error<std::invalid_argument>(
      [&] { gpu->poke_blocks(slot_twice_power_of_two, asio::use_future); },
      {"engine::poke_blocks: blocks[0].device [", "and blocks[3].device [", "overlap; the blocks' destinations may not overlap"});
  const std::vector<pinned_block> off_the_grid{{piece(0, 16), area.get()}, {piece(16, 16), area.get() + 16},
                                               {piece(32, 16), area.get() + 30}};
  ferry::testing::expect_error<std::invalid_argument>(
      [&] { gpu->poke_blocks(off_the_grid, asio::use_future); },
      {"engine::poke_blocks: blocks[1].device [", "and blocks[2].device [", "overlap; the blocks' destinations may not overlap"});
  // Named by their places in the caller's list, the empty block between them counted.
  const std::vector<pinned_block> across_an_empty_block{{piece(0, 10), area.get() + 100}, {piece(10, 0), area.get()},
                                                        {piece(20, 10), area.get() + 105}};
  ferry::testing::expect_error<std::invalid_argument>(
      [&] { gpu->poke_blocks(across_an_empty_block, asio::use_future); },
      {"engine::poke_blocks: blocks[0].device [", "and blocks[2].device [", "overlap; the blocks' destinations may not overlap"});
  const std::vector<pinned_block> past_the_end{{piece(0, 10), area.get()}, {piece(10, 20), area.get() + 990}};
  ferry::testing::expect_error<std::invalid_argument>(
      [&] { gpu->poke_blocks(past_the_end, asio::use_future); },
      {"engine::poke_blocks: blocks[1].device range [", "of 80 bytes runs 40 bytes past the end of its allocation"});
  // Long lists, read by the checks a run at a time: the block named is the caller's, past the first run.
  std::vector<pinned_block> long_list;
  for (std::size_t i = 0; i < 600; ++i) long_list.push_back({piece(i, 1), area.get() + i});
  long_list[517] = {piece(517, 10), area.get() + 995};
  ferry::testing::expect_error<std::invalid_argument>(
      [&] { gpu->poke_blocks(long_list, asio::use_future); },
      {"engine::poke_blocks: blocks[517].device range [", "of 40 bytes runs 20 bytes past the end of its allocation"});
  long_list[517] = {piece(517, 1), area.get() + 517};
  long_list[400] = {piece(400, 1), area.get() + 3};
  ferry::testing::expect_error<std::invalid_argument>(
      [&] { gpu->poke_blocks(long_list, asio::use_future); },
      {"engine::poke_blocks: blocks[3].device [", "and blocks[400].device [", "overlap; the blocks' destinations may not overlap"});
  std::vector<std::uint32_t> pageable(10);
  const std::vector<pinned_block> unknown{
      {pinned_span<const std::uint32_t>(host_ptr<const std::uint32_t>(pageable.data()), 10), area.get()}};
  ferry::testing::expect_error<std::invalid_argument>([&] { gpu->poke_blocks(unknown, asio::use_future); },
                                                      {"engine::poke_blocks: blocks[0].host 0x", "is not"});
  const std::vector<block_pair<std::span<const std::uint32_t>, std::uint32_t>> huge{
      {std::span<const std::uint32_t>(pageable.data(), std::numeric_limits<std::size_t>::max() / 2), area.get()}};
  ferry::testing::expect_error<std::invalid_argument>([&] { gpu->poke_blocks(huge, asio::use_future); },
                                                      {"engine::poke_blocks: blocks[0].host.size()"});
  const std::vector<pinned_block> fine{{piece(0, 10), area.get()}};
  ferry::testing::expect_error<std::invalid_argument>(
      [&] { gpu->poke_blocks(fine, transfer_plan::staged, asio::use_future); },
      {"engine::poke_blocks: transfer_options::plan is staged; a block list chooses its own way"});
  ferry::testing::expect_error<std::invalid_argument>(
      [&] { gpu->poke_blocks(fine, static_cast<batch_path>(7), asio::use_future); },
      {"engine::poke_blocks: transfer_options::batching 7 is not a batch_path"});
  std::vector<std::uint32_t> into(20);
  const std::vector<block_pair<std::span<std::uint32_t>, std::uint32_t>> same_host{
      {std::span(into).subspan(0, 10), area.get()}, {std::span(into).subspan(5, 10), area.get() + 100}};
  ferry::testing::expect_error<std::invalid_argument>(
      [&] { gpu->peek_blocks(same_host, asio::use_future); },
      {"engine::peek_blocks: blocks[0].host [", "and blocks[1].host [", "overlap"});
  options.staging_chunk_bytes = 48;
  engine tiny_chunks(io.get_executor(), options);
  std::vector<std::uint32_t> big(1 << 10);  // 4 KiB
  auto wide = tiny_chunks.allocate<std::uint32_t>(1 << 10);
  const std::vector<block_pair<std::span<const std::uint32_t>, std::uint32_t>> more_than_a_chunk{
      {std::span<const std::uint32_t>(big), wide.get()}};
  ferry::testing::expect_error<std::invalid_argument>(
      [&] { tiny_chunks.poke_blocks(more_than_a_chunk, batch_path::kernel, asio::use_future); },
      {"engine::poke_blocks: transfer_options::batching is kernel, but the pageable blocks hold 4096 bytes, more "
       "than a staging chunk of 48 bytes (engine_options::staging_chunk_bytes), and the kernel takes no chunk of "
       "fewer than 64 bytes (its descriptors take 24 bytes a piece)"});
  BOOST_TEST(gpu->plan_counts().pinned == 0u);  // nothing was started
  BOOST_TEST(tiny_chunks.plan_counts().pinned == 0u);
  BOOST_TEST(tiny_chunks.plan_counts().staged == 0u);
}

// Mapped page-locked memory may be both sides of a list (its device address is a device side): blocks
// whose two sides lie apart in it move, every byte checked each way, and a block whose sides overlap
// is refused naming it, whether it is the list's first block or one after blocks in the same memory.
BOOST_AUTO_TEST_CASE(mapped_memory_may_be_both_sides_of_a_list_but_not_of_one_block) {
  start();
  constexpr std::size_t blocks = 8, block_bytes = 96;
  auto mapped = pinned_buffer<std::uint8_t>::allocate(4 * blocks * block_bytes, alloc_flags::device_mapped);
  const device_ptr<std::uint8_t> as_device = get_device_ptr(alloc_flags::none, mapped.get());
  std::span<std::uint8_t> all = mapped.span();
  ferry::testing::fill_random(all, 909);
  const std::vector<std::uint8_t> before(all.begin(), all.end());
  // Block i: host bytes [i * 96, +96) to device bytes [2 * 8 * 96 + (7 - i) * 96, +96), and back from there
  // into the last quarter.
  const std::size_t device_from = 2 * blocks * block_bytes, back_from = 3 * blocks * block_bytes;
  using poke_block = block_pair<pinned_span<const std::uint8_t>, std::uint8_t>;
  using peek_block = block_pair<pinned_span<std::uint8_t>, const std::uint8_t>;
  std::vector<poke_block> pokes;
  std::vector<peek_block> peeks;
  for (std::size_t i = 0; i < blocks; ++i) {
    const std::size_t device_offset = device_from + (blocks - 1 - i) * block_bytes;
    pokes.push_back({pinned_span(host_ptr<const std::uint8_t>(mapped.data() + i * block_bytes), block_bytes),
                     as_device + device_offset});
    peeks.push_back({pinned_span(host_ptr<std::uint8_t>(mapped.data() + back_from + i * block_bytes), block_bytes),
                     device_ptr<const std::uint8_t>(as_device + device_offset)});
  }
  outcome poked = run([&](auto handler) { gpu->poke_blocks(pokes, handler); });
  BOOST_TEST(!poked.error, poked.error.message());
  outcome peeked = run([&](auto handler) { gpu->peek_blocks(peeks, handler); });
  BOOST_TEST(!peeked.error, peeked.error.message());
  std::vector<std::uint8_t> expected = before;
  for (std::size_t i = 0; i < blocks; ++i) {
    const auto at = [&](std::size_t offset) { return expected.begin() + static_cast<std::ptrdiff_t>(offset); };
    const auto block = before.begin() + static_cast<std::ptrdiff_t>(i * block_bytes);
    std::copy_n(block, block_bytes, at(device_from + (blocks - 1 - i) * block_bytes));
    std::copy_n(block, block_bytes, at(back_from + i * block_bytes));
  }
  BOOST_TEST(ferry::testing::same_bytes(std::vector<std::uint8_t>(all.begin(), all.end()), expected));

  // Block 5's device side starts 32 bytes into its own host side.
  std::vector<poke_block> overlapping = pokes;
  overlapping[5].device = as_device + 5 * block_bytes + 32;
  ferry::testing::expect_error<std::invalid_argument>(
      [&] { gpu->poke_blocks(overlapping, asio::use_future); },
      {"engine::poke_blocks: blocks[5].host [", ") and blocks[5].device [", ") overlap"});
  std::vector<poke_block> first_overlapping(pokes.begin(), pokes.begin() + 1);
  first_overlapping[0].device = as_device + 16;
  ferry::testing::expect_error<std::invalid_argument>(
      [&] { gpu->poke_blocks(first_overlapping, asio::use_future); },
      {"engine::poke_blocks: blocks[0].host [", ") and blocks[0].device [", ") overlap"});
  BOOST_TEST(gpu->plan_counts().pinned == 2u);  // the two lists that moved; the refused ones started nothing
  BOOST_TEST(failures_seen().empty());
}

// A list queued on a stream behind a staged poke that cannot finish submitting (its one staging chunk
// waits behind a closed gate) is cancelled there: it is never submitted, completes with
// operation_aborted once its turn comes, and its bytes never move.
BOOST_AUTO_TEST_CASE(a_list_cancelled_before_it_reaches_its_stream_never_moves) {
  options.staging_chunk_bytes = 64 << 10;
  options.staging_chunks = 1;
  start();
  stream s = stream::create();
  auto area = gpu->allocate<std::uint32_t>(1024);
  memset(area.get(), 1024, std::uint32_t{0x5A5A5A5Au});
  auto source = pinned_buffer<std::uint32_t>::allocate(1024);
  ferry::testing::fill_random(source.span(), 808);
  std::vector<block_pair<pinned_span<const std::uint32_t>, std::uint32_t>> list;
  for (std::size_t i = 0; i < 16; ++i) {
    list.push_back({pinned_span<const std::uint32_t>(host_ptr<const std::uint32_t>(source.data() + 64 * i), 64),
                    area.get() + 64 * i});
  }
  // Pageable blocks too: with one chunk, which a list never takes at its call, staged chunk by chunk.
  auto pageable_area = gpu->allocate<std::uint32_t>(1024);
  memset(pageable_area.get(), 1024, std::uint32_t{0x5A5A5A5Au});
  const auto pageable_source = random_vector<std::uint32_t>(1024, 810);
  std::vector<block_pair<std::span<const std::uint32_t>, std::uint32_t>> pageable_list;
  for (std::size_t i = 0; i < 16; ++i) {
    pageable_list.push_back({std::span(pageable_source).subspan(64 * i, 64), pageable_area.get() + 64 * i});
  }
  const auto ahead_values = random_vector<std::uint32_t>(std::size_t{64} << 10, 809);  // 256 KiB: four chunks
  auto ahead_destination = gpu->allocate<std::uint32_t>(ahead_values.size());
  outcome ahead, cancelled, pageable_cancelled;
  asio::cancellation_signal signal, pageable_signal;
  {
    ferry::testing::stream_gate gate(s);
    gpu->poke(std::span<const std::uint32_t>(ahead_values), ahead_destination.get(),
              transfer_options{s, transfer_plan::staged}, record(ahead));
    gpu->poke_blocks(list, transfer_options{s}, asio::bind_cancellation_slot(signal.slot(), record(cancelled)));
    gpu->poke_blocks(pageable_list, transfer_options{s},
                     asio::bind_cancellation_slot(pageable_signal.slot(), record(pageable_cancelled)));
    signal.emit(asio::cancellation_type::terminal);
    pageable_signal.emit(asio::cancellation_type::terminal);
    ferry::testing::run_for_a_while(io);
    BOOST_TEST(ahead.calls == 0);
    gate.open();
    BOOST_TEST(ferry::testing::run_until(
        io, [&] { return ahead.calls == 1 && cancelled.calls == 1 && pageable_cancelled.calls == 1; }));
  }
  BOOST_TEST(!ahead.error);
  BOOST_TEST(cancelled.error == asio::error::operation_aborted);
  BOOST_TEST(cancelled.bytes == 0u);
  BOOST_TEST(pageable_cancelled.error == asio::error::operation_aborted);
  BOOST_TEST(pageable_cancelled.bytes == 0u);
  BOOST_TEST(gpu->plan_counts().staged == 2u);  // the transfer ahead and the pageable list
  BOOST_TEST(ferry::testing::same_bytes(peek_list_array(ahead_values.size(), ahead_destination.get()), ahead_values));
  for (const auto* untouched : {&area, &pageable_area}) {
    const std::vector<std::uint32_t> there = peek_list_array(1024, untouched->get());
    BOOST_TEST(std::all_of(there.begin(), there.end(), [](std::uint32_t w) { return w == 0x5A5A5A5Au; }));
  }
}

BOOST_AUTO_TEST_CASE(a_launch_the_driver_refuses_sends_the_list_through_the_copy_engine,
                     *ferry::testing::only_on_sim()) {
  start();
  sim::fail_call("cuLaunchKernel", 1, CUDA_ERROR_NO_BINARY_FOR_GPU);
  const layout shape(9);
  auto source = pinned_buffer<std::uint8_t>::allocate(shape.host_bytes);
  auto back = pinned_buffer<std::uint8_t>::allocate(shape.host_bytes);
  round_trip<pinned_span>(shape, source.span(), back.span());
  BOOST_TEST(gpu->plan_counts().kernel_block_lists == 0u);
  BOOST_TEST(gpu->plan_counts().copy_engine_block_lists == 2u);
  const std::vector<std::string> seen = failures_seen();
  BOOST_TEST_REQUIRE(seen.size() == 1u);
  BOOST_TEST(seen[0].find("ferry_copy_blocks") != std::string::npos);
  BOOST_TEST(seen[0].find("CUDA_ERROR_NO_BINARY_FOR_GPU") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_batch_the_driver_refuses_goes_block_by_block, *ferry::testing::only_on_sim()) {
  start();
  sim::fail_call("cuMemcpyBatchAsync", 1, CUDA_ERROR_NOT_SUPPORTED);
  const layout shape(10);
  auto source = pinned_buffer<std::uint8_t>::allocate(shape.host_bytes);
  auto back = pinned_buffer<std::uint8_t>::allocate(shape.host_bytes);
  round_trip<pinned_span>(shape, source.span(), back.span(), batch_path::copy_engine);
  const std::vector<std::string> seen = failures_seen();
  BOOST_TEST_REQUIRE(seen.size() == 1u);
  BOOST_TEST(seen[0].find("cuMemcpyBatchAsync refused a batch of") != std::string::npos);
}

// A list whose launch finds the context failed completes with that status, moves nothing it reports,
// and a pageable peek's destination is left as it was (nothing is unpacked from a list that never ran).
BOOST_AUTO_TEST_CASE(a_list_whose_launch_fails_fails_its_op, *ferry::testing::only_on_sim()) {
  start();
  auto area = gpu->allocate<std::uint8_t>(1 << 16);
  std::vector<std::uint8_t> back(1 << 16, 0xA5);
  std::vector<block_pair<std::span<std::uint8_t>, std::uint8_t>> peeks;
  for (std::size_t i = 0; i < 16; ++i) peeks.push_back({std::span(back).subspan(i * 4096, 4096), area.get() + i * 4096});
  sim::fail_call("cuLaunchKernel", 1, CUDA_ERROR_ILLEGAL_ADDRESS);
  outcome failed = run([&](auto handler) { gpu->peek_blocks(peeks, batch_path::kernel, handler); });
  BOOST_TEST(failed.error == std::error_code(CUDA_ERROR_ILLEGAL_ADDRESS, cuda_category()));
  BOOST_TEST(failed.bytes == 0u);
  BOOST_TEST(std::all_of(back.begin(), back.end(), [](std::uint8_t b) { return b == 0xA5; }));
  const std::vector<std::string> seen = failures_seen();
  BOOST_TEST_REQUIRE(seen.size() == 1u);
  BOOST_TEST(seen[0].find("engine::peek_blocks") != std::string::npos);
  BOOST_TEST(seen[0].find("16 blocks") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
