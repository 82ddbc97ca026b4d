// 2-D peek / poke / copy: regions at non-zero (x, y) on both sides, pitches wider than the width.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <vector>

#include "ferry/marshal.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/random_bytes.hpp"

using namespace ferry;
using ferry::testing::expect_error;
using ferry::testing::random_vector;

namespace {

// The geometry every case uses: a 37 x 23 region, source at (5, 3) of rows 61 wide, destination at
// (11, 7) of rows 53 wide.
constexpr std::size_t width = 37, height = 23;
constexpr std::size_t source_pitch = 61, source_x = 5, source_y = 3, source_rows = 30;
constexpr std::size_t destination_pitch = 53, destination_x = 11, destination_y = 7, destination_rows = 31;

// What the destination must hold after the copy: its poison everywhere, the source's region inside.
template <class T>
std::vector<T> expected_after(const std::vector<T>& source, std::vector<T> destination) {
  for (std::size_t row = 0; row < height; ++row) {
    for (std::size_t column = 0; column < width; ++column) {
      destination[(destination_y + row) * destination_pitch + destination_x + column] =
          source[(source_y + row) * source_pitch + source_x + column];
    }
  }
  return destination;
}

template <class T>
void check_equal(const std::vector<T>& expected, const std::vector<T>& actual) {
  auto difference = ferry::testing::first_difference(std::as_bytes(std::span(expected)), std::as_bytes(std::span(actual)));
  BOOST_CHECK_MESSAGE(!difference, "first differing byte at offset " << difference.value_or(0));
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(transfer_2d, ferry::testing::device_fixture)

BOOST_AUTO_TEST_CASE(poke_2d_writes_the_region_and_nothing_around_it) {
  auto source = random_vector<std::uint16_t>(source_pitch * source_rows, 11);
  auto before = random_vector<std::uint16_t>(destination_pitch * destination_rows, 12);
  device_buffer<std::uint16_t> device = device_buffer<std::uint16_t>::allocate(before.size());
  poke_array(before.size(), before.data(), device.get());
  poke_array_2d(width, height, source.data(), source_pitch, source_x, source_y, device.get(), destination_pitch,
                destination_x, destination_y);
  check_equal(expected_after(source, before), peek_list_array(before.size(), device.get()));
}

BOOST_AUTO_TEST_CASE(peek_2d_reads_the_region_into_a_wider_host_array) {
  auto source = random_vector<std::uint32_t>(source_pitch * source_rows, 13);
  auto destination = random_vector<std::uint32_t>(destination_pitch * destination_rows, 14);
  device_buffer<std::uint32_t> device = device_buffer<std::uint32_t>::allocate(source.size());
  poke_array(source.size(), source.data(), device.get());
  auto expected = expected_after(source, destination);
  peek_array_2d(width, height, device.get(), source_pitch, source_x, source_y, destination.data(), destination_pitch,
                destination_x, destination_y);
  check_equal(expected, destination);
}

BOOST_AUTO_TEST_CASE(copy_2d_copies_between_device_arrays_of_different_pitch) {
  auto source = random_vector<std::uint8_t>(source_pitch * source_rows, 15);
  auto before = random_vector<std::uint8_t>(destination_pitch * destination_rows, 16);
  device_buffer<std::uint8_t> a = device_buffer<std::uint8_t>::allocate(source.size());
  device_buffer<std::uint8_t> b = device_buffer<std::uint8_t>::allocate(before.size());
  poke_array(source.size(), source.data(), a.get());
  poke_array(before.size(), before.data(), b.get());
  copy_array_2d(width, height, a.get(), source_pitch, source_x, source_y, b.get(), destination_pitch, destination_x,
                destination_y);
  check_equal(expected_after(source, before), peek_list_array(before.size(), b.get()));
}

BOOST_AUTO_TEST_CASE(async_2d_forms_round_trip_through_pinned_memory_on_a_stream) {
  auto source = random_vector<double>(source_pitch * source_rows, 17);
  auto before = random_vector<double>(destination_pitch * destination_rows, 18);
  pinned_buffer<double> pinned_source = pinned_buffer<double>::allocate(source.size());
  std::copy(source.begin(), source.end(), pinned_source.data());
  device_buffer<double> a = device_buffer<double>::allocate(before.size());
  device_buffer<double> b = device_buffer<double>::allocate(before.size());
  poke_array(before.size(), before.data(), a.get());
  stream s = stream::create();
  poke_array_2d_async(width, height, host_ptr<const double>(pinned_source.get()), source_pitch, source_x, source_y,
                      a.get(), destination_pitch, destination_x, destination_y, s);
  // Copy the whole destination-shaped array a -> b on the device, then read b back region by region.
  copy_array_2d_async(destination_pitch, destination_rows, a.get(), destination_pitch, 0, 0, b.get(),
                      destination_pitch, 0, 0, s);
  pinned_buffer<double> back = pinned_buffer<double>::allocate(before.size());
  ferry::testing::poison_fill(back.span());
  peek_array_2d_async(destination_pitch, destination_rows, b.get(), destination_pitch, 0, 0, back.get(),
                      destination_pitch, 0, 0, s);
  s.synchronize();
  check_equal(expected_after(source, before), std::vector<double>(back.data(), back.data() + back.size()));
}

// The typed forms: each region a pitched_view, the memory kind in its pointer's type.
BOOST_AUTO_TEST_CASE(typed_2d_forms_take_pitched_views) {
  const auto source = random_vector<std::int32_t>(source_pitch * source_rows, 27);
  const auto before = random_vector<std::int32_t>(destination_pitch * destination_rows, 28);
  device_buffer<std::int32_t> a = device_buffer<std::int32_t>::allocate(before.size());
  device_buffer<std::int32_t> b = device_buffer<std::int32_t>::allocate(before.size());
  poke_array(before.size(), before.data(), a.get());
  poke_array_2d(pitched_view(source.data(), source_pitch, width, height, source_x, source_y),
                pitched_view(a.get(), destination_pitch, width, height, destination_x, destination_y));
  copy_array_2d(pitched_view(a.get(), destination_pitch, destination_pitch, destination_rows),
                pitched_view(b.get(), destination_pitch, destination_pitch, destination_rows));
  std::vector<std::int32_t> back(before.size());
  ferry::testing::poison_fill(std::span(back));
  peek_array_2d(pitched_view(b.get(), destination_pitch, destination_pitch, destination_rows),
                pitched_view(back.data(), destination_pitch, destination_pitch, destination_rows));
  check_equal(expected_after(source, before), back);

  pinned_buffer<std::int32_t> pinned = pinned_buffer<std::int32_t>::allocate(before.size());
  ferry::testing::poison_fill(pinned.span());
  stream s = stream::create();
  peek_array_2d_async(pitched_view(device_ptr<const std::int32_t>(b.get()), destination_pitch, destination_pitch,
                                   destination_rows),
                      pitched_view(pinned.get(), destination_pitch, destination_pitch, destination_rows), s);
  s.synchronize();
  check_equal(expected_after(source, before), std::vector<std::int32_t>(pinned.data(), pinned.data() + pinned.size()));

  expect_error<std::invalid_argument>(
      [&] {
        copy_array_2d(pitched_view(a.get(), destination_pitch, width, height),
                      pitched_view(b.get(), destination_pitch, width, height + 1));
      },
      {"copy_array_2d: source is a 37 x 23 region but destination is 37 x 24"});
}

BOOST_AUTO_TEST_CASE(regions_wider_than_their_pitch_are_rejected) {
  device_buffer<std::uint32_t> device = device_buffer<std::uint32_t>::allocate(1000);
  std::vector<std::uint32_t> host(1000);
  expect_error<std::invalid_argument>(
      [&] { poke_array_2d(10, 5, host.data(), 20, 0, 0, device.get(), 12, 3, 0); },
      {"poke_array_2d: destination region of width 10 at x 3 is wider than its array width 12"});
  expect_error<std::invalid_argument>(
      [&] { peek_array_2d(21, 5, device.get(), 20, 0, 0, host.data(), 40, 0, 0); },
      {"peek_array_2d: source region of width 21 at x 0 is wider than its array width 20"});
}

BOOST_AUTO_TEST_CASE(regions_past_the_allocation_are_rejected) {
  device_buffer<std::uint32_t> device = device_buffer<std::uint32_t>::allocate(100);  // 10 rows of 10
  std::vector<std::uint32_t> host(1000);
  // 5 rows from row 6: the last row (10) does not exist.
  expect_error<std::invalid_argument>([&] { poke_array_2d(10, 5, host.data(), 10, 0, 0, device.get(), 10, 0, 6); },
                                      {"poke_array_2d: destination range", "runs 40 bytes past the end"});
}

BOOST_AUTO_TEST_CASE(overlapping_2d_regions_are_rejected_and_interleaved_ones_are_not) {
  device_buffer<std::uint32_t> device = device_buffer<std::uint32_t>::allocate(100 * 100);
  expect_error<std::invalid_argument>(
      [&] { copy_array_2d(10, 10, device.get(), 100, 0, 0, device.get(), 100, 5, 5); },
      {"copy_array_2d: source region", "overlap"});
  // Columns 0-9 and 50-59 of the same rows share no byte: the copy lands, every element checked.
  const auto values = random_vector<std::uint32_t>(100 * 100, 127);
  poke_array(values.size(), values.data(), device.get());
  copy_array_2d(10, 10, device.get(), 100, 0, 0, device.get(), 100, 50, 0);
  const auto back = peek_list_array(values.size(), device.get());
  auto expected = values;
  for (std::size_t row = 0; row < 10; ++row) {
    for (std::size_t column = 0; column < 10; ++column) expected[row * 100 + 50 + column] = values[row * 100 + column];
  }
  BOOST_TEST(back == expected);
}

BOOST_AUTO_TEST_SUITE_END()
