// engine::wait: completes once the work queued on a stream before it is done, whoever queued it (here
// the program itself, through the Marshal API, behind a gate that holds the stream), in order with the
// engine's own ops on that stream; under Asio's tokens and composition; cancellation, a failure of the
// work before it, and a stream of another context; under each completion policy.
#include "ferry/engine.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <future>
#include <span>
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
#include "tests/support/stream_gate.hpp"

namespace asio = boost::asio;
using namespace ferry;
using ferry::testing::random_vector;
using ferry::testing::outcome;
using ferry::testing::record_status;
using ferry::testing::same_bytes;

namespace {

// Two 256 KiB staging chunks: a staged transfer of 2 MiB puts its chunks on its stream over time.
struct wait_fixture : ferry::testing::device_fixture {
  static engine_options reporting_to(ferry::testing::failure_log& failures) {
    engine_options options;
    options.on_failure = failures.recorder();
    options.staging_chunk_bytes = 256 << 10;
    options.staging_chunks = 2;
    return options;
  }
  ferry::testing::failure_log failures;  // before the engine, which reports to it
  asio::io_context io;
  engine gpu{io.get_executor(), reporting_to(failures)};
};

// Random values in page-locked memory, and a device array of the same size.
struct queued_bytes {
  explicit queued_bytes(engine& gpu, std::size_t count, std::uint32_t seed)
      : values(random_vector<std::uint32_t>(count, seed)),
        pinned(pinned_buffer<std::uint32_t>::allocate(count)),
        device(gpu.allocate<std::uint32_t>(count)) {
    std::copy(values.begin(), values.end(), pinned.data());
  }
  // The program's own copy to the device on `stream`: work the engine did not queue.
  void queue_by_the_program(stream_ref stream) {
    poke_array_async(values.size(), host_ptr<const std::uint32_t>(pinned.get()), device.get(), stream);
  }
  bool arrived() const { return same_bytes(peek_list_array(values.size(), device.get()), values); }

