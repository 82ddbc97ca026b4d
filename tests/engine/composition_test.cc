// The engine's operations under Asio's own composition: parallel groups (variadic and ranged) with the
// cancellation they emit, outstanding work on the I/O executor while the handler is bound elsewhere,
// use_promise (which takes its executor from the initiation), and a Networking TS executor
// (io_context::strand); the awaitable operators and async_compose. Every transfer's bytes are checked.
#include "ferry/engine.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/experimental/promise.hpp>
#include <boost/asio/experimental/use_promise.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/io_context_strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <thread>
#include <type_traits>
#include <variant>
#include <vector>

#include "ferry/marshal.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/engine_fixture.hpp"
#include "tests/support/io_helpers.hpp"
#include "tests/support/random_bytes.hpp"

namespace asio = boost::asio;
namespace experimental = boost::asio::experimental;
using namespace ferry;
using ferry::testing::random_vector;
using ferry::testing::same_bytes;

namespace {

using engine_fixture = ferry::testing::engine_fixture<1 << 20, 3>;

// A staged poke large enough to take a while (several staging chunks).
constexpr std::size_t slow_count = (12 << 20) / 4 + 7;

// Runs `io` on `threads` threads until `done()` (or a minute passes).
void run_on_threads(asio::io_context& io, int threads, const std::function<bool()>& done) {
  std::vector<std::thread> runners;
  for (int i = 0; i < threads; ++i) runners.emplace_back([&] { ferry::testing::run_until(io, done); });
  for (std::thread& t : runners) t.join();
}

template <class T>
std::vector<T> read_back(device_ptr<T> source, std::size_t count) {
  std::vector<T> values(count);
  ferry::testing::poison_fill(std::span(values));
  peek_array(count, device_ptr<const T>(source), values.data());
  return values;
}

// A composed operation over two engine ops (a poke, then a peek of what it wrote), written with
// async_compose as an Asio user would: each engine op completes into the composed op's `self`.
template <class Token>
auto async_round_trip(engine& gpu, std::span<const std::uint32_t> in, device_ptr<std::uint32_t> device,
                      std::span<std::uint32_t> out, Token&& token) {
  return asio::async_compose<Token, void(boost::system::error_code)>(
      [&gpu, in, device, out, step = 0](auto& self, boost::system::error_code error = {}, std::size_t = 0) mutable {
        if (error) return self.complete(error);
        switch (step++) {
          case 0: return gpu.poke(in, device, std::move(self));
          case 1: return gpu.peek(device_ptr<const std::uint32_t>(device), out, std::move(self));
          default: return self.complete(error);
        }
      },
      token, gpu.get_executor());
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(asio_composition, engine_fixture)

// What each op of a group reported, written by the group's handler (one thread per group), read after
// every group has completed. Boost.Test's assertions are not thread-safe: they run on the test's thread.
struct group_record {
  std::vector<std::size_t> order;
  std::vector<boost::system::error_code> errors;
};

// Checks what the groups reported, then every byte: each group owns `parts` slices of `slice` bytes; an op
// that succeeded wrote its value; one that was aborted wrote its value or left the poison.
void check_groups(const std::vector<group_record>& records, const std::vector<std::uint8_t>& values,
                  const std::vector<std::uint8_t>& memory, std::size_t parts, std::size_t slice) {
  std::size_t succeeded = 0, wrong_bytes = 0, bad_reports = 0;
  for (std::size_t group = 0; group < records.size(); ++group) {
    const group_record& record = records[group];
    if (record.order.size() != parts || record.errors.size() != parts || record.errors[record.order[0]]) {
      ++bad_reports;  // the first op to complete must have succeeded
      continue;
    }
    for (std::size_t part = 0; part < parts; ++part) {
      const boost::system::error_code error = record.errors[part];
      if (error && error != asio::error::operation_aborted) ++bad_reports;
      if (!error) ++succeeded;
      const std::uint8_t value = values[group * parts + part];
      for (std::size_t i = 0; i < slice; ++i) {
        const std::uint8_t byte = memory[(group * parts + part) * slice + i];
        const bool written = byte == value;
        const bool untouched = error && byte == static_cast<std::uint8_t>(ferry::testing::poison);
        if (!written && !untouched) ++wrong_bytes;
      }
    }
  }
  BOOST_TEST(bad_reports == 0u);
  BOOST_TEST(wrong_bytes == 0u);
  BOOST_TEST(succeeded >= records.size());
}

// Each op's handler is the group's; the first to complete emits cancellation into the other's slot
// while that op may be completing on another io thread. ferry leaves the slot alone when it completes.
BOOST_AUTO_TEST_CASE(a_variadic_parallel_group_waiting_for_one_races_no_cancellation_slot) {
  constexpr std::size_t groups = 600, slice = 64;
  auto area = gpu.allocate<std::uint8_t>(groups * 2 * slice);
  const std::vector<std::uint8_t> poisoned(groups * 2 * slice, static_cast<std::uint8_t>(ferry::testing::poison));
  poke_array(poisoned.size(), poisoned.data(), area.get());
  const auto values = random_vector<std::uint8_t>(2 * groups, 71);
  std::vector<group_record> records(groups);
  std::atomic<std::size_t> calls{0};
  std::thread launcher([&] {
    for (std::size_t i = 0; i < groups; ++i) {
      experimental::make_parallel_group(gpu.memset(area.get() + 2 * i * slice, slice, values[2 * i], asio::deferred),
                                        gpu.memset(area.get() + (2 * i + 1) * slice, slice, values[2 * i + 1], asio::deferred))
          .async_wait(experimental::wait_for_one(),
                      [&, i](std::array<std::size_t, 2> order, boost::system::error_code first,
                             boost::system::error_code second) {
                        records[i] = {{order[0], order[1]}, {first, second}};
                        ++calls;
                      });
    }
  });
  run_on_threads(io, 4, [&] { return calls == groups; });
  launcher.join();
  BOOST_REQUIRE(calls.load() == groups);
  check_groups(records, values, read_back(area.get(), groups * 2 * slice), 2, slice);
}

// Boost 1.81 runs a ranged group's op handlers on system_executor threads: the race needs no
// multi-threaded io_context.
BOOST_AUTO_TEST_CASE(a_ranged_parallel_group_waiting_for_one_races_no_cancellation_slot) {
  constexpr std::size_t groups = 400, parts = 4, slice = 64;
  auto area = gpu.allocate<std::uint8_t>(groups * parts * slice);
  const std::vector<std::uint8_t> poisoned(groups * parts * slice, static_cast<std::uint8_t>(ferry::testing::poison));
  poke_array(poisoned.size(), poisoned.data(), area.get());
  const auto values = random_vector<std::uint8_t>(parts * groups, 73);
  std::vector<group_record> records(groups);
  std::atomic<std::size_t> calls{0};
  using memset_op = decltype(gpu.memset(area.get(), slice, std::uint8_t{}, asio::deferred));
  for (std::size_t i = 0; i < groups; ++i) {
    std::vector<memset_op> ops;
    for (std::size_t part = 0; part < parts; ++part) {
      ops.push_back(gpu.memset(area.get() + (i * parts + part) * slice, slice, values[i * parts + part], asio::deferred));
    }
    experimental::make_parallel_group(std::move(ops))
        .async_wait(experimental::wait_for_one(),
                    [&, i](std::vector<std::size_t> order, std::vector<boost::system::error_code> errors) {
                      records[i] = {std::move(order), std::move(errors)};
                      ++calls;
                    });
  }
  BOOST_REQUIRE(ferry::testing::run_until(io, [&] { return calls == groups; }));
  check_groups(records, values, read_back(area.get(), groups * parts * slice), parts, slice);
}

BOOST_AUTO_TEST_CASE(the_awaitable_operators_combine_engine_ops) {
  using namespace boost::asio::experimental::awaitable_operators;
  constexpr std::size_t count = 4099;
  const auto first = random_vector<std::uint32_t>(count, 80), second = random_vector<std::uint32_t>(count, 81);
  auto a = gpu.allocate<std::uint32_t>(count);
  auto b = gpu.allocate<std::uint32_t>(count);
  std::size_t both_moved = 0;
  int either_index = -1;
  bool finished = false;
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    // &&: both complete; their byte counts come back together.
    auto [moved_a, moved_b] = co_await (gpu.poke(std::span<const std::uint32_t>(first), a.get(), asio::use_awaitable) &&
                                        gpu.poke(std::span<const std::uint32_t>(second), b.get(), asio::use_awaitable));
    both_moved = moved_a + moved_b;
    // ||: the first to complete wins; the other is cancelled (it still completes, once, with its result).
    auto either = co_await (gpu.memset(a.get(), 16, std::uint32_t{first[0]}, asio::use_awaitable) ||
                            gpu.memset(b.get(), 16, std::uint32_t{second[0]}, asio::use_awaitable));
    either_index = static_cast<int>(either.index());
    finished = true;
  }, asio::detached);
  BOOST_REQUIRE(ferry::testing::run_until(io, [&] { return finished; }));
  BOOST_TEST(both_moved == 2 * count * 4);
  BOOST_TEST((either_index == 0 || either_index == 1));
  // Past the 16 elements the memsets may have touched, every byte is the poke's.
  const auto back_a = read_back(a.get(), count), back_b = read_back(b.get(), count);
  BOOST_TEST(same_bytes(std::vector(back_a.begin() + 16, back_a.end()), std::vector(first.begin() + 16, first.end())));
  BOOST_TEST(same_bytes(std::vector(back_b.begin() + 16, back_b.end()), std::vector(second.begin() + 16, second.end())));
}

