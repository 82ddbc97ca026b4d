// What the two-process tests share: a worker connected to a peer process (tests/support/remote_peer.hpp)
// and the descriptor of the peer's memory, an io_context run with a deadline, byte checks.
#pragma once

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "ferry/remote.hpp"
#include "tests/support/remote_peer.hpp"

namespace ferry::testing {

// Runs `io` until `done` says so; fails the test after `limit`.
void run_until(boost::asio::io_context& io, const std::function<bool()>& done,
               std::chrono::milliseconds limit = std::chrono::seconds(20));

// A worker, a peer process connected to it, and the descriptor of the peer's memory.
struct connected_peer {
  // `progress`: the mode of both workers, this process's and the peer's.
  connected_peer(std::uint64_t seed, std::size_t bytes, remote::memory_kind kind = remote::memory_kind::host,
                 remote::progress_mode progress = remote::progress_mode::events);

  boost::asio::io_context io;
  remote::worker worker;
  unsigned short port;
  peer_process peer;
  remote::endpoint endpoint;
  remote::descriptor memory;  // the peer's registered memory
};

// How much memory the tests' peers register.
inline constexpr std::size_t peer_bytes = 1 << 20;

// `count` seeded random bytes.
std::vector<std::byte> random_bytes(std::size_t count, std::uint64_t seed);

// Fails the test, naming the first differing byte, unless `got` and `expected` are equal.
void check_same(std::span<const std::byte> got, std::span<const std::byte> expected, const char* what);

// `size` seeded random bytes that the peer echoes (all but the first, which asks for the echo).
std::vector<std::byte> echo_request(std::size_t size, std::uint64_t seed);

// A message echoed through the peer, byte for byte: the connection still works.
void check_echo(connected_peer& pair, std::uint64_t seed);

// Counts this process's open file descriptors (what a worker and its connections must give back).
std::size_t open_descriptors();

}  // namespace ferry::testing
