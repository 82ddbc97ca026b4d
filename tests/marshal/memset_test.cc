// memset of 1-, 2- and 4-byte elements: the range is set, the bytes around it are untouched.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include "ferry/marshal.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/random_bytes.hpp"

using namespace ferry;
using ferry::testing::expect_error;
using ferry::testing::random_vector;

namespace {

// Fills elements [first, first + n) of an array of `total` random elements and checks every byte.
template <class T>
void check_memset(std::size_t total, std::size_t first, std::size_t n, T value, bool asynchronous) {
  auto initial = random_vector<T>(total, 31 + sizeof(T));
  device_buffer<T> device = device_buffer<T>::allocate(total);
  poke_array(total, initial.data(), device.get());
  if (asynchronous) {
    stream s = stream::create();
    memset_async(device.get() + static_cast<std::ptrdiff_t>(first), n, value, s);
    s.synchronize();
  } else {
    memset(device.get() + static_cast<std::ptrdiff_t>(first), n, value);
  }
  auto expected = initial;
  for (std::size_t i = first; i < first + n; ++i) std::memcpy(&expected[i], &value, sizeof(T));
  auto back = peek_list_array(total, device.get());
  auto difference = ferry::testing::first_difference(std::as_bytes(std::span(expected)), std::as_bytes(std::span(back)));
  BOOST_CHECK_MESSAGE(!difference, sizeof(T) << "-byte memset: first differing byte at " << difference.value_or(0));
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(memset_suite, ferry::testing::device_fixture)

BOOST_AUTO_TEST_CASE(memset_of_bytes_sets_the_range_and_leaves_its_neighbours) {
  check_memset<std::uint8_t>(100003, 17, 99000, 0x5c, false);
  check_memset<std::uint8_t>(100003, 1, 3, 0xe1, true);
}

BOOST_AUTO_TEST_CASE(memset_of_16_bit_values_sets_the_range_and_leaves_its_neighbours) {
  check_memset<std::uint16_t>(50001, 9, 40000, 0xbeef, false);
  check_memset<std::int16_t>(50001, 3, 7, -1234, true);
}

BOOST_AUTO_TEST_CASE(memset_of_32_bit_values_sets_the_range_and_leaves_its_neighbours) {
  check_memset<std::uint32_t>(70001, 5, 60000, 0xdeadbeefu, false);
  check_memset<float>(70001, 1, 70000, 3.25f, true);
}

BOOST_AUTO_TEST_CASE(memset_of_64_bit_values_sets_the_range_and_leaves_its_neighbours) {
  check_memset<std::uint64_t>(70001, 3, 69990, 0x0123456789abcdefull, false);
  check_memset<double>(70001, 1, 5, -2.75e-300, true);
}

struct sixteen_bytes {
  std::uint64_t low, high;
};

BOOST_AUTO_TEST_CASE(memset_of_128_bit_values_sets_the_range_and_leaves_its_neighbours) {
  check_memset<sixteen_bytes>(30001, 7, 29000, sixteen_bytes{0x1122334455667788ull, 0x99aabbccddeeff00ull}, false);
  check_memset<sixteen_bytes>(30001, 1, 3, sixteen_bytes{0xfedcba9876543210ull, 0x0f1e2d3c4b5a6978ull}, true);
}

BOOST_AUTO_TEST_CASE(memset_of_an_element_size_it_cannot_do_is_rejected) {
  struct thirty_two { std::uint64_t words[4]; };
  device_buffer<thirty_two> wide = device_buffer<thirty_two>::allocate(10);
  expect_error<std::invalid_argument>(
      [&] { memset(wide.get(), 10, thirty_two{{1, 2, 3, 4}}); },
      {"memset: element size 32 bytes is not supported (memset sets elements of 1, 2, 4, 8 or 16 bytes)"});
  struct three { std::uint8_t b[3]; };
  device_buffer<three> odd = device_buffer<three>::allocate(10);
  stream s = stream::create();
  expect_error<std::invalid_argument>([&] { memset_async(odd.get(), 10, three{{1, 2, 3}}, s); },
                                      {"memset_async: element size 3 bytes is not supported"});
}

BOOST_AUTO_TEST_CASE(memset_past_the_end_or_misaligned_is_rejected) {
  device_buffer<std::uint32_t> device = device_buffer<std::uint32_t>::allocate(10);
  expect_error<std::invalid_argument>([&] { memset(device.get() + 5, 6, 7u); },
                                      {"memset: destination range", "runs 4 bytes past the end"});
  auto misaligned = device_ptr<std::uint32_t>(device.get().get() + 2);
  expect_error<std::invalid_argument>([&] { memset(misaligned, 2, 7u); },
                                      {"memset: destination", "is not aligned to its element size of 4 bytes"});
}

BOOST_AUTO_TEST_SUITE_END()
