// The submit path of a small page-locked transfer: after warm-up the engine allocates nothing per op
// beyond what the driver's own calls allocate (submission slots, bridge entries and the live-op
// bookkeeping are reused), completions of one stream arrive in submission order, a poke waited on from
// another thread through use_future completes with every byte, many threads submitting at once hand
// their work to the bridge without losing any, and a cancelled fast-path poke still completes with
// operation_aborted once the GPU is done with its memory; each with the completion marks written by the
// submitting thread and by the poller.
#include "ferry/engine.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <future>
#include <new>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "engine/async/completion_bridge.hpp"
#include "engine/driver/driver_table.hpp"
#include "engine/transfer/prepared_transfer.hpp"
#include "ferry/marshal.hpp"
#include "sim/control.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/io_helpers.hpp"
#include "tests/support/random_bytes.hpp"
#include "tests/support/stream_gate.hpp"

namespace {

// Heap allocations made by a thread while it counts (a global operator new hook). Not under
// AddressSanitizer, whose own operator new a library may still bind to: a block it allocated would come
// back here to free() (an alloc-dealloc mismatch), and the count would mean nothing there anyway.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool counting_allocations = false;
#else
constexpr bool counting_allocations = true;
#endif
thread_local bool counting = false;
thread_local std::size_t allocations = 0;

[[maybe_unused]] void* allocate(std::size_t bytes, std::size_t alignment) {
  if (counting) ++allocations;
  const std::size_t rounded = alignment == 0 ? bytes : (bytes + alignment - 1) / alignment * alignment;
  void* memory = alignment <= alignof(std::max_align_t) ? std::malloc(bytes == 0 ? 1 : bytes)
                                                        : std::aligned_alloc(alignment, rounded);
  if (memory == nullptr) throw std::bad_alloc();
  return memory;
}

}  // namespace

#if !defined(__SANITIZE_ADDRESS__)
void* operator new(std::size_t bytes) { return allocate(bytes, 0); }
void* operator new[](std::size_t bytes) { return allocate(bytes, 0); }
void* operator new(std::size_t bytes, std::align_val_t alignment) {
  return allocate(bytes, static_cast<std::size_t>(alignment));
}
void* operator new[](std::size_t bytes, std::align_val_t alignment) {
  return allocate(bytes, static_cast<std::size_t>(alignment));
}
void operator delete(void* memory) noexcept { std::free(memory); }
void operator delete[](void* memory) noexcept { std::free(memory); }
void operator delete(void* memory, std::size_t) noexcept { std::free(memory); }
void operator delete[](void* memory, std::size_t) noexcept { std::free(memory); }
void operator delete(void* memory, std::align_val_t) noexcept { std::free(memory); }
void operator delete[](void* memory, std::align_val_t) noexcept { std::free(memory); }
void operator delete(void* memory, std::size_t, std::align_val_t) noexcept { std::free(memory); }
void operator delete[](void* memory, std::size_t, std::align_val_t) noexcept { std::free(memory); }
#endif

namespace asio = boost::asio;
using namespace ferry;
using ferry::testing::random_vector;

