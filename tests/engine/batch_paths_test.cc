// How batches of small copies move: one cuMemcpyBatchAsync (the copy engine) or one launch of the
// gather/scatter kernel, chosen by engine_options::batching and per call by transfer_options::batching.
// Every path moves every byte, in every direction, from allocated and registered host memory; a launch
// the driver refuses falls back to the copy engine; a copy cancelled before its batch is launched never
// moves; a batch path that cannot apply is refused naming it.
#include "ferry/engine.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
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
using ferry::testing::outcome;
using ferry::testing::random_vector;
using ferry::testing::record;
using ferry::testing::same_bytes;

namespace {

constexpr std::size_t copies = 96;
constexpr std::size_t words = 1000;  // 4000 bytes: blocks that are not all 16-byte aligned alike

struct batch_fixture : ferry::testing::device_fixture {
  batch_fixture() {
    // Wide enough that back-to-back submissions count as concurrent even under a sanitizer's slowdown.
    options.batch_window = std::chrono::milliseconds(10);
    options.batch_most_copies = 32;
    options.on_failure = failures.recorder();
  }
  ~batch_fixture() { gpu.reset(); }

  engine& start(batch_path path, std::size_t kernel_min_copies = 8) {
    options.batching = path;
    options.batch_kernel_min_copies = kernel_min_copies;
    gpu = std::make_unique<engine>(io.get_executor(), options);
    return *gpu;
  }

  // Starts `copies` copies at once (start_copy(i, handler) starts the i-th), so that they meet in
  // batches, and runs the io_context until each has moved its bytes.
  template <class Start>
  void run_together(Start start_copy) {
    ferry::testing::run_together(io, copies, words * 4, start_copy);
  }

  // Pokes `source` (page-locked) to the device, copies it on the device, peeks it back into `back`
  // (page-locked), all as concurrent 4000-byte copies, and checks every byte at each step.
  void round_trip(std::uint32_t* source, std::uint32_t* back, std::uint64_t seed, transfer_options per_call = {}) {
    const auto values = random_vector<std::uint32_t>(copies * words, seed);
    std::copy(values.begin(), values.end(), source);
    std::fill(back, back + copies * words, 0xA5A5A5A5u);
    auto there = gpu->allocate<std::uint32_t>(copies * words);
    auto copied = gpu->allocate<std::uint32_t>(copies * words);
    memset(there.get(), copies * words, std::uint32_t{0x5A5A5A5Au});
    memset(copied.get(), copies * words, std::uint32_t{0x5A5A5A5Au});
    run_together([&](std::size_t i, auto handler) {
      gpu->poke(pinned_span(host_ptr<const std::uint32_t>(source + i * words), words), there.get() + i * words, per_call,
                handler);
    });
    BOOST_TEST(same_bytes(peek_list_array(copies * words, there.get()), values));
    run_together([&](std::size_t i, auto handler) {
      gpu->copy(device_ptr<const std::uint32_t>(there.get() + i * words), copied.get() + i * words, words, per_call,
                handler);
    });
    BOOST_TEST(same_bytes(peek_list_array(copies * words, copied.get()), values));
    run_together([&](std::size_t i, auto handler) {
      gpu->peek(copied.get() + i * words, pinned_span(host_ptr<std::uint32_t>(back + i * words), words), per_call,
                handler);
    });
    BOOST_TEST(std::equal(values.begin(), values.end(), back));
  }

  std::vector<std::string> failures_seen() const { return failures.seen(); }

  ferry::testing::failure_log failures;  // before the engine, which reports to it
  asio::io_context io;
  engine_options options;
  std::unique_ptr<engine> gpu;
};

pinned_buffer<std::uint32_t> pinned_words() { return pinned_buffer<std::uint32_t>::allocate(copies * words); }

}  // namespace

BOOST_FIXTURE_TEST_SUITE(batch_paths, batch_fixture)

BOOST_AUTO_TEST_CASE(batches_of_many_copies_take_the_kernel_and_move_every_byte_in_every_direction) {
  start(batch_path::automatic, 4);
  pinned_buffer<std::uint32_t> source = pinned_words();
  pinned_buffer<std::uint32_t> back = pinned_words();
  round_trip(source.data(), back.data(), 1101);
  const plan_counts counted = gpu->plan_counts();
  BOOST_TEST(counted.batched > copies);
  BOOST_TEST(counted.kernel_batches >= 3u);  // a batch or more in each direction
  BOOST_TEST(failures_seen().empty());
}

