// Injected faults (sim): a copy that fails, an out-of-memory, a sticky error with 100 ops pending.
// Each op's error is its own, arrives as an error_code of ferry::cuda_category(), and nothing hangs.
#include "ferry/engine.hpp"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/system_executor.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <cstdio>
#include <future>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/marshal.hpp"
#include "sim/control.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/failure_log.hpp"
#include "tests/support/io_helpers.hpp"
#include "tests/support/random_bytes.hpp"
#include "tests/support/stream_gate.hpp"

namespace asio = boost::asio;
using namespace ferry;
using ferry::testing::random_vector;

namespace {

// The error an op completes with, handed over as a value. (A failed use_future op would carry a
// system_error in an exception_ptr shared between threads, whose reference count lives in the
// uninstrumented libstdc++: ThreadSanitizer reports a race it cannot see is ordered.)
template <class Start>
boost::system::error_code error_of(Start start) {
  auto promise = std::make_shared<std::promise<boost::system::error_code>>();
  auto future = promise->get_future();
  start(asio::bind_executor(asio::system_executor(),
                            [promise](boost::system::error_code error, auto&&...) { promise->set_value(error); }));
  return future.get();
}

// An address as the engine's messages print it.
std::string address_text(const void* address) {
  char text[2 + 2 * sizeof(address) + 1];
  const auto value = static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(address));
  std::snprintf(text, sizeof text, "0x%llx", value);
  return text;
}