namespace {

constexpr std::size_t piece = 4096;
constexpr int pieces = 256;

// The engine's cases run with each writer of the completion marks.
constexpr completion_mark both_marks[] = {completion_mark::by_submitter, completion_mark::by_poller};

engine_options with_marks(completion_mark marks) {
  engine_options options;
  options.marks = marks;
  return options;
}

// Heap allocations per call of `body(i)` on this thread, over `pieces` calls, each followed (uncounted) by `settle`.
template <class Body, class Settle>
double allocations_per_call(Body body, Settle settle) {
  std::size_t total = 0;
  for (int i = 0; i < pieces; ++i) {
    allocations = 0;
    counting = true;
    body(i);
    counting = false;
    total += allocations;
    settle();
  }
  return static_cast<double>(total) / pieces;
}

boost::test_tools::assertion_result allocations_are_counted(boost::unit_test::test_unit_id) {
  boost::test_tools::assertion_result result(counting_allocations);
  result.message() << "allocations are not counted under AddressSanitizer";
  return result;
}

struct raise_flag final : detail::completion {
  explicit raise_flag(std::atomic<bool>& done) : done(done) {}
  void complete(boost::system::error_code, std::size_t) override { done.store(true, std::memory_order_release); }
  std::atomic<bool>& done;
};

void spin_until(const std::atomic<bool>& flag) {
  while (!flag.load(std::memory_order_acquire)) std::this_thread::yield();
}

// 256 pinned 4 KiB pieces of seeded random bytes and their device destinations.
struct pieces_fixture : ferry::testing::device_fixture {
  pieces_fixture() {
    std::memcpy(source.data(), values.data(), values.size());
  }
  host_ptr<const std::uint8_t> source_piece(int i) const {
    return host_ptr<const std::uint8_t>(source.get() + i * piece);
  }
  device_ptr<std::uint8_t> destination_piece(int i) const { return destination.get() + i * piece; }
  // Before each run: no byte of the destination holds what a run will write.
  void scramble_destination() const {
    BOOST_REQUIRE(detail::driver().cuMemsetD8(destination.get().get(), 0xA5, piece * pieces) == CUDA_SUCCESS);
  }
  bool every_byte_arrived() const {
    return peek_list_array(piece * pieces, device_ptr<const std::uint8_t>(destination.get())) == values;
  }
  // Heap allocations per poke the engine core makes on the calling thread, after a round that warms its
  // slots and bridge up: all pokes at once on `stream`, or each waited for before the next.
  double engine_allocations_per_poke(detail::engine_core& core, std::optional<CUstream> stream, bool one_at_a_time) {
    std::vector<std::atomic<bool>> finished(pieces);
    double engine = 0;
    for (int round = 0; round < 2; ++round) {
      scramble_destination();
      std::vector<std::shared_ptr<detail::operation>> ops;
      for (int i = 0; i < pieces; ++i) {
        finished[i] = false;
        ops.push_back(std::make_shared<detail::operation>(std::make_unique<raise_flag>(finished[i])));
      }
      int last = 0;
      engine = allocations_per_call(
          [&](int i) {
            last = i;
            core.start(std::move(ops[i]),
                       core.prepare_copy("engine::poke", piece, 1, detail::pinned_side("source", source_piece(i).get()),
                                         detail::device_side("destination", destination_piece(i).get())),
                       stream);
          },
          [&] {
            if (one_at_a_time) spin_until(finished[last]);
          });
      for (auto& done : finished) spin_until(done);
    }
    return engine;
  }
  // Heap allocations per poke of the raw calls a fast-path poke makes: the copy and its completion mark
  // (the poll policy's flag write).
  double raw_allocations_per_poke() {
    const auto& driver = detail::driver();
    auto flag = pinned_buffer<std::uint32_t>::allocate(1, alloc_flags::device_mapped | alloc_flags::portable);
    const CUdeviceptr device_flag = get_device_ptr(alloc_flags::none, flag.get()).get();
    return allocations_per_call(
        [&](int i) {
          driver.cuMemcpyHtoDAsync(destination_piece(i).get(), source_piece(i).get(), piece, s.get());
          driver.cuStreamWriteValue32(s.get(), device_flag, static_cast<std::uint32_t>(i), 0);
        },
        [&] { s.synchronize(); });
  }