// Registered memory reaches the kernel at its host address only where the device says it can
// (CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM): the engine checked, so the bytes must arrive.
BOOST_AUTO_TEST_CASE(the_kernel_reads_and_writes_registered_host_memory) {
  start(batch_path::kernel);
  std::vector<std::uint32_t> source_memory(copies * words);
  std::vector<std::uint32_t> back_memory(copies * words);
  host_registration<std::uint32_t> source = host_registration<std::uint32_t>::register_range(std::span(source_memory));
  host_registration<std::uint32_t> back = host_registration<std::uint32_t>::register_range(std::span(back_memory));
  round_trip(source_memory.data(), back_memory.data(), 1102);
  BOOST_TEST(gpu->plan_counts().kernel_batches >= 3u);
  BOOST_TEST(gpu->plan_counts().copy_engine_batches == 0u);
}

BOOST_AUTO_TEST_CASE(an_engine_that_batches_by_copy_engine_never_launches_the_kernel) {
  start(batch_path::copy_engine);
  pinned_buffer<std::uint32_t> source = pinned_words();
  pinned_buffer<std::uint32_t> back = pinned_words();
  round_trip(source.data(), back.data(), 1103);
  BOOST_TEST(gpu->plan_counts().kernel_batches == 0u);
  BOOST_TEST(gpu->plan_counts().copy_engine_batches >= 3u);
}

BOOST_AUTO_TEST_CASE(small_automatic_batches_take_the_copy_engine) {
  start(batch_path::automatic, copies + 1);  // no batch is ever that large
  pinned_buffer<std::uint32_t> source = pinned_words();
  pinned_buffer<std::uint32_t> back = pinned_words();
  round_trip(source.data(), back.data(), 1104);
  BOOST_TEST(gpu->plan_counts().kernel_batches == 0u);
  BOOST_TEST(gpu->plan_counts().copy_engine_batches >= 3u);
}

// Copies of 4000 bytes average more than a mean of 2 KiB: automatic batches take the copy engine, however
// many copies they hold; a mean of 4000 bytes lets them take the kernel.
BOOST_AUTO_TEST_CASE(automatic_batches_of_copies_larger_than_the_engines_mean_take_the_copy_engine) {
  options.batch_kernel_max_mean_bytes = 2048;
  start(batch_path::automatic, 4);
  pinned_buffer<std::uint32_t> source = pinned_words();
  pinned_buffer<std::uint32_t> back = pinned_words();
  round_trip(source.data(), back.data(), 1106);
  BOOST_TEST(gpu->plan_counts().kernel_batches == 0u);
  BOOST_TEST(gpu->plan_counts().copy_engine_batches >= 3u);
  options.batch_kernel_max_mean_bytes = words * 4;
  start(batch_path::automatic, 4);
  round_trip(source.data(), back.data(), 1107);
  BOOST_TEST(gpu->plan_counts().kernel_batches >= 3u);
}

BOOST_AUTO_TEST_CASE(a_batch_path_chosen_per_call_overrides_the_engines) {
  start(batch_path::copy_engine);
  pinned_buffer<std::uint32_t> source = pinned_words();
  pinned_buffer<std::uint32_t> back = pinned_words();
  round_trip(source.data(), back.data(), 1105, batch_path::kernel);
  BOOST_TEST(gpu->plan_counts().kernel_batches >= 3u);
  BOOST_TEST(gpu->plan_counts().copy_engine_batches == 0u);
}

// A launch refused for good (the kernels cannot be loaded, say) sends the batch through the copy engine,
// says so to on_failure, and the kernel is not tried again.
BOOST_AUTO_TEST_CASE(a_kernel_launch_the_driver_refuses_sends_the_batch_through_the_copy_engine,
                     *ferry::testing::only_on_sim()) {
  start(batch_path::kernel);
  sim::fail_call("cuLaunchKernel", 1, CUDA_ERROR_NO_BINARY_FOR_GPU);
  pinned_buffer<std::uint32_t> source = pinned_words();
  pinned_buffer<std::uint32_t> back = pinned_words();
  round_trip(source.data(), back.data(), 1106);
  BOOST_TEST(gpu->plan_counts().kernel_batches == 0u);
  BOOST_TEST(gpu->plan_counts().copy_engine_batches >= 3u);
  const std::vector<std::string> seen = failures_seen();
  BOOST_TEST_REQUIRE(seen.size() == 1u);
  BOOST_TEST(seen[0].find("ferry_copy_blocks") != std::string::npos);
  BOOST_TEST(seen[0].find("CUDA_ERROR_NO_BINARY_FOR_GPU") != std::string::npos);
  BOOST_TEST(seen[0].find("submitted through the copy engine") != std::string::npos);
}

