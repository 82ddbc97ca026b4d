// The resident copier (engine_options::resident_copies): small page-locked copies given no stream are posted to a copy
// kernel's block that stays on the GPU. Every size and alignment moves every byte both ways; copies it must not take
// (given a stream, forced pinned, too large, pageable, another device's memory) take the copy engine; it stops when the
// poller parks, or once idle while the poller spins (a context-wide wait then returns), and starts again with the next
// copy; it is stopped when the engine goes; copies posted from several threads at once, past the ring's size, all
// arrive; a launch the driver refuses sends copies through the copy engine and says so; an engine that cannot run it,
// or told to stop it after no idle time or too long a one, refuses to start, and the plan cannot be forced.
#include "ferry/engine.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <future>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ferry/marshal.hpp"
#include "sim/control.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/failure_log.hpp"
#include "tests/support/io_helpers.hpp"
#include "tests/support/random_bytes.hpp"

namespace asio = boost::asio;
using namespace ferry;
using ferry::testing::random_vector;

namespace {

constexpr std::size_t area = std::size_t{256} << 10;  // host and device areas the copies fall in

struct resident_fixture : ferry::testing::device_fixture {
  resident_fixture() {
    options.resident_copies = true;
    options.on_failure = failures.recorder();
  }
  ~resident_fixture() {
    gpu.reset();
    if (runner.joinable()) {
      guard.reset();
      runner.join();
    }
  }

  // The engine, with its io_context run by a thread of its own: the copies below are waited on with
  // futures, from the test's thread or from several.
  engine& start() {
    gpu = std::make_unique<engine>(io.get_executor(), options);
    guard.emplace(io.get_executor());
    runner = std::thread([this] { io.run(); });
    return *gpu;
  }

  // A poke of `bytes` bytes from source + from to device + to, then a peek of them back into back + to;
  // checks every byte of the device area and of `back` against what the copies must have left there.
  void poke_and_peek(std::size_t bytes, std::size_t from, std::size_t to) {
    BOOST_TEST_CONTEXT("bytes " << bytes << ", from " << from << ", to " << to) {
      BOOST_TEST(gpu->poke(pinned_span(host_ptr<const std::uint8_t>(source.get() + from), bytes), device.get() + to,
                           asio::use_future)
                     .get() == bytes);
      std::copy_n(source.data() + from, bytes, expected_device.begin() + static_cast<std::ptrdiff_t>(to));
      BOOST_TEST(ferry::testing::same_bytes(peek_list_array(area, device.get()), expected_device));
      BOOST_TEST(gpu->peek(device_ptr<const std::uint8_t>(device.get() + to),
                           pinned_span(host_ptr<std::uint8_t>(back.get() + from), bytes), asio::use_future)
                     .get() == bytes);
      std::copy_n(expected_device.begin() + static_cast<std::ptrdiff_t>(to), bytes,
                  expected_back.begin() + static_cast<std::ptrdiff_t>(from));
      BOOST_TEST(std::equal(expected_back.begin(), expected_back.end(), back.data()));
    }
  }

  // Waits for the whole context from another thread (which waits for a running resident kernel): true
  // when that returns within `limit`.
  bool context_synchronizes_within(std::chrono::seconds limit) {
    std::future<void> synchronized = std::async(std::launch::async, [this] {
      context_guard here(primary);
      primary.ref().synchronize();
    });
    if (synchronized.wait_for(limit) != std::future_status::ready) return false;
    synchronized.get();
    return true;
  }

  // The device area and `back` start as random bytes of their own, unlike the source's.
  void fill_areas(std::uint64_t seed) {
    const auto values = random_vector<std::uint8_t>(area, seed);
    std::copy(values.begin(), values.end(), source.data());
    expected_device = random_vector<std::uint8_t>(area, seed + 1);
    poke_list_array(std::span<const std::uint8_t>(expected_device), device.get());
    expected_back = random_vector<std::uint8_t>(area, seed + 2);
    std::copy(expected_back.begin(), expected_back.end(), back.data());
  }

