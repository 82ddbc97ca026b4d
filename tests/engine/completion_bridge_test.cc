// The completion bridge's poll policy and its completion flags (engine/async/completion_flags.hpp): work
// is learned done from the word the GPU writes after it, with the event queried only on sweeps; a peek's
// bytes are in host memory when its word is; a driver that refuses the word's write, a failed stream
// that never writes it, and more work than there are words all still complete through the events; work
// expected wakes a parked bridge early.
#include "engine/async/completion_bridge.hpp"

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "engine/driver/driver_table.hpp"
#include "ferry/engine.hpp"
#include "ferry/marshal.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/random_bytes.hpp"
#include "tests/support/stream_gate.hpp"

using namespace ferry;
using detail::completion_bridge;
using ferry::testing::on_sim;
using ferry::testing::random_vector;

namespace {

// Keeps the bridge spinning (querying) however long the work runs: what a test of the query count needs.
engine_options spinning_poll() {
  engine_options options;
  options.policy = completion_policy::poll;
  options.pending_spin = std::chrono::seconds(60);
  return options;
}

// Spins until `condition()` holds or 10 s pass; returns whether it held.
template <class Condition>
bool wait_until(Condition condition) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

// Spins until `flag` is set or 10 s pass; returns whether it was set.
bool wait_for(const std::atomic<bool>& flag) {
  return wait_until([&] { return flag.load(std::memory_order_acquire); });
}

// Copies `values` to `device` on `s`, has `bridge` watch the copy, and waits for its answer: the status
// the continuation got (on the bridge thread; read here once it has run), CUDA_ERROR_UNKNOWN if none came.
CUresult copy_and_wait_for_bridge(completion_bridge& bridge, CUdeviceptr device,
                                  const std::vector<std::uint8_t>& values, CUstream s) {
  std::atomic<bool> done{false};
  CUresult seen = CUDA_ERROR_UNKNOWN;
  if (detail::driver().cuMemcpyHtoDAsync(device, values.data(), values.size(), s) != CUDA_SUCCESS) return seen;
  const CUresult watched = bridge.watch(s, [&](CUresult status) {
    seen = status;
    done.store(true, std::memory_order_release);
  });
  if (watched != CUDA_SUCCESS || !wait_for(done)) return watched != CUDA_SUCCESS ? watched : CUDA_ERROR_UNKNOWN;
  return seen;
}

std::size_t calls_of(const char* entry) { return on_sim() ? sim::call_counts().at(entry) : 0; }

}  // namespace

BOOST_FIXTURE_TEST_SUITE(completion_bridge_flags, ferry::testing::device_fixture)

BOOST_AUTO_TEST_CASE(a_peeks_bytes_are_in_host_memory_when_the_bridge_learns_it_is_done) {
  const std::size_t count = 1 << 16;
  const auto values = random_vector<std::uint32_t>(count, 901);
  auto device = device_buffer<std::uint32_t>::allocate(count);
  poke_array(count, values.data(), device.get());
  auto host = pinned_buffer<std::uint32_t>::allocate(count);
  std::memset(host.data(), 0xA5, count * sizeof(std::uint32_t));
  stream s = stream::create();
  completion_bridge bridge{detail::driver(), primary.get(), spinning_poll()};
  std::atomic<bool> done{false};
  CUresult seen = CUDA_ERROR_UNKNOWN;
  bool bytes_there = false;
  {
    ferry::testing::stream_gate gate(s);
    BOOST_TEST(detail::driver().cuMemcpyDtoHAsync(host.data(), device.get().get(), count * sizeof(std::uint32_t), s.get()) ==
               CUDA_SUCCESS);
    const std::size_t queries_before = calls_of("cuStreamQuery");
    BOOST_TEST(bridge.watch(s.get(), [&](CUresult status) {
      seen = status;
      // On the bridge thread, the moment it learns: every byte must be there already.
      bytes_there = std::memcmp(host.data(), values.data(), count * sizeof(std::uint32_t)) == 0;
      done.store(true, std::memory_order_release);
    }) == CUDA_SUCCESS);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    BOOST_TEST(!done.load());
    if (on_sim()) {
      // 50 ms of spinning on held-back work: a sweep of its stream every 100 us is ~500 queries; spinning
      // on a driver query would be many thousands.
      const std::size_t queries = calls_of("cuStreamQuery") - queries_before;
      BOOST_TEST_MESSAGE(queries << " cuStreamQuery calls in 50 ms of spinning");
      BOOST_TEST(queries < 1500u);
      BOOST_TEST(queries > 0u);  // the sweeps still ask, for failures
    }
    gate.open();
    BOOST_TEST(wait_for(done));
  }
  BOOST_TEST(seen == CUDA_SUCCESS);
  BOOST_TEST(bytes_there);
  bridge.drain();
}