// A launch that fails because the context failed fails every copy of its batch with that status: none
// is left waiting, none reports bytes it did not move.
BOOST_AUTO_TEST_CASE(a_batch_whose_launch_finds_the_context_failed_fails_each_copy, *ferry::testing::only_on_sim()) {
  start(batch_path::kernel);
  pinned_buffer<std::uint32_t> source = pinned_words();
  auto there = gpu->allocate<std::uint32_t>(copies * words);
  sim::fail_call("cuLaunchKernel", 1, CUDA_ERROR_ILLEGAL_ADDRESS);
  std::vector<outcome> results(copies);
  for (std::size_t i = 0; i < copies; ++i) {
    gpu->poke(pinned_span(host_ptr<const std::uint32_t>(source.get() + i * words), words), there.get() + i * words,
              record(results[i]));
  }
  BOOST_TEST(ferry::testing::run_until(io, [&] {
    return std::all_of(results.begin(), results.end(), [](const outcome& r) { return r.calls == 1; });
  }));
  std::size_t failed = 0;
  for (const outcome& r : results) {
    BOOST_TEST(r.calls == 1);
    if (r.error) {
      ++failed;
      BOOST_TEST(r.error == std::error_code(CUDA_ERROR_ILLEGAL_ADDRESS, cuda_category()));
      BOOST_TEST(r.bytes == 0u);
    }
  }
  BOOST_TEST(failed >= 2u);  // the launched batch, and everything after the context failed
}

// Copies wait in the open batch for the window; cancelled there, they are never launched and their
// destination keeps its bytes, while the rest of their batch moves. A lead copy keeps a small copy in
// flight while the others arrive (batch_max_bytes is raised so that it counts as one), so that every
// copy from the third on meets a batch: on the sim the copy engines are slowed for it, on a GPU it moves
// 512 MiB (about 10 ms).
BOOST_AUTO_TEST_CASE(copies_cancelled_before_their_batch_is_launched_never_move) {
  const std::size_t lead_bytes = ferry::testing::on_sim() ? std::size_t{16} << 20 : std::size_t{512} << 20;
  options.batch_window = std::chrono::seconds(1);  // longer than the loop below, however slowly it runs
  options.batch_most_copies = 256;                  // never full here: the batch waits out its window
  options.batch_max_bytes = lead_bytes;
  start(batch_path::kernel);
  pinned_buffer<std::uint8_t> lead_source = pinned_buffer<std::uint8_t>::allocate(lead_bytes);
  auto lead_destination = gpu->allocate<std::uint8_t>(lead_bytes);
  pinned_buffer<std::uint32_t> source = pinned_words();
  const auto values = random_vector<std::uint32_t>(copies * words, 1107);
  std::copy(values.begin(), values.end(), source.data());
  auto there = gpu->allocate<std::uint32_t>(copies * words);
  memset(there.get(), copies * words, std::uint32_t{0x5A5A5A5Au});
  if (ferry::testing::on_sim()) sim::set_copy_bandwidth(0.25e9);  // 64 ms for the lead copy
  outcome lead;
  gpu->poke(lead_source.span(), lead_destination.get(), record(lead));
  std::vector<outcome> results(copies);
  std::vector<asio::cancellation_signal> signals(copies);
  for (std::size_t i = 0; i < copies; ++i) {
    gpu->poke(pinned_span(host_ptr<const std::uint32_t>(source.get() + i * words), words), there.get() + i * words,
              asio::bind_cancellation_slot(signals[i].slot(), record(results[i])));
  }
  // The lead and the first small copy found no batch to join and went alone; odd ones from the third on
  // are cancelled while their batch is still open (the window is far longer than this loop).
  for (std::size_t i = 3; i < copies; i += 2) signals[i].emit(asio::cancellation_type::terminal);
  BOOST_TEST(ferry::testing::run_until(io, [&] {
    return lead.calls == 1 && std::all_of(results.begin(), results.end(), [](const outcome& r) { return r.calls == 1; });
  }));
  if (ferry::testing::on_sim()) sim::set_copy_bandwidth(0);
  BOOST_TEST_REQUIRE(gpu->plan_counts().batched == copies - 1);  // every small copy but the first met a batch
  const std::vector<std::uint32_t> device_now = peek_list_array(copies * words, there.get());
  for (std::size_t i = 0; i < copies; ++i) {
    const bool cancelled = i >= 3 && i % 2 == 1;
    BOOST_TEST(results[i].calls == 1);
    BOOST_TEST((results[i].error == asio::error::operation_aborted) == cancelled, "copy " << i);
    const std::span<const std::uint32_t> block(device_now.data() + i * words, words);
    const bool moved = std::equal(block.begin(), block.end(), values.begin() + i * words);
    const bool untouched = std::all_of(block.begin(), block.end(), [](std::uint32_t w) { return w == 0x5A5A5A5Au; });
    BOOST_TEST((cancelled ? untouched : moved), "copy " << i);
  }
  BOOST_TEST(gpu->plan_counts().kernel_batches >= 1u);
}

