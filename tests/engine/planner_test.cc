// The transfer planner: pinned memory goes straight to the copy engine, large pageable buffers seen
// again are registered once (bounded, least recently used first), others are staged; the decision is
// visible (on_plan, plan_counts) and can be forced per call. Every transfer is checked byte by byte.
#include "ferry/engine.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdint>
#include <atomic>
#include <chrono>
#include <future>
#include <limits>
#include <map>
#include <mutex>
#include <thread>
#include <string>
#include <vector>

#include "sim/control.hpp"
#include "ferry/marshal.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/io_helpers.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/random_bytes.hpp"
#include "tests/support/stream_gate.hpp"

namespace asio = boost::asio;
using namespace ferry;
using ferry::testing::random_vector;
using ferry::testing::same_bytes;

namespace {

using plan_counts_type = decltype(std::declval<engine>().plan_counts());

constexpr std::size_t big = (2 << 20) / 4;  // 2 MiB of uint32: above the test's 1 MiB threshold

struct planner_fixture : ferry::testing::device_fixture {
  planner_fixture() {
    options.registration_threshold_bytes = 1 << 20;
    options.registration_cache_bytes = 5 << 20;  // room for two 2 MiB registrations, not three
    options.staging_chunk_bytes = 256 << 10;
    // Wide enough that back-to-back submissions count as concurrent even under a sanitizer's slowdown.
    options.batch_window = std::chrono::milliseconds(10);
    options.on_plan = [this](std::string_view, transfer_plan plan, std::size_t) {
      std::lock_guard lock(mutex);
      seen.push_back(plan);
    };
    gpu = std::make_unique<engine>(io.get_executor(), options);
  }
  ~planner_fixture() { gpu.reset(); }

  std::vector<transfer_plan> plans() {
    std::lock_guard lock(mutex);
    return std::exchange(seen, {});
  }
  std::size_t registered_now() { return ferry::testing::on_sim() ? sim::current_usage().registered_ranges : 0; }
  template <class Start>
  void run_together(std::size_t copies, std::size_t bytes, Start start_copy) {
    ferry::testing::run_together(io, copies, bytes, start_copy);
  }

