// ferry::device_set: an engine per device on one executor, peer access enabled between devices whose link
// supports it (and disabled again with the set), the links as the driver describes them, and copy_peer
// routed to the destination's engine with every byte moved. With one device it is a set of one; the
// cases between two devices skip with a message.
#include "ferry/device_set.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <vector>

#include "engine/kernels/launch.hpp"
#include "ferry/marshal.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/io_helpers.hpp"
#include "tests/support/peer_access.hpp"
#include "tests/support/random_bytes.hpp"

namespace asio = boost::asio;
using namespace ferry;
using ferry::testing::outcome;
using ferry::testing::random_vector;
using ferry::testing::record;
using ferry::testing::run_until;
using ferry::testing::same_bytes;

namespace {

constexpr std::size_t count = (1 << 20) + 3;

struct set_fixture : ferry::testing::device_fixture {
  asio::io_context io;
};

// `values` on device `ordinal` of `set`, and poison on device `to`, read back with their owners current.
struct routed_copy {
  routed_copy(device_set& set, int from, int to, std::uint64_t seed)
      : from(from), to(to), values(random_vector<std::uint32_t>(count, seed)),
        source(set.allocate<std::uint32_t>(from, count)), destination(set.allocate<std::uint32_t>(to, count)),
        source_context(set.at(from).context()), destination_context(set.at(to).context()) {
    context_guard in_source(source_context);
    poke_array(count, values.data(), source.get());
    context_guard in_destination(destination_context);
    memset(destination.get(), count, 0xA5A5A5A5u);
  }
  ~routed_copy() {
    context_guard in_source(source_context);
    source = device_buffer<std::uint32_t>();
    context_guard in_destination(destination_context);
    destination = device_buffer<std::uint32_t>();
  }
  bool landed() const {
    context_guard in_destination(destination_context);
    return same_bytes(peek_list_array(count, device_ptr<const std::uint32_t>(destination.get())), values);
  }