BOOST_AUTO_TEST_CASE(async_compose_chains_engine_ops_into_one_operation) {
  constexpr std::size_t count = (1 << 20) / 4 + 5;  // pageable: staged over several chunks
  const auto values = random_vector<std::uint32_t>(count, 82);
  auto device = gpu.allocate<std::uint32_t>(count);
  std::vector<std::uint32_t> back(count);
  ferry::testing::poison_fill(std::span(back));
  int calls = 0;
  boost::system::error_code result;
  async_round_trip(gpu, values, device.get(), back, [&](boost::system::error_code error) {
    result = error;
    ++calls;
  });
  BOOST_REQUIRE(ferry::testing::run_until(io, [&] { return calls == 1; }));
  ferry::testing::run_for_a_while(io, std::chrono::milliseconds(20));
  BOOST_TEST(calls == 1);
  BOOST_TEST(!result);
  BOOST_TEST(same_bytes(back, values));
}

// Asio's "outstanding work" requirement: the I/O executor (the engine's) has work until the completion
// is handed to the handler's executor, wherever that is. io.run() therefore returns only once the
// handler waits there: here an io_context that is not run until then.
BOOST_AUTO_TEST_CASE(the_engine_io_context_keeps_running_until_the_handler_is_handed_to_another_io_context) {
  const auto values = random_vector<std::uint32_t>(slow_count, 75);
  auto destination = gpu.allocate<std::uint32_t>(slow_count);
  asio::io_context handler_io;
  std::atomic<bool> called{false};
  boost::system::error_code result;
  std::size_t moved = 0;
  gpu.poke(std::span<const std::uint32_t>(values), destination.get(),
           asio::bind_executor(handler_io, [&](boost::system::error_code error, std::size_t bytes) {
             result = error;
             moved = bytes;
             called = true;
           }));
  io.run();  // returns when no work is left on the engine's io_context
  BOOST_TEST(!called.load());
  // The handler was queued there before io.run() returned. (An engine that keeps the handler's
  // io_context awake, the default on machines with cores to spare, has also posted a keep-awake turn there.)
  BOOST_TEST(handler_io.poll() >= 1u);
  BOOST_TEST(called.load());
  BOOST_TEST(!result);
  BOOST_TEST(moved == slow_count * 4);
  BOOST_TEST(same_bytes(read_back(destination.get(), slow_count), values));
}

