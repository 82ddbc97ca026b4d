// The shape of the engine's calls: host memory as one argument whose type says what it is (pinned_span,
// a span, an owned vector), transfer_options given as a stream, a plan or both, and 2-D regions as
// pitched_views. Random data, every byte checked; bad options refused before anything runs.
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "ferry/engine.hpp"
#include "ferry/marshal.hpp"
#include "tests/support/engine_fixture.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/io_helpers.hpp"
#include "tests/support/random_bytes.hpp"

namespace asio = boost::asio;
using namespace ferry;
using ferry::testing::expect_error;
using ferry::testing::random_vector;
using ferry::testing::same_bytes;

namespace {

using engine_fixture = ferry::testing::engine_fixture<1 << 20, 3>;

// An address as the engine's messages write it.
template <class T>
std::string address_of(device_ptr<T> pointer) {
  char text[2 + 2 * sizeof(CUdeviceptr) + 1];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(pointer.get()));
  return text;
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(call_forms, engine_fixture)

BOOST_AUTO_TEST_CASE(a_pinned_span_moves_as_page_locked_memory_both_ways) {
  constexpr std::size_t count = 3000;
  const auto values = random_vector<std::uint32_t>(count, 1201);
  auto pinned = pinned_buffer<std::uint32_t>::allocate(count);
  std::copy(values.begin(), values.end(), pinned.data());
  auto device = gpu.allocate<std::uint32_t>(count);
  const auto before = gpu.plan_counts();

  BOOST_TEST(gpu.poke(pinned_span<const std::uint32_t>(pinned.span()), device.get(), asio::use_future).get() ==
             count * 4);
  BOOST_TEST(same_bytes(peek_list_array(count, device.get()), values));

  ferry::testing::poison_fill(pinned.span());
  BOOST_TEST(gpu.peek(device.get(), pinned.span().subspan(100, count - 100), asio::use_future).get() ==
             (count - 100) * 4);
  BOOST_TEST(same_bytes(std::vector<std::uint32_t>(pinned.data() + 100, pinned.data() + count),
                        std::vector<std::uint32_t>(values.begin(), values.begin() + (count - 100))));
  const auto after = gpu.plan_counts();
  BOOST_TEST(after.pinned - before.pinned == 2u);  // neither was planned as pageable memory
  BOOST_TEST(after.staged == before.staged);
}

BOOST_AUTO_TEST_CASE(options_are_a_stream_a_plan_or_both) {
  constexpr std::size_t count = 5000;
  const auto values = random_vector<std::uint64_t>(count, 1202);
  auto device = gpu.allocate<std::uint64_t>(count);
  stream s = stream::create();
  std::vector<transfer_plan> seen;
  engine_options logging = options();
  logging.on_plan = [&](std::string_view, transfer_plan plan, std::size_t) { seen.push_back(plan); };
  engine logged{io.get_executor(), logging};

  BOOST_TEST(logged.poke(values, device.get(), s, asio::use_future).get() == count * 8);
  BOOST_TEST(logged.poke(values, device.get(), transfer_plan::staged, asio::use_future).get() == count * 8);
  BOOST_TEST(logged.poke(values, device.get(), {s, transfer_plan::staged}, asio::use_future).get() == count * 8);
  std::vector<std::uint64_t> back(count);
  BOOST_TEST(logged.peek(device.get(), back, {stream_ref(s), transfer_plan::staged}, asio::use_future).get() ==
             count * 8);
  BOOST_TEST(same_bytes(back, values));
  BOOST_REQUIRE(seen.size() == 4u);
  BOOST_TEST((seen[1] == transfer_plan::staged && seen[2] == transfer_plan::staged && seen[3] == transfer_plan::staged));
  BOOST_TEST(to_string(transfer_plan::staged) == "staged");
}

BOOST_AUTO_TEST_CASE(an_owned_vector_comes_back_through_the_options_form) {
  const auto values = random_vector<std::uint16_t>(7000, 1203);
  auto device = gpu.allocate<std::uint16_t>(values.size());
  stream s = stream::create();
  std::vector<std::uint16_t> returned =
      gpu.poke(std::vector<std::uint16_t>(values), device.get(), {s, transfer_plan::staged}, asio::use_future).get();
  BOOST_TEST(same_bytes(returned, values));
  BOOST_TEST(same_bytes(gpu.peek(device.get(), values.size(), s, asio::use_future).get(), values));
}

BOOST_AUTO_TEST_CASE(a_plan_that_cannot_apply_is_refused_before_anything_runs) {
  auto a = gpu.allocate<std::uint32_t>(64);
  auto b = gpu.allocate<std::uint32_t>(64);
  const auto values = random_vector<std::uint32_t>(64, 1204);
  poke_array(values.size(), values.data(), a.get());
  poke_array(values.size(), values.data(), b.get());
  int calls = 0;
  auto count_call = [&](auto...) { ++calls; };
  expect_error<std::invalid_argument>([&] { gpu.copy(a.get(), b.get(), 64, transfer_plan::staged, count_call); },
                                      {"engine::copy: transfer_options::plan is staged",
                                       "no side of this transfer is pageable host memory"});
  expect_error<std::invalid_argument>(
      [&] { gpu.memset(b.get(), 64, std::uint32_t{7}, transfer_plan::registered, count_call); },
      {"engine::memset: transfer_options::plan is registered"});
  expect_error<std::invalid_argument>(
      [&] { gpu.poke(std::vector<std::uint32_t>(64, 9), b.get(), transfer_plan::registered, count_call); },
      {"engine::poke: transfer_options::plan is registered", "the op owns the vector"});
  ferry::testing::run_for_a_while(io);
  BOOST_TEST(calls == 0);
  BOOST_TEST(same_bytes(peek_list_array(64, b.get()), values));  // untouched
}

BOOST_AUTO_TEST_CASE(copy_2d_takes_pitched_views_and_runs_on_a_pool_stream_without_options) {
  constexpr std::size_t width = 45, height = 17, source_pitch = 64, destination_pitch = 50, rows = 24;
  const auto values = random_vector<std::uint32_t>(source_pitch * rows, 1205);
  const auto before = random_vector<std::uint32_t>(destination_pitch * rows, 1206);
  auto source = gpu.allocate<std::uint32_t>(values.size());
  auto destination = gpu.allocate<std::uint32_t>(before.size());
  poke_array(values.size(), values.data(), source.get());
  poke_array(before.size(), before.data(), destination.get());
  const std::size_t bytes = gpu.copy_2d(pitched_view(device_ptr<const std::uint32_t>(source.get()), source_pitch, width, height, 7, 2),
                                        pitched_view(destination.get(), destination_pitch, width, height, 3, 5),
                                        asio::use_future)
                                .get();
  BOOST_TEST(bytes == width * height * 4);
  auto expected = before;
  for (std::size_t row = 0; row < height; ++row) {
    for (std::size_t column = 0; column < width; ++column) {
      expected[(5 + row) * destination_pitch + 3 + column] = values[(2 + row) * source_pitch + 7 + column];
    }
  }
  BOOST_TEST(same_bytes(peek_list_array(before.size(), destination.get()), expected));
}

BOOST_AUTO_TEST_CASE(copy_2d_regions_of_different_sizes_are_refused_naming_both) {
  auto source = gpu.allocate<std::uint32_t>(64 * 16);
  auto destination = gpu.allocate<std::uint32_t>(64 * 16);
  const auto before = random_vector<std::uint32_t>(64 * 16, 1207);
  poke_array(before.size(), before.data(), destination.get());
  int calls = 0;
  expect_error<std::invalid_argument>(
      [&] {
        gpu.copy_2d(pitched_view(source.get(), 64, 40, 8), pitched_view(destination.get(), 64, 41, 8),
                    [&](auto...) { ++calls; });
      },
      {"engine::copy_2d: source is a 40 x 8 region but destination is 41 x 8"});
  ferry::testing::run_for_a_while(io);
  BOOST_TEST(calls == 0);
  BOOST_TEST(same_bytes(peek_list_array(before.size(), destination.get()), before));
}

// The driver's copy of ranges that share a byte is undefined: copy and copy_peer refuse two ranges of one
// allocation that overlap, naming both, before anything runs; ranges that only touch move.
BOOST_AUTO_TEST_CASE(a_copy_whose_ranges_share_a_byte_is_refused_naming_both_and_touching_ranges_move) {
  constexpr std::size_t count = 64;  // 256 bytes
  auto area = gpu.allocate<std::uint32_t>(3 * count);
  const auto before = random_vector<std::uint32_t>(3 * count, 1208);
  poke_array(before.size(), before.data(), area.get());
  const device_ptr<const std::uint32_t> start(area.get());
  const auto range = [&](std::size_t first) {
    return "[" + address_of(area.get() + first) + ", " + address_of(area.get() + first + count) + ")";
  };
  const std::string refused = " overlap (256 bytes each); the copied areas may not overlap";
  int calls = 0;
  auto count_call = [&](auto...) { ++calls; };
  expect_error<std::invalid_argument>([&] { gpu.copy(start, area.get() + 50, count, count_call); },
                                      {"engine::copy: source " + range(0) + " and destination " + range(50) + refused});
  expect_error<std::invalid_argument>([&] { gpu.copy(start + 63, area.get(), count, count_call); },
                                      {"engine::copy: source " + range(63) + " and destination " + range(0) + refused});
  expect_error<std::invalid_argument>([&] { gpu.copy(start, area.get(), count, count_call); },
                                      {"engine::copy: source " + range(0) + " and destination " + range(0) + refused});
  // Checked before the options are: a batch path or a stream changes nothing.
  stream s = stream::create();
  expect_error<std::invalid_argument>(
      [&] { gpu.copy(start + 1, area.get(), count, {s, transfer_plan::automatic}, count_call); },
      {"engine::copy: source " + range(1) + " and destination " + range(0) + refused});
  expect_error<std::invalid_argument>(
      [&] { gpu.copy(start, area.get() + 1, count, batch_path::copy_engine, count_call); },
      {"engine::copy: source " + range(0) + " and destination " + range(1) + refused});
  expect_error<std::invalid_argument>(
      [&] { gpu.copy_peer(start + 10, gpu.context(), area.get(), gpu.context(), count, count_call); },
      {"engine::copy_peer: source " + range(10) + " and destination " + range(0) + refused});
  ferry::testing::run_for_a_while(io);
  BOOST_TEST(calls == 0);
  BOOST_TEST(same_bytes(peek_list_array(before.size(), area.get()), before));  // untouched

  BOOST_TEST(gpu.copy(start, area.get() + count, count, asio::use_future).get() == count * 4);
  BOOST_TEST(gpu.copy(start, area.get(), 0, asio::use_future).get() == 0u);  // no bytes: nothing shared
  auto expected = before;
  std::copy(before.begin(), before.begin() + count, expected.begin() + count);
  BOOST_TEST(same_bytes(peek_list_array(before.size(), area.get()), expected));
}

// Regions of one array overlap when a row of one shares a byte with a row of the other; with different
// pitches, when their spans (first row's first byte to last row's last byte) meet.
BOOST_AUTO_TEST_CASE(copy_2d_regions_whose_rows_meet_are_refused_and_interleaved_rows_move) {
  constexpr std::size_t pitch = 64, rows = 8;
  auto area = gpu.allocate<std::uint32_t>(pitch * rows);
  const auto before = random_vector<std::uint32_t>(pitch * rows, 1209);
  poke_array(before.size(), before.data(), area.get());
  const device_ptr<const std::uint32_t> start(area.get());
  int calls = 0;
  auto count_call = [&](auto...) { ++calls; };
  expect_error<std::invalid_argument>(
      [&] {
        gpu.copy_2d(pitched_view(start, pitch, 40, rows), pitched_view(area.get(), pitch, 40, rows, 10), count_call);
      },
      {"engine::copy_2d: source region at " + address_of(start) + " and destination region at " +
       address_of(area.get() + 10) + " (40 x 8 elements) overlap; the copied areas may not overlap"});
  // Rows of the source (width 24 at x 0, pitch 64) between rows of the destination (pitch 128, width 24
  // at x 40) share no byte, but the pitches differ and the spans meet.
  expect_error<std::invalid_argument>(
      [&] {
        gpu.copy_2d(pitched_view(start, pitch, 24, 2), pitched_view(area.get(), 2 * pitch, 24, 2, 40), count_call);
      },
      {"engine::copy_2d: source region at " + address_of(start) + " and destination region at " +
       address_of(area.get() + 40) + " (24 x 2 elements) overlap; the copied areas may not overlap"});
  ferry::testing::run_for_a_while(io);
  BOOST_TEST(calls == 0);
  BOOST_TEST(same_bytes(peek_list_array(before.size(), area.get()), before));  // untouched

  // The same pitch: the spans meet, no row meets another.
  BOOST_TEST(gpu.copy_2d(pitched_view(start, pitch, 24, rows), pitched_view(area.get(), pitch, 24, rows, 40),
                         asio::use_future)
                 .get() == 24 * rows * 4);
  auto expected = before;
  for (std::size_t row = 0; row < rows; ++row) {
    std::copy(before.begin() + row * pitch, before.begin() + row * pitch + 24, expected.begin() + row * pitch + 40);
  }
  BOOST_TEST(same_bytes(peek_list_array(before.size(), area.get()), expected));
}

BOOST_AUTO_TEST_SUITE_END()
