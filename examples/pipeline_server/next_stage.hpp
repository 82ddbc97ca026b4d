// A server's link to its next stage (stage-to-stage mode: stage_protocol.hpp): one ferry::remote
// endpoint to the next server's stage port, the window it announced, and the slots of that window this
// server fills. A forward waits for a free slot, puts the transformed payload into it, sends the forward
// message and waits for the answer; answers arrive in any order on the one endpoint, and one reader
// matches them to their requests by id.
//
// A request's deadline applies to every wait (a slot, the put, the answer); an answer that comes after
// its request gave up is dropped, and its slot is reused only then, once the next stage has answered
// for it. When the next stage goes (its process ends, its connection drops, it shuts down) every
// pending forward ends at once with next_stage_failed, and so does every later one.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "examples/pipeline_server/deadline.hpp"
#include "examples/pipeline_server/gpu_stage.hpp"
#include "examples/pipeline_server/stage_protocol.hpp"
#include "ferry/remote.hpp"

namespace ferry::pipeline {

class next_stage : public std::enable_shared_from_this<next_stage> {
 public:
  struct settings {
    std::string host_port;  // HOST:PORT of the next stage's stage port
    std::size_t slots = 8;  // forwards in flight at most (fewer when the next stage's window has fewer)
    std::size_t max_payload_bytes = 0;  // this server's: every slot of the next stage must hold as much
    std::chrono::milliseconds connect_limit{5000};
  };

  // Connects through `worker` and receives the next stage's window, running `io` (the worker's, not yet
  // run by any other thread) on the calling thread until done or settings.connect_limit has passed.
  // Throws std::invalid_argument for a malformed address, std::runtime_error when the next stage cannot
  // be reached in time or announces a window it cannot use; the messages name --next-stage and its value.
  static std::shared_ptr<next_stage> connect(remote::worker& worker, boost::asio::io_context& io, settings s);

  // Starts the reader of answers on a strand of `io`. It ends when the endpoint fails or closes (the
  // worker's destruction closes it).
  void start(boost::asio::io_context& io);

  remote::memory_kind window_kind() const noexcept { return window_.kind(); }
  // Why forwards fail, or nothing while the next stage is there.
  std::optional<std::string> failure() const;

  // The first `bytes` bytes of `data` (the transformed payload: host memory for a host window, device
  // memory for a device window) through the next stage: a slot, the put, the forward message, the
  // answer, under `limit`. The outcome's checksum is the next stage's.
  boost::asio::awaitable<stage_outcome> forward(remote::local_bytes data, deadline& limit);

  struct occupancy {
    std::size_t slots = 0;
    std::size_t busy = 0;     // slots the next stage has not answered for
    std::size_t waiting = 0;  // forwards waiting for a slot
  };
  occupancy current() const;

  // Private, for connect (std::make_shared).
  next_stage(settings s, remote::endpoint e, remote::descriptor window, window_header header);

 private:
  // A forward waiting for a slot or an answer: woken through its timer, on its own executor.
  struct waiter {
    explicit waiter(boost::asio::any_io_executor executor) : timer(std::move(executor)) {}
    boost::asio::steady_timer timer;
    // Guarded by mutex_: what woke it.
    std::optional<std::uint32_t> slot;
    std::optional<stage_outcome> answer;
    bool woken = false;
    bool abandoned = false;  // the forward gave up: its answer is dropped
  };
  struct in_flight {
    std::uint32_t slot = 0;
    std::shared_ptr<waiter> waiting;
  };

  boost::asio::awaitable<void> read_answers();
  boost::asio::awaitable<std::optional<std::uint32_t>> take_slot(deadline& limit);
  boost::asio::awaitable<stage_outcome> await_answer(const std::shared_ptr<waiter>& me, deadline& limit);
  // Under mutex_: the slot to the longest waiter, or back to the free list.
  void free_slot(std::uint32_t slot);
  static void wake(const std::shared_ptr<waiter>& w);
  // Every pending and later forward fails with `why`.
  void fail_all(const std::string& why);
  stage_outcome failed_outcome() const;  // under mutex_

  const settings settings_;
  remote::endpoint endpoint_;
  const remote::descriptor window_;
  const window_header header_;
  const std::size_t slots_;
  std::atomic<std::uint64_t> next_id_{1};
  mutable std::mutex mutex_;
  std::vector<std::uint32_t> free_slots_;
  std::deque<std::shared_ptr<waiter>> slot_waiters_;
  std::map<std::uint64_t, in_flight> in_flight_;
  std::optional<std::string> failure_;
};

}  // namespace ferry::pipeline
