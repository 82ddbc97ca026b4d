// Regression tests for what the argument fuzzer (tests/fuzz/argument_fuzzer.cc) found in ferry's
// argument checks, one case per finding. They run on both backends.
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <vector>

#include "ferry/blocks.hpp"
#include "ferry/engine.hpp"
#include "ferry/managed.hpp"
#include "ferry/marshal.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/random_bytes.hpp"

using namespace ferry;
namespace asio = boost::asio;
using ferry::testing::expect_error;
using ferry::testing::random_vector;
using ferry::testing::same_bytes;

namespace {

constexpr std::size_t count = 64;

// A device array holding random words, and what it holds.
struct filled_device_array {
  std::vector<std::uint32_t> values = random_vector<std::uint32_t>(count, 0xf022);
  device_buffer<std::uint32_t> array = device_buffer<std::uint32_t>::allocate(count);
  filled_device_array() { poke_array(count, values.data(), array.get()); }
  bool unchanged() const { return same_bytes(peek_list_array(count, array.get()), values); }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(fuzz_findings, ferry::testing::device_fixture)

// Finding 1: an empty vector or span has no storage (data() is null), and the list forms refused it as
// "a null pointer". Nothing is touched, so they accept it; a null pointer with elements to move is still
// refused.
BOOST_AUTO_TEST_CASE(empty_lists_are_accepted_and_move_nothing) {
  filled_device_array device;
  BOOST_TEST(peek_list_array(0, device.array.get()).empty());
  poke_list_array(std::span<const std::uint32_t>(), device.array.get());
  peek_array<std::uint32_t>(0, device.array.get(), nullptr);
  {
    asio::io_context io;
    engine gpu{io.get_executor()};
    auto back = gpu.poke(std::vector<std::uint32_t>(), device.array.get(), asio::use_future);
    auto read = gpu.peek(device_ptr<const std::uint32_t>(device.array.get()), 0, asio::use_future);
    io.run();
    BOOST_TEST(back.get().empty());
    BOOST_TEST(read.get().empty());
  }
  BOOST_TEST(device.unchanged());
  expect_error<std::invalid_argument>([&] { peek_array<std::uint32_t>(1, device.array.get(), nullptr); },
                                      {"peek_array: destination is a null pointer"});
}

// Finding 2: advice that is none of memory_advice's values was accepted for an empty range, and for a
// non-empty one reached the driver (and was cast into a CUmem_advise that cannot hold it: UBSan).
BOOST_AUTO_TEST_CASE(advice_that_is_not_a_memory_advice_is_rejected) {
  managed_buffer<std::uint32_t> managed = managed_buffer<std::uint32_t>::allocate(count);
  expect_error<std::invalid_argument>(
      [&] { advise_array(managed.get(), 0, static_cast<memory_advice>(0), memory_location::host()); },
      {"advise_array: advice 0 is not one of memory_advice's values"});
  expect_error<std::invalid_argument>(
      [&] { advise_array(managed.get(), count, static_cast<memory_advice>(8), memory_location::host()); },
      {"advise_array: advice 8 is not one of memory_advice's values"});
  advise_array(managed.get(), count, memory_advice::read_mostly, memory_location::host());
}

// Finding 3: transfer_options::plan was taken as given. A value that is no plan ran as a pinned copy;
// `batched` forced on a pageable transfer was never submitted, and its handler never ran (a hang).
BOOST_AUTO_TEST_CASE(a_forced_plan_must_be_one_a_pageable_transfer_can_take) {
  filled_device_array device;
  asio::io_context io;
  engine gpu{io.get_executor()};
  std::vector<std::uint32_t> host = random_vector<std::uint32_t>(count, 0xf023);
  const auto before = gpu.plan_counts();
  expect_error<std::invalid_argument>(
      [&] {
        gpu.poke(std::span<const std::uint32_t>(host), device.array.get(),
                 transfer_options{transfer_plan::batched}, asio::use_future);
      },
      {"engine::poke: transfer_options::plan is batched"});
  expect_error<std::invalid_argument>(
      [&] {
        gpu.peek(device_ptr<const std::uint32_t>(device.array.get()), std::span<std::uint32_t>(host),
                 transfer_options{static_cast<transfer_plan>(17)}, asio::use_future);
      },
      {"engine::peek: transfer_options::plan 17 is not a transfer_plan"});
  const auto after = gpu.plan_counts();
  BOOST_TEST(after.pinned + after.registered + after.staged + after.batched + after.driver_staged ==
             before.pinned + before.registered + before.staged + before.batched + before.driver_staged);
  BOOST_TEST(device.unchanged());
  // A plan a pageable transfer can take still runs.
  auto moved = gpu.poke(std::span<const std::uint32_t>(host), device.array.get(),
                        transfer_options{transfer_plan::staged}, asio::use_future);
  io.run();
  BOOST_TEST(moved.get() == count * sizeof(std::uint32_t));
  BOOST_TEST(same_bytes(peek_list_array(count, device.array.get()), host));
}

// Finding 4: only device-to-device copies were checked for overlap. A host pointer can name memory the
// device side names too (mapped page-locked memory, whose device address is its host address), and
// such a copy reached the driver with overlapping ranges (a memcpy with overlap, undefined).
BOOST_AUTO_TEST_CASE(copies_whose_host_side_is_the_same_memory_as_the_device_side_are_refused) {
  pinned_buffer<std::uint32_t> mapped = pinned_buffer<std::uint32_t>::allocate(count, alloc_flags::device_mapped);
  const std::vector<std::uint32_t> values = random_vector<std::uint32_t>(count, 0xf024);
  std::memcpy(mapped.data(), values.data(), count * sizeof(std::uint32_t));
  const device_ptr<std::uint32_t> same = get_device_ptr(alloc_flags::none, mapped.get());
  expect_error<std::invalid_argument>([&] { poke_array(count / 2, mapped.data() + 1, same); },
                                      {"poke_array: source [", "overlap"});
  expect_error<std::invalid_argument>([&] { peek_array(count / 2, device_ptr<const std::uint32_t>(same), mapped.data() + 3); },
                                      {"peek_array: source [", "overlap"});
  expect_error<std::invalid_argument>(
      [&] { poke_array_2d(4, 4, mapped.data(), 8, 0, 0, same, 8, 1, 0); },
      {"poke_array_2d: source region at", "overlap"});
  {
    asio::io_context io;
    engine gpu{io.get_executor()};
    expect_error<std::invalid_argument>(
        [&] {
          gpu.peek(device_ptr<const std::uint32_t>(same), std::span<std::uint32_t>(mapped.data() + 2, count / 2),
                   asio::use_future);
        },
        {"engine::peek: source [", "overlap"});
  }
  BOOST_TEST(std::memcmp(mapped.data(), values.data(), count * sizeof(std::uint32_t)) == 0);
  // Disjoint halves of the same memory still copy.
  poke_array(count / 2, mapped.data(), same + count / 2);
  BOOST_TEST(std::memcmp(mapped.data() + count / 2, values.data(), count / 2 * sizeof(std::uint32_t)) == 0);
}

// Finding 5: a pitch whose size in bytes overflows size_t was not checked; with one row, the overlap
// check then divided by pitch * element_size wrapped to 0 (SIGFPE), and a pitch of 2^63 bytes or more
// overflowed its signed arithmetic.
BOOST_AUTO_TEST_CASE(pitches_are_checked_in_bytes_and_one_row_regions_need_no_division) {
  filled_device_array device;
  const device_ptr<const std::uint32_t> source = device.array.get();
  expect_error<std::invalid_argument>(
      [&] { copy_array_2d(4, 1, source, std::size_t{1} << 62, 0, 0, device.array.get() + 2, std::size_t{1} << 62, 0, 0); },
      {"copy_array_2d: source width (pitch) in bytes", "overflows size_t"});
  expect_error<std::invalid_argument>(
      [&] { copy_array_2d(4, 1, source, std::size_t{1} << 61, 0, 0, device.array.get() + 2, std::size_t{1} << 61, 0, 0); },
      {"copy_array_2d: source region at", "overlap"});
  BOOST_TEST(device.unchanged());
}

// Finding 6: the region's offset (y * pitch + x elements) was added to the pointer modulo 2^64, so an
// offset just short of 2^64 from an interior pointer wrapped back into the allocation and was accepted.
BOOST_AUTO_TEST_CASE(offsets_that_wrap_the_address_space_are_refused) {
  filled_device_array device;
  device_buffer<std::uint32_t> destination = device_buffer<std::uint32_t>::allocate(count);
  const std::size_t pitch = static_cast<std::size_t>(-1) / sizeof(std::uint32_t) - 3;  // (2^64 - 16) bytes, about
  expect_error<std::invalid_argument>(
      [&] {
        copy_array_2d(2, 1, device_ptr<const std::uint32_t>(device.array.get() + 8), pitch, 0, 1, destination.get(), 2,
                      0, 0);
      },
      {"copy_array_2d: source", "runs past the end of the address space"});
  BOOST_TEST(device.unchanged());
}

// Finding 7: a pageable side was not checked at all, so a range running past the end of the address
// space was taken; its end wrapped to a low address, and a block list's check that the blocks'
// destinations do not overlap, reading that end, let two such blocks through to the driver. Such a range
// is now refused wherever a pageable side is named.
BOOST_AUTO_TEST_CASE(pageable_ranges_past_the_end_of_the_address_space_are_refused) {
  filled_device_array device;
  // 256 bytes from 128 bytes below the top of the address space: nothing there is touched.
  auto* near_top = reinterpret_cast<std::uint32_t*>(UINTPTR_MAX - 127);
  const std::span<std::uint32_t> wrapping(near_top, count);
  expect_error<std::invalid_argument>(
      [&] { poke_array<std::uint32_t>(count, near_top, device.array.get()); },
      {"poke_array: source 0xffffffffffffff80: 256 bytes from there run past the end of the address space"});
  asio::io_context io;
  engine gpu{io.get_executor()};
  expect_error<std::invalid_argument>(
      [&] { gpu.peek(device_ptr<const std::uint32_t>(device.array.get()), wrapping, asio::use_future); },
      {"engine::peek: destination 0xffffffffffffff80: 256 bytes from there run past the end of the address space"});
  const std::vector<block_pair<std::span<std::uint32_t>, const std::uint32_t>> blocks{
      {wrapping, device_ptr<const std::uint32_t>(device.array.get())},
      {wrapping.first(count / 2), device_ptr<const std::uint32_t>(device.array.get())}};
  expect_error<std::invalid_argument>(
      [&] { gpu.peek_blocks(blocks, asio::use_future); },
      {"engine::peek_blocks: blocks[0].host 0xffffffffffffff80: 256 bytes from there run past the end of the address "
       "space"});
  BOOST_TEST(io.run() == 0u);
  BOOST_TEST(device.unchanged());
}

BOOST_AUTO_TEST_SUITE_END()