  std::vector<std::uint32_t> values;
  pinned_buffer<std::uint32_t> pinned;
  device_buffer<std::uint32_t> device;
};

// A coroutine's waits: co_awaited, then deferred inside a parallel group beside a poke on `other`.
asio::awaitable<void> awaited_waits(engine& gpu, stream_ref s, stream_ref other, queued_bytes& first,
                                    queued_bytes& second, bool& finished) {
  first.queue_by_the_program(s);
  co_await gpu.wait(s, asio::use_awaitable);
  BOOST_TEST(first.arrived());
  second.queue_by_the_program(s);
  const auto values = random_vector<std::uint8_t>(4096, 706);
  auto device = gpu.allocate<std::uint8_t>(values.size());
  auto [completion_order, wait_error, poke_error, bytes] =
      co_await asio::experimental::make_parallel_group(
          gpu.wait(s, asio::deferred),
          gpu.poke(std::span<const std::uint8_t>(values), device.get(), other, asio::deferred))
          .async_wait(asio::experimental::wait_for_all(), asio::use_awaitable);
  BOOST_TEST(!wait_error);
  BOOST_TEST(!poke_error);
  BOOST_TEST(bytes == values.size());
  BOOST_TEST(second.arrived());
  BOOST_TEST(same_bytes(peek_list_array(values.size(), device.get()), values));
  finished = true;
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(stream_wait, wait_fixture)

BOOST_AUTO_TEST_CASE(completes_only_once_the_programs_own_work_on_the_stream_is_done) {
  stream s = stream::create();
  queued_bytes bytes(gpu, (1 << 20) / 4, 701);
  ferry::testing::stream_gate gate(s);
  bytes.queue_by_the_program(s);
  outcome waited_for;
  gpu.wait(s, record_status(waited_for));
  ferry::testing::run_for_a_while(io);
  BOOST_TEST(waited_for.calls == 0);  // the stream is held: its work is not done
  BOOST_TEST(!s.ready());
  gate.open();
  BOOST_TEST(ferry::testing::run_until(io, [&] { return waited_for.calls == 1; }));
  BOOST_TEST(!waited_for.error);
  BOOST_TEST(bytes.arrived());
  ferry::testing::run_for_a_while(io, std::chrono::milliseconds(20));
  BOOST_TEST(waited_for.calls == 1);
}

BOOST_AUTO_TEST_CASE(follows_a_staged_transfer_given_the_same_stream_and_precedes_later_ops) {
  stream s = stream::create();
  const std::size_t count = (2 << 20) / 4;  // 8 staging chunks: the poke submits over time
  const auto values = random_vector<std::uint32_t>(count, 702);
  auto device = gpu.allocate<std::uint32_t>(count);
  queued_bytes after(gpu, (256 << 10) / 4, 703);
  ferry::testing::stream_gate gate(s);
  std::vector<std::string> order;
  gpu.poke(std::span<const std::uint32_t>(values), device.get(), s, [&](auto error, std::size_t bytes) {
    BOOST_TEST(!error);
    BOOST_TEST(bytes == count * 4);
    order.push_back("poke");
  });
  gpu.wait(s, [&](boost::system::error_code error) {
    BOOST_TEST(!error);
    order.push_back("wait");
  });
  gpu.poke(pinned_span(host_ptr<const std::uint32_t>(after.pinned.get()), after.values.size()), after.device.get(), s,
           [&](auto error, std::size_t) {
             BOOST_TEST(!error);
             order.push_back("later poke");
           });
  ferry::testing::run_for_a_while(io);
  BOOST_TEST(order.empty());
  gate.open();
  BOOST_TEST(ferry::testing::run_until(io, [&] { return order.size() == 3; }));
  BOOST_TEST((order == std::vector<std::string>{"poke", "wait", "later poke"}));
  BOOST_TEST(same_bytes(peek_list_array(count, device.get()), values));
  BOOST_TEST(after.arrived());
}

BOOST_AUTO_TEST_CASE(waits_under_every_completion_policy_and_mark) {
  struct setting {
    completion_policy policy;
    completion_mark marks;
  };
  std::uint32_t seed = 712;
  for (const setting& s : {setting{completion_policy::poll, completion_mark::by_submitter},
                           setting{completion_policy::poll, completion_mark::by_poller},
                           setting{completion_policy::host_callback, completion_mark::by_submitter},
                           setting{completion_policy::blocking_sync, completion_mark::by_submitter}}) {
    engine_options options;
    options.policy = s.policy;
    options.marks = s.marks;
    engine other{io.get_executor(), options};
    stream held = stream::create();
    queued_bytes bytes(other, (256 << 10) / 4, seed++);
    ferry::testing::stream_gate gate(held);
    bytes.queue_by_the_program(held);
    outcome waited_for;
    other.wait(held, record_status(waited_for));
    ferry::testing::run_for_a_while(io, std::chrono::milliseconds(50));
    const std::string which = "policy " + std::to_string(static_cast<int>(s.policy)) + ", marks " +
                              std::to_string(static_cast<int>(s.marks));
    BOOST_TEST(waited_for.calls == 0, which);
    gate.open();
    BOOST_TEST(ferry::testing::run_until(io, [&] { return waited_for.calls == 1; }));
    BOOST_TEST(!waited_for.error, which);
    BOOST_TEST(bytes.arrived(), which);
  }
}

BOOST_AUTO_TEST_CASE(works_with_awaitables_deferred_parallel_groups_and_futures) {
  stream s = stream::create();
  stream other = stream::create();
  queued_bytes first(gpu, (512 << 10) / 4, 704);
  queued_bytes second(gpu, (512 << 10) / 4, 705);
  bool finished = false;
  asio::co_spawn(io, awaited_waits(gpu, s, other, first, second, finished), asio::detached);
  BOOST_TEST(ferry::testing::run_until(io, [&] { return finished; }));

  // From a thread that runs no io_context.
  queued_bytes third(gpu, (512 << 10) / 4, 707);
  std::thread runner([&] { ferry::testing::run_until(io, [&] { return false; }, std::chrono::milliseconds(300)); });
  third.queue_by_the_program(s);
  std::future<void> done = gpu.wait(s, asio::use_future);
  BOOST_TEST((done.wait_for(std::chrono::seconds(10)) == std::future_status::ready));
  runner.join();
  done.get();
  BOOST_TEST(third.arrived());
}

BOOST_AUTO_TEST_CASE(a_cancelled_wait_on_the_stream_completes_with_operation_aborted_once_the_work_is_done) {
  stream s = stream::create();
  queued_bytes bytes(gpu, (1 << 20) / 4, 708);
  ferry::testing::stream_gate gate(s);
  bytes.queue_by_the_program(s);
  asio::cancellation_signal signal;
  outcome waited_for;
  gpu.wait(s, asio::bind_cancellation_slot(signal.slot(), record_status(waited_for)));
  ferry::testing::run_for_a_while(io, std::chrono::milliseconds(20));
  signal.emit(asio::cancellation_type::terminal);
  ferry::testing::run_for_a_while(io);
  BOOST_TEST(waited_for.calls == 0);  // on the stream: it completes once the work before it is done
  gate.open();
  BOOST_TEST(ferry::testing::run_until(io, [&] { return waited_for.calls == 1; }));
  BOOST_TEST(waited_for.error == asio::error::operation_aborted);
  BOOST_TEST(bytes.arrived());
}

BOOST_AUTO_TEST_CASE(a_wait_cancelled_behind_a_staged_transfer_never_reaches_the_stream) {
  stream s = stream::create();
  const std::size_t count = (2 << 20) / 4;
  const auto values = random_vector<std::uint32_t>(count, 709);
  auto device = gpu.allocate<std::uint32_t>(count);
  ferry::testing::stream_gate gate(s);
  outcome poked;
  gpu.poke(std::span<const std::uint32_t>(values), device.get(), s, ferry::testing::record(poked));
  asio::cancellation_signal signal;
  outcome waited_for;
  gpu.wait(s, asio::bind_cancellation_slot(signal.slot(), record_status(waited_for)));
  signal.emit(asio::cancellation_type::partial);
  gate.open();
  BOOST_TEST(ferry::testing::run_until(io, [&] { return waited_for.calls == 1 && poked.calls == 1; }));
  BOOST_TEST(waited_for.error == asio::error::operation_aborted);
  BOOST_TEST(!poked.error);
  BOOST_TEST(poked.bytes == count * 4);
  BOOST_TEST(same_bytes(peek_list_array(count, device.get()), values));
}

BOOST_AUTO_TEST_CASE(a_stream_of_another_context_is_refused_before_anything_is_queued) {
  context other = context::create(device::get(0));
  stream foreign = [&] {
    context_guard in_other(other);
    return stream::create();
  }();
  outcome waited_for;
  ferry::testing::expect_error<std::invalid_argument>(
      [&] { gpu.wait(foreign, record_status(waited_for)); },
      {"engine::wait: stream 0x", "belongs to context 0x", "not to the engine's context 0x", "(device 0)"});
  ferry::testing::run_for_a_while(io, std::chrono::milliseconds(20));
  BOOST_TEST(waited_for.calls == 0);
  BOOST_TEST(failures.seen().empty());
  // The engine goes on: its flags were never written on the foreign stream.
  stream s = stream::create();
  queued_bytes bytes(gpu, 4096, 710);
  bytes.queue_by_the_program(s);
  gpu.wait(s, record_status(waited_for));
  BOOST_TEST(ferry::testing::run_until(io, [&] { return waited_for.calls == 1; }));
  BOOST_TEST(!waited_for.error);
  BOOST_TEST(bytes.arrived());
}

BOOST_AUTO_TEST_CASE(a_failure_of_the_work_before_it_completes_it_with_the_drivers_error,
                     *ferry::testing::only_on_sim()) {
  stream s = stream::create();
  queued_bytes bytes(gpu, 4096, 711);
  ferry::testing::stream_gate gate(s);
  bytes.queue_by_the_program(s);
  sim::fail_stream(s.get(), CUDA_ERROR_ILLEGAL_ADDRESS);
  outcome waited_for;
  gpu.wait(s, record_status(waited_for));
  gate.open();
  BOOST_TEST(ferry::testing::run_until(io, [&] { return waited_for.calls == 1; }));
  BOOST_TEST(waited_for.error == make_error_code(CUDA_ERROR_ILLEGAL_ADDRESS));
  const std::vector<std::string> reported = failures.seen();
  BOOST_REQUIRE(reported.size() == 1u);
  BOOST_TEST(reported[0].find("engine::wait: the work queued before it on stream 0x") != std::string::npos,
             reported[0]);
  BOOST_TEST(reported[0].find("of device 0: CUDA_ERROR_ILLEGAL_ADDRESS") != std::string::npos, reported[0]);
  // The context is dead (the error is sticky): a later wait fails at once with the same error.
  outcome later;
  gpu.wait(s, record_status(later));
  BOOST_TEST(ferry::testing::run_until(io, [&] { return later.calls == 1; }));
  BOOST_TEST(later.error == make_error_code(CUDA_ERROR_ILLEGAL_ADDRESS));
}

BOOST_AUTO_TEST_CASE(a_failed_stream_query_is_a_cuda_error_and_an_unknown_handle_an_invalid_argument,
                     *ferry::testing::only_on_sim()) {
  stream s = stream::create();
  outcome waited_for;
  sim::fail_call("cuStreamGetCtx", 1, CUDA_ERROR_UNKNOWN);
  ferry::testing::expect_error<cuda_error>([&] { gpu.wait(s, record_status(waited_for)); },
                                           {"cuStreamGetCtx", "CUDA_ERROR_UNKNOWN"});
  sim::fail_call("cuStreamGetCtx", 1, CUDA_ERROR_INVALID_HANDLE);
  ferry::testing::expect_error<std::invalid_argument>(
      [&] { gpu.wait(s, record_status(waited_for)); },
      {"engine::wait: stream 0x", "is no live stream the driver knows (cuStreamGetCtx: CUDA_ERROR_INVALID_HANDLE)"});
  sim::reset_faults();
  ferry::testing::run_for_a_while(io, std::chrono::milliseconds(20));
  BOOST_TEST(waited_for.calls == 0);
  gpu.wait(s, record_status(waited_for));
  BOOST_TEST(ferry::testing::run_until(io, [&] { return waited_for.calls == 1; }));
  BOOST_TEST(!waited_for.error);
}

BOOST_AUTO_TEST_SUITE_END()