// A parked bridge takes tens of microseconds to run again on a virtual machine: a fast-path submission
// wakes it as soon as its work is on the stream (expect_work), so that the wake-up overlaps the rest of
// the call and the GPU's work. Woken so, it parks again when nothing comes, and still watches what comes
// later.
BOOST_AUTO_TEST_CASE(expected_work_wakes_a_parked_bridge_which_parks_again_when_none_comes) {
  engine_options options;
  options.policy = completion_policy::poll;
  options.spin_window = std::chrono::milliseconds(1);
  completion_bridge bridge{detail::driver(), primary.get(), options};
  BOOST_TEST(wait_until([&] { return bridge.parked(); }));
  const std::uint64_t woken_before = bridge.wake_ups();
  bridge.expect_work();
  // Idle, a parked bridge wakes for nothing else (no timed sleep, no hand-over).
  BOOST_TEST(wait_until([&] { return bridge.wake_ups() > woken_before; }));
  BOOST_TEST(wait_until([&] { return bridge.parked(); }));

  const auto values = random_vector<std::uint8_t>(4096, 907);
  auto device = device_buffer<std::uint8_t>::allocate(values.size());
  stream s = stream::create();
  bridge.expect_work();
  BOOST_TEST(copy_and_wait_for_bridge(bridge, device.get().get(), values, s.get()) == CUDA_SUCCESS);
  std::vector<std::uint8_t> back(values.size());
  BOOST_TEST(detail::driver().cuMemcpyDtoH(back.data(), device.get().get(), back.size()) == CUDA_SUCCESS);
  BOOST_TEST(back == values, boost::test_tools::per_element());
  bridge.drain();
}

// Ops that keep coming after pauses longer than spin_window, but at most max_spin_window, make the bridge
// spin through such pauses (5/4 of the longest); once most pauses are longer than max_spin_window, it
// spins spin_window again.
BOOST_AUTO_TEST_CASE(the_spin_grows_to_cover_pauses_up_to_max_spin_window_and_shrinks_when_they_are_longer) {
  engine_options options;
  options.policy = completion_policy::poll;
  options.spin_window = std::chrono::milliseconds(1);
  options.max_spin_window = std::chrono::milliseconds(200);
  completion_bridge bridge{detail::driver(), primary.get(), options};
  BOOST_TEST(bridge.spin_window() == std::chrono::milliseconds(1));
  const auto values = random_vector<std::uint8_t>(4096, 913);
  auto device = device_buffer<std::uint8_t>::allocate(values.size());
  stream s = stream::create();
  auto one_op = [&] {
    BOOST_TEST_REQUIRE(copy_and_wait_for_bridge(bridge, device.get().get(), values, s.get()) == CUDA_SUCCESS);
  };
  one_op();
  for (int i = 0; i < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    one_op();
  }
  const auto last_op = std::chrono::steady_clock::now();
  // Four pauses of 60 ms (or a little more): 75 ms at least, and never past the bound.
  BOOST_TEST(bridge.spin_window() >= std::chrono::milliseconds(75));
  BOOST_TEST(bridge.spin_window() <= std::chrono::milliseconds(200));
  const std::uint64_t woken_before = bridge.wake_ups();
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  // Well inside the grown spin, where a 1 ms spin would have parked. A test thread held up for most of
  // the spin (a loaded machine) could no longer tell: then it does not look.
  if (std::chrono::steady_clock::now() - last_op < std::chrono::milliseconds(40)) {
    BOOST_TEST(!bridge.parked());
    one_op();
    BOOST_TEST(bridge.wake_ups() == woken_before);
  } else {
    BOOST_TEST_MESSAGE("the test thread woke too late to look inside the grown spin");
  }
  // Five pauses longer than the bound: of the last 8 long pauses, fewer than half could be spun through.
  for (int i = 0; i < 5; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    one_op();
  }
  BOOST_TEST(bridge.spin_window() == std::chrono::milliseconds(1));
  std::vector<std::uint8_t> back(values.size());
  BOOST_TEST(detail::driver().cuMemcpyDtoH(back.data(), device.get().get(), back.size()) == CUDA_SUCCESS);
  BOOST_TEST(back == values, boost::test_tools::per_element());
  bridge.drain();
}

