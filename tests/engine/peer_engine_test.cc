// The engine's cross-device copy (engine::copy_peer) between device 0 and device 1: each completion
// token, both directions (one at a time and both at once), with and without peer access,
// cancellation while a peer copy is held behind a gated stream, and (sim) a copy the driver refuses.
// Every case needs two devices (the sim presents two by default; on the GPU machine they need two
// GPUs) and is skipped with one.
#include "ferry/engine.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <optional>
#include <thread>
#include <vector>

#include "ferry/marshal.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/engine_fixture.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/io_helpers.hpp"
#include "tests/support/peer_access.hpp"
#include "tests/support/peer_memory.hpp"
#include "tests/support/random_bytes.hpp"
#include "tests/support/stream_gate.hpp"

namespace asio = boost::asio;
using namespace ferry;
using ferry::testing::outcome;
using ferry::testing::random_vector;
using ferry::testing::record;
using ferry::testing::run_until;
using ferry::testing::same_bytes;

namespace {

constexpr std::size_t count = (1 << 20) + 5;

// One staging chunk of 64 KiB: a staged poke of several chunks holds its stream's queue for as long
// as its gate is closed (the cancellation-before-submission case).
using engine_fixture = ferry::testing::engine_fixture<64 << 10, 1>;

// The copies of this suite: `count` values.
struct peer_copy : ferry::testing::peer_copy {
  peer_copy(context_ref from, context_ref to, std::uint64_t seed) : ferry::testing::peer_copy(from, to, seed, ::count) {}
};

// Both directions between the engine's context and `other`, one after the other, through use_awaitable.
void check_both_directions_awaited(asio::io_context& io, engine& gpu, context_ref other, std::uint64_t seed) {
  peer_copy out(gpu.context(), other, seed), back(other, gpu.context(), seed + 1);
  bool finished = false;
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    BOOST_TEST(co_await out.start(gpu, asio::use_awaitable) == count * 4);
    BOOST_TEST(co_await back.start(gpu, asio::use_awaitable) == count * 4);
    finished = true;
  }, [](std::exception_ptr error) { if (error) std::rethrow_exception(error); });
  BOOST_TEST(run_until(io, [&] { return finished; }));
  BOOST_TEST(out.landed());
  BOOST_TEST(back.landed());
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(peer_engine, engine_fixture, *ferry::testing::only_with_two_devices())

BOOST_AUTO_TEST_CASE(copy_peer_through_use_awaitable_moves_every_byte_without_peer_access) {
  context other = context::primary(device::get(1));
  check_both_directions_awaited(io, gpu, other, 401);
}

BOOST_AUTO_TEST_CASE(copy_peer_through_use_awaitable_moves_every_byte_with_peer_access) {
  context other = context::primary(device::get(1));
  if (!ferry::testing::devices_are_peers()) {
    BOOST_TEST_MESSAGE("devices 0 and 1 are not peers: nothing to enable");
    return;
  }
  ferry::testing::peer_access_both_ways enabled(gpu.context(), other);
  check_both_directions_awaited(io, gpu, other, 403);
}

BOOST_AUTO_TEST_CASE(copy_peer_through_deferred_starts_only_when_launched) {
  context other = context::primary(device::get(1));
  peer_copy copy(gpu.context(), other, 405);
  auto op = copy.start(gpu, asio::deferred);
  ferry::testing::run_for_a_while(io);
  BOOST_TEST(copy.untouched());
  outcome result;
  std::move(op)(record(result));
  BOOST_TEST(run_until(io, [&] { return result.calls == 1; }));
  BOOST_TEST(!result.error);
  BOOST_TEST(result.bytes == count * 4);
  BOOST_TEST(copy.landed());
}

BOOST_AUTO_TEST_CASE(copy_peer_through_use_future_moves_every_byte_both_ways) {
  context other = context::primary(device::get(1));
  auto guard = asio::make_work_guard(io);
  std::thread runner([&] { io.run(); });
  peer_copy out(gpu.context(), other, 406), back(other, gpu.context(), 407);
  BOOST_TEST(out.start(gpu, asio::use_future).get() == count * 4);
  BOOST_TEST(back.start(gpu, asio::use_future).get() == count * 4);
  guard.reset();
  runner.join();
  BOOST_TEST(out.landed());
  BOOST_TEST(back.landed());
}

