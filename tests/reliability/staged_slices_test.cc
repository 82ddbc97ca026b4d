// Regression (found by tests/stress:stress_test and by the pipeline load generator):
// a staging chunk is filled and drained by several copy threads, each taking a slice. The slice size was rounded down before being rounded up to
// 64 bytes, so when bytes / threads was already a multiple of 64 and did not divide evenly, the last
// bytes of the chunk were never copied: a staged poke left stale bytes on the device, a staged peek
// left the caller's last bytes unwritten. Sizes here hit exactly that case for 2, 3 and 8 threads.
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <vector>

#include "ferry/engine.hpp"
#include "ferry/marshal.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/random_bytes.hpp"

namespace asio = boost::asio;
using namespace ferry;
using ferry::testing::random_vector;
using ferry::testing::same_bytes;

namespace {

struct slicing_case {
  std::size_t copy_threads;
  std::size_t bytes;  // the last (or only) chunk: threads * 64 * 4096 + (1 .. threads - 1) bytes
};

// c.bytes alone, or after a full chunk.
void staged_round_trip_keeps_every_byte(const slicing_case& c, bool after_a_full_chunk) {
  const std::size_t chunk_bytes = std::size_t{4} << 20;
  asio::io_context io;
  engine_options options;
  options.copy_threads = c.copy_threads;
  options.staging_chunk_bytes = chunk_bytes;
  options.staging_chunks = 2;
  engine gpu{io.get_executor(), options};
  const std::size_t total = c.bytes + (after_a_full_chunk ? chunk_bytes : 0);
  const std::vector<std::uint8_t> values = random_vector<std::uint8_t>(total, 7700 + c.copy_threads);
  auto device = gpu.allocate<std::uint8_t>(total);
  const transfer_options staged{transfer_plan::staged};
  BOOST_TEST(gpu.poke(std::span<const std::uint8_t>(values), device.get(), staged, asio::use_future).get() == total);
  BOOST_TEST(same_bytes(peek_list_array(total, device.get()), values),
             c.copy_threads << " threads, " << total << " bytes: the poke left device bytes stale");
  std::vector<std::uint8_t> back(total, 0xA5);
  BOOST_TEST(gpu.peek(device_ptr<const std::uint8_t>(device.get()), std::span<std::uint8_t>(back), staged,
                      asio::use_future)
                 .get() == total);
  BOOST_TEST(same_bytes(back, values), c.copy_threads << " threads, " << total << " bytes: the peek left bytes unwritten");
}

const slicing_case cases[] = {{2, 2 * 64 * 4096 + 1}, {3, 3 * 64 * 4096 + 2}, {8, 8 * 64 * 4096 + 7}};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(staged_slices, ferry::testing::device_fixture)

BOOST_AUTO_TEST_CASE(a_chunk_that_the_copy_threads_cannot_split_evenly_is_copied_whole) {
  for (const slicing_case& c : cases) staged_round_trip_keeps_every_byte(c, false);
}

BOOST_AUTO_TEST_CASE(the_last_chunk_of_a_longer_transfer_is_copied_whole) {
  for (const slicing_case& c : cases) staged_round_trip_keeps_every_byte(c, true);
}

BOOST_AUTO_TEST_SUITE_END()
