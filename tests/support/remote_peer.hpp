// The other process of ferry::remote's two-process tests and benchmarks: the running binary started
// again (/proc/self/exe) with FERRY_REMOTE_PEER set, which runs the peer (remote_peer.cc, linked with
// alwayslink) before main. The peer connects to 127.0.0.1:port, registers `bytes` of seeded random
// memory (host, or device on the cuda backend), sends its descriptor as its first message, then
// answers messages: 'E' + bytes: echo the bytes; 'Q': reply "q", and exit 0 once the connection closes.
// FERRY_REMOTE_POLLING=1 makes the peer's worker poll (progress_mode::polling).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "ferry/remote.hpp"

namespace ferry::testing {

// The transports of both processes: FERRY_REMOTE_TLS (inherited by the peer), else loopback TCP,
// shared memory and self.
std::string remote_transports();

class peer_process {
 public:
  // Starts the peer; throws std::runtime_error when it cannot. `progress`: the peer's worker's mode
  // (polling sets FERRY_REMOTE_POLLING=1 for it; events leaves the inherited setting).
  peer_process(unsigned short port, std::uint64_t seed, std::size_t bytes,
               remote::memory_kind kind = remote::memory_kind::host,
               remote::progress_mode progress = remote::progress_mode::events);
  ~peer_process();
  peer_process(const peer_process&) = delete;
  peer_process& operator=(const peer_process&) = delete;

  pid_t pid() const noexcept { return pid_; }
  void kill();
  // The peer's exit status (waits for it).
  int wait();
  // The peer's exit status if it has ended, without waiting.
  std::optional<int> ended();

 private:
  pid_t pid_ = -1;
  std::optional<int> ended_;
};

}  // namespace ferry::testing