  int from, to;
  std::vector<std::uint32_t> values;
  device_buffer<std::uint32_t> source, destination;
  context_ref source_context, destination_context;
};

void check_routed(asio::io_context& io, device_set& set, routed_copy& copy, transfer_options options) {
  outcome result;
  set.copy_peer(device_ptr<const std::uint32_t>(copy.source.get()), copy.destination.get(), count, options,
                record(result));
  BOOST_TEST(result.calls == 0);
  BOOST_TEST(run_until(io, [&] { return result.calls == 1; }));
  ferry::testing::run_for_a_while(io, std::chrono::milliseconds(20));
  BOOST_TEST(result.calls == 1);
  BOOST_TEST(!result.error, result.error.message());
  BOOST_TEST(result.bytes == count * 4);
  BOOST_TEST(copy.landed());
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(device_set_suite, set_fixture)

BOOST_AUTO_TEST_CASE(a_set_of_every_device_has_an_engine_on_each) {
  device_set set(io.get_executor());
  BOOST_TEST(set.size() == static_cast<std::size_t>(device::count()));
  for (std::size_t i = 0; i < set.size(); ++i) {
    BOOST_TEST(set.ordinals()[i] == static_cast<int>(i));
    BOOST_TEST(set.at(static_cast<int>(i)).device_ordinal() == static_cast<int>(i));
    BOOST_TEST((set.at(static_cast<int>(i)).get_executor() == io.get_executor()));
  }
}

BOOST_AUTO_TEST_CASE(a_set_of_one_copies_on_its_device_with_every_path) {
  device_set set(io.get_executor(), {0});
  BOOST_TEST(set.size() == 1u);
  std::uint64_t seed = 800;
  for (peer_path path : {peer_path::automatic, peer_path::copy_engine, peer_path::split, peer_path::kernel}) {
    BOOST_TEST_CONTEXT("peer_path " << to_string(path)) {
      routed_copy copy(set, 0, 0, ++seed);
      check_routed(io, set, copy, path);
    }
  }
  const peer_counts counts = set.at(0).peer_counts();
  BOOST_TEST(counts.copy_engine + counts.split + counts.kernel == 4u);
}

BOOST_AUTO_TEST_CASE(a_set_refuses_bad_lists_and_devices_it_does_not_hold) {
  ferry::testing::expect_error<std::invalid_argument>([&] { device_set set(io.get_executor(), std::vector<int>{}); },
                                                      {"device_set: the list of devices is empty"});
  ferry::testing::expect_error<std::invalid_argument>([&] { device_set set(io.get_executor(), {0, 0}); },
                                                      {"device_set: device 0 is listed twice"});
  ferry::testing::expect_error<std::invalid_argument>(
      [&] { device_set set(io.get_executor(), {0, 64}); },
      {"device_set: device 64 is not in [0, " + std::to_string(device::count()) + ")"});
  device_set set(io.get_executor(), {0});
  ferry::testing::expect_error<std::invalid_argument>([&] { set.at(64); },
                                                      {"device_set::at: device 64 is not in the set (devices 0)"});
  ferry::testing::expect_error<std::invalid_argument>([&] { set.link(0, 0); },
                                                      {"device_set::link: from and to are both device 0"});
  auto memory = set.allocate<std::uint32_t>(0, 16);
  int calls = 0;
  ferry::testing::expect_error<std::invalid_argument>(
      [&] {
        set.copy_peer(device_ptr<const std::uint32_t>(memory.get()), device_ptr<std::uint32_t>(CUdeviceptr{0x10}), 16,
                      [&](auto...) { ++calls; });
      },
      {"device_set::copy_peer: destination 0x10 is not device memory the driver knows"});
  ferry::testing::run_for_a_while(io);
  BOOST_TEST(calls == 0);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(device_set_of_two, set_fixture, *ferry::testing::only_with_two_devices())

BOOST_AUTO_TEST_CASE(links_say_what_the_driver_says_and_peer_access_lasts_as_long_as_the_set) {
  context first = context::primary(device::get(0)), second = context::primary(device::get(1));
  const bool peers = ferry::testing::devices_are_peers();
  {
    device_set set(io.get_executor(), {0, 1});
    for (auto [from, to] : {std::pair{0, 1}, std::pair{1, 0}}) {
      const device_link link = set.link(from, to);
      BOOST_TEST(link.access_supported == peers);
      BOOST_TEST(link.access_enabled == peers);
      BOOST_TEST(link.performance_rank >= 0);
    }
    if (peers) BOOST_TEST((ferry::testing::enable_from(first, second) == peer_access::already_enabled));
  }
  if (peers) {
    // The set turned it off again: enabling now enables.
    ferry::testing::peer_access_both_ways enabled(first, second);
  }
}

BOOST_AUTO_TEST_CASE(a_set_whose_link_query_or_peer_access_fails_throws_and_leaves_no_access_enabled,
                     *ferry::testing::only_on_sim()) {
  context first = context::primary(device::get(0)), second = context::primary(device::get(1));
  // The first link's query; the second link's enabling, after the first link was enabled.
  for (auto [entry_point, nth] : {std::pair{"cuDeviceGetP2PAttribute", 1u}, std::pair{"cuCtxEnablePeerAccess", 2u}}) {
    BOOST_TEST_CONTEXT(entry_point << " call " << nth) {
      sim::fail_call(entry_point, nth, CUDA_ERROR_INVALID_VALUE);
      ferry::testing::expect_error<cuda_error>([&] { device_set set(io.get_executor(), {0, 1}); },
                                               {entry_point, "CUDA_ERROR_INVALID_VALUE"});
      sim::reset_faults();
      ferry::testing::peer_access_both_ways enabled(first, second);  // neither way was left enabled
    }
  }
}

BOOST_AUTO_TEST_CASE(copies_between_two_devices_run_on_the_destinations_engine_with_every_path) {
  std::uint64_t seed = 820;
  {
    engine_options options;
    options.peer_split_min_bytes = 1 << 20;  // every engine of the set takes these options
    device_set set(io.get_executor(), {0, 1}, options);
    for (peer_path path : {peer_path::automatic, peer_path::copy_engine, peer_path::split, peer_path::kernel}) {
      if (path == peer_path::kernel && !ferry::testing::devices_are_peers()) continue;
      BOOST_TEST_CONTEXT("peer_path " << to_string(path)) {
        routed_copy out(set, 0, 1, ++seed), back(set, 1, 0, ++seed);
        check_routed(io, set, out, path);
        check_routed(io, set, back, path);
      }
    }
    for (int ordinal : {0, 1}) {
      const peer_counts counts = set.at(ordinal).peer_counts();
      BOOST_TEST(counts.copy_engine + counts.split + counts.kernel ==
                 (ferry::testing::devices_are_peers() ? 4u : 3u));
      BOOST_TEST(counts.split == 2u);  // automatic splits between devices
    }
    // Kernels stay loaded for a context's life: the fixture unloads device 0's; device 1's goes here.
    context_guard in_second(set.at(1).context());
    detail::unload_kernels();
  }
}

BOOST_AUTO_TEST_CASE(copies_both_ways_at_once_through_co_await_each_land) {
  device_set set(io.get_executor());
  routed_copy out(set, 0, 1, 840), back(set, 1, 0, 841);
  int finished = 0;
  for (routed_copy* copy : {&out, &back}) {
    asio::co_spawn(io, [&, copy]() -> asio::awaitable<void> {
      const std::size_t bytes = co_await set.copy_peer(device_ptr<const std::uint32_t>(copy->source.get()),
                                                       copy->destination.get(), count, asio::use_awaitable);
      BOOST_TEST(bytes == count * 4);
      ++finished;
    }, [](std::exception_ptr error) { if (error) std::rethrow_exception(error); });
  }
  BOOST_TEST(run_until(io, [&] { return finished == 2; }));
  BOOST_TEST(out.landed());
  BOOST_TEST(back.landed());
}

BOOST_AUTO_TEST_SUITE_END()