  ferry::testing::failure_log failures;  // before the engine, which reports to it
  asio::io_context io;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard;
  std::thread runner;
  engine_options options;
  std::unique_ptr<engine> gpu;
  pinned_buffer<std::uint8_t> source = pinned_buffer<std::uint8_t>::allocate(area);
  pinned_buffer<std::uint8_t> back = pinned_buffer<std::uint8_t>::allocate(area);
  device_buffer<std::uint8_t> device = device_buffer<std::uint8_t>::allocate(area);
  std::vector<std::uint8_t> expected_device;
  std::vector<std::uint8_t> expected_back;
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(resident_copies, resident_fixture)

// Sizes from one byte to resident_max_bytes, at offsets that put the two ends at every alignment
// modulo 16 against each other (the kernel's widest access needs them aligned alike).
BOOST_AUTO_TEST_CASE(small_copies_one_at_a_time_take_the_resident_copier_and_move_every_byte_both_ways) {
  start();
  fill_areas(1201);
  std::mt19937_64 random(1201);
  std::size_t copies = 0;
  for (const std::size_t bytes : {std::size_t{1}, std::size_t{3}, std::size_t{15}, std::size_t{16}, std::size_t{100},
                                  std::size_t{4096}, std::size_t{4099}, std::size_t{40000}, std::size_t{65536}}) {
    for (int k = 0; k < 3; ++k) {
      const std::size_t from = random() % (area - bytes);
      const std::size_t to = random() % (area - bytes);
      poke_and_peek(bytes, from, to);
      copies += 2;
    }
  }
  BOOST_TEST(gpu->plan_counts().resident == copies);
  BOOST_TEST(gpu->plan_counts().pinned == 0u);
  BOOST_TEST(failures.seen().empty());
}

// The copy engine reaches another device's memory through unified addressing; the engine's kernel would
// fault there. Two devices: the sim's default, two GPUs on cuda.
BOOST_AUTO_TEST_CASE(copies_to_another_devices_memory_take_the_copy_engine,
                     *ferry::testing::only_with_two_devices()) {
  start();
  fill_areas(1207);
  // Held for the whole case: releasing its last hold would destroy the context and free its memory.
  context other = context::primary(device::get(1));
  std::optional<device_buffer<std::uint8_t>> elsewhere;
  {
    context_guard there(other);
    elsewhere.emplace(device_buffer<std::uint8_t>::allocate(4096));
  }
  gpu->poke(pinned_span(host_ptr<const std::uint8_t>(source.get() + 7), 4096), elsewhere->get(), asio::use_future)
      .get();
  std::vector<std::uint8_t> arrived(4096);
  {
    context_guard there(other);
    arrived = peek_list_array(4096, device_ptr<const std::uint8_t>(elsewhere->get()));
    elsewhere.reset();
  }
  BOOST_TEST(std::equal(arrived.begin(), arrived.end(), source.data() + 7));
  BOOST_TEST(gpu->plan_counts().resident == 0u);
  BOOST_TEST(gpu->plan_counts().pinned == 1u);
}

BOOST_AUTO_TEST_CASE(copies_given_a_stream_forced_pinned_larger_than_the_limit_or_pageable_take_the_copy_engine) {
  options.resident_max_bytes = 8192;
  start();
  fill_areas(1202);
  stream on = stream::create();
  gpu->poke(pinned_span(host_ptr<const std::uint8_t>(source.get()), 4096), device.get(), on, asio::use_future).get();
  gpu->poke(pinned_span(host_ptr<const std::uint8_t>(source.get() + 4096), 4096), device.get() + 4096,
            transfer_plan::pinned, asio::use_future)
      .get();
  gpu->poke(pinned_span(host_ptr<const std::uint8_t>(source.get() + 8192), 8193), device.get() + 8192, asio::use_future)
      .get();
  std::vector<std::uint8_t> pageable(source.data() + 16385, source.data() + 16385 + 4096);
  gpu->poke(std::span<const std::uint8_t>(pageable), device.get() + 16385, asio::use_future).get();
  std::copy_n(source.data(), 16385 + 4096, expected_device.begin());
  BOOST_TEST(ferry::testing::same_bytes(peek_list_array(area, device.get()), expected_device));
  BOOST_TEST(gpu->plan_counts().resident == 0u);
  // The last one at the limit does take it.
  poke_and_peek(8192, 100, 30000);
  BOOST_TEST(gpu->plan_counts().resident == 2u);
}

// Idle for longer than spin_window, the poller parks and stops the kernel: a wait for the whole
// context returns (it would wait for a running kernel for ever), and the next copy launches it again.
BOOST_AUTO_TEST_CASE(the_copier_stops_when_the_engine_goes_idle_and_the_next_copy_starts_it_again) {
  options.spin_window = std::chrono::milliseconds(2);
  start();
  fill_areas(1203);
  for (int round = 0; round < 3; ++round) {
    poke_and_peek(4096, static_cast<std::size_t>(round) * 5000, static_cast<std::size_t>(round) * 7000 + 1);
    BOOST_TEST_REQUIRE(context_synchronizes_within(std::chrono::seconds(20)));
  }
  BOOST_TEST(gpu->plan_counts().resident == 6u);
}

// The poller, with a spin window far longer than the test, never parks: the copier's idle watch stops the
// kernel once nothing was posted for resident_idle_stop, so a context-wide wait returns (it would wait out
// the spin window otherwise: a poller held in a driver call that waits for the kernel is the same case),
// and the next copy starts the kernel again.
BOOST_AUTO_TEST_CASE(the_copier_stops_once_idle_while_the_poller_still_spins) {
  options.spin_window = std::chrono::seconds(60);
  options.resident_idle_stop = std::chrono::milliseconds(2);
  start();
  fill_areas(1207);
  for (int round = 0; round < 3; ++round) {
    poke_and_peek(2048 + static_cast<std::size_t>(round), static_cast<std::size_t>(round) * 3000 + 7,
                  static_cast<std::size_t>(round) * 9000 + 3);
    BOOST_TEST_REQUIRE(context_synchronizes_within(std::chrono::seconds(20)));
  }
  BOOST_TEST(gpu->plan_counts().resident == 6u);
  BOOST_TEST(failures.seen().empty());
}

// A long spin window and idle stop keep the kernel running: destroying the engine stops it, and the
// fixture finds its stream and ring freed.
BOOST_AUTO_TEST_CASE(destroying_the_engine_stops_a_running_copier) {
  options.spin_window = std::chrono::seconds(30);
  options.resident_idle_stop = std::chrono::seconds(30);
  start();
  fill_areas(1204);
  poke_and_peek(65536, 0, 65536);
  const auto began = std::chrono::steady_clock::now();
  gpu.reset();
  BOOST_TEST((std::chrono::steady_clock::now() - began < std::chrono::seconds(10)));
}

// With the batcher off every copy goes alone: threads posting at once meet in the ring, and 1,000 copies
// posted from one thread without waiting fill it (those that find it full take the copy engine).
BOOST_AUTO_TEST_CASE(copies_posted_from_several_threads_and_past_the_rings_size_all_arrive) {
  options.batch_window = std::chrono::microseconds(0);
  start();
  fill_areas(1205);
  constexpr std::size_t threads = 4;
  constexpr std::size_t per_thread = 150;
  constexpr std::size_t piece = area / (threads * per_thread);  // 109 bytes: every alignment in turn
  std::vector<std::thread> posters;
  for (std::size_t t = 0; t < threads; ++t) {
    posters.emplace_back([&, t] {
      for (std::size_t i = 0; i < per_thread; ++i) {
        const std::size_t at = (t * per_thread + i) * piece;
        gpu->poke(pinned_span(host_ptr<const std::uint8_t>(source.get() + at), piece), device.get() + at,
                  asio::use_future)
            .get();
      }
    });
  }
  for (std::thread& poster : posters) poster.join();
  std::copy_n(source.data(), threads * per_thread * piece, expected_device.begin());
  BOOST_TEST(ferry::testing::same_bytes(peek_list_array(area, device.get()), expected_device));
  BOOST_TEST(gpu->plan_counts().resident > 0u);

  constexpr std::size_t burst = 1000;
  constexpr std::size_t small = area / burst;  // 262 bytes
  std::vector<std::future<std::size_t>> arrivals;
  for (std::size_t i = 0; i < burst; ++i) {
    arrivals.push_back(gpu->peek(device_ptr<const std::uint8_t>(device.get() + i * small),
                                 pinned_span(host_ptr<std::uint8_t>(back.get() + i * small), small), asio::use_future));
  }
  for (auto& arrival : arrivals) BOOST_TEST(arrival.get() == small);
  BOOST_TEST(std::equal(expected_device.begin(), expected_device.begin() + burst * small, back.data()));
  const plan_counts counted = gpu->plan_counts();
  BOOST_TEST(counted.resident + counted.pinned == threads * per_thread + burst);
  BOOST_TEST(failures.seen().empty());
}

BOOST_AUTO_TEST_CASE(a_launch_the_driver_refuses_sends_small_copies_through_the_copy_engine_and_says_so,
                     *ferry::testing::only_on_sim()) {
  start();
  fill_areas(1206);
  sim::fail_call("cuLaunchKernel", 1, CUDA_ERROR_NO_BINARY_FOR_GPU);
  poke_and_peek(4096, 10, 20);
  BOOST_TEST(gpu->plan_counts().resident == 0u);
  BOOST_TEST(gpu->plan_counts().pinned == 2u);
  const std::vector<std::string> seen = failures.seen();
  BOOST_TEST_REQUIRE(seen.size() == 1u);
  BOOST_TEST(seen[0].find("ferry_resident_copy") != std::string::npos);
  BOOST_TEST(seen[0].find("CUDA_ERROR_NO_BINARY_FOR_GPU") != std::string::npos);
  BOOST_TEST(seen[0].find("go through the copy engine") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(an_engine_without_the_poll_policy_refuses_resident_copies) {
  options.policy = completion_policy::host_callback;
  ferry::testing::expect_error<std::invalid_argument>(
      [&] { engine refused(io.get_executor(), options); },
      {"engine", "resident_copies needs completion_policy::poll", "policy is 1"});
}

BOOST_AUTO_TEST_CASE(an_engine_refuses_an_idle_stop_of_zero_or_past_the_limit) {
  options.resident_idle_stop = std::chrono::microseconds(0);
  ferry::testing::expect_error<std::invalid_argument>(
      [&] { engine refused(io.get_executor(), options); },
      {"engine", "resident_idle_stop is 0 us", "more than zero", "at most 3600000000 us"});
  options.resident_idle_stop = std::chrono::microseconds::max();
  ferry::testing::expect_error<std::invalid_argument>(
      [&] { engine refused(io.get_executor(), options); },
      {"engine", "resident_idle_stop is " + std::to_string(std::chrono::microseconds::max().count()) + " us"});
}

BOOST_AUTO_TEST_CASE(the_resident_plan_cannot_be_forced) {
  start();
  ferry::testing::expect_error<std::invalid_argument>(
      [&] {
        gpu->poke(pinned_span(host_ptr<const std::uint8_t>(source.get()), 64), device.get(), transfer_plan::resident,
                  asio::use_future);
      },
      {"poke", "transfer_options::plan is resident", "cannot be forced"});
  BOOST_TEST(gpu->plan_counts().resident == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