BOOST_AUTO_TEST_CASE(a_batch_path_on_a_copy_that_is_never_batched_is_refused_naming_why) {
  start(batch_path::automatic);
  pinned_buffer<std::uint32_t> pinned = pinned_words();
  auto there = gpu->allocate<std::uint32_t>(words);
  std::vector<std::uint32_t> pageable(words);
  stream s = stream::create();
  transfer_options on_stream{s};
  on_stream.batching = batch_path::kernel;
  ferry::testing::expect_error<std::invalid_argument>(
      [&] { gpu->poke(pinned_span(host_ptr<const std::uint32_t>(pinned.get()), words), there.get(), on_stream,
                      asio::use_future); },
      {"engine::poke: transfer_options::batching is kernel; copies given a stream are never batched"});
  ferry::testing::expect_error<std::invalid_argument>(
      [&] { gpu->poke(std::span<const std::uint32_t>(pageable), there.get(), batch_path::copy_engine, asio::use_future); },
      {"engine::poke: transfer_options::batching is copy_engine; a side of this transfer is pageable host memory"});
  ferry::testing::expect_error<std::invalid_argument>(
      [&] { gpu->memset(there.get(), words, std::uint32_t{7}, batch_path::kernel, asio::use_future); },
      {"transfer_options::batching is kernel; only plain 1-D copies are batched, not this operation"});
  ferry::testing::expect_error<std::invalid_argument>(
      [&] { gpu->poke(pinned_span(host_ptr<const std::uint32_t>(pinned.get()), words), there.get(),
                      static_cast<batch_path>(7), asio::use_future); },
      {"engine::poke: transfer_options::batching 7 is not a batch_path"});
  BOOST_TEST(gpu->plan_counts().pinned == 0u);  // nothing was started
}

BOOST_AUTO_TEST_CASE(batching_options_that_cannot_work_are_refused_when_the_engine_is_built) {
  options.batching = static_cast<batch_path>(9);
  ferry::testing::expect_error<std::invalid_argument>([&] { engine refused(io.get_executor(), options); },
                                          {"engine: batching 9 is not a batch_path"});
  options.batching = batch_path::automatic;
  options.batch_most_copies = 0;
  ferry::testing::expect_error<std::invalid_argument>([&] { engine refused(io.get_executor(), options); },
                                          {"engine: batch_most_copies is 0 with a batch_window of 10000 us"});
  // Room for a full batch is made with the engine: a count past the limit is refused before anything is.
  options.batch_most_copies = std::size_t{1} << 40;
  ferry::testing::expect_error<std::invalid_argument>(
      [&] { engine refused(io.get_executor(), options); },
      {"engine: batch_most_copies is 1099511627776; a batch holds at most 65536 copies"});
  options.batch_most_copies = batch_most_copies_limit;
  engine accepted(io.get_executor(), options);
  BOOST_TEST(accepted.plan_counts().batched == 0u);
}

BOOST_AUTO_TEST_CASE(batch_paths_have_names) {
  BOOST_TEST(to_string(batch_path::automatic) == "automatic");
  BOOST_TEST(to_string(batch_path::copy_engine) == "copy_engine");
  BOOST_TEST(to_string(batch_path::kernel) == "kernel");
}

BOOST_AUTO_TEST_SUITE_END()