  asio::io_context io;
  engine_options options;
  std::mutex mutex;
  std::vector<transfer_plan> seen;
  std::unique_ptr<engine> gpu;
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(planner, planner_fixture)

BOOST_AUTO_TEST_CASE(a_large_pageable_buffer_is_staged_first_then_registered_once_and_reused) {
  auto values = random_vector<std::uint32_t>(big, 801);
  auto destination = gpu->allocate<std::uint32_t>(big);
  for (int round = 0; round < 3; ++round) {
    auto fresh = random_vector<std::uint32_t>(big, 810 + round);
    std::copy(fresh.begin(), fresh.end(), values.begin());
    BOOST_TEST(gpu->poke(std::span<const std::uint32_t>(values), destination.get(), asio::use_future).get() == big * 4);
    BOOST_TEST(same_bytes(peek_list_array(big, destination.get()), values));
  }
  BOOST_TEST((plans() == std::vector{transfer_plan::staged, transfer_plan::registered, transfer_plan::registered}));
  BOOST_TEST(gpu->plan_counts().registered == 2u);
  if (ferry::testing::on_sim()) BOOST_TEST(registered_now() == 1u);
  // Peeking into the registered buffer uses the registration too.
  std::vector<std::uint32_t> expected = peek_list_array(big, destination.get());
  std::fill(values.begin(), values.end(), 0xA5A5A5A5u);
  gpu->peek(device_ptr<const std::uint32_t>(destination.get()), std::span<std::uint32_t>(values), asio::use_future).get();
  BOOST_TEST(same_bytes(values, expected));
  BOOST_TEST((plans() == std::vector{transfer_plan::registered}));
  gpu->forget_host_memory(std::span(values));
  if (ferry::testing::on_sim()) BOOST_TEST(registered_now() == 0u);
}

BOOST_AUTO_TEST_CASE(vectors_the_engine_owns_and_hands_back_are_never_registered) {
  // The caller frees a handed-back vector where ferry cannot see it: a registration would outlive it.
  auto destination = gpu->allocate<std::uint32_t>(big);
  std::vector<std::uint32_t> values = random_vector<std::uint32_t>(big, 807);
  for (int round = 0; round < 3; ++round) {
    const std::vector<std::uint32_t> expected = random_vector<std::uint32_t>(big, 870 + round);
    std::copy(expected.begin(), expected.end(), values.begin());
    const std::uint32_t* storage = values.data();
    values = gpu->poke(std::move(values), destination.get(), asio::use_future).get();
    BOOST_TEST(values.data() == storage);  // the same memory came back, seen again by the planner
    BOOST_TEST(same_bytes(peek_list_array(big, destination.get()), expected));
    BOOST_TEST(same_bytes(gpu->peek(device_ptr<const std::uint32_t>(destination.get()), big, asio::use_future).get(),
                          expected));
  }
  BOOST_TEST((plans() == std::vector<transfer_plan>(6, transfer_plan::staged)));
  BOOST_TEST(gpu->plan_counts().registered == 0u);
  if (ferry::testing::on_sim()) BOOST_TEST(registered_now() == 0u);
}

// Small pageable pokes and peeks are staged through the engine's small slots (no staging pool, no
// hand-off to an engine thread); memory the driver knows as page-locked goes straight.
BOOST_AUTO_TEST_CASE(small_pageable_pokes_and_peeks_are_staged_through_slots_and_pinned_spans_go_straight) {
  const auto small = random_vector<std::uint32_t>(1000, 802);
  auto destination = gpu->allocate<std::uint32_t>(big);
  BOOST_TEST(gpu->pinned_bytes() == 0u);
  BOOST_TEST(gpu->poke(small, destination.get(), asio::use_future).get() == small.size() * 4);
  BOOST_TEST(same_bytes(peek_list_array(small.size(), destination.get()), small));
  std::vector<std::uint32_t> back(small.size());
  ferry::testing::poison_fill(std::span(back));
  BOOST_TEST(gpu->peek(destination.get(), back, asio::use_future).get() == small.size() * 4);
  BOOST_TEST(same_bytes(back, small));
  pinned_buffer<std::uint32_t> pinned = pinned_buffer<std::uint32_t>::allocate(big);
  auto values = random_vector<std::uint32_t>(big, 803);
  std::copy(values.begin(), values.end(), pinned.data());
  gpu->poke(std::span<const std::uint32_t>(pinned.span()), destination.get(), asio::use_future).get();
  BOOST_TEST(same_bytes(peek_list_array(big, destination.get()), values));
  BOOST_TEST((plans() == std::vector{transfer_plan::staged, transfer_plan::staged, transfer_plan::pinned}));
  BOOST_TEST(gpu->plan_counts().staged == 2u);
  BOOST_TEST(gpu->plan_counts().driver_staged == 0u);
  // The slots, allocated by the first small transfer, and not the staging pool.
  BOOST_TEST(gpu->pinned_bytes() == options.small_staging_slots * options.small_staged_max_bytes);
}

// Every size up to a slot, at an odd device offset, given no stream and given one, both ways; one byte
// more is a poke for the driver's staging and a peek for the staging pool.
BOOST_AUTO_TEST_CASE(transfers_through_small_slots_move_every_byte_at_each_size_up_to_a_slot) {
  const std::size_t slot = options.small_staged_max_bytes;
  auto destination = gpu->allocate<std::uint8_t>(slot + 64);
  stream s = stream::create();
  int seed = 830;
  for (const std::size_t bytes : {std::size_t{1}, std::size_t{3}, std::size_t{4095}, std::size_t{4096},
                                  std::size_t{4097}, slot - 1, slot, slot + 1}) {
    for (const bool on_stream : {false, true}) {
      const auto values = random_vector<std::uint8_t>(bytes, seed++);
      const device_ptr<std::uint8_t> at = destination.get() + 7;
      const std::span<const std::uint8_t> source(values);
      std::vector<std::uint8_t> back(bytes);
      ferry::testing::poison_fill(std::span(back));
      if (on_stream) {
        BOOST_TEST(gpu->poke(source, at, s, asio::use_future).get() == bytes);
        BOOST_TEST(gpu->peek(at, std::span(back), s, asio::use_future).get() == bytes);
      } else {
        BOOST_TEST(gpu->poke(source, at, asio::use_future).get() == bytes);
        BOOST_TEST(gpu->peek(at, std::span(back), asio::use_future).get() == bytes);
      }
      BOOST_TEST(same_bytes(back, values), bytes << " bytes, on a stream: " << on_stream);
      BOOST_TEST(same_bytes(peek_list_array(bytes, at), values));
      const std::vector expected = bytes <= slot ? std::vector{transfer_plan::staged, transfer_plan::staged}
                                                 : std::vector{transfer_plan::driver_staged, transfer_plan::staged};
      BOOST_TEST((plans() == expected), bytes << " bytes, on a stream: " << on_stream);
    }
  }
}

// Held behind a closed gate, two slots are taken by the first two pokes: the next pokes are
// driver_staged and the peeks take the staging pool; once the gate opens every byte arrives, the slots
// are free again, and the stream's order held throughout (each peek reads what the pokes before it wrote).
BOOST_AUTO_TEST_CASE(while_every_slot_is_in_use_pokes_are_driver_staged_and_peeks_take_the_staging_pool) {
  engine_options two_slots = options;  // its plans are recorded as the fixture's engine's are (plans())
  two_slots.small_staging_slots = 2;
  engine narrow{io.get_executor(), two_slots};
  constexpr std::size_t bytes = 4096, pokes = 4;
  auto destination = narrow.allocate<std::uint8_t>(bytes * pokes);
  std::vector<std::vector<std::uint8_t>> values, back;
  for (std::size_t i = 0; i < pokes; ++i) {
    values.push_back(random_vector<std::uint8_t>(bytes, 840 + static_cast<int>(i)));
    back.emplace_back(bytes);
    ferry::testing::poison_fill(std::span(back.back()));
  }
  stream s = stream::create();
  std::vector<std::future<std::size_t>> done;
  {
    ferry::testing::stream_gate gate(s);
    for (std::size_t i = 0; i < pokes; ++i) {
      done.push_back(narrow.poke(std::span<const std::uint8_t>(values[i]), destination.get() + i * bytes, s,
                                 asio::use_future));
    }
    for (std::size_t i = 0; i < pokes; ++i) {
      done.push_back(narrow.peek(device_ptr<const std::uint8_t>(destination.get() + i * bytes), std::span(back[i]), s,
                                 asio::use_future));
    }
  }  // the gate opens
  for (auto& each : done) BOOST_TEST(each.get() == bytes);
  // The slots and the staging pool, which only the peeks used.
  BOOST_TEST(narrow.pinned_bytes() ==
             2 * two_slots.small_staged_max_bytes + two_slots.staging_chunks * two_slots.staging_chunk_bytes);
  for (std::size_t i = 0; i < pokes; ++i) BOOST_TEST(same_bytes(back[i], values[i]), "block " << i);
  const auto again = random_vector<std::uint8_t>(bytes, 849);
  narrow.poke(std::span<const std::uint8_t>(again), destination.get(), asio::use_future).get();
  BOOST_TEST(same_bytes(peek_list_array(bytes, destination.get()), again));
  BOOST_TEST((plans() == std::vector{transfer_plan::staged, transfer_plan::staged, transfer_plan::driver_staged,
                                  transfer_plan::driver_staged, transfer_plan::staged, transfer_plan::staged,
                                  transfer_plan::staged, transfer_plan::staged, transfer_plan::staged}));
  BOOST_TEST(narrow.plan_counts().driver_staged == 2u);
}

BOOST_AUTO_TEST_CASE(a_max_spin_window_below_the_spin_window_is_refused) {
  engine_options settings = options;
  settings.spin_window = std::chrono::microseconds(2000);
  settings.max_spin_window = std::chrono::microseconds(500);
  ferry::testing::expect_error<std::invalid_argument>(
      [&] { engine refused{io.get_executor(), settings}; },
      {"engine: max_spin_window 500 us is less than spin_window 2000 us"});
  // Equal: the spin never grows, which is allowed.
  settings.max_spin_window = settings.spin_window;
  engine fixed{io.get_executor(), settings};
  auto destination = fixed.allocate<std::uint8_t>(100);
  const auto values = random_vector<std::uint8_t>(100, 853);
  fixed.poke(std::span<const std::uint8_t>(values), destination.get(), asio::use_future).get();
  BOOST_TEST(same_bytes(peek_list_array(values.size(), destination.get()), values));
}

BOOST_AUTO_TEST_CASE(pool_stream_counts_outside_their_range_are_refused) {
  engine_options settings = options;
  settings.pool_streams = 0;
  ferry::testing::expect_error<std::invalid_argument>([&] { engine refused{io.get_executor(), settings}; },
                                                      {"engine: pool_streams is 0; the engine needs at least one"});
  settings.pool_streams = std::numeric_limits<std::size_t>::max();
  ferry::testing::expect_error<std::invalid_argument>(
      [&] { engine refused{io.get_executor(), settings}; },
      {"engine: pool_streams 18446744073709551615 is more than 1024"});
  settings.pool_streams = pool_streams_limit + 1;
  ferry::testing::expect_error<std::invalid_argument>([&] { engine refused{io.get_executor(), settings}; },
                                                      {"engine: pool_streams 1025 is more than 1024"});
  // The largest count works.
  settings.pool_streams = pool_streams_limit;
  engine widest{io.get_executor(), settings};
  auto destination = widest.allocate<std::uint8_t>(100);
  const auto values = random_vector<std::uint8_t>(100, 851);
  widest.poke(std::span<const std::uint8_t>(values), destination.get(), asio::use_future).get();
  BOOST_TEST(same_bytes(peek_list_array(values.size(), destination.get()), values));
}

BOOST_AUTO_TEST_CASE(small_staging_settings_beyond_what_can_be_held_are_refused) {
  engine_options settings = options;
  settings.small_staging_slots = 65537;
  ferry::testing::expect_error<std::invalid_argument>([&] { engine refused{io.get_executor(), settings}; },
                                                      {"engine: small_staging_slots 65537 is more than 65536"});
  settings.small_staging_slots = 65536;
  settings.small_staged_max_bytes = std::numeric_limits<std::size_t>::max();
  ferry::testing::expect_error<std::invalid_argument>(
      [&] { engine refused{io.get_executor(), settings}; },
      {"engine: 65536 small_staging_slots of small_staged_max_bytes 18446744073709551615 bytes are more bytes than a "
       "size_t counts"});
  // Either zero turns the slots off: small pokes go to the driver's staging again.
  settings.small_staged_max_bytes = 0;
  engine off{io.get_executor(), settings};
  auto destination = off.allocate<std::uint8_t>(100);
  const auto values = random_vector<std::uint8_t>(100, 850);
  off.poke(std::span<const std::uint8_t>(values), destination.get(), asio::use_future).get();
  BOOST_TEST(same_bytes(peek_list_array(values.size(), destination.get()), values));
  BOOST_TEST((plans() == std::vector{transfer_plan::driver_staged}));
  BOOST_TEST(off.pinned_bytes() == 0u);
}

// The size limit of driver_staged pokes: at the limit the driver stages, past it ferry does; a limit of
// zero turns it off; a poke forced to driver_staged goes so at any size, a peek cannot be forced to it.
BOOST_AUTO_TEST_CASE(driver_staged_pokes_follow_their_size_limit_and_can_be_forced) {
  engine_options limited = options;
  limited.small_staged_max_bytes = 0;  // the driver's staging for every small poke
  limited.driver_staged_max_bytes = 64 << 10;
  std::vector<transfer_plan> seen;
  limited.on_plan = [&](std::string_view, transfer_plan plan, std::size_t) { seen.push_back(plan); };
  engine small_limit{io.get_executor(), limited};
  const auto values = random_vector<std::uint8_t>((64 << 10) + 1, 804);
  auto destination = small_limit.allocate<std::uint8_t>(values.size());
  const std::span<const std::uint8_t> all(values);
  small_limit.poke(all.first(64 << 10), destination.get(), asio::use_future).get();
  small_limit.poke(all, destination.get(), asio::use_future).get();
  small_limit.poke(all, destination.get(), transfer_plan::driver_staged, asio::use_future).get();
  BOOST_TEST(same_bytes(peek_list_array(values.size(), destination.get()), values));
  BOOST_TEST((seen == std::vector{transfer_plan::driver_staged, transfer_plan::staged, transfer_plan::driver_staged}));
  std::vector<std::uint8_t> back(values.size());
  ferry::testing::expect_error<std::invalid_argument>(
      [&] { small_limit.peek(destination.get(), back, transfer_plan::driver_staged, [](auto...) {}); },
      {"engine::peek: transfer_options::plan is driver_staged, which only pokes take"});

  limited.driver_staged_max_bytes = 0;
  seen.clear();
  engine off{io.get_executor(), limited};
  off.poke(all.first(100), destination.get(), asio::use_future).get();
  BOOST_TEST((seen == std::vector{transfer_plan::staged}));
}

BOOST_AUTO_TEST_CASE(a_buffer_that_grows_past_its_registration_is_not_sent_as_if_all_of_it_were_pinned) {
  auto values = random_vector<std::uint32_t>(2 * big, 806);
  auto destination = gpu->allocate<std::uint32_t>(2 * big);
  const std::span<const std::uint32_t> front(values.data(), big), whole(values);
  gpu->poke(front, destination.get(), asio::use_future).get();
  gpu->poke(front, destination.get(), asio::use_future).get();  // registers the front half
  BOOST_TEST(gpu->poke(whole, destination.get(), asio::use_future).get() == 2 * big * 4);
  BOOST_TEST(same_bytes(peek_list_array(2 * big, destination.get()), values));
  BOOST_TEST((plans() == std::vector{transfer_plan::staged, transfer_plan::registered, transfer_plan::staged}));
  gpu->forget_host_memory(std::span(values));
}

BOOST_AUTO_TEST_CASE(a_plan_can_be_forced_per_call) {
  auto values = random_vector<std::uint32_t>(big, 804);
  auto destination = gpu->allocate<std::uint32_t>(big);
  gpu->poke(std::span<const std::uint32_t>(values), destination.get(), transfer_options{transfer_plan::registered},
            asio::use_future)
      .get();
  BOOST_TEST(same_bytes(peek_list_array(big, destination.get()), values));
  stream s = stream::create();
  auto other = random_vector<std::uint32_t>(big, 805);
  std::copy(other.begin(), other.end(), values.begin());
  gpu->poke(std::span<const std::uint32_t>(values), destination.get(),
            transfer_options{stream_ref(s), transfer_plan::staged}, asio::use_future)
      .get();
  BOOST_TEST(same_bytes(peek_list_array(big, destination.get()), other));
  BOOST_TEST((plans() == std::vector{transfer_plan::registered, transfer_plan::staged}));
  gpu->forget_host_memory(std::span(values));
}

BOOST_AUTO_TEST_CASE(the_registration_cache_stays_within_its_bound_dropping_the_least_recently_used) {
  std::vector<std::vector<std::uint32_t>> buffers;
  for (int i = 0; i < 3; ++i) buffers.push_back(random_vector<std::uint32_t>(big, 820 + i));
  auto destination = gpu->allocate<std::uint32_t>(big);
  for (int round = 0; round < 2; ++round) {
    for (auto& buffer : buffers) {
      gpu->poke(std::span<const std::uint32_t>(buffer), destination.get(), asio::use_future).get();
      BOOST_TEST(same_bytes(peek_list_array(big, destination.get()), buffer));
      if (ferry::testing::on_sim()) BOOST_TEST(registered_now() <= 2u);
    }
  }
  const auto counts = gpu->plan_counts();
  BOOST_TEST(counts.registered == 3u);  // the second round registered each (dropping the oldest)
  BOOST_TEST(counts.staged == 3u);
  for (auto& buffer : buffers) gpu->forget_host_memory(std::span(buffer));
  if (ferry::testing::on_sim()) BOOST_TEST(registered_now() == 0u);
}

BOOST_AUTO_TEST_CASE(concurrent_small_copies_are_batched_and_a_lone_one_is_not) {
  constexpr std::size_t copies = 256, words = 1024;  // 4 KiB each
  pinned_buffer<std::uint32_t> pinned = pinned_buffer<std::uint32_t>::allocate(copies * words);
  auto values = random_vector<std::uint32_t>(copies * words, 830);
  std::copy(values.begin(), values.end(), pinned.data());
  auto destination = gpu->allocate<std::uint32_t>(copies * words);
  // Poisoned first: compute-sanitizer's initcheck does not see cuMemcpyBatchAsync write (it reported
  // every batched byte read back as uninitialized although the values below were right).
  memset(destination.get(), copies * words, std::uint32_t{0xA5A5A5A5u});
  run_together(copies, words * 4, [&](std::size_t i, auto handler) {
    gpu->poke(pinned_span(host_ptr<const std::uint32_t>(pinned.get() + i * words), words), destination.get() + i * words,
              handler);
  });
  BOOST_TEST(same_bytes(peek_list_array(copies * words, destination.get()), values));
  BOOST_TEST(gpu->plan_counts().batched > copies / 2);
  BOOST_TEST(gpu->plan_counts().batch_refusals == 0u);  // the driver took the batches as they were
  plans();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));  // longer than the window: the next one is alone
  gpu->poke(pinned_span(host_ptr<const std::uint32_t>(pinned.get()), words), destination.get(), asio::use_future).get();
  BOOST_TEST((plans() == std::vector{transfer_plan::pinned}));
}