BOOST_AUTO_TEST_CASE(a_driver_that_refuses_the_flag_write_leaves_the_events_to_tell, *ferry::testing::only_on_sim()) {
  stream s = stream::create();
  completion_bridge bridge{detail::driver(), primary.get(), spinning_poll()};
  sim::fail_call("cuStreamWriteValue32", 1, CUDA_ERROR_NOT_SUPPORTED);
  const std::size_t writes_before = calls_of("cuStreamWriteValue32");
  std::atomic<int> completed{0};
  std::vector<CUresult> statuses(3, CUDA_ERROR_UNKNOWN);
  for (int i = 0; i < 3; ++i) {
    BOOST_TEST(bridge.watch(s.get(), [&, i](CUresult status) {
      statuses[i] = status;
      completed.fetch_add(1, std::memory_order_release);
    }) == CUDA_SUCCESS);
  }
  bridge.drain();
  BOOST_TEST(completed.load() == 3);
  for (CUresult status : statuses) BOOST_TEST(status == CUDA_SUCCESS);
  // Refused once, never asked again.
  BOOST_TEST(calls_of("cuStreamWriteValue32") - writes_before == 1u);
}

BOOST_AUTO_TEST_CASE(work_on_a_stream_that_failed_completes_with_the_failure_though_no_flag_is_written,
                     *ferry::testing::only_on_sim()) {
  stream s = stream::create();
  completion_bridge bridge{detail::driver(), primary.get(), spinning_poll()};
  std::atomic<bool> done{false};
  CUresult seen = CUDA_SUCCESS;
  {
    ferry::testing::stream_gate gate(s);
    BOOST_TEST(bridge.watch(s.get(), [&](CUresult status) {
      seen = status;
      done.store(true, std::memory_order_release);
    }) == CUDA_SUCCESS);
    sim::fail_stream(s.get(), CUDA_ERROR_ILLEGAL_ADDRESS);
    gate.open();
    BOOST_TEST(wait_for(done));
  }
  BOOST_TEST(seen == CUDA_ERROR_ILLEGAL_ADDRESS);
  bridge.drain();
  sim::reset_faults();
}

BOOST_AUTO_TEST_CASE(more_work_than_flag_words_completes_in_order) {
  // 16 words: the watches past them rely on their events alone. (Few in all: a GPU's queue for a stream
  // holds a bounded number of commands, and one held back by a gate would block the enqueue past it.)
  const std::size_t words = 16;
  const int watches = 200;
  const std::size_t count = 1024;
  const auto values = random_vector<std::uint8_t>(count, 902);
  auto host = pinned_buffer<std::uint8_t>::allocate(count);
  std::memcpy(host.data(), values.data(), count);
  auto device = device_buffer<std::uint8_t>::allocate(count);
  stream s = stream::create();
  completion_bridge bridge{detail::driver(), primary.get(), spinning_poll(), words};
  std::vector<int> order;
  order.reserve(watches);
  std::atomic<int> failures{0};
  BOOST_TEST(detail::driver().cuMemsetD8(device.get().get(), 0xA5, count) == CUDA_SUCCESS);
  {
    ferry::testing::stream_gate gate(s);
    for (int i = 0; i < watches; ++i) {
      BOOST_TEST_REQUIRE(detail::driver().cuMemcpyHtoDAsync(device.get().get(), host.data(), count, s.get()) ==
                         CUDA_SUCCESS);
      BOOST_TEST_REQUIRE(bridge.watch(s.get(), [&, i](CUresult status) {
        if (status != CUDA_SUCCESS) failures.fetch_add(1);
        order.push_back(i);  // the bridge thread only
      }) == CUDA_SUCCESS);
    }
    gate.open();
    bridge.drain();
  }
  BOOST_TEST(failures.load() == 0);
  BOOST_TEST_REQUIRE(order.size() == static_cast<std::size_t>(watches));
  for (int i = 0; i < watches; ++i) BOOST_TEST_REQUIRE(order[i] == i);
  std::vector<std::uint8_t> back(count);
  BOOST_TEST(detail::driver().cuMemcpyDtoH(back.data(), device.get().get(), count) == CUDA_SUCCESS);
  BOOST_TEST(back == values);
}

BOOST_AUTO_TEST_SUITE_END()
