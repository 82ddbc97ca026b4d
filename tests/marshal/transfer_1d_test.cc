// peek / poke / copy in one dimension, synchronous and stream-ordered, and the list forms.
#include "ferry/marshal.hpp"

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <vector>

#include "ferry/context.hpp"
#include "ferry/stream.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/random_bytes.hpp"

using namespace ferry;
using ferry::testing::expect_error;
using ferry::testing::random_vector;

namespace {

constexpr std::size_t count = (1u << 18) + 13;  // odd on purpose: no power-of-two luck

template <class T>
void check_equal(const std::vector<T>& expected, const T* actual, std::size_t n) {
  auto difference = ferry::testing::first_difference(std::as_bytes(std::span(expected.data(), n)),
                                                     std::as_bytes(std::span(actual, n)));
  BOOST_CHECK_MESSAGE(!difference, "first differing byte at offset " << difference.value_or(0));
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(transfer_1d, ferry::testing::device_fixture)

BOOST_AUTO_TEST_CASE(poke_then_peek_round_trips_every_byte) {
  auto values = random_vector<std::uint32_t>(count, 1);
  device_buffer<std::uint32_t> device = device_buffer<std::uint32_t>::allocate(count);
  poke_array(count, values.data(), device.get());
  std::vector<std::uint32_t> back(count);
  ferry::testing::poison_fill(std::span(back));
  peek_array(count, device.get(), back.data());
  check_equal(values, back.data(), count);
}

BOOST_AUTO_TEST_CASE(async_poke_and_peek_on_a_stream_round_trip_through_pinned_memory) {
  auto values = random_vector<double>(count, 2);
  pinned_buffer<double> source = malloc_host_foreign_ptr<double>(alloc_flags::none, count);
  pinned_buffer<double> destination = malloc_host_foreign_ptr<double>(alloc_flags::portable, count);
  std::copy(values.begin(), values.end(), source.data());
  ferry::testing::poison_fill(destination.span());
  device_buffer<double> device = device_buffer<double>::allocate(count);
  stream s = stream::create();
  poke_array_async(count, host_ptr<const double>(source.get()), device.get(), s);
  peek_array_async(count, device_ptr<const double>(device.get()), destination.get(), s);
  s.synchronize();
  check_equal(values, destination.data(), count);
}

BOOST_AUTO_TEST_CASE(async_transfers_accept_the_legacy_default_stream_by_name) {
  auto values = random_vector<std::uint8_t>(4096 + 7, 3);
  pinned_buffer<std::uint8_t> pinned = malloc_host_foreign_ptr<std::uint8_t>(alloc_flags::none, values.size());
  std::copy(values.begin(), values.end(), pinned.data());
  device_buffer<std::uint8_t> device = device_buffer<std::uint8_t>::allocate(values.size());
  poke_array_async(values.size(), host_ptr<const std::uint8_t>(pinned.get()), device.get(), stream_ref::legacy_default());
  stream_ref::legacy_default().synchronize();
  check_equal(values, peek_list_array(values.size(), device.get()).data(), values.size());
}

BOOST_AUTO_TEST_CASE(copy_array_copies_between_device_arrays) {
  auto values = random_vector<std::int16_t>(count, 4);
  device_buffer<std::int16_t> a = device_buffer<std::int16_t>::allocate(count);
  device_buffer<std::int16_t> b = device_buffer<std::int16_t>::allocate(count);
  poke_array(count, values.data(), a.get());
  copy_array(count, a.get(), b.get());
  check_equal(values, peek_list_array(count, b.get()).data(), count);
}

BOOST_AUTO_TEST_CASE(copy_array_async_copies_on_a_stream_and_interior_pointers_work) {
  auto values = random_vector<std::uint64_t>(count, 5);
  device_buffer<std::uint64_t> a = device_buffer<std::uint64_t>::allocate(count);
  device_buffer<std::uint64_t> b = device_buffer<std::uint64_t>::allocate(count);
  poke_array(count, values.data(), a.get());
  auto poison = std::vector<std::uint64_t>(count, 0xA5A5A5A5A5A5A5A5ull);
  poke_array(count, poison.data(), b.get());
  stream s = stream::create();
  copy_array_async(count - 100, a.get() + 50, b.get() + 60, s);
  s.synchronize();
  auto back = peek_list_array(count, b.get());
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint64_t expected = (i >= 60 && i < 60 + count - 100) ? values[i - 10] : poison[i];
    if (back[i] != expected) {
      BOOST_ERROR("element " << i << " differs");
      break;
    }
  }
}

BOOST_AUTO_TEST_CASE(list_forms_write_and_read_whole_lists) {
  auto values = random_vector<float>(1000, 6);
  device_ptr<float> fresh = new_list_array(std::span<const float>(values));
  check_equal(values, peek_list_array(values.size(), fresh).data(), values.size());
  free(fresh);

  auto [array, length] = new_list_array_len(std::span<const float>(values));
  BOOST_TEST(length == values.size());
  auto other = random_vector<float>(1000, 7);
  poke_list_array(std::span<const float>(other), array);
  check_equal(other, peek_list_array(length, array).data(), length);
  free(array);
}

BOOST_AUTO_TEST_CASE(with_list_array_frees_the_array_when_the_action_returns_or_throws) {
  auto values = random_vector<std::int32_t>(777, 8);
  std::vector<std::int32_t> seen = with_list_array(std::span<const std::int32_t>(values), [&](device_ptr<std::int32_t> p) {
    return peek_list_array(values.size(), p);
  });
  check_equal(values, seen.data(), values.size());
  std::size_t length_seen = with_list_array_len(std::span<const std::int32_t>(values),
                                                [](std::size_t n, device_ptr<std::int32_t>) { return n; });
  BOOST_TEST(length_seen == values.size());
  BOOST_CHECK_THROW(with_list_array(std::span<const std::int32_t>(values),
                                    [](device_ptr<std::int32_t>) -> int { throw std::runtime_error("action failed"); }),
                    std::runtime_error);
}

BOOST_AUTO_TEST_CASE(copies_past_the_end_of_an_allocation_are_rejected_before_enqueue) {
  device_buffer<std::uint32_t> device = device_buffer<std::uint32_t>::allocate(100);
  std::vector<std::uint32_t> host(200);
  expect_error<std::invalid_argument>([&] { poke_array(101, host.data(), device.get()); },
                                      {"poke_array: destination range", "404 bytes", "runs 4 bytes past the end",
                                       "of 400 bytes"});
  expect_error<std::invalid_argument>([&] { peek_array(100, device.get() + 1, host.data()); },
                                      {"peek_array: source range", "runs 4 bytes past the end"});
  device_buffer<std::uint32_t> other = device_buffer<std::uint32_t>::allocate(50);
  expect_error<std::invalid_argument>([&] { copy_array(60, device.get(), other.get()); },
                                      {"copy_array: destination range", "runs 40 bytes past the end"});
}

BOOST_AUTO_TEST_CASE(null_pointers_are_rejected_with_the_argument_named) {
  device_buffer<std::uint32_t> device = device_buffer<std::uint32_t>::allocate(10);
  std::vector<std::uint32_t> host(10);
  expect_error<std::invalid_argument>([&] { poke_array<std::uint32_t>(10, nullptr, device.get()); },
                                      {"poke_array: source is a null pointer"});
  expect_error<std::invalid_argument>([&] { peek_array(10, device_ptr<std::uint32_t>(), host.data()); },
                                      {"peek_array: source is a null pointer"});
  expect_error<std::invalid_argument>([&] { copy_array(10, device.get(), device_ptr<std::uint32_t>()); },
                                      {"copy_array: destination is a null pointer"});
}

BOOST_AUTO_TEST_CASE(element_counts_whose_byte_size_overflows_are_rejected) {
  device_buffer<std::uint64_t> device = device_buffer<std::uint64_t>::allocate(10);
  std::vector<std::uint64_t> host(10);
  const std::size_t huge = SIZE_MAX / 4;
  expect_error<std::invalid_argument>([&] { poke_array(huge, host.data(), device.get()); },
                                      {"poke_array: count of " + std::to_string(huge) + " elements of 8 bytes overflows"});
  expect_error<std::invalid_argument>([&] { (void)malloc_array<std::uint64_t>(huge); },
                                      {"malloc_array: count of", "overflows size_t"});
}

// The list form makes its vector only after the device range is checked: a count past the allocation
// is an invalid_argument, never a host allocation (2^40 elements of 8 bytes would be 8 TiB).
BOOST_AUTO_TEST_CASE(a_list_peek_checks_its_count_before_it_allocates_the_list) {
  device_buffer<std::uint64_t> device = device_buffer<std::uint64_t>::allocate(16);
  const std::size_t overflowing = SIZE_MAX / 4;
  expect_error<std::invalid_argument>([&] { (void)peek_list_array(overflowing, device.get()); },
                                      {"peek_list_array: count of " + std::to_string(overflowing) +
                                       " elements of 8 bytes overflows"});
  const std::size_t terabytes = std::size_t{1} << 40;
  expect_error<std::invalid_argument>([&] { (void)peek_list_array(terabytes, device.get()); },
                                      {"peek_list_array: source range", "bytes past the end of its allocation",
                                       "of 128 bytes"});
  expect_error<std::invalid_argument>([&] { (void)peek_list_array(17, device.get()); },
                                      {"peek_list_array: source range", "runs 8 bytes past the end"});
}

BOOST_AUTO_TEST_CASE(overlapping_copy_array_ranges_are_rejected) {
  device_buffer<std::uint32_t> device = device_buffer<std::uint32_t>::allocate(100);
  expect_error<std::invalid_argument>([&] { copy_array(50, device.get(), device.get() + 49); },
                                      {"copy_array: source", "overlap (200 bytes each)"});
  stream s = stream::create();
  expect_error<std::invalid_argument>([&] { copy_array_async(50, device.get() + 10, device.get(), s); },
                                      {"copy_array_async: source", "overlap"});
  // Adjacent is fine: the second half becomes a copy of the first, every element checked.
  const auto values = random_vector<std::uint32_t>(100, 157);
  poke_array(100, values.data(), device.get());
  copy_array(50, device.get(), device.get() + 50);
  const auto back = peek_list_array(100, device.get());
  BOOST_TEST(std::vector<std::uint32_t>(back.begin() + 50, back.end()) ==
             std::vector<std::uint32_t>(values.begin(), values.begin() + 50));
  BOOST_TEST(std::vector<std::uint32_t>(back.begin(), back.begin() + 50) ==
             std::vector<std::uint32_t>(values.begin(), values.begin() + 50));
}

BOOST_AUTO_TEST_CASE(async_transfers_refuse_host_memory_that_is_not_page_locked) {
  device_buffer<std::uint32_t> device = device_buffer<std::uint32_t>::allocate(10);
  std::vector<std::uint32_t> pageable(10);
  stream s = stream::create();
  expect_error<std::invalid_argument>(
      [&] { poke_array_async(10, host_ptr<const std::uint32_t>(pageable.data()), device.get(), s); },
      {"poke_array_async: source", "is not page-locked host memory the driver knows"});
}

BOOST_AUTO_TEST_CASE(freed_device_memory_is_unknown_to_later_copies) {
  device_ptr<std::uint32_t> p = malloc_array<std::uint32_t>(10);
  free(p);
  std::vector<std::uint32_t> host(10);
  expect_error<std::invalid_argument>([&] { poke_array(10, host.data(), p); },
                                      {"poke_array: destination", "is not device memory the driver knows"});
}

BOOST_AUTO_TEST_CASE(memory_freed_after_copies_used_it_is_unknown_to_later_copies) {
  // ferry remembers the ranges it allocated, so that checks need not ask the driver; a range it freed
  // is forgotten, also by a thread that found it for an earlier copy.
  const auto values = random_vector<std::uint32_t>(10, 158);
  device_ptr<std::uint32_t> device = malloc_array<std::uint32_t>(10);
  host_ptr<std::uint32_t> pinned = malloc_host_array<std::uint32_t>(alloc_flags::none, 10);
  poke_array(10, values.data(), device);
  stream s = stream::create();
  peek_array_async(10, device_ptr<const std::uint32_t>(device), pinned, s);
  s.synchronize();
  BOOST_TEST(std::vector<std::uint32_t>(pinned.get(), pinned.get() + 10) == values);
  free(device);
  expect_error<std::invalid_argument>([&] { poke_array(10, values.data(), device); },
                                      {"poke_array: destination", "is not device memory the driver knows"});
  device_ptr<std::uint32_t> other = malloc_array<std::uint32_t>(10);
  free_host(pinned);
  expect_error<std::invalid_argument>(
      [&] { poke_array_async(10, host_ptr<const std::uint32_t>(pinned), other, s); },
      {"poke_array_async: source", "is not page-locked host memory the driver knows"});
  free(other);
}

BOOST_AUTO_TEST_CASE(memory_of_a_destroyed_context_is_unknown_to_later_copies) {
  // Destroying a context frees its memory without a free of each allocation: ferry forgets those ranges.
  const auto values = random_vector<std::uint32_t>(16, 159);
  device_ptr<std::uint32_t> device;
  {
    context own = context::create(ferry::device::get(0));
    context_guard current(own);
    device = malloc_array<std::uint32_t>(16);
    poke_array(16, values.data(), device);
    BOOST_TEST(peek_list_array(16, device_ptr<const std::uint32_t>(device)) == values);
  }
  expect_error<std::invalid_argument>([&] { poke_array(16, values.data(), device); },
                                      {"poke_array: destination", "is not device memory the driver knows"});
}

BOOST_AUTO_TEST_SUITE_END()