// ... and not until the handler has run: once it runs, its owner may tear down the engine's io_context
// (a handler that wakes a thread waiting to destroy it). Here the handler, on a thread pool, cannot
// finish before io.run() has returned.
BOOST_AUTO_TEST_CASE(the_engine_io_context_does_not_wait_for_a_handler_running_on_a_thread_pool) {
  const auto values = random_vector<std::uint32_t>(slow_count, 76);
  auto destination = gpu.allocate<std::uint32_t>(slow_count);
  asio::thread_pool pool(1);
  std::promise<void> run_returned;
  std::shared_future<void> io_done = run_returned.get_future().share();
  std::atomic<bool> called{false}, run_returned_first{false};
  boost::system::error_code result;
  gpu.poke(std::span<const std::uint32_t>(values), destination.get(),
           asio::bind_executor(pool, [&, io_done](boost::system::error_code error, std::size_t) {
             run_returned_first = io_done.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
             result = error;
             called = true;
           }));
  io.run();
  run_returned.set_value();
  pool.join();
  BOOST_TEST(called.load());
  BOOST_TEST(run_returned_first.load());
  BOOST_TEST(!result);
  BOOST_TEST(same_bytes(read_back(destination.get(), slow_count), values));
}

// use_future's handler runs on the system executor: handed there before io.run() returns, it sets the
// future on a system thread, so the future is ready then or moments later.
BOOST_AUTO_TEST_CASE(a_use_future_result_is_handed_over_before_the_engine_io_context_runs_out_of_work) {
  const auto values = random_vector<std::uint32_t>(slow_count, 77);
  auto destination = gpu.allocate<std::uint32_t>(slow_count);
  std::future<std::size_t> moved =
      gpu.poke(std::span<const std::uint32_t>(values), destination.get(), asio::use_future);
  io.run();
  BOOST_TEST((moved.wait_for(std::chrono::seconds(10)) == std::future_status::ready));
  BOOST_TEST(moved.get() == slow_count * 4);
  BOOST_TEST(same_bytes(read_back(destination.get(), slow_count), values));
}