BOOST_AUTO_TEST_CASE(small_copies_one_after_another_are_never_held_for_a_batch) {
  // A request/response loop: each 4 KiB poke (no stream) starts when the previous one has completed,
  // sooner than the batch window after it. With nothing else in flight there is nothing to batch with:
  // each goes straight to a stream (it used to wait for a batch that never filled, ~56 us a copy on the
  // H200 against 7.7 us raw).
  constexpr std::size_t copies = 50, words = 1024;
  pinned_buffer<std::uint32_t> pinned = pinned_buffer<std::uint32_t>::allocate(copies * words);
  auto values = random_vector<std::uint32_t>(copies * words, 831);
  std::copy(values.begin(), values.end(), pinned.data());
  auto destination = gpu->allocate<std::uint32_t>(copies * words);
  memset(destination.get(), copies * words, std::uint32_t{0xA5A5A5A5u});
  plans();
  for (std::size_t i = 0; i < copies; ++i) {
    BOOST_TEST(gpu->poke(pinned_span(host_ptr<const std::uint32_t>(pinned.get() + i * words), words), destination.get() + i * words,
                         asio::use_future)
                   .get() == words * 4);
  }
  BOOST_TEST(same_bytes(peek_list_array(copies * words, destination.get()), values));
  BOOST_TEST((plans() == std::vector<transfer_plan>(copies, transfer_plan::pinned)));
}

