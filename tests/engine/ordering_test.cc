// Ordering: submission order on one stream (also across staged and single-DMA ops), overlap on pool
// streams (a small op never waits behind a large one there), cross-stream dependencies through events,
// and wait_all.
#include "ferry/engine.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdint>
#include <vector>

#include "ferry/marshal.hpp"
#include "sim/control.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/engine_fixture.hpp"
#include "tests/support/io_helpers.hpp"
#include "tests/support/random_bytes.hpp"
#include "tests/support/stream_gate.hpp"

namespace asio = boost::asio;
using namespace ferry;
using ferry::testing::random_vector;
using ferry::testing::same_bytes;

namespace {

using engine_fixture = ferry::testing::engine_fixture<256 << 10, 2>;

}  // namespace

BOOST_FIXTURE_TEST_SUITE(ordering, engine_fixture)

BOOST_AUTO_TEST_CASE(ops_on_one_stream_run_in_submission_order_even_behind_a_staged_transfer) {
  const std::size_t count = (2 << 20) / 4;  // 8 staging chunks: the staged poke submits over time
  auto first = random_vector<std::uint32_t>(count, 201);
  auto second = random_vector<std::uint32_t>(count, 202);
  pinned_buffer<std::uint32_t> pinned = pinned_buffer<std::uint32_t>::allocate(count);
  std::copy(second.begin(), second.end(), pinned.data());
  auto a = gpu.allocate<std::uint32_t>(count);
  auto b = gpu.allocate<std::uint32_t>(count);
  stream s = stream::create();
  std::vector<int> order;
  // Staged poke of `first` into a, then (same stream) a -> b, then pinned `second` into a, then peek b.
  // Any reordering leaves b or a holding the wrong array.
  gpu.poke(std::span<const std::uint32_t>(first), a.get(), s, [&](auto error, std::size_t) { BOOST_TEST(!error); order.push_back(1); });
  gpu.copy(device_ptr<const std::uint32_t>(a.get()), b.get(), count, s, [&](auto error, std::size_t) { BOOST_TEST(!error); order.push_back(2); });
  gpu.poke(pinned_span(host_ptr<const std::uint32_t>(pinned.get()), count), a.get(), s, [&](auto error, std::size_t) {
    BOOST_TEST(!error);
    order.push_back(3);
  });
  std::vector<std::uint32_t> from_b(count);
  gpu.peek(device_ptr<const std::uint32_t>(b.get()), std::span<std::uint32_t>(from_b), s,
           [&](auto error, std::size_t) { BOOST_TEST(!error); order.push_back(4); });
  BOOST_TEST(ferry::testing::run_until(io, [&] { return order.size() == 4; }));
  BOOST_TEST((order == std::vector<int>{1, 2, 3, 4}));
  BOOST_TEST(same_bytes(from_b, first));
  BOOST_TEST(same_bytes(peek_list_array(count, a.get()), second));
}

BOOST_AUTO_TEST_CASE(ops_on_pool_streams_overlap, *ferry::testing::only_on_sim()) {
  // With copy engines throttled to 25 MB/s an 8 MB device copy takes at least 320 ms, long enough that
  // four copies on pool streams are all in progress at once unless something makes them wait for one
  // another (at 80 ms a copy, submitting the fourth can take longer than the first copy under TSan on a
  // loaded machine). The sim counts the copies in progress, so the check holds on a loaded, sanitized machine
  // too, where a wall-clock comparison would measure the machine rather than ferry.
  const std::size_t count = (8 << 20) / 4;
  std::vector<device_buffer<std::uint32_t>> sources, destinations;
  std::vector<std::vector<std::uint32_t>> values;
  for (int i = 0; i < 4; ++i) {
    values.push_back(random_vector<std::uint32_t>(count, 300 + i));
    sources.push_back(gpu.allocate<std::uint32_t>(count));
    destinations.push_back(gpu.allocate<std::uint32_t>(count));
    poke_list_array(std::span<const std::uint32_t>(values.back()), sources.back().get());
  }
  sim::set_copy_bandwidth(25e6);
  sim::reset_copies_in_flight_peak();
  int done = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 4; ++i) {
    gpu.copy(device_ptr<const std::uint32_t>(sources[i].get()), destinations[i].get(), count,
             [&](auto error, std::size_t) {
               BOOST_TEST(!error);
               ++done;
             });
  }
  BOOST_TEST(ferry::testing::run_until(io, [&] { return done == 4; }));
  const double took = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  sim::set_copy_bandwidth(0);
  BOOST_TEST(took >= 320.0);  // the copies were paced
  BOOST_TEST(sim::copies_in_flight_peak() == 4u, "at most " << sim::copies_in_flight_peak() << " of 4 copies ran at once");
  for (int i = 0; i < 4; ++i) BOOST_TEST(same_bytes(peek_list_array(count, destinations[i].get()), values[i]));
}