// A deferred op is a value: launched as an lvalue it copies what it was given (the checked transfer
// among it), so it can be launched again; each launch is a transfer of its own, and a small pinned poke
// holds a unit of the engine's count of small copies in flight while it moves.
BOOST_AUTO_TEST_CASE(a_deferred_op_launched_as_an_lvalue_moves_its_bytes_each_time) {
  constexpr std::size_t count = 1024;
  const auto values = random_vector<std::uint32_t>(count, 79);
  auto source = pinned_buffer<std::uint32_t>::allocate(count);
  std::copy(values.begin(), values.end(), source.data());
  auto destination = gpu.allocate<std::uint32_t>(count);
  auto op = gpu.poke(pinned_span(host_ptr<const std::uint32_t>(source.get()), count), destination.get(),
                     asio::deferred);
  for (int launch = 0; launch < 3; ++launch) {
    std::vector<std::uint32_t> poison(count);
    ferry::testing::poison_fill(std::span(poison));
    poke_array(count, poison.data(), destination.get());
    std::size_t moved = 0;
    op([&](boost::system::error_code error, std::size_t bytes) {
      BOOST_TEST(!error);
      moved = bytes;
    });
    BOOST_TEST(ferry::testing::run_until(io, [&] { return moved != 0; }));
    BOOST_TEST(moved == count * 4);
    BOOST_TEST(same_bytes(read_back(destination.get(), count), values));
  }
  // Every launch gave its unit of the count back. Two launched back to back are then a lone copy and one
  // that finds at most that copy in flight: neither is coalesced. (With units left over, the first would
  // be offered to the batcher too, and the second, close behind, would join it.)
  std::future<std::size_t> first = op(asio::use_future);
  std::future<std::size_t> second = std::move(op)(asio::use_future);
  BOOST_TEST(first.get() == count * 4);
  BOOST_TEST(second.get() == count * 4);
  BOOST_TEST(gpu.plan_counts().batched == 0u);
  BOOST_TEST(same_bytes(read_back(destination.get(), count), values));
}

// use_promise binds the promise to the initiation's associated executor: the engine's, as for Asio's
// own I/O objects, so that the promise completes on the engine's io_context, not a system thread.
BOOST_AUTO_TEST_CASE(a_use_promise_op_is_bound_to_the_engine_executor_and_completes_there) {
  const auto values = random_vector<std::uint32_t>(slow_count, 78);
  auto destination = gpu.allocate<std::uint32_t>(slow_count);
  using promise_type = decltype(gpu.poke(std::span<const std::uint32_t>(values), destination.get(),
                                         experimental::use_promise));
  static_assert(std::is_same_v<promise_type, experimental::promise<void(boost::system::error_code, std::size_t),
                                                                   engine::executor_type>>,
                "the promise takes the engine's executor from the initiation");
  const std::thread::id io_thread = std::this_thread::get_id();
  std::size_t moved = 0;
  bool resumed_on_io_thread = false, finished = false;
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    auto pending = gpu.poke(std::span<const std::uint32_t>(values), destination.get(), experimental::use_promise);
    auto [error, bytes] = co_await pending(asio::as_tuple(asio::use_awaitable));
    BOOST_TEST(!error);
    moved = bytes;
    resumed_on_io_thread = std::this_thread::get_id() == io_thread;
    finished = true;
  }, asio::detached);
  io.run();
  BOOST_TEST(finished);
  BOOST_TEST(resumed_on_io_thread);
  BOOST_TEST(moved == slow_count * 4);
  BOOST_TEST(same_bytes(read_back(destination.get(), slow_count), values));
}

// io_context::strand is a Networking TS executor (on_work_started, context()), which Asio's own
// operations accept; so do ferry's.
BOOST_AUTO_TEST_CASE(a_handler_bound_to_a_networking_ts_strand_runs_inside_it) {
  asio::io_context::strand strand(io);
  auto area = gpu.allocate<std::uint8_t>(16 * 32);
  const auto values = random_vector<std::uint8_t>(32, 79);
  std::atomic<int> calls{0}, in_strand{0};
  for (int i = 0; i < 32; ++i) {
    gpu.memset(area.get() + i * 16, 16, values[i], asio::bind_executor(strand, [&](boost::system::error_code error) {
                 if (!error && strand.running_in_this_thread()) ++in_strand;
                 ++calls;
               }));
  }
  run_on_threads(io, 2, [&] { return calls == 32; });
  BOOST_TEST(calls.load() == 32);
  BOOST_TEST(in_strand.load() == 32);
  std::vector<std::uint8_t> expected;
  for (int i = 0; i < 32; ++i) expected.insert(expected.end(), 16, values[i]);
  BOOST_TEST(same_bytes(read_back(area.get(), 16 * 32), expected));
}

BOOST_AUTO_TEST_SUITE_END()
