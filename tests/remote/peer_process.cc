#include "tests/remote/peer_process.hpp"

#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <optional>

#include "tests/support/random_bytes.hpp"

namespace ferry::testing {

void run_until(boost::asio::io_context& io, const std::function<bool()>& done, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    BOOST_REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline,
                          "not done after " << limit.count() << " ms (a hang)");
    io.run_one_for(std::chrono::milliseconds(10));
    if (io.stopped()) io.restart();
  }
}

connected_peer::connected_peer(std::uint64_t seed, std::size_t bytes, remote::memory_kind kind,
                               remote::progress_mode progress)
    : worker(io.get_executor(), remote::worker_options{remote_transports(), progress}),
      port(worker.listen("127.0.0.1")),
      peer(port, seed, bytes, kind, progress) {
  bool accepted = false;
  worker.async_accept([&](boost::system::error_code error, remote::endpoint connected) {
    BOOST_REQUIRE_MESSAGE(!error, "accept: " << error.message());
    endpoint = std::move(connected);
    accepted = true;
  });
  // A peer that fails before it connects (its own error is on stderr) ends the wait at once.
  run_until(io, [&] { return accepted || peer.ended().has_value(); });
  BOOST_REQUIRE_MESSAGE(accepted, "the peer process ended (wait status " << peer.ended().value_or(0)
                                                                         << ") before it connected");
  std::vector<std::byte> about(4096);
  std::optional<std::size_t> received;
  endpoint.async_receive(about, [&](boost::system::error_code error, std::size_t bytes) {
    BOOST_REQUIRE_MESSAGE(!error, "the peer's descriptor: " << error.message());
    received = bytes;
  });
  run_until(io, [&] { return received.has_value(); });
  memory = remote::descriptor::deserialize(std::span(about).first(*received));
}

std::vector<std::byte> random_bytes(std::size_t count, std::uint64_t seed) {
  std::vector<std::byte> bytes(count);
  fill_random(std::span(bytes), seed);
  return bytes;
}

void check_same(std::span<const std::byte> got, std::span<const std::byte> expected, const char* what) {
  std::optional<std::size_t> differs = first_difference(got, expected);
  BOOST_REQUIRE_MESSAGE(!differs, what << ": first difference at byte " << differs.value_or(0) << " of "
                                        << got.size() << " (expected " << expected.size() << " bytes)");
}

std::vector<std::byte> echo_request(std::size_t size, std::uint64_t seed) {
  std::vector<std::byte> message = random_bytes(size, seed);
  message[0] = std::byte{'E'};
  return message;
}

void check_echo(connected_peer& pair, std::uint64_t seed) {
  std::vector<std::byte> note = echo_request(64, seed);
  pair.endpoint.async_send(note, [](boost::system::error_code error) { BOOST_TEST(!error); });
  std::vector<std::byte> echo(64);
  std::optional<std::size_t> got;
  pair.endpoint.async_receive(echo, [&](boost::system::error_code error, std::size_t bytes) {
    BOOST_REQUIRE_MESSAGE(!error, error.message());
    got = bytes;
  });
  run_until(pair.io, [&] { return got.has_value(); });
  check_same(std::span(echo).first(*got), std::span(note).subspan(1), "echo");
}

std::size_t open_descriptors() {
  std::size_t count = 0;
  for ([[maybe_unused]] auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) ++count;
  return count;
}

}  // namespace ferry::testing
