// ferry::remote's failures: cancellation, a peer killed mid-transfer, bad descriptors, UCX's statuses
// as error codes.
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstring>
#include <optional>
#include <variant>

#include "ferry/remote.hpp"
#include "tests/remote/peer_process.hpp"
#include "tests/support/device_fixture.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/random_bytes.hpp"

namespace asio = boost::asio;
using boost::system::error_code;
using ferry::testing::check_echo;
using ferry::testing::connected_peer;
using ferry::testing::expect_error;
using ferry::testing::fill_random;
using ferry::testing::peer_bytes;
using ferry::testing::run_until;


BOOST_AUTO_TEST_SUITE(remote_failures)

BOOST_AUTO_TEST_CASE(ucx_statuses_are_error_codes_of_the_ucx_category) {
  std::error_code reset = ferry::remote::make_ucx_error_code(-25);  // UCS_ERR_CONNECTION_RESET
  BOOST_TEST(std::string(reset.category().name()) == "ucx");
  BOOST_TEST(reset.message().find("Connection reset") != std::string::npos, reset.message());
  BOOST_TEST(reset.message().find("-25") != std::string::npos, reset.message());
  error_code through_asio(reset);
  BOOST_TEST(through_asio == reset);
}

BOOST_AUTO_TEST_CASE(a_cancelled_receive_reports_operation_aborted_and_the_endpoint_goes_on) {
  connected_peer pair(21, peer_bytes);
  asio::cancellation_signal signal;
  std::vector<std::byte> buffer(64);
  int calls = 0;
  error_code result;
  pair.endpoint.async_receive(buffer, asio::bind_cancellation_slot(signal.slot(), [&](error_code error, std::size_t) {
                                result = error;
                                ++calls;
                              }));
  pair.io.poll();
  BOOST_TEST(calls == 0);  // nothing to receive yet
  signal.emit(asio::cancellation_type::terminal);
  run_until(pair.io, [&] { return calls > 0; });
  BOOST_TEST(result == asio::error::operation_aborted);
  pair.io.poll();
  BOOST_TEST(calls == 1);
  check_echo(pair, 2101);
}

BOOST_AUTO_TEST_CASE(a_timer_beats_a_receive_with_awaitable_operators) {
  connected_peer pair(22, peer_bytes);
  bool finished = false;
  asio::co_spawn(
      pair.io,
      [&]() -> asio::awaitable<void> {
        using namespace asio::experimental::awaitable_operators;
        std::vector<std::byte> buffer(64);
        asio::steady_timer timer(pair.io, std::chrono::milliseconds(50));
        auto winner = co_await (pair.endpoint.async_receive(buffer, asio::use_awaitable) ||
                                timer.async_wait(asio::use_awaitable));
        BOOST_TEST(winner.index() == 1u);  // the receive was cancelled
        finished = true;
      },
      [](std::exception_ptr failure) {
        if (failure) std::rethrow_exception(failure);
      });
  run_until(pair.io, [&] { return finished; });
  check_echo(pair, 2201);
}

BOOST_AUTO_TEST_CASE(a_put_cancelled_in_flight_completes_once_ucx_is_done_with_the_memory) {
  connected_peer pair(23, peer_bytes);
  std::vector<std::byte> data(peer_bytes);
  fill_random(std::span(data), 2301);
  asio::cancellation_signal signal;
  int calls = 0;
  error_code result;
  pair.endpoint.async_put(std::span<const std::byte>(data), pair.memory,
                          asio::bind_cancellation_slot(signal.slot(), [&](error_code error, std::size_t) {
                            result = error;
                            ++calls;
                          }));
  signal.emit(asio::cancellation_type::terminal);
  run_until(pair.io, [&] { return calls > 0; });
  BOOST_TEST(result == asio::error::operation_aborted);
  pair.io.poll();
  BOOST_TEST(calls == 1);
  check_echo(pair, 2302);
}