// A driver without cuMemcpyBatchAsync, or one that refuses a batch as a whole, enqueues nothing: each
// copy of the batch then goes on the stream alone, whichever way it goes, and the refusal is counted.
BOOST_AUTO_TEST_CASE(a_batch_the_driver_refuses_is_sent_copy_by_copy_in_every_direction,
                     *ferry::testing::only_on_sim()) {
  constexpr std::size_t copies = 64, words = 1024;  // 4 KiB each
  gpu.reset();
  options.batching = batch_path::copy_engine;  // (the kernel would take batches this large)
  gpu = std::make_unique<engine>(io.get_executor(), options);
  // Every batch refused: there are never more batches than copies.
  for (std::size_t i = 0; i < 3 * copies; ++i) sim::fail_call("cuMemcpyBatchAsync", 1, CUDA_ERROR_NOT_SUPPORTED);
  pinned_buffer<std::uint32_t> source = pinned_buffer<std::uint32_t>::allocate(copies * words);
  pinned_buffer<std::uint32_t> back = pinned_buffer<std::uint32_t>::allocate(copies * words);
  const auto values = random_vector<std::uint32_t>(copies * words, 850);
  std::copy(values.begin(), values.end(), source.data());
  std::fill(back.data(), back.data() + copies * words, 0xA5A5A5A5u);
  auto there = gpu->allocate<std::uint32_t>(copies * words);
  auto copied = gpu->allocate<std::uint32_t>(copies * words);
  memset(there.get(), copies * words, std::uint32_t{0x5A5A5A5Au});
  memset(copied.get(), copies * words, std::uint32_t{0x5A5A5A5Au});
  run_together(copies, words * 4, [&](std::size_t i, auto handler) {
    gpu->poke(source.span().subspan(i * words, words), there.get() + i * words, handler);
  });
  run_together(copies, words * 4, [&](std::size_t i, auto handler) {
    gpu->copy(device_ptr<const std::uint32_t>(there.get() + i * words), copied.get() + i * words, words, handler);
  });
  run_together(copies, words * 4, [&](std::size_t i, auto handler) {
    gpu->peek(copied.get() + i * words, back.span().subspan(i * words, words), handler);
  });
  BOOST_TEST(std::equal(values.begin(), values.end(), back.data()));
  BOOST_TEST(gpu->plan_counts().batched > copies);
  BOOST_TEST(gpu->plan_counts().batch_refusals >= 3u);  // a batch or more in each direction
}