struct engine_fixture : ferry::testing::device_fixture {
  engine_fixture() {
    options.on_failure = failures.recorder();
    options.staging_chunk_bytes = 64 << 10;
    options.staging_chunks = 2;
    gpu = std::make_unique<engine>(io.get_executor(), options);
  }
  ~engine_fixture() { gpu.reset(); }
  ferry::testing::failure_log failures;  // before the engine, which reports to it
  asio::io_context io;
  engine_options options;
  std::unique_ptr<engine> gpu;
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(injected_faults, engine_fixture, *ferry::testing::only_on_sim())

BOOST_AUTO_TEST_CASE(a_failed_enqueue_completes_that_op_with_its_status_and_the_next_op_succeeds) {
  const std::size_t count = 4096;
  auto values = random_vector<std::uint32_t>(count, 501);
  pinned_buffer<std::uint32_t> pinned = pinned_buffer<std::uint32_t>::allocate(count);
  std::copy(values.begin(), values.end(), pinned.data());
  auto destination = gpu->allocate<std::uint32_t>(count);
  sim::fail_call("cuMemcpyHtoDAsync", 1, CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(error_of([&](auto done) {
               gpu->poke(pinned_span(host_ptr<const std::uint32_t>(pinned.get()), count), destination.get(), done);
             }) == make_error_code(CUDA_ERROR_INVALID_VALUE));
  const std::vector<std::string> reported = failures.seen();
  BOOST_REQUIRE(reported.size() == 1u);
  BOOST_TEST(reported[0].find("engine::poke: 16384 bytes") != std::string::npos, reported[0]);
  BOOST_TEST(reported[0].find("of device 0 (enqueue): CUDA_ERROR_INVALID_VALUE") != std::string::npos, reported[0]);
  BOOST_TEST(gpu->poke(pinned_span(host_ptr<const std::uint32_t>(pinned.get()), count), destination.get(), asio::use_future).get() ==
             count * 4);
  BOOST_TEST(peek_list_array(count, destination.get()) == values);
}

// A small pageable transfer staged through a slot (one slot here): a failed copy names the caller's
// memory, not the slot, leaves the peek's destination untouched, and gives the slot back for the next.
BOOST_AUTO_TEST_CASE(a_failed_copy_through_a_small_slot_names_the_callers_memory_and_frees_the_slot) {
  engine_options one_slot = options;
  one_slot.small_staging_slots = 1;
  std::vector<transfer_plan> seen;
  one_slot.on_plan = [&](std::string_view, transfer_plan plan, std::size_t) { seen.push_back(plan); };
  engine narrow{io.get_executor(), one_slot};
  const auto values = random_vector<std::uint8_t>(4096, 510);
  auto destination = narrow.allocate<std::uint8_t>(values.size());
  const std::span<const std::uint8_t> source(values);
  sim::fail_call("cuMemcpyHtoDAsync", 1, CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(error_of([&](auto done) { narrow.poke(source, destination.get(), done); }) ==
             make_error_code(CUDA_ERROR_INVALID_VALUE));
  const std::vector<std::string> reported = failures.seen();
  BOOST_REQUIRE(reported.size() == 1u);
  const std::string sides = "engine::poke: 4096 bytes [" + address_text(values.data()) + " -> " +
                            address_text(reinterpret_cast<const void*>(destination.get().get())) + ")";
  BOOST_TEST(reported[0].find(sides) != std::string::npos, reported[0]);
  BOOST_TEST(reported[0].find("(enqueue): CUDA_ERROR_INVALID_VALUE") != std::string::npos, reported[0]);
  BOOST_TEST(narrow.poke(source, destination.get(), asio::use_future).get() == values.size());
  BOOST_TEST(peek_list_array(values.size(), destination.get()) == values);

  std::vector<std::uint8_t> back(values.size());
  ferry::testing::poison_fill(std::span(back));
  const std::vector<std::uint8_t> poison = back;
  sim::fail_call("cuMemcpyDtoHAsync", 1, CUDA_ERROR_INVALID_VALUE);
  BOOST_TEST(error_of([&](auto done) { narrow.peek(destination.get(), std::span(back), done); }) ==
             make_error_code(CUDA_ERROR_INVALID_VALUE));
  BOOST_TEST(back == poison);
  BOOST_TEST(narrow.peek(destination.get(), std::span(back), asio::use_future).get() == values.size());
  BOOST_TEST(back == values);
  BOOST_TEST((seen == std::vector<transfer_plan>(4, transfer_plan::staged)));
}

// The small staging slots are allocated by the first small pageable transfer. When the driver refuses,
// the engine says so once, small pokes take the driver's staging and peeks the staging pool, every byte
// moves, and the allocation is not tried again per transfer.
BOOST_AUTO_TEST_CASE(small_slots_the_driver_cannot_allocate_are_reported_once_and_transfers_take_other_plans) {
  std::vector<transfer_plan> seen;
  engine_options reporting = options;
  reporting.on_plan = [&](std::string_view, transfer_plan plan, std::size_t) { seen.push_back(plan); };
  engine slotless{io.get_executor(), reporting};
  const auto values = random_vector<std::uint8_t>(4096, 511);
  auto destination = slotless.allocate<std::uint8_t>(values.size());
  const auto allocations_before = sim::call_counts().at("cuMemHostAlloc");
  sim::fail_call("cuMemHostAlloc", 1, CUDA_ERROR_OUT_OF_MEMORY);
  for (int round = 0; round < 2; ++round) {
    std::vector<std::uint8_t> back(values.size());
    ferry::testing::poison_fill(std::span(back));
    BOOST_TEST(slotless.poke(std::span(values), destination.get(), asio::use_future).get() == values.size());
    BOOST_TEST(slotless.peek(destination.get(), std::span(back), asio::use_future).get() == values.size());
    BOOST_TEST(back == values);
  }
  sim::reset_faults();
  const std::vector<std::string> reported = failures.seen();
  BOOST_REQUIRE(reported.size() == 1u);
  BOOST_TEST(reported[0] ==
                 "no page-locked memory for the small staging slots (64 of 65536 bytes: CUDA_ERROR_OUT_OF_MEMORY); "
                 "small pageable transfers take the driver's staging or the staging pool from now on",
             reported[0]);
  BOOST_TEST((seen == std::vector<transfer_plan>{transfer_plan::driver_staged, transfer_plan::staged,
                                                  transfer_plan::driver_staged, transfer_plan::staged}));
  // The refused allocation and the staging pool's one: the slots were not asked for again.
  BOOST_TEST(sim::call_counts().at("cuMemHostAlloc") - allocations_before == 2u);
}

BOOST_AUTO_TEST_CASE(out_of_memory_for_staging_completes_the_op_with_out_of_memory) {
  // Past driver_staged_max_bytes: staged.
  std::vector<std::uint32_t> values = random_vector<std::uint32_t>((2 << 20) / 4, 502);
  auto destination = gpu->allocate<std::uint32_t>(values.size());
  sim::out_of_memory_after(0);
  BOOST_TEST(error_of([&](auto done) { gpu->poke(std::span<const std::uint32_t>(values), destination.get(), done); }) ==
             make_error_code(CUDA_ERROR_OUT_OF_MEMORY));
  sim::reset_faults();
  BOOST_TEST(gpu->poke(std::span<const std::uint32_t>(values), destination.get(), asio::use_future).get() ==
             values.size() * 4);
  BOOST_TEST(peek_list_array(values.size(), destination.get()) == values);
}

BOOST_AUTO_TEST_CASE(a_sticky_error_reaches_all_pending_ops_and_later_submits_fail_fast) {
  const std::size_t count = 1024;
  auto destination = gpu->allocate<std::uint32_t>(count * 100);
  stream first = stream::create();
  stream second = stream::create();
  ferry::testing::stream_gate gate_first(first);
  ferry::testing::stream_gate gate_second(second);
  int completed = 0, sticky = 0;
  std::string others;  // what the ops that did not see the sticky error saw instead
  for (int i = 0; i < 100; ++i) {
    gpu->memset(destination.get() + i * count, count, std::uint32_t(i), i % 2 ? first : second, [&, i](auto error) {
      ++completed;
      if (error == make_error_code(CUDA_ERROR_ILLEGAL_ADDRESS)) {
        ++sticky;
      } else {
        others += " op " + std::to_string(i) + ": " + (error ? error.message() : "success") + ";";
      }
    });
  }
  sim::fail_stream(first.get(), CUDA_ERROR_ILLEGAL_ADDRESS);
  gate_first.open();
  // The failure poisons the context while the second stream's 50 ops are still held back (they may
  // already report it: after a sticky error every query in the context does).
  BOOST_TEST(ferry::testing::run_until(io, [&] { return completed >= 50; }, std::chrono::seconds(10)));
  gate_second.open();
  BOOST_TEST(ferry::testing::run_until(io, [&] { return completed == 100; }, std::chrono::seconds(10)));
  BOOST_TEST(sticky == 100, "ops without the sticky error:" << others);
  BOOST_TEST(gpu->sticky_error() == make_error_code(CUDA_ERROR_ILLEGAL_ADDRESS));
  bool later = false;
  gpu->memset(destination.get(), count, std::uint32_t{1}, [&](auto error) {
    BOOST_TEST(error == make_error_code(CUDA_ERROR_ILLEGAL_ADDRESS));
    later = true;
  });
  BOOST_TEST(ferry::testing::run_until(io, [&] { return later; }, std::chrono::seconds(5)));
  // A wait for "everything so far" reports the failure too, rather than success.
  bool waited = false;
  gpu->wait_all([&](auto error) {
    BOOST_TEST(error == make_error_code(CUDA_ERROR_ILLEGAL_ADDRESS));
    waited = true;
  });
  BOOST_TEST(ferry::testing::run_until(io, [&] { return waited; }, std::chrono::seconds(5)));
  gpu.reset();  // destroying the engine afterwards is clean
  sim::reset_faults();
}

BOOST_AUTO_TEST_SUITE_END()