BOOST_AUTO_TEST_CASE(copy_peer_through_callbacks_both_ways_at_once_completes_each_exactly_once) {
  context other = context::primary(device::get(1));
  peer_copy out(gpu.context(), other, 408), back(other, gpu.context(), 409);
  outcome out_result, back_result;
  out.start(gpu, record(out_result));
  back.start(gpu, record(back_result));
  BOOST_TEST(out_result.calls + back_result.calls == 0);  // never inside the initiating call
  BOOST_TEST(run_until(io, [&] { return out_result.calls == 1 && back_result.calls == 1; }));
  ferry::testing::run_for_a_while(io);
  for (const outcome& result : {out_result, back_result}) {
    BOOST_TEST(result.calls == 1);
    BOOST_TEST(!result.error);
    BOOST_TEST(result.bytes == count * 4);
  }
  BOOST_TEST(out.landed());
  BOOST_TEST(back.landed());
}

BOOST_AUTO_TEST_CASE(copy_peer_through_as_tuple_delivers_the_status_as_a_value) {
  context other = context::primary(device::get(1));
  peer_copy copy(other, gpu.context(), 410);
  stream s = stream::create();
  bool finished = false;
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    auto [error, bytes] = co_await copy.start(gpu, stream_ref(s), asio::as_tuple(asio::use_awaitable));
    BOOST_TEST(!error);
    BOOST_TEST(bytes == count * 4);
    finished = true;
  }, asio::detached);
  BOOST_TEST(run_until(io, [&] { return finished; }));
  BOOST_TEST(copy.landed());
}

BOOST_AUTO_TEST_CASE(cancel_of_a_gated_peer_copy_completes_only_after_the_gpu_is_done) {
  context other = context::primary(device::get(1));
  // With peer access where the devices allow it: a copy through the host is the driver's own staging,
  // which need not be a plain stream-ordered DMA behind a closed gate.
  std::optional<ferry::testing::peer_access_both_ways> enabled;
  if (ferry::testing::devices_are_peers()) enabled.emplace(gpu.context(), other);
  peer_copy copy(gpu.context(), other, 411);
  ferry::testing::check_cancel_after_enqueue(io, gpu, copy);
}

BOOST_AUTO_TEST_CASE(cancel_of_a_peer_copy_queued_behind_a_gated_transfer_gives_up_without_submitting) {
  context other = context::primary(device::get(1));
  // With peer access where possible, as above.
  std::optional<ferry::testing::peer_access_both_ways> enabled;
  if (ferry::testing::devices_are_peers()) enabled.emplace(gpu.context(), other);
  peer_copy copy(gpu.context(), other, 412);
  ferry::testing::check_cancel_before_enqueue(io, gpu, copy);
}

BOOST_AUTO_TEST_CASE(a_peer_copy_the_driver_refuses_completes_with_its_status,
                     *ferry::testing::only_on_sim()) {
  context other = context::primary(device::get(1));
  peer_copy refused(gpu.context(), other, 415), next(other, gpu.context(), 416);
  sim::fail_call("cuMemcpyPeerAsync", 1, CUDA_ERROR_INVALID_VALUE);
  outcome refused_result, next_result;
  refused.start(gpu, record(refused_result));
  BOOST_TEST(run_until(io, [&] { return refused_result.calls == 1; }));
  BOOST_TEST(refused_result.error == make_error_code(CUDA_ERROR_INVALID_VALUE));
  BOOST_TEST(refused_result.bytes == 0u);
  BOOST_TEST(refused.untouched());
  next.start(gpu, record(next_result));  // the failure is not sticky: the next copy goes through
  BOOST_TEST(run_until(io, [&] { return next_result.calls == 1; }));
  BOOST_TEST(!next_result.error);
  BOOST_TEST(next.landed());
}

BOOST_AUTO_TEST_CASE(copy_peer_checks_its_arguments_before_anything_is_enqueued) {
  context other = context::primary(device::get(1));
  peer_copy copy(gpu.context(), other, 414);
  int calls = 0;
  ferry::testing::expect_error<std::invalid_argument>(
      [&] {
        gpu.copy_peer(device_ptr<const std::uint32_t>(copy.source.get()), gpu.context(), copy.destination.get(),
                      context_ref(static_cast<CUcontext>(nullptr)), count, [&](auto...) { ++calls; });
      },
      {"engine::copy_peer: destination_context is a null context"});
  ferry::testing::expect_error<std::invalid_argument>(
      [&] {
        gpu.copy_peer(device_ptr<const std::uint32_t>(copy.source.get()), gpu.context(), copy.destination.get(), other,
                      count + 1, [&](auto...) { ++calls; });
      },
      {"engine::copy_peer: source range", "runs 4 bytes past the end"});
  ferry::testing::run_for_a_while(io);
  BOOST_TEST(calls == 0);
  BOOST_TEST(copy.untouched());
}

BOOST_AUTO_TEST_SUITE_END()