// Small transfers forced to the staging pool are submitted from the starting thread and a peek's bytes
// copied out where its completion is learnt: many at once, of sizes around the in-place limit (64 KiB),
// both ways, every byte.
BOOST_AUTO_TEST_CASE(small_transfers_forced_to_the_staging_pool_move_every_byte_both_ways) {
  const std::vector<std::size_t> sizes = {1, 3, 4096, 4097, 65535, 65536, 65537, 200000};
  std::vector<std::vector<std::uint8_t>> sent, back;
  std::vector<device_buffer<std::uint8_t>> there;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    sent.push_back(random_vector<std::uint8_t>(sizes[i], 860 + i));
    back.emplace_back(sizes[i], std::uint8_t{0xA5});
    there.push_back(gpu->allocate<std::uint8_t>(sizes[i]));
  }
  std::atomic<std::size_t> done{0};
  auto count = [&](boost::system::error_code error, std::size_t) {
    BOOST_TEST(!error);
    ++done;
  };
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    gpu->poke(std::span<const std::uint8_t>(sent[i]), there[i].get(), transfer_plan::staged, count);
  }
  BOOST_TEST(ferry::testing::run_until(io, [&] { return done == sizes.size(); }));
  done = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    gpu->peek(device_ptr<const std::uint8_t>(there[i].get()), std::span<std::uint8_t>(back[i]), transfer_plan::staged,
              count);
  }
  BOOST_TEST(ferry::testing::run_until(io, [&] { return done == sizes.size(); }));
  for (std::size_t i = 0; i < sizes.size(); ++i) BOOST_TEST(same_bytes(back[i], sent[i]), "size " << sizes[i]);
  BOOST_TEST(gpu->plan_counts().staged == 2 * sizes.size());
}

