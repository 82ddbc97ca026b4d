// A gate that payloads pass in arrival order while what is inside, counted in units, stays within its
// size. The server has two:
// - large payloads take turns (one unit each). Connections share the network and the host's copies
//   evenly, so when many large requests are read, transformed and answered at once each moves at a share
//   of the link that shrinks with their number, and a request's time grows with its size times that
//   number: the largest wait longest. Let through a few at a time, in arrival order, each moves at a
//   larger share, a request's wait no longer grows with its size, and the small requests, which do not
//   pass the gate, share the link with a few large ones instead of dozens.
// - payloads whose buffers grow as their bytes arrive reserve the memory they may grow to (units are
//   bytes, the size is the memory budget): see request_loop's lease steps.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>

#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>

namespace ferry::pipeline {

class payload_gate;

// A place inside the gate, given back when destroyed; empty when the wait for one was given up.
class gate_pass {
 public:
  gate_pass() = default;
  gate_pass(payload_gate* gate, std::size_t units) noexcept : gate_(gate), units_(units) {}
  gate_pass(gate_pass&& other) noexcept
      : gate_(std::exchange(other.gate_, nullptr)), units_(std::exchange(other.units_, 0)) {}
  gate_pass& operator=(gate_pass&& other) noexcept;
  ~gate_pass();
  explicit operator bool() const noexcept { return gate_ != nullptr; }

 private:
  payload_gate* gate_ = nullptr;
  std::size_t units_ = 0;
};

class payload_gate {
 public:
  struct occupancy {
    std::size_t inside = 0;   // units held now
    std::size_t waiting = 0;  // requests waiting for a pass
    std::size_t size = 0;
  };

  // Throws std::invalid_argument when size is 0 (nothing could pass).
  explicit payload_gate(std::size_t size);
  payload_gate(const payload_gate&) = delete;
  payload_gate& operator=(const payload_gate&) = delete;

  // A pass of `units`, once they fit. Waits in arrival order; `cancel` (a terminal or partial
  // cancellation) ends the wait, and when `given_up` (optional) then answers true the coroutine gets no
  // pass (an empty one). Throws std::invalid_argument when `units` is 0 or more than the gate's size.
  boost::asio::awaitable<gate_pass> enter(boost::asio::cancellation_slot cancel, std::function<bool()> given_up = {},
                                          std::size_t units = 1);

  occupancy current() const;

 private:
  friend class gate_pass;
  struct waiter {
    explicit waiter(boost::asio::any_io_executor executor) : timer(std::move(executor)) {}
    boost::asio::steady_timer timer;
    std::size_t units = 1;
    bool admitted = false;  // set under mutex_ when its units were counted inside
  };

  void leave(std::size_t units) noexcept;
  // Under mutex_: admits the longest waiters, in order, while they fit, and wakes them.
  void admit_waiters();

  const std::size_t size_;
  mutable std::mutex mutex_;
  std::size_t inside_ = 0;
  std::deque<std::shared_ptr<waiter>> waiters_;
};

}  // namespace ferry::pipeline
