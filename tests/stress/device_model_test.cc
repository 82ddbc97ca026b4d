// The host model the stress workloads check the device against: unknown ranges and copies of them.
#include "tests/stress/device_model.hpp"

#include <boost/test/unit_test.hpp>

#include <cstddef>
#include <vector>

using namespace ferry::stress;

namespace {

std::vector<std::byte> counting(std::size_t n) {
  std::vector<std::byte> bytes(n);
  for (std::size_t i = 0; i < n; ++i) bytes[i] = std::byte(i * 7 + 1);
  return bytes;
}

using ranges = std::vector<std::pair<std::size_t, std::size_t>>;

}  // namespace

BOOST_AUTO_TEST_SUITE(device_model_checks)

BOOST_AUTO_TEST_CASE(range_set_merges_touching_ranges_and_erases_from_the_middle) {
  range_set set;
  set.add(10, 20);
  set.add(20, 30);
  set.add(40, 50);
  BOOST_TEST((set.within(0, 100) == ranges{{10, 30}, {40, 50}}));
  set.erase(15, 45);
  BOOST_TEST((set.within(0, 100) == ranges{{10, 15}, {45, 50}}));
  BOOST_TEST((set.within(12, 47) == ranges{{12, 15}, {45, 47}}));
  set.erase(0, 100);
  BOOST_TEST(set.empty());
}

BOOST_AUTO_TEST_CASE(a_forgotten_range_is_skipped_and_travels_with_a_copy_until_overwritten) {
  device_model model(counting(64));
  model.forget(8, 4);
  model.copy(0, 32, 16);  // bytes 8..12 land unknown at 40..44
  expectation seen = model.expect(32, 16);
  BOOST_TEST((seen.unknown == ranges{{8, 12}}));
  std::vector<std::byte> actual = seen.bytes;
  actual[9] = std::byte{0};  // an unknown byte may hold anything
  BOOST_TEST(compare(seen, actual).verified == 12u);
  BOOST_TEST(!compare(seen, actual).first_mismatch);
  actual[3] = std::byte{0};  // a known one may not
  BOOST_TEST(compare(seen, actual).first_mismatch.value_or(99) == 3u);
  const std::vector<std::byte> fresh(4, std::byte{0x5C});
  model.write(40, fresh);
  BOOST_TEST(model.expect(32, 16).unknown.empty());
}

BOOST_AUTO_TEST_CASE(a_fill_writes_its_pattern_over_every_element) {
  device_model model(counting(32));
  const std::vector<std::byte> pattern{std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}};
  model.fill(4, 3, pattern);
  expectation seen = model.expect(0, 20);
  BOOST_TEST(int(seen.bytes[3]) == 3 * 7 + 1);
  for (std::size_t i = 4; i < 16; ++i) BOOST_TEST(int(seen.bytes[i]) == int(pattern[i % 4]));
  BOOST_TEST(int(seen.bytes[16]) == 16 * 7 + 1);
}

BOOST_AUTO_TEST_SUITE_END()