// A forced registration the driver refuses (the range overlaps one registered already) is staged, and
// reported as staged: on_plan and plan_counts() always agree.
BOOST_AUTO_TEST_CASE(a_forced_registration_that_fails_is_reported_as_the_staged_plan_it_became) {
  constexpr std::size_t half = big / 2;  // 1 MiB of uint32
  const auto values = random_vector<std::uint32_t>(3 * half, 840);
  auto destination = gpu->allocate<std::uint32_t>(big);
  const transfer_options forced{transfer_plan::registered};
  std::map<transfer_plan, std::size_t> reported;
  for (int round = 0; round < 6; ++round) {
    // [0, 2 MiB) then [1 MiB, 3 MiB), alternately: each overlaps the other's registration, and the cache
    // has room for both, so nothing is dropped to make room.
    const std::span<const std::uint32_t> part(values.data() + (round % 2) * half, big);
    BOOST_TEST(gpu->poke(part, destination.get(), forced, asio::use_future).get() == big * 4);
    BOOST_TEST(same_bytes(peek_list_array(big, destination.get()), std::vector(part.begin(), part.end())));
    for (transfer_plan plan : plans()) ++reported[plan];
  }
  const plan_counts_type counted = gpu->plan_counts();
  BOOST_TEST(reported[transfer_plan::registered] == counted.registered);
  BOOST_TEST(reported[transfer_plan::staged] == counted.staged);
  BOOST_TEST(reported[transfer_plan::registered] + reported[transfer_plan::staged] == 6u);
  BOOST_TEST(counted.registered >= 1u);  // the first was registered
  if (ferry::testing::on_sim()) BOOST_TEST(counted.staged >= 1u);  // the sim refuses overlapping ranges, as CUDA does
  gpu->forget_host_memory(std::span(values));
}

BOOST_AUTO_TEST_SUITE_END()