BOOST_AUTO_TEST_CASE(a_killed_peer_ends_every_pending_op_with_an_error_within_a_second) {
  std::size_t descriptors_before = ferry::testing::open_descriptors();
  {
    connected_peer pair(24, peer_bytes);
    std::vector<std::byte> receive(64), got(peer_bytes), sent(peer_bytes);
    fill_random(std::span(sent), 2401);
    std::vector<error_code> results;
    auto record = [&](error_code error, std::size_t = 0) { results.push_back(error); };
    pair.endpoint.async_receive(receive, record);
    pair.endpoint.async_receive(receive, record);
    for (int i = 0; i < 4; ++i) {
      pair.endpoint.async_put(std::span<const std::byte>(sent), pair.memory, record);
      pair.endpoint.async_get(std::span(got), pair.memory, record);
    }
    pair.peer.kill();
    auto killed = std::chrono::steady_clock::now();
    run_until(pair.io, [&] { return results.size() == 10; }, std::chrono::seconds(1));
    auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - killed);
    BOOST_TEST(waited.count() < 1000);
    // Transfers may have finished before the kill; the receives cannot have.
    int errors = 0;
    for (auto& error : results) errors += error ? 1 : 0;
    BOOST_TEST(errors >= 2);
    error_code later;
    bool done = false;
    pair.endpoint.async_get(std::span(got), pair.memory, [&](error_code error, std::size_t) {
      later = error;
      done = true;
    });
    run_until(pair.io, [&] { return done; }, std::chrono::seconds(1));
    BOOST_TEST(later == error_code(ferry::remote::make_ucx_error_code(-25)), later.message());
  }
  BOOST_TEST(ferry::testing::open_descriptors() == descriptors_before);
  // The next connection works.
  connected_peer next(25, peer_bytes);
  check_echo(next, 2501);
}

BOOST_AUTO_TEST_CASE(bad_descriptors_are_refused_before_anything_is_sent) {
  connected_peer pair(26, peer_bytes);
  std::vector<std::byte> local(200);
  fill_random(std::span(local), 2601);
  int calls = 0;
  auto count = [&](error_code, std::size_t) { ++calls; };
  // Wrong size.
  expect_error<std::invalid_argument>(
      [&] { pair.endpoint.async_put(std::span<const std::byte>(local).first(100), pair.memory.window(0, 200), count); },
      {"async_put", "100 bytes", "covers 200"});
  // A window past the descriptor's end.
  expect_error<std::invalid_argument>([&] { (void)pair.memory.window(peer_bytes - 100, 200); },
                                      {"window", std::to_string(peer_bytes - 100), "200"});
  // A descriptor of another worker's memory (this process's own), on the connection to the peer.
  auto own = pair.worker.register_memory(std::span(local));
  expect_error<std::invalid_argument>(
      [&] { pair.endpoint.async_get(std::span(local), own.export_descriptor(), count); },
      {"async_get", "exported by worker", "this endpoint's peer"});
  // An address outside the registration, a truncated descriptor, another format.
  auto bytes = pair.memory.serialize();
  auto tampered = bytes;
  std::uint64_t past = pair.memory.region_address() + pair.memory.region_size();
  std::memcpy(tampered.data() + 32, &past, 8);
  expect_error<std::invalid_argument>([&] { (void)ferry::remote::descriptor::deserialize(tampered); },
                                      {"outside its registration"});
  expect_error<std::invalid_argument>(
      [&] { (void)ferry::remote::descriptor::deserialize(std::span(bytes).first(bytes.size() - 1)); },
      {"remote key", "bytes follow"});
  expect_error<std::invalid_argument>(
      [&] { (void)ferry::remote::descriptor::deserialize(std::span(bytes).first(20)); }, {"20 bytes", "fewer than"});
  tampered = bytes;
  tampered[0] = std::byte{0};
  expect_error<std::invalid_argument>([&] { (void)ferry::remote::descriptor::deserialize(tampered); },
                                      {"format tag"});
  // Read-only memory as a get's destination; an empty descriptor.
  expect_error<std::invalid_argument>(
      [&] { pair.endpoint.async_get(std::span<const std::byte>(local), pair.memory.window(0, 200), count); },
      {"async_get", "read-only"});
  expect_error<std::invalid_argument>(
      [&] { pair.endpoint.async_put(std::span<const std::byte>(local), ferry::remote::descriptor(), count); },
      {"async_put", "empty"});
  pair.io.poll();
  BOOST_TEST(calls == 0);
  // The descriptor that came over the wire still works, byte for byte.
  bool done = false;
  pair.endpoint.async_put(std::span<const std::byte>(local), ferry::remote::descriptor::deserialize(bytes).window(0, 200),
                          [&](error_code error, std::size_t moved) {
                            BOOST_TEST(!error);
                            BOOST_TEST(moved == 200u);
                            done = true;
                          });
  run_until(pair.io, [&] { return done; });
  check_echo(pair, 2602);
}

BOOST_AUTO_TEST_CASE(device_memory_is_refused_on_the_sim, *ferry::testing::only_on_sim()) {
  boost::asio::io_context io;
  ferry::remote::worker worker(io.get_executor(), ferry::remote::worker_options{ferry::testing::remote_transports()});
  expect_error<std::invalid_argument>(
      [&] { (void)worker.register_memory(ferry::device_ptr<std::byte>(0x1000), 4096); },
      {"register_memory", "sim backend", "host memory"});
  expect_error<std::invalid_argument>([&] { (void)worker.register_memory(std::span<std::byte>()); },
                                      {"register_memory", "empty"});
}

BOOST_AUTO_TEST_SUITE_END()
