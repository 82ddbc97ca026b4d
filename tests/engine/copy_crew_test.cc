// The copy crew that fills and drains staging chunks: every byte arrives whatever the size (remainders
// that do not split evenly included), with several callers at once, with and without spinning between
// jobs, and after stop() (the caller then copies alone).
#include "engine/async/copy_crew.hpp"

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "tests/support/random_bytes.hpp"

using ferry::detail::copy_crew;
using ferry::testing::random_vector;

namespace {

// Copies `bytes` random bytes through the crew into a poisoned buffer; returns whether all arrived and
// the bytes around the destination were left alone.
bool copies_exactly(copy_crew& crew, std::size_t bytes, std::uint64_t seed) {
  const auto source = random_vector<std::uint8_t>(bytes, seed);
  std::vector<std::uint8_t> destination(bytes + 128, 0xA5);
  crew.copy(reinterpret_cast<std::byte*>(destination.data() + 64), reinterpret_cast<const std::byte*>(source.data()),
            bytes);
  for (std::size_t i = 0; i < 64; ++i) {
    if (destination[i] != 0xA5 || destination[64 + bytes + i] != 0xA5) return false;
  }
  return std::memcmp(destination.data() + 64, source.data(), bytes) == 0;
}

const std::size_t sizes[] = {1, 4096, copy_crew::min_slice - 1, 2 * copy_crew::min_slice + 1,
                             3 * copy_crew::min_slice * 64 + 2, (std::size_t{4} << 20) + 7};

}  // namespace

BOOST_AUTO_TEST_SUITE(copy_crew_suite)

BOOST_AUTO_TEST_CASE(every_byte_arrives_for_sizes_that_do_not_split_evenly) {
  for (auto spin : {std::chrono::microseconds(0), std::chrono::microseconds(300)}) {
    for (std::size_t threads : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{7}}) {
      copy_crew crew(threads, spin);
      for (std::size_t bytes : sizes) {
        BOOST_TEST(copies_exactly(crew, bytes, bytes + threads),
                   threads << " threads, spin " << spin.count() << " us, " << bytes << " bytes");
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(several_callers_at_once_each_get_their_own_bytes) {
  copy_crew crew(3, std::chrono::microseconds(200));
  std::vector<std::thread> callers;
  std::vector<int> failures(4, 0);
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&, c] {
      for (int round = 0; round < 20; ++round) {
        const std::size_t bytes = (std::size_t{1} << 20) + static_cast<std::size_t>(c * 4099 + round * 61);
        if (!copies_exactly(crew, bytes, static_cast<std::uint64_t>(c * 1000 + round))) ++failures[c];
      }
    });
  }
  for (std::thread& caller : callers) caller.join();
  for (int c = 0; c < 4; ++c) BOOST_TEST(failures[c] == 0, "caller " << c);
}

BOOST_AUTO_TEST_CASE(after_stop_the_caller_copies_alone) {
  copy_crew crew(4, std::chrono::microseconds(100));
  crew.stop();
  BOOST_TEST(copies_exactly(crew, (std::size_t{2} << 20) + 3, 99));
}

BOOST_AUTO_TEST_SUITE_END()
