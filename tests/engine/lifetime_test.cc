// Abandonment and shutdown: an io_context destroyed with ops in flight, an engine destroyed with ops in
// flight. Nothing leaks, nothing is freed while the GPU still uses it, nothing waits forever. Where an
// op's memory comes from (never the handler's allocator) and on which thread it goes.
#include "ferry/engine.hpp"

#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <future>
#include <new>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ferry/detail/engine_core.hpp"
#include "ferry/detail/engine_initiation.hpp"
#include "ferry/marshal.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/io_helpers.hpp"
#include "tests/support/random_bytes.hpp"
#include "tests/support/stream_gate.hpp"

namespace asio = boost::asio;
using namespace ferry;
using ferry::testing::random_vector;
using ferry::testing::same_bytes;

namespace {

// What a counting_allocator has handed out: in all, and not yet given back.
struct allocation_counts {
  std::atomic<int> made{0};
  std::atomic<int> live{0};
};

// An allocator that counts its allocations, to see where an op's memory comes from and when it goes.
template <class T>
struct counting_allocator {
  using value_type = T;
  explicit counting_allocator(std::shared_ptr<allocation_counts> counts) : counts(std::move(counts)) {}
  template <class U>
  counting_allocator(const counting_allocator<U>& other) noexcept : counts(other.counts) {}
  T* allocate(std::size_t n) {
    counts->made.fetch_add(1);
    counts->live.fetch_add(1);
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    counts->live.fetch_sub(1);
    std::allocator<T>().deallocate(p, n);
  }
  template <class U>
  bool operator==(const counting_allocator<U>& other) const noexcept {
    return counts == other.counts;
  }
  std::shared_ptr<allocation_counts> counts;
};

// Counts destructions of what a handler holds, to see handlers destroyed rather than called (on whichever
// thread destroys them).
struct tracer {
  std::shared_ptr<std::atomic<int>> destroyed;
  explicit tracer(std::shared_ptr<std::atomic<int>> counter) : destroyed(std::move(counter)) {}
  tracer(tracer&& other) noexcept : destroyed(std::move(other.destroyed)) {}
  ~tracer() {
    if (destroyed) ++*destroyed;
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(lifetime, ferry::testing::device_fixture)

BOOST_AUTO_TEST_CASE(destroying_the_io_context_with_ops_in_flight_destroys_their_handlers_uncalled) {
  const std::size_t count = 1 << 18;
  auto values = random_vector<std::uint32_t>(count, 401);
  asio::io_context engine_io;
  engine gpu{engine_io.get_executor()};
  auto destination = gpu.allocate<std::uint32_t>(count);
  stream s = stream::create();
  ferry::testing::stream_gate gate(s);
  auto destroyed = std::make_shared<std::atomic<int>>(0);
  int called = 0;
  {
    asio::io_context handler_io;
    // A coroutine suspended on a gated transfer, and a plain callback bound to the same io_context.
    asio::co_spawn(handler_io, [&, t = tracer(destroyed)]() -> asio::awaitable<void> {
      co_await gpu.poke(std::span<const std::uint32_t>(values), destination.get(), s, asio::use_awaitable);
      ++called;
    }, asio::detached);
    handler_io.run_for(std::chrono::milliseconds(50));
    gpu.memset(destination.get(), 16, std::uint32_t{1}, s,
               asio::bind_executor(handler_io.get_executor(), [&, t = tracer(destroyed)](auto) { ++called; }));
  }  // handler_io destroyed here, GPU work still gated
  BOOST_TEST(*destroyed >= 2);
  gate.open();
  gpu.wait_all(asio::use_future).get();  // the engine's own executor has no running thread: use a future
  BOOST_TEST(called == 0);
  auto back = peek_list_array(count, destination.get());
  BOOST_CHECK(std::equal(values.begin() + 16, values.end(), back.begin() + 16));  // the GPU finished the work
}

// Completions that arrive while the handlers' io_context is being destroyed: each handler is either
// destroyed by the shutdown or posted before it and destroyed with the queue, once, never called. The
// completing thread posts outside the registry's lock; the shutdown waits for a post it has begun.
BOOST_AUTO_TEST_CASE(an_io_context_destroyed_while_completions_reach_it_destroys_each_handler_once) {
  constexpr int ops = 64;
  constexpr int rounds = 40;
  asio::io_context engine_io;
  engine gpu{engine_io.get_executor()};
  const auto values = random_vector<std::uint32_t>(ops, 403);
  auto source = pinned_buffer<std::uint32_t>::allocate(ops);
  std::copy(values.begin(), values.end(), source.data());
  auto destination = gpu.allocate<std::uint32_t>(ops);
  stream s = stream::create();
  auto destroyed = std::make_shared<std::atomic<int>>(0);
  int called = 0;
  for (int round = 0; round < rounds; ++round) {
    {
      ferry::testing::stream_gate gate(s);
      asio::io_context handler_io;
      for (int i = 0; i < ops; ++i) {
        gpu.poke(pinned_span(host_ptr<const std::uint32_t>(source.data() + i), 1), destination.get() + i, s,
                 asio::bind_executor(handler_io.get_executor(),
                                     [&called, t = tracer(destroyed)](boost::system::error_code, std::size_t) {
                                       ++called;
                                     }));
      }
      gate.open();  // the completions start now, on the engine's threads
      // Later rounds destroy the context later, so that some do it amid the completions.
      std::this_thread::sleep_for(std::chrono::microseconds(round * 5));
    }  // handler_io destroyed here
    gpu.wait_all(asio::use_future).get();
  }
  BOOST_TEST(called == 0);
  BOOST_TEST(*destroyed == ops * rounds);
  BOOST_TEST(same_bytes(peek_list_array(ops, destination.get()), values));
}

// The rule engine.hpp states: an engine must not outlive its executor's io_context. An op started after
// that context is gone throws (it used to crash looking the context up); nothing is started, and the
// engine can still be destroyed.
BOOST_AUTO_TEST_CASE(an_op_started_after_the_engine_io_context_is_gone_throws_and_starts_nothing) {
  auto io = std::make_unique<asio::io_context>();
  engine gpu{io->get_executor()};
  auto destination = gpu.allocate<std::uint32_t>(64);
  const auto values = random_vector<std::uint32_t>(64, 402);
  poke_array(64, values.data(), destination.get());
  io.reset();
  int calls = 0;
  auto message_of = [&](auto start) {
    try {
      start();
    } catch (const std::logic_error& error) {
      return std::string(error.what());
    }
    return std::string("no exception");
  };
  const std::string message =
      message_of([&] { gpu.memset(destination.get(), 64, std::uint32_t{7}, [&](auto) { ++calls; }); });
  BOOST_TEST(message.find("ferry::engine: the execution context of the engine's executor has shut down") !=
             std::string::npos, message);
  BOOST_TEST(message.find("must not outlive it, and no operation was started") != std::string::npos, message);
  BOOST_TEST(message_of([&] { gpu.wait_all([&](auto) { ++calls; }); }) == message);
  BOOST_TEST(calls == 0);
  BOOST_TEST(same_bytes(peek_list_array(64, destination.get()), values));  // the memset never ran
}

BOOST_AUTO_TEST_CASE(destroying_the_engine_waits_for_gpu_work_then_completes_pending_handlers) {
  const std::size_t count = 1 << 18;
  auto values = random_vector<std::uint32_t>(count, 402);
  asio::io_context io;
  auto gpu = std::make_unique<engine>(io.get_executor());
  auto destination = gpu->allocate<std::uint32_t>(count);
  stream s = stream::create();
  auto gate = std::make_unique<ferry::testing::stream_gate>(s);
  int calls = 0;
  boost::system::error_code seen;
  gpu->poke(std::vector<std::uint32_t>(values), destination.get(), s, [&](auto error, std::vector<std::uint32_t> back) {
    ++calls;
    seen = error;
    BOOST_TEST(same_bytes(back, values));
  });
  std::atomic<bool> destroyed{false};
  std::thread destroyer([&] {
    gpu.reset();
    destroyed = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  BOOST_TEST(!destroyed);  // the engine waits: the GPU still reads the op's vector
  gate->open();
  destroyer.join();
  BOOST_TEST(destroyed);
  ferry::testing::run_until(io, [&] { return calls == 1; });
  BOOST_TEST(calls == 1);
  BOOST_TEST(!seen);
  BOOST_TEST(same_bytes(peek_list_array(count, destination.get()), values));
}

BOOST_AUTO_TEST_CASE(an_abandoned_coroutine_frame_does_not_free_engine_resources_early) {
  // The coroutine and its io_context go away while its staged transfer is in flight; the staging chunk
  // and event stay with the engine until the GPU is done, and the engine is reusable afterwards.
  const std::size_t count = (3 << 20) / 4;
  auto values = random_vector<std::uint32_t>(count, 403);
  asio::io_context engine_io;
  engine_options options;
  options.staging_chunk_bytes = 1 << 20;
  options.staging_chunks = 2;
  engine gpu{engine_io.get_executor(), options};
  auto destination = gpu.allocate<std::uint32_t>(count);
  stream s = stream::create();
  ferry::testing::stream_gate gate(s);
  {
    asio::io_context handler_io;
    asio::co_spawn(handler_io, [&]() -> asio::awaitable<void> {
      co_await gpu.poke(std::span<const std::uint32_t>(values), destination.get(), s, asio::use_awaitable);
    }, asio::detached);
    handler_io.run_for(std::chrono::milliseconds(50));
  }
  gate.open();
  gpu.wait_all(asio::use_future).get();
  BOOST_TEST(same_bytes(peek_list_array(count, destination.get()), values));
  auto again = random_vector<std::uint32_t>(count, 404);
  BOOST_TEST(gpu.poke(std::span<const std::uint32_t>(again), destination.get(), asio::use_future).get() == count * 4);
  BOOST_TEST(same_bytes(peek_list_array(count, destination.get()), again));
}

BOOST_AUTO_TEST_CASE(an_op_completed_on_another_thread_is_freed_on_its_handlers_thread_after_the_handler_runs) {
  // The completing thread (the engine's poller, here a thread of the test) lets go of the op once it has
  // handed the handler over; the handler keeps the op until it has run on its executor, so that the op
  // is freed there (where a coroutine allocated it), not on the completing thread, and off the way from
  // the completion to the handler.
  asio::io_context io;
  auto core = std::make_shared<detail::engine_core>(engine_options{});
  std::weak_ptr<detail::operation> watched;
  bool alive_in_handler = false;
  std::size_t delivered = 0;
  {
    auto op = detail::make_operation(
        [&](boost::system::error_code error, std::size_t bytes) {
          BOOST_TEST(!error);
          delivered = bytes;
          alive_in_handler = !watched.expired();
        },
        detail::deliver_bytes{}, io.get_executor(), core);
    watched = op;
    op->add_bytes(4096);
    std::thread completing([op = std::move(op)]() mutable {
      BOOST_TEST(op->finish());
      op.reset();
    });
    completing.join();
  }
  BOOST_TEST(!watched.expired());  // held by the handler waiting in the io_context's queue
  io.run();  // on this thread: the handler's
  BOOST_TEST(delivered == 4096u);
  BOOST_TEST(alive_in_handler);
  BOOST_TEST(watched.expired());  // freed here, once the handler had run
}

BOOST_AUTO_TEST_CASE(an_ops_state_never_comes_from_the_handlers_allocator) {
  // Asio frees memory from a handler's associated allocator before it calls the handler, and its owner
  // may destroy the allocator's arena then. The engine may hold an op's state after the handler has run
  // (docs/engine.md, "Composition"), so that state comes from ferry's side (Asio's recycling allocator), never
  // from the handler's allocator.
  const auto values = random_vector<std::uint8_t>(1 << 16, 405);
  auto device = device_buffer<std::uint8_t>::allocate(values.size());
  asio::io_context io;
  engine gpu{io.get_executor()};
  auto counts = std::make_shared<allocation_counts>();
  bool called = false;
  auto handler = [&](boost::system::error_code error, std::size_t bytes) {
    BOOST_TEST(!error);
    BOOST_TEST(bytes == values.size());
    called = true;
  };
  gpu.poke(std::span<const std::uint8_t>(values), device.get(),
           asio::bind_allocator(counting_allocator<void>(counts), handler));
  io.run();
  BOOST_TEST(called);
  BOOST_TEST(counts->made.load() == 0);
  BOOST_TEST(same_bytes(peek_list_array(values.size(), device_ptr<const std::uint8_t>(device.get())), values));
}

BOOST_AUTO_TEST_CASE(an_op_that_cannot_be_made_after_its_work_is_queued_leaves_no_memory_in_use) {
  // engine_core puts page-locked work on an idle stream before it makes the op's operation (so that the
  // bookkeeping overlaps the copy). When making the operation throws, start waits for the stream before
  // it rethrows, and the stream is free for the next op.
  const std::size_t count = 1 << 20;
  const auto values = random_vector<std::uint32_t>(count, 404);
  auto source = pinned_buffer<std::uint32_t>::allocate(count);
  std::memcpy(source.data(), values.data(), count * sizeof(std::uint32_t));
  auto destination = device_buffer<std::uint32_t>::allocate(count);
  memset(destination.get(), count, std::uint32_t{0xA5A5A5A5});
  detail::engine_core core{engine_options{}};
  stream s = stream::create();
  auto prepare = [&] {
    return core.prepare_copy("engine::poke", count, sizeof(std::uint32_t), detail::pinned_side("source", source.data()),
                             detail::device_side("destination", destination.get().get()));
  };
  if (ferry::testing::on_sim()) sim::set_copy_bandwidth(1e8);  // 4 MiB: ~40 ms, long enough to see a wait
  auto cannot_make = []() -> std::shared_ptr<detail::operation> { throw std::bad_alloc(); };
  BOOST_CHECK_THROW(core.start(detail::operation_factory(cannot_make), prepare(), s.get()), std::bad_alloc);
  // Done already: start waited for the GPU before it let the caller's memory go.
  BOOST_TEST(detail::driver().cuStreamQuery(s.get()) == CUDA_SUCCESS);
  if (ferry::testing::on_sim()) sim::set_copy_bandwidth(0);
  BOOST_TEST(same_bytes(peek_list_array(count, device_ptr<const std::uint32_t>(destination.get())), values));

  // The stream was given back: the next op on it runs and completes.
  struct set_on_complete final : detail::completion {
    std::promise<boost::system::error_code> done;
    void complete(boost::system::error_code error, std::size_t) override { done.set_value(error); }
  };
  memset(destination.get(), count, std::uint32_t{0xA5A5A5A5});
  auto completion = std::make_unique<set_on_complete>();
  auto outcome = completion->done.get_future();
  core.start(std::make_shared<detail::operation>(std::move(completion)), prepare(), s.get());
  BOOST_TEST_REQUIRE((outcome.wait_for(std::chrono::seconds(10)) == std::future_status::ready));
  BOOST_TEST(!outcome.get());
  BOOST_TEST(same_bytes(peek_list_array(count, device_ptr<const std::uint32_t>(destination.get())), values));
}

BOOST_AUTO_TEST_SUITE_END()
