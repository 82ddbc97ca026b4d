// Regression test of issue 6 (found by the pipeline load generator): a staged transfer whose chunk is
// split among the copy threads lost its last bytes when bytes / slices was already a multiple of 64
// (607745 bytes in two slices of 303872 copied 607744). Every size here is such a case for its number of
// copy threads; each must round-trip every byte through the staging pool, both directions.
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/test/unit_test.hpp>

#include <vector>

#include "ferry/engine.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/random_bytes.hpp"

using namespace ferry;
using namespace ferry::testing;

BOOST_FIXTURE_TEST_SUITE(staged_remainder, device_fixture)

BOOST_AUTO_TEST_CASE(staged_chunks_split_among_copy_threads_keep_their_remainder_bytes) {
  for (std::size_t threads : {2, 3, 8}) {
    boost::asio::io_context io;
    engine_options options;
    options.copy_threads = threads;
    engine gpu{io.get_executor(), options};
    // threads slices of 256 KiB + 64 bytes each, plus a remainder of 1 to threads - 1 bytes.
    const std::size_t slice = (256 << 10) + 64;
    for (std::size_t remainder : {std::size_t{1}, threads - 1}) {
      const std::size_t bytes = threads * slice + remainder;
      BOOST_TEST_CONTEXT(threads << " copy threads, " << bytes << " bytes") {
        const auto source = random_vector<std::uint8_t>(bytes, threads * 100 + remainder);
        std::vector<std::uint8_t> back(bytes, static_cast<std::uint8_t>(poison));
        auto device = gpu.allocate<std::uint8_t>(bytes);
        const transfer_options staged{.plan = transfer_plan::staged};
        auto poked = gpu.poke(std::span<const std::uint8_t>(source), device.get(), staged, boost::asio::use_future);
        io.restart();
        io.run();
        BOOST_CHECK_EQUAL(poked.get(), bytes);
        auto peeked = gpu.peek(device_ptr<const std::uint8_t>(device.get()), std::span<std::uint8_t>(back), staged,
                               boost::asio::use_future);
        io.restart();
        io.run();
        BOOST_CHECK_EQUAL(peeked.get(), bytes);
        BOOST_CHECK_MESSAGE(same_bytes(source, back), "bytes lost between the staging chunks");
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