  std::vector<std::uint8_t> values = random_vector<std::uint8_t>(piece * pieces, 7301);
  pinned_buffer<std::uint8_t> source = pinned_buffer<std::uint8_t>::allocate(piece * pieces);
  device_buffer<std::uint8_t> destination = device_buffer<std::uint8_t>::allocate(piece * pieces);
  stream s = stream::create();
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(submit_path, pieces_fixture)

BOOST_AUTO_TEST_CASE(the_engine_core_allocates_nothing_per_small_pinned_poke_beyond_the_drivers_own_calls,
                     *boost::unit_test::precondition(allocations_are_counted)) {
  const double raw = raw_allocations_per_poke();
  detail::engine_core core{engine_options{}};
  const double engine = engine_allocations_per_poke(core, s.get(), false);
  BOOST_TEST_MESSAGE("heap allocations per 4 KiB pinned poke: engine core " << engine << ", raw calls " << raw);
  // The driver's own calls may allocate now and then (the sim's queues grow); the engine adds nothing
  // per op: fewer than one allocation in 50 ops beyond them.
  BOOST_TEST(engine - raw < 0.02);
  BOOST_TEST(every_byte_arrived());
}

// Given no stream, a lone small copy goes straight to one of the engine's streams, counted among the
// small copies in flight (the planner batches a copy only while another is in flight): the count is
// taken and given back without an allocation too.
BOOST_AUTO_TEST_CASE(a_lone_small_pinned_poke_given_no_stream_allocates_nothing_either,
                     *boost::unit_test::precondition(allocations_are_counted)) {
  const double raw = raw_allocations_per_poke();
  detail::engine_core core{engine_options{}};
  const double engine = engine_allocations_per_poke(core, std::nullopt, true);
  BOOST_TEST_MESSAGE("heap allocations per lone 4 KiB pinned poke given no stream: engine core "
                     << engine << ", raw calls " << raw);
  BOOST_TEST(engine - raw < 0.02);
  BOOST_TEST(core.counts().batched == 0u);  // each went alone
  BOOST_TEST(every_byte_arrived());
}

// Given no stream while others are in flight, small copies join the batcher's open batch: neither the
// transfer's state (a reused block) nor the batch (room for a full one, kept) costs the offering thread an
// allocation per copy. The thread that answers a batch frees what it holds, and what the offering thread
// allocated would go back under that thread's allocator lock, which it then waits for.
BOOST_AUTO_TEST_CASE(small_pinned_pokes_joining_a_batch_allocate_nothing_per_copy,
                     *boost::unit_test::precondition(allocations_are_counted)) {
  // A window that every copy arrives within, however slowly this build starts them (a sanitizer's):
  // all but the first copies of a round join one batch.
  engine_options options;
  options.batch_window = std::chrono::milliseconds(50);
  detail::engine_core core{options};
  const ferry::testing::paced_sim_copies paced(piece);  // copies stay in flight while the next ones start
  const double engine = engine_allocations_per_poke(core, std::nullopt, false);
  BOOST_TEST_MESSAGE("heap allocations per batched 4 KiB pinned poke: engine core " << engine);
  BOOST_TEST(core.counts().batched > 0u);
  // What is left is not per copy: the two copies of a round that went alone before the batch opened took
  // the single-op path. An allocation per copy would read 1 or more.
  BOOST_TEST(engine < 0.1);
  BOOST_TEST(every_byte_arrived());
}

// The argument checks find ferry's own allocations (a pinned_buffer, a device_buffer) in ferry's record of
// them, without a pointer query to the driver per side per op.
BOOST_AUTO_TEST_CASE(pokes_of_ferrys_own_allocations_ask_the_driver_nothing_about_their_pointers,
                     *ferry::testing::only_on_sim()) {
  scramble_destination();
  asio::io_context io;
  engine gpu{io.get_executor()};
  const auto queries = [] {
    const auto counts = sim::call_counts();
    return counts.at("cuPointerGetAttribute") + counts.at("cuPointerGetAttributes") + counts.at("cuMemGetAddressRange");
  };
  // A first poke, after which nothing is left to check once: ferry's record of its ranges is checked
  // against the driver after an engine (an earlier case's) released its context.
  BOOST_TEST(gpu.poke(pinned_span(source_piece(0), piece), destination_piece(0), s, asio::use_future).get() == piece);
  const std::size_t before = queries();
  std::size_t done = 0;
  for (int i = 0; i < pieces; ++i) {
    gpu.poke(pinned_span(source_piece(i), piece), destination_piece(i), s,
             [&done](boost::system::error_code error, std::size_t bytes) {
               BOOST_TEST(!error);
               BOOST_TEST(bytes == piece);
               ++done;
             });
  }
  BOOST_TEST(ferry::testing::run_until(io, [&] { return done == pieces; }));
  BOOST_TEST(queries() - before == 0u);
  BOOST_TEST(every_byte_arrived());
}

// A small pageable poke and peek (through the engine's small staging slots) ask the driver about the
// pageable side once, in a call that does not fail for memory it does not know. Each op used to make two
// that failed (cuPointerGetAttribute, cuMemGetAddressRange): on the H200, most of what a small pageable
// transfer cost beyond a page-locked one.
BOOST_AUTO_TEST_CASE(small_pageable_transfers_ask_the_driver_nothing_that_fails_about_their_pointers,
                     *ferry::testing::only_on_sim()) {
  scramble_destination();
  asio::io_context io;
  engine gpu{io.get_executor()};
  std::vector<std::uint8_t> back(piece);
  const auto count = [](const char* entry) { return sim::call_counts().at(entry); };
  // The first small transfer allocates the slots.
  BOOST_TEST(gpu.poke(std::span(values).first(piece), destination_piece(0), s, asio::use_future).get() == piece);
  const std::size_t singles = count("cuPointerGetAttribute"), ranges = count("cuMemGetAddressRange"),
                    attributes = count("cuPointerGetAttributes");
  for (int i = 0; i < pieces; ++i) {
    const std::span<const std::uint8_t> from = std::span(values).subspan(i * piece, piece);
    BOOST_TEST(gpu.poke(from, destination_piece(i), s, asio::use_future).get() == piece);
    BOOST_TEST(gpu.peek(destination_piece(i), std::span(back), s, asio::use_future).get() == piece);
    BOOST_TEST(std::equal(back.begin(), back.end(), from.begin()), "piece " << i);
  }
  BOOST_TEST(count("cuPointerGetAttribute") - singles == 0u);
  BOOST_TEST(count("cuMemGetAddressRange") - ranges == 0u);
  // One question per op, asked by the checks: is the pageable side device memory, and does the driver know
  // it as page-locked (the planner reads the answer the checks kept).
  BOOST_TEST(count("cuPointerGetAttributes") - attributes == 2u * pieces);
  BOOST_TEST(gpu.plan_counts().staged == 2u * pieces + 1);
  BOOST_TEST(every_byte_arrived());
}

// The unit a small copy holds in the engine's count of copies in flight: one per holder, a copy of a
// holder taking a unit of its own, a move handing the unit over, each given back exactly once.
BOOST_AUTO_TEST_CASE(an_in_flight_count_holds_one_unit_per_holder) {
  std::atomic<std::size_t> count{0};
  {
    detail::in_flight_count first(count);
    BOOST_TEST(count.load() == 1u);
    {
      detail::in_flight_count copied = first;
      BOOST_TEST(count.load() == 2u);
      detail::in_flight_count moved = std::move(copied);
      BOOST_TEST(count.load() == 2u);
      moved = first;  // gives its own unit back, takes another
      BOOST_TEST(count.load() == 2u);
      detail::in_flight_count empty;
      moved = std::move(empty);
      BOOST_TEST(count.load() == 1u);
    }
    BOOST_TEST(count.load() == 1u);
    first.reset();
    BOOST_TEST(count.load() == 0u);
    first.reset();  // given back once only
  }
  BOOST_TEST(count.load() == 0u);
}

BOOST_AUTO_TEST_CASE(completions_of_one_stream_arrive_in_submission_order_with_every_byte) {
  for (completion_mark marks : both_marks) {
    scramble_destination();
    asio::io_context io;
    engine gpu{io.get_executor(), with_marks(marks)};
    std::vector<int> order;
    for (int i = 0; i < pieces; ++i) {
      gpu.poke(pinned_span(source_piece(i), piece), destination_piece(i), s,
               [&order, i](boost::system::error_code error, std::size_t bytes) {
                 BOOST_TEST(!error);
                 BOOST_TEST(bytes == piece);
                 order.push_back(i);
               });
    }
    BOOST_TEST(ferry::testing::run_until(io, [&] { return order.size() == pieces; }));
    std::vector<int> expected(pieces);
    for (int i = 0; i < pieces; ++i) expected[i] = i;
    BOOST_TEST(order == expected);
    BOOST_TEST(every_byte_arrived());
  }
}

BOOST_AUTO_TEST_CASE(one_at_a_time_pokes_waited_on_from_another_thread_through_use_future_complete) {
  for (completion_mark marks : both_marks) {
    scramble_destination();
    asio::io_context io;
    auto guard = asio::make_work_guard(io);
    std::thread io_thread([&] { io.run(); });
    {
      engine gpu{io.get_executor(), with_marks(marks)};
      for (int i = 0; i < pieces; ++i) {
        const transfer_options on = i % 2 ? transfer_options{s} : transfer_options{};
        const std::size_t moved =
            gpu.poke(pinned_span(source_piece(i), piece), destination_piece(i), on, asio::use_future).get();
        BOOST_TEST(moved == piece);
      }
    }
    guard.reset();
    io_thread.join();
    BOOST_TEST(every_byte_arrived());
  }
}

BOOST_AUTO_TEST_CASE(many_threads_submitting_at_once_lose_no_completion) {
  for (completion_mark marks : both_marks) {
    scramble_destination();
    asio::io_context io;
    engine gpu{io.get_executor(), with_marks(marks)};
    constexpr int threads = 4;
    std::vector<stream> streams;
    for (int t = 0; t < threads; ++t) streams.push_back(stream::create());
    std::atomic<int> completed{0};
    std::atomic<int> failed{0};
    std::vector<std::thread> submitters;
    for (int t = 0; t < threads; ++t) {
      submitters.emplace_back([&, t] {
        for (int i = t; i < pieces; i += threads) {
          // Half on the thread's own stream, half on pool streams.
          auto done = [&](boost::system::error_code error, std::size_t bytes) {
            if (error || bytes != piece) failed.fetch_add(1);
            completed.fetch_add(1);
          };
          if (i % 2) {
            gpu.poke(pinned_span(source_piece(i), piece), destination_piece(i), streams[t], done);
          } else {
            gpu.poke(pinned_span(source_piece(i), piece), destination_piece(i), done);
          }
        }
      });
    }
    for (std::thread& submitter : submitters) submitter.join();
    BOOST_TEST(ferry::testing::run_until(io, [&] { return completed.load() == pieces; }));
    BOOST_TEST(failed.load() == 0);
    BOOST_TEST(every_byte_arrived());
  }
}

BOOST_AUTO_TEST_CASE(a_cancelled_fast_path_poke_completes_aborted_only_after_its_bytes_arrived) {
  for (completion_mark marks : both_marks) {
    scramble_destination();
    asio::io_context io;
    engine gpu{io.get_executor(), with_marks(marks)};
    ferry::testing::outcome seen;
    asio::cancellation_signal cancel;
    {
      ferry::testing::stream_gate gate(s);
      gpu.poke(pinned_span(source_piece(0), piece), destination_piece(0), s,
               asio::bind_cancellation_slot(cancel.slot(), ferry::testing::record(seen)));
      cancel.emit(asio::cancellation_type::terminal);
      ferry::testing::run_for_a_while(io);
      BOOST_TEST(seen.calls == 0);  // the GPU has not moved the bytes yet: the op waits for it
    }
    BOOST_TEST(ferry::testing::run_until(io, [&] { return seen.calls == 1; }));
    BOOST_TEST(seen.error == asio::error::operation_aborted);
    const auto arrived = peek_list_array(piece, device_ptr<const std::uint8_t>(destination.get()));
    BOOST_TEST(std::memcmp(arrived.data(), values.data(), piece) == 0);
  }
}

BOOST_AUTO_TEST_CASE(marks_that_are_no_completion_mark_are_refused_when_the_engine_is_built) {
  asio::io_context io;
  ferry::testing::expect_error<std::invalid_argument>(
      [&] { engine refused(io.get_executor(), with_marks(static_cast<completion_mark>(5))); },
      {"engine: marks 5 is not a completion_mark"});
}

BOOST_AUTO_TEST_SUITE_END()