BOOST_AUTO_TEST_CASE(a_small_op_given_no_stream_does_not_wait_behind_a_large_one_in_flight,
                     *ferry::testing::only_on_sim()) {
  // At 25 MB/s the 8 MB copy runs for 320 ms; ops one at a time keep to one pool stream, but one that finds
  // that stream busy must take another and finish long before the large copy.
  const std::size_t count = (8 << 20) / 4;
  const auto large = random_vector<std::uint32_t>(count, 310);
  const auto small = random_vector<std::uint32_t>(1024, 311);
  auto source = gpu.allocate<std::uint32_t>(count);
  auto destination = gpu.allocate<std::uint32_t>(count);
  auto small_destination = gpu.allocate<std::uint32_t>(small.size());
  poke_list_array(std::span<const std::uint32_t>(large), source.get());
  pinned_buffer<std::uint32_t> pinned = pinned_buffer<std::uint32_t>::allocate(small.size());
  std::copy(small.begin(), small.end(), pinned.data());
  // One op first, alone, so that the pool stream it took is the one the large copy takes too.
  gpu.poke(pinned_span(host_ptr<const std::uint32_t>(pinned.get()), small.size()), small_destination.get(),
           asio::use_future)
      .get();
  sim::set_copy_bandwidth(25e6);
  bool large_done = false, small_done = false, small_before_large = false;
  gpu.copy(device_ptr<const std::uint32_t>(source.get()), destination.get(), count, [&](auto error, std::size_t) {
    BOOST_TEST(!error);
    large_done = true;
  });
  gpu.poke(pinned_span(host_ptr<const std::uint32_t>(pinned.get()), small.size()), small_destination.get(),
           [&](auto error, std::size_t) {
             BOOST_TEST(!error);
             small_done = true;
             small_before_large = !large_done;
           });
  BOOST_TEST(ferry::testing::run_until(io, [&] { return small_done && large_done; }));
  sim::set_copy_bandwidth(0);
  BOOST_TEST(small_before_large);
  BOOST_TEST(same_bytes(peek_list_array(count, destination.get()), large));
  BOOST_TEST(same_bytes(peek_list_array(small.size(), small_destination.get()), small));
}

BOOST_AUTO_TEST_CASE(order_makes_one_stream_wait_for_another_without_a_host_wait) {
  const std::size_t count = 1 << 18;
  auto values = random_vector<std::uint32_t>(count, 203);
  auto a = gpu.allocate<std::uint32_t>(count);
  auto b = gpu.allocate<std::uint32_t>(count);
  stream first = stream::create();
  stream then = stream::create();
  ferry::testing::stream_gate gate(first);
  bool poked = false, copied = false;
  gpu.poke(std::span<const std::uint32_t>(values), a.get(), first, [&](auto error, std::size_t) { BOOST_TEST(!error); poked = true; });
  gpu.order(first, then);  // returns at once although `first` is held back
  gpu.copy(device_ptr<const std::uint32_t>(a.get()), b.get(), count, then, [&](auto error, std::size_t) { BOOST_TEST(!error); copied = true; });
  ferry::testing::run_for_a_while(io);
  BOOST_TEST(!copied);  // `then` waits for `first`, which waits for the gate
  gate.open();
  BOOST_TEST(ferry::testing::run_until(io, [&] { return poked && copied; }));
  BOOST_TEST(same_bytes(peek_list_array(count, b.get()), values));
}

BOOST_AUTO_TEST_CASE(wait_all_completes_after_everything_submitted_before_it) {
  const std::size_t count = 1 << 16;
  stream held = stream::create();
  ferry::testing::stream_gate gate(held);
  auto a = gpu.allocate<std::uint32_t>(count);
  bool filled = false, waited = false;
  gpu.memset(a.get(), count, std::uint32_t{42}, held, [&](auto error) { BOOST_TEST(!error); filled = true; });
  gpu.wait_all([&](auto error) {
    BOOST_TEST(!error);
    BOOST_TEST(filled);
    waited = true;
  });
  ferry::testing::run_for_a_while(io);
  BOOST_TEST(!waited);
  gate.open();
  BOOST_TEST(ferry::testing::run_until(io, [&] { return waited; }));
  bool empty_wait = false;
  gpu.wait_all([&](auto error) { BOOST_TEST(!error); empty_wait = true; });
  BOOST_TEST(!empty_wait);  // even with nothing pending, never inside the initiating call
  BOOST_TEST(ferry::testing::run_until(io, [&] { return empty_wait; }));
}

BOOST_AUTO_TEST_SUITE_END()
