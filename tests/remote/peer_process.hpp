// The other process of the two-process tests: the test binary started again (/proc/self/exe) with
// FERRY_REMOTE_PEER set, which runs the peer (peer_process.cc) before Boost.Test's main. The peer
// connects to the test's listener, registers `bytes` of seeded random memory, sends its descriptor as
// its first message, then answers messages: 'E' + bytes: echo the bytes; 'Q': reply "q", and exit 0 once the test closes the connection.
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "ferry/remote.hpp"

namespace ferry::testing {

// The transports of both processes: FERRY_REMOTE_TLS, else loopback TCP, shared memory and self.
std::string remote_transports();

class peer_process {
 public:
  // What the peer registers and how its memory is filled; `kind` device needs the cuda backend.
  peer_process(unsigned short port, std::uint64_t seed, std::size_t bytes,
               remote::memory_kind kind = remote::memory_kind::host);
  ~peer_process();
  peer_process(const peer_process&) = delete;
  peer_process& operator=(const peer_process&) = delete;

  pid_t pid() const noexcept { return pid_; }
  void kill();
  // The peer's exit status (waits for it).
  int wait();

 private:
  pid_t pid_ = -1;
};

// Runs `io` until `done` says so; fails the test after `limit`.
void run_until(boost::asio::io_context& io, const std::function<bool()>& done,
               std::chrono::milliseconds limit = std::chrono::seconds(20));

// A worker, a peer process connected to it, and the descriptor of the peer's memory.
struct connected_peer {
  connected_peer(std::uint64_t seed, std::size_t bytes, remote::memory_kind kind = remote::memory_kind::host);

  boost::asio::io_context io;
  remote::worker worker{io.get_executor(), remote::worker_options{remote_transports()}};
  unsigned short port = worker.listen("127.0.0.1");
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

// A message echoed through the peer, byte for byte: the connection still works.
void check_echo(connected_peer& pair, std::uint64_t seed);

// Counts this process's open file descriptors (what a worker and its connections must give back).
std::size_t open_descriptors();

}  // namespace ferry::testing
